/* SPDX-License-Identifier: Apache-2.0 */
/* Direct placement (loader/pack_direct.c: the decode threads write each
 * record planned ahead straight into its packed rows) against the
 * consumer's packing alone (PODFEED_PACK_DIRECT=0): the same batches, bit
 * for bit, step by step, over two whole epochs, in both modes, shuffled
 * and not, with 1 and 4 decode threads, as every host of 1, 4 and 7, and
 * resumed mid-epoch, from indexed shards and from stream files; the same
 * counts; and the records really placed by
 * the decode threads (pack_direct_records), most of them when unshuffled
 * on one host; a record whose lengths are not the plan's, named by its
 * file and its record there. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "pack_util.h"
#include "testutil.h"

/* 4,000 text records (median 40 tokens, to 400) in 5 indexed shards of
 * small frames. */
static const char *text_dataset(void)
{
	return pu_text_dataset(4000, 2, 40, 400, 5, 5, "16K");
}

#define MAX_STEPS 8192

typedef struct run {
	uint64_t n;
	uint64_t digest[MAX_STEPS];	/* each batch's bytes and numbers */
	pf_loader_metrics m;
} run;

typedef struct setting {
	pf_pack_mode mode;
	bool shuffle;
	uint32_t hosts, host, threads;
	uint32_t length;	/* 0: 100 */
} setting;

static pf_loader_config config(const char *const *paths, const setting *s)
{
	return (pf_loader_config){ .paths = paths, .npaths = 1, .per_core_batch = 2,
				   .cores_per_host = 2,
				   .features = "tokens:int32[*],targets:int32[*]",
				   .pack_length = s->length ? s->length : 100, .pack_mode = s->mode,
				   .shuffle = s->shuffle, .shuffle_window = 300, .seed = 17,
				   .epochs = 2, .num_hosts = s->hosts, .host_index = s->host,
				   .threads = s->threads };
}

static pf_loader *create(const pf_loader_config *cfg, bool direct)
{
	pf_loader *l;
	pf_error err;

	/* Read when the loader is made. */
	if (direct)
		unsetenv("PODFEED_PACK_DIRECT");
	else
		setenv("PODFEED_PACK_DIRECT", "0", 1);
	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, cfg, &err), 0, "%s", err.msg);
	return l;
}

/* n steps (UINT64_MAX: to the end) into r from r->n on; the metrics
 * after them (summed into r->m's direct records). */
static void take(pf_loader *l, uint64_t n, run *r, const char *what)
{
	pf_loader_metrics m;
	pf_batch *b;
	int ret = 1;

	for (uint64_t k = 0; k < n && (ret = pf_loader_next(l, &b)) == 1; k++) {
		cr_assert_lt(r->n, MAX_STEPS);
		r->digest[r->n++] = pu_batch_digest(b);
		pf_loader_release(l, b);
	}
	cr_assert_geq(ret, 0, "%s: %s", what, pf_loader_last_error(l)->msg);
	pf_loader_get_metrics(l, &m);
	m.pack_direct_records += r->m.pack_direct_records;
	r->m = m;
}

static void whole(const char *dir, const setting *s, bool direct, run *r, const char *what)
{
	const char *paths[] = { dir };
	pf_loader_config cfg = config(paths, s);
	pf_loader *l = create(&cfg, direct);

	memset(r, 0, sizeof(*r));
	take(l, UINT64_MAX, r, what);
	pf_loader_free(l);
}

static void same(const run *a, const run *b, const char *what)
{
	cr_assert_eq(a->n, b->n, "%s: %llu steps, %llu without direct placement", what,
		     (unsigned long long)a->n, (unsigned long long)b->n);
	for (uint64_t k = 0; k < a->n; k++)
		cr_assert_eq(a->digest[k], b->digest[k], "%s: step %llu differs", what,
			     (unsigned long long)k);
	cr_assert_eq(a->m.steps_per_epoch, b->m.steps_per_epoch, "%s", what);
	cr_assert_eq(a->m.pack_rows, b->m.pack_rows, "%s", what);
	cr_assert_eq(a->m.pack_values, b->m.pack_values, "%s", what);
	cr_assert_eq(a->m.pack_segments, b->m.pack_segments, "%s", what);
	cr_assert_eq(a->m.pack_rows_dropped, b->m.pack_rows_dropped, "%s", what);
	cr_assert_eq(a->m.pack_truncated_records, b->m.pack_truncated_records, "%s", what);
	cr_assert_eq(a->m.pack_truncated_values, b->m.pack_truncated_values, "%s", what);
	cr_assert_eq(b->m.pack_direct_records, 0, "%s: PODFEED_PACK_DIRECT=0 placed %llu", what,
		     (unsigned long long)b->m.pack_direct_records);
}

static void describe(char *buf, size_t cap, const setting *s)
{
	snprintf(buf, cap, "%s, %s, host %u of %u, %u threads",
		 s->mode == PF_PACK_CONCAT ? "concat" : "first_fit",
		 s->shuffle ? "shuffled" : "in order", s->host, s->hosts, s->threads);
}

/* Every host of `hosts`, both modes, shuffled or not, 1 and 4 threads:
 * two epochs with direct placement are those without.  @return the
 * records placed directly, and those delivered, over them all. */
static void every_host(const char *dir, uint32_t hosts, bool shuffle, uint64_t *placed,
		       uint64_t *records)
{
	run *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	char what[160];

	*placed = *records = 0;
	for (int mode = 0; mode < 2; mode++)
		for (uint32_t h = 0; h < hosts; h++)
			for (uint32_t t = 1; t <= 4; t += 3) {
				setting s = { mode, shuffle, hosts, h, t, 0 };

				describe(what, sizeof(what), &s);
				whole(dir, &s, true, a, what);
				whole(dir, &s, false, b, what);
				cr_assert_gt(a->n, 4, "%s: %llu steps", what,
					     (unsigned long long)a->n);
				same(a, b, what);
				*placed += a->m.pack_direct_records;
				*records += a->m.records;
			}
	free(a);
	free(b);
}

Test(packdirect, one_host_in_order_same_batches_most_placed_directly)
{
	char z[1024];
	uint64_t placed, records;

	snprintf(z, sizeof(z), "%s/z", text_dataset());
	every_host(z, 1, false, &placed, &records);
	/* Only the first groups of each epoch, decoded before the consumer
	 * plans them, may be copied by the consumer. */
	cr_assert_gt(placed, records / 2, "%llu of %llu records placed directly",
		     (unsigned long long)placed, (unsigned long long)records);
}

Test(packdirect, one_host_shuffled_same_batches)
{
	char z[1024];
	uint64_t placed, records;

	snprintf(z, sizeof(z), "%s/z", text_dataset());
	every_host(z, 1, true, &placed, &records);
	cr_assert_gt(placed, 0, "none of %llu records placed directly",
		     (unsigned long long)records);
}

/* Stream files (their lengths measured when the dataset is opened): the
 * same. */
Test(packdirect, stream_files_same_batches)
{
	char plain[1024];
	uint64_t placed, records;

	snprintf(plain, sizeof(plain), "%s/plain", text_dataset());
	every_host(plain, 1, false, &placed, &records);
	cr_assert_gt(placed, 0);
	every_host(plain, 4, true, &placed, &records);
	cr_assert_gt(placed, 0);
}

Test(packdirect, four_hosts_same_batches)
{
	char z[1024];
	uint64_t placed, records;

	snprintf(z, sizeof(z), "%s/z", text_dataset());
	every_host(z, 4, false, &placed, &records);
	cr_assert_gt(placed, 0);
	every_host(z, 4, true, &placed, &records);
	cr_assert_gt(placed, 0);
}

Test(packdirect, seven_hosts_same_batches)
{
	char z[1024];
	uint64_t placed, records;

	snprintf(z, sizeof(z), "%s/z", text_dataset());
	every_host(z, 7, false, &placed, &records);
	cr_assert_gt(placed, 0);
	every_host(z, 7, true, &placed, &records);
	cr_assert_gt(placed, 0);
}

/* Records longer than an inner row (concat's 16,384 values: cut and
 * counted) and than L (first_fit's): cut the same, counted the same. */
Test(packdirect, long_records_same_batches)
{
	char z[1024];
	run *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));

	snprintf(z, sizeof(z), "%s/z", pu_text_dataset(300, 1, 9000, 40000, 3, 2, "64K"));
	for (int mode = 0; mode < 2; mode++) {
		setting s = { mode, false, 1, 0, 2, 1024 };
		char what[160];

		describe(what, sizeof(what), &s);
		whole(z, &s, true, a, what);
		whole(z, &s, false, b, what);
		same(a, b, what);
		cr_assert_gt(a->m.pack_truncated_records, 10, "%s", what);
		cr_assert_gt(a->m.pack_direct_records, 0, "%s", what);
	}
	free(a);
	free(b);
}

/* loadbench says how many records the decode threads placed, in its
 * text and JSON, and none with PODFEED_PACK_DIRECT=0. */
Test(packdirect, loadbench_says_how_many_were_placed)
{
	char args[2048];

	snprintf(args, sizeof(args), "--quiet --threads 2 --features tokens:int32[*] --pack 128 "
		 "--per-core-batch 4 %s/z", text_dataset());
	unsetenv("PODFEED_PACK_DIRECT");
	tu_expect_run(tu_env_tool("LOADBENCH"), args, 0,
		      "records written into their rows by the decode threads");
	setenv("PODFEED_PACK_DIRECT", "0", 1);
	tu_expect_run(tu_env_tool("LOADBENCH"), args, 0,
		      "; 0 records written into their rows by the decode threads");
	snprintf(args + strlen(args), sizeof(args) - strlen(args), " --json");
	tu_expect_run(tu_env_tool("LOADBENCH"), args, 0, "\"direct_records\":0");
}

/* Saved mid-epoch with direct placement and resumed with it: the steps of
 * a run without it, never stopped. */
Test(packdirect, resumed_mid_epoch_same_batches)
{
	char z[1024];
	const char *paths[] = { z };
	run *ref = malloc(sizeof(*ref)), *got = malloc(sizeof(*got));
	char what[200];

	snprintf(z, sizeof(z), "%s/z", text_dataset());
	for (int mode = 0; mode < 2; mode++)
		for (int shuffle = 0; shuffle < 2; shuffle++)
			for (uint32_t h = 0; h < 4; h += 3) {
				setting s = { mode, shuffle, 4, h, 2, 0 };
				pf_loader_config cfg = config(paths, &s);
				uint64_t spe, at[3];

				describe(what, sizeof(what), &s);
				whole(z, &s, false, ref, what);
				spe = ref->m.steps_per_epoch;
				at[0] = 3;
				at[1] = spe / 2;
				at[2] = spe + spe / 3;
				for (int i = 0; i < 3; i++) {
					pf_loader *l = create(&cfg, true);
					pf_state_blob sb;
					int64_t n;
					void *blob;

					memset(got, 0, sizeof(*got));
					take(l, at[i], got, what);
					n = pf_loader_save_state(l, NULL, 0);
					cr_assert_gt(n, 0);
					blob = malloc((size_t)n);
					cr_assert_eq(pf_loader_save_state(l, blob, (size_t)n), n);
					pf_loader_free(l);
					sb = (pf_state_blob){ blob, (size_t)n };
					cfg.resume = &sb;
					cfg.nresume = 1;
					l = create(&cfg, true);
					take(l, UINT64_MAX, got, what);
					pf_loader_free(l);
					cfg.resume = NULL;
					cfg.nresume = 0;
					free(blob);
					cr_assert_eq(got->n, ref->n, "%s, resumed at %llu: %llu steps, "
						     "%llu", what, (unsigned long long)at[i],
						     (unsigned long long)got->n,
						     (unsigned long long)ref->n);
					for (uint64_t k = 0; k < ref->n; k++)
						cr_assert_eq(got->digest[k], ref->digest[k],
							     "%s, resumed at %llu: step %llu differs",
							     what, (unsigned long long)at[i],
							     (unsigned long long)k);
					if (!shuffle && h == 0)
						cr_assert_gt(got->m.pack_direct_records, 0, "%s",
							     what);
				}
			}
	free(ref);
	free(got);
}

/* path's TFRecord records in reverse order: the same bytes, so the same
 * size, and the same record count; other lengths at most places. */
static void reverse_records(const char *path)
{
	size_t len, at = 0, n = 0, out = 0;
	uint8_t *b = tu_read_file(path, &len), *r = malloc(len);
	size_t start[4096], size[4096];

	while (at < len) {
		uint64_t dl;

		cr_assert_lt(n, 4096);
		memcpy(&dl, b + at, 8);
		start[n] = at;
		size[n++] = 16 + dl;
		at += 16 + dl;
	}
	cr_assert_eq(at, len);
	while (n--) {
		memcpy(r + out, b + start[n], size[n]);
		out += size[n];
	}
	tu_write_file(path, r, len);
	free(b);
	free(r);
}

/* A stream file rewritten after the dataset was opened (its lengths
 * measured then), the same size: a planned record's lengths are not the
 * plan's, and the error names that file and the record in it.  The file
 * is one of the last of 40, which the loader cannot reach before the
 * consumer has taken most of the steps (its buffers and batches are a
 * few records' worth), so it is read after the rewrite. */
Test(packdirect, lengths_not_the_plans_name_the_file)
{
	const char *d = tu_tmpdir(), *st = tu_env_tool("SHARDTOOL");
	char plain[1024], changed[1100], line[1536];
	const char *paths[] = { plain };
	setting s = { PF_PACK_FIRST_FIT, false, 1, 0, 1, 128 };
	pf_loader_config cfg = config(paths, &s);
	const pf_error *e;
	pf_loader *l;
	pf_batch *b;
	int ret;

	cr_assert_eq(tu_system("%s synth --kind text --records 4000 --shards 40 --median-tokens 40 "
			       "--max-tokens 100 --seed 4 --out %s/plain >/dev/null", st, d), 0);
	snprintf(plain, sizeof(plain), "%s/plain", d);
	snprintf(changed, sizeof(changed), "%s/plain/text-00036-of-00040.tfrecord", d);
	cfg.epochs = 1;
	cfg.io_depth = 1;
	cfg.prefetch = 1;
	l = create(&cfg, true);
	reverse_records(changed);
	while ((ret = pf_loader_next(l, &b)) == 1)
		pf_loader_release(l, b);
	cr_assert_eq(ret, -EIO, "%d", ret);
	e = pf_loader_last_error(l);
	pf_error_format(e, line, sizeof(line));
	cr_assert_str_eq(e->file, changed, "%s", line);
	cr_assert(e->record >= 0 && e->record < 100, "%s", line);
	cr_assert(strstr(line, "where its plan has") && strstr(line, "did the data change"),
		  "%s", line);
	pf_loader_free(l);
}
