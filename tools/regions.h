/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's storage regions: the region options, the check before the
 * first read (warn or refuse when shards live in another region), the
 * per-region report, and `loadbench regions` (the same sample of shards
 * read from each declared mount, side by side). */
#ifndef PF_TOOLS_REGIONS_H
#define PF_TOOLS_REGIONS_H

#include "cli.h"

#define REGIONS_MAX_FLAGS 256u	/* --mount and --mounts, each */
#define REGIONS_MAX_RUNS 101u
#define REGIONS_USD_PER_GIB_DEFAULT 0.02

typedef enum regions_policy {
	REGIONS_WARN = 0,
	REGIONS_REFUSE,
	REGIONS_ALLOW,
} regions_policy;

/* One loader run's counters, per region and per mount. */
typedef struct regions_run {
	double seconds;
	pf_region_stats *region;	/* [nregions] */
	pf_region_stats *mount;		/* [nmounts] */
} regions_run;

typedef struct regions_opts {
	/* from the command line */
	const char *region;
	const char *mount[REGIONS_MAX_FLAGS];
	unsigned nmount;
	const char *mounts_file[REGIONS_MAX_FLAGS];
	unsigned nmounts_file;
	int policy;			/* regions_policy */
	double usd_per_gib;

	/* from regions_check() */
	pf_region_table *table;
	const char *host_source;	/* "--region", "PODFEED_REGION" or NULL */
	size_t nregions, nmounts;
	uint64_t *region_files, *region_bytes;	/* the dataset, per region */
	uint64_t *mount_files, *mount_bytes;	/* and per mount */
	uint64_t dataset_bytes;
	size_t dataset_files;

	/* from regions_run_done() */
	regions_run runs[REGIONS_MAX_RUNS];
	unsigned nruns;
	unsigned report_run;		/* which run the report shows */
} regions_opts;

/* The region options, for a command's option table (CLI_INCLUDE with
 * .off the regions_opts in its options); regions_defaults() first. */
extern const cli_opt regions_cli[];
void regions_defaults(regions_opts *ro);

/*! Build the region table (flags, mount table files, FUSE mounts), give
 *  every file its mount and region, and say on stderr, before anything
 *  is read, which regions other than the host's hold which share of the
 *  dataset's bytes.  @return 0 to go on, 2 for bad region options, 3 when
 *  --cross-region=refuse refuses. */
int regions_check(regions_opts *ro, char *const *files, int nfiles);

/*! After each loader run: keep its counters (and zero the table's). */
void regions_run_done(regions_opts *ro, double seconds);

/*! The report of run ro->report_run: text on stdout, or the JSON member
 *  ,"regions":{...} (nothing when ro is NULL or no run was kept). */
void regions_print_text(const regions_opts *ro);
void regions_print_json(const regions_opts *ro);

void regions_free(regions_opts *ro);

/*! `loadbench regions ...` (argv[0] is "regions").  @return the exit
 *  status. */
int regions_main(int argc, char **argv);

#endif
