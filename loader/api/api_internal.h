/* SPDX-License-Identifier: Apache-2.0 */
/* Private to loader/: the api room (loader/api/): the public pf_loader_*()
 * calls over every kind of loader (loader.c: a config checked and the
 * kind it names created; each call through the loader's face,
 * loader_face.h), and the entry points kept for programs built before the
 * sized ABI (abi_compat.c).  The top of the loader: it creates a mixture
 * (loader/mix/), a packing loader (loader/pack/) or a pipeline
 * (loader/pipeline/), and nothing below calls it. */
#ifndef PF_API_INTERNAL_H
#define PF_API_INTERNAL_H

#include "common_internal.h"
#include "loader_face.h"

/* The loader's sized structs as of the first sized ABI (0.5; pf_common.h,
 * "the ABI promise"): the least a caller may pass, and what the entries
 * kept for programs built before 0.5 (abi_compat.c) pass for them.  Their
 * ends never move: new fields are appended (the assertion holds the
 * config's on LP64). */
#define PF_LOADER_CONFIG_SIZE_0_5 PF_SIZE_THROUGH(pf_loader_config, keep_pools)
#define PF_LOADER_METRICS_SIZE_0_5 PF_SIZE_THROUGH(pf_loader_metrics, io_requests)
#define PF_STATE_INFO_SIZE_0_5 PF_SIZE_THROUGH(pf_state_info, dataset_records)
/* pf_record_ref as 0.8 first had it: the least a caller may pass. */
#define PF_RECORD_REF_SIZE_0_8 PF_SIZE_THROUGH(pf_record_ref, count)
_Static_assert(sizeof(void *) != 8 || (PF_LOADER_CONFIG_SIZE_0_5 == 209 &&
				       PF_LOADER_METRICS_SIZE_0_5 == 464 &&
				       PF_STATE_INFO_SIZE_0_5 == 56),
	       "a field of the loader's 0.5 structs moved: new fields go at their end");

#endif
