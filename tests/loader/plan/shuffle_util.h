/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the shuffles' tests (test_loader_shuffle,
 * test_loader_fcache): a loader's ids in order, and the chi-square test
 * of batches drawn from ids sorted by label. */
#ifndef PF_SHUFFLE_UTIL_H
#define PF_SHUFFLE_UTIL_H

#include "podfeed.h"

/* Labels of the sorted datasets: label = id * SU_LABELS / n. */
#define SU_LABELS 10u

/* Every id one loader hands out, in order, its steps and its metrics. */
typedef struct su_run {
	uint64_t *ids;
	uint64_t n, steps;
	uint32_t per_step;	/* ids a step */
	pf_loader_metrics m;
} su_run;

/* Run a loader of cfg over dir ("id:int64[1]") to its end into *out
 * (free out->ids).  @return 0, or pf_loader_create()'s error (err). */
int su_collect(const char *dir, pf_loader_config cfg, su_run *out, pf_error *err);
/* The same, asserting it is created. */
void su_collect_ok(const char *dir, pf_loader_config cfg, su_run *out);

/* The share of batches of b consecutive ids of seq[0..len) whose label
 * counts pass Pearson's chi-square against the dataset's (uniform over
 * SU_LABELS, ids [0, n)) at alpha 0.05. */
double su_pass_rate(const uint64_t *seq, uint64_t len, uint32_t b, uint64_t n);
/* The reference: the same for batches of true uniform permutations of
 * [0, n), one per epoch (Fisher-Yates over splitmix64), len ids. */
double su_random_pass_rate(uint64_t n, uint64_t len, uint32_t b);

#endif /* PF_SHUFFLE_UTIL_H */
