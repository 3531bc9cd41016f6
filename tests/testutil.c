/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the Criterion tests. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common_internal.h"
#include "pf_formats.h"
#include "podfeed.h"
#include "testutil.h"

uint8_t *tu_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	cr_assert_not_null(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(n > 0 ? (size_t)n : 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n, "short read of %s", path);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

void tu_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f, "cannot create %s", path);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

const char *tu_fixture(const char *name)
{
	static char path[1024];

	snprintf(path, sizeof(path), "%s/%s", PF_FIXTURES_DIR, name);
	return path;
}

/* Directories made by this test process, removed when it exits. */
static char made[16][64];
static int nmade;

static void remove_tmpdirs(void)
{
	for (int i = 0; i < nmade; i++)
		tu_system("rm -rf '%s'", made[i]);
}

static const char *tmpdir_in(const char *parent)
{
	char *dir;

	cr_assert_lt(nmade, 16, "too many temporary directories in one test");
	dir = made[nmade];
	snprintf(dir, sizeof(made[0]), "%s/pftest.XXXXXX", parent);
	cr_assert_not_null(mkdtemp(dir));
	if (nmade++ == 0)
		atexit(remove_tmpdirs);
	return dir;
}

const char *tu_tmpdir(void)
{
	return tmpdir_in("/tmp");
}

const char *tu_tmpdir_mem(void)
{
	struct statfs sfs;

	/* TMPFS_MAGIC (linux/magic.h) */
	if (statfs("/dev/shm", &sfs) == 0 && sfs.f_type == 0x01021994 &&
	    access("/dev/shm", W_OK) == 0)
		return tmpdir_in("/dev/shm");
	return tu_tmpdir();
}

int tu_system(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st < 0 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int tu_capture(const char *cmd, char *out, size_t cap, size_t *len)
{
	FILE *p = popen(cmd, "r");
	size_t got;

	cr_assert_not_null(p, "popen: %s", cmd);
	got = fread(out, 1, cap - 1, p);
	out[got] = '\0';
	if (len)
		*len = got;
	return pclose(p);
}

void tu_subst(char *out, size_t cap, const char *text, const char *letters,
	      const char *const *values)
{
	size_t n = 0;

	for (const char *p = text; *p && n < cap; p++) {
		const char *k = strchr(letters, *p);

		n += (size_t)snprintf(out + n, cap - n, "%s", k ? values[k - letters]
								 : (char[]){ *p, 0 });
	}
	cr_assert_lt(n, cap, "%s: too long", text);
	out[n] = '\0';
}

void tu_expect_run(const char *tool, const char *args, int status, const char *says)
{
	char cmd[4096], out[8192];
	int st;

	cr_assert_lt((size_t)snprintf(cmd, sizeof(cmd), "%s %s 2>&1", tool, args), sizeof(cmd));
	st = tu_capture(cmd, out, sizeof(out), NULL);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == status, "%s -> %d: %s", args,
		  WEXITSTATUS(st), out);
	cr_assert(strstr(out, says), "%s -> %s (no '%s')", args, out, says);
}

const char *tu_env_tool(const char *name)
{
	const char *t = getenv(name);

	cr_assert_not_null(t, "%s is not set (run through meson test)", name);
	return t;
}

int64_t tu_now_ns(void)
{
	return (int64_t)pf_now_ns();
}

void tu_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

bool tu_is_mounted(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192], mp[4096];
	bool found = false;

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*u %*u %*s %*s %4095s", mp) == 1 && !strcmp(mp, path))
			found = true;
	fclose(f);
	return found;
}

/* An Example {"id": [id], "v": [id, id/2, id/3]} */
int64_t tu_id_example(uint64_t id, uint8_t *buf, size_t cap)
{
	int64_t idv = (int64_t)id;
	float v[3] = { (float)id, (float)id / 2, (float)id / 3 };
	pf_feature f[2] = {
		{ .name = "id", .name_len = 2, .kind = PF_KIND_INT64, .count = 1, .v.int64s = &idv },
		{ .name = "v", .name_len = 1, .kind = PF_KIND_FLOAT, .count = 3, .v.floats = v },
	};
	return pf_example_encode(f, 2, buf, cap);
}

int64_t tu_padded_example(uint64_t id, uint8_t *buf, size_t cap)
{
	static uint8_t pad[TU_PAD_BYTES];
	uint64_t x = id * 0x9e3779b97f4a7c15ull + 1;
	int64_t idv = (int64_t)id;
	float v[3] = { (float)id, (float)id / 2, (float)id / 3 };
	pf_bytes pb = { pad, TU_PAD_BYTES };
	pf_feature f[3] = {
		{ .name = "id", .name_len = 2, .kind = PF_KIND_INT64, .count = 1, .v.int64s = &idv },
		{ .name = "v", .name_len = 1, .kind = PF_KIND_FLOAT, .count = 3, .v.floats = v },
		{ .name = "pad", .name_len = 3, .kind = PF_KIND_BYTES, .count = 1, .v.bytes = &pb },
	};

	for (size_t i = 0; i < TU_PAD_BYTES; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		pad[i] = (uint8_t)x;
	}
	return pf_example_encode(f, 3, buf, cap);
}

static int file_sink(void *ctx, const void *buf, size_t len)
{
	return fwrite(buf, 1, len, ctx) == len ? 0 : -EIO;
}

/* An indexed shard of ids [first, first+count), frames of frame_size. */
const char *tu_id_dataset(uint64_t count)
{
	const char *d = tu_tmpdir();
	char p[512];

	snprintf(p, sizeof(p), "%s/s.tfrecord.zst", d);
	tu_write_id_shard(p, 0, count, 4096, 0);
	return d;
}

const char *tu_id_shards(uint64_t first, uint64_t count, uint32_t shards, size_t frame_size)
{
	const char *d = tu_tmpdir();
	char p[512];

	for (uint32_t s = 0; s < shards; s++) {
		uint64_t lo = count * s / shards, hi = count * (s + 1) / shards;

		snprintf(p, sizeof(p), "%s/s%03u.tfrecord.zst", d, s);
		tu_write_id_shard(p, first + lo, hi - lo, frame_size, 0);
	}
	return d;
}

void tu_write_id_shard(const char *path, uint64_t first, uint64_t count,
		       size_t frame_size, uint32_t align)
{
	pf_shard_writer_config cfg = { .frame_size = frame_size, .align = align };
	pf_shard_writer *w;
	pf_error err;
	uint8_t rec[256];
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(pf_shard_writer_create(&w, &cfg, file_sink, f), 0);
	for (uint64_t i = 0; i < count; i++) {
		int64_t n = tu_id_example(first + i, rec, sizeof(rec));
		cr_assert_gt(n, 0);
		cr_assert_eq(pf_shard_writer_add(w, rec, (size_t)n, &err), 0);
	}
	cr_assert_eq(pf_shard_writer_close(w, &err), 0);
	pf_shard_writer_free(w);
	cr_assert_eq(fclose(f), 0);
}

/* A plain (or gzip) TFRecord stream of ids [first, first+count). */
void tu_write_id_stream(const char *path, uint64_t first, uint64_t count, bool gz)
{
	uint8_t rec[256], framed[300];
	gzFile g = gz ? gzopen(path, "wb") : NULL;
	FILE *f = gz ? NULL : fopen(path, "wb");

	for (uint64_t i = 0; i < count; i++) {
		int64_t n = tu_id_example(first + i, rec, sizeof(rec));
		size_t fl = pf_tfr_encode(framed, sizeof(framed), rec, (size_t)n);
		if (gz)
			cr_assert_eq(gzwrite(g, framed, (unsigned)fl), (int)fl);
		else
			cr_assert_eq(fwrite(framed, 1, fl, f), fl);
	}
	if (gz)
		cr_assert_eq(gzclose(g), Z_OK);
	else
		cr_assert_eq(fclose(f), 0);
}

void tu_need_fuse(void)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		cr_skip_test("/dev/fuse is not usable here: %s", strerror(errno));
	close(fd);
	if (!getenv("REGIONFS"))
		cr_skip_test("regionfs was not built (libfuse3 not found)");
}

pid_t tu_regionfs_start(const char *args, const char *stats, const char *from,
			const char *mnt, int timeout_ms)
{
	char cmd[1024];
	int64_t deadline = tu_now_ns() + (int64_t)timeout_ms * 1000000;
	int status;
	pid_t pid;

	snprintf(cmd, sizeof(cmd), "exec %s -f %s --stats %s %s %s", tu_env_tool("REGIONFS"),
		 args, stats, from, mnt);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* The stop signals as a terminal gives them, whatever this
		 * test was started under: `nohup` leaves SIGHUP ignored, a
		 * shell's background job SIGINT, and regionfs keeps a stop
		 * signal it was started with ignored. */
		signal(SIGHUP, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	while (!tu_is_mounted(mnt)) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			cr_assert_fail("%s exited (status %d) before mounting", cmd,
				       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		cr_assert_lt(tu_now_ns(), deadline, "%s did not mount in time", cmd);
		tu_sleep_ms(10);
	}
	return pid;
}

void tu_regionfs_stop(pid_t *pid, const char *mnt)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
		*pid = -1;
	}
	if (mnt[0] && tu_is_mounted(mnt) && umount2(mnt, MNT_DETACH) < 0)
		tu_system("fusermount3 -uz '%s' 2>/dev/null", mnt);
}

/* ------------------------------------------------------------------ */
/* The test allocator                                                   */

/* Counters of the allocator every test runs with (tu_alloc_*()): relaxed
 * atomics, since a loader's threads allocate too and each allocation must
 * draw a distinct number, so that exactly one of them fails. */
static struct tu_alloc_state {
	uint64_t count;		/* allocations asked for, failed ones too */
	uint64_t live;		/* blocks given and not yet freed */
	uint64_t fail_target;	/* the count that fails; 0: none */
} tu_alloc;

static void *tu_alloc_fn(void *opaque, size_t size)
{
	struct tu_alloc_state *st = opaque;
	uint64_t n = __atomic_add_fetch(&st->count, 1, __ATOMIC_RELAXED);
	uint64_t target = __atomic_load_n(&st->fail_target, __ATOMIC_RELAXED);
	void *p;

	if (st != &tu_alloc || !size)
		abort();	/* the hook's contract, broken */
	if (target && n == target)
		return NULL;
	p = malloc(size);
	if (p)
		__atomic_add_fetch(&st->live, 1, __ATOMIC_RELAXED);
	return p;
}

static void tu_free_fn(void *opaque, void *p)
{
	struct tu_alloc_state *st = opaque;

	if (st != &tu_alloc || !p)
		abort();
	__atomic_sub_fetch(&st->live, 1, __ATOMIC_RELAXED);
	free(p);
}

const pf_allocator tu_allocator = { tu_alloc_fn, tu_free_fn, &tu_alloc };

/* Installed before main(), so that every allocation the library makes in
 * a test goes through it: nothing is alive yet to refuse it. */
__attribute__((constructor)) static void tu_alloc_install(void)
{
	if (pf_allocator_set(&tu_allocator) != 0)
		abort();
}

void tu_alloc_fail_at(uint64_t n)
{
	uint64_t now = __atomic_load_n(&tu_alloc.count, __ATOMIC_RELAXED);

	__atomic_store_n(&tu_alloc.fail_target, n ? now + n : 0, __ATOMIC_RELAXED);
}

uint64_t tu_alloc_count(void)
{
	return __atomic_load_n(&tu_alloc.count, __ATOMIC_RELAXED);
}

uint64_t tu_alloc_live(void)
{
	return __atomic_load_n(&tu_alloc.live, __ATOMIC_RELAXED);
}

void tu_need_launcher(void)
{
	if (tu_system("command -v mpirun >/dev/null 2>&1") != 0)
		cr_skip_test("mpirun is not installed (Debian package openmpi-bin)");
	/* Each test runs in a process of its own: the variable reaches only
	 * this test's commands. */
	cr_assert_eq(setenv("TMPDIR", tu_tmpdir(), 1), 0);
}

void tu_need_mpirun(void)
{
#ifndef PF_TEST_HAVE_MPI
	cr_skip_test("podfeed was built without MPI (meson -Dmpi=disabled, or no "
		     "libopenmpi-dev)");
#endif
	tu_need_launcher();
}

pf_io *tu_engine(const char *backend, pf_io_config cfg)
{
	pf_io *io;
	pf_error err;
	int ret;

	cfg.backend = backend;
	cfg.queue_depth = cfg.queue_depth ? cfg.queue_depth : 16;
	pf_error_clear(&err);
	ret = pf_io_create(&io, &cfg, &err);
	if (ret == -EPERM || ret == -ENOSYS)
		cr_skip_test("io_uring is refused on this kernel (%s)", pf_strerror(ret));
	cr_assert_eq(ret, 0, "%s", err.msg);
	return io;
}

uint8_t *tu_save_state(pf_loader *l, size_t *len)
{
	int64_t n = pf_loader_save_state(l, NULL, 0);
	uint8_t *b;

	cr_assert_gt(n, 0);
	b = malloc((size_t)n);
	cr_assert_not_null(b);
	cr_assert_eq(pf_loader_save_state(l, b, (size_t)n), n);
	*len = (size_t)n;
	return b;
}
