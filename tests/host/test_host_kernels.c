/* SPDX-License-Identifier: Apache-2.0 */
/* host/ kernels and models: each kernel and each model's gradient against a
 * scalar double-precision reference on awkward sizes, on both kernel
 * implementations; finite differences; training on teacher data; fixed-
 * order gradient averaging; bad input. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_internal.h"
#include "pf_host.h"

/* Relative error bound of every float kernel against the double
 * reference: max |got - ref| / max |ref| over the whole output. */
#define REL_TOL 1e-5

/* ------------------------------------------------------------------ */
/* Helpers                                                              */
/* ------------------------------------------------------------------ */

typedef struct trng {
	uint64_t s;
} trng;

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t tr_next(trng *r)
{
	r->s += 0x9e3779b97f4a7c15ull;
	return mix64(r->s);
}

static double tr_unit(trng *r)
{
	return (double)(tr_next(r) >> 11) * 0x1.0p-53;
}

static float tr_uniform(trng *r, float lo, float hi)
{
	return lo + (hi - lo) * (float)tr_unit(r);
}

static double tr_gauss(trng *r)
{
	double u = tr_unit(r), v = tr_unit(r);

	return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

static void fill_uniform(trng *r, float *p, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		p[i] = tr_uniform(r, lo, hi);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	cr_assert_not_null(p);
	return p;
}

/* max |got - ref| / max |ref| (the absolute error when ref is all 0). */
static double rel_err(const float *got, const double *ref, size_t n)
{
	double num = 0.0, den = 0.0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]);
		if (d > num || isnan(d))
			num = isnan(d) ? INFINITY : d;
		if (fabs(ref[i]) > den)
			den = fabs(ref[i]);
	}
	return den > 0.0 ? num / den : num;
}

/* The named implementation, or skip (with why) where the CPU lacks it. */
static const pf_kernel_ops *need(const char *name)
{
	const pf_kernel_ops *k = pf_kernels_find(name);

	if (!k)
		cr_skip_test("the %s kernels need AVX2 and FMA, which this CPU lacks",
			     name);
	return k;
}

/* One test per implementation over the same body. */
#define BOTH_PATHS(topic)                                                    \
	static void topic##_body(const pf_kernel_ops *k);                    \
	Test(host_portable, topic) { topic##_body(need("portable")); }       \
	Test(host_avx2, topic) { topic##_body(need("avx2")); }               \
	static void topic##_body(const pf_kernel_ops *k)

static const size_t awkward[] = { 1, 7, 33, 129 };
#define NAWK (sizeof(awkward) / sizeof(awkward[0]))

/* ------------------------------------------------------------------ */
/* Kernels                                                              */
/* ------------------------------------------------------------------ */

static void check_sgemm(const pf_kernel_ops *k, float *scratch, trng *r,
			bool ta, bool tb, size_t m, size_t n, size_t kk,
			float alpha, float beta)
{
	size_t lda = (ta ? m : kk) + 3, ldb = (tb ? kk : n) + 1, ldc = n + 2;
	size_t arows = ta ? kk : m, brows = tb ? n : kk;
	float *a = xmalloc(arows * lda * sizeof(float));
	float *b = xmalloc(brows * ldb * sizeof(float));
	float *c = xmalloc(m * ldc * sizeof(float));
	double *ref = xmalloc(m * n * sizeof(double));
	float *got = xmalloc(m * n * sizeof(float));

	fill_uniform(r, a, arows * lda, -1, 1);
	fill_uniform(r, b, brows * ldb, -1, 1);
	fill_uniform(r, c, m * ldc, -1, 1);
	if (beta == 0.0f)	/* must be overwritten, never read */
		for (size_t i = 0; i < m; i++)
			for (size_t j = 0; j < n; j++)
				c[i * ldc + j] = NAN;
	for (size_t i = 0; i < m; i++)
		for (size_t j = 0; j < n; j++) {
			double s = 0.0;
			for (size_t p = 0; p < kk; p++)
				s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
				     (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
			ref[i * n + j] = (double)alpha * s +
				(beta == 0.0f ? 0.0 : (double)beta * c[i * ldc + j]);
		}
	/* The two floats past each row of C must survive. */
	for (size_t i = 0; i < m; i++)
		c[i * ldc + n] = c[i * ldc + n + 1] = 1234.5f;

	pf_sgemm(k, ta, tb, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc, scratch);
	for (size_t i = 0; i < m; i++) {
		memcpy(got + i * n, c + i * ldc, n * sizeof(float));
		cr_assert(c[i * ldc + n] == 1234.5f && c[i * ldc + n + 1] == 1234.5f,
			  "%s: sgemm wrote past row %zu of C", k->name, i);
	}
	double e = rel_err(got, ref, m * n);
	cr_assert(e < REL_TOL, "%s: sgemm ta=%d tb=%d m=%zu n=%zu k=%zu alpha=%g "
		  "beta=%g: relative error %g", k->name, ta, tb, m, n, kk,
		  (double)alpha, (double)beta, e);
	free(a);
	free(b);
	free(c);
	free(ref);
	free(got);
}

BOTH_PATHS(sgemm_awkward_sizes_and_transposes)
{
	float *scratch = xmalloc(PF_GEMM_SCRATCH_FLOATS * sizeof(float));
	trng r = { 1 };

	for (int t = 0; t < 4; t++)
		for (size_t i = 0; i < NAWK; i++)
			for (size_t j = 0; j < NAWK; j++)
				for (size_t p = 0; p < NAWK; p++)
					check_sgemm(k, scratch, &r, t & 1, t & 2,
						    awkward[i], awkward[j],
						    awkward[p], 1.0f,
						    (i + j + p) % 3 == 0 ? 0.0f : 1.0f);
	free(scratch);
}

/* Past every blocking boundary: m > MC, k > KC, n > NC, odd alpha/beta;
 * and the half-width tile. */
BOTH_PATHS(sgemm_across_blocks)
{
	float *scratch = xmalloc(PF_GEMM_SCRATCH_FLOATS * sizeof(float));
	trng r = { 2 };
	static const size_t shapes[][3] = {
		{ 300, 17, 520 }, { 5, 1030, 9 }, { 121, 3, 257 },
		{ 127, 33, 1 }, { 6, 16, 256 }, { 12, 32, 512 },
		/* Panels of exactly 8 columns (the half-width tile), alone
		 * and after a full one, with and without an edge row. */
		{ 12, 8, 64 }, { 13, 24, 33 }, { 256, 8, 64 },
	};

	for (int t = 0; t < 4; t++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			check_sgemm(k, scratch, &r, t & 1, t & 2, shapes[s][0],
				    shapes[s][1], shapes[s][2], -0.75f,
				    s % 2 ? 0.5f : 0.0f);
	free(scratch);
}

BOTH_PATHS(sgemm_degenerate_shapes)
{
	float *scratch = xmalloc(PF_GEMM_SCRATCH_FLOATS * sizeof(float));
	float a[4] = { 1, 2, 3, 4 }, c[4] = { 1, 2, 3, 4 };

	/* k == 0: C = beta C. */
	pf_sgemm(k, false, false, 2, 2, 0, 1.0f, a, 1, a, 2, 2.0f, c, 2, scratch);
	cr_assert(c[0] == 2 && c[1] == 4 && c[2] == 6 && c[3] == 8);
	/* m == 0: nothing touched. */
	pf_sgemm(k, false, false, 0, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2, scratch);
	cr_assert(c[0] == 2 && c[3] == 8);
	free(scratch);
}

static double ref_softmax_row(const float *z, size_t c, size_t y, double scale,
			      double *grad, size_t *best)
{
	double max = z[0], sum = 0.0;

	*best = 0;
	for (size_t j = 1; j < c; j++)
		if (z[j] > max) {
			max = z[j];
			*best = j;
		}
	for (size_t j = 0; j < c; j++)
		sum += exp((double)z[j] - max);
	for (size_t j = 0; j < c; j++)
		grad[j] = (exp((double)z[j] - max) / sum - (j == y)) * scale;
	return log(sum) - ((double)z[y] - max);
}

BOTH_PATHS(softmax_xent_against_reference)
{
	static const size_t classes[] = { 2, 7, 8, 9, 10, 16, 17, 33, 129 };
	trng r = { 3 };

	for (size_t ci = 0; ci < sizeof(classes) / sizeof(classes[0]); ci++)
		for (size_t ri = 0; ri < NAWK; ri++)
			for (int shift = 0; shift < 3; shift++) {
				size_t c = classes[ci], rows = awkward[ri];
				float *z = xmalloc(rows * c * sizeof(float));
				float *z2 = xmalloc(rows * c * sizeof(float));
				int32_t *y = xmalloc(rows * sizeof(int32_t));
				double *g = xmalloc(rows * c * sizeof(double));
				double loss = 0.0, got;
				uint32_t right = 0, ref_right = 0, right2 = 0;
				float scale = 1.0f / (float)rows;

				/* shift 1: logits around 100, where exp()
				 * without the maximum taken off overflows;
				 * shift 2: every row confidently right, loss
				 * and gradient near 0 (no cancellation may
				 * eat them). */
				for (size_t i = 0; i < rows * c; i++)
					z[i] = tr_uniform(&r, -6, 6) + (shift == 1 ? 100.0f : 0.0f);
				for (size_t i = 0; i < rows; i++) {
					y[i] = (int32_t)(tr_next(&r) % c);
					if (shift == 2)
						z[i * c + (size_t)y[i]] += 18.0f;
				}
				memcpy(z2, z, rows * c * sizeof(float));
				for (size_t i = 0; i < rows; i++) {
					size_t best;
					loss += ref_softmax_row(z + i * c, c, (size_t)y[i],
								scale, g + i * c, &best);
					ref_right += best == (size_t)y[i];
				}
				got = k->softmax_xent(rows, c, z, y, scale, true, &right);
				cr_assert(fabs(got - loss) <= REL_TOL * fabs(loss),
					  "%s: rows %zu classes %zu: loss %.9g, reference %.9g",
					  k->name, rows, c, got, loss);
				cr_assert_eq(right, ref_right);
				double e = rel_err(z, g, rows * c);
				cr_assert(e < REL_TOL, "%s: rows %zu classes %zu shift %d: "
					  "gradient relative error %g", k->name, rows, c,
					  shift, e);
				/* Without the gradient: same loss and count. */
				got = k->softmax_xent(rows, c, z2, y, 0.0f, false, &right2);
				cr_assert(fabs(got - loss) <= REL_TOL * fabs(loss));
				cr_assert_eq(right2, ref_right);
				free(z);
				free(z2);
				free(y);
				free(g);
			}
}

BOTH_PATHS(softmax_xent_ties_go_to_the_first_class)
{
	float z[2 * 9];
	int32_t y[2] = { 3, 0 };
	uint32_t right = 0;

	/* Row 0: classes 3 and 5 tie for the maximum; row 1: all equal. */
	for (int j = 0; j < 9; j++) {
		z[j] = (j == 3 || j == 5) ? 2.0f : 0.0f;
		z[9 + j] = 1.0f;
	}
	double loss = k->softmax_xent(2, 9, z, y, 1.0f, true, &right);
	cr_assert_eq(right, 2);
	double want = (log(2 * exp(2.0) + 7) - 2.0) + log(9.0);
	cr_assert(fabs(loss - want) < 1e-6 * want, "loss %.9g want %.9g", loss, want);
	cr_assert(fabs(z[9] - (1.0 / 9 - 1)) < 1e-6);
}

/* Ids in [0, vocab) with about a third padding, and row 0 all padding
 * when there is more than one row. */
static int32_t *random_ids(trng *r, size_t rows, size_t len, uint32_t vocab,
			   int32_t pad)
{
	int32_t *ids = xmalloc(rows * len * sizeof(int32_t));

	for (size_t i = 0; i < rows * len; i++) {
		if (tr_next(r) % 3 == 0 || (rows > 1 && i < len))
			ids[i] = pad;
		else
			ids[i] = (int32_t)(tr_next(r) % vocab);
	}
	return ids;
}

static void ref_gather(size_t rows, size_t len, const int32_t *ids, int32_t pad,
		       const float *table, size_t dim, double *h, double *inv)
{
	for (size_t i = 0; i < rows; i++) {
		size_t n = 0;

		for (size_t d = 0; d < dim; d++)
			h[i * dim + d] = 0.0;
		for (size_t t = 0; t < len; t++) {
			int32_t id = ids[i * len + t];
			if (id == pad)
				continue;
			n++;
			for (size_t d = 0; d < dim; d++)
				h[i * dim + d] += table[(size_t)id * dim + d];
		}
		inv[i] = n ? 1.0 / (double)n : 0.0;
		for (size_t d = 0; d < dim; d++)
			h[i * dim + d] *= inv[i];
	}
}

BOTH_PATHS(gather_mean_against_reference)
{
	static const size_t dims[] = { 1, 7, 8, 31, 32, 33, 40, 64, 129 };
	const uint32_t vocab = 61;
	trng r = { 4 };

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
		for (size_t ri = 0; ri < 3; ri++)
			for (size_t li = 0; li < 3; li++)
				for (int padc = 0; padc < 2; padc++) {
					size_t dim = dims[di], rows = awkward[ri], len = awkward[li];
					/* The pad id outside the table, or a
					 * real row the data set reserves. */
					int32_t pad = padc ? 5 : -1;
					float *table = xmalloc(vocab * dim * sizeof(float));
					int32_t *ids = random_ids(&r, rows, len, vocab, pad);
					float *h = xmalloc(rows * dim * sizeof(float));
					float *inv = xmalloc(rows * sizeof(float));
					double *rh = xmalloc(rows * dim * sizeof(double));
					double *rinv = xmalloc(rows * sizeof(double));

					fill_uniform(&r, table, vocab * dim, -1, 1);
					ref_gather(rows, len, ids, pad, table, dim, rh, rinv);
					k->gather_mean(rows, len, ids, pad, table, dim, h, inv);
					double e = rel_err(h, rh, rows * dim);
					cr_assert(e < REL_TOL, "%s: dim %zu rows %zu len %zu: "
						  "relative error %g", k->name, dim, rows, len, e);
					cr_assert(rel_err(inv, rinv, rows) < REL_TOL);
					if (rows > 1) {
						cr_assert_eq(inv[0], 0.0f);
						for (size_t d = 0; d < dim; d++)
							cr_assert_eq(h[d], 0.0f);
					}
					free(table);
					free(ids);
					free(h);
					free(inv);
					free(rh);
					free(rinv);
				}
}

BOTH_PATHS(segment_sum_against_reference)
{
	static const size_t dims[] = { 1, 7, 8, 31, 32, 33, 40, 129 };
	const size_t nseg = 37, rows = 33;
	trng r = { 5 };

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++) {
		size_t dim = dims[di];
		uint32_t start[38], *row = xmalloc(400 * sizeof(uint32_t));
		float *dh = xmalloc(rows * dim * sizeof(float));
		float *inv = xmalloc(rows * sizeof(float));
		float *dst = xmalloc((nseg * dim + 1) * sizeof(float));
		double *ref = xmalloc(nseg * dim * sizeof(double));

		/* Segments of 0 to 10 occurrences (3, 10, 17, ... always
		 * empty), rows repeating within a segment. */
		start[0] = 0;
		for (size_t sg = 0; sg < nseg; sg++) {
			uint32_t n = sg % 7 == 3 ? 0 : (uint32_t)(tr_next(&r) % 11);
			for (uint32_t j = 0; j < n; j++)
				row[start[sg] + j] = (uint32_t)(tr_next(&r) % rows);
			start[sg + 1] = start[sg] + n;
		}
		fill_uniform(&r, dh, rows * dim, -1, 1);
		for (size_t i = 0; i < rows; i++)
			inv[i] = tr_uniform(&r, 0.01f, 1.0f);
		fill_uniform(&r, dst, nseg * dim + 1, -1, 1);	/* overwritten */
		dst[nseg * dim] = 99.0f;
		for (size_t sg = 0; sg < nseg; sg++)
			for (size_t d = 0; d < dim; d++) {
				double a = 0.0;
				for (uint32_t j = start[sg]; j < start[sg + 1]; j++)
					a += (double)inv[row[j]] * dh[row[j] * dim + d];
				ref[sg * dim + d] = a;
			}
		k->segment_sum(nseg, start, row, dh, inv, dim, dst);
		double e = rel_err(dst, ref, nseg * dim);
		cr_assert(e < REL_TOL, "%s: dim %zu: relative error %g", k->name, dim, e);
		for (size_t d = 0; d < dim; d++)
			cr_assert_eq(dst[3 * dim + d], 0.0f, "empty segment not zeroed");
		cr_assert_eq(dst[nseg * dim], 99.0f, "wrote past the last segment");
		free(row);
		free(dh);
		free(inv);
		free(dst);
		free(ref);
	}
}

BOTH_PATHS(axpy_scale_col_sum_against_reference)
{
	static const size_t lens[] = { 0, 1, 7, 8, 9, 31, 32, 33, 100, 1027 };
	trng r = { 6 };

	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		size_t n = lens[li];
		float *x = xmalloc((n + 1) * sizeof(float));
		float *y = xmalloc((n + 1) * sizeof(float));
		double *ref = xmalloc((n + 1) * sizeof(double));

		fill_uniform(&r, x, n + 1, -1, 1);
		fill_uniform(&r, y, n + 1, -1, 1);
		y[n] = 77.0f;
		for (size_t i = 0; i < n; i++)
			ref[i] = (double)y[i] + (double)-0.3f * x[i];
		k->axpy(n, -0.3f, x, y);
		cr_assert(rel_err(y, ref, n) < REL_TOL, "%s axpy n=%zu", k->name, n);
		cr_assert_eq(y[n], 77.0f, "axpy wrote past n=%zu", n);
		for (size_t i = 0; i < n; i++)
			ref[i] = (double)y[i] * 1.7;
		k->scale(n, 1.7f, y);
		cr_assert(rel_err(y, ref, n) < REL_TOL, "%s scale n=%zu", k->name, n);
		cr_assert_eq(y[n], 77.0f, "scale wrote past n=%zu", n);
		free(x);
		free(y);
		free(ref);
	}
	for (size_t ri = 0; ri < NAWK; ri++) {
		size_t rows = awkward[ri], cols = 13, ld = 15;
		float *x = xmalloc(rows * ld * sizeof(float)), out[13];
		double ref[13] = { 0 };

		fill_uniform(&r, x, rows * ld, -1, 1);
		for (size_t i = 0; i < rows; i++)
			for (size_t j = 0; j < cols; j++)
				ref[j] += x[i * ld + j];
		pf_col_sum(k, rows, cols, x, ld, out);
		cr_assert(rel_err(out, ref, cols) < REL_TOL, "%s col_sum rows=%zu",
			  k->name, rows);
		free(x);
	}
}

/* ------------------------------------------------------------------ */
/* Models against a double-precision reference                          */
/* ------------------------------------------------------------------ */

static pf_model *make_model(const pf_model_config *cfg)
{
	pf_model *m = NULL;
	pf_error err;

	pf_error_clear(&err);
	int ret = pf_model_create(&m, cfg, &err);
	cr_assert_eq(ret, 0, "pf_model_create: %d %s", ret, err.msg);
	return m;
}

/*
 * The reference model in double: loss and gradient of the batch mean.
 * dW [in][c], db [c] into gd (in*c + c); for embag the dense table
 * gradient [vocab][dim] into ge.
 */
static double ref_model_grad(pf_model *m, const pf_model_batch *b, double *gd,
			     double *ge, uint32_t *correct)
{
	const pf_model_config *c = pf_model_get_config(m);
	size_t nd;
	uint32_t vocab, edim;
	const float *dense = pf_model_dense(m, &nd);
	const float *table = pf_model_embedding(m, &vocab, &edim);
	size_t in = c->kind == PF_MODEL_EMBAG ? c->embed_dim : c->dim, C = c->classes;
	double *input = xmalloc(b->rows * in * sizeof(double));
	double *inv = xmalloc(b->rows * sizeof(double));
	double *z = xmalloc(C * sizeof(double)), *dz = xmalloc(C * sizeof(double));
	double loss = 0.0;

	if (c->kind == PF_MODEL_EMBAG) {
		ref_gather(b->rows, c->seq_len, b->tokens, c->pad_id, table, edim,
			   input, inv);
		memset(ge, 0, (size_t)vocab * edim * sizeof(double));
	} else {
		for (size_t i = 0; i < b->rows * in; i++)
			input[i] = b->x[i];
	}
	memset(gd, 0, nd * sizeof(double));
	*correct = 0;
	for (uint32_t i = 0; i < b->rows; i++) {
		const double *xi = input + i * in;
		size_t y = (size_t)b->labels[i], best = 0;
		double max, sum = 0.0;

		for (size_t j = 0; j < C; j++) {
			z[j] = dense[in * C + j];
			for (size_t p = 0; p < in; p++)
				z[j] += xi[p] * dense[p * C + j];
		}
		max = z[0];
		for (size_t j = 1; j < C; j++)
			if (z[j] > max) {
				max = z[j];
				best = j;
			}
		*correct += best == y;
		for (size_t j = 0; j < C; j++)
			sum += exp(z[j] - max);
		loss += log(sum) - (z[y] - max);
		for (size_t j = 0; j < C; j++)
			dz[j] = (exp(z[j] - max) / sum - (j == y)) / b->rows;
		for (size_t p = 0; p < in; p++)
			for (size_t j = 0; j < C; j++)
				gd[p * C + j] += xi[p] * dz[j];
		for (size_t j = 0; j < C; j++)
			gd[in * C + j] += dz[j];
		if (c->kind != PF_MODEL_EMBAG)
			continue;
		for (uint32_t t = 0; t < c->seq_len; t++) {
			int32_t id = b->tokens[i * c->seq_len + t];
			if (id == c->pad_id)
				continue;
			for (size_t p = 0; p < in; p++) {
				double dh = 0.0;
				for (size_t j = 0; j < C; j++)
					dh += dz[j] * dense[p * C + j];
				ge[(size_t)id * edim + p] += dh * inv[i];
			}
		}
	}
	free(input);
	free(inv);
	free(z);
	free(dz);
	return loss / b->rows;
}

/* Random parameters of a useful scale (the initial ones are tiny for
 * softmax, which would make the check easy). */
static void randomize_params(pf_model *m, trng *r)
{
	size_t nd;
	uint32_t vocab, edim;
	float *d = pf_model_dense(m, &nd);
	float *e = pf_model_embedding(m, &vocab, &edim);

	fill_uniform(r, d, nd, -0.5f, 0.5f);
	if (e)
		fill_uniform(r, e, (size_t)vocab * edim, -1.0f, 1.0f);
}

static void check_softmax_grad(const char *kernels, size_t rows, size_t dim,
			       size_t classes, trng *r)
{
	pf_model_config cfg = { .kind = PF_MODEL_SOFTMAX, .classes = (uint32_t)classes,
				.dim = (uint32_t)dim, .max_rows = (uint32_t)rows,
				.seed = 7, .kernels = kernels };
	pf_model *m = make_model(&cfg);
	pf_workspace *ws;
	pf_grad *g;
	float *x = xmalloc(rows * dim * sizeof(float));
	int32_t *y = xmalloc(rows * sizeof(int32_t));
	size_t nd;
	double loss, ref_loss, eval_loss;
	uint32_t ref_right, right;

	cr_assert_eq(pf_workspace_create(m, &ws), 0);
	cr_assert_eq(pf_grad_create(m, 1, &g), 0);
	randomize_params(m, r);
	fill_uniform(r, x, rows * dim, -2, 2);
	for (size_t i = 0; i < rows; i++)
		y[i] = (int32_t)(tr_next(r) % classes);
	pf_model_batch b = { .rows = (uint32_t)rows, .x = x, .labels = y };
	double *gd = xmalloc((dim + 1) * classes * sizeof(double));

	ref_loss = ref_model_grad(m, &b, gd, NULL, &ref_right);
	cr_assert_eq(pf_model_grad(m, ws, &b, g, &loss, NULL), 0);
	cr_assert(fabs(loss - ref_loss) <= REL_TOL * ref_loss,
		  "%s softmax rows %zu dim %zu classes %zu: loss %.9g ref %.9g",
		  kernels, rows, dim, classes, loss, ref_loss);
	float *gg = pf_grad_dense(g, &nd);
	cr_assert_eq(nd, (dim + 1) * classes);
	double e = rel_err(gg, gd, nd);
	cr_assert(e < REL_TOL, "%s softmax rows %zu dim %zu classes %zu: gradient "
		  "relative error %g", kernels, rows, dim, classes, e);
	cr_assert_eq(pf_model_evaluate(m, ws, &b, &eval_loss, &right, NULL), 0);
	cr_assert(fabs(eval_loss - ref_loss) <= REL_TOL * ref_loss);
	cr_assert_eq(right, ref_right);
	free(gd);
	free(x);
	free(y);
	pf_grad_free(g);
	pf_workspace_free(ws);
	pf_model_free(m);
}

static void check_embag_grad(const char *kernels, size_t rows, size_t len,
			     size_t edim, size_t classes, int32_t pad, trng *r)
{
	const uint32_t vocab = 97;
	pf_model_config cfg = { .kind = PF_MODEL_EMBAG, .classes = (uint32_t)classes,
				.vocab = vocab, .embed_dim = (uint32_t)edim,
				.seq_len = (uint32_t)len, .pad_id = pad,
				.max_rows = (uint32_t)rows, .seed = 9,
				.kernels = kernels };
	pf_model *m = make_model(&cfg);
	pf_workspace *ws;
	pf_grad *g;
	int32_t *tok = random_ids(r, rows, len, vocab, pad);
	int32_t *y = xmalloc(rows * sizeof(int32_t));
	double *gd = xmalloc((edim + 1) * classes * sizeof(double));
	double *ge = xmalloc(vocab * edim * sizeof(double));
	double *ge_rows = xmalloc(vocab * edim * sizeof(double));
	bool used[97] = { false };
	size_t nd, nused = 0;
	double loss, ref_loss;
	uint32_t ref_right, dim;
	const uint32_t *ids;
	float *grows;

	cr_assert_eq(pf_workspace_create(m, &ws), 0);
	cr_assert_eq(pf_grad_create(m, 1, &g), 0);
	randomize_params(m, r);
	for (size_t i = 0; i < rows; i++)
		y[i] = (int32_t)(tr_next(r) % classes);
	for (size_t i = 0; i < rows * len; i++)
		if (tok[i] != pad && !used[tok[i]]) {
			used[tok[i]] = true;
			nused++;
		}
	pf_model_batch b = { .rows = (uint32_t)rows, .tokens = tok, .labels = y };

	ref_loss = ref_model_grad(m, &b, gd, ge, &ref_right);
	cr_assert_eq(pf_model_grad(m, ws, &b, g, &loss, NULL), 0);
	cr_assert(fabs(loss - ref_loss) <= REL_TOL * ref_loss,
		  "%s embag: loss %.9g ref %.9g", kernels, loss, ref_loss);
	float *gg = pf_grad_dense(g, &nd);
	double e = rel_err(gg, gd, nd);
	cr_assert(e < REL_TOL, "%s embag rows %zu len %zu edim %zu classes %zu: "
		  "dense gradient relative error %g", kernels, rows, len, edim,
		  classes, e);
	/* The touched rows: exactly the real tokens, ascending. */
	uint32_t n = pf_grad_rows(g, &ids, &grows, &dim);
	cr_assert_eq(n, nused, "%u rows, %zu distinct tokens", n, nused);
	cr_assert_eq(dim, edim);
	for (uint32_t i = 0; i < n; i++) {
		cr_assert(used[ids[i]]);
		if (i)
			cr_assert_gt(ids[i], ids[i - 1]);
		memcpy(ge_rows + (size_t)i * edim, ge + (size_t)ids[i] * edim,
		       edim * sizeof(double));
	}
	e = rel_err(grows, ge_rows, (size_t)n * edim);
	cr_assert(e < REL_TOL, "%s embag rows %zu len %zu edim %zu: embedding "
		  "gradient relative error %g", kernels, rows, len, edim, e);
	free(tok);
	free(y);
	free(gd);
	free(ge);
	free(ge_rows);
	pf_grad_free(g);
	pf_workspace_free(ws);
	pf_model_free(m);
}

static void softmax_grads(const char *kernels)
{
	static const size_t dims[] = { 1, 7, 33, 257 };
	static const size_t classes[] = { 2, 10, 17 };
	trng r = { 10 };

	for (size_t ri = 0; ri < NAWK; ri++)
		for (size_t di = 0; di < 4; di++)
			for (size_t ci = 0; ci < 3; ci++)
				check_softmax_grad(kernels, awkward[ri], dims[di],
						   classes[ci], &r);
}

static void embag_grads(const char *kernels)
{
	static const size_t classes[] = { 2, 8, 17 };
	trng r = { 11 };

	for (size_t ri = 0; ri < 3; ri++)
		for (size_t li = 0; li < 3; li++)
			for (size_t ei = 0; ei < NAWK; ei++)
				for (size_t ci = 0; ci < 3; ci++)
					check_embag_grad(kernels, awkward[ri],
							 awkward[li], awkward[ei],
							 classes[ci],
							 (ri + ci) % 2 ? -1 : 3, &r);
}

Test(host_portable, softmax_gradient_against_reference)
{
	softmax_grads("portable");
}

Test(host_avx2, softmax_gradient_against_reference)
{
	need("avx2");
	softmax_grads("avx2");
}

Test(host_portable, embag_gradient_against_reference)
{
	embag_grads("portable");
}

Test(host_avx2, embag_gradient_against_reference)
{
	need("avx2");
	embag_grads("avx2");
}

/* ------------------------------------------------------------------ */
/* Finite differences of the float model's own loss                     */
/* ------------------------------------------------------------------ */


/*
 * Central differences on single parameters of the float model, through
 * pf_model_evaluate(): the loss is a float computation (about 1e-7
 * relative), so with a step of 1e-2 the quotient carries about 1e-5 of
 * rounding and h^2 of truncation (the worst seen is 4e-6).  A gradient
 * off by a factor, a sign or a term is far outside FD_TOL.
 */
#define FD_STEP 1e-2f
#define FD_TOL 2e-4

static double fd_one(pf_model *m, pf_workspace *ws, const pf_model_batch *b,
		     float *param)
{
	float keep = *param, up = keep + FD_STEP, down = keep - FD_STEP;
	double lu, ld;

	*param = up;
	cr_assert_eq(pf_model_evaluate(m, ws, b, &lu, NULL, NULL), 0);
	*param = down;
	cr_assert_eq(pf_model_evaluate(m, ws, b, &ld, NULL, NULL), 0);
	*param = keep;
	return (lu - ld) / ((double)up - (double)down);
}

static void fd_model(const char *kernels, pf_model_kind kind)
{
	const uint32_t rows = 9;
	pf_model_config cfg = { .kind = kind, .classes = kind == PF_MODEL_EMBAG ? 4 : 5,
				.dim = 7, .vocab = 23, .embed_dim = 6, .seq_len = 5,
				.pad_id = -1, .max_rows = rows, .seed = 3,
				.kernels = kernels };
	pf_model *m = make_model(&cfg);
	pf_workspace *ws;
	pf_grad *g;
	trng r = { 12 };
	float x[9 * 7];
	int32_t y[9], *tok = random_ids(&r, rows, 5, 23, -1);
	size_t nd;
	uint32_t vocab, edim, dim;
	const uint32_t *ids;
	float *grows;
	double worst = 0.0, loss;
	unsigned checked = 0;

	cr_assert_eq(pf_workspace_create(m, &ws), 0);
	cr_assert_eq(pf_grad_create(m, 1, &g), 0);
	randomize_params(m, &r);
	fill_uniform(&r, x, rows * 7, -2, 2);
	for (uint32_t i = 0; i < rows; i++)
		y[i] = (int32_t)(tr_next(&r) % cfg.classes);
	pf_model_batch b = { .rows = rows, .x = x, .tokens = tok, .labels = y };
	cr_assert_eq(pf_model_grad(m, ws, &b, g, &loss, NULL), 0);

	float *p = pf_model_dense(m, &nd), *gd = pf_grad_dense(g, &nd);
	for (size_t i = 0; i < nd; i++, checked++) {
		double fd = fd_one(m, ws, &b, p + i);
		double err = fabs(fd - gd[i]) / fmax(1.0, fabs(gd[i]));
		cr_assert(err < FD_TOL, "%s %s: dense parameter %zu: analytic %.7g, "
			  "finite difference %.7g", kernels, pf_model_kind_name(kind),
			  i, (double)gd[i], fd);
		worst = fmax(worst, err);
	}
	float *e = pf_model_embedding(m, &vocab, &edim);
	uint32_t n = pf_grad_rows(g, &ids, &grows, &dim);
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t d = 0; d < dim; d++, checked++) {
			float an = grows[(size_t)i * dim + d];
			double fd = fd_one(m, ws, &b, e + (size_t)ids[i] * edim + d);
			double err = fabs(fd - an) / fmax(1.0, fabs(an));
			cr_assert(err < FD_TOL, "%s embag: table row %u [%u]: analytic "
				  "%.7g, finite difference %.7g", kernels, ids[i], d,
				  (double)an, fd);
			worst = fmax(worst, err);
		}
	if (kind == PF_MODEL_EMBAG) {
		/* A row no token touched has no gradient, and its loss
		 * does not move either. */
		bool used[23] = { false };
		for (uint32_t i = 0; i < n; i++)
			used[ids[i]] = true;
		for (uint32_t v = 0; v < vocab; v++)
			if (!used[v]) {
				cr_assert_eq(fd_one(m, ws, &b, e + (size_t)v * edim), 0.0);
				break;
			}
		cr_assert_gt(n, 0);
	}
	cr_log_info("%s %s: %u parameters, worst finite-difference error %.2g",
		    kernels, pf_model_kind_name(kind), checked, worst);
	free(tok);
	pf_grad_free(g);
	pf_workspace_free(ws);
	pf_model_free(m);
}

Test(host_portable, softmax_finite_differences)
{
	fd_model("portable", PF_MODEL_SOFTMAX);
}

Test(host_avx2, softmax_finite_differences)
{
	need("avx2");
	fd_model("avx2", PF_MODEL_SOFTMAX);
}

Test(host_portable, embag_finite_differences)
{
	fd_model("portable", PF_MODEL_EMBAG);
}

Test(host_avx2, embag_finite_differences)
{
	need("avx2");
	fd_model("avx2", PF_MODEL_EMBAG);
}

/* ------------------------------------------------------------------ */
/* Training on data from a hidden teacher                               */
/* ------------------------------------------------------------------ */
/*
 * The data follow `shardtool synth`: --kind dense is x[256] ~ N(0, 1)
 * labelled by the argmax of a hidden linear teacher over 10 classes;
 * --kind tokens is 128..512 Zipf-distributed ids below 32000 labelled by
 * the argmax over 8 classes of the tokens' summed hidden votes.
 */
#define SYNTH_DENSE_DIM 256u
#define SYNTH_DENSE_CLASSES 10u
#define SYNTH_VOCAB 32000u
#define SYNTH_TOKEN_CLASSES 8u
#define TOKENS_LEN 512u
#define CORES 2u

static void synth_dense(trng *r, const float *teacher, uint32_t rows, float *x,
			int32_t *y)
{
	for (uint32_t i = 0; i < rows; i++, x += SYNTH_DENSE_DIM) {
		double best = -INFINITY;

		for (uint32_t d = 0; d < SYNTH_DENSE_DIM; d++)
			x[d] = (float)tr_gauss(r);
		for (uint32_t c = 0; c < SYNTH_DENSE_CLASSES; c++) {
			double z = 0.0;
			for (uint32_t d = 0; d < SYNTH_DENSE_DIM; d++)
				z += (double)teacher[c * SYNTH_DENSE_DIM + d] * x[d];
			if (z > best) {
				best = z;
				y[i] = (int32_t)c;
			}
		}
	}
}

static double token_vote(uint64_t seed, uint32_t cls, int64_t id)
{
	uint64_t h = mix64(seed ^ mix64((uint64_t)id * SYNTH_TOKEN_CLASSES + cls));

	return (double)(h >> 11) * 0x1.0p-52 - 1.0;
}

static void synth_tokens(trng *r, uint64_t seed, uint32_t rows, int32_t *tok,
			 int32_t *y)
{
	const double logv = log((double)SYNTH_VOCAB + 1.0);

	for (uint32_t i = 0; i < rows; i++, tok += TOKENS_LEN) {
		uint32_t n = 128 + (uint32_t)(tr_next(r) % 385);
		double score[SYNTH_TOKEN_CLASSES] = { 0 };

		for (uint32_t t = 0; t < TOKENS_LEN; t++) {
			if (t >= n) {
				tok[t] = -1;
				continue;
			}
			int64_t id = (int64_t)floor(exp(tr_unit(r) * logv)) - 1;
			if (id >= (int64_t)SYNTH_VOCAB)
				id = SYNTH_VOCAB - 1;
			tok[t] = (int32_t)id;
			for (uint32_t c = 0; c < SYNTH_TOKEN_CLASSES; c++)
				score[c] += token_vote(seed, c, id);
		}
		y[i] = 0;
		for (uint32_t c = 1; c < SYNTH_TOKEN_CLASSES; c++)
			if (score[c] > score[y[i]])
				y[i] = (int32_t)c;
	}
}

/* The held-out loss of the best constant prediction (the label
 * frequencies): a model below it is using its input. */
static double label_entropy(const int32_t *y, uint32_t rows, uint32_t classes)
{
	double h = 0.0;

	for (uint32_t c = 0; c < classes; c++) {
		uint32_t n = 0;
		for (uint32_t i = 0; i < rows; i++)
			n += y[i] == (int32_t)c;
		if (n)
			h -= (double)n / rows * log((double)n / rows);
	}
	return h;
}

typedef struct trainer {
	pf_model *m;
	pf_workspace *ws[CORES];
	pf_grad *g[CORES], *avg;
} trainer;

static void trainer_init(trainer *t, const pf_model_config *cfg)
{
	t->m = make_model(cfg);
	for (uint32_t c = 0; c < CORES; c++) {
		cr_assert_eq(pf_workspace_create(t->m, &t->ws[c]), 0);
		cr_assert_eq(pf_grad_create(t->m, 1, &t->g[c]), 0);
	}
	cr_assert_eq(pf_grad_create(t->m, CORES, &t->avg), 0);
}

static void trainer_free(trainer *t)
{
	for (uint32_t c = 0; c < CORES; c++) {
		pf_workspace_free(t->ws[c]);
		pf_grad_free(t->g[c]);
	}
	pf_grad_free(t->avg);
	pf_model_free(t->m);
}

/* One data-parallel step over CORES per-core batches; with freeze_table
 * the table's gradient is zeroed before the update (the control run).
 * @return the mean loss. */
static double trainer_step(trainer *t, const pf_model_batch *b, float lr,
			   bool freeze_table)
{
	double loss, sum = 0.0;

	for (uint32_t c = 0; c < CORES; c++) {
		cr_assert_eq(pf_model_grad(t->m, t->ws[c], &b[c], t->g[c], &loss, NULL), 0);
		sum += loss;
	}
	cr_assert_eq(pf_grad_average(t->avg, (const pf_grad *const *)t->g, CORES), 0);
	if (freeze_table) {
		const uint32_t *ids;
		float *rows;
		uint32_t dim, n = pf_grad_rows(t->avg, &ids, &rows, &dim);

		memset(rows, 0, (size_t)n * dim * sizeof(float));
	}
	cr_assert_eq(pf_model_apply(t->m, t->avg, lr), 0);
	return sum / CORES;
}

BOTH_PATHS(softmax_loss_falls_on_teacher_data)
{
	const uint32_t rows = 32, held = 512, steps = 300;
	pf_model_config cfg = { .kind = PF_MODEL_SOFTMAX,
				.classes = SYNTH_DENSE_CLASSES,
				.dim = SYNTH_DENSE_DIM, .max_rows = held, .seed = 1,
				.kernels = k->name };
	float *teacher = xmalloc(SYNTH_DENSE_CLASSES * SYNTH_DENSE_DIM * sizeof(float));
	float *x = xmalloc((size_t)held * SYNTH_DENSE_DIM * sizeof(float));
	float *hx = xmalloc((size_t)held * SYNTH_DENSE_DIM * sizeof(float));
	int32_t y[512], hy[512];
	trng tr = { 100 }, data = { 101 };
	trainer t;
	double before, after, first = 0.0, last = 0.0;
	uint32_t right;

	for (uint32_t i = 0; i < SYNTH_DENSE_CLASSES * SYNTH_DENSE_DIM; i++)
		teacher[i] = (float)tr_gauss(&tr);
	trainer_init(&t, &cfg);
	synth_dense(&data, teacher, held, hx, hy);
	pf_model_batch hb = { .rows = held, .x = hx, .labels = hy };
	cr_assert_eq(pf_model_evaluate(t.m, t.ws[0], &hb, &before, &right, NULL), 0);
	for (uint32_t s = 0; s < steps; s++) {
		pf_model_batch b[CORES];
		for (uint32_t c = 0; c < CORES; c++) {
			float *xc = x + (size_t)c * rows * SYNTH_DENSE_DIM;
			synth_dense(&data, teacher, rows, xc, y + c * rows);
			b[c] = (pf_model_batch){ .rows = rows, .x = xc,
						 .labels = y + c * rows };
		}
		double l = trainer_step(&t, b, 0.05f, false);
		if (s == 0)
			first = l;
		if (s >= steps - 20)
			last += l / 20;
	}
	cr_assert_eq(pf_model_evaluate(t.m, t.ws[0], &hb, &after, &right, NULL), 0);
	double base = label_entropy(hy, held, SYNTH_DENSE_CLASSES);
	cr_log_info("softmax (%s): held-out loss %.3f -> %.3f (constant predictor "
		    "%.3f), accuracy %.3f; training loss %.3f -> %.3f",
		    k->name, before, after, base, (double)right / held,
		    first, last);
	cr_assert(after < 0.5 * before, "held-out loss %.3f -> %.3f", before, after);
	cr_assert(after < 0.5 * base, "held-out loss %.3f, constant predictor %.3f",
		  after, base);
	cr_assert(last < 0.6 * first, "training loss %.3f -> %.3f", first, last);
	cr_assert_gt(right, held * 7 / 10, "accuracy %u/%u", right, held);
	free(teacher);
	free(x);
	free(hx);
	trainer_free(&t);
}

/* Train embag on token data; @return the held-out loss, with the
 * loss before, the training losses and the accuracy. */
typedef struct embag_run {
	double before, after, first, last;
	uint32_t right;
} embag_run;

static embag_run train_embag(const char *kernels, const int32_t *htok,
			     const int32_t *hy, uint32_t held, bool freeze_table)
{
	const uint32_t rows = 32, steps = 300;
	pf_model_config cfg = { .kind = PF_MODEL_EMBAG,
				.classes = SYNTH_TOKEN_CLASSES,
				.vocab = SYNTH_VOCAB, .embed_dim = 16,
				.seq_len = TOKENS_LEN, .pad_id = -1,
				.embed_lr_scale = 100.0f,
				.max_rows = held, .seed = 1, .kernels = kernels };
	int32_t *tok = xmalloc((size_t)CORES * rows * TOKENS_LEN * sizeof(int32_t));
	int32_t y[CORES * 32];
	pf_model_batch hb = { .rows = held, .tokens = htok, .labels = hy };
	trng data = { 202 };
	embag_run run = { 0 };
	trainer t;

	trainer_init(&t, &cfg);
	cr_assert_eq(pf_model_evaluate(t.m, t.ws[0], &hb, &run.before, NULL, NULL), 0);
	for (uint32_t s = 0; s < steps; s++) {
		pf_model_batch b[CORES];
		for (uint32_t c = 0; c < CORES; c++) {
			int32_t *tc = tok + (size_t)c * rows * TOKENS_LEN;
			synth_tokens(&data, 1, rows, tc, y + c * rows);
			b[c] = (pf_model_batch){ .rows = rows, .tokens = tc,
						 .labels = y + c * rows };
		}
		/* lr 2 decaying linearly to 0: at a constant step the last
		 * model's held-out loss varied by 0.1 with the data seed. */
		double l = trainer_step(&t, b, 2.0f * (1.0f - (float)s / steps),
					freeze_table);
		if (s == 0)
			run.first = l;
		if (s >= steps - 20)
			run.last += l / 20;
	}
	cr_assert_eq(pf_model_evaluate(t.m, t.ws[0], &hb, &run.after, &run.right,
				       NULL), 0);
	free(tok);
	trainer_free(&t);
	return run;
}

BOTH_PATHS(embag_loss_falls_on_teacher_data)
{
	const uint32_t held = 512;
	int32_t *htok = xmalloc((size_t)held * TOKENS_LEN * sizeof(int32_t));
	int32_t hy[512];
	trng data = { 201 };

	synth_tokens(&data, 1, held, htok, hy);
	embag_run r = train_embag(k->name, htok, hy, held, false);
	embag_run frozen = train_embag(k->name, htok, hy, held, true);
	/* The frequent tokens' votes skew the labels, so the constant
	 * predictor is well below log(8); beating it needs the tokens. */
	double base = label_entropy(hy, held, SYNTH_TOKEN_CLASSES);
	cr_log_info("embag (%s): held-out loss %.3f -> %.3f (constant predictor "
		    "%.3f, table frozen %.3f), accuracy %.3f; training loss %.3f "
		    "-> %.3f", k->name, r.before, r.after, base,
		    frozen.after, (double)r.right / held, r.first, r.last);
	cr_assert(r.after < 0.85 * r.before, "held-out loss %.3f -> %.3f",
		  r.before, r.after);
	cr_assert(r.after < base - 0.1, "held-out loss %.3f, constant predictor %.3f",
		  r.after, base);
	cr_assert(r.last < 0.85 * r.first, "training loss %.3f -> %.3f", r.first,
		  r.last);
	/* The sparse table update is what carries the tokens' votes. */
	cr_assert(r.after < frozen.after - 0.05, "held-out loss %.3f, with the "
		  "table frozen %.3f", r.after, frozen.after);
	free(htok);
}

/* ------------------------------------------------------------------ */
/* Averaging in a fixed order; the MPI layout                           */
/* ------------------------------------------------------------------ */

typedef struct embag_setup {
	pf_model *m;
	pf_workspace *ws;
	pf_grad *g[3];
	int32_t *tok[3];
	int32_t y[3][16];
} embag_setup;

#define AVG_VOCAB 300u
#define AVG_LEN 9u

/* Three per-core batches over overlapping but different rows. */
static void embag_setup_init(embag_setup *e, const char *kernels)
{
	pf_model_config cfg = { .kind = PF_MODEL_EMBAG, .classes = 5,
				.vocab = AVG_VOCAB, .embed_dim = 13,
				.seq_len = AVG_LEN, .pad_id = -1, .max_rows = 16,
				.seed = 4, .kernels = kernels };
	trng r = { 77 };

	e->m = make_model(&cfg);
	randomize_params(e->m, &r);
	cr_assert_eq(pf_workspace_create(e->m, &e->ws), 0);
	for (int c = 0; c < 3; c++) {
		cr_assert_eq(pf_grad_create(e->m, 1, &e->g[c]), 0);
		e->tok[c] = random_ids(&r, 16, AVG_LEN, AVG_VOCAB, -1);
		for (int i = 0; i < 16; i++)
			e->y[c][i] = (int32_t)(tr_next(&r) % 5);
	}
}

static void embag_setup_grads(embag_setup *e, const int order[3])
{
	for (int k = 0; k < 3; k++) {
		int c = order[k];
		pf_model_batch b = { .rows = 16, .tokens = e->tok[c], .labels = e->y[c] };
		cr_assert_eq(pf_model_grad(e->m, e->ws, &b, e->g[c], NULL, NULL), 0);
	}
}

static void embag_setup_free(embag_setup *e)
{
	for (int c = 0; c < 3; c++) {
		pf_grad_free(e->g[c]);
		free(e->tok[c]);
	}
	pf_workspace_free(e->ws);
	pf_model_free(e->m);
}

/* The average's dense and sparse parts, densified into [vocab][dim]. */
static void densify(pf_grad *g, float *dense_out, size_t nd, float *table_out,
		    uint32_t dim)
{
	size_t n;
	const uint32_t *ids;
	float *rows;
	uint32_t d;

	memcpy(dense_out, pf_grad_dense(g, &n), nd * sizeof(float));
	memset(table_out, 0, (size_t)AVG_VOCAB * dim * sizeof(float));
	uint32_t count = pf_grad_rows(g, &ids, &rows, &d);
	for (uint32_t i = 0; i < count; i++)
		memcpy(table_out + (size_t)ids[i] * dim, rows + (size_t)i * dim,
		       dim * sizeof(float));
}

BOTH_PATHS(grad_average_is_fixed_order_and_exact)
{
	embag_setup e;
	pf_grad *avg, *again;
	const pf_grad *in[3];
	size_t nd;
	const uint32_t dim = 13;

	embag_setup_init(&e, k->name);
	cr_assert_eq(pf_grad_create(e.m, 3, &avg), 0);
	cr_assert_eq(pf_grad_create(e.m, 3, &again), 0);
	/* The cores finish in one order... */
	embag_setup_grads(&e, (const int[]){ 0, 1, 2 });
	for (int c = 0; c < 3; c++)
		in[c] = e.g[c];
	cr_assert_eq(pf_grad_average(avg, in, 3), 0);

	pf_grad_dense(avg, &nd);
	float *d1 = xmalloc(nd * sizeof(float)), *d2 = xmalloc(nd * sizeof(float));
	float *t1 = xmalloc((size_t)AVG_VOCAB * dim * sizeof(float));
	float *t2 = xmalloc((size_t)AVG_VOCAB * dim * sizeof(float));
	double *rd = xmalloc(nd * sizeof(double));
	double *rt = xmalloc((size_t)AVG_VOCAB * dim * sizeof(double));
	densify(avg, d1, nd, t1, dim);

	/* ... against a double-precision mean of the three. */
	memset(rd, 0, nd * sizeof(double));
	memset(rt, 0, (size_t)AVG_VOCAB * dim * sizeof(double));
	for (int c = 0; c < 3; c++) {
		densify(e.g[c], d2, nd, t2, dim);
		for (size_t i = 0; i < nd; i++)
			rd[i] += d2[i] / 3.0;
		for (size_t i = 0; i < (size_t)AVG_VOCAB * dim; i++)
			rt[i] += t2[i] / 3.0;
	}
	cr_assert(rel_err(d1, rd, nd) < REL_TOL);
	cr_assert(rel_err(t1, rt, (size_t)AVG_VOCAB * dim) < REL_TOL);
	/* The union of rows, exactly. */
	const uint32_t *ids;
	float *rows;
	uint32_t d, n = pf_grad_rows(avg, &ids, &rows, &d);
	for (uint32_t v = 0, i = 0; v < AVG_VOCAB; v++) {
		bool any = false;
		for (int c = 0; c < 3; c++)
			for (size_t t = 0; t < 16 * AVG_LEN; t++)
				any |= e.tok[c][t] == (int32_t)v;
		if (any) {
			cr_assert_lt(i, n);
			cr_assert_eq(ids[i], v);
			i++;
		}
		if (v == AVG_VOCAB - 1)
			cr_assert_eq(i, n);
	}

	/* The cores finish in another order: the same bits. */
	embag_setup_grads(&e, (const int[]){ 2, 0, 1 });
	cr_assert_eq(pf_grad_average(again, in, 3), 0);
	densify(again, d2, nd, t2, dim);
	cr_assert(!memcmp(d1, d2, nd * sizeof(float)));
	cr_assert(!memcmp(t1, t2, (size_t)AVG_VOCAB * dim * sizeof(float)));
	cr_assert_eq(pf_grad_rows(again, &ids, &rows, &d), n);

	/* Averaging one gradient gives it back. */
	cr_assert_eq(pf_grad_average(again, in, 1), 0);
	densify(again, d2, nd, t2, dim);
	densify(e.g[0], d1, nd, t1, dim);
	cr_assert(!memcmp(d1, d2, nd * sizeof(float)));
	cr_assert(!memcmp(t1, t2, (size_t)AVG_VOCAB * dim * sizeof(float)));

	free(d1);
	free(d2);
	free(t1);
	free(t2);
	free(rd);
	free(rt);
	pf_grad_free(avg);
	pf_grad_free(again);
	embag_setup_free(&e);
}

/*
 * Two "hosts" reduce their gradients the way pf_host.h tells MPI users
 * to: OR the touched-row masks, spread each gradient over the union, sum
 * element-wise (what MPI_Allreduce(MPI_SUM) does), scale by 1/hosts.
 * The result must be pf_grad_average() of the two, bit for bit.
 */
BOTH_PATHS(spread_rows_reduce_like_allreduce)
{
	embag_setup e;
	pf_grad *h[2], *avg;
	const pf_grad *in[2];
	uint64_t *mask;
	size_t words, nd;

	embag_setup_init(&e, k->name);
	embag_setup_grads(&e, (const int[]){ 0, 1, 2 });
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(pf_grad_create(e.m, 3, &h[i]), 0);
		in[0] = e.g[i];
		cr_assert_eq(pf_grad_average(h[i], in, 1), 0);
	}
	in[0] = e.g[0];
	in[1] = e.g[1];
	cr_assert_eq(pf_grad_create(e.m, 2, &avg), 0);
	cr_assert_eq(pf_grad_average(avg, in, 2), 0);

	words = pf_grad_mask_words(h[0]);
	cr_assert_eq(words, (AVG_VOCAB + 63) / 64);
	mask = calloc(words, sizeof(uint64_t));
	pf_grad_mark_rows(h[0], mask);
	pf_grad_mark_rows(h[1], mask);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pf_grad_spread_rows(h[i], mask), 0);

	const uint32_t *ids0, *ids1, *ida;
	float *r0, *r1, *ra;
	uint32_t dim;
	uint32_t n0 = pf_grad_rows(h[0], &ids0, &r0, &dim);
	uint32_t n1 = pf_grad_rows(h[1], &ids1, &r1, &dim);
	uint32_t na = pf_grad_rows(avg, &ida, &ra, &dim);
	cr_assert_eq(n0, n1);
	cr_assert_eq(n0, na);
	cr_assert(!memcmp(ids0, ids1, n0 * sizeof(uint32_t)));
	cr_assert(!memcmp(ids0, ida, n0 * sizeof(uint32_t)));
	float *d0 = pf_grad_dense(h[0], &nd), *d1 = pf_grad_dense(h[1], &nd);
	for (size_t i = 0; i < nd; i++)
		d0[i] += d1[i];
	for (size_t i = 0; i < (size_t)n0 * dim; i++)
		r0[i] += r1[i];
	pf_grad_scale(h[0], 0.5f);
	cr_assert(!memcmp(d0, pf_grad_dense(avg, &nd), nd * sizeof(float)));
	cr_assert(!memcmp(r0, ra, (size_t)n0 * dim * sizeof(float)));

	/* A mask without one of g's rows, or with bits past the table. */
	memset(mask, 0, words * sizeof(uint64_t));
	mask[0] = 1;
	cr_assert_eq(pf_grad_spread_rows(h[1], mask), -EINVAL);
	memset(mask, 0xff, words * sizeof(uint64_t));
	cr_assert_eq(pf_grad_spread_rows(h[1], mask), -EINVAL);
	/* Every row of the table fits in neither a per-core gradient... */
	mask[words - 1] = (1ull << (AVG_VOCAB % 64)) - 1;
	pf_grad *small;
	cr_assert_eq(pf_grad_create(e.m, 1, &small), 0);
	in[0] = e.g[0];
	cr_assert_eq(pf_grad_average(small, in, 1), 0);
	cr_assert_eq(pf_grad_spread_rows(small, mask), -ENOSPC);
	/* ... but does in one made for the union of three: min(300,
	 * 3 * 16 rows * 9 tokens) rows. */
	cr_assert_eq(pf_grad_spread_rows(h[1], mask), 0);
	cr_assert_eq(pf_grad_rows(h[1], &ids1, &r1, &dim), AVG_VOCAB);

	free(mask);
	pf_grad_free(small);
	pf_grad_free(h[0]);
	pf_grad_free(h[1]);
	pf_grad_free(avg);
	embag_setup_free(&e);
}

/* ------------------------------------------------------------------ */
/* Bad input                                                            */
/* ------------------------------------------------------------------ */

Test(host_errors, bad_configurations_fail_before_allocating)
{
	pf_model *m = (pf_model *)1;
	pf_error err;
	pf_model_config ok = { .kind = PF_MODEL_EMBAG, .classes = 4, .vocab = 100,
			       .embed_dim = 8, .seq_len = 4, .pad_id = -1,
			       .max_rows = 8 };
	pf_model_config c;

#define EXPECT(field_change, code, text)                                      \
	do {                                                                  \
		c = ok;                                                       \
		field_change;                                                 \
		pf_error_clear(&err);                                         \
		cr_assert_eq(pf_model_create(&m, &c, &err), code, "%s", err.msg); \
		cr_assert_null(m);                                            \
		cr_assert(strstr(err.msg, text), "message: %s", err.msg);     \
	} while (0)
	EXPECT(c.classes = 1, -EINVAL, "classes 1");
	EXPECT(c.classes = PF_MODEL_MAX_CLASSES + 1, -EINVAL, "classes");
	EXPECT(c.max_rows = 0, -EINVAL, "max_rows 0");
	EXPECT(c.vocab = 0, -EINVAL, "vocab 0");
	EXPECT(c.embed_dim = 0, -EINVAL, "embed_dim 0");
	EXPECT(c.seq_len = PF_MODEL_MAX_SEQ_LEN + 1, -EINVAL, "seq_len");
	EXPECT(c.kind = (pf_model_kind)7, -EINVAL, "unknown kind");
	EXPECT(c.kind = PF_MODEL_SOFTMAX, -EINVAL, "dim 0");
	EXPECT(c.embed_lr_scale = -1.0f, -EINVAL, "embed_lr_scale");
	EXPECT(c.embed_lr_scale = NAN, -EINVAL, "embed_lr_scale");
	/* 2^26 rows of 2^20 floats: refused by the byte limit, not by a
	 * failed (or worse, overcommitted) allocation. */
	EXPECT((c.vocab = PF_MODEL_MAX_VOCAB, c.embed_dim = PF_MODEL_MAX_DIM),
	       -EINVAL, "exceed");
	EXPECT(c.kernels = "avx3", -EINVAL, "avx3");
#undef EXPECT
	pf_model_free(NULL);
	pf_workspace_free(NULL);
	pf_grad_free(NULL);
}

Test(host_errors, bad_batches_name_the_row)
{
	pf_model_config cfg = { .kind = PF_MODEL_EMBAG, .classes = 4, .vocab = 100,
				.embed_dim = 8, .seq_len = 3, .pad_id = -1,
				.max_rows = 4 };
	pf_model_config scfg = { .kind = PF_MODEL_SOFTMAX, .classes = 4, .dim = 3,
				 .max_rows = 4 };
	pf_model *m = make_model(&cfg), *sm = make_model(&scfg);
	pf_workspace *ws, *sws;
	pf_grad *g, *sg;
	int32_t tok[12] = { 1, 2, -1, 3, 4, 5, 6, 7, 8, 9, -1, -1 };
	int32_t y[4] = { 0, 1, 2, 3 };
	float x[12] = { 0 };
	pf_error err;
	double loss;

	cr_assert_eq(pf_workspace_create(m, &ws), 0);
	cr_assert_eq(pf_workspace_create(sm, &sws), 0);
	cr_assert_eq(pf_grad_create(m, 1, &g), 0);
	cr_assert_eq(pf_grad_create(sm, 1, &sg), 0);
	pf_model_batch b = { .rows = 4, .tokens = tok, .labels = y };
	cr_assert_eq(pf_model_grad(m, ws, &b, g, &loss, &err), 0);

	y[2] = 4;
	cr_assert_eq(pf_model_grad(m, ws, &b, g, &loss, &err), -EINVAL);
	cr_assert(strstr(err.msg, "row 2: label 4"), "%s", err.msg);
	y[2] = -1;
	cr_assert_eq(pf_model_evaluate(m, ws, &b, &loss, NULL, &err), -EINVAL);
	y[2] = 2;
	tok[7] = 100;
	cr_assert_eq(pf_model_grad(m, ws, &b, g, &loss, &err), -EINVAL);
	cr_assert(strstr(err.msg, "row 2, token 1: id 100"), "%s", err.msg);
	tok[7] = -2;
	cr_assert_eq(pf_model_evaluate(m, ws, &b, &loss, NULL, &err), -EINVAL);
	tok[7] = 7;
	b.rows = 5;
	cr_assert_eq(pf_model_grad(m, ws, &b, g, &loss, &err), -EINVAL);
	b.rows = 0;
	cr_assert_eq(pf_model_grad(m, ws, &b, g, &loss, &err), -EINVAL);
	b.rows = 4;
	b.tokens = NULL;
	cr_assert_eq(pf_model_grad(m, ws, &b, g, &loss, &err), -EINVAL);
	cr_assert(strstr(err.msg, "tokens"), "%s", err.msg);
	b.tokens = tok;

	/* Another model's workspace or gradient. */
	pf_model_batch sb = { .rows = 4, .x = x, .labels = y };
	cr_assert_eq(pf_model_grad(sm, sws, &sb, sg, &loss, &err), 0);
	cr_assert_eq(pf_model_grad(m, sws, &b, g, &loss, &err), -EINVAL);
	cr_assert_eq(pf_model_grad(m, ws, &b, sg, &loss, &err), -EINVAL);
	cr_assert_eq(pf_model_apply(m, sg, 0.1f), -EINVAL);
	const pf_grad *mixed[2] = { g, sg };
	pf_grad *out;
	cr_assert_eq(pf_grad_create(m, 2, &out), 0);
	cr_assert_eq(pf_grad_average(out, mixed, 2), -EINVAL);
	cr_assert_eq(pf_grad_average(out, mixed, 0), -EINVAL);
	mixed[1] = out;
	cr_assert_eq(pf_grad_average(out, mixed, 2), -EINVAL);
	cr_assert_eq(pf_grad_create(m, 0, &out), -EINVAL);

	/* Same shape, made for smaller batches: too few rows of room. */
	pf_model_config small_cfg = cfg;
	small_cfg.max_rows = 1;
	pf_model *small = make_model(&small_cfg);
	pf_grad *small_g;
	cr_assert_eq(pf_grad_create(small, 1, &small_g), 0);
	cr_assert_eq(pf_model_grad(m, ws, &b, small_g, &loss, &err), -EINVAL);
	cr_assert(strstr(err.msg, "holds 3 table rows"), "%s", err.msg);
	cr_assert_eq(pf_model_apply(m, small_g, 0.1f), 0);
	pf_grad_free(small_g);
	pf_model_free(small);

	pf_grad_free(g);
	pf_grad_free(sg);
	pf_grad_free(out);
	pf_workspace_free(ws);
	pf_workspace_free(sws);
	pf_model_free(m);
	pf_model_free(sm);
}

/* An average needing more rows than the output can hold is refused, and
 * the output is usable afterwards. */
Test(host_errors, average_out_of_room)
{
	pf_model_config cfg = { .kind = PF_MODEL_EMBAG, .classes = 3, .vocab = 100,
				.embed_dim = 4, .seq_len = 2, .pad_id = -1,
				.max_rows = 2 };
	pf_model *m = make_model(&cfg);
	pf_workspace *ws;
	pf_grad *g[2], *out;
	int32_t t0[4] = { 1, 2, 3, 4 }, t1[4] = { 5, 6, 7, 8 }, y[2] = { 0, 1 };

	cr_assert_eq(pf_workspace_create(m, &ws), 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pf_grad_create(m, 1, &g[i]), 0);
	cr_assert_eq(pf_grad_create(m, 1, &out), 0);	/* room for 4 rows */
	pf_model_batch b0 = { .rows = 2, .tokens = t0, .labels = y };
	pf_model_batch b1 = { .rows = 2, .tokens = t1, .labels = y };
	cr_assert_eq(pf_model_grad(m, ws, &b0, g[0], NULL, NULL), 0);
	cr_assert_eq(pf_model_grad(m, ws, &b1, g[1], NULL, NULL), 0);
	cr_assert_eq(pf_grad_average(out, (const pf_grad *const *)g, 2), -ENOSPC);
	cr_assert_eq(pf_grad_average(out, (const pf_grad *const *)&g[1], 1), 0);
	const uint32_t *ids;
	float *rows;
	uint32_t dim;
	cr_assert_eq(pf_grad_rows(out, &ids, &rows, &dim), 4);
	cr_assert_eq(ids[0], 5);
	cr_assert_eq(ids[3], 8);
	pf_grad_free(g[0]);
	pf_grad_free(g[1]);
	pf_grad_free(out);
	pf_workspace_free(ws);
	pf_model_free(m);
}

/* ------------------------------------------------------------------ */
/* Dispatch and initialisation                                          */
/* ------------------------------------------------------------------ */

/* Criterion runs each test in a fresh process, so the environment is read
 * here for the first time. */
Test(host_dispatch, environment_forces_the_portable_path)
{
	setenv("PODFEED_KERNELS", "portable", 1);
	cr_assert_str_eq(pf_kernels_impl(), "portable");
	pf_model_config cfg = { .kind = PF_MODEL_SOFTMAX, .classes = 2, .dim = 3,
				.max_rows = 1 };
	pf_model *m = make_model(&cfg);
	cr_assert_str_eq(pf_model_get_config(m)->kernels, "portable");
	pf_model_free(m);
	/* A model may still name its own. */
	if (pf_kernels_supported("avx2")) {
		cfg.kernels = "avx2";
		m = make_model(&cfg);
		cr_assert_str_eq(pf_model_get_config(m)->kernels, "avx2");
		pf_model_free(m);
	}
}

Test(host_dispatch, unknown_environment_value_keeps_the_best)
{
	setenv("PODFEED_KERNELS", "fastest", 1);
	cr_assert_str_eq(pf_kernels_impl(),
			 pf_kernels_supported("avx2") ? "avx2" : "portable");
	cr_assert_null(pf_kernels_find("fastest"));
	cr_assert(pf_kernels_supported("portable"));
}

Test(host_dispatch, same_seed_same_parameters_on_both_paths)
{
	pf_model_config cfg = { .kind = PF_MODEL_EMBAG, .classes = 3, .vocab = 50,
				.embed_dim = 5, .seq_len = 2, .pad_id = -1,
				.max_rows = 1, .seed = 42, .kernels = "portable" };
	pf_model *a = make_model(&cfg), *b, *c;
	size_t na, nb;
	uint32_t va, vb, da, db;

	if (pf_kernels_supported("avx2"))
		cfg.kernels = "avx2";
	b = make_model(&cfg);
	cfg.seed = 43;
	c = make_model(&cfg);
	float *pa = pf_model_dense(a, &na), *pb = pf_model_dense(b, &nb);
	cr_assert_eq(na, nb);
	cr_assert(!memcmp(pa, pb, na * sizeof(float)));
	float *ea = pf_model_embedding(a, &va, &da), *eb = pf_model_embedding(b, &vb, &db);
	cr_assert(!memcmp(ea, eb, (size_t)va * da * sizeof(float)));
	cr_assert(memcmp(ea, pf_model_embedding(c, &vb, &db), (size_t)va * da * sizeof(float)));
	pf_model_kind kind;
	cr_assert_eq(pf_model_kind_parse("embag", &kind), 0);
	cr_assert_eq(kind, PF_MODEL_EMBAG);
	cr_assert_eq(pf_model_kind_parse("softmax", &kind), 0);
	cr_assert_eq(kind, PF_MODEL_SOFTMAX);
	cr_assert_eq(pf_model_kind_parse("mlp", &kind), -EINVAL);
	cr_assert_str_eq(pf_model_kind_name(PF_MODEL_EMBAG), "embag");
	pf_model_free(a);
	pf_model_free(b);
	pf_model_free(c);
}
