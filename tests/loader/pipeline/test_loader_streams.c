/* SPDX-License-Identifier: Apache-2.0 */
/* The loader's stream files (plain and zstd TFRecord files without an
 * index) read through the I/O engine in blocks of 1 MiB: a read per block
 * on either back-end, the same batches at every thread count, faults on a
 * block's read retried or named, the stream buffers in the memory budget,
 * reads counted to their mount once, and blocks that come in late and out
 * of order.  The loader's other end-to-end tests are
 * test_loader_pipeline.c's. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "pipeline_util.h"
#include "podfeed.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* Stream files read through the I/O engine, in blocks of 1 MiB         */

/* A stream file of padded records of ids [0, n): plain, or zstd with a
 * frame per `per` records (frames then straddle the 1 MiB blocks the
 * loader reads).  @return its size. */
static size_t write_padded_stream(const char *path, uint64_t n, bool zstd, uint64_t per)
{
	size_t cap = (size_t)n * (TU_PAD_BYTES + 128), len = 0, out = 0;
	uint8_t *plain = malloc(cap), *z = NULL, rec[TU_PAD_BYTES + 128];

	cr_assert_not_null(plain);
	for (uint64_t i = 0; i < n; i++) {
		int64_t r = tu_padded_example(i, rec, sizeof(rec));

		cr_assert_gt(r, 0);
		len += pf_tfr_encode(plain + len, cap - len, rec, (size_t)r);
	}
	if (!zstd) {
		tu_write_file(path, plain, len);
		free(plain);
		return len;
	}
	z = malloc(ZSTD_compressBound(len) + 64 * (n / per + 1));
	cr_assert_not_null(z);
	/* Frames on record boundaries of every `per` records. */
	for (uint64_t i = 0, from = 0, at = 0; i <= n; i++) {
		if (i == n || (i && i % per == 0)) {
			size_t w = ZSTD_compress(z + out, ZSTD_compressBound(at - from), plain + from,
						 at - from, 1);

			cr_assert(!ZSTD_isError(w));
			out += w;
			from = at;
		}
		if (i < n)
			at += 12 + (size_t)plain[at] + ((size_t)plain[at + 1] << 8) +
			      ((size_t)plain[at + 2] << 16) + 4;
	}
	tu_write_file(path, z, out);
	free(z);
	free(plain);
	return out;
}

static uint64_t blocks_of(size_t size)
{
	return (size + PF_READ_DEFAULT - 1) / PF_READ_DEFAULT;
}

/* A plain and a zstd stream file of several MiB: every block is one read
 * of the loader's engine (on either back-end), the bytes read are the
 * file's, and both give the same batches at every thread count. */
Test(loader, stream_files_are_read_through_the_engine, .timeout = 180)
{
	const char *dirs[2] = { tu_tmpdir(), tu_tmpdir() };
	const char *io = getenv("PODFEED_IO");
	char p[2][512];
	size_t size[2];
	pl_run_result r, ref[2];

	snprintf(p[0], sizeof(p[0]), "%s/s.tfrecord", dirs[0]);
	snprintf(p[1], sizeof(p[1]), "%s/s.tfrecord.zst", dirs[1]);
	size[0] = write_padded_stream(p[0], 2400, false, 0);
	size[1] = write_padded_stream(p[1], 2400, true, 130);
	for (int f = 0; f < 2; f++) {
		pf_loader_config cfg = { .per_core_batch = 40, .cores_per_host = 2,
					 .shuffle = true, .shuffle_window = 400, .seed = 11,
					 .threads = 2 };

		cr_assert_gt(size[f], 3 * PF_READ_DEFAULT, "%zu bytes", size[f]);
		pl_run(dirs[f], &cfg, 2400, &ref[f]);
		cr_assert_eq(ref[f].ret, 0, "%s", ref[f].err.msg);
		cr_assert_eq(ref[f].steps, 30);
		for (uint64_t i = 0; i < 2400; i++)
			cr_assert_eq(ref[f].seen[i], 1, "%s: record %llu", p[f], (unsigned long long)i);
		cr_assert_eq(ref[f].m.io_requests, blocks_of(size[f]), "%s: %llu reads of %zu bytes",
			     p[f], (unsigned long long)ref[f].m.io_requests, size[f]);
		cr_assert_eq(ref[f].m.bytes_read, size[f]);
		cr_assert_eq(ref[f].m.io_short_reads, 0);
		if (io && !strcmp(io, "pread"))
			cr_assert_str_eq(ref[f].m.io_backend, "pread");
		for (unsigned t = 1; t <= 3; t += 2) {
			cfg.threads = t;
			pl_run(dirs[f], &cfg, 2400, &r);
			cr_assert_eq(r.ret, 0, "%s", r.err.msg);
			cr_assert_eq(r.digest, ref[f].digest, "%s: %u threads differ", p[f], t);
			free(r.seen);
		}
	}
	cr_assert_eq(ref[0].m.bytes_decompressed, size[0], "%llu",
		     (unsigned long long)ref[0].m.bytes_decompressed);
	cr_assert_eq(ref[1].m.bytes_decompressed, size[0], "%llu",
		     (unsigned long long)ref[1].m.bytes_decompressed);
	cr_assert_eq(ref[0].digest, ref[1].digest, "plain and zstd differ");
	free(ref[0].seen);
	free(ref[1].seen);

	/* max_steps: the stream is left after the blocks its first steps
	 * need (records 0..1023, the first sub-segment, end in block 1;
	 * block 2 may have been read ahead), and the loader ends. */
	{
		pf_loader_config cfg = { .per_core_batch = 40, .cores_per_host = 2,
					 .shuffle = true, .shuffle_window = 400, .seed = 11,
					 .threads = 2, .max_steps = 2 };

		cr_assert_lt(1024 * (size[0] / 2400), 2 * PF_READ_DEFAULT);
		pl_run(dirs[0], &cfg, 2400, &r);
		cr_assert_eq(r.ret, 0, "%s", r.err.msg);
		cr_assert_eq(r.steps, 2);
		cr_assert_geq(r.m.io_requests, 2);
		cr_assert_leq(r.m.io_requests, 3, "%llu reads", (unsigned long long)r.m.io_requests);
		free(r.seen);
	}
}

/* An injected EIO on a stream block's read (only the engine's reads get
 * faults here: pf_file_pread()'s policy was read before the variable was
 * set) is retried away; with retries off it fails the loader, naming the
 * file and the block's offset. */
Test(loader, stream_block_read_faults_are_retried_or_named, .timeout = 120)
{
	const char *d = tu_tmpdir();
	pf_loader_config cfg = { .per_core_batch = 40, .cores_per_host = 2, .shuffle = true,
				 .shuffle_window = 400, .seed = 4, .threads = 2 };
	char p[512], line[1024];
	pl_run_result clean, r;
	pf_error err;

	snprintf(p, sizeof(p), "%s/s.tfrecord", d);
	write_padded_stream(p, 2400, false, 0);
	unsetenv("PODFEED_FAULTS");
	unsetenv("PODFEED_IO_RETRIES");
	cr_assert_eq(pf_file_set_policy(NULL, &err), 0, "%s", err.msg);
	pl_run(d, &cfg, 2400, &clean);
	cr_assert_eq(clean.ret, 0, "%s", clean.err.msg);
	cr_assert_eq(clean.m.io_faults, 0);

	/* The engine's request 2: block 1 (blocks 0 and 1 are asked for at
	 * once, in order). */
	setenv("PODFEED_FAULTS", "eio@2", 1);
	setenv("PODFEED_IO_BACKOFF_US", "100", 1);
	pl_run(d, &cfg, 2400, &r);
	cr_assert_eq(r.ret, 0, "%s", r.err.msg);
	cr_assert_eq(r.digest, clean.digest, "a retried fault changed the batches");
	cr_assert_eq(r.m.io_faults, 1);
	cr_assert_geq(r.m.io_retries, 1);
	cr_assert_eq(r.m.io_requests, clean.m.io_requests);
	free(r.seen);

	setenv("PODFEED_IO_RETRIES", "0", 1);
	pl_run(d, &cfg, 2400, &r);
	cr_assert_eq(r.ret, -EIO, "%d %s", r.ret, r.err.msg);
	pf_error_format(&r.err, line, sizeof(line));
	cr_assert_str_eq(r.err.file, p, "%s", line);
	cr_assert_eq(r.err.offset_kind, PF_OFFSET_FILE, "%s", line);
	cr_assert_eq(r.err.offset, PF_READ_DEFAULT, "%s", line);
	cr_assert(strstr(line, "read failed"), "%s", line);
	free(r.seen);
	free(clean.seen);
}

/* The stream buffers (two blocks for each of threads + 1 streams) are a
 * pool of the memory plan: a budget without room for them is refused
 * with the plan, and one with room runs; without stream files they are
 * not planned. */
Test(loader, stream_buffers_are_in_the_memory_budget, .timeout = 60)
{
	const char *d = tu_tmpdir();
	const char *paths[1] = { d };
	char p[512];
	uint64_t nids;
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 40,
				 .threads = 2, .memory_budget = 4u << 20 };
	pf_loader *l = NULL;
	pf_error err;
	pl_run_result r;

	snprintf(p, sizeof(p), "%s/s.tfrecord", d);
	write_padded_stream(p, 400, false, 0);
	pf_error_clear(&err);
	cfg.features = "id:int64[1],v:float32[4]:pad=-1";
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -ENOMEM);
	cr_assert(strstr(err.msg, "memory budget of 4 MiB is too small") &&
		  strstr(err.msg, "stream buffers 6 (3 streams x 2 x 1024 KiB)"), "%s", err.msg);

	cfg.memory_budget = 8u << 20;
	pl_run(d, &cfg, 400, &r);
	cr_assert_eq(r.ret, 0, "%s", r.err.msg);
	cr_assert_eq(r.steps, 10);
	cr_assert_geq(r.m.memory_bytes, 6u << 20);
	free(r.seen);

	cfg.memory_budget = 4u << 20;
	d = pl_uneven_dataset(&nids);
	pl_run(d, &cfg, nids, &r);
	cr_assert_eq(r.ret, 0, "indexed shards only: %s", r.err.msg);
	cr_assert_lt(r.m.memory_bytes, 4u << 20);
	free(r.seen);
}

/* With a region table, a stream file's reads are counted to its mount
 * once each: the index probe and the count at open (the source's own
 * reads), then the engine's blocks (the source in pull mode reads and
 * counts nothing). */
Test(loader, stream_reads_are_counted_to_their_mount_once, .timeout = 60)
{
	const char *d = tu_tmpdir();
	const char *paths[1] = { d };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 40,
				 .cores_per_host = 2, .features = "id:int64[1]", .threads = 2 };
	pf_region_table *t;
	pf_region_stats st;
	pf_loader_metrics m;
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	char p[512];
	size_t size, probe;
	int ret;

	snprintf(p, sizeof(p), "%s/s.tfrecord", d);
	size = write_padded_stream(p, 2400, false, 0);
	probe = size < PF_SHARD_TAIL_HINT ? size : PF_SHARD_TAIL_HINT;
	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_create(&t, NULL, 0, &err), 0, "%s", err.msg);
	cfg.regions = t;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while ((ret = pf_loader_next(l, &b)) == 1)
		pf_loader_release(l, b);
	cr_assert_eq(ret, 0);
	pf_loader_get_metrics(l, &m);
	pf_loader_free(l);
	cr_assert_eq(m.bytes_read, size);
	pf_region_table_mount_stats(t, pf_region_table_lookup(t, p), &st);
	cr_assert_eq(st.io.bytes, probe + size + m.bytes_read, "%llu bytes counted",
		     (unsigned long long)st.io.bytes);
	cr_assert_eq(st.io.errors, 0);
	pf_region_table_free(t);
}

/* Stream blocks that come in late and out of order (a random half of the
 * reads delayed): a stream's sub-segment whose next block is not in yet
 * is parked while the workers go on with other work, and goes on when
 * the block comes; the batches are those of a run without delays, at
 * every thread count. */
Test(loader, late_stream_blocks_change_no_batch, .timeout = 240)
{
	const char *d = tu_tmpdir();
	char p[512];
	pl_run_result ref, r;

	snprintf(p, sizeof(p), "%s/a.tfrecord", d);
	cr_assert_gt(write_padded_stream(p, 2400, false, 0), 3 * PF_READ_DEFAULT);
	snprintf(p, sizeof(p), "%s/b.tfrecord.gz", d);
	tu_write_id_stream(p, 2400, 40000, true);
	snprintf(p, sizeof(p), "%s/c.tfrecord.zst", d);
	tu_write_id_shard(p, 42400, 7600, 4096, 0);
	for (unsigned t = 1; t <= 3; t += 2) {
		pf_loader_config cfg = { .per_core_batch = 50, .cores_per_host = 2,
					 .shuffle = true, .shuffle_window = 500, .seed = 5,
					 .threads = t };

		pl_run(d, &cfg, 50000, &ref);
		cr_assert_eq(ref.ret, 0, "%s", ref.err.msg);
		cr_assert_eq(ref.steps, 500);
		for (uint64_t i = 0; i < 50000; i++)
			cr_assert_eq(ref.seen[i], 1, "record %llu", (unsigned long long)i);
		cfg.io_faults = "delay=20ms:0.5,seed=3";
		pl_run(d, &cfg, 50000, &r);
		cr_assert_eq(r.ret, 0, "%s", r.err.msg);
		cr_assert_eq(r.digest, ref.digest, "%u threads: the delays changed the batches", t);
		cr_assert_gt(r.m.io_faults, 0);
		cr_assert_eq(r.m.bytes_read, ref.m.bytes_read);
		free(r.seen);
		free(ref.seen);
	}
}
