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

struct pf_io {
	const pf_io_backend *be;
	pf_region_table *regions;	/* reads are counted there too, or NULL */
	unsigned queue_depth, max_files, max_retries;
	pf_io_file *files;
	uint32_t nfiles;
	unsigned inflight;	/* submitted, not reaped */

	/* completed requests waiting to be reaped (ring of queue_depth) */
	pf_io_req **done;
	unsigned done_head, done_count;

	/* io_uring */
	struct io_uring ring;
	bool ring_ready;
	bool files_registered;
	bool buffers_registered;
	unsigned sq_pending;	/* sqes prepared, not yet submitted */

	/* pread: requests queued, run at reap time */
	pf_io_req **pending;
	unsigned npending;
};

extern const pf_io_backend pf_io_uring_backend;
extern const pf_io_backend pf_io_pread_backend;

uint64_t pf_io_now_ns(void);
/* Account a finished read of res bytes (or -errno) of req; @return true
 * when req is complete, false when it must be resubmitted (short read,
 * EINTR, EAGAIN). */
bool pf_io_account(pf_io *io, pf_io_req *req, int64_t res);
/* Move a complete request to the done queue. */
void pf_io_complete(pf_io *io, pf_io_req *req);

#endif
