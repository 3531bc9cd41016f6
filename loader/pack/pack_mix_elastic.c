/* SPDX-License-Identifier: Apache-2.0 */
/* A packed mixture resumed on another topology (elastic resume), and the
 * courses its plan and its walks read.
 *
 * Each old host's state is its inner mixture's at a group's start (from
 * which its packer rebuilt the rows not delivered) and its packer there;
 * beside each source's state it keeps the source's state past the rows
 * the packer had taken by the save (pack_past: those rows are in rows
 * delivered, or lost with the rows in progress).  The inner mixture is
 * resumed elastically from those (mixture_elastic.c: each source's rest
 * of its epoch merged and cut among the new hosts by a bridge loader),
 * the packer empty: nothing is read twice, and what is lost is the rows
 * the old hosts had in progress (counted as dropped) and what the
 * bridges' cuts drop.  The run's steps are planned again from there on
 * every new host (its sources' courses: the bridges cut for that host,
 * then their loaders of whole epochs), and the run is "cut": a state
 * saved later keeps that plan, and a resume of it on the new topology
 * takes it from the state (the other hosts' positions are not known
 * there).  Direct placement is not used in a cut run (its bridges' rows
 * are copied by the mixture).
 *
 * Not here: the same topology's resume (pack_mix.c), the merge and the
 * bridges (loader/mix/mixture_elastic.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pack_internal.h"

/* State i (decoded into st) as the inner mixture resumes it on the new
 * topology: each source from past its packer's rows, no packing part.
 * @return 0 with *out (pf_free()) or <0 with err. */
static int moved_state(const pf_mix_state *st, size_t i, uint8_t **out, size_t *len,
		       pf_error *err)
{
	pf_mix_source_state *src = pf_calloc(st->nsources + 1, sizeof(*src));
	pf_mix_state ms = *st;
	int64_t n;

	*out = NULL;
	if (!src)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	for (size_t k = 0; k < st->nsources; k++) {
		const pf_mix_source_state *ss = &st->sources[k];

		if (ss->npending) {
			pf_free(src);
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "state %zu: its source %zu is inside the chain of "
					    "bridges of an earlier elastic resume (%zu epochs to "
					    "go): resume it on its %u hosts until the chain ends, "
					    "then on %u", i, k, ss->npending, st->pack.saver.num_hosts,
					    st->num_hosts);
		}
		if (!ss->past_len && st->pack.ahead) {
			pf_free(src);
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "state %zu does not say where its sources are past the "
					    "records its packer took (saved before packed mixtures "
					    "resumed elastically): resume it on its own topology "
					    "(%u hosts, %u x %u)", i, st->pack.saver.num_hosts,
					    st->pack.saver.cores, st->pack.saver.per_core_batch);
		}
		src[k] = (pf_mix_source_state){
			.state = ss->past_len ? ss->past : ss->state,
			.state_len = ss->past_len ? ss->past_len : ss->state_len,
			.consumed = ss->past_len ? ss->past_consumed : ss->consumed,
			.whole_batch = ss->whole_batch,
		};
	}
	ms.sources = src;
	ms.has_pack = false;
	n = pf_mix_state_encode(&ms, NULL, 0);
	if (n > 0 && (*out = pf_malloc((size_t)n)) != NULL)
		pf_mix_state_encode(&ms, *out, (size_t)n);
	pf_free(src);
	if (!*out)
		return pf_error_set(err, n < 0 ? (int)n : -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory");
	*len = (size_t)n;
	return 0;
}

int pf_pack_mix_elastic(pf_packing *l, pf_pack_run *pk, const pf_loader_config *cfg,
			pf_state_blob **out, uint8_t ***mem, pf_error *err)
{
	size_t n = cfg->nresume;
	pf_state_blob *blobs = pf_calloc(n, sizeof(*blobs));
	uint8_t **own = pf_calloc(n, sizeof(*own));
	pf_topology saver = { 0 };
	uint64_t lost_rows = 0;
	int ret = blobs && own ? 0 : -ENOMEM;

	*out = blobs;
	*mem = own;
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory");
	for (size_t i = 0; i < n && ret == 0; i++) {
		pf_mix_state st;
		const struct pf_pack_state *q = &st.pack;

		ret = pf_mix_state_decode(&st, cfg->resume[i].data, cfg->resume[i].len, err);
		if (ret < 0)
			break;
		if (i == 0)
			saver = q->saver;
		if (q->saver.num_hosts != saver.num_hosts || q->saver.cores != saver.cores ||
		    q->saver.per_core_batch != saver.per_core_batch)
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "state %zu was saved by one of %u hosts (%u x %u), state "
					   "0 by one of %u (%u x %u): not one job's states", i,
					   q->saver.num_hosts, q->saver.cores, q->saver.per_core_batch,
					   saver.num_hosts, saver.cores, saver.per_core_batch);
		if (ret == 0)
			ret = moved_state(&st, i, &own[i], &blobs[i].len, err);
		blobs[i].data = own[i];
		if (ret == 0) {
			/* The steps go on from the old hosts' (every host's
			 * the same, as their batches' numbers). */
			if (q->step_base + q->step > pk->step_base)
				pk->step_base = q->step_base + q->step;
			if (q->global_step > pk->gstep)
				pk->gstep = q->global_step;
			if (st.skipped > pk->skipped_total)
				pk->skipped_total = st.skipped;
			/* What old host h had in progress is lost: counted by
			 * new host h mod hosts (each once in the pod). */
			if (q->saver.host_index % l->topo.num_hosts == l->topo.host_index) {
				lost_rows += q->lost_rows;
				pk->dropped_records += q->lost_records;
				pk->dropped_tokens += q->lost_values;
			}
		}
		pf_mix_state_release(&st);
	}
	if (ret < 0)
		return ret;
	l->m.pack_rows_dropped += lost_rows;
	/* The packer empty, the run cut here: its steps from 0 again. */
	pk->packer.nopen = 0;
	pk->packer.next_row = 0;
	pk->step = 0;
	pk->recut = true;
	pk->elastic_now = true;
	return 0;
}

void pf_pack_mix_elastic_free(pf_state_blob *blobs, uint8_t **mem, size_t n)
{
	for (size_t i = 0; mem && i < n; i++)
		pf_free(mem[i]);
	pf_free(mem);
	pf_free(blobs);
}

/* ------------------------------------------------------------------ */
/* Courses                                                              */

void pf_pack_mix_courses_free(pf_mix_course_set *cs)
{
	for (size_t i = 0; cs->c && i < cs->n; i++)
		pf_mix_course_release(&cs->c[i]);
	pf_free(cs->c);
	memset(cs, 0, sizeof(*cs));
}

int pf_pack_mix_courses(const pf_packing *l, const pf_pack_run *pk, bool every,
			pf_mix_course_set *cs, pf_error *err)
{
	uint32_t hosts = every ? l->topo.num_hosts : 1;
	int ret = 0;

	cs->c = pf_calloc((size_t)hosts * pk->nsrc, sizeof(*cs->c));
	cs->n = (size_t)hosts * pk->nsrc;
	if (!cs->c) {
		cs->n = 0;
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	}
	for (uint32_t h = 0; h < hosts && ret == 0; h++)
		for (size_t k = 0; k < pk->nsrc && ret == 0; k++)
			ret = pf_mixture_course_of(pk->mix, k, every ? h : l->topo.host_index,
						   &cs->c[(size_t)h * pk->nsrc + k], err);
	if (ret < 0)
		pf_pack_mix_courses_free(cs);
	return ret;
}

int pf_pack_mix_walker(const pf_packing *l, const pf_pack_run *pk, pf_mixed *mx,
		       pf_mix_course_set *cs, pf_error *err)
{
	int ret = pf_pack_mix_courses(l, pk, false, cs, err);

	if (ret < 0)
		return ret;
	/* Through a copy of the mixture's schedule: any thread. */
	ret = pf_pack_mix_mixed(l, pk, pk->mix, true, mx);
	if (ret < 0) {
		pf_pack_mix_courses_free(cs);
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory");
	}
	mx->courses = cs->c;
	mx->own_course = true;
	mx->t0 = pf_mixture_course_step(pk->mix);
	return 0;
}
