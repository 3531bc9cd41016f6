/* SPDX-License-Identifier: Apache-2.0 */
/* The stream files' blocks (extents): a stream file without an index is
 * read by the I/O thread in blocks of PF_READ_DEFAULT bytes, in order,
 * a few ahead of its decoding (pf_stream_pump()); each block read is
 * pushed to the stream (pf_stream_read_done()), and the sub-segment
 * waiting for it goes back to the decoders.  Its worker feeds the blocks
 * to the stream's pf_source in push mode (pf_stream_feed()), never
 * waiting: without the next block it leaves the sub-segment parked on the
 * stream.  The data flows one way, as a frame's: the I/O thread reads,
 * the workers decode, and only buffers go back.  Not here: submitting
 * the reads (io_thread.c), the records (decode.c). */
#include <errno.h>

#include "pipeline_internal.h"

/* The stream state is done with: off the active list, retired (the I/O
 * thread gives its file back, then frees it for the next stream: files.c
 * is that thread's alone).  Call with l->mu held, when no read of it is
 * in flight. */
static void stream_retire(pf_pipe *l, stream_state *ss)
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
	ss->next = l->retired;
	l->retired = ss;
	pf_pipe_wake_io(l);		/* dispatch_stream() may wait for it */
}

bool pf_stream_free_retired(pf_pipe *l, pf_io *io)
{
	stream_state *list = l->retired, *last = NULL;

	if (!list)
		return false;
	l->retired = NULL;
	pthread_mutex_unlock(&l->mu);
	for (stream_state *ss = list; ss; ss = ss->next) {
		pf_files_release(l, io, ss->file);
		last = ss;
	}
	pthread_mutex_lock(&l->mu);
	last->next = l->free_streams;
	l->free_streams = list;
	return true;
}

/* The stream's last sub-segment is decoded: no more blocks are read (the
 * rest of the file may hold records of no segment of this run), its
 * buffers go back, and the state is retired once its reads in flight are
 * in (pf_reads_reap() does it for the last).  Call with l->mu held. */
void pf_stream_finish(pf_pipe *l, stream_state *ss)
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

/* Push the stream's next block to its source (ss->src), which is done
 * with the one it had: that one goes back to be read into, and the I/O
 * thread is woken to read it.  @return 0 when pushed (the end of the file
 * when it is there), 1 when the I/O thread has not read it yet (the
 * caller parks the sub-segment, pf_stream_park()), or <0 with err: a read
 * failure is fatal in either corrupt-data mode, as a pread of the
 * stream's own was (the engine's retries are spent, and what follows in
 * the stream cannot be placed). */
int pf_stream_feed(pf_pipe *l, stream_state *ss, pf_error *err)
{
	stream_buf *sb;
	int ret = 0;

	pthread_mutex_lock(&l->mu);
	if (ss->held) {
		ss->held->state = SBUF_FREE;
		ss->held = NULL;
		pf_pipe_wake_io(l);
	}
	if (ss->next_feed >= ss->end_block) {
		pf_source_push(ss->src, NULL, 0);	/* the end of the file */
	} else if (!(sb = stream_block(ss, ss->next_feed))) {
		ret = 1;
	} else if (sb->req.result < 0) {
		*err = sb->ioerr;
		ret = sb->ioerr.code ? sb->ioerr.code : (int)sb->req.result;
		if (!err->code)
			pf_error_set(err, ret, PF_OFFSET_FILE, ss->next_feed * PF_READ_DEFAULT,
				     "read failed: %s", pf_strerror(ret));
	} else {
		sb->state = SBUF_HELD;
		ss->held = sb;
		ss->next_feed++;
		/* Shorter than asked: the file shrank since it was opened;
		 * this is its end now. */
		if ((uint64_t)sb->req.result < sb->req.len)
			ss->end_block = ss->next_feed;
		pf_source_push(ss->src, sb->mem, (size_t)sb->req.result);
	}
	pthread_mutex_unlock(&l->mu);
	return ret;
}

/* Chunk c of stream ss waits for the stream's next block: parked on the
 * stream until pf_stream_read_done() gives it back to the decoders, or
 * given back now when the block came in meanwhile.  Call with l->mu held;
 * c is no longer the caller's. */
void pf_stream_park(pf_pipe *l, stream_state *ss, chunk *c)
{
	ss->busy = false;
	if (stream_block(ss, ss->next_feed)) {
		pf_decode_queue(l, c);
		pf_decode_signal(l);
	} else {
		ss->parked = c;
	}
}

/* The reads the active streams want now: the next block of each into
 * each of its free buffers, oldest stream first, as many as the engine
 * has room for.  Marks them READING; the caller submits them
 * (pf_reads_submit()) after unlocking.  Call with l->mu held.
 * @return the list, or NULL. */
stream_buf *pf_stream_pump(pf_pipe *l, const pf_io *io)
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

/* The stream buffer a read is for (its tag, req.user), or NULL for a
 * frame's chunk. */
stream_buf *pf_stream_buf_of(const pf_pipe *l, void *user)
{
	uintptr_t p = (uintptr_t)user, lo = (uintptr_t)l->streams;
	uintptr_t hi = (uintptr_t)(l->streams + l->nstreams);

	return p >= lo && p < hi ? user : NULL;
}

/* A stream block's read is in: pushed to the stream, and the sub-segment
 * parked for it given back to the decoders; or, when the stream was
 * finished meanwhile, dropped.  Call with l->mu held. */
void pf_stream_read_done(pf_pipe *l, pf_io *io, stream_buf *sb)
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
	if (ss->parked && sb->block == ss->next_feed) {
		pf_decode_queue(l, ss->parked);
		ss->parked = NULL;
		pf_decode_signal(l);
	}
}
