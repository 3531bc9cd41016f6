/* SPDX-License-Identifier: Apache-2.0 */
/* TFRecord framing: one-shot and incremental, every truncation and bit
 * flip, the record size limit. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pf_formats.h"
#include "testutil.h"

static const char *morris[] = { "1", "1 1", "2 1", "1 2 1 1", "1 1 1 2 2 1" };
static const uint64_t morris_off[] = { 0, 17, 36, 55, 78 };

/* Read everything from buf fed in pieces of `piece` bytes. */
static int read_pieces(const uint8_t *buf, size_t len, size_t piece,
		       pf_record *out, size_t max_out, size_t *count, pf_error *err)
{
	pf_tfr_reader *r;
	int ret = 0;

	cr_assert_eq(pf_tfr_reader_create(&r, NULL), 0);
	*count = 0;
	for (size_t pos = 0; pos < len && ret >= 0; pos += piece) {
		size_t n = len - pos < piece ? len - pos : piece;
		pf_record rec;

		pf_tfr_reader_feed(r, buf + pos, n);
		while ((ret = pf_tfr_reader_next(r, &rec, err)) == 1) {
			cr_assert_lt(*count, max_out);
			/* Copy: views die with the next call. */
			uint8_t *copy = malloc(rec.len + 1);
			memcpy(copy, rec.data, rec.len);
			copy[rec.len] = 0;
			rec.data = copy;
			out[(*count)++] = rec;
		}
	}
	if (ret >= 0)
		ret = pf_tfr_reader_finish(r, err);
	pf_tfr_reader_free(r);
	return ret;
}

static void free_records(pf_record *recs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free((void *)recs[i].data);
}

Test(tfrecord, morris_fixture_in_every_piece_size)
{
	size_t len;
	uint8_t *buf = tu_read_file(tu_fixture("grain_morris_sequence_first_5.tfrecord"), &len);

	cr_assert_eq(len, 105);
	for (size_t piece = 1; piece <= len; piece++) {
		pf_record recs[8];
		size_t n;
		pf_error err;

		pf_error_clear(&err);
		cr_assert_eq(read_pieces(buf, len, piece, recs, 8, &n, &err), 0,
			     "piece %zu: %s", piece, err.msg);
		cr_assert_eq(n, 5);
		for (size_t i = 0; i < 5; i++) {
			cr_assert_eq(recs[i].len, strlen(morris[i]));
			cr_assert_arr_eq(recs[i].data, morris[i], recs[i].len);
			cr_assert_eq(recs[i].offset, morris_off[i]);
			cr_assert_eq(recs[i].index, i);
		}
		free_records(recs, n);
	}
	free(buf);
}

Test(tfrecord, zero_copy_when_contiguous)
{
	size_t len;
	uint8_t *buf = tu_read_file(tu_fixture("grain_morris_sequence_first_5.tfrecord"), &len);
	pf_tfr_reader *r;
	pf_record rec;
	pf_error err;

	cr_assert_eq(pf_tfr_reader_create(&r, NULL), 0);
	pf_tfr_reader_feed(r, buf, len);
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(pf_tfr_reader_next(r, &rec, &err), 1);
		cr_assert(rec.data >= buf && rec.data < buf + len, "record %d copied", i);
	}
	cr_assert_eq(pf_tfr_reader_next(r, &rec, &err), 0);
	cr_assert_eq(pf_tfr_reader_finish(r, &err), 0);
	pf_tfr_reader_free(r);
	free(buf);
}

Test(tfrecord, truncated_at_every_offset)
{
	size_t len;
	uint8_t *buf = tu_read_file(tu_fixture("grain_morris_sequence_first_5.tfrecord"), &len);

	for (size_t cut = 0; cut < len; cut++) {
		pf_record recs[8];
		size_t n, whole = 0;
		pf_error err;
		int ret;

		while (whole < 5 && (whole + 1 < 5 ? morris_off[whole + 1] : len) <= cut)
			whole++;
		pf_error_clear(&err);
		ret = read_pieces(buf, cut, 7, recs, 8, &n, &err);
		cr_assert_eq(n, whole, "cut %zu", cut);
		free_records(recs, n);
		if (cut == (whole < 5 ? morris_off[whole] : len)) {
			cr_assert_eq(ret, 0, "cut %zu on a boundary", cut);
			continue;
		}
		cr_assert_eq(ret, -EBADMSG, "cut %zu", cut);
		cr_assert_eq(err.offset, morris_off[whole], "cut %zu", cut);
		cr_assert_eq(err.offset_kind, PF_OFFSET_STREAM);
		if (cut - morris_off[whole] < PF_TFR_HEADER_SIZE)
			cr_assert(strstr(err.msg, "truncated header"), "%s", err.msg);
		else
			cr_assert(strstr(err.msg, "truncated body"), "%s", err.msg);
	}
	free(buf);
}

Test(tfrecord, every_single_bit_flip_is_caught_at_its_record)
{
	size_t len;
	uint8_t *buf = tu_read_file(tu_fixture("grain_morris_sequence_first_5.tfrecord"), &len);

	for (size_t bit = 0; bit < len * 8; bit++) {
		pf_record recs[8];
		size_t n, rec = 0;
		pf_error err;
		int ret;

		while (rec + 1 < 5 && morris_off[rec + 1] <= bit / 8)
			rec++;
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		pf_error_clear(&err);
		ret = read_pieces(buf, len, len, recs, 8, &n, &err);
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		free_records(recs, n);
		cr_assert_lt(ret, 0, "bit %zu went unnoticed", bit);
		cr_assert_eq(n, rec, "bit %zu: records before the damage", bit);
		cr_assert_eq(err.offset, morris_off[rec], "bit %zu: %s", bit, err.msg);
		cr_assert(strstr(err.msg, "CRC") || strstr(err.msg, "too large") ||
			  strstr(err.msg, "truncated"), "bit %zu: %s", bit, err.msg);
	}
	free(buf);
}

Test(tfrecord, huge_length_with_good_crc_is_refused_before_allocating)
{
	uint8_t hdr[PF_TFR_HEADER_SIZE + 4] = { 0 };
	uint64_t huge = 1ull << 40;
	pf_tfr_config cfg = { .max_record_size = 1 << 20 };
	pf_tfr_reader *r;
	pf_record rec;
	pf_error err;

	memcpy(hdr, &huge, 8);
	uint32_t c = pf_crc32c_mask(pf_crc32c(0, hdr, 8));
	memcpy(hdr + 8, &c, 4);

	pf_error_clear(&err);
	cr_assert_eq(pf_tfr_parse(hdr, sizeof(hdr), 100, 1 << 20, &rec, &err), -EFBIG);
	cr_assert_eq(err.offset, 100);
	cr_assert(strstr(err.msg, "record too large"), "%s", err.msg);

	/* Through the incremental reader, fed one byte at a time: the
	 * limit holds before any buffer is sized from the length. */
	cr_assert_eq(pf_tfr_reader_create(&r, &cfg), 0);
	pf_error_clear(&err);
	int ret = 0;
	for (size_t i = 0; i < sizeof(hdr) && ret == 0; i++) {
		pf_tfr_reader_feed(r, hdr + i, 1);
		ret = pf_tfr_reader_next(r, &rec, &err);
	}
	cr_assert_eq(ret, -EFBIG);
	cr_assert_eq(err.offset, 0);
	/* A poisoned reader refuses to go on until reset. */
	cr_assert_eq(pf_tfr_reader_next(r, &rec, &err), -EINVAL);
	pf_tfr_reader_reset(r, 0, 0);
	cr_assert_eq(pf_tfr_reader_next(r, &rec, &err), 0);
	pf_tfr_reader_free(r);
}

Test(tfrecord, encode_parse_round_trip)
{
	uint8_t payload[300], framed[400];
	pf_record rec;
	pf_error err;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 31);
	for (size_t len = 0; len <= sizeof(payload); len += 37) {
		size_t n = pf_tfr_encode(framed, sizeof(framed), payload, len);
		cr_assert_eq(n, len + PF_TFR_OVERHEAD);
		cr_assert_eq(pf_tfr_parse(framed, n, 0, 1 << 20, &rec, &err), (int64_t)n);
		cr_assert_eq(rec.len, len);
		cr_assert_arr_eq(rec.data, payload, len);
		/* One byte short is "need more", not an error. */
		cr_assert_eq(pf_tfr_parse(framed, n - 1, 0, 1 << 20, &rec, &err), 0);
		cr_assert_eq(pf_tfr_truncation(framed, n - 1, 0, 1 << 20, &err), -EBADMSG);
		cr_assert(strstr(err.msg, "truncated body"), "%s", err.msg);
	}
	cr_assert_eq(pf_tfr_encode(framed, 20, payload, 5), 0);
	cr_assert_eq(pf_tfr_encode(framed, 21, payload, 5), 21);
}

Test(tfrecord, empty_record_and_empty_stream)
{
	uint8_t framed[16];
	pf_record recs[2];
	size_t n;
	pf_error err;

	cr_assert_eq(pf_tfr_encode(framed, sizeof(framed), "", 0), 16);
	cr_assert_eq(read_pieces(framed, 16, 3, recs, 2, &n, &err), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(recs[0].len, 0);
	free_records(recs, n);
	cr_assert_eq(read_pieces(framed, 0, 3, recs, 2, &n, &err), 0);
	cr_assert_eq(n, 0);
}

Test(tfrecord, error_format_names_file_offset_and_record)
{
	pf_error err;
	char line[512];

	pf_error_clear(&err);
	pf_error_set(&err, -EBADMSG, PF_OFFSET_STREAM, 1234, "bad data CRC");
	err.record = 7;
	pf_error_set_file(&err, "data/a.tfrecord.gz");
	pf_error_format(&err, line, sizeof(line));
	cr_assert_str_eq(line, "data/a.tfrecord.gz: decompressed byte 1234: bad data CRC (record 7)");
	/* The first file named sticks. */
	pf_error_set_file(&err, "other");
	cr_assert_str_eq(err.file, "data/a.tfrecord.gz");
	cr_assert_str_eq(pf_strerror(-EFBIG), "larger than the configured limit");
}

/* Inside an already verified frame: the length CRC and bounds are still
 * checked, the data CRC is not. */
Test(tfrecord, parse_verified_skips_only_the_data_crc)
{
	const char payload[] = "a record of some bytes";
	uint8_t buf[64];
	size_t n = pf_tfr_encode(buf, sizeof(buf), payload, sizeof(payload));
	pf_record rec;
	pf_error err;

	cr_assert_eq(n, sizeof(payload) + PF_TFR_OVERHEAD);
	buf[n - 1] ^= 0x01;	/* the data CRC */
	pf_error_clear(&err);
	cr_assert_eq(pf_tfr_parse(buf, n, 0, 1024, &rec, &err), -EBADMSG);
	pf_error_clear(&err);
	cr_assert_eq(pf_tfr_parse_verified(buf, n, 0, 1024, &rec, &err), (int64_t)n);
	cr_assert_eq(rec.len, sizeof(payload));
	cr_assert_eq(memcmp(rec.data, payload, sizeof(payload)), 0);
	/* Short input: need more bytes, as pf_tfr_parse. */
	cr_assert_eq(pf_tfr_parse_verified(buf, n - 1, 0, 1024, &rec, &err), 0);
	cr_assert_eq(pf_tfr_parse_verified(buf, 5, 0, 1024, &rec, &err), 0);
	/* The length CRC and the size limit still hold. */
	buf[n - 1] ^= 0x01;
	buf[8] ^= 0x10;
	pf_error_clear(&err);
	cr_assert_eq(pf_tfr_parse_verified(buf, n, 0, 1024, &rec, &err), -EBADMSG);
	buf[8] ^= 0x10;
	pf_error_clear(&err);
	cr_assert_eq(pf_tfr_parse_verified(buf, n, 0, 8, &rec, &err), -EFBIG);
}

/* Skip mode finds an empty record after damage, zeros or not: header_ok()
 * knows a zero length's CRC without computing it, and that constant must
 * be the one pf_tfr_encode() writes. */
Test(tfrecord, resync_finds_an_empty_record_after_zeros_and_garbage)
{
	static const uint8_t fill[] = { 0x00, 0x5a };
	uint8_t buf[64 + 16 + 17];

	for (size_t k = 0; k < sizeof(fill); k++) {
		memset(buf, fill[k], 64);
		cr_assert_eq(pf_tfr_encode(buf + 64, 16, "", 0), 16);
		cr_assert_eq(pf_tfr_encode(buf + 80, 17, "x", 1), 17);
		cr_assert_eq(pf_tfr_resync(buf, sizeof(buf), 1 << 20, true), 64,
			     "fill 0x%02x", fill[k]);
		/* The zeros themselves are no record: their CRC is not zero's. */
		cr_assert_eq(pf_tfr_resync(buf, 64, 1 << 20, true), 64);
	}
}
