/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's mixtures: --source NAME=WEIGHT:PATH parsed and checked,
 * the sources' files for the regions' check and the report, and the
 * loader config's sources.  The mixture itself is the library's
 * (loader/mixture.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common_internal.h"
#include "loadbench.h"

/* --source NAME=WEIGHT:PATH: one source of a mixture (PATH a file, a
 * directory, a glob or a manifest; NAME unique; WEIGHT a number > 0). */
int lb_parse_source(void *field, const char *v)
{
	lb_sources *m = field;
	const char *eq = strchr(v, '='), *colon = eq ? strchr(eq + 1, ':') : NULL;
	char weight[64], *end;
	double w;
	size_t k = m->n;

	if (k == LB_MAX_SOURCES)
		return cli_usage("--source: more than %d sources", LB_MAX_SOURCES), -EINVAL;
	if (!eq || !colon)
		return cli_usage("--source: '%s' is not NAME=WEIGHT:PATH", v), -EINVAL;
	if (eq == v || (size_t)(eq - v) >= sizeof(m->name[k]))
		return cli_usage("--source: '%s': a NAME is 1 to 63 bytes", v), -EINVAL;
	if (!colon[1])
		return cli_usage("--source: '%s' names no PATH", v), -EINVAL;
	snprintf(weight, sizeof(weight), "%.*s", (int)(colon - eq - 1), eq + 1);
	w = strtod(weight, &end);
	if (!*weight || *end || !(w > 0) || !isfinite(w))
		return cli_usage("--source: '%s': the weight '%s' is not a finite number "
				 "above 0", v, weight), -EINVAL;
	snprintf(m->name[k], sizeof(m->name[k]), "%.*s", (int)(eq - v), v);
	for (size_t i = 0; i < k; i++)
		if (!strcmp(m->name[i], m->name[k]))
			return cli_usage("--source: two sources are named '%s'", m->name[k]),
			       -EINVAL;
	m->path[k][0] = colon + 1;
	m->s[k].weight = w;
	m->n++;
	return 0;
}

/* Each --source's PATH must name files: a name that is no directory nor
 * pattern comes back from the expansion as is, and must exist.  @return
 * 0, or 2 (1: out of memory) after saying which does not. */
int lb_check_sources(const options *o)
{
	for (size_t k = 0; k < o->mix.n; k++) {
		char **fk = NULL;
		int nk = cli_expand_inputs((char *const *)o->mix.path[k], 1, &fk);
		bool none = nk == 0 || (nk == 1 && !strcmp(fk[0], o->mix.path[k][0]) &&
					access(fk[0], F_OK));

		if (nk < 0)
			return 1;
		cli_free_inputs(fk, nk);
		if (none)
			return cli_usage("--source %s: '%s' matches no files", o->mix.name[k],
					 o->mix.path[k][0]);
	}
	return 0;
}

/* A mixture's files: every source's, in source order (for the regions'
 * check and the report).  @return 0, or 1 after saying why not. */
int lb_mixture_files(const options *o, char ***files, int *nfiles)
{
	*files = NULL;
	*nfiles = 0;
	/* Source by source: two sources may name one directory (a mixture
	 * of a dataset with itself), which one expansion would refuse. */
	for (size_t k = 0; k < o->mix.n; k++) {
		char **fk = NULL, **all;
		int nk = cli_expand_inputs((char *const *)o->mix.path[k], 1, &fk);

		if (nk < 0)
			return 1;
		all = pf_realloc(*files, ((size_t)*nfiles + (size_t)nk + 1) * sizeof(*all));
		if (!all) {
			cli_free_inputs(fk, nk);
			cli_fail("out of memory");
			return 1;
		}
		/* The list, not its strings: they are the list's now. */
		memcpy(all + *nfiles, fk, (size_t)nk * sizeof(*all));
		pf_free(fk);
		*files = all;
		*nfiles += nk;
	}
	return 0;
}

/* The config's sources: --source's, named, each its one PATH. */
void lb_mixture_config(options *o, pf_loader_config *cfg)
{
	for (size_t k = 0; k < o->mix.n; k++) {
		o->mix.s[k].name = o->mix.name[k];
		o->mix.s[k].paths = o->mix.path[k];
		o->mix.s[k].npaths = 1;
	}
	cfg->paths = NULL;
	cfg->npaths = 0;
	cfg->sources = o->mix.s;
	cfg->nsources = o->mix.n;
	cfg->mix = (pf_mix)o->mix_mode;
	cfg->mix_stop = (pf_mix_stop)o->mix_stop;
	cfg->mix_unit = (pf_mix_unit)o->mix_unit;
	cfg->source_feature = o->source_feature;
}

/* Each source in another region than the host's (the table's declared
 * mounts), by name, before anything is read: the regions' check said
 * which regions the files are in, this says which source they are. */
void lb_sources_regions(const options *o)
{
	pf_region_table *t = o->ro.table;

	if (!t || o->ro.policy == PF_CROSS_REGION_ALLOW)
		return;
	for (size_t k = 0; k < o->mix.n; k++) {
		char **fk = NULL;
		int nk = cli_expand_inputs((char *const *)o->mix.path[k], 1, &fk);
		size_t first = SIZE_MAX;
		bool mixed = false;
		pf_region_info ri;

		for (int i = 0; i < nk && !mixed; i++) {
			pf_mount_info mi;

			if (pf_region_table_mount(t, pf_region_table_lookup(t, fk[i]), &mi) < 0)
				break;
			if (first == SIZE_MAX)
				first = mi.region_index;
			mixed = mi.region_index != first;
		}
		cli_free_inputs(fk, nk);
		if (first == SIZE_MAX || pf_region_table_region(t, first, &ri) < 0)
			continue;
		if (!mixed && ri.kind == PF_REGION_CROSS)
			fprintf(stderr, "%s: warning: source '%s' is in region %s, not this "
				"host's (%s): its reads cross regions\n", cli_prog, o->mix.name[k],
				ri.label, pf_region_table_host(t));
	}
}
