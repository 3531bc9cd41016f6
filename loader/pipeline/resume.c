/* SPDX-License-Identifier: Apache-2.0 */
/* Resume: a loader started from saved states, and its consumer's position
 * saved as one.  With this host's own state of the same topology the run
 * goes on as if never stopped; from another topology (elastic resume) the
 * old hosts' remaining records are merged and cut among the new hosts as
 * a fresh epoch's are.  What a resumed epoch reads is then l->resume, its
 * pieces of the old hosts' streams, walked by schedule.c.  Not here: the
 * state's encoding (state.c), the plan of an epoch (loader/plan/). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pipeline_internal.h"

/* ------------------------------------------------------------------ */
/* Restoring                                                            */

/* A state must be of this dataset and this order. */
static int state_matches(const pf_pipe *l, const pf_state *s, size_t i, pf_error *err)
{
	if (s->has_pack)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "state %zu was saved by a packing loader (pack_length %u, "
				    "%s); this loader does not pack: give it the same "
				    "pack_length", i, s->pack.length,
				    s->pack.mode == PF_PACK_CONCAT ? "concat" : "first_fit");
	if (s->fingerprint != l->ds->fingerprint || s->records != l->ds->records)
		return pf_error_set(err, -ESTALE, PF_OFFSET_NONE, 0,
				    "state %zu is of another dataset (%llu records, "
				    "fingerprint %016llx; these files: %llu records, %016llx)",
				    i, (unsigned long long)s->records,
				    (unsigned long long)s->fingerprint,
				    (unsigned long long)l->ds->records,
				    (unsigned long long)l->ds->fingerprint);
	if (s->global != (l->slice != 0))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "state %zu was saved with the %s shuffle; the loader is "
				    "configured with the %s one", i, s->global ? "global" : "window",
				    l->slice ? "global" : "window");
	if (s->seed != l->cfg.seed || s->shuffle != l->cfg.shuffle ||
	    s->remainder != (uint32_t)l->cfg.remainder)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "state %zu was saved with seed %llu, shuffle %s, remainder "
				    "%s; the loader is configured with seed %llu, shuffle %s, "
				    "remainder %s", i, (unsigned long long)s->seed,
				    s->shuffle ? "on" : "off", s->remainder ? "wrap" : "drop",
				    (unsigned long long)l->cfg.seed,
				    l->cfg.shuffle ? "on" : "off",
				    l->cfg.remainder ? "wrap" : "drop");
	if (!s->fresh) {
		uint64_t quota = pf_plan_steps(l->ds->records, &s->origin, l->cfg.remainder) *
				 s->origin.cores * s->origin.per_core_batch;

		for (size_t k = 0; k < s->npieces; k++)
			if (s->pieces[k].end > quota)
				return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
						    "state %zu: piece %zu ends at output %llu of "
						    "host %u's stream, which has %llu", i, k,
						    (unsigned long long)s->pieces[k].end,
						    s->pieces[k].host, (unsigned long long)quota);
	}
	return 0;
}

static bool same_topology(const pf_topology *a, const pf_topology *b)
{
	return a->num_hosts == b->num_hosts && a->cores == b->cores &&
	       a->per_core_batch == b->per_core_batch;
}

/* Cut [from, to) of the concatenation of src's pieces into dst. */
static size_t cut_pieces(const pf_piece *src, size_t n, uint64_t from, uint64_t to,
			 pf_piece *dst)
{
	size_t k = 0;
	uint64_t at = 0;

	for (size_t i = 0; i < n && at < to; i++) {
		uint64_t len = src[i].end - src[i].begin;
		uint64_t lo = from > at ? from - at : 0, hi = to - at < len ? to - at : len;

		if (lo < hi)
			dst[k++] = (pf_piece){ src[i].host, src[i].begin + lo, src[i].begin + hi };
		at += len;
	}
	return k;
}

/* The remaining records of the epoch, over all the old hosts' states in
 * host order, are cut among the new hosts as a fresh epoch's records
 * are: host h takes [M h / H, M (h + 1) / H) and delivers whole global
 * batches of it (the rest dropped, or wrapped from its start). */
static int resume_elastic(pf_pipe *l, pf_state *st, size_t n, pf_error *err)
{
	const pf_state *s0 = &st[0];
	uint32_t hosts = s0->saver.num_hosts;
	pf_piece *all = NULL;
	size_t nall = 0, k;
	uint64_t m = 0, lo, hi, len, quota, global;
	uint64_t h = l->topo.host_index, nh = l->topo.num_hosts;
	uint64_t origin_quota = pf_plan_steps(l->ds->records, &s0->origin, l->cfg.remainder) *
				s0->origin.cores * s0->origin.per_core_batch;
	bool all_fresh = true;

	for (uint32_t want = 0; want < hosts; want++) {
		const pf_state *s = NULL;

		for (size_t i = 0; i < n; i++) {
			if (st[i].saver.host_index != want)
				continue;
			if (s)
				return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
						    "two states of host %u of %u", want, hosts);
			s = &st[i];
		}
		if (!s)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "resuming %u hosts as %llu needs the state of "
					    "every old host; host %u's is missing", hosts,
					    (unsigned long long)nh, want);
		/* A host between epochs has its whole stream of the next one
		 * left, in the topology it saved with. */
		if (!same_topology(&s->saver, &s0->saver) || s->epoch != s0->epoch ||
		    !same_topology(&s->origin, &s0->origin) ||
		    s->origin_block != s0->origin_block ||
		    s->origin_permute != s0->origin_permute ||
		    s->origin_slice != s0->origin_slice ||
		    s->origin_group != s0->origin_group)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "the states are not of one job at one epoch: host "
					    "%u is at epoch %u of %u hosts, host %u at epoch %u "
					    "of %u hosts", s0->saver.host_index, s0->epoch,
					    s0->saver.num_hosts, s->saver.host_index, s->epoch,
					    s->saver.num_hosts);
		all_fresh &= s->fresh;
		nall += s->fresh ? 1 : s->npieces;
		m += s->fresh ? origin_quota : pf_state_remaining(s);
		if (s->global_step > l->gstep0)
			l->gstep0 = s->global_step;
		if (s->step_in_epoch > l->resume.step0)
			l->resume.step0 = s->step_in_epoch;
	}
	l->start_epoch = s0->epoch;
	if (all_fresh) {
		l->resume.step0 = 0;
		return 0;
	}
	all = pf_calloc(nall ? nall : 1, sizeof(*all));
	if (!all)
		return -ENOMEM;
	k = 0;
	for (uint32_t want = 0; want < hosts; want++)
		for (size_t i = 0; i < n; i++)
			if (st[i].saver.host_index != want) {
				continue;
			} else if (st[i].fresh) {
				if (origin_quota)
					all[k++] = (pf_piece){ want, 0, origin_quota };
			} else if (st[i].npieces) {
				/* (none: the host delivered all its stream) */
				memcpy(all + k, st[i].pieces, st[i].npieces * sizeof(*all));
				k += st[i].npieces;
			}
	nall = k;
	lo = (uint64_t)((pf_u128)m * h / nh);
	hi = (uint64_t)((pf_u128)m * (h + 1) / nh);
	len = hi - lo;
	global = (uint64_t)l->host_batch * nh;
	quota = (l->cfg.remainder == PF_REMAINDER_WRAP ? (m + global - 1) / global
						       : m / global) * l->host_batch;
	if (quota > len && len == 0) {
		pf_free(all);
		return pf_error_set(err, -ERANGE, PF_OFFSET_NONE, 0,
				    "host %llu has no records to wrap around: %llu records "
				    "left for %llu hosts", (unsigned long long)h,
				    (unsigned long long)m, (unsigned long long)nh);
	}
	/* At most nall pieces per pass over the share, and one more pass per
	 * len records the quota exceeds it by. */
	k = quota > len ? (size_t)((quota + len - 1) / len) : 1;
	l->resume.pieces = pf_calloc(nall * k + 1, sizeof(*l->resume.pieces));
	if (!l->resume.pieces) {
		pf_free(all);
		return -ENOMEM;
	}
	for (uint64_t got = 0; got < quota;) {
		uint64_t take = quota - got < len ? quota - got : len;

		l->resume.npieces += cut_pieces(all, nall, lo, lo + take,
						l->resume.pieces + l->resume.npieces);
		got += take;
	}
	pf_free(all);
	l->resume.origin = s0->origin;
	l->resume.w = s0->origin_block;
	l->resume.permute = s0->origin_permute;
	l->resume.slice = s0->origin_slice;
	l->resume.group = s0->origin_group;
	l->resume.steps = quota / l->host_batch;
	l->resume.dropped = len > quota ? len - quota : 0;
	l->resume.wrapped = quota > len ? quota - len : 0;
	l->resumed = true;
	return 0;
}

int pf_resume_elastic_share(const pf_pipe *l, uint32_t host, pf_state *st, size_t n,
			    pf_piece **pieces, size_t *npieces, pf_error *err)
{
	pf_pipe *tmp = pf_malloc(sizeof(*tmp));
	int ret;

	*pieces = NULL;
	*npieces = 0;
	if (!tmp)
		return -ENOMEM;
	/* A copy that only resume_elastic() reads and writes. */
	memcpy(tmp, l, sizeof(*tmp));
	tmp->topo.host_index = host;
	memset(&tmp->resume, 0, sizeof(tmp->resume));
	tmp->resumed = false;
	ret = resume_elastic(tmp, st, n, err);
	if (ret == 0 && tmp->resumed) {
		*pieces = tmp->resume.pieces;
		*npieces = tmp->resume.npieces;
	} else {
		pf_free(tmp->resume.pieces);
	}
	pf_free(tmp);
	return ret;
}

int pf_resume_elastic_start(const pf_pipe *l, uint32_t host, pf_state *st, size_t n,
			    pf_run_start *out, pf_error *err)
{
	pf_pipe *tmp = pf_malloc(sizeof(*tmp));
	int ret;

	memset(out, 0, sizeof(*out));
	if (!tmp)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	/* A copy that only resume_elastic() reads and writes. */
	memcpy(tmp, l, sizeof(*tmp));
	tmp->topo.host_index = host;
	memset(&tmp->resume, 0, sizeof(tmp->resume));
	tmp->resumed = false;
	ret = resume_elastic(tmp, st, n, err);
	if (ret == 0) {
		pf_run_start start = { .epoch = tmp->start_epoch, .gstep = tmp->gstep0,
				       .resumed = tmp->resumed, .resume = tmp->resume };

		if (start.resumed)
			start.resume.epoch = tmp->start_epoch;
		ret = pf_run_start_copy(out, &start);
		if (ret < 0)
			pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory");
	}
	pf_free(tmp->resume.pieces);
	pf_free(tmp);
	return ret;
}

/* The remainder of the epoch a state of this topology is inside, for
 * the report of the run that ends it: the plan's, as a fresh epoch has
 * it, when the epoch's streams are this topology's; else (the epoch was
 * cut from another topology's streams) what the state carries. */
static int resumed_remainder(pf_pipe *l, const pf_state *own, pf_error *err)
{
	pf_epoch_plan plan = { 0 };
	int ret;

	if (!same_topology(&own->origin, &l->topo)) {
		l->resume.dropped = own->epoch_dropped;
		l->resume.wrapped = own->epoch_wrapped;
		return 0;
	}
	ret = pf_plan_epoch(&plan, l->ds, &l->topo, l->cfg.seed, own->epoch, l->cfg.shuffle,
			    own->origin_slice, own->origin_group, l->cfg.remainder);
	if (ret < 0) {
		pf_plan_release(&plan);
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				    "cannot plan epoch %u to resume it", own->epoch);
	}
	l->resume.dropped = plan.share > plan.quota ? plan.share - plan.quota : 0;
	l->resume.wrapped = plan.stream_len > plan.share ? plan.stream_len - plan.share : 0;
	pf_plan_release(&plan);
	return 0;
}

/* Restore from cfg->resume: this host's own state when the topology is
 * the one it was saved with (the batches are then those of a run never
 * stopped), else the states of every old host, merged. */
int pf_resume_restore(pf_pipe *l, pf_error *err)
{
	size_t n = l->cfg.nresume;
	pf_state *st = pf_calloc(n, sizeof(*st));
	const pf_state *own = NULL;
	bool this_topology = false;
	int ret = 0;

	if (!st)
		return -ENOMEM;
	for (size_t i = 0; i < n && ret == 0; i++) {
		ret = pf_state_decode(&st[i], l->cfg.resume[i].data, l->cfg.resume[i].len, err);
		if (ret < 0) {
			char msg[sizeof(err->msg)];

			snprintf(msg, sizeof(msg), "state %zu: %.*s", i,
				 (int)sizeof(msg) - 32, err->msg);
			memcpy(err->msg, msg, sizeof(msg));
			break;
		}
		ret = state_matches(l, &st[i], i, err);
		/* The job's skips so far (every host's are the same). */
		if (ret == 0 && st[i].skipped > l->skipped_total)
			l->skipped_total = st[i].skipped;
	}
	for (size_t i = 0; i < n && ret == 0; i++) {
		this_topology |= same_topology(&st[i].saver, &l->topo);
		if (same_topology(&st[i].saver, &l->topo) &&
		    st[i].saver.host_index == l->topo.host_index)
			own = &st[i];
	}
	if (ret == 0 && this_topology && !own)
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "the states are of this topology (%u hosts, %u x %u), "
				   "but none is host %u's", l->topo.num_hosts, l->topo.cores,
				   l->topo.per_core_batch, l->topo.host_index);
	/* The job's frame groups are those of its states: the epoch they
	 * are in and the epochs after are planned in them, whatever this
	 * loader's dataset and configuration would choose (states saved
	 * before the groups were sized by the window name 10 (pcb - 1)
	 * frames; those saved before groups, none: later epochs take this
	 * loader's). */
	if (ret == 0 && n && l->slice && st[0].global && st[0].origin_group)
		l->group = (own ? own : &st[0])->origin_group;
	if (ret == 0 && own) {
		l->start_epoch = own->epoch;
		l->gstep0 = own->global_step;
		if (!own->fresh) {
			uint64_t left = pf_state_remaining(own);

			l->resume = (epoch_run){
				.epoch = own->epoch, .origin = own->origin,
				.w = own->origin_block, .permute = own->origin_permute,
				.slice = own->origin_slice, .group = own->origin_group,
				.npieces = own->npieces, .steps = left / l->host_batch,
				.step0 = own->step_in_epoch,
			};
			l->resume.pieces = pf_calloc(own->npieces + 1, sizeof(*own->pieces));
			if (!l->resume.pieces)
				ret = -ENOMEM;
			else
				memcpy(l->resume.pieces, own->pieces,
				       own->npieces * sizeof(*own->pieces));
			if (left % l->host_batch)
				ret = pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
						   "state of host %u leaves %llu records, not "
						   "whole batches of %u", own->saver.host_index,
						   (unsigned long long)left, l->host_batch);
			if (ret == 0)
				ret = resumed_remainder(l, own, err);
			l->resumed = true;
		}
	} else if (ret == 0) {
		ret = resume_elastic(l, st, n, err);
	}
	if (ret == 0 && l->resumed)
		l->resume.epoch = l->start_epoch;
	for (size_t i = 0; i < n; i++)
		pf_state_release(&st[i]);
	pf_free(st);
	return ret;
}

/* Slots one block of the resumed epoch can touch: W / B when its pieces
 * start on whole batches, else up to two more (a step shared with the
 * block before and one with the block after). */
uint32_t pf_resume_spb(const pf_pipe *l)
{
	const epoch_run *er = &l->resume;
	bool aligned = er->w % l->host_batch == 0;
	uint64_t out = 0;

	for (size_t i = 0; i < er->npieces && aligned; i++) {
		aligned = er->pieces[i].begin % l->host_batch == 0 && out % l->host_batch == 0;
		out += er->pieces[i].end - er->pieces[i].begin;
	}
	return er->w / l->host_batch + (aligned ? 0 : 2);
}

/* ------------------------------------------------------------------ */
/* Saving                                                               */

/* The state of l's consumer having been handed, in epoch `epoch`, the
 * records before `skip` of its part of the epoch (the steps before
 * `step`; this run's, when it resumed inside that epoch), and nothing
 * after: the next step's global number global_step; fresh: epoch has not
 * started.  pieces: room for l->resume.npieces + 1. */
static void state_at(const pf_pipe *l, uint32_t epoch, uint64_t step, uint64_t global_step,
		     uint64_t skip, bool fresh, pf_state *s, pf_piece *pieces)
{
	const epoch_run *er = l->resumed && l->resume.epoch == epoch ? &l->resume : NULL;
	pf_piece own = { l->topo.host_index, 0, l->steps_per_epoch * l->host_batch };

	*s = (pf_state){
		.fingerprint = l->ds->fingerprint, .records = l->ds->records,
		.seed = l->cfg.seed, .shuffle = l->cfg.shuffle,
		.remainder = (uint32_t)l->cfg.remainder, .saver = l->topo,
		.block = l->wblock, .epoch = epoch, .fresh = fresh,
		.step_in_epoch = fresh ? 0 : step, .global_step = global_step,
		.origin = l->topo, .origin_block = l->wblock, .origin_permute = l->shuffle_rows,
		.global = l->slice != 0, .origin_slice = l->slice, .origin_group = l->group,
		.skipped = l->skipped_total,
	};
	if (fresh)
		return;
	if (er) {
		s->origin = er->origin;
		s->origin_block = er->w;
		s->origin_permute = er->permute;
		s->origin_slice = er->slice;
		s->origin_group = er->group;
		if (!same_topology(&er->origin, &l->topo)) {
			s->epoch_dropped = er->dropped;
			s->epoch_wrapped = er->wrapped;
		}
	}
	s->pieces = pieces;
	for (size_t i = 0, n = er ? er->npieces : 1; i < n; i++) {
		pf_piece p = er ? er->pieces[i] : own;
		uint64_t len = p.end - p.begin;

		if (skip >= len) {	/* also drops an empty own piece */
			skip -= len;
			continue;
		}
		p.begin += skip;
		skip = 0;
		s->pieces[s->npieces++] = p;
	}
}

void pf_resume_state_at(const pf_pipe *l, uint32_t epoch, uint64_t step, uint64_t global_step,
			bool fresh, pf_state *s, pf_piece *pieces)
{
	const epoch_run *er = l->resumed && l->resume.epoch == epoch ? &l->resume : NULL;

	state_at(l, epoch, step, global_step, (step - (er ? er->step0 : 0)) * l->host_batch,
		 fresh, s, pieces);
}

/* The state of the consumer's position, under l->mu.  pieces: room for
 * the pieces of the epoch in progress (one for a fresh epoch). */
static void consumer_state(const pf_pipe *l, pf_state *s, pf_piece *pieces)
{
	if (!l->c_any)
		/* Nothing handed out: where the run started (a fresh epoch
		 * as this host's whole stream, so that it merges with states
		 * of hosts that are inside the epoch). */
		state_at(l, l->start_epoch, l->resumed ? l->resume.step0 : 0, l->gstep0, 0,
			 false, s, pieces);
	else if (l->c_last.epoch_end)
		/* Between epochs: the next starts in the restoring topology. */
		state_at(l, l->c_epoch + 1, 0, l->c_last.global_step + 1, 0, true, s, pieces);
	else
		state_at(l, l->c_epoch, l->c_last.step + 1, l->c_last.global_step + 1,
			 l->c_delivered, false, s, pieces);
}

/* Where the run's batch b is: its epoch and step, and whether it is its
 * epoch's last (the resumed epoch's batches first, from its step0, then
 * whole epochs from the next). */
static void batch_place(const pf_pipe *l, uint64_t b, uint32_t *epoch, uint64_t *step,
			bool *last)
{
	uint64_t spe = l->steps_per_epoch;

	if (l->resumed && b < l->resume.steps) {
		*epoch = l->start_epoch;
		*step = l->resume.step0 + b;
		*last = b + 1 == l->resume.steps;
		return;
	}
	if (l->resumed)
		b -= l->resume.steps;
	*epoch = l->start_epoch + (l->resumed ? 1 : 0) + (uint32_t)(b / spe);
	*step = b % spe;
	*last = *step + 1 == spe;
}

int64_t pf_pipe_state_after(const pf_pipe *l, uint64_t j, void *buf, size_t cap)
{
	pf_piece *pieces = pf_calloc(l->resume.npieces + 1, sizeof(*pieces));
	uint32_t epoch;
	uint64_t step;
	bool last;
	pf_state s;
	int64_t n;

	if (!pieces)
		return -ENOMEM;
	if (j == 0) {	/* as consumer_state() says a run nothing was handed of */
		state_at(l, l->start_epoch, l->resumed ? l->resume.step0 : 0, l->gstep0, 0, false,
			 &s, pieces);
	} else {
		batch_place(l, j - 1, &epoch, &step, &last);
		if (last)
			state_at(l, epoch + 1, 0, l->gstep0 + j, 0, true, &s, pieces);
		else
			pf_resume_state_at(l, epoch, step + 1, l->gstep0 + j, false, &s, pieces);
	}
	n = pf_state_encode(&s, buf, cap);
	pf_free(pieces);
	return n;
}

int64_t pf_pipe_save_state(pf_pipe *l, void *buf, size_t cap)
{
	pf_piece *pieces = pf_calloc(l->resume.npieces + 1, sizeof(*pieces));
	pf_state s;
	int64_t n;

	if (!pieces)
		return -ENOMEM;
	pthread_mutex_lock(&l->mu);
	consumer_state(l, &s, pieces);
	pthread_mutex_unlock(&l->mu);
	n = pf_state_encode(&s, buf, cap);
	pf_free(pieces);
	return n;
}
