/* SPDX-License-Identifier: Apache-2.0 */
/* I/O faults: injected EIO, short reads, ENOENT, latency and hung reads
 * on both engine back-ends and pf_file_pread(); retries with backoff; read
 * timeouts of injected hangs; the settings and the fault spec parser.  The
 * loader end to end and reads over regionfs (FUSE) are
 * test_loader_faults.c's. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faults_util.h"
#include "io_internal.h"
#include "pf_io.h"
#include "podfeed.h"
#include "testutil.h"

#define CHUNK 65536u

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
	return ft_both_backends();
}

ParameterizedTest(int *which, faults, nth_request_eio_is_retried)
{
	const size_t len = 20 * CHUNK + 77;
	uint8_t *content;
	const char *path = make_file(len, &content);
	pf_io *io = tu_engine(ft_backend_names[*which],
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
	return ft_both_backends();
}

ParameterizedTest(int *which, faults, eio_on_every_read_exhausts_the_retries)
{
	uint8_t *content, buf[4096];
	const char *path = make_file(1 << 20, &content);
	pf_io *io = tu_engine(ft_backend_names[*which],
			      (pf_io_config){ .faults = "eio:1", .retries = 2,
					      .retry_backoff_us = 1000 });
	pf_io_req r = { .offset = 12288, .len = sizeof(buf), .buf = buf, .buf_index = -1 };
	pf_io_stats st;
	pf_error err;
	char line[512];
	int f = pf_io_add_file(io, path, 0, &err);
	int64_t t0 = tu_now_ns();

	r.file = (uint32_t)f;
	cr_assert_eq(ft_read_one(io, &r), -EIO);
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
	return ft_both_backends();
}

ParameterizedTest(int *which, faults, no_retries_fails_at_once)
{
	uint8_t *content, buf[4096];
	const char *path = make_file(1 << 16, &content);
	pf_io *io = tu_engine(ft_backend_names[*which],
			      (pf_io_config){ .faults = "eio@2", .retries = PF_IO_RETRIES_NONE });
	pf_io_req r = { .len = sizeof(buf), .buf = buf, .buf_index = -1 };
	pf_error err;

	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_eq(ft_read_one(io, &r), (int64_t)sizeof(buf));
	r.offset = 8192;
	cr_assert_eq(ft_read_one(io, &r), -EIO);
	cr_assert_eq(r.retries, 0);
	r.offset = 16384;
	cr_assert_eq(ft_read_one(io, &r), (int64_t)sizeof(buf), "request 3 is clean");
	cr_assert_arr_eq(buf, content + 16384, sizeof(buf));
	pf_io_free(io);
	free(content);
}

ParameterizedTestParameters(faults, short_reads_are_completed)
{
	return ft_both_backends();
}

ParameterizedTest(int *which, faults, short_reads_are_completed)
{
	const size_t len = 10 * CHUNK + 1000;
	uint8_t *content;
	const char *path = make_file(len, &content);
	pf_io *io = tu_engine(ft_backend_names[*which], (pf_io_config){ .faults = "short:1" });
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
	return ft_both_backends();
}

ParameterizedTest(int *which, faults, enoent_is_not_retried)
{
	uint8_t *content, buf[1000];
	const char *path = make_file(1 << 16, &content);
	pf_io *io = tu_engine(ft_backend_names[*which],
			      (pf_io_config){ .faults = "enoent@1", .retries = 5 });
	pf_io_req r = { .offset = 500, .len = sizeof(buf), .buf = buf, .buf_index = -1 };
	pf_io_stats st;
	pf_error err;

	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_eq(ft_read_one(io, &r), -ENOENT);
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
	return ft_both_backends();
}

ParameterizedTest(int *which, faults, latency_is_added)
{
	uint8_t *content, buf[4096];
	const char *path = make_file(1 << 16, &content);
	pf_io *io = tu_engine(ft_backend_names[*which],
			      (pf_io_config){ .faults = "delay=150ms@2" });
	pf_io_req r = { .len = sizeof(buf), .buf = buf, .buf_index = -1 };
	pf_io_stats st;
	pf_error err;
	int64_t t0;

	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_eq(ft_read_one(io, &r), (int64_t)sizeof(buf));
	t0 = tu_now_ns();
	r.offset = 4096;
	cr_assert_eq(ft_read_one(io, &r), (int64_t)sizeof(buf));
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
	return ft_both_backends();
}

/* 'hang' issues the read against a pipe nobody writes: a real read
 * blocked in the kernel, which only the timeout (a linked timeout, or the
 * thread's timer signal) can end. */
ParameterizedTest(int *which, faults, hung_read_times_out_naming_the_file, .timeout = 60)
{
	uint8_t *content, buf[4096];
	const char *path = make_file(1 << 16, &content);
	pf_io *io = tu_engine(ft_backend_names[*which],
			      (pf_io_config){ .faults = "hang@1", .timeout_ms = 200,
					      .retries = 3 });
	pf_io_req r = { .offset = 8192, .len = sizeof(buf), .buf = buf, .buf_index = -1 };
	pf_io_stats st;
	pf_error err;
	char line[512];
	int64_t t0 = tu_now_ns();

	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_eq(ft_read_one(io, &r), -ETIMEDOUT);
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
	cr_assert_eq(ft_read_one(io, &r), (int64_t)sizeof(buf));
	cr_assert_arr_eq(buf, content + 8192, sizeof(buf));
	pf_io_free(io);
	free(content);
}

ParameterizedTestParameters(faults, the_same_spec_faults_the_same_reads)
{
	return ft_both_backends();
}

ParameterizedTest(int *which, faults, the_same_spec_faults_the_same_reads)
{
	const size_t len = 40 * CHUNK;
	uint8_t *content;
	const char *path = make_file(len, &content);
	uint64_t faults[2], retries[2], shorts[2];

	for (int run = 0; run < 2; run++) {
		pf_io *io = tu_engine(ft_backend_names[*which],
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
		pf_io *io = tu_engine(ft_backend_names[b], (pf_io_config){ .faults = "short:1" });
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
		cr_assert_eq(ft_read_one(io, &r), (int64_t)r.len, "%s", ft_backend_names[b]);
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
	cr_assert_eq(ft_read_one(io, &r), -EIO);
	pf_io_free(io);
	setenv("PODFEED_IO_RETRIES", "1", 1);
	cr_assert_eq(pf_io_create(&io, &cfg, &err), 0, "%s", err.msg);
	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_eq(ft_read_one(io, &r), (int64_t)sizeof(buf));
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
