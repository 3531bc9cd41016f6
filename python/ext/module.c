/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed's CPython extension: the module, C errors as exceptions, and the
 * functions that are not a loader's (spec, state, topology, scaling plan).
 * The Loader is in loader.c, batches and their arrays in batch.c. */
#define PF_EXT_IMPORT_ARRAY
#include "ext_internal.h"

#include <errno.h>
#include <string.h>

#include "pf_host.h"

PyObject *pf_ext_error_classes;

static PyObject *error_class(const char *name, PyObject *fallback)
{
	PyObject *cls = pf_ext_error_classes ?
		PyDict_GetItemString(pf_ext_error_classes, name) : NULL;

	return cls ? cls : fallback;
}

PyObject *pf_ext_raise_class(const char *name, PyObject *fallback, const char *msg)
{
	PyErr_SetString(error_class(name, fallback), msg);
	return NULL;
}

/* Which class a C error code becomes.  -ESTALE is two things: a state of
 * another dataset (no file: a configuration refused) and a shard that
 * changed since it was planned (a file named: its data is not what was
 * planned). */
static const char *class_of(int code, const pf_error *err)
{
	switch (code) {
	case -ESTALE:
		return err && err->file[0] ? "DataError" : "ConfigError";
	case -EBADMSG:
	case -EFBIG:
	case -EPROTONOSUPPORT:
	case -ENOMSG:
		return "DataError";
	case -ENOENT:
	case -ENOTDIR:
	case -EACCES:
	case -EISDIR:
		return "FileError";
	case -EINVAL:
	case -ERANGE:
		return "ConfigError";
	case -EBUSY:
		return "BatchLimitError";
	default:
		return "Error";
	}
}

static int set_attr(PyObject *o, const char *name, PyObject *v)
{
	int ret;

	if (!v)
		return -1;
	ret = PyObject_SetAttrString(o, name, v);
	Py_DECREF(v);
	return ret;
}

static PyObject *int_or_none(int64_t v)
{
	if (v < 0)
		Py_RETURN_NONE;
	return PyLong_FromLongLong(v);
}

PyObject *pf_ext_raise(int code, const pf_error *err, const char *what)
{
	char line[8192];
	PyObject *cls, *msg, *exc;
	const char *kind = NULL;

	if (err && err->code)
		code = err->code;
	if (code == -ENOMEM && !(err && err->msg[0]))
		return PyErr_NoMemory();
	if (err && (err->msg[0] || err->file[0]))
		pf_error_format(err, line, sizeof(line));
	else
		snprintf(line, sizeof(line), "%s", pf_strerror(code));
	cls = error_class(class_of(code, err), PyExc_RuntimeError);
	/* A message may quote bytes of the data (a feature's name in a
	 * damaged record): not valid UTF-8, escaped, never a
	 * UnicodeDecodeError instead of the error. */
	msg = PyUnicode_DecodeUTF8(line, (Py_ssize_t)strlen(line), "backslashreplace");
	if (msg && what) {
		PyObject *full = PyUnicode_FromFormat("%s: %U", what, msg);

		Py_DECREF(msg);
		msg = full;
	}
	if (!msg)
		return NULL;
	exc = PyObject_CallOneArg(cls, msg);
	Py_DECREF(msg);
	if (!exc)
		return NULL;
	if (err) {
		kind = err->offset_kind == PF_OFFSET_FILE ? "file"
		     : err->offset_kind == PF_OFFSET_STREAM ? "stream" : NULL;
	}
	if (set_attr(exc, "errno", PyLong_FromLong(-code)) < 0 ||
	    set_attr(exc, "file", err && err->file[0] ? PyUnicode_DecodeFSDefault(err->file)
						      : Py_NewRef(Py_None)) < 0 ||
	    set_attr(exc, "offset", kind ? PyLong_FromUnsignedLongLong(err->offset)
					 : Py_NewRef(Py_None)) < 0 ||
	    set_attr(exc, "offset_kind", kind ? PyUnicode_FromString(kind)
					      : Py_NewRef(Py_None)) < 0 ||
	    set_attr(exc, "frame", int_or_none(err ? err->frame : -1)) < 0 ||
	    set_attr(exc, "record", int_or_none(err ? err->record : -1)) < 0 ||
	    set_attr(exc, "cause", PyUnicode_DecodeUTF8(err && err->msg[0] ? err->msg
							: pf_strerror(code),
							(Py_ssize_t)strlen(err && err->msg[0] ? err->msg
							: pf_strerror(code)), "replace")) < 0) {
		Py_DECREF(exc);
		return NULL;
	}
	PyErr_SetObject(cls, exc);
	Py_DECREF(exc);
	return NULL;
}

/* _register_errors(dict): the exception classes, by name. */
static PyObject *register_errors(PyObject *self, PyObject *arg)
{
	(void)self;
	if (!PyDict_Check(arg))
		return PyErr_Format(PyExc_TypeError, "expected a dict");
	Py_XSETREF(pf_ext_error_classes, Py_NewRef(arg));
	Py_RETURN_NONE;
}

/* parse_spec(text) -> [{name, dtype, len, pad, default}, ...] */
static PyObject *parse_spec(PyObject *self, PyObject *args)
{
	const char *text;
	pf_spec *spec;
	pf_error err;
	PyObject *out = NULL;
	int ret;

	(void)self;
	if (!PyArg_ParseTuple(args, "s", &text))
		return NULL;
	spec = PyMem_Malloc(sizeof(*spec));
	if (!spec)
		return PyErr_NoMemory();
	pf_error_clear(&err);
	ret = pf_spec_parse(spec, text, &err);
	if (ret < 0) {
		pf_ext_raise(ret, &err, "features");
		goto out;
	}
	out = PyList_New(spec->n);
	for (uint32_t i = 0; out && i < spec->n; i++) {
		const pf_feature_spec *f = &spec->f[i];
		PyObject *t = Py_BuildValue("{sssssIsdsN}", "name", f->name,
					    "dtype", pf_dtype_name(f->dtype), "len", f->len,
					    "pad", f->pad, "default",
					    f->has_default ? PyFloat_FromDouble(f->default_value)
							   : Py_NewRef(Py_None));
		if (!t) {
			Py_CLEAR(out);
			break;
		}
		PyList_SET_ITEM(out, i, t);
	}
out:
	PyMem_Free(spec);
	return out;
}

/* _inspect_state(blob) -> dict */
static PyObject *inspect_state(PyObject *self, PyObject *args)
{
	Py_buffer blob;
	pf_state_info info;
	pf_error err;
	int ret;

	(void)self;
	if (!PyArg_ParseTuple(args, "y*", &blob))
		return NULL;
	pf_error_clear(&err);
	ret = pf_state_inspect(blob.buf, (size_t)blob.len, &info, &err);
	PyBuffer_Release(&blob);
	if (ret < 0)
		return pf_ext_raise(ret, &err, "state");
	return Py_BuildValue("{sIsIsIsIsIsOsKsKsKsKsI}",
			     "host_index", info.host_index, "num_hosts", info.num_hosts,
			     "cores", info.cores_per_host,
			     "per_core_batch", info.per_core_batch, "epoch", info.epoch,
			     "fresh", info.fresh ? Py_True : Py_False,
			     "step_in_epoch", (unsigned long long)info.step_in_epoch,
			     "global_step", (unsigned long long)info.global_step,
			     "records_left", (unsigned long long)info.records_left,
			     "dataset_records", (unsigned long long)info.dataset_records,
			     "pack_length", info.pack_length);
}

/* describe_state_blob(blob, json) -> str: pf_state_describe(), as text
 * (json false) or its JSON object's text. */
static PyObject *describe_state(PyObject *self, PyObject *args)
{
	pf_report_output fmt;
	PyObject *out = NULL;
	Py_buffer blob;
	char *text;
	pf_error err;
	int64_t n;
	int json;

	(void)self;
	if (!PyArg_ParseTuple(args, "y*p", &blob, &json))
		return NULL;
	fmt = json ? PF_REPORT_JSON : PF_REPORT_TEXT;
	pf_error_clear(&err);
	n = pf_state_describe(blob.buf, (size_t)blob.len, fmt, NULL, 0, &err);
	text = n >= 0 ? PyMem_Malloc((size_t)n + 1) : NULL;
	if (text)
		n = pf_state_describe(blob.buf, (size_t)blob.len, fmt, text, (size_t)n + 1, &err);
	PyBuffer_Release(&blob);
	if (n < 0) {
		PyMem_Free(text);
		return pf_ext_raise((int)n, &err, "state");
	}
	if (!text)
		return PyErr_NoMemory();
	out = PyUnicode_DecodeUTF8(text, (Py_ssize_t)n, "surrogateescape");
	PyMem_Free(text);
	return out;
}

/* _topology(host_index or -1, num_hosts or -1) -> (index, count, source,
 * text): the C library's reading of flags and the environment. */
static PyObject *topology(PyObject *self, PyObject *args)
{
	long long index, count;
	pf_topology_flags flags = { 0 };
	pf_host_topology t;
	pf_error err;
	char text[256];
	int ret;

	(void)self;
	if (!PyArg_ParseTuple(args, "LL", &index, &count))
		return NULL;
	if (index >= 0) {
		flags.has_host_index = true;
		flags.host_index = (uint32_t)index;
	}
	if (count >= 0) {
		flags.has_num_hosts = true;
		flags.num_hosts = (uint32_t)count;
	}
	pf_error_clear(&err);
	ret = pf_topology_detect(&t, &flags, NULL, NULL, &err);
	if (ret < 0)
		return pf_ext_raise(ret, &err, "host identity");
	pf_topology_format(&t, text, sizeof(text));
	return Py_BuildValue("(IIss)", t.host_index, t.num_hosts,
			     pf_topology_source_name(t.source), text);
}

/* d.update(x), x given away (NULL: a failure already raised). */
static int merge(PyObject *d, PyObject *x)
{
	int ret = x ? PyDict_Update(d, x) : -1;

	Py_XDECREF(x);
	return ret;
}

/* _plan(per_core_batch, cores, hosts, ref_global_batch, ref_steps, records,
 *       epochs, remainder_wrap, ref_lr, rule, ref_warmup_steps) -> dict */
static PyObject *plan(PyObject *self, PyObject *args)
{
	pf_scaling_input in = { 0 };
	pf_scaling_plan p;
	pf_error err;
	const char *rule = "none";
	int wrap = 0, ret;
	PyObject *d, *rules;

	(void)self;
	if (!PyArg_ParseTuple(args, "KKKKKKKpdsK", &in.per_core_batch, &in.cores,
			      &in.hosts, &in.ref_global_batch, &in.ref_steps, &in.records,
			      &in.epochs, &wrap, &in.ref_lr, &rule, &in.ref_warmup_steps))
		return NULL;
	in.remainder_wrap = wrap;
	if (pf_lr_rule_parse(rule, &in.rule) < 0)
		return PyErr_Format(PyExc_ValueError,
				    "rule: expected 'none', 'linear' or 'sqrt', not %R",
				    PyTuple_GET_ITEM(args, 9));
	pf_error_clear(&err);
	ret = pf_scaling_plan_compute(&p, &in, &err);
	if (ret < 0)
		return pf_ext_raise(ret, &err, "plan");
	d = Py_BuildValue("{sssKsKsKsdsKsKsK}",
			  "mode", p.mode == PF_SCALING_STEPS ? "steps"
				: p.mode == PF_SCALING_EPOCHS ? "epochs" : "batch",
			  "host_batch", (unsigned long long)p.host_batch,
			  "global_batch", (unsigned long long)p.global_batch,
			  "total_cores", (unsigned long long)p.total_cores,
			  "batch_ratio", p.batch_ratio,
			  "ref_cores", (unsigned long long)p.ref_cores,
			  "steps", (unsigned long long)p.steps,
			  "examples", (unsigned long long)p.examples);
	if (!d)
		return NULL;
	if (p.mode == PF_SCALING_STEPS) {
		PyObject *x = Py_BuildValue("{sKsdsOsK}",
			"ref_examples", (unsigned long long)p.ref_examples,
			"steps_exact", p.steps_exact,
			"steps_rounded", p.steps_rounded ? Py_True : Py_False,
			"extra_examples", (unsigned long long)p.extra_examples);
		if (merge(d, x) < 0)
			goto fail_x;
	}
	if (p.mode == PF_SCALING_EPOCHS) {
		PyObject *x = Py_BuildValue("{sKsKsKsKsK}",
			"steps_per_epoch", (unsigned long long)p.steps_per_epoch,
			"dropped_per_epoch", (unsigned long long)p.dropped_per_epoch,
			"repeated_per_epoch", (unsigned long long)p.repeated_per_epoch,
			"dropped", (unsigned long long)p.dropped,
			"repeated", (unsigned long long)p.repeated);
		if (merge(d, x) < 0)
			goto fail_x;
	}
	if (p.has_lr) {
		rules = Py_BuildValue("{sdsdsd}", "none", p.lr_by_rule[PF_LR_NONE],
				      "linear", p.lr_by_rule[PF_LR_LINEAR],
				      "sqrt", p.lr_by_rule[PF_LR_SQRT]);
		PyObject *x = rules ? Py_BuildValue("{sdsssNsK}", "lr", p.lr,
			"rule", pf_lr_rule_name(p.rule), "lr_by_rule", rules,
			"warmup_steps", (unsigned long long)p.warmup_steps) : NULL;
		if (merge(d, x) < 0)
			goto fail_x;
	}
	return d;
fail_x:
	Py_DECREF(d);
	return NULL;
}

static PyMethodDef module_methods[] = {
	{ "_register_errors", register_errors, METH_O,
	  "Register the exception classes (a dict name -> class)." },
	{ "parse_spec", parse_spec, METH_VARARGS,
	  "parse_spec($module, text, /)\n--\n\n"
	  "[{'name', 'dtype', 'len', 'pad', 'default'}, ...] (podfeed.parse_spec)." },
	{ "inspect_state_blob", inspect_state, METH_VARARGS,
	  "inspect_state_blob(blob) -> dict: what a C state blob holds." },
	{ "describe_state_blob", describe_state, METH_VARARGS,
	  "describe_state_blob(blob, json) -> str: a state's readable fields, as lines "
	  "for a person or a JSON object's text (podfeed.describe_state())." },
	{ "topology", topology, METH_VARARGS,
	  "topology(host_index, num_hosts) -> (index, count, source, text)\n\n"
	  "The C library's reading of this host's identity (-1: not given)." },
	{ "scaling_plan", plan, METH_VARARGS,
	  "The C scaling plan (podfeed.plan() is the documented way in)." },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT,
	.m_name = "podfeed._podfeed",
	.m_doc = "podfeed's C extension: the loader and its batches over the C API "
		 "(loader/podfeed.h).  Use the podfeed package, not this module.",
	.m_size = -1,
	.m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__podfeed(void);
PyMODINIT_FUNC PyInit__podfeed(void)
{
	PyObject *m;

	import_array();
	if (PyType_Ready(&pf_ext_loader_type) < 0 || PyType_Ready(&pf_ext_slot_type) < 0 ||
	    PyType_Ready(&pf_ext_batch_type) < 0 || PyType_Ready(&pf_ext_tensor_type) < 0)
		return NULL;
	m = PyModule_Create(&module_def);
	if (!m)
		return NULL;
	if (PyModule_AddType(m, &pf_ext_loader_type) < 0 ||
	    PyModule_AddType(m, &pf_ext_batch_type) < 0 ||
	    PyModule_AddType(m, &pf_ext_tensor_type) < 0 ||
	    PyModule_AddIntConstant(m, "PREFETCH_DEFAULT", 2) < 0 ||
	    PyModule_AddStringConstant(m, "version", pf_version_string()) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
