/* SPDX-License-Identifier: Apache-2.0 */
/* Lazy opens: the loader opens only the shards its schedule reaches, a
 * bounded number ahead, and closes them when done: more shards than the
 * engine's old 4,096-file table, every record exactly once, the files
 * open at once bounded, on both back-ends; a shard changed since its
 * manifest (by its tail: another mtime alone is read), or gone, fails at
 * its open naming it (and the manifest), one
 * replaced by a FIFO or a device is refused unopened; open
 * faults retried to the same batches, or named. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "podfeed.h"
#include "testutil.h"

#define PER_SHARD 3u
#define IO_DEPTH 8u
#define THREADS 2u

static const char *const backend_names[] = { "uring", "pread" };

static struct criterion_test_params both_backends(void)
{
	static int which[] = { 0, 1 };
	return cr_make_param_array(int, which, 2);
}

typedef struct run_result {
	int ret;
	bool created;
	pf_error err;
	uint64_t steps, records;
	uint32_t digest;
	uint8_t *seen;		/* per id */
	pf_loader_metrics m;
} run_result;

/* n indexed shards of PER_SHARD records (ids from 0, in file order), in
 * memory where the machine has it; with a manifest when asked. */
static const char *tiny_shards(unsigned n, bool manifest)
{
	const char *dir = tu_tmpdir_mem();
	char p[512];

	for (unsigned i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "%s/part-%05u.tfrecord.zst", dir, i);
		tu_write_id_shard(p, (uint64_t)i * PER_SHARD, PER_SHARD, 1024, 0);
	}
	if (manifest) {
		const char *paths[1] = { dir };
		pf_manifest_info info;
		pf_error err;

		snprintf(p, sizeof(p), "%s/%s", dir, PF_MANIFEST_NAME);
		pf_error_clear(&err);
		cr_assert_eq(pf_manifest_write(paths, 1, p, &info, &err), 0, "%s", err.msg);
		cr_assert_eq(info.shards, n);
	}
	return dir;
}

static void run(const char *dir, pf_loader_config cfg, uint64_t nids, run_result *r)
{
	const char *paths[1] = { dir };
	pf_loader *l;
	pf_batch *b;

	memset(r, 0, sizeof(*r));
	r->seen = calloc(nids, 1);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.features = "id:int64[1]";
	cfg.io_depth = cfg.io_depth ? cfg.io_depth : IO_DEPTH;
	cfg.threads = THREADS;
	pf_error_clear(&r->err);
	r->ret = pf_loader_create(&l, &cfg, &r->err);
	if (r->ret < 0)
		return;
	r->created = true;
	while ((r->ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++) {
			const int64_t *ids = b->core[c].tensors[0].data;

			r->digest = pf_crc32c(r->digest, b->core[c].block, b->core[c].block_bytes);
			for (uint32_t i = 0; i < b->per_core_batch; i++) {
				cr_assert_lt((uint64_t)ids[i], nids);
				r->seen[ids[i]]++;
			}
			r->records += b->per_core_batch;
		}
		r->steps++;
		pf_loader_release(l, b);
	}
	if (r->ret < 0)
		r->err = *pf_loader_last_error(l);
	pf_loader_get_metrics(l, &r->m);
	pf_loader_free(l);
}

ParameterizedTestParameters(lazyopen, more_shards_than_the_old_table)
{
	return both_backends();
}

/* 5,000 shards: the I/O thread opens each when its schedule nears it and
 * closes it after, never holding more than 3 x io_depth + threads + 1. */
ParameterizedTest(int *which, lazyopen, more_shards_than_the_old_table, .timeout = 240)
{
	const unsigned n = 5000;
	const uint64_t nids = (uint64_t)n * PER_SHARD;
	const char *dir = tiny_shards(n, true);
	pf_loader_config cfg = { .per_core_batch = 25, .cores_per_host = 2, .shuffle = true,
				 .seed = 11, .io_backend = backend_names[*which] };
	run_result r;

	run(dir, cfg, nids, &r);
	cr_assert_eq(r.ret, 0, "%s: %s", r.err.file, r.err.msg);
	cr_assert_eq(r.records, nids);
	for (uint64_t i = 0; i < nids; i++)
		cr_assert_eq(r.seen[i], 1, "record %llu seen %u times", (unsigned long long)i,
			     r.seen[i]);
	cr_assert_eq(r.m.files_opened, n, "each shard opened once (%llu opens)",
		     (unsigned long long)r.m.files_opened);
	cr_assert_leq(r.m.files_open_peak, 3 * IO_DEPTH + THREADS + 1, "%u open at once",
		      r.m.files_open_peak);
	cr_assert_geq(r.m.files_open_peak, 2, "opens are in flight together");
	free(r.seen);
}

/* A few large shards read twice over (two epochs, shuffled frames) stay
 * open: no shard is opened more than once. */
Test(lazyopen, few_shards_are_opened_once, .timeout = 120)
{
	const char *dir = tu_tmpdir();
	char p[512];
	pf_loader_config cfg = { .per_core_batch = 16, .cores_per_host = 2, .shuffle = true,
				 .seed = 3, .epochs = 2 };
	run_result r;

	for (unsigned i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/s%u.tfrecord.zst", dir, i);
		tu_write_id_shard(p, i * 640u, 640, 2048, 0);
	}
	run(dir, cfg, 3 * 640, &r);
	cr_assert_eq(r.ret, 0, "%s", r.err.msg);
	for (uint64_t i = 0; i < 3 * 640; i++)
		cr_assert_eq(r.seen[i], 2, "record %llu", (unsigned long long)i);
	cr_assert_eq(r.m.files_opened, 3);
	free(r.seen);
}

/* The same batches with and without the manifest, and with open faults
 * retried away. */
Test(lazyopen, open_faults_are_retried_to_the_same_batches, .timeout = 120)
{
	const unsigned n = 60;
	const uint64_t nids = (uint64_t)n * PER_SHARD;
	const char *dir = tiny_shards(n, true);
	pf_loader_config cfg = { .per_core_batch = 10, .cores_per_host = 2, .shuffle = true,
				 .seed = 5, .io_retry_backoff_us = 100 };
	run_result clean, faulty, bare;

	run(dir, cfg, nids, &clean);
	cr_assert_eq(clean.ret, 0, "%s", clean.err.msg);
	cfg.io_faults = "open-eio:0.3,open-delay=1ms:0.2,seed=4";
	cfg.io_retries = 10;
	run(dir, cfg, nids, &faulty);
	cr_assert_eq(faulty.ret, 0, "%s", faulty.err.msg);
	cr_assert_eq(faulty.digest, clean.digest, "retried opens changed the batches");
	cr_assert_gt(faulty.m.io_retries, 0);
	cr_assert_eq(faulty.m.files_opened, clean.m.files_opened);
	cfg.io_faults = NULL;
	cfg.io_retries = 0;
	cfg.ignore_manifest = true;
	run(dir, cfg, nids, &bare);
	cr_assert_eq(bare.ret, 0, "%s", bare.err.msg);
	cr_assert_eq(bare.digest, clean.digest, "the manifest changed the batches");
	free(clean.seen);
	free(faulty.seen);
	free(bare.seen);
}

/* An open that fails for good fails the loader, naming the shard. */
Test(lazyopen, a_failed_open_names_the_shard, .timeout = 60)
{
	const char *dir = tiny_shards(20, true);
	pf_loader_config cfg = { .per_core_batch = 10, .io_faults = "open-enoent@7",
				 .io_retries = PF_IO_RETRIES_NONE };
	char line[PF_ERROR_LINE_MAX];
	run_result r;

	run(dir, cfg, 20 * PER_SHARD, &r);
	cr_assert(r.created, "the loader opens no shard before its first batch: %s",
		  r.err.msg);
	cr_assert_eq(r.ret, -ENOENT, "%d %s", r.ret, r.err.msg);
	pf_error_format(&r.err, line, sizeof(line));
	cr_assert(strstr(r.err.file, "/part-") && strstr(r.err.file, ".tfrecord.zst"), "%s",
		  line);
	cr_assert(strstr(line, "cannot open: no such file (an injected fault)"), "%s", line);
	free(r.seen);
}

/* A shard changed after its manifest was written: refused at its open,
 * after pf_loader_create() succeeded, naming the shard and the manifest,
 * by its tail (the same size, other bytes), on both back-ends; one only
 * touched (another mtime, as a copy or an upload gives) is read; one
 * deleted since: refused at its open, named. */
ParameterizedTestParameters(lazyopen, a_changed_shard_fails_at_its_open)
{
	return both_backends();
}

ParameterizedTest(int *which, lazyopen, a_changed_shard_fails_at_its_open, .timeout = 60)
{
	const char *dir = tiny_shards(40, true);
	pf_loader_config cfg = { .per_core_batch = 10, .io_backend = backend_names[*which] };
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 1000, 0 } };
	char p[512], line[PF_ERROR_LINE_MAX];
	uint8_t *bytes;
	size_t len;
	run_result r;

	snprintf(p, sizeof(p), "%s/part-00031.tfrecord.zst", dir);
	cr_assert_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
	run(dir, cfg, 40 * PER_SHARD, &r);
	cr_assert_eq(r.ret, 0, "another mtime, the same bytes: %s", r.err.msg);
	cr_assert_eq(r.records, 40 * PER_SHARD);
	for (unsigned i = 0; i < 40 * PER_SHARD; i++)
		cr_assert_eq(r.seen[i], 1, "id %u seen %u times", i, r.seen[i]);
	free(r.seen);

	/* The same size, a byte of its index other (its CRC32C then fails
	 * too: the tail is what differs first). */
	bytes = tu_read_file(p, &len);
	bytes[len - 40] ^= 0x01;
	tu_write_file(p, bytes, len);
	free(bytes);
	run(dir, cfg, 40 * PER_SHARD, &r);
	cr_assert(r.created, "%s", r.err.msg);
	cr_assert_eq(r.ret, -ESTALE, "%d %s", r.ret, r.err.msg);
	pf_error_format(&r.err, line, sizeof(line));
	cr_assert_str_eq(r.err.file, p, "%s", line);
	cr_assert(strstr(line, PF_MANIFEST_NAME) &&
		  strstr(line, "not the shard the manifest was written for"), "%s", line);
	cr_assert(r.records < 40 * PER_SHARD, "%s", line);
	free(r.seen);

	cr_assert_eq(unlink(p), 0);
	run(dir, cfg, 40 * PER_SHARD, &r);
	cr_assert(r.created, "%s", r.err.msg);
	cr_assert_eq(r.ret, -ENOENT, "%d %s", r.ret, r.err.msg);
	pf_error_format(&r.err, line, sizeof(line));
	cr_assert_str_eq(r.err.file, p, "%s", line);
	cr_assert(strstr(line, "cannot open: no such file"), "%s", line);
	free(r.seen);
}

ParameterizedTestParameters(lazyopen, a_fifo_or_device_the_manifest_names_is_refused)
{
	return both_backends();
}

/* A shard the manifest names, replaced by a FIFO with no writer: open(2)
 * of it would wait for a writer forever (in an opening thread, or an
 * io-wq worker on FUSE or a cold lookup), so the engine stats the path
 * first and refuses it by name, unopened; a device the same.  A hang
 * fails the test by its timeout. */
ParameterizedTest(int *which, lazyopen, a_fifo_or_device_the_manifest_names_is_refused,
		  .timeout = 60)
{
	const char *dir = tiny_shards(20, true);
	pf_loader_config cfg = { .per_core_batch = 10, .io_backend = backend_names[*which] };
	char p[512], line[PF_ERROR_LINE_MAX];
	run_result r;

	snprintf(p, sizeof(p), "%s/part-00013.tfrecord.zst", dir);
	cr_assert_eq(unlink(p), 0);
	cr_assert_eq(mkfifo(p, 0644), 0);
	run(dir, cfg, 20 * PER_SHARD, &r);
	cr_assert(r.created, "the loader opens no shard before its first batch: %s",
		  r.err.msg);
	cr_assert_eq(r.ret, -EINVAL, "%d %s", r.ret, r.err.msg);
	pf_error_format(&r.err, line, sizeof(line));
	cr_assert_str_eq(r.err.file, p, "%s", line);
	cr_assert(strstr(line, ": is a FIFO, not a regular file"), "%s", line);
	cr_assert_lt(r.records, 20 * PER_SHARD, "records after the FIFO's place were delivered");
	free(r.seen);

	cr_assert_eq(unlink(p), 0);
	cr_assert_eq(symlink("/dev/null", p), 0);
	run(dir, cfg, 20 * PER_SHARD, &r);
	cr_assert(r.created, "%s", r.err.msg);
	cr_assert_eq(r.ret, -EINVAL, "%d %s", r.ret, r.err.msg);
	pf_error_format(&r.err, line, sizeof(line));
	cr_assert_str_eq(r.err.file, p, "%s", line);
	cr_assert(strstr(line, ": is a character device, not a regular file"), "%s", line);
	free(r.seen);
}
