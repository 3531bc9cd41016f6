/* SPDX-License-Identifier: Apache-2.0 */
/* A packed mixture (pack_length with sources): a mixture's records, dealt
 * as the mixture deals them, then packed as one loader's are (pack.c), so
 * that a row holds segments of several sources (seqio's mixtures with
 * packing, Grain's mix then pack).
 *
 * The inner loader is a mixture (loader/mix/) of one core of
 * PF_PACK_GROUP rows a step whose sources read the inner spec (each
 * packed feature's values capped, and its full length beside them) and
 * keep each row's source.  Once every source is open, and before the
 * mixture fixes its run (its shares, its schedule, its end), every
 * source's records' packed lengths are gathered (pack_gather.c: each
 * file read once, by one host of a pod, and exchanged), from which a
 * mixture weighing tokens (mix_unit) takes its shares.  The run is then
 * planned as one packed epoch on every host (loader/plan/pack_plan.c,
 * pf_pack_plan_mixed(): each host's records as the mixture deals them,
 * each source's epochs one after another): its steps the fewest rows any
 * host makes over its rows a step, the rows a host makes past them
 * dropped and counted.  The mixture has no epochs of its own (its sources
 * have theirs): the run is the packed epoch.
 *
 * A checkpoint is the inner mixture's state at the start of a group from
 * which the rows not yet delivered are rebuilt (built from where each
 * source was then: pf_mixture_mark(), pf_mixture_state_at()) and the
 * packer there, in the mixture's state blob (its pack part), with each
 * source's state past the records the packer had taken by the save.  It
 * resumes bit for bit on the topology it was saved with, and on another
 * elastically (pack_mix_elastic.c).
 *
 * skip_steps: this host's packer walked over its records as the mixture
 * deals them, from the run's start (pack_skip.c, through the plan's
 * pf_pack_mixed_walk() over its sources' courses), to the last step of
 * the mixture before which it has opened no row of the new first packed
 * step; the mixture skips to it (pf_mix_opts.skip, before ready()), the
 * packer starts there.
 *
 * Direct placement (pack_direct.c) as one loader's: each source's decode
 * threads write a record planned ahead straight into its packed rows,
 * its place in the run the one the mixture mapped it to
 * (pf_mixture_inner_index()); the plan's order is this host's rows'
 * lengths (pf_pack_plan_mixed()).
 *
 * Not here: packing itself (pack.c), the mixture (loader/mix/), the
 * order (loader/plan/). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pack_internal.h"

/* What the mixture's callbacks are handed: the gather's, and an elastic
 * resume's every host's courses (made once, while its bridges are
 * open). */
typedef struct mix_open {
	pf_packing *l;
	pf_pack_run *pk;
	const pf_loader_config *cfg;
	const pf_spec *lspec;
	pf_mix_course_set every;
} mix_open;

/* "source 'name': cause" for source k of the config. */
static int source_error(const pf_loader_config *cfg, size_t k, pf_error *err)
{
	char msg[sizeof(err->msg)];

	snprintf(msg, sizeof(msg), "source '%s': %.*s",
		 cfg->sources[k].name ? cfg->sources[k].name : "(unnamed)",
		 (int)sizeof(msg) - 80, err->msg);
	memcpy(err->msg, msg, sizeof(msg));
	return err->code;
}

/* Every source open: its records' packed lengths, the pod's hosts each
 * reading their share (every host gathers every source, in order), and
 * the mean tokens (the first packed feature's values, capped as packing
 * caps them) of a record of each. */
static int gather(void *ctx, pf_mixture *m, double *tokens, pf_error *err)
{
	mix_open *mo = ctx;
	pf_pack_run *pk = mo->pk;

	for (size_t k = 0; k < pk->nsrc; k++) {
		pf_loader_config sc = *mo->cfg;
		pf_pack_lengths_stats st = { 0 };
		uint64_t sum = 0, n;
		int ret;

		/* The source's own dataset, as its loader reads it. */
		sc.sources = NULL;
		sc.nsources = 0;
		sc.paths = mo->cfg->sources[k].paths;
		sc.npaths = mo->cfg->sources[k].npaths;
		ret = pf_pack_lengths(pf_mixture_source(m, k), &sc, mo->lspec, pk->nf, 0, err,
				      &pk->src_lengths[k], &pk->src_nlengths[k], &st);
		if (ret < 0)
			return source_error(mo->cfg, k, err);
		pk->lstats.from_index += st.from_index;
		pk->lstats.tails += st.tails;
		pk->lstats.files += st.files;
		pk->lstats.exchanged += st.exchanged;
		n = pk->src_nlengths[k];
		for (uint64_t r = 0; r < n; r++) {
			uint32_t v = pk->src_lengths[k][r * pk->nf];

			sum += v < pk->cap ? v : pk->cap;
		}
		tokens[k] = n ? (double)sum / (double)n : 0;
	}
	return 0;
}

/* The plan's row sources: the inner mixture's, as host `host` deals
 * them. */
static void row_sources(void *ctx, uint32_t host, uint64_t t, uint64_t n, uint8_t *rs)
{
	pf_mixture_row_sources(ctx, host, t, n, rs);
}

int pf_pack_mix_mixed(const pf_packing *l, const pf_pack_run *pk, pf_mixture *m, bool deal,
		      pf_mixed *mx)
{
	pf_order *orders = pf_calloc(pk->nsrc, sizeof(*orders));
	pf_mix_deal *d = deal ? pf_mix_deal_new(m) : NULL;

	if (!orders || (deal && !d)) {
		pf_free(orders);
		pf_mix_deal_free(d);
		return -ENOMEM;
	}
	for (size_t k = 0; k < pk->nsrc; k++)
		pf_pipe_order(pf_mixture_source(m, k), &orders[k]);
	*mx = (pf_mixed){
		.nsources = pk->nsrc, .orders = orders,
		.lengths = (const uint32_t *const *)pk->src_lengths, .rows = PF_PACK_GROUP,
		.row_sources = deal ? pf_mix_deal_rows : row_sources, .ctx = deal ? (void *)d : m,
		.t0 = 0, .t1 = pf_mixture_end(m),
		.hosts = l->topo.num_hosts, .host_index = l->topo.host_index,
	};
	return 0;
}

void pf_pack_mix_mixed_release(pf_mixed *mx)
{
	pf_free((void *)mx->orders);
	if (mx->row_sources == pf_mix_deal_rows)
		pf_mix_deal_free(mx->ctx);
	mx->orders = NULL;
}

/* An elastic resume's courses (every new host's sources from the cut),
 * made once, while the bridges are open: for the plan, and the range of
 * a skip. */
static int every_course(mix_open *mo, pf_error *err)
{
	if (!mo->pk->elastic_now || mo->every.c)
		return 0;
	return pf_pack_mix_courses(mo->l, mo->pk, true, &mo->every, err);
}

/* The run's steps on every host, and this host's rows, from the run's
 * start (a resumed run's too: pk->step its steps delivered); the direct
 * placement's order (this host's rows' lengths from the run's first
 * step).  A run of max_steps follows each host's stream as far as the
 * rows of its steps alone (a long run's plan is then as long as the
 * steps asked, and a resumed run's as long as its own max_steps): its
 * steps then those every host makes of what the plan followed, at least
 * the steps asked.  An endless run (epochs without end, no max_steps) has
 * no last step: nothing is dropped, and only the order is planned.
 * An elastic resume plans from the cut, every new host through its
 * courses, the whole run (its states keep the plan); a run resumed from
 * the state of a cut one takes the plan its state says. */
static int plan(mix_open *mo, pf_error *err)
{
	pf_packing *l = mo->l;
	pf_pack_run *pk = mo->pk;
	uint64_t n = 0, want = l->cfg.max_steps ? (pk->step + l->cfg.max_steps) * pk->B : 0;
	bool endless;
	pf_mixed mx;
	int ret;

	if (pk->recut && !pk->elastic_now)
		return 0;	/* restore_packer() took it */
	if (pk->elastic_now)
		want = 0;
	endless = !want && pf_mixture_end(pk->mix) >= PF_MIX_NO_END;
	ret = every_course(mo, err);
	if (ret < 0)
		return ret;
	ret = pf_pack_mix_mixed(l, pk, pk->mix, false, &mx);
	if (ret < 0)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory planning the packed mixture");
	mx.want_rows = want;
	mx.order = pk->direct ? pk->order : NULL;
	mx.order0 = pk->order0;
	mx.order_cap = pk->order_room;
	mx.order_n = &n;
	mx.endless = endless;
	if (pk->elastic_now) {
		mx.courses = mo->every.c;
		mx.t0 = pf_mixture_course_step(pk->mix);
	}
	ret = pf_pack_plan_mixed(&mx, l->cfg.seed, &pk->packer, pk->nf, pk->cap, pk->B,
				 &pk->epoch_steps, &pk->epoch_rows);
	pf_pack_mix_mixed_release(&mx);
	pk->norder = pk->order0 + n;
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "planning the packed mixture: %s",
				    pf_strerror(ret));
	return 0;
}

/* skip_steps (before ready()): the mixture's steps to skip, the packer
 * and the packed steps where they end (pack_skip.c): this host's walk
 * from the run's start, every host's steps as far as the new first one
 * (from the run's start, or an elastic resume's cut; a run resumed from
 * a cut one's state: its plan). */
static int skip(void *ctx, pf_mixture *m, uint64_t *steps, pf_error *err)
{
	mix_open *mo = ctx;
	pf_pack_run *pk = mo->pk;
	pf_mix_course_set own = { 0 };
	pf_mixed all, walk;
	bool every = !pk->recut || pk->elastic_now;
	int ret;

	pk->mix = m;
	ret = every_course(mo, err);
	if (ret == 0 && every)
		ret = pf_pack_mix_mixed(mo->l, pk, m, false, &all);
	if (ret == 0 && every && pk->elastic_now) {
		all.courses = mo->every.c;
		all.t0 = pf_mixture_course_step(m);
	}
	if (ret == 0) {
		ret = pf_pack_mix_walker(mo->l, pk, &walk, &own, err);
		if (ret == 0) {
			ret = pf_pack_mix_skip(mo->l, pk, every ? &all : NULL, &walk,
					       pf_mixture_first_step(m), mo->cfg->skip_steps, steps,
					       err);
			pf_pack_mix_mixed_release(&walk);
			pf_pack_mix_courses_free(&own);
		}
		if (every)
			pf_pack_mix_mixed_release(&all);
	}
	if (ret == -ENOMEM && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory planning the packed mixture");
	return ret;
}

/* The run's shape fixed, before any source decodes a record: direct
 * placement (pack_direct.c), the plan, the output batches and the first
 * groups planned ahead (as a dataset's inner loader's decode threads
 * start after them). */
static int ready(void *ctx, pf_mixture *m, pf_error *err)
{
	mix_open *mo = ctx;
	pf_pack_run *pk = mo->pk;
	int ret;

	pk->mix = m;
	/* (Not in a cut run: its plan is not this host's order from the
	 * run's start, and its bridges' rows are copied.) */
	ret = pk->recut ? 0 : pf_pack_direct_create(mo->l, pk);
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory creating the loader");
	ret = plan(mo, err);
	if (ret == 0)
		ret = pf_pack_make_outs(mo->l, pk, err);
	if (ret < 0)
		return ret;
	/* A resumed run delivered: nothing left to pack. */
	pk->epoch = pk->step >= pk->epoch_steps ? 1 : 0;
	pf_pack_direct_plan(mo->l, pk, 0, pf_mixture_first_step(m), true);
	return 0;
}

/* The states to resume from, their pack parts checked against this
 * loader's packing: on the topology they were saved with, this host's
 * (*mine its index in cfg->resume, st it); on another, every old host's
 * (*elastic). */
static int pick_state(pf_packing *l, pf_pack_run *pk, const pf_loader_config *cfg,
		      pf_mix_state *st, size_t *mine, bool *elastic, pf_error *err)
{
	*elastic = false;
	*mine = SIZE_MAX;
	for (size_t i = 0; i < cfg->nresume; i++) {
		const struct pf_pack_state *q = &st->pack;
		int ret;

		pf_mix_state_release(st);
		ret = pf_mix_state_decode(st, cfg->resume[i].data, cfg->resume[i].len, err);
		if (ret < 0)
			return ret;
		if (!st->has_pack)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "state %zu was saved by a mixture without packing; "
					    "this one packs (pack_length %u)", i, cfg->pack_length);
		if (q->length != cfg->pack_length || q->mode != (uint32_t)cfg->pack_mode ||
		    q->pool != pk->packer.pool || q->nf != pk->nf)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "state %zu was saved packing %u features into rows "
					    "of %u (%s, pool %u); this loader packs %u into rows "
					    "of %u (%s, pool %u)", i, q->nf, q->length,
					    q->mode == PF_PACK_CONCAT ? "concat" : "first_fit",
					    q->pool, pk->nf, cfg->pack_length,
					    pf_pack_mode_name(cfg->pack_mode), pk->packer.pool);
		if (q->saver.num_hosts != l->topo.num_hosts || q->saver.cores != l->topo.cores ||
		    q->saver.per_core_batch != l->topo.per_core_batch)
			*elastic = true;
		else if (q->saver.host_index == l->topo.host_index && *mine == SIZE_MAX)
			*mine = i;
	}
	if (*elastic)
		return 0;	/* pf_pack_mix_elastic() checks them together */
	if (*mine != SIZE_MAX) {
		pf_mix_state_release(st);
		return pf_mix_state_decode(st, cfg->resume[*mine].data, cfg->resume[*mine].len,
					   err);
	}
	return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
			    "the states are of this topology (%u hosts, %u x %u), but none is "
			    "host %u's", l->topo.num_hosts, l->topo.cores,
			    l->topo.per_core_batch, l->topo.host_index);
}

/* The packer, the steps and the plan as the state says them. */
static void restore_packer(pf_pack_run *pk, const struct pf_pack_state *q)
{
	pk->packer.next_row = q->next_row;
	pk->packer.nopen = q->nopen;
	for (uint32_t r = 0; r < q->nopen; r++) {
		pf_pack_row *row = &pk->packer.open[r];

		memset(row, 0, sizeof(*row));
		row->id = q->id[r];
		row->segments = q->segments[r];
		for (uint32_t f = 0; f < q->nf; f++)
			row->fill[f] = q->fill[r][f];
	}
	pk->step = q->step;
	pk->step_base = q->step_base;
	pk->gstep = q->global_step;
	pk->epoch_steps = q->epoch_steps;
	pk->epoch_rows = q->epoch_rows;
	/* A cut run's plan is the state's (plan() keeps it). */
	pk->recut = q->recut;
}

int pf_pack_mix_create(pf_packing *l, pf_pack_run *pk, const pf_loader_config *cfg,
		       pf_loader_config *icfg, const pf_spec *inner_spec, const pf_spec *lspec,
		       pf_error *err)
{
	mix_open mo = { .l = l, .pk = pk, .cfg = cfg, .lspec = lspec };
	pf_mix_state st = { 0 };
	pf_state_blob *moved = NULL;
	uint8_t **moved_mem = NULL;
	bool elastic = false;
	size_t mine = 0;
	int ret = 0;

	pk->nsrc = cfg->nsources;
	pk->src_lengths = pf_calloc(pk->nsrc, sizeof(*pk->src_lengths));
	pk->src_nlengths = pf_calloc(pk->nsrc, sizeof(*pk->src_nlengths));
	pk->src_records = pf_calloc(pk->nsrc, sizeof(*pk->src_records));
	pk->src_tokens = pf_calloc(pk->nsrc, sizeof(*pk->src_tokens));
	pk->mark_next = pf_calloc(pk->nsrc, sizeof(*pk->mark_next));
	if (!pk->src_lengths || !pk->src_nlengths || !pk->src_records || !pk->src_tokens ||
	    !pk->mark_next)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory creating the loader");
	if (cfg->nresume) {
		ret = pick_state(l, pk, cfg, &st, &mine, &elastic, err);
		if (ret == 0 && elastic) {
			/* Every old host's, each source past its packer's rows,
			 * resumed elastically by the inner mixture. */
			ret = pf_pack_mix_elastic(l, pk, cfg, &moved, &moved_mem, err);
			icfg->resume = moved;
			icfg->nresume = cfg->nresume;
		} else if (ret == 0) {
			icfg->resume = &cfg->resume[mine];
			icfg->nresume = 1;
			restore_packer(pk, &st.pack);
			pk->skipped_total = st.skipped;
		}
		if (ret < 0)
			goto out;
	}
	/* Its sources' records in file order are what the plan reads: no
	 * wrapped records at an epoch's end. */
	icfg->remainder = PF_REMAINDER_DROP;
	/* Where the run starts, before skip_steps (pf_loader_records_of()),
	 * and the packer's settings for its walks. */
	pk->mix_step0 = pk->step;
	pk->mix_gstep0 = pk->gstep;
	pk->course.packer = pk->packer;
	/* The inner rows' sources: the mixture's feature after the spec's. */
	pk->src_tensor = inner_spec->n;
	ret = pf_mixture_create(&pk->mix, icfg, &(pf_mix_opts){
		.spec = inner_spec, .lspec = cfg->on_corrupt == PF_CORRUPT_FAIL ? lspec : NULL,
		.source_ids = true, .inner_index = !pk->recut && pf_pack_direct_wanted(cfg),
		.elastic = elastic, .bridge_rows = pk->B < PF_PACK_GROUP ? pk->B : PF_PACK_GROUP,
		.opened = gather, .skip = cfg->skip_steps ? skip : NULL,
		.ready = ready, .ctx = &mo }, err);
	/* (The states were the inner mixture's during its create only.) */
	pf_pack_mix_elastic_free(moved, moved_mem, cfg->nresume);
	moved = NULL;
	moved_mem = NULL;
	if (ret < 0) {
		pk->mix = NULL;		/* freed with it */
		goto out;
	}
	pk->have_course = true;
	/* A plan alone (plan_only): the mixture called no ready(); its
	 * steps planned here (no order, no batches). */
	if (cfg->plan_only) {
		ret = plan(&mo, err);
		if (ret < 0)
			goto out;
	}
	/* The first checkpoint: the rows its sources' loaders had given at
	 * the run's start (of the batch each is inside, after a restore or
	 * a skip). */
	ret = pf_mixture_mark(pk->mix, pk->mark_next);
	if (ret == 0)
		ret = pf_pack_push_snap(pk, &(pack_snap){ .epoch = 0,
							  .step = pf_mixture_first_step(pk->mix),
							  .gstep = pk->gstep, .marks = pk->mark_next });
	else
		for (size_t k = 0; k < pk->nsrc; k++)
			pf_mix_mark_release(&pk->mark_next[k]);
out:
	pf_pack_mix_elastic_free(moved, moved_mem, cfg->nresume);
	pf_pack_mix_courses_free(&mo.every);
	pf_mix_state_release(&st);
	return ret;
}

int64_t pf_pack_mix_save_state(pf_packing *l, const pack_snap *sn,
			       const struct pf_pack_state *q, void *buf, size_t cap)
{
	pf_pack_run *pk = l->pack;
	uint64_t *past = pf_calloc(pk->nsrc, sizeof(*past)), sum = 0;
	struct pf_pack_state own = *q;
	int64_t n;

	if (!past)
		return -ENOMEM;
	/* The rows of each source the packer took by now: the rows the
	 * mixture handed out, less those of the inner batch in hand not yet
	 * placed (those past the checkpoint's sum to q->ahead). */
	pf_mixture_taken(pk->mix, past);
	for (uint32_t r = pk->ib ? pk->irow : 0; pk->ib && r < pk->ib->per_core_batch; r++) {
		uint32_t k = pf_pack_mix_source(pk, pk->ib, r);

		if (k < pk->nsrc)
			past[k]--;
	}
	for (size_t k = 0; k < pk->nsrc; k++) {
		sum += past[k] - sn->marks[k].used;
		/* (A bridge that ended in the batch in hand: its rows not
		 * placed are lost, not read again.) */
		if (past[k] < pf_mixture_loader_base(pk->mix, k))
			own.lost_records += pf_mixture_loader_base(pk->mix, k) - past[k];
	}
	if (!q->ahead) {	/* the run delivered: nothing ahead */
		for (size_t k = 0; k < pk->nsrc; k++)
			past[k] = sn->marks[k].used;
	} else if (sum != q->ahead) {
		pf_free(past);
		return -EIO;	/* cannot be */
	}
	/* What the rows in progress hold: an elastic resume loses them
	 * (the rows, the pieces of records, the first feature's values). */
	for (unsigned j = 0; q->ahead && j < pk->window; j++) {
		const pack_out *o = pk->inprog[j];

		if (!o)
			continue;
		own.lost_records += o->segments;
		for (uint32_t r = 0; r < pk->B; r++) {
			own.lost_values += o->fill[(size_t)r * pk->nf];
			own.lost_rows += o->fill[(size_t)r * pk->nf] != 0;
		}
	}
	own.recut = pk->recut;
	n = pf_mixture_state_at(pk->mix, sn->step, sn->marks, past, &own, pk->skipped_total, buf,
				cap);
	pf_free(past);
	return n;
}

uint32_t pf_pack_mix_source(const pf_pack_run *pk, const pf_batch *ib, uint32_t r)
{
	if (!pk->mix)
		return UINT32_MAX;
	return (uint32_t)((const int32_t *)ib->core[0].tensors[pk->src_tensor].data)[r];
}
