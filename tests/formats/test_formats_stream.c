/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-stream codecs: detection by content, gzip members and headers,
 * zlib, zstd frames and skippable frames, truncation and garbage. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "pf_formats.h"
#include "testutil.h"

/* Build a TFRecord stream of n records "record-<i>" padded to vary sizes. */
static uint8_t *make_stream(int n, size_t *len)
{
	uint8_t *buf = malloc((size_t)n * 2100 + 16), *p = buf;
	char payload[2048];

	for (int i = 0; i < n; i++) {
		size_t pl = (size_t)snprintf(payload, sizeof(payload), "record-%d", i);
		memset(payload + pl, 'a' + i % 26, (size_t)(i * 37) % 1500);
		pl += (size_t)(i * 37) % 1500;
		p += pf_tfr_encode(p, 2100, payload, pl);
	}
	*len = (size_t)(p - buf);
	return buf;
}

static uint8_t *deflate_buf(const uint8_t *in, size_t len, int wbits, size_t *out_len,
			    const char *fname)
{
	z_stream z = { 0 };
	gz_header head = { 0 };
	size_t cap = compressBound(len) + 256;
	uint8_t *out = malloc(cap);

	cr_assert_eq(deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
	if (fname) {
		head.name = (Bytef *)fname;
		cr_assert_eq(deflateSetHeader(&z, &head), Z_OK);
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
	*out_len = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

/* Read all records of a file image fed in pieces; returns 0 or error. */
static int read_all(const uint8_t *file, size_t len, size_t piece, uint64_t *count,
		    uint32_t *crc_chain, pf_compression *comp, pf_error *err)
{
	pf_recstream *s;
	pf_record rec;
	int ret = 0;
	size_t pos = 0;

	cr_assert_eq(pf_recstream_create(&s, NULL), 0);
	*count = 0;
	*crc_chain = 0;
	pf_error_clear(err);
	for (;;) {
		size_t n = len - pos < piece ? len - pos : piece;

		pf_recstream_feed(s, file + pos, n);
		pos += n;
		while ((ret = pf_recstream_next(s, &rec, err)) == 1) {
			cr_assert_eq(rec.index, *count);
			(*count)++;
			*crc_chain = pf_crc32c(*crc_chain, rec.data, rec.len);
		}
		if (ret < 0 || n == 0)
			break;
	}
	if (ret == 0)
		ret = pf_recstream_finish(s, err);
	if (comp)
		*comp = pf_recstream_compression(s);
	pf_recstream_free(s);
	return ret;
}

static void check_same(const uint8_t *file, size_t len, pf_compression want_comp,
		       uint64_t want_n, uint32_t want_crc)
{
	size_t pieces[] = { 1, 5, 12, 13, 4096, 1 << 20 };

	for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
		uint64_t n;
		uint32_t crc;
		pf_compression comp;
		pf_error err;

		cr_assert_eq(read_all(file, len, pieces[k], &n, &crc, &comp, &err), 0,
			     "piece %zu: %s", pieces[k], err.msg);
		cr_assert_eq(comp, want_comp);
		cr_assert_eq(n, want_n, "piece %zu", pieces[k]);
		cr_assert_eq(crc, want_crc, "piece %zu", pieces[k]);
	}
}

static void plain_reference(const uint8_t *plain, size_t len, uint64_t *n, uint32_t *crc)
{
	pf_error err;
	cr_assert_eq(read_all(plain, len, len, n, crc, NULL, &err), 0);
}

Test(stream, plain_gzip_zlib_zstd_agree)
{
	size_t len, glen, zlen, slen;
	uint8_t *plain = make_stream(200, &len);
	uint64_t n;
	uint32_t crc;

	plain_reference(plain, len, &n, &crc);
	cr_assert_eq(n, 200);
	check_same(plain, len, PF_COMP_NONE, n, crc);

	uint8_t *gz = deflate_buf(plain, len, 16 + 15, &glen, NULL);
	check_same(gz, glen, PF_COMP_GZIP, n, crc);
	uint8_t *zl = deflate_buf(plain, len, 15, &zlen, NULL);
	check_same(zl, zlen, PF_COMP_ZLIB, n, crc);

	uint8_t *zs = malloc(ZSTD_compressBound(len));
	slen = ZSTD_compress(zs, ZSTD_compressBound(len), plain, len, 3);
	cr_assert(!ZSTD_isError(slen));
	check_same(zs, slen, PF_COMP_ZSTD, n, crc);
	free(plain);
	free(gz);
	free(zl);
	free(zs);
}

Test(stream, multi_member_gzip_with_file_name_field)
{
	size_t len, l1, l2;
	uint8_t *plain = make_stream(100, &len);
	uint64_t n;
	uint32_t crc;
	/* Split on a record boundary-agnostic byte: members need not align
	 * with records (gzip -c a b > c does not know about records). */
	size_t cut = len / 3 + 5;
	uint8_t *m1 = deflate_buf(plain, cut, 16 + 15, &l1, "data.tfrecord");
	uint8_t *m2 = deflate_buf(plain + cut, len - cut, 16 + 15, &l2, NULL);
	uint8_t *both = malloc(l1 + l2);

	cr_assert_eq(m1[3] & 0x08, 0x08, "FNAME flag set");
	memcpy(both, m1, l1);
	memcpy(both + l1, m2, l2);
	plain_reference(plain, len, &n, &crc);
	check_same(both, l1 + l2, PF_COMP_GZIP, n, crc);
	free(plain);
	free(m1);
	free(m2);
	free(both);
}

Test(stream, zstd_several_frames_and_skippable_frames)
{
	size_t len;
	uint8_t *plain = make_stream(150, &len);
	size_t cap = ZSTD_compressBound(len) * 2 + 64, pos = 0;
	uint8_t *out = malloc(cap);
	uint64_t n;
	uint32_t crc;
	size_t cuts[] = { 0, len / 4, len / 2 + 3, len };

	for (int i = 0; i < 3; i++) {
		size_t r = ZSTD_compress(out + pos, cap - pos, plain + cuts[i],
					 cuts[i + 1] - cuts[i], 1);
		cr_assert(!ZSTD_isError(r));
		pos += r;
		/* A skippable frame of 5 bytes after each data frame. */
		uint32_t magic = 0x184D2A53, size = 5;
		memcpy(out + pos, &magic, 4);
		memcpy(out + pos + 4, &size, 4);
		memset(out + pos + 8, 0xee, 5);
		pos += 13;
	}
	plain_reference(plain, len, &n, &crc);
	check_same(out, pos, PF_COMP_ZSTD, n, crc);
	free(plain);
	free(out);
}

Test(stream, detection_by_content_not_magic_lookalikes)
{
	/* A record of 0x9c78 bytes starts with 78 9c, a valid zlib header. */
	size_t plen = 0x9c78;
	uint8_t *payload = calloc(1, plen), *framed = malloc(plen + 16);
	uint8_t head[4] = { 0x1f, 0x8b, 8, 0 };

	cr_assert_eq(pf_tfr_encode(framed, plen + 16, payload, plen), plen + 16);
	cr_assert_eq(framed[0], 0x78);
	cr_assert_eq(framed[1], 0x9c);
	cr_assert_eq(pf_compression_detect(framed, plen + 16), PF_COMP_NONE);
	cr_assert_eq(pf_compression_detect(head, 4), PF_COMP_GZIP);
	cr_assert_eq(pf_compression_detect("\x78\x9c", 2), PF_COMP_ZLIB);
	cr_assert_eq(pf_compression_detect("\x28\xb5\x2f\xfd", 4), PF_COMP_ZSTD);
	cr_assert_eq(pf_compression_detect("\x5e\x2a\x4d\x18", 4), PF_COMP_ZSTD);
	cr_assert_eq(pf_compression_detect("hello, world!", 13), -ENODATA);
	cr_assert_eq(pf_compression_detect("", 0), PF_COMP_NONE);
	free(payload);
	free(framed);
}

Test(stream, truncated_compressed_streams_are_errors)
{
	size_t len, glen;
	uint8_t *plain = make_stream(50, &len);
	uint8_t *gz = deflate_buf(plain, len, 16 + 15, &glen, NULL);
	uint8_t *zs = malloc(ZSTD_compressBound(len));
	size_t slen = ZSTD_compress(zs, ZSTD_compressBound(len), plain, len, 3);
	uint64_t n;
	uint32_t crc;
	pf_error err;

	for (size_t cut = 1; cut < glen; cut += glen / 37 + 1) {
		int ret = read_all(gz, cut, 4096, &n, &crc, NULL, &err);
		cr_assert_eq(ret, -EBADMSG, "gzip cut at %zu: %d", cut, ret);
		cr_assert(strstr(err.msg, "truncated") || strstr(err.msg, "corrupt"),
			  "%s", err.msg);
		cr_assert_lt(n, 50);
	}
	for (size_t cut = 1; cut < slen; cut += slen / 37 + 1) {
		int ret = read_all(zs, cut, 4096, &n, &crc, NULL, &err);
		cr_assert_eq(ret, -EBADMSG, "zstd cut at %zu: %d", cut, ret);
		cr_assert_lt(n, 50);
	}
	free(plain);
	free(gz);
	free(zs);
}

Test(stream, garbage_is_an_error_with_an_offset)
{
	size_t len, glen;
	uint8_t *plain = make_stream(20, &len);
	uint8_t *gz = deflate_buf(plain, len, 16 + 15, &glen, NULL);
	uint8_t *bad = malloc(glen + 64);
	uint8_t zgarbage[64] = { 0x28, 0xb5, 0x2f, 0xfd };
	uint64_t n;
	uint32_t crc;
	pf_error err;

	/* Garbage zstd: magic then noise. */
	for (int i = 4; i < 64; i++)
		zgarbage[i] = (uint8_t)(i * 97);
	cr_assert_eq(read_all(zgarbage, sizeof(zgarbage), 64, &n, &crc, NULL, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "zstd"), "%s", err.msg);
	cr_assert_eq(err.offset_kind, PF_OFFSET_FILE);

	/* Trailing bytes after the last gzip member that are no member. */
	memcpy(bad, gz, glen);
	memset(bad + glen, 0x55, 64);
	cr_assert_eq(read_all(bad, glen + 64, 4096, &n, &crc, NULL, &err), -EBADMSG);
	cr_assert_eq(n, 20);
	cr_assert_geq(err.offset, glen);

	/* A corrupted deflate body. */
	memcpy(bad, gz, glen);
	for (size_t i = 20; i < 40; i++)
		bad[i] ^= 0xa5;
	cr_assert_lt(read_all(bad, glen, 4096, &n, &crc, NULL, &err), 0);

	/* Not TFRecord and no codec: the framing error at byte 0. */
	cr_assert_eq(read_all((const uint8_t *)"this is not a record file", 25, 25,
			      &n, &crc, NULL, &err), -EBADMSG);
	cr_assert_eq(err.offset, 0);
	cr_assert(strstr(err.msg, "bad length CRC"), "%s", err.msg);
	free(plain);
	free(gz);
	free(bad);
}

Test(stream, tiny_inputs)
{
	uint64_t n;
	uint32_t crc;
	pf_error err;
	uint8_t empty_zstd[32];
	size_t zl = ZSTD_compress(empty_zstd, sizeof(empty_zstd), "", 0, 1);

	cr_assert_eq(read_all((const uint8_t *)"", 0, 1, &n, &crc, NULL, &err), 0);
	cr_assert_eq(n, 0);
	cr_assert_lt(zl, 12);
	cr_assert_eq(read_all(empty_zstd, zl, 1, &n, &crc, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(n, 0);
	cr_assert_eq(read_all((const uint8_t *)"\x05\0\0", 3, 1, &n, &crc, NULL, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "truncated header"), "%s", err.msg);
}

/* How a damaged zstd stream fails must not depend on how its bytes are
 * cut (libzstd alone checks Frame_Content_Size only when a frame is whole
 * in one call, and tries a legacy magic where its input happens to
 * start): both fuzz_stream findings of issue 6. */
Test(stream, zstd_frame_errors_do_not_depend_on_the_cut)
{
	static const uint8_t legacy[] = { 0x27, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0, 0, 0 };
	static const uint8_t empty_sized[] = {
		0x28, 0xb5, 0x2f, 0xfd, 0x60, 0x29, 0x95, 0x01, 0x00, 0x00,
		0x28, 0xb5, 0x2f, 0xfd, 0x60, 0x69, 0x01, 0x01, 0x00, 0x00,
	};
	size_t pieces[] = { 1, 3, 5, 7, 13, 4096, 1 << 20 };
	size_t len, cap, zlen;
	uint8_t *plain = make_stream(40, &len), *zs;
	uint8_t fhd;
	size_t at;
	uint64_t n;
	uint32_t crc;
	pf_error err;

	cap = ZSTD_compressBound(len) + sizeof(legacy);
	zs = malloc(cap);
	zlen = ZSTD_compress(zs, cap, plain, len, 1);
	cr_assert(!ZSTD_isError(zlen));
	cr_assert_eq(ZSTD_getFrameContentSize(zs, zlen), len);

	/* A frame that says one byte more than it holds. */
	fhd = zs[4];
	at = 5 + !((fhd >> 5) & 1) + (size_t[]){ 0, 1, 2, 4 }[fhd & 3];
	zs[at]++;
	cr_assert_eq(ZSTD_getFrameContentSize(zs, zlen), len + 1);
	for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
		cr_assert_eq(read_all(zs, zlen, pieces[k], &n, &crc, NULL, &err), -EBADMSG,
			     "piece %zu", pieces[k]);
		cr_assert(strstr(err.msg, "corrupt zstd data"), "piece %zu: %s", pieces[k],
			  err.msg);
		cr_assert_leq(err.offset, zlen, "piece %zu", pieces[k]);
		cr_assert_lt(n, 40, "piece %zu", pieces[k]);
	}
	zs[at]--;

	/* Frames of no content that say 38,441 and 617 bytes (libzstd has
	 * nothing to check at their last block: ours is the only check). */
	for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
		cr_assert_eq(read_all(empty_sized, sizeof(empty_sized), pieces[k], &n, &crc,
				      NULL, &err), -EBADMSG, "piece %zu", pieces[k]);
		cr_assert(strstr(err.msg, "frame at byte 0 says 38441 bytes of content "
					  "and decodes to 0"), "piece %zu: %s", pieces[k], err.msg);
		cr_assert_eq(err.offset, 10, "piece %zu", pieces[k]);
	}

	/* A good frame, then a zstd v0.7 (legacy) magic. */
	memcpy(zs + zlen, legacy, sizeof(legacy));
	for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
		cr_assert_eq(read_all(zs, zlen + sizeof(legacy), pieces[k], &n, &crc, NULL,
				      &err), -EBADMSG, "piece %zu", pieces[k]);
		cr_assert_eq(n, 40, "piece %zu", pieces[k]);
		cr_assert(strstr(err.msg, "no frame starts here (magic 0xfd2fb527)"),
			  "piece %zu: %s", pieces[k], err.msg);
		cr_assert_eq(err.offset, zlen, "piece %zu", pieces[k]);
	}
	free(plain);
	free(zs);
}
