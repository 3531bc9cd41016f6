/* SPDX-License-Identifier: Apache-2.0 */
/* A mixture's skip_steps and the records of its steps.  The schedule is
 * a pure function of (shares, seed, host batch, step; sample: and host):
 * the rows the skipped steps take of each source follow from it, and each
 * source's loaders (created held: reading nothing) are moved past that
 * many rows, whole batches skipped through their plan (the pipeline's
 * skip; a bridge of an elastic resume that runs out hands over to the
 * next loader, as next() would), the rest taken again of the batch it
 * ends in.  The records of a step: each row's source from the schedule,
 * its place in the source's rows from the rows the steps before took,
 * and the record there from the source's loaders' plans (loader/plan/
 * course.c).  Not here: the schedule (mixture.c), the batches
 * (mixture_batch.c). */
#include <errno.h>
#include <string.h>

#include "mixture_internal.h"

/* The loaders source s's rows come from now, in turn. */
static size_t chain(const mix_source *s, pf_pipe **out)
{
	size_t n = 0;

	out[n++] = s->l;
	for (uint32_t i = 0; i < s->npend; i++)
		out[n++] = s->pend[i];
	if (s->next)
		out[n++] = s->next;
	return n;
}

int pf_mix_keep_courses(pf_mixture *m)
{
	m->which_step0 = m->step0;
	m->courses = pf_calloc(m->n, sizeof(*m->courses));
	if (!m->courses)
		return -ENOMEM;
	for (size_t k = 0; k < m->n; k++) {
		mix_source *s = &m->src[k];
		mix_course *c = &m->courses[k];
		pf_pipe **ls = pf_calloc(s->npend + 3, sizeof(*ls));
		size_t n;

		if (!ls)
			return -ENOMEM;
		n = chain(s, ls);
		c->links = pf_calloc(n, sizeof(*c->links));
		if (!c->links) {
			pf_free(ls);
			return -ENOMEM;
		}
		c->row0 = s->cur_row;
		for (size_t i = 0; i < n; i++) {
			mix_link *lk = &c->links[c->nlinks];
			pf_run r;

			pf_pipe_run(ls[i], &r);
			lk->run = r;
			/* Its dataset outlives the bridges: the last loader's. */
			lk->run.o.ds = ls[n - 1]->ds;
			lk->batch = ls[i]->topo.per_core_batch;
			lk->rows = i + 1 < n ? pf_pipe_steps_left(ls[i]) * lk->batch : UINT64_MAX;
			if (pf_run_start_copy(&lk->run.start, &r.start) < 0) {
				pf_free(ls);
				return -ENOMEM;
			}
			c->nlinks++;
		}
		pf_free(ls);
	}
	return 0;
}

void pf_mix_course_release(mix_course *c)
{
	for (size_t i = 0; c->links && i < c->nlinks; i++)
		pf_run_start_release(&c->links[i].run.start);
	pf_free(c->links);
	memset(c, 0, sizeof(*c));
}

int pf_mixture_course_of(const pf_mixture *m, size_t k, uint32_t host, mix_course *out,
			 pf_error *err)
{
	const mix_source *s = &m->src[k];
	const mix_course *own = m->courses ? &m->courses[k] : NULL;
	pf_pipe *ls[MIX_CHAIN_MAX + 3];
	size_t n = 0, bridges = 0;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	if (!own || !own->nlinks)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "the mixture has no plan");
	if (host != m->topo.host_index) {
		/* Another host's: its bridges cut for it from the old hosts'
		 * states (the bridges still open), its loader of whole epochs
		 * the same but for the host (a fresh start). */
		n = s->npend + 2 <= MIX_CHAIN_MAX + 3 ? chain(s, ls) : 0;
		bridges = s->next ? n - 1 : 0;
		if (n != own->nlinks || bridges != s->nmerged || own->row0 ||
		    own->links[n - 1].run.start.resumed)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "source '%s': another host's course is known at an "
					    "elastic resume or the run's start, not from this "
					    "host's own state", s->name);
	}
	out->links = pf_calloc(own->nlinks, sizeof(*out->links));
	if (!out->links)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	out->row0 = own->row0;
	for (size_t i = 0; i < own->nlinks && ret == 0; i++) {
		mix_link *lk = &out->links[i];

		*lk = own->links[i];
		memset(&lk->run.start, 0, sizeof(lk->run.start));
		if (host != m->topo.host_index && i < bridges) {
			ret = pf_pipe_elastic_run(ls[i], host, s->merged[i], s->nmerged_hosts,
						  &lk->run, err);
			lk->run.o.ds = own->links[i].run.o.ds;
		} else {
			ret = pf_run_start_copy(&lk->run.start, &own->links[i].run.start);
			lk->run.o.topo.host_index = host;
		}
		out->nlinks = i + 1;
	}
	if (ret < 0) {
		pf_mix_course_release(out);
		if (ret == -ENOMEM && !err->code)
			pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory");
	}
	return ret;
}

void pf_mix_free_courses(pf_mixture *m)
{
	for (size_t k = 0; m->courses && k < m->n; k++) {
		for (size_t i = 0; i < m->courses[k].nlinks; i++)
			pf_run_start_release(&m->courses[k].links[i].run.start);
		pf_free(m->courses[k].links);
	}
	pf_free(m->courses);
	m->courses = NULL;
}

/* The schedule of m with arrays of its own, so that a caller on another
 * thread than the consumer's leaves the mixture's alone. */
typedef struct sched {
	pf_mixture m;
	uint8_t *rs;
} sched;

static int sched_init(sched *sc, const pf_mixture *m)
{
	/* What the schedule reads, fixed at create (the shares are the
	 * sources' q); the consumer's own fields are not read. */
	sc->m = (pf_mixture){ .src = m->src, .n = m->n, .mode = m->mode, .seed = m->seed,
			      .topo = m->topo, .host_batch = m->host_batch,
			      .stride = m->stride };
	sc->m.deficit = pf_calloc(m->n, sizeof(*sc->m.deficit));
	sc->m.count = pf_calloc(m->n, sizeof(*sc->m.count));
	sc->m.cum = pf_calloc(m->n + 1, sizeof(*sc->m.cum));
	sc->m.order = pf_calloc(m->n, sizeof(*sc->m.order));
	sc->rs = pf_calloc(m->host_batch, sizeof(*sc->rs));
	return sc->m.deficit && sc->m.count && sc->m.cum && sc->m.order && sc->rs ? 0 : -ENOMEM;
}

static void sched_release(sched *sc)
{
	pf_free(sc->m.deficit);
	pf_free(sc->m.count);
	pf_free(sc->m.cum);
	pf_free(sc->m.order);
	pf_free(sc->rs);
}

struct pf_mix_deal {
	sched sc;
};

pf_mix_deal *pf_mix_deal_new(const pf_mixture *m)
{
	pf_mix_deal *d = pf_calloc(1, sizeof(*d));

	if (d && sched_init(&d->sc, m) < 0) {
		sched_release(&d->sc);
		pf_free(d);
		return NULL;
	}
	return d;
}

void pf_mix_deal_rows(void *ctx, uint32_t host, uint64_t t, uint64_t n, uint8_t *rs)
{
	pf_mix_deal *d = ctx;

	d->sc.m.topo.host_index = host;
	for (uint64_t i = 0; i < n; i++) {
		pf_mix_schedule_seek(&d->sc.m, t + i);
		pf_mix_step_sources(&d->sc.m, t + i, rs + i * d->sc.m.host_batch);
	}
}

void pf_mix_deal_free(pf_mix_deal *d)
{
	if (!d)
		return;
	sched_release(&d->sc);
	pf_free(d);
}

/* The rows steps [t0, t1) take of each source on this host, added to
 * rows[]; with `at`, step t1's rows' sources into sc->rs too. */
static void rows_between(sched *sc, uint64_t t0, uint64_t t1, uint64_t *rows, bool at)
{
	pf_mixture *m = &sc->m;

	for (uint64_t t = t0; t < t1 + at; t++) {
		pf_mix_schedule_seek(m, t);
		if (m->mode == PF_MIX_STRATIFIED && t < t1) {
			for (size_t k = 0; k < m->n; k++)
				rows[k] += m->count[k];
			continue;
		}
		pf_mix_step_sources(m, t, sc->rs);
		for (uint32_t j = 0; t < t1 && j < m->host_batch; j++)
			rows[sc->rs[j]]++;
	}
}

/* Source k's loaders moved past `rows` more rows (and those of its
 * first batch already taken): whole batches through their plan (a
 * bridge that runs out freed, the next taking over), the rest taken
 * again of the batch it ends in (s->cur_row). */
static int skip_source(pf_mixture *m, size_t k, uint64_t rows, pf_error *err)
{
	mix_source *s = &m->src[k];
	uint64_t total = rows + s->cur_row;
	int ret;

	s->cur_row = 0;
	for (;;) {
		uint64_t batches = total / s->sub_batch;
		uint64_t left = s->next ? pf_pipe_steps_left(s->l) : UINT64_MAX;

		if (batches < left) {
			ret = pf_pipe_skip(s->l, batches, err);
			if (ret < 0) {
				pf_error cause = *err;

				pf_mix_source_error(err, s->name, &cause);
				return ret;
			}
			s->cur_row = (uint32_t)(total % s->sub_batch);
			return 0;
		}
		/* The bridge's epoch is over: as next_row() hands over. */
		total -= left * s->sub_batch;
		s->gen++;
		pf_pipe_free(s->l);
		if (s->npend) {
			pf_mix_pop_pending(s);
		} else {
			s->l = s->next;
			s->next = NULL;
			s->sub_batch = s->whole_batch;
		}
	}
}

int pf_mix_skip(pf_mixture *m, uint64_t n, pf_error *err)
{
	uint64_t *rows;
	sched sc;
	int ret;

	if (m->step0 + n < m->step0 || m->step0 + n >= m->rule_end)
		return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
				    "skip_steps: %llu steps from global step %llu reach past the "
				    "mixture's end: its last step is global step %llu (its stop "
				    "rule's)", (unsigned long long)n, (unsigned long long)m->step0,
				    (unsigned long long)(m->rule_end ? m->rule_end - 1 : 0));
	rows = pf_calloc(m->n, sizeof(*rows));
	ret = rows ? sched_init(&sc, m) : -ENOMEM;
	if (ret == 0) {
		rows_between(&sc, m->step0, m->step0 + n, rows, false);
		for (size_t k = 0; k < m->n && ret == 0; k++)
			ret = skip_source(m, k, rows[k], err);
	}
	if (rows)
		sched_release(&sc);
	pf_free(rows);
	if (ret == -ENOMEM && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory");
	if (ret < 0)
		return ret;
	m->skipped_from = m->step0;
	m->skipped = n;
	m->skipped_total += n;
	m->step0 += n;
	return 0;
}

void pf_mix_release_held(pf_mixture *m)
{
	for (size_t k = 0; m->hold && k < m->n; k++) {
		mix_source *s = &m->src[k];

		/* (A gated source's loader of whole epochs is open_gates()'.) */
		if (!s->gated)
			pf_pipe_open_gate(s->l, 0);
		for (uint32_t i = 0; i < s->npend; i++)
			pf_pipe_open_gate(s->pend[i], 0);
		if (s->next)
			pf_pipe_open_gate(s->next, 0);
	}
	m->hold = false;
}

int pf_mix_retake_skipped(pf_mixture *m, pf_error *err)
{
	for (size_t k = 0; k < m->n; k++) {
		mix_source *s = &m->src[k];
		uint32_t row = s->cur_row;
		const pf_core_batch *cb;
		uint32_t r;
		int ret;

		if (!row)
			continue;
		/* next_row() takes the batch (its state before it kept), then
		 * the rows taken before the skip's end are passed. */
		s->cur_row = 0;
		ret = 0;
		for (uint32_t i = 0; i < row && ret == 0; i++) {
			ret = pf_mix_take_row(m, k, &cb, &r);
			s->taken--;
		}
		if (ret < 0) {
			if (!err->code)
				*err = m->err;
			return ret;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* The records of a step                                                */

/* Row `a` of source k's rows from the run's start (counting those of
 * its first batch taken before): the record of the loader it comes
 * from.  @return 0 or <0 with err. */
static int source_record(const mix_course *c, uint64_t a, pf_plan_record *rec, uint32_t *epoch,
			 pf_plan_record **scratch, uint32_t *scratch_len, pf_error *err)
{
	a += c->row0;
	for (size_t i = 0; i < c->nlinks; i++) {
		const mix_link *lk = &c->links[i];
		uint64_t in_epoch;
		pf_which w;
		int ret;

		if (a >= lk->rows) {
			a -= lk->rows;
			continue;
		}
		if (*scratch_len < lk->batch) {
			pf_free(*scratch);
			*scratch = pf_calloc(lk->batch, sizeof(**scratch));
			*scratch_len = *scratch ? lk->batch : 0;
			if (!*scratch)
				return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
		}
		pf_which_init(&w, &lk->run);
		ret = pf_which_step(&w, lk->run.start.gstep + a / lk->batch, epoch, &in_epoch,
				    *scratch, err);
		pf_which_release(&w);
		if (ret < 0)
			return ret;
		*rec = (*scratch)[a % lk->batch];
		return 0;
	}
	return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0, "no such row of the source");
}

int64_t pf_mix_records_of(const pf_mixture *m, uint64_t step, pf_record_ref *out, size_t cap,
			  pf_error *err)
{
	uint64_t *before, *taken;
	pf_plan_record *scratch = NULL;
	uint32_t scratch_len = 0, pcb = m->topo.per_core_batch;
	sched sc;
	int ret;

	if (!m->courses)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "the mixture has no plan");
	if (step < m->which_step0 || step >= m->rule_end)
		return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
				    "step %llu is not a step of this run: its steps are global "
				    "steps %llu to %llu (its stop rule's end)",
				    (unsigned long long)step, (unsigned long long)m->which_step0,
				    (unsigned long long)(m->rule_end ? m->rule_end - 1 : 0));
	if (cap < m->host_batch)
		return m->host_batch;
	before = pf_calloc(m->n, sizeof(*before));
	taken = pf_calloc(m->n, sizeof(*taken));
	ret = before && taken ? sched_init(&sc, m) : -ENOMEM;
	if (ret == 0) {
		rows_between(&sc, m->which_step0, step, before, true);
		for (uint32_t j = 0; j < m->host_batch && ret == 0; j++) {
			size_t k = sc.rs[j];
			pf_plan_record rec = { 0, 0 };
			uint32_t epoch = 0;

			ret = source_record(&m->courses[k], before[k] + taken[k]++, &rec, &epoch,
					    &scratch, &scratch_len, err);
			if (ret == 0)
				out[j] = (pf_record_ref){
					.epoch = epoch, .step = step, .core = j / pcb, .row = j % pcb,
					.source = (uint32_t)k, .file = rec.file, .record = rec.record,
				};
		}
	}
	if (before && taken)
		sched_release(&sc);
	pf_free(before);
	pf_free(taken);
	pf_free(scratch);
	if (ret == -ENOMEM && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory");
	return ret < 0 ? ret : (int64_t)m->host_batch;
}

const char *pf_mix_file(const pf_mixture *m, uint32_t source, uint32_t file)
{
	const pf_dataset *ds;

	/* The course's dataset: its loader of whole epochs', which lives as
	 * long as the mixture (a bridge is freed mid-run). */
	if (!m->courses || source >= m->n || !m->courses[source].nlinks)
		return NULL;
	ds = m->courses[source].links[m->courses[source].nlinks - 1].run.o.ds;
	return file < ds->nfiles ? ds->paths[file] : NULL;
}
