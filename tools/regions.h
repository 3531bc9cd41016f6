/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's storage regions: the region options, the table they make,
 * the check before the first read (the library's pf_region_usage says
 * what to warn of or refuse, and makes the report's section), and
 * `loadbench regions` (the same sample of shards read from each declared
 * mount, side by side). */
#ifndef PF_TOOLS_REGIONS_H
#define PF_TOOLS_REGIONS_H

#include "cli.h"

#define REGIONS_MAX_FLAGS 256u	/* --mount and --mounts, each */

typedef struct regions_opts {
	/* from the command line */
	const char *region;
	const char *mount[REGIONS_MAX_FLAGS];
	unsigned nmount;
	const char *mounts_file[REGIONS_MAX_FLAGS];
	unsigned nmounts_file;
	int policy;			/* pf_cross_region */
	double usd_per_gib;

	/* from regions_check() */
	pf_region_table *table;
	const char *host_source;	/* "--region", "PODFEED_REGION" or NULL */
	pf_region_usage *usage;		/* the dataset's regions, each run's reads */
} regions_opts;

/* The region options, for a command's option table (CLI_INCLUDE with
 * .off the regions_opts in its options); regions_defaults() first. */
extern const cli_opt regions_cli[];
void regions_defaults(regions_opts *ro);

/*! Build the region table (flags, mount table files, FUSE mounts), give
 *  every file its mount and region, and say on stderr, before anything
 *  is read, which regions other than the host's hold which share of the
 *  dataset's bytes (pf_region_usage_check()).  @return 0 to go on, 1
 *  out of memory, 2 for bad region options, 3 when --cross-region=refuse
 *  refuses.  sizes: the files' sizes (a manifest's), or NULL to stat
 *  each. */
int regions_check(regions_opts *ro, char *const *files, const uint64_t *sizes, int nfiles);

/*! The region table alone (what regions_check() starts with).  @return 0,
 *  or 2 after printing why. */
int regions_build_table(regions_opts *ro);

void regions_free(regions_opts *ro);

/*! `loadbench regions ...` (argv[0] is "regions").  @return the exit
 *  status. */
int regions_main(int argc, char **argv);

#endif
