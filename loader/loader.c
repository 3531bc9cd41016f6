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
 *                  Stream files are read through pf_io too, in blocks of
 *                  PF_READ_DEFAULT bytes, a few ahead of their decoding.
 *   decode workers take completed reads: frame CRC, zstd, TFRecord
 *                  framing, decode and preprocessing of each record into
 *                  its row of its slot; a slot is ready when all its rows
 *                  are written.  Stream files (no index) are cut into
 *                  sub-segments that workers decode in order, one at a
 *                  time per file, taking the file's blocks in order as
 *                  the I/O thread reads them (pf_source in pull mode).
 *   consumer       pf_loader_next() hands out slots in step order.
 *
 * Every buffer comes from pools sized at creation from the memory
 * budget; after start-up the hot path does not allocate (except that a
 * stream file's decoder, pf_source, is made when its turn comes).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "file_policy_internal.h"
#include "loader_internal.h"
#include "spec_internal.h"

#define PF_ALIGN 4096u
#define PF_BUDGET_DEFAULT (512ull << 20)
#define PF_WINDOW_DEFAULT 8192u
#define PF_IO_DEPTH_DEFAULT 32u
#define PF_STREAM_CHUNK_ROWS 1024u
/* Read buffers per stream being read: the block its worker decodes and
 * the next one, read meanwhile. */
#define PF_STREAM_BUFS 2u

typedef struct batch_slot {
	struct batch_slot *next;
	pf_batch batch;		/* handed to the consumer */
	pf_core_batch *core;
	pf_tensor *tensors;	/* cores x ntensors */
	uint8_t *mem;
	uint8_t *valid;		/* cores x per_core_batch: 0 for a hole */
	bool holes;		/* a hole was placed since it was taken (atomic) */
	uint32_t filled;	/* rows written (atomic) */
} batch_slot;

/* A shuffle block of an origin stream, in a ring indexed by its global
 * number (the blocks this run opens, numbered across pieces and epochs).
 * Its records come out at block outputs perm[r]; those in [olo, ohi) are
 * the piece's, and output olo is the run's epoch output ebase. */
typedef struct sblock {
	bool open;
	uint32_t remaining;	/* records not yet decoded or skipped (atomic) */
	uint32_t nslots;	/* steps with a slot (inside the piece and max_steps) */
	uint32_t olo, ohi;	/* block outputs the piece delivers */
	uint64_t ebase;		/* epoch output index of output olo */
	uint64_t j0;		/* epoch batch of slot[0] */
	uint64_t first_pos;	/* stream position of its first record */
	uint32_t *perm;		/* [W] output offset of input offset; NULL: identity */
	batch_slot **slot;	/* [spb] */
} sblock;

/* A read buffer of a stream file: block `block` of it (file bytes from
 * block x PF_READ_DEFAULT on), read by the I/O thread and handed to the
 * worker decoding the stream.  FREE -> READING (submitted) -> READY (read,
 * or failed) -> HELD (the record stream is using it) -> FREE (the worker
 * asked for the next block, or the stream was finished). */
typedef enum sbuf_state { SBUF_FREE = 0, SBUF_READING, SBUF_READY, SBUF_HELD } sbuf_state;

typedef struct stream_buf {
	struct stream_buf *submit_next;	/* the I/O thread's reads to submit */
	struct stream_state *ss;
	uint8_t *mem;			/* PF_READ_DEFAULT bytes of mem_sbufs */
	uint64_t block;
	sbuf_state state;
	pf_io_req req;			/* req.user points here */
	pf_error ioerr;			/* a failed read, as the engine tells it */
} stream_buf;

/* The reading state of one stream segment, shared by its sub-segments.
 * Its reads (under l->mu): blocks [0, nblocks) of the file, submitted in
 * order into buf[] (next_read), taken in order by the worker (next_pull). */
typedef struct stream_state {
	struct stream_state *next;	/* free list, or the active list */
	pf_loader *l;
	pf_source *src;			/* opened by the first sub-segment */
	uint64_t next_first;		/* record the next sub-segment starts at */
	bool busy;			/* a worker is decoding from it */
	uint32_t slot;			/* the file in the I/O engine */
	uint64_t size, nblocks;
	uint64_t next_read, next_pull;
	uint64_t end_block;		/* pull says "end of file" here */
	unsigned reading;		/* reads in flight */
	bool finished;			/* its last sub-segment is done: no more reads */
	stream_buf *held;		/* the block the record stream is using */
	uint64_t wait_ns;		/* its worker's time waiting for blocks */
	stream_buf buf[PF_STREAM_BUFS];
} stream_state;

typedef struct chunk {
	struct chunk *next;
	pf_segment seg;
	uint64_t pos;		/* stream position of record seg.first */
	uint64_t g0;		/* global number of the block holding pos */
	uint32_t w;		/* records per block of that stream */
	stream_state *ss;	/* a stream sub-segment, else NULL */
	bool ss_last;		/* its last sub-segment */
	pf_io_req req;
	pf_error ioerr;		/* a failed read, as the engine tells it */
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
	uint32_t *tally;	/* [nring x spb], by ring entry and step */
	uint32_t *touched;	/* tally indexes in use */
	uint32_t ntouched;
	bool started;
} worker;

/* One epoch of this run: the pieces of origin streams this host
 * delivers, in order.  A fresh epoch is one piece, the host's own stream
 * up to its quota; a resumed one is what a saved state left. */
typedef struct epoch_run {
	uint32_t epoch;
	pf_topology origin;	/* the topology whose host streams these are */
	uint32_t w;		/* records per shuffle block of those streams */
	bool permute;		/* blocks permuted */
	pf_piece *pieces;
	size_t npieces;
	uint64_t steps;		/* batches this run takes from the epoch */
	uint64_t step0;		/* batch.step of the first */
	uint64_t dropped;	/* this host's remainder in the epoch */
	uint64_t wrapped;	/* records repeated to fill the last step */
} epoch_run;

struct pf_loader {
	pf_loader_config cfg;
	pf_topology topo;
	pf_spec spec;
	pf_dataset *ds;
	uint64_t steps_per_epoch;
	uint32_t epochs;
	uint32_t host_batch;	/* rows per host batch (B) */
	uint32_t wblock;	/* records per shuffle block (W, a multiple of B) */
	uint32_t wmax;		/* the largest W of the run (a resumed epoch's may differ) */
	uint32_t spb;		/* slots one block can touch */
	bool shuffle_rows;	/* permute inside blocks */

	/* Where the run starts: a fresh epoch, or a resumed one. */
	uint32_t start_epoch;
	uint64_t gstep0;	/* global step of the run's first batch */
	bool resumed;		/* start_epoch is `resume` */
	epoch_run resume;

	/* The I/O thread's last slot: the next block may share its step. */
	uint64_t last_rstep;
	batch_slot *last_slot;

	/* Corrupt data in skip mode: the quarantine log, or -1. */
	int qfd;
	/* The process's read counters at creation (retries, faults and
	 * timeouts are those of every read path, pf_file_pread()'s too). */
	pf_io_totals totals0;

	/* What the consumer has been handed (for pf_loader_save_state()). */
	bool c_any;
	uint32_t c_epoch;
	uint64_t c_delivered;	/* records of c_epoch handed out by this run */
	pf_batch c_last;	/* the last batch handed out */

	pthread_mutex_t mu;
	pthread_cond_t cv_chunk;	/* a chunk or stream state became free */
	pthread_cond_t cv_cbuf;		/* a compressed buffer became free */
	pthread_cond_t cv_decode;	/* work for decoders */
	pthread_cond_t cv_block;	/* a ring entry became free */
	pthread_cond_t cv_batch;	/* a batch slot became free */
	pthread_cond_t cv_ready;	/* a slot filled, or the end */
	pthread_cond_t cv_init;		/* the I/O thread finished starting */
	pthread_cond_t cv_stream;	/* a stream block was read */
	/* The condition variable the I/O thread sleeps on (io_wait()), or
	 * NULL while it runs: what a stream's worker does (a buffer given
	 * back, a stream finished) must wake it whatever it waits for, since
	 * it has reads to submit then. */
	pthread_cond_t *io_sleep;
	bool stop, failed, io_done, io_ready;
	int io_init_ret;
	pf_error err;

	/* pools */
	uint8_t *mem_cbufs, *mem_batches, *mem_sbufs;
	size_t cbufs_size, batches_size, sbufs_size;
	uint32_t *mem_perm;
	batch_slot **mem_slotptr;
	chunk *chunks;
	unsigned nchunks, ncbufs;
	chunk *free_chunks;
	unsigned chunks_out;		/* taken from the pool, not yet back */
	stream_state *streams, *free_streams;
	unsigned nstreams;		/* stream states: streams read at once */
	stream_state *active, *active_tail;	/* taken, oldest first */
	int *free_cbuf;
	unsigned nfree_cbuf;
	size_t cbuf_bytes;
	chunk *decode_q, *decode_tail;	/* waiting for a worker */
	sblock *ring;
	uint32_t nring;
	batch_slot *slots, *free_slots;
	batch_slot *open_head, *open_tail;	/* taken, in step order */
	unsigned nslots, held;
	/* The last pf_loader_next() was a caller's mistake (one batch too
	 * many held): what pf_loader_last_error() says until the next call.
	 * The consumer's thread only. */
	bool misused;
	pf_error misuse;
	pf_file_policy_scope file_policy;	/* the cfg's read policy, if any */
	size_t block_bytes;
	size_t *toff;			/* tensor offsets inside a core block */
	size_t *fbytes;			/* bytes per record of each feature */
	uint64_t memory_bytes;

	/* threads */
	pthread_t io_thread;
	bool io_started;
	/* The I/O thread gave up with reads in flight (the engine failed):
	 * the kernel may still write into the read buffers, which then go
	 * back to the system, not to the next loader. */
	bool io_left;
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

/* Wake every thread waiting on the loader.  Call with mu held. */
static void wake_all(pf_loader *l)
{
	pthread_cond_broadcast(&l->cv_chunk);
	pthread_cond_broadcast(&l->cv_cbuf);
	pthread_cond_broadcast(&l->cv_decode);
	pthread_cond_broadcast(&l->cv_block);
	pthread_cond_broadcast(&l->cv_batch);
	pthread_cond_broadcast(&l->cv_ready);
	pthread_cond_broadcast(&l->cv_stream);
}

/* Wake the I/O thread if it sleeps, whatever it waits for.  Call with mu
 * held. */
static void wake_io(pf_loader *l)
{
	if (l->io_sleep)
		pthread_cond_broadcast(l->io_sleep);
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

/* The same for the records [pos, pos + count) of a stream of blocks of
 * w records, whose block holding pos is g0. */
static void range_done(pf_loader *l, uint64_t g0, uint64_t pos, uint64_t count,
		       uint64_t w)
{
	uint64_t end = pos + count;

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
	return pf_spec_decode_unfenced(&l->spec, rec->data, (size_t)rec->len, &w->arena,
				       w->dst, err);
}

/* The slot and row of stream position p of chunk c: NULL when its
 * output falls outside the piece or past max_steps (not this run's). */
static batch_slot *locate(const pf_loader *l, const chunk *c, uint64_t p, uint32_t *row,
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

/* Point w->dst at row of slot s. */
static void aim(const pf_loader *l, worker *w, batch_slot *s, uint32_t row)
{
	uint32_t core = row / l->topo.per_core_batch, idx = row % l->topo.per_core_batch;

	for (uint32_t f = 0; f < l->spec.n; f++)
		w->dst[f] = (uint8_t *)s->core[core].block + l->toff[f] +
			    (size_t)idx * l->fbytes[f];
}

/* Position p of chunk c is a hole: a record lost to damage (skip mode).
 * Its row is zeros and marked invalid; it counts as written. */
static void place_hole(pf_loader *l, worker *w, const chunk *c, uint64_t p)
{
	uint32_t row;
	size_t ti;
	batch_slot *s = locate(l, c, p, &row, &ti);

	if (!s)
		return;
	aim(l, w, s, row);
	for (uint32_t f = 0; f < l->spec.n; f++)
		memset(w->dst[f], 0, l->fbytes[f]);
	s->valid[row] = 0;
	__atomic_store_n(&s->holes, true, __ATOMIC_RELAXED);	/* published by flush_tally */
	tally(w, ti);
}

/* Bytes json_escape() needs for s at most: every byte may become a
 * six-byte \u escape. */
#define JSON_ESCAPED_MAX(len) (6 * (len) + 1)

/* JSON string body of s into dst (cap > 0): quotes, backslashes and
 * control bytes escaped, cut to fit.  @return its length. */
static size_t json_escape(char *dst, size_t cap, const char *s)
{
	size_t n = 0;

	for (; *s && n + 7 < cap; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			dst[n++] = '\\';
			dst[n++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			n += (size_t)snprintf(dst + n, cap - n, "\\u%04x", ch);
		} else {
			dst[n++] = (char)ch;
		}
	}
	dst[n] = 0;
	return n;
}

/* One drop (skip mode): counted, written to the quarantine log when
 * log, and checked against the budget.  @return 0, or <0 when the budget
 * is spent or the log cannot be written (the loader is then failed with
 * an error saying so). */
static int note_drop(pf_loader *l, const pf_drop *d, const char *path, bool log)
{
	/* Sized for the whole path and cause (a drop is rare: the heap is
	 * fine here), so that the log never cuts them. */
	size_t path_len = strlen(path), cause_cap = PF_ERROR_LINE_MAX;
	size_t jpath_cap = JSON_ESCAPED_MAX(path_len), jcause_cap = JSON_ESCAPED_MAX(cause_cap);
	size_t line_cap = jpath_cap + jcause_cap + 512;
	char *cause = NULL, *line = NULL;
	pf_error e = d->cause;
	int n = 0, ret = 0;

	if (log && l->qfd >= 0) {
		cause = pf_malloc(cause_cap + jpath_cap + jcause_cap);
		line = pf_malloc(line_cap);
	}
	pf_error_set_file(&e, path);
	if (cause && line) {
		char *jpath = cause + cause_cap, *jcause = jpath + jpath_cap;

		pf_error_format(&e, cause, cause_cap);
		json_escape(jpath, jpath_cap, path);
		json_escape(jcause, jcause_cap, cause);
		n = snprintf(line, line_cap,
			     "{\"file\":\"%s\",\"offset\":%llu,\"offset_kind\":\"%s\","
			     "\"resume\":%llu,\"unit\":\"%s\",\"frame\":%lld,\"records\":%lld,"
			     "\"host\":%u,\"cause\":\"%s\"}\n", jpath,
			     (unsigned long long)d->start,
			     d->offset_kind == PF_OFFSET_FILE ? "file" : "decompressed",
			     (unsigned long long)d->resume, pf_drop_unit_name(d->unit),
			     (long long)e.frame, (long long)d->records, l->topo.host_index, jcause);
	} else if (log && l->qfd >= 0) {
		ret = -ENOMEM;
	}
	pthread_mutex_lock(&l->mu);
	l->m.corrupt_drops++;
	l->m.corrupt_records += d->records > 0 ? (uint64_t)d->records : 0;
	if (line && n > 0) {
		/* One write per line: O_APPEND keeps lines of several
		 * processes whole. */
		if (write(l->qfd, line, (size_t)n < line_cap ? (size_t)n : line_cap - 1) < 0)
			ret = -errno;
	}
	if (ret < 0) {
		pf_error qe;

		pf_error_clear(&qe);
		pf_error_set(&qe, ret, PF_OFFSET_NONE, 0, "cannot write the quarantine log %s: %s",
			     l->cfg.quarantine, pf_strerror(ret));
		fail_locked(l, &qe, ret);
	} else if (l->cfg.max_corrupt && l->m.corrupt_drops > l->cfg.max_corrupt) {
		pf_error be = e;

		ret = pf_error_set(&be, -EBADMSG, be.offset_kind, be.offset,
				   "more than %llu corrupt units dropped (the budget); the last: %s",
				   (unsigned long long)l->cfg.max_corrupt, d->cause.msg);
		fail_locked(l, &be, ret);
	}
	pthread_mutex_unlock(&l->mu);
	pf_free(cause);
	pf_free(line);
	return ret;
}

static int report_drop(pf_loader *l, const pf_drop *d, const char *path)
{
	return note_drop(l, d, path, true);
}

/* Drops found opening the dataset (stream files, damaged indexes): every
 * host counts them, host 0 logs them, once for the pod; reading the
 * stream files again later drops the same units unreported. */
static int open_drop(void *ctx, const pf_drop *d)
{
	pf_loader *l = ctx;

	return note_drop(l, d, d->cause.file, l->topo.host_index == 0);
}

/* Decode record rec, at stream position p of chunk c, into its row.
 * Records whose output is not this run's are skipped.  In skip mode a
 * record that does not decode is dropped (reported with the file) and
 * its row is a hole. */
static int place_record(pf_loader *l, worker *w, const chunk *c, uint64_t p,
			const pf_record *rec, pf_error *err)
{
	uint32_t row;
	size_t ti;
	batch_slot *s = locate(l, c, p, &row, &ti);
	int ret;

	if (!s)
		return 0;
	aim(l, w, s, row);
	ret = decode_into(l, w, rec, err);
	if (ret < 0) {
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

		ret = report_drop(l, &d, l->ds->paths[l->ds->units[c->seg.unit].file]);
		if (ret < 0)
			return ret;
		place_hole(l, w, c, p);
		return 0;
	}
	tally(w, ti);
	return 0;
}

/* Add the chunk's rows to the slots' counts; wake the consumer when a
 * slot is full.  Before range_done(): the ring entries must still be the
 * chunk's. */
static void flush_tally(pf_loader *l, worker *w)
{
	bool full = false;

	/* Rows streamed by the chunk's decodes are complete before a count
	 * says so (a locked add is not documented to order non-temporal
	 * stores on every x86). */
	pf_spec_fence();
	for (uint32_t i = 0; i < w->ntouched; i++) {
		uint32_t ti = w->touched[i];
		batch_slot *s = l->ring[ti / l->spb].slot[ti % l->spb];

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

/* Skip mode: the frame of chunk c could not be read or decompressed.  It
 * is dropped whole (reported by the chunk that holds its first record)
 * and each of its places in the segment is a hole. */
static int lose_frame(pf_loader *l, worker *w, chunk *c, pf_error *cause)
{
	const pf_unit *u = &l->ds->units[c->seg.unit];
	pf_drop d = { .unit = PF_DROP_FRAME, .offset_kind = PF_OFFSET_FILE,
		      .start = u->offset, .resume = u->offset + u->csize,
		      .next_record = u->first_record, .records = (int64_t)u->records };
	int ret;

	locate_in_frame(cause, u);
	d.cause = *cause;
	if (c->seg.first == 0) {
		ret = report_drop(l, &d, l->ds->paths[u->file]);
		if (ret < 0)
			return ret;
	}
	for (uint64_t i = 0; i < c->seg.count; i++)
		place_hole(l, w, c, c->pos + i);
	return 0;
}

/* Skip mode over a decompressed frame: its intact records fill the
 * frame's places in order (the index gives the count, not which were
 * lost) and the places left are holes.  A drop is reported by the chunk
 * whose segment holds the place of the next intact record. */
static int frame_records_skip(pf_loader *l, worker *w, chunk *c,
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
				ret = report_drop(l, &d, path);
				if (ret < 0)
					return ret;
			}
			continue;
		}
		rec.index = fi->first_record + i;
		if (i >= c->seg.first) {
			ret = place_record(l, w, c, c->pos + (i - c->seg.first), &rec, err);
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
			ret = report_drop(l, &x, path);
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
		ret = report_drop(l, &d, path);
		if (ret < 0)
			return ret;
	}
	for (uint64_t k = i > c->seg.first ? i : c->seg.first; k < end; k++)
		place_hole(l, w, c, c->pos + (k - c->seg.first));
	return 0;
}

static int decode_frame(pf_loader *l, worker *w, chunk *c, pf_error *err)
{
	const pf_unit *u = &l->ds->units[c->seg.unit];
	const pf_frame_info frame = pf_unit_frame(u), *fi = &frame;
	size_t pos = 0, len;
	uint64_t end = c->seg.first + c->seg.count;
	bool skip = l->cfg.on_corrupt == PF_CORRUPT_SKIP;
	int64_t n;
	int ret = 0;

	err->frame = u->frame;
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
	n = pf_frame_decode(w->fdec, fi, c->req.buf, u->csize, w->ubuf,
			    l->ds->max_usize, err);
	if (n < 0 && skip && n != -ENOMEM)
		return lose_frame(l, w, c, err);
	if (n < 0) {
		locate_in_frame(err, u);
		return (int)n;
	}
	len = (size_t)n;
	if (skip)
		return frame_records_skip(l, w, c, fi, len, err);
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

/* Stream reads, the workers' side.  A stream's blocks are read by the
 * I/O thread (pump_streams()) into the stream's buffers; its worker takes
 * them in order through stream_pull(), pf_source's pull callback. */

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
	wake_io(l);		/* dispatch_stream() may wait for it */
}

/* The stream's last sub-segment is decoded: no more blocks are read (the
 * rest of the file may hold records of no segment of this run), its
 * buffers go back, and the state is retired once its reads in flight are
 * in (reap() does it for the last).  Call with l->mu held. */
static void stream_finish(pf_loader *l, stream_state *ss)
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
static int stream_pull(void *ctx, const uint8_t **buf, size_t *len, pf_error *err)
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
		wake_io(l);
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
		/* Pull mode: the I/O thread reads the file (and counts the
		 * reads to its mount), the source only decodes. */
		pf_source_config scfg = { .max_record_size = l->cfg.max_record_size,
					  .ignore_index = true,
					  .on_corrupt = l->cfg.on_corrupt,
					  .pull = stream_pull, .pull_ctx = ss,
					  .file_size = ss->size };

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
		/* (Its bytes read were counted as the reads came in.) */
		pthread_mutex_lock(&l->mu);
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
		uint64_t t0 = now_ns(), t1, waited;
		pf_error err;
		chunk *c = NULL;
		int ret;

		while (!halted(l) && !(c = take_work(l)) && !(l->io_done && !l->decode_q))
			pthread_cond_wait(&l->cv_decode, &l->mu);
		if (!c)
			break;
		t1 = now_ns();
		l->m.decode.wait_ns += t1 - t0;
		/* A stream's time waiting for its blocks is counted as
		 * waiting (stream_pull()), not as work. */
		waited = c->ss ? c->ss->wait_ns : 0;
		pthread_mutex_unlock(&l->mu);

		pf_error_clear(&err);
		ret = c->ss ? decode_stream(l, w, c, &err) : decode_frame(l, w, c, &err);
		if (ret < 0) {
			pf_error_set_file(&err, l->ds->paths[l->ds->units[c->seg.unit].file]);
		} else {
			flush_tally(l, w);
			range_done(l, c->g0, c->pos, c->seg.count, c->w);
		}

		pthread_mutex_lock(&l->mu);
		waited = c->ss ? c->ss->wait_ns - waited : 0;
		l->m.decode.busy_ns += now_ns() - t1 - waited;
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
				stream_finish(l, c->ss);
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

static bool streams_idle(const pf_loader *l, uint64_t arg)
{
	(void)arg;
	return l->active == NULL;
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

/* Submit what pump_streams() chose, and push it to the kernel.  @return 0
 * or the engine's error. */
static int submit_stream_reads(pf_loader *l, pf_io *io, stream_buf *list)
{
	int ret = 0;

	while (list && ret >= 0) {
		stream_buf *sb = list;

		list = sb->submit_next;
		ret = pf_io_submit(io, &sb->req);
		while (ret == -EBUSY) {	/* not expected: the room was counted */
			ret = reap(l, io, 1);
			if (ret >= 0)
				ret = pf_io_submit(io, &sb->req);
		}
	}
	if (ret >= 0)
		ret = reap(l, io, 0);
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
static int io_wait(pf_loader *l, pf_io *io, bool (*ready)(const pf_loader *, uint64_t),
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
		ret = reap(l, io, 1);	/* counts its own waiting */
		if (ret < 0) {
			pthread_mutex_lock(&l->mu);
			return ret;
		}
	}
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
} walk;

/* Fisher-Yates over [0, n), seeded by (seed, epoch, origin host, block). */
static void block_perm(const pf_loader *l, uint32_t epoch, uint32_t host, uint64_t k,
		       uint32_t *perm, uint32_t n)
{
	pf_rng r = pf_rng_seed(l->cfg.seed, epoch, pf_mix64(k) ^ (0x626c6b00ull + host));

	for (uint32_t i = 0; i < n; i++)
		perm[i] = i;
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)pf_rng_below(&r, i);
		uint32_t t = perm[i - 1];
		perm[i - 1] = perm[j];
		perm[j] = t;
	}
}

/* The epoch output index of block k's first output inside the piece. */
static uint64_t block_out(const walk *wk, uint64_t k)
{
	uint64_t first = k * wk->w;

	return wk->out_base + (first > wk->begin ? first - wk->begin : 0);
}

/* A batch slot for run step r: the last one taken when the previous
 * block ended inside that step, else a new one at the tail of the open
 * list.  @return NULL when the loader halts (l->mu not held). */
static batch_slot *step_slot(pf_loader *l, pf_io *io, const walk *wk, uint64_t j)
{
	const epoch_run *er = wk->er;
	uint64_t r = wk->rstep0 + j;
	batch_slot *bs;

	if (l->last_slot && l->last_rstep == r)
		return l->last_slot;
	if (io_wait(l, io, slot_free, 0, &l->cv_batch) < 0) {
		pthread_mutex_unlock(&l->mu);
		return NULL;
	}
	bs = l->free_slots;
	l->free_slots = bs->next;
	bs->next = NULL;
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
	pthread_mutex_unlock(&l->mu);
	l->last_slot = bs;
	l->last_rstep = r;
	return bs;
}

/* Open the piece's block k: its ring entry, permutation and a slot for
 * each step its outputs reach inside max_steps.  @return 0, 1 when the
 * block starts at or past max_steps (it is opened, with no slots: the
 * walk ends after the current segment), or <0 with l->mu not held. */
static int open_block(pf_loader *l, pf_io *io, walk *wk, uint64_t k)
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
	ret = io_wait(l, io, ring_free, g, &l->cv_block);
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
	b->nslots = 0;
	b->perm = NULL;
	if (wk->er->permute && j1 > j0) {
		b->perm = l->mem_perm + (size_t)(g % l->nring) * l->wmax;
		block_perm(l, wk->er->epoch, wk->host, k, b->perm, n);
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

static int take_chunk(pf_loader *l, pf_io *io, const walk *wk, uint64_t pos, chunk **out)
{
	int ret = io_wait(l, io, chunk_free, 0, &l->cv_chunk);

	if (ret == 0) {
		chunk *c = l->free_chunks;

		l->free_chunks = c->next;
		l->chunks_out++;
		pf_error_clear(&c->ioerr);
		c->cbuf = -1;
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

/* A stream segment: sub-segments of at most PF_STREAM_CHUNK_ROWS
 * records, decoded in order through one shared stream state; each opens
 * only the blocks it reaches, so a long file never needs the whole
 * segment's blocks at once.  @return 0, 1 when max_steps was reached, or
 * <0. */
static int dispatch_stream(pf_loader *l, pf_io *io, walk *wk, pf_segment seg,
			   uint64_t pos, const int *file_slot)
{
	stream_state *ss;
	int over = 0, ret = io_wait(l, io, stream_free, 0, &l->cv_chunk);

	if (ret < 0) {
		pthread_mutex_unlock(&l->mu);
		return ret;
	}
	/* Taken and made active: io_wait() reads its first blocks from
	 * here on, while its sub-segments are dispatched. */
	ss = l->free_streams;
	l->free_streams = ss->next;
	ss->src = NULL;
	ss->busy = false;
	ss->next_first = seg.first;
	ss->slot = (uint32_t)file_slot[l->ds->units[seg.unit].file];
	ss->size = pf_io_file_size(io, ss->slot);
	ss->nblocks = ss->end_block = (ss->size + PF_READ_DEFAULT - 1) / PF_READ_DEFAULT;
	ss->next_read = ss->next_pull = 0;
	ss->reading = 0;
	ss->finished = false;
	ss->held = NULL;
	ss->wait_ns = 0;
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
		 * stream, which io_run() waits for). */
		c->ss_last = done == seg.count || over;
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
	int ret = take_chunk(l, io, wk, pos, &c);

	if (ret < 0)
		return ret;
	c->seg = seg;
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

/* Walk one piece: the segments of its stream that hold its blocks, each
 * cut to them; the blocks before the piece and after it are not read.
 * @return 0, 1 when max_steps is reached, or <0. */
static int walk_piece(pf_loader *l, pf_io *io, walk *wk, const pf_epoch_plan *plan,
		      const int *file_slot)
{
	uint64_t w = wk->w, pos = 0;
	uint64_t live_lo = wk->kfirst * w, live_hi = ((wk->end - 1) / w + 1) * w;
	int over = 0, ret = 0;

	live_hi = live_hi < wk->stream_len ? live_hi : wk->stream_len;
	for (size_t s = 0; s < plan->nseg && !over && ret >= 0 && pos < live_hi; s++) {
		pf_segment seg = plan->seg[s];
		uint64_t lo = pos, hi = pos + seg.count;

		pos = hi;
		if (hi <= live_lo)
			continue;
		if (lo < live_lo) {
			seg.first += live_lo - lo;
			lo = live_lo;
		}
		hi = hi < live_hi ? hi : live_hi;
		seg.count = hi - lo;
		if (l->cfg.max_steps &&
		    wk->rstep0 + block_out(wk, lo / w) / l->host_batch >= l->cfg.max_steps)
			return 1;
		if (l->ds->units[seg.unit].stream) {
			ret = over = dispatch_stream(l, io, wk, seg, lo, file_slot);
		} else {
			/* A frame spans at most the blocks the ring holds. */
			ret = over = open_through(l, io, wk, (hi - 1) / w);
			if (ret >= 0)
				ret = dispatch_frame(l, io, wk, seg, lo, file_slot);
		}
	}
	return ret < 0 ? ret : over;
}

/* A fresh epoch: this host's own stream up to its quota. */
static int fresh_epoch(pf_loader *l, uint32_t e, pf_epoch_plan *plan, epoch_run *er,
		       pf_piece *own)
{
	int ret = pf_plan_epoch(plan, l->ds, &l->topo, l->cfg.seed, e, l->cfg.shuffle,
				l->cfg.remainder);

	if (ret < 0)
		return ret;
	*own = (pf_piece){ l->topo.host_index, 0, plan->quota };
	*er = (epoch_run){
		.epoch = e, .origin = l->topo, .w = l->wblock, .permute = l->shuffle_rows,
		.pieces = own, .npieces = plan->quota ? 1 : 0,
		.steps = plan->quota / l->host_batch,
		.dropped = plan->share > plan->quota ? plan->share - plan->quota : 0,
		.wrapped = plan->stream_len > plan->share ? plan->stream_len - plan->share : 0,
	};
	return 0;
}

static void plan_failed(pf_loader *l, int ret, uint32_t host)
{
	pf_error err;

	pf_error_clear(&err);
	pf_error_set(&err, ret, PF_OFFSET_NONE, 0,
		     ret == -ERANGE ? "host %u has no records to wrap around: "
		     "fewer records than hosts" : "cannot plan epoch (host %u)", host);
	fail(l, &err, ret);
}

/* Walk an epoch's pieces, each through the plan of its origin host. */
static int walk_epoch(pf_loader *l, pf_io *io, const epoch_run *er, bool own_plan,
		      pf_epoch_plan *plan, uint64_t rstep0, uint64_t *gnext,
		      const int *file_slot)
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
					    l->cfg.shuffle, l->cfg.remainder);
			if (ret < 0) {
				plan_failed(l, ret, pc->host);
				return ret;
			}
			planned = pc->host;
		}
		wk.stream_len = plan->stream_len;
		wk.kfirst = wk.next_block = pc->begin / wk.w;
		wk.gbase = *gnext;
		ret = walk_piece(l, io, &wk, plan, file_slot);
		*gnext += wk.next_block - wk.kfirst;
		out_base += pc->end - pc->begin;
	}
	return ret;
}

static int io_run(pf_loader *l, pf_io *io, const int *file_slot)
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
		ret = walk_epoch(l, io, er, !resumed, &plan, rstep, &gnext, file_slot);
		rstep += er->steps;
		if (l->cfg.max_steps && rstep >= l->cfg.max_steps)
			break;
	}
	/* The streams still being decoded need their blocks: read them
	 * until the last is finished (unless the loader halts). */
	if (ret >= 0) {
		int r = io_wait(l, io, streams_idle, 0, &l->cv_chunk);

		pthread_mutex_unlock(&l->mu);
		if (r < 0 && r != -ECANCELED)
			ret = r;
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
		ret = io_run(l, io, file_slot);
		if (ret < 0) {
			pf_error_clear(&err);
			pf_error_set(&err, ret, PF_OFFSET_NONE, 0, "I/O engine failed: %s",
				     pf_strerror(ret));
			fail(l, &err, ret);
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

/* ------------------------------------------------------------------ */
/* Resuming from saved states                                           */

/* A state must be of this dataset and this order. */
static int state_matches(const pf_loader *l, const pf_state *s, size_t i, pf_error *err)
{
	if (s->fingerprint != l->ds->fingerprint || s->records != l->ds->records)
		return pf_error_set(err, -ESTALE, PF_OFFSET_NONE, 0,
				    "state %zu is of another dataset (%llu records, "
				    "fingerprint %016llx; these files: %llu records, %016llx)",
				    i, (unsigned long long)s->records,
				    (unsigned long long)s->fingerprint,
				    (unsigned long long)l->ds->records,
				    (unsigned long long)l->ds->fingerprint);
	if (s->seed != l->cfg.seed || s->shuffle != l->cfg.shuffle ||
	    s->remainder != (uint32_t)l->cfg.remainder)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "state %zu was saved with seed %llu, shuffle %s, remainder "
				    "%s; the loader is configured with seed %llu, shuffle %s, "
				    "remainder %s", i, (unsigned long long)s->seed,
				    s->shuffle ? "on" : "off", s->remainder ? "wrap" : "drop",
				    (unsigned long long)l->cfg.seed,
				    l->cfg.shuffle ? "on" : "off",
				    l->cfg.remainder ? "wrap" : "drop");
	if (!s->fresh) {
		uint64_t quota = pf_plan_steps(l->ds->records, &s->origin, l->cfg.remainder) *
				 s->origin.cores * s->origin.per_core_batch;

		for (size_t k = 0; k < s->npieces; k++)
			if (s->pieces[k].end > quota)
				return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
						    "state %zu: piece %zu ends at output %llu of "
						    "host %u's stream, which has %llu", i, k,
						    (unsigned long long)s->pieces[k].end,
						    s->pieces[k].host, (unsigned long long)quota);
	}
	return 0;
}

static bool same_topology(const pf_topology *a, const pf_topology *b)
{
	return a->num_hosts == b->num_hosts && a->cores == b->cores &&
	       a->per_core_batch == b->per_core_batch;
}

/* Cut [from, to) of the concatenation of src's pieces into dst. */
static size_t cut_pieces(const pf_piece *src, size_t n, uint64_t from, uint64_t to,
			 pf_piece *dst)
{
	size_t k = 0;
	uint64_t at = 0;

	for (size_t i = 0; i < n && at < to; i++) {
		uint64_t len = src[i].end - src[i].begin;
		uint64_t lo = from > at ? from - at : 0, hi = to - at < len ? to - at : len;

		if (lo < hi)
			dst[k++] = (pf_piece){ src[i].host, src[i].begin + lo, src[i].begin + hi };
		at += len;
	}
	return k;
}

/* The remaining records of the epoch, over all the old hosts' states in
 * host order, are cut among the new hosts as a fresh epoch's records
 * are: host h takes [M h / H, M (h + 1) / H) and delivers whole global
 * batches of it (the rest dropped, or wrapped from its start). */
static int resume_elastic(pf_loader *l, pf_state *st, size_t n, pf_error *err)
{
	const pf_state *s0 = &st[0];
	uint32_t hosts = s0->saver.num_hosts;
	pf_piece *all = NULL;
	size_t nall = 0, k;
	uint64_t m = 0, lo, hi, len, quota, global;
	uint64_t h = l->topo.host_index, nh = l->topo.num_hosts;
	uint64_t origin_quota = pf_plan_steps(l->ds->records, &s0->origin, l->cfg.remainder) *
				s0->origin.cores * s0->origin.per_core_batch;
	bool all_fresh = true;

	for (uint32_t want = 0; want < hosts; want++) {
		const pf_state *s = NULL;

		for (size_t i = 0; i < n; i++) {
			if (st[i].saver.host_index != want)
				continue;
			if (s)
				return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
						    "two states of host %u of %u", want, hosts);
			s = &st[i];
		}
		if (!s)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "resuming %u hosts as %llu needs the state of "
					    "every old host; host %u's is missing", hosts,
					    (unsigned long long)nh, want);
		/* A host between epochs has its whole stream of the next one
		 * left, in the topology it saved with. */
		if (!same_topology(&s->saver, &s0->saver) || s->epoch != s0->epoch ||
		    !same_topology(&s->origin, &s0->origin) ||
		    s->origin_block != s0->origin_block ||
		    s->origin_permute != s0->origin_permute)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "the states are not of one job at one epoch: host "
					    "%u is at epoch %u of %u hosts, host %u at epoch %u "
					    "of %u hosts", s0->saver.host_index, s0->epoch,
					    s0->saver.num_hosts, s->saver.host_index, s->epoch,
					    s->saver.num_hosts);
		all_fresh &= s->fresh;
		nall += s->fresh ? 1 : s->npieces;
		m += s->fresh ? origin_quota : pf_state_remaining(s);
		if (s->global_step > l->gstep0)
			l->gstep0 = s->global_step;
		if (s->step_in_epoch > l->resume.step0)
			l->resume.step0 = s->step_in_epoch;
	}
	l->start_epoch = s0->epoch;
	if (all_fresh) {
		l->resume.step0 = 0;
		return 0;
	}
	all = pf_calloc(nall ? nall : 1, sizeof(*all));
	if (!all)
		return -ENOMEM;
	k = 0;
	for (uint32_t want = 0; want < hosts; want++)
		for (size_t i = 0; i < n; i++)
			if (st[i].saver.host_index != want) {
				continue;
			} else if (st[i].fresh) {
				if (origin_quota)
					all[k++] = (pf_piece){ want, 0, origin_quota };
			} else {
				memcpy(all + k, st[i].pieces, st[i].npieces * sizeof(*all));
				k += st[i].npieces;
			}
	nall = k;
	lo = (uint64_t)((pf_u128)m * h / nh);
	hi = (uint64_t)((pf_u128)m * (h + 1) / nh);
	len = hi - lo;
	global = (uint64_t)l->host_batch * nh;
	quota = (l->cfg.remainder == PF_REMAINDER_WRAP ? (m + global - 1) / global
						       : m / global) * l->host_batch;
	if (quota > len && len == 0) {
		pf_free(all);
		return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
				    "host %llu has no records to wrap around: %llu records "
				    "left for %llu hosts", (unsigned long long)h,
				    (unsigned long long)m, (unsigned long long)nh);
	}
	/* At most nall pieces per pass over the share, and one more pass per
	 * len records the quota exceeds it by. */
	k = quota > len ? (size_t)((quota + len - 1) / len) : 1;
	l->resume.pieces = pf_calloc(nall * k + 1, sizeof(*l->resume.pieces));
	if (!l->resume.pieces) {
		pf_free(all);
		return -ENOMEM;
	}
	for (uint64_t got = 0; got < quota;) {
		uint64_t take = quota - got < len ? quota - got : len;

		l->resume.npieces += cut_pieces(all, nall, lo, lo + take,
						l->resume.pieces + l->resume.npieces);
		got += take;
	}
	pf_free(all);
	l->resume.origin = s0->origin;
	l->resume.w = s0->origin_block;
	l->resume.permute = s0->origin_permute;
	l->resume.steps = quota / l->host_batch;
	l->resume.dropped = len > quota ? len - quota : 0;
	l->resume.wrapped = quota > len ? quota - len : 0;
	l->resumed = true;
	return 0;
}

/* The remainder of the epoch a state of this topology is inside, for
 * the report of the run that ends it: the plan's, as a fresh epoch has
 * it, when the epoch's streams are this topology's; else (the epoch was
 * cut from another topology's streams) what the state carries. */
static int resumed_remainder(pf_loader *l, const pf_state *own, pf_error *err)
{
	pf_epoch_plan plan = { 0 };
	int ret;

	if (!same_topology(&own->origin, &l->topo)) {
		l->resume.dropped = own->epoch_dropped;
		l->resume.wrapped = own->epoch_wrapped;
		return 0;
	}
	ret = pf_plan_epoch(&plan, l->ds, &l->topo, l->cfg.seed, own->epoch, l->cfg.shuffle,
			    l->cfg.remainder);
	if (ret < 0) {
		pf_plan_release(&plan);
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				    "cannot plan epoch %u to resume it", own->epoch);
	}
	l->resume.dropped = plan.share > plan.quota ? plan.share - plan.quota : 0;
	l->resume.wrapped = plan.stream_len > plan.share ? plan.stream_len - plan.share : 0;
	pf_plan_release(&plan);
	return 0;
}

/* Restore from cfg->resume: this host's own state when the topology is
 * the one it was saved with (the batches are then those of a run never
 * stopped), else the states of every old host, merged. */
static int restore(pf_loader *l, pf_error *err)
{
	size_t n = l->cfg.nresume;
	pf_state *st = pf_calloc(n, sizeof(*st));
	const pf_state *own = NULL;
	bool this_topology = false;
	int ret = 0;

	if (!st)
		return -ENOMEM;
	for (size_t i = 0; i < n && ret == 0; i++) {
		ret = pf_state_decode(&st[i], l->cfg.resume[i].data, l->cfg.resume[i].len, err);
		if (ret < 0) {
			char msg[sizeof(err->msg)];

			snprintf(msg, sizeof(msg), "state %zu: %.*s", i,
				 (int)sizeof(msg) - 32, err->msg);
			memcpy(err->msg, msg, sizeof(msg));
			break;
		}
		ret = state_matches(l, &st[i], i, err);
	}
	for (size_t i = 0; i < n && ret == 0; i++) {
		this_topology |= same_topology(&st[i].saver, &l->topo);
		if (same_topology(&st[i].saver, &l->topo) &&
		    st[i].saver.host_index == l->topo.host_index)
			own = &st[i];
	}
	if (ret == 0 && this_topology && !own)
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "the states are of this topology (%u hosts, %u x %u), "
				   "but none is host %u's", l->topo.num_hosts, l->topo.cores,
				   l->topo.per_core_batch, l->topo.host_index);
	if (ret == 0 && own) {
		l->start_epoch = own->epoch;
		l->gstep0 = own->global_step;
		if (!own->fresh) {
			uint64_t left = pf_state_remaining(own);

			l->resume = (epoch_run){
				.epoch = own->epoch, .origin = own->origin,
				.w = own->origin_block, .permute = own->origin_permute,
				.npieces = own->npieces, .steps = left / l->host_batch,
				.step0 = own->step_in_epoch,
			};
			l->resume.pieces = pf_calloc(own->npieces + 1, sizeof(*own->pieces));
			if (!l->resume.pieces)
				ret = -ENOMEM;
			else
				memcpy(l->resume.pieces, own->pieces,
				       own->npieces * sizeof(*own->pieces));
			if (left % l->host_batch)
				ret = pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
						   "state of host %u leaves %llu records, not "
						   "whole batches of %u", own->saver.host_index,
						   (unsigned long long)left, l->host_batch);
			if (ret == 0)
				ret = resumed_remainder(l, own, err);
			l->resumed = true;
		}
	} else if (ret == 0) {
		ret = resume_elastic(l, st, n, err);
	}
	if (ret == 0 && l->resumed)
		l->resume.epoch = l->start_epoch;
	for (size_t i = 0; i < n; i++)
		pf_state_release(&st[i]);
	pf_free(st);
	return ret;
}

/* Slots one block of the resumed epoch can touch: W / B when its pieces
 * start on whole batches, else up to two more (a step shared with the
 * block before and one with the block after). */
static uint32_t resume_spb(const pf_loader *l)
{
	const epoch_run *er = &l->resume;
	bool aligned = er->w % l->host_batch == 0;
	uint64_t out = 0;

	for (size_t i = 0; i < er->npieces && aligned; i++) {
		aligned = er->pieces[i].begin % l->host_batch == 0 && out % l->host_batch == 0;
		out += er->pieces[i].end - er->pieces[i].begin;
	}
	return er->w / l->host_batch + (aligned ? 0 : 2);
}

/* ------------------------------------------------------------------ */
/* Creation: the memory plan                                            */

typedef struct mem_plan {
	size_t cbufs, sbufs, decode, batches, perm;
} mem_plan;

static size_t plan_total(const mem_plan *p)
{
	return p->cbufs + p->sbufs + p->decode + p->batches + p->perm;
}

/* The largest segment a chunk can carry decides how many blocks one read
 * can touch; the slots must cover the blocks of `lookahead` segments at
 * once, plus what the consumer may hold, or the I/O thread could wait for
 * a slot that only its next read would free.  One segment is the least
 * that works; with it, a shuffle window of a few host batches (or none)
 * let the I/O thread read only one frame past the block being drained,
 * and one of two decoders sat idle (1.3 M against 2.7 M records/s with
 * no shuffle, 250,000 token records, 2 threads).  The ring (cheap) has
 * slack. */
static void plan_sizes(pf_loader *l, unsigned lookahead)
{
	const pf_dataset *ds = l->ds;
	uint64_t maxseg = ds->max_unit_records;
	uint32_t wmin = l->wblock;
	uint64_t span;

	l->wmax = l->wblock;
	l->spb = l->wblock / l->host_batch;
	if (l->resumed) {
		uint32_t spb = resume_spb(l);

		wmin = l->resume.w < wmin ? l->resume.w : wmin;
		l->wmax = l->resume.w > l->wmax ? l->resume.w : l->wmax;
		l->spb = spb > l->spb ? spb : l->spb;
	}
	if (ds->any_stream && maxseg < PF_STREAM_CHUNK_ROWS)
		maxseg = PF_STREAM_CHUNK_ROWS;
	span = (lookahead * maxseg + wmin - 1) / wmin + 1;
	l->nring = (uint32_t)span + 2;
	l->nslots = (unsigned)(span * l->spb) + l->cfg.prefetch + 1;
}

/* The slots and shuffle permutations for `lookahead` segments. */
static void plan_blocks(pf_loader *l, mem_plan *p, unsigned lookahead)
{
	plan_sizes(l, lookahead);
	p->batches = (size_t)l->nslots * l->topo.cores * l->block_bytes;
	p->perm = l->shuffle_rows || (l->resumed && l->resume.permute)
		  ? (size_t)l->nring * l->wmax * sizeof(uint32_t) : 0;
}

static int plan_memory(pf_loader *l, mem_plan *p, pf_error *err)
{
	const pf_dataset *ds = l->ds;
	size_t budget = l->cfg.memory_budget;
	unsigned depth = l->cfg.io_depth;
	uint64_t arena_rec = ds->max_usize > ds->max_stream_record ? ds->max_usize
								   : ds->max_stream_record;

	l->cbuf_bytes = round_up(ds->max_csize ? ds->max_csize : 1, PF_ALIGN);
	/* Streams read at once: one per worker, and the next one, whose
	 * first blocks are read while the workers decode; each with
	 * PF_STREAM_BUFS blocks. */
	l->nstreams = l->nworkers + 1;
	p->sbufs = ds->any_stream ? (size_t)l->nstreams * PF_STREAM_BUFS * PF_READ_DEFAULT : 0;
	p->decode = (size_t)l->nworkers * (ds->max_usize + PF_ARENA_BYTES_FOR(arena_rec));
	/* A segment per worker and two more in flight; where the budget has
	 * no room for that, the least that works. */
	plan_blocks(l, p, l->nworkers + 2);
	l->ncbufs = ds->max_csize ? depth + l->nworkers : 0;
	p->cbufs = (size_t)l->ncbufs * l->cbuf_bytes;
	if (plan_total(p) > budget)
		plan_blocks(l, p, 1);
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
			"(read buffers %zu, stream buffers %zu (%u streams x %u x %u KiB), "
			"decode %zu, batch slots %zu (%u of %zu KiB), shuffle %zu MiB); "
			"a smaller shuffle window or batch needs fewer slots, and fewer "
			"threads fewer stream buffers", budget >> 20,
			(plan_total(p) + (1u << 20) - 1) >> 20, p->cbufs >> 20,
			p->sbufs >> 20, p->sbufs ? l->nstreams : 0, PF_STREAM_BUFS,
			PF_READ_DEFAULT >> 10, p->decode >> 20, p->batches >> 20, l->nslots,
			((size_t)l->topo.cores * l->block_bytes) >> 10, p->perm >> 20);
	return 0;
}

static int setup_slot(pf_loader *l, batch_slot *s)
{
	s->core = pf_calloc(l->topo.cores, sizeof(*s->core));
	s->tensors = pf_calloc((size_t)l->topo.cores * l->spec.n, sizeof(*s->tensors));
	s->valid = pf_malloc(l->host_batch);
	if (!s->core || !s->tensors || !s->valid)
		return -ENOMEM;
	memset(s->valid, 1, l->host_batch);
	for (uint32_t c = 0; c < l->topo.cores; c++) {
		pf_core_batch *cb = &s->core[c];

		cb->block = s->mem + (size_t)c * l->block_bytes;
		cb->block_bytes = l->block_bytes;
		cb->tensors = &s->tensors[(size_t)c * l->spec.n];
		cb->ntensors = l->spec.n;
		cb->valid = s->valid + (size_t)c * l->topo.per_core_batch;
		cb->nvalid = l->topo.per_core_batch;
		for (uint32_t f = 0; f < l->spec.n; f++) {
			size_t end = l->toff[f] + l->fbytes[f] * l->topo.per_core_batch;
			size_t next = f + 1 < l->spec.n ? l->toff[f + 1] : l->block_bytes;

			/* Rows are written whole, every time; the alignment gap
			 * after a tensor never is, and a pool kept from another
			 * loader (pool.c) may hold anything there. */
			memset((uint8_t *)cb->block + end, 0, next - end);
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
	l->toff = pf_calloc(l->spec.n, sizeof(*l->toff));
	l->fbytes = pf_calloc(l->spec.n, sizeof(*l->fbytes));
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

	l->chunks = pf_calloc(l->nchunks, sizeof(*l->chunks));
	l->streams = pf_calloc(l->nstreams, sizeof(*l->streams));
	l->mem_sbufs = pf_pool_alloc(p.sbufs);
	l->sbufs_size = p.sbufs;
	l->free_cbuf = pf_calloc(l->ncbufs ? l->ncbufs : 1, sizeof(*l->free_cbuf));
	l->ring = pf_calloc(l->nring, sizeof(*l->ring));
	l->mem_slotptr = pf_calloc((size_t)l->nring * l->spb, sizeof(*l->mem_slotptr));
	l->mem_cbufs = pf_pool_alloc(p.cbufs);
	l->cbufs_size = p.cbufs;
	l->slots = pf_calloc(l->nslots, sizeof(*l->slots));
	l->mem_batches = pf_pool_alloc(p.batches);
	l->batches_size = p.batches;
	l->mem_perm = p.perm ? pf_malloc(p.perm) : NULL;
	if (!l->chunks || !l->streams || !l->free_cbuf || !l->ring || !l->mem_slotptr ||
	    (p.cbufs && !l->mem_cbufs) || (p.sbufs && !l->mem_sbufs) || !l->slots ||
	    (p.batches && !l->mem_batches) || (p.perm && !l->mem_perm))
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "cannot allocate %zu MiB of pools", plan_total(&p) >> 20);
	for (unsigned i = 0; i < l->nchunks; i++) {
		l->chunks[i].next = l->free_chunks;
		l->free_chunks = &l->chunks[i];
	}
	for (unsigned i = 0; i < l->nstreams; i++) {
		stream_state *ss = &l->streams[i];

		ss->l = l;
		for (unsigned j = 0; j < PF_STREAM_BUFS && l->mem_sbufs; j++) {
			ss->buf[j].ss = ss;
			ss->buf[j].mem = l->mem_sbufs +
					 ((size_t)i * PF_STREAM_BUFS + j) * PF_READ_DEFAULT;
		}
		ss->next = l->free_streams;
		l->free_streams = ss;
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
		w->tally = pf_calloc((size_t)l->nring * l->spb, sizeof(*w->tally));
		w->touched = pf_calloc((size_t)l->nring * l->spb, sizeof(*w->touched));
		if (!w->tally || !w->touched ||
		    pf_arena_init(&w->arena, PF_ARENA_BYTES_FOR(arena_rec)) < 0)
			return -ENOMEM;
		if (!ds->max_csize)
			continue;	/* only stream files: no frames */
		w->ubuf = pf_malloc(ds->max_usize);
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

	pf_error_clear(err);
	if (!err) {
		pf_error_clear(&local);
		err = &local;
	}
	if (!cfg || !cfg->npaths || !cfg->features || !cfg->per_core_batch)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the loader needs paths, a feature spec and a per-core batch");
	l = pf_calloc(1, sizeof(*l));
	if (!l)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory creating the loader");
	l->cfg = *cfg;
	l->qfd = -1;
	pf_error_clear(&l->err);
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv_chunk, NULL);
	pthread_cond_init(&l->cv_cbuf, NULL);
	pthread_cond_init(&l->cv_decode, NULL);
	pthread_cond_init(&l->cv_block, NULL);
	pthread_cond_init(&l->cv_batch, NULL);
	pthread_cond_init(&l->cv_ready, NULL);
	pthread_cond_init(&l->cv_init, NULL);
	pthread_cond_init(&l->cv_stream, NULL);

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

	ret = pf_spec_parse(&l->spec, cfg->features, err);
	if (ret < 0)
		goto fail;
	pf_io_totals_get(&l->totals0);
	if (cfg->io_faults || cfg->io_retries || cfg->io_retry_backoff_us || cfg->io_timeout_ms) {
		pf_io_config pol = { .faults = cfg->io_faults, .retries = cfg->io_retries,
				     .retry_backoff_us = cfg->io_retry_backoff_us,
				     .timeout_ms = cfg->io_timeout_ms };

		/* pf_file_pread() reads the index tails and stream files: the
		 * loader's policy governs them while it lives, and is taken
		 * back by pf_loader_free(). */
		ret = pf_file_policy_push(&l->file_policy, &pol, err);
		if (ret < 0)
			goto fail;
	}
	if (cfg->on_corrupt == PF_CORRUPT_SKIP && cfg->quarantine) {
		l->qfd = open(cfg->quarantine, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (l->qfd < 0) {
			ret = pf_error_set(err, -errno, PF_OFFSET_NONE, 0,
					   "cannot open the quarantine log: %s",
					   strerror(errno));
			pf_error_set_file(err, cfg->quarantine);
			goto fail;
		}
	}
	{
		pf_source_config scfg = {
			.max_record_size = l->cfg.max_record_size, .regions = cfg->regions,
			.on_corrupt = cfg->on_corrupt, .on_drop = open_drop, .on_drop_ctx = l,
		};

		ret = cfg->ignore_manifest
			? pf_dataset_open_shards(&l->ds, cfg->paths, cfg->npaths, &scfg, err)
			: pf_dataset_open(&l->ds, cfg->paths, cfg->npaths, &scfg, err);
	}
	if (ret < 0) {
		if (l->failed)
			*err = l->err;	/* the corrupt-data budget, or the log */
		goto fail;
	}
	/* A spec feature the shards' records lack is a mistake in the spec
	 * (a misspelled name): say so now, not as padding or at the first
	 * record that lacks it. */
	for (size_t i = 0; i < l->ds->nfiles; i++) {
		const pf_shard_index *ix = l->ds->index[i];

		if (!ix)
			continue;
		ret = pf_spec_check_schema(&l->spec, pf_shard_index_schema(ix, 0),
					   pf_shard_index_schema_count(ix),
					   pf_shard_index_records(ix), l->ds->paths[i], "shard's",
					   err);
		if (ret < 0)
			goto fail;
	}
	/* From a manifest: its schema, of every indexed shard merged. */
	if (l->ds->manifest) {
		ret = pf_spec_check_schema(&l->spec, pf_manifest_schema(l->ds->manifest, 0),
					   pf_manifest_schema_count(l->ds->manifest),
					   pf_manifest_schema_records(l->ds->manifest),
					   l->ds->manifest_path, "manifest's", err);
		if (ret < 0)
			goto fail;
	}
	/* A dataset that cannot fill one global batch would give no step at
	 * all: a mistake (the wrong directory, or a topology too large for
	 * a small test set) best said now.  Wrap fills a host's step from the
	 * start of its share, so it needs a record on every host. */
	{
		uint64_t global = l->host_batch * l->topo.num_hosts;

		if (l->ds->records == 0 ||
		    (l->ds->records < global && cfg->remainder != PF_REMAINDER_WRAP)) {
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "the dataset holds %llu records, fewer than one global "
					   "batch of %llu (per_core_batch %u x %u cores x %u hosts)%s",
					   (unsigned long long)l->ds->records,
					   (unsigned long long)global, l->topo.per_core_batch,
					   l->topo.cores, l->topo.num_hosts,
					   l->ds->records ? ": no step could be made (remainder=wrap "
					   "would repeat records to fill one)" : "");
			goto fail;
		}
		if (l->ds->records < l->topo.num_hosts) {
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "the dataset holds %llu records, fewer than the %u hosts: "
					   "with remainder=wrap every host needs one to wrap around",
					   (unsigned long long)l->ds->records, l->topo.num_hosts);
			goto fail;
		}
	}
	l->steps_per_epoch = pf_plan_steps(l->ds->records, &l->topo, cfg->remainder);
	l->m.records_per_epoch = l->ds->records;
	l->m.steps_per_epoch = l->steps_per_epoch;
	if (cfg->nresume) {
		if (!cfg->resume) {
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "nresume is %zu but resume is NULL", cfg->nresume);
			goto fail;
		}
		ret = restore(l, err);
		if (ret < 0)
			goto fail;
	}
	l->workers = pf_calloc(l->nworkers, sizeof(*l->workers));
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

/* A deadline timeout_ns from now on the clock cv_ready waits with
 * (CLOCK_REALTIME, the default of pthread_cond_init). */
static struct timespec deadline_in(uint64_t timeout_ns)
{
	struct timespec ts;
	uint64_t ns;

	clock_gettime(CLOCK_REALTIME, &ts);
	ns = (uint64_t)ts.tv_nsec + timeout_ns % 1000000000u;
	ts.tv_sec += (time_t)(timeout_ns / 1000000000u + ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	return ts;
}

int pf_loader_next(pf_loader *l, pf_batch **out)
{
	return pf_loader_next_timed(l, out, UINT64_MAX);
}

int pf_loader_next_timed(pf_loader *l, pf_batch **out, uint64_t timeout_ns)
{
	uint64_t t0 = now_ns(), dt;
	unsigned fill = 0;
	batch_slot *b;
	struct timespec deadline = { 0 };

	pthread_mutex_lock(&l->mu);
	/* A caller's mistake changes nothing: no batch is taken, the loader
	 * goes on, and the call after a release is the one this should
	 * have been. */
	l->misused = l->held > l->cfg.prefetch;
	if (l->misused) {
		pf_error_clear(&l->misuse);
		pf_error_set(&l->misuse, -EBUSY, PF_OFFSET_NONE, 0,
			     "%u batches held, at most prefetch + 1 = %u; release one first",
			     l->held, l->cfg.prefetch + 1);
		pthread_mutex_unlock(&l->mu);
		return -EBUSY;
	}
	if (timeout_ns != UINT64_MAX && timeout_ns)
		deadline = deadline_in(timeout_ns);
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
		if (timeout_ns == UINT64_MAX) {
			pthread_cond_wait(&l->cv_ready, &l->mu);
			continue;
		}
		/* Nothing is taken and nothing counted: the next call goes on
		 * where this one stopped. */
		if (timeout_ns == 0 ||
		    pthread_cond_timedwait(&l->cv_ready, &l->mu, &deadline) == ETIMEDOUT) {
			pthread_mutex_unlock(&l->mu);
			return -ETIMEDOUT;
		}
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
	if (__atomic_load_n(&b->holes, __ATOMIC_RELAXED)) {
		for (uint32_t c = 0; c < l->topo.cores; c++) {
			pf_core_batch *cb = &b->core[c];

			cb->nvalid = 0;
			for (uint32_t i = 0; i < l->topo.per_core_batch; i++)
				cb->nvalid += cb->valid[i];
			l->m.holes += l->topo.per_core_batch - cb->nvalid;
			l->m.records -= l->topo.per_core_batch - cb->nvalid;
		}
	}
	if (!l->c_any || b->batch.epoch != l->c_epoch) {
		l->c_epoch = b->batch.epoch;
		l->c_delivered = 0;
	}
	l->c_any = true;
	l->c_delivered += l->host_batch;
	l->c_last = b->batch;
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

/* The state of the consumer's position, under l->mu.  pieces: room for
 * the pieces of the epoch in progress (one for a fresh epoch). */
static void consumer_state(const pf_loader *l, pf_state *s, pf_piece *pieces)
{
	const epoch_run *er = l->resumed ? &l->resume : NULL;
	pf_piece own = { 0 };
	uint64_t skip;

	*s = (pf_state){
		.fingerprint = l->ds->fingerprint, .records = l->ds->records,
		.seed = l->cfg.seed, .shuffle = l->cfg.shuffle,
		.remainder = (uint32_t)l->cfg.remainder, .saver = l->topo,
		.block = l->wblock, .epoch = l->start_epoch,
		.global_step = l->gstep0, .origin = l->topo,
		.origin_block = l->wblock, .origin_permute = l->shuffle_rows,
	};
	if (!l->c_any) {
		/* Nothing handed out: where the run started (a fresh epoch
		 * as this host's whole stream, so that it merges with states
		 * of hosts that are inside the epoch). */
		skip = 0;
		s->step_in_epoch = er ? er->step0 : 0;
	} else if (l->c_last.epoch_end) {
		/* Between epochs: the next starts in the restoring topology. */
		s->epoch = l->c_epoch + 1;
		s->fresh = true;
		s->global_step = l->c_last.global_step + 1;
		return;
	} else {
		if (!er || l->c_epoch != er->epoch)
			er = NULL;
		skip = l->c_delivered;
		s->epoch = l->c_epoch;
		s->step_in_epoch = l->c_last.step + 1;
		s->global_step = l->c_last.global_step + 1;
	}
	if (!er) {
		own = (pf_piece){ l->topo.host_index, 0, l->steps_per_epoch * l->host_batch };
	} else {
		s->origin = er->origin;
		s->origin_block = er->w;
		s->origin_permute = er->permute;
		if (!same_topology(&er->origin, &l->topo)) {
			s->epoch_dropped = er->dropped;
			s->epoch_wrapped = er->wrapped;
		}
	}
	s->pieces = pieces;
	for (size_t i = 0, n = er ? er->npieces : 1; i < n; i++) {
		pf_piece p = er ? er->pieces[i] : own;
		uint64_t len = p.end - p.begin;

		if (skip >= len) {	/* also drops an empty own piece */
			skip -= len;
			continue;
		}
		p.begin += skip;
		skip = 0;
		s->pieces[s->npieces++] = p;
	}
}

int64_t pf_loader_save_state(pf_loader *l, void *buf, size_t cap)
{
	pf_piece *pieces = pf_calloc(l->resume.npieces + 1, sizeof(*pieces));
	pf_state s;
	int64_t n;

	if (!pieces)
		return -ENOMEM;
	pthread_mutex_lock(&l->mu);
	consumer_state(l, &s, pieces);
	pthread_mutex_unlock(&l->mu);
	n = pf_state_encode(&s, buf, cap);
	pf_free(pieces);
	return n;
}

const pf_error *pf_loader_last_error(const pf_loader *l)
{
	if (l->misused)
		return &l->misuse;
	return l->failed ? &l->err : NULL;
}

void pf_loader_get_metrics(const pf_loader *l, pf_loader_metrics *m)
{
	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	*m = l->m;
	{
		pf_io_totals t;

		pf_io_totals_get(&t);
		m->io_retries = t.retries - l->totals0.retries;
		m->io_faults = t.faults - l->totals0.faults;
		m->io_timeouts = t.timeouts - l->totals0.timeouts;
	}
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
		pf_free(l->workers[i].ubuf);
		pf_free(l->workers[i].tally);
		pf_free(l->workers[i].touched);
		pf_frame_decoder_free(l->workers[i].fdec);
		pf_arena_release(&l->workers[i].arena);
	}
	if (l->io_started)
		pthread_join(l->io_thread, NULL);
	for (unsigned i = 0; l->slots && i < l->nslots; i++) {
		pf_free(l->slots[i].core);
		pf_free(l->slots[i].tensors);
		pf_free(l->slots[i].valid);
	}
	for (unsigned i = 0; l->streams && i < l->nstreams; i++)
		pf_source_close(l->streams[i].src);
	pf_free(l->workers);
	pf_free(l->slots);
	pf_free(l->chunks);
	pf_free(l->streams);
	pf_free(l->ring);
	pf_free(l->mem_slotptr);
	pf_free(l->mem_perm);
	pf_pool_free(l->mem_batches, l->batches_size, l->cfg.keep_pools);
	if (l->io_left) {
		pf_pool_unmap(l->mem_cbufs, l->cbufs_size);
		pf_pool_unmap(l->mem_sbufs, l->sbufs_size);
	} else {
		pf_pool_free(l->mem_cbufs, l->cbufs_size, l->cfg.keep_pools);
		pf_pool_free(l->mem_sbufs, l->sbufs_size, l->cfg.keep_pools);
	}
	pf_file_policy_pop(&l->file_policy);
	pf_free(l->free_cbuf);
	pf_free(l->toff);
	pf_free(l->fbytes);
	pf_free(l->resume.pieces);
	if (l->qfd >= 0)
		close(l->qfd);
	pf_dataset_free(l->ds);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv_chunk);
	pthread_cond_destroy(&l->cv_cbuf);
	pthread_cond_destroy(&l->cv_decode);
	pthread_cond_destroy(&l->cv_block);
	pthread_cond_destroy(&l->cv_batch);
	pthread_cond_destroy(&l->cv_ready);
	pthread_cond_destroy(&l->cv_init);
	pthread_cond_destroy(&l->cv_stream);
	pf_free(l);
}
