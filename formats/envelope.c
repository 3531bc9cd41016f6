/* SPDX-License-Identifier: Apache-2.0 */
/* Envelopes (formats_internal.h says the layouts): the versioned, CRC32C
 * checked wrapping of the blobs podfeed writes for itself, sealed and
 * opened with every check in one place. */
#include <errno.h>
#include <string.h>

#include "zstd_internal.h"

static uint32_t header_size(const pf_envelope_kind *k)
{
	return k->zstd ? PF_ENVELOPE_ZSTD_HEADER : PF_ENVELOPE_STORED_HEADER;
}

/* Where the CRC32C of the payload sits. */
static uint32_t crc_at(const pf_envelope_kind *k)
{
	return k->zstd ? 24 : 12;
}

void pf_envelope_seal(const pf_envelope_kind *k, uint8_t *blob, uint64_t raw_len,
		      uint64_t payload_len)
{
	uint8_t *payload = blob + header_size(k);

	memcpy(blob, k->magic, 4);
	pf_store_le32(blob + 4, k->version);
	if (k->zstd) {
		pf_store_le64(blob + 8, raw_len);
		pf_store_le64(blob + 16, payload_len);
		pf_store_le32(blob + 28, 0);
	} else {
		pf_store_le32(blob + 8, (uint32_t)payload_len);
	}
	pf_store_le32(blob + crc_at(k), pf_crc32c(0, payload, (size_t)payload_len));
}

int64_t pf_envelope_compress(const pf_envelope_kind *k, const void *raw, size_t len,
			     int level, uint8_t **out, pf_error *err)
{
	size_t bound = ZSTD_compressBound(len);
	ZSTD_CCtx *c = NULL;
	uint8_t *blob;
	int64_t n;

	*out = NULL;
	blob = pf_malloc(PF_ENVELOPE_ZSTD_HEADER + bound);
	n = blob ? pf_zstd_cctx_create(&c, level, false) : -ENOMEM;
	if (n < 0) {
		pf_free(blob);
		return pf_error_set(err, (int)n, PF_OFFSET_NONE, 0,
				    n == -ENOMEM ? "no memory to compress a %s of %zu bytes"
						 : "cannot compress a %s of %zu bytes", k->what, len);
	}
	n = pf_zstd_compress(c, blob + PF_ENVELOPE_ZSTD_HEADER, bound, raw, len, 0, err);
	ZSTD_freeCCtx(c);
	if (n < 0) {
		pf_free(blob);
		return n;
	}
	pf_envelope_seal(k, blob, len, (uint64_t)n);
	*out = blob;
	return PF_ENVELOPE_ZSTD_HEADER + n;
}

int pf_envelope_open(const pf_envelope_kind *k, const void *blob, size_t len,
		     pf_envelope_payload *out, pf_error *err)
{
	const uint8_t *p = blob;
	uint32_t hdr = header_size(k), version, crc;
	uint64_t raw_len, payload_len, rest;
	ZSTD_DCtx *d;
	int64_t got;

	memset(out, 0, sizeof(*out));
	if (len < hdr)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, len,
				    "%s truncated: %zu bytes, its header alone is %u", k->what,
				    len, hdr);
	if (memcmp(p, k->magic, 4))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, 0,
				    "not a podfeed %s (magic %02x%02x%02x%02x, not \"%.4s\")",
				    k->what, p[0], p[1], p[2], p[3], k->magic);
	version = pf_load_le32(p + 4);
	if (version > k->version)
		return pf_error_set(err, -EPROTONOSUPPORT, PF_OFFSET_FILE, 4,
				    "%s version %u is newer than this podfeed's %u%s", k->what,
				    version, k->version, k->newer_hint ? k->newer_hint : "");
	if (!version)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, 4, "%s version 0", k->what);
	payload_len = k->zstd ? pf_load_le64(p + 16) : pf_load_le32(p + 8);
	raw_len = k->zstd ? pf_load_le64(p + 8) : payload_len;
	if (raw_len > k->max_raw)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, 8,
				    "%s says its payload is %llu bytes, above the limit of %llu",
				    k->what, (unsigned long long)raw_len,
				    (unsigned long long)k->max_raw);
	rest = len - hdr;
	if (payload_len != rest)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE,
				    payload_len < rest ? hdr + payload_len : len,
				    "%s %s: its header says %llu payload bytes, %llu follow it",
				    k->what, payload_len > rest ? "truncated" :
				    "has bytes past its payload", (unsigned long long)payload_len,
				    (unsigned long long)rest);
	if (k->zstd && pf_load_le32(p + 28))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, 28,
				    "%s header's reserved word is not 0", k->what);
	crc = pf_crc32c(0, p + hdr, (size_t)payload_len);
	if (crc != pf_load_le32(p + crc_at(k)))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, crc_at(k),
				    "%s payload fails its CRC32C (stored %08x, computed %08x "
				    "over %llu bytes): damaged", k->what,
				    pf_load_le32(p + crc_at(k)), crc,
				    (unsigned long long)payload_len);
	out->version = version;
	out->len = (size_t)raw_len;
	if (!k->zstd) {
		out->data = p + hdr;
		return 0;
	}
	out->owned = pf_malloc((size_t)raw_len);
	d = ZSTD_createDCtx_advanced(PF_ZSTD_MEM);
	if (!out->owned || !d) {
		ZSTD_freeDCtx(d);
		pf_free(out->owned);
		out->owned = NULL;
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory for a %s of %llu bytes", k->what,
				    (unsigned long long)raw_len);
	}
	got = pf_zstd_decompress_frame(d, out->owned, (size_t)raw_len, raw_len, p + hdr,
				       (size_t)payload_len, hdr, k->what, err);
	ZSTD_freeDCtx(d);
	if (got < 0) {
		pf_free(out->owned);
		out->owned = NULL;
		return (int)got;
	}
	out->data = out->owned;
	return 0;
}
