/* SPDX-License-Identifier: Apache-2.0 */
/* host/ trainer: the same bits as a sequential step by step reference at
 * any core count and thread timing; C cores x b rows trains like 1 core x
 * C*b rows; the spec's features checked against the model with messages
 * that say what is wrong; bad batches leave the model as it was;
 * evaluation sums. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pf_host.h"
#include "podfeed.h"

#define DIM 24
#define CLASSES 5
#define VOCAB 300
#define SEQ 12
#define EMBED 8

typedef struct trng {
	uint64_t s;
} trng;

static uint64_t tr_next(trng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double tr_gauss(trng *r)
{
	double u = (double)(tr_next(r) >> 11) * 0x1.0p-53;
	double v = (double)(tr_next(r) >> 11) * 0x1.0p-53;

	return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	cr_assert_not_null(p);
	return p;
}

static pf_spec parse_spec(const char *text)
{
	pf_spec s;
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_spec_parse(&s, text, &err), 0, "%s: %s", text, err.msg);
	return s;
}

/* ------------------------------------------------------------------ */
/* Data: `rows` records laid out as the loader lays a batch out          */

/* All records of a run, row-major, with labels from a hidden teacher so
 * that the loss can fall. */
typedef struct dataset {
	pf_model_kind kind;
	uint32_t rows;
	float *x;		/* softmax: [rows][DIM] */
	int32_t *tokens;	/* embag: [rows][SEQ], -1 padding */
	int32_t *labels;
} dataset;

static dataset make_data(pf_model_kind kind, uint32_t rows, uint64_t seed)
{
	dataset d = { .kind = kind, .rows = rows };
	trng r = { seed };
	float teacher[CLASSES][DIM];

	for (uint32_t c = 0; c < CLASSES; c++)
		for (uint32_t i = 0; i < DIM; i++)
			teacher[c][i] = (float)tr_gauss(&r);
	d.labels = xcalloc(rows, sizeof(int32_t));
	if (kind == PF_MODEL_SOFTMAX) {
		d.x = xcalloc((size_t)rows * DIM, sizeof(float));
		for (uint32_t k = 0; k < rows; k++) {
			float *x = d.x + (size_t)k * DIM;
			double best = -INFINITY;

			for (uint32_t i = 0; i < DIM; i++)
				x[i] = (float)tr_gauss(&r);
			for (uint32_t c = 0; c < CLASSES; c++) {
				double z = 0;
				for (uint32_t i = 0; i < DIM; i++)
					z += teacher[c][i] * x[i];
				if (z > best) {
					best = z;
					d.labels[k] = (int32_t)c;
				}
			}
		}
	} else {
		d.tokens = xcalloc((size_t)rows * SEQ, sizeof(int32_t));
		for (uint32_t k = 0; k < rows; k++) {
			int32_t *t = d.tokens + (size_t)k * SEQ;
			uint32_t n = 1 + (uint32_t)(tr_next(&r) % SEQ);

			for (uint32_t j = 0; j < SEQ; j++)
				t[j] = j < n ? (int32_t)(tr_next(&r) % VOCAB) : -1;
			/* the label: which fifth of the vocabulary the first
			 * token lies in */
			d.labels[k] = t[0] * CLASSES / VOCAB;
		}
	}
	return d;
}

static void free_data(dataset *d)
{
	free(d->x);
	free(d->tokens);
	free(d->labels);
}

/* A batch of `cores` blocks of `b` rows over records [first, first +
 * cores * b) of d, core c taking the c-th run of b rows; tensors in the
 * order of the spec "label, input" or "input, label". */
typedef struct batch_buf {
	pf_batch batch;
	pf_core_batch core[16];
	pf_tensor tensors[16][3];
} batch_buf;

static void make_batch(batch_buf *bb, const dataset *d, uint32_t first,
		       uint32_t cores, uint32_t b, bool label_first)
{
	uint32_t in = label_first ? 1 : 0, lb = label_first ? 0 : 1;

	cr_assert_leq(cores, 16u);
	memset(bb, 0, sizeof(*bb));
	bb->batch.cores = cores;
	bb->batch.per_core_batch = b;
	bb->batch.core = bb->core;
	for (uint32_t c = 0; c < cores; c++) {
		uint32_t r0 = first + c * b;

		cr_assert_leq(r0 + b, d->rows);
		bb->core[c].tensors = bb->tensors[c];
		bb->core[c].ntensors = 2;
		if (d->kind == PF_MODEL_SOFTMAX)
			bb->tensors[c][in] = (pf_tensor){ .name = "x",
				.dtype = PF_DTYPE_FLOAT32, .len = DIM,
				.data = d->x + (size_t)r0 * DIM };
		else
			bb->tensors[c][in] = (pf_tensor){ .name = "tokens",
				.dtype = PF_DTYPE_INT32, .len = SEQ,
				.data = d->tokens + (size_t)r0 * SEQ };
		bb->tensors[c][lb] = (pf_tensor){ .name = "label",
			.dtype = PF_DTYPE_INT32, .len = 1, .data = d->labels + r0 };
	}
}

static const char *spec_text(pf_model_kind kind)
{
	return kind == PF_MODEL_SOFTMAX ? "x:float32[24],label:int32[1]"
					: "tokens:int32[12]:pad=-1,label:int32[1]";
}

static pf_model_config model_cfg(pf_model_kind kind)
{
	return (pf_model_config){ .kind = kind, .classes = CLASSES, .vocab = VOCAB,
				  .embed_dim = EMBED, .embed_lr_scale = 10.0f,
				  .seed = 7 };
}

static pf_trainer *make_trainer(pf_model_kind kind, const pf_spec *spec,
				uint32_t cores, uint32_t b)
{
	pf_trainer_config cfg = { .model = model_cfg(kind), .spec = spec,
				  .cores = cores, .per_core_batch = b };
	pf_trainer *t = NULL;
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_trainer_create(&t, &cfg, &err), 0, "%s", err.msg);
	return t;
}

#define LR 0.3f

/* Train `steps` steps of cores x b rows; @return the model's hash, and the
 * losses into loss[] when given. */
static uint64_t train(pf_model_kind kind, const dataset *d, uint32_t cores,
		      uint32_t b, uint32_t steps, double *loss, pf_trainer **keep)
{
	pf_spec spec = parse_spec(spec_text(kind));
	pf_trainer *t = make_trainer(kind, &spec, cores, b);
	uint64_t h;

	for (uint32_t s = 0; s < steps; s++) {
		batch_buf bb;
		pf_train_step st;
		pf_error err;

		make_batch(&bb, d, s * cores * b, cores, b, false);
		pf_error_clear(&err);
		cr_assert_eq(pf_trainer_step(t, &bb.batch, LR, &st, &err), 0, "%s", err.msg);
		cr_assert(isfinite(st.loss));
		cr_assert_eq(st.reduce_ns, 0, "a lone host reduces nothing");
		if (loss)
			loss[s] = st.loss;
	}
	cr_assert_eq(pf_trainer_steps(t), steps);
	h = pf_model_hash(pf_trainer_model(t));
	if (keep)
		*keep = t;
	else
		pf_trainer_free(t);
	return h;
}

/* The same steps with the model API alone on one thread: the order of
 * operations pf_host.h prescribes. */
static uint64_t reference(pf_model_kind kind, const dataset *d, uint32_t cores,
			  uint32_t b, uint32_t steps, double *loss)
{
	pf_model_config mc = model_cfg(kind);
	pf_model *m;
	pf_workspace *ws;
	pf_grad *g[16], *avg;
	uint64_t h;

	if (kind == PF_MODEL_SOFTMAX)
		mc.dim = DIM;
	else
		mc.seq_len = SEQ, mc.pad_id = -1;
	mc.max_rows = b;
	cr_assert_eq(pf_model_create(&m, &mc, NULL), 0);
	cr_assert_eq(pf_workspace_create(m, &ws), 0);
	for (uint32_t c = 0; c < cores; c++)
		cr_assert_eq(pf_grad_create(m, 1, &g[c]), 0);
	cr_assert_eq(pf_grad_create(m, cores, &avg), 0);
	for (uint32_t s = 0; s < steps; s++) {
		double sum = 0;

		for (uint32_t c = 0; c < cores; c++) {
			uint32_t r0 = (s * cores + c) * b;
			pf_model_batch mb = { .rows = b, .labels = d->labels + r0 };
			double l;

			if (kind == PF_MODEL_SOFTMAX)
				mb.x = d->x + (size_t)r0 * DIM;
			else
				mb.tokens = d->tokens + (size_t)r0 * SEQ;
			cr_assert_eq(pf_model_grad(m, ws, &mb, g[c], &l, NULL), 0);
			sum += l;
		}
		cr_assert_eq(pf_grad_average(avg, (const pf_grad *const *)g, cores), 0);
		cr_assert_eq(pf_model_apply(m, avg, LR), 0);
		loss[s] = sum / cores;
	}
	h = pf_model_hash(m);
	for (uint32_t c = 0; c < cores; c++)
		pf_grad_free(g[c]);
	pf_grad_free(avg);
	pf_workspace_free(ws);
	pf_model_free(m);
	return h;
}

/* ------------------------------------------------------------------ */
/* Determinism                                                          */

static void same_bits_as_reference(pf_model_kind kind)
{
	const uint32_t b = 6, steps = 25;
	dataset d = make_data(kind, 8 * b * steps, 11);

	/* More workers than the machine has cores: the threads interleave
	 * differently on every run, the bits may not. */
	for (uint32_t cores = 1; cores <= 8; cores += cores < 4 ? 1 : 4) {
		double loss[25], ref_loss[25];
		uint64_t ref = reference(kind, &d, cores, b, steps, ref_loss);

		for (int run = 0; run < 3; run++) {
			uint64_t h = train(kind, &d, cores, b, steps, loss, NULL);

			cr_assert_eq(h, ref, "%s, %u cores, run %d: model %016llx, the "
				     "sequential reference %016llx",
				     pf_model_kind_name(kind), cores, run,
				     (unsigned long long)h, (unsigned long long)ref);
			cr_assert_eq(memcmp(loss, ref_loss, sizeof(loss)), 0,
				     "%u cores: the losses differ", cores);
		}
	}
	free_data(&d);
}

Test(trainer, softmax_same_bits_as_the_sequential_reference, .timeout = 60)
{
	same_bits_as_reference(PF_MODEL_SOFTMAX);
}

Test(trainer, embag_same_bits_as_the_sequential_reference, .timeout = 60)
{
	same_bits_as_reference(PF_MODEL_EMBAG);
}

/* ------------------------------------------------------------------ */
/* C cores x b rows == 1 core x C*b rows (the gradient is a mean)       */

static void cores_equal_one_big_core(pf_model_kind kind)
{
	const uint32_t cores = 4, b = 8, steps = 40;
	dataset d = make_data(kind, cores * b * steps, 12);
	double split[40], whole[40];
	pf_trainer *ts, *tw;
	size_t n, n2;
	float *ps, *pw;
	double num = 0, den = 0;

	train(kind, &d, cores, b, steps, split, &ts);
	train(kind, &d, 1, cores * b, steps, whole, &tw);
	for (uint32_t s = 0; s < steps; s++)
		cr_assert(fabs(split[s] - whole[s]) <= 1e-4 * fabs(whole[s]) + 1e-6,
			  "step %u: loss %.9g on %u cores, %.9g on one", s, split[s],
			  cores, whole[s]);
	/* The model learned, so the comparison means something. */
	cr_assert_lt(whole[steps - 1], 0.9 * whole[0], "loss %.4f -> %.4f", whole[0],
		     whole[steps - 1]);
	ps = pf_model_dense(pf_trainer_model(ts), &n);
	pw = pf_model_dense(pf_trainer_model(tw), &n2);
	cr_assert_eq(n, n2);
	for (size_t i = 0; i < n; i++) {
		num = fmax(num, fabs((double)ps[i] - pw[i]));
		den = fmax(den, fabs((double)pw[i]));
	}
	if (kind == PF_MODEL_EMBAG) {
		uint32_t rows, dim;
		float *es = pf_model_embedding(pf_trainer_model(ts), &rows, &dim);
		float *ew = pf_model_embedding(pf_trainer_model(tw), &rows, &dim);

		for (size_t i = 0; i < (size_t)rows * dim; i++) {
			num = fmax(num, fabs((double)es[i] - ew[i]));
			den = fmax(den, fabs((double)ew[i]));
		}
	}
	cr_assert_lt(num / den, 1e-4, "%s: parameters differ by %.3g relative",
		     pf_model_kind_name(kind), num / den);
	/* Float rounding differs, so the bits need not agree: they did
	 * not for this data when this test was written, and that is fine. */
	pf_trainer_free(ts);
	pf_trainer_free(tw);
	free_data(&d);
}

Test(trainer, softmax_4_cores_train_like_one_core_of_4x_rows)
{
	cores_equal_one_big_core(PF_MODEL_SOFTMAX);
}

Test(trainer, embag_4_cores_train_like_one_core_of_4x_rows)
{
	cores_equal_one_big_core(PF_MODEL_EMBAG);
}

/* ------------------------------------------------------------------ */
/* Specs                                                                */

static void expect_spec_error_in(pf_model_kind kind, const pf_spec *spec,
				 const char *spec_text, const char *input,
				 const char *label, const char *says);

static void expect_spec_error(pf_model_kind kind, const char *spec_text,
			      const char *input, const char *label, const char *says)
{
	pf_spec spec = parse_spec(spec_text);

	expect_spec_error_in(kind, &spec, spec_text, input, label, says);
}

static void expect_spec_error_in(pf_model_kind kind, const pf_spec *spec_in,
				 const char *spec_text, const char *input,
				 const char *label, const char *says)
{
	pf_spec spec = *spec_in;
	pf_trainer_config cfg = { .model = model_cfg(kind), .spec = &spec,
				  .input = input, .label = label, .cores = 2,
				  .per_core_batch = 4 };
	pf_trainer *t = (pf_trainer *)&cfg;	/* must come back NULL */
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_trainer_create(&t, &cfg, &err), -EINVAL, "%s: accepted",
		     spec_text);
	cr_assert_null(t);
	cr_assert(strstr(err.msg, says), "%s: '%s' does not say '%s'", spec_text,
		  err.msg, says);
}

Test(trainer, bad_specs_say_what_is_wrong)
{
	expect_spec_error(PF_MODEL_SOFTMAX, "x:float32[24]", NULL, NULL,
			  "softmax: no label feature 'label' in the spec (x:float32[24])");
	expect_spec_error(PF_MODEL_SOFTMAX, "x:float32[24],y:int32[1]", NULL, "target",
			  "no label feature 'target'");
	expect_spec_error(PF_MODEL_SOFTMAX, "x:float32[24],label:int64[1]", NULL, NULL,
			  "label feature 'label' is int64[1]; it must be int32[1]");
	expect_spec_error(PF_MODEL_SOFTMAX, "x:float32[24],label:int32[2]", NULL, NULL,
			  "label feature 'label' is int32[2]; it must be int32[1]");
	expect_spec_error(PF_MODEL_SOFTMAX, "x:int64[24],label:int32[1]", NULL, NULL,
			  "softmax: needs an input feature of float32[dim] values besides "
			  "the label; the spec has none (x:int64[24], label:int32[1])");
	expect_spec_error(PF_MODEL_SOFTMAX, "x:int64[24],label:int32[1]", "x", NULL,
			  "input feature 'x' is int64[24]; it must be float32[dim] values "
			  "(write x:float32[24] in the spec)");
	expect_spec_error(PF_MODEL_SOFTMAX, "a:float32[4],b:float32[4],label:int32[1]",
			  NULL, NULL, "several float32 features could be the input "
			  "('a', 'b', ...); name one");
	expect_spec_error(PF_MODEL_SOFTMAX, "x:float32[4],label:int32[1]", "z", NULL,
			  "no input feature 'z' in the spec");
	expect_spec_error(PF_MODEL_SOFTMAX, "x:float32[4],label:int32[1]", "label", NULL,
			  "'label' cannot be both the input and the label");
	expect_spec_error(PF_MODEL_EMBAG, "tokens:int64[12],label:int32[1]", "tokens", NULL,
			  "embag: input feature 'tokens' is int64[12]; it must be int32"
			  "[seq_len] token ids (write tokens:int32[12] in the spec)");
	expect_spec_error(PF_MODEL_EMBAG, "x:float32[12],label:int32[1]", NULL, NULL,
			  "embag: needs an input feature of int32[seq_len] token ids");
	/* The spec parser refuses such a pad; a spec made by hand may not. */
	{
		pf_spec spec = parse_spec("tokens:int32[12],label:int32[1]");

		spec.f[0].pad = 0.5;
		expect_spec_error_in(PF_MODEL_EMBAG, &spec, "pad 0.5", NULL, NULL,
				     "the pad value 0.5 of 'tokens' is not a whole int32");
		spec.f[0].pad = 3e9;
		expect_spec_error_in(PF_MODEL_EMBAG, &spec, "pad 3e9", NULL, NULL,
				     "the pad value 3e+09 of 'tokens' is not a whole int32");
	}
}

Test(trainer, features_found_by_name_and_in_any_order)
{
	pf_spec spec = parse_spec("id:int64[1],label:int32[1],w:float32[3],x:float32[24]");
	pf_trainer_config cfg = { .model = model_cfg(PF_MODEL_SOFTMAX), .spec = &spec,
				  .input = "x", .cores = 1, .per_core_batch = 4 };
	pf_trainer *t;
	uint32_t in, lb;

	cr_assert_eq(pf_trainer_create(&t, &cfg, NULL), 0);
	pf_trainer_features(t, &in, &lb);
	cr_assert_eq(in, 3);
	cr_assert_eq(lb, 1);
	cr_assert_eq(pf_model_get_config(pf_trainer_model(t))->dim, 24);
	pf_trainer_free(t);
	/* embag takes its pad id from the spec */
	spec = parse_spec("label:int32[1],tokens:int32[12]:pad=-7");
	cfg = (pf_trainer_config){ .model = model_cfg(PF_MODEL_EMBAG), .spec = &spec,
				   .cores = 3, .per_core_batch = 5 };
	cr_assert_eq(pf_trainer_create(&t, &cfg, NULL), 0);
	pf_trainer_features(t, &in, &lb);
	cr_assert_eq(in, 1);
	cr_assert_eq(lb, 0);
	cr_assert_eq(pf_model_get_config(pf_trainer_model(t))->pad_id, -7);
	cr_assert_eq(pf_model_get_config(pf_trainer_model(t))->seq_len, 12);
	cr_assert_eq(pf_model_get_config(pf_trainer_model(t))->max_rows, 5);
	pf_trainer_free(t);
}

Test(trainer, bad_configurations)
{
	pf_spec spec = parse_spec(spec_text(PF_MODEL_SOFTMAX));
	pf_trainer_config cfg = { .model = model_cfg(PF_MODEL_SOFTMAX), .spec = &spec,
				  .cores = 0, .per_core_batch = 4 };
	pf_trainer *t;
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_trainer_create(&t, &cfg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "0 cores is not in [1, 4096]"), "%s", err.msg);
	cfg.cores = 1;
	cfg.per_core_batch = 0;
	cr_assert_eq(pf_trainer_create(&t, &cfg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "per-core batch 0"), "%s", err.msg);
	cfg.per_core_batch = 4;
	cfg.model.classes = 1;
	cr_assert_eq(pf_trainer_create(&t, &cfg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "classes 1 is not in [2,"), "%s", err.msg);
	cfg.model.classes = CLASSES;
	cfg.spec = NULL;
	cr_assert_eq(pf_trainer_create(&t, &cfg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "the spec has no features"), "%s", err.msg);
	pf_trainer_free(NULL);
}

/* ------------------------------------------------------------------ */
/* Bad batches                                                          */

Test(trainer, bad_batches_fail_and_leave_the_model_alone)
{
	const uint32_t cores = 3, b = 4;
	dataset d = make_data(PF_MODEL_EMBAG, cores * b * 2, 13);
	pf_spec spec = parse_spec(spec_text(PF_MODEL_EMBAG));
	pf_trainer *t = make_trainer(PF_MODEL_EMBAG, &spec, cores, b);
	uint64_t h0 = pf_model_hash(pf_trainer_model(t));
	batch_buf bb;
	pf_error err;

	/* a label out of range on core 2, row 1 */
	make_batch(&bb, &d, 0, cores, b, false);
	d.labels[2 * b + 1] = CLASSES;
	pf_error_clear(&err);
	cr_assert_eq(pf_trainer_step(t, &bb.batch, LR, NULL, &err), -EINVAL);
	cr_assert(strstr(err.msg, "core 2: batch row 1: label 5 is not in [0, 5)"),
		  "%s", err.msg);
	d.labels[2 * b + 1] = 0;
	/* a token id outside the table on core 0 */
	d.tokens[3] = VOCAB;
	cr_assert_eq(pf_trainer_step(t, &bb.batch, LR, NULL, &err), -EINVAL);
	cr_assert(strstr(err.msg, "core 0: batch row 0, token 3: id 300 is neither the "
			 "pad id -1 nor in [0, 300)"), "%s", err.msg);
	d.tokens[3] = 1;
	/* the wrong shape */
	make_batch(&bb, &d, 0, 2, b, false);
	cr_assert_eq(pf_trainer_step(t, &bb.batch, LR, NULL, &err), -EINVAL);
	cr_assert(strstr(err.msg, "batch of 2 cores x 4 rows; the trainer has 3 cores "
			 "x 4 rows"), "%s", err.msg);
	make_batch(&bb, &d, 0, cores, b, true);	/* tensors swapped */
	cr_assert_eq(pf_trainer_step(t, &bb.batch, LR, NULL, &err), -EINVAL);
	cr_assert(strstr(err.msg, "core 0's tensors are not the spec's"), "%s", err.msg);
	make_batch(&bb, &d, 0, cores, b, false);
	bb.core[1].ntensors = 1;
	cr_assert_eq(pf_trainer_step(t, &bb.batch, LR, NULL, &err), -EINVAL);
	cr_assert(strstr(err.msg, "core 1's block has 1 tensors; the spec has 2"), "%s",
		  err.msg);
	cr_assert_eq(pf_trainer_step(t, NULL, LR, NULL, &err), -EINVAL);

	cr_assert_eq(pf_model_hash(pf_trainer_model(t)), h0, "a failed step changed "
		     "the model");
	cr_assert_eq(pf_trainer_steps(t), 0);
	/* and the trainer still works */
	make_batch(&bb, &d, 0, cores, b, false);
	cr_assert_eq(pf_trainer_step(t, &bb.batch, LR, NULL, &err), 0, "%s", err.msg);
	cr_assert_neq(pf_model_hash(pf_trainer_model(t)), h0);
	pf_trainer_free(t);
	free_data(&d);
}

/* ------------------------------------------------------------------ */
/* Evaluation and the pod of one                                        */

Test(trainer, evaluation_sums_match_the_model)
{
	const uint32_t cores = 3, b = 7;
	dataset d = make_data(PF_MODEL_SOFTMAX, cores * b * 2, 14);
	pf_trainer *t;
	pf_eval_sums sums = { 0 };
	pf_model_config mc;
	pf_workspace *ws;
	double want = 0;
	uint64_t right = 0;
	batch_buf bb;

	train(PF_MODEL_SOFTMAX, &d, cores, b, 2, NULL, &t);
	for (uint32_t s = 0; s < 2; s++) {
		make_batch(&bb, &d, s * cores * b, cores, b, false);
		cr_assert_eq(pf_trainer_evaluate(t, &bb.batch, &sums, NULL), 0);
	}
	cr_assert_eq(pf_trainer_eval_reduce(t, &sums, NULL), 0);
	mc = *pf_model_get_config(pf_trainer_model(t));
	cr_assert_eq(pf_workspace_create(pf_trainer_model(t), &ws), 0);
	for (uint32_t k = 0; k < cores * 2; k++) {
		pf_model_batch mb = { .rows = b, .x = d.x + (size_t)k * b * DIM,
				      .labels = d.labels + k * b };
		double l;
		uint32_t c;

		cr_assert_eq(pf_model_evaluate(pf_trainer_model(t), ws, &mb, &l, &c, NULL), 0);
		want += l * b;
		right += c;
	}
	cr_assert_eq(sums.rows, cores * b * 2);
	cr_assert_eq(sums.correct, right);
	cr_assert_eq(sums.loss_sum, want, "%.17g vs %.17g", sums.loss_sum, want);
	cr_assert_eq(mc.max_rows, b);
	pf_workspace_free(ws);
	pf_trainer_free(t);
	free_data(&d);
}

/* A process nobody launched is a pod of one: the same bits as no pod. */
Test(trainer, a_pod_of_one_changes_nothing)
{
	const uint32_t cores = 2, b = 5, steps = 10;
	dataset d = make_data(PF_MODEL_EMBAG, cores * b * steps, 15);
	pf_spec spec = parse_spec(spec_text(PF_MODEL_EMBAG));
	pf_trainer_config cfg = { .model = model_cfg(PF_MODEL_EMBAG), .spec = &spec,
				  .cores = cores, .per_core_batch = b };
	pf_trainer *t;
	pf_pod *pod;
	double loss[10];

	if (pf_pod_launched())
		cr_skip_test("this test process was started by an MPI launcher");
	cr_assert_eq(pf_pod_open(&pod, NULL), 0);
	cr_assert_eq(pf_pod_size(pod), 1);
	cfg.pod = pod;
	cr_assert_eq(pf_trainer_create(&t, &cfg, NULL), 0);
	for (uint32_t s = 0; s < steps; s++) {
		batch_buf bb;

		make_batch(&bb, &d, s * cores * b, cores, b, false);
		cr_assert_eq(pf_trainer_step(t, &bb.batch, LR, NULL, NULL), 0);
	}
	cr_assert_eq(pf_model_hash(pf_trainer_model(t)),
		     reference(PF_MODEL_EMBAG, &d, cores, b, steps, loss));
	pf_trainer_free(t);
	pf_pod_close(pod);
	free_data(&d);
}
