/* SPDX-License-Identifier: Apache-2.0 */
/* pf_loader_records_of(): the file and record number it names for each
 * row of a step hold the record the loader delivers there (read back
 * from the file), for every step of runs on one host and four, shuffled
 * by window and globally, with stream files, resumed and elastically
 * resumed, skipped (the skipped steps name what a run never stopped
 * delivered), packed and mixed; steps outside the run are refused by
 * name; a plan-only loader says the same without reading. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "pack_util.h"
#include "skip_util.h"
#include "testutil.h"

/* Uneven indexed shards in small frames and two stream files (plain,
 * gzip): ids 0 .. 5089. */
static const char *mixed_dir(void)
{
	static char dir[256];
	const uint64_t counts[] = { 1200, 7, 0, 2500, 333 };
	char p[600];
	uint64_t id = 0;

	if (dir[0])
		return dir;
	snprintf(dir, sizeof(dir), "%s", tu_tmpdir());
	for (size_t i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "%s/s%02zu.tfrecord.zst", dir, i);
		tu_write_id_shard(p, id, counts[i], 2048, 0);
		id += counts[i];
	}
	snprintf(p, sizeof(p), "%s/t0.tfrecord", dir);
	tu_write_id_stream(p, id, 600, false);
	id += 600;
	snprintf(p, sizeof(p), "%s/t1.tfrecord.gz", dir);
	tu_write_id_stream(p, id, 450, true);
	return dir;
}

static sk_steps run_steps, ref;

/* A loader of cfg (from the states), its run kept, and records_of of
 * every step it delivered checked against what it delivered. */
static void check_run(pf_loader_config cfg, const sk_blob *from, size_t nfrom, uint64_t skip,
		      const char *what)
{
	pf_state_blob sb[8];
	pf_loader *l;
	pf_error err;

	free(sk_run(cfg, from, nfrom, skip, SK_ALL, &run_steps).data);
	cr_assert_gt(run_steps.n, 0, "%s", what);
	for (size_t i = 0; i < nfrom; i++)
		sb[i] = (pf_state_blob){ from[i].data, from[i].len };
	cfg.resume = nfrom ? sb : NULL;
	cfg.nresume = nfrom;
	cfg.skip_steps = skip;
	cfg.plan_only = true;	/* the same answers, nothing read */
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s: %s", what, err.msg);
	sk_expect_records(l, &run_steps, what);
	pf_loader_free(l);
}

Test(which, every_step_of_a_run_names_what_it_delivers, .timeout = 240)
{
	const char *paths[] = { mixed_dir() };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .features = "id:int64[1]",
				 .cores_per_host = 2, .per_core_batch = 16, .shuffle = true,
				 .shuffle_window = 300, .seed = 9, .epochs = 2, .threads = 2 };

	check_run(cfg, NULL, 0, 0, "one host, window shuffle");
	cfg.shuffle = false;
	check_run(cfg, NULL, 0, 0, "one host, no shuffle");
	cfg.shuffle = true;
	cfg.remainder = PF_REMAINDER_WRAP;
	for (uint32_t h = 0; h < 4; h++) {
		cfg.num_hosts = 4;
		cfg.host_index = h;
		check_run(cfg, NULL, 0, 0, "four hosts, wrapped");
	}
}

Test(which, the_global_shuffle_names_its_slices, .timeout = 120)
{
	const char *paths[] = { tu_id_shards(0, 6000, 6, 2048) };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .features = "id:int64[1]",
				 .cores_per_host = 2, .per_core_batch = 16,
				 .shuffle_mode = PF_SHUFFLE_GLOBAL, .seed = 3, .epochs = 2,
				 .threads = 2 };

	check_run(cfg, NULL, 0, 0, "global shuffle");
	cfg.num_hosts = 3;
	cfg.host_index = 2;
	check_run(cfg, NULL, 0, 0, "global shuffle, host 2 of 3");
}

/* Resumed, skipped, and resumed elastically: the steps the run delivers
 * are named; the steps it skipped too (as the run never stopped
 * delivered them). */
Test(which, resumed_and_skipped_runs_name_their_steps, .timeout = 240)
{
	const char *paths[] = { mixed_dir() };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .features = "id:int64[1]",
				 .cores_per_host = 2, .per_core_batch = 16, .shuffle = true,
				 .shuffle_window = 300, .seed = 9, .epochs = 3, .threads = 2 };
	sk_blob st, four[4];
	pf_loader *l;
	pf_error err;
	pf_state_blob sb;

	st = sk_run(cfg, NULL, 0, 0, 50, NULL);
	check_run(cfg, &st, 1, 0, "resumed at step 50");
	check_run(cfg, &st, 1, 170, "resumed at step 50, 170 skipped");
	check_run(cfg, NULL, 0, 200, "200 skipped from the start");
	/* The skipped steps: what the run never stopped delivered there. */
	free(sk_run(cfg, NULL, 0, 0, SK_ALL, &ref).data);
	sb = (pf_state_blob){ st.data, st.len };
	cfg.resume = &sb;
	cfg.nresume = 1;
	cfg.skip_steps = 170;
	cfg.plan_only = true;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	{
		sk_steps *skipped = calloc(1, sizeof(*skipped));

		cr_assert_not_null(skipped);
		*skipped = ref;
		skipped->ids = ref.ids;
		memmove(skipped->crc, ref.crc + 50, 170 * sizeof(ref.crc[0]));
		memmove(skipped->global, ref.global + 50, 170 * sizeof(ref.global[0]));
		memmove(skipped->epoch, ref.epoch + 50, 170 * sizeof(ref.epoch[0]));
		memmove(skipped->step, ref.step + 50, 170 * sizeof(ref.step[0]));
		skipped->ids = ref.ids + 50 * ref.host_batch;
		skipped->n = 170;
		sk_expect_records(l, skipped, "the skipped steps");
		free(skipped);
	}
	/* Before the run's first step (the state's), and past its last. */
	cr_assert_eq(pf_loader_records_of(l, 49, NULL, 0, &err), -ERANGE);
	cr_assert(strstr(err.msg, "step 49") && strstr(err.msg, "global steps 50 to"),
		  "%s", err.msg);
	cr_assert_eq(pf_loader_records_of(l, ref.n, NULL, 0, &err), -ERANGE);
	cr_assert_eq(pf_loader_records_of(l, ref.n - 1, NULL, 0, &err), 32);
	pf_loader_free(l);
	cfg.resume = NULL;
	cfg.nresume = 0;
	cfg.skip_steps = 0;
	cfg.plan_only = false;
	free(st.data);

	/* Four hosts' states, resumed on two. */
	for (uint32_t h = 0; h < 4; h++) {
		pf_loader_config c = cfg;

		c.num_hosts = 4;
		c.host_index = h;
		four[h] = sk_run(c, NULL, 0, 0, 5 + 3 * h, NULL);
	}
	for (uint32_t h = 0; h < 2; h++) {
		cfg.num_hosts = 2;
		cfg.host_index = h;
		check_run(cfg, four, 4, 0, "four hosts resumed on two");
		check_run(cfg, four, 4, 30, "four hosts resumed on two, 30 skipped");
	}
	for (uint32_t h = 0; h < 4; h++)
		free(four[h].data);
}

/* ------------------------------------------------------------------ */
/* Packed                                                               */

/* A packed run of cfg (from the states, skipping): each piece
 * records_of() names for each step is in its row, with its segment id,
 * and the pieces cover every value of the rows. */
static void check_packed(pf_loader_config cfg, const sk_blob *from, size_t nfrom,
			 uint64_t skip, const char *what)
{
	pf_state_blob sb[8];
	pf_loader *l;
	pf_error err;

	run_steps.keep_rows = true;
	free(sk_run(cfg, from, nfrom, skip, SK_ALL, &run_steps).data);
	cr_assert_gt(run_steps.n, 0, "%s", what);
	for (size_t i = 0; i < nfrom; i++)
		sb[i] = (pf_state_blob){ from[i].data, from[i].len };
	cfg.resume = nfrom ? sb : NULL;
	cfg.nresume = nfrom;
	cfg.skip_steps = skip;
	cfg.plan_only = true;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s: %s", what, err.msg);
	sk_expect_packed(l, &run_steps, "tokens", what);
	pf_loader_free(l);
	run_steps.keep_rows = false;
}

Test(which, packed_steps_name_their_pieces, .timeout = 300)
{
	const char *d = pu_text_dataset(1500, 2, 40, 400, 8, 3, "16K");
	char z[512];
	const char *paths[] = { z };
	sk_blob st, four[4];

	snprintf(z, sizeof(z), "%s/z", d);
	for (int mode = 0; mode < 2; mode++) {
		pf_loader_config cfg = {
			.paths = paths, .npaths = 1, .per_core_batch = 2, .cores_per_host = 2,
			.features = "tokens:int32[*],targets:int32[*]", .pack_length = 96,
			.pack_mode = (pf_pack_mode)mode, .shuffle = true, .shuffle_window = 256,
			.seed = 21, .epochs = 2, .threads = 2 };

		check_packed(cfg, NULL, 0, 0, mode ? "concat" : "first_fit");
		st = sk_run(cfg, NULL, 0, 0, 30, NULL);
		check_packed(cfg, &st, 1, 0, "resumed at 30");
		check_packed(cfg, &st, 1, 50, "resumed at 30, 50 skipped");
		free(st.data);
		cfg.num_hosts = 3;
		cfg.host_index = 2;
		check_packed(cfg, NULL, 0, 0, "host 2 of 3");
		if (mode)
			continue;
		for (uint32_t h = 0; h < 4; h++) {
			cfg.num_hosts = 4;
			cfg.host_index = h;
			four[h] = sk_run(cfg, NULL, 0, 0, 4 + h, NULL);
		}
		cfg.num_hosts = 2;
		cfg.host_index = 1;
		check_packed(cfg, four, 4, 0, "packed, four hosts resumed on two");
		check_packed(cfg, four, 4, 10, "packed, four hosts resumed on two, 10 skipped");
		for (uint32_t h = 0; h < 4; h++)
			free(four[h].data);
	}
}

/* A packed mixture: three text sources, each piece of every step
 * named (its source's file and record) by a plan-only loader, which
 * reads no record: fresh, resumed, skipped, one host of three, four
 * hosts resumed on two (elastic), both modes and both mixes. */
Test(which, packed_mixture_steps_name_their_pieces, .timeout = 300)
{
	static char dirs[3][512];
	static const char *paths[3][1];
	pf_loader_source src[3];
	const double w[3] = { 0.5, 0.3, 0.2 };

	for (int k = 0; k < 3; k++) {
		snprintf(dirs[k], sizeof(dirs[k]), "%s/z",
			 pu_text_dataset(600 - 150 * (unsigned)k, 2, 30 + 30 * (unsigned)k, 300,
					 7 + (unsigned)k, 2, "16K"));
		paths[k][0] = dirs[k];
		src[k] = (pf_loader_source){ .paths = paths[k], .npaths = 1, .weight = w[k] };
	}
	for (int mode = 0; mode < 4; mode++) {
		pf_loader_config cfg = {
			.sources = src, .nsources = 3, .per_core_batch = 2, .cores_per_host = 2,
			.features = "tokens:int32[*]", .pack_length = 128,
			.pack_mode = (pf_pack_mode)(mode & 1), .mix = (pf_mix)(mode >> 1),
			.shuffle = true, .shuffle_window = 128, .seed = 4, .threads = 2 };
		pf_loader_metrics m;
		sk_blob st;
		pf_loader *l;
		pf_error err;

		check_packed(cfg, NULL, 0, 0, "packed mixture");
		st = sk_run(cfg, NULL, 0, 0, 9, NULL);
		check_packed(cfg, &st, 1, 0, "packed mixture resumed at 9");
		check_packed(cfg, &st, 1, 20, "packed mixture resumed at 9, 20 skipped");
		free(st.data);
		cfg.num_hosts = 3;
		cfg.host_index = 1;
		check_packed(cfg, NULL, 0, 0, "packed mixture, host 1 of 3");
		/* Four hosts' states (each at its own step) resumed on two:
		 * an elastic resume, and a skip after it. */
		if (mode == 0 || mode == 3) {
			sk_blob four[4];

			for (uint32_t h = 0; h < 4; h++) {
				cfg.num_hosts = 4;
				cfg.host_index = h;
				four[h] = sk_run(cfg, NULL, 0, 0, 4 + h, NULL);
			}
			cfg.num_hosts = 2;
			cfg.host_index = 1;
			check_packed(cfg, four, 4, 0, "packed mixture, four hosts resumed on two");
			check_packed(cfg, four, 4, 10, "packed mixture, four on two, 10 skipped");
			for (uint32_t h = 0; h < 4; h++)
				free(four[h].data);
			cfg.num_hosts = 3;
			cfg.host_index = 1;
		}
		/* A plan alone reads no record (the lengths: the indexes). */
		cfg.plan_only = true;
		cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
		pf_loader_get_metrics(l, &m);
		cr_assert_eq(m.bytes_read + m.bytes_decompressed + m.io_requests, 0,
			     "a plan-only loader read %llu bytes (%llu requests), decompressed %llu",
			     (unsigned long long)m.bytes_read, (unsigned long long)m.io_requests,
			     (unsigned long long)m.bytes_decompressed);
		cr_assert_gt(pf_loader_records_of(l, 0, NULL, 0, &err), 0, "%s", err.msg);
		pf_loader_free(l);
	}
}

/* ------------------------------------------------------------------ */
/* Mixed                                                                */

static pf_loader_source msrc[3];
static const char *mpaths[3][1];

static pf_loader_config mixture(pf_mix mode)
{
	static char dirs[3][256];
	const uint64_t counts[3] = { 3000, 500, 1200 };
	const double w[3] = { 0.5, 0.2, 0.3 };

	for (int k = 0; k < 3; k++) {
		if (!dirs[k][0])
			snprintf(dirs[k], sizeof(dirs[k]), "%s",
				 tu_id_shards((uint64_t)k * 100000, counts[k], 2, 2048));
		mpaths[k][0] = dirs[k];
		msrc[k] = (pf_loader_source){ .paths = mpaths[k], .npaths = 1, .weight = w[k] };
	}
	return (pf_loader_config){ .sources = msrc, .nsources = 3, .features = "id:int64[1]",
				   .cores_per_host = 2, .per_core_batch = 8, .shuffle = true,
				   .shuffle_window = 64, .seed = 6, .epochs = 2, .threads = 2,
				   .mix = mode };
}

/* Each row names its source's file and record: fresh, resumed, skipped,
 * on one host of three, and four hosts resumed on two (the bridges). */
Test(which, mixed_steps_name_each_rows_source_and_record, .timeout = 300)
{
	for (int mode = 0; mode < 2; mode++) {
		pf_loader_config cfg = mixture((pf_mix)mode);
		sk_blob st, four[4];

		check_run(cfg, NULL, 0, 0, mode ? "sampled" : "stratified");
		st = sk_run(cfg, NULL, 0, 0, 20, NULL);
		check_run(cfg, &st, 1, 0, "mixture resumed at 20");
		check_run(cfg, &st, 1, 33, "mixture resumed at 20, 33 skipped");
		free(st.data);
		cfg.num_hosts = 3;
		cfg.host_index = 1;
		check_run(cfg, NULL, 0, 0, "mixture, host 1 of 3");
		for (uint32_t h = 0; h < 4; h++) {
			cfg.num_hosts = 4;
			cfg.host_index = h;
			four[h] = sk_run(cfg, NULL, 0, 0, 6 + 5 * h, NULL);
		}
		for (uint32_t h = 0; h < 2; h++) {
			cfg.num_hosts = 2;
			cfg.host_index = h;
			check_run(cfg, four, 4, 0, "mixture, four hosts resumed on two");
			check_run(cfg, four, 4, 25, "mixture, four hosts on two, 25 skipped");
		}
		for (uint32_t h = 0; h < 4; h++)
			free(four[h].data);
	}
}
