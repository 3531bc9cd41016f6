/* SPDX-License-Identifier: Apache-2.0 */
/* Private to loader/: the plan room (loader/plan/): the order, as pure
 * functions of (dataset, seed, epoch, topology).  An epoch's plan of a
 * host's segments, the shuffle blocks and their permutations, the global
 * shuffle's slices and frame groups (plan.c); packing's plan of every
 * host's rows (pack_plan.c); a checkpoint's encoding (state.c).  No I/O,
 * no threads: the dataset is opened below it (loader/dataset/), and the
 * pipeline above it reads what it says. */
#ifndef PF_PLAN_INTERNAL_H
#define PF_PLAN_INTERNAL_H

#include "common_internal.h"	/* pf_rng: splitmix64 streams, the one
				   source of randomness for order */
#include "dataset_internal.h"
#include "pf_transform.h"
#include "podfeed.h"

/* A contiguous run of records of one unit. */
typedef struct pf_segment {
	uint64_t unit;
	uint64_t first, count;	/* records [first, first+count) of the unit */
} pf_segment;

/* What one host reads in one epoch, in order. */
typedef struct pf_epoch_plan {
	pf_segment *seg;
	size_t nseg, cap;
	uint64_t share;		/* records of this host's range */
	uint64_t stream_len;	/* records in seg (share, + wrapped) */
	uint64_t quota;		/* records delivered: steps * host batch */
} pf_epoch_plan;

typedef struct pf_topology {
	uint32_t host_index, num_hosts, cores, per_core_batch;
} pf_topology;

#define PF_WINDOW_DEFAULT 8192u

/*! The shuffle block of a host's stream (pipeline_internal.h says how a
 *  stream is cut into blocks): the shuffle window (shuffle_window, 0:
 *  PF_WINDOW_DEFAULT; 1 without shuffle) rounded up to whole host
 *  batches, into *block, and whether each block is permuted (a window
 *  over 1).  @return 0, or -EINVAL with err when the block would pass
 *  2^30 records. */
int pf_plan_block(bool shuffle, uint32_t shuffle_window, uint32_t host_batch, uint32_t *block,
		  bool *permute, pf_error *err);
/*! Block k of origin host `host`'s stream of epoch `epoch`: the record at
 *  offset r of the block comes out at offset perm[r] (n records; a
 *  Fisher-Yates permutation seeded by (seed, epoch, host, k)). */
void pf_plan_block_perm(uint64_t seed, uint32_t epoch, uint32_t host, uint64_t k,
			uint32_t *perm, uint32_t n);

/*! The global shuffle's slice (pf_plan_epoch()) for shuffle blocks of
 *  `block` records and per-core batches of pcb: the most records that
 *  may come from one frame in a row while a per-core batch's draw from
 *  the block stays close to independent draws (design effect
 *  1 + (pcb - 1)(slice - 1) / (block - 1) at most 1.1; docs/design.md,
 *  "The global shuffle"), at least 1. */
uint32_t pf_plan_slice(uint32_t block, uint32_t pcb);
/* The global shuffle's frame groups hold at most this many shuffle
 * windows of records, and at least PF_GROUP_MIN frames (pf_plan_group()). */
#define PF_GROUP_WINDOWS 8
#define PF_GROUP_MIN 32
/*! The global shuffle's frames per group (pf_plan_epoch()) for a
 *  per-core batch of pcb, a shuffle block of `block` records and a
 *  dataset of `records` in `nunits` frames: 10 (pcb - 1), so that two
 *  records of a per-core batch share a frame with odds of at most 1/10
 *  per record beyond what the slices add, but no more frames than hold
 *  PF_GROUP_WINDOWS blocks of records (nor fewer than PF_GROUP_MIN),
 *  then evened out: the fewest groups of at most that many, equal to
 *  within a frame.  At least 1; docs/design.md, "The global shuffle". */
uint32_t pf_plan_group(uint32_t pcb, uint32_t block, uint64_t nunits, uint64_t records);

/*! Steps per epoch for this topology. */
uint64_t pf_plan_steps(uint64_t records, const pf_topology *t, pf_remainder rem);
/*! Steps a run has left, `taken` of them handed out: from epoch
 *  start_epoch (of `first` steps: a resumed epoch's rest, or a whole one)
 *  on, whole epochs of per_epoch steps up to `epochs`, cut at max_steps
 *  (0: none; counted from the run's start).  UINT64_MAX: more than
 *  64 bits count. */
uint64_t pf_plan_steps_left(uint32_t start_epoch, uint32_t epochs, uint64_t first,
			    uint64_t per_epoch, uint64_t max_steps, uint64_t taken);
/*! A dataset that cannot fill one global batch would give no step at all:
 *  a mistake (the wrong directory, or a topology too large for a small
 *  test set) best said before anything runs.  Wrap fills a host's step
 *  from the start of its share, so it needs a record on every host.
 *  @return 0, or -EINVAL with err saying which. */
int pf_plan_check_records(uint64_t records, const pf_topology *t, pf_remainder rem,
			  pf_error *err);
/*! Build host t->host_index's plan for epoch e into *p (its arrays are
 *  reused between calls; free with pf_plan_release()).  slice 0: the
 *  units, permuted when shuffle; slice > 0 (the global shuffle, indexed
 *  units only): every unit cut into slices of that many records (its
 *  last one shorter), and the slices of the whole dataset permuted: with
 *  group 0 as one permutation (the order of states saved before frame
 *  groups); else in frame groups of at most `group` frames, one drawn
 *  from each of `group` strata of the units in dataset order, the groups
 *  in a random order and each group's slices permuted together, so that
 *  a frame's slices lie within its group's span (docs/design.md, "The
 *  global shuffle"). */
int pf_plan_epoch(pf_epoch_plan *p, const pf_dataset *ds, const pf_topology *t,
		  uint64_t seed, uint32_t epoch, bool shuffle, uint32_t slice,
		  uint32_t group, pf_remainder rem);
void pf_plan_release(pf_epoch_plan *p);

/* ------------------------------------------------------------------ */
/* Checkpoints (state.c)                                                */

/* Outputs [begin, end) of origin host `host`'s stream: what host `host`
 * of the epoch's origin topology delivers, in its order. */
typedef struct pf_piece {
	uint32_t host;
	uint64_t begin, end;
} pf_piece;

#define PF_STATE_VERSION 1u
#define PF_STATE_HEADER 16u		/* magic, version, length, CRC32C */
#define PF_STATE_MAX (16u << 20)	/* payload bytes */
#define PF_STATE_MAX_PIECES (1u << 20)

/* A decoded state (formats/proto/pf_state.proto says what each field is). */
typedef struct pf_state {
	uint64_t fingerprint, records, seed;
	bool shuffle;
	uint32_t remainder;
	pf_topology saver;
	uint32_t block;
	uint32_t epoch;
	bool fresh;
	uint64_t step_in_epoch, global_step;
	pf_topology origin;		/* host_index unused */
	uint32_t origin_block;
	bool origin_permute;
	pf_piece *pieces;
	size_t npieces;
	uint64_t epoch_dropped, epoch_wrapped;	/* origin != saver only */
	bool global;			/* the global shuffle */
	uint32_t origin_slice;		/* its slice in the origin streams */
	uint32_t origin_group;		/* its frames per group (0: one
					   permutation of the slices) */
	uint64_t skipped;		/* steps skip_steps skipped since the
					   first epoch (a record) */
	/* A packing loader's part (pack.c): the fields above are its inner
	 * loader's position, from which the packer below rebuilds the rows
	 * not yet delivered. */
	bool has_pack;
	struct pf_pack_state {
		uint32_t length, mode, pool, nf;
		pf_topology saver;
		uint64_t step, global_step, ahead, next_row;
		uint64_t epoch_steps, epoch_rows, step_base;
		/* A packed mixture's: what the rows in progress held (lost
		 * by an elastic resume), and its run cut by one. */
		uint64_t lost_rows, lost_records, lost_values;
		bool recut;
		uint32_t nopen;
		uint64_t id[PF_PACK_POOL_MAX];
		uint32_t fill[PF_PACK_POOL_MAX][PF_PACK_MAX_FEATURES];
		uint32_t segments[PF_PACK_POOL_MAX];
	} pack;
} pf_state;

/*! Encode s into buf (cap bytes).  @return the blob's length (nothing is
 *  written when it is over cap), or -ENOMEM. */
int64_t pf_state_encode(const pf_state *s, void *buf, size_t cap);
/*! Decode and check a blob: envelope, CRC, protobuf, and the fields'
 *  consistency (not against a dataset).  @return 0 with *s (free with
 *  pf_state_release()), or -EBADMSG / -EPROTONOSUPPORT / -ENOMEM with err
 *  naming the byte offset in the blob and what was wrong. */
int pf_state_decode(pf_state *s, const void *blob, size_t len, pf_error *err);
void pf_state_release(pf_state *s);
/*! Records in the pieces. */
uint64_t pf_state_remaining(const pf_state *s);

/* A mixture's checkpoint (state.c encodes it; mixture_state.c makes it). */
typedef struct pf_mix_source_state {
	const uint8_t *state;	/* the source's loader state */
	size_t state_len;
	uint32_t consumed;	/* rows of its next batch already taken */
	uint32_t bridge_batch;	/* after an elastic resume: the batch of the */
	uint32_t bridge_epoch;	/* loader reading the rest of this epoch (0: none) */
	uint32_t whole_batch;	/* the batch of its loader of whole epochs (0: a
				   state from before it was kept: pf_mix_batch()) */
	/* The states of the bridges of the epochs after bridge_epoch. */
	const uint8_t *const *pending;
	const size_t *pending_len;
	size_t npending;
	/* A packed mixture's: rows of it its packer took past the position,
	 * and its loader's state past them (past_len 0: none) with the rows
	 * of the batch after it taken. */
	uint64_t pack_ahead;
	const uint8_t *past;
	size_t past_len;
	uint32_t past_consumed;
} pf_mix_source_state;

typedef struct pf_mix_state {
	uint64_t digest, next_step;
	uint64_t skipped;	/* steps skip_steps skipped since the first */
	/* The sources' names (nsources of them, or none in states saved
	 * before they were kept): encoded from the caller's, decoded into
	 * memory of the state's. */
	const char *const *names;
	size_t nnames;
	char **names_mem;
	uint64_t end_plus_one;	/* the stop rule's end + 1; 0: from the rule */
	uint32_t host_index, num_hosts, cores, per_core_batch;
	pf_mix_source_state *sources;
	size_t nsources;
	uint8_t *mem;		/* decoded: what sources point into */
	const uint8_t **pend;	/* decoded: the sources' pending, end to end */
	size_t *pend_len;
	/* A packed mixture's part (loader/pack/): the fields above are its
	 * inner mixture's position, from which the packer below rebuilds
	 * the rows not yet delivered. */
	bool has_pack;
	struct pf_pack_state pack;
} pf_mix_state;

int64_t pf_mix_state_encode(const pf_mix_state *s, void *buf, size_t cap);
/*! Decode a "PFMX" blob: the envelope as pf_state_decode()'s, then the
 *  payload.  @return 0 with *s (free with pf_mix_state_release()), or
 *  -EBADMSG / -EPROTONOSUPPORT / -ENOMEM with err. */
int pf_mix_state_decode(pf_mix_state *s, const void *blob, size_t len, pf_error *err);
void pf_mix_state_release(pf_mix_state *s);

/* ------------------------------------------------------------------ */
/* Packing's plan (pack_plan.c): the rows a loader's records pack into */

/* The record a row of a step holds: its file (an index into the
 * dataset's files) and its number in the file. */
typedef struct pf_plan_record {
	uint32_t file;
	uint64_t record;
} pf_plan_record;

/* A loader's order as the plan reads it: its dataset, its topology and
 * its shuffle (what pf_plan_epoch() and the shuffle blocks take; a
 * pipeline fills it, loader/pipeline/'s pf_pipe_order()). */
typedef struct pf_order {
	const pf_dataset *ds;
	pf_topology topo;
	bool shuffle;		/* the units permuted each epoch */
	uint32_t block;		/* records per shuffle block (W) */
	bool permute;		/* blocks permuted */
	uint32_t slice;		/* the global shuffle's slices (0: none) */
	uint32_t group;		/* and its frames per group */
} pf_order;

/* The steps of epoch `epoch` on every host: the packer pk (empty, its
 * settings) over each host's records as a loader of order o delivers them,
 * their lengths len (capped at cap), host_batch rows a step; *own_rows:
 * this host's rows.  @return 0 or -ENOMEM. */
struct pf_packer;
int pf_pack_plan_steps(const pf_order *o, const struct pf_packer *pk, uint64_t seed,
		       uint32_t epoch, const uint32_t *len, uint32_t nf, uint32_t cap,
		       uint32_t host_batch, uint64_t *steps, uint64_t *own_rows);
/* This host's records' lengths (capped at cap) in the order the inner
 * loader of order o delivers epoch `epoch` (nf a record) into order, which has room
 * for every record of the dataset; *norder: how many (its quota).
 * @return 0 or -ENOMEM. */
int pf_pack_plan_order(const pf_order *o, uint64_t seed,
		       uint32_t epoch, const uint32_t *len, uint32_t nf, uint32_t cap,
		       uint32_t *order, uint64_t *norder);
/* Where output `at` of this host's stream of epoch `epoch` (as
 * pf_pack_plan_order() orders it) comes from: its file (an index into
 * o->ds->paths) and its record number in the file.  For an error's
 * words: it plans the epoch again.  @return 0, -ERANGE (past the
 * host's quota) or -ENOMEM. */
typedef struct pf_pack_where {
	uint32_t file;
	uint64_t record;
} pf_pack_where;
int pf_pack_plan_where(const pf_order *o, uint64_t seed, uint32_t epoch, uint64_t at,
		       const uint32_t *len, uint32_t nf, uint32_t cap, pf_pack_where *where);
/* The rows the packer pk (empty) makes of the records of pieces, in order
 * (pieces of epoch `epoch`'s streams of the topology origin, in blocks of
 * w records, permuted or not, slices): a host's share of an epoch resumed
 * on another topology. */
int pf_pack_plan_pieces(const pf_order *o, const struct pf_packer *pk, uint64_t seed,
			uint32_t epoch, const uint32_t *len, uint32_t nf, uint32_t cap,
			const pf_topology *origin, uint32_t w, bool permute, uint32_t slice,
			uint32_t group, const pf_piece *pieces, size_t npieces, uint64_t *rows);

typedef struct pf_mixed_course pf_mixed_course;	/* below */

/* A mixture's records on every host (a packed mixture: loader/pack/),
 * as the plan reads them: its sources' orders (any host index) and their
 * records' packed lengths (nf a record, dataset order); the source of
 * each row of each step on a host, from the mixture's schedule (rows a
 * step; row_sources fills rs with those of steps [t, t + n), a step
 * after another); its steps [t0, t1) from every source's start; its
 * hosts, and which is this one. */
typedef struct pf_mixed {
	size_t nsources;
	const pf_order *orders;
	const uint32_t *const *lengths;
	uint32_t rows;
	void (*row_sources)(void *ctx, uint32_t host, uint64_t t, uint64_t n, uint8_t *rs);
	void *ctx;
	uint64_t t0, t1;
	uint32_t hosts, host_index;
	/* want_rows: a host's stream followed only until it has closed
	 * that many rows (max_steps' rows; 0: to the run's end).  order:
	 * this host's rows' lengths from row order0 on, at most order_cap
	 * rows of them, *order_n those written (NULL: not asked). */
	uint64_t want_rows;
	uint32_t *order;
	uint64_t order0, order_cap, *order_n;
	/* endless: the run has no end (nor want_rows): this host's order
	 * alone, as far as its room; *steps and *own_rows UINT64_MAX. */
	bool endless;
	/* courses: each host's sources from step t0 ([host x nsources]: an
	 * elastic resume's bridges, a restored run's loaders; [nsources],
	 * host_index's alone, with own_course; NULL: every source from its
	 * first record, its epoch 0, at step t0 = 0). */
	const pf_mixed_course *courses;
	bool own_course;
} pf_mixed;
/* The packed steps of a mixture's run on every host: the packer pk
 * (empty, its settings) over each host's records as the mixture deals
 * them, each source's from its start (its epochs one after another, or
 * its course; capped at cap), host_batch rows a step; *own_rows: this
 * host's rows.  @return 0 or -ENOMEM, or a course's error. */
int pf_pack_plan_mixed(const pf_mixed *mx, uint64_t seed, const struct pf_packer *pk,
		       uint32_t nf, uint32_t cap, uint32_t host_batch, uint64_t *steps,
		       uint64_t *own_rows);
/* What a walk of one host's packed mixture (pf_pack_mixed_walk()) tells
 * its caller: step, at the start of each step t of the mixture (the
 * packer there, the rows below `closed` final; and once more at the run's
 * end, t = t1, every row final); piece, each piece of each record placed
 * (the record's source, that source's epoch, its file and number in the
 * file).  Either may be NULL, and either returns 1 to stop the walk. */
struct pf_pack_piece;
typedef struct pf_mixed_visit {
	int (*step)(void *ctx, uint64_t t, const struct pf_packer *p, uint64_t closed);
	int (*piece)(void *ctx, const struct pf_pack_piece *pc, uint32_t source, uint32_t epoch,
		     const pf_plan_record *rec, uint64_t closed);
	void *ctx;
} pf_mixed_visit;
/* Walk host mx->host_index's records as the mixture deals them, from
 * step mx->t0 (every source from its course's start, or without courses
 * from its first record at step 0) to step mx->t1 or a stop, through the
 * packer pk (as given: the run's start's) with their pieces, as pack.c
 * packs them: the course of a packed mixture (skip_steps,
 * pf_loader_records_of()).  @return 0, or <0 (-ENOMEM, the packer's or
 * a course's error). */
int pf_pack_mixed_walk(const pf_mixed *mx, uint64_t seed, const struct pf_packer *pk,
		       uint32_t nf, uint32_t cap, const pf_mixed_visit *v);

/* ------------------------------------------------------------------ */
/* A run's course (course.c): where it starts, skipping ahead, and which */
/* record each row of a step holds                                      */

/* One epoch of a run: the pieces of origin streams a host delivers, in
 * order.  A fresh epoch is one piece, the host's own stream up to its
 * quota; a resumed one is what a saved state left. */
typedef struct pf_epoch_run {
	uint32_t epoch;
	pf_topology origin;	/* the topology whose host streams these are */
	uint32_t w;		/* records per shuffle block of those streams */
	bool permute;		/* blocks permuted */
	uint32_t slice;		/* global shuffle: records per slice of
				   those streams (0: whole units) */
	uint32_t group;		/* and their frames per group (0: none) */
	pf_piece *pieces;
	size_t npieces;
	uint64_t steps;		/* batches the run takes from the epoch */
	uint64_t step0;		/* batch.step of the first */
	uint64_t dropped;	/* this host's remainder in the epoch */
	uint64_t wrapped;	/* records repeated to fill the last step */
} pf_epoch_run;

/* Where a run starts: epoch `epoch` fresh (the host's own stream from
 * its start), or resumed (`resume`'s pieces, then fresh epochs). */
typedef struct pf_run_start {
	uint32_t epoch;
	uint64_t gstep;		/* the global step of its first batch */
	bool resumed;
	pf_epoch_run resume;	/* its pieces: pf_malloc()ed, the owner's */
} pf_run_start;

/* A run of a loader of one dataset: its order, its seed and remainder
 * policy, how far it goes (epochs from the first; steps_per_epoch of a
 * fresh epoch) and where it starts. */
typedef struct pf_run {
	pf_order o;
	uint64_t seed;
	pf_remainder remainder;
	uint32_t epochs;
	uint64_t steps_per_epoch;
	pf_run_start start;
} pf_run;

/* One of the loaders a mixture's source's rows come from, in turn, as
 * the plan reads its run: its batches' rows and how many rows it gives
 * (UINT64_MAX: no end).  A source's course: its links from a start, and
 * the rows of the first one's first batch taken before it. */
typedef struct pf_mixed_link {
	pf_run run;
	uint32_t batch;
	uint64_t rows;
} pf_mixed_link;
struct pf_mixed_course {
	pf_mixed_link *links;
	size_t nlinks;
	uint32_t row0;
};

/*! Steps the run has from its start to its end (its epochs; no
 *  max_steps): UINT64_MAX when they do not fit. */
uint64_t pf_run_steps(const pf_run *r);
/*! Move r->start n steps on, as if they had been delivered and dropped:
 *  inside the epoch it starts in (its pieces, or its own stream, moved
 *  past n host batches), or in a later one (fresh; a part of one: its
 *  own stream from there, its remainder planned).  Nothing is read.
 *  r->start.resume.pieces may be replaced (the old freed).  @return 0,
 *  -ERANGE with err naming the run's last step when n reaches past it,
 *  or -ENOMEM. */
int pf_run_skip(pf_run *r, uint64_t n, pf_error *err);
/*! A deep copy of a start (its pieces pf_malloc()ed: free with
 *  pf_run_start_release()).  @return 0 or -ENOMEM. */
int pf_run_start_copy(pf_run_start *dst, const pf_run_start *src);
void pf_run_start_release(pf_run_start *s);

/* Which record a run delivers where (pf_which_*()): the run it reads and
 * what it keeps between calls (the plan of one origin host, one shuffle
 * block's inverse permutation). */
typedef struct pf_which {
	const pf_run *run;
	pf_epoch_plan plan;
	uint64_t *seg_start;	/* [plan.nseg + 1]: each segment's stream position */
	size_t seg_cap;
	bool planned;
	uint32_t plan_epoch, plan_host;
	pf_topology plan_topo;
	uint32_t plan_slice, plan_group;
	uint32_t *inv;		/* [w]: the block's input offset of each output */
	uint32_t inv_cap;
	bool inv_valid;
	uint32_t inv_epoch, inv_host, inv_w;
	uint64_t inv_block;
	bool inv_permute;
	pf_epoch_run fresh;	/* a fresh epoch's run (its one piece: own) */
	pf_piece own;
} pf_which;

/*! A which over run r (which must outlive it); nothing is planned yet. */
void pf_which_init(pf_which *w, const pf_run *r);
void pf_which_release(pf_which *w);
/*! Where global step `step` of the run is (its epoch and step in the
 *  epoch) and the record of each of its rows (host_batch of them, row i
 *  of core i / per_core_batch), into rows (may be NULL).  @return 0;
 *  -ERANGE with err naming the run's first and last steps when step is
 *  outside them; -ENOMEM. */
int pf_which_step(pf_which *w, uint64_t step, uint32_t *epoch, uint64_t *step_in_epoch,
		  pf_plan_record *rows, pf_error *err);


/* ------------------------------------------------------------------ */
/* A packing loader's course (pack_course.c): its packed steps from a   */
/* start, skipping ahead, and the pieces of records in a step's rows    */

/* Where a packing loader's run starts: its inner loader's run from the
 * packer's position (a group's start), the packer there (its open rows
 * and settings), and the packed epoch it is in: `step` of its steps
 * delivered (rows below step x B are not this run's), counted from
 * step_base (an elastic resume inside the epoch), epoch_steps of them,
 * this host's epoch_rows; gstep the global step of packed step `step`. */
typedef struct pf_pack_course {
	pf_run inner;
	const uint32_t *len;	/* every record's lengths, nf a record, dataset order */
	uint32_t nf, cap;	/* packed features; an inner row's values */
	struct pf_packer packer;
	uint32_t B;		/* rows a packed step */
	uint32_t epochs;
	uint32_t epoch;
	uint64_t step, step_base, epoch_steps, epoch_rows;
	uint64_t gstep;
} pf_pack_course;

/* A course moved on (pf_pack_course_skip()): the new start, the inner
 * steps to skip to reach its position, and what the skipped steps held. */
typedef struct pf_pack_skip {
	uint64_t inner_steps;
	uint64_t records;	/* pieces of records in the skipped rows */
	uint64_t values;	/* their packed features' values */
} pf_pack_skip;

/*! Move c n packed steps on, as if delivered and dropped: the packer run
 *  over the records' lengths (nothing read) to the last inner group
 *  whose packer has opened no row of the new first step, the epochs
 *  between planned (every host's steps, pf_pack_plan_steps()).  c's
 *  inner start is not changed: *out says the inner steps to skip.
 *  @return 0, -ERANGE with err naming the run's last step when n reaches
 *  past it, -ENOMEM, or the plan's error. */
int pf_pack_course_skip(pf_pack_course *c, uint64_t n, pf_pack_skip *out, pf_error *err);

/* A piece of a record in a packed step: its row of the host batch (core
 * x per_core_batch + row), the record (file and number in it), its
 * segment id in the row, where its first packed feature's values start
 * there and which of them: [from, from + count). */
typedef struct pf_pack_ref {
	uint32_t row;
	pf_plan_record rec;
	uint32_t segment, at, from, count;
} pf_pack_ref;

/*! The pieces of global packed step `step` of course c, row by row (each
 *  row's in segment order), into out (cap of them; *n: how many there
 *  are), its epoch and step in it into *epoch, *step_in_epoch.  @return 0,
 *  -ERANGE with err naming the run's first and last steps, -ENOMEM. */
int pf_pack_course_which(const pf_pack_course *c, uint64_t step, pf_pack_ref *out,
			 size_t cap, size_t *n, uint32_t *epoch, uint64_t *step_in_epoch,
			 pf_error *err);

#endif
