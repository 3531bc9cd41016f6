/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's compute stage and pod: the --model options, the trainer on
 * the loader's batches with per-step timing, held-out evaluation, the
 * report's train and pod sections, and `loadbench ladder`. */
#ifndef PF_TOOLS_TRAIN_H
#define PF_TOOLS_TRAIN_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "pf_host.h"
#include "podfeed.h"

/* getopt_long values of the training options, above loadbench's own. */
enum {
	TRAIN_OPT_FIRST = 1024,
	TRAIN_OPT_MODEL = TRAIN_OPT_FIRST,
	TRAIN_OPT_CLASSES,
	TRAIN_OPT_VOCAB,
	TRAIN_OPT_EMBED_DIM,
	TRAIN_OPT_EMBED_LR_SCALE,
	TRAIN_OPT_INPUT,
	TRAIN_OPT_LABEL,
	TRAIN_OPT_LR,
	TRAIN_OPT_LR_RULE,
	TRAIN_OPT_REF_BATCH,
	TRAIN_OPT_WARMUP,
	TRAIN_OPT_EVAL,
	TRAIN_OPT_EVAL_EVERY,
	TRAIN_OPT_LOG_EVERY,
	TRAIN_OPT_LAST,
};

/* Entries for loadbench's struct option table. */
#define TRAIN_LONG_OPTIONS                                                   \
	{ "model", required_argument, NULL, TRAIN_OPT_MODEL },               \
	{ "classes", required_argument, NULL, TRAIN_OPT_CLASSES },           \
	{ "vocab", required_argument, NULL, TRAIN_OPT_VOCAB },               \
	{ "embed-dim", required_argument, NULL, TRAIN_OPT_EMBED_DIM },       \
	{ "embed-lr-scale", required_argument, NULL, TRAIN_OPT_EMBED_LR_SCALE }, \
	{ "input-feature", required_argument, NULL, TRAIN_OPT_INPUT },       \
	{ "label-feature", required_argument, NULL, TRAIN_OPT_LABEL },       \
	{ "lr", required_argument, NULL, TRAIN_OPT_LR },                     \
	{ "lr-rule", required_argument, NULL, TRAIN_OPT_LR_RULE },           \
	{ "ref-global-batch", required_argument, NULL, TRAIN_OPT_REF_BATCH }, \
	{ "warmup-steps", required_argument, NULL, TRAIN_OPT_WARMUP },       \
	{ "eval", required_argument, NULL, TRAIN_OPT_EVAL },                 \
	{ "eval-every", required_argument, NULL, TRAIN_OPT_EVAL_EVERY },     \
	{ "log-every", required_argument, NULL, TRAIN_OPT_LOG_EVERY }

/* The training part of `loadbench --help`. */
#define TRAIN_USAGE                                                          \
	"training (the compute stage):\n"                                    \
	"  --model softmax|embag|none  train a model on the batches, one worker\n" \
	"                       thread per core (none, the default: only consume):\n" \
	"                       softmax regression over a float32[dim] feature,\n" \
	"                       or a bag of embeddings over int32[seq_len] token\n" \
	"                       ids (the feature's pad value is the pad id); both\n" \
	"                       with an int32[1] label.  Without --features the\n" \
	"                       index schema's int64 features are read as int32,\n" \
	"                       and embag's tokens with pad=-1\n"               \
	"  --classes K          label classes (required with a model)\n"       \
	"  --vocab V            embag: token ids lie in [0, V) (required)\n"   \
	"  --embed-dim D        embag: floats per embedding row (default 32)\n" \
	"  --embed-lr-scale S   embag: the table's rate is lr x S (default 1)\n" \
	"  --input-feature NAME, --label-feature NAME  the features to use\n"  \
	"                       (default: the only one of the input's dtype;\n" \
	"                       \"label\")\n"                                  \
	"  --lr L0              reference learning rate (default 0.1)\n"       \
	"  --lr-rule none|linear|sqrt  this run's rate: L0, L0 x B/B0 or\n"   \
	"                       L0 x sqrt(B/B0), B the global batch (default none)\n" \
	"  --ref-global-batch B0  the reference batch (linear and sqrt need it)\n" \
	"  --warmup-steps W0    reference warm-up, kept in examples: W0 x B0 / B\n" \
	"                       steps (rounded up); the rate ramps up over them\n" \
	"  --eval PATH          held-out data (repeatable): mean loss and accuracy\n" \
	"                       at the end\n"                                   \
	"  --eval-every N       also evaluate every N steps\n"                 \
	"  --log-every N        a loss line every N steps on stderr (with --json,\n" \
	"                       in the report's train.curve)\n"               \
	"  Each step's input wait (time blocked in the loader's next()) and\n" \
	"  compute (gradients, host average, pod all-reduce, update) are timed.\n" \
	"  A step is input-bound when its input wait is more than 5% of its time\n" \
	"  (wait + compute); the verdict is input-bound when more than half the\n" \
	"  steps are.  The first step, which waits for the pipeline to fill, is\n" \
	"  left out of both (its wait is reported as time to first batch).\n" \
	"pod:\n"                                                               \
	"  Under `mpirun -np H loadbench ...` each rank is one host (topology\n" \
	"  from MPI) and rank 0 prints the pod report: throughput in all and per\n" \
	"  host, the slowest host, every host's steps, first batch and the bytes\n" \
	"  it decompressed counting stream files.  `loadbench ladder --help`\n" \
	"  runs rungs of 1, 2, 4... hosts and their scaling efficiency.\n"

typedef struct train_options {
	bool on;			/* --model softmax|embag */
	pf_model_kind kind;
	uint64_t classes, vocab, embed_dim;
	double embed_lr_scale;		/* 0: 1 */
	const char *input, *label;
	double lr;			/* 0: 0.1 */
	bool lr_given;
	pf_lr_rule rule;
	uint64_t ref_batch, warmup;
	const char *eval[64];
	unsigned neval;
	uint64_t eval_every, log_every;
} train_options;

typedef struct train_ctx train_ctx;

/*! A training option (opt in [TRAIN_OPT_FIRST, TRAIN_OPT_LAST)) into *t.
 *  @return 0, or -EINVAL after printing why. */
int train_parse_option(train_options *t, int opt, const char *arg);

/*! Features inferred from the index schema, fitted to the model: int64
 *  features become int32 and embag's input gets pad=-1.  *spec is
 *  malloc'd and may be replaced (the caller frees).  @return 0 or -ENOMEM. */
int train_fit_features(const train_options *t, char **spec);

/*! Open the pod (MPI when launched by mpirun), give cfg its all-gather
 *  (the hosts open the dataset together: they check they plan the same
 *  one and split the counting of stream files) and, with a model, make
 *  the trainer for cfg's topology and spec and the learning-rate plan.
 *  @return 0 with *out, or the exit status (1 or 2) after printing why. */
int train_start(train_ctx **out, const train_options *t,
		pf_loader_config *cfg, const pf_spec *spec,
		uint64_t repeat);

/*! pf_loader_next(), timed as the step's input wait. */
int train_next(train_ctx *tc, pf_loader *l, pf_batch **b);

/*! One training step on b (nothing without a model).  @return 0, or -1
 *  after printing why. */
int train_batch(train_ctx *tc, pf_batch *b);

/*! After the runs: the held-out evaluation and the pod's gather (every
 *  host calls it).  m and seconds are this host's loader figures.
 *  @return 0, or 1 after printing why. */
int train_finish(train_ctx *tc, const pf_loader_metrics *m, double seconds);

/*! Whether this process prints the report (rank 0, or a lone host). */
bool train_reports(const train_ctx *tc);
void train_print_text(const train_ctx *tc);
/*! The report's train and pod members, each with a leading comma. */
void train_print_json(const train_ctx *tc);

/*! Free everything and close the pod.  After a failure (status != 0) in
 *  a pod of several hosts it exits at once without MPI_Finalize, so that
 *  mpirun ends the others rather than leave them in a collective.
 *  @return status. */
int train_end(train_ctx *tc, int status);

/*! `loadbench ladder ...` (argv[0] is "ladder").  @return the status. */
int ladder_main(int argc, char **argv);

#endif
