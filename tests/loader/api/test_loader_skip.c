/* SPDX-License-Identifier: Apache-2.0 */
/* skip_steps: a run resumed (or started) n steps on hands out, from its
 * first batch, the batches a run never stopped hands out there: on one
 * host and on four, across epochs, with the window and the global
 * shuffle, packed, mixed, and after an elastic resume; the metrics count
 * what was skipped, a state saved after is past it, nothing skipped is
 * read, and a skip past the run's end (or with another dataset's state)
 * is refused by name. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "pack_util.h"
#include "skip_util.h"
#include "testutil.h"

/* 6 shards of ids 0..5999 in small frames. */
static const char *ids_dir(void)
{
	static char dir[256];

	if (!dir[0])
		snprintf(dir, sizeof(dir), "%s", tu_id_shards(0, 6000, 6, 2048));
	return dir;
}

static pf_loader_config id_config(const char *const *paths)
{
	return (pf_loader_config){ .paths = paths, .npaths = 1, .features = "id:int64[1]",
				   .cores_per_host = 2, .per_core_batch = 16, .shuffle = true,
				   .shuffle_window = 500, .seed = 5, .epochs = 3, .threads = 2 };
}

static sk_steps ref, got, part;

/* From the start and from states at `stops`, each skip of `skips`: the
 * batches of the run never stopped from step stop + skip on. */
static void check_skips(pf_loader_config cfg, const uint64_t *stops, size_t nstops,
			const uint64_t *skips, size_t nskips)
{
	free(sk_run(cfg, NULL, 0, 0, SK_ALL, &ref).data);
	cr_assert_gt(ref.n, 0);
	for (size_t i = 0; i < nstops; i++) {
		sk_blob st = stops[i] ? sk_run(cfg, NULL, 0, 0, stops[i], &part)
				      : (sk_blob){ NULL, 0 };

		for (size_t k = 0; k < nskips; k++) {
			char what[96];

			if (stops[i] + skips[k] >= ref.n)
				continue;
			snprintf(what, sizeof(what), "stop %llu, skip %llu",
				 (unsigned long long)stops[i], (unsigned long long)skips[k]);
			free(sk_run(cfg, &st, stops[i] ? 1 : 0, skips[k], SK_ALL, &got).data);
			sk_expect_same(&ref, stops[i] + skips[k], &got, what);
			cr_assert_eq(got.m.skipped_steps, skips[k], "%s", what);
			cr_assert_eq(got.m.skipped_records, skips[k] * got.host_batch, "%s", what);
			if (skips[k])
				cr_assert_eq(got.m.skipped_from, ref.global[stops[i]], "%s", what);
		}
		free(st.data);
	}
}

/* check_skips() for a packing loader: the skipped steps' pieces and
 * values counted (> 0). */
static void check_skips_packed(pf_loader_config cfg, const uint64_t *stops, size_t nstops,
			       const uint64_t *skips, size_t nskips)
{
	free(sk_run(cfg, NULL, 0, 0, SK_ALL, &ref).data);
	cr_assert_gt(ref.n, 0);
	for (size_t i = 0; i < nstops; i++) {
		sk_blob st = stops[i] ? sk_run(cfg, NULL, 0, 0, stops[i], NULL)
				      : (sk_blob){ NULL, 0 };

		for (size_t k = 0; k < nskips; k++) {
			char what[96];

			if (stops[i] + skips[k] >= ref.n)
				continue;
			snprintf(what, sizeof(what), "packed %s, host %u of %u, stop %llu, skip %llu",
				 cfg.pack_mode ? "concat" : "first_fit", cfg.host_index,
				 cfg.num_hosts ? cfg.num_hosts : 1, (unsigned long long)stops[i],
				 (unsigned long long)skips[k]);
			free(sk_run(cfg, &st, stops[i] ? 1 : 0, skips[k], SK_ALL, &got).data);
			sk_expect_same(&ref, stops[i] + skips[k], &got, what);
			cr_assert_eq(got.m.skipped_steps, skips[k], "%s", what);
			cr_assert_eq(got.m.skipped_from, ref.global[stops[i]], "%s", what);
			cr_assert_geq(got.m.skipped_records, skips[k] * got.host_batch, "%s", what);
			cr_assert_gt(got.m.skipped_tokens, got.m.skipped_records, "%s", what);
		}
		free(st.data);
	}
}

/* 6000 records, 2 x 16 a step: 187 steps an epoch, 3 epochs. */
Test(skip, one_host_gives_the_batches_of_a_run_never_stopped, .timeout = 240)
{
	const char *paths[] = { ids_dir() };
	pf_loader_config cfg = id_config(paths);
	const uint64_t stops[] = { 0, 1, 100, 186, 187, 300 };
	const uint64_t skips[] = { 0, 1, 30, 86, 87, 187, 200, 400 };

	check_skips(cfg, stops, 6, skips, 8);
	/* Without a shuffle, and with the global one. */
	cfg.shuffle = false;
	check_skips(cfg, stops, 3, skips, 5);
	cfg.shuffle_mode = PF_SHUFFLE_GLOBAL;
	check_skips(cfg, stops + 2, 2, skips + 2, 4);
}

/* Every host of four skips the same steps: each host's batches are its
 * own run's, from the same global step. */
Test(skip, four_hosts_skip_the_same_steps, .timeout = 240)
{
	const char *paths[] = { ids_dir() };
	const uint64_t stops[] = { 0, 20 };
	const uint64_t skips[] = { 13, 46, 47, 60 };	/* 46 steps an epoch on 4 hosts */

	for (uint32_t h = 0; h < 4; h++) {
		pf_loader_config cfg = id_config(paths);

		cfg.num_hosts = 4;
		cfg.host_index = h;
		check_skips(cfg, stops, 2, skips, 4);
	}
}

/* The remainder wraps: the last step of an epoch filled from the host's
 * start; a skip into it and past it. */
Test(skip, a_wrapped_remainder_is_skipped_as_delivered, .timeout = 120)
{
	const char *paths[] = { ids_dir() };
	pf_loader_config cfg = id_config(paths);
	const uint64_t stops[] = { 0, 50 };
	const uint64_t skips[] = { 187, 188, 189 };	/* 188 steps an epoch */

	cfg.remainder = PF_REMAINDER_WRAP;
	cfg.per_core_batch = 16;
	check_skips(cfg, stops, 2, skips, 3);
}

/* Four hosts' states resumed on two (elastic), with a skip: the two
 * hosts' batches are those of the elastic resume without it, n steps on;
 * across the resumed epoch's end too. */
Test(skip, an_elastic_resume_skips_as_it_resumes, .timeout = 240)
{
	const char *paths[] = { ids_dir() };
	sk_blob st[4];
	const uint64_t skips[] = { 1, 17, 60, 70, 93, 94, 150 };

	for (uint32_t h = 0; h < 4; h++) {
		pf_loader_config cfg = id_config(paths);

		cfg.num_hosts = 4;
		cfg.host_index = h;
		st[h] = sk_run(cfg, NULL, 0, 0, 10 + h, NULL);
	}
	for (uint32_t h = 0; h < 2; h++) {
		pf_loader_config cfg = id_config(paths);

		cfg.num_hosts = 2;
		cfg.host_index = h;
		free(sk_run(cfg, st, 4, 0, SK_ALL, &ref).data);
		for (size_t k = 0; k < sizeof(skips) / sizeof(skips[0]); k++) {
			char what[64];

			if (skips[k] >= ref.n)
				continue;
			snprintf(what, sizeof(what), "host %u of 2, skip %llu", h,
				 (unsigned long long)skips[k]);
			free(sk_run(cfg, st, 4, skips[k], SK_ALL, &got).data);
			sk_expect_same(&ref, skips[k], &got, what);
		}
	}
	for (uint32_t h = 0; h < 4; h++)
		free(st[h].data);
}

/* A state saved right after a skip is past it: resumed without a skip,
 * the batches go on from there; and a state saved after some steps of a
 * skipped run resumes exactly. */
Test(skip, the_next_state_includes_the_skip, .timeout = 120)
{
	const char *paths[] = { ids_dir() };
	pf_loader_config cfg = id_config(paths);
	sk_blob a, b, c;
	pf_state_info info;
	pf_error err;

	free(sk_run(cfg, NULL, 0, 0, SK_ALL, &ref).data);
	a = sk_run(cfg, NULL, 0, 0, 40, NULL);
	b = sk_run(cfg, &a, 1, 200, 0, NULL);		/* nothing taken */
	cr_assert_eq(pf_state_inspect(b.data, b.len, &info, &err), 0, "%s", err.msg);
	cr_assert_eq(info.global_step, 240);
	cr_assert_eq(info.epoch, 1);
	cr_assert_eq(info.step_in_epoch, 240 - 187);
	free(sk_run(cfg, &b, 1, 0, SK_ALL, &got).data);
	sk_expect_same(&ref, 240, &got, "resumed from the skip's state");
	c = sk_run(cfg, &a, 1, 200, 25, NULL);
	free(sk_run(cfg, &c, 1, 0, SK_ALL, &got).data);
	sk_expect_same(&ref, 265, &got, "resumed after the skip's 25 steps");
	free(a.data);
	free(b.data);
	free(c.data);
}

/* max_steps counts the steps after the skip. */
Test(skip, max_steps_counts_from_the_first_batch, .timeout = 60)
{
	const char *paths[] = { ids_dir() };
	pf_loader_config cfg = id_config(paths);

	free(sk_run(cfg, NULL, 0, 0, SK_ALL, &ref).data);
	free(sk_run(cfg, NULL, 0, 100, 7, &got).data);
	cr_assert_eq(got.n, 7);
	cr_assert_eq(got.global[0], 100);
	for (uint64_t j = 0; j < got.n; j++)
		cr_assert_eq(got.crc[j], ref.crc[100 + j]);
}

/* What is skipped is not read: a skip to the last epoch's last steps,
 * without a shuffle, reads a few frames, not the two epochs before. */
Test(skip, nothing_skipped_is_read, .timeout = 60)
{
	const char *paths[] = { ids_dir() };
	pf_loader_config cfg = id_config(paths);

	cfg.shuffle = false;
	free(sk_run(cfg, NULL, 0, 0, SK_ALL, &ref).data);
	free(sk_run(cfg, NULL, 0, 3 * 187 - 5, SK_ALL, &got).data);
	cr_assert_eq(got.n, 5);
	cr_assert_lt(got.m.io_requests * 20, ref.m.io_requests,
		     "%llu reads for the last 5 steps, %llu for all 561",
		     (unsigned long long)got.m.io_requests,
		     (unsigned long long)ref.m.io_requests);
}

/* A skip past the run's end names its last step; with a state of
 * another dataset, the state is refused as without a skip; nothing is
 * started either way. */
Test(skip, bad_skips_are_refused_by_name, .timeout = 60)
{
	const char *paths[] = { ids_dir() };
	const char *other[] = { tu_id_dataset(5000) };
	pf_loader_config cfg = id_config(paths);
	pf_error err;
	sk_blob st;

	cr_assert_eq(sk_create_fails(cfg, NULL, 0, 561, &err), -ERANGE);
	cr_assert(strstr(err.msg, "skip_steps: 561 steps") && strstr(err.msg, "global step 560"),
		  "%s", err.msg);
	cr_assert_eq(sk_create_fails(cfg, NULL, 0, UINT64_MAX, &err), -ERANGE);
	cr_assert(strstr(err.msg, "its last step is global step 560"), "%s", err.msg);
	cr_assert_eq(sk_create_fails(cfg, NULL, 0, 560, &err), 0, "%s", err.msg);
	st = sk_run(cfg, NULL, 0, 0, 100, NULL);
	cr_assert_eq(sk_create_fails(cfg, &st, 1, 461, &err), -ERANGE);
	cr_assert(strstr(err.msg, "from global step 100") && strstr(err.msg, "global step 560"),
		  "%s", err.msg);
	cfg.paths = other;
	cr_assert_eq(sk_create_fails(cfg, &st, 1, 10, &err), -ESTALE);
	cr_assert(strstr(err.msg, "another dataset"), "%s", err.msg);
	free(st.data);
}

/* ------------------------------------------------------------------ */
/* Packed                                                               */

static pf_loader_config packed_config(const char *const *paths, pf_pack_mode mode)
{
	return (pf_loader_config){ .paths = paths, .npaths = 1, .per_core_batch = 2,
				   .cores_per_host = 2,
				   .features = "tokens:int32[*],targets:int32[*]",
				   .pack_length = 96, .pack_mode = mode, .shuffle = true,
				   .shuffle_window = 256, .seed = 21, .epochs = 2, .threads = 2 };
}

/* Packed steps skipped from the start and from states inside and at the
 * end of an epoch, into the next: the batches of the run never stopped;
 * the metrics count the skipped rows' pieces and values. */
Test(skip, packed_loaders_skip_packed_steps, .timeout = 300)
{
	const char *d = pu_text_dataset(2000, 2, 40, 400, 8, 4, "16K");
	char z[512];
	const char *paths[] = { z };
	const uint64_t stops[] = { 0, 7, 40 };
	const uint64_t skips[] = { 1, 13, 60, 100 };

	snprintf(z, sizeof(z), "%s/z", d);
	for (int mode = 0; mode < 2; mode++) {
		pf_loader_config cfg = packed_config(paths, (pf_pack_mode)mode);

		check_skips_packed(cfg, stops, 3, skips, 4);
		cfg.num_hosts = 3;
		cfg.host_index = 1;
		check_skips_packed(cfg, stops, 2, skips + 1, 2);
	}
}

/* Four hosts' packed states resumed on two with a skip: the batches of
 * the same resume without it, n steps on. */
Test(skip, packed_elastic_resume_skips, .timeout = 300)
{
	const char *d = pu_text_dataset(2000, 2, 40, 400, 8, 4, "16K");
	char z[512];
	const char *paths[] = { z };
	sk_blob st[4];

	snprintf(z, sizeof(z), "%s/z", d);
	for (uint32_t h = 0; h < 4; h++) {
		pf_loader_config cfg = packed_config(paths, PF_PACK_FIRST_FIT);

		cfg.num_hosts = 4;
		cfg.host_index = h;
		st[h] = sk_run(cfg, NULL, 0, 0, 5 + h, NULL);
	}
	for (uint32_t h = 0; h < 2; h++) {
		pf_loader_config cfg = packed_config(paths, PF_PACK_FIRST_FIT);
		const uint64_t skips[] = { 1, 9, 30 };

		cfg.num_hosts = 2;
		cfg.host_index = h;
		free(sk_run(cfg, st, 4, 0, SK_ALL, &ref).data);
		for (size_t k = 0; k < 3; k++) {
			char what[64];

			if (skips[k] >= ref.n)
				continue;
			snprintf(what, sizeof(what), "packed, 4 -> 2 hosts, host %u, skip %llu", h,
				 (unsigned long long)skips[k]);
			free(sk_run(cfg, st, 4, skips[k], SK_ALL, &got).data);
			sk_expect_same(&ref, skips[k], &got, what);
		}
	}
	for (uint32_t h = 0; h < 4; h++)
		free(st[h].data);
}

/* ------------------------------------------------------------------ */
/* Mixed                                                                */

/* Three sources of ids (a small one of 600 that runs through several of
 * its epochs): source k's ids k * 100000 + [0, count). */
static const char *const *mix_dirs(void)
{
	static const char *dirs[3];
	static char keep[3][256];
	const uint64_t counts[3] = { 4000, 600, 1500 };

	for (int k = 0; k < 3 && !dirs[0]; k++)
		snprintf(keep[k], sizeof(keep[k]), "%s",
			 tu_id_shards((uint64_t)k * 100000, counts[k], 3, 2048));
	for (int k = 0; k < 3; k++)
		dirs[k] = keep[k];
	return dirs;
}

static pf_loader_source mix_src[3];
static const char *mix_paths[3][1];

static pf_loader_config mix_config(pf_mix mode)
{
	const char *const *dirs = mix_dirs();
	const double w[3] = { 0.6, 0.1, 0.3 };
	const char *names[3] = { "web", "small", "code" };

	for (int k = 0; k < 3; k++) {
		mix_paths[k][0] = dirs[k];
		mix_src[k] = (pf_loader_source){ .name = names[k], .paths = mix_paths[k],
						 .npaths = 1, .weight = w[k] };
	}
	return (pf_loader_config){ .sources = mix_src, .nsources = 3,
				   .features = "id:int64[1]", .source_feature = true,
				   .cores_per_host = 2, .per_core_batch = 8, .shuffle = true,
				   .shuffle_window = 64, .seed = 4, .epochs = 2, .threads = 2,
				   .mix = mode };
}

/* Stratified and sampled, on one host and as one of four: from the
 * start and from states, the batches of the run never stopped. */
Test(skip, mixtures_skip_their_steps, .timeout = 300)
{
	const uint64_t stops[] = { 0, 9, 100 };
	const uint64_t skips[] = { 1, 37, 150, 400 };

	for (int mode = 0; mode < 2; mode++) {
		pf_loader_config cfg = mix_config((pf_mix)mode);

		check_skips(cfg, stops, 3, skips, 4);
		cfg.num_hosts = 4;
		cfg.host_index = 3;
		check_skips(cfg, stops, 2, skips, 3);
	}
}

/* Four hosts' mixture states resumed on two (bridges: each source's
 * epoch's rest, then its later epochs; sampled: chains of them) with a
 * skip: the same resume without it, n steps on, across the bridges. */
Test(skip, mixtures_resumed_elastically_skip_across_their_bridges, .timeout = 300)
{
	for (int mode = 0; mode < 2; mode++) {
		sk_blob st[4];

		for (uint32_t h = 0; h < 4; h++) {
			pf_loader_config cfg = mix_config((pf_mix)mode);

			cfg.num_hosts = 4;
			cfg.host_index = h;
			st[h] = sk_run(cfg, NULL, 0, 0, 11 + 7 * h, NULL);
		}
		for (uint32_t h = 0; h < 2; h++) {
			pf_loader_config cfg = mix_config((pf_mix)mode);
			const uint64_t skips[] = { 1, 5, 40, 120 };

			cfg.num_hosts = 2;
			cfg.host_index = h;
			free(sk_run(cfg, st, 4, 0, SK_ALL, &ref).data);
			for (size_t k = 0; k < 4; k++) {
				char what[80];

				if (skips[k] >= ref.n)
					continue;
				snprintf(what, sizeof(what), "mix %s, 4 -> 2 hosts, host %u, skip %llu",
					 mode ? "sample" : "stratified", h,
					 (unsigned long long)skips[k]);
				free(sk_run(cfg, st, 4, skips[k], SK_ALL, &got).data);
				sk_expect_same(&ref, skips[k], &got, what);
				cr_assert_eq(got.m.skipped_steps, skips[k], "%s", what);
			}
		}
		for (uint32_t h = 0; h < 4; h++)
			free(st[h].data);
	}
}

/* A mixture's skip past its stop rule's end names its last step. */
Test(skip, a_mixture_refuses_a_skip_past_its_end, .timeout = 60)
{
	pf_loader_config cfg = mix_config(PF_MIX_STRATIFIED);
	pf_error err;

	free(sk_run(cfg, NULL, 0, 0, SK_ALL, &ref).data);
	cr_assert_eq(sk_create_fails(cfg, NULL, 0, ref.n, &err), -ERANGE);
	cr_assert(strstr(err.msg, "reach past the mixture's end"), "%s", err.msg);
	{
		char last[64];

		snprintf(last, sizeof(last), "global step %llu", (unsigned long long)(ref.n - 1));
		cr_assert(strstr(err.msg, last), "%s (want %s)", err.msg, last);
	}
	cr_assert_eq(sk_create_fails(cfg, NULL, 0, ref.n - 1, &err), 0, "%s", err.msg);
}
