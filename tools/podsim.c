/* SPDX-License-Identifier: Apache-2.0 */
/* shardtool podsim: print the pod simulation (podfeed.h, pf_podsim_run())
 * as text or JSON; the simulation and its checks are the library's. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "podsim.h"

static const char usage_podsim[] =
	"usage: shardtool podsim --hosts H [--cores C] [--per-core-batch B]\n"
	"                        [--seed S] [--epoch E] [--shuffle]\n"
	"                        [--shuffle-window W] [--remainder drop|wrap]\n"
	"                        [--no-manifest] [--no-compare] [--threads T]\n"
	"                        [--summary] [--json] DATASET...\n"
	"\n"
	"Plans one epoch of the dataset as each of H hosts would (1 to 65536),\n"
	"in this one process, with the loader's own planning, and reports per\n"
	"host what it reads to open the dataset, its steps and records, and what\n"
	"its first batch needs (shards, frames, reads, bytes); for the pod, the\n"
	"requests the bucket sees at start with the manifest and without it (a\n"
	"file opened is one request, each read one).  It checks, record by\n"
	"record, that every host has the same steps, no record goes to two\n"
	"hosts, and the records delivered are the epoch's but the remainder.\n"
	"  --hosts H           hosts in the pod (required)\n"
	"  --cores C           cores per host (default 1)\n"
	"  --per-core-batch B  records per core per step (default 32)\n"
	"  --seed S, --epoch E the shuffle seed and the epoch planned (default 0)\n"
	"  --shuffle           permute the frames and shuffle in windows, as the\n"
	"                      loader with shuffle on (--shuffle-window W implies\n"
	"                      it; default window 8192)\n"
	"  --remainder         drop (default) or wrap, as the loader\n"
	"  --no-manifest       plan from the shards even when DATASET is a\n"
	"                      directory holding a manifest\n"
	"  --no-compare        with a manifest, do not also open the dataset\n"
	"                      without it (every shard's tail, every stream\n"
	"                      file counted) to measure what that costs\n"
	"  --threads T         stream files counted at once (default: CPUs)\n"
	"  --summary           no per-host table\n"
	"  --json              one JSON object on stdout instead of the text\n"
	"Exit status: 0 every check holds, 1 one does not or the dataset cannot\n"
	"be opened, 2 bad usage.\n";

typedef struct podsim_options {
	pf_podsim_config cfg;
	bool json, summary;
} podsim_options;

static int parse(podsim_options *o, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "hosts", required_argument, NULL, 'H' },
		{ "cores", required_argument, NULL, 'c' },
		{ "per-core-batch", required_argument, NULL, 'b' },
		{ "seed", required_argument, NULL, 's' },
		{ "epoch", required_argument, NULL, 'e' },
		{ "shuffle", no_argument, NULL, 'S' },
		{ "shuffle-window", required_argument, NULL, 'w' },
		{ "remainder", required_argument, NULL, 'r' },
		{ "no-manifest", no_argument, NULL, 'M' },
		{ "no-compare", no_argument, NULL, 'C' },
		{ "threads", required_argument, NULL, 't' },
		{ "summary", no_argument, NULL, 'u' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t v;
	int c;

	o->cfg.per_core_batch = 32;
	o->cfg.measure_without_manifest = true;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			if (cli_parse_u64("--hosts", optarg, 1, PF_PODSIM_MAX_HOSTS, false, &v))
				return 2;
			o->cfg.num_hosts = (uint32_t)v;
			break;
		case 'c':
			if (cli_parse_u64("--cores", optarg, 1, 4096, false, &v))
				return 2;
			o->cfg.cores_per_host = (uint32_t)v;
			break;
		case 'b':
			if (cli_parse_u64("--per-core-batch", optarg, 1, 1u << 24, false, &v))
				return 2;
			o->cfg.per_core_batch = (uint32_t)v;
			break;
		case 's':
			if (cli_parse_u64("--seed", optarg, 0, UINT64_MAX, false, &o->cfg.seed))
				return 2;
			break;
		case 'e':
			if (cli_parse_u64("--epoch", optarg, 0, UINT32_MAX, false, &v))
				return 2;
			o->cfg.epoch = (uint32_t)v;
			break;
		case 'S': o->cfg.shuffle = true; break;
		case 'w':
			if (cli_parse_u64("--shuffle-window", optarg, 1, 1u << 30, false, &v))
				return 2;
			o->cfg.shuffle = true;
			o->cfg.shuffle_window = (uint32_t)v;
			break;
		case 'r':
			if (!strcmp(optarg, "drop")) {
				o->cfg.remainder = PF_REMAINDER_DROP;
			} else if (!strcmp(optarg, "wrap")) {
				o->cfg.remainder = PF_REMAINDER_WRAP;
			} else {
				cli_fail("podsim: --remainder: '%s' is not drop or wrap", optarg);
				return 2;
			}
			break;
		case 'M': o->cfg.ignore_manifest = true; break;
		case 'C': o->cfg.measure_without_manifest = false; break;
		case 't':
			if (cli_parse_u64("--threads", optarg, 1, 1024, false, &v))
				return 2;
			o->cfg.threads = (unsigned)v;
			break;
		case 'u': o->summary = true; break;
		case 'j': o->json = true; break;
		case 'h': fputs(usage_podsim, stdout); return 0;
		default: fputs(usage_podsim, stderr); return 2;
		}
	}
	if (!o->cfg.num_hosts) {
		cli_fail("podsim: --hosts H is required");
		return 2;
	}
	if (optind == argc) {
		cli_fail("podsim: name the dataset (a directory, its manifest, files or globs)");
		return 2;
	}
	o->cfg.paths = (const char *const *)argv + optind;
	o->cfg.npaths = (size_t)(argc - optind);
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
