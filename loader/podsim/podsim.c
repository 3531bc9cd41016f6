/* SPDX-License-Identifier: Apache-2.0 */
/* The pod simulation (podfeed.h): one epoch planned as every host of a
 * pod would plan it, with the plan's functions, and the plans checked
 * record by record.  It reads nothing but what opening the dataset
 * reads; the plans themselves are loader/plan/'s, the order model pipeline_internal.h's
 * header describes. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan_internal.h"

struct pf_podsim {
	pf_podsim_summary sum;
	pf_podsim_host *hosts;
	char problem[512];
};

/* A stream file is read whole, in pieces of PF_READ_DEFAULT bytes. */
static uint64_t stream_reads(uint64_t size)
{
	return (size + PF_READ_DEFAULT - 1) / PF_READ_DEFAULT;
}

static uint64_t unit_bytes(const pf_dataset *ds, const pf_unit *u)
{
	return u->stream ? ds->file_size[u->file] : u->csize;
}

static uint64_t unit_reads(const pf_dataset *ds, const pf_unit *u)
{
	return u->stream ? stream_reads(ds->file_size[u->file]) : 1;
}

/* Scratch for walking every host's plan: marks are host + 1, so that no
 * array is cleared between hosts. */
typedef struct walk {
	const pf_dataset *ds;
	uint64_t *file_base;	/* the dataset's record number of each file's first */
	uint32_t *owner;	/* per record: the host + 1 that delivered it, or 0 */
	uint32_t *unit_mark, *file_mark;	/* the epoch's reads */
	uint32_t *first_unit_mark, *first_file_mark;	/* the first batch's */
	uint32_t *perm;
	uint32_t block;
	bool permute;
	uint64_t seed;
	uint32_t epoch;
	uint32_t host_batch;
} walk;

static void problem(pf_podsim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(pf_podsim *s, const char *fmt, ...)
{
	va_list ap;

	if (s->sum.problem)
		return;	/* the first one */
	va_start(ap, fmt);
	vsnprintf(s->problem, sizeof(s->problem), fmt, ap);
	va_end(ap);
	s->sum.problem = s->problem;
}

/* Mark unit u (and its file) in the marks given; count what is new. */
static void mark_unit(const walk *w, uint64_t u, uint32_t mark, uint32_t *unit_mark,
		      uint32_t *file_mark, uint64_t *units, uint64_t *files, uint64_t *reads,
		      uint64_t *bytes)
{
	const pf_unit *un = &w->ds->units[u];

	if (unit_mark[u] == mark)
		return;
	unit_mark[u] = mark;
	(*units)++;
	*bytes += unit_bytes(w->ds, un);
	if (reads)
		*reads += unit_reads(w->ds, un);
	if (file_mark[un->file] != mark) {
		file_mark[un->file] = mark;
		(*files)++;
	}
}

/* Host h's plan, position by position: the record at each stream
 * position, where the shuffle block sends it, whether it is delivered
 * (before the quota) and in the first step. */
static void walk_host(pf_podsim *s, walk *w, uint32_t h, const pf_epoch_plan *p,
		      pf_podsim_host *ho)
{
	const pf_dataset *ds = w->ds;
	uint32_t mark = h + 1;
	uint64_t seg_start = 0, pos = 0;
	size_t si = 0;

	/* The units its plan reads: its own range (the wrapped segments
	 * repeat some of them). */
	for (size_t i = 0; i < p->nseg && pos < p->share; i++) {
		mark_unit(w, p->seg[i].unit, mark, w->unit_mark, w->file_mark, &ho->units,
			  &ho->files, NULL, &ho->bytes);
		pos += p->seg[i].count;
	}
	for (uint64_t k = 0; k * w->block < p->stream_len; k++) {
		uint64_t first = k * w->block, left = p->stream_len - first;
		uint32_t n = left < w->block ? (uint32_t)left : w->block;

		if (w->permute)
			pf_plan_block_perm(w->seed, w->epoch, h, k, w->perm, n);
		for (uint32_t r = 0; r < n; r++) {
			uint64_t at = first + r, out = first + (w->permute ? w->perm[r] : r);
			const pf_segment *sg;
			const pf_unit *u;
			uint64_t rec;

			while (at >= seg_start + p->seg[si].count)
				seg_start += p->seg[si++].count;
			sg = &p->seg[si];
			u = &ds->units[sg->unit];
			rec = w->file_base[u->file] + (u->stream ? 0 : u->first_record) + sg->first +
			      (at - seg_start);
			if (out < w->host_batch)
				mark_unit(w, sg->unit, mark, w->first_unit_mark,
					  w->first_file_mark, &ho->first_units, &ho->first_files,
					  &ho->first_reads, &ho->first_bytes);
			if (out >= p->quota)
				continue;	/* the remainder */
			s->sum.delivered++;
			if (!w->owner[rec]) {
				w->owner[rec] = mark;
				s->sum.distinct++;
			} else if (w->owner[rec] != mark) {
				s->sum.disjoint = false;
				problem(s, "record %llu of %s is delivered by host %u and host %u",
					(unsigned long long)(rec - w->file_base[u->file]),
					ds->paths[u->file], w->owner[rec] - 1, h);
			} else if (at < p->share) {
				/* Twice from its own range: only wrapping repeats. */
				s->sum.disjoint = false;
				problem(s, "record %llu of %s is delivered twice by host %u",
					(unsigned long long)(rec - w->file_base[u->file]),
					ds->paths[u->file], h);
			}
		}
	}
}

/* The open's figures as each host of the pod pays them: the manifest,
 * or every shard's tail and, without a manifest, its share of the
 * stream files to count. */
static void open_figures(pf_podsim *s, const pf_dataset *ds, const pf_dataset *bare, uint32_t hosts)
{
	for (uint32_t h = 0; h < hosts; h++) {
		pf_podsim_host *ho = &s->hosts[h];

		if (ds->manifest) {
			ho->open_files = ds->open.manifest.files;
			ho->open_reads = ds->open.manifest.reads;
			ho->open_bytes = ds->open.manifest.bytes;
		}
		if (!bare)
			continue;
		ho->bare_files = bare->open.index.files;
		ho->bare_reads = bare->open.index.reads;
		ho->bare_bytes = bare->open.index.bytes;
	}
	if (!bare)
		return;
	for (size_t i = 0, j = 0; i < bare->nfiles; i++) {
		pf_podsim_host *ho;

		if (bare->index[i])
			continue;
		ho = &s->hosts[pf_count_owner(j++, hosts)];
		ho->bare_count_files++;
		ho->bare_count_bytes += bare->file_size[i];
		ho->bare_reads += stream_reads(bare->file_size[i]);
		ho->bare_bytes += bare->file_size[i];
	}
	for (uint32_t h = 0; h < hosts && !ds->manifest; h++) {
		pf_podsim_host *ho = &s->hosts[h];

		ho->open_files = ho->bare_files;
		ho->open_reads = ho->bare_reads;
		ho->open_bytes = ho->bare_bytes;
	}
}

static int check_config(const pf_podsim_config *cfg, pf_error *err)
{
	uint64_t cores = cfg && cfg->cores_per_host ? cfg->cores_per_host : 1;

	if (!cfg || !cfg->npaths || !cfg->paths || !cfg->per_core_batch)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the simulation needs paths and a per-core batch");
	if (!cfg->num_hosts || cfg->num_hosts > PF_PODSIM_MAX_HOSTS)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%u hosts: the simulation takes 1 to %u", cfg->num_hosts,
				    PF_PODSIM_MAX_HOSTS);
	if (cores * cfg->per_core_batch > UINT32_MAX / 2)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "host batch of %llu cores x %u records is too large",
				    (unsigned long long)cores, cfg->per_core_batch);
	return 0;
}

/* Open the dataset as a loader does, its reads counted in regions:
 * paths, from their manifest unless ignore_manifest. */
static int open_counted(pf_dataset **ds, const pf_podsim_config *cfg, const char *const *paths,
			size_t n, bool ignore_manifest, pf_region_table *regions, uint64_t *ns,
			pf_error *err)
{
	pf_source_config scfg = { .max_record_size = cfg->max_record_size, .regions = regions };
	pf_open_config ocfg = { .threads = cfg->threads ? cfg->threads : pf_cpus() };
	uint64_t t0 = pf_now_ns();
	int ret = ignore_manifest ? pf_dataset_open_shards(ds, paths, n, &scfg, &ocfg, err)
				  : pf_dataset_open(ds, paths, n, &scfg, &ocfg, err);

	*ns = pf_now_ns() - t0;
	return ret;
}

int pf_podsim_run(pf_podsim **out, const pf_podsim_config *cfg, pf_error *err)
{
	pf_region_table *regions = NULL;
	pf_dataset *ds = NULL, *bare = NULL;
	pf_epoch_plan plan = { 0 };
	pf_podsim *s = NULL;
	pf_podsim_summary *sum;
	walk w = { 0 };
	uint64_t t0, expect_steps;
	int ret;

	pf_error_clear(err);
	*out = NULL;
	ret = check_config(cfg, err);
	if (ret < 0)
		return ret;
	s = pf_calloc(1, sizeof(*s));
	if (!s || !(s->hosts = pf_calloc(cfg->num_hosts, sizeof(*s->hosts)))) {
		ret = -ENOMEM;
		goto out;
	}
	sum = &s->sum;
	sum->num_hosts = cfg->num_hosts;
	sum->cores_per_host = cfg->cores_per_host ? cfg->cores_per_host : 1;
	sum->per_core_batch = cfg->per_core_batch;
	w.host_batch = sum->cores_per_host * sum->per_core_batch;
	sum->global_batch = (uint64_t)w.host_batch * sum->num_hosts;
	ret = pf_plan_block(cfg->shuffle, cfg->shuffle_window, w.host_batch, &w.block,
			    &w.permute, err);
	if (ret < 0)
		goto out;
	sum->block = w.block;
	ret = pf_region_table_create(&regions, NULL, PF_REGION_LEXICAL, err);
	if (ret < 0)
		goto out;

	ret = open_counted(&ds, cfg, cfg->paths, cfg->npaths, cfg->ignore_manifest, regions,
			   &sum->open_ns, err);
	if (ret < 0)
		goto out;
	if (!ds->manifest) {
		bare = ds;
		sum->bare_open_ns = sum->open_ns;
	} else if (cfg->measure_without_manifest) {
		/* The shards the manifest names, each opened. */
		ret = open_counted(&bare, cfg, (const char *const *)ds->paths, ds->nfiles, true,
				   regions, &sum->bare_open_ns, err);
		if (ret < 0)
			goto out;
	}
	sum->manifest = ds->manifest != NULL;
	sum->manifest_bytes = ds->open.manifest.bytes;
	sum->shards = ds->nfiles;
	sum->units = ds->nunits;
	sum->records = ds->records;
	for (size_t i = 0; i < ds->nfiles; i++)
		sum->bytes += ds->file_size[i];
	for (uint64_t u = 0; u < ds->nunits; u++)
		if (ds->units[u].stream)
			sum->streams++;
	sum->indexed = sum->shards - sum->streams;
	sum->bare_measured = bare != NULL;
	open_figures(s, ds, bare, cfg->num_hosts);

	if (ds->records > UINT32_MAX) {
		ret = pf_error_set(err, -EFBIG, PF_OFFSET_NONE, 0,
				   "%llu records: the simulation checks at most %u",
				   (unsigned long long)ds->records, UINT32_MAX);
		goto out;
	}
	/* As the loader refuses it: a pod of no steps checks nothing. */
	ret = pf_plan_check_records(ds->records, &(pf_topology){ 0, cfg->num_hosts,
				    sum->cores_per_host, sum->per_core_batch }, cfg->remainder, err);
	if (ret < 0)
		goto out;
	w.ds = ds;
	w.seed = cfg->seed;
	w.epoch = cfg->epoch;
	w.file_base = pf_calloc(ds->nfiles, sizeof(*w.file_base));
	w.owner = pf_calloc(ds->records ? ds->records : 1, sizeof(*w.owner));
	w.unit_mark = pf_calloc(ds->nunits ? ds->nunits : 1, 2 * sizeof(*w.unit_mark));
	w.file_mark = pf_calloc(ds->nfiles, 2 * sizeof(*w.file_mark));
	w.perm = pf_malloc((size_t)w.block * sizeof(*w.perm));
	if (!w.file_base || !w.owner || !w.unit_mark || !w.file_mark || !w.perm) {
		ret = -ENOMEM;
		goto out;
	}
	w.first_unit_mark = w.unit_mark + (ds->nunits ? ds->nunits : 1);
	w.first_file_mark = w.file_mark + ds->nfiles;
	/* Units are in file order: each file's first record number. */
	for (uint64_t u = 0, base = 0; u < ds->nunits; u++) {
		const pf_unit *un = &ds->units[u];

		if (u == 0 || un->file != ds->units[u - 1].file)
			w.file_base[un->file] = base;
		base += un->records;
	}

	sum->steps_equal = sum->disjoint = true;
	expect_steps = pf_plan_steps(ds->records, &(pf_topology){ 0, cfg->num_hosts,
					sum->cores_per_host, sum->per_core_batch }, cfg->remainder);
	sum->steps = expect_steps;
	t0 = pf_now_ns();
	for (uint32_t h = 0; h < cfg->num_hosts; h++) {
		pf_topology t = { h, cfg->num_hosts, sum->cores_per_host, sum->per_core_batch };
		pf_podsim_host *ho = &s->hosts[h];
		uint64_t c0;

		c0 = pf_now_ns();
		ret = pf_plan_epoch(&plan, ds, &t, cfg->seed, cfg->epoch, cfg->shuffle, 0, 0,
				    cfg->remainder);
		sum->plan_ns += pf_now_ns() - c0;
		if (ret == -ERANGE) {
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "host %u of %u owns no record to wrap around: the "
					   "dataset holds %llu records", h, cfg->num_hosts,
					   (unsigned long long)ds->records);
			goto out;
		}
		if (ret < 0)
			goto out;
		ho->steps = plan.quota / w.host_batch;
		ho->records_owned = plan.share;
		ho->records_delivered = plan.quota;
		ho->records_dropped = plan.share > plan.quota ? plan.share - plan.quota : 0;
		ho->records_wrapped = plan.stream_len > plan.share ? plan.stream_len - plan.share : 0;
		sum->remainder_dropped += ho->records_dropped;
		sum->remainder_wrapped += ho->records_wrapped;
		if (plan.quota % w.host_batch || ho->steps != expect_steps ||
		    plan.stream_len < plan.quota) {
			sum->steps_equal = false;
			problem(s, "host %u has %llu steps of %llu records for its %llu, the pod "
				"%llu steps", h, (unsigned long long)ho->steps,
				(unsigned long long)w.host_batch,
				(unsigned long long)plan.stream_len,
				(unsigned long long)expect_steps);
		}
		walk_host(s, &w, h, &plan, ho);
		sum->open_requests += ho->open_files + ho->open_reads;
		sum->open_bytes += ho->open_bytes;
		sum->bare_requests += ho->bare_files + ho->bare_reads;
		sum->bare_bytes += ho->bare_bytes;
		sum->first_requests += ho->first_files + ho->first_reads;
		sum->first_bytes += ho->first_bytes;
	}
	sum->check_ns = pf_now_ns() - t0 - sum->plan_ns;
	if (!sum->manifest) {
		sum->open_requests = sum->bare_requests;
		sum->open_bytes = sum->bare_bytes;
	}
	/* The union: every record but the remainder, each once. */
	sum->complete = sum->distinct == ds->records - sum->remainder_dropped &&
			sum->delivered == expect_steps * sum->global_batch;
	if (!sum->complete)
		problem(s, "%llu records delivered (%llu distinct), the epoch's %llu less a "
			"remainder of %llu is %llu", (unsigned long long)sum->delivered,
			(unsigned long long)sum->distinct, (unsigned long long)ds->records,
			(unsigned long long)sum->remainder_dropped,
			(unsigned long long)(ds->records - sum->remainder_dropped));
	ret = 0;
out:
	if (ret == -ENOMEM && err && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory simulating the pod");
	pf_plan_release(&plan);
	pf_free(w.file_base);
	pf_free(w.owner);
	pf_free(w.unit_mark);
	pf_free(w.file_mark);
	pf_free(w.perm);
	if (bare != ds)
		pf_dataset_free(bare);
	pf_dataset_free(ds);
	pf_region_table_free(regions);
	if (ret < 0) {
		pf_podsim_free(s);
		return ret;
	}
	*out = s;
	return 0;
}

void pf_podsim_free(pf_podsim *s)
{
	if (!s)
		return;
	pf_free(s->hosts);
	pf_free(s);
}

const pf_podsim_summary *pf_podsim_summary_get(const pf_podsim *s)
{
	return &s->sum;
}

const pf_podsim_host *pf_podsim_host_get(const pf_podsim *s, uint32_t h)
{
	return h < s->sum.num_hosts ? &s->hosts[h] : NULL;
}
