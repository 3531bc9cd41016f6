/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed io: reading byte extents of files. */
#ifndef PF_IO_H
#define PF_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>

#include "pf_formats.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! pf_file_open(): open path read-only.  @return an fd (>= 0) or -errno;
 *  on failure err names the file and the cause.  Close with close(). */
PF_API int pf_file_open(const char *path, pf_error *err);

/*! pf_file_size(): size of an open file.  @return 0 with *size, or -errno. */
PF_API int pf_file_size(int fd, uint64_t *size);

/*! pf_file_pread(): read exactly len bytes at offset, continuing after
 *  short reads, with the process's read policy (see "Reliability" below:
 *  faults injected from $PODFEED_FAULTS, transient errors retried with
 *  backoff, each read bounded by the timeout).  @return bytes read (< len
 *  only at end of file) or -errno (-ETIMEDOUT for a read that did not
 *  finish in time); on failure err names path and the offset of the
 *  failed read, and says how often it was retried.  Thread-safe. */
PF_API int64_t pf_file_pread(int fd, void *buf, size_t len, uint64_t offset,
			     const char *path, pf_error *err);

/* One path's stat(2), as pf_stat_many() gives it. */
typedef struct pf_stat_result {
	int error;		/* 0, or -errno of its stat */
	uint32_t mode;		/* st_mode: S_ISDIR(), S_ISREG() */
	uint64_t size;
	int64_t mtime_ns;
} pf_stat_result;

/*! pf_stat_many(): stat(2) the n paths (symlinks followed) with up to
 *  PF_STAT_MANY_DEPTH of them in flight through io_uring's STATX, so that
 *  on a far bucket, where each is a round trip, 1,000 paths cost about
 *  16 round trips and not 1,000; one after another where io_uring or its
 *  STATX is not to be had.  out[i] is path i's.  @return 0 (each path's
 *  own failure is in its out[i].error), or -ENOMEM. */
#define PF_STAT_MANY_DEPTH 64u
PF_API int pf_stat_many(const char *const *paths, size_t n, pf_stat_result *out);

/* ------------------------------------------------------------------ */
/* The I/O engine: one per I/O thread                                   */
/* ------------------------------------------------------------------ */
/*
 * Reads byte extents of files into caller buffers.  The back-end is
 * io_uring (one ring per engine, SINGLE_ISSUER|DEFER_TASKRUN where the
 * kernel has them, registered files and buffers) or, where io_uring is
 * refused (-EPERM/-ENOSYS, common in containers) or PODFEED_IO=pread
 * says so, pread(2) with the same interface.  Short reads are
 * continued and transient errors retried inside (see "Reliability"
 * below); a request completes with all its bytes, or fewer at end of
 * file, or -errno.  Not thread-safe: one engine per thread, used only by
 * that thread.
 *
 * Files come and go (see "Files" below): pf_io_open() opens one as a
 * request of its own, in flight beside reads and other opens;
 * pf_io_close_file() closes it and frees its index for the next.  The
 * number of files is bounded by memory, not by a table: an engine holds
 * only the files open now.
 */
typedef struct pf_io pf_io;

typedef struct pf_io_req {
	uint32_t file;		/* index from pf_io_add_file() or pf_io_open() */
	uint64_t offset;
	uint32_t len;
	void *buf;		/* len bytes; a registered buffer when buf_index >= 0 */
	int buf_index;		/* index of the registered buffer holding buf, or -1 */
	void *user;		/* the caller's tag */
	/* Set when the request completes (the engine keeps the state of a
	 * request in flight to itself): */
	int64_t result;		/* bytes read or -errno; a failed read failed
				   at offset + done_bytes (pf_io_req_error()
				   says so) */
	uint32_t done_bytes;	/* bytes read */
	uint32_t retries;	/* transient errors retried */
	bool injected;		/* the failed read was an injected fault */
	bool open;		/* set by the engine: an open (pf_io_open()),
				   not a read (it sits in what was padding) */
	uint8_t not_regular;	/* set by the engine: an open refused (-EINVAL)
				   because the path is a FIFO, socket or
				   device (opened O_NONBLOCK, never read,
				   closed); its st_mode >> 12
				   (padding before, too) */
	bool abandoned;		/* set by the engine: completed -ETIMEDOUT
				   while its read is still in the kernel,
				   which would not cancel it
				   (pf_io_set_abandon()): buf may still be
				   written, at any time (padding before) */
} pf_io_req;

#define PF_IO_HIST_BUCKETS 32	/* log2 of microseconds: [2^i, 2^(i+1)) us */

typedef struct pf_io_stats {
	uint64_t bytes;		/* bytes read */
	uint64_t ops;		/* requests completed */
	uint64_t errors;	/* requests that failed */
	uint64_t retries;	/* reads repeated after a transient error
				   (EIO, EAGAIN; EINTR re-issues too) */
	uint64_t busy_ns;	/* summed request latency */
	uint64_t hist[PF_IO_HIST_BUCKETS];
	uint64_t short_reads;	/* reads that returned less than asked, the
				   rest asked for again */
	uint64_t faults;	/* reads changed by an injected fault */
	uint64_t timeouts;	/* reads that did not finish in time */
} pf_io_stats;

typedef struct pf_io_config {
	unsigned queue_depth;	/* in-flight requests; 0: 64 */
	unsigned max_files;	/* io_uring: files open at once in the ring's
				   registered table (more are read through
				   plain descriptors); 0: 4096.  Not a limit
				   on the number of files */
	void *buffers;		/* optional region to register: nbuffers x buffer_size
				   (io_uring: each buffer at its first read,
				   where the kernel has sparse tables (5.19),
				   else all at creation; a buffer never read
				   into is never pinned) */
	size_t buffer_size;
	unsigned nbuffers;
	const char *backend;	/* "uring", "pread", or NULL: $PODFEED_IO, else uring */
	struct pf_region_table *regions;	/* when set, every read is also
					   counted to its file's mount and
					   region (see below); NULL: not */
	/* Reliability (see below).  0 / NULL take the environment variable,
	 * else the default. */
	const char *faults;	/* fault spec (pf_fault_parse()); NULL:
				   $PODFEED_FAULTS; "": none */
	int retries;		/* transient errors retried per request; 0:
				   $PODFEED_IO_RETRIES, else 3;
				   PF_IO_RETRIES_NONE: none */
	int retry_backoff_us;	/* wait before the first retry, doubling
				   each retry up to PF_IO_BACKOFF_MAX_US; 0:
				   $PODFEED_IO_BACKOFF_US, else 10000;
				   PF_IO_BACKOFF_NONE: retry at once */
	int timeout_ms;		/* each read; 0: $PODFEED_IO_TIMEOUT_MS, else
				   60000; PF_IO_TIMEOUT_NONE: no limit */
} pf_io_config;

#define PF_IO_DIRECT 1u		/* pf_io_add_file(): open with O_DIRECT too */
/* pf_io_open(): a file on FUSE opened with O_DIRECT, its reads of any
 * alignment (FUSE asks none): each read one request of its own size.  A
 * buffered read of a FUSE file is read page by page (a round trip each)
 * when the mount's background requests pass its congestion threshold,
 * as many reads of small files in flight make them. */
#define PF_IO_FUSE_DIRECT 2u

/*! Create an engine.  @return 0 with *out (free with pf_io_free()), or
 *  -errno with err saying why. */
PF_API int pf_io_create(pf_io **out, const pf_io_config *cfg, pf_error *err);
PF_API void pf_io_free(pf_io *io);
/*! "io_uring" or "pread". */
PF_API const char *pf_io_backend_name(const pf_io *io);
/*! Whether buffers and files are registered with the kernel. */
PF_API bool pf_io_buffers_registered(const pf_io *io);

/* Files.  An index names a file from its open until pf_io_close_file()
 * (or pf_io_free()), then it may name the next file opened.  The engine
 * keeps its own copy of the path.  An open is a request like a read: it
 * counts against queue_depth, and gets the read policy's faults (the
 * "open-" kinds), retries of EIO/EAGAIN with backoff, and timeout (see
 * "Reliability").  io_uring: IORING_OP_OPENAT straight into the ring's
 * registered table (IORING_FILE_INDEX_ALLOC; a plain descriptor where
 * the kernel lacks that or the table is full), then IORING_OP_STATX, in
 * io-wq workers, as many at once as there are requests in flight (the
 * engine raises io-wq's limit of bounded workers to queue_depth); a
 * kernel without them opens in the engine's thread.  pread: opens run
 * on PF_IO_OPEN_THREADS threads of the engine, reads in the reaping
 * thread as before.  PF_IO_DIRECT asks for O_DIRECT; a file system that
 * refuses it (EINVAL) gets the file opened without. */
#define PF_IO_OPEN_THREADS 8u

/*! pf_io_open(): start opening path for reading (flags: PF_IO_DIRECT,
 *  PF_IO_FUSE_DIRECT).
 *  The file's index is req->file at once (and req->open is set); the
 *  open completes through pf_io_reap() like a read, with req->result 0
 *  (the file is open: reads may be submitted, and pf_io_file_size(),
 *  _mtime() and _direct() say what its open found) or -errno
 *  (pf_io_req_error() says "PATH: cannot open: CAUSE", or "is a
 *  directory, not a file").  Either way the index is the caller's until
 *  pf_io_close_file().  Reads of a file whose open has not completed
 *  fail with -EBADF.  req->user is the caller's; req is the engine's
 *  until reaped.  @return 0, -EBUSY (queue_depth requests in flight),
 *  -EINVAL (an empty path), -ENOMEM. */
PF_API int pf_io_open(pf_io *io, pf_io_req *req, const char *path, unsigned flags);
/*! pf_io_add_file(): open a file and wait for it: pf_io_open() and its
 *  completion, without handing it to pf_io_reap() (requests already in
 *  flight go on meanwhile and stay for the caller to reap).  @return its
 *  index (>= 0), or -errno with err naming the file (the index is then
 *  free again). */
PF_API int pf_io_add_file(pf_io *io, const char *path, unsigned flags,
			  pf_error *err);
/*! pf_io_close_file(): close a file whose open completed (succeeded or
 *  not) and none of whose reads is in flight; its index may be handed out
 *  again, and its counters go into pf_io_get_stats()'s.  io_uring: a
 *  registered file leaves the table through IORING_OP_CLOSE, sent with
 *  the next submission.  @return 0, -EBADF (no such file), or -EBUSY (its
 *  open or a read of it is in flight: nothing is done). */
PF_API int pf_io_close_file(pf_io *io, uint32_t file);
/*! What a file's open found (0 or NULL for an index that names no open
 *  file).  The path lives until the file is closed. */
PF_API uint64_t pf_io_file_size(const pf_io *io, uint32_t file);
PF_API const char *pf_io_file_path(const pf_io *io, uint32_t file);
/*! The file's modification time when it was opened, ns since the epoch. */
PF_API int64_t pf_io_file_mtime(const pf_io *io, uint32_t file);
/*! Whether reads of this file go through O_DIRECT (requested and allowed
 *  by its filesystem).  Direct reads need offset, len and buf aligned to
 *  4096; the engine checks and fails the request with -EINVAL if not. */
PF_API bool pf_io_file_direct(const pf_io *io, uint32_t file);
/*! Queue a request (the engine keeps the pointer until it completes).
 *  @return 0, or -EBUSY when queue_depth requests are in flight. */
PF_API int pf_io_submit(pf_io *io, pf_io_req *req);
/*! Send queued requests to the kernel and collect completed ones: waits
 *  until at least min_done complete (0: do not wait), stores up to max
 *  pointers in done.  @return the number stored, or -errno for an engine
 *  failure (request failures are in each req->result). */
PF_API int pf_io_reap(pf_io *io, pf_io_req **done, unsigned max,
		      unsigned min_done);
/*! Requests submitted and not yet reaped. */
PF_API unsigned pf_io_inflight(const pf_io *io);
/*! pf_io_set_abandon(): from now on, a read (or open step) still in the
 *  kernel PF_IO_ABANDON_GRACE_MS (at most the timeout) after its deadline
 *  cancelled it is abandoned: its request completes with -ETIMEDOUT and
 *  req->abandoned set, and the engine goes on without it (at most
 *  queue_depth at once; past that it waits, as without).  The kernel may
 *  still write the request's buffer at any later time, even after
 *  pf_io_free(): the caller must never reuse that memory, and give it
 *  back only by making it inaccessible in place (mmap(MAP_FIXED,
 *  PROT_NONE) over it), never by free() or munmap().  Off by default: a
 *  caller whose buffers are on its heap must not turn it on.  Why: a read
 *  of a FUSE file whose daemon does not answer (a bucket client retrying
 *  a dead server for minutes) waits on its page killably, and a
 *  cancellation is no fatal signal. */
#define PF_IO_ABANDON_GRACE_MS 1000u
PF_API void pf_io_set_abandon(pf_io *io, bool on);
/*! Requests abandoned whose read the kernel has not yet ended. */
PF_API unsigned pf_io_abandoned(const pf_io *io);
/*! Counters of one file open now (copied; zeros for an index that names
 *  none). */
PF_API void pf_io_file_stats(const pf_io *io, uint32_t file, pf_io_stats *out);

/* The engine's counters: every file's reads, closed ones' too, and its
 * opens. */
typedef struct pf_io_engine_stats {
	pf_io_stats reads;	/* summed over every file the engine had */
	pf_io_stats opens;	/* ops: opens completed, errors: failed ones;
				   retries, faults, timeouts, and busy_ns and
				   hist: their latency (bytes, short_reads 0) */
	uint64_t closes;	/* pf_io_close_file() calls that closed */
	uint32_t files_open;	/* indexes held now: open, opening, or failed
				   and not yet closed */
	uint32_t files_open_peak;	/* the most held at once */
} pf_io_engine_stats;

/*! pf_io_get_stats(): the engine's counters (copied). */
PF_API void pf_io_get_stats(const pf_io *io, pf_io_engine_stats *out);
/*! pf_io_req_error(): describe a completed request's failure in err: its
 *  file, the offset of the read that failed (offset + done_bytes), the
 *  cause and the retries spent, e.g. "data/a.zst: byte 1048576: read
 *  failed: Input/output error (after 3 retries)".  @return req->result
 *  (negative), or 0 and err untouched when the request did not fail. */
PF_API int pf_io_req_error(const pf_io *io, const pf_io_req *req, pf_error *err);

/*! A read plan for pf_io_run(): what to read next, and what to do with
 *  each read done.  Both run on pf_io_run()'s thread. */
typedef struct pf_io_plan {
	/* Fill *req (file, offset, len, buf, buf_index) with the next read,
	 * for request slot `slot` (0 .. nreqs-1: the slot's buffer is the
	 * caller's to choose).  @return 1 when it did, 0 when no read is
	 * left, or -errno to stop (with err saying why). */
	int (*next)(void *ctx, unsigned slot, pf_io_req *req, pf_error *err);
	/* The read of slot `slot` completed (req->result says how; a failed
	 * one is described by pf_io_req_error()); the slot is free again
	 * when it returns.  @return 0, or -errno to stop (err says why). */
	int (*done)(void *ctx, unsigned slot, pf_io_req *req, pf_error *err);
	void *ctx;
} pf_io_plan;

/*! pf_io_run(): carry out a read plan on io with up to nreqs reads in
 *  flight, in the requests reqs[0 .. nreqs-1] (their user field is
 *  pf_io_run()'s): the submit and reap loop every reader of many extents
 *  writes.  Runs until next() has no read left and every read is done, or
 *  until a callback or the engine fails; either way no read is in flight
 *  when it returns, so the buffers may be freed.  @return 0, or the first
 *  -errno (err says what failed: the callback's error, or the engine's). */
PF_API int pf_io_run(pf_io *io, pf_io_req *reqs, unsigned nreqs, const pf_io_plan *plan,
		     pf_error *err);
/*! The histogram bucket of a latency in nanoseconds. */
PF_API unsigned pf_io_hist_bucket(uint64_t ns);
/*! Latency at quantile q (0..1) of a histogram, in microseconds (the
 *  upper bound of its bucket). */
PF_API double pf_io_stats_quantile_us(const pf_io_stats *st, double q);

/* ------------------------------------------------------------------ */
/* Reliability: injected faults, retries with backoff, read timeouts    */
/* ------------------------------------------------------------------ */
/*
 * Every read path (the engine on both back-ends, and pf_file_pread(),
 * which pf_source and index reads use) goes through one policy:
 *
 *  - Transient errors, EIO and EAGAIN, are retried up to `retries` times
 *    per request, the k-th retry after retry_backoff_us x 2^(k-1)
 *    (capped at PF_IO_BACKOFF_MAX_US).  EINTR is re-issued at once, up
 *    to PF_IO_EINTR_MAX times, without spending a retry (it says a signal
 *    came, not that storage failed).  A short read is not an error: the
 *    rest is asked for at once.  Any other error (ENOENT, EBADF, ...)
 *    completes the request at once.  After the last retry the request
 *    completes with the error; the file and the offset of the failed read
 *    are in the request (pf_io_req_error()) or in pf_file_pread()'s err.
 *
 *  - Each read issued to the kernel must finish within timeout_ms, or it
 *    is cancelled and the request completes with -ETIMEDOUT.  A timed-out
 *    read is NOT retried: storage that did not answer for timeout_ms is
 *    more likely stuck than flaky, and the caller should learn which file
 *    within one timeout, not retries + 1 of them.  Backoff and injected
 *    latency are waited before the read is issued and do not count
 *    against it.  io_uring: the engine waits no longer than the nearest
 *    deadline of its reads in flight and cancels a read that passed it
 *    (IORING_OP_ASYNC_CANCEL; a read blocked in an io-wq worker is then
 *    interrupted); reads of FUSE files go to io-wq (IOSQE_ASYNC), since
 *    the kernel may otherwise block in the submitting thread itself
 *    (6.18 does, for direct-I/O FUSE files), beyond any cancellation.
 *    (A linked IORING_OP_LINK_TIMEOUT is no substitute: on 6.18 it never
 *    fires for a read that blocks in io-wq.)  pread: a per-thread POSIX
 *    timer sends the timer signal to the reading thread (a handler
 *    without SA_RESTART, so the blocked read returns EINTR), repeating
 *    every few milliseconds until the read returns.  Either way the
 *    kernel must let the read be interrupted: reads of pipes, sockets
 *    and FUSE files whose daemon answers interrupts with each read a
 *    request of its own (direct I/O without FUSE_CAP_ASYNC_DIO) are.
 *    A buffered FUSE read whose page is being filled by readahead (a
 *    background request, which the kernel never interrupts) waits
 *    killably; a direct-I/O read sent as asynchronous requests cannot be
 *    cancelled either.  Such a read ends only when the daemon answers
 *    (or the mount goes away): the timeout cannot end it, and the engine
 *    or pf_file_pread() waits, because the kernel may still write the
 *    caller's buffer.
 *
 *  - The engine's opens (pf_io_open(), pf_io_add_file()) follow the same
 *    policy: EIO and EAGAIN retried with backoff, EINTR re-issued, each
 *    open (and the stat after it) bounded by the timeout (io_uring: the
 *    same deadlines and cancellation; pread: the timer signal of the
 *    opening thread), faults from the "open-" kinds.
 *
 *  - Faults are injected by a spec (below), from pf_io_config.faults or,
 *    when that is NULL, $PODFEED_FAULTS, so a loader started with the
 *    variable set sees faults on every read path.  Requests are numbered
 *    from 1 per engine (in pf_io_submit() order) and per process for
 *    pf_file_pread(); opens apart from reads, from 1 per engine (in
 *    pf_io_open() order), so that opening files ahead does not move the
 *    reads a spec hits.  Every read issued for a request (the first, the
 *    rest after a short read, each retry) draws again, so a fraction
 *    hits retries too while "@N" hits request N's first read only.
 *    Decisions are a pure function of (spec, seed, request number, read
 *    number): the same spec on the same sequence of requests injects the
 *    same faults, whatever the timing.
 *
 * The environment, read when an engine is created (and once per process
 * for pf_file_pread()): PODFEED_FAULTS (a spec), PODFEED_IO_RETRIES (0:
 * none), PODFEED_IO_BACKOFF_US (0: none), PODFEED_IO_TIMEOUT_MS (0: no
 * limit).  A malformed value fails pf_io_create() (and every
 * pf_file_pread()) with -EINVAL naming the variable.
 */
#define PF_IO_RETRIES_DEFAULT 3
#define PF_IO_RETRIES_NONE (-1)		/* pf_io_config.retries: no retries */
#define PF_IO_RETRIES_MAX 100
#define PF_IO_BACKOFF_DEFAULT_US 10000
#define PF_IO_BACKOFF_NONE (-1)		/* retry_backoff_us: retry at once */
#define PF_IO_BACKOFF_MAX_US 1000000	/* no retry waits longer than 1 s */
#define PF_IO_TIMEOUT_DEFAULT_MS 60000
#define PF_IO_TIMEOUT_NONE (-1)		/* timeout_ms: reads may take forever */
#define PF_IO_TIMEOUT_MAX_MS 86400000	/* a day */
#define PF_IO_EINTR_MAX 16
/* The pread path's timer signal: SIGRTMIN + 6 (a function call in glibc).
 * When the process has its own handler there, pread reads have no
 * timeout and podfeed says so once. */
#define PF_IO_TIMER_SIGNAL_OFFSET 6

/* The fault spec grammar (blanks around items are allowed):
 *
 *     spec     = "" | item *("," item)
 *     item     = "seed=" UINT | fault
 *     fault    = kind ("@" UINT | ":" FRACTION)
 *     kind     = "eio" | "short" | "enoent" | "hang" | "delay=" DURATION
 *              | "open-" ("eio" | "enoent" | "delay=" DURATION)
 *     FRACTION = a decimal in [0, 1]: "0.05", ".5", "1"
 *     DURATION = a decimal and a unit, "us", "ms" or "s": "200ms", "1.5s"
 *                (at most 600 s)
 *
 *   eio      the read fails with EIO (transient: retried)
 *   short    the read asks for half of what is left (a real short read;
 *            O_DIRECT reads stay 4 KiB multiples; a read of one byte, or
 *            one block, cannot be shortened)
 *   enoent   the read fails with ENOENT (not retried)
 *   hang     the read is issued against a pipe no one writes, so it
 *            blocks in the kernel until the timeout cancels it (needs a
 *            timeout)
 *   delay=D  the read waits D before it is issued
 *   open-K   kind K (eio, enoent, delay=D) on the engine's opens, not
 *            on reads: "open-eio@2" fails the second open's first try
 *   @N       request N (from 1), its first read only
 *   :F       each read with probability F, drawn from the seed
 *   seed=S   the seed of the draws (default 0)
 *
 * e.g. "eio@7,short:0.05,enoent@12,delay=200ms:0.1,seed=42".  Kinds are
 * matched without regard to case.  When several faults hit one read,
 * their delays add up and the error is the first of enoent, eio, hang
 * (a short read still happens under a delay). */
#define PF_FAULT_SPEC_MAX 4096u		/* bytes of a spec */
#define PF_FAULT_MAX_RULES 32u		/* faults in a spec */
#define PF_FAULT_MAX_DELAY_NS 600000000000ull

/* Counters of every engine and every pf_file_pread() of the process since
 * it started (a loader's stream files and index reads included). */
typedef struct pf_io_totals {
	uint64_t reads;		/* reads issued to the kernel */
	uint64_t faults;	/* reads (and engine opens) changed by an
				   injected fault */
	uint64_t retries;	/* reads (and opens) repeated after a
				   transient error */
	uint64_t timeouts;	/* reads (and opens) not finished in time */
	uint64_t errors;	/* requests that failed after all retries */
} pf_io_totals;

/*! pf_io_totals_get(): the process's counters (thread-safe). */
PF_API void pf_io_totals_get(pf_io_totals *out);

/*! pf_file_set_policy(): the faults, retries, backoff and timeout of
 *  pf_file_pread() from now on, from cfg's reliability fields (0 / NULL
 *  take the environment as pf_io_create() does); cfg NULL: back to the
 *  environment.  The request count restarts.  Thread-safe; reads in
 *  progress keep the policy they started with.  @return 0, or -EINVAL
 *  with err saying what is malformed (the policy is then unchanged). */
PF_API int pf_file_set_policy(const pf_io_config *cfg, pf_error *err);

/* ------------------------------------------------------------------ */
/* Storage regions: which mount and region every read comes from        */
/* ------------------------------------------------------------------ */
/*
 * A region table maps path prefixes (mounts) to the region that stores
 * them, knows the host's own region, and counts every read attributed to
 * it, per mount and per region.  Mounts come from three places:
 *
 *   - flags, "PATH=REGION" (pf_region_table_add_flag());
 *   - a mount table file, one "PATH REGION" a line, '#' comments, blank
 *     lines (pf_region_table_load(); the grammar is at
 *     pf_region_table_parse());
 *   - /proc/self/mountinfo: every FUSE mount (fuse.gcsfuse, regionfs,
 *     any "fuse" or "fuse.*" file system) is a mount of its own, named in
 *     reports even when no region is declared for it; a detected mount
 *     without a region takes the region declared for the nearest
 *     enclosing path, if any.
 *
 * A file belongs to the mount whose path is the longest prefix of the
 * file's canonical path on whole components (/data2/x is not under
 * /data); files under no mount belong to mount 0, "local", which is in
 * the host's region.  Paths are canonicalised with realpath(3), so
 * symlinks and relative paths match (a path that does not exist is
 * normalised lexically instead); a file's directory is resolved (once
 * for all its files), its last component is not: a file that is itself
 * a symlink counts where it is named.
 *
 * Region names are 1..63 characters of [a-z0-9._-] (upper case is taken
 * as lower case): "us-central1", "europe-west4".
 *
 * Set a table up (create, add, load, scan) from one thread; the first
 * lookup or read freezes it (later additions fail with -EBUSY), and from
 * then on every function is thread-safe.
 */
typedef struct pf_region_table pf_region_table;

#define PF_REGION_NAME_MAX 63u		/* characters of a region name */
#define PF_REGION_MAX_MOUNTS 1024u	/* mounts in one table, all origins */
#define PF_REGION_MAX_LINE 4096u	/* bytes of a mount table line */
#define PF_REGION_MAX_FILE (1u << 20)	/* bytes of a mount table file */
#define PF_MOUNTINFO_MAX (16u << 20)	/* bytes of /proc/self/mountinfo read */

#define PF_REGION_LEXICAL 1u	/* create flag: never touch the file system,
				   normalise paths lexically (tests, fuzzing,
				   tables written for another machine) */

typedef enum pf_mount_origin {
	PF_MOUNT_LOCAL = 0,	/* mount 0: files under no other mount */
	PF_MOUNT_FLAG,		/* pf_region_table_add_flag() / _add() */
	PF_MOUNT_FILE,		/* a line of a mount table file */
	PF_MOUNT_DETECTED,	/* a FUSE mount in /proc/self/mountinfo */
} pf_mount_origin;

typedef struct pf_mount_info {
	const char *path;	/* canonical prefix; "/" for mount 0 */
	const char *region;	/* declared region, or NULL */
	uint32_t region_index;	/* pf_region_table_region() of its files */
	const char *fstype;	/* file system type from mountinfo ("ext4",
				   "fuse.gcsfuse"), or NULL when unknown: no
				   mountinfo, or no mount of it above the path
				   (a chroot's / is often none); not an error */
	const char *source;	/* mountinfo's source ("regionfs:/data"), or NULL */
	bool fuse;		/* fstype is "fuse" or "fuse.*" */
	pf_mount_origin origin;
	const char *origin_file;	/* PF_MOUNT_FILE: the file; else NULL */
	unsigned origin_line;		/* PF_MOUNT_FILE: its line */
} pf_mount_info;

typedef enum pf_region_kind {
	PF_REGION_IN = 0,	/* the host's region (mount 0 is always here) */
	PF_REGION_CROSS,	/* a declared region other than the host's */
	PF_REGION_UNKNOWN,	/* undeclared, or the host's region is not set */
} pf_region_kind;

typedef struct pf_region_info {
	const char *name;	/* region name; NULL: the host's region when it
				   is not set, or the mounts with no region */
	const char *label;	/* never NULL: name, else "local" (region 0)
				   or "undeclared" */
	pf_region_kind kind;
	bool undeclared;	/* the region of FUSE mounts with none declared */
} pf_region_info;

typedef struct pf_region_stats {
	pf_io_stats io;		/* bytes, requests, errors, summed latency
				   (busy_ns) and its histogram */
	uint64_t active_ns;	/* wall time with at least one read in flight */
} pf_region_stats;

/*! pf_region_host(): the host's region: flag when it is set and not
 *  empty, else $PODFEED_REGION when set and not empty, else NULL.
 *  *source (may be NULL) is set to "--region", "PODFEED_REGION" or NULL.
 *  Not validated: pf_region_table_create() does that. */
PF_API const char *pf_region_host(const char *flag, const char **source);

/*! pf_region_name_check(): whether name is a valid region name (see
 *  above).  @return 0, or -EINVAL with err saying why. */
PF_API int pf_region_name_check(const char *name, pf_error *err);

/*! pf_region_table_create(): an empty table for a host in host_region
 *  (NULL: not known; then no region can be called cross-region).  flags:
 *  0 or PF_REGION_LEXICAL.  @return 0 with *out (free with
 *  pf_region_table_free()), -EINVAL for a bad region name, -ENOMEM. */
PF_API int pf_region_table_create(pf_region_table **out, const char *host_region,
				  unsigned flags, pf_error *err);
/*! NULL is a no-op. */
PF_API void pf_region_table_free(pf_region_table *t);

/*! pf_region_table_add(): declare that path (relative: to the working
 *  directory) is stored in region.  Declaring a path twice with the same
 *  region is allowed; with another region it is an error naming both.
 *  @return the mount's index, or -EINVAL (bad path or region, a
 *  conflict), -E2BIG (PF_REGION_MAX_MOUNTS), -EBUSY (frozen), -ENOMEM. */
PF_API int pf_region_table_add(pf_region_table *t, const char *path,
			       const char *region, pf_error *err);
/*! pf_region_table_add_flag(): the same from "PATH=REGION" (split at the
 *  last '=', so a path may hold one). */
PF_API int pf_region_table_add_flag(pf_region_table *t, const char *spec,
				    pf_error *err);

/*! pf_region_table_parse(): add the mounts of a mount table file's text
 *  (len bytes; name is what errors call it).  The grammar, per line:
 *
 *      # a comment                      ignored, as are blank lines
 *      /mnt/gcs/bucket   us-central1    PATH REGION, any blanks between
 *      /data/eu          europe-west4   # a comment may follow
 *
 *  PATH is absolute; a space, tab or backslash in it is written as \040,
 *  \011, \134 (fstab's octal escapes; any \ooo works).  A '#' where a
 *  field would begin starts a comment.  A malformed line stops the
 *  parse with -EINVAL and err->file "name:LINE" (e.g. "mounts.conf:3"),
 *  the message saying what is wrong; a line longer than
 *  PF_REGION_MAX_LINE and a NUL byte are malformed too, and text longer
 *  than PF_REGION_MAX_FILE is -EFBIG (all checked before anything is
 *  allocated).  @return the lines that declared a mount (>= 0) or -errno;
 *  mounts of the lines before a malformed one stay added. */
PF_API int pf_region_table_parse(pf_region_table *t, const char *text,
				 size_t len, const char *name, pf_error *err);
/*! pf_region_table_load(): pf_region_table_parse() of a file (its size is
 *  checked against PF_REGION_MAX_FILE before it is read). */
PF_API int pf_region_table_load(pf_region_table *t, const char *file,
				pf_error *err);

/*! pf_region_table_scan_mountinfo(): take the mounts of mountinfo text
 *  (len bytes, lines of /proc/PID/mountinfo as proc(5) describes them): the FUSE mounts
 *  become mounts of the table (merged with a declared mount of the same
 *  path), and every mount's file system type is kept so that a declared
 *  path is shown with the file system it lies on.  Malformed lines are
 *  skipped and counted in *skipped (may be NULL).  @return the FUSE
 *  mounts found, or -E2BIG, -EBUSY, -ENOMEM. */
PF_API int pf_region_table_scan_mountinfo(pf_region_table *t, const char *text,
					  size_t len, unsigned *skipped,
					  pf_error *err);
/*! pf_mount_bucket_client(): the FUSE bucket client a mount's file system
 *  type names ("s3fs" for fuse.s3fs; rclone, gcsfuse, mountpoint-s3), or
 *  NULL; *advice (may be NULL) the mount options that matter to podfeed
 *  with it (one line, static).  Thread-safe. */
PF_API const char *pf_mount_bucket_client(const char *fstype, const char **advice);
/*! pf_region_table_scan_mounts(): the same over /proc/self/mountinfo.
 *  @return as above, or -errno when it cannot be read. */
PF_API int pf_region_table_scan_mounts(pf_region_table *t, unsigned *skipped,
				       pf_error *err);

/*! The host's region given at creation (lower case), or NULL. */
PF_API const char *pf_region_table_host(const pf_region_table *t);
/*! Mounts in the table (>= 1: mount 0 is "local"). */
PF_API size_t pf_region_table_mounts(const pf_region_table *t);
/*! Mount i (0 <= i < mounts); the strings live as long as the table.
 *  Freezes the table.  @return 0, or -ERANGE. */
PF_API int pf_region_table_mount(pf_region_table *t, size_t i, pf_mount_info *out);
/*! Regions (>= 1: region 0 is the host's).  Freezes the table. */
PF_API size_t pf_region_table_regions(pf_region_table *t);
/*! Region r.  @return 0, or -ERANGE. */
PF_API int pf_region_table_region(pf_region_table *t, size_t r, pf_region_info *out);

/*! pf_region_table_match(): the mount of an already canonical absolute
 *  path (longest prefix on whole components; no file system access).
 *  Freezes the table.  @return the mount index (0: under no mount). */
PF_API size_t pf_region_table_match(pf_region_table *t, const char *canonical);
/*! pf_region_table_lookup(): the mount of any path: canonicalised
 *  (its directory by realpath(3), cached, its name as given; else
 *  lexically against the working directory), then
 *  matched; a table of mount 0 only answers 0 without resolving the path.
 *  Freezes the table.  @return the mount index (never fails: a path that
 *  cannot be resolved is matched as written). */
PF_API size_t pf_region_table_lookup(pf_region_table *t, const char *path);

/*! pf_region_read_begin()/_end(): account one read of a file of mount m:
 *  begin when it is issued, end when it completes with result (bytes or
 *  -errno) after latency_ns.  The I/O engine and pf_source call these;
 *  anyone reading by other means may too.  Thread-safe. */
PF_API void pf_region_read_begin(pf_region_table *t, size_t m);
PF_API void pf_region_read_end(pf_region_table *t, size_t m, int64_t result,
			       uint64_t latency_ns);
/*! pf_region_pread(): pf_file_pread() accounted to mount m of t (t may be
 *  NULL: then it is pf_file_pread()). */
PF_API int64_t pf_region_pread(pf_region_table *t, size_t m, int fd, void *buf,
			       size_t len, uint64_t offset, const char *path,
			       pf_error *err);

/*! Counters of mount m / region r so far (a read in flight counts its
 *  active time up to now).  Unknown indexes give zeros. */
PF_API void pf_region_table_mount_stats(pf_region_table *t, size_t m,
					pf_region_stats *out);
PF_API void pf_region_table_region_stats(pf_region_table *t, size_t r,
					 pf_region_stats *out);
/*! Zero every counter; reads in flight keep counting from now. */
PF_API void pf_region_table_reset_stats(pf_region_table *t);

#ifdef __cplusplus
}
#endif

#endif
