/* SPDX-License-Identifier: Apache-2.0 */
/* The mixture tests' three sources (tests/loader/mix/mix_util.c). */
#ifndef PF_MIX_UTIL_H
#define PF_MIX_UTIL_H

#include "podfeed.h"

#define MU_ID_BASE 1000000u

/* The mixture of cfg over three sources, "web", "code" and "books"
 * (weights 0.5, 0.3, 0.2) of 2,400, 1,300 and 500 records, source k's
 * ids k * MU_ID_BASE + [0, count), in frames of 2 KiB (a few records:
 * many segments, each source's epochs ending at other steps), made once
 * a test process; with features, at most max steps (0: to its end),
 * from a state (NULL: fresh).  @return it, asserted created. */
pf_loader *mu_create(pf_loader_config cfg, const char *features, uint64_t max,
		     const uint8_t *from, size_t from_len);

#endif
