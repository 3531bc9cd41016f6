/* SPDX-License-Identifier: Apache-2.0 */
/* TFRecord framing: one-shot parse, incremental reader (failing or skipping
 * over corrupt data), resynchronisation after damage, encoder. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

/*
 * Check a 12-byte header: the length CRC is verified before the length is
 * believed, and the length is checked against the limit before anything
 * is sized from it.  @return 0 with *len, or -errno with *len 0: set on
 * every path, as callers' compilers cannot see that pf_error_set() returns
 * a negative value (GCC 12 -O3 warned that *len may be used unset).
 */
static int check_header(const uint8_t *hdr, uint64_t offset,
			uint64_t max_record, uint64_t *len, pf_error *err)
{
	uint32_t want = pf_load_le32(hdr + 8);
	uint32_t got = pf_crc32c_mask(pf_crc32c(0, hdr, 8));
	uint64_t stored;

	*len = 0;
	if (got != want)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, offset,
				    "bad length CRC (stored 0x%08x, computed 0x%08x)",
				    want, got);
	stored = pf_load_le64(hdr);
	if (stored > max_record)
		return pf_error_set(err, -EFBIG, PF_OFFSET_STREAM, offset,
				    "record too large: %llu bytes, limit %llu",
				    (unsigned long long)stored,
				    (unsigned long long)max_record);
	*len = stored;
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
	pf_error_clear(err);
	return parse(buf, len, base_offset, max_record, true, rec, err);
}

int64_t pf_tfr_parse_verified(const void *buf, size_t len, uint64_t base_offset,
			      uint64_t max_record, pf_record *rec, pf_error *err)
{
	pf_error_clear(err);
	return parse(buf, len, base_offset, max_record, false, rec, err);
}

int pf_tfr_truncation(const void *buf, size_t len, uint64_t base_offset,
		      uint64_t max_record, pf_error *err)
{
	uint64_t dlen;
	int ret;

	pf_error_clear(err);
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
/* Damage and resynchronisation                                         */

const char *pf_drop_unit_name(pf_drop_unit u)
{
	switch (u) {
	case PF_DROP_RECORD: return "record";
	case PF_DROP_SPAN: return "span";
	case PF_DROP_FRAME: return "frame";
	case PF_DROP_MEMBER: return "member";
	}
	return "unknown";
}

/* The header checks without an error text, for scanning: the length
 * limit first, which costs a load, so that a search through random bytes
 * (whose 8-byte lengths are almost never below the limit) computes a CRC
 * at few offsets instead of at every one. */
/* The masked CRC32C of a zero length (eight zero bytes): zero-filled
 * damage (a hole a file system left, a preallocated tail) has a zero
 * length at every offset, and skipping it checks that length's CRC at
 * every byte; known, it costs a compare.  test_formats_tfrecord's
 * resync_finds_an_empty_record_after_zeros_and_garbage fails if it is
 * not the CRC pf_tfr_encode() writes. */
#define ZERO_LENGTH_CRC 0x07980329u

static bool header_ok(const uint8_t *hdr, uint64_t max_record, uint64_t *len)
{
	*len = pf_load_le64(hdr);
	return *len <= max_record &&
	       (*len ? pf_crc32c_mask(pf_crc32c(0, hdr, 8)) : ZERO_LENGTH_CRC) ==
		       pf_load_le32(hdr + 8);
}

/* Does a whole record of at most max_record bytes that passes its header
 * checks start at p[0..len)?  (*whole: its size.) */
static bool fits(const uint8_t *p, size_t len, uint64_t max_record, uint64_t *whole)
{
	uint64_t dlen;

	if (len < PF_TFR_HEADER_SIZE || !header_ok(p, max_record, &dlen))
		return false;
	*whole = dlen + PF_TFR_OVERHEAD;
	return len - PF_TFR_HEADER_SIZE >= dlen &&
	       len - PF_TFR_HEADER_SIZE - dlen >= PF_TFR_FOOTER_SIZE;
}

size_t pf_tfr_resync(const void *buf, size_t len, uint64_t max_record, bool at_end)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; len - i >= PF_TFR_HEADER_SIZE; i++) {
		uint64_t dlen;
		size_t rest;

		if (!header_ok(p + i, max_record, &dlen))
			continue;
		rest = len - i - PF_TFR_HEADER_SIZE;
		if (rest < dlen || rest - dlen < PF_TFR_FOOTER_SIZE) {
			if (!at_end)
				return i;	/* wait for the rest, then judge */
			continue;		/* cannot be whole: not a record */
		}
		/* The data CRC as well: a length CRC alone is passed by one
		 * random offset in 2^32, about once per 4 GiB of garbage. */
		if (pf_crc32c_mask(pf_crc32c(0, p + i + PF_TFR_HEADER_SIZE, dlen)) ==
		    pf_load_le32(p + i + PF_TFR_HEADER_SIZE + dlen))
			return i;
	}
	return at_end ? len : i;
}

/* What starts at p[0..len), at stream offset off. */
enum {
	EX_RECORD,	/* a whole record passing its checks, *n bytes */
	EX_NEED,	/* too few bytes to tell: *n are needed (never at_end) */
	EX_BAD_RECORD,	/* (lookahead) data CRC bad, framing held: drop *n bytes */
	EX_BROKEN,	/* framing broken here (*code, cause in err) */
	EX_TRUNC,	/* at_end: the bytes end inside a header or record */
};

/*
 * lookahead (skip mode): a record whose data CRC fails is dropped alone
 * only when the framing around it holds: the next header passes its length
 * CRC where this record's length says it starts, or the bytes end right
 * there.  Otherwise its length may be what is wrong (bytes lost or added
 * inside it), and trusting it could jump over the start of a good record;
 * the caller resynchronises instead.  at_end: no bytes follow p[len).
 */
static int examine(const uint8_t *p, size_t len, uint64_t off, uint64_t max_record,
		   bool check_data_crc, bool lookahead, bool at_end, uint64_t *n,
		   int *code, pf_error *err)
{
	uint64_t dlen, whole, next_len;

	if (len < PF_TFR_HEADER_SIZE) {
		if (!at_end) {
			*n = PF_TFR_HEADER_SIZE;
			return EX_NEED;
		}
		*code = pf_tfr_truncation(p, len, off, max_record, err);
		return EX_TRUNC;
	}
	*code = check_header(p, off, max_record, &dlen, err);
	if (*code < 0)
		return EX_BROKEN;
	whole = dlen + PF_TFR_OVERHEAD;
	if (len < whole) {
		if (!at_end) {
			*n = whole;
			return EX_NEED;
		}
		*code = pf_tfr_truncation(p, len, off, max_record, err);
		return EX_TRUNC;
	}
	*n = whole;
	if (!check_data_crc)
		return EX_RECORD;
	*code = check_data(p + PF_TFR_HEADER_SIZE, dlen, p + PF_TFR_HEADER_SIZE + dlen,
			   off, err);
	if (*code == 0)
		return EX_RECORD;
	if (!lookahead)
		return EX_BROKEN;
	if (len - whole >= PF_TFR_HEADER_SIZE)
		return header_ok(p + whole, UINT64_MAX, &next_len) ? EX_BAD_RECORD
								   : EX_BROKEN;
	if (!at_end) {
		*n = whole + PF_TFR_HEADER_SIZE;
		return EX_NEED;
	}
	return len == whole ? EX_BAD_RECORD : EX_BROKEN;
}

/* examine() wrote only code, offset and message: make the rest "unknown"
 * before the cause is handed on.  (Clearing a pf_error for every record
 * would cost more than parsing a small one.) */
static void tidy(pf_error *cause)
{
	cause->file[0] = '\0';
	cause->frame = -1;
	cause->record = -1;
}

static void fill_drop(pf_drop *d, pf_drop_unit unit, uint64_t start,
		      uint64_t resume, int64_t records, const pf_error *cause)
{
	d->unit = unit;
	d->offset_kind = PF_OFFSET_STREAM;
	d->start = start;
	d->resume = resume;
	d->next_record = 0;
	d->records = records;
	if (cause != &d->cause)
		d->cause = *cause;
}

int pf_tfr_next_intact(const void *buf, size_t len, size_t *pos, uint64_t base_offset,
		       uint64_t max_record, bool check_data_crc, pf_record *rec,
		       pf_drop *drop)
{
	const uint8_t *p = buf;
	size_t at = *pos, q;
	pf_error *cause = &drop->cause;	/* written in place: 13 KB */
	uint64_t n;
	int code;

	if (at >= len)
		return 0;
	switch (examine(p + at, len - at, base_offset + at, max_record, check_data_crc,
			true, true, &n, &code, cause)) {
	case EX_RECORD:
		rec->data = p + at + PF_TFR_HEADER_SIZE;
		rec->len = n - PF_TFR_OVERHEAD;
		rec->offset = base_offset + at;
		*pos = at + (size_t)n;
		return 1;
	case EX_BAD_RECORD:
		tidy(cause);
		fill_drop(drop, PF_DROP_RECORD, base_offset + at, base_offset + at + n,
			  1, cause);
		*pos = at + (size_t)n;
		return 2;
	default:
		tidy(cause);
		q = at + 1 + pf_tfr_resync(p + at + 1, len - at - 1, max_record, true);
		fill_drop(drop, PF_DROP_SPAN, base_offset + at, base_offset + q, -1,
			  cause);
		*pos = q;
		return 2;
	}
}

uint64_t pf_tfr_count_intact(const void *buf, size_t len, uint64_t max_record,
			     bool check_data_crc, uint64_t *drops)
{
	uint64_t records = 0, dropped = 0;
	size_t pos = 0;
	pf_record rec;
	pf_drop drop;
	int ret;

	while ((ret = pf_tfr_next_intact(buf, len, &pos, 0, max_record, check_data_crc,
					 &rec, &drop)) > 0) {
		if (ret == 1)
			records++;
		else
			dropped++;
	}
	if (drops)
		*drops = dropped;
	return records;
}

/* ------------------------------------------------------------------ */
/* The incremental reader                                               */

/*
 * Bytes wholly inside the fed buffer are parsed in place (zero-copy).
 * Bytes that must wait for later buffers go to the carry: the start of a
 * record straddling buffers, or, while resynchronising, the bytes still
 * under judgement.  The carry always ends where in[in_pos] begins, and
 * grows to at most max_record + 28 bytes (a record, its footer, and the
 * next header when a record with a bad data CRC is judged).  When every
 * byte it holds is a copy from the current fed buffer and that buffer has
 * more, the carry is given back (in_pos moves back over it) so the bytes
 * are read in place again.
 */
struct pf_tfr_reader {
	uint64_t max_record;
	bool skip_data_crc;
	bool skip;		/* PF_CORRUPT_SKIP */
	pf_drop_fn on_drop;
	void *on_drop_ctx;
	bool poisoned;
	bool ended;		/* pf_tfr_reader_end(): nothing follows the fed bytes */
	bool cutting;		/* pf_tfr_reader_cut() under way */
	const char *cut_what;

	const uint8_t *in;	/* fed buffer */
	size_t in_len, in_pos;

	uint64_t offset;	/* stream offset of in[in_pos] */
	uint64_t next_index;	/* number of the next record */

	uint8_t *carry;		/* carry[head..head+have): the bytes before in[in_pos] */
	size_t carry_cap, head, have;
	size_t from_in;		/* the last from_in carry bytes are copies from in */
	size_t consume;		/* carry bytes of the record returned last */

	bool syncing;		/* skip mode: looking for the next valid record */
	uint64_t sync_start;	/* where the dropped bytes begin */
	uint64_t drops;
	/* The drop being reported.  Its cause is where a step writes what
	 * went wrong, and while syncing, why the search began (a search
	 * reports nothing else before it ends).  A pf_error is 13 KB: too
	 * big to copy for each drop, or for the stack of a call made for
	 * every record (under ASan each such local costs a 1.7 KB shadow
	 * write a call). */
	pf_drop drop;
};

/* next()'s steps: a record (1), need bytes (0), an error (<0), or this. */
#define STEP_AGAIN 2

int pf_tfr_reader_create(pf_tfr_reader **out, const pf_tfr_config *cfg)
{
	pf_tfr_reader *r = pf_calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->max_record = cfg && cfg->max_record_size ? cfg->max_record_size
						    : PF_MAX_RECORD_DEFAULT;
	r->skip_data_crc = cfg && cfg->skip_data_crc;
	if (cfg && cfg->on_corrupt != PF_CORRUPT_FAIL && cfg->on_corrupt != PF_CORRUPT_SKIP) {
		pf_free(r);
		return -EINVAL;
	}
	r->skip = cfg && cfg->on_corrupt == PF_CORRUPT_SKIP;
	r->on_drop = cfg ? cfg->on_drop : NULL;
	r->on_drop_ctx = cfg ? cfg->on_drop_ctx : NULL;
	pf_tfr_reader_reset(r, 0, 0);
	*out = r;
	return 0;
}

void pf_tfr_reader_free(pf_tfr_reader *r)
{
	if (!r)
		return;
	pf_free(r->carry);
	pf_free(r);
}

void pf_tfr_reader_reset(pf_tfr_reader *r, uint64_t stream_offset,
			 uint64_t first_record)
{
	r->in = NULL;
	r->in_len = r->in_pos = 0;
	r->offset = stream_offset;
	r->next_index = first_record;
	r->head = r->have = r->from_in = r->consume = 0;
	r->poisoned = false;
	r->ended = false;
	r->cutting = false;
	r->syncing = false;
	r->drops = 0;
}

void pf_tfr_reader_feed(pf_tfr_reader *r, const void *buf, size_t len)
{
	r->in = buf;
	r->in_len = len;
	r->in_pos = 0;
	r->from_in = 0;		/* the carry's bytes are from released buffers */
}

void pf_tfr_reader_end(pf_tfr_reader *r)
{
	r->ended = true;
}

void pf_tfr_reader_cut(pf_tfr_reader *r, const char *what)
{
	if (!r->skip)
		return;
	r->cutting = true;
	r->cut_what = what;
}

uint64_t pf_tfr_reader_offset(const pf_tfr_reader *r)
{
	return r->offset;
}

uint64_t pf_tfr_reader_drops(const pf_tfr_reader *r)
{
	return r->drops;
}

uint64_t pf_tfr_reader_next_index(const pf_tfr_reader *r)
{
	return r->next_index;
}

static int poison(pf_tfr_reader *r, int code)
{
	r->poisoned = true;
	return code;
}

static void advance(pf_tfr_reader *r, size_t n)
{
	r->in_pos += n;
	r->offset += n;
}

static void carry_drop(pf_tfr_reader *r, size_t n)
{
	r->head += n;
	r->have -= n;
	if (r->from_in > r->have)
		r->from_in = r->have;
	if (!r->have)
		r->head = 0;
}

/* Move n bytes of the fed buffer to the end of the carry.  n never takes
 * the carry past max_record + 28 bytes (callers ask for a header, or for a
 * record whose length passed the limit check, plus the next header). */
static int carry_take(pf_tfr_reader *r, size_t n, pf_error *err)
{
	if (r->head + r->have + n > r->carry_cap) {
		if (r->have)
			memmove(r->carry, r->carry + r->head, r->have);
		r->head = 0;
		if (r->have + n > r->carry_cap) {
			size_t want = r->have + n;
			uint8_t *c = pf_realloc(r->carry, want);

			if (!c)
				return poison(r, pf_error_set(err, -ENOMEM, PF_OFFSET_STREAM,
					r->offset - r->have,
					"no memory for a %zu-byte record", want));
			r->carry = c;
			r->carry_cap = want;
		}
	}
	memcpy(r->carry + r->head + r->have, r->in + r->in_pos, n);
	r->have += n;
	r->from_in += n;
	advance(r, n);
	return STEP_AGAIN;
}

/* Carry bytes up to need in all, from the fed buffer.  @return 0 when it
 * has none left. */
static int carry_more(pf_tfr_reader *r, uint64_t need, pf_error *err)
{
	size_t avail = r->in_len - r->in_pos;
	uint64_t take = need - r->have;

	if (take > avail)
		take = avail;
	if (take == 0)
		return 0;
	return carry_take(r, (size_t)take, err);
}

static int report(pf_tfr_reader *r, pf_drop_unit unit, uint64_t start, uint64_t resume,
		  int64_t records, const pf_error *cause, pf_error *err)
{
	pf_drop *d = &r->drop;
	int ret = 0;

	fill_drop(d, unit, start, resume, records, cause);
	tidy(&d->cause);
	d->next_record = r->next_index;
	r->drops++;
	if (r->on_drop)
		ret = r->on_drop(r->on_drop_ctx, d);
	if (ret < 0) {
		if (err) {
			*err = d->cause;
			err->code = ret;
		}
		return poison(r, ret);
	}
	return STEP_AGAIN;
}

/* A search begins at start, for the cause in r->drop.cause. */
static void begin_sync(pf_tfr_reader *r, uint64_t start)
{
	r->syncing = true;
	r->sync_start = start;
	tidy(&r->drop.cause);
}

/* A valid record starts at stream offset resume: report what was dropped
 * before it (nothing when the search began right there, after a cut). */
static int end_sync(pf_tfr_reader *r, uint64_t resume, pf_error *err)
{
	r->syncing = false;
	if (resume == r->sync_start)
		return STEP_AGAIN;
	return report(r, PF_DROP_SPAN, r->sync_start, resume, -1, &r->drop.cause, err);
}

/* Skip mode, all bytes read, and none follow (end or cut).  A search that
 * reaches the end drops everything since it began; at a cut that belongs
 * to the dropped frame or member and is not reported again.  After a cut,
 * search for a record from the next byte fed. */
static int at_the_end(pf_tfr_reader *r, pf_error *err)
{
	int ret = 0;

	if (r->syncing) {
		r->syncing = false;
		if (!r->cutting && r->offset > r->sync_start)
			ret = report(r, PF_DROP_SPAN, r->sync_start, r->offset, -1,
				     &r->drop.cause, err);
		if (ret < 0)
			return ret;
	}
	if (r->cutting) {
		r->cutting = false;
		pf_error_clear(&r->drop.cause);
		pf_error_set(&r->drop.cause, -EBADMSG, PF_OFFSET_STREAM, r->offset,
			     "no record starts after the dropped %s", r->cut_what);
		begin_sync(r, r->offset);
	}
	return 0;
}

static int deliver(pf_tfr_reader *r, const uint8_t *p, uint64_t whole, uint64_t off,
		   pf_record *rec)
{
	rec->data = p + PF_TFR_HEADER_SIZE;
	rec->len = whole - PF_TFR_OVERHEAD;
	rec->offset = off;
	rec->index = r->next_index++;
	return 1;
}

/* The carry is empty: work in the fed buffer. */
static int step_direct(pf_tfr_reader *r, pf_record *rec, pf_error *err)
{
	size_t avail = r->in_len - r->in_pos;
	bool at_end = r->skip && (r->ended || r->cutting);
	const uint8_t *p;
	uint64_t n;
	int code, ret;

	if (avail == 0)
		return at_end ? at_the_end(r, err) : 0;
	p = r->in + r->in_pos;	/* not before: in is NULL until a feed */
	if (r->syncing) {
		size_t q = pf_tfr_resync(p, avail, r->max_record, at_end);

		advance(r, q);
		if (q == avail)
			return STEP_AGAIN;
		if (fits(p + q, avail - q, r->max_record, &n))
			return end_sync(r, r->offset, err);
		/* A header waiting for the rest of its record, or the last
		 * 11 bytes: carry them (less than a record). */
		return carry_take(r, avail - q, err);
	}
	switch (examine(p, avail, r->offset, r->max_record, !r->skip_data_crc, r->skip,
			at_end, &n, &code, r->skip ? &r->drop.cause : err)) {
	case EX_RECORD:
		ret = deliver(r, p, n, r->offset, rec);
		advance(r, (size_t)n);
		return ret;
	case EX_NEED:
		/* The record runs past this buffer (avail < n <= max + 28). */
		return carry_take(r, avail, err);
	case EX_BAD_RECORD:
		ret = report(r, PF_DROP_RECORD, r->offset, r->offset + n, 1, &r->drop.cause,
			     err);
		if (ret >= 0)
			advance(r, (size_t)n);
		return ret;
	default:
		if (!r->skip)
			return poison(r, code);
		begin_sync(r, r->offset);
		advance(r, 1);
		return STEP_AGAIN;
	}
}

/* Work on the carried bytes (which come before in[in_pos]). */
static int step_carry(pf_tfr_reader *r, pf_record *rec, pf_error *err)
{
	const uint8_t *c = r->carry + r->head;
	size_t avail = r->in_len - r->in_pos;
	uint64_t coff = r->offset - r->have;
	bool at_end = r->skip && (r->ended || r->cutting) && avail == 0;
	uint64_t n;
	int code;

	if (r->have <= r->from_in && avail > 0) {
		/* All copies from the fed buffer, which goes on: read there. */
		r->in_pos -= r->have;
		r->offset -= r->have;
		r->head = r->have = r->from_in = 0;
		return STEP_AGAIN;
	}
	if (r->syncing) {
		size_t q = pf_tfr_resync(c, r->have, r->max_record, at_end);

		carry_drop(r, q);
		c += q;
		if (!r->have)
			return STEP_AGAIN;
		if (fits(c, r->have, r->max_record, &n))
			return end_sync(r, coff + q, err);
		/* A header that passed its checks waits for its record, or
		 * fewer than 12 bytes wait for more. */
		if (r->have < PF_TFR_HEADER_SIZE)
			return carry_more(r, PF_TFR_HEADER_SIZE, err);
		return carry_more(r, pf_load_le64(c) + PF_TFR_OVERHEAD, err);
	}
	switch (examine(c, r->have, coff, r->max_record, !r->skip_data_crc, r->skip, at_end,
			&n, &code, r->skip ? &r->drop.cause : err)) {
	case EX_RECORD:
		r->consume = (size_t)n;	/* rec points into the carry until then */
		return deliver(r, c, n, coff, rec);
	case EX_NEED:
		return carry_more(r, n, err);
	case EX_BAD_RECORD:
		code = report(r, PF_DROP_RECORD, coff, coff + n, 1, &r->drop.cause, err);
		if (code >= 0)
			carry_drop(r, (size_t)n);
		return code;
	default:
		if (!r->skip)
			return poison(r, code);
		begin_sync(r, coff);
		carry_drop(r, 1);
		return STEP_AGAIN;
	}
}

int pf_tfr_reader_next(pf_tfr_reader *r, pf_record *rec, pf_error *err)
{
	int ret;

	pf_error_clear(err);
	if (r->poisoned)
		return pf_error_set(err, -EINVAL, PF_OFFSET_STREAM, r->offset,
				    "reader used after an error without reset");
	if (r->consume) {
		carry_drop(r, r->consume);
		r->consume = 0;
	}
	do
		ret = r->have ? step_carry(r, rec, err) : step_direct(r, rec, err);
	while (ret == STEP_AGAIN);
	return ret;
}

int pf_tfr_reader_finish(pf_tfr_reader *r, pf_error *err)
{
	pf_record rec;
	int ret;

	pf_error_clear(err);
	if (r->poisoned)
		return pf_error_set(err, -EINVAL, PF_OFFSET_STREAM, r->offset,
				    "reader used after an error without reset");
	if (r->skip) {
		/* Whatever is left is dropped; records must have been read. */
		r->ended = true;
		ret = pf_tfr_reader_next(r, &rec, err);
		if (ret > 0)
			return pf_error_set(err, -EINVAL, PF_OFFSET_STREAM, rec.offset,
					    "records left unread at finish (skip mode: call "
					    "pf_tfr_reader_end() and read them first)");
		return ret;
	}
	if (r->consume) {
		carry_drop(r, r->consume);
		r->consume = 0;
	}
	if (!r->have)
		return 0;
	return pf_tfr_truncation(r->carry + r->head, r->have, r->offset - r->have,
				 r->max_record, err);
}
