/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed host/: the compute stage's models and gradients. */
#ifndef PF_HOST_H
#define PF_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf_formats.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Kernels                                                              */
/* ------------------------------------------------------------------ */
/*
 * The training kernels come in two implementations with the same results
 * up to rounding: "avx2" (AVX2 + FMA, chosen when the CPU has both) and
 * "portable" (plain C).  PODFEED_KERNELS=portable (or avx2) in the
 * environment picks one for every model that does not name its own.  All
 * hosts of a pod should run the same implementation: the two round
 * differently, so gradients would differ in their last bits.
 */

/*! pf_kernels_impl(): the name of the implementation models use by
 *  default ("avx2" or "portable").  Thread-safe. */
PF_API const char *pf_kernels_impl(void);

/* ------------------------------------------------------------------ */
/* Models                                                               */
/* ------------------------------------------------------------------ */
/*
 * A model is its parameters.  One step of data-parallel training on a
 * host with C cores is:
 *
 *   each core c, in parallel:  pf_model_grad(model, ws[c], batch[c], g[c])
 *   then one thread:           pf_grad_average(avg, g, C)   (fixed order)
 *                              pf_model_apply(model, avg, lr)
 *
 * pf_model_grad() only reads the model, so the cores may run it at once,
 * each with its own workspace and gradient; pf_model_apply() writes it
 * and must not overlap them.
 *
 * Models:
 *   PF_MODEL_SOFTMAX  softmax regression: logits = x W + b over a dense
 *                     float feature x[dim]; W is [dim][classes].
 *   PF_MODEL_EMBAG    bag of embeddings: h = mean of E[id] over the
 *                     record's token ids that are not pad_id (h = 0 when
 *                     all are padding), logits = h W + b; E is
 *                     [vocab][embed_dim], W is [embed_dim][classes].
 * Both minimise the mean softmax cross-entropy of the batch.
 *
 * Gradients.  The dense parameters (W then b, one flat float array) have
 * a dense gradient.  The embedding table's gradient is sparse: the sorted
 * list of the rows the batch touched and one gradient row for each.  A
 * per-core batch touches at most rows x seq_len rows of the table (and
 * under a Zipf token law far fewer), while a dense vocab x embed_dim
 * gradient (8 MiB for 32000 x 64) would be zeroed, filled, averaged and
 * applied in full every step.  The sparse form still averages exactly
 * across hosts with MPI_Allreduce, in three collectives:
 *
 *   mask: pf_grad_mask_words(g) uint64_t, zeroed; pf_grad_mark_rows(g, mask)
 *   MPI_Allreduce(MPI_IN_PLACE, mask, words, MPI_UINT64_T, MPI_BOR, comm)
 *   pf_grad_spread_rows(g, mask)     every host now has the same row list
 *   MPI_Allreduce(dense part, MPI_FLOAT, MPI_SUM) and the same on the rows
 *   pf_grad_scale(g, 1.0f / hosts)
 */

typedef enum pf_model_kind {
	PF_MODEL_SOFTMAX = 0,
	PF_MODEL_EMBAG,
} pf_model_kind;

/* Limits checked by pf_model_create() before it allocates anything. */
#define PF_MODEL_MAX_CLASSES (1u << 16)
#define PF_MODEL_MAX_DIM (1u << 20)		/* dim and embed_dim */
#define PF_MODEL_MAX_VOCAB (1u << 26)
#define PF_MODEL_MAX_SEQ_LEN (1u << 16)
#define PF_MODEL_MAX_ROWS (1u << 20)
#define PF_MODEL_MAX_BYTES (8ull << 30)	/* parameters + one workspace */

typedef struct pf_model_config {
	pf_model_kind kind;
	uint32_t classes;	/* >= 2 */
	uint32_t dim;		/* softmax: floats per record */
	uint32_t vocab;		/* embag: ids are in [0, vocab) */
	uint32_t embed_dim;	/* embag: floats per embedding row */
	uint32_t seq_len;	/* embag: token ids per record (tensor len) */
	int32_t pad_id;		/* embag: ids equal to this are padding; it
				 * may lie outside [0, vocab), e.g. -1 */
	float embed_lr_scale;	/* embag: the table's SGD step is lr x this
				 * (0: 1).  Mean pooling divides each row's
				 * gradient by the record's token count, so
				 * with records of hundreds of tokens the
				 * table learns that much slower than W
				 * unless this is raised (the tests use 100). */
	uint32_t max_rows;	/* largest per-core batch (sizes workspaces) */
	uint64_t seed;		/* initial parameters are a function of it */
	const char *kernels;	/* NULL: $PODFEED_KERNELS or the best; else
				 * "avx2" or "portable" */
} pf_model_config;

/* One core's batch, as the loader hands it: row-major, rows records. */
typedef struct pf_model_batch {
	uint32_t rows;		/* 1 .. max_rows */
	const float *x;		/* softmax: [rows][dim] */
	const int32_t *tokens;	/* embag: [rows][seq_len] */
	const int32_t *labels;	/* [rows], each in [0, classes) */
} pf_model_batch;

typedef struct pf_model pf_model;
typedef struct pf_workspace pf_workspace;
typedef struct pf_grad pf_grad;

/*! pf_model_kind_parse(): "softmax" or "embag" (as --model says it).
 *  @return 0, or -EINVAL for another name. */
PF_API int pf_model_kind_parse(const char *name, pf_model_kind *kind);
PF_API const char *pf_model_kind_name(pf_model_kind kind);

/*! pf_model_create(): parameters initialised from cfg->seed (the same
 *  seed gives the same bits on every host).  @return 0 with *out (free
 *  with pf_model_free()), -EINVAL for a bad or too large configuration,
 *  -ENOTSUP when cfg->kernels names an implementation this CPU lacks,
 *  -ENOMEM; err says which. */
PF_API int pf_model_create(pf_model **out, const pf_model_config *cfg,
			   pf_error *err);
PF_API void pf_model_free(pf_model *m);
/*! The configuration (kernels resolved to the implementation in use). */
PF_API const pf_model_config *pf_model_get_config(const pf_model *m);

/*! pf_model_dense(): the dense parameters, W row-major then b; *n gets
 *  their count.  The model owns them; a caller may write them (to load a
 *  checkpoint) while no step runs. */
PF_API float *pf_model_dense(pf_model *m, size_t *n);
/*! pf_model_embedding(): embag's table [vocab][embed_dim], or NULL. */
PF_API float *pf_model_embedding(pf_model *m, uint32_t *rows, uint32_t *dim);

/*! pf_model_step_flops(): floating-point operations of one pf_model_grad()
 *  over `rows` records (a multiply-add counts 2), for GFLOP/s figures;
 *  embag counts every padded token slot as a real one. */
PF_API double pf_model_step_flops(const pf_model *m, uint32_t rows);

/*! pf_workspace_create(): the scratch one core needs for pf_model_grad()
 *  and pf_model_evaluate() on m, so that those never allocate.  One per
 *  core; it must not outlive m.  @return 0 or -ENOMEM. */
PF_API int pf_workspace_create(const pf_model *m, pf_workspace **out);
PF_API void pf_workspace_free(pf_workspace *ws);

/*! pf_grad_create(): a gradient buffer for m that can hold the average of
 *  `sum_of` per-core gradients (1 for one core's, C for a host's average,
 *  C x H for a pod's).  @return 0 or -EINVAL, -ENOMEM. */
PF_API int pf_grad_create(const pf_model *m, uint32_t sum_of, pf_grad **out);
PF_API void pf_grad_free(pf_grad *g);

/*! pf_model_grad(): forward and backward on one core's batch: *loss gets
 *  the batch's mean cross-entropy and g the gradient of that mean
 *  (previous contents of g are replaced).  Reads m only; thread-safe for
 *  distinct ws and g.  @return 0, or -EINVAL (a label out of range, a
 *  token id neither pad_id nor in [0, vocab), rows out of range, ws or g
 *  of another model) with err naming the row and column. */
PF_API int pf_model_grad(const pf_model *m, pf_workspace *ws,
			 const pf_model_batch *batch, pf_grad *g,
			 double *loss, pf_error *err);

/*! pf_model_evaluate(): forward only: the batch's mean cross-entropy and
 *  the count of rows whose largest logit (the first, on ties) is the
 *  label.  Either output may be NULL.  @return as pf_model_grad(). */
PF_API int pf_model_evaluate(const pf_model *m, pf_workspace *ws,
			     const pf_model_batch *batch, double *loss,
			     uint32_t *correct, pf_error *err);

/*! pf_model_apply(): one SGD step, params -= lr * g (embag's table rows
 *  -= lr * embed_lr_scale * g).  Not to run while
 *  any pf_model_grad() on m does.  @return 0 or -EINVAL (g of another
 *  model shape). */
PF_API int pf_model_apply(pf_model *m, const pf_grad *g, float lr);

/*! pf_grad_average(): out = (in[0] + in[1] + ... + in[n-1]) / n, summed
 *  in exactly that order, so the bits do not depend on which core
 *  finished first.  out must not be one of in.  @return 0, -EINVAL
 *  (shapes differ, n == 0, out among in) or -ENOSPC (out was created
 *  with a sum_of too small for the union of the touched rows). */
PF_API int pf_grad_average(pf_grad *out, const pf_grad *const *in,
			   uint32_t n);

/*! pf_grad_scale(): g *= a (dense part and every sparse row). */
PF_API void pf_grad_scale(pf_grad *g, float a);

/*! pf_grad_dense(): the dense gradient (same layout as pf_model_dense). */
PF_API float *pf_grad_dense(pf_grad *g, size_t *n);

/*! pf_grad_rows(): the sparse embedding gradient: *ids (ascending, no
 *  repeats) and *rows ([count][*dim]).  @return the count (0 for
 *  softmax). */
PF_API uint32_t pf_grad_rows(pf_grad *g, const uint32_t **ids, float **rows,
			     uint32_t *dim);

/*! pf_grad_mask_words(): uint64_t words of a touched-row mask (one bit
 *  per vocabulary row; 0 for softmax). */
PF_API size_t pf_grad_mask_words(const pf_grad *g);
/*! pf_grad_mark_rows(): set the bits of g's touched rows in mask. */
PF_API void pf_grad_mark_rows(const pf_grad *g, uint64_t *mask);
/*! pf_grad_spread_rows(): re-lay g's sparse rows onto every row set in
 *  mask (which must include g's own), zero where g had none, so that
 *  gradients spread over the same mask have equal row lists and their
 *  rows can be summed element-wise.  @return 0, -EINVAL (mask lacks one
 *  of g's rows) or -ENOSPC (more rows than g can hold). */
PF_API int pf_grad_spread_rows(pf_grad *g, const uint64_t *mask);

/* ------------------------------------------------------------------ */
/* Topology: who this host is (host/topology.c)                         */
/* ------------------------------------------------------------------ */
/*
 * A pod is num_hosts hosts, each running one loader; this host is
 * host_index, in [0, num_hosts).  pf_topology_detect() reads it from, in
 * this order of precedence:
 *
 *   flags   --host-index, --num-hosts (pf_topology_flags; either may be
 *           given alone)
 *   mpi     OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE (Open MPI's mpirun),
 *           PMIX_RANK (PMIx launchers), PMI_RANK and PMI_SIZE (MPICH's
 *           hydra and other PMI launchers)
 *   tpu     TPU_WORKER_ID with the count of the comma-separated
 *           TPU_WORKER_HOSTNAMES, or CLOUD_TPU_TASK_ID (an index only)
 *   torch   RANK, WORLD_SIZE (torchrun).  LOCAL_RANK is the process's rank
 *           on its own machine, not the host index, and is not read.
 *   single  nothing above is set: host 0 of 1.
 *
 * Precedence says which source is named, not which one wins: every
 * variable that is set is read, and every value given must agree.  The
 * host index is the first one given in the order above, the host count
 * likewise, and the two may come from different sources (--host-index 3
 * with WORLD_SIZE=4 is host 3 of 4).  It is an error, never a guess, when
 *   - two sources (or two variables of one source) give different values
 *     for the index or for the count (the message names both, with the
 *     variable and the value, e.g. "contradicting host index: mpi
 *     OMPI_COMM_WORLD_RANK=2 but torch RANK=1");
 *   - a value is not a plain decimal number (digits only: "3x", "-1",
 *     "+1", " 1", "" are refused), is above UINT32_MAX, or a count is 0;
 *     TPU_WORKER_HOSTNAMES has an empty entry;
 *   - the index is not below the count;
 *   - an index is given but nothing gives the count, or a count is given
 *     but nothing gives the index (--num-hosts H alone, H > 1, would have
 *     every host read host 0's share: pass --host-index 0 to measure
 *     host 0's share on one machine).  --num-hosts 1 alone is host 0 of 1.
 *
 * An MPI rank, a torch RANK and a TPU worker id are taken to be the host
 * index: podfeed runs one process per host.  A launcher that starts one
 * process per core is not supported by this reading.
 */

typedef enum pf_topology_source {
	PF_TOPOLOGY_FLAGS = 0,
	PF_TOPOLOGY_MPI,
	PF_TOPOLOGY_TPU,
	PF_TOPOLOGY_TORCH,
	PF_TOPOLOGY_SINGLE,
} pf_topology_source;

/* What the command line said; a field whose has_ flag is false was not
 * given. */
typedef struct pf_topology_flags {
	bool has_host_index, has_num_hosts;
	uint32_t host_index, num_hosts;
} pf_topology_flags;

/* An environment lookup: the value of name, or NULL when it is not set.
 * The string must stay valid until pf_topology_detect() returns. */
typedef const char *(*pf_getenv_fn)(void *ctx, const char *name);

typedef struct pf_host_topology {
	uint32_t host_index, num_hosts;
	pf_topology_source source;	/* where the index came from (flags
					 * for --num-hosts alone; SINGLE when
					 * nothing was given) */
	unsigned sources;		/* bit (1u << s) for every source that
					 * gave a value, all of them agreeing */
} pf_host_topology;

/*! pf_topology_detect(): who this host is, from flags (may be NULL: none
 *  given) and the environment read through getenv_fn(ctx, name) (NULL:
 *  the process environment, through getenv(); pf_topology_envp_get with
 *  an envp array as ctx reads that array).  Reads only: no setenv, no
 *  global state, so it is thread-safe when getenv_fn is.
 *  @return 0 with *out, or -EINVAL with err naming the sources, variables
 *  and values that are malformed or contradict each other. */
PF_API int pf_topology_detect(pf_host_topology *out,
			      const pf_topology_flags *flags,
			      pf_getenv_fn getenv_fn, void *ctx, pf_error *err);

/*! pf_topology_envp_get(): a pf_getenv_fn over ctx, a NULL-terminated
 *  array of "NAME=VALUE" strings (like environ); the first entry of the
 *  name wins, as with getenv(). */
PF_API const char *pf_topology_envp_get(void *ctx, const char *name);

/*! pf_topology_source_name(): "flags", "mpi", "tpu", "torch", "single". */
PF_API const char *pf_topology_source_name(pf_topology_source s);

/*! pf_topology_format(): "host 2 of 4 (from mpi)", or with the other
 *  sources that gave a value and agreed, "host 2 of 4 (from mpi; also
 *  torch)".
 *  @return the full length (as snprintf; dst is always terminated). */
PF_API size_t pf_topology_format(const pf_host_topology *t, char *dst,
				 size_t cap);

/*! pf_topology_parse_u32(): a whole decimal number, digits only, at most
 *  UINT32_MAX (the reading of every flag and variable above).
 *  @return 0, -EINVAL (empty, a sign, a space, any other character) or
 *  -ERANGE (above UINT32_MAX). */
PF_API int pf_topology_parse_u32(const char *text, uint32_t *out);

/* ------------------------------------------------------------------ */
/* Scaling plan (host/scaling.c)                                        */
/* ------------------------------------------------------------------ */
/*
 * The pod's global batch is B = b x C x H (per-core batch, cores per
 * host, hosts).  Scaling out keeps b and shrinks the steps, so that the
 * run sees as many examples as before; pf_scaling_plan_compute() works
 * out the rest from one of two schedules:
 *
 * Steps (a reference run of global batch B0 for S0 steps): the plan runs
 * S0 x B0 / B steps.  When that is not whole the steps are rounded UP: a
 * scaled run never sees fewer examples than the reference, at most one
 * global batch more; the plan reports the exact quotient and the
 * difference in examples (1,000 x 100 steps at B = 3,000 is 33.3 steps:
 * 34 steps, 102,000 examples, 2,000 more than the reference).
 *
 * Epochs (N records, E passes): every epoch is floor(N / B) steps and
 * the N mod B records past the last whole step are dropped, as the loader
 * does (loader/plan.c); with remainder_wrap, ceil(N / B) steps and the
 * last step is filled by repeating records, as PF_REMAINDER_WRAP does.
 * Nothing else needs rescaling: the number of examples follows the data.
 *
 * Learning rate (given the reference's L0 and B0), by rule:
 *   none    L = L0
 *   linear  L = L0 x B / B0        (Goyal et al., 2017)
 *   sqrt    L = L0 x sqrt(B / B0)
 * Warm-up: the reference warm-up of W0 steps is kept as a number of
 * examples, like the steps: W = ceil(W0 x B0 / B) (the warm-up of a large
 * batch is just as long in epochs; Goyal et al. warm up for 5 epochs at
 * every batch size).  Without a reference batch W0 is taken as is.  The
 * rate ramps linearly from L / W at step 0 to L at step W - 1, then
 * stays at L (pf_scaling_lr_at()).
 *
 * Input bandwidth: given the step time and the bytes a record costs to
 * read (as stored, i.e. compressed: what loadbench's "MB/s read"
 * counts), a host must read b x C records per step and the pod B.
 */

typedef enum pf_lr_rule {
	PF_LR_NONE = 0,
	PF_LR_LINEAR,
	PF_LR_SQRT,
} pf_lr_rule;

#define PF_LR_RULES 3

typedef struct pf_scaling_input {
	uint64_t per_core_batch;	/* b >= 1 */
	uint64_t cores;			/* C >= 1, per host */
	uint64_t hosts;			/* H >= 1 */
	/* The reference run; 0 for what is not given. */
	uint64_t ref_global_batch;	/* B0 */
	uint64_t ref_steps;		/* S0 (needs B0) */
	double ref_lr;			/* L0 > 0, or 0 */
	uint64_t ref_warmup_steps;	/* W0 */
	pf_lr_rule rule;		/* linear and sqrt need B0 and L0 */
	/* The epoch schedule (instead of ref_steps); 0 when not given. */
	uint64_t records;		/* N */
	uint64_t epochs;		/* E (needs N; 0 with N means 1) */
	bool remainder_wrap;		/* PF_REMAINDER_WRAP instead of drop */
	/* Bandwidth; 0 when not given. */
	double step_time_ms;		/* one step's time */
	double record_bytes;		/* bytes read per record (compressed) */
	double measured_host_bytes_per_s; /* what loadbench read per host */
} pf_scaling_input;

typedef enum pf_scaling_mode {
	PF_SCALING_BATCH_ONLY = 0,	/* neither schedule given */
	PF_SCALING_STEPS,		/* from a reference run */
	PF_SCALING_EPOCHS,		/* from N records x E epochs */
} pf_scaling_mode;

typedef struct pf_scaling_plan {
	pf_scaling_mode mode;
	uint64_t host_batch;		/* b x C */
	uint64_t global_batch;		/* B = b x C x H */
	uint64_t total_cores;		/* C x H */
	double batch_ratio;		/* B / B0, 0 without B0 */
	/* Reference cores B0 / b when b divides B0, else 0. */
	uint64_t ref_cores;

	/* The schedule (STEPS and EPOCHS). */
	uint64_t steps;			/* train steps in all */
	uint64_t examples;		/* steps x B */
	/* STEPS: */
	uint64_t ref_examples;		/* S0 x B0 */
	double steps_exact;		/* S0 x B0 / B before rounding */
	bool steps_rounded;		/* S0 x B0 is not a multiple of B */
	uint64_t extra_examples;	/* examples - ref_examples */
	/* EPOCHS: */
	uint64_t steps_per_epoch;
	uint64_t dropped_per_epoch;	/* drop: N mod B */
	uint64_t repeated_per_epoch;	/* wrap: steps_per_epoch x B - N */
	uint64_t dropped, repeated;	/* over all epochs */

	/* Learning rate, when ref_lr was given. */
	bool has_lr;
	pf_lr_rule rule;
	double lr;			/* under rule */
	double lr_by_rule[PF_LR_RULES];	/* every rule, 0 where it needs B0 */
	uint64_t warmup_steps;		/* W */
	bool warmup_rounded;		/* W0 x B0 not a multiple of B */

	/* Bandwidth, when step_time_ms and record_bytes were given. */
	bool has_bandwidth;
	double host_records_per_s, pod_records_per_s;
	double host_bytes_per_s, pod_bytes_per_s;
	double measured_ratio;		/* measured / host need, 0 if none */
} pf_scaling_plan;

/*! pf_lr_rule_parse(): "none", "linear" or "sqrt".  @return 0 or -EINVAL. */
PF_API int pf_lr_rule_parse(const char *name, pf_lr_rule *rule);
PF_API const char *pf_lr_rule_name(pf_lr_rule rule);

/*! pf_scaling_plan_compute(): the plan for in (a pure function: no
 *  allocation, no global state; thread-safe).  @return 0 with *out,
 *  -EINVAL for impossible inputs (a zero batch, core or host count, S0
 *  without B0, steps and epochs both, a rule that needs what is not
 *  given, a warm-up longer than the run, fewer records than one global
 *  batch, a non-finite or negative rate, time or size) or -EOVERFLOW
 *  when a count does not fit in 64 bits; err says which input. */
PF_API int pf_scaling_plan_compute(pf_scaling_plan *out,
				   const pf_scaling_input *in, pf_error *err);

/*! pf_scaling_lr_at(): the learning rate at step (0-based) under the
 *  plan's warm-up: lr x (step + 1) / W during the first W steps, lr
 *  after.  0 when the plan has no rate. */
PF_API double pf_scaling_lr_at(const pf_scaling_plan *p, uint64_t step);

/* ------------------------------------------------------------------ */
/* The pod                                                              */
/* ------------------------------------------------------------------ */
/*
 * This process's place among the hosts and the collectives the compute
 * stage needs.  Started by an MPI launcher (mpirun) in a build with MPI,
 * ranks are hosts and the collectives are MPI's; otherwise the pod is
 * this host alone and each collective leaves its buffer as it is.  Only
 * the thread that opened the pod may call the collectives.
 */
typedef struct pf_pod pf_pod;

/*! Whether an MPI launcher started this process (its environment says). */
PF_API bool pf_pod_launched(void);
/*! pf_pod_open(): join the pod.  @return 0, -ENOTSUP when launched by MPI
 *  into a program without MPI, -EIO when MPI fails to start; err says
 *  which.  libpodfeed.so has no MPI (it does not link libmpi): under it
 *  the pod is this host alone.  podfeed's tools link the MPI pod. */
PF_API int pf_pod_open(pf_pod **out, pf_error *err);
PF_API void pf_pod_close(pf_pod *p);
PF_API uint32_t pf_pod_rank(const pf_pod *p);
PF_API uint32_t pf_pod_size(const pf_pod *p);
/*! "mpi" or "single". */
PF_API const char *pf_pod_transport(const pf_pod *p);
/*! In place, over every host: the sum (or bitwise or) of buf[0..n). */
PF_API int pf_pod_sum_f32(pf_pod *p, float *buf, size_t n, pf_error *err);
PF_API int pf_pod_sum_f64(pf_pod *p, double *buf, size_t n, pf_error *err);
PF_API int pf_pod_or_u64(pf_pod *p, uint64_t *buf, size_t n, pf_error *err);
/*! len bytes from every host into all (size x len bytes, rank order) on
 *  rank 0; all is ignored elsewhere. */
PF_API int pf_pod_gather(pf_pod *p, const void *mine, size_t len, void *all,
			 pf_error *err);
PF_API int pf_pod_barrier(pf_pod *p, pf_error *err);
/*! len bytes from every host into all (size x len bytes, rank order) on
 *  every host.  pod is a pf_pod *: the signature is podfeed.h's
 *  pf_allgather_fn, so that a pod opening a dataset together sets
 *  `cfg.allgather = pf_pod_allgather; cfg.allgather_ctx = pod;`.
 *  @return 0, -EINVAL for len over INT_MAX, -EIO when MPI fails. */
PF_API int pf_pod_allgather(void *pod, const void *mine, size_t len, void *all,
			    pf_error *err);

/* ------------------------------------------------------------------ */
/* The trainer (host/train.c)                                           */
/* ------------------------------------------------------------------ */
/*
 * Data-parallel training of one model on the loader's batches: one
 * worker thread per core (core 0 runs on the caller's thread), each
 * running pf_model_grad() on its core's block of the batch; then, on the
 * caller's thread, the cores' gradients averaged in core order
 * (pf_grad_average), summed over the pod's hosts (embag: the mask OR,
 * spread and sums described under Models above) and scaled by 1/hosts,
 * and one SGD step at the given rate.  No result depends on which thread
 * finishes first: the same data, seed and topology give the same bits.
 *
 * The spec's features map onto the model (as the loader lays them out,
 * struct pf_spec and struct pf_batch of loader/podfeed.h):
 *   softmax  input float32[dim]; label int32[1]
 *   embag    input int32[seq_len] token ids, the feature's pad value
 *            being the pad id; label int32[1]
 * The input feature is the one named, or else the only feature of the
 * input's dtype besides the label; the label is the one named, or else
 * the feature called "label".
 *
 * Every host of a pod must call pf_trainer_step() the same number of
 * times with the same lr: each call is a collective.  A host whose
 * gradient fails (a label out of range) makes every host's call fail at
 * the same step, rather than leave the others waiting in an all-reduce.
 */
struct pf_spec;
struct pf_batch;

typedef struct pf_trainer pf_trainer;

typedef struct pf_trainer_config {
	/* kind, classes, seed, kernels; embag: vocab, embed_dim,
	 * embed_lr_scale.  dim, seq_len, pad_id and max_rows are taken
	 * from the spec and per_core_batch. */
	pf_model_config model;
	const struct pf_spec *spec;	/* the loader's (pf_loader_spec()) */
	const char *input;		/* input feature; NULL: the one fitting */
	const char *label;		/* label feature; NULL: "label" */
	uint32_t cores;			/* worker threads, >= 1 */
	uint32_t per_core_batch;	/* rows of every core's block */
	pf_pod *pod;			/* NULL: this host alone */
} pf_trainer_config;

/* What one step did. */
typedef struct pf_train_step {
	double loss;		/* the step's mean training loss over the pod */
	uint64_t compute_ns;	/* batch in hand to model updated: gradients,
				 * host average, pod all-reduce, update */
	uint64_t reduce_ns;	/* of which the pod's collectives */
} pf_train_step;

/* Held-out sums; add batches with pf_trainer_evaluate(), then
 * pf_trainer_eval_reduce() for the pod's. */
typedef struct pf_eval_sums {
	double loss_sum;	/* cross-entropy summed over rows */
	uint64_t correct;	/* rows whose arg-max is the label */
	uint64_t rows;
} pf_eval_sums;

/*! pf_trainer_create(): the model (parameters from cfg->model.seed, the
 *  same on every host) and the workers.  @return 0 with *out (free with
 *  pf_trainer_free()), -EINVAL when the spec does not fit the model (err
 *  says which feature and why, e.g. "softmax: input feature 'x' is
 *  int64[256]; it must be float32"), or when the model configuration is
 *  bad; -ENOMEM, -EAGAIN (no thread). */
PF_API int pf_trainer_create(pf_trainer **out, const pf_trainer_config *cfg,
			     pf_error *err);
/*! Stop the workers and free everything.  NULL is a no-op. */
PF_API void pf_trainer_free(pf_trainer *t);
/*! The model being trained (owned by the trainer). */
PF_API pf_model *pf_trainer_model(pf_trainer *t);
/*! The spec features used: indices into the spec. */
PF_API void pf_trainer_features(const pf_trainer *t, uint32_t *input,
				uint32_t *label);

/*! pf_trainer_step(): one training step on batch b (cores blocks of
 *  per_core_batch rows laid out by the spec) at rate lr.  A collective
 *  over the pod.  @return 0 with *out (may be NULL), -EINVAL (a batch of
 *  another shape, a bad label or token id: err names the core and row;
 *  or another host's data was bad), -EPROTO (the hosts are at different
 *  steps), -EIO (the pod's transport failed).  The model is not changed
 *  by a failed step. */
PF_API int pf_trainer_step(pf_trainer *t, const struct pf_batch *b, float lr,
			   pf_train_step *out, pf_error *err);

/*! pf_trainer_evaluate(): forward only over batch b, on the workers;
 *  adds the host's loss sum, correct rows and rows to *sums (summed in
 *  core order).  Not a collective.  @return 0 or -EINVAL as above. */
PF_API int pf_trainer_evaluate(pf_trainer *t, const struct pf_batch *b,
			       pf_eval_sums *sums, pf_error *err);
/*! pf_trainer_eval_reduce(): *sums summed over the pod (a collective).
 *  @return 0 or -EIO. */
PF_API int pf_trainer_eval_reduce(pf_trainer *t, pf_eval_sums *sums,
				  pf_error *err);

/*! pf_trainer_steps(): steps taken so far. */
PF_API uint64_t pf_trainer_steps(const pf_trainer *t);

/*! pf_model_hash(): FNV-1a over the bits of every parameter (dense, then
 *  the table), to compare models across hosts and runs. */
PF_API uint64_t pf_model_hash(pf_model *m);

/* ------------------------------------------------------------------ */
/* Step timing and the train and pod reports (host/report.c)            */
/* ------------------------------------------------------------------ */
/*
 * A training run's log: each step's input wait (the consumer's time in
 * pf_loader_next() for that step's batch), its compute (pf_train_step's,
 * the pod's collectives among it), loss and rate; the loss curve; the
 * held-out evaluations.  From it come the step times and the verdict: a
 * step is input-bound when its input wait is more than 5% of its time
 * (wait + compute), and the run is input-bound when more than half its
 * steps are.  The first step, which waits for the pipeline to fill, is
 * left out of both (its wait is the time to the first batch).  The report
 * sections (loader/podfeed.h, "Reports") say the same as loadbench.
 */
struct pf_report;
struct pf_loader_metrics;
typedef struct pf_train_log pf_train_log;

#define PF_INPUT_BOUND_SHARE 0.05	/* of a step's time, waited */
#define PF_LOSS_WINDOW 10u		/* steps averaged at either end */

/* A point of the loss curve. */
typedef struct pf_train_point {
	uint64_t step;		/* steps done */
	double loss;		/* mean training loss of the steps since the last point */
	uint64_t steps;		/* how many steps that is */
	double lr;		/* the rate of the last step */
} pf_train_point;

/* A held-out evaluation. */
typedef struct pf_train_eval {
	uint64_t step;		/* after this many steps */
	double loss, accuracy;	/* mean cross-entropy; share of arg-max == label */
	uint64_t records;	/* evaluated */
	uint64_t dropped;	/* not evaluated: the remainder of a global batch */
} pf_train_eval;

/* The log's figures; times in ms, over the steps after the first. */
typedef struct pf_train_figures {
	uint64_t steps, timed_steps, bound_steps;
	double step_ms_p50, step_ms_p90, step_ms_p99;
	double compute_ms_p50, wait_ms_p50, reduce_ms_p50;
	double wait_fraction;		/* waited / (waited + computed) */
	double bound_fraction;		/* bound_steps / timed_steps */
	double first_wait_ms;		/* the first step's wait */
	double loss_first, loss_last;	/* means of the first and last
					   PF_LOSS_WINDOW steps */
	double loss_final_step;
	const char *verdict;		/* "input-bound" or "compute-bound" */
} pf_train_figures;

/*! pf_train_log_create(): an empty log that closes a curve point every
 *  log_every steps (0: only at pf_train_log_close()).  @return 0 with *out
 *  (free with pf_train_log_free()), or -ENOMEM. */
PF_API int pf_train_log_create(pf_train_log **out, uint64_t log_every);
PF_API void pf_train_log_free(pf_train_log *l);
/*! pf_train_log_step(): one step: its batch's wait, what pf_trainer_step()
 *  said, its rate.  @return 1 with *point (may be NULL) when the step
 *  closed a curve point, 0, or -ENOMEM. */
PF_API int pf_train_log_step(pf_train_log *l, uint64_t wait_ns, const pf_train_step *st,
			     double lr, pf_train_point *point);
/*! pf_train_log_close(): at the end: the last curve point when steps were
 *  taken since one.  @return 1 with *point (may be NULL), 0, or -ENOMEM. */
PF_API int pf_train_log_close(pf_train_log *l, pf_train_point *point);
/*! pf_train_log_eval(): a held-out evaluation after the steps so far:
 *  sums over the pod (pf_trainer_eval_reduce()), dropped records; the
 *  final one is the report's "eval", the others its "eval_curve".
 *  @return 0 with *out (may be NULL), or -ENOMEM. */
PF_API int pf_train_log_eval(pf_train_log *l, const pf_eval_sums *sums, uint64_t dropped,
			     bool final, pf_train_eval *out);
/*! pf_train_log_figures(): the figures so far.  @return 0 or -ENOMEM. */
PF_API int pf_train_log_figures(const pf_train_log *l, pf_train_figures *out);

/*! pf_report_add_train(): the "train" section: the model and its
 *  kernels, the rate from the plan (in its input, plan what
 *  pf_scaling_plan_compute() made of it), the loss at both ends, the
 *  held-out evaluation, step times, GFLOP/s, the input wait and the
 *  verdict, the loss curve.  @return 0, -EEXIST, -ENOMEM; err says which. */
PF_API int pf_report_add_train(struct pf_report *r, pf_trainer *t,
			       const pf_scaling_input *in, const pf_scaling_plan *plan,
			       const pf_train_log *log, pf_error *err);

/*! pf_report_add_pod(): a collective: every host of the pod calls it
 *  with its own figures (host_index, the loader's metrics m over seconds;
 *  t and log when it trains, else NULL), and host 0 adds the "pod"
 *  section to r (the others' r may be NULL): throughput in all (records
 *  over the slowest host's time) and per host, the straggler, every
 *  host's steps and, with a model, whether every host holds the same
 *  parameters.  A pod of one host (no MPI) adds nothing.  @return 0, 1 on
 *  host 0 when the hosts took different numbers of steps (the section
 *  says so; every host must take the same), -EIO (the pod's transport),
 *  -EEXIST, -ENOMEM. */
PF_API int pf_report_add_pod(struct pf_report *r, pf_pod *pod, uint32_t host_index,
			     const struct pf_loader_metrics *m, double seconds, pf_trainer *t,
			     const pf_train_log *log, pf_error *err);

/* One rung of a scaling ladder (loadbench ladder): a pod of hosts hosts,
 * as its report said it, and the step plan it ran. */
typedef struct pf_ladder_rung {
	uint32_t hosts;
	double records_per_s;		/* the pod's */
	double per_host_records_per_s;
	bool steps_equal;		/* every host took the same steps */
	uint64_t global_batch;		/* its step plan: records a step, pod-wide */
	uint64_t steps;			/* steps each host took */
	double lr;			/* the learning rate (0: no model) */
} pf_ladder_rung;

#define PF_LADDER_EFFICIENCY_FLOOR 0.90

/*! pf_report_add_ladder(): the "ladder" section of n rungs (ascending
 *  hosts): per rung the scaling efficiency, its records/s a host over the
 *  first rung's (the first rung standing in for one host when 1 is not a
 *  rung), the linear ideal (the first rung's rate a host times the
 *  hosts), and the first rung under 90%; its members are the report's
 *  own ("rungs", "first_under_90"), as loadbench ladder --json prints
 *  them.  @return 0, -EINVAL (no rung, hosts not ascending), -EEXIST,
 *  -ENOMEM. */
PF_API int pf_report_add_ladder(struct pf_report *r, const pf_ladder_rung *rungs, size_t n,
				pf_error *err);

#ifdef __cplusplus
}
#endif

#endif
