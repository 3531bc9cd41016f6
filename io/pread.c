/* SPDX-License-Identifier: Apache-2.0 */
/* The pread back-end: the same interface where io_uring is refused.
 * Requests are carried out, in order, when the caller reaps; each read is
 * bounded by the timeout through the thread's timer signal (file.c). */
#include <errno.h>
#include <unistd.h>

#include "io_internal.h"

static int pread_init(pf_io *io, const pf_io_config *cfg, pf_error *err)
{
	(void)io;
	(void)cfg;
	(void)err;
	return 0;
}

static void pread_exit(pf_io *io)
{
	(void)io;
}

static int pread_file_added(pf_io *io, uint32_t i)
{
	(void)io;
	(void)i;
	return 0;
}

static int pread_queue(pf_io *io, pf_io_op *op)
{
	io->pending[io->npending++] = op;
	return 0;
}

static void run_one(pf_io *io, pf_io_op *op)
{
	pf_io_file *f = &io->files[op->req->file];
	int fd = f->direct_fd >= 0 ? f->direct_fd : f->fd;

	/* Each read as planned (delay, injected fault, length), bounded by
	 * the timeout, until the engine calls the request complete. */
	while (!pf_io_account(io, op, pf_io_attempt_sync(&io->policy, op, fd)))
		;
	pf_io_complete(io, op);
}

static int pread_run(pf_io *io, unsigned min)
{
	/* Everything queued runs now; blocking is the point of this path. */
	(void)min;
	for (unsigned i = 0; i < io->npending; i++)
		run_one(io, io->pending[i]);
	io->npending = 0;
	return 0;
}

const pf_io_backend pf_io_pread_backend = {
	.name = "pread",
	.init = pread_init,
	.exit = pread_exit,
	.file_added = pread_file_added,
	.queue = pread_queue,
	.run = pread_run,
};
