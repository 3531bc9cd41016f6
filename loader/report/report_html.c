/* SPDX-License-Identifier: Apache-2.0 */
/* The report as one self-contained HTML page (PF_REPORT_HTML): drawn from
 * the report's own JSON object, so the page says what --json says.  Not
 * the figures (report.c and the sections' files make them) nor the time
 * series (series.c).
 *
 * The page has no script, font, style sheet or image from anywhere: the
 * charts are inline SVG, drawn here, so it renders with JavaScript off,
 * prints, and can be attached to a bug; a point's value is its SVG
 * <title> (the browser's tooltip).  What is drawn is found in the object,
 * not listed here: a stage is a member of series.stages, a region a
 * member of series.regions, a host an element of pod.host, so a stage,
 * region or host added later is drawn without a change; a section or
 * member this file does not know is still in the tables of every figure
 * (each top-level object its own table), and a numeric array of the
 * series it does not know gets a chart of its own. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "alloc_internal.h"
#include "report_internal.h"

#define W 720.0			/* the SVG's user units */
#define H 280.0
#define ML 84.0			/* margins: left, right, top, bottom */
#define MR 20.0
#define MT 16.0
#define MB 46.0
#define PW (W - ML - MR)
#define PH (H - MT - MB)
#define MAX_LINES 16u

static const char *const palette[] = {
	"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
	"#17becf", "#7f7f7f", "#bcbd22",
};
#define NPALETTE (sizeof(palette) / sizeof(palette[0]))

/* ------------------------------------------------------------------ */
/* Text                                                                 */

static void esc(pf_text *t, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<': pf_text_printf(t, "&lt;"); break;
		case '>': pf_text_printf(t, "&gt;"); break;
		case '&': pf_text_printf(t, "&amp;"); break;
		case '"': pf_text_printf(t, "&quot;"); break;
		default: pf_text_printf(t, "%c", *s);
		}
	}
}

static double num(const json_t *v)
{
	if (json_is_number(v))
		return json_number_value(v);
	return NAN;
}

/* obj's member at a dotted path ("open.seconds"), or NULL. */
static json_t *get(const json_t *obj, const char *path)
{
	char key[64];
	const char *dot;

	while (obj && (dot = strchr(path, '.'))) {
		snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
		obj = json_object_get(obj, key);
		path = dot + 1;
	}
	return obj ? json_object_get(obj, path) : NULL;
}

static double getnum(const json_t *obj, const char *path)
{
	return num(get(obj, path));
}

/* obj's string at path, or dflt. */
static const char *getstr(const json_t *obj, const char *path, const char *dflt)
{
	const char *s = json_string_value(get(obj, path));

	return s ? s : dflt;
}

/* A JSON scalar as the JSON text has it (numbers as %.9g, as the report's
 * JSON), a string as itself. */
static void scalar(pf_text *t, const json_t *v)
{
	char buf[64];
	size_t n;

	if (json_is_string(v)) {
		esc(t, json_string_value(v));
		return;
	}
	n = json_dumpb(v, buf, sizeof(buf) - 1, JSON_ENCODE_ANY | JSON_REAL_PRECISION(9));
	if (!n || n >= sizeof(buf) - 1) {
		pf_text_printf(t, "?");
		return;
	}
	buf[n] = '\0';
	esc(t, buf);
}

/* ------------------------------------------------------------------ */
/* Axes                                                                 */

/* A "nice" step (1, 2, 5 x 10^k) for about n ticks up to max. */
static double nice_step(double max, int n)
{
	double raw = max / n, mag = pow(10, floor(log10(raw))), f = raw / mag;

	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

static void tick_label(char *buf, size_t cap, double v, double step)
{
	if (v >= 1e6)
		snprintf(buf, cap, "%gM", v / 1e6);
	else if (v >= 1e4)
		snprintf(buf, cap, "%gk", v / 1e3);
	else if (step >= 1 || v == 0)
		snprintf(buf, cap, "%.0f", v);
	else
		snprintf(buf, cap, "%.*f", (int)ceil(-log10(step)), v);
}

typedef struct axes {
	double xmax, ymax;
	const char *xlabel, *ylabel;
} axes;

static double px(const axes *a, double x)
{
	return ML + (a->xmax > 0 ? x / a->xmax : 0) * PW;
}

static double py(const axes *a, double y)
{
	return MT + PH - (a->ymax > 0 ? y / a->ymax : 0) * PH;
}

/* Grid lines, ticks and the axes' labels; ymax is rounded up to a tick. */
static void draw_axes(pf_text *t, axes *a)
{
	double ys, xs;
	char lab[32];

	if (!(a->ymax > 0) || !isfinite(a->ymax))
		a->ymax = 1;
	if (!(a->xmax > 0) || !isfinite(a->xmax))
		a->xmax = 1;
	ys = nice_step(a->ymax, 5);
	a->ymax = ceil(a->ymax / ys - 1e-9) * ys;
	xs = nice_step(a->xmax, 6);
	pf_text_printf(t, "<g class=\"axes\">");
	for (double y = 0; y <= a->ymax + ys / 2; y += ys) {
		tick_label(lab, sizeof(lab), y, ys);
		pf_text_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			       "class=\"grid\"/><text x=\"%.1f\" y=\"%.1f\" class=\"yt\">%s</text>",
			       ML, py(a, y), ML + PW, py(a, y), ML - 6, py(a, y) + 4, lab);
	}
	for (double x = 0; x <= a->xmax + 1e-12; x += xs) {
		tick_label(lab, sizeof(lab), x, xs);
		pf_text_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			       "class=\"tick\"/><text x=\"%.1f\" y=\"%.1f\" class=\"xt\">%s</text>",
			       px(a, x), MT + PH, px(a, x), MT + PH + 5, px(a, x), MT + PH + 18, lab);
	}
	pf_text_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"axis\"/>"
		       "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"axis\"/>",
		       ML, MT, ML, MT + PH, ML, MT + PH, ML + PW, MT + PH);
	pf_text_printf(t, "<text x=\"%.1f\" y=\"%.1f\" class=\"xl\">", ML + PW / 2, H - 6);
	esc(t, a->xlabel);
	pf_text_printf(t, "</text><text transform=\"translate(16 %.1f) rotate(-90)\" "
		       "class=\"yl\">", MT + PH / 2);
	esc(t, a->ylabel);
	pf_text_printf(t, "</text></g>");
}

/* ------------------------------------------------------------------ */
/* Charts                                                               */

typedef struct line {
	char name[96];
	const json_t *y;	/* an array of numbers, one per x */
	double scale;		/* drawn as y * scale */
} line;

typedef struct chart {
	const char *id, *title;
	const json_t *x;	/* the times, seconds */
	line lines[MAX_LINES];
	size_t nlines;
	const char *unit;	/* of a point's value in its tooltip */
	double mark_x;		/* a vertical mark (the first batch), or NAN */
	const char *mark_label;
	double hline;		/* a horizontal line (the budget), or NAN */
	const char *hline_label;
	double ymin_max;	/* the y axis reaches at least this */
	const char *too_short;	/* the series' reason there is nothing to draw */
	const char *xlabel;	/* NULL: the seconds since the loader's start */
	bool dashed[MAX_LINES];	/* a line drawn dashed (an ideal) */
} chart;

static void chart_init(chart *c, const char *id, const char *title, const json_t *x,
		       const char *unit)
{
	memset(c, 0, sizeof(*c));
	c->id = id;
	c->title = title;
	c->x = x;
	c->unit = unit;
	c->mark_x = NAN;
	c->hline = NAN;
}

static void add_line(chart *c, const char *name, size_t len, const json_t *y, double scale)
{
	line *l;

	if (c->nlines == MAX_LINES || !json_is_array(y))
		return;
	l = &c->lines[c->nlines++];
	snprintf(l->name, sizeof(l->name), "%.*s", (int)len, name);
	l->y = y;
	l->scale = scale;
}

static void figure_open(pf_text *t, const char *id, const char *title)
{
	pf_text_printf(t, "<figure class=\"chart\" id=\"chart-%s\"><figcaption><h2>", id);
	esc(t, title);
	pf_text_printf(t, "</h2></figcaption>");
}

static void figure_close(pf_text *t, const char *reading)
{
	pf_text_printf(t, "<p class=\"reading\">");
	esc(t, reading);
	pf_text_printf(t, "</p></figure>\n");
}

/* The SVG element's opening: the colours drawn, for a test to look for. */
static void svg_open(pf_text *t, const chart *c, bool data)
{
	pf_text_printf(t, "<svg viewBox=\"0 0 %.0f %.0f\" role=\"img\" class=\"plot\" "
		       "data-drawn=\"%s\" data-colors=\"", W, H, data ? "yes" : "no");
	for (size_t i = 0; data && i < c->nlines; i++)
		pf_text_printf(t, "%s%s", i ? " " : "", palette[i % NPALETTE]);
	pf_text_printf(t, "\"><title>");
	esc(t, c->title);
	pf_text_printf(t, "</title>");
}

static void legend(pf_text *t, const chart *c)
{
	pf_text_printf(t, "<ul class=\"legend\">");
	for (size_t i = 0; i < c->nlines; i++) {
		pf_text_printf(t, "<li><span class=\"sw\" style=\"background:%s\"></span>",
			       palette[i % NPALETTE]);
		esc(t, c->lines[i].name);
		pf_text_printf(t, "</li>");
	}
	pf_text_printf(t, "</ul>");
}

/* A line chart of c over its x (or, too short, the reason in its place). */
static void line_chart(pf_text *t, chart *c, const char *reading)
{
	axes a = { .xlabel = c->xlabel ? c->xlabel : "seconds since the loader's start",
		   .ylabel = c->unit };
	size_t n = json_array_size(c->x);

	figure_open(t, c->id, c->title);
	if (c->too_short || n < 2 || !c->nlines) {
		svg_open(t, c, false);
		pf_text_printf(t, "<text x=\"%.0f\" y=\"%.0f\" class=\"empty\">", W / 2, H / 2);
		esc(t, c->too_short ? c->too_short : "nothing to plot");
		pf_text_printf(t, "</text></svg>");
		figure_close(t, reading);
		return;
	}
	legend(t, c);
	for (size_t i = 0; i < n; i++)
		if (num(json_array_get(c->x, i)) > a.xmax)
			a.xmax = num(json_array_get(c->x, i));
	a.ymax = c->ymin_max;
	for (size_t k = 0; k < c->nlines; k++)
		for (size_t i = 0; i < n; i++) {
			double v = num(json_array_get(c->lines[k].y, i)) * c->lines[k].scale;

			if (isfinite(v) && v > a.ymax)
				a.ymax = v;
		}
	if (isfinite(c->hline) && c->hline * 1.08 > a.ymax)
		a.ymax = c->hline * 1.08;
	svg_open(t, c, true);
	draw_axes(t, &a);
	if (isfinite(c->hline)) {
		pf_text_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			       "class=\"hline\"/><text x=\"%.1f\" y=\"%.1f\" class=\"note\">",
			       ML, py(&a, c->hline), ML + PW, py(&a, c->hline), ML + PW - 4,
			       py(&a, c->hline) - 5);
		esc(t, c->hline_label);
		pf_text_printf(t, "</text>");
	}
	if (isfinite(c->mark_x) && c->mark_x > 0 && c->mark_x <= a.xmax) {
		pf_text_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			       "class=\"mark\"/><text x=\"%.1f\" y=\"%.1f\" class=\"marktext\">",
			       px(&a, c->mark_x), MT, px(&a, c->mark_x), MT + PH,
			       px(&a, c->mark_x) + 4, MT + 12);
		esc(t, c->mark_label);
		pf_text_printf(t, "</text>");
	}
	for (size_t k = 0; k < c->nlines; k++) {
		const line *l = &c->lines[k];
		const char *col = palette[k % NPALETTE];

		pf_text_printf(t, "<g class=\"series\" data-name=\"");
		esc(t, l->name);
		pf_text_printf(t, "\"><polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" "
			       "vector-effect=\"non-scaling-stroke\" %spoints=\"", col,
			       c->dashed[k] ? "stroke-dasharray=\"8 5\" " : "");
		for (size_t i = 0; i < n; i++) {
			double v = num(json_array_get(l->y, i)) * l->scale;

			if (isfinite(v))
				pf_text_printf(t, "%.1f,%.1f ", px(&a, num(json_array_get(c->x, i))),
					       py(&a, v));
		}
		pf_text_printf(t, "\"/>");
		for (size_t i = 0; i < n; i++) {
			double x = num(json_array_get(c->x, i));
			double v = num(json_array_get(l->y, i)) * l->scale;

			if (!isfinite(v))
				continue;
			pf_text_printf(t, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\">"
				       "<title>", px(&a, x), py(&a, v), col);
			esc(t, l->name);
			pf_text_printf(t, c->xlabel ? " at %.0f: %.6g " : " at %.3f s: %.6g ", x, v);
			esc(t, c->unit);
			pf_text_printf(t, "</title></circle>");
		}
		pf_text_printf(t, "</g>");
	}
	pf_text_printf(t, "</svg>");
	figure_close(t, reading);
}

/* The highest value of a line and when. */
static double peak(const json_t *x, const json_t *y, double *at)
{
	double best = 0;

	*at = 0;
	for (size_t i = 0; i < json_array_size(y); i++)
		if (num(json_array_get(y, i)) > best) {
			best = num(json_array_get(y, i));
			*at = num(json_array_get(x, i));
		}
	return best;
}

/* ------------------------------------------------------------------ */
/* The loader's charts                                                  */

typedef struct page {
	pf_text *t;
	const json_t *root, *series, *x;
	const char *too_short;
	char reading[512];
} page;

static void throughput(page *p)
{
	chart c;
	double at, best;

	chart_init(&c, "throughput", "Throughput: records per second", p->x, "records/s");
	c.too_short = p->too_short;
	c.mark_x = getnum(p->series, "first_batch_s");
	c.mark_label = "first batch";
	add_line(&c, "records/s", 9, get(p->series, "records_per_s"), 1);
	best = peak(p->x, get(p->series, "records_per_s"), &at);
	if (json_is_number(get(p->root, "steady_records_per_s")))
		snprintf(p->reading, sizeof(p->reading), "%.0f records/s over the run, %.0f "
			 "steady after the first batch (at %.1f ms); the fastest interval %.0f "
			 "records/s at %.2f s.", getnum(p->root, "records_per_s"),
			 getnum(p->root, "steady_records_per_s"),
			 getnum(p->root, "first_batch_seconds") * 1e3, best, at);
	else
		snprintf(p->reading, sizeof(p->reading), "%.0f records/s over the run (steady: "
			 "n/a, %s); first batch at %.1f ms.", getnum(p->root, "records_per_s"),
			 getstr(p->root, "steady_na", "not known"),
			 getnum(p->root, "first_batch_seconds") * 1e3);
	line_chart(p->t, &c, p->reading);

	chart_init(&c, "bandwidth", "Throughput: megabytes per second", p->x, "MB/s");
	c.too_short = p->too_short;
	c.mark_x = getnum(p->series, "first_batch_s");
	c.mark_label = "first batch";
	add_line(&c, "read (compressed)", 17, get(p->series, "mb_per_s_read"), 1);
	add_line(&c, "decompressed", 12, get(p->series, "mb_per_s_decompressed"), 1);
	snprintf(p->reading, sizeof(p->reading), "%.1f MB/s read and %.1f MB/s decompressed "
		 "over the run (%.1f MB read in all).", getnum(p->root, "mb_per_s_read"),
		 getnum(p->root, "mb_per_s_decompressed"), getnum(p->root, "bytes_read") / 1e6);
	line_chart(p->t, &c, p->reading);
}

static void stages(page *p)
{
	const json_t *st = get(p->series, "stages");
	const char *name, *bn = json_string_value(get(p->root, "bottleneck"));
	json_t *v;
	chart c;
	char key[96];
	double wait = getnum(p->root, "stages.consumer_wait");

	chart_init(&c, "stages", "Each stage's busy share", p->x, "% busy");
	c.too_short = p->too_short;
	c.ymin_max = 100;
	c.mark_x = getnum(p->series, "first_batch_s");
	c.mark_label = "first batch";
	json_object_foreach((json_t *)st, name, v)
		add_line(&c, name, strlen(name), v, 100);
	snprintf(key, sizeof(key), "stages.%s", bn ? bn : "");
	snprintf(p->reading, sizeof(p->reading), "%s was busy %.0f%% of the run: the "
		 "bottleneck; the consumer waited %.0f%% of it for batches%s", bn ? bn : "?",
		 getnum(p->root, key) * 100, wait * 100,
		 wait >= 0.5 ? ": the input pipeline limits the run."
			     : ": the loader keeps up with it.");
	line_chart(p->t, &c, p->reading);
}

/* The regions' reading: the cross-region warning, from the regions'
 * section when there is one, else from the series' kinds. */
static void regions_reading(page *p)
{
	const json_t *per = get(p->root, "regions.per_region");
	double cross = 0, all = 0;
	char names[160] = "";
	size_t i;
	json_t *e;

	json_array_foreach(per, i, e) {
		double b = getnum(e, "bytes_read");

		all += isfinite(b) ? b : 0;
		if (json_is_true(json_object_get(e, "cross_region")) && b > 0) {
			cross += b;
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 names[0] ? ", " : "", getstr(e, "label", "?"));
		}
	}
	if (!per) {
		const char *label;
		json_t *r;

		json_object_foreach(get(p->series, "regions"), label, r) {
			double b = getnum(r, "bytes_read");

			all += b;
			if (!strcmp(getstr(r, "kind", ""), "cross") && b > 0) {
				cross += b;
				snprintf(names + strlen(names), sizeof(names) - strlen(names),
					 "%s%s", names[0] ? ", " : "", label);
			}
		}
	}
	if (cross > 0)
		snprintf(p->reading, sizeof(p->reading), "warning: %.1f MB (%.0f%% of the "
			 "bytes read) came across regions, from %s: slower reads, and egress "
			 "billed (about $%.2f).", cross / 1e6, all > 0 ? cross / all * 100 : 0,
			 names, isfinite(getnum(p->root, "regions.egress.usd_estimate")) ?
			 getnum(p->root, "regions.egress.usd_estimate") : 0.0);
	else
		snprintf(p->reading, sizeof(p->reading), "%.1f MB read, none of it across "
			 "regions.", all / 1e6);
}

static void regions(page *p)
{
	const char *label;
	json_t *r;
	chart c;

	chart_init(&c, "regions", "Bytes read per storage region", p->x, "MB/s");
	c.too_short = p->too_short;
	json_object_foreach(get(p->series, "regions"), label, r) {
		char name[96];

		snprintf(name, sizeof(name), "%s (%s)", label,
			 getstr(r, "kind", "?"));
		add_line(&c, name, strlen(name), get(r, "mb_per_s"), 1);
	}
	regions_reading(p);
	if (!c.nlines && !p->too_short)
		c.too_short = "no region table: the reads were not counted per region";
	line_chart(p->t, &c, p->reading);
}

static void memory(page *p)
{
	chart c;
	double budget = getnum(p->root, "memory_budget_bytes") / 1048576.0, at;
	double pk;

	chart_init(&c, "memory", "Resident memory against the budget", p->x, "MiB");
	c.too_short = p->too_short;
	c.hline = budget;
	c.hline_label = "memory budget";
	c.mark_x = getnum(p->series, "first_batch_s");
	c.mark_label = "first batch";
	add_line(&c, "resident (the process)", 22, get(p->series, "rss_bytes"), 1.0 / 1048576);
	pk = peak(p->x, get(p->series, "rss_bytes"), &at) / 1048576.0;
	snprintf(p->reading, sizeof(p->reading), "peak resident memory %.1f MiB (at %.2f s) "
		 "against a budget of %.0f MiB for the loader's pools (%.1f MiB allocated); "
		 "resident memory is the whole process's.", pk, at, budget,
		 getnum(p->root, "memory_pool_bytes") / 1048576.0);
	line_chart(p->t, &c, p->reading);
}

/* The first batch's parts, one bar split by them. */
static void first_batch(page *p)
{
	static const struct part {
		const char *key, *name;
	} parts[] = {
		{ "open.manifest_seconds", "manifest" },
		{ "open.index_seconds", "index tails" },
		{ "open.count_seconds", "counting stream files" },
		{ "open.exchange_seconds", "the hosts' exchange" },
		{ "loader_start_seconds", "loader start" },
		{ "first_reads_seconds", "first reads" },
	};
	const size_t nparts = sizeof(parts) / sizeof(parts[0]);
	double total = getnum(p->root, "first_batch_seconds"), sum = 0, x = ML, big = 0;
	const char *bigname = "";
	pf_text *t = p->t;
	size_t k = 0;

	figure_open(t, "first-batch", "The first batch, split");
	if (!(total > 0)) {
		pf_text_printf(t, "<svg viewBox=\"0 0 %.0f 120\" role=\"img\" class=\"plot\" "
			       "data-drawn=\"no\" data-colors=\"\"><text x=\"%.0f\" y=\"60\" "
			       "class=\"empty\">no batch was delivered</text></svg>", W, W / 2);
		figure_close(t, "no batch was delivered: nothing to split.");
		return;
	}
	for (size_t i = 0; i < nparts; i++) {
		double v = getnum(p->root, parts[i].key);

		sum += isfinite(v) ? v : 0;
	}
	pf_text_printf(t, "<ul class=\"legend\">");
	for (size_t i = 0; i < nparts; i++)
		if (getnum(p->root, parts[i].key) > 0)
			pf_text_printf(t, "<li><span class=\"sw\" style=\"background:%s\"></span>%s"
				       "</li>", palette[k++ % NPALETTE], parts[i].name);
	pf_text_printf(t, "</ul><svg viewBox=\"0 0 %.0f 120\" role=\"img\" class=\"plot\" "
		       "data-drawn=\"yes\" data-colors=\"", W);
	k = 0;
	for (size_t i = 0; i < nparts; i++)
		if (getnum(p->root, parts[i].key) > 0) {
			pf_text_printf(t, "%s%s", k ? " " : "", palette[k % NPALETTE]);
			k++;
		}
	pf_text_printf(t, "\"><title>The first batch, split</title>");
	k = 0;
	for (size_t i = 0; i < nparts; i++) {
		double v = getnum(p->root, parts[i].key), w;

		if (!(v > 0))
			continue;
		w = v / (sum > total ? sum : total) * PW;
		pf_text_printf(t, "<rect x=\"%.1f\" y=\"20\" width=\"%.1f\" height=\"44\" "
			       "fill=\"%s\"><title>%s: %.3f ms</title></rect>", x, w,
			       palette[k++ % NPALETTE], parts[i].name, v * 1e3);
		if (v > big) {
			big = v;
			bigname = parts[i].name;
		}
		x += w;
	}
	pf_text_printf(t, "<line x1=\"%.1f\" y1=\"72\" x2=\"%.1f\" y2=\"72\" class=\"axis\"/>"
		       "<text x=\"%.1f\" y=\"90\" class=\"xt\">0</text><text x=\"%.1f\" y=\"90\" "
		       "class=\"yt\">%.1f ms</text><text x=\"%.1f\" y=\"112\" class=\"xl\">"
		       "milliseconds from pf_loader_create() to the first batch</text></svg>",
		       ML, ML + PW, ML, ML + PW, total * 1e3, ML + PW / 2);
	snprintf(p->reading, sizeof(p->reading), "first batch after %.1f ms; the largest part "
		 "%s (%.1f ms, %.0f%%).", total * 1e3, bigname, big * 1e3, big / total * 100);
	figure_close(t, p->reading);
}

/* Arrays of the series this file does not draw: a chart each, and
 * objects of arrays (as stages) a chart of their members. */
static void unknown_series(page *p)
{
	static const char *const known[] = {
		"t_s", "records_per_s", "mb_per_s_read", "mb_per_s_decompressed", "stages",
		"regions", "rss_bytes",
	};
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)p->series, key, v) {
		bool is_known = false;
		chart c;
		const char *name;
		json_t *m;

		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			is_known |= !strcmp(key, known[i]);
		if (is_known || (!json_is_array(v) && !json_is_object(v)))
			continue;
		chart_init(&c, key, key, p->x, key);
		if (json_is_array(v))
			add_line(&c, key, strlen(key), v, 1);
		else
			json_object_foreach(v, name, m)
				if (json_is_array(m))
					add_line(&c, name, strlen(name), m, 1);
		if (!c.nlines)
			continue;
		snprintf(p->reading, sizeof(p->reading), "series.%s over the run.", key);
		line_chart(p->t, &c, p->reading);
	}
}

/* ------------------------------------------------------------------ */
/* The pod                                                              */

/* Per host: its records/s (the slowest in red), then its stages' busy
 * shares side by side (the members of pod.host[i].stages, whatever they
 * are), the straggler and its bottleneck named under them. */
static void pod(page *p)
{
	const json_t *pd = get(p->root, "pod"), *hosts = get(pd, "host");
	const json_t *slow = get(pd, "straggler"), *first_stages;
	pf_text *t = p->t;
	double max = 0, rowh, bw;
	size_t n = json_array_size(hosts), i, nstages = 0, k;
	json_t *h, *v;
	const char *name;
	char lab[32];

	if (!n)
		return;
	json_array_foreach(hosts, i, h)
		if (getnum(h, "records_per_s") > max)
			max = getnum(h, "records_per_s");
	figure_open(t, "pod", "Each host's records per second");
	pf_text_printf(t, "<svg viewBox=\"0 0 %.0f %.0f\" role=\"img\" class=\"plot\" "
		       "data-drawn=\"yes\" data-colors=\"%s\"><title>Each host's records per "
		       "second</title>", W, 50.0 + 28.0 * (double)n, palette[0]);
	bw = max > 0 ? PW / max : 0;
	json_array_foreach(hosts, i, h) {
		bool s = getnum(h, "index") == getnum(slow, "index");
		double rps = getnum(h, "records_per_s");

		snprintf(lab, sizeof(lab), "host %.0f", getnum(h, "index"));
		pf_text_printf(t, "<text x=\"%.1f\" y=\"%.1f\" class=\"yt\">%s</text><rect x=\"%.1f\" "
			       "y=\"%.1f\" width=\"%.1f\" height=\"20\" fill=\"%s\"><title>%s: %.0f "
			       "records/s</title></rect>", ML - 6, 24.0 + 28.0 * (double)i,
			       lab, ML, 10.0 + 28.0 * (double)i, isfinite(rps) ? rps * bw : 0,
			       palette[s ? 1 : 0], lab, rps);
	}
	pf_text_printf(t, "<text x=\"%.1f\" y=\"%.1f\" class=\"xl\">records per second "
		       "(the slowest host in red)</text></svg>", ML + PW / 2, 40.0 + 28.0 * (double)n);
	snprintf(p->reading, sizeof(p->reading), "%.0f records/s for the pod of %zu hosts; the "
		 "slowest is host %.0f (%s) at %.0f records/s, %.1f%% below the fastest; its "
		 "bottleneck: %s (busy %.0f%%).", getnum(pd, "records_per_s"), n,
		 getnum(slow, "index"), getstr(slow, "name", "?"), getnum(slow, "records_per_s"),
		 getnum(slow, "below_fastest") * 100, getstr(slow, "bottleneck", "?"),
		 getnum(slow, "bottleneck_busy") * 100);
	figure_close(t, p->reading);

	first_stages = get(json_array_get(hosts, 0), "stages");
	nstages = json_object_size(first_stages);
	if (!nstages)
		return;
	figure_open(t, "pod-stages", "Each host's stages: busy share");
	pf_text_printf(t, "<ul class=\"legend\">");
	k = 0;
	json_object_foreach((json_t *)first_stages, name, v) {
		pf_text_printf(t, "<li><span class=\"sw\" style=\"background:%s\"></span>",
			       palette[k++ % NPALETTE]);
		esc(t, name);
		pf_text_printf(t, "</li>");
	}
	rowh = 8.0 + 12.0 * (double)nstages;
	pf_text_printf(t, "</ul><svg viewBox=\"0 0 %.0f %.0f\" role=\"img\" class=\"plot\" "
		       "data-drawn=\"yes\" data-colors=\"", W, 50.0 + rowh * (double)n);
	for (k = 0; k < nstages; k++)
		pf_text_printf(t, "%s%s", k ? " " : "", palette[k % NPALETTE]);
	pf_text_printf(t, "\"><title>Each host's stages</title>");
	json_array_foreach(hosts, i, h) {
		double y = 10.0 + rowh * (double)i;

		snprintf(lab, sizeof(lab), "host %.0f", getnum(h, "index"));
		pf_text_printf(t, "<text x=\"%.1f\" y=\"%.1f\" class=\"yt\">%s</text>", ML - 6,
			       y + rowh / 2, lab);
		k = 0;
		json_object_foreach((json_t *)first_stages, name, v) {
			double share = getnum(get(h, "stages"), name);

			pf_text_printf(t, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"10\" "
				       "fill=\"%s\"><title>%s %s: %.0f%%</title></rect>", ML,
				       y + 12.0 * (double)k, isfinite(share) ? share * PW : 0,
				       palette[k % NPALETTE], lab, name, share * 100);
			k++;
		}
	}
	pf_text_printf(t, "<text x=\"%.1f\" y=\"%.1f\" class=\"xl\">busy share of the run, 0 to "
		       "100%%</text></svg>", ML + PW / 2, 40.0 + rowh * (double)n);
	snprintf(p->reading, sizeof(p->reading), "a step took %.3f ms (host %.0f) to %.3f ms "
		 "(host %.0f): the slowest %.1f%% above the fastest; the slowest host's "
		 "bottleneck is %s.", getnum(pd, "step_ms.min"), getnum(pd, "step_ms.min_host"),
		 getnum(pd, "step_ms.max"), getnum(pd, "step_ms.max_host"),
		 getnum(pd, "step_ms.spread") * 100, getstr(slow, "bottleneck", "?"));
	figure_close(t, p->reading);
}

/* ------------------------------------------------------------------ */
/* The ladder                                                           */

/* records/s against hosts: the pod's, the linear ideal (dashed) and a
 * host's; the efficiency at each rung said; the step plan beside it. */
static void ladder(page *p)
{
	const json_t *rungs = get(p->root, "rungs"), *first = get(p->root, "first_under_90");
	json_t *x = json_array(), *pod = json_array(), *ideal = json_array(), *host = json_array();
	pf_text *t = p->t;
	chart c;
	size_t i, len = 0;
	json_t *g;

	json_array_foreach(rungs, i, g) {
		json_array_append(x, get(g, "hosts"));
		json_array_append(pod, get(g, "records_per_s"));
		json_array_append(ideal, get(g, "ideal_records_per_s"));
		json_array_append(host, get(g, "per_host_records_per_s"));
	}
	chart_init(&c, "ladder", "Scaling: records per second against hosts", x, "records/s");
	c.xlabel = "hosts in the pod";
	add_line(&c, "the pod", 7, pod, 1);
	add_line(&c, "linear ideal", 12, ideal, 1);
	c.dashed[1] = true;
	add_line(&c, "a host", 6, host, 1);
	len = (size_t)snprintf(p->reading, sizeof(p->reading), "scaling efficiency ");
	json_array_foreach(rungs, i, g)
		if (len < sizeof(p->reading))
			len += (size_t)snprintf(p->reading + len, sizeof(p->reading) - len,
						"%s%.0f%% at %.0f host%s", i ? ", " : "",
						getnum(g, "efficiency") * 100, getnum(g, "hosts"),
						getnum(g, "hosts") == 1 ? "" : "s");
	if (len < sizeof(p->reading)) {
		if (json_is_integer(first))
			snprintf(p->reading + len, sizeof(p->reading) - len, "; under 90%% from "
				 "%lld hosts: find why before scaling further.",
				 (long long)json_integer_value(first));
		else
			snprintf(p->reading + len, sizeof(p->reading) - len, "; every rung at or "
				 "above 90%%: the next step up may be taken.");
	}
	if (json_array_size(x) < 2)
		c.too_short = "one rung: nothing to scale against";
	line_chart(t, &c, p->reading);
	json_decref(x);
	json_decref(pod);
	json_decref(ideal);
	json_decref(host);

	pf_text_printf(t, "<section id=\"plan\"><h2>The step plan of each rung</h2><div "
		       "class=\"scroll\"><table class=\"plan\"><tr><th>hosts</th><th>global "
		       "batch</th><th>steps</th><th>learning rate</th><th>records/s</th><th>"
		       "efficiency</th></tr>");
	json_array_foreach(rungs, i, g) {
		pf_text_printf(t, "<tr><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>",
			       getnum(g, "hosts"), getnum(g, "global_batch"), getnum(g, "steps"));
		if (json_is_number(get(g, "lr")))
			pf_text_printf(t, "%.6g", getnum(g, "lr"));
		else
			pf_text_printf(t, "(no model)");
		pf_text_printf(t, "</td><td>%.0f</td><td>%.1f%%</td></tr>",
			       getnum(g, "records_per_s"), getnum(g, "efficiency") * 100);
	}
	pf_text_printf(t, "</table></div></section>\n");
}

/* ------------------------------------------------------------------ */
/* Every figure, as tables                                              */

static void rows(pf_text *t, const char *prefix, const json_t *v)
{
	char key[256];
	const char *k;
	json_t *m;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, m) {
			snprintf(key, sizeof(key), "%s%s%s", prefix, prefix[0] ? "." : "", k);
			rows(t, key, m);
		}
		return;
	}
	if (json_is_array(v) && json_array_size(v) &&
	    (json_is_object(json_array_get(v, 0)) || json_is_array(json_array_get(v, 0)))) {
		json_array_foreach(v, i, m) {
			snprintf(key, sizeof(key), "%s[%zu]", prefix, i);
			rows(t, key, m);
		}
		return;
	}
	pf_text_printf(t, "<tr data-key=\"");
	esc(t, prefix);
	pf_text_printf(t, "\"><th>");
	esc(t, prefix);
	pf_text_printf(t, "</th><td>");
	if (json_is_array(v)) {
		json_array_foreach(v, i, m) {
			if (i)
				pf_text_printf(t, ", ");
			scalar(t, m);
		}
	} else {
		scalar(t, v);
	}
	pf_text_printf(t, "</td></tr>");
}

static void table_open(pf_text *t, const char *name)
{
	pf_text_printf(t, "<details class=\"figures\" open><summary>");
	esc(t, name);
	pf_text_printf(t, "</summary><div class=\"scroll\"><table data-section=\"");
	esc(t, name);
	pf_text_printf(t, "\">");
}

static void tables(pf_text *t, const json_t *root)
{
	const char *k;
	json_t *v;

	pf_text_printf(t, "<section id=\"figures\"><h2>Every figure</h2><p>The report's JSON "
		       "(as <code>--json</code> prints it), member by member.</p>");
	table_open(t, get(root, "records") ? "loader" : "report");
	json_object_foreach((json_t *)root, k, v)
		if (!json_is_object(v))
			rows(t, k, v);
	pf_text_printf(t, "</table></div></details>");
	json_object_foreach((json_t *)root, k, v) {
		if (!json_is_object(v))
			continue;
		table_open(t, k);
		rows(t, k, v);
		pf_text_printf(t, "</table></div></details>");
	}
	pf_text_printf(t, "</section>");
}

/* ------------------------------------------------------------------ */
/* The page                                                             */

static const char style[] =
	"body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;"
	"padding:12px;color:#222;background:#fff}"
	"h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.1em;margin:.2em 0}"
	".summary{font-size:1.05em}"
	"figure.chart{margin:18px 0;padding:8px;border:1px solid #ddd;border-radius:6px;"
	"break-inside:avoid}"
	"svg.plot{width:100%;height:auto;display:block}"
	"svg text{font:13px system-ui,sans-serif;fill:#333}"
	".yt{text-anchor:end}.xt,.xl,.yl,.empty{text-anchor:middle}"
	".note{text-anchor:end;fill:#a00}.empty{font-size:16px;fill:#666}"
	".grid{stroke:#eee}.tick,.axis{stroke:#555}"
	".hline{stroke:#a00;stroke-dasharray:6 4;stroke-width:1.5}"
	".mark{stroke:#555;stroke-dasharray:3 3}.marktext{fill:#555}"
	".legend{list-style:none;padding:0;margin:4px 0;display:flex;flex-wrap:wrap;gap:4px 14px}"
	".sw{display:inline-block;width:12px;height:12px;margin-right:5px;vertical-align:-1px}"
	".reading{margin:4px 0 0;font-weight:600}"
	".scroll{overflow-x:auto}table{border-collapse:collapse;font-size:13px}"
	"table.plan{font-size:15px;margin:6px 0 18px}"
	"th,td{text-align:left;padding:2px 8px;border-bottom:1px solid #eee;"
	"vertical-align:top}td{word-break:break-all}"
	"details.figures{margin:8px 0}summary{font-weight:600;cursor:pointer}"
	"@media print{details.figures{display:block}}"
	/* A phone draws the 720-unit SVG at about half size: its text twice
	 * as large in SVG units reads at about 12 px. */
	"@media (max-width:600px){svg text{font-size:22px}.reading{font-weight:400}"
	"body{padding:6px}figure.chart{margin:10px 0;padding:4px}}";

static void build(pf_text *t, const json_t *root)
{
	page p = { .t = t, .root = root, .series = get(root, "series") };
	const char *bn = json_string_value(get(root, "bottleneck"));

	p.x = get(p.series, "t_s");
	p.too_short = json_string_value(get(p.series, "too_short"));
	if (!p.series)
		p.too_short = "no time series in this report";
	pf_text_printf(t, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		       "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
		       "<title>podfeed report</title><style>%s</style></head><body>\n"
		       "<header><h1>podfeed report</h1>", style);
	if (get(root, "records")) {
		pf_text_printf(t, "<p class=\"summary\">%.0f records in %.3f s: %.0f records/s, "
			       "%.1f MB/s read; bottleneck: <b>", getnum(root, "records"),
			       getnum(root, "seconds"), getnum(root, "records_per_s"),
			       getnum(root, "mb_per_s_read"));
		esc(t, bn ? bn : "?");
		pf_text_printf(t, "</b>; first batch %.1f ms.</p>",
			       getnum(root, "first_batch_seconds") * 1e3);
	}
	pf_text_printf(t, "</header>\n<section id=\"charts\">\n");
	if (get(root, "records")) {
		throughput(&p);
		stages(&p);
		regions(&p);
		memory(&p);
		first_batch(&p);
	}
	if (p.series && !p.too_short)
		unknown_series(&p);
	pod(&p);
	if (json_is_array(get(root, "rungs")))
		ladder(&p);
	pf_text_printf(t, "</section>\n");
	tables(t, root);
	pf_text_printf(t, "\n</body></html>\n");
}

int64_t pf_report_html(const pf_report *r, char *dst, size_t cap)
{
	int64_t n = pf_report_format(r, PF_REPORT_JSON, NULL, 0);
	char *json = pf_malloc((size_t)n + 1);
	json_t *root = NULL;
	pf_text t = { 0 };
	int64_t len = -ENOMEM;

	if (!json)
		return -ENOMEM;
	pf_report_format(r, PF_REPORT_JSON, json, (size_t)n + 1);
	root = json_loads(json, 0, NULL);
	pf_free(json);
	if (!root)
		return -ENOMEM;
	build(&t, root);
	json_decref(root);
	if (!t.failed && t.s) {
		len = (int64_t)t.len;
		if (cap) {
			size_t k = t.len < cap - 1 ? t.len : cap - 1;

			memcpy(dst, t.s, k);
			dst[k] = '\0';
		}
	}
	pf_text_free(&t);
	return len;
}
