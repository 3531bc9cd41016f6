// SPDX-License-Identifier: Apache-2.0
/* An image record's transform: the decoder table, the spec's checks, the
 * box chosen, the DCT scale chosen, the decoder fed into the resampler,
 * and the output's layout and dtype.  The decoders are image_jpeg.c and
 * image_png.c, the resampler image_resize.c, the crop rules
 * image_crop.c. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "alloc_internal.h"
#include "image_internal.h"

/* The decoders, by format. */
static const pf_image_decoder *const decoders[] = {
	&pf_image_jpeg,
	&pf_image_png,
};

const pf_image_decoder *pf_image_decoder_for(pf_image_format f)
{
	for (size_t i = 0; i < sizeof(decoders) / sizeof(decoders[0]); i++)
		if (decoders[i]->format == f)
			return decoders[i];
	return NULL;
}

pf_image_format pf_image_sniff(const void *data, size_t len)
{
	static const uint8_t png_sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	const uint8_t *p = data;

	if (len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
		return PF_IMAGE_JPEG;
	if (len >= 8 && !memcmp(p, png_sig, 8))
		return PF_IMAGE_PNG;
	return PF_IMAGE_UNKNOWN;
}

const char *pf_image_format_name(pf_image_format f)
{
	const pf_image_decoder *d = pf_image_decoder_for(f);

	return d ? d->name : "unknown";
}

void pf_image_rgb_to_luma(uint8_t *dst, const uint8_t *src, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		dst[i] = (uint8_t)((src[i * 3] * 19595u + src[i * 3 + 1] * 38470u +
				    src[i * 3 + 2] * 7471u + 0x8000u) >> 16);
}

void pf_image_spec_init(pf_image_spec *s, uint32_t height, uint32_t width,
			pf_image_augment augment)
{
	memset(s, 0, sizeof(*s));
	s->height = height;
	s->width = width;
	s->channels = 3;
	s->augment = augment;
	s->dtype = PF_IMAGE_UINT8;
	for (int c = 0; c < 3; c++)
		s->std[c] = 1.0f;
	s->scale_lo = 0.08;
	s->scale_hi = 1.0;
	s->ratio_lo = 3.0 / 4.0;
	s->ratio_hi = 4.0 / 3.0;
	s->flip = true;
	s->max_pixels = PF_IMAGE_DEFAULT_MAX_PIXELS;
}

size_t pf_image_out_bytes(const pf_image_spec *s)
{
	size_t v = (size_t)s->height * s->width * s->channels;

	return s->dtype == PF_IMAGE_FLOAT32 ? v * 4 : s->dtype == PF_IMAGE_BFLOAT16 ? v * 2 : v;
}

int pf_image_spec_check(const pf_image_spec *s, pf_error *err)
{
	if (s->height < 1 || s->width < 1 || s->height > PF_IMAGE_MAX_SIDE ||
	    s->width > PF_IMAGE_MAX_SIDE)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "image size %ux%u: each side must be 1..%u", s->height,
				    s->width, PF_IMAGE_MAX_SIDE);
	if (s->channels != 1 && s->channels != 3)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "image channels=%u: must be 3 or 1", s->channels);
	if (!(s->scale_lo > 0 && s->scale_lo <= s->scale_hi && s->scale_hi <= 1))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "image scale=%g:%g: must be 0 < A <= B <= 1", s->scale_lo,
				    s->scale_hi);
	if (!(s->ratio_lo > 0 && s->ratio_lo <= s->ratio_hi && isfinite(s->ratio_hi)))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "image ratio=%g:%g: must be 0 < A <= B", s->ratio_lo,
				    s->ratio_hi);
	for (int c = 0; c < 3; c++)
		if (!(s->std[c] != 0 && isfinite(s->std[c]) && isfinite(s->mean[c])))
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "image mean/std: each finite, std nonzero");
	if (s->max_pixels < 1)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "image max_pixels must be at least 1");
	return 0;
}

void pf_image_scratch_free(pf_image_scratch *s)
{
	pf_free(s->mem);
	s->mem = NULL;
	s->cap = 0;
}

static int scratch_reserve(pf_image_scratch *s, size_t need, pf_error *err)
{
	uint8_t *m;

	if (need <= s->cap)
		return 0;
	m = pf_malloc(need);
	if (!m)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "image: no memory for %zu bytes of scratch", need);
	pf_free(s->mem);
	s->mem = m;
	s->cap = need;
	if (need > s->peak)
		s->peak = need;
	return 0;
}

int pf_image_probe(const void *data, size_t len, pf_image_info *info, pf_error *err)
{
	const pf_image_decoder *d;
	const uint8_t *p = data;

	pf_error_clear(err);
	memset(info, 0, sizeof(*info));
	if (len == 0)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, 0,
				    "not an image: 0 bytes");
	d = pf_image_decoder_for(pf_image_sniff(data, len));
	if (!d)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_STREAM, 0,
				    "not an image: neither JPEG (FF D8 FF) nor PNG; the "
				    "first bytes are %02x %02x %02x %02x",
				    p[0], len > 1 ? p[1] : 0, len > 2 ? p[2] : 0,
				    len > 3 ? p[3] : 0);
	return d->probe(p, len, info, err);
}

static int check_size(const pf_image_info *info, uint64_t max_pixels, pf_error *err)
{
	uint64_t px = (uint64_t)info->width * info->height;

	if (info->width == 0 || info->height == 0)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "%s image of %ux%u pixels", pf_image_format_name(info->format),
				    info->width, info->height);
	if (px > max_pixels)
		return pf_error_set(err, -EFBIG, PF_OFFSET_NONE, 0,
				    "%s image of %ux%u = %llu pixels, over the limit of "
				    "%llu (max_pixels)",
				    pf_image_format_name(info->format), info->width,
				    info->height, (unsigned long long)px,
				    (unsigned long long)max_pixels);
	return 0;
}

/* The resampler fed by the decoder. */
static int push_row(void *ctx, uint32_t row, const uint8_t *px)
{
	(void)row;
	pf_resampler_push(ctx, px);
	return 0;
}

/* Output of the HWC uint8 image into the spec's layout and dtype. */
static uint16_t to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static void convert_out(const pf_image_spec *s, const uint8_t *hwc, void *dst)
{
	size_t plane = (size_t)s->height * s->width, ch = s->channels;
	float lut[3][256];

	if (s->dtype == PF_IMAGE_UINT8) {
		uint8_t *o = dst;

		for (size_t i = 0; i < plane; i++)
			for (size_t c = 0; c < ch; c++)
				o[c * plane + i] = hwc[i * ch + c];
		return;
	}
	for (size_t c = 0; c < ch; c++)
		for (int v = 0; v < 256; v++)
			lut[c][v] = ((float)v / 255.0f - s->mean[c]) / s->std[c];
	for (size_t i = 0; i < plane; i++)
		for (size_t c = 0; c < ch; c++) {
			size_t at = s->nchw ? c * plane + i : i * ch + c;
			float f = lut[c][hwc[i * ch + c]];

			if (s->dtype == PF_IMAGE_FLOAT32)
				((float *)dst)[at] = f;
			else
				((uint16_t *)dst)[at] = to_bf16(f);
		}
}

/* The DCT scale: the largest of 8, 4, 2 at which the box still has the
 * size it is resized to, w x h (torchvision's RandomResizedCrop output is
 * never upscaled from a box at least that large, and the filter then
 * reads the scaled pixels). */
static uint32_t choose_scale(double bw, double bh, uint32_t w, uint32_t h)
{
	for (uint32_t d = 8; d > 1; d /= 2)
		if (bw / d >= w && bh / d >= h)
			return d;
	return 1;
}

/* The core: box (x0, y0, x1, y1, fractional) of the image resized, the
 * filter clamping at the integer region clamp (x, y, w, h), into the
 * output's pixels place (NULL: all of them; else the others are 0). */
static int run(const pf_image_spec *spec, const uint8_t *data, size_t len,
	       const pf_image_decoder *dec, const pf_image_info *info, const double box[4],
	       const pf_crop_box *clamp, const pf_crop_box *place, bool flip,
	       uint32_t dct_scale, void *dst, pf_image_scratch *scratch, pf_image_note *note,
	       pf_error *err)
{
	pf_crop_box all = { 0, 0, spec->width, spec->height };
	uint32_t d = dct_scale, sw, sh, rx0, ry0, rx1, ry1;
	double bx0, by0, bx1, by1;
	bool direct = spec->dtype == PF_IMAGE_UINT8 && (!spec->nchw || spec->channels == 1);
	size_t rs_bytes, dec_bytes, out_bytes, need;
	pf_image_request req;
	pf_resampler rs;
	uint8_t *hwc;
	int rc;

	if (!place)
		place = &all;
	if (d == 0)
		d = dec->dct_scaling ? choose_scale(box[2] - box[0], box[3] - box[1], place->w,
						    place->h)
				     : 1;
	if (!dec->dct_scaling)
		d = 1;
	sw = (info->width + d - 1) / d;
	sh = (info->height + d - 1) / d;
	rx0 = clamp->x / d;
	ry0 = clamp->y / d;
	rx1 = (clamp->x + clamp->w + d - 1) / d;
	ry1 = (clamp->y + clamp->h + d - 1) / d;
	if (rx1 > sw)
		rx1 = sw;
	if (ry1 > sh)
		ry1 = sh;
	bx0 = box[0] / d - rx0;
	by0 = box[1] / d - ry0;
	bx1 = box[2] / d - rx0;
	by1 = box[3] / d - ry0;
	rs_bytes = pf_resampler_bytes(rx1 - rx0, ry1 - ry0, bx0, by0, bx1, by1, place->w,
				      place->h, spec->channels);
	out_bytes = direct ? 0 : (size_t)spec->height * spec->width * spec->channels;
	/* The decoder's part is sized from the request, known after the
	 * resampler's init; its bound from the whole width serves. */
	req.x = 0;
	req.y = 0;
	req.w = sw;
	req.h = sh;
	req.scale = d;
	req.channels = spec->channels;
	req.max_pixels = spec->max_pixels;
	dec_bytes = dec->scratch_bytes(info, &req);
	need = rs_bytes + out_bytes + ((dec_bytes + 63) & ~(size_t)63) + 64;
	rc = scratch_reserve(scratch, need, err);
	if (rc)
		return rc;
	hwc = direct ? dst : scratch->mem + rs_bytes;
	if (place != &all)
		memset(hwc, 0, (size_t)spec->height * spec->width * spec->channels);
	pf_resampler_init(&rs, scratch->mem, rx1 - rx0, ry1 - ry0, bx0, by0, bx1, by1, place->w,
			  place->h, spec->channels, flip,
			  hwc + ((size_t)place->y * spec->width + place->x) * spec->channels);
	rs.out_stride = (size_t)spec->width * spec->channels;
	req.x = rx0 + rs.first_col;
	req.y = ry0 + rs.first_row;
	req.w = rs.cols;
	req.h = rs.rows;
	rc = dec->decode(data, len, info, &req,
			 scratch->mem + ((rs_bytes + out_bytes + 63) & ~(size_t)63), push_row, &rs,
			 err);
	if (rc)
		return rc;
	if (!pf_resampler_done(&rs))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "%s: %u of %u output rows made", dec->name, rs.next_out,
				    place->h);
	if (!direct)
		convert_out(spec, hwc, dst);
	if (note) {
		note->info = *info;
		note->flipped = flip;
		note->dct_scale = d;
		note->upscaled = box[2] - box[0] < place->w || box[3] - box[1] < place->h;
	}
	return 0;
}

static int open_image(const pf_image_spec *spec, const void *data, size_t len,
		      const pf_image_decoder **dec, pf_image_info *info, pf_error *err)
{
	int rc = pf_image_probe(data, len, info, err);

	if (rc)
		return rc;
	*dec = pf_image_decoder_for(info->format);
	return check_size(info, spec->max_pixels, err);
}

int pf_image_transform_box(const pf_image_spec *spec, const void *data, size_t len,
			   const pf_crop_box *box, bool flip, uint32_t dct_scale, void *dst,
			   pf_image_scratch *scratch, pf_image_note *note, pf_error *err)
{
	const pf_image_decoder *dec;
	pf_image_info info;
	double b[4];
	int rc = open_image(spec, data, len, &dec, &info, err);

	if (rc)
		return rc;
	if (box->w < 1 || box->h < 1 || box->x > info.width - box->w ||
	    box->y > info.height - box->h || box->w > info.width || box->h > info.height)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "box %ux%u at %u,%u is not inside the %ux%u image", box->w,
				    box->h, box->x, box->y, info.width, info.height);
	b[0] = box->x;
	b[1] = box->y;
	b[2] = (double)box->x + box->w;
	b[3] = (double)box->y + box->h;
	if (note)
		note->box = *box;
	return run(spec, data, len, dec, &info, b, box, NULL, flip, dct_scale, dst, scratch, note,
		   err);
}

int pf_image_transform(const pf_image_spec *spec, const void *data, size_t len,
		       uint64_t seed, uint32_t epoch, uint64_t place, void *dst,
		       pf_image_scratch *scratch, pf_image_note *note, pf_error *err)
{
	const pf_image_decoder *dec;
	pf_image_info info;
	pf_crop_box box, whole, into = { 0, 0, spec->width, spec->height };
	bool flip = false;
	double b[4];
	int rc = open_image(spec, data, len, &dec, &info, err);

	if (rc)
		return rc;
	whole.x = 0;
	whole.y = 0;
	whole.w = info.width;
	whole.h = info.height;
	switch (spec->augment) {
	case PF_AUGMENT_TRAIN:
		pf_image_crop_train(info.width, info.height, spec->scale_lo, spec->scale_hi,
				    spec->ratio_lo, spec->ratio_hi, seed, epoch, place, &box,
				    &flip);
		flip = flip && spec->flip;
		if (note)
			note->box = box;
		b[0] = box.x;
		b[1] = box.y;
		b[2] = (double)box.x + box.w;
		b[3] = (double)box.y + box.h;
		return run(spec, data, len, dec, &info, b, &box, NULL, flip, 0, dst, scratch, note,
			   err);
	case PF_AUGMENT_EVAL:
		pf_image_crop_eval(info.width, info.height, spec->width, spec->height, b, &into);
		break;
	default:
		b[0] = 0;
		b[1] = 0;
		b[2] = info.width;
		b[3] = info.height;
		break;
	}
	if (note) {
		note->box.x = (uint32_t)b[0];
		note->box.y = (uint32_t)b[1];
		note->box.w = (uint32_t)(b[2] - b[0] + 0.5);
		note->box.h = (uint32_t)(b[3] - b[1] + 0.5);
	}
	return run(spec, data, len, dec, &info, b, &whole, &into, false, 0, dst, scratch, note,
		   err);
}

/* pf_image_decode_full()'s sink: rows straight into the caller's image. */
typedef struct full_sink {
	uint8_t *dst;
	size_t row_bytes;
} full_sink;

static int full_row(void *ctx, uint32_t row, const uint8_t *px)
{
	full_sink *s = ctx;

	memcpy(s->dst + (size_t)row * s->row_bytes, px, s->row_bytes);
	return 0;
}

int pf_image_decode_full(const void *data, size_t len, uint32_t channels, uint64_t max_pixels,
			 void *dst, size_t cap, pf_image_scratch *scratch, pf_error *err)
{
	const pf_image_decoder *dec;
	pf_image_info info;
	pf_image_request req;
	full_sink sink;
	int rc = pf_image_probe(data, len, &info, err);

	if (rc)
		return rc;
	rc = check_size(&info, max_pixels, err);
	if (rc)
		return rc;
	if ((uint64_t)info.width * info.height * channels > cap)
		return pf_error_set(err, -ENOBUFS, PF_OFFSET_NONE, 0,
				    "image of %ux%u: %zu bytes of room", info.width, info.height,
				    cap);
	dec = pf_image_decoder_for(info.format);
	req.x = 0;
	req.y = 0;
	req.w = info.width;
	req.h = info.height;
	req.scale = 1;
	req.channels = channels;
	req.max_pixels = max_pixels;
	rc = scratch_reserve(scratch, dec->scratch_bytes(&info, &req), err);
	if (rc)
		return rc;
	sink.dst = dst;
	sink.row_bytes = (size_t)info.width * channels;
	return dec->decode(data, len, &info, &req, scratch->mem, full_row, &sink, err);
}
