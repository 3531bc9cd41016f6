/* SPDX-License-Identifier: Apache-2.0 */
/* TFRecord framing: one-shot parse, incremental reader, encoder. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

/*
 * Check a 12-byte header: the length CRC is verified before the length is
 * believed, and the length is checked against the limit before anything
 * is sized from it.  @return 0 with *len, or -errno.
 */
static int check_header(const uint8_t *hdr, uint64_t offset,
			uint64_t max_record, uint64_t *len, pf_error *err)
{
	uint32_t want = pf_load_le32(hdr + 8);
	uint32_t got = pf_crc32c_mask(pf_crc32c(0, hdr, 8));

	if (got != want)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, offset,
				    "bad length CRC (stored 0x%08x, computed 0x%08x)",
				    want, got);
	*len = pf_load_le64(hdr);
	if (*len > max_record)
		return pf_error_set(err, -EFBIG, PF_OFFSET_STREAM, offset,
				    "record too large: %llu bytes, limit %llu",
				    (unsigned long long)*len,
				    (unsigned long long)max_record);
	return 0;
}

static int check_data(const uint8_t *data, uint64_t len, const uint8_t *footer,
		      uint64_t offset, pf_error *err)
{
	uint32_t want = pf_load_le32(footer);
	uint32_t got = pf_crc32c_mask(pf_crc32c(0, data, len));

	if (got != want)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, offset,
				    "bad data CRC (stored 0x%08x, computed 0x%08x, %llu-byte record)",
				    want, got, (unsigned long long)len);
	return 0;
}

/* One record at the start of buf; the data CRC is checked when
 * check_data_crc (pf_tfr_parse_verified() trusts a verified frame). */
static int64_t parse(const uint8_t *p, size_t len, uint64_t base_offset,
		     uint64_t max_record, bool check_data_crc, pf_record *rec,
		     pf_error *err)
{
	uint64_t dlen;
	int ret;

	if (len < PF_TFR_HEADER_SIZE)
		return 0;
	ret = check_header(p, base_offset, max_record, &dlen, err);
	if (ret < 0)
		return ret;
	if (len - PF_TFR_HEADER_SIZE < dlen ||
	    len - PF_TFR_HEADER_SIZE - dlen < PF_TFR_FOOTER_SIZE)
		return 0;
	if (check_data_crc) {
		ret = check_data(p + PF_TFR_HEADER_SIZE, dlen,
				 p + PF_TFR_HEADER_SIZE + dlen, base_offset, err);
		if (ret < 0)
			return ret;
	}
	rec->data = p + PF_TFR_HEADER_SIZE;
	rec->len = dlen;
	rec->offset = base_offset;
	return (int64_t)(dlen + PF_TFR_OVERHEAD);
}

int64_t pf_tfr_parse(const void *buf, size_t len, uint64_t base_offset,
		     uint64_t max_record, pf_record *rec, pf_error *err)
{
	return parse(buf, len, base_offset, max_record, true, rec, err);
}

int64_t pf_tfr_parse_verified(const void *buf, size_t len, uint64_t base_offset,
			      uint64_t max_record, pf_record *rec, pf_error *err)
{
	return parse(buf, len, base_offset, max_record, false, rec, err);
}

int pf_tfr_truncation(const void *buf, size_t len, uint64_t base_offset,
		      uint64_t max_record, pf_error *err)
{
	uint64_t dlen;
	int ret;

	if (len == 0)
		return 0;
	if (len < PF_TFR_HEADER_SIZE)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, base_offset,
				    "truncated header: %zu of %u bytes before end of stream",
				    len, PF_TFR_HEADER_SIZE);
	ret = check_header(buf, base_offset, max_record, &dlen, err);
	if (ret < 0)
		return ret;
	return pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, base_offset,
			    "truncated body: record of %llu bytes needs %llu, stream ends after %zu",
			    (unsigned long long)dlen,
			    (unsigned long long)(dlen + PF_TFR_OVERHEAD), len);
}

size_t pf_tfr_encode(void *dst, size_t cap, const void *data, size_t len)
{
	uint8_t *p = dst;

	if (cap < PF_TFR_OVERHEAD || cap - PF_TFR_OVERHEAD < len)
		return 0;
	pf_store_le64(p, len);
	pf_store_le32(p + 8, pf_crc32c_mask(pf_crc32c(0, p, 8)));
	memcpy(p + PF_TFR_HEADER_SIZE, data, len);
	pf_store_le32(p + PF_TFR_HEADER_SIZE + len,
		      pf_crc32c_mask(pf_crc32c(0, data, len)));
	return len + PF_TFR_OVERHEAD;
}

/* ------------------------------------------------------------------ */

struct pf_tfr_reader {
	uint64_t max_record;
	bool skip_data_crc;
	bool poisoned;
	bool partial;		/* a record straddling buffers is under way */

	const uint8_t *in;	/* fed buffer */
	size_t in_len, in_pos;

	uint64_t offset;	/* stream offset of in[in_pos] */
	uint64_t next_index;	/* number of the next record */

	/* A record straddling fed buffers is assembled here: the header
	 * bytes, then body+footer into scratch once the length is known. */
	uint8_t hdr[PF_TFR_HEADER_SIZE];
	size_t hdr_have;
	uint64_t body_len;	/* valid when hdr_have == 12 */
	uint64_t partial_off;	/* stream offset of the partial record */
	uint8_t *scratch;
	size_t scratch_cap;
	size_t scratch_have;	/* body+footer bytes assembled */
};

int pf_tfr_reader_create(pf_tfr_reader **out, const pf_tfr_config *cfg)
{
	pf_tfr_reader *r = pf_calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->max_record = cfg && cfg->max_record_size ? cfg->max_record_size
						    : PF_MAX_RECORD_DEFAULT;
	r->skip_data_crc = cfg && cfg->skip_data_crc;
	*out = r;
	return 0;
}

void pf_tfr_reader_free(pf_tfr_reader *r)
{
	if (!r)
		return;
	pf_free(r->scratch);
	pf_free(r);
}

void pf_tfr_reader_reset(pf_tfr_reader *r, uint64_t stream_offset,
			 uint64_t first_record)
{
	r->in = NULL;
	r->in_len = r->in_pos = 0;
	r->offset = stream_offset;
	r->next_index = first_record;
	r->hdr_have = 0;
	r->scratch_have = 0;
	r->partial = false;
	r->poisoned = false;
}

void pf_tfr_reader_feed(pf_tfr_reader *r, const void *buf, size_t len)
{
	r->in = buf;
	r->in_len = len;
	r->in_pos = 0;
}

uint64_t pf_tfr_reader_offset(const pf_tfr_reader *r)
{
	return r->offset;
}

static int poison(pf_tfr_reader *r, int code)
{
	r->poisoned = true;
	return code;
}

/* Continue a record that straddles buffers.  @return 1 with a record, 0
 * when more input is needed, <0 on error. */
static int continue_partial(pf_tfr_reader *r, pf_record *rec, pf_error *err)
{
	size_t avail = r->in_len - r->in_pos;
	size_t take;
	int ret;

	if (r->hdr_have < PF_TFR_HEADER_SIZE) {
		take = PF_TFR_HEADER_SIZE - r->hdr_have;
		if (take > avail)
			take = avail;
		memcpy(r->hdr + r->hdr_have, r->in + r->in_pos, take);
		r->hdr_have += take;
		r->in_pos += take;
		r->offset += take;
		avail -= take;
		if (r->hdr_have < PF_TFR_HEADER_SIZE)
			return 0;
		ret = check_header(r->hdr, r->partial_off, r->max_record,
				   &r->body_len, err);
		if (ret < 0)
			return poison(r, ret);
		/* Limit checked above, so this allocation is bounded. */
		if (r->scratch_cap < r->body_len + PF_TFR_FOOTER_SIZE) {
			size_t want = r->body_len + PF_TFR_FOOTER_SIZE;
			uint8_t *s = pf_realloc(r->scratch, want);
			if (!s)
				return poison(r, pf_error_set(err, -ENOMEM,
					PF_OFFSET_STREAM, r->partial_off,
					"no memory for a %llu-byte record",
					(unsigned long long)r->body_len));
			r->scratch = s;
			r->scratch_cap = want;
		}
		r->scratch_have = 0;
	}
	take = r->body_len + PF_TFR_FOOTER_SIZE - r->scratch_have;
	if (take > avail)
		take = avail;
	memcpy(r->scratch + r->scratch_have, r->in + r->in_pos, take);
	r->scratch_have += take;
	r->in_pos += take;
	r->offset += take;
	if (r->scratch_have < r->body_len + PF_TFR_FOOTER_SIZE)
		return 0;
	if (!r->skip_data_crc) {
		ret = check_data(r->scratch, r->body_len,
				 r->scratch + r->body_len, r->partial_off, err);
		if (ret < 0)
			return poison(r, ret);
	}
	rec->data = r->scratch;
	rec->len = r->body_len;
	rec->offset = r->partial_off;
	rec->index = r->next_index++;
	r->partial = false;
	r->hdr_have = 0;
	r->scratch_have = 0;
	return 1;
}

int pf_tfr_reader_next(pf_tfr_reader *r, pf_record *rec, pf_error *err)
{
	size_t avail;
	uint64_t dlen;
	int ret;

	if (r->poisoned)
		return pf_error_set(err, -EINVAL, PF_OFFSET_STREAM, r->offset,
				    "reader used after an error without reset");
	if (r->partial)
		return continue_partial(r, rec, err);

	avail = r->in_len - r->in_pos;
	if (avail == 0)
		return 0;
	if (avail >= PF_TFR_HEADER_SIZE) {
		const uint8_t *p = r->in + r->in_pos;

		ret = check_header(p, r->offset, r->max_record, &dlen, err);
		if (ret < 0)
			return poison(r, ret);
		if (avail - PF_TFR_HEADER_SIZE >= dlen &&
		    avail - PF_TFR_HEADER_SIZE - dlen >= PF_TFR_FOOTER_SIZE) {
			/* Whole record in this buffer: a zero-copy view. */
			if (!r->skip_data_crc) {
				ret = check_data(p + PF_TFR_HEADER_SIZE, dlen,
						 p + PF_TFR_HEADER_SIZE + dlen,
						 r->offset, err);
				if (ret < 0)
					return poison(r, ret);
			}
			rec->data = p + PF_TFR_HEADER_SIZE;
			rec->len = dlen;
			rec->offset = r->offset;
			rec->index = r->next_index++;
			r->in_pos += dlen + PF_TFR_OVERHEAD;
			r->offset += dlen + PF_TFR_OVERHEAD;
			return 1;
		}
	}
	/* The record runs past this buffer: assemble it in scratch. */
	r->partial = true;
	r->partial_off = r->offset;
	r->hdr_have = 0;
	r->scratch_have = 0;
	return continue_partial(r, rec, err);
}

int pf_tfr_reader_finish(pf_tfr_reader *r, pf_error *err)
{
	if (r->poisoned)
		return pf_error_set(err, -EINVAL, PF_OFFSET_STREAM, r->offset,
				    "reader used after an error without reset");
	if (!r->partial)
		return 0;
	if (r->hdr_have < PF_TFR_HEADER_SIZE)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM,
				    r->partial_off,
				    "truncated header: %zu of %u bytes before end of stream",
				    r->hdr_have, PF_TFR_HEADER_SIZE);
	return pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, r->partial_off,
			    "truncated body: record of %llu bytes needs %llu, stream ends after %llu",
			    (unsigned long long)r->body_len,
			    (unsigned long long)(r->body_len + PF_TFR_OVERHEAD),
			    (unsigned long long)(PF_TFR_HEADER_SIZE + r->scratch_have));
}
