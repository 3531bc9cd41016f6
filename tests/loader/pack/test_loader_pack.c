/* SPDX-License-Identifier: Apache-2.0 */
/* Packed sequences through the loader (pack_length): over an epoch, in
 * both modes, every record's tokens once, in order inside their segment,
 * segment ids and positions consistent, no row over L; the same batches
 * at 1 and 4 decode threads; the metrics; and bad settings refused with
 * the thing named. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "testutil.h"

#define POS_BITS 12u	/* token = id << 12 | position */

/* Record id's token count: mostly short, some long, every 37th empty. */
static uint32_t tokens_of(uint64_t id)
{
	uint64_t x = id * 0x9e3779b97f4a7c15ull;

	if (id % 37 == 5)
		return 0;
	x ^= x >> 29;
	if (x % 11 == 0)
		return 100 + (uint32_t)(x % 900);	/* long: past L = 64 */
	return 1 + (uint32_t)(x % 40);
}

static int sink(void *ctx, const void *buf, size_t len)
{
	return fwrite(buf, 1, len, ctx) == len ? 0 : -EIO;
}

/* An indexed shard of records {"tokens": [id << 12 | 0, ...], "targets":
 * the same + 1} for ids [0, n); with `gap`, record gap lacks "tokens". */
static const char *token_dataset(uint64_t n, int64_t gap)
{
	const char *d = tu_tmpdir();
	char p[512];
	pf_shard_writer_config cfg = { .frame_size = 16384 };
	pf_shard_writer *w;
	pf_error err;
	int64_t *tok = malloc(4096 * sizeof(*tok)), *tgt = malloc(4096 * sizeof(*tgt));
	uint8_t *rec = malloc(1 << 16);
	FILE *f;

	snprintf(p, sizeof(p), "%s/t.tfrecord.zst", d);
	f = fopen(p, "wb");
	cr_assert(f && tok && tgt && rec);
	cr_assert_eq(pf_shard_writer_create(&w, &cfg, sink, f), 0);
	for (uint64_t id = 0; id < n; id++) {
		uint32_t len = tokens_of(id);
		pf_feature fs[2] = {
			{ .name = "tokens", .name_len = 6, .kind = PF_KIND_INT64, .count = len,
			  .v.int64s = tok },
			{ .name = "targets", .name_len = 7, .kind = PF_KIND_INT64, .count = len,
			  .v.int64s = tgt },
		};
		int64_t m;

		for (uint32_t i = 0; i < len; i++) {
			tok[i] = (int64_t)(id << POS_BITS | i);
			tgt[i] = tok[i] + 1;
		}
		m = (int64_t)id == gap ? pf_example_encode(fs + 1, 1, rec, 1 << 16)
				       : pf_example_encode(fs, 2, rec, 1 << 16);
		cr_assert_gt(m, 0);
		cr_assert_eq(pf_shard_writer_add(w, rec, (size_t)m, &err), 0);
	}
	cr_assert_eq(pf_shard_writer_close(w, &err), 0);
	pf_shard_writer_free(w);
	cr_assert_eq(fclose(f), 0);
	free(tok);
	free(tgt);
	free(rec);
	return d;
}

typedef struct seen {
	uint64_t n;
	uint32_t *count;	/* [id]: tokens seen */
	uint64_t tokens, segments, rows, steps;
	uint64_t digest;
} seen;

/* Check every row of batch b (L values, the spec "tokens, targets") and
 * note what it holds. */
static void check_batch(const pf_batch *b, uint32_t L, pf_pack_mode mode, seen *s)
{
	for (uint32_t c = 0; c < b->cores; c++) {
		const pf_core_batch *cb = &b->core[c];

		cr_assert_eq(cb->ntensors, 6);
		cr_assert_str_eq(cb->tensors[1].name, "tokens_segment_ids");
		cr_assert_str_eq(cb->tensors[2].name, "tokens_positions");
		cr_assert_str_eq(cb->tensors[3].name, "targets");
		for (uint32_t i = 0; i < 6; i++)
			cr_assert_eq(cb->tensors[i].len, L);
		for (uint32_t r = 0; r < b->per_core_batch; r++) {
			const int32_t *tok = (const int32_t *)cb->tensors[0].data + (size_t)r * L;
			const int32_t *seg = (const int32_t *)cb->tensors[1].data + (size_t)r * L;
			const int32_t *pos = (const int32_t *)cb->tensors[2].data + (size_t)r * L;
			const int32_t *tgt = (const int32_t *)cb->tensors[3].data + (size_t)r * L;
			const int32_t *tseg = (const int32_t *)cb->tensors[4].data + (size_t)r * L;
			const int32_t *tpos = (const int32_t *)cb->tensors[5].data + (size_t)r * L;
			uint32_t v = 0, expect = 1;

			s->rows++;
			while (v < L && seg[v]) {
				uint32_t id = (uint32_t)tok[v] >> POS_BITS, n = 0;

				cr_assert_eq(seg[v], (int32_t)expect, "segment ids 1, 2, ...");
				cr_assert_lt(id, s->n);
				if (mode == PF_PACK_FIRST_FIT)
					cr_assert_eq(pos[v], 0, "first_fit: a record whole");
				while (v + n < L && seg[v + n] == (int32_t)expect) {
					uint32_t at = v + n;

					cr_assert_eq((uint32_t)tok[at] >> POS_BITS, id);
					cr_assert_eq(tok[at] & ((1 << POS_BITS) - 1), pos[at],
						     "position = the token's place in its record");
					cr_assert_eq(tgt[at], tok[at] + 1, "targets line up");
					cr_assert_eq(tseg[at], seg[at]);
					cr_assert_eq(tpos[at], pos[at]);
					cr_assert_eq((uint32_t)pos[at], s->count[id],
						     "record %u: position %d, %u seen before", id,
						     pos[at], s->count[id]);
					s->count[id]++;
					n++;
				}
				s->tokens += n;
				s->segments++;
				v += n;
				expect++;
			}
			for (; v < L; v++)
				cr_assert(!tok[v] && !seg[v] && !pos[v] && !tgt[v],
					  "padding is 0 after the last segment");
			s->digest = s->digest * 1099511628211ull ^
				    pf_crc32c(0, tok, (size_t)L * 4) ^ pf_crc32c(7, seg, (size_t)L * 4);
		}
	}
}

static pf_loader *pack_loader(const char *dir, uint32_t L, pf_pack_mode mode, uint32_t pcb,
			      uint32_t cores, unsigned threads, bool shuffle)
{
	const char **paths = malloc(sizeof(*paths));
	pf_loader_config cfg = { .npaths = 1, .per_core_batch = pcb,
				 .cores_per_host = cores, .threads = threads, .shuffle = shuffle,
				 .seed = 7, .features = "tokens:int32[*],targets:int32[*]",
				 .pack_length = L, .pack_mode = mode };
	pf_loader *l;
	pf_error err;

	paths[0] = dir;
	cfg.paths = paths;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	return l;
}

static void run_epoch(pf_loader *l, uint32_t L, pf_pack_mode mode, seen *s)
{
	pf_batch *b;
	int ret;
	uint64_t step = 0;

	while ((ret = pf_loader_next(l, &b)) == 1) {
		cr_assert_eq(b->step, step++);
		check_batch(b, L, mode, s);
		s->steps++;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "%s", pf_loader_last_error(l) ? pf_loader_last_error(l)->msg : "");
}

/* One row a step (B = 1): no row is dropped, so every record's tokens
 * (first_fit: its first L) come out exactly once. */
static void every_token_once(pf_pack_mode mode)
{
	const uint32_t N = 32 * 40, L = 64;
	const char *dir = token_dataset(N, -1);
	pf_loader *l = pack_loader(dir, L, mode, 1, 1, 2, false);
	seen s = { .n = N, .count = calloc(N, sizeof(uint32_t)) };
	pf_loader_metrics m;
	uint64_t tokens = 0, empty = 0, truncated = 0, cut = 0;

	run_epoch(l, L, mode, &s);
	for (uint32_t id = 0; id < N; id++) {
		uint32_t want = tokens_of(id);

		empty += want == 0;
		if (mode == PF_PACK_FIRST_FIT && want > L) {
			truncated++;
			cut += 2 * (want - L);
			want = L;
		}
		cr_assert_eq(s.count[id], want, "record %u: %u tokens seen, want %u", id,
			     s.count[id], want);
		tokens += want;
	}
	pf_loader_get_metrics(l, &m);
	cr_assert_eq(s.tokens, tokens);
	cr_assert_eq(m.pack_rows, s.rows);
	cr_assert_eq(m.steps, s.steps);
	cr_assert_eq(m.pack_values, 2 * tokens, "both features");
	cr_assert_eq(m.pack_slots, 2 * s.rows * L);
	cr_assert_eq(m.pack_segments, s.segments);
	cr_assert_eq(m.pack_empty_records, empty);
	cr_assert_eq(m.pack_truncated_records, truncated);
	cr_assert_eq(m.pack_truncated_values, cut);
	cr_assert_eq(m.pack_rows_dropped, 0);
	if (mode == PF_PACK_CONCAT)
		cr_assert_eq(s.rows, (tokens + L - 1) / L, "concat: every row full but the last");
	else
		cr_assert_gt(s.segments, s.rows, "first_fit puts several records in a row");
	pf_loader_free(l);
	free(s.count);
}

Test(pack, first_fit_every_token_once)
{
	every_token_once(PF_PACK_FIRST_FIT);
}

Test(pack, concat_every_token_once)
{
	every_token_once(PF_PACK_CONCAT);
}

/* Several rows a step: the rows after the last whole step are dropped
 * and counted, and no record is split or repeated. */
Test(pack, rows_past_the_last_step_are_counted)
{
	const uint32_t N = 32 * 30, L = 64;
	const char *dir = token_dataset(N, -1);
	pf_loader *l = pack_loader(dir, L, PF_PACK_FIRST_FIT, 3, 2, 2, false);
	seen s = { .n = N, .count = calloc(N, sizeof(uint32_t)) };
	pf_loader_metrics m;

	run_epoch(l, L, PF_PACK_FIRST_FIT, &s);
	pf_loader_get_metrics(l, &m);
	cr_assert_gt(s.steps, 5);
	cr_assert_eq(s.rows, s.steps * 6);
	cr_assert_lt(m.pack_rows_dropped, 6);
	for (uint32_t id = 0; id < N; id++)
		cr_assert(s.count[id] == 0 || s.count[id] == (tokens_of(id) < L ? tokens_of(id) : L),
			  "record %u: %u tokens", id, s.count[id]);
	pf_loader_free(l);
	free(s.count);
}

/* The batches depend on the data, seed and settings, never on threads. */
Test(pack, same_batches_at_1_and_4_threads)
{
	const uint32_t N = 32 * 40, L = 96;
	const char *dir = token_dataset(N, -1);

	for (int mode = 0; mode < 2; mode++) {
		uint64_t digest[2], steps[2];

		for (int k = 0; k < 2; k++) {
			pf_loader *l = pack_loader(dir, L, (pf_pack_mode)mode, 2, 2, k ? 4 : 1, true);
			seen s = { .n = N, .count = calloc(N, sizeof(uint32_t)) };

			run_epoch(l, L, (pf_pack_mode)mode, &s);
			digest[k] = s.digest;
			steps[k] = s.steps;
			pf_loader_free(l);
			free(s.count);
		}
		cr_assert_gt(steps[0], 3);
		cr_assert_eq(steps[0], steps[1]);
		cr_assert_eq(digest[0], digest[1], "mode %d: 1 and 4 threads differ", mode);
	}
}

static void create_fails(const char *features, uint32_t L, uint32_t pool, int mode,
			 const char *what)
{
	const char *dir = token_dataset(64, -1);
	const char *paths[] = { dir };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 2,
				 .features = features, .pack_length = L,
				 .pack_mode = (pf_pack_mode)mode, .pack_pool = pool };
	pf_loader *l = NULL;
	pf_error err;

	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -EINVAL, "%s", features);
	cr_assert_null(l);
	cr_assert(strstr(err.msg, what), "got \"%s\", want \"%s\"", err.msg, what);
}

Test(pack, bad_settings_are_named)
{
	create_fails("tokens:int32[*],label:int64[1]", 64, 0, 0,
		     "'label' has a fixed length ([1]) beside packed features");
	create_fails("tokens:int32[*],x:int32[4]:lengths", 64, 0, 0,
		     "'x' has a fixed length ([4]) beside packed features");
	create_fails("tokens:int32[*]", PF_PACK_LENGTH_MAX + 1, 0, 0,
		     "pack length 1048577 is too large (at most 1048576)");
	create_fails("tokens:int32[*]", 64, 65, 0, "pack pool of 65 open rows");
	create_fails("tokens:int32[*]", 64, 0, 5, "pack mode 5 is not first_fit or concat");
	create_fails("tokens:int32[*],tokens_positions:int32[*]", 64, 0, 0,
		     "'tokens_positions' would be made for 'tokens'");
}

/* A record without a packed feature is found while the epoch is planned
 * (its lengths read): pf_loader_create() fails, naming it. */
Test(pack, missing_feature_is_named)
{
	const char *dir = token_dataset(32 * 4, 40);
	const char *paths[] = { dir };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 1,
				 .features = "tokens:int32[*],targets:int32[*]", .pack_length = 64 };
	pf_loader *l = NULL;
	pf_error err;

	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -ENOMSG);
	cr_assert_null(l);
	cr_assert(strstr(err.msg, "feature 'tokens' is missing"), "%s", err.msg);
	cr_assert_eq(err.record, 40);
	cr_assert(strstr(err.file, "t.tfrecord.zst"), "%s", err.file);
}

Test(pack, mode_names)
{
	pf_pack_mode m = PF_PACK_CONCAT;

	cr_assert_eq(pf_pack_mode_parse("first-fit", &m), 0);
	cr_assert_eq(m, PF_PACK_FIRST_FIT);
	cr_assert_eq(pf_pack_mode_parse("concat", &m), 0);
	cr_assert_eq(m, PF_PACK_CONCAT);
	cr_assert_eq(pf_pack_mode_parse("first_fit", &m), 0);
	cr_assert_eq(m, PF_PACK_FIRST_FIT);
	cr_assert_eq(pf_pack_mode_parse("best_fit", &m), -EINVAL);
	cr_assert_eq(pf_pack_mode_parse("", &m), -EINVAL);
	cr_assert_eq(pf_pack_mode_parse(NULL, &m), -EINVAL);
	cr_assert_str_eq(pf_pack_mode_name(PF_PACK_CONCAT), "concat");
	cr_assert_str_eq(pf_pack_mode_name(PF_PACK_FIRST_FIT), "first_fit");
	cr_assert_null(pf_pack_mode_name((pf_pack_mode)9));
}

/* Hosts of a pod emulated in one process: every host knows the epoch's
 * steps before its first batch, all the same, and delivers that many;
 * no record goes to two hosts, and each record delivered is whole. */
static void hosts_agree(pf_pack_mode mode, uint32_t hosts, const char *dir, uint32_t N)
{
	const uint32_t L = 64;
	seen s = { .n = N, .count = calloc(N, sizeof(uint32_t)) };
	uint64_t steps0 = 0, delivered = 0;

	for (uint32_t h = 0; h < hosts; h++) {
		const char *paths[] = { dir };
		pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 2,
					 .cores_per_host = 2, .num_hosts = hosts, .host_index = h,
					 .threads = 2, .shuffle = true, .seed = 11,
					 .features = "tokens:int32[*],targets:int32[*]",
					 .pack_length = L, .pack_mode = mode };
		pf_loader *l;
		pf_loader_metrics m;
		pf_error err;
		uint64_t before = s.steps;

		cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
		if (h == 0)
			steps0 = pf_loader_steps_per_epoch(l);
		cr_assert_gt(steps0, 0);
		cr_assert_eq(pf_loader_steps_per_epoch(l), steps0, "host %u of %u", h, hosts);
		run_epoch(l, L, mode, &s);
		cr_assert_eq(s.steps - before, steps0, "host %u of %u: %llu steps", h, hosts,
			     (unsigned long long)(s.steps - before));
		pf_loader_get_metrics(l, &m);
		cr_assert_eq(m.steps_per_epoch, steps0);
		cr_assert_eq(m.pack_rows, steps0 * 4);
		delivered += m.pack_rows;
		pf_loader_free(l);
	}
	/* check_batch() failed on any token seen twice (positions in order
	 * per record, across every host); first_fit records are whole. */
	for (uint32_t id = 0; id < N && mode == PF_PACK_FIRST_FIT; id++)
		cr_assert(s.count[id] == 0 || s.count[id] == (tokens_of(id) < L ? tokens_of(id) : L),
			  "%u hosts: record %u has %u tokens", hosts, id, s.count[id]);
	cr_assert_eq(delivered, s.rows);
	free(s.count);
}

Test(pack, hosts_1_4_7_equal_steps_disjoint_records, .timeout = 300)
{
	const uint32_t N = 32 * 70;
	const char *dir = token_dataset(N, -1);

	for (int mode = 0; mode < 2; mode++) {
		hosts_agree((pf_pack_mode)mode, 1, dir, N);
		hosts_agree((pf_pack_mode)mode, 4, dir, N);
		hosts_agree((pf_pack_mode)mode, 7, dir, N);
	}
}
