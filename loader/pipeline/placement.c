/* SPDX-License-Identifier: Apache-2.0 */
/* Placement: one record (or hole) into its row of its batch slot.  Where
 * a record goes (locate()) follows from its stream position alone: the
 * shuffle block's permutation and slots, which the schedule opened before
 * the record was read (schedule.c).  The rows written are counted into
 * the slots and the blocks here.  With the window of records as read
 * (l->staged: image features) a record is copied into the window on its
 * way instead, and its row decoded once all its step's records are in
 * (pf_place_rows()): the same bytes into the same row, so the batches
 * are the same either way.  Not here: reading or framing the records
 * (decode.c), the window's pages (window.c), or what a drop does beyond
 * the hole (drops.c). */
#include <errno.h>
#include <string.h>

#include "pipeline_internal.h"
#include "spec_internal.h"

/* Account n records of block g as done (decoded or skipped); the ring
 * entry comes free with the block's last record. */
static void block_done(pf_pipe *l, uint64_t g, uint32_t n)
{
	sblock *b = ring_at(l, g);

	if (__atomic_sub_fetch(&b->remaining, n, __ATOMIC_ACQ_REL) == 0) {
		pthread_mutex_lock(&l->mu);
		b->open = false;
		pthread_cond_signal(&l->cv_block);
		pthread_mutex_unlock(&l->mu);
	}
}

/* The same for the records [pos, pos + count) of a stream of blocks of
 * w records, whose block holding pos is g0. */
void pf_place_done(pf_pipe *l, uint64_t g0, uint64_t pos, uint64_t count, uint64_t w)
{
	uint64_t end = pos + count;

	for (uint64_t g = g0, p = pos; p < end; g++) {
		uint64_t stop = (p / w + 1) * w;

		stop = stop < end ? stop : end;
		block_done(l, g, (uint32_t)(stop - p));
		p = stop;
	}
}

/* One record of file `file`, of a block of `epoch`, into w->dst: straight
 * from the wire bytes (the worker's arena is scratch for the rare shapes
 * the fast path hands back). */
static int decode_into(pf_pipe *l, worker *w, uint32_t file, uint32_t epoch,
		       const pf_record *rec, pf_error *err)
{
	pf_arena_reset(&w->arena);
	if (l->images.n)
		return pf_images_decode(l, w, file, epoch, rec, err);
	return pf_spec_decode_unfenced(&l->spec, rec->data, (size_t)rec->len, &w->arena,
				       w->dst, err);
}

/* Record rec of unit `unit` did not decode (ret, err): err names it.  In
 * skip mode a damaged record is dropped (reported with its file):
 * @return 1, its row a hole; else ret. */
static int record_failed(pf_pipe *l, const pf_record *rec, uint64_t unit, int ret,
			 pf_error *err)
{
	err->record = (int64_t)rec->index;
	/* A feature missing has no byte of its own: the record's. */
	if (err->offset_kind == PF_OFFSET_NONE) {
		err->offset_kind = PF_OFFSET_STREAM;
		err->offset = rec->offset;
	}
	if (ret != -EBADMSG || l->cfg.on_corrupt != PF_CORRUPT_SKIP)
		return ret;
	pf_drop d = { .unit = PF_DROP_RECORD, .offset_kind = PF_OFFSET_STREAM,
		      .start = rec->offset, .resume = rec->offset + rec->len,
		      .next_record = rec->index + 1, .records = 1, .cause = *err };

	ret = pf_drop_report(l, &d, l->ds->paths[l->ds->units[unit].file]);
	return ret < 0 ? ret : 1;
}

/* The slot and row of stream position p of chunk c: NULL when its
 * output falls outside the piece or past max_steps (not this run's). */
static batch_slot *locate(const pf_pipe *l, const chunk *c, uint64_t p, uint32_t *row,
			  size_t *ti)
{
	const sblock *b = ring_at(l, c->g0 + (p / c->w - c->pos / c->w));
	uint32_t r = (uint32_t)(p - b->first_pos);
	uint32_t o = b->perm ? b->perm[r] : r;
	uint64_t e, step;

	if (o < b->olo || o >= b->ohi)
		return NULL;
	e = b->ebase + (o - b->olo);
	step = e / l->host_batch - b->j0;
	if (step >= b->nslots)
		return NULL;
	*row = (uint32_t)(e % l->host_batch);
	*ti = (size_t)(b - l->ring) * l->spb + step;
	return b->slot[step];
}

static void tally(worker *w, size_t ti)
{
	if (w->tally[ti]++ == 0)
		w->touched[w->ntouched++] = (uint32_t)ti;
}

/* Point w->dst at row of slot s, or where the loader's sink wants it. */
static void aim(const pf_pipe *l, worker *w, batch_slot *s, uint32_t row)
{
	uint32_t core = row / l->topo.per_core_batch, idx = row % l->topo.per_core_batch;
	const pf_row_sink *sink = __atomic_load_n(&l->sink, __ATOMIC_ACQUIRE);

	if (sink && sink->aim(sink->ctx, (s->batch.global_step - l->gstep0) * l->host_batch + row,
			      w->dst))
		return;
	for (uint32_t f = 0; f < l->spec.n; f++)
		w->dst[f] = (uint8_t *)s->core[core].block + l->toff[f] +
			    (size_t)idx * l->fbytes[f];
}

/* Position p of chunk c is a hole: a record lost to damage (skip mode).
 * Its row is zeros and marked invalid; it counts as written. */
void pf_place_hole(pf_pipe *l, worker *w, const chunk *c, uint64_t p)
{
	uint32_t row;
	size_t ti;
	batch_slot *s = locate(l, c, p, &row, &ti);

	if (!s)
		return;
	if (l->staged) {
		/* Its row is made a hole when its step's rows are decoded. */
		s->wrec[row] = (pf_wrec){ .unit = c->seg.unit, .len = PF_WREC_HOLE };
		tally(w, ti);
		return;
	}
	aim(l, w, s, row);
	for (uint32_t f = 0; f < l->spec.n; f++)
		memset(w->dst[f], 0, l->fbytes[f]);
	s->valid[row] = 0;
	__atomic_store_n(&s->holes, true, __ATOMIC_RELAXED);	/* published by pf_place_flush() */
	tally(w, ti);
}

/* Decode record rec, at stream position p of chunk c, into its row.
 * Records whose output is not this run's are skipped.  In skip mode a
 * record that does not decode is dropped (reported with the file) and
 * its row is a hole. */
int pf_place_record(pf_pipe *l, worker *w, const chunk *c, uint64_t p,
		    const pf_record *rec, pf_error *err)
{
	uint32_t row;
	size_t ti;
	batch_slot *s = locate(l, c, p, &row, &ti);
	const pf_record_hook *hook = __atomic_load_n(&l->record_hook, __ATOMIC_ACQUIRE);
	void *plan = NULL;
	int ret;

	if (!s)
		return 0;
	if (l->staged) {
		/* Its bytes wait in the window for its step (pf_place_rows()). */
		pf_window_stage(l, w, rec, c->seg.unit, &s->wrec[row]);
		tally(w, ti);
		return 0;
	}
	aim(l, w, s, row);
	/* A packing loader's inner loader (one core): a record planned
	 * ahead goes straight into its packed rows. */
	if (hook)
		plan = hook->aim(hook->ctx, (unsigned)(w - l->workers), w->dst, s->batch.epoch,
				 s->batch.step * l->host_batch + row,
				 (s->batch.global_step - l->gstep0) * l->host_batch + row);
	ret = decode_into(l, w, l->ds->units[c->seg.unit].file,
			  ring_at(l, c->g0 + (p / c->w - c->pos / c->w))->epoch, rec, err);
	if (ret < 0) {
		ret = record_failed(l, rec, c->seg.unit, ret, err);
		if (ret == 1)
			pf_place_hole(l, w, c, p);
		return ret == 1 ? 0 : ret;
	}
	if (plan)
		hook->put(hook->ctx, (unsigned)(w - l->workers), plan);
	tally(w, ti);
	return 0;
}

/* Add the chunk's rows to the slots' counts; wake the consumer when a
 * slot is full (with the window of records as read: the decoders, whose
 * rows' records are then all in).  Before pf_place_done(): the ring
 * entries must still be the chunk's. */
void pf_place_flush(pf_pipe *l, worker *w)
{
	bool full = false;

	/* Rows streamed by the chunk's decodes are complete before a count
	 * says so (a locked add is not documented to order non-temporal
	 * stores on every x86). */
	pf_spec_fence();
	for (uint32_t i = 0; i < w->ntouched; i++) {
		uint32_t ti = w->touched[i];
		batch_slot *s = l->ring[ti / l->spb].slot[ti % l->spb];
		uint32_t *count = l->staged ? &s->staged : &s->filled;

		full |= __atomic_add_fetch(count, w->tally[ti], __ATOMIC_ACQ_REL) == l->host_batch;
		w->tally[ti] = 0;
	}
	w->ntouched = 0;
	if (full) {
		pthread_mutex_lock(&l->mu);
		if (l->staged)
			pf_decode_broadcast(l);
		else
			pthread_cond_signal(&l->cv_ready);
		pthread_mutex_unlock(&l->mu);
	}
}

/* Row `row` of slot s a hole: zeros, marked invalid. */
static void hole_row(pf_pipe *l, worker *w, batch_slot *s, uint32_t row)
{
	aim(l, w, s, row);
	for (uint32_t f = 0; f < l->spec.n; f++)
		memset(w->dst[f], 0, l->fbytes[f]);
	s->valid[row] = 0;
	__atomic_store_n(&s->holes, true, __ATOMIC_RELAXED);	/* published with filled */
}

int pf_place_rows(pf_pipe *l, worker *w, const pf_wtask *t, pf_error *err)
{
	batch_slot *s = t->s;

	for (uint32_t row = t->r0; row < t->r1; row++) {
		const pf_wrec *r = &s->wrec[row];
		const pf_unit *u = &l->ds->units[r->unit];
		pf_record rec;
		int ret;

		if (r->len == PF_WREC_HOLE) {
			hole_row(l, w, s, row);
			continue;
		}
		rec = (pf_record){ .data = pf_window_bytes(l, w, r), .len = r->len,
				   .offset = r->offset, .index = r->index };
		aim(l, w, s, row);
		/* The block's epoch is its steps': the draws are the same as
		 * when the record is decoded at once. */
		ret = decode_into(l, w, u->file, s->batch.epoch, &rec, err);
		pf_window_release(l, w, r);
		if (ret < 0) {
			ret = record_failed(l, &rec, r->unit, ret, err);
			if (ret == 1) {
				hole_row(l, w, s, row);
				continue;
			}
			/* As a frame's decode names it (decode.c). */
			pf_frame_locate(err, u);
			pf_error_set_file(err, l->ds->paths[u->file]);
			return ret;
		}
	}
	pf_spec_fence();
	if (__atomic_add_fetch(&s->filled, t->r1 - t->r0, __ATOMIC_ACQ_REL) == l->host_batch) {
		pthread_mutex_lock(&l->mu);
		pthread_cond_signal(&l->cv_ready);
		pthread_mutex_unlock(&l->mu);
	}
	return 0;
}
