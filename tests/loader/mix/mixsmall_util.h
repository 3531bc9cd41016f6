/* SPDX-License-Identifier: Apache-2.0 */
/* Mixtures with small sources (tests/loader/mix/test_loader_mixture_small*.c): a
 * mixture's run on one host of several, each source's ids in the order
 * taken, and the checks of each source's epochs over the pod. */
#ifndef MIXSMALL_UTIL_H
#define MIXSMALL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfeed.h"

#define MS_ID_BASE 1000000u	/* source k's ids: k * MS_ID_BASE + [0, count) */
#define MS_MAX 3		/* sources */
#define MS_HOSTS 8

typedef struct ms_mix {
	size_t n;
	uint64_t counts[MS_MAX];
	double w[MS_MAX];
	const char *dirs[MS_MAX];
	uint32_t hb;		/* a host batch: 1 core x hb */
	pf_mix mode;
	pf_mix_stop stop;
	uint32_t epochs;
} ms_mix;

typedef struct ms_run {
	uint64_t steps;
	uint64_t *ids[MS_MAX];	/* each source's ids (less its base), in order */
	uint64_t n[MS_MAX];
	uint64_t started[MS_MAX];	/* epochs started, from its metrics */
	uint8_t *state;		/* after the run */
	size_t state_len;
} ms_run;

/* The sources' shards (ids k * MS_ID_BASE + [0, counts[k])), made once
 * a process for each (k, count); dirs already set are kept. */
void ms_make(ms_mix *c);
/* Host x of h: from the states given (none: fresh), at most max steps
 * (0: to the end); asserts every row's id is of its _source. */
void ms_run_host(const ms_mix *c, uint32_t x, uint32_t h, const pf_state_blob *from,
		 size_t nfrom, uint64_t max, ms_run *r);
void ms_run_free(ms_run *r);
/* The rows of source k's batches on h hosts (docs/api.md, "Mixtures"):
 * its share of 8 host batches, at most its records / (8 h), at least 1;
 * and the records of one of its epochs on a host. */
uint64_t ms_sub_batch(const ms_mix *c, size_t k, uint32_t h);
uint64_t ms_epoch(const ms_mix *c, size_t k, uint32_t h);
/* The ids of source k the h hosts of r took from row `from` of each on,
 * in its epochs of e records a host: no id twice in an epoch, and every
 * epoch all hosts went through holds h x e of them.  @return the epochs
 * all hosts went through. */
uint64_t ms_check_epochs(const ms_mix *c, size_t k, const ms_run *r, uint32_t h,
			 const uint64_t *from, uint64_t e);

#endif
