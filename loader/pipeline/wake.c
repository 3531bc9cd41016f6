/* SPDX-License-Identifier: Apache-2.0 */
/* Waking the pipeline's threads, and stopping them: the decoders (their
 * own, or a mixture's decode pool), the I/O thread whatever it waits for,
 * and every thread on the first failure or a halt.  The bottom of the
 * pipeline: every file of it calls here, and this file calls none of
 * theirs. */
#include "pipeline_internal.h"

void pf_decode_pool_wake(pf_decode_pool *p, bool all)
{
	__atomic_add_fetch(&p->seq, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&p->mu);
	if (all)
		pthread_cond_broadcast(&p->cv);
	else
		pthread_cond_signal(&p->cv);	/* one read: one thread */
	pthread_mutex_unlock(&p->mu);
}

/* Work for the decoders (l->mu held): its own, or its pool's. */
void pf_decode_signal(pf_pipe *l)
{
	/* With workers parked (autotune's, past active_workers), one woken
	 * by the signal finds nothing it may take and sleeps again: the
	 * chunk then waited in the queue with every worker asleep, the
	 * consumer waiting for its rows and the I/O thread for a slot (seen
	 * reading through s3fs and rclone, where reads are slow and autotune
	 * keeps one worker).  Then all are woken. */
	if (l->active_workers < l->nworkers)
		pthread_cond_broadcast(&l->cv_decode);
	else
		pthread_cond_signal(&l->cv_decode);
	if (l->pool)
		pf_decode_pool_wake(l->pool, false);
}

void pf_decode_broadcast(pf_pipe *l)
{
	pthread_cond_broadcast(&l->cv_decode);
	if (l->pool)
		pf_decode_pool_wake(l->pool, true);
}

/* Wake every thread waiting on the loader.  Call with mu held. */
void pf_pipe_wake_all(pf_pipe *l)
{
	pthread_cond_broadcast(&l->cv_chunk);
	pthread_cond_broadcast(&l->cv_cbuf);
	pf_decode_broadcast(l);
	pthread_cond_broadcast(&l->cv_block);
	pthread_cond_broadcast(&l->cv_batch);
	pthread_cond_broadcast(&l->cv_ready);
	pthread_cond_broadcast(&l->cv_init);	/* an I/O thread at its gate */
}

/* Wake the I/O thread if it sleeps, whatever it waits for.  Call with mu
 * held. */
void pf_pipe_wake_io(pf_pipe *l)
{
	if (l->io_sleep)
		pthread_cond_broadcast(l->io_sleep);
}

/* Record the first failure and wake everyone.  Call with mu held. */
void pf_pipe_fail_locked(pf_pipe *l, const pf_error *err, int code)
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
	pf_pipe_wake_all(l);
}

void pf_pipe_fail(pf_pipe *l, const pf_error *err, int code)
{
	pthread_mutex_lock(&l->mu);
	pf_pipe_fail_locked(l, err, code);
	pthread_mutex_unlock(&l->mu);
}

void pf_pipe_halt(pf_pipe *l)
{
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pf_pipe_wake_all(l);
	pthread_mutex_unlock(&l->mu);
}
