/* SPDX-License-Identifier: Apache-2.0 */
/* Training kernels: blocked dense product, softmax cross-entropy, embedding
 * gather-mean and scatter-add, axpy; AVX2+FMA chosen at run time, with a
 * portable C path that computes the same things. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_internal.h"

#define MR PF_GEMM_MR
#define NR PF_GEMM_NR

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* ------------------------------------------------------------------ */
/* Dense product: packing and blocking, shared by every implementation  */
/* ------------------------------------------------------------------ */

/*
 * Pack rows [i0, i0+mc) x columns [p0, p0+kc) of op(A) as MR-row panels,
 * each kc groups of MR floats (a column of the panel per group), rows past
 * mc zero so the micro-kernel never branches on the edge.
 */
static void pack_a(bool trans, const float *a, size_t lda, size_t i0,
		   size_t mc, size_t p0, size_t kc, float *dst)
{
	for (size_t ir = 0; ir < mc; ir += MR, dst += MR * kc) {
		size_t mr = min_size(MR, mc - ir);

		if (trans) {
			/* A is [k][m]: each group is contiguous in memory. */
			for (size_t p = 0; p < kc; p++) {
				const float *src = a + (p0 + p) * lda + i0 + ir;
				size_t r = 0;

				for (; r < mr; r++)
					dst[p * MR + r] = src[r];
				for (; r < MR; r++)
					dst[p * MR + r] = 0.0f;
			}
		} else {
			/* A is [m][k]: read each row once, contiguously. */
			for (size_t r = 0; r < MR; r++) {
				const float *src = a + (i0 + ir + r) * lda + p0;

				if (r < mr)
					for (size_t p = 0; p < kc; p++)
						dst[p * MR + r] = src[p];
				else
					for (size_t p = 0; p < kc; p++)
						dst[p * MR + r] = 0.0f;
			}
		}
	}
}

/* Pack rows [p0, p0+kc) x columns [j0, j0+nc) of op(B) as NR-column
 * panels, each kc groups of NR floats, columns past nc zero. */
static void pack_b(bool trans, const float *b, size_t ldb, size_t p0,
		   size_t kc, size_t j0, size_t nc, float *dst)
{
	for (size_t jr = 0; jr < nc; jr += NR) {
		size_t nr = min_size(NR, nc - jr);

		if (!trans) {
			/* B is [k][n]: each group is contiguous. */
			for (size_t p = 0; p < kc; p++) {
				const float *src = b + (p0 + p) * ldb + j0 + jr;
				size_t j = 0;

				for (; j < nr; j++)
					dst[j] = src[j];
				for (; j < NR; j++)
					dst[j] = 0.0f;
				dst += NR;
			}
		} else {
			/* B is [n][k]: walk each stored row once, writing
			 * one column of the panel. */
			for (size_t j = 0; j < NR; j++) {
				const float *src = b + (j0 + jr + j) * ldb + p0;

				for (size_t p = 0; p < kc; p++)
					dst[p * NR + j] = j < nr ? src[p] : 0.0f;
			}
			dst += kc * NR;
		}
	}
}

/* Run the micro-kernel on one MR x NR tile of C; an edge tile (mr < MR
 * or nr < NR) is computed aside and only its part inside C added. */
static void tile(const pf_kernel_ops *k, size_t kc, const float *a, size_t rs,
		 size_t cs, const float *bp, float *c, size_t ldc, size_t mr,
		 size_t nr, float alpha)
{
	float edge[MR * NR];
	bool half = nr <= NR / 2;
	void (*micro)(size_t, const float *, size_t, size_t, const float *,
		      float *, size_t, float) =
		half ? k->gemm_micro_half : k->gemm_micro;

	if (mr == MR && nr == (half ? NR / 2 : NR)) {
		micro(kc, a, rs, cs, bp, c, ldc, alpha);
		return;
	}
	memset(edge, 0, sizeof(edge));
	micro(kc, a, rs, cs, bp, edge, NR, alpha);
	for (size_t r = 0; r < mr; r++)
		for (size_t j = 0; j < nr; j++)
			c[r * ldc + j] += edge[r * NR + j];
}

void pf_sgemm(const pf_kernel_ops *k, bool trans_a, bool trans_b, size_t m,
	      size_t n, size_t kk, float alpha, const float *a, size_t lda,
	      const float *b, size_t ldb, float beta, float *c, size_t ldc,
	      float *scratch)
{
	float *apack = scratch;
	float *bpack = scratch + (size_t)PF_GEMM_MC * PF_GEMM_KC;

	if (m == 0 || n == 0)
		return;
	/* Apply beta once up front, so the micro-kernel only accumulates;
	 * beta == 0 must not read C (it may hold NaN), as in BLAS. */
	if (beta != 1.0f)
		for (size_t i = 0; i < m; i++) {
			if (beta == 0.0f)
				memset(c + i * ldc, 0, n * sizeof(*c));
			else
				k->scale(n, beta, c + i * ldc);
		}
	if (kk == 0 || alpha == 0.0f)
		return;

	for (size_t jc = 0; jc < n; jc += PF_GEMM_NC) {
		size_t nc = min_size(PF_GEMM_NC, n - jc);
		bool pack = nc > PF_GEMM_PACK_A_PANELS * NR;

		for (size_t pc = 0; pc < kk; pc += PF_GEMM_KC) {
			size_t kc = min_size(PF_GEMM_KC, kk - pc);

			pack_b(trans_b, b, ldb, pc, kc, jc, nc, bpack);
			for (size_t ic = 0; ic < m; ic += PF_GEMM_MC) {
				size_t mc = min_size(PF_GEMM_MC, m - ic);

				if (pack)
					pack_a(trans_a, a, lda, ic, mc, pc, kc, apack);
				for (size_t ir = 0; ir < mc; ir += MR) {
					size_t mr = min_size(MR, mc - ir);
					const float *ap;
					size_t rs, cs;

					if (pack) {
						ap = apack + ir * kc;
						rs = 1;
						cs = MR;
					} else if (mr < MR) {
						/* Rows past m do not exist
						 * in place: pack this panel. */
						pack_a(trans_a, a, lda, ic + ir, mr, pc, kc, apack);
						ap = apack;
						rs = 1;
						cs = MR;
					} else if (trans_a) {
						ap = a + pc * lda + ic + ir;
						rs = 1;
						cs = lda;
					} else {
						ap = a + (ic + ir) * lda + pc;
						rs = lda;
						cs = 1;
					}
					for (size_t jr = 0; jr < nc; jr += NR)
						tile(k, kc, ap, rs, cs, bpack + jr * kc,
						     c + (ic + ir) * ldc + jc + jr, ldc,
						     mr, min_size(NR, nc - jr), alpha);
				}
			}
		}
	}
}

void pf_col_sum(const pf_kernel_ops *k, size_t rows, size_t cols,
		const float *x, size_t ldx, float *out)
{
	memset(out, 0, cols * sizeof(*out));
	for (size_t i = 0; i < rows; i++)
		k->axpy(cols, 1.0f, x + i * ldx, out);
}

/* ------------------------------------------------------------------ */
/* Portable implementation                                              */
/* ------------------------------------------------------------------ */

static inline void micro_portable_cols(size_t kc, const float *a, size_t rs,
				       size_t cs, const float *bp, float *c,
				       size_t ldc, float alpha, size_t cols)
{
	float acc[MR][NR];

	memset(acc, 0, sizeof(acc));
	for (size_t p = 0; p < kc; p++, a += cs, bp += NR)
		for (size_t r = 0; r < MR; r++)
			for (size_t j = 0; j < cols; j++)
				acc[r][j] += a[r * rs] * bp[j];
	for (size_t r = 0; r < MR; r++)
		for (size_t j = 0; j < cols; j++)
			c[r * ldc + j] += alpha * acc[r][j];
}

static void micro_portable(size_t kc, const float *a, size_t rs, size_t cs,
			   const float *bp, float *c, size_t ldc, float alpha)
{
	micro_portable_cols(kc, a, rs, cs, bp, c, ldc, alpha, NR);
}

static void micro_portable_half(size_t kc, const float *a, size_t rs,
				size_t cs, const float *bp, float *c,
				size_t ldc, float alpha)
{
	micro_portable_cols(kc, a, rs, cs, bp, c, ldc, alpha, NR / 2);
}

/*
 * The loss and the label's gradient from the sum of the other classes'
 * exponentials: a confident row has p_y = 1 - others/sum, and computing
 * p_y - 1 or log(sum) directly would keep only the rounding of the 1.
 * loss = log(sum) - (z_y - max), which is log1p(others) when the label
 * holds the maximum (e_y = 1).
 */
static double row_loss(float others, float ey, float zy, float max)
{
	if (zy == max)
		return log1p((double)others);
	return log((double)others + (double)ey) - ((double)zy - (double)max);
}

static double softmax_xent_portable(size_t rows, size_t classes, float *z,
				    const int32_t *labels, float grad_scale,
				    bool want_grad, uint32_t *correct)
{
	double total = 0.0;
	uint32_t right = 0;

	for (size_t i = 0; i < rows; i++, z += classes) {
		size_t y = (size_t)labels[i], best = 0;
		float max = z[0], others = 0.0f, zy = z[y], ey;

		for (size_t j = 1; j < classes; j++)
			if (z[j] > max) {
				max = z[j];
				best = j;
			}
		right += best == y;
		for (size_t j = 0; j < classes; j++)
			z[j] = expf(z[j] - max);
		ey = z[y];
		z[y] = 0.0f;
		for (size_t j = 0; j < classes; j++)
			others += z[j];
		total += row_loss(others, ey, zy, max);
		if (want_grad) {
			float s = grad_scale / (others + ey);

			for (size_t j = 0; j < classes; j++)
				z[j] *= s;
			z[y] = -others * s;
		}
	}
	if (correct)
		*correct += right;
	return total;
}

/* Count the row's real tokens; 1/count, or 0 for an all-padding row. */
static float inv_token_count(const int32_t *ids, size_t len, int32_t pad_id)
{
	size_t n = 0;

	for (size_t t = 0; t < len; t++)
		n += ids[t] != pad_id;
	return n ? 1.0f / (float)n : 0.0f;
}

static void gather_mean_portable(size_t rows, size_t len, const int32_t *ids,
				 int32_t pad_id, const float *table,
				 size_t dim, float *h, float *inv_count)
{
	for (size_t i = 0; i < rows; i++, ids += len, h += dim) {
		float inv = inv_token_count(ids, len, pad_id);

		inv_count[i] = inv;
		memset(h, 0, dim * sizeof(*h));
		for (size_t t = 0; t < len; t++) {
			if (ids[t] == pad_id)
				continue;
			const float *row = table + (size_t)ids[t] * dim;
			for (size_t d = 0; d < dim; d++)
				h[d] += row[d];
		}
		for (size_t d = 0; d < dim; d++)
			h[d] *= inv;
	}
}

static void segment_sum_portable(size_t n, const uint32_t *start,
				 const uint32_t *row, const float *dh,
				 const float *inv_count, size_t dim, float *dst)
{
	for (size_t s = 0; s < n; s++, dst += dim) {
		memset(dst, 0, dim * sizeof(*dst));
		for (uint32_t j = start[s]; j < start[s + 1]; j++) {
			const float *src = dh + (size_t)row[j] * dim;
			float w = inv_count[row[j]];

			for (size_t d = 0; d < dim; d++)
				dst[d] += w * src[d];
		}
	}
}

static void axpy_portable(size_t n, float a, const float *x, float *y)
{
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

static void scale_portable(size_t n, float a, float *x)
{
	for (size_t i = 0; i < n; i++)
		x[i] *= a;
}

const pf_kernel_ops pf_kernels_portable = {
	.name = "portable",
	.gemm_micro = micro_portable,
	.gemm_micro_half = micro_portable_half,
	.softmax_xent = softmax_xent_portable,
	.gather_mean = gather_mean_portable,
	.segment_sum = segment_sum_portable,
	.axpy = axpy_portable,
	.scale = scale_portable,
};

/* ------------------------------------------------------------------ */
/* AVX2 + FMA implementation                                            */
/* ------------------------------------------------------------------ */
#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))

/* Loading 8 ints at tail_mask + 8 - t gives a mask of the first t lanes. */
static const int32_t tail_mask[16] = { -1, -1, -1, -1, -1, -1, -1, -1,
				       0, 0, 0, 0, 0, 0, 0, 0 };

AVX2 static inline __m256i lanes(size_t t)
{
	return _mm256_loadu_si256((const __m256i *)(tail_mask + 8 - t));
}

AVX2 static inline float hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v),
			      _mm256_extractf128_ps(v, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

AVX2 static inline float hmax(__m256 v)
{
	__m128 s = _mm_max_ps(_mm256_castps256_ps128(v),
			      _mm256_extractf128_ps(v, 1));

	s = _mm_max_ps(s, _mm_movehl_ps(s, s));
	s = _mm_max_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/*
 * e^x for x <= 0 (softmax after the maximum is subtracted), Cephes's
 * expf: x = n ln2 + r with |r| <= ln2/2, e^r by a degree-6 polynomial
 * (about 2 ulp), times 2^n built in the exponent field.  Below -87.3 the
 * true value is under FLT_MIN; clamping there returns 2^-126 instead of a
 * denormal or 0, far below anything a probability sum can notice.
 */
AVX2 static inline __m256 exp_avx2(__m256 x)
{
	const __m256 ln2_hi = _mm256_set1_ps(0.693359375f);
	const __m256 ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
	__m256 n, r, r2, p;
	__m256i e;

	x = _mm256_max_ps(x, _mm256_set1_ps(-87.3365f));
	x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
	n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504089f)),
			    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	r = _mm256_fnmadd_ps(n, ln2_hi, x);
	r = _mm256_fnmadd_ps(n, ln2_lo, r);
	r2 = _mm256_mul_ps(r, r);
	p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, r2, r);
	p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
	e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
					       _mm256_set1_epi32(127)), 23);
	return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* 6 x 16 register tile: 12 accumulators give each of the two FMA pipes
 * six independent chains, enough to cover a 4-cycle FMA latency.  A is
 * read through six row pointers, so packed and in-place A cost the same
 * here. */
AVX2 static void micro_avx2(size_t kc, const float *a, size_t rs, size_t cs,
			    const float *bp, float *c, size_t ldc, float alpha)
{
	__m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
	__m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
	__m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
	__m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
	__m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
	__m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
	__m256 va = _mm256_set1_ps(alpha);
	const float *a0 = a, *a1 = a + rs, *a2 = a + 2 * rs;
	const float *a3 = a + 3 * rs, *a4 = a + 4 * rs, *a5 = a + 5 * rs;

	for (size_t p = 0, o = 0; p < kc; p++, o += cs) {
		__m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
		__m256 x;

		x = _mm256_broadcast_ss(a0 + o);
		c00 = _mm256_fmadd_ps(x, b0, c00);
		c01 = _mm256_fmadd_ps(x, b1, c01);
		x = _mm256_broadcast_ss(a1 + o);
		c10 = _mm256_fmadd_ps(x, b0, c10);
		c11 = _mm256_fmadd_ps(x, b1, c11);
		x = _mm256_broadcast_ss(a2 + o);
		c20 = _mm256_fmadd_ps(x, b0, c20);
		c21 = _mm256_fmadd_ps(x, b1, c21);
		x = _mm256_broadcast_ss(a3 + o);
		c30 = _mm256_fmadd_ps(x, b0, c30);
		c31 = _mm256_fmadd_ps(x, b1, c31);
		x = _mm256_broadcast_ss(a4 + o);
		c40 = _mm256_fmadd_ps(x, b0, c40);
		c41 = _mm256_fmadd_ps(x, b1, c41);
		x = _mm256_broadcast_ss(a5 + o);
		c50 = _mm256_fmadd_ps(x, b0, c50);
		c51 = _mm256_fmadd_ps(x, b1, c51);
		bp += NR;
	}
#define STORE_ROW(r, lo, hi)                                                   \
	do {                                                                   \
		float *cr = c + (r) * ldc;                                     \
		_mm256_storeu_ps(cr, _mm256_fmadd_ps(va, lo, _mm256_loadu_ps(cr)));  \
		_mm256_storeu_ps(cr + 8,                                       \
				 _mm256_fmadd_ps(va, hi, _mm256_loadu_ps(cr + 8))); \
	} while (0)
	STORE_ROW(0, c00, c01);
	STORE_ROW(1, c10, c11);
	STORE_ROW(2, c20, c21);
	STORE_ROW(3, c30, c31);
	STORE_ROW(4, c40, c41);
	STORE_ROW(5, c50, c51);
#undef STORE_ROW
}

/* 6 x 8: only six chains for two FMA pipes of 4-cycle latency (3/4 of
 * their peak at best), still half again what the 6 x 16 tile does on a
 * panel of 8 columns, half of which would be padding. */
AVX2 static void micro_avx2_half(size_t kc, const float *a, size_t rs,
				 size_t cs, const float *bp, float *c,
				 size_t ldc, float alpha)
{
	__m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps();
	__m256 c2 = _mm256_setzero_ps(), c3 = _mm256_setzero_ps();
	__m256 c4 = _mm256_setzero_ps(), c5 = _mm256_setzero_ps();
	__m256 va = _mm256_set1_ps(alpha);
	const float *a0 = a, *a1 = a + rs, *a2 = a + 2 * rs;
	const float *a3 = a + 3 * rs, *a4 = a + 4 * rs, *a5 = a + 5 * rs;

	for (size_t p = 0, o = 0; p < kc; p++, o += cs, bp += NR) {
		__m256 b0 = _mm256_loadu_ps(bp);

		c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + o), b0, c0);
		c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + o), b0, c1);
		c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a2 + o), b0, c2);
		c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a3 + o), b0, c3);
		c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a4 + o), b0, c4);
		c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a5 + o), b0, c5);
	}
#define STORE_HALF(r, v)                                                      \
	_mm256_storeu_ps(c + (r) * ldc, _mm256_fmadd_ps(va, v,                \
			 _mm256_loadu_ps(c + (r) * ldc)))
	STORE_HALF(0, c0);
	STORE_HALF(1, c1);
	STORE_HALF(2, c2);
	STORE_HALF(3, c3);
	STORE_HALF(4, c4);
	STORE_HALF(5, c5);
#undef STORE_HALF
}

/*
 * One row at a time, vectorised across classes, the last vector masked.
 * Masked-off lanes are loaded as 0, so the maximum blends them to -inf.
 */
AVX2 static double softmax_xent_avx2(size_t rows, size_t classes, float *z,
				     const int32_t *labels, float grad_scale,
				     bool want_grad, uint32_t *correct)
{
	const size_t full = classes & ~(size_t)7, tail = classes & 7;
	const __m256i tmask = lanes(tail);
	const __m256 ninf = _mm256_set1_ps(-INFINITY);
	double total = 0.0;
	uint32_t right = 0;

	for (size_t i = 0; i < rows; i++, z += classes) {
		size_t y = (size_t)labels[i];
		float zy = z[y], max, others, ey;
		__m256 vmax = ninf, vsum = _mm256_setzero_ps(), m;

		for (size_t j = 0; j < full; j += 8)
			vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(z + j));
		if (tail) {
			__m256 v = _mm256_maskload_ps(z + full, tmask);
			vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(
				ninf, v, _mm256_castsi256_ps(tmask)));
		}
		max = hmax(vmax);
		if (correct) {
			/* First index holding the maximum: ties go low,
			 * as in the portable path (bounded: NaN equals
			 * nothing). */
			size_t best = 0;
			while (best + 1 < classes && z[best] != max)
				best++;
			right += best == y;
		}
		m = _mm256_set1_ps(max);
		for (size_t j = 0; j < full; j += 8)
			_mm256_storeu_ps(z + j, exp_avx2(_mm256_sub_ps(
				_mm256_loadu_ps(z + j), m)));
		if (tail) {
			__m256 v = _mm256_maskload_ps(z + full, tmask);
			_mm256_maskstore_ps(z + full, tmask,
					    exp_avx2(_mm256_sub_ps(v, m)));
		}
		/* The other classes' sum, the label's lane zeroed (see
		 * row_loss()); masked-off lanes load as 0. */
		ey = z[y];
		z[y] = 0.0f;
		for (size_t j = 0; j < full; j += 8)
			vsum = _mm256_add_ps(vsum, _mm256_loadu_ps(z + j));
		if (tail)
			vsum = _mm256_add_ps(vsum, _mm256_maskload_ps(z + full, tmask));
		others = hsum(vsum);
		total += row_loss(others, ey, zy, max);
		if (want_grad) {
			float g = grad_scale / (others + ey);
			__m256 s = _mm256_set1_ps(g);

			for (size_t j = 0; j < full; j += 8)
				_mm256_storeu_ps(z + j, _mm256_mul_ps(
					_mm256_loadu_ps(z + j), s));
			if (tail)
				_mm256_maskstore_ps(z + full, tmask, _mm256_mul_ps(
					_mm256_maskload_ps(z + full, tmask), s));
			z[y] = -others * g;
		}
	}
	if (correct)
		*correct += right;
	return total;
}

/*
 * Sum the table rows of one record's tokens into h, 32 floats (4 ymm
 * accumulators) at a time so each token costs 4 independent adds rather
 * than a load-add-store chain through h; then the last < 32 floats with
 * masked vectors.
 */
AVX2 static void gather_mean_avx2(size_t rows, size_t len, const int32_t *ids,
				  int32_t pad_id, const float *table,
				  size_t dim, float *h, float *inv_count)
{
	for (size_t i = 0; i < rows; i++, ids += len, h += dim) {
		float inv = inv_token_count(ids, len, pad_id);
		__m256 s = _mm256_set1_ps(inv);
		size_t d = 0;

		inv_count[i] = inv;
		for (; d + 32 <= dim; d += 32) {
			__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
			__m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();

			for (size_t t = 0; t < len; t++) {
				if (ids[t] == pad_id)
					continue;
				const float *row = table + (size_t)ids[t] * dim + d;
				a0 = _mm256_add_ps(a0, _mm256_loadu_ps(row));
				a1 = _mm256_add_ps(a1, _mm256_loadu_ps(row + 8));
				a2 = _mm256_add_ps(a2, _mm256_loadu_ps(row + 16));
				a3 = _mm256_add_ps(a3, _mm256_loadu_ps(row + 24));
			}
			_mm256_storeu_ps(h + d, _mm256_mul_ps(a0, s));
			_mm256_storeu_ps(h + d + 8, _mm256_mul_ps(a1, s));
			_mm256_storeu_ps(h + d + 16, _mm256_mul_ps(a2, s));
			_mm256_storeu_ps(h + d + 24, _mm256_mul_ps(a3, s));
		}
		if (d < dim) {
			size_t rest = dim - d;
			__m256i m0 = lanes(min_size(rest, 8));
			__m256i m1 = lanes(rest > 8 ? min_size(rest - 8, 8) : 0);
			__m256i m2 = lanes(rest > 16 ? min_size(rest - 16, 8) : 0);
			__m256i m3 = lanes(rest > 24 ? rest - 24 : 0);
			__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
			__m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();

			for (size_t t = 0; t < len; t++) {
				if (ids[t] == pad_id)
					continue;
				const float *row = table + (size_t)ids[t] * dim + d;
				a0 = _mm256_add_ps(a0, _mm256_maskload_ps(row, m0));
				a1 = _mm256_add_ps(a1, _mm256_maskload_ps(row + 8, m1));
				a2 = _mm256_add_ps(a2, _mm256_maskload_ps(row + 16, m2));
				a3 = _mm256_add_ps(a3, _mm256_maskload_ps(row + 24, m3));
			}
			_mm256_maskstore_ps(h + d, m0, _mm256_mul_ps(a0, s));
			_mm256_maskstore_ps(h + d + 8, m1, _mm256_mul_ps(a1, s));
			_mm256_maskstore_ps(h + d + 16, m2, _mm256_mul_ps(a2, s));
			_mm256_maskstore_ps(h + d + 24, m3, _mm256_mul_ps(a3, s));
		}
	}
}

/* y += a * x over n floats, the last < 8 masked. */
AVX2 static inline void axpy_body(size_t n, __m256 va, const float *x,
				  float *y)
{
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m256 y0 = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i));
		__m256 y1 = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8));
		__m256 y2 = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16));
		__m256 y3 = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24));
		_mm256_storeu_ps(y + i, y0);
		_mm256_storeu_ps(y + i + 8, y1);
		_mm256_storeu_ps(y + i + 16, y2);
		_mm256_storeu_ps(y + i + 24, y3);
	}
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i),
							_mm256_loadu_ps(y + i)));
	if (i < n) {
		__m256i m = lanes(n - i);
		_mm256_maskstore_ps(y + i, m, _mm256_fmadd_ps(va,
			_mm256_maskload_ps(x + i, m), _mm256_maskload_ps(y + i, m)));
	}
}

/* As gather_mean_avx2: 32 floats of the output row in 4 accumulators
 * across all of its occurrences, then the last < 32 masked. */
AVX2 static void segment_sum_avx2(size_t n, const uint32_t *start,
				  const uint32_t *row, const float *dh,
				  const float *inv_count, size_t dim, float *dst)
{
	for (size_t s = 0; s < n; s++, dst += dim) {
		const uint32_t j0 = start[s], j1 = start[s + 1];
		size_t d = 0;

		for (; d + 32 <= dim; d += 32) {
			__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
			__m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();

			for (uint32_t j = j0; j < j1; j++) {
				const float *src = dh + (size_t)row[j] * dim + d;
				__m256 w = _mm256_set1_ps(inv_count[row[j]]);
				a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(src), a0);
				a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(src + 8), a1);
				a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(src + 16), a2);
				a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(src + 24), a3);
			}
			_mm256_storeu_ps(dst + d, a0);
			_mm256_storeu_ps(dst + d + 8, a1);
			_mm256_storeu_ps(dst + d + 16, a2);
			_mm256_storeu_ps(dst + d + 24, a3);
		}
		if (d < dim) {
			size_t rest = dim - d;
			__m256i m0 = lanes(min_size(rest, 8));
			__m256i m1 = lanes(rest > 8 ? min_size(rest - 8, 8) : 0);
			__m256i m2 = lanes(rest > 16 ? min_size(rest - 16, 8) : 0);
			__m256i m3 = lanes(rest > 24 ? rest - 24 : 0);
			__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
			__m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();

			for (uint32_t j = j0; j < j1; j++) {
				const float *src = dh + (size_t)row[j] * dim + d;
				__m256 w = _mm256_set1_ps(inv_count[row[j]]);
				a0 = _mm256_fmadd_ps(w, _mm256_maskload_ps(src, m0), a0);
				a1 = _mm256_fmadd_ps(w, _mm256_maskload_ps(src + 8, m1), a1);
				a2 = _mm256_fmadd_ps(w, _mm256_maskload_ps(src + 16, m2), a2);
				a3 = _mm256_fmadd_ps(w, _mm256_maskload_ps(src + 24, m3), a3);
			}
			_mm256_maskstore_ps(dst + d, m0, a0);
			_mm256_maskstore_ps(dst + d + 8, m1, a1);
			_mm256_maskstore_ps(dst + d + 16, m2, a2);
			_mm256_maskstore_ps(dst + d + 24, m3, a3);
		}
	}
}

AVX2 static void axpy_avx2(size_t n, float a, const float *x, float *y)
{
	axpy_body(n, _mm256_set1_ps(a), x, y);
}

AVX2 static void scale_avx2(size_t n, float a, float *x)
{
	__m256 va = _mm256_set1_ps(a);
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(x + i, _mm256_mul_ps(va, _mm256_loadu_ps(x + i)));
	if (i < n) {
		__m256i m = lanes(n - i);
		_mm256_maskstore_ps(x + i, m, _mm256_mul_ps(va,
			_mm256_maskload_ps(x + i, m)));
	}
}

const pf_kernel_ops pf_kernels_avx2 = {
	.name = "avx2",
	.gemm_micro = micro_avx2,
	.gemm_micro_half = micro_avx2_half,
	.softmax_xent = softmax_xent_avx2,
	.gather_mean = gather_mean_avx2,
	.segment_sum = segment_sum_avx2,
	.axpy = axpy_avx2,
	.scale = scale_avx2,
};
#endif

/* ------------------------------------------------------------------ */
/* Dispatch                                                             */
/* ------------------------------------------------------------------ */

static bool have_avx2;
static const pf_kernel_ops *default_ops = &pf_kernels_portable;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static const pf_kernel_ops *by_name(const char *name)
{
	if (!strcmp(name, "portable"))
		return &pf_kernels_portable;
#if defined(__x86_64__)
	if (!strcmp(name, "avx2"))
		return have_avx2 ? &pf_kernels_avx2 : NULL;
#endif
	return NULL;
}

static void choose(void)
{
	const char *env = getenv("PODFEED_KERNELS");
	const pf_kernel_ops *want;

#if defined(__x86_64__)
	__builtin_cpu_init();
	have_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	if (have_avx2)
		default_ops = &pf_kernels_avx2;
#endif
	/* An unknown or unsupported name leaves the best choice: a typo
	 * must not silently slow a job down to the portable path. */
	if (env && *env && (want = by_name(env)))
		default_ops = want;
}

const pf_kernel_ops *pf_kernels_find(const char *name)
{
	pthread_once(&choose_once, choose);
	return name ? by_name(name) : default_ops;
}

bool pf_kernels_supported(const char *name)
{
	return pf_kernels_find(name) != NULL;
}

const char *pf_kernels_impl(void)
{
	return pf_kernels_find(NULL)->name;
}
