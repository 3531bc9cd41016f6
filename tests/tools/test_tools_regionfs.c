/* SPDX-License-Identifier: Apache-2.0 */
/* regionfs end to end: byte-identical reads (read, pread, io_uring), the
 * bandwidth cap, the round-trip latency, seeded jitter and EIO injection,
 * clean unmounts on signals and in the background, bad flags. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "pf_io.h"
#include "podfeed.h"
#include "testutil.h"

#define MIB (1u << 20)
#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 15000

/* One mount per test (each Criterion test is its own process). */
static pid_t rfs_pid = -1;
static char dir[64];
static char backing[128];
static char mnt[128];
static char stats_path[128];

/* Always run, also after a failed assertion: no mount and no process
 * outlives the test. */
static void teardown(void)
{
	tu_regionfs_stop(&rfs_pid, mnt);
}

/* Skip where FUSE cannot work at all; a mount that fails after this is a
 * failure of regionfs, not a skip. */
static void need_fuse(void)
{
	tu_need_fuse();
}

/* A fresh backing directory and mount point. */
static void make_dirs(void)
{
	snprintf(dir, sizeof(dir), "%s", tu_tmpdir());
	snprintf(backing, sizeof(backing), "%s/backing", dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	snprintf(stats_path, sizeof(stats_path), "%s/stats.json", dir);
	cr_assert_eq(mkdir(backing, 0755), 0);
	cr_assert_eq(mkdir(mnt, 0755), 0);
}

/* Deterministic bytes: splitmix64 of the position's word. */
static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t x = seed + (i / 8 + 1) * 0x9e3779b97f4a7c15ull;

		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
		x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
		x ^= x >> 31;
		memcpy(buf + i, &x, len - i < 8 ? len - i : 8);
	}
}

/* A backing file of len deterministic bytes.  @return the bytes (free). */
static uint8_t *make_file(const char *name, size_t len, uint64_t seed)
{
	char path[256];
	uint8_t *data = malloc(len ? len : 1);

	cr_assert_not_null(data);
	fill(data, len, seed);
	snprintf(path, sizeof(path), "%s/%s", backing, name);
	tu_write_file(path, data, len);
	return data;
}

/* Start `regionfs -f ARGS --stats STATS BACKING MNT` and wait for the
 * mount.  The child gets SIGTERM if this test process dies, so a crash
 * still unmounts. */
static void start(const char *args)
{
	rfs_pid = tu_regionfs_start(args, stats_path, backing, mnt, START_TIMEOUT_MS);
}

/* Send sig and check that regionfs exits 0 and leaves no mount. */
static void stop(int sig)
{
	int64_t deadline = tu_now_ns() + (int64_t)STOP_TIMEOUT_MS * 1000000;
	int status = 0;
	pid_t w;

	cr_assert_gt(rfs_pid, 0);
	cr_assert_eq(kill(rfs_pid, sig), 0);
	while ((w = waitpid(rfs_pid, &status, WNOHANG)) == 0) {
		cr_assert_lt(tu_now_ns(), deadline, "regionfs did not exit after signal %d", sig);
		tu_sleep_ms(10);
	}
	cr_assert_eq(w, rfs_pid);
	rfs_pid = -1;
	cr_assert(WIFEXITED(status), "regionfs died of signal %d",
		  WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	cr_assert_eq(WEXITSTATUS(status), 0);
	cr_assert_not(tu_is_mounted(mnt), "%s is still mounted", mnt);
}

/* The counters regionfs wrote at exit (decref the result). */
static json_t *stats(void)
{
	json_error_t jerr;
	json_t *o = json_load_file(stats_path, 0, &jerr);

	cr_assert_not_null(o, "%s: %s", stats_path, jerr.text);
	return o;
}

static uint64_t ju(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	cr_assert(json_is_integer(v), "stats have no integer '%s'", key);
	return (uint64_t)json_integer_value(v);
}

static double jd(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	cr_assert(json_is_number(v), "stats have no number '%s'", key);
	return json_number_value(v);
}

static const char *in_mnt(const char *name)
{
	static char path[256];

	snprintf(path, sizeof(path), "%s/%s", mnt, name);
	return path;
}

/* Read a whole file in 1 MiB read(2) calls.  @return the bytes (free). */
static uint8_t *read_all(const char *path, size_t expect)
{
	uint8_t *buf = malloc(expect + MIB);
	size_t got = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_not_null(buf);
	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
	while ((n = read(fd, buf + got, MIB)) > 0)
		got += (size_t)n;
	cr_assert_eq(n, 0, "read %s at %zu: %s", path, got, strerror(errno));
	cr_assert_eq(got, expect, "%s: %zu bytes, expected %zu", path, got, expect);
	close(fd);
	return buf;
}

/* ------------------------------------------------------------------ */

Test(regionfs, reads_are_byte_identical, .fini = teardown, .timeout = 120)
{
	const size_t big = 24 * MIB + 12345;
	uint8_t *data, *got, *small;
	char path[256];
	struct stat st;
	uint64_t seed = 1;
	int fd;

	need_fuse();
	make_dirs();
	data = make_file("big.bin", big, 7);
	small = make_file("small.bin", 100, 8);
	snprintf(path, sizeof(path), "%s/sub", backing);
	cr_assert_eq(mkdir(path, 0755), 0);
	free(make_file("sub/empty", 0, 9));
	snprintf(path, sizeof(path), "%s/link", backing);
	cr_assert_eq(symlink("small.bin", path), 0);
	start("");

	/* A big sequential read, then the same file by random preads. */
	got = read_all(in_mnt("big.bin"), big);
	cr_assert(!memcmp(got, data, big), "sequential read differs");
	fd = open(in_mnt("big.bin"), O_RDONLY);
	cr_assert_geq(fd, 0);
	for (int i = 0; i < 300; i++) {
		uint64_t off, len;
		ssize_t n, want;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		off = (seed >> 20) % (big + 1000);	/* some past the end */
		len = 1 + (seed >> 7) % (i % 10 ? 70000 : 3 * MIB);
		want = off >= big ? 0 : (ssize_t)(big - off < len ? big - off : len);
		n = pread(fd, got, len, (off_t)off);
		cr_assert_eq(n, want, "pread(%llu, %llu) = %zd: %s", (unsigned long long)off,
			     (unsigned long long)len, n, strerror(errno));
		if (want)
			cr_assert(!memcmp(got, data + off, (size_t)want),
				  "pread(%llu, %llu) differs", (unsigned long long)off,
				  (unsigned long long)len);
	}
	close(fd);
	free(got);

	got = read_all(in_mnt("link"), 100);
	cr_assert(!memcmp(got, small, 100));
	free(got);
	cr_assert_eq(stat(in_mnt("sub/empty"), &st), 0);
	cr_assert_eq(st.st_size, 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(stat(in_mnt("big.bin"), &st), 0);
	cr_assert_eq((size_t)st.st_size, big);
	cr_assert_eq(lstat(in_mnt("link"), &st), 0);
	cr_assert(S_ISLNK(st.st_mode));
	cr_assert_eq(stat(in_mnt("nothing"), &st), -1);
	cr_assert_eq(errno, ENOENT);

	/* The listing, whole. */
	DIR *d = opendir(mnt);
	int names = 0;
	struct dirent *e;
	cr_assert_not_null(d);
	while ((e = readdir(d)))
		names |= !strcmp(e->d_name, "big.bin") << 0 | !strcmp(e->d_name, "small.bin") << 1 |
			 !strcmp(e->d_name, "sub") << 2 | !strcmp(e->d_name, "link") << 3;
	closedir(d);
	cr_assert_eq(names, 15, "listing misses entries (mask %d)", names);

	/* Read-only: nothing can be written, made or removed. */
	cr_assert_eq(open(in_mnt("big.bin"), O_WRONLY), -1);
	cr_assert_eq(errno, EROFS);
	cr_assert_eq(open(in_mnt("new"), O_WRONLY | O_CREAT, 0644), -1);
	cr_assert_eq(errno, EROFS);
	cr_assert_eq(unlink(in_mnt("small.bin")), -1);
	cr_assert_eq(errno, EROFS);

	stop(SIGTERM);
	json_t *s = stats();
	/* Every byte the kernel asked for came from the backing file once per
	 * open at least; no errors were injected. */
	cr_assert_geq(ju(s, "read_bytes"), big);
	cr_assert_gt(ju(s, "reads"), 0);
	cr_assert_eq(ju(s, "eio_injected"), 0);
	cr_assert_gt(ju(s, "open"), 0);
	cr_assert_gt(ju(s, "getattr"), 0);
	json_decref(s);
	free(data);
	free(small);
}

/* The loader's own I/O engine over the mount, io_uring first: buffered and,
 * where the mount allows it, O_DIRECT. */
static void engine_reads(const uint8_t *data, size_t len, unsigned flags)
{
	enum { DEPTH = 16, CHUNK = 256 * 1024 };
	pf_io_config cfg = { .queue_depth = DEPTH, .backend = "uring" };
	pf_io_req reqs[DEPTH], *done[DEPTH];
	uint8_t *bufs, *got = malloc(len);
	uint64_t next = 0, finished = 0, nchunks = (len + CHUNK - 1) / CHUNK;
	pf_error err;
	pf_io *io;
	int ret, file;

	cr_assert_not_null(got);
	cr_assert_eq(posix_memalign((void **)&bufs, 4096, (size_t)DEPTH * CHUNK), 0);
	pf_error_clear(&err);
	ret = pf_io_create(&io, &cfg, &err);
	if (ret == -EPERM || ret == -ENOSYS)
		cr_skip_test("io_uring is refused on this kernel (%s)", pf_strerror(ret));
	cr_assert_eq(ret, 0, "%s", err.msg);
	cr_assert_str_eq(pf_io_backend_name(io), "io_uring");
	file = pf_io_add_file(io, in_mnt("big.bin"), flags, &err);
	cr_assert_geq(file, 0, "%s", err.msg);
	cr_assert_eq(pf_io_file_size(io, (uint32_t)file), len);
	if (flags & PF_IO_DIRECT)
		cr_assert(pf_io_file_direct(io, (uint32_t)file),
			  "the mount refused O_DIRECT");
	for (int i = 0; i < DEPTH; i++) {
		reqs[i].buf = bufs + (size_t)i * CHUNK;
		reqs[i].buf_index = -1;
	}
	/* Keep DEPTH chunks in flight, each request reused as it completes. */
	for (int i = 0; i < DEPTH && next < nchunks; i++, next++) {
		reqs[i].file = (uint32_t)file;
		reqs[i].offset = next * CHUNK;
		reqs[i].len = CHUNK;
		cr_assert_eq(pf_io_submit(io, &reqs[i]), 0);
	}
	while (finished < nchunks) {
		int n = pf_io_reap(io, done, DEPTH, 1);

		cr_assert_gt(n, 0, "reap: %s", pf_strerror(n));
		for (int i = 0; i < n; i++) {
			pf_io_req *r = done[i];
			uint64_t want = len - r->offset < CHUNK ? len - r->offset : CHUNK;

			cr_assert_eq(r->result, (int64_t)want, "read at %llu: %lld",
				     (unsigned long long)r->offset, (long long)r->result);
			memcpy(got + r->offset, r->buf, (size_t)want);
			finished++;
			if (next < nchunks) {
				r->offset = next++ * CHUNK;
				cr_assert_eq(pf_io_submit(io, r), 0);
			}
		}
	}
	cr_assert(!memcmp(got, data, len), "io_uring read through the mount differs");
	pf_io_free(io);
	free(bufs);
	free(got);
}

Test(regionfs, io_uring_reads_are_byte_identical, .fini = teardown, .timeout = 120)
{
	const size_t len = 16 * MIB + 4321;
	uint8_t *data;

	need_fuse();
	make_dirs();
	data = make_file("big.bin", len, 11);
	/* A round trip per request, so requests overlap in the mount. */
	start("--rtt-ms 2 --threads 8");
	engine_reads(data, len, 0);
	engine_reads(data, len, PF_IO_DIRECT);
	stop(SIGTERM);
	free(data);
}

/* The token bucket sets the pace: 20 MB at 10 MB/s take 2 s, far more
 * than the mount needs without a cap.  A 1 MiB burst adds at most 5.5%.
 * Only the upper bound is asserted of the rate: a loaded machine (the
 * suite runs tests in parallel on 2 cores, the sanitizers) can make the
 * reader slower than the cap, never faster.  That the bucket made the
 * reader wait is checked from the mount's own counters, and needs a
 * reader faster than the cap: a reader below the cap never waits, and
 * one near it may not (the burst absorbs its lag), so the cap is set low
 * enough that any reader here outruns it (an ASan build on a busy
 * machine reads this mount at well over 100 MB/s). */
Test(regionfs, mbps_caps_throughput, .fini = teardown, .timeout = 120)
{
	const size_t len = 20 * 1000 * 1000;
	const double cap = 10;
	uint8_t *data, *got;
	int64_t t0;
	double secs, rate;

	need_fuse();
	make_dirs();
	data = make_file("big.bin", len, 12);
	start("--mbps 10 --burst 1M");
	t0 = tu_now_ns();
	got = read_all(in_mnt("big.bin"), len);
	secs = (double)(tu_now_ns() - t0) / 1e9;
	rate = (double)len / 1e6 / secs;
	cr_assert(!memcmp(got, data, len));
	cr_log_info("%.1f MB/s through a %.0f MB/s cap (%.3f s)", rate, cap, secs);
	cr_assert(rate <= cap * 1.2,
		  "read %.1f MB/s through a %.0f MB/s cap (%.3f s)", rate, cap, secs);
	stop(SIGINT);
	json_t *s = stats();
	cr_assert_eq(ju(s, "read_bytes"), len);
	/* The bucket, not the reader, set the pace: it made the reader wait
	 * (how long depends on the reader, so only that it did). */
	cr_assert(jd(s, "bw_wait_s") > 0,
		  "read %.1f MB/s through a %.0f MB/s cap, yet the bucket never made "
		  "the reader wait", rate, cap);
	json_decref(s);
	free(data);
	free(got);
}

/* Each uncached read waits at least one round trip, and so do the lookup
 * and the open before it.  Lower bounds only: a loaded machine is slower,
 * never faster. */
Test(regionfs, rtt_adds_latency_per_request, .fini = teardown, .timeout = 120)
{
	const int64_t rtt_ns = 40 * 1000000;
	char path[256];
	uint8_t buf[4096];
	int64_t t0, dt;
	int fd;

	need_fuse();
	make_dirs();
	/* Sparse: 64 MiB of zeros costs nothing to make. */
	snprintf(path, sizeof(path), "%s/sparse", backing);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 64 * MIB), 0);
	close(fd);
	start("--rtt-ms 40");
	t0 = tu_now_ns();
	fd = open(in_mnt("sparse"), O_RDONLY);
	dt = tu_now_ns() - t0;
	cr_assert_geq(fd, 0);
	cr_assert_geq(dt, 2 * rtt_ns, "lookup + open took %.1f ms", (double)dt / 1e6);
	/* 8 MiB apart: far outside any readahead window, so each read is a
	 * request of its own. */
	for (int i = 0; i < 5; i++) {
		t0 = tu_now_ns();
		cr_assert_eq(pread(fd, buf, sizeof(buf), (off_t)i * 8 * MIB + 4 * MIB),
			     (ssize_t)sizeof(buf));
		dt = tu_now_ns() - t0;
		cr_assert_geq(dt, rtt_ns, "read %d took %.1f ms", i, (double)dt / 1e6);
	}
	close(fd);
	stop(SIGTERM);
	json_t *s = stats();
	cr_assert_geq(ju(s, "reads"), 5);
	cr_assert_geq(ju(s, "round_trips"), 7);
	cr_assert_geq(jd(s, "rtt_wait_s"), 0.04 * 7);
	json_decref(s);
}

/* A listing brings its entries' metadata: for --cache-s their lookups
 * are answered from it (no round trip); without a listing each is a
 * round trip. */
Test(regionfs, a_listing_answers_its_entries_lookups, .fini = teardown, .timeout = 120)
{
	char name[32];
	struct stat st;
	json_t *s;
	DIR *d;

	need_fuse();
	make_dirs();
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "f%02d", i);
		free(make_file(name, 100, (uint64_t)i));
	}
	/* Not listed: every stat asks. */
	start("--rtt-ms 5 --cache-s 60");
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "f%02d", i);
		cr_assert_eq(stat(in_mnt(name), &st), 0);
	}
	stop(SIGTERM);
	s = stats();
	cr_assert_eq(ju(s, "getattr_listed"), 0);
	cr_assert_geq(ju(s, "round_trips"), 10);
	json_decref(s);

	/* Listed: none of its entries' lookups asks. */
	start("--rtt-ms 5 --cache-s 60");
	d = opendir(mnt);
	cr_assert_not_null(d);
	while (readdir(d))
		;
	closedir(d);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "f%02d", i);
		cr_assert_eq(stat(in_mnt(name), &st), 0);
		cr_assert_eq(st.st_size, 100);
	}
	stop(SIGTERM);
	s = stats();
	cr_assert_eq(ju(s, "getattr_listed"), 20);
	cr_assert_leq(ju(s, "round_trips"), 3, "%llu round trips: the listing and the root's",
		      (unsigned long long)ju(s, "round_trips"));
	json_decref(s);
}

/* The same reads with the same seed draw the same delays: the summed wait
 * is the same to the nanosecond, each delay within [rtt, rtt + jitter];
 * another seed draws others. */
static double jitter_run(const char *args, uint64_t *trips)
{
	uint8_t buf[4096];
	json_t *s;
	double wait;
	int fd;

	start(args);
	fd = open(in_mnt("f"), O_RDONLY);
	cr_assert_geq(fd, 0);
	for (int i = 0; i < 20; i++)
		cr_assert_eq(pread(fd, buf, sizeof(buf), (off_t)i * 4096), (ssize_t)sizeof(buf));
	close(fd);
	stop(SIGTERM);
	s = stats();
	*trips = ju(s, "round_trips");
	wait = jd(s, "rtt_wait_s");
	json_decref(s);
	return wait;
}

Test(regionfs, jitter_is_seeded_and_bounded, .fini = teardown, .timeout = 120)
{
	uint64_t t1, t2, t3;
	double w1, w2, w3;

	need_fuse();
	make_dirs();
	free(make_file("f", 20 * 4096, 3));
	/* --direct-io: every pread is one request, in the same order. */
	w1 = jitter_run("--rtt-ms 1 --jitter-ms 4 --seed 5 --direct-io", &t1);
	w2 = jitter_run("--rtt-ms 1 --jitter-ms 4 --seed 5 --direct-io", &t2);
	w3 = jitter_run("--rtt-ms 1 --jitter-ms 4 --seed 6 --direct-io", &t3);
	cr_assert_geq(t1, 22);	/* lookup, open, 20 reads */
	cr_assert_eq(t1, t2);
	cr_assert_eq(t1, t3);
	cr_assert_eq(w1, w2, "same seed, different delays: %.9f vs %.9f", w1, w2);
	cr_assert_neq(w1, w3, "another seed drew the same delays");
	cr_assert(w1 > 0.001 * (double)t1 && w1 < 0.005 * (double)t1,
		  "mean delay %.3f ms is outside [1, 5] ms", w1 / (double)t1 * 1e3);
}

Test(regionfs, eio_rate_one_fails_every_read, .fini = teardown, .timeout = 120)
{
	uint8_t buf[4096];
	json_t *s;
	int fd;

	need_fuse();
	make_dirs();
	free(make_file("f", 1 * MIB, 4));
	start("--eio-rate 1");
	fd = open(in_mnt("f"), O_RDONLY);
	cr_assert_geq(fd, 0, "open must still work: %s", strerror(errno));
	for (int i = 0; i < 4; i++) {
		errno = 0;
		cr_assert_eq(pread(fd, buf, sizeof(buf), (off_t)i * 256 * 1024), -1);
		cr_assert_eq(errno, EIO, "read %d: %s", i, strerror(errno));
	}
	close(fd);
	stop(SIGTERM);
	s = stats();
	cr_assert_gt(ju(s, "eio_injected"), 0);
	cr_assert_eq(ju(s, "eio_injected"), ju(s, "reads"));
	cr_assert_eq(ju(s, "read_bytes"), 0);
	json_decref(s);
}

Test(regionfs, eio_rate_zero_fails_none, .fini = teardown, .timeout = 120)
{
	const size_t len = 8 * MIB + 1;
	uint8_t *data, *got;
	json_t *s;

	need_fuse();
	make_dirs();
	data = make_file("f", len, 5);
	start("--eio-rate 0 --direct-io");
	got = read_all(in_mnt("f"), len);
	cr_assert(!memcmp(got, data, len));
	stop(SIGTERM);
	s = stats();
	cr_assert_eq(ju(s, "eio_injected"), 0);
	cr_assert_geq(ju(s, "reads"), 8);
	json_decref(s);
	free(data);
	free(got);
}

/* Which of 64 one-page reads fail, as a bit mask. */
static uint64_t eio_pattern(const char *args)
{
	uint8_t buf[4096];
	uint64_t mask = 0;
	int fd;

	start(args);
	fd = open(in_mnt("f"), O_RDONLY);
	cr_assert_geq(fd, 0);
	for (int i = 0; i < 64; i++) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)i * 4096);

		if (n < 0) {
			cr_assert_eq(errno, EIO);
			mask |= 1ull << i;
		} else {
			cr_assert_eq(n, (ssize_t)sizeof(buf));
		}
	}
	close(fd);
	stop(SIGTERM);
	return mask;
}

Test(regionfs, eio_rate_is_seeded, .fini = teardown, .timeout = 120)
{
	uint64_t a, b, c;
	int fails;

	need_fuse();
	make_dirs();
	free(make_file("f", 64 * 4096, 6));
	a = eio_pattern("--eio-rate 0.5 --seed 9 --direct-io");
	b = eio_pattern("--eio-rate 0.5 --seed 9 --direct-io");
	c = eio_pattern("--eio-rate 0.5 --seed 10 --direct-io");
	fails = __builtin_popcountll(a);
	cr_assert_eq(a, b, "same seed, different failures: %016llx vs %016llx",
		     (unsigned long long)a, (unsigned long long)b);
	cr_assert_neq(a, c, "another seed failed the same reads");
	/* 64 draws at 0.5: 12..52 failures holds with probability 1 - 1e-7. */
	cr_assert(fails >= 12 && fails <= 52, "%d of 64 reads failed at rate 0.5", fails);
}

Test(regionfs, signals_unmount_cleanly, .fini = teardown, .timeout = 120)
{
	uint8_t *got;
	json_t *s;

	need_fuse();
	make_dirs();
	free(make_file("f", 4096, 1));
	start("");
	got = read_all(in_mnt("f"), 4096);
	free(got);
	stop(SIGTERM);
	s = stats();
	cr_assert_geq(ju(s, "reads"), 1);
	json_decref(s);
	start("--rtt-ms 1");
	stop(SIGINT);
	start("");
	stop(SIGHUP);
}

/* Without -f it detaches once mounted; an outside unmount stops it, and
 * it still writes its counters. */
Test(regionfs, background_mount_stops_on_unmount, .fini = teardown, .timeout = 120)
{
	uint8_t *data, *got;
	int64_t deadline;
	struct stat st;

	need_fuse();
	make_dirs();
	data = make_file("f", 70000, 2);
	cr_assert_eq(tu_system("%s --stats %s %s %s", tu_env_tool("REGIONFS"), stats_path, backing, mnt), 0);
	cr_assert(tu_is_mounted(mnt), "regionfs returned without a mount");
	got = read_all(in_mnt("f"), 70000);
	cr_assert(!memcmp(got, data, 70000));
	cr_assert_eq(tu_system("fusermount3 -u %s", mnt), 0);
	cr_assert_not(tu_is_mounted(mnt));
	/* The stats file is written when the daemon exits. */
	deadline = tu_now_ns() + (int64_t)STOP_TIMEOUT_MS * 1000000;
	while (stat(stats_path, &st) < 0 || st.st_size == 0) {
		cr_assert_lt(tu_now_ns(), deadline, "the detached regionfs did not exit");
		tu_sleep_ms(10);
	}
	tu_sleep_ms(50);	/* the rest of the line */
	json_t *s = stats();
	cr_assert_geq(ju(s, "read_bytes"), 70000);
	json_decref(s);
	free(data);
	free(got);
}

/* Run regionfs with args; @return its exit status, stderr in err. */
static int run_bad(const char *args, char *err, size_t cap)
{
	char path[256];
	FILE *f;
	size_t n;
	int st;

	snprintf(path, sizeof(path), "%s/stderr", dir);
	st = tu_system("%s %s >/dev/null 2>%s", tu_env_tool("REGIONFS"), args, path);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	n = fread(err, 1, cap - 1, f);
	err[n] = '\0';
	fclose(f);
	return st;
}

Test(regionfs, bad_flags_fail_clearly, .fini = teardown)
{
	static const struct {
		const char *args;	/* %1$s backing, %2$s mount point */
		const char *says;
	} cases[] = {
		{ "--mbps -5 %1$s %2$s", "--mbps: '-5' must not be negative" },
		{ "--mbps fast %1$s %2$s", "--mbps: 'fast' is not a number" },
		{ "--mbps 0 %1$s %2$s", "--mbps: '0' must be above 0" },
		{ "--rtt-ms 1e3 %1$s %2$s", "--rtt-ms: '1e3' is not a number" },
		{ "--rtt-ms 1.2.3 %1$s %2$s", "--rtt-ms: '1.2.3' is not a number" },
		{ "--jitter-ms -1 %1$s %2$s", "--jitter-ms: '-1' must not be negative" },
		{ "--eio-rate 1.5 %1$s %2$s", "--eio-rate: '1.5' is out of range [0, 1]" },
		{ "--eio-rate nan %1$s %2$s", "--eio-rate: 'nan' is not a number" },
		{ "--threads 0 %1$s %2$s", "--threads: '0' is out of range" },
		{ "--burst 12x %1$s %2$s", "--burst: '12x' is not a whole number" },
		{ "--seed -1 %1$s %2$s", "--seed: '-1' is not a whole number" },
		{ "--read-ahead-kb lots %1$s %2$s", "--read-ahead-kb: 'lots' is not a whole number" },
		{ "--frobnicate %1$s %2$s", "unknown option '--frobnicate'" },
		{ "%1$s %2$s --rtt-ms", "--rtt-ms: a value is required" },
		{ "%1$s", "BACKING_DIR and MOUNTPOINT are required" },
		{ "%1$s %2$s %2$s", "too many arguments" },
		{ "%1$s/missing %2$s", "No such file or directory" },
		{ "%1$s %2$s/missing", "MOUNTPOINT" },
		{ "%1$s/file %2$s", "not a directory" },
		{ "%1$s %1$s/inner", "is inside BACKING_DIR" },
		{ "--stats /nonexistent/dir/s.json %1$s %2$s", "--stats /nonexistent/dir/s.json" },
	};
	char args[1024], err[4096], path[256];

	make_dirs();
	free(make_file("file", 10, 1));
	snprintf(path, sizeof(path), "%s/inner", backing);
	cr_assert_eq(mkdir(path, 0755), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int st;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		snprintf(args, sizeof(args), cases[i].args, backing, mnt);
#pragma GCC diagnostic pop
		st = run_bad(args, err, sizeof(err));
		cr_assert_eq(st, 2, "regionfs %s exited %d: %s", args, st, err);
		cr_assert_not_null(strstr(err, cases[i].says),
				   "regionfs %s said:\n%s\nnot: %s", args, err, cases[i].says);
		cr_assert_not_null(strstr(err, "regionfs: "), "no program name in: %s", err);
		cr_assert_not(tu_is_mounted(mnt));
	}
	cr_assert_eq(tu_system("%s --help | grep -q 'read-only\\|Only reading'", tu_env_tool("REGIONFS")), 0);
}
