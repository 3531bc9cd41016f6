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

/*! pf_file_pread(): read exactly len bytes at offset, retrying EINTR and
 *  short reads.  @return bytes read (< len only at end of file) or -errno;
 *  on failure err names path and offset. */
PF_API int64_t pf_file_pread(int fd, void *buf, size_t len, uint64_t offset,
			     const char *path, pf_error *err);

/* ------------------------------------------------------------------ */
/* The I/O engine: one per I/O thread                                   */
/* ------------------------------------------------------------------ */
/*
 * Reads byte extents of files into caller buffers.  The back-end is
 * io_uring (one ring per engine, SINGLE_ISSUER|DEFER_TASKRUN where the
 * kernel has them, registered files and buffers) or, where io_uring is
 * refused (-EPERM/-ENOSYS, common in containers) or PODFEED_IO=pread
 * says so, pread(2) with the same interface.  Short reads, EINTR and
 * EAGAIN are retried inside; a request completes with all its bytes, or
 * fewer at end of file, or -errno.  Not thread-safe: one engine per
 * thread, used only by that thread.
 */
typedef struct pf_io pf_io;

typedef struct pf_io_req {
	uint32_t file;		/* index from pf_io_add_file() */
	uint64_t offset;
	uint32_t len;
	void *buf;		/* len bytes; a registered buffer when buf_index >= 0 */
	int buf_index;		/* index of the registered buffer holding buf, or -1 */
	void *user;		/* the caller's tag */
	int64_t result;		/* on completion: bytes read or -errno */
	/* engine-private */
	uint32_t done_bytes;
	uint32_t retries;
	uint64_t start_ns;
} pf_io_req;

#define PF_IO_HIST_BUCKETS 32	/* log2 of microseconds: [2^i, 2^(i+1)) us */

typedef struct pf_io_stats {
	uint64_t bytes;		/* bytes read */
	uint64_t ops;		/* requests completed */
	uint64_t errors;	/* requests that failed */
	uint64_t retries;	/* short reads, EINTR, EAGAIN resubmitted */
	uint64_t busy_ns;	/* summed request latency */
	uint64_t hist[PF_IO_HIST_BUCKETS];
} pf_io_stats;

typedef struct pf_io_config {
	unsigned queue_depth;	/* in-flight requests; 0: 64 */
	unsigned max_files;	/* file table size; 0: 4096 */
	void *buffers;		/* optional region to register: nbuffers x buffer_size */
	size_t buffer_size;
	unsigned nbuffers;
	const char *backend;	/* "uring", "pread", or NULL: $PODFEED_IO, else uring */
	unsigned max_retries;	/* per request for EINTR/EAGAIN; 0: 16 */
} pf_io_config;

#define PF_IO_DIRECT 1u		/* pf_io_add_file(): open with O_DIRECT too */

/*! Create an engine.  @return 0 with *out (free with pf_io_free()), or
 *  -errno with err saying why. */
PF_API int pf_io_create(pf_io **out, const pf_io_config *cfg, pf_error *err);
PF_API void pf_io_free(pf_io *io);
/*! "io_uring" or "pread". */
PF_API const char *pf_io_backend_name(const pf_io *io);
/*! Whether buffers and files are registered with the kernel. */
PF_API bool pf_io_buffers_registered(const pf_io *io);
/*! Open a file for reading through the engine.  @return its index (>= 0)
 *  or -errno with err naming the file. */
PF_API int pf_io_add_file(pf_io *io, const char *path, unsigned flags,
			  pf_error *err);
PF_API uint64_t pf_io_file_size(const pf_io *io, uint32_t file);
PF_API const char *pf_io_file_path(const pf_io *io, uint32_t file);
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
/*! Counters of one file (copied). */
PF_API void pf_io_file_stats(const pf_io *io, uint32_t file, pf_io_stats *out);
/*! The histogram bucket of a latency in nanoseconds. */
PF_API unsigned pf_io_hist_bucket(uint64_t ns);
/*! Latency at quantile q (0..1) of a histogram, in microseconds (the
 *  upper bound of its bucket). */
PF_API double pf_io_stats_quantile_us(const pf_io_stats *st, double q);

#ifdef __cplusplus
}
#endif

#endif
