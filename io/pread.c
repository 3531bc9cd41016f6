/* SPDX-License-Identifier: Apache-2.0 */
/* The pread back-end: the same interface where io_uring is refused.
 * Reads are carried out, in order, when the caller reaps; each read is
 * bounded by the timeout through the thread's timer signal (file.c).
 * Opens, which on a remote mount are round trips that gain nothing from
 * waiting in line, run on PF_IO_OPEN_THREADS threads of the engine's own
 * (made at the first open), so that many are in flight beside the reads:
 * a thread carries out one step (the open, or the stat) and hands the
 * result back; the engine's thread judges it (pf_io_account()), as the
 * io_uring back-end judges a completion. */
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "io_internal.h"

static int pread_init(pf_io *io, const pf_io_config *cfg, pf_error *err)
{
	(void)cfg;
	(void)err;
	if (pthread_mutex_init(&io->open_mu, NULL))
		return -ENOMEM;
	pthread_cond_init(&io->open_work, NULL);
	pthread_cond_init(&io->open_done, NULL);
	io->open_pool = true;
	return 0;
}

static void pread_exit(pf_io *io)
{
	if (!io->open_pool)
		return;
	pthread_mutex_lock(&io->open_mu);
	io->open_stop = true;
	pthread_cond_broadcast(&io->open_work);
	pthread_mutex_unlock(&io->open_mu);
	for (unsigned i = 0; i < io->nopen_threads; i++)
		pthread_join(io->open_threads[i], NULL);
	/* Opens done and not yet judged: their descriptors are no file's. */
	for (unsigned i = 0; i < io->nfin; i++)
		if (io->open_fin[i]->step == PF_OPEN_STEP_OPEN && io->open_fin[i]->read_res >= 0)
			close(io->open_fin[i]->read_res);
	pthread_cond_destroy(&io->open_work);
	pthread_cond_destroy(&io->open_done);
	pthread_mutex_destroy(&io->open_mu);
	io->open_pool = false;
}

static void pread_close_fd(pf_io *io, int fd, int kslot)
{
	(void)io;
	(void)kslot;
	if (fd >= 0)
		close(fd);
}

/* An opening thread: steps from open_queue, in order, results to
 * open_fin.  It reads only the op (its path, flags, planned fault),
 * never the engine's file table, which the engine's thread may move
 * meanwhile. */
static void *open_main(void *arg)
{
	pf_io *io = arg;

	pthread_mutex_lock(&io->open_mu);
	for (;;) {
		pf_io_op *op;

		while (!io->nqueued && !io->open_stop)
			pthread_cond_wait(&io->open_work, &io->open_mu);
		if (io->open_stop)
			break;
		op = io->open_queue[io->queue_head];
		io->queue_head = (io->queue_head + 1) % io->queue_depth;
		io->nqueued--;
		pthread_mutex_unlock(&io->open_mu);
		op->read_res = pf_io_open_step_sync(&io->policy, op);
		pthread_mutex_lock(&io->open_mu);
		io->open_fin[io->nfin++] = op;
		pthread_cond_signal(&io->open_done);
	}
	pthread_mutex_unlock(&io->open_mu);
	return NULL;
}

/* Start another opening thread while there are fewer than steps waiting
 * (and fewer than PF_IO_OPEN_THREADS).  With every signal blocked but the
 * timer's (file.c unblocks it on first use): a program's signals go to
 * its own threads.  Call with open_mu held. */
static void open_threads_grow(pf_io *io)
{
	sigset_t all, old;

	if (io->nopen_threads >= PF_IO_OPEN_THREADS || io->nopen_threads >= io->nqueued)
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (!pthread_create(&io->open_threads[io->nopen_threads], NULL, open_main, io))
		io->nopen_threads++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static int pread_queue(pf_io *io, pf_io_op *op)
{
	if (!op->req->open) {
		io->pending[io->npending++] = op;
		return 0;
	}
	pthread_mutex_lock(&io->open_mu);
	io->open_queue[(io->queue_head + io->nqueued) % io->queue_depth] = op;
	io->nqueued++;
	io->opens_out++;
	open_threads_grow(io);
	if (!io->nopen_threads) {
		/* No thread could be made: the step is done here. */
		io->nqueued--;
		pthread_mutex_unlock(&io->open_mu);
		op->read_res = pf_io_open_step_sync(&io->policy, op);
		pthread_mutex_lock(&io->open_mu);
		io->open_fin[io->nfin++] = op;
	} else {
		pthread_cond_signal(&io->open_work);
	}
	pthread_mutex_unlock(&io->open_mu);
	return 0;
}

static void run_one(pf_io *io, pf_io_op *op)
{
	pf_io_file *f = &io->files[op->req->file];

	/* Each read as planned (delay, injected fault, length), bounded by
	 * the timeout, until the engine calls the request complete. */
	while (!pf_io_account(io, op, pf_io_attempt_sync(&io->policy, op, f->fd)))
		;
	pf_io_complete(io, op);
}

/* Judge the open steps the threads finished: complete their requests or
 * hand the next step back.  Waits for one first when wait is set and
 * some are out.  @return the requests completed. */
static unsigned judge_opens(pf_io *io, bool wait)
{
	pf_io_op *fin[64];
	unsigned n, got = 0;

	pthread_mutex_lock(&io->open_mu);
	while (wait && !io->nfin && io->opens_out)
		pthread_cond_wait(&io->open_done, &io->open_mu);
	n = io->nfin < 64 ? io->nfin : 64;
	io->nfin -= n;
	for (unsigned i = 0; i < n; i++)
		fin[i] = io->open_fin[io->nfin + i];
	io->opens_out -= n;
	pthread_mutex_unlock(&io->open_mu);
	for (unsigned i = 0; i < n; i++) {
		if (pf_io_account(io, fin[i], fin[i]->read_res)) {
			pf_io_complete(io, fin[i]);
			got++;
		} else {
			pread_queue(io, fin[i]);
		}
	}
	return got;
}

static int pread_run(pf_io *io, unsigned min)
{
	unsigned got = 0;

	/* The reads queued run now; blocking is the point of this path. */
	for (unsigned i = 0; i < io->npending; i++)
		run_one(io, io->pending[i]);
	got += io->npending;
	io->npending = 0;
	/* Opens come back from their threads; wait for them only while
	 * fewer than min requests completed. */
	got += judge_opens(io, false);
	while (got < min && io->opens_out)
		got += judge_opens(io, true);
	return 0;
}

const pf_io_backend pf_io_pread_backend = {
	.name = "pread",
	.init = pread_init,
	.exit = pread_exit,
	.close_fd = pread_close_fd,
	.queue = pread_queue,
	.run = pread_run,
};
