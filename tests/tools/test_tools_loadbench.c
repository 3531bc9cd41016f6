/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench end to end: counts, the report's fields, baselines, bad flags. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "testutil.h"

#define DATASET_RECORDS 5000u

/* An integer member of a JSON object, as unsigned (the counts here). */
static uint64_t ju(json_t *obj, const char *key)
{
	return (uint64_t)json_integer_value(json_object_get(obj, key));
}

/* A number member (integer or real) as a double. */
static double jd(json_t *obj, const char *key)
{
	return json_number_value(json_object_get(obj, key));
}

/* 5000 token records in 4 plain shards, converted to 4 indexed shards in
 * dir/z.  @return dir. */
static const char *make_dataset(void)
{
	const char *d = tu_tmpdir();
	const char *st = tu_env_tool("SHARDTOOL");

	cr_assert_eq(tu_system("%s synth --kind tokens --records %u --shards 4 --out %s/raw >/dev/null",
			       st, DATASET_RECORDS, d), 0);
	cr_assert_eq(tu_system("%s convert --shards 4 --out %s/z %s/raw >/dev/null", st, d, d), 0);
	return d;
}

/* Run loadbench with args; @return its JSON report (caller decrefs). */
static json_t *run_json(const char *args)
{
	char cmd[4096], *out;
	size_t cap = 1 << 16;
	json_error_t jerr;
	json_t *o;
	int st;

	snprintf(cmd, sizeof(cmd), "%s --json --quiet %s", tu_env_tool("LOADBENCH"), args);
	out = malloc(cap);
	st = tu_capture(cmd, out, cap, NULL);
	cr_assert_eq(WEXITSTATUS(st), 0, "%s -> %d", cmd, WEXITSTATUS(st));
	o = json_loads(out, 0, &jerr);
	cr_assert_not_null(o, "%s: %s", jerr.text, out);
	free(out);
	return o;
}

static bool is_stage(const char *s)
{
	return s && (!strcmp(s, "io") || !strcmp(s, "decode"));
}

Test(loadbench, one_epoch_counts_and_report)
{
	const char *d = make_dataset();
	char args[1024];
	const uint64_t b = 32, cores = 2, global = b * cores;

	snprintf(args, sizeof(args), "--per-core-batch %llu --cores %llu --threads 2 --epochs 1 %s/z",
		 (unsigned long long)b, (unsigned long long)cores, d);
	json_t *o = run_json(args);

	cr_assert_eq(ju(o, "records"), ju(o, "steps") * b * cores);
	cr_assert_eq(ju(o, "steps"), DATASET_RECORDS / global);
	cr_assert_eq(ju(o, "records_per_epoch"), DATASET_RECORDS);
	cr_assert_eq(ju(o, "remainder_dropped"), DATASET_RECORDS % global);
	cr_assert(is_stage(json_string_value(json_object_get(o, "bottleneck"))));
	cr_assert_gt(jd(o, "seconds"), 0);
	cr_assert_gt(jd(o, "records_per_s"), 0);
	cr_assert_gt(jd(o, "batches_per_s"), 0);
	cr_assert_gt(ju(o, "bytes_read"), 0);
	cr_assert_gt(ju(o, "bytes_decompressed"), ju(o, "bytes_read") / 2);
	cr_assert_gt(jd(o, "mb_per_s_read"), 0);
	json_t *stages = json_object_get(o, "stages");
	cr_assert_not_null(stages);
	const char *names[] = { "io", "decode" };
	for (int i = 0; i < 2; i++) {
		json_t *v = json_object_get(stages, names[i]);
		cr_assert(json_is_number(v), "stages.%s", names[i]);
		cr_assert_geq(json_number_value(v), 0);
		cr_assert_leq(json_number_value(v), 1.05, "stages.%s", names[i]);
	}
	json_t *lat = json_object_get(o, "next_latency_us");
	cr_assert_leq(jd(lat, "p50"), jd(lat, "p90"));
	cr_assert_leq(jd(lat, "p90"), jd(lat, "p99"));
	cr_assert_gt(jd(lat, "p99"), 0);
	cr_assert_gt(jd(o, "first_batch_ms"), 0);
	cr_assert_gt(ju(o, "peak_rss_bytes"), 0);
	cr_assert_eq(ju(o, "memory_budget_bytes"), 512ull << 20);
	cr_assert_gt(ju(o, "memory_pool_bytes"), 0);
	cr_assert_leq(ju(o, "memory_pool_bytes"), ju(o, "memory_budget_bytes"));
	const char *be = json_string_value(json_object_get(o, "io_backend"));
	cr_assert(be && (!strcmp(be, "io_uring") || !strcmp(be, "pread")), "%s", be);
	cr_assert_eq(ju(o, "threads"), 2);
	json_t *topo = json_object_get(o, "topology");
	cr_assert_eq(ju(topo, "num_hosts"), 1);
	cr_assert_eq(ju(topo, "host_index"), 0);
	cr_assert_eq(ju(topo, "cores"), cores);
	cr_assert_eq(ju(topo, "per_core_batch"), b);
	cr_assert_eq(ju(topo, "global_batch"), global);
	cr_assert_null(json_object_get(o, "baseline"));
	json_decref(o);
}

/* Peak RSS stays within the memory budget plus a small fixed overhead
 * (code, libraries, zstd contexts, the dataset's index), over several
 * epochs so that every pool has been touched.  The budget is tight: the
 * pools take most of it. */
#define RSS_OVERHEAD (24ull << 20)
Test(loadbench, peak_rss_stays_within_the_budget)
{
	const char *d = make_dataset();
	char args[1024];

	snprintf(args, sizeof(args), "--per-core-batch 64 --threads 2 --epochs 3 --shuffle-window 2048 "
		 "--memory 64 --features tokens:int64[512],label:int64[1] %s/z", d);
	json_t *o = run_json(args);
	uint64_t budget = ju(o, "memory_budget_bytes");

	cr_assert_eq(budget, 64ull << 20);
	cr_assert_gt(ju(o, "memory_pool_bytes"), budget / 2, "pools %llu",
		     (unsigned long long)ju(o, "memory_pool_bytes"));
	cr_assert_leq(ju(o, "peak_rss_bytes"), budget + RSS_OVERHEAD,
		      "peak RSS %llu MiB, budget %llu MiB",
		      (unsigned long long)ju(o, "peak_rss_bytes") >> 20,
		      (unsigned long long)budget >> 20);
	json_decref(o);
}

Test(loadbench, topology_steps_and_epochs)
{
	const char *d = make_dataset();
	char args[1024];

	/* Two hosts: each yields the same floor(records / global) steps. */
	for (int h = 0; h < 2; h++) {
		snprintf(args, sizeof(args), "--per-core-batch 25 --cores 2 --num-hosts 2 "
			 "--host-index %d --threads 1 %s/z", h, d);
		json_t *o = run_json(args);
		cr_assert_eq(ju(o, "steps"), DATASET_RECORDS / 100);
		cr_assert_eq(ju(o, "records"), ju(o, "steps") * 50);
		cr_assert_eq(ju(json_object_get(o, "topology"), "global_batch"), 100);
		cr_assert_lt(ju(o, "bytes_read"), ju(o, "bytes_decompressed"));
		json_decref(o);
	}
	/* --steps stops early; --steps alone runs past one epoch. */
	snprintf(args, sizeof(args), "--per-core-batch 64 --steps 10 %s/z", d);
	json_t *o = run_json(args);
	cr_assert_eq(ju(o, "steps"), 10);
	cr_assert_eq(ju(o, "records"), 640);
	json_decref(o);
	snprintf(args, sizeof(args), "--per-core-batch 64 --steps 100 --memory 128 %s/z", d);
	o = run_json(args);
	cr_assert_eq(ju(o, "steps"), 100);
	cr_assert_eq(ju(o, "memory_budget_bytes"), 128ull << 20);
	json_decref(o);
	snprintf(args, sizeof(args), "--per-core-batch 64 --epochs 2 %s/z", d);
	o = run_json(args);
	cr_assert_eq(ju(o, "steps"), 2 * (DATASET_RECORDS / 64));
	json_decref(o);
	/* An explicit spec, and the wrap remainder. */
	snprintf(args, sizeof(args), "--per-core-batch 64 --remainder wrap "
		 "--features 'tokens:int32[128],label:int32[1]' %s/z", d);
	o = run_json(args);
	cr_assert_eq(ju(o, "steps"), (DATASET_RECORDS + 63) / 64);
	cr_assert_str_eq(json_string_value(json_object_get(o, "features")),
			 "tokens:int32[128],label:int32[1]");
	json_decref(o);
}

Test(loadbench, baseline_fields)
{
	const char *d = make_dataset();
	char args[1024];

	snprintf(args, sizeof(args), "--per-core-batch 32 --threads 2 --baseline --repeat 3 %s/z", d);
	json_t *o = run_json(args);
	json_t *bl = json_object_get(o, "baseline");

	cr_assert_not_null(bl);
	cr_assert_gt(jd(bl, "read_seconds"), 0);
	cr_assert_gt(jd(bl, "decompress_seconds"), 0);
	cr_assert_gt(jd(bl, "read_mb_per_s"), 0);
	cr_assert_gt(jd(bl, "decompress_mb_per_s"), 0);
	cr_assert_eq(ju(bl, "files"), 4);
	cr_assert_eq(ju(bl, "threads"), 2);
	/* The baselines read every frame: all the loader's bytes and more. */
	cr_assert_geq(ju(bl, "bytes"), ju(o, "bytes_read"));
	cr_assert_gt(jd(o, "ratio_to_read"), 0);
	cr_assert_gt(jd(o, "ratio_to_decompress"), 0);
	cr_assert_eq(ju(o, "repeat"), 3);
	/* The decode pass decodes every record of the frames (the dataset
	 * fits in memory), and the bound is the two passes' rates combined:
	 * 1 / (1/decompress + 1/decode), below both; the loader's ratio to
	 * it is its rate over the bound's. */
	double dec = jd(bl, "decompress_mb_per_s"), code = jd(bl, "decode_mb_per_s");
	double bound = jd(bl, "bound_mb_per_s");

	cr_assert_gt(jd(bl, "decode_seconds"), 0);
	cr_assert_eq(ju(bl, "decode_records"), DATASET_RECORDS);
	cr_assert_eq(ju(bl, "decode_bytes"), ju(bl, "bytes_decompressed"));
	cr_assert_float_eq(jd(bl, "decode_records_per_s"),
			   DATASET_RECORDS / jd(bl, "decode_seconds"),
			   1e-6 * jd(bl, "decode_records_per_s"));
	cr_assert_gt(code, 0);
	cr_assert_float_eq(bound, 1 / (1 / dec + 1 / code), 1e-6 * bound);
	cr_assert_lt(bound, dec);
	cr_assert_lt(bound, code);
	cr_assert_gt(jd(o, "ratio_to_bound"), jd(o, "ratio_to_decompress"));
	cr_assert_float_eq(jd(o, "ratio_to_bound"), jd(o, "ratio_to_decompress") * dec / bound,
			   1e-6 * jd(o, "ratio_to_bound"));
	json_decref(o);
}

Test(loadbench, text_report)
{
	const char *d = make_dataset();
	char cmd[2048], out[8192];

	snprintf(cmd, sizeof(cmd), "%s --quiet --per-core-batch 32 --baseline %s/z 2>&1",
		 tu_env_tool("LOADBENCH"), d);
	cr_assert_eq(WEXITSTATUS(tu_capture(cmd, out, sizeof(out), NULL)), 0, "%s", out);
	const char *lines[] = { "records/s", "batches/s", "MB/s", "bottleneck ",
				"p50", "p99", "first batch", "peak RSS", "budget",
				"dropped", "the decompress pass", "  decode      ",
				"  bound       ", "x the bound" };
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		cr_assert(strstr(out, lines[i]), "no '%s' in:\n%s", lines[i], out);
	/* No progress line when stderr is not a terminal. */
	cr_assert_null(strchr(out, '\r'), "%s", out);
}

/* The first batch in every report, split: opening the dataset by phase
 * (the manifest, every shard's index tail, counting stream files), the
 * loader's start and the first reads; the phases that did not run are 0. */
static json_t *open_of(json_t *o)
{
	json_t *op = json_object_get(o, "open");

	cr_assert(json_is_object(op), "no open member");
	/* The parts add up to the first batch; first_batch_ms says the same. */
	cr_assert_gt(jd(o, "first_batch_seconds"), 0);
	cr_assert_float_eq(jd(o, "first_batch_ms"), jd(o, "first_batch_seconds") * 1e3, 1e-6);
	cr_assert_float_eq(jd(op, "seconds") + jd(o, "loader_start_seconds") +
			   jd(o, "first_reads_seconds"), jd(o, "first_batch_seconds"), 1e-6);
	cr_assert_float_eq(jd(op, "seconds"), jd(op, "manifest_seconds") +
			   jd(op, "index_seconds") + jd(op, "count_seconds") +
			   jd(op, "exchange_seconds"), 1e-6);
	cr_assert_eq(jd(op, "exchange_seconds"), 0, "one host exchanges nothing");
	return op;
}

Test(loadbench, first_batch_and_the_open_phases)
{
	const char *d = make_dataset();
	char args[1024], cmd[2048], out[8192];
	uint64_t plain = 0;

	/* From the manifest: one file, no tails, nothing counted. */
	snprintf(args, sizeof(args), "--threads 2 --steps 2 %s/z", d);
	json_t *o = run_json(args), *op = open_of(o);
	cr_assert_eq(ju(op, "files"), 1);
	cr_assert_gt(jd(op, "manifest_seconds"), 0);
	cr_assert_eq(jd(op, "index_seconds"), 0);
	cr_assert_eq(ju(op, "count_files"), 0);
	json_decref(o);

	/* Without it: every shard's index tail. */
	snprintf(args, sizeof(args), "--threads 2 --steps 2 --no-manifest %s/z", d);
	o = run_json(args), op = open_of(o);
	cr_assert_eq(ju(op, "files"), 4);
	cr_assert_eq(jd(op, "manifest_seconds"), 0);
	cr_assert_gt(jd(op, "index_seconds"), 0);
	cr_assert_eq(ju(op, "count_files"), 0);
	json_decref(o);

	/* Plain stream files: each counted, read whole. */
	for (int i = 0; i < 4; i++) {
		char path[1024];
		size_t len;

		snprintf(path, sizeof(path), "%s/raw/tokens-%05d-of-00004.tfrecord", d, i);
		free(tu_read_file(path, &len));
		plain += len;
	}
	snprintf(args, sizeof(args), "--threads 2 --steps 2 --features tokens:int32[256],label:int64[1] "
		 "%s/raw", d);
	o = run_json(args), op = open_of(o);
	cr_assert_eq(ju(op, "count_files"), 4);
	cr_assert_eq(ju(op, "count_bytes"), plain);
	cr_assert_eq(ju(op, "count_decompressed"), plain);
	cr_assert_gt(jd(op, "count_seconds"), 0);
	json_decref(o);

	/* The text says the same. */
	snprintf(cmd, sizeof(cmd), "%s --quiet --threads 2 --steps 2 --features "
		 "tokens:int32[256],label:int64[1] %s/raw 2>&1", tu_env_tool("LOADBENCH"), d);
	cr_assert_eq(WEXITSTATUS(tu_capture(cmd, out, sizeof(out), NULL)), 0, "%s", out);
	const char *says[] = { "first batch ", ": opening the dataset ", "counting stream files ",
			       "first reads ", "4 files (every shard) opened to plan; 4 stream "
			       "files counted here" };
	for (size_t i = 0; i < sizeof(says) / sizeof(says[0]); i++)
		cr_assert(strstr(out, says[i]), "no '%s' in:\n%s", says[i], out);
}

Test(loadbench, bad_flags_and_missing_files)
{
	const char *d = make_dataset();
	char cmd[2048], out[8192];
	struct { const char *args; int status; const char *says; } cases[] = {
		{ "--per-core-batch abc Z", 2, "--per-core-batch: 'abc' is not a whole number" },
		{ "--per-core-batch 0 Z", 2, "--per-core-batch: '0' is out of range" },
		{ "--cores -1 Z", 2, "--cores: '-1'" },
		{ "--threads 2x Z", 2, "--threads: '2x'" },
		{ "--steps 99999999999999999999 Z", 2, "--steps: '99999999999999999999' is too large" },
		{ "--io-depth 0 Z", 2, "--io-depth: '0' is out of range" },
		{ "--memory lots Z", 2, "--memory: 'lots'" },
		{ "--shuffle-window x Z", 2, "--shuffle-window: 'x'" },
		{ "--repeat 0 Z", 2, "--repeat: '0'" },
		{ "--remainder keep Z", 2, "--remainder: 'keep' is not drop or wrap" },
		{ "--num-hosts 2 --host-index 2 Z", 2, "--host-index: 2 is not below --num-hosts 2" },
		{ "--frobnicate Z", 2, "unknown option '--frobnicate'" },
		{ "--save-every 5 Z", 2, "--save-every: needs --save-state FILE" },
		{ "--resume /nonexistent/state Z", 2, "--resume: /nonexistent/state: No such file" },
		{ "--per-core-batch", 2, "--per-core-batch: a value is required" },
		{ "", 2, "no shards given" },
		{ "--features 'tokens:int33[4]' Z", 2, "--features:" },
		{ "--pack 0 --features 'tokens:int32[*]' Z", 2, "--pack: '0' is out of range" },
		{ "--pack x Z", 2, "--pack: 'x'" },
		{ "--pack 64 --pack-mode best Z", 2, "--pack-mode: 'best' is not first-fit or concat" },
		{ "--features 'tokens:int32[*]' Z", 1, "'tokens' is ragged ([*]): give it a length" },
		{ "--pack 2000000 --features 'tokens:int32[*]' Z", 1,
		  "pack length 2000000 is too large (at most 1048576)" },
		{ "--pack 64 --pack-pool 65 --features 'tokens:int32[*]' Z", 1,
		  "pack pool of 65 open rows is out of range 1..64" },
		{ "--pack 64 --features 'tokens:int32[*],label:int64[1]' Z", 1,
		  "'label' has a fixed length ([1]) beside packed features" },
		{ "--pack 64 --features 'tokens:float32[*]:default=0' Z", 2,
		  "'default' does not apply to a ragged feature" },
		{ "/nonexistent/shard.tfrecord.zst", 1, "/nonexistent/shard.tfrecord.zst" },
		{ "--features 'label:int64[1]' Z /nonexistent/b.tfrecord.zst", 1, "/nonexistent/b.tfrecord.zst" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char args[1024];
		const char *z = strstr(cases[i].args, "Z");

		/* Z stands for the dataset. */
		if (z)
			snprintf(args, sizeof(args), "%.*s%s/z%s", (int)(z - cases[i].args),
				 cases[i].args, d, z + 1);
		else
			snprintf(args, sizeof(args), "%s", cases[i].args);
		snprintf(cmd, sizeof(cmd), "%s --quiet %s 2>&1", tu_env_tool("LOADBENCH"), args);
		int st = tu_capture(cmd, out, sizeof(out), NULL);
		cr_assert_eq(WEXITSTATUS(st), cases[i].status, "%s -> %d: %s", args,
			     WEXITSTATUS(st), out);
		cr_assert(strstr(out, cases[i].says), "%s -> %s", args, out);
	}
	cr_assert_eq(tu_system("%s --help >/dev/null", tu_env_tool("LOADBENCH")), 0);
}

Test(loadbench, save_state_resume_and_interrupt, .timeout = 120)
{
	const char *d = make_dataset();
	const char *lb = tu_env_tool("LOADBENCH");
	char args[2048], path[1024];
	json_t *o;
	uint8_t *blob;
	size_t len;
	pf_state_info in;
	pf_error err;
	int st;

	/* 13 steps, then the other 37 of the epoch (5000 / 100). */
	snprintf(args, sizeof(args), "--per-core-batch 50 --cores 2 --steps 13 "
		 "--save-state %s/s1 %s/z", d, d);
	o = run_json(args);
	cr_assert_eq(ju(o, "steps"), 13);
	json_decref(o);
	snprintf(args, sizeof(args), "--per-core-batch 50 --cores 2 --resume %s/s1 "
		 "--save-state %s/s2 %s/z", d, d, d);
	o = run_json(args);
	cr_assert_eq(ju(o, "steps"), DATASET_RECORDS / 100 - 13);
	json_decref(o);
	snprintf(path, sizeof(path), "%s/s2", d);
	blob = tu_read_file(path, &len);
	cr_assert_eq(pf_state_inspect(blob, len, &in, &err), 0, "%s", err.msg);
	cr_assert(in.fresh);
	cr_assert_eq(in.epoch, 1);
	cr_assert_eq(in.global_step, DATASET_RECORDS / 100);
	free(blob);

	/* SIGINT: the state is saved and the exit status says so. */
	st = tu_system("timeout --preserve-status -s INT 0.5 %s --quiet --epochs 100000 "
		       "--per-core-batch 50 --cores 2 --save-state %s/s3 --save-every 7 "
		       "%s/z >/dev/null 2>%s/err", lb, d, d, d);
	cr_assert_eq(st, 130, "status %d", st);
	snprintf(path, sizeof(path), "%s/s3", d);
	blob = tu_read_file(path, &len);
	cr_assert_eq(pf_state_inspect(blob, len, &in, &err), 0, "%s", err.msg);
	cr_assert_gt(in.global_step, 0);
	free(blob);
	snprintf(path, sizeof(path), "%s/err", d);
	blob = tu_read_file(path, &len);
	blob = realloc(blob, len + 1);
	blob[len] = 0;
	cr_assert(strstr((char *)blob, "interrupted after"), "%s", blob);
	free(blob);

	/* A damaged state: exit 2, naming the file and the byte. */
	snprintf(path, sizeof(path), "%s/s1", d);
	blob = tu_read_file(path, &len);
	blob[len - 1] ^= 0x40;
	snprintf(path, sizeof(path), "%s/bad", d);
	tu_write_file(path, blob, len);
	free(blob);
	st = tu_system("%s --quiet --per-core-batch 50 --cores 2 --resume %s %s/z "
		       ">/dev/null 2>%s/err", lb, path, d, d);
	cr_assert_eq(st, 2);
	snprintf(path, sizeof(path), "%s/err", d);
	blob = tu_read_file(path, &len);
	blob = realloc(blob, len + 1);
	blob[len] = 0;
	cr_assert(strstr((char *)blob, "/bad: byte 16: state payload fails its CRC32C"), "%s",
		  blob);
	free(blob);
}

/* The spec inferred from an index gives default=0 to the features some
 * records lack (the Chicago taxi fixture leaves 'company' unset in 70 of
 * 205 records), so the run reads them all; a misspelled --features name is
 * refused before anything is read, in one line naming the shard, the
 * schema and the near name. */
Test(loadbench, features_the_records_lack, .timeout = 60)
{
	const char *d = tu_tmpdir();
	char args[2048], cmd[2048], out[4096];
	json_t *o;
	const char *f;

	cr_assert_eq(tu_system("%s convert --out %s/cz %s >/dev/null", tu_env_tool("SHARDTOOL"),
			       d, tu_fixture("tfx_chicago_taxi_unlabelled_00008.tfrecord.gz")), 0);
	snprintf(args, sizeof(args), "--per-core-batch 5 --threads 1 %s/cz", d);
	o = run_json(args);
	f = json_string_value(json_object_get(o, "features"));
	cr_assert(f && strstr(f, "company:bytes[512]:default=0,") &&
		  strstr(f, ",fare:float32[1],"), "%s", f);
	cr_assert_eq(ju(o, "records"), 205 / 5 * 5);
	json_decref(o);

	snprintf(cmd, sizeof(cmd), "%s --quiet --per-core-batch 5 --features "
		 "'compny:bytes[8],fare:float32[1]' %s/cz 2>&1 >/dev/null | grep -v '^loadbench: host '",
		 tu_env_tool("LOADBENCH"), d);
	tu_capture(cmd, out, sizeof(out), NULL);
	cr_assert(strstr(out, "/cz/podfeed.manifest: feature spec: 'compny' is "
			 "not in the manifest's schema (company, ") &&
		  strstr(out, "did you mean 'company'?") && strchr(out, '\n') &&
		  !strchr(out, '\n')[1], "%s", out);
	snprintf(cmd, sizeof(cmd), "%s --quiet --per-core-batch 5 --features "
		 "'compny:bytes[8],fare:float32[1]' %s/cz >/dev/null 2>&1", tu_env_tool("LOADBENCH"), d);
	cr_assert_eq(WEXITSTATUS(tu_capture(cmd, out, sizeof(out), NULL)), 1);
}

/* A 0-byte plain shard is 0 records and the report names it (text and
 * JSON); a 0-byte .zst is damaged: the run fails naming it, or with
 * --on-corrupt skip drops it (and names it as empty too). */
Test(loadbench, empty_files_are_named, .timeout = 60)
{
	const char *d = make_dataset();
	const char *lb = tu_env_tool("LOADBENCH");
	char args[1024], cmd[4096], out[8192];
	json_t *o, *e;

	cr_assert_eq(tu_system(": > %s/z/empty.tfrecord", d), 0);
	/* The files listed, not convert's manifest (which lacks the new). */
	snprintf(args, sizeof(args), "--per-core-batch 50 --no-manifest %s/z", d);
	o = run_json(args);
	cr_assert_eq(ju(o, "records"), DATASET_RECORDS);
	e = json_object_get(o, "empty_files");
	cr_assert_eq(json_array_size(e), 1);
	cr_assert(strstr(json_string_value(json_array_get(e, 0)), "/z/empty.tfrecord"));
	json_decref(o);
	snprintf(cmd, sizeof(cmd), "%s --quiet %s 2>/dev/null", lb, args);
	cr_assert_eq(WEXITSTATUS(tu_capture(cmd, out, sizeof(out), NULL)), 0);
	cr_assert(strstr(out, "\nempty       1 file of 0 bytes, 0 records: ") &&
		  strstr(out, "/z/empty.tfrecord\n"), "%s", out);

	cr_assert_eq(tu_system(": > %s/z/empty.tfrecord.zst", d), 0);
	snprintf(cmd, sizeof(cmd), "%s --quiet %s 2>&1 >/dev/null | grep -v '^loadbench: host '",
		 lb, args);
	tu_capture(cmd, out, sizeof(out), NULL);
	cr_assert(strstr(out, "/z/empty.tfrecord.zst: byte 0: 0 bytes, but the name says zstd") &&
		  !strchr(out, '\n')[1], "%s", out);
	snprintf(args, sizeof(args), "--per-core-batch 50 --no-manifest --on-corrupt skip %s/z",
		 d);
	o = run_json(args);
	cr_assert_eq(ju(o, "records"), DATASET_RECORDS);
	cr_assert_eq(ju(json_object_get(o, "corrupt"), "drops"), 1);
	cr_assert_eq(json_array_size(json_object_get(o, "empty_files")), 2);
	json_decref(o);
}

/* loadbench --resume reports the remainder of the epoch it finishes:
 * 5000 records in steps of 30 leave 20, whichever run ends the epoch. */
Test(loadbench, a_resumed_run_reports_the_epoch_remainder, .timeout = 60)
{
	const char *d = make_dataset();
	char args[1024];
	json_t *o;

	snprintf(args, sizeof(args), "--per-core-batch 30 --steps 13 --save-state %s/s %s/z", d, d);
	o = run_json(args);
	cr_assert_eq(ju(o, "remainder_dropped"), 0, "the epoch has not ended");
	json_decref(o);
	snprintf(args, sizeof(args), "--per-core-batch 30 --resume %s/s %s/z", d, d);
	o = run_json(args);
	cr_assert_eq(ju(o, "steps"), DATASET_RECORDS / 30 - 13);
	cr_assert_eq(ju(o, "remainder_dropped"), DATASET_RECORDS % 30);
	json_decref(o);
}

/* The steady figure: n/a (with why) when the window from the first batch
 * to the last is under 10 batches or 100 ms (a few prefetched batches
 * once gave 84 M records/s), else records/s over that window. */
Test(loadbench, steady_needs_a_window, .timeout = 120)
{
	const char *d = make_dataset();
	char args[1024];
	json_t *o;

	/* 5000 records in 5 batches: 4 after the first. */
	snprintf(args, sizeof(args), "--per-core-batch 1000 %s/z", d);
	o = run_json(args);
	cr_assert(json_is_null(json_object_get(o, "steady_records_per_s")));
	cr_assert_str_eq(json_string_value(json_object_get(o, "steady_na")),
			 "fewer than 10 batches after the first");
	json_decref(o);
	/* Many small batches over several epochs. */
	snprintf(args, sizeof(args), "--per-core-batch 10 --epochs 40 --threads 1 %s/z", d);
	o = run_json(args);
	if (json_object_get(o, "steady_na")) {
		cr_assert_str_eq(json_string_value(json_object_get(o, "steady_na")),
				 "under 100 ms from the first batch to the last");
		cr_assert_lt(jd(o, "seconds"), 0.2);
	} else {
		double st = jd(o, "steady_records_per_s");

		/* 199,990 records after the first batch, in under the whole run */
		cr_assert_geq(st, (double)(40 * DATASET_RECORDS - 10) / jd(o, "seconds"));
	}
	json_decref(o);
}

/* A usage error is one line naming the problem and pointing at --help,
 * not the help text. */
Test(loadbench, a_usage_error_is_one_line)
{
	static const char *const cases[][2] = {
		{ "--foo x", "loadbench: unknown option '--foo'; try 'loadbench --help'\n" },
		{ "--per-core-batch", "loadbench: --per-core-batch: a value is required; "
				      "try 'loadbench --help'\n" },
		{ "", "loadbench: no shards given; try 'loadbench --help'\n" },
	};
	char cmd[1024], out[8192];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(cmd, sizeof(cmd), "%s %s 2>&1", tu_env_tool("LOADBENCH"), cases[i][0]);
		cr_assert_eq(WEXITSTATUS(tu_capture(cmd, out, sizeof(out), NULL)), 2, "%s", out);
		cr_assert_str_eq(out, cases[i][1]);
	}
}

/* Names a job script gets wrong: an empty or unset variable, an empty
 * directory, a malformed fault spec.  Each is refused, naming the flag or
 * the path (issue 25): never a fresh epoch where a resume was asked for,
 * never a message that leaves the user to guess which argument. */
Test(loadbench, empty_paths_and_bad_values_name_the_culprit)
{
	const char *d = make_dataset();
	char z[1024], e[1024], st[1024], cut[1024];
	const char *where[] = { z, e, st, cut };
	struct { const char *args; int status; const char *says; } cases[] = {
		/* --resume "$CKPT" with CKPT unset must not start over */
		{ "--quiet --resume '' Z", 2, "--resume: an empty path" },
		{ "--resume , Z", 2, "--resume: an empty path in ','" },
		{ "--resume S,,S Z", 2, "--resume: an empty path in" },
		{ "--resume S, Z", 2, "--resume: an empty path in" },
		{ "--resume /nonexistent/state Z", 2, "--resume: /nonexistent/state" },
		{ "--save-state '' Z", 2, "--save-state: an empty path" },
		{ "--on-corrupt skip --quarantine '' Z", 2, "--quarantine: an empty path" },
		/* a usage error exits 2 naming the flag */
		{ "--faults eio:2.0 Z", 2, "--faults: byte 4: fraction 2.0 is above 1" },
		{ "--faults bogus Z", 2, "--faults: byte 0: unknown fault" },
		/* the empty directory and the empty path named */
		{ "E", 1, "/e: the directory (argument 1) holds no shards" },
		{ "Z/part-00000-of-00004.tfrecord.zst E", 1, "/e: the directory (argument 2) holds no shards" },
		{ "Z ''", 1, "path 2 of 2 is empty" },
		/* skip mode that leaves no record names what it dropped */
		{ "--on-corrupt skip --features label:int64[1] C", 1,
		  "/cut.tfrecord.zst: byte 20000: truncated zstd stream" },
		/* too few records for the topology: the loader's refusal */
		{ "--num-hosts 9000 --host-index 0 --per-core-batch 1 Z", 1,
		  "fewer than one global batch of 9000" },
	};

	/* Z: the dataset, E: an empty directory, S: a saved state, C: a
	 * stock zstd stream (one frame) cut at byte 20000. */
	snprintf(z, sizeof(z), "%s/z", d);
	snprintf(cut, sizeof(cut), "%s/cut.tfrecord.zst", d);
	cr_assert_eq(tu_system("zstd -q -c %s/raw/tokens-00000-of-00004.tfrecord | head -c 20000 "
			       ">%s", d, cut), 0);
	snprintf(e, sizeof(e), "%s/e", d);
	snprintf(st, sizeof(st), "%s/s", d);
	cr_assert_eq(tu_system("mkdir %s/e && %s --quiet --steps 1 --per-core-batch 8 "
			       "--save-state %s/s %s/z >/dev/null", d, tu_env_tool("LOADBENCH"),
			       d, d), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char args[1024];

		tu_subst(args, sizeof(args), cases[i].args, "ZESC", where);
		tu_expect_run(tu_env_tool("LOADBENCH"), args, cases[i].status, cases[i].says);
	}
}

/* A plain shard cut inside a record, read with --on-corrupt skip: the
 * records the cut took cannot be counted, so the report says the loss is
 * unknown (JSON null, text "unknown") with the bytes skipped, never
 * "0 records lost" (issue 25). */
Test(loadbench, skip_mode_reports_an_uncountable_loss_as_unknown, .timeout = 60)
{
	const char *d = make_dataset();
	char args[2048], cmd[2600], out[16384];
	json_t *o, *c;

	cr_assert_eq(tu_system("mkdir %s/cut && f=%s/raw/tokens-00000-of-00004.tfrecord && "
			       "head -c $(($(stat -c %%s $f) * 45 / 100)) $f >%s/cut/a.tfrecord",
			       d, d, d), 0);
	snprintf(args, sizeof(args), "--per-core-batch 1 --on-corrupt skip "
		 "--features label:int64[1] %s/cut", d);
	o = run_json(args);
	c = json_object_get(o, "corrupt");
	cr_assert_eq(ju(c, "drops"), 1);
	cr_assert(json_is_null(json_object_get(c, "records_lost")), "%s",
		  json_dumps(c, JSON_COMPACT));
	cr_assert_eq(ju(c, "units_unknown"), 1);
	cr_assert_eq(ju(c, "records_lost_known"), 0);
	cr_assert_gt(ju(c, "bytes_skipped"), 0);
	cr_assert_gt(ju(o, "records"), 0);
	json_decref(o);

	snprintf(cmd, sizeof(cmd), "%s --quiet %s 2>&1", tu_env_tool("LOADBENCH"), args);
	cr_assert_eq(WEXITSTATUS(tu_capture(cmd, out, sizeof(out), NULL)), 0, "%s", out);
	cr_assert(strstr(out, "corrupt     1 units dropped (records lost: unknown (1 unit of "
			 "unknown size); "), "%s", out);
	cr_assert(strstr(out, " bytes skipped), 0 empty rows"), "%s", out);
}

/* --pack: the report's packing object, the same figures in text. */
Test(loadbench, packing_report, .timeout = 120)
{
	const char *d = make_dataset();
	char args[1024];
	json_t *o, *p;

	for (int mode = 0; mode < 2; mode++) {
		snprintf(args, sizeof(args), "--features 'tokens:int32[*]' --pack 128 --pack-mode %s "
			 "--per-core-batch 4 --cores 2 %s/z", mode ? "concat" : "first-fit", d);
		o = run_json(args);
		p = json_object_get(o, "packing");
		cr_assert_not_null(p);
		cr_assert_str_eq(json_string_value(json_object_get(p, "mode")),
				 mode ? "concat" : "first_fit");
		cr_assert_eq(jd(p, "length"), 128);
		cr_assert_eq(jd(p, "rows"), jd(o, "steps") * 8);
		cr_assert_eq(jd(p, "slots"), jd(p, "rows") * 128);
		cr_assert_gt(jd(p, "values"), 0);
		cr_assert_float_eq(jd(p, "efficiency"), jd(p, "values") / jd(p, "slots"), 1e-9);
		if (mode)
			cr_assert_eq(jd(p, "efficiency"), 1.0, "concat fills every row it hands out");
		else
			cr_assert_gt(jd(p, "truncated_records"), 0);
		cr_assert_gt(jd(p, "values_per_s"), 0);
		json_decref(o);
	}
}

/* Without --features the spec comes from the first file's index; in skip
 * mode a damaged one is passed, said, and the spec taken from the next
 * file (the loader then reads the damaged shard as its zstd stream); in
 * fail mode it stays the error it is. */
Test(loadbench, skip_mode_infers_the_spec_past_a_damaged_first_index, .timeout = 120)
{
	const char *d = tu_tmpdir();
	const char *st = tu_env_tool("SHARDTOOL");
	char args[2048], f[1024];

	cr_assert_eq(tu_system("%s synth --kind tokens --records 300 --shards 3 --out %s/raw "
			       ">/dev/null && %s convert --out %s/z %s/raw >/dev/null && "
			       "rm %s/z/podfeed.manifest", st, d, st, d, d, d), 0);
	snprintf(f, sizeof(f), "%s/z/part-00000-of-00003.tfrecord.zst", d);
	cr_assert_eq(tu_system("at=$(grep -obUa label %s | tail -1 | cut -d: -f1) && "
			       "printf 8 | dd of=%s bs=1 seek=$((at + 2)) conv=notrunc 2>/dev/null",
			       f, f), 0);
	snprintf(args, sizeof(args), "--per-core-batch 1 --epochs 1 %s/z", d);
	tu_expect_run(tu_env_tool("LOADBENCH"), args, 1, "part-00000-of-00003.tfrecord.zst: byte");
	snprintf(args, sizeof(args), "--on-corrupt skip --per-core-batch 1 --epochs 1 %s/z", d);
	tu_expect_run(tu_env_tool("LOADBENCH"), args, 0,
		      "the shard's index is damaged (--on-corrupt skip: the spec from the next "
		      "file's index)");
	tu_expect_run(tu_env_tool("LOADBENCH"), args, 0, "records     300 in 300 steps");
}
