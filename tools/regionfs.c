/* SPDX-License-Identifier: Apache-2.0 */
/* regionfs: a read-only FUSE passthrough of a directory that behaves like a
 * bucket in another region: every round trip costs --rtt-ms (plus seeded
 * jitter), reads share a --mbps token bucket, and a seeded fraction of
 * reads can fail with EIO, or stall until the reader gives up.  Tests, the
 * quickstart and users measure with it what a remote region would cost
 * before paying for one.  Every wait honours FUSE interrupts: a reader
 * that gives up on a read (a signal, an io_uring cancellation) gets EINTR
 * at once instead of waiting it out.
 *
 * The high-level libfuse3 API is enough: the loader only opens, stats,
 * lists and reads, and path-based operations keep the passthrough small.
 * Reads hand libfuse the backing file descriptor (FUSE_BUF_FD_SEEK) so the
 * bytes are spliced from the backing file to /dev/fuse without a copy
 * through user space where the kernel allows it. */
#define FUSE_USE_VERSION 312

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>	/* fuse_session_exited() */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "regionfs_stop.h"
#include "common_internal.h"

#define NS_PER_MS 1000000.0
#define BYTES_PER_MB 1e6		/* MB/s as networks and clouds quote it */
#define DEFAULT_BURST (1ull << 20)
#define DEFAULT_THREADS 16u
#define LISTED_MAX 64	/* directories whose listing is remembered */
#define DEFAULT_READ_AHEAD_KB 1024u	/* FUSE's largest request: 256 pages */
#define MAX_DELAY_MS 600000.0	/* ten minutes: anything more is a typo */
#define WAIT_SLICE_NS 10000000	/* a wait looks for an interrupt this often */

typedef struct options {
	double rtt_ms;
	double jitter_ms;
	double mbps;		/* 0: no cap */
	double eio_rate;
	double stall_rate;
	uint64_t burst;
	uint64_t seed;
	uint64_t threads;
	uint64_t read_ahead_kb;
	double cache_s;		/* the kernel's entry and attribute timeout */
	bool direct_io;
	bool allow_other;
	bool foreground;
	const char *stats_path;
	const char *backing;
	const char *mountpoint;
} options;

/* The bandwidth cap as a virtual-time token bucket (GCRA): tat is when the
 * bucket would be full again if no more bytes came.  A request of n bytes
 * moves tat forward by n / rate and may complete once tat is at most one
 * burst ahead of the clock.  One lock, held for a few instructions; the
 * waiting happens outside it, so concurrent readers queue by arrival. */
typedef struct token_bucket {
	pthread_mutex_t lock;
	double ns_per_byte;
	int64_t burst_ns;
	int64_t tat;
} token_bucket;

typedef struct counters {
	_Atomic uint64_t getattr;	/* includes the kernel's lookups */
	_Atomic uint64_t open;
	_Atomic uint64_t opendir;
	_Atomic uint64_t readdir;
	_Atomic uint64_t reads;
	_Atomic uint64_t read_bytes;
	_Atomic uint64_t read_max;	/* the largest read request, bytes */
	_Atomic uint64_t eio_injected;
	_Atomic uint64_t stalled;	/* reads that drew a stall */
	_Atomic uint64_t interrupted;	/* reads cut short by a FUSE interrupt
					   (or the mount stopping) */
	_Atomic uint64_t getattr_listed; /* getattrs answered from a listing */
	_Atomic uint64_t waiting;	/* requests in their round trip now */
	_Atomic uint64_t waiting_peak;	/* ... at most at once */
	_Atomic uint64_t opening;	/* opens in their round trip now */
	_Atomic uint64_t opening_peak;	/* ... at most at once */
	_Atomic uint64_t trips;		/* round trips, the jitter draw's index */
	_Atomic uint64_t rtt_wait_ns;	/* summed over requests */
	_Atomic uint64_t bw_wait_ns;
} counters;

/* An open file or directory: the backing descriptor, and for a file its
 * size at open (the backing files are immutable while mounted, so reads
 * clamp against it).  Handles are listed so that those the kernel never
 * released (it may unmount first) are closed at exit. */
typedef struct handle {
	struct handle *prev, *next;
	int fd;
	uint64_t size;
	DIR *dir;		/* owns fd when set */
} handle;

typedef struct regionfs {
	options opt;
	int backing_fd;
	int64_t rtt_ns;
	int64_t jitter_ns;
	token_bucket bucket;
	counters n;
	int64_t start_ns;
	struct fuse_session *se;	/* set before the loop starts */
	atomic_bool read_ahead_done;
	char mountpoint[PATH_MAX];	/* resolved */
	pthread_mutex_t handles_lock;
	handle handles;			/* list head */
	/* The directories listed lately (the LISTED_MAX latest), and when:
	 * their entries' lookups are answered from the listing for
	 * --cache-s, as a bucket client's stat cache does. */
	pthread_mutex_t listed_lock;
	struct listed {
		char *path;
		int64_t at_ns;
	} listed[LISTED_MAX];
} regionfs;

/* ------------------------------------------------------------------ */
/* Time and seeded draws                                                */

/* pf_now_ns() signed: deadlines here are compared and subtracted. */
static int64_t now_ns(void)
{
	return (int64_t)pf_now_ns();
}

/* Wait until deadline (absolute, so a slow wake-up does not add to the
 * next wait), in slices, looking between them for an interrupt of the
 * request being served (libfuse marks it when the kernel's FUSE_INTERRUPT
 * arrives) and for the mount stopping.  @return false when cut short. */
static bool wait_until(regionfs *fs, int64_t deadline)
{
	for (;;) {
		int64_t now = now_ns();
		int64_t until = deadline - now > WAIT_SLICE_NS ? now + WAIT_SLICE_NS : deadline;
		struct timespec ts = {
			.tv_sec = (time_t)(until / 1000000000),
			.tv_nsec = (long)(until % 1000000000),
		};

		if (fuse_interrupted() || (fs->se && fuse_session_exited(fs->se)))
			return false;
		if (now >= deadline)
			return true;
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
}

/* The k-th draw of a stream, uniform in [0, 1): a pure function of the
 * seed, so runs repeat whatever thread serves the request. */
static double draw(uint64_t seed, uint64_t stream, uint64_t k)
{
	return pf_unit_double(pf_mix64(pf_mix64(seed ^ (stream * 0xd1b54a32d192ed03ull)) ^ k));
}

enum { DRAW_JITTER = 1, DRAW_EIO = 2, DRAW_STALL = 3 };

/* ------------------------------------------------------------------ */
/* The emulated network                                                 */

static regionfs *fs_of_context(void)
{
	return fuse_get_context()->private_data;
}

static void counter_max(_Atomic uint64_t *c, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(c, memory_order_relaxed);

	while (cur < v && !atomic_compare_exchange_weak_explicit(
			c, &cur, v, memory_order_relaxed, memory_order_relaxed))
		;
}

/* Wait out one round trip that began at start.  @return false when an
 * interrupt cut it short. */
static bool round_trip(regionfs *fs, int64_t start)
{
	int64_t delay = fs->rtt_ns;
	uint64_t k;
	bool done;

	if (!fs->rtt_ns && !fs->jitter_ns)
		return true;
	k = atomic_fetch_add_explicit(&fs->n.trips, 1, memory_order_relaxed);
	if (fs->jitter_ns)
		delay += (int64_t)(draw(fs->opt.seed, DRAW_JITTER, k) *
				   (double)(fs->jitter_ns + 1));
	counter_max(&fs->n.waiting_peak,
		    atomic_fetch_add_explicit(&fs->n.waiting, 1, memory_order_relaxed) + 1);
	done = wait_until(fs, start + delay);
	atomic_fetch_sub_explicit(&fs->n.waiting, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&fs->n.rtt_wait_ns,
				  (uint64_t)(done ? delay : now_ns() - start),
				  memory_order_relaxed);
	return done;
}

/* Take n bytes from the bucket and wait until they may pass.  @return
 * false when an interrupt cut the wait short (the bytes stay taken: the
 * link carried them). */
static bool bucket_take(regionfs *fs, uint64_t n)
{
	token_bucket *b = &fs->bucket;
	int64_t now, deadline;
	bool done = true;

	if (!b->ns_per_byte || !n)
		return true;
	now = now_ns();
	pthread_mutex_lock(&b->lock);
	if (b->tat < now)
		b->tat = now;
	b->tat += (int64_t)((double)n * b->ns_per_byte + 0.5);
	deadline = b->tat - b->burst_ns;
	pthread_mutex_unlock(&b->lock);
	if (deadline > now) {
		done = wait_until(fs, deadline);
		atomic_fetch_add_explicit(&fs->n.bw_wait_ns,
					  (uint64_t)((done ? deadline : now_ns()) - now),
					  memory_order_relaxed);
	}
	return done;
}

/* ------------------------------------------------------------------ */
/* The passthrough                                                      */

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape_octal(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

/* The device ("0:39") of the newest mount at mnt.  @return 0 or -errno. */
static int mount_device(const char *mnt, char *dev, size_t cap)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, majmin[32], path[PATH_MAX * 4];
	size_t len = 0;
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while (getline(&line, &len, f) > 0) {
		if (sscanf(line, "%*u %*u %31s %*s %16383s", majmin, path) != 2)
			continue;
		unescape_octal(path);
		if (!strcmp(path, mnt) && strlen(majmin) < cap) {
			strcpy(dev, majmin);
			ret = 0;
		}
	}
	free(line);
	fclose(f);
	return ret;
}

/* Raise the mount's readahead so sequential reads arrive as large
 * requests.  Done on the first request, not at mount: the kernel sets the
 * readahead from libfuse's INIT reply, after which a write to sysfs is
 * what lasts; and the device number must come from mountinfo, since a
 * stat() of the mount point would wait on this very file system. */
static void set_read_ahead(regionfs *fs)
{
	char dev[32], path[96], value[32];
	int fd, ret, len;

	if (!fs->opt.read_ahead_kb ||
	    atomic_exchange_explicit(&fs->read_ahead_done, true, memory_order_relaxed))
		return;
	ret = mount_device(fs->mountpoint, dev, sizeof(dev));
	if (ret < 0) {
		cli_fail("warning: --read-ahead-kb: %s is not in /proc/self/mountinfo (%s)",
			 fs->mountpoint, strerror(-ret));
		return;
	}
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	len = snprintf(value, sizeof(value), "%llu\n",
		       (unsigned long long)fs->opt.read_ahead_kb);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, value, (size_t)len) != len)
		cli_fail("warning: --read-ahead-kb: cannot write %s (%s); the kernel's "
			 "readahead stays", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

static handle *handle_of(const struct fuse_file_info *fi)
{
	return (handle *)(uintptr_t)fi->fh;
}

/* Take ownership of fd (and dir) in a listed handle.  @return 0 with
 * fi->fh set, or -ENOMEM with both closed. */
static int handle_add(regionfs *fs, struct fuse_file_info *fi, int fd,
		      uint64_t size, DIR *dir)
{
	handle *h = malloc(sizeof(*h));

	if (!h) {
		if (dir)
			closedir(dir);
		else
			close(fd);
		return -ENOMEM;
	}
	h->fd = fd;
	h->size = size;
	h->dir = dir;
	pthread_mutex_lock(&fs->handles_lock);
	h->next = fs->handles.next;
	h->prev = &fs->handles;
	h->next->prev = h;
	fs->handles.next = h;
	pthread_mutex_unlock(&fs->handles_lock);
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
}

static void handle_close(handle *h)
{
	if (h->dir)
		closedir(h->dir);
	else
		close(h->fd);
	free(h);
}

/* Files and directories alike. */
static int rfs_release(const char *path, struct fuse_file_info *fi)
{
	regionfs *fs = fs_of_context();
	handle *h = handle_of(fi);

	(void)path;
	pthread_mutex_lock(&fs->handles_lock);
	h->prev->next = h->next;
	h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->handles_lock);
	handle_close(h);
	return 0;
}

/* After the loop: whatever the kernel did not release before unmounting. */
static void rfs_destroy(void *private_data)
{
	regionfs *fs = private_data;

	while (fs->handles.next != &fs->handles) {
		handle *h = fs->handles.next;

		fs->handles.next = h->next;
		handle_close(h);
	}
	fs->handles.prev = &fs->handles;
}

/* Paths from libfuse start with '/'; the backing side is relative to its
 * directory descriptor, so the mount never resolves through itself. */
static const char *rel(const char *path)
{
	return path[1] ? path + 1 : ".";
}

/* Directory path was listed now. */
static void listed_add(regionfs *fs, const char *path)
{
	size_t k = 0;

	pthread_mutex_lock(&fs->listed_lock);
	for (size_t i = 0; i < LISTED_MAX; i++) {
		if (fs->listed[i].path && !strcmp(fs->listed[i].path, path)) {
			k = i;
			break;
		}
		if (fs->listed[i].at_ns < fs->listed[k].at_ns)
			k = i;	/* the oldest (or a free one) */
	}
	if (!fs->listed[k].path || strcmp(fs->listed[k].path, path)) {
		free(fs->listed[k].path);
		fs->listed[k].path = strdup(path);
	}
	fs->listed[k].at_ns = fs->listed[k].path ? now_ns() : 0;
	pthread_mutex_unlock(&fs->listed_lock);
}

/* Whether path's directory was listed within --cache-s. */
static bool listed_fresh(regionfs *fs, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t dlen = slash ? (size_t)(slash - path) : 0;
	int64_t now = now_ns(), ttl = (int64_t)(fs->opt.cache_s * 1e9);
	bool fresh = false;

	if (!slash)
		return false;
	pthread_mutex_lock(&fs->listed_lock);
	for (size_t i = 0; i < LISTED_MAX && !fresh; i++) {
		const char *p = fs->listed[i].path;

		/* The root is "/", its entries "/x". */
		fresh = p && now - fs->listed[i].at_ns < ttl &&
			(dlen ? strlen(p) == dlen && !memcmp(p, path, dlen) : !strcmp(p, "/"));
	}
	pthread_mutex_unlock(&fs->listed_lock);
	return fresh;
}

static int rfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	regionfs *fs = fs_of_context();
	int64_t start = now_ns();
	int ret;

	atomic_fetch_add_explicit(&fs->n.getattr, 1, memory_order_relaxed);
	set_read_ahead(fs);
	if (fi)
		ret = fstat(handle_of(fi)->fd, st);
	else
		ret = fstatat(fs->backing_fd, rel(path), st, AT_SYMLINK_NOFOLLOW);
	ret = ret < 0 ? -errno : 0;
	/* A lookup of an entry of a directory listed lately: from the
	 * listing, as a bucket client's stat cache answers it. */
	if (!fi && path && listed_fresh(fs, path))
		atomic_fetch_add_explicit(&fs->n.getattr_listed, 1, memory_order_relaxed);
	else
		round_trip(fs, start);
	return ret;
}

static int rfs_readlink(const char *path, char *buf, size_t size)
{
	regionfs *fs = fs_of_context();
	ssize_t n;

	if (!size)
		return -EINVAL;
	n = readlinkat(fs->backing_fd, rel(path), buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int rfs_open(const char *path, struct fuse_file_info *fi)
{
	regionfs *fs = fs_of_context();
	int64_t start = now_ns();
	struct stat st;
	int fd, ret = 0;

	atomic_fetch_add_explicit(&fs->n.open, 1, memory_order_relaxed);
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		ret = -EROFS;
		goto out;
	}
	/* O_DIRECT stays on this side of the mount: the kernel already sends
	 * every such read here, and the backing filesystem may refuse it. */
	fd = openat(fs->backing_fd, rel(path), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		close(fd);
		goto out;
	}
	ret = handle_add(fs, fi, fd, (uint64_t)st.st_size, NULL);
	if (ret < 0)
		goto out;
	/* Reads go through the page cache unless --direct-io; keep_cache stays
	 * off, so each open starts cold, as a remote object would. */
	fi->direct_io = fs->opt.direct_io;
	fi->keep_cache = 0;
out:
	counter_max(&fs->n.opening_peak,
		    atomic_fetch_add_explicit(&fs->n.opening, 1, memory_order_relaxed) + 1);
	round_trip(fs, start);
	atomic_fetch_sub_explicit(&fs->n.opening, 1, memory_order_relaxed);
	return ret;
}

static int rfs_read_buf(const char *path, struct fuse_bufvec **bufp, size_t size,
			off_t off, struct fuse_file_info *fi)
{
	regionfs *fs = fs_of_context();
	handle *f = handle_of(fi);
	int64_t start = now_ns();
	struct fuse_bufvec *bv;
	uint64_t k, n = 0;

	(void)path;
	k = atomic_fetch_add_explicit(&fs->n.reads, 1, memory_order_relaxed);
	counter_max(&fs->n.read_max, size);
	if (fs->opt.eio_rate > 0 && draw(fs->opt.seed, DRAW_EIO, k) < fs->opt.eio_rate) {
		/* A failed request still costs its round trip. */
		atomic_fetch_add_explicit(&fs->n.eio_injected, 1, memory_order_relaxed);
		if (!round_trip(fs, start))
			goto interrupted;
		return -EIO;
	}
	if (fs->opt.stall_rate > 0 && draw(fs->opt.seed, DRAW_STALL, k) < fs->opt.stall_rate) {
		/* No answer: only the reader giving up (or the unmount) ends it. */
		atomic_fetch_add_explicit(&fs->n.stalled, 1, memory_order_relaxed);
		wait_until(fs, INT64_MAX);
		goto interrupted;
	}
	if (off >= 0 && (uint64_t)off < f->size)
		n = f->size - (uint64_t)off < size ? f->size - (uint64_t)off : size;
	bv = malloc(sizeof(*bv));
	if (!bv)
		return -ENOMEM;
	*bv = FUSE_BUFVEC_INIT(n);
	bv->buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
	bv->buf[0].fd = f->fd;
	bv->buf[0].pos = off;
	/* First byte after one round trip, the rest at the bucket's pace. */
	if (!round_trip(fs, start) || !bucket_take(fs, n)) {
		free(bv);
		goto interrupted;
	}
	atomic_fetch_add_explicit(&fs->n.read_bytes, n, memory_order_relaxed);
	*bufp = bv;
	return 0;
interrupted:
	atomic_fetch_add_explicit(&fs->n.interrupted, 1, memory_order_relaxed);
	return -EINTR;
}

static int rfs_opendir(const char *path, struct fuse_file_info *fi)
{
	regionfs *fs = fs_of_context();
	int64_t start = now_ns();
	DIR *d = NULL;
	int fd, ret = 0;

	atomic_fetch_add_explicit(&fs->n.opendir, 1, memory_order_relaxed);
	fd = openat(fs->backing_fd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		ret = -errno;
		if (fd >= 0)
			close(fd);
	} else {
		ret = handle_add(fs, fi, fd, 0, d);
	}
	round_trip(fs, start);
	if (ret == 0)
		listed_add(fs, path);	/* the listing comes with it */
	return ret;
}

/* The whole directory in one call (offset 0 to the filler): libfuse
 * buffers it and serves the kernel's getdents from that.  (The listing
 * was remembered at opendir: listed_fresh().) */
static int rfs_readdir(const char *path, void *buf, fuse_fill_dir_t filler,
		       off_t off, struct fuse_file_info *fi,
		       enum fuse_readdir_flags flags)
{
	regionfs *fs = fs_of_context();
	DIR *d = handle_of(fi)->dir;
	struct dirent *e;

	(void)path;
	(void)off;
	(void)flags;
	atomic_fetch_add_explicit(&fs->n.readdir, 1, memory_order_relaxed);
	rewinddir(d);
	errno = 0;
	while ((e = readdir(d))) {
		struct stat st;

		memset(&st, 0, sizeof(st));
		st.st_ino = e->d_ino;
		st.st_mode = (mode_t)DTTOIF(e->d_type);
		if (filler(buf, e->d_name, &st, 0, 0))
			break;
	}
	return errno ? -errno : 0;
}

static int rfs_statfs(const char *path, struct statvfs *sv)
{
	(void)path;
	return fstatvfs(fs_of_context()->backing_fd, sv) < 0 ? -errno : 0;
}

static void *rfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	regionfs *fs = fs_of_context();

	cfg->use_ino = 1;
	cfg->nullpath_ok = 1;
	cfg->kernel_cache = 0;
	cfg->direct_io = fs->opt.direct_io;
	cfg->entry_timeout = fs->opt.cache_s;
	cfg->attr_timeout = fs->opt.cache_s;
	/* Splice the reply from the backing file when the kernel can. */
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	/* No asynchronous direct I/O: with it the kernel sends an io_uring
	 * read of a --direct-io file as background requests, which no
	 * interrupt reaches, so a cancelled read (a timeout) could not end
	 * early.  Without it the read is one request that waits in an io-wq
	 * worker, and the cancellation interrupts it. */
	conn->want &= ~FUSE_CAP_ASYNC_DIO;
	/* Readahead and io_uring's async reads are background requests; let
	 * as many be in flight as there are threads to serve them. */
	conn->max_background = (unsigned)fs->opt.threads;
	conn->congestion_threshold = (unsigned)(fs->opt.threads * 3 / 4 + 1);
	return fs;
}

static const struct fuse_operations rfs_ops = {
	.getattr = rfs_getattr,
	.readlink = rfs_readlink,
	.open = rfs_open,
	.read_buf = rfs_read_buf,
	.release = rfs_release,
	.opendir = rfs_opendir,
	.readdir = rfs_readdir,
	.releasedir = rfs_release,
	.statfs = rfs_statfs,
	.init = rfs_init,
	.destroy = rfs_destroy,
};

/* ------------------------------------------------------------------ */
/* Options                                                              */

#define O(field) offsetof(options, field)

static const cli_opt options_cli[] = {
	{ CLI_DOUBLE, "rtt-ms", .arg = "MS", .off = O(rtt_ms), .hi = MAX_DELAY_MS, .plain = true,
	  .help = "round-trip time added once per read request and per "
		  "lookup/getattr, open and opendir (default 0; decimals allowed)" },
	{ CLI_DOUBLE, "jitter-ms", .arg = "MS", .off = O(jitter_ms), .hi = MAX_DELAY_MS,
	  .plain = true,
	  .help = "add a uniform random delay in [0, MS] to every round trip (default 0)" },
	{ CLI_DOUBLE, "mbps", .arg = "MB/S", .off = O(mbps), .hi = 1e6, .above = true,
	  .plain = true,
	  .help = "cap the bytes of all reads together at MB/S (1 MB = 10^6 bytes; "
		  "default: no cap).  A token bucket shared by all threads; it starts "
		  "full" },
	{ CLI_U64, "burst", .arg = "BYTES", .off = O(burst), .min = 4096, .max = 1ull << 40,
	  .suffix = true,
	  .help = "the token bucket's size: bytes that may pass at once after an idle "
		  "spell (default 1M; K, M, G suffixes)" },
	{ CLI_DOUBLE, "eio-rate", .arg = "P", .off = O(eio_rate), .hi = 1, .plain = true,
	  .help = "fail this fraction of read requests with EIO, 0..1 (default 0)" },
	{ CLI_DOUBLE, "stall-rate", .arg = "P", .off = O(stall_rate), .hi = 1, .plain = true,
	  .more = true,
	  .help = "this fraction of read requests never answer: each waits until the "
		  "reader gives up (the kernel interrupts it; it then fails with "
		  "EINTR) or the mount stops, 0..1 (default 0)" },
	{ CLI_U64, "seed", .arg = "N", .off = O(seed), .max = UINT64_MAX, .more = true,
	  .help = "seed of the jitter, error and stall draws (default 0): the k-th "
		  "round trip and the k-th read always draw the same, so a "
		  "single-threaded reader sees the same run" },
	{ CLI_U64, "threads", .arg = "N", .off = O(threads), .min = 1, .max = 1024,
	  .more = true,
	  .help = "requests served at once (default 16); more wait in the kernel's "
		  "queue, like a client's connection pool" },
	{ CLI_U64, "read-ahead-kb", .arg = "KB", .off = O(read_ahead_kb), .max = 1u << 20,
	  .more = true,
	  .help = "the mount's kernel readahead (default 1024, so a sequential read "
		  "arrives in 1 MiB requests, as with gcsfuse's recommended setting; 0 "
		  "keeps the kernel's 128).  Needs root; otherwise a warning" },
	{ CLI_DOUBLE, "cache-s", .arg = "S", .off = O(cache_s), .hi = 86400, .plain = true,
	  .more = true,
	  .help = "how long a file's metadata stays cached: the kernel's entry and "
		  "attribute timeout, and lookups of a directory's entries answered "
		  "from its listing with no round trip (default 1, libfuse's; "
		  "gcsfuse keeps them 60 s, its stat cache's TTL)" },
	{ CLI_FLAG, "direct-io", .off = O(direct_io), .more = true,
	  .help = "bypass the page cache: every read(2) reaches regionfs (by default, "
		  "pages read stay cached until the file is opened again, as with "
		  "gcsfuse)" },
	{ CLI_FLAG, "allow-other", .off = O(allow_other), .more = true,
	  .help = "let other users read the mount" },
	{ CLI_STRING, "stats", .arg = "FILE", .off = O(stats_path),
	  .help = "at exit, write the counters as JSON to FILE (- for stderr): "
		  "requests of each kind, bytes read, injected errors, time spent "
		  "waiting" },
	{ CLI_FLAG, "foreground", .letter = 'f', .off = O(foreground),
	  .help = "stay in the foreground (default: detach once mounted)" },
	{ CLI_END },
};

static const cli_command regionfs_command = {
	.name = "regionfs",
	.usage = "usage: regionfs [options] BACKING_DIR MOUNTPOINT\n",
	.about = "Mounts BACKING_DIR read-only at MOUNTPOINT through FUSE and makes it\n"
		 "behave like a bucket in another region: each request waits a round\n"
		 "trip, reads share a bandwidth cap, and reads can be made to fail.\n"
		 "Only reading is supported (the loader only reads): writes fail with\n"
		 "EROFS.  The backing files must not change while mounted.\n",
	.opts = options_cli,
	.footer = "A read of n bytes completes no sooner than one round trip after it\n"
		  "arrived, and no sooner than its n bytes fit the token bucket: over a\n"
		  "long read the rate is MB/S, after an idle spell BYTES pass at once.\n"
		  "SIGINT, SIGTERM or `fusermount3 -u MOUNTPOINT` unmount and exit 0.\n",
};

/* @return -1 to go on, else the exit status (0 for --help, 2 for misuse). */
static int parse_options(int argc, char **argv, options *o)
{
	int ret, first;

	memset(o, 0, sizeof(*o));
	o->burst = DEFAULT_BURST;
	o->threads = DEFAULT_THREADS;
	o->read_ahead_kb = DEFAULT_READ_AHEAD_KB;
	o->cache_s = 1.0;
	ret = cli_parse(&regionfs_command, argc, argv, o, &first);
	if (ret >= 0)
		return ret;
	if (argc - first != 2)
		return cli_usage(argc - first < 2 ? "BACKING_DIR and MOUNTPOINT are required"
				 : "too many arguments: expected BACKING_DIR MOUNTPOINT");
	o->backing = argv[first];
	o->mountpoint = argv[first + 1];
	return -1;
}

static bool is_dir(const char *what, const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		cli_fail("%s %s: %s", what, path, strerror(errno));
		return false;
	}
	if (!S_ISDIR(st.st_mode)) {
		cli_fail("%s %s: not a directory", what, path);
		return false;
	}
	return true;
}

/* Both directories exist, and the mount point is not the backing
 * directory or inside it (lookups there would loop through the mount).
 * @return the backing directory's descriptor, or -1 after saying why. */
static int check_dirs(const options *o, char *backing_real, char *mnt_real)
{
	size_t bl;
	int fd;

	if (!is_dir("BACKING_DIR", o->backing) || !is_dir("MOUNTPOINT", o->mountpoint))
		return -1;
	if (!realpath(o->backing, backing_real) || !realpath(o->mountpoint, mnt_real)) {
		cli_fail("cannot resolve %s or %s: %s", o->backing, o->mountpoint,
			 strerror(errno));
		return -1;
	}
	bl = strlen(backing_real);
	if (!strncmp(backing_real, mnt_real, bl) &&
	    (mnt_real[bl] == '/' || mnt_real[bl] == '\0' || bl == 1)) {
		cli_fail("MOUNTPOINT %s is inside BACKING_DIR %s", o->mountpoint, o->backing);
		return -1;
	}
	fd = open(o->backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		cli_fail("BACKING_DIR %s: %s", o->backing, strerror(errno));
	return fd;
}

/* The libfuse arguments: a read-only mount named after the backing
 * directory (escaped: it may hold commas). */
static int fuse_arguments(const options *o, const char *backing_real,
			  struct fuse_args *args)
{
	char *opts = NULL, *name = NULL;
	int ret = -ENOMEM;

	if (asprintf(&name, "fsname=regionfs:%s", backing_real) < 0) {
		name = NULL;
		goto out;
	}
	if (fuse_opt_add_arg(args, cli_prog) || fuse_opt_add_arg(args, "-o") ||
	    fuse_opt_add_opt(&opts, "ro,default_permissions,subtype=regionfs") ||
	    fuse_opt_add_opt_escaped(&opts, name) ||
	    (o->allow_other && fuse_opt_add_opt(&opts, "allow_other")) ||
	    fuse_opt_add_arg(args, opts))
		goto out;
	ret = 0;
out:
	free(opts);
	free(name);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Counters at exit                                                     */

static uint64_t ld(_Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static int write_stats(FILE *f, regionfs *fs)
{
	counters *n = &fs->n;
	json_t *o = json_object();
	bool bad = false;

	pf_json_put(o, "getattr", pf_json_u64(ld(&n->getattr)), &bad);
	pf_json_put(o, "getattr_listed", pf_json_u64(ld(&n->getattr_listed)), &bad);
	pf_json_put(o, "concurrent_peak", pf_json_u64(ld(&n->waiting_peak)), &bad);
	pf_json_put(o, "open_concurrent_peak", pf_json_u64(ld(&n->opening_peak)), &bad);
	pf_json_put(o, "open", pf_json_u64(ld(&n->open)), &bad);
	pf_json_put(o, "opendir", pf_json_u64(ld(&n->opendir)), &bad);
	pf_json_put(o, "readdir", pf_json_u64(ld(&n->readdir)), &bad);
	pf_json_put(o, "reads", pf_json_u64(ld(&n->reads)), &bad);
	pf_json_put(o, "read_bytes", pf_json_u64(ld(&n->read_bytes)), &bad);
	pf_json_put(o, "read_max", pf_json_u64(ld(&n->read_max)), &bad);
	pf_json_put(o, "eio_injected", pf_json_u64(ld(&n->eio_injected)), &bad);
	pf_json_put(o, "stalled", pf_json_u64(ld(&n->stalled)), &bad);
	pf_json_put(o, "interrupted", pf_json_u64(ld(&n->interrupted)), &bad);
	pf_json_put(o, "round_trips", pf_json_u64(ld(&n->trips)), &bad);
	pf_json_put(o, "rtt_wait_s", pf_json_num((double)ld(&n->rtt_wait_ns) / 1e9), &bad);
	pf_json_put(o, "bw_wait_s", pf_json_num((double)ld(&n->bw_wait_ns) / 1e9), &bad);
	pf_json_put(o, "mounted_s", pf_json_num((double)(now_ns() - fs->start_ns) / 1e9), &bad);
	pf_json_put(o, "rtt_ms", pf_json_num(fs->opt.rtt_ms), &bad);
	pf_json_put(o, "jitter_ms", pf_json_num(fs->opt.jitter_ms), &bad);
	pf_json_put(o, "mbps", pf_json_num(fs->opt.mbps), &bad);
	pf_json_put(o, "burst", pf_json_u64(fs->opt.burst), &bad);
	pf_json_put(o, "eio_rate", pf_json_num(fs->opt.eio_rate), &bad);
	pf_json_put(o, "stall_rate", pf_json_num(fs->opt.stall_rate), &bad);
	pf_json_put(o, "seed", pf_json_u64(fs->opt.seed), &bad);
	return cli_json_fprint(f, o, bad);
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *loop = NULL;
	struct fuse_session *se;
	struct fuse *fuse = NULL;
	char backing_real[PATH_MAX];
	FILE *stats = NULL;
	regionfs fs;
	stopper stop = { .started = false };
	int ret, status = 1;
	bool mounted = false, signals = false;

	cli_prog = "regionfs";
	memset(&fs, 0, sizeof(fs));
	fs.backing_fd = -1;
	ret = parse_options(argc, argv, &fs.opt);
	if (ret >= 0)
		return ret;
	fs.backing_fd = check_dirs(&fs.opt, backing_real, fs.mountpoint);
	if (fs.backing_fd < 0)
		return 2;
	/* Opened now, so a bad path fails before mounting and a relative one
	 * still works after the daemon leaves the working directory. */
	if (fs.opt.stats_path && strcmp(fs.opt.stats_path, "-")) {
		stats = fopen(fs.opt.stats_path, "w");
		if (!stats) {
			cli_fail("--stats %s: %s", fs.opt.stats_path, strerror(errno));
			close(fs.backing_fd);
			return 2;
		}
	}
	fs.rtt_ns = (int64_t)(fs.opt.rtt_ms * NS_PER_MS + 0.5);
	fs.jitter_ns = (int64_t)(fs.opt.jitter_ms * NS_PER_MS + 0.5);
	pthread_mutex_init(&fs.bucket.lock, NULL);
	pthread_mutex_init(&fs.handles_lock, NULL);
	pthread_mutex_init(&fs.listed_lock, NULL);
	fs.handles.next = fs.handles.prev = &fs.handles;
	if (fs.opt.mbps > 0) {
		fs.bucket.ns_per_byte = 1e9 / (fs.opt.mbps * BYTES_PER_MB);
		fs.bucket.burst_ns = (int64_t)((double)fs.opt.burst * fs.bucket.ns_per_byte);
	}

	if (fuse_arguments(&fs.opt, backing_real, &args) < 0) {
		cli_fail("out of memory");
		goto out;
	}
	fuse = fuse_new(&args, &rfs_ops, sizeof(rfs_ops), &fs);
	if (!fuse) {
		cli_fail("libfuse refused the options");
		goto out;
	}
	/* The stop signals blocked before the mount (stopper_block());
	 * libfuse's handlers stay for SIGPIPE, which they ignore. */
	se = fuse_get_session(fuse);
	fs.se = se;
	stopper_block(&stop);
	if (fuse_set_signal_handlers(se) != 0) {
		cli_fail("cannot install the signal handlers");
		goto out;
	}
	signals = true;
	if (fuse_mount(fuse, fs.mountpoint) != 0) {
		cli_fail("cannot mount %s (is /dev/fuse usable, and fusermount3 installed?)",
			 fs.opt.mountpoint);
		goto out;
	}
	mounted = true;
	fs.start_ns = now_ns();
	if (fuse_daemonize(fs.opt.foreground) != 0) {
		cli_fail("cannot detach from the terminal");
		goto out;
	}
	ret = stopper_start(&stop, se);
	if (ret < 0) {
		cli_fail("cannot start the signal thread: %s", strerror(-ret));
		goto out;
	}
	loop = fuse_loop_cfg_create();
	if (!loop) {
		cli_fail("out of memory");
		goto out;
	}
	fuse_loop_cfg_set_max_threads(loop, (unsigned)fs.opt.threads);
	fuse_loop_cfg_set_idle_threads(loop, (unsigned)fs.opt.threads);
	/* 0 after an outside unmount or a stop signal (the stopper's exit
	 * flag): both are a clean stop; < 0 is a failure. */
	ret = fuse_loop_mt(fuse, loop);
	if (ret < 0)
		cli_fail("serving %s failed: %s", fs.opt.mountpoint, strerror(-ret));
	else
		status = 0;
out:
	stopper_join(&stop);
	if (signals)
		fuse_remove_signal_handlers(fuse_get_session(fuse));
	if (mounted)
		fuse_unmount(fuse);
	if (fuse)
		fuse_destroy(fuse);
	if (loop)
		fuse_loop_cfg_destroy(loop);
	fuse_opt_free_args(&args);
	if (fs.opt.stats_path && mounted) {
		FILE *f = stats ? stats : stderr;

		if (write_stats(f, &fs))
			status = 1;
		if (stats && fclose(stats) != 0) {
			cli_fail("--stats %s: %s", fs.opt.stats_path, strerror(errno));
			status = 1;
		}
		stats = NULL;
	}
	if (stats)
		fclose(stats);
	pthread_mutex_destroy(&fs.bucket.lock);
	pthread_mutex_destroy(&fs.handles_lock);
	pthread_mutex_destroy(&fs.listed_lock);
	for (size_t i = 0; i < LISTED_MAX; i++)
		free(fs.listed[i].path);
	close(fs.backing_fd);
	return status;
}
