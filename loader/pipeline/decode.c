/* SPDX-License-Identifier: Apache-2.0 */
/* The decode workers and their queue: a chunk the I/O thread read (a
 * frame of an indexed shard: CRC32C, zstd, TFRecord framing) or a
 * sub-segment of a stream file (through its pf_source, fed the blocks the
 * I/O thread read) into records, each handed to placement; in skip mode
 * a frame that cannot be read or decoded is lost whole, its places holes.
 * A worker never waits for a read: a sub-segment whose next block is not
 * in yet is parked on its stream (streams.c) and the worker takes other
 * work.  Not here: where a record goes (placement.c), what is read when
 * (schedule.c), the reads themselves (io_thread.c, streams.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pipeline_internal.h"

/* Frame errors name the frame; offsets inside it count decompressed
 * bytes, so the error says which frame and gives the frame's file
 * offset. */
void pf_frame_locate(pf_error *err, const pf_unit *u)
{
	err->frame = u->frame;
	if (err->offset_kind == PF_OFFSET_STREAM || err->offset_kind == PF_OFFSET_NONE) {
		char msg[sizeof(err->msg) + 64];

		snprintf(msg, sizeof(msg), "%s (at byte %llu of frame %u)", err->msg,
			 (unsigned long long)err->offset, u->frame);
		snprintf(err->msg, sizeof(err->msg), "%.*s", (int)sizeof(err->msg) - 1, msg);
		err->offset_kind = PF_OFFSET_FILE;
		err->offset = u->offset;
	}
}

/* Skip mode: the frame of chunk c could not be read or decompressed.  It
 * is dropped whole (reported by the chunk that holds its first record)
 * and each of its places in the segment is a hole. */
static int lose_frame(pf_pipe *l, worker *w, chunk *c, pf_error *cause)
{
	const pf_unit *u = &l->ds->units[c->seg.unit];
	pf_drop d = { .unit = PF_DROP_FRAME, .offset_kind = PF_OFFSET_FILE,
		      .start = u->offset, .resume = u->offset + u->csize,
		      .next_record = u->first_record, .records = (int64_t)u->records };
	int ret;

	pf_frame_locate(cause, u);
	d.cause = *cause;
	if (c->seg.first == 0) {
		ret = pf_drop_report(l, &d, l->ds->paths[u->file]);
		if (ret < 0)
			return ret;
	}
	for (uint64_t i = 0; i < c->seg.count; i++)
		pf_place_hole(l, w, c, c->pos + i);
	return 0;
}

/* Skip mode over a decompressed frame: its intact records fill the
 * frame's places in order (the index gives the count, not which were
 * lost) and the places left are holes.  A drop is reported by the chunk
 * whose segment holds the place of the next intact record. */
static int frame_records_skip(pf_pipe *l, worker *w, chunk *c,
			      const pf_frame_info *fi, size_t len, pf_error *err)
{
	const pf_unit *u = &l->ds->units[c->seg.unit];
	const char *path = l->ds->paths[u->file];
	uint64_t end = c->seg.first + c->seg.count, i = 0, drops = 0;
	size_t pos = 0;
	int ret;

	while (i < end) {
		pf_record rec;
		pf_drop d;
		int r = pf_tfr_next_intact(w->ubuf, len, &pos, 0, l->cfg.max_record_size,
					   l->cfg.verify_records, &rec, &d);

		if (r == 0)
			break;
		if (r == 2) {
			drops++;
			d.next_record = fi->first_record + i;
			d.cause.frame = u->frame;
			d.cause.record = (int64_t)(fi->first_record + i);
			if (i >= c->seg.first) {
				ret = pf_drop_report(l, &d, path);
				if (ret < 0)
					return ret;
			}
			continue;
		}
		rec.index = fi->first_record + i;
		if (i >= c->seg.first) {
			ret = pf_place_record(l, w, c, c->pos + (i - c->seg.first), &rec, err);
			if (ret < 0)
				return ret;
		}
		i++;
	}
	if (i == end && end == u->records) {
		/* The frame's last place is this chunk's: records past the
		 * index's count have no place, and are dropped together. */
		pf_record rec;
		pf_drop d;
		int r;

		while ((r = pf_tfr_next_intact(w->ubuf, len, &pos, 0, l->cfg.max_record_size,
					       l->cfg.verify_records, &rec, &d)) == 2)
			;
		if (r == 1) {
			pf_drop x = { .unit = PF_DROP_FRAME, .offset_kind = PF_OFFSET_STREAM,
				      .start = rec.offset, .resume = len,
				      .next_record = fi->first_record + i, .records = -1 };

			pf_error_clear(&x.cause);
			pf_error_set(&x.cause, -EBADMSG, PF_OFFSET_STREAM, rec.offset,
				     "frame %u holds more records than its index entry's %llu",
				     u->frame, (unsigned long long)u->records);
			x.cause.frame = u->frame;
			ret = pf_drop_report(l, &x, path);
			if (ret < 0)
				return ret;
		}
	}
	if (i < end && !drops) {
		/* Fewer records than the index says, and nothing damaged. */
		pf_drop d = { .unit = PF_DROP_FRAME, .offset_kind = PF_OFFSET_FILE,
			      .start = u->offset, .resume = u->offset + u->csize,
			      .next_record = fi->first_record + i,
			      .records = (int64_t)(u->records - i) };

		pf_error_clear(&d.cause);
		pf_error_set(&d.cause, -EBADMSG, PF_OFFSET_FILE, u->offset,
			     "frame %u holds %llu records, its index entry says %llu",
			     u->frame, (unsigned long long)i, (unsigned long long)u->records);
		d.cause.frame = u->frame;
		ret = pf_drop_report(l, &d, path);
		if (ret < 0)
			return ret;
	}
	for (uint64_t k = i > c->seg.first ? i : c->seg.first; k < end; k++)
		pf_place_hole(l, w, c, c->pos + (k - c->seg.first));
	return 0;
}

/* Record i of frame u's decompressed bytes buf[0..len), at pos: its
 * length CRC checked (its data CRC too with verify_records).  @return
 * its bytes (> 0), or <0 with err (a record cut short, or none where the
 * index counts one). */
static int64_t frame_record(const pf_pipe *l, const uint8_t *buf, size_t len, size_t pos,
			    const pf_unit *u, uint64_t i, pf_record *rec, pf_error *err)
{
	int64_t n = l->cfg.verify_records
		? pf_tfr_parse(buf + pos, len - pos, pos, l->cfg.max_record_size, rec, err)
		: pf_tfr_parse_verified(buf + pos, len - pos, pos, l->cfg.max_record_size,
					rec, err);

	if (n == 0)
		n = pf_tfr_truncation(buf + pos, len - pos, pos, l->cfg.max_record_size, err);
	if (n > 0)
		return n;
	if (n == 0)
		pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, pos,
			     "frame %u holds %llu records, its index entry says %llu", u->frame,
			     (unsigned long long)i, (unsigned long long)u->records);
	return n < 0 ? n : -EBADMSG;
}

/* The global shuffle's cache (frame_cache.c): the frame decompressed
 * into entry d is framed whole once, each record's offset kept (its
 * length CRC checked, its data CRC too on request), so that each of its
 * segments parses only its own records. */
static int index_frame(const pf_pipe *l, pf_dframe *d, const pf_unit *u, size_t len,
		       pf_error *err)
{
	size_t pos = 0;

	for (uint64_t i = 0; i < u->records; i++) {
		pf_record rec;
		int64_t n = frame_record(l, d->mem, len, pos, u, i, &rec, err);

		if (n < 0)
			return (int)n;
		d->offs[i] = (uint32_t)pos;
		pos += (size_t)n;
	}
	d->offs[u->records] = (uint32_t)pos;
	d->len = len;
	return 0;
}

/* Chunk c's records from its frame's cache entry (ready). */
static int place_cached(pf_pipe *l, worker *w, const chunk *c, pf_error *err)
{
	const pf_unit *u = &l->ds->units[c->seg.unit];
	const pf_dframe *d = c->df;
	int ret = 0;

	for (uint64_t i = c->seg.first; i < c->seg.first + c->seg.count && ret == 0; i++) {
		size_t off = d->offs[i];
		pf_record rec;
		int64_t n = pf_tfr_parse_verified(d->mem + off, d->offs[i + 1] - off, off,
						  l->cfg.max_record_size, &rec, err);

		if (n <= 0) {
			ret = n < 0 ? (int)n : -EBADMSG;
			break;
		}
		rec.index = u->first_record + i;
		ret = pf_place_record(l, w, c, c->pos + (i - c->seg.first), &rec, err);
	}
	if (ret < 0)
		pf_frame_locate(err, u);
	return ret;
}

static int decode_frame(pf_pipe *l, worker *w, chunk *c, pf_error *err)
{
	const pf_unit *u = &l->ds->units[c->seg.unit];
	const pf_frame_info frame = pf_unit_frame(u), *fi = &frame;
	size_t pos = 0, len;
	uint64_t end = c->seg.first + c->seg.count;
	bool skip = l->cfg.on_corrupt == PF_CORRUPT_SKIP;
	int64_t n;
	int ret = 0;

	err->frame = u->frame;
	if (c->df && c->cbuf < 0)
		return place_cached(l, w, c, err);
	if (c->req.result < 0) {
		*err = c->ioerr;
		if (!err->code)
			pf_error_set(err, (int)c->req.result, PF_OFFSET_FILE, u->offset,
				     "read failed: %s", pf_strerror((int)c->req.result));
		err->frame = u->frame;
		return skip ? lose_frame(l, w, c, err) : err->code;
	}
	if ((uint64_t)c->req.result < u->csize) {
		pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, u->offset + (uint64_t)c->req.result,
			     "file ends inside frame %u (it changed since it was opened?)",
			     u->frame);
		return skip ? lose_frame(l, w, c, err) : err->code;
	}
	n = pf_frame_decode(w->fdec, fi, c->req.buf, u->csize, c->df ? c->df->mem : w->ubuf,
			    l->ds->max_usize, err);
	if (n < 0 && skip && n != -ENOMEM)
		return lose_frame(l, w, c, err);
	if (n < 0) {
		pf_frame_locate(err, u);
		return (int)n;
	}
	len = (size_t)n;
	if (c->df) {
		ret = index_frame(l, c->df, u, len, err);
		if (ret < 0) {
			pf_frame_locate(err, u);
			return ret;
		}
		/* Its other segments, left in the queue, can be taken now. */
		pthread_mutex_lock(&l->mu);
		c->df->ready = true;
		pf_decode_broadcast(l);
		pthread_mutex_unlock(&l->mu);
		return place_cached(l, w, c, err);
	}
	if (skip)
		return frame_records_skip(l, w, c, fi, len, err);
	/* The frame passed its CRC32C and zstd's content checksum, so each
	 * record's data CRC is checked only on request (the length CRC, which
	 * guards the framing, always).  Records before the segment are framed
	 * and skipped; a frame is whole records only, so parsing stops at
	 * the end. */
	for (uint64_t i = 0; i < end; i++) {
		pf_record rec;

		n = frame_record(l, w->ubuf, len, pos, u, i, &rec, err);
		if (n < 0) {
			ret = (int)n;
			break;
		}
		pos += (size_t)n;
		rec.index = fi->first_record + i;
		if (i < c->seg.first)
			continue;
		ret = pf_place_record(l, w, c, c->pos + (i - c->seg.first), &rec, err);
		if (ret < 0)
			break;
	}
	if (ret < 0)
		pf_frame_locate(err, u);
	return ret;
}

/* A stream sub-segment: continue the file's records where the previous
 * sub-segment stopped (the first one opens the stream's source and skips
 * to seg.first), feeding the source the blocks the I/O thread read.
 * @return 0 when the sub-segment is decoded, 1 when it waits for the
 * stream's next block (the caller parks it: taken again, it goes on from
 * where it stopped), or <0 with err. */
static int decode_stream(pf_pipe *l, worker *w, chunk *c, pf_error *err)
{
	const pf_unit *u = &l->ds->units[c->seg.unit];
	stream_state *ss = c->ss;
	uint64_t end = c->seg.first + c->seg.count;
	pf_record rec;
	int ret = 0;

	if (!ss->src) {
		/* Push mode: the I/O thread reads the file (and counts the
		 * reads to its mount), the source only decodes. */
		pf_source_config scfg = { .max_record_size = l->cfg.max_record_size,
					  .on_corrupt = l->cfg.on_corrupt };

		ret = pf_source_open_push(&ss->src, l->ds->paths[u->file], &scfg, ss->size,
					  err);
		if (ret < 0)
			return ret;
	}
	while (ret == 0) {
		ret = pf_source_next(ss->src, &rec, err);
		if (ret == PF_SOURCE_HUNGRY) {
			ret = pf_stream_feed(l, ss, err);
			if (ret == 1)
				return 1;
			continue;
		}
		if (ret == 0)
			ret = pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
					   "file ends before record %llu; it held %llu "
					   "records when it was opened",
					   (unsigned long long)(end - 1),
					   (unsigned long long)u->records);
		if (ret < 0)
			break;
		ret = 0;
		if (rec.index < c->seg.first)
			continue;
		if (PF_ARENA_BYTES_FOR(rec.len) > w->arena.cap) {
			ret = pf_error_set(err, -EFBIG, PF_OFFSET_STREAM, rec.offset,
					   "record of %llu bytes is larger than when the "
					   "file was opened", (unsigned long long)rec.len);
			break;
		}
		ret = pf_place_record(l, w, c, c->pos + (rec.index - c->seg.first), &rec, err);
		if (rec.index + 1 == end)
			break;
	}
	if (ret == 0 && c->ss_last) {
		/* (Its bytes read were counted as the reads came in.) */
		pthread_mutex_lock(&l->mu);
		l->m.bytes_decompressed += pf_source_bytes_out(ss->src);
		pthread_mutex_unlock(&l->mu);
		pf_source_close(ss->src);
		ss->src = NULL;
	}
	return ret;
}

void pf_decode_queue(pf_pipe *l, chunk *c)
{
	c->next = NULL;
	if (l->decode_tail)
		l->decode_tail->next = c;
	else
		l->decode_q = c;
	l->decode_tail = c;
}

/* The first chunk of the queue a worker may take: any read, a segment
 * of a cached frame that is ready, or the next sub-segment of a stream no
 * other worker is reading. */
static chunk *take_work(pf_pipe *l)
{
	chunk *prev = NULL;

	for (chunk *c = l->decode_q; c; prev = c, c = c->next) {
		if (c->ss && (c->ss->busy || c->ss->next_first != c->seg.first))
			continue;
		/* A segment of a cached frame another chunk is decompressing. */
		if (c->df && c->cbuf < 0 && !c->df->ready)
			continue;
		if (prev)
			prev->next = c->next;
		else
			l->decode_q = c->next;
		if (l->decode_tail == c)
			l->decode_tail = prev;
		if (c->ss)
			c->ss->busy = true;
		if (c == l->hit_open)
			l->hit_open = NULL;	/* no more joins it */
		return c;
	}
	return NULL;
}

/* Decode chunk c, taken from l's queue by worker w (l->mu held, and held
 * again on return).  @return false when the loader failed. */
static bool work_on(pf_pipe *l, worker *w, chunk *c)
{
	uint64_t t1 = pf_now_ns(), cpu0 = pf_thread_cpu_ns();
	pf_error err;
	uint64_t more;
	int ret;

	pthread_mutex_unlock(&l->mu);

	pf_error_clear(&err);
	if (l->staged)
		pf_window_begin(l, w, c);
	ret = c->ss ? decode_stream(l, w, c, &err) : decode_frame(l, w, c, &err);
	more = 0;
	if (ret < 0)
		pf_error_set_file(&err, l->ds->paths[l->ds->units[c->seg.unit].file]);
	for (unsigned i = 0; ret == 0 && i < c->nmore; i++) {
		chunk v;

		/* Only what place_cached() reads: a whole chunk's zeroing
		 * (its error, its more[]) was 1.6% of a global shuffle's
		 * mixture (tools/bench/mixture --set global). */
		v.seg = c->more[i].seg;
		v.pos = c->more[i].pos;
		v.g0 = c->more[i].g0;
		v.w = c->w;
		v.df = c->more[i].df;
		v.cbuf = -1;
		ret = place_cached(l, w, &v, &err);
		if (ret < 0)
			pf_error_set_file(&err, l->ds->paths[l->ds->units[v.seg.unit].file]);
		more += v.seg.count;
	}
	if (l->staged)
		pf_window_end(l, w, c);	/* the pages no record reached */
	if (ret >= 0) {
		/* A parked sub-segment's rows too: a slot it filled
		 * must not wait for its next block. */
		pf_place_flush(l, w);
		if (ret == 0)
			pf_place_done(l, c->g0, c->pos, c->seg.count, c->w);
		for (unsigned i = 0; ret == 0 && i < c->nmore; i++)
			pf_place_done(l, c->more[i].g0, c->more[i].pos,
				      c->more[i].seg.count, c->w);
	}

	pthread_mutex_lock(&l->mu);
	l->m.decode.busy_ns += pf_now_ns() - t1;
	l->m.images += w->images;
	l->m.images_upscaled += w->images_upscaled;
	l->m.image_decode_ns += w->image_ns;
	l->m.image_scratch_bytes += w->image_scratch.cap - w->image_scratch_counted;
	w->image_scratch_counted = w->image_scratch.cap;
	w->images = w->images_upscaled = w->image_ns = 0;
	/* A parked stream chunk's records count when it is done. */
	pf_tune_decoded(l, ret == 1 ? 0 : c->seg.count + more, c->cbuf >= 0,
			pf_thread_cpu_ns() - cpu0);
	if (ret == 1) {
		pf_stream_park(l, c->ss, c);	/* no longer this worker's */
		return true;
	}
	if (c->df) {
		c->df->pins--;
		c->df = NULL;
	}
	for (unsigned i = 0; i < c->nmore; i++)
		c->more[i].df->pins--;
	c->nmore = 0;
	if (c->cbuf >= 0) {
		l->m.bytes_decompressed += l->ds->units[c->seg.unit].usize;
		l->free_cbuf[l->nfree_cbuf++] = c->cbuf;
		c->cbuf = -1;
		pthread_cond_signal(&l->cv_cbuf);
	}
	if (c->ss) {
		c->ss->busy = false;
		c->ss->next_first += c->seg.count;
		if (c->ss_last && ret == 0)
			pf_stream_finish(l, c->ss);
		pf_decode_broadcast(l);
	}
	c->next = l->free_chunks;
	l->free_chunks = c;
	pthread_cond_signal(&l->cv_chunk);
	/* The end is when the last decode is accounted, not earlier. */
	if (--l->chunks_out == 0 && l->io_done)
		pthread_cond_signal(&l->cv_ready);
	if (ret < 0) {
		pf_pipe_fail_locked(l, &err, ret);
		return false;
	}
	return true;
}

/* Decode task t's rows from the window (l->staged), taken by worker w
 * (l->mu held, and held again on return).  @return false when the loader
 * failed. */
static bool rows_on(pf_pipe *l, worker *w, const pf_wtask *t)
{
	uint64_t t1 = pf_now_ns(), cpu0 = pf_thread_cpu_ns();
	pf_error err;
	int ret;

	pthread_mutex_unlock(&l->mu);
	pf_error_clear(&err);
	ret = pf_place_rows(l, w, t, &err);
	pthread_mutex_lock(&l->mu);
	l->m.decode.busy_ns += pf_now_ns() - t1;
	l->m.images += w->images;
	l->m.images_upscaled += w->images_upscaled;
	l->m.image_decode_ns += w->image_ns;
	l->m.image_scratch_bytes += w->image_scratch.cap - w->image_scratch_counted;
	w->image_scratch_counted = w->image_scratch.cap;
	w->images = w->images_upscaled = w->image_ns = 0;
	/* The records were counted as they came in: the CPU only. */
	pf_tune_decoded(l, 0, false, pf_thread_cpu_ns() - cpu0);
	pf_window_task_done(l, w);
	if (ret < 0) {
		pf_pipe_fail_locked(l, &err, ret);
		return false;
	}
	return true;
}

/* No work will come: halted, or read to the end and the queue empty
 * (and, with the window of records as read, every step's rows taken). */
static bool worker_done(const pf_pipe *l)
{
	return halted(l) ||
	       (l->io_done && !l->decode_q && !(l->staged && pf_window_work_left(l)));
}

void *pf_pipe_worker_main(void *arg)
{
	worker *w = arg;
	pf_pipe *l = w->l;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		uint64_t t0 = pf_now_ns();
		chunk *c = NULL;
		pf_wtask t;
		bool task = false;

		/* Workers past the threads autotune chose park here.  The
		 * chunks first: their records are what the steps' rows wait
		 * for, and the pages they reserved only come back once they
		 * are in. */
		while (!halted(l)) {
			bool active = (unsigned)(w - l->workers) < l->active_workers;

			if (active && (c = take_work(l)))
				break;
			if (active && l->staged && (task = pf_window_take_task(l, &t)))
				break;
			if (worker_done(l))
				break;
			pthread_cond_wait(&l->cv_decode, &l->mu);
		}
		if (!c && !task)
			break;
		l->m.decode.wait_ns += pf_now_ns() - t0;
		if (c ? !work_on(l, w, c) : !rows_on(l, w, &t))
			break;
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* A mixture's decode threads, shared by its sources' loaders          */

/* Thread i: a chunk of whichever member has one, worker i of it decoding
 * (the members are scanned from a place that moves on each time, so none
 * waits behind another's queue); asleep when none has, until a member
 * wakes its decoders; gone when every member is done or the pool stops. */
static void *pool_main(void *arg)
{
	pf_pool_thread *pt = arg;
	pf_decode_pool *p = pt->p;

	for (;;) {
		uint64_t seq = __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE);
		size_t start = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
		bool worked = false, live = false, stop;

		for (size_t j = 0; j < p->nmembers && !worked; j++) {
			pf_pipe *l = p->members[(start + j) % p->nmembers];
			uint64_t t0 = pf_now_ns();
			chunk *c;

			pthread_mutex_lock(&l->mu);
			live |= !worker_done(l);
			c = halted(l) || pt->index >= l->nworkers ? NULL : take_work(l);
			if (c) {
				l->m.decode.wait_ns += pf_now_ns() - t0;
				work_on(l, &l->workers[pt->index], c);
				worked = true;
			}
			pthread_mutex_unlock(&l->mu);
		}
		if (worked)
			continue;
		pthread_mutex_lock(&p->mu);
		while (live && !p->stop && __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE) == seq)
			pthread_cond_wait(&p->cv, &p->mu);
		stop = p->stop || !live;
		pthread_mutex_unlock(&p->mu);
		if (stop)
			break;
	}
	return NULL;
}

int pf_decode_pool_start(pf_decode_pool *p, pf_pipe **members, size_t n, unsigned threads,
			 pf_error *err)
{
	memset(p, 0, sizeof(*p));
	p->members = members;
	p->nmembers = n;
	p->threads = pf_calloc(threads, sizeof(*p->threads));
	p->args = pf_calloc(threads, sizeof(*p->args));
	p->nthreads = threads;
	if (!p->threads || !p->args || pthread_mutex_init(&p->mu, NULL)) {
		pf_free(p->threads);
		pf_free(p->args);
		p->threads = NULL;
		p->args = NULL;
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory for the mixture's decode threads");
	}
	pthread_cond_init(&p->cv, NULL);
	p->made = true;
	for (size_t k = 0; k < n; k++)
		members[k]->pool = p;
	for (unsigned i = 0; i < threads; i++) {
		pf_pool_thread *pt = &p->args[i];

		pt->p = p;
		pt->index = i;
		if (pthread_create(&p->threads[i], NULL, pool_main, pt))
			return pf_error_set(err, -EAGAIN, PF_OFFSET_NONE, 0,
					    "cannot start the mixture's decode threads");
		p->started++;
	}
	return 0;
}

void pf_decode_pool_stop(pf_decode_pool *p)
{
	if (!p->made)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->started; i++)
		pthread_join(p->threads[i], NULL);
	/* The members' threads (an I/O thread at its end, their frees)
	 * wake their decoders: no longer the pool, before it goes. */
	for (size_t k = 0; k < p->nmembers; k++) {
		pf_pipe *l = p->members[k];

		pthread_mutex_lock(&l->mu);
		l->pool = NULL;
		pthread_mutex_unlock(&l->mu);
	}
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	pf_free(p->threads);
	pf_free(p->args);
	p->made = false;
}
