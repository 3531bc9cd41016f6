/* SPDX-License-Identifier: Apache-2.0 */
/* Training kernels, private to host/ (and its tests and kernelbench).
 *
 * Every vectorised kernel sits behind a const ops table, one per
 * implementation; the dense product's blocking and packing are shared and
 * only its register micro-kernel differs.  None of them allocates. */
#ifndef PF_HOST_KERNELS_INTERNAL_H
#define PF_HOST_KERNELS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf_host.h"

/*
 * Blocking of pf_sgemm() (Goto/BLIS order).  The micro-kernel keeps an
 * MR x NR tile of C in registers: 6 x 16 floats are 12 ymm accumulators,
 * plus 2 for a row of B and 1 broadcast of A, within AVX2's 16.  A KC x NR
 * panel of packed B (16 KiB) stays in L1 while the MR-row panels of the
 * MC x KC block of A (120 KiB) stream from L2.  A is packed only when the
 * B block has more than PF_GEMM_PACK_A_PANELS panels to reuse it: for the
 * models' narrow products (n = classes) packing A cost more than the
 * product (measured: 11 GFLOP/s packed, see tools/kernelbench).
 */
#define PF_GEMM_MR 6
#define PF_GEMM_NR 16
#define PF_GEMM_MC 120
#define PF_GEMM_KC 256
#define PF_GEMM_NC 1024
#define PF_GEMM_PACK_A_PANELS 2
/* Floats of scratch pf_sgemm() needs (packed A block + packed B block). */
#define PF_GEMM_SCRATCH_FLOATS \
	((size_t)PF_GEMM_MC * PF_GEMM_KC + (size_t)PF_GEMM_KC * PF_GEMM_NC)

typedef struct pf_kernel_ops {
	const char *name;	/* "avx2", "portable" */

	/* c[MR][NR] (row stride ldc) += alpha * A B over kc steps, where
	 * A's element (r, p) is a[r * rs + p * cs] (packed: rs 1, cs MR;
	 * or read in place from the caller's matrix) and bp is packed as kc
	 * groups of NR. */
	void (*gemm_micro)(size_t kc, const float *a, size_t rs, size_t cs,
			   const float *bp, float *c, size_t ldc, float alpha);
	/* The same for the first NR/2 columns only (a panel of at most 8:
	 * the full tile would spend half its multiply-adds on padding). */
	void (*gemm_micro_half)(size_t kc, const float *a, size_t rs,
				size_t cs, const float *bp, float *c,
				size_t ldc, float alpha);

	/* For each row i of z[rows][classes]: loss_i = logsumexp(z_i) -
	 * z_i[labels[i]], computed with the row maximum subtracted.  With
	 * want_grad, z_i becomes (softmax(z_i) - onehot(labels[i])) *
	 * grad_scale; otherwise z is left clobbered.  With correct, adds the
	 * count of rows whose first largest logit is the label.  Labels must
	 * be in range.  @return the sum of loss_i. */
	double (*softmax_xent)(size_t rows, size_t classes, float *z,
			       const int32_t *labels, float grad_scale,
			       bool want_grad, uint32_t *correct);

	/* h[i][0..dim) = inv_count[i] * sum of table[id] over ids[i][0..len)
	 * that are not pad_id, inv_count[i] = 1 / that count (0, and h_i = 0,
	 * when the row is all padding).  Ids must be pad_id or valid rows. */
	void (*gather_mean)(size_t rows, size_t len, const int32_t *ids,
			    int32_t pad_id, const float *table, size_t dim,
			    float *h, float *inv_count);

	/* The embedding table's gradient: for each s < n, dst[s] = the sum
	 * over j in [start[s], start[s+1]) of inv_count[row[j]] * dh[row[j]]
	 * (rows of dim floats), added in j order to 0; an empty segment
	 * gives 0.  Each dst row is written once, from registers. */
	void (*segment_sum)(size_t n, const uint32_t *start,
			    const uint32_t *row, const float *dh,
			    const float *inv_count, size_t dim, float *dst);

	/* y += a * x */
	void (*axpy)(size_t n, float a, const float *x, float *y);
	/* x *= a */
	void (*scale)(size_t n, float a, float *x);
} pf_kernel_ops;

extern const pf_kernel_ops pf_kernels_portable;
#if defined(__x86_64__)
extern const pf_kernel_ops pf_kernels_avx2;
#endif

/*! The implementation named (NULL: $PODFEED_KERNELS, else the best one
 *  this CPU runs).  @return NULL for an unknown name or one the CPU
 *  cannot run. */
const pf_kernel_ops *pf_kernels_find(const char *name);
/*! Whether the CPU runs the named implementation. */
bool pf_kernels_supported(const char *name);

/*! C[m][n] = alpha * op(A) op(B) + beta * C, row-major like
 *  cblas_sgemm(CblasRowMajor, ...): op(A) is A[m][k] (lda >= k), or with
 *  trans_a A is stored [k][m] (lda >= m); likewise B [k][n] or [n][k].
 *  beta == 0 overwrites C without reading it.  scratch holds
 *  PF_GEMM_SCRATCH_FLOATS floats (any alignment; 64 bytes is best). */
void pf_sgemm(const pf_kernel_ops *k, bool trans_a, bool trans_b, size_t m,
	      size_t n, size_t kk, float alpha, const float *a, size_t lda,
	      const float *b, size_t ldb, float beta, float *c, size_t ldc,
	      float *scratch);

/*! out[j] = sum over i of x[i][j] (rows of stride ldx), in row order. */
void pf_col_sum(const pf_kernel_ops *k, size_t rows, size_t cols,
		const float *x, size_t ldx, float *out);

#endif
