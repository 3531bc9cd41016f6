/* SPDX-License-Identifier: Apache-2.0 */
/* Private to loader/: the mix room (loader/mix/): a mixture, a loader
 * over a pipeline per source (pf_loader_config.sources).  The schedule
 * that deals each step's rows among the sources and the stop rules
 * (mixture.c); its checkpoints (mixture_state.c); its batches, which the sources' decoders write
 * their rows straight into (mixture_batch.c, through the pipeline's row
 * sink); resuming on another topology (mixture_elastic.c); each source's
 * storage region (mixture_regions.c).  Above the pipeline: it creates,
 * reads and frees one per source and their shared decode pool. */
#ifndef PF_MIXTURE_INTERNAL_H
#define PF_MIXTURE_INTERNAL_H

#include "pipeline_internal.h"

/* mixture.c: a loader over several sources' loaders (pf_mixture_ops its
 * face). */
typedef struct pf_mixture pf_mixture;
extern const pf_loader_ops pf_mixture_ops;
/* A mixture for the room above it (a packed mixture's inner records:
 * loader/pack/), its options beyond the config:
 *   spec, lspec  its sources' spec instead of cfg->features, and the one
 *                their stream files' packed lengths are measured with as
 *                they are counted (pf_pipe_opts);
 *   source_ids   each row's source kept (_source), asked or not;
 *   inner_index  each source record's place in the run kept, for
 *                pf_mixture_inner_index() (one core only);
 *   opened       called once every source is open (fresh or restored),
 *                before the run's shape (shares, schedule, end) is fixed:
 *                it fills tokens[k], the mean tokens of a record of
 *                source k, by which a mixture of cfg->mix_unit tokens
 *                weighs its shares.  @return 0 or <0 with err. */
typedef struct pf_mix_opts {
	const pf_spec *spec, *lspec;
	bool source_ids;
	bool inner_index;	/* pf_mixture_inner_index() answers */
	/* elastic: the states resumed from (every old host's) are merged and
	 * cut among this topology's hosts even when they are of it (the
	 * room above's topology is not); bridge_rows: an elastic resume's
	 * bridges' batches are the source's share of so many rows (0, or
	 * more than a step's: of a step's), what its cut drops under that
	 * share a host. */
	bool elastic;
	uint32_t bridge_rows;
	int (*opened)(void *ctx, pf_mixture *m, double *tokens, pf_error *err);
	/* skip: the room above's own skip_steps (its steps are not the
	 * mixture's): called once the run's shape is fixed (its schedule
	 * and its stop rule's end, before max_steps) and before ready(),
	 * it says the mixture's steps to skip (*steps: 0 for none), which
	 * the mixture skips as cfg->skip_steps (its sources held until
	 * then).  NULL: none.  @return 0 or <0 with err. */
	int (*skip)(void *ctx, pf_mixture *m, uint64_t *steps, pf_error *err);
	/* ready: called once the run's shape is fixed (its schedule, its
	 * end, its first step) and before any source decodes a record. */
	int (*ready)(void *ctx, pf_mixture *m, pf_error *err);
	void *ctx;
} pf_mix_opts;
int pf_mixture_create(pf_mixture **out, const pf_loader_config *cfg, const pf_mix_opts *o,
		      pf_error *err);
/* For the room above: source k's loader (of whole epochs, no bridge),
 * the rows taken from each source's loader's run (taken[k]: from its
 * start, the rows of its first batch taken before this run counted, as
 * after a restore or a skip), the run's first step and the step after
 * its last. */
pf_pipe *pf_mixture_source(const pf_mixture *m, size_t k);
void pf_mixture_taken(const pf_mixture *m, uint64_t *taken);
uint64_t pf_mixture_first_step(const pf_mixture *m);
/* The run's first step before skip_steps: where its courses start. */
uint64_t pf_mixture_course_step(const pf_mixture *m);
uint64_t pf_mixture_end(const pf_mixture *m);
/* Where each source is between the consumer's batches, for a checkpoint
 * made of that moment later (pf_mixture_state_at()): the rows the run
 * took of it (their numbers, pf_mixture_taken()'s), those of its
 * current loader from its start, which loader that is (gen: a bridge of
 * an elastic resume ends, another takes over), and, inside a bridge,
 * its state there made now (held: the bridge is freed when it ends).
 * pf_mixture_mark(): marks[k] for every source (the consumer's thread).
 * @return 0 or -ENOMEM.  pf_mix_mark_release(): its held state freed. */
typedef struct pf_mix_held pf_mix_held;
typedef struct pf_mix_mark {
	uint64_t used;
	uint64_t rows;
	uint32_t gen;
	pf_mix_held *held;
} pf_mix_mark;
int pf_mixture_mark(const pf_mixture *m, pf_mix_mark *marks);
void pf_mix_mark_release(pf_mix_mark *mk);
/* The mixture's state as if its consumer had been handed the steps
 * before `step` and nothing after, its sources where marks[k] (of that
 * moment) say; past (NULL: none): the rows of each source its packer had
 * taken by now (their numbers, as pf_mixture_taken()'s, of its current
 * loader), each source's state there kept beside (where an elastic
 * resume starts it); its pack part pack (NULL: none), the job's steps
 * skipped `skipped` (the room above's): a packed mixture's checkpoint.
 * @return the blob's length (nothing written when over cap), or <0:
 * -ENOMEM, -EIO for a mark of a loader no longer there.
 * pf_mixture_loader_base(): source k's rows before its current loader
 * (a bridge's that ended). */
int64_t pf_mixture_state_at(const pf_mixture *m, uint64_t step, const pf_mix_mark *marks,
			    const uint64_t *past, const struct pf_pack_state *pack,
			    uint64_t skipped, void *buf, size_t cap);
uint64_t pf_mixture_loader_base(const pf_mixture *m, size_t k);
/* Host `host`'s sources of the rows of steps [t, t + n) of the run
 * (the mixture's rows a step each) into rs, a step after another: the
 * schedule's, as that host deals them.  Not thread-safe with the
 * mixture's own consumer (the consumer's thread). */
void pf_mixture_row_sources(pf_mixture *m, uint32_t host, uint64_t t, uint64_t n, uint8_t *rs);
/* A copy of the mixture's schedule for another thread than its
 * consumer's (mixture_skip.c): pf_mix_deal_rows() is
 * pf_mixture_row_sources() over it (a pf_mixed's row_sources, ctx the
 * deal).  pf_mix_deal_new(): NULL when out of memory. */
typedef struct pf_mix_deal pf_mix_deal;
pf_mix_deal *pf_mix_deal_new(const pf_mixture *m);
void pf_mix_deal_rows(void *deal, uint32_t host, uint64_t t, uint64_t n, uint8_t *rs);
void pf_mix_deal_free(pf_mix_deal *d);
/* On a decode thread (pf_mix_opts.inner_index): the run's row of source
 * k's record c (its loader's run, as its row sink numbers them): step t's
 * row j is row t x rows a step + j.  @return whether the schedule has
 * placed it yet (within its ring of steps ahead). */
bool pf_mixture_inner_index(const pf_mixture *m, size_t k, uint64_t c, uint64_t *row);
/* The steps the mixture maps ahead of the consumer (its ring). */
unsigned pf_mixture_ring(const pf_mixture *m);
/* Source k's name (its own, or "source<k>"). */
const char *pf_mixture_source_name(const pf_mixture *m, size_t k);
void pf_mixture_free(pf_mixture *m);
int pf_mixture_next(pf_mixture *m, pf_batch **out);
void pf_mixture_release(pf_mixture *m, pf_batch *b);
const pf_error *pf_mixture_last_error(const pf_mixture *m);
int64_t pf_mixture_save_state(pf_mixture *m, void *buf, size_t cap);
void pf_mixture_metrics(const pf_mixture *m, pf_loader_metrics *out);
size_t pf_mixture_sources(const pf_mixture *m);
void pf_mixture_source_metrics(const pf_mixture *m, size_t k, pf_source_metrics *out);
const pf_spec *pf_mixture_spec(const pf_mixture *m);
/* The first source's loader's tuning (each source tunes its own). */
void pf_mixture_tuning(const pf_mixture *m, pf_tuning *out);
uint64_t pf_mixture_steps(const pf_mixture *m);
uint64_t pf_mixture_steps_left(const pf_mixture *m);
/* The first source's loader: whose spec and feature shapes are the
 * mixture's. */
const pf_pipe *pf_mixture_first(const pf_mixture *m);
/* The first source's loader's series (each source has its own). */
int pf_mixture_series(const pf_mixture *m, pf_series **out);
/* Rows the sources' decoders wrote straight into its batches. */
uint64_t pf_mixture_direct_rows(const pf_mixture *m);
/* The mixture behind a loader, or NULL when it is another kind (for the
 * tests that look inside one). */
pf_mixture *pf_mixture_of(pf_loader *l);

#define FIX 32			/* shares in 2^-32 of a record */
#define ONE ((uint64_t)1 << FIX)
#define MIX_ALIGN 64u
#define MIX_BATCHES 8u		/* host batches' worth of a source in its batch */
#define MIX_EPOCH_PARTS 8u	/* a source's epoch: at least so many global batches */
#define MIX_CHAIN_MAX 8u	/* epochs apart an elastic resume bridges */

/* What a source's decoders read to write its records straight into the
 * mixture's batches (mixture_batch.c), on cache lines of its own (the
 * consumer's writes of each row are elsewhere).  Records are numbered as
 * its loader's run delivers them (run step x batch + row). */
typedef struct mix_sink {
	_Alignas(64) pf_row_sink sink;
	pf_mixture *m;
	int32_t *steps;		/* m->steps */
	uint8_t *mem;		/* m->mem */
	const size_t *toff, *fbytes;	/* m's */
	size_t slot_bytes, block_bytes;
	uint32_t *pos;		/* [mask + 1]: record c's place at c & mask:
				   ring step << rbits | core << ibits | row */
	uint64_t *inner;	/* [mask + 1]: record c's row of the run (step x
				   rows a step + row; pf_mix_opts.inner_index) */
	uint8_t *direct;	/* [mask + 1]: record c was written there */
	uint64_t mask;
	uint64_t c0;		/* the first record with a place */
	uint64_t mapped;	/* records [c0, mapped) have one (atomic) */
	uint32_t rbits, ibits, features;
	unsigned keep;		/* free slots a decoder leaves the consumer */
} mix_sink;

typedef struct mix_source {
	char name[64];
	double weight;
	uint64_t q;		/* share in 2^-32 (they sum to ONE) */
	pf_pipe *l;		/* the source's own loader */
	bool gated;		/* l reads nothing before open_gates() (mixture.c) */
	bool pooled;		/* l is decoded by m->pool */
	uint64_t limit_rows;	/* scratch of open_gates() */
	/* After an elastic resume, l reads the rest of the epoch it was in
	 * (epoch bridge_epoch) in batches of its per-step share, and next,
	 * the loader of its later epochs, waits (mixture_elastic.c). */
	pf_pipe *next;
	uint32_t bridge_epoch;
	/* With mix=sample, old hosts in several epochs of it: the bridges of
	 * the epochs after l's, in order, and their states as opened. */
	pf_pipe **pend;
	const uint8_t **pend_state;
	size_t *pend_len;
	uint32_t npend;
	uint32_t sub_batch;	/* rows of l's batches (one core) */
	uint32_t whole_batch;	/* rows of the batches of its loader of whole
				   epochs (l's, or next's after a bridge) */
	uint64_t epoch_records;	/* records of one of its epochs on a host */
	pf_batch *cur;		/* its batch rows are taken from, or NULL */
	uint32_t cur_row;	/* rows of cur taken */
	uint8_t *before;	/* its state before cur was taken */
	size_t before_len, before_cap;
	uint64_t taken;		/* rows this run handed out from it */
	uint32_t epoch;		/* of the last batch taken from it */
	const char *region;	/* its files' region label, "mixed", or NULL */
	bool cross_region;
	bool any;
	/* Its records' places in the mixture's batches (mixture_batch.c). */
	mix_sink *sk;		/* m->sinks[k] */
	uint64_t mapping;	/* sk->mapped, before it is published */
	uint64_t used;		/* the number of the next row taken (of its
				   loader's run: those of its first batch
				   taken before this run counted) */
	/* used when its current loader (l) took over (0: the first), and
	 * how many took over so far (a bridge's end: pf_mix_mark). */
	uint64_t lbase;
	uint32_t gen;
	/* After an elastic resume: the old hosts' states each bridge (l,
	 * then pend[]) was opened from (merged[i], nmerged_hosts each), for
	 * another host's course (pf_mixture_course_of()). */
	pf_state_blob **merged;
	uint8_t ***merged_mem;
	uint32_t nmerged, nmerged_hosts;
} mix_source;

/* A source's loaders from the run's start (before skip_steps), as the
 * plan reads them (pf_mixed_course, mixture_skip.c): a bridge of an
 * elastic resume, the bridges after it, the loader of its whole epochs;
 * each link's dataset is the source's loader of whole epochs' (the same
 * files: the bridges are freed). */
typedef pf_mixed_link mix_link;
typedef pf_mixed_course mix_course;

typedef struct mix_slot {
	pf_batch batch;
	pf_core_batch *core;
	pf_tensor *tensors;	/* cores x (features + _source) */
	uint8_t *valid;
	bool held;
} mix_slot;



struct pf_mixture {
	pf_loader face;		/* pf_mixture_ops */
	/* A room above's (pf_mix_opts): the sources' spec and lengths
	 * spec (NULL: the config's, none), and whether the shares weigh
	 * tokens. */
	const pf_spec *spec, *lspec;
	bool tokens;
	bool inner_index;
	uint32_t bridge_rows;	/* pf_mix_opts' (0: the host batch) */
	mix_source *src;
	size_t n;
	pf_mix mode;
	uint64_t seed;
	pf_topology topo;
	uint32_t host_batch;	/* b: the rows the schedule deals out each step */
	uint64_t stride;	/* coprime with b: spreads a step's rows over the sources */
	/* The schedule at step `at`: the deficits of the rounding, and the
	 * step's counts. */
	uint64_t at;
	int64_t *deficit;
	uint64_t *count;
	uint64_t *cum;		/* the counts' prefix sums */
	uint64_t *order;	/* scratch: sources by deficit */
	uint64_t step0;		/* the run's first step */
	uint64_t step;		/* the next step to hand out */
	uint64_t end;		/* the step after the last */
	uint64_t rule_end;	/* the stop rule's end (end before max_steps) */
	bool rule_end_known;	/* from a state: not computed again */
	uint32_t features;	/* of the spec (without _source) */
	size_t fbytes[PF_SPEC_MAX_FEATURES + 1];
	size_t toff[PF_SPEC_MAX_FEATURES + 1];
	size_t block_bytes;
	bool source_feature;
	/* The batches (mixture_batch.c): the next `ring` steps, at t % ring,
	 * each with the slot its rows go into, taken from the free ones
	 * when its first row is written (the most recently freed first, so
	 * that those in use stay few and warm) or when it is handed out. */
	mix_slot *slots;
	unsigned nslots;
	unsigned held, held_max;	/* by the consumer, and at most */
	int32_t *steps;		/* [ring]: step t's slot at t % ring (atomic; -1: none yet) */
	unsigned ring;
	mix_sink *sinks;	/* [n] */
	size_t slot_bytes;
	int32_t *free;		/* [nslots]: free slots, a stack, under mu */
	unsigned nfree;
	pthread_mutex_t mu;
	bool mu_made;
	void *mem;		/* all the slots' blocks */
	size_t mem_len;
	uint8_t *rowsrc;	/* [ring x host_batch]: step t's rows' sources */
	uint64_t mapped_step;	/* the steps before it have their rows' sources */
	uint64_t direct_rows;	/* rows its sources wrote straight in */
	/* The consumer's time in next() (its sources' loaders' next() is
	 * the mixture's own, not the consumer's), and its latencies. */
	uint64_t next_wait_ns;
	uint64_t next_hist[PF_IO_HIST_BUCKETS];
	bool no_direct;		/* PODFEED_MIX_DIRECT=0: every row copied */
	bool no_limit;		/* PODFEED_MIX_LIMIT=0: sources read ahead past the end */
	bool no_pool;		/* PODFEED_MIX_POOL=0: each source its own decoders */
	/* The decode threads of the sources' loaders of whole epochs. */
	pf_decode_pool pool;
	unsigned pool_threads;
	pf_pipe **pool_members;
	bool started;		/* pf_mix_start_batches() was called */
	unsigned ring_env;	/* PODFEED_MIX_RING: its steps (0: its own) */
	pf_error err;
	bool failed, misused;
	pf_error misuse;
	uint64_t start_ns;	/* pf_loader_create()'s start */
	uint64_t create_ns, first_ns;	/* its time, and to the first batch */
	uint64_t digest;	/* of the sources' names, shares and the rule */
	pf_region_table *regions;	/* the config's, or own_regions */
	pf_region_table *own_regions;
	/* skip_steps (mixture_skip.c): every source's loaders are created
	 * gated (hold) until their starts are moved; the steps skipped and
	 * from where; each source's course from the run's first step
	 * (which_step0), for pf_loader_records_of(). */
	bool hold;
	uint64_t skipped, skipped_from;
	uint64_t skipped_total;	/* the job's, which its states say */
	mix_course *courses;
	uint64_t which_step0;
};

/* Source k's loader (mixture.c): its dataset in batches of `batch` rows
 * (one core; 0: pf_mix_batch() fitted to its records by
 * pf_mix_fit_batch()), epochs up to `epochs`, 1/parts of its share of the
 * budget, resumed from the nblobs states given (none: fresh). */
int pf_mix_open_loader(pf_mixture *m, const pf_loader_config *cfg, size_t k,
		       const pf_state_blob *blobs, size_t nblobs, uint32_t batch,
		       uint32_t epochs, unsigned parts, pf_pipe **out, pf_error *err);
/* Rows of source k's batches: MIX_BATCHES host batches' share (the most
 * of its loader of whole epochs, and the batch of states saved before
 * pf_mix_fit_batch()), or one step's share rounded down (at least 1: an
 * elastic resume's bridge, so that what its epoch drops over the new
 * hosts stays under one global batch, all sources together; the share
 * of pf_mix_opts.bridge_rows when fewer). */
uint32_t pf_mix_batch(const pf_mixture *m, size_t k);
uint32_t pf_mix_bridge_batch(const pf_mixture *m, size_t k);
/* Source k's loader of whole epochs without end (mixture.c): the
 * mixture's topology with one core, resumed from blob when there is
 * one, in batches of `batch` rows (0: fitted to its records). */
int pf_mix_open_source(pf_mixture *m, const pf_loader_config *cfg, size_t k,
		       const void *blob, size_t blob_len, uint32_t batch, pf_error *err);
/* mixture_state.c: the sources opened from the decoded state st (each
 * from its loader's state, or inside its bridge); after their gates
 * opened, the batch each source was inside taken again (retake). */
int pf_mix_restore(pf_mixture *m, const pf_loader_config *cfg, pf_mix_state *st,
		   pf_error *err);
int pf_mix_retake(pf_mixture *m, const pf_mix_state *st, pf_error *err);
/* The batch of a source's loader of whole epochs: cap (pf_mix_batch()),
 * or less for a source of `records` whose epoch over `hosts` hosts would
 * be under MIX_EPOCH_PARTS global batches of it; at least 1.  What an
 * epoch drops (under one global batch of it) is then under
 * 1/MIX_EPOCH_PARTS of the epoch, or, for fewer than MIX_EPOCH_PARTS
 * records a host, under one record a host.  A pure function of the
 * dataset's size and topology: every host's the same. */
uint32_t pf_mix_fit_batch(uint64_t records, uint32_t hosts, uint32_t cap);
/* Records of source k in steps [0, t) on each host. */
uint64_t pf_mix_records_before(pf_mixture *m, size_t k, uint64_t t);
/* The largest step t >= t0 with records of source k in [t0, t) at most
 * limit; PF_MIX_NO_END past 2^32 steps. */
#define PF_MIX_NO_END (UINT64_MAX - 1)
uint64_t pf_mix_last_step_from(pf_mixture *m, size_t k, uint64_t t0, uint64_t limit);
/* A fresh state at `epoch` for topology t, of the dataset and shuffle of
 * the state tmpl (a LoaderState blob): a loader resumed from it starts
 * that epoch.  @return 0 with *out (pf_free()), or <0 with err. */
int pf_mix_fresh_blob(const void *tmpl, size_t len, uint32_t epoch, const pf_topology *t,
		      uint8_t **out, size_t *outlen, pf_error *err);
/* Source k's pending bridges (mixture_elastic.c): l added last (its
 * state kept; freed on failure); the first made s->l (the epoch after
 * s->bridge_epoch's); all freed. */
int pf_mix_push_pending(mix_source *s, pf_pipe *l);
void pf_mix_pop_pending(mix_source *s);
void pf_mix_free_pending(mix_source *s);
/* Resume from the states of every host of another topology: each
 * source's remaining records of its epoch merged and cut among the new
 * hosts by a bridge loader, the loader of its next epochs beside it;
 * m->step0 and the stop rule's end from them (mixture_elastic.c). */
int pf_mix_elastic(pf_mixture *m, const pf_loader_config *cfg, pf_error *err);
/* Each source's region (mixture_regions.c). */
void pf_mix_regions(pf_mixture *m, const pf_loader_config *cfg);
/* The schedule: its counts at step t (m->count, m->cum), and the source
 * of row j of step t (mixture.c). */
void pf_mix_schedule_seek(pf_mixture *m, uint64_t t);
size_t pf_mix_slot_source(const pf_mixture *m, uint64_t t, uint64_t j);
/* The sources of all rows of step t (whose counts m holds) into rs[b]. */
void pf_mix_step_sources(const pf_mixture *m, uint64_t t, uint8_t *rs);
/* The batches (mixture_batch.c): the environment's switches; the slots
 * and the sources' places (held: the batches a consumer may hold), once
 * the first source's loader is made; the ring's first steps mapped and
 * the sinks of the sources' loaders made so far set, once m->step is the
 * run's first (a source's loader made after takes its sink at its
 * creation); all freed. */
void pf_mix_batch_env(pf_mixture *m);
int pf_mix_make_slots(pf_mixture *m, const pf_spec *spec, unsigned held, size_t budget,
		      pf_error *err);
void pf_mix_start_batches(pf_mixture *m);
void pf_mix_free_slots(pf_mixture *m);
/* mixture_skip.c: each source's course kept (after the sources are
 * opened, before a skip), skip_steps (each source's loaders moved past
 * the rows the skipped steps take of it, nothing read; the mixture's
 * first step after them), the loaders held for it let go, the batch
 * each source is inside taken again after a skip (its state before it
 * kept), and the mixture's pf_loader_records_of() and pf_loader_file().
 * @return 0 or <0 with err. */
int pf_mix_keep_courses(pf_mixture *m);
/* Source k's course as host `host` of the mixture's topology has it
 * (mixture_skip.c): this host's kept one, or another's where the
 * mixture's start is every host's but for the host index (its start's
 * first step, a fresh run, or an elastic resume: its bridges' runs cut
 * for that host from the old hosts' states), while the bridges are
 * open (at create).  *out: pf_mix_course_release().  @return 0, -EINVAL
 * (another host of a run resumed on its own topology), or <0 with err. */
int pf_mixture_course_of(const pf_mixture *m, size_t k, uint32_t host, mix_course *out,
			 pf_error *err);
void pf_mix_course_release(mix_course *c);
/* A bridge's old states kept (mixture_elastic.c): source s's bridge
 * opened from blobs (n), as the next of its bridges; all freed. */
int pf_mix_keep_merged(mix_source *s, const pf_state_blob *blobs, uint32_t n);
void pf_mix_free_merged(mix_source *s);
void pf_mix_free_courses(pf_mixture *m);
int pf_mix_skip(pf_mixture *m, uint64_t n, pf_error *err);
void pf_mix_release_held(pf_mixture *m);
int pf_mix_retake_skipped(pf_mixture *m, pf_error *err);
int64_t pf_mix_records_of(const pf_mixture *m, uint64_t step, pf_record_ref *out, size_t cap,
			  pf_error *err);
const char *pf_mix_file(const pf_mixture *m, uint32_t source, uint32_t file);
/* mixture_batch.c: the next row of source k (its batch's, a new batch
 * taken when that one is used up, the state before it kept).  @return 0,
 * or <0 with m failed. */
int pf_mix_take_row(pf_mixture *m, size_t k, const pf_core_batch **cb, uint32_t *row);
/* "source 'name': cause". */
void pf_mix_source_error(pf_error *err, const char *name, const pf_error *cause);

#endif
