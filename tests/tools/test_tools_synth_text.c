/* SPDX-License-Identifier: Apache-2.0 */
/* shardtool synth --kind text: the records' length distribution (log-normal
 * of the median asked for, clamped), their tokens and targets, determinism,
 * bad flags. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "testutil.h"

static const char *tool(void)
{
	const char *t = getenv("SHARDTOOL");

	cr_assert_not_null(t, "SHARDTOOL is not set (run through meson test)");
	return t;
}

typedef struct text_stats {
	uint64_t n;
	uint32_t *len;		/* [n] */
	uint32_t chain;		/* crc32c of every record's bytes */
} text_stats;

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Every record of dir's shards (in name order): its length, and its
 * tokens and targets checked (ids 2..31999 but the last, the end-of-text
 * id 1; targets[i] = tokens[i + 1], the last 1). */
static void read_text(const char *dir, text_stats *st)
{
	char cmd[2048], path[4096];
	pf_arena arena;
	uint64_t cap = 1 << 16;
	FILE *ls;

	memset(st, 0, sizeof(*st));
	st->len = malloc(cap * sizeof(*st->len));
	cr_assert_eq(pf_arena_init(&arena, PF_ARENA_BYTES_FOR(1 << 20)), 0);
	snprintf(cmd, sizeof(cmd), "ls %s/text-*.tfrecord | sort", dir);
	ls = popen(cmd, "r");
	cr_assert_not_null(ls);
	while (fgets(path, sizeof(path), ls)) {
		pf_source *src;
		pf_record rec;
		pf_error err;
		int ret;

		path[strcspn(path, "\n")] = 0;
		pf_error_clear(&err);
		cr_assert_eq(pf_source_open(&src, path, NULL, &err), 0, "%s", err.msg);
		while ((ret = pf_source_next(src, &rec, &err)) == 1) {
			const pf_feature *tok, *tgt;
			pf_example ex;
			uint32_t n;

			st->chain = pf_crc32c(st->chain, rec.data, rec.len);
			pf_arena_reset(&arena);
			cr_assert_eq(pf_example_decode(rec.data, rec.len, &arena, &ex, &err), 0,
				     "%s", err.msg);
			cr_assert_eq(ex.n_features, 2);
			tok = pf_example_find(&ex, "tokens");
			tgt = pf_example_find(&ex, "targets");
			cr_assert(tok && tgt && tok->kind == PF_KIND_INT64 &&
				  tgt->kind == PF_KIND_INT64);
			n = tok->count;
			cr_assert(n >= 1 && tgt->count == n, "record %llu: %u tokens, %u targets",
				  (unsigned long long)st->n, n, tgt->count);
			for (uint32_t i = 0; i + 1 < n; i++) {
				cr_assert(tok->v.int64s[i] >= 2 && tok->v.int64s[i] < 32000,
					  "record %llu token %u: %lld", (unsigned long long)st->n,
					  i, (long long)tok->v.int64s[i]);
				cr_assert_eq(tgt->v.int64s[i], tok->v.int64s[i + 1]);
			}
			cr_assert_eq(tok->v.int64s[n - 1], 1);
			cr_assert_eq(tgt->v.int64s[n - 1], 1);
			if (st->n == cap) {
				cap *= 2;
				st->len = realloc(st->len, cap * sizeof(*st->len));
			}
			st->len[st->n++] = n;
		}
		cr_assert_eq(ret, 0, "%s: %s", path, err.msg);
		pf_source_close(src);
	}
	pclose(ls);
	pf_arena_release(&arena);
}

/* The median of the lengths (sorts them). */
static uint32_t median(text_stats *st)
{
	qsort(st->len, st->n, sizeof(*st->len), cmp_u32);
	return st->len[st->n / 2];
}

/* Mean and standard deviation of ln(length) over lengths in (lo, hi)
 * (away from the clamps). */
static void log_moments(const text_stats *st, double *mean, double *sd)
{
	double s = 0, s2 = 0;

	for (uint64_t i = 0; i < st->n; i++) {
		double v = log((double)st->len[i]);

		s += v;
		s2 += v * v;
	}
	*mean = s / (double)st->n;
	*sd = sqrt(s2 / (double)st->n - *mean * *mean);
}

static uint64_t count_over(const text_stats *st, uint32_t at)
{
	uint64_t k = 0;

	for (uint64_t i = 0; i < st->n; i++)
		k += st->len[i] > at;
	return k;
}

/* The defaults: log-normal of median 300 and sigma 1 (ln 300 = 5.70),
 * clamped to 1..16384: 2.7% of records over 2,048 tokens, 0.05% over
 * 8,192; none over 16,384.  The bounds are several standard errors wide
 * at 20,000 records; a wrong median, sigma or clamp is far outside. */
Test(synth_text, lengths_are_log_normal_of_median_300_to_16k)
{
	const char *d = tu_tmpdir();
	char dir[1024];
	text_stats st;
	double mean, sd;
	uint64_t over2k, over8k;
	uint32_t med, max;

	cr_assert_eq(tu_system("%s synth --kind text --records 20000 --shards 3 --out %s/t "
			       ">/dev/null", tool(), d), 0);
	snprintf(dir, sizeof(dir), "%s/t", d);
	read_text(dir, &st);
	cr_assert_eq(st.n, 20000);
	log_moments(&st, &mean, &sd);
	cr_assert(fabs(mean - log(300.0)) < 0.05, "mean ln(length) %.3f, want %.3f", mean,
		  log(300.0));
	cr_assert(fabs(sd - 1.0) < 0.05, "sd of ln(length) %.3f, want 1", sd);
	over2k = count_over(&st, 2048);
	over8k = count_over(&st, 8192);
	cr_assert(over2k >= 440 && over2k <= 660, "%llu records over 2048 of 20000 (want ~546)",
		  (unsigned long long)over2k);
	cr_assert(over8k >= 2 && over8k <= 25, "%llu records over 8192 of 20000 (want ~9)",
		  (unsigned long long)over8k);
	med = median(&st);
	max = st.len[st.n - 1];
	cr_assert(med >= 285 && med <= 315, "median %u, want ~300", med);
	cr_assert(max <= 16384 && max > 8192, "longest %u", max);
	cr_assert(st.len[0] >= 1 && st.len[0] < 30, "shortest %u", st.len[0]);
	free(st.len);
}

/* --median-tokens and --max-tokens: the median moves, and the ~1.07% of
 * records past 10 medians are cut to exactly the most. */
Test(synth_text, median_and_clamp_flags)
{
	const char *d = tu_tmpdir();
	char dir[1024];
	text_stats st;
	uint64_t at_max = 0;
	uint32_t med;

	cr_assert_eq(tu_system("%s synth --kind text --records 20000 --shards 2 --median-tokens 100 "
			       "--max-tokens 1000 --out %s/t >/dev/null", tool(), d), 0);
	snprintf(dir, sizeof(dir), "%s/t", d);
	read_text(dir, &st);
	med = median(&st);
	cr_assert(med >= 95 && med <= 105, "median %u, want ~100", med);
	cr_assert_eq(st.len[st.n - 1], 1000);
	for (uint64_t i = 0; i < st.n; i++)
		at_max += st.len[i] == 1000;
	cr_assert(at_max >= 150 && at_max <= 280, "%llu records cut to 1000 (want ~214)",
		  (unsigned long long)at_max);
	free(st.len);
}

/* The same seed gives the same records whatever the shard count; another
 * seed other records. */
Test(synth_text, deterministic_by_seed)
{
	const char *d = tu_tmpdir();
	char dir[1024];
	text_stats a, b, c, e;

	cr_assert_eq(tu_system("%s synth --kind text --records 3000 --shards 2 --seed 9 --out %s/a "
			       ">/dev/null && %s synth --kind text --records 3000 --shards 5 "
			       "--seed 9 --out %s/b >/dev/null && %s synth --kind text --records "
			       "3000 --shards 2 --seed 10 --out %s/c >/dev/null", tool(), d, tool(),
			       d, tool(), d), 0);
	cr_assert_eq(tu_system("%s synth --kind text --records 3000 --shards 2 --seed 9 --out %s/e "
			       ">/dev/null && cmp %s/a/text-00000-of-00002.tfrecord "
			       "%s/e/text-00000-of-00002.tfrecord && cmp "
			       "%s/a/text-00001-of-00002.tfrecord %s/e/text-00001-of-00002.tfrecord",
			       tool(), d, d, d, d, d), 0);
	snprintf(dir, sizeof(dir), "%s/a", d);
	read_text(dir, &a);
	snprintf(dir, sizeof(dir), "%s/b", d);
	read_text(dir, &b);
	snprintf(dir, sizeof(dir), "%s/c", d);
	read_text(dir, &c);
	snprintf(dir, sizeof(dir), "%s/e", d);
	read_text(dir, &e);
	cr_assert_eq(a.n, 3000);
	cr_assert_eq(b.n, 3000);
	cr_assert_eq(a.chain, b.chain);
	cr_assert_eq(a.chain, e.chain);
	cr_assert_neq(a.chain, c.chain);
	cr_assert(memcmp(a.len, c.len, 3000 * sizeof(*a.len)), "seed 10's lengths are seed 9's");
	free(a.len);
	free(b.len);
	free(c.len);
	free(e.len);
}

Test(synth_text, bad_flags)
{
	static const struct {
		const char *args, *says;
	} cases[] = {
		{ "synth --kind text --records 10 --shards 1 --median-tokens 0 --out X",
		  "--median-tokens: '0' is out of range" },
		{ "synth --kind text --records 10 --shards 1 --max-tokens 70000 --out X",
		  "--max-tokens: '70000' is out of range" },
		{ "synth --kind text --records 10 --shards 1 --max-tokens 2k0 --out X",
		  "--max-tokens: '2k0'" },
		{ "synth --kind text --records 10 --shards 1 --median-tokens 500 --max-tokens 400 "
		  "--out X", "--median-tokens 500 is more than --max-tokens 400" },
		{ "synth --kind texts --records 10 --shards 1 --out X", "--kind: 'texts'" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		tu_expect_run(tool(), cases[i].args, 2, cases[i].says);
}
