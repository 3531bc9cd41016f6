/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's compute stage and pod: the trainer (host/train.c) on the
 * loader's batches, each step's input wait timed into the training log
 * (host/report.c), the learning rate from the scaling plan, held-out
 * evaluation, and the report's train and pod sections (made by the
 * library).  loadbench.c calls in at a few places (options, the consume
 * loop, the report); see train.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common_internal.h"
#include "cli.h"
#include "train.h"

#define DEFAULT_LR 0.1
#define DEFAULT_EMBED_DIM 32u

struct train_ctx {
	train_options o;
	pf_loader_config cfg;		/* the training loader's */
	pf_pod *pod;
	bool mpi;
	uint32_t rank, hosts;
	pf_trainer *tr;
	pf_scaling_input plan_in;
	pf_scaling_plan plan;
	uint64_t global_batch;
	pf_train_log *log;
	uint64_t steps;
	uint64_t pending_wait;		/* of the batch in hand */
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

static int add_eval(void *field, const char *v)
{
	train_options *t = field;

	if (t->neval == sizeof(t->eval) / sizeof(t->eval[0])) {
		cli_usage("--eval: at most %zu paths (give a directory or a glob)",
			  sizeof(t->eval) / sizeof(t->eval[0]));
		return -EINVAL;
	}
	t->eval[t->neval++] = v;
	return 0;
}

#define T(field) offsetof(train_options, field)

const cli_opt train_cli[] = {
	{ CLI_SECTION, .help = "training (the compute stage):" },
	{ CLI_CHOICE, "model", .arg = "softmax|embag|none", .off = T(model),
	  .choices = "softmax|embag|none",
	  .help = "train a model on the batches, one worker thread per core (none, "
		  "the default: only consume): softmax regression over a "
		  "float32[dim] feature, or a bag of embeddings over int32[seq_len] "
		  "token ids (the feature's pad value is the pad id); both with an "
		  "int32[1] label.  Without --features the index schema's int64 "
		  "features are read as int32, and embag's tokens with pad=-1" },
	{ CLI_U64, "classes", .arg = "K", .off = T(classes), .min = 2,
	  .max = PF_MODEL_MAX_CLASSES, .help = "label classes (required with a model)" },
	{ CLI_U64, "vocab", .arg = "V", .off = T(vocab), .min = 1, .max = PF_MODEL_MAX_VOCAB,
	  .suffix = true, .help = "embag: token ids lie in [0, V) (required)" },
	{ CLI_U64, "embed-dim", .arg = "D", .off = T(embed_dim), .min = 1,
	  .max = PF_MODEL_MAX_DIM, .help = "embag: floats per embedding row (default 32)" },
	{ CLI_DOUBLE, "embed-lr-scale", .arg = "S", .off = T(embed_lr_scale), .lo = 0,
	  .hi = 1e300, .above = true,
	  .help = "embag: the table's rate is lr x S (default 1)" },
	{ CLI_STRING, "input-feature", .arg = "NAME", .off = T(input),
	  .help = "the model's input (default: the only feature of its dtype)" },
	{ CLI_STRING, "label-feature", .arg = "NAME", .off = T(label),
	  .help = "the label (default \"label\")" },
	{ CLI_DOUBLE, "lr", .arg = "L0", .off = T(lr), .seen = CLI_SEEN(train_options, lr_given),
	  .lo = 0, .hi = 1e300, .above = true,
	  .help = "reference learning rate (default 0.1)" },
	{ CLI_CHOICE, "lr-rule", .arg = "none|linear|sqrt", .off = T(rule),
	  .choices = "none|linear|sqrt",
	  .help = "this run's rate: L0, L0 x B/B0 or L0 x sqrt(B/B0), B the global "
		  "batch (default none)" },
	{ CLI_U64, "ref-global-batch", .arg = "B0", .off = T(ref_batch), .min = 1,
	  .max = UINT64_MAX, .suffix = true,
	  .help = "the reference batch (linear and sqrt need it)" },
	{ CLI_U64, "warmup-steps", .arg = "W0", .off = T(warmup), .max = UINT64_MAX,
	  .suffix = true, .help = "reference warm-up, kept in examples: W0 x B0 / B "
				  "steps (rounded up); the rate ramps up over them" },
	{ CLI_CALL, "eval", .arg = "PATH", .call = add_eval,
	  .help = "held-out data (repeatable): mean loss and accuracy at the end" },
	{ CLI_U64, "eval-every", .arg = "N", .off = T(eval_every), .min = 1,
	  .max = UINT64_MAX, .suffix = true, .help = "also evaluate every N steps" },
	{ CLI_U64, "log-every", .arg = "N", .off = T(log_every), .min = 1, .max = UINT64_MAX,
	  .suffix = true, .help = "a loss line every N steps on stderr (with --json, in "
				  "the report's train.curve)" },
	{ CLI_NOTE, .help = "Each step's input wait (time blocked in the loader's next()) "
		  "and compute (gradients, host average, pod all-reduce, update) are "
		  "timed.  A step is input-bound when its input wait is more than 5% of "
		  "its time (wait + compute); the verdict is input-bound when more than "
		  "half the steps are.  The first step, which waits for the pipeline to "
		  "fill, is left out of both (its wait is reported as time to first "
		  "batch)." },
	{ CLI_SECTION, .help = "pod:" },
	{ CLI_NOTE, .help = "Under `mpirun -np H loadbench ...` each rank is one host "
		  "(topology from MPI) and rank 0 prints the pod report: throughput in "
		  "all and per host, the slowest host, every host's steps, first batch and "
		  "the bytes it decompressed counting stream files.  `loadbench "
		  "ladder --help` runs rungs of 1, 2, 4... hosts and their scaling "
		  "efficiency." },
	{ CLI_END },
};

void train_defaults(train_options *t)
{
	memset(t, 0, sizeof(*t));
	t->model = TRAIN_MODEL_NONE;
}

void train_fit_features(const train_options *t, pf_spec *spec)
{
	const char *label = t->label ? t->label : "label";

	if (t->model != PF_MODEL_EMBAG)
		return;
	/* embag: ids start at 0, so padding must be another value: the
	 * input's (the one named, or else the first int32 feature that is
	 * not the label) pad is -1. */
	for (uint32_t i = 0; i < spec->n; i++) {
		pf_feature_spec *f = &spec->f[i];

		if (f->dtype == PF_DTYPE_INT32 && strcmp(f->name, label) &&
		    (!t->input || !strcmp(f->name, t->input))) {
			f->pad = -1;
			return;
		}
	}
}

/* ------------------------------------------------------------------ */
/* Start                                                                */

static int open_pod(train_ctx *tc, const pf_loader_config *cfg)
{
	pf_error err;
	int ret;

	pf_error_clear(&err);
	ret = pf_pod_open(&tc->pod, &err);
	if (ret == -ENOTSUP && tc->o.model == TRAIN_MODEL_NONE) {
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
		return cli_usage("pod: MPI says rank %u of %u, but the topology is host %u of "
				 "%u (--host-index and --num-hosts must not contradict mpirun)",
				 tc->rank, tc->hosts, cfg->host_index, cfg->num_hosts);
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
		.rule = (pf_lr_rule)tc->o.rule,
	};
	pf_error err;

	pf_error_clear(&err);
	if (pf_scaling_plan_compute(&tc->plan, &in, &err) < 0)
		return cli_usage("learning rate: %s", err.msg);
	tc->plan_in = in;
	tc->global_batch = tc->plan.global_batch;
	return 0;
}

static int make_trainer(train_ctx *tc, const pf_spec *spec)
{
	pf_trainer_config tcfg = {
		.model = {
			.kind = (pf_model_kind)tc->o.model,
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
		cli_usage("--model %s needs --classes (the labels' count)",
			 pf_model_kind_name((pf_model_kind)tc->o.model));
		return 2;
	}
	if (tc->o.model == PF_MODEL_EMBAG && !tc->o.vocab) {
		cli_usage("--model embag needs --vocab (token ids lie in [0, V))");
		return 2;
	}
	pf_error_clear(&err);
	if (pf_trainer_create(&tc->tr, &tcfg, &err) < 0) {
		if (err.code == -EINVAL)
			return cli_usage("%s", err.msg);
		cli_fail("%s", err.msg);
		return 1;
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
	if (t->model == TRAIN_MODEL_NONE && (t->neval || t->eval_every || t->log_every)) {
		cli_usage("--eval, --eval-every and --log-every need --model softmax or embag");
		return 2;
	}
	if (t->model != TRAIN_MODEL_NONE && repeat > 1) {
		cli_usage("--repeat: a model trains once; run loadbench again for "
			 "another sample");
		return 2;
	}
	if (t->eval_every && !t->neval) {
		cli_usage("--eval-every needs --eval PATH");
		return 2;
	}
	if ((ret = open_pod(tc, cfg)) != 0)
		return ret;
	if (tc->mpi && tc->hosts > 1) {
		cfg->allgather = pf_pod_allgather;
		cfg->allgather_ctx = tc->pod;
	}
	tc->cfg = *cfg;
	if (t->model == TRAIN_MODEL_NONE)
		return 0;
	if ((ret = make_plan(tc)) != 0 || (ret = make_trainer(tc, spec)) != 0)
		return ret;
	if (pf_train_log_create(&tc->log, t->log_every) < 0) {
		cli_fail("out of memory");
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Steps                                                                */

int train_next(train_ctx *tc, pf_loader *l, pf_batch **b)
{
	uint64_t t0 = pf_now_ns();
	int ret = pf_loader_next(l, b);

	if (tc)
		tc->pending_wait = pf_now_ns() - t0;
	return ret;
}

static void say_point(const train_ctx *tc, const pf_train_point *p)
{
	if (tc->rank == 0)
		fprintf(stderr, "%s: step %llu: training loss %.4f (mean of %llu steps), "
			"lr %.6g\n", cli_prog, (unsigned long long)p->step, p->loss,
			(unsigned long long)p->steps, p->lr);
}

static int evaluate(train_ctx *tc, bool final);

int train_batch(train_ctx *tc, pf_batch *b)
{
	pf_train_step st;
	pf_train_point point;
	pf_error err;
	double lr;
	int ret;

	if (!tc || !tc->tr)
		return 0;
	lr = pf_scaling_lr_at(&tc->plan, tc->steps);
	pf_error_clear(&err);
	if (pf_trainer_step(tc->tr, b, (float)lr, &st, &err) < 0) {
		cli_fail("step %llu: %s", (unsigned long long)tc->steps, err.msg);
		return -1;
	}
	tc->steps++;
	ret = pf_train_log_step(tc->log, tc->pending_wait, &st, lr, &point);
	if (ret < 0) {
		cli_fail("out of memory for the step times");
		return -1;
	}
	if (ret == 1)
		say_point(tc, &point);
	if (tc->o.eval_every && tc->steps % tc->o.eval_every == 0 && evaluate(tc, false) < 0)
		return -1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Held-out evaluation: the same topology and spec over other files      */

static int evaluate(train_ctx *tc, bool final)
{
	pf_loader_config e = tc->cfg;
	pf_loader *l = NULL;
	pf_loader_metrics m;
	pf_eval_sums sums = { 0 };
	pf_train_eval ev;
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
	if (pf_train_log_eval(tc->log, &sums, m.remainder_dropped, final, &ev) < 0) {
		cli_fail("out of memory for the evaluations");
		return -1;
	}
	if (!final && tc->rank == 0)
		fprintf(stderr, "%s: step %llu: held-out loss %.4f, accuracy %.4f "
			"(%llu records)\n", cli_prog, (unsigned long long)ev.step, ev.loss,
			ev.accuracy, (unsigned long long)ev.records);
	return 0;
}

/* ------------------------------------------------------------------ */
/* The end: the final evaluation, the report's train and pod sections   */

int train_finish(train_ctx *tc)
{
	pf_train_point point;
	int ret;

	if (!tc || !tc->tr)
		return 0;
	ret = pf_train_log_close(tc->log, &point);
	if (ret < 0) {
		cli_fail("out of memory for the loss curve");
		return 1;
	}
	if (ret == 1)
		say_point(tc, &point);
	if (tc->o.neval && evaluate(tc, true) < 0)
		return 1;
	return 0;
}

int train_report(train_ctx *tc, pf_report *r, const pf_loader_metrics *m, double seconds)
{
	pf_error err;
	int ret;

	if (!tc)
		return 0;
	pf_error_clear(&err);
	if (tc->tr && tc->rank == 0 &&
	    pf_report_add_train(r, tc->tr, &tc->plan_in, &tc->plan, tc->log, &err) < 0) {
		cli_fail("the report: %s", err.msg);
		return 1;
	}
	/* Every host gathers; host 0 adds the pod's section. */
	ret = pf_report_add_pod(r, tc->pod, tc->cfg.host_index, m, seconds, tc->tr,
				tc->tr ? tc->log : NULL, &err);
	if (ret < 0) {
		cli_fail("pod: %s", err.msg);
		return 1;
	}
	if (ret == 1) {
		tc->steps_unequal = true;
		cli_fail("pod: THE HOSTS TOOK DIFFERENT NUMBERS OF STEPS (see the pod "
			 "report); every host must take the same steps");
	}
	return 0;
}

bool train_reports(const train_ctx *tc)
{
	return !tc || tc->rank == 0;
}

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
	pf_train_log_free(tc->log);
	pf_pod_close(tc->pod);
	free(tc);
	return status;
}
