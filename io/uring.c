/* SPDX-License-Identifier: Apache-2.0 */
/* The io_uring back-end: one ring per engine, registered files and
 * buffers where the kernel allows, batched submission.  Files are opened
 * through the ring too (IORING_OP_OPENAT, O_NONBLOCK, then IORING_OP_STATX
 * of the descriptor, then IORING_OP_FILES_UPDATE into the registered
 * table), many at once beside the reads, and leave the table through
 * IORING_OP_CLOSE.  A wait before a read or open (retry backoff,
 * injected latency) is an IORING_OP_TIMEOUT of its own, after whose
 * completion the step is issued, so no thread sleeps.  Timeouts are
 * deadlines the run loop keeps: it waits no longer than the nearest, and
 * cancels a step that passed it (pf_io.h says why not
 * IORING_OP_LINK_TIMEOUT); with pf_io_set_abandon(), a step still in the
 * kernel a grace after its cancellation is abandoned: its request
 * completes with -ETIMEDOUT, a spare op takes its place, and its own
 * completions are swallowed when they come (an open's descriptor
 * closed).  Measured cause (issue 38): a buffered read of a FUSE file
 * whose daemon retries a dead server (rclone: 10 low-level retries, 20
 * minutes) waits for its page killably in an io-wq worker; the
 * cancellation only signals the worker, which is no fatal signal, so
 * the read went on and the engine waited for it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

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
	/* A request has at most two SQEs and CQEs in flight (a read and its
	 * cancellation): room for all without overflow. */
	unsigned sq = io->queue_depth * 2 < 32768 ? io->queue_depth * 2 : 32768;
	unsigned cq = io->queue_depth * 4 < 65536 ? io->queue_depth * 4 : 65536;
	int ret = -EINVAL;

	for (size_t i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
		struct io_uring_params p;

		memset(&p, 0, sizeof(p));
		p.flags = flag_sets[i] | IORING_SETUP_CQSIZE;
		p.cq_entries = cq;
		ret = io_uring_queue_init_params(sq, &io->ring, &p);
		if (ret != -EINVAL)
			break;
	}
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				    "io_uring_queue_init: %s", pf_strerror(ret));
	io->ring_ready = true;

	/* Opens go through the ring where it has them (5.6: OPENAT, STATX,
	 * CLOSE); else they are done in this thread. */
	{
		struct io_uring_probe *probe = io_uring_get_probe_ring(&io->ring);

		io->ring_opens = probe && io_uring_opcode_supported(probe, IORING_OP_OPENAT) &&
				 io_uring_opcode_supported(probe, IORING_OP_STATX) &&
				 io_uring_opcode_supported(probe, IORING_OP_CLOSE);
		io_uring_free_probe(probe);
	}
	/* A sparse file table that opens fill themselves (the kernel picks
	 * the slot: IORING_FILE_INDEX_ALLOC, 5.19); without it (old kernels)
	 * plain descriptors still work. */
	io->files_registered = io_uring_register_files_sparse(&io->ring,
							      io->max_files) == 0;
	io->fixed_opens = io->files_registered && io->ring_opens;
	/* Opens, stats and reads that block (FUSE, cold files) wait in io-wq
	 * workers; its bounded ones are 4 per CPU by default, which would
	 * keep all but a few of queue_depth opens of a far bucket waiting
	 * for a worker.  A kernel without the call keeps its default. */
	{
		unsigned workers[2] = { io->queue_depth, 0 };

		io_uring_register_iowq_max_workers(&io->ring, workers);
	}
	if (cfg->buffers && cfg->nbuffers && cfg->buffer_size) {
		struct iovec *iov;

		/* A sparse table, each buffer registered at its first read
		 * (register_buffer()): registering pins, so faults in, every
		 * page of the buffer, and the first reads of a loader use a
		 * few of its buffers (21 MiB of them faulted in before its
		 * first read, 4 in 5 not needed for the first batch). */
		io->buf_live = pf_calloc(cfg->nbuffers, 1);
		if (!io->buf_live)
			return -ENOMEM;
		if (io_uring_register_buffers_sparse(&io->ring, cfg->nbuffers) == 0) {
			io->buffers_base = cfg->buffers;
			io->buffer_size = cfg->buffer_size;
			io->nbuffers = cfg->nbuffers;
			io->buffers_registered = true;
			return 0;
		}
		/* Kernels before 5.19: all of them now. */
		pf_free(io->buf_live);
		io->buf_live = NULL;
		iov = pf_calloc(cfg->nbuffers, sizeof(*iov));
		if (!iov)
			return -ENOMEM;
		for (unsigned i = 0; i < cfg->nbuffers; i++) {
			iov[i].iov_base = (char *)cfg->buffers + (size_t)i * cfg->buffer_size;
			iov[i].iov_len = cfg->buffer_size;
		}
		/* -ENOMEM here is RLIMIT_MEMLOCK: read without fixed buffers. */
		io->buffers_registered = io_uring_register_buffers(&io->ring, iov,
								   cfg->nbuffers) == 0;
		pf_free(iov);
	}
	return 0;
}

/* Whether buffer i of the sparse table can be read into as a fixed
 * buffer: registered now if it is not yet.  A buffer the kernel refuses
 * (RLIMIT_MEMLOCK) is read into unregistered, as every buffer is where
 * registration failed at creation.  1 byte a buffer: 0 not yet, 1 in
 * the table, 2 refused. */
static bool register_buffer(pf_io *io, int i)
{
	struct iovec iov;

	if (!io->buf_live)
		return true;	/* all registered at creation */
	if ((unsigned)i >= io->nbuffers)
		return false;
	if (!io->buf_live[i]) {
		iov.iov_base = io->buffers_base + (size_t)i * io->buffer_size;
		iov.iov_len = io->buffer_size;
		io->buf_live[i] = io_uring_register_buffers_update_tag(&io->ring, (unsigned)i,
								       &iov, NULL, 1) == 1 ? 1 : 2;
	}
	return io->buf_live[i] == 1;
}

/* user_data: the op's address, the kind of SQE in its low bits (a
 * pf_io_op is 8-byte aligned).  TAG_READ is a read or an open step, the
 * one SQE of the op that a deadline may cancel; TAG_CLOSE, with no op, a
 * registered file leaving the table. */
enum { TAG_READ = 0, TAG_DELAY = 1, TAG_CANCEL = 2, TAG_CLOSE = 3, TAG_MASK = 7 };

static void *tagged(pf_io_op *op, uintptr_t tag)
{
	return (void *)((uintptr_t)op | tag);
}

/* The delay's timespec lives in the op until the SQE is submitted (the
 * kernel copies it then). */
static struct __kernel_timespec *delay_timespec(pf_io_op *op, uint64_t ns)
{
	op->ts = (struct __kernel_timespec){ .tv_sec = (long long)(ns / 1000000000),
					     .tv_nsec = (long long)(ns % 1000000000) };
	return &op->ts;
}

/* Room for one more SQE.  @return 0 or -EBUSY. */
static int sq_room(pf_io *io)
{
	if (!io_uring_sq_space_left(&io->ring)) {
		io_uring_submit(&io->ring);
		io->sq_pending = io_uring_sq_ready(&io->ring);
	}
	return io_uring_sq_space_left(&io->ring) ? 0 : -EBUSY;
}

/* The reads in flight, for their deadlines (unordered; swap-removed). */
static void reading_add(pf_io *io, pf_io_op *op)
{
	op->slot = io->nreading;
	io->reading[io->nreading++] = op;
}

static void reading_remove(pf_io *io, pf_io_op *op)
{
	pf_io_op *last = io->reading[--io->nreading];

	io->reading[op->slot] = last;
	last->slot = op->slot;
}

/* The op's step is in the kernel: its deadline, when there is one. */
static void step_sent(pf_io *io, pf_io_op *a)
{
	a->cqes = 1;
	io->sq_pending++;
	if (io->policy.timeout_ns) {
		a->deadline_ns = pf_now_ns() + io->policy.timeout_ns;
		reading_add(io, a);
	}
}

/* An open step: the open, the stat of its descriptor, or its move into
 * the registered table.  The open and the stat run in io-wq workers (the
 * kernel forces stat there, and sends an open there when the lookup
 * would block); the move is done inline. */
static int issue_open_step(pf_io *io, pf_io_op *a)
{
	struct io_uring_sqe *sqe;
	int ret;

	if (!io->ring_opens) {
		/* An old kernel: done here, completed by the run loop. */
		a->read_res = pf_io_open_step_sync(&io->policy, a);
		io->local[io->nlocal++] = a;
		return 0;
	}
	ret = sq_room(io);
	if (ret < 0)
		return ret;
	sqe = io_uring_get_sqe(&io->ring);
	if (a->step == PF_OPEN_STEP_OPEN) {
		/* A plain descriptor, which a stat can be asked of. */
		io_uring_prep_openat(sqe, AT_FDCWD, a->path, a->open_flags | O_CLOEXEC, 0);
		a->opening = true;
	} else if (a->step == PF_OPEN_STEP_STAT) {
		io_uring_prep_statx(sqe, a->open_fd, "", AT_EMPTY_PATH, PF_STATX_MASK, &a->stx);
	} else {
		/* liburing 2.3 sends the offset as it is: ALLOC, a slot the
		 * kernel picks (5.19), written over install_fd. */
		io_uring_prep_files_update(sqe, &a->install_fd, 1, (int)IORING_FILE_INDEX_ALLOC);
	}
	/* On FUSE the open (and a stat) blocks even with its lookup cached:
	 * straight to an io-wq worker, so that many are in flight and the
	 * submitter never waits out a round trip. */
	if (a->blocking && a->step != PF_OPEN_STEP_INSTALL)
		sqe->flags |= IOSQE_ASYNC;
	io_uring_sqe_set_data(sqe, tagged(a, TAG_READ));
	step_sent(io, a);
	return 0;
}

/* The move of an open file's descriptor into the table ended with res
 * (1, or -errno): the file is read through its slot, the plain
 * descriptor closed (on FUSE through the ring: a close there waits for
 * the daemon's flush); or, the table full (ENFILE) or the kernel unable
 * to pick a slot (EINVAL before 5.19, from now on every file), through
 * the plain descriptor. */
static void install_done(pf_io *io, pf_io_op *op, int64_t res)
{
	pf_io_file *f = &io->files[op->req->file];
	struct io_uring_sqe *sqe;

	if (res < 0) {
		if (res == -EINVAL)
			io->fixed_opens = false;
		return;
	}
	f->kslot = op->install_fd;
	if (op->blocking && sq_room(io) == 0) {
		sqe = io_uring_get_sqe(&io->ring);
		io_uring_prep_close(sqe, f->fd);
		io_uring_sqe_set_data(sqe, (void *)(uintptr_t)TAG_CLOSE);
		io->sq_pending++;
	} else {
		close(f->fd);
	}
	f->fd = -1;
}

static int issue_read(pf_io *io, pf_io_op *a)
{
	const pf_io_req *req = a->req;
	pf_io_file *f = &io->files[req->file];
	void *buf = (char *)req->buf + req->done_bytes;
	uint64_t off = req->offset + req->done_bytes;
	unsigned flags = 0;
	struct io_uring_sqe *sqe;
	int fd, ret;

	if (req->open)
		return issue_open_step(io, a);
	ret = sq_room(io);
	if (ret < 0)
		return ret;
	sqe = io_uring_get_sqe(&io->ring);
	if (a->action == PF_FAULT_HANG) {
		/* A pipe no one writes: the read waits in the kernel until
		 * its deadline cancels it. */
		fd = pf_fault_hang_fd();
		if (fd < 0)
			return fd;
		io_uring_prep_read(sqe, fd, buf, a->issue_len, (uint64_t)-1);
	} else {
		fd = f->kslot >= 0 ? f->kslot : f->fd;
		if (req->buf_index >= 0 && io->buffers_registered &&
		    register_buffer(io, req->buf_index))
			io_uring_prep_read_fixed(sqe, fd, buf, a->issue_len, off,
						 req->buf_index);
		else
			io_uring_prep_read(sqe, fd, buf, a->issue_len, off);
		if (f->kslot >= 0)
			flags |= IOSQE_FIXED_FILE;
		/* A FUSE read may block in the submitting thread (the kernel
		 * issues it inline and waits for the daemon), where nothing
		 * can cancel it; in an io-wq worker a cancellation interrupts
		 * the wait. */
		if (f->fuse)
			flags |= IOSQE_ASYNC;
	}
	io_uring_sqe_set_flags(sqe, flags);
	io_uring_sqe_set_data(sqe, tagged(a, TAG_READ));
	step_sent(io, a);
	return 0;
}

/* Start op's planned read: its wait first if it has one, then the read,
 * or the injected error.  @return 0 or -errno. */
static int issue(pf_io *io, pf_io_op *a)
{
	struct io_uring_sqe *sqe;
	int ret;

	if (a->delay_ns) {
		ret = sq_room(io);
		if (ret < 0)
			return ret;
		sqe = io_uring_get_sqe(&io->ring);
		io_uring_prep_timeout(sqe, delay_timespec(a, a->delay_ns), 0, 0);
		io_uring_sqe_set_data(sqe, tagged(a, TAG_DELAY));
		a->cqes = 1;
		io->sq_pending++;
		return 0;
	}
	if (a->action == PF_FAULT_EIO || a->action == PF_FAULT_ENOENT) {
		io->injected[io->ninjected++] = a;
		return 0;
	}
	return issue_read(io, a);
}

/* @return 1 when op's request completed, else 0. */
static unsigned start(pf_io *io, pf_io_op *op)
{
	int ret = issue(io, op);

	if (ret == 0)
		return 0;
	op->req->result = ret;
	pf_io_complete(io, op);
	return 1;
}

/* A read (or open step) of op ended with res: complete its request or
 * start the next. */
static unsigned finish(pf_io *io, pf_io_op *op, int64_t res)
{
	if (op->req->open && op->step == PF_OPEN_STEP_OPEN)
		op->opening = false;
	if (op->req->open && op->step == PF_OPEN_STEP_INSTALL) {
		install_done(io, op, res);
		res = 0;
	}
	if (pf_io_account(io, op, res)) {
		pf_io_complete(io, op);
		return 1;
	}
	return start(io, op);
}

/* When a cancelled step still in the kernel is abandoned: a grace after
 * its deadline, at most the timeout itself. */
static uint64_t abandon_at(const pf_io *io, const pf_io_op *a)
{
	uint64_t grace = PF_IO_ABANDON_GRACE_MS * 1000000ull;

	return a->deadline_ns + (io->policy.timeout_ns < grace ? io->policy.timeout_ns : grace);
}

/* Complete a's request without its step, which stays in the kernel: a
 * spare op takes a's place among the idle ones, and a's completions
 * still due are swallowed (abandoned_cqe()).  @return 1, or 0 when no
 * spare is left (a is waited for, as without abandoning). */
static unsigned abandon(pf_io *io, pf_io_op *a)
{
	pf_io_op *spare;

	if (!io->nspare)
		return 0;
	reading_remove(io, a);
	a->req->abandoned = true;
	/* Judged as a timed-out step: counted, never retried. */
	if (!pf_io_account(io, a, -ETIMEDOUT))
		return 0;	/* cannot be: a timeout is never retried */
	pf_io_complete(io, a);	/* a is on top of the idle ones now */
	spare = io->spare[--io->nspare];
	*spare = (pf_io_op){ 0 };
	io->idle[io->nidle - 1] = spare;
	a->abandoned = true;
	io->nabandoned++;
	return 1;
}

/* A completion of an abandoned step (the step's own or its
 * cancellation's): an open's descriptor closed; after its last, the op
 * is a spare again. */
static void abandoned_cqe(pf_io *io, pf_io_op *a, const struct io_uring_cqe *cqe)
{
	if ((io_uring_cqe_get_data64(cqe) & TAG_MASK) == TAG_READ && a->opening) {
		a->opening = false;
		if (cqe->res >= 0)
			close(cqe->res);
	}
	if (--a->cqes)
		return;
	a->abandoned = false;
	io->nabandoned--;
	io->spare[io->nspare++] = a;
}

static unsigned on_cqe(pf_io *io, const struct io_uring_cqe *cqe)
{
	uintptr_t data = (uintptr_t)io_uring_cqe_get_data(cqe);
	pf_io_op *a = (pf_io_op *)(data & ~(uintptr_t)TAG_MASK);
	int64_t res;

	if ((data & TAG_MASK) != TAG_CLOSE && a->abandoned) {
		abandoned_cqe(io, a, cqe);
		return 0;
	}
	switch (data & TAG_MASK) {
	case TAG_CLOSE:
		return 0;	/* a registered file left the table */
	case TAG_DELAY:
		/* -ETIME: the wait is over.  Anything else (the ring going
		 * away) ends the request. */
		a->delay_ns = 0;
		a->cqes = 0;
		if (cqe->res != -ETIME && cqe->res < 0)
			return finish(io, a, cqe->res);
		return start(io, a);
	case TAG_READ:
		a->read_res = cqe->res;
		if (io->policy.timeout_ns)
			reading_remove(io, a);
		break;
	default:
		/* The cancellation: 0 (it stopped the read), -EALREADY (the
		 * read is running and was told to stop) or -ENOENT (it had
		 * finished).  The read's own completion says how it ended. */
		break;
	}
	/* A cancelled read and its cancellation complete in either order:
	 * judge the read once both are in. */
	if (--a->cqes)
		return 0;
	res = a->read_res;
	if (res < 0 && a->timed_out)
		res = -ETIMEDOUT;
	return finish(io, a, res);
}

/* Cancel the reads past their deadline, and abandon (pf_io_set_abandon())
 * those cancelled a grace ago that did not end; *got counts the requests
 * that completed so.  @return the nearest deadline of the others, or
 * UINT64_MAX. */
static uint64_t cancel_expired(pf_io *io, uint64_t now, unsigned *got)
{
	uint64_t next = UINT64_MAX;

	for (unsigned i = 0; i < io->nreading; i++) {
		pf_io_op *a = io->reading[i];
		struct io_uring_sqe *sqe;

		if (a->timed_out) {
			uint64_t at = abandon_at(io, a);
			unsigned n;

			if (!io->abandon)
				continue;
			if (at > now) {
				next = at < next ? at : next;
				continue;
			}
			n = abandon(io, a);
			*got += n;
			i -= n;	/* the last took a's place */
			continue;
		}
		if (a->deadline_ns > now) {
			next = a->deadline_ns < next ? a->deadline_ns : next;
			continue;
		}
		if (sq_room(io) < 0) {
			next = now;	/* try again at the next turn */
			continue;
		}
		sqe = io_uring_get_sqe(&io->ring);
		io_uring_prep_cancel(sqe, tagged(a, TAG_READ), 0);
		io_uring_sqe_set_data(sqe, tagged(a, TAG_CANCEL));
		a->timed_out = true;
		a->cqes++;
		io->sq_pending++;
	}
	return next;
}

/* Reads faulted without a wait complete here, not in the kernel; so do
 * the open steps done in this thread. */
static unsigned drain_injected(pf_io *io)
{
	unsigned got = 0;

	while (io->ninjected) {
		pf_io_op *op = io->injected[--io->ninjected];

		got += finish(io, op, op->action == PF_FAULT_ENOENT ? -ENOENT : -EIO);
	}
	while (io->nlocal) {
		pf_io_op *op = io->local[--io->nlocal];

		got += finish(io, op, op->read_res);
	}
	return got;
}

/* A plain descriptor is closed at once; a registered one leaves the
 * table with the next submission (its completion is not waited for: the
 * kernel hands the slot out again only once it is free). */
static void uring_close_fd(pf_io *io, int fd, int kslot)
{
	struct io_uring_sqe *sqe;

	if (fd >= 0)
		close(fd);
	if (kslot < 0)
		return;
	if (sq_room(io) < 0) {
		int none = -1;

		io_uring_register_files_update(&io->ring, (unsigned)kslot, &none, 1);
		return;
	}
	sqe = io_uring_get_sqe(&io->ring);
	io_uring_prep_close_direct(sqe, (unsigned)kslot);
	io_uring_sqe_set_data(sqe, (void *)(uintptr_t)TAG_CLOSE);
	io->sq_pending++;
}

static int uring_queue(pf_io *io, pf_io_op *op)
{
	start(io, op);		/* a failure completes op's request with it */
	return 0;
}

static int uring_run(pf_io *io, unsigned min)
{
	unsigned got = 0;

	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		uint64_t next = UINT64_MAX;
		int ret;

		got += drain_injected(io);
		if (io->nreading) {
			uint64_t now = pf_now_ns();

			next = cancel_expired(io, now, &got);
			next = next == UINT64_MAX ? next : next > now ? next - now : 0;
		}
		if (got >= min && !io->sq_pending)
			return 0;
		/* Submit and wait in one system call, no longer than the
		 * nearest deadline; what is not complete is in the kernel. */
		if (got < min && next != UINT64_MAX) {
			struct __kernel_timespec ts = {
				.tv_sec = (long long)(next / 1000000000),
				.tv_nsec = (long long)(next % 1000000000),
			};

			ret = io_uring_submit_and_wait_timeout(&io->ring, &cqe, 1, &ts, NULL);
		} else {
			ret = io_uring_submit_and_wait(&io->ring, got < min ? 1 : 0);
		}
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY &&
		    ret != -ETIME)
			return ret;
		io->sq_pending = io_uring_sq_ready(&io->ring);
		io_uring_for_each_cqe(&io->ring, head, cqe) {
			seen++;
			/* liburing's own timeout, on kernels without
			 * IORING_FEAT_EXT_ARG. */
			if (cqe->user_data != LIBURING_UDATA_TIMEOUT)
				got += on_cqe(io, cqe);
		}
		io_uring_cq_advance(&io->ring, seen);
	}
}

/* How long the end of an engine waits for its opens still in the
 * kernel: an open on a stuck FUSE mount runs in an io-wq worker, which a
 * cancel only signals, and a loader freed because its mount stopped
 * answering must not hang there. */
#define OPENS_DRAIN_NS (2 * 1000000000ull)

/* Opens still in the kernel make plain descriptors, which the ring's
 * end would not close (a registered slot goes with it): each is
 * cancelled, its completion waited for (at most OPENS_DRAIN_NS: past
 * that, what a stuck open makes is left open, the lesser evil) and what
 * it opened closed. */
static void opens_drain(pf_io *io)
{
	uint64_t deadline = pf_now_ns() + OPENS_DRAIN_NS;
	unsigned left = 0;

	/* The spares too: one in use, or abandoned, may be an open. */
	for (unsigned i = 0; i < 2 * io->queue_depth; i++) {
		pf_io_op *a = &io->ops[i];
		struct io_uring_sqe *sqe;

		if (!a->opening || sq_room(io) < 0)
			continue;
		sqe = io_uring_get_sqe(&io->ring);
		io_uring_prep_cancel(sqe, tagged(a, TAG_READ), 0);
		io_uring_sqe_set_data(sqe, tagged(a, TAG_CANCEL));
		left++;
	}
	if (left)
		io_uring_submit(&io->ring);
	while (left) {
		struct io_uring_cqe *cqe;
		struct __kernel_timespec ts;
		uint64_t now = pf_now_ns();
		pf_io_op *a;
		uintptr_t data;

		if (now >= deadline)
			break;
		ts.tv_sec = (long long)((deadline - now) / 1000000000ull);
		ts.tv_nsec = (long long)((deadline - now) % 1000000000ull);
		if (io_uring_wait_cqe_timeout(&io->ring, &cqe, &ts) < 0 &&
		    io_uring_peek_cqe(&io->ring, &cqe))
			break;
		while (io_uring_peek_cqe(&io->ring, &cqe) == 0) {
			data = (uintptr_t)io_uring_cqe_get_data(cqe);
			a = (pf_io_op *)(data & ~(uintptr_t)TAG_MASK);
			if ((data & TAG_MASK) == TAG_READ && a && a->opening) {
				a->opening = false;
				if (cqe->res >= 0)
					close(cqe->res);
				left--;
			}
			io_uring_cqe_seen(&io->ring, cqe);
		}
	}
}

static void uring_exit(pf_io *io)
{
	if (io->ring_ready && io->ops)
		opens_drain(io);
	if (io->ring_ready)
		io_uring_queue_exit(&io->ring);
	io->ring_ready = false;
	pf_free(io->buf_live);
	io->buf_live = NULL;
}
const pf_io_backend pf_io_uring_backend = {
	.name = "io_uring",
	.init = uring_init,
	.exit = uring_exit,
	.close_fd = uring_close_fd,
	.queue = uring_queue,
	.run = uring_run,
};
