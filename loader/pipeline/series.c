/* SPDX-License-Identifier: Apache-2.0 */
/* The loader's time series: its counters sampled over the run in bounded
 * memory, for the report's charts (report_series.c makes the section; the
 * HTML page is report_html.c's).  Not the counters themselves (pipe.c,
 * pf_loader_metrics) nor what a chart shows of them.
 *
 * How it stays bounded: a point holds every column's value at one time:
 * counters as their running totals, gauges (the resident memory) as
 * their highest since the point before.  The consumer's thread samples
 * after pf_pipe_next() once an interval has passed since the last
 * point.  When SERIES_CAP points are held, every other one goes (the
 * first, the t = 0 point, stays) and the interval doubles: a long run
 * keeps between SERIES_CAP / 2 and SERIES_CAP points spread over all of
 * it.  Totals lose nothing by dropping a point (the next one's total
 * holds the dropped one's); gauges keep the higher of the two.
 *
 * The columns are a table (columns[] below) and the regions of the
 * loader's region table: a stage added later is a row here, and the
 * report and the page show it without being changed. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline_internal.h"
#include "series_internal.h"

#define SERIES_CAP 240u			/* points held at most (even) */
#define SERIES_INTERVAL_NS 20000000ull	/* the first interval: 20 ms */
#define SERIES_REGIONS_MAX 32u		/* regions given a column */

/* Where a column's value comes from: a uint64_t of pf_loader_metrics
 * (at off, times scale), or one of these. */
#define FROM_RSS SIZE_MAX		/* the resident memory now */
#define FROM_ONE (SIZE_MAX - 1)		/* 1: a stage of one thread */
#define FROM_THREADS (SIZE_MAX - 2)	/* the decode threads taking work */
#define M(field) offsetof(pf_loader_metrics, field)

/* A stage is two columns: "stage.NAME.busy_s" (its threads' busy
 * seconds, summed) and "stage.NAME.threads" (how many there were): its
 * busy share of an interval is the busy seconds over the interval times
 * the threads, as pf_loader_verdict_compute() says it for the run. */
static const struct column {
	const char *name;
	pf_series_kind kind;
	size_t from;
	double scale;
} columns[] = {
	{ "records", PF_SERIES_TOTAL, M(records), 1 },
	{ "steps", PF_SERIES_TOTAL, M(steps), 1 },
	{ "bytes_read", PF_SERIES_TOTAL, M(bytes_read), 1 },
	{ "bytes_decompressed", PF_SERIES_TOTAL, M(bytes_decompressed), 1 },
	{ "rss_bytes", PF_SERIES_PEAK, FROM_RSS, 1 },
	{ "stage.io.busy_s", PF_SERIES_TOTAL, M(io.busy_ns), 1e-9 },
	{ "stage.io.threads", PF_SERIES_LAST, FROM_ONE, 1 },
	{ "stage.decode.busy_s", PF_SERIES_TOTAL, M(decode.busy_ns), 1e-9 },
	{ "stage.decode.threads", PF_SERIES_LAST, FROM_THREADS, 1 },
	{ "stage.consumer_wait.busy_s", PF_SERIES_TOTAL, M(next_wait_ns), 1e-9 },
	{ "stage.consumer_wait.threads", PF_SERIES_LAST, FROM_ONE, 1 },
};
#define NCOLUMNS (sizeof(columns) / sizeof(columns[0]))

static double column_value(const struct column *c, const pf_loader_metrics *m, uint64_t rss)
{
	uint64_t v;

	switch (c->from) {
	case FROM_RSS:
		return (double)rss;
	case FROM_ONE:
		return 1;
	case FROM_THREADS:
		return m->decode_threads ? m->decode_threads : 1;
	default:
		memcpy(&v, (const char *)m + c->from, sizeof(v));
		return (double)v * c->scale;
	}
}

/* Column 0 is "t_s", the table's rows follow, then a column a region. */
#define COL_TABLE 1u

/* The process's resident memory now (/proc/self/statm), or 0. */
static uint64_t rss_now(void)
{
	char buf[128];
	unsigned long long size, resident;
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
		return 0;
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

void pf_series_free(pf_series *s)
{
	if (!s)
		return;
	for (size_t c = 0; c < s->ncols; c++)
		pf_free(s->names ? s->names[c] : NULL);
	pf_free(s->names);
	pf_free(s->kinds);
	pf_free(s->region_kind);
	pf_free(s->v);
	pf_free(s);
}

/* An empty series of ncols columns with room for cap points. */
static pf_series *series_alloc(size_t ncols, size_t cap)
{
	pf_series *s = pf_calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->ncols = ncols;
	s->cap = cap;
	s->names = pf_calloc(ncols, sizeof(*s->names));
	s->kinds = pf_calloc(ncols, sizeof(*s->kinds));
	s->region_kind = pf_calloc(ncols, sizeof(*s->region_kind));
	s->v = pf_calloc(ncols * (cap ? cap : 1), sizeof(*s->v));
	if (!s->names || !s->kinds || !s->region_kind || !s->v) {
		s->ncols = s->names ? ncols : 0;
		pf_series_free(s);
		return NULL;
	}
	return s;
}

static char *dup_str(const char *a, const char *b, const char *c)
{
	size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
	char *s = pf_malloc(n);

	if (s)
		snprintf(s, n, "%s%s%s", a, b, c);
	return s;
}

int pf_series_init(pf_pipe *l)
{
	pf_region_table *t = l->cfg.regions;
	size_t nregions = t ? pf_region_table_regions(t) : 0;
	pf_series *s;

	if (nregions > SERIES_REGIONS_MAX)
		nregions = SERIES_REGIONS_MAX;
	s = series_alloc(COL_TABLE + NCOLUMNS + nregions, SERIES_CAP);
	if (!s)
		return -ENOMEM;
	s->names[0] = dup_str("t_s", "", "");
	s->kinds[0] = PF_SERIES_LAST;
	for (size_t c = 0; c < NCOLUMNS; c++) {
		s->names[COL_TABLE + c] = dup_str(columns[c].name, "", "");
		s->kinds[COL_TABLE + c] = columns[c].kind;
	}
	for (size_t r = 0; r < nregions; r++) {
		pf_region_info ri;
		size_t c = COL_TABLE + NCOLUMNS + r;

		pf_region_table_region(t, r, &ri);
		s->names[c] = dup_str("region.", ri.label, ".bytes");
		s->kinds[c] = PF_SERIES_TOTAL;
		s->region_kind[c] = (uint8_t)ri.kind;
	}
	s->nregions = nregions;
	s->interval_ns = SERIES_INTERVAL_NS;
	for (size_t c = 0; c < s->ncols; c++)
		if (!s->names[c]) {
			pf_series_free(s);
			return -ENOMEM;
		}
	pthread_mutex_init(&l->series_mu, NULL);
	l->series = s;
	return 0;
}

void pf_series_exit(pf_pipe *l)
{
	if (!l->series)
		return;
	pf_series_free(l->series);
	l->series = NULL;
	pthread_mutex_destroy(&l->series_mu);
}

static double *at(pf_series *s, size_t c, size_t i)
{
	return &s->v[c * s->cap + i];
}

/* Every other point goes: point 0 stays, each pair (i - 1, i) becomes
 * point i with the gauges' higher value, and the last point stays (n is
 * even: cap).  The interval doubles. */
static void halve(pf_series *s)
{
	size_t n = 1;

	for (size_t i = 2; i < s->n; i += 2, n++)
		for (size_t c = 0; c < s->ncols; c++) {
			double v = *at(s, c, i);

			if (s->kinds[c] == PF_SERIES_PEAK && *at(s, c, i - 1) > v)
				v = *at(s, c, i - 1);
			*at(s, c, n) = v;
		}
	if (s->n % 2 == 0) {
		for (size_t c = 0; c < s->ncols; c++)
			*at(s, c, n) = *at(s, c, s->n - 1);
		n++;
	}
	s->n = n;
	s->interval_ns *= 2;
	s->halvings++;
}

/* Fill point i with the values now (t_ns since the loader's start). */
static void fill(const pf_pipe *l, pf_series *s, size_t i, uint64_t t_ns)
{
	pf_loader_metrics m;
	uint64_t rss = rss_now();
	pf_region_table *t = l->cfg.regions;

	pf_pipe_metrics(l, &m);
	*at(s, 0, i) = (double)t_ns * 1e-9;
	for (size_t c = 0; c < NCOLUMNS; c++)
		*at(s, COL_TABLE + c, i) = column_value(&columns[c], &m, rss);
	for (size_t r = 0; r < s->nregions; r++) {
		pf_region_stats st;

		pf_region_table_region_stats(t, r, &st);
		*at(s, COL_TABLE + NCOLUMNS + r, i) = (double)st.io.bytes;
	}
}

/* The point at t = 0: nothing done yet, the memory as the loader began. */
static void first_point(pf_series *s)
{
	for (size_t c = 0; c < s->ncols; c++)
		*at(s, c, 0) = 0;
	for (size_t c = 0; c < NCOLUMNS; c++)
		if (columns[c].kind == PF_SERIES_PEAK)
			*at(s, COL_TABLE + c, 0) = (double)rss_now();
		else if (columns[c].kind == PF_SERIES_LAST)
			*at(s, COL_TABLE + c, 0) = 1;
	s->n = 1;
}

void pf_series_sample(pf_pipe *l, uint64_t now, bool end)
{
	pf_series *s = l->series;
	uint64_t t_ns;

	if (!s || s->ended)
		return;
	t_ns = now > l->create_start_ns ? now - l->create_start_ns : 0;
	if (t_ns < s->last_ns)
		t_ns = s->last_ns;	/* time never runs back */
	if (!end && s->n && t_ns < s->last_ns + s->interval_ns)
		return;
	pthread_mutex_lock(&l->series_mu);
	if (!s->n)
		first_point(s);
	if (s->n == s->cap)
		halve(s);
	fill(l, s, s->n, t_ns);
	if (end && s->n > 1 && t_ns < s->last_ns + s->interval_ns / 2) {
		/* The end soon after the last point: that point moves to the
		 * end, so that no interval is much shorter than the rest (a
		 * rate over a few ms is noise); gauges keep the higher. */
		for (size_t c = 0; c < s->ncols; c++) {
			double v = *at(s, c, s->n);

			if (s->kinds[c] == PF_SERIES_PEAK && *at(s, c, s->n - 1) > v)
				v = *at(s, c, s->n - 1);
			*at(s, c, s->n - 1) = v;
		}
	} else {
		s->n++;
	}
	s->last_ns = t_ns;
	s->ended = end;
	pthread_mutex_unlock(&l->series_mu);
}

int pf_pipe_series(const pf_pipe *l, pf_series **out)
{
	pf_pipe *ml = (pf_pipe *)l;	/* the lock only */
	const pf_series *s = l->series;
	pf_series *c;
	pf_loader_metrics m;
	bool live;
	uint64_t t_ns;

	*out = NULL;
	if (!s)
		return -EINVAL;
	pthread_mutex_lock(&ml->series_mu);
	/* A point for now, unless the run has ended (its last point is the
	 * end) or the last point is under a millisecond old. */
	t_ns = pf_now_ns() - l->create_start_ns;
	live = !s->ended && (!s->n || t_ns >= s->last_ns + 1000000);
	c = series_alloc(s->ncols, (s->n ? s->n : 1) + live);
	if (!c) {
		pthread_mutex_unlock(&ml->series_mu);
		return -ENOMEM;
	}
	for (size_t k = 0; k < s->ncols; k++) {
		c->names[k] = dup_str(s->names[k], "", "");
		c->kinds[k] = s->kinds[k];
		c->region_kind[k] = s->region_kind[k];
		if (!c->names[k]) {
			pthread_mutex_unlock(&ml->series_mu);
			pf_series_free(c);
			return -ENOMEM;
		}
		for (size_t i = 0; i < s->n; i++)
			c->v[k * c->cap + i] = s->v[k * s->cap + i];
	}
	c->n = s->n;
	if (!c->n)
		first_point(c);
	c->nregions = s->nregions;
	c->interval_ns = s->interval_ns;
	c->halvings = s->halvings;
	c->ended = s->ended;
	pthread_mutex_unlock(&ml->series_mu);
	if (live) {
		fill(l, c, c->n, t_ns);
		c->n++;
	}
	pf_pipe_metrics(l, &m);
	c->first_batch_s = (double)m.first_batch_ns * 1e-9;
	c->memory_budget = l->cfg.memory_budget;
	c->memory_pools = l->memory_bytes;
	*out = c;
	return 0;
}

size_t pf_series_points(const pf_series *s)
{
	return s->n;
}

size_t pf_series_columns(const pf_series *s)
{
	return s->ncols;
}

const char *pf_series_column_name(const pf_series *s, size_t c)
{
	return c < s->ncols ? s->names[c] : NULL;
}

const double *pf_series_column(const pf_series *s, size_t c)
{
	return c < s->ncols ? &s->v[c * s->cap] : NULL;
}

int pf_series_find(const pf_series *s, const char *name)
{
	for (size_t c = 0; c < s->ncols; c++)
		if (!strcmp(s->names[c], name))
			return (int)c;
	return -ENOENT;
}
