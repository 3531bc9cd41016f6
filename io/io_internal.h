/* SPDX-License-Identifier: Apache-2.0 */
/* Private to io/: the engine's state and its back-end ops table. */
#ifndef PF_IO_INTERNAL_H
#define PF_IO_INTERNAL_H

#include <liburing.h>

#include "pf_io.h"

typedef struct pf_io_file {
	char *path;
	int fd;
	int direct_fd;		/* O_DIRECT descriptor, or -1 */
	uint64_t size;
	pf_io_stats stats;
	size_t mount;		/* in io->regions, when there is one */
	bool fuse;		/* on a FUSE file system */
} pf_io_file;

/* A storage back-end: chosen from pf_io_backends[] by name, no
 * registration at run time (fio's ioengine_ops). */
typedef struct pf_io_backend {
	const char *name;
	/* @return 0, or -errno; -EPERM/-ENOSYS mean "not here". */
	int (*init)(pf_io *io, const pf_io_config *cfg, pf_error *err);
	void (*exit)(pf_io *io);
	/* A file was opened at index i. */
	int (*file_added)(pf_io *io, uint32_t i);
	/* Hand one queued request to the back-end (never blocks). */
	int (*queue)(pf_io *io, pf_io_req *req);
	/* Push queued work and wait for at least min completions, calling
	 * pf_io_complete() for each. */
	int (*run)(pf_io *io, unsigned min);
} pf_io_backend;

/* How reads are retried, timed out and faulted (fault.c): from a
 * pf_io_config, else the environment, else the defaults (pf_io.h). */
typedef struct pf_io_policy {
	pf_fault_plan faults;
	unsigned retries;	/* transient errors retried per request */
	uint64_t backoff_ns;	/* before the first retry; 0: none */
	uint64_t timeout_ns;	/* each read; 0: no limit */
} pf_io_policy;

struct pf_io {
	const pf_io_backend *be;
	pf_region_table *regions;	/* reads are counted there too, or NULL */
	unsigned queue_depth, max_files;
	pf_io_policy policy;
	uint64_t requests;	/* submitted so far: the next one's number - 1 */
	pf_io_file *files;
	uint32_t nfiles;
	unsigned inflight;	/* submitted, not reaped */

	/* completed requests waiting to be reaped (ring of queue_depth) */
	pf_io_req **done;
	unsigned done_head, done_count;

	/* io_uring */
	struct io_uring ring;
	pf_io_req **injected;	/* faulted in place of a read, no delay:
				   completed by the run loop, not the kernel */
	unsigned ninjected;
	pf_io_req **reading;	/* reads in the kernel, for their deadlines */
	unsigned nreading;
	bool ring_ready;
	bool files_registered;
	uint32_t files_synced;	/* files[0, files_synced) are in the ring's table */
	bool buffers_registered;
	unsigned sq_pending;	/* sqes prepared, not yet submitted */

	/* pread: requests queued, run at reap time */
	pf_io_req **pending;
	unsigned npending;
};

extern const pf_io_backend pf_io_uring_backend;
extern const pf_io_backend pf_io_pread_backend;

#define PF_IO_DIRECT_ALIGN 4096u

uint64_t pf_io_now_ns(void);
/* Account a finished read of res bytes (or -errno) of req; @return true
 * when req is complete (req->result set), false when it must be issued
 * again: the next read is then already planned (req->priv), and the
 * back-end carries it out (short read, EINTR, a transient error). */
bool pf_io_account(pf_io *io, pf_io_req *req, int64_t res);
/* Move a complete request to the done queue. */
void pf_io_complete(pf_io *io, pf_io_req *req);

/* fault.c: the policy, and the reads of one request.  All request state
 * is in req (done_bytes, retries, priv); st gets the counters. */
extern pf_io_totals pf_io_process_totals;	/* updated atomically */
/* @return 0, or -EINVAL with err naming the field or variable. */
int pf_io_policy_init(pf_io_policy *p, const pf_io_config *cfg, pf_error *err);
/* The wait before retry number `retry` (from 1): doubling, capped. */
uint64_t pf_io_backoff_ns(const pf_io_policy *p, uint32_t retry);
/* Plan req's next read: the fault it gets (priv.action, or 0 for a real
 * read), its length (priv.issue_len), the wait before it (priv.delay_ns:
 * the backoff the last judgement set, plus injected latency).  direct:
 * the file is read with O_DIRECT (a short read stays block-aligned). */
void pf_io_attempt_plan(const pf_io_policy *p, pf_io_req *req, bool direct,
			pf_io_stats *st);
/* Judge the planned read's result: @return true when req is complete
 * (req->result set), false when another read is due (priv.delay_ns is
 * the backoff to wait first). */
bool pf_io_attempt_judge(const pf_io_policy *p, pf_io_req *req, int64_t res,
			 pf_io_stats *st);
/* Describe req's failure in err (file, offset of the failed read, cause,
 * retries).  @return req->result, or 0 when it did not fail. */
int pf_io_failure(const pf_io_policy *p, const pf_io_req *req, const char *path,
		  pf_error *err);
/* The read end of a pipe nobody writes ('hang' faults), or -errno. */
int pf_fault_hang_fd(void);

/* file.c: a planned read carried out at once: the delay slept, an
 * injected error returned, else the read issued with p's timeout.
 * @return bytes, or -errno (-ETIMEDOUT when the timeout ended it). */
int64_t pf_io_attempt_sync(const pf_io_policy *p, pf_io_req *req, int fd);
/* One read(2) (off < 0) or pread(2) bounded by timeout_ns (0: none), the
 * thread's timer signal interrupting it.  @return bytes or -errno. */
int64_t pf_read_deadline(int fd, void *buf, size_t len, int64_t off,
			 uint64_t timeout_ns);
void pf_sleep_ns(uint64_t ns);

#endif
