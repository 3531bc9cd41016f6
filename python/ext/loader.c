/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed's CPython extension: the loader type (LoaderBase; podfeed.Loader
 * in __init__.py checks the arguments and derives from it).  Opening,
 * next() without the GIL and with Ctrl-C, close, fork, state, the
 * report.  Batches and their arrays are batch.c's, the metrics' dict
 * metrics.c's. */
#include "ext_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common_internal.h"

/* next() waits for a batch in slices this long, looking at signals
 * between them, so that Ctrl-C stops a blocked next() within about one
 * slice (the promise is 100 ms). */
#define NEXT_SLICE_NS (20u * 1000u * 1000u)

static bool forked(const pf_ext_loader *lo)
{
	return lo->pid != getpid();
}

/* What report() and metrics() say after close(): the figures, the
 * tuning and the time series of l now (the series dropped when out of
 * memory: the report then has no series section). */
static void keep_last(pf_ext_loader *lo, pf_loader *l)
{
	pf_loader_get_metrics(l, &lo->last);
	pf_loader_tuning(l, &lo->last_tune);
	pf_series_free(lo->last_series);
	if (pf_loader_series(l, &lo->last_series) < 0)
		lo->last_series = NULL;
	lo->have_last = true;
}

/* Free the C loader once it is closed and unused.  In a forked child the
 * loader's threads do not exist: freeing would wait for them forever, so
 * the child only forgets it (the parent still owns it). */
static void maybe_free(pf_ext_loader *lo)
{
	pf_loader *l = lo->l;

	if (!l || !lo->closed || lo->busy || lo->held)
		return;
	lo->l = NULL;
	if (forked(lo))
		return;
	keep_last(lo, l);	/* report() after close() */
	Py_BEGIN_ALLOW_THREADS
	pf_loader_free(l);
	Py_END_ALLOW_THREADS
}

/* Forget what report() knew of the last open. */
static void report_forget(pf_ext_loader *lo)
{
	PyMem_Free(lo->features);
	PyMem_Free(lo->quarantine);
	pf_paths_free(lo->files, lo->nfiles);
	lo->features = lo->quarantine = NULL;
	lo->files = NULL;
	lo->nfiles = 0;
	pf_series_free(lo->last_series);
	lo->last_series = NULL;
	lo->have_last = false;
}

static char *mem_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = PyMem_Malloc(n);

	return d ? memcpy(d, s, n) : NULL;
}

void pf_ext_loader_slot_done(pf_ext_loader *lo, pf_batch *b)
{
	if (lo->l && !forked(lo))
		pf_loader_release(lo->l, b);
	lo->held--;
	maybe_free(lo);
}

static PyObject *loader_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	pf_ext_loader *lo = (pf_ext_loader *)type->tp_alloc(type, 0);

	(void)args;
	(void)kw;
	if (lo) {
		lo->pid = getpid();
		lo->closed = true;	/* until _open() */
	}
	return (PyObject *)lo;
}

static void loader_dealloc(pf_ext_loader *lo)
{
	PyObject_GC_UnTrack(lo);
	if (lo->weakrefs)
		PyObject_ClearWeakRefs((PyObject *)lo);
	/* Slots hold a reference: none is left, and no next() runs. */
	lo->closed = true;
	maybe_free(lo);
	report_forget(lo);
	Py_CLEAR(lo->names);
	Py_CLEAR(lo->dtypes);
	Py_CLEAR(lo->paths);
	Py_TYPE(lo)->tp_free((PyObject *)lo);
}

static int loader_traverse(pf_ext_loader *lo, visitproc visit, void *arg)
{
	Py_VISIT(lo->names);
	Py_VISIT(lo->dtypes);
	Py_VISIT(lo->paths);
	return 0;
}

/* The numpy type of an element type's name (pf_loader_feature_shape());
 * bfloat16, which numpy lacks, as its bits (uint16). */
static int npy_type(const char *elem)
{
	if (!strcmp(elem, "int32"))
		return NPY_INT32;
	if (!strcmp(elem, "int64"))
		return NPY_INT64;
	if (!strcmp(elem, "float32"))
		return NPY_FLOAT32;
	if (!strcmp(elem, "bfloat16"))
		return NPY_UINT16;
	return NPY_UINT8;
}

/* The C strings of a list of paths, str or bytes, as the file system
 * names them: a str is encoded as os.fsencode() does (a name os.listdir()
 * gave with bytes that are not UTF-8 goes back as those bytes), each
 * kept alive by `keep`. */
static const char **c_strings(PyObject *list, const char *what, size_t *n, PyObject *keep)
{
	Py_ssize_t len;
	const char **out;

	if (!PyList_Check(list))
		return PyErr_Format(PyExc_TypeError, "%s: expected a list", what), NULL;
	len = PyList_GET_SIZE(list);
	out = PyMem_Calloc((size_t)len + 1, sizeof(*out));
	if (!out)
		return (const char **)PyErr_NoMemory();
	for (Py_ssize_t i = 0; i < len; i++) {
		PyObject *it = PyList_GET_ITEM(list, i), *b = NULL;

		if (PyUnicode_Check(it))
			b = PyUnicode_EncodeFSDefault(it);
		else if (PyBytes_Check(it))
			b = Py_NewRef(it);
		else
			PyErr_Format(PyExc_TypeError, "%s: item %zd is not a str or bytes", what, i);
		if (b && strlen(PyBytes_AS_STRING(b)) != (size_t)PyBytes_GET_SIZE(b))
			PyErr_Format(PyExc_ValueError, "%s: item %zd holds a NUL byte", what, i);
		else if (b && PyList_Append(keep, b) == 0)
			out[i] = PyBytes_AS_STRING(b);
		Py_XDECREF(b);
		if (!out[i]) {
			PyMem_Free(out);
			return NULL;
		}
	}
	*n = (size_t)len;
	return out;
}

/* A mixture's files, source by source (two sources may name one
 * directory, which one expansion would refuse).  @return the count with
 * *out (pf_paths_free()), or -errno with err. */
static int expand_sources(const pf_loader_source *src, size_t n, char ***out, pf_error *err)
{
	char **all = NULL;
	int total = 0;

	for (size_t k = 0; k < n; k++) {
		char **fk = NULL, **grown;
		int nk = pf_paths_expand(src[k].paths, src[k].npaths, &fk, err);

		if (nk < 0) {
			pf_paths_free(all, (size_t)total);
			return nk;
		}
		grown = pf_realloc(all, ((size_t)total + (size_t)nk + 1) * sizeof(*all));
		if (!grown) {
			pf_paths_free(fk, (size_t)nk);
			pf_paths_free(all, (size_t)total);
			return -ENOMEM;
		}
		memcpy(grown + total, fk, (size_t)nk * sizeof(*grown));
		pf_free(fk);
		all = grown;
		total += nk;
	}
	*out = all;
	return total;
}

static PyObject *loader_open(pf_ext_loader *lo, PyObject *args, PyObject *kw)
{
	static char *names[] = {
		"paths", "features", "per_core_batch", "cores", "host_index",
		"num_hosts", "seed", "epochs", "max_steps", "shuffle", "shuffle_window",
		"remainder_wrap", "threads", "io_depth", "memory_bytes", "prefetch",
		"on_corrupt_skip", "max_corrupt", "quarantine", "resume",
		"verify_records", "direct_io", "io_backend", "io_faults", "shuffle_global",
		"pack_length", "pack_concat", "pack_pool", "sources", "mix", "mix_stop",
		"source_feature", "frame_cache", "mix_unit", "skip_steps", NULL,
	};
	pf_loader_config cfg = { 0 };
	PyObject *paths, *resume = Py_None;
	const char *features, *quarantine = NULL, *io_backend = NULL, *io_faults = NULL;
	const char **cpaths = NULL;
	PyObject *keep = NULL;	/* the paths' bytes (c_strings()) */
	unsigned long long seed = 0, max_steps = 0, memory = 0, max_corrupt = 0, skip_steps = 0;
	int shuffle = 0, wrap = 0, skip = 0, verify = 0, direct = 0, global = 0, concat = 0;
	int with_source = 0;
	unsigned mix = 0, mix_stop = 0, mix_unit = 0;
	PyObject *sources = Py_None;
	pf_loader_source *srcs = NULL;
	const char ***spaths = NULL;
	size_t nsrc = 0;
	pf_state_blob *blobs = NULL;
	Py_buffer *views = NULL;
	Py_ssize_t nviews = 0;
	const pf_spec *spec;
	pf_loader *l = NULL;
	char **files = NULL, *fcopy = NULL, *qcopy = NULL;
	uint64_t t0;
	pf_error err;
	PyObject *ret = NULL;
	int rc, nfiles = 0;

	if (lo->l || lo->held || lo->busy)
		return PyErr_Format(PyExc_RuntimeError,
				    "the loader is open or its batches are held; close it "
				    "and release them first");
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OsI|IIIKIKpIpIIKIpKzOppzzpIpIOIIpIIK", names,
					 &paths, &features, &cfg.per_core_batch,
					 &cfg.cores_per_host, &cfg.host_index,
					 &cfg.num_hosts, &seed, &cfg.epochs, &max_steps,
					 &shuffle, &cfg.shuffle_window, &wrap, &cfg.threads,
					 &cfg.io_depth, &memory, &cfg.prefetch, &skip,
					 &max_corrupt, &quarantine, &resume, &verify, &direct,
					 &io_backend, &io_faults, &global, &cfg.pack_length, &concat,
					 &cfg.pack_pool, &sources, &mix, &mix_stop, &with_source,
					 &cfg.frame_cache, &mix_unit, &skip_steps))
		return NULL;
	keep = PyList_New(0);
	if (!keep)
		return NULL;
	cpaths = c_strings(paths, "paths", &cfg.npaths, keep);
	if (!cpaths)
		goto out;
	/* A mixture: [(name, weight, [path, ...]), ...] (podfeed.Source
	 * checked them). */
	if (sources != Py_None) {
		if (!PyList_Check(sources)) {
			PyErr_SetString(PyExc_TypeError, "sources: expected a list");
			goto out;
		}
		nsrc = (size_t)PyList_GET_SIZE(sources);
		srcs = PyMem_Calloc(nsrc + 1, sizeof(*srcs));
		spaths = PyMem_Calloc(nsrc + 1, sizeof(*spaths));
		if (!srcs || !spaths) {
			PyErr_NoMemory();
			goto out;
		}
		for (size_t k = 0; k < nsrc; k++) {
			PyObject *t = PyList_GET_ITEM(sources, (Py_ssize_t)k), *plist;
			const char *name;
			double weight;

			if (!PyArg_ParseTuple(t, "sdO!", &name, &weight, &PyList_Type, &plist))
				goto out;
			spaths[k] = c_strings(plist, "sources", &srcs[k].npaths, keep);
			if (!spaths[k])
				goto out;
			srcs[k].name = name;
			srcs[k].weight = weight;
			srcs[k].paths = spaths[k];
		}
		cfg.sources = srcs;
		cfg.nsources = nsrc;
		cfg.mix = (pf_mix)mix;
		cfg.mix_stop = (pf_mix_stop)mix_stop;
		cfg.mix_unit = (pf_mix_unit)mix_unit;
		cfg.source_feature = with_source;
	}
	if (resume != Py_None) {
		if (!PyList_Check(resume)) {
			PyErr_SetString(PyExc_TypeError, "resume: expected a list of bytes");
			goto out;
		}
		nviews = PyList_GET_SIZE(resume);
		views = PyMem_Calloc((size_t)nviews + 1, sizeof(*views));
		blobs = PyMem_Calloc((size_t)nviews + 1, sizeof(*blobs));
		if (!views || !blobs) {
			PyErr_NoMemory();
			nviews = 0;
			goto out;
		}
		for (Py_ssize_t i = 0; i < nviews; i++) {
			if (PyObject_GetBuffer(PyList_GET_ITEM(resume, i), &views[i],
					       PyBUF_SIMPLE) < 0) {
				nviews = i;
				goto out;
			}
			blobs[i].data = views[i].buf;
			blobs[i].len = (size_t)views[i].len;
		}
		cfg.resume = blobs;
		cfg.nresume = (size_t)nviews;
	}
	cfg.paths = cpaths;
	cfg.features = features;
	cfg.seed = seed;
	cfg.max_steps = max_steps;
	cfg.skip_steps = skip_steps;
	cfg.shuffle = shuffle;
	cfg.shuffle_mode = global ? PF_SHUFFLE_GLOBAL : PF_SHUFFLE_WINDOW;
	cfg.remainder = wrap ? PF_REMAINDER_WRAP : PF_REMAINDER_DROP;
	cfg.memory_budget = (size_t)memory;
	cfg.on_corrupt = skip ? PF_CORRUPT_SKIP : PF_CORRUPT_FAIL;
	cfg.max_corrupt = max_corrupt;
	cfg.quarantine = quarantine;
	cfg.verify_records = verify;
	cfg.direct_io = direct;
	cfg.io_backend = io_backend;
	cfg.io_faults = io_faults;
	cfg.pack_mode = concat ? PF_PACK_CONCAT : PF_PACK_FIRST_FIT;

	pf_error_clear(&err);
	/* Opening reads every shard's index: no GIL needed, and it may take
	 * a while over a remote mount. */
	t0 = pf_now_ns();
	Py_BEGIN_ALLOW_THREADS
	rc = pf_loader_create(&l, &cfg, &err);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		pf_ext_raise(rc, &err, NULL);
		goto out;
	}
	/* The report's copies: the files the loader read (as loadbench
	 * counts them) and the strings cfg points to. */
	fcopy = mem_strdup(features);
	qcopy = quarantine ? mem_strdup(quarantine) : NULL;
	nfiles = nsrc ? expand_sources(srcs, nsrc, &files, &err)
		      : pf_paths_expand(cpaths, cfg.npaths, &files, &err);
	if (nfiles < 0 || !fcopy || (quarantine && !qcopy)) {
		if (nfiles < 0)
			pf_ext_raise(nfiles, &err, "paths");
		else
			PyErr_NoMemory();
		Py_BEGIN_ALLOW_THREADS
		pf_loader_free(l);
		Py_END_ALLOW_THREADS
		goto out;
	}
	spec = pf_loader_spec(l);
	Py_CLEAR(lo->names);
	Py_CLEAR(lo->dtypes);
	/* A mixture's batches may hold _source (int32) after the spec's; a
	 * packed mixture's spec has it (int32[L], each value's source). */
	for (uint32_t f = 0; f < spec->n && with_source; f++)
		if (!strcmp(spec->f[f].name, "_source"))
			with_source = 0;
	lo->names = PyTuple_New(spec->n + (nsrc && with_source));
	lo->dtypes = PyTuple_New(spec->n + (nsrc && with_source));
	if (lo->names && lo->dtypes && nsrc && with_source) {
		PyObject *name = PyUnicode_FromString("_source");
		PyObject *dt = (PyObject *)PyArray_DescrFromType(NPY_INT32);

		if (!name || !dt) {
			Py_XDECREF(name);
			Py_XDECREF(dt);
			Py_CLEAR(lo->names);
		} else {
			PyTuple_SET_ITEM(lo->names, spec->n, name);
			PyTuple_SET_ITEM(lo->dtypes, spec->n, dt);
			lo->fnd[spec->n] = 1;
			lo->fshape[spec->n][0] = 1;
			lo->fitem[spec->n] = sizeof(int32_t);
			lo->fkind[spec->n] = 'i';
		}
	}
	for (uint32_t f = 0; lo->names && lo->dtypes && f < spec->n; f++) {
		PyObject *name = PyUnicode_FromString(spec->f[f].name);
		const char *elem = "uint8";
		uint32_t item = 1;
		int nd = pf_loader_feature_shape(l, f, lo->fshape[f], &elem, &item);
		PyObject *dt = (PyObject *)PyArray_DescrFromType(npy_type(elem));

		lo->fnd[f] = (uint8_t)(nd > 0 ? nd : 1);
		lo->fitem[f] = (uint8_t)item;
		lo->fkind[f] = !strcmp(elem, "bfloat16") ? 'b' : !strcmp(elem, "float32") ? 'f'
			     : !strcmp(elem, "uint8") ? 'u' : 'i';

		if (!name || !dt) {
			Py_XDECREF(name);
			Py_XDECREF(dt);
			Py_CLEAR(lo->names);
			break;
		}
		PyTuple_SET_ITEM(lo->names, f, name);
		PyTuple_SET_ITEM(lo->dtypes, f, dt);
	}
	if (!lo->names || !lo->dtypes) {
		Py_BEGIN_ALLOW_THREADS
		pf_loader_free(l);
		Py_END_ALLOW_THREADS
		goto out;
	}
	report_forget(lo);
	lo->cfg = cfg;
	lo->cfg.paths = NULL;
	lo->cfg.npaths = 0;
	lo->cfg.resume = NULL;
	lo->cfg.nresume = 0;
	lo->cfg.sources = NULL;		/* the report takes the sources' figures */
	lo->cfg.nsources = 0;
	lo->cfg.features = lo->features = fcopy;
	lo->cfg.quarantine = lo->quarantine = qcopy;
	lo->cfg.io_backend = lo->cfg.io_faults = NULL;	/* the report reads neither */
	lo->files = files;
	lo->nfiles = (size_t)nfiles;
	fcopy = qcopy = NULL;
	files = NULL;
	lo->t_create_ns = t0;
	lo->t_first_ns = lo->t_last_ns = lo->t_end_ns = 0;
	lo->steady_records = lo->steady_batches = 0;
	lo->l = l;
	lo->pid = getpid();
	lo->cores = cfg.cores_per_host ? cfg.cores_per_host : 1;
	lo->per_core_batch = cfg.per_core_batch;
	/* PF_AUTO: what the loader starts with (2, or fewer where the
	 * budget cannot hold them; a raise later is not counted on). */
	if (cfg.prefetch) {
		lo->prefetch = cfg.prefetch;
	} else {
		pf_tuning tune;

		pf_loader_tuning(l, &tune);
		lo->prefetch = tune.prefetch.value < 2 ? tune.prefetch.value : 2;
	}
	lo->closed = false;
	lo->done = false;
	/* The loader may name its paths after create (a mixture's sources). */
	Py_XSETREF(lo->paths, keep);
	keep = NULL;
	ret = Py_NewRef(Py_None);
out:
	for (Py_ssize_t i = 0; i < nviews; i++)
		PyBuffer_Release(&views[i]);
	PyMem_Free(views);
	PyMem_Free(blobs);
	PyMem_Free(cpaths);
	for (size_t k = 0; spaths && k < nsrc; k++)
		PyMem_Free(spaths[k]);
	PyMem_Free(spaths);
	PyMem_Free(srcs);
	PyMem_Free(fcopy);
	PyMem_Free(qcopy);
	if (files)
		pf_paths_free(files, (size_t)nfiles);
	Py_XDECREF(keep);
	return ret;
}

/* The loader for a call that needs it open, in this process. */
static pf_loader *usable(pf_ext_loader *lo)
{
	if (forked(lo)) {
		PyErr_Format(PyExc_RuntimeError,
			     "this podfeed.Loader was created in process %ld and cannot be "
			     "used in process %ld, a child forked from it: the loader's "
			     "threads do not survive fork.  Create the loader in the child, "
			     "or keep it in the parent (torch: DataLoader(num_workers=0))",
			     (long)lo->pid, (long)getpid());
		return NULL;
	}
	if (lo->closed || !lo->l) {
		PyErr_SetString(PyExc_ValueError, "the loader is closed");
		return NULL;
	}
	if (lo->busy) {
		PyErr_SetString(PyExc_RuntimeError,
				"another thread is inside this loader's next(); a loader is "
				"read from one thread at a time");
		return NULL;
	}
	return lo->l;
}

static PyObject *loader_iternext(pf_ext_loader *lo)
{
	pf_loader *l = usable(lo);
	pf_batch *b = NULL;
	uint64_t t;
	int ret;

	if (!l)
		return NULL;
	if (lo->done)
		return NULL;
	if (lo->held > lo->prefetch) {
		char msg[512];

		snprintf(msg, sizeof(msg),
			 "%u batches of this loader are still held, the most it allows "
			 "(prefetch + 1 = %u): a batch is held until batch.release() (or "
			 "the end of `with batch:`) and until every array taken from it is "
			 "gone.  Release one, or copy what you keep (np.array(x)), or raise "
			 "prefetch.  The loader is unchanged and goes on when you do",
			 lo->held, lo->prefetch + 1);
		return pf_ext_raise_class("BatchLimitError", PyExc_RuntimeError, msg);
	}
	lo->busy = true;
	for (;;) {
		Py_BEGIN_ALLOW_THREADS
		ret = pf_loader_next_timed(l, &b, NEXT_SLICE_NS);
		Py_END_ALLOW_THREADS
		/* A loader failed by a read that timed out says -ETIMEDOUT
		 * too: its error tells it from the slice's end (it spun here,
		 * never raising, when a bucket's server stopped). */
		if (ret != -ETIMEDOUT || pf_loader_last_error(l))
			break;
		/* Ctrl-C (or any handler that raises) ends the wait; the
		 * batch on its way is handed out by the next call. */
		if (PyErr_CheckSignals() < 0) {
			lo->busy = false;
			maybe_free(lo);
			return NULL;
		}
	}
	lo->busy = false;
	if (lo->closed) {	/* closed by another thread meanwhile */
		if (ret == 1)
			pf_loader_release(l, b);
		maybe_free(lo);
		PyErr_SetString(PyExc_ValueError, "the loader was closed during next()");
		return NULL;
	}
	/* The report's timing, as loadbench takes it: the steady rate
	 * counts the batches after the first over the time from its return. */
	t = pf_now_ns();
	lo->t_end_ns = t;
	if (ret == 1) {
		if (!lo->t_first_ns) {
			lo->t_first_ns = t;
		} else {
			lo->steady_records += (uint64_t)b->per_core_batch * b->cores;
			lo->steady_batches++;
		}
		lo->t_last_ns = t;
	}
	if (ret == 0) {
		lo->done = true;
		return NULL;
	}
	if (ret < 0)
		return pf_ext_raise(ret, pf_loader_last_error(l), NULL);
	return pf_ext_batch_new(lo, b);
}

static PyObject *loader_close(pf_ext_loader *lo, PyObject *unused)
{
	(void)unused;
	/* report() after close() reads these, also while batches are held. */
	if (lo->l && !lo->closed && !lo->busy && !forked(lo))
		keep_last(lo, lo->l);
	lo->closed = true;
	maybe_free(lo);
	Py_RETURN_NONE;
}

/* The loader's report so far (pf_report, as loadbench prints it): text,
 * the JSON object's line, or the HTML page (format 0, 1, 2).  Its run is from the create to the last
 * next() return (now, before any). */
static PyObject *loader_report(pf_ext_loader *lo, PyObject *args)
{
	pf_loader_metrics m;
	pf_tuning tune;
	pf_run_info run;
	struct rusage ru;
	pf_report *r = NULL;
	pf_series *series = NULL;
	const pf_series *sr;
	pf_error err;
	PyObject *out = NULL;
	char *text;
	int how = 0, rc;
	pf_report_output fmt;
	int64_t n;

	if (!PyArg_ParseTuple(args, "i:_report", &how))
		return NULL;
	if (how < 0 || how > 2) {
		PyErr_Format(PyExc_ValueError, "_report: format %d is not 0, 1 or 2", how);
		return NULL;
	}
	fmt = how == 2 ? PF_REPORT_HTML : how == 1 ? PF_REPORT_JSON : PF_REPORT_TEXT;
	if (!lo->closed) {
		pf_loader *l = usable(lo);

		if (!l)
			return NULL;
		pf_loader_get_metrics(l, &m);
		pf_loader_tuning(l, &tune);
		if (pf_loader_series(l, &series) < 0)
			return PyErr_NoMemory();
		sr = series;
	} else if (lo->have_last) {
		m = lo->last;
		tune = lo->last_tune;
		sr = lo->last_series;
	} else {
		PyErr_SetString(PyExc_ValueError,
				"report: the loader is closed and kept no figures (it was "
				"closed during a next() still running, or never opened)");
		return NULL;
	}
	run = (pf_run_info){
		.seconds = (double)((lo->t_end_ns ? lo->t_end_ns : pf_now_ns()) -
				    lo->t_create_ns) * 1e-9,
		.first_batch_ms = lo->t_first_ns ?
			(double)(lo->t_first_ns - lo->t_create_ns) * 1e-6 : 0,
		.steady_seconds = lo->t_first_ns ?
			(double)(lo->t_last_ns - lo->t_first_ns) * 1e-9 : 0,
		.steady_records = lo->steady_records,
		.steady_batches = lo->steady_batches,
		.files = (const char *const *)lo->files,
		.nfiles = lo->nfiles,
		.tuning = &tune,
	};
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		run.peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024u;	/* KiB */
	pf_error_clear(&err);
	rc = pf_report_create(&r);
	if (rc == 0)
		rc = pf_report_add_loader(r, &lo->cfg, &m, &run, &err);
	if (rc == 0 && sr)
		rc = pf_report_add_series(r, sr, &err);
	if (rc == 0 && lo->l && pf_loader_sources(lo->l)) {
		size_t n = pf_loader_sources(lo->l);
		pf_source_metrics *sm = PyMem_Calloc(n, sizeof(*sm));

		if (!sm) {
			pf_series_free(series);
			pf_report_free(r);
			return PyErr_NoMemory();
		}
		for (size_t k = 0; k < n; k++)
			pf_loader_source_metrics(lo->l, k, &sm[k]);
		rc = pf_report_add_sources(r, sm, n, &err);
		PyMem_Free(sm);
	}
	pf_series_free(series);
	if (rc < 0) {
		pf_report_free(r);
		return pf_ext_raise(rc, err.code ? &err : NULL, "report");
	}
	/* Text names files as their bytes are (surrogateescape, as os
	 * does); JSON is UTF-8. */
	n = pf_report_format(r, fmt, NULL, 0);
	if (n < 0) {
		pf_report_free(r);
		return pf_ext_raise((int)n, NULL, "report");
	}
	text = PyMem_Malloc((size_t)n + 1);
	if (text) {
		pf_report_format(r, fmt, text, (size_t)n + 1);
		out = PyUnicode_DecodeUTF8(text, (Py_ssize_t)n, "surrogateescape");
	} else {
		PyErr_NoMemory();
	}
	PyMem_Free(text);
	pf_report_free(r);
	return out;
}

static PyObject *loader_save_state(pf_ext_loader *lo, PyObject *unused)
{
	pf_loader *l = usable(lo);
	PyObject *out;
	int64_t n;

	(void)unused;
	if (!l)
		return NULL;
	n = pf_loader_save_state(l, NULL, 0);
	if (n < 0)
		return pf_ext_raise((int)n, NULL, "state_dict");
	out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
	if (!out)
		return NULL;
	n = pf_loader_save_state(l, PyBytes_AS_STRING(out), (size_t)n);
	if (n < 0) {
		Py_DECREF(out);
		return pf_ext_raise((int)n, NULL, "state_dict");
	}
	return out;
}

/* _records_of(step) -> [(epoch, step_in_epoch, core, row, source, file,
 * record, segment, at, from, count), ...]: pf_loader_records_of(), each
 * file named by its path. */
static PyObject *loader_records_of(pf_ext_loader *lo, PyObject *args)
{
	pf_loader *l = usable(lo);
	unsigned long long step;
	pf_record_ref *refs = NULL;
	PyObject *out = NULL;
	pf_error err;
	int64_t n, m = 0;

	if (!l || !PyArg_ParseTuple(args, "K", &step))
		return NULL;
	pf_error_clear(&err);
	/* Packed steps of long records take a while: no GIL. */
	Py_BEGIN_ALLOW_THREADS
	n = pf_loader_records_of(l, step, NULL, 0, &err);
	if (n > 0 && (refs = PyMem_RawCalloc((size_t)n, sizeof(*refs))) != NULL)
		m = pf_loader_records_of(l, step, refs, (size_t)n, &err);
	Py_END_ALLOW_THREADS
	if (n < 0 || m < 0) {
		PyMem_RawFree(refs);
		return pf_ext_raise((int)(n < 0 ? n : m), &err, "records_of");
	}
	if (n > 0 && !refs)
		return PyErr_NoMemory();
	out = PyList_New((Py_ssize_t)m);
	for (int64_t i = 0; out && i < m; i++) {
		const pf_record_ref *r = &refs[i];
		const char *path = pf_loader_file(l, r->source, r->file);
		PyObject *t = Py_BuildValue("(IKIIIO&KIIII)", r->epoch, (unsigned long long)r->step,
					    r->core, r->row, r->source, PyUnicode_DecodeFSDefault,
					    path ? path : "", (unsigned long long)r->record,
					    r->segment, r->at, r->from, r->count);

		if (!t) {
			Py_CLEAR(out);
			break;
		}
		PyList_SET_ITEM(out, (Py_ssize_t)i, t);
	}
	PyMem_RawFree(refs);
	return out;
}

static PyObject *loader_metrics(pf_ext_loader *lo, PyObject *unused)
{
	pf_loader *l = usable(lo);

	(void)unused;
	return l ? pf_ext_metrics_dict(l) : NULL;
}

static PyObject *get_steps_per_epoch(pf_ext_loader *lo, void *unused)
{
	pf_loader *l = usable(lo);

	(void)unused;
	return l ? PyLong_FromUnsignedLongLong(pf_loader_steps_per_epoch(l)) : NULL;
}

static PyObject *get_spec(pf_ext_loader *lo, void *unused)
{
	pf_loader *l = usable(lo);
	char text[8192];

	(void)unused;
	if (!l)
		return NULL;
	pf_spec_format(pf_loader_spec(l), text, sizeof(text));
	return PyUnicode_FromString(text);
}

static PyObject *get_names(pf_ext_loader *lo, void *unused)
{
	(void)unused;
	if (!lo->names)
		Py_RETURN_NONE;
	return Py_NewRef(lo->names);
}

static PyObject *get_closed(pf_ext_loader *lo, void *unused)
{
	(void)unused;
	return PyBool_FromLong(lo->closed);
}

static PyObject *get_held(pf_ext_loader *lo, void *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLong(lo->held);
}

static PyObject *get_prefetch(pf_ext_loader *lo, void *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLong(lo->prefetch);
}

static PyObject *get_shape(pf_ext_loader *lo, void *unused)
{
	(void)unused;
	return Py_BuildValue("(II)", lo->cores, lo->per_core_batch);
}

static PyMethodDef loader_methods[] = {
	{ "_open", (PyCFunction)(void (*)(void))loader_open, METH_VARARGS | METH_KEYWORDS,
	  "Open the C loader (podfeed.Loader calls this with checked arguments)." },
	{ "close", (PyCFunction)loader_close, METH_NOARGS,
	  "close($self, /)\n--\n\n"
	  "Stop the loader's threads; its memory goes once no batch of it is\n"
	  "held (arrays alive stay valid).  Calling it again does nothing;\n"
	  "the end of `with podfeed.Loader(...)` calls it." },
	{ "_save_state", (PyCFunction)loader_save_state, METH_NOARGS,
	  "_save_state($self, /)\n--\n\nThe C state blob (bytes)." },
	{ "_records_of", (PyCFunction)loader_records_of, METH_VARARGS,
	  "_records_of($self, step, /)\n--\n\nThe records of a global step, as tuples "
	  "(podfeed.Loader.records_of() makes them dicts)." },
	{ "_report", (PyCFunction)loader_report, METH_VARARGS,
	  "_report($self, format, /)\n--\n\nThe report as text (0), its JSON line "
	  "(1; podfeed.Loader.report() parses it) or its HTML page (2)." },
	{ "metrics", (PyCFunction)loader_metrics, METH_NOARGS,
	  "metrics($self, /)\n--\n\n"
	  "Where the time and the data went, as a dict (the C pf_loader_metrics):\n"
	  "  records, steps       delivered to this process so far\n"
	  "  records_per_epoch, steps_per_epoch\n"
	  "  remainder_dropped, remainder_wrapped\n"
	  "                       records dropped to keep every host's steps\n"
	  "                       equal / repeated to fill the last step\n"
	  "  bytes_read           bytes read from files (compressed)\n"
	  "  bytes_decompressed   TFRecord bytes they gave\n"
	  "  io_requests          reads the I/O engine completed\n"
	  "  io, decode           {'busy_ns', 'wait_ns'} of the reader and of\n"
	  "                       the decode threads (decode_threads of them)\n"
	  "  next_wait_ns         time next() waited for a batch\n"
	  "  next_hist_log2_us    next() latencies: count per power of 2 in us\n"
	  "  queue_fill_sum       batches ready, summed over next() calls\n"
	  "  memory_bytes         the pools allocated from memory_mib\n"
	  "  io_backend           'io_uring' or 'pread'; files_direct: O_DIRECT files\n"
	  "  io_retries, io_faults, io_timeouts, io_short_reads\n"
	  "                       reads retried, changed by io_faults, timed out,\n"
	  "                       short\n"
	  "  corrupt_drops, corrupt_records, holes\n"
	  "                       on_corrupt='skip': units dropped, the records\n"
	  "                       they held (None: unknown, some unit's records\n"
	  "                       could not be counted), rows handed out empty\n"
	  "  corrupt_records_known, corrupt_unknown, corrupt_bytes\n"
	  "                       the records known lost, the units of unknown\n"
	  "                       size, the bytes of the dropped units\n"
	  "  series               the time series: {column: [value per point]},\n"
	  "                       t_s (seconds since the start), records, steps,\n"
	  "                       bytes_read, bytes_decompressed, rss_bytes,\n"
	  "                       stage.NAME.busy_s and .threads (io, decode,\n"
	  "                       consumer_wait), region.LABEL.bytes: a point\n"
	  "                       every 20 ms of next() calls, at most 240\n"
	  "                       (docs/api.md, \"The time series\")\n"
	  "  pack_rows, pack_slots, pack_values, pack_segments\n"
	  "                       pack_length: packed rows delivered, their value\n"
	  "                       slots and the records' values in them\n"
	  "                       (efficiency: values / slots), segments in them\n"
	  "  pack_truncated_records, pack_truncated_values, pack_empty_records,\n"
	  "  pack_rows_dropped    records cut at L and the values cut, records\n"
	  "                       of no values, rows past an epoch's last step\n"
	  "  pack_lengths_from_index  records whose packed lengths the shards'\n"
	  "                       indexes told (0: read from the records)\n"
	  "  pack_lengths_tails, pack_lengths_files, pack_lengths_exchanged\n"
	  "                       planning the packing: index tails and files\n"
	  "                       this host read for the lengths, and the bytes\n"
	  "                       of lengths the pod's hosts exchanged\n"
	  "  pack_direct_records  records the decode threads wrote straight into\n"
	  "                       their packed rows (the rest: the consumer's)\n"
	  "  pack_dropped_records, pack_dropped_tokens  the records and the\n"
	  "                       tokens (the first packed feature's values) in\n"
	  "                       the rows dropped past an epoch's last step\n"
	  "  images, images_upscaled  image features: images decoded, and those\n"
	  "                       whose box was smaller than the output\n"
	  "  image_decode_ns      the decode threads' time on images\n"
	  "  image_scratch_bytes  the image scratch the threads hold\n"
	  "  frame_cache_entries, frame_cache_bytes  shuffle='global': the frames\n"
	  "                       its cache holds (their bytes are in memory_bytes)\n"
	  "  frame_cache_hits, frame_cache_loads, frame_cache_evictions,\n"
	  "  frame_cache_bypassed slices served from it, frames read into it,\n"
	  "                       replaced, and slices read past it\n"
	  "  skipped_steps, skipped_from, skipped_records, skipped_tokens\n"
	  "                       skip_steps: the steps skipped, from which\n"
	  "                       global step, the records their batches held\n"
	  "                       (packed: the pieces of records in their rows,\n"
	  "                       and tokens the values of those rows)\n"
	  "  shuffle_window       records per shuffle block in force (0: no\n"
	  "                       shuffle; a default the budget cannot hold is\n"
	  "                       fitted to it: report() says why)\n"
	  "  window_as_read       1: the window holds records as read (image\n"
	  "                       features, decoded once in their step), 0: as\n"
	  "                       decoded rows\n"
	  "  window_bytes, window_peak_bytes  the window's memory, and the most\n"
	  "                       of it its records took at once (as read)\n"
	  "  fitted               defaults cut to memory_mib, a bit each: 1 the\n"
	  "                       shuffle window, 2 prefetch, 4 threads, 8 the\n"
	  "                       frame cache" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef loader_getset[] = {
	{ "steps_per_epoch", (getter)get_steps_per_epoch, NULL,
	  "Steps every host yields per epoch.", NULL },
	{ "spec", (getter)get_spec, NULL, "The canonical feature spec.", NULL },
	{ "features", (getter)get_names, NULL, "Feature names, in spec order.", NULL },
	{ "closed", (getter)get_closed, NULL, "Whether close() was called.", NULL },
	{ "held", (getter)get_held, NULL,
	  "Batches held now (not released, or with arrays alive).", NULL },
	{ "prefetch", (getter)get_prefetch, NULL,
	  "Batches made ahead; at most prefetch + 1 may be held.", NULL },
	{ "_shape", (getter)get_shape, NULL, "(cores, per_core_batch)", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyObject *loader_iter(PyObject *self)
{
	return Py_NewRef(self);
}

/* len(loader): the steps it still has (pf_loader_steps_left()), so that
 * a progress bar (tqdm) knows its total.  Any thread. */
static Py_ssize_t loader_len(pf_ext_loader *lo)
{
	uint64_t left;

	if (forked(lo) || lo->closed || !lo->l) {
		PyErr_SetString(PyExc_ValueError, forked(lo) ?
				"len: this podfeed.Loader belongs to the process that created it" :
				"len: the loader is closed");
		return -1;
	}
	left = pf_loader_steps_left(lo->l);
	if (left > (uint64_t)PY_SSIZE_T_MAX) {
		PyErr_SetString(PyExc_OverflowError, "len: the loader's steps do not fit");
		return -1;
	}
	return (Py_ssize_t)left;
}

/* A loader is true whatever is left (len() alone would make a finished
 * one false). */
static int loader_bool(pf_ext_loader *lo)
{
	(void)lo;
	return 1;
}

static PySequenceMethods loader_sequence = {
	.sq_length = (lenfunc)loader_len,
};

static PyNumberMethods loader_number = {
	.nb_bool = (inquiry)loader_bool,
};

PyTypeObject pf_ext_loader_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "podfeed._podfeed.LoaderBase",
	.tp_basicsize = sizeof(pf_ext_loader),
	.tp_dealloc = (destructor)loader_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "The C loader; use podfeed.Loader.",
	.tp_traverse = (traverseproc)loader_traverse,
	.tp_weaklistoffset = offsetof(pf_ext_loader, weakrefs),
	.tp_iter = loader_iter,
	.tp_iternext = (iternextfunc)loader_iternext,
	.tp_as_sequence = &loader_sequence,
	.tp_as_number = &loader_number,
	.tp_methods = loader_methods,
	.tp_getset = loader_getset,
	.tp_new = loader_new,
};
