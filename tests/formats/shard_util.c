/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the shard tests (shard_util.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"
#include "pf_formats.h"
#include "pf_index.pb-c.h"
#include "shard_util.h"
#include "testutil.h"


int mem_write(void *ctx, const void *buf, size_t len)
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


void recset_add(struct recset *rs, const void *data, size_t len)
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

void recset_free(struct recset *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		free(rs->data[i]);
	free(rs->data);
	free(rs->len);
	memset(rs, 0, sizeof(*rs));
}

uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* n records of 0..maxlen bytes: half compressible text, half noise. */
void synth_records(struct recset *rs, size_t n, size_t maxlen, uint64_t seed)
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

void random_bytes(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t s = seed | 1;

	for (size_t k = 0; k < len; k++)
		p[k] = (uint8_t)rng_next(&s);
}

/* Records of a plain TFRecord file, split by hand (not through the code
 * under test). */
void fixture_records(struct recset *rs, const char *name)
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
uint8_t *framed_stream(const struct recset *rs, size_t *out_len)
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

void write_shard(struct membuf *m, const struct recset *rs,
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
int64_t parse_tail(pf_shard_index **ix, const uint8_t *file, size_t len,
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

pf_shard_index *parse_ok(const uint8_t *file, size_t len)
{
	pf_shard_index *ix = NULL;
	pf_error err;
	int64_t rc = parse_tail(&ix, file, len, 17, &err);

	cr_assert_eq(rc, 0, "parse: %lld %s", (long long)rc, err.msg);
	cr_assert_not_null(ix);
	return ix;
}

int64_t parse_whole(const uint8_t *file, size_t len, pf_error *err)
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
void check_contents(const uint8_t *file, size_t len,
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
void check_zstd_cli(const uint8_t *file, size_t len, const struct recset *rs)
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
uint32_t seek_count(const uint8_t *file, size_t len)
{
	return pf_load_le32(file + len - PF_SEEKTABLE_FOOTER);
}

void seek_entry(const uint8_t *file, size_t len, uint32_t i,
		       uint32_t *csize, uint32_t *usize)
{
	uint32_t n = seek_count(file, len);
	const uint8_t *e = file + len - PF_SEEKTABLE_FOOTER - (size_t)n * 8 + (size_t)i * 8;

	*csize = pf_load_le32(e);
	*usize = pf_load_le32(e + 4);
}

/* Check the bytes between frames are skippable padding frames and the
 * seek table agrees (as zstd's seekable decoder would read it). */
void check_layout(const uint8_t *file, size_t len, const pf_shard_index *ix)
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
void roundtrip(const struct recset *rs, const pf_shard_writer_config *cfg,
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

