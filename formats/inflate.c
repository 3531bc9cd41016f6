/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-stream codecs: which one a file's first bytes are (gzip, zlib,
 * zstd or none), and pf_inflate, the streaming decoder of each, one frame
 * or member after another.  The record stream over them is recstream.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "stream_internal.h"

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

void pf_inflate_restart(pf_inflate *d, uint64_t off)
{
	if (d->zd)
		ZSTD_DCtx_reset(d->zd, ZSTD_reset_session_only);
	d->between = true;	/* zlib_step resets for a new member */
	d->in_member = false;
	d->total_in = off;
	d->unit_start = d->quiet_start = off;
	d->unit_out = 0;
	zstd_frame_clear(d);
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
