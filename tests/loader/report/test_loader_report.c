/* SPDX-License-Identifier: Apache-2.0 */
/* The report API (loader/report.c, report_regions.c, spec_infer.c): the
 * verdict from a run's metrics, the loader and baseline sections as text
 * and JSON from the same figures, the regions' check and section, the
 * spec from a schema. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_internal.h"
#include "common_internal.h"
#include "podfeed.h"
#include "report_internal.h"
#include "testutil.h"

/* A run of 100 steps of 2 x 32 records in 2 s, its I/O thread busy 0.5
 * s and its 2 decode threads 3 s together (1.5 s each: decode is the
 * bottleneck), next() mostly at 8 us. */
static void metrics(pf_loader_metrics *m)
{
	memset(m, 0, sizeof(*m));
	m->records = 6400;
	m->steps = 100;
	m->bytes_read = 4000000;
	m->bytes_decompressed = 8000000;
	m->records_per_epoch = 6500;
	m->steps_per_epoch = 101;
	m->remainder_dropped = 36;
	m->io.busy_ns = 500000000;
	m->decode.busy_ns = 3000000000;
	m->decode_threads = 2;
	m->next_wait_ns = 200000000;
	m->next_hist[pf_hist_bucket(8000)] = 99;	/* 8 us */
	m->next_hist[pf_hist_bucket(3000000)] = 1;	/* 3 ms */
	m->memory_bytes = 64ull << 20;
	m->io_backend = "io_uring";
	m->io_requests = 12;
}

static pf_loader_config config(void)
{
	return (pf_loader_config){ .features = "tokens:int32[8],label:int64[1]",
				   .per_core_batch = 32, .cores_per_host = 2,
				   .num_hosts = 2, .host_index = 1 };
}

static const pf_run_info run = {
	.seconds = 2.0, .first_batch_ms = 12.5, .steady_seconds = 1.5,
	.steady_records = 6336, .steady_batches = 99, .peak_rss_bytes = 80ull << 20,
};

static char *format(const pf_report *r, pf_report_output how)
{
	int64_t n = pf_report_format(r, how, NULL, 0);
	char *s = malloc((size_t)n + 1);

	cr_assert_eq(pf_report_format(r, how, s, (size_t)n + 1), n);
	cr_assert_eq(strlen(s), (size_t)n);
	return s;
}

/* A report of the loader section alone (asserted to add). */
static pf_report *loader_report(const pf_loader_config *cfg, const pf_loader_metrics *m,
				const pf_run_info *info)
{
	pf_report *r;
	pf_error err;

	cr_assert_eq(pf_report_create(&r), 0);
	cr_assert_eq(pf_report_add_loader(r, cfg, m, info, &err), 0, "%s", err.msg);
	return r;
}

static json_t *parse(const pf_report *r)
{
	char *s = format(r, PF_REPORT_JSON);
	json_error_t jerr;
	json_t *o = json_loads(s, 0, &jerr);

	cr_assert_not_null(o, "%s: %s", jerr.text, s);
	cr_assert_eq(s[strlen(s) - 1], '\n');
	cr_assert_null(strchr(s, '\n') == s + strlen(s) - 1 ? NULL : s, "not one line: %s", s);
	free(s);
	return o;
}

static double jd(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	cr_assert(json_is_number(v), "%s is not a number", key);
	return json_number_value(v);
}

Test(report, verdict_names_the_busier_stage)
{
	pf_loader_metrics m;
	pf_loader_verdict v;

	metrics(&m);
	pf_loader_verdict_compute(&m, &run, &v);
	cr_assert_str_eq(v.bottleneck, "decode");
	cr_assert_float_eq(v.io_busy, 0.25, 1e-12);
	cr_assert_float_eq(v.decode_busy, 0.75, 1e-12);	/* per thread */
	cr_assert_float_eq(v.consumer_wait, 0.1, 1e-12);
	cr_assert_leq(v.next_p50_us, 16);
	cr_assert_geq(v.next_p99_us, 8);
	cr_assert_null(v.steady_na);
	cr_assert_float_eq(v.steady_records_per_s, 6336 / 1.5, 1e-9);
	/* the I/O thread busier than a decode thread */
	m.io.busy_ns = 1900000000;
	pf_loader_verdict_compute(&m, &run, &v);
	cr_assert_str_eq(v.bottleneck, "io");
}

/* A window too short to measure has no steady figure, and says why. */
Test(report, no_steady_rate_over_a_short_window)
{
	pf_loader_metrics m;
	pf_loader_verdict v;
	pf_run_info few = run, brief = run;

	metrics(&m);
	few.steady_batches = 9;
	pf_loader_verdict_compute(&m, &few, &v);
	cr_assert_str_eq(v.steady_na, "fewer than 10 batches after the first");
	cr_assert_eq(v.steady_records_per_s, 0);
	brief.steady_seconds = 0.05;
	pf_loader_verdict_compute(&m, &brief, &v);
	cr_assert_str_eq(v.steady_na, "under 100 ms from the first batch to the last");
}

/* The text and the JSON say the same figures, under loadbench's keys. */
Test(report, loader_section_as_text_and_json)
{
	const char *d = tu_tmpdir();
	char a[1024], empty[1024], *text;
	const char *files[2] = { a, empty };
	pf_loader_config cfg = config();
	pf_loader_metrics m;
	pf_run_info info = run;
	pf_report *r;
	pf_error err;
	json_t *o, *topo;

	snprintf(a, sizeof(a), "%s/a.tfrecord", d);
	snprintf(empty, sizeof(empty), "%s/empty.tfrecord", d);
	tu_write_file(a, "x", 1);
	tu_write_file(empty, "", 0);
	info.files = files;
	info.nfiles = 2;
	info.runs = 3;
	metrics(&m);
	r = loader_report(&cfg, &m, &info);

	text = format(r, PF_REPORT_TEXT);
	cr_assert(strstr(text, "files       2\n"), "%s", text);
	cr_assert(strstr(text, "topology    host 1 of 2, 2 cores x 32 per-core batch (global "
			 "batch 128)\n"), "%s", text);
	cr_assert(strstr(text, "order       the files' order (not shuffled)\n"), "%s", text);
	cr_assert(strstr(text, "time        2.000 s (median): 3200 records/s, 50.0 batches/s\n"),
		  "%s", text);
	cr_assert(strstr(text, "bottleneck  decode\n"), "%s", text);
	cr_assert(strstr(text, "stages      busy per thread: io 25% (1 thread), decode 75% (2 "
			 "threads); consumer waited 10%\n"), "%s", text);
	cr_assert(strstr(text, "budget 512 MiB, pools 64.0 MiB"), "%s", text);
	cr_assert(strstr(text, "empty       1 file of 0 bytes, 0 records: "), "%s", text);
	cr_assert(strstr(text, "io          io_uring, depth 32\n"), "%s", text);
	free(text);

	o = parse(r);
	cr_assert_eq(json_integer_value(json_object_get(o, "records")), 6400);
	cr_assert_float_eq(jd(o, "records_per_s"), 3200, 1e-9);
	cr_assert_str_eq(json_string_value(json_object_get(o, "bottleneck")), "decode");
	cr_assert_float_eq(jd(json_object_get(o, "stages"), "io"), 0.25, 1e-9);
	cr_assert_eq(json_integer_value(json_object_get(o, "memory_budget_bytes")), 512 << 20);
	cr_assert_eq(json_integer_value(json_object_get(o, "repeat")), 3);
	cr_assert(json_is_false(json_object_get(o, "shuffle")));
	cr_assert_eq(json_array_size(json_object_get(o, "empty_files")), 1);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(o, "empty_files"), 0)),
			 empty);
	topo = json_object_get(o, "topology");
	cr_assert_eq(json_integer_value(json_object_get(topo, "global_batch")), 128);
	cr_assert_eq(json_integer_value(json_object_get(topo, "host_index")), 1);
	json_decref(o);

	/* One section of a kind. */
	cr_assert_eq(pf_report_add_loader(r, &cfg, &m, &info, &err), -EEXIST);
	pf_report_free(r);

	/* The loader's plan of the same 2 files found none empty (its
	 * metrics say so): no file is stat()ed, none is named.  With one
	 * empty, the stat names which. */
	m.dataset_files = 2;
	m.empty_files = 0;
	r = loader_report(&cfg, &m, &info);
	text = format(r, PF_REPORT_TEXT);
	cr_assert_null(strstr(text, "empty  "), "%s", text);
	free(text);
	pf_report_free(r);
	m.empty_files = 1;
	r = loader_report(&cfg, &m, &info);
	text = format(r, PF_REPORT_TEXT);
	cr_assert(strstr(text, "empty       1 file of 0 bytes, 0 records: "), "%s", text);
	free(text);
	pf_report_free(r);
}

/* What the loader ran with (pf_loader_tuning()): a line each before the
 * io line, whose depth is the one in force, and "tuning" in JSON; none
 * without it. */
Test(report, tuning_lines_and_json)
{
	pf_loader_config cfg = config();
	pf_loader_metrics m;
	pf_tuning tune = {
		.threads = { .value = 2, .automatic = true, .measured = true,
			     .why = "decode 2.1 ms a batch against 1.0 ms of the consumer" },
		.io_depth = { .value = 6, .automatic = true, .measured = true,
			      .why = "reads of 0.4 ms against 0.1 ms of decode a frame" },
		.prefetch = { .value = 3, .automatic = false, .why = "the config's" },
		.shuffle_window = { .value = 2048, .automatic = true,
				    .why = "cut from the default 8192 to fit the memory budget" },
	};
	pf_run_info info = run;
	pf_report *r;
	json_t *o, *t;
	char *text;

	metrics(&m);
	info.tuning = &tune;
	r = loader_report(&cfg, &m, &info);
	text = format(r, PF_REPORT_TEXT);
	cr_assert(strstr(text, "threads     2 (auto): decode 2.1 ms a batch against 1.0 ms of "
			 "the consumer\nio_depth    6 (auto): reads of 0.4 ms against 0.1 ms "
			 "of decode a frame\nprefetch    3 (set): the config's\n"
			 "window      2048 (auto): cut from the default 8192 to fit the memory "
			 "budget\nio          io_uring, depth 6\n"), "%s", text);
	/* A choice the loader said nothing of (no why) has no line. */
	cr_assert_null(strstr(text, "frame_cache "), "%s", text);
	free(text);
	o = parse(r);
	cr_assert_eq(json_integer_value(json_object_get(o, "io_depth")), 6);
	t = json_object_get(json_object_get(o, "tuning"), "threads");
	cr_assert_eq(json_integer_value(json_object_get(t, "value")), 2);
	cr_assert(json_is_true(json_object_get(t, "auto")));
	cr_assert(json_is_true(json_object_get(t, "measured")));
	t = json_object_get(json_object_get(o, "tuning"), "prefetch");
	cr_assert(json_is_false(json_object_get(t, "auto")));
	cr_assert_str_eq(json_string_value(json_object_get(t, "why")), "the config's");
	t = json_object_get(json_object_get(o, "tuning"), "shuffle_window");
	cr_assert_eq(json_integer_value(json_object_get(t, "value")), 2048);
	cr_assert_null(json_object_get(json_object_get(o, "tuning"), "frame_cache"));
	json_decref(o);
	pf_report_free(r);

	/* Without it: no lines, no member, the config's depth (zero: the
	 * most auto may choose). */
	info.tuning = NULL;
	r = loader_report(&cfg, &m, &info);
	text = format(r, PF_REPORT_TEXT);
	cr_assert_null(strstr(text, "threads  "), "%s", text);
	cr_assert(strstr(text, "io          io_uring, depth 32\n"), "%s", text);
	free(text);
	o = parse(r);
	cr_assert_null(json_object_get(o, "tuning"));
	json_decref(o);
	pf_report_free(r);
}

/* The read and decompress passes of the baseline tests: the read pass 16
 * MB/s (decompressed-equivalent), the decompress pass 8. */
static pf_baseline passes(void)
{
	return (pf_baseline){ .read_seconds = 0.5, .decompress_seconds = 1.0, .bytes = 4000000,
			      .bytes_decompressed = 8000000, .files = 4, .frames = 40,
			      .threads = 2, .io_backend = "pread" };
}

/* The baseline is quoted against the loader, so it needs its section;
 * the ratio is the loader's decompressed MB/s over the pass's. */
Test(report, baseline_after_the_loader)
{
	pf_loader_config cfg = config();
	pf_loader_metrics m;
	pf_baseline b = passes();
	pf_report *r;
	pf_error err;
	char *text;
	json_t *o;

	metrics(&m);
	cr_assert_eq(pf_report_create(&r), 0);
	cr_assert_eq(pf_report_add_baseline(r, &b, &err), -EINVAL);
	cr_assert(strstr(err.msg, "add its section first"), "%s", err.msg);
	cr_assert_eq(pf_report_add_loader(r, &cfg, &m, &run, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_report_add_baseline(r, &b, &err), 0, "%s", err.msg);
	o = parse(r);
	/* loader 4 MB/s decompressed, the pass 8: 0.5; read pass 16: 0.25 */
	cr_assert_float_eq(jd(o, "ratio_to_decompress"), 0.5, 1e-9);
	cr_assert_float_eq(jd(o, "ratio_to_read"), 0.25, 1e-9);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "baseline"),
							   "io_backend")), "pread");
	json_decref(o);
	text = format(r, PF_REPORT_TEXT);
	cr_assert(strstr(text, "0.25x the read pass, 0.50x the decompress pass"), "%s", text);
	/* the baseline's lines follow the loader's */
	cr_assert_gt(strstr(text, "baseline    ") - text, strstr(text, "bottleneck  ") - text);
	/* no decode pass: no bound */
	cr_assert_null(strstr(text, "bound"), "%s", text);
	free(text);
	pf_report_free(r);
}

/* With a decode pass, the bound of the two stages on the same threads:
 * a record's decompress and decode times add, so the rates combine as
 * 1 / (1/decompress + 1/decode); a decode pass over part of the bytes is
 * taken at its rate. */
Test(report, baseline_decode_pass_and_the_bound)
{
	pf_loader_config cfg = config();
	pf_loader_metrics m;
	/* decompress 8 MB/s; decode 4 MB (half the bytes) in 0.25 s: 16
	 * MB/s; the bound 1 / (1/8 + 1/16) = 5.33 MB/s; the loader 4. */
	pf_baseline b = passes();
	pf_report *r;
	pf_error err;
	char *text;
	json_t *o, *bl;

	b.decode_seconds = 0.25;
	b.decode_records = 1000;
	metrics(&m);
	cr_assert_eq(pf_report_create(&r), 0);
	cr_assert_eq(pf_report_add_loader(r, &cfg, &m, &run, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_report_add_baseline(r, &b, &err), -EINVAL);
	cr_assert(strstr(err.msg, "decoded no bytes"), "%s", err.msg);
	b.decode_bytes = 4000000;
	b.decode_seconds = NAN;
	cr_assert_eq(pf_report_add_baseline(r, &b, &err), -EINVAL);
	cr_assert(strstr(err.msg, "decode nan"), "%s", err.msg);
	b.decode_seconds = 0.25;
	cr_assert_eq(pf_report_add_baseline(r, &b, &err), 0, "%s", err.msg);
	o = parse(r);
	bl = json_object_get(o, "baseline");
	cr_assert_float_eq(jd(bl, "decode_seconds"), 0.25, 1e-12);
	cr_assert_float_eq(jd(bl, "decode_mb_per_s"), 16, 1e-9);
	cr_assert_float_eq(jd(bl, "decode_records_per_s"), 4000, 1e-9);
	cr_assert_eq(json_integer_value(json_object_get(bl, "decode_records")), 1000);
	cr_assert_eq(json_integer_value(json_object_get(bl, "decode_bytes")), 4000000);
	/* (the JSON's reals have 9 digits) */
	cr_assert_float_eq(jd(bl, "bound_mb_per_s"), 16.0 / 3, 1e-7);
	cr_assert_float_eq(jd(o, "ratio_to_bound"), 0.75, 1e-9);
	cr_assert_float_eq(jd(o, "ratio_to_decompress"), 0.5, 1e-9);
	json_decref(o);
	text = format(r, PF_REPORT_TEXT);
	cr_assert(strstr(text, "  decode      0.250 s: 16.0 MB/s decompressed, 4000 records/s"),
		  "%s", text);
	cr_assert(strstr(text, "  bound       5.3 MB/s decompressed: 1 / (1/decompress + "
			       "1/decode), 2 threads"), "%s", text);
	cr_assert(strstr(text, "0.25x the read pass, 0.50x the decompress pass, 0.75x the bound"),
		  "%s", text);
	free(text);
	pf_report_free(r);
}

/* A short buffer gets what fits, terminated, and the whole length. */
Test(report, format_into_a_short_buffer)
{
	pf_loader_config cfg = config();
	pf_loader_metrics m;
	pf_report *r;
	pf_error err;
	char small[16];
	int64_t n;

	metrics(&m);
	cr_assert_eq(pf_report_create(&r), 0);
	cr_assert_eq(pf_report_add_loader(r, &cfg, &m, &run, &err), 0);
	n = pf_report_format(r, PF_REPORT_JSON, small, sizeof(small));
	cr_assert_gt(n, (int64_t)sizeof(small));
	cr_assert_eq(strlen(small), sizeof(small) - 1);
	cr_assert_eq(strncmp(small, "{\"records\":6400", sizeof(small) - 1), 0, "%s", small);
	pf_report_free(r);
}

/* Numbers JSON lacks and bytes that are not UTF-8 still come out. */
Test(report, json_of_what_json_lacks)
{
	json_t *o = json_object();
	bool bad = false;
	char *line;

	pf_json_put(o, "nan", pf_json_num(NAN), &bad);
	pf_json_put(o, "inf", pf_json_num(-INFINITY), &bad);
	pf_json_put(o, "big", pf_json_u64(UINT64_MAX), &bad);
	pf_json_put(o, "utf8", pf_json_str("caf\xc3\xa9"), &bad);
	pf_json_put(o, "latin1", pf_json_str("caf\xe9"), &bad);
	pf_json_putn(o, "k\xff", 2, pf_json_latin1("\xc3\xa9", 2), &bad);
	pf_json_put(o, "null", pf_json_str(NULL), &bad);
	cr_assert(!bad);
	line = pf_json_line(o);
	cr_assert_str_eq(line, "{\"nan\":\"NaN\",\"inf\":\"-Infinity\",\"big\":1.84467441e19,"
			 "\"utf8\":\"caf\\u00E9\",\"latin1\":\"caf\\u00E9\","
			 "\"k\\u00FF\":\"\\u00C3\\u00A9\",\"null\":null}");
	pf_free(line);
	json_decref(o);
}

/* ------------------------------------------------------------------ */
/* Regions                                                              */

typedef struct said {
	char lines[8][4096];
	int n;
} said;

static void say(void *ctx, const char *line)
{
	said *s = ctx;

	cr_assert_lt(s->n, 8);
	snprintf(s->lines[s->n++], sizeof(s->lines[0]), "%s", line);
}

/* Two files near, one far (declared in another region): the check warns
 * with the far region's share, or refuses; the section counts each run's
 * reads per region. */
Test(report, regions_check_and_section)
{
	const char *d = tu_tmpdir();
	char near[1024], far[1024], files[3][1100], spec[1100];
	const char *paths[3] = { files[0], files[1], files[2] };
	pf_region_usage_config cfg = { .policy = PF_CROSS_REGION_WARN, .usd_per_gib = 0.05,
				       .host_source = "the test" };
	pf_region_table *t;
	pf_region_usage *u;
	pf_report *r;
	pf_error err;
	said s = { 0 };
	json_t *o, *reg;
	char *text;

	snprintf(near, sizeof(near), "%s/near", d);
	snprintf(far, sizeof(far), "%s/far", d);
	cr_assert_eq(tu_system("mkdir -p %s %s", near, far), 0);
	snprintf(files[0], sizeof(files[0]), "%s/a", near);
	snprintf(files[1], sizeof(files[1]), "%s/b", near);
	snprintf(files[2], sizeof(files[2]), "%s/c", far);
	tu_write_file(files[0], "0123456789", 10);
	tu_write_file(files[1], "0123456789", 10);
	tu_write_file(files[2], "01234567890123456789", 20);
	cr_assert_eq(pf_region_table_create(&t, "us-central1", 0, &err), 0, "%s", err.msg);
	snprintf(spec, sizeof(spec), "%s=europe-west4", far);
	cr_assert_geq(pf_region_table_add_flag(t, spec, &err), 0, "%s", err.msg);

	cr_assert_eq(pf_region_usage_create(&u, t, paths, 3, &cfg, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_region_usage_check(u, say, &s), 0);
	cr_assert_eq(s.n, 2);
	cr_assert_str_eq(s.lines[0], "host region us-central1 (from the test)");
	cr_assert(!strncmp(s.lines[1], "warning: region europe-west4 is not this host's region "
			   "(us-central1): it holds 50.0% of the dataset's bytes", 95),
		  "%s", s.lines[1]);
	pf_region_usage_free(u);

	cfg.policy = PF_CROSS_REGION_REFUSE;
	s.n = 0;
	cr_assert_eq(pf_region_usage_create(&u, t, paths, 3, &cfg, &err), 0);
	cr_assert_eq(pf_region_usage_check(u, say, &s), 1);
	cr_assert(!strncmp(s.lines[1], "refusing to read across regions: region europe-west4", 52),
		  "%s", s.lines[1]);

	/* A run that read the far file: 20 bytes across regions. */
	pf_region_read_begin(t, pf_region_table_lookup(t, files[2]));
	pf_region_read_end(t, pf_region_table_lookup(t, files[2]), 20, 1000000);
	cr_assert_eq(pf_region_usage_run_done(u, 0.5), 0);
	cr_assert_eq(pf_report_create(&r), 0);
	cr_assert_eq(pf_report_add_regions(r, u, 1, &err), -EINVAL);
	cr_assert_eq(pf_report_add_regions(r, u, 0, &err), 0, "%s", err.msg);
	o = parse(r);
	reg = json_object_get(o, "regions");
	cr_assert_str_eq(json_string_value(json_object_get(reg, "host")), "us-central1");
	cr_assert_str_eq(json_string_value(json_object_get(reg, "cross_region_policy")), "refuse");
	cr_assert_eq(json_integer_value(json_object_get(reg, "dataset_bytes")), 40);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(reg, "egress"), "bytes")),
		     20);
	cr_assert_eq(json_array_size(json_object_get(reg, "per_region")), 2);
	json_decref(o);
	text = format(r, PF_REPORT_TEXT);
	cr_assert(strstr(text, "regions     host in us-central1 (from the test); cross-region "
			 "reads: refuse\n"), "%s", text);
	cr_assert(strstr(text, "\n  europe-west4     cross       1   50.0%"), "%s", text);
	free(text);
	pf_report_free(r);
	pf_region_usage_free(u);
	pf_region_table_free(t);
}

/* ------------------------------------------------------------------ */
/* The spec from the schema                                             */

Test(report, spec_from_the_index_schema)
{
	const char *d = tu_tmpdir(), *st = tu_env_tool("SHARDTOOL");
	char dir[1024], plain[1024];
	const char *paths[1] = { dir };
	pf_spec_infer_config int32 = { .ignore_manifest = true, .int64_as_int32 = true };
	pf_error err;
	pf_spec spec;
	char text[256];

	cr_assert_eq(tu_system("%s synth --kind dense --records 50 --shards 1 --out %s/raw "
			       ">/dev/null", st, d), 0);
	cr_assert_eq(tu_system("%s convert --out %s/z %s/raw >/dev/null", st, d, d), 0);
	snprintf(dir, sizeof(dir), "%s/z", d);
	/* From the manifest convert wrote, then from the index. */
	cr_assert_eq(pf_spec_infer(paths, 1, NULL, &spec, &err), 0, "%s", err.msg);
	pf_spec_format(&spec, text, sizeof(text));
	cr_assert_str_eq(text, "label:int64[1],x:float32[256]");
	cr_assert_eq(pf_spec_infer(paths, 1, &int32, &spec, &err), 0, "%s", err.msg);
	pf_spec_format(&spec, text, sizeof(text));
	cr_assert_str_eq(text, "label:int32[1],x:float32[256]");
	/* A plain TFRecord file has no schema: said, naming it. */
	snprintf(plain, sizeof(plain), "%s/raw", d);
	paths[0] = plain;
	cr_assert_eq(pf_spec_infer(paths, 1, NULL, &spec, &err), -ENODATA);
	cr_assert(strstr(err.file, "/raw/dense-00000-of-00001.tfrecord"), "%s", err.file);
	cr_assert(strstr(err.msg, "no schema in an index"), "%s", err.msg);
}
