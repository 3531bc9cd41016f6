/* SPDX-License-Identifier: Apache-2.0 */
/* The trainer: data-parallel SGD of one model over the loader's batches,
 * one worker thread per core, gradients averaged across the host's cores
 * in a fixed order and across the pod's hosts through its collectives.
 *
 * Determinism.  Each core's gradient depends only on the model and its
 * own block of the batch; the host average adds them in core order; the
 * pod sum is MPI_Allreduce, whose result every rank shares; the update
 * runs on one thread.  So the bits of the model after any number of
 * steps do not depend on how the worker threads were scheduled. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common_internal.h"
#include "pf_host.h"
#include "podfeed.h"

/* Threads one host may run; far above any core count we emulate. */
#define PF_TRAINER_MAX_CORES 4096u

typedef enum job {
	JOB_GRAD = 0,
	JOB_EVAL,
	JOB_STOP,
} job;

/* One core's state: its worker's workspace, gradient and results.  The
 * caller's thread reads the results only after the worker has counted
 * itself done under the lock. */
typedef struct core {
	pf_trainer *t;
	uint32_t index;
	pthread_t thread;
	bool started;
	pf_workspace *ws;
	pf_grad *g;
	int ret;
	double loss;
	uint32_t correct;
	pf_error err;
} core;

struct pf_trainer {
	pf_model *model;
	pf_pod *pod;
	uint32_t cores, hosts;
	uint32_t per_core_batch;
	uint32_t input, label;		/* spec feature indices */
	pf_model_kind kind;
	uint32_t input_len;		/* dim or seq_len */
	pf_dtype input_dtype;
	uint32_t nfeatures;
	core *core;
	pf_grad *avg;			/* the host's, then the pod's */
	const pf_grad **grads;		/* core order, for pf_grad_average */
	uint64_t *mask;			/* embag: the pod's touched rows */
	size_t mask_words;
	uint64_t steps;

	/* The job board: a generation count the workers wait on, and the
	 * number of workers still busy with the current job. */
	pthread_mutex_t lock;
	pthread_cond_t go, finished;
	bool sync_ready;
	uint64_t generation;
	uint32_t pending;
	job job;
	const struct pf_batch *batch;
};

/* ------------------------------------------------------------------ */
/* The spec's features and the model                                    */

static const char *dtype_name(pf_dtype d)
{
	switch (d) {
	case PF_DTYPE_INT32: return "int32";
	case PF_DTYPE_INT64: return "int64";
	case PF_DTYPE_FLOAT32: return "float32";
	case PF_DTYPE_BYTES: return "bytes";
	}
	return "unknown";
}

/* "x:float32[256], label:int64[1]" into buf, for messages. */
static const char *spec_list(const pf_spec *s, char *buf, size_t cap)
{
	size_t len = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < s->n && len < cap; i++) {
		int n = snprintf(buf + len, cap - len, "%s%s:%s[%u]", i ? ", " : "",
				 s->f[i].name, dtype_name(s->f[i].dtype), s->f[i].len);
		if (n < 0)
			break;
		len += (size_t)n;
	}
	return buf;
}

static int find_feature(const pf_spec *s, const char *name)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (!strcmp(s->f[i].name, name))
			return (int)i;
	return -1;
}

/* Which features feed the model, checked against what the model reads.
 * @return 0, or -EINVAL with err saying which feature and why. */
static int map_features(pf_trainer *t, const pf_trainer_config *cfg,
			pf_error *err)
{
	const pf_spec *s = cfg->spec;
	const char *model = pf_model_kind_name(cfg->model.kind);
	const char *label_name = cfg->label ? cfg->label : "label";
	pf_dtype want = cfg->model.kind == PF_MODEL_EMBAG ? PF_DTYPE_INT32
							   : PF_DTYPE_FLOAT32;
	const char *what = cfg->model.kind == PF_MODEL_EMBAG ?
			   "int32[seq_len] token ids" : "float32[dim] values";
	char list[512];
	int label, input = -1;

	if (!s || s->n == 0 || s->n > PF_SPEC_MAX_FEATURES)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%s: the spec has no features", model);
	label = find_feature(s, label_name);
	if (label < 0)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%s: no label feature '%s' in the spec (%s)%s",
				    model, label_name, spec_list(s, list, sizeof(list)),
				    cfg->label ? "" : "; name the label feature");
	if (s->f[label].dtype != PF_DTYPE_INT32 || s->f[label].len != 1)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%s: label feature '%s' is %s[%u]; it must be "
				    "int32[1] (write %s:int32[1] in the spec)",
				    model, label_name, dtype_name(s->f[label].dtype),
				    s->f[label].len, label_name);
	if (cfg->input) {
		input = find_feature(s, cfg->input);
		if (input < 0)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "%s: no input feature '%s' in the spec (%s)",
					    model, cfg->input,
					    spec_list(s, list, sizeof(list)));
		if (input == label)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "%s: '%s' cannot be both the input and the label",
					    model, cfg->input);
	} else {
		for (uint32_t i = 0; i < s->n; i++) {
			if ((int)i == label || s->f[i].dtype != want)
				continue;
			if (input >= 0)
				return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
						    "%s: several %s features could be the "
						    "input ('%s', '%s', ...); name one",
						    model, dtype_name(want),
						    s->f[input].name, s->f[i].name);
			input = (int)i;
		}
		if (input < 0)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "%s: needs an input feature of %s besides "
					    "the label; the spec has none (%s)", model,
					    what, spec_list(s, list, sizeof(list)));
	}
	if (s->f[input].dtype != want)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%s: input feature '%s' is %s[%u]; it must be %s "
				    "(write %s:%s[%u] in the spec)", model,
				    s->f[input].name, dtype_name(s->f[input].dtype),
				    s->f[input].len, what, s->f[input].name,
				    dtype_name(want), s->f[input].len);
	if (want == PF_DTYPE_INT32) {
		double pad = s->f[input].pad;

		if (pad != floor(pad) || pad < INT32_MIN || pad > INT32_MAX)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "%s: the pad value %g of '%s' is not a whole "
					    "int32; it is the pad id", model, pad,
					    s->f[input].name);
	}
	t->input = (uint32_t)input;
	t->label = (uint32_t)label;
	t->input_len = s->f[input].len;
	t->input_dtype = want;
	t->nfeatures = s->n;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Workers                                                              */

static void core_batch(const pf_trainer *t, const pf_core_batch *cb,
		       pf_model_batch *mb)
{
	memset(mb, 0, sizeof(*mb));
	mb->rows = t->per_core_batch;
	mb->labels = cb->tensors[t->label].data;
	if (t->kind == PF_MODEL_EMBAG)
		mb->tokens = cb->tensors[t->input].data;
	else
		mb->x = cb->tensors[t->input].data;
}

static void run_core(pf_trainer *t, core *c, job j)
{
	const pf_batch *b = (const pf_batch *)t->batch;
	pf_model_batch mb;

	core_batch(t, &b->core[c->index], &mb);
	pf_error_clear(&c->err);
	c->loss = 0.0;
	c->correct = 0;
	if (j == JOB_GRAD)
		c->ret = pf_model_grad(t->model, c->ws, &mb, c->g, &c->loss, &c->err);
	else
		c->ret = pf_model_evaluate(t->model, c->ws, &mb, &c->loss, &c->correct,
					   &c->err);
}

static void *worker_main(void *arg)
{
	core *c = arg;
	pf_trainer *t = c->t;
	uint64_t seen = 0;

	for (;;) {
		job j;

		pthread_mutex_lock(&t->lock);
		while (t->generation == seen)
			pthread_cond_wait(&t->go, &t->lock);
		seen = t->generation;
		j = t->job;
		pthread_mutex_unlock(&t->lock);
		if (j == JOB_STOP)
			break;
		run_core(t, c, j);
		pthread_mutex_lock(&t->lock);
		if (--t->pending == 0)
			pthread_cond_signal(&t->finished);
		pthread_mutex_unlock(&t->lock);
	}
	return NULL;
}

/* Post a job to the started workers and run core 0 here; returns when
 * every core is done.  The lock orders each worker's writes to its core
 * before the caller's reads. */
static void run_job(pf_trainer *t, job j, const struct pf_batch *b)
{
	uint32_t workers = 0;

	for (uint32_t i = 1; i < t->cores; i++)
		workers += t->core[i].started;
	if (workers) {
		pthread_mutex_lock(&t->lock);
		t->job = j;
		t->batch = b;
		t->pending = workers;
		t->generation++;
		pthread_cond_broadcast(&t->go);
		pthread_mutex_unlock(&t->lock);
	} else {
		t->batch = b;
	}
	/* Workers leave on STOP without counting themselves done. */
	if (j == JOB_STOP)
		return;
	run_core(t, &t->core[0], j);
	if (workers) {
		pthread_mutex_lock(&t->lock);
		while (t->pending)
			pthread_cond_wait(&t->finished, &t->lock);
		pthread_mutex_unlock(&t->lock);
	}
}

/* ------------------------------------------------------------------ */
/* Create and free                                                      */

int pf_trainer_create(pf_trainer **out, const pf_trainer_config *cfg,
		      pf_error *err)
{
	pf_trainer *t;
	pf_model_config mc;
	int ret;

	pf_error_clear(err);
	*out = NULL;
	if (cfg->cores < 1 || cfg->cores > PF_TRAINER_MAX_CORES)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "trainer: %u cores is not in [1, %u]", cfg->cores,
				    PF_TRAINER_MAX_CORES);
	if (cfg->per_core_batch < 1 || cfg->per_core_batch > PF_MODEL_MAX_ROWS)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "trainer: per-core batch %u is not in [1, %u]",
				    cfg->per_core_batch, PF_MODEL_MAX_ROWS);
	t = pf_calloc(1, sizeof(*t));
	if (!t)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "trainer: out of memory");
	t->kind = cfg->model.kind;
	if (t->kind != PF_MODEL_SOFTMAX && t->kind != PF_MODEL_EMBAG) {
		pf_free(t);
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "trainer: unknown model kind %d", (int)cfg->model.kind);
	}
	if ((ret = map_features(t, cfg, err)) < 0) {
		pf_free(t);
		return ret;
	}
	t->cores = cfg->cores;
	t->per_core_batch = cfg->per_core_batch;
	t->pod = cfg->pod;
	t->hosts = cfg->pod ? pf_pod_size(cfg->pod) : 1;

	mc = cfg->model;
	mc.max_rows = cfg->per_core_batch;
	if (t->kind == PF_MODEL_SOFTMAX) {
		mc.dim = t->input_len;
	} else {
		mc.seq_len = t->input_len;
		mc.pad_id = (int32_t)cfg->spec->f[t->input].pad;
	}
	ret = pf_model_create(&t->model, &mc, err);
	if (ret < 0) {
		pf_free(t);
		return ret;
	}

	t->core = pf_calloc(t->cores, sizeof(*t->core));
	t->grads = pf_calloc(t->cores, sizeof(*t->grads));
	if (!t->core || !t->grads)
		goto nomem;
	for (uint32_t i = 0; i < t->cores; i++) {
		core *c = &t->core[i];

		c->t = t;
		c->index = i;
		if (pf_workspace_create(t->model, &c->ws) < 0 ||
		    pf_grad_create(t->model, 1, &c->g) < 0)
			goto nomem;
		t->grads[i] = c->g;
	}
	/* Room for the union of every core's rows on every host: the pod's
	 * spread needs it. */
	if (pf_grad_create(t->model, t->cores * t->hosts, &t->avg) < 0)
		goto nomem;
	t->mask_words = pf_grad_mask_words(t->avg);
	if (t->mask_words) {
		t->mask = pf_calloc(t->mask_words, sizeof(*t->mask));
		if (!t->mask)
			goto nomem;
	}

	if (pthread_mutex_init(&t->lock, NULL))
		goto nomem;
	if (pthread_cond_init(&t->go, NULL)) {
		pthread_mutex_destroy(&t->lock);
		goto nomem;
	}
	if (pthread_cond_init(&t->finished, NULL)) {
		pthread_cond_destroy(&t->go);
		pthread_mutex_destroy(&t->lock);
		goto nomem;
	}
	t->sync_ready = true;
	for (uint32_t i = 1; i < t->cores; i++) {
		if (pthread_create(&t->core[i].thread, NULL, worker_main, &t->core[i])) {
			pf_trainer_free(t);
			return pf_error_set(err, -EAGAIN, PF_OFFSET_NONE, 0,
					    "trainer: cannot start the worker of core %u",
					    i);
		}
		t->core[i].started = true;
	}
	*out = t;
	return 0;
nomem:
	pf_trainer_free(t);
	return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
			    "trainer: out of memory for %u cores' workspaces", cfg->cores);
}

void pf_trainer_free(pf_trainer *t)
{
	if (!t)
		return;
	if (t->sync_ready) {
		run_job(t, JOB_STOP, NULL);
		for (uint32_t i = 1; i < t->cores; i++)
			if (t->core[i].started)
				pthread_join(t->core[i].thread, NULL);
		pthread_cond_destroy(&t->finished);
		pthread_cond_destroy(&t->go);
		pthread_mutex_destroy(&t->lock);
	}
	for (uint32_t i = 0; t->core && i < t->cores; i++) {
		pf_workspace_free(t->core[i].ws);
		pf_grad_free(t->core[i].g);
	}
	pf_free(t->core);
	pf_free(t->grads);
	pf_free(t->mask);
	pf_grad_free(t->avg);
	pf_model_free(t->model);
	pf_free(t);
}

pf_model *pf_trainer_model(pf_trainer *t)
{
	return t->model;
}

void pf_trainer_features(const pf_trainer *t, uint32_t *input, uint32_t *label)
{
	*input = t->input;
	*label = t->label;
}

uint64_t pf_trainer_steps(const pf_trainer *t)
{
	return t->steps;
}

/* ------------------------------------------------------------------ */
/* Steps                                                                */

/* The batch has the shape the trainer was made for (the loader's, with
 * this spec).  @return 0 or -EINVAL naming what differs. */
static int check_batch(const pf_trainer *t, const pf_batch *b, pf_error *err)
{
	if (!b || !b->core)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "trainer: no batch");
	if (b->cores != t->cores || b->per_core_batch != t->per_core_batch)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "trainer: batch of %u cores x %u rows; the trainer "
				    "has %u cores x %u rows", b->cores,
				    b->per_core_batch, t->cores, t->per_core_batch);
	for (uint32_t c = 0; c < t->cores; c++) {
		const pf_core_batch *cb = &b->core[c];
		const pf_tensor *in, *lb;

		if (cb->ntensors != t->nfeatures || !cb->tensors)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "trainer: core %u's block has %u tensors; "
					    "the spec has %u", c, cb->ntensors,
					    t->nfeatures);
		in = &cb->tensors[t->input];
		lb = &cb->tensors[t->label];
		if (in->dtype != t->input_dtype || in->len != t->input_len || !in->data ||
		    lb->dtype != PF_DTYPE_INT32 || lb->len != 1 || !lb->data)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "trainer: core %u's tensors are not the "
					    "spec's (%s[%u], label %s[%u])", c,
					    dtype_name(in->dtype), in->len,
					    dtype_name(lb->dtype), lb->len);
	}
	return 0;
}

/* The first failing core's error, prefixed with the core. */
static int core_failure(pf_trainer *t, pf_error *err)
{
	for (uint32_t c = 0; c < t->cores; c++) {
		const core *k = &t->core[c];

		if (k->ret < 0) {
			if (err) {
				*err = k->err;
				pf_error_set(err, k->ret, k->err.offset_kind, k->err.offset,
					     "core %u: %s", c, k->err.msg);
			}
			return k->ret;
		}
	}
	return 0;
}

/* Sum the host's gradient over the pod and scale it to the pod's mean. */
static int pod_reduce(pf_trainer *t, pf_error *err)
{
	size_t n;
	float *dense = pf_grad_dense(t->avg, &n);
	int ret;

	if (t->kind == PF_MODEL_EMBAG) {
		const uint32_t *ids;
		float *rows;
		uint32_t dim, count;

		/* Every host must lay its rows out alike before the sum. */
		memset(t->mask, 0, t->mask_words * sizeof(*t->mask));
		pf_grad_mark_rows(t->avg, t->mask);
		if ((ret = pf_pod_or_u64(t->pod, t->mask, t->mask_words, err)) < 0)
			return ret;
		ret = pf_grad_spread_rows(t->avg, t->mask);
		if (ret < 0)
			return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
					    "trainer: cannot spread the embedding rows "
					    "over the pod's: %s", pf_strerror(ret));
		count = pf_grad_rows(t->avg, &ids, &rows, &dim);
		if ((ret = pf_pod_sum_f32(t->pod, rows, (size_t)count * dim, err)) < 0)
			return ret;
	}
	if ((ret = pf_pod_sum_f32(t->pod, dense, n, err)) < 0)
		return ret;
	pf_grad_scale(t->avg, 1.0f / (float)t->hosts);
	return 0;
}

int pf_trainer_step(pf_trainer *t, const struct pf_batch *b, float lr,
		    pf_train_step *out, pf_error *err)
{
	uint64_t t0 = pf_now_ns(), reduce = 0;
	double loss = 0.0;
	int ret;

	pf_error_clear(err);
	ret = check_batch(t, (const pf_batch *)b, err);
	if (ret == 0) {
		run_job(t, JOB_GRAD, b);
		ret = core_failure(t, err);
	}
	if (ret == 0) {
		/* The host's mean over its cores, in core order. */
		for (uint32_t c = 0; c < t->cores; c++)
			loss += t->core[c].loss;
		loss /= t->cores;
	}
	if (t->hosts > 1) {
		/* One small sum first: whether any host failed, whether all
		 * are at the same step, and the loss.  Then every host takes
		 * the same branch, and none is left in an all-reduce. */
		double agree[3] = { ret == 0 ? loss : 0.0, ret < 0 ? 1.0 : 0.0,
				    (double)t->steps };
		uint64_t r0 = pf_now_ns();
		pf_error perr;

		pf_error_clear(&perr);
		if (pf_pod_sum_f64(t->pod, agree, 3, &perr) < 0) {
			if (err)
				*err = perr;
			return -EIO;
		}
		reduce += pf_now_ns() - r0;
		if (ret < 0)
			return ret;
		if (agree[1] > 0)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "trainer: step %llu failed on %.0f other "
					    "host(s) (their error is in their log)",
					    (unsigned long long)t->steps, agree[1]);
		if (agree[2] != (double)t->steps * t->hosts)
			return pf_error_set(err, -EPROTO, PF_OFFSET_NONE, 0,
					    "trainer: the hosts are at different steps "
					    "(this one at %llu, the mean %.2f)",
					    (unsigned long long)t->steps,
					    agree[2] / t->hosts);
		loss = agree[0] / t->hosts;
	}
	if (ret < 0)
		return ret;
	ret = pf_grad_average(t->avg, t->grads, t->cores);
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				    "trainer: cannot average the cores' gradients: %s",
				    pf_strerror(ret));
	if (t->hosts > 1) {
		uint64_t r0 = pf_now_ns();

		if ((ret = pod_reduce(t, err)) < 0)
			return ret;
		reduce += pf_now_ns() - r0;
	}
	ret = pf_model_apply(t->model, t->avg, lr);
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				    "trainer: the update failed: %s", pf_strerror(ret));
	t->steps++;
	if (out) {
		out->loss = loss;
		out->compute_ns = pf_now_ns() - t0;
		out->reduce_ns = reduce;
	}
	return 0;
}

int pf_trainer_evaluate(pf_trainer *t, const struct pf_batch *b,
			pf_eval_sums *sums, pf_error *err)
{
	int ret;

	pf_error_clear(err);
	ret = check_batch(t, (const pf_batch *)b, err);
	if (ret < 0)
		return ret;
	run_job(t, JOB_EVAL, b);
	if ((ret = core_failure(t, err)) < 0)
		return ret;
	for (uint32_t c = 0; c < t->cores; c++) {
		sums->loss_sum += t->core[c].loss * t->per_core_batch;
		sums->correct += t->core[c].correct;
		sums->rows += t->per_core_batch;
	}
	return 0;
}

int pf_trainer_eval_reduce(pf_trainer *t, pf_eval_sums *sums, pf_error *err)
{
	/* Counts travel as doubles: exact below 2^53 rows. */
	double v[3] = { sums->loss_sum, (double)sums->correct, (double)sums->rows };
	int ret;

	pf_error_clear(err);
	if (t->hosts < 2)
		return 0;
	if ((ret = pf_pod_sum_f64(t->pod, v, 3, err)) < 0)
		return ret;
	sums->loss_sum = v[0];
	sums->correct = (uint64_t)v[1];
	sums->rows = (uint64_t)v[2];
	return 0;
}

/* ------------------------------------------------------------------ */

uint64_t pf_model_hash(pf_model *m)
{
	uint64_t h = PF_FNV64_OFFSET;
	size_t n;
	uint32_t rows, dim;
	const float *dense = pf_model_dense(m, &n);
	const float *table = pf_model_embedding(m, &rows, &dim);

	h = pf_fnv1a64(h, dense, n * sizeof(float));
	if (table)
		h = pf_fnv1a64(h, table, (size_t)rows * dim * sizeof(float));
	return h;
}
