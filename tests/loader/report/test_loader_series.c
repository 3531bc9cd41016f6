/* SPDX-License-Identifier: Apache-2.0 */
/* The loader's time series (loader/series.c) and its report section
 * (loader/report_series.c): the points agree with the loader's metrics,
 * a long run stays within its bound by downsampling (driven by the
 * sampler's own clock argument, so the test does not wait), and a run
 * too short to plot says so. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline_internal.h"
#include "podfeed.h"
#include "series_internal.h"
#include "testutil.h"

static pf_loader *open_loader(const char *dir, uint32_t epochs)
{
	const char *paths[] = { dir };
	pf_loader_config cfg = { .paths = paths, .npaths = 1,
				 .features = "id:int64[1]", .per_core_batch = 10,
				 .epochs = epochs, .threads = 1 };
	pf_loader *l = NULL;
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	return l;
}

static const double *column(const pf_series *s, const char *name)
{
	int c = pf_series_find(s, name);

	cr_assert_geq(c, 0, "no column %s", name);
	cr_assert_str_eq(pf_series_column_name(s, (size_t)c), name);
	return pf_series_column(s, (size_t)c);
}

static void drain(pf_loader *l)
{
	pf_batch *b;
	int ret;

	while ((ret = pf_loader_next(l, &b)) == 1)
		pf_loader_release(l, b);
	cr_assert_eq(ret, 0);
}

Test(series, totals_end_at_the_metrics)
{
	pf_loader *l = open_loader(tu_id_dataset(20000), 3);
	pf_loader_metrics m;
	pf_series *s;
	const double *t, *rec, *rd, *dec, *rss;
	size_t n;

	drain(l);
	pf_loader_get_metrics(l, &m);
	cr_assert_eq(pf_loader_series(l, &s), 0);
	n = pf_series_points(s);
	cr_assert_geq(n, 2);
	cr_assert_leq(n, 240);
	t = column(s, "t_s");
	rec = column(s, "records");
	rd = column(s, "bytes_read");
	dec = column(s, "bytes_decompressed");
	rss = column(s, "rss_bytes");
	column(s, "stage.io.busy_s");
	column(s, "stage.decode.threads");
	column(s, "stage.consumer_wait.busy_s");
	cr_assert_eq(pf_series_find(s, "no.such"), -ENOENT);
	cr_assert_null(pf_series_column(s, pf_series_columns(s)));
	cr_assert_null(pf_series_column_name(s, pf_series_columns(s)));
	/* The first point is the start, the last the end (no point after
	 * the end, however late the copy is made). */
	cr_assert_eq(t[0], 0);
	cr_assert_eq(rec[0], 0);
	cr_assert_eq(rec[n - 1], (double)m.records);
	cr_assert_eq(rd[n - 1], (double)m.bytes_read);
	cr_assert_eq(dec[n - 1], (double)m.bytes_decompressed);
	for (size_t i = 1; i < n; i++) {
		cr_assert_gt(t[i], t[i - 1], "point %zu", i);
		cr_assert_geq(rec[i], rec[i - 1]);
		cr_assert_gt(rss[i], 0);
	}
	pf_series_free(s);
	pf_loader_free(l);
	pf_series_free(NULL);
}

/* 5,000 samples 20 ms apart (100 s of a run), given to the sampler
 * directly: at most 240 points, the first still t = 0, the last the
 * last sample, evenly thinned, the interval doubled each time. */
Test(series, a_long_run_is_downsampled_within_its_bound)
{
	pf_loader *l = open_loader(tu_id_dataset(200), 1);
	pf_series *s;
	const double *t;
	size_t n;
	uint64_t t0 = pf_pipe_of(l)->create_start_ns;

	for (uint64_t k = 1; k <= 5000; k++) {
		pf_series_sample(pf_pipe_of(l), t0 + k * 20000000ull, false);
		cr_assert_leq(pf_pipe_of(l)->series->n, 240);
	}
	pf_series_sample(pf_pipe_of(l), t0 + 5001 * 20000000ull, true);
	cr_assert_eq(pf_loader_series(l, &s), 0);
	n = pf_series_points(s);
	t = column(s, "t_s");
	cr_assert_geq(n, 121);
	cr_assert_leq(n, 240);
	cr_assert_eq(t[0], 0);
	cr_assert_float_eq(t[n - 1], 5001 * 0.02, 1e-9);
	cr_assert_geq(s->halvings, 4);
	cr_assert_eq(s->interval_ns, 20000000ull << s->halvings);
	/* Evenly spread: no gap between points more than twice the
	 * interval. */
	for (size_t i = 1; i < n; i++)
		cr_assert_leq(t[i] - t[i - 1], 2 * (double)s->interval_ns * 1e-9 + 1e-9,
			      "gap at %zu: %g s", i, t[i] - t[i - 1]);
	pf_series_free(s);
	pf_loader_free(l);
}

/* Halving keeps a gauge's peak: the highest resident memory sampled
 * survives however many points go. */
Test(series, downsampling_keeps_the_peak_memory)
{
	pf_loader *l = open_loader(tu_id_dataset(200), 1);
	pf_series *s;
	uint64_t t0 = pf_pipe_of(l)->create_start_ns;
	int c;
	double peak = 0;

	for (uint64_t k = 1; k <= 1000; k++) {
		pf_series_sample(pf_pipe_of(l), t0 + k * 20000000ull, false);
		c = pf_series_find(pf_pipe_of(l)->series, "rss_bytes");
		if (k == 333) {	/* a spike only this point saw */
			pf_pipe_of(l)->series->v[(size_t)c * pf_pipe_of(l)->series->cap + pf_pipe_of(l)->series->n - 1] = 1e12;
		}
	}
	cr_assert_eq(pf_loader_series(l, &s), 0);
	c = pf_series_find(s, "rss_bytes");
	for (size_t i = 0; i < pf_series_points(s); i++)
		if (pf_series_column(s, (size_t)c)[i] > peak)
			peak = pf_series_column(s, (size_t)c)[i];
	cr_assert_eq(peak, 1e12);
	pf_series_free(s);
	pf_loader_free(l);
}

static json_t *series_json(const pf_series *s)
{
	pf_report *r;
	pf_error err;
	char *text;
	int64_t n;
	json_t *o, *sub;

	cr_assert_eq(pf_report_create(&r), 0);
	cr_assert_eq(pf_report_add_series(r, s, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_report_add_series(r, s, &err), -EEXIST);
	n = pf_report_format(r, PF_REPORT_JSON, NULL, 0);
	text = malloc((size_t)n + 1);
	pf_report_format(r, PF_REPORT_JSON, text, (size_t)n + 1);
	o = json_loads(text, 0, NULL);
	cr_assert_not_null(o, "%s", text);
	free(text);
	pf_report_free(r);
	sub = json_incref(json_object_get(o, "series"));
	json_decref(o);
	cr_assert_not_null(sub);
	return sub;
}

/* Rates per interval: records/s from the totals, and a share per stage,
 * from a run whose points are 25 ms apart on the sampler's clock (the
 * records real). */
Test(series, the_section_is_rates_per_interval)
{
	pf_loader *l = open_loader(tu_id_dataset(2000), 1);
	pf_series *s;
	pf_batch *b;
	json_t *o, *a;
	size_t n;
	const double *t, *rec;
	uint64_t k = 0;
	int ret;

	while ((ret = pf_loader_next(l, &b)) == 1) {
		pf_loader_release(l, b);
		pf_series_sample(pf_pipe_of(l), pf_pipe_of(l)->create_start_ns + ++k * 25000000ull, false);
	}
	cr_assert_eq(ret, 0);
	cr_assert_eq(pf_loader_series(l, &s), 0);
	n = pf_series_points(s);
	cr_assert_geq(n, 100);
	t = column(s, "t_s");
	rec = column(s, "records");
	o = series_json(s);
	cr_assert_eq(json_integer_value(json_object_get(o, "points")), (json_int_t)n);
	cr_assert_null(json_object_get(o, "too_short"));
	a = json_object_get(o, "records_per_s");
	cr_assert_eq(json_array_size(a), n - 1);
	for (size_t i = 0; i + 1 < n; i++) {
		double want = (rec[i + 1] - rec[i]) / (t[i + 1] - t[i]);

		cr_assert_float_eq(json_real_value(json_array_get(a, i)), want,
				   1e-6 * (want > 1 ? want : 1), "interval %zu", i);
	}
	cr_assert_eq(json_array_size(json_object_get(o, "t_s")), n - 1);
	{
		const char *name;
		json_t *v;
		size_t stages = 0;

		json_object_foreach(json_object_get(o, "stages"), name, v) {
			cr_assert_eq(json_array_size(v), n - 1, "%s", name);
			stages++;
		}
		cr_assert_eq(stages, 3);
	}
	cr_assert_eq(json_array_size(json_object_get(o, "rss_bytes")), n - 1);
	json_decref(o);
	pf_series_free(s);
	pf_loader_free(l);
}

/* A copy taken before the first batch: too little to plot, and the
 * section says so instead of drawing nothing. */
Test(series, too_short_to_plot_says_so)
{
	pf_loader *l = open_loader(tu_id_dataset(200), 1);
	pf_series *s;
	json_t *o;

	cr_assert_eq(pf_loader_series(l, &s), 0);
	cr_assert_leq(pf_series_points(s), 2);
	o = series_json(s);
	cr_assert_str_eq(json_string_value(json_object_get(o, "too_short")),
			 "too little time to plot: the run ended before its third point "
			 "(a point every 20 ms of next() calls)");
	cr_assert_null(json_object_get(o, "t_s"));
	cr_assert_eq(json_integer_value(json_object_get(o, "memory_budget_bytes")),
		     512 << 20);
	json_decref(o);
	pf_series_free(s);
	pf_loader_free(l);
}

static char *html_of(const pf_report *r)
{
	int64_t n = pf_report_format(r, PF_REPORT_HTML, NULL, 0);
	char *page;

	cr_assert_gt(n, 0);
	page = malloc((size_t)n + 1);
	cr_assert_eq(pf_report_format(r, PF_REPORT_HTML, page, (size_t)n + 1), n);
	cr_assert_eq(strlen(page), (size_t)n);
	return page;
}

/* The page: one per chart of the series, the figures as rows, text
 * escaped, nothing fetched from anywhere; a format that does not exist
 * is -EINVAL. */
Test(series, the_html_page_holds_the_charts_and_the_figures)
{
	pf_loader *l = open_loader(tu_id_dataset(2000), 1);
	const char *paths[] = { "a<b>&\"c\".tfrecord" };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 10,
				 .features = "id:int64[1]" };
	pf_run_info run = { .seconds = 1 };
	pf_loader_metrics m;
	pf_report *r;
	pf_series *s;
	pf_batch *b;
	pf_error err;
	char *page, small[16];
	uint64_t k = 0;

	while (pf_loader_next(l, &b) == 1) {
		pf_loader_release(l, b);
		pf_series_sample(pf_pipe_of(l), pf_pipe_of(l)->create_start_ns + ++k * 25000000ull, false);
	}
	pf_loader_get_metrics(l, &m);
	cr_assert_eq(pf_loader_series(l, &s), 0);
	run.files = paths;
	run.nfiles = 1;
	cr_assert_eq(pf_report_create(&r), 0);
	cr_assert_eq(pf_report_add_loader(r, &cfg, &m, &run, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_report_add_series(r, s, &err), 0);
	page = html_of(r);
	cr_assert(strncmp(page, "<!DOCTYPE html>", 15) == 0);
	for (const char *id = "throughput\0bandwidth\0stages\0regions\0memory\0first-batch\0";
	     *id; id += strlen(id) + 1) {
		char want[64];

		snprintf(want, sizeof(want), "<figure class=\"chart\" id=\"chart-%s\">", id);
		cr_assert_not_null(strstr(page, want), "%s", want);
	}
	cr_assert_not_null(strstr(page, "<tr data-key=\"records\"><th>records</th><td>2000</td>"));
	cr_assert_not_null(strstr(page, "<tr data-key=\"series.points\">"));
	cr_assert_not_null(strstr(page, "data-drawn=\"yes\""));
	/* the stages are the series' own, a line each */
	cr_assert_not_null(strstr(page, "<g class=\"series\" data-name=\"consumer_wait\">"));
	/* nothing from elsewhere, no script, the path escaped */
	cr_assert_null(strstr(page, "<script"));
	cr_assert_null(strstr(page, "http:"));
	cr_assert_null(strstr(page, "https:"));
	cr_assert_null(strstr(page, "a<b>"));
	/* snprintf's contract: cut, ended, the whole length returned */
	cr_assert_eq(pf_report_format(r, PF_REPORT_HTML, small, sizeof(small)),
		     (int64_t)strlen(page));
	cr_assert_eq(strlen(small), sizeof(small) - 1);
	cr_assert_eq(pf_report_format(r, (pf_report_output)7, NULL, 0), -EINVAL);
	cr_assert_eq(pf_report_print(r, (pf_report_output)7, stdout), -EINVAL);
	free(page);
	pf_report_free(r);
	pf_series_free(s);
	pf_loader_free(l);
}
