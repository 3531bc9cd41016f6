/* SPDX-License-Identifier: Apache-2.0 */
/* shuffle_util.h's helpers. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "shuffle_util.h"

int su_collect(const char *dir, pf_loader_config cfg, su_run *out, pf_error *err)
{
	const char *paths[1] = { dir };
	pf_loader *l;
	pf_batch *b;
	int ret;

	memset(out, 0, sizeof(*out));
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.features = "id:int64[1]";
	pf_error_clear(err);
	ret = pf_loader_create(&l, &cfg, err);
	if (ret < 0)
		return ret;
	while ((ret = pf_loader_next(l, &b)) == 1) {
		out->per_step = b->cores * b->per_core_batch;
		out->ids = realloc(out->ids, (out->n + out->per_step) * sizeof(*out->ids));
		cr_assert_not_null(out->ids);
		for (uint32_t c = 0; c < b->cores; c++) {
			const int64_t *ids = b->core[c].tensors[0].data;

			for (uint32_t i = 0; i < b->per_core_batch; i++)
				out->ids[out->n++] = (uint64_t)ids[i];
		}
		out->steps++;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "next: %s", ret < 0 ? pf_loader_last_error(l)->msg : "");
	pf_loader_get_metrics(l, &out->m);
	pf_loader_free(l);
	return 0;
}

void su_collect_ok(const char *dir, pf_loader_config cfg, su_run *out)
{
	pf_error err;

	cr_assert_eq(su_collect(dir, cfg, out, &err), 0, "create: %s", err.msg);
}

/* The chi-square distribution's 0.95 quantile at SU_LABELS - 1 = 9
 * degrees of freedom: a batch "passes" below it. */
#define CHI2_9_95 16.919

/* Pearson's chi-square of a batch's label counts against the dataset's
 * (uniform: n a multiple of SU_LABELS). */
static double chi_square(const uint64_t *ids, uint32_t b, uint64_t n)
{
	double count[SU_LABELS] = { 0 }, x = 0, expect = (double)b / SU_LABELS;

	for (uint32_t i = 0; i < b; i++)
		count[ids[i] * SU_LABELS / n] += 1;
	for (uint32_t k = 0; k < SU_LABELS; k++)
		x += (count[k] - expect) * (count[k] - expect) / expect;
	return x;
}

double su_pass_rate(const uint64_t *seq, uint64_t len, uint32_t b, uint64_t n)
{
	uint64_t pass = 0, batches = len / b;

	for (uint64_t k = 0; k < batches; k++)
		pass += chi_square(seq + k * b, b, n) < CHI2_9_95;
	return (double)pass / (double)batches;
}

double su_random_pass_rate(uint64_t n, uint64_t len, uint32_t b)
{
	uint64_t *seq = malloc(len * sizeof(*seq)), x = 0x9e3779b97f4a7c15ull;
	double rate;

	cr_assert_not_null(seq);
	for (uint64_t at = 0; at < len; at += n) {
		uint64_t m = len - at < n ? len - at : n, *perm = malloc(n * sizeof(*perm));

		cr_assert_not_null(perm);
		for (uint64_t i = 0; i < n; i++)
			perm[i] = i;
		for (uint64_t i = n; i > 1; i--) {
			uint64_t z = (x += 0x9e3779b97f4a7c15ull), j, t;

			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
			z ^= z >> 31;
			j = z % i;
			t = perm[i - 1];
			perm[i - 1] = perm[j];
			perm[j] = t;
		}
		memcpy(seq + at, perm, m * sizeof(*seq));
		free(perm);
	}
	rate = su_pass_rate(seq, len, b, n);
	free(seq);
	return rate;
}
