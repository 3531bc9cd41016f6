/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's compute stage and pod report: the trainer (host/train.c)
 * on the loader's batches, each step's input wait and compute timed, the
 * learning rate from the scaling plan, held-out evaluation, the train and
 * pod sections of the report.  loadbench.c calls in at a few places
 * (options, the consume loop, the report); see train.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common_internal.h"
#include "train.h"

/* A step is input-bound when it waited more than this share of its time. */
#define INPUT_BOUND_SHARE 0.05
/* First and last steps averaged for the loss at either end. */
#define LOSS_WINDOW 10u
#define DEFAULT_LR 0.1
#define DEFAULT_EMBED_DIM 32u
#define NAME_LEN 64

typedef struct curve_point {
	uint64_t step;		/* steps done */
	double loss;		/* mean training loss since the last point */
	double lr;		/* rate of the last step */
} curve_point;

typedef struct eval_point {
	uint64_t step;
	double loss, accuracy;
	uint64_t rows, dropped;
} eval_point;

/* What each host sends rank 0 for the pod report (same binary on every
 * host, so the layout agrees). */
typedef struct host_stats {
	char name[NAME_LEN];
	uint64_t steps, records, bytes_read, params_hash;
	uint64_t count_files, count_decompressed;	/* stream files it counted */
	double seconds, wait_fraction, compute_ms_p50, loss;
	double first_batch_s, open_s;	/* the first batch; opening the dataset */
	uint32_t index, model;
} host_stats;

struct train_ctx {
	train_options o;
	pf_loader_config cfg;		/* the training loader's */
	pf_pod *pod;
	bool mpi;
	uint32_t rank, hosts;
	pf_trainer *tr;
	pf_scaling_plan plan;
	uint64_t global_batch;

	/* Per step, grown as needed. */
	uint64_t *wait_ns, *compute_ns, *reduce_ns;
	double *loss;
	double *lr;
	size_t nsteps, cap;
	uint64_t pending_wait;		/* of the batch in hand */

	curve_point *curve;
	size_t ncurve, curve_cap;
	eval_point *evals;
	size_t nevals, evals_cap;
	bool has_final_eval;
	eval_point final_eval;

	/* Derived at the end. */
	double step_p50, step_p90, step_p99, compute_p50, wait_p50, reduce_p50;
	double wait_fraction, bound_fraction, first_wait_ms, gflops;
	uint64_t bound_steps, timed_steps;
	double loss_first, loss_last;
	uint64_t params_hash;

	/* The pod (rank 0 only). */
	host_stats *all;
	host_stats mine;
	bool steps_unequal;
};

/*
 * Sanitizer builds: Open MPI keeps what MPI_Init allocates until exit, and
 * its plugins' frames only resolve with the slow unwinder; these hooks
 * (read by ASan/LSan at start-up, overridden by ASAN_OPTIONS and
 * LSAN_OPTIONS) keep its allocations out of the leak report, ours in.
 */
#if defined(__SANITIZE_ADDRESS__)
const char *__asan_default_options(void);
const char *__lsan_default_suppressions(void);

__attribute__((visibility("default"))) const char *__asan_default_options(void)
{
	return "fast_unwind_on_malloc=0";
}

__attribute__((visibility("default"))) const char *__lsan_default_suppressions(void)
{
	return "leak:libmpi.so\nleak:libopen-pal.so\nleak:libopen-rte.so\n"
	       "leak:libpmix.so\nleak:libhwloc.so\nleak:libevent\nleak:mca_\n";
}
#endif

/* ------------------------------------------------------------------ */
/* Options                                                              */

static int parse_rate(const char *flag, const char *text, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(text, &end);
	if (!*text || *end || text[0] == ' ' || errno == ERANGE || !isfinite(v) ||
	    !(v > 0)) {
		cli_fail("%s: '%s' is not a finite number above 0", flag, text);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int train_parse_option(train_options *t, int opt, const char *arg)
{
	switch (opt) {
	case TRAIN_OPT_MODEL:
		if (!strcmp(arg, "none")) {
			t->on = false;
			return 0;
		}
		if (pf_model_kind_parse(arg, &t->kind) < 0) {
			cli_fail("--model: '%s' is not softmax, embag or none", arg);
			return -EINVAL;
		}
		t->on = true;
		return 0;
	case TRAIN_OPT_CLASSES:
		return cli_parse_u64("--classes", arg, 2, PF_MODEL_MAX_CLASSES, false,
				     &t->classes);
	case TRAIN_OPT_VOCAB:
		return cli_parse_u64("--vocab", arg, 1, PF_MODEL_MAX_VOCAB, true, &t->vocab);
	case TRAIN_OPT_EMBED_DIM:
		return cli_parse_u64("--embed-dim", arg, 1, PF_MODEL_MAX_DIM, false,
				     &t->embed_dim);
	case TRAIN_OPT_EMBED_LR_SCALE:
		return parse_rate("--embed-lr-scale", arg, &t->embed_lr_scale);
	case TRAIN_OPT_INPUT:
		t->input = arg;
		return 0;
	case TRAIN_OPT_LABEL:
		t->label = arg;
		return 0;
	case TRAIN_OPT_LR:
		t->lr_given = true;
		return parse_rate("--lr", arg, &t->lr);
	case TRAIN_OPT_LR_RULE:
		if (pf_lr_rule_parse(arg, &t->rule) < 0) {
			cli_fail("--lr-rule: '%s' is not none, linear or sqrt", arg);
			return -EINVAL;
		}
		return 0;
	case TRAIN_OPT_REF_BATCH:
		return cli_parse_u64("--ref-global-batch", arg, 1, UINT64_MAX, true,
				     &t->ref_batch);
	case TRAIN_OPT_WARMUP:
		return cli_parse_u64("--warmup-steps", arg, 0, UINT64_MAX, true, &t->warmup);
	case TRAIN_OPT_EVAL:
		if (t->neval == sizeof(t->eval) / sizeof(t->eval[0])) {
			cli_fail("--eval: at most %zu paths (give a directory or a glob)",
				 sizeof(t->eval) / sizeof(t->eval[0]));
			return -EINVAL;
		}
		t->eval[t->neval++] = arg;
		return 0;
	case TRAIN_OPT_EVAL_EVERY:
		return cli_parse_u64("--eval-every", arg, 1, UINT64_MAX, true,
				     &t->eval_every);
	case TRAIN_OPT_LOG_EVERY:
		return cli_parse_u64("--log-every", arg, 1, UINT64_MAX, true,
				     &t->log_every);
	}
	cli_fail("unknown training option %d", opt);
	return -EINVAL;
}

int train_fit_features(const train_options *t, char **spec)
{
	const char *s = *spec;
	size_t cap = strlen(s) * 2 + 64, len = 0;
	char *out;
	bool padded = false;

	if (!t->on)
		return 0;
	out = malloc(cap);
	if (!out)
		return -ENOMEM;
	/* The inferred spec is "name:dtype[len]" items joined by commas. */
	while (*s) {
		const char *end = strchr(s, ',');
		size_t n = end ? (size_t)(end - s) : strlen(s);
		const char *colon = memchr(s, ':', n);
		size_t name_len = colon ? (size_t)(colon - s) : n;
		bool is_label = name_len == strlen(t->label ? t->label : "label") &&
				!memcmp(s, t->label ? t->label : "label", name_len);
		bool int64 = colon && (size_t)(colon - s) + 6 <= n &&
			     !memcmp(colon + 1, "int64", 5);

		if (len)
			out[len++] = ',';
		if (int64) {
			memcpy(out + len, s, name_len);
			len += name_len;
			memcpy(out + len, ":int32", 6);
			len += 6;
			memcpy(out + len, colon + 6, n - name_len - 6);
			len += n - name_len - 6;
			/* embag: ids start at 0, so padding must be another value */
			if (t->kind == PF_MODEL_EMBAG && !is_label && !padded &&
			    (!t->input || (strlen(t->input) == name_len &&
					   !memcmp(s, t->input, name_len)))) {
				memcpy(out + len, ":pad=-1", 7);
				len += 7;
				padded = true;
			}
		} else {
			memcpy(out + len, s, n);
			len += n;
		}
		s += n + (end ? 1 : 0);
	}
	out[len] = '\0';
	free(*spec);
	*spec = out;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Start                                                                */

static int open_pod(train_ctx *tc, const pf_loader_config *cfg)
{
	pf_error err;
	int ret;

	pf_error_clear(&err);
	ret = pf_pod_open(&tc->pod, &err);
	if (ret == -ENOTSUP && !tc->o.on) {
		/* Only consuming, each process can still read its share
		 * alone, as the topology says; training cannot. */
		cli_fail("pod: %s; each process runs its share alone, with no pod "
			 "report", err.msg);
		tc->pod = NULL;
		return 0;
	}
	if (ret < 0) {
		cli_fail("pod: %s", err.msg);
		return 1;
	}
	tc->mpi = !strcmp(pf_pod_transport(tc->pod), "mpi");
	tc->rank = pf_pod_rank(tc->pod);
	tc->hosts = pf_pod_size(tc->pod);
	/* The loader's topology came from the same launcher's variables;
	 * a disagreement would feed two hosts the same share.  A world of
	 * one (MPI's singleton start, when the variables were set by hand)
	 * is a lone host running the share the topology names. */
	if (tc->mpi && tc->hosts > 1 &&
	    (tc->rank != cfg->host_index || tc->hosts != cfg->num_hosts)) {
		cli_fail("pod: MPI says rank %u of %u, but the topology is host %u of %u "
			 "(--host-index and --num-hosts must not contradict mpirun)",
			 tc->rank, tc->hosts, cfg->host_index, cfg->num_hosts);
		return 2;
	}
	return 0;
}

static int make_plan(train_ctx *tc)
{
	pf_scaling_input in = {
		.per_core_batch = tc->cfg.per_core_batch,
		.cores = tc->cfg.cores_per_host,
		.hosts = tc->cfg.num_hosts ? tc->cfg.num_hosts : 1,
		.ref_global_batch = tc->o.ref_batch,
		.ref_lr = tc->o.lr,
		.ref_warmup_steps = tc->o.warmup,
		.rule = tc->o.rule,
	};
	pf_error err;

	pf_error_clear(&err);
	if (pf_scaling_plan_compute(&tc->plan, &in, &err) < 0) {
		cli_fail("learning rate: %s", err.msg);
		return 2;
	}
	tc->global_batch = tc->plan.global_batch;
	return 0;
}

static int make_trainer(train_ctx *tc, const pf_spec *spec)
{
	pf_trainer_config tcfg = {
		.model = {
			.kind = tc->o.kind,
			.classes = (uint32_t)tc->o.classes,
			.vocab = (uint32_t)tc->o.vocab,
			.embed_dim = (uint32_t)(tc->o.embed_dim ? tc->o.embed_dim
							       : DEFAULT_EMBED_DIM),
			.embed_lr_scale = (float)tc->o.embed_lr_scale,
			.seed = tc->cfg.seed,
		},
		.spec = spec,
		.input = tc->o.input,
		.label = tc->o.label,
		.cores = tc->cfg.cores_per_host ? tc->cfg.cores_per_host : 1,
		.per_core_batch = tc->cfg.per_core_batch,
		.pod = tc->pod,
	};
	pf_error err;

	if (!tc->o.classes) {
		cli_fail("--model %s needs --classes (the labels' count)",
			 pf_model_kind_name(tc->o.kind));
		return 2;
	}
	if (tc->o.kind == PF_MODEL_EMBAG && !tc->o.vocab) {
		cli_fail("--model embag needs --vocab (token ids lie in [0, V))");
		return 2;
	}
	pf_error_clear(&err);
	if (pf_trainer_create(&tc->tr, &tcfg, &err) < 0) {
		cli_fail("%s", err.msg);
		return err.code == -EINVAL ? 2 : 1;
	}
	return 0;
}

int train_start(train_ctx **out, const train_options *t,
		pf_loader_config *cfg, const pf_spec *spec, uint64_t repeat)
{
	train_ctx *tc = calloc(1, sizeof(*tc));
	int ret;

	*out = NULL;
	if (!tc) {
		cli_fail("out of memory");
		return 1;
	}
	*out = tc;
	tc->o = *t;
	tc->cfg = *cfg;
	if (!tc->o.lr_given)
		tc->o.lr = DEFAULT_LR;
	tc->hosts = 1;
	if (!t->on && (t->neval || t->eval_every || t->log_every)) {
		cli_fail("--eval, --eval-every and --log-every need --model softmax or embag");
		return 2;
	}
	if (t->on && repeat > 1) {
		cli_fail("--repeat: a model trains once; run loadbench again for "
			 "another sample");
		return 2;
	}
	if (t->eval_every && !t->neval) {
		cli_fail("--eval-every needs --eval PATH");
		return 2;
	}
	if ((ret = open_pod(tc, cfg)) != 0)
		return ret;
	if (tc->mpi && tc->hosts > 1) {
		cfg->allgather = pf_pod_allgather;
		cfg->allgather_ctx = tc->pod;
	}
	tc->cfg = *cfg;
	if (!t->on)
		return 0;
	if ((ret = make_plan(tc)) != 0 || (ret = make_trainer(tc, spec)) != 0)
		return ret;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Steps                                                                */

static int grow(train_ctx *tc)
{
	size_t cap = tc->cap ? tc->cap * 2 : 1024;
	uint64_t *w = realloc(tc->wait_ns, cap * sizeof(*w));

	if (w)
		tc->wait_ns = w;
	uint64_t *c = realloc(tc->compute_ns, cap * sizeof(*c));
	if (c)
		tc->compute_ns = c;
	uint64_t *r = realloc(tc->reduce_ns, cap * sizeof(*r));
	if (r)
		tc->reduce_ns = r;
	double *l = realloc(tc->loss, cap * sizeof(*l));
	if (l)
		tc->loss = l;
	double *lr = realloc(tc->lr, cap * sizeof(*lr));
	if (lr)
		tc->lr = lr;
	if (!w || !c || !r || !l || !lr)
		return -ENOMEM;
	tc->cap = cap;
	return 0;
}

int train_next(train_ctx *tc, pf_loader *l, pf_batch **b)
{
	uint64_t t0 = pf_now_ns();
	int ret = pf_loader_next(l, b);

	if (tc)
		tc->pending_wait = pf_now_ns() - t0;
	return ret;
}

static void *push(void *arr, size_t *n, size_t *cap, size_t size)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		void *g = realloc(*(void **)arr, c * size);

		if (!g)
			return NULL;
		*(void **)arr = g;
		*cap = c;
	}
	return (char *)*(void **)arr + (*n)++ * size;
}

static int evaluate(train_ctx *tc, eval_point *out);

static void log_point(train_ctx *tc)
{
	uint64_t from = tc->ncurve ? tc->curve[tc->ncurve - 1].step : 0;
	curve_point *p;
	double sum = 0;

	for (uint64_t i = from; i < tc->nsteps; i++)
		sum += tc->loss[i];
	p = push(&tc->curve, &tc->ncurve, &tc->curve_cap, sizeof(*p));
	if (!p)
		return;
	p->step = tc->nsteps;
	p->loss = sum / (double)(tc->nsteps - from);
	p->lr = tc->lr[tc->nsteps - 1];
	if (tc->rank == 0)
		fprintf(stderr, "%s: step %llu: training loss %.4f (mean of %llu steps), "
			"lr %.6g\n", cli_prog, (unsigned long long)p->step, p->loss,
			(unsigned long long)(tc->nsteps - from), p->lr);
}

int train_batch(train_ctx *tc, pf_batch *b)
{
	pf_train_step st;
	pf_error err;
	double lr;

	if (!tc || !tc->tr)
		return 0;
	if (tc->nsteps == tc->cap && grow(tc) < 0) {
		cli_fail("out of memory for the step times");
		return -1;
	}
	lr = pf_scaling_lr_at(&tc->plan, tc->nsteps);
	pf_error_clear(&err);
	if (pf_trainer_step(tc->tr, b, (float)lr, &st, &err) < 0) {
		cli_fail("step %llu: %s", (unsigned long long)tc->nsteps, err.msg);
		return -1;
	}
	tc->wait_ns[tc->nsteps] = tc->pending_wait;
	tc->compute_ns[tc->nsteps] = st.compute_ns;
	tc->reduce_ns[tc->nsteps] = st.reduce_ns;
	tc->loss[tc->nsteps] = st.loss;
	tc->lr[tc->nsteps] = lr;
	tc->nsteps++;
	if (tc->o.log_every && tc->nsteps % tc->o.log_every == 0)
		log_point(tc);
	if (tc->o.eval_every && tc->nsteps % tc->o.eval_every == 0) {
		eval_point *e = push(&tc->evals, &tc->nevals, &tc->evals_cap, sizeof(*e));

		if (!e || evaluate(tc, e) < 0)
			return -1;
		if (tc->rank == 0)
			fprintf(stderr, "%s: step %llu: held-out loss %.4f, accuracy %.4f "
				"(%llu records)\n", cli_prog, (unsigned long long)e->step,
				e->loss, e->accuracy, (unsigned long long)e->rows);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Held-out evaluation: the same topology and spec over other files      */

static int evaluate(train_ctx *tc, eval_point *out)
{
	pf_loader_config e = tc->cfg;
	pf_loader *l = NULL;
	pf_loader_metrics m;
	pf_eval_sums sums = { 0 };
	pf_batch *b;
	pf_error err;
	int ret;

	e.paths = tc->o.eval;
	e.npaths = tc->o.neval;
	e.shuffle = false;
	e.epochs = 1;
	e.max_steps = 0;
	e.remainder = PF_REMAINDER_DROP;
	e.keep_pools = true;	/* an evaluation loader every --eval-every steps */
	pf_error_clear(&err);
	if (pf_loader_create(&l, &e, &err) < 0) {
		cli_print_error(&err);
		return -1;
	}
	if (!pf_loader_steps_per_epoch(l)) {
		pf_loader_get_metrics(l, &m);
		cli_fail("--eval: the held-out data holds %llu records, not one global "
			 "batch of %llu", (unsigned long long)m.records_per_epoch,
			 (unsigned long long)tc->global_batch);
		pf_loader_free(l);
		return -1;
	}
	while ((ret = pf_loader_next(l, &b)) == 1) {
		ret = pf_trainer_evaluate(tc->tr, b, &sums, &err);
		pf_loader_release(l, b);
		if (ret < 0) {
			cli_fail("--eval: %s", err.msg);
			pf_loader_free(l);
			return -1;
		}
	}
	if (ret < 0) {
		const pf_error *le = pf_loader_last_error(l);

		if (le)
			cli_print_error(le);
		else
			cli_fail("--eval: the loader failed: %s", pf_strerror(ret));
		pf_loader_free(l);
		return -1;
	}
	pf_loader_get_metrics(l, &m);
	pf_loader_free(l);
	if (pf_trainer_eval_reduce(tc->tr, &sums, &err) < 0) {
		cli_fail("--eval: %s", err.msg);
		return -1;
	}
	out->step = tc->nsteps;
	out->rows = sums.rows;
	out->loss = sums.rows ? sums.loss_sum / (double)sums.rows : 0;
	out->accuracy = sums.rows ? (double)sums.correct / (double)sums.rows : 0;
	out->dropped = m.remainder_dropped;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The end: figures, the pod's gather                                   */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of n sorted values, in ms. */
static double pct_ms(const uint64_t *sorted, size_t n, double q)
{
	size_t k;

	if (!n)
		return 0;
	k = (size_t)ceil(q * (double)n);
	k = k ? k - 1 : 0;
	return (double)sorted[k < n ? k : n - 1] * 1e-6;
}

static double mean_loss(const double *v, size_t from, size_t to)
{
	double s = 0;

	for (size_t i = from; i < to; i++)
		s += v[i];
	return to > from ? s / (double)(to - from) : 0;
}

/* Step figures; the first step (pipeline fill) is left out. */
static int derive(train_ctx *tc)
{
	size_t n = tc->nsteps > 1 ? tc->nsteps - 1 : 0;
	uint64_t *step = malloc((n ? n : 1) * sizeof(*step));
	uint64_t *comp = malloc((n ? n : 1) * sizeof(*comp));
	uint64_t *wait = malloc((n ? n : 1) * sizeof(*wait));
	uint64_t *red = malloc((n ? n : 1) * sizeof(*red));
	double wsum = 0, ssum = 0, csum = 0;
	size_t w = tc->nsteps < LOSS_WINDOW ? tc->nsteps : LOSS_WINDOW;

	if (!step || !comp || !wait || !red) {
		free(step), free(comp), free(wait), free(red);
		cli_fail("out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t wt = tc->wait_ns[i + 1], ct = tc->compute_ns[i + 1];

		wait[i] = wt;
		comp[i] = ct;
		red[i] = tc->reduce_ns[i + 1];
		step[i] = wt + ct;
		wsum += (double)wt;
		ssum += (double)(wt + ct);
		if ((double)wt > INPUT_BOUND_SHARE * (double)(wt + ct))
			tc->bound_steps++;
	}
	for (size_t i = 0; i < tc->nsteps; i++)
		csum += (double)tc->compute_ns[i];
	qsort(step, n, sizeof(*step), cmp_u64);
	qsort(comp, n, sizeof(*comp), cmp_u64);
	qsort(wait, n, sizeof(*wait), cmp_u64);
	qsort(red, n, sizeof(*red), cmp_u64);
	tc->timed_steps = n;
	tc->step_p50 = pct_ms(step, n, 0.50);
	tc->step_p90 = pct_ms(step, n, 0.90);
	tc->step_p99 = pct_ms(step, n, 0.99);
	tc->compute_p50 = pct_ms(comp, n, 0.50);
	tc->wait_p50 = pct_ms(wait, n, 0.50);
	tc->reduce_p50 = pct_ms(red, n, 0.50);
	tc->wait_fraction = ssum > 0 ? wsum / ssum : 0;
	tc->bound_fraction = n ? (double)tc->bound_steps / (double)n : 0;
	tc->first_wait_ms = tc->nsteps ? (double)tc->wait_ns[0] * 1e-6 : 0;
	tc->loss_first = mean_loss(tc->loss, 0, w);
	tc->loss_last = mean_loss(tc->loss, tc->nsteps - w, tc->nsteps);
	/* The kernels' rate over compute time (all-reduce included). */
	if (csum > 0)
		tc->gflops = pf_model_step_flops(pf_trainer_model(tc->tr),
						 tc->cfg.per_core_batch) *
			     (double)tc->cfg.cores_per_host * (double)tc->nsteps /
			     csum;
	tc->params_hash = pf_model_hash(pf_trainer_model(tc->tr));
	free(step), free(comp), free(wait), free(red);
	return 0;
}

static int gather(train_ctx *tc, const pf_loader_metrics *m, double seconds)
{
	host_stats *s = &tc->mine;
	pf_error err;

	memset(s, 0, sizeof(*s));
	if (gethostname(s->name, sizeof(s->name) - 1) < 0)
		snprintf(s->name, sizeof(s->name), "?");
	s->index = tc->cfg.host_index;
	s->steps = m->steps;
	s->records = m->records;
	s->bytes_read = m->bytes_read;
	s->seconds = seconds;
	s->first_batch_s = (double)m->first_batch_ns * 1e-9;
	s->open_s = (double)(m->open_manifest_ns + m->open_index_ns + m->open_count_ns +
			     m->open_exchange_ns) * 1e-9;
	s->count_files = m->open_count_files;
	s->count_decompressed = m->open_count_decompressed;
	if (tc->tr) {
		s->model = 1;
		s->params_hash = tc->params_hash;
		s->wait_fraction = tc->wait_fraction;
		s->compute_ms_p50 = tc->compute_p50;
		s->loss = tc->nsteps ? tc->loss[tc->nsteps - 1] : 0;
	}
	if (!tc->mpi)
		return 0;
	if (tc->rank == 0) {
		tc->all = calloc(tc->hosts, sizeof(*tc->all));
		if (!tc->all) {
			cli_fail("out of memory for the pod report");
			return 1;
		}
	}
	pf_error_clear(&err);
	if (pf_pod_gather(tc->pod, s, sizeof(*s), tc->all, &err) < 0) {
		cli_fail("pod: %s", err.msg);
		return 1;
	}
	for (uint32_t i = 1; tc->all && i < tc->hosts; i++)
		tc->steps_unequal |= tc->all[i].steps != tc->all[0].steps;
	if (tc->steps_unequal) {
		cli_fail("pod: THE HOSTS TOOK DIFFERENT NUMBERS OF STEPS (see the pod "
			 "report); every host must take the same steps");
	}
	return 0;
}

int train_finish(train_ctx *tc, const pf_loader_metrics *m, double seconds)
{
	if (!tc)
		return 0;
	if (tc->tr) {
		if (tc->o.log_every && tc->nsteps % tc->o.log_every)
			log_point(tc);
		if (derive(tc) < 0)
			return 1;
		if (tc->o.neval) {
			if (evaluate(tc, &tc->final_eval) < 0)
				return 1;
			tc->has_final_eval = true;
		}
	}
	return gather(tc, m, seconds);
}

bool train_reports(const train_ctx *tc)
{
	return !tc || tc->rank == 0;
}

/* ------------------------------------------------------------------ */
/* The pod's figures (rank 0)                                           */

typedef struct pod_view {
	double total_rps, mean_rps, slowest_s;
	uint32_t straggler, fastest;
	bool steps_equal, models_equal;
} pod_view;

static double host_rps(const host_stats *h)
{
	return h->seconds > 0 ? (double)h->records / h->seconds : 0;
}

static void pod_derive(const train_ctx *tc, pod_view *v)
{
	uint64_t records = 0;

	memset(v, 0, sizeof(*v));
	v->steps_equal = v->models_equal = true;
	for (uint32_t i = 0; i < tc->hosts; i++) {
		const host_stats *h = &tc->all[i];

		records += h->records;
		if (h->seconds > v->slowest_s)
			v->slowest_s = h->seconds;
		if (host_rps(h) < host_rps(&tc->all[v->straggler]))
			v->straggler = i;
		if (host_rps(h) > host_rps(&tc->all[v->fastest]))
			v->fastest = i;
		if (h->steps != tc->all[0].steps)
			v->steps_equal = false;
		if (h->model && h->params_hash != tc->all[0].params_hash)
			v->models_equal = false;
	}
	/* The pod is done when its slowest host is. */
	v->total_rps = v->slowest_s > 0 ? (double)records / v->slowest_s : 0;
	v->mean_rps = v->total_rps / tc->hosts;
}

static void print_pod_text(const train_ctx *tc)
{
	pod_view v;
	const host_stats *s;

	pod_derive(tc, &v);
	s = &tc->all[v.straggler];
	printf("pod         %u hosts (%s): %.0f records/s in all (records over the "
	       "slowest host's %.3f s), %.0f a host\n", tc->hosts,
	       pf_pod_transport(tc->pod), v.total_rps, v.slowest_s, v.mean_rps);
	printf("  host      steps     records   seconds   records/s  MB/s read  first batch s"
	       "  counted MB%s  name\n", tc->tr ? "  input wait" : "");
	for (uint32_t i = 0; i < tc->hosts; i++) {
		const host_stats *h = &tc->all[i];

		printf("  %-6u %8llu %11llu %9.3f %11.0f %10.1f", h->index,
		       (unsigned long long)h->steps, (unsigned long long)h->records,
		       h->seconds, host_rps(h),
		       h->seconds > 0 ? (double)h->bytes_read / h->seconds / 1e6 : 0);
		printf(" %14.3f %11.1f", h->first_batch_s, (double)h->count_decompressed / 1e6);
		if (tc->tr)
			printf(" %10.1f%%", h->wait_fraction * 100);
		printf("  %s\n", h->name);
	}
	printf("straggler   host %u (%s): %.0f records/s, %.1f%% below the fastest "
	       "(host %u)\n", s->index, s->name, host_rps(s),
	       host_rps(&tc->all[v.fastest]) > 0 ?
	       100.0 * (1.0 - host_rps(s) / host_rps(&tc->all[v.fastest])) : 0,
	       tc->all[v.fastest].index);
	if (v.steps_equal) {
		printf("steps       %llu on every host\n",
		       (unsigned long long)tc->all[0].steps);
	} else {
		printf("steps       NOT EQUAL:");
		for (uint32_t i = 0; i < tc->hosts; i++)
			printf(" host %u %llu%s", i, (unsigned long long)tc->all[i].steps,
			       i + 1 < tc->hosts ? "," : "");
		printf(" -- every host must take the same steps\n");
	}
	if (tc->tr)
		printf("model       %s\n", v.models_equal ?
		       "the same parameters on every host" :
		       "PARAMETERS DIFFER between hosts");
}

static void json_u64(const char *k, uint64_t v, bool comma)
{
	printf("\"%s\":%llu%s", k, (unsigned long long)v, comma ? "," : "");
}

static void json_num(const char *k, double v, bool comma)
{
	printf("\"%s\":", k);
	cli_json_double(stdout, v);
	if (comma)
		putchar(',');
}

static void json_str(const char *k, const char *v, bool comma)
{
	printf("\"%s\":", k);
	cli_json_string(stdout, v, strlen(v));
	if (comma)
		putchar(',');
}

static void json_hash(const char *k, uint64_t h, bool comma)
{
	printf("\"%s\":\"%016llx\"%s", k, (unsigned long long)h, comma ? "," : "");
}

/* The summary first: `loadbench ladder` reads the first records_per_s
 * after "pod". */
static void print_pod_json(const train_ctx *tc)
{
	pod_view v;

	pod_derive(tc, &v);
	printf(",\"pod\":{");
	json_u64("hosts", tc->hosts, true);
	json_str("transport", pf_pod_transport(tc->pod), true);
	json_num("records_per_s", v.total_rps, true);
	json_num("per_host_records_per_s", v.mean_rps, true);
	json_num("seconds", v.slowest_s, true);
	printf("\"straggler\":{");
	json_u64("index", tc->all[v.straggler].index, true);
	json_str("name", tc->all[v.straggler].name, true);
	json_num("records_per_s", host_rps(&tc->all[v.straggler]), true);
	json_num("below_fastest", host_rps(&tc->all[v.fastest]) > 0 ?
		 1.0 - host_rps(&tc->all[v.straggler]) / host_rps(&tc->all[v.fastest]) : 0,
		 false);
	printf("},");
	printf("\"steps_equal\":%s,", v.steps_equal ? "true" : "false");
	if (tc->tr)
		printf("\"models_equal\":%s,", v.models_equal ? "true" : "false");
	printf("\"host\":[");
	for (uint32_t i = 0; i < tc->hosts; i++) {
		const host_stats *h = &tc->all[i];

		printf("%s{", i ? "," : "");
		json_u64("index", h->index, true);
		json_str("name", h->name, true);
		json_u64("steps", h->steps, true);
		json_u64("records", h->records, true);
		json_num("seconds", h->seconds, true);
		json_num("records_per_s", host_rps(h), true);
		json_num("first_batch_seconds", h->first_batch_s, true);
		json_num("open_seconds", h->open_s, true);
		json_u64("open_count_files", h->count_files, true);
		json_u64("open_count_decompressed", h->count_decompressed, true);
		json_num("mb_per_s_read", h->seconds > 0 ?
			 (double)h->bytes_read / h->seconds / 1e6 : 0, tc->tr != NULL);
		if (tc->tr) {
			json_num("input_wait_fraction", h->wait_fraction, true);
			json_num("compute_ms_p50", h->compute_ms_p50, true);
			json_num("loss", h->loss, true);
			json_hash("params_hash", h->params_hash, false);
		}
		putchar('}');
	}
	printf("]}");
}

/* ------------------------------------------------------------------ */
/* The train section                                                    */

static const char *verdict(const train_ctx *tc)
{
	return tc->bound_fraction > 0.5 ? "input-bound" : "compute-bound";
}

static void print_train_text(const train_ctx *tc)
{
	const pf_model_config *mc = pf_model_get_config(pf_trainer_model(tc->tr));
	size_t nparams;

	(void)pf_model_dense(pf_trainer_model(tc->tr), &nparams);
	if (mc->kind == PF_MODEL_EMBAG)
		nparams += (size_t)mc->vocab * mc->embed_dim;
	printf("train       %s (%s kernels), %zu parameters, %llu classes; %u core%s x "
	       "%u rows\n", pf_model_kind_name(mc->kind), mc->kernels, nparams,
	       (unsigned long long)mc->classes, tc->cfg.cores_per_host,
	       tc->cfg.cores_per_host == 1 ? "" : "s", tc->cfg.per_core_batch);
	printf("lr          %.6g (%s rule from %.6g", tc->plan.lr,
	       pf_lr_rule_name(tc->plan.rule), tc->o.lr);
	if (tc->o.ref_batch)
		printf(" at reference batch %llu; this batch %llu",
		       (unsigned long long)tc->o.ref_batch,
		       (unsigned long long)tc->global_batch);
	printf("), warm-up %llu steps\n", (unsigned long long)tc->plan.warmup_steps);
	printf("loss        %.4f (first %u steps) -> %.4f (last %u steps), %llu steps, "
	       "%llu examples\n", tc->loss_first,
	       tc->nsteps < LOSS_WINDOW ? (unsigned)tc->nsteps : LOSS_WINDOW,
	       tc->loss_last, tc->nsteps < LOSS_WINDOW ? (unsigned)tc->nsteps : LOSS_WINDOW,
	       (unsigned long long)tc->nsteps,
	       (unsigned long long)(tc->nsteps * tc->global_batch));
	if (tc->has_final_eval)
		printf("held-out    loss %.4f, accuracy %.4f over %llu records (%llu "
		       "dropped)\n", tc->final_eval.loss, tc->final_eval.accuracy,
		       (unsigned long long)tc->final_eval.rows,
		       (unsigned long long)tc->final_eval.dropped);
	printf("step time   p50 %.3f ms, p90 %.3f ms, p99 %.3f ms; compute p50 %.3f ms",
	       tc->step_p50, tc->step_p90, tc->step_p99, tc->compute_p50);
	if (tc->hosts > 1)
		printf(" (pod all-reduce p50 %.3f ms)", tc->reduce_p50);
	printf(", input wait p50 %.3f ms; %.2f GFLOP/s\n", tc->wait_p50, tc->gflops);
	printf("input       waited %.1f%% of the step time; %llu of %llu steps "
	       "(%.1f%%) input-bound (wait > 5%% of the step); first batch after "
	       "%.1f ms\n", tc->wait_fraction * 100, (unsigned long long)tc->bound_steps,
	       (unsigned long long)tc->timed_steps, tc->bound_fraction * 100,
	       tc->first_wait_ms);
	printf("verdict     %s\n", verdict(tc));
}

void train_print_text(const train_ctx *tc)
{
	if (!tc || tc->rank != 0)
		return;
	if (tc->tr)
		print_train_text(tc);
	if (tc->all)
		print_pod_text(tc);
}

static void print_train_json(const train_ctx *tc)
{
	const pf_model_config *mc = pf_model_get_config(pf_trainer_model(tc->tr));

	printf(",\"train\":{");
	json_str("model", pf_model_kind_name(mc->kind), true);
	json_str("kernels", mc->kernels, true);
	json_u64("classes", mc->classes, true);
	json_u64("cores", tc->cfg.cores_per_host, true);
	json_u64("steps", tc->nsteps, true);
	json_u64("examples", tc->nsteps * tc->global_batch, true);
	json_num("lr", tc->plan.lr, true);
	json_str("lr_rule", pf_lr_rule_name(tc->plan.rule), true);
	json_num("ref_lr", tc->o.lr, true);
	json_u64("ref_global_batch", tc->o.ref_batch, true);
	json_u64("warmup_steps", tc->plan.warmup_steps, true);
	json_num("loss_first", tc->loss_first, true);
	json_num("loss_last", tc->loss_last, true);
	json_num("loss_final_step", tc->nsteps ? tc->loss[tc->nsteps - 1] : 0, true);
	printf("\"step_ms\":{");
	json_num("p50", tc->step_p50, true);
	json_num("p90", tc->step_p90, true);
	json_num("p99", tc->step_p99, false);
	printf("},");
	json_num("compute_ms_p50", tc->compute_p50, true);
	json_num("input_wait_ms_p50", tc->wait_p50, true);
	json_num("allreduce_ms_p50", tc->reduce_p50, true);
	json_num("input_wait_fraction", tc->wait_fraction, true);
	json_num("input_bound_fraction", tc->bound_fraction, true);
	json_u64("input_bound_steps", tc->bound_steps, true);
	json_u64("timed_steps", tc->timed_steps, true);
	json_num("first_batch_wait_ms", tc->first_wait_ms, true);
	json_str("verdict", verdict(tc), true);
	json_num("gflop_per_s", tc->gflops, true);
	json_hash("params_hash", tc->params_hash, true);
	if (tc->has_final_eval) {
		printf("\"eval\":{");
		json_num("loss", tc->final_eval.loss, true);
		json_num("accuracy", tc->final_eval.accuracy, true);
		json_u64("records", tc->final_eval.rows, true);
		json_u64("dropped", tc->final_eval.dropped, false);
		printf("},");
	}
	printf("\"curve\":[");
	for (size_t i = 0; i < tc->ncurve; i++) {
		printf("%s{", i ? "," : "");
		json_u64("step", tc->curve[i].step, true);
		json_num("loss", tc->curve[i].loss, true);
		json_num("lr", tc->curve[i].lr, false);
		putchar('}');
	}
	printf("],\"eval_curve\":[");
	for (size_t i = 0; i < tc->nevals; i++) {
		printf("%s{", i ? "," : "");
		json_u64("step", tc->evals[i].step, true);
		json_num("loss", tc->evals[i].loss, true);
		json_num("accuracy", tc->evals[i].accuracy, true);
		json_u64("records", tc->evals[i].rows, false);
		putchar('}');
	}
	printf("]}");
}

void train_print_json(const train_ctx *tc)
{
	if (!tc || tc->rank != 0)
		return;
	if (tc->tr)
		print_train_json(tc);
	if (tc->all)
		print_pod_json(tc);
}

/* ------------------------------------------------------------------ */

int train_end(train_ctx *tc, int status)
{
	bool abandon;

	if (!tc)
		return status;
	if (status == 0 && tc->steps_unequal)
		status = 1;
	/* MPI_Finalize waits for every rank: after a failure the others may
	 * sit in a collective this host will never join.  Leaving without
	 * it makes mpirun end the job. */
	abandon = status != 0 && tc->mpi && tc->hosts > 1;
	if (abandon) {
		fflush(stdout);
		fflush(stderr);
		_exit(status);
	}
	pf_trainer_free(tc->tr);
	pf_pod_close(tc->pod);
	free(tc->wait_ns);
	free(tc->compute_ns);
	free(tc->reduce_ns);
	free(tc->loss);
	free(tc->lr);
	free(tc->curve);
	free(tc->evals);
	free(tc->all);
	free(tc);
	return status;
}
