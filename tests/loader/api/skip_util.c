/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers of the skip and records-of tests: skip_util.h. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "skip_util.h"

static void keep(sk_steps *s, const pf_batch *b)
{
	uint32_t crc = 0, hb = b->cores * b->per_core_batch;

	cr_assert_lt(s->n, SK_MAX_STEPS);
	s->host_batch = hb;
	s->ids = realloc(s->ids, (s->n + 1) * hb * sizeof(*s->ids));
	cr_assert_not_null(s->ids);
	for (uint32_t c = 0; c < b->cores; c++) {
		const pf_core_batch *cb = &b->core[c];

		crc = pf_crc32c(crc, cb->block, cb->block_bytes);
		for (uint32_t i = 0; i < b->per_core_batch; i++)
			s->ids[s->n * hb + c * b->per_core_batch + i] =
				cb->ntensors && cb->tensors[0].dtype == PF_DTYPE_INT64 &&
				cb->valid[i] ? ((const int64_t *)cb->tensors[0].data)[i] : -1;
	}
	s->crc[s->n] = crc;
	s->global[s->n] = b->global_step;
	s->epoch[s->n] = b->epoch;
	s->step[s->n] = b->step;
	s->n++;
}

static pf_state_blob *blobs_of(const sk_blob *from, size_t nfrom)
{
	pf_state_blob *sb = calloc(nfrom + 1, sizeof(*sb));

	cr_assert_not_null(sb);
	for (size_t i = 0; i < nfrom; i++)
		sb[i] = (pf_state_blob){ from[i].data, from[i].len };
	return sb;
}

sk_blob sk_run(pf_loader_config cfg, const sk_blob *from, size_t nfrom, uint64_t skip,
	       uint64_t max, sk_steps *s)
{
	pf_state_blob *sb = blobs_of(from, nfrom);
	sk_blob out = { NULL, 0 };
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	int64_t n;
	int ret = 0;

	if (s) {
		sk_steps_free(s);
		memset(s, 0, sizeof(*s));
	}
	cfg.max_steps = max == SK_ALL ? 0 : max;
	cfg.resume = nfrom ? sb : NULL;
	cfg.nresume = nfrom;
	cfg.skip_steps = skip;
	pf_error_clear(&err);
	ret = pf_loader_create(&l, &cfg, &err);
	cr_assert_eq(ret, 0, "create (skip %llu): %s", (unsigned long long)skip, err.msg);
	while (max && (ret = pf_loader_next(l, &b)) == 1) {
		if (s)
			keep(s, b);
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "next: %s", ret < 0 ? pf_loader_last_error(l)->msg : "");
	if (s)
		pf_loader_get_metrics(l, &s->m);
	n = pf_loader_save_state(l, NULL, 0);
	cr_assert_gt(n, 0);
	out.data = malloc((size_t)n);
	cr_assert_not_null(out.data);
	cr_assert_eq(pf_loader_save_state(l, out.data, (size_t)n), n);
	out.len = (size_t)n;
	pf_loader_free(l);
	free(sb);
	return out;
}

int sk_create_fails(pf_loader_config cfg, const sk_blob *from, size_t nfrom, uint64_t skip,
		    pf_error *err)
{
	pf_state_blob *sb = blobs_of(from, nfrom);
	pf_loader *l = NULL;
	int ret;

	cfg.resume = nfrom ? sb : NULL;
	cfg.nresume = nfrom;
	cfg.skip_steps = skip;
	pf_error_clear(err);
	ret = pf_loader_create(&l, &cfg, err);
	if (ret == 0)
		pf_loader_free(l);
	free(sb);
	return ret;
}

void sk_expect_same(const sk_steps *a, uint64_t at, const sk_steps *b, const char *what)
{
	cr_assert_eq(at + b->n, a->n, "%s: %llu steps from step %llu, the run never stopped "
		     "has %llu", what, (unsigned long long)b->n, (unsigned long long)at,
		     (unsigned long long)a->n);
	for (uint64_t j = 0; j < b->n; j++) {
		cr_assert_eq(b->global[j], a->global[at + j], "%s: step %llu's global step",
			     what, (unsigned long long)j);
		cr_assert_eq(b->epoch[j], a->epoch[at + j], "%s: step %llu's epoch", what,
			     (unsigned long long)j);
		cr_assert_eq(b->step[j], a->step[at + j], "%s: step %llu's step in epoch",
			     what, (unsigned long long)j);
		cr_assert_eq(b->crc[j], a->crc[at + j], "%s: global step %llu differs from "
			     "the run never stopped", what, (unsigned long long)b->global[j]);
	}
}

void sk_steps_free(sk_steps *s)
{
	free(s->ids);
	s->ids = NULL;
}
