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
};

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
	*out_pos = (size_t)(d->z.next_out - out);
	switch (zr) {
	case Z_OK:
	case Z_BUF_ERROR:	/* no progress possible: the caller sees it */
		return 0;
	case Z_STREAM_END:
		d->between = true;
		d->in_member = false;
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

static int zstd_step(pf_inflate *d, const uint8_t *in, size_t in_len,
		     size_t *in_pos, uint8_t *out, size_t out_cap,
		     size_t *out_pos, pf_error *err)
{
	ZSTD_inBuffer ib = { in, in_len, *in_pos };
	ZSTD_outBuffer ob = { out, out_cap, *out_pos };
	size_t r = ZSTD_decompressStream(d->zd, &ob, &ib);

	d->total_in += ib.pos - *in_pos;
	if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, d->total_in,
				    "zstd: out of memory");
	if (ZSTD_isError(r))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, d->total_in,
				    "corrupt zstd data: %s", ZSTD_getErrorName(r));
	if (ib.pos > *in_pos)
		d->in_member = r != 0;	/* 0: a frame is complete */
	*in_pos = ib.pos;
	*out_pos = ob.pos;
	return 0;
}

int pf_inflate_run(pf_inflate *d, const void *in, size_t in_len,
		   size_t *in_pos, void *out, size_t out_cap, size_t *out_pos,
		   pf_error *err)
{
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
	if (!d->in_member)
		return 0;
	return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, d->total_in,
			    "truncated %s stream: it ends inside a %s",
			    pf_compression_name(d->comp),
			    d->comp == PF_COMP_ZSTD ? "frame" : "member");
}

/* ------------------------------------------------------------------ */

#define PF_WINDOW_DEFAULT (256u << 10)

struct pf_recstream {
	uint64_t max_record;
	size_t window_cap;
	int comp;			/* -1 until detected */
	pf_inflate *inflate;
	pf_tfr_reader *reader;
	uint8_t *window;		/* decompressed bytes */

	/* Up to two pending file-byte sources: the detection stash, then
	 * the rest of the fed buffer. */
	uint8_t stash[PF_DETECT_BYTES];
	size_t stash_len;
	const uint8_t *src[2];
	size_t src_len[2], src_pos[2];
	int nsrc, cur;
	bool eof;
	uint64_t total_out;
	/* A codec error after some good output: the records before it are
	 * delivered first, then the error. */
	int deferred;
	pf_error deferred_err;
};

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
	if (c < 0)
		c = PF_COMP_NONE;
	/* The format counts as decided only once its decoder exists: after
	 * -ENOMEM a later call decides again and makes what is missing. */
	if (c != PF_COMP_NONE) {
		int ret = s->inflate ? 0 : pf_inflate_create(&s->inflate, (pf_compression)c);
		if (ret < 0)
			return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
					    "cannot create a %s decoder",
					    pf_compression_name((pf_compression)c));
		if (!s->window)
			s->window = pf_malloc(s->window_cap);
		if (!s->window)
			return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
					    "no memory for the decompression window");
	}
	s->comp = c;
	/* Process the stash first, then whatever is left of the feed. */
	s->src[1] = s->src[0];
	s->src_len[1] = s->src_len[0];
	s->src_pos[1] = s->src_pos[0];
	s->src[0] = s->stash;
	s->src_len[0] = s->stash_len;
	s->src_pos[0] = 0;
	s->cur = 0;
	s->nsrc = s->nsrc ? 2 : 1;
	if (c == PF_COMP_NONE) {
		pf_tfr_reader_feed(s->reader, s->stash, s->stash_len);
		s->src_pos[0] = s->stash_len;
		s->total_out += s->stash_len;
	}
	return 1;
}

int pf_recstream_next(pf_recstream *s, pf_record *rec, pf_error *err)
{
	int ret;

	if (s->comp < 0) {
		ret = detect(s, err);
		if (ret <= 0)
			return ret;
	}
	for (;;) {
		ret = pf_tfr_reader_next(s->reader, rec, err);
		if (ret != 0)
			return ret;
		if (s->deferred) {
			if (err)
				*err = s->deferred_err;
			return s->deferred;
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
