/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's storage regions: options, the warning (or refusal) before
 * the first read, the per-region report and `loadbench regions`.
 *
 * The figures, and why they are defined so:
 *   MB/s        a region's bytes over its active time (wall time with at
 *               least one of its reads in flight).  The loader reads
 *               several regions at once, so bytes over the run's time
 *               would say how much the region was asked for, not what
 *               it delivers.
 *   loader time the region's active time over the loader's time: how much
 *               of the run had the region's reads outstanding.
 *   p50, p99    of the region's read latencies (upper bounds of log2
 *               buckets, as for next()).
 *   egress      bytes read from regions known to be other than the host's,
 *               times --egress-usd-per-gib: an estimate, not a bill.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common_internal.h"
#include "regions.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define SAMPLE_DEFAULT 4u
#define SAMPLE_MAX 4096u
#define READ_DEFAULT (1u << 20)
#define DEPTH_DEFAULT 8u

static double mb(uint64_t bytes)
{
	return (double)bytes / 1e6;
}

static const char *kind_name(pf_region_kind k)
{
	return k == PF_REGION_IN ? "in" : k == PF_REGION_CROSS ? "cross" : "unknown";
}

static const char *origin_name(pf_mount_origin o)
{
	switch (o) {
	case PF_MOUNT_FLAG: return "flag";
	case PF_MOUNT_FILE: return "file";
	case PF_MOUNT_DETECTED: return "detected";
	default: return "local";
	}
}

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
	ro->usd_per_gib = REGIONS_USD_PER_GIB_DEFAULT;
}

/* ------------------------------------------------------------------ */
/* The table                                                            */

/* @return 0, or 2 after printing why. */
static int build_table(regions_opts *ro)
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
	ro->nregions = pf_region_table_regions(ro->table);
	ro->nmounts = pf_region_table_mounts(ro->table);
	return 0;
}

static pf_mount_info mount_info(const regions_opts *ro, size_t m)
{
	pf_mount_info mi;

	pf_region_table_mount(ro->table, m, &mi);
	return mi;
}

static pf_region_info region_info(const regions_opts *ro, size_t r)
{
	pf_region_info ri;

	pf_region_table_region(ro->table, r, &ri);
	return ri;
}

/* "/mnt/far (fuse.regionfs)" into buf. */
static const char *mount_label(const regions_opts *ro, size_t m, char *buf, size_t cap)
{
	pf_mount_info mi = mount_info(ro, m);

	if (m == 0)
		snprintf(buf, cap, "local files%s%s%s", mi.fstype ? " (" : "",
			 mi.fstype ? mi.fstype : "", mi.fstype ? ")" : "");
	else
		snprintf(buf, cap, "%s%s%s%s", mi.path, mi.fstype ? " (" : "",
			 mi.fstype ? mi.fstype : "", mi.fstype ? ")" : "");
	return buf;
}

/* The mounts of region r that hold dataset files, as "a, b and 2 more". */
static void region_mounts(const regions_opts *ro, size_t r, char *buf, size_t cap)
{
	size_t n = 0, shown = 0;

	buf[0] = '\0';
	for (size_t m = 0; m < ro->nmounts; m++) {
		char one[600];
		size_t len = strlen(buf);

		if (mount_info(ro, m).region_index != r || !ro->mount_files[m])
			continue;
		n++;
		if (shown == 3)
			continue;
		mount_label(ro, m, one, sizeof(one));
		snprintf(buf + len, cap - len, "%s%s", shown ? ", " : "", one);
		shown++;
	}
	if (n > shown) {
		size_t len = strlen(buf);

		snprintf(buf + len, cap - len, " and %zu more", n - shown);
	}
}

static double share(uint64_t part, uint64_t whole)
{
	return whole ? (double)part / (double)whole : 0;
}

int regions_check(regions_opts *ro, char *const *files, int nfiles)
{
	const char *host;
	bool refuse = false;
	int ret = build_table(ro);

	if (ret)
		return ret;
	host = pf_region_table_host(ro->table);
	ro->region_files = calloc(ro->nregions, sizeof(uint64_t));
	ro->region_bytes = calloc(ro->nregions, sizeof(uint64_t));
	ro->mount_files = calloc(ro->nmounts, sizeof(uint64_t));
	ro->mount_bytes = calloc(ro->nmounts, sizeof(uint64_t));
	if (!ro->region_files || !ro->region_bytes || !ro->mount_files || !ro->mount_bytes) {
		cli_fail("out of memory");
		return 1;
	}
	for (int i = 0; i < nfiles; i++) {
		size_t m = pf_region_table_lookup(ro->table, files[i]);
		size_t r = mount_info(ro, m).region_index;
		struct stat st;
		uint64_t size = stat(files[i], &st) == 0 ? (uint64_t)st.st_size : 0;

		ro->mount_files[m]++;
		ro->mount_bytes[m] += size;
		ro->region_files[r]++;
		ro->region_bytes[r] += size;
		ro->dataset_bytes += size;
		ro->dataset_files++;
	}
	if (host)
		fprintf(stderr, "%s: host region %s (from %s)\n", cli_prog, host,
			ro->host_source);

	for (size_t r = 1; r < ro->nregions; r++) {
		pf_region_info ri = region_info(ro, r);
		char where[2048];
		double pct = 100 * share(ro->region_bytes[r], ro->dataset_bytes);

		if (!ro->region_files[r])
			continue;
		region_mounts(ro, r, where, sizeof(where));
		if (ri.kind == PF_REGION_CROSS && ro->policy == REGIONS_REFUSE) {
			cli_fail("refusing to read across regions: region %s holds %.1f%% of "
				 "the dataset's bytes (%.1f MB in %llu of %zu files, under %s) "
				 "and this host is in %s (--cross-region=refuse); nothing was read",
				 ri.name, pct, mb(ro->region_bytes[r]),
				 (unsigned long long)ro->region_files[r], ro->dataset_files,
				 where, host);
			refuse = true;
		} else if (ri.kind == PF_REGION_CROSS && ro->policy == REGIONS_WARN) {
			fprintf(stderr, "%s: warning: region %s is not this host's region (%s): "
				"it holds %.1f%% of the dataset's bytes (%.1f MB in %llu of %zu "
				"files, under %s); reading it is slower and costs egress "
				"(--cross-region=refuse stops here, allow says nothing)\n",
				cli_prog, ri.name, host, pct, mb(ro->region_bytes[r]),
				(unsigned long long)ro->region_files[r], ro->dataset_files, where);
		} else if (ri.undeclared && ro->policy != REGIONS_ALLOW) {
			fprintf(stderr, "%s: note: %.1f%% of the dataset's bytes are on FUSE "
				"mounts with no declared region (%s): declare them with "
				"--mount PATH=REGION to have them checked\n", cli_prog, pct, where);
		} else if (ri.kind == PF_REGION_UNKNOWN && ro->policy != REGIONS_ALLOW) {
			fprintf(stderr, "%s: note: region %s holds %.1f%% of the dataset's "
				"bytes (under %s), but this host's region is not set "
				"(--region or PODFEED_REGION), so it cannot be told in- or "
				"cross-region\n", cli_prog, ri.label, pct, where);
		}
	}
	return refuse ? 3 : 0;
}

void regions_run_done(regions_opts *ro, double seconds)
{
	regions_run *run;

	if (!ro->table || ro->nruns >= REGIONS_MAX_RUNS)
		return;
	run = &ro->runs[ro->nruns];
	run->seconds = seconds;
	run->region = calloc(ro->nregions, sizeof(*run->region));
	run->mount = calloc(ro->nmounts, sizeof(*run->mount));
	if (!run->region || !run->mount) {
		free(run->region);
		free(run->mount);
		return;
	}
	for (size_t r = 0; r < ro->nregions; r++)
		pf_region_table_region_stats(ro->table, r, &run->region[r]);
	for (size_t m = 0; m < ro->nmounts; m++)
		pf_region_table_mount_stats(ro->table, m, &run->mount[m]);
	pf_region_table_reset_stats(ro->table);
	ro->nruns++;
}

void regions_free(regions_opts *ro)
{
	for (unsigned i = 0; i < ro->nruns; i++) {
		free(ro->runs[i].region);
		free(ro->runs[i].mount);
	}
	free(ro->region_files);
	free(ro->region_bytes);
	free(ro->mount_files);
	free(ro->mount_bytes);
	pf_region_table_free(ro->table);
	memset(ro, 0, sizeof(*ro));
}

/* ------------------------------------------------------------------ */
/* The report                                                           */

static double mbps(const pf_region_stats *st)
{
	return st->active_ns ? (double)st->io.bytes / ((double)st->active_ns * 1e-9) / 1e6 : 0;
}

/* What the report derives from one run. */
typedef struct summary {
	const regions_run *run;
	double in_mbps, cross_mbps, ratio;	/* ratio < 0: not both kinds */
	uint64_t egress, unknown_bytes;
	double cost;
} summary;

static bool region_shown(const regions_opts *ro, const regions_run *run, size_t r)
{
	return ro->region_files[r] || run->region[r].io.ops;
}

static summary summarize(const regions_opts *ro)
{
	summary s = { .run = &ro->runs[ro->report_run], .ratio = -1 };
	uint64_t in_b = 0, in_ns = 0, cross_b = 0, cross_ns = 0;

	for (size_t r = 0; r < ro->nregions; r++) {
		const pf_region_stats *st = &s.run->region[r];
		pf_region_kind k = region_info(ro, r).kind;

		if (k == PF_REGION_IN) {
			in_b += st->io.bytes;
			in_ns += st->active_ns;
		} else if (k == PF_REGION_CROSS) {
			cross_b += st->io.bytes;
			cross_ns += st->active_ns;
		} else {
			s.unknown_bytes += st->io.bytes;
		}
	}
	s.in_mbps = in_ns ? (double)in_b / ((double)in_ns * 1e-9) / 1e6 : 0;
	/* Several cross regions: their bytes over their summed active time. */
	s.cross_mbps = cross_ns ? (double)cross_b / ((double)cross_ns * 1e-9) / 1e6 : 0;
	if (in_b && cross_b && s.in_mbps > 0)
		s.ratio = s.cross_mbps / s.in_mbps;
	s.egress = cross_b;
	s.cost = (double)cross_b / GIB * ro->usd_per_gib;
	return s;
}

/* Whether the text report has anything to say about regions. */
static bool worth_text(const regions_opts *ro)
{
	if (pf_region_table_host(ro->table) || ro->nmount || ro->nmounts_file)
		return true;
	for (size_t m = 1; m < ro->nmounts; m++)
		if (ro->mount_files[m])
			return true;
	return false;
}

/* A row of numbers; a mount's row ends with the mount (paths are long). */
static void text_row(const char *label, const char *kind, uint64_t files, double dshare,
		     const pf_region_stats *st, double seconds, const char *mount)
{
	printf("  %-16s %-7s %5llu %6.1f%% %9.1f %9.1f %8.0f %8.0f %5.0f%%%s%s\n", label, kind,
	       (unsigned long long)files, dshare * 100, mb(st->io.bytes), mbps(st),
	       pf_io_stats_quantile_us(&st->io, 0.50), pf_io_stats_quantile_us(&st->io, 0.99),
	       seconds > 0 ? 100 * (double)st->active_ns * 1e-9 / seconds : 0,
	       mount ? "  " : "", mount ? mount : "");
}

void regions_print_text(const regions_opts *ro)
{
	const char *host;
	summary s;

	if (!ro || !ro->table || !ro->nruns || !worth_text(ro))
		return;
	s = summarize(ro);
	host = pf_region_table_host(ro->table);
	if (host)
		printf("regions     host in %s (from %s); cross-region reads: %s\n", host,
		       ro->host_source, ro->policy == REGIONS_REFUSE ? "refuse"
		       : ro->policy == REGIONS_ALLOW ? "allow" : "warn");
	else
		printf("regions     host region not set (--region or PODFEED_REGION): "
		       "no region can be called cross-region\n");
	printf("  %-16s %-7s %5s %7s %9s %9s %8s %8s %6s\n", "region", "kind",
	       "files", "share", "MB read", "MB/s", "p50 us", "p99 us", "time");
	for (size_t r = 0; r < ro->nregions; r++) {
		pf_region_info ri = region_info(ro, r);

		if (!region_shown(ro, s.run, r))
			continue;
		text_row(ri.label, kind_name(ri.kind), ro->region_files[r],
			 share(ro->region_bytes[r], ro->dataset_bytes), &s.run->region[r],
			 s.run->seconds, NULL);
		for (size_t m = 0; m < ro->nmounts; m++) {
			char label[600];

			if (mount_info(ro, m).region_index != r ||
			    (!ro->mount_files[m] && !s.run->mount[m].io.ops))
				continue;
			text_row("  mount", "", ro->mount_files[m],
				 share(ro->mount_bytes[m], ro->dataset_bytes), &s.run->mount[m],
				 s.run->seconds, mount_label(ro, m, label, sizeof(label)));
		}
	}
	printf("  (MB/s: bytes over the time the region had reads in flight; time: that "
	       "time over the loader's %.3f s; p50/p99: read latency)\n", s.run->seconds);
	if (s.ratio >= 0)
		printf("  cross-region  %.1f MB/s, %.3fx the in-region %.1f MB/s\n",
		       s.cross_mbps, s.ratio, s.in_mbps);
	printf("  egress      %.1f MB (%.4f GiB) read from other regions: about $%.4f at "
	       "$%g/GiB (an estimate from --egress-usd-per-gib, not a bill)\n",
	       mb(s.egress), (double)s.egress / GIB, s.cost, ro->usd_per_gib);
	if (s.unknown_bytes)
		printf("  not counted %.1f MB from regions not known to be in or out of "
		       "the host's\n", mb(s.unknown_bytes));
}

static void json_str(const char *key, const char *v, bool comma)
{
	printf("\"%s\":", key);
	if (v)
		cli_json_string(stdout, v, strlen(v));
	else
		fputs("null", stdout);
	if (comma)
		putchar(',');
}

static void json_u64(const char *key, uint64_t v, bool comma)
{
	printf("\"%s\":%llu%s", key, (unsigned long long)v, comma ? "," : "");
}

static void json_dbl(const char *key, double v, bool comma)
{
	printf("\"%s\":", key);
	cli_json_double(stdout, v);
	if (comma)
		putchar(',');
}

/* The counters every region and mount entry has. */
static void json_stats(const pf_region_stats *st, double seconds)
{
	json_u64("bytes_read", st->io.bytes, true);
	json_u64("reads", st->io.ops, true);
	json_u64("read_errors", st->io.errors, true);
	json_dbl("active_seconds", (double)st->active_ns * 1e-9, true);
	json_dbl("mb_per_s", mbps(st), true);
	json_dbl("read_p50_us", pf_io_stats_quantile_us(&st->io, 0.50), true);
	json_dbl("read_p99_us", pf_io_stats_quantile_us(&st->io, 0.99), true);
	json_dbl("loader_time_share",
		 seconds > 0 ? (double)st->active_ns * 1e-9 / seconds : 0, false);
}

void regions_print_json(const regions_opts *ro)
{
	bool first = true;
	summary s;

	if (!ro || !ro->table || !ro->nruns)
		return;
	s = summarize(ro);
	printf(",\"regions\":{");
	json_str("host", pf_region_table_host(ro->table), true);
	json_str("host_source", ro->host_source, true);
	json_str("cross_region_policy", ro->policy == REGIONS_REFUSE ? "refuse"
		 : ro->policy == REGIONS_ALLOW ? "allow" : "warn", true);
	json_dbl("loader_seconds", s.run->seconds, true);
	json_u64("dataset_bytes", ro->dataset_bytes, true);
	printf("\"per_region\":[");
	for (size_t r = 0; r < ro->nregions; r++) {
		pf_region_info ri = region_info(ro, r);
		bool mfirst = true;

		if (!region_shown(ro, s.run, r))
			continue;
		printf("%s{", first ? "" : ",");
		first = false;
		json_str("region", ri.name, true);
		json_str("label", ri.label, true);
		json_str("kind", kind_name(ri.kind), true);
		printf("\"cross_region\":%s,", ri.kind == PF_REGION_CROSS ? "true"
		       : ri.kind == PF_REGION_IN ? "false" : "null");
		json_u64("files", ro->region_files[r], true);
		json_u64("dataset_bytes", ro->region_bytes[r], true);
		json_dbl("dataset_share", share(ro->region_bytes[r], ro->dataset_bytes), true);
		json_stats(&s.run->region[r], s.run->seconds);
		printf(",\"mounts\":[");
		for (size_t m = 0; m < ro->nmounts; m++) {
			pf_mount_info mi = mount_info(ro, m);

			if (mi.region_index != r ||
			    (!ro->mount_files[m] && !s.run->mount[m].io.ops))
				continue;
			printf("%s{", mfirst ? "" : ",");
			mfirst = false;
			json_str("path", m ? mi.path : NULL, true);
			json_str("fstype", mi.fstype, true);
			json_str("source", mi.source, true);
			printf("\"fuse\":%s,", mi.fuse ? "true" : "false");
			json_str("origin", origin_name(mi.origin), true);
			json_str("declared_region", mi.region, true);
			json_u64("files", ro->mount_files[m], true);
			json_u64("dataset_bytes", ro->mount_bytes[m], true);
			json_stats(&s.run->mount[m], s.run->seconds);
			putchar('}');
		}
		printf("]}");
	}
	printf("],");
	if (s.ratio >= 0) {
		json_dbl("in_region_mb_per_s", s.in_mbps, true);
		json_dbl("cross_region_mb_per_s", s.cross_mbps, true);
		json_dbl("cross_to_in_region_ratio", s.ratio, true);
	} else {
		printf("\"cross_to_in_region_ratio\":null,");
	}
	printf("\"egress\":{");
	json_u64("bytes", s.egress, true);
	json_dbl("gib", (double)s.egress / GIB, true);
	json_dbl("usd_per_gib", ro->usd_per_gib, true);
	json_dbl("usd_estimate", s.cost, true);
	json_str("note", "an estimate: egress bytes times --egress-usd-per-gib", true);
	json_u64("unknown_region_bytes", s.unknown_bytes, false);
	printf("}}");
}

/* ------------------------------------------------------------------ */
/* loadbench regions: the same sample read from each declared mount     */

typedef struct bench_opts {
	regions_opts ro;
	uint64_t sample, depth, read_size, repeat;
	bool warm, json;
} bench_opts;

static const cli_opt bench_cli[] = {
	{ CLI_INCLUDE, .table = regions_cli, .off = offsetof(bench_opts, ro) },
	{ CLI_SECTION, .help = "the passes:" },
	{ CLI_U64, "sample", .arg = "N", .off = offsetof(bench_opts, sample), .min = 1,
	  .max = SAMPLE_MAX, .help = "files per mount (default 4)" },
	{ CLI_U64, "io-depth", .arg = "N", .off = offsetof(bench_opts, depth), .min = 1,
	  .max = 256, .help = "reads in flight (default 8)" },
	{ CLI_U64, "read-size", .arg = "BYTES", .off = offsetof(bench_opts, read_size),
	  .min = 4096, .max = 64u << 20, .suffix = true,
	  .help = "bytes per read (default 1M; K, M suffixes)" },
	{ CLI_U64, "repeat", .arg = "N", .off = offsetof(bench_opts, repeat), .min = 1,
	  .max = 101, .help = "passes, interleaved over the mounts; medians (default 1)" },
	{ CLI_FLAG, "warm", .off = offsetof(bench_opts, warm),
	  .help = "keep cached pages (measure the page cache instead)" },
	{ CLI_FLAG, "json", .off = offsetof(bench_opts, json),
	  .help = "one JSON object on stdout instead of the table" },
	{ CLI_END },
};

static const cli_command bench_command = {
	.name = "loadbench regions",
	.usage = "usage: loadbench regions [options] [SUBDIR]\n",
	.about = "Reads the same sample of shard files from each declared mount (the\n"
		 "files under MOUNT/SUBDIR whose names all the mounts share: the mounts\n"
		 "compared are those --mount and --mounts declare) and prints one column\n"
		 "per mount: region, file system, MB/s, time to the first byte, read\n"
		 "latency, the ratio to the fastest in-region mount, and the estimated\n"
		 "egress cost.  Each file's cached pages are dropped first\n"
		 "(posix_fadvise), so a local disk is read from the disk.\n",
	.opts = bench_cli,
	.footer = "Exit status: 0 done, 1 a read failed, 2 bad usage.\n",
};

typedef struct pass_result {
	double seconds, first_byte_ms;
	uint64_t bytes;
	pf_region_stats st;
} pass_result;

typedef struct column {
	size_t mount;
	pf_mount_info mi;
	pf_region_info ri;
	char **paths;		/* the sample under this mount */
	pass_result *pass;	/* [repeat] */
	double mbps, first_byte_ms, p50, p99, seconds, ratio, cost;
	uint64_t bytes;
} column;

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A read pass's plan: the column's files one after the other, each whole
 * in reads of read_size, opened as its turn comes (an open is a round trip
 * too). */
typedef struct probe {
	const column *c;
	pf_io *io;
	size_t nfiles, file;
	int slot;		/* the current file's index in the engine, or -1 */
	uint64_t off;		/* its next read */
	size_t read_size;
	uint8_t *bufs;
	uint64_t first;		/* when the first bytes came, or 0 */
	uint64_t bytes;
} probe;

static int probe_next(void *ctx, unsigned r, pf_io_req *q, pf_error *err)
{
	probe *p = ctx;

	for (;;) {
		if (p->file >= p->nfiles)
			return 0;
		if (p->slot < 0) {
			p->slot = pf_io_add_file(p->io, p->c->paths[p->file], 0, err);
			if (p->slot < 0)
				return p->slot;
			p->off = 0;
		}
		if (p->off < pf_io_file_size(p->io, (uint32_t)p->slot))
			break;
		p->file++;
		p->slot = -1;
	}
	*q = (pf_io_req){ .file = (uint32_t)p->slot, .offset = p->off,
			  .len = (uint32_t)p->read_size,
			  .buf = p->bufs + (size_t)r * p->read_size, .buf_index = -1 };
	p->off += p->read_size;
	return 1;
}

static int probe_done(void *ctx, unsigned r, pf_io_req *q, pf_error *err)
{
	probe *p = ctx;

	(void)r;
	if (q->result < 0)
		return pf_io_req_error(p->io, q, err);
	if (!p->first)
		p->first = pf_now_ns();
	p->bytes += (uint64_t)q->result;
	return 0;
}

/* Read every sample file of one column whole through an I/O engine that
 * counts into the table.  @return 0, or 1 after printing why. */
static int read_pass(pf_region_table *t, const column *c, size_t nfiles, unsigned depth,
		     size_t read_size, bool warm, pass_result *out)
{
	pf_io_config cfg = { .queue_depth = depth, .regions = t };
	pf_io_req *reqs = calloc(depth, sizeof(*reqs));
	probe p = { .c = c, .nfiles = nfiles, .slot = -1, .read_size = read_size };
	pf_io_plan plan = { probe_next, probe_done, &p };
	uint64_t t0;
	pf_error err;
	int ret = 1;

	memset(out, 0, sizeof(*out));
	pf_error_clear(&err);
	if (!reqs || posix_memalign((void **)&p.bufs, 4096, depth * read_size)) {
		cli_fail("out of memory");
		goto out;
	}
	if (!warm) {
		for (size_t i = 0; i < nfiles; i++) {
			int fd = open(c->paths[i], O_RDONLY | O_CLOEXEC);

			if (fd >= 0) {
				posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
				close(fd);
			}
		}
	}
	if (pf_io_create(&p.io, &cfg, &err) < 0) {
		cli_print_error(&err);
		goto out;
	}
	pf_region_table_reset_stats(t);
	t0 = pf_now_ns();
	if (pf_io_run(p.io, reqs, depth, &plan, &err) < 0) {
		cli_print_error(&err);
		goto out;
	}
	out->seconds = (double)(pf_now_ns() - t0) * 1e-9;
	out->first_byte_ms = p.first ? (double)(p.first - t0) * 1e-6 : 0;
	out->bytes = p.bytes;
	pf_region_table_mount_stats(t, c->mount, &out->st);
	ret = 0;
out:
	pf_io_free(p.io);
	free(reqs);
	free(p.bufs);
	return ret;
}

/* The relative names of the regular files under dir (sorted), in *out.
 * @return the count, or -1 after printing why. */
static int list_names(const char *dir, char ***out)
{
	const char *args[1] = { dir };
	char **paths = NULL;
	size_t dlen = strlen(dir);
	pf_error err;
	int n;

	pf_error_clear(&err);
	n = pf_paths_expand(args, 1, &paths, &err);
	if (n < 0) {
		cli_print_error(&err);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const char *p = paths[i];

		if (!strncmp(p, dir, dlen))
			p += dlen;
		while (*p == '/')
			p++;
		memmove(paths[i], p, strlen(p) + 1);
	}
	qsort(paths, (size_t)n, sizeof(*paths), cmp_str);
	*out = paths;
	return n;
}

/* The tail of s when it is longer than w (so a path keeps its end). */
static const char *tail(const char *s, size_t w, char *buf, size_t cap)
{
	size_t n = strlen(s);

	if (n <= w)
		return s;
	snprintf(buf, cap, "...%s", s + n - (w - 3));
	return buf;
}

#define CELL 24

/* One row of the side-by-side table; fmt gets each column in turn. */
static void row(const char *label, const column *cols, size_t n,
		void (*cell)(const column *c, char *buf, size_t cap))
{
	printf("%-16s", label);
	for (size_t i = 0; i < n; i++) {
		char buf[128];

		cell(&cols[i], buf, sizeof(buf));
		printf(" %*s", CELL, buf);
	}
	putchar('\n');
}

static void cell_mount(const column *c, char *buf, size_t cap)
{
	char t[128];

	snprintf(buf, cap, "%s", tail(c->mi.path, CELL, t, sizeof(t)));
}

static void cell_region(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.16s (%s)", c->ri.label, kind_name(c->ri.kind));
}

static void cell_fs(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.24s", c->mi.fstype ? c->mi.fstype : "unknown");
}

static void cell_mb(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.1f", mb(c->bytes));
}

static void cell_seconds(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.3f", c->seconds);
}

static void cell_mbps(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.1f", c->mbps);
}

static void cell_ratio(const column *c, char *buf, size_t cap)
{
	if (c->ratio >= 0)
		snprintf(buf, cap, "%.3fx", c->ratio);
	else
		snprintf(buf, cap, "-");
}

static void cell_first(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.1f", c->first_byte_ms);
}

static void cell_p50(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.0f", c->p50);
}

static void cell_p99(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.0f", c->p99);
}

static void cell_cost(const column *c, char *buf, size_t cap)
{
	if (c->ri.kind == PF_REGION_CROSS)
		snprintf(buf, cap, "$%.4f", c->cost);
	else
		snprintf(buf, cap, "-");
}

static void print_table(const column *cols, size_t n, size_t nsample, const char *subdir,
			unsigned repeat, const char *ratio_ref, double price, const char *host)
{
	printf("%zu file%s from each mount%s%s, read whole; host region %s%s\n", nsample,
	       nsample == 1 ? "" : "s", subdir ? " under " : "", subdir ? subdir : "",
	       host ? host : "not set", repeat > 1 ? "; medians of the passes" : "");
	row("mount", cols, n, cell_mount);
	row("region", cols, n, cell_region);
	row("file system", cols, n, cell_fs);
	row("MB read", cols, n, cell_mb);
	row("seconds", cols, n, cell_seconds);
	row("MB/s", cols, n, cell_mbps);
	row(ratio_ref, cols, n, cell_ratio);
	row("first byte ms", cols, n, cell_first);
	row("read p50 us", cols, n, cell_p50);
	row("read p99 us", cols, n, cell_p99);
	row("egress est.", cols, n, cell_cost);
	printf("(egress: an estimate at $%g/GiB from --egress-usd-per-gib, not a bill)\n", price);
}

static void print_json_table(const column *cols, size_t n, char **sample, size_t nsample,
			     const char *subdir, unsigned repeat, double price, const char *host)
{
	printf("{");
	json_str("host", host, true);
	json_str("subdir", subdir, true);
	json_u64("repeat", repeat, true);
	printf("\"sample\":[");
	for (size_t i = 0; i < nsample; i++) {
		if (i)
			putchar(',');
		cli_json_string(stdout, sample[i], strlen(sample[i]));
	}
	printf("],");
	json_dbl("usd_per_gib", price, true);
	printf("\"mounts\":[");
	for (size_t i = 0; i < n; i++) {
		const column *c = &cols[i];

		printf("%s{", i ? "," : "");
		json_str("path", c->mi.path, true);
		json_str("region", c->ri.name, true);
		json_str("kind", kind_name(c->ri.kind), true);
		json_str("fstype", c->mi.fstype, true);
		json_u64("bytes", c->bytes, true);
		json_dbl("seconds", c->seconds, true);
		json_dbl("mb_per_s", c->mbps, true);
		if (c->ratio >= 0)
			json_dbl("ratio", c->ratio, true);
		else
			printf("\"ratio\":null,");
		json_dbl("first_byte_ms", c->first_byte_ms, true);
		json_dbl("read_p50_us", c->p50, true);
		json_dbl("read_p99_us", c->p99, true);
		if (c->ri.kind == PF_REGION_CROSS)
			json_dbl("egress_usd_estimate", c->cost, false);
		else
			printf("\"egress_usd_estimate\":null");
		putchar('}');
	}
	printf("]}\n");
}

int regions_main(int argc, char **argv)
{
	bench_opts o = { .sample = SAMPLE_DEFAULT, .depth = DEPTH_DEFAULT,
			 .read_size = READ_DEFAULT, .repeat = 1 };
	regions_opts ro;
	uint64_t nsample, depth, read_size, repeat;
	bool warm, json;
	const char *subdir = NULL;
	column *cols = NULL;
	size_t ncols = 0;
	char **common = NULL;
	int ncommon = 0, nlisted = 0, ret, first;
	const char *ratio_ref = "vs fastest in";

	regions_defaults(&o.ro);
	ret = cli_parse(&bench_command, argc, argv, &o, &first);
	if (ret >= 0)
		return ret;
	ro = o.ro;
	nsample = o.sample;
	depth = o.depth;
	read_size = o.read_size;
	repeat = o.repeat;
	warm = o.warm;
	json = o.json;
	if (first + 1 < argc)
		return cli_usage("one SUBDIR at most ('%s' is one more)", argv[first + 1]);
	if (first < argc)
		subdir = argv[first];
	ret = build_table(&ro);
	if (ret)
		goto out;
	ret = 2;
	cols = calloc(ro.nmounts, sizeof(*cols));
	if (!cols) {
		cli_fail("out of memory");
		goto out;
	}
	for (size_t m = 1; m < ro.nmounts; m++) {
		pf_mount_info mi = mount_info(&ro, m);

		if (mi.origin != PF_MOUNT_FLAG && mi.origin != PF_MOUNT_FILE)
			continue;
		cols[ncols].mount = m;
		cols[ncols].mi = mi;
		cols[ncols].ri = region_info(&ro, mi.region_index);
		ncols++;
	}
	if (!ncols) {
		cli_fail("no mounts to compare: declare them with --mount PATH=REGION or --mounts FILE");
		goto out;
	}

	/* The names every mount has, under SUBDIR. */
	ret = 1;
	for (size_t i = 0; i < ncols; i++) {
		char dir[8192], **names = NULL;
		int n, kept = 0;

		snprintf(dir, sizeof(dir), "%s%s%s", cols[i].mi.path, subdir ? "/" : "",
			 subdir ? subdir : "");
		n = list_names(dir, &names);
		if (n < 0)
			goto out;
		if (i == 0) {
			common = names;
			ncommon = nlisted = n;
			continue;
		}
		/* The names kept move to the front, in order; those dropped
		 * stay in the list (pf_paths_free() frees them). */
		for (int k = 0; k < ncommon; k++) {
			if (bsearch(&common[k], names, (size_t)n, sizeof(*names), cmp_str)) {
				char *keep = common[k];

				common[k] = common[kept];
				common[kept++] = keep;
			}
		}
		ncommon = kept;
		pf_paths_free(names, (size_t)n);
	}
	if (ncommon == 0) {
		cli_fail("the mounts have no file name in common%s%s", subdir ? " under " : "",
			 subdir ? subdir : "");
		goto out;
	}
	/* Spread the sample over the sorted names. */
	if (nsample > (uint64_t)ncommon)
		nsample = (uint64_t)ncommon;
	for (size_t k = 0; k < nsample; k++) {
		size_t from = k * (size_t)ncommon / nsample;
		char *keep = common[from];

		common[from] = common[k];
		common[k] = keep;
	}
	for (size_t i = 0; i < ncols; i++) {
		cols[i].paths = calloc(nsample, sizeof(char *));
		cols[i].pass = calloc(repeat, sizeof(pass_result));
		if (!cols[i].paths || !cols[i].pass) {
			cli_fail("out of memory");
			goto out;
		}
		for (size_t k = 0; k < nsample; k++) {
			if (asprintf(&cols[i].paths[k], "%s%s%s/%s", cols[i].mi.path,
				     subdir ? "/" : "", subdir ? subdir : "", common[k]) < 0) {
				cols[i].paths[k] = NULL;
				cli_fail("out of memory");
				goto out;
			}
		}
	}

	/* Interleaved: each pass visits the mounts in a rotated order. */
	for (unsigned p = 0; p < repeat; p++)
		for (size_t j = 0; j < ncols; j++) {
			column *col = &cols[(j + p) % ncols];

			if (read_pass(ro.table, col, nsample, (unsigned)depth, (size_t)read_size,
				      warm, &col->pass[p]))
				goto out;
		}

	double best_in = 0, best_any = 0;
	for (size_t i = 0; i < ncols; i++) {
		column *col = &cols[i];
		double v[REGIONS_MAX_RUNS];

		for (unsigned p = 0; p < repeat; p++)
			v[p] = col->pass[p].seconds;
		col->seconds = cli_median(v, (unsigned)repeat);
		for (unsigned p = 0; p < repeat; p++)
			v[p] = col->pass[p].seconds > 0 ? mb(col->pass[p].bytes) / col->pass[p].seconds : 0;
		col->mbps = cli_median(v, (unsigned)repeat);
		for (unsigned p = 0; p < repeat; p++)
			v[p] = col->pass[p].first_byte_ms;
		col->first_byte_ms = cli_median(v, (unsigned)repeat);
		for (unsigned p = 0; p < repeat; p++)
			v[p] = pf_io_stats_quantile_us(&col->pass[p].st.io, 0.50);
		col->p50 = cli_median(v, (unsigned)repeat);
		for (unsigned p = 0; p < repeat; p++)
			v[p] = pf_io_stats_quantile_us(&col->pass[p].st.io, 0.99);
		col->p99 = cli_median(v, (unsigned)repeat);
		col->bytes = col->pass[0].bytes;
		col->cost = (double)col->bytes / GIB * ro.usd_per_gib;
		if (col->ri.kind == PF_REGION_IN && col->mbps > best_in)
			best_in = col->mbps;
		if (col->mbps > best_any)
			best_any = col->mbps;
	}
	if (best_in <= 0)
		ratio_ref = "vs fastest";	/* no in-region mount to compare with */
	for (size_t i = 0; i < ncols; i++) {
		double ref = best_in > 0 ? best_in : best_any;

		cols[i].ratio = ref > 0 ? cols[i].mbps / ref : -1;
	}
	if (json)
		print_json_table(cols, ncols, common, (size_t)nsample, subdir, (unsigned)repeat,
				 ro.usd_per_gib, pf_region_table_host(ro.table));
	else
		print_table(cols, ncols, (size_t)nsample, subdir, (unsigned)repeat, ratio_ref,
			    ro.usd_per_gib, pf_region_table_host(ro.table));
	ret = 0;
out:
	for (size_t i = 0; cols && i < ncols; i++) {
		for (size_t k = 0; cols[i].paths && k < nsample; k++)
			free(cols[i].paths[k]);
		free(cols[i].paths);
		free(cols[i].pass);
	}
	free(cols);
	if (common)
		pf_paths_free(common, (size_t)nlisted);
	regions_free(&ro);
	return ret;
}
