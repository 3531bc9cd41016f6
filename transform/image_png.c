// SPDX-License-Identifier: Apache-2.0
/* PNG through libspng: the header, and a region's rows (every row above
 * the region is decoded and dropped, as PNG's filters need; rows below it
 * are not decoded).  Not the crop rule nor the resize.
 *
 * The output is PIL's convert("RGB") / ("L") of the file: palette
 * expanded, alpha dropped (not composited), 16-bit samples cut to their
 * high byte, no gamma applied.  Interlaced (Adam7) files are decoded
 * whole.  A file whose last 12 bytes are not the IEND chunk is truncated,
 * even when the rows decoded end before the damage; the CRCs of critical
 * chunks and zlib's Adler-32 are checked by libspng. */
#include <errno.h>
#include <string.h>

#include <spng.h>

#include "alloc_internal.h"
#include "image_internal.h"

static void *png_malloc(size_t n)
{
	return pf_malloc(n);
}

static void *png_realloc(void *p, size_t n)
{
	return pf_realloc(p, n);
}

static void *png_calloc(size_t n, size_t size)
{
	return pf_calloc(n, size);
}

static void png_free(void *p)
{
	pf_free(p);
}

static struct spng_alloc png_alloc = {
	.malloc_fn = png_malloc,
	.realloc_fn = png_realloc,
	.calloc_fn = png_calloc,
	.free_fn = png_free,
};

/* The largest side libspng is let decode; the pixel limit is the caller's. */
#define PNG_MAX_SIDE (1u << 20)

static int png_open(spng_ctx **out, const uint8_t *data, size_t len, struct spng_ihdr *ihdr,
		    pf_error *err)
{
	spng_ctx *ctx = spng_ctx_new2(&png_alloc, 0);
	int ret;

	*out = NULL;
	if (!ctx)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "PNG: out of memory");
	spng_set_image_limits(ctx, PNG_MAX_SIDE, PNG_MAX_SIDE);
	/* Ancillary chunks (text, ICC profiles) are not for a bomb either. */
	spng_set_chunk_limits(ctx, 16u << 20, 64u << 20);
	ret = spng_set_png_buffer(ctx, data, len);
	if (!ret)
		ret = spng_get_ihdr(ctx, ihdr);
	if (ret) {
		spng_ctx_free(ctx);
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0, "PNG header: %s",
				    spng_strerror(ret));
	}
	*out = ctx;
	return 0;
}

static const char *png_color(uint8_t type)
{
	switch (type) {
	case SPNG_COLOR_TYPE_GRAYSCALE:
		return "gray";
	case SPNG_COLOR_TYPE_TRUECOLOR:
		return "rgb";
	case SPNG_COLOR_TYPE_INDEXED:
		return "palette";
	case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
		return "gray+alpha";
	default:
		return "rgba";
	}
}

static int png_probe(const uint8_t *data, size_t len, pf_image_info *info, pf_error *err)
{
	struct spng_ihdr ihdr;
	spng_ctx *ctx;
	int rc = png_open(&ctx, data, len, &ihdr, err);

	if (rc)
		return rc;
	memset(info, 0, sizeof(*info));
	info->format = PF_IMAGE_PNG;
	info->width = ihdr.width;
	info->height = ihdr.height;
	info->progressive = ihdr.interlace_method != SPNG_INTERLACE_NONE;
	info->color = png_color(ihdr.color_type);
	info->components = ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE ? 1
			 : ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ? 2
			 : ihdr.color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ? 4 : 3;
	spng_ctx_free(ctx);
	return 0;
}

/* A row of the whole width in RGB8 (interlaced: the whole image), and the
 * region's row converted. */
static size_t png_scratch_bytes(const pf_image_info *info, const pf_image_request *req)
{
	size_t row = (size_t)info->width * 3;

	(void)req;
	return (info->progressive ? row * info->height : row) + 64 + (size_t)info->width * 3;
}

static bool has_iend(const uint8_t *data, size_t len)
{
	static const uint8_t iend[12] = { 0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82 };

	return len >= 12 && !memcmp(data + len - 12, iend, 12);
}

static int png_decode(const uint8_t *data, size_t len, const pf_image_info *info,
		      const pf_image_request *req, uint8_t *scratch, pf_image_row_fn row,
		      void *ctx_row, pf_error *err)
{
	size_t row_bytes = (size_t)info->width * 3;
	uint8_t *conv = scratch + (info->progressive ? row_bytes * info->height : row_bytes) + 64;
	struct spng_ihdr ihdr;
	spng_ctx *ctx;
	int rc, ret = 0;

	if (!has_iend(data, len))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, len,
				    "PNG: the file does not end with an IEND chunk: the data "
				    "is truncated");
	rc = png_open(&ctx, data, len, &ihdr, err);
	if (rc)
		return rc;
	if (info->progressive) {
		ret = spng_decode_image(ctx, scratch, row_bytes * info->height, SPNG_FMT_RGB8, 0);
		if (ret)
			goto fail;
	} else {
		ret = spng_decode_image(ctx, NULL, 0, SPNG_FMT_RGB8, SPNG_DECODE_PROGRESSIVE);
		if (ret)
			goto fail;
	}
	for (uint32_t y = 0; y < req->y + req->h; y++) {
		const uint8_t *px = scratch;

		if (info->progressive) {
			px = scratch + (size_t)y * row_bytes;
		} else {
			ret = spng_decode_row(ctx, scratch, row_bytes);
			if (ret && ret != SPNG_EOI)
				goto fail;
			if (ret == SPNG_EOI && y + 1 < req->y + req->h) {
				ret = SPNG_EOI;
				goto fail;
			}
			ret = 0;
		}
		if (y < req->y)
			continue;
		px += (size_t)req->x * 3;
		if (req->channels == 1) {
			pf_image_rgb_to_luma(conv, px, req->w);
			px = conv;
		}
		rc = row(ctx_row, y - req->y, px);
		if (rc)
			goto out;
	}
	goto out;
fail:
	rc = pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0, "PNG: %s", spng_strerror(ret));
out:
	spng_ctx_free(ctx);
	return rc;
}

const pf_image_decoder pf_image_png = {
	.format = PF_IMAGE_PNG,
	.name = "png",
	.dct_scaling = false,
	.probe = png_probe,
	.scratch_bytes = png_scratch_bytes,
	.decode = png_decode,
};
