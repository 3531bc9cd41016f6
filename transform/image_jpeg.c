// SPDX-License-Identifier: Apache-2.0
/* JPEG through libjpeg-turbo's libjpeg API: the header, and a region's
 * rows decoded alone (jpeg_crop_scanline(), jpeg_skip_scanlines()) at
 * 1/1 to 1/8 scale.  Not the crop rule nor the resize.
 *
 * Why the libjpeg API and not TurboJPEG's: Debian 12's libturbojpeg is
 * 2.1.5, whose TurboJPEG API has no partial decode (tj3SetCroppingRegion
 * is 3.0's); libjpeg-turbo 2.1's libjpeg API has both partial decoding
 * and DCT scaling.
 *
 * The output is what PIL makes of the file (Image.open() then
 * convert("RGB") or ("L")), PIL being libjpeg-turbo with the same
 * defaults (islow IDCT, fancy upsampling): RGB as decoded, gray
 * replicated, CMYK and YCCK in Adobe's inverted polarity converted by
 * PIL's formula, luma by PIL's.  EXIF orientation is not applied, as PIL's
 * Image.open(), torchvision and tf.image.decode_jpeg do not.
 *
 * Every libjpeg warning is an error ("Premature end of JPEG file",
 * "Corrupt JPEG data: N extraneous bytes"): a damaged record never
 * becomes a plausible image.  A file without its EOI marker (FF D9) in its
 * last 4 KiB is truncated even when the region decoded ends before the
 * damage. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>

#include "image_internal.h"

typedef pf_jpeg_guard jpeg_guard;

void pf_jpeg_on_error(j_common_ptr cinfo)
{
	jpeg_guard *g = (jpeg_guard *)cinfo->err;

	(*cinfo->err->format_message)(cinfo, g->msg);
	longjmp(g->jump, 1);
}

/* Warnings (level -1) stop the decode as errors do; trace messages
 * (level >= 0) are dropped. */
static void on_message(j_common_ptr cinfo, int level)
{
	if (level < 0)
		pf_jpeg_on_error(cinfo);
}

static void guard_init(struct jpeg_decompress_struct *cinfo, jpeg_guard *g)
{
	cinfo->err = jpeg_std_error(&g->pub);
	g->pub.error_exit = pf_jpeg_on_error;
	g->pub.emit_message = on_message;
	g->msg[0] = '\0';
}

/* The byte the decoder had reached: where its source stands. */
static uint64_t jpeg_where(const struct jpeg_decompress_struct *cinfo, size_t len)
{
	if (!cinfo->src)
		return 0;
	return len - cinfo->src->bytes_in_buffer;
}

static const char *color_name(J_COLOR_SPACE cs)
{
	switch (cs) {
	case JCS_GRAYSCALE:
		return "gray";
	case JCS_RGB:
		return "rgb";
	case JCS_YCbCr:
		return "ycbcr";
	case JCS_CMYK:
		return "cmyk";
	case JCS_YCCK:
		return "ycck";
	default:
		return "unknown";
	}
}

static int header_into(struct jpeg_decompress_struct *cinfo, pf_image_info *info)
{
	memset(info, 0, sizeof(*info));
	info->format = PF_IMAGE_JPEG;
	info->width = cinfo->image_width;
	info->height = cinfo->image_height;
	info->components = (uint32_t)cinfo->num_components;
	info->progressive = cinfo->progressive_mode;
	info->color = color_name(cinfo->jpeg_color_space);
	if (cinfo->num_components != 1 && cinfo->num_components != 3 &&
	    cinfo->num_components != 4)
		return -1;
	return 0;
}

static int jpeg_probe(const uint8_t *data, size_t len, pf_image_info *info, pf_error *err)
{
	struct jpeg_decompress_struct cinfo;
	jpeg_guard g;
	volatile int rc = 0;

	memset(&cinfo, 0, sizeof(cinfo));
	guard_init(&cinfo, &g);
	if (setjmp(g.jump)) {
		rc = pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, jpeg_where(&cinfo, len),
				  "JPEG header: %s", g.msg);
		goto out;
	}
	jpeg_create_decompress(&cinfo);
	jpeg_mem_src(&cinfo, data, (unsigned long)len);
	jpeg_read_header(&cinfo, TRUE);
	if (header_into(&cinfo, info) < 0)
		rc = pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				  "JPEG of %d components (1, 3 or 4 are read)",
				  cinfo.num_components);
out:
	jpeg_destroy_decompress(&cinfo);
	return rc;
}

/* Decoded width of a row when the crop is requested: at most the scaled
 * image's; the widest component sample is 4 bytes (CMYK). */
static size_t jpeg_scratch_bytes(const pf_image_info *info, const pf_image_request *req)
{
	size_t w = (info->width + req->scale - 1) / req->scale;

	return (w + 64) * 4 + w * 3;
}

/* PIL's CMYK (inverted, Adobe's polarity) to RGB: ImagingConvert's
 * cmyk2rgb() on "CMYK;I" data. */
static void cmyk_to_rgb(uint8_t *dst, const uint8_t *src, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		int nk = src[i * 4 + 3];	/* 255 - k, k being 255 - stored */

		for (int c = 0; c < 3; c++) {
			int v = src[i * 4 + c];	/* 255 - c */
			int cc = 255 - v, tmp = cc * nk + 128;
			int o = nk - (((tmp >> 8) + tmp) >> 8);

			dst[i * 3 + c] = (uint8_t)(o < 0 ? 0 : o > 255 ? 255 : o);
		}
	}
}

static bool has_eoi(const uint8_t *data, size_t len)
{
	size_t lo = len > 4096 ? len - 4096 : 0;

	for (size_t i = len; i >= lo + 2; i--)
		if (data[i - 2] == 0xff && data[i - 1] == 0xd9)
			return true;
	return false;
}

static int jpeg_decode(const uint8_t *data, size_t len, const pf_image_info *info,
		       const pf_image_request *req, uint8_t *scratch, pf_image_row_fn row,
		       void *ctx, pf_error *err)
{
	struct jpeg_decompress_struct cinfo;
	jpeg_guard g;
	volatile int rc = 0;
	uint8_t *line = scratch;
	uint8_t *conv;
	JDIMENSION xoff, cw;
	uint32_t in_ch;

	(void)info;
	if (!has_eoi(data, len))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, len,
				    "JPEG: no end-of-image marker (FF D9): the data is "
				    "truncated");
	memset(&cinfo, 0, sizeof(cinfo));
	guard_init(&cinfo, &g);
	if (setjmp(g.jump)) {
		rc = pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, jpeg_where(&cinfo, len),
				  "JPEG: %s", g.msg);
		goto out;
	}
	jpeg_create_decompress(&cinfo);
	/* libjpeg allocates with malloc() (its memory manager has no hook);
	 * a progressive image's coefficients (2 bytes a sample) are its
	 * largest: bounded by the pixel limit the caller checked. */
	cinfo.mem->max_memory_to_use = (long)(req->max_pixels * 8 + (16u << 20));
	jpeg_mem_src(&cinfo, data, (unsigned long)len);
	jpeg_read_header(&cinfo, TRUE);
	cinfo.scale_num = 1;
	cinfo.scale_denom = req->scale;
	cinfo.dct_method = JDCT_ISLOW;
	cinfo.do_fancy_upsampling = TRUE;
	switch (cinfo.jpeg_color_space) {
	case JCS_GRAYSCALE:
		/* Gray as RGB: libjpeg-turbo replicates it, as PIL's convert(). */
		cinfo.out_color_space = req->channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
		in_ch = req->channels == 3 ? 3 : 1;
		break;
	case JCS_CMYK:
	case JCS_YCCK:
		cinfo.out_color_space = JCS_CMYK;
		in_ch = 4;
		break;
	default:
		cinfo.out_color_space = JCS_RGB;
		in_ch = 3;
		break;
	}
	jpeg_start_decompress(&cinfo);
	/* A column more on each side than asked, where there is one: the
	 * upsampler treats the crop's edge as the image's, so the first and
	 * last columns of a cropped decode may differ from the full decode's. */
	xoff = req->x > 0 ? req->x - 1 : 0;
	cw = req->x + req->w < cinfo.output_width ? req->x + req->w + 1 - xoff
						   : cinfo.output_width - xoff;
	if (xoff > 0 || cw < cinfo.output_width)
		jpeg_crop_scanline(&cinfo, &xoff, &cw);
	conv = line + ((size_t)cw * in_ch + 63) / 64 * 64;
	if (req->y > 0 && jpeg_skip_scanlines(&cinfo, req->y) != req->y) {
		rc = pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, jpeg_where(&cinfo, len),
				  "JPEG: could not skip to row %u", req->y);
		goto out;
	}
	for (uint32_t r = 0; r < req->h; r++) {
		JSAMPROW rows[1] = { line };
		const uint8_t *px;
		uint32_t ch = in_ch;
		int ret;

		if (jpeg_read_scanlines(&cinfo, rows, 1) != 1) {
			rc = pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM,
					  jpeg_where(&cinfo, len), "JPEG: row %u not decoded",
					  req->y + r);
			goto out;
		}
		px = line + (size_t)(req->x - xoff) * in_ch;
		if (ch == 4) {
			cmyk_to_rgb(conv, px, req->w);
			px = conv;
			ch = 3;
		}
		if (ch == 3 && req->channels == 1) {
			pf_image_rgb_to_luma(conv, px, req->w);
			px = conv;
		}
		ret = row(ctx, r, px);
		if (ret) {
			rc = ret;
			goto out;
		}
	}
out:
	jpeg_destroy_decompress(&cinfo);
	return rc;
}

const pf_image_decoder pf_image_jpeg = {
	.format = PF_IMAGE_JPEG,
	.name = "jpeg",
	.dct_scaling = true,
	.probe = jpeg_probe,
	.scratch_bytes = jpeg_scratch_bytes,
	.decode = jpeg_decode,
};
