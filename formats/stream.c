/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-stream codecs (gzip, zlib, zstd) and the record stream over them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY	/* ZSTD_createDStream_advanced */
#include <zstd.h>
#include <zstd_errors.h>

#include "formats_internal.h"

const char *pf_compression_name(pf_compression c)
{
	switch (c) {
	case PF_COMP_NONE: return "none";
	case PF_COMP_GZIP: return "gzip";
	case PF_COMP_ZLIB: return "zlib";
	case PF_COMP_ZSTD: return "zstd";
	}
	return "unknown";
}

int pf_compression_detect(const void *head, size_t len)
{
	const uint8_t *p = head;

	if (len == 0)
		return PF_COMP_NONE;
	/* A TFRecord header whose length CRC holds is a TFRecord, whatever
	 * its first bytes happen to look like (a 0x9c78-byte record starts
	 * with a valid zlib header). */
	if (len >= PF_TFR_HEADER_SIZE &&
	    pf_crc32c_mask(pf_crc32c(0, p, 8)) == pf_load_le32(p + 8))
		return PF_COMP_NONE;
	if (len >= 2 && p[0] == 0x1f && p[1] == 0x8b)
		return PF_COMP_GZIP;
	if (len >= 4) {
		uint32_t m = pf_load_le32(p);
		if (m == PF_ZSTD_MAGIC ||
		    (m & PF_ZSTD_SKIPPABLE_MASK) == PF_ZSTD_SKIPPABLE_BASE)
			return PF_COMP_ZSTD;
	}
	/* RFC 1950: CM = 8, CINFO <= 7, header checksum a multiple of 31. */
	if (len >= 2 && (p[0] & 0x0f) == 8 && (p[0] >> 4) <= 7 &&
	    ((unsigned)p[0] << 8 | p[1]) % 31 == 0)
		return PF_COMP_ZLIB;
	return -ENODATA;
}

/* ------------------------------------------------------------------ */

struct pf_inflate {
	pf_compression comp;
	z_stream z;
	bool z_ready;
	ZSTD_DStream *zd;
	bool between;		/* gzip/zlib: at a member boundary */
	bool in_member;		/* bytes of an unfinished member/frame seen */
	uint64_t total_in;
	/* For the record stream's skip mode: */
	uint64_t unit_start;	/* input offset where the current frame/member began */
	uint64_t quiet_start;	/* start of the output-less units (skippable
				   frames, empty members) just before it, if
				   any, else unit_start: a damaged skippable
				   size makes the next "frame" fail, so the
				   search for a good one starts there */
	uint64_t unit_out;	/* output of the current unit so far */
	uint64_t units_done;	/* frames/members completed */
	/* zstd: a frame's header is gathered here whole before libzstd sees
	 * any of it, so that how the input happens to be cut decides
	 * nothing: libzstd looks for a legacy magic at its input position
	 * when the header it gathered is no frame, and checks a frame's
	 * content size only when the whole frame is in one call's input. */
	uint8_t hdr[ZSTD_FRAMEHEADERSIZE_MAX];
	uint8_t hdr_len, hdr_need;
	bool hdr_fed;		/* the current frame's header went to libzstd */
	uint64_t frame_size;	/* its Frame_Content_Size, or
				   ZSTD_CONTENTSIZE_UNKNOWN */
};

static void zstd_frame_clear(pf_inflate *d)
{
	d->hdr_len = 0;
	d->hdr_need = 4;
	d->hdr_fed = false;
	d->frame_size = ZSTD_CONTENTSIZE_UNKNOWN;
}

/* A frame or member ended at total_in. */
static void unit_done(pf_inflate *d)
{
	d->in_member = false;
	d->units_done++;
	if (d->unit_out)
		d->quiet_start = d->total_in;
	d->unit_start = d->total_in;
	d->unit_out = 0;
	zstd_frame_clear(d);
}

int pf_inflate_create(pf_inflate **out, pf_compression comp)
{
	pf_inflate *d;

	if (comp != PF_COMP_GZIP && comp != PF_COMP_ZLIB && comp != PF_COMP_ZSTD)
		return -EINVAL;
	d = pf_calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->comp = comp;
	if (comp == PF_COMP_ZSTD) {
		d->zd = ZSTD_createDStream_advanced(PF_ZSTD_MEM);
		if (!d->zd)
			goto nomem;
	} else {
		/* 16+: gzip wrapper (any header fields); 15: zlib wrapper. */
		int wbits = comp == PF_COMP_GZIP ? 16 + MAX_WBITS : MAX_WBITS;

		d->z.zalloc = pf_zalloc_cb;
		d->z.zfree = pf_free_cb;
		if (inflateInit2(&d->z, wbits) != Z_OK)
			goto nomem;
		d->z_ready = true;
	}
	pf_inflate_reset(d);
	*out = d;
	return 0;
nomem:
	pf_free(d);
	return -ENOMEM;
}

void pf_inflate_free(pf_inflate *d)
{
	if (!d)
		return;
	if (d->z_ready)
		inflateEnd(&d->z);
	ZSTD_freeDStream(d->zd);
	pf_free(d);
}

void pf_inflate_reset(pf_inflate *d)
{
	if (d->zd)
		ZSTD_DCtx_reset(d->zd, ZSTD_reset_session_only);
	d->between = true;
	d->in_member = false;
	d->total_in = 0;
	d->unit_start = d->quiet_start = d->unit_out = 0;
	zstd_frame_clear(d);
}

uint64_t pf_inflate_total_in(const pf_inflate *d)
{
	return d->total_in;
}

static int zlib_step(pf_inflate *d, const uint8_t *in, size_t in_len,
		     size_t *in_pos, uint8_t *out, size_t out_cap,
		     size_t *out_pos, pf_error *err)
{
	const char *what = d->comp == PF_COMP_GZIP ? "gzip" : "zlib";
	size_t used;
	int zr;

	/* A member ended and more input follows: a further gzip member (or
	 * zlib stream); zlib itself checks its header. */
	if (d->between && *in_pos < in_len) {
		inflateReset(&d->z);
		d->between = false;
	}
	if (d->between)
		return 0;
	d->z.next_in = (Bytef *)(in + *in_pos);
	d->z.avail_in = (uInt)((in_len - *in_pos) > UINT32_MAX ? UINT32_MAX
							     : in_len - *in_pos);
	d->z.next_out = out + *out_pos;
	d->z.avail_out = (uInt)((out_cap - *out_pos) > UINT32_MAX ? UINT32_MAX
							       : out_cap - *out_pos);
	zr = inflate(&d->z, Z_NO_FLUSH);
	used = (size_t)(d->z.next_in - (in + *in_pos));
	if (used)
		d->in_member = true;
	d->total_in += used;
	*in_pos += used;
	d->unit_out += (size_t)(d->z.next_out - out) - *out_pos;
	*out_pos = (size_t)(d->z.next_out - out);
	switch (zr) {
	case Z_OK:
	case Z_BUF_ERROR:	/* no progress possible: the caller sees it */
		return 0;
	case Z_STREAM_END:
		d->between = true;
		unit_done(d);
		return 0;
	case Z_NEED_DICT:
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, d->total_in,
				    "%s stream needs a preset dictionary", what);
	case Z_MEM_ERROR:
		return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, d->total_in,
				    "%s: out of memory", what);
	default:
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, d->total_in,
				    "corrupt %s data: %s", what,
				    d->z.msg ? d->z.msg : "unknown error");
	}
}

static int zstd_error(pf_inflate *d, size_t r, pf_error *err)
{
	if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, d->total_in,
				    "zstd: out of memory");
	return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, d->total_in,
			    "corrupt zstd data: %s", ZSTD_getErrorName(r));
}

/* Gather the header of the frame starting at total_in, and once it is
 * whole, check its magic and hand it to libzstd on its own.
 * @return 1 when the header went to libzstd, 0 when more input is
 * needed, or a negative errno. */
static int zstd_header(pf_inflate *d, const uint8_t *in, size_t in_len,
		       size_t *in_pos, uint8_t *out, size_t out_cap,
		       size_t *out_pos, pf_error *err)
{
	uint64_t start;
	ZSTD_inBuffer ib;
	ZSTD_outBuffer ob = { out, out_cap, *out_pos };
	size_t r;

	for (;;) {
		size_t n = d->hdr_need - d->hdr_len;

		if (n > in_len - *in_pos)
			n = in_len - *in_pos;
		memcpy(d->hdr + d->hdr_len, in + *in_pos, n);
		d->hdr_len = (uint8_t)(d->hdr_len + n);
		*in_pos += n;
		d->total_in += n;
		if (n)
			d->in_member = true;
		if (d->hdr_len < d->hdr_need)
			return 0;
		start = d->total_in - d->hdr_len;
		if (d->hdr_len == 4) {
			uint32_t m = pf_load_le32(d->hdr);

			if ((m & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START)
				break;	/* no content: libzstd reads its size */
			if (m != ZSTD_MAGICNUMBER)
				return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, start,
						    "corrupt zstd data: no frame starts here "
						    "(magic 0x%08x)", (unsigned)m);
			d->hdr_need = ZSTD_FRAMEHEADERSIZE_PREFIX(ZSTD_f_zstd1);
			continue;
		}
		if (d->hdr_len == ZSTD_FRAMEHEADERSIZE_PREFIX(ZSTD_f_zstd1)) {
			r = ZSTD_frameHeaderSize(d->hdr, d->hdr_len);
			if (!ZSTD_isError(r) && r > d->hdr_len && r <= sizeof(d->hdr)) {
				d->hdr_need = (uint8_t)r;
				continue;
			}
		}
		/* Whole (or bad, which libzstd says below). */
		d->frame_size = ZSTD_getFrameContentSize(d->hdr, d->hdr_len);
		if (d->frame_size == ZSTD_CONTENTSIZE_ERROR)
			d->frame_size = ZSTD_CONTENTSIZE_UNKNOWN;
		break;
	}
	ib = (ZSTD_inBuffer){ d->hdr, d->hdr_len, 0 };
	r = ZSTD_decompressStream(d->zd, &ob, &ib);
	if (ZSTD_isError(r))
		return zstd_error(d, r, err);
	if (ib.pos != d->hdr_len || ob.pos != *out_pos || r == 0)
		return pf_error_set(err, -EPROTO, PF_OFFSET_FILE, start,
				    "zstd: frame header of %u bytes not taken whole",
				    (unsigned)d->hdr_len);
	d->hdr_fed = true;
	return 1;
}

static int zstd_step(pf_inflate *d, const uint8_t *in, size_t in_len,
		     size_t *in_pos, uint8_t *out, size_t out_cap,
		     size_t *out_pos, pf_error *err)
{
	ZSTD_inBuffer ib;
	ZSTD_outBuffer ob;
	size_t r;

	if (!d->hdr_fed) {
		int ret = zstd_header(d, in, in_len, in_pos, out, out_cap,
				      out_pos, err);
		if (ret <= 0)
			return ret;
	}
	ib = (ZSTD_inBuffer){ in, in_len, *in_pos };
	ob = (ZSTD_outBuffer){ out, out_cap, *out_pos };
	r = ZSTD_decompressStream(d->zd, &ob, &ib);
	d->total_in += ib.pos - *in_pos;
	if (ZSTD_isError(r))
		return zstd_error(d, r, err);
	d->unit_out += ob.pos - *out_pos;
	*in_pos = ib.pos;
	*out_pos = ob.pos;
	if (r == 0) {
		/* The frame is complete.  libzstd checks Frame_Content_Size
		 * only when it decodes a frame in one pass, which the header
		 * gate above rules out: check it here. */
		if (d->frame_size != ZSTD_CONTENTSIZE_UNKNOWN &&
		    d->frame_size != d->unit_out)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, d->total_in,
					    "corrupt zstd data: frame at byte %llu says "
					    "%llu bytes of content and decodes to %llu",
					    (unsigned long long)d->unit_start,
					    (unsigned long long)d->frame_size,
					    (unsigned long long)d->unit_out);
		unit_done(d);
	}
	return 0;
}

int pf_inflate_run(pf_inflate *d, const void *in, size_t in_len,
		   size_t *in_pos, void *out, size_t out_cap, size_t *out_pos,
		   pf_error *err)
{
	pf_error_clear(err);
	for (;;) {
		size_t in0 = *in_pos, out0 = *out_pos;
		int ret;

		if (*out_pos >= out_cap)
			return 0;
		if (d->comp == PF_COMP_ZSTD)
			ret = zstd_step(d, in, in_len, in_pos, out, out_cap,
					out_pos, err);
		else
			ret = zlib_step(d, in, in_len, in_pos, out, out_cap,
					out_pos, err);
		if (ret < 0)
			return ret;
		/* Stop when neither side moved: input used up and nothing
		 * left buffered inside the codec. */
		if (*in_pos == in0 && *out_pos == out0)
			return 0;
	}
}

int pf_inflate_finish(pf_inflate *d, pf_error *err)
{
	pf_error_clear(err);
	if (!d->in_member)
		return 0;
	return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, d->total_in,
			    "truncated %s stream: it ends inside a %s",
			    pf_compression_name(d->comp),
			    d->comp == PF_COMP_ZSTD ? "frame" : "member");
}

/* ------------------------------------------------------------------ */

#define PF_WINDOW_DEFAULT (256u << 10)
#define PF_HELD_DROPS 8

struct pf_recstream {
	uint64_t max_record;
	size_t window_cap;
	int comp;			/* -1 until detected */
	pf_inflate *inflate;
	pf_tfr_reader *reader;
	uint8_t *window;		/* decompressed bytes */

	/* Up to two pending file-byte sources: the detection stash, then
	 * the rest of the fed buffer (in skip mode also: a header cut by the
	 * end of the last buffer, then the new one). */
	uint8_t stash[PF_DETECT_BYTES];
	size_t stash_len;
	const uint8_t *src[2];
	size_t src_len[2], src_pos[2];
	uint64_t src_off[2];		/* file offset of src[i][0] */
	int nsrc, cur;
	bool eof;
	uint64_t fed;			/* file bytes fed so far */
	uint64_t total_out;
	/* A codec error after some good output: the records before it are
	 * delivered first, then the error. */
	int deferred;
	pf_error deferred_err;

	/* PF_CORRUPT_SKIP: see skip_step(). */
	bool skip;
	pf_drop_fn on_drop;
	void *on_drop_ctx;
	uint64_t reported;		/* drops told to on_drop */
	bool sniffing;			/* head of no known format: a codec may follow */
	bool switching;			/* a codec header found: the reader drains first */
	bool sniff_trial;		/* decoding from it, not yet confirmed */
	uint64_t sniff_at;		/* its file offset */
	/* The reader's drops while it is unconfirmed: told once it is,
	 * forgotten if it is a false header (so they never depend on how
	 * the input arrived). */
	pf_drop held[PF_HELD_DROPS];
	int nheld;
	bool held_over;			/* more than that: no codec, revert */
	bool trial_failed;		/* it failed after output the reader is reading */
	pf_error trial_cause;
	bool scanning;			/* looking for the next frame or member */
	bool dropping;			/* a codec drop not yet reported */
	pf_drop drop;			/* that drop */
	uint64_t drop_floor;		/* where its search began, less one */
	uint64_t resumed_at;		/* file offset decoding resumed at */
	bool cut_due;			/* cut the reader once it has read its bytes */
	bool codec_done;		/* the end of the file handled for the codec */
	bool reader_ended;
	uint8_t tail[PF_DETECT_BYTES];	/* a possible header cut by a buffer's end */
	size_t tail_len;
	uint64_t tail_off;
	/* The current unit's bytes from released buffers (its last
	 * PF_HISTORY), to search again when it fails; src[0] may point in. */
	uint8_t *hist;
	size_t hist_len;
	uint64_t hist_off;
	bool src0_hist;
};

static int tell(pf_recstream *s, const pf_drop *d)
{
	s->reported++;
	return s->on_drop ? s->on_drop(s->on_drop_ctx, d) : 0;
}

/* The reader's drops, held while a sniffed codec is on trial. */
static int reader_drop(void *ctx, const pf_drop *d)
{
	pf_recstream *s = ctx;

	if (!s->sniff_trial)
		return tell(s, d);
	if (s->nheld < PF_HELD_DROPS)
		s->held[s->nheld++] = *d;
	else
		s->held_over = true;
	return 0;
}

int pf_recstream_create(pf_recstream **out, const pf_recstream_config *cfg)
{
	pf_tfr_config tcfg = { 0 };
	pf_recstream *s = pf_calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	s->max_record = cfg && cfg->max_record_size ? cfg->max_record_size
						    : PF_MAX_RECORD_DEFAULT;
	s->window_cap = cfg && cfg->window ? cfg->window : PF_WINDOW_DEFAULT;
	s->comp = -1;
	tcfg.max_record_size = s->max_record;
	if (cfg) {
		tcfg.on_corrupt = cfg->on_corrupt;
		tcfg.on_drop = reader_drop;
		tcfg.on_drop_ctx = s;
		s->skip = cfg->on_corrupt == PF_CORRUPT_SKIP;
		s->on_drop = cfg->on_drop;
		s->on_drop_ctx = cfg->on_drop_ctx;
	}
	ret = pf_tfr_reader_create(&s->reader, &tcfg);
	if (ret < 0) {
		pf_free(s);
		return ret;
	}
	*out = s;
	return 0;
}

void pf_recstream_free(pf_recstream *s)
{
	if (!s)
		return;
	pf_inflate_free(s->inflate);
	pf_tfr_reader_free(s->reader);
	pf_free(s->window);
	pf_free(s->hist);
	pf_free(s);
}

void pf_recstream_feed(pf_recstream *s, const void *buf, size_t len)
{
	if (len == 0) {
		s->eof = true;
		return;
	}
	s->src[0] = buf;
	s->src_len[0] = len;
	s->src_pos[0] = 0;
	s->src_off[0] = s->fed;
	s->fed += len;
	s->nsrc = 1;
	s->cur = 0;
}

pf_compression pf_recstream_compression(const pf_recstream *s)
{
	return s->comp < 0 ? PF_COMP_NONE : (pf_compression)s->comp;
}

uint64_t pf_recstream_total_out(const pf_recstream *s)
{
	return s->total_out;
}

uint64_t pf_recstream_drops(const pf_recstream *s)
{
	return s->reported;
}

/* The decoder of codec c and the decompression window, made when not
 * there yet (kept across a second decision after -ENOMEM). */
static int make_decoder(pf_recstream *s, pf_compression c, pf_error *err)
{
	int ret = s->inflate ? 0 : pf_inflate_create(&s->inflate, c);

	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "cannot create a %s decoder",
				    pf_compression_name(c));
	if (!s->window)
		s->window = pf_malloc(s->window_cap);
	if (!s->window)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory for the decompression window");
	return 0;
}

/* Gather the first bytes and decide the format.  @return 1 when decided,
 * 0 when more bytes are needed, <0 on error. */
static int detect(pf_recstream *s, pf_error *err)
{
	if (s->nsrc) {
		size_t take = PF_DETECT_BYTES - s->stash_len;
		size_t avail = s->src_len[0] - s->src_pos[0];

		if (take > avail)
			take = avail;
		memcpy(s->stash + s->stash_len, s->src[0] + s->src_pos[0], take);
		s->stash_len += take;
		s->src_pos[0] += take;
	}
	if (s->stash_len < PF_DETECT_BYTES && !s->eof)
		return 0;

	int c = pf_compression_detect(s->stash, s->stash_len);
	/* Neither a TFRecord header nor a codec's magic: read it as a
	 * TFRecord so the error is the precise one ("bad length CRC at
	 * byte 0"). */
	if (c < 0) {
		c = PF_COMP_NONE;
		/* Skip mode: damage at byte 0 may hide a codec's magic;
		 * look for one until a record comes out. */
		s->sniffing = s->skip;
	}
	/* The format counts as decided only once its decoder exists: after
	 * -ENOMEM a later call decides again and makes what is missing. */
	if (c != PF_COMP_NONE) {
		int ret = make_decoder(s, (pf_compression)c, err);

		if (ret < 0)
			return ret;
	}
	s->comp = c;
	/* Process the stash first, then whatever is left of the feed. */
	s->src[1] = s->src[0];
	s->src_len[1] = s->src_len[0];
	s->src_pos[1] = s->src_pos[0];
	s->src_off[1] = s->src_off[0];
	s->src[0] = s->stash;
	s->src_len[0] = s->stash_len;
	s->src_pos[0] = 0;
	s->src_off[0] = 0;
	s->cur = 0;
	s->nsrc = s->nsrc ? 2 : 1;
	if (c == PF_COMP_NONE && !s->sniffing) {
		pf_tfr_reader_feed(s->reader, s->stash, s->stash_len);
		s->src_pos[0] = s->stash_len;
		s->total_out += s->stash_len;
	}
	return 1;
}

/* ------------------------------------------------------------------ */
/* Skip mode                                                            */
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
	pf_inflate *d = s->inflate;

	s->scanning = false;
	s->resumed_at = off;
	if (d->zd)
		ZSTD_DCtx_reset(d->zd, ZSTD_reset_session_only);
	d->between = true;	/* zlib_step resets for a new member */
	d->in_member = false;
	d->total_in = off;
	d->unit_start = d->quiet_start = off;
	d->unit_out = 0;
	zstd_frame_clear(d);
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
	ret = tell(s, &s->drop);
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
	ret = make_decoder(s, c, err);
	if (ret < 0)
		return ret;
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

/* The sniffed codec holds: tell the drops held meanwhile. */
static int confirm(pf_recstream *s, pf_error *err)
{
	int ret = 0, i;

	s->sniff_trial = false;
	for (i = 0; i < s->nheld && ret >= 0; i++)
		ret = tell(s, &s->held[i]);
	if (ret < 0) {
		s->deferred = ret;
		s->deferred_err = s->held[i - 1].cause;
		s->deferred_err.code = ret;
		if (err)
			*err = s->deferred_err;
	}
	s->nheld = 0;
	return ret;
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
		int r2 = confirm(s, err);	/* a whole unit: the codec holds */
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
		 * in smaller pieces).  skip_step() decides after. */
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
static int skip_step(pf_recstream *s, pf_error *err)
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

int pf_recstream_next(pf_recstream *s, pf_record *rec, pf_error *err)
{
	int ret;

	pf_error_clear(err);
	if (s->comp < 0) {
		ret = detect(s, err);
		if (ret <= 0)
			return ret;
	}
	for (;;) {
		ret = pf_tfr_reader_next(s->reader, rec, err);
		if (ret == 1 && s->sniff_trial) {
			/* A record from the sniffed codec: it holds; what was
			 * dropped before this record is told first. */
			int r2 = confirm(s, err);
			if (r2 < 0)
				return r2;
		}
		if (ret != 0)
			return ret;
		if (s->deferred) {
			if (err)
				*err = s->deferred_err;
			return s->deferred;
		}
		if (s->skip) {
			ret = skip_step(s, err);
			if (ret == 1)
				continue;
			return ret;
		}
		/* The reader used up its bytes: find the next ones. */
		while (s->cur < s->nsrc && s->src_pos[s->cur] == s->src_len[s->cur])
			s->cur++;
		if (s->comp == PF_COMP_NONE) {
			if (s->cur >= s->nsrc)
				return 0;
			pf_tfr_reader_feed(s->reader, s->src[s->cur] + s->src_pos[s->cur],
					   s->src_len[s->cur] - s->src_pos[s->cur]);
			s->total_out += s->src_len[s->cur] - s->src_pos[s->cur];
			s->src_pos[s->cur] = s->src_len[s->cur];
			continue;
		}
		/* Compressed: refill the window.  At end of input the codec
		 * may still hold output, so run it once more with nothing. */
		size_t produced = 0;
		if (s->cur < s->nsrc) {
			ret = pf_inflate_run(s->inflate, s->src[s->cur],
					     s->src_len[s->cur], &s->src_pos[s->cur],
					     s->window, s->window_cap, &produced, err);
		} else {
			size_t none = 0;
			ret = pf_inflate_run(s->inflate, s->stash, 0, &none,
					     s->window, s->window_cap, &produced, err);
		}
		if (ret < 0) {
			if (produced == 0)
				return ret;
			s->deferred = ret;
			if (err)
				s->deferred_err = *err;
		}
		if (produced == 0 && s->cur >= s->nsrc)
			return 0;
		pf_tfr_reader_feed(s->reader, s->window, produced);
		s->total_out += produced;
	}
}

int pf_recstream_finish(pf_recstream *s, pf_error *err)
{
	int ret;

	pf_error_clear(err);
	if (s->skip) {
		/* The end was handled in next(), which must have run out. */
		pf_record rec;

		s->eof = true;
		ret = pf_recstream_next(s, &rec, err);
		if (ret > 0)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "finish called with records still pending");
		if (ret < 0)
			return ret;
		return pf_tfr_reader_finish(s->reader, err);
	}
	if (s->comp < 0) {
		/* Fewer bytes than the detector wanted, all of them fed. */
		s->eof = true;
		pf_record rec;
		ret = pf_recstream_next(s, &rec, err);
		if (ret < 0)
			return ret;
		if (ret > 0)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "finish called with records still pending");
	}
	if (s->inflate) {
		ret = pf_inflate_finish(s->inflate, err);
		if (ret < 0)
			return ret;
	}
	return pf_tfr_reader_finish(s->reader, err);
}
