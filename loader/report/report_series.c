/* SPDX-License-Identifier: Apache-2.0 */
/* The report's "series" section: a loader's time series (series.c) as
 * rates per interval between its points, the figures the page's charts
 * draw (report_html.c).  Not the sampling, nor the drawing.
 *
 * Interval i runs from point i to point i + 1 and is plotted at its end
 * (t_s[i] is point i + 1's time):
 *   records_per_s, mb_per_s_read, mb_per_s_decompressed
 *                the totals' growth over the interval's length
 *   stages.NAME  busy_s's growth over the length times the threads at
 *                its end: the share of the interval the stage's threads
 *                were busy, as the loader's section says it for the run
 *   regions.LABEL.mb_per_s
 *                the region's bytes' growth over the length (bytes the
 *                loader asked of it, not its speed: that is the regions'
 *                section's MB/s over active time)
 *   rss_bytes    the highest resident memory sampled in the interval */
#include <errno.h>
#include <string.h>

#include "report_internal.h"
#include "series_internal.h"

#define MIN_POINTS 3u		/* two intervals: a line */

static const char *region_kind_name(uint8_t k)
{
	return k == PF_REGION_IN ? "in" : k == PF_REGION_CROSS ? "cross" : "unknown";
}

static const double *col(const pf_series *s, const char *name)
{
	int c = pf_series_find(s, name);

	return c < 0 ? NULL : pf_series_column(s, (size_t)c);
}

/* Per interval: (v[i + 1] - v[i]) * scale / (t[i + 1] - t[i]), or with
 * per (the threads) the length times per[i + 1]. */
static json_t *rates(const pf_series *s, const double *v, const double *per, double scale)
{
	const double *t = col(s, "t_s");
	json_t *a = json_array();

	for (size_t i = 0; a && v && i + 1 < s->n; i++) {
		double dt = t[i + 1] - t[i], d = (v[i + 1] - v[i]) * scale;

		if (per)
			dt *= per[i + 1] > 0 ? per[i + 1] : 1;
		if (json_array_append_new(a, pf_json_num(dt > 0 ? d / dt : 0)) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* Values i = 1..n-1 of column v, as they are. */
static json_t *values(const pf_series *s, const double *v)
{
	json_t *a = json_array();

	for (size_t i = 1; a && v && i < s->n; i++)
		if (json_array_append_new(a, pf_json_num(v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* The name between prefix and suffix of a column's, else NULL (*len). */
static const char *middle(const char *name, const char *prefix, const char *suffix,
			  size_t *len)
{
	size_t n = strlen(name), p = strlen(prefix), q = strlen(suffix);

	if (n <= p + q || strncmp(name, prefix, p) || strcmp(name + n - q, suffix))
		return NULL;
	*len = n - p - q;
	return name + p;
}

/* "stages": a member per stage column pair, in the columns' order. */
static json_t *stages_json(const pf_series *s, bool *bad)
{
	json_t *o = json_object();

	for (size_t c = 0; c < s->ncols; c++) {
		size_t len;
		const char *name = middle(s->names[c], "stage.", ".busy_s", &len);
		char threads[96];

		if (!name || len > 64)
			continue;
		snprintf(threads, sizeof(threads), "stage.%.*s.threads", (int)len, name);
		pf_json_putn(o, name, len, rates(s, s->v + c * s->cap, col(s, threads), 1),
			     bad);
	}
	return o;
}

/* "regions": a member per region column, with its kind. */
static json_t *regions_json(const pf_series *s, bool *bad)
{
	json_t *o = json_object();

	for (size_t c = 0; c < s->ncols; c++) {
		size_t len;
		const char *label = middle(s->names[c], "region.", ".bytes", &len);
		json_t *e;

		if (!label)
			continue;
		e = json_object();
		pf_json_put(e, "kind", pf_json_str(region_kind_name(s->region_kind[c])), bad);
		pf_json_put(e, "bytes_read", pf_json_num(s->v[c * s->cap + s->n - 1]), bad);
		pf_json_put(e, "mb_per_s", rates(s, s->v + c * s->cap, NULL, 1e-6), bad);
		pf_json_putn(o, label, len, e, bad);
	}
	return o;
}

int pf_report_add_series(pf_report *r, const pf_series *s, pf_error *err)
{
	pf_text t = { 0 };
	json_t *o = json_object(), *sub = json_object();
	const double *ts = col(s, "t_s");
	double seconds = ts ? ts[s->n - 1] : 0;
	bool bad = false;

	pf_error_clear(err);
	pf_json_put(sub, "points", pf_json_u64(s->n), &bad);
	pf_json_put(sub, "seconds", pf_json_num(seconds), &bad);
	pf_json_put(sub, "interval_s", pf_json_num((double)s->interval_ns * 1e-9), &bad);
	pf_json_put(sub, "downsampled", pf_json_u64(s->halvings), &bad);
	pf_json_put(sub, "first_batch_s", pf_json_num(s->first_batch_s), &bad);
	pf_json_put(sub, "memory_budget_bytes", pf_json_u64(s->memory_budget), &bad);
	pf_json_put(sub, "memory_pool_bytes", pf_json_u64(s->memory_pools), &bad);
	if (s->n < MIN_POINTS) {
		pf_json_put(sub, "too_short",
			    pf_json_str("too little time to plot: the run ended before its "
					"third point (a point every 20 ms of next() calls)"),
			    &bad);
		pf_text_printf(&t, "series      %zu point%s over %.3f s: too little time to "
			       "plot\n", s->n, s->n == 1 ? "" : "s", seconds);
	} else {
		pf_json_put(sub, "t_s", values(s, ts), &bad);
		pf_json_put(sub, "records_per_s", rates(s, col(s, "records"), NULL, 1), &bad);
		pf_json_put(sub, "mb_per_s_read", rates(s, col(s, "bytes_read"), NULL, 1e-6),
			    &bad);
		pf_json_put(sub, "mb_per_s_decompressed",
			    rates(s, col(s, "bytes_decompressed"), NULL, 1e-6), &bad);
		pf_json_put(sub, "stages", stages_json(s, &bad), &bad);
		pf_json_put(sub, "regions", regions_json(s, &bad), &bad);
		pf_json_put(sub, "rss_bytes", values(s, col(s, "rss_bytes")), &bad);
		pf_text_printf(&t, "series      %zu points over %.3f s (one every %.0f ms%s)\n",
			       s->n, seconds, (double)s->interval_ns * 1e-6,
			       s->halvings ? ", downsampled" : "");
	}
	pf_json_put(o, "series", sub, &bad);
	return pf_report_section(r, PF_SECTION_SERIES, &t, o, bad, err);
}
