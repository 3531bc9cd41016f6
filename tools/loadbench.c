/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench: run the loader over shards and report where the time goes,
 * beside pure read and pure decompress passes over the same files. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli.h"
#include "common_internal.h"
#include "pf_host.h"
#include "train.h"
#include "regions.h"

#define ALIGN 4096u
#define DEFAULT_WINDOW 8192u
#define DEFAULT_MEMORY_MIB 512u
#define PROGRESS_NS 250000000ull	/* redraw at most 4 times a second */
#define MAX_REPEAT 101u
#define BL_READ_BYTES (256u << 20)	/* read-pass buffers per thread */

static const char corrupt_usage[] =
	"faults and corrupt data:\n"
	"  --faults SPEC        inject read faults (io/pf_io.h; e.g. eio:0.01,seed=3;\n"
	"                       default $PODFEED_FAULTS)\n"
	"  --io-retries N       transient read errors retried (default 3; 0: none)\n"
	"  --io-timeout-ms MS   each read's limit (default 60000; 0: none)\n"
	"  --on-corrupt fail|skip  stop with an error naming file, offset, frame,\n"
	"                       record and cause (default), or drop the smallest\n"
	"                       damaged unit, count it and go on (rows of records\n"
	"                       lost in an indexed frame come out empty, marked)\n"
	"  --quarantine FILE    skip: append a JSON line per drop to FILE\n"
	"  --max-corrupt N      skip: stop with an error after N drops\n";

static const char usage[] =
	"usage: loadbench [options] SHARD...\n"
	"       loadbench plan [options]   (the scaling plan: loadbench plan --help)\n"
	"       loadbench ladder --hosts 1,2,4 [options] SHARD...  (loadbench ladder --help)\n"
	"\n"
	"Runs the podfeed loader over the shards (files, directories or globs)\n"
	"and reports throughput, where the time goes (the bottleneck stage),\n"
	"next() latency, time to first batch, and memory.\n"
	"\n"
	"topology and schedule:\n"
	"  --per-core-batch N   records per core per step (default 32)\n"
	"  --cores C            cores on this host (default 1)\n"
	"  --num-hosts H        hosts in the pod\n"
	"  --host-index I       this host, 0..H-1 (both by default from the\n"
	"                       launcher: MPI, TPU_WORKER_ID, RANK/WORLD_SIZE;\n"
	"                       else host 0 of 1; what is set must agree;\n"
	"                       --num-hosts H > 1 needs an index)\n"
	"  --epochs E           passes over the data (default 1; with --steps\n"
	"                       alone: as many as the steps need)\n"
	"  --steps S            stop after S steps in all\n"
	"  --seed S             shuffle seed (default 0)\n"
	"  --shuffle-window W   records in the shuffle window (default 8192;\n"
	"                       0 turns shuffling off)\n"
	"  --remainder drop|wrap  the records past the last whole step of an\n"
	"                       epoch (default drop)\n"

	"  --features SPEC      feature spec, e.g. \"tokens:int32[256],label:int64[1]\"\n"
	"                       (default: from the schema in the first file's\n"
	"                       index: int64 -> int64[max_len], float -> float32\n"
	"                       [max_len], bytes -> bytes[mean record size rounded\n"
	"                       up to 64], default=0 where some records lack it;\n"
	"                       sequence lists are left out)\n"
	;

/* Two strings: one would pass the 4095 bytes C99 promises to hold. */
static const char usage_pipeline[] =
	"pipeline:\n"
	"  --threads T|auto     decode threads (default auto: from the first\n"
	"                       batches, up to the number of CPUs; the report\n"
	"                       says what was chosen and why)\n"
	"  --io-depth N|auto    reads in flight (default auto: as many as the\n"
	"                       measured read latency needs, at most 32)\n"
	"  --prefetch N|auto    ready batches queued (default auto: 2, more when\n"
	"                       the consumer stalls)\n"
	"  --memory MiB         memory budget for all pools (default 512)\n"
	"  --direct             O_DIRECT reads of aligned shards\n"
	"  --no-manifest        plan from the shards even when the one directory\n"
	"                       given holds a dataset manifest\n"
	"  --verify-records     also check each record's data CRC inside frames\n"
	"                       already verified by CRC32C and zstd's checksum\n"
	REGIONS_USAGE
	"report:\n"
	"  --baseline           also time a pure read pass (T threads, one I/O\n"
	"                       engine each, whole frames) and a pure decompress\n"
	"                       pass (T threads: pread, frame CRC, zstd) over the\n"
	"                       same indexed shards, after a warming read pass,\n"
	"                       and quote the loader as a ratio to each\n"
	"  (steady: first to last batch; n/a under 10 batches or 100 ms)\n"
	"  --repeat N           run everything N times, interleaved, and report\n"
	"                       medians (default 1); the loader's pools are kept\n"
	"                       from one run to the next (keep_pools)\n"
	"  --json               one JSON object on stdout instead of the text\n"
	"  --quiet              no progress line (drawn on stderr only when it is a\n"
	"                       terminal: steps, records/s, compressed MB/s read,\n"
	"                       batches ready at next(), ETA)\n"
	"  --help               this text\n"
	"\n"
	"Exit status: 0 done, 1 the loader or a pass failed, 2 bad usage,\n"
	"3 refused to read across regions (--cross-region=refuse).\n";

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

typedef struct options {
	pf_loader_config cfg;
	uint64_t per_core_batch, cores, host_index, num_hosts;
	uint64_t threads_arg;	/* --threads: PF_AUTO or a count */
	uint64_t threads;	/* the baseline passes' threads: the count, or the CPUs */
	uint64_t epochs, steps, seed, window, memory_mib, io_depth, prefetch;
	uint64_t repeat;
	bool epochs_given, direct, verify, json, baseline, quiet, no_manifest;
	const char *features;
	pf_remainder remainder;
	bool host_index_given, num_hosts_given;	/* else from the environment */
	const char *save_state;
	uint64_t save_every;
	pf_corrupt_policy on_corrupt;
	const char *quarantine;
	uint64_t max_corrupt;
	const char *faults;
	uint64_t io_retries, io_timeout_ms;
	bool io_retries_given, io_timeout_given;
	ckpt_set resume;
	train_options train;	/* --model and the rest: tools/train.c */
	train_ctx *tc;
} options;

/* @return -1 to go on, else the exit status. */
/* N in [1, max], or "auto": PF_AUTO. */
static int parse_auto(const char *flag, const char *text, uint64_t max, uint64_t *v)
{
	if (!strcmp(text, "auto")) {
		*v = PF_AUTO;
		return 0;
	}
	return cli_parse_u64(flag, text, 1, max, false, v);
}

static int parse_options(int argc, char **argv, options *o)
{
	enum {
		OPT_BATCH = 256, OPT_CORES, OPT_HOSTIDX, OPT_HOSTS, OPT_THREADS, OPT_EPOCHS,
		OPT_STEPS, OPT_SEED, OPT_WINDOW, OPT_MEMORY, OPT_FEATURES, OPT_REMAINDER,
		OPT_DEPTH, OPT_PREFETCH, OPT_DIRECT, OPT_NO_MANIFEST, OPT_VERIFY, OPT_JSON, OPT_BASELINE, OPT_REPEAT,
		OPT_QUIET, OPT_SAVE, OPT_SAVE_EVERY, OPT_RESUME, OPT_ON_CORRUPT, OPT_QUARANTINE,
		OPT_MAX_CORRUPT, OPT_FAULTS, OPT_IO_RETRIES, OPT_IO_TIMEOUT, OPT_HELP,
	};
	static const struct option opts[] = {
		{ "per-core-batch", required_argument, NULL, OPT_BATCH },
		{ "cores", required_argument, NULL, OPT_CORES },
		{ "host-index", required_argument, NULL, OPT_HOSTIDX },
		{ "num-hosts", required_argument, NULL, OPT_HOSTS },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "epochs", required_argument, NULL, OPT_EPOCHS },
		{ "steps", required_argument, NULL, OPT_STEPS },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "shuffle-window", required_argument, NULL, OPT_WINDOW },
		{ "memory", required_argument, NULL, OPT_MEMORY },
		{ "features", required_argument, NULL, OPT_FEATURES },
		{ "remainder", required_argument, NULL, OPT_REMAINDER },
		{ "io-depth", required_argument, NULL, OPT_DEPTH },
		{ "prefetch", required_argument, NULL, OPT_PREFETCH },
		{ "direct", no_argument, NULL, OPT_DIRECT },
		{ "no-manifest", no_argument, NULL, OPT_NO_MANIFEST },
		{ "verify-records", no_argument, NULL, OPT_VERIFY },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "baseline", no_argument, NULL, OPT_BASELINE },
		{ "repeat", required_argument, NULL, OPT_REPEAT },
		{ "quiet", no_argument, NULL, OPT_QUIET },
		{ "save-state", required_argument, NULL, OPT_SAVE },
		{ "save-every", required_argument, NULL, OPT_SAVE_EVERY },
		{ "resume", required_argument, NULL, OPT_RESUME },
		{ "on-corrupt", required_argument, NULL, OPT_ON_CORRUPT },
		{ "quarantine", required_argument, NULL, OPT_QUARANTINE },
		{ "max-corrupt", required_argument, NULL, OPT_MAX_CORRUPT },
		{ "faults", required_argument, NULL, OPT_FAULTS },
		{ "io-retries", required_argument, NULL, OPT_IO_RETRIES },
		{ "io-timeout-ms", required_argument, NULL, OPT_IO_TIMEOUT },
		TRAIN_LONG_OPTIONS,
		{ "help", no_argument, NULL, OPT_HELP },
		{ 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->per_core_batch = 32;
	o->cores = 1;
	o->num_hosts = 1;
	o->epochs = 1;
	o->window = DEFAULT_WINDOW;
	o->memory_mib = DEFAULT_MEMORY_MIB;
	o->io_depth = PF_AUTO;
	o->prefetch = PF_AUTO;
	o->repeat = 1;
	o->remainder = PF_REMAINDER_DROP;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		int r = 0;

		switch (c) {
		case OPT_BATCH:
			r = cli_parse_u64("--per-core-batch", optarg, 1, 1u << 24, true,
					  &o->per_core_batch);
			break;
		case OPT_CORES:
			r = cli_parse_u64("--cores", optarg, 1, 4096, false, &o->cores);
			break;
		case OPT_HOSTIDX:
			r = cli_parse_u64("--host-index", optarg, 0, UINT32_MAX - 1, false,
					  &o->host_index);
			o->host_index_given = true;
			break;
		case OPT_HOSTS:
			r = cli_parse_u64("--num-hosts", optarg, 1, UINT32_MAX, false,
					  &o->num_hosts);
			o->num_hosts_given = true;
			break;
		case OPT_THREADS:
			r = parse_auto("--threads", optarg, 1024, &o->threads_arg);
			break;
		case OPT_EPOCHS:
			r = cli_parse_u64("--epochs", optarg, 1, UINT32_MAX, false, &o->epochs);
			o->epochs_given = true;
			break;
		case OPT_STEPS:
			r = cli_parse_u64("--steps", optarg, 1, UINT64_MAX, true, &o->steps);
			break;
		case OPT_SEED:
			r = cli_parse_u64("--seed", optarg, 0, UINT64_MAX, false, &o->seed);
			break;
		case OPT_WINDOW:
			r = cli_parse_u64("--shuffle-window", optarg, 0, UINT32_MAX, true,
					  &o->window);
			break;
		case OPT_MEMORY:
			r = cli_parse_u64("--memory", optarg, 1, 1u << 20, false,
					  &o->memory_mib);
			break;
		case OPT_FEATURES:
			o->features = optarg;
			break;
		case OPT_REMAINDER:
			if (!strcmp(optarg, "drop"))
				o->remainder = PF_REMAINDER_DROP;
			else if (!strcmp(optarg, "wrap"))
				o->remainder = PF_REMAINDER_WRAP;
			else {
				cli_fail("--remainder: '%s' is not drop or wrap", optarg);
				r = -EINVAL;
			}
			break;
		case OPT_DEPTH:
			r = parse_auto("--io-depth", optarg, 4096, &o->io_depth);
			break;
		case OPT_PREFETCH:
			r = parse_auto("--prefetch", optarg, 1024, &o->prefetch);
			break;
		case OPT_REPEAT:
			r = cli_parse_u64("--repeat", optarg, 1, MAX_REPEAT, false, &o->repeat);
			break;
		case OPT_DIRECT: o->direct = true; break;
		case OPT_NO_MANIFEST: o->no_manifest = true; break;
		case OPT_VERIFY: o->verify = true; break;
		case OPT_JSON: o->json = true; break;
		case OPT_BASELINE: o->baseline = true; break;
		case OPT_QUIET: o->quiet = true; break;
		case OPT_SAVE: o->save_state = optarg; break;
		case OPT_SAVE_EVERY:
			r = cli_parse_u64("--save-every", optarg, 1, UINT64_MAX, false,
					  &o->save_every);
			break;
		case OPT_ON_CORRUPT:
			if (!strcmp(optarg, "fail")) {
				o->on_corrupt = PF_CORRUPT_FAIL;
			} else if (!strcmp(optarg, "skip")) {
				o->on_corrupt = PF_CORRUPT_SKIP;
			} else {
				cli_fail("--on-corrupt: '%s' is not fail or skip", optarg);
				r = -EINVAL;
			}
			break;
		case OPT_QUARANTINE: o->quarantine = optarg; break;
		case OPT_FAULTS: o->faults = optarg; break;
		case OPT_IO_RETRIES:
			r = cli_parse_u64("--io-retries", optarg, 0, 1000, false, &o->io_retries);
			o->io_retries_given = true;
			break;
		case OPT_IO_TIMEOUT:
			r = cli_parse_u64("--io-timeout-ms", optarg, 0, INT32_MAX, false,
					  &o->io_timeout_ms);
			o->io_timeout_given = true;
			break;
		case OPT_MAX_CORRUPT:
			r = cli_parse_u64("--max-corrupt", optarg, 1, UINT64_MAX, false,
					  &o->max_corrupt);
			break;
		case OPT_RESUME:
			for (char *f = strtok(optarg, ","); f && r == 0; f = strtok(NULL, ","))
				r = ckpt_load(&o->resume, f);
			break;
		case OPT_HELP:
			fputs(usage, stdout);
			fputs(usage_pipeline, stdout);
			fputs("\n", stdout);
			fputs(corrupt_usage, stdout);
			fputs(CKPT_USAGE "\n" TRAIN_USAGE, stdout);
			return 0;
		case ':':
			/* Usage errors are one line and a pointer, not the help. */
			cli_fail("%s: a value is required; see loadbench --help",
				 argv[optind - 1]);
			return 2;
		default:
			if (c >= TRAIN_OPT_FIRST && c < TRAIN_OPT_LAST) {
				r = train_parse_option(&o->train, c, optarg);
				break;
			}
			cli_fail("unknown option '%s'; see loadbench --help", argv[optind - 1]);
			return 2;
		}
		if (r < 0)
			return 2;
	}
	/* One of the two alone is checked with the environment's. */
	if (o->host_index_given && o->num_hosts_given &&
	    o->host_index >= o->num_hosts) {
		cli_fail("--host-index: %llu is not below --num-hosts %llu",
			 (unsigned long long)o->host_index,
			 (unsigned long long)o->num_hosts);
		return 2;
	}
	if ((o->quarantine || o->max_corrupt) && o->on_corrupt != PF_CORRUPT_SKIP) {
		cli_fail("%s: needs --on-corrupt skip",
			 o->quarantine ? "--quarantine" : "--max-corrupt");
		return 2;
	}
	if (o->save_every && !o->save_state) {
		cli_fail("--save-every: needs --save-state FILE");
		return 2;
	}
	if (optind == argc) {
		cli_fail("no shards given; see loadbench --help");
		return 2;
	}
	o->threads = o->threads_arg;
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
	double first_batch_ms;	/* from create to the first batch (the
				   loader's first_batch_ns) */
	uint64_t steady_records; /* handed out after the first batch */
	uint64_t steady_batches; /* batches after the first */
	double steady_s;	/* from the first batch to the last */
	uint64_t peak_rss;
	uint64_t steps_per_epoch;
	uint64_t steps_run;	/* batches taken by this run */
	pf_loader_metrics m;
	pf_tuning tune;		/* threads, reads in flight, prefetch: in force, and why */
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
	pf_loader_get_metrics(l, &out->m);
	out->first_batch_ms = (double)out->m.first_batch_ns * 1e-6;
	pf_loader_tuning(l, &out->tune);
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

/* ------------------------------------------------------------------ */
/* The first batch and what it waited for                               */

static uint64_t minus0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* Opening the dataset: its phases, one after the other. */
static uint64_t open_ns(const pf_loader_metrics *m)
{
	return m->open_manifest_ns + m->open_index_ns + m->open_count_ns + m->open_exchange_ns;
}

/* The first batch split: opening the dataset (manifest, index tails,
 * counting stream files, the hosts' exchange), the rest of
 * pf_loader_create() (pools, threads), and the first reads (from the end
 * of create to the first batch: the shards its first step needs read and
 * decoded). */
static void print_first_batch_text(const pf_loader_metrics *m)
{
	printf("first batch %.1f ms: opening the dataset %.1f ms (manifest %.1f, index tails %.1f, "
	       "counting stream files %.1f, the hosts' exchange %.1f), loader start %.1f ms, "
	       "first reads %.1f ms\n", (double)m->first_batch_ns * 1e-6,
	       (double)open_ns(m) * 1e-6, (double)m->open_manifest_ns * 1e-6,
	       (double)m->open_index_ns * 1e-6, (double)m->open_count_ns * 1e-6,
	       (double)m->open_exchange_ns * 1e-6,
	       (double)minus0(m->create_ns, open_ns(m)) * 1e-6,
	       (double)minus0(m->first_batch_ns, m->create_ns) * 1e-6);
	printf("open        %llu %s opened to plan", (unsigned long long)m->open_files,
	       m->open_manifest_ns ? "file (the manifest)" : "files (every shard)");
	if (m->open_count_files)
		printf("; %llu stream files counted here (%.1f MB read, %.1f MB decompressed)",
		       (unsigned long long)m->open_count_files, mb(m->open_count_bytes),
		       mb(m->open_count_decompressed));
	printf("\n");
}

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

/* What the loader ran with, one line each: the value, whether the loader
 * chose it (auto) or the flag did, and why. */
static const struct tuning_row {
	const char *name;
	size_t off;
} tuning_rows[] = {
	{ "threads", offsetof(pf_tuning, threads) },
	{ "io_depth", offsetof(pf_tuning, io_depth) },
	{ "prefetch", offsetof(pf_tuning, prefetch) },
};

static const pf_tuning_choice *tuning_at(const pf_tuning *t, size_t i)
{
	return (const pf_tuning_choice *)((const char *)t + tuning_rows[i].off);
}

static void print_tuning(const pf_tuning *t)
{
	for (size_t i = 0; i < sizeof(tuning_rows) / sizeof(tuning_rows[0]); i++) {
		const pf_tuning_choice *c = tuning_at(t, i);

		printf("%-11s %u (%s): %s\n", tuning_rows[i].name, c->value,
		       c->automatic ? "auto" : "set", c->why);
	}
}

/* The baseline's reads in flight: --io-depth, or the loader's most. */
static unsigned bl_depth(const options *o)
{
	return o->io_depth ? (unsigned)o->io_depth : 32;
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
	printf("next()      p50 %.0f us, p90 %.0f us, p99 %.0f us\n", r->p50, r->p90, r->p99);
	print_first_batch_text(m);
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
	print_tuning(&r->run.tune);
	printf("io          %s, depth %u", m->io_backend ? m->io_backend : "none",
	       r->run.tune.io_depth.value);
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

/* "tuning":{"threads":{"value":2,"auto":true,"measured":true,"why":"..."},...}, */
static void json_tuning(const pf_tuning *t)
{
	size_t n = sizeof(tuning_rows) / sizeof(tuning_rows[0]);

	printf("\"tuning\":{");
	for (size_t i = 0; i < n; i++) {
		const pf_tuning_choice *c = tuning_at(t, i);

		printf("\"%s\":{", tuning_rows[i].name);
		json_kv_u64("value", c->value, true);
		printf("\"auto\":%s,\"measured\":%s,", c->automatic ? "true" : "false",
		       c->measured ? "true" : "false");
		json_kv_str("why", c->why, false);
		printf("}%s", i + 1 < n ? "," : "");
	}
	printf("},");
}

/* "first_batch_seconds", and its parts as print_first_batch_text() says
 * them; each member followed by a comma. */
static void print_first_batch_json(const pf_loader_metrics *m)
{
	json_kv_double("first_batch_seconds", (double)m->first_batch_ns * 1e-9, true);
	printf("\"open\":{");
	json_kv_double("seconds", (double)open_ns(m) * 1e-9, true);
	json_kv_double("manifest_seconds", (double)m->open_manifest_ns * 1e-9, true);
	json_kv_double("index_seconds", (double)m->open_index_ns * 1e-9, true);
	json_kv_double("count_seconds", (double)m->open_count_ns * 1e-9, true);
	json_kv_double("exchange_seconds", (double)m->open_exchange_ns * 1e-9, true);
	json_kv_u64("files", m->open_files, true);
	json_kv_u64("count_files", m->open_count_files, true);
	json_kv_u64("count_bytes", m->open_count_bytes, true);
	json_kv_u64("count_decompressed", m->open_count_decompressed, false);
	printf("},");
	json_kv_double("loader_start_seconds", (double)minus0(m->create_ns, open_ns(m)) * 1e-9,
		       true);
	json_kv_double("first_reads_seconds",
		       (double)minus0(m->first_batch_ns, m->create_ns) * 1e-9, true);
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
	print_first_batch_json(m);
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
	json_kv_u64("io_depth", r->run.tune.io_depth.value, true);
	json_kv_u64("threads", m->decode_threads, true);
	json_tuning(&r->run.tune);
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

static const char plan_usage[] =
	"usage: loadbench plan --per-core-batch b [options]\n"
	"\n"
	"The scaling plan of a pod of H hosts with C cores each: the global\n"
	"batch B = b x C x H, the train steps that keep the examples of a\n"
	"reference run (or the steps of an epoch schedule, as the loader cuts\n"
	"them), the learning rate and warm-up, what does not divide evenly and\n"
	"what is dropped, and the input bandwidth a host and the pod need.\n"
	"\n"
	"the pod:\n"
	"  --per-core-batch b   records per core per step (required)\n"
	"  --cores C            cores per host (default 1)\n"
	"  --hosts H            hosts (default 1)\n"
	"a reference run:\n"
	"  --ref-global-batch B0  its global batch\n"
	"  --ref-steps S0       its train steps: the plan keeps S0 x B0 examples,\n"
	"                       S0 x B0 / B steps, rounded up when not whole\n"
	"  --ref-lr L0          its learning rate\n"
	"  --rule none|linear|sqrt  the plan's rate: L0, L0 x B/B0 or\n"
	"                       L0 x sqrt(B/B0) (default none)\n"
	"  --warmup-steps W0    its warm-up, kept as examples: W0 x B0 / B steps,\n"
	"                       rounded up (taken as is without B0); the rate\n"
	"                       ramps linearly to its value over them\n"
	"or an epoch schedule:\n"
	"  --records N          records in the dataset\n"
	"  --epochs E           passes over them (default 1)\n"
	"  --remainder drop|wrap  the N mod B records past the last whole step:\n"
	"                       dropped, or the last step filled by repeating\n"
	"                       records, as the loader does (default drop)\n"
	"input bandwidth:\n"
	"  --step-time-ms T     one train step's time\n"
	"  --record-bytes R     bytes read per record (compressed, as stored)\n"
	"  --measured-mbps M    MB/s one host read in a loadbench run (its\n"
	"                       \"MB/s read\"), printed beside the need\n"
	"  --json               one JSON object on stdout instead of the table\n"
	"  --help               this text\n"
	"\n"
	"Exit status: 0 done, 2 bad usage or an impossible plan.\n";

/* A finite number above 0 (strtod's syntax, no leading space). */
static int plan_parse_positive(const char *flag, const char *text, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(text, &end);
	if (!*text || *end || end == text || text[0] == ' ' || text[0] == '\t') {
		cli_fail("%s: '%s' is not a number", flag, text);
		return -EINVAL;
	}
	if (errno == ERANGE || !isfinite(v) || !(v > 0)) {
		cli_fail("%s: '%s' is not a finite number above 0", flag, text);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

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
	enum {
		P_BATCH = 256, P_CORES, P_HOSTS, P_REF_BATCH, P_REF_STEPS, P_REF_LR,
		P_RULE, P_WARMUP, P_RECORDS, P_EPOCHS, P_REMAINDER, P_STEP_MS,
		P_RECORD_BYTES, P_MEASURED, P_JSON, P_HELP,
	};
	static const struct option opts[] = {
		{ "per-core-batch", required_argument, NULL, P_BATCH },
		{ "cores", required_argument, NULL, P_CORES },
		{ "hosts", required_argument, NULL, P_HOSTS },
		{ "ref-global-batch", required_argument, NULL, P_REF_BATCH },
		{ "ref-steps", required_argument, NULL, P_REF_STEPS },
		{ "ref-lr", required_argument, NULL, P_REF_LR },
		{ "rule", required_argument, NULL, P_RULE },
		{ "warmup-steps", required_argument, NULL, P_WARMUP },
		{ "records", required_argument, NULL, P_RECORDS },
		{ "epochs", required_argument, NULL, P_EPOCHS },
		{ "remainder", required_argument, NULL, P_REMAINDER },
		{ "step-time-ms", required_argument, NULL, P_STEP_MS },
		{ "record-bytes", required_argument, NULL, P_RECORD_BYTES },
		{ "measured-mbps", required_argument, NULL, P_MEASURED },
		{ "json", no_argument, NULL, P_JSON },
		{ "help", no_argument, NULL, P_HELP },
		{ 0 },
	};
	pf_scaling_input in = { .cores = 1, .hosts = 1 };
	pf_scaling_plan p;
	pf_error err;
	bool json = false, batch_given = false;
	double mbps = 0;
	int c;

	cli_prog = "loadbench plan";
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		int r = 0;

		switch (c) {
		/* b, C and H may be 0 here: the plan says why that cannot be. */
		case P_BATCH:
			r = cli_parse_u64("--per-core-batch", optarg, 0, UINT64_MAX, true,
					  &in.per_core_batch);
			batch_given = true;
			break;
		case P_CORES:
			r = cli_parse_u64("--cores", optarg, 0, UINT64_MAX, false, &in.cores);
			break;
		case P_HOSTS:
			r = cli_parse_u64("--hosts", optarg, 0, UINT64_MAX, false, &in.hosts);
			break;
		/* In the plan 0 means "not given": refuse it as a value. */
		case P_REF_BATCH:
			r = cli_parse_u64("--ref-global-batch", optarg, 1, UINT64_MAX, true,
					  &in.ref_global_batch);
			break;
		case P_REF_STEPS:
			r = cli_parse_u64("--ref-steps", optarg, 1, UINT64_MAX, true,
					  &in.ref_steps);
			break;
		case P_REF_LR:
			r = plan_parse_positive("--ref-lr", optarg, &in.ref_lr);
			break;
		case P_RULE:
			if (pf_lr_rule_parse(optarg, &in.rule) < 0) {
				cli_fail("--rule: '%s' is not none, linear or sqrt", optarg);
				r = -EINVAL;
			}
			break;
		case P_WARMUP:
			r = cli_parse_u64("--warmup-steps", optarg, 0, UINT64_MAX, true,
					  &in.ref_warmup_steps);
			break;
		case P_RECORDS:
			r = cli_parse_u64("--records", optarg, 1, UINT64_MAX, true, &in.records);
			break;
		case P_EPOCHS:
			r = cli_parse_u64("--epochs", optarg, 1, UINT64_MAX, false, &in.epochs);
			break;
		case P_REMAINDER:
			if (!strcmp(optarg, "drop"))
				in.remainder_wrap = false;
			else if (!strcmp(optarg, "wrap"))
				in.remainder_wrap = true;
			else {
				cli_fail("--remainder: '%s' is not drop or wrap", optarg);
				r = -EINVAL;
			}
			break;
		case P_STEP_MS:
			r = plan_parse_positive("--step-time-ms", optarg, &in.step_time_ms);
			break;
		case P_RECORD_BYTES:
			r = plan_parse_positive("--record-bytes", optarg, &in.record_bytes);
			break;
		case P_MEASURED:
			r = plan_parse_positive("--measured-mbps", optarg, &mbps);
			in.measured_host_bytes_per_s = mbps * 1e6;
			break;
		case P_JSON: json = true; break;
		case P_HELP: fputs(plan_usage, stdout); return 0;
		case ':':
			cli_fail("%s: a value is required", argv[optind - 1]);
			fputs(plan_usage, stderr);
			return 2;
		default:
			cli_fail("unknown option '%s'", argv[optind - 1]);
			fputs(plan_usage, stderr);
			return 2;
		}
		if (r < 0)
			return 2;
	}
	if (optind < argc) {
		cli_fail("unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (!batch_given) {
		cli_fail("--per-core-batch is required");
		fputs(plan_usage, stderr);
		return 2;
	}
	pf_error_clear(&err);
	if (pf_scaling_plan_compute(&p, &in, &err) < 0) {
		cli_fail("%s", err.msg);
		return 2;
	}
	if (json)
		plan_print_json(&in, &p);
	else
		plan_print_text(&in, &p);
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
	int nfiles = 0, ret;
	regions_opts ro;

	if (argc > 1 && !strcmp(argv[1], "plan"))
		return plan_main(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "ladder"))
		return ladder_main(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "regions"))
		return regions_main(argc - 1, argv + 1);
	cli_prog = "loadbench";
	ret = regions_take_options(&argc, argv, &ro);
	if (ret >= 0)
		return ret;
	ret = parse_options(argc, argv, &o);
	if (ret >= 0)
		return ret;
	if (resolve_topology(o.host_index_given, &o.host_index, o.num_hosts_given,
			     &o.num_hosts))
		return 2;
	raise_fd_limit();
	nfiles = cli_expand_inputs(argv + optind, argc - optind, &files);
	if (nfiles < 0)
		return 1;
	if (nfiles == 0) {
		cli_fail("the arguments name no files");
		return 1;
	}
	ret = 1;
	memset(&r, 0, sizeof(r));
	/* Before anything is read: a refusal must read nothing. */
	if ((ret = regions_check(&ro, files, nfiles)) != 0)
		goto out;
	ret = 1;
	if (!o.no_manifest) {
		char *mpath = NULL;
		int found = pf_manifest_locate((const char *const *)argv + optind,
					       (size_t)(argc - optind), &mpath);

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
				pf_manifest_shards(manifest), argv[optind], nfiles);
	}
	if (!o.features) {
		/* From the first file with bytes: an empty one has no index. */
		int first = 0, d;
		struct stat st;

		while (!manifest && first + 1 < nfiles && stat(files[first], &st) == 0 && !st.st_size)
			first++;
		d = default_features(files[first], manifest, &inferred);
		if (d < 0)
			goto out;
		if (d > 0) {
			cli_fail("--features is required: %s has no schema in an index",
				 files[first]);
			ret = 2;
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
		cli_fail("--features: %s", line);
		ret = 2;
		goto out;
	}

	memset(&cfg, 0, sizeof(cfg));
	/* With a manifest the loader is given it (the one path named), not
	 * the files listed. */
	cfg.paths = manifest ? (const char *const *)argv + optind : (const char *const *)files;
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
	cfg.shuffle = o.window > 0;
	cfg.shuffle_window = (uint32_t)o.window;
	cfg.remainder = o.remainder;
	cfg.threads = (unsigned)o.threads_arg;
	cfg.io_depth = (unsigned)o.io_depth;
	cfg.memory_budget = (size_t)o.memory_mib << 20;
	cfg.prefetch = (unsigned)o.prefetch;
	cfg.direct_io = o.direct;
	cfg.verify_records = o.verify;
	cfg.regions = ro.table;
	cfg.on_corrupt = o.on_corrupt;
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
		if (bl_pass(&bl, (unsigned)o.threads, bl_depth(&o), o.direct,
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
		regions_run_done(&ro, runs[i].seconds);
		secs[i] = runs[i].seconds;
		if (!o.baseline)
			continue;
		if (bl_pass(&bl, (unsigned)o.threads, bl_depth(&o), o.direct,
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
	ro.report_run = best;
	r.regions = &ro;
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
		regions_print_text(&ro);
		train_print_text(o.tc);
	}
	ret = 0;
out:
	bl_free(&bl);
	free(r.empty);
	free(inferred);
	pf_manifest_free(manifest);
	cli_free_inputs(files, nfiles);
	regions_free(&ro);
	ckpt_free(&o.resume);
	return train_end(o.tc, ret);
}
