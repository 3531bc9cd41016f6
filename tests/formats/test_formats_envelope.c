/* SPDX-License-Identifier: Apache-2.0 */
/* Envelopes (formats_internal.h): both layouts sealed and opened again,
 * and every truncation, flipped byte, future version and forged length
 * refused with the byte it concerns. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"
#include "testutil.h"

static const pf_envelope_kind stored = {
	.what = "test blob", .magic = { 'T', 'E', 'S', 'T' }, .version = 2,
	.max_raw = 1 << 20,
};
static const pf_envelope_kind packed = {
	.what = "test file", .magic = { 'T', 'Z', 'S', 'T' }, .version = 3, .zstd = true,
	.max_raw = 1 << 20, .newer_hint = " (write it again)",
};

#define PAYLOAD 5000

static void fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 7) % 13);	/* compressible */
}

/* A stored envelope of PAYLOAD bytes in buf; @return its length. */
static size_t make_stored(uint8_t *buf)
{
	fill(buf + PF_ENVELOPE_STORED_HEADER, PAYLOAD);
	pf_envelope_seal(&stored, buf, PAYLOAD, PAYLOAD);
	return PF_ENVELOPE_STORED_HEADER + PAYLOAD;
}

/* A zstd envelope of PAYLOAD bytes (pf_free()); @return its length. */
static size_t make_packed(uint8_t **blob)
{
	uint8_t raw[PAYLOAD];
	pf_error err;
	int64_t n;

	fill(raw, sizeof(raw));
	n = pf_envelope_compress(&packed, raw, sizeof(raw), 3, blob, &err);
	cr_assert_gt(n, PF_ENVELOPE_ZSTD_HEADER, "%s", err.msg);
	cr_assert_lt(n, PAYLOAD / 2, "the payload was compressed");
	return (size_t)n;
}

static void check_payload(const pf_envelope_payload *p, uint32_t version)
{
	uint8_t want[PAYLOAD];

	fill(want, sizeof(want));
	cr_assert_eq(p->len, PAYLOAD);
	cr_assert_eq(p->version, version);
	cr_assert(!memcmp(p->data, want, PAYLOAD), "the payload differs");
}

Test(envelope, stored_round_trip)
{
	uint8_t buf[PF_ENVELOPE_STORED_HEADER + PAYLOAD];
	size_t len = make_stored(buf);
	pf_envelope_payload p;
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_envelope_open(&stored, buf, len, &p, &err), 0, "%s", err.msg);
	check_payload(&p, 2);
	cr_assert_eq(p.data, buf + PF_ENVELOPE_STORED_HEADER, "read in place");
	cr_assert_null(p.owned);
	cr_assert(!memcmp(buf, "TEST", 4));
	cr_assert_eq(pf_load_le32(buf + 8), PAYLOAD);
}

Test(envelope, zstd_round_trip)
{
	uint8_t *blob;
	size_t len = make_packed(&blob);
	pf_envelope_payload p;
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_envelope_open(&packed, blob, len, &p, &err), 0, "%s", err.msg);
	check_payload(&p, 3);
	cr_assert_eq(p.data, p.owned);
	cr_assert_eq(pf_load_le64(blob + 8), PAYLOAD, "the raw length");
	cr_assert_eq(pf_load_le64(blob + 16), len - PF_ENVELOPE_ZSTD_HEADER);
	pf_free(p.owned);
	pf_free(blob);
}

/* Every truncation of blob is refused as corrupt, naming a byte in it,
 * and so is every single flipped bit of the header and payload (the
 * version's aside, which may turn it into a newer or older one). */
static void refuse_damage(const pf_envelope_kind *k, uint8_t *blob, size_t len)
{
	pf_envelope_payload p;
	pf_error err;

	for (size_t n = 0; n < len; n++) {
		pf_error_clear(&err);
		cr_assert_eq(pf_envelope_open(k, blob, n, &p, &err), -EBADMSG,
			     "%zu of %zu bytes: %s", n, len, err.msg);
		cr_assert_eq(err.offset_kind, PF_OFFSET_FILE);
		cr_assert_leq(err.offset, n, "length %zu: byte %llu", n,
			      (unsigned long long)err.offset);
		cr_assert_null(p.owned);
	}
	for (size_t i = 0; i < len; i++) {
		int ret;

		if (i >= 4 && i < 8)
			continue;
		blob[i] ^= 0x10;
		pf_error_clear(&err);
		ret = pf_envelope_open(k, blob, len, &p, &err);
		blob[i] ^= 0x10;
		cr_assert_eq(ret, -EBADMSG, "byte %zu flipped: %d %s", i, ret, err.msg);
		cr_assert(err.msg[0]);
	}
}

Test(envelope, damage_is_refused)
{
	uint8_t buf[PF_ENVELOPE_STORED_HEADER + PAYLOAD], *blob;
	size_t len;

	len = make_stored(buf);
	refuse_damage(&stored, buf, len);
	len = make_packed(&blob);
	refuse_damage(&packed, blob, len);
	pf_free(blob);
}

Test(envelope, crc_names_its_field_and_the_kind)
{
	uint8_t buf[PF_ENVELOPE_STORED_HEADER + PAYLOAD], *blob;
	pf_envelope_payload p;
	pf_error err;
	size_t len = make_stored(buf);

	buf[len - 1] ^= 1;
	cr_assert_eq(pf_envelope_open(&stored, buf, len, &p, &err), -EBADMSG);
	cr_assert_eq(err.offset, 12);
	cr_assert(strstr(err.msg, "test blob payload fails its CRC32C"), "%s", err.msg);
	len = make_packed(&blob);
	blob[len - 1] ^= 1;
	cr_assert_eq(pf_envelope_open(&packed, blob, len, &p, &err), -EBADMSG);
	cr_assert_eq(err.offset, 24);
	cr_assert(strstr(err.msg, "test file payload fails its CRC32C"), "%s", err.msg);
	pf_free(blob);
}

Test(envelope, versions)
{
	uint8_t buf[PF_ENVELOPE_STORED_HEADER + PAYLOAD];
	pf_envelope_payload p;
	pf_error err;
	size_t len = make_stored(buf);

	pf_store_le32(buf + 4, 3);
	cr_assert_eq(pf_envelope_open(&stored, buf, len, &p, &err), -EPROTONOSUPPORT);
	cr_assert_eq(err.offset, 4);
	cr_assert(strstr(err.msg, "test blob version 3 is newer than this podfeed's 2"), "%s",
		  err.msg);
	pf_store_le32(buf + 4, 0);
	cr_assert_eq(pf_envelope_open(&stored, buf, len, &p, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "version 0"), "%s", err.msg);
	pf_store_le32(buf + 4, 1);	/* an older version opens */
	cr_assert_eq(pf_envelope_open(&stored, buf, len, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(p.version, 1);
}

Test(envelope, lengths_past_the_limit_or_the_blob)
{
	uint8_t buf[PF_ENVELOPE_STORED_HEADER + PAYLOAD + 8] = { 0 }, *blob;
	pf_envelope_payload p;
	pf_error err;
	size_t len = make_stored(buf);

	cr_assert_eq(pf_envelope_open(&stored, buf, len + 8, &p, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "has bytes past its payload"), "%s", err.msg);
	cr_assert_eq(err.offset, len);
	pf_store_le32(buf + 8, 2u << 20);
	cr_assert_eq(pf_envelope_open(&stored, buf, len, &p, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "above the limit of 1048576"), "%s", err.msg);
	cr_assert_eq(err.offset, 8);

	/* zstd: the raw length must be what the frame holds. */
	len = make_packed(&blob);
	pf_store_le64(blob + 8, PAYLOAD + 1);
	pf_store_le32(blob + 24, pf_crc32c(0, blob + 32, len - 32));
	cr_assert_eq(pf_envelope_open(&packed, blob, len, &p, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "content size 5000, test file says 5001"), "%s", err.msg);
	cr_assert_null(p.owned);
	pf_store_le64(blob + 8, PAYLOAD);
	pf_store_le32(blob + 28, 1);
	cr_assert_eq(pf_envelope_open(&packed, blob, len, &p, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "reserved word"), "%s", err.msg);
	cr_assert_eq(err.offset, 28);
	pf_free(blob);
}

Test(envelope, out_of_memory_leaks_nothing)
{
	uint8_t *blob;
	size_t len = make_packed(&blob);
	pf_envelope_payload p;
	pf_error err;
	uint64_t live = tu_alloc_live();
	int ret;

	for (uint64_t n = 1;; n++) {
		tu_alloc_fail_at(n);
		ret = pf_envelope_open(&packed, blob, len, &p, &err);
		tu_alloc_fail_at(0);
		if (ret == 0) {
			pf_free(p.owned);
			break;
		}
		cr_assert_eq(ret, -ENOMEM, "allocation %llu: %d %s", (unsigned long long)n, ret,
			     err.msg);
		cr_assert_eq(tu_alloc_live(), live);
		cr_assert_lt(n, 100);
	}
	cr_assert_eq(tu_alloc_live(), live);
	pf_free(blob);
}
