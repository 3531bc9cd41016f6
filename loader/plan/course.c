/* SPDX-License-Identifier: Apache-2.0 */
/* A run's course, as pure functions of its order and its start: the
 * steps it has, its start moved ahead by steps delivered and dropped
 * (skip_steps: nothing read), and which record of which file each row of
 * a step holds (pf_loader_records_of()).  The pipeline walks the same
 * course (loader/pipeline/schedule.c: pieces, shuffle blocks, the plan's
 * segments) and places each record where placement.c's locate() says:
 * what is computed here is what it delivers.  Not here: the plan of an
 * epoch (plan.c), a packing loader's rows (pack_plan.c), a state's
 * encoding (state.c). */
#include <errno.h>
#include <string.h>

#include "plan_internal.h"

static uint64_t host_batch(const pf_run *r)
{
	return (uint64_t)r->o.topo.cores * r->o.topo.per_core_batch;
}

/* The steps of the epoch the run starts in. */
static uint64_t first_steps(const pf_run *r)
{
	return r->start.resumed ? r->start.resume.steps : r->steps_per_epoch;
}

uint64_t pf_run_steps(const pf_run *r)
{
	return pf_plan_steps_left(r->start.epoch, r->epochs, first_steps(r), r->steps_per_epoch,
				  0, 0);
}

int pf_run_start_copy(pf_run_start *dst, const pf_run_start *src)
{
	*dst = *src;
	dst->resume.pieces = NULL;
	if (!src->resumed)
		return 0;
	dst->resume.pieces = pf_calloc(src->resume.npieces + 1, sizeof(*dst->resume.pieces));
	if (!dst->resume.pieces)
		return -ENOMEM;
	memcpy(dst->resume.pieces, src->resume.pieces,
	       src->resume.npieces * sizeof(*src->resume.pieces));
	return 0;
}

void pf_run_start_release(pf_run_start *s)
{
	pf_free(s->resume.pieces);
	memset(s, 0, sizeof(*s));
}

/* The pieces of er moved past their first `skip` outputs (whole pieces
 * dropped). */
static void advance_pieces(pf_epoch_run *er, uint64_t skip)
{
	size_t k = 0;

	for (size_t i = 0; i < er->npieces; i++) {
		pf_piece p = er->pieces[i];
		uint64_t len = p.end - p.begin;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		p.begin += skip;
		skip = 0;
		er->pieces[k++] = p;
	}
	er->npieces = k;
}

/* The run starting in fresh epoch e at its step j (0 < j < its steps):
 * the host's own stream from output j x B, and the epoch's remainder
 * (its plan's, as for any fresh epoch). */
static int start_inside(pf_run *r, uint32_t e, uint64_t j, pf_error *err)
{
	pf_run_start *st = &r->start;
	pf_epoch_plan plan = { 0 };
	pf_piece *own = pf_calloc(2, sizeof(*own));
	int ret;

	if (!own)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	ret = pf_plan_epoch(&plan, r->o.ds, &r->o.topo, r->seed, e, r->o.shuffle, r->o.slice,
			    r->o.group, r->remainder);
	if (ret < 0) {
		pf_plan_release(&plan);
		pf_free(own);
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				    "cannot plan epoch %u to start inside it", e);
	}
	own[0] = (pf_piece){ r->o.topo.host_index, j * host_batch(r), plan.quota };
	pf_free(st->resume.pieces);
	st->resume = (pf_epoch_run){
		.epoch = e, .origin = r->o.topo, .w = r->o.block, .permute = r->o.permute,
		.slice = r->o.slice, .group = r->o.group, .pieces = own, .npieces = 1,
		.steps = r->steps_per_epoch - j, .step0 = j,
		.dropped = plan.share > plan.quota ? plan.share - plan.quota : 0,
		.wrapped = plan.stream_len > plan.share ? plan.stream_len - plan.share : 0,
	};
	st->resumed = true;
	pf_plan_release(&plan);
	return 0;
}

int pf_run_skip(pf_run *r, uint64_t n, pf_error *err)
{
	pf_run_start *st = &r->start;
	uint64_t left = pf_run_steps(r), spe = r->steps_per_epoch, whole;

	if (!n)
		return 0;
	if (left == 0)
		return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
				    "skip_steps: %llu steps: the run has no step left to skip (it "
				    "starts at global step %llu, after its last epoch, %u of "
				    "%u)", (unsigned long long)n, (unsigned long long)st->gstep,
				    r->epochs - 1, r->epochs);
	if (n >= left)
		return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
				    "skip_steps: %llu steps from global step %llu reach past the "
				    "run's end: its last step is global step %llu (%llu steps "
				    "left, to the end of epoch %u of %u)", (unsigned long long)n,
				    (unsigned long long)st->gstep,
				    (unsigned long long)(st->gstep + left - 1),
				    (unsigned long long)left, r->epochs - 1, r->epochs);
	if (st->resumed && n < st->resume.steps) {
		/* Inside the epoch it starts in: its pieces, past n batches. */
		advance_pieces(&st->resume, n * host_batch(r));
		st->resume.steps -= n;
		st->resume.step0 += n;
		st->gstep += n;
		return 0;
	}
	if (st->resumed) {
		n -= st->resume.steps;
		st->gstep += st->resume.steps;
		st->epoch++;
		st->resumed = false;
		st->resume.npieces = 0;
	}
	/* Whole fresh epochs, then a part of one.  n < left: spe > 0. */
	whole = n / spe;
	st->epoch += (uint32_t)whole;
	st->gstep += whole * spe;
	n -= whole * spe;
	if (!n)
		return 0;
	st->gstep += n;
	return start_inside(r, st->epoch, n, err);
}

/* ------------------------------------------------------------------ */
/* Which record each row holds                                          */

void pf_which_init(pf_which *w, const pf_run *r)
{
	memset(w, 0, sizeof(*w));
	w->run = r;
}

void pf_which_release(pf_which *w)
{
	pf_plan_release(&w->plan);
	pf_free(w->seg_start);
	pf_free(w->inv);
	memset(w, 0, sizeof(*w));
}

/* The plan of origin host `host` of er's streams (kept for the next
 * call), with each segment's stream position. */
static int plan_host(pf_which *w, const pf_epoch_run *er, uint32_t host)
{
	const pf_run *r = w->run;
	pf_topology t = er->origin;
	int ret;

	t.host_index = host;
	if (w->planned && w->plan_epoch == er->epoch && w->plan_host == host &&
	    !memcmp(&w->plan_topo, &t, sizeof(t)) && w->plan_slice == er->slice &&
	    w->plan_group == er->group)
		return 0;
	w->planned = false;
	ret = pf_plan_epoch(&w->plan, r->o.ds, &t, r->seed, er->epoch, r->o.shuffle, er->slice,
			    er->group, r->remainder);
	if (ret < 0)
		return ret;
	if (pf_grow(&w->seg_start, &w->seg_cap, w->plan.nseg + 1, sizeof(*w->seg_start)) < 0)
		return -ENOMEM;
	w->seg_start[0] = 0;
	for (size_t i = 0; i < w->plan.nseg; i++)
		w->seg_start[i + 1] = w->seg_start[i] + w->plan.seg[i].count;
	w->planned = true;
	w->plan_epoch = er->epoch;
	w->plan_host = host;
	w->plan_topo = t;
	w->plan_slice = er->slice;
	w->plan_group = er->group;
	return 0;
}

/* The input offset of block k's output ro in host `host`'s stream (the
 * plan of which is w->plan): as placement.c's locate() places input q
 * at output perm[q], the inverse. */
static int block_input(pf_which *w, const pf_epoch_run *er, uint32_t host, uint64_t k,
		       uint32_t ro, uint32_t *q)
{
	const pf_run *r = w->run;
	uint64_t first = k * er->w, left = w->plan.stream_len - first;
	uint32_t n = left < er->w ? (uint32_t)left : er->w;

	if (!er->permute) {
		*q = ro;
		return 0;
	}
	if (!w->inv_valid || w->inv_epoch != er->epoch || w->inv_host != host ||
	    w->inv_block != k || w->inv_w != er->w || !w->inv_permute) {
		uint32_t *perm;

		if (w->inv_cap < 2 * er->w) {
			uint32_t *grown = pf_malloc(2 * (size_t)er->w * sizeof(*grown));

			if (!grown)
				return -ENOMEM;
			pf_free(w->inv);
			w->inv = grown;
			w->inv_cap = 2 * er->w;
		}
		perm = w->inv + er->w;
		pf_plan_block_perm(r->seed, er->epoch, host, k, perm, n);
		for (uint32_t i = 0; i < n; i++)
			w->inv[perm[i]] = i;
		w->inv_valid = true;
		w->inv_epoch = er->epoch;
		w->inv_host = host;
		w->inv_block = k;
		w->inv_w = er->w;
		w->inv_permute = true;
	}
	*q = w->inv[ro];
	return 0;
}

/* The record at output x of er (its pieces end to end). */
static int record_at(pf_which *w, const pf_epoch_run *er, uint64_t x, pf_plan_record *rec)
{
	const pf_dataset *ds = w->run->o.ds;
	uint64_t at = 0, o = 0, p, lo = 0, hi;
	uint32_t host = 0, q;
	const pf_segment *sg;
	const pf_unit *u;
	size_t i;
	int ret;

	for (i = 0; i < er->npieces; i++) {
		uint64_t len = er->pieces[i].end - er->pieces[i].begin;

		if (x < at + len) {
			o = er->pieces[i].begin + (x - at);
			host = er->pieces[i].host;
			break;
		}
		at += len;
	}
	if (i == er->npieces)
		return -ERANGE;
	ret = plan_host(w, er, host);
	if (ret == 0)
		ret = block_input(w, er, host, o / er->w, (uint32_t)(o % er->w), &q);
	if (ret < 0)
		return ret;
	p = o / er->w * er->w + q;
	/* The segment holding stream position p: the last starting at or
	 * before it. */
	hi = w->plan.nseg;
	if (p >= w->seg_start[hi])
		return -ERANGE;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (w->seg_start[mid] <= p)
			lo = mid;
		else
			hi = mid;
	}
	sg = &w->plan.seg[lo];
	u = &ds->units[sg->unit];
	rec->file = u->file;
	rec->record = (u->stream ? 0 : u->first_record) + sg->first + (p - w->seg_start[lo]);
	return 0;
}

int pf_which_step(pf_which *w, uint64_t step, uint32_t *epoch, uint64_t *step_in_epoch,
		  pf_plan_record *rows, pf_error *err)
{
	const pf_run *r = w->run;
	const pf_run_start *st = &r->start;
	const pf_epoch_run *er;
	uint64_t left = pf_run_steps(r), hb = host_batch(r), j;
	uint32_t e;
	int ret;

	if (step < st->gstep || step - st->gstep >= left) {
		if (!left)
			return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
					    "step %llu: the run has no step (it starts at global "
					    "step %llu, after its last epoch)",
					    (unsigned long long)step, (unsigned long long)st->gstep);
		return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
				    "step %llu is not a step of this run: its steps are global "
				    "steps %llu to %llu (epoch %u to the end of epoch %u)",
				    (unsigned long long)step, (unsigned long long)st->gstep,
				    (unsigned long long)(left == UINT64_MAX ? UINT64_MAX
									    : st->gstep + left - 1),
				    st->epoch, r->epochs - 1);
	}
	j = step - st->gstep;
	if (st->resumed && j < st->resume.steps) {
		er = &st->resume;
		e = er->epoch;
	} else {
		if (st->resumed)
			j -= st->resume.steps;
		e = st->epoch + (st->resumed ? 1 : 0) + (uint32_t)(j / r->steps_per_epoch);
		j %= r->steps_per_epoch;
		w->own = (pf_piece){ r->o.topo.host_index, 0, r->steps_per_epoch * hb };
		w->fresh = (pf_epoch_run){
			.epoch = e, .origin = r->o.topo, .w = r->o.block, .permute = r->o.permute,
			.slice = r->o.slice, .group = r->o.group, .pieces = &w->own, .npieces = 1,
			.steps = r->steps_per_epoch,
		};
		er = &w->fresh;
	}
	*epoch = e;
	*step_in_epoch = er->step0 + j;
	for (uint64_t i = 0; rows && i < hb; i++) {
		ret = record_at(w, er, j * hb + i, &rows[i]);
		if (ret < 0)
			return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
					    ret == -ENOMEM ? "out of memory" :
					    "step %llu row %llu: no record in the epoch's plan",
					    (unsigned long long)step, (unsigned long long)i);
	}
	return 0;
}
