/* SPDX-License-Identifier: Apache-2.0 */
/* Mixtures (pf_loader_config.sources): a loader over several sources,
 * each read by a loader of its own (its dataset, plan, shuffle, epochs
 * and pipeline; a source that runs out starts its next epoch, with a new
 * permutation when shuffling), whose rows go into the mixture's batches
 * in the order its schedule says: which source each row of each step
 * takes its next record from.  The schedule is a pure function of (the
 * shares, seed, host batch, step): every host deals the same counts of
 * its batch to the sources, so every host takes as much of each source
 * as the others and stops at the same step.  Not here: anything of
 * reading (the sources' loaders do all of it); the batches and how rows
 * get into them (mixture_batch.c); its checkpoints (mixture_state.c);
 * the checkpoint's encoding (state.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixture_internal.h"

/* ------------------------------------------------------------------ */
/* Checking the config                                                  */

static int check_sources(const pf_loader_config *cfg, pf_error *err)
{
	double total = 0;

	if (cfg->npaths)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "a mixture takes its paths from its sources: paths must be "
				    "empty (plain paths are one source of weight 1)");
	if ((unsigned)cfg->mix > PF_MIX_SAMPLE)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "mix %u is neither PF_MIX_STRATIFIED (0) nor PF_MIX_SAMPLE (1)",
				    (unsigned)cfg->mix);
	if ((unsigned)cfg->mix_stop > PF_MIX_STOP_FIRST_EXHAUSTED)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "mix_stop %u is neither PF_MIX_STOP_FIRST_SOURCE (0) nor "
				    "PF_MIX_STOP_FIRST_EXHAUSTED (1)", (unsigned)cfg->mix_stop);
	if (cfg->nsources > 256)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%zu sources, over the limit of 256", cfg->nsources);
	for (size_t i = 0; i < cfg->nsources; i++) {
		const pf_loader_source *s = &cfg->sources[i];
		const char *name = s->name ? s->name : "(unnamed)";

		if (s->name && (!*s->name || strlen(s->name) >= 64))
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "source %zu: a name is 1 to 63 bytes ('%.80s')", i,
					    s->name);
		if (!(s->weight > 0) || !isfinite(s->weight))
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "source '%s': weight %g is not a finite number above 0",
					    name, s->weight);
		if (!s->npaths || !s->paths)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "source '%s' names no files", name);
		for (size_t j = 0; s->name && j < i; j++)
			if (cfg->sources[j].name && !strcmp(cfg->sources[j].name, s->name))
				return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
						    "two sources are named '%s' (sources %zu and %zu)",
						    s->name, j, i);
		total += s->weight;
	}
	if (!isfinite(total))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the sources' weights sum to %g", total);
	return 0;
}

/* The shares in 2^-32, summing to ONE exactly (the largest takes the
 * rounding), the same on every host: the same doubles in the same
 * order. */
static void fix_shares(pf_mixture *m)
{
	double total = 0;
	uint64_t sum = 0;
	size_t big = 0;

	for (size_t k = 0; k < m->n; k++)
		total += m->src[k].weight;
	for (size_t k = 0; k < m->n; k++) {
		m->src[k].q = (uint64_t)floor(m->src[k].weight / total * (double)ONE);
		if (m->src[k].q == 0)
			m->src[k].q = 1;
		sum += m->src[k].q;
		if (m->src[k].q > m->src[big].q)
			big = k;
	}
	m->src[big].q += ONE - sum;	/* sum is within n of ONE */
}

/* ------------------------------------------------------------------ */
/* The schedule                                                         */

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* Step `at`'s counts of a host batch (every host's the same), then
 * advance to the next step: each source gets floor(b q_k) and the R rows
 * left go to the R sources with the largest deficit (ties: the lower
 * index), whose deficits then drop by one record.  Per step a count is
 * the floor or the ceiling of the exact share; over steps a source's
 * total stays within about a record of t b q_k.  Every host dealing the
 * same counts keeps each host's use of each source the same, so that the
 * stop rules hold on every host at the same step. */
static void schedule_step(pf_mixture *m)
{
	uint64_t left = m->host_batch;

	for (size_t k = 0; k < m->n; k++) {
		pf_u128 exact = (pf_u128)m->host_batch * m->src[k].q;

		m->count[k] = (uint64_t)(exact >> FIX);
		m->deficit[k] += (int64_t)(uint64_t)(exact & (ONE - 1));
		left -= m->count[k];
		m->order[k] = k;
	}
	/* The few sources: a selection by insertion. */
	for (size_t i = 1; i < m->n; i++)
		for (size_t j = i; j > 0 && m->deficit[m->order[j]] > m->deficit[m->order[j - 1]];
		     j--) {
			uint64_t t = m->order[j];

			m->order[j] = m->order[j - 1];
			m->order[j - 1] = t;
		}
	for (size_t i = 0; i < left && i < m->n; i++) {
		m->count[m->order[i]]++;
		m->deficit[m->order[i]] -= (int64_t)ONE;
	}
	m->cum[0] = 0;
	for (size_t k = 0; k < m->n; k++)
		m->cum[k + 1] = m->cum[k] + m->count[k];
	m->at++;
}

/* The schedule from step 0 up to step t (its counts in m->count). */
void pf_mix_schedule_seek(pf_mixture *m, uint64_t t)
{
	if (m->at > t + 1 || m->at == 0) {
		memset(m->deficit, 0, m->n * sizeof(*m->deficit));
		m->at = 0;
	}
	while (m->at <= t)
		schedule_step(m);
}

/* The source of row j (0 .. b-1) of step t (whose counts m holds). */
size_t pf_mix_slot_source(const pf_mixture *m, uint64_t t, uint64_t j)
{
	uint64_t v;
	size_t k = 0;

	if (m->mode == PF_MIX_SAMPLE) {
		uint64_t u = pf_mix64(pf_mix64(m->seed ^ 0x6d6978ull) ^ pf_mix64(t) ^
				      pf_mix64(j ^ ((uint64_t)m->topo.host_index << 32))) >> FIX;
		uint64_t c = 0;

		for (k = 0; k + 1 < m->n; k++) {
			c += m->src[k].q;
			if (u < c)
				break;
		}
		return k;
	}
	/* A step's rows take the sources spread out, not in runs: row j is
	 * the source whose range of the step's counts holds (j x stride +
	 * offset) mod b, stride coprime with b. */
	v = (uint64_t)(((pf_u128)j * m->stride + pf_mix64(m->seed ^ t)) % m->host_batch);
	while (k + 1 < m->n && v >= m->cum[k + 1])
		k++;
	return k;
}

void pf_mix_step_sources(const pf_mixture *m, uint64_t t, uint8_t *rs)
{
	uint64_t b = m->host_batch, v;

	if (m->mode == PF_MIX_SAMPLE) {
		for (uint64_t j = 0; j < b; j++)
			rs[j] = (uint8_t)pf_mix_slot_source(m, t, j);
		return;
	}
	/* pf_mix_slot_source()'s (j x stride + offset) mod b, a row after
	 * another: stride <= b. */
	v = pf_mix64(m->seed ^ t) % b;
	for (uint64_t j = 0; j < b; j++) {
		size_t k = 0;

		while (k + 1 < m->n && v >= m->cum[k + 1])
			k++;
		rs[j] = (uint8_t)k;
		v += m->stride;
		v = v >= b ? v - b : v;
	}
}

/* Records of source k in steps [0, t) on each host: stratified, exact;
 * sample: the expected count, rounded down (a host's own draws may take
 * a few more). */
uint64_t pf_mix_records_before(pf_mixture *m, size_t k, uint64_t t)
{
	uint64_t n = 0;

	if (m->mode == PF_MIX_SAMPLE)
		return (uint64_t)(((pf_u128)t * m->host_batch * m->src[k].q) >> FIX);
	memset(m->deficit, 0, m->n * sizeof(*m->deficit));
	m->at = 0;
	for (uint64_t s = 0; s < t; s++) {
		schedule_step(m);
		n += m->count[k];
	}
	return n;
}

uint64_t pf_mix_last_step_from(pf_mixture *m, size_t k, uint64_t t0, uint64_t limit)
{
	uint64_t base = pf_mix_records_before(m, k, t0), lo = t0, hi;

	/* t steps take within a record of t b q_k of it: the answer is below
	 * t0 + (limit + 2) / (b q_k) + 2 (the records are counted, not
	 * assumed, by bisection). */
	hi = t0 + (uint64_t)(((pf_u128)(limit + 2) << FIX) /
			     ((pf_u128)m->host_batch * m->src[k].q)) + 2;
	/* Past 2^32 steps: no end (epochs without end, as loadbench --steps
	 * asks, were counted step by step for hours). */
	if (hi - t0 > ((uint64_t)1 << 32) || hi < t0)
		return PF_MIX_NO_END;
	if (m->mode == PF_MIX_STRATIFIED) {
		/* Stratified counts come a step after another: one pass,
		 * where a bisection counted from step 0 ~32 times (0.3 s of
		 * a create at 10^6 steps). */
		uint64_t n = 0;

		for (; lo < hi; lo++) {
			pf_mix_schedule_seek(m, lo);
			if (n + m->count[k] > limit)
				break;
			n += m->count[k];
		}
		return lo;
	}
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;

		if (pf_mix_records_before(m, k, mid) - base <= limit)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* The step after the last: the last whose records of source k all lie
 * in its first `epochs` epochs, for the first source (or for every
 * source when the first to run out ends the run). */
static uint64_t last_step(pf_mixture *m, size_t k, uint64_t epochs)
{
	return pf_mix_last_step_from(m, k, 0, m->src[k].epoch_records * epochs);
}

/* ------------------------------------------------------------------ */
/* Creating                                                             */

void pf_mix_source_error(pf_error *err, const char *name, const pf_error *cause)
{
	char msg[sizeof(err->msg)];

	*err = *cause;
	snprintf(msg, sizeof(msg), "source '%s': %.*s", name, (int)sizeof(msg) - 80,
		 cause->msg);
	memcpy(err->msg, msg, sizeof(msg));
}

uint32_t pf_mix_batch(const pf_mixture *m, size_t k)
{
	/* Its share of MIX_BATCHES host batches, rounded: few enough of its
	 * batches a step that a batch's own cost (the call, the state kept
	 * before it) stays small beside its rows'. */
	uint64_t rows = ((pf_u128)m->host_batch * MIX_BATCHES * m->src[k].q + ONE / 2) >> FIX;

	return (uint32_t)(rows ? rows : 1);
}

uint32_t pf_mix_fit_batch(uint64_t records, uint32_t hosts, uint32_t cap)
{
	/* An epoch of MIX_EPOCH_PARTS global batches at least, so that what
	 * it drops (under one global batch) is under 1/MIX_EPOCH_PARTS of it;
	 * a source of fewer records than that many a host: batches of one,
	 * fewer than one record a host dropped. */
	uint64_t rows = records / ((uint64_t)MIX_EPOCH_PARTS * (hosts ? hosts : 1));

	rows = rows < cap ? rows : cap;
	return (uint32_t)(rows ? rows : 1);
}

uint32_t pf_mix_bridge_batch(const pf_mixture *m, size_t k)
{
	uint32_t of = m->bridge_rows && m->bridge_rows < m->host_batch ? m->bridge_rows
								       : m->host_batch;
	uint64_t rows = ((pf_u128)of * m->src[k].q) >> FIX;

	return (uint32_t)(rows ? rows : 1);
}

int pf_mix_open_loader(pf_mixture *m, const pf_loader_config *cfg, size_t k,
		       const pf_state_blob *blobs, size_t nblobs, uint32_t batch,
		       uint32_t epochs, unsigned parts, pf_pipe **out, pf_error *err)
{
	mix_source *s = &m->src[k];
	const pf_loader_source *ls = &cfg->sources[k];
	pf_loader_config sc = *cfg;
	unsigned lookahead = 0;
	pf_error e;
	int ret;

	sc.sources = NULL;
	sc.nsources = 0;
	sc.source_feature = false;
	sc.paths = ls->paths;
	sc.npaths = ls->npaths;
	sc.cores_per_host = 1;
	sc.per_core_batch = batch ? batch : pf_mix_batch(m, k);
	sc.epochs = epochs;
	sc.max_steps = 0;
	sc.skip_steps = 0;	/* the mixture's steps: each source's rows skipped */
	sc.resume = nblobs ? blobs : NULL;
	sc.nresume = nblobs;
	sc.memory_budget = (cfg->memory_budget ? cfg->memory_budget : PF_LOADER_BUDGET_DEFAULT) /
			   m->n / parts;
	sc.prefetch = 0;
	/* Its share of the shuffle window: the sources' windows add up to
	 * the one asked for (a batch draws from all of them), and so does
	 * the memory their rows take. */
	{
		uint64_t w = cfg->shuffle_window ? cfg->shuffle_window : PF_LOADER_WINDOW_DEFAULT;

		w = ((pf_u128)w * s->q + ONE / 2) >> FIX;
		sc.shuffle_window = (uint32_t)(w ? w : 1);
	}
	/* The mixture's pool's threads (each a worker in every source's
	 * loader); without the pool, the threads asked for shared by share
	 * (each at least one); auto: each source's loader picks its own. */
	s->pooled = s->gated && !m->no_pool;
	if (s->pooled) {
		sc.threads = m->pool_threads;
	} else if (cfg->threads) {
		uint64_t t = ((pf_u128)cfg->threads * s->q + ONE - 1) >> FIX;

		sc.threads = (unsigned)(t ? t : 1);
	}
	/* Its share of the segments the mixture reads ahead, a loader's
	 * (one for each thread, and two), at least one: three sources each
	 * reading as far ahead as a loader held (and faulted in) over 1,022
	 * steps of rows in flight, against 536 so, and 515 for one loader
	 * of the same records (tools/bench/mixture).  The order of the
	 * records does not depend on it. */
	if (!m->no_direct) {
		uint64_t w = (cfg->threads ? cfg->threads : pf_cpus()) + 2;

		lookahead = (unsigned)(((pf_u128)w * s->q) >> FIX);
		lookahead = lookahead ? lookahead : 1;
	}
	pf_error_clear(&e);
	/* A source's loader of whole epochs opened once the batches are
	 * there: its rows go straight into them from the first. */
	/* Held (skip_steps): reading nothing until its start is moved
	 * (mixture_skip.c). */
	ret = pf_pipe_create_opts(out, &sc, &(pf_pipe_opts){
		.spec = m->spec, .lspec = m->lspec, .lookahead = lookahead,
		.sink = m->started && parts == 1 && !m->no_direct ? &m->sinks[k].sink : NULL,
		.fit = batch ? NULL : pf_mix_fit_batch, .gated = s->gated || m->hold,
		.pooled = s->pooled, .source = true }, &e);
	if (ret < 0)
		pf_mix_source_error(err, s->name, &e);
	return ret;
}

/* Source k's loader of whole epochs without end: the mixture's topology
 * with one core, resumed from blob when there is one, in batches of
 * `batch` rows (0: fitted to its records). */
int pf_mix_open_source(pf_mixture *m, const pf_loader_config *cfg, size_t k,
		       const void *blob, size_t blob_len, uint32_t batch, pf_error *err)
{
	mix_source *s = &m->src[k];
	pf_state_blob sb = { blob, blob_len };
	int ret;

	s->gated = true;
	ret = pf_mix_open_loader(m, cfg, k, &sb, blob ? 1 : 0, batch, UINT32_MAX, 1, &s->l, err);

	if (ret < 0)
		return ret;
	s->sub_batch = s->whole_batch = s->l->topo.per_core_batch;
	s->epoch_records = pf_pipe_steps_per_epoch(s->l) * s->sub_batch;
	return 0;
}

static uint64_t mix_digest(const pf_mixture *m, const pf_loader_config *cfg)
{
	uint64_t d = pf_mix64(m->n ^ ((uint64_t)cfg->mix << 8) ^ ((uint64_t)cfg->mix_stop << 16) ^
			      ((uint64_t)cfg->source_feature << 24));

	/* Weighing tokens, the shares follow from the data after the sources
	 * are open: the weights and the unit are what the state must agree
	 * on (records: the shares, as states saved before the unit kept). */
	if (m->tokens)
		d = pf_mix64(d ^ 0x746f6b656e73ull);	/* "tokens" */
	for (size_t k = 0; k < m->n; k++) {
		if (m->tokens) {
			uint64_t bits;

			memcpy(&bits, &m->src[k].weight, sizeof(bits));
			d = pf_mix64(d ^ bits);
		} else {
			d = pf_mix64(d ^ m->src[k].q);
		}
		for (const char *c = m->src[k].name; *c; c++)
			d = pf_mix64(d ^ (uint8_t)*c);
	}
	return d;
}

void pf_mixture_free(pf_mixture *m)
{
	if (!m)
		return;
	/* The pool's threads work in the pooled loaders: halted, then
	 * joined, before those are freed. */
	for (size_t k = 0; m->pool.made && k < m->n; k++)
		if (m->src[k].pooled && m->src[k].l)
			pf_pipe_halt(m->src[k].l);
	pf_decode_pool_stop(&m->pool);
	pf_free(m->pool_members);
	pf_mix_free_courses(m);
	for (size_t k = 0; m->src && k < m->n; k++) {
		if (m->src[k].cur)
			pf_pipe_release(m->src[k].l, m->src[k].cur);
		pf_pipe_free(m->src[k].l);
		pf_pipe_free(m->src[k].next);
		pf_mix_free_pending(&m->src[k]);
		pf_mix_free_merged(&m->src[k]);
		pf_free(m->src[k].before);
	}
	/* After the sources' loaders: their decoders write into the slots. */
	pf_mix_free_slots(m);
	pf_free(m->src);
	pf_region_table_free(m->own_regions);
	pf_free(m->deficit);
	pf_free(m->count);
	pf_free(m->cum);
	pf_free(m->order);
	pf_free(m);
}

/* Start the decode pool of the sources' loaders of whole epochs (those
 * pooled), then let them read, each no further than the
 * batches this run takes from it (the rows of steps [step0, end), and
 * those of the batch it is inside taken before a restore): left
 * unbounded, each read and decoded (into its own batches, faulted in for
 * it) its read-ahead past the run's last step: 2.6% of the instructions of a
 * 2-epoch run of tools/bench/mixture.  Stratified, the counts are
 * exact; sampled, a host's draws are not counted ahead: no bound. */
static int open_gates(pf_mixture *m, pf_error *err)
{
	bool bound = m->mode == PF_MIX_STRATIFIED && !m->no_limit && m->end < PF_MIX_NO_END;
	uint64_t *at0 = bound ? pf_calloc(m->n, sizeof(*at0)) : NULL;
	size_t members = 0;
	int ret;

	m->pool_members = pf_calloc(m->n, sizeof(*m->pool_members));
	if (!m->pool_members) {
		pf_free(at0);
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	}
	for (size_t k = 0; k < m->n; k++)
		if (m->src[k].pooled && m->src[k].gated)
			m->pool_members[members++] = m->src[k].l;
	if (members) {
		ret = pf_decode_pool_start(&m->pool, m->pool_members, members, m->pool_threads,
					   err);
		if (ret < 0) {
			pf_free(at0);
			return ret;
		}
	}

	if (at0) {
		/* One pass of the schedule up to the end for all sources. */
		memset(m->deficit, 0, m->n * sizeof(*m->deficit));
		m->at = 0;
		for (size_t k = 0; k < m->n; k++)
			m->src[k].limit_rows = 0;
		for (uint64_t t = 0; t < m->end; t++) {
			if (t == m->step0)
				for (size_t k = 0; k < m->n; k++)
					at0[k] = m->src[k].limit_rows;
			pf_mix_schedule_seek(m, t);
			for (size_t k = 0; k < m->n; k++)
				m->src[k].limit_rows += m->count[k];
		}
		if (m->step0 >= m->end)
			for (size_t k = 0; k < m->n; k++)
				at0[k] = m->src[k].limit_rows;
	}
	for (size_t k = 0; k < m->n; k++) {
		mix_source *s = &m->src[k];
		uint64_t batches = 0;

		if (!s->gated)
			continue;
		if (at0) {
			uint64_t rows = s->limit_rows - at0[k] + s->cur_row;

			batches = (rows + s->sub_batch - 1) / s->sub_batch;
			batches = batches ? batches : 1;
		}
		pf_pipe_open_gate(s->l, batches);
		s->gated = false;
	}
	pf_free(at0);
	return 0;
}

/* The batches: the features of the first source's spec. */
static int make_batches(pf_mixture *m, const pf_loader_config *cfg, pf_error *err)
{
	const pf_spec *spec = pf_pipe_spec(m->src[0].l);

	m->features = spec->n;
	return pf_mix_make_slots(m, spec, (cfg->prefetch ? cfg->prefetch : 2) + 1,
				 cfg->memory_budget ? cfg->memory_budget : PF_LOADER_BUDGET_DEFAULT,
				 err);
}

/* Every source open: the room above's look at them (opts->opened), and a
 * mixture weighing tokens takes its shares from their records' mean
 * lengths: source k's rows w_k / mean_k of the sum. */
static int opened(pf_mixture *m, const pf_mix_opts *o, pf_error *err)
{
	double *mean;
	int ret;

	if (!o || !o->opened)
		return 0;
	mean = pf_calloc(m->n, sizeof(*mean));
	if (!mean)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	ret = o->opened(o->ctx, m, mean, err);
	if (ret == 0 && m->tokens) {
		/* The shares from w_k / mean_k; the weights stay as given
		 * (the report says them). */
		for (size_t k = 0; k < m->n; k++) {
			double w = m->src[k].weight;

			m->src[k].weight = w / (mean[k] > 0 ? mean[k] : 1.0);
			mean[k] = w;
		}
		fix_shares(m);
		for (size_t k = 0; k < m->n; k++)
			m->src[k].weight = mean[k];
	}
	pf_free(mean);
	return ret;
}

int pf_mixture_create(pf_mixture **out, const pf_loader_config *cfg, const pf_mix_opts *o,
		      pf_error *err)
{
	pf_mixture *m;
	pf_mix_state st = { 0 };
	uint64_t epochs = cfg->epochs ? cfg->epochs : 1;
	bool restored = false;
	int ret = check_sources(cfg, err);

	*out = NULL;
	if (ret < 0)
		return ret;
	m = pf_calloc(1, sizeof(*m));
	if (!m)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	m->face.ops = &pf_mixture_ops;
	m->spec = o ? o->spec : NULL;
	m->lspec = o ? o->lspec : NULL;
	m->inner_index = o && o->inner_index;
	m->bridge_rows = o ? o->bridge_rows : 0;
	m->tokens = cfg->mix_unit == PF_MIX_UNIT_TOKENS;
	m->start_ns = pf_now_ns();
	pf_mix_batch_env(m);
	m->pool_threads = cfg->threads ? cfg->threads : pf_cpus();
	m->n = cfg->nsources;
	m->mode = cfg->mix;
	m->seed = cfg->seed;
	m->source_feature = cfg->source_feature || (o && o->source_ids);
	if ((unsigned)cfg->mix_unit > PF_MIX_UNIT_TOKENS || (m->tokens && !(o && o->opened))) {
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   (unsigned)cfg->mix_unit > PF_MIX_UNIT_TOKENS
					   ? "mix_unit %u is neither PF_MIX_UNIT_RECORDS (0) nor "
					     "PF_MIX_UNIT_TOKENS (1)"
					   : "mix_unit %u (tokens) weighs a packed mixture's tokens: "
					     "give a pack_length, or weigh records",
				   (unsigned)cfg->mix_unit);
		goto fail;
	}
	m->hold = cfg->skip_steps != 0 || (o && o->skip);
	m->topo = (pf_topology){ cfg->host_index, cfg->num_hosts ? cfg->num_hosts : 1,
				 cfg->cores_per_host ? cfg->cores_per_host : 1,
				 cfg->per_core_batch };
	m->host_batch = m->topo.cores * m->topo.per_core_batch;
	m->src = pf_calloc(m->n, sizeof(*m->src));
	m->deficit = pf_calloc(m->n, sizeof(*m->deficit));
	m->count = pf_calloc(m->n, sizeof(*m->count));
	m->cum = pf_calloc(m->n + 1, sizeof(*m->cum));
	m->order = pf_calloc(m->n, sizeof(*m->order));
	if (!m->src || !m->deficit || !m->count || !m->cum || !m->order) {
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
		goto fail;
	}
	for (size_t k = 0; k < m->n; k++) {
		m->src[k].weight = cfg->sources[k].weight;
		snprintf(m->src[k].name, sizeof(m->src[k].name), "%s",
			 cfg->sources[k].name ? cfg->sources[k].name : "");
		if (!cfg->sources[k].name)
			snprintf(m->src[k].name, sizeof(m->src[k].name), "source%zu", k);
	}
	fix_shares(m);
	m->digest = mix_digest(m, cfg);
	/* The largest stride below 0.62 b coprime with b. */
	m->stride = (uint64_t)m->host_batch * 618 / 1000;
	while (m->stride > 1 && gcd(m->stride, m->host_batch) != 1)
		m->stride--;
	if (m->stride == 0)
		m->stride = 1;
	if (cfg->nresume && !cfg->resume) {
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "%zu states to resume from, and no array of them", cfg->nresume);
		goto fail;
	}
	if (cfg->nresume) {
		/* This host's own state on the topology it was saved with: the
		 * run goes on as if never stopped; else every old host's state,
		 * merged (elastic). */
		for (size_t i = 0; i < cfg->nresume && ret == 0; i++) {
			pf_mix_state_release(&st);
			ret = pf_mix_state_decode(&st, cfg->resume[i].data, cfg->resume[i].len,
						  err);
			if (ret == 0 && (st.num_hosts != m->topo.num_hosts ||
					 st.cores != m->topo.cores ||
					 st.per_core_batch != m->topo.per_core_batch ||
					 (o && o->elastic))) {
				ret = pf_mix_elastic(m, cfg, err);
				break;
			}
			if (ret == 0 && st.host_index == m->topo.host_index) {
				ret = pf_mix_restore(m, cfg, &st, err);
				restored = true;
				break;
			}
			if (ret == 0 && i + 1 == cfg->nresume)
				ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
						   "the states are of this topology (%u hosts, %u x "
						   "%u), but none is host %u's", m->topo.num_hosts,
						   m->topo.cores, m->topo.per_core_batch,
						   m->topo.host_index);
		}
		if (ret < 0)
			goto fail;
	} else if ((o && o->opened) || cfg->skip_steps || cfg->plan_only) {
		/* Every source open before the batches: the room above looks
		 * at them first, and may change the shares the batches'
		 * first steps are dealt by; or the batches after the skip
		 * (mixture_skip.c): their records' places follow from where
		 * it ends. */
		for (size_t k = 0; k < m->n && ret == 0; k++)
			ret = pf_mix_open_source(m, cfg, k, NULL, 0, 0, err);
		if (ret < 0)
			goto fail;
	} else {
		/* The first source, then the batches, so that the others'
		 * decoders write into them from their first record on (what
		 * they wrote into their own batches before would be faulted
		 * in for nothing, and copied). */
		ret = pf_mix_open_source(m, cfg, 0, NULL, 0, 0, err);
		if (ret == 0)
			ret = make_batches(m, cfg, err);
		if (ret == 0) {
			m->end = UINT64_MAX;	/* known once every source is open */
			pf_mix_start_batches(m);
		}
		for (size_t k = 1; k < m->n && ret == 0; k++)
			ret = pf_mix_open_source(m, cfg, k, NULL, 0, 0, err);
		if (ret < 0)
			goto fail;
	}
	ret = opened(m, o, err);
	if (ret < 0)
		goto fail;
	if (!m->slots && !cfg->plan_only) {
		ret = make_batches(m, cfg, err);
		if (ret < 0)
			goto fail;
	}
	/* The steps of the run: the stop rule's (every host's the same);
	 * then max_steps of this run. */
	if (m->rule_end_known) {
		m->end = m->rule_end;
	} else if (cfg->mix_stop == PF_MIX_STOP_FIRST_EXHAUSTED) {
		m->end = UINT64_MAX;
		for (size_t k = 0; k < m->n; k++) {
			uint64_t e = last_step(m, k, 1);

			m->end = e < m->end ? e : m->end;
		}
	} else {
		m->end = last_step(m, 0, epochs);
	}
	m->rule_end = m->end;
	pf_mix_regions(m, cfg);
	/* Each source's course from the run's first step, then moved on by
	 * skip_steps before any reads (mixture_skip.c). */
	ret = pf_mix_keep_courses(m);
	if (ret == 0 && cfg->skip_steps)
		ret = pf_mix_skip(m, cfg->skip_steps, err);
	if (ret == 0 && !cfg->skip_steps && o && o->skip) {
		/* The room above's steps: the mixture's it says. */
		uint64_t n = 0;

		ret = o->skip(o->ctx, m, &n, err);
		if (ret == 0 && n)
			ret = pf_mix_skip(m, n, err);
	}
	if (ret < 0)
		goto fail;
	if (cfg->max_steps && m->step0 + cfg->max_steps < m->end)
		m->end = m->step0 + cfg->max_steps;
	m->step = m->step0;
	if (cfg->plan_only)
		goto done;	/* a plan alone: no pool, no batch */
	if (o && o->ready) {
		ret = o->ready(o->ctx, m, err);
		if (ret < 0)
			goto fail;
	}
	ret = open_gates(m, err);
	if (ret < 0)
		goto fail;
	pf_mix_release_held(m);
	if (m->skipped)
		ret = pf_mix_retake_skipped(m, err);
	else if (restored)
		ret = pf_mix_retake(m, &st, err);
	if (ret < 0)
		goto fail;
	if (!m->started)
		pf_mix_start_batches(m);
done:
	m->create_ns = pf_now_ns() - m->start_ns;
	pf_mix_state_release(&st);
	*out = m;
	return 0;
fail:
	pf_mix_state_release(&st);
	pf_mixture_free(m);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Figures                                                              */

void pf_mixture_metrics(const pf_mixture *m, pf_loader_metrics *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t k = 0; k < m->n; k++) {
		pf_loader_metrics s;

		pf_pipe_metrics(m->src[k].l, &s);
		out->bytes_read += s.bytes_read;
		out->bytes_decompressed += s.bytes_decompressed;
		out->records_per_epoch += s.records_per_epoch;
		out->io_requests += s.io_requests;
		out->memory_bytes += s.memory_bytes;
		out->io.busy_ns += s.io.busy_ns;
		out->io.wait_ns += s.io.wait_ns;
		out->decode.busy_ns += s.decode.busy_ns;
		out->decode.wait_ns += s.decode.wait_ns;
		if (!m->src[k].pooled)
			out->decode_threads += s.decode_threads;
		out->corrupt_drops += s.corrupt_drops;
		out->corrupt_records += s.corrupt_records;
		out->holes += s.holes;
		out->dataset_files += s.dataset_files;
		out->files_opened += s.files_opened;
		if (!out->io_backend)
			out->io_backend = s.io_backend;
	}
	if (m->pool.nthreads)
		out->decode_threads += m->pool.nthreads;
	out->memory_bytes += m->mem_len;
	out->steps = m->step - m->step0;
	out->records = out->steps * m->host_batch;
	out->steps_per_epoch = m->end;
	out->create_ns = m->create_ns;
	out->first_batch_ns = m->first_ns;
	out->next_wait_ns = m->next_wait_ns;
	memcpy(out->next_hist, m->next_hist, sizeof(out->next_hist));
	out->skipped_steps = m->skipped;
	out->skipped_from = m->skipped_from;
	out->skipped_records = m->skipped * m->host_batch;
}

size_t pf_mixture_sources(const pf_mixture *m)
{
	return m->n;
}

void pf_mixture_source_metrics(const pf_mixture *m, size_t k, pf_source_metrics *out)
{
	const mix_source *s = &m->src[k];
	uint64_t all = (m->step - m->step0) * m->host_batch;
	pf_loader_metrics lm;

	double total = 0;

	/* Weighing tokens, the share asked is the weight's (the records'
	 * share, q, follows from it and the data). */
	for (size_t j = 0; m->tokens && j < m->n; j++)
		total += m->src[j].weight;
	pf_pipe_metrics(s->l, &lm);
	*out = (pf_source_metrics){
		.name = s->name, .weight = s->weight,
		.share = m->tokens ? s->weight / total : (double)s->q / (double)ONE,
		.records = s->taken, .realised_share = all ? (double)s->taken / (double)all : 0,
		.epochs_started = s->any ? s->epoch + 1 : 0, .bytes_read = lm.bytes_read,
		.bytes_decompressed = lm.bytes_decompressed,
		.dataset_records = lm.records_per_epoch, .dataset_files = lm.dataset_files,
		.seconds = (double)(pf_now_ns() - m->start_ns) / 1e9,
		.region = s->region, .cross_region = s->cross_region,
	};
}

void pf_mixture_tuning(const pf_mixture *m, pf_tuning *out)
{
	pf_pipe_tuning(m->src[0].l, out);
}

const pf_spec *pf_mixture_spec(const pf_mixture *m)
{
	return pf_pipe_spec(m->src[0].l);
}

const pf_pipe *pf_mixture_first(const pf_mixture *m)
{
	return m->src[0].l;
}

int pf_mixture_series(const pf_mixture *m, pf_series **out)
{
	return pf_pipe_series(m->src[0].l, out);
}

uint64_t pf_mixture_steps_left(const pf_mixture *m)
{
	return m->end > m->step ? m->end - m->step : 0;
}

uint64_t pf_mixture_steps(const pf_mixture *m)
{
	return m->end;
}

/* ------------------------------------------------------------------ */
/* For the room above: a packed mixture's                               */

pf_pipe *pf_mixture_source(const pf_mixture *m, size_t k)
{
	return m->src[k].l;
}

void pf_mixture_taken(const pf_mixture *m, uint64_t *taken)
{
	for (size_t k = 0; k < m->n; k++)
		taken[k] = m->src[k].used;
}

uint64_t pf_mixture_course_step(const pf_mixture *m)
{
	return m->which_step0;
}

uint64_t pf_mixture_loader_base(const pf_mixture *m, size_t k)
{
	return m->src[k].lbase;
}

uint64_t pf_mixture_first_step(const pf_mixture *m)
{
	return m->step0;
}

uint64_t pf_mixture_end(const pf_mixture *m)
{
	return m->end;
}
