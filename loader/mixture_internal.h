/* SPDX-License-Identifier: Apache-2.0 */
/* A mixture's parts shared by mixture.c (the schedule, batches, states)
 * and mixture_elastic.c (resuming on another topology). */
#ifndef PF_MIXTURE_INTERNAL_H
#define PF_MIXTURE_INTERNAL_H

#include "pipeline_internal.h"

#define FIX 32			/* shares in 2^-32 of a record */
#define ONE ((uint64_t)1 << FIX)
#define MIX_ALIGN 64u
#define MIX_BATCHES 8u		/* host batches' worth of a source in its batch */

typedef struct mix_source {
	char name[64];
	double weight;
	uint64_t q;		/* share in 2^-32 (they sum to ONE) */
	pf_loader *l;		/* the source's own loader */
	/* After an elastic resume, l reads the rest of the epoch it was in
	 * (epoch bridge_epoch) in batches of its per-step share, and next,
	 * the loader of its later epochs, waits (mixture_elastic.c). */
	pf_loader *next;
	uint32_t bridge_epoch;
	uint32_t sub_batch;	/* rows of l's batches (one core) */
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
} mix_source;

typedef struct mix_slot {
	pf_batch batch;
	pf_core_batch *core;
	pf_tensor *tensors;	/* cores x (features + _source) */
	uint8_t *valid;
	void *mem;
	size_t mem_len;
	bool held;
} mix_slot;

struct pf_mixture {
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
	mix_slot *slots;
	unsigned nslots;
	unsigned held;
	pf_error err;
	bool failed, misused;
	pf_error misuse;
	uint64_t start_ns;	/* pf_loader_create()'s start */
	uint64_t create_ns, first_ns;	/* its time, and to the first batch */
	uint64_t digest;	/* of the sources' names, shares and the rule */
	pf_region_table *regions;	/* the config's, or own_regions */
	pf_region_table *own_regions;
};

/* Source k's loader (mixture.c): its dataset in batches of `batch` rows
 * (one core), epochs up to `epochs`, 1/parts of its share of the budget,
 * resumed from the nblobs states given (none: fresh). */
int pf_mix_open_loader(pf_mixture *m, const pf_loader_config *cfg, size_t k,
		       const pf_state_blob *blobs, size_t nblobs, uint32_t batch,
		       uint32_t epochs, unsigned parts, pf_loader **out, pf_error *err);
/* Rows of source k's batches: MIX_BATCHES host batches' share (its
 * loader of whole epochs), or one step's share rounded down (at least 1:
 * an elastic resume's bridge, so that what its epoch drops over the new
 * hosts stays under one global batch, all sources together). */
uint32_t pf_mix_batch(const pf_mixture *m, size_t k);
uint32_t pf_mix_bridge_batch(const pf_mixture *m, size_t k);
/* Records of source k in steps [0, t) on each host. */
uint64_t pf_mix_records_before(pf_mixture *m, size_t k, uint64_t t);
/* The largest step t >= t0 with records of source k in [t0, t) at most
 * limit. */
uint64_t pf_mix_last_step_from(pf_mixture *m, size_t k, uint64_t t0, uint64_t limit);
/* A fresh state at `epoch` for topology t, of the dataset and shuffle of
 * the state tmpl (a LoaderState blob): a loader resumed from it starts
 * that epoch.  @return 0 with *out (pf_free()), or <0 with err. */
int pf_mix_fresh_blob(const void *tmpl, size_t len, uint32_t epoch, const pf_topology *t,
		      uint8_t **out, size_t *outlen, pf_error *err);
/* Resume from the states of every host of another topology: each
 * source's remaining records of its epoch merged and cut among the new
 * hosts by a bridge loader, the loader of its next epochs beside it;
 * m->step0 and the stop rule's end from them (mixture_elastic.c). */
int pf_mix_elastic(pf_mixture *m, const pf_loader_config *cfg, pf_error *err);
/* Each source's region (mixture_regions.c). */
void pf_mix_regions(pf_mixture *m, const pf_loader_config *cfg);
/* "source 'name': cause". */
void pf_mix_source_error(pf_error *err, const char *name, const pf_error *cause);

#endif
