/* SPDX-License-Identifier: Apache-2.0 */
/* The record stream's skip mode: a codec's failure dropped from the frame
 * or member where it began, the input searched for the next one, and a
 * file of no known format sniffed for a codec's header.  The record stream
 * itself (its state, detection, the path without damage) is recstream.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stream_internal.h"

/*
 * The reader drops damage in the decompressed bytes by itself.  Here the
 * codec's failures are handled: a frame or member that fails is dropped
 * from where it began, the input is scanned for the next frame or member
 * header, and the decoder restarts there.  The reader is first let to
 * read the records it holds and then cut (the bytes of a dropped unit it
 * held go with that unit).  The drop is reported once decoding has resumed
 * (output came, or a frame or member ended), so a false header that fails
 * at once only extends the same drop.
 */

#define UNIT_ZSTD 1u
#define UNIT_GZIP 2u

/* How much of a failing unit's input is kept from released buffers.  A
 * damaged block size makes zstd take up to a block (128 KiB) past the
 * frame's real end before it fails, and the next frame may start there. */
#define PF_HISTORY (256u << 10)

/* A file whose first bytes are no known format is searched this far for a
 * zstd frame or gzip member header (a false one in a damaged TFRecord file
 * is then a 1 in 4096 chance, and costs nothing: see revert_plain()). */
#define PF_SNIFF_BYTES (1u << 20)

/* Could a zstd frame (UNIT_ZSTD) or gzip member (UNIT_GZIP) start at
 * p[0..len)?  @return 1 yes, 0 no, -1 too few bytes to tell. */
static int unit_at(unsigned kinds, const uint8_t *p, size_t len)
{
	if ((kinds & UNIT_ZSTD) && (p[0] == 0x28 || (p[0] & 0xf0) == 0x50)) {
		uint32_t m;
		uint64_t end;

		if (len < 4) {
			/* Could these bytes begin either magic? */
			bool frame = memcmp(p, "\x28\xb5\x2f", len) == 0;
			bool skippable = (p[0] & 0xf0) == 0x50 && (len < 2 || p[1] == 0x2a) &&
					 (len < 3 || p[2] == 0x4d);

			return frame || skippable ? -1 : 0;
		}
		m = pf_load_le32(p);
		if (m == PF_ZSTD_MAGIC) {
			if (len < 5)
				return -1;
			return (p[4] & 0x08) == 0;	/* descriptor's reserved bit */
		}
		if ((m & PF_ZSTD_SKIPPABLE_MASK) == PF_ZSTD_SKIPPABLE_BASE) {
			if (len < 8)
				return -1;
			/* A false magic with a random size would skip good
			 * frames: believe it only when another frame starts
			 * where it says it ends. */
			end = 8 + (uint64_t)pf_load_le32(p + 4);
			if (end + 4 > len)
				return 0;
			m = pf_load_le32(p + end);
			return m == PF_ZSTD_MAGIC ||
			       (m & PF_ZSTD_SKIPPABLE_MASK) == PF_ZSTD_SKIPPABLE_BASE;
		}
	}
	if ((kinds & UNIT_GZIP) && p[0] == 0x1f) {
		/* RFC 1952: ID1 ID2 CM=8, FLG's reserved bits clear; XFL 0, 2
		 * or 4 and a defined OS, as every writer we know sets them. */
		if (len >= 2 && p[1] != 0x8b)
			return 0;
		if (len >= 3 && p[2] != 8)
			return 0;
		if (len >= 4 && (p[3] & 0xe0))
			return 0;
		if (len >= 9 && p[8] != 0 && p[8] != 2 && p[8] != 4)
			return 0;
		if (len >= 10 && p[9] > 13 && p[9] != 255)
			return 0;
		return len >= 10 ? 1 : -1;
	}
	return 0;
}

/* The first offset in p[0..len) where a header starts (*cut false), or
 * where one may start but len ends too soon to tell (*cut true); len when
 * neither. */
static size_t scan_units(unsigned kinds, const uint8_t *p, size_t len, bool *cut)
{
	*cut = false;
	if (!kinds)
		return len;
	for (size_t i = 0; i < len; i++) {
		int r = unit_at(kinds, p + i, len - i);

		if (r) {
			*cut = r < 0;
			return i;
		}
	}
	return len;
}

static unsigned scan_kinds(const pf_recstream *s)
{
	if (s->sniffing)
		return UNIT_ZSTD | UNIT_GZIP;
	/* A zlib stream has no member headers to find again. */
	return s->comp == PF_COMP_ZSTD ? UNIT_ZSTD : s->comp == PF_COMP_GZIP ? UNIT_GZIP : 0;
}

static const char *unit_what(int comp)
{
	return comp == PF_COMP_ZSTD ? "zstd frame" : comp == PF_COMP_GZIP ? "gzip member"
									 : "zlib stream";
}

/* Decode from file offset off: the bytes at src[cur][src_pos]. */
static void restart_at(pf_recstream *s, uint64_t off)
{
	s->scanning = false;
	s->resumed_at = off;
	pf_inflate_restart(s->inflate, off);
}

/* Make n bytes (copied to the stash) the next source, before the rest of
 * the current one (which is the last). */
static void replay(pf_recstream *s, const uint8_t *bytes, size_t n, uint64_t off)
{
	int c = s->cur;

	s->src[1] = s->src[c];
	s->src_len[1] = s->src_len[c];
	s->src_pos[1] = s->src_pos[c];
	s->src_off[1] = s->src_off[c];
	memcpy(s->stash, bytes, n);
	s->src[0] = s->stash;
	s->src_len[0] = n;
	s->src_pos[0] = 0;
	s->src_off[0] = off;
	s->nsrc = 2;
	s->cur = 0;
}

static int settle(pf_recstream *s, uint64_t resume, pf_error *err)
{
	int ret = 0;

	s->dropping = false;
	/* Decoding resumed before the byte where the failure showed: a
	 * skippable frame's size was what was wrong; the drop is from it. */
	if (resume < s->drop.start)
		s->drop.start = s->drop_floor;
	s->drop.resume = resume;
	s->drop.next_record = pf_tfr_reader_next_index(s->reader);
	ret = pf_recstream_tell(s, &s->drop);
	if (ret < 0) {
		s->deferred = ret;
		s->deferred_err = s->drop.cause;
		s->deferred_err.code = ret;
		if (err)
			*err = s->deferred_err;
	}
	return ret;
}

static void cause_of(pf_drop *d, const pf_error *cause)
{
	d->cause = *cause;
	d->cause.file[0] = '\0';
	d->cause.frame = -1;
	d->cause.record = -1;
}

/* Source c is used up (and about to be released): keep the bytes of it
 * the current unit still needs, after those of earlier sources. */
static int keep_history(pf_recstream *s, int c)
{
	uint64_t need = s->inflate->quiet_start;	/* a search starts after it */
	uint64_t lo = s->src_off[c], hi = lo + s->src_len[c];
	size_t n, drop;

	if (s->scanning) {
		s->hist_len = 0;	/* bytes being searched are not read again */
		s->src0_hist = false;
		return 0;
	}
	/* The history goes on into this source where it ends (a source may
	 * begin with bytes it already has: the detection stash copies the
	 * first bytes of the buffer after it). */
	if (c == 0 && s->src0_hist)
		s->src0_hist = false;	/* its bytes are in the history already */
	else if (s->hist_len && (s->hist_off + s->hist_len < lo || s->hist_off + s->hist_len > hi))
		s->hist_len = 0;	/* not contiguous: a new unit's bytes */
	if (s->hist_len && s->hist_off < need) {
		drop = s->hist_off + s->hist_len <= need ? s->hist_len
							 : (size_t)(need - s->hist_off);
		memmove(s->hist, s->hist + drop, s->hist_len - drop);
		s->hist_len -= drop;
		s->hist_off += drop;
	}
	if (lo < s->hist_off + s->hist_len && s->hist_len)
		lo = s->hist_off + s->hist_len;	/* (src[0] was the history) */
	if (lo < need)
		lo = need;
	if (lo >= hi)
		return 0;
	if (!s->hist) {
		s->hist = pf_malloc(PF_HISTORY);
		if (!s->hist)
			return -ENOMEM;
	}
	if (hi - lo > PF_HISTORY) {
		lo = hi - PF_HISTORY;
		s->hist_len = 0;
	}
	n = (size_t)(hi - lo);
	if (!s->hist_len)
		s->hist_off = lo;
	if (s->hist_len + n > PF_HISTORY) {
		drop = s->hist_len + n - PF_HISTORY;
		memmove(s->hist, s->hist + drop, s->hist_len - drop);
		s->hist_len -= drop;
		s->hist_off += drop;
	}
	memcpy(s->hist + s->hist_len, s->src[c] + (lo - s->src_off[c]), n);
	s->hist_len += n;
	return 0;
}

static void reposition(pf_recstream *s, uint64_t from);

/* The codec failed (or the file ended inside a unit): drop what is left of
 * the unit, and look for the next one. */
static void open_drop(pf_recstream *s, const pf_error *cause)
{
	pf_inflate *d = s->inflate;

	if (!s->dropping) {
		s->dropping = true;
		s->drop.unit = s->comp == PF_COMP_ZSTD ? PF_DROP_FRAME : PF_DROP_MEMBER;
		s->drop.offset_kind = PF_OFFSET_FILE;
		s->drop.start = d->unit_start;
		s->drop.records = -1;
		cause_of(&s->drop, cause);
		s->cut_due = true;
		s->drop_floor = d->unit_out ? d->unit_start : d->quiet_start;
	}
	s->scanning = true;
	s->tail_len = 0;
	/* The next unit may begin anywhere after this one's start: a broken
	 * size may have taken the decoder past it (even a bad trailer CRC may
	 * be read where garbage made deflate end early or late).  When it
	 * failed before giving anything, a damaged skippable frame's size may
	 * have put the decoder inside it: then search from after the first of
	 * the output-less units before it. */
	reposition(s, (d->unit_out ? d->unit_start : d->quiet_start) + 1);
}

/* Go back to file offset from for the next source bytes: in the current
 * source, or in the bytes kept from earlier ones, then this whole source
 * (or its first byte when from lies before both: released). */
static void reposition(pf_recstream *s, uint64_t from)
{
	int c = s->cur < s->nsrc ? s->cur : -1;
	uint64_t lo = c >= 0 ? s->src_off[c] : s->fed;
	uint64_t hi = c >= 0 ? lo + s->src_len[c] : s->fed;
	uint64_t hend = s->hist_off + s->hist_len;

	if (from < lo && s->hist_len && hend >= lo && hend <= hi && from < hend &&
	    !(c == 0 && s->src0_hist)) {
		uint64_t h = from > s->hist_off ? from : s->hist_off;

		s->nsrc = 1;
		if (c >= 0) {
			s->src[1] = s->src[c];
			s->src_len[1] = s->src_len[c];
			s->src_pos[1] = (size_t)(hend - lo);
			s->src_off[1] = lo;
			s->nsrc = 2;
		}
		s->src[0] = s->hist + (h - s->hist_off);
		s->src_len[0] = (size_t)(hend - h);
		s->src_pos[0] = 0;
		s->src_off[0] = h;
		s->cur = 0;
		s->src0_hist = true;
		return;
	}
	if (c < 0)
		return;
	if (from < lo)
		from = lo;	/* earlier bytes are released */
	if (from > hi)
		from = hi;
	s->src_pos[c] = (size_t)(from - lo);
}

/* The reader starts a new stream at stream offset off (its records keep
 * their numbers). */
static void restart_reader(pf_recstream *s, uint64_t off)
{
	pf_tfr_reader_reset(s->reader, off, pf_tfr_reader_next_index(s->reader));
}

/* Sniffing found a codec's header (hdr, whole) at the current source
 * position, and the reader has given what it held before it: decode from
 * here on.  The codec is confirmed once a record comes out of it or a
 * frame or member ends (garbage after a false zstd header can still give
 * output: raw blocks); should it fail or the file end before that (a
 * false header in a damaged TFRecord file), revert_plain() reads on as
 * TFRecord from the header. */
static int switch_codec(pf_recstream *s, const uint8_t *hdr, pf_error *err)
{
	pf_compression c = hdr[0] == 0x1f ? PF_COMP_GZIP : PF_COMP_ZSTD;
	uint64_t at = s->src_off[s->cur] + s->src_pos[s->cur];
	int ret;

	s->switching = false;
	ret = pf_recstream_make_decoder(s, c, err);
	if (ret < 0)
		return ret;
	if (!s->held)
		s->held = pf_malloc(PF_HELD_DROPS * sizeof(*s->held));
	if (!s->held)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory to hold the drops of a trial decode");
	s->comp = c;
	s->sniffing = false;
	s->sniff_trial = true;
	s->sniff_at = at;
	/* The records so far keep their numbers; the decompressed stream
	 * starts at 0. */
	restart_reader(s, 0);
	s->total_out = 0;
	restart_at(s, at);
	return 1;
}

/* The codec found by sniffing failed before it was confirmed: it was a
 * false header; read the file as TFRecord from there on (what it gave the
 * reader, no record, is forgotten). */
static void revert_plain(pf_recstream *s)
{
	s->comp = PF_COMP_NONE;
	s->sniff_trial = false;
	s->nheld = 0;
	s->held_over = false;
	s->scanning = false;
	restart_reader(s, s->sniff_at);
	s->total_out = s->sniff_at;
	reposition(s, s->sniff_at);
}

/* Sniffing met a header: first let the reader give what it holds, as at
 * the end of a stream (reporting the damage before the header). */
static int begin_switch(pf_recstream *s)
{
	s->switching = true;
	pf_tfr_reader_end(s->reader);
	return 1;
}

/* Sniffing: n bytes of the tail belong to the reader after all. */
static void tail_to_reader(pf_recstream *s, size_t n)
{
	memcpy(s->stash, s->tail, n);
	pf_tfr_reader_feed(s->reader, s->stash, n);
	s->total_out += n;
}

/* A possible header was cut by the end of the last buffer: look at it with
 * the start of the new one. */
static int tail_step(pf_recstream *s, pf_error *err)
{
	int c = s->cur;
	const uint8_t *b = s->src[c] + s->src_pos[c];
	size_t blen = s->src_len[c] - s->src_pos[c];
	size_t k = blen < 16 ? blen : 16, n = s->tail_len, i;
	uint8_t tmp[PF_DETECT_BYTES + 16];
	bool cut;

	memcpy(tmp, s->tail, n);
	memcpy(tmp + n, b, k);
	i = scan_units(scan_kinds(s), tmp, n + k, &cut);
	if (i < n && !cut) {
		/* A header starts in the tail: decode from there. */
		uint64_t at = s->tail_off + i;

		if (s->sniffing && !s->switching) {
			/* The reader gets the bytes before the header, then
			 * gives what it holds; back here after that. */
			if (i) {
				tail_to_reader(s, i);
				memmove(s->tail, s->tail + i, n - i);
				s->tail_len = n - i;
				s->tail_off += i;
			}
			return begin_switch(s);
		}
		s->tail_len = 0;
		replay(s, s->tail + i, n - i, at);
		if (s->sniffing)
			return switch_codec(s, tmp + i, err);
		restart_at(s, at);
		return 1;
	}
	if (i >= n) {
		/* None does.  Sniffing: the bytes are the reader's; scanning:
		 * they are dropped. */
		s->tail_len = 0;
		if (s->sniffing)
			tail_to_reader(s, n);
		return 1;
	}
	/* Still too few bytes to tell.  Then the new buffer is all in tmp
	 * (16 more bytes would decide any header starting in the tail):
	 * keep the undecided bytes, give away those before them. */
	if (s->sniffing && i)
		tail_to_reader(s, i);
	memcpy(s->tail, tmp + i, n + k - i);
	s->tail_len = n + k - i;
	s->tail_off += i;
	s->src_pos[c] = s->src_len[c];
	return 1;
}

/* Look through the current source for the next frame or member. */
static int scan_step(pf_recstream *s)
{
	int c = s->cur;
	const uint8_t *p = s->src[c] + s->src_pos[c];
	size_t len = s->src_len[c] - s->src_pos[c];
	bool cut;
	size_t i = scan_units(scan_kinds(s), p, len, &cut);

	if (i < len && cut) {
		s->tail_len = len - i;
		memcpy(s->tail, p + i, s->tail_len);
		s->tail_off = s->src_off[c] + s->src_pos[c] + i;
	}
	if (i == len || cut) {
		s->src_pos[c] = s->src_len[c];
		return 1;
	}
	s->src_pos[c] += i;
	restart_at(s, s->src_off[c] + s->src_pos[c]);
	return 1;
}

/* Uncompressed: hand the reader the current source (while sniffing, only
 * up to a codec header, and then switch to that codec). */
static int plain_step(pf_recstream *s, pf_error *err)
{
	int c = s->cur;
	const uint8_t *p = s->src[c] + s->src_pos[c];
	size_t len = s->src_len[c] - s->src_pos[c];
	uint64_t off = s->src_off[c] + s->src_pos[c];

	if (s->sniffing && off >= PF_SNIFF_BYTES)
		s->sniffing = false;
	if (s->sniffing) {
		size_t span = len < PF_SNIFF_BYTES - off ? len : (size_t)(PF_SNIFF_BYTES - off);
		bool cut;
		size_t i = scan_units(scan_kinds(s), p, span, &cut);

		if (i == 0 && !cut)
			return s->switching ? switch_codec(s, p, err) : begin_switch(s);
		if (i < span && !cut) {
			len = i;	/* up to the header, then look again */
		} else if (i < span && span == len) {
			/* A header may begin in the last bytes: hold them. */
			s->tail_len = span - i;
			memcpy(s->tail, p + i, s->tail_len);
			s->tail_off = off + i;
			len = i;
			s->src_pos[c] += s->tail_len;	/* taken, after the bytes fed */
		}
	}
	pf_tfr_reader_feed(s->reader, p, len);
	s->src_pos[c] += len;
	s->total_out += len;
	return 1;
}

/* All fed bytes are used.  At the end of the file: close the codec's
 * account (a drop under way ends here; a unit cut short is a drop), then
 * let the reader drop a damaged end and give its last records. */
static int end_step(pf_recstream *s, pf_error *err)
{
	int ret;

	if (!s->eof)
		return 0;
	if (s->sniff_trial) {
		/* The file ended inside what sniffing took for a header. */
		revert_plain(s);
		return 1;
	}
	if (s->comp != PF_COMP_NONE && !s->codec_done) {
		if (s->inflate->in_member && !s->scanning) {
			/* The file ends inside a unit.  A damaged size or
			 * header field may have made it take in what followed
			 * it: search that for another unit before giving up
			 * (each search starts past the last, so this ends). */
			pf_error cause;

			pf_error_clear(&cause);
			pf_inflate_finish(s->inflate, &cause);
			s->inflate->in_member = false;
			open_drop(s, &cause);
			return 1;
		}
		s->codec_done = true;
		s->scanning = false;
		s->tail_len = 0;
		if (s->dropping) {
			ret = settle(s, s->fed, err);
			if (ret < 0)
				return ret;
		}
		return 1;
	}
	if (s->tail_len) {
		/* Sniffing: the last bytes were no header; they are the reader's. */
		size_t n = s->tail_len;

		s->tail_len = 0;
		tail_to_reader(s, n);
		return 1;
	}
	if (!s->reader_ended) {
		s->reader_ended = true;
		pf_tfr_reader_end(s->reader);
		return 1;
	}
	return 0;
}

/* Decode the next window from the current source (or flush the codec when
 * the sources are used up). */
static int decode_step(pf_recstream *s, pf_error *err)
{
	uint64_t units0 = s->inflate->units_done;
	size_t produced = 0, none = 0;
	pf_error cause;
	int ret;

	pf_error_clear(&cause);
	if (s->cur < s->nsrc)
		ret = pf_inflate_run(s->inflate, s->src[s->cur], s->src_len[s->cur],
				     &s->src_pos[s->cur], s->window, s->window_cap,
				     &produced, &cause);
	else
		ret = pf_inflate_run(s->inflate, s->stash, 0, &none, s->window,
				     s->window_cap, &produced, &cause);
	if (ret < 0 && ret != -EBADMSG) {
		if (err)
			*err = cause;
		return ret;
	}
	if (s->sniff_trial && s->inflate->units_done != units0) {
		int r2 = pf_recstream_confirm(s, err);	/* a whole unit: the codec holds */
		if (r2 < 0)
			return r2;
	}
	if (produced || s->inflate->units_done != units0) {
		if (s->dropping) {
			/* Decoding has resumed: that drop is over. */
			int r2 = settle(s, s->resumed_at, err);
			if (r2 < 0)
				return r2;
		}
	}
	if (ret < 0 && s->sniff_trial && produced) {
		/* Output, then failure: a record in the output still
		 * confirms the codec (as it would have, had the input come
		 * in smaller pieces).  pf_recstream_skip_step() decides after. */
		s->trial_failed = true;
		s->trial_cause = cause;
		pf_tfr_reader_feed(s->reader, s->window, produced);
		s->total_out += produced;
		return 1;
	}
	if (ret < 0 && s->sniff_trial) {
		revert_plain(s);
		return 1;
	}
	if (ret < 0)
		open_drop(s, &cause);
	if (produced) {
		pf_tfr_reader_feed(s->reader, s->window, produced);
		s->total_out += produced;
		return 1;
	}
	if (ret == 0 && s->cur >= s->nsrc)
		return end_step(s, err);
	return 1;
}

/* The reader has read all it was given: what comes next in skip mode.
 * @return 1 to ask the reader again, 0 when more file bytes are needed
 * (or the end is reached), <0 on error. */
int pf_recstream_skip_step(pf_recstream *s, pf_error *err)
{
	if (s->trial_failed) {
		s->trial_failed = false;
		if (s->sniff_trial)
			revert_plain(s);
		else
			open_drop(s, &s->trial_cause);
		return 1;
	}
	if (s->sniff_trial && s->held_over) {
		revert_plain(s);		/* drop after drop: no codec */
		return 1;
	}
	if (s->cut_due) {
		s->cut_due = false;
		pf_tfr_reader_cut(s->reader, unit_what(s->comp));
		return 1;
	}
	while (s->cur < s->nsrc && s->src_pos[s->cur] == s->src_len[s->cur]) {
		if (s->comp != PF_COMP_NONE && keep_history(s, s->cur) < 0)
			return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
					    "no memory to keep a damaged frame's bytes");
		s->cur++;
	}
	if (s->cur < s->nsrc && s->tail_len && (s->scanning || s->sniffing))
		return tail_step(s, err);
	if (s->comp == PF_COMP_NONE)
		return s->cur < s->nsrc ? plain_step(s, err) : end_step(s, err);
	if (s->codec_done)
		return end_step(s, err);
	if (s->scanning)
		return s->cur < s->nsrc ? scan_step(s) : end_step(s, err);
	return decode_step(s, err);
}
