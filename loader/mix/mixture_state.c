/* SPDX-License-Identifier: Apache-2.0 */
/* A mixture's checkpoints: a mixture resumed from its state (each source
 * from its loader's state, in the batches it was saved with, or inside
 * the bridge an elastic resume began) and the batch each source was
 * inside taken again; its state saved; and, for a packed mixture, the
 * marks of where each source is as the packer takes its groups, from
 * which a state of that moment is made later (pf_mixture_state_at()).
 * Not here: the schedule and creating a mixture (mixture.c), the
 * elastic resume's merge and bridges (mixture_elastic.c), the state's
 * encoding (plan/state.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixture_internal.h"

/* The batch of source k's loader of whole epochs a state was saved with:
 * the state says it, or, saved before batches were fitted to the
 * sources' records, pf_mix_batch(). */
static uint32_t saved_batch(const pf_mixture *m, size_t k, const pf_mix_source_state *ss)
{
	return ss->whole_batch ? ss->whole_batch : pf_mix_batch(m, k);
}

/* ------------------------------------------------------------------ */
/* Checkpoints                                                          */

/* Source k inside the bridge an elastic resume began (its state the
 * bridge loader's): the bridge again, and the loader of its next epochs
 * beside it, each with half the source's budget. */
static int open_bridge(pf_mixture *m, const pf_loader_config *cfg, size_t k,
		       const pf_mix_source_state *ss, pf_error *err)
{
	mix_source *s = &m->src[k];
	pf_state_blob sb = { ss->state, ss->state_len };
	pf_topology t = { m->topo.host_index, m->topo.num_hosts, 1, saved_batch(m, k, ss) };
	uint8_t *fresh = NULL;
	size_t flen = 0;
	int ret;

	/* Its bridges' batch: the per-step share, over the epochs of a
	 * chain (mixture_elastic.c). */
	if (ss->bridge_batch > pf_mix_bridge_batch(m, k) || ss->npending > MIX_CHAIN_MAX ||
	    ss->bridge_epoch >= UINT32_MAX - MIX_CHAIN_MAX - 1 ||
	    t.per_core_batch > pf_mix_batch(m, k))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "source '%s': the state's bridge of batches of %u at epoch %u "
				    "(and %zu after it, then batches of %u) is not this mixture's "
				    "(batches of %u and %u at most)", s->name, ss->bridge_batch,
				    ss->bridge_epoch, ss->npending, t.per_core_batch,
				    pf_mix_bridge_batch(m, k), pf_mix_batch(m, k));
	ret = pf_mix_open_loader(m, cfg, k, &sb, 1, ss->bridge_batch, ss->bridge_epoch + 1,
				 2 + (unsigned)ss->npending, &s->l, err);
	for (size_t i = 0; i < ss->npending && ret == 0; i++) {
		pf_pipe *b = NULL;

		sb = (pf_state_blob){ ss->pending[i], ss->pending_len[i] };
		ret = pf_mix_open_loader(m, cfg, k, &sb, 1, ss->bridge_batch,
					 ss->bridge_epoch + 2 + (uint32_t)i,
					 2 + (unsigned)ss->npending, &b, err);
		if (ret == 0)
			ret = pf_mix_push_pending(s, b);
	}
	if (ret == 0)
		ret = pf_mix_fresh_blob(ss->state, ss->state_len,
					ss->bridge_epoch + 1 + (uint32_t)ss->npending, &t, &fresh,
					&flen, err);
	if (ret == 0) {
		sb = (pf_state_blob){ fresh, flen };
		ret = pf_mix_open_loader(m, cfg, k, &sb, 1, t.per_core_batch, UINT32_MAX,
					 2 + (unsigned)ss->npending, &s->next, err);
	}
	pf_free(fresh);
	s->sub_batch = ss->bridge_batch;
	s->whole_batch = t.per_core_batch;
	s->bridge_epoch = ss->bridge_epoch;
	return ret;
}

/* Source k from its loader's state, in the batches it was saved with
 * (its loader's state says them too: one that does not is refused, not
 * resumed on another topology). */
static int open_saved(pf_mixture *m, const pf_loader_config *cfg, size_t k,
		      const pf_mix_source_state *ss, pf_error *err)
{
	uint32_t batch = saved_batch(m, k, ss);
	pf_state_info info;
	int ret = pf_state_inspect(ss->state, ss->state_len, &info, err);

	if (ret == 0 && (info.per_core_batch != batch || info.num_hosts != m->topo.num_hosts))
		ret = pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				   "its loader's state is of %u hosts x batches of %u rows, the "
				   "mixture's of %u hosts x %u", info.num_hosts,
				   info.per_core_batch, m->topo.num_hosts, batch);
	if (ret < 0) {
		pf_error cause = *err;

		pf_mix_source_error(err, m->src[k].name, &cause);
		return ret;
	}
	return pf_mix_open_source(m, cfg, k, ss->state, ss->state_len, batch, err);
}

int pf_mix_restore(pf_mixture *m, const pf_loader_config *cfg, pf_mix_state *st,
		   pf_error *err)
{
	int ret = 0;

	if (st->digest != m->digest || st->nsources != m->n)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the state is of another mixture (%zu sources; this one "
				    "has %zu, or their names, weights or rules differ)",
				    st->nsources, m->n);
	if (st->num_hosts != m->topo.num_hosts || st->host_index != m->topo.host_index ||
	    st->cores != m->topo.cores || st->per_core_batch != m->topo.per_core_batch)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "a mixture resumes on the topology it was saved with (host "
				    "%u of %u, %u x %u); elastic resume of a mixture is not "
				    "supported", st->host_index, st->num_hosts, st->cores,
				    st->per_core_batch);
	m->step0 = st->next_step;
	m->skipped_total = st->skipped;
	if (st->end_plus_one) {
		m->rule_end = st->end_plus_one - 1;
		m->rule_end_known = true;
	}
	for (size_t k = 0; k < m->n && ret == 0; k++) {
		const pf_mix_source_state *ss = &st->sources[k];
		mix_source *s = &m->src[k];

		if (ss->bridge_batch)
			ret = open_bridge(m, cfg, k, ss, err);
		else
			ret = open_saved(m, cfg, k, ss, err);
		/* Rows of the batch it was inside taken before the state. */
		s->cur_row = ss->consumed;
	}
	return ret;
}

/* After a restore and its gates opened: the batch each source was inside,
 * again, less what was taken. */
int pf_mix_retake(pf_mixture *m, const pf_mix_state *st, pf_error *err)
{
	int ret = 0;

	for (size_t k = 0; k < m->n && ret == 0; k++) {
		const pf_mix_source_state *ss = &st->sources[k];
		mix_source *s = &m->src[k];

		if (!ss->consumed)
			continue;
		ret = pf_pipe_next(s->l, &s->cur);
		if (ret != 1 || ss->consumed > s->sub_batch) {
			ret = pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
					   "source '%s': the state says %u rows of its batch were "
					   "taken, and it has no such batch", s->name, ss->consumed);
			break;
		}
		ret = 0;
		s->before = pf_malloc(ss->state_len);
		if (!s->before) {
			ret = -ENOMEM;
			break;
		}
		memcpy(s->before, ss->state, ss->state_len);
		s->before_len = s->before_cap = ss->state_len;
		s->cur_row = ss->consumed;
		s->epoch = s->cur->epoch;
		s->any = true;
	}
	return ret;
}

int64_t pf_mixture_save_state(pf_mixture *m, void *buf, size_t cap)
{
	pf_mix_source_state *ss = pf_calloc(m->n, sizeof(*ss));
	uint8_t **own = pf_calloc(m->n, sizeof(*own));
	pf_mix_state st = { .digest = m->digest, .next_step = m->step,
			    .end_plus_one = m->rule_end + 1,
			    .host_index = m->topo.host_index, .num_hosts = m->topo.num_hosts,
			    .cores = m->topo.cores, .per_core_batch = m->topo.per_core_batch,
			    .sources = ss, .nsources = m->n };
	const char **names = pf_calloc(m->n, sizeof(*names));
	int64_t n = -ENOMEM;

	if (!ss || !own || !names)
		goto out;
	for (size_t k = 0; k < m->n; k++)
		names[k] = m->src[k].name;
	st.names = names;
	st.nnames = m->n;
	st.skipped = m->skipped_total;
	for (size_t k = 0; k < m->n; k++) {
		mix_source *s = &m->src[k];

		if (s->cur) {
			ss[k] = (pf_mix_source_state){ .state = s->before, .state_len = s->before_len,
						       .consumed = s->cur_row };
		} else {
			n = pf_pipe_save_state(s->l, NULL, 0);
			if (n < 0 || !(own[k] = pf_malloc((size_t)n)))
				goto out;
			pf_pipe_save_state(s->l, own[k], (size_t)n);
			ss[k] = (pf_mix_source_state){ .state = own[k], .state_len = (size_t)n };
		}
		ss[k].whole_batch = s->whole_batch;
		if (s->next) {
			ss[k].bridge_batch = s->sub_batch;
			ss[k].bridge_epoch = s->bridge_epoch;
			ss[k].pending = s->pend_state;
			ss[k].pending_len = s->pend_len;
			ss[k].npending = s->npend;
		}
	}
	n = pf_mix_state_encode(&st, buf, cap);
out:
	for (size_t k = 0; own && k < m->n; k++)
		pf_free(own[k]);
	pf_free(own);
	pf_free(ss);
	pf_free(names);
	return n;
}

/* A source's state inside a bridge, made at a mark (its bridge is freed
 * when it ends): the source's part of a mixture state, its memory its
 * own. */
struct pf_mix_held {
	pf_mix_source_state ss;
	uint8_t *state;
	uint8_t **pend;
	size_t *pend_len;
};

static void held_free(pf_mix_held *h)
{
	if (!h)
		return;
	for (size_t i = 0; h->pend && i < h->ss.npending; i++)
		pf_free(h->pend[i]);
	pf_free(h->pend);
	pf_free(h->pend_len);
	pf_free(h->state);
	pf_free(h);
}

/* Source s's part of a state with `rows` of its current loader's run
 * taken: its loader's state before the batch the row after them is in,
 * and the rows of that batch taken; a bridge's too (its batch and epoch,
 * the bridges after it).  own: the state's memory, the caller's to
 * free. */
static int source_at(const mix_source *s, uint64_t rows, pf_mix_source_state *ss, uint8_t **own)
{
	int64_t n = pf_pipe_state_after(s->l, rows / s->sub_batch, NULL, 0);

	*own = n > 0 ? pf_malloc((size_t)n) : NULL;
	if (!*own)
		return n < 0 ? (int)n : -ENOMEM;
	pf_pipe_state_after(s->l, rows / s->sub_batch, *own, (size_t)n);
	*ss = (pf_mix_source_state){ .state = *own, .state_len = (size_t)n,
				     .consumed = (uint32_t)(rows % s->sub_batch),
				     .whole_batch = s->whole_batch };
	if (s->next) {
		ss->bridge_batch = s->sub_batch;
		ss->bridge_epoch = s->bridge_epoch;
		ss->pending = s->pend_state;
		ss->pending_len = s->pend_len;
		ss->npending = s->npend;
	}
	return 0;
}

int pf_mixture_mark(const pf_mixture *m, pf_mix_mark *marks)
{
	for (size_t k = 0; k < m->n; k++) {
		const mix_source *s = &m->src[k];
		pf_mix_mark *mk = &marks[k];
		pf_mix_held *h;
		int ret;

		*mk = (pf_mix_mark){ .used = s->used, .rows = s->used - s->lbase, .gen = s->gen };
		if (!s->next)
			continue;
		/* Inside a bridge: its state now, kept (with the states of
		 * the bridges after it, as opened). */
		h = pf_calloc(1, sizeof(*h));
		if (!h)
			return -ENOMEM;
		mk->held = h;
		ret = source_at(s, mk->rows, &h->ss, &h->state);
		if (ret < 0)
			return ret;
		h->pend = pf_calloc(s->npend + 1, sizeof(*h->pend));
		h->pend_len = pf_calloc(s->npend + 1, sizeof(*h->pend_len));
		if (!h->pend || !h->pend_len)
			return -ENOMEM;
		for (uint32_t i = 0; i < s->npend; i++) {
			h->pend[i] = pf_malloc(s->pend_len[i] ? s->pend_len[i] : 1);
			if (!h->pend[i])
				return -ENOMEM;
			memcpy(h->pend[i], s->pend_state[i], s->pend_len[i]);
			h->pend_len[i] = s->pend_len[i];
			h->ss.npending = i + 1;
		}
		h->ss.npending = s->npend;
		h->ss.pending = (const uint8_t *const *)h->pend;
		h->ss.pending_len = h->pend_len;
	}
	return 0;
}

void pf_mix_mark_release(pf_mix_mark *mk)
{
	held_free(mk->held);
	mk->held = NULL;
}

int64_t pf_mixture_state_at(const pf_mixture *m, uint64_t step, const pf_mix_mark *marks,
			    const uint64_t *past, const struct pf_pack_state *pack,
			    uint64_t skipped, void *buf, size_t cap)
{
	pf_mix_source_state *ss = pf_calloc(m->n, sizeof(*ss));
	uint8_t **own = pf_calloc(2 * m->n, sizeof(*own));
	pf_mix_state st = { .digest = m->digest, .next_step = step,
			    .end_plus_one = m->rule_end + 1,
			    .host_index = m->topo.host_index, .num_hosts = m->topo.num_hosts,
			    .cores = m->topo.cores, .per_core_batch = m->topo.per_core_batch,
			    .sources = ss, .nsources = m->n, .has_pack = pack != NULL,
			    .skipped = skipped };
	int64_t n = -ENOMEM;

	if (pack)
		st.pack = *pack;
	if (!ss || !own)
		goto out;
	for (size_t k = 0; k < m->n; k++) {
		const mix_source *s = &m->src[k];
		const pf_mix_mark *mk = &marks[k];

		if (mk->held) {
			ss[k] = mk->held->ss;
		} else if (mk->gen != s->gen) {
			n = -EIO;	/* cannot be: only a bridge ends */
			goto out;
		} else {
			int ret = source_at(s, mk->rows, &ss[k], &own[k]);

			if (ret < 0) {
				n = ret;
				goto out;
			}
		}
		if (past) {
			/* Past the rows its packer took: in its loader now (a
			 * bridge ended since: its end). */
			pf_mix_source_state at;
			int ret = source_at(s, past[k] > s->lbase ? past[k] - s->lbase : 0, &at,
					    &own[m->n + k]);

			if (ret < 0) {
				n = ret;
				goto out;
			}
			ss[k].pack_ahead = past[k] - mk->used;
			ss[k].past = at.state;
			ss[k].past_len = at.state_len;
			ss[k].past_consumed = at.consumed;
		}
	}
	n = pf_mix_state_encode(&st, buf, cap);
out:
	for (size_t k = 0; own && k < 2 * m->n; k++)
		pf_free(own[k]);
	pf_free(own);
	pf_free(ss);
	return n;
}

bool pf_mixture_inner_index(const pf_mixture *m, size_t k, uint64_t c, uint64_t *row)
{
	const mix_sink *sk = m->src[k].sk;
	uint64_t mapped;

	if (!sk || !sk->inner)
		return false;
	/* Placed, and its entry not yet another's. */
	mapped = __atomic_load_n(&sk->mapped, __ATOMIC_ACQUIRE);
	if (c < sk->c0 || c >= mapped || mapped - c > sk->mask + 1)
		return false;
	*row = sk->inner[c & sk->mask];
	return true;
}

unsigned pf_mixture_ring(const pf_mixture *m)
{
	return m->ring;
}

const char *pf_mixture_source_name(const pf_mixture *m, size_t k)
{
	return k < m->n ? m->src[k].name : "?";
}

void pf_mixture_row_sources(pf_mixture *m, uint32_t host, uint64_t t, uint64_t n, uint8_t *rs)
{
	/* The consumer's place in the schedule kept aside and given back:
	 * these steps are dealt as host `host` deals them. */
	int64_t deficit[257];
	uint64_t count[257], cum[258], order[257], at = m->at;
	uint32_t own = m->topo.host_index;

	memcpy(deficit, m->deficit, m->n * sizeof(*deficit));
	memcpy(count, m->count, m->n * sizeof(*count));
	memcpy(cum, m->cum, (m->n + 1) * sizeof(*cum));
	memcpy(order, m->order, m->n * sizeof(*order));
	m->topo.host_index = host;
	for (uint64_t i = 0; i < n; i++) {
		pf_mix_schedule_seek(m, t + i);
		pf_mix_step_sources(m, t + i, rs + i * m->host_batch);
	}
	m->topo.host_index = own;
	memcpy(m->deficit, deficit, m->n * sizeof(*deficit));
	memcpy(m->count, count, m->n * sizeof(*count));
	memcpy(m->cum, cum, (m->n + 1) * sizeof(*cum));
	memcpy(m->order, order, m->n * sizeof(*order));
	m->at = at;
}

pf_mixture *pf_mixture_of(pf_loader *l)
{
	return l && l->ops == &pf_mixture_ops ? (pf_mixture *)l : NULL;
}

/* ------------------------------------------------------------------ */
/* The face: pf_loader_*() of a mixture                                 */

static pf_mixture *mix(pf_loader *f)
{
	return (pf_mixture *)f;
}

static const pf_mixture *cmix(const pf_loader *f)
{
	return (const pf_mixture *)f;
}

/* Its batch is made in this call, from its sources' batches (which it
 * waits for whatever the timeout). */
static int mix_next(pf_loader *f, pf_batch **out, uint64_t timeout_ns)
{
	(void)timeout_ns;
	return pf_mixture_next(mix(f), out);
}

static void mix_release(pf_loader *f, pf_batch *batch)
{
	pf_mixture_release(mix(f), batch);
}

static int64_t mix_save_state(pf_loader *f, void *buf, size_t cap)
{
	return pf_mixture_save_state(mix(f), buf, cap);
}

static const pf_error *mix_last_error(const pf_loader *f)
{
	return pf_mixture_last_error(cmix(f));
}

static void mix_metrics(const pf_loader *f, pf_loader_metrics *m)
{
	pf_mixture_metrics(cmix(f), m);
}

/* A mixture's sources tune themselves, each its own: the first one's
 * is said. */
static void mix_tuning(const pf_loader *f, pf_tuning *t)
{
	pf_mixture_tuning(cmix(f), t);
}

static uint64_t mix_steps_per_epoch(const pf_loader *f)
{
	return pf_mixture_steps(cmix(f));
}

static uint64_t mix_steps_left(const pf_loader *f)
{
	return pf_mixture_steps_left(cmix(f));
}

static const pf_spec *mix_spec(const pf_loader *f)
{
	return pf_mixture_spec(cmix(f));
}

/* Its features are its first source's. */
static int mix_feature_shape(const pf_loader *f, uint32_t i, uint32_t shape[3],
			     const char **elem, uint32_t *elem_size)
{
	const pf_pipe *first = pf_mixture_first(cmix(f));

	return pf_spec_feature_shape(&first->spec, &first->images, i, shape, elem, elem_size);
}

static int mix_series(const pf_loader *f, pf_series **out)
{
	return pf_mixture_series(cmix(f), out);
}

static size_t mix_sources(const pf_loader *f)
{
	return pf_mixture_sources(cmix(f));
}

static void mix_source_metrics(const pf_loader *f, size_t i, pf_source_metrics *m)
{
	pf_mixture_source_metrics(cmix(f), i, m);
}

static void mix_free(pf_loader *f)
{
	pf_mixture_free(mix(f));
}

static int64_t mix_records_of(const pf_loader *f, uint64_t step, pf_record_ref *out,
			      size_t cap, pf_error *err)
{
	return pf_mix_records_of(cmix(f), step, out, cap, err);
}

static const char *mix_file(const pf_loader *f, uint32_t source, uint32_t file)
{
	return pf_mix_file(cmix(f), source, file);
}

const pf_loader_ops pf_mixture_ops = {
	.next = mix_next,
	.release = mix_release,
	.save_state = mix_save_state,
	.last_error = mix_last_error,
	.metrics = mix_metrics,
	.tuning = mix_tuning,
	.steps_per_epoch = mix_steps_per_epoch,
	.steps_left = mix_steps_left,
	.spec = mix_spec,
	.feature_shape = mix_feature_shape,
	.series = mix_series,
	.sources = mix_sources,
	.source_metrics = mix_source_metrics,
	.free = mix_free,
	.records_of = mix_records_of,
	.file = mix_file,
};
