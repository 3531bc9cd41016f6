/* SPDX-License-Identifier: Apache-2.0 */
/* Private to packing (pack.c, pack_state.c): the packing run's state. */
#ifndef PF_PACK_INTERNAL_H
#define PF_PACK_INTERNAL_H

#include "pipeline_internal.h"
#include "pf_transform.h"
#include "spec_internal.h"

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
	 * what the inner row's cap cut (concat), as pack.c's place() counts
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
};

static inline uint64_t pack_tag(uint32_t epoch, uint64_t step)
{
	return ((uint64_t)epoch << 40 | step) + 1;
}

struct pf_pack_run {
	pf_loader *inner;
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
	uint32_t *order;
	uint64_t norder;
	uint32_t order_epoch;
	pf_packer ahead;
	uint64_t ahead_step;
	unsigned window_extra;		/* steps in progress for the plan ahead */
	bool ahead_on;
	uint64_t direct_records;
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
int pf_pack_restore(pf_pack_run *pk, const pf_loader_config *cfg, const pf_topology *topo,
		    pf_error *err);
int pf_pack_restore_plan(pf_loader *l, pf_pack_run *pk, pf_error *err);
void pf_pack_restore_free(pf_pack_run *pk, bool blobs);
/* pack.c: epoch e's steps, every host's (pack_plan.c), and this host's
 * rows. */
int pf_pack_plan_epoch(pf_loader *l, pf_pack_run *pk, uint32_t e, pf_error *err);
/* pack.c: a fresh output batch for step j (inprog). */
pack_out *pf_pack_take_out(pf_loader *l, pf_pack_run *pk, uint64_t j);

/* pack_direct.c.  pf_pack_direct_create(): direct placement for the
 * inner loader's decode threads in fail mode (0; skip mode, or
 * PODFEED_PACK_DIRECT=0: nothing).
 * pf_pack_direct_epoch(): this host's order of epoch e planned (or not:
 * on another topology inside it).  pf_pack_direct_plan(): the groups
 * from inner step `step` of the epoch on planned, as far as the steps in
 * progress reach, and at most as far as the inner loader's slots (every
 * group before `step` placed, none after); start: the packer is at
 * group `step`'s start (planned from there if the plan is not ahead).
 * pf_pack_direct_group(): inner batch ib's plan, NULL when not planned. */
int pf_pack_direct_create(pf_loader *l, pf_pack_run *pk);
void pf_pack_direct_free(pf_pack_run *pk);
int pf_pack_direct_epoch(pf_loader *l, pf_pack_run *pk, uint32_t e);
void pf_pack_direct_plan(pf_loader *l, pf_pack_run *pk, uint32_t epoch, uint64_t step,
			 bool start);
pack_group *pf_pack_direct_group(pf_pack_run *pk, const pf_batch *ib);

#endif
