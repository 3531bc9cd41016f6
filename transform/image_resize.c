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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"

#define PRECISION_BITS PF_RESIZE_BITS

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
		/* Pillow refuses a box past the image; here a pixel whose
		 * window lies wholly past it (a caller's box may) reads
		 * nothing, at the edge, so no pixel is past the region. */
		if (xmin > (int)in_size)
			xmin = (int)in_size;
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

static size_t align32(size_t v)
{
	return (v + 31) & ~(size_t)31;
}

/* A ring row's stride: the row, then at least 32 bytes (the SIMD paths
 * store 4 bytes for a 3-byte pixel, and read whole 32-byte blocks). */
static size_t ring_stride(uint32_t out_w, uint32_t channels)
{
	return align32((size_t)out_w * channels) + 32;
}

/* Tap pairs of the SIMD weights (even): of ksize, a bound on any pixel's
 * taps. */
static uint32_t pairs_of(uint32_t ksize)
{
	return (ksize + 3) / 4 * 2;
}

size_t pf_resampler_bytes(uint32_t src_w, uint32_t src_h, double x0, double y0, double x1,
			  double y1, uint32_t out_w, uint32_t out_h, uint32_t channels)
{
	uint32_t kh = ksize_of(x0, x1, out_w), kv = ksize_of(y0, y1, out_h);

	(void)src_w;
	(void)src_h;
	return align8((size_t)out_w * 2 * 4) + align8((size_t)out_w * kh * 4) +
	       align8((size_t)out_h * 2 * 4) + align8((size_t)out_h * kv * 4) +
	       ((size_t)out_w + 1) / 2 * pairs_of(kh) * 64 + 32 +
	       32 + (size_t)kv * ring_stride(out_w, channels) + (size_t)out_w * channels * 4;
}

/* The SIMD paths' horizontal weights (pf_resampler's k16_h), and how many
 * output pixels they may take: those whose 8-byte loads, one per tap
 * pair, stay inside the pushed row of cols pixels. */
static void split_weights(pf_resampler *r)
{
	uint32_t pairs = 1, blocks = (r->out_w + 1) / 2;
	size_t reads;

	for (uint32_t xx = 0; xx < r->out_w; xx++) {
		uint32_t n = (uint32_t)r->bounds_h[xx * 2 + 1];

		if ((n + 1) / 2 > pairs)
			pairs = (n + 1) / 2;
	}
	r->pairs_h = pairs;
	r->pairs16_h = (pairs + 1) / 2 * 2;
	/* The bytes a pixel's loads reach from its first tap: SSE2, 8 from
	 * each pair's 6; AVX2, 16 from each 4 taps' 12 (8 when 1 pair). */
	reads = pairs == 1 ? 8 : (size_t)r->pairs16_h * 6 + 4;
	memset(r->k16_h, 0, (size_t)blocks * r->pairs16_h * 64);
	r->simd_w = 0;
	for (uint32_t xx = 0; xx < r->out_w; xx++) {
		const int32_t *k = r->k_h + (size_t)xx * r->ksize_h;
		uint32_t n = (uint32_t)r->bounds_h[xx * 2 + 1];
		uint32_t x0 = (uint32_t)r->bounds_h[xx * 2] - r->first_col;

		for (uint32_t t = 0; t < n; t++) {
			int16_t *w = r->k16_h + ((size_t)(xx / 2) * r->pairs16_h + t / 2) * 32 +
				     (xx & 1) * 8;

			for (int c = 0; c < 3; c++) {
				w[c * 2 + (t & 1)] = (int16_t)(k[t] >> PF_RESIZE_SPLIT);
				w[16 + c * 2 + (t & 1)] =
					(int16_t)(k[t] & ((1 << PF_RESIZE_SPLIT) - 1));
			}
		}
		if ((size_t)x0 * 3 + reads <= (size_t)r->cols * 3 && r->simd_w == xx)
			r->simd_w = xx + 1;
	}
	r->simd_w &= ~1u;
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
	r->out_stride = (size_t)out_w * channels;
	r->ops = pf_resize_path();
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
	p = (uint8_t *)align32((uintptr_t)p);
	r->k16_h = (int16_t *)p;
	p += ((size_t)out_w + 1) / 2 * pairs_of(r->ksize_h) * 64;
	/* 32 bytes before the first row: a flipped pixel's 4-byte store
	 * starts a byte before its 3 (pf_resize_h3_*). */
	r->ring = p + 32;
	r->ring_stride = ring_stride(out_w, channels);
	memset(p, 0, 32 + (size_t)r->ksize_v * r->ring_stride);
	r->acc = (int32_t *)(p + 32 + (size_t)r->ksize_v * r->ring_stride);
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
	r->taps_v = 0;
	for (uint32_t yy = 0; yy < out_h; yy++)
		if ((uint32_t)r->bounds_v[yy * 2 + 1] > r->taps_v)
			r->taps_v = (uint32_t)r->bounds_v[yy * 2 + 1];
	if (channels == 3)
		split_weights(r);
}

/* Output row yy's bytes from..row_bytes - 1 from the ring: every window
 * row's weight, summed in integers (so in any order). */
void pf_resize_v_scalar(const pf_resampler *r, uint32_t yy, size_t from)
{
	size_t row_bytes = (size_t)r->out_w * r->channels;
	const int32_t *k = r->k_v + (size_t)yy * r->ksize_v;
	uint32_t ymin = (uint32_t)r->bounds_v[yy * 2], ymax = (uint32_t)r->bounds_v[yy * 2 + 1];
	uint8_t *out = r->out + (size_t)yy * r->out_stride;
	int32_t *acc = r->acc;

	for (size_t i = from; i < row_bytes; i++)
		acc[i] = 1 << (PRECISION_BITS - 1);
	for (uint32_t y = 0; y < ymax; y++) {
		const uint8_t *src = pf_resampler_slot(r, ymin + y);
		int32_t w = k[y];

		for (size_t i = from; i < row_bytes; i++)
			acc[i] += src[i] * w;
	}
	for (size_t i = from; i < row_bytes; i++)
		out[i] = clip8(acc[i]);
}

static void vertical(const pf_resampler *r, uint32_t yy)
{
	pf_resize_v_scalar(r, yy, 0);
}

/* Output pixels from..out_w - 1 of a row (3 channels), each to its
 * column (mirrored when flipping). */
void pf_resize_h3_scalar(const pf_resampler *r, const uint8_t *px, uint8_t *dst, uint32_t from)
{
	for (uint32_t xx = from; xx < r->out_w; xx++) {
		const int32_t *k = r->k_h + (size_t)xx * r->ksize_h;
		uint32_t xmin = (uint32_t)r->bounds_h[xx * 2] - r->first_col;
		uint32_t xmax = (uint32_t)r->bounds_h[xx * 2 + 1];
		uint8_t *d = dst + (size_t)(r->flip ? r->out_w - 1 - xx : xx) * 3;
		const uint8_t *s = px + (size_t)xmin * 3;
		int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;

		for (uint32_t x = 0; x < xmax; x++) {
			s0 += s[x * 3] * k[x];
			s1 += s[x * 3 + 1] * k[x];
			s2 += s[x * 3 + 2] * k[x];
		}
		d[0] = clip8(s0);
		d[1] = clip8(s1);
		d[2] = clip8(s2);
	}
}

static void horizontal3(const pf_resampler *r, const uint8_t *px, uint8_t *dst)
{
	pf_resize_h3_scalar(r, px, dst, 0);
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
		dst[r->flip ? r->out_w - 1 - xx : xx] = clip8(s0);
	}
}

void pf_resampler_push(pf_resampler *r, const uint8_t *px)
{
	uint32_t s = r->first_row + r->rows_in;
	uint8_t *slot = pf_resampler_slot(r, s);

	if (r->rows_in >= r->rows)
		return;
	if (r->channels == 3)
		r->ops->horizontal3(r, px, slot);
	else
		horizontal1(r, px, slot);
	r->rows_in++;
	/* Every output whose window ends at this row is complete. */
	while (r->next_out < r->out_h) {
		uint32_t yy = r->next_out;
		uint32_t end = (uint32_t)(r->bounds_v[yy * 2] + r->bounds_v[yy * 2 + 1]);

		if (end > s + 1)
			break;
		r->ops->vertical(r, yy);
		r->next_out++;
	}
}

/* The paths, best first. */
static bool have_scalar(void)
{
	return true;
}

static bool have_sse2(void)
{
	return true;	/* x86-64's baseline */
}

const pf_resize_ops pf_resize_paths[] = {
#if defined(__x86_64__)
	{ "avx2", pf_resize_have_avx2, pf_resize_h3_avx2, pf_resize_v_avx2 },
	{ "sse2", have_sse2, pf_resize_h3_sse2, pf_resize_v_sse2 },
#endif
	{ "scalar", have_scalar, horizontal3, vertical },
	{ NULL, NULL, NULL, NULL },
};

static const pf_resize_ops *resize_path;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

/* The best path the CPU has, or with PODFEED_SIMD=NAME that one when the
 * CPU has it (else the best below it; a name not of this table, such as
 * the varint decoder's avx512: the best). */
static void choose(void)
{
	const char *want = getenv("PODFEED_SIMD");
	const pf_resize_ops *p, *best = NULL;
	bool below = true;

	for (p = pf_resize_paths; want && p->name; p++)
		if (!strcmp(p->name, want))
			below = false;
	for (p = pf_resize_paths; p->name && !best; p++) {
		if (!below && !strcmp(p->name, want))
			below = true;
		if (below && p->supported())
			best = p;
	}
	__atomic_store_n(&resize_path, best, __ATOMIC_RELEASE);
}

const pf_resize_ops *pf_resize_path(void)
{
	pthread_once(&choose_once, choose);
	return __atomic_load_n(&resize_path, __ATOMIC_ACQUIRE);
}
