// SPDX-License-Identifier: Apache-2.0
/* The resize's passes with SSE2 and AVX2 (pf_resize_paths' "sse2" and
 * "avx2"): the same integer sums as the scalar passes in image_resize.c,
 * so the same bytes.
 *
 * Why split weights: PIL's weights have 22 fractional bits and a pixel 8,
 * so a product needs 30 bits; pmaddwd multiplies 16-bit numbers (16 a
 * ymm, summed in pairs into 32 bits), twice the products of a 32-bit
 * multiply (pmulld, which Intel's cores split into two micro-ops).  A
 * weight k is k_hi * 2^15 + k_lo with k_lo in 0..32767 and k_hi small;
 * sum(px * k_hi) * 2^15 + sum(px * k_lo) is sum(px * k) exactly (the sums
 * wrap modulo 2^32 at worst, and the total fits 31 bits).
 *
 * Horizontal (3 channels): a tap pair of a pixel is 8 bytes loaded from
 * its first tap (r0 g0 b0 r1 g1 b1 and 2 bytes not used), turned into the
 * 16-bit pairs r0 r1, g0 g1, b0 b1, 0 0 (AVX2: one vpshufb; SSE2: unpack,
 * shift, unpack) and multiplied by the pixel's weights for those taps
 * (pf_resampler's k16_h); AVX2 takes two output pixels a register, one a
 * lane, so no sum crosses lanes.  A pixel is stored as 4 bytes (the 4th
 * is overwritten by the next pixel's store, or lands in the ring row's
 * padding); flipped, the 4 bytes start a byte early (the pixel to the
 * left is stored after).  Output pixels whose loads would pass the row's
 * end go through the scalar code.
 *
 * Vertical: 32 (AVX2) or 16 (SSE2) bytes of the output row at a time,
 * every tap row's bytes interleaved with the next one's into 16-bit pairs
 * and multiplied by the two rows' weights, the sums kept in registers
 * until the row's last tap. */
#include <string.h>

#include "image_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2_TARGET __attribute__((target("avx2")))

#define ROUND (1 << (PF_RESIZE_BITS - 1))
#define LO_MASK ((1 << PF_RESIZE_SPLIT) - 1)

/* The weights of tap rows y and y + 1 (0 past the last), as the 32-bit
 * lanes pmaddwd multiplies a (row y, row y + 1) pair of bytes by. */
static inline void v_weights(const int32_t *k, uint32_t y, uint32_t n, int32_t *hi, int32_t *lo)
{
	int32_t k0 = k[y], k1 = y + 1 < n ? k[y + 1] : 0;

	*hi = (int32_t)((uint32_t)(uint16_t)(k0 >> PF_RESIZE_SPLIT) |
			(uint32_t)(uint16_t)(k1 >> PF_RESIZE_SPLIT) << 16);
	*lo = (int32_t)((uint32_t)(k0 & LO_MASK) | (uint32_t)(k1 & LO_MASK) << 16);
}

/* ---- SSE2 ---- */

static inline __m128i join128(__m128i hi, __m128i lo)
{
	__m128i t = _mm_add_epi32(_mm_slli_epi32(hi, PF_RESIZE_SPLIT), lo);

	return _mm_srai_epi32(_mm_add_epi32(t, _mm_set1_epi32(ROUND)), PF_RESIZE_BITS);
}

void pf_resize_h3_sse2(const pf_resampler *r, const uint8_t *px, uint8_t *dst)
{
	const __m128i zero = _mm_setzero_si128();
	uint32_t pairs = r->pairs_h;

	for (uint32_t xx = 0; xx < r->simd_w; xx++) {
		const int16_t *w = r->k16_h + (size_t)(xx / 2) * r->pairs16_h * 32 + (xx & 1) * 8;
		const uint8_t *s = px + (size_t)((uint32_t)r->bounds_h[xx * 2] - r->first_col) * 3;
		__m128i hi = zero, lo = zero, t;
		int32_t v;

		for (uint32_t p = 0; p < pairs; p++, s += 6, w += 32) {
			__m128i a = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)s), zero);

			a = _mm_unpacklo_epi16(a, _mm_srli_si128(a, 6));
			hi = _mm_add_epi32(hi, _mm_madd_epi16(a, _mm_load_si128((const __m128i *)w)));
			lo = _mm_add_epi32(lo,
					   _mm_madd_epi16(a, _mm_load_si128((const __m128i *)(w + 16))));
		}
		t = join128(hi, lo);
		if (r->flip)
			t = _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 1, 0, 3));
		t = _mm_packs_epi32(t, t);
		v = _mm_cvtsi128_si32(_mm_packus_epi16(t, t));
		memcpy(r->flip ? dst + (size_t)(r->out_w - 1 - xx) * 3 - 1 : dst + (size_t)xx * 3,
		       &v, 4);
	}
	pf_resize_h3_scalar(r, px, dst, r->simd_w);
}

/* 16 output bytes from i: the tap rows' bytes in (y, y + 1) pairs, wh and
 * wl their weights (v_weights()). */
static inline __m128i v16(const uint8_t *const *rows, const int32_t *wh_, const int32_t *wl_,
			  uint32_t n, size_t i)
{
	const __m128i zero = _mm_setzero_si128();
	__m128i h0 = zero, h1 = zero, h2 = zero, h3 = zero;
	__m128i l0 = zero, l1 = zero, l2 = zero, l3 = zero;

	for (uint32_t y = 0; y < n; y += 2) {
		__m128i a = _mm_loadu_si128((const __m128i *)(rows[y] + i));
		__m128i b = y + 1 < n ? _mm_loadu_si128((const __m128i *)(rows[y + 1] + i)) : zero;
		__m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
		__m128i q0 = _mm_unpacklo_epi8(ab0, zero), q1 = _mm_unpackhi_epi8(ab0, zero);
		__m128i q2 = _mm_unpacklo_epi8(ab1, zero), q3 = _mm_unpackhi_epi8(ab1, zero);
		__m128i wh = _mm_set1_epi32(wh_[y / 2]), wl = _mm_set1_epi32(wl_[y / 2]);
		h0 = _mm_add_epi32(h0, _mm_madd_epi16(q0, wh));
		h1 = _mm_add_epi32(h1, _mm_madd_epi16(q1, wh));
		h2 = _mm_add_epi32(h2, _mm_madd_epi16(q2, wh));
		h3 = _mm_add_epi32(h3, _mm_madd_epi16(q3, wh));
		l0 = _mm_add_epi32(l0, _mm_madd_epi16(q0, wl));
		l1 = _mm_add_epi32(l1, _mm_madd_epi16(q1, wl));
		l2 = _mm_add_epi32(l2, _mm_madd_epi16(q2, wl));
		l3 = _mm_add_epi32(l3, _mm_madd_epi16(q3, wl));
	}
	return _mm_packus_epi16(_mm_packs_epi32(join128(h0, l0), join128(h1, l1)),
				_mm_packs_epi32(join128(h2, l2), join128(h3, l3)));
}

/* The ring rows of output row yy's taps, in order, and their weights in
 * pairs (v_weights()). */
static uint32_t tap_rows(const pf_resampler *r, uint32_t yy, const uint8_t **rows, int32_t *wh,
			 int32_t *wl)
{
	const int32_t *k = r->k_v + (size_t)yy * r->ksize_v;
	uint32_t ymin = (uint32_t)r->bounds_v[yy * 2], n = (uint32_t)r->bounds_v[yy * 2 + 1];

	for (uint32_t y = 0; y < n; y++)
		rows[y] = pf_resampler_slot(r, ymin + y);
	for (uint32_t y = 0; y < n; y += 2)
		v_weights(k, y, n, &wh[y / 2], &wl[y / 2]);
	return n;
}

/* Rows of more taps than this (a downscale by more than 64) take the
 * scalar pass. */
#define MAX_TAPS 128

void pf_resize_v_sse2(const pf_resampler *r, uint32_t yy)
{
	size_t row_bytes = (size_t)r->out_w * r->channels, i;
	uint8_t *out = r->out + (size_t)yy * r->out_stride;
	const uint8_t *rows[MAX_TAPS];
	int32_t wh[MAX_TAPS / 2], wl[MAX_TAPS / 2];
	uint32_t n;

	if (r->taps_v > MAX_TAPS) {
		pf_resize_v_scalar(r, yy, 0);
		return;
	}
	n = tap_rows(r, yy, rows, wh, wl);
	for (i = 0; i + 16 <= row_bytes; i += 16)
		_mm_storeu_si128((__m128i *)(out + i), v16(rows, wh, wl, n, i));
	if (i < row_bytes) {
		/* The ring's rows have room to read a whole block past their end. */
		uint8_t tail[16];

		_mm_storeu_si128((__m128i *)tail, v16(rows, wh, wl, n, i));
		memcpy(out + i, tail, row_bytes - i);
	}
}

/* ---- AVX2 ---- */

AVX2_TARGET
static inline __m256i join256(__m256i hi, __m256i lo)
{
	__m256i t = _mm256_add_epi32(_mm256_slli_epi32(hi, PF_RESIZE_SPLIT), lo);

	return _mm256_srai_epi32(_mm256_add_epi32(t, _mm256_set1_epi32(ROUND)), PF_RESIZE_BITS);
}

/* Taps 0-3 of pixels a (low lane) and b (high lane): two tap pairs'
 * sums added to hi and lo. */
AVX2_TARGET
static inline void h_quad(const uint8_t *a, const uint8_t *b, const int16_t *w, __m256i pick01,
			  __m256i pick23, __m256i *hi, __m256i *lo)
{
	__m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
					    _mm_loadu_si128((const __m128i *)b), 1);
	__m256i v01 = _mm256_shuffle_epi8(v, pick01), v23 = _mm256_shuffle_epi8(v, pick23);

	*hi = _mm256_add_epi32(*hi, _mm256_add_epi32(
				_mm256_madd_epi16(v01, _mm256_load_si256((const __m256i *)w)),
				_mm256_madd_epi16(v23, _mm256_load_si256((const __m256i *)(w + 32)))));
	*lo = _mm256_add_epi32(*lo, _mm256_add_epi32(
				_mm256_madd_epi16(v01, _mm256_load_si256((const __m256i *)(w + 16))),
				_mm256_madd_epi16(v23, _mm256_load_si256((const __m256i *)(w + 48)))));
}

AVX2_TARGET
void pf_resize_h3_avx2(const pf_resampler *r, const uint8_t *px, uint8_t *dst)
{
	/* Per lane: bytes r0 r1 g0 g1 b0 b1 of a tap pair's 6, each widened
	 * to 16 bits, the 4th pair zero: taps 0 and 1 of the lane's 16
	 * bytes (pick01), taps 2 and 3 (pick23). */
	const __m256i pick01 = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1,
						-1, -1, -1, 0, -1, 3, -1, 1, -1, 4, -1, 2, -1,
						5, -1, -1, -1, -1, -1);
	const __m256i pick23 = _mm256_setr_epi8(6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1,
						-1, -1, -1, 6, -1, 9, -1, 7, -1, 10, -1, 8, -1,
						11, -1, -1, -1, -1, -1);
	const __m256i round = _mm256_set1_epi32(ROUND);
	/* Locals: the stores to dst could alias r's fields for the compiler. */
	const int32_t *bounds = r->bounds_h;
	const int16_t *w = r->k16_h;
	const uint8_t *base = px - (size_t)r->first_col * 3;
	const uint32_t pairs = r->pairs_h, quads = (pairs + 1) / 2, simd_w = r->simd_w;
	const bool flip = r->flip;
	uint8_t *d = flip ? dst + (size_t)(r->out_w - 1) * 3 - 1 : dst;
	const ptrdiff_t step = flip ? -3 : 3;

	for (uint32_t xx = 0; xx < simd_w; xx += 2, d += 2 * step) {
		const uint8_t *sa = base + (size_t)(uint32_t)bounds[xx * 2] * 3;
		const uint8_t *sb = base + (size_t)(uint32_t)bounds[xx * 2 + 2] * 3;
		__m256i hi, lo = round, t;
		int32_t a, b;

		if (pairs == 1) {
			/* Upscales: at most 2 taps, 8 bytes a pixel. */
			__m256i v = _mm256_inserti128_si256(
				_mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)sa)),
				_mm_loadl_epi64((const __m128i *)sb), 1);

			v = _mm256_shuffle_epi8(v, pick01);
			hi = _mm256_madd_epi16(v, _mm256_load_si256((const __m256i *)w));
			lo = _mm256_add_epi32(
				lo, _mm256_madd_epi16(v, _mm256_load_si256((const __m256i *)(w + 16))));
			w += 64;	/* pairs16_h is 2 */
		} else {
			hi = _mm256_setzero_si256();
			h_quad(sa, sb, w, pick01, pick23, &hi, &lo);
			w += 64;
			for (uint32_t q = 1; q < quads; q++, w += 64)
				h_quad(sa + 12 * q, sb + 12 * q, w, pick01, pick23, &hi, &lo);
		}
		t = _mm256_srai_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, PF_RESIZE_SPLIT), lo),
				      PF_RESIZE_BITS);
		if (flip)
			t = _mm256_shuffle_epi32(t, _MM_SHUFFLE(2, 1, 0, 3));
		t = _mm256_packs_epi32(t, t);
		t = _mm256_packus_epi16(t, t);
		a = _mm_cvtsi128_si32(_mm256_castsi256_si128(t));
		b = _mm_cvtsi128_si32(_mm256_extracti128_si256(t, 1));
		/* Pixel xx first: xx + 1's store overwrites its 4th byte. */
		memcpy(d, &a, 4);
		memcpy(d + step, &b, 4);
	}
	pf_resize_h3_scalar(r, px, dst, simd_w);
}

/* 32 output bytes from i (lanes: bytes 0-15 and 16-31; the unpacks and
 * packs stay in their lane, so the order comes back). */
AVX2_TARGET
static inline __m256i v32(const uint8_t *const *rows, const int32_t *wh_, const int32_t *wl_,
			  uint32_t n, size_t i)
{
	const __m256i zero = _mm256_setzero_si256();
	__m256i h0 = zero, h1 = zero, h2 = zero, h3 = zero;
	__m256i l0 = zero, l1 = zero, l2 = zero, l3 = zero;

	for (uint32_t y = 0; y < n; y += 2) {
		__m256i a = _mm256_loadu_si256((const __m256i *)(rows[y] + i));
		__m256i b = y + 1 < n ? _mm256_loadu_si256((const __m256i *)(rows[y + 1] + i))
				      : zero;
		__m256i ab0 = _mm256_unpacklo_epi8(a, b), ab1 = _mm256_unpackhi_epi8(a, b);
		__m256i q0 = _mm256_unpacklo_epi8(ab0, zero), q1 = _mm256_unpackhi_epi8(ab0, zero);
		__m256i q2 = _mm256_unpacklo_epi8(ab1, zero), q3 = _mm256_unpackhi_epi8(ab1, zero);
		__m256i wh = _mm256_set1_epi32(wh_[y / 2]), wl = _mm256_set1_epi32(wl_[y / 2]);
		h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(q0, wh));
		h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(q1, wh));
		h2 = _mm256_add_epi32(h2, _mm256_madd_epi16(q2, wh));
		h3 = _mm256_add_epi32(h3, _mm256_madd_epi16(q3, wh));
		l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(q0, wl));
		l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(q1, wl));
		l2 = _mm256_add_epi32(l2, _mm256_madd_epi16(q2, wl));
		l3 = _mm256_add_epi32(l3, _mm256_madd_epi16(q3, wl));
	}
	return _mm256_packus_epi16(_mm256_packs_epi32(join256(h0, l0), join256(h1, l1)),
				   _mm256_packs_epi32(join256(h2, l2), join256(h3, l3)));
}

AVX2_TARGET
void pf_resize_v_avx2(const pf_resampler *r, uint32_t yy)
{
	size_t row_bytes = (size_t)r->out_w * r->channels, i;
	uint8_t *out = r->out + (size_t)yy * r->out_stride;
	const uint8_t *rows[MAX_TAPS];
	int32_t wh[MAX_TAPS / 2], wl[MAX_TAPS / 2];
	uint32_t n;

	if (r->taps_v > MAX_TAPS) {
		pf_resize_v_scalar(r, yy, 0);
		return;
	}
	n = tap_rows(r, yy, rows, wh, wl);
	for (i = 0; i + 32 <= row_bytes; i += 32)
		_mm256_storeu_si256((__m256i *)(out + i), v32(rows, wh, wl, n, i));
	if (i + 16 <= row_bytes) {
		_mm_storeu_si128((__m128i *)(out + i), v16(rows, wh, wl, n, i));
		i += 16;
	}
	if (i < row_bytes) {
		/* The ring's rows have room to read a whole block past their end. */
		uint8_t tail[16];

		_mm_storeu_si128((__m128i *)tail, v16(rows, wh, wl, n, i));
		memcpy(out + i, tail, row_bytes - i);
	}
}

bool pf_resize_have_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
}
#endif
