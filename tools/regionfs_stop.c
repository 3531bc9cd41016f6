/* SPDX-License-Identifier: Apache-2.0 */
/* Stopping on SIGINT, SIGTERM and SIGHUP.  libfuse before 3.18 (Debian
 * 12 has 3.14) stops its multi-threaded loop only when one of its
 * threads next looks at the session's exit flag: fuse_session_exit()
 * wakes nobody.  Its own handlers set that flag in whichever thread the
 * signal lands on, and a signal that lands between a thread's look at
 * the flag and its sleep (sem_wait() in the loop's main thread, read(2)
 * of /dev/fuse in a worker) is spent: the loop then runs until the next
 * request, which on an idle mount never comes (a test's SIGHUP went
 * unanswered for 15 s on a machine at load 30).  So the three signals
 * are blocked in every thread and taken by one thread with sigwait(),
 * which sets the flag and then kicks the process with SIGUSR1 (a handler
 * that does nothing, installed without SA_RESTART so that a sleep ends
 * with EINTR) every STOP_KICK_MS until the loop has returned: a kick
 * that lands in the window is followed by one that finds the thread
 * asleep.  A process-directed signal goes to the main thread, which runs
 * the loop, whenever it does not block it. */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fuse_lowlevel.h>	/* fuse_session_exit() */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "regionfs_stop.h"

#define STOP_KICK_MS 20

static void kick_handler(int sig)
{
	(void)sig;
}

static void *stopper_main(void *arg)
{
	stopper *st = arg;
	struct timespec kick = { 0, STOP_KICK_MS * 1000000L };
	int sig;

	if (sigwait(&st->stop, &sig) != 0 || atomic_load(&st->loop_done))
		return NULL;
	fuse_session_exit(st->se);
	while (!atomic_load(&st->loop_done)) {
		kill(getpid(), SIGUSR1);
		nanosleep(&kick, NULL);
	}
	return NULL;
}

/* Block the stop signals in this thread and so in every thread made
 * after it (libfuse's workers, the stopper): before the mount, so that a
 * signal that comes as soon as the mount shows waits for the stopper
 * instead of killing the process with the mount left behind.  A stop
 * signal this process was started with ignored stays ignored, as
 * libfuse's own handlers leave it (`nohup regionfs` outlives its
 * terminal); SIGUSR2 is the stopper's own wake-up at exit. */
void stopper_block(stopper *st)
{
	static const int stops[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction old;

	memset(st, 0, sizeof(*st));
	sigemptyset(&st->stop);
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
		if (sigaction(stops[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaddset(&st->stop, stops[i]);
	sigaddset(&st->stop, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &st->stop, NULL);
}

/* After fuse_daemonize() (a fork keeps no threads).  @return 0, or
 * -errno. */
int stopper_start(stopper *st, struct fuse_session *se)
{
	struct sigaction sa;
	sigset_t mask;
	int ret;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kick_handler;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) < 0)
		return -errno;
	st->se = se;
	/* The stopper takes no kicks of its own. */
	mask = st->stop;
	sigaddset(&mask, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	ret = -pthread_create(&st->thread, NULL, stopper_main, st);
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &mask, NULL);
	st->started = ret == 0;
	return ret;
}

/* Once the loop has returned: the stopper ends (woken with SIGUSR2 if it
 * still waits for a signal). */
void stopper_join(stopper *st)
{
	if (!st->started)
		return;
	atomic_store(&st->loop_done, true);
	pthread_kill(st->thread, SIGUSR2);
	pthread_join(st->thread, NULL);
	st->started = false;
}
