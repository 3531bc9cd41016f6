/* SPDX-License-Identifier: Apache-2.0 */
/* Storage regions in a report: which regions hold the dataset's bytes,
 * what to say before the first read (warn, refuse, note), each run's
 * counters, and the per-region section.  The region table itself (mounts,
 * regions, counting reads) is io/region.c's.
 *
 * The figures, and why they are defined so:
 *   MB/s        a region's bytes over its active time (wall time with at
 *               least one of its reads in flight).  The loader reads
 *               several regions at once, so bytes over the run's time
 *               would say how much the region was asked for, not what
 *               it delivers.
 *   loader time the region's active time over the run's time: how much
 *               of the run had the region's reads outstanding.
 *   p50, p99    of the region's read latencies (upper bounds of log2
 *               buckets, as for next()).
 *   egress      bytes read from regions known to be other than the host's,
 *               times the price: an estimate, not a bill.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc_internal.h"
#include "report_internal.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct region_run {
	double seconds;
	pf_region_stats *region;	/* [nregions] */
	pf_region_stats *mount;		/* [nmounts] */
} region_run;

struct pf_region_usage {
	pf_region_table *t;
	pf_region_usage_config cfg;
	size_t nregions, nmounts;
	uint64_t *region_files, *region_bytes;	/* the dataset, per region */
	uint64_t *mount_files, *mount_bytes;	/* and per mount */
	uint64_t dataset_bytes;
	size_t dataset_files;
	region_run *runs;
	size_t nruns, runs_cap;
};

static double mb(uint64_t bytes)
{
	return (double)bytes / 1e6;
}

static double share(uint64_t part, uint64_t whole)
{
	return whole ? (double)part / (double)whole : 0;
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

static const char *policy_name(pf_cross_region p)
{
	return p == PF_CROSS_REGION_REFUSE ? "refuse" : p == PF_CROSS_REGION_ALLOW ? "allow"
										     : "warn";
}

static pf_mount_info mount_info(const pf_region_usage *u, size_t m)
{
	pf_mount_info mi;

	pf_region_table_mount(u->t, m, &mi);
	return mi;
}

static pf_region_info region_info(const pf_region_usage *u, size_t r)
{
	pf_region_info ri;

	pf_region_table_region(u->t, r, &ri);
	return ri;
}

void pf_region_usage_free(pf_region_usage *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < u->nruns; i++) {
		pf_free(u->runs[i].region);
		pf_free(u->runs[i].mount);
	}
	pf_free(u->runs);
	pf_free(u->region_files);
	pf_free(u->region_bytes);
	pf_free(u->mount_files);
	pf_free(u->mount_bytes);
	pf_free(u);
}

int pf_region_usage_create(pf_region_usage **out, pf_region_table *t,
			   const char *const *files, size_t nfiles,
			   const pf_region_usage_config *cfg, pf_error *err)
{
	return pf_region_usage_create_sized(out, t, files, NULL, nfiles, cfg, err);
}

int pf_region_usage_create_sized(pf_region_usage **out, pf_region_table *t,
				 const char *const *files, const uint64_t *sizes, size_t nfiles,
				 const pf_region_usage_config *cfg, pf_error *err)
{
	pf_stat_result *st = NULL;
	pf_region_usage *u;

	pf_error_clear(err);
	*out = NULL;
	if (!(cfg->usd_per_gib >= 0) || isinf(cfg->usd_per_gib))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the egress price %g is not a number >= 0", cfg->usd_per_gib);
	u = pf_calloc(1, sizeof(*u));
	if (!u)
		goto nomem;
	u->t = t;
	u->cfg = *cfg;
	u->nregions = pf_region_table_regions(t);
	u->nmounts = pf_region_table_mounts(t);
	u->region_files = pf_calloc(u->nregions, sizeof(uint64_t));
	u->region_bytes = pf_calloc(u->nregions, sizeof(uint64_t));
	u->mount_files = pf_calloc(u->nmounts, sizeof(uint64_t));
	u->mount_bytes = pf_calloc(u->nmounts, sizeof(uint64_t));
	if (!u->region_files || !u->region_bytes || !u->mount_files || !u->mount_bytes)
		goto nomem;
	/* Without the sizes, every file's stat at once (a round trip each
	 * on a far bucket, overlapping). */
	if (!sizes && nfiles) {
		st = pf_calloc(nfiles, sizeof(*st));
		if (!st || pf_stat_many(files, nfiles, st) < 0)
			goto nomem;
	}
	for (size_t i = 0; i < nfiles; i++) {
		size_t m = pf_region_table_lookup(t, files[i]);
		size_t r = mount_info(u, m).region_index;
		uint64_t size = sizes ? sizes[i] : st[i].error ? 0 : st[i].size;

		u->mount_files[m]++;
		u->mount_bytes[m] += size;
		u->region_files[r]++;
		u->region_bytes[r] += size;
		u->dataset_bytes += size;
		u->dataset_files++;
	}
	pf_free(st);
	*out = u;
	return 0;
nomem:
	pf_free(st);
	pf_region_usage_free(u);
	return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory for the regions");
}

/* "/mnt/far (fuse.regionfs)", "/mnt/b (fuse.s3fs: the s3fs bucket
 * client)" into buf. */
static const char *mount_label(const pf_region_usage *u, size_t m, char *buf, size_t cap)
{
	pf_mount_info mi = mount_info(u, m);
	const char *client = pf_mount_bucket_client(mi.fstype, NULL);

	snprintf(buf, cap, "%s%s%s%s%s%s%s", m ? mi.path : "local files", mi.fstype ? " (" : "",
		 mi.fstype ? mi.fstype : "", client ? ": the " : "", client ? client : "",
		 client ? " bucket client" : "", mi.fstype ? ")" : "");
	return buf;
}

/* The mounts of region r that hold dataset files, as "a, b and 2 more". */
static void region_mounts(const pf_region_usage *u, size_t r, char *buf, size_t cap)
{
	size_t n = 0, shown = 0;

	buf[0] = '\0';
	for (size_t m = 0; m < u->nmounts; m++) {
		char one[PF_PATH_MAX + 64];
		size_t len = strlen(buf);

		if (mount_info(u, m).region_index != r || !u->mount_files[m])
			continue;
		n++;
		if (shown == 3)
			continue;
		mount_label(u, m, one, sizeof(one));
		snprintf(buf + len, cap - len, "%s%s", shown ? ", " : "", one);
		shown++;
	}
	if (n > shown) {
		size_t len = strlen(buf);

		snprintf(buf + len, cap - len, " and %zu more", n - shown);
	}
}

int pf_region_usage_check(const pf_region_usage *u,
			  void (*say)(void *ctx, const char *line), void *ctx)
{
	const char *host = pf_region_table_host(u->t);
	char line[4 * PF_PATH_MAX + 1024], where[3 * (PF_PATH_MAX + 64) + 64];
	bool refuse = false;

	if (host) {
		snprintf(line, sizeof(line), "host region %s (from %s)", host,
			 u->cfg.host_source ? u->cfg.host_source : "the caller");
		say(ctx, line);
	}
	for (size_t r = 1; r < u->nregions; r++) {
		pf_region_info ri = region_info(u, r);
		double pct = 100 * share(u->region_bytes[r], u->dataset_bytes);

		if (!u->region_files[r])
			continue;
		region_mounts(u, r, where, sizeof(where));
		if (ri.kind == PF_REGION_CROSS && u->cfg.policy == PF_CROSS_REGION_REFUSE) {
			snprintf(line, sizeof(line),
				 "refusing to read across regions: region %s holds %.1f%% of "
				 "the dataset's bytes (%.1f MB in %llu of %zu files, under %s) "
				 "and this host is in %s (--cross-region=refuse); nothing was read",
				 ri.name, pct, mb(u->region_bytes[r]),
				 (unsigned long long)u->region_files[r], u->dataset_files, where,
				 host);
			refuse = true;
		} else if (ri.kind == PF_REGION_CROSS && u->cfg.policy == PF_CROSS_REGION_WARN) {
			snprintf(line, sizeof(line),
				 "warning: region %s is not this host's region (%s): it holds "
				 "%.1f%% of the dataset's bytes (%.1f MB in %llu of %zu files, "
				 "under %s); reading it is slower and costs egress "
				 "(--cross-region=refuse stops here, allow says nothing)",
				 ri.name, host, pct, mb(u->region_bytes[r]),
				 (unsigned long long)u->region_files[r], u->dataset_files, where);
		} else if (ri.undeclared && u->cfg.policy != PF_CROSS_REGION_ALLOW) {
			snprintf(line, sizeof(line),
				 "note: %.1f%% of the dataset's bytes are on FUSE mounts with no "
				 "declared region (%s): declare them with --mount PATH=REGION to "
				 "have them checked", pct, where);
		} else if (ri.kind == PF_REGION_UNKNOWN && u->cfg.policy != PF_CROSS_REGION_ALLOW) {
			snprintf(line, sizeof(line),
				 "note: region %s holds %.1f%% of the dataset's bytes (under %s), "
				 "but this host's region is not set (--region or PODFEED_REGION), "
				 "so it cannot be told in- or cross-region", ri.label, pct, where);
		} else {
			continue;
		}
		say(ctx, line);
	}
	/* What each bucket client holding the dataset's files wants set. */
	for (size_t m = 1; m < u->nmounts; m++) {
		pf_mount_info mi = mount_info(u, m);
		const char *advice, *client = pf_mount_bucket_client(mi.fstype, &advice);

		if (!client || !u->mount_files[m] || u->cfg.policy == PF_CROSS_REGION_ALLOW)
			continue;
		snprintf(line, sizeof(line), "note: %s is a %s bucket mount: %s (docs/buckets.md)",
			 mi.path, client, advice);
		say(ctx, line);
	}
	return refuse ? 1 : 0;
}

int pf_region_usage_run_done(pf_region_usage *u, double seconds)
{
	region_run *run;

	if (pf_grow(&u->runs, &u->runs_cap, u->nruns + 1, sizeof(*u->runs)) < 0)
		return -ENOMEM;
	run = &u->runs[u->nruns];
	run->seconds = seconds;
	run->region = pf_calloc(u->nregions, sizeof(*run->region));
	run->mount = pf_calloc(u->nmounts, sizeof(*run->mount));
	if (!run->region || !run->mount) {
		pf_free(run->region);
		pf_free(run->mount);
		return -ENOMEM;
	}
	for (size_t r = 0; r < u->nregions; r++)
		pf_region_table_region_stats(u->t, r, &run->region[r]);
	for (size_t m = 0; m < u->nmounts; m++)
		pf_region_table_mount_stats(u->t, m, &run->mount[m]);
	pf_region_table_reset_stats(u->t);
	return (int)u->nruns++;
}

/* ------------------------------------------------------------------ */
/* The section                                                          */

static double mbps(const pf_region_stats *st)
{
	return st->active_ns ? (double)st->io.bytes / ((double)st->active_ns * 1e-9) / 1e6 : 0;
}

/* What the section derives from one run. */
typedef struct summary {
	const region_run *run;
	double in_mbps, cross_mbps, ratio;	/* ratio < 0: not both kinds */
	uint64_t egress, unknown_bytes;
	double cost;
} summary;

static bool region_shown(const pf_region_usage *u, const region_run *run, size_t r)
{
	return u->region_files[r] || run->region[r].io.ops;
}

static bool mount_shown(const pf_region_usage *u, const region_run *run, size_t m)
{
	return u->mount_files[m] || run->mount[m].io.ops;
}

static summary summarize(const pf_region_usage *u, size_t run)
{
	summary s = { .run = &u->runs[run], .ratio = -1 };
	uint64_t in_b = 0, in_ns = 0, cross_b = 0, cross_ns = 0;

	for (size_t r = 0; r < u->nregions; r++) {
		const pf_region_stats *st = &s.run->region[r];
		pf_region_kind k = region_info(u, r).kind;

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
	s.cost = (double)cross_b / GIB * u->cfg.usd_per_gib;
	return s;
}

/* Whether the text has anything to say about regions: a host region, a
 * declared mount, or a FUSE mount holding files. */
static bool worth_text(const pf_region_usage *u)
{
	if (pf_region_table_host(u->t))
		return true;
	for (size_t m = 1; m < u->nmounts; m++) {
		pf_mount_info mi = mount_info(u, m);

		if (mi.origin == PF_MOUNT_FLAG || mi.origin == PF_MOUNT_FILE || u->mount_files[m])
			return true;
	}
	return false;
}

/* A row of numbers; a mount's row ends with the mount (paths are long). */
static void text_row(pf_text *t, const char *label, const char *kind, uint64_t files,
		     double dshare, const pf_region_stats *st, double seconds,
		     const char *mount)
{
	pf_text_printf(t, "  %-16s %-7s %5llu %6.1f%% %9.1f %9.1f %8.0f %8.0f %5.0f%%%s%s\n",
		       label, kind, (unsigned long long)files, dshare * 100, mb(st->io.bytes),
		       mbps(st), pf_io_stats_quantile_us(&st->io, 0.50),
		       pf_io_stats_quantile_us(&st->io, 0.99),
		       seconds > 0 ? 100 * (double)st->active_ns * 1e-9 / seconds : 0,
		       mount ? "  " : "", mount ? mount : "");
}

static void regions_text(pf_text *t, const pf_region_usage *u, const summary *s)
{
	const char *host = pf_region_table_host(u->t);

	if (host)
		pf_text_printf(t, "regions     host in %s (from %s); cross-region reads: %s\n",
			       host, u->cfg.host_source ? u->cfg.host_source : "the caller",
			       policy_name(u->cfg.policy));
	else
		pf_text_printf(t, "regions     host region not set (--region or PODFEED_REGION): "
			       "no region can be called cross-region\n");
	pf_text_printf(t, "  %-16s %-7s %5s %7s %9s %9s %8s %8s %6s\n", "region", "kind",
		       "files", "share", "MB read", "MB/s", "p50 us", "p99 us", "time");
	for (size_t r = 0; r < u->nregions; r++) {
		pf_region_info ri = region_info(u, r);

		if (!region_shown(u, s->run, r))
			continue;
		text_row(t, ri.label, kind_name(ri.kind), u->region_files[r],
			 share(u->region_bytes[r], u->dataset_bytes), &s->run->region[r],
			 s->run->seconds, NULL);
		for (size_t m = 0; m < u->nmounts; m++) {
			char label[PF_PATH_MAX + 64];

			if (mount_info(u, m).region_index != r || !mount_shown(u, s->run, m))
				continue;
			text_row(t, "  mount", "", u->mount_files[m],
				 share(u->mount_bytes[m], u->dataset_bytes), &s->run->mount[m],
				 s->run->seconds, mount_label(u, m, label, sizeof(label)));
		}
	}
	pf_text_printf(t, "  (MB/s: bytes over the time the region had reads in flight; time: "
		       "that time over the loader's %.3f s; p50/p99: read latency)\n",
		       s->run->seconds);
	if (s->ratio >= 0)
		pf_text_printf(t, "  cross-region  %.1f MB/s, %.3fx the in-region %.1f MB/s\n",
			       s->cross_mbps, s->ratio, s->in_mbps);
	pf_text_printf(t, "  egress      %.1f MB (%.4f GiB) read from other regions: about "
		       "$%.4f at $%g/GiB (an estimate from --egress-usd-per-gib, not a bill)\n",
		       mb(s->egress), (double)s->egress / GIB, s->cost, u->cfg.usd_per_gib);
	if (s->unknown_bytes)
		pf_text_printf(t, "  not counted %.1f MB from regions not known to be in or out "
			       "of the host's\n", mb(s->unknown_bytes));
}

/* The counters every region and mount entry has. */
static void json_stats(json_t *o, const pf_region_stats *st, double seconds, bool *bad)
{
	pf_json_put(o, "bytes_read", pf_json_u64(st->io.bytes), bad);
	pf_json_put(o, "reads", pf_json_u64(st->io.ops), bad);
	pf_json_put(o, "read_errors", pf_json_u64(st->io.errors), bad);
	pf_json_put(o, "active_seconds", pf_json_num((double)st->active_ns * 1e-9), bad);
	pf_json_put(o, "mb_per_s", pf_json_num(mbps(st)), bad);
	pf_json_put(o, "read_p50_us", pf_json_num(pf_io_stats_quantile_us(&st->io, 0.50)), bad);
	pf_json_put(o, "read_p99_us", pf_json_num(pf_io_stats_quantile_us(&st->io, 0.99)), bad);
	pf_json_put(o, "loader_time_share",
		    pf_json_num(seconds > 0 ? (double)st->active_ns * 1e-9 / seconds : 0), bad);
}

static json_t *regions_json(const pf_region_usage *u, const summary *s, bool *bad)
{
	json_t *o = json_object(), *per = json_array(), *eg = json_object();

	pf_json_put(o, "host", pf_json_str(pf_region_table_host(u->t)), bad);
	pf_json_put(o, "host_source", pf_json_str(u->cfg.host_source), bad);
	pf_json_put(o, "cross_region_policy", pf_json_str(policy_name(u->cfg.policy)), bad);
	pf_json_put(o, "loader_seconds", pf_json_num(s->run->seconds), bad);
	pf_json_put(o, "dataset_bytes", pf_json_u64(u->dataset_bytes), bad);
	for (size_t r = 0; r < u->nregions; r++) {
		pf_region_info ri = region_info(u, r);
		json_t *e, *mounts;

		if (!region_shown(u, s->run, r))
			continue;
		e = json_object();
		mounts = json_array();
		pf_json_put(e, "region", pf_json_str(ri.name), bad);
		pf_json_put(e, "label", pf_json_str(ri.label), bad);
		pf_json_put(e, "kind", pf_json_str(kind_name(ri.kind)), bad);
		pf_json_put(e, "cross_region", ri.kind == PF_REGION_UNKNOWN ? json_null()
			    : pf_json_bool(ri.kind == PF_REGION_CROSS), bad);
		pf_json_put(e, "files", pf_json_u64(u->region_files[r]), bad);
		pf_json_put(e, "dataset_bytes", pf_json_u64(u->region_bytes[r]), bad);
		pf_json_put(e, "dataset_share",
			    pf_json_num(share(u->region_bytes[r], u->dataset_bytes)), bad);
		json_stats(e, &s->run->region[r], s->run->seconds, bad);
		for (size_t m = 0; m < u->nmounts; m++) {
			pf_mount_info mi = mount_info(u, m);
			json_t *me;

			if (mi.region_index != r || !mount_shown(u, s->run, m))
				continue;
			me = json_object();
			pf_json_put(me, "path", pf_json_str(m ? mi.path : NULL), bad);
			pf_json_put(me, "fstype", pf_json_str(mi.fstype), bad);
			pf_json_put(me, "client", pf_json_str(pf_mount_bucket_client(mi.fstype,
										NULL)), bad);
			pf_json_put(me, "source", pf_json_str(mi.source), bad);
			pf_json_put(me, "fuse", pf_json_bool(mi.fuse), bad);
			pf_json_put(me, "origin", pf_json_str(origin_name(mi.origin)), bad);
			pf_json_put(me, "declared_region", pf_json_str(mi.region), bad);
			pf_json_put(me, "files", pf_json_u64(u->mount_files[m]), bad);
			pf_json_put(me, "dataset_bytes", pf_json_u64(u->mount_bytes[m]), bad);
			json_stats(me, &s->run->mount[m], s->run->seconds, bad);
			if (json_array_append_new(mounts, me))
				*bad = true;
		}
		pf_json_put(e, "mounts", mounts, bad);
		if (json_array_append_new(per, e))
			*bad = true;
	}
	pf_json_put(o, "per_region", per, bad);
	if (s->ratio >= 0) {
		pf_json_put(o, "in_region_mb_per_s", pf_json_num(s->in_mbps), bad);
		pf_json_put(o, "cross_region_mb_per_s", pf_json_num(s->cross_mbps), bad);
		pf_json_put(o, "cross_to_in_region_ratio", pf_json_num(s->ratio), bad);
	} else {
		pf_json_put(o, "cross_to_in_region_ratio", json_null(), bad);
	}
	pf_json_put(eg, "bytes", pf_json_u64(s->egress), bad);
	pf_json_put(eg, "gib", pf_json_num((double)s->egress / GIB), bad);
	pf_json_put(eg, "usd_per_gib", pf_json_num(u->cfg.usd_per_gib), bad);
	pf_json_put(eg, "usd_estimate", pf_json_num(s->cost), bad);
	pf_json_put(eg, "note", pf_json_str("an estimate: egress bytes times "
					    "--egress-usd-per-gib"), bad);
	pf_json_put(eg, "unknown_region_bytes", pf_json_u64(s->unknown_bytes), bad);
	pf_json_put(o, "egress", eg, bad);
	return o;
}

int pf_report_add_regions(pf_report *r, const pf_region_usage *u, size_t run, pf_error *err)
{
	pf_text t = { 0 };
	json_t *o;
	summary s;
	bool bad = false;

	pf_error_clear(err);
	if (run >= u->nruns)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "no run %zu of the regions (%zu kept)", run, u->nruns);
	s = summarize(u, run);
	if (worth_text(u))
		regions_text(&t, u, &s);
	o = json_object();
	pf_json_put(o, "regions", regions_json(u, &s, &bad), &bad);
	return pf_report_section(r, PF_SECTION_REGIONS, &t, o, bad, err);
}
