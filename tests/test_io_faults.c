/* SPDX-License-Identifier: Apache-2.0 */
/* I/O faults: injected EIO, short reads, ENOENT, latency and hung reads
 * on both engine back-ends and pf_file_pread(); retries with backoff; read
 * timeouts (injected hangs, and real FUSE reads that never answer); the
 * fault spec parser; and the loader end to end (in process, through
 * loadbench, over regionfs --eio-rate). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
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
#include <unistd.h>

#include "io_internal.h"
#include "pf_io.h"
#include "podfeed.h"
#include "testutil.h"

#define CHUNK 65536u

static const char *const backend_names[] = { "uring", "pread" };

/* Parameters cross into the test's own process by value: indexes. */
static struct criterion_test_params both_backends(void)
{
	static int which[] = { 0, 1 };
	return cr_make_param_array(int, which, 2);
}

static const char *make_file(size_t len, uint8_t **content)
{
	static char path[256];
	uint8_t *buf = malloc(len);

	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)((i * 2654435761u) >> 13);
	snprintf(path, sizeof(path), "%s/data.bin", tu_tmpdir());
	tu_write_file(path, buf, len);
	*content = buf;
	return path;
}

/* An engine on backend with cfg's reliability fields (queue depth 16). */
static pf_io *engine(const char *backend, pf_io_config cfg)
{
	pf_io *io;
	pf_error err;
	int ret;

	cfg.queue_depth = 16;
	cfg.backend = backend;
	pf_error_clear(&err);
	ret = pf_io_create(&io, &cfg, &err);
	if (ret == -EPERM || ret == -ENOSYS)
		cr_skip_test("io_uring is refused on this kernel (%s)", pf_strerror(ret));
	cr_assert_eq(ret, 0, "%s", err.msg);
	return io;
}

/* Submit one request and wait for it. */
static int64_t read_one(pf_io *io, pf_io_req *r)
{
	pf_io_req *done[1];

	cr_assert_eq(pf_io_submit(io, r), 0);
	cr_assert_eq(pf_io_reap(io, done, 1, 1), 1);
	cr_assert_eq(done[0], r);
	return r->result;
}

/* Read the whole file in CHUNK requests, 8 in flight; every request must
 * complete whole and byte-identical.  @return the requests. */
static unsigned read_all_checked(pf_io *io, int f, const uint8_t *content, size_t len)
{
	uint8_t *bufs = malloc(8 * CHUNK);
	pf_io_req reqs[8], *done[8];
	size_t next = 0, completed = 0, n = (len + CHUNK - 1) / CHUNK;

	for (unsigned i = 0; i < 8 && next < n; i++, next++) {
		reqs[i] = (pf_io_req){ .file = (uint32_t)f, .offset = next * CHUNK,
				       .len = CHUNK, .buf = bufs + (size_t)i * CHUNK,
				       .buf_index = -1 };
		cr_assert_eq(pf_io_submit(io, &reqs[i]), 0);
	}
	while (completed < n) {
		int got = pf_io_reap(io, done, 8, 1);

		cr_assert_gt(got, 0);
		for (int k = 0; k < got; k++) {
			pf_io_req *r = done[k];
			size_t want = r->offset + CHUNK <= len ? CHUNK : len - r->offset;
			pf_error err;

			pf_error_clear(&err);
			pf_io_req_error(io, r, &err);
			cr_assert_eq(r->result, (int64_t)want, "offset %llu: %s",
				     (unsigned long long)r->offset, err.msg);
			cr_assert_arr_eq(r->buf, content + r->offset, want);
			completed++;
			if (next < n) {
				r->offset = next++ * CHUNK;
				cr_assert_eq(pf_io_submit(io, r), 0);
			}
		}
	}
	free(bufs);
	return (unsigned)n;
}

/* ------------------------------------------------------------------ */
/* The engine, both back-ends                                           */

ParameterizedTestParameters(faults, nth_request_eio_is_retried)
{
	return both_backends();
}

ParameterizedTest(int *which, faults, nth_request_eio_is_retried)
{
	const size_t len = 20 * CHUNK + 77;
	uint8_t *content;
	const char *path = make_file(len, &content);
	pf_io *io = engine(backend_names[*which],
			   (pf_io_config){ .faults = "eio@3,eio@9", .retries = 3,
					   .retry_backoff_us = 500 });
	pf_io_stats st;
	pf_error err;
	int f = pf_io_add_file(io, path, 0, &err);

	cr_assert_geq(f, 0, "%s", err.msg);
	cr_assert_eq(read_all_checked(io, f, content, len), 21);
	pf_io_file_stats(io, (uint32_t)f, &st);
	cr_assert_eq(st.faults, 2, "requests 3 and 9, once each");
	cr_assert_eq(st.retries, 2);
	cr_assert_eq(st.errors, 0);
	cr_assert_eq(st.ops, 21);
	cr_assert_eq(st.bytes, len, "a failed read adds no bytes");
	pf_io_free(io);
	free(content);
}

ParameterizedTestParameters(faults, eio_on_every_read_exhausts_the_retries)
{
	return both_backends();
}

ParameterizedTest(int *which, faults, eio_on_every_read_exhausts_the_retries)
{
	uint8_t *content, buf[4096];
	const char *path = make_file(1 << 20, &content);
	pf_io *io = engine(backend_names[*which],
			   (pf_io_config){ .faults = "eio:1", .retries = 2,
					   .retry_backoff_us = 1000 });
	pf_io_req r = { .offset = 12288, .len = sizeof(buf), .buf = buf, .buf_index = -1 };
	pf_io_stats st;
	pf_error err;
	char line[512];
	int f = pf_io_add_file(io, path, 0, &err);
	int64_t t0 = tu_now_ns();

	r.file = (uint32_t)f;
	cr_assert_eq(read_one(io, &r), -EIO);
	/* Two backoffs, 1 ms then 2 ms, were waited (a lower bound: a slow
	 * machine is slower, never faster). */
	cr_assert_geq(tu_now_ns() - t0, 3000000);
	cr_assert_eq(r.retries, 2);
	pf_io_file_stats(io, (uint32_t)f, &st);
	cr_assert_eq(st.faults, 3, "the first read and both retries");
	cr_assert_eq(st.retries, 2);
	cr_assert_eq(st.errors, 1);
	pf_error_clear(&err);
	cr_assert_eq(pf_io_req_error(io, &r, &err), -EIO);
	cr_assert_str_eq(err.file, path);
	cr_assert_eq(err.offset_kind, PF_OFFSET_FILE);
	cr_assert_eq(err.offset, 12288);
	pf_error_format(&err, line, sizeof(line));
	cr_assert(strstr(line, "byte 12288: read failed: ") &&
		  strstr(line, "(after 2 retries)") && strstr(line, "injected"), "%s", line);
	pf_io_free(io);
	free(content);
}

ParameterizedTestParameters(faults, no_retries_fails_at_once)
{
	return both_backends();
}

ParameterizedTest(int *which, faults, no_retries_fails_at_once)
{
	uint8_t *content, buf[4096];
	const char *path = make_file(1 << 16, &content);
	pf_io *io = engine(backend_names[*which],
			   (pf_io_config){ .faults = "eio@2", .retries = PF_IO_RETRIES_NONE });
	pf_io_req r = { .len = sizeof(buf), .buf = buf, .buf_index = -1 };
	pf_error err;

	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_eq(read_one(io, &r), (int64_t)sizeof(buf));
	r.offset = 8192;
	cr_assert_eq(read_one(io, &r), -EIO);
	cr_assert_eq(r.retries, 0);
	r.offset = 16384;
	cr_assert_eq(read_one(io, &r), (int64_t)sizeof(buf), "request 3 is clean");
	cr_assert_arr_eq(buf, content + 16384, sizeof(buf));
	pf_io_free(io);
	free(content);
}

ParameterizedTestParameters(faults, short_reads_are_completed)
{
	return both_backends();
}

ParameterizedTest(int *which, faults, short_reads_are_completed)
{
	const size_t len = 10 * CHUNK + 1000;
	uint8_t *content;
	const char *path = make_file(len, &content);
	pf_io *io = engine(backend_names[*which], (pf_io_config){ .faults = "short:1" });
	pf_io_stats st;
	pf_error err;
	int f = pf_io_add_file(io, path, 0, &err);

	cr_assert_eq(read_all_checked(io, f, content, len), 11);
	pf_io_file_stats(io, (uint32_t)f, &st);
	/* Every read asks for half of what is left, down to one byte: 17
	 * reads for a whole chunk, 16 of them short; the last chunk's first
	 * read ends at the end of the file, short too, and the next says so
	 * with 0 bytes. */
	cr_assert_eq(st.short_reads, 10 * 16 + 1, "%llu", (unsigned long long)st.short_reads);
	cr_assert_eq(st.retries, 0, "a short read is not an error");
	cr_assert_eq(st.errors, 0);
	pf_io_free(io);
	free(content);
}

ParameterizedTestParameters(faults, enoent_is_not_retried)
{
	return both_backends();
}

ParameterizedTest(int *which, faults, enoent_is_not_retried)
{
	uint8_t *content, buf[1000];
	const char *path = make_file(1 << 16, &content);
	pf_io *io = engine(backend_names[*which],
			   (pf_io_config){ .faults = "enoent@1", .retries = 5 });
	pf_io_req r = { .offset = 500, .len = sizeof(buf), .buf = buf, .buf_index = -1 };
	pf_io_stats st;
	pf_error err;

	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_eq(read_one(io, &r), -ENOENT);
	cr_assert_eq(r.retries, 0);
	pf_io_file_stats(io, r.file, &st);
	cr_assert_eq(st.retries, 0);
	cr_assert_eq(st.faults, 1);
	pf_error_clear(&err);
	pf_io_req_error(io, &r, &err);
	cr_assert_eq(err.offset, 500);
	cr_assert(strstr(err.msg, "read failed: no such file (an injected fault)"), "%s",
		  err.msg);
	pf_io_free(io);
	free(content);
}

ParameterizedTestParameters(faults, latency_is_added)
{
	return both_backends();
}

ParameterizedTest(int *which, faults, latency_is_added)
{
	uint8_t *content, buf[4096];
	const char *path = make_file(1 << 16, &content);
	pf_io *io = engine(backend_names[*which],
			   (pf_io_config){ .faults = "delay=150ms@2" });
	pf_io_req r = { .len = sizeof(buf), .buf = buf, .buf_index = -1 };
	pf_io_stats st;
	pf_error err;
	int64_t t0;

	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_eq(read_one(io, &r), (int64_t)sizeof(buf));
	t0 = tu_now_ns();
	r.offset = 4096;
	cr_assert_eq(read_one(io, &r), (int64_t)sizeof(buf));
	/* A lower bound only: load makes it slower, never faster. */
	cr_assert_geq(tu_now_ns() - t0, 150000000);
	cr_assert_arr_eq(buf, content + 4096, sizeof(buf));
	pf_io_file_stats(io, r.file, &st);
	cr_assert_eq(st.faults, 1);
	cr_assert_geq(pf_io_stats_quantile_us(&st, 1.0), 150000.0,
		      "the delayed request's latency is in the histogram");
	pf_io_free(io);
	free(content);
}

ParameterizedTestParameters(faults, hung_read_times_out_naming_the_file)
{
	return both_backends();
}

/* 'hang' issues the read against a pipe nobody writes: a real read
 * blocked in the kernel, which only the timeout (a linked timeout, or the
 * thread's timer signal) can end. */
ParameterizedTest(int *which, faults, hung_read_times_out_naming_the_file, .timeout = 60)
{
	uint8_t *content, buf[4096];
	const char *path = make_file(1 << 16, &content);
	pf_io *io = engine(backend_names[*which],
			   (pf_io_config){ .faults = "hang@1", .timeout_ms = 200, .retries = 3 });
	pf_io_req r = { .offset = 8192, .len = sizeof(buf), .buf = buf, .buf_index = -1 };
	pf_io_stats st;
	pf_error err;
	char line[512];
	int64_t t0 = tu_now_ns();

	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_eq(read_one(io, &r), -ETIMEDOUT);
	cr_assert_geq(tu_now_ns() - t0, 200000000);
	cr_assert_eq(r.retries, 0, "a timed-out read is not retried");
	pf_io_file_stats(io, r.file, &st);
	cr_assert_eq(st.timeouts, 1);
	cr_assert_eq(st.errors, 1);
	pf_error_clear(&err);
	cr_assert_eq(pf_io_req_error(io, &r, &err), -ETIMEDOUT);
	pf_error_format(&err, line, sizeof(line));
	cr_assert(strstr(line, path) && strstr(line, "byte 8192: ") &&
		  strstr(line, "timed out") && strstr(line, "200 ms"), "%s", line);
	/* The engine goes on: request 2 is clean. */
	cr_assert_eq(read_one(io, &r), (int64_t)sizeof(buf));
	cr_assert_arr_eq(buf, content + 8192, sizeof(buf));
	pf_io_free(io);
	free(content);
}

ParameterizedTestParameters(faults, the_same_spec_faults_the_same_reads)
{
	return both_backends();
}

ParameterizedTest(int *which, faults, the_same_spec_faults_the_same_reads)
{
	const size_t len = 40 * CHUNK;
	uint8_t *content;
	const char *path = make_file(len, &content);
	uint64_t faults[2], retries[2], shorts[2];

	for (int run = 0; run < 2; run++) {
		pf_io *io = engine(backend_names[*which],
				   (pf_io_config){ .faults = "eio:0.2,short:0.3,seed=11",
						   .retries = 10,
						   .retry_backoff_us = PF_IO_BACKOFF_NONE });
		pf_io_stats st;
		pf_error err;
		int f = pf_io_add_file(io, path, 0, &err);

		read_all_checked(io, f, content, len);
		pf_io_file_stats(io, (uint32_t)f, &st);
		faults[run] = st.faults;
		retries[run] = st.retries;
		shorts[run] = st.short_reads;
		pf_io_free(io);
	}
	cr_assert_gt(retries[0], 0);
	cr_assert_gt(shorts[0], 0);
	cr_assert_eq(faults[0], faults[1]);
	cr_assert_eq(retries[0], retries[1]);
	cr_assert_eq(shorts[0], shorts[1]);
	free(content);
}

Test(faults, direct_short_reads_stay_aligned)
{
	uint8_t *content, *buf;
	const char *path = make_file(1 << 20, &content);

	for (int b = 0; b < 2; b++) {
		pf_io *io = engine(backend_names[b], (pf_io_config){ .faults = "short:1" });
		pf_io_req r = { .offset = 65536, .len = 8 * 4096, .buf_index = -1 };
		pf_io_stats st;
		pf_error err;
		int f = pf_io_add_file(io, path, PF_IO_DIRECT, &err);

		if (!pf_io_file_direct(io, (uint32_t)f)) {
			pf_io_free(io);
			free(content);
			cr_skip_test("the filesystem under /tmp refuses O_DIRECT");
		}
		cr_assert_eq(posix_memalign((void **)&buf, 4096, r.len), 0);
		r.file = (uint32_t)f;
		r.buf = buf;
		cr_assert_eq(read_one(io, &r), (int64_t)r.len, "%s", backend_names[b]);
		cr_assert_arr_eq(buf, content + 65536, r.len);
		pf_io_file_stats(io, r.file, &st);
		/* 32 KiB: 16, 8, 4 KiB shortened; the last block cannot be. */
		cr_assert_eq(st.short_reads, 3);
		free(buf);
		pf_io_free(io);
	}
	free(content);
}

/* ------------------------------------------------------------------ */
/* Settings: config fields, the environment, bad values                 */

Test(faults, settings_from_config_and_environment)
{
	pf_io *io;
	pf_error err;
	pf_io_config cfg = { .backend = "pread" };

	pf_error_clear(&err);
	setenv("PODFEED_FAULTS", "eio@1,nonsense", 1);
	cr_assert_eq(pf_io_create(&io, &cfg, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "PODFEED_FAULTS: byte 6: unknown fault 'nonsense' (eio, "
			 "short, enoent, hang, delay=D, or seed=S)");
	cfg.faults = "";	/* the field wins over the variable */
	cr_assert_eq(pf_io_create(&io, &cfg, &err), 0);
	pf_io_free(io);
	unsetenv("PODFEED_FAULTS");
	cfg.faults = NULL;

	static const struct {
		const char *var, *value, *msg;
	} bad[] = {
		{ "PODFEED_IO_RETRIES", "three", "PODFEED_IO_RETRIES: 'three' is not a whole number in 0..100" },
		{ "PODFEED_IO_RETRIES", "101", "PODFEED_IO_RETRIES: '101' is not a whole number in 0..100" },
		{ "PODFEED_IO_BACKOFF_US", "-5", "PODFEED_IO_BACKOFF_US: '-5' is not a whole number in 0..1000000" },
		{ "PODFEED_IO_TIMEOUT_MS", "1e3", "PODFEED_IO_TIMEOUT_MS: '1e3' is not a whole number in 0..86400000" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv(bad[i].var, bad[i].value, 1);
		pf_error_clear(&err);
		cr_assert_eq(pf_io_create(&io, &cfg, &err), -EINVAL, "%s=%s", bad[i].var,
			     bad[i].value);
		cr_assert_str_eq(err.msg, bad[i].msg);
		unsetenv(bad[i].var);
	}
	cfg.retries = 101;
	cr_assert_eq(pf_io_create(&io, &cfg, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "pf_io_config.retries: 101 is above 100");
	cfg.retries = 0;
	/* A hang with no timeout would hang for ever: refused. */
	cfg.faults = "hang:0.1";
	cfg.timeout_ms = PF_IO_TIMEOUT_NONE;
	cr_assert_eq(pf_io_create(&io, &cfg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "'hang' faults need a read timeout"), "%s", err.msg);
	setenv("PODFEED_IO_TIMEOUT_MS", "0", 1);	/* 0: none, also refused */
	cfg.timeout_ms = 0;
	cr_assert_eq(pf_io_create(&io, &cfg, &err), -EINVAL);
	unsetenv("PODFEED_IO_TIMEOUT_MS");

	/* From the environment: 0 retries means none. */
	uint8_t *content, buf[100];
	const char *path = make_file(4096, &content);
	pf_io_req r = { .len = sizeof(buf), .buf = buf, .buf_index = -1 };

	setenv("PODFEED_FAULTS", "eio@1", 1);
	setenv("PODFEED_IO_RETRIES", "0", 1);
	cfg = (pf_io_config){ .backend = "pread" };
	cr_assert_eq(pf_io_create(&io, &cfg, &err), 0, "%s", err.msg);
	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_eq(read_one(io, &r), -EIO);
	pf_io_free(io);
	setenv("PODFEED_IO_RETRIES", "1", 1);
	cr_assert_eq(pf_io_create(&io, &cfg, &err), 0, "%s", err.msg);
	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_eq(read_one(io, &r), (int64_t)sizeof(buf));
	cr_assert_eq(r.retries, 1);
	pf_io_free(io);
	unsetenv("PODFEED_FAULTS");
	unsetenv("PODFEED_IO_RETRIES");
	free(content);
}

/* ------------------------------------------------------------------ */
/* The spec parser                                                      */

Test(faults, malformed_specs_name_the_byte)
{
	static const struct {
		const char *spec, *msg;
	} bad[] = {
		{ "eio", "byte 3: expected '@N' (request N) or ':F' (a fraction of reads) after 'eio', found the end" },
		{ "eio@", "byte 4: expected a request number (digits), found the end" },
		{ "eio@0", "byte 4: requests count from 1, not 0" },
		{ "eio@-1", "byte 4: expected a request number (digits), found '-'" },
		{ "eio@99999999999999999999", "byte 4: a request number is too large (above 2^64-1)" },
		{ "eio:1.5", "byte 4: fraction 1.5 is above 1" },
		{ "eio:2", "byte 4: fraction 2 is above 1" },
		{ "eio:", "byte 4: expected a fraction (like 0.05), found the end" },
		{ "eio:.", "byte 4: expected a fraction (like 0.05), found the end" },
		{ "eio:0.1234567890123456", "byte 4: a fraction has more than 15 digits" },
		{ "eio:0.5.5", "byte 7: expected ',' or the end after a fault, found '.'" },
		{ "eio@7,", "byte 6: expected a fault (eio, short, enoent, hang, delay=D) or seed=S, found the end" },
		{ ",eio@7", "byte 0: expected a fault (eio, short, enoent, hang, delay=D) or seed=S, found ','" },
		{ "eio@7,,short:1", "byte 6: expected a fault (eio, short, enoent, hang, delay=D) or seed=S, found ','" },
		{ "eio@7 short:1", "byte 6: expected ',' or the end after a fault, found 's'" },
		{ "ebusy@3", "byte 0: unknown fault 'ebusy' (eio, short, enoent, hang, delay=D, or seed=S)" },
		{ "delay@3", "byte 5: expected '=' and a duration after 'delay' (like delay=200ms), found '@'" },
		{ "delay=200@3", "byte 9: expected a unit (us, ms or s) after the duration, found '@'" },
		{ "delay=200m@3", "byte 9: expected a unit (us, ms or s) after the duration, found 'm'" },
		{ "delay=601s@3", "byte 6: delay 601s is above 600 s" },
		{ "delay=ms@3", "byte 6: expected a duration (like 0.05), found 'm'" },
		{ "delay=10ms", "byte 10: expected '@N' (request N) or ':F' (a fraction of reads) after 'delay', found the end" },
		{ "seed", "byte 4: expected '=' after 'seed', found the end" },
		{ "seed=x", "byte 5: expected a seed (digits), found 'x'" },
		{ "seed=1,seed=2", "byte 7: the seed is given twice" },
		{ "eio@1\t,\x01", "byte 7: expected a fault (eio, short, enoent, hang, delay=D) or seed=S, found byte 0x01" },
		{ "eio@1;short@2", "byte 5: expected ',' or the end after a fault, found ';'" },
	};
	pf_fault_plan plan;
	pf_error err;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[256];

		pf_error_clear(&err);
		memset(&plan, 0xab, sizeof(plan));
		cr_assert_eq(pf_fault_parse(&plan, bad[i].spec, strlen(bad[i].spec), "spec", &err),
			     -EINVAL, "%s", bad[i].spec);
		snprintf(want, sizeof(want), "spec: %s", bad[i].msg);
		cr_assert_str_eq(err.msg, want, "'%s': %s", bad[i].spec, err.msg);
		cr_assert_eq(plan.nrules, 0, "a failed parse leaves no faults");
	}
	/* A NUL inside, too long, too many. */
	cr_assert_eq(pf_fault_parse(&plan, "eio@1\0eio@2", 11, "spec", &err), -EINVAL);
	cr_assert_str_eq(err.msg, "spec: byte 5: a NUL byte");
	char *big = malloc(PF_FAULT_SPEC_MAX + 2);
	memset(big, ' ', PF_FAULT_SPEC_MAX + 1);
	big[PF_FAULT_SPEC_MAX + 1] = 0;
	cr_assert_eq(pf_fault_parse(&plan, big, PF_FAULT_SPEC_MAX + 1, "spec", &err), -EINVAL);
	cr_assert_str_eq(err.msg, "spec: byte 4096: longer than 4096 bytes (4097)");
	char many[1024] = "";
	for (unsigned i = 0; i <= PF_FAULT_MAX_RULES; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%seio@%u",
			 i ? "," : "", i + 1);
	cr_assert_eq(pf_fault_parse(&plan, many, strlen(many), "spec", &err), -EINVAL);
	cr_assert(strstr(err.msg, "more than 32 faults"), "%s", err.msg);
	free(big);
}

/* Field by field: a rule's padding is not part of it. */
static bool same_plan(const pf_fault_plan *a, const pf_fault_plan *b)
{
	if (a->nrules != b->nrules || a->seed != b->seed)
		return false;
	for (unsigned i = 0; i < a->nrules; i++)
		if (a->rule[i].kind != b->rule[i].kind || a->rule[i].nth != b->rule[i].nth ||
		    a->rule[i].fraction != b->rule[i].fraction ||
		    a->rule[i].delay_ns != b->rule[i].delay_ns)
			return false;
	return true;
}

Test(faults, specs_parse_to_their_canonical_text)
{
	static const struct {
		const char *spec, *canonical;
	} good[] = {
		{ "", "" },
		{ "  \t ", "" },
		{ "eio@7,short:0.05,enoent@12,delay=200ms:0.1,seed=42",
		  "eio@7,short:0.05,enoent@12,delay=200ms:0.1,seed=42" },
		{ " EIO@7 , Short:.5 ", "eio@7,short:0.5" },
		{ "hang:1.0,delay=1.5s@1", "hang:1,delay=1500ms@1" },
		{ "delay=0.0015ms:0.000000000000001", "delay=1.5us:0.000000000000001" },
		{ "delay=2500us@3,seed=0", "delay=2500us@3" },
		{ "seed=18446744073709551615,eio:0", "eio:0,seed=18446744073709551615" },
		{ "delay=600s@18446744073709551615", "delay=600s@18446744073709551615" },
	};
	pf_fault_plan plan, again;
	pf_error err;
	char text[512];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		pf_error_clear(&err);
		cr_assert_geq(pf_fault_parse(&plan, good[i].spec, strlen(good[i].spec), "spec",
					     &err), 0, "%s: %s", good[i].spec, err.msg);
		cr_assert_eq(pf_fault_format(&plan, text, sizeof(text)),
			     strlen(good[i].canonical));
		cr_assert_str_eq(text, good[i].canonical);
		cr_assert_geq(pf_fault_parse(&again, text, strlen(text), "spec", &err), 0);
		cr_assert(same_plan(&plan, &again), "%s round-trips", text);
	}
	cr_assert_eq(pf_fault_parse(&plan, "eio@7,delay=3ms:0.25,seed=9", 27, "s", &err), 2);
	cr_assert_eq(plan.rule[0].kind, PF_FAULT_EIO);
	cr_assert_eq(plan.rule[0].nth, 7);
	cr_assert_eq(plan.rule[1].kind, PF_FAULT_DELAY);
	cr_assert_eq(plan.rule[1].delay_ns, 3000000);
	cr_assert_eq(plan.rule[1].fraction, 0.25);
	cr_assert_eq(plan.seed, 9);
	/* A short buffer gets what fits, and the length it needs. */
	cr_assert_eq(pf_fault_format(&plan, text, 5), strlen("eio@7,delay=3ms:0.25,seed=9"));
	cr_assert_str_eq(text, "eio@");
}

Test(faults, decisions_are_seeded_and_hit_their_fraction)
{
	pf_fault_plan plan;
	pf_error err;
	unsigned hits = 0, differ = 0;

	cr_assert_eq(pf_fault_parse(&plan, "eio:0.1,seed=3", 14, "s", &err), 1);
	for (uint64_t req = 1; req <= 100000; req++) {
		pf_fault_hit h = pf_fault_decide(&plan, req, 0, false);
		pf_fault_hit again = pf_fault_decide(&plan, req, 0, false);

		cr_assert_eq(h.error, again.error);
		hits += h.error == PF_FAULT_EIO;
		differ += h.error != pf_fault_decide(&plan, req, 1, false).error;
	}
	/* 10% of 100000 draws: the binomial's sd is 95. */
	cr_assert(hits > 9500 && hits < 10500, "%u", hits);
	cr_assert_gt(differ, 10000, "a retry draws again");
	plan.seed = 4;
	unsigned same = 0;
	for (uint64_t req = 1; req <= 1000; req++) {
		pf_fault_plan p3 = plan;
		p3.seed = 3;
		same += pf_fault_decide(&plan, req, 0, false).error == pf_fault_decide(&p3, req, 0, false).error;
	}
	cr_assert_lt(same, 1000, "another seed, other reads");

	/* "@N": request N's first read only; several hits combine. */
	cr_assert_eq(pf_fault_parse(&plan, "eio@5,enoent@5,delay=1ms@5,short@5,delay=2ms@5",
				    46, "s", &err), 5);
	pf_fault_hit h = pf_fault_decide(&plan, 5, 0, false);
	cr_assert_eq(h.error, PF_FAULT_ENOENT);
	cr_assert(h.short_read);
	cr_assert_eq(h.delay_ns, 3000000);
	cr_assert_eq(h.rules, 5);
	cr_assert_eq(pf_fault_decide(&plan, 5, 1, false).rules, 0);
	cr_assert_eq(pf_fault_decide(&plan, 4, 0, false).rules, 0);
}

/* ------------------------------------------------------------------ */
/* pf_file_pread(): the process's policy                                */

Test(faults, file_pread_retries_and_times_out)
{
	const size_t len = 300000;
	uint8_t *content, *buf = malloc(len);
	const char *path = make_file(len, &content);
	pf_io_config cfg = { .faults = "eio@1,short@2,eio@3", .retries = 2,
			     .retry_backoff_us = 100 };
	pf_io_totals before, after;
	pf_error err;
	char line[512];
	int fd = open(path, O_RDONLY);

	pf_error_clear(&err);
	cr_assert_eq(pf_file_set_policy(&cfg, &err), 0, "%s", err.msg);
	pf_io_totals_get(&before);
	for (int i = 0; i < 3; i++) {
		memset(buf, 0, len);
		cr_assert_eq(pf_file_pread(fd, buf, len, 0, path, &err), (int64_t)len);
		cr_assert_arr_eq(buf, content, len);
	}
	pf_io_totals_get(&after);
	cr_assert_eq(after.faults - before.faults, 3);
	cr_assert_eq(after.retries - before.retries, 2);
	cr_assert_eq(after.errors, before.errors);
	/* The end of file is not an error. */
	cr_assert_eq(pf_file_pread(fd, buf, 1000, len - 10, path, &err), 10);

	cfg = (pf_io_config){ .faults = "eio:1", .retries = PF_IO_RETRIES_NONE };
	cr_assert_eq(pf_file_set_policy(&cfg, &err), 0);
	pf_error_clear(&err);
	cr_assert_eq(pf_file_pread(fd, buf, 100, 4321, path, &err), -EIO);
	pf_error_format(&err, line, sizeof(line));
	cr_assert(strstr(line, path) && strstr(line, "byte 4321: read failed: "), "%s", line);

	cfg = (pf_io_config){ .faults = "hang@1", .timeout_ms = 150 };
	cr_assert_eq(pf_file_set_policy(&cfg, &err), 0);
	pf_error_clear(&err);
	cr_assert_eq(pf_file_pread(fd, buf, 100, 777, path, &err), -ETIMEDOUT);
	pf_error_format(&err, line, sizeof(line));
	cr_assert(strstr(line, path) && strstr(line, "byte 777: ") && strstr(line, "150 ms"),
		  "%s", line);
	cr_assert_eq(pf_file_pread(fd, buf, 100, 777, path, &err), 100, "request 2 is clean");

	/* A malformed spec: refused, the policy stays. */
	cfg = (pf_io_config){ .faults = "eio@" };
	cr_assert_eq(pf_file_set_policy(&cfg, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "fault spec: byte 4: expected a request number (digits), "
			 "found the end");
	/* From the environment, re-read on request. */
	setenv("PODFEED_FAULTS", "enoent@1", 1);
	cr_assert_eq(pf_file_set_policy(NULL, &err), 0);
	cr_assert_eq(pf_file_pread(fd, buf, 100, 0, path, &err), -ENOENT);
	setenv("PODFEED_FAULTS", "bad", 1);
	pf_error_clear(&err);
	cr_assert_eq(pf_file_set_policy(NULL, &err), -EINVAL);
	cr_assert(strstr(err.msg, "PODFEED_FAULTS: byte 0: unknown fault 'bad'"), "%s", err.msg);
	unsetenv("PODFEED_FAULTS");
	close(fd);
	free(buf);
	free(content);
}

/* A process whose PODFEED_FAULTS is malformed: every pf_file_pread()
 * says why. */
Test(faults, file_pread_with_a_malformed_environment)
{
	uint8_t *content, buf[10];
	const char *path = make_file(100, &content);
	pf_error err;
	int fd = open(path, O_RDONLY);

	setenv("PODFEED_FAULTS", "eio@1,", 1);
	for (int i = 0; i < 2; i++) {
		pf_error_clear(&err);
		cr_assert_eq(pf_file_pread(fd, buf, sizeof(buf), 0, path, &err), -EINVAL);
		cr_assert(strstr(err.msg, "PODFEED_FAULTS: byte 6: "), "%s", err.msg);
	}
	close(fd);
	free(content);
}

/* ------------------------------------------------------------------ */
/* The loader end to end (loader/ untouched: the environment)         */

#define DATASET_RECORDS 3000u
#define FEATURES "tokens:int64[512]:pad=0,label:int64[1]"

/* 3000 token records: 3 plain shards (stream files, read by pf_source
 * with pf_file_pread) in dir/raw, converted to 3 indexed shards (read by
 * the engine) in dir/z, with small frames so there are many reads. */
static void make_dataset(const char *d)
{
	const char *st = tu_env_tool("SHARDTOOL");

	cr_assert_eq(tu_system("%s synth --kind tokens --records %u --shards 3 --out %s/raw "
			       ">/dev/null", st, DATASET_RECORDS, d), 0);
	cr_assert_eq(tu_system("%s convert --shards 3 --frame-size 65536 --out %s/z %s/raw "
			       ">/dev/null", st, d, d), 0);
}

typedef struct loader_run {
	int ret;
	uint64_t steps, digest;
	pf_error err;
	pf_io_totals io;	/* this run's share of the process totals */
} loader_run;

/* One epoch over paths, every batch's bytes hashed in order (FNV-1a). */
static void run_loader(const char *const *paths, size_t npaths, loader_run *out)
{
	pf_loader_config cfg = { .paths = paths, .npaths = npaths, .features = FEATURES,
				 .per_core_batch = 16, .cores_per_host = 2, .seed = 5,
				 .shuffle = true, .shuffle_window = 256, .epochs = 1,
				 .threads = 2, .io_depth = 8 };
	pf_io_totals t0, t1;
	pf_loader *l;
	pf_batch *b;
	pf_error err;

	memset(out, 0, sizeof(*out));
	out->digest = 14695981039346656037ull;
	pf_error_clear(&err);
	pf_io_totals_get(&t0);
	out->ret = pf_loader_create(&l, &cfg, &err);
	if (out->ret < 0) {
		out->err = err;
		return;
	}
	while ((out->ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++) {
			const uint8_t *p = b->core[c].block;

			for (size_t i = 0; i < b->core[c].block_bytes; i++)
				out->digest = (out->digest ^ p[i]) * 1099511628211ull;
		}
		out->steps++;
		pf_loader_release(l, b);
	}
	if (out->ret < 0 && pf_loader_last_error(l))
		out->err = *pf_loader_last_error(l);
	pf_loader_free(l);
	pf_io_totals_get(&t1);
	out->io.reads = t1.reads - t0.reads;
	out->io.faults = t1.faults - t0.faults;
	out->io.retries = t1.retries - t0.retries;
	out->io.timeouts = t1.timeouts - t0.timeouts;
	out->io.errors = t1.errors - t0.errors;
}

/* Set the reliability variables (NULL: unset) and have pf_file_pread()
 * read them again, as a new process would. */
static void set_env(const char *faults, const char *retries, const char *backoff)
{
	pf_error err;

	faults ? setenv("PODFEED_FAULTS", faults, 1) : unsetenv("PODFEED_FAULTS");
	retries ? setenv("PODFEED_IO_RETRIES", retries, 1) : unsetenv("PODFEED_IO_RETRIES");
	backoff ? setenv("PODFEED_IO_BACKOFF_US", backoff, 1) : unsetenv("PODFEED_IO_BACKOFF_US");
	cr_assert_eq(pf_file_set_policy(NULL, &err), 0, "%s", err.msg);
}

/* Faults on every read path (index tails, frames through the engine,
 * stream files through pf_source), retried: the same batches, byte for
 * byte, as a run without faults. */
Test(loader_faults, retried_faults_give_the_same_batches, .timeout = 120)
{
	const char *d = tu_tmpdir();
	char z[256], raw[256];
	const char *paths[] = { z, raw };
	loader_run clean, faulty;

	make_dataset(d);
	snprintf(z, sizeof(z), "%s/z", d);
	snprintf(raw, sizeof(raw), "%s/raw", d);
	set_env(NULL, NULL, NULL);
	run_loader(paths, 2, &clean);
	cr_assert_eq(clean.ret, 0, "%s", clean.err.msg);
	cr_assert_eq(clean.steps, 2 * DATASET_RECORDS / 32);
	cr_assert_eq(clean.io.faults, 0);

	set_env("eio:0.15,short:0.2,delay=1ms:0.05,seed=9", "8", "200");
	run_loader(paths, 2, &faulty);
	cr_assert_eq(faulty.ret, 0, "%s", faulty.err.msg);
	cr_assert_eq(faulty.steps, clean.steps);
	cr_assert_eq(faulty.digest, clean.digest, "faults changed the batches");
	cr_assert_geq(faulty.io.faults, 5, "%llu faults in %llu reads", (unsigned long long)faulty.io.faults,
		       (unsigned long long)faulty.io.reads);
	cr_assert_gt(faulty.io.retries, 0);
	cr_assert_eq(faulty.io.errors, 0);
	set_env(NULL, NULL, NULL);
}

/* Retries off: the first EIO ends the load, naming the file and offset. */
Test(loader_faults, unretried_eio_names_the_file_and_offset, .timeout = 120)
{
	const char *d = tu_tmpdir();
	char z[256], raw[256], line[1024];
	const char *paths[] = { z };
	loader_run r;

	make_dataset(d);
	snprintf(z, sizeof(z), "%s/z", d);
	snprintf(raw, sizeof(raw), "%s/raw", d);
	/* Request 2 of the engine: a frame of an indexed shard (the index
	 * tails are read with pf_file_pread, numbered apart). */
	set_env("eio@2", "0", NULL);
	run_loader(paths, 1, &r);
	cr_assert_eq(r.ret, -EIO, "%d %s", r.ret, r.err.msg);
	pf_error_format(&r.err, line, sizeof(line));
	cr_assert(strstr(line, z) && strstr(line, ".zst: byte ") &&
		  strstr(line, "I/O error"), "%s", line);
	/* A stream file: pf_file_pread's request 1 is an index probe or the
	 * first read of a shard; either way the error names it. */
	paths[0] = raw;
	set_env("eio@1", "0", NULL);
	run_loader(paths, 1, &r);
	cr_assert_eq(r.ret, -EIO, "%d %s", r.ret, r.err.msg);
	pf_error_format(&r.err, line, sizeof(line));
	cr_assert(strstr(line, raw) && strstr(line, ".tfrecord: byte ") &&
		  strstr(line, "read failed"), "%s", line);
	set_env(NULL, NULL, NULL);
}

/* Run loadbench with env (a "VAR=value ..." prefix) and args.  @return
 * its exit status; *json its report when it printed one (decref), *err
 * its stderr (static). */
static int loadbench(const char *env, const char *args, json_t **json, const char **err)
{
	static char errtext[8192];
	char cmd[4096], errpath[256], *out;
	size_t cap = 1 << 16, got;
	FILE *e;
	json_error_t jerr;
	int st;

	snprintf(errpath, sizeof(errpath), "%s/loadbench.err", tu_tmpdir());
	snprintf(cmd, sizeof(cmd), "env %s %s --json --quiet --per-core-batch 16 --cores 2 "
		 "--threads 2 --seed 5 %s 2>%s", env, tu_env_tool("LOADBENCH"), args, errpath);
	out = malloc(cap);
	st = tu_capture(cmd, out, cap, &got);
	*json = got ? json_loads(out, 0, &jerr) : NULL;
	free(out);
	e = fopen(errpath, "r");
	cr_assert_not_null(e);
	got = fread(errtext, 1, sizeof(errtext) - 1, e);
	errtext[got] = 0;
	fclose(e);
	*err = errtext;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static uint64_t ju(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	cr_assert(json_is_integer(v), "no integer '%s'", key);
	return (uint64_t)json_integer_value(v);
}

/* The counts a run must reproduce. */
static void same_counts(json_t *a, json_t *b)
{
	static const char *const keys[] = { "records", "steps", "records_per_epoch",
					    "remainder_dropped", "bytes_read",
					    "bytes_decompressed" };

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cr_assert_eq(ju(a, keys[i]), ju(b, keys[i]), "%s", keys[i]);
}

Test(loader_faults, loadbench_with_faults, .timeout = 180)
{
	const char *d = tu_tmpdir(), *err;
	char args[512];
	json_t *clean, *faulty;

	make_dataset(d);
	snprintf(args, sizeof(args), "%s/z %s/raw", d, d);
	cr_assert_eq(loadbench("PODFEED_FAULTS=", args, &clean, &err), 0, "%s", err);
	cr_assert_not_null(clean);
	cr_assert_eq(ju(clean, "records"), 2 * DATASET_RECORDS / 32 * 32);
	cr_assert_eq(loadbench("PODFEED_FAULTS=eio:0.2,seed=3 PODFEED_IO_RETRIES=8 "
			       "PODFEED_IO_BACKOFF_US=200", args, &faulty, &err), 0, "%s", err);
	cr_assert_not_null(faulty);
	same_counts(clean, faulty);
	json_decref(faulty);
	json_decref(clean);
	/* Retries off: it fails, and says where. */
	cr_assert_eq(loadbench("PODFEED_FAULTS=eio:0.2,seed=3 PODFEED_IO_RETRIES=0", args,
			       &faulty, &err), 1);
	cr_assert(strstr(err, d) && strstr(err, ": byte ") &&
		  strstr(err, "I/O error"), "%s", err);
	if (faulty)
		json_decref(faulty);
	/* A malformed spec stops it before any read, naming the variable. */
	cr_assert_eq(loadbench("PODFEED_FAULTS=eio@0", args, &faulty, &err), 1);
	cr_assert(strstr(err, "PODFEED_FAULTS: byte 4: requests count from 1, not 0"), "%s",
		  err);
	if (faulty)
		json_decref(faulty);
}

/* ------------------------------------------------------------------ */
/* Over FUSE: regionfs's injected EIO and reads that never answer        */

static pid_t rfs_pid = -1;
static char rfs_mnt[128], rfs_backing[128], rfs_stats[128];

static void rfs_teardown(void)
{
	tu_regionfs_stop(&rfs_pid, rfs_mnt);
}

/* Skip where FUSE cannot work at all; make dir/backing and dir/mnt. */
static void rfs_dirs(const char *dir)
{
	tu_need_fuse();
	snprintf(rfs_backing, sizeof(rfs_backing), "%s/backing", dir);
	snprintf(rfs_mnt, sizeof(rfs_mnt), "%s/mnt", dir);
	snprintf(rfs_stats, sizeof(rfs_stats), "%s/stats.json", dir);
	cr_assert_eq(mkdir(rfs_backing, 0755), 0);
	cr_assert_eq(mkdir(rfs_mnt, 0755), 0);
}

/* Mount with `regionfs -f ARGS`; the child dies with this process. */
static void rfs_start(const char *args)
{
	rfs_pid = tu_regionfs_start(args, rfs_stats, rfs_backing, rfs_mnt, 10000);
}

/* Unmount (SIGTERM) and @return the counters it wrote (decref). */
static json_t *rfs_stop(void)
{
	json_error_t jerr;
	json_t *o;
	int status;

	cr_assert_eq(kill(rfs_pid, SIGTERM), 0);
	cr_assert_eq(waitpid(rfs_pid, &status, 0), rfs_pid);
	rfs_pid = -1;
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	o = json_load_file(rfs_stats, 0, &jerr);
	cr_assert_not_null(o, "%s: %s", rfs_stats, jerr.text);
	return o;
}

ParameterizedTestParameters(fuse_faults, stalled_read_times_out)
{
	return both_backends();
}

/* A FUSE read that never answers: the engine's timeout cancels it (the
 * kernel interrupts the request, regionfs answers EINTR) and the request
 * fails with -ETIMEDOUT naming the file, in about the timeout. */
ParameterizedTest(int *which, fuse_faults, stalled_read_times_out, .fini = rfs_teardown,
		  .timeout = 60)
{
	const char *dir = tu_tmpdir();
	char path[256], data[8192];
	uint8_t buf[4096];
	pf_io_req r = { .offset = 4096, .len = sizeof(buf), .buf = buf, .buf_index = -1 };
	pf_error err;
	json_t *st;
	int64_t t0;
	pf_io *io;

	rfs_dirs(dir);
	memset(data, 'x', sizeof(data));
	snprintf(path, sizeof(path), "%s/shard.bin", rfs_backing);
	tu_write_file(path, data, sizeof(data));
	/* --direct-io: each read is a FUSE request of its own, which the
	 * kernel can interrupt (a buffered read waits for the page killably,
	 * see pf_io.h). */
	rfs_start("--stall-rate 1 --direct-io");
	io = engine(backend_names[*which], (pf_io_config){ .timeout_ms = 300 });
	snprintf(path, sizeof(path), "%s/shard.bin", rfs_mnt);
	pf_error_clear(&err);
	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_geq((int)r.file, 0, "%s", err.msg);
	t0 = tu_now_ns();
	cr_assert_eq(read_one(io, &r), -ETIMEDOUT);
	cr_assert_geq(tu_now_ns() - t0, 300000000);
	pf_error_clear(&err);
	pf_io_req_error(io, &r, &err);
	cr_assert_str_eq(err.file, path);
	cr_assert_eq(err.offset, 4096);
	pf_io_free(io);
	st = rfs_stop();
	cr_assert_geq(ju(st, "stalled"), 1);
	cr_assert_eq(ju(st, "interrupted"), ju(st, "stalled"), "every stall was ended");
	json_decref(st);
}

/* loadbench over a regionfs mount that fails 10% of reads: with retries
 * the same counts as straight from the backing files; retries off, it
 * fails naming a file under the mount. */
Test(fuse_faults, loadbench_over_regionfs_eio, .fini = rfs_teardown, .timeout = 240)
{
	const char *dir = tu_tmpdir(), *err;
	char args[512];
	json_t *direct, *mounted, *st;

	rfs_dirs(dir);
	make_dataset(rfs_backing);
	snprintf(args, sizeof(args), "%s/z %s/raw", rfs_backing, rfs_backing);
	cr_assert_eq(loadbench("PODFEED_FAULTS=", args, &direct, &err), 0, "%s", err);
	rfs_start("--eio-rate 0.1 --seed 3");
	snprintf(args, sizeof(args), "%s/z %s/raw", rfs_mnt, rfs_mnt);
	cr_assert_eq(loadbench("PODFEED_IO_RETRIES=10 PODFEED_IO_BACKOFF_US=1000", args,
			       &mounted, &err), 0, "%s", err);
	same_counts(direct, mounted);
	json_decref(mounted);
	st = rfs_stop();
	cr_assert_gt(ju(st, "eio_injected"), 0, "regionfs failed no read");
	json_decref(st);

	rfs_start("--eio-rate 1");
	cr_assert_eq(loadbench("PODFEED_IO_RETRIES=0", args, &mounted, &err), 1);
	cr_assert(strstr(err, rfs_mnt) && strstr(err, "I/O error"), "%s", err);
	if (mounted)
		json_decref(mounted);
	json_decref(rfs_stop());
	json_decref(direct);
}

/* loadbench over a mount whose reads never answer: it fails within about
 * the timeout, naming a file under the mount, instead of hanging. */
Test(fuse_faults, loadbench_over_a_stalled_mount_times_out, .fini = rfs_teardown,
     .timeout = 120)
{
	const char *dir = tu_tmpdir(), *err;
	char args[512];
	json_t *out, *st;
	int64_t t0;

	rfs_dirs(dir);
	make_dataset(rfs_backing);
	rfs_start("--stall-rate 1 --direct-io");
	snprintf(args, sizeof(args), "%s/z", rfs_mnt);
	t0 = tu_now_ns();
	cr_assert_eq(loadbench("PODFEED_IO_TIMEOUT_MS=300", args, &out, &err), 1);
	cr_log_info("failed after %.2f s", (double)(tu_now_ns() - t0) / 1e9);
	cr_assert(strstr(err, rfs_mnt) && strstr(err, ": byte ") &&
		  strstr(err, "timed out"), "%s", err);
	if (out)
		json_decref(out);
	st = rfs_stop();
	cr_assert_geq(ju(st, "stalled"), 1);
	json_decref(st);
}

Test(fuse_faults, stall_rate_is_checked)
{
	char cmd[512];

	if (!getenv("REGIONFS"))
		cr_skip_test("regionfs is not built (no libfuse3)");
	snprintf(cmd, sizeof(cmd), "%s --stall-rate 1.5 /tmp /nonexistent 2>&1 | "
		 "grep -q -- \"--stall-rate: '1.5' is out of range \\[0, 1\\]\"",
		 getenv("REGIONFS"));
	cr_assert_eq(tu_system("%s", cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "%s --stall-rate 0.5x /tmp /nonexistent >/dev/null 2>&1",
		 getenv("REGIONFS"));
	cr_assert_eq(tu_system("%s", cmd), 2);
}
