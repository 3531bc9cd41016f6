/* SPDX-License-Identifier: Apache-2.0 */
/* The I/O thread: its engine (the ring is made here: with SINGLE_ISSUER
 * its creator must be its only submitter); its reads and opens in flight,
 * completed and handed to the decoders or to files.c (reap); and the wait
 * every step of the schedule makes, which completes reads, submits the
 * stream files' next blocks and the opens that waited for room
 * meanwhile.  Not here: what is read when (schedule.c, and streams.c for
 * the blocks of a stream file), which files are open (files.c), or what
 * a read becomes (decode.c). */
#include <errno.h>

#include "pipeline_internal.h"

/* Hand finished reads to the decoders, and finished opens to files.c;
 * min: wait for at least that many. */
int pf_reads_reap(pf_pipe *l, pf_io *io, unsigned min)
{
	pf_io_req *done[64], *opens[64];
	uint32_t read_files[64];
	unsigned nopens = 0, nread_files = 0;
	uint64_t t0 = pf_now_ns();
	int n;

	if (min)
		__atomic_store_n(&l->io_wait_since, t0, __ATOMIC_RELAXED);
	n = pf_io_reap(io, done, 64, min);
	pthread_mutex_lock(&l->mu);
	l->m.io.wait_ns += min ? pf_now_ns() - t0 : 0;
	__atomic_store_n(&l->io_wait_since, 0, __ATOMIC_RELAXED);
	if (n < 0) {
		pthread_mutex_unlock(&l->mu);
		return n;
	}
	if (n == 0) {
		pthread_mutex_unlock(&l->mu);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		stream_buf *sb = pf_stream_buf_of(l, done[i]->user);
		chunk *c = done[i]->user;

		if (done[i]->abandoned) {
			/* The kernel may still write its buffer: the loader
			 * fails now, naming the file, and the buffer is never
			 * handed out again (io_left at the end). */
			pf_error e;

			pf_error_clear(&e);
			pf_io_req_error(io, done[i], &e);
			pf_pipe_fail_locked(l, &e, (int)done[i]->result);
			if (!sb && !pf_files_is_open_req(l, done[i]))
				c->cbuf = -1;
		}
		if (pf_files_is_open_req(l, done[i])) {
			opens[nopens++] = done[i];
			continue;
		}
		l->m.bytes_read += done[i]->result > 0 ? (uint64_t)done[i]->result : 0;
		l->m.io_requests++;
		if (sb) {
			pf_stream_read_done(l, io, sb);
			continue;
		}
		if (done[i]->result < 0)
			pf_io_req_error(io, done[i], &c->ioerr);	/* retries, timeout */
		else
			pf_tune_read(l, pf_now_ns() - c->submit_ns);
		/* The frame is in its buffer: its file is done with it. */
		read_files[nread_files++] = l->ds->units[c->seg.unit].file;
		pf_decode_queue(l, c);
		pf_decode_signal(l);	/* one worker per read */
	}
	pthread_mutex_unlock(&l->mu);
	/* Without the lock: they may close files (files.c is this thread's
	 * alone) and fail the loader. */
	for (unsigned i = 0; i < nread_files; i++)
		pf_files_release(l, io, read_files[i]);
	for (unsigned i = 0; i < nopens; i++)
		pf_files_opened(l, io, opens[i]);
	return n;
}

int pf_reads_submit(pf_pipe *l, pf_io *io, pf_io_req *req)
{
	int ret = pf_io_submit(io, req);

	while (ret == -EBUSY) {
		ret = pf_reads_reap(l, io, 1);
		if (ret >= 0)
			ret = pf_io_submit(io, req);
	}
	return ret;
}

/* Submit what pf_stream_pump() chose, and push it to the kernel.  @return 0
 * or the engine's error. */
static int submit_stream_reads(pf_pipe *l, pf_io *io, stream_buf *list)
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
 * Stream blocks are read here too, before anything else: a stream's
 * sub-segment may be parked for its next block (and only then give back
 * what is awaited), so every wait of this thread first submits the reads
 * the streams can take, and the workers wake it (l->io_sleep) when they
 * give a buffer back.  @return with l->mu held: 0 when ready, -ECANCELED when
 * the loader halts, or the engine's error. */
int pf_reads_wait(pf_pipe *l, pf_io *io, bool (*ready)(const pf_pipe *, uint64_t),
		  uint64_t arg, pthread_cond_t *cv)
{
	for (;;) {
		stream_buf *reads;
		int ret;

		pthread_mutex_lock(&l->mu);
		if (halted(l))
			return -ECANCELED;
		if (pf_stream_free_retired(l, io)) {
			pthread_mutex_unlock(&l->mu);
			continue;
		}
		reads = pf_stream_pump(l, io);
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
		if (l->files.npending && pf_io_inflight(io) < l->cfg.io_depth) {
			/* Room came free for an open waiting for it. */
			pthread_mutex_unlock(&l->mu);
			ret = pf_files_pump(l, io);
			if (ret < 0) {
				pthread_mutex_lock(&l->mu);
				return ret;
			}
			continue;
		}
		if (pf_io_inflight(io) == 0) {
			uint64_t t0 = pf_now_ns();

			l->io_sleep = cv;
			l->io_wait_since = t0;
			pthread_cond_wait(cv, &l->mu);
			l->io_sleep = NULL;
			l->io_wait_since = 0;
			l->m.io.wait_ns += pf_now_ns() - t0;
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

/* The I/O thread: the engine first (pf_loader_create() waits for
 * l->io_ready), then the schedule (which opens the files as it goes),
 * then what is still in flight. */
void *pf_pipe_io_main(void *arg)
{
	pf_pipe *l = arg;
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
	pf_io *io = NULL;
	pf_error err;
	bool go;
	int ret;

	pf_error_clear(&err);
	/* The ring is made here: with SINGLE_ISSUER its creator must be its
	 * only submitter.  No file is opened yet: the schedule opens those it
	 * reads, as it reaches them (files.c). */
	ret = pf_io_create(&io, &icfg, &err);
	/* Every buffer the engine reads into is a pool mapping, never
	 * reused after an abandoned read (io_left): a read the kernel does
	 * not let be cancelled (a bucket client retrying a dead server)
	 * fails within the timeout instead of holding the loader. */
	if (ret == 0)
		pf_io_set_abandon(io, true);
	if (ret == 0 && pf_files_setup(l) < 0)
		ret = pf_error_set(&err, -ENOMEM, PF_OFFSET_NONE, 0,
				   "out of memory for the table of %zu files", l->ds->nfiles);
	pthread_mutex_lock(&l->mu);
	l->io_init_ret = ret;
	l->io_ready = true;
	l->io_start_ns = pf_now_ns();
	if (ret < 0)
		l->err = err;
	else
		l->m.io_backend = pf_io_backend_name(io);
	pthread_cond_broadcast(&l->cv_init);
	/* A mixture's source: nothing is read before the mixture knows how
	 * far its run goes (pf_pipe_open_gate()). */
	while (ret == 0 && l->gated && !halted(l))
		pthread_cond_wait(&l->cv_init, &l->mu);
	go = !halted(l);
	pthread_mutex_unlock(&l->mu);

	if (ret == 0 && go) {
		ret = pf_schedule_run(l, io);
		if (ret < 0) {
			pf_error_clear(&err);
			pf_error_set(&err, ret, PF_OFFSET_NONE, 0, "I/O engine failed: %s",
				     pf_strerror(ret));
			pf_pipe_fail(l, &err, ret);
		}
	}
	pthread_mutex_lock(&l->mu);
	if (io) {
		pf_io_engine_stats st;

		pf_io_get_stats(io, &st);
		l->m.io_short_reads = st.reads.short_reads;
		l->m.files_opened = l->files.opened;
		l->m.files_open_peak = st.files_open_peak;
	}
	l->m.files_direct = l->files.direct;
	l->io_end_ns = pf_now_ns();
	l->io_done = true;
	l->io_abandoned = io && pf_io_abandoned(io);
	l->io_left = io && (pf_io_inflight(io) || l->io_abandoned);
	pf_decode_broadcast(l);
	pthread_cond_broadcast(&l->cv_ready);
	pthread_mutex_unlock(&l->mu);
	pf_io_free(io);
	pf_files_teardown(l);
	/* The last touch of l: with reads abandoned, this thread's end
	 * waits in the kernel until the storage answers them. */
	pthread_mutex_lock(&l->mu);
	l->io_exited = true;
	pthread_cond_broadcast(&l->cv_init);
	pthread_mutex_unlock(&l->mu);
	return NULL;
}
