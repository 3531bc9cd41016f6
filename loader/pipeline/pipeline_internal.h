/* SPDX-License-Identifier: Apache-2.0 */
/* Private to loader/: the pipeline room (loader/pipeline/): one loader of
 * one dataset (struct pf_pipe and what its threads share) and the seams
 * between the files that make it.  Above the plan (which it reads) and
 * the dataset (which it opens); under the packing loader, the mixture and
 * the public calls, which reach it by name (pipe.c's pf_pipe_*()) or
 * through its face (pf_pipe_ops); it reaches up to none of them, but
 * through what they pass down: a mixture's row sink, packing's record
 * hook, a decode pool.
 *
 * The pipeline: an I/O thread and decode workers that write every record
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
 *                  PF_READ_DEFAULT bytes, a few ahead of their decoding,
 *                  each block pushed to its stream when it is in.
 *   decode workers take completed reads: frame CRC, zstd, TFRecord
 *                  framing, decode and preprocessing of each record into
 *                  its row of its slot; a slot is ready when all its rows
 *                  are written.  Stream files (no index) are cut into
 *                  sub-segments that workers decode in order, one at a
 *                  time per file, feeding the file's blocks in order to
 *                  its pf_source (push mode).  A sub-segment whose next
 *                  block is not in yet is parked on its stream, and the
 *                  I/O thread queues it again with the block: workers
 *                  never wait for a read, and data flows one way, from
 *                  the I/O thread to the workers.
 *   consumer       pf_pipe_next() hands out slots in step order.
 *
 * The window of records as read (l->staged: image features, whose rows
 * take more than their stored bytes; budget.c decides).  The slots of a
 * block's steps have no rows: a worker copies each record's bytes into
 * pages of the window the I/O thread reserved for its chunk (in the
 * plan's order), and once every record of a step is in, the workers take
 * its rows in tasks, in step order, decoding each (its image too)
 * straight into a row block the slot takes then and gives back when the
 * consumer releases it.  The same records into the same rows: the
 * batches are the same either way; the window's memory follows the
 * records' stored bytes, not their rows'.
 *
 * Every buffer comes from pools sized at creation from the memory
 * budget (what the config leaves to the loader fitted to it: budget.c);
 * after start-up the hot path does not allocate (except that a stream
 * file's decoder, pf_source, is made when its turn comes).
 *
 * The files, and who calls whom across them:
 *
 *   pipe.c       a pipeline's life: pf_pipe_create() (checks the config,
 *                opens the dataset, calls pf_resume_restore() and
 *                pf_budget_setup(), starts pf_pipe_io_main() and
 *                pf_pipe_worker_main()), pf_pipe_next/release/free,
 *                the metrics, its face (pf_pipe_ops).
 *   wake.c       the threads woken, failed and halted: pf_pipe_fail*(),
 *                pf_pipe_wake_io(), pf_decode_signal(), which every
 *                thread calls (and which call none of the files here).
 *   budget.c     the memory budget: where the window's records wait and
 *                a default window fitted to it (pf_budget_fit()); pool
 *                sizes from it, the defaults left cut to it
 *                (pf_budget_setup()), the pools and batch slots built,
 *                and grown as they are needed (pf_budget_cbuf_ready(),
 *                pf_budget_grow_slots()).  Asks resume.c how many slots a
 *                resumed block can touch (pf_resume_spb()).
 *   autotune.c   threads, reads in flight and prefetch where the config
 *                says PF_AUTO: chosen from the reads' latency, the decode
 *                time and the consumer's gaps (pf_tune_*()), each choice
 *                with its reason (pf_pipe_tuning()).
 *   resume.c     checkpoints in the loader: a run started from saved
 *                states (pf_resume_restore()), and the consumer's position
 *                saved (pf_pipe_save_state()).  The blob's encoding is
 *                loader/plan/state.c's; the epoch's plan loader/plan/'s.
 *   io_thread.c  the I/O thread: its engine (pf_pipe_io_main()), reads
 *                and opens in flight (pf_reads_submit(); pf_reads_reap(),
 *                which hands reads to pf_decode_queue() and opens to
 *                files.c; pf_reads_wait(), which the schedule waits in and
 *                which submits the stream files' next blocks: which ones
 *                is streams.c's).
 *   streams.c    the blocks of the stream files being decoded: which to
 *                read next (pf_stream_pump(), for pf_reads_wait()), each
 *                pushed to its stream when read (pf_stream_read_done(),
 *                from pf_reads_reap()); the worker's side: a block fed to
 *                the stream's source (pf_stream_feed()), a sub-segment
 *                parked for the next (pf_stream_park()), the stream done
 *                (pf_stream_finish()), its file given back by the I/O
 *                thread (pf_stream_free_retired()).
 *   files.c      the dataset's files in the engine: opened a bounded
 *                number ahead of the schedule (pf_files_want()), waited
 *                for when a segment is dispatched (pf_files_take()),
 *                checked against the plan when opened, closed when no
 *                read wants them (pf_files_release()).
 *   schedule.c   what the I/O thread reads, in which order
 *                (pf_schedule_run()): epochs, pieces, segments (wanted
 *                ahead, then dispatched); shuffle blocks opened with
 *                their permutation and batch slots; chunks dispatched to
 *                the decoders.
 *   frame_cache.c  the global shuffle's decompressed frames: an entry per
 *                frame kept, taken by the I/O thread as it dispatches a
 *                segment (pf_fcache_take(): a hit, a frame to load, or
 *                none), replaced by each entry's next use in the plan.
 *   decode.c     the decode workers (pf_pipe_worker_main()) and their
 *                queue (pf_decode_queue()): frames and stream sub-segments
 *                into records, each handed to placement; the skip mode's
 *                lost frames.
 *   placement.c  one record (or hole) into its row of its batch slot
 *                (pf_place_record(), pf_place_hole()); the rows counted
 *                into the slots (pf_place_flush()) and the shuffle blocks
 *                (pf_place_done()).
 *   drops.c      corrupt data in skip mode: each drop counted against the
 *                budget and written to the quarantine log
 *                (pf_drop_report(), pf_drop_at_open()).
 *   images.c     image features decoded on the workers (transform/).
 *   window.c     the window of records as read (image features): each
 *                record's bytes copied into pages the I/O thread
 *                reserved for its chunk (schedule.c), held
 *                until its step's rows are decoded (placement.c's
 *                pf_place_rows(), tasks taken in step order by the
 *                workers: pf_window_take_task()) into a row block.
 *   series.c     the time series the consumer's thread samples.
 *   pool.c       the large pools' mappings, and the process's cache of them.
 */
#ifndef PF_PIPELINE_INTERNAL_H
#define PF_PIPELINE_INTERNAL_H

#include <pthread.h>

#include "file_policy_internal.h"
#include "loader_face.h"
#include "plan_internal.h"
#include "spec_internal.h"

typedef struct pf_pipe pf_pipe;

#define PF_ALIGN 4096u
#define PF_STREAM_CHUNK_ROWS 1024u
/* Read buffers per stream being read: the block its worker decodes and
 * the next one, read meanwhile. */
#define PF_STREAM_BUFS 2u

/* A record waiting in the window as read (window.c): where its bytes
 * start in the window's pages (they go on in the next pages of its
 * chunk's chain), and what an error at its decode names. */
typedef struct pf_wrec {
	uint64_t unit;		/* its frame */
	uint64_t index;		/* its number in its file */
	uint64_t offset;	/* its offset in the frame's decompressed bytes */
	uint32_t page, off;
	uint32_t len;		/* its bytes; PF_WREC_HOLE: a hole (skip mode) */
} pf_wrec;

typedef struct batch_slot {
	struct batch_slot *next;
	pf_batch batch;		/* handed to the consumer */
	pf_core_batch *core;
	pf_tensor *tensors;	/* cores x ntensors */
	uint8_t *mem;		/* its rows (l->staged: a row block of the
				   window's, NULL until its rows are taken) */
	uint8_t *valid;		/* cores x per_core_batch: 0 for a hole */
	bool holes;		/* a hole was placed since it was taken (atomic) */
	uint32_t filled;	/* rows written (atomic) */
	/* The window of records as read (l->staged, window.c): each row's
	 * record, the rows whose records are in (atomic), the rows taken to
	 * be decoded (l->mu), and its row block (-1: none). */
	pf_wrec *wrec;		/* [host_batch] */
	uint32_t staged;
	uint32_t taken;
	int32_t rowblock;
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
	uint32_t epoch;		/* the epoch it is of (images draw from it) */
	uint32_t *perm;		/* [W] output offset of input offset; NULL: identity */
	batch_slot **slot;	/* [spb] */
} sblock;

/* A read buffer of a stream file: block `block` of it (file bytes from
 * block x PF_READ_DEFAULT on), read by the I/O thread and pushed to the
 * stream.  FREE -> READING (submitted) -> READY (read, or failed) -> HELD
 * (fed to the stream's source) -> FREE (the source is done with it, or
 * the stream was finished). */
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
 * order into buf[] (next_read), fed in order to the source (next_feed). */
typedef struct stream_state {
	struct stream_state *next;	/* free list, or the active list */
	pf_pipe *l;
	pf_source *src;			/* opened by the first sub-segment */
	uint64_t next_first;		/* record the next sub-segment starts at */
	bool busy;			/* a worker is decoding from it */
	uint32_t slot;			/* the file in the I/O engine */
	uint64_t size, nblocks;
	uint64_t next_read, next_feed;
	uint64_t end_block;		/* the source is fed "end of file" here */
	unsigned reading;		/* reads in flight */
	bool finished;			/* its last sub-segment is done: no more reads */
	stream_buf *held;		/* the block fed to the source last */
	struct chunk *parked;		/* its sub-segment, waiting for block
					   next_feed */
	uint32_t file;			/* the dataset's file */
	stream_buf buf[PF_STREAM_BUFS];
} stream_state;

/* A dataset file in the I/O thread's engine (files.c). */
typedef struct pf_lazy_file {
	int32_t slot;		/* its index in the engine, or -1 */
	uint8_t state;		/* closed, opening, open (files.c) */
	bool pending;		/* waiting for room to start its open */
	bool idle;		/* on the idle list */
	bool direct_seen;	/* counted in files_direct */
	uint32_t ahead;		/* segments wanted and not yet dispatched */
	uint32_t busy;		/* its frame reads in flight and its streams */
	uint32_t idle_prev, idle_next;
} pf_lazy_file;

/* The dataset's files, opened ahead of the schedule (files.c); the I/O
 * thread's alone. */
typedef struct pf_files {
	pf_lazy_file *f;		/* [ds->nfiles] */
	unsigned ahead_max;		/* distinct files wanted ahead, at most */
	unsigned idle_max;		/* idle files kept open */
	unsigned ahead_files;		/* files with ahead > 0 */
	uint32_t *fifo;			/* the wanted segments' files, in order */
	unsigned fifo_cap, fifo_head, nfifo;
	uint32_t *pending;		/* files whose open waits for room */
	unsigned npending;
	pf_io_req *reqs;		/* [ahead_max + 1] opens in flight */
	uint32_t *free_reqs;
	unsigned nfree_reqs, opening;
	uint32_t idle_head, idle_tail;	/* oldest first */
	unsigned nidle;
	uint64_t opened;		/* opens completed */
	uint32_t direct;		/* files read with O_DIRECT */
	/* A manifest's tail checks: each open request's buffer for its
	 * file's tail (tail_cap bytes each, a pool mapping), or NULL. */
	uint8_t *tails;
	size_t tail_cap, tails_size;
} pf_files;

/* A decompressed frame of the global shuffle's cache (frame_cache.c):
 * its bytes, and where each of its records starts (offs[i], i up to its
 * records; offs[records] is the end). */
typedef struct pf_dframe {
	uint64_t unit;		/* its frame, UINT64_MAX: free (the I/O thread's) */
	uint64_t next_use;	/* plan index of its next segment (the I/O
				   thread's), UINT64_MAX: none */
	uint32_t pins;		/* dispatched segments not yet decoded (l->mu) */
	bool ready;		/* decompressed and indexed (l->mu) */
	size_t len;		/* decompressed bytes */
	uint8_t *mem;
	uint32_t *offs;
} pf_dframe;

typedef struct pf_fcache {
	pf_dframe *e;
	unsigned n;		/* entries (0: no cache) */
	uint32_t *map;		/* [ds->nunits] entry of a unit, UINT32_MAX: none */
	uint64_t *next;		/* [plan nseg] plan index of the next segment of
				   the same unit, UINT64_MAX: none */
	size_t next_cap;
	uint8_t *mem;		/* the entries' bytes, one mapping */
	size_t mem_size;
	bool off;		/* the plan walked now is too long for it */
} pf_fcache;

/* More slices of cached frames, decoded with a chunk's own (the frame
 * cache's hits come a few records each: one chunk carries several). */
#define PF_CHUNK_MORE 15u
typedef struct chunk_more {
	pf_segment seg;
	uint64_t pos, g0;
	pf_dframe *df;		/* ready when added */
} chunk_more;

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
	pf_dframe *df;		/* its frame's cache entry (with cbuf: to fill),
				   or NULL */
	chunk_more more[PF_CHUNK_MORE];	/* with df and no cbuf: more slices */
	unsigned nmore;
	uint64_t submit_ns;	/* when its read was submitted */
	/* l->staged: the window's pages reserved for its records by the I/O
	 * thread (window.c), a chain from pages to pages_tail. */
	uint32_t pages, pages_tail, npages;
} chunk;

typedef struct worker {
	pf_pipe *l;
	pthread_t thread;
	pf_frame_decoder *fdec;
	uint8_t *ubuf;
	pf_arena arena;
	uint8_t *dst[PF_SPEC_MAX_FEATURES];
	/* Image features (images.c): the decoder's scratch, and the
	 * worker's counts, added to the metrics with the chunk's. */
	pf_image_scratch image_scratch;
	uint64_t images, images_upscaled, image_ns;
	size_t image_scratch_counted;	/* of its cap, in the metrics */
	/* Rows written per slot during the current chunk, added to the
	 * slots' shared counts once at its end: one atomic per slot and
	 * chunk, not per record (two workers fill the same slots). */
	uint32_t *tally;	/* [nring x spb], by ring entry and step */
	uint32_t *touched;	/* tally indexes in use */
	uint32_t ntouched;
	bool started;
	/* l->staged (window.c): where the chunk being staged writes its next
	 * record's bytes (a page of its chain and the offset in it), and the
	 * pages the rows decoded free, given back together. */
	uint32_t wpage, woff;
	uint32_t *freed;	/* [window pages] */
	uint32_t nfreed;
} worker;

/* One epoch of this run: the pieces of origin streams this host
 * delivers, in order (the plan's pf_epoch_run: loader/plan/course.c
 * walks the same course to say which record each row holds). */
typedef pf_epoch_run epoch_run;

/* A mixture's decode threads, shared by its sources' loaders (decode.c):
 * thread i decodes with worker i of whichever member has a chunk, so the
 * mixture runs the threads asked for, not each source's share of them
 * rounded up (3 on 2 cores for 3 sources), and a source with work never
 * waits while another's thread has none.  Members are created with as
 * many workers as the pool has threads, none started, and each wakes
 * the pool where it wakes its own decoders (pf_decode_signal()). */
typedef struct pf_decode_pool pf_decode_pool;
typedef struct pf_pool_thread {
	pf_decode_pool *p;
	unsigned index;		/* its worker in every member */
} pf_pool_thread;
struct pf_decode_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;	/* a member has work, or stop */
	uint64_t seq;		/* wakes so far (atomic) */
	size_t next;		/* where the next scan starts (atomic) */
	bool stop, made;
	struct pf_pipe **members;
	size_t nmembers;
	pthread_t *threads;
	pf_pool_thread *args;
	unsigned nthreads, started;
};
/* Start threads over the members (each's pool set to p).  @return 0, or
 * <0 with err (pf_decode_pool_stop() then joins those started). */
int pf_decode_pool_start(pf_decode_pool *p, struct pf_pipe **members, size_t n,
			 unsigned threads, pf_error *err);
/* Stop and join them; the members must be halted first (or have no work
 * in flight worth finishing). */
void pf_decode_pool_stop(pf_decode_pool *p);
/* all: every sleeping thread (a stream's chunk freed, the end), else one
 * (a chunk queued). */
void pf_decode_pool_wake(pf_decode_pool *p, bool all);

/* Where a mixture wants a loader's rows (mixture.c): aim() puts the
 * feature rows' addresses of the loader's run record c (its run step x
 * host batch + row) into dst and says true, or says false (the row goes
 * into the loader's own slot).  Called by the decoders. */
typedef struct pf_row_sink {
	bool (*aim)(void *ctx, uint64_t c, uint8_t **dst);
	void *ctx;
} pf_row_sink;

/* Where a record planned ahead goes instead of its row (a packing
 * loader's inner loader, or a packed mixture's sources:
 * loader/pack/pack_direct.c), called by the decode threads: aim() points
 * the feature rows of dst (worker `worker`'s) at that worker's scratch
 * for the record at epoch output e of `epoch` (record c of the run, as a
 * row sink numbers them), and says its plan (NULL: not planned, decode
 * into the row); put(), after the worker decoded it there, copies it into
 * its packed rows.  Passed down by the room above (pf_pipe.record_hook),
 * which the pipeline never calls by name. */
typedef struct pf_record_hook {
	void *(*aim)(void *ctx, unsigned worker, uint8_t **dst, uint32_t epoch, uint64_t e,
		     uint64_t c);
	void (*put)(void *ctx, unsigned worker, void *plan);
	void *ctx;
} pf_record_hook;

/* The window of records as read (window.c): pages of PF_WINDOW_PAGE
 * bytes, each chunk's records copied into a chain of pages the I/O
 * thread reserved for it; a page goes back once every record on it is
 * decoded into its row.  And the row blocks the steps are decoded
 * into, taken in step order. */
#define PF_WINDOW_PAGE (16u << 10)
#define PF_WINDOW_NONE UINT32_MAX
#define PF_WREC_HOLE UINT32_MAX

typedef struct pf_window {
	uint8_t *mem;		/* npages x PF_WINDOW_PAGE, one mapping */
	size_t mem_size;
	uint32_t npages;
	uint32_t *next;		/* [npages] the next page of its chain */
	uint32_t *refs;		/* [npages] records on it not yet decoded (atomic) */
	uint32_t *free;		/* free pages, a stack (l->mu) */
	uint32_t nfree;
	uint32_t peak;		/* pages in use at once, at most */
	/* The step whose rows are taken next (in the open list; NULL: none
	 * yet), the tasks being decoded, the rows a task takes. */
	struct batch_slot *expand_next;
	unsigned expanding;
	uint32_t task_rows;
	/* Row blocks: nrows planned, rows_made made (in index order, as
	 * they are first needed), at most rows_limit in use (prefetch + 1
	 * held, two being decoded); the free ones, a stack. */
	unsigned nrows, rows_made, rows_limit, rows_used;
	uint32_t *free_rows;
	unsigned nfree_rows;
	pf_wrec *wrecs;		/* [nslots x host_batch] */
} pf_window;

/* A task of the window's decoders: rows [r0, r1) of slot s. */
typedef struct pf_wtask {
	struct batch_slot *s;
	uint32_t r0, r1;
} pf_wtask;

struct pf_pipe {
	/* The face the public calls reach it through (pf_pipe_ops). */
	pf_loader face;
	/* A mixture's source: where its rows go (atomic; NULL: its slots),
	 * and the most segments it reads ahead (0: its workers + 2). */
	const pf_row_sink *sink;
	unsigned lookahead;
	/* A mixture's source decoded by the mixture's threads (NULL: its
	 * own), set before it reads. */
	pf_decode_pool *pool;
	/* A mixture's source whose I/O thread waits, its ring made, until
	 * the mixture says how far its run goes (under mu). */
	bool gated;
	pf_loader_config cfg;
	pf_topology topo;
	pf_spec spec;
	/* Image features (images.c): their specs, and the spec of the other
	 * features (rowspec, feature k of it being spec feature rowmap[k]),
	 * decoded as before. */
	pf_spec_images images;
	pf_spec rowspec;
	size_t image_reserved;	/* image scratch in the budget, all workers */
	uint32_t rowmap[PF_SPEC_MAX_FEATURES];
	pf_dataset *ds;
	uint64_t steps_per_epoch;
	uint32_t epochs;
	uint32_t host_batch;	/* rows per host batch (B) */
	uint32_t wblock;	/* records per shuffle block (W, a multiple of B) */
	uint32_t wmax;		/* the largest W of the run (a resumed epoch's may differ) */
	uint32_t spb;		/* slots one block can touch */
	bool shuffle_rows;	/* permute inside blocks */
	uint32_t slice;		/* global shuffle: records per slice (0: none) */
	uint32_t group;		/* global shuffle: frames per group */

	/* Where the run starts: a fresh epoch, or a resumed one. */
	uint32_t start_epoch;
	uint64_t gstep0;	/* global step of the run's first batch */
	bool resumed;		/* start_epoch is `resume` */
	epoch_run resume;
	/* Where the run started before skip_steps moved it (skip.c): whose
	 * steps pf_loader_records_of() says from; and the steps the job's
	 * skip_steps skipped in all (its states' and this run's), which
	 * the states saved say. */
	pf_run_start which0;
	uint64_t skipped_total;

	/* The I/O thread's last slot: the next block may share its step. */
	uint64_t last_rstep;
	batch_slot *last_slot;

	/* Corrupt data in skip mode: the quarantine log, or -1; the first
	 * drop this host found (code 0: none), to name when the drops leave
	 * no step to make. */
	int qfd;
	pf_error first_drop;
	/* The process's read counters at creation (retries, faults and
	 * timeouts are those of every read path, pf_file_pread()'s too). */
	pf_io_totals totals0;

	/* What the consumer has been handed (for pf_pipe_save_state()). */
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
	/* The condition variable the I/O thread sleeps on (pf_reads_wait()),
	 * or NULL while it runs: what a stream's worker does (a buffer given
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
	/* Retired (decoded, no read in flight), their files not yet given
	 * back: the I/O thread does that (pf_reads_wait()), then frees them. */
	stream_state *retired;
	int *free_cbuf;
	unsigned nfree_cbuf;
	size_t cbuf_bytes;
	chunk *decode_q, *decode_tail;	/* waiting for a worker */
	sblock *ring;
	uint32_t nring;
	batch_slot *slots, *free_slots;
	batch_slot *open_head, *open_tail;	/* taken, in step order */
	unsigned nslots, held;
	/* The last pf_pipe_next() was a caller's mistake (one batch too
	 * many held): what pf_pipe_last_error() says until the next call.
	 * The consumer's thread only. */
	bool misused;
	pf_error misuse;
	pf_file_policy_scope file_policy;	/* the cfg's read policy, if any */
	size_t block_bytes;
	size_t *toff;			/* tensor offsets inside a core block */
	size_t *fbytes;			/* bytes per record of each feature */
	uint64_t memory_bytes;

	/* Records wait in the shuffle window as read, not as decoded rows
	 * (image features: budget.c decides, window.c holds them); the
	 * dataset's stored bytes as budget.c sizes the window from them. */
	bool staged;
	pf_window win;
	struct pf_stored *stored;
	/* A mixture's source (pf_pipe_opts.source): its rows may go
	 * where the mixture's sink says, as they are decoded. */
	bool source;
	/* The defaults cut to the budget (PF_FITTED_*), and what the
	 * window's fit was told: the config's window, before the fit. */
	uint32_t fitted;
	uint32_t window_default;
	uint64_t window_bytes;	/* as planned (metrics) */
	/* The states' shuffle window, when resumed (0: none): a default
	 * window keeps its run's (pipe.c). */
	uint32_t state_block;

	pf_files files;		/* the I/O thread's */
	pf_fcache fcache;	/* the global shuffle's decompressed frames */
	unsigned fcache_entries;	/* as the budget planned them */
	chunk *hit_open;	/* a queued chunk of cached slices more may join
				   (l->mu) */

	/* threads */
	pthread_t io_thread;
	bool io_started;
	bool open_tried;	/* pf_dataset_open() was called (the pod voted) */
	uint64_t create_start_ns;	/* when pf_loader_create() began */
	/* The I/O thread gave up with reads in flight (the engine failed),
	 * or its engine abandoned reads the kernel would not cancel
	 * (pf_io_set_abandon()): the kernel may still write into the read
	 * buffers, which are then made inaccessible in place
	 * (pf_pool_unmap()), never given to the next loader. */
	bool io_left;
	/* Reads abandoned: the I/O thread's end may wait in the kernel for
	 * them (its io-wq workers), so pf_loader_free() does not join it but
	 * waits for io_exited, its last touch of the loader, and detaches. */
	bool io_abandoned, io_exited;
	worker *workers;
	unsigned nworkers;

	/* What the pools hold now (budget.c): read buffers made so far
	 * (indexes [0, cbufs_made), the rest of the ncbufs planned made when
	 * needed) and how many may be in use (reads in flight and frames
	 * being decoded); batch slots made (indexes [0, slots_made), the
	 * rest made as the schedule needs them, up to slots_limit: nslots
	 * less those only a raised prefetch may use). */
	unsigned cbufs_made, cbuf_limit;
	unsigned slots_made, slots_limit;

	/* Autotune (autotune.c), under mu. */
	pf_tuning tune;
	unsigned active_workers;	/* workers that take work: workers[0, n) */
	unsigned prefetch_max;		/* the slots planned allow this much */
	unsigned depth_plan;		/* reads in flight the config or PF_AUTO's
					   most asked, before the budget's cut */
	uint64_t tune_reads;		/* frame reads measured */
	uint64_t tune_read_ewma;	/* their latency, ns (moving average) */
	uint64_t tune_frames, tune_records;	/* decoded so far */
	uint64_t tune_frame_ewma;	/* a frame's decode, CPU ns (moving average) */
	uint64_t tune_cpu_ns;		/* decode CPU time of every chunk */
	uint64_t tune_gap_ns, tune_gap_max_ns;	/* the consumer between next() calls */
	uint64_t tune_gap_cpu_ns;	/* of which on its CPU */
	uint64_t tune_last_cpu_ns;	/* its CPU time when next() last returned */
	uint64_t tune_gaps, tune_waits;		/* gaps counted; next() calls that waited */
	uint64_t tune_last_ns;		/* when next() last returned a batch */
	uint64_t tune_first_ns;		/* when the first batch was returned */

	/* A packing loader's inner loader: the decode threads write the
	 * records planned ahead straight into their packed rows through it
	 * (loader/pack/pack_direct.c); NULL: not (atomic: set once, while
	 * they run). */
	const pf_record_hook *record_hook;

	/* metrics, under mu; the I/O stage is busy when not waiting */
	pf_loader_metrics m;
	uint64_t io_start_ns, io_end_ns;
	/* When the I/O thread's wait now began (0: it is not waiting), so
	 * that its busy time read mid-wait leaves the wait out: set under mu
	 * or atomically, cleared under mu with the wait counted. */
	uint64_t io_wait_since;

	/* The time series (series.c): written by the consumer's thread,
	 * read under series_mu. */
	struct pf_series *series;
	pthread_mutex_t series_mu;
};

/* pool.c: the loader's large pools, anonymous mappings (huge pages
 * asked for), kept when freed with keep in a small process-wide cache
 * for the next loader, else given back.  pf_pool_alloc(0) is NULL (it
 * takes a cached pool of the size when there is one); pf_pool_free()
 * takes the size the pool was asked with.  pf_pool_cached(): bytes the
 * cache holds. */
void *pf_pool_alloc(size_t size);
/*! The same for memory most of whose pages are never written (packing's
 *  inner rows: a record's values, not the row's padding): ordinary pages,
 *  so that a row's first value does not fault in a zeroed 2 MiB. */
void *pf_pool_alloc_sparse(size_t size);
void pf_pool_free(void *p, size_t size, bool keep);
/* Back to the system, never to the cache (memory the kernel may still
 * write into). */
void pf_pool_unmap(void *p, size_t size);
size_t pf_pool_cached(void);
void pf_pool_trim(void);


/* ------------------------------------------------------------------ */
/* Small helpers every file uses                                        */

static inline size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

static inline bool halted(const pf_pipe *l)
{
	return l->stop || l->failed;
}

static inline sblock *ring_at(const pf_pipe *l, uint64_t g)
{
	return &l->ring[g % l->nring];
}

/* ------------------------------------------------------------------ */
/* The seams                                                            */

/* pipe.c: a pipeline as the rooms above use it (loader/pack/, loader/mix/,
 * and the public calls, loader/api/, through pf_pipe_ops): each call is
 * its pf_loader_*() namesake's (podfeed.h) for one pipeline. */
extern const pf_loader_ops pf_pipe_ops;
int pf_pipe_create(pf_pipe **out, const pf_loader_config *cfg, pf_error *err);
int pf_pipe_next(pf_pipe *l, pf_batch **out);
int pf_pipe_next_timed(pf_pipe *l, pf_batch **out, uint64_t timeout_ns);
void pf_pipe_release(pf_pipe *l, pf_batch *batch);
const pf_error *pf_pipe_last_error(const pf_pipe *l);
void pf_pipe_metrics(const pf_pipe *l, pf_loader_metrics *m);
uint64_t pf_pipe_steps_per_epoch(const pf_pipe *l);
uint64_t pf_pipe_steps_left(const pf_pipe *l);
const pf_spec *pf_pipe_spec(const pf_pipe *l);
void pf_pipe_free(pf_pipe *l);
/* resume.c, autotune.c, series.c */
int64_t pf_pipe_save_state(pf_pipe *l, void *buf, size_t cap);
/* The state as if the consumer had been handed exactly the first j
 * batches of this run (whatever it has been handed): a mixture's source
 * as of an earlier step (a packed mixture's checkpoint).  @return the
 * blob's length (nothing written when over cap), or -ENOMEM. */
int64_t pf_pipe_state_after(const pf_pipe *l, uint64_t j, void *buf, size_t cap);
void pf_pipe_tuning(const pf_pipe *l, pf_tuning *out);
int pf_pipe_series(const pf_pipe *l, pf_series **out);
/* The pipeline behind a loader, or NULL when it is another kind (for
 * the tests that look inside one). */
pf_pipe *pf_pipe_of(pf_loader *l);
/* What the plan needs to say which record l delivers where (its
 * dataset, topology and shuffle): packing plans its rows from it. */
void pf_pipe_order(const pf_pipe *l, pf_order *o);

/* wake.c: the pipeline's threads woken and stopped (with l->mu held but
 * for pf_pipe_fail() and pf_pipe_halt()). */
/* Record the first failure and wake every thread. */
void pf_pipe_fail(pf_pipe *l, const pf_error *err, int code);
void pf_pipe_fail_locked(pf_pipe *l, const pf_error *err, int code);
/* Wake every thread waiting on the loader. */
void pf_pipe_wake_all(pf_pipe *l);
/* Wake the I/O thread if it sleeps, whatever it waits for (l->io_sleep). */
void pf_pipe_wake_io(pf_pipe *l);
/* Work for the decoders: one of them (a chunk queued), or all; their
 * own, or their pool's. */
void pf_decode_signal(pf_pipe *l);
void pf_decode_broadcast(pf_pipe *l);

/* budget.c: once the dataset is open, before the run is planned: the
 * tensor layout, where the window's records wait (l->staged), and a
 * default shuffle window the budget cannot hold fitted to it (l->wblock,
 * l->slice; said in l->tune.shuffle_window).  Not thread-dependent: the
 * window is part of the order.  @return 0, or <0 with err. */
int pf_budget_fit(pf_pipe *l, pf_error *err);
/* budget.c: size the pools from the memory budget and build them, the
 * workers' buffers with them; defaults (prefetch, threads, the frame
 * cache) cut to what it holds, each said in l->tune.  @return 0, or
 * -ENOMEM with err saying what the budget would need, or which value
 * the config set does not fit and the largest that does. */
int pf_budget_setup(pf_pipe *l, pf_error *err);
/* budget.c: point slot s's cores and tensors at mem (its rows). */
void pf_budget_slot_point(pf_pipe *l, batch_slot *s, uint8_t *mem);

/* budget.c, the pools as they grow (with l->mu held) */
/* A read buffer can be taken now: one is free, or one more is made, and
 * fewer than l->cbuf_limit are in use. */
bool pf_budget_cbuf_ready(pf_pipe *l);
/* A batch slot for the next step, once slot_free (schedule.c) says
 * there is one: the most recently freed, else the next never used
 * (*fresh: make it with pf_budget_slot_make(), l->mu not needed). */
batch_slot *pf_budget_slot_take(pf_pipe *l, bool *fresh);
void pf_budget_slot_make(pf_pipe *l, batch_slot *s);
/* The consumer may hold prefetch + 1 batches: allow the slots for it. */
void pf_budget_grow_slots(pf_pipe *l, unsigned prefetch);

/* autotune.c (with l->mu held) */
/* The starting values, after pf_budget_setup() (which sized the pools
 * for the most PF_AUTO may choose): the limits in the pools, and each
 * choice said. */
void pf_tune_start(pf_pipe *l);
/* A frame's read took ns, from submit to reap. */
void pf_tune_read(pf_pipe *l, uint64_t ns);
/* A chunk of `records` was decoded (frame: of a frame read) in cpu_ns
 * of its worker's CPU time. */
void pf_tune_decoded(pf_pipe *l, uint64_t records, bool frame, uint64_t cpu_ns);
/* pf_pipe_next() is called (entry) and returns a batch (taken), having
 * waited `waited` ns for it. */
void pf_tune_next_entry(pf_pipe *l, uint64_t t);
void pf_tune_next_taken(pf_pipe *l, uint64_t t, uint64_t waited);

/* resume.c */
/* Restore from cfg->resume into l->start_epoch, l->gstep0 and l->resume.
 * @return 0, or <0 with err naming the state and what does not match. */
int pf_resume_restore(pf_pipe *l, pf_error *err);
/* resume.c: the state of l as if its consumer had been handed the steps
 * of epoch `epoch` before `step` and nothing after (pack.c saves its inner
 * loader's so). */
void pf_resume_state_at(const pf_pipe *l, uint32_t epoch, uint64_t step, uint64_t global_step,
			bool fresh, pf_state *s, pf_piece *pieces);
/* resume.c: the pieces host `host` of l's topology gets of the states st
 * (every old host's, of another topology) on an elastic resume, as
 * pf_resume_restore() would cut them for it: *pieces (pf_free()), NULL
 * with *npieces 0 when the states are between epochs. */
int pf_resume_elastic_share(const pf_pipe *l, uint32_t host, pf_state *st, size_t n,
			    pf_piece **pieces, size_t *npieces, pf_error *err);
/* resume.c: where l's run starts for host `host` of its topology when
 * resumed from the states st (every old host's, of another topology), as
 * pf_resume_restore() would cut them for it: *out, its pieces
 * pf_malloc()ed (pf_run_start_release()).  skip.c: l's run
 * (pf_pipe_run()) so, from the states' blobs.  @return 0 or <0 with
 * err. */
int pf_resume_elastic_start(const pf_pipe *l, uint32_t host, pf_state *st, size_t n,
			    pf_run_start *out, pf_error *err);
int pf_pipe_elastic_run(const pf_pipe *l, uint32_t host, const pf_state_blob *blobs, size_t n,
			pf_run *out, pf_error *err);
/* Slots one block of the resumed epoch can touch. */
uint32_t pf_resume_spb(const pf_pipe *l);

/* io_thread.c */
/* The I/O thread (arg: the loader): makes the engine, reports to
 * pf_loader_create() (l->io_ready), runs pf_schedule_run(). */
void *pf_pipe_io_main(void *arg);
/* Wait until ready(l, arg) while completing reads in flight and reading
 * the stream files' blocks.  @return with l->mu held: 0 when ready,
 * -ECANCELED when the loader halts, or the engine's error. */
int pf_reads_wait(pf_pipe *l, pf_io *io, bool (*ready)(const pf_pipe *, uint64_t),
		  uint64_t arg, pthread_cond_t *cv);
/* Hand finished reads to the decoders, and finished opens to files.c;
 * min: wait for at least that many.  @return how many, or the engine's
 * error. */
int pf_reads_reap(pf_pipe *l, pf_io *io, unsigned min);
/* Submit req, reaping while the engine is full.  @return pf_io_submit()'s
 * (0), or the engine's error. */
int pf_reads_submit(pf_pipe *l, pf_io *io, pf_io_req *req);

/* streams.c */
/* The reads the active streams want now, marked READING, as a list (by
 * submit_next) for the I/O thread to submit after unlocking.  Call with
 * l->mu held.  @return the list, or NULL. */
stream_buf *pf_stream_pump(pf_pipe *l, const pf_io *io);
/* The stream buffer a read is for (its req.user), or NULL for a frame's
 * chunk. */
stream_buf *pf_stream_buf_of(const pf_pipe *l, void *user);
/* A stream block's read is in: pushed to its stream, the sub-segment
 * parked for it queued again.  Call with l->mu held. */
void pf_stream_read_done(pf_pipe *l, pf_io *io, stream_buf *sb);
/* Feed the stream's next block to its source, the one before going back
 * to the I/O thread.  @return 0 when fed, 1 when it is not read yet, or
 * <0 with err (a failed read). */
int pf_stream_feed(pf_pipe *l, stream_state *ss, pf_error *err);
/* Chunk c (of ss) waits for the stream's next block.  Call with l->mu
 * held; c is no longer the caller's. */
void pf_stream_park(pf_pipe *l, stream_state *ss, chunk *c);
/* The stream's last sub-segment is decoded: no more of its blocks are
 * read.  Call with l->mu held. */
void pf_stream_finish(pf_pipe *l, stream_state *ss);
/* The I/O thread's: the retired streams' files given back (files.c),
 * their states freed for the next streams.  Call with l->mu held (let go
 * meanwhile).  @return whether there were any. */
bool pf_stream_free_retired(pf_pipe *l, pf_io *io);

/* files.c: the dataset's files in the engine (the I/O thread's). */
/* The tables, for ds->nfiles files.  @return 0 or -ENOMEM. */
int pf_files_setup(pf_pipe *l);
void pf_files_teardown(pf_pipe *l);
/* Whether the look-ahead must stop before wanting a segment of file i
 * (open_ahead distinct files wanted, or the FIFO full). */
bool pf_files_ahead_full(const pf_pipe *l, uint32_t i);
/* The schedule will dispatch a segment of file i next after those wanted
 * before: its open starts (when the engine has room).  @return 0, or <0
 * with the loader failed. */
int pf_files_want(pf_pipe *l, pf_io *io, uint32_t i);
/* Start the opens that waited for room.  @return 0, or <0 (failed). */
int pf_files_pump(pf_pipe *l, pf_io *io);
/* The segment of file i wanted first is dispatched: file i is the
 * read's (or the stream's) until pf_files_release(); waits for its open.
 * @return its index in the engine, or <0 (the loader failed or halts;
 * l->mu not held). */
int pf_files_take(pf_pipe *l, pf_io *io, uint32_t i);
/* The segment of file i wanted first is dispatched with no read (its
 * frame is in the global shuffle's cache): no longer wanted, and not
 * waited for. */
void pf_files_skip(pf_pipe *l, pf_io *io, uint32_t i);
/* A frame read of file i completed, or a stream of it is done. */
void pf_files_release(pf_pipe *l, pf_io *io, uint32_t i);
/* The walk ended: what it wanted and did not dispatch is not wanted. */
void pf_files_forget_ahead(pf_pipe *l, pf_io *io);
/* Whether a completed request is one of files.c's opens, and its
 * completion (the loader fails naming the file when it failed, or when
 * the shard changed since the plan). */
bool pf_files_is_open_req(const pf_pipe *l, const pf_io_req *req);
void pf_files_opened(pf_pipe *l, pf_io *io, pf_io_req *req);

/* schedule.c: every epoch of the run, read in order (the I/O thread's
 * work).  @return 0, or the engine's error. */
int pf_schedule_run(pf_pipe *l, pf_io *io);

/* frame_cache.c: the global shuffle's decompressed frames. */
/* Bytes of one entry: the frame's bytes and its record offsets. */
size_t pf_fcache_entry_bytes(const pf_dataset *ds);
/* Make `entries` entries (0: no cache).  @return 0 or -ENOMEM. */
int pf_fcache_setup(pf_pipe *l, unsigned entries);
void pf_fcache_teardown(pf_pipe *l);
/* The I/O thread is about to walk plan: each segment's next use, and
 * the cached frames' first.  @return 0 or -ENOMEM. */
int pf_fcache_plan(pf_pipe *l, const pf_epoch_plan *plan);
/* The I/O thread dispatches plan segment s, of frame `unit` (with l->mu
 * held): its cached entry (pinned), or a new one to fill (*load: the
 * chunk reads the frame and its worker fills the entry), or NULL (not
 * kept: decoded as without a cache). */
pf_dframe *pf_fcache_take(pf_pipe *l, uint64_t unit, size_t s, bool *load);

/* decode.c */
/* A decode worker (arg: its worker). */
void *pf_pipe_worker_main(void *arg);
/* Give chunk c to the decoders: the tail of their queue (the caller wakes
 * them).  Call with l->mu held. */
void pf_decode_queue(pf_pipe *l, chunk *c);

/* window.c: the window of records as read (l->staged). */
/* Make its pages and row blocks' bookkeeping (the row blocks are
 * l->mem_batches').  @return 0 or -ENOMEM. */
int pf_window_setup(pf_pipe *l, uint32_t pages, unsigned rows);
void pf_window_teardown(pf_pipe *l);
/* The I/O thread, l->mu held: the pages `bytes` of a chunk's records
 * need; whether it may take them now, or no page can come free (the
 * predicate schedule.c waits for in pf_reads_wait()); and n pages taken
 * onto c's chain (c may be a queued chunk of cached slices).  @return 1
 * when taken, 0 when not free and !wait, or <0 with the loader failed
 * (a shuffle block's records larger than the window: nothing could
 * give a page back). */
uint32_t pf_window_pages(uint64_t bytes);
bool pf_window_room(const pf_pipe *l, uint64_t pages);
int pf_window_take(pf_pipe *l, uint32_t n, chunk *c, bool wait);
/* The I/O thread, l->mu held: slot s opened for a step (its rows
 * waiting for their records). */
void pf_window_slot_opened(pf_pipe *l, batch_slot *s);
/* A worker, around chunk c's records: where they go (begin), each
 * record's bytes copied in (stage, filling r), the pages left over
 * given back (end, before pf_place_flush()). */
void pf_window_begin(pf_pipe *l, worker *w, const chunk *c);
void pf_window_stage(pf_pipe *l, worker *w, const pf_record *rec, uint64_t unit, pf_wrec *r);
void pf_window_end(pf_pipe *l, worker *w, chunk *c);
/* A worker, l->mu held: the next rows to decode (of the first step not
 * all taken, once all its records are in and a row block is free).
 * @return whether there is a task in *t. */
bool pf_window_take_task(pf_pipe *l, pf_wtask *t);
/* Whether rows remain to be taken (l->mu held): a worker stays. */
bool pf_window_work_left(const pf_pipe *l);
/* A worker: record r's bytes, in its pages when they lie one after
 * the other, else gathered into w->ubuf; then its pages released (those
 * freed kept in w until pf_window_task_done()). */
const uint8_t *pf_window_bytes(const pf_pipe *l, worker *w, const pf_wrec *r);
void pf_window_release(pf_pipe *l, worker *w, const pf_wrec *r);
/* A worker, l->mu held: its task is done: the pages it freed back. */
void pf_window_task_done(pf_pipe *l, worker *w);
/* The consumer, l->mu held: slot s released: its row block back. */
void pf_window_slot_released(pf_pipe *l, batch_slot *s);
/* The row blocks the consumer's prefetch allows (l->mu held). */
void pf_window_grow_rows(pf_pipe *l, unsigned prefetch);

/* decode.c: an error of frame u's record names the frame and its file
 * offset (offsets inside it count decompressed bytes). */
void pf_frame_locate(pf_error *err, const pf_unit *u);

/* placement.c */
/* Decode record rec, at stream position p of chunk c, into its row (in
 * skip mode a record that does not decode is a drop and a hole; with
 * l->staged it is copied into the window instead, pf_place_rows()
 * decodes it).  @return 0, or <0 with err. */
int pf_place_record(pf_pipe *l, worker *w, const chunk *c, uint64_t p,
		    const pf_record *rec, pf_error *err);
/* Position p of chunk c is a hole: its row zeros, marked invalid. */
void pf_place_hole(pf_pipe *l, worker *w, const chunk *c, uint64_t p);
/* Add the rows the worker wrote to their slots' counts (waking the
 * consumer when one is full).  Before pf_place_done(). */
void pf_place_flush(pf_pipe *l, worker *w);
/* The records [pos, pos + count) of a stream of blocks of w records,
 * whose block holding pos is g0, are done: ring entries come free. */
void pf_place_done(pf_pipe *l, uint64_t g0, uint64_t pos, uint64_t count, uint64_t w);
/* l->staged: task t's rows decoded from their records in the window
 * into the slot's row block, counted (waking the consumer when the slot
 * is full).  @return 0, or <0 with err naming the record (in skip mode
 * a damaged one is a drop and a hole). */
int pf_place_rows(pf_pipe *l, worker *w, const pf_wtask *t, pf_error *err);

/* A mixture's source's batch, fitted to its dataset once counted: the
 * rows of its batches for `records` over `hosts` hosts, at most `cap`
 * (the config's per_core_batch), at least 1 (mixture.c). */
typedef uint32_t (*pf_batch_fit)(uint64_t records, uint32_t hosts, uint32_t cap);

/* pipe.c: a pipeline for a room above, its options beyond the config:
 *   spec       the spec instead of cfg->features (packing's inner rows);
 *   lspec      counting its stream files also measures their records'
 *              packed lengths with it (pf_open_config.lengths);
 *   opened     packing's inner loader: set when the dataset was opened
 *              (the pod's collectives of the open passed), whether or not
 *              the create failed after; its decode workers are then not
 *              started: pf_pipe_start_workers() (after the packer's plan
 *              ahead of them);
 *   lookahead  a mixture's source: the most segments it reads ahead (its
 *              share of the mixture's; budget.c; 0: its workers + 2);
 *   sink       where its rows go (NULL: its batches) from its first record;
 *   fit        its batch fitted to its dataset (NULL: the config's);
 *   gated      reading nothing until pf_pipe_open_gate() gives the batches
 *              its run takes at most (0: no more than its config's), which
 *              the mixture knows once every source is open;
 *   pooled     its workers not started (a pf_decode_pool decodes for it);
 *   source     a mixture's source: its rows go where the sink says as they
 *              are decoded, so its records never wait in the window as
 *              read (budget.c). */
typedef struct pf_pipe_opts {
	const pf_spec *spec;
	const pf_spec *lspec;
	bool *opened;
	unsigned lookahead;
	const pf_row_sink *sink;
	pf_batch_fit fit;
	bool gated, pooled, source;
} pf_pipe_opts;
int pf_pipe_create_opts(pf_pipe **out, const pf_loader_config *cfg, const pf_pipe_opts *o,
			pf_error *err);
void pf_pipe_open_gate(pf_pipe *l, uint64_t max_steps);
/* wake.c: stop its threads' work (pf_pipe_free() does it first): a
 * mixture halts its pooled sources before it stops their pool. */
void pf_pipe_halt(pf_pipe *l);
/* pipe.c: pf_pipe_create() with a spec made by the caller instead
 * of cfg->features (pack.c's inner loader). */
int pf_pipe_create_spec(pf_pipe **out, const pf_loader_config *cfg, const pf_spec *spec,
			  pf_error *err);
/* The same for packing's inner loader: counting its stream files also
 * measures their records' packed lengths with lspec (when not NULL:
 * pf_open_config.lengths); *opened: the dataset was opened (the pod's
 * collectives of the open passed), whether or not the create failed
 * after.  Its decode workers are not started: pf_pipe_start_workers()
 * (after the packer's plan ahead of them); gated: its I/O thread reads
 * nothing until pf_pipe_open_gate() (the packer's skip_steps moves its
 * start first). */
int pf_pipe_create_packing(pf_pipe **out, const pf_loader_config *cfg, const pf_spec *spec,
			     const pf_spec *lspec, bool gated, bool *opened, pf_error *err);
int pf_pipe_start_workers(pf_pipe *l, pf_error *err);

/* skip.c: a run's start moved ahead, and which record each row of a step
 * holds, for one pipeline (the plan's course.c over its order). */
/* l's run as the plan reads it: its order, epochs and start (its pieces
 * l's own). */
void pf_pipe_run(const pf_pipe *l, pf_run *r);
/* Keep where the run starts now as l->which0 (after a restore, before a
 * skip).  @return 0 or -ENOMEM. */
int pf_pipe_keep_start(pf_pipe *l);
/* Move l's start n steps on (pf_run_skip()), counted in the metrics; before
 * its I/O thread walks (at create, or while it is gated).  @return 0, or
 * <0 with err naming the run's last step. */
int pf_pipe_skip(pf_pipe *l, uint64_t n, pf_error *err);
/* pf_loader_records_of() and pf_loader_file() of a pipeline (any thread:
 * they read what create made). */
int64_t pf_pipe_records_of(const pf_pipe *l, uint64_t step, pf_record_ref *out, size_t cap,
			   pf_error *err);
const char *pf_pipe_file(const pf_pipe *l, uint32_t file);

/* drops.c */
/* One drop (skip mode) of the file path: counted, logged, checked
 * against the budget.  @return 0, or <0 (the loader is then failed). */
int pf_drop_report(pf_pipe *l, const pf_drop *d, const char *path);
/* The dataset's on_drop while it is opened (ctx: the loader): every host
 * counts the drop, host 0 logs it; while stream files are counted, the
 * host that counted the file logs it when the pod split the counting. */
int pf_drop_at_open(void *ctx, const pf_drop *d);
int pf_drop_at_count(void *ctx, const pf_drop *d);
/* err (the dataset too small for one step) when skip mode dropped some of
 * it opening it: the first drop (its file, byte and cause) becomes the
 * error, the size of what is left said after it.  @return err's code. */
int pf_drops_explain_size(const pf_pipe *l, pf_error *err);

/* images.c: the image decode stage.  pf_images_setup() splits the spec
 * (at creation); pf_images_decode() decodes record rec of file `file`,
 * of a block of `epoch`, into w->dst: the other features through
 * rowspec, then each image.  Errors as pf_spec_decode()'s: -EBADMSG a
 * damaged image (err naming the feature, the byte and the decoder's
 * message), -ENOMSG an image feature missing. */
void pf_images_setup(pf_pipe *l);
int pf_images_decode(pf_pipe *l, worker *w, uint32_t file, uint32_t epoch,
		     const pf_record *rec, pf_error *err);
/* Per-worker scratch the budget sets aside for images (a typical image's;
 * a larger one grows it, counted in the metrics' memory). */
size_t pf_images_scratch_estimate(const pf_pipe *l);

#endif
