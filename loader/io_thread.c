/* SPDX-License-Identifier: Apache-2.0 */
/* The I/O thread: its engine (the ring is made here: with SINGLE_ISSUER
 * its creator must be its only submitter) and the dataset's files in it;
 * its reads in flight, completed and handed to the decoders (reap), and
 * the wait every step of the schedule makes while completing them; the
 * blocks of the stream files being decoded, read a few ahead and handed
 * to their worker in order.  Not here: what is read when (schedule.c),
 * or what a read becomes (decode.c). */
#include <errno.h>

#include "pipeline_internal.h"

/* Stream reads, the workers' side.  A stream's blocks are read by the
 * I/O thread (pump_streams()) into the stream's buffers; its worker takes
 * them in order through pf_stream_pull(), pf_source's pull callback. */

/* The stream state is done with: off the active list, free for the next
 * stream.  Call with l->mu held, when no read of it is in flight. */
static void stream_retire(pf_loader *l, stream_state *ss)
{
	stream_state *prev = NULL;

	for (stream_state *a = l->active; a && a != ss; a = a->next)
		prev = a;
	if (prev)
		prev->next = ss->next;
	else
		l->active = ss->next;
	if (l->active_tail == ss)
		l->active_tail = prev;
	ss->next = l->free_streams;
	l->free_streams = ss;
	pf_loader_wake_io(l);		/* dispatch_stream() may wait for it */
}

/* The stream's last sub-segment is decoded: no more blocks are read (the
 * rest of the file may hold records of no segment of this run), its
 * buffers go back, and the state is retired once its reads in flight are
 * in (pf_reads_reap() does it for the last).  Call with l->mu held. */
void pf_stream_finish(pf_loader *l, stream_state *ss)
{
	ss->finished = true;
	ss->held = NULL;
	for (unsigned i = 0; i < PF_STREAM_BUFS; i++)
		if (ss->buf[i].state != SBUF_READING)
			ss->buf[i].state = SBUF_FREE;
	if (!ss->reading)
		stream_retire(l, ss);
}

/* A stream's read buffer that holds block b, read, or NULL. */
static stream_buf *stream_block(stream_state *ss, uint64_t b)
{
	for (unsigned i = 0; i < PF_STREAM_BUFS; i++)
		if (ss->buf[i].state == SBUF_READY && ss->buf[i].block == b)
			return &ss->buf[i];
	return NULL;
}

/* pf_source's pull callback (pull mode, podfeed.h): the stream's next
 * block, waiting for the I/O thread to read it.  The block handed out
 * before is given back first (the record stream is done with it), and
 * the I/O thread woken to read the next one into it. */
int pf_stream_pull(void *ctx, const uint8_t **buf, size_t *len, pf_error *err)
{
	stream_state *ss = ctx;
	pf_loader *l = ss->l;
	stream_buf *sb = NULL;
	uint64_t t0 = 0;
	int ret = 0;

	pthread_mutex_lock(&l->mu);
	if (ss->held) {
		ss->held->state = SBUF_FREE;
		ss->held = NULL;
		pf_loader_wake_io(l);
	}
	if (ss->next_pull >= ss->end_block) {
		*len = 0;	/* the end of the file */
		pthread_mutex_unlock(&l->mu);
		return 0;
	}
	while (!halted(l) && !(sb = stream_block(ss, ss->next_pull))) {
		if (!t0)
			t0 = now_ns();
		pthread_cond_wait(&l->cv_stream, &l->mu);
	}
	if (t0) {
		uint64_t dt = now_ns() - t0;

		ss->wait_ns += dt;
		l->m.decode.wait_ns += dt;
	}
	if (!sb) {
		ret = pf_error_set(err, -ECANCELED, PF_OFFSET_FILE,
				   ss->next_pull * PF_READ_DEFAULT, "the loader stopped");
	} else if (sb->req.result < 0) {
		/* A read failure is fatal in either corrupt-data mode, as a
		 * pread of the stream's own was: the engine's retries are
		 * spent, and what follows in the stream cannot be placed. */
		if (err)
			*err = sb->ioerr;
		ret = sb->ioerr.code ? sb->ioerr.code : (int)sb->req.result;
	} else {
		sb->state = SBUF_HELD;
		ss->held = sb;
		ss->next_pull++;
		/* Shorter than asked: the file shrank since it was opened;
		 * this is its end now. */
		if ((uint64_t)sb->req.result < sb->req.len)
			ss->end_block = ss->next_pull;
		*buf = sb->mem;
		*len = (size_t)sb->req.result;
	}
	pthread_mutex_unlock(&l->mu);
	return ret;
}

/* The stream buffer a read is for (its tag, req.user), or NULL for a
 * frame's chunk. */
static stream_buf *read_stream_buf(const pf_loader *l, void *user)
{
	uintptr_t p = (uintptr_t)user, lo = (uintptr_t)l->streams;
	uintptr_t hi = (uintptr_t)(l->streams + l->nstreams);

	return p >= lo && p < hi ? user : NULL;
}

/* A stream block's read is in: hand it to the stream's worker, or, when
 * the stream was finished meanwhile, drop it.  Call with l->mu held. */
static void stream_read_done(pf_loader *l, pf_io *io, stream_buf *sb)
{
	stream_state *ss = sb->ss;

	ss->reading--;
	if (ss->finished) {
		sb->state = SBUF_FREE;
		if (!ss->reading)
			stream_retire(l, ss);
		return;
	}
	if (sb->req.result < 0)
		pf_io_req_error(io, &sb->req, &sb->ioerr);	/* file, offset, retries */
	sb->state = SBUF_READY;
	pthread_cond_broadcast(&l->cv_stream);
}

/* Hand finished reads to the decoders; min: wait for at least that many. */
int pf_reads_reap(pf_loader *l, pf_io *io, unsigned min)
{
	pf_io_req *done[64];
	uint64_t t0 = now_ns();
	int n = pf_io_reap(io, done, 64, min);

	if (n < 0)
		return n;
	pthread_mutex_lock(&l->mu);
	l->m.io.wait_ns += min ? now_ns() - t0 : 0;
	if (n == 0) {
		pthread_mutex_unlock(&l->mu);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		stream_buf *sb = read_stream_buf(l, done[i]->user);
		chunk *c = done[i]->user;

		l->m.bytes_read += done[i]->result > 0 ? (uint64_t)done[i]->result : 0;
		l->m.io_requests++;
		if (sb) {
			stream_read_done(l, io, sb);
			continue;
		}
		if (done[i]->result < 0)
			pf_io_req_error(io, done[i], &c->ioerr);	/* retries, timeout */
		pf_decode_queue(l, c);
		pthread_cond_signal(&l->cv_decode);	/* one worker per read */
	}
	pthread_mutex_unlock(&l->mu);
	return n;
}

/* The reads the active streams want now: the next block of each into
 * each of its free buffers, oldest stream first, as many as the engine
 * has room for.  Marks them READING; the caller submits them
 * (submit_stream_reads()) after unlocking.  Call with l->mu held.
 * @return the list, or NULL. */
static stream_buf *pump_streams(pf_loader *l, const pf_io *io)
{
	unsigned inflight = pf_io_inflight(io);
	unsigned room = l->cfg.io_depth > inflight ? l->cfg.io_depth - inflight : 0;
	stream_buf *list = NULL, **tail = &list;

	for (stream_state *ss = l->active; ss && room; ss = ss->next) {
		for (unsigned i = 0; i < PF_STREAM_BUFS && room; i++) {
			stream_buf *sb = &ss->buf[i];
			uint64_t off = ss->next_read * PF_READ_DEFAULT;

			if (ss->finished || ss->next_read >= ss->nblocks)
				break;
			if (sb->state != SBUF_FREE)
				continue;
			sb->state = SBUF_READING;
			sb->block = ss->next_read++;
			ss->reading++;
			pf_error_clear(&sb->ioerr);
			/* Whole blocks at multiples of PF_READ_DEFAULT, the last
			 * one what is left (asking for more would be a short
			 * read): the cuts the dataset's count was made with.
			 * The buffers are not registered with the ring
			 * (buf_index -1: a plain read, no fixed buffer). */
			sb->req = (pf_io_req){
				.file = ss->slot,
				.offset = off,
				.len = (uint32_t)(ss->size - off < PF_READ_DEFAULT
						  ? ss->size - off : PF_READ_DEFAULT),
				.buf = sb->mem,
				.buf_index = -1,
				.user = sb,
			};
			sb->submit_next = NULL;
			*tail = sb;
			tail = &sb->submit_next;
			room--;
		}
	}
	return list;
}

int pf_reads_submit(pf_loader *l, pf_io *io, pf_io_req *req)
{
	int ret = pf_io_submit(io, req);

	while (ret == -EBUSY) {
		ret = pf_reads_reap(l, io, 1);
		if (ret >= 0)
			ret = pf_io_submit(io, req);
	}
	return ret;
}

/* Submit what pump_streams() chose, and push it to the kernel.  @return 0
 * or the engine's error. */
static int submit_stream_reads(pf_loader *l, pf_io *io, stream_buf *list)
{
	int ret = 0;

	while (list && ret >= 0) {
		stream_buf *sb = list;

		list = sb->submit_next;
		ret = pf_reads_submit(l, io, &sb->req);	/* the room was counted */
	}
	if (ret >= 0)
		ret = pf_reads_reap(l, io, 0);
	return ret < 0 ? ret : 0;
}

/* Wait until ready(l, arg) (a free chunk, read buffer, stream state,
 * batch slot, ring entry, or the end of the streams being read) while
 * completing reads in flight: what is awaited may come free only once one
 * of those reads is decoded, and only this thread can complete them.
 * Stream blocks are read here too, before anything else: a worker may be
 * waiting for the next block of its stream (and only then give back what
 * is awaited), so every wait of this thread first submits the reads the
 * streams can take, and the workers wake it (l->io_sleep) when they give
 * a buffer back.  @return with l->mu held: 0 when ready, -ECANCELED when
 * the loader halts, or the engine's error. */
int pf_reads_wait(pf_loader *l, pf_io *io, bool (*ready)(const pf_loader *, uint64_t),
		  uint64_t arg, pthread_cond_t *cv)
{
	for (;;) {
		stream_buf *reads;
		int ret;

		pthread_mutex_lock(&l->mu);
		if (halted(l))
			return -ECANCELED;
		reads = pump_streams(l, io);
		if (reads) {
			pthread_mutex_unlock(&l->mu);
			ret = submit_stream_reads(l, io, reads);
			if (ret < 0) {
				pthread_mutex_lock(&l->mu);
				return ret;
			}
			continue;
		}
		if (ready(l, arg))
			return 0;
		if (pf_io_inflight(io) == 0) {
			uint64_t t0 = now_ns();

			l->io_sleep = cv;
			pthread_cond_wait(cv, &l->mu);
			l->io_sleep = NULL;
			l->m.io.wait_ns += now_ns() - t0;
			pthread_mutex_unlock(&l->mu);
			continue;
		}
		pthread_mutex_unlock(&l->mu);
		ret = pf_reads_reap(l, io, 1);	/* counts its own waiting */
		if (ret < 0) {
			pthread_mutex_lock(&l->mu);
			return ret;
		}
	}
}

/* The I/O thread: the engine and the files first (pf_loader_create() waits
 * for l->io_ready), then the schedule, then what is still in flight. */
void *pf_loader_io_main(void *arg)
{
	pf_loader *l = arg;
	pf_io_config icfg = {
		.queue_depth = l->cfg.io_depth,
		.buffers = l->mem_cbufs,
		.buffer_size = l->cbuf_bytes,
		.nbuffers = l->ncbufs,
		.backend = l->cfg.io_backend,
		.regions = l->cfg.regions,
		.faults = l->cfg.io_faults,
		.retries = l->cfg.io_retries,
		.retry_backoff_us = l->cfg.io_retry_backoff_us,
		.timeout_ms = l->cfg.io_timeout_ms,
	};
	int *file_slot = NULL;
	uint32_t ndirect = 0;
	pf_io *io = NULL;
	pf_error err;
	int ret;

	pf_error_clear(&err);
	/* The ring is made here: with SINGLE_ISSUER its creator must be its
	 * only submitter. */
	ret = pf_io_create(&io, &icfg, &err);
	file_slot = pf_calloc(l->ds->nfiles, sizeof(*file_slot));
	if (ret == 0 && !file_slot)
		ret = -ENOMEM;
	for (size_t i = 0; file_slot && i < l->ds->nfiles; i++)
		file_slot[i] = -1;
	for (size_t i = 0; ret == 0 && i < l->ds->nfiles; i++) {
		/* Stream files too (their blocks are read here), never with
		 * O_DIRECT: their last block is not a multiple of 4 KiB. */
		bool direct = l->cfg.direct_io && l->ds->alignment[i] >= PF_ALIGN;
		ret = pf_io_add_file(io, l->ds->paths[i], direct ? PF_IO_DIRECT : 0, &err);
		if (ret >= 0) {
			file_slot[i] = ret;
			ndirect += pf_io_file_direct(io, (uint32_t)ret);
			ret = pf_dataset_check_file(l->ds, i, pf_io_file_size(io, (uint32_t)ret),
						    pf_io_file_mtime(io, (uint32_t)ret), &err);
		}
	}
	pthread_mutex_lock(&l->mu);
	l->io_init_ret = ret;
	l->io_ready = true;
	l->io_start_ns = now_ns();
	if (ret < 0)
		l->err = err;
	else
		l->m.io_backend = pf_io_backend_name(io);
	l->m.files_direct = ndirect;
	pthread_cond_broadcast(&l->cv_init);
	pthread_mutex_unlock(&l->mu);

	if (ret == 0) {
		ret = pf_schedule_run(l, io, file_slot);
		if (ret < 0) {
			pf_error_clear(&err);
			pf_error_set(&err, ret, PF_OFFSET_NONE, 0, "I/O engine failed: %s",
				     pf_strerror(ret));
			pf_loader_fail(l, &err, ret);
		}
	}
	pthread_mutex_lock(&l->mu);
	for (size_t i = 0; io && file_slot && i < l->ds->nfiles; i++) {
		pf_io_stats st;

		if (file_slot[i] < 0)
			continue;
		pf_io_file_stats(io, (uint32_t)file_slot[i], &st);
		l->m.io_short_reads += st.short_reads;
	}
	l->io_end_ns = now_ns();
	l->io_done = true;
	l->io_left = io && pf_io_inflight(io);
	pthread_cond_broadcast(&l->cv_decode);
	pthread_cond_broadcast(&l->cv_ready);
	pthread_mutex_unlock(&l->mu);
	pf_io_free(io);
	pf_free(file_slot);
	return NULL;
}
