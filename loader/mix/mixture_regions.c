/* SPDX-License-Identifier: Apache-2.0 */
/* A mixture's sources' storage regions: each source's files looked up in
 * the config's region table (the one its reads are counted in), else in
 * a table of the host's region ($PODFEED_REGION) and the mounts alone
 * (FUSE mounts show as "undeclared"), for the sources' figures and the
 * report.  Not here: the check before reading and its warnings (the
 * tools', through pf_region_usage), the per-region counts (io/). */
#include <string.h>

#include "mixture_internal.h"

/* Source k's region: the one its files share, or "mixed". */
static void source_region(pf_mixture *m, mix_source *s)
{
	const pf_pipe *l = s->next ? s->next : s->l;
	const pf_dataset *ds = l->ds;
	size_t first = SIZE_MAX;
	bool mixed = false;
	pf_region_info ri;

	for (size_t i = 0; ds && i < ds->nfiles && !mixed; i++) {
		pf_mount_info mi;
		size_t mount = pf_region_table_lookup(m->regions, ds->paths[i]);

		if (pf_region_table_mount(m->regions, mount, &mi) < 0)
			return;
		if (first == SIZE_MAX)
			first = mi.region_index;
		mixed = mi.region_index != first;
	}
	if (first == SIZE_MAX)
		return;
	if (mixed) {
		s->region = "mixed";
		return;
	}
	if (pf_region_table_region(m->regions, first, &ri) < 0)
		return;
	s->region = ri.label;
	s->cross_region = ri.kind == PF_REGION_CROSS;
}

void pf_mix_regions(pf_mixture *m, const pf_loader_config *cfg)
{
	m->regions = cfg->regions;
	if (!m->regions) {
		pf_error err;
		unsigned skipped = 0;

		pf_error_clear(&err);
		if (pf_region_table_create(&m->own_regions, pf_region_host(NULL, NULL), 0,
					   &err) < 0)
			return;	/* a bad $PODFEED_REGION: no regions said */
		pf_region_table_scan_mounts(m->own_regions, &skipped, &err);
		m->regions = m->own_regions;
	}
	for (size_t k = 0; k < m->n; k++)
		source_region(m, &m->src[k]);
}
