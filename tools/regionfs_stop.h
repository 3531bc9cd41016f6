/* SPDX-License-Identifier: Apache-2.0 */
/* regionfs's stopper: one thread takes SIGINT, SIGTERM and SIGHUP and
 * ends libfuse's loop (regionfs_stop.c says why libfuse's own handlers
 * are not enough before libfuse 3.18). */
#ifndef PF_REGIONFS_STOP_H
#define PF_REGIONFS_STOP_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>

struct fuse_session;

typedef struct stopper {
	pthread_t thread;
	struct fuse_session *se;
	sigset_t stop;		/* SIGINT, SIGTERM, SIGHUP (unless ignored), SIGUSR2 */
	atomic_bool loop_done;
	bool started;
} stopper;

/* Block the stop signals in the calling thread and every thread made
 * after it; call before the mount. */
void stopper_block(stopper *st);

/* Start the stopper for se, after fuse_daemonize().  @return 0, or
 * -errno. */
int stopper_start(stopper *st, struct fuse_session *se);

/* Once the loop has returned: end the stopper. */
void stopper_join(stopper *st);

#endif /* PF_REGIONFS_STOP_H */
