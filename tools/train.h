/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's compute stage and pod: the --model options, the trainer on
 * the loader's batches with per-step timing, held-out evaluation, and the
 * report's train and pod sections (made by the library). */
#ifndef PF_TOOLS_TRAIN_H
#define PF_TOOLS_TRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "pf_host.h"
#include "podfeed.h"

/* train_options.model: a pf_model_kind, or none (only consume). */
#define TRAIN_MODEL_NONE 2

typedef struct train_options {
	int model;			/* a pf_model_kind, or TRAIN_MODEL_NONE */
	uint64_t classes, vocab, embed_dim;
	double embed_lr_scale;		/* 0: 1 */
	const char *input, *label;
	double lr;			/* 0: 0.1 */
	bool lr_given;
	int rule;			/* a pf_lr_rule */
	uint64_t ref_batch, warmup;
	const char *eval[64];
	unsigned neval;
	uint64_t eval_every, log_every;
} train_options;

typedef struct train_ctx train_ctx;

/* The training options, for loadbench's option table (CLI_INCLUDE with
 * .off the train_options in its options); train_defaults() first. */
extern const cli_opt train_cli[];
void train_defaults(train_options *t);

/*! The spec inferred from the shards' schema (pf_spec_infer(), int64
 *  features as int32 when a model trains) fitted to the model: embag's
 *  input gets pad=-1. */
void train_fit_features(const train_options *t, pf_spec *spec);

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

/*! After the runs: the loss curve's last point and the held-out
 *  evaluation.  @return 0, or 1 after printing why. */
int train_finish(train_ctx *tc);

/*! The report's train section (host 0, with a model) and pod section
 *  (every host calls it: the pod's figures are gathered), m and seconds
 *  being this host's loader figures.  @return 0, or 1 after printing why
 *  (train_end() then also fails a pod whose hosts took different steps). */
int train_report(train_ctx *tc, pf_report *r, const pf_loader_metrics *m, double seconds);

/*! Whether this process prints the report (rank 0, or a lone host). */
bool train_reports(const train_ctx *tc);

/*! Free everything and close the pod.  After a failure (status != 0) in
 *  a pod of several hosts it exits at once without MPI_Finalize, so that
 *  mpirun ends the others rather than leave them in a collective.
 *  @return status. */
int train_end(train_ctx *tc, int status);

#endif
