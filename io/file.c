/* SPDX-License-Identifier: Apache-2.0 */
/* Plain file access: open, size, and a pread that finishes what it starts
 * under the process's read policy (faults, retries, timeout); and the
 * timer signal that bounds a blocking read, used by the engine's pread
 * back-end too. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "file_policy_internal.h"
#include "io_internal.h"
#include "stat_internal.h"

const char *pf_file_type_name(unsigned mode)
{
	return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" :
	       S_ISSOCK(mode) ? "a socket" : S_ISCHR(mode) ? "a character device" :
	       S_ISBLK(mode) ? "a block device" : "not a regular file";
}

int pf_file_open(const char *path, pf_error *err)
{
	/* O_NONBLOCK: open(2) of a FIFO with no writer waits for one,
	 * forever; non-blocking it returns at once, and the type is checked
	 * before anything is read.  Reads of a regular file ignore the flag,
	 * but it is cleared all the same. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), fl;
	struct stat st;

	pf_error_clear(err);
	if (fd < 0) {
		int e = -errno;
		pf_error_set_file(err, path);
		return pf_error_set(err, e, PF_OFFSET_NONE, 0, "cannot open: %s",
				    pf_strerror(e));
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		pf_error_set_file(err, path);
		return pf_error_set(err, -EISDIR, PF_OFFSET_NONE, 0,
				    "is a directory, not a file");
	}
	if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
		close(fd);
		pf_error_set_file(err, path);
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "is %s, not a regular file", pf_file_type_name(st.st_mode));
	}
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

int pf_file_size(int fd, uint64_t *size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Reads bounded by a timeout                                           */
/*
 * A blocked read(2) returns EINTR when a signal whose handler has no
 * SA_RESTART arrives.  Each reading thread has a POSIX timer aimed at
 * itself (SIGEV_THREAD_ID) that sends the timer signal at the deadline
 * and then every TIMER_REPEAT_NS: a signal that lands just before the
 * thread enters the read is followed by another that finds it inside.
 */
#define TIMER_REPEAT_NS 5000000ull

static pthread_once_t timer_once = PTHREAD_ONCE_INIT;
static int timer_signo;			/* 0: no timeouts on this path */
static pthread_key_t timer_key;		/* deletes a thread's timer at its exit */
static __thread volatile sig_atomic_t tl_fired
	__attribute__((tls_model("initial-exec")));
static __thread int tl_timer_state;	/* 0 not made, 1 ready, -1 cannot */
static __thread timer_t tl_timer;

static void on_timer(int sig)
{
	(void)sig;
	tl_fired = 1;
}

static void timer_free(void *v)
{
	timer_delete((timer_t)((uintptr_t)v - 1));
}

static void timer_setup(void)
{
	int sig = SIGRTMIN + PF_IO_TIMER_SIGNAL_OFFSET;
	struct sigaction sa, old;

	if (sig > SIGRTMAX || sigaction(sig, NULL, &old) < 0)
		return;
	if ((old.sa_flags & SA_SIGINFO) ||
	    (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
		fprintf(stderr, "podfeed: signal %d has a handler of the program's: pread "
			"reads have no timeout\n", sig);
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_timer;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;	/* no SA_RESTART: the blocked read must return */
	if (sigaction(sig, &sa, NULL) < 0 || pthread_key_create(&timer_key, timer_free))
		return;
	timer_signo = sig;
}

/* This thread's timer, made on first use.  @return whether there is one. */
static bool thread_timer(void)
{
	struct sigevent sev;
	sigset_t set;

	if (tl_timer_state)
		return tl_timer_state > 0;
	tl_timer_state = -1;
	pthread_once(&timer_once, timer_setup);
	if (!timer_signo)
		return false;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = timer_signo;
	sev._sigev_un._tid = gettid();	/* sigev_notify_thread_id */
	if (timer_create(CLOCK_MONOTONIC, &sev, &tl_timer) < 0)
		return false;
	if (pthread_setspecific(timer_key, (void *)((uintptr_t)tl_timer + 1))) {
		timer_delete(tl_timer);
		return false;
	}
	/* A thread made with every signal blocked would never see it. */
	sigemptyset(&set);
	sigaddset(&set, timer_signo);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	tl_timer_state = 1;
	return true;
}

static struct timespec ns_to_ts(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000),
				  .tv_nsec = (long)(ns % 1000000000) };
}

/* Arm this thread's timer to fire in timeout_ns (0: no timeout).
 * @return whether it is armed (disarm it after the call it bounds). */
static bool deadline_arm(uint64_t timeout_ns)
{
	struct itimerspec arm = { .it_value = ns_to_ts(timeout_ns),
				  .it_interval = ns_to_ts(TIMER_REPEAT_NS) };

	if (!timeout_ns || !thread_timer())
		return false;
	tl_fired = 0;
	return timer_settime(tl_timer, 0, &arm, NULL) == 0;
}

static void deadline_disarm(bool timed)
{
	static const struct itimerspec disarm;

	if (timed)
		timer_settime(tl_timer, 0, &disarm, NULL);
}

/* A call bounded by an armed timer failed with e: -ETIMEDOUT when the
 * timer interrupted it, else -e. */
static int deadline_error(bool timed, int e)
{
	return e == EINTR && timed && tl_fired ? -ETIMEDOUT : -e;
}

int64_t pf_read_deadline(int fd, void *buf, size_t len, int64_t off, uint64_t timeout_ns)
{
	bool timed = deadline_arm(timeout_ns);
	ssize_t n;
	int e;

	n = off >= 0 ? pread(fd, buf, len, (off_t)off) : read(fd, buf, len);
	e = errno;
	deadline_disarm(timed);
	return n >= 0 ? n : deadline_error(timed, e);
}

int pf_io_open_step_sync(const pf_io_policy *p, pf_io_op *a)
{
	bool timed;
	int ret, e;

	if (a->delay_ns)
		pf_sleep_ns(a->delay_ns);
	if (a->action == PF_FAULT_EIO)
		return -EIO;
	if (a->action == PF_FAULT_ENOENT)
		return -ENOENT;
	timed = deadline_arm(p->timeout_ns);
	if (a->step == PF_OPEN_STEP_STAT)
		ret = statx(a->open_fd, "", AT_EMPTY_PATH, PF_STATX_MASK, &a->stx);
	else
		ret = open(a->path, a->open_flags | O_CLOEXEC);
	e = errno;
	deadline_disarm(timed);
	return ret >= 0 ? ret : deadline_error(timed, e);
}

void pf_sleep_ns(uint64_t ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ns += (uint64_t)ts.tv_nsec;
	ts.tv_sec += (time_t)(ns / 1000000000);
	ts.tv_nsec = (long)(ns % 1000000000);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

int64_t pf_io_attempt_sync(const pf_io_policy *p, const pf_io_op *a, int fd)
{
	const pf_io_req *req = a->req;
	char *buf = (char *)req->buf + req->done_bytes;

	if (a->delay_ns)
		pf_sleep_ns(a->delay_ns);
	switch (a->action) {
	case PF_FAULT_EIO:
		return -EIO;
	case PF_FAULT_ENOENT:
		return -ENOENT;
	case PF_FAULT_HANG:
		fd = pf_fault_hang_fd();
		return fd < 0 ? fd : pf_read_deadline(fd, buf, a->issue_len, -1, p->timeout_ns);
	default:
		return pf_read_deadline(fd, buf, a->issue_len,
					(int64_t)(req->offset + req->done_bytes), p->timeout_ns);
	}
}

/* ------------------------------------------------------------------ */
/* The process's policy for pf_file_pread()                             */

/* Every policy ever published stays allocated (and reachable, from this
 * list): a reader may still hold the one it started with.  They live as
 * long as the process, so they come from libc, not pf_malloc(): the
 * allocation-failure hook counts what a cycle leaves behind. */
typedef struct file_policy {
	pf_io_policy p;
	struct file_policy *older;
} file_policy;

static pthread_mutex_t policy_mu = PTHREAD_MUTEX_INITIALIZER;
static file_policy *policy_now;		/* read with acquire */
static int policy_ret;			/* the environment's error, or 0 */
static pf_error policy_err;
static uint64_t file_requests;		/* numbers the requests, from 1 */
static pf_file_policy_scope *open_scopes;	/* pf_file_policy_push()'s, open */

/* @return 0 with *out, or -errno (policy_mu held). */
static int publish_locked(const pf_io_config *cfg, pf_error *err)
{
	file_policy *fp = calloc(1, sizeof(*fp));
	int ret;

	if (!fp)
		return -ENOMEM;
	ret = pf_io_policy_init(&fp->p, cfg, err);
	if (ret < 0) {
		free(fp);
		return ret;
	}
	fp->older = policy_now;
	__atomic_store_n(&file_requests, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&policy_now, fp, __ATOMIC_RELEASE);
	return 0;
}

static int file_policy_get(const pf_io_policy **out, pf_error *err)
{
	file_policy *fp = __atomic_load_n(&policy_now, __ATOMIC_ACQUIRE);
	int ret = 0;

	if (!fp) {
		pthread_mutex_lock(&policy_mu);
		if (!policy_now && !policy_ret) {
			pf_error_clear(&policy_err);
			policy_ret = publish_locked(NULL, &policy_err);
		}
		ret = policy_ret;
		if (ret < 0 && err)
			*err = policy_err;
		fp = policy_now;
		pthread_mutex_unlock(&policy_mu);
	}
	if (ret < 0)
		return ret;
	*out = &fp->p;
	return 0;
}

int pf_file_set_policy(const pf_io_config *cfg, pf_error *err)
{
	int ret;

	pf_error_clear(err);
	pthread_mutex_lock(&policy_mu);
	ret = publish_locked(cfg, err);
	if (ret == 0)
		policy_ret = 0;
	pthread_mutex_unlock(&policy_mu);
	return ret;
}

int pf_file_policy_push(pf_file_policy_scope *s, const pf_io_config *cfg, pf_error *err)
{
	int ret;

	s->open = false;
	pthread_mutex_lock(&policy_mu);
	s->prev = policy_now;
	ret = publish_locked(cfg, err);
	if (ret == 0) {
		policy_ret = 0;
		s->mine = policy_now;
		s->next = open_scopes;
		open_scopes = s;
		s->open = true;
	}
	pthread_mutex_unlock(&policy_mu);
	return ret;
}

void pf_file_policy_pop(pf_file_policy_scope *s)
{
	if (!s->open)
		return;
	pthread_mutex_lock(&policy_mu);
	if (policy_now == s->mine) {
		/* NULL (never set): the environment's, read again on use. */
		__atomic_store_n(&policy_now, s->prev, __ATOMIC_RELEASE);
	} else {
		/* Replaced since: whoever replaced it puts back s's
		 * predecessor, not s's policy. */
		for (pf_file_policy_scope *t = open_scopes; t; t = t->next)
			if (t->prev == s->mine)
				t->prev = s->prev;
	}
	for (pf_file_policy_scope **pp = &open_scopes; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	s->open = false;
	pthread_mutex_unlock(&policy_mu);
}

/* Pieces of at most this many bytes are requests of their own (a
 * request's length is 32 bits). */
#define PIECE_MAX (1u << 30)

int64_t pf_file_pread(int fd, void *buf, size_t len, uint64_t offset,
		      const char *path, pf_error *err)
{
	const pf_io_policy *p;
	pf_io_stats st = { 0 };	/* counted only in the process totals */
	size_t done = 0;
	bool direct = false;
	int ret;

	pf_error_clear(err);
	ret = file_policy_get(&p, err);
	if (ret < 0)
		return ret;
	if (p->faults.nrules) {
		int fl = fcntl(fd, F_GETFL);

		direct = fl >= 0 && (fl & O_DIRECT);
	}
	while (done < len) {
		size_t piece = len - done < PIECE_MAX ? len - done : PIECE_MAX;
		pf_io_req r = { .offset = offset + done, .len = (uint32_t)piece,
				.buf = (char *)buf + done, .buf_index = -1 };
		pf_io_op op = { .req = &r };

		op.seq = __atomic_add_fetch(&file_requests, 1, __ATOMIC_RELAXED);
		pf_io_attempt_plan(p, &op, direct, &st);
		while (!pf_io_attempt_judge(p, &op, pf_io_attempt_sync(p, &op, fd), &st))
			pf_io_attempt_plan(p, &op, direct, &st);
		if (r.result < 0)
			return pf_io_failure(p, &r, path, err);
		done += (size_t)r.result;
		if ((size_t)r.result < piece)
			break;	/* end of file */
	}
	return (int64_t)done;
}

/* ------------------------------------------------------------------ */
/* Many stats at once                                                   */

static void stat_one(const char *path, pf_stat_result *r, pf_file_id *id)
{
	struct stat st;

	if (stat(path, &st) != 0) {
		*r = (pf_stat_result){ .error = -errno };
		return;
	}
	*r = (pf_stat_result){
		.mode = st.st_mode,
		.size = (uint64_t)st.st_size,
		.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
	};
	if (id)
		*id = (pf_file_id){ .dev = (uint64_t)st.st_dev, .ino = (uint64_t)st.st_ino };
}

#define FUSE_SUPER_MAGIC_ 0x65735546	/* linux/magic.h */

static bool path_on_fuse(const char *path)
{
	struct statfs sfs;

	return statfs(path, &sfs) == 0 && sfs.f_type == FUSE_SUPER_MAGIC_;
}

/* The identities of ids[0 .. n) that lie on FUSE get their canonical
 * path: asked once per device (statfs(2), answered by the kernel). */
static int ids_canon(const char *const *paths, size_t n, const pf_stat_result *out,
		     pf_file_id *ids)
{
	uint64_t kind_dev[16];
	bool kind_fuse[16];
	unsigned nkinds = 0;

	for (size_t i = 0; i < n; i++) {
		bool fuse = false, known = false;

		ids[i].canon = NULL;
		if (out[i].error)
			continue;
		for (unsigned k = 0; k < nkinds && !known; k++)
			if (kind_dev[k] == ids[i].dev) {
				fuse = kind_fuse[k];
				known = true;
			}
		if (!known) {
			fuse = path_on_fuse(paths[i]);
			if (nkinds < 16) {
				kind_dev[nkinds] = ids[i].dev;
				kind_fuse[nkinds++] = fuse;
			}
		}
		if (!fuse)
			continue;
		{
			char *real = realpath(paths[i], NULL);

			/* Gone since its stat: its path as given, an identity
			 * still (its open names it). */
			ids[i].canon = pf_strdup(real ? real : paths[i]);
			free(real);
			if (!ids[i].canon)
				return -ENOMEM;
		}
	}
	return 0;
}

void pf_file_ids_free(pf_file_id *ids, size_t n)
{
	for (size_t i = 0; ids && i < n; i++)
		pf_free(ids[i].canon);
	pf_free(ids);
}

int pf_file_id_cmp(const pf_file_id *a, const pf_file_id *b)
{
	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	if (a->canon || b->canon)	/* one device: both or neither */
		return strcmp(a->canon ? a->canon : "", b->canon ? b->canon : "");
	return a->ino < b->ino ? -1 : a->ino > b->ino;
}

int pf_dir_canon(const char *dir, char **canon)
{
	char *real;

	*canon = NULL;
	if (!path_on_fuse(dir))
		return 0;
	real = realpath(dir, NULL);
	*canon = pf_strdup(real ? real : dir);
	free(real);
	return *canon ? 0 : -ENOMEM;
}

int pf_file_id_entry(pf_file_id *id, uint64_t dev, uint64_t ino, const char *dir_canon,
		     const char *name)
{
	size_t a, b;

	*id = (pf_file_id){ .dev = dev, .ino = ino };
	if (!dir_canon)
		return 0;
	a = strlen(dir_canon);
	b = strlen(name);
	id->canon = pf_malloc(a + b + 2);
	if (!id->canon)
		return -ENOMEM;
	memcpy(id->canon, dir_canon, a);
	id->canon[a] = '/';
	memcpy(id->canon + a + 1, name, b + 1);
	return 0;
}

int pf_stat_many(const char *const *paths, size_t n, pf_stat_result *out)
{
	return pf_stat_many_ids(paths, n, out, NULL);
}

int pf_stat_many_ids(const char *const *paths, size_t n, pf_stat_result *out, pf_file_id *ids)
{
	struct io_uring ring;
	struct statx *stx;
	size_t *which, next = 0, done = 0;
	unsigned depth = n < PF_STAT_MANY_DEPTH ? (unsigned)n : PF_STAT_MANY_DEPTH;
	unsigned *free_slot, nfree = 0;

	if (n < 2 || io_uring_queue_init(depth, &ring, 0) < 0) {
		for (size_t i = 0; i < n; i++)
			stat_one(paths[i], &out[i], ids ? &ids[i] : NULL);
		return ids ? ids_canon(paths, n, out, ids) : 0;
	}
	stx = pf_calloc(depth, sizeof(*stx));
	which = pf_calloc(depth, sizeof(*which));
	free_slot = pf_calloc(depth, sizeof(*free_slot));
	if (!stx || !which || !free_slot) {
		pf_free(stx);
		pf_free(which);
		pf_free(free_slot);
		io_uring_queue_exit(&ring);
		return -ENOMEM;
	}
	/* A stat that blocks (FUSE) waits in an io-wq worker: as many
	 * workers as stats in flight, not io-wq's 4 per CPU. */
	{
		unsigned workers[2] = { depth, depth };

		io_uring_register_iowq_max_workers(&ring, workers);
	}
	for (unsigned k = 0; k < depth; k++) {
		which[k] = SIZE_MAX;
		free_slot[nfree++] = depth - 1 - k;
	}
	while (done < n) {
		struct io_uring_cqe *cqe;
		int ret;

		while (next < n && nfree) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			unsigned k;

			if (!sqe)
				break;
			k = free_slot[--nfree];
			which[k] = next++;
			io_uring_prep_statx(sqe, AT_FDCWD, paths[which[k]], 0,
					    STATX_TYPE | STATX_MODE | STATX_SIZE | STATX_MTIME |
					    STATX_INO,
					    &stx[k]);
			io_uring_sqe_set_data64(sqe, k);
		}
		ret = io_uring_submit_and_wait(&ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN) {
			/* The ring failed as a whole: the rest one by one. */
			break;
		}
		while (io_uring_peek_cqe(&ring, &cqe) == 0) {
			unsigned k = (unsigned)io_uring_cqe_get_data64(cqe);
			pf_stat_result *r = &out[which[k]];

			if (cqe->res == -EINVAL || cqe->res == -EOPNOTSUPP) {
				/* A kernel without STATX in the ring. */
				stat_one(paths[which[k]], r, ids ? &ids[which[k]] : NULL);
			} else if (cqe->res < 0) {
				*r = (pf_stat_result){ .error = cqe->res };
			} else {
				*r = (pf_stat_result){
					.mode = stx[k].stx_mode,
					.size = stx[k].stx_size,
					.mtime_ns = (int64_t)stx[k].stx_mtime.tv_sec * 1000000000 +
						    stx[k].stx_mtime.tv_nsec,
				};
				if (ids)
					ids[which[k]] = (pf_file_id){
						.dev = (uint64_t)makedev(stx[k].stx_dev_major,
									 stx[k].stx_dev_minor),
						.ino = stx[k].stx_ino,
					};
			}
			io_uring_cqe_seen(&ring, cqe);
			which[k] = SIZE_MAX;
			free_slot[nfree++] = k;
			done++;
		}
	}
	io_uring_queue_exit(&ring);
	if (done < n) {
		/* The ring failed: those it had in flight and those never
		 * sent, one by one. */
		for (unsigned k = 0; k < depth; k++)
			if (which[k] != SIZE_MAX)
				stat_one(paths[which[k]], &out[which[k]],
					 ids ? &ids[which[k]] : NULL);
		for (size_t i = next; i < n; i++)
			stat_one(paths[i], &out[i], ids ? &ids[i] : NULL);
	}
	pf_free(stx);
	pf_free(which);
	pf_free(free_slot);
	return ids ? ids_canon(paths, n, out, ids) : 0;
}

