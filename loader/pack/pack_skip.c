/* SPDX-License-Identifier: Apache-2.0 */
/* A packing loader's skip_steps and the records of its steps: its run's
 * start as the plan reads it (loader/plan/pack_course.c), kept at create;
 * skip_steps moved through it (the packer run over the records' lengths,
 * nothing read), the inner loader's start moved to the group it ends at
 * before that loader reads (it is created gated), the packer and the
 * packed step set where the plan says; and pf_loader_records_of(), the
 * pieces of records of a packed step's rows.  Not here: packing
 * (pack.c), checkpoints (pack_state.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pack_internal.h"

int pf_pack_keep_course(pf_packing *l, pf_pack_run *pk)
{
	pf_pack_course *c = &pk->course;
	pf_run inner;
	int ret;

	pf_pipe_run(pk->inner, &inner);
	*c = (pf_pack_course){
		.inner = inner, .len = pk->lengths, .nf = pk->nf, .cap = pk->cap,
		.packer = pk->packer, .B = pk->B, .epochs = l->epochs,
		.epoch = pk->inner->start_epoch, .step = pk->step, .step_base = pk->step_base,
		.epoch_steps = pk->epoch_steps, .epoch_rows = pk->epoch_rows, .gstep = pk->gstep,
	};
	ret = pf_run_start_copy(&c->inner.start, &inner.start);
	pk->have_course = ret == 0;
	return ret;
}

int pf_pack_skip_steps(pf_packing *l, pf_pack_run *pk, uint64_t n, pf_error *err)
{
	pf_pack_course c = pk->course;
	uint32_t epoch = c.epoch;
	pf_pack_skip sk;
	int ret;

	ret = pf_pack_course_skip(&c, n, &sk, err);
	if (ret == 0)
		ret = pf_pipe_skip(pk->inner, sk.inner_steps, err);
	if (ret < 0)
		return ret;
	/* The packer's rows where the plan says (its counts go on from 0,
	 * as after a restore). */
	pk->packer.nopen = c.packer.nopen;
	pk->packer.next_row = c.packer.next_row;
	memcpy(pk->packer.open, c.packer.open, c.packer.nopen * sizeof(*pk->packer.open));
	pk->step = c.step;
	pk->step_base = c.step_base;
	pk->epoch_steps = c.epoch_steps;
	pk->epoch_rows = c.epoch_rows;
	pk->gstep = c.gstep;
	/* A later epoch: its order planned for the decode threads. */
	if (c.epoch != epoch)
		ret = pf_pack_direct_epoch(l, pk, c.epoch);
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				    "planning the packed epoch %u: %s", c.epoch, pf_strerror(ret));
	pk->skipped_total += n;
	pthread_mutex_lock(&l->mu);
	l->m.skipped_from = pk->course.gstep;
	l->m.skipped_steps = n;
	l->m.skipped_records = sk.records;
	l->m.skipped_tokens = sk.values;
	pthread_mutex_unlock(&l->mu);
	return 0;
}

/* ------------------------------------------------------------------ */
/* A packed mixture's skip                                              */

/* The walk to the new first step's rows [hi, ...): the last mixture step
 * whose start has the packer with no row of them opened (and the packer
 * there), counting the pieces placed in the rows skipped, [lo, hi). */
typedef struct mix_skip_walk {
	uint64_t lo, hi;
	uint32_t nf;
	bool any;		/* a step found */
	uint64_t t;		/* it */
	pf_packer at;		/* the packer at its start */
	uint64_t records, values;
} mix_skip_walk;

static int skip_step(void *ctx, uint64_t t, const pf_packer *p, uint64_t closed)
{
	mix_skip_walk *w = ctx;

	if (p->next_row <= w->hi) {
		w->any = true;
		w->t = t;
		w->at = *p;
		return 0;
	}
	/* Past it: on only until the rows skipped are final (counted). */
	return closed >= w->hi;
}

static int skip_piece(void *ctx, const pf_pack_piece *pc, uint32_t source, uint32_t epoch,
		      const pf_plan_record *rec, uint64_t closed)
{
	mix_skip_walk *w = ctx;

	(void)source;
	(void)epoch;
	(void)rec;
	(void)closed;
	if (pc->row >= w->lo && pc->row < w->hi) {
		w->records++;
		for (uint32_t f = 0; f < w->nf; f++)
			w->values += pc->count[f];
	}
	return 0;
}

int pf_pack_mix_skip(pf_packing *l, pf_pack_run *pk, const pf_mixed *every_host,
		     const pf_mixed *mx, uint64_t first, uint64_t n, uint64_t *steps,
		     pf_error *err)
{
	uint64_t to = pk->step + n, every = pk->epoch_steps, rows = 0;
	mix_skip_walk w = { .lo = pk->step * pk->B, .nf = pk->nf };
	pf_mixed all;
	int ret = 0;

	*steps = 0;
	if (to < pk->step || to > UINT64_MAX / pk->B - 1)
		return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
				    "skip_steps: %llu steps is more than any run has",
				    (unsigned long long)n);
	w.hi = to * pk->B;
	/* Every host's steps, as far as the new first one (the plan from
	 * the run's start, or the cut, as ready() plans the run after the
	 * skip; a run resumed from a cut one's state: its plan's). */
	if (every_host) {
		all = *every_host;
		all.want_rows = (to + 1) * pk->B;
		all.endless = false;
		all.order = NULL;
		ret = pf_pack_plan_mixed(&all, l->cfg.seed, &pk->packer, pk->nf, pk->cap, pk->B,
					 &every, &rows);
	}
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "planning the packed mixture: %s",
				    pf_strerror(ret));
	if (every <= to) {
		uint64_t left = every > pk->step ? every - pk->step : 0;

		return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
				    "skip_steps: %llu steps from global step %llu reach past the "
				    "run's end: its last step is global step %llu (%llu packed "
				    "steps left, the fewest rows of any host; its sources' stop "
				    "rule)", (unsigned long long)n, (unsigned long long)pk->gstep,
				    (unsigned long long)(pk->gstep + left - (left ? 1 : 0)),
				    (unsigned long long)left);
	}
	/* This host's packer from the run's start to the step found. */
	ret = pf_pack_mixed_walk(mx, l->cfg.seed, &pk->course.packer, pk->nf, pk->cap,
				 &(pf_mixed_visit){ .step = skip_step, .piece = skip_piece,
						    .ctx = &w });
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "planning the packed mixture: %s",
				    pf_strerror(ret));
	if (!w.any || w.t < first || w.t >= mx->t1)
		return pf_error_set(err, -EIO, PF_OFFSET_NONE, 0,
				    "skip_steps: the plan puts packed step %llu's rows at the "
				    "mixture's step %llu, outside its steps %llu to %llu",
				    (unsigned long long)to, (unsigned long long)w.t,
				    (unsigned long long)first, (unsigned long long)mx->t1);
	*steps = w.t - first;
	/* The packer's rows where the plan says (its counts go on from 0,
	 * as after a restore). */
	pk->packer.nopen = w.at.nopen;
	pk->packer.next_row = w.at.next_row;
	memcpy(pk->packer.open, w.at.open, w.at.nopen * sizeof(*pk->packer.open));
	pthread_mutex_lock(&l->mu);
	l->m.skipped_from = pk->gstep;
	l->m.skipped_steps = n;
	l->m.skipped_records = w.records;
	l->m.skipped_tokens = w.values;
	pthread_mutex_unlock(&l->mu);
	pk->step = to;
	pk->gstep += n;
	pk->skipped_total += n;
	return 0;
}

/* The pieces of a packed mixture's step: rows [lo, hi) of the run. */
typedef struct mix_gathered {
	uint64_t lo, hi;
	uint64_t step;		/* the packed step (its epoch's, the run's) */
	uint32_t pcb;
	pf_record_ref *out;
	size_t cap, n;
} mix_gathered;

static int gather_mix_piece(void *ctx, const pf_pack_piece *pc, uint32_t source,
			    uint32_t epoch, const pf_plan_record *rec, uint64_t closed)
{
	mix_gathered *ga = ctx;

	if (pc->row >= ga->lo && pc->row < ga->hi) {
		uint32_t idx = (uint32_t)(pc->row - ga->lo);

		if (ga->n < ga->cap)
			ga->out[ga->n] = (pf_record_ref){
				.epoch = epoch, .step = ga->step,
				.core = idx / ga->pcb, .row = idx % ga->pcb, .source = source,
				.file = rec->file, .record = rec->record,
				.segment = pc->segment, .at = pc->at[0], .from = pc->from,
				.count = pc->count[0],
			};
		ga->n++;
	}
	/* Rows below closed take nothing more. */
	return closed >= ga->hi;
}

static int by_core_row(const void *a, const void *b)
{
	const pf_record_ref *x = a, *y = b;

	if (x->core != y->core)
		return x->core < y->core ? -1 : 1;
	if (x->row != y->row)
		return x->row < y->row ? -1 : 1;
	return x->segment < y->segment ? -1 : x->segment > y->segment;
}

int64_t pf_pack_mix_records_of(const pf_packing *l, uint64_t step, pf_record_ref *out,
			       size_t cap, pf_error *err)
{
	const pf_pack_run *pk = l->pack;
	uint64_t last = l->steps_per_epoch;	/* the run's steps (0: no end) */
	uint64_t j = pk->mix_step0 + (step - pk->mix_gstep0);
	mix_gathered ga = { .pcb = l->topo.per_core_batch, .out = out, .cap = cap };
	pf_mix_course_set cs = { 0 };
	pf_mixed mx;
	int ret;

	if (!pk->have_course)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "the loader has no plan");
	last = last > pk->step_base ? last - pk->step_base : 0;	/* a cut run's: from the cut */
	if (step < pk->mix_gstep0 || (last && j >= last)) {
		if (!last)
			return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
					    "step %llu is not a step of this run: its steps are "
					    "global steps %llu on (packed; the mixture's run has no "
					    "end)", (unsigned long long)step,
					    (unsigned long long)pk->mix_gstep0);
		return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
				    "step %llu is not a step of this run: its steps are global "
				    "steps %llu to %llu (packed; the mixture's run)",
				    (unsigned long long)step, (unsigned long long)pk->mix_gstep0,
				    (unsigned long long)(pk->mix_gstep0 + (last - pk->mix_step0) - 1));
	}
	ga.step = pk->step_base + j;
	ga.lo = j * pk->B;
	ga.hi = ga.lo + pk->B;
	/* This host's walk from the run's start (its sources' courses, the
	 * packer there: kept at create, the consumer's own packer is not
	 * read from another thread). */
	ret = pf_pack_mix_walker(l, pk, &mx, &cs, err);
	if (ret < 0)
		return ret;
	ret = pf_pack_mixed_walk(&mx, l->cfg.seed, &pk->course.packer, pk->nf, pk->cap,
				 &(pf_mixed_visit){ .piece = gather_mix_piece, .ctx = &ga });
	pf_pack_mix_mixed_release(&mx);
	pf_pack_mix_courses_free(&cs);
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "planning the packed mixture: %s",
				    pf_strerror(ret));
	if (ga.n <= cap)
		qsort(out, ga.n, sizeof(*out), by_core_row);
	return (int64_t)ga.n;
}

int64_t pf_pack_records_of(const pf_packing *l, uint64_t step, pf_record_ref *out, size_t cap,
			   pf_error *err)
{
	const pf_pack_run *pk = l->pack;
	pf_pack_ref *refs = NULL;
	uint64_t in_epoch = 0;
	uint32_t epoch = 0, pcb = l->topo.per_core_batch;
	size_t n = 0;
	int ret;

	if (pk->mix)
		return pf_pack_mix_records_of(l, step, out, cap, err);
	if (!pk->have_course)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "the loader has no plan");
	/* The pieces into refs of the plan's when out has room for them
	 * (cap 0: the count). */
	if (cap && !(refs = pf_calloc(cap, sizeof(*refs))))
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	ret = pf_pack_course_which(&pk->course, step, refs, cap, &n, &epoch, &in_epoch, err);
	for (size_t i = 0; ret == 0 && n <= cap && i < n; i++)
		out[i] = (pf_record_ref){
			.epoch = epoch, .step = in_epoch,
			.core = refs[i].row / pcb, .row = refs[i].row % pcb,
			.file = refs[i].rec.file, .record = refs[i].rec.record,
			.segment = refs[i].segment, .at = refs[i].at, .from = refs[i].from,
			.count = refs[i].count,
		};
	pf_free(refs);
	return ret < 0 ? ret : (int64_t)n;
}

const char *pf_pack_file(const pf_packing *l, uint32_t file)
{
	return pf_pipe_file(l->pack->inner, file);
}
