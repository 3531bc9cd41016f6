/* SPDX-License-Identifier: Apache-2.0 */
/* A packing loader's rows, on the consumer's thread: each inner batch's
 * records placed by the packer into the packed rows of the steps in
 * progress (place(): a record planned ahead was put there by a decode
 * thread already, pack_direct.c), the rows padded, epochs started and
 * ended, and a step handed out once its rows are closed and the next
 * step is known to exist (pf_pack_ready()).  Not here: creating the
 * loader and its face (pack.c), where a record goes in a row
 * (transform/pack.c), the plan of the rows (plan/pack_plan.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pack_internal.h"
/* ------------------------------------------------------------------ */
/* Packing                                                              */

/* Whether a pad is all zero bytes (-0.0 is not). */
static bool same_zero(double pad)
{
	double zero = 0.0;

	return !memcmp(&pad, &zero, sizeof(pad));
}

/* A fresh output batch for step j: no row written yet (the padding is
 * written once the rows are full, pf_pack_pad_out()). */
pack_out *pf_pack_take_out(pf_packing *l, pf_pack_run *pk, uint64_t j)
{
	pack_out *o = pk->free;

	pk->free = o->next;
	o->segments = o->values = 0;
	memset(o->fill, 0, (size_t)l->host_batch * pk->nf * sizeof(*o->fill));
	pk->inprog[j % pk->window] = o;
	return o;
}

/* The padding of a step's rows, after the values each holds from its
 * start (a row's pieces follow one another from value 0): the pad value,
 * segment id and position 0.  Written once, where no value is (98.7% of
 * a first_fit row is values; padding every row first cost a third of
 * the consumer's writes). */
void pf_pack_pad_out(pf_packing *l, pf_pack_run *pk, pack_out *o)
{
	const pf_spec *s = &l->spec;
	uint32_t pcb = l->topo.per_core_batch;

	for (uint32_t idx = 0; idx < l->host_batch; idx++) {
		pf_tensor *t = o->core[idx / pcb].tensors;
		size_t row = idx % pcb;

		for (uint32_t f = 0; f < pk->nf; f++) {
			uint32_t i = pk->fout[f], n = o->fill[(size_t)idx * pk->nf + f];
			const pf_feature_spec *fs = &s->f[i];
			size_t elem = pf_dtype_size(fs->dtype);
			uint8_t *v = (uint8_t *)t[i].data + row * pk->L * elem;

			if (n == pk->L)
				continue;
			if (same_zero(fs->pad))
				memset(v + (size_t)n * elem, 0, (size_t)(pk->L - n) * elem);
			else
				pf_spec_pad_from(fs, v, n);
			memset((int32_t *)t[i + 1].data + row * pk->L + n, 0,
			       (size_t)(pk->L - n) * sizeof(int32_t));
			memset((int32_t *)t[i + 2].data + row * pk->L + n, 0,
			       (size_t)(pk->L - n) * sizeof(int32_t));
		}
		/* A packed mixture's sources: -1 where the first feature pads. */
		if (pk->fsrc != UINT32_MAX) {
			int32_t *sv = (int32_t *)t[pk->fsrc].data + row * pk->L;

			for (uint32_t v = o->fill[(size_t)idx * pk->nf]; v < pk->L; v++)
				sv[v] = -1;
		}
	}
}

void pf_pack_give_back(pf_pack_run *pk, pack_out *o)
{
	o->next = pk->free;
	pk->free = o;
}

/* The outputs of steps [from, to) go back unused (dropped). */
static void drop_steps(pf_pack_run *pk, uint64_t from, uint64_t to)
{
	for (uint64_t j = from; j < to; j++) {
		pack_out *o = pk->inprog[j % pk->window];

		if (o)
			pf_pack_give_back(pk, o);
		pk->inprog[j % pk->window] = NULL;
	}
}

/* Place inner record (core 0, row r of pk->ib): its values copied into
 * its packed rows, unless a decode thread wrote them there
 * (pack_direct.c). */
/* Record r of the inner batch has got values of feature f where the plan
 * has planned (the records planned after it would be misplaced): the
 * error names its file and its record there. */
static int not_the_plan(pf_packing *l, pf_pack_run *pk, uint32_t r, uint32_t f, uint32_t got,
			uint32_t planned)
{
	const pf_pipe *in = pk->inner;
	uint64_t at = pk->ib->step * PF_PACK_GROUP + r;
	pf_pack_where w;
	int ret;

	if (pk->mix) {
		uint32_t k = pf_pack_mix_source(pk, pk->ib, r);

		return pf_error_set(&l->err, -EIO, PF_OFFSET_NONE, 0,
				    "packing: %u values of '%s' where its plan has %u (a record of "
				    "source '%s', row %llu of the mixture's run on this host; did "
				    "the data change since it was opened?)",
				    got, l->spec.f[pk->fout[f]].name, planned,
				    pf_mixture_source_name(pk->mix, k),
				    (unsigned long long)at);
	}
	ret = pf_pack_plan_where(&pk->inner_order, l->cfg.seed, pk->ib->epoch, at, pk->lengths, pk->nf, pk->cap,
				 &w);
	pf_error_set(&l->err, -EIO, PF_OFFSET_NONE, 0,
		     "packing: %u values of '%s' where its plan has %u (record %llu of epoch %u "
		     "on this host; did the data change since it was opened?)",
		     got, l->spec.f[pk->fout[f]].name, planned, (unsigned long long)at,
		     pk->ib->epoch);
	/* Its file and its record there (pf_error_format() says both). */
	if (ret == 0) {
		pf_error_set_file(&l->err, in->ds->paths[w.file]);
		l->err.frame = -1;
		l->err.record = (int64_t)w.record;
	}
	return -EIO;
}

static int place(pf_packing *l, pf_pack_run *pk, const pack_group *g, uint32_t r)
{
	const pack_rec *pr = g ? &g->rec[r] : NULL;
	const pf_pack_piece *pieces = pk->pieces;
	bool copy = true;
	const pf_core_batch *ib = &pk->ib->core[0];
	const pf_spec *s = &l->spec;
	uint32_t len[PF_PACK_MAX_FEATURES];
	const uint8_t *src[PF_PACK_MAX_FEATURES];
	uint64_t closed;
	int k;

	uint32_t state = pr ? __atomic_load_n(&pr->state, __ATOMIC_RELAXED) : PACK_REC_WAITING;

	for (uint32_t f = 0; f < pk->nf; f++) {
		const pf_tensor *v = &ib->tensors[pk->fin[f]], *n = &ib->tensors[pk->fin[f] + 1];
		int32_t full;

		if (state != PACK_REC_WAITING) {
			/* Its decode thread wrote its lengths to the plan, not
			 * the inner row (checked, and its values placed). */
			len[f] = pr->len[f];
			continue;
		}
		full = ((const int32_t *)n->data)[r];

		src[f] = (const uint8_t *)v->data + (size_t)r * v->len * pf_dtype_size(v->dtype);
		len[f] = (uint32_t)full < pk->cap ? (uint32_t)full : pk->cap;
		if ((uint32_t)full > pk->cap) {
			/* concat: longer than an inner row holds */
			pk->packer.truncated_values += (uint32_t)full - pk->cap;
			pk->packer.truncated_records += f == 0;
		}
	}
	if (pr) {
		/* Planned: the records after it were planned from its
		 * lengths, which must be the plan's. */
		for (uint32_t f = 0; f < pk->nf; f++) {
			uint32_t got = state == PACK_REC_DIFFERS ? pr->got[f] : len[f];

			if (got != pr->len[f])
				return not_the_plan(l, pk, r, f, got, pr->len[f]);
		}
		copy = state != PACK_REC_PLACED;
		if (!copy) {
			pk->packer.truncated_values += pr->cut_values;
			pk->packer.truncated_records += pr->cut;
		}
		pk->direct_records += !copy;
		/* Its place is the plan's: what placing it counts, counted
		 * (its group's rows are the packer's at the group's end). */
		pieces = g->pieces + pr->piece0;
		k = (int)pr->npieces;
		closed = pr->closed;
		pk->packer.records += !pr->empty;
		pk->packer.empty_records += pr->empty;
		pk->packer.values += pr->values;
		pk->packer.truncated_records += pr->truncated;
		pk->packer.truncated_values += pr->truncated_values;
		pk->opened = pr->opened;
	} else {
		k = pf_pack_place(&pk->packer, len, pk->pieces, pk->npieces, &closed, &l->err);
		if (k < 0)
			return k;
		pk->opened = pk->packer.next_row;
	}
	{
		/* A mixture's record: its source, counted in its rows. */
		uint32_t from = pf_pack_mix_source(pk, pk->ib, r);
		bool counted = false;

		for (int j = 0; j < k; j++) {
			const pf_pack_piece *pc = &pieces[j];
			uint64_t step = pc->row / pk->B;
			uint32_t idx = (uint32_t)(pc->row % pk->B);
			uint32_t core = idx / l->topo.per_core_batch, row = idx % l->topo.per_core_batch;
			pack_out *o;

			if (step >= pk->epoch_steps) {
				/* past the epoch's last step: dropped */
				pk->dropped_tokens += pc->count[0];
				pk->dropped_records += j == 0;
				continue;
			}
			if (step < pk->step)
				continue;	/* delivered before a resume */
			if (step >= pk->step + pk->window)
				return pf_error_set(&l->err, -EOVERFLOW, PF_OFFSET_NONE, 0,
						    "packing: row %llu is beyond the steps in progress",
						    (unsigned long long)pc->row);
			o = pk->inprog[step % pk->window];
			if (!o)
				o = pf_pack_take_out(l, pk, step);
			for (uint32_t f = 0; f < pk->nf; f++) {
				pf_tensor *t = o->core[core].tensors;
				uint32_t i = pk->fout[f];
				size_t elem = pf_dtype_size(s->f[i].dtype);

				if (copy)
					pf_pack_copy(pc, f, src[f], elem,
						     (uint8_t *)t[i].data + (size_t)row * pk->L * elem,
						     (int32_t *)t[i + 1].data + (size_t)row * pk->L,
						     (int32_t *)t[i + 2].data + (size_t)row * pk->L);
				o->fill[(size_t)idx * pk->nf + f] = pc->at[f] + pc->count[f];
				o->values += pc->count[f];
			}
			o->segments++;
			if (from == UINT32_MAX || from >= pk->nsrc)
				continue;
			pk->src_tokens[from] += pc->count[0];
			pk->src_records[from] += !counted;
			counted = true;
			if (pk->fsrc != UINT32_MAX) {
				int32_t *sv = (int32_t *)o->core[core].tensors[pk->fsrc].data +
					      (size_t)row * pk->L + pc->at[0];

				for (uint32_t v = 0; v < pc->count[0]; v++)
					sv[v] = (int32_t)from;
			}
		}
	}
	pk->closed = closed;
	return 0;
}

/* The epoch's records are all placed: its rows and steps are known. */
static void end_epoch(pf_pack_run *pk)
{
	uint64_t rows = pf_pack_finish(&pk->packer);

	pk->opened = pk->closed = rows;
	pk->epoch_done = true;
}

/* Start epoch e: an empty packer, row and step 0, its steps planned. */
static int start_epoch(pf_packing *l, pf_pack_run *pk, uint32_t e)
{
	pf_packer next = pk->packer;
	int ret;

	/* The counts go on across epochs; the rows start again. */
	next.nopen = 0;
	next.next_row = 0;
	pk->packer = next;
	pk->epoch = e;
	pk->step = pk->opened = pk->closed = 0;
	pk->step_base = 0;
	pk->epoch_done = false;
	pf_pack_release_snaps(pk);
	pk->consumed = 0;
	ret = pf_pack_push_snap(pk, &(pack_snap){ .epoch = e, .fresh = true, .gstep = 0 });
	if (ret == 0)
		ret = pf_pack_plan_epoch(l, pk, e, &l->err);
	if (ret == 0)
		pf_pack_direct_plan(l, pk, e, 0, true);
	return ret;
}

/* The inner batch's epoch as the plan ahead numbers them (a mixture's
 * run is epoch 0). */
static uint32_t inner_epoch(const pf_pack_run *pk)
{
	return pk->mix ? 0 : pk->ib->epoch;
}

/* Pack until step pk->step can be handed out (1), the run is over (0),
 * or an error (<0; -ETIMEDOUT changes nothing). */
int pf_pack_ready(pf_packing *l, pf_pack_run *pk, uint64_t timeout_ns)
{
	for (;;) {
		const pack_group *g;
		int ret;

		if (pk->step < pk->epoch_steps &&
		    (pk->epoch_done || pk->closed >= (pk->step + 1) * pk->B))
			return 1;
		if (pk->epoch_done) {
			/* Rows past the last step (every host's): dropped. */
			if (pk->opened != pk->epoch_rows)
				return pf_error_set(&l->err, -EIO, PF_OFFSET_NONE, 0,
						    "packing epoch %u made %llu rows, its plan %llu "
						    "(did the data change since it was opened?)",
						    pk->epoch, (unsigned long long)pk->opened,
						    (unsigned long long)pk->epoch_rows);
			l->m.pack_rows_dropped += pk->opened - pk->epoch_steps * pk->B;
			drop_steps(pk, pk->step, pk->step + pk->window);
			if (pk->inner_done || pk->epoch + 1 >= l->epochs)
				return 0;
			ret = start_epoch(l, pk, pk->epoch + 1);
			if (ret < 0)
				return ret;
			continue;
		}
		if (!pk->ib) {
			/* A mixture's: what its sources had given before this
			 * batch, for its checkpoint. */
			if (pk->mix) {
				ret = pf_mixture_mark(pk->mix, pk->mark_next);
				if (ret < 0) {
					for (size_t k = 0; k < pk->nsrc; k++)
						pf_mix_mark_release(&pk->mark_next[k]);
					return pf_error_set(&l->err, ret, PF_OFFSET_NONE, 0,
							    "out of memory for a checkpoint");
				}
			}
			ret = pk->mix ? pf_mixture_next(pk->mix, &pk->ib)
				      : pf_pipe_next_timed(pk->inner, &pk->ib, timeout_ns);
			/* (Not taken: the marks are not the snapshot's.) */
			for (size_t k = 0; pk->mix && ret != 1 && k < pk->nsrc; k++)
				pf_mix_mark_release(&pk->mark_next[k]);
			if (ret == -ETIMEDOUT)
				return ret;
			if (ret < 0) {
				const pf_error *e = pk->mix ? pf_mixture_last_error(pk->mix)
							    : pf_pipe_last_error(pk->inner);

				if (e)
					l->err = *e;
				return ret;
			}
			if (ret == 0) {
				pk->ib = NULL;
				pk->inner_done = true;
				end_epoch(pk);
				continue;
			}
			/* A mixture's run is one packed epoch (its batches say
			 * its first source's). */
			if (!pk->started) {
				pk->started = true;
				pk->epoch = pk->mix ? 0 : pk->ib->epoch;
			}
			pk->irow = 0;
			ret = pf_pack_push_snap(pk, &(pack_snap){
				.epoch = pk->mix ? 0 : pk->ib->epoch, .step = pk->ib->step,
				.gstep = pk->ib->global_step, .marks = pk->mark_next });
			if (ret < 0)
				return ret;
			pf_pack_direct_plan(l, pk, inner_epoch(pk), pk->ib->step, true);
		}
		g = pf_pack_direct_group(pk, inner_epoch(pk), pk->ib->step);
		while (pk->irow < pk->ib->per_core_batch) {
			uint32_t r = pk->irow++;

			pk->consumed++;
			/* A hole (a record lost to damage, skip mode) has no values. */
			if (!pk->ib->core[0].valid[r])
				continue;
			ret = place(l, pk, g, r);
			if (ret < 0)
				return ret;
			if (pk->step < pk->epoch_steps && pk->closed >= (pk->step + 1) * pk->B)
				break;
		}
		if (pk->irow == pk->ib->per_core_batch) {
			bool last = pk->ib->epoch_end;

			if (g) {
				/* Planned: its records' rows are the plan's. */
				pk->packer.nopen = g->after.nopen;
				pk->packer.next_row = g->after.next_row;
				memcpy(pk->packer.open, g->after.open,
				       g->after.nopen * sizeof(*pk->packer.open));
			}

			/* Before its slot goes to the group after the last one
			 * planned. */
			pf_pack_direct_plan(l, pk, inner_epoch(pk), pk->ib->step + 1, false);
			if (pk->mix)
				pf_mixture_release(pk->mix, pk->ib);
			else
				pf_pipe_release(pk->inner, pk->ib);
			pk->ib = NULL;
			if (last)
				end_epoch(pk);
		}
	}
}
