/* SPDX-License-Identifier: Apache-2.0 */
/* A packing loader's checkpoints: pf_loader_save_state() anywhere in an
 * epoch (and at its end) resumes bit for bit, in both modes, shuffled, on
 * one host and as one of several, with a state under 64 KiB; states of
 * another kind, settings or topology are refused, saying what differs. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "testutil.h"

static const char *tool(void)
{
	const char *t = getenv("SHARDTOOL");

	cr_assert_not_null(t, "SHARDTOOL is not set (run through meson test)");
	return t;
}

/* 2,000 text records (median 40 tokens, to 400) in 4 indexed shards. */
static const char *text_dataset(void)
{
	const char *d = tu_tmpdir();

	cr_assert_eq(tu_system("%s synth --kind text --records 2000 --shards 2 --median-tokens 40 "
			       "--max-tokens 400 --seed 8 --out %s/plain >/dev/null && %s convert "
			       "--out %s/z --shards 4 --frame-size 16K %s/plain >/dev/null", tool(),
			       d, tool(), d, d), 0);
	return d;
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

static uint64_t batch_digest(const pf_batch *b)
{
	uint64_t d = (uint64_t)b->epoch << 48 ^ b->step << 24 ^ b->global_step;

	for (uint32_t c = 0; c < b->cores; c++)
		for (uint32_t t = 0; t < b->core[c].ntensors; t++) {
			const pf_tensor *tt = &b->core[c].tensors[t];

			d = d * 0x100000001b3ull ^
			    pf_crc32c(0, tt->data, (size_t)b->per_core_batch * tt->len * 4);
		}
	return d;
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
		s->digest[s->n++] = batch_digest(b);
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
	/* Another topology: not yet. */
	cfg.num_hosts = 4;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -ENOTSUP);
	cr_assert(strstr(err.msg, "state 0 was saved by host 0 of 2 hosts, 2 cores x 2 rows; "
			 "this loader is one of 4, 2 x 2"), "%s", err.msg);
	/* The same topology, another host: none is its. */
	cfg.num_hosts = 2;
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
