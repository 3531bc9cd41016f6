/* SPDX-License-Identifier: Apache-2.0 */
/* The loader: an I/O thread, decode workers, one assembler, and a bounded
 * queue of ready host batches.
 *
 * Work flows in sequence numbers (one per plan segment, across epochs):
 *
 *   I/O thread     reserves a row chunk for segment `seq` (in seq order,
 *                  so reservation can never deadlock), reads the frame
 *                  into a compressed buffer through pf_io;
 *   decode workers take any completed read: frame CRC, zstd, TFRecord
 *                  framing, Example decode, preprocessing into rows;
 *   assembler      takes chunks strictly in seq order (a reorder list),
 *                  runs the window shuffle, and scatters rows into
 *                  per-core blocks of a host batch.
 *
 * Stream files (no index) cannot be split or read in parallel: the
 * assembler reads them itself, in order, when their turn comes.
 * Every buffer comes from pools sized at creation from the memory
 * budget; after start-up the hot path does not allocate.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loader_internal.h"

#define PF_ALIGN 4096u
#define PF_BUDGET_DEFAULT (512ull << 20)
#define PF_WINDOW_DEFAULT 8192u
#define PF_IO_DEPTH_DEFAULT 32u
#define PF_STREAM_CHUNK_ROWS 1024u

typedef struct chunk {
	struct chunk *next;
	uint64_t seq;
	uint32_t epoch;
	bool epoch_last;	/* the last segment of its epoch */
	bool stream;		/* decode inline in the assembler */
	pf_segment seg;
	uint32_t nrows;
	uint8_t *rows;
	/* the read */
	pf_io_req req;
	int cbuf;		/* compressed buffer index, or -1 */
} chunk;

typedef struct batch_slot {
	struct batch_slot *next;
	pf_batch batch;		/* handed to the consumer */
	pf_core_batch *core;
	pf_tensor *tensors;	/* cores x ntensors */
	uint8_t *mem;
} batch_slot;

typedef struct worker {
	pf_loader *l;
	pthread_t thread;
	pf_frame_decoder *fdec;
	uint8_t *ubuf;
	pf_arena arena;
	bool started;
} worker;

struct pf_loader {
	pf_loader_config cfg;
	pf_topology topo;
	pf_spec spec;
	pf_dataset *ds;
	uint64_t steps_per_epoch;
	uint32_t epochs;
	size_t host_batch;	/* rows per host batch */

	pthread_mutex_t mu;
	pthread_cond_t cv_chunk;	/* a chunk became free */
	pthread_cond_t cv_cbuf;		/* a compressed buffer became free */
	pthread_cond_t cv_decode;	/* work for decoders */
	pthread_cond_t cv_done;		/* a chunk is ready for the assembler */
	pthread_cond_t cv_batch;	/* a batch slot became free */
	pthread_cond_t cv_ready;	/* a batch is ready for the consumer */
	pthread_cond_t cv_init;		/* the I/O thread finished starting */
	bool stop, failed, finished, io_ready;
	int io_init_ret;
	pf_error err;

	/* pools */
	uint8_t *mem_chunks, *mem_cbufs, *mem_batches, *window;
	chunk *chunks;
	unsigned nchunks, ncbufs;
	chunk *free_chunks;
	int *free_cbuf;
	unsigned nfree_cbuf;
	size_t chunk_rows, cbuf_bytes;
	chunk *decode_q, *decode_tail;	/* reads done, waiting for a worker */
	chunk *done_list;		/* decoded, waiting for the assembler */
	batch_slot *slots, *free_slots;
	batch_slot *ready_head, *ready_tail;
	unsigned nready, nslots;
	size_t block_bytes;
	size_t *toff;			/* tensor offsets inside a core block */
	size_t *roff;			/* feature offsets inside a row */
	size_t *fbytes;			/* bytes per record of each feature */
	uint64_t memory_bytes;

	/* threads */
	pthread_t io_thread;
	bool io_started, asm_started;
	pthread_t asm_thread;
	worker *workers;
	unsigned nworkers;

	/* assembler state */
	uint64_t head_seq;
	pf_rng wrng;
	uint32_t wcount, wcap;
	batch_slot *cur;
	uint32_t cur_fill;
	uint64_t epoch_emitted, epoch_quota, global_step, epoch_step;
	pf_arena stream_arena;

	/* metrics, under mu; the I/O stage is busy when not waiting */
	pf_loader_metrics m;
	uint64_t io_start_ns, io_end_ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* Wake every thread waiting on the loader.  Call with mu held. */
static void wake_all(pf_loader *l)
{
	pthread_cond_broadcast(&l->cv_chunk);
	pthread_cond_broadcast(&l->cv_cbuf);
	pthread_cond_broadcast(&l->cv_decode);
	pthread_cond_broadcast(&l->cv_done);
	pthread_cond_broadcast(&l->cv_batch);
	pthread_cond_broadcast(&l->cv_ready);
}

/* Record the first failure and wake everyone.  Call with mu held. */
static void fail_locked(pf_loader *l, const pf_error *err, int code)
{
	if (!l->failed) {
		l->failed = true;
		if (err && err->code)
			l->err = *err;
		else
			pf_error_set(&l->err, code, PF_OFFSET_NONE, 0, "%s",
				     pf_strerror(code));
		if (!l->err.code)
			l->err.code = code;
	}
	wake_all(l);
}

static void fail(pf_loader *l, const pf_error *err, int code)
{
	pthread_mutex_lock(&l->mu);
	fail_locked(l, err, code);
	pthread_mutex_unlock(&l->mu);
}

static bool halted(const pf_loader *l)
{
	return l->stop || l->failed;
}

/* ------------------------------------------------------------------ */
/* Decoding one record into a row                                       */

static int record_to_row(pf_loader *l, pf_arena *arena, const pf_record *rec,
			 uint8_t *row, pf_error *err)
{
	pf_example ex;
	int ret;

	pf_arena_reset(arena);
	ret = pf_example_decode(rec->data, rec->len, arena, &ex, err);
	if (ret == 0)
		ret = pf_spec_apply(&l->spec, &ex, row, err);
	if (ret < 0)
		err->record = (int64_t)rec->index;
	return ret;
}

/* ------------------------------------------------------------------ */
/* Decode workers                                                       */

static int decode_chunk(pf_loader *l, worker *w, chunk *c, pf_error *err)
{
	const pf_unit *u = &l->ds->units[c->seg.unit];
	const pf_shard_index *ix = l->ds->index[u->file];
	const pf_frame_info *fi = pf_shard_index_frame(ix, u->frame);
	size_t pos = 0, len;
	uint64_t i = 0, end = c->seg.first + c->seg.count;
	int64_t n;
	int ret = 0;

	if (c->req.result < 0)
		return pf_error_set(err, (int)c->req.result, PF_OFFSET_FILE, u->offset,
				    "read failed: %s", pf_strerror((int)c->req.result));
	if ((uint64_t)c->req.result < u->csize)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE,
				    u->offset + (uint64_t)c->req.result,
				    "file ends inside frame %u (it changed since it was opened?)",
				    u->frame);
	n = pf_frame_decode(w->fdec, fi, c->req.buf, u->csize, w->ubuf,
			    l->ds->max_usize, err);
	if (n < 0)
		return (int)n;
	len = (size_t)n;
	/* Records before the segment are framed (CRC checked) and skipped;
	 * a frame is whole records only, so parsing stops at the end. */
	for (i = 0; i < end; i++) {
		pf_record rec;

		n = pf_tfr_parse(w->ubuf + pos, len - pos, pos, l->cfg.max_record_size,
				 &rec, err);
		if (n == 0)
			n = pf_tfr_truncation(w->ubuf + pos, len - pos, pos,
					      l->cfg.max_record_size, err);
		if (n <= 0) {
			if (n == 0)
				pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, pos,
					     "frame %u holds %llu records, its index entry says %llu",
					     u->frame, (unsigned long long)i,
					     (unsigned long long)u->records);
			ret = n < 0 ? (int)n : -EBADMSG;
			break;
		}
		pos += (size_t)n;
		rec.index = fi->first_record + i;
		if (i < c->seg.first)
			continue;
		ret = record_to_row(l, &w->arena, &rec,
				    c->rows + (size_t)c->nrows * l->spec.row_bytes, err);
		if (ret < 0)
			break;
		c->nrows++;
	}
	if (ret < 0) {
		err->frame = u->frame;
		/* Offsets inside a frame count decompressed bytes of the frame;
		 * say which frame, and the file offset is the frame's. */
		if (err->offset_kind == PF_OFFSET_STREAM || err->offset_kind == PF_OFFSET_NONE) {
			char msg[sizeof(err->msg) + 64];
			snprintf(msg, sizeof(msg), "%s (at byte %llu of frame %u)", err->msg,
				 (unsigned long long)err->offset, u->frame);
			snprintf(err->msg, sizeof(err->msg), "%.*s",
				 (int)sizeof(err->msg) - 1, msg);
			err->offset_kind = PF_OFFSET_FILE;
			err->offset = u->offset;
		}
	}
	return ret;
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	pf_loader *l = w->l;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		uint64_t t0 = now_ns(), t1;
		pf_error err;
		chunk *c;
		int ret;

		while (!halted(l) && !l->decode_q && !l->finished)
			pthread_cond_wait(&l->cv_decode, &l->mu);
		if (halted(l) || (!l->decode_q && l->finished))
			break;
		c = l->decode_q;
		l->decode_q = c->next;
		if (!l->decode_q)
			l->decode_tail = NULL;
		t1 = now_ns();
		l->m.decode.wait_ns += t1 - t0;
		pthread_mutex_unlock(&l->mu);

		pf_error_clear(&err);
		ret = decode_chunk(l, w, c, &err);
		if (ret < 0)
			pf_error_set_file(&err, l->ds->paths[l->ds->units[c->seg.unit].file]);

		pthread_mutex_lock(&l->mu);
		l->m.decode.busy_ns += now_ns() - t1;
		l->m.bytes_decompressed += l->ds->units[c->seg.unit].usize;
		l->free_cbuf[l->nfree_cbuf++] = c->cbuf;
		c->cbuf = -1;
		pthread_cond_signal(&l->cv_cbuf);
		if (ret < 0) {
			fail_locked(l, &err, ret);
			break;
		}
		c->next = l->done_list;
		l->done_list = c;
		pthread_cond_broadcast(&l->cv_done);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* The I/O thread                                                       */

/* Hand finished reads to the decoders; min: wait for at least that many. */
static int reap(pf_loader *l, pf_io *io, unsigned min)
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
		chunk *c = done[i]->user;

		l->m.bytes_read += done[i]->result > 0 ? (uint64_t)done[i]->result : 0;
		c->next = NULL;
		if (l->decode_tail)
			l->decode_tail->next = c;
		else
			l->decode_q = c;
		l->decode_tail = c;
	}
	pthread_cond_broadcast(&l->cv_decode);
	pthread_mutex_unlock(&l->mu);
	return n;
}

static bool chunk_free(const pf_loader *l)
{
	return l->free_chunks != NULL;
}

static bool cbuf_free(const pf_loader *l)
{
	return l->nfree_cbuf != 0;
}

/* Wait until ready(l) (a free chunk, a free read buffer) while
 * completing reads in flight: what is awaited may come free only once
 * one of those reads is decoded, and only this thread can complete them.
 * @return with l->mu held: 0 when ready, -ECANCELED when the loader
 * halts, or the engine's error. */
static int io_wait(pf_loader *l, pf_io *io, bool (*ready)(const pf_loader *),
		   pthread_cond_t *cv)
{
	for (;;) {
		int ret;

		pthread_mutex_lock(&l->mu);
		if (halted(l))
			return -ECANCELED;
		if (ready(l))
			return 0;
		if (pf_io_inflight(io) == 0) {
			uint64_t t0 = now_ns();
			pthread_cond_wait(cv, &l->mu);
			l->m.io.wait_ns += now_ns() - t0;
			pthread_mutex_unlock(&l->mu);
			continue;
		}
		pthread_mutex_unlock(&l->mu);
		ret = reap(l, io, 1);	/* counts its own waiting */
		if (ret < 0) {
			pthread_mutex_lock(&l->mu);
			return ret;
		}
	}
}

/* Give chunk c to the assembler without decoding (stream segments and
 * empty epoch markers). */
static void publish_direct(pf_loader *l, chunk *c)
{
	pthread_mutex_lock(&l->mu);
	c->next = l->done_list;
	l->done_list = c;
	pthread_cond_broadcast(&l->cv_done);
	pthread_mutex_unlock(&l->mu);
}

static int io_run(pf_loader *l, pf_io *io, int *file_slot)
{
	pf_epoch_plan plan = { 0 };
	uint64_t seq = 0;
	int ret = 0;

	for (uint32_t e = 0; e < l->epochs && ret == 0; e++) {
		ret = pf_plan_epoch(&plan, l->ds, &l->topo, l->cfg.seed, e,
				    l->cfg.shuffle, l->cfg.remainder);
		if (ret < 0) {
			pf_error err;
			pf_error_clear(&err);
			pf_error_set(&err, ret, PF_OFFSET_NONE, 0,
				     ret == -ERANGE ? "host %u has no records to wrap around: "
				     "fewer records than hosts" : "cannot plan epoch (host %u)",
				     l->topo.host_index);
			fail(l, &err, ret);
			break;
		}
		pthread_mutex_lock(&l->mu);
		l->m.remainder_wrapped += plan.stream_len - plan.share < plan.stream_len
					  ? plan.stream_len - plan.share : 0;
		pthread_mutex_unlock(&l->mu);
		/* An epoch with no segments still needs its end marker. */
		size_t nseg = plan.nseg ? plan.nseg : 1;
		for (size_t s = 0; s < nseg && ret == 0; s++) {
			chunk *c;

			ret = io_wait(l, io, chunk_free, &l->cv_chunk);
			if (ret < 0) {
				pthread_mutex_unlock(&l->mu);
				break;
			}
			c = l->free_chunks;
			l->free_chunks = c->next;
			pthread_mutex_unlock(&l->mu);

			c->seq = seq++;
			c->epoch = e;
			c->epoch_last = s == nseg - 1;
			c->nrows = 0;
			c->cbuf = -1;
			c->seg = plan.nseg ? plan.seg[s] : (pf_segment){ 0, 0, 0 };
			const pf_unit *u = plan.nseg ? &l->ds->units[c->seg.unit] : NULL;
			c->stream = u && u->stream;
			if (!u || u->stream) {
				publish_direct(l, c);
				continue;
			}
			ret = io_wait(l, io, cbuf_free, &l->cv_cbuf);
			if (ret < 0) {
				pthread_mutex_unlock(&l->mu);
				break;
			}
			c->cbuf = l->free_cbuf[--l->nfree_cbuf];
			pthread_mutex_unlock(&l->mu);
			uint64_t off = u->offset, len = u->csize;
			int slot = file_slot[u->file];
			if (pf_io_file_direct(io, (uint32_t)slot)) {
				/* O_DIRECT: aligned start (frames are aligned) and a
				 * length rounded up; the tail may be padding. */
				len = round_up(len, PF_ALIGN);
			}
			c->req = (pf_io_req){
				.file = (uint32_t)slot,
				.offset = off,
				.len = (uint32_t)len,
				.buf = l->mem_cbufs + (size_t)c->cbuf * l->cbuf_bytes,
				.buf_index = pf_io_buffers_registered(io) ? c->cbuf : -1,
				.user = c,
			};
			ret = pf_io_submit(io, &c->req);
			while (ret == -EBUSY) {
				ret = reap(l, io, 1);
				if (ret >= 0)
					ret = pf_io_submit(io, &c->req);
			}
			if (ret == 0)
				ret = reap(l, io, 0) < 0 ? -EIO : 0;
		}
	}
	/* Finish what is in flight so no buffer is left with the kernel. */
	while (pf_io_inflight(io) && reap(l, io, 1) >= 0)
		;
	pf_plan_release(&plan);
	return ret == -ECANCELED ? 0 : ret;
}

static void *io_main(void *arg)
{
	pf_loader *l = arg;
	pf_io_config icfg = {
		.queue_depth = l->cfg.io_depth,
		.buffers = l->mem_cbufs,
		.buffer_size = l->cbuf_bytes,
		.nbuffers = l->ncbufs,
		.backend = l->cfg.io_backend,
	};
	int *file_slot = NULL;
	pf_io *io = NULL;
	pf_error err;
	int ret;

	pf_error_clear(&err);
	/* The ring is made here: with SINGLE_ISSUER its creator must be its
	 * only submitter. */
	ret = pf_io_create(&io, &icfg, &err);
	file_slot = calloc(l->ds->nfiles, sizeof(*file_slot));
	if (ret == 0 && !file_slot)
		ret = -ENOMEM;
	for (size_t i = 0; ret == 0 && i < l->ds->nfiles; i++) {
		if (!l->ds->index[i]) {
			file_slot[i] = -1;	/* streams are read by the assembler */
			continue;
		}
		bool direct = l->cfg.direct_io &&
			      pf_shard_index_alignment(l->ds->index[i]) >= PF_ALIGN;
		ret = pf_io_add_file(io, l->ds->paths[i], direct ? PF_IO_DIRECT : 0, &err);
		if (ret >= 0) {
			file_slot[i] = ret;
			ret = 0;
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
	pthread_cond_broadcast(&l->cv_init);
	pthread_mutex_unlock(&l->mu);

	if (ret == 0) {
		ret = io_run(l, io, file_slot);
		pthread_mutex_lock(&l->mu);
		l->io_end_ns = now_ns();
		pthread_mutex_unlock(&l->mu);
		if (ret < 0) {
			pf_error_clear(&err);
			pf_error_set(&err, ret, PF_OFFSET_NONE, 0, "I/O engine failed: %s",
				     pf_strerror(ret));
			fail(l, &err, ret);
		}
	}
	pf_io_free(io);
	free(file_slot);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* The assembler                                                        */

static void put_batch(pf_loader *l)
{
	batch_slot *b = l->cur;

	b->batch.epoch = (uint32_t)(l->global_step / (l->steps_per_epoch ? l->steps_per_epoch : 1));
	b->batch.step = l->epoch_step;
	b->batch.global_step = l->global_step;
	b->batch.epoch_start = l->epoch_step == 0;
	b->batch.epoch_end = l->epoch_step + 1 == l->steps_per_epoch;
	l->epoch_step++;
	l->global_step++;
	l->cur = NULL;
	l->cur_fill = 0;
	pthread_mutex_lock(&l->mu);
	b->next = NULL;
	if (l->ready_tail)
		l->ready_tail->next = b;
	else
		l->ready_head = b;
	l->ready_tail = b;
	l->nready++;
	pthread_cond_signal(&l->cv_ready);
	pthread_mutex_unlock(&l->mu);
}

/* Place one row at the next position of the current batch. */
static int emit(pf_loader *l, const uint8_t *row)
{
	if (l->epoch_emitted >= l->epoch_quota) {
		l->m.remainder_dropped++;
		return 0;
	}
	if (l->cfg.max_steps && l->global_step >= l->cfg.max_steps)
		return 0;
	if (!l->cur) {
		uint64_t t0 = now_ns();

		pthread_mutex_lock(&l->mu);
		while (!halted(l) && !l->free_slots)
			pthread_cond_wait(&l->cv_batch, &l->mu);
		if (halted(l)) {
			pthread_mutex_unlock(&l->mu);
			return -ECANCELED;
		}
		l->cur = l->free_slots;
		l->free_slots = l->cur->next;
		pthread_mutex_unlock(&l->mu);
		l->m.assemble.wait_ns += now_ns() - t0;
	}
	uint32_t core = l->cur_fill / l->topo.per_core_batch;
	uint32_t idx = l->cur_fill % l->topo.per_core_batch;
	uint8_t *block = (uint8_t *)l->cur->core[core].block;

	for (uint32_t f = 0; f < l->spec.n; f++)
		memcpy(block + l->toff[f] + (size_t)idx * l->fbytes[f],
		       row + l->roff[f], l->fbytes[f]);
	l->epoch_emitted++;
	if (++l->cur_fill == l->host_batch)
		put_batch(l);
	return 0;
}

/* The window shuffle: hold up to wcap rows; each new row swaps out a
 * random held one (seeded per epoch and host). */
static int feed(pf_loader *l, const uint8_t *row)
{
	size_t rb = l->spec.row_bytes;

	if (!l->wcap)
		return emit(l, row);
	if (l->wcount < l->wcap) {
		memcpy(l->window + (size_t)l->wcount++ * rb, row, rb);
		return 0;
	}
	uint64_t j = pf_rng_below(&l->wrng, l->wcap);
	int ret = emit(l, l->window + j * rb);
	memcpy(l->window + j * rb, row, rb);
	return ret;
}

static int end_epoch(pf_loader *l)
{
	size_t rb = l->spec.row_bytes;
	int ret = 0;

	while (l->wcount && ret == 0) {
		uint64_t j = pf_rng_below(&l->wrng, l->wcount);
		ret = emit(l, l->window + j * rb);
		memcpy(l->window + j * rb, l->window + (size_t)(l->wcount - 1) * rb, rb);
		l->wcount--;
	}
	return ret;
}

static void start_epoch(pf_loader *l, uint32_t epoch)
{
	l->epoch_emitted = 0;
	l->epoch_step = 0;
	l->wcount = 0;
	l->wrng = pf_rng_seed(l->cfg.seed, epoch, 0x77696e00ull + l->topo.host_index);
}

/* Read a stream segment in order and feed its rows. */
static int assemble_stream(pf_loader *l, chunk *c, pf_error *err)
{
	const pf_unit *u = &l->ds->units[c->seg.unit];
	pf_source_config scfg = { .max_record_size = l->cfg.max_record_size,
				  .ignore_index = true };
	uint8_t *row = c->rows;	/* the chunk's rows serve as scratch */
	pf_source *src;
	pf_record rec;
	uint64_t end = c->seg.first + c->seg.count;
	int ret;

	ret = pf_source_open(&src, l->ds->paths[u->file], &scfg, err);
	if (ret < 0)
		return ret;
	while ((ret = pf_source_next(src, &rec, err)) == 1 && rec.index < end) {
		if (rec.index < c->seg.first)
			continue;
		if (PF_ARENA_BYTES_FOR(rec.len) > l->stream_arena.cap) {
			ret = pf_error_set(err, -EFBIG, PF_OFFSET_STREAM, rec.offset,
					   "record of %llu bytes is larger than when the "
					   "file was opened", (unsigned long long)rec.len);
			break;
		}
		ret = record_to_row(l, &l->stream_arena, &rec, row, err);
		if (ret == 0)
			ret = feed(l, row);
		if (ret < 0)
			break;
	}
	pthread_mutex_lock(&l->mu);
	l->m.bytes_read += pf_source_file_size(src);
	l->m.bytes_decompressed += pf_source_bytes_out(src);
	pthread_mutex_unlock(&l->mu);
	pf_source_close(src);
	if (ret < 0)
		pf_error_set_file(err, l->ds->paths[u->file]);
	return ret < 0 ? ret : 0;
}

static void *asm_main(void *arg)
{
	pf_loader *l = arg;
	uint32_t epoch = UINT32_MAX;
	pf_error err;
	int ret = 0;

	pf_error_clear(&err);
	for (;;) {
		chunk *c = NULL, **pp;
		uint64_t t0 = now_ns(), t1;

		if (l->cfg.max_steps && l->global_step >= l->cfg.max_steps)
			break;
		pthread_mutex_lock(&l->mu);
		for (;;) {
			for (pp = &l->done_list; *pp; pp = &(*pp)->next)
				if ((*pp)->seq == l->head_seq)
					break;
			if (*pp || halted(l))
				break;
			pthread_cond_wait(&l->cv_done, &l->mu);
		}
		if (halted(l)) {
			pthread_mutex_unlock(&l->mu);
			break;
		}
		c = *pp;
		*pp = c->next;
		pthread_mutex_unlock(&l->mu);
		t1 = now_ns();
		l->m.assemble.wait_ns += t1 - t0;

		if (c->epoch != epoch) {
			epoch = c->epoch;
			start_epoch(l, epoch);
			pthread_mutex_lock(&l->mu);
			l->epoch_quota = l->steps_per_epoch * l->host_batch;
			pthread_mutex_unlock(&l->mu);
		}
		if (c->stream) {
			ret = assemble_stream(l, c, &err);
		} else {
			for (uint32_t r = 0; r < c->nrows && ret == 0; r++)
				ret = feed(l, c->rows + (size_t)r * l->spec.row_bytes);
		}
		if (ret == 0 && c->epoch_last)
			ret = end_epoch(l);
		l->m.assemble.busy_ns += now_ns() - t1;

		/* Read what is needed of c before it goes back to the pool:
		 * the I/O thread may take it the moment the lock drops. */
		bool last = c->epoch_last && c->epoch + 1 == l->epochs;
		pthread_mutex_lock(&l->mu);
		c->next = l->free_chunks;
		l->free_chunks = c;
		l->head_seq++;
		pthread_cond_signal(&l->cv_chunk);
		pthread_mutex_unlock(&l->mu);
		if (ret < 0 || last)
			break;
	}
	pthread_mutex_lock(&l->mu);
	if (ret < 0 && ret != -ECANCELED)
		fail_locked(l, &err, ret);
	l->finished = true;
	pthread_cond_broadcast(&l->cv_ready);
	pthread_cond_broadcast(&l->cv_decode);
	/* Stop the I/O thread if it is ahead (max_steps reached). */
	l->stop = true;
	pthread_cond_broadcast(&l->cv_chunk);
	pthread_cond_broadcast(&l->cv_cbuf);
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Creation: the memory plan                                            */

typedef struct mem_plan {
	size_t chunks, cbufs, decode, window, batches, stream;
} mem_plan;

static size_t plan_total(const mem_plan *p)
{
	return p->chunks + p->cbufs + p->decode + p->window + p->batches + p->stream;
}

static int plan_memory(pf_loader *l, mem_plan *p, pf_error *err)
{
	const pf_dataset *ds = l->ds;
	size_t rb = l->spec.row_bytes;
	size_t budget = l->cfg.memory_budget;
	unsigned depth = l->cfg.io_depth;

	l->chunk_rows = ds->max_unit_records > PF_STREAM_CHUNK_ROWS
				? ds->max_unit_records : PF_STREAM_CHUNK_ROWS;
	l->cbuf_bytes = round_up(ds->max_csize ? ds->max_csize : 1, PF_ALIGN);
	for (;;) {
		l->nchunks = depth + l->nworkers + 2;
		l->ncbufs = depth + l->nworkers;
		p->chunks = (size_t)l->nchunks * l->chunk_rows * rb;
		p->cbufs = ds->max_csize ? (size_t)l->ncbufs * l->cbuf_bytes : 0;
		p->decode = ds->max_csize ? (size_t)l->nworkers *
			(ds->max_usize + PF_ARENA_BYTES_FOR(ds->max_usize)) : 0;
		p->window = (size_t)l->wcap * rb;
		p->batches = (size_t)l->nslots * l->topo.cores * l->block_bytes;
		if (plan_total(p) <= budget || depth == 1)
			break;
		depth = depth > 4 ? depth / 2 : 1;	/* fewer reads in flight */
	}
	l->cfg.io_depth = depth;
	if (plan_total(p) > budget)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
			"memory budget of %zu MiB is too small: it needs %zu MiB "
			"(row chunks %zu, read buffers %zu, decode %zu, shuffle window %zu, "
			"batches %zu, stream %zu MiB)", budget >> 20,
			(plan_total(p) + (1u << 20) - 1) >> 20, p->chunks >> 20,
			p->cbufs >> 20, p->decode >> 20, p->window >> 20,
			p->batches >> 20, p->stream >> 20);
	return 0;
}

static int setup_pools(pf_loader *l, pf_error *err)
{
	mem_plan p = { 0 };
	size_t rb = l->spec.row_bytes;
	int ret;

	/* Tensor layout: each core's block holds its features one after the
	 * other, [per_core_batch][len] each, 64-byte aligned. */
	l->toff = calloc(l->spec.n, sizeof(*l->toff));
	l->roff = calloc(l->spec.n, sizeof(*l->roff));
	l->fbytes = calloc(l->spec.n, sizeof(*l->fbytes));
	if (!l->toff || !l->roff || !l->fbytes)
		return -ENOMEM;
	l->block_bytes = 0;
	for (uint32_t f = 0; f < l->spec.n; f++) {
		l->fbytes[f] = l->spec.f[f].len * pf_dtype_size(l->spec.f[f].dtype);
		l->roff[f] = pf_spec_offset(&l->spec, f);
		l->toff[f] = l->block_bytes;
		l->block_bytes = round_up(l->block_bytes +
					  l->fbytes[f] * l->topo.per_core_batch, 64);
	}
	if (l->ds->any_stream) {
		/* Stream records are decoded by the assembler; its arena fits
		 * the largest record seen when the files were counted. */
		p.stream = PF_ARENA_BYTES_FOR(l->ds->max_stream_record);
	}
	ret = plan_memory(l, &p, err);
	if (ret < 0)
		return ret;

	l->chunks = calloc(l->nchunks, sizeof(*l->chunks));
	l->mem_chunks = malloc(p.chunks);
	l->free_cbuf = calloc(l->ncbufs, sizeof(*l->free_cbuf));
	if (p.cbufs && posix_memalign((void **)&l->mem_cbufs, PF_ALIGN, p.cbufs))
		l->mem_cbufs = NULL;
	l->slots = calloc(l->nslots, sizeof(*l->slots));
	if (p.batches && posix_memalign((void **)&l->mem_batches, 64, p.batches))
		l->mem_batches = NULL;
	l->window = p.window ? malloc(p.window) : NULL;
	if (!l->chunks || !l->mem_chunks || !l->free_cbuf || (p.cbufs && !l->mem_cbufs) ||
	    !l->slots || (p.batches && !l->mem_batches) || (p.window && !l->window))
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "cannot allocate %zu MiB of pools", plan_total(&p) >> 20);
	if (p.stream && (ret = pf_arena_init(&l->stream_arena, p.stream)) < 0)
		return ret;
	for (unsigned i = 0; i < l->nchunks; i++) {
		l->chunks[i].rows = l->mem_chunks + (size_t)i * l->chunk_rows * rb;
		l->chunks[i].next = l->free_chunks;
		l->free_chunks = &l->chunks[i];
	}
	for (unsigned i = 0; i < l->ncbufs; i++)
		l->free_cbuf[l->nfree_cbuf++] = (int)i;
	for (unsigned i = 0; i < l->nslots; i++) {
		batch_slot *s = &l->slots[i];

		s->mem = l->mem_batches + (size_t)i * l->topo.cores * l->block_bytes;
		s->core = calloc(l->topo.cores, sizeof(*s->core));
		s->tensors = calloc((size_t)l->topo.cores * l->spec.n, sizeof(*s->tensors));
		if (!s->core || !s->tensors)
			return -ENOMEM;
		for (uint32_t c = 0; c < l->topo.cores; c++) {
			pf_core_batch *cb = &s->core[c];

			cb->block = s->mem + (size_t)c * l->block_bytes;
			cb->block_bytes = l->block_bytes;
			cb->tensors = &s->tensors[(size_t)c * l->spec.n];
			cb->ntensors = l->spec.n;
			for (uint32_t f = 0; f < l->spec.n; f++) {
				cb->tensors[f].name = l->spec.f[f].name;
				cb->tensors[f].dtype = l->spec.f[f].dtype;
				cb->tensors[f].len = l->spec.f[f].len;
				cb->tensors[f].data = (uint8_t *)cb->block + l->toff[f];
			}
		}
		s->batch.core = s->core;
		s->batch.cores = l->topo.cores;
		s->batch.per_core_batch = l->topo.per_core_batch;
		s->next = l->free_slots;
		l->free_slots = s;
	}
	for (unsigned i = 0; i < l->nworkers; i++) {
		worker *w = &l->workers[i];

		w->l = l;
		if (!l->ds->max_csize)
			continue;	/* only stream files: nothing to decode */
		w->ubuf = malloc(l->ds->max_usize);
		if (!w->ubuf || pf_frame_decoder_create(&w->fdec) < 0 ||
		    pf_arena_init(&w->arena, PF_ARENA_BYTES_FOR(l->ds->max_usize)) < 0)
			return -ENOMEM;
	}
	l->memory_bytes = plan_total(&p);
	return 0;
}

static unsigned ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned)n : 1;
}

int pf_loader_create(pf_loader **out, const pf_loader_config *cfg, pf_error *err)
{
	pf_error local;
	pf_loader *l;
	int ret;

	if (!err) {
		pf_error_clear(&local);
		err = &local;
	}
	if (!cfg || !cfg->npaths || !cfg->features || !cfg->per_core_batch)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the loader needs paths, a feature spec and a per-core batch");
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->cfg = *cfg;
	pf_error_clear(&l->err);
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv_chunk, NULL);
	pthread_cond_init(&l->cv_cbuf, NULL);
	pthread_cond_init(&l->cv_decode, NULL);
	pthread_cond_init(&l->cv_done, NULL);
	pthread_cond_init(&l->cv_batch, NULL);
	pthread_cond_init(&l->cv_ready, NULL);
	pthread_cond_init(&l->cv_init, NULL);

	l->topo.host_index = cfg->host_index;
	l->topo.num_hosts = cfg->num_hosts ? cfg->num_hosts : 1;
	l->topo.cores = cfg->cores_per_host ? cfg->cores_per_host : 1;
	l->topo.per_core_batch = cfg->per_core_batch;
	if (l->topo.host_index >= l->topo.num_hosts) {
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "host index %u is not below the host count %u",
				   l->topo.host_index, l->topo.num_hosts);
		goto fail;
	}
	l->epochs = cfg->epochs ? cfg->epochs : 1;
	l->cfg.memory_budget = cfg->memory_budget ? cfg->memory_budget : PF_BUDGET_DEFAULT;
	l->cfg.io_depth = cfg->io_depth ? cfg->io_depth : PF_IO_DEPTH_DEFAULT;
	l->cfg.max_record_size = cfg->max_record_size ? cfg->max_record_size
						      : PF_MAX_RECORD_DEFAULT;
	l->nslots = (cfg->prefetch ? cfg->prefetch : 2) + 2;
	l->wcap = cfg->shuffle ? (cfg->shuffle_window ? cfg->shuffle_window
						      : PF_WINDOW_DEFAULT) : 0;
	/* shuffle_window 1 is no shuffle within the window. */
	if (l->wcap == 1)
		l->wcap = 0;
	l->nworkers = cfg->threads ? cfg->threads : ncpus();
	l->host_batch = (size_t)l->topo.cores * l->topo.per_core_batch;

	ret = pf_spec_parse(&l->spec, cfg->features, err);
	if (ret < 0)
		goto fail;
	ret = pf_dataset_open(&l->ds, cfg->paths, cfg->npaths, l->cfg.max_record_size, err);
	if (ret < 0)
		goto fail;
	l->steps_per_epoch = pf_plan_steps(l->ds->records, &l->topo, cfg->remainder);
	l->m.records_per_epoch = l->ds->records;
	l->m.steps_per_epoch = l->steps_per_epoch;
	l->workers = calloc(l->nworkers, sizeof(*l->workers));
	if (!l->workers) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = setup_pools(l, err);
	if (ret < 0)
		goto fail;
	l->m.memory_bytes = l->memory_bytes;
	l->m.decode_threads = l->nworkers;

	/* Start: I/O first (it reports whether the engine came up). */
	if (pthread_create(&l->io_thread, NULL, io_main, l)) {
		ret = -EAGAIN;
		goto fail;
	}
	l->io_started = true;
	pthread_mutex_lock(&l->mu);
	while (!l->io_ready)
		pthread_cond_wait(&l->cv_init, &l->mu);
	ret = l->io_init_ret;
	if (ret < 0)
		*err = l->err;
	pthread_mutex_unlock(&l->mu);
	if (ret < 0)
		goto fail;
	for (unsigned i = 0; i < l->nworkers; i++) {
		if (pthread_create(&l->workers[i].thread, NULL, worker_main, &l->workers[i])) {
			ret = -EAGAIN;
			goto fail;
		}
		l->workers[i].started = true;
	}
	if (pthread_create(&l->asm_thread, NULL, asm_main, l)) {
		ret = -EAGAIN;
		goto fail;
	}
	l->asm_started = true;
	*out = l;
	return 0;
fail:
	if (ret == -ENOMEM && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory creating the loader");
	if (ret == -EAGAIN && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "cannot start loader threads");
	pf_loader_free(l);
	return ret;
}

/* ------------------------------------------------------------------ */
/* The consumer side                                                    */

int pf_loader_next(pf_loader *l, pf_batch **out)
{
	uint64_t t0 = now_ns(), dt;
	batch_slot *b;

	pthread_mutex_lock(&l->mu);
	while (!l->ready_head && !l->failed && !l->finished)
		pthread_cond_wait(&l->cv_ready, &l->mu);
	/* Batches made before a failure are still good: hand them out. */
	if (!l->ready_head) {
		int ret = l->failed ? (l->err.code ? l->err.code : -EIO) : 0;
		pthread_mutex_unlock(&l->mu);
		return ret;
	}
	b = l->ready_head;
	l->ready_head = b->next;
	if (!l->ready_head)
		l->ready_tail = NULL;
	l->m.queue_fill_sum += l->nready;
	l->nready--;
	dt = now_ns() - t0;
	l->m.next_wait_ns += dt;
	l->m.next_hist[pf_io_hist_bucket(dt)]++;
	l->m.steps++;
	l->m.records += l->host_batch;
	pthread_mutex_unlock(&l->mu);
	*out = &b->batch;
	return 1;
}

void pf_loader_release(pf_loader *l, pf_batch *batch)
{
	batch_slot *b;

	if (!batch)
		return;
	b = (batch_slot *)((char *)batch - offsetof(batch_slot, batch));
	pthread_mutex_lock(&l->mu);
	b->next = l->free_slots;
	l->free_slots = b;
	pthread_cond_signal(&l->cv_batch);
	pthread_mutex_unlock(&l->mu);
}

const pf_error *pf_loader_last_error(const pf_loader *l)
{
	return l->failed ? &l->err : NULL;
}

void pf_loader_get_metrics(const pf_loader *l, pf_loader_metrics *m)
{
	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	*m = l->m;
	if (l->io_start_ns) {
		uint64_t end = l->io_end_ns ? l->io_end_ns : now_ns();
		uint64_t span = end - l->io_start_ns;
		m->io.busy_ns = span > m->io.wait_ns ? span - m->io.wait_ns : 0;
	}
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
}

uint64_t pf_loader_steps_per_epoch(const pf_loader *l)
{
	return l->steps_per_epoch;
}

const pf_spec *pf_loader_spec(const pf_loader *l)
{
	return &l->spec;
}

void pf_loader_free(pf_loader *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	l->finished = true;
	wake_all(l);
	pthread_mutex_unlock(&l->mu);
	if (l->asm_started)
		pthread_join(l->asm_thread, NULL);
	for (unsigned i = 0; l->workers && i < l->nworkers; i++) {
		if (l->workers[i].started)
			pthread_join(l->workers[i].thread, NULL);
		free(l->workers[i].ubuf);
		pf_frame_decoder_free(l->workers[i].fdec);
		pf_arena_release(&l->workers[i].arena);
	}
	if (l->io_started)
		pthread_join(l->io_thread, NULL);
	for (unsigned i = 0; l->slots && i < l->nslots; i++) {
		free(l->slots[i].core);
		free(l->slots[i].tensors);
	}
	pf_arena_release(&l->stream_arena);
	free(l->workers);
	free(l->slots);
	free(l->chunks);
	free(l->mem_chunks);
	free(l->mem_cbufs);
	free(l->mem_batches);
	free(l->free_cbuf);
	free(l->window);
	free(l->toff);
	free(l->roff);
	free(l->fbytes);
	pf_dataset_free(l->ds);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv_chunk);
	pthread_cond_destroy(&l->cv_cbuf);
	pthread_cond_destroy(&l->cv_decode);
	pthread_cond_destroy(&l->cv_done);
	pthread_cond_destroy(&l->cv_batch);
	pthread_cond_destroy(&l->cv_ready);
	pthread_cond_destroy(&l->cv_init);
	free(l);
}
