/* SPDX-License-Identifier: Apache-2.0 */
/* The dataset manifest's codec: what is built comes back, and every
 * malformed input (truncated, flipped bits, another version, counts that
 * do not add up, bad paths) is refused with the byte and the cause. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "pf_formats.h"
#include "pf_manifest.pb-c.h"

static const pf_frame_info frames_a[] = {
	{ .offset = 0, .compressed_size = 100, .uncompressed_size = 400, .records = 10,
	  .crc32c = 0x11111111 },
	{ .offset = 4096, .compressed_size = 50, .uncompressed_size = 300, .records = 5,
	  .crc32c = 0x22222222 },
};

/* Three shards (indexed, stream, empty indexed) and a schema. */
static uint8_t *build(size_t *len)
{
	pf_manifest_builder *b;
	pf_error err;
	pf_manifest_shard a = { .path = "a/x.tfrecord.zst", .size = 5000, .mtime_ns = 123456789,
				.format = PF_MANIFEST_INDEXED, .records = 15, .alignment = 4096,
				.nframes = 2, .frames = frames_a };
	pf_manifest_shard s = { .path = "s.tfrecord.gz", .size = 777, .mtime_ns = -5,
				.format = PF_MANIFEST_STREAM, .records = 42, .max_record = 99 };
	pf_manifest_shard e = { .path = "e.zst", .size = 60, .format = PF_MANIFEST_INDEXED };
	pf_feature_schema s1[] = { { .name = "id", .kind = PF_KIND_INT64, .records_present = 10,
				     .total_values = 10, .min_len = 1, .max_len = 1 },
				   { .name = "x", .kind = PF_KIND_FLOAT, .records_present = 10,
				     .total_values = 40, .min_len = 4, .max_len = 4 } };
	pf_feature_schema s2[] = { { .name = "id", .kind = PF_KIND_INT64, .records_present = 5,
				     .total_values = 10, .min_len = 2, .max_len = 2 },
				   { .name = "w", .kind = PF_KIND_BYTES, .records_present = 5,
				     .records_unset = 1, .total_values = 4, .min_len = 0,
				     .max_len = 1 } };
	uint8_t *buf;
	int64_t n;

	pf_error_clear(&err);
	cr_assert_eq(pf_manifest_builder_create(&b), 0);
	cr_assert_eq(pf_manifest_builder_add(b, &a, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_manifest_builder_add(b, &s, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_manifest_builder_add(b, &e, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_manifest_builder_add_schema(b, s1, 2, 10), 0);
	cr_assert_eq(pf_manifest_builder_add_schema(b, s2, 2, 5), 0);
	n = pf_manifest_builder_encode(b, NULL, 0, &err);
	cr_assert_gt(n, PF_MANIFEST_HEADER);
	buf = malloc((size_t)n);
	cr_assert_eq(pf_manifest_builder_encode(b, buf, (size_t)n, &err), n);
	pf_manifest_builder_free(b);
	*len = (size_t)n;
	return buf;
}

Test(manifest, what_is_built_comes_back)
{
	size_t len;
	uint8_t *buf = build(&len);
	pf_manifest *m;
	pf_error err;
	const pf_manifest_shard *s;
	const pf_feature_schema *f;

	pf_error_clear(&err);
	cr_assert_eq(pf_manifest_parse(&m, buf, len, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_manifest_shards(m), 3);
	cr_assert_eq(pf_manifest_records(m), 15 + 42);
	s = pf_manifest_get(m, 0);
	cr_assert_str_eq(s->path, "a/x.tfrecord.zst");
	cr_assert_eq(s->size, 5000);
	cr_assert_eq(s->mtime_ns, 123456789);
	cr_assert_eq(s->format, PF_MANIFEST_INDEXED);
	cr_assert_eq(s->alignment, 4096);
	cr_assert_eq(s->nframes, 2);
	cr_assert_eq(s->frames[1].offset, 4096);
	cr_assert_eq(s->frames[1].compressed_size, 50);
	cr_assert_eq(s->frames[1].uncompressed_size, 300);
	cr_assert_eq(s->frames[1].crc32c, 0x22222222);
	cr_assert_eq(s->frames[1].first_record, 10, "first records are the running sum");
	s = pf_manifest_get(m, 1);
	cr_assert_eq(s->format, PF_MANIFEST_STREAM);
	cr_assert_eq(s->records, 42);
	cr_assert_eq(s->max_record, 99);
	cr_assert_eq(s->mtime_ns, -5);
	cr_assert_eq(pf_manifest_get(m, 2)->nframes, 0);
	cr_assert_null(pf_manifest_get(m, 3));
	/* Merged schema: id from both, x and w from one each, by name. */
	cr_assert_eq(pf_manifest_schema_records(m), 15);
	cr_assert_eq(pf_manifest_schema_count(m), 3);
	f = pf_manifest_schema(m, 0);
	cr_assert_str_eq(f->name, "id");
	cr_assert_eq(f->records_present, 15);
	cr_assert_eq(f->total_values, 20);
	cr_assert_eq(f->min_len, 1);
	cr_assert_eq(f->max_len, 2);
	cr_assert_str_eq(pf_manifest_schema(m, 1)->name, "w");
	cr_assert_eq(pf_manifest_schema(m, 1)->records_unset, 1);
	cr_assert_str_eq(pf_manifest_schema(m, 2)->name, "x");
	pf_manifest_free(m);
	free(buf);
}

Test(manifest, every_truncation_is_refused_with_the_byte)
{
	size_t len;
	uint8_t *buf = build(&len);

	for (size_t n = 0; n < len; n++) {
		pf_manifest *m = NULL;
		pf_error err;

		pf_error_clear(&err);
		cr_assert_eq(pf_manifest_parse(&m, buf, n, &err), -EBADMSG, "length %zu", n);
		cr_assert_null(m);
		cr_assert_eq(err.offset_kind, PF_OFFSET_FILE);
		cr_assert_leq(err.offset, n, "length %zu: byte %llu", n,
			      (unsigned long long)err.offset);
		cr_assert(strstr(err.msg, "truncated") || strstr(err.msg, "magic"),
			  "length %zu: %s", n, err.msg);
	}
	free(buf);
}

Test(manifest, every_flipped_bit_is_refused)
{
	size_t len;
	uint8_t *buf = build(&len);

	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			pf_manifest *m = NULL;
			pf_error err;
			int ret;

			buf[i] ^= (uint8_t)(1u << bit);
			pf_error_clear(&err);
			ret = pf_manifest_parse(&m, buf, len, &err);
			buf[i] ^= (uint8_t)(1u << bit);
			cr_assert(ret == -EBADMSG || ret == -EPROTONOSUPPORT,
				  "byte %zu bit %d: %d", i, bit, ret);
			cr_assert_null(m);
			cr_assert(err.msg[0]);
			cr_assert_eq(err.offset_kind, PF_OFFSET_FILE);
			/* A payload byte is caught by the CRC, named by its
			 * field's offset. */
			if (i >= PF_MANIFEST_HEADER)
				cr_assert_eq(err.offset, 24, "byte %zu: %s", i, err.msg);
		}
	}
	free(buf);
}

Test(manifest, another_version_is_refused_by_name)
{
	size_t len;
	uint8_t *buf = build(&len);
	pf_manifest *m;
	pf_error err;

	buf[4] = PF_MANIFEST_VERSION + 1;
	pf_error_clear(&err);
	cr_assert_eq(pf_manifest_parse(&m, buf, len, &err), -EPROTONOSUPPORT);
	cr_assert_eq(err.offset, 4);
	cr_assert(strstr(err.msg, "newer"), "%s", err.msg);
	buf[4] = 0;
	pf_error_clear(&err);
	cr_assert_eq(pf_manifest_parse(&m, buf, len, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "version 0"), "%s", err.msg);
	free(buf);
}

/* A payload of our own in a correct envelope: what the checks past the
 * CRC see. */
static int parse_payload(const Podfeed__Manifest *pb, pf_error *err)
{
	size_t raw_len = podfeed__manifest__get_packed_size(pb);
	uint8_t *raw = malloc(raw_len + 1);
	size_t bound = ZSTD_compressBound(raw_len);
	uint8_t *blob = malloc(PF_MANIFEST_HEADER + bound);
	size_t clen;
	pf_manifest *m = NULL;
	uint64_t v;
	uint32_t u;
	int ret;

	podfeed__manifest__pack(pb, raw);
	clen = ZSTD_compress(blob + PF_MANIFEST_HEADER, bound, raw, raw_len, 1);
	cr_assert(!ZSTD_isError(clen));
	memcpy(blob, "PFMF", 4);
	u = pb->version;
	memcpy(blob + 4, &u, 4);
	v = raw_len;
	memcpy(blob + 8, &v, 8);
	v = clen;
	memcpy(blob + 16, &v, 8);
	u = pf_crc32c(0, blob + PF_MANIFEST_HEADER, clen);
	memcpy(blob + 24, &u, 4);
	memset(blob + 28, 0, 4);
	pf_error_clear(err);
	ret = pf_manifest_parse(&m, blob, PF_MANIFEST_HEADER + clen, err);
	pf_manifest_free(m);
	free(raw);
	free(blob);
	return ret;
}

/* Two indexed shards of one frame each, consistent. */
typedef struct pb_fixture {
	Podfeed__Manifest pb;
	char *path[2];
	uint64_t size[2], records[2], foff[2], mtime[2] ;
	uint32_t format[2], frames[2], align[2], fcs[2], fus[2], frec[2], fcrc[2];
	uint64_t maxrec[2];
} pb_fixture;

static void fixture(pb_fixture *f)
{
	memset(f, 0, sizeof(*f));
	podfeed__manifest__init(&f->pb);
	f->pb.version = PF_MANIFEST_VERSION;
	f->path[0] = "a";
	f->path[1] = "b";
	for (int i = 0; i < 2; i++) {
		f->size[i] = 1000;
		f->records[i] = 3;
		f->format[i] = PF_MANIFEST_INDEXED;
		f->frames[i] = 1;
		f->fcs[i] = 500;
		f->fus[i] = 600;
		f->frec[i] = 3;
	}
	f->pb.n_path = f->pb.n_size = f->pb.n_mtime_ns = f->pb.n_format = f->pb.n_records = 2;
	f->pb.n_frames = f->pb.n_alignment = f->pb.n_max_record = 2;
	f->pb.n_frame_offset = f->pb.n_frame_compressed_size = 2;
	f->pb.n_frame_uncompressed_size = f->pb.n_frame_records = f->pb.n_frame_crc32c = 2;
	f->pb.path = f->path;
	f->pb.size = f->size;
	f->pb.mtime_ns = (int64_t *)f->mtime;
	f->pb.format = f->format;
	f->pb.records = f->records;
	f->pb.frames = f->frames;
	f->pb.alignment = f->align;
	f->pb.max_record = f->maxrec;
	f->pb.frame_offset = f->foff;
	f->pb.frame_compressed_size = f->fcs;
	f->pb.frame_uncompressed_size = f->fus;
	f->pb.frame_records = f->frec;
	f->pb.frame_crc32c = f->fcrc;
}

#define EXPECT_REFUSED(f, what)                                                          \
	do {                                                                             \
		pf_error err_;                                                           \
		int r_ = parse_payload(&(f).pb, &err_);                                  \
		cr_assert_eq(r_, -EBADMSG, "%s: %d", what, r_);                          \
		cr_assert_eq(err_.offset_kind, PF_OFFSET_FILE);                          \
		cr_assert_eq(err_.offset, PF_MANIFEST_HEADER);                           \
		cr_assert(strstr(err_.msg, what), "expected \"%s\" in: %s", what, err_.msg); \
	} while (0)

Test(manifest, counts_that_do_not_add_up_are_refused)
{
	pb_fixture f;
	pf_error err;

	fixture(&f);
	cr_assert_eq(parse_payload(&f.pb, &err), 0, "%s", err.msg);

	fixture(&f);
	f.pb.n_size = 1;
	EXPECT_REFUSED(f, "shard arrays differ in length");
	fixture(&f);
	f.pb.n_frame_crc32c = 1;
	EXPECT_REFUSED(f, "frame arrays differ in length");
	fixture(&f);
	f.frames[1] = 2;
	EXPECT_REFUSED(f, "count 3 frames in all, the frame arrays hold 2");
	fixture(&f);
	f.records[0] = 4;
	EXPECT_REFUSED(f, "its frames hold 3 records, the entry says 4");
	fixture(&f);
	f.fcs[1] = 1001;
	EXPECT_REFUSED(f, "lies outside the file's 1000 bytes");
	fixture(&f);
	f.frec[0] = 1000;
	f.records[0] = 1000;
	EXPECT_REFUSED(f, "record count 1000 impossible for 600 bytes");
	fixture(&f);
	f.format[1] = 7;
	EXPECT_REFUSED(f, "format 7 is neither");
	fixture(&f);
	f.format[1] = PF_MANIFEST_STREAM;
	EXPECT_REFUSED(f, "a stream file with 1 frames");
	fixture(&f);
	f.align[0] = 100;
	EXPECT_REFUSED(f, "alignment 100 is not a power of two");
	fixture(&f);
	f.pb.version = PF_MANIFEST_VERSION + 1;
	{
		pf_error e;
		cr_assert_eq(parse_payload(&f.pb, &e), -EPROTONOSUPPORT);
	}
}

Test(manifest, bad_paths_are_refused)
{
	pb_fixture f;

	fixture(&f);
	f.path[1] = "a";
	EXPECT_REFUSED(f, "names shard \"a\" twice");
	fixture(&f);
	f.path[0] = "/etc/x";
	EXPECT_REFUSED(f, "is absolute");
	fixture(&f);
	f.path[0] = "d/../../x";
	EXPECT_REFUSED(f, "climbs out");
	fixture(&f);
	f.path[0] = "";
	EXPECT_REFUSED(f, "is empty");
	/* ".." inside a name is not a parent directory. */
	fixture(&f);
	f.path[0] = "a..b/c..";
	{
		pf_error e;
		cr_assert_eq(parse_payload(&f.pb, &e), 0, "%s", e.msg);
	}
}

Test(manifest, the_builder_refuses_what_the_parser_would)
{
	pf_manifest_builder *b;
	pf_error err;
	pf_frame_info fr = { .offset = 0, .compressed_size = 10, .uncompressed_size = 100,
			     .records = 2 };
	pf_manifest_shard s = { .path = "../x", .size = 10, .format = PF_MANIFEST_INDEXED,
				.records = 2, .nframes = 1, .frames = &fr };

	cr_assert_eq(pf_manifest_builder_create(&b), 0);
	pf_error_clear(&err);
	cr_assert_eq(pf_manifest_builder_add(b, &s, &err), -EINVAL);
	cr_assert(strstr(err.msg, "climbs out"), "%s", err.msg);
	s.path = "x";
	s.records = 3;
	pf_error_clear(&err);
	cr_assert_eq(pf_manifest_builder_add(b, &s, &err), -EINVAL);
	cr_assert(strstr(err.msg, "entry says 3"), "%s", err.msg);
	pf_manifest_builder_free(b);
}

/* Tails: each shard's, set right after it is added, come back; a
 * manifest without them says so; some shards with and some without, a
 * tail longer than its shard, tail arrays of another length: refused. */
Test(manifest, tails_come_back_and_hold_together)
{
	pf_manifest_shard a = { .path = "a.zst", .size = 5000, .format = PF_MANIFEST_STREAM,
				.records = 1 };
	pf_manifest_shard b2 = { .path = "b.zst", .size = 10, .format = PF_MANIFEST_STREAM,
				 .records = 1 };
	pf_manifest_builder *b;
	pf_manifest *m;
	pf_error err;
	uint8_t buf[4096];
	uint32_t tl = 1, tc = 1;
	int64_t n;
	size_t len;
	uint8_t *old = build(&len);

	pf_error_clear(&err);
	cr_assert_eq(pf_manifest_parse(&m, old, len, &err), 0, "%s", err.msg);
	cr_assert_not(pf_manifest_shard_tail(m, 0, &tl, &tc), "built without tails");
	pf_manifest_free(m);
	free(old);

	cr_assert_eq(pf_manifest_builder_create(&b), 0);
	cr_assert_eq(pf_manifest_builder_set_tail(b, 1, 2), -EINVAL, "no shard yet");
	cr_assert_eq(pf_manifest_builder_add(b, &a, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_manifest_builder_set_tail(b, 5001, 2), -EINVAL, "longer than it");
	cr_assert_eq(pf_manifest_builder_set_tail(b, 4096, 0xabcdef01), 0);
	cr_assert_eq(pf_manifest_builder_add(b, &b2, &err), 0, "%s", err.msg);
	/* The second without one: all or none. */
	n = pf_manifest_builder_encode(b, buf, sizeof(buf), &err);
	cr_assert_eq(n, -EINVAL, "%lld", (long long)n);
	cr_assert(strstr(err.msg, "1 of the manifest's 2 shards"), "%s", err.msg);
	cr_assert_eq(pf_manifest_builder_set_tail(b, 10, 7), 0);
	pf_error_clear(&err);
	n = pf_manifest_builder_encode(b, buf, sizeof(buf), &err);
	cr_assert_gt(n, 0, "%s", err.msg);
	pf_manifest_builder_free(b);
	cr_assert_eq(pf_manifest_parse(&m, buf, (size_t)n, &err), 0, "%s", err.msg);
	cr_assert(pf_manifest_shard_tail(m, 0, &tl, &tc));
	cr_assert_eq(tl, 4096);
	cr_assert_eq(tc, 0xabcdef01);
	cr_assert(pf_manifest_shard_tail(m, 1, &tl, &tc));
	cr_assert_eq(tl, 10);
	cr_assert_eq(tc, 7);
	cr_assert_not(pf_manifest_shard_tail(m, 2, &tl, &tc));
	pf_manifest_free(m);

	/* What the loader reads: an indexed shard's index to its end (at
	 * most PF_MANIFEST_TAIL_MAX), a stream file's end. */
	cr_assert_eq(pf_manifest_tail_len(100000, 99000), 1000);
	cr_assert_eq(pf_manifest_tail_len(10u << 20, 1), PF_MANIFEST_TAIL_MAX);
	cr_assert_eq(pf_manifest_tail_len(10u << 20, 0), PF_MANIFEST_STREAM_TAIL);
	cr_assert_eq(pf_manifest_tail_len(100, 0), 100);
	cr_assert_eq(pf_manifest_tail_len(0, 0), 0);
}

/* A payload whose tail arrays disagree with its shards, or whose tail is
 * longer than its shard: refused with the payload's byte. */
Test(manifest, bad_tails_are_refused)
{
	Podfeed__Manifest pb = PODFEED__MANIFEST__INIT;
	char *path[1] = { "a.zst" };
	uint64_t size[1] = { 10 }, records[1] = { 1 }, maxrec[1] = { 5 };
	int64_t mtime[1] = { 0 };
	uint32_t format[1] = { PF_MANIFEST_STREAM }, zero[1] = { 0 };
	uint32_t tail_len[2] = { 11, 4 }, tail_crc[2] = { 1, 2 };
	uint8_t raw[512], blob[1024];
	size_t raw_len;
	pf_manifest *m;
	pf_error err;

	pb.version = PF_MANIFEST_VERSION;
	pb.n_path = pb.n_size = pb.n_mtime_ns = pb.n_format = pb.n_records = 1;
	pb.n_frames = pb.n_alignment = pb.n_max_record = 1;
	pb.path = path;
	pb.size = size;
	pb.mtime_ns = mtime;
	pb.format = format;
	pb.records = records;
	pb.frames = zero;
	pb.alignment = zero;
	pb.max_record = maxrec;
	for (int k = 0; k < 2; k++) {
		size_t clen;

		pb.n_tail_len = pb.n_tail_crc32c = k ? 2 : 1;
		pb.tail_len = tail_len;
		pb.tail_crc32c = tail_crc;
		raw_len = podfeed__manifest__pack(&pb, raw);
		/* The envelope, as the builder writes it. */
		clen = ZSTD_compress(blob + PF_MANIFEST_HEADER, sizeof(blob) - PF_MANIFEST_HEADER,
				     raw, raw_len, 3);
		cr_assert(!ZSTD_isError(clen));
		memcpy(blob, "PFMF", 4);
		{
			uint32_t v = PF_MANIFEST_VERSION, crc, z = 0;
			uint64_t rl = raw_len, pl = clen;

			memcpy(blob + 4, &v, 4);
			memcpy(blob + 8, &rl, 8);
			memcpy(blob + 16, &pl, 8);
			crc = pf_crc32c(0, blob + PF_MANIFEST_HEADER, clen);
			memcpy(blob + 24, &crc, 4);
			memcpy(blob + 28, &z, 4);
		}
		pf_error_clear(&err);
		cr_assert_eq(pf_manifest_parse(&m, blob, PF_MANIFEST_HEADER + clen, &err), -EBADMSG,
			     "%s", err.msg);
		cr_assert_eq(err.offset, PF_MANIFEST_HEADER);
		cr_assert(strstr(err.msg, k ? "tail arrays differ" : "a tail of 11 bytes in a file "
					      "of 10"), "%s", err.msg);
	}
}
