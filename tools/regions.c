/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's storage regions: the options, the region table they make,
 * and the check before the first read.  What to say (warn, refuse, note)
 * and the report's per-region section are the library's
 * (loader/report_regions.c); `loadbench regions` is regions_bench.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regions.h"

/* ------------------------------------------------------------------ */
/* Options                                                              */

static int add_list(const char **list, unsigned *n, const char *flag, const char *v)
{
	if (*n >= REGIONS_MAX_FLAGS) {
		cli_usage("%s: more than %u given", flag, REGIONS_MAX_FLAGS);
		return -EINVAL;
	}
	list[(*n)++] = v;
	return 0;
}

static int add_mount(void *field, const char *v)
{
	regions_opts *ro = field;

	return add_list(ro->mount, &ro->nmount, "--mount", v);
}

static int add_mounts_file(void *field, const char *v)
{
	regions_opts *ro = field;

	return add_list(ro->mounts_file, &ro->nmounts_file, "--mounts", v);
}

const cli_opt regions_cli[] = {
	{ CLI_SECTION, .help = "storage regions:" },
	{ CLI_STRING, "region", .arg = "R", .more = true, .off = offsetof(regions_opts, region),
	  .help = "this host's region (default $PODFEED_REGION; on GCP the metadata "
		  "server's instance/zone without its zone letter, e.g. us-central1)" },
	{ CLI_CALL, "mount", .arg = "PATH=REGION", .more = true, .call = add_mount,
	  .help = "files under PATH live in REGION (repeatable; longest prefix wins)" },
	{ CLI_CALL, "mounts", .arg = "FILE", .more = true, .call = add_mounts_file,
	  .help = "a mount table: one \"PATH REGION\" a line, # comments" },
	{ CLI_CHOICE, "cross-region", .arg = "warn|refuse|allow", .more = true,
	  .choices = "warn|refuse|allow", .off = offsetof(regions_opts, policy),
	  .help = "shards in another region than the host's: warn before reading "
		  "(default), refuse to run (exit 3, nothing read), or say nothing" },
	{ CLI_DOUBLE, "egress-usd-per-gib", .arg = "P", .more = true,
	  .off = offsetof(regions_opts, usd_per_gib), .lo = 0, .hi = 1e9,
	  .what = "a price (a number >= 0)",
	  .help = "price of reading 1 GiB across regions, for the report's estimate "
		  "(default 0.02).  FUSE mounts such as gcsfuse are found in "
		  "/proc/self/mountinfo and reported even without a region; "
		  "`loadbench regions --help` measures each mount before a run" },
	{ CLI_END },
};

void regions_defaults(regions_opts *ro)
{
	memset(ro, 0, sizeof(*ro));
	ro->usd_per_gib = PF_EGRESS_USD_PER_GIB_DEFAULT;
}

/* ------------------------------------------------------------------ */
/* The table                                                            */

int regions_build_table(regions_opts *ro)
{
	const char *host = pf_region_host(ro->region, &ro->host_source);
	unsigned skipped = 0;
	pf_error err;
	int ret;

	pf_error_clear(&err);
	ret = pf_region_table_create(&ro->table, host, 0, &err);
	if (ret < 0) {
		cli_fail("%s: %s", ro->host_source ? ro->host_source : "region",
			 err.msg[0] ? err.msg : pf_strerror(ret));
		return 2;
	}
	for (unsigned i = 0; i < ro->nmounts_file; i++) {
		pf_error_clear(&err);
		if (pf_region_table_load(ro->table, ro->mounts_file[i], &err) < 0) {
			char line[PF_ERROR_LINE_MAX];

			pf_error_format(&err, line, sizeof(line));
			cli_fail("--mounts: %s", line);
			return 2;
		}
	}
	for (unsigned i = 0; i < ro->nmount; i++) {
		pf_error_clear(&err);
		if (pf_region_table_add_flag(ro->table, ro->mount[i], &err) < 0) {
			cli_fail("--mount %s: %s", ro->mount[i], err.msg);
			return 2;
		}
	}
	/* Without mountinfo (no /proc) the declared mounts still work. */
	pf_error_clear(&err);
	ret = pf_region_table_scan_mounts(ro->table, &skipped, &err);
	if (ret < 0)
		fprintf(stderr, "%s: note: FUSE mounts are not detected: %s\n", cli_prog,
			err.msg[0] ? err.msg : pf_strerror(ret));
	else if (skipped)
		fprintf(stderr, "%s: note: %u lines of /proc/self/mountinfo were not "
			"understood and are ignored\n", cli_prog, skipped);
	return 0;
}

/* ------------------------------------------------------------------ */
/* The check before the first read                                     */

static void say(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "%s: %s\n", cli_prog, line);
}

int regions_check(regions_opts *ro, char *const *files, const uint64_t *sizes, int nfiles)
{
	pf_region_usage_config cfg = {
		.policy = (pf_cross_region)ro->policy,
		.usd_per_gib = ro->usd_per_gib,
	};
	pf_error err;
	int ret = regions_build_table(ro);

	if (ret)
		return ret;
	cfg.host_source = ro->host_source;
	if (pf_region_usage_create_sized(&ro->usage, ro->table, (const char *const *)files, sizes,
					 (size_t)nfiles, &cfg, &err) < 0) {
		cli_print_error(&err);
		return 1;
	}
	return pf_region_usage_check(ro->usage, say, NULL) ? 3 : 0;
}

void regions_free(regions_opts *ro)
{
	pf_region_usage_free(ro->usage);
	pf_region_table_free(ro->table);
	ro->usage = NULL;
	ro->table = NULL;
}
