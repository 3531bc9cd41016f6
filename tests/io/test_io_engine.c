/* SPDX-License-Identifier: Apache-2.0 */
/* The I/O engine, on both back-ends: whole reads, end of file, many
 * requests in flight, registered buffers, O_DIRECT checks, counters. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pf_io.h"
#include "testutil.h"

static char *make_file(size_t len, uint8_t **content)
{
	static char path[256];
	const char *d = tu_tmpdir();
	uint8_t *buf = malloc(len);

	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)((i * 2654435761u) >> 13);
	snprintf(path, sizeof(path), "%s/data.bin", d);
	tu_write_file(path, buf, len);
	*content = buf;
	return path;
}

static pf_io *engine(const char *backend, void *bufs, size_t bsize, unsigned nbufs)
{
	pf_io_config cfg = { .queue_depth = 16, .backend = backend, .buffers = bufs,
			     .buffer_size = bsize, .nbuffers = nbufs };
	pf_io *io;
	pf_error err;

	pf_error_clear(&err);
	int ret = pf_io_create(&io, &cfg, &err);
	if (ret == -EPERM || ret == -ENOSYS)
		cr_skip_test("io_uring is refused on this kernel (%s)", pf_strerror(ret));
	cr_assert_eq(ret, 0, "%s", err.msg);
	return io;
}

static const char *const backend_names[] = { "uring", "pread" };

/* Parameters cross into the test's own process by value: pass indexes. */
ParameterizedTestParameters(io, reads_whole_file_in_many_requests)
{
	static int which[] = { 0, 1 };
	return cr_make_param_array(int, which, 2);
}

ParameterizedTest(int *which, io, reads_whole_file_in_many_requests)
{
	const char *const *backend = &backend_names[*which];
	const size_t len = 3 * 1024 * 1024 + 123, chunk = 65536;
	uint8_t *content, *bufs = malloc(16 * chunk);
	char *path = make_file(len, &content);
	pf_io *io = engine(*backend, bufs, chunk, 16);
	pf_io_req reqs[16], *done[16];
	pf_error err;
	size_t next = 0, completed = 0, nchunks = (len + chunk - 1) / chunk;
	int f = pf_io_add_file(io, path, 0, &err);

	cr_assert_geq(f, 0, "%s", err.msg);
	cr_assert_eq(pf_io_file_size(io, (uint32_t)f), len);
	cr_assert_str_eq(pf_io_backend_name(io), !strcmp(*backend, "uring") ? "io_uring" : "pread");
	/* Keep 16 in flight, each in its own registered buffer. */
	for (int i = 0; i < 16 && next < nchunks; i++, next++) {
		reqs[i] = (pf_io_req){ .file = (uint32_t)f, .offset = next * chunk,
				       .len = (uint32_t)chunk, .buf = bufs + (size_t)i * chunk,
				       .buf_index = i, .user = (void *)(uintptr_t)i };
		cr_assert_eq(pf_io_submit(io, &reqs[i]), 0);
	}
	pf_io_req extra = reqs[0];
	cr_assert_eq(pf_io_submit(io, &extra), -EBUSY, "depth is enforced");
	while (completed < nchunks) {
		int n = pf_io_reap(io, done, 16, 1);
		cr_assert_gt(n, 0);
		for (int k = 0; k < n; k++) {
			pf_io_req *r = done[k];
			size_t want = r->offset + chunk <= len ? chunk : len - r->offset;
			cr_assert_eq(r->result, (int64_t)want, "offset %llu",
				     (unsigned long long)r->offset);
			cr_assert_arr_eq(r->buf, content + r->offset, want);
			completed++;
			if (next < nchunks) {
				r->offset = next++ * chunk;
				cr_assert_eq(pf_io_submit(io, r), 0);
			}
		}
	}
	cr_assert_eq(pf_io_inflight(io), 0);
	pf_io_stats st;
	pf_io_file_stats(io, (uint32_t)f, &st);
	cr_assert_eq(st.bytes, len);
	cr_assert_eq(st.ops, nchunks);
	cr_assert_eq(st.errors, 0);
	cr_assert_gt(pf_io_stats_quantile_us(&st, 0.99), 0);
	pf_io_free(io);
	free(bufs);
	free(content);
}

/* pf_io_run(): a plan of chunk reads over the file, each checked as it
 * completes; then a plan whose done() fails stops and leaves nothing in
 * flight, and one whose next() fails says why. */
typedef struct chunk_plan {
	int file;
	size_t len, chunk, next, nchunks, completed, max_inflight;
	uint8_t *bufs;
	const uint8_t *content;
	pf_io *io;
	size_t fail_at;		/* done() fails at this completion (1-based); 0: never */
	bool next_fails;
} chunk_plan;

static int chunk_next(void *ctx, unsigned slot, pf_io_req *req, pf_error *err)
{
	chunk_plan *p = ctx;

	if (p->next_fails)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "no plan (test)");
	if (p->next >= p->nchunks)
		return 0;
	*req = (pf_io_req){ .file = (uint32_t)p->file, .offset = p->next++ * p->chunk,
			    .len = (uint32_t)p->chunk, .buf = p->bufs + slot * p->chunk,
			    .buf_index = -1 };
	if (pf_io_inflight(p->io) + 1 > p->max_inflight)
		p->max_inflight = pf_io_inflight(p->io) + 1;
	return 1;
}

static int chunk_done(void *ctx, unsigned slot, pf_io_req *r, pf_error *err)
{
	chunk_plan *p = ctx;
	size_t want = r->offset + p->chunk <= p->len ? p->chunk : p->len - r->offset;

	cr_assert_eq(r->buf, p->bufs + slot * p->chunk, "the slot's buffer");
	cr_assert_eq(r->result, (int64_t)want);
	cr_assert_arr_eq(r->buf, p->content + r->offset, want);
	if (++p->completed == p->fail_at)
		return pf_error_set(err, -EIO, PF_OFFSET_NONE, 0, "stop here (test)");
	return 0;
}

ParameterizedTestParameters(io, run_carries_out_a_plan)
{
	static int which[] = { 0, 1 };
	return cr_make_param_array(int, which, 2);
}

ParameterizedTest(int *which, io, run_carries_out_a_plan)
{
	const size_t len = 1024 * 1024 + 77, chunk = 16384;
	uint8_t *content, *bufs = malloc(8 * chunk);
	char *path = make_file(len, &content);
	pf_io *io = engine(backend_names[*which], NULL, 0, 0);
	pf_io_req reqs[8];
	pf_error err;
	chunk_plan p = { .len = len, .chunk = chunk, .nchunks = (len + chunk - 1) / chunk,
			 .bufs = bufs, .content = content, .io = io };
	pf_io_plan plan = { chunk_next, chunk_done, &p };

	p.file = pf_io_add_file(io, path, 0, &err);
	cr_assert_geq(p.file, 0, "%s", err.msg);
	cr_assert_eq(pf_io_run(io, reqs, 8, &plan, &err), 0, "%s", err.msg);
	cr_assert_eq(p.completed, p.nchunks);
	cr_assert_eq(p.max_inflight, 8, "8 reads in flight at most, and at times");
	cr_assert_eq(pf_io_inflight(io), 0);
	cr_assert_eq(err.code, 0);

	p.next = p.completed = 0;
	p.fail_at = 5;
	cr_assert_eq(pf_io_run(io, reqs, 8, &plan, &err), -EIO);
	cr_assert_str_eq(err.msg, "stop here (test)");
	cr_assert_eq(p.completed, 5, "no done() after the one that failed");
	cr_assert_lt(p.next, p.nchunks, "no read after it");
	cr_assert_eq(pf_io_inflight(io), 0, "nothing left in flight");

	p.next_fails = true;
	cr_assert_eq(pf_io_run(io, reqs, 8, &plan, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "no plan (test)");
	cr_assert_eq(pf_io_run(io, reqs, 0, &plan, &err), -EINVAL);
	pf_io_free(io);
	free(bufs);
	free(content);
}

Test(io, past_end_of_file_and_bad_requests)
{
	const char *backends[] = { "uring", "pread" };

	for (int b = 0; b < 2; b++) {
		uint8_t *content, buf[4096];
		char *path = make_file(1000, &content);
		pf_io *io = engine(backends[b], NULL, 0, 0);
		pf_io_req r = { .len = 4096, .buf = buf, .buf_index = -1 }, *done[2];
		pf_error err;
		int f = pf_io_add_file(io, path, 0, &err);

		r.file = (uint32_t)f;
		r.offset = 900;
		cr_assert_eq(pf_io_submit(io, &r), 0);
		cr_assert_eq(pf_io_reap(io, done, 2, 1), 1);
		cr_assert_eq(done[0]->result, 100, "%s: short at end of file", backends[b]);
		cr_assert_arr_eq(buf, content + 900, 100);
		r.offset = 5000;
		cr_assert_eq(pf_io_submit(io, &r), 0);
		cr_assert_eq(pf_io_reap(io, done, 2, 1), 1);
		cr_assert_eq(done[0]->result, 0);
		r.file = 99;
		cr_assert_eq(pf_io_submit(io, &r), 0);
		cr_assert_eq(pf_io_reap(io, done, 2, 1), 1);
		cr_assert_eq(done[0]->result, -EBADF);
		pf_error_clear(&err);
		cr_assert_eq(pf_io_add_file(io, "/nonexistent/shard", 0, &err), -ENOENT);
		cr_assert_str_eq(err.file, "/nonexistent/shard");
		pf_io_free(io);
		free(content);
	}
}

Test(io, direct_reads_must_be_aligned)
{
	uint8_t *content, *buf;
	char *path = make_file(1 << 20, &content);
	pf_io *io = engine("pread", NULL, 0, 0);
	pf_io_req r = { .len = 8192, .buf_index = -1 }, *done[1];
	pf_error err;
	int f = pf_io_add_file(io, path, PF_IO_DIRECT, &err);

	cr_assert_geq(f, 0);
	if (!pf_io_file_direct(io, (uint32_t)f))
		cr_skip_test("the filesystem under /tmp refuses O_DIRECT");
	cr_assert_eq(posix_memalign((void **)&buf, 4096, 8192), 0);
	r.file = (uint32_t)f;
	r.buf = buf;
	r.offset = 4096;
	cr_assert_eq(pf_io_submit(io, &r), 0);
	cr_assert_eq(pf_io_reap(io, done, 1, 1), 1);
	cr_assert_eq(done[0]->result, 8192);
	cr_assert_arr_eq(buf, content + 4096, 8192);
	r.offset = 100;
	cr_assert_eq(pf_io_submit(io, &r), 0);
	cr_assert_eq(pf_io_reap(io, done, 1, 1), 1);
	cr_assert_eq(done[0]->result, -EINVAL);
	pf_io_free(io);
	free(buf);
	free(content);
}

Test(io, backend_choice)
{
	pf_io *io;
	pf_error err;
	pf_io_config cfg = { .backend = "floppy" };

	pf_error_clear(&err);
	cr_assert_eq(pf_io_create(&io, &cfg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "unknown I/O back-end 'floppy'"), "%s", err.msg);
	setenv("PODFEED_IO", "pread", 1);
	cr_assert_eq(pf_io_create(&io, NULL, &err), 0);
	cr_assert_str_eq(pf_io_backend_name(io), "pread");
	pf_io_free(io);
	unsetenv("PODFEED_IO");
	pf_io_free(NULL);
}

/* Registered buffers are pinned as they are first read into, not all at
 * creation: a buffer no read used has no page in memory (the loader's
 * first batch reads into a few of its read buffers, and registering all
 * of them at once faulted in 21 MiB before its first read). */
Test(io, buffers_are_registered_at_their_first_read)
{
	const size_t bsize = 1u << 20;
	const unsigned nbufs = 8;
	long page = sysconf(_SC_PAGESIZE);
	unsigned char vec[(1u << 20) / 4096];
	uint8_t *content, *bufs;
	char *path = make_file(bsize, &content);
	pf_io_req req, *done;
	pf_io *io;
	pf_error err;
	int f;

	bufs = mmap(NULL, bsize * nbufs, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(bufs, MAP_FAILED);
	(void)madvise(bufs, bsize * nbufs, MADV_NOHUGEPAGE);	/* a page is a page */
	io = engine("uring", bufs, bsize, nbufs);
	if (!pf_io_buffers_registered(io))
		cr_skip_test("io_uring refused to register buffers here (RLIMIT_MEMLOCK)");
	f = pf_io_add_file(io, path, 0, &err);
	cr_assert_geq(f, 0, "%s", err.msg);
	req = (pf_io_req){ .file = (uint32_t)f, .offset = 0, .len = (uint32_t)bsize,
			   .buf = bufs + 2 * bsize, .buf_index = 2 };
	cr_assert_eq(pf_io_submit(io, &req), 0);
	cr_assert_eq(pf_io_reap(io, &done, 1, 1), 1);
	cr_assert_eq(req.result, (int64_t)bsize, "%s", pf_strerror((int)req.result));
	cr_assert_eq(memcmp(bufs + 2 * bsize, content, bsize), 0);
	for (unsigned b = 0; b < nbufs; b++) {
		size_t resident = 0;

		cr_assert_eq(mincore(bufs + b * bsize, bsize, vec), 0);
		for (size_t i = 0; i < bsize / (size_t)page; i++)
			resident += vec[i] & 1;
		if (b == 2)
			cr_assert_eq(resident, bsize / (size_t)page, "the buffer read into");
		else
			cr_assert_eq(resident, 0, "buffer %u was never read into but has %zu "
				     "pages in memory", b, resident);
	}
	pf_io_free(io);
	munmap(bufs, bsize * nbufs);
	free(content);
}
