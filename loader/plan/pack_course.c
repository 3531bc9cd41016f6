/* SPDX-License-Identifier: Apache-2.0 */
/* A packing loader's course, as pure functions: its inner loader's
 * records in the order that loader delivers them (course.c's which, group
 * by group), their packed lengths (every record's, in dataset order), and
 * the packer (transform/) run over those lengths alone, as pack.c runs it
 * over the records.  From it: the course moved on by packed steps
 * (skip_steps: the inner steps to skip and the packer where they end,
 * nothing read) and the pieces of records each row of a packed step
 * holds (pf_loader_records_of()).  Not here: packing the values
 * (loader/pack/pack.c), the epoch's steps (pack_plan.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pf_transform.h"
#include "plan_internal.h"

/* A walk over the inner records of one epoch of a course. */
typedef struct walker {
	const pf_pack_course *c;
	pf_which w;
	uint64_t *file_base;	/* each file's first record in dataset order */
	pf_plan_record *recs;	/* an inner step's */
	uint32_t ib;		/* records an inner step */
	pf_pack_piece *pieces;
	uint32_t npieces;
	pf_packer packer;
	uint64_t closed;	/* rows below it are final */
} walker;

/* What a walk does with each piece it places: @return 1 to stop. */
typedef int (*piece_fn)(void *ctx, const walker *wk, const pf_pack_piece *pc,
			const pf_plan_record *rec);

static int walker_init(walker *wk, const pf_pack_course *c)
{
	memset(wk, 0, sizeof(*wk));
	wk->c = c;
	pf_which_init(&wk->w, &c->inner);
	wk->ib = c->inner.o.topo.cores * c->inner.o.topo.per_core_batch;
	wk->npieces = c->cap / c->packer.length + 2;
	wk->file_base = pf_calloc(c->inner.o.ds->nfiles + 1, sizeof(*wk->file_base));
	wk->recs = pf_calloc(wk->ib, sizeof(*wk->recs));
	wk->pieces = pf_calloc(wk->npieces, sizeof(*wk->pieces));
	if (!wk->file_base || !wk->recs || !wk->pieces)
		return -ENOMEM;
	pf_dataset_file_layout(c->inner.o.ds, wk->file_base, NULL);
	return 0;
}

static void walker_release(walker *wk)
{
	pf_which_release(&wk->w);
	pf_free(wk->file_base);
	pf_free(wk->recs);
	pf_free(wk->pieces);
}

/* Epoch e's inner steps: global steps [*g0, *g0 + *n) of the inner run. */
static void epoch_groups(const pf_run *r, uint32_t e, uint64_t *g0, uint64_t *n)
{
	const pf_run_start *st = &r->start;
	uint64_t first = st->resumed ? st->resume.steps : r->steps_per_epoch;

	if (e == st->epoch) {
		*g0 = st->gstep;
		*n = first;
	} else {
		*g0 = st->gstep + first + (uint64_t)(e - st->epoch - 1) * r->steps_per_epoch;
		*n = r->steps_per_epoch;
	}
}

/* Place inner step g's records with wk->packer, each piece told to fn
 * (which may stop the walk: 1).  @return 0, 1 (stopped), or <0 with err. */
static int place_group(walker *wk, uint64_t g, piece_fn fn, void *ctx, pf_error *err)
{
	const pf_pack_course *c = wk->c;
	uint64_t in_epoch;
	uint32_t epoch;
	int stop = 0, ret = pf_which_step(&wk->w, g, &epoch, &in_epoch, wk->recs, err);

	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < wk->ib; i++) {
		const uint32_t *len = c->len + (wk->file_base[wk->recs[i].file] +
						wk->recs[i].record) * c->nf;
		uint32_t l[PF_PACKER_MAX_FEATURES];
		int k;

		for (uint32_t f = 0; f < c->nf; f++)
			l[f] = len[f] < c->cap ? len[f] : c->cap;
		k = pf_pack_place(&wk->packer, l, wk->pieces, wk->npieces, &wk->closed, err);
		if (k < 0)
			return k;
		/* All of the record's pieces, then the stop (wk->closed is
		 * the packer's after the whole record). */
		for (int j = 0; fn && j < k; j++)
			stop |= fn(ctx, wk, &wk->pieces[j], &wk->recs[i]);
		if (stop)
			return 1;
	}
	return 0;
}

/* The packer's settings with no row open: a fresh epoch's. */
static pf_packer empty_packer(const pf_packer *p)
{
	pf_packer e = *p;

	e.nopen = 0;
	e.next_row = 0;
	return e;
}

/* Rows [lo, hi) of an epoch: the pieces placed in them, counted. */
typedef struct counted {
	uint64_t lo, hi;
	pf_pack_skip *out;
} counted;

static int count_piece(void *ctx, const walker *wk, const pf_pack_piece *pc,
		       const pf_plan_record *rec)
{
	counted *ct = ctx;

	(void)rec;
	if (pc->row >= ct->lo && pc->row < ct->hi) {
		ct->out->records++;
		for (uint32_t f = 0; f < wk->c->nf; f++)
			ct->out->values += pc->count[f];
	}
	return 0;
}

/* Walk epoch e from the inner step it starts at with packer p: the last
 * inner step (*g, of the epoch's, from 0) before which the packer has
 * opened no row at or past row `hi` (*at: the packer there), counting
 * the pieces placed in rows [lo, hi) (placing on until those rows are
 * final).  @return 0 or <0 with err. */
static int walk_to(const pf_pack_course *c, uint32_t e, const pf_packer *p, uint64_t lo,
		   uint64_t hi, uint64_t *g, pf_packer *at, pf_pack_skip *out, pf_error *err)
{
	counted ct = { lo, hi, out };
	uint64_t g0, n, t;
	bool found = false;
	walker wk;
	int ret = walker_init(&wk, c);

	epoch_groups(&c->inner, e, &g0, &n);
	wk.packer = *p;
	wk.closed = 0;
	*g = 0;
	*at = *p;
	for (t = 0; ret == 0 && t < n; t++) {
		if (wk.packer.next_row <= hi) {
			*g = t;
			*at = wk.packer;
		} else {
			found = true;
			if (wk.closed >= hi)
				break;
		}
		ret = place_group(&wk, g0 + t, count_piece, &ct, err);
	}
	if (ret == 0 && !found && wk.packer.next_row <= hi) {
		/* Every group placed (the rows up to hi only close at the
		 * epoch's end). */
		*g = n;
		*at = wk.packer;
	}
	walker_release(&wk);
	if (ret == -ENOMEM)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory");
	return ret;
}

/* Epoch e's steps (every host's) and this host's rows. */
static int epoch_plan(const pf_pack_course *c, uint32_t e, uint64_t *steps, uint64_t *rows,
		      pf_error *err)
{
	pf_packer empty = empty_packer(&c->packer);
	int ret = pf_pack_plan_steps(&c->inner.o, &empty, c->inner.seed, e, c->len, c->nf, c->cap,
				     c->B, steps, rows);

	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				    "planning the packed epoch %u: %s", e, pf_strerror(ret));
	return 0;
}

int pf_pack_course_skip(pf_pack_course *c, uint64_t n, pf_pack_skip *out, pf_error *err)
{
	uint64_t left = c->epoch_steps > c->step ? c->epoch_steps - c->step : 0;
	uint64_t g, g0, first, gstep0 = c->gstep, taken = 0;
	pf_packer at;
	uint32_t e;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!n)
		return 0;
	if (c->epoch < c->epochs && n < left) {
		/* Inside the epoch it starts in. */
		ret = walk_to(c, c->epoch, &c->packer, c->step * c->B, (c->step + n) * c->B, &g,
			      &at, out, err);
		if (ret < 0)
			return ret;
		out->inner_steps = g;
		c->packer = at;
		c->step += n;
		c->gstep += n;
		return 0;
	}
	/* The rest of it, then whole epochs, then a part of one. */
	if (c->epoch < c->epochs) {
		pf_pack_skip rest = { 0 };

		ret = walk_to(c, c->epoch, &c->packer, c->step * c->B, c->epoch_steps * c->B,
			      &g, &at, &rest, err);
		if (ret < 0)
			return ret;
		out->records += rest.records;
		out->values += rest.values;
		epoch_groups(&c->inner, c->epoch, &g0, &first);
		out->inner_steps = first;
		n -= left;
		taken = left;
	}
	for (e = c->epoch + 1; e < c->epochs; e++) {
		uint64_t steps, rows;
		pf_packer empty = empty_packer(&c->packer);

		ret = epoch_plan(c, e, &steps, &rows, err);
		if (ret < 0)
			return ret;
		if (n >= steps) {
			pf_pack_skip whole = { 0 };

			ret = walk_to(c, e, &empty, 0, steps * c->B, &g, &at, &whole, err);
			if (ret < 0)
				return ret;
			out->records += whole.records;
			out->values += whole.values;
			out->inner_steps += c->inner.steps_per_epoch;
			n -= steps;
			taken += steps;
			continue;
		}
		ret = walk_to(c, e, &empty, 0, n * c->B, &g, &at, out, err);
		if (ret < 0)
			return ret;
		out->inner_steps += g;
		c->epoch = e;
		c->packer = at;
		c->step = n;
		c->step_base = 0;
		c->epoch_steps = steps;
		c->epoch_rows = rows;
		c->gstep = gstep0 + taken + n;
		return 0;
	}
	return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
			    "skip_steps: %llu steps from global step %llu reach past the run's end: "
			    "its last step is global step %llu (%llu packed steps left, to the "
			    "end of epoch %u of %u)", (unsigned long long)(n + taken),
			    (unsigned long long)gstep0, (unsigned long long)(gstep0 + taken - 1),
			    (unsigned long long)taken, c->epochs - 1, c->epochs);
}

/* ------------------------------------------------------------------ */
/* The pieces of a step                                                 */

typedef struct gathered {
	uint64_t lo, hi;	/* the step's rows */
	pf_pack_ref *out;
	size_t cap, n;
	bool oom;
} gathered;

static int gather_piece(void *ctx, const walker *wk, const pf_pack_piece *pc,
			const pf_plan_record *rec)
{
	gathered *ga = ctx;

	if (pc->row >= ga->lo && pc->row < ga->hi) {
		if (ga->n < ga->cap)
			ga->out[ga->n] = (pf_pack_ref){
				.row = (uint32_t)(pc->row - ga->lo), .rec = *rec,
				.segment = pc->segment, .at = pc->at[0], .from = pc->from,
				.count = pc->count[0],
			};
		ga->n++;
	}
	/* Rows below closed take nothing more. */
	return wk->closed >= ga->hi;
}

static int by_row(const void *a, const void *b)
{
	const pf_pack_ref *x = a, *y = b;

	if (x->row != y->row)
		return x->row < y->row ? -1 : 1;
	return x->segment < y->segment ? -1 : x->segment > y->segment;
}

int pf_pack_course_which(const pf_pack_course *c, uint64_t step, pf_pack_ref *out,
			 size_t cap, size_t *n, uint32_t *epoch, uint64_t *step_in_epoch,
			 pf_error *err)
{
	uint64_t left = c->epoch < c->epochs && c->epoch_steps > c->step
		? c->epoch_steps - c->step : 0;
	uint64_t d, j, g0, groups, total = left;
	gathered ga = { .out = out, .cap = cap };
	pf_packer p = c->packer;
	uint32_t e = c->epoch;
	walker wk;
	int ret;

	*n = 0;
	if (step >= c->gstep && step - c->gstep < left) {
		j = c->step + (step - c->gstep);
		*step_in_epoch = c->step_base + j;
	} else {
		d = step >= c->gstep ? step - c->gstep - left : 0;
		for (e = c->epoch + 1; step >= c->gstep && e < c->epochs; e++) {
			uint64_t steps, rows;

			ret = epoch_plan(c, e, &steps, &rows, err);
			if (ret < 0)
				return ret;
			total += steps;
			if (d < steps)
				break;
			d -= steps;
		}
		if (step < c->gstep || e >= c->epochs)
			return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
					    "step %llu is not a step of this run: its steps are "
					    "global steps %llu to %llu (packed; epoch %u to the end "
					    "of epoch %u)", (unsigned long long)step,
					    (unsigned long long)c->gstep,
					    (unsigned long long)(c->gstep + total - 1), c->epoch,
					    c->epochs - 1);
		j = d;
		*step_in_epoch = j;
		p = empty_packer(&c->packer);
	}
	*epoch = e;
	ga.lo = j * c->B;
	ga.hi = ga.lo + c->B;
	ret = walker_init(&wk, c);
	wk.packer = p;
	epoch_groups(&c->inner, e, &g0, &groups);
	for (uint64_t t = 0; ret == 0 && t < groups; t++)
		ret = place_group(&wk, g0 + t, gather_piece, &ga, err);
	walker_release(&wk);
	if (ret == -ENOMEM)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory");
	if (ret < 0)
		return ret;
	/* (The epoch's end closes the last rows: nothing more goes in.) */
	*n = ga.n;
	if (ga.n <= cap)
		qsort(out, ga.n, sizeof(*out), by_row);
	return 0;
}
