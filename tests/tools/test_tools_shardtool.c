/* SPDX-License-Identifier: Apache-2.0 */
/* shardtool end to end: synth, convert, verify, inspect, cat, bad flags. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "testutil.h"

/* An integer member of a JSON object, as unsigned (the counts here). */
static uint64_t ju(json_t *obj, const char *key)
{
	return (uint64_t)json_integer_value(json_object_get(obj, key));
}

static const char *tool(void)
{
	const char *t = getenv("SHARDTOOL");

	cr_assert_not_null(t, "SHARDTOOL is not set (run through meson test)");
	return t;
}

/* Every record of the files in order, as one crc chain and a count. */
static void digest(const char *glob_pattern, uint64_t *n, uint32_t *chain)
{
	char cmd[2048];
	FILE *ls;
	char path[4096];

	*n = 0;
	*chain = 0;
	snprintf(cmd, sizeof(cmd), "ls %s | sort", glob_pattern);
	ls = popen(cmd, "r");
	cr_assert_not_null(ls);
	while (fgets(path, sizeof(path), ls)) {
		pf_source *src;
		pf_record rec;
		pf_error err;
		int ret;

		path[strcspn(path, "\n")] = 0;
		/* convert's manifest describes the shards; it holds none */
		if (strstr(path, "/" PF_MANIFEST_NAME))
			continue;
		pf_error_clear(&err);
		cr_assert_eq(pf_source_open(&src, path, NULL, &err), 0, "%s", err.msg);
		while ((ret = pf_source_next(src, &rec, &err)) == 1) {
			(*n)++;
			*chain = pf_crc32c(*chain, rec.data, rec.len);
		}
		cr_assert_eq(ret, 0, "%s: %s", path, err.msg);
		pf_source_close(src);
	}
	pclose(ls);
}

/* out is exactly one line. */
static bool one_line(const char *out)
{
	const char *nl = strchr(out, '\n');

	return nl && !nl[1];
}

/* digest() of every file in d/sub. */
static void digest_dir(const char *d, const char *sub, uint64_t *n, uint32_t *chain)
{
	char pattern[1024];

	snprintf(pattern, sizeof(pattern), "%s/%s/*", d, sub);
	digest(pattern, n, chain);
}

Test(shardtool, synth_is_deterministic_and_shards_vary)
{
	const char *d = tu_tmpdir();

	cr_assert_eq(tu_system("%s synth --kind tokens --records 3000 --shards 6 --out %s/a --seed 7 >/dev/null", tool(), d), 0);
	cr_assert_eq(tu_system("%s synth --kind tokens --records 3000 --shards 6 --out %s/b --seed 7 >/dev/null", tool(), d), 0);
	cr_assert_eq(tu_system("cmp -s %s/a/tokens-00003-of-00006.tfrecord %s/b/tokens-00003-of-00006.tfrecord", d, d), 0);
	cr_assert_eq(tu_system("%s synth --kind tokens --records 3000 --shards 6 --out %s/c --seed 8 >/dev/null", tool(), d), 0);
	cr_assert_neq(tu_system("cmp -s %s/a/tokens-00003-of-00006.tfrecord %s/c/tokens-00003-of-00006.tfrecord", d, d), 0);

	uint64_t n, counts[6], lo = UINT64_MAX, hi = 0, sum = 0;
	uint32_t chain;
	for (int i = 0; i < 6; i++) {
		char pat[512];
		snprintf(pat, sizeof(pat), "%s/a/tokens-0000%d-of-00006.tfrecord", d, i);
		digest(pat, &counts[i], &chain);
		sum += counts[i];
		lo = counts[i] < lo ? counts[i] : lo;
		hi = counts[i] > hi ? counts[i] : hi;
	}
	cr_assert_eq(sum, 3000);
	cr_assert_gt(hi, lo + 50, "shard sizes should vary: %llu..%llu",
		     (unsigned long long)lo, (unsigned long long)hi);
	/* Record i is the same whatever the shard count. */
	cr_assert_eq(tu_system("%s synth --kind tokens --records 3000 --shards 2 --out %s/e --seed 7 >/dev/null", tool(), d), 0);
	uint64_t n2;
	uint32_t c1, c2;
	char pa[512], pe[512];
	snprintf(pa, sizeof(pa), "%s/a/*", d);
	snprintf(pe, sizeof(pe), "%s/e/*", d);
	digest(pa, &n, &c1);
	digest(pe, &n2, &c2);
	cr_assert_eq(n, n2);
	cr_assert_eq(c1, c2);
}

Test(shardtool, convert_round_trip_is_byte_identical_through_zstd)
{
	const char *d = tu_tmpdir();
	uint64_t n1, n2, n3;
	uint32_t c1, c2, c3;
	char pat[512];

	cr_assert_eq(tu_system("%s synth --kind dense --records 2500 --shards 4 --out %s/in >/dev/null", tool(), d), 0);
	cr_assert_eq(tu_system("%s convert --out %s/out --shards 3 --frame-size 64K %s/in >/dev/null", tool(), d, d), 0);
	cr_assert_eq(tu_system("%s verify %s/out >/dev/null", tool(), d), 0);
	/* zstd -dc of the shards, concatenated, is the input byte for byte. */
	cr_assert_eq(tu_system("cat %s/in/* > %s/in.all && zstd -qdc %s/out/*.zst > %s/out.all && cmp -s %s/in.all %s/out.all",
			       d, d, d, d, d, d), 0);
	snprintf(pat, sizeof(pat), "%s/in/*", d);
	digest(pat, &n1, &c1);
	snprintf(pat, sizeof(pat), "%s/out/*.zst", d);
	digest(pat, &n2, &c2);
	cr_assert_eq(n1, 2500);
	cr_assert_eq(n2, n1);
	cr_assert_eq(c2, c1);
	/* Aligned frames, one output. */
	cr_assert_eq(tu_system("%s convert --out %s/al --shards 1 --align 4096 --frame-size 32K %s/out >/dev/null", tool(), d, d), 0);
	cr_assert_eq(tu_system("%s verify %s/al/part-00000-of-00001.tfrecord.zst >/dev/null", tool(), d), 0);
	snprintf(pat, sizeof(pat), "%s/al/*.zst", d);
	digest(pat, &n3, &c3);
	cr_assert_eq(n3, n1);
	cr_assert_eq(c3, c1);
}

Test(shardtool, convert_reads_every_fixture_format)
{
	const char *d = tu_tmpdir();
	const char *names[] = { "tfx_penguin_train.tfrecord.gz",
				"tfx_sequence_example_eval.tfrecord.gz",
				"grain_morris_sequence_first_5.tfrecord" };

	for (int i = 0; i < 3; i++) {
		uint64_t n1, n2;
		uint32_t c1, c2;
		char pat[512];

		cr_assert_eq(tu_system("%s convert --out %s/f%d --shards 2 %s >/dev/null",
				       tool(), d, i, tu_fixture(names[i])), 0);
		cr_assert_eq(tu_system("%s verify %s/f%d >/dev/null", tool(), d, i), 0);
		digest(tu_fixture(names[i]), &n1, &c1);
		snprintf(pat, sizeof(pat), "%s/f%d/*.zst", d, i);
		digest(pat, &n2, &c2);
		cr_assert_eq(n1, n2, "%s", names[i]);
		cr_assert_eq(c1, c2, "%s", names[i]);
	}
}

Test(shardtool, inspect_json)
{
	const char *d = tu_tmpdir();
	char cmd[1024], line[65536];
	json_error_t jerr;

	cr_assert_eq(tu_system("%s convert --out %s/o --shards 1 --frame-size 100000 %s >/dev/null",
			       tool(), d, tu_fixture("tfx_mnist_1000.tfrecord")), 0);
	snprintf(cmd, sizeof(cmd), "%s inspect --json %s/o/part-00000-of-00001.tfrecord.zst %s",
		 tool(), d, tu_fixture("tfx_chicago_taxi_unlabelled_00008.tfrecord.gz"));
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);

	cr_assert_not_null(fgets(line, sizeof(line), p));
	json_t *o = json_loads(line, 0, &jerr);
	cr_assert_not_null(o, "%s: %s", jerr.text, line);
	cr_assert_str_eq(json_string_value(json_object_get(o, "format")), "indexed");
	cr_assert_str_eq(json_string_value(json_object_get(o, "compression")), "zstd");
	cr_assert_eq(ju(o, "records"), 1000);
	/* 1000 x 3203 bytes in 100000-byte frames: 31 records a frame. */
	cr_assert_eq(ju(o, "frames"), 33);
	json_t *schema = json_object_get(o, "schema");
	cr_assert_eq(json_array_size(schema), 2);
	json_t *fl = json_array_get(schema, 1);
	cr_assert_str_eq(json_string_value(json_object_get(fl, "name")), "image_floats");
	cr_assert_str_eq(json_string_value(json_object_get(fl, "kind")), "float");
	cr_assert(json_is_true(json_object_get(fl, "fixed")));
	cr_assert_eq(ju(fl, "max_len"), 784);
	json_decref(o);

	cr_assert_not_null(fgets(line, sizeof(line), p));
	o = json_loads(line, 0, &jerr);
	cr_assert_not_null(o, "%s", jerr.text);
	cr_assert_str_eq(json_string_value(json_object_get(o, "format")), "tfrecord");
	cr_assert_str_eq(json_string_value(json_object_get(o, "compression")), "gzip");
	cr_assert_eq(ju(o, "records"), 205);
	json_decref(o);
	cr_assert_eq(pclose(p), 0);
}

Test(shardtool, verify_names_the_bad_byte)
{
	const char *d = tu_tmpdir();
	char cmd[1024], out[4096] = "";

	cr_assert_eq(tu_system("%s convert --out %s/o --shards 1 --frame-size 64K %s >/dev/null",
			       tool(), d, tu_fixture("tfx_mnist_1000.tfrecord")), 0);
	/* Damage one byte inside the data frames. */
	cr_assert_eq(tu_system("printf '\\377' | dd of=%s/o/part-00000-of-00001.tfrecord.zst bs=1 seek=30000 conv=notrunc 2>/dev/null", d), 0);
	snprintf(cmd, sizeof(cmd), "%s verify %s/o/part-00000-of-00001.tfrecord.zst 2>&1", tool(), d);
	int st = tu_capture(cmd, out, sizeof(out), NULL);
	cr_assert_eq(WEXITSTATUS(st), 1, "%s", out);
	cr_assert(strstr(out, "part-00000-of-00001.tfrecord.zst: byte "), "%s", out);
	cr_assert(strstr(out, "frame"), "%s", out);

	/* And plain TFRecords: a flipped payload byte. */
	cr_assert_eq(tu_system("cp %s %s/m.tfrecord && printf 'Z' | dd of=%s/m.tfrecord bs=1 seek=3300 conv=notrunc 2>/dev/null",
			       tu_fixture("tfx_mnist_1000.tfrecord"), d, d), 0);
	snprintf(cmd, sizeof(cmd), "%s verify %s/m.tfrecord 2>&1", tool(), d);
	st = tu_capture(cmd, out, sizeof(out), NULL);
	cr_assert_eq(WEXITSTATUS(st), 1, "%s", out);
	cr_assert(strstr(out, "m.tfrecord: byte 3203: bad data CRC"), "%s", out);
}

Test(shardtool, cat_range)
{
	char cmd[1024], line[65536];
	json_error_t jerr;
	int n = 0;

	snprintf(cmd, sizeof(cmd), "%s cat --range 2:4 %s", tool(),
		 tu_fixture("tfx_penguin_train.tfrecord.gz"));
	FILE *p = popen(cmd, "r");
	while (fgets(line, sizeof(line), p)) {
		json_t *o = json_loads(line, 0, &jerr);
		cr_assert_not_null(o, "%s", jerr.text);
		cr_assert_eq(ju(o, "record"), (uint64_t)(2 + n));
		json_t *f = json_object_get(json_object_get(o, "features"), "species");
		cr_assert_str_eq(json_string_value(json_object_get(f, "kind")), "int64");
		json_decref(o);
		n++;
	}
	cr_assert_eq(pclose(p), 0);
	cr_assert_eq(n, 2);

	snprintf(cmd, sizeof(cmd), "%s cat --range 1:2 %s", tool(),
		 tu_fixture("grain_morris_sequence_first_5.tfrecord"));
	p = popen(cmd, "r");
	cr_assert_not_null(fgets(line, sizeof(line), p));
	cr_assert(strstr(line, "\"raw\":\"1 1\""), "%s", line);
	pclose(p);
}

Test(shardtool, bad_flags_are_named)
{
	const char *d = tu_tmpdir();
	char cmd[1024], out[4096];
	struct { const char *args; const char *says; } cases[] = {
		{ "synth --kind tokens --records abc --shards 2 --out X", "--records: 'abc' is not a whole number" },
		{ "synth --kind words --records 10 --shards 2 --out X", "--kind: 'words'" },
		{ "synth --kind tokens --records 10 --shards 0 --out X", "--shards: '0' is out of range" },
		{ "synth --kind tokens --records 99999999999999999999 --shards 1 --out X", "too large" },
		{ "convert --out X --align 5000 Y", "--align: 5000 is not a power of two" },
		{ "convert --out X --level 99 Y", "--level: '99' is out of range" },
		{ "convert --out X --frame-size 1Q Y", "--frame-size: '1Q'" },
		{ "cat --range 5:2 Y", "ends before it starts" },
		{ "cat --range 7 Y", "not a range" },
		{ "frobnicate", "unknown command 'frobnicate'" },
		{ "verify", "no files given" },
		{ "inspect /nonexistent/file", "/nonexistent/file: cannot open" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(cmd, sizeof(cmd), "cd %s && %s %s 2>&1", d, tool(), cases[i].args);
		FILE *p = popen(cmd, "r");
		size_t got = fread(out, 1, sizeof(out) - 1, p);
		out[got] = 0;
		int st = pclose(p);
		cr_assert_neq(WEXITSTATUS(st), 0, "%s", cases[i].args);
		cr_assert(strstr(out, cases[i].says), "%s -> %s", cases[i].args, out);
	}
	const char *subs[] = { "", "synth", "convert", "inspect", "verify", "cat" };
	for (size_t i = 0; i < 6; i++)
		cr_assert_eq(tu_system("%s %s --help >/dev/null", tool(), subs[i]), 0, "%s", subs[i]);
}

/* convert --out into a directory that holds its inputs, or anything else,
 * would leave a directory whose next read duplicates records: refused in
 * one line; --force replaces only convert's own earlier output. */
Test(shardtool, convert_refuses_a_non_empty_out_dir)
{
	const char *d = tu_tmpdir();
	char cmd[2048], out[4096];
	uint64_t n;
	uint32_t chain, chain0;

	cr_assert_eq(tu_system("%s synth --kind tokens --records 300 --shards 2 --out %s/raw "
			       ">/dev/null", tool(), d), 0);
	digest_dir(d, "raw", &n, &chain0);
	cr_assert_eq(n, 300);

	/* Into the inputs' own directory: refused, even with --force. */
	for (int force = 0; force < 2; force++) {
		snprintf(cmd, sizeof(cmd), "%s convert %s--out %s/raw %s/raw 2>&1",
			 tool(), force ? "--force " : "", d, d);
		cr_assert_eq(WEXITSTATUS(tu_capture(cmd, out, sizeof(out), NULL)), 2, "%s", out);
		cr_assert(strstr(out, "shardtool convert: input ") &&
			  strstr(out, "is inside --out ") && one_line(out),
			  "%s", out);
	}
	digest_dir(d, "raw", &n, &chain);
	cr_assert_eq(n, 300, "the inputs were touched");
	cr_assert_eq(chain, chain0);

	/* A first convert, then again into the same directory. */
	cr_assert_eq(tu_system("%s convert --shards 3 --out %s/z %s/raw >/dev/null",
			       tool(), d, d), 0);
	snprintf(cmd, sizeof(cmd), "%s convert --shards 2 --out %s/z %s/raw 2>&1", tool(), d, d);
	cr_assert_eq(WEXITSTATUS(tu_capture(cmd, out, sizeof(out), NULL)), 2, "%s", out);
	cr_assert(strstr(out, "is not empty (it holds part-0000") &&
		  strstr(out, "--force") && one_line(out), "%s", out);
	/* --force replaces the earlier output, 3 shards by 2: nothing doubled. */
	cr_assert_eq(tu_system("%s convert --force --shards 2 --out %s/z %s/raw >/dev/null",
			       tool(), d, d), 0);
	cr_assert_eq(tu_system("test \"$(ls %s/z | tr '\\n' ' ')\" = "
			       "'part-00000-of-00002.tfrecord.zst part-00001-of-00002.tfrecord.zst "
			       "podfeed.manifest '",
			       d), 0);
	digest_dir(d, "z", &n, &chain);
	cr_assert_eq(n, 300);
	cr_assert_eq(chain, chain0);

	/* A file convert did not write stops --force too, and nothing is removed. */
	cr_assert_eq(tu_system("echo x > %s/z/notes.txt", d), 0);
	snprintf(cmd, sizeof(cmd), "%s convert --force --out %s/z %s/raw 2>&1", tool(), d, d);
	cr_assert_eq(WEXITSTATUS(tu_capture(cmd, out, sizeof(out), NULL)), 2, "%s", out);
	cr_assert(strstr(out, "holds notes.txt, which convert did not write"), "%s", out);
	cr_assert_eq(tu_system("test -f %s/z/part-00001-of-00002.tfrecord.zst", d), 0);
}

/* synth --kind images: real JPEGs in ImageNet's layout, the same bytes
 * for the same seed; inspect names them; loadbench decodes them and its
 * report gives the image decode stage's share. */
Test(shardtool, synth_images_inspect_and_load)
{
	const char *d = tu_tmpdir();
	char cmd[2048], out[16384] = "";
	int st;

	cr_assert_eq(tu_system("%s synth --kind images --records 60 --shards 2 --min-side 64 "
			       "--max-side 96 --out %s/a --seed 4 >/dev/null", tool(), d), 0);
	cr_assert_eq(tu_system("%s synth --kind images --records 60 --shards 2 --min-side 64 "
			       "--max-side 96 --out %s/b --seed 4 >/dev/null", tool(), d), 0);
	cr_assert_eq(tu_system("cmp -s %s/a/images-00001-of-00002.tfrecord "
			       "%s/b/images-00001-of-00002.tfrecord", d, d), 0);
	snprintf(cmd, sizeof(cmd), "%s inspect %s/a/images-00000-of-00002.tfrecord 2>&1", tool(),
		 d);
	st = tu_capture(cmd, out, sizeof(out), NULL);
	cr_assert_eq(WEXITSTATUS(st), 0, "%s", out);
	cr_assert(strstr(out, "image/class/label") && strstr(out, "image/encoded: "), "%s", out);
	cr_assert(strstr(out, "are images (JPEG "), "%s", out);
	snprintf(cmd, sizeof(cmd), "%s --threads 2 --per-core-batch 4 --features "
		 "'image/encoded:image[32,32]:train,image/class/label:int64[1]' %s/a 2>&1",
		 tu_env_tool("LOADBENCH"), d);
	st = tu_capture(cmd, out, sizeof(out), NULL);
	cr_assert_eq(WEXITSTATUS(st), 0, "%s", out);
	cr_assert(strstr(out, "images      60 decoded"), "%s", out);
	cr_assert(strstr(out, "image decode ") && strstr(out, "% of decode's busy time"),
		  "%s", out);
	/* A bad image option is a usage error naming the byte. */
	snprintf(cmd, sizeof(cmd), "%s --features 'image/encoded:image[32,32]:crop' %s/a 2>&1",
		 tu_env_tool("LOADBENCH"), d);
	st = tu_capture(cmd, out, sizeof(out), NULL);
	cr_assert_eq(WEXITSTATUS(st), 2, "%s", out);
	cr_assert(strstr(out, "unknown image option 'crop'"), "%s", out);
}

/* What a user can ask that makes no shard or no step (issue 25): more
 * shards than records (no empty shard written: a reader finds no schema
 * in one), no records at all, a pod too large for the dataset (refused as
 * the loader refuses it, not 0 steps with every check "yes"), and the
 * empty names of a script's unset variables, each named. */
Test(shardtool, no_empty_shards_no_empty_pods_and_empty_names_named)
{
	const char *d = tu_tmpdir();
	char cmd[2048], out[8192];
	struct { const char *args; int status; const char *says; } cases[] = {
		{ "podsim --hosts 2000 --per-core-batch 1 --summary D/z", 1,
		  "the dataset holds 241 records, fewer than one global batch of 2000" },
		{ "podsim --hosts 2000 --per-core-batch 1 --remainder wrap --summary D/z", 1,
		  "fewer than the 2000 hosts" },
		{ "convert --out '' D/raw", 2, "--out: an empty path" },
		{ "manifest D/e", 1, "D/e: the directory (argument 1) holds no shards" },
		{ "verify D/e", 1, "D/e: the directory (argument 1) holds no shards" },
		{ "verify D/z ''", 1, "path 2 of 2 is empty" },
		{ "convert --out D/none D/nothing.tfrecord", 1,
		  "D/nothing.tfrecord: no records to convert" },
	};

	cr_assert_eq(tu_system("%s synth --kind tokens --records 241 --shards 1 --out %s/raw "
			       ">/dev/null && mkdir %s/e && : > %s/nothing.tfrecord", tool(), d, d,
			       d), 0);
	cr_assert_eq(tu_system("%s convert --out %s/z %s/raw >/dev/null", tool(), d, d), 0);

	/* 300 shards of 241 records: capped at 241, saying so. */
	snprintf(cmd, sizeof(cmd), "%s convert --shards 300 --out %s/many %s/raw 2>&1", tool(),
		 d, d);
	cr_assert_eq(WEXITSTATUS(tu_capture(cmd, out, sizeof(out), NULL)), 0, "%s", out);
	cr_assert(strstr(out, "300 shards asked for (--shards), the inputs hold 241 records: "
			 "writing 241 shards of one record"), "%s", out);
	cr_assert_eq(tu_system("test $(ls %s/many/*.zst | wc -l) = 241 && "
			       "test -e %s/many/part-00240-of-00241.tfrecord.zst", d, d), 0);
	snprintf(cmd, sizeof(cmd), "%s --quiet --json --per-core-batch 1 %s/many/*.zst 2>&1",
		 tu_env_tool("LOADBENCH"), d);
	cr_assert_eq(WEXITSTATUS(tu_capture(cmd, out, sizeof(out), NULL)), 0, "%s", out);
	cr_assert(strstr(out, "\"records\":241,"), "%s", out);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char args[1024], says[1024];

		tu_subst(args, sizeof(args), cases[i].args, "D", &d);
		tu_subst(says, sizeof(says), cases[i].says, "D", &d);
		tu_expect_run(tool(), args, cases[i].status, says);
	}
}

/* One byte of a feature name flipped inside an indexed shard's index
 * ("label" -> "la8el"): the index's CRC32C (version 2) finds it, and the
 * damage is the file's, not the user's spec (issue 25). */
Test(shardtool, a_damaged_index_schema_is_the_shards_damage)
{
	const char *d = tu_tmpdir();
	char args[2048], f[1024];

	cr_assert_eq(tu_system("%s synth --kind tokens --records 300 --shards 1 --out %s/raw "
			       ">/dev/null && %s convert --out %s/z %s/raw >/dev/null", tool(), d,
			       tool(), d, d), 0);
	snprintf(f, sizeof(f), "%s/z/part-00000-of-00001.tfrecord.zst", d);
	cr_assert_eq(tu_system("at=$(grep -obUa label %s | tail -1 | cut -d: -f1) && "
			       "printf 8 | dd of=%s bs=1 seek=$((at + 2)) conv=notrunc 2>/dev/null",
			       f, f), 0);
	snprintf(args, sizeof(args), "verify %s", f);
	tu_expect_run(tool(), args, 1, "index CRC mismatch");
	snprintf(args, sizeof(args), "--quiet --no-manifest --features label:int64[1] %s", f);
	tu_expect_run(tu_env_tool("LOADBENCH"), args, 1, "the shard's index is damaged");
	/* Skip mode: the index dropped (no record with it), the shard read
	 * as the zstd stream it also is: every record. */
	snprintf(args, sizeof(args), "--quiet --no-manifest --on-corrupt skip --per-core-batch 1 "
		 "--features label:int64[1] %s", f);
	tu_expect_run(tu_env_tool("LOADBENCH"), args, 0, "records     300 in 300 steps");
}
