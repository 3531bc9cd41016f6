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
 * it ends.  The stop rule's end step follows from the records each
 * source has left, and is kept in the mixture's state from then on.
 * Not here: the same topology's resume (mixture.c), the merge itself
 * (resume.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mixture_internal.h"

int pf_mix_fresh_blob(const void *tmpl, size_t len, uint32_t epoch, const pf_topology *t,
		      uint8_t **out, size_t *outlen, pf_error *err)
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
	s.fresh = true;
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
} elastic;

/* Source k: its old states moved, merged by a bridge loader (or, when no
 * old host was inside the epoch, by the loader of its epochs itself).
 * *epoch: the epoch it is in; *left: the records the bridge delivers. */
static int resume_source(pf_mixture *m, const pf_loader_config *cfg, elastic *x, size_t k,
			 uint32_t *epoch, uint64_t *left, pf_error *err)
{
	mix_source *s = &m->src[k];
	pf_topology t = { m->topo.host_index, m->topo.num_hosts, 1, 0 };
	uint32_t e0 = 0, bridge = pf_mix_bridge_batch(m, k);
	bool inside = false;
	uint8_t *fresh = NULL;
	size_t flen = 0;
	int ret = 0;

	for (uint32_t h = 0; h < x->hosts && ret == 0; h++) {
		const pf_mix_source_state *ss = &x->st[h].sources[k];
		pf_state st;
		int64_t n;

		ret = pf_state_decode(&st, ss->state, ss->state_len, err);
		if (ret < 0)
			break;
		ret = advance(&st, ss->consumed, cfg->remainder);
		if (ret == 0 && h > 0 && st.epoch != e0)
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "source '%s': the old hosts are in different epochs "
					   "of it (host 0 in %u, host %u in %u; with mix=sample "
					   "their draws differ): resume them on their own topology",
					   s->name, e0, h, st.epoch);
		if (h == 0) {
			/* The batch of its epochs on the new hosts, fitted to its
			 * records there. */
			e0 = st.epoch;
			t.per_core_batch = pf_mix_fit_batch(st.records, m->topo.num_hosts,
							    pf_mix_batch(m, k));
		}
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
	if (ret < 0) {
		pf_error local = *err;

		if (!strstr(err->msg, "source '"))
			pf_mix_source_error(err, s->name, &local);
		return ret;
	}
	*epoch = e0;
	*left = 0;
	if (!inside) {
		/* Every old host between epochs: e0 starts afresh here. */
		ret = pf_mix_open_loader(m, cfg, k, x->blobs, x->hosts, t.per_core_batch,
					 UINT32_MAX, 1, &s->l, err);
		s->sub_batch = s->whole_batch = t.per_core_batch;
		return ret;
	}
	ret = pf_mix_open_loader(m, cfg, k, x->blobs, x->hosts, bridge, e0 + 1, 2, &s->l, err);
	if (ret == 0)
		ret = pf_mix_fresh_blob(x->blobs[0].data, x->blobs[0].len, e0 + 1, &t, &fresh,
					&flen, err);
	if (ret == 0) {
		pf_state_blob sb = { fresh, flen };

		ret = pf_mix_open_loader(m, cfg, k, &sb, 1, t.per_core_batch, UINT32_MAX, 2,
					 &s->next, err);
	}
	pf_free(fresh);
	if (ret < 0)
		return ret;
	s->sub_batch = bridge;
	s->whole_batch = t.per_core_batch;
	s->bridge_epoch = e0;
	*left = pf_loader_steps_left(s->l) * bridge;
	return 0;
}

int pf_mix_elastic(pf_mixture *m, const pf_loader_config *cfg, pf_error *err)
{
	elastic x = { 0 };
	uint64_t t0 = 0, limit[256], per[256];
	uint32_t ep[256];
	size_t n = cfg->nresume;
	int ret = 0;

	x.st = pf_calloc(n, sizeof(*x.st));
	x.blobs = pf_calloc(n, sizeof(*x.blobs));
	x.mem = pf_calloc(n, sizeof(*x.mem));
	if (!x.st || !x.blobs || !x.mem) {
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
		if (ret < 0) {
			pf_mix_state_release(&st);
			break;
		}
		x.st[st.host_index] = st;
		t0 = st.next_step > t0 ? st.next_step : t0;
	}
	for (size_t k = 0; k < m->n && ret == 0; k++)
		ret = resume_source(m, cfg, &x, k, &ep[k], &limit[k], err);
	if (ret < 0)
		goto out;
	/* Each source's records from t0 to its end under the rule: the rest
	 * of the epoch it is in, then whole epochs of the new topology. */
	for (size_t k = 0; k < m->n; k++) {
		mix_source *s = &m->src[k];
		pf_loader *whole = s->next ? s->next : s->l;

		per[k] = pf_loader_steps_per_epoch(whole) * s->whole_batch;
		if (!s->next)	/* no bridge: e starts afresh */
			limit[k] = per[k];
	}
	m->step0 = t0;
	m->rule_end = t0;
	if (cfg->mix_stop == PF_MIX_STOP_FIRST_EXHAUSTED) {
		m->rule_end = UINT64_MAX;
		for (size_t k = 0; k < m->n; k++) {
			uint64_t e = ep[k] > 0 ? t0 : pf_mix_last_step_from(m, k, t0, limit[k]);

			m->rule_end = e < m->rule_end ? e : m->rule_end;
		}
	} else {
		uint32_t epochs = cfg->epochs ? cfg->epochs : 1;

		if (ep[0] < epochs)
			m->rule_end = pf_mix_last_step_from(m, 0, t0, limit[0] + (epochs - 1 - ep[0]) *
									     per[0]);
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
	return ret;
}
