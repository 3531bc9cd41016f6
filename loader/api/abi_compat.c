/* SPDX-License-Identifier: Apache-2.0 */
/* The entry points kept for programs built before the sized ABI (0.5;
 * pf_common.h, "the ABI promise"): pf_loader_create, pf_loader_get_metrics
 * and pf_state_inspect as they were linked, name@PODFEED_0.1, passing the
 * structs' 0.5 sizes (nothing was released before 0.5).  A program built
 * now calls the *_sized functions through podfeed.h's inline wrappers of
 * the same names.  Built into libpodfeed.so only: the versioned names
 * need its version script (the module archives, which the tests and the
 * Python extension link, leave this file out). */
#include "api_internal.h"

PF_API int pf_loader_create_0_1(pf_loader **out, const pf_loader_config *cfg, pf_error *err)
	__attribute__((symver("pf_loader_create@PODFEED_0.1")));
PF_API void pf_loader_get_metrics_0_1(const pf_loader *l, pf_loader_metrics *m)
	__attribute__((symver("pf_loader_get_metrics@PODFEED_0.1")));
PF_API int pf_state_inspect_0_1(const void *blob, size_t len, pf_state_info *info,
				pf_error *err)
	__attribute__((symver("pf_state_inspect@PODFEED_0.1")));

int pf_loader_create_0_1(pf_loader **out, const pf_loader_config *cfg, pf_error *err)
{
	return pf_loader_create_sized(out, cfg, PF_LOADER_CONFIG_SIZE_0_5, err);
}

void pf_loader_get_metrics_0_1(const pf_loader *l, pf_loader_metrics *m)
{
	pf_loader_get_metrics_sized(l, m, PF_LOADER_METRICS_SIZE_0_5);
}

int pf_state_inspect_0_1(const void *blob, size_t len, pf_state_info *info, pf_error *err)
{
	return pf_state_inspect_sized(blob, len, info, PF_STATE_INFO_SIZE_0_5, err);
}
