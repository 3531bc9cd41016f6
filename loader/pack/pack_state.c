/* SPDX-License-Identifier: Apache-2.0 */
/* A packing loader's checkpoints: the packer's checkpoints as it packs,
 * the state saved from them, and the resume (on the same topology, bit
 * for bit; on another, from what the states left).  Not here: packing
 * (pack.c), the state's format (state.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pack_internal.h"

/* A checkpoint of the packer (its packer field filled here), after
 * those no state needs: the oldest kept is the last whose packer had
 * opened no row not yet delivered. */
/* Snapshot i's marks released (a packed mixture's). */
static void release_marks(pf_pack_run *pk, size_t i)
{
	for (size_t k = 0; k < pk->nsrc; k++)
		pf_mix_mark_release(&pk->snap_marks[i * pk->nsrc + k]);
}

void pf_pack_release_snaps(pf_pack_run *pk)
{
	for (size_t i = 0; pk->snap_marks && i < pk->nsnaps; i++)
		release_marks(pk, i);
	pk->nsnaps = 0;
}

int pf_pack_push_snap(pf_pack_run *pk, const pack_snap *sn)
{
	uint64_t delivered = pk->step * pk->B;
	size_t cap = pk->snaps_cap, row = pk->nsrc * sizeof(*pk->snap_marks);

	while (pk->nsnaps >= 2 && pk->snaps[1].packer.next_row <= delivered) {
		if (row)
			release_marks(pk, 0);
		memmove(&pk->snaps[0], &pk->snaps[1], (pk->nsnaps - 1) * sizeof(*pk->snaps));
		if (row)
			memmove(pk->snap_marks, pk->snap_marks + pk->nsrc, (pk->nsnaps - 1) * row);
		pk->nsnaps--;
	}
	if (pf_grow(&pk->snaps, &pk->snaps_cap, pk->nsnaps + 1, sizeof(*pk->snaps)) < 0)
		goto oom;
	if (row && (pk->snaps_cap != cap || !pk->snap_marks)) {
		pf_mix_mark *t = pf_realloc(pk->snap_marks, pk->snaps_cap * row);

		if (!t)
			goto oom;
		pk->snap_marks = t;
	}
	pk->snaps[pk->nsnaps] = *sn;
	pk->snaps[pk->nsnaps].packer = pk->packer;
	pk->snaps[pk->nsnaps].consumed = pk->consumed;
	/* A packed mixture's: where its sources were, kept beside (the
	 * snapshot takes their held states). */
	if (row) {
		pf_mix_mark *t = pk->snap_marks + pk->nsnaps * pk->nsrc;

		if (sn->marks)
			memcpy(t, sn->marks, row);
		else
			memset(t, 0, row);
		for (size_t k = 0; sn->marks && k < pk->nsrc; k++)
			sn->marks[k].held = NULL;	/* the snapshot's now */
		pk->snaps[pk->nsnaps].marks = NULL;
	}
	pk->nsnaps++;
	return 0;
oom:
	for (size_t k = 0; sn->marks && k < pk->nsrc; k++)
		pf_mix_mark_release(&sn->marks[k]);
	return -ENOMEM;
}


/* Drop the first n records of a state's pieces (the records its packer
 * took past its position: placed in rows delivered or lost with the rows
 * not delivered, never to be read again).  @return 0, or -EBADMSG when it
 * has fewer. */
static int skip_records(pf_state *s, uint64_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < s->npieces; i++) {
		pf_piece p = s->pieces[i];
		uint64_t len = p.end - p.begin;

		if (n >= len) {
			n -= len;
			continue;
		}
		p.begin += n;
		n = 0;
		s->pieces[k++] = p;
	}
	s->npieces = k;
	return n ? -EBADMSG : 0;
}

int pf_pack_restore(pf_pack_run *pk, const pf_loader_config *cfg, const pf_topology *topo,
		    pf_error *err)
{
	size_t n = cfg->nresume, mine = SIZE_MAX;
	int ret = 0;

	pk->rst = pf_calloc(n, sizeof(*pk->rst));
	pk->resume_blobs = pf_calloc(n, sizeof(*pk->resume_blobs));
	pk->resumes = pf_calloc(n, sizeof(*pk->resumes));
	if (!pk->rst || !pk->resume_blobs || !pk->resumes)
		return -ENOMEM;
	pk->nrst = n;
	for (size_t i = 0; i < n && ret == 0; i++) {
		const struct pf_pack_state *q = &pk->rst[i].pack;
		const pf_topology *s0 = &pk->rst[0].pack.saver;

		ret = pf_state_decode(&pk->rst[i], cfg->resume[i].data, cfg->resume[i].len, err);
		if (ret < 0) {
			char msg[sizeof(err->msg)];

			snprintf(msg, sizeof(msg), "state %zu: %.*s", i, (int)sizeof(msg) - 32,
				 err->msg);
			memcpy(err->msg, msg, sizeof(msg));
			break;
		}
		if (!pk->rst[i].has_pack) {
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "state %zu was saved by a loader without packing; this "
					   "one packs (pack_length %u)", i, cfg->pack_length);
			break;
		}
		if (q->length != cfg->pack_length || q->mode != (uint32_t)cfg->pack_mode ||
		    q->pool != pk->packer.pool || q->nf != pk->nf) {
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "state %zu was saved packing %u features into rows of %u "
					   "(%s, pool %u); this loader packs %u into rows of %u (%s, "
					   "pool %u)", i, q->nf, q->length,
					   q->mode == PF_PACK_CONCAT ? "concat" : "first_fit", q->pool,
					   pk->nf, cfg->pack_length,
					   pf_pack_mode_name(cfg->pack_mode), pk->packer.pool);
			break;
		}
		if (q->saver.num_hosts != s0->num_hosts || q->saver.cores != s0->cores ||
		    q->saver.per_core_batch != s0->per_core_batch) {
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "state %zu was saved by one of %u hosts (%u x %u), state "
					   "0 by one of %u (%u x %u): not one job's states", i,
					   q->saver.num_hosts, q->saver.cores, q->saver.per_core_batch,
					   s0->num_hosts, s0->cores, s0->per_core_batch);
			break;
		}
		if (q->saver.host_index == topo->host_index)
			mine = i;
		if (pk->rst[i].skipped > pk->skipped_total)
			pk->skipped_total = pk->rst[i].skipped;
	}
	if (ret < 0)
		return ret;
	{
		const pf_topology *s0 = &pk->rst[0].pack.saver;

		pk->elastic = s0->num_hosts != topo->num_hosts || s0->cores != topo->cores ||
			      s0->per_core_batch != topo->per_core_batch;
	}
	if (!pk->elastic && mine == SIZE_MAX)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the states are of this topology (%u hosts, %u x %u), but none "
				    "is host %u's", topo->num_hosts, topo->cores,
				    topo->per_core_batch, topo->host_index);
	/* The same topology: this host's state, at its position.  Another:
	 * every old host's, each past the records its packer took (the rows
	 * not delivered are lost with them: at most the open rows a host). */
	for (size_t i = 0; i < n; i++) {
		pf_state *s = &pk->rst[i];
		size_t k = pk->nresumes;
		int64_t len;

		if (!pk->elastic && i != mine)
			continue;
		if (pk->elastic && !s->fresh && skip_records(s, s->pack.ahead) < 0)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
					    "state %zu: its packer took %llu records past its "
					    "position, more than the %llu it has left", i,
					    (unsigned long long)s->pack.ahead,
					    (unsigned long long)pf_state_remaining(s));
		s->has_pack = false;
		len = pf_state_encode(s, NULL, 0);
		pk->resume_blobs[k] = len > 0 ? pf_malloc((size_t)len) : NULL;
		if (len < 0 || !pk->resume_blobs[k] ||
		    pf_state_encode(s, pk->resume_blobs[k], (size_t)len) != len)
			return -ENOMEM;
		s->has_pack = true;
		pk->resumes[k] = (pf_state_blob){ pk->resume_blobs[k], (size_t)len };
		pk->nresumes = k + 1;
	}
	if (!pk->elastic)
		pk->own = pk->rst[mine].pack;
	return 0;
}

/* Another topology: the packer empty at the states' epoch, after the
 * steps they had delivered, its steps the fewest rows any new host makes
 * of its share of the records they left. */
static int restore_elastic(pf_packing *l, pf_pack_run *pk, pf_error *err)
{
	const pf_pipe *in = pk->inner;
	const pf_state *s0 = &pk->rst[0];
	uint64_t least = UINT64_MAX;
	int ret = 0;

	for (size_t i = 0; i < pk->nrst; i++) {
		const struct pf_pack_state *q = &pk->rst[i].pack;

		if (q->global_step > pk->gstep)
			pk->gstep = q->global_step;
		if (!pk->rst[i].fresh && q->step_base + q->step > pk->step_base)
			pk->step_base = q->step_base + q->step;
	}
	if (!in->resumed)	/* between epochs: the next, planned as any */
		return pf_pack_plan_epoch(l, pk, in->start_epoch, err);
	for (uint32_t h = 0; h < l->topo.num_hosts && ret == 0; h++) {
		pf_piece *pieces;
		size_t npieces;
		uint64_t rows = 0;

		/* Shares are the inner loaders' (one core of PF_PACK_GROUP). */
		ret = pf_resume_elastic_share(in, h, pk->rst, pk->nrst, &pieces, &npieces, err);
		if (ret < 0)
			break;
		ret = pf_pack_plan_pieces(&pk->inner_order, &pk->packer, l->cfg.seed, in->start_epoch,
					  pk->lengths, pk->nf, pk->cap, &s0->origin,
					  s0->origin_block, s0->origin_permute, s0->origin_slice,
					  s0->origin_group, pieces, npieces, &rows);
		pf_free(pieces);
		if (ret < 0)
			ret = pf_error_set(err, ret, PF_OFFSET_NONE, 0,
					   "planning the resumed epoch %u: %s", in->start_epoch,
					   pf_strerror(ret));
		if (rows < least)
			least = rows;
		if (h == l->topo.host_index)
			pk->epoch_rows = rows;
	}
	pk->epoch_steps = least / pk->B;
	return ret;
}

int pf_pack_restore_plan(pf_packing *l, pf_pack_run *pk, pf_error *err)
{
	const struct pf_pack_state *q = &pk->own;
	int ret;

	if (pk->elastic)
		ret = restore_elastic(l, pk, err);
	else if (pk->inner->resumed || q->step || q->step_base)
		/* inside the epoch: its plan, as the state says; its order
		 * the inner loader's own unless an elastic resume cut it */
		ret = q->step_base ? 0 : pf_pack_direct_epoch(l, pk, pk->inner->start_epoch);
	else
		ret = pf_pack_plan_epoch(l, pk, pk->inner->start_epoch, err);
	if (ret == 0 && !pk->elastic) {
		pk->packer.next_row = q->next_row;
		pk->packer.nopen = q->nopen;
		for (uint32_t r = 0; r < q->nopen; r++) {
			pf_pack_row *row = &pk->packer.open[r];

			memset(row, 0, sizeof(*row));
			row->id = q->id[r];
			row->segments = q->segments[r];
			for (uint32_t f = 0; f < q->nf; f++)
				row->fill[f] = q->fill[r][f];
		}
		pk->step = q->step;
		pk->step_base = q->step_base;
		pk->gstep = q->global_step;
		if (pk->inner->resumed || q->step || q->step_base) {
			pk->epoch_steps = q->epoch_steps;
			pk->epoch_rows = q->epoch_rows;
		}
	}
	pf_pack_restore_free(pk, false);
	return ret;
}

void pf_pack_restore_free(pf_pack_run *pk, bool blobs)
{
	for (size_t i = 0; i < pk->nrst; i++)
		pf_state_release(&pk->rst[i]);
	pf_free(pk->rst);
	pk->rst = NULL;
	pk->nrst = 0;
	if (!blobs)
		return;
	for (size_t i = 0; i < pk->nresumes; i++)
		pf_free(pk->resume_blobs[i]);
	pf_free(pk->resume_blobs);
	pf_free(pk->resumes);
}

/* ------------------------------------------------------------------ */
/* Checkpoints                                                          */

int64_t pf_pack_save_state(pf_packing *l, void *buf, size_t cap)
{
	pf_pack_run *pk = l->pack;
	const pf_pipe *in = pk->inner;
	uint64_t delivered = pk->step * pk->B;
	bool done = pk->step >= pk->epoch_steps && pk->epoch_steps;
	const pack_snap *sn = NULL;
	struct pf_pack_state q;
	pf_piece *pieces;
	pf_packer packer;
	size_t si = 0;
	pf_state s;
	int64_t n;

	/* The last checkpoint whose packer had opened no row not yet
	 * delivered: from there the packer makes those rows again. */
	for (size_t i = pk->nsnaps; i-- > 0 && !sn;)
		if (pk->snaps[i].packer.next_row <= delivered) {
			sn = &pk->snaps[i];
			si = i;
		}
	if (!done && !sn)	/* cannot be: the epoch's first has none */
		return -EIO;
	packer = done ? pk->packer : sn->packer;
	if (done) {	/* the epoch is delivered: the next one, from its start */
		packer.nopen = 0;
		packer.next_row = 0;
	}
	q = (struct pf_pack_state){
		.length = pk->L, .mode = (uint32_t)l->cfg.pack_mode, .pool = pk->packer.pool,
		.nf = pk->nf, .saver = l->topo,
		.step = done ? 0 : pk->step,
		.global_step = pk->gstep,
		.ahead = sn && pk->step < pk->epoch_steps ? pk->consumed - sn->consumed : 0,
		.step_base = done ? 0 : pk->step_base,
		.epoch_steps = done ? 0 : pk->epoch_steps,
		.epoch_rows = done ? 0 : pk->epoch_rows,
		.next_row = packer.next_row, .nopen = packer.nopen,
	};
	for (uint32_t r = 0; r < packer.nopen; r++) {
		q.id[r] = packer.open[r].id;
		q.segments[r] = packer.open[r].segments;
		for (uint32_t f = 0; f < pk->nf; f++)
			q.fill[r][f] = packer.open[r].fill[f];
	}
	if (pk->mix) {
		/* A packed mixture's run is one epoch: delivered, it says so
		 * (its steps all taken) from its last checkpoint. */
		pack_snap at;

		if (!sn)
			sn = &pk->snaps[si = pk->nsnaps - 1];
		at = *sn;
		at.marks = pk->snap_marks + si * pk->nsrc;
		if (done) {
			q.step = pk->step;
			q.epoch_steps = pk->epoch_steps;
			q.epoch_rows = pk->epoch_rows;
			q.next_row = pk->epoch_steps * pk->B;
		}
		return pf_pack_mix_save_state(l, &at, &q, buf, cap);
	}
	pieces = pf_calloc(in->resume.npieces + 1, sizeof(*pieces));
	if (!pieces)
		return -ENOMEM;
	if (done)
		pf_resume_state_at(in, pk->epoch + 1, 0, sn ? sn->gstep : 0, true, &s, pieces);
	else
		pf_resume_state_at(in, sn->epoch, sn->step, sn->gstep, sn->fresh, &s, pieces);
	s.has_pack = true;
	s.skipped = pk->skipped_total;
	s.pack = q;
	n = pf_state_encode(&s, buf, cap);
	pf_free(pieces);
	return n;
}
