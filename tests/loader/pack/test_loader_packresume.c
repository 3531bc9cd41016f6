/* SPDX-License-Identifier: Apache-2.0 */
/* A packing loader's checkpoints: pf_loader_save_state() anywhere in an
 * epoch (and at its end) resumes bit for bit, in both modes, shuffled, on
 * one host and as one of several, with a state under 64 KiB; 4 hosts
 * resume as 2 with nothing repeated and less than a global batch lost;
 * states of another kind or settings are refused, saying what differs. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "pack_util.h"
#include "testutil.h"

/* 2,000 text records (median 40 tokens, to 400) in 4 indexed shards. */
static const char *text_dataset(void)
{
	return pu_text_dataset(2000, 2, 40, 400, 8, 4, "16K");
}

#define MAX_STEPS 4096

typedef struct steps {
	uint64_t n;
	uint64_t digest[MAX_STEPS];	/* each batch's bytes and numbers */
} steps;

static pf_loader_config config(const char *const *paths, pf_pack_mode mode, uint32_t hosts,
			       uint32_t host)
{
	return (pf_loader_config){ .paths = paths, .npaths = 1, .per_core_batch = 2,
				   .cores_per_host = 2,
				   .features = "tokens:int32[*],targets:int32[*]",
				   .pack_length = 96, .pack_mode = mode, .shuffle = true,
				   .shuffle_window = 256, .seed = 21, .epochs = 2,
				   .num_hosts = hosts, .host_index = host, .threads = 2 };
}

#define ALL UINT64_MAX

/* n steps of a loader (ALL: to the end) into s, from s->n on; with
 * blob, the state after them into *blob. */
static void take(pf_loader *l, uint64_t n, steps *s, void **blob, size_t *len,
		 const char *what)
{
	pf_batch *b;
	int ret = 1;

	for (uint64_t k = 0; k < n && (ret = pf_loader_next(l, &b)) == 1; k++) {
		cr_assert_lt(s->n, MAX_STEPS);
		s->digest[s->n++] = pu_batch_digest(b);
		pf_loader_release(l, b);
	}
	cr_assert_geq(ret, 0, "%s: %s", what, pf_loader_last_error(l)->msg);
	if (blob) {
		int64_t m = pf_loader_save_state(l, NULL, 0);

		cr_assert_gt(m, 0, "save_state: %lld", (long long)m);
		*blob = malloc((size_t)m);
		cr_assert_eq(pf_loader_save_state(l, *blob, (size_t)m), m);
		*len = (size_t)m;
	}
}

static pf_loader *create(const pf_loader_config *cfg)
{
	pf_loader *l;
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, cfg, &err), 0, "%s", err.msg);
	return l;
}

/* For each save point: the run to it, saved, and a new loader from the
 * state, deliver the reference's steps exactly. */
static void resume_everywhere(const char *dir, pf_pack_mode mode, uint32_t hosts, uint32_t host)
{
	const char *paths[] = { dir };
	pf_loader_config cfg = config(paths, mode, hosts, host);
	steps *ref = calloc(1, sizeof(*ref)), *got = calloc(1, sizeof(*got));
	pf_loader *l = create(&cfg);
	uint64_t spe = pf_loader_steps_per_epoch(l);
	uint64_t points[] = { 0, 1, 2, 3, 7, spe / 2, spe - 1, spe, spe + 1, spe + 5, 2 * spe - 3,
			      ALL };

	take(l, ALL, ref, NULL, NULL, "the reference");
	pf_loader_free(l);
	/* Each epoch planned for its order: their steps may differ. */
	cr_assert_geq(ref->n, spe + spe / 2, "%llu steps, epochs of %llu",
		      (unsigned long long)ref->n, (unsigned long long)spe);
	cr_assert_gt(spe, 12);
	for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++) {
		pf_state_blob sb;
		void *blob;
		size_t len;

		char what[128];

		snprintf(what, sizeof(what), "saved after step %llu (%s, host %u of %u)",
			 (unsigned long long)points[i], mode ? "concat" : "first_fit", host, hosts);
		got->n = 0;
		l = create(&cfg);
		take(l, points[i], got, &blob, &len, what);
		pf_loader_free(l);
		cr_assert_lt(len, 64u << 10, "a state of %zu bytes", len);
		sb = (pf_state_blob){ blob, len };
		cfg.resume = &sb;
		cfg.nresume = 1;
		l = create(&cfg);
		take(l, ALL, got, NULL, NULL, what);
		pf_loader_free(l);
		cfg.resume = NULL;
		cfg.nresume = 0;
		cr_assert_eq(got->n, ref->n, "saved after step %llu: %llu steps in all, %llu",
			     (unsigned long long)points[i], (unsigned long long)got->n,
			     (unsigned long long)ref->n);
		for (uint64_t k = 0; k < ref->n; k++)
			cr_assert_eq(got->digest[k], ref->digest[k],
				     "saved after step %llu (%s, host %u of %u): step %llu differs",
				     (unsigned long long)points[i], mode ? "concat" : "first_fit",
				     host, hosts, (unsigned long long)k);
		free(blob);
	}
	free(ref);
	free(got);
}

Test(packresume, first_fit_resumes_bit_for_bit_anywhere)
{
	char z[1024];

	snprintf(z, sizeof(z), "%s/z", text_dataset());
	resume_everywhere(z, PF_PACK_FIRST_FIT, 1, 0);
}

Test(packresume, concat_resumes_bit_for_bit_anywhere)
{
	char z[1024];

	snprintf(z, sizeof(z), "%s/z", text_dataset());
	resume_everywhere(z, PF_PACK_CONCAT, 1, 0);
}

/* One host of three (its own state among the three hosts'). */
Test(packresume, a_host_of_three_resumes_bit_for_bit)
{
	char z[1024];

	snprintf(z, sizeof(z), "%s/z", text_dataset());
	resume_everywhere(z, PF_PACK_FIRST_FIT, 3, 1);
	resume_everywhere(z, PF_PACK_CONCAT, 3, 2);
}

/* States of another kind, settings or topology: refused by name. */
Test(packresume, other_states_are_refused)
{
	char z[1024];
	const char *paths[] = { z };
	pf_loader_config cfg, plain;
	pf_state_blob sb, pb;
	pf_loader *l;
	pf_error err;
	void *blob, *pblob;
	size_t len, plen;
	steps *s = calloc(1, sizeof(*s));

	snprintf(z, sizeof(z), "%s/z", text_dataset());
	cfg = config(paths, PF_PACK_FIRST_FIT, 2, 0);
	l = create(&cfg);
	take(l, 3, s, &blob, &len, "packing");
	pf_loader_free(l);
	sb = (pf_state_blob){ blob, len };
	plain = (pf_loader_config){ .paths = paths, .npaths = 1, .per_core_batch = 4,
				    .features = "tokens:int32[64]", .seed = 21 };
	l = create(&plain);
	take(l, 3, s, &pblob, &plen, "plain");
	pf_loader_free(l);
	pb = (pf_state_blob){ pblob, plen };

	/* A packing loader's state in a loader that does not pack. */
	plain.resume = &sb;
	plain.nresume = 1;
	cr_assert_eq(pf_loader_create(&l, &plain, &err), -EINVAL);
	cr_assert(strstr(err.msg, "state 0 was saved by a packing loader (pack_length 96, "
			 "first_fit); this loader does not pack"), "%s", err.msg);
	/* And the other way round. */
	cfg.resume = &pb;
	cfg.nresume = 1;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "state 0 was saved by a loader without packing"), "%s", err.msg);
	/* Other pack settings. */
	cfg.resume = &sb;
	cfg.pack_length = 100;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "state 0 was saved packing 2 features into rows of 96 "
			 "(first_fit, pool 8); this loader packs 2 into rows of 100"), "%s",
		  err.msg);
	cfg.pack_length = 96;
	cfg.pack_mode = PF_PACK_CONCAT;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "(first_fit, pool 8); this loader packs 2 into rows of 96 "
			 "(concat, pool 1)"), "%s", err.msg);
	cfg.pack_mode = PF_PACK_FIRST_FIT;
	/* The same topology, another host: none is its. */
	cfg.host_index = 1;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "none is host 1's"), "%s", err.msg);
	/* Every truncation is refused (the envelope). */
	cfg.host_index = 0;
	for (size_t cut = 0; cut < len; cut += 7) {
		sb.len = cut;
		cr_assert_lt(pf_loader_create(&l, &cfg, &err), 0, "cut at %zu", cut);
		cr_assert(strstr(err.msg, "state 0:"), "%s", err.msg);
	}
	free(blob);
	free(pblob);
	free(s);
}

/* ------------------------------------------------------------------ */
/* Another host count: 4 hosts stopped after 5 steps, resumed as 2.     */

#define POS_BITS 12u	/* token = record id << 12 | position */

static int sink(void *ctx, const void *buf, size_t len)
{
	return fwrite(buf, 1, len, ctx) == len ? 0 : -EIO;
}

/* Record id's tokens: 1..60 mostly, every 13th 100..400 (past L = 96). */
static uint32_t tokens_of(uint64_t id)
{
	uint64_t x = id * 0x9e3779b97f4a7c15ull;

	x ^= x >> 29;
	return id % 13 == 7 ? 100 + (uint32_t)(x % 300) : 1 + (uint32_t)(x % 60);
}

/* n records {"tokens": [id << 12 | i]} in 3 indexed shards with their
 * lengths (a schema), so that the plan reads them from the indexes. */
static const char *id_dataset(uint64_t n)
{
	const char *d = tu_tmpdir();
	int64_t *tok = malloc(512 * sizeof(*tok));
	uint8_t *rec = malloc(1 << 16);
	pf_arena arena;

	cr_assert_eq(pf_arena_init(&arena, 1 << 20), 0);
	for (int s = 0; s < 3; s++) {
		char p[512];
		pf_shard_writer_config wc = { .frame_size = 8192 };
		pf_shard_writer *w;
		pf_schema *schema;
		pf_error err;
		FILE *f;

		snprintf(p, sizeof(p), "%s/ids-%d.tfrecord.zst", d, s);
		f = fopen(p, "wb");
		cr_assert(f);
		cr_assert_eq(pf_shard_writer_create(&w, &wc, sink, f), 0);
		cr_assert_eq(pf_schema_create(&schema), 0);
		for (uint64_t id = n * s / 3; id < n * (s + 1) / 3; id++) {
			pf_feature fs = { .name = "tokens", .name_len = 6, .kind = PF_KIND_INT64,
					  .count = tokens_of(id), .v.int64s = tok };
			pf_example ex;
			int64_t m;

			for (uint32_t i = 0; i < fs.count; i++)
				tok[i] = (int64_t)(id << POS_BITS | i);
			m = pf_example_encode(&fs, 1, rec, 1 << 16);
			cr_assert_gt(m, 0);
			pf_arena_reset(&arena);
			cr_assert_eq(pf_example_decode(rec, (size_t)m, &arena, &ex, &err), 0);
			cr_assert_eq(pf_schema_add(schema, &ex), 0);
			cr_assert_eq(pf_shard_writer_add(w, rec, (size_t)m, &err), 0);
		}
		cr_assert_eq(pf_shard_writer_set_schema(w, schema), 0);
		cr_assert_eq(pf_shard_writer_close(w, &err), 0);
		pf_shard_writer_free(w);
		pf_schema_free(schema);
		cr_assert_eq(fclose(f), 0);
	}
	pf_arena_release(&arena);
	free(tok);
	free(rec);
	return d;
}

/* Each record's tokens a batch delivers, counted in seen[id]; the steps. */
static uint64_t deliver(pf_loader *l, uint64_t steps, uint32_t *seen)
{
	uint64_t k = 0;
	pf_batch *b;
	int ret = 1;

	for (; k < steps && (ret = pf_loader_next(l, &b)) == 1; k++) {
		for (uint32_t c = 0; c < b->cores; c++) {
			const pf_tensor *t = &b->core[c].tensors[0], *seg = &b->core[c].tensors[1];

			for (uint32_t r = 0; r < b->per_core_batch; r++)
				for (uint32_t v = 0; v < t->len; v++)
					if (((const int32_t *)seg->data)[(size_t)r * t->len + v])
						seen[((const uint32_t *)t->data)[(size_t)r * t->len
										 + v] >>
						     POS_BITS]++;
		}
		pf_loader_release(l, b);
	}
	cr_assert_geq(ret, 0, "%s", pf_loader_last_error(l)->msg);
	return k;
}

static pf_loader_config id_config(const char *const *paths, uint32_t hosts, uint32_t host)
{
	return (pf_loader_config){ .paths = paths, .npaths = 1, .per_core_batch = 8,
				   .cores_per_host = 2, .features = "tokens:int32[*]",
				   .pack_length = 96, .shuffle = true, .seed = 5,
				   .num_hosts = hosts, .host_index = host, .threads = 2 };
}

/* Tokens of the records seen[] does not hold (each capped at L). */
static uint64_t missing_tokens(const uint32_t *seen, uint64_t n)
{
	uint64_t t = 0;

	for (uint64_t id = 0; id < n; id++)
		if (!seen[id])
			t += tokens_of(id) < 96 ? tokens_of(id) : 96;
	return t;
}

Test(packresume, four_hosts_resume_as_two)
{
	const uint64_t n = 3000;
	char dir[1024];
	const char *paths[] = { dir };
	uint32_t *ref = calloc(n, sizeof(*ref)), *got = calloc(n, sizeof(*got));
	pf_state_blob sb[4];
	void *blob[4];
	uint64_t steps[2];

	snprintf(dir, sizeof(dir), "%s", id_dataset(n));
	/* A run never stopped: what its epoch delivers. */
	for (uint32_t h = 0; h < 4; h++) {
		pf_loader_config cfg = id_config(paths, 4, h);
		pf_loader *l = create(&cfg);

		deliver(l, UINT64_MAX, ref);
		pf_loader_free(l);
	}
	/* Four hosts, 5 steps each, stopped. */
	for (uint32_t h = 0; h < 4; h++) {
		pf_loader_config cfg = id_config(paths, 4, h);
		pf_loader *l = create(&cfg);
		int64_t m;

		cr_assert_eq(deliver(l, 5, got), 5);
		m = pf_loader_save_state(l, NULL, 0);
		cr_assert_gt(m, 0);
		blob[h] = malloc((size_t)m);
		cr_assert_eq(pf_loader_save_state(l, blob[h], (size_t)m), m);
		sb[h] = (pf_state_blob){ blob[h], (size_t)m };
		pf_loader_free(l);
	}
	/* Two hosts from the four states: to the epoch's end. */
	for (uint32_t h = 0; h < 2; h++) {
		pf_loader_config cfg = id_config(paths, 2, h);
		pf_loader *l;

		cfg.resume = sb;
		cfg.nresume = 4;
		l = create(&cfg);
		steps[h] = deliver(l, UINT64_MAX, got);
		pf_loader_free(l);
	}
	cr_assert_eq(steps[0], steps[1], "the new hosts' steps: %llu and %llu",
		     (unsigned long long)steps[0], (unsigned long long)steps[1]);
	cr_assert_gt(steps[0], 3);
	/* Nothing twice: each record's tokens once (first_fit: whole, cut
	 * at L), or not at all. */
	for (uint64_t id = 0; id < n; id++) {
		uint32_t want = tokens_of(id) < 96 ? tokens_of(id) : 96;

		cr_assert(got[id] == 0 || got[id] == want, "record %llu: %u tokens of %u",
			  (unsigned long long)id, got[id], want);
		cr_assert(ref[id] == 0 || ref[id] == want);
	}
	/* Lost to the resume, beyond what the run never stopped leaves: less
	 * than one global batch of rows (2 hosts x 16 rows x 96 values). */
	cr_assert_lt(missing_tokens(got, n), missing_tokens(ref, n) + 2 * 16 * 96,
		     "missing %llu tokens, the run never stopped %llu",
		     (unsigned long long)missing_tokens(got, n),
		     (unsigned long long)missing_tokens(ref, n));
	for (uint32_t h = 0; h < 4; h++)
		free(blob[h]);
	free(ref);
	free(got);
}
