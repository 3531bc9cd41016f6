/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint and resume: the same batches after a resume at the same
 * topology; every record of the epoch once across a resize; clear errors
 * for states of another dataset, corrupt, truncated or from the future;
 * and a consumer killed with SIGKILL at random points. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "podfeed.h"
#include "kill_util.h"
#include "testutil.h"


/* Uneven indexed shards with small frames, and (streams) a plain and a
 * gzip stream: ids 0 .. *nids-1. */
static const char *dataset_of(uint64_t *nids, bool streams)
{
	const char *d = tu_tmpdir();
	const uint64_t counts[] = { 1200, 7, 0, 2500, 333, 900 };
	char p[512];
	uint64_t id = 0;

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		snprintf(p, sizeof(p), "%s/s%02zu.tfrecord.zst", d, i);
		tu_write_id_shard(p, id, counts[i], 2048, 0);
		id += counts[i];
	}
	*nids = id;
	if (!streams)
		return d;
	snprintf(p, sizeof(p), "%s/t0.tfrecord", d);
	tu_write_id_stream(p, id, 700, false);
	id += 700;
	snprintf(p, sizeof(p), "%s/t1.tfrecord.gz", d);
	tu_write_id_stream(p, id, 450, true);
	id += 450;
	*nids = id;
	return d;
}

static const char *dataset(uint64_t *nids)
{
	return dataset_of(nids, true);
}

typedef struct blob {
	uint8_t *data;
	size_t len;
} blob;

typedef struct steps {
	uint64_t n;
	uint32_t crc[4096];	/* of every core block of the step */
	uint64_t global[4096];
	uint32_t epoch[4096];
	uint64_t step[4096];
	uint64_t *ids;		/* every id handed out, in order */
	uint64_t nids;
	uint64_t dropped, wrapped;	/* the runs' remainder metrics, summed */
} steps;

static blob save(pf_loader *l)
{
	int64_t n = pf_loader_save_state(l, NULL, 0);
	blob b = { NULL, 0 };

	cr_assert_gt(n, 0);
	b.data = malloc((size_t)n);
	cr_assert_not_null(b.data);
	cr_assert_eq(pf_loader_save_state(l, b.data, (size_t)n), n);
	b.len = (size_t)n;
	return b;
}

/* Run cfg (from the given states) for at most max steps (ALL: to the
 * end; 0: none, the state is saved right after creation), appending to
 * *s; @return the state after. */
#define ALL UINT64_MAX
static blob run(const char *dir, pf_loader_config cfg, const blob *from, size_t nfrom,
		uint64_t max, steps *s)
{
	const char *paths[1] = { dir };
	pf_state_blob sb[8];
	pf_loader_metrics m;
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	blob out;
	int ret = 0;

	for (size_t i = 0; i < nfrom; i++)
		sb[i] = (pf_state_blob){ from[i].data, from[i].len };
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.features = "id:int64[1]";
	cfg.max_steps = max == ALL ? 0 : max;
	cfg.resume = nfrom ? sb : NULL;
	cfg.nresume = nfrom;
	pf_error_clear(&err);
	ret = pf_loader_create(&l, &cfg, &err);
	cr_assert_eq(ret, 0, "create: %s", err.msg);
	while (max && (ret = pf_loader_next(l, &b)) == 1) {
		uint32_t crc = 0;

		cr_assert_lt(s->n, 4096);
		for (uint32_t c = 0; c < b->cores; c++) {
			const int64_t *ids = b->core[c].tensors[0].data;

			crc = pf_crc32c(crc, b->core[c].block, b->core[c].block_bytes);
			s->ids = realloc(s->ids, (s->nids + b->per_core_batch) * sizeof(*s->ids));
			for (uint32_t i = 0; i < b->per_core_batch; i++)
				s->ids[s->nids++] = (uint64_t)ids[i];
		}
		s->crc[s->n] = crc;
		s->global[s->n] = b->global_step;
		s->epoch[s->n] = b->epoch;
		s->step[s->n] = b->step;
		s->n++;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "next: %s", ret < 0 ? pf_loader_last_error(l)->msg : "");
	pf_loader_get_metrics(l, &m);
	s->dropped += m.remainder_dropped;
	s->wrapped += m.remainder_wrapped;
	out = save(l);
	pf_loader_free(l);
	return out;
}

static void steps_free(steps *s)
{
	free(s->ids);
	memset(s, 0, sizeof(*s));
}

/* Stop after k steps, save, go on from the state: the steps after are
 * those of the run never stopped, with the same numbers. */
static void check_exact(const char *d, pf_loader_config cfg, const uint64_t *stops,
			size_t nstops)
{
	static steps ref, a, b;
	blob st;

	memset(&ref, 0, sizeof(ref));
	free(run(d, cfg, NULL, 0, ALL, &ref).data);
	cr_assert_gt(ref.n, 0);
	for (size_t i = 0; i < nstops; i++) {
		uint64_t k = stops[i];

		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		st = run(d, cfg, NULL, 0, k, &a);
		cr_assert_eq(a.n, k < ref.n ? k : ref.n);
		free(run(d, cfg, &st, 1, ALL, &b).data);
		cr_assert_eq(a.n + b.n, ref.n, "stop at %llu: %llu + %llu steps, not %llu",
			     (unsigned long long)k, (unsigned long long)a.n,
			     (unsigned long long)b.n, (unsigned long long)ref.n);
		/* Each epoch's remainder is in the report of the run that ends
		 * it: the two runs' add up to the unstopped run's.  (k = 0 is
		 * a loader with no step limit freed at once, whose I/O thread
		 * may have planned epochs, and counted them, already.) */
		if (k) {
			cr_assert_eq(a.dropped + b.dropped, ref.dropped, "stop at %llu: "
				     "dropped %llu + %llu, not %llu", (unsigned long long)k,
				     (unsigned long long)a.dropped, (unsigned long long)b.dropped,
				     (unsigned long long)ref.dropped);
			cr_assert_eq(a.wrapped + b.wrapped, ref.wrapped, "stop at %llu: "
				     "wrapped %llu + %llu, not %llu", (unsigned long long)k,
				     (unsigned long long)a.wrapped, (unsigned long long)b.wrapped,
				     (unsigned long long)ref.wrapped);
		}
		for (uint64_t j = 0; j < b.n; j++) {
			cr_assert_eq(b.crc[j], ref.crc[k + j], "stop at %llu: step %llu differs",
				     (unsigned long long)k, (unsigned long long)(k + j));
			cr_assert_eq(b.global[j], ref.global[k + j]);
			cr_assert_eq(b.epoch[j], ref.epoch[k + j]);
			cr_assert_eq(b.step[j], ref.step[k + j]);
		}
		free(st.data);
		steps_free(&a);
		steps_free(&b);
	}
	steps_free(&ref);
}

Test(resume, same_topology_gives_the_batches_of_a_run_never_stopped, .timeout = 240)
{
	uint64_t nids;
	const char *d = dataset(&nids);
	/* 6090 records; host 1 of 3, 2 cores x 16: 63 steps an epoch. */
	pf_loader_config cfg = { .host_index = 1, .num_hosts = 3, .cores_per_host = 2,
				 .per_core_batch = 16, .shuffle = true,
				 .shuffle_window = 300, .seed = 7, .epochs = 3, .threads = 2 };
	const uint64_t stops[] = { 0, 1, 9, 62, 63, 64, 100, 188, 189, 1000 };

	check_exact(d, cfg, stops, sizeof(stops) / sizeof(stops[0]));
	/* One host, no shuffle; and a window that is not whole batches. */
	cfg = (pf_loader_config){ .per_core_batch = 50, .epochs = 2, .threads = 1 };
	check_exact(d, cfg, stops, 6);
	cfg = (pf_loader_config){ .cores_per_host = 3, .per_core_batch = 7, .shuffle = true,
				  .shuffle_window = 100, .seed = 1, .epochs = 2 };
	check_exact(d, cfg, stops, 8);
}

/* A resumed run reports the remainder of the epoch it finishes: at the
 * same topology (drop and wrap), and when the epoch in progress was cut
 * from another topology's streams (2 hosts resumed on 1, stopped, resumed
 * again). */
Test(resume, the_run_that_ends_an_epoch_reports_its_remainder, .timeout = 120)
{
	uint64_t nids;
	const char *d = dataset(&nids);
	/* (check_exact() checks the dropped remainder at every stop of the
	 * tests above; here the wrapped one.) */
	const uint64_t stops[] = { 30 };
	pf_loader_config cfg = { .per_core_batch = 64, .threads = 2, .epochs = 2,
				 .remainder = PF_REMAINDER_WRAP };
	static steps ref, h[2], x, y;
	blob st[2], mid;

	check_exact(d, cfg, stops, 1);

	/* 6090 records: 2 hosts x 64 take 47 steps each (6016), 74 dropped. */
	for (uint32_t i = 0; i < 2; i++) {
		pf_loader_config c = { .host_index = i, .num_hosts = 2, .per_core_batch = 64,
				       .threads = 2, .epochs = 1 };

		memset(&h[i], 0, sizeof(h[i]));
		st[i] = run(d, c, NULL, 0, 10, &h[i]);
		cr_assert_eq(h[i].dropped, 0);
	}
	cfg = (pf_loader_config){ .per_core_batch = 64, .threads = 2, .epochs = 1 };
	memset(&ref, 0, sizeof(ref));
	free(run(d, cfg, st, 2, ALL, &ref).data);
	/* 6016 - 1280 = 4736 left: 74 steps of 64 exactly, none dropped; plus
	 * nothing from the unfinished stream. */
	cr_assert_eq(ref.n, 74);
	memset(&x, 0, sizeof(x));
	memset(&y, 0, sizeof(y));
	cfg.per_core_batch = 100;
	mid = run(d, cfg, st, 2, 3, &x);
	free(run(d, cfg, &mid, 1, ALL, &y).data);
	cr_assert_eq(x.n + y.n, 47);	/* 4736 / 100 */
	cr_assert_eq(x.dropped, 0);
	cr_assert_eq(y.dropped, 36, "the resumed epoch's 4736 - 4700");
	for (int i = 0; i < 2; i++) {
		free(st[i].data);
		steps_free(&h[i]);
	}
	free(mid.data);
	steps_free(&ref);
	steps_free(&x);
	steps_free(&y);
}

Test(resume, a_resumed_run_saves_and_resumes_again, .timeout = 120)
{
	uint64_t nids;
	const char *d = dataset(&nids);
	pf_loader_config cfg = { .cores_per_host = 2, .per_core_batch = 16, .shuffle = true,
				 .shuffle_window = 256, .seed = 3, .epochs = 2, .threads = 2 };
	static steps ref, s;
	blob a, b;

	free(run(d, cfg, NULL, 0, ALL, &ref).data);
	a = run(d, cfg, NULL, 0, 40, &s);
	b = run(d, cfg, &a, 1, 70, &s);		/* into epoch 1 */
	free(run(d, cfg, &b, 1, ALL, &s).data);
	cr_assert_eq(s.n, ref.n);
	for (uint64_t j = 0; j < ref.n; j++)
		cr_assert_eq(s.crc[j], ref.crc[j], "step %llu", (unsigned long long)j);
	free(a.data);
	free(b.data);
	steps_free(&ref);
	steps_free(&s);
}

/* hosts_a loaders run each its own number of steps into epoch 0 and
 * save; hosts_b loaders (host batch cores_b x pcb_b) resume from all
 * the states and finish the epoch, then run one more.  Epoch 0: every id
 * at most once, and the missing ones exactly the two remainders.  Epoch
 * 1: a fresh epoch of the new topology. */
static void check_resize_mode(uint32_t hosts_a, uint32_t cores_a, uint32_t pcb_a,
			      uint32_t hosts_b, uint32_t cores_b, uint32_t pcb_b,
			      const uint64_t *stop_a, pf_shuffle_mode mode)
{
	uint64_t nids;
	/* The global shuffle reads indexed shards only. */
	const char *d = dataset_of(&nids, mode != PF_SHUFFLE_GLOBAL);
	static steps s[16];
	blob st[16];
	uint8_t *seen = calloc(nids, 1), *seen1 = calloc(nids, 1);
	uint64_t ba = (uint64_t)cores_a * pcb_a, bb = (uint64_t)cores_b * pcb_b;
	uint64_t quota_a = nids / (ba * hosts_a) * ba, delivered = 0, got = 0;
	uint64_t steps_b = UINT64_MAX, m, quota_b;

	for (uint32_t h = 0; h < hosts_a; h++) {
		pf_loader_config cfg = { .host_index = h, .num_hosts = hosts_a,
					 .cores_per_host = cores_a, .per_core_batch = pcb_a,
					 .shuffle = true, .shuffle_window = 200, .seed = 11,
					 .epochs = 2, .threads = 2, .shuffle_mode = mode };

		memset(&s[h], 0, sizeof(s[h]));
		st[h] = run(d, cfg, NULL, 0, stop_a[h], &s[h]);
		cr_assert_eq(s[h].n, stop_a[h]);
		for (uint64_t i = 0; i < s[h].nids; i++) {
			cr_assert_eq(seen[s[h].ids[i]]++, 0, "id %llu twice",
				     (unsigned long long)s[h].ids[i]);
		}
		delivered += s[h].nids;
	}
	m = hosts_a * quota_a - delivered;
	quota_b = m / (bb * hosts_b) * bb;
	for (uint32_t h = 0; h < hosts_b; h++) {
		pf_loader_config cfg = { .host_index = h, .num_hosts = hosts_b,
					 .cores_per_host = cores_b, .per_core_batch = pcb_b,
					 .shuffle = true, .shuffle_window = 200, .seed = 11,
					 .epochs = 2, .threads = 2, .shuffle_mode = mode };
		steps *r = &s[hosts_a + h];
		uint64_t e0 = 0;

		memset(r, 0, sizeof(*r));
		free(run(d, cfg, st, hosts_a, ALL, r).data);
		for (uint64_t j = 0; j < r->n && r->epoch[j] == 0; j++)
			e0++;
		cr_assert_eq(e0, quota_b / bb, "new host %u: %llu steps left of epoch 0, "
			     "expected %llu", h, (unsigned long long)e0,
			     (unsigned long long)(quota_b / bb));
		for (uint64_t j = 0; j < e0; j++)
			cr_assert_eq(r->global[j], r->global[0] + j);
		for (uint64_t i = 0; i < r->nids; i++) {
			uint8_t *sv = i < e0 * bb ? seen : seen1;

			cr_assert_eq(sv[r->ids[i]]++, 0, "id %llu twice in epoch %d",
				     (unsigned long long)r->ids[i], i < e0 * bb ? 0 : 1);
		}
		steps_b = steps_b < r->n - e0 ? steps_b : r->n - e0;
		cr_assert_eq(r->n - e0, nids / (bb * hosts_b), "epoch 1 of the new topology");
	}
	for (uint64_t i = 0; i < nids; i++)
		got += seen[i];
	cr_assert_eq(nids - got, (nids - hosts_a * quota_a) + (m - hosts_b * quota_b),
		     "epoch 0: %llu of %llu ids delivered", (unsigned long long)got,
		     (unsigned long long)nids);
	got = 0;
	for (uint64_t i = 0; i < nids; i++)
		got += seen1[i];
	cr_assert_eq(got, steps_b * bb * hosts_b);
	for (uint32_t h = 0; h < hosts_a; h++)
		free(st[h].data);
	for (uint32_t h = 0; h < hosts_a + hosts_b; h++)
		steps_free(&s[h]);
	free(seen);
	free(seen1);
}

static void check_resize(uint32_t hosts_a, uint32_t cores_a, uint32_t pcb_a,
			 uint32_t hosts_b, uint32_t cores_b, uint32_t pcb_b,
			 const uint64_t *stop_a)
{
	check_resize_mode(hosts_a, cores_a, pcb_a, hosts_b, cores_b, pcb_b, stop_a,
			  PF_SHUFFLE_WINDOW);
}

Test(resume, four_hosts_to_two_delivers_the_rest_of_the_epoch_once, .timeout = 120)
{
	const uint64_t stop[] = { 10, 10, 10, 10 };
	const uint64_t uneven[] = { 3, 17, 0, 25 };

	check_resize(4, 2, 16, 2, 2, 16, stop);
	check_resize(4, 2, 16, 2, 2, 16, uneven);
}

Test(resume, two_hosts_to_three_and_another_host_batch, .timeout = 120)
{
	const uint64_t stop[] = { 21, 5 };

	check_resize(2, 2, 16, 3, 2, 16, stop);
	/* Batches of 24 after batches of 32: pieces no longer start on
	 * whole batches. */
	check_resize(2, 2, 16, 3, 1, 24, stop);
	check_resize(3, 1, 24, 1, 4, 5, (const uint64_t[]){ 7, 50, 1 });
}

/* The global shuffle (PF_SHUFFLE_GLOBAL): its place is in the state as
 * the window shuffle's is, bit for bit at the same topology, nothing
 * repeated and less than a global batch lost on another. */
Test(resume, global_shuffle_resumes_bit_for_bit_and_elastically, .timeout = 240)
{
	uint64_t nids;
	const char *d = dataset_of(&nids, false);
	pf_loader_config cfg = { .host_index = 1, .num_hosts = 3, .cores_per_host = 2,
				 .per_core_batch = 16, .shuffle_mode = PF_SHUFFLE_GLOBAL,
				 .shuffle_window = 300, .seed = 7, .epochs = 3, .threads = 2 };
	const uint64_t stops[] = { 0, 1, 9, 50, 51, 52, 100, 152, 1000 };
	const uint64_t stop[] = { 21, 5 };

	check_exact(d, cfg, stops, sizeof(stops) / sizeof(stops[0]));
	cfg = (pf_loader_config){ .cores_per_host = 3, .per_core_batch = 7,
				  .shuffle_mode = PF_SHUFFLE_GLOBAL, .seed = 1, .epochs = 2 };
	check_exact(d, cfg, stops, 7);
	check_resize_mode(2, 2, 16, 3, 2, 16, stop, PF_SHUFFLE_GLOBAL);
	/* Another per-core batch: the resumed epoch keeps the slices of the
	 * streams it was cut from. */
	check_resize_mode(2, 2, 16, 3, 1, 24, stop, PF_SHUFFLE_GLOBAL);
	check_resize_mode(4, 2, 16, 2, 2, 16, (const uint64_t[]){ 3, 17, 0, 25 },
			  PF_SHUFFLE_GLOBAL);
}

/* A state of the global shuffle is not the window shuffle's, nor the
 * other way round. */
Test(resume, a_state_of_another_shuffle_is_refused, .timeout = 60)
{
	uint64_t nids;
	const char *d = dataset_of(&nids, false);
	const char *paths[1] = { d };
	pf_loader_config cfg = { .per_core_batch = 16, .shuffle_mode = PF_SHUFFLE_GLOBAL,
				 .seed = 2, .epochs = 2, .threads = 2 };
	static steps s;
	pf_state_blob sb;
	pf_loader *l = NULL;
	pf_error err;
	blob st = run(d, cfg, NULL, 0, 5, &s);

	sb = (pf_state_blob){ st.data, st.len };
	cfg = (pf_loader_config){ .paths = paths, .npaths = 1, .features = "id:int64[1]",
				  .per_core_batch = 16, .shuffle = true, .seed = 2, .epochs = 2,
				  .resume = &sb, .nresume = 1 };
	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -EINVAL);
	cr_assert_null(l);
	cr_assert(strstr(err.msg, "saved with the global shuffle"), "%s", err.msg);
	free(st.data);
	steps_free(&s);
}

/* ------------------------------------------------------------------ */
/* States that must be refused                                          */

static int create_from(const char *dir, pf_loader_config cfg, const void *data,
		       size_t len, pf_error *err)
{
	const char *paths[1] = { dir };
	pf_state_blob sb = { data, len };
	pf_loader *l = NULL;
	int ret;

	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.features = "id:int64[1]";
	cfg.resume = &sb;
	cfg.nresume = 1;
	pf_error_clear(err);
	ret = pf_loader_create(&l, &cfg, err);
	pf_loader_free(l);
	return ret;
}

Test(resume, bad_states_are_refused_with_a_reason, .timeout = 120)
{
	uint64_t nids;
	const char *d = dataset(&nids);
	const char *other = tu_tmpdir();
	pf_loader_config cfg = { .cores_per_host = 2, .per_core_batch = 16, .shuffle = true,
				 .seed = 5, .threads = 1 };
	static steps s;
	pf_state_info info;
	pf_error err;
	char p[512];
	blob st = run(d, cfg, NULL, 0, 20, &s);
	uint8_t *bad = malloc(st.len + 8);

	cr_assert_eq(pf_state_inspect(st.data, st.len, &info, &err), 0, "%s", err.msg);
	cr_assert_eq(info.global_step, 20);
	cr_assert_eq(info.step_in_epoch, 20);
	cr_assert_eq(info.epoch, 0);
	cr_assert_eq(info.records_left, (nids / 32 - 20) * 32);
	cr_assert(!info.fresh);

	/* Every truncation, and trailing bytes. */
	for (size_t n = 0; n < st.len; n++) {
		int ret = create_from(d, cfg, st.data, n, &err);

		cr_assert_eq(ret, -EBADMSG, "truncated to %zu: %d", n, ret);
		cr_assert(strstr(err.msg, "state"), "%s", err.msg);
	}
	memcpy(bad, st.data, st.len);
	bad[st.len] = 0;
	cr_assert_eq(create_from(d, cfg, bad, st.len + 1, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "trailing"), "%s", err.msg);
	/* Every bit flip. */
	for (size_t i = 0; i < st.len * 8; i++) {
		int ret;

		memcpy(bad, st.data, st.len);
		bad[i / 8] ^= (uint8_t)(1u << (i % 8));
		ret = create_from(d, cfg, bad, st.len, &err);
		cr_assert(ret == -EBADMSG || ret == -EPROTONOSUPPORT,
			  "bit %zu flipped: %d (%s)", i, ret, err.msg);
	}
	/* A future format version. */
	memcpy(bad, st.data, st.len);
	bad[4] = 2;
	cr_assert_eq(create_from(d, cfg, bad, st.len, &err), -EPROTONOSUPPORT);
	cr_assert(strstr(err.msg, "version 2 is newer"), "%s", err.msg);
	/* Another dataset. */
	snprintf(p, sizeof(p), "%s/x.tfrecord.zst", other);
	tu_write_id_shard(p, 0, nids, 4096, 0);
	cr_assert_eq(create_from(other, cfg, st.data, st.len, &err), -ESTALE);
	cr_assert(strstr(err.msg, "another dataset"), "%s", err.msg);
	/* Another seed. */
	pf_loader_config c2 = cfg;
	c2.seed = 6;
	cr_assert_eq(create_from(d, c2, st.data, st.len, &err), -EINVAL);
	cr_assert(strstr(err.msg, "seed 5"), "%s", err.msg);
	/* Another host count, with one of two old hosts' states. */
	free(st.data);
	c2 = cfg;
	c2.num_hosts = 2;
	st = run(d, c2, NULL, 0, 3, &s);
	cr_assert_eq(create_from(d, cfg, st.data, st.len, &err), -EINVAL);
	cr_assert(strstr(err.msg, "every old host; host 1's is missing"), "%s", err.msg);
	free(bad);
	free(st.data);
	steps_free(&s);
}

Test(resume, states_of_one_topology_at_different_epochs_are_refused, .timeout = 60)
{
	uint64_t nids;
	const char *d = dataset(&nids);
	pf_loader_config a = { .host_index = 0, .num_hosts = 2, .per_core_batch = 32,
			       .epochs = 2, .threads = 1 };
	pf_loader_config b = a;
	static steps s;
	const char *paths[1] = { d };
	pf_state_blob sb[2];
	pf_loader *l = NULL;
	pf_error err;
	blob st[2];

	b.host_index = 1;
	st[0] = run(d, a, NULL, 0, 5, &s);
	st[1] = run(d, b, NULL, 0, 100, &s);	/* into epoch 1 */
	sb[0] = (pf_state_blob){ st[0].data, st[0].len };
	sb[1] = (pf_state_blob){ st[1].data, st[1].len };
	a = (pf_loader_config){ .paths = paths, .npaths = 1, .features = "id:int64[1]",
				.per_core_batch = 32, .epochs = 2, .resume = sb, .nresume = 2 };
	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, &a, &err), -EINVAL);
	cr_assert(strstr(err.msg, "not of one job at one epoch"), "%s", err.msg);
	free(st[0].data);
	free(st[1].data);
	steps_free(&s);
}

/* ------------------------------------------------------------------ */
/* SIGKILL at random points (kill_util.c)                               */

Test(resume, sigkill_at_random_points_one_and_four_hosts_and_a_resize, .timeout = 600)
{
	uint64_t nids, n = 0;
	const char *d = dataset(&nids);
	const char *work = tu_tmpdir();
	uint8_t *seen = calloc(nids, 1);
	killer k = { .rng = 0x5eed };
	char log[512];
	const uint64_t stop[4] = { 40, 11, 90, 63 };
	uint64_t b = 8, q1, q4, m, q2;
	unsigned before = 0;

	/* One host: the whole epoch, each record once, minus the remainder. */
	ku_phase(&k, d, work, 'o', 1, NULL, 0, 15);
	ku_count_log(ARG(log, "%s/lo0", work), seen, nids, &n);
	q1 = nids / b * b;
	cr_assert_eq(n, q1);
	ku_took(&k, &before, "1 host");

	/* Four hosts. */
	memset(seen, 0, nids);
	n = 0;
	ku_phase(&k, d, work, 'f', 4, NULL, 0, 15);
	for (uint32_t h = 0; h < 4; h++)
		ku_count_log(ARG(log, "%s/lf%u", work, h), seen, nids, &n);
	q4 = nids / (4 * b) * b;
	cr_assert_eq(n, 4 * q4);
	ku_took(&k, &before, "4 hosts");

	/* Four hosts stop at different steps of epoch 0; two go on from
	 * their states. */
	memset(seen, 0, nids);
	n = ku_four_stopped(&k, d, work, stop, seen, nids);
	ku_phase(&k, d, work, 'b', 2, NULL, 4, 10);
	for (uint32_t h = 0; h < 2; h++)
		ku_count_log(ARG(log, "%s/lb%u", work, h), seen, nids, &n);
	m = 4 * q4 - (stop[0] + stop[1] + stop[2] + stop[3]) * b;
	q2 = m / (2 * b) * b;
	cr_assert_eq(n, 4 * q4 - m + 2 * q2, "4 to 2: %llu records delivered",
		     (unsigned long long)n);
	ku_took(&k, &before, "4 to 2");
	cr_assert_geq(k.kills, 50, "only %u kill points", k.kills);
	free(seen);
}
