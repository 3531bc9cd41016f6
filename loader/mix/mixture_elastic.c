/* SPDX-License-Identifier: Apache-2.0 */
/* A mixture resumed on another topology (elastic resume): each source is
 * resumed as one loader is (resume.c: the old hosts' remaining records of
 * the epoch merged and cut among the new hosts, whole batches each, the
 * rest dropped), from its loader states on the old hosts moved past the
 * rows the mixture had taken of their current batches.  That epoch's
 * rest is read by a bridge loader of batches of the source's per-step
 * share rounded down, so that what the sources drop together stays under
 * one global batch; the loader of its next epochs (batches of
 * MIX_BATCHES host batches' share) waits beside it and takes over when
 * it ends.  With mix=sample the old hosts may be in several epochs of a
 * source: a bridge for each, in turn (chain()).  The stop rule's end
 * step follows from the records each source has left, and is kept in
 * the mixture's state from then on.
 * Not here: the same topology's resume (mixture.c), the merge itself
 * (resume.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mixture_internal.h"

/* A state of tmpl's dataset and shuffle at `epoch` for topology t:
 * fresh (a loader resumed from it starts the epoch), or done (its stream
 * of the epoch delivered: nothing of it left). */
static int epoch_blob(const void *tmpl, size_t len, uint32_t epoch, const pf_topology *t,
		      bool done, uint8_t **out, size_t *outlen, pf_error *err)
{
	pf_state s;
	pf_piece *pieces;
	int64_t n;
	int ret = pf_state_decode(&s, tmpl, len, err);

	*out = NULL;
	if (ret < 0)
		return ret;
	pieces = s.pieces;
	s.pieces = NULL;
	s.npieces = 0;
	s.fresh = !done;
	s.epoch = epoch;
	s.step_in_epoch = 0;
	s.saver = *t;
	s.origin = *t;
	s.epoch_dropped = s.epoch_wrapped = 0;
	n = pf_state_encode(&s, NULL, 0);
	if (n > 0 && (*out = pf_malloc((size_t)n)) != NULL)
		pf_state_encode(&s, *out, (size_t)n);
	s.pieces = pieces;
	pf_state_release(&s);
	if (!*out)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	*outlen = (size_t)n;
	return 0;
}

int pf_mix_fresh_blob(const void *tmpl, size_t len, uint32_t epoch, const pf_topology *t,
		      uint8_t **out, size_t *outlen, pf_error *err)
{
	return epoch_blob(tmpl, len, epoch, t, false, out, outlen, err);
}

int pf_mix_push_pending(mix_source *s, pf_pipe *l)
{
	int64_t n = pf_pipe_save_state(l, NULL, 0);
	uint8_t *st = n > 0 ? pf_malloc((size_t)n) : NULL;
	pf_pipe **pl = pf_realloc(s->pend, (s->npend + 1) * sizeof(*pl));
	const uint8_t **ps;
	size_t *pn;

	s->pend = pl ? pl : s->pend;
	ps = pf_realloc(s->pend_state, (s->npend + 1) * sizeof(*ps));
	s->pend_state = ps ? ps : s->pend_state;
	pn = pf_realloc(s->pend_len, (s->npend + 1) * sizeof(*pn));
	s->pend_len = pn ? pn : s->pend_len;
	if (!st || !pl || !ps || !pn) {
		pf_free(st);
		pf_pipe_free(l);
		return n < 0 ? (int)n : -ENOMEM;
	}
	pf_pipe_save_state(l, st, (size_t)n);
	s->pend[s->npend] = l;
	s->pend_state[s->npend] = st;
	s->pend_len[s->npend++] = (size_t)n;
	return 0;
}

void pf_mix_pop_pending(mix_source *s)
{
	s->l = s->pend[0];
	pf_free((void *)s->pend_state[0]);
	s->npend--;
	memmove(s->pend, s->pend + 1, s->npend * sizeof(*s->pend));
	memmove(s->pend_state, s->pend_state + 1, s->npend * sizeof(*s->pend_state));
	memmove(s->pend_len, s->pend_len + 1, s->npend * sizeof(*s->pend_len));
	s->bridge_epoch++;
}

void pf_mix_free_pending(mix_source *s)
{
	for (uint32_t i = 0; i < s->npend; i++) {
		pf_pipe_free(s->pend[i]);
		pf_free((void *)s->pend_state[i]);
	}
	pf_free(s->pend);
	pf_free(s->pend_state);
	pf_free(s->pend_len);
	s->pend = NULL;
	s->pend_state = NULL;
	s->pend_len = NULL;
	s->npend = 0;
}

int pf_mix_keep_merged(mix_source *s, const pf_state_blob *blobs, uint32_t n)
{
	pf_state_blob **mb = pf_realloc(s->merged, (s->nmerged + 1) * sizeof(*mb));
	uint8_t ***mm;
	pf_state_blob *b;
	uint8_t **mem;

	if (!mb)
		return -ENOMEM;
	s->merged = mb;
	mm = pf_realloc(s->merged_mem, (s->nmerged + 1) * sizeof(*mm));
	if (!mm)
		return -ENOMEM;
	s->merged_mem = mm;
	b = pf_calloc(n, sizeof(*b));
	mem = pf_calloc(n, sizeof(*mem));
	s->merged[s->nmerged] = b;
	s->merged_mem[s->nmerged] = mem;
	if (!b || !mem) {
		pf_free(b);
		pf_free(mem);
		return -ENOMEM;
	}
	s->nmerged++;
	s->nmerged_hosts = n;
	for (uint32_t h = 0; h < n; h++) {
		mem[h] = pf_malloc(blobs[h].len ? blobs[h].len : 1);
		if (!mem[h])
			return -ENOMEM;
		memcpy(mem[h], blobs[h].data, blobs[h].len);
		b[h] = (pf_state_blob){ mem[h], blobs[h].len };
	}
	return 0;
}

void pf_mix_free_merged(mix_source *s)
{
	for (uint32_t i = 0; i < s->nmerged; i++) {
		for (uint32_t h = 0; s->merged_mem[i] && h < s->nmerged_hosts; h++)
			pf_free(s->merged_mem[i][h]);
		pf_free(s->merged_mem[i]);
		pf_free(s->merged[i]);
	}
	pf_free(s->merged);
	pf_free(s->merged_mem);
	s->merged = NULL;
	s->merged_mem = NULL;
	s->nmerged = 0;
}

/* st's position moved past `consumed` more records of its stream (the
 * rows the mixture took of the batch after it): a fresh state becomes
 * the whole stream of its epoch less them. */
static int advance(pf_state *st, uint32_t consumed, pf_remainder rem)
{
	uint64_t skip = consumed;
	size_t k = 0;

	if (!consumed)
		return 0;
	if (st->fresh) {
		uint64_t quota = pf_plan_steps(st->records, &st->saver, rem) * st->saver.cores *
				 st->saver.per_core_batch;

		st->pieces = pf_calloc(1, sizeof(*st->pieces));
		if (!st->pieces)
			return -ENOMEM;
		st->pieces[0] = (pf_piece){ st->saver.host_index, 0, quota };
		st->npieces = 1;
		st->fresh = false;
		st->origin = st->saver;
	}
	for (size_t i = 0; i < st->npieces; i++) {
		pf_piece p = st->pieces[i];
		uint64_t plen = p.end - p.begin;

		if (skip >= plen) {
			skip -= plen;
			continue;
		}
		p.begin += skip;
		skip = 0;
		st->pieces[k++] = p;
	}
	st->npieces = k;
	return 0;
}

typedef struct elastic {
	pf_mix_state *st;	/* the old hosts' states, by host index */
	uint32_t hosts;
	pf_state_blob *blobs;	/* one source's, moved past the rows taken */
	uint8_t **mem;
	uint32_t *epoch;	/* each old host's epoch of the source */
	pf_topology *saver;	/* and its topology */
	pf_state_blob *eb;	/* scratch: the states at one epoch */
	uint8_t **emem;
} elastic;

/* Where a source was resumed: the epochs its bridges read (e0 .. e1),
 * the records of e0's, and of those below the first source's `epochs`
 * (bridged false: no old host was inside e0, read by the loader of its
 * epochs). */
typedef struct resumed {
	uint32_t e0, e1;
	uint64_t first, upto;
	bool bridged;
} resumed;

/* With mix=sample the old hosts may be in epochs e0 .. e1 of source k:
 * a bridge for each, read one after another (the first s->l, the others
 * pending), each merging every old host's state at its epoch (a host
 * before it: its whole stream of it; past it: none left), in batches of
 * the per-step share over the epochs, so that what the cuts drop stays
 * under the share times the new hosts (at least 1 row: then under one
 * record a host a cut). */
static int chain(pf_mixture *m, const pf_loader_config *cfg, elastic *x, size_t k,
		 uint32_t epochs, resumed *r, pf_error *err)
{
	mix_source *s = &m->src[k];
	uint32_t d = r->e1 - r->e0 + 1, bridge = pf_mix_bridge_batch(m, k) / d;
	int ret = 0;

	bridge = bridge ? bridge : 1;
	for (uint32_t e = r->e0; e <= r->e1 && ret == 0; e++) {
		pf_pipe *b = NULL;

		for (uint32_t h = 0; h < x->hosts && ret == 0; h++) {
			size_t len = 0;

			x->eb[h] = x->blobs[h];
			if (x->epoch[h] != e) {
				ret = epoch_blob(x->blobs[h].data, x->blobs[h].len, e, &x->saver[h],
						 e < x->epoch[h], &x->emem[h], &len, err);
				x->eb[h] = (pf_state_blob){ x->emem[h], len };
			}
		}
		/* (Kept for another host's course: pf_mixture_course_of().) */
		if (ret == 0)
			ret = pf_mix_keep_merged(s, x->eb, x->hosts);
		if (ret == 0)
			ret = pf_mix_open_loader(m, cfg, k, x->eb, x->hosts, bridge, e + 1, d + 1, &b,
						 err);
		for (uint32_t h = 0; h < x->hosts; h++) {
			pf_free(x->emem[h]);
			x->emem[h] = NULL;
		}
		if (ret < 0)
			break;
		if (e == r->e0)
			r->first = pf_pipe_steps_left(b) * bridge;
		if (e < epochs)
			r->upto += pf_pipe_steps_left(b) * bridge;
		if (e == r->e0)
			s->l = b;
		else
			ret = pf_mix_push_pending(s, b);
	}
	s->sub_batch = bridge;
	s->bridge_epoch = r->e0;
	return ret;
}

/* Source k: its old states moved, merged by a bridge loader (or, when no
 * old host was inside the epoch, by the loader of its epochs itself), or
 * by a chain of them (chain()); the loader of its later epochs beside. */
static int resume_source(pf_mixture *m, const pf_loader_config *cfg, elastic *x, size_t k,
			 uint32_t epochs, resumed *r, pf_error *err)
{
	mix_source *s = &m->src[k];
	pf_topology t = { m->topo.host_index, m->topo.num_hosts, 1, 0 };
	uint32_t bridge = pf_mix_bridge_batch(m, k);
	bool inside = false;
	uint8_t *fresh = NULL;
	size_t flen = 0;
	int ret = 0;

	*r = (resumed){ UINT32_MAX, 0, 0, 0, false };
	for (uint32_t h = 0; h < x->hosts && ret == 0; h++) {
		const pf_mix_source_state *ss = &x->st[h].sources[k];
		pf_state st;
		int64_t n;

		ret = pf_state_decode(&st, ss->state, ss->state_len, err);
		if (ret < 0)
			break;
		ret = advance(&st, ss->consumed, cfg->remainder);
		/* The batch of its epochs on the new hosts, fitted to its
		 * records there. */
		if (h == 0)
			t.per_core_batch = pf_mix_fit_batch(st.records, m->topo.num_hosts,
							    pf_mix_batch(m, k));
		x->epoch[h] = st.epoch;
		x->saver[h] = st.saver;
		r->e0 = st.epoch < r->e0 ? st.epoch : r->e0;
		r->e1 = st.epoch > r->e1 ? st.epoch : r->e1;
		inside |= !st.fresh;
		n = ret == 0 ? pf_state_encode(&st, NULL, 0) : ret;
		pf_free(x->mem[h]);
		x->mem[h] = NULL;
		if (n > 0 && (x->mem[h] = pf_malloc((size_t)n)) != NULL) {
			pf_state_encode(&st, x->mem[h], (size_t)n);
			x->blobs[h] = (pf_state_blob){ x->mem[h], (size_t)n };
		} else if (ret == 0) {
			ret = -ENOMEM;
		}
		pf_state_release(&st);
	}
	if (ret == 0 && r->e1 - r->e0 > MIX_CHAIN_MAX)
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "source '%s': the old hosts are %u epochs of it apart (epochs "
				   "%u to %u), over the %u an elastic resume bridges: resume them "
				   "on their own topology", s->name, r->e1 - r->e0, r->e0, r->e1,
				   MIX_CHAIN_MAX);
	if (ret == 0 && r->e0 != r->e1) {
		ret = chain(m, cfg, x, k, epochs, r, err);
	} else if (ret == 0 && !inside) {
		/* Every old host between epochs: e0 starts afresh here. */
		ret = pf_mix_open_loader(m, cfg, k, x->blobs, x->hosts, t.per_core_batch,
					 UINT32_MAX, 1, &s->l, err);
		s->sub_batch = s->whole_batch = t.per_core_batch;
		return ret;
	} else if (ret == 0) {
		ret = pf_mix_keep_merged(s, x->blobs, x->hosts);
		if (ret == 0)
			ret = pf_mix_open_loader(m, cfg, k, x->blobs, x->hosts, bridge, r->e0 + 1,
						 2, &s->l, err);
		s->sub_batch = bridge;
		s->bridge_epoch = r->e0;
		if (ret == 0)
			r->first = pf_pipe_steps_left(s->l) * bridge;
		r->upto = r->e0 < epochs ? r->first : 0;
	}
	if (ret == 0)
		ret = pf_mix_fresh_blob(x->blobs[0].data, x->blobs[0].len, r->e1 + 1, &t, &fresh,
					&flen, err);
	if (ret == 0) {
		pf_state_blob sb = { fresh, flen };

		ret = pf_mix_open_loader(m, cfg, k, &sb, 1, t.per_core_batch, UINT32_MAX,
					 2 + s->npend, &s->next, err);
	}
	pf_free(fresh);
	if (ret < 0) {
		pf_error local = *err;

		if (!strstr(err->msg, "source '"))
			pf_mix_source_error(err, s->name, &local);
		return ret;
	}
	s->whole_batch = t.per_core_batch;
	r->bridged = true;
	return 0;
}

int pf_mix_elastic(pf_mixture *m, const pf_loader_config *cfg, pf_error *err)
{
	elastic x = { 0 };
	uint64_t t0 = 0, per[256];
	resumed r[256];
	size_t n = cfg->nresume;
	uint32_t epochs = cfg->epochs ? cfg->epochs : 1;
	int ret = 0;

	x.st = pf_calloc(n, sizeof(*x.st));
	x.blobs = pf_calloc(n, sizeof(*x.blobs));
	x.mem = pf_calloc(n, sizeof(*x.mem));
	x.epoch = pf_calloc(n, sizeof(*x.epoch));
	x.saver = pf_calloc(n, sizeof(*x.saver));
	x.eb = pf_calloc(n, sizeof(*x.eb));
	x.emem = pf_calloc(n, sizeof(*x.emem));
	if (!x.st || !x.blobs || !x.mem || !x.epoch || !x.saver || !x.eb || !x.emem) {
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
		goto out;
	}
	/* Every old host's state, once, by host index. */
	for (size_t i = 0; i < n && ret == 0; i++) {
		pf_mix_state st;

		ret = pf_mix_state_decode(&st, cfg->resume[i].data, cfg->resume[i].len, err);
		if (ret < 0)
			break;
		x.hosts = i == 0 ? st.num_hosts : x.hosts;
		if (st.digest != m->digest || st.nsources != m->n)
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "state %zu is of another mixture (%zu sources; this "
					   "one has %zu, or their names, weights or rules differ)",
					   i, st.nsources, m->n);
		else if (st.num_hosts != x.hosts || st.num_hosts != n || st.host_index >= n)
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "resuming a mixture of %u hosts on %u needs the state "
					   "of each old host once: %zu states given, state %zu is "
					   "host %u of %u", x.hosts, m->topo.num_hosts, n, i,
					   st.host_index, st.num_hosts);
		else if (x.st[st.host_index].sources)
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "two states of host %u of %u", st.host_index, x.hosts);
		/* A chain's later bridges (mix=sample, the old hosts of an
		 * elastic resume in different epochs) are not merged again:
		 * their rows would be read twice. */
		for (size_t k = 0; ret == 0 && k < st.nsources; k++)
			if (st.sources[k].npending)
				ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
						   "source '%s': host %u's state is inside the "
						   "chain of bridges of an earlier elastic resume "
						   "(%zu epochs to go): resume it on its %u hosts "
						   "until the chain ends (a state without them), "
						   "then on %u", m->src[k].name, st.host_index,
						   st.sources[k].npending, st.num_hosts,
						   m->topo.num_hosts);
		if (ret < 0) {
			pf_mix_state_release(&st);
			break;
		}
		x.st[st.host_index] = st;
		t0 = st.next_step > t0 ? st.next_step : t0;
		if (st.skipped > m->skipped_total)
			m->skipped_total = st.skipped;
	}
	for (size_t k = 0; k < m->n && ret == 0; k++)
		ret = resume_source(m, cfg, &x, k, epochs, &r[k], err);
	if (ret < 0)
		goto out;
	/* Each source's records from t0 to its end under the rule: the rest
	 * of the epochs it is in, then whole epochs of the new topology. */
	for (size_t k = 0; k < m->n; k++) {
		mix_source *s = &m->src[k];
		pf_pipe *whole = s->next ? s->next : s->l;

		per[k] = pf_pipe_steps_per_epoch(whole) * s->whole_batch;
		if (!r[k].bridged)	/* no bridge: e0 starts afresh */
			r[k].first = r[k].upto = r[k].e0 < epochs ? per[k] : 0;
	}
	m->step0 = t0;
	m->rule_end = t0;
	if (cfg->mix_stop == PF_MIX_STOP_FIRST_EXHAUSTED) {
		m->rule_end = UINT64_MAX;
		for (size_t k = 0; k < m->n; k++) {
			uint64_t e = r[k].e0 > 0 ? t0 : pf_mix_last_step_from(m, k, t0, r[k].first);

			m->rule_end = e < m->rule_end ? e : m->rule_end;
		}
	} else if (r[0].e0 < epochs) {
		uint64_t later = r[0].e1 + 1 < epochs ? (uint64_t)(epochs - 1 - r[0].e1) * per[0] : 0;

		m->rule_end = pf_mix_last_step_from(m, 0, t0, r[0].upto + later);
	}
	m->rule_end_known = true;
out:
	for (size_t i = 0; i < n; i++) {
		if (x.st)
			pf_mix_state_release(&x.st[i]);
		if (x.mem)
			pf_free(x.mem[i]);
	}
	pf_free(x.st);
	pf_free(x.blobs);
	pf_free(x.mem);
	pf_free(x.epoch);
	pf_free(x.saver);
	pf_free(x.eb);
	pf_free(x.emem);
	return ret;
}
