/* SPDX-License-Identifier: Apache-2.0 */
/* The I/O engine's files, on both back-ends: opens as requests in flight
 * beside reads, closes that free the index for the next file, more files
 * than the ring's registered table (and than the old 4,096-file table)
 * through one engine, failed opens naming the file (missing, a
 * directory, no permission, a FIFO or a device: refused without waiting,
 * what is kept being what was stat'ed), descriptors kept blocking, an
 * engine freed with opens in flight closing what they opened, and the
 * "open-" faults, retried or not; pf_stat_many(). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "io_internal.h"
#include "pf_io.h"
#include "testutil.h"

static const char *const backend_names[] = { "uring", "pread" };

static struct criterion_test_params both_backends(void)
{
	static int which[] = { 0, 1 };
	return cr_make_param_array(int, which, 2);
}

/* File i's bytes: its length and a pattern of its own. */
static size_t file_len(unsigned i)
{
	return 1 + (i * 7919u) % 5000u;
}

static uint8_t file_byte(unsigned i, size_t k)
{
	return (uint8_t)((k * 2654435761u + i * 40503u) >> 11);
}

/* n files of their own bytes in a new directory; names in paths[]. */
static char **make_files(unsigned n)
{
	const char *d = tu_tmpdir_mem();
	char **paths = calloc(n, sizeof(*paths));
	uint8_t *buf = malloc(5000);

	for (unsigned i = 0; i < n; i++) {
		size_t len = file_len(i);

		for (size_t k = 0; k < len; k++)
			buf[k] = file_byte(i, k);
		cr_assert_gt(asprintf(&paths[i], "%s/f%05u.bin", d, i), 0);
		tu_write_file(paths[i], buf, len);
	}
	free(buf);
	return paths;
}

static unsigned open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	cr_assert_not_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Per file in flight: its open, then one read of it whole, then its
 * close; every file's bytes checked. */
typedef struct file_run {
	unsigned i;
	int file;
	bool reading;
	pf_io_req req;
	uint8_t buf[5000];
} file_run;

/* Open, read and close n files with up to `ahead` in flight, opens and
 * reads together.  @return the most indexes in use at once. */
static unsigned open_read_close(pf_io *io, char **paths, unsigned n, unsigned ahead)
{
	file_run *runs = calloc(ahead, sizeof(*runs));
	file_run **idle = calloc(ahead, sizeof(*idle));
	unsigned nidle = 0, next = 0, done = 0, max_index = 0;
	uint8_t want[5000];

	for (unsigned k = 0; k < ahead; k++)
		idle[nidle++] = &runs[k];
	while (done < n) {
		pf_io_req *got[32];
		int m;

		while (nidle && next < n) {
			file_run *r = idle[--nidle];

			r->i = next++;
			r->reading = false;
			r->req = (pf_io_req){ .user = r };
			cr_assert_eq(pf_io_open(io, &r->req, paths[r->i], 0), 0);
			cr_assert(r->req.open);
			r->file = (int)r->req.file;
			max_index = r->req.file > max_index ? r->req.file : max_index;
		}
		m = pf_io_reap(io, got, 32, 1);
		cr_assert_gt(m, 0);
		for (int k = 0; k < m; k++) {
			file_run *r = got[k]->user;
			pf_error err;

			pf_error_clear(&err);
			pf_io_req_error(io, got[k], &err);
			cr_assert_geq(got[k]->result, 0, "%s: %s", err.file, err.msg);
			if (!r->reading) {
				cr_assert_eq(pf_io_file_size(io, (uint32_t)r->file), file_len(r->i));
				cr_assert_str_eq(pf_io_file_path(io, (uint32_t)r->file), paths[r->i]);
				r->reading = true;
				r->req = (pf_io_req){ .file = (uint32_t)r->file, .len = 5000,
						      .buf = r->buf, .buf_index = -1, .user = r };
				cr_assert_eq(pf_io_submit(io, &r->req), 0);
				continue;
			}
			cr_assert_eq(r->req.result, (int64_t)file_len(r->i));
			for (size_t b = 0; b < file_len(r->i); b++)
				want[b] = file_byte(r->i, b);
			cr_assert_eq(memcmp(r->buf, want, file_len(r->i)), 0, "file %u", r->i);
			cr_assert_eq(pf_io_close_file(io, (uint32_t)r->file), 0);
			idle[nidle++] = r;
			done++;
		}
	}
	free(runs);
	free(idle);
	return max_index + 1;
}

ParameterizedTestParameters(io_open, more_files_than_any_table)
{
	return both_backends();
}

/* 5,000 files, more than the 4,096 the engine's table once held, through
 * a ring whose registered table holds 8: 12 open or being read at once,
 * each index reused when its file closes. */
ParameterizedTest(int *which, io_open, more_files_than_any_table, .timeout = 120)
{
	const unsigned n = 5000;
	char **paths = make_files(n);
	pf_io *io = tu_engine(backend_names[*which], (pf_io_config){ .max_files = 8 });
	unsigned fds0 = open_fds(), indexes;
	pf_io_engine_stats st;

	indexes = open_read_close(io, paths, n, 12);
	cr_assert_leq(indexes, 12, "closed indexes are handed out again (%u used)", indexes);
	pf_io_get_stats(io, &st);
	cr_assert_eq(st.opens.ops, n);
	cr_assert_eq(st.opens.errors, 0);
	cr_assert_eq(st.closes, n);
	cr_assert_eq(st.files_open, 0);
	cr_assert_leq(st.files_open_peak, 12);
	cr_assert_eq(st.reads.ops, n, "the closed files' reads are counted");
	cr_assert_eq(open_fds(), fds0, "every descriptor is closed");
	pf_io_free(io);
	for (unsigned i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

/* io_uring: files open in the ring's registered table hold no descriptor
 * of the process; past its size they get plain ones. */
Test(io_open, registered_files_hold_no_descriptor)
{
	char **paths = make_files(12);
	pf_io *io = tu_engine("uring", (pf_io_config){ .max_files = 8 });
	unsigned fds0 = open_fds();
	pf_error err;
	int f[12];

	if (!io->fixed_opens)
		cr_skip_test("this kernel opens no file into a registered table");
	for (unsigned i = 0; i < 12; i++) {
		f[i] = pf_io_add_file(io, paths[i], 0, &err);
		cr_assert_geq(f[i], 0, "%s", err.msg);
	}
	cr_assert_eq(open_fds(), fds0 + 4, "8 registered, 4 plain");
	for (unsigned i = 0; i < 12; i++)
		cr_assert_eq(pf_io_close_file(io, (uint32_t)f[i]), 0);
	cr_assert_eq(open_fds(), fds0);
	pf_io_free(io);
}

/* Effective capabilities without the override of file permissions, so
 * that root too is refused a file of mode 000. */
static void drop_dac_override(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	cr_assert_eq(syscall(SYS_capget, &h, d), 0);
	d[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
	cr_assert_eq(syscall(SYS_capset, &h, d), 0);
}

/* Open path and wait.  @return the request (result and error in err). */
static int64_t open_one(pf_io *io, const char *path, pf_io_req *r, pf_error *err)
{
	pf_io_req *done[1];

	*r = (pf_io_req){ 0 };
	cr_assert_eq(pf_io_open(io, r, path, 0), 0);
	cr_assert_eq(pf_io_reap(io, done, 1, 1), 1);
	cr_assert_eq(done[0], r);
	pf_error_clear(err);
	pf_io_req_error(io, r, err);
	return r->result;
}

ParameterizedTestParameters(io_open, failed_opens_name_the_file)
{
	return both_backends();
}

ParameterizedTest(int *which, io_open, failed_opens_name_the_file)
{
	const char *d = tu_tmpdir();
	char missing[256], locked[256], line[1024];
	pf_io *io;
	pf_io_req r, rd, *done[1];
	pf_error err;
	uint8_t buf[16];

	snprintf(missing, sizeof(missing), "%s/missing.tfrecord.zst", d);
	snprintf(locked, sizeof(locked), "%s/locked.tfrecord.zst", d);
	tu_write_file(locked, "0123456789", 10);
	cr_assert_eq(chmod(locked, 0), 0);
	drop_dac_override();
	io = tu_engine(backend_names[*which], (pf_io_config){ .retries = 2 });

	cr_assert_eq(open_one(io, missing, &r, &err), -ENOENT);
	pf_error_format(&err, line, sizeof(line));
	cr_assert_str_eq(err.file, missing);
	cr_assert(strstr(line, "cannot open: no such file"), "%s", line);
	cr_assert_eq(r.retries, 0, "ENOENT is not retried");
	/* The failed file's index is the caller's until closed: reads of it
	 * fail, and its path is still there to name. */
	rd = (pf_io_req){ .file = r.file, .len = 16, .buf = buf, .buf_index = -1 };
	cr_assert_eq(pf_io_submit(io, &rd), 0);
	cr_assert_eq(pf_io_reap(io, done, 1, 1), 1);
	cr_assert_eq(rd.result, -EBADF);
	cr_assert_str_eq(pf_io_file_path(io, r.file), missing);
	cr_assert_eq(pf_io_close_file(io, r.file), 0);
	cr_assert_eq(pf_io_close_file(io, r.file), -EBADF);

	cr_assert_eq(open_one(io, d, &r, &err), -EISDIR);
	pf_error_format(&err, line, sizeof(line));
	cr_assert_str_eq(err.file, d);
	cr_assert(strstr(line, "is a directory, not a file"), "%s", line);
	cr_assert_eq(pf_io_close_file(io, r.file), 0);

	cr_assert_eq(open_one(io, locked, &r, &err), -EACCES);
	pf_error_format(&err, line, sizeof(line));
	cr_assert_str_eq(err.file, locked);
	cr_assert(strstr(line, "cannot open: permission denied"), "%s", line);
	cr_assert_eq(pf_io_close_file(io, r.file), 0);

	/* The same through pf_io_add_file(): the error, and no index. */
	cr_assert_eq(pf_io_add_file(io, locked, 0, &err), -EACCES);
	cr_assert_str_eq(err.file, locked);
	cr_assert(strstr(err.msg, "permission denied"), "%s", err.msg);
	cr_assert_eq(pf_io_add_file(io, "", 0, &err), -EINVAL);
	{
		pf_io_engine_stats st;

		pf_io_get_stats(io, &st);
		cr_assert_eq(st.files_open, 0);
		cr_assert_eq(st.opens.errors, 4);
	}
	pf_io_free(io);
}

ParameterizedTestParameters(io_open, only_regular_files_are_kept)
{
	return both_backends();
}

/* What an open keeps is what its stat saw: the stat is of the opened
 * descriptor, not of the path before the open (a path swapped for a FIFO
 * between the two would be opened, and a FIFO's open without O_NONBLOCK
 * waits for a writer, forever).  A FIFO with no writer and a character
 * device are opened without waiting and refused, naming the file and
 * what it is; a regular file is kept, blocking, with O_DIRECT when asked
 * for, its size the descriptor's. */
ParameterizedTest(int *which, io_open, only_regular_files_are_kept)
{
	const char *d = tu_tmpdir();
	char fifo[256], reg[256], line[1024];
	pf_io *io = tu_engine(backend_names[*which], (pf_io_config){ .max_files = 1 });
	unsigned fds0 = open_fds();
	pf_io_req r;
	pf_error err;
	int f, fl;

	snprintf(fifo, sizeof(fifo), "%s/shard-0.tfrecord.zst", d);
	snprintf(reg, sizeof(reg), "%s/shard-1.tfrecord.zst", d);
	cr_assert_eq(mkfifo(fifo, 0644), 0);
	tu_write_file(reg, "0123456789abcdef", 16);

	cr_assert_eq(open_one(io, fifo, &r, &err), -EINVAL);
	pf_error_format(&err, line, sizeof(line));
	cr_assert_str_eq(err.file, fifo);
	cr_assert(strstr(line, "is a FIFO, not a regular file"), "%s", line);
	cr_assert_eq(pf_io_close_file(io, r.file), 0);
	cr_assert_eq(pf_io_add_file(io, "/dev/null", 0, &err), -EINVAL);
	cr_assert(strstr(err.msg, "is a character device, not a regular file"), "%s", err.msg);
	cr_assert_eq(open_fds(), fds0, "a refused open keeps no descriptor");

	/* Regular: kept blocking, O_DIRECT as asked (this directory is on a
	 * disk where the kernel allows it; else the open falls back). */
	f = pf_io_add_file(io, reg, PF_IO_DIRECT, &err);
	cr_assert_geq(f, 0, "%s", err.msg);
	cr_assert_eq(pf_io_file_size(io, (uint32_t)f), 16);
	if (io->files[f].fd >= 0) {
		fl = fcntl(io->files[f].fd, F_GETFL);
		cr_assert_geq(fl, 0);
		cr_assert_eq(fl & O_NONBLOCK, 0, "the kept descriptor blocks");
		cr_assert_eq(!!(fl & O_DIRECT), pf_io_file_direct(io, (uint32_t)f));
	} else {
		cr_assert_geq(io->files[f].kslot, 0);
	}
	/* The table holds one file: the second open is a plain descriptor
	 * (io_uring), checked the same way. */
	{
		int g = pf_io_add_file(io, reg, 0, &err);

		cr_assert_geq(g, 0, "%s", err.msg);
		cr_assert_geq(io->files[g].fd, 0);
		fl = fcntl(io->files[g].fd, F_GETFL);
		cr_assert_eq(fl & (O_NONBLOCK | O_DIRECT), 0);
		cr_assert_eq(pf_io_close_file(io, (uint32_t)g), 0);
	}
	cr_assert_eq(pf_io_close_file(io, (uint32_t)f), 0);
	cr_assert_eq(open_fds(), fds0);
	pf_io_free(io);
}

ParameterizedTestParameters(io_open, freed_with_opens_in_flight)
{
	return both_backends();
}

/* An engine freed while opens are in the kernel or on its threads, some
 * opened and not yet stat'ed: every descriptor they made is closed. */
ParameterizedTest(int *which, io_open, freed_with_opens_in_flight)
{
	char **paths = make_files(16);
	unsigned fds0 = open_fds();
	pf_io_req r[16];

	for (unsigned round = 0; round < 4; round++) {
		pf_io *io = tu_engine(backend_names[*which], (pf_io_config){ .queue_depth = 16 });
		pf_io_req *done[16];

		for (unsigned i = 0; i < 16; i++) {
			r[i] = (pf_io_req){ 0 };
			cr_assert_eq(pf_io_open(io, &r[i], paths[i], 0), 0);
		}
		/* Round 0 reaps nothing; the others some, so that the rest
		 * are at each of their steps. */
		if (round)
			cr_assert_geq(pf_io_reap(io, done, round * 4, round * 4), (int)round * 4);
		pf_io_free(io);
		cr_assert_eq(open_fds(), fds0, "round %u", round);
	}
	for (unsigned i = 0; i < 16; i++)
		free(paths[i]);
	free(paths);
}

ParameterizedTestParameters(io_open, open_and_close_rules)
{
	return both_backends();
}

/* A file cannot be closed while its open or a read of it is in flight;
 * an index closed is no file; pf_io_add_file() leaves what was in flight
 * for the caller to reap. */
ParameterizedTest(int *which, io_open, open_and_close_rules)
{
	char **paths = make_files(3);
	pf_io *io = tu_engine(backend_names[*which], (pf_io_config){ 0 });
	pf_io_req o, rd, *done[4];
	uint8_t buf[5000];
	pf_error err;
	int a;

	o = (pf_io_req){ .user = &o };
	cr_assert_eq(pf_io_open(io, &o, paths[0], 0), 0);
	cr_assert_eq(pf_io_close_file(io, o.file), -EBUSY, "its open is in flight");
	cr_assert_eq(pf_io_file_size(io, o.file), 0, "not open yet");
	/* Another file opened and waited for meanwhile: the first open's
	 * completion stays for pf_io_reap(). */
	a = pf_io_add_file(io, paths[1], 0, &err);
	cr_assert_geq(a, 0, "%s", err.msg);
	cr_assert_neq((uint32_t)a, o.file);
	cr_assert_eq(pf_io_file_size(io, (uint32_t)a), file_len(1));
	cr_assert_eq(pf_io_reap(io, done, 4, 1), 1);
	cr_assert_eq(done[0], &o);
	cr_assert_eq(o.result, 0);
	cr_assert_eq(pf_io_inflight(io), 0);

	rd = (pf_io_req){ .file = o.file, .len = 5000, .buf = buf, .buf_index = -1 };
	cr_assert_eq(pf_io_submit(io, &rd), 0);
	cr_assert_eq(pf_io_close_file(io, o.file), -EBUSY, "a read of it is in flight");
	cr_assert_eq(pf_io_reap(io, done, 4, 1), 1);
	cr_assert_eq(rd.result, (int64_t)file_len(0));
	cr_assert_eq(pf_io_close_file(io, o.file), 0);
	cr_assert_null(pf_io_file_path(io, o.file));
	cr_assert_eq(pf_io_submit(io, &rd), 0);
	cr_assert_eq(pf_io_reap(io, done, 4, 1), 1);
	cr_assert_eq(rd.result, -EBADF, "a closed index names no file");
	cr_assert_eq(pf_io_close_file(io, 1000), -EBADF);
	/* Freed with a file open: its descriptor goes with the engine. */
	pf_io_free(io);
	for (unsigned i = 0; i < 3; i++)
		free(paths[i]);
	free(paths);
}

ParameterizedTestParameters(io_open, open_faults_are_retried_or_named)
{
	return both_backends();
}

/* "open-" faults hit opens only, numbered apart from reads: "eio@1" is
 * the first read's, whatever opens came before it. */
ParameterizedTest(int *which, io_open, open_faults_are_retried_or_named)
{
	char **paths = make_files(4);
	pf_io *io = tu_engine(backend_names[*which],
			   (pf_io_config){ .faults = "open-eio@2,open-enoent@3,eio@1",
					   .retries = 2, .retry_backoff_us = 100 });
	pf_io_req r, rd, *done[1];
	uint8_t buf[5000];
	pf_io_engine_stats st;
	pf_error err;
	char line[1024];

	cr_assert_eq(open_one(io, paths[0], &r, &err), 0, "%s", err.msg);
	cr_assert_eq(open_one(io, paths[1], &r, &err), 0, "retried: %s", err.msg);
	cr_assert_eq(r.retries, 1);
	cr_assert_eq(open_one(io, paths[2], &r, &err), -ENOENT);
	pf_error_format(&err, line, sizeof(line));
	cr_assert_str_eq(err.file, paths[2]);
	cr_assert(strstr(line, "cannot open: no such file (an injected fault)"),
		  "%s", line);
	cr_assert_eq(open_one(io, paths[3], &r, &err), 0, "%s", err.msg);
	rd = (pf_io_req){ .file = r.file, .len = 5000, .buf = buf, .buf_index = -1 };
	cr_assert_eq(pf_io_submit(io, &rd), 0);
	cr_assert_eq(pf_io_reap(io, done, 1, 1), 1);
	cr_assert_eq(rd.result, (int64_t)file_len(3), "read 1 failed once, then retried");
	cr_assert_eq(rd.retries, 1);
	pf_io_get_stats(io, &st);
	cr_assert_eq(st.opens.faults, 2);
	cr_assert_eq(st.opens.retries, 1);
	cr_assert_eq(st.opens.errors, 1);
	cr_assert_eq(st.reads.faults, 1);
	pf_io_free(io);

	/* Without retries the injected EIO is the open's error. */
	io = tu_engine(backend_names[*which],
		    (pf_io_config){ .faults = "open-eio@1", .retries = PF_IO_RETRIES_NONE });
	cr_assert_eq(open_one(io, paths[0], &r, &err), -EIO);
	pf_error_format(&err, line, sizeof(line));
	cr_assert(strstr(line, paths[0]) &&
		  strstr(line, "cannot open: I/O error (an injected fault)"), "%s", line);
	cr_assert_eq(pf_io_add_file(io, paths[1], 0, &err), 1, "the next open is clean");
	pf_io_free(io);
	for (unsigned i = 0; i < 4; i++)
		free(paths[i]);
	free(paths);
}

ParameterizedTestParameters(io_open, an_open_delay_is_waited)
{
	return both_backends();
}

ParameterizedTest(int *which, io_open, an_open_delay_is_waited)
{
	char **paths = make_files(1);
	pf_io *io = tu_engine(backend_names[*which],
			   (pf_io_config){ .faults = "open-delay=30ms@1" });
	pf_io_req r;
	pf_error err;
	int64_t t0 = tu_now_ns();

	cr_assert_eq(open_one(io, paths[0], &r, &err), 0, "%s", err.msg);
	cr_assert_geq(tu_now_ns() - t0, 30000000, "the open waited its delay");
	pf_io_free(io);
	free(paths[0]);
	free(paths);
}

/* ------------------------------------------------------------------ */
/* pf_stat_many(): many stats in flight, each path's own answer          */

/* 300 paths (more than PF_STAT_MANY_DEPTH in flight): files of known
 * sizes, a directory, a symlink (followed), and missing ones; each
 * answer is its own path's, as stat(2) gives it. */
Test(io_open, stat_many_answers_each_path)
{
	enum { N = 300 };
	const char *d = tu_tmpdir();
	char *paths[N];
	pf_stat_result st[N];

	for (int i = 0; i < N; i++) {
		paths[i] = malloc(512);
		cr_assert_not_null(paths[i]);
		if (i % 7 == 3) {
			snprintf(paths[i], 512, "%s/missing-%d", d, i);
		} else if (i == 12) {
			snprintf(paths[i], 512, "%s", d);
		} else if (i == 13) {
			snprintf(paths[i], 512, "%s/link-to-0", d);
			cr_assert_eq(symlink(paths[0], paths[i]), 0);
		} else {
			snprintf(paths[i], 512, "%s/f-%d", d, i);
			tu_write_file(paths[i], "0123456789abcdef", (size_t)i % 17);
		}
	}
	memset(st, 0xa5, sizeof(st));
	cr_assert_eq(pf_stat_many((const char *const *)paths, N, st), 0);
	for (int i = 0; i < N; i++) {
		struct stat want;

		if (stat(paths[i], &want) != 0) {
			cr_assert_eq(st[i].error, -ENOENT, "%s: %d", paths[i], st[i].error);
			continue;
		}
		cr_assert_eq(st[i].error, 0, "%s: %d", paths[i], st[i].error);
		cr_assert_eq(st[i].mode, want.st_mode, "%s", paths[i]);
		if (S_ISREG(want.st_mode))
			cr_assert_eq(st[i].size, (uint64_t)want.st_size, "%s", paths[i]);
		cr_assert_eq(st[i].mtime_ns, (int64_t)want.st_mtim.tv_sec * 1000000000 +
						  want.st_mtim.tv_nsec, "%s", paths[i]);
	}
	cr_assert(S_ISDIR(st[12].mode));
	cr_assert(S_ISREG(st[13].mode), "a symlink is followed");
	cr_assert_eq(st[13].size, 0, "f-0 is empty");
	/* One path, and none. */
	cr_assert_eq(pf_stat_many((const char *const *)paths + 3, 1, st), 0);
	cr_assert_eq(st[0].error, -ENOENT);
	cr_assert_eq(pf_stat_many(NULL, 0, NULL), 0);
	for (int i = 0; i < N; i++)
		free(paths[i]);
}
