/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixsmall_util.h"
#include "testutil.h"

void ms_make(ms_mix *c)
{
	/* The shards made so far (a test process makes a few). */
	static struct made {
		size_t k;
		uint64_t count;
		const char *dir;
	} made[16];
	static size_t nmade;

	for (size_t k = 0; k < c->n; k++) {
		for (size_t i = 0; i < nmade && !c->dirs[k]; i++)
			if (made[i].k == k && made[i].count == c->counts[k])
				c->dirs[k] = made[i].dir;
		if (c->dirs[k])
			continue;
		c->dirs[k] = tu_id_shards((uint64_t)k * MS_ID_BASE, c->counts[k],
					  c->counts[k] > 1000 ? 4 : 1, 1024);
		if (nmade < 16)
			made[nmade++] = (struct made){ k, c->counts[k], c->dirs[k] };
	}
}

void ms_run_host(const ms_mix *c, uint32_t x, uint32_t h, const pf_state_blob *from,
		 size_t nfrom, uint64_t max, ms_run *r)
{
	static const char *names[MS_MAX] = { "a", "b", "c" };
	pf_loader_source src[MS_MAX];
	const char *paths[MS_MAX][1];
	pf_loader_config cfg = { .host_index = x, .num_hosts = h, .cores_per_host = 1,
				 .per_core_batch = c->hb, .seed = 5, .shuffle = true,
				 .threads = 1, .epochs = c->epochs, .mix = c->mode,
				 .mix_stop = c->stop, .features = "id:int64[1]",
				 .source_feature = true };
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	int ret;

	for (size_t k = 0; k < c->n; k++) {
		paths[k][0] = c->dirs[k];
		src[k] = (pf_loader_source){ .name = names[k], .paths = paths[k], .npaths = 1,
					     .weight = c->w[k] };
	}
	cfg.sources = src;
	cfg.nsources = c->n;
	cfg.max_steps = max;
	cfg.resume = nfrom ? from : NULL;
	cfg.nresume = nfrom;
	ret = pf_loader_create(&l, &cfg, &err);
	cr_assert_eq(ret, 0, "host %u of %u: %s", x, h, err.msg);
	while ((ret = pf_loader_next(l, &b)) == 1) {
		const int64_t *ids = b->core[0].tensors[0].data;
		const int32_t *s = b->core[0].tensors[1].data;

		for (uint32_t i = 0; i < b->per_core_batch; i++) {
			uint32_t k = (uint32_t)s[i];

			cr_assert_lt(k, c->n);
			cr_assert_eq((uint64_t)ids[i] / MS_ID_BASE, k, "a row of _source %u has id "
				     "%lld", k, (long long)ids[i]);
			r->ids[k] = realloc(r->ids[k], (r->n[k] + 1) * sizeof(uint64_t));
			r->ids[k][r->n[k]++] = (uint64_t)ids[i] % MS_ID_BASE;
		}
		r->steps++;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "next: %s", ret < 0 ? pf_loader_last_error(l)->msg : "");
	for (size_t k = 0; k < c->n; k++) {
		pf_source_metrics sm;

		cr_assert_eq(pf_loader_source_metrics(l, k, &sm), 0);
		r->started[k] = sm.epochs_started;
	}
	free(r->state);
	r->state = tu_save_state(l, &r->state_len);
	cr_assert_lt(r->state_len, 64 * 1024);
	pf_loader_free(l);
}

void ms_run_free(ms_run *r)
{
	for (size_t k = 0; k < MS_MAX; k++)
		free(r->ids[k]);
	free(r->state);
	memset(r, 0, sizeof(*r));
}

uint64_t ms_sub_batch(const ms_mix *c, size_t k, uint32_t h)
{
	double total = 0;
	uint64_t cap, fit;

	for (size_t i = 0; i < c->n; i++)
		total += c->w[i];
	cap = (uint64_t)(c->hb * 8 * c->w[k] / total + 0.5);
	fit = c->counts[k] / (8 * (uint64_t)h);
	fit = fit < cap ? fit : cap;
	return fit ? fit : 1;
}

uint64_t ms_epoch(const ms_mix *c, size_t k, uint32_t h)
{
	uint64_t b = ms_sub_batch(c, k, h);
	uint64_t e = c->counts[k] / (b * h) * b;

	/* The bound the docs state: what an epoch drops is under 1/8 of
	 * the source, or, under 8 records a host, under one a host. */
	cr_assert((c->counts[k] - e * h) * 8 < c->counts[k] ||
		  (c->counts[k] < 8 * h && c->counts[k] - e * h < h),
		  "source %zu of %llu records on %u hosts drops %llu an epoch", k,
		  (unsigned long long)c->counts[k], h,
		  (unsigned long long)(c->counts[k] - e * h));
	return e;
}

uint64_t ms_check_epochs(const ms_mix *c, size_t k, const ms_run *r, uint32_t h,
			 const uint64_t *from, uint64_t e)
{
	uint8_t *seen = malloc(c->counts[k]);
	uint64_t whole = 0;

	cr_assert_not_null(seen);
	for (uint64_t ep = 0;; ep++) {
		uint64_t got = 0;
		bool all = true, any = false;

		memset(seen, 0, c->counts[k]);
		for (uint32_t x = 0; x < h; x++) {
			uint64_t lo = from[x] + ep * e, hi = lo + e;

			if (hi > r[x].n[k]) {
				all = false;
				hi = r[x].n[k];
			}
			for (uint64_t j = lo; j < hi; j++, got++) {
				uint64_t id = r[x].ids[k][j];

				any = true;
				cr_assert_lt(id, c->counts[k]);
				cr_assert_eq(seen[id]++, 0, "source %zu, %u hosts: id %llu twice in "
					     "its epoch %llu (host %u, row %llu)", k, h,
					     (unsigned long long)id, (unsigned long long)ep, x,
					     (unsigned long long)j);
			}
		}
		if (!all || !any)
			break;
		cr_assert_eq(got, h * e);
		whole++;
	}
	free(seen);
	return whole;
}
