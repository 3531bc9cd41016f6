/* SPDX-License-Identifier: Apache-2.0 */
/* Indexed shards that are not what they claim: truncated, bit-flipped and
 * forged indexes and tails, each refused with an error naming the byte. */
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

/* ------------------------------------------------------------------ */
/* The index's CRC32C: one place, one span (issue 40)                   */
/* ------------------------------------------------------------------ */

/* A version 2 index as docs/formats.md ("The index frame") lays it out,
 * from the end: the seek table's start st, then "PFIC" at st - 4, L at
 * st - 8, the CRC at st - 12, the protobuf's L bytes before it and the
 * frame's header {PF_SKIP_INDEX, L + 12} before those. */
struct crc_place {
	size_t header, pb, len, crc;
};

static struct crc_place crc_place(const uint8_t *f, size_t n)
{
	uint32_t frames = pf_load_le32(f + n - 9);
	size_t st = n - (8 + (size_t)frames * ((f[n - 5] & 0x80) ? 12 : 8) + 9);
	struct crc_place c;

	cr_assert_eq(pf_load_le32(f + st - 4), PF_INDEX_TRAILER_MAGIC_CRC);
	c.len = pf_load_le32(f + st - 8);
	c.crc = st - 12;
	c.pb = c.crc - c.len;
	c.header = c.pb - 8;
	cr_assert_eq(pf_load_le32(f + c.header), PF_SKIP_INDEX);
	cr_assert_eq(pf_load_le32(f + c.header + 4), c.len + 12);
	return c;
}

static void expect_crc_error(const uint8_t *f, size_t n, const struct crc_place *c,
			     const char *where)
{
	char want[160];
	pf_error err;

	cr_assert_eq(parse_whole(f, n, &err), -EBADMSG, "%s: %s", where, err.msg);
	snprintf(want, sizeof(want), "stored 0x%08x at byte %zu, over the %zu bytes of the "
		 "protobuf from byte %zu): the shard's index is damaged",
		 pf_load_le32(f + c->crc), c->crc, c->len, c->pb);
	cr_assert(!strncmp(err.msg, "index CRC mismatch (0x", 22), "%s: %s", where, err.msg);
	cr_assert(strstr(err.msg, want), "%s: '%s' does not say '%s'", where, err.msg, want);
	cr_assert_eq(err.offset_kind, PF_OFFSET_FILE);
	cr_assert_eq(err.offset, c->pb, "%s", where);
}

/* The CRC covers the protobuf's bytes, all of them and nothing else, and
 * is read from the one u32 after them: every changed protobuf byte fails
 * it, the error naming both places; the CRC of the changed bytes written
 * there passes; a changed stored CRC fails; bytes around (the header,
 * L, the magic) are other errors, never this one. */
Test(shard_bad, index_crc_one_place_one_span)
{
	struct recset rs = { 0 };
	struct membuf m;
	struct crc_place c;
	pf_shard_index *ix;
	pf_error err;

	small_shard(&m, &rs, 0);
	c = crc_place(m.data, m.len);
	ix = parse_ok(m.data, m.len);
	cr_assert_eq(c.header, pf_shard_index_data_end(ix));
	pf_shard_index_free(ix);
	for (size_t byte = c.pb; byte < c.crc; byte++) {
		uint8_t was = m.data[byte], stored[4];

		m.data[byte] ^= 0x10;
		expect_crc_error(m.data, m.len, &c, "a protobuf byte");
		memcpy(stored, m.data + c.crc, 4);
		pf_store_le32(m.data + c.crc, pf_crc32c(0, m.data + c.pb, c.len));
		pf_error_clear(&err);
		if (parse_whole(m.data, m.len, &err) < 0)
			CHECK(strncmp(err.msg, "index CRC mismatch", 18),
			      "byte %zu: the CRC written at byte %zu fails: %s", byte, c.crc,
			      err.msg);
		memcpy(m.data + c.crc, stored, 4);
		m.data[byte] = was;
	}
	for (size_t byte = c.crc; byte < c.crc + 4; byte++) {
		m.data[byte] ^= 0x01;
		expect_crc_error(m.data, m.len, &c, "the stored CRC");
		m.data[byte] ^= 0x01;
	}
	for (size_t byte = c.header; byte < c.crc + 12; byte++) {
		if (byte >= c.pb && byte < c.crc + 4)
			continue;	/* the protobuf and the CRC: above */
		m.data[byte] ^= 0x01;
		cr_assert_lt(parse_whole(m.data, m.len, &err), 0, "byte %zu", byte);
		cr_assert(strncmp(err.msg, "index CRC mismatch", 18), "byte %zu: %s", byte,
			  err.msg);
		m.data[byte] ^= 0x01;
	}
	cr_assert_eq(parse_whole(m.data, m.len, &err), 0, "%s", err.msg);
	free(m.data);
	recset_free(&rs);
}

/* fuzz_shard's input of issue 40 (corpus/shard/finding-crc_words_in_a_name):
 * a damaged index whose record lengths name a feature holding the words
 * "index CRC mismatch".  The CRC fails, and with the right CRC written
 * where the error says it is stored, the index passes its CRC and is
 * refused for those lengths, quoting the name: a message holding the
 * words, which is not the CRC's error (it does not start with them). */
Test(shard_bad, index_crc_words_quoted_are_not_the_crc_error)
{
	size_t n;
	uint8_t *f = tu_read_file(PF_SOURCE_DIR "/tests/fuzz/corpus/shard/"
				  "finding-crc_words_in_a_name", &n);
	struct crc_place c = crc_place(f, n);
	pf_error err;

	cr_assert_eq(n, 1696);
	cr_assert_eq(c.pb, 1322);
	cr_assert_eq(c.crc, 1603);
	expect_crc_error(f, n, &c, "as found");
	pf_store_le32(f + c.crc, pf_crc32c(0, f + c.pb, c.len));
	cr_assert_eq(parse_whole(f, n, &err), -EBADMSG);
	cr_assert(!strncmp(err.msg, "index: record lengths of '", 26), "%s", err.msg);
	cr_assert(strstr(err.msg, "index CRC mismatch"), "%s", err.msg);
	cr_assert(strstr(err.msg, "the counts end before the shard's last record"), "%s",
		  err.msg);
	cr_assert_eq(err.offset, c.header);
	free(f);
}
