/* SPDX-License-Identifier: Apache-2.0 */
/* The global shuffle's cache of decompressed frames (loader/frame_cache.c):
 * the batches are the same with no cache, one frame, a few and the
 * automatic size, on 1 and 4 threads, every record once an epoch; a
 * cache that holds every frame decompresses each once in the whole run,
 * and its segments add up (served + loaded + decoded outside); the
 * cache is in the memory budget and the metrics, an explicit one the
 * budget has no room for is refused naming it, an automatic one shrinks
 * to fit; skip mode and the window shuffle do not use it; resume from a
 * run with a cache into one without is bit for bit. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"
#include "podfeed.h"
#include "shuffle_util.h"
#include "testutil.h"

/* ids [0, n) in 6 uneven indexed shards (one empty) in frames of 16 KiB
 * (hundreds of ids each; with the tests' window of 512 and per-core batch
 * of 16, slices of 4 records: each frame is wanted by about a hundred
 * segments an epoch). */
static const char *dataset(uint64_t *n)
{
	const char *d = tu_tmpdir();
	const uint64_t counts[] = { 6000, 7, 0, 9000, 1393, 3600 };
	uint64_t id = 0;
	char p[512];

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		snprintf(p, sizeof(p), "%s/s%zu.tfrecord.zst", d, i);
		tu_write_id_shard(p, id, counts[i], 16384, 0);
		id += counts[i];
	}
	*n = id;
	return d;
}

typedef su_run run_out;

static int run(const char *dir, pf_loader_config cfg, run_out *out, pf_error *err)
{
	return su_collect(dir, cfg, out, err);
}

static void run_ok(const char *dir, pf_loader_config cfg, run_out *out)
{
	su_collect_ok(dir, cfg, out);
}

/* Every record of each epoch at most once (so, per_epoch of them). */
static void check_epochs(const run_out *r, uint64_t n, uint64_t per_epoch, uint32_t epochs)
{
	uint8_t *seen = malloc(n);

	cr_assert_not_null(seen);
	cr_assert_eq(r->n, per_epoch * epochs);
	for (uint32_t e = 0; e < epochs; e++) {
		memset(seen, 0, n);
		for (uint64_t i = e * per_epoch; i < (e + 1) * per_epoch; i++) {
			cr_assert_lt(r->ids[i], n);
			cr_assert_eq(seen[r->ids[i]]++, 0, "id %llu twice in epoch %u",
				     (unsigned long long)r->ids[i], e);
		}
	}
	free(seen);
}

/* Segments a run dispatched through the cache add up: each served from
 * it, loaded into it, or decoded outside it. */
static uint64_t segments(const pf_loader_metrics *m)
{
	return m->frame_cache_hits + m->frame_cache_loads + m->frame_cache_bypassed;
}

Test(fcache, batches_identical_with_any_cache_and_threads_every_record_once, .timeout = 240)
{
	uint64_t n;
	const char *d = dataset(&n);
	pf_loader_config cfg = { .per_core_batch = 16, .cores_per_host = 2, .seed = 11,
				 .epochs = 2, .shuffle_mode = PF_SHUFFLE_GLOBAL,
				 .shuffle_window = 512, .threads = 1,
				 .frame_cache = PF_FRAME_CACHE_OFF };
	const uint32_t caches[] = { PF_FRAME_CACHE_OFF, 1, 3, 40, PF_AUTO };
	const unsigned threads[] = { 1, 4 };
	uint64_t per_epoch = n / 32 * 32;
	run_out ref, r, win;

	run_ok(d, cfg, &ref);
	check_epochs(&ref, n, per_epoch, 2);
	cr_assert_eq(ref.m.frame_cache_entries, 0);
	cr_assert_eq(segments(&ref.m), 0, "no cache: nothing goes through it");
	for (size_t i = 0; i < sizeof(caches) / sizeof(caches[0]); i++) {
		for (size_t t = 0; t < 2; t++) {
			cfg.frame_cache = caches[i];
			cfg.threads = threads[t];
			run_ok(d, cfg, &r);
			cr_assert_eq(r.n, ref.n);
			cr_assert(memcmp(r.ids, ref.ids, r.n * sizeof(*r.ids)) == 0,
				  "cache %u, %u threads: other batches than without a cache",
				  caches[i], threads[t]);
			if (caches[i] != PF_FRAME_CACHE_OFF && caches[i] != PF_AUTO)
				cr_assert_eq(r.m.frame_cache_entries, caches[i]);
			if (caches[i] == PF_FRAME_CACHE_OFF) {
				cr_assert_eq(segments(&r.m), 0);
			} else {
				/* Fewer decompressions than segments: the cache
				 * serves some (one frame too: a frame's next
				 * slice is sometimes its next segment). */
				cr_assert_gt(r.m.frame_cache_hits, 0, "cache %u", caches[i]);
				cr_assert_lt(r.m.bytes_decompressed, ref.m.bytes_decompressed,
					     "cache %u", caches[i]);
				cr_assert_leq(r.m.frame_cache_evictions, r.m.frame_cache_loads);
			}
			free(r.ids);
		}
	}
	/* The same segments dispatched whatever the cache. */
	cfg.frame_cache = 1;
	run_ok(d, cfg, &r);
	{
		run_out big;

		/* More than the dataset's frames: a cache of every frame. */
		cfg.frame_cache = 1000;
		run_ok(d, cfg, &big);
		cr_assert_lt(big.m.frame_cache_entries, 1000, "as many entries as frames");
		cr_assert_eq(segments(&big.m), segments(&r.m),
			     "all %llu segments, one frame %llu",
			     (unsigned long long)segments(&big.m),
			     (unsigned long long)segments(&r.m));
		/* A cache of every frame: each decompressed once in the
		 * whole run, so the two epochs decompress what one epoch of
		 * the window shuffle does (every frame once). */
		cr_assert_eq(big.m.frame_cache_evictions, 0);
		cr_assert_eq(big.m.frame_cache_bypassed, 0);
		cfg.shuffle_mode = PF_SHUFFLE_WINDOW;
		cfg.shuffle = true;
		cfg.epochs = 1;
		run_ok(d, cfg, &win);
		cr_assert_eq(win.m.frame_cache_entries, 0, "the window shuffle has no cache");
		cr_assert_eq(big.m.bytes_decompressed, win.m.bytes_decompressed,
			     "cache of all: %llu bytes decompressed, the dataset is %llu",
			     (unsigned long long)big.m.bytes_decompressed,
			     (unsigned long long)win.m.bytes_decompressed);
		free(big.ids);
		free(win.ids);
	}
	free(r.ids);
	free(ref.ids);
}

Test(fcache, in_the_budget_and_the_metrics, .timeout = 120)
{
	uint64_t n;
	const char *d = dataset(&n);
	pf_loader_config cfg = { .per_core_batch = 16, .cores_per_host = 2, .seed = 11,
				 .shuffle_mode = PF_SHUFFLE_GLOBAL, .shuffle_window = 512,
				 .threads = 2, .frame_cache = 30 };
	run_out r, off, tight;
	pf_error err;
	uint64_t budget;

	run_ok(d, cfg, &r);
	cr_assert_eq(r.m.frame_cache_entries, 30);
	/* An entry holds a frame (16 KiB and its records' offsets, in pages). */
	cr_assert_geq(r.m.frame_cache_bytes, 30 * 16384);
	cr_assert_leq(r.m.frame_cache_bytes, 30 * 4 * 16384);
	cfg.frame_cache = PF_FRAME_CACHE_OFF;
	run_ok(d, cfg, &off);
	cr_assert_eq(off.m.frame_cache_bytes, 0);
	cr_assert_eq(r.m.memory_bytes, off.m.memory_bytes + r.m.frame_cache_bytes,
		     "the cache's bytes are in the pools' memory");
	/* A budget with room for the other pools and 10 entries: auto
	 * takes what is left and stays inside; 30 asked for are refused
	 * naming the cache, what it has room for and what the rest takes. */
	budget = off.m.memory_bytes + 10 * (r.m.frame_cache_bytes / 30) + 100;
	cfg.memory_budget = budget;
	cfg.frame_cache = PF_AUTO;
	run_ok(d, cfg, &tight);
	cr_assert_eq(tight.m.frame_cache_entries, 10);
	cr_assert_leq(tight.m.memory_bytes, budget);
	cr_assert_eq(tight.n, off.n);
	cr_assert(memcmp(tight.ids, off.ids, off.n * sizeof(*off.ids)) == 0);
	free(tight.ids);
	cfg.frame_cache = 30;
	pf_error_clear(&err);
	cr_assert_eq(run(d, cfg, &tight, &err), -ENOMEM);
	cr_assert(strstr(err.msg, "room for 10 of the frame cache's 30 frames"), "%s", err.msg);
	/* Skip mode decides holes per segment: no cache, batches the same. */
	cfg.memory_budget = 0;
	cfg.frame_cache = PF_AUTO;
	cfg.on_corrupt = PF_CORRUPT_SKIP;
	run_ok(d, cfg, &tight);
	cr_assert_eq(tight.m.frame_cache_entries, 0);
	cr_assert_eq(segments(&tight.m), 0);
	cr_assert(memcmp(tight.ids, off.ids, off.n * sizeof(*off.ids)) == 0);
	free(tight.ids);
	free(r.ids);
	free(off.ids);
}

/* Frames no larger than a slice are read once anyway: no cache. */
Test(fcache, none_when_no_frame_is_sliced, .timeout = 60)
{
	const char *d = tu_tmpdir();
	char p[512];
	pf_loader_config cfg = { .per_core_batch = 8, .seed = 2,
				 .shuffle_mode = PF_SHUFFLE_GLOBAL, .threads = 2 };
	run_out r;

	/* Frames of 256 bytes hold a few ids; the default window of 8192
	 * and per-core batch 8 make slices of 118 records. */
	snprintf(p, sizeof(p), "%s/a.tfrecord.zst", d);
	tu_write_id_shard(p, 0, 3000, 256, 0);
	run_ok(d, cfg, &r);
	cr_assert_eq(r.m.frame_cache_entries, 0);
	cr_assert_eq(r.n, 3000 / 8 * 8);
	free(r.ids);
}

/* Loader l's batches to its end are ref's ids from *at on (advanced). */
static void same_ids(pf_loader *l, const run_out *ref, uint64_t *at, uint64_t stop)
{
	pf_batch *b;
	int ret;

	while ((ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++) {
			const int64_t *ids = b->core[c].tensors[0].data;

			for (uint32_t i = 0; i < b->per_core_batch; i++, ++*at) {
				cr_assert_lt(*at, ref->n);
				cr_assert_eq((uint64_t)ids[i], ref->ids[*at],
					     "stop %llu: record %llu differs",
					     (unsigned long long)stop, (unsigned long long)*at);
			}
		}
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0);
}

/* A state saved by a run with a cache resumes in one without (and on
 * other threads) to the batches of the run never stopped. */
Test(fcache, resume_with_and_without_the_cache_bit_for_bit, .timeout = 180)
{
	uint64_t n;
	const char *d = dataset(&n);
	const char *paths[1] = { d };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .features = "id:int64[1]",
				 .per_core_batch = 16, .cores_per_host = 2, .seed = 4,
				 .epochs = 2, .shuffle_mode = PF_SHUFFLE_GLOBAL,
				 .shuffle_window = 512, .threads = 4, .frame_cache = 2 };
	run_out ref;
	const uint64_t stops[] = { 1, 40, 700 };

	run_ok(d, cfg, &ref);
	for (size_t k = 0; k < sizeof(stops) / sizeof(stops[0]); k++) {
		pf_loader *l;
		pf_error err;
		pf_state_blob sb;
		uint8_t *state;
		int64_t len;
		uint64_t at = 0;

		cfg.max_steps = stops[k];
		cfg.frame_cache = 2;
		cfg.threads = 4;
		cfg.resume = NULL;
		cfg.nresume = 0;
		cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
		same_ids(l, &ref, &at, stops[k]);
		len = pf_loader_save_state(l, NULL, 0);
		cr_assert_gt(len, 0);
		state = malloc((size_t)len);
		cr_assert_eq(pf_loader_save_state(l, state, (size_t)len), len);
		pf_loader_free(l);
		sb = (pf_state_blob){ state, (size_t)len };
		cfg.max_steps = 0;
		cfg.frame_cache = PF_FRAME_CACHE_OFF;
		cfg.threads = 1;
		cfg.resume = &sb;
		cfg.nresume = 1;
		cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
		same_ids(l, &ref, &at, stops[k]);
		cr_assert_eq(at, ref.n, "stop %llu", (unsigned long long)stops[k]);
		pf_loader_free(l);
		free(state);
	}
	free(ref.ids);
}

/* Frame groups: over more frames than a group holds (per-core batch 16,
 * a window of 2,048: groups of at most 10 (16 - 1) = 150 frames; 4 KiB
 * frames of about 72 ids, sorted by label, so 553 frames: four groups,
 * evened out to 139), the automatic cache holds a group
 * and each frame is decompressed once an epoch (what the window shuffle
 * decompresses); a frame's records come out within its group's span (a
 * group's records and a window either side); and the batches still pass
 * the chi-square test as random ones do (each group draws one frame from
 * each of 150 strata of the dataset in order, so its labels are in the
 * dataset's shares). */
/* The frame (numbered across the shards s000.. in order) of each id
 * [0, n), from the shards' indexes; *frames, and the most records one
 * holds. */
static uint64_t *frames_of_ids(const char *d, uint32_t shards, uint64_t n, uint64_t *frames,
			       uint64_t *max_frame)
{
	uint64_t *frame_of = malloc(n * sizeof(*frame_of)), id = 0;

	cr_assert_not_null(frame_of);
	*frames = *max_frame = 0;
	for (uint32_t s = 0; s < shards; s++) {
		char p[512];
		size_t len;
		uint8_t *file;
		pf_shard_index *ix;
		pf_error err;

		snprintf(p, sizeof(p), "%s/s%03u.tfrecord.zst", d, s);
		file = tu_read_file(p, &len);
		cr_assert_not_null(file);
		cr_assert_eq(pf_shard_index_parse(&ix, file, len, len, &err), 0, "%s", err.msg);
		for (uint32_t f = 0; f < pf_shard_index_frames(ix); f++) {
			const pf_frame_info *fi = pf_shard_index_frame(ix, f);

			for (uint64_t r = 0; r < fi->records; r++) {
				cr_assert_lt(id, n);
				frame_of[id++] = *frames;
			}
			*max_frame = fi->records > *max_frame ? fi->records : *max_frame;
			++*frames;
		}
		pf_shard_index_free(ix);
		free(file);
	}
	cr_assert_eq(id, n);
	return frame_of;
}

/* The frame groups over 40,000 ids sorted by label in 16 shards of
 * frames of frame_bytes, the window `window`: `frames` frames in groups of
 * `want` (the checks above). */
static void check_groups(uint32_t frame_bytes, uint32_t window, uint64_t want_frames,
			 uint32_t want)
{
	const uint64_t n = 40000;
	const uint32_t shards = 16;
	const char *d = tu_tmpdir();
	pf_loader_config cfg = { .per_core_batch = 16, .cores_per_host = 2, .seed = 8,
				 .shuffle_mode = PF_SHUFFLE_GLOBAL, .shuffle_window = window,
				 .threads = 2 };
	uint64_t frames = 0, max_frame = 0, *first_at, *last_at, span, *frame_of;
	uint32_t group;
	run_out g, w, off;
	double rg, rr;
	char p[512];

	for (uint32_t s = 0; s < shards; s++) {
		uint64_t lo = n * s / shards, hi = n * (s + 1) / shards;

		snprintf(p, sizeof(p), "%s/s%03u.tfrecord.zst", d, s);
		tu_write_id_shard(p, lo, hi - lo, frame_bytes, 0);
	}
	frame_of = frames_of_ids(d, shards, n, &frames, &max_frame);
	cr_assert_eq(frames, want_frames, "%llu frames", (unsigned long long)frames);
	group = pf_plan_group(16, window, frames, n);
	cr_assert_eq(group, want, "%llu frames in groups of %u", (unsigned long long)frames,
		     group);
	run_ok(d, cfg, &g);
	cfg.frame_cache = PF_FRAME_CACHE_OFF;
	run_ok(d, cfg, &off);
	cr_assert(memcmp(g.ids, off.ids, g.n * sizeof(*g.ids)) == 0);
	cfg.shuffle_mode = PF_SHUFFLE_WINDOW;
	cfg.shuffle = true;
	run_ok(d, cfg, &w);
	cr_assert_gt(g.m.frame_cache_entries, group, "a group and the chunks in flight");
	cr_assert_eq(g.m.bytes_decompressed, w.m.bytes_decompressed,
		     "each frame decompressed once: %llu bytes, the dataset %llu",
		     (unsigned long long)g.m.bytes_decompressed,
		     (unsigned long long)w.m.bytes_decompressed);
	cr_assert_gt(off.m.bytes_decompressed, 4 * w.m.bytes_decompressed,
		     "without the cache each slice decompresses its frame");
	/* Each frame's records come out within its group's span: between
	 * a frame's first and last record, at most a group's records
	 * (`group` of the largest frame's) and a window either side. */
	first_at = malloc(frames * sizeof(*first_at));
	last_at = calloc(frames, sizeof(*last_at));
	cr_assert(first_at && last_at);
	memset(first_at, 0xff, frames * sizeof(*first_at));
	for (uint64_t i = 0; i < g.n; i++) {
		uint64_t f = frame_of[g.ids[i]];

		first_at[f] = first_at[f] < i ? first_at[f] : i;
		last_at[f] = i;
	}
	span = group * max_frame + 2 * window;
	for (uint64_t f = 0; f < frames; f++)
		cr_assert_leq(last_at[f] - first_at[f], span, "frame %llu spans %llu records "
			      "of the epoch, more than its group's %llu",
			      (unsigned long long)f,
			      (unsigned long long)(last_at[f] - first_at[f]),
			      (unsigned long long)span);
	/* And groups are not the whole dataset: some frame's span is less
	 * than half the epoch (one permutation of every slice spreads each
	 * frame over nearly all of it). */
	{
		uint64_t least = UINT64_MAX;

		for (uint64_t f = 0; f < frames; f++)
			least = last_at[f] - first_at[f] < least ? last_at[f] - first_at[f] : least;
		cr_assert_lt(least, g.n / 2);
	}
	rg = su_pass_rate(g.ids, g.n, 16, n);
	rr = su_random_pass_rate(n, g.n, 16);
	cr_log_info("frame groups of %u: chi-square pass rate per batch of 16: global %.3f, "
		    "random %.3f (%llu batches), window %.3f", group, rg, rr,
		    (unsigned long long)(g.n / 16), su_pass_rate(w.ids, w.n, 16, n));
	cr_assert_geq(rg, rr - 0.05, "global shuffle in groups: %.3f of batches pass, random "
		      "ones %.3f", rg, rr);
	free(frame_of);
	free(first_at);
	free(last_at);
	free(g.ids);
	free(w.ids);
	free(off.ids);
}

/* 4 KiB frames of ~72 ids, a window of 2,048: 10 (16 - 1) = 150 frames
 * bind (8 windows are 225 frames); 553 frames, four groups of 139. */
Test(fcache, frame_groups_read_each_frame_once_keep_frames_in_their_span_and_mix,
     .timeout = 240)
{
	check_groups(4096, 2048, 553, 139);
}

/* 16 KiB frames of ~278 ids, a window of 2,048: 8 windows of records
 * bind (59 frames, under 150); 144 frames, three groups of 48.  Sorted
 * labels still mix as random ones do. */
Test(fcache, frame_groups_of_8_windows_still_mix, .timeout = 240)
{
	check_groups(16384, 2048, 144, 48);
}

/* A loader of cfg over d resumed from blob[0..len) to its end: its ids
 * (free), or NULL with err when create refuses it. */
static uint64_t *resume_ids(const char *d, pf_loader_config cfg, const void *blob, size_t len,
			    uint64_t *n, pf_error *err)
{
	const char *paths[1] = { d };
	pf_state_blob sb = { blob, len };
	uint64_t *ids = NULL;
	pf_loader *l;
	pf_batch *b;

	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.features = "id:int64[1]";
	cfg.resume = &sb;
	cfg.nresume = 1;
	*n = 0;
	pf_error_clear(err);
	if (pf_loader_create(&l, &cfg, err) < 0)
		return NULL;
	while (pf_loader_next(l, &b) == 1) {
		for (uint32_t c = 0; c < b->cores; c++) {
			const int64_t *v = b->core[c].tensors[0].data;

			ids = realloc(ids, (*n + b->per_core_batch) * sizeof(*ids));
			cr_assert_not_null(ids);
			for (uint32_t i = 0; i < b->per_core_batch; i++)
				ids[(*n)++] = (uint64_t)v[i];
		}
		pf_loader_release(l, b);
	}
	pf_loader_free(l);
	return ids;
}

/* The state's frame group is the one its epoch resumes with: the same
 * state with origin_group 0 (as saved before frame groups) resumes the
 * epoch in the one permutation of every slice (other batches, the same
 * each time, no record twice); a state of no global shuffle that names a
 * group is refused naming it. */
Test(fcache, the_states_frame_group_is_the_resumed_epochs, .timeout = 120)
{
	uint64_t n;
	const char *d = dataset(&n);
	const char *paths[1] = { d };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .features = "id:int64[1]",
				 .per_core_batch = 16, .cores_per_host = 2, .seed = 6,
				 .shuffle_mode = PF_SHUFFLE_GLOBAL, .shuffle_window = 512,
				 .threads = 2, .max_steps = 5 };
	uint8_t blob[65536], blob0[65536], *seen = calloc(n, 1);
	uint64_t na, nb, nb2, *a, *b, *b2;
	int64_t len, len0;
	pf_loader *l;
	pf_batch *bt;
	pf_state st;
	pf_error err;

	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while (pf_loader_next(l, &bt) == 1)
		pf_loader_release(l, bt);
	len = pf_loader_save_state(l, blob, sizeof(blob));
	cr_assert_gt(len, 0);
	pf_loader_free(l);
	cr_assert_eq(pf_state_decode(&st, blob, (size_t)len, &err), 0, "%s", err.msg);
	cr_assert_eq(st.origin_group, 24, "frames of ~281 records: 8 windows of 512 are 15, "
		     "so 32 (the least), evened out over 71 frames: 3 groups of 24");
	st.origin_group = 0;
	len0 = pf_state_encode(&st, blob0, sizeof(blob0));
	cr_assert_gt(len0, 0);
	cfg.max_steps = 0;
	a = resume_ids(d, cfg, blob, (size_t)len, &na, &err);
	b = resume_ids(d, cfg, blob0, (size_t)len0, &nb, &err);
	b2 = resume_ids(d, cfg, blob0, (size_t)len0, &nb2, &err);
	cr_assert(a && b && b2, "%s", err.msg);
	cr_assert_eq(na, nb);
	cr_assert_eq(nb, nb2);
	cr_assert(memcmp(a, b, na * sizeof(*a)) != 0, "the group in the state changed nothing");
	cr_assert(memcmp(b, b2, nb * sizeof(*b)) == 0);
	for (uint64_t i = 0; i < nb; i++)
		cr_assert_eq(seen[b[i]]++, 0, "id %llu twice", (unsigned long long)b[i]);
	/* No global shuffle, yet a group: refused. */
	st.global = false;
	st.origin_slice = 0;
	st.origin_group = 3;
	len0 = pf_state_encode(&st, blob0, sizeof(blob0));
	cr_assert_gt(len0, 0);
	cfg.shuffle_mode = PF_SHUFFLE_WINDOW;
	cfg.shuffle = true;
	cr_assert_null(resume_ids(d, cfg, blob0, (size_t)len0, &nb, &err));
	cr_assert(strstr(err.msg, "in groups of 3 frames"), "%s", err.msg);
	pf_state_release(&st);
	free(a);
	free(b);
	free(b2);
	free(seen);
}

/* A state saved before the groups were sized by the window (origin_group
 * 10 (pcb - 1) = 150 here, over 71 frames: one group) is of a job in
 * groups of 150: its epoch and the epochs after resume in them, bit for
 * bit, and the states saved on carry them; they are not this loader's
 * own groups (24), which give other batches.  The job is emulated from
 * its start: its state before the first step, naming 150. */
Test(fcache, a_states_groups_stay_the_jobs, .timeout = 120)
{
	uint64_t n;
	const char *d = dataset(&n);
	const char *paths[1] = { d };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .features = "id:int64[1]",
				 .per_core_batch = 16, .cores_per_host = 2, .seed = 9,
				 .shuffle_mode = PF_SHUFFLE_GLOBAL, .shuffle_window = 512,
				 .threads = 2, .epochs = 2 };
	uint8_t fresh[65536], old[65536], mid[65536];
	int64_t len, flen;
	uint64_t nref, nown, ntail, *ref, *own, *tail, steps = 0, per_epoch = n / 32 * 32;
	pf_state_blob sb;
	pf_loader *l;
	pf_batch *bt;
	pf_state st;
	pf_error err;

	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	flen = pf_loader_save_state(l, fresh, sizeof(fresh));
	cr_assert_gt(flen, 0);
	pf_loader_free(l);
	cr_assert_eq(pf_state_decode(&st, fresh, (size_t)flen, &err), 0, "%s", err.msg);
	cr_assert(st.global && st.step_in_epoch == 0 && st.epoch == 0);
	cr_assert_eq(st.origin_group, 24);
	st.origin_group = 150;
	len = pf_state_encode(&st, old, sizeof(old));
	cr_assert_gt(len, 0);
	pf_state_release(&st);
	ref = resume_ids(d, cfg, old, (size_t)len, &nref, &err);
	own = resume_ids(d, cfg, fresh, (size_t)flen, &nown, &err);
	cr_assert(ref && own, "%s", err.msg);
	cr_assert_eq(nref, 2 * per_epoch);
	cr_assert_eq(nown, nref);
	cr_assert(memcmp(ref + per_epoch, own + per_epoch, per_epoch * sizeof(*ref)) != 0,
		  "the second epoch in the state's groups and in the loader's are alike");
	for (uint32_t e = 0; e < 2; e++) {
		uint8_t *seen = calloc(n, 1);

		for (uint64_t i = e * per_epoch; i < (e + 1) * per_epoch; i++)
			cr_assert_eq(seen[ref[i]]++, 0, "id %llu twice in epoch %u",
				     (unsigned long long)ref[i], e);
		free(seen);
	}
	/* From the old job's middle (a state its loader saves 7 steps in):
	 * its rest, the second epoch too. */
	sb = (pf_state_blob){ old, (size_t)len };
	cfg.resume = &sb;
	cfg.nresume = 1;
	cfg.max_steps = 7;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while (pf_loader_next(l, &bt) == 1) {
		pf_loader_release(l, bt);
		steps++;
	}
	cr_assert_eq(steps, 7);
	len = pf_loader_save_state(l, mid, sizeof(mid));
	cr_assert_gt(len, 0);
	pf_loader_free(l);
	cr_assert_eq(pf_state_decode(&st, mid, (size_t)len, &err), 0, "%s", err.msg);
	cr_assert_eq(st.origin_group, 150, "the state saved on names the job's groups");
	pf_state_release(&st);
	cfg.resume = NULL;
	cfg.nresume = 0;
	cfg.max_steps = 0;
	tail = resume_ids(d, cfg, mid, (size_t)len, &ntail, &err);
	cr_assert_not_null(tail, "%s", err.msg);
	cr_assert_eq(ntail, nref - 7 * 32);
	cr_assert(memcmp(tail, ref + 7 * 32, ntail * sizeof(*tail)) == 0,
		  "resumed in the middle: other batches than the job's");
	free(ref);
	free(own);
	free(tail);
}

/* The frames per group: 10 (pcb - 1), but no more than hold 8 shuffle
 * blocks of records (nor fewer than 32), evened out into the fewest
 * groups of at most that many. */
Test(fcache, groups_sized_by_the_window)
{
	const uint32_t pcbs[] = { 1, 2, 8, 16, 32, 64, 256 };
	const uint32_t blocks[] = { 1, 512, 8192, 65536 };
	const uint64_t nunits[] = { 1, 7, 100, 1000, 12345 };
	const uint64_t per_frame[] = { 1, 10, 100, 1563, 10000 };

	/* The benchmark's 300,000 token records (per-core batch 32, the
	 * default window): 192 frames of 1 MiB hold ~1,563 records, 8
	 * windows 42 of them: 5 groups of 39 (not 310: the dataset at
	 * once); in 64 KiB frames (2,624 of ~115) 10 (32 - 1) binds: 9
	 * groups of 292. */
	cr_assert_eq(pf_plan_group(32, 8192, 192, 300000), 39);
	cr_assert_eq(pf_plan_group(32, 8192, 2624, 300000), 292);
	/* No fewer than 32: 100 frames of 1,000, blocks of 512 (8 of them
	 * are 5 frames): 4 groups of 25. */
	cr_assert_eq(pf_plan_group(32, 512, 100, 100000), 25);
	/* 10 (pcb - 1) binds below 32 too; a dataset of fewer frames is one
	 * group; without a dataset, 10 (pcb - 1). */
	cr_assert_eq(pf_plan_group(2, 8192, 100, 100000), 10);
	cr_assert_eq(pf_plan_group(1, 8192, 100, 100000), 1);
	cr_assert_geq(pf_plan_group(32, 8192, 100, 1000), 100);
	cr_assert_eq(pf_plan_group(32, 8192, 0, 0), 310);
	for (size_t a = 0; a < sizeof(pcbs) / sizeof(pcbs[0]); a++)
		for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
			for (size_t c = 0; c < sizeof(nunits) / sizeof(nunits[0]); c++)
				for (size_t e = 0; e < sizeof(per_frame) / sizeof(per_frame[0]); e++) {
					uint64_t nu = nunits[c], r = per_frame[e];
					uint64_t g = pf_plan_group(pcbs[a], blocks[b], nu, nu * r);
					uint64_t most = pcbs[a] > 1 ? 10ull * (pcbs[a] - 1) : 1;
					uint64_t fit = (8ull * blocks[b] + r - 1) / r, m;

					cr_assert_geq(g, 1);
					cr_assert_leq(g, most, "pcb %u: %llu", pcbs[a],
						      (unsigned long long)g);
					cr_assert_leq(g, fit > 32 ? fit : 32,
						      "%llu frames of %llu records, blocks of %u: %llu",
						      (unsigned long long)nu, (unsigned long long)r,
						      blocks[b], (unsigned long long)g);
					if (g >= nu)
						continue;
					/* m groups: m - 1 of g, the last less than m
					 * frames smaller. */
					m = (nu + g - 1) / g;
					cr_assert_gt(nu - (m - 1) * g + m, g,
						     "%llu frames in groups of %llu",
						     (unsigned long long)nu, (unsigned long long)g);
				}
}
