/* SPDX-License-Identifier: Apache-2.0 */
/* The global shuffle (PF_SHUFFLE_GLOBAL): on shards sorted by label its
 * batches look like random draws from the whole dataset where the window
 * shuffle's do not (a chi-square test per batch, against batches of a
 * true random permutation); every record once an epoch, a new order each
 * epoch; equal steps and disjoint records on 1, 4 and 7 hosts; stream
 * files and unknown modes refused by name.  Resume with it is in
 * test_loader_resume.c. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "shuffle_util.h"
#include "testutil.h"

#define LABELS SU_LABELS

/* ids [0, n) in `shards` indexed shards, in order, frames of frame_size
 * bytes: with label = id * LABELS / n each shard holds one or two labels
 * (the dataset sorted by label, as a job's shards often are by source or
 * date). */
static const char *sorted_dataset(uint64_t n, uint32_t shards, size_t frame_size)
{
	return tu_id_shards(0, n, shards, frame_size);
}

/* A loader's ids, in order. */
typedef su_run run_ids;

static void collect(const char *dir, pf_loader_config cfg, run_ids *out)
{
	su_collect_ok(dir, cfg, out);
}

Test(shuffle, global_batches_pass_a_chi_square_as_random_ones_do_window_batches_fail,
     .timeout = 240)
{
	/* 40,000 records sorted by label in 16 shards (each one or two
	 * labels), frames of 64 KiB (about 1,800 records each, as frames of 1 MiB hold 1 KiB records); per-core
	 * batches of 32, the default window of 8192. */
	const uint64_t n = 40000;
	const char *d = sorted_dataset(n, 16, 65536);
	pf_loader_config cfg = { .per_core_batch = 32, .cores_per_host = 2, .seed = 5,
				 .epochs = 2, .shuffle = true, .threads = 2 };
	run_ids g, w;
	double rg, rw, rr;

	collect(d, cfg, &w);
	cfg.shuffle_mode = PF_SHUFFLE_GLOBAL;
	collect(d, cfg, &g);
	cr_assert_eq(g.n, w.n);
	/* Per core batch: what one core's step sees. */
	rg = su_pass_rate(g.ids, g.n, 32, n);
	rw = su_pass_rate(w.ids, w.n, 32, n);
	rr = su_random_pass_rate(n, g.n, 32);
	cr_log_info("chi-square pass rate per batch of 32: global %.3f, window %.3f, "
		    "random %.3f (%llu batches)", rg, rw, rr,
		    (unsigned long long)(g.n / 32));
	/* ~2,500 batches: a rate's standard error is about 0.005. */
	cr_assert_geq(rg, rr - 0.05, "global shuffle: %.3f of batches pass, random ones %.3f",
		      rg, rr);
	cr_assert_lt(rw, rr - 0.3, "window shuffle: %.3f of batches pass, random ones %.3f: "
		     "the test would not tell a global shuffle from it", rw, rr);
	free(g.ids);
	free(w.ids);
}

/* Every record of an epoch's len at most once (so, len of them). */
static void check_epoch(const uint64_t *ids, uint64_t len, uint64_t n, uint8_t *seen)
{
	memset(seen, 0, n);
	for (uint64_t i = 0; i < len; i++) {
		cr_assert_lt(ids[i], n);
		cr_assert_eq(seen[ids[i]]++, 0, "id %llu twice in an epoch",
			     (unsigned long long)ids[i]);
	}
}

Test(shuffle, global_every_record_once_an_epoch_and_a_new_order_each, .timeout = 120)
{
	/* Uneven shards, an empty one, frames of 2 KiB. */
	const uint64_t n = 5000;
	const char *d = tu_tmpdir();
	const uint64_t counts[] = { 1200, 7, 0, 2500, 393, 900 };
	pf_loader_config cfg = { .per_core_batch = 20, .seed = 9, .epochs = 3,
				 .shuffle_mode = PF_SHUFFLE_GLOBAL, .shuffle_window = 400,
				 .threads = 2 };
	uint8_t *seen = malloc(n);
	uint64_t id = 0, per_epoch;
	run_ids r;
	char p[512];

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		snprintf(p, sizeof(p), "%s/s%zu.tfrecord.zst", d, i);
		tu_write_id_shard(p, id, counts[i], 2048, 0);
		id += counts[i];
	}
	cr_assert_eq(id, n);
	collect(d, cfg, &r);
	per_epoch = n / 20 * 20;
	cr_assert_eq(r.n, 3 * per_epoch);
	for (int e = 0; e < 3; e++)
		check_epoch(r.ids + e * per_epoch, per_epoch, n, seen);
	/* Each epoch its own permutation: the first 100 ids differ. */
	cr_assert(memcmp(r.ids, r.ids + per_epoch, 100 * sizeof(*r.ids)) != 0);
	cr_assert(memcmp(r.ids + per_epoch, r.ids + 2 * per_epoch, 100 * sizeof(*r.ids)) != 0);
	/* And not the window shuffle's order. */
	{
		run_ids w;

		cfg.shuffle_mode = PF_SHUFFLE_WINDOW;
		cfg.shuffle = true;
		collect(d, cfg, &w);
		cr_assert_eq(w.n, r.n);
		cr_assert(memcmp(w.ids, r.ids, 100 * sizeof(*r.ids)) != 0);
		free(w.ids);
	}
	/* The same config, the same order (threads change nothing). */
	{
		run_ids again;

		cfg.shuffle_mode = PF_SHUFFLE_GLOBAL;
		cfg.shuffle = false;	/* global implies it */
		cfg.threads = 1;
		collect(d, cfg, &again);
		cr_assert_eq(again.n, r.n);
		cr_assert(memcmp(again.ids, r.ids, r.n * sizeof(*r.ids)) == 0);
		free(again.ids);
	}
	free(r.ids);
	free(seen);
}

Test(shuffle, global_hosts_1_4_7_equal_steps_disjoint_records, .timeout = 180)
{
	const uint64_t n = 9000;
	const char *d = sorted_dataset(n, 9, 4096);
	const uint32_t hosts[] = { 1, 4, 7 };
	uint8_t *seen = malloc(n);

	for (size_t k = 0; k < 3; k++) {
		uint32_t h = hosts[k];
		uint64_t steps = 0, got = 0, global = (uint64_t)h * 2 * 16;

		memset(seen, 0, n);
		for (uint32_t i = 0; i < h; i++) {
			pf_loader_config cfg = { .host_index = i, .num_hosts = h,
						 .cores_per_host = 2, .per_core_batch = 16,
						 .seed = 3, .shuffle_mode = PF_SHUFFLE_GLOBAL,
						 .threads = 2 };
			run_ids r;

			collect(d, cfg, &r);
			if (i == 0)
				steps = r.steps;
			cr_assert_eq(r.steps, steps, "%u hosts: host %u has %llu steps, host 0 "
				     "%llu", h, i, (unsigned long long)r.steps,
				     (unsigned long long)steps);
			for (uint64_t j = 0; j < r.n; j++) {
				cr_assert_eq(seen[r.ids[j]]++, 0, "%u hosts: id %llu on two hosts "
					     "(or twice)", h, (unsigned long long)r.ids[j]);
				got++;
			}
			free(r.ids);
		}
		cr_assert_eq(steps, n / global, "%u hosts", h);
		cr_assert_eq(got, n / global * global);
	}
	free(seen);
}

Test(shuffle, global_refuses_a_stream_file_by_name_and_unknown_modes, .timeout = 60)
{
	const char *d = tu_tmpdir();
	const char *paths[1] = { d };
	char p[512];
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .features = "id:int64[1]",
				 .per_core_batch = 8, .shuffle_mode = PF_SHUFFLE_GLOBAL };
	pf_loader *l = NULL;
	pf_error err;

	snprintf(p, sizeof(p), "%s/a.tfrecord.zst", d);
	tu_write_id_shard(p, 0, 100, 2048, 0);
	snprintf(p, sizeof(p), "%s/b.tfrecord", d);
	tu_write_id_stream(p, 100, 50, false);
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -EINVAL);
	cr_assert_null(l);
	cr_assert(strstr(err.msg, "shuffle=global needs indexed shards"), "%s", err.msg);
	cr_assert(strstr(err.file, "b.tfrecord"), "names %s", err.file);
	/* The window shuffle reads it. */
	cfg.shuffle_mode = PF_SHUFFLE_WINDOW;
	cfg.shuffle = true;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	pf_loader_free(l);
	l = NULL;
	cfg.shuffle_mode = (pf_shuffle_mode)7;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -EINVAL);
	cr_assert_null(l);
	cr_assert(strstr(err.msg, "shuffle_mode 7"), "%s", err.msg);
}

/* The run's first block is read in the order its outputs come out: the
 * first batch waits for the reads of its own rows, not for the whole
 * shuffle window's (on small shards behind a far bucket, every shard of
 * the window).  400 shards of one frame of 5 ids, a window of all 2,000,
 * every read delayed 50 ms, 4 reads in flight: read in stream order, the
 * first batch's 8 rows (scattered over the window by its permutation)
 * would wait for nearly all 400 reads; here for about 8.  Counted in
 * bytes read when the first batch is handed out, against an epoch's
 * (every frame): less than a quarter (the I/O thread goes on reading
 * meanwhile, 80 reads a second, while the consumer wakes), for both
 * shuffles, and the batch is the one a run without delays hands out. */
static void first_batch_reads(pf_shuffle_mode mode)
{
	const char *d = tu_tmpdir();
	const char *paths[1] = { d };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .features = "id:int64[1]",
				 .per_core_batch = 8, .seed = 3, .shuffle = true,
				 .shuffle_mode = mode, .shuffle_window = 2000, .threads = 2,
				 .io_depth = 4, .max_steps = 1 };
	uint64_t total = 0, first[8];
	pf_loader_metrics m;
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	char p[512];

	for (uint32_t s = 0; s < 400; s++) {
		snprintf(p, sizeof(p), "%s/s%03u.tfrecord.zst", d, s);
		tu_write_id_shard(p, 5 * s, 5, 4096, 0);
	}
	/* The epoch, without delays: its first batch, and the bytes of
	 * every frame (all in the one block). */
	cfg.max_steps = 0;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_loader_next(l, &b), 1);
	memcpy(first, b->core[0].tensors[0].data, sizeof(first));
	pf_loader_release(l, b);
	while (pf_loader_next(l, &b) == 1)
		pf_loader_release(l, b);
	pf_loader_get_metrics(l, &m);
	total = m.bytes_read;
	pf_loader_free(l);
	cfg.max_steps = 1;
	cfg.io_faults = "delay=50ms:1";
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_loader_next(l, &b), 1);
	pf_loader_get_metrics(l, &m);
	cr_assert(memcmp(first, b->core[0].tensors[0].data, sizeof(first)) == 0,
		  "the order of the reads changed the batch");
	pf_loader_release(l, b);
	pf_loader_free(l);
	cr_log_info("%s shuffle: %llu of the epoch's %llu bytes read at the first batch",
		    mode == PF_SHUFFLE_GLOBAL ? "global" : "window",
		    (unsigned long long)m.bytes_read, (unsigned long long)total);
	cr_assert_lt(m.bytes_read, total / 4, "%s shuffle: %llu of %llu bytes read before the "
		     "first batch", mode == PF_SHUFFLE_GLOBAL ? "global" : "window",
		     (unsigned long long)m.bytes_read, (unsigned long long)total);
}

Test(shuffle, first_batch_waits_for_its_own_rows_reads_not_the_window, .timeout = 120)
{
	first_batch_reads(PF_SHUFFLE_WINDOW);
	first_batch_reads(PF_SHUFFLE_GLOBAL);
}
