/* SPDX-License-Identifier: Apache-2.0 */
/* The records' lengths in an indexed shard's index (formats/lengths.c):
 * written from the schema (varying int64 and float features only),
 * read back exactly, and every malformed section refused by name. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"
#include "testutil.h"

typedef struct membuf {
	uint8_t *data;
	size_t len, cap;
} membuf;

static int sink(void *ctx, const void *buf, size_t len)
{
	membuf *m = ctx;

	if (m->len + len > m->cap) {
		m->cap = (m->len + len) * 2;
		m->data = realloc(m->data, m->cap);
	}
	memcpy(m->data + m->len, buf, len);
	m->len += len;
	return 0;
}

/* Record r: 'tokens' of r * 7 % 23 int64s (0: absent), 'label' one
 * int64, 'x' 3 floats, 'rare' 2 int64s in records 5 and 9 only, 'text'
 * bytes of r % 4 values. */
static uint32_t tokens_len(uint64_t r)
{
	return (uint32_t)(r * 7 % 23);
}

static membuf shard(uint64_t records, bool with_schema)
{
	pf_shard_writer_config cfg = { .frame_size = 512 };
	pf_shard_writer *w;
	pf_schema *schema;
	membuf m = { 0 };
	pf_arena arena;
	pf_error err;

	cr_assert_eq(pf_shard_writer_create(&w, &cfg, sink, &m), 0);
	cr_assert_eq(pf_schema_create(&schema), 0);
	cr_assert_eq(pf_arena_init(&arena, 1 << 16), 0);
	for (uint64_t r = 0; r < records; r++) {
		int64_t ids[32], label = (int64_t)r, rare[2] = { 1, 2 };
		float x[3] = { 1, 2, 3 };
		pf_bytes b[4] = { { (const uint8_t *)"a", 1 }, { (const uint8_t *)"b", 1 },
				  { (const uint8_t *)"c", 1 }, { (const uint8_t *)"d", 1 } };
		pf_feature f[5];
		uint32_t n = 0;
		uint8_t rec[4096];
		int64_t len;
		pf_example ex;

		for (uint32_t i = 0; i < 32; i++)
			ids[i] = i * 1000 + 1;
		if (tokens_len(r))
			f[n++] = (pf_feature){ .name = "tokens", .name_len = 6, .kind = PF_KIND_INT64,
					       .count = tokens_len(r), .v.int64s = ids };
		f[n++] = (pf_feature){ .name = "label", .name_len = 5, .kind = PF_KIND_INT64,
				       .count = 1, .v.int64s = &label };
		f[n++] = (pf_feature){ .name = "x", .name_len = 1, .kind = PF_KIND_FLOAT,
				       .count = 3, .v.floats = x };
		if (r == 5 || r == 9)
			f[n++] = (pf_feature){ .name = "rare", .name_len = 4,
					       .kind = PF_KIND_INT64, .count = 2,
					       .v.int64s = rare };
		f[n++] = (pf_feature){ .name = "text", .name_len = 4, .kind = PF_KIND_BYTES,
				       .count = (uint32_t)(r % 4), .v.bytes = b };
		len = pf_example_encode(f, n, rec, sizeof(rec));
		cr_assert_gt(len, 0);
		pf_arena_reset(&arena);
		cr_assert_eq(pf_example_decode(rec, (size_t)len, &arena, &ex, &err), 0);
		cr_assert_eq(pf_schema_add(schema, &ex), 0);
		cr_assert_eq(pf_shard_writer_add(w, rec, (size_t)len, &err), 0, "%s", err.msg);
	}
	if (with_schema)
		cr_assert_eq(pf_shard_writer_set_schema(w, schema), 0);
	cr_assert_eq(pf_shard_writer_close(w, &err), 0, "%s", err.msg);
	pf_shard_writer_free(w);
	pf_schema_free(schema);
	pf_arena_release(&arena);
	return m;
}

static pf_shard_index *parse(const membuf *m, pf_error *err, int64_t *ret)
{
	pf_shard_index *ix = NULL;

	pf_error_clear(err);
	*ret = pf_shard_index_parse(&ix, m->data, m->len, m->len, err);
	return ix;
}

Test(lengths, written_for_varying_numbers_and_read_back_exactly)
{
	const uint64_t n = 300;
	membuf m = shard(n, true);
	uint32_t *out = calloc(n, sizeof(*out));
	pf_error err;
	int64_t ret;
	pf_shard_index *ix = parse(&m, &err, &ret);

	cr_assert_eq(ret, 0, "%s", err.msg);
	cr_assert_eq(pf_shard_index_records(ix), n);
	/* tokens: varies, absent (0) in some records. */
	cr_assert_eq(pf_shard_index_lengths(ix, "tokens", out), 0);
	for (uint64_t r = 0; r < n; r++)
		cr_assert_eq(out[r], tokens_len(r), "record %llu", (unsigned long long)r);
	/* rare: two records of 2, the rest absent. */
	cr_assert_eq(pf_shard_index_lengths(ix, "rare", out), 0);
	for (uint64_t r = 0; r < n; r++)
		cr_assert_eq(out[r], r == 5 || r == 9 ? 2u : 0u);
	/* label and x: one count in every record, told by the schema. */
	cr_assert_eq(pf_shard_index_lengths(ix, "label", out), 0);
	for (uint64_t r = 0; r < n; r++)
		cr_assert_eq(out[r], 1);
	cr_assert_eq(pf_shard_index_lengths(ix, "x", out), 0);
	cr_assert_eq(out[n - 1], 3);
	/* bytes are not packed: not told; nor an unknown feature. */
	cr_assert_eq(pf_shard_index_lengths(ix, "text", out), -ENOENT);
	cr_assert_eq(pf_shard_index_lengths(ix, "nope", out), -ENOENT);
	pf_shard_index_free(ix);
	/* Only tokens and rare take room in the index: the fixed ones none. */
	{
		membuf plain = shard(n, false);

		cr_assert_gt(m.len, plain.len + n);
		cr_assert_lt(m.len, plain.len + 2 * n + 600);
		free(plain.data);
	}
	free(out);
	free(m.data);
}

Test(lengths, a_shard_without_a_schema_tells_nothing)
{
	membuf m = shard(40, false);
	uint32_t out[40];
	pf_error err;
	int64_t ret;
	pf_shard_index *ix = parse(&m, &err, &ret);

	cr_assert_eq(ret, 0, "%s", err.msg);
	cr_assert_eq(pf_shard_index_lengths(ix, "tokens", out), -ENOENT);
	cr_assert_eq(pf_shard_index_lengths(ix, "label", out), -ENOENT);
	pf_shard_index_free(ix);
	free(m.data);
}

/* ------------------------------------------------------------------ */
/* Forged sections: the valid shard's index protobuf with RecordLengths
 * entries appended (a protobuf's repeated fields merge), its CRC32C, its
 * length and the frame's size rewritten, so that only the entry is
 * wrong. */

/* A RecordLengths entry (field 14 of ShardIndex): version (omitted when
 * 0), name, counts. */
static size_t entry(uint8_t *out, uint32_t version, const char *name, const uint8_t *counts,
		    size_t ncounts)
{
	uint8_t msg[4096];
	size_t n = 0, k = 0;

	if (version) {
		msg[n++] = 0x08;
		n += pf_varint_put(msg + n, version);
	}
	msg[n++] = 0x12;
	n += pf_varint_put(msg + n, strlen(name));
	memcpy(msg + n, name, strlen(name));
	n += strlen(name);
	msg[n++] = 0x1a;
	n += pf_varint_put(msg + n, ncounts);
	memcpy(msg + n, counts, ncounts);
	n += ncounts;
	out[k++] = 0x72;
	k += pf_varint_put(out + k, n);
	memcpy(out + k, msg, n);
	return k + n;
}

/* m (a version-2 shard) with extra appended to its index's protobuf;
 * v1: the index rewritten as version 1 (no CRC, "PFIX"). */
static membuf forge(const membuf *m, const uint8_t *extra, size_t extra_len, bool v1)
{
	const uint8_t *end = m->data + m->len;
	uint32_t nseek = pf_load_le32(end - 9), desc = end[-5];
	size_t seek_len = 8 + (size_t)nseek * ((desc & 0x80) ? 12 : 8) + 9;
	const uint8_t *seek = end - seek_len;
	uint32_t pb_len = pf_load_le32(seek - 8);
	const uint8_t *ix = seek - 12 - pb_len - 8;
	size_t new_pb = pb_len + extra_len;
	membuf f = { 0 };
	uint8_t w[4];

	cr_assert_eq(pf_load_le32(seek - 4), PF_INDEX_TRAILER_MAGIC_CRC);
	cr_assert_eq(pf_load_le32(ix), PF_SKIP_INDEX);
	sink(&f, m->data, (size_t)(ix - m->data));
	memcpy(w, ix, 4);
	sink(&f, w, 4);
	pf_store_le32(w, (uint32_t)(new_pb + (v1 ? 8 : 12)));
	sink(&f, w, 4);
	sink(&f, ix + 8, pb_len);
	sink(&f, extra, extra_len);
	if (!v1) {
		pf_store_le32(w, pf_crc32c(pf_crc32c(0, ix + 8, pb_len), extra, extra_len));
		sink(&f, w, 4);
	}
	pf_store_le32(w, (uint32_t)new_pb);
	sink(&f, w, 4);
	pf_store_le32(w, v1 ? PF_INDEX_TRAILER_MAGIC : PF_INDEX_TRAILER_MAGIC_CRC);
	sink(&f, w, 4);
	sink(&f, seek, seek_len);
	return f;
}

static void expect_refused(const membuf *base, const uint8_t *extra, size_t n, bool v1,
			   int code, const char *says)
{
	membuf f = forge(base, extra, n, v1);
	pf_error err;
	int64_t ret;
	pf_shard_index *ix = parse(&f, &err, &ret);

	cr_assert_eq(ret, code, "%s: %lld (%s)", says, (long long)ret, err.msg);
	cr_assert_null(ix);
	cr_assert(strstr(err.msg, says), "'%s' does not say '%s'", err.msg, says);
	cr_assert_eq(err.offset_kind, PF_OFFSET_FILE);
	cr_assert_lt(err.offset, base->len);
	free(f.data);
}

Test(lengths, malformed_sections_are_refused_by_name)
{
	membuf m = shard(10, false);	/* 10 records, no lengths of its own */
	uint8_t ten[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, buf[8192], c[64];
	size_t n, k;

	/* The forgery itself is sound: a good entry is read back. */
	{
		membuf f;
		uint32_t out[10];
		pf_error err;
		int64_t ret;
		pf_shard_index *ix;

		n = entry(buf, 1, "tokens", ten, 10);
		f = forge(&m, buf, n, false);
		ix = parse(&f, &err, &ret);
		cr_assert_eq(ret, 0, "%s", err.msg);
		cr_assert_eq(pf_shard_index_lengths(ix, "tokens", out), 0);
		cr_assert_eq(out[0], 1);
		cr_assert_eq(out[9], 10);
		pf_shard_index_free(ix);
		free(f.data);
	}
	n = entry(buf, 2, "tokens", ten, 10);
	expect_refused(&m, buf, n, false, -EPROTONOSUPPORT,
		       "record lengths 0 ('tokens') are of version 2, newer than 1");
	n = entry(buf, 0, "tokens", ten, 10);
	expect_refused(&m, buf, n, false, -EBADMSG,
		       "record lengths 0 ('tokens'): version missing (0)");
	n = entry(buf, 1, "", ten, 10);
	expect_refused(&m, buf, n, false, -EBADMSG,
		       "record lengths 0: a feature name of 0 bytes");
	n = entry(buf, 1, "tokens", ten, 10);
	n += entry(buf + n, 1, "tokens", ten, 10);
	expect_refused(&m, buf, n, false, -EBADMSG,
		       "record lengths 0 and 1 are both of 'tokens'");
	n = entry(buf, 1, "tokens", ten, 9);
	expect_refused(&m, buf, n, false, -EBADMSG,
		       "record lengths of 'tokens': the counts end before the shard's last record "
		       "(byte 9 of 9, 10 records)");
	memcpy(c, ten, 10);
	c[10] = 0;
	n = entry(buf, 1, "tokens", c, 11);
	expect_refused(&m, buf, n, false, -EBADMSG,
		       "record lengths of 'tokens': bytes after the shard's last record's count "
		       "(byte 10 of 11");
	k = pf_varint_put(c, 1ull << 32);
	memcpy(c + k, ten, 9);
	n = entry(buf, 1, "tokens", c, k + 9);
	expect_refused(&m, buf, n, false, -EBADMSG, "record lengths of 'tokens': a count over 2^32 - 1");
	memcpy(c, "\x80\x80\x80\x80\x80\x01", 6);
	memcpy(c + 6, ten, 9);
	n = entry(buf, 1, "tokens", c, 15);
	expect_refused(&m, buf, n, false, -EBADMSG,
		       "record lengths of 'tokens': a count longer than 5 bytes (byte 5 of 15");
	n = entry(buf, 1, "tokens", ten, 10);
	expect_refused(&m, buf, n, true, -EBADMSG,
		       "record lengths in a version-1 index, which has no CRC32C");
	/* A long name. */
	{
		char name[1100];

		memset(name, 'n', sizeof(name) - 1);
		name[sizeof(name) - 1] = 0;
		n = entry(buf, 1, name, ten, 10);
		expect_refused(&m, buf, n, false, -EBADMSG,
			       "a feature name of 1099 bytes (1..1024)");
	}
	free(m.data);
}
