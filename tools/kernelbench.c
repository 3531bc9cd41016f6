/* SPDX-License-Identifier: Apache-2.0 */
/* kernelbench: GFLOP/s of the compute stage's dense product (AVX2 and
 * portable) against a BLAS's cblas_sgemm on the same shapes in the same run,
 * against the FMA peak of this core measured by an FMA-throughput loop, and
 * of one model step.  Single-threaded throughout: the compute stage runs one
 * such thread per core. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "common_internal.h"
#include "kernels_internal.h"
#include "pf_host.h"

#ifdef PF_HAVE_CBLAS
#include <cblas.h>
#endif

static double now_s(void)
{
	return (double)pf_now_ns() * 1e-9;
}

static void *xalloc(size_t bytes)
{
	void *p = NULL;

	if (posix_memalign(&p, 64, bytes ? bytes : 64)) {
		fprintf(stderr, "kernelbench: out of memory (%zu bytes)\n", bytes);
		exit(1);
	}
	return p;
}

/* ------------------------------------------------------------------ */
/* FMA peak                                                             */
/* ------------------------------------------------------------------ */
/*
 * Twelve independent accumulator chains: with two FMA pipes of 4-cycle
 * latency eight would do, twelve leave margin for a wider core.  The
 * results go to a volatile sink so the loop cannot be dropped; without
 * -ffast-math the compiler may not merge the chains.
 */
static volatile float fma_sink;

#define FMA_CHAINS 12

#if defined(__x86_64__)
#include <immintrin.h>

/* Named variables, not an array: an array kept in memory turns each
 * chain into a store-load round trip and measures that instead. */
#define FMA_STEP(op, v) \
	v##0 = op(v##0, b, c); v##1 = op(v##1, b, c); v##2 = op(v##2, b, c); \
	v##3 = op(v##3, b, c); v##4 = op(v##4, b, c); v##5 = op(v##5, b, c); \
	v##6 = op(v##6, b, c); v##7 = op(v##7, b, c); v##8 = op(v##8, b, c); \
	v##9 = op(v##9, b, c); v##a = op(v##a, b, c); v##b = op(v##b, b, c)
#define FMA_SUM(add, v) \
	add(add(add(add(v##0, v##1), add(v##2, v##3)), add(add(v##4, v##5), \
	add(v##6, v##7))), add(add(v##8, v##9), add(v##a, v##b)))

__attribute__((target("avx2,fma")))
static double fma_ymm(uint64_t iters)
{
	const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
	__m256 y0 = _mm256_set1_ps(0.0f), y1 = _mm256_set1_ps(1.0f);
	__m256 y2 = _mm256_set1_ps(2.0f), y3 = _mm256_set1_ps(3.0f);
	__m256 y4 = _mm256_set1_ps(4.0f), y5 = _mm256_set1_ps(5.0f);
	__m256 y6 = _mm256_set1_ps(6.0f), y7 = _mm256_set1_ps(7.0f);
	__m256 y8 = _mm256_set1_ps(8.0f), y9 = _mm256_set1_ps(9.0f);
	__m256 ya = _mm256_set1_ps(10.0f), yb = _mm256_set1_ps(11.0f);

	for (uint64_t it = 0; it < iters; it++) {
		FMA_STEP(_mm256_fmadd_ps, y);
	}
	fma_sink = _mm256_cvtss_f32(FMA_SUM(_mm256_add_ps, y));
	return (double)iters * FMA_CHAINS * 8 * 2;
}

__attribute__((target("avx512f")))
static double fma_zmm(uint64_t iters)
{
	const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
	__m512 z0 = _mm512_set1_ps(0.0f), z1 = _mm512_set1_ps(1.0f);
	__m512 z2 = _mm512_set1_ps(2.0f), z3 = _mm512_set1_ps(3.0f);
	__m512 z4 = _mm512_set1_ps(4.0f), z5 = _mm512_set1_ps(5.0f);
	__m512 z6 = _mm512_set1_ps(6.0f), z7 = _mm512_set1_ps(7.0f);
	__m512 z8 = _mm512_set1_ps(8.0f), z9 = _mm512_set1_ps(9.0f);
	__m512 za = _mm512_set1_ps(10.0f), zb = _mm512_set1_ps(11.0f);

	for (uint64_t it = 0; it < iters; it++) {
		FMA_STEP(_mm512_fmadd_ps, z);
	}
	fma_sink = _mm512_reduce_add_ps(FMA_SUM(_mm512_add_ps, z));
	return (double)iters * FMA_CHAINS * 16 * 2;
}
#endif

typedef struct bench_opts {
	int runs;
	double min_s;
	bool quick, json;
	uint64_t runs_flag;		/* the flags, before they are applied */
	double min_ms;
	double (*peak_fn)(uint64_t);	/* the AVX2 FMA loop, or NULL */
	uint64_t peak_iters;		/* lasting about min_s */
} bench_opts;

static uint64_t peak_calibrate(double (*fn)(uint64_t), double min_s)
{
	uint64_t iters = 1 << 16;

	for (;;) {
		double t = now_s();
		fn(iters);
		if (now_s() - t >= min_s)
			return iters;
		iters *= 2;
	}
}

static double peak_once(double (*fn)(uint64_t), uint64_t iters)
{
	double t = now_s(), flops = fn(iters);

	return flops / (now_s() - t) * 1e-9;
}

/* GFLOP/s of fn, median of runs. */
static double peak_gflops(double (*fn)(uint64_t), const bench_opts *o)
{
	double v[64];
	uint64_t iters = peak_calibrate(fn, o->min_s);

	for (int r = 0; r < o->runs; r++)
		v[r] = peak_once(fn, iters);
	return cli_median(v, o->runs);
}

/* ------------------------------------------------------------------ */
/* Dense products                                                       */
/* ------------------------------------------------------------------ */

typedef struct shape {
	const char *name;
	bool ta, tb;
	size_t m, n, k;
} shape;

enum { C_AVX2, C_PORTABLE, C_BLAS, NCAND };

typedef struct gemm_case {
	const shape *s;
	float *a, *b, *c, *scratch;
	size_t lda, ldb;
} gemm_case;

static void run_gemm(const gemm_case *g, int cand)
{
	const shape *s = g->s;

	switch (cand) {
	case C_AVX2:
	case C_PORTABLE:
		pf_sgemm(pf_kernels_find(cand == C_AVX2 ? "avx2" : "portable"),
			 s->ta, s->tb, s->m, s->n, s->k, 1.0f, g->a, g->lda, g->b,
			 g->ldb, 0.0f, g->c, s->n, g->scratch);
		break;
#ifdef PF_HAVE_CBLAS
	case C_BLAS:
		cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
			    s->tb ? CblasTrans : CblasNoTrans, (int)s->m, (int)s->n,
			    (int)s->k, 1.0f, g->a, (int)g->lda, g->b, (int)g->ldb,
			    0.0f, g->c, (int)s->n);
		break;
#endif
	}
}

static bool cand_available(int cand)
{
	if (cand == C_AVX2)
		return pf_kernels_supported("avx2");
#ifndef PF_HAVE_CBLAS
	if (cand == C_BLAS)
		return false;
#endif
	return true;
}

/* Calls per timed batch so that one batch lasts about min_s. */
static long calibrate(const gemm_case *g, int cand, double min_s)
{
	long reps = 1;

	for (;;) {
		double t = now_s();
		for (long i = 0; i < reps; i++)
			run_gemm(g, cand);
		double dt = now_s() - t;
		if (dt >= min_s || reps > (1L << 30))
			return reps;
		reps = dt > 0 ? (long)(reps * 1.2 * min_s / dt) + 1 : reps * 16;
	}
}

/* max |x - ref| / max |ref| */
static double rel_diff(const float *x, const float *ref, size_t n)
{
	double num = 0.0, den = 0.0;

	for (size_t i = 0; i < n; i++) {
		num = fmax(num, fabs((double)x[i] - ref[i]));
		den = fmax(den, fabs((double)ref[i]));
	}
	return den > 0 ? num / den : num;
}

typedef struct gemm_result {
	double gflops[NCAND];
	double diff[NCAND];	/* against the portable result */
	/* Medians of per-round ratios: each round times the FMA loop and
	 * every candidate back to back, so a ratio compares figures taken
	 * under the same load and clock. */
	double peak;		/* the FMA loop's GFLOP/s in these rounds */
	double avx2_per_peak, avx2_per_blas;
} gemm_result;

static gemm_result bench_gemm(const shape *s, const bench_opts *o)
{
	gemm_case g = { .s = s };
	gemm_result res;
	double v[NCAND][64];
	long reps[NCAND];
	size_t arows = s->ta ? s->k : s->m, brows = s->tb ? s->n : s->k;
	float *ref;
	unsigned seed = 1;

	g.lda = s->ta ? s->m : s->k;
	g.ldb = s->tb ? s->k : s->n;
	g.a = xalloc(arows * g.lda * sizeof(float));
	g.b = xalloc(brows * g.ldb * sizeof(float));
	g.c = xalloc(s->m * s->n * sizeof(float));
	ref = xalloc(s->m * s->n * sizeof(float));
	g.scratch = xalloc(PF_GEMM_SCRATCH_FLOATS * sizeof(float));
	for (size_t i = 0; i < arows * g.lda; i++)
		g.a[i] = (float)rand_r(&seed) / (float)RAND_MAX - 0.5f;
	for (size_t i = 0; i < brows * g.ldb; i++)
		g.b[i] = (float)rand_r(&seed) / (float)RAND_MAX - 0.5f;

	run_gemm(&g, C_PORTABLE);
	memcpy(ref, g.c, s->m * s->n * sizeof(float));
	for (int c = 0; c < NCAND; c++) {
		res.gflops[c] = res.diff[c] = NAN;
		if (!cand_available(c))
			continue;
		run_gemm(&g, c);
		res.diff[c] = rel_diff(g.c, ref, s->m * s->n);
		reps[c] = calibrate(&g, c, o->min_s);
	}
	double vp[64], rp[64], rb[64];
	for (int r = 0; r < o->runs; r++) {
		vp[r] = o->peak_fn ? peak_once(o->peak_fn, o->peak_iters) : NAN;
		for (int c = 0; c < NCAND; c++) {
			if (!cand_available(c))
				continue;
			double t = now_s();
			for (long i = 0; i < reps[c]; i++)
				run_gemm(&g, c);
			double dt = now_s() - t;
			v[c][r] = 2.0 * s->m * s->n * s->k * reps[c] / dt * 1e-9;
		}
		rp[r] = v[C_AVX2][r] / vp[r];
		rb[r] = cand_available(C_BLAS) ? v[C_AVX2][r] / v[C_BLAS][r] : NAN;
	}
	for (int c = 0; c < NCAND; c++)
		if (cand_available(c))
			res.gflops[c] = cli_median(v[c], o->runs);
	res.peak = res.avx2_per_peak = res.avx2_per_blas = NAN;
	if (cand_available(C_AVX2) && o->peak_fn) {
		res.peak = cli_median(vp, o->runs);
		res.avx2_per_peak = cli_median(rp, o->runs);
	}
	if (cand_available(C_AVX2) && cand_available(C_BLAS))
		res.avx2_per_blas = cli_median(rb, o->runs);
	free(g.a);
	free(g.b);
	free(g.c);
	free(ref);
	free(g.scratch);
	return res;
}

/* ------------------------------------------------------------------ */
/* Model steps                                                          */
/* ------------------------------------------------------------------ */

typedef struct step_result {
	double gflops, ms;
} step_result;

static step_result bench_model(pf_model_kind kind, const char *kernels,
			       const bench_opts *o)
{
	const uint32_t rows = 256, seq = 256;
	pf_model_config cfg = { .kind = kind, .classes = kind == PF_MODEL_EMBAG ? 8 : 10,
				.dim = 256, .vocab = 32000, .embed_dim = 64,
				.seq_len = seq, .pad_id = -1, .max_rows = rows,
				.seed = 1, .kernels = kernels };
	step_result res = { NAN, NAN };
	pf_model *m;
	pf_workspace *ws;
	pf_grad *g;
	pf_error err;
	double v[64];
	unsigned seed = 2;
	float *x = xalloc((size_t)rows * cfg.dim * sizeof(float));
	int32_t *tok = xalloc((size_t)rows * seq * sizeof(int32_t));
	int32_t *y = xalloc(rows * sizeof(int32_t));

	if (pf_model_create(&m, &cfg, &err) < 0) {
		fprintf(stderr, "kernelbench: %s\n", err.msg);
		exit(1);
	}
	if (pf_workspace_create(m, &ws) < 0 || pf_grad_create(m, 1, &g) < 0) {
		fprintf(stderr, "kernelbench: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < (size_t)rows * cfg.dim; i++)
		x[i] = (float)rand_r(&seed) / (float)RAND_MAX - 0.5f;
	/* Zipf-like ids (rank ~ exp(uniform * log vocab)), the records'
	 * lengths 128..256 and the rest padding, like shardtool synth. */
	for (uint32_t i = 0; i < rows; i++) {
		uint32_t n = 128 + (uint32_t)rand_r(&seed) % 129;
		for (uint32_t t = 0; t < seq; t++) {
			double u = (double)rand_r(&seed) / ((double)RAND_MAX + 1);
			tok[i * seq + t] = t < n ? (int32_t)(exp(u * log(32001.0)) - 1) : -1;
		}
		y[i] = (int32_t)((uint32_t)rand_r(&seed) % cfg.classes);
	}
	pf_model_batch b = { .rows = rows, .x = x, .tokens = tok, .labels = y };
	long reps = 1;
	for (;;) {
		double t = now_s();
		for (long i = 0; i < reps; i++)
			pf_model_grad(m, ws, &b, g, NULL, NULL);
		double dt = now_s() - t;
		if (dt >= o->min_s)
			break;
		reps *= 2;
	}
	for (int r = 0; r < o->runs; r++) {
		double t = now_s();
		for (long i = 0; i < reps; i++)
			pf_model_grad(m, ws, &b, g, NULL, NULL);
		v[r] = (now_s() - t) / reps;
	}
	res.ms = cli_median(v, o->runs) * 1e3;
	res.gflops = pf_model_step_flops(m, rows) / (res.ms * 1e-3) * 1e-9;
	pf_grad_free(g);
	pf_workspace_free(ws);
	pf_model_free(m);
	free(x);
	free(tok);
	free(y);
	return res;
}

/* ------------------------------------------------------------------ */

static const char *blas_name(void)
{
#if defined(PF_HAVE_OPENBLAS)
	static char name[160];
	snprintf(name, sizeof(name), "%s (core %s, 1 thread)",
		 openblas_get_config(), openblas_get_corename());
	return name;
#elif defined(PF_HAVE_CBLAS)
	return "cblas_sgemm (reference BLAS)";
#else
	return NULL;
#endif
}

/* A figure to 4 significant digits, as the table gives them; NaN (not
 * measured here) is null. */
static json_t *sig4(double v)
{
	char buf[32];

	if (isnan(v))
		return json_null();
	snprintf(buf, sizeof(buf), "%.4g", v);
	return pf_json_num(strtod(buf, NULL));
}

static const cli_opt options_cli[] = {
	{ CLI_U64, "runs", .arg = "N", .off = offsetof(bench_opts, runs_flag), .min = 1,
	  .max = 64, .help = "runs; the medians are printed (default 5)" },
	{ CLI_DOUBLE, "min-ms", .arg = "MS", .off = offsetof(bench_opts, min_ms), .lo = 0,
	  .hi = 10000, .above = true,
	  .help = "each run repeats a call for at least MS milliseconds (default 40)" },
	{ CLI_FLAG, "quick", .off = offsetof(bench_opts, quick),
	  .help = "fewer, smaller shapes" },
	{ CLI_FLAG, "json", .off = offsetof(bench_opts, json),
	  .help = "one JSON object instead of the table" },
	{ CLI_END },
};

static const cli_command kernelbench_command = {
	.name = "kernelbench",
	.usage = "usage: kernelbench [--runs N] [--min-ms MS] [--quick] [--json]\n",
	.about = "Prints GFLOP/s of: the FMA peak of one core (independent FMA chains;\n"
		 "AVX2 and, where the CPU has it, AVX-512); pf_sgemm with the avx2 and\n"
		 "portable kernels and the BLAS's cblas_sgemm (one thread) on the models'\n"
		 "shapes and squares, each round also timing the AVX2 FMA loop (column\n"
		 "peak): the ratios are medians of per-round ratios; one pf_model_grad()\n"
		 "step of each model on each path.  Runs of the candidates are\n"
		 "interleaved so that load from other processes falls on all of them\n"
		 "alike.\n",
	.opts = options_cli,
};

int main(int argc, char **argv)
{
	/* The models' shapes at a per-core batch of 256 (softmax: 256
	 * features, 10 classes; embag: 64-wide embeddings, 8 classes), then
	 * squares where a BLAS is at its best. */
	static const shape shapes[] = {
		{ "softmax fwd  x W", false, false, 256, 10, 256 },
		{ "softmax dW   x^T dz", true, false, 256, 10, 256 },
		{ "embag fwd    h W", false, false, 256, 8, 64 },
		{ "embag dh     dz W^T", false, true, 256, 64, 8 },
		{ "square", false, false, 128, 128, 128 },
		{ "square", false, false, 512, 512, 512 },
		{ "square", false, false, 1024, 1024, 1024 },
		{ "square A^T B^T", true, true, 512, 512, 512 },
	};
	bench_opts o = { .runs = 5, .min_s = 0.04 };
	size_t nshapes = sizeof(shapes) / sizeof(shapes[0]);
	double peak_ymm = NAN, peak_zmm = NAN;
	int ret, first;
	json_t *jo = NULL, *jarr = NULL;
	bool bad = false;

	o.runs_flag = (uint64_t)o.runs;
	o.min_ms = o.min_s * 1e3;
	ret = cli_parse(&kernelbench_command, argc, argv, &o, &first);
	if (ret >= 0)
		return ret;
	if (first < argc)
		return cli_usage("unexpected argument '%s'", argv[first]);
	o.runs = (int)o.runs_flag;
	o.min_s = o.min_ms * 1e-3;
	if (o.quick)
		nshapes = 5;
#ifdef PF_HAVE_OPENBLAS
	/* The compute stage runs one thread per core; so does the BLAS. */
	openblas_set_num_threads(1);
#endif

#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		peak_ymm = peak_gflops(fma_ymm, &o);
		o.peak_fn = fma_ymm;
		o.peak_iters = peak_calibrate(fma_ymm, o.min_s);
	}
	if (__builtin_cpu_supports("avx512f"))
		peak_zmm = peak_gflops(fma_zmm, &o);
#endif

	if (o.json) {
		jo = json_object();
		jarr = json_array();
		pf_json_put(jo, "kernels", pf_json_str(pf_kernels_impl()), &bad);
		pf_json_put(jo, "blas", pf_json_str(blas_name()), &bad);
		pf_json_put(jo, "runs", pf_json_u64((uint64_t)o.runs), &bad);
		pf_json_put(jo, "fma_peak_avx2_gflops", sig4(peak_ymm), &bad);
		pf_json_put(jo, "fma_peak_avx512_gflops", sig4(peak_zmm), &bad);
	} else {
		printf("kernelbench: one thread; median of %d runs; GFLOP/s\n", o.runs);
		printf("BLAS: %s\n", blas_name() ? blas_name() : "none found at build time");
		printf("FMA peak, AVX2 (8-wide, %d chains):      %7.1f\n", FMA_CHAINS, peak_ymm);
		if (!isnan(peak_zmm))
			printf("FMA peak, AVX-512 (16-wide, %d chains):  %7.1f  (the kernels use AVX2)\n",
			       FMA_CHAINS, peak_zmm);
		printf("\n%-22s %5s %5s %5s %8s %8s %8s %7s %9s %9s %9s\n", "sgemm shape", "m", "n",
		       "k", "avx2", "portable", "blas", "peak", "avx2/blas", "avx2/peak",
		       "diff");
	}
	for (size_t i = 0; i < nshapes; i++) {
		const shape *s = &shapes[i];
		gemm_result r = bench_gemm(s, &o);
		double worst = fmax(r.diff[C_AVX2], r.diff[C_BLAS]);

		if (o.json) {
			json_t *e = json_object();

			pf_json_put(e, "shape", pf_json_str(s->name), &bad);
			pf_json_put(e, "ta", json_integer(s->ta), &bad);
			pf_json_put(e, "tb", json_integer(s->tb), &bad);
			pf_json_put(e, "m", pf_json_u64(s->m), &bad);
			pf_json_put(e, "n", pf_json_u64(s->n), &bad);
			pf_json_put(e, "k", pf_json_u64(s->k), &bad);
			pf_json_put(e, "avx2", sig4(r.gflops[C_AVX2]), &bad);
			pf_json_put(e, "portable", sig4(r.gflops[C_PORTABLE]), &bad);
			pf_json_put(e, "blas", sig4(r.gflops[C_BLAS]), &bad);
			pf_json_put(e, "fma_peak", sig4(r.peak), &bad);
			pf_json_put(e, "avx2_per_blas", sig4(r.avx2_per_blas), &bad);
			pf_json_put(e, "avx2_per_peak", sig4(r.avx2_per_peak), &bad);
			pf_json_put(e, "max_rel_diff", sig4(worst), &bad);
			if (json_array_append_new(jarr, e))
				bad = true;
		} else {
			printf("%-22s %5zu %5zu %5zu %8.1f %8.1f %8.1f %7.1f %9.2f %8.0f%% %9.1e\n",
			       s->name, s->m, s->n, s->k, r.gflops[C_AVX2],
			       r.gflops[C_PORTABLE], r.gflops[C_BLAS], r.peak,
			       r.avx2_per_blas, 100.0 * r.avx2_per_peak, worst);
		}
	}
	if (o.json) {
		pf_json_put(jo, "gemm", jarr, &bad);
		jarr = json_array();
	} else
		printf("\n%-40s %8s %8s\n", "pf_model_grad, 256 rows (embag: 256 ids)",
		       "ms", "GFLOP/s");
	for (int kind = 0; kind < 2; kind++)
		for (int c = 0; c < 2; c++) {
			const char *kn = c == 0 ? "avx2" : "portable";
			if (!pf_kernels_supported(kn))
				continue;
			step_result r = bench_model((pf_model_kind)kind, kn, &o);
			if (o.json) {
				json_t *e = json_object();

				pf_json_put(e, "model",
					    pf_json_str(pf_model_kind_name((pf_model_kind)kind)), &bad);
				pf_json_put(e, "kernels", pf_json_str(kn), &bad);
				pf_json_put(e, "ms", sig4(r.ms), &bad);
				pf_json_put(e, "gflops", sig4(r.gflops), &bad);
				if (json_array_append_new(jarr, e))
					bad = true;
			} else {
				printf("%-40s %8.3f %8.1f\n", kind == PF_MODEL_EMBAG ?
				       (c == 0 ? "embag (dim 64, 8 classes), avx2" :
						 "embag (dim 64, 8 classes), portable") :
				       (c == 0 ? "softmax (256 x 10), avx2" :
						 "softmax (256 x 10), portable"),
				       r.ms, r.gflops);
			}
		}
	if (o.json) {
		pf_json_put(jo, "model_step", jarr, &bad);
		return cli_json_print(jo, bad);
	}
	return 0;
}
