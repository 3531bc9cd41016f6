/* SPDX-License-Identifier: Apache-2.0 */
/* Mixtures (pf_loader_config.sources): each batch's shares, the long-run
 * shares, each source's records once per its own epoch and a new order
 * each, the three stop rules, equal steps and disjoint records on 1, 4
 * and 7 hosts, resume bit for bit, and every bad input refused by name. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "testutil.h"

/* Source k's ids are k * ID_BASE + [0, count): a row's id says its source. */
#define ID_BASE 1000000u

static const char *source_dir(uint32_t k, uint64_t count, uint32_t shards)
{
	return tu_id_shards((uint64_t)k * ID_BASE, count, shards, 2048);
}

typedef struct mixrun {
	uint64_t steps;
	uint64_t *ids;		/* every row's id, in order */
	int32_t *src;		/* every row's _source */
	uint64_t n;
	uint32_t crc[4096];
	pf_source_metrics sm[4];
	char name[4][64];	/* sm's names, past the loader */
	size_t nsources;
} mixrun;

/* Run a mixture of dirs with weights; at most max steps (0: all); from a
 * state (NULL: fresh).  @return the state after (*slen), the caller's. */
static uint8_t *run_mix(const char *const *dirs, const double *w, size_t n, pf_loader_config cfg,
			uint64_t max, const uint8_t *from, size_t from_len, mixrun *r,
			size_t *slen)
{
	pf_loader_source src[4];
	const char *paths[4][1];
	char names[4][16];
	pf_state_blob sb = { from, from_len };
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	uint8_t *st;
	int ret;

	for (size_t k = 0; k < n; k++) {
		paths[k][0] = dirs[k];
		snprintf(names[k], sizeof(names[k]), "s%zu", k);
		src[k] = (pf_loader_source){ .name = names[k], .paths = paths[k], .npaths = 1,
					     .weight = w[k] };
	}
	cfg.sources = src;
	cfg.nsources = n;
	cfg.features = "id:int64[1]";
	cfg.source_feature = true;
	cfg.max_steps = max;
	cfg.resume = from ? &sb : NULL;
	cfg.nresume = from ? 1 : 0;
	ret = pf_loader_create(&l, &cfg, &err);
	cr_assert_eq(ret, 0, "create: %s", err.msg);
	cr_assert_eq(pf_loader_sources(l), n);
	while ((ret = pf_loader_next(l, &b)) == 1) {
		uint32_t crc = 0, rows = b->cores * b->per_core_batch;

		cr_assert_lt(r->steps, 4096);
		r->ids = realloc(r->ids, (r->n + rows) * sizeof(*r->ids));
		r->src = realloc(r->src, (r->n + rows) * sizeof(*r->src));
		for (uint32_t c = 0; c < b->cores; c++) {
			const int64_t *ids = b->core[c].tensors[0].data;
			const int32_t *s = b->core[c].tensors[1].data;

			cr_assert_str_eq(b->core[c].tensors[1].name, "_source");
			crc = pf_crc32c(crc, b->core[c].block, b->core[c].block_bytes);
			for (uint32_t i = 0; i < b->per_core_batch; i++) {
				r->ids[r->n] = (uint64_t)ids[i];
				r->src[r->n++] = s[i];
			}
		}
		r->crc[r->steps++] = crc;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "next: %s", ret < 0 ? pf_loader_last_error(l)->msg : "");
	r->nsources = n;
	for (size_t k = 0; k < n; k++) {
		cr_assert_eq(pf_loader_source_metrics(l, k, &r->sm[k]), 0);
		snprintf(r->name[k], sizeof(r->name[k]), "%s", r->sm[k].name);
		r->sm[k].name = r->name[k];
	}
	cr_assert_eq(pf_loader_source_metrics(l, n, &r->sm[0]), -ENOENT);
	st = tu_save_state(l, slen);
	pf_loader_free(l);
	return st;
}

static void mixrun_free(mixrun *r)
{
	free(r->ids);
	free(r->src);
	memset(r, 0, sizeof(*r));
}

Test(mixture, shares_per_batch_within_a_record_and_exact_over_the_run, .timeout = 120)
{
	const char *dirs[3] = { source_dir(0, 3000, 3), source_dir(1, 2000, 2),
				source_dir(2, 1500, 2) };
	const double w[3] = { 0.5, 0.3, 0.2 };
	pf_loader_config cfg = { .cores_per_host = 2, .per_core_batch = 16, .seed = 4,
				 .shuffle = true, .threads = 2, .max_steps = 150 };
	mixrun r = { 0 };
	size_t slen;
	uint64_t total[3] = { 0 };

	free(run_mix(dirs, w, 3, cfg, 150, NULL, 0, &r, &slen));
	cr_assert_eq(r.steps, 150);
	for (uint64_t t = 0; t < r.steps; t++) {
		uint64_t c[3] = { 0 };

		for (uint32_t i = 0; i < 32; i++) {
			uint64_t row = t * 32 + i;
			int32_t k = r.src[row];

			cr_assert(k >= 0 && k < 3);
			cr_assert_eq(r.ids[row] / ID_BASE, (uint64_t)k, "row %llu: id %llu, _source %d",
				     (unsigned long long)row, (unsigned long long)r.ids[row], k);
			c[k]++;
		}
		for (int k = 0; k < 3; k++) {
			double exact = 32 * w[k];

			cr_assert(c[k] == (uint64_t)floor(exact) || c[k] == (uint64_t)ceil(exact),
				  "step %llu: source %d has %llu rows, its share is %.1f",
				  (unsigned long long)t, k, (unsigned long long)c[k], exact);
			total[k] += c[k];
			cr_assert_leq(fabs((double)total[k] - (double)(t + 1) * exact), 1.0,
				      "after step %llu: source %d has %llu rows, share %.1f",
				      (unsigned long long)t, k, (unsigned long long)total[k],
				      (double)(t + 1) * exact);
		}
	}
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(r.sm[k].records, total[k]);
		cr_assert_float_eq(r.sm[k].realised_share, w[k], 0.01);
		cr_assert_float_eq(r.sm[k].share, w[k], 1e-6);
		cr_assert_geq(r.sm[k].epochs_started, 1);
	}
	cr_assert_str_eq(r.sm[1].name, "s1");
	mixrun_free(&r);
}

/* Source k's ids in the order the run took them. */
static uint64_t source_ids(const mixrun *r, int32_t k, uint64_t *out)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < r->n; i++)
		if (r->src[i] == k)
			out[n++] = r->ids[i] % ID_BASE;
	return n;
}

/* A source whose share of a batch is under one row takes a row every few
 * steps, and its long-run share is still its weight's. */
Test(mixture, a_share_under_one_row_a_batch, .timeout = 120)
{
	const char *dirs[2] = { source_dir(0, 3000, 2), source_dir(1, 200, 1) };
	const double w[2] = { 97, 3 };
	pf_loader_config cfg = { .per_core_batch = 10, .seed = 2, .shuffle = true,
				 .threads = 2, .mix_stop = PF_MIX_STOP_FIRST_EXHAUSTED };
	mixrun r = { 0 };
	size_t slen;

	free(run_mix(dirs, w, 2, cfg, 0, NULL, 0, &r, &slen));
	/* The first source runs out first: its batches are its share of 8
	 * host batches, 78 rows, 38 of them an epoch (2964 records), at 9.7
	 * rows a step: 305 steps. */
	cr_assert_eq(r.steps, 305, "%llu steps", (unsigned long long)r.steps);
	cr_assert_float_eq(r.sm[1].realised_share, 0.03, 0.002);
	mixrun_free(&r);
}

Test(mixture, each_source_its_own_epochs_each_record_once_a_new_order_each, .timeout = 120)
{
	/* A small source (300 records) and a large one: the small one goes
	 * through several epochs of its own. */
	const char *dirs[2] = { source_dir(0, 4000, 2), source_dir(1, 300, 1) };
	const double w[2] = { 0.6, 0.4 };
	pf_loader_config cfg = { .per_core_batch = 20, .seed = 8, .shuffle = true,
				 .threads = 2 };
	mixrun r = { 0 };
	size_t slen;
	/* The small source's batches would be its share of 8 host batches,
	 * 64 rows, 4 of them an epoch (44 records of 300 dropped): they are
	 * fitted to its records instead, 300 / 8 = 37 rows, 8 of them an
	 * epoch (296 records, 4 dropped). */
	uint64_t *ids = malloc(8000 * sizeof(*ids)), n, epoch = 300 / 37 * 37;
	uint8_t seen[300];

	free(run_mix(dirs, w, 2, cfg, 0, NULL, 0, &r, &slen));
	cr_log_info("%llu steps", (unsigned long long)r.steps);
	n = source_ids(&r, 1, ids);
	cr_assert_gt(n, 3 * epoch, "%llu rows of the small source", (unsigned long long)n);
	for (uint64_t e = 0; e + 1 <= n / epoch; e++) {
		memset(seen, 0, sizeof(seen));
		for (uint64_t i = e * epoch; i < (e + 1) * epoch; i++)
			cr_assert_eq(seen[ids[i]]++, 0, "epoch %llu of the small source: id %llu "
				     "twice", (unsigned long long)e, (unsigned long long)ids[i]);
	}
	cr_assert(memcmp(ids, ids + epoch, 50 * sizeof(*ids)) != 0,
		  "the second epoch of a source has the first one's order");
	cr_assert_geq(r.sm[1].epochs_started, 3);
	/* The default stop: one epoch of the first source (batches of 96
	 * rows, 41 of them: 3936 records), 12 rows a step: the last step
	 * whose rows of it all lie in that epoch. */
	n = source_ids(&r, 0, ids);
	cr_assert_leq(n, 3936);
	cr_assert_gt(n + 12, 3936, "%llu rows of the first source", (unsigned long long)n);
	memset(seen, 0, sizeof(seen));
	{
		uint8_t *s0 = calloc(4000, 1);

		for (uint64_t i = 0; i < n; i++)
			cr_assert_eq(s0[ids[i]]++, 0);
		free(s0);
	}
	free(ids);
	mixrun_free(&r);
}

Test(mixture, stop_rules_first_source_epochs_first_exhausted_max_steps, .timeout = 120)
{
	const char *dirs[2] = { source_dir(0, 1000, 1), source_dir(1, 600, 1) };
	const double w[2] = { 0.5, 0.5 };
	pf_loader_config cfg = { .per_core_batch = 10, .seed = 1, .shuffle = true,
				 .threads = 2, .epochs = 3 };
	mixrun r = { 0 };
	size_t slen;
	uint64_t *ids = malloc(4000 * sizeof(*ids)), n0, n1;

	/* Three epochs of the first source: 1000 records an epoch (batches
	 * of 5), so 3000 of its rows, 600 steps. */
	free(run_mix(dirs, w, 2, cfg, 0, NULL, 0, &r, &slen));
	n0 = source_ids(&r, 0, ids);
	cr_assert_eq(n0, 3000);
	cr_assert_eq(r.steps, 600);
	cr_assert_eq(r.sm[0].epochs_started, 3);
	cr_assert_geq(r.sm[1].epochs_started, 5);
	mixrun_free(&r);
	/* The first to run out: the 600-record source, after 120 steps. */
	cfg.mix_stop = PF_MIX_STOP_FIRST_EXHAUSTED;
	free(run_mix(dirs, w, 2, cfg, 0, NULL, 0, &r, &slen));
	n1 = source_ids(&r, 1, ids);
	cr_assert_eq(n1, 600);
	cr_assert_eq(r.steps, 120);
	cr_assert_eq(r.sm[1].epochs_started, 1);
	mixrun_free(&r);
	/* max_steps first. */
	free(run_mix(dirs, w, 2, cfg, 7, NULL, 0, &r, &slen));
	cr_assert_eq(r.steps, 7);
	mixrun_free(&r);
	free(ids);
}

Test(mixture, hosts_1_4_7_equal_steps_disjoint_records_per_source, .timeout = 240)
{
	const char *dirs[3] = { source_dir(0, 5000, 5), source_dir(1, 3000, 3),
				source_dir(2, 2100, 3) };
	const double w[3] = { 2, 1, 1 };
	const uint32_t hosts[] = { 1, 4, 7 };
	uint8_t *seen = malloc(3 * ID_BASE);

	for (size_t i = 0; i < 3; i++) {
		uint32_t h = hosts[i];
		uint64_t steps = 0;

		memset(seen, 0, 3 * ID_BASE);
		for (uint32_t x = 0; x < h; x++) {
			pf_loader_config cfg = { .host_index = x, .num_hosts = h,
						 .cores_per_host = 2, .per_core_batch = 4,
						 .seed = 6, .shuffle = true, .threads = 1,
						 .mix_stop = PF_MIX_STOP_FIRST_EXHAUSTED };
			mixrun r = { 0 };
			size_t slen;

			free(run_mix(dirs, w, 3, cfg, 0, NULL, 0, &r, &slen));
			if (x == 0)
				steps = r.steps;
			cr_assert_eq(r.steps, steps, "%u hosts: host %u has %llu steps, host 0 "
				     "%llu", h, x, (unsigned long long)r.steps,
				     (unsigned long long)steps);
			cr_assert_gt(r.steps, 0);
			/* Every source inside its first epoch: no record twice
			 * in the pod. */
			for (uint64_t j = 0; j < r.n; j++)
				cr_assert_eq(seen[r.ids[j]]++, 0, "%u hosts: id %llu twice", h,
					     (unsigned long long)r.ids[j]);
			mixrun_free(&r);
		}
	}
	free(seen);
}

Test(mixture, resumes_bit_for_bit, .timeout = 180)
{
	const char *dirs[3] = { source_dir(0, 2000, 2), source_dir(1, 500, 1),
				source_dir(2, 900, 2) };
	const double w[3] = { 0.5, 0.25, 0.25 };
	pf_loader_config cfg = { .cores_per_host = 2, .per_core_batch = 6, .seed = 3,
				 .shuffle = true, .threads = 2, .epochs = 2 };
	const uint64_t stops[] = { 0, 1, 5, 77, 200, 332 };
	static mixrun ref, a, b;
	size_t slen;

	free(run_mix(dirs, w, 3, cfg, 0, NULL, 0, &ref, &slen));
	cr_assert_gt(ref.steps, 300);
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) {
		uint8_t *st;

		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		if (stops[i]) {
			st = run_mix(dirs, w, 3, cfg, stops[i], NULL, 0, &a, &slen);
		} else {
			/* Saved before any batch. */
			pf_loader_source src[3];
			const char *p[3][1];
			pf_loader *l;
			pf_error err;
			pf_loader_config c = cfg;

			for (int k = 0; k < 3; k++) {
				p[k][0] = dirs[k];
				src[k] = (pf_loader_source){ .name = k == 0 ? "s0" : k == 1 ? "s1"
							     : "s2", .paths = p[k], .npaths = 1,
							     .weight = w[k] };
			}
			c.sources = src;
			c.nsources = 3;
			c.features = "id:int64[1]";
			c.source_feature = true;
			cr_assert_eq(pf_loader_create(&l, &c, &err), 0, "%s", err.msg);
			st = tu_save_state(l, &slen);
			pf_loader_free(l);
		}
		cr_assert_lt(slen, 64 * 1024, "a state of %zu bytes", slen);
		free(run_mix(dirs, w, 3, cfg, 0, st, slen, &b, &slen));
		cr_assert_eq(a.steps + b.steps, ref.steps, "stop at %llu",
			     (unsigned long long)stops[i]);
		for (uint64_t j = 0; j < b.steps; j++)
			cr_assert_eq(b.crc[j], ref.crc[a.steps + j], "stop at %llu: step %llu differs",
				     (unsigned long long)stops[i],
				     (unsigned long long)(a.steps + j));
		free(st);
		mixrun_free(&a);
		mixrun_free(&b);
	}
	mixrun_free(&ref);
}

/* A mixture's config, the sources' paths one directory each. */
static int create_bad(pf_loader_config cfg, pf_loader_source *src, size_t n, pf_error *err)
{
	pf_loader *l = NULL;
	int ret;

	cfg.sources = src;
	cfg.nsources = n;
	if (!cfg.features)
		cfg.features = "id:int64[1]";
	if (!cfg.per_core_batch)
		cfg.per_core_batch = 4;
	pf_error_clear(err);
	ret = pf_loader_create(&l, &cfg, err);
	cr_assert_lt(ret, 0, "created: %s, weight %g, features %s", src[n - 1].name,
		     src[n - 1].weight, cfg.features);
	cr_assert_null(l);
	return ret;
}

Test(mixture, bad_input_is_refused_naming_the_source_or_value, .timeout = 60)
{
	const char *d0 = source_dir(0, 100, 1), *d1 = source_dir(1, 100, 1);
	const char *p0[1] = { d0 }, *p1[1] = { d1 }, *none[1] = { "/nonexistent/podfeed-x" };
	pf_loader_config cfg = { 0 };
	pf_error err;
	static const struct {
		double w;
		const char *says;
	} weights[] = { { 0, "weight 0 " }, { -1, "weight -1 " }, { NAN, "weight nan" },
			{ INFINITY, "weight inf" } };

	for (size_t i = 0; i < sizeof(weights) / sizeof(weights[0]); i++) {
		pf_loader_source s[2] = { { "web", p0, 1, 1.0 }, { "code", p1, 1, weights[i].w } };

		cr_assert_eq(create_bad(cfg, s, 2, &err), -EINVAL);
		cr_assert(strstr(err.msg, "source 'code'") && strstr(err.msg, weights[i].says),
			  "%s", err.msg);
	}
	{
		pf_loader_source s[2] = { { "web", p0, 1, 1.0 }, { "web", p1, 1, 1.0 } };

		cr_assert_eq(create_bad(cfg, s, 2, &err), -EINVAL);
		cr_assert(strstr(err.msg, "two sources are named 'web'"), "%s", err.msg);
	}
	{
		pf_loader_source s[2] = { { "web", p0, 1, 1.0 }, { "books", none, 1, 1.0 } };

		create_bad(cfg, s, 2, &err);
		cr_assert(strstr(err.msg, "source 'books'"), "%s", err.msg);
		cr_assert(strstr(err.msg, "nonexistent") || strstr(err.file, "nonexistent"),
			  "%s (%s)", err.msg, err.file);
	}
	{
		pf_loader_source s[2] = { { "web", p0, 1, 1.0 }, { "code", NULL, 0, 1.0 } };

		cr_assert_eq(create_bad(cfg, s, 2, &err), -EINVAL);
		cr_assert(strstr(err.msg, "source 'code' names no files"), "%s", err.msg);
	}
	{
		/* A feature the sources' schema lacks, without default=
		 * (shards with a schema in their index: shardtool's). */
		const char *d = tu_tmpdir(), *st = tu_env_tool("SHARDTOOL");
		char z[512];
		const char *pz[1] = { z };
		pf_loader_source s[2] = { { "web", pz, 1, 1.0 }, { "code", pz, 1, 1.0 } };
		pf_loader_config c = cfg;

		snprintf(z, sizeof(z), "%s/z", d);
		cr_assert_eq(tu_system("%s synth --kind dense --records 100 --shards 1 --out %s/raw "
				       ">/dev/null && %s convert --out %s %s/raw >/dev/null", st, d,
				       st, z, d), 0);
		c.features = "x:float32[256],label:int64[1],missing:int64[1]";
		create_bad(c, s, 2, &err);
		cr_assert(strstr(err.msg, "source 'web'") && strstr(err.msg, "missing"), "%s",
			  err.msg);
		/* With default= it is read. */
		{
			pf_loader *l = NULL;

			c.features = "x:float32[256],label:int64[1],missing:int64[1]:default=0";
			c.sources = s;
			c.nsources = 2;
			c.per_core_batch = 4;
			cr_assert_eq(pf_loader_create(&l, &c, &err), 0, "%s", err.msg);
			pf_loader_free(l);
		}
	}
	{
		pf_loader_source s[1] = { { "web", p0, 1, 1.0 } };
		pf_loader_config c = cfg;

		c.mix = (pf_mix)5;
		cr_assert_eq(create_bad(c, s, 1, &err), -EINVAL);
		cr_assert(strstr(err.msg, "mix 5"), "%s", err.msg);
		c = cfg;
		c.mix_stop = (pf_mix_stop)9;
		cr_assert_eq(create_bad(c, s, 1, &err), -EINVAL);
		cr_assert(strstr(err.msg, "mix_stop 9"), "%s", err.msg);
		c = cfg;
		c.paths = p1;
		c.npaths = 1;
		cr_assert_eq(create_bad(c, s, 1, &err), -EINVAL);
		cr_assert(strstr(err.msg, "paths must be empty"), "%s", err.msg);
		/* Weighing tokens without packing, or an unknown unit:
		 * refused, naming them. */
		c = cfg;
		c.mix_unit = PF_MIX_UNIT_TOKENS;
		cr_assert_eq(create_bad(c, s, 1, &err), -EINVAL);
		cr_assert(strstr(err.msg, "mix_unit 1 (tokens) weighs a packed mixture's tokens: "
				  "give a pack_length"), "%s", err.msg);
		c = cfg;
		c.mix_unit = (pf_mix_unit)7;
		cr_assert_eq(create_bad(c, s, 1, &err), -EINVAL);
		cr_assert(strstr(err.msg, "mix_unit 7 is neither"), "%s", err.msg);
	}
}
