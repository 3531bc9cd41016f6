/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's options: the table (cli.c reads it), the parsers of the
 * values that are not plain numbers, the defaults, and the checks that
 * span options.  Not here: what a run does with them (loadbench.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common_internal.h"
#include "io_internal.h"
#include "loadbench.h"
/* ------------------------------------------------------------------ */
/* Options                                                              */

/* N in [1, max], or "auto": PF_AUTO (the loader chooses; the report says
 * what and why). */
static int parse_auto(const char *flag, const char *v, uint64_t max, void *field)
{
	if (!strcmp(v, "auto")) {
		*(uint64_t *)field = PF_AUTO;
		return 0;
	}
	return cli_parse_u64(flag, v, 1, max, false, field);
}

static int parse_threads(void *field, const char *v)
{
	return parse_auto("--threads", v, 1024, field);
}

static int parse_io_depth(void *field, const char *v)
{
	return parse_auto("--io-depth", v, 4096, field);
}

static int parse_prefetch(void *field, const char *v)
{
	return parse_auto("--prefetch", v, 1024, field);
}

/* --faults SPEC: checked here, so that a malformed spec is a usage error
 * (exit 2) naming the flag and the byte, not a loader failure. */
static int parse_faults(void *field, const char *v)
{
	pf_fault_plan plan;
	pf_error err;

	if (pf_fault_parse(&plan, v, strlen(v), "--faults", &err) < 0) {
		cli_usage("%s", err.msg);
		return -EINVAL;
	}
	*(const char **)field = v;
	return 0;
}

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

/* --shuffle alone: the window shuffle; --shuffle=global: the global one
 * (PF_SHUFFLE_GLOBAL); --shuffle=window says the default out loud. */
static int parse_shuffle(void *field, const char *v)
{
	pf_shuffle_mode *mode = field;

	if (!v || !strcmp(v, "window")) {
		*mode = PF_SHUFFLE_WINDOW;
		return 0;
	}
	if (!strcmp(v, "global")) {
		*mode = PF_SHUFFLE_GLOBAL;
		return 0;
	}
	cli_usage("--shuffle: '%s' is not a shuffle (window, global; --shuffle alone: "
		  "window)", v);
	return -EINVAL;
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
	{ CLI_CALL, "shuffle", .arg = "global", .off = O(shuffle_mode), .call = parse_shuffle,
	  .optional = true, .seen = SEEN(shuffle),
	  .help = "shuffle: frames permuted, records in a window of 8192 (default "
		  "off: the files' order); =global: the whole dataset" },
	{ CLI_CALL, "shuffle-window", .arg = "W", .off = O(window), .call = parse_window,
	  .seen = SEEN(window_given), .more = true,
	  .help = "records in the shuffle window (default 8192); implies --shuffle" },
	{ CLI_U64, "seed", .arg = "S", .off = O(seed), .max = UINT64_MAX, .more = true,
	  .help = "shuffle seed (default 0)" },
	{ CLI_CALL, "source", .arg = "NAME=WEIGHT:PATH", .off = O(mix), .call = lb_parse_source,
	  .more = true,
	  .help = "a source of a mixture, repeated (then no SHARD is given): its name, "
		  "weight (> 0; shares are weights over their sum) and files (a "
		  "directory, a glob, a manifest)" },
	{ CLI_CHOICE, "mix", .arg = "stratified|sample", .off = O(mix_mode),
	  .choices = "stratified|sample", .more = true,
	  .help = "a mixture's rows: each batch its sources' shares (default), or "
		  "each row's source drawn" },
	{ CLI_CHOICE, "mix-stop", .arg = "first|first-exhausted", .off = O(mix_stop),
	  .choices = "first|first-exhausted", .more = true,
	  .help = "a mixture ends after --epochs epochs of the first source (default), "
		  "or when any source runs out of its first epoch" },
	{ CLI_FLAG, "source-feature", .off = O(source_feature), .more = true,
	  .help = "a mixture's batches hold _source (int32), each row's source (packed: "
		  "int32[L], each value's)" },
	{ CLI_CHOICE, "mix-unit", .arg = "records|tokens", .off = O(mix_unit),
	  .choices = "records|tokens", .more = true,
	  .help = "what a mixture's weights count (default records; tokens: a packed "
		  "mixture's, the first packed feature's values)" },
	{ CLI_CHOICE, "remainder", .arg = "drop|wrap", .off = O(remainder),
	  .choices = "drop|wrap", .more = true,
	  .help = "the records past the last whole step of an epoch (default drop)" },
	{ CLI_U64, "pack", .arg = "L", .off = O(pack), .min = 1, .max = UINT32_MAX,
	  .suffix = true, .more = true,
	  .help = "pack the spec's ragged features (name:dtype[*]) into rows of L values, "
		  "with NAME_segment_ids and NAME_positions (default: no packing)" },
	{ CLI_CHOICE, "pack-mode", .arg = "first-fit|concat", .off = O(pack_mode),
	  .choices = "first-fit|concat", .more = true,
	  .help = "first-fit: each record whole into the first open row with room "
		  "(default); concat: the records one after the other, cut into rows" },
	{ CLI_U64, "pack-pool", .arg = "N", .off = O(pack_pool), .min = 1, .max = UINT32_MAX,
	  .more = true, .help = "first-fit's open rows (default 8)" },
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
	{ CLI_CALL, "threads", .arg = "T|auto", .off = O(threads_arg), .call = parse_threads,
	  .help = "decode threads (default auto: from the first batches, up to the "
		  "number of CPUs; the report says what was chosen and why)" },
	{ CLI_CALL, "io-depth", .arg = "N|auto", .off = O(io_depth), .call = parse_io_depth,
	  .more = true, .help = "reads in flight (default auto: as many as the measured "
		  "read latency needs, at most 32)" },
	{ CLI_CALL, "prefetch", .arg = "N|auto", .off = O(prefetch), .call = parse_prefetch,
	  .more = true, .help = "ready batches queued (default auto: 2, more when the "
		  "consumer stalls)" },
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
	  .help = "also time pure read, decompress and decode passes over the "
		  "indexed shards; the loader as a ratio to each, and to the bound "
		  "decompress and decode allow together" },
	{ CLI_U64, "repeat", .arg = "N", .off = O(repeat), .min = 1, .max = MAX_REPEAT,
	  .help = "run N times, interleaved; medians (default 1)" },
	{ CLI_FLAG, "json", .off = O(json), .help = "one JSON object on stdout instead of the text" },
	{ CLI_STRING, "html", .arg = "FILE", .off = O(html), .more = true,
	  .help = "also write the report as a page with charts (docs/report.md)" },
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
	{ CLI_CALL, "faults", .arg = "SPEC", .off = O(faults), .call = parse_faults, .more = true,
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
	{ CLI_U64, "skip-steps", .arg = "N", .off = O(skip_steps), .max = UINT64_MAX,
	  .more = true,
	  .help = "start N steps on, as if delivered and dropped (the batches of a loss "
		  "spike): the first batch is the one a run never stopped gives at the "
		  "resumed (or first) step + N, on every host; nothing skipped is read" },
	{ CLI_INCLUDE, .table = train_cli, .off = O(train), .more = true },
	{ CLI_END },
};

static const cli_command loadbench_command = {
	.name = "loadbench",
	.usage = "usage: loadbench [options] SHARD...\n"
		 "       loadbench which --steps A:B [run's options] SHARD... | state show FILE\n"
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
	o->window = PF_LOADER_WINDOW_DEFAULT;
	o->memory_mib = PF_LOADER_BUDGET_DEFAULT >> 20;
	o->io_depth = PF_AUTO;
	o->prefetch = PF_AUTO;
	o->repeat = 1;
	o->remainder = PF_REMAINDER_DROP;
	regions_defaults(&o->ro);
	train_defaults(&o->train);
}

int loadbench_parse_options(int argc, char **argv, options *o, int *first)
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
	if (o->mix.n && *first != argc)
		return cli_usage("'%s': a mixture's files are its --source's only", argv[*first]);
	if (o->mix_unit && !o->pack && o->mix.n)
		return cli_usage("--mix-unit tokens: needs --pack (the tokens are a packed "
				 "mixture's)");
	if (o->mix.n && (ret = lb_check_sources(o)) != 0)
		return ret;
	if (*first == argc && !o->mix.n)
		return cli_usage("no shards given");
	if (!o->mix.n && (o->mix_mode || o->mix_stop || o->source_feature || o->mix_unit))
		return cli_usage("%s: needs --source", o->mix_mode ? "--mix" : o->mix_stop ?
				 "--mix-stop" : o->source_feature ? "--source-feature" : "--mix-unit");
	o->threads = o->threads_arg;
	if (!o->threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		o->threads = n > 0 ? (uint64_t)n : 1;
	}
	return -1;
}
