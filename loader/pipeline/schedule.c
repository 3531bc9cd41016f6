/* SPDX-License-Identifier: Apache-2.0 */
/* The schedule: what the I/O thread reads, in which order.  Epoch by
 * epoch (a fresh one from its plan, a resumed one from its pieces), it
 * walks the segments of each piece's stream; before the first segment
 * that reaches a shuffle block it opens the block (its permutation, and a
 * batch slot for each step its records reach, taken in step order), then
 * dispatches the segment: one read of a frame, or a stream file's
 * sub-segments.  Ahead of the dispatch, the same walk wants the segments
 * to come (files.c opens their files meanwhile, a bounded number ahead).
 * Every step waits in pf_reads_wait() (io_thread.c), which completes
 * reads and opens meanwhile.  Not here: the plan of an epoch (loader/plan/),
 * the reads (io_thread.c), the files (files.c), the records (decode.c,
 * placement.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline_internal.h"

/* What pf_reads_wait() waits for: a free chunk, compressed buffer,
 * stream state, batch slot or ring entry, or the end of the streams. */

static bool chunk_free(const pf_pipe *l, uint64_t arg)
{
	(void)arg;
	return l->free_chunks != NULL;
}

/* A read buffer free, or made now (the pool grows as reads need it, up
 * to the limit autotune sets): the one predicate that changes the
 * loader, under l->mu as every predicate runs. */
static bool cbuf_free(const pf_pipe *l, uint64_t arg)
{
	(void)arg;
	return pf_budget_cbuf_ready((pf_pipe *)l);
}

static bool stream_free(const pf_pipe *l, uint64_t arg)
{
	(void)arg;
	return l->free_streams != NULL;
}

/* A batch slot free, or one more the limit allows (made after the
 * unlock, by its taker). */
static bool slot_free(const pf_pipe *l, uint64_t arg)
{
	(void)arg;
	return l->free_slots != NULL || l->slots_made < l->slots_limit;
}

static bool ring_free(const pf_pipe *l, uint64_t g)
{
	return !ring_at(l, g)->open;
}

static bool streams_idle(const pf_pipe *l, uint64_t arg)
{
	(void)arg;
	return l->active == NULL;
}

/* Where the walk over one piece is. */
typedef struct walk {
	const epoch_run *er;
	uint32_t host;		/* origin host: its stream and block seeds */
	uint32_t w;		/* records per block */
	uint64_t begin, end;	/* outputs of that stream the piece delivers */
	uint64_t out_base;	/* epoch output index of output begin */
	uint64_t rstep0;	/* run step of the epoch's first batch */
	uint64_t stream_len;
	uint64_t kfirst;	/* the piece's first block */
	uint64_t gbase;		/* global number of block kfirst */
	uint64_t next_block;	/* the next block to open */
	/* The run's first block: its segments in the order of the first
	 * output each fills (first_block_order()). */
	struct seg_item *first;
	size_t nfirst;
} walk;

/* A segment to dispatch: cut to the piece, at stream position lo, the
 * plan's segment s; key: the first block output it fills. */
typedef struct seg_item {
	pf_segment seg;
	uint64_t lo;
	size_t s;
	uint32_t key;
} seg_item;

/* The epoch output index of block k's first output inside the piece. */
static uint64_t block_out(const walk *wk, uint64_t k)
{
	uint64_t first = k * wk->w;

	return wk->out_base + (first > wk->begin ? first - wk->begin : 0);
}

/* A batch slot for run step r: the last one taken when the previous
 * block ended inside that step, else a new one at the tail of the open
 * list.  @return NULL when the loader halts (l->mu not held). */
static batch_slot *step_slot(pf_pipe *l, pf_io *io, const walk *wk, uint64_t j)
{
	const epoch_run *er = wk->er;
	uint64_t r = wk->rstep0 + j;
	batch_slot *bs;
	bool fresh;

	if (l->last_slot && l->last_rstep == r)
		return l->last_slot;
	if (pf_reads_wait(l, io, slot_free, 0, &l->cv_batch) < 0) {
		pthread_mutex_unlock(&l->mu);
		return NULL;
	}
	bs = pf_budget_slot_take(l, &fresh);
	if (fresh && !l->staged) {
		/* Its first use: its pages are faulted in here, not under
		 * the lock the workers and the consumer take. */
		pthread_mutex_unlock(&l->mu);
		pf_budget_slot_make(l, bs);
		pthread_mutex_lock(&l->mu);
	}
	bs->filled = 0;
	if (bs->holes) {
		memset(bs->valid, 1, l->host_batch);
		for (uint32_t c = 0; c < l->topo.cores; c++)
			bs->core[c].nvalid = l->topo.per_core_batch;
		bs->holes = false;
	}
	bs->batch.epoch = er->epoch;
	bs->batch.step = er->step0 + j;
	bs->batch.global_step = l->gstep0 + r;
	bs->batch.epoch_start = er->step0 + j == 0;
	bs->batch.epoch_end = j + 1 == er->steps;
	if (l->open_tail)
		l->open_tail->next = bs;
	else
		l->open_head = bs;
	l->open_tail = bs;
	if (l->staged)
		pf_window_slot_opened(l, bs);	/* its rows once its records are in */
	pthread_mutex_unlock(&l->mu);
	l->last_slot = bs;
	l->last_rstep = r;
	return bs;
}

/* Open the piece's block k: its ring entry, permutation and a slot for
 * each step its outputs reach inside max_steps.  @return 0, 1 when the
 * block starts at or past max_steps (it is opened, with no slots: the
 * walk ends after the current segment), or <0 with l->mu not held. */
static int open_block(pf_pipe *l, pf_io *io, walk *wk, uint64_t k)
{
	uint64_t g = wk->gbase + (k - wk->kfirst), first = k * wk->w;
	uint64_t left = wk->stream_len - first;
	uint32_t n = left < wk->w ? (uint32_t)left : wk->w;
	uint64_t lo = first > wk->begin ? first : wk->begin;
	uint64_t hi = first + n < wk->end ? first + n : wk->end;
	uint64_t e_lo = block_out(wk, k);
	uint64_t j0 = e_lo / l->host_batch;
	uint64_t j1 = (e_lo + (hi - lo) - 1) / l->host_batch + 1;
	int over = 0, ret;
	sblock *b;

	if (l->cfg.max_steps) {
		uint64_t cap = l->cfg.max_steps > wk->rstep0 ? l->cfg.max_steps - wk->rstep0 : 0;

		over = j0 >= cap;
		j1 = j1 < cap ? j1 : cap;
		j1 = j1 > j0 ? j1 : j0;
	}
	ret = pf_reads_wait(l, io, ring_free, g, &l->cv_block);
	if (ret < 0) {
		pthread_mutex_unlock(&l->mu);
		return ret;
	}
	b = ring_at(l, g);
	b->open = true;
	pthread_mutex_unlock(&l->mu);

	b->remaining = n;
	b->first_pos = first;
	b->olo = (uint32_t)(lo - first);
	b->ohi = (uint32_t)(hi - first);
	b->ebase = e_lo;
	b->j0 = j0;
	b->epoch = wk->er->epoch;
	b->nslots = 0;
	b->perm = NULL;
	if (wk->er->permute && j1 > j0) {
		b->perm = l->mem_perm + (size_t)(g % l->nring) * l->wmax;
		pf_plan_block_perm(l->cfg.seed, wk->er->epoch, wk->host, k, b->perm, n);
	}
	b->slot = l->mem_slotptr + (size_t)(g % l->nring) * l->spb;
	for (uint64_t j = j0; j < j1; j++) {
		batch_slot *bs = step_slot(l, io, wk, j);

		if (!bs)
			return -ECANCELED;
		b->slot[j - j0] = bs;
		b->nslots++;
	}
	return over;
}

/* Give chunk c to the decoders. */
static void enqueue(pf_pipe *l, chunk *c)
{
	pthread_mutex_lock(&l->mu);
	pf_decode_queue(l, c);
	pthread_cond_broadcast(&l->cv_decode);
	if (l->pool)
		pf_decode_pool_wake(l->pool, false);	/* a chunk: one thread */
	pthread_mutex_unlock(&l->mu);
}

static int take_chunk(pf_pipe *l, pf_io *io, const walk *wk, uint64_t pos, chunk **out)
{
	int ret = pf_reads_wait(l, io, chunk_free, 0, &l->cv_chunk);

	if (ret == 0) {
		chunk *c = l->free_chunks;

		l->free_chunks = c->next;
		l->chunks_out++;
		pf_error_clear(&c->ioerr);
		c->cbuf = -1;
		c->df = NULL;
		c->nmore = 0;
		c->npages = 0;
		c->pages = c->pages_tail = PF_WINDOW_NONE;
		c->ss = NULL;
		c->ss_last = false;
		c->pos = pos;
		c->w = wk->w;
		c->g0 = wk->gbase + (pos / wk->w - wk->kfirst);
		*out = c;
	}
	pthread_mutex_unlock(&l->mu);
	return ret;
}

/* Open the piece's blocks up to k; blocks past max_steps too (with no
 * slots), so that every block a dispatched read touches is in the ring.
 * @return 0, 1 when a block past max_steps was opened, or <0. */
static int open_through(pf_pipe *l, pf_io *io, walk *wk, uint64_t k)
{
	int over = 0;

	for (; wk->next_block <= k; wk->next_block++) {
		int ret = open_block(l, io, wk, wk->next_block);

		if (ret < 0)
			return ret;
		over |= ret;
	}
	return over;
}

/* A stream segment: sub-segments of at most PF_STREAM_CHUNK_ROWS
 * records, decoded in order through one shared stream state; each opens
 * only the blocks it reaches, so a long file never needs the whole
 * segment's blocks at once.  @return 0, 1 when max_steps was reached, or
 * <0. */
static int dispatch_stream(pf_pipe *l, pf_io *io, walk *wk, pf_segment seg,
			   uint64_t pos)
{
	uint32_t file = l->ds->units[seg.unit].file;
	stream_state *ss;
	int over = 0, slot = pf_files_take(l, io, file), ret;

	if (slot < 0)
		return slot;
	ret = pf_reads_wait(l, io, stream_free, 0, &l->cv_chunk);
	if (ret < 0) {
		pthread_mutex_unlock(&l->mu);
		return ret;
	}
	/* Taken and made active: pf_reads_wait() reads its first blocks from
	 * here on, while its sub-segments are dispatched. */
	ss = l->free_streams;
	l->free_streams = ss->next;
	ss->src = NULL;
	ss->busy = false;
	ss->next_first = seg.first;
	ss->file = file;	/* given back when the stream is retired */
	ss->slot = (uint32_t)slot;
	ss->size = pf_io_file_size(io, ss->slot);
	ss->nblocks = ss->end_block = (ss->size + PF_READ_DEFAULT - 1) / PF_READ_DEFAULT;
	ss->next_read = ss->next_feed = 0;
	ss->reading = 0;
	ss->finished = false;
	ss->held = NULL;
	ss->parked = NULL;
	for (unsigned i = 0; i < PF_STREAM_BUFS; i++)
		ss->buf[i].state = SBUF_FREE;
	ss->next = NULL;
	if (l->active_tail)
		l->active_tail->next = ss;
	else
		l->active = ss;
	l->active_tail = ss;
	pthread_mutex_unlock(&l->mu);
	for (uint64_t done = 0; done < seg.count && !over;) {
		uint64_t n = seg.count - done;
		chunk *c = NULL;

		n = n < PF_STREAM_CHUNK_ROWS ? n : PF_STREAM_CHUNK_ROWS;
		over = open_through(l, io, wk, (pos + done + n - 1) / wk->w);
		if (over < 0)
			return over;
		ret = take_chunk(l, io, wk, pos + done, &c);
		if (ret < 0)
			return ret;
		c->seg = (pf_segment){ seg.unit, seg.first + done, n };
		c->ss = ss;
		done += n;
		/* Past max_steps nothing more is dispatched: this is the
		 * stream's last sub-segment then too (it finishes the
		 * stream, which pf_schedule_run() waits for). */
		c->ss_last = done == seg.count || over;
		enqueue(l, c);
	}
	return over;
}

/* The window of records as read: the pages for `bytes` of a chunk's
 * records onto c's chain, waited for while reads complete (window.c gives
 * them back as the steps' rows are decoded).  In the plan's order: the
 * oldest block's records get theirs first.  @return 0, or <0 with the
 * loader halted or failed. */
static int reserve_pages(pf_pipe *l, pf_io *io, uint64_t bytes, chunk *c)
{
	uint32_t n = pf_window_pages(bytes);
	/* cv_chunk: a chunk's end signals it (what pf_window_room() asks
	 * when no page comes free), and pages given back wake the I/O
	 * thread whatever it sleeps on. */
	int ret = pf_reads_wait(l, io, pf_window_room, n, &l->cv_chunk);

	if (ret == 0)
		ret = pf_window_take(l, n, c, true);
	pthread_mutex_unlock(&l->mu);
	return ret < 0 ? ret : 0;
}

/* A frame segment: one read of the frame (its file is the read's until
 * the read completes). */
static int dispatch_frame(pf_pipe *l, pf_io *io, const walk *wk,
			  pf_segment seg, size_t s, uint64_t pos)
{
	const pf_unit *u = &l->ds->units[seg.unit];
	uint64_t len = u->csize;
	chunk *c = NULL;
	pf_dframe *df = NULL;
	bool load = false;
	int slot, ret;

	/* The window of records as read: a frame's records take at most its
	 * decompressed bytes (a slice of a ready cached frame, its own). */
	uint64_t bytes = u->usize;
	chunk staged = { .pages = PF_WINDOW_NONE, .pages_tail = PF_WINDOW_NONE };

	if (l->fcache.n) {
		/* The global shuffle's cache: a frame kept is not read.  Its
		 * slice joins the queued chunk of slices when its frame is
		 * ready and there is room (and, with the window of records as
		 * read, pages for it now), else a chunk of its own. */
		chunk *h;

		pthread_mutex_lock(&l->mu);
		df = pf_fcache_take(l, seg.unit, s, &load);
		h = l->hit_open;
		if (df && !load) {
			pf_files_skip(l, io, u->file);
			if (df->ready)
				bytes = df->offs[seg.first + seg.count] - df->offs[seg.first];
			if (df->ready && h && h->nmore < PF_CHUNK_MORE &&
			    h->w == wk->w &&
			    (!l->staged || pf_window_take(l, pf_window_pages(bytes), h, false))) {
				h->more[h->nmore++] = (chunk_more){
					seg, pos, wk->gbase + (pos / wk->w - wk->kfirst), df };
				pthread_mutex_unlock(&l->mu);
				return 0;
			}
		}
		pthread_mutex_unlock(&l->mu);
	}
	/* Before the chunk: the pages may wait for chunks in flight. */
	if (l->staged) {
		ret = reserve_pages(l, io, bytes, &staged);
		if (ret < 0)
			return ret;
	}
	ret = take_chunk(l, io, wk, pos, &c);
	if (ret < 0)
		return ret;
	c->pages = staged.pages;
	c->pages_tail = staged.pages_tail;
	c->npages = staged.npages;
	c->seg = seg;
	c->df = df;
	if (df && !load) {
		pthread_mutex_lock(&l->mu);
		pf_decode_queue(l, c);
		l->hit_open = c;
		/* One worker for it (all, when some are parked: a parked one
		 * woken alone would not take it). */
		if (l->active_workers < l->nworkers)
			pf_decode_broadcast(l);
		else
			pf_decode_signal(l);
		pthread_mutex_unlock(&l->mu);
		return 0;
	}
	slot = pf_files_take(l, io, u->file);
	if (slot < 0)
		return slot;
	ret = pf_reads_wait(l, io, cbuf_free, 0, &l->cv_cbuf);
	if (ret < 0) {
		pthread_mutex_unlock(&l->mu);
		return ret;
	}
	c->cbuf = l->free_cbuf[--l->nfree_cbuf];
	pthread_mutex_unlock(&l->mu);
	/* O_DIRECT: an aligned start (frames are aligned) and a length
	 * rounded up; the tail may be padding. */
	if (pf_io_file_direct(io, (uint32_t)slot))
		len = round_up(len, PF_ALIGN);
	c->req = (pf_io_req){
		.file = (uint32_t)slot,
		.offset = u->offset,
		.len = (uint32_t)len,
		.buf = l->mem_cbufs + (size_t)c->cbuf * l->cbuf_bytes,
		.buf_index = pf_io_buffers_registered(io) ? c->cbuf : -1,
		.user = c,
	};
	c->submit_ns = pf_now_ns();
	ret = pf_reads_submit(l, io, &c->req);
	if (ret == 0)
		ret = pf_reads_reap(l, io, 0) < 0 ? -EIO : 0;
	return ret;
}

/* Where a walk is in its plan's segments: the first block's, in the
 * order they are read (walk.first), then the plan's from s on. */
typedef struct seg_cursor {
	size_t s;		/* the next segment of the plan */
	uint64_t pos;		/* its stream position */
	size_t at;		/* the next of walk.first */
} seg_cursor;

/* The next segment the walk over a piece reads from cur: the segments of
 * its stream that hold its blocks, each cut to them (the blocks before
 * the piece and after it are not read).  @return 1 with it in *seg (at
 * stream position *lo), 0 when there is none, 2 when it would start at
 * or past max_steps. */
static int next_segment(const pf_pipe *l, const walk *wk, const pf_epoch_plan *plan,
			seg_cursor *cur, pf_segment *seg, uint64_t *lo)
{
	uint64_t w = wk->w;
	uint64_t live_lo = wk->kfirst * w, live_hi = ((wk->end - 1) / w + 1) * w;

	live_hi = live_hi < wk->stream_len ? live_hi : wk->stream_len;
	while (cur->s < plan->nseg && cur->pos < live_hi) {
		pf_segment sg = plan->seg[cur->s++];
		uint64_t a = cur->pos, b = cur->pos + sg.count;

		cur->pos = b;
		if (b <= live_lo)
			continue;
		if (a < live_lo) {
			sg.first += live_lo - a;
			a = live_lo;
		}
		b = b < live_hi ? b : live_hi;
		sg.count = b - a;
		if (l->cfg.max_steps &&
		    wk->rstep0 + block_out(wk, a / w) / l->host_batch >= l->cfg.max_steps)
			return 2;
		*seg = sg;
		*lo = a;
		return 1;
	}
	return 0;
}

/* The next segment the walk dispatches from cur: the first block's in
 * their order, then the plan's (next_segment()). */
static int next_item(const pf_pipe *l, const walk *wk, const pf_epoch_plan *plan,
		     seg_cursor *cur, seg_item *it)
{
	int got;

	if (cur->at < wk->nfirst) {
		*it = wk->first[cur->at++];
		return 1;
	}
	got = next_segment(l, wk, plan, cur, &it->seg, &it->lo);
	it->s = cur->s - 1;
	return got;
}

static int by_key(const void *a, const void *b)
{
	const seg_item *x = a, *y = b;

	return x->key != y->key ? (x->key < y->key ? -1 : 1) : (x->lo < y->lo ? -1 : 1);
}

/* The run's first block read in the order its outputs come out: the
 * segments that fill the first step first, then those of the second...
 * A batch's rows are scattered over the block by its permutation, so in
 * stream order the first step waits for nearly the whole block (a
 * shuffle window of small shards behind a far bucket: every shard of the
 * window opened and read, round trip after round trip); in this order it
 * waits for its own rows' segments.  Where each record goes is unchanged.
 * Not with stream files (their sub-segments are read in file order).
 * *base: the plan's cursor after the block.  @return 0, 1 when the block
 * is past max_steps, or <0. */
static int first_block_order(pf_pipe *l, pf_io *io, walk *wk, const pf_epoch_plan *plan,
			     seg_cursor *base)
{
	uint64_t k0 = wk->kfirst * wk->w, kend = k0 + wk->w;
	const sblock *b;
	size_t cap = 0;
	int ret = open_through(l, io, wk, wk->kfirst);

	if (ret != 0)
		return ret;
	b = ring_at(l, wk->gbase);
	for (;;) {
		seg_cursor at = *base;
		seg_item it;
		uint64_t end;

		if (next_segment(l, wk, plan, base, &it.seg, &it.lo) != 1 || it.lo >= kend) {
			*base = at;
			break;
		}
		it.s = base->s - 1;
		if (pf_grow(&wk->first, &cap, wk->nfirst + 1, sizeof(*wk->first)) < 0) {
			/* Read in stream order instead. */
			*base = (seg_cursor){ 0 };
			wk->nfirst = 0;
			return 0;
		}
		it.key = UINT32_MAX;
		end = it.lo + it.seg.count < kend ? it.lo + it.seg.count : kend;
		for (uint64_t p = it.lo; p < end; p++) {
			uint32_t o = b->perm ? b->perm[p - k0] : (uint32_t)(p - k0);

			it.key = o < it.key ? o : it.key;
		}
		wk->first[wk->nfirst++] = it;
	}
	qsort(wk->first, wk->nfirst, sizeof(*wk->first), by_key);
	base->at = 0;
	return 0;
}

/* Want the segments the walk dispatches next, from *ahead on, while
 * files.c takes more (fewer than open_ahead distinct files wanted): their
 * files' opens start now, so that a dispatch seldom waits for one.
 * @return 0, or <0 (the loader failed). */
static int look_ahead(pf_pipe *l, pf_io *io, const walk *wk, const pf_epoch_plan *plan,
		      seg_cursor *ahead, bool *done)
{
	while (!*done) {
		seg_cursor next = *ahead;
		seg_item it;
		uint32_t file;
		int ret;

		if (next_item(l, wk, plan, &next, &it) != 1) {
			*done = true;
			break;
		}
		file = l->ds->units[it.seg.unit].file;
		if (pf_files_ahead_full(l, file))
			break;
		*ahead = next;
		ret = pf_files_want(l, io, file);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Walk one piece: its segments in order, each wanted ahead and then
 * dispatched.  @return 0, 1 when max_steps is reached, or <0. */
static int walk_piece(pf_pipe *l, pf_io *io, walk *wk, const pf_epoch_plan *plan)
{
	seg_cursor cur = { 0 }, ahead;
	bool ahead_done = false, past = false;
	int over = 0, ret = pf_fcache_plan(l, plan);

	if (ret < 0) {
		pf_error err;

		pf_error_clear(&err);
		pf_error_set(&err, ret, PF_OFFSET_NONE, 0,
			     "no memory for the frame cache's plan of %zu segments", plan->nseg);
		pf_pipe_fail(l, &err, ret);
		return ret;
	}
	if (wk->gbase == 0 && !l->ds->any_stream)
		ret = over = first_block_order(l, io, wk, plan, &cur);
	ahead = cur;

	while (!over && ret >= 0) {
		seg_item it;
		int got;

		ret = look_ahead(l, io, wk, plan, &ahead, &ahead_done);
		if (ret < 0)
			break;
		got = next_item(l, wk, plan, &cur, &it);
		if (got != 1) {
			over = got == 2;
			break;
		}
		if (l->ds->units[it.seg.unit].stream) {
			ret = over = dispatch_stream(l, io, wk, it.seg, it.lo);
		} else {
			/* A frame spans at most the blocks the ring holds.  A
			 * block past max_steps ends the walk after this
			 * segment; in the first block's order, after the
			 * block's last (the one that reached it is not). */
			ret = open_through(l, io, wk, (it.lo + it.seg.count - 1) / wk->w);
			past |= ret == 1;
			if (ret >= 0)
				ret = dispatch_frame(l, io, wk, it.seg, it.s, it.lo);
			over = past && cur.at >= wk->nfirst;
		}
	}
	pf_files_forget_ahead(l, io);
	pf_free(wk->first);
	wk->first = NULL;
	wk->nfirst = 0;
	return ret < 0 ? ret : over;
}

/* A fresh epoch: this host's own stream up to its quota. */
static int fresh_epoch(pf_pipe *l, uint32_t e, pf_epoch_plan *plan, epoch_run *er,
		       pf_piece *own)
{
	int ret = pf_plan_epoch(plan, l->ds, &l->topo, l->cfg.seed, e, l->cfg.shuffle,
				l->slice, l->group, l->cfg.remainder);

	if (ret < 0)
		return ret;
	*own = (pf_piece){ l->topo.host_index, 0, plan->quota };
	*er = (epoch_run){
		.epoch = e, .origin = l->topo, .w = l->wblock, .permute = l->shuffle_rows,
		.slice = l->slice, .group = l->group,
		.pieces = own, .npieces = plan->quota ? 1 : 0,
		.steps = plan->quota / l->host_batch,
		.dropped = plan->share > plan->quota ? plan->share - plan->quota : 0,
		.wrapped = plan->stream_len > plan->share ? plan->stream_len - plan->share : 0,
	};
	return 0;
}

static void plan_failed(pf_pipe *l, int ret, uint32_t host)
{
	pf_error err;

	pf_error_clear(&err);
	pf_error_set(&err, ret, PF_OFFSET_NONE, 0,
		     ret == -ERANGE ? "host %u has no records to wrap around: "
		     "fewer records than hosts" : "cannot plan epoch (host %u)", host);
	pf_pipe_fail(l, &err, ret);
}

/* Walk an epoch's pieces, each through the plan of its origin host. */
static int walk_epoch(pf_pipe *l, pf_io *io, const epoch_run *er, bool own_plan,
		      pf_epoch_plan *plan, uint64_t rstep0, uint64_t *gnext)
{
	uint64_t out_base = 0;
	int64_t planned = own_plan ? (int64_t)l->topo.host_index : -1;
	int ret = 0;

	for (size_t i = 0; i < er->npieces && ret == 0; i++) {
		const pf_piece *pc = &er->pieces[i];
		walk wk = { .er = er, .host = pc->host, .w = er->w, .begin = pc->begin,
			    .end = pc->end, .out_base = out_base, .rstep0 = rstep0 };

		if (planned != (int64_t)pc->host) {
			pf_topology t = er->origin;

			t.host_index = pc->host;
			ret = pf_plan_epoch(plan, l->ds, &t, l->cfg.seed, er->epoch,
					    l->cfg.shuffle, er->slice, er->group,
					    l->cfg.remainder);
			if (ret < 0) {
				plan_failed(l, ret, pc->host);
				return ret;
			}
			planned = pc->host;
		}
		wk.stream_len = plan->stream_len;
		wk.kfirst = wk.next_block = pc->begin / wk.w;
		wk.gbase = *gnext;
		ret = walk_piece(l, io, &wk, plan);
		*gnext += wk.next_block - wk.kfirst;
		out_base += pc->end - pc->begin;
	}
	return ret;
}

int pf_schedule_run(pf_pipe *l, pf_io *io)
{
	pf_epoch_plan plan = { 0 };
	uint64_t gnext = 0, rstep = 0;
	int ret = 0;

	for (uint32_t e = l->start_epoch; e < l->epochs && ret == 0; e++) {
		bool resumed = e == l->start_epoch && l->resumed;
		epoch_run fresh;
		pf_piece own;
		const epoch_run *er = resumed ? &l->resume : &fresh;

		if (!resumed) {
			ret = fresh_epoch(l, e, &plan, &fresh, &own);
			if (ret < 0) {
				plan_failed(l, ret, l->topo.host_index);
				break;
			}
		}
		pthread_mutex_lock(&l->mu);
		/* An epoch's remainder is counted by the run that ends it (a
		 * resumed run counts that of the epoch it finishes). */
		if (!l->cfg.max_steps || rstep + er->steps <= l->cfg.max_steps) {
			l->m.remainder_dropped += er->dropped;
			l->m.remainder_wrapped += er->wrapped;
		}
		pthread_mutex_unlock(&l->mu);
		ret = walk_epoch(l, io, er, !resumed, &plan, rstep, &gnext);
		rstep += er->steps;
		if (l->cfg.max_steps && rstep >= l->cfg.max_steps)
			break;
	}
	/* The streams still being decoded need their blocks: read them
	 * until the last is finished (unless the loader halts). */
	if (ret >= 0) {
		int r = pf_reads_wait(l, io, streams_idle, 0, &l->cv_chunk);

		pthread_mutex_unlock(&l->mu);
		if (r < 0 && r != -ECANCELED)
			ret = r;
	}
	/* Finish what is in flight so no buffer is left with the kernel. */
	while (pf_io_inflight(io) && pf_reads_reap(l, io, 1) >= 0)
		;
	pf_plan_release(&plan);
	return ret == -ECANCELED || ret == 1 ? 0 : ret;
}
