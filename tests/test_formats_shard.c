/* SPDX-License-Identifier: Apache-2.0 */
/* Indexed shards: writer, index parser and validation, frame decoding. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"
#include "pf_formats.h"
#include "pf_index.pb-c.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                              */
/* ------------------------------------------------------------------ */

/* An assertion for loops: the suite runs with --full-stats, where every
 * cr_assert is reported to the runner, which costs seconds per million. */
#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond))                                                 \
			cr_assert_fail(__VA_ARGS__);                         \
	} while (0)

struct membuf {
	uint8_t *data;
	size_t len, cap;
	int fail_after;		/* fail the Nth write (1-based); 0: never */
	int writes;
};

static int mem_write(void *ctx, const void *buf, size_t len)
{
	struct membuf *m = ctx;

	m->writes++;
	if (m->fail_after && m->writes >= m->fail_after)
		return -EIO;
	if (m->len + len > m->cap) {
		size_t cap = m->cap ? m->cap : 4096;

		while (cap < m->len + len)
			cap *= 2;
		m->data = realloc(m->data, cap);
		CHECK(m->data, "out of memory");
		m->cap = cap;
	}
	memcpy(m->data + m->len, buf, len);
	m->len += len;
	return 0;
}

/* A set of record payloads. */
struct recset {
	uint8_t **data;
	size_t *len;
	size_t n, cap;
};

static void recset_add(struct recset *rs, const void *data, size_t len)
{
	if (rs->n == rs->cap) {
		rs->cap = rs->cap ? rs->cap * 2 : 64;
		rs->data = realloc(rs->data, rs->cap * sizeof(*rs->data));
		rs->len = realloc(rs->len, rs->cap * sizeof(*rs->len));
		CHECK(rs->data && rs->len, "out of memory");
	}
	rs->data[rs->n] = malloc(len ? len : 1);
	CHECK(rs->data[rs->n], "out of memory");
	if (len)
		memcpy(rs->data[rs->n], data, len);
	rs->len[rs->n] = len;
	rs->n++;
}

static void recset_free(struct recset *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		free(rs->data[i]);
	free(rs->data);
	free(rs->len);
	memset(rs, 0, sizeof(*rs));
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* n records of 0..maxlen bytes: half compressible text, half noise. */
static void synth_records(struct recset *rs, size_t n, size_t maxlen, uint64_t seed)
{
	uint64_t s = seed | 1;
	uint8_t *buf = malloc(maxlen + 1);

	cr_assert_not_null(buf);
	for (size_t i = 0; i < n; i++) {
		size_t len = (size_t)(rng_next(&s) % (maxlen + 1));

		for (size_t k = 0; k < len; k++)
			buf[k] = (i & 1) ? (uint8_t)rng_next(&s)
					 : (uint8_t)("podfeed record "[k % 15] + (i % 7));
		recset_add(rs, buf, len);
	}
	free(buf);
}

static void random_bytes(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t s = seed | 1;

	for (size_t k = 0; k < len; k++)
		p[k] = (uint8_t)rng_next(&s);
}

/* Records of a plain TFRecord file, split by hand (not through the code
 * under test). */
static void fixture_records(struct recset *rs, const char *name)
{
	size_t len, pos = 0;
	uint8_t *file = tu_read_file(tu_fixture(name), &len);

	while (pos < len) {
		uint64_t n;

		CHECK(len - pos >= PF_TFR_OVERHEAD, "fixture %s", name);
		n = pf_load_le64(file + pos);
		CHECK(n <= len - pos - PF_TFR_OVERHEAD, "fixture %s", name);
		recset_add(rs, file + pos + PF_TFR_HEADER_SIZE, (size_t)n);
		pos += PF_TFR_OVERHEAD + (size_t)n;
	}
	free(file);
}

/* The TFRecord stream of a record set (what `zstd -dc` must give). */
static uint8_t *framed_stream(const struct recset *rs, size_t *out_len)
{
	size_t total = 0, pos = 0;
	uint8_t *buf;

	for (size_t i = 0; i < rs->n; i++)
		total += rs->len[i] + PF_TFR_OVERHEAD;
	buf = malloc(total ? total : 1);
	cr_assert_not_null(buf);
	for (size_t i = 0; i < rs->n; i++)
		pos += pf_tfr_encode(buf + pos, total - pos, rs->data[i], rs->len[i]);
	cr_assert_eq(pos, total);
	*out_len = total;
	return buf;
}

static void write_shard(struct membuf *m, const struct recset *rs,
			const pf_shard_writer_config *cfg, const pf_schema *schema)
{
	pf_shard_writer *w;
	pf_error err;

	pf_error_clear(&err);
	memset(m, 0, sizeof(*m));
	cr_assert_eq(pf_shard_writer_create(&w, cfg, mem_write, m), 0);
	for (size_t i = 0; i < rs->n; i++) {
		int ret = pf_shard_writer_add(w, rs->data[i], rs->len[i], &err);

		CHECK(ret == 0, "add %zu: %s", i, err.msg);
	}
	if (schema)
		cr_assert_eq(pf_shard_writer_set_schema(w, schema), 0);
	cr_assert_eq(pf_shard_writer_close(w, &err), 0, "close: %s", err.msg);
	cr_assert_eq(pf_shard_writer_records(w), rs->n);
	cr_assert_eq(pf_shard_writer_bytes(w), m->len);
	pf_shard_writer_free(w);
}

/* Parse the way a reader does: the hinted tail first, then what it asks. */
static int64_t parse_tail(pf_shard_index **ix, const uint8_t *file, size_t len,
			  size_t first_tail, pf_error *err)
{
	size_t tail = first_tail < len ? first_tail : len;
	int64_t rc;
	int rounds = 0;

	pf_error_clear(err);
	for (;;) {
		rc = pf_shard_index_parse(ix, file + len - tail, tail, len, err);
		if (rc <= 0)
			return rc;
		CHECK((uint64_t)rc > tail && (uint64_t)rc <= len,
		      "asked for %lld bytes with %zu given of %zu",
		      (long long)rc, tail, len);
		tail = (size_t)rc;
		CHECK(++rounds < 4, "parse keeps asking for more");
	}
}

static pf_shard_index *parse_ok(const uint8_t *file, size_t len)
{
	pf_shard_index *ix = NULL;
	pf_error err;
	int64_t rc = parse_tail(&ix, file, len, 17, &err);

	cr_assert_eq(rc, 0, "parse: %lld %s", (long long)rc, err.msg);
	cr_assert_not_null(ix);
	return ix;
}

static int64_t parse_whole(const uint8_t *file, size_t len, pf_error *err)
{
	pf_shard_index *ix = NULL;
	int64_t rc;

	pf_error_clear(err);
	rc = pf_shard_index_parse(&ix, file, len, len, err);
	CHECK(rc == 0 ? ix != NULL : ix == NULL, "rc %lld", (long long)rc);
	pf_shard_index_free(ix);
	return rc;
}

/* Decode every frame and compare the records with rs, in order. */
static void check_contents(const uint8_t *file, size_t len,
			   const pf_shard_index *ix, const struct recset *rs)
{
	pf_frame_decoder *d;
	uint64_t next = 0, bytes = 0;
	pf_error err;

	cr_assert_eq(pf_frame_decoder_create(&d), 0);
	cr_assert_eq(pf_shard_index_records(ix), rs->n);
	for (uint32_t i = 0; i < pf_shard_index_frames(ix); i++) {
		const pf_frame_info *fi = pf_shard_index_frame(ix, i);
		uint8_t *dst = malloc(fi->uncompressed_size);
		size_t pos = 0;
		int64_t n;

		CHECK(dst, "out of memory");
		CHECK(fi->offset + fi->compressed_size <= len, "frame %u", i);
		CHECK(fi->first_record == next, "frame %u", i);
		pf_error_clear(&err);
		n = pf_frame_decode(d, fi, file + fi->offset, fi->compressed_size,
				    dst, fi->uncompressed_size, &err);
		CHECK(n == fi->uncompressed_size, "frame %u: %s", i, err.msg);
		for (uint32_t r = 0; r < fi->records; r++) {
			pf_record rec;
			int64_t used = pf_tfr_parse(dst + pos, (size_t)n - pos, 0,
						    PF_MAX_RECORD_DEFAULT, &rec, &err);

			CHECK(used > 0, "frame %u record %u: %s", i, r, err.msg);
			CHECK(next < rs->n, "frame %u", i);
			CHECK(rec.len == rs->len[next], "record %llu",
			      (unsigned long long)next);
			CHECK(!rs->len[next] ||
			      !memcmp(rec.data, rs->data[next], rs->len[next]),
			      "record %llu differs", (unsigned long long)next);
			CHECK(pf_shard_index_find_record(ix, next) == i,
			      "record %llu", (unsigned long long)next);
			pos += (size_t)used;
			next++;
		}
		CHECK(pos == (size_t)n, "frame %u holds more than its records", i);
		bytes += (uint64_t)n;
		free(dst);
	}
	cr_assert_eq(next, rs->n);
	cr_assert_eq(pf_shard_index_uncompressed_bytes(ix), bytes);
	cr_assert_eq(pf_shard_index_find_record(ix, rs->n), -1);
	pf_frame_decoder_free(d);
}

/* zstd -dc of the file must be the TFRecord stream of rs, byte for byte. */
static void check_zstd_cli(const uint8_t *file, size_t len, const struct recset *rs)
{
	const char *dir = tu_tmpdir();
	char path[256], outp[256];
	uint8_t *want, *got;
	size_t want_len, got_len;

	snprintf(path, sizeof(path), "%s/shard.tfrecord.zst", dir);
	snprintf(outp, sizeof(outp), "%s/out.tfrecord", dir);
	tu_write_file(path, file, len);
	cr_assert_eq(tu_system("zstd -q -dc '%s' > '%s'", path, outp), 0,
		     "zstd -dc rejected the shard");
	cr_assert_eq(tu_system("zstd -q -t '%s'", path), 0);
	want = framed_stream(rs, &want_len);
	got = tu_read_file(outp, &got_len);
	cr_assert_eq(got_len, want_len);
	cr_assert(!want_len || !memcmp(got, want, want_len));
	free(want);
	free(got);
	tu_system("rm -rf '%s'", dir);
}

/* The seek table as written: n entries {compressed, decompressed}. */
static uint32_t seek_count(const uint8_t *file, size_t len)
{
	return pf_load_le32(file + len - PF_SEEKTABLE_FOOTER);
}

static void seek_entry(const uint8_t *file, size_t len, uint32_t i,
		       uint32_t *csize, uint32_t *usize)
{
	uint32_t n = seek_count(file, len);
	const uint8_t *e = file + len - PF_SEEKTABLE_FOOTER - (size_t)n * 8 + (size_t)i * 8;

	*csize = pf_load_le32(e);
	*usize = pf_load_le32(e + 4);
}

/* Check the bytes between frames are skippable padding frames and the
 * seek table agrees (as zstd's seekable decoder would read it). */
static void check_layout(const uint8_t *file, size_t len, const pf_shard_index *ix)
{
	uint32_t n = pf_shard_index_frames(ix);
	uint64_t sum = 0;

	cr_assert_eq(seek_count(file, len), n);
	cr_assert_eq(file[len - 5], 0, "seek table descriptor");
	for (uint32_t i = 0; i < n; i++) {
		const pf_frame_info *fi = pf_shard_index_frame(ix, i);
		uint64_t end = i + 1 < n ? pf_shard_index_frame(ix, i + 1)->offset
					 : pf_shard_index_data_end(ix);
		uint32_t cs, us;

		seek_entry(file, len, i, &cs, &us);
		CHECK(sum == fi->offset, "seek table sum at frame %u", i);
		CHECK(us == fi->uncompressed_size, "frame %u", i);
		CHECK(pf_load_le32(file + fi->offset) == PF_ZSTD_MAGIC, "frame %u", i);
		CHECK(pf_crc32c(0, file + fi->offset, fi->compressed_size) ==
		      fi->crc32c, "frame %u", i);
		if (fi->offset + fi->compressed_size < end) {
			uint64_t pad = end - fi->offset - fi->compressed_size;
			const uint8_t *p = file + fi->offset + fi->compressed_size;

			CHECK(pad >= 8, "padding after frame %u", i);
			CHECK(pf_load_le32(p) == PF_SKIP_PADDING, "padding after frame %u", i);
			CHECK(pf_load_le32(p + 4) == pad - 8, "padding after frame %u", i);
		}
		sum += cs;
	}
	cr_assert_eq(sum, pf_shard_index_data_end(ix));
	cr_assert_eq(pf_load_le32(file + pf_shard_index_data_end(ix)), PF_SKIP_INDEX);
}

/* Write, parse, check layout and contents. */
static void roundtrip(const struct recset *rs, const pf_shard_writer_config *cfg,
		      struct membuf *m, pf_shard_index **ix_out)
{
	pf_shard_index *ix;

	write_shard(m, rs, cfg, NULL);
	ix = parse_ok(m->data, m->len);
	check_layout(m->data, m->len, ix);
	check_contents(m->data, m->len, ix, rs);
	if (ix_out)
		*ix_out = ix;
	else
		pf_shard_index_free(ix);
}

/* ------------------------------------------------------------------ */
/* Round trips                                                          */
/* ------------------------------------------------------------------ */

Test(shard, synthetic_default_frames)
{
	struct recset rs = { 0 };
	struct membuf m;
	pf_shard_index *ix;

	synth_records(&rs, 3000, 2000, 42);
	roundtrip(&rs, NULL, &m, &ix);
	cr_assert_geq(pf_shard_index_frames(ix), 2);
	cr_assert_eq(pf_shard_index_alignment(ix), 0);
	for (uint32_t i = 0; i < pf_shard_index_frames(ix); i++)
		cr_assert_leq(pf_shard_index_frame(ix, i)->uncompressed_size,
			      PF_SHARD_FRAME_DEFAULT);
	pf_shard_index_free(ix);
	check_zstd_cli(m.data, m.len, &rs);
	free(m.data);
	recset_free(&rs);
}

Test(shard, tiny_frames_one_record_each)
{
	struct recset rs = { 0 };
	pf_shard_writer_config cfg = { .frame_size = 1 };
	struct membuf m;
	pf_shard_index *ix;

	synth_records(&rs, 200, 300, 7);
	roundtrip(&rs, &cfg, &m, &ix);
	cr_assert_eq(pf_shard_index_frames(ix), 200);
	for (uint32_t i = 0; i < 200; i++) {
		CHECK(pf_shard_index_frame(ix, i)->records == 1, "frame %u", i);
		CHECK(pf_shard_index_frame(ix, i)->first_record == i, "frame %u", i);
	}
	pf_shard_index_free(ix);
	check_zstd_cli(m.data, m.len, &rs);
	free(m.data);
	recset_free(&rs);
}

Test(shard, record_larger_than_frame)
{
	struct recset rs = { 0 };
	pf_shard_writer_config cfg = { .frame_size = 4096 };
	struct membuf m;
	pf_shard_index *ix;
	uint8_t *big = malloc(100000);
	int found = 0;

	random_bytes(big, 100000, 9);
	synth_records(&rs, 50, 200, 3);
	recset_add(&rs, big, 100000);
	synth_records(&rs, 50, 200, 4);
	roundtrip(&rs, &cfg, &m, &ix);
	for (uint32_t i = 0; i < pf_shard_index_frames(ix); i++) {
		const pf_frame_info *fi = pf_shard_index_frame(ix, i);

		if (fi->uncompressed_size > 4096) {
			cr_assert_eq(fi->records, 1);
			cr_assert_eq(fi->first_record, 50);
			cr_assert_eq(fi->uncompressed_size, 100000 + PF_TFR_OVERHEAD);
			found++;
		}
	}
	cr_assert_eq(found, 1);
	pf_shard_index_free(ix);
	check_zstd_cli(m.data, m.len, &rs);
	free(big);
	free(m.data);
	recset_free(&rs);
}

Test(shard, mnist_fixture)
{
	struct recset rs = { 0 };
	pf_shard_writer_config small = { .frame_size = 64 << 10, .level = 1 };
	struct membuf m;
	pf_shard_index *ix;

	fixture_records(&rs, "tfx_mnist_1000.tfrecord");
	cr_assert_eq(rs.n, 1000);
	roundtrip(&rs, NULL, &m, NULL);
	check_zstd_cli(m.data, m.len, &rs);
	free(m.data);
	roundtrip(&rs, &small, &m, &ix);
	cr_assert_gt(pf_shard_index_frames(ix), 5);
	pf_shard_index_free(ix);
	free(m.data);
	recset_free(&rs);
}

Test(shard, aligned_frames)
{
	struct recset rs = { 0 };
	pf_shard_writer_config cfg = { .frame_size = 32 << 10, .align = 4096 };
	struct membuf m;
	pf_shard_index *ix;

	fixture_records(&rs, "tfx_mnist_1000.tfrecord");
	roundtrip(&rs, &cfg, &m, &ix);
	cr_assert_eq(pf_shard_index_alignment(ix), 4096);
	cr_assert_gt(pf_shard_index_frames(ix), 5);
	for (uint32_t i = 0; i < pf_shard_index_frames(ix); i++)
		CHECK(pf_shard_index_frame(ix, i)->offset % 4096 == 0,
			     "frame %u at %llu", i,
			     (unsigned long long)pf_shard_index_frame(ix, i)->offset);
	pf_shard_index_free(ix);
	check_zstd_cli(m.data, m.len, &rs);
	free(m.data);
	recset_free(&rs);
}

/*
 * Incompressible records make frames whose size we steer, so the gaps
 * before the next boundary cover 0 (no padding) and 1..7 (too small for a
 * skippable frame: padding reaches the boundary after).
 */
Test(shard, aligned_small_gaps)
{
	bool saw_zero = false, saw_small = false;
	uint8_t *rec = malloc(8192);

	for (size_t len = 4040; len <= 4090; len++) {
		struct recset rs = { 0 };
		pf_shard_writer_config cfg = { .frame_size = 1, .align = 4096 };
		struct membuf m;
		pf_shard_index *ix;
		const pf_frame_info *f0, *f1;
		uint64_t gap;

		random_bytes(rec, len, len);
		recset_add(&rs, rec, len);
		recset_add(&rs, rec, 100);
		roundtrip(&rs, &cfg, &m, &ix);
		f0 = pf_shard_index_frame(ix, 0);
		f1 = pf_shard_index_frame(ix, 1);
		cr_assert_eq(f1->offset % 4096, 0);
		gap = 4096 - f0->compressed_size % 4096;
		if (gap == 4096) {
			saw_zero = true;
			cr_assert_eq(f1->offset, f0->compressed_size);
		} else if (gap < 8) {
			saw_small = true;
			cr_assert_eq(f1->offset, f0->compressed_size + gap + 4096);
			check_zstd_cli(m.data, m.len, &rs);
		}
		pf_shard_index_free(ix);
		free(m.data);
		recset_free(&rs);
	}
	cr_assert(saw_zero && saw_small, "frame sizes did not cover the edge gaps");
	free(rec);
}

Test(shard, empty_shard)
{
	struct recset rs = { 0 };
	pf_shard_writer_config cfg = { .align = 4096 };
	struct membuf m;
	pf_shard_index *ix;

	roundtrip(&rs, NULL, &m, &ix);
	cr_assert_eq(pf_shard_index_frames(ix), 0);
	cr_assert_eq(pf_shard_index_records(ix), 0);
	cr_assert_eq(pf_shard_index_data_end(ix), 0);
	cr_assert_eq(pf_shard_index_find_record(ix, 0), -1);
	cr_assert_null(pf_shard_index_frame(ix, 0));
	pf_shard_index_free(ix);
	check_zstd_cli(m.data, m.len, &rs);
	free(m.data);
	roundtrip(&rs, &cfg, &m, NULL);
	free(m.data);
}

Test(shard, empty_records)
{
	struct recset rs = { 0 };
	struct membuf m;

	for (int i = 0; i < 100; i++)
		recset_add(&rs, "", 0);
	roundtrip(&rs, NULL, &m, NULL);
	check_zstd_cli(m.data, m.len, &rs);
	free(m.data);
	/* (NULL, 0) is an empty record too. */
	{
		pf_shard_writer *w;
		pf_shard_index *ix;

		memset(&m, 0, sizeof(m));
		cr_assert_eq(pf_shard_writer_create(&w, NULL, mem_write, &m), 0);
		cr_assert_eq(pf_shard_writer_add(w, NULL, 0, NULL), 0);
		cr_assert_eq(pf_shard_writer_close(w, NULL), 0);
		pf_shard_writer_free(w);
		ix = parse_ok(m.data, m.len);
		cr_assert_eq(pf_shard_index_records(ix), 1);
		cr_assert_eq(pf_shard_index_uncompressed_bytes(ix), PF_TFR_OVERHEAD);
		pf_shard_index_free(ix);
	}
	free(m.data);
	recset_free(&rs);
}

Test(shard, tail_protocol)
{
	struct recset rs = { 0 };
	pf_shard_writer_config cfg = { .frame_size = 1 };
	struct membuf m;
	pf_shard_index *ix = NULL;
	pf_error err;
	int64_t rc;

	/* 5000 frames: index and seek table are well over 17 bytes. */
	synth_records(&rs, 5000, 20, 11);
	write_shard(&m, &rs, &cfg, NULL);
	rc = pf_shard_index_parse(&ix, m.data + m.len - 17, 17, m.len, &err);
	cr_assert_eq(rc, 8 + 5000 * 8 + 9 + 12);	/* and a version 2 trailer */
	rc = pf_shard_index_parse(&ix, m.data + m.len - rc, (size_t)rc, m.len, &err);
	cr_assert_gt(rc, 8 + 5000 * 8 + 9 + 8);
	rc = pf_shard_index_parse(&ix, m.data + m.len - rc, (size_t)rc, m.len, &err);
	cr_assert_eq(rc, 0, "%s", err.msg);
	pf_shard_index_free(ix);
	/* The hint is enough for a small shard. */
	rc = parse_tail(&ix, m.data, m.len, PF_SHARD_TAIL_HINT, &err);
	cr_assert_eq(rc, 0);
	pf_shard_index_free(ix);
	/* Shorter than the footer. */
	rc = pf_shard_index_parse(&ix, m.data + m.len - 3, 3, m.len, &err);
	cr_assert_eq(rc, 17);
	cr_assert_eq(pf_shard_index_parse(&ix, m.data, m.len, m.len - 1, &err), -EINVAL);
	free(m.data);
	recset_free(&rs);
}

Test(shard, schema_in_index)
{
	struct recset rs = { 0 };
	struct membuf m;
	pf_schema *s;
	pf_shard_index *ix;
	int64_t vals[3] = { 1, 2, 3 };
	float fl[2] = { 1.5f, 2.5f };
	pf_feature feats[2] = {
		{ .name = "label", .name_len = 5, .kind = PF_KIND_INT64,
		  .count = 3, .v.int64s = vals },
		{ .name = "weight", .name_len = 6, .kind = PF_KIND_FLOAT,
		  .count = 2, .v.floats = fl },
	};
	pf_example ex = { .features = feats, .n_features = 2 };

	cr_assert_eq(pf_schema_create(&s), 0);
	cr_assert_eq(pf_schema_add(s, &ex), 0);
	ex.n_features = 1;
	feats[0].count = 1;
	cr_assert_eq(pf_schema_add(s, &ex), 0);
	synth_records(&rs, 10, 100, 5);
	write_shard(&m, &rs, NULL, s);
	ix = parse_ok(m.data, m.len);
	cr_assert_eq(pf_shard_index_schema_count(ix), pf_schema_count(s));
	cr_assert_gt(pf_schema_count(s), 0);
	for (size_t i = 0; i < pf_schema_count(s); i++) {
		const pf_feature_schema *a = pf_schema_get(s, i);
		const pf_feature_schema *b = pf_shard_index_schema(ix, i);

		cr_assert_str_eq(a->name, b->name);
		cr_assert_eq(a->kind, b->kind);
		cr_assert_eq(a->is_list, b->is_list);
		cr_assert_eq(a->records_present, b->records_present);
		cr_assert_eq(a->records_unset, b->records_unset);
		cr_assert_eq(a->total_values, b->total_values);
		cr_assert_eq(a->min_len, b->min_len);
		cr_assert_eq(a->max_len, b->max_len);
	}
	cr_assert_null(pf_shard_index_schema(ix, pf_schema_count(s)));
	pf_shard_index_free(ix);
	pf_schema_free(s);
	free(m.data);
	recset_free(&rs);
}

/* ------------------------------------------------------------------ */
/* Writer errors                                                        */
/* ------------------------------------------------------------------ */

Test(shard, writer_bad_config)
{
	pf_shard_writer *w;
	struct membuf m = { 0 };
	pf_shard_writer_config bad_align = { .align = 1000 };
	pf_shard_writer_config small_align = { .align = 2048 };
	pf_shard_writer_config bad_level = { .level = 1000 };

	cr_assert_eq(pf_shard_writer_create(&w, &bad_align, mem_write, &m), -EINVAL);
	cr_assert_eq(pf_shard_writer_create(&w, &small_align, mem_write, &m), -EINVAL);
	cr_assert_eq(pf_shard_writer_create(&w, &bad_level, mem_write, &m), -EINVAL);
	cr_assert_eq(pf_shard_writer_create(&w, NULL, NULL, &m), -EINVAL);
	pf_shard_writer_free(NULL);
}

Test(shard, writer_record_too_large)
{
	pf_shard_writer *w;
	struct membuf m = { 0 };
	pf_shard_writer_config cfg = { .max_record_size = 100 };
	uint8_t rec[101] = { 0 };
	pf_error err;
	pf_shard_index *ix;

	pf_error_clear(&err);
	cr_assert_eq(pf_shard_writer_create(&w, &cfg, mem_write, &m), 0);
	cr_assert_eq(pf_shard_writer_add(w, rec, 101, &err), -EFBIG);
	cr_assert_eq(pf_shard_writer_add(w, rec, 100, &err), 0);
	cr_assert_eq(pf_shard_writer_close(w, &err), 0);
	pf_shard_writer_free(w);
	ix = parse_ok(m.data, m.len);
	cr_assert_eq(pf_shard_index_records(ix), 1);
	pf_shard_index_free(ix);
	free(m.data);
}

Test(shard, writer_sink_failure)
{
	struct recset rs = { 0 };
	pf_shard_writer_config cfg = { .frame_size = 1000 };

	synth_records(&rs, 100, 100, 2);
	/* Fail each write in turn: the error comes back and sticks. */
	for (int fail = 1; fail < 40; fail++) {
		pf_shard_writer *w;
		struct membuf m = { .fail_after = fail };
		pf_error err;
		int ret = 0;

		pf_error_clear(&err);
		cr_assert_eq(pf_shard_writer_create(&w, &cfg, mem_write, &m), 0);
		for (size_t i = 0; i < rs.n && !ret; i++)
			ret = pf_shard_writer_add(w, rs.data[i], rs.len[i], &err);
		if (!ret)
			ret = pf_shard_writer_close(w, &err);
		if (m.writes >= fail) {
			cr_assert_eq(ret, -EIO, "write %d", fail);
			cr_assert_eq(err.code, -EIO);
			cr_assert_eq(pf_shard_writer_close(w, &err), -EIO);
		}
		pf_shard_writer_free(w);
		free(m.data);
	}
	recset_free(&rs);
}

/* ------------------------------------------------------------------ */
/* Malformed shards                                                     */
/* ------------------------------------------------------------------ */

static void small_shard(struct membuf *m, struct recset *rs, uint32_t align)
{
	pf_shard_writer_config cfg = { .frame_size = 2000, .align = align };

	synth_records(rs, 60, 300, 77);
	write_shard(m, rs, &cfg, NULL);
}

Test(shard_bad, not_a_shard)
{
	pf_error err;
	size_t len;
	uint8_t *plain = tu_read_file(tu_fixture("tfx_mnist_1000.tfrecord"), &len);
	const char *dir = tu_tmpdir();
	char path[256];
	uint8_t *zst;
	size_t zlen;

	cr_assert_eq(parse_whole(plain, len, &err), -ENODATA);
	cr_assert(strstr(err.msg, "seekable footer"), "%s", err.msg);
	cr_assert_eq(parse_whole(plain, 10, &err), -ENODATA);
	cr_assert_eq(parse_whole(plain, 0, &err), -ENODATA);
	/* A .zst made by the CLI has no seek table. */
	snprintf(path, sizeof(path), "%s/x.tfrecord", dir);
	tu_write_file(path, plain, len);
	cr_assert_eq(tu_system("zstd -q -f '%s' -o '%s.zst'", path, path), 0);
	strcat(path, ".zst");
	zst = tu_read_file(path, &zlen);
	cr_assert_eq(parse_whole(zst, zlen, &err), -ENODATA);
	free(zst);
	free(plain);
	tu_system("rm -rf '%s'", dir);
}

Test(shard_bad, seekable_without_podfeed_index)
{
	struct recset rs = { 0 };
	struct membuf m;
	pf_shard_index *ix;
	uint8_t *f;
	size_t st_len, len;
	pf_error err;

	small_shard(&m, &rs, 0);
	ix = parse_ok(m.data, m.len);
	/* data frames + seek table: what zstd's seekable tools write. */
	st_len = 8 + (size_t)pf_shard_index_frames(ix) * 8 + 9;
	len = (size_t)pf_shard_index_data_end(ix) + st_len;
	f = malloc(len);
	memcpy(f, m.data, (size_t)pf_shard_index_data_end(ix));
	memcpy(f + pf_shard_index_data_end(ix), m.data + m.len - st_len, st_len);
	cr_assert_eq(parse_whole(f, len, &err), -ENODATA);
	cr_assert(strstr(err.msg, "no podfeed index"), "%s", err.msg);
	/* A seek table with reserved descriptor bits is not ours either. */
	f[len - 5] = 0x04;
	cr_assert_eq(parse_whole(f, len, &err), -ENODATA);
	free(f);
	pf_shard_index_free(ix);
	free(m.data);
	recset_free(&rs);
}

Test(shard_bad, truncated_everywhere)
{
	for (uint32_t align = 0; align <= 4096; align += 4096) {
		struct recset rs = { 0 };
		struct membuf m;
		pf_error err;

		small_shard(&m, &rs, align);
		for (size_t cut = 0; cut < m.len; cut++) {
			int64_t rc = parse_whole(m.data, cut, &err);

			CHECK(rc == -ENODATA || rc == -EBADMSG,
			      "cut at %zu of %zu: %lld", cut, m.len, (long long)rc);
			/* And with only the tail a reader would read first. */
			if (cut > 64) {
				pf_shard_index *ix = NULL;

				rc = parse_tail(&ix, m.data, cut, 64, &err);
				CHECK(rc == -ENODATA || rc == -EBADMSG,
				      "tail read, cut at %zu: %lld", cut, (long long)rc);
			}
		}
		free(m.data);
		recset_free(&rs);
	}
}

/* Flip every bit of the index and seek table: parsing never crashes; when
 * the index still parses, it decodes to the right records or a frame
 * fails its CRC check. */
Test(shard_bad, bitflips_in_tail)
{
	struct recset rs = { 0 };
	struct membuf m;
	pf_shard_index *good;
	pf_frame_decoder *d;
	size_t start;
	unsigned rejected = 0, accepted = 0;

	small_shard(&m, &rs, 0);
	good = parse_ok(m.data, m.len);
	start = (size_t)pf_shard_index_data_end(good);
	cr_assert_eq(pf_frame_decoder_create(&d), 0);
	for (size_t byte = start; byte < m.len; byte++) {
		for (int bit = 0; bit < 8; bit++) {
			pf_shard_index *ix = NULL;
			pf_error err;
			int64_t rc;

			m.data[byte] ^= (uint8_t)(1u << bit);
			pf_error_clear(&err);
			rc = pf_shard_index_parse(&ix, m.data, m.len, m.len, &err);
			CHECK(rc == 0 || rc == -ENODATA || rc == -EBADMSG ||
			      rc == -EPROTONOSUPPORT || rc == -EFBIG,
			      "byte %zu bit %d: %lld", byte, bit, (long long)rc);
			if (rc < 0) {
				CHECK(err.msg[0], "no message for byte %zu", byte);
				rejected++;
			} else {
				accepted++;
				for (uint32_t i = 0; i < pf_shard_index_frames(ix); i++) {
					const pf_frame_info *fi = pf_shard_index_frame(ix, i);
					const pf_frame_info *gi = pf_shard_index_frame(good, i);
					uint8_t *dst = malloc(fi->uncompressed_size + 1);
					int64_t n = pf_frame_decode(d, fi, m.data + fi->offset,
								    fi->compressed_size, dst,
								    fi->uncompressed_size, &err);

					if (n >= 0)
						CHECK(!memcmp(fi, gi, sizeof(*fi)),
						      "byte %zu bit %d: frame %u decoded from a changed index",
						      byte, bit, i);
					else
						CHECK(n == -EBADMSG, "byte %zu bit %d", byte, bit);
					free(dst);
				}
				pf_shard_index_free(ix);
			}
			m.data[byte] ^= (uint8_t)(1u << bit);
		}
	}
	/* Only a few bits may go unnoticed by parsing (CRC values, schema
	 * counts, the descriptor's unused bits). */
	cr_assert_gt(rejected, accepted * 4, "rejected %u accepted %u", rejected, accepted);
	pf_frame_decoder_free(d);
	pf_shard_index_free(good);
	free(m.data);
	recset_free(&rs);
}

Test(shard_bad, bitflips_in_frames)
{
	struct recset rs = { 0 };
	struct membuf m;
	pf_shard_index *ix;
	pf_frame_decoder *d;

	small_shard(&m, &rs, 4096);
	ix = parse_ok(m.data, m.len);
	cr_assert_eq(pf_frame_decoder_create(&d), 0);
	for (uint32_t i = 0; i < pf_shard_index_frames(ix); i++) {
		const pf_frame_info *fi = pf_shard_index_frame(ix, i);
		uint8_t *dst = malloc(fi->uncompressed_size);

		for (uint32_t k = 0; k < fi->compressed_size; k += 7) {
			uint8_t *p = m.data + fi->offset + k;
			pf_error err;
			int64_t n;

			*p ^= (uint8_t)(1u << (k % 8));
			pf_error_clear(&err);
			n = pf_frame_decode(d, fi, m.data + fi->offset,
					    fi->compressed_size, dst,
					    fi->uncompressed_size, &err);
			CHECK(n == -EBADMSG, "frame %u byte %u", i, k);
			CHECK(strstr(err.msg, "frame CRC mismatch"), "%s", err.msg);
			CHECK(err.offset_kind == PF_OFFSET_FILE, "frame %u", i);
			CHECK(err.offset == fi->offset, "frame %u", i);
			*p ^= (uint8_t)(1u << (k % 8));
		}
		free(dst);
	}
	pf_frame_decoder_free(d);
	pf_shard_index_free(ix);
	free(m.data);
	recset_free(&rs);
}

Test(shard_bad, decode_arguments)
{
	struct recset rs = { 0 };
	struct membuf m;
	pf_shard_index *ix;
	pf_frame_decoder *d;
	pf_frame_info fi;
	uint8_t *dst;
	pf_error err;

	small_shard(&m, &rs, 0);
	ix = parse_ok(m.data, m.len);
	fi = *pf_shard_index_frame(ix, 1);
	dst = malloc(fi.uncompressed_size + 100);
	cr_assert_eq(pf_frame_decoder_create(&d), 0);
	pf_error_clear(&err);
	cr_assert_eq(pf_frame_decode(d, &fi, m.data + fi.offset, fi.compressed_size,
				     dst, fi.uncompressed_size - 1, &err), -ENOBUFS);
	cr_assert_eq(pf_frame_decode(d, &fi, m.data + fi.offset, fi.compressed_size - 1,
				     dst, fi.uncompressed_size, &err), -EINVAL);
	cr_assert_eq(pf_frame_decode(d, &fi, m.data + fi.offset, fi.compressed_size,
				     dst, fi.uncompressed_size + 100, &err),
		     fi.uncompressed_size);
	/* An index lying about the content size is caught before inflating. */
	fi.uncompressed_size += 16;
	cr_assert_eq(pf_frame_decode(d, &fi, m.data + fi.offset, fi.compressed_size,
				     dst, fi.uncompressed_size + 100, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "content size"), "%s", err.msg);
	cr_assert_eq(err.offset, fi.offset);
	/* A valid CRC over bytes that are not a zstd frame. */
	fi = *pf_shard_index_frame(ix, 1);
	{
		uint8_t *junk = malloc(fi.compressed_size);

		memset(junk, 0xa5, fi.compressed_size);
		fi.crc32c = pf_crc32c(0, junk, fi.compressed_size);
		cr_assert_eq(pf_frame_decode(d, &fi, junk, fi.compressed_size, dst,
					     fi.uncompressed_size, &err), -EBADMSG);
		free(junk);
	}
	pf_frame_decoder_free(d);
	pf_shard_index_free(ix);
	free(dst);
	free(m.data);
	recset_free(&rs);
}

/* Forging: unpack the index of a good shard, change it, repack it and
 * splice it back between the data and the seek table. */
typedef void (*forge_fn)(Podfeed__ShardIndex *pb);

static uint8_t *forge(const struct membuf *m, forge_fn fn, size_t *out_len)
{
	pf_shard_index *ix = parse_ok(m->data, m->len);
	size_t data_end = (size_t)pf_shard_index_data_end(ix);
	size_t st_len = 8 + (size_t)pf_shard_index_frames(ix) * 8 + 9;
	size_t pb_len = pf_load_le32(m->data + m->len - st_len - 8);
	Podfeed__ShardIndex *pb;
	size_t new_pb, len;
	uint8_t *f;

	pb = podfeed__shard_index__unpack(NULL, pb_len, m->data + data_end + 8);
	cr_assert_not_null(pb);
	fn(pb);
	new_pb = podfeed__shard_index__get_packed_size(pb);
	len = data_end + 8 + new_pb + 8 + st_len;
	f = malloc(len);
	memcpy(f, m->data, data_end);
	pf_store_le32(f + data_end, PF_SKIP_INDEX);
	pf_store_le32(f + data_end + 4, (uint32_t)(new_pb + 8));
	podfeed__shard_index__pack(pb, f + data_end + 8);
	pf_store_le32(f + data_end + 8 + new_pb, (uint32_t)new_pb);
	pf_store_le32(f + data_end + 12 + new_pb, PF_INDEX_TRAILER_MAGIC);
	memcpy(f + len - st_len, m->data + m->len - st_len, st_len);
	podfeed__shard_index__free_unpacked(pb, NULL);
	pf_shard_index_free(ix);
	*out_len = len;
	return f;
}

static void expect_forged(forge_fn fn, int code, const char *what)
{
	struct recset rs = { 0 };
	struct membuf m;
	pf_error err;
	size_t len;
	uint8_t *f;
	int64_t rc;

	small_shard(&m, &rs, 0);
	f = forge(&m, fn, &len);
	rc = parse_whole(f, len, &err);
	cr_assert_eq(rc, code, "%s: got %lld (%s)", what, (long long)rc, err.msg);
	cr_assert(strstr(err.msg, what), "wanted \"%s\" in \"%s\"", what, err.msg);
	cr_assert_eq(err.offset_kind, PF_OFFSET_FILE);
	cr_assert_lt(err.offset, len);
	free(f);
	free(m.data);
	recset_free(&rs);
}

static void forge_nothing(Podfeed__ShardIndex *pb) { (void)pb; }
static void forge_past_end(Podfeed__ShardIndex *pb)
{
	pb->frame_offset[pb->n_frame_offset - 1] = pb->data_end + 100;
}
static void forge_overlap(Podfeed__ShardIndex *pb)
{
	pb->frame_compressed_size[1] += 50;
}
static void forge_last_past_end(Podfeed__ShardIndex *pb)
{
	pb->frame_compressed_size[pb->n_frame_compressed_size - 1] += 1;
}
static void forge_not_increasing(Podfeed__ShardIndex *pb)
{
	pb->frame_offset[2] = pb->frame_offset[1];
}
static void forge_decreasing(Podfeed__ShardIndex *pb)
{
	uint64_t t = pb->frame_offset[1];

	pb->frame_offset[1] = pb->frame_offset[2];
	pb->frame_offset[2] = t;
}
static void forge_frame_records(Podfeed__ShardIndex *pb)
{
	pb->frame_records[1] += 1;
}
static void forge_total_records(Podfeed__ShardIndex *pb)
{
	pb->records += 1;
}
static void forge_total_bytes(Podfeed__ShardIndex *pb)
{
	pb->uncompressed_bytes -= 1;
}
static void forge_first_record(Podfeed__ShardIndex *pb)
{
	pb->frame_first_record[2] -= 1;
}
static void forge_too_many_records(Podfeed__ShardIndex *pb)
{
	uint32_t extra = pb->frame_uncompressed_size[0] / 16 + 1 - pb->frame_records[0];

	pb->frame_records[0] += extra;
	pb->records += extra;
	for (size_t i = 1; i < pb->n_frame_first_record; i++)
		pb->frame_first_record[i] += extra;
}
static void forge_zero_records(Podfeed__ShardIndex *pb)
{
	pb->records -= pb->frame_records[0];
	for (size_t i = 1; i < pb->n_frame_first_record; i++)
		pb->frame_first_record[i] -= pb->frame_records[0];
	pb->frame_records[0] = 0;
}
static void forge_huge_frame(Podfeed__ShardIndex *pb)
{
	pb->frame_uncompressed_size[0] = (1u << 30) + 1;
}
static void forge_future(Podfeed__ShardIndex *pb)
{
	pb->version = PF_SHARD_VERSION + 1;
}
static void forge_no_version(Podfeed__ShardIndex *pb)
{
	pb->version = 0;
}
static void forge_short_array(Podfeed__ShardIndex *pb)
{
	pb->n_frame_crc32c -= 1;
}
static void forge_data_end(Podfeed__ShardIndex *pb)
{
	pb->data_end -= 1;
}
static void forge_alignment(Podfeed__ShardIndex *pb)
{
	pb->alignment = 3000;
}
static void forge_misaligned(Podfeed__ShardIndex *pb)
{
	pb->alignment = 4096;
}
static void forge_schema_kind(Podfeed__ShardIndex *pb)
{
	/* Heap-allocated: the forger frees the message with free(). */
	Podfeed__FeatureSchema *fs = malloc(sizeof(*fs));

	podfeed__feature_schema__init(fs);
	fs->name = strdup("x");
	fs->kind = 9;
	pb->n_schema = 1;
	pb->schema = malloc(sizeof(*pb->schema));
	pb->schema[0] = fs;
}

Test(shard_bad, forged_indexes)
{
	struct recset rs = { 0 };
	struct membuf m;
	size_t len;
	uint8_t *f;
	pf_shard_index *ix;

	/* The forging itself keeps a good index good. */
	small_shard(&m, &rs, 0);
	f = forge(&m, forge_nothing, &len);
	ix = parse_ok(f, len);
	cr_assert_gt(pf_shard_index_frames(ix), 3);
	check_contents(f, len, ix, &rs);
	pf_shard_index_free(ix);
	free(f);
	free(m.data);
	recset_free(&rs);

	expect_forged(forge_past_end, -EBADMSG, "past the end of data");
	expect_forged(forge_overlap, -EBADMSG, "overlaps the next frame");
	expect_forged(forge_last_past_end, -EBADMSG, "runs past the end of data");
	expect_forged(forge_not_increasing, -EBADMSG, "not increasing");
	expect_forged(forge_decreasing, -EBADMSG, "not increasing");
	expect_forged(forge_frame_records, -EBADMSG, "first record");
	expect_forged(forge_total_records, -EBADMSG, "record counts sum");
	expect_forged(forge_total_bytes, -EBADMSG, "uncompressed bytes");
	expect_forged(forge_first_record, -EBADMSG, "first record");
	expect_forged(forge_too_many_records, -EBADMSG, "record count");
	expect_forged(forge_zero_records, -EBADMSG, "record count");
	expect_forged(forge_huge_frame, -EBADMSG, "above the limit");
	expect_forged(forge_future, -EPROTONOSUPPORT, "newer");
	expect_forged(forge_no_version, -EBADMSG, "version");
	expect_forged(forge_short_array, -EBADMSG, "do not match the seek table");
	expect_forged(forge_data_end, -EBADMSG, "data_end");
	expect_forged(forge_alignment, -EBADMSG, "alignment");
	expect_forged(forge_misaligned, -EBADMSG, "multiple of the alignment");
	expect_forged(forge_schema_kind, -EBADMSG, "schema");
}

Test(shard_bad, forged_frame_error_names_frame)
{
	struct recset rs = { 0 };
	struct membuf m;
	pf_error err;
	size_t len;
	uint8_t *f = NULL;

	small_shard(&m, &rs, 0);
	f = forge(&m, forge_overlap, &len);
	cr_assert_eq(parse_whole(f, len, &err), -EBADMSG);
	cr_assert_eq(err.frame, 1);
	free(f);
	free(m.data);
	recset_free(&rs);
}

/* Raw edits of the trailing bytes: lengths and counts. */
Test(shard_bad, tail_fields)
{
	struct recset rs = { 0 };
	struct membuf m;
	pf_shard_index *ix;
	size_t st_len, trailer;
	pf_error err;
	uint8_t *f;

	small_shard(&m, &rs, 0);
	ix = parse_ok(m.data, m.len);
	st_len = 8 + (size_t)pf_shard_index_frames(ix) * 8 + 9;
	trailer = m.len - st_len - 8;
	f = malloc(m.len);

	/* Huge index length: past the start of the file. */
	memcpy(f, m.data, m.len);
	pf_store_le32(f + trailer, 0xfffffff0u);
	cr_assert_eq(parse_whole(f, m.len, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "index length"), "%s", err.msg);
	cr_assert_eq(err.offset, trailer);
	/* Index length disagreeing with the frame header. */
	memcpy(f, m.data, m.len);
	pf_store_le32(f + trailer, pf_load_le32(f + trailer) - 1);
	cr_assert_eq(parse_whole(f, m.len, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "index frame header"), "%s", err.msg);
	/* Seek table frame count beyond the file. */
	memcpy(f, m.data, m.len);
	pf_store_le32(f + m.len - 9, 0x7fffffffu);
	cr_assert_eq(parse_whole(f, m.len, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "larger than the file"), "%s", err.msg);
	/* Seek table frame count disagreeing with its frame size. */
	memcpy(f, m.data, m.len);
	pf_store_le32(f + m.len - 9, pf_load_le32(f + m.len - 9) - 1);
	cr_assert_eq(parse_whole(f, m.len, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "seek table frame header"), "%s", err.msg);
	/* Seek table entry disagreeing with the index. */
	memcpy(f, m.data, m.len);
	pf_store_le32(f + m.len - st_len + 8 + 8, pf_load_le32(f + m.len - st_len + 8 + 8) + 1);
	cr_assert_eq(parse_whole(f, m.len, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "seek table disagrees"), "%s", err.msg);
	cr_assert_eq(err.offset, pf_shard_index_frame(ix, 1)->offset);
	/* Protobuf garbage. */
	memcpy(f, m.data, m.len);
	memset(f + pf_shard_index_data_end(ix) + 8, 0xff, 16);
	cr_assert_eq(parse_whole(f, m.len, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "index CRC mismatch"), "%s", err.msg);
	free(f);
	pf_shard_index_free(ix);
	free(m.data);
	recset_free(&rs);
}

/* An index larger than PF_SHARD_MAX_INDEX in a (claimed) huge file is
 * refused before anything is read or allocated. */
Test(shard_bad, index_over_limit)
{
	/* The reader asks for a version 2 trailer (12 bytes) up front. */
	uint8_t whole[4 + 8 + 9 + 8] = { 0 }, *tail = whole + 4;
	pf_shard_index *ix = NULL;
	pf_error err;
	int64_t rc;

	pf_store_le32(tail, PF_SKIP_SEEKTABLE);
	pf_store_le32(tail + 4, 9);
	/* trailer of the index frame before the seek table */
	memmove(tail + 8, tail, 8);
	pf_store_le32(tail, (uint32_t)(PF_SHARD_MAX_INDEX));
	pf_store_le32(tail + 4, PF_INDEX_TRAILER_MAGIC);
	pf_store_le32(tail + 16, 0);
	tail[20] = 0;
	pf_store_le32(tail + 21, PF_SEEKABLE_MAGIC);
	pf_error_clear(&err);
	rc = pf_shard_index_parse(&ix, whole, sizeof(whole), 1ull << 32, &err);
	cr_assert_eq(rc, -EFBIG, "%lld %s", (long long)rc, err.msg);
	cr_assert(strstr(err.msg, "above the limit"), "%s", err.msg);
	/* Same for a seek table of too many frames. */
	pf_store_le32(tail + 16, PF_SHARD_MAX_INDEX / 8);
	rc = pf_shard_index_parse(&ix, whole, sizeof(whole), 1ull << 32, &err);
	cr_assert_eq(rc, -EFBIG, "%lld %s", (long long)rc, err.msg);
	cr_assert_null(ix);
}
