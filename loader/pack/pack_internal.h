/* SPDX-License-Identifier: Apache-2.0 */
/* Private to loader/: the pack room (loader/pack/): packed sequences
 * (pack_length), a loader over an inner pipeline whose records the
 * packer (transform/pack.c) places into rows of pack_length values.  The
 * packing loader and its run (pack.c; its rows packed: pack_rows.c), its
 * checkpoints (pack_state.c), direct placement by the inner loader's
 * decode threads (pack_direct.c, through the pipeline's record hook),
 * and every record's packed lengths
 * gathered before the first batch, each file read once by one host of a
 * pod (pack_gather.c); a packed mixture (pack_mix.c) and its elastic
 * resume (pack_mix_elastic.c); skip_steps and the records of a step
 * (pack_skip.c).  Above the pipeline and the mixture: it creates, reads
 * and frees an inner pipeline or mixture; what the plan says of the rows
 * is loader/plan/pack_plan.c's and pack_course.c's. */
#ifndef PF_PACK_INTERNAL_H
#define PF_PACK_INTERNAL_H

#include "mixture_internal.h"
#include "pf_transform.h"
#include "pipeline_internal.h"
#include "spec_internal.h"

/* pack_gather.c: packing's lengths, and what reading them cost this host. */
typedef struct pf_pack_lengths_stats {
	uint64_t from_index;	/* records whose lengths an index told */
	uint64_t tails;		/* index tails this host read for them */
	uint64_t files;		/* files this host read whole for them (at the
				   open's count too) */
	uint64_t exchanged;	/* the pod's payloads, every host's bytes */
} pf_pack_lengths_stats;
/* Every record's length of each of the nf packed features (lspec's) in
 * the dataset order of inner's dataset (*out: pf_free(), *nrecords of
 * them): each file's read once, by one host of a pod with cfg's
 * all-gather (pack_gather.c's header says how), and exchanged.  status
 * < 0: this host failed before (err says why; inner may be NULL) and
 * only takes its part in the pod's exchange.  @return 0 or <0 with err,
 * the same on every host of a pod (naming the host that failed). */
int pf_pack_lengths(const pf_pipe *inner, const pf_loader_config *cfg, const pf_spec *lspec,
		    uint32_t nf, int status, pf_error *err, uint32_t **out, uint64_t *nrecords,
		    pf_pack_lengths_stats *st);
/* One file's entry of a host's payload at p[*pos..len): its source byte
 * and values varints into dst (*from_index: its index told them);
 * *pos past it.  @return 0, or -EBADMSG with why (the byte and what). */
int pf_pack_lengths_unpack(const uint8_t *p, size_t len, size_t *pos, uint64_t values,
			   uint32_t *dst, bool *from_index, char *why, size_t whylen);

/* Records per inner step, and the least values of a concat feature's
 * inner row (longer records are cut there, and counted). */
#define PF_PACK_GROUP 32u
#define PF_PACK_CONCAT_CAP 16384u

/* Where the packer was at the start of an inner batch (or of the run, or
 * of an epoch): what a saved state rebuilds the rows not yet delivered
 * from (pf_pack_save_state()). */
typedef struct pack_snap {
	uint32_t epoch;
	uint64_t step, gstep;	/* the inner batch's (the inner loader's position) */
	bool fresh;		/* the epoch's start, before its first inner batch */
	uint64_t consumed;	/* inner records taken in the epoch before it */
	pf_packer packer;
	/* A packed mixture's: where its sources were (pf_mixture_mark()),
	 * in snap_marks; pushed, the snapshot owns them. */
	pf_mix_mark *marks;
} pack_snap;

typedef struct pack_out {
	struct pack_out *next;		/* free list */
	pf_batch batch;
	pf_core_batch *core;
	pf_tensor *tensors;
	uint8_t *valid;
	uint8_t *mem;
	uint32_t *fill;			/* [row][feature]: values written from 0 */
	uint64_t segments, values;	/* of its rows, for the metrics */
} pack_out;

/* Direct placement (pack_direct.c): inner groups planned ahead, each
 * record's pieces and their output rows, for the decode threads to write
 * the record straight into.  Group (epoch, step) is at groups[step %
 * ngroups] when its tag says so; ngroups: the inner loader's batch slots
 * (how far its decode threads may be ahead), at most PF_PACK_AHEAD_MAX. */
#define PF_PACK_AHEAD_MAX 256u

typedef struct pack_dest {
	pack_out *o;		/* NULL: the piece's row is not delivered */
	uint32_t core, row;
} pack_dest;

enum { PACK_REC_WAITING = 0, PACK_REC_PLACED, PACK_REC_DIFFERS };

typedef struct pack_rec {
	uint32_t len[PF_PACK_MAX_FEATURES];	/* planned (capped at cap) */
	uint32_t piece0, npieces;		/* in the group's pieces */
	uint32_t state;		/* PACK_REC_*, set by the decode thread */
	/* The packer after it: its rows opened and final, and what it
	 * counted of it (the consumer's packer takes them, not placing it
	 * again). */
	uint64_t opened, closed;
	uint64_t values, truncated_values;
	bool empty, truncated;
	/* The decode thread's: the lengths it found (capped at cap), and
	 * what the inner row's cap cut (concat), as pack_rows.c's place() counts
	 * it. */
	uint32_t got[PF_PACK_MAX_FEATURES];
	uint64_t cut_values;
	bool cut;
} pack_rec;

typedef struct pack_group {
	uint64_t tag;		/* atomic: pack_tag(epoch, step); 0: none */
	pack_rec rec[PF_PACK_GROUP];
	pf_pack_piece *pieces;	/* [npieces] */
	pack_dest *dest;
	pf_packer after;	/* the packer after its last record */
} pack_group;

struct pf_pack_direct {	/* pf_pack_direct */
	pf_record_hook hook;	/* the inner loader's decode threads call it */
	pack_group *groups;
	uint32_t ngroups;
	uint32_t npieces;			/* room in a group's pieces */
	uint32_t nf, cap, L;
	uint32_t fin[PF_PACK_MAX_FEATURES], fout[PF_PACK_MAX_FEATURES];
	size_t elem[PF_PACK_MAX_FEATURES];
	size_t soff[PF_PACK_MAX_FEATURES];	/* feature f in a worker's scratch */
	size_t sbytes;				/* a worker's scratch */
	size_t lenoff;				/* its lengths, in it */
	uint8_t *scratch;			/* [nworkers x sbytes] */
	unsigned nworkers;
	/* A packed mixture's: each source's decode threads' hook (its
	 * records' places asked of the mixture), their scratch source k's
	 * worker w's at k x maxw + w. */
	struct pack_src_hook *src_hooks;
	pf_mixture *mix;
	unsigned maxw;
};

/* The record hook of a packed mixture's source k. */
typedef struct pack_src_hook {
	pf_record_hook hook;
	struct pf_pack_direct *d;
	size_t k;
} pack_src_hook;

static inline uint64_t pack_tag(uint32_t epoch, uint64_t step)
{
	return ((uint64_t)epoch << 40 | step) + 1;
}

typedef struct pf_pack_run pf_pack_run;
typedef struct pf_pack_direct pf_pack_direct;
typedef struct pf_packing pf_packing;

struct pf_pack_run {
	pf_pipe *inner;		/* NULL for a packed mixture */
	/* A packed mixture (pack_mix.c): its inner mixture instead of a
	 * pipeline, its sources' records' lengths (src_lengths[k], dataset
	 * order, nf a record), the inner rows' _source tensor, and what each
	 * source gave the rows handed out: records and tokens (values of
	 * the first packed feature). */
	pf_mixture *mix;
	size_t nsrc;
	uint32_t **src_lengths;
	uint64_t *src_nlengths;
	uint32_t src_tensor;
	uint64_t *src_records, *src_tokens;
	pf_mix_mark *snap_marks;	/* [snaps_cap x nsrc] */
	pf_mix_mark *mark_next;		/* [nsrc]: before the inner batch taken */
	/* The outer spec's _source (int32[L], each value's source, -1 in
	 * the padding; source_feature): its index, or UINT32_MAX. */
	uint32_t fsrc;
	pf_order inner_order;		/* the inner loader's, as the plan reads it */
	pf_packer packer;
	uint32_t nf;				/* packed features */
	uint32_t fin[PF_PACK_MAX_FEATURES];	/* inner spec: values */
	uint32_t fout[PF_PACK_MAX_FEATURES];	/* outer spec: values (+1 ids, +2 positions) */
	uint32_t cap;				/* values of an inner row */
	uint32_t L, B;
	size_t *toff;				/* outer tensor offsets in a core block */
	size_t block_bytes;

	pack_out *outs, *free;
	uint8_t *outmem;			/* the outs' blocks, one region */
	unsigned nouts, window;
	pack_out **inprog;			/* [window]: step j at j % window */
	unsigned held, held_max;

	/* The epoch being packed: the next step to hand out, the rows
	 * opened, those final; its end. */
	uint32_t epoch;
	uint64_t step, opened, closed;
	bool epoch_done;
	uint64_t epoch_steps;		/* planned: every host's */
	uint64_t epoch_rows;		/* planned: this host's */
	bool inner_done, started;
	/* Values of the first packed feature and records in rows made past
	 * the epoch's last step (dropped). */
	uint64_t dropped_tokens, dropped_records;

	/* Every record's packed lengths, in dataset order (pack_gather.c),
	 * and what reading them cost this host. */
	uint32_t *lengths;
	uint64_t nlengths;
	pf_pack_lengths_stats lstats;
	uint64_t gstep;

	/* A record's pieces: an inner row holds at most cap values, which
	 * concat spreads over at most cap / L + 2 rows. */
	pf_pack_piece *pieces;
	uint32_t npieces;

	/* The inner batch being placed, and the next record of it. */
	pf_batch *ib;
	uint32_t icore, irow;

	/* Checkpoints: the packer at the start of each inner batch since the
	 * last from which the rows not yet delivered can be rebuilt (oldest
	 * first), the inner records taken in the epoch, and a restored
	 * state's inner position, handed to the inner loader. */
	pack_snap *snaps;
	size_t nsnaps, snaps_cap;
	uint64_t consumed;
	/* A resume: the states decoded (until the plan is made), whether on
	 * another topology, this host's packing part, and the inner loader's
	 * states (without it) handed to the inner loader. */
	pf_state *rst;
	size_t nrst;
	bool elastic;
	struct pf_pack_state own;
	uint8_t **resume_blobs;
	pf_state_blob *resumes;
	size_t nresumes;
	/* Steps of the epoch delivered before a resume on another topology
	 * inside it (the rows and steps above count from there). */
	uint64_t step_base;

	/* Direct placement (pack_direct.c; NULL: off): this host's lengths
	 * in the inner order of the epoch (NULL: not planned ahead this
	 * epoch), the planner's packer and its next inner step, and the
	 * records the decode threads placed. */
	struct pf_pack_direct *direct;
	uint32_t *order;	/* records order0 .. norder's lengths, in order */
	uint64_t order0, norder;
	uint64_t order_room;	/* a packed mixture's: records order has room for */
	uint32_t order_epoch;
	pf_packer ahead;
	uint64_t ahead_step;
	unsigned window_extra;		/* steps in progress for the plan ahead */
	bool ahead_on;
	uint64_t direct_records;

	/* Where the run started before skip_steps moved it, as the plan
	 * reads it (pack_skip.c): whose packed steps pf_loader_records_of()
	 * says; its inner start is a copy of the inner loader's. */
	pf_pack_course course;
	bool have_course;
	/* A packed mixture's (its course is the plan's walk from the run's
	 * start, pf_pack_mixed_walk()): the packed step and global step it
	 * started at, before skip_steps. */
	uint64_t mix_step0, mix_gstep0;
	/* A packed mixture's run cut among the hosts of another topology
	 * inside it (an elastic resume, or a state of such a run): its plan
	 * is the one made at the cut (kept in its states); the pieces of
	 * records and their values in the rows the old hosts had in
	 * progress, lost there. */
	bool recut;
	bool elastic_now;		/* cut here: an elastic resume */
	uint64_t skipped_total;		/* the job's packed steps skipped (states say it) */
};

/* pack_state.c: checkpoints.  pf_pack_push_snap(): a checkpoint of the
 * packer at an inner batch's (or the run's, or an epoch's) start.
 * pf_pack_restore(): the states of cfg->resume decoded and checked, the
 * inner loader's part of them in pk->resume (before the inner loader is
 * made).  pf_pack_restore_plan(): after it is made, the packer, the steps
 * and the epoch's plan the states say (or, on another topology, planned
 * from the hosts' shares of what the states left).  @return 0 or <0
 * (err). */
int pf_pack_push_snap(pf_pack_run *pk, const pack_snap *sn);
void pf_pack_release_snaps(pf_pack_run *pk);
int pf_pack_restore(pf_pack_run *pk, const pf_loader_config *cfg, const pf_topology *topo,
		    pf_error *err);
int pf_pack_restore_plan(pf_packing *l, pf_pack_run *pk, pf_error *err);
void pf_pack_restore_free(pf_pack_run *pk, bool blobs);
/* pack.c: epoch e's steps, every host's (pack_plan.c), and this host's
 * rows. */
int pf_pack_plan_epoch(pf_packing *l, pf_pack_run *pk, uint32_t e, pf_error *err);
/* pack.c: the output batches (the steps in progress, and those a
 * consumer holds). */
int pf_pack_make_outs(pf_packing *l, pf_pack_run *pk, pf_error *err);
/* pack_rows.c: a fresh output batch for step j (inprog); the padding of
 * a step's rows after their values; an output batch back to the free
 * list; packing until step pk->step can be handed out (1), the run is
 * over (0), or an error (<0; -ETIMEDOUT changes nothing). */
pack_out *pf_pack_take_out(pf_packing *l, pf_pack_run *pk, uint64_t j);
void pf_pack_pad_out(pf_packing *l, pf_pack_run *pk, pack_out *o);
void pf_pack_give_back(pf_pack_run *pk, pack_out *o);
int pf_pack_ready(pf_packing *l, pf_pack_run *pk, uint64_t timeout_ns);

/* pack_direct.c.  pf_pack_direct_create(): direct placement for the
 * inner loader's decode threads in fail mode (0; skip mode, or
 * PODFEED_PACK_DIRECT=0: nothing).
 * pf_pack_direct_epoch(): this host's order of epoch e planned (or not:
 * on another topology inside it).  pf_pack_direct_plan(): the groups
 * from inner step `step` of the epoch on planned, as far as the steps in
 * progress reach, and at most as far as the inner loader's slots (every
 * group before `step` placed, none after); start: the packer is at
 * group `step`'s start (planned from there if the plan is not ahead).
 * pf_pack_direct_group(): inner batch ib's plan, NULL when not planned.
 * A packed mixture's (pk->mix): its run is epoch 0, its order this
 * host's rows of the run (pf_pack_plan_mixed()), planned by pack_mix.c;
 * pf_pack_direct_wanted() says whether to keep the mixture's inner
 * index for it. */
bool pf_pack_direct_wanted(const pf_loader_config *cfg);
int pf_pack_direct_create(pf_packing *l, pf_pack_run *pk);
void pf_pack_direct_free(pf_pack_run *pk);
int pf_pack_direct_epoch(pf_packing *l, pf_pack_run *pk, uint32_t e);
void pf_pack_direct_plan(pf_packing *l, pf_pack_run *pk, uint32_t epoch, uint64_t step,
			 bool start);
pack_group *pf_pack_direct_group(pf_pack_run *pk, uint32_t epoch, uint64_t step);

/* A packing loader: its face, the config, topology and packed spec it
 * hands batches of, its metrics and its errors; the run. */
struct pf_packing {
	pf_loader face;
	pf_loader_config cfg;
	pf_topology topo;
	pf_spec spec;
	uint32_t host_batch;	/* rows per host batch */
	uint32_t epochs;
	uint64_t steps_per_epoch;
	uint64_t create_start_ns;	/* when pf_loader_create() began */
	uint64_t memory_bytes;	/* its own pools' (the inner loader's apart) */
	pthread_mutex_t mu;	/* m, failed, err */
	pf_loader_metrics m;
	bool failed;
	pf_error err;
	/* The last next() was a caller's mistake (pipe.c's the same). */
	bool misused;
	pf_error misuse;
	pf_pack_run *pack;
};

/* pack_mix.c: a packed mixture.  pf_pack_mix_create(): the inner mixture
 * (icfg its config: one core of PF_PACK_GROUP records a step), every
 * source's records' lengths gathered (a pod's hosts each reading its
 * share) before its run's shape is fixed (tokens weighed, mix_unit), and
 * the run planned as one packed epoch, or the state's plan taken (the
 * same topology only).  pf_pack_mix_save_state(): the inner mixture's
 * state at the checkpoint sn and the packer there (q).  The source of
 * record r of the inner batch ib (pf_pack_mix_source()), or
 * UINT32_MAX. */
int pf_pack_mix_create(pf_packing *l, pf_pack_run *pk, const pf_loader_config *cfg,
		       pf_loader_config *icfg, const pf_spec *inner_spec, const pf_spec *lspec,
		       pf_error *err);
int64_t pf_pack_mix_save_state(pf_packing *l, const pack_snap *sn,
			       const struct pf_pack_state *q, void *buf, size_t cap);
uint32_t pf_pack_mix_source(const pf_pack_run *pk, const pf_batch *ib, uint32_t r);
/* The mixture m's records as the plan reads them (pf_mixed: its
 * sources' orders and lengths, its deal, its steps to its end), for this
 * loader's hosts; deal: through a copy of its schedule (any thread;
 * else the mixture's own, the consumer's thread).  Release it with
 * pf_pack_mix_mixed_release().  @return 0 or -ENOMEM. */
int pf_pack_mix_mixed(const pf_packing *l, const pf_pack_run *pk, pf_mixture *m, bool deal,
		      pf_mixed *mx);
void pf_pack_mix_mixed_release(pf_mixed *mx);

/* pack_mix_elastic.c.  pf_pack_mix_elastic(): the states of cfg->resume
 * (every old host's, of another topology) as the inner mixture resumes
 * them elastically: *out, each source past its packer's rows, no packing
 * part (pf_pack_mix_elastic_free()); the packer empty, the run cut, its
 * steps going on from the old hosts', what they had in progress counted
 * as dropped.  pf_pack_mix_courses(): each source's course (every host's,
 * or this host's alone) into cs (pf_pack_mix_courses_free()).
 * pf_pack_mix_walker(): this host's walk from the run's start (before
 * skip_steps) through its courses, any thread (mx:
 * pf_pack_mix_mixed_release(), cs: pf_pack_mix_courses_free()).  @return
 * 0 or <0 with err. */
typedef struct pf_mix_course_set {
	mix_course *c;
	size_t n;
} pf_mix_course_set;
int pf_pack_mix_elastic(pf_packing *l, pf_pack_run *pk, const pf_loader_config *cfg,
			pf_state_blob **out, uint8_t ***mem, pf_error *err);
void pf_pack_mix_elastic_free(pf_state_blob *blobs, uint8_t **mem, size_t n);
int pf_pack_mix_courses(const pf_packing *l, const pf_pack_run *pk, bool every,
			pf_mix_course_set *cs, pf_error *err);
void pf_pack_mix_courses_free(pf_mix_course_set *cs);
int pf_pack_mix_walker(const pf_packing *l, const pf_pack_run *pk, pf_mixed *mx,
		       pf_mix_course_set *cs, pf_error *err);

/* pack_skip.c: the run's start kept as the plan reads it (after the
 * restore and its plan), skip_steps applied to it (the inner loader's
 * start moved, gated, before it reads: the packer where the plan says),
 * and pf_loader_records_of() and pf_loader_file() of a packing loader.
 * @return 0 or <0 with err. */
int pf_pack_keep_course(pf_packing *l, pf_pack_run *pk);
int pf_pack_skip_steps(pf_packing *l, pf_pack_run *pk, uint64_t n, pf_error *err);
int64_t pf_pack_records_of(const pf_packing *l, uint64_t step, pf_record_ref *out, size_t cap,
			   pf_error *err);
/* A packed mixture's skip_steps (pack_mix.c's skip(), before its
 * ready()): n packed steps from pk->step, every host's steps planned over
 * every_host as far as the new first one (NULL: pk->epoch_steps are
 * theirs; -ERANGE with err naming the run's last step when it is past
 * it), this host's packer walked over mx (pf_pack_mix_walker(): from the
 * run's start) to the last mixture step before which it has opened no
 * row of it, at or after the mixture's first step `first`; *steps: the
 * mixture's steps to skip to it; the packer, the packed step and the
 * metrics set there.  @return 0 or <0 with err. */
int pf_pack_mix_skip(pf_packing *l, pf_pack_run *pk, const pf_mixed *every_host,
		     const pf_mixed *mx, uint64_t first, uint64_t n, uint64_t *steps,
		     pf_error *err);
/* A packed mixture's pf_loader_records_of() (pf_pack_records_of()
 * calls it): the pieces of packed step `step` of this host, each with
 * its source, that source's epoch, the file and the record, from this
 * host's walk over the plan (any thread).  @return the refs' count or
 * <0 with err. */
int64_t pf_pack_mix_records_of(const pf_packing *l, uint64_t step, pf_record_ref *out,
			       size_t cap, pf_error *err);
const char *pf_pack_file(const pf_packing *l, uint32_t file);

/* pack_state.c: pf_loader_save_state() of a packing loader. */
int64_t pf_pack_save_state(pf_packing *l, void *buf, size_t cap);

/* pack.c: the packing loader (pf_packing_ops its face). */
extern const pf_loader_ops pf_packing_ops;
int pf_pack_create(pf_loader **out, const pf_loader_config *cfg, pf_error *err);

#endif
