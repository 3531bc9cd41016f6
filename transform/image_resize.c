// SPDX-License-Identifier: Apache-2.0
/* The antialiased resize: PIL's bilinear resampling (Pillow's
 * libImaging/Resample.c), streamed row by row.  Not the crop rule
 * (image_crop.c) nor the decoders (image_jpeg.c, image_png.c).
 *
 * Why PIL's arithmetic to the bit: torchvision's RandomResizedCrop on PIL
 * images is Image.crop() then Image.resize(BILINEAR), so a model trained
 * on torchvision's pipeline sees these very pixels.  The weights are
 * computed in double exactly as Pillow computes them, then rounded to 22
 * fractional bits; the sums are integers, so their order does not matter
 * and the vertical pass may run over a ring of rows. */
#include <math.h>
#include <string.h>

#include "image_internal.h"

#define PRECISION_BITS (32 - 8 - 2)

static double bilinear(double x)
{
	if (x < 0.0)
		x = -x;
	return x < 1.0 ? 1.0 - x : 0.0;
}

static uint32_t ksize_of(double in0, double in1, uint32_t out)
{
	double scale = (in1 - in0) / out;
	double filterscale = scale < 1.0 ? 1.0 : scale;

	return (uint32_t)ceil(1.0 * filterscale) * 2 + 1;
}

/* Pillow's precompute_coeffs() and normalize_coeffs_8bpc(): for each
 * output pixel, its first source pixel, their count, and the weights. */
static void coeffs(uint32_t in_size, double in0, double in1, uint32_t out_size, uint32_t ksize,
		   int32_t *bounds, int32_t *kk)
{
	double scale = (in1 - in0) / out_size;
	double filterscale = scale < 1.0 ? 1.0 : scale;
	double support = 1.0 * filterscale;
	double ss = 1.0 / filterscale;

	for (uint32_t xx = 0; xx < out_size; xx++) {
		double center = in0 + (xx + 0.5) * scale;
		double ww = 0.0;
		int xmin = (int)(center - support + 0.5);
		int xmax = (int)(center + support + 0.5);
		int32_t *k = kk + (size_t)xx * ksize;
		int x;

		if (xmin < 0)
			xmin = 0;
		if (xmax > (int)in_size)
			xmax = (int)in_size;
		xmax -= xmin;
		if (xmax < 0)
			xmax = 0;
		for (x = 0; x < xmax; x++)
			ww += bilinear((x + xmin - center + 0.5) * ss);
		for (x = 0; x < xmax; x++) {
			double w = bilinear((x + xmin - center + 0.5) * ss);

			if (ww != 0.0)
				w /= ww;
			k[x] = w < 0 ? (int32_t)(-0.5 + w * (1 << PRECISION_BITS))
				     : (int32_t)(0.5 + w * (1 << PRECISION_BITS));
		}
		for (; x < (int)ksize; x++)
			k[x] = 0;
		bounds[xx * 2] = xmin;
		bounds[xx * 2 + 1] = xmax;
	}
}

static inline uint8_t clip8(int32_t v)
{
	if (v >= (1 << PRECISION_BITS << 8))
		return 255;
	if (v <= 0)
		return 0;
	return (uint8_t)(v >> PRECISION_BITS);
}

static size_t align8(size_t v)
{
	return (v + 7) & ~(size_t)7;
}

size_t pf_resampler_bytes(uint32_t src_w, uint32_t src_h, double x0, double y0, double x1,
			  double y1, uint32_t out_w, uint32_t out_h, uint32_t channels)
{
	uint32_t kh = ksize_of(x0, x1, out_w), kv = ksize_of(y0, y1, out_h);

	(void)src_w;
	(void)src_h;
	return align8((size_t)out_w * 2 * 4) + align8((size_t)out_w * kh * 4) +
	       align8((size_t)out_h * 2 * 4) + align8((size_t)out_h * kv * 4) +
	       align8((size_t)kv * out_w * channels) + align8((size_t)out_w * channels * 4);
}

void pf_resampler_init(pf_resampler *r, void *mem, uint32_t src_w, uint32_t src_h, double x0,
		       double y0, double x1, double y1, uint32_t out_w, uint32_t out_h,
		       uint32_t channels, bool flip, uint8_t *out)
{
	uint8_t *p = mem;
	uint32_t lo, hi;

	memset(r, 0, sizeof(*r));
	r->src_w = src_w;
	r->src_h = src_h;
	r->out_w = out_w;
	r->out_h = out_h;
	r->channels = channels;
	r->flip = flip;
	r->out = out;
	r->ksize_h = ksize_of(x0, x1, out_w);
	r->ksize_v = ksize_of(y0, y1, out_h);
	r->bounds_h = (int32_t *)p;
	p += align8((size_t)out_w * 2 * 4);
	r->k_h = (int32_t *)p;
	p += align8((size_t)out_w * r->ksize_h * 4);
	r->bounds_v = (int32_t *)p;
	p += align8((size_t)out_h * 2 * 4);
	r->k_v = (int32_t *)p;
	p += align8((size_t)out_h * r->ksize_v * 4);
	r->ring = p;
	coeffs(src_w, x0, x1, out_w, r->ksize_h, r->bounds_h, r->k_h);
	coeffs(src_h, y0, y1, out_h, r->ksize_v, r->bounds_v, r->k_v);

	/* The source pixels the filter reads: bounds are monotone. */
	lo = (uint32_t)r->bounds_h[0];
	hi = (uint32_t)(r->bounds_h[(out_w - 1) * 2] + r->bounds_h[(out_w - 1) * 2 + 1]);
	r->first_col = lo;
	r->cols = hi > lo ? hi - lo : 0;
	lo = (uint32_t)r->bounds_v[0];
	hi = (uint32_t)(r->bounds_v[(out_h - 1) * 2] + r->bounds_v[(out_h - 1) * 2 + 1]);
	r->first_row = lo;
	r->rows = hi > lo ? hi - lo : 0;
}

/* Output row yy from the ring: every window row's weight, summed in
 * integers (so in any order). */
static void vertical(pf_resampler *r, uint32_t yy)
{
	size_t row_bytes = (size_t)r->out_w * r->channels;
	int32_t *acc = (int32_t *)(r->ring + align8((size_t)r->ksize_v * row_bytes));
	const int32_t *k = r->k_v + (size_t)yy * r->ksize_v;
	uint32_t ymin = (uint32_t)r->bounds_v[yy * 2], ymax = (uint32_t)r->bounds_v[yy * 2 + 1];
	uint8_t *out = r->out + (size_t)yy * row_bytes;

	for (size_t i = 0; i < row_bytes; i++)
		acc[i] = 1 << (PRECISION_BITS - 1);
	for (uint32_t y = 0; y < ymax; y++) {
		const uint8_t *src = r->ring + (size_t)((ymin + y) % r->ksize_v) * row_bytes;
		int32_t w = k[y];

		for (size_t i = 0; i < row_bytes; i++)
			acc[i] += src[i] * w;
	}
	if (!r->flip) {
		for (size_t i = 0; i < row_bytes; i++)
			out[i] = clip8(acc[i]);
		return;
	}
	for (uint32_t x = 0; x < r->out_w; x++)
		for (uint32_t c = 0; c < r->channels; c++)
			out[(size_t)(r->out_w - 1 - x) * r->channels + c] =
				clip8(acc[(size_t)x * r->channels + c]);
}

static void horizontal3(const pf_resampler *r, const uint8_t *px, uint8_t *dst)
{
	for (uint32_t xx = 0; xx < r->out_w; xx++) {
		const int32_t *k = r->k_h + (size_t)xx * r->ksize_h;
		uint32_t xmin = (uint32_t)r->bounds_h[xx * 2] - r->first_col;
		uint32_t xmax = (uint32_t)r->bounds_h[xx * 2 + 1];
		const uint8_t *s = px + (size_t)xmin * 3;
		int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;

		for (uint32_t x = 0; x < xmax; x++) {
			s0 += s[x * 3] * k[x];
			s1 += s[x * 3 + 1] * k[x];
			s2 += s[x * 3 + 2] * k[x];
		}
		dst[xx * 3] = clip8(s0);
		dst[xx * 3 + 1] = clip8(s1);
		dst[xx * 3 + 2] = clip8(s2);
	}
}

static void horizontal1(const pf_resampler *r, const uint8_t *px, uint8_t *dst)
{
	for (uint32_t xx = 0; xx < r->out_w; xx++) {
		const int32_t *k = r->k_h + (size_t)xx * r->ksize_h;
		uint32_t xmin = (uint32_t)r->bounds_h[xx * 2] - r->first_col;
		uint32_t xmax = (uint32_t)r->bounds_h[xx * 2 + 1];
		int32_t s0 = 1 << (PRECISION_BITS - 1);

		for (uint32_t x = 0; x < xmax; x++)
			s0 += px[xmin + x] * k[x];
		dst[xx] = clip8(s0);
	}
}

void pf_resampler_push(pf_resampler *r, const uint8_t *px)
{
	uint32_t s = r->first_row + r->rows_in;
	size_t row_bytes = (size_t)r->out_w * r->channels;
	uint8_t *slot = r->ring + (size_t)(s % r->ksize_v) * row_bytes;

	if (r->rows_in >= r->rows)
		return;
	if (r->channels == 3)
		horizontal3(r, px, slot);
	else
		horizontal1(r, px, slot);
	r->rows_in++;
	/* Every output whose window ends at this row is complete. */
	while (r->next_out < r->out_h) {
		uint32_t yy = r->next_out;
		uint32_t end = (uint32_t)(r->bounds_v[yy * 2] + r->bounds_v[yy * 2 + 1]);

		if (end > s + 1)
			break;
		vertical(r, yy);
		r->next_out++;
	}
}
