/* SPDX-License-Identifier: Apache-2.0 */
/* The compute stage's models (softmax regression, bag of embeddings): their
 * parameters, one core's forward and backward, gradient averaging in a
 * fixed order, and the SGD update. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common_internal.h"
#include "kernels_internal.h"

struct pf_model {
	pf_model_config cfg;
	const pf_kernel_ops *ops;
	uint32_t in;		/* input width of the linear layer */
	size_t ndense;		/* in * classes + classes */
	float *dense;		/* W [in][classes], then b [classes] */
	float *embed;		/* embag: [vocab][embed_dim] */
	uint32_t core_rows;	/* table rows one per-core batch can touch */
};

struct pf_workspace {
	const pf_model *model;
	float *logits;		/* [max_rows][classes]; then dlogits */
	float *hidden;		/* embag: [max_rows][embed_dim] */
	float *dhidden;		/* embag: [max_rows][embed_dim] */
	float *inv_count;	/* embag: [max_rows] */
	int32_t *slot;		/* embag: [vocab]; valid for touched rows only */
	uint32_t *occ_start;	/* embag: [core_rows + 1], see group_tokens() */
	uint32_t *occ_row;	/* embag: [max_rows * seq_len] */
	uint64_t *touched;	/* embag: one bit per row; all 0 between calls */
	float *gemm;		/* PF_GEMM_SCRATCH_FLOATS */
};

struct pf_grad {
	/* The shape, so gradients of different models never mix. */
	pf_model_kind kind;
	uint32_t in, classes, vocab, dim;
	const pf_kernel_ops *ops;
	size_t ndense;
	float *dense;
	uint32_t nrows, cap;	/* sparse rows held, and room */
	uint32_t *ids;		/* [cap], ascending */
	float *rows;		/* [cap][dim] */
	size_t words;		/* of mask */
	uint64_t *mask;		/* scratch of pf_grad_average(); all 0 */
};

/* ------------------------------------------------------------------ */

/* Cache-line aligned, so vector loads never split a line at a row start
 * that is a multiple of 16 floats.  @return NULL on failure (n may be 0). */
static void *alloc_aligned(size_t bytes)
{
	return pf_malloc_aligned(bytes, 64);
}

/* splitmix64 stream with Box-Muller normals: the same seed gives the same
 * parameters on every host, with no library RNG whose sequence might
 * differ between C libraries. */
typedef struct init_rng {
	uint64_t state;
} init_rng;

static double rng_unit(init_rng *r)
{
	return pf_unit_double(pf_splitmix64_next(&r->state));
}

static float rng_normal(init_rng *r)
{
	double u = rng_unit(r), v = rng_unit(r);

	return (float)(sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v));
}

static void fill_normal(init_rng *r, float *p, size_t n, float stddev)
{
	for (size_t i = 0; i < n; i++)
		p[i] = stddev * rng_normal(r);
}

int pf_model_kind_parse(const char *name, pf_model_kind *kind)
{
	if (!strcmp(name, "softmax"))
		*kind = PF_MODEL_SOFTMAX;
	else if (!strcmp(name, "embag"))
		*kind = PF_MODEL_EMBAG;
	else
		return -EINVAL;
	return 0;
}

const char *pf_model_kind_name(pf_model_kind kind)
{
	return kind == PF_MODEL_EMBAG ? "embag" : "softmax";
}

/* Floats of one workspace for this configuration. */
static uint64_t workspace_floats(const pf_model_config *c)
{
	uint64_t n = (uint64_t)c->max_rows * c->classes + PF_GEMM_SCRATCH_FLOATS;

	if (c->kind == PF_MODEL_EMBAG)
		n += 2ull * c->max_rows * c->embed_dim + c->max_rows +
		     c->vocab + (c->vocab + 63) / 64 * 2 + c->vocab + 1 +
		     (uint64_t)c->max_rows * c->seq_len;
	return n;
}

static int check_config(const pf_model_config *c, pf_error *err)
{
	uint64_t params;

	if (c->kind != PF_MODEL_SOFTMAX && c->kind != PF_MODEL_EMBAG)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "model: unknown kind %d", (int)c->kind);
	if (c->classes < 2 || c->classes > PF_MODEL_MAX_CLASSES)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "model: classes %u is not in [2, %u]",
				    c->classes, PF_MODEL_MAX_CLASSES);
	if (!(c->embed_lr_scale >= 0.0f && c->embed_lr_scale < INFINITY))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "model: embed_lr_scale %g is not a finite "
				    "number >= 0", (double)c->embed_lr_scale);
	if (c->max_rows < 1 || c->max_rows > PF_MODEL_MAX_ROWS)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "model: max_rows %u is not in [1, %u]",
				    c->max_rows, PF_MODEL_MAX_ROWS);
	if (c->kind == PF_MODEL_SOFTMAX) {
		if (c->dim < 1 || c->dim > PF_MODEL_MAX_DIM)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "softmax: dim %u is not in [1, %u]",
					    c->dim, PF_MODEL_MAX_DIM);
		params = ((uint64_t)c->dim + 1) * c->classes;
	} else {
		if (c->vocab < 1 || c->vocab > PF_MODEL_MAX_VOCAB)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "embag: vocab %u is not in [1, %u]",
					    c->vocab, PF_MODEL_MAX_VOCAB);
		if (c->embed_dim < 1 || c->embed_dim > PF_MODEL_MAX_DIM)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "embag: embed_dim %u is not in [1, %u]",
					    c->embed_dim, PF_MODEL_MAX_DIM);
		if (c->seq_len < 1 || c->seq_len > PF_MODEL_MAX_SEQ_LEN)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "embag: seq_len %u is not in [1, %u]",
					    c->seq_len, PF_MODEL_MAX_SEQ_LEN);
		params = ((uint64_t)c->embed_dim + 1) * c->classes +
			 (uint64_t)c->vocab * c->embed_dim;
	}
	/* Every factor is bounded above, so these products fit in 64 bits. */
	if ((params + workspace_floats(c)) * sizeof(float) > PF_MODEL_MAX_BYTES)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "model: %llu bytes of parameters and workspace "
				    "exceed the %llu-byte limit",
				    (unsigned long long)((params + workspace_floats(c)) *
							 sizeof(float)),
				    (unsigned long long)PF_MODEL_MAX_BYTES);
	return 0;
}

int pf_model_create(pf_model **out, const pf_model_config *cfg, pf_error *err)
{
	pf_model *m;
	const pf_kernel_ops *ops;
	init_rng r;
	int ret;

	pf_error_clear(err);
	*out = NULL;
	if ((ret = check_config(cfg, err)) < 0)
		return ret;
	ops = pf_kernels_find(cfg->kernels);
	if (!ops) {
		bool known = !strcmp(cfg->kernels, "avx2") ||
			     !strcmp(cfg->kernels, "portable");
		return pf_error_set(err, known ? -ENOTSUP : -EINVAL,
				    PF_OFFSET_NONE, 0,
				    known ? "kernels '%s': not supported by this CPU"
					  : "kernels '%s': not avx2 or portable",
				    cfg->kernels);
	}

	m = pf_calloc(1, sizeof(*m));
	if (!m)
		goto nomem;
	m->cfg = *cfg;
	m->cfg.kernels = ops->name;
	m->ops = ops;
	m->in = cfg->kind == PF_MODEL_EMBAG ? cfg->embed_dim : cfg->dim;
	m->ndense = ((size_t)m->in + 1) * cfg->classes;
	m->dense = alloc_aligned(m->ndense * sizeof(float));
	if (!m->dense)
		goto nomem;
	if (cfg->kind == PF_MODEL_EMBAG) {
		uint64_t touch = (uint64_t)cfg->max_rows * cfg->seq_len;

		m->core_rows = touch < cfg->vocab ? (uint32_t)touch : cfg->vocab;
		m->embed = alloc_aligned((size_t)cfg->vocab * cfg->embed_dim *
					 sizeof(float));
		if (!m->embed)
			goto nomem;
	}

	/*
	 * Softmax regression starts near zero (a convex problem; small noise
	 * only breaks ties).  The bag of embeddings needs W large enough to
	 * pass gradient back to E: W ~ N(0, 1/in) keeps the logits' scale
	 * independent of embed_dim, and E ~ N(0, 1) lets a mean of a few
	 * hundred rows still differ between records.
	 */
	r.state = pf_mix64_final(cfg->seed ^ 0x9f0d3a1cull);
	if (cfg->kind == PF_MODEL_SOFTMAX) {
		fill_normal(&r, m->dense, (size_t)m->in * cfg->classes, 0.01f);
	} else {
		fill_normal(&r, m->dense, (size_t)m->in * cfg->classes,
			    (float)(1.0 / sqrt((double)m->in)));
		fill_normal(&r, m->embed, (size_t)cfg->vocab * cfg->embed_dim, 1.0f);
	}
	memset(m->dense + (size_t)m->in * cfg->classes, 0,
	       cfg->classes * sizeof(float));
	*out = m;
	return 0;
nomem:
	pf_model_free(m);
	return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
			    "model: out of memory for the parameters");
}

void pf_model_free(pf_model *m)
{
	if (!m)
		return;
	pf_free(m->dense);
	pf_free(m->embed);
	pf_free(m);
}

const pf_model_config *pf_model_get_config(const pf_model *m)
{
	return &m->cfg;
}

float *pf_model_dense(pf_model *m, size_t *n)
{
	*n = m->ndense;
	return m->dense;
}

float *pf_model_embedding(pf_model *m, uint32_t *rows, uint32_t *dim)
{
	bool e = m->cfg.kind == PF_MODEL_EMBAG;

	*rows = e ? m->cfg.vocab : 0;
	*dim = e ? m->cfg.embed_dim : 0;
	return m->embed;
}

double pf_model_step_flops(const pf_model *m, uint32_t rows)
{
	const pf_model_config *c = &m->cfg;
	/* Forward product and the weight gradient's: 2 flops per
	 * multiply-add each. */
	double f = 4.0 * rows * m->in * c->classes;

	if (c->kind == PF_MODEL_EMBAG) {
		double slots = (double)rows * c->seq_len * c->embed_dim;

		f += 2.0 * rows * m->in * c->classes;	/* dh = dz W^T */
		f += slots;				/* gather: one add */
		f += 2.0 * slots;			/* scatter: one FMA */
	}
	return f;
}

/* ------------------------------------------------------------------ */

int pf_workspace_create(const pf_model *m, pf_workspace **out)
{
	const pf_model_config *c = &m->cfg;
	pf_workspace *ws = pf_calloc(1, sizeof(*ws));

	*out = NULL;
	if (!ws)
		return -ENOMEM;
	ws->model = m;
	ws->logits = alloc_aligned((size_t)c->max_rows * c->classes * sizeof(float));
	ws->gemm = alloc_aligned(PF_GEMM_SCRATCH_FLOATS * sizeof(float));
	if (!ws->logits || !ws->gemm)
		goto nomem;
	if (c->kind == PF_MODEL_EMBAG) {
		size_t hbytes = (size_t)c->max_rows * c->embed_dim * sizeof(float);

		ws->hidden = alloc_aligned(hbytes);
		ws->dhidden = alloc_aligned(hbytes);
		ws->inv_count = alloc_aligned(c->max_rows * sizeof(float));
		ws->slot = alloc_aligned((size_t)c->vocab * sizeof(int32_t));
		ws->touched = pf_calloc((c->vocab + 63) / 64, sizeof(uint64_t));
		ws->occ_start = alloc_aligned(((size_t)m->core_rows + 1) *
					      sizeof(uint32_t));
		ws->occ_row = alloc_aligned((size_t)c->max_rows * c->seq_len *
					    sizeof(uint32_t));
		if (!ws->hidden || !ws->dhidden || !ws->inv_count || !ws->slot ||
		    !ws->touched || !ws->occ_start || !ws->occ_row)
			goto nomem;
	}
	*out = ws;
	return 0;
nomem:
	pf_workspace_free(ws);
	return -ENOMEM;
}

void pf_workspace_free(pf_workspace *ws)
{
	if (!ws)
		return;
	pf_free(ws->logits);
	pf_free(ws->hidden);
	pf_free(ws->dhidden);
	pf_free(ws->inv_count);
	pf_free(ws->slot);
	pf_free(ws->touched);
	pf_free(ws->occ_start);
	pf_free(ws->occ_row);
	pf_free(ws->gemm);
	pf_free(ws);
}

int pf_grad_create(const pf_model *m, uint32_t sum_of, pf_grad **out)
{
	pf_grad *g;
	uint64_t cap;

	*out = NULL;
	if (sum_of < 1)
		return -EINVAL;
	g = pf_calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->kind = m->cfg.kind;
	g->in = m->in;
	g->classes = m->cfg.classes;
	g->ops = m->ops;
	g->ndense = m->ndense;
	g->dense = alloc_aligned(g->ndense * sizeof(float));
	if (!g->dense)
		goto nomem;
	if (m->cfg.kind == PF_MODEL_EMBAG) {
		g->vocab = m->cfg.vocab;
		g->dim = m->cfg.embed_dim;
		/* The union of sum_of batches' rows, never more than the
		 * table: a pod-wide gradient may need all of it. */
		cap = (uint64_t)sum_of * m->core_rows;
		g->cap = cap < g->vocab ? (uint32_t)cap : g->vocab;
		g->ids = alloc_aligned((size_t)g->cap * sizeof(uint32_t));
		g->rows = alloc_aligned((size_t)g->cap * g->dim * sizeof(float));
		g->words = (g->vocab + 63) / 64;
		g->mask = pf_calloc(g->words, sizeof(uint64_t));
		if (!g->ids || !g->rows || !g->mask)
			goto nomem;
	}
	*out = g;
	return 0;
nomem:
	pf_grad_free(g);
	return -ENOMEM;
}

void pf_grad_free(pf_grad *g)
{
	if (!g)
		return;
	pf_free(g->dense);
	pf_free(g->ids);
	pf_free(g->rows);
	pf_free(g->mask);
	pf_free(g);
}

static bool same_shape(const pf_grad *a, const pf_grad *b)
{
	return a->kind == b->kind && a->in == b->in && a->classes == b->classes &&
	       a->vocab == b->vocab && a->dim == b->dim;
}

static bool grad_fits(const pf_model *m, const pf_grad *g)
{
	return g->kind == m->cfg.kind && g->in == m->in &&
	       g->classes == m->cfg.classes &&
	       (m->cfg.kind != PF_MODEL_EMBAG ||
		(g->vocab == m->cfg.vocab && g->dim == m->cfg.embed_dim));
}

/* ------------------------------------------------------------------ */
/* Forward and backward                                                 */
/* ------------------------------------------------------------------ */

/* Every label and token id is checked before any kernel runs: the kernels
 * index tables with them unchecked. */
static int check_batch(const pf_model *m, const pf_workspace *ws,
		       const pf_model_batch *b, pf_error *err)
{
	const pf_model_config *c = &m->cfg;

	if (ws->model != m)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "model: the workspace belongs to another model");
	if (b->rows < 1 || b->rows > c->max_rows)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "model: batch of %u rows is not in [1, %u]",
				    b->rows, c->max_rows);
	if (!b->labels || (c->kind == PF_MODEL_SOFTMAX ? !b->x : !b->tokens))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "model: the batch lacks %s",
				    !b->labels ? "labels" :
				    c->kind == PF_MODEL_SOFTMAX ? "x" : "tokens");
	for (uint32_t i = 0; i < b->rows; i++)
		if (b->labels[i] < 0 || (uint32_t)b->labels[i] >= c->classes)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "batch row %u: label %d is not in [0, %u)",
					    i, b->labels[i], c->classes);
	if (c->kind == PF_MODEL_EMBAG) {
		const int32_t *t = b->tokens;

		for (uint32_t i = 0; i < b->rows; i++)
			for (uint32_t j = 0; j < c->seq_len; j++, t++)
				if (*t != c->pad_id &&
				    (*t < 0 || (uint32_t)*t >= c->vocab))
					return pf_error_set(err, -EINVAL,
						PF_OFFSET_NONE, 0,
						"batch row %u, token %u: id %d is "
						"neither the pad id %d nor in [0, %u)",
						i, j, *t, c->pad_id, c->vocab);
	}
	return 0;
}

/* logits = input W + b, where input is x or the embedding means.
 * @return the input of the linear layer. */
static const float *forward(const pf_model *m, pf_workspace *ws,
			    const pf_model_batch *b)
{
	const pf_model_config *c = &m->cfg;
	const float *input = b->x;
	const float *bias = m->dense + (size_t)m->in * c->classes;

	if (c->kind == PF_MODEL_EMBAG) {
		m->ops->gather_mean(b->rows, c->seq_len, b->tokens, c->pad_id,
				    m->embed, c->embed_dim, ws->hidden,
				    ws->inv_count);
		input = ws->hidden;
	}
	/* The bias goes in as C with beta = 1: no separate pass. */
	for (uint32_t i = 0; i < b->rows; i++)
		memcpy(ws->logits + (size_t)i * c->classes, bias,
		       c->classes * sizeof(float));
	pf_sgemm(m->ops, false, false, b->rows, c->classes, m->in, 1.0f,
		 input, m->in, m->dense, c->classes, 1.0f, ws->logits,
		 c->classes, ws->gemm);
	return input;
}

/*
 * The rows the batch touched, ascending, into g->ids; ws->slot maps each
 * to its place in g->rows.  A bitmap of the table (4 KiB for 32000 rows)
 * sorts and de-duplicates in one pass over the tokens and one over the
 * bitmap, and is left all zero again for the next call.
 */
static void collect_rows(const pf_model *m, pf_workspace *ws,
			 const pf_model_batch *b, pf_grad *g)
{
	const pf_model_config *c = &m->cfg;
	const size_t n = (size_t)b->rows * c->seq_len;
	const size_t words = (c->vocab + 63) / 64;
	uint32_t count = 0;

	for (size_t t = 0; t < n; t++) {
		int32_t id = b->tokens[t];
		if (id != c->pad_id)
			ws->touched[(uint32_t)id >> 6] |= 1ull << ((uint32_t)id & 63);
	}
	for (size_t w = 0; w < words; w++) {
		uint64_t bits = ws->touched[w];

		ws->touched[w] = 0;
		while (bits) {
			uint32_t id = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(bits));

			bits &= bits - 1;
			/* count <= min(vocab, rows * seq_len) <= g->cap. */
			ws->slot[id] = (int32_t)count;
			g->ids[count++] = id;
		}
	}
	g->nrows = count;
}

/*
 * Group the batch's real tokens by gradient row (a counting sort on
 * slot): the occurrences of row s are the batch rows occ_row[occ_start[s]
 * .. occ_start[s+1]), in token order, so each gradient row is summed in
 * registers and written once instead of read and written at every token,
 * and in the same order of additions.
 */
static void group_tokens(const pf_model *m, pf_workspace *ws,
			 const pf_model_batch *b, uint32_t nrows)
{
	const pf_model_config *c = &m->cfg;
	uint32_t *start = ws->occ_start, total = 0;
	const int32_t *t = b->tokens;

	memset(start, 0, ((size_t)nrows + 1) * sizeof(*start));
	for (size_t j = 0; j < (size_t)b->rows * c->seq_len; j++)
		if (t[j] != c->pad_id)
			start[ws->slot[t[j]]]++;
	for (uint32_t s = 0; s < nrows; s++) {
		uint32_t n = start[s];
		start[s] = total;
		total += n;
	}
	start[nrows] = total;
	/* Filling advances start[s] to the end of segment s, which is the
	 * start of s + 1: shift back by one afterwards. */
	for (uint32_t i = 0; i < b->rows; i++, t += c->seq_len)
		for (uint32_t j = 0; j < c->seq_len; j++)
			if (t[j] != c->pad_id)
				ws->occ_row[start[ws->slot[t[j]]]++] = i;
	for (uint32_t s = nrows; s > 0; s--)
		start[s] = start[s - 1];
	start[0] = 0;
}

int pf_model_grad(const pf_model *m, pf_workspace *ws,
		  const pf_model_batch *b, pf_grad *g, double *loss,
		  pf_error *err)
{
	const pf_model_config *c = &m->cfg;
	const float *input;
	double sum;
	int ret;

	pf_error_clear(err);
	if ((ret = check_batch(m, ws, b, err)) < 0)
		return ret;
	if (!grad_fits(m, g))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "model: the gradient has another model's shape");
	/* A gradient of the same shape from a model with smaller batches
	 * may lack room for this model's touched rows. */
	if (g->cap < m->core_rows)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "model: the gradient holds %u table rows, a "
				    "batch may touch %u", g->cap, m->core_rows);
	input = forward(m, ws, b);
	/* dlogits of the batch mean: (softmax - onehot) / rows. */
	sum = m->ops->softmax_xent(b->rows, c->classes, ws->logits, b->labels,
				   1.0f / (float)b->rows, true, NULL);
	if (loss)
		*loss = sum / b->rows;
	/* dW = input^T dlogits, db = column sums of dlogits. */
	pf_sgemm(m->ops, true, false, m->in, c->classes, b->rows, 1.0f, input,
		 m->in, ws->logits, c->classes, 0.0f, g->dense, c->classes,
		 ws->gemm);
	pf_col_sum(m->ops, b->rows, c->classes, ws->logits, c->classes,
		   g->dense + (size_t)m->in * c->classes);
	g->nrows = 0;
	if (c->kind != PF_MODEL_EMBAG)
		return 0;

	/* dh = dlogits W^T; each real token of row i gets dh_i / count_i. */
	pf_sgemm(m->ops, false, true, b->rows, c->embed_dim, c->classes, 1.0f,
		 ws->logits, c->classes, m->dense, c->classes, 0.0f,
		 ws->dhidden, c->embed_dim, ws->gemm);
	collect_rows(m, ws, b, g);
	group_tokens(m, ws, b, g->nrows);
	m->ops->segment_sum(g->nrows, ws->occ_start, ws->occ_row, ws->dhidden,
			    ws->inv_count, c->embed_dim, g->rows);
	return 0;
}

int pf_model_evaluate(const pf_model *m, pf_workspace *ws,
		      const pf_model_batch *b, double *loss, uint32_t *correct,
		      pf_error *err)
{
	uint32_t right = 0;
	double sum;
	int ret;

	pf_error_clear(err);
	if ((ret = check_batch(m, ws, b, err)) < 0)
		return ret;
	forward(m, ws, b);
	sum = m->ops->softmax_xent(b->rows, m->cfg.classes, ws->logits,
				   b->labels, 0.0f, false, &right);
	if (loss)
		*loss = sum / b->rows;
	if (correct)
		*correct = right;
	return 0;
}

int pf_model_apply(pf_model *m, const pf_grad *g, float lr)
{
	if (!grad_fits(m, g))
		return -EINVAL;
	float table_lr = lr * (m->cfg.embed_lr_scale > 0.0f ?
			       m->cfg.embed_lr_scale : 1.0f);

	m->ops->axpy(m->ndense, -lr, g->dense, m->dense);
	for (uint32_t i = 0; i < g->nrows; i++)
		m->ops->axpy(g->dim, -table_lr, g->rows + (size_t)i * g->dim,
			     m->embed + (size_t)g->ids[i] * g->dim);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Gradient arithmetic                                                  */
/* ------------------------------------------------------------------ */

/* Each sum starts from in[0] and adds in[1], in[2], ... in that order; a
 * row that an input lacks adds nothing (x + 0 == x), so the sparse sum
 * has the same bits as a dense one would. */
int pf_grad_average(pf_grad *out, const pf_grad *const *in, uint32_t n)
{
	const pf_kernel_ops *k = out->ops;
	uint32_t count = 0;

	if (n == 0)
		return -EINVAL;
	for (uint32_t j = 0; j < n; j++)
		if (in[j] == out || !same_shape(out, in[j]))
			return -EINVAL;

	memcpy(out->dense, in[0]->dense, out->ndense * sizeof(float));
	for (uint32_t j = 1; j < n; j++)
		k->axpy(out->ndense, 1.0f, in[j]->dense, out->dense);

	out->nrows = 0;
	if (out->kind == PF_MODEL_EMBAG) {
		/* The union of the row lists, ascending, through the mask. */
		for (uint32_t j = 0; j < n; j++)
			pf_grad_mark_rows(in[j], out->mask);
		for (size_t w = 0; w < out->words; w++)
			count += (uint32_t)__builtin_popcountll(out->mask[w]);
		if (count > out->cap) {
			memset(out->mask, 0, out->words * sizeof(uint64_t));
			return -ENOSPC;
		}
		for (size_t w = 0; w < out->words; w++) {
			uint64_t bits = out->mask[w];

			out->mask[w] = 0;
			while (bits) {
				out->ids[out->nrows++] =
					(uint32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
				bits &= bits - 1;
			}
		}
		memset(out->rows, 0, (size_t)count * out->dim * sizeof(float));
		for (uint32_t j = 0; j < n; j++) {
			/* Both lists ascend: one merge walk finds each row. */
			uint32_t o = 0;

			for (uint32_t i = 0; i < in[j]->nrows; i++) {
				while (out->ids[o] != in[j]->ids[i])
					o++;
				k->axpy(out->dim, 1.0f,
					in[j]->rows + (size_t)i * out->dim,
					out->rows + (size_t)o * out->dim);
			}
		}
	}
	pf_grad_scale(out, 1.0f / (float)n);
	return 0;
}

void pf_grad_scale(pf_grad *g, float a)
{
	g->ops->scale(g->ndense, a, g->dense);
	g->ops->scale((size_t)g->nrows * g->dim, a, g->rows);
}

float *pf_grad_dense(pf_grad *g, size_t *n)
{
	*n = g->ndense;
	return g->dense;
}

uint32_t pf_grad_rows(pf_grad *g, const uint32_t **ids, float **rows,
		      uint32_t *dim)
{
	*ids = g->ids;
	*rows = g->rows;
	*dim = g->dim;
	return g->nrows;
}

size_t pf_grad_mask_words(const pf_grad *g)
{
	return g->words;
}

void pf_grad_mark_rows(const pf_grad *g, uint64_t *mask)
{
	for (uint32_t i = 0; i < g->nrows; i++)
		mask[g->ids[i] >> 6] |= 1ull << (g->ids[i] & 63);
}

int pf_grad_spread_rows(pf_grad *g, const uint64_t *mask)
{
	uint64_t total = 0;
	uint32_t j, i;

	if (g->kind != PF_MODEL_EMBAG)
		return 0;
	/* Bits past the table would name rows that do not exist. */
	if (g->vocab & 63 && mask[g->words - 1] >> (g->vocab & 63))
		return -EINVAL;
	for (size_t w = 0; w < g->words; w++)
		total += (uint64_t)__builtin_popcountll(mask[w]);
	for (i = 0; i < g->nrows; i++)
		if (!(mask[g->ids[i] >> 6] & (1ull << (g->ids[i] & 63))))
			return -EINVAL;
	if (total > g->cap)
		return -ENOSPC;

	/*
	 * Walk both lists from the top.  Row i of g moves to its new place
	 * j >= i, and every place above j is already written, so moving from
	 * the top never overwrites a row not yet moved.
	 */
	j = (uint32_t)total;
	i = g->nrows;
	for (size_t w = g->words; w-- > 0;) {
		uint64_t bits = mask[w];

		while (bits) {
			int b = 63 - __builtin_clzll(bits);
			uint32_t id = (uint32_t)(w * 64 + (size_t)b);
			float *dst = g->rows + (size_t)(--j) * g->dim;

			bits &= ~(1ull << b);
			if (i > 0 && g->ids[i - 1] == id) {
				i--;
				if (i != j)
					memcpy(dst, g->rows + (size_t)i * g->dim,
					       g->dim * sizeof(float));
			} else {
				memset(dst, 0, g->dim * sizeof(float));
			}
			g->ids[j] = id;
		}
	}
	g->nrows = (uint32_t)total;
	return 0;
}
