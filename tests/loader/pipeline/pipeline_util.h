/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the loader's end-to-end tests (test_loader_pipeline,
 * test_loader_streams; never linked into the library): one run of a loader
 * over a directory of id records, checked batch by batch, and a dataset of
 * uneven shards. */
#ifndef PF_PIPELINE_UTIL_H
#define PF_PIPELINE_UTIL_H

#include <stdint.h>

#include "podfeed.h"

typedef struct pl_run_result {
	uint64_t steps, records;
	uint32_t digest;	/* crc over every core block of every batch */
	uint8_t *seen;		/* per id: times delivered (the caller frees) */
	uint64_t dropped;
	uint32_t files_direct;
	int ret;
	pf_error err;
	pf_loader_metrics m;
} pl_run_result;

/* Load dir with cfg (its paths set to dir; features "id:int64[1],
 * v:float32[4]:pad=-1" unless given) until the end or an error, asserting
 * of every batch its cores, step numbers, that each id is below nids and
 * that a record's features stay together; r gets what it saw. */
void pl_run(const char *dir, pf_loader_config *cfg, uint64_t nids, pl_run_result *r);

/* A fresh directory of 7 indexed shards (4 KiB frames) of ids [0, *nids):
 * one of 10 records, one of 10,000, two empty and some in between.
 * @return the directory. */
const char *pl_uneven_dataset(uint64_t *nids);

#endif
