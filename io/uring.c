/* SPDX-License-Identifier: Apache-2.0 */
/* The io_uring back-end: one ring per engine, registered files and
 * buffers where the kernel allows, batched submission. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "io_internal.h"

static int uring_init(pf_io *io, const pf_io_config *cfg, pf_error *err)
{
	/* Flags from most to least wanted; the kernel says -EINVAL for
	 * ones it does not know (SINGLE_ISSUER and DEFER_TASKRUN: 6.0/6.1). */
	static const unsigned flag_sets[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_COOP_TASKRUN,
		0,
	};
	int ret = -EINVAL;

	for (size_t i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
		struct io_uring_params p;

		memset(&p, 0, sizeof(p));
		p.flags = flag_sets[i];
		ret = io_uring_queue_init_params(io->queue_depth, &io->ring, &p);
		if (ret != -EINVAL)
			break;
	}
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				    "io_uring_queue_init: %s", pf_strerror(ret));
	io->ring_ready = true;

	/* A sparse file table filled as files are added; without it (old
	 * kernels) plain descriptors still work. */
	io->files_registered = io_uring_register_files_sparse(&io->ring,
							      io->max_files) == 0;
	if (cfg->buffers && cfg->nbuffers && cfg->buffer_size) {
		struct iovec *iov = calloc(cfg->nbuffers, sizeof(*iov));

		if (!iov)
			return -ENOMEM;
		for (unsigned i = 0; i < cfg->nbuffers; i++) {
			iov[i].iov_base = (char *)cfg->buffers + (size_t)i * cfg->buffer_size;
			iov[i].iov_len = cfg->buffer_size;
		}
		/* -ENOMEM here is RLIMIT_MEMLOCK: read without fixed buffers. */
		io->buffers_registered = io_uring_register_buffers(&io->ring, iov,
								   cfg->nbuffers) == 0;
		free(iov);
	}
	return 0;
}

static void uring_exit(pf_io *io)
{
	if (io->ring_ready)
		io_uring_queue_exit(&io->ring);
	io->ring_ready = false;
}

static int uring_file_added(pf_io *io, uint32_t i)
{
	int fds[1];

	if (!io->files_registered)
		return 0;
	/* Slot 2i: the buffered descriptor; 2i+1 would not fit the sparse
	 * table, so direct descriptors are used unregistered. */
	fds[0] = io->files[i].fd;
	if (io_uring_register_files_update(&io->ring, i, fds, 1) != 1)
		io->files_registered = false;	/* fall back for every file */
	return 0;
}

static int prep(pf_io *io, pf_io_req *req)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
	pf_io_file *f = &io->files[req->file];
	uint32_t done = req->done_bytes;
	void *buf = (char *)req->buf + done;
	bool direct = f->direct_fd >= 0;
	int fd = direct ? f->direct_fd : (io->files_registered ? (int)req->file : f->fd);

	if (!sqe) {
		/* The SQ is full: push what is there and try once more. */
		io_uring_submit(&io->ring);
		io->sq_pending = 0;
		sqe = io_uring_get_sqe(&io->ring);
		if (!sqe)
			return -EBUSY;
	}
	if (req->buf_index >= 0 && io->buffers_registered)
		io_uring_prep_read_fixed(sqe, fd, buf, req->len - done,
					 req->offset + done, req->buf_index);
	else
		io_uring_prep_read(sqe, fd, buf, req->len - done, req->offset + done);
	if (!direct && io->files_registered)
		io_uring_sqe_set_flags(sqe, IOSQE_FIXED_FILE);
	io_uring_sqe_set_data(sqe, req);
	io->sq_pending++;
	return 0;
}

static int uring_queue(pf_io *io, pf_io_req *req)
{
	return prep(io, req);
}

static int uring_run(pf_io *io, unsigned min)
{
	unsigned got = 0;

	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		int ret;

		/* Submit and wait in one system call. */
		ret = io_uring_submit_and_wait(&io->ring, got < min ? 1 : 0);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY &&
		    ret != -ETIME)
			return ret;
		if (ret >= 0)
			io->sq_pending = 0;
		io_uring_for_each_cqe(&io->ring, head, cqe) {
			pf_io_req *req = io_uring_cqe_get_data(cqe);

			seen++;
			if (pf_io_account(io, req, cqe->res)) {
				pf_io_complete(io, req);
				got++;
			} else if (prep(io, req) < 0) {
				req->result = -EBUSY;
				pf_io_complete(io, req);
				got++;
			}
		}
		io_uring_cq_advance(&io->ring, seen);
		if (got >= min && !io->sq_pending)
			return 0;
	}
}

const pf_io_backend pf_io_uring_backend = {
	.name = "io_uring",
	.init = uring_init,
	.exit = uring_exit,
	.file_added = uring_file_added,
	.queue = uring_queue,
	.run = uring_run,
};
