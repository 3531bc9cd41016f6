/* SPDX-License-Identifier: Apache-2.0 */
/* The packer (transform/pack.c): over random length sequences in both
 * modes, every record's values land once, in order, inside their segment,
 * with segment ids and positions consistent, no row over L, and rows once
 * closed never written again; and its settings' errors. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pf_transform.h"
#include "testutil.h"

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A length like a text corpus's: log-normal around `median`, some 0. */
static uint32_t random_length(uint64_t *s, uint32_t median, uint32_t max)
{
	double u1 = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
	double u2 = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
	double z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
	double v = median * exp(1.2 * z);

	if (rng_next(s) % 50 == 0)
		return 0;
	return v > max ? max : (uint32_t)v;
}

#define MAXROWS 20000

/* The rows as a caller keeps them: value = record * 2^20 + position + 1
 * (0 is padding), per feature. */
typedef struct rows {
	uint32_t L, nf;
	int32_t *val[2], *seg[2], *pos[2];
	bool *used;
} rows;

static void rows_init(rows *r, uint32_t L, uint32_t nf)
{
	r->L = L;
	r->nf = nf;
	for (uint32_t f = 0; f < nf; f++) {
		r->val[f] = calloc((size_t)MAXROWS * L, 4);
		r->seg[f] = calloc((size_t)MAXROWS * L, 4);
		r->pos[f] = calloc((size_t)MAXROWS * L, 4);
		cr_assert(r->val[f] && r->seg[f] && r->pos[f]);
	}
	r->used = calloc(MAXROWS, 1);
}

static void rows_free(rows *r)
{
	for (uint32_t f = 0; f < r->nf; f++) {
		free(r->val[f]);
		free(r->seg[f]);
		free(r->pos[f]);
	}
	free(r->used);
}

static void run(pf_packer_mode mode, uint32_t L, uint32_t pool, uint32_t nf, uint32_t nrec,
		uint32_t median, uint64_t seed)
{
	pf_packer *p = calloc(1, sizeof(*p));
	uint32_t *lens = calloc((size_t)nrec * nf, 4);
	int32_t *src = calloc(1u << 16, 4);
	static pf_pack_piece pieces[1024];
	uint64_t closed = 0, nrows, empty = 0, trunc = 0, tvals = 0, values = 0;
	pf_error err;
	rows r;

	cr_assert(p && lens && src);
	rows_init(&r, L, nf);
	cr_assert_eq(pf_packer_init(p, L, nf, mode, pool, &err), 0, "%s", err.msg);
	for (uint32_t i = 0; i < nrec; i++) {
		uint32_t *len = &lens[(size_t)i * nf], total = 0;
		int k;

		len[0] = random_length(&seed, median, 1u << 16);
		for (uint32_t f = 1; f < nf; f++)
			len[f] = mode == PF_PACKER_CONCAT ? len[0] :
				 random_length(&seed, median, 1u << 16);
		for (uint32_t f = 0; f < nf; f++) {
			total += len[f];
			if (mode == PF_PACKER_FIRST_FIT && len[f] > L) {
				tvals += len[f] - L;
				values += L;
			} else {
				values += len[f];
			}
		}
		empty += total == 0;
		for (uint32_t f = 0; f < nf && mode == PF_PACKER_FIRST_FIT; f++)
			if (len[f] > L) {
				trunc++;
				break;
			}
		k = pf_pack_place(p, len, pieces, 1024, &closed, &err);
		cr_assert_geq(k, 0, "%s", err.msg);
		cr_assert_eq(k == 0, total == 0);
		for (int j = 0; j < k; j++) {
			const pf_pack_piece *pc = &pieces[j];
			static uint64_t last_closed;

			if (i == 0 && j == 0)
				last_closed = 0;
			/* never into a row already final */
			cr_assert_geq(pc->row, last_closed, "record %u into row %llu, closed below %llu",
				      i, (unsigned long long)pc->row, (unsigned long long)last_closed);
			if (j == k - 1)
				last_closed = closed;
			cr_assert_lt(pc->row, MAXROWS);
			r.used[pc->row] = true;
			cr_assert_geq(pc->segment, 1);
			for (uint32_t f = 0; f < nf; f++) {
				cr_assert_leq((uint64_t)pc->at[f] + pc->count[f], L, "row over L");
				for (uint32_t v = 0; v < pc->count[f]; v++)
					src[pc->from + v] = (int32_t)(((i & 0x7ff) << 20) |
								      (pc->from + v + 1));
				pf_pack_copy(pc, f, src, 4, r.val[f] + pc->row * L,
					     r.seg[f] + pc->row * L, r.pos[f] + pc->row * L);
			}
		}
	}
	nrows = pf_pack_finish(p);
	cr_assert_lt(nrows, MAXROWS);
	cr_assert_eq(p->empty_records, empty);
	cr_assert_eq(p->records, nrec - empty);
	cr_assert_eq(p->truncated_records, trunc);
	cr_assert_eq(p->truncated_values, tvals);
	cr_assert_eq(p->values, values);

	/* Walk the rows in order: segments in order, each a run of
	 * positions 0.. (or continuing, in concat), values matching. */
	{
		uint64_t next_rec = 0, seen_values = 0;
		uint32_t cont = 0;	/* concat: values of next_rec already seen */

		for (uint64_t row = 0; row < nrows; row++) {
			cr_assert(r.used[row], "row %llu never used", (unsigned long long)row);
			for (uint32_t f = 0; f < nf; f++) {
				const int32_t *val = r.val[f] + row * L, *seg = r.seg[f] + row * L,
					      *pos = r.pos[f] + row * L;
				uint32_t fill = 0, expect_seg = 1;

				while (fill < L && seg[fill]) {
					uint32_t s = (uint32_t)seg[fill], n = 0;

					/* with two features a record may have no
					 * values in one: its id is skipped there */
					if (nf == 1)
						cr_assert_eq(s, expect_seg, "row %llu: segment %u after %u",
							     (unsigned long long)row, s, expect_seg - 1);
					else
						cr_assert_geq(s, expect_seg, "row %llu: segment %u after %u",
							      (unsigned long long)row, s, expect_seg - 1);
					expect_seg = s;
					while (fill + n < L && seg[fill + n] == (int32_t)s) {
						cr_assert_eq(val[fill + n] & 0xfffff,
							     pos[fill + n] + 1);
						cr_assert_eq((uint32_t)val[fill + n] >> 20,
							     (uint32_t)val[fill] >> 20);
						if (n)
							cr_assert_eq(pos[fill + n], pos[fill + n - 1] + 1);
						n++;
					}
					if (mode == PF_PACKER_FIRST_FIT)
						cr_assert_eq(pos[fill], 0);
					seen_values += n;
					fill += n;
					expect_seg++;
				}
				/* padding after: zeros */
				for (uint32_t v = fill; v < L; v++)
					cr_assert(!seg[v] && !pos[v] && !val[v]);
				if (mode == PF_PACKER_CONCAT && row + 1 < nrows)
					cr_assert_eq(fill, L, "concat: row %llu not full",
						     (unsigned long long)row);
			}
		}
		cr_assert_eq(seen_values, values, "every value once");
		/* concat: the records in order, each whole and continuing */
		if (mode == PF_PACKER_CONCAT && nf == 1) {
			for (uint64_t row = 0; row < nrows; row++) {
				const int32_t *val = r.val[0] + row * L, *pos = r.pos[0] + row * L;

				for (uint32_t v = 0; v < L && r.seg[0][row * L + v]; v++) {
					while (lens[next_rec] == 0 ||
					       cont == lens[next_rec]) {
						next_rec++;
						cont = 0;
					}
					cr_assert_eq((uint32_t)val[v] >> 20, next_rec & 0x7ff);
					cr_assert_eq((uint32_t)pos[v], cont);
					cont++;
				}
			}
		}
	}
	rows_free(&r);
	free(p);
	free(lens);
	free(src);
}

Test(pack, first_fit_invariants)
{
	run(PF_PACKER_FIRST_FIT, 2048, 8, 1, 3000, 300, 1);
	run(PF_PACKER_FIRST_FIT, 512, 1, 1, 3000, 300, 2);
	run(PF_PACKER_FIRST_FIT, 512, 64, 2, 3000, 100, 3);
	run(PF_PACKER_FIRST_FIT, 7, 3, 2, 2000, 3, 4);
}

Test(pack, concat_invariants)
{
	run(PF_PACKER_CONCAT, 2048, 0, 1, 3000, 300, 5);
	run(PF_PACKER_CONCAT, 100, 0, 1, 3000, 300, 6);
	run(PF_PACKER_CONCAT, 256, 0, 2, 2000, 100, 7);
	run(PF_PACKER_CONCAT, 1, 0, 1, 500, 3, 8);
}

/* A plain first fit, written out: the pool of 2 rows of 10. */
Test(pack, first_fit_by_hand)
{
	pf_packer p;
	pf_pack_piece pc[4];
	uint64_t closed;
	pf_error err;
	const uint32_t lens[] = { 6, 5, 4, 3, 12, 1 };
	const uint64_t want_row[] = { 0, 1, 0, 1, 2, 1 };
	const uint32_t want_at[] = { 0, 0, 6, 5, 0, 8 };
	const uint32_t want_seg[] = { 1, 1, 2, 2, 1, 3 };
	const uint64_t want_closed[] = { 0, 0, 0, 0, 1, 1 };

	cr_assert_eq(pf_packer_init(&p, 10, 1, PF_PACKER_FIRST_FIT, 2, &err), 0);
	for (int i = 0; i < 6; i++) {
		cr_assert_eq(pf_pack_place(&p, &lens[i], pc, 4, &closed, &err), 1);
		cr_assert_eq(pc[0].row, want_row[i], "record %d", i);
		cr_assert_eq(pc[0].at[0], want_at[i], "record %d", i);
		cr_assert_eq(pc[0].segment, want_seg[i], "record %d", i);
		cr_assert_eq(closed, want_closed[i], "record %d", i);
	}
	cr_assert_eq(pc[0].count[0], 1);
	cr_assert_eq(p.truncated_records, 1);
	cr_assert_eq(p.truncated_values, 2);
	cr_assert_eq(pf_pack_finish(&p), 3);
}

Test(pack, concat_by_hand)
{
	pf_packer p;
	pf_pack_piece pc[4];
	uint64_t closed;
	pf_error err;
	uint32_t len = 7;

	cr_assert_eq(pf_packer_init(&p, 4, 1, PF_PACKER_CONCAT, 0, &err), 0);
	cr_assert_eq(pf_pack_place(&p, &len, pc, 4, &closed, &err), 2);
	cr_assert_eq(pc[0].row, 0);
	cr_assert_eq(pc[0].count[0], 4);
	cr_assert_eq(pc[1].row, 1);
	cr_assert_eq(pc[1].from, 4);
	cr_assert_eq(pc[1].count[0], 3);
	cr_assert_eq(closed, 1);
	len = 1;
	cr_assert_eq(pf_pack_place(&p, &len, pc, 4, &closed, &err), 1);
	cr_assert_eq(pc[0].row, 1);
	cr_assert_eq(pc[0].segment, 2);
	cr_assert_eq(closed, 2, "row 1 is full");
	cr_assert_eq(pf_pack_finish(&p), 2);
	/* too few pieces */
	cr_assert_eq(pf_packer_init(&p, 4, 1, PF_PACKER_CONCAT, 0, &err), 0);
	len = 9;
	cr_assert_eq(pf_pack_place(&p, &len, pc, 2, &closed, &err), -ENOBUFS);
}

Test(pack, bad_settings)
{
	pf_packer p;
	pf_error err;
	uint32_t len[2] = { 3, 4 };
	pf_pack_piece pc[4];
	uint64_t closed;

	cr_assert_eq(pf_packer_init(&p, 0, 1, PF_PACKER_FIRST_FIT, 0, &err), -EINVAL);
	cr_assert(strstr(err.msg, "pack length 0 is out of range 1..1048576"), "%s", err.msg);
	cr_assert_eq(pf_packer_init(&p, PF_PACKER_LENGTH_MAX + 1, 1, PF_PACKER_FIRST_FIT, 0, &err),
		     -EINVAL);
	cr_assert_eq(pf_packer_init(&p, 8, 0, PF_PACKER_FIRST_FIT, 0, &err), -EINVAL);
	cr_assert_eq(pf_packer_init(&p, 8, 17, PF_PACKER_FIRST_FIT, 0, &err), -EINVAL);
	cr_assert_eq(pf_packer_init(&p, 8, 1, PF_PACKER_FIRST_FIT, 65, &err), -EINVAL);
	cr_assert(strstr(err.msg, "pack pool of 65 open rows"), "%s", err.msg);
	cr_assert_eq(pf_packer_init(&p, 8, 1, (pf_packer_mode)7, 0, &err), -EINVAL);
	cr_assert(strstr(err.msg, "pack mode 7"), "%s", err.msg);
	cr_assert_eq(pf_packer_init(&p, 8, 2, PF_PACKER_CONCAT, 0, &err), 0);
	cr_assert_eq(pf_pack_place(&p, len, pc, 4, &closed, &err), -EINVAL);
	cr_assert(strstr(err.msg, "feature 0 has 3 values, feature 1 has 4"), "%s", err.msg);
}
