/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench: run the loader over shards and report where the time goes,
 * beside pure read and pure decompress passes over the same files: the
 * runs and the progress line (the options: loadbench_options.c).  The report is the library's
 * (pf_report); the passes are baseline.c's, the subcommands plan.c,
 * ladder.c and regions_bench.c. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common_internal.h"
#include "io_internal.h"
#include "loadbench.h"

#define PROGRESS_NS 250000000ull	/* redraw at most 4 times a second */

static double median(const double *v, unsigned n)
{
	double s[MAX_REPEAT];

	/* A copy: v's order says which run is which. */
	memcpy(s, v, n * sizeof(*v));
	return cli_median(s, n);
}

/* ------------------------------------------------------------------ */
/* Peak RSS                                                             */

/* Writing 5 to clear_refs resets VmHWM (Linux >= 4.0), so the peak we
 * report is the loader's, not an earlier pass's. */
static void peak_rss_reset(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (write(fd, "5", 1) < 0) {
			/* Not allowed here: the peak then covers the whole run. */
		}
		close(fd);
	}
}

static uint64_t peak_rss_bytes(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	unsigned long long kb = 0;
	struct rusage ru;

	if (f) {
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
				break;
		fclose(f);
		if (kb)
			return kb << 10;
	}
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		return (uint64_t)ru.ru_maxrss << 10;
	return 0;
}

/* The baseline's reads in flight: --io-depth, or the loader's most. */
static unsigned bl_depth(const options *o)
{
	return o->io_depth ? (unsigned)o->io_depth : PF_LOADER_IO_DEPTH_DEFAULT;
}

/* ------------------------------------------------------------------ */
/* One run of the loader                                                */

typedef struct loader_run {
	double seconds;		/* from create to the end */
	double first_batch_ms;	/* from create to the first batch */
	uint64_t steady_records; /* handed out after the first batch */
	uint64_t steady_batches; /* batches after the first */
	double steady_s;	/* from the first batch to the last */
	uint64_t peak_rss;
	uint64_t steps_per_epoch;
	uint64_t steps_run;	/* batches taken by this run */
	pf_loader_metrics m;
	pf_tuning tune;		/* threads, reads in flight, prefetch: in force, and why */
	pf_series *series;	/* the loader's time series (pf_series_free()) */
	pf_source_metrics sm[LB_MAX_SOURCES];	/* a mixture's sources */
	char sm_name[LB_MAX_SOURCES][64];	/* their names and regions, */
	char sm_region[LB_MAX_SOURCES][64];	/* past the loader */
	size_t nsources;
} loader_run;

typedef struct progress {
	bool on;
	uint64_t total_steps;	/* 0: unknown */
	uint64_t start_ns, last_ns, last_steps, last_bytes, last_fill;
} progress;

static void progress_draw(progress *p, pf_loader *l, uint64_t t)
{
	pf_loader_metrics m;
	double dt = (double)(t - p->last_ns) * 1e-9;
	double elapsed = (double)(t - p->start_ns) * 1e-9;
	uint64_t dsteps;
	char eta[32] = "?";

	pf_loader_get_metrics(l, &m);
	dsteps = m.steps - p->last_steps;
	if (p->total_steps && m.steps) {
		double left = elapsed * (double)(p->total_steps - m.steps) / (double)m.steps;
		snprintf(eta, sizeof(eta), "%.0fs", left);
	}
	fprintf(stderr, "\r%llu/%llu steps  %.0f records/s  %.1f MB/s read  queue %.1f ready  ETA %s\033[K",
		(unsigned long long)m.steps, (unsigned long long)p->total_steps,
		(double)(dsteps * m.records / (m.steps ? m.steps : 1)) / dt,
		(double)(m.bytes_read - p->last_bytes) / dt / 1e6,
		dsteps ? (double)(m.queue_fill_sum - p->last_fill) / (double)dsteps : 0.0,
		eta);
	p->last_ns = t;
	p->last_steps = m.steps;
	p->last_bytes = m.bytes_read;
	p->last_fill = m.queue_fill_sum;
}

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	interrupted = sig;
}

/* @return 0, or 1 after printing the loader's error (or when a state
 * could not be saved), 130 when interrupted (the state saved). */
static int run_loader(const options *o, const pf_loader_config *cfg,
		      loader_run *out)
{
	pf_loader *l = NULL;
	pf_batch *b;
	pf_error err;
	progress p = { .on = !o->quiet && isatty(STDERR_FILENO) };
	uint64_t t0, t_first = 0;
	int ret;

	memset(out, 0, sizeof(*out));
	pf_error_clear(&err);
	peak_rss_reset();
	t0 = pf_now_ns();
	ret = pf_loader_create(&l, cfg, &err);
	if (ret < 0) {
		if (!err.code)
			pf_error_set(&err, ret, PF_OFFSET_NONE, 0, "cannot create the loader: %s",
				     pf_strerror(ret));
		cli_print_error(&err);
		return 1;
	}
	out->steps_per_epoch = pf_loader_steps_per_epoch(l);
	/* Packing: the epoch's steps are known as its records are placed. */
	if (!out->steps_per_epoch && !cfg->pack_length) {
		pf_loader_metrics m;
		pf_loader_get_metrics(l, &m);
		cli_fail("the data holds %llu records: not one global batch of %llu",
			 (unsigned long long)m.records_per_epoch,
			 (unsigned long long)(o->per_core_batch * o->cores * o->num_hosts));
		pf_loader_free(l);
		return 1;
	}
	p.total_steps = cfg->max_steps;
	if (cfg->nsources) {
		/* A mixture's steps are the run's, its stop rule's. */
		p.total_steps = out->steps_per_epoch;
	} else if (cfg->epochs != UINT32_MAX) {
		uint64_t all = out->steps_per_epoch * cfg->epochs;
		if (!p.total_steps || all < p.total_steps)
			p.total_steps = all;
	}
	p.start_ns = p.last_ns = t0;
	while ((ret = train_next(o->tc, l, &b)) == 1) {
		if (!t_first)
			t_first = pf_now_ns();
		else
		{
			out->steady_records += (uint64_t)b->per_core_batch * b->cores;
			out->steady_batches++;
			out->steady_s = (double)(pf_now_ns() - t_first) * 1e-9;
		}
		if (train_batch(o->tc, b) < 0) {	/* printed why */
			pf_loader_release(l, b);
			pf_loader_free(l);
			return 1;
		}
		pf_loader_release(l, b);
		out->steps_run++;
		if (o->save_every && out->steps_run % o->save_every == 0 &&
		    ckpt_save(o->save_state, l) < 0) {
			pf_loader_free(l);
			return 1;
		}
		if (p.on) {
			uint64_t t = pf_now_ns();
			if (t - p.last_ns >= PROGRESS_NS)
				progress_draw(&p, l, t);
		}
		if (interrupted)
			break;
	}
	out->seconds = (double)(pf_now_ns() - t0) * 1e-9;
	if (p.on)
		fputs("\r\033[K", stderr);
	if (ret < 0) {
		const pf_error *le = pf_loader_last_error(l);
		if (le)
			cli_print_error(le);
		else
			cli_fail("the loader failed: %s", pf_strerror(ret));
		pf_loader_free(l);
		return 1;
	}
	pf_loader_get_metrics(l, &out->m);
	out->nsources = pf_loader_sources(l);
	for (size_t k = 0; k < out->nsources && k < LB_MAX_SOURCES; k++) {
		pf_loader_source_metrics(l, k, &out->sm[k]);
		snprintf(out->sm_name[k], sizeof(out->sm_name[k]), "%s", out->sm[k].name);
		out->sm[k].name = out->sm_name[k];
		if (out->sm[k].region) {
			snprintf(out->sm_region[k], sizeof(out->sm_region[k]), "%s",
				 out->sm[k].region);
			out->sm[k].region = out->sm_region[k];
		}
	}
	out->first_batch_ms = (double)out->m.first_batch_ns * 1e-6;
	pf_loader_tuning(l, &out->tune);
	out->peak_rss = peak_rss_bytes();
	if (pf_loader_series(l, &out->series) < 0) {
		cli_fail("out of memory for the loader's time series");
		pf_loader_free(l);
		return 1;
	}
	if (o->save_state && ckpt_save(o->save_state, l) < 0) {
		pf_loader_free(l);
		return 1;
	}
	pf_loader_free(l);
	if (interrupted) {
		cli_fail("interrupted after %llu steps%s%s", (unsigned long long)out->steps_run,
			 o->save_state ? "; state saved to " : "",
			 o->save_state ? o->save_state : "");
		return 130;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* The report (the library's: pf_report)                                */

/* Print the run's report: the loader's figures (of the run nearest the
 * median time, at the median time), the baseline passes, the regions,
 * the training and the pod.  Every host calls it (the pod's figures are
 * gathered); host 0 prints.  @return 0, or 1 after printing why. */
static int report(const options *o, const pf_loader_config *cfg, char **files, int nfiles,
		  const loader_run *runs, const double *secs, const bl_set *bl,
		  const double *read_s, const double *dec_s, const double *code_s,
		  const bl_decode *bd, const char *backend)
{
	double seconds = median(secs, (unsigned)o->repeat);
	unsigned best = 0;
	pf_run_info info;
	pf_report *r = NULL;
	pf_error err;
	int ret = 1;

	/* Metrics of the run nearest the median time. */
	for (unsigned i = 1; i < o->repeat; i++)
		if (fabs(secs[i] - seconds) < fabs(secs[best] - seconds))
			best = i;
	info = (pf_run_info){
		.seconds = seconds,
		.first_batch_ms = runs[best].first_batch_ms,
		.steady_seconds = runs[best].steady_s,
		.steady_records = runs[best].steady_records,
		.steady_batches = runs[best].steady_batches,
		.runs = (unsigned)o->repeat,
		.files = (const char *const *)files,
		.nfiles = (size_t)nfiles,
		.tuning = &runs[best].tune,
	};
	for (unsigned i = 0; i < o->repeat; i++)
		if (runs[i].peak_rss > info.peak_rss_bytes)
			info.peak_rss_bytes = runs[i].peak_rss;
	pf_error_clear(&err);
	if (pf_report_create(&r) < 0 ||
	    pf_report_add_loader(r, cfg, &runs[best].m, &info, &err) < 0)
		goto out;
	if (runs[best].nsources &&
	    pf_report_add_sources(r, runs[best].sm, runs[best].nsources, &err) < 0)
		goto out;
	if (o->baseline) {
		pf_baseline b = {
			.read_seconds = median(read_s, (unsigned)o->repeat),
			.decompress_seconds = median(dec_s, (unsigned)o->repeat),
			.bytes = bl->cbytes,
			.bytes_decompressed = bl->ubytes,
			.files = bl->nindexed,
			.frames = bl->nframes,
			.threads = (unsigned)o->threads,
			.io_backend = backend,
			.decode_seconds = median(code_s, (unsigned)o->repeat),
			.decode_records = bd->records,
			.decode_bytes = bd->bytes,
		};

		if (pf_report_add_baseline(r, &b, &err) < 0)
			goto out;
	}
	if (pf_report_add_regions(r, o->ro.usage, best, &err) < 0 ||
	    pf_report_add_series(r, runs[best].series, &err) < 0)
		goto out;
	if (train_report(o->tc, r, &runs[best].m, seconds))
		goto fail;	/* printed why */
	ret = 0;
	/* The other hosts of a pod: host 0 prints the pod's report. */
	if (train_reports(o->tc) &&
	    pf_report_print(r, o->json ? PF_REPORT_JSON : PF_REPORT_TEXT, stdout) < 0) {
		cli_fail("cannot write the report: %s", strerror(errno));
		ret = 1;
	}
	if (ret == 0 && o->html && train_reports(o->tc))
		ret = cli_report_html(&o->html_out, r);
	goto fail;
out:
	if (err.code)
		cli_print_error(&err);
	else
		cli_fail("out of memory for the report");
fail:
	pf_report_free(r);
	return ret;
}

/* ------------------------------------------------------------------ */

/* A benchmark over many shards holds them all open; lift the soft limit
 * on descriptors to the hard one. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* ------------------------------------------------------------------ */
/* Who this host is                                                     */


/*
 * The main run's topology hook: this host's index and the host count from
 * the flags that were given (index_given, hosts_given) and the launcher's
 * environment (MPI, TPU VM, torchrun: precedence and rules in pf_host.h),
 * stored back into *host_index and *num_hosts, and printed on stderr with
 * its source ("loadbench: host 2 of 4 (from mpi)").  @return 0, or 2
 * (bad usage) after printing what contradicts what.
 */
static int resolve_topology(bool index_given, uint64_t *host_index,
			    bool hosts_given, uint64_t *num_hosts)
{
	pf_topology_flags flags = {
		.has_host_index = index_given,
		.has_num_hosts = hosts_given,
		/* parse_options() bounds both to 32 bits. */
		.host_index = (uint32_t)*host_index,
		.num_hosts = (uint32_t)*num_hosts,
	};
	pf_host_topology t;
	pf_error err;
	char line[160];

	pf_error_clear(&err);
	if (pf_topology_detect(&t, &flags, NULL, NULL, &err) < 0) {
		cli_fail("topology: %s", err.msg);
		return 2;
	}
	pf_topology_format(&t, line, sizeof(line));
	fprintf(stderr, "%s: %s\n", cli_prog, line);
	*host_index = t.host_index;
	*num_hosts = t.num_hosts;
	return 0;
}

/* The regions' check over the manifest's shards, weighed by the
 * manifest's sizes: no stat per shard.  @return regions_check()'s. */
static int manifest_regions_check(regions_opts *ro, const pf_manifest *m, const char *mpath)
{
	size_t n = pf_manifest_shards(m);
	char **paths = calloc(n, sizeof(*paths));
	uint64_t *sizes = calloc(n, sizeof(*sizes));
	int ret = 1;

	if (!paths || !sizes) {
		cli_fail("out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const pf_manifest_shard *sh = pf_manifest_get(m, i);
		size_t len = pf_manifest_shard_path(mpath, sh, NULL, 0) + 1;

		paths[i] = malloc(len);
		if (!paths[i]) {
			cli_fail("out of memory");
			goto out;
		}
		pf_manifest_shard_path(mpath, sh, paths[i], len);
		sizes[i] = sh->size;
	}
	ret = regions_check(ro, paths, sizes, (int)n);
out:
	for (size_t i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
	free(sizes);
	return ret;
}

/* What a run (or `loadbench which`) is made of: the dataset's files (or
 * its manifest), the spec, the loader's config. */
typedef struct lb_setup {
	char **files;
	int nfiles;
	char *mpath;
	pf_manifest *manifest;
	char *inferred;
	char *const *inputs;
	int ninputs;
	pf_spec spec;
	pf_loader_config cfg;
} lb_setup;

static void setup_free(lb_setup *su)
{
	free(su->inferred);
	pf_manifest_free(su->manifest);
	cli_free_inputs(su->files, su->nfiles);
	free(su->mpath);
}

/* The files the arguments name (a mixture's: its sources'), the manifest
 * that plans them, and the regions' check before any shard is read.
 * @return 0, or the exit status after saying why. */
static int open_inputs(options *o, int argc, char **argv, int first, lb_setup *su)
{
	pf_error err;
	int ret;

	if (o->mix.n) {
		ret = lb_mixture_files(o, &su->files, &su->nfiles);
		if (ret)
			return ret;
		/* The first source's files stand for the dataset where one is
		 * named: the spec's schema. */
		su->inputs = (char *const *)o->mix.path[0];
		su->ninputs = 1;
	} else {
		su->inputs = argv + first;
		su->ninputs = argc - first;
		/* A manifest named beside its shards (the shell glob of their
		 * directory) is theirs, checked against them; named alone, it
		 * gives the shards it lists. */
		su->nfiles = cli_resolve_inputs(su->inputs, su->ninputs, &su->files,
						o->no_manifest ? NULL : &su->mpath);
	}
	if (su->nfiles < 0) {
		su->nfiles = 0;
		return 1;
	}
	if (su->nfiles == 0) {
		cli_fail("the arguments name no files");
		return 1;
	}
	/* The manifest first: it is the dataset, and its sizes spare the
	 * regions' check a stat per shard (a round trip each on a far
	 * bucket).  It is the one file read before the check. */
	if (!o->no_manifest && !o->mix.n) {
		int found = su->mpath ? 1 : pf_manifest_locate((const char *const *)su->inputs,
							       (size_t)su->ninputs, &su->mpath);

		pf_error_clear(&err);
		if (found > 0 && pf_manifest_load(&su->manifest, su->mpath, NULL, &err) < 0) {
			cli_print_error(&err);
			return 1;
		}
		/* The manifest is the dataset: a file added since is not read. */
		if (su->manifest && pf_manifest_shards(su->manifest) != (size_t)su->nfiles)
			fprintf(stderr, "loadbench: the manifest names %zu shards, %s holds %d "
				"files: only the manifest's are read (`shardtool manifest` "
				"again to take the others, or --no-manifest)\n",
				pf_manifest_shards(su->manifest), su->inputs[0], su->nfiles);
	}
	/* Before any shard is read: a refusal must read none. */
	ret = su->manifest ? manifest_regions_check(&o->ro, su->manifest, su->mpath)
			   : regions_check(&o->ro, su->files, NULL, su->nfiles);
	if (ret == 0 && o->mix.n)
		lb_sources_regions(o);
	return ret;
}

/* The feature spec: --features, or inferred from the first file's index
 * (the next file's, with --on-corrupt skip, past a damaged one).
 * @return 0, or the exit status after saying why. */
static int choose_spec(options *o, lb_setup *su)
{
	pf_error err;
	int d;

	if (!o->features) {
		size_t len;
		pf_spec_infer_config ic = {
			.ignore_manifest = o->no_manifest,
			.int64_as_int32 = o->train.model != TRAIN_MODEL_NONE,
		};

		pf_error_clear(&err);
		d = su->mpath ? pf_spec_infer((const char *const *)&su->mpath, 1, &ic, &su->spec,
					      &err)
			      : pf_spec_infer((const char *const *)su->inputs,
					      (size_t)su->ninputs, &ic, &su->spec, &err);
		/* --on-corrupt skip reads past a damaged file: so does the
		 * spec's inference, from the next file's index, saying which
		 * it passed (the loader's own skip counts it again). */
		for (int k = 0; !su->mpath && d < 0 && d != -ENODATA && d != -ENOMEM &&
				o->on_corrupt == PF_CORRUPT_SKIP && k + 1 < su->nfiles; k++) {
			if (strcmp(err.file, su->files[k]))
				break;	/* not this file's damage: as it is */
			char line[PF_ERROR_LINE_MAX];

			pf_error_format(&err, line, sizeof(line));
			fprintf(stderr, "loadbench: %s (--on-corrupt skip: the spec from the "
				"next file's index)\n", line);
			pf_error_clear(&err);
			d = pf_spec_infer((const char *const *)&su->files[k + 1], 1, &ic, &su->spec,
					  &err);
		}
		if (d == -ENODATA) {
			char line[PF_ERROR_LINE_MAX];

			pf_error_format(&err, line, sizeof(line));
			return cli_usage("--features is required: %s", line);
		}
		if (d < 0) {
			cli_print_error(&err);
			return 1;
		}
		train_fit_features(&o->train, &su->spec);
		len = pf_spec_format(&su->spec, NULL, 0) + 1;
		su->inferred = malloc(len);
		if (!su->inferred) {
			cli_fail("out of memory");
			return 1;
		}
		pf_spec_format(&su->spec, su->inferred, len);
		o->features = su->inferred;
	}
	pf_error_clear(&err);
	if (pf_spec_parse(&su->spec, o->features, &err) < 0) {
		char line[PF_ERROR_LINE_MAX];

		pf_error_format(&err, line, sizeof(line));
		return cli_usage("--features: %s", line);
	}
	return 0;
}

/* The loader's config from the options. */
static void make_config(options *o, lb_setup *su)
{
	pf_loader_config *cfg = &su->cfg;

	memset(cfg, 0, sizeof(*cfg));
	/* With a manifest the loader is given it (the one path named), not
	 * the files listed. */
	cfg->paths = su->manifest ? (const char *const *)&su->mpath
				  : (const char *const *)su->files;
	cfg->npaths = su->manifest ? 1 : (size_t)su->nfiles;
	cfg->ignore_manifest = o->no_manifest;
	cfg->features = o->features;
	cfg->host_index = (uint32_t)o->host_index;
	cfg->num_hosts = (uint32_t)o->num_hosts;
	cfg->cores_per_host = (uint32_t)o->cores;
	cfg->per_core_batch = (uint32_t)o->per_core_batch;
	cfg->seed = o->seed;
	/* --steps alone runs as many epochs as the steps need. */
	cfg->epochs = o->steps && !o->epochs_given ? UINT32_MAX : (uint32_t)o->epochs;
	cfg->max_steps = o->steps;
	cfg->skip_steps = o->skip_steps;
	cfg->shuffle = o->shuffle;
	cfg->shuffle_mode = o->shuffle_mode;
	cfg->shuffle_window = o->window_given ? (uint32_t)o->window : 0;	/* 0: the default, fitted */
	cfg->remainder = (pf_remainder)o->remainder;
	cfg->pack_length = (uint32_t)(o->pack > UINT32_MAX ? UINT32_MAX : o->pack);
	cfg->pack_mode = (pf_pack_mode)o->pack_mode;
	cfg->pack_pool = (uint32_t)o->pack_pool;
	cfg->threads = (unsigned)o->threads_arg;
	cfg->io_depth = (unsigned)o->io_depth;
	cfg->memory_budget = (size_t)o->memory_mib << 20;
	cfg->prefetch = (unsigned)o->prefetch;
	cfg->direct_io = o->direct;
	cfg->verify_records = o->verify;
	cfg->regions = o->ro.table;
	cfg->on_corrupt = (pf_corrupt_policy)o->on_corrupt;
	cfg->io_faults = o->faults;
	if (o->io_retries_given)
		cfg->io_retries = o->io_retries ? (int)o->io_retries : PF_IO_RETRIES_NONE;
	if (o->io_timeout_given)
		cfg->io_timeout_ms = o->io_timeout_ms ? (int)o->io_timeout_ms : PF_IO_TIMEOUT_NONE;
	cfg->quarantine = o->quarantine;
	cfg->max_corrupt = o->max_corrupt;
	if (o->mix.n)
		lb_mixture_config(o, cfg);
	/* Runs after the first start on the pools the first one faulted in,
	 * as a process making loaders one after another does (asked for:
	 * a loader keeps nothing by default). */
	cfg->keep_pools = o->repeat > 1;
	if (o->resume.n) {
		cfg->resume = o->resume.blob;
		cfg->nresume = o->resume.n;
	}
}

/* The runs (interleaved with the baseline's passes) and the report.
 * @return the exit status. */
static int run_all(options *o, lb_setup *su)
{
	pf_loader_config *cfg = &su->cfg;
	bl_set bl = { 0 };
	const char *backend = NULL;
	loader_run runs[MAX_REPEAT] = { 0 };
	double secs[MAX_REPEAT], read_s[MAX_REPEAT], dec_s[MAX_REPEAT], code_s[MAX_REPEAT];
	bl_decode bd = { 0 };
	int ret;

	if (o->save_state) {
		struct sigaction sa = { .sa_handler = on_interrupt };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	ret = train_start(&o->tc, &o->train, cfg, &su->spec, o->repeat);
	if (ret)
		goto out;
	ret = 1;

	if (o->baseline) {
		double warm;

		if (baseline_load(&bl, su->files, (size_t)su->nfiles) < 0)
			goto out;
		if (!bl.nframes) {
			cli_fail("--baseline: no indexed shards among the files "
				 "(convert them with `shardtool convert`)");
			goto out;
		}
		/* Warm the page cache so every pass reads from the same place. */
		if (baseline_read(&bl, (unsigned)o->threads, bl_depth(o), o->direct, &warm,
				  NULL))
			goto out;
	}
	/* Interleave loader, read, decompress so drift hits all alike. */
	for (unsigned i = 0; i < o->repeat; i++) {
		int rr = run_loader(o, cfg, &runs[i]);

		if (rr) {
			ret = rr;
			goto out;
		}
		if (pf_region_usage_run_done(o->ro.usage, runs[i].seconds) < 0) {
			cli_fail("out of memory");
			goto out;
		}
		secs[i] = runs[i].seconds;
		if (!o->baseline)
			continue;
		bd = (bl_decode){ .spec = &su->spec,
				  .batch = (size_t)(o->per_core_batch * o->cores),
				  .verify = o->verify };
		if (baseline_read(&bl, (unsigned)o->threads, bl_depth(o), o->direct,
				  &read_s[i], &backend) ||
		    baseline_decompress(&bl, (unsigned)o->threads, &dec_s[i]) ||
		    baseline_decode(&bl, (unsigned)o->threads, &bd, &code_s[i]))
			goto out;
	}
	if (train_finish(o->tc))
		goto out;
	ret = report(o, cfg, su->files, su->nfiles, runs, secs, &bl, read_s, dec_s, code_s, &bd,
		     backend);
out:
	for (unsigned i = 0; i < o->repeat && i < MAX_REPEAT; i++)
		pf_series_free(runs[i].series);
	baseline_free(&bl);
	return ret;
}

/* `loadbench which --steps A:B [the run's options] SHARD...`: --steps
 * taken out of argv (it says the steps asked, not the run's end) into
 * *which.  @return -1 to go on, or the exit status of a usage error. */
static int which_steps(int *argc, char **argv, lb_which *which)
{
	int k = 0, found = 0;

	for (int i = 0; i < *argc; i++) {
		const char *v = NULL;

		if (!strcmp(argv[i], "--steps") && i + 1 < *argc)
			v = argv[++i];
		else if (!strncmp(argv[i], "--steps=", 8))
			v = argv[i] + 8;
		else if (!strcmp(argv[i], "--"))
			for (; i < *argc; i++)
				argv[k++] = argv[i];
		if (!v) {
			if (i < *argc)
				argv[k++] = argv[i];
			continue;
		}
		found++;
		if (lb_which_parse_steps(v, which) < 0)
			return 2;
	}
	*argc = k;
	argv[k] = NULL;
	if (found != 1)
		return cli_usage("which: give the steps once: --steps A:B (global steps A to "
				 "B - 1), A: (A to the run's end) or A");
	return -1;
}

int main(int argc, char **argv)
{
	options o;
	lb_setup su = { 0 };
	lb_which which = { 0 };
	int ret, first;
	static const cli_subcommand subcommands[] = {
		{ "plan", "the scaling plan of a pod", plan_main },
		{ "ladder", "runs of 1, 2, 4... hosts and their scaling efficiency",
		  ladder_main },
		{ "regions", "the same files read from each declared mount", regions_main },
		{ "state", "what a saved state holds (state show FILE)", state_main },
		{ 0 },
	};
	const cli_subcommand *sub = argc > 1 ? cli_find_subcommand(subcommands, argv[1]) : NULL;

	if (sub)
		return sub->main(argc - 1, argv + 1);
	/* `loadbench which`: the options of a run, and the steps asked
	 * (--help: the run's options). */
	if (argc > 1 && !strcmp(argv[1], "which")) {
		bool help = false;

		which.on = true;
		argv[1] = argv[0];
		argc--;
		argv++;
		for (int i = 1; i < argc; i++)
			help |= !strcmp(argv[i], "--help") || !strcmp(argv[i], "--help-all");
		cli_prog = "loadbench";
		ret = help ? -1 : which_steps(&argc, argv, &which);
		if (ret >= 0)
			return ret;
	}
	ret = loadbench_parse_options(argc, argv, &o, &first);
	if (ret >= 0)
		return ret;
	if (resolve_topology(o.host_index_given, &o.host_index, o.num_hosts_given,
			     &o.num_hosts))
		return 2;
	/* Before anything is read: a page that cannot be written fails now. */
	if (!which.on && cli_outfile_open(&o.html_out, "--html", o.html))
		return 1;
	raise_fd_limit();
	ret = open_inputs(&o, argc, argv, first, &su);
	if (ret == 0)
		ret = choose_spec(&o, &su);
	if (ret == 0 && o.resume.n && ckpt_check(&o.resume, o.quiet || o.json || which.on) < 0)
		ret = 2;
	if (ret == 0) {
		make_config(&o, &su);
		ret = which.on ? lb_which_print(&su.cfg, &which, o.json) : run_all(&o, &su);
	}
	setup_free(&su);
	regions_free(&o.ro);
	ckpt_free(&o.resume);
	if (which.on)
		return ret;
	cli_outfile_close(&o.html_out, ret != 0);
	return train_end(o.tc, ret);
}
