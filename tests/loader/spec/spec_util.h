/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the feature spec's tests (test_loader_spec,
 * test_loader_spec_apply). */
#ifndef PF_SPEC_UTIL_H
#define PF_SPEC_UTIL_H

#include "podfeed.h"

/* A zeroed pf_spec on the heap (~13 KiB: kept off the small stacks some
 * runners use); the caller frees. */
pf_spec *spec_new(void);

/* Parse text, which must be valid; the caller frees. */
pf_spec *parse_ok(const char *text);

#endif /* PF_SPEC_UTIL_H */
