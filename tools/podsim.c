/* SPDX-License-Identifier: Apache-2.0 */
/* shardtool podsim: print the pod simulation (podfeed.h, pf_podsim_run())
 * as text or JSON; the simulation and its checks are the library's. */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "podsim.h"

typedef struct podsim_options {
	pf_podsim_config cfg;
	uint64_t hosts, cores, per_core_batch, seed, epoch, window, threads;
	int remainder;		/* pf_remainder */
	bool shuffle, window_given, no_manifest, no_compare, json, summary;
} podsim_options;

#define O(field) offsetof(podsim_options, field)

static const cli_opt podsim_cli[] = {
	{ CLI_U64, "hosts", .arg = "H", .off = O(hosts), .min = 1, .max = PF_PODSIM_MAX_HOSTS,
	  .help = "hosts in the pod (required)" },
	{ CLI_U64, "cores", .arg = "C", .off = O(cores), .min = 1, .max = 4096,
	  .help = "cores per host (default 1)" },
	{ CLI_U64, "per-core-batch", .arg = "B", .off = O(per_core_batch), .min = 1,
	  .max = 1u << 24, .help = "records per core per step (default 32)" },
	{ CLI_FLAG, "shuffle", .off = O(shuffle),
	  .help = "permute the frames and shuffle in windows, as the loader with shuffle on "
		  "(default off; window 8192)" },
	{ CLI_U64, "shuffle-window", .arg = "W", .off = O(window), .min = 1, .max = 1u << 30,
	  .seen = CLI_SEEN(podsim_options, window_given), .more = true,
	  .help = "records in the shuffle window; implies --shuffle" },
	{ CLI_U64, "seed", .arg = "S", .off = O(seed), .max = UINT64_MAX, .more = true,
	  .help = "the shuffle seed (default 0)" },
	{ CLI_U64, "epoch", .arg = "E", .off = O(epoch), .max = UINT32_MAX, .more = true,
	  .help = "the epoch planned (default 0)" },
	{ CLI_CHOICE, "remainder", .arg = "drop|wrap", .off = O(remainder),
	  .choices = "drop|wrap", .more = true, .help = "drop (default) or wrap, as the loader" },
	{ CLI_FLAG, "no-manifest", .off = O(no_manifest), .more = true,
	  .help = "plan from the shards even when DATASET is a directory holding a manifest" },
	{ CLI_FLAG, "no-compare", .off = O(no_compare), .more = true,
	  .help = "with a manifest, do not also open the dataset without it (every "
		  "shard's tail, every stream file counted) to measure what that costs" },
	{ CLI_U64, "threads", .arg = "T", .off = O(threads), .min = 1, .max = 1024,
	  .more = true, .help = "stream files counted at once (default: CPUs)" },
	{ CLI_FLAG, "summary", .off = O(summary), .help = "no per-host table" },
	{ CLI_FLAG, "json", .off = O(json), .help = "one JSON object on stdout instead of the text" },
	{ CLI_END },
};

static const cli_command podsim_command = {
	.name = "shardtool podsim",
	.usage = "usage: shardtool podsim --hosts H [options] DATASET...\n",
	.about = "Plans one epoch of the dataset as each of H hosts would (1 to 65536),\n"
		 "in this one process, with the loader's own planning, and reports per\n"
		 "host what it reads to open the dataset, its steps and records, and what\n"
		 "its first batch needs (shards, frames, reads, bytes); for the pod, the\n"
		 "requests the bucket sees at start with the manifest and without it (a\n"
		 "file opened is one request, each read one).  It checks, record by\n"
		 "record, that every host has the same steps, no record goes to two\n"
		 "hosts, and the records delivered are the epoch's but the remainder.\n",
	.opts = podsim_cli,
	.footer = "Exit status: 0 every check holds, 1 one does not or the dataset cannot\n"
		  "be opened, 2 bad usage.\n",
};

static int parse(podsim_options *o, int argc, char **argv)
{
	int first, ret;

	o->per_core_batch = 32;
	ret = cli_parse(&podsim_command, argc, argv, o, &first);
	if (ret >= 0)
		return ret;
	if (!o->hosts)
		return cli_usage("--hosts H is required");
	if (first == argc)
		return cli_usage("name the dataset (a directory, its manifest, files or globs)");
	o->cfg.num_hosts = (uint32_t)o->hosts;
	o->cfg.cores_per_host = (uint32_t)o->cores;
	o->cfg.per_core_batch = (uint32_t)o->per_core_batch;
	o->cfg.seed = o->seed;
	o->cfg.epoch = (uint32_t)o->epoch;
	o->cfg.shuffle = o->shuffle || o->window_given;
	o->cfg.shuffle_window = (uint32_t)o->window;
	o->cfg.remainder = (pf_remainder)o->remainder;
	o->cfg.ignore_manifest = o->no_manifest;
	o->cfg.measure_without_manifest = !o->no_compare;
	o->cfg.threads = (unsigned)o->threads;
	o->cfg.paths = (const char *const *)argv + first;
	o->cfg.npaths = (size_t)(argc - first);
	return -1;
}

/* ------------------------------------------------------------------ */
/* Text                                                                 */

static const char *bytes_text(uint64_t b, char *buf, size_t cap)
{
	if (b < 1000)
		snprintf(buf, cap, "%llu B", (unsigned long long)b);
	else if (b < 1000000)
		snprintf(buf, cap, "%.1f KB", (double)b / 1e3);
	else if (b < 1000000000)
		snprintf(buf, cap, "%.1f MB", (double)b / 1e6);
	else
		snprintf(buf, cap, "%.1f GB", (double)b / 1e9);
	return buf;
}

static const char *yes(bool v)
{
	return v ? "yes" : "NO";
}

static void print_text(const podsim_options *o, const pf_podsim *sim)
{
	const pf_podsim_summary *s = pf_podsim_summary_get(sim);
	const pf_podsim_host *h0 = pf_podsim_host_get(sim, 0);
	char a[32], b[32], c[32];

	printf("pod         %u hosts x %u cores x %u records: global batch %llu; seed %llu, "
	       "epoch %u, %s\n", s->num_hosts, s->cores_per_host, s->per_core_batch,
	       (unsigned long long)s->global_batch, (unsigned long long)o->cfg.seed,
	       o->cfg.epoch, o->cfg.shuffle ? "shuffled" : "in order");
	printf("dataset     %llu shards (%llu indexed, %llu stream files), %llu frames and "
	       "stream files, %llu records, %s\n", (unsigned long long)s->shards,
	       (unsigned long long)s->indexed, (unsigned long long)s->streams,
	       (unsigned long long)s->units, (unsigned long long)s->records,
	       bytes_text(s->bytes, a, sizeof(a)));
	printf("epoch       %llu steps a host; %llu records delivered, %llu dropped and %llu "
	       "wrapped (the remainder); shuffle block %u records\n",
	       (unsigned long long)s->steps, (unsigned long long)s->delivered,
	       (unsigned long long)s->remainder_dropped,
	       (unsigned long long)s->remainder_wrapped, s->block);
	printf("checks      equal steps: %s; disjoint records: %s; union = epoch - remainder: "
	       "%s\n", yes(s->steps_equal), yes(s->disjoint), yes(s->complete));
	if (s->problem)
		printf("            %s\n", s->problem);
	if (s->manifest)
		printf("open        a host: %llu file, %llu read, %s (the manifest) in %.1f ms\n",
		       (unsigned long long)h0->open_files, (unsigned long long)h0->open_reads,
		       bytes_text(h0->open_bytes, a, sizeof(a)), (double)s->open_ns * 1e-6);
	if (s->bare_measured)
		printf("%s a host: %llu files, %llu reads, %s (index tails, and stream "
		       "files split among the hosts) in %.1f ms as one host\n",
		       s->manifest ? "  without it" : "open       ",
		       (unsigned long long)h0->bare_files, (unsigned long long)h0->bare_reads,
		       bytes_text(h0->bare_bytes, a, sizeof(a)), (double)s->bare_open_ns * 1e-6);
	else
		printf("            without it: not measured (--no-compare)\n");
	printf("bucket      at start: %llu requests, %s", (unsigned long long)s->open_requests,
	       bytes_text(s->open_bytes, a, sizeof(a)));
	if (s->manifest && s->bare_measured)
		printf("; without the manifest %llu requests, %s",
		       (unsigned long long)s->bare_requests, bytes_text(s->bare_bytes, b, sizeof(b)));
	printf("\n            then for the first batches: %llu requests, %s\n",
	       (unsigned long long)s->first_requests, bytes_text(s->first_bytes, c, sizeof(c)));
	printf("plan        %u hosts planned in %.1f ms, checked in %.1f ms\n", s->num_hosts,
	       (double)s->plan_ns * 1e-6, (double)s->check_ns * 1e-6);
	if (o->summary)
		return;
	printf("\n%-6s %7s %10s %10s %8s %8s %8s %7s %10s   %-6s %6s %6s %10s   %-6s %10s\n",
	       "host", "steps", "owned", "delivered", "dropped", "wrapped", "frames", "shards",
	       "MB", "first:", "frames", "reads", "KB", "count:", "MB");
	for (uint32_t h = 0; h < s->num_hosts; h++) {
		const pf_podsim_host *ho = pf_podsim_host_get(sim, h);

		printf("%-6u %7llu %10llu %10llu %8llu %8llu %8llu %7llu %10.2f   %6llu %6llu %6llu "
		       "%10.1f   %6llu %10.2f\n", h, (unsigned long long)ho->steps,
		       (unsigned long long)ho->records_owned,
		       (unsigned long long)ho->records_delivered,
		       (unsigned long long)ho->records_dropped,
		       (unsigned long long)ho->records_wrapped, (unsigned long long)ho->units,
		       (unsigned long long)ho->files, (double)ho->bytes / 1e6,
		       (unsigned long long)ho->first_files, (unsigned long long)ho->first_units,
		       (unsigned long long)ho->first_reads, (double)ho->first_bytes / 1e3,
		       (unsigned long long)ho->bare_count_files,
		       (double)ho->bare_count_bytes / 1e6);
	}
	printf("(first: the shards, frames, reads and bytes its first batch needs; count: "
	       "the stream files it counts without a manifest)\n");
}

/* ------------------------------------------------------------------ */
/* JSON                                                                 */

static json_t *u64(uint64_t v)
{
	return json_integer((json_int_t)v);
}

static int print_json(const podsim_options *o, const pf_podsim *sim)
{
	const pf_podsim_summary *s = pf_podsim_summary_get(sim);
	json_t *root = json_object(), *hosts = json_array();
	int ret;

	json_object_set_new(root, "pod", json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:b,s:o,s:s}",
		"hosts", u64(s->num_hosts), "cores", u64(s->cores_per_host),
		"per_core_batch", u64(s->per_core_batch), "global_batch", u64(s->global_batch),
		"seed", u64(o->cfg.seed), "epoch", u64(o->cfg.epoch), "shuffle", o->cfg.shuffle,
		"shuffle_block", u64(s->block),
		"remainder", o->cfg.remainder == PF_REMAINDER_WRAP ? "wrap" : "drop"));
	json_object_set_new(root, "dataset", json_pack("{s:b,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		"manifest", s->manifest, "manifest_bytes", u64(s->manifest_bytes),
		"shards", u64(s->shards), "indexed", u64(s->indexed), "streams", u64(s->streams),
		"units", u64(s->units), "records", u64(s->records), "bytes", u64(s->bytes)));
	json_object_set_new(root, "epoch", json_pack("{s:o,s:o,s:o,s:o,s:o}",
		"steps", u64(s->steps), "delivered", u64(s->delivered),
		"distinct", u64(s->distinct), "remainder_dropped", u64(s->remainder_dropped),
		"remainder_wrapped", u64(s->remainder_wrapped)));
	json_object_set_new(root, "checks", json_pack("{s:b,s:b,s:b,s:s?}",
		"steps_equal", s->steps_equal, "disjoint", s->disjoint, "complete", s->complete,
		"problem", s->problem));
	json_object_set_new(root, "bucket", json_pack("{s:o,s:o,s:b,s:o,s:o,s:o,s:o}",
		"open_requests", u64(s->open_requests), "open_bytes", u64(s->open_bytes),
		"without_manifest_measured", s->bare_measured,
		"without_manifest_requests", u64(s->bare_requests),
		"without_manifest_bytes", u64(s->bare_bytes),
		"first_batch_requests", u64(s->first_requests),
		"first_batch_bytes", u64(s->first_bytes)));
	json_object_set_new(root, "seconds", json_pack("{s:f,s:f,s:f,s:f}",
		"open", (double)s->open_ns * 1e-9, "open_without_manifest",
		(double)s->bare_open_ns * 1e-9, "plan", (double)s->plan_ns * 1e-9,
		"check", (double)s->check_ns * 1e-9));
	for (uint32_t h = 0; h < s->num_hosts; h++) {
		const pf_podsim_host *ho = pf_podsim_host_get(sim, h);
		json_t *e = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
			"host", u64(h), "steps", u64(ho->steps),
			"records_owned", u64(ho->records_owned),
			"records_delivered", u64(ho->records_delivered),
			"records_dropped", u64(ho->records_dropped),
			"records_wrapped", u64(ho->records_wrapped), "units", u64(ho->units),
			"files", u64(ho->files), "bytes", u64(ho->bytes));

		json_object_set_new(e, "open", json_pack("{s:o,s:o,s:o}",
			"files", u64(ho->open_files), "reads", u64(ho->open_reads),
			"bytes", u64(ho->open_bytes)));
		json_object_set_new(e, "without_manifest", json_pack("{s:o,s:o,s:o,s:o,s:o}",
			"files", u64(ho->bare_files), "reads", u64(ho->bare_reads),
			"bytes", u64(ho->bare_bytes), "count_files", u64(ho->bare_count_files),
			"count_bytes", u64(ho->bare_count_bytes)));
		json_object_set_new(e, "first_batch", json_pack("{s:o,s:o,s:o,s:o}",
			"files", u64(ho->first_files), "units", u64(ho->first_units),
			"reads", u64(ho->first_reads), "bytes", u64(ho->first_bytes)));
		json_array_append_new(hosts, e);
	}
	json_object_set_new(root, "hosts", hosts);
	ret = json_dumpf(root, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(root);
	return ret;
}

int podsim_main(int argc, char **argv)
{
	podsim_options o = { 0 };
	pf_podsim *sim;
	pf_error err;
	int ret = parse(&o, argc, argv);

	if (ret >= 0)
		return ret;
	if (pf_podsim_run(&sim, &o.cfg, &err) < 0) {
		cli_print_error(&err);
		return 1;
	}
	ret = 0;
	if (o.json)
		ret = print_json(&o, sim) < 0 ? 1 : 0;
	else
		print_text(&o, sim);
	if (ret == 0) {
		const pf_podsim_summary *s = pf_podsim_summary_get(sim);

		ret = s->steps_equal && s->disjoint && s->complete ? 0 : 1;
	}
	pf_podsim_free(sim);
	return ret;
}
