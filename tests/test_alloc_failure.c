/* SPDX-License-Identifier: Apache-2.0 */
/* Allocation failure: every allocation of a create/read/close cycle made to
 * fail in turn through the public allocator hook (pf_allocator_set(): the
 * test allocator of testutil.c, tu_alloc_fail_at()), each giving a clean
 * -ENOMEM and leaking nothing, in the manner of protobuf-c's
 * failing-allocator test. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include "formats_internal.h"
#include "plan_internal.h"
#include "pf_host.h"
#include "podfeed.h"
#include "testutil.h"

/*
 * The sweep: a clean run of a cycle counts its allocations (K); then for
 * N = 1, 2, ... the Nth allocation of the cycle fails.  Each N must end in
 * either
 *   - -ENOMEM with a pf_error saying so (code -ENOMEM, a message, and the
 *     file where the cycle reads one), the failure having been drawn; or
 *   - success with no failure drawn (N past the cycle's last allocation),
 *     which ends the sweep;
 * and tu_alloc_live() must be back where it was before the cycle.  A cycle
 * that succeeds although its failure was drawn swallowed an out-of-memory
 * error: that fails the test.  The sweep must reach N > K, so a cycle that
 * stops allocating (or a hook that counts nothing) cannot pass unnoticed.
 *
 * The counters are the test allocator's, installed with pf_allocator_set()
 * as a user would, so this checks that every allocation of the library
 * reaches the hook (pf_malloc and the callbacks zstd, zlib and protobuf-c
 * get) and is freed through it; memory libc allocates for us (opendir,
 * glob) is not in it, and LeakSanitizer covers that in the ASan build.
 */

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond))                                                 \
			cr_assert_fail(__VA_ARGS__);                         \
	} while (0)

typedef int (*cycle_fn)(void *ctx, pf_error *err);

/* @return the allocations of one clean run. */
static uint64_t sweep(const char *name, cycle_fn fn, void *ctx, const char *file)
{
	uint64_t live0 = tu_alloc_live(), c0 = tu_alloc_count(), clean, n;
	pf_error err;
	int ret;

	pf_error_clear(&err);
	ret = fn(ctx, &err);
	cr_assert_eq(ret, 0, "%s: clean run failed: %d %s", name, ret, err.msg);
	clean = tu_alloc_count() - c0;
	cr_assert_gt(clean, 0, "%s: the cycle made no allocation", name);
	cr_assert_eq(tu_alloc_live(), live0, "%s: clean run leaked %lld", name,
		     (long long)(tu_alloc_live() - live0));

	for (n = 1;; n++) {
		uint64_t before, drawn;

		CHECK(n <= 4 * clean + 64, "%s: N=%llu and still failing (%llu allocations clean)",
		      name, (unsigned long long)n, (unsigned long long)clean);
		live0 = tu_alloc_live();
		before = tu_alloc_count();
		pf_error_clear(&err);
		tu_alloc_fail_at(n);
		ret = fn(ctx, &err);
		tu_alloc_fail_at(0);
		drawn = tu_alloc_count() - before;
		CHECK(tu_alloc_live() == live0, "%s: N=%llu leaked %lld allocations (ret %d: %s)",
		      name, (unsigned long long)n, (long long)(tu_alloc_live() - live0),
		      ret, err.msg);
		if (ret == 0) {
			CHECK(drawn < n, "%s: allocation %llu failed but the cycle succeeded",
			      name, (unsigned long long)n);
			break;
		}
		CHECK(drawn >= n, "%s: N=%llu: error %d (%s) before the failing allocation",
		      name, (unsigned long long)n, ret, err.msg);
		CHECK(ret == -ENOMEM, "%s: N=%llu: %d (%s), not -ENOMEM", name,
		      (unsigned long long)n, ret, err.msg);
		CHECK(err.code == -ENOMEM && err.msg[0], "%s: N=%llu: -ENOMEM without a pf_error "
		      "(code %d, msg '%s')", name, (unsigned long long)n, err.code, err.msg);
		CHECK(!file || !strcmp(err.file, file),
		      "%s: N=%llu: the error names '%s', not the file", name,
		      (unsigned long long)n, err.file);
	}
	cr_assert_gt(n, clean, "%s: succeeded at N=%llu with %llu allocations in a clean run",
		     name, (unsigned long long)n, (unsigned long long)clean);
	cr_log_info("%s: %llu allocations, each failed in turn", name,
		    (unsigned long long)clean);
	return clean;
}

/* ------------------------------------------------------------------ */
/* Test data                                                            */

#define NRECORDS 300

struct dataset {
	char dir[512];
	uint8_t *rec[NRECORDS];		/* tf.train.Example payloads */
	size_t len[NRECORDS];
	uint8_t *stream;		/* the plain TFRecord stream */
	size_t stream_len;
	uint32_t crc;			/* chained over the payloads */
	uint8_t *shard;			/* the indexed shard's bytes */
	size_t shard_len;
	char plain[600], gzip[600], zlib[600], zstd[600], indexed[600];
};

static struct dataset ds;

/* Examples of an id, 4 floats and a byte string of 10 bytes to 20 KiB,
 * so that records straddle 4 KiB reads. */
static void make_records(void)
{
	static uint8_t bytes[20480];

	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)(i * 131 + 7);
	for (int i = 0; i < NRECORDS; i++) {
		int64_t id = i;
		float v[4] = { (float)i, 1.5f, -2.0f, 0.25f };
		pf_bytes b = { bytes, (uint32_t)(10 + (i * 7919) % 20000) };
		pf_feature f[3] = {
			{ .name = "id", .name_len = 2, .kind = PF_KIND_INT64,
			  .count = 1, .v.int64s = &id },
			{ .name = "v", .name_len = 1, .kind = PF_KIND_FLOAT,
			  .count = 4, .v.floats = v },
			{ .name = "blob", .name_len = 4, .kind = PF_KIND_BYTES,
			  .count = 1, .v.bytes = &b },
		};
		static uint8_t wire[32768];
		int64_t n = pf_example_encode(f, 3, wire, sizeof(wire));

		cr_assert_gt(n, 0);
		ds.rec[i] = malloc((size_t)n);
		memcpy(ds.rec[i], wire, (size_t)n);
		ds.len[i] = (size_t)n;
		ds.crc = pf_crc32c(ds.crc, ds.rec[i], ds.len[i]);
	}
}

static void make_stream(void)
{
	size_t pos = 0;

	for (int i = 0; i < NRECORDS; i++)
		ds.stream_len += ds.len[i] + PF_TFR_OVERHEAD;
	ds.stream = malloc(ds.stream_len);
	for (int i = 0; i < NRECORDS; i++)
		pos += pf_tfr_encode(ds.stream + pos, ds.stream_len - pos, ds.rec[i],
				     ds.len[i]);
	cr_assert_eq(pos, ds.stream_len);
}

/* Deflate in[0..len) (wbits 15: zlib, 31: gzip) onto out at *pos. */
static void deflate_into(uint8_t *out, size_t cap, size_t *pos, const uint8_t *in,
			 size_t len, int wbits)
{
	z_stream z = { 0 };

	cr_assert_eq(deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = out + *pos;
	z.avail_out = (uInt)(cap - *pos);
	cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
	*pos = cap - z.avail_out;
	deflateEnd(&z);
}

struct membuf {
	uint8_t *data;
	size_t len, cap;
};

/* The writer's sink: test memory, not the library's. */
static int mem_write(void *ctx, const void *buf, size_t len)
{
	struct membuf *m = ctx;

	if (m->len + len > m->cap) {
		size_t cap = m->cap ? m->cap : 4096;

		while (cap < m->len + len)
			cap *= 2;
		m->data = realloc(m->data, cap);
		cr_assert_not_null(m->data);
		m->cap = cap;
	}
	memcpy(m->data + m->len, buf, len);
	m->len += len;
	return 0;
}

static const pf_shard_writer_config writer_cfg = { .frame_size = 64 << 10, .level = 1 };

/* The files every cycle reads: the same records as plain TFRecord, gzip
 * (two members), zlib, a zstd stream of two frames, and an indexed shard
 * of several frames with its schema. */
static void make_dataset(void)
{
	size_t half, cap, pos;
	uint8_t *buf;

	memset(&ds, 0, sizeof(ds));
	snprintf(ds.dir, sizeof(ds.dir), "%s", tu_tmpdir());
	make_records();
	make_stream();
	half = (ds.stream_len / 2);
	cap = compressBound((uLong)ds.stream_len) + ZSTD_compressBound(ds.stream_len) + 1024;
	buf = malloc(cap);

	snprintf(ds.plain, sizeof(ds.plain), "%s/a.tfrecord", ds.dir);
	tu_write_file(ds.plain, ds.stream, ds.stream_len);

	pos = 0;
	deflate_into(buf, cap, &pos, ds.stream, half, 31);
	deflate_into(buf, cap, &pos, ds.stream + half, ds.stream_len - half, 31);
	snprintf(ds.gzip, sizeof(ds.gzip), "%s/b.tfrecord.gz", ds.dir);
	tu_write_file(ds.gzip, buf, pos);

	pos = 0;
	deflate_into(buf, cap, &pos, ds.stream, ds.stream_len, 15);
	snprintf(ds.zlib, sizeof(ds.zlib), "%s/c.tfrecord.zz", ds.dir);
	tu_write_file(ds.zlib, buf, pos);

	pos = ZSTD_compress(buf, cap, ds.stream, half, 3);
	cr_assert(!ZSTD_isError(pos));
	pos += ZSTD_compress(buf + pos, cap - pos, ds.stream + half,
			     ds.stream_len - half, 3);
	cr_assert(!ZSTD_isError(pos));
	snprintf(ds.zstd, sizeof(ds.zstd), "%s/d.tfrecord.zst", ds.dir);
	tu_write_file(ds.zstd, buf, pos);
	free(buf);

	{
		pf_shard_writer *w;
		pf_schema *schema;
		pf_arena a;
		pf_example ex;
		pf_error err;
		struct membuf m = { 0 };

		pf_error_clear(&err);
		cr_assert_eq(pf_schema_create(&schema), 0);
		cr_assert_eq(pf_arena_init(&a, PF_ARENA_BYTES_FOR(32768)), 0);
		for (int i = 0; i < NRECORDS; i++) {
			pf_arena_reset(&a);
			cr_assert_eq(pf_example_decode(ds.rec[i], ds.len[i], &a, &ex, &err), 0);
			cr_assert_eq(pf_schema_add(schema, &ex), 0);
		}
		pf_arena_release(&a);
		cr_assert_eq(pf_shard_writer_create(&w, &writer_cfg, mem_write, &m), 0);
		cr_assert_eq(pf_shard_writer_set_schema(w, schema), 0);
		for (int i = 0; i < NRECORDS; i++)
			cr_assert_eq(pf_shard_writer_add(w, ds.rec[i], ds.len[i], &err), 0);
		cr_assert_eq(pf_shard_writer_close(w, &err), 0, "%s", err.msg);
		pf_shard_writer_free(w);
		pf_schema_free(schema);
		ds.shard = m.data;
		ds.shard_len = m.len;
	}
	snprintf(ds.indexed, sizeof(ds.indexed), "%s/e.tfrecord.zst", ds.dir);
	tu_write_file(ds.indexed, ds.shard, ds.shard_len);
}

static void free_dataset(void)
{
	for (int i = 0; i < NRECORDS; i++)
		free(ds.rec[i]);
	free(ds.stream);
	free(ds.shard);
}

#ifndef PF_ALLOC_FAILURE_LOADER
/* The loader's cycle is built alone into alloc_failure_loader (see the end
 * of the file); everything else is this executable's. */

/* For the calls that take no pf_error: say which one failed, so the
 * sweep's error check holds for every cycle alike. */
static int no_err_api(pf_error *err, int ret, const char *call)
{
	return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "%s: %s", call,
			    pf_strerror(ret));
}

/* ------------------------------------------------------------------ */
/* pf_source: open, every record, close                                 */

struct source_ctx {
	const char *path;
	pf_source_config cfg;
};

static int source_cycle(void *arg, pf_error *err)
{
	struct source_ctx *c = arg;
	pf_source *s;
	pf_record rec;
	uint64_t n = 0;
	uint32_t crc = 0;
	int ret;

	ret = pf_source_open(&s, c->path, &c->cfg, err);
	if (ret < 0)
		return ret;
	while ((ret = pf_source_next(s, &rec, err)) == 1) {
		CHECK(rec.index == n, "record %llu numbered %llu",
		      (unsigned long long)n, (unsigned long long)rec.index);
		crc = pf_crc32c(crc, rec.data, rec.len);
		n++;
	}
	pf_source_close(s);
	if (ret == 0) {
		CHECK(n == NRECORDS, "%s: %llu records", c->path, (unsigned long long)n);
		CHECK(crc == ds.crc, "%s: other records", c->path);
	}
	return ret;
}

static void sweep_source(const char *path, bool ignore_index)
{
	/* 4 KiB reads: records straddle reads, so the TFRecord reader's
	 * scratch buffer grows too. */
	struct source_ctx c = {
		.path = path,
		.cfg = { .read_size = 4096, .ignore_index = ignore_index },
	};
	char name[700];

	snprintf(name, sizeof(name), "pf_source %s%s", strrchr(path, '/') + 1,
		 ignore_index ? " (as a stream)" : "");
	sweep(name, source_cycle, &c, path);
}

Test(alloc_failure, source_indexed_shard, .init = make_dataset, .fini = free_dataset)
{
	sweep_source(ds.indexed, false);
}

Test(alloc_failure, source_gzip, .init = make_dataset, .fini = free_dataset)
{
	sweep_source(ds.gzip, false);
}

Test(alloc_failure, source_zstd_stream, .init = make_dataset, .fini = free_dataset)
{
	sweep_source(ds.zstd, false);
}

Test(alloc_failure, source_zlib_plain_and_shard_as_stream, .init = make_dataset,
     .fini = free_dataset)
{
	sweep_source(ds.zlib, false);
	sweep_source(ds.plain, false);
	sweep_source(ds.indexed, true);
}

/* ------------------------------------------------------------------ */
/* The indexed shard: index parse and frame decoding; the writer         */

static int index_cycle(void *arg, pf_error *err)
{
	pf_shard_index *ix;
	pf_frame_decoder *d;
	uint8_t *frame = NULL;
	int64_t r;
	int ret;

	(void)arg;
	r = pf_shard_index_parse(&ix, ds.shard, ds.shard_len, ds.shard_len, err);
	if (r < 0)
		return (int)r;
	CHECK(r == 0, "the whole file is enough tail, asked %lld", (long long)r);
	CHECK(pf_shard_index_records(ix) == NRECORDS, "index records");
	CHECK(pf_shard_index_frames(ix) > 2, "several frames");
	CHECK(pf_shard_index_schema_count(ix) == 3, "the schema's 3 features");
	ret = pf_frame_decoder_create(&d);
	if (ret < 0) {
		pf_shard_index_free(ix);
		return no_err_api(err, ret, "pf_frame_decoder_create");
	}
	for (uint32_t i = 0; i < pf_shard_index_frames(ix) && ret == 0; i++) {
		const pf_frame_info *fi = pf_shard_index_frame(ix, i);

		free(frame);
		frame = malloc(fi->uncompressed_size);
		r = pf_frame_decode(d, fi, ds.shard + fi->offset, fi->compressed_size,
				    frame, fi->uncompressed_size, err);
		if (r < 0)
			ret = (int)r;
	}
	free(frame);
	pf_frame_decoder_free(d);
	pf_shard_index_free(ix);
	return ret;
}

Test(alloc_failure, shard_index_and_frames, .init = make_dataset, .fini = free_dataset)
{
	sweep("pf_shard_index_parse + pf_frame_decode", index_cycle, NULL, NULL);
}

/* Schema inference over decoded examples, then the writer: create, set
 * the schema, add every record, close, free.  Success must give the very
 * bytes of the shard made without failures. */
static int writer_cycle(void *arg, pf_error *err)
{
	struct membuf m = { 0 };
	pf_shard_writer *w = NULL;
	pf_schema *schema = NULL;
	pf_arena a = { 0 };
	pf_example ex;
	int ret;

	(void)arg;
	ret = pf_schema_create(&schema);
	if (ret < 0)
		return no_err_api(err, ret, "pf_schema_create");
	ret = pf_arena_init(&a, PF_ARENA_BYTES_FOR(32768));
	if (ret < 0) {
		no_err_api(err, ret, "pf_arena_init");
		goto out;
	}
	for (int i = 0; i < NRECORDS && ret == 0; i++) {
		pf_arena_reset(&a);
		ret = pf_example_decode(ds.rec[i], ds.len[i], &a, &ex, err);
		CHECK(ret == 0, "decode %d: %s", i, err->msg);
		ret = pf_schema_add(schema, &ex);
		if (ret < 0)
			no_err_api(err, ret, "pf_schema_add");
	}
	if (ret < 0)
		goto out;
	ret = pf_shard_writer_create(&w, &writer_cfg, mem_write, &m);
	if (ret < 0) {
		no_err_api(err, ret, "pf_shard_writer_create");
		goto out;
	}
	ret = pf_shard_writer_set_schema(w, schema);
	if (ret < 0) {
		no_err_api(err, ret, "pf_shard_writer_set_schema");
		goto out;
	}
	for (int i = 0; i < NRECORDS && ret == 0; i++)
		ret = pf_shard_writer_add(w, ds.rec[i], ds.len[i], err);
	if (ret == 0)
		ret = pf_shard_writer_close(w, err);
	if (ret == 0)
		CHECK(m.len == ds.shard_len && !memcmp(m.data, ds.shard, m.len),
		      "the shard differs from the one written without failures");
out:
	pf_shard_writer_free(w);
	pf_arena_release(&a);
	pf_schema_free(schema);
	free(m.data);
	return ret;
}

Test(alloc_failure, schema_and_shard_writer, .init = make_dataset, .fini = free_dataset)
{
	sweep("pf_schema + pf_shard_writer", writer_cycle, NULL, NULL);
}

/* The reference decoder: protobuf-c unpacks through the hook. */
static int example_ref_cycle(void *arg, pf_error *err)
{
	pf_arena a;
	pf_example ex;
	int ret;

	(void)arg;
	ret = pf_arena_init(&a, PF_ARENA_BYTES_FOR(32768) * 2);
	if (ret < 0)
		return no_err_api(err, ret, "pf_arena_init");
	for (int i = 0; i < 20 && ret == 0; i++) {
		pf_arena_reset(&a);
		ret = pf_example_decode_ref(ds.rec[i], ds.len[i], &a, &ex, err);
		if (ret == 0)
			CHECK(ex.n_features == 3 && pf_example_find(&ex, "id")->v.int64s[0] == i,
			      "record %d decoded wrong", i);
	}
	pf_arena_release(&a);
	return ret;
}

Test(alloc_failure, example_decode_ref, .init = make_dataset, .fini = free_dataset)
{
	sweep("pf_example_decode_ref (protobuf-c)", example_ref_cycle, NULL, NULL);
}

/* ------------------------------------------------------------------ */
/* Spec, region table, paths, dataset and plan                          */

Test(alloc_failure, spec_parse_does_not_allocate)
{
	pf_spec spec;
	pf_error err;
	uint64_t c0 = tu_alloc_count();

	/* Nothing to sweep: the spec is a fixed array in the caller's
	 * struct.  Say so here, so that a spec that starts to allocate
	 * gets its sweep. */
	pf_error_clear(&err);
	cr_assert_eq(pf_spec_parse(&spec, "tokens:int32[256]:pad=0,x:float32[4]:scale=0.5:"
				   "clip=-3:3,label:int64[1]:required,b:bytes[16]", &err), 0,
		     "%s", err.msg);
	cr_assert_eq(tu_alloc_count(), c0, "pf_spec_parse allocates now: sweep it");
}

struct region_ctx {
	char table_file[600];
};

/* A region table as loadbench builds one: host region, --mount flags
 * (more than the initial room for 8), a mount table file, mountinfo text
 * with FUSE mounts; then lookups (which freeze it), and free. */
static int region_cycle(void *arg, pf_error *err)
{
	static const char mountinfo[] =
		"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
		"40 22 0:35 / /mnt/far rw,nosuid - fuse.regionfs regionfs rw\n"
		"41 22 0:36 / /mnt/other\\040dir rw - fuse sshfs#host: rw\n"
		"42 22 0:37 / /proc rw - proc proc rw\n";
	struct region_ctx *c = arg;
	pf_region_table *t;
	char flag[64];
	int ret;

	ret = pf_region_table_create(&t, "europe-west4", PF_REGION_LEXICAL, err);
	if (ret < 0)
		return ret;
	for (int i = 0; i < 12 && ret >= 0; i++) {
		snprintf(flag, sizeof(flag), "/data/m%d=US-Central1", i);
		ret = pf_region_table_add_flag(t, flag, err);
	}
	if (ret >= 0)
		ret = pf_region_table_load(t, c->table_file, err);
	if (ret >= 0)
		ret = pf_region_table_scan_mountinfo(t, mountinfo, sizeof(mountinfo) - 1,
						     NULL, err);
	if (ret >= 0) {
		CHECK(ret == 2, "2 FUSE mounts, said %d", ret);
		CHECK(pf_region_table_lookup(t, "/data/m11/x.tfrecord") != 0, "lookup");
		CHECK(pf_region_table_regions(t) >= 3, "regions");
		ret = 0;
	}
	pf_region_table_free(t);
	return ret;
}

Test(alloc_failure, region_table)
{
	struct region_ctx c;
	const char *text = "# mounts\n/mnt/far asia-east1\n/mnt/near europe-west4\n"
			   "/srv/a\\040b us-east1\n";

	snprintf(c.table_file, sizeof(c.table_file), "%s/mounts", tu_tmpdir());
	tu_write_file(c.table_file, text, strlen(text));
	sweep("pf_region_table", region_cycle, &c, NULL);
}

/* A report as loadbench makes one: the loader's section (an empty file
 * among the files), the baseline, the regions of a run, a training log's
 * figures, and the JSON printed.  (jansson's own allocations are not
 * counted here: json_set_alloc_funcs() is the application's.) */
static int report_cycle(void *arg, pf_error *err)
{
	const char *const *files = arg;
	pf_loader_config cfg = { .features = "x:float32[4]", .per_core_batch = 8 };
	pf_loader_metrics m = { .records = 80, .steps = 10, .decode_threads = 1 };
	pf_run_info run = { .seconds = 1, .steady_batches = 9, .files = files, .nfiles = 2 };
	pf_baseline b = { .read_seconds = 1, .decompress_seconds = 1, .bytes = 1,
			  .bytes_decompressed = 2, .decode_seconds = 1, .decode_records = 1,
			  .decode_bytes = 2 };
	pf_region_usage_config rcfg = { .usd_per_gib = 0.02 };
	pf_train_step st = { .loss = 1, .compute_ns = 1000 };
	pf_train_figures f;
	pf_region_table *t = NULL;
	pf_region_usage *u = NULL;
	pf_train_log *l = NULL;
	pf_report *r = NULL;
	FILE *null = fopen("/dev/null", "w");
	int ret;

	CHECK(null, "/dev/null");
	ret = pf_report_create(&r);
	if (ret == 0)
		ret = pf_report_add_loader(r, &cfg, &m, &run, err);
	if (ret == 0)
		ret = pf_report_add_baseline(r, &b, err);
	if (ret == 0)
		ret = pf_region_table_create(&t, "us-east1", 0, err);
	if (ret == 0)
		ret = pf_region_usage_create(&u, t, files, 2, &rcfg, err);
	if (ret == 0)
		ret = pf_region_usage_run_done(u, 1.0);
	if (ret == 0)
		ret = pf_report_add_regions(r, u, 0, err);
	if (ret == 0)
		ret = pf_train_log_create(&l, 2);
	for (int i = 0; i < 3 && ret >= 0; i++)
		ret = pf_train_log_step(l, 100, &st, 0.1, NULL);
	if (ret >= 0)
		ret = pf_train_log_figures(l, &f);
	if (ret == 0)
		ret = pf_report_print(r, PF_REPORT_JSON, null);
	if (ret < 0 && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "the report: %s", pf_strerror(ret));
	pf_train_log_free(l);
	pf_region_usage_free(u);
	pf_region_table_free(t);
	pf_report_free(r);
	fclose(null);
	return ret;
}

Test(alloc_failure, report)
{
	char a[600], e[600];
	const char *files[2] = { a, e };

	snprintf(a, sizeof(a), "%s/a", tu_tmpdir());
	snprintf(e, sizeof(e), "%s/empty", tu_tmpdir());
	tu_write_file(a, "x", 1);
	tu_write_file(e, "", 0);
	sweep("pf_report", report_cycle, files, NULL);
}

struct paths_ctx {
	const char *args[3];
	size_t nargs;
	int expect;
};

static int paths_cycle(void *arg, pf_error *err)
{
	struct paths_ctx *c = arg;
	char **list;
	int n = pf_paths_expand(c->args, c->nargs, &list, err);

	if (n < 0)
		return n;
	CHECK(n == c->expect, "%d paths, expected %d", n, c->expect);
	pf_paths_free(list, (size_t)n);
	return 0;
}

Test(alloc_failure, paths_expand, .init = make_dataset, .fini = free_dataset)
{
	char pattern[600], more[600];
	/* A directory's 20 files, 2 zstd files by the pattern, one file by
	 * name: each file once (a file reached twice is refused). */
	struct paths_ctx c = { .args = { more, pattern, ds.plain }, .nargs = 3,
			       .expect = 20 + 2 + 1 };

	/* More than 16 names, so the list grows. */
	snprintf(more, sizeof(more), "%s/more", ds.dir);
	cr_assert_eq(mkdir(more, 0755), 0);
	for (int i = 0; i < 20; i++) {
		char p[700];

		snprintf(p, sizeof(p), "%s/extra-%02d.tfrecord", more, i);
		tu_write_file(p, "", 0);
	}
	snprintf(pattern, sizeof(pattern), "%s/*.zst", ds.dir);
	sweep("pf_paths_expand", paths_cycle, &c, NULL);
}

/* pf_dataset_open over every kind of file (indexed shards by their
 * index, streams counted through pf_source), an epoch plan for two hosts,
 * free. */
static int dataset_cycle(void *arg, pf_error *err)
{
	const char *const paths[] = { ds.indexed, ds.gzip, ds.zstd, ds.plain, ds.zlib };
	pf_topology topo = { .host_index = 1, .num_hosts = 2, .cores = 2, .per_core_batch = 8 };
	pf_epoch_plan plan = { 0 };
	pf_dataset *d;
	int ret;

	(void)arg;
	ret = pf_dataset_open(&d, paths, 5, &(pf_source_config){ 0 }, NULL, err);
	if (ret < 0)
		return ret;
	CHECK(d->records == 5 * NRECORDS, "dataset records");
	ret = pf_plan_epoch(&plan, d, &topo, 7, 0, true, 0, 0, PF_REMAINDER_WRAP);
	/* The global shuffle's slices too. */
	if (ret == 0)
		ret = pf_plan_epoch(&plan, d, &topo, 7, 1, true, 3, 0, PF_REMAINDER_WRAP);
	if (ret < 0)
		no_err_api(err, ret, "pf_plan_epoch");
	else
		CHECK(plan.stream_len == plan.quota, "the plan fills the quota");
	pf_plan_release(&plan);
	pf_dataset_free(d);
	return ret;
}

Test(alloc_failure, dataset_and_plan, .init = make_dataset, .fini = free_dataset)
{
	sweep("pf_dataset_open + pf_plan_epoch", dataset_cycle, NULL, NULL);
}

/* The pod simulation: from the files (streams counted on two threads),
 * and from their manifest, measured without it too. */
static int podsim_cycle(void *arg, pf_error *err)
{
	const char *const files[] = { ds.indexed, ds.gzip, ds.zstd, ds.plain, ds.zlib };
	const char *manifest = arg;
	pf_podsim_config cfg = { .paths = manifest ? &manifest : files,
				 .npaths = manifest ? 1 : 5, .num_hosts = 3, .cores_per_host = 2,
				 .per_core_batch = 4, .shuffle = true, .shuffle_window = 16,
				 .threads = 2, .measure_without_manifest = true };
	pf_podsim *sim;
	int ret = pf_podsim_run(&sim, &cfg, err);

	if (ret < 0)
		return ret;
	CHECK(pf_podsim_summary_get(sim)->complete, "the simulation's checks");
	CHECK(pf_podsim_summary_get(sim)->manifest == (manifest != NULL), "the manifest");
	pf_podsim_free(sim);
	return 0;
}

Test(alloc_failure, pod_simulation, .init = make_dataset, .fini = free_dataset)
{
	const char *const files[] = { ds.indexed, ds.gzip, ds.zstd, ds.plain, ds.zlib };
	char manifest[700];
	pf_error err;

	sweep("pf_podsim_run", podsim_cycle, NULL, NULL);
	snprintf(manifest, sizeof(manifest), "%s/ds.manifest", ds.dir);
	cr_assert_eq(pf_manifest_write(files, 5, manifest, NULL, &err), 0, "%s", err.msg);
	sweep("pf_podsim_run (manifest)", podsim_cycle, manifest, NULL);
}

#else /* PF_ALLOC_FAILURE_LOADER */

/* ------------------------------------------------------------------ */
/* The loader: create, a few batches, free                              */
/*
 * In its own executable, alloc_failure_loader: the loader's create, a
 * few steps and free, with every allocation of the cycle failed in turn
 * (the loader, the dataset, the sources, the index, zstd and the state
 * code all allocate through pf_malloc).
 */
static int loader_cycle(void *arg, pf_error *err)
{
	const char *const paths[] = { ds.indexed, ds.gzip, ds.zstd, ds.plain, ds.zlib };
	pf_loader_config cfg = {
		.paths = paths, .npaths = 5,
		.features = "id:int64[1],v:float32[4]:pad=-1",
		.cores_per_host = 2, .per_core_batch = 16,
		.seed = 3, .epochs = 1, .max_steps = 4, .shuffle = true,
		.shuffle_window = 64, .threads = 2,
		.memory_budget = 64u << 20,
	};
	pf_loader *l;
	pf_batch *b;
	int ret, steps = 0;

	(void)arg;
	ret = pf_loader_create(&l, &cfg, err);
	if (ret < 0)
		return ret;
	while ((ret = pf_loader_next(l, &b)) == 1) {
		const int64_t *ids = b->core[0].tensors[0].data;

		CHECK(ids[0] >= 0 && ids[0] < NRECORDS, "id %lld", (long long)ids[0]);
		steps++;
		pf_loader_release(l, b);
	}
	if (ret < 0)
		*err = *pf_loader_last_error(l);
	else
		CHECK(steps == 4, "%d steps, max_steps 4", steps);
	pf_loader_free(l);
	return ret;
}

Test(alloc_failure_loader, create_next_free, .init = make_dataset, .fini = free_dataset)
{
	sweep("pf_loader", loader_cycle, NULL, NULL);
}

/* Resume on one host from the states of two (the merge of their pieces),
 * a few steps, and save again. */
struct resume_ctx {
	pf_state_blob blob[2];
};

static pf_loader_config resume_config(const char *const *paths)
{
	return (pf_loader_config){
		.paths = paths, .npaths = 5, .features = "id:int64[1]",
		.cores_per_host = 2, .per_core_batch = 8, .seed = 5, .epochs = 2,
		.shuffle = true, .shuffle_window = 32, .threads = 2,
		.memory_budget = 64u << 20,
	};
}

static int resume_cycle(void *arg, pf_error *err)
{
	struct resume_ctx *rc = arg;
	const char *const paths[] = { ds.indexed, ds.gzip, ds.zstd, ds.plain, ds.zlib };
	pf_loader_config cfg = resume_config(paths);
	pf_loader *l;
	pf_batch *b;
	uint8_t out[4096];
	int64_t n;
	int ret;

	cfg.resume = rc->blob;
	cfg.nresume = 2;
	cfg.max_steps = 3;
	ret = pf_loader_create(&l, &cfg, err);
	if (ret < 0)
		return ret;
	while ((ret = pf_loader_next(l, &b)) == 1)
		pf_loader_release(l, b);
	if (ret < 0)
		*err = *pf_loader_last_error(l);
	n = ret < 0 ? 0 : pf_loader_save_state(l, out, sizeof(out));
	if (n < 0)
		ret = pf_error_set(err, (int)n, PF_OFFSET_NONE, 0, "cannot save the state");
	else
		CHECK(ret < 0 || (n > 0 && (size_t)n <= sizeof(out)), "state of %lld bytes",
		      (long long)n);
	pf_loader_free(l);
	return ret;
}

Test(alloc_failure_loader, resume_merge_and_save, .init = make_dataset, .fini = free_dataset)
{
	const char *const paths[] = { ds.indexed, ds.gzip, ds.zstd, ds.plain, ds.zlib };
	struct resume_ctx rc;
	uint8_t buf[2][4096];

	for (uint32_t h = 0; h < 2; h++) {
		pf_loader_config cfg = resume_config(paths);
		pf_loader *l;
		pf_batch *b;
		pf_error err;
		int64_t n;

		cfg.host_index = h;
		cfg.num_hosts = 2;
		cfg.max_steps = 2 + h;
		cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
		while (pf_loader_next(l, &b) == 1)
			pf_loader_release(l, b);
		n = pf_loader_save_state(l, buf[h], sizeof(buf[h]));
		cr_assert(n > 0 && (size_t)n <= sizeof(buf[h]));
		rc.blob[h] = (pf_state_blob){ buf[h], (size_t)n };
		pf_loader_free(l);
	}
	sweep("pf_loader resumed", resume_cycle, &rc, NULL);
}

/* Resumed from the two states with a skip into the next epoch (its
 * start planned inside it), the records of a step said, and saved. */
static int skip_cycle(void *arg, pf_error *err)
{
	struct resume_ctx *rc = arg;
	const char *const paths[] = { ds.indexed, ds.gzip, ds.zstd, ds.plain, ds.zlib };
	pf_loader_config cfg = resume_config(paths);
	pf_record_ref refs[16];
	pf_loader *l;
	pf_batch *b;
	uint8_t out[4096];
	int64_t n;
	int ret;

	cfg.resume = rc->blob;
	cfg.nresume = 2;
	cfg.max_steps = 2;
	cfg.skip_steps = 100;	/* past the resumed epoch (~88 steps) */
	ret = pf_loader_create(&l, &cfg, err);
	if (ret < 0)
		return ret;
	while ((ret = pf_loader_next(l, &b)) == 1)
		pf_loader_release(l, b);
	if (ret < 0)
		*err = *pf_loader_last_error(l);
	n = ret < 0 ? 0 : pf_loader_records_of(l, 41, refs, 16, err);
	if (n < 0)
		ret = (int)n;
	else
		CHECK(ret < 0 || n == 16, "%lld refs", (long long)n);
	n = ret < 0 ? 0 : pf_loader_save_state(l, out, sizeof(out));
	if (n < 0)
		ret = pf_error_set(err, (int)n, PF_OFFSET_NONE, 0, "cannot save the state");
	pf_loader_free(l);
	return ret;
}

Test(alloc_failure_loader, skip_records_of_and_save, .init = make_dataset,
     .fini = free_dataset)
{
	const char *const paths[] = { ds.indexed, ds.gzip, ds.zstd, ds.plain, ds.zlib };
	struct resume_ctx rc;
	uint8_t buf[2][4096];

	for (uint32_t h = 0; h < 2; h++) {
		pf_loader_config cfg = resume_config(paths);
		pf_loader *l;
		pf_batch *b;
		pf_error err;
		int64_t n;

		cfg.host_index = h;
		cfg.num_hosts = 2;
		cfg.max_steps = 2 + h;
		cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
		while (pf_loader_next(l, &b) == 1)
			pf_loader_release(l, b);
		n = pf_loader_save_state(l, buf[h], sizeof(buf[h]));
		cr_assert(n > 0 && (size_t)n <= sizeof(buf[h]));
		rc.blob[h] = (pf_state_blob){ buf[h], (size_t)n };
		pf_loader_free(l);
	}
	sweep("pf_loader skipped", skip_cycle, &rc, NULL);
}

#endif /* PF_ALLOC_FAILURE_LOADER */
