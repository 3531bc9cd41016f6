/* SPDX-License-Identifier: Apache-2.0 */
/* The I/O thread: its engine (the ring is made here: with SINGLE_ISSUER
 * its creator must be its only submitter) and the dataset's files in it;
 * its reads in flight, completed and handed to the decoders (reap); and
 * the wait every step of the schedule makes, which completes reads and
 * submits the stream files' next blocks meanwhile.  Not here: what is
 * read when (schedule.c, and streams.c for the blocks of a stream file),
 * or what a read becomes (decode.c). */
#include <errno.h>

#include "pipeline_internal.h"

/* Hand finished reads to the decoders; min: wait for at least that many. */
int pf_reads_reap(pf_loader *l, pf_io *io, unsigned min)
{
	pf_io_req *done[64];
	uint64_t t0 = pf_now_ns();
	int n = pf_io_reap(io, done, 64, min);

	if (n < 0)
		return n;
	pthread_mutex_lock(&l->mu);
	l->m.io.wait_ns += min ? pf_now_ns() - t0 : 0;
	if (n == 0) {
		pthread_mutex_unlock(&l->mu);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		stream_buf *sb = pf_stream_buf_of(l, done[i]->user);
		chunk *c = done[i]->user;

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
		pf_decode_queue(l, c);
		pthread_cond_signal(&l->cv_decode);	/* one worker per read */
	}
	pthread_mutex_unlock(&l->mu);
	return n;
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

/* Submit what pf_stream_pump() chose, and push it to the kernel.  @return 0
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
 * Stream blocks are read here too, before anything else: a stream's
 * sub-segment may be parked for its next block (and only then give back
 * what is awaited), so every wait of this thread first submits the reads
 * the streams can take, and the workers wake it (l->io_sleep) when they
 * give a buffer back.  @return with l->mu held: 0 when ready, -ECANCELED when
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
		if (pf_io_inflight(io) == 0) {
			uint64_t t0 = pf_now_ns();

			l->io_sleep = cv;
			pthread_cond_wait(cv, &l->mu);
			l->io_sleep = NULL;
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
	l->io_start_ns = pf_now_ns();
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
	l->io_end_ns = pf_now_ns();
	l->io_done = true;
	l->io_left = io && pf_io_inflight(io);
	pthread_cond_broadcast(&l->cv_decode);
	pthread_cond_broadcast(&l->cv_ready);
	pthread_mutex_unlock(&l->mu);
	pf_io_free(io);
	pf_free(file_slot);
	return NULL;
}
