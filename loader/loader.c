/* SPDX-License-Identifier: Apache-2.0 */
/* The loader: an I/O thread and decode workers that write every record
 * straight into its place in a host batch; no record is copied twice.
 *
 * Order.  One host's records of one epoch form a stream (the plan's
 * segments in order, positions 0 .. stream_len-1).  The stream is cut
 * into shuffle blocks of W records, the shuffle window rounded up to
 * whole host batches (without shuffling, W is one host batch).  Block k
 * comes out in a permutation of itself seeded by (seed, epoch, host, k):
 * the record at position p = kW + r goes to output position kW + perm[r],
 * which is row o % B of the epoch's step o / B (B: rows of a host batch).
 * Outputs at or past the epoch's quota (steps x B) are the remainder and
 * are dropped.  Where a record goes is known before it is read.
 *
 *   I/O thread     walks the segments in order.  Before the first segment
 *                  that reaches a block it opens the block: its
 *                  permutation, and one batch slot for each of its steps
 *                  (slots are taken in step order, so this cannot
 *                  deadlock).  It reads frames of indexed shards through
 *                  pf_io; blocks wholly in the remainder are not read.
 *   decode workers take completed reads: frame CRC, zstd, TFRecord
 *                  framing, decode and preprocessing of each record into
 *                  its row of its slot; a slot is ready when all its rows
 *                  are written.  Stream files (no index) are cut into
 *                  sub-segments that workers decode in order, one at a
 *                  time per file.
 *   consumer       pf_loader_next() hands out slots in step order.
 *
 * Every buffer comes from pools sized at creation from the memory
 * budget; after start-up the hot path does not allocate (except that a
 * stream file is opened, with its buffers, when its turn comes).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "loader_internal.h"

#define PF_ALIGN 4096u
#define PF_BUDGET_DEFAULT (512ull << 20)
#define PF_WINDOW_DEFAULT 8192u
#define PF_IO_DEPTH_DEFAULT 32u
#define PF_STREAM_CHUNK_ROWS 1024u

typedef struct batch_slot {
	struct batch_slot *next;
	pf_batch batch;		/* handed to the consumer */
	pf_core_batch *core;
	pf_tensor *tensors;	/* cores x ntensors */
	uint8_t *mem;
	uint32_t filled;	/* rows written (atomic) */
} batch_slot;

/* A shuffle block, in a ring indexed by its global number (blocks are
 * numbered across epochs). */
typedef struct sblock {
	bool open;
	uint32_t remaining;	/* records not yet decoded or skipped (atomic) */
	uint32_t nslots;	/* steps with a slot (inside quota and max_steps) */
	uint64_t first_pos;	/* epoch position of its first record */
	uint32_t *perm;		/* [W] output offset of input offset; NULL: identity */
	batch_slot **slot;	/* [W / B] */
} sblock;

/* The reading state of one stream segment, shared by its sub-segments. */
typedef struct stream_state {
	struct stream_state *next;	/* free list */
	pf_source *src;			/* opened by the first sub-segment */
	uint64_t next_first;		/* record the next sub-segment starts at */
	bool busy;			/* a worker is decoding from it */
} stream_state;

typedef struct chunk {
	struct chunk *next;
	pf_segment seg;
	uint64_t pos;		/* epoch position of record seg.first */
	uint64_t g0;		/* global number of the block holding pos */
	stream_state *ss;	/* a stream sub-segment, else NULL */
	bool ss_last;		/* its last sub-segment */
	pf_io_req req;
	int cbuf;		/* compressed buffer index, or -1 */
} chunk;

typedef struct worker {
	pf_loader *l;
	pthread_t thread;
	pf_frame_decoder *fdec;
	uint8_t *ubuf;
	pf_arena arena;
	uint8_t *dst[PF_SPEC_MAX_FEATURES];
	/* Rows written per slot during the current chunk, added to the
	 * slots' shared counts once at its end: one atomic per slot and
	 * chunk, not per record (two workers fill the same slots). */
	uint32_t *tally;	/* [nring x per_block], by ring entry and step */
	uint32_t *touched;	/* tally indexes in use */
	uint32_t ntouched;
	bool started;
} worker;

struct pf_loader {
	pf_loader_config cfg;
	pf_topology topo;
	pf_spec spec;
	pf_dataset *ds;
	uint64_t steps_per_epoch;
	uint32_t epochs;
	uint32_t host_batch;	/* rows per host batch (B) */
	uint32_t wblock;	/* records per shuffle block (W, a multiple of B) */
	uint32_t per_block;	/* steps per shuffle block (W / B) */
	bool shuffle_rows;	/* permute inside blocks */

	pthread_mutex_t mu;
	pthread_cond_t cv_chunk;	/* a chunk or stream state became free */
	pthread_cond_t cv_cbuf;		/* a compressed buffer became free */
	pthread_cond_t cv_decode;	/* work for decoders */
	pthread_cond_t cv_block;	/* a ring entry became free */
	pthread_cond_t cv_batch;	/* a batch slot became free */
	pthread_cond_t cv_ready;	/* a slot filled, or the end */
	pthread_cond_t cv_init;		/* the I/O thread finished starting */
	bool stop, failed, io_done, io_ready;
	int io_init_ret;
	pf_error err;

	/* pools */
	uint8_t *mem_cbufs, *mem_batches;
	size_t cbufs_size, batches_size;
	uint32_t *mem_perm;
	batch_slot **mem_slotptr;
	chunk *chunks;
	unsigned nchunks, ncbufs;
	chunk *free_chunks;
	unsigned chunks_out;		/* taken from the pool, not yet back */
	stream_state *streams, *free_streams;
	int *free_cbuf;
	unsigned nfree_cbuf;
	size_t cbuf_bytes;
	chunk *decode_q, *decode_tail;	/* waiting for a worker */
	sblock *ring;
	uint32_t nring;
	batch_slot *slots, *free_slots;
	batch_slot *open_head, *open_tail;	/* taken, in step order */
	unsigned nslots, held;
	size_t block_bytes;
	size_t *toff;			/* tensor offsets inside a core block */
	size_t *fbytes;			/* bytes per record of each feature */
	uint64_t memory_bytes;

	/* threads */
	pthread_t io_thread;
	bool io_started;
	worker *workers;
	unsigned nworkers;

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

/* The large pools (batch slots, read buffers) come straight from mmap,
 * asking for transparent huge pages: every page of them is touched on
 * the first pass, and 2 MiB pages cut the page faults (and the pinning
 * of registered buffers) 512-fold.  Without THP they are ordinary pages.
 * @return NULL when size is 0 or on failure. */
#define PF_HUGE (2u << 20)
static void *pool_alloc(size_t size)
{
	void *p;

	if (!size)
		return NULL;
	p = mmap(NULL, round_up(size, PF_HUGE), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	(void)madvise(p, round_up(size, PF_HUGE), MADV_HUGEPAGE);
	return p;
}

static void pool_free(void *p, size_t size)
{
	if (p)
		munmap(p, round_up(size, PF_HUGE));
}

/* Wake every thread waiting on the loader.  Call with mu held. */
static void wake_all(pf_loader *l)
{
	pthread_cond_broadcast(&l->cv_chunk);
	pthread_cond_broadcast(&l->cv_cbuf);
	pthread_cond_broadcast(&l->cv_decode);
	pthread_cond_broadcast(&l->cv_block);
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

static sblock *ring_at(const pf_loader *l, uint64_t g)
{
	return &l->ring[g % l->nring];
}

/* ------------------------------------------------------------------ */
/* Placing records                                                      */

/* Account n records of block g as done (decoded or skipped); the ring
 * entry comes free with the block's last record. */
static void block_done(pf_loader *l, uint64_t g, uint32_t n)
{
	sblock *b = ring_at(l, g);

	if (__atomic_sub_fetch(&b->remaining, n, __ATOMIC_ACQ_REL) == 0) {
		pthread_mutex_lock(&l->mu);
		b->open = false;
		pthread_cond_signal(&l->cv_block);
		pthread_mutex_unlock(&l->mu);
	}
}

/* The same for the records [pos, pos + count) of an epoch whose block
 * holding pos is g0. */
static void range_done(pf_loader *l, uint64_t g0, uint64_t pos, uint64_t count)
{
	uint64_t w = l->wblock, end = pos + count;

	for (uint64_t g = g0, p = pos; p < end; g++) {
		uint64_t stop = (p / w + 1) * w;

		stop = stop < end ? stop : end;
		block_done(l, g, (uint32_t)(stop - p));
		p = stop;
	}
}

/* One record into w->dst: straight from the wire bytes (the worker's
 * arena is scratch for the rare shapes the fast path hands back). */
static int decode_into(pf_loader *l, worker *w, const pf_record *rec,
		       pf_error *err)
{
	pf_arena_reset(&w->arena);
	return pf_spec_decode(&l->spec, rec->data, (size_t)rec->len, &w->arena,
			      w->dst, err);
}

/* Decode record rec, at epoch position p of chunk c, into its row.
 * Records whose output falls past the quota or max_steps are skipped. */
static int place_record(pf_loader *l, worker *w, const chunk *c, uint64_t p,
			const pf_record *rec, pf_error *err)
{
	uint64_t w_ = l->wblock;
	const sblock *b = ring_at(l, c->g0 + (p / w_ - c->pos / w_));
	uint32_t r = (uint32_t)(p - b->first_pos);
	uint32_t o = b->perm ? b->perm[r] : r;
	uint32_t step = o / l->host_batch, row = o % l->host_batch;
	uint32_t core, idx;
	batch_slot *s;
	int ret;

	if (step >= b->nslots)
		return 0;
	s = b->slot[step];
	core = row / l->topo.per_core_batch;
	idx = row % l->topo.per_core_batch;
	for (uint32_t f = 0; f < l->spec.n; f++)
		w->dst[f] = (uint8_t *)s->core[core].block + l->toff[f] +
			    (size_t)idx * l->fbytes[f];
	ret = decode_into(l, w, rec, err);
	if (ret < 0) {
		err->record = (int64_t)rec->index;
		return ret;
	}
	size_t ti = (size_t)(b - l->ring) * l->per_block + step;
	if (w->tally[ti]++ == 0)
		w->touched[w->ntouched++] = (uint32_t)ti;
	return 0;
}

/* Add the chunk's rows to the slots' counts; wake the consumer when a
 * slot is full.  Before range_done(): the ring entries must still be the
 * chunk's. */
static void flush_tally(pf_loader *l, worker *w)
{
	bool full = false;

	for (uint32_t i = 0; i < w->ntouched; i++) {
		uint32_t ti = w->touched[i];
		batch_slot *s = l->ring[ti / l->per_block].slot[ti % l->per_block];

		full |= __atomic_add_fetch(&s->filled, w->tally[ti], __ATOMIC_ACQ_REL) ==
			l->host_batch;
		w->tally[ti] = 0;
	}
	w->ntouched = 0;
	if (full) {
		pthread_mutex_lock(&l->mu);
		pthread_cond_signal(&l->cv_ready);
		pthread_mutex_unlock(&l->mu);
	}
}

/* Frame errors name the frame; offsets inside it count decompressed
 * bytes, so the error says which frame and gives the frame's file
 * offset. */
static void locate_in_frame(pf_error *err, const pf_unit *u)
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

/* ------------------------------------------------------------------ */
/* Decode workers                                                       */

static int decode_frame(pf_loader *l, worker *w, chunk *c, pf_error *err)
{
	const pf_unit *u = &l->ds->units[c->seg.unit];
	const pf_shard_index *ix = l->ds->index[u->file];
	const pf_frame_info *fi = pf_shard_index_frame(ix, u->frame);
	size_t pos = 0, len;
	uint64_t end = c->seg.first + c->seg.count;
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
	if (n < 0) {
		locate_in_frame(err, u);
		return (int)n;
	}
	len = (size_t)n;
	/* The frame passed its CRC32C and zstd's content checksum, so each
	 * record's data CRC is checked only on request (the length CRC, which
	 * guards the framing, always).  Records before the segment are framed
	 * and skipped; a frame is whole records only, so parsing stops at
	 * the end. */
	for (uint64_t i = 0; i < end; i++) {
		pf_record rec;

		n = l->cfg.verify_records
			? pf_tfr_parse(w->ubuf + pos, len - pos, pos,
				       l->cfg.max_record_size, &rec, err)
			: pf_tfr_parse_verified(w->ubuf + pos, len - pos, pos,
						l->cfg.max_record_size, &rec, err);
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
		ret = place_record(l, w, c, c->pos + (i - c->seg.first), &rec, err);
		if (ret < 0)
			break;
	}
	if (ret < 0)
		locate_in_frame(err, u);
	return ret;
}

/* A stream sub-segment: continue reading the file where the previous
 * sub-segment stopped (the first one opens it and skips to seg.first). */
static int decode_stream(pf_loader *l, worker *w, chunk *c, pf_error *err)
{
	const pf_unit *u = &l->ds->units[c->seg.unit];
	stream_state *ss = c->ss;
	uint64_t end = c->seg.first + c->seg.count;
	pf_record rec;
	int ret = 0;

	if (!ss->src) {
		pf_source_config scfg = { .max_record_size = l->cfg.max_record_size,
					  .ignore_index = true, .regions = l->cfg.regions };

		ret = pf_source_open(&ss->src, l->ds->paths[u->file], &scfg, err);
		if (ret < 0)
			return ret;
	}
	while (ret == 0) {
		ret = pf_source_next(ss->src, &rec, err);
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
		ret = place_record(l, w, c, c->pos + (rec.index - c->seg.first), &rec, err);
		if (rec.index + 1 == end)
			break;
	}
	if (ret == 0 && c->ss_last) {
		pthread_mutex_lock(&l->mu);
		l->m.bytes_read += pf_source_file_size(ss->src);
		l->m.bytes_decompressed += pf_source_bytes_out(ss->src);
		pthread_mutex_unlock(&l->mu);
		pf_source_close(ss->src);
		ss->src = NULL;
	}
	return ret;
}

/* The first chunk of the queue a worker may take: any read, or the
 * next sub-segment of a stream no other worker is reading. */
static chunk *take_work(pf_loader *l)
{
	chunk *prev = NULL;

	for (chunk *c = l->decode_q; c; prev = c, c = c->next) {
		if (c->ss && (c->ss->busy || c->ss->next_first != c->seg.first))
			continue;
		if (prev)
			prev->next = c->next;
		else
			l->decode_q = c->next;
		if (l->decode_tail == c)
			l->decode_tail = prev;
		if (c->ss)
			c->ss->busy = true;
		return c;
	}
	return NULL;
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	pf_loader *l = w->l;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		uint64_t t0 = now_ns(), t1;
		pf_error err;
		chunk *c = NULL;
		int ret;

		while (!halted(l) && !(c = take_work(l)) && !(l->io_done && !l->decode_q))
			pthread_cond_wait(&l->cv_decode, &l->mu);
		if (!c)
			break;
		t1 = now_ns();
		l->m.decode.wait_ns += t1 - t0;
		pthread_mutex_unlock(&l->mu);

		pf_error_clear(&err);
		ret = c->ss ? decode_stream(l, w, c, &err) : decode_frame(l, w, c, &err);
		if (ret < 0) {
			pf_error_set_file(&err, l->ds->paths[l->ds->units[c->seg.unit].file]);
		} else {
			flush_tally(l, w);
			range_done(l, c->g0, c->pos, c->seg.count);
		}

		pthread_mutex_lock(&l->mu);
		l->m.decode.busy_ns += now_ns() - t1;
		if (c->cbuf >= 0) {
			l->m.bytes_decompressed += l->ds->units[c->seg.unit].usize;
			l->free_cbuf[l->nfree_cbuf++] = c->cbuf;
			c->cbuf = -1;
			pthread_cond_signal(&l->cv_cbuf);
		}
		if (c->ss) {
			c->ss->busy = false;
			c->ss->next_first += c->seg.count;
			if (c->ss_last && ret == 0) {
				c->ss->next = l->free_streams;
				l->free_streams = c->ss;
			}
			pthread_cond_broadcast(&l->cv_decode);
		}
		c->next = l->free_chunks;
		l->free_chunks = c;
		pthread_cond_signal(&l->cv_chunk);
		/* The end is when the last decode is accounted, not earlier. */
		if (--l->chunks_out == 0 && l->io_done)
			pthread_cond_signal(&l->cv_ready);
		if (ret < 0) {
			fail_locked(l, &err, ret);
			break;
		}
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
		pthread_cond_signal(&l->cv_decode);	/* one worker per read */
	}
	pthread_mutex_unlock(&l->mu);
	return n;
}

static bool chunk_free(const pf_loader *l, uint64_t arg)
{
	(void)arg;
	return l->free_chunks != NULL;
}

static bool cbuf_free(const pf_loader *l, uint64_t arg)
{
	(void)arg;
	return l->nfree_cbuf != 0;
}

static bool stream_free(const pf_loader *l, uint64_t arg)
{
	(void)arg;
	return l->free_streams != NULL;
}

static bool slot_free(const pf_loader *l, uint64_t arg)
{
	(void)arg;
	return l->free_slots != NULL;
}

static bool ring_free(const pf_loader *l, uint64_t g)
{
	return !ring_at(l, g)->open;
}

/* Wait until ready(l, arg) (a free chunk, read buffer, stream state,
 * batch slot or ring entry) while completing reads in flight: what is
 * awaited may come free only once one of those reads is decoded, and only
 * this thread can complete them.  @return with l->mu held: 0 when ready,
 * -ECANCELED when the loader halts, or the engine's error. */
static int io_wait(pf_loader *l, pf_io *io, bool (*ready)(const pf_loader *, uint64_t),
		   uint64_t arg, pthread_cond_t *cv)
{
	for (;;) {
		int ret;

		pthread_mutex_lock(&l->mu);
		if (halted(l))
			return -ECANCELED;
		if (ready(l, arg))
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

/* Where the walk over one epoch's stream is. */
typedef struct walk {
	uint32_t epoch;
	uint64_t gbase;		/* global number of the epoch's block 0 */
	uint64_t step_base;	/* global step of the epoch's step 0 */
	uint64_t quota, stream_len;
	uint64_t next_block;	/* the epoch's next block to open */
} walk;

/* Fisher-Yates over [0, n), seeded by (seed, epoch, host, block). */
static void block_perm(const pf_loader *l, uint32_t epoch, uint64_t k,
		       uint32_t *perm, uint32_t n)
{
	pf_rng r = pf_rng_seed(l->cfg.seed, epoch,
			       pf_mix64(k) ^ (0x626c6b00ull + l->topo.host_index));

	for (uint32_t i = 0; i < n; i++)
		perm[i] = i;
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)pf_rng_below(&r, i);
		uint32_t t = perm[i - 1];
		perm[i - 1] = perm[j];
		perm[j] = t;
	}
}

/* Open the epoch's block k: its ring entry, permutation and a slot for
 * each of its steps inside the quota and max_steps.  @return 0, 1 when
 * the block starts at or past max_steps (it is opened, with no slots: the
 * walk ends after the current segment), or <0 with l->mu not held. */
static int open_block(pf_loader *l, pf_io *io, walk *wk, uint64_t k)
{
	uint64_t g = wk->gbase + k, first = k * l->wblock;
	uint64_t left = wk->stream_len - first;
	uint32_t n = left < l->wblock ? (uint32_t)left : l->wblock;
	uint64_t first_step = first / l->host_batch;
	uint64_t quota_steps = wk->quota / l->host_batch;
	uint64_t nslots = quota_steps > first_step ? quota_steps - first_step : 0;
	uint64_t per_block = l->wblock / l->host_batch;
	uint64_t gstep = wk->step_base + first_step;
	uint64_t dropped = first + n > wk->quota
			   ? first + n - (wk->quota > first ? wk->quota : first) : 0;
	int over = 0, ret;
	sblock *b;

	nslots = nslots < per_block ? nslots : per_block;
	if (l->cfg.max_steps) {
		uint64_t left_steps = l->cfg.max_steps > gstep ? l->cfg.max_steps - gstep : 0;

		over = left_steps == 0;
		nslots = nslots < left_steps ? nslots : left_steps;
	}
	ret = io_wait(l, io, ring_free, g, &l->cv_block);
	if (ret < 0) {
		pthread_mutex_unlock(&l->mu);
		return ret;
	}
	b = ring_at(l, g);
	b->open = true;
	if (!over)
		l->m.remainder_dropped += dropped;
	pthread_mutex_unlock(&l->mu);

	b->remaining = n;
	b->first_pos = first;
	b->nslots = 0;
	b->perm = NULL;
	if (l->shuffle_rows && nslots) {
		b->perm = l->mem_perm + (g % l->nring) * l->wblock;
		block_perm(l, wk->epoch, k, b->perm, n);
	}
	b->slot = l->mem_slotptr + (g % l->nring) * per_block;
	for (uint64_t s = 0; s < nslots; s++) {
		uint64_t step = first_step + s;
		batch_slot *bs;

		ret = io_wait(l, io, slot_free, 0, &l->cv_batch);
		if (ret < 0) {
			pthread_mutex_unlock(&l->mu);
			return ret;
		}
		bs = l->free_slots;
		l->free_slots = bs->next;
		bs->next = NULL;
		bs->filled = 0;
		bs->batch.epoch = wk->epoch;
		bs->batch.step = step;
		bs->batch.global_step = wk->step_base + step;
		bs->batch.epoch_start = step == 0;
		bs->batch.epoch_end = step + 1 == l->steps_per_epoch;
		if (l->open_tail)
			l->open_tail->next = bs;
		else
			l->open_head = bs;
		l->open_tail = bs;
		pthread_mutex_unlock(&l->mu);
		b->slot[s] = bs;
		b->nslots++;
	}
	return over;
}

/* Give chunk c to the decoders. */
static void enqueue(pf_loader *l, chunk *c)
{
	pthread_mutex_lock(&l->mu);
	c->next = NULL;
	if (l->decode_tail)
		l->decode_tail->next = c;
	else
		l->decode_q = c;
	l->decode_tail = c;
	pthread_cond_broadcast(&l->cv_decode);
	pthread_mutex_unlock(&l->mu);
}

static int take_chunk(pf_loader *l, pf_io *io, chunk **out)
{
	int ret = io_wait(l, io, chunk_free, 0, &l->cv_chunk);

	if (ret == 0) {
		*out = l->free_chunks;
		l->free_chunks = (*out)->next;
		l->chunks_out++;
		(*out)->cbuf = -1;
		(*out)->ss = NULL;
		(*out)->ss_last = false;
	}
	pthread_mutex_unlock(&l->mu);
	return ret;
}

/* Open the epoch's blocks up to k; blocks past max_steps too (with no
 * slots), so that every block a dispatched read touches is in the ring.
 * @return 0, 1 when a block past max_steps was opened, or <0. */
static int open_through(pf_loader *l, pf_io *io, walk *wk, uint64_t k)
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

/* Whether the epoch's block k gets a slot: it starts inside the quota
 * and before max_steps.  Later blocks of the epoch never do when k does
 * not. */
static bool block_live(const pf_loader *l, const walk *wk, uint64_t k)
{
	uint64_t first_step = k * l->wblock / l->host_batch;

	return first_step < wk->quota / l->host_batch &&
	       (!l->cfg.max_steps || wk->step_base + first_step < l->cfg.max_steps);
}

/* Records [pos, pos + count) that nobody needs (the remainder): not
 * read, only accounted, one block at a time so that a long segment never
 * needs more ring entries than one. */
static int skip_range(pf_loader *l, pf_io *io, walk *wk, uint64_t pos, uint64_t count)
{
	uint64_t w = l->wblock, end = pos + count;

	while (pos < end) {
		uint64_t k = pos / w, stop = (k + 1) * w < end ? (k + 1) * w : end;
		int ret = open_through(l, io, wk, k);

		if (ret < 0)
			return ret;
		range_done(l, wk->gbase + k, pos, stop - pos);
		pos = stop;
	}
	return 0;
}

/* A stream segment: sub-segments of at most PF_STREAM_CHUNK_ROWS
 * records, decoded in order through one shared stream state; each opens
 * only the blocks it reaches, so a long file never needs the whole
 * segment's blocks at once.  @return 0, 1 when max_steps was reached, or
 * <0. */
static int dispatch_stream(pf_loader *l, pf_io *io, walk *wk, pf_segment seg,
			   uint64_t pos)
{
	stream_state *ss;
	int over = 0, ret = io_wait(l, io, stream_free, 0, &l->cv_chunk);

	if (ret < 0) {
		pthread_mutex_unlock(&l->mu);
		return ret;
	}
	ss = l->free_streams;
	l->free_streams = ss->next;
	pthread_mutex_unlock(&l->mu);
	ss->src = NULL;
	ss->busy = false;
	ss->next_first = seg.first;
	for (uint64_t done = 0; done < seg.count && !over;) {
		uint64_t n = seg.count - done;
		chunk *c = NULL;

		n = n < PF_STREAM_CHUNK_ROWS ? n : PF_STREAM_CHUNK_ROWS;
		over = open_through(l, io, wk, (pos + done + n - 1) / l->wblock);
		if (over < 0)
			return over;
		ret = take_chunk(l, io, &c);
		if (ret < 0)
			return ret;
		c->seg = (pf_segment){ seg.unit, seg.first + done, n };
		c->pos = pos + done;
		c->g0 = wk->gbase + c->pos / l->wblock;
		c->ss = ss;
		done += n;
		c->ss_last = done == seg.count;
		enqueue(l, c);
	}
	return over;
}

/* A frame segment: one read of the frame. */
static int dispatch_frame(pf_loader *l, pf_io *io, const walk *wk,
			  pf_segment seg, uint64_t pos, const int *file_slot)
{
	const pf_unit *u = &l->ds->units[seg.unit];
	int slot = file_slot[u->file];
	uint64_t len = u->csize;
	chunk *c = NULL;
	int ret = take_chunk(l, io, &c);

	if (ret < 0)
		return ret;
	c->seg = seg;
	c->pos = pos;
	c->g0 = wk->gbase + pos / l->wblock;
	ret = io_wait(l, io, cbuf_free, 0, &l->cv_cbuf);
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
	ret = pf_io_submit(io, &c->req);
	while (ret == -EBUSY) {
		ret = reap(l, io, 1);
		if (ret >= 0)
			ret = pf_io_submit(io, &c->req);
	}
	if (ret == 0)
		ret = reap(l, io, 0) < 0 ? -EIO : 0;
	return ret;
}

/* Walk one epoch's segments.  @return 0, 1 when max_steps is reached,
 * or <0. */
static int walk_epoch(pf_loader *l, pf_io *io, walk *wk, const pf_epoch_plan *plan,
		      const int *file_slot)
{
	uint64_t pos = 0, w = l->wblock;
	int over = 0, ret = 0;

	for (size_t s = 0; s < plan->nseg && !over && ret >= 0; s++) {
		pf_segment seg = plan->seg[s];
		uint64_t k0 = pos / w, k1 = (pos + seg.count - 1) / w;

		if (seg.count == 0)
			continue;
		if (!block_live(l, wk, k0)) {
			/* Past max_steps: the walk is over.  Else the remainder:
			 * not read. */
			if (l->cfg.max_steps &&
			    wk->step_base + k0 * w / l->host_batch >= l->cfg.max_steps)
				return 1;
			ret = skip_range(l, io, wk, pos, seg.count);
		} else if (l->ds->units[seg.unit].stream) {
			ret = over = dispatch_stream(l, io, wk, seg, pos);
		} else {
			/* A frame spans at most the blocks the ring holds. */
			ret = over = open_through(l, io, wk, k1);
			if (ret >= 0)
				ret = dispatch_frame(l, io, wk, seg, pos, file_slot);
		}
		pos += seg.count;
	}
	return ret < 0 ? ret : over;
}

static int io_run(pf_loader *l, pf_io *io, const int *file_slot)
{
	pf_epoch_plan plan = { 0 };
	uint64_t gnext = 0;
	int ret = 0;

	for (uint32_t e = 0; e < l->epochs && ret == 0; e++) {
		walk wk = { .epoch = e, .gbase = gnext,
			    .step_base = (uint64_t)e * l->steps_per_epoch };

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
		wk.quota = plan.quota;
		wk.stream_len = plan.stream_len;
		pthread_mutex_lock(&l->mu);
		l->m.remainder_wrapped += plan.stream_len > plan.share
					  ? plan.stream_len - plan.share : 0;
		pthread_mutex_unlock(&l->mu);
		ret = walk_epoch(l, io, &wk, &plan, file_slot);
		gnext += (plan.stream_len + l->wblock - 1) / l->wblock;
	}
	/* Finish what is in flight so no buffer is left with the kernel. */
	while (pf_io_inflight(io) && reap(l, io, 1) >= 0)
		;
	pf_plan_release(&plan);
	return ret == -ECANCELED || ret == 1 ? 0 : ret;
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
		.regions = l->cfg.regions,
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
	file_slot = calloc(l->ds->nfiles, sizeof(*file_slot));
	if (ret == 0 && !file_slot)
		ret = -ENOMEM;
	for (size_t i = 0; ret == 0 && i < l->ds->nfiles; i++) {
		if (!l->ds->index[i]) {
			file_slot[i] = -1;	/* streams are read by the workers */
			continue;
		}
		bool direct = l->cfg.direct_io &&
			      pf_shard_index_alignment(l->ds->index[i]) >= PF_ALIGN;
		ret = pf_io_add_file(io, l->ds->paths[i], direct ? PF_IO_DIRECT : 0, &err);
		if (ret >= 0) {
			file_slot[i] = ret;
			ndirect += pf_io_file_direct(io, (uint32_t)ret);
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
	l->m.files_direct = ndirect;
	pthread_cond_broadcast(&l->cv_init);
	pthread_mutex_unlock(&l->mu);

	if (ret == 0) {
		ret = io_run(l, io, file_slot);
		if (ret < 0) {
			pf_error_clear(&err);
			pf_error_set(&err, ret, PF_OFFSET_NONE, 0, "I/O engine failed: %s",
				     pf_strerror(ret));
			fail(l, &err, ret);
		}
	}
	pthread_mutex_lock(&l->mu);
	l->io_end_ns = now_ns();
	l->io_done = true;
	pthread_cond_broadcast(&l->cv_decode);
	pthread_cond_broadcast(&l->cv_ready);
	pthread_mutex_unlock(&l->mu);
	pf_io_free(io);
	free(file_slot);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Creation: the memory plan                                            */

typedef struct mem_plan {
	size_t cbufs, decode, batches, perm;
} mem_plan;

static size_t plan_total(const mem_plan *p)
{
	return p->cbufs + p->decode + p->batches + p->perm;
}

/* The largest segment a chunk can carry decides how many blocks one read
 * can touch (span); the slots must cover that many blocks at once, plus
 * what the consumer may hold, or the I/O thread could wait for a slot
 * that only its next read would free.  The ring (cheap) has slack. */
static void plan_sizes(pf_loader *l)
{
	const pf_dataset *ds = l->ds;
	uint64_t maxseg = ds->max_unit_records;
	uint64_t span;

	if (ds->any_stream && maxseg < PF_STREAM_CHUNK_ROWS)
		maxseg = PF_STREAM_CHUNK_ROWS;
	span = (maxseg + l->wblock - 1) / l->wblock + 1;
	l->nring = (uint32_t)span + 2;
	l->nslots = (unsigned)(span * (l->wblock / l->host_batch)) + l->cfg.prefetch + 1;
}

static int plan_memory(pf_loader *l, mem_plan *p, pf_error *err)
{
	const pf_dataset *ds = l->ds;
	size_t budget = l->cfg.memory_budget;
	unsigned depth = l->cfg.io_depth;
	uint64_t arena_rec = ds->max_usize > ds->max_stream_record ? ds->max_usize
								   : ds->max_stream_record;

	plan_sizes(l);
	l->cbuf_bytes = round_up(ds->max_csize ? ds->max_csize : 1, PF_ALIGN);
	p->decode = (size_t)l->nworkers * (ds->max_usize + PF_ARENA_BYTES_FOR(arena_rec));
	p->batches = (size_t)l->nslots * l->topo.cores * l->block_bytes;
	p->perm = l->shuffle_rows ? (size_t)l->nring * l->wblock * sizeof(uint32_t) : 0;
	for (;;) {
		l->ncbufs = ds->max_csize ? depth + l->nworkers : 0;
		p->cbufs = (size_t)l->ncbufs * l->cbuf_bytes;
		if (plan_total(p) <= budget || depth == 1)
			break;
		depth = depth > 4 ? depth / 2 : 1;	/* fewer reads in flight */
	}
	l->cfg.io_depth = depth;
	l->nchunks = depth + 2 * l->nworkers + 2;
	if (plan_total(p) > budget)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
			"memory budget of %zu MiB is too small: it needs %zu MiB "
			"(read buffers %zu, decode %zu, batch slots %zu (%u of %zu KiB), "
			"shuffle %zu MiB); a smaller shuffle window or batch needs fewer "
			"slots", budget >> 20,
			(plan_total(p) + (1u << 20) - 1) >> 20, p->cbufs >> 20,
			p->decode >> 20, p->batches >> 20, l->nslots,
			((size_t)l->topo.cores * l->block_bytes) >> 10, p->perm >> 20);
	return 0;
}

static int setup_slot(pf_loader *l, batch_slot *s)
{
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
	return 0;
}

static int setup_pools(pf_loader *l, pf_error *err)
{
	const pf_dataset *ds = l->ds;
	uint64_t arena_rec = ds->max_usize > ds->max_stream_record ? ds->max_usize
								   : ds->max_stream_record;
	mem_plan p = { 0 };
	int ret;

	/* Tensor layout: each core's block holds its features one after the
	 * other, [per_core_batch][len] each, 64-byte aligned. */
	l->toff = calloc(l->spec.n, sizeof(*l->toff));
	l->fbytes = calloc(l->spec.n, sizeof(*l->fbytes));
	if (!l->toff || !l->fbytes)
		return -ENOMEM;
	l->block_bytes = 0;
	for (uint32_t f = 0; f < l->spec.n; f++) {
		l->fbytes[f] = l->spec.f[f].len * pf_dtype_size(l->spec.f[f].dtype);
		l->toff[f] = l->block_bytes;
		l->block_bytes = round_up(l->block_bytes +
					  l->fbytes[f] * l->topo.per_core_batch, 64);
	}
	ret = plan_memory(l, &p, err);
	if (ret < 0)
		return ret;

	l->chunks = calloc(l->nchunks, sizeof(*l->chunks));
	l->streams = calloc(l->nchunks, sizeof(*l->streams));
	l->free_cbuf = calloc(l->ncbufs ? l->ncbufs : 1, sizeof(*l->free_cbuf));
	l->ring = calloc(l->nring, sizeof(*l->ring));
	l->mem_slotptr = calloc((size_t)l->nring * (l->wblock / l->host_batch),
				sizeof(*l->mem_slotptr));
	l->mem_cbufs = pool_alloc(p.cbufs);
	l->cbufs_size = p.cbufs;
	l->slots = calloc(l->nslots, sizeof(*l->slots));
	l->mem_batches = pool_alloc(p.batches);
	l->batches_size = p.batches;
	l->mem_perm = p.perm ? malloc(p.perm) : NULL;
	if (!l->chunks || !l->streams || !l->free_cbuf || !l->ring || !l->mem_slotptr ||
	    (p.cbufs && !l->mem_cbufs) || !l->slots || (p.batches && !l->mem_batches) ||
	    (p.perm && !l->mem_perm))
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "cannot allocate %zu MiB of pools", plan_total(&p) >> 20);
	for (unsigned i = 0; i < l->nchunks; i++) {
		l->chunks[i].next = l->free_chunks;
		l->free_chunks = &l->chunks[i];
		l->streams[i].next = l->free_streams;
		l->free_streams = &l->streams[i];
	}
	for (unsigned i = 0; i < l->ncbufs; i++)
		l->free_cbuf[l->nfree_cbuf++] = (int)i;
	for (unsigned i = 0; i < l->nslots; i++) {
		batch_slot *s = &l->slots[i];

		s->mem = l->mem_batches + (size_t)i * l->topo.cores * l->block_bytes;
		if (setup_slot(l, s) < 0)
			return -ENOMEM;
		s->next = l->free_slots;
		l->free_slots = s;
	}
	for (unsigned i = 0; i < l->nworkers; i++) {
		worker *w = &l->workers[i];

		w->l = l;
		w->tally = calloc((size_t)l->nring * l->per_block, sizeof(*w->tally));
		w->touched = calloc((size_t)l->nring * l->per_block, sizeof(*w->touched));
		if (!w->tally || !w->touched ||
		    pf_arena_init(&w->arena, PF_ARENA_BYTES_FOR(arena_rec)) < 0)
			return -ENOMEM;
		if (!ds->max_csize)
			continue;	/* only stream files: no frames */
		w->ubuf = malloc(ds->max_usize);
		if (!w->ubuf || pf_frame_decoder_create(&w->fdec) < 0)
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
	uint32_t window;
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
	pthread_cond_init(&l->cv_block, NULL);
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
	if ((uint64_t)l->topo.cores * l->topo.per_core_batch > UINT32_MAX / 2) {
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "host batch of %u cores x %u records is too large",
				   l->topo.cores, l->topo.per_core_batch);
		goto fail;
	}
	l->epochs = cfg->epochs ? cfg->epochs : 1;
	l->cfg.memory_budget = cfg->memory_budget ? cfg->memory_budget : PF_BUDGET_DEFAULT;
	l->cfg.io_depth = cfg->io_depth ? cfg->io_depth : PF_IO_DEPTH_DEFAULT;
	l->cfg.max_record_size = cfg->max_record_size ? cfg->max_record_size
						      : PF_MAX_RECORD_DEFAULT;
	l->cfg.prefetch = cfg->prefetch ? cfg->prefetch : 2;
	l->nworkers = cfg->threads ? cfg->threads : ncpus();
	l->host_batch = l->topo.cores * l->topo.per_core_batch;
	/* The shuffle block: the window in whole host batches; shuffle_window
	 * 1 is no shuffle within the window. */
	window = cfg->shuffle ? (cfg->shuffle_window ? cfg->shuffle_window
						     : PF_WINDOW_DEFAULT) : 1;
	l->shuffle_rows = window > 1;
	if (round_up(window, l->host_batch) > (1u << 30)) {
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "shuffle window of %u records (in whole host batches of %u) "
				   "is over 2^30 records", window, l->host_batch);
		goto fail;
	}
	l->wblock = (uint32_t)round_up(window, l->host_batch);
	l->per_block = l->wblock / l->host_batch;

	ret = pf_spec_parse(&l->spec, cfg->features, err);
	if (ret < 0)
		goto fail;
	ret = pf_dataset_open(&l->ds, cfg->paths, cfg->npaths, l->cfg.max_record_size,
			      cfg->regions, err);
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

static bool slot_full(const pf_loader *l, const batch_slot *b)
{
	return __atomic_load_n(&b->filled, __ATOMIC_ACQUIRE) == l->host_batch;
}

int pf_loader_next(pf_loader *l, pf_batch **out)
{
	uint64_t t0 = now_ns(), dt;
	unsigned fill = 0;
	batch_slot *b;

	pthread_mutex_lock(&l->mu);
	if (l->held > l->cfg.prefetch) {
		pf_error e;

		pf_error_clear(&e);
		pf_error_set(&e, -EBUSY, PF_OFFSET_NONE, 0,
			     "the consumer holds %u batches; release one before the next "
			     "(at most prefetch + 1 = %u at once)", l->held,
			     l->cfg.prefetch + 1);
		fail_locked(l, &e, -EBUSY);
		pthread_mutex_unlock(&l->mu);
		return -EBUSY;
	}
	for (;;) {
		b = l->open_head;
		if (b && slot_full(l, b))
			break;
		/* Batches made before a failure are still good: hand them out. */
		if (l->failed || (!b && l->io_done && !l->chunks_out) || l->stop) {
			int ret = l->failed ? (l->err.code ? l->err.code : -EIO) : 0;
			pthread_mutex_unlock(&l->mu);
			return ret;
		}
		pthread_cond_wait(&l->cv_ready, &l->mu);
	}
	l->open_head = b->next;
	if (!l->open_head)
		l->open_tail = NULL;
	for (batch_slot *s = b; s && slot_full(l, s); s = s->next)
		fill++;
	l->held++;
	l->m.queue_fill_sum += fill;
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
	l->held--;
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
	wake_all(l);
	pthread_mutex_unlock(&l->mu);
	for (unsigned i = 0; l->workers && i < l->nworkers; i++) {
		if (l->workers[i].started)
			pthread_join(l->workers[i].thread, NULL);
		free(l->workers[i].ubuf);
		free(l->workers[i].tally);
		free(l->workers[i].touched);
		pf_frame_decoder_free(l->workers[i].fdec);
		pf_arena_release(&l->workers[i].arena);
	}
	if (l->io_started)
		pthread_join(l->io_thread, NULL);
	for (unsigned i = 0; l->slots && i < l->nslots; i++) {
		free(l->slots[i].core);
		free(l->slots[i].tensors);
	}
	for (unsigned i = 0; l->streams && i < l->nchunks; i++)
		pf_source_close(l->streams[i].src);
	free(l->workers);
	free(l->slots);
	free(l->chunks);
	free(l->streams);
	free(l->ring);
	free(l->mem_slotptr);
	free(l->mem_perm);
	pool_free(l->mem_cbufs, l->cbufs_size);
	pool_free(l->mem_batches, l->batches_size);
	free(l->free_cbuf);
	free(l->toff);
	free(l->fbytes);
	pf_dataset_free(l->ds);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv_chunk);
	pthread_cond_destroy(&l->cv_cbuf);
	pthread_cond_destroy(&l->cv_decode);
	pthread_cond_destroy(&l->cv_block);
	pthread_cond_destroy(&l->cv_batch);
	pthread_cond_destroy(&l->cv_ready);
	pthread_cond_destroy(&l->cv_init);
	free(l);
}
