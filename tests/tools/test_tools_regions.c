/* SPDX-License-Identifier: Apache-2.0 */
/* Storage regions end to end: a dataset half in a local in-region
 * directory and half on a regionfs mount declared as another region.
 * The warning comes before the first batch, --cross-region=refuse reads
 * nothing, the report separates the regions, the cross-region MB/s is the
 * mount's cap; an undeclared FUSE mount is named; `loadbench regions`
 * compares mounts side by side; a start over many far shards asks the
 * mount only about what it reads (with a manifest), or reads every tail
 * many at once, one request each (without); bad region options are
 * refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "podfeed.h"
#include "testutil.h"

#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 15000
#define CAP_MBPS 40.0

static pid_t rfs_pid = -1;
static char dir[128], near_dir[192], backing[192], mnt[192], stats_path[192];

/* Always run, also after a failed assertion: no mount and no process
 * outlives the test. */
static void teardown(void)
{
	tu_regionfs_stop(&rfs_pid, mnt);
}

/* `regionfs -f ARGS --stats STATS FROM mnt`, waiting for the mount; the
 * child gets SIGTERM if this test process dies. */
static void start(const char *args, const char *from)
{
	rfs_pid = tu_regionfs_start(args, stats_path, from, mnt, START_TIMEOUT_MS);
}

/* SIGTERM; regionfs must exit 0, unmounted.  @return its counters
 * (decref). */
static json_t *stop(void)
{
	int64_t deadline = tu_now_ns() + (int64_t)STOP_TIMEOUT_MS * 1000000;
	json_error_t jerr;
	int status = 0;
	json_t *o;
	pid_t w;

	cr_assert_gt(rfs_pid, 0);
	cr_assert_eq(kill(rfs_pid, SIGTERM), 0);
	while ((w = waitpid(rfs_pid, &status, WNOHANG)) == 0) {
		cr_assert_lt(tu_now_ns(), deadline, "regionfs did not exit");
		tu_sleep_ms(10);
	}
	rfs_pid = -1;
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "regionfs status %d", status);
	cr_assert_not(tu_is_mounted(mnt));
	o = json_load_file(stats_path, 0, &jerr);
	cr_assert_not_null(o, "%s: %s", stats_path, jerr.text);
	return o;
}

static uint64_t ju(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	cr_assert(json_is_integer(v), "no integer '%s'", key);
	return (uint64_t)json_integer_value(v);
}

static double jd(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	cr_assert(json_is_number(v), "no number '%s'", key);
	return json_number_value(v);
}

static const char *js(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	cr_assert(json_is_string(v), "no string '%s'", key);
	return json_string_value(v);
}

static uint64_t dir_bytes(const char *d)
{
	char **files;
	const char *args[1] = { d };
	pf_error err;
	uint64_t sum = 0;
	int n = pf_paths_expand(args, 1, &files, &err);

	cr_assert_gt(n, 0);
	for (int i = 0; i < n; i++) {
		struct stat st;

		cr_assert_eq(stat(files[i], &st), 0);
		sum += (uint64_t)st.st_size;
	}
	pf_paths_free(files, (size_t)n);
	return sum;
}

/* 2,000 incompressible image records (16-64 KiB) in 8 indexed shards,
 * about 80 MB: 4 shards in near/, 4 in backing/ (the regionfs side).
 * Enough bytes that the mount's cap, not start-up, sets the pace. */
static void make_dataset(void)
{
	const char *st = tu_env_tool("SHARDTOOL");

	snprintf(dir, sizeof(dir), "%s", tu_tmpdir());
	snprintf(near_dir, sizeof(near_dir), "%s/near", dir);
	snprintf(backing, sizeof(backing), "%s/backing", dir);
	snprintf(mnt, sizeof(mnt), "%s/far", dir);
	snprintf(stats_path, sizeof(stats_path), "%s/stats.json", dir);
	cr_assert_eq(mkdir(near_dir, 0755), 0);
	cr_assert_eq(mkdir(backing, 0755), 0);
	cr_assert_eq(mkdir(mnt, 0755), 0);
	cr_assert_eq(tu_system("%s synth --kind blobs --records 2000 --shards 8 --out %s/raw "
			       "--seed 3 >/dev/null", st, dir), 0);
	cr_assert_eq(tu_system("%s convert --shards 8 --out %s/idx %s/raw >/dev/null", st, dir,
			       dir), 0);
	cr_assert_eq(tu_system("mv %s/idx/part-0000[0-3]-* %s/ && mv %s/idx/part-0000[4-7]-* %s/",
			       dir, near_dir, dir, backing), 0);
}

typedef struct result {
	int status;
	char *out, *err;	/* free */
} result;

/* Run `loadbench ARGS` (or `loadbench regions ARGS`), capturing both
 * streams. */
static result run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static result run(const char *fmt, ...)
{
	char args[4096], opath[256], epath[256];
	result r;
	size_t len;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(opath, sizeof(opath), "%s/out.txt", dir);
	snprintf(epath, sizeof(epath), "%s/err.txt", dir);
	r.status = tu_system("%s %s >%s 2>%s", tu_env_tool("LOADBENCH"), args, opath, epath);
	r.out = (char *)tu_read_file(opath, &len);
	r.out = realloc(r.out, len + 1);
	r.out[len] = '\0';
	r.err = (char *)tu_read_file(epath, &len);
	r.err = realloc(r.err, len + 1);
	r.err[len] = '\0';
	return r;
}

static void result_free(result *r)
{
	free(r->out);
	free(r->err);
}

static json_t *parse_json(const result *r)
{
	json_error_t jerr;
	json_t *o = json_loads(r->out, 0, &jerr);

	cr_assert_not_null(o, "%s: %s (stderr: %s)", jerr.text, r->out, r->err);
	return o;
}

/* The per_region entry labelled label. */
static json_t *region_entry(json_t *report, const char *label)
{
	json_t *regions = json_object_get(report, "regions"), *list, *e;
	size_t i;

	cr_assert(json_is_object(regions), "no regions in the report");
	list = json_object_get(regions, "per_region");
	cr_assert(json_is_array(list));
	json_array_foreach(list, i, e)
		if (!strcmp(js(e, "label"), label))
			return e;
	cr_assert_fail("no region '%s' in the report", label);
	return NULL;
}

/* Every batch of 25 records on one core: 2,000 records make 80 whole
 * steps, so every frame is read. */
#define RUN_ARGS "--quiet --per-core-batch 25 --shuffle-window 500 --threads 2"

/* ------------------------------------------------------------------ */

Test(regions, refuse_reads_nothing, .fini = teardown, .timeout = 120)
{
	char pct[32];
	result r;
	json_t *s;

	tu_need_fuse();
	make_dataset();
	start("--mbps 40", backing);
	snprintf(pct, sizeof(pct), "%.1f%%",
		 100.0 * (double)dir_bytes(backing) /
			 (double)(dir_bytes(backing) + dir_bytes(near_dir)));
	r = run(RUN_ARGS " --region us-east1 --mount %s=europe-west4 --cross-region=refuse %s %s",
		mnt, near_dir, mnt);
	cr_assert_eq(r.status, 3, "status %d; stderr: %s", r.status, r.err);
	cr_assert(strstr(r.err, "refusing to read across regions: region europe-west4 holds"),
		  "%s", r.err);
	cr_assert(strstr(r.err, pct), "the share %s is not named: %s", pct, r.err);
	cr_assert(strstr(r.err, "this host is in us-east1"), "%s", r.err);
	cr_assert(strstr(r.err, mnt), "%s", r.err);
	cr_assert_str_eq(r.out, "");
	result_free(&r);
	s = stop();
	cr_assert_eq(ju(s, "reads"), 0, "refuse read from the mount");
	cr_assert_eq(ju(s, "read_bytes"), 0);
	cr_assert_eq(ju(s, "open"), 0, "refuse opened a file on the mount");
	json_decref(s);

	/* Refuse stops cross-region reads only: the in-region half runs. */
	r = run(RUN_ARGS " --region us-east1 --mount %s=europe-west4 --cross-region=refuse %s",
		mnt, near_dir);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_null(strstr(r.err, "warning"), "%s", r.err);
	result_free(&r);
}

/* The main run: warning first, two regions in the report, the cap. */
Test(regions, warns_and_reports_both_regions, .fini = teardown, .timeout = 180)
{
	uint64_t near_b, far_b;
	json_t *rep, *in, *cross, *eg, *m;
	double mbps, want_share;
	char pct[32];
	result r;

	tu_need_fuse();
	make_dataset();
	near_b = dir_bytes(near_dir);
	far_b = dir_bytes(backing);
	want_share = (double)far_b / (double)(near_b + far_b);
	snprintf(pct, sizeof(pct), "%.1f%%", 100 * want_share);
	start("--mbps 40", backing);
	r = run(RUN_ARGS " --json --region us-east1 --mount %s=us-east1 --mount %s=europe-west4 "
		"--egress-usd-per-gib 0.05 %s %s", near_dir, mnt, near_dir, mnt);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "warning: region europe-west4 is not this host's region "
			 "(us-east1): it holds"), "%s", r.err);
	cr_assert(strstr(r.err, pct), "the share %s is not named: %s", pct, r.err);
	/* The warning comes before the run's first read: stderr has it
	 * before anything else the run says. */
	cr_assert(strstr(r.err, "host region us-east1 (from --region)"), "%s", r.err);
	rep = parse_json(&r);
	in = region_entry(rep, "us-east1");
	cross = region_entry(rep, "europe-west4");
	cr_assert(json_is_false(json_object_get(in, "cross_region")));
	cr_assert(json_is_true(json_object_get(cross, "cross_region")));
	cr_assert_str_eq(js(cross, "kind"), "cross");
	cr_assert_eq(ju(in, "files"), 4);
	cr_assert_eq(ju(cross, "files"), 4);
	cr_assert_eq(ju(in, "dataset_bytes"), near_b);
	cr_assert_eq(ju(cross, "dataset_bytes"), far_b);
	cr_assert_float_eq(jd(cross, "dataset_share"), want_share, 1e-6);
	/* Every frame was read (and the index tails): close to the files. */
	cr_assert_geq(ju(in, "bytes_read"), near_b * 95 / 100);
	cr_assert_leq(ju(in, "bytes_read"), near_b * 11 / 10);
	cr_assert_geq(ju(cross, "bytes_read"), far_b * 95 / 100);
	cr_assert_leq(ju(cross, "bytes_read"), far_b * 11 / 10);
	cr_assert_eq(ju(in, "read_errors") + ju(cross, "read_errors"), 0);
	cr_assert_gt(ju(cross, "reads"), 4);
	cr_assert_geq(jd(cross, "read_p99_us"), jd(cross, "read_p50_us"));
	cr_assert_gt(jd(cross, "loader_time_share"), 0);
	cr_assert_leq(jd(cross, "loader_time_share"), 1.0);

	/* The cap sets the cross-region pace. */
	mbps = jd(cross, "mb_per_s");
	cr_log_info("cross-region %.1f MB/s through a %.0f MB/s cap; in-region %.1f MB/s",
		    mbps, CAP_MBPS, jd(in, "mb_per_s"));
	cr_assert(mbps >= CAP_MBPS * 0.8 && mbps <= CAP_MBPS * 1.2,
		  "cross-region %.1f MB/s through a %.0f MB/s cap", mbps, CAP_MBPS);
	cr_assert_float_eq(jd(json_object_get(rep, "regions"), "cross_to_in_region_ratio"),
			   mbps / jd(in, "mb_per_s"), 1e-6);
	cr_assert_lt(jd(json_object_get(rep, "regions"), "cross_to_in_region_ratio"), 1.0);

	/* Egress: the cross-region bytes, at the given price. */
	eg = json_object_get(json_object_get(rep, "regions"), "egress");
	cr_assert_eq(ju(eg, "bytes"), ju(cross, "bytes_read"));
	cr_assert_float_eq(jd(eg, "usd_per_gib"), 0.05, 1e-12);
	double usd = (double)ju(cross, "bytes_read") / 1073741824.0 * 0.05;
	cr_assert_float_eq(jd(eg, "usd_estimate"), usd, usd * 1e-8, "JSON keeps 9 digits");
	cr_assert(strstr(js(eg, "note"), "estimate"));

	/* Each region names its mount. */
	m = json_array_get(json_object_get(cross, "mounts"), 0);
	cr_assert_str_eq(js(m, "path"), mnt);
	cr_assert_str_eq(js(m, "fstype"), "fuse.regionfs");
	cr_assert_str_eq(js(m, "origin"), "flag");
	cr_assert(json_is_true(json_object_get(m, "fuse")));
	m = json_array_get(json_object_get(in, "mounts"), 0);
	cr_assert_str_eq(js(m, "path"), near_dir);
	json_decref(rep);
	result_free(&r);

	json_t *s = stop();
	cr_assert_geq(ju(s, "read_bytes"), far_b * 95 / 100);
	json_decref(s);
}

/* The text report, with the mounts from a mount table file and the host
 * region from the environment. */
Test(regions, text_report_separates_regions, .fini = teardown, .timeout = 180)
{
	char conf[256], text[1024];
	result r;
	int n;

	tu_need_fuse();
	make_dataset();
	start("", backing);
	snprintf(conf, sizeof(conf), "%s/mounts.conf", dir);
	n = snprintf(text, sizeof(text), "# test regions\n%s   us-east1\n\n%s europe-west4  # far\n",
		     near_dir, mnt);
	tu_write_file(conf, text, (size_t)n);
	setenv("PODFEED_REGION", "us-east1", 1);
	r = run(RUN_ARGS " --mounts %s %s %s", conf, near_dir, mnt);
	unsetenv("PODFEED_REGION");
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "host region us-east1 (from PODFEED_REGION)"), "%s", r.err);
	cr_assert(strstr(r.out, "regions     host in us-east1 (from PODFEED_REGION); "
			 "cross-region reads: warn"), "%s", r.out);
	cr_assert(strstr(r.out, "\n  us-east1         in  "), "%s", r.out);
	cr_assert(strstr(r.out, "\n  europe-west4     cross "), "%s", r.out);
	cr_assert(strstr(r.out, mnt), "%s", r.out);
	cr_assert(strstr(r.out, "(fuse.regionfs)"), "%s", r.out);
	cr_assert(strstr(r.out, "\n  cross-region  "), "%s", r.out);
	cr_assert(strstr(r.out, "\n  egress      "), "%s", r.out);
	cr_assert(strstr(r.out, "at $0.02/GiB (an estimate"), "%s", r.out);
	result_free(&r);
	json_decref(stop());
}

/* A FUSE mount nobody declared is still named, with its file system. */
Test(regions, undeclared_fuse_mount_is_named, .fini = teardown, .timeout = 120)
{
	json_t *rep, *u, *m;
	result r;

	tu_need_fuse();
	make_dataset();
	start("", backing);
	unsetenv("PODFEED_REGION");
	r = run(RUN_ARGS " --json %s %s", near_dir, mnt);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "FUSE mounts with no declared region"), "%s", r.err);
	cr_assert(strstr(r.err, mnt), "%s", r.err);
	rep = parse_json(&r);
	u = region_entry(rep, "undeclared");
	cr_assert_str_eq(js(u, "kind"), "unknown");
	cr_assert(json_is_null(json_object_get(u, "cross_region")));
	cr_assert_eq(ju(u, "files"), 4);
	m = json_array_get(json_object_get(u, "mounts"), 0);
	cr_assert_str_eq(js(m, "path"), mnt);
	cr_assert_str_eq(js(m, "fstype"), "fuse.regionfs");
	cr_assert_str_eq(js(m, "origin"), "detected");
	cr_assert(json_is_null(json_object_get(m, "declared_region")));
	cr_assert_gt(ju(u, "bytes_read"), 0);
	/* Not known to be cross-region: no egress, said as such. */
	cr_assert_eq(ju(json_object_get(json_object_get(rep, "regions"), "egress"), "bytes"), 0);
	cr_assert_eq(ju(json_object_get(json_object_get(rep, "regions"), "egress"),
			"unknown_region_bytes"), ju(u, "bytes_read"));
	json_decref(rep);
	result_free(&r);
	json_decref(stop());
}

/* `loadbench regions`: the same sample from each mount, side by side. */
Test(regions, regions_mode_side_by_side, .fini = teardown, .timeout = 120)
{
	json_t *rep, *mounts, *a, *b;
	result r;

	tu_need_fuse();
	make_dataset();
	/* The mount shows the near directory itself: the same files. */
	start("--mbps 40", near_dir);
	r = run("regions --json --sample 2 --region us-east1 --mount %s=us-east1 "
		"--mount %s=europe-west4", near_dir, mnt);
	cr_assert_eq(r.status, 0, "%s", r.err);
	rep = parse_json(&r);
	cr_assert_eq(json_array_size(json_object_get(rep, "sample")), 2);
	mounts = json_object_get(rep, "mounts");
	cr_assert_eq(json_array_size(mounts), 2);
	a = json_array_get(mounts, 0);
	b = json_array_get(mounts, 1);
	cr_assert_str_eq(js(a, "path"), near_dir);
	cr_assert_str_eq(js(a, "kind"), "in");
	cr_assert_str_eq(js(b, "path"), mnt);
	cr_assert_str_eq(js(b, "kind"), "cross");
	cr_assert_str_eq(js(b, "fstype"), "fuse.regionfs");
	cr_assert_eq(ju(a, "bytes"), ju(b, "bytes"), "the same sample from both");
	cr_assert_gt(ju(a, "bytes"), 1000000);
	cr_assert_float_eq(jd(a, "ratio"), 1.0, 1e-9);
	cr_assert_leq(jd(b, "mb_per_s"), CAP_MBPS * 1.2, "%.1f MB/s through a 40 MB/s cap",
		      jd(b, "mb_per_s"));
	cr_assert_lt(jd(b, "ratio"), 1.0);
	cr_assert_gt(jd(b, "egress_usd_estimate"), 0);
	cr_assert(json_is_null(json_object_get(a, "egress_usd_estimate")));
	json_decref(rep);
	result_free(&r);

	r = run("regions --sample 1 --region us-east1 --mount %s=us-east1 --mount %s=europe-west4",
		near_dir, mnt);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "1 file from each mount"), "%s", r.out);
	cr_assert(strstr(r.out, "\nMB/s "), "%s", r.out);
	cr_assert(strstr(r.out, "europe-west4 (cross)"), "%s", r.out);
	cr_assert(strstr(r.out, "us-east1 (in)"), "%s", r.out);
	result_free(&r);
	json_decref(stop());
}

/* 2,000 token records in n indexed shards (with their manifest) in
 * backing/, for a regionfs mount at far/. */
static void far_shards(unsigned n)
{
	const char *st = tu_env_tool("SHARDTOOL");

	snprintf(dir, sizeof(dir), "%s", tu_tmpdir());
	snprintf(backing, sizeof(backing), "%s/backing", dir);
	snprintf(mnt, sizeof(mnt), "%s/far", dir);
	snprintf(stats_path, sizeof(stats_path), "%s/stats.json", dir);
	cr_assert_eq(mkdir(mnt, 0755), 0);
	cr_assert_eq(tu_system("%s synth --kind tokens --records 2000 --shards 2 --out %s/raw "
			       ">/dev/null && %s convert --shards %u --out %s %s/raw >/dev/null",
			       st, dir, st, n, backing, dir), 0);
}

/* A start at pod scale asks the bucket about the shards the first
 * batch reads, not about every shard: with a manifest neither the
 * regions' check (its sizes are the manifest's, each directory resolved
 * once) nor the report (the plan knows the empty files) sends a request
 * per shard, each a round trip on a far bucket. */
Test(regions, far_start_asks_only_for_what_it_reads, .fini = teardown, .timeout = 120)
{
	json_t *rep, *far, *s;
	uint64_t asked;
	result r;

	tu_need_fuse();
	far_shards(200);
	start("", backing);
	r = run("--quiet --json --steps 1 --per-core-batch 10 --cores 1 --threads 1 "
		"--io-depth 4 --region us-east1 --mount %s=europe-west4 %s", mnt, mnt);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "europe-west4"), "no cross-region warning: %s", r.err);
	rep = parse_json(&r);
	far = region_entry(rep, "europe-west4");
	cr_assert_eq(ju(far, "files"), 200, "the manifest's shards, all placed");
	cr_assert_eq(ju(rep, "steps"), 1);
	json_decref(rep);
	result_free(&r);
	s = stop();
	/* A shard read costs a lookup (getattr) and an open; the first step
	 * reads one or two shards, a few more opened ahead.  Before, every
	 * shard was resolved and stat()ed twice: over 400 requests. */
	asked = ju(s, "getattr") + ju(s, "open");
	cr_assert_lt(asked, 60, "%llu getattr + open requests for a 1-step start over 200 shards",
		     (unsigned long long)asked);
	json_decref(s);
}

/* Without a manifest every shard's index tail is read, many at once:
 * on FUSE an open blocks for its round trip even when its lookup is
 * cached (a listing's), so it goes to an io-wq worker, not the thread
 * that submits it; the bucket sees the opens and reads of many shards
 * in flight together, not one after another, and each tail in one read
 * request. */
Test(regions, far_tails_are_read_many_at_once, .fini = teardown, .timeout = 120)
{
	json_t *s;
	result r;

	tu_need_fuse();
	far_shards(100);
	start("--rtt-ms 20 --cache-s 60", backing);
	r = run("--quiet --steps 1 --no-manifest --per-core-batch 10 --cores 1 --threads 1 %s",
		mnt);
	cr_assert_eq(r.status, 0, "%s", r.err);
	result_free(&r);
	s = stop();
	cr_assert_geq(ju(s, "open"), 100);
	cr_assert_geq(ju(s, "open_concurrent_peak"), 8, "the bucket saw at most %llu opens at once",
		      (unsigned long long)ju(s, "open_concurrent_peak"));
	/* Each tail one request (O_DIRECT on FUSE): a buffered read, with
	 * this many in flight, passes the mount's congestion threshold and
	 * is read a page, a round trip, at a time (251 requests here). */
	cr_assert_leq(ju(s, "reads"), 120, "%llu read requests for 100 tails and a first batch",
		      (unsigned long long)ju(s, "reads"));
	json_decref(s);
}

/* ------------------------------------------------------------------ */
/* No FUSE needed                                                       */

/* Without region options: one local region, no ratio, no text section. */
Test(regions, local_only_run)
{
	json_t *rep, *loc;
	result r;

	snprintf(dir, sizeof(dir), "%s", tu_tmpdir());
	cr_assert_eq(tu_system("%s synth --kind tokens --records 2000 --shards 2 --out %s/raw "
			       ">/dev/null && %s convert --shards 2 --out %s/z %s/raw >/dev/null",
			       tu_env_tool("SHARDTOOL"), dir, tu_env_tool("SHARDTOOL"), dir, dir), 0);
	unsetenv("PODFEED_REGION");
	r = run("--quiet --json --per-core-batch 50 %s/z", dir);
	cr_assert_eq(r.status, 0, "%s", r.err);
	rep = parse_json(&r);
	loc = region_entry(rep, "local");
	cr_assert_str_eq(js(loc, "kind"), "in");
	cr_assert_eq(ju(loc, "files"), 2);
	cr_assert_gt(ju(loc, "bytes_read"), 0);
	cr_assert(json_is_null(json_object_get(json_object_get(rep, "regions"),
					       "cross_to_in_region_ratio")));
	cr_assert(json_is_null(json_object_get(json_object_get(rep, "regions"), "host")));
	json_decref(rep);
	result_free(&r);

	r = run("--quiet --per-core-batch 50 %s/z", dir);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_null(strstr(r.out, "regions "), "%s", r.out);
	result_free(&r);
}

Test(regions, bad_region_options)
{
	static const struct {
		const char *args;
		const char *says;
	} cases[] = {
		{ "--cross-region=bogus x", "--cross-region: 'bogus' is not warn, refuse or allow" },
		{ "--cross-region", "--cross-region: a value is required" },
		{ "--egress-usd-per-gib -1 x", "is not a price" },
		{ "--egress-usd-per-gib=abc x", "is not a price" },
		{ "--region 'us east1' x", "region 'us east1' has the byte 0x20" },
		{ "--mount /data x", "--mount /data: '/data' is not PATH=REGION" },
		{ "--mount /data= x", "no region after '='" },
		{ "--mounts /nonexistent/mounts.conf x", "/nonexistent/mounts.conf" },
		{ "--mounts @CONF@ x", "mounts.conf:3: path 'relative/path' is not absolute" },
		{ "regions", "no mounts to compare" },
		{ "regions --mount /a=us-east1 --sample 0", "--sample" },
		{ "regions --mount", "--mount: a value is required" },
	};
	static const char table[] = "# ok\n/data us-east1\nrelative/path europe-west4\n";
	char conf[256], args[1024], x[256];

	snprintf(dir, sizeof(dir), "%s", tu_tmpdir());
	snprintf(conf, sizeof(conf), "%s/mounts.conf", dir);
	tu_write_file(conf, table, strlen(table));
	/* A file that exists, so the region options are what fails. */
	snprintf(x, sizeof(x), "%s/x", dir);
	tu_write_file(x, "x", 1);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *at = strstr(cases[i].args, "@CONF@");
		size_t len = strlen(cases[i].args);
		result r;

		if (at)
			snprintf(args, sizeof(args), "%.*s%s%s", (int)(at - cases[i].args),
				 cases[i].args, conf, at + 6);
		else
			snprintf(args, sizeof(args), "%s", cases[i].args);
		/* The trailing " x" is the file. */
		len = strlen(args);
		if (len > 2 && !strcmp(args + len - 2, " x"))
			snprintf(args + len - 1, sizeof(args) - len + 1, "%s", x);
		r = run("%s", args);
		cr_assert_eq(r.status, 2, "%s: status %d; %s", args, r.status, r.err);
		cr_assert(strstr(r.err, cases[i].says), "%s: '%s' does not say '%s'", args,
			  r.err, cases[i].says);
		result_free(&r);
	}
}

/* A mixture: a source whose files are in another declared region is
 * warned about by name before reading, and each source's region is in
 * the report (text and JSON); the in-region source is the host's. */
Test(regions, mixture_sources_each_their_region, .timeout = 120)
{
	json_t *rep, *src;
	result r;

	make_dataset();
	r = run(RUN_ARGS " --json --region us-east1 --mount %s=europe-west4 --source near=1:%s "
		"--source far=1:%s", backing, near_dir, backing);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "warning: source 'far' is in region europe-west4, not this "
			 "host's (us-east1): its reads cross regions"), "%s", r.err);
	cr_assert_null(strstr(r.err, "source 'near'"), "%s", r.err);
	rep = parse_json(&r);
	src = json_object_get(rep, "sources");
	cr_assert(json_is_array(src) && json_array_size(src) == 2);
	cr_assert_str_eq(js(json_array_get(src, 0), "region"), "us-east1");
	cr_assert(json_is_false(json_object_get(json_array_get(src, 0), "cross_region")));
	cr_assert_str_eq(js(json_array_get(src, 1), "region"), "europe-west4");
	cr_assert(json_is_true(json_object_get(json_array_get(src, 1), "cross_region")));
	json_decref(rep);
	result_free(&r);
	/* The text report's source lines. */
	r = run("--per-core-batch 25 --threads 2 --region us-east1 --mount %s=europe-west4 "
		"--source near=1:%s --source far=1:%s", backing, near_dir, backing);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "region europe-west4 (not the host's: cross-region reads)"), "%s",
		  r.out);
	cr_assert(strstr(r.out, "files), region us-east1\n"), "%s", r.out);
	result_free(&r);
	/* --cross-region allow: nothing said. */
	r = run(RUN_ARGS " --region us-east1 --mount %s=europe-west4 --cross-region allow "
		"--source near=1:%s --source far=1:%s", backing, near_dir, backing);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_null(strstr(r.err, "source 'far'"), "%s", r.err);
	result_free(&r);
}
