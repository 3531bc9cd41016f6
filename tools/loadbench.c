/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench: run the loader over shards and report where the time goes,
 * beside pure read and pure decompress passes over the same files. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common_internal.h"
#include "loadbench.h"

#define ALIGN 4096u
#define DEFAULT_WINDOW 8192u
#define DEFAULT_MEMORY_MIB 512u
#define PROGRESS_NS 250000000ull	/* redraw at most 4 times a second */
#define MAX_REPEAT 101u
#define BL_READ_BYTES (256u << 20)	/* read-pass buffers per thread */


static double median(const double *v, unsigned n)
{
	double s[MAX_REPEAT];

	/* A copy: v's order says which run is which. */
	memcpy(s, v, n * sizeof(*v));
	return cli_median(s, n);
}

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
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

/* ------------------------------------------------------------------ */
/* Options                                                              */

/* --shuffle-window W: W >= 1.  0 turned shuffling off before shuffling
 * was off by default: say so rather than only "out of range". */
static int parse_window(void *field, const char *v)
{
	if (!strcmp(v, "0")) {
		cli_usage("--shuffle-window: 0 is no window (shuffling is off unless "
			  "--shuffle or --shuffle-window W is given)");
		return -EINVAL;
	}
	return cli_parse_u64("--shuffle-window", v, 1, UINT32_MAX, true, field);
}

#define O(field) offsetof(options, field)
#define SEEN(field) CLI_SEEN(options, field)

const cli_opt loadbench_cli[] = {
	{ CLI_SECTION, .help = "topology and schedule:" },
	{ CLI_U64, "per-core-batch", .arg = "N", .off = O(per_core_batch), .min = 1,
	  .max = 1u << 24, .suffix = true, .help = "records per core per step (default 32)" },
	{ CLI_U64, "cores", .arg = "C", .off = O(cores), .min = 1, .max = 4096,
	  .help = "cores on this host (default 1)" },
	{ CLI_U64, "num-hosts", .arg = "H", .off = O(num_hosts), .min = 1, .max = UINT32_MAX,
	  .seen = SEEN(num_hosts_given), .more = true, .help = "hosts in the pod" },
	{ CLI_U64, "host-index", .arg = "I", .off = O(host_index), .max = UINT32_MAX - 1,
	  .seen = SEEN(host_index_given), .more = true,
	  .help = "this host, 0..H-1 (both by default from the launcher: MPI, "
		  "TPU_WORKER_ID, RANK/WORLD_SIZE; else host 0 of 1; what is set "
		  "must agree; --num-hosts H > 1 needs an index)" },
	{ CLI_U64, "epochs", .arg = "E", .off = O(epochs), .min = 1, .max = UINT32_MAX,
	  .seen = SEEN(epochs_given),
	  .help = "passes over the data (default 1; --steps alone: enough)" },
	{ CLI_U64, "steps", .arg = "S", .off = O(steps), .min = 1, .max = UINT64_MAX,
	  .suffix = true, .help = "stop after S steps in all" },
	{ CLI_FLAG, "shuffle", .off = O(shuffle),
	  .help = "shuffle: frames permuted, records in a window of 8192 (default "
		  "off: the files' order, as pf_loader_config and tf.data)" },
	{ CLI_CALL, "shuffle-window", .arg = "W", .off = O(window), .call = parse_window,
	  .seen = SEEN(window_given), .more = true,
	  .help = "records in the shuffle window (default 8192); implies --shuffle" },
	{ CLI_U64, "seed", .arg = "S", .off = O(seed), .max = UINT64_MAX, .more = true,
	  .help = "shuffle seed (default 0)" },
	{ CLI_CHOICE, "remainder", .arg = "drop|wrap", .off = O(remainder),
	  .choices = "drop|wrap", .more = true,
	  .help = "the records past the last whole step of an epoch (default drop)" },
	{ CLI_STRING, "features", .arg = "SPEC", .off = O(features),
	  .help = "the feature spec (default: from the shards' schema)" },
	{ CLI_NOTE, .more = true,
	  .help = "A spec is e.g. \"tokens:int32[256],label:int64[1]\" (loader/podfeed.h).  "
		  "Without --features: from the schema in the first file's index "
		  "(or the manifest's): int64 -> int64[max_len], float -> "
		  "float32[max_len], bytes -> bytes[mean record size rounded up to "
		  "64], default=0 where some records lack it; sequence lists are left "
		  "out." },
	{ CLI_SECTION, .help = "pipeline:" },
	{ CLI_U64, "threads", .arg = "T", .off = O(threads), .min = 1, .max = 1024,
	  .help = "decode threads (default: number of CPUs)" },
	{ CLI_U64, "io-depth", .arg = "N", .off = O(io_depth), .min = 1, .max = 4096,
	  .more = true, .help = "reads in flight (default 32)" },
	{ CLI_U64, "prefetch", .arg = "N", .off = O(prefetch), .min = 1, .max = 1024,
	  .more = true, .help = "ready batches queued (default 2)" },
	{ CLI_U64, "memory", .arg = "MiB", .off = O(memory_mib), .min = 1, .max = 1u << 20,
	  .more = true, .help = "memory budget for all pools (default 512)" },
	{ CLI_FLAG, "direct", .off = O(direct), .more = true,
	  .help = "O_DIRECT reads of aligned shards" },
	{ CLI_FLAG, "no-manifest", .off = O(no_manifest), .more = true,
	  .help = "plan from the shards even when the one directory given holds a "
		  "dataset manifest" },
	{ CLI_FLAG, "verify-records", .off = O(verify), .more = true,
	  .help = "also check each record's data CRC inside frames already verified "
		  "by CRC32C and zstd's checksum" },
	{ CLI_INCLUDE, .table = regions_cli, .off = O(ro), .more = true },
	{ CLI_SECTION, .help = "report:" },
	{ CLI_FLAG, "baseline", .off = O(baseline),
	  .help = "also time pure read and decompress passes over the indexed "
		  "shards; the loader as a ratio to each" },
	{ CLI_U64, "repeat", .arg = "N", .off = O(repeat), .min = 1, .max = MAX_REPEAT,
	  .help = "run N times, interleaved; medians (default 1)" },
	{ CLI_FLAG, "json", .off = O(json), .help = "one JSON object on stdout instead of the text" },
	{ CLI_FLAG, "quiet", .off = O(quiet), .more = true,
	  .help = "no progress line (drawn on stderr only when it is a terminal: "
		  "steps, records/s, compressed MB/s read, batches ready at next(), "
		  "ETA)" },
	{ CLI_NOTE, .more = true,
	  .help = "--repeat keeps the loader's pools from one run to the next.  "
		  "The read pass: T threads, one I/O engine each, whole frames; the "
		  "decompress pass: T threads, pread, frame CRC, zstd; both after a "
		  "warming read pass.  steady: records/s from the first batch to the "
		  "last; n/a under 10 batches or 100 ms." },
	{ CLI_SECTION, .help = "faults and corrupt data:" },
	{ CLI_STRING, "faults", .arg = "SPEC", .off = O(faults), .more = true,
	  .help = "inject read faults (io/pf_io.h; e.g. eio:0.01,seed=3; default "
		  "$PODFEED_FAULTS)" },
	{ CLI_U64, "io-retries", .arg = "N", .off = O(io_retries), .max = 1000,
	  .seen = SEEN(io_retries_given), .more = true,
	  .help = "transient read errors retried (default 3; 0: none)" },
	{ CLI_U64, "io-timeout-ms", .arg = "MS", .off = O(io_timeout_ms), .max = INT32_MAX,
	  .seen = SEEN(io_timeout_given), .more = true,
	  .help = "each read's limit (default 60000; 0: none)" },
	{ CLI_CHOICE, "on-corrupt", .arg = "fail|skip", .off = O(on_corrupt),
	  .choices = "fail|skip", .more = true,
	  .help = "stop with an error naming file, offset, frame, record and cause "
		  "(default), or drop the smallest damaged unit, count it and go on "
		  "(rows of records lost in an indexed frame come out empty, marked)" },
	{ CLI_STRING, "quarantine", .arg = "FILE", .off = O(quarantine), .more = true,
	  .help = "skip: append a JSON line per drop to FILE" },
	{ CLI_U64, "max-corrupt", .arg = "N", .off = O(max_corrupt), .min = 1,
	  .max = UINT64_MAX, .more = true, .help = "skip: stop with an error after N drops" },
	{ CLI_SECTION, .help = "checkpoints:" },
	{ CLI_STRING, "save-state", .arg = "FILE", .off = O(save_state), .more = true,
	  .help = "write this host's loader state to FILE (atomically) at the end, on "
		  "SIGINT/SIGTERM (then exit 130), and every --save-every N steps" },
	{ CLI_U64, "save-every", .arg = "N", .off = O(save_every), .min = 1,
	  .max = UINT64_MAX, .more = true,
	  .help = "steps between saves (default: only at the end)" },
	{ CLI_CALL, "resume", .arg = "FILE", .off = O(resume), .call = ckpt_add, .more = true,
	  .help = "continue from a saved state; repeat it (or give FILE,FILE...) with "
		  "every old host's state to resume on another host count or host "
		  "batch; --epochs counts from the first epoch, --steps from the "
		  "resume" },
	{ CLI_INCLUDE, .table = train_cli, .off = O(train), .more = true },
	{ CLI_END },
};

static const cli_command loadbench_command = {
	.name = "loadbench",
	.usage = "usage: loadbench [options] SHARD...\n"
		 "       loadbench plan|ladder|regions [options]  (loadbench COMMAND --help)\n",
	.about = "Runs the podfeed loader over the shards (files, directories or globs)\n"
		 "and reports throughput, the bottleneck stage, next() latency, memory.\n",
	.opts = loadbench_cli,
	.footer = "Exit status: 0 done, 1 failed, 2 bad usage, 3 refused across regions.\n",
};

void loadbench_defaults(options *o)
{
	memset(o, 0, sizeof(*o));
	o->per_core_batch = 32;
	o->cores = 1;
	o->num_hosts = 1;
	o->epochs = 1;
	o->window = DEFAULT_WINDOW;
	o->memory_mib = DEFAULT_MEMORY_MIB;
	o->io_depth = 32;
	o->prefetch = 2;
	o->repeat = 1;
	o->remainder = PF_REMAINDER_DROP;
	regions_defaults(&o->ro);
	train_defaults(&o->train);
}

/* @return -1 to go on (*first: the first shard's index in argv), else
 * the exit status. */
static int parse_options(int argc, char **argv, options *o, int *first)
{
	int ret;

	loadbench_defaults(o);
	ret = cli_parse(&loadbench_command, argc, argv, o, first);
	if (ret >= 0)
		return ret;
	o->shuffle |= o->window_given;
	/* One of the two alone is checked with the environment's. */
	if (o->host_index_given && o->num_hosts_given && o->host_index >= o->num_hosts)
		return cli_usage("--host-index: %llu is not below --num-hosts %llu",
				 (unsigned long long)o->host_index,
				 (unsigned long long)o->num_hosts);
	if ((o->quarantine || o->max_corrupt) && o->on_corrupt != PF_CORRUPT_SKIP)
		return cli_usage("%s: needs --on-corrupt skip",
				 o->quarantine ? "--quarantine" : "--max-corrupt");
	if (o->save_every && !o->save_state)
		return cli_usage("--save-every: needs --save-state FILE");
	if (*first == argc)
		return cli_usage("no shards given");
	if (!o->threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		o->threads = n > 0 ? (uint64_t)n : 1;
	}
	return -1;
}

/* ------------------------------------------------------------------ */
/* The default feature spec, from the first file's index schema          */

/* Names the spec grammar cannot carry are left out. */
static bool spec_name_ok(const char *name)
{
	return *name && strlen(name) < PF_SPEC_MAX_NAME &&
	       !strpbrk(name, ",:[]= \t\n");
}

/* @return 0 with a malloc'd spec in *out (caller frees), 1 when the file
 * has no usable schema, -1 after printing a failure. */
static int default_features(const char *path, const pf_manifest *man, char **out)
{
	pf_source *src = NULL;
	const pf_shard_index *ix = NULL;
	pf_error err;
	size_t cap = 4096, len = 0, n;
	char *spec;
	uint64_t mean = 0;

	*out = NULL;
	pf_error_clear(&err);
	if (!man && pf_source_open(&src, path, NULL, &err) < 0) {
		cli_print_error(&err);
		return -1;
	}
	ix = src ? pf_source_index(src) : NULL;
	n = man ? pf_manifest_schema_count(man) : ix ? pf_shard_index_schema_count(ix) : 0;
	if (!n) {
		pf_source_close(src);
		return 1;
	}
	if (ix && pf_shard_index_records(ix))
		mean = pf_shard_index_uncompressed_bytes(ix) / pf_shard_index_records(ix);
	for (size_t i = 0, records = 0, bytes = 0; man && i < pf_manifest_shards(man); i++) {
		const pf_manifest_shard *s = pf_manifest_get(man, i);

		for (uint32_t f = 0; f < s->nframes; f++)
			bytes += s->frames[f].uncompressed_size;
		records += s->nframes ? s->records : 0;
		mean = records ? bytes / records : 0;
	}
	spec = malloc(cap);
	if (!spec) {
		pf_source_close(src);
		return -1;
	}
	spec[0] = '\0';
	for (size_t i = 0; i < n && i < PF_SPEC_MAX_FEATURES; i++) {
		const pf_feature_schema *fs = man ? pf_manifest_schema(man, i)
						  : pf_shard_index_schema(ix, i);
		const char *dtype;
		uint64_t flen = fs->max_len;

		if (fs->is_list || fs->mixed || !spec_name_ok(fs->name))
			continue;
		switch (fs->kind) {
		case PF_KIND_INT64: dtype = "int64"; break;
		case PF_KIND_FLOAT: dtype = "float32"; break;
		case PF_KIND_BYTES:
			dtype = "bytes";
			flen = round_up(mean ? mean : 1, 64);
			break;
		default: continue;
		}
		if (!flen)
			continue;
		if (len + strlen(fs->name) + 48 >= cap) {
			char *grown = realloc(spec, cap * 2);
			if (!grown) {
				free(spec);
				pf_source_close(src);
				return -1;
			}
			spec = grown;
			cap *= 2;
		}
		len += (size_t)snprintf(spec + len, cap - len, "%s%s:%s[%llu]",
					len ? "," : "", fs->name, dtype,
					(unsigned long long)flen);
		/* A feature some records lack is optional: 0 for them. */
		if (fs->records_present - fs->records_unset <
		    (man ? pf_manifest_schema_records(man) : pf_shard_index_records(ix)))
			len += (size_t)snprintf(spec + len, cap - len, ":default=0");
	}
	pf_source_close(src);
	if (!len) {
		free(spec);
		return 1;
	}
	*out = spec;
	return 0;
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
	if (!out->steps_per_epoch) {
		pf_loader_metrics m;
		pf_loader_get_metrics(l, &m);
		cli_fail("the data holds %llu records: not one global batch of %llu",
			 (unsigned long long)m.records_per_epoch,
			 (unsigned long long)(o->per_core_batch * o->cores * o->num_hosts));
		pf_loader_free(l);
		return 1;
	}
	p.total_steps = cfg->max_steps;
	if (cfg->epochs != UINT32_MAX) {
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
	out->first_batch_ms = t_first ? (double)(t_first - t0) * 1e-6 : 0;
	pf_loader_get_metrics(l, &out->m);
	out->peak_rss = peak_rss_bytes();
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
/* Baselines: every frame of the indexed shards, split among T threads   */

typedef struct bl_frame {
	uint32_t file;
	pf_frame_info fi;
} bl_frame;

typedef struct bl_set {
	char **paths;
	size_t nfiles;
	bool *aligned;		/* frames aligned for O_DIRECT */
	bl_frame *frames;
	size_t nframes;
	size_t nindexed;
	uint64_t cbytes, ubytes;
	uint32_t max_c, max_u;
} bl_set;

static void bl_free(bl_set *s)
{
	free(s->aligned);
	free(s->frames);
	memset(s, 0, sizeof(*s));
}

/* @return 0, or -1 after printing why. */
static int bl_load(bl_set *s, char **paths, size_t n)
{
	size_t cap = 0;

	memset(s, 0, sizeof(*s));
	s->paths = paths;
	s->nfiles = n;
	s->aligned = calloc(n ? n : 1, sizeof(*s->aligned));
	if (!s->aligned)
		return -1;
	for (size_t i = 0; i < n; i++) {
		pf_source *src;
		const pf_shard_index *ix;
		pf_error err;

		pf_error_clear(&err);
		if (pf_source_open(&src, paths[i], NULL, &err) < 0) {
			cli_print_error(&err);
			return -1;
		}
		ix = pf_source_index(src);
		if (!ix) {		/* a stream: not part of the baselines */
			pf_source_close(src);
			continue;
		}
		s->nindexed++;
		s->aligned[i] = pf_shard_index_alignment(ix) >= ALIGN;
		uint32_t nf = pf_shard_index_frames(ix);
		if (s->nframes + nf > cap) {
			size_t ncap = (s->nframes + nf) * 2;
			bl_frame *g = realloc(s->frames, ncap * sizeof(*g));
			if (!g) {
				pf_source_close(src);
				return -1;
			}
			s->frames = g;
			cap = ncap;
		}
		for (uint32_t k = 0; k < nf; k++) {
			const pf_frame_info *fi = pf_shard_index_frame(ix, k);
			bl_frame *f = &s->frames[s->nframes++];

			f->file = (uint32_t)i;
			f->fi = *fi;
			s->cbytes += fi->compressed_size;
			s->ubytes += fi->uncompressed_size;
			if (fi->compressed_size > s->max_c)
				s->max_c = fi->compressed_size;
			if (fi->uncompressed_size > s->max_u)
				s->max_u = fi->uncompressed_size;
		}
		pf_source_close(src);
	}
	return 0;
}

typedef struct bl_thread {
	const bl_set *set;
	size_t lo, hi;		/* frames [lo, hi) */
	unsigned depth;
	bool direct;
	pthread_t thread;
	int ret;
	pf_error err;
	const char *backend;
	pthread_barrier_t *start;	/* the clock starts when all are set up */
	bool started;
} bl_thread;

/* Set-up (rings, buffers) is not part of a pass's time: wait here once,
 * after it, or on the way out when it failed. */
static void bl_start(bl_thread *t)
{
	if (!t->started) {
		t->started = true;
		pthread_barrier_wait(t->start);
	}
}

/* The read pass's plan: frames [lo, hi) of the set, each read whole into
 * the buffer of its request slot. */
typedef struct bl_reads {
	bl_thread *t;
	pf_io *io;
	int *file_slot;		/* each file's index in the engine, or -1 */
	uint8_t *bufs;
	size_t bufsz;
	size_t next;		/* the next frame to read */
	size_t *frame;		/* the frame each request slot reads */
} bl_reads;

static int bl_next(void *ctx, unsigned r, pf_io_req *q, pf_error *err)
{
	bl_reads *p = ctx;
	const bl_set *s = p->t->set;
	const bl_frame *f;
	size_t len;

	if (p->next >= p->t->hi)
		return 0;
	f = &s->frames[p->next];
	if (p->file_slot[f->file] < 0) {
		unsigned fl = p->t->direct && s->aligned[f->file] ? PF_IO_DIRECT : 0;
		int ret = pf_io_add_file(p->io, s->paths[f->file], fl, err);

		if (ret < 0)
			return ret;
		p->file_slot[f->file] = ret;
	}
	len = f->fi.compressed_size;
	if (pf_io_file_direct(p->io, (uint32_t)p->file_slot[f->file]))
		len = round_up(len, ALIGN);
	*q = (pf_io_req){
		.file = (uint32_t)p->file_slot[f->file],
		.offset = f->fi.offset,
		.len = (uint32_t)len,
		.buf = p->bufs + (size_t)r * p->bufsz,
		.buf_index = pf_io_buffers_registered(p->io) ? (int)r : -1,
	};
	p->frame[r] = p->next++;
	return 1;
}

static int bl_done(void *ctx, unsigned r, pf_io_req *q, pf_error *err)
{
	bl_reads *p = ctx;
	const bl_set *s = p->t->set;
	const bl_frame *f = &s->frames[p->frame[r]];
	int code;

	if (q->result >= (int64_t)f->fi.compressed_size)
		return 0;
	code = q->result < 0 ? (int)q->result : -EIO;
	pf_error_set(err, code, PF_OFFSET_FILE, f->fi.offset, "read pass: %s",
		     q->result < 0 ? pf_strerror(code) : "short read");
	pf_error_set_file(err, s->paths[f->file]);
	return code;
}

/* Read whole frames through this thread's own I/O engine. */
static void *bl_read_main(void *arg)
{
	bl_thread *t = arg;
	const bl_set *s = t->set;
	size_t bufsz = round_up((size_t)s->max_c + ALIGN, ALIGN);
	/* Whole-frame buffers: keep a deep queue of large frames in bounds. */
	if (t->depth > BL_READ_BYTES / bufsz)
		t->depth = BL_READ_BYTES / bufsz ? (unsigned)(BL_READ_BYTES / bufsz) : 1;
	pf_io_config icfg = { .queue_depth = t->depth, .max_files = 0,
			      .buffer_size = bufsz, .nbuffers = t->depth };
	pf_io_req *reqs = calloc(t->depth, sizeof(*reqs));
	bl_reads p = {
		.t = t, .bufsz = bufsz, .next = t->lo,
		.file_slot = malloc(s->nfiles * sizeof(int)),
		.frame = calloc(t->depth, sizeof(size_t)),
		.bufs = aligned_alloc(ALIGN, bufsz * t->depth),
	};
	pf_io_plan plan = { bl_next, bl_done, &p };
	int ret = -ENOMEM;

	if (!reqs || !p.file_slot || !p.frame || !p.bufs)
		goto out;
	for (size_t i = 0; i < s->nfiles; i++)
		p.file_slot[i] = -1;
	icfg.buffers = p.bufs;
	icfg.max_files = (unsigned)(s->nfiles < 4096 ? 4096 : s->nfiles + 1);
	ret = pf_io_create(&p.io, &icfg, &t->err);
	if (ret < 0)
		goto out;
	t->backend = pf_io_backend_name(p.io);
	bl_start(t);
	ret = pf_io_run(p.io, reqs, t->depth, &plan, &t->err);
out:
	bl_start(t);
	if (ret < 0 && !t->err.code)
		pf_error_set(&t->err, ret, PF_OFFSET_NONE, 0, "read pass: %s",
			     pf_strerror(ret));
	t->ret = ret < 0 ? ret : 0;
	pf_io_free(p.io);
	free(reqs);
	free(p.frame);
	free(p.file_slot);
	free(p.bufs);
	return NULL;
}

/* pread each frame, check its CRC and decompress it: the work the loader
 * must do before it can decode a record, and nothing else. */
static void *bl_decompress_main(void *arg)
{
	bl_thread *t = arg;
	const bl_set *s = t->set;
	uint8_t *src = malloc(s->max_c ? s->max_c : 1);
	uint8_t *dst = malloc(s->max_u ? s->max_u : 1);
	pf_frame_decoder *dec = NULL;
	int fd = -1, ret = -ENOMEM;
	uint32_t cur = UINT32_MAX;

	if (!src || !dst || pf_frame_decoder_create(&dec) < 0)
		goto out;
	bl_start(t);
	ret = 0;
	for (size_t i = t->lo; i < t->hi && ret == 0; i++) {
		const bl_frame *f = &s->frames[i];
		int64_t n;

		/* Frames are in file order: one file open at a time. */
		if (f->file != cur) {
			if (fd >= 0)
				close(fd);
			cur = f->file;
			fd = pf_file_open(s->paths[cur], &t->err);
			if (fd < 0) {
				ret = fd;
				break;
			}
		}
		n = pf_file_pread(fd, src, f->fi.compressed_size, f->fi.offset,
				  s->paths[cur], &t->err);
		if (n >= 0 && n < (int64_t)f->fi.compressed_size)
			n = pf_error_set(&t->err, -EIO, PF_OFFSET_FILE, f->fi.offset,
					 "decompress pass: short read");
		if (n >= 0)
			n = pf_frame_decode(dec, &f->fi, src, f->fi.compressed_size, dst,
					    s->max_u, &t->err);
		if (n < 0) {
			pf_error_set_file(&t->err, s->paths[cur]);
			ret = (int)n;
		}
	}
out:
	bl_start(t);
	if (ret < 0 && !t->err.code)
		pf_error_set(&t->err, ret, PF_OFFSET_NONE, 0, "decompress pass: %s",
			     pf_strerror(ret));
	t->ret = ret;
	if (fd >= 0)
		close(fd);
	pf_frame_decoder_free(dec);
	free(src);
	free(dst);
	return NULL;
}

/* Run T threads over contiguous frame ranges of equal compressed bytes.
 * @return 0 with the wall seconds in *seconds, or 1 after printing. */
static int bl_pass(const bl_set *s, unsigned nthreads, unsigned depth,
		   bool direct, void *(*fn)(void *), double *seconds,
		   const char **backend)
{
	bl_thread *t = calloc(nthreads, sizeof(*t));
	pthread_barrier_t start;
	uint64_t acc = 0, t0;
	size_t k = 0;
	int ret = 0;

	if (!t || pthread_barrier_init(&start, NULL, nthreads + 1)) {
		cli_fail("out of memory");
		free(t);
		return 1;
	}
	for (unsigned i = 0; i < nthreads; i++) {
		uint64_t goal = s->cbytes * (i + 1) / nthreads;

		t[i].set = s;
		t[i].depth = depth;
		t[i].direct = direct;
		t[i].lo = k;
		while (k < s->nframes && (acc < goal || i + 1 == nthreads))
			acc += s->frames[k++].fi.compressed_size;
		t[i].hi = k;
		t[i].start = &start;
		pf_error_clear(&t[i].err);
	}
	for (unsigned i = 0; i < nthreads; i++) {
		if (pthread_create(&t[i].thread, NULL, fn, &t[i])) {
			/* The others wait at the barrier for it: nothing to undo. */
			cli_fail("cannot start a baseline thread");
			exit(1);
		}
	}
	pthread_barrier_wait(&start);
	t0 = pf_now_ns();
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(t[i].thread, NULL);
	*seconds = (double)(pf_now_ns() - t0) * 1e-9;
	pthread_barrier_destroy(&start);
	for (unsigned i = 0; i < nthreads && !ret; i++) {
		if (t[i].ret < 0) {
			cli_print_error(&t[i].err);
			ret = 1;
		}
		if (backend && t[i].backend)
			*backend = t[i].backend;
	}
	free(t);
	return ret;
}

/* ------------------------------------------------------------------ */
/* The report                                                           */

typedef struct report {
	const options *o;
	const char *features;
	size_t nfiles;
	char **files;		/* the inputs, expanded */
	bool *empty;		/* [nfiles]: the file has 0 bytes */
	size_t nempty;
	loader_run run;		/* the median run */
	double seconds;		/* median */
	double p50, p90, p99;
	double f_io, f_decode, f_wait;
	const char *bottleneck;
	bool baseline;
	double read_s, dec_s;
	const bl_set *bl;
	const char *bl_backend;
	const regions_opts *regions;	/* storage regions (regions.c) */
} report;

static double mb(uint64_t bytes) { return (double)bytes / 1e6; }

static void report_derive(report *r)
{
	const pf_loader_metrics *m = &r->run.m;
	double wall_ns = r->run.seconds * 1e9;
	unsigned dt = m->decode_threads ? m->decode_threads : 1;

	r->p50 = pf_hist_quantile_us(m->next_hist, 0.50);
	r->p90 = pf_hist_quantile_us(m->next_hist, 0.90);
	r->p99 = pf_hist_quantile_us(m->next_hist, 0.99);
	/* Busy fraction per thread of the stage: the I/O stage is one
	 * thread, decode is decode_threads. */
	r->f_io = wall_ns > 0 ? (double)m->io.busy_ns / wall_ns : 0;
	r->f_decode = wall_ns > 0 ? (double)m->decode.busy_ns / wall_ns / dt : 0;
	r->f_wait = wall_ns > 0 ? (double)m->next_wait_ns / wall_ns : 0;
	r->bottleneck = "io";
	if (r->f_decode > r->f_io)
		r->bottleneck = "decode";
}

/* Loader decompressed MB/s over a pass's, on the same kind of bytes. */
static double ratio(const report *r, double pass_seconds)
{
	double loader = (double)r->run.m.bytes_decompressed / r->seconds;
	double pass = (double)r->bl->ubytes / pass_seconds;

	return pass > 0 ? loader / pass : 0;
}

/*
 * The steady rate: records handed out after the first batch, over the
 * time from the first batch's return to the last one's (start-up, index
 * reads, pool allocation and the pipeline fill, is left out, and so is
 * pf_loader_free()).  A window too small to measure (a dataset read in a
 * few batches that were all prefetched gave 84 M records/s) is no
 * figure: at least STEADY_MIN_BATCHES batches and STEADY_MIN_S seconds,
 * else n/a and *why says which was short.
 */
#define STEADY_MIN_BATCHES 10u
#define STEADY_MIN_S 0.1

static double steady(const report *r, const char **why)
{
	*why = NULL;
	if (r->run.steady_batches < STEADY_MIN_BATCHES)
		*why = "fewer than 10 batches after the first";
	else if (r->run.steady_s < STEADY_MIN_S)
		*why = "under 100 ms from the first batch to the last";
	return *why ? 0 : (double)r->run.steady_records / r->run.steady_s;
}

/* Files of 0 bytes are read as 0 records (a compressed one by name is
 * damaged data, which the loader has already failed on or dropped): the
 * report names them, since a dataset rarely means to hold one. */
static void find_empty(report *r)
{
	r->empty = calloc(r->nfiles ? r->nfiles : 1, sizeof(*r->empty));
	for (size_t i = 0; r->empty && i < r->nfiles; i++) {
		struct stat st;

		if (stat(r->files[i], &st) == 0 && S_ISREG(st.st_mode) && !st.st_size) {
			r->empty[i] = true;
			r->nempty++;
		}
	}
}

#define EMPTY_NAMED 4u	/* empty files named in the text report */

static void print_empty(const report *r)
{
	size_t named = 0;

	printf("empty       %zu file%s of 0 bytes, 0 records:", r->nempty,
	       r->nempty == 1 ? "" : "s");
	for (size_t i = 0; i < r->nfiles && named < EMPTY_NAMED; i++)
		if (r->empty[i])
			printf("%s %s", named++ ? "," : "", r->files[i]);
	if (r->nempty > named)
		printf(" and %zu more", r->nempty - named);
	printf("\n");
}

static void print_text(const report *r)
{
	const options *o = r->o;
	const pf_loader_metrics *m = &r->run.m;
	double s = r->seconds;
	uint64_t global = o->per_core_batch * o->cores * o->num_hosts;

	printf("files       %zu\n", r->nfiles);
	printf("features    %s\n", r->features);
	printf("topology    host %llu of %llu, %llu cores x %llu per-core batch"
	       " (global batch %llu)\n",
	       (unsigned long long)o->host_index, (unsigned long long)o->num_hosts,
	       (unsigned long long)o->cores, (unsigned long long)o->per_core_batch,
	       (unsigned long long)global);
	if (o->shuffle)
		printf("order       shuffled: frames permuted, records in a window of %llu, "
		       "seed %llu\n", (unsigned long long)o->window, (unsigned long long)o->seed);
	else
		printf("order       the files' order (not shuffled: --shuffle)\n");
	printf("records     %llu in %llu steps (%llu steps an epoch, %llu records in the data)\n",
	       (unsigned long long)m->records, (unsigned long long)m->steps,
	       (unsigned long long)m->steps_per_epoch,
	       (unsigned long long)m->records_per_epoch);
	printf("time        %.3f s%s: %.0f records/s, %.1f batches/s\n", s,
	       o->repeat > 1 ? " (median)" : "", (double)m->records / s,
	       (double)m->steps / s);
	{
		const char *why;
		double v = steady(r, &why);

		if (why)
			printf("steady      n/a (%s)\n", why);
		else
			printf("steady      %.0f records/s from the first batch to the last\n", v);
	}
	printf("read        %.1f MB compressed (%.1f MB/s) in %llu reads, %.1f MB produced "
	       "(%.1f MB/s)\n", mb(m->bytes_read), mb(m->bytes_read) / s,
	       (unsigned long long)m->io_requests, mb(m->bytes_decompressed),
	       mb(m->bytes_decompressed) / s);
	printf("stages      busy per thread: io %.0f%% (1 thread), decode %.0f%% (%u threads);"
	       " consumer waited %.0f%%\n",
	       r->f_io * 100, r->f_decode * 100, m->decode_threads, r->f_wait * 100);
	printf("bottleneck  %s\n", r->bottleneck);
	printf("next()      p50 %.0f us, p90 %.0f us, p99 %.0f us; first batch %.1f ms\n",
	       r->p50, r->p90, r->p99, r->run.first_batch_ms);
	printf("memory      peak RSS %.1f MiB; budget %llu MiB, pools %.1f MiB\n",
	       (double)r->run.peak_rss / 1048576.0, (unsigned long long)o->memory_mib,
	       (double)m->memory_bytes / 1048576.0);
	printf("remainder   %llu records dropped, %llu wrapped\n",
	       (unsigned long long)m->remainder_dropped,
	       (unsigned long long)m->remainder_wrapped);
	if (r->nempty)
		print_empty(r);
	if (o->on_corrupt == PF_CORRUPT_SKIP || m->corrupt_drops)
		printf("corrupt     %llu units dropped (%llu records known lost), %llu empty "
		       "rows handed out%s%s\n", (unsigned long long)m->corrupt_drops,
		       (unsigned long long)m->corrupt_records, (unsigned long long)m->holes,
		       o->quarantine ? "; logged to " : "", o->quarantine ? o->quarantine : "");
	printf("io          %s, depth %llu", m->io_backend ? m->io_backend : "none",
	       (unsigned long long)o->io_depth);
	if (o->direct)
		printf(", O_DIRECT on %u of %zu files (aligned indexed shards only)",
		       m->files_direct, r->nfiles);
	if (m->io_retries || m->io_faults || m->io_timeouts || m->io_short_reads)
		printf("; %llu retries, %llu faults injected, %llu timeouts, %llu short reads",
		       (unsigned long long)m->io_retries, (unsigned long long)m->io_faults,
		       (unsigned long long)m->io_timeouts, (unsigned long long)m->io_short_reads);
	printf("\n");
	if (!r->baseline)
		return;
	printf("baseline    %zu indexed files, %zu frames, %.1f MB -> %.1f MB, %llu threads\n",
	       r->bl->nindexed, r->bl->nframes, mb(r->bl->cbytes), mb(r->bl->ubytes),
	       (unsigned long long)o->threads);
	printf("  read        %.3f s: %.1f MB/s read (%.1f MB/s decompressed-equivalent), %s\n",
	       r->read_s, mb(r->bl->cbytes) / r->read_s, mb(r->bl->ubytes) / r->read_s,
	       r->bl_backend ? r->bl_backend : "none");
	printf("  decompress  %.3f s: %.1f MB/s decompressed\n", r->dec_s,
	       mb(r->bl->ubytes) / r->dec_s);
	printf("  loader      %.1f MB/s decompressed: %.2fx the read pass, %.2fx the decompress pass\n",
	       mb(m->bytes_decompressed) / s, ratio(r, r->read_s), ratio(r, r->dec_s));
}

static void json_kv_double(const char *key, double v, bool comma)
{
	printf("\"%s\":", key);
	cli_json_double(stdout, v);
	if (comma)
		putchar(',');
}

static void json_kv_u64(const char *key, uint64_t v, bool comma)
{
	printf("\"%s\":%llu%s", key, (unsigned long long)v, comma ? "," : "");
}

static void json_kv_str(const char *key, const char *v, bool comma)
{
	printf("\"%s\":", key);
	cli_json_string(stdout, v, strlen(v));
	if (comma)
		putchar(',');
}

static void print_json(const report *r)
{
	const options *o = r->o;
	const pf_loader_metrics *m = &r->run.m;
	double s = r->seconds;

	putchar('{');
	json_kv_u64("records", m->records, true);
	json_kv_u64("steps", m->steps, true);
	json_kv_double("seconds", s, true);
	json_kv_double("records_per_s", (double)m->records / s, true);
	json_kv_double("batches_per_s", (double)m->steps / s, true);
	{
		const char *why;
		double v = steady(r, &why);

		if (why) {
			printf("\"steady_records_per_s\":null,");
			json_kv_str("steady_na", why, true);
		} else {
			json_kv_double("steady_records_per_s", v, true);
		}
	}
	json_kv_u64("bytes_read", m->bytes_read, true);
	json_kv_u64("bytes_decompressed", m->bytes_decompressed, true);
	json_kv_double("mb_per_s_read", mb(m->bytes_read) / s, true);
	json_kv_double("mb_per_s_decompressed", mb(m->bytes_decompressed) / s, true);
	json_kv_str("bottleneck", r->bottleneck, true);
	printf("\"stages\":{");
	json_kv_double("io", r->f_io, true);
	json_kv_double("decode", r->f_decode, true);
	json_kv_double("consumer_wait", r->f_wait, false);
	printf("},\"next_latency_us\":{");
	json_kv_double("p50", r->p50, true);
	json_kv_double("p90", r->p90, true);
	json_kv_double("p99", r->p99, false);
	printf("},");
	json_kv_double("first_batch_ms", r->run.first_batch_ms, true);
	json_kv_u64("peak_rss_bytes", r->run.peak_rss, true);
	json_kv_u64("memory_budget_bytes", o->memory_mib << 20, true);
	json_kv_u64("memory_pool_bytes", m->memory_bytes, true);
	json_kv_u64("remainder_dropped", m->remainder_dropped, true);
	json_kv_u64("remainder_wrapped", m->remainder_wrapped, true);
	printf("\"corrupt\":{");
	json_kv_u64("drops", m->corrupt_drops, true);
	json_kv_u64("records_lost", m->corrupt_records, true);
	json_kv_u64("holes", m->holes, false);
	printf("},");
	json_kv_str("io_backend", m->io_backend ? m->io_backend : "none", true);
	json_kv_u64("io_requests", m->io_requests, true);
	json_kv_u64("io_retries", m->io_retries, true);
	json_kv_u64("io_faults_injected", m->io_faults, true);
	json_kv_u64("io_timeouts", m->io_timeouts, true);
	json_kv_u64("io_short_reads", m->io_short_reads, true);
	json_kv_u64("files_direct", m->files_direct, true);
	json_kv_u64("io_depth", o->io_depth, true);
	json_kv_u64("threads", m->decode_threads, true);
	json_kv_u64("files", r->nfiles, true);
	printf("\"empty_files\":[");
	for (size_t i = 0, k = 0; i < r->nfiles; i++)
		if (r->empty[i]) {
			if (k++)
				putchar(',');
			cli_json_string(stdout, r->files[i], strlen(r->files[i]));
		}
	printf("],");
	json_kv_str("features", r->features, true);
	json_kv_u64("records_per_epoch", m->records_per_epoch, true);
	json_kv_u64("steps_per_epoch", m->steps_per_epoch, true);
	json_kv_u64("repeat", o->repeat, true);
	printf("\"shuffle\":%s,", o->shuffle ? "true" : "false");
	json_kv_u64("shuffle_window", o->shuffle ? o->window : 0, true);
	json_kv_u64("seed", o->seed, true);
	printf("\"topology\":{");
	json_kv_u64("num_hosts", o->num_hosts, true);
	json_kv_u64("host_index", o->host_index, true);
	json_kv_u64("cores", o->cores, true);
	json_kv_u64("per_core_batch", o->per_core_batch, true);
	json_kv_u64("global_batch", o->per_core_batch * o->cores * o->num_hosts, false);
	printf("}");
	if (r->baseline) {
		printf(",\"baseline\":{");
		json_kv_double("read_seconds", r->read_s, true);
		json_kv_double("decompress_seconds", r->dec_s, true);
		json_kv_double("read_mb_per_s", mb(r->bl->cbytes) / r->read_s, true);
		json_kv_double("decompress_mb_per_s", mb(r->bl->ubytes) / r->dec_s, true);
		json_kv_u64("bytes", r->bl->cbytes, true);
		json_kv_u64("bytes_decompressed", r->bl->ubytes, true);
		json_kv_u64("files", r->bl->nindexed, true);
		json_kv_u64("frames", r->bl->nframes, true);
		json_kv_u64("threads", o->threads, true);
		json_kv_str("io_backend", r->bl_backend ? r->bl_backend : "none", false);
		printf("},");
		json_kv_double("ratio_to_read", ratio(r, r->read_s), true);
		json_kv_double("ratio_to_decompress", ratio(r, r->dec_s), false);
	}
	train_print_json(r->o->tc);
	regions_print_json(r->regions);
	printf("}\n");
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

/* ------------------------------------------------------------------ */
/* loadbench plan: the scaling plan                                     */

typedef struct plan_opts {
	pf_scaling_input in;
	int rule, remainder;
	double mbps;
	bool json, batch_given;
} plan_opts;

#define P(field) offsetof(plan_opts, field)

static const cli_opt plan_cli[] = {
	{ CLI_SECTION, .help = "the pod:" },
	/* b, C and H may be 0 here: the plan says why that cannot be. */
	{ CLI_U64, "per-core-batch", .arg = "b", .off = P(in.per_core_batch),
	  .max = UINT64_MAX, .suffix = true, .seen = CLI_SEEN(plan_opts, batch_given),
	  .help = "records per core per step (required)" },
	{ CLI_U64, "cores", .arg = "C", .off = P(in.cores), .max = UINT64_MAX,
	  .help = "cores per host (default 1)" },
	{ CLI_U64, "hosts", .arg = "H", .off = P(in.hosts), .max = UINT64_MAX,
	  .help = "hosts (default 1)" },
	/* In the plan 0 means "not given": refused as a value. */
	{ CLI_SECTION, .help = "a reference run:" },
	{ CLI_U64, "ref-global-batch", .arg = "B0", .off = P(in.ref_global_batch), .min = 1,
	  .max = UINT64_MAX, .suffix = true, .help = "its global batch" },
	{ CLI_U64, "ref-steps", .arg = "S0", .off = P(in.ref_steps), .min = 1,
	  .max = UINT64_MAX, .suffix = true,
	  .help = "its train steps: the plan keeps S0 x B0 examples, S0 x B0 / B "
		  "steps, rounded up when not whole" },
	{ CLI_DOUBLE, "ref-lr", .arg = "L0", .off = P(in.ref_lr), .lo = 0, .hi = 1e308,
	  .above = true, .help = "its learning rate" },
	{ CLI_CHOICE, "rule", .arg = "none|linear|sqrt", .off = P(rule),
	  .choices = "none|linear|sqrt",
	  .help = "the plan's rate: L0, L0 x B/B0 or L0 x sqrt(B/B0) (default none)" },
	{ CLI_U64, "warmup-steps", .arg = "W0", .off = P(in.ref_warmup_steps),
	  .max = UINT64_MAX, .suffix = true,
	  .help = "its warm-up, kept as examples: W0 x B0 / B steps, rounded up "
		  "(taken as is without B0); the rate ramps linearly to its value "
		  "over them" },
	{ CLI_SECTION, .help = "or an epoch schedule:" },
	{ CLI_U64, "records", .arg = "N", .off = P(in.records), .min = 1, .max = UINT64_MAX,
	  .suffix = true, .help = "records in the dataset" },
	{ CLI_U64, "epochs", .arg = "E", .off = P(in.epochs), .min = 1, .max = UINT64_MAX,
	  .help = "passes over them (default 1)" },
	{ CLI_CHOICE, "remainder", .arg = "drop|wrap", .off = P(remainder),
	  .choices = "drop|wrap",
	  .help = "the N mod B records past the last whole step: dropped, or the "
		  "last step filled by repeating records, as the loader does "
		  "(default drop)" },
	{ CLI_SECTION, .help = "input bandwidth:" },
	{ CLI_DOUBLE, "step-time-ms", .arg = "T", .off = P(in.step_time_ms), .lo = 0,
	  .hi = 1e308, .above = true, .help = "one train step's time" },
	{ CLI_DOUBLE, "record-bytes", .arg = "R", .off = P(in.record_bytes), .lo = 0,
	  .hi = 1e308, .above = true, .help = "bytes read per record (compressed, as stored)" },
	{ CLI_DOUBLE, "measured-mbps", .arg = "M", .off = P(mbps), .lo = 0, .hi = 1e308,
	  .above = true,
	  .help = "MB/s one host read in a loadbench run (its \"MB/s read\"), printed "
		  "beside the need" },
	{ CLI_FLAG, "json", .off = P(json), .help = "one JSON object on stdout instead of the table" },
	{ CLI_END },
};

static const cli_command plan_command = {
	.name = "loadbench plan",
	.usage = "usage: loadbench plan --per-core-batch b [options]\n",
	.about = "The scaling plan of a pod of H hosts with C cores each: the global\n"
		 "batch B = b x C x H, the train steps that keep the examples of a\n"
		 "reference run (or the steps of an epoch schedule, as the loader cuts\n"
		 "them), the learning rate and warm-up, what does not divide evenly and\n"
		 "what is dropped, and the input bandwidth a host and the pod need.\n",
	.opts = plan_cli,
	.footer = "Exit status: 0 done, 2 bad usage or an impossible plan.\n",
};

/* v with thousands separators ("4,096"), in buf. */
static const char *plan_grouped(uint64_t v, char buf[32])
{
	char digits[24];
	int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);
	int o = 0;

	for (int i = 0; i < n; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

/* One row of the table: label, the reference's value (NULL: no column,
 * "": empty), the plan's value, a note. */
static void plan_row(bool ref_column, const char *label, const char *ref,
		     const char *plan, const char *note)
{
	if (ref_column)
		printf("%-20s %14s %14s", label, ref ? ref : "", plan);
	else
		printf("%-20s %14s", label, plan);
	if (note && *note)
		printf("   %s", note);
	putchar('\n');
}

static void plan_print_text(const pf_scaling_input *in, const pf_scaling_plan *p)
{
	bool ref = in->ref_global_batch > 0;
	char a[32], b[32], c[32], d[32], note[256];

	if (ref)
		printf("%-20s %14s %14s\n", "", "reference", "plan");
	else
		printf("%-20s %14s\n", "", "plan");
	snprintf(note, sizeof(note), "%llu host%s x %s core%s",
		 (unsigned long long)in->hosts, in->hosts == 1 ? "" : "s",
		 plan_grouped(in->cores, c), in->cores == 1 ? "" : "s");
	plan_row(ref, "cores in all", p->ref_cores ? plan_grouped(p->ref_cores, a) : "",
		 plan_grouped(p->total_cores, b), note);
	plan_row(ref, "per-core batch", p->ref_cores ? plan_grouped(in->per_core_batch, a) : "",
		 plan_grouped(in->per_core_batch, b), NULL);
	note[0] = '\0';
	if (ref)
		snprintf(note, sizeof(note), "x%.6g", p->batch_ratio);
	plan_row(ref, "global batch", ref ? plan_grouped(in->ref_global_batch, a) : NULL,
		 plan_grouped(p->global_batch, b), note);

	if (p->mode == PF_SCALING_STEPS) {
		plan_row(ref, "train steps", plan_grouped(in->ref_steps, a),
			 plan_grouped(p->steps, b), p->steps_rounded ? "rounded up" : NULL);
		if (p->extra_examples)
			snprintf(note, sizeof(note), "%s more", plan_grouped(p->extra_examples, c));
		else
			snprintf(note, sizeof(note), "the same");
		plan_row(ref, "examples", plan_grouped(p->ref_examples, a),
			 plan_grouped(p->examples, b), note);
	} else if (p->mode == PF_SCALING_EPOCHS) {
		uint64_t E = in->epochs ? in->epochs : 1;

		plan_row(ref, "records", ref ? "" : NULL, plan_grouped(in->records, a), NULL);
		snprintf(note, sizeof(note), "%s(%s / %s)",
			 in->remainder_wrap ? "ceil" : "floor", plan_grouped(in->records, c),
			 plan_grouped(p->global_batch, d));
		plan_row(ref, "steps per epoch", ref ? "" : NULL,
			 plan_grouped(p->steps_per_epoch, a), note);
		if (in->remainder_wrap)
			plan_row(ref, "repeated per epoch", ref ? "" : NULL,
				 plan_grouped(p->repeated_per_epoch, a),
				 "the last step is filled from the start of each host's share");
		else
			plan_row(ref, "dropped per epoch", ref ? "" : NULL,
				 plan_grouped(p->dropped_per_epoch, a),
				 "the records past the last whole step");
		plan_row(ref, "epochs", ref ? "" : NULL, plan_grouped(E, a), NULL);
		plan_row(ref, "train steps", ref ? "" : NULL, plan_grouped(p->steps, a), NULL);
		plan_row(ref, "examples", ref ? "" : NULL, plan_grouped(p->examples, a), NULL);
		if (in->remainder_wrap)
			plan_row(ref, "repeated", ref ? "" : NULL, plan_grouped(p->repeated, a), NULL);
		else
			plan_row(ref, "dropped", ref ? "" : NULL, plan_grouped(p->dropped, a), NULL);
	}

	if (p->has_lr) {
		snprintf(a, sizeof(a), "%.6g", in->ref_lr);
		snprintf(b, sizeof(b), "%.6g", p->lr);
		if (ref)
			snprintf(note, sizeof(note), "%s (none %.6g, linear %.6g, sqrt %.6g)",
				 pf_lr_rule_name(p->rule), p->lr_by_rule[PF_LR_NONE],
				 p->lr_by_rule[PF_LR_LINEAR], p->lr_by_rule[PF_LR_SQRT]);
		else
			snprintf(note, sizeof(note), "%s", pf_lr_rule_name(p->rule));
		plan_row(ref, "learning rate", ref ? a : NULL, b, note);
	}
	if (in->ref_warmup_steps) {
		note[0] = '\0';
		if (p->warmup_rounded)
			snprintf(note, sizeof(note), "rounded up");
		plan_row(ref, "warm-up steps", ref ? plan_grouped(in->ref_warmup_steps, a) : NULL,
			 plan_grouped(p->warmup_steps, b), note);
	}

	if (p->mode == PF_SCALING_STEPS && p->steps_rounded) {
		char e[32], f[32];

		printf("\nsteps: %s x %s / %s = %.2f, not whole: rounded up to %s\n",
		       plan_grouped(in->ref_steps, a), plan_grouped(in->ref_global_batch, b),
		       plan_grouped(p->global_batch, c), p->steps_exact,
		       plan_grouped(p->steps, d));
		printf("       %s examples (%.2f%%) more than the reference; %s steps "
		       "would train %s fewer\n",
		       plan_grouped(p->extra_examples, a),
		       100.0 * (double)p->extra_examples / (double)p->ref_examples,
		       plan_grouped(p->steps - 1, e),
		       plan_grouped(p->ref_examples - (p->steps - 1) * p->global_batch, f));
	}

	if (p->has_bandwidth) {
		printf("\n%-20s %14s %14s\n", "input", "records/s", "MB/s");
		printf("%-20s %14.0f %14.2f", "per host", p->host_records_per_s,
		       p->host_bytes_per_s / 1e6);
		if (p->measured_ratio > 0)
			printf("   measured %.2f MB/s: %.2fx the need%s",
			       in->measured_host_bytes_per_s / 1e6, p->measured_ratio,
			       p->measured_ratio < 1 ? " (input-bound)" : "");
		putchar('\n');
		printf("%-20s %14.0f %14.2f\n", "pod", p->pod_records_per_s,
		       p->pod_bytes_per_s / 1e6);
	}
}

static void plan_json_u64(const char *key, uint64_t v, bool comma)
{
	printf("\"%s\":%llu%s", key, (unsigned long long)v, comma ? "," : "");
}

static void plan_json_double(const char *key, double v, bool comma)
{
	printf("\"%s\":", key);
	cli_json_double(stdout, v);
	if (comma)
		putchar(',');
}

static void plan_print_json(const pf_scaling_input *in, const pf_scaling_plan *p)
{
	static const char *const modes[] = { "batch", "steps", "epochs" };

	putchar('{');
	plan_json_u64("per_core_batch", in->per_core_batch, true);
	plan_json_u64("cores", in->cores, true);
	plan_json_u64("hosts", in->hosts, true);
	plan_json_u64("cores_total", p->total_cores, true);
	plan_json_u64("host_batch", p->host_batch, true);
	plan_json_u64("global_batch", p->global_batch, true);
	printf("\"mode\":\"%s\",", modes[p->mode]);
	if (in->ref_global_batch) {
		printf("\"reference\":{");
		plan_json_u64("global_batch", in->ref_global_batch, true);
		if (p->ref_cores)
			plan_json_u64("cores_total", p->ref_cores, true);
		if (in->ref_steps) {
			plan_json_u64("steps", in->ref_steps, true);
			plan_json_u64("examples", p->ref_examples, true);
		}
		if (in->ref_lr > 0)
			plan_json_double("lr", in->ref_lr, true);
		plan_json_u64("warmup_steps", in->ref_warmup_steps, false);
		printf("},");
		plan_json_double("batch_ratio", p->batch_ratio, true);
	}
	if (p->mode != PF_SCALING_BATCH_ONLY) {
		plan_json_u64("steps", p->steps, true);
		plan_json_u64("examples", p->examples, true);
	}
	if (p->mode == PF_SCALING_STEPS) {
		plan_json_double("steps_exact", p->steps_exact, true);
		printf("\"steps_rounding\":\"%s\",", p->steps_rounded ? "up" : "none");
		plan_json_u64("extra_examples", p->extra_examples, true);
	}
	if (p->mode == PF_SCALING_EPOCHS) {
		printf("\"epochs\":{");
		plan_json_u64("records", in->records, true);
		plan_json_u64("epochs", in->epochs ? in->epochs : 1, true);
		printf("\"remainder\":\"%s\",", in->remainder_wrap ? "wrap" : "drop");
		plan_json_u64("steps_per_epoch", p->steps_per_epoch, true);
		plan_json_u64("dropped_per_epoch", p->dropped_per_epoch, true);
		plan_json_u64("repeated_per_epoch", p->repeated_per_epoch, true);
		plan_json_u64("dropped", p->dropped, true);
		plan_json_u64("repeated", p->repeated, false);
		printf("},");
	}
	if (p->has_lr) {
		printf("\"lr\":{\"rule\":\"%s\",", pf_lr_rule_name(p->rule));
		plan_json_double("value", p->lr, true);
		printf("\"by_rule\":{");
		for (unsigned r = 0; r < PF_LR_RULES; r++) {
			printf("\"%s\":", pf_lr_rule_name((pf_lr_rule)r));
			/* linear and sqrt need B0; null when it was not given */
			if (r == PF_LR_NONE || in->ref_global_batch)
				cli_json_double(stdout, p->lr_by_rule[r]);
			else
				fputs("null", stdout);
			if (r + 1 < PF_LR_RULES)
				putchar(',');
		}
		printf("}},");
	}
	if (p->has_bandwidth) {
		printf("\"bandwidth\":{");
		plan_json_double("step_time_ms", in->step_time_ms, true);
		plan_json_double("record_bytes", in->record_bytes, true);
		plan_json_double("host_records_per_s", p->host_records_per_s, true);
		plan_json_double("pod_records_per_s", p->pod_records_per_s, true);
		plan_json_double("host_mb_per_s", p->host_bytes_per_s / 1e6, true);
		plan_json_double("pod_mb_per_s", p->pod_bytes_per_s / 1e6,
				 p->measured_ratio > 0);
		if (p->measured_ratio > 0) {
			plan_json_double("measured_mb_per_s",
					 in->measured_host_bytes_per_s / 1e6, true);
			plan_json_double("measured_ratio", p->measured_ratio, false);
		}
		printf("},");
	}
	plan_json_u64("warmup_steps", p->warmup_steps, true);
	printf("\"warmup_rounded\":%s}\n", p->warmup_rounded ? "true" : "false");
}

/* `loadbench plan ...` (argv[0] is "plan").  @return the exit status. */
static int plan_main(int argc, char **argv)
{
	plan_opts o = { .in = { .cores = 1, .hosts = 1 } };
	pf_scaling_plan p;
	pf_error err;
	int ret, first;

	ret = cli_parse(&plan_command, argc, argv, &o, &first);
	if (ret >= 0)
		return ret;
	o.in.rule = (pf_lr_rule)o.rule;
	o.in.remainder_wrap = o.remainder == PF_REMAINDER_WRAP;
	o.in.measured_host_bytes_per_s = o.mbps * 1e6;
	if (first < argc)
		return cli_usage("unexpected argument '%s'", argv[first]);
	if (!o.batch_given)
		return cli_usage("--per-core-batch is required");
	pf_error_clear(&err);
	if (pf_scaling_plan_compute(&p, &o.in, &err) < 0)
		return cli_usage("%s", err.msg);
	if (o.json)
		plan_print_json(&o.in, &p);
	else
		plan_print_text(&o.in, &p);
	return 0;
}

int main(int argc, char **argv)
{
	options o;
	pf_loader_config cfg;
	pf_spec spec;
	pf_error err;
	report r;
	bl_set bl = { 0 };
	loader_run runs[MAX_REPEAT];
	double secs[MAX_REPEAT], read_s[MAX_REPEAT], dec_s[MAX_REPEAT];
	char **files = NULL, *inferred = NULL;
	pf_manifest *manifest = NULL;
	int nfiles = 0, ret, first;
	static const cli_subcommand subcommands[] = {
		{ "plan", "the scaling plan of a pod", plan_main },
		{ "ladder", "runs of 1, 2, 4... hosts and their scaling efficiency",
		  ladder_main },
		{ "regions", "the same files read from each declared mount", regions_main },
		{ 0 },
	};
	const cli_subcommand *sub = argc > 1 ? cli_find_subcommand(subcommands, argv[1]) : NULL;

	if (sub)
		return sub->main(argc - 1, argv + 1);
	ret = parse_options(argc, argv, &o, &first);
	if (ret >= 0)
		return ret;
	if (resolve_topology(o.host_index_given, &o.host_index, o.num_hosts_given,
			     &o.num_hosts))
		return 2;
	raise_fd_limit();
	nfiles = cli_expand_inputs(argv + first, argc - first, &files);
	if (nfiles < 0)
		return 1;
	if (nfiles == 0) {
		cli_fail("the arguments name no files");
		return 1;
	}
	ret = 1;
	memset(&r, 0, sizeof(r));
	/* Before anything is read: a refusal must read nothing. */
	if ((ret = regions_check(&o.ro, files, nfiles)) != 0)
		goto out;
	ret = 1;
	if (!o.no_manifest) {
		char *mpath = NULL;
		int found = pf_manifest_locate((const char *const *)argv + first,
					       (size_t)(argc - first), &mpath);

		pf_error_clear(&err);
		if (found > 0 && pf_manifest_load(&manifest, mpath, NULL, &err) < 0) {
			cli_print_error(&err);
			free(mpath);
			goto out;
		}
		free(mpath);
		/* The manifest is the dataset: a file added since is not read. */
		if (manifest && pf_manifest_shards(manifest) != (size_t)nfiles)
			fprintf(stderr, "loadbench: the manifest names %zu shards, %s holds %d "
				"files: only the manifest's are read (`shardtool manifest` "
				"again to take the others, or --no-manifest)\n",
				pf_manifest_shards(manifest), argv[first], nfiles);
	}
	if (!o.features) {
		/* From the first file with bytes: an empty one has no index. */
		int f = 0, d;
		struct stat st;

		while (!manifest && f + 1 < nfiles && stat(files[f], &st) == 0 && !st.st_size)
			f++;
		d = default_features(files[f], manifest, &inferred);
		if (d < 0)
			goto out;
		if (d > 0) {
			ret = cli_usage("--features is required: %s has no schema in an index",
					files[f]);
			goto out;
		}
		if (train_fit_features(&o.train, &inferred) < 0)
			goto out;
		o.features = inferred;
	}
	pf_error_clear(&err);
	if (pf_spec_parse(&spec, o.features, &err) < 0) {
		char line[PF_ERROR_LINE_MAX];
		pf_error_format(&err, line, sizeof(line));
		ret = cli_usage("--features: %s", line);
		goto out;
	}

	memset(&cfg, 0, sizeof(cfg));
	/* With a manifest the loader is given it (the one path named), not
	 * the files listed. */
	cfg.paths = manifest ? (const char *const *)argv + first : (const char *const *)files;
	cfg.npaths = manifest ? 1 : (size_t)nfiles;
	cfg.ignore_manifest = o.no_manifest;
	cfg.features = o.features;
	cfg.host_index = (uint32_t)o.host_index;
	cfg.num_hosts = (uint32_t)o.num_hosts;
	cfg.cores_per_host = (uint32_t)o.cores;
	cfg.per_core_batch = (uint32_t)o.per_core_batch;
	cfg.seed = o.seed;
	/* --steps alone runs as many epochs as the steps need. */
	cfg.epochs = o.steps && !o.epochs_given ? UINT32_MAX : (uint32_t)o.epochs;
	cfg.max_steps = o.steps;
	cfg.shuffle = o.shuffle;
	cfg.shuffle_window = (uint32_t)o.window;
	cfg.remainder = (pf_remainder)o.remainder;
	cfg.threads = (unsigned)o.threads;
	cfg.io_depth = (unsigned)o.io_depth;
	cfg.memory_budget = (size_t)o.memory_mib << 20;
	cfg.prefetch = (unsigned)o.prefetch;
	cfg.direct_io = o.direct;
	cfg.verify_records = o.verify;
	cfg.regions = o.ro.table;
	cfg.on_corrupt = (pf_corrupt_policy)o.on_corrupt;
	cfg.io_faults = o.faults;
	if (o.io_retries_given)
		cfg.io_retries = o.io_retries ? (int)o.io_retries : PF_IO_RETRIES_NONE;
	if (o.io_timeout_given)
		cfg.io_timeout_ms = o.io_timeout_ms ? (int)o.io_timeout_ms : PF_IO_TIMEOUT_NONE;
	cfg.quarantine = o.quarantine;
	cfg.max_corrupt = o.max_corrupt;
	/* Runs after the first start on the pools the first one faulted in,
	 * as a process making loaders one after another does (asked for:
	 * a loader keeps nothing by default). */
	cfg.keep_pools = o.repeat > 1;
	if (o.resume.n) {
		if (ckpt_check(&o.resume, o.quiet || o.json) < 0) {
			ret = 2;
			goto out;
		}
		cfg.resume = o.resume.blob;
		cfg.nresume = o.resume.n;
	}
	if (o.save_state) {
		struct sigaction sa = { .sa_handler = on_interrupt };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	ret = train_start(&o.tc, &o.train, &cfg, &spec, o.repeat);
	if (ret)
		goto out;
	ret = 1;

	if (o.baseline) {
		double warm;

		if (bl_load(&bl, files, (size_t)nfiles) < 0)
			goto out;
		if (!bl.nframes) {
			cli_fail("--baseline: no indexed shards among the files "
				 "(convert them with `shardtool convert`)");
			goto out;
		}
		/* Warm the page cache so every pass reads from the same place. */
		if (bl_pass(&bl, (unsigned)o.threads, (unsigned)o.io_depth, o.direct,
			    bl_read_main, &warm, NULL))
			goto out;
	}
	/* Interleave loader, read, decompress so drift hits all alike. */
	for (unsigned i = 0; i < o.repeat; i++) {
		int rr = run_loader(&o, &cfg, &runs[i]);

		if (rr) {
			ret = rr;
			goto out;
		}
		regions_run_done(&o.ro, runs[i].seconds);
		secs[i] = runs[i].seconds;
		if (!o.baseline)
			continue;
		if (bl_pass(&bl, (unsigned)o.threads, (unsigned)o.io_depth, o.direct,
			    bl_read_main, &read_s[i], &r.bl_backend) ||
		    bl_pass(&bl, (unsigned)o.threads, 0, false, bl_decompress_main,
			    &dec_s[i], NULL))
			goto out;
	}

	r.o = &o;
	r.features = o.features;
	r.nfiles = (size_t)nfiles;
	r.files = files;
	find_empty(&r);
	if (!r.empty) {
		cli_fail("out of memory");
		goto out;
	}
	r.seconds = median(secs, (unsigned)o.repeat);
	/* Metrics of the run nearest the median time. */
	unsigned best = 0;
	for (unsigned i = 1; i < o.repeat; i++)
		if (fabs(secs[i] - r.seconds) < fabs(secs[best] - r.seconds))
			best = i;
	r.run = runs[best];
	o.ro.report_run = best;
	r.regions = &o.ro;
	for (unsigned i = 0; i < o.repeat; i++)
		if (runs[i].peak_rss > r.run.peak_rss)
			r.run.peak_rss = runs[i].peak_rss;
	if (o.baseline) {
		r.baseline = true;
		r.bl = &bl;
		r.read_s = median(read_s, (unsigned)o.repeat);
		r.dec_s = median(dec_s, (unsigned)o.repeat);
	}
	report_derive(&r);
	if (train_finish(o.tc, &r.run.m, r.seconds))
		goto out;
	if (!train_reports(o.tc)) {
		/* another host of the pod: rank 0 prints the pod's report */
	} else if (o.json) {
		print_json(&r);
	} else {
		print_text(&r);
		regions_print_text(&o.ro);
		train_print_text(o.tc);
	}
	ret = 0;
out:
	bl_free(&bl);
	free(r.empty);
	free(inferred);
	pf_manifest_free(manifest);
	cli_free_inputs(files, nfiles);
	regions_free(&o.ro);
	ckpt_free(&o.resume);
	return train_end(o.tc, ret);
}
