/* SPDX-License-Identifier: Apache-2.0 */
/* Private to loader/: the time series' layout (series.c records it,
 * report_series.c makes the report's section of it) and the loader's
 * seams to it. */
#ifndef PF_SERIES_INTERNAL_H
#define PF_SERIES_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "podfeed.h"

/* How a column's points combine when two become one. */
typedef enum pf_series_kind {
	PF_SERIES_TOTAL = 0,	/* a running total: the later point's */
	PF_SERIES_PEAK,		/* a gauge's highest since the point before */
	PF_SERIES_LAST,		/* a setting: the later point's */
} pf_series_kind;

struct pf_series {
	size_t ncols, n, cap;
	char **names;			/* [ncols] */
	uint8_t *kinds;			/* [ncols] pf_series_kind */
	uint8_t *region_kind;		/* [ncols] pf_region_kind of a region's column */
	double *v;			/* column c's point i: v[c * cap + i] */
	size_t nregions;
	uint64_t interval_ns;		/* between points now */
	unsigned halvings;		/* times every other point went */
	uint64_t last_ns;		/* the last point's time */
	bool ended;			/* the last point is the run's end */
	/* A snapshot's (pf_pipe_series()): */
	double first_batch_s;		/* 0: none yet */
	uint64_t memory_budget, memory_pools;
};

struct pf_pipe;
/* The loader's series: made by pf_loader_create() (-ENOMEM), sampled by
 * the consumer's thread after pf_pipe_next() (now: pf_now_ns(); end:
 * the run's last point), freed by pf_pipe_free(). */
int pf_series_init(struct pf_pipe *l);
void pf_series_sample(struct pf_pipe *l, uint64_t now, bool end);
void pf_series_exit(struct pf_pipe *l);

#endif
