/* SPDX-License-Identifier: Apache-2.0 */
/* Packed sequences in the loader (pack_length): the records of an inner
 * loader, which decodes each record's ragged features into rows of their
 * own with their true lengths, placed by the packer (transform/) into
 * packed rows, which make the batches this loader hands out.  Not here:
 * where a record goes in a row (transform/pack.c), reading and decoding
 * (the inner loader's pipeline).
 *
 * The inner loader is an ordinary loader of the same dataset, hosts,
 * seed, shuffle and corrupt-data policy, one core of PF_PACK_GROUP
 * records a step, whose spec is the user's with each ragged feature
 * given a length (L; concat: at least PF_PACK_CONCAT_CAP, so that a
 * record goes on whole into the next rows) and its uncapped length
 * beside it.  Its batches are a pure function of (dataset, seed, epoch,
 * topology), never of its threads, and the packer is a pure function of
 * the records in that order: so are the packed batches.  The packing runs
 * on the consumer's thread inside pf_loader_next(): it copies each
 * record's values once, from the inner batch into its packed row.
 *
 * Rows are numbered in each epoch from 0 as the packer opens them, which
 * is the order they close; row k is row k % B of step k / B (B = cores x
 * per_core_batch).  A step is handed out once all its rows are closed and
 * the step after it is known to exist (its rows opened), or the epoch's
 * records are all placed: then the epoch has floor(rows / B) steps, and
 * the rows after the last step are dropped and counted.
 *
 * Here: creating a packing loader, its plan of an epoch, its face (the
 * pf_loader_*() calls).  The consumer's packing of the inner batches
 * into rows is in pack_rows.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pack_internal.h"

_Static_assert(PF_PACK_LENGTH_MAX == PF_PACKER_LENGTH_MAX &&
	       PF_PACK_POOL_DEFAULT == PF_PACKER_POOL_DEFAULT &&
	       PF_PACK_POOL_MAX == PF_PACKER_POOL_MAX &&
	       PF_PACK_MAX_FEATURES == PF_PACKER_MAX_FEATURES &&
	       (int)PF_PACK_FIRST_FIT == (int)PF_PACKER_FIRST_FIT &&
	       (int)PF_PACK_CONCAT == (int)PF_PACKER_CONCAT,
	       "the loader's packing settings are the packer's");

const char *pf_pack_mode_name(pf_pack_mode mode)
{
	switch (mode) {
	case PF_PACK_FIRST_FIT: return "first_fit";
	case PF_PACK_CONCAT: return "concat";
	}
	return NULL;
}

int pf_pack_mode_parse(const char *name, pf_pack_mode *mode)
{
	if (!name)
		return -EINVAL;
	if (!strcmp(name, "first_fit") || !strcmp(name, "first-fit")) {
		*mode = PF_PACK_FIRST_FIT;
		return 0;
	}
	if (!strcmp(name, "concat")) {
		*mode = PF_PACK_CONCAT;
		return 0;
	}
	return -EINVAL;
}


/* ------------------------------------------------------------------ */
/* Creation                                                             */

/* The packed spec (outer: what the batches hold) and the inner one from
 * the user's. */
static int make_specs(pf_pack_run *pk, const pf_loader_config *cfg, pf_spec *outer,
		      pf_spec *inner, pf_error *err)
{
	uint32_t n = outer->n;
	int ret;

	for (uint32_t i = 0; i < n; i++) {
		const pf_feature_spec *fs = &outer->f[i];

		if (fs->role == PF_ROLE_VALUES && fs->ragged)
			continue;
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "feature spec: '%s' has a fixed length ([%u]) beside packed "
				    "features: with a pack length every feature must be ragged "
				    "([*]), since a packed row holds several records and a fixed "
				    "feature has no place in it", fs->role == PF_ROLE_VALUES ?
				    fs->name : outer->f[i - 1].name,
				    fs->role == PF_ROLE_VALUES ? fs->len : outer->f[i - 1].len);
	}
	if (n > PF_PACK_MAX_FEATURES)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "feature spec: %u packed features, at most %u", n,
				    PF_PACK_MAX_FEATURES);
	pk->nf = n;
	pk->cap = cfg->pack_mode == PF_PACK_CONCAT && cfg->pack_length < PF_PACK_CONCAT_CAP
		? PF_PACK_CONCAT_CAP : cfg->pack_length;
	*inner = *outer;
	/* Backwards, so that the made features' moves leave the indexes of
	 * the features before them alone. */
	for (uint32_t i = n; i-- > 0;) {
		inner->f[i].ragged = false;
		inner->f[i].len = pk->cap;
		inner->f[i].nopad = true;	/* place() reads the length's values */
		outer->f[i].len = cfg->pack_length;
		ret = pf_spec_add_made(inner, i, PF_ROLE_LENGTHS_FULL, "_lengths", PF_DTYPE_INT32,
				       1, err);
		if (ret == 0)
			ret = pf_spec_add_made(outer, i, PF_ROLE_POSITIONS, "_positions",
					       PF_DTYPE_INT32, cfg->pack_length, err);
		if (ret == 0)
			ret = pf_spec_add_made(outer, i, PF_ROLE_SEGMENT_IDS, "_segment_ids",
					       PF_DTYPE_INT32, cfg->pack_length, err);
		if (ret < 0)
			return ret;
	}
	for (uint32_t f = 0; f < n; f++) {
		pk->fin[f] = 2 * f;
		pk->fout[f] = 3 * f;
	}
	/* A packed mixture's _source (source_feature): each value's source,
	 * -1 in the padding, after the packed features. */
	pk->fsrc = UINT32_MAX;
	if (cfg->nsources && cfg->source_feature) {
		pf_feature_spec *fs;

		if (outer->n == PF_SPEC_MAX_FEATURES)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "feature spec: more than %u features with '_source'",
					    PF_SPEC_MAX_FEATURES);
		for (uint32_t i = 0; i < outer->n; i++)
			if (!strcmp(outer->f[i].name, "_source"))
				return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
						    "feature spec: '_source' would be made for "
						    "source_feature, but the spec has a feature "
						    "of that name");
		pk->fsrc = outer->n;
		fs = &outer->f[outer->n++];
		memset(fs, 0, sizeof(*fs));
		snprintf(fs->name, sizeof(fs->name), "_source");
		fs->dtype = PF_DTYPE_INT32;
		fs->len = cfg->pack_length;
		fs->scale = 1.0;
		fs->pad = -1;
	}
	pf_spec_layout(inner);
	pf_spec_layout(outer);
	return 0;
}

/* The output batches: as many as the consumer may hold and the steps
 * being packed at once need. */
int pf_pack_make_outs(pf_packing *l, pf_pack_run *pk, pf_error *err)
{
	const pf_spec *s = &l->spec;
	uint32_t cores = l->topo.cores, pcb = l->topo.per_core_batch;
	size_t off = 0;

	pk->toff = pf_calloc(s->n, sizeof(*pk->toff));
	if (!pk->toff)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->n; i++) {
		off = round_up(off, 64);
		pk->toff[i] = off;
		off += (size_t)pcb * s->f[i].len * pf_dtype_size(s->f[i].dtype);
	}
	pk->block_bytes = round_up(off, 64);
	/* Steps in progress: the one handed out next, the one after it (known
	 * to exist), and those the pool's open rows reach into. */
	pk->window = 3 + (pk->packer.pool + pk->cap / pk->L + 1 + pk->B - 1) / pk->B +
		     pk->window_extra;
	pk->held_max = l->cfg.prefetch + 1;
	pk->nouts = pk->window + pk->held_max;
	pk->pieces = pf_calloc(pk->npieces, sizeof(*pk->pieces));
	if (!pk->pieces)
		return -ENOMEM;
	pk->inprog = pf_calloc(pk->window, sizeof(*pk->inprog));
	pk->outs = pf_calloc(pk->nouts, sizeof(*pk->outs));
	/* One region (the pool maps each allocation on its own huge pages:
	 * a batch each was ~5x the memory, all of it cleared on first use). */
	pk->outmem = pf_pool_alloc(pk->block_bytes * cores * pk->nouts);
	if (!pk->inprog || !pk->outs || !pk->outmem)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory for %u packed batches of %zu bytes",
				    pk->nouts, pk->block_bytes * cores);
	l->memory_bytes += pk->block_bytes * cores * pk->nouts;
	for (unsigned k = 0; k < pk->nouts; k++) {
		pack_out *o = &pk->outs[k];

		o->core = pf_calloc(cores, sizeof(*o->core));
		o->tensors = pf_calloc((size_t)cores * s->n, sizeof(*o->tensors));
		o->valid = pf_calloc((size_t)cores * pcb, 1);
		o->fill = pf_calloc((size_t)cores * pcb * pk->nf, sizeof(*o->fill));
		o->mem = pk->outmem + (size_t)k * pk->block_bytes * cores;
		if (!o->core || !o->tensors || !o->valid || !o->fill)
			return -ENOMEM;
		memset(o->valid, 1, (size_t)cores * pcb);
		for (uint32_t c = 0; c < cores; c++) {
			pf_core_batch *cb = &o->core[c];

			cb->tensors = o->tensors + (size_t)c * s->n;
			cb->ntensors = s->n;
			cb->block = o->mem + (size_t)c * pk->block_bytes;
			cb->block_bytes = pk->block_bytes;
			cb->valid = o->valid + (size_t)c * pcb;
			cb->nvalid = pcb;
			for (uint32_t i = 0; i < s->n; i++) {
				cb->tensors[i].name = s->f[i].name;
				cb->tensors[i].dtype = s->f[i].dtype;
				cb->tensors[i].len = s->f[i].len;
				cb->tensors[i].data = (uint8_t *)cb->block + pk->toff[i];
			}
		}
		o->batch.core = o->core;
		o->batch.cores = cores;
		o->batch.per_core_batch = pcb;
		o->next = pk->free;
		pk->free = o;
	}
	return 0;
}


static void pack_free(pf_packing *l);

int pf_pack_create(pf_loader **out, const pf_loader_config *cfg, pf_error *err)
{
	pf_loader_config icfg = *cfg;
	pf_spec *inner_spec = NULL, *user_spec = NULL;
	pf_spec_images images;
	pf_pack_run *pk;
	pf_packing *l;
	bool opened = false;
	int ret;

	if (cfg->pack_length > PF_PACK_LENGTH_MAX)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "pack length %u is too large (at most %u)", cfg->pack_length,
				    PF_PACK_LENGTH_MAX);
	l = pf_calloc(1, sizeof(*l));
	pk = pf_calloc(1, sizeof(*pk));
	inner_spec = pf_calloc(1, sizeof(*inner_spec));
	user_spec = pf_calloc(1, sizeof(*user_spec));
	if (!l || !pk || !inner_spec || !user_spec) {
		pf_free(l);
		pf_free(pk);
		pf_free(inner_spec);
		pf_free(user_spec);
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory creating the loader");
	}
	l->face.ops = &pf_packing_ops;
	l->create_start_ns = pf_now_ns();
	l->pack = pk;
	l->cfg = *cfg;
	pthread_mutex_init(&l->mu, NULL);
	l->topo.host_index = cfg->host_index;
	l->topo.num_hosts = cfg->num_hosts ? cfg->num_hosts : 1;
	l->topo.cores = cfg->cores_per_host ? cfg->cores_per_host : 1;
	l->topo.per_core_batch = cfg->per_core_batch;
	l->host_batch = l->topo.cores * l->topo.per_core_batch;
	l->epochs = cfg->epochs ? cfg->epochs : 1;
	l->cfg.prefetch = cfg->prefetch ? cfg->prefetch : 2;
	pk->B = l->host_batch;
	pk->L = cfg->pack_length;
	/* Pairs packing cannot make, refused naming both (docs/api.md): the
	 * rows past an epoch's last step are dropped, never wrapped; an
	 * image is a fixed tensor, not values to pack. */
	if (cfg->remainder == PF_REMAINDER_WRAP) {
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "remainder wrap with pack_length %u: a packed epoch's rows past "
				   "its last step (the same on every host) are dropped, never "
				   "wrapped; use remainder drop", cfg->pack_length);
		goto fail;
	}
	ret = pf_spec_parse_images(&l->spec, &images, cfg->features, err);
	if (ret == 0 && images.n)
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "feature spec: '%s' is an image and pack_length %u packs ragged "
				   "features ([*]): an image is a fixed tensor, not values to "
				   "pack; load images without packing",
				   l->spec.f[images.feature[0]].name, cfg->pack_length);
	if (ret == 0) {
		*user_spec = l->spec;
		ret = make_specs(pk, cfg, &l->spec, inner_spec, err);
	}
	if (ret == 0)
		ret = pf_packer_init(&pk->packer, cfg->pack_length, pk->nf, (pf_packer_mode)cfg->pack_mode,
				     cfg->pack_pool, err);
	pk->npieces = pk->cap / pk->L + 2;
	if (ret < 0)
		goto fail;
	if (cfg->nresume && !cfg->nsources) {
		ret = pf_pack_restore(pk, cfg, &l->topo, err);
		if (ret < 0)
			goto fail;
		icfg.resume = pk->resumes;
		icfg.nresume = pk->nresumes;
	}
	icfg.pack_length = 0;
	icfg.skip_steps = 0;	/* in packed steps: the inner skip is planned */
	icfg.features = NULL;
	icfg.cores_per_host = 1;
	icfg.per_core_batch = PF_PACK_GROUP;
	icfg.max_steps = 0;
	icfg.remainder = PF_REMAINDER_DROP;
	/* The inner rows are long (L values, or PF_PACK_CONCAT_CAP): the
	 * shuffle window is at most what a quarter of the budget holds (a
	 * mixture's sources, each with its own share of the budget, a
	 * quarter of theirs). */
	if (cfg->shuffle) {
		uint64_t budget = cfg->memory_budget ? cfg->memory_budget : PF_LOADER_BUDGET_DEFAULT;
		uint64_t w = budget / 4 / (cfg->nsources ? cfg->nsources : 1) /
			     (inner_spec->row_bytes ? inner_spec->row_bytes : 1);
		uint64_t want = cfg->shuffle_window ? cfg->shuffle_window : PF_LOADER_WINDOW_DEFAULT;

		w = w < want ? w : want;
		icfg.shuffle_window = (uint32_t)(w < PF_PACK_GROUP ? PF_PACK_GROUP : w);
	}
	/* The lengths' spec (in user_spec): counting stream files at the
	 * open measures them too (fail mode: skip mode's are read after). */
	ret = pf_spec_lengths(user_spec, pk->nf, user_spec, err);
	if (ret < 0)
		goto fail;
	if (cfg->nsources) {
		/* A mixture's records (pack_mix.c): its run one packed epoch. */
		icfg.source_feature = false;
		ret = pf_pack_mix_create(l, pk, cfg, &icfg, inner_spec, user_spec, err);
		if (ret < 0)
			goto fail_inner;
		l->epochs = 1;
		/* A run of max_steps: planned as far as those (pack_mix.c);
		 * an endless one: not known (0). */
		l->steps_per_epoch = pk->epoch_steps == UINT64_MAX ? 0 : pk->epoch_steps;
		if (cfg->max_steps && pk->step + cfg->max_steps < pk->epoch_steps)
			l->steps_per_epoch = pk->step + cfg->max_steps;
		/* (A cut run's steps count from the cut.) */
		if (l->steps_per_epoch)
			l->steps_per_epoch += pk->step_base;
		goto made;
	}
	ret = pf_pipe_create_packing(&pk->inner, &icfg, inner_spec,
				       cfg->on_corrupt == PF_CORRUPT_FAIL ? user_spec : NULL,
				       cfg->skip_steps != 0, &opened, err);
	if (ret < 0 && !opened)
		goto fail_inner;	/* it took its part in the pod's open */
	if (ret == 0)
		pf_pipe_order(pk->inner, &pk->inner_order);
	/* The plan: every record's lengths (a pod's hosts gather them:
	 * each takes part, failed or not; the direct placement's plan ahead
	 * decides how many steps are in progress), then epoch 0's steps. */
	ret = pf_pack_lengths(pk->inner, cfg, user_spec, pk->nf, ret, err, &pk->lengths,
			      &pk->nlengths, &pk->lstats);
	/* A plan alone (plan_only): no batches, no decode threads. */
	if (ret == 0 && !cfg->plan_only)
		ret = pf_pack_direct_create(l, pk);
	if (ret == 0 && !cfg->plan_only)
		ret = pf_pack_make_outs(l, pk, err);
	if (ret < 0)
		goto fail_inner;
	ret = cfg->nresume ? pf_pack_restore_plan(l, pk, err)
			   : pf_pack_plan_epoch(l, pk, pk->inner->start_epoch, err);
	/* Where the run starts (pf_loader_records_of()), then moved on by
	 * skip_steps before the inner loader reads (pack_skip.c). */
	if (ret == 0)
		ret = pf_pack_keep_course(l, pk);
	if (ret == 0 && cfg->skip_steps)
		ret = pf_pack_skip_steps(l, pk, cfg->skip_steps, err);
	if (ret < 0)
		goto fail_inner;
	pf_pipe_open_gate(pk->inner, 0);
	l->steps_per_epoch = pk->step_base + pk->epoch_steps;
	/* Where the run starts: the first checkpoint. */
	pk->epoch = pk->inner->start_epoch;
	ret = pf_pack_push_snap(pk, &(pack_snap){
		.epoch = pk->inner->start_epoch,
		.step = pk->inner->resumed ? pk->inner->resume.step0 : 0,
		.gstep = pk->inner->gstep0 });
	if (ret < 0)
		goto fail_inner;
	/* The first groups planned before the inner loader's decode
	 * threads start. */
	if (!cfg->plan_only)
		pf_pack_direct_plan(l, pk, pk->epoch, pk->snaps[0].step, true);
	ret = cfg->plan_only ? 0 : pf_pipe_start_workers(pk->inner, err);
	if (ret < 0)
		goto fail_inner;
made:
	if (!pk->epoch_steps && !pk->step_base) {
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "the dataset's records pack into %llu rows of %u on this host "
				   "(the fewest of any host decide), not one step of %u rows "
				   "(per_core_batch %u x %u cores)",
				   (unsigned long long)pk->epoch_rows, pk->L, pk->B,
				   l->topo.per_core_batch, l->topo.cores);
		goto fail_inner;
	}
	pf_free(inner_spec);
	pf_free(user_spec);
	*out = &l->face;
	return 0;
fail:
	/* The other hosts of a pod wait for this one's part (a mixture's
	 * sources take theirs as they are opened). */
	if (!pk->inner && !cfg->nsources)
		pf_dataset_open_abandon(&(pf_open_config){
			.host_index = cfg->host_index, .num_hosts = cfg->num_hosts,
			.allgather = cfg->allgather, .allgather_ctx = cfg->allgather_ctx },
			err);
fail_inner:
	if (ret == -ENOMEM && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory creating the loader");
	pf_free(inner_spec);
	pf_free(user_spec);
	pack_free(l);
	return ret;
}

static void pack_free(pf_packing *l)
{
	pf_pack_run *pk = l->pack;

	pf_pipe_free(pk->inner);	/* its decode threads first */
	pf_mixture_free(pk->mix);
	pf_pack_direct_free(pk);
	for (size_t k = 0; pk->src_lengths && k < pk->nsrc; k++)
		pf_free(pk->src_lengths[k]);
	pf_free(pk->src_lengths);
	pf_free(pk->src_nlengths);
	pf_free(pk->src_records);
	pf_free(pk->src_tokens);
	pf_pack_release_snaps(pk);
	for (size_t k = 0; pk->mark_next && k < pk->nsrc; k++)
		pf_mix_mark_release(&pk->mark_next[k]);
	pf_free(pk->snap_marks);
	pf_free(pk->mark_next);
	for (unsigned k = 0; pk->outs && k < pk->nouts; k++) {
		pack_out *o = &pk->outs[k];

		pf_free(o->core);
		pf_free(o->tensors);
		pf_free(o->valid);
		pf_free(o->fill);
	}
	pf_pool_free(pk->outmem, pk->block_bytes * l->topo.cores * pk->nouts, l->cfg.keep_pools);
	pf_free(pk->outs);
	pf_free(pk->inprog);
	pf_free(pk->pieces);
	pf_free(pk->lengths);
	pf_free(pk->toff);
	pf_free(pk->snaps);
	pf_run_start_release(&pk->course.inner.start);
	pf_pack_restore_free(pk, true);
	pf_free(pk);
	pthread_mutex_destroy(&l->mu);
	pf_free(l);
}

/* Epoch e's steps, every host's (pack_plan.c), and this host's rows. */
int pf_pack_plan_epoch(pf_packing *l, pf_pack_run *pk, uint32_t e, pf_error *err)
{
	int ret = pf_pack_plan_steps(&pk->inner_order, &pk->packer, l->cfg.seed, e, pk->lengths, pk->nf,
				     pk->cap, pk->B, &pk->epoch_steps, &pk->epoch_rows);

	if (ret == 0)
		ret = pf_pack_direct_epoch(l, pk, e);
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				    "planning the packed epoch %u: %s", e, pf_strerror(ret));
	return 0;
}

/* ------------------------------------------------------------------ */
/* The face: pf_loader_*() of a packing loader                          */

static pf_packing *packing(pf_loader *f)
{
	return (pf_packing *)f;
}

static const pf_packing *cpacking(const pf_loader *f)
{
	return (const pf_packing *)f;
}

static int pack_next(pf_loader *f, pf_batch **out, uint64_t timeout_ns)
{
	pf_packing *l = packing(f);
	pf_pack_run *pk = l->pack;
	uint64_t t0 = pf_now_ns(), dt;
	pack_out *o;
	int ret;

	l->misused = pk->held >= pk->held_max;
	if (l->misused) {
		pf_error_clear(&l->misuse);
		pf_error_set(&l->misuse, -EBUSY, PF_OFFSET_NONE, 0,
			     "%u batches held, at most prefetch + 1 = %u; release one first",
			     pk->held, pk->held_max);
		return -EBUSY;
	}
	if (l->failed)
		return l->err.code ? l->err.code : -EIO;
	if (l->cfg.plan_only) {
		l->misused = true;
		pf_error_clear(&l->misuse);
		return pf_error_set(&l->misuse, -EINVAL, PF_OFFSET_NONE, 0,
				    "a plan-only loader (plan_only) hands out no batch");
	}
	if (l->cfg.max_steps && l->m.steps >= l->cfg.max_steps)
		return 0;
	if (pk->epoch >= l->epochs)
		return 0;	/* resumed after the last epoch */
	ret = pf_pack_ready(l, pk, timeout_ns);
	if (ret <= 0) {
		if (ret < 0 && ret != -ETIMEDOUT) {
			l->failed = true;
			if (!l->err.code)
				pf_error_set(&l->err, ret, PF_OFFSET_NONE, 0, "%s", pf_strerror(ret));
		}
		return ret;
	}
	o = pk->inprog[pk->step % pk->window];
	if (!o)	/* a step of no record can only be padding: never */
		o = pf_pack_take_out(l, pk, pk->step);
	pk->inprog[pk->step % pk->window] = NULL;
	pf_pack_pad_out(l, pk, o);
	o->batch.epoch = pk->epoch;
	o->batch.step = pk->step_base + pk->step;
	o->batch.global_step = pk->gstep++;
	o->batch.epoch_start = pk->step_base + pk->step == 0;
	o->batch.epoch_end = pk->step + 1 == pk->epoch_steps;
	pk->step++;
	pk->held++;
	dt = pf_now_ns() - t0;
	pthread_mutex_lock(&l->mu);
	l->m.steps++;
	l->m.pack_rows += pk->B;
	l->m.pack_slots += (uint64_t)pk->B * pk->L * pk->nf;
	l->m.pack_values += o->values;
	l->m.pack_direct_records = pk->direct_records;
	l->m.pack_segments += o->segments;
	l->m.next_wait_ns += dt;
	l->m.next_hist[pf_hist_bucket(dt)]++;
	if (!l->m.first_batch_ns)
		l->m.first_batch_ns = pf_now_ns() - l->create_start_ns;
	pthread_mutex_unlock(&l->mu);
	*out = &o->batch;
	return 1;
}

static void pack_release(pf_loader *f, pf_batch *batch)
{
	pf_packing *l = packing(f);
	pack_out *o = (pack_out *)((char *)batch - offsetof(pack_out, batch));

	l->pack->held--;
	pf_pack_give_back(l->pack, o);
}

static void pack_metrics(const pf_loader *f, pf_loader_metrics *m)
{
	const pf_packing *l = cpacking(f);
	const pf_pack_run *pk = l->pack;
	pf_loader_metrics own;

	if (pk->mix)
		pf_mixture_metrics(pk->mix, m);
	else
		pf_pipe_metrics(pk->inner, m);
	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	own = l->m;
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
	/* The inner loader's records and steps are its own groups: the
	 * consumer's are the packed rows'. */
	m->steps = own.steps;
	m->steps_per_epoch = l->steps_per_epoch;
	m->next_wait_ns = own.next_wait_ns;
	memcpy(m->next_hist, own.next_hist, sizeof(m->next_hist));
	m->first_batch_ns = own.first_batch_ns;
	m->memory_bytes += l->memory_bytes;
	m->pack_rows = own.pack_rows;
	m->pack_slots = own.pack_slots;
	m->pack_values = own.pack_values;
	m->pack_segments = own.pack_segments;
	m->pack_rows_dropped = own.pack_rows_dropped;
	m->pack_lengths_from_index = pk->lstats.from_index;
	m->pack_lengths_tails = pk->lstats.tails;
	m->pack_lengths_files = pk->lstats.files;
	m->pack_lengths_exchanged = pk->lstats.exchanged;
	m->pack_direct_records = own.pack_direct_records;
	m->pack_truncated_records = pk->packer.truncated_records;
	m->pack_truncated_values = pk->packer.truncated_values;
	m->pack_empty_records = pk->packer.empty_records;
	m->pack_dropped_records = pk->dropped_records;
	m->pack_dropped_tokens = pk->dropped_tokens;
	/* Packed steps skipped (the inner loader's own are its groups). */
	m->skipped_steps = own.skipped_steps;
	m->skipped_from = own.skipped_from;
	m->skipped_records = own.skipped_records;
	m->skipped_tokens = own.skipped_tokens;
}

static int64_t pack_save_state(pf_loader *f, void *buf, size_t cap)
{
	return pf_pack_save_state(packing(f), buf, cap);
}

static const pf_error *pack_last_error(const pf_loader *f)
{
	const pf_packing *l = cpacking(f);

	if (l->misused)
		return &l->misuse;
	return l->failed ? &l->err : NULL;
}

/* The inner loader's pipeline tunes itself (a mixture's, each source's:
 * the first one's is said). */
static void pack_tuning(const pf_loader *f, pf_tuning *t)
{
	const pf_pack_run *pk = cpacking(f)->pack;

	if (pk->mix)
		pf_mixture_tuning(pk->mix, t);
	else
		pf_pipe_tuning(pk->inner, t);
}

static uint64_t pack_steps_per_epoch(const pf_loader *f)
{
	return cpacking(f)->steps_per_epoch;
}

/* From the run's start: a packing loader's epochs are whole from its
 * first (its resumed epoch's steps are counted in steps_per_epoch). */
static uint64_t pack_steps_left(const pf_loader *f)
{
	const pf_packing *l = cpacking(f);
	uint64_t taken;

	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	taken = l->m.steps;
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
	return pf_plan_steps_left(0, l->epochs, l->steps_per_epoch, l->steps_per_epoch,
				  l->cfg.max_steps, taken);
}

static const pf_spec *pack_spec(const pf_loader *f)
{
	return &cpacking(f)->spec;
}

static int pack_feature_shape(const pf_loader *f, uint32_t i, uint32_t shape[3],
			      const char **elem, uint32_t *elem_size)
{
	return pf_spec_feature_shape(&cpacking(f)->spec, NULL, i, shape, elem, elem_size);
}

/* The inner loader's pipeline's (a mixture's: its first source's). */
static int pack_series(const pf_loader *f, pf_series **out)
{
	const pf_pack_run *pk = cpacking(f)->pack;

	return pk->mix ? pf_mixture_series(pk->mix, out) : pf_pipe_series(pk->inner, out);
}

/* A packed mixture's sources: the mixture's figures, with the records and
 * the tokens each gave the packed rows handed out. */
static size_t pack_sources(const pf_loader *f)
{
	const pf_pack_run *pk = cpacking(f)->pack;

	return pk->mix ? pf_mixture_sources(pk->mix) : 0;
}

static void pack_source_metrics(const pf_loader *f, size_t i, pf_source_metrics *m)
{
	const pf_packing *l = cpacking(f);
	const pf_pack_run *pk = l->pack;
	uint64_t records = 0, tokens = 0;

	pf_mixture_source_metrics(pk->mix, i, m);
	for (size_t k = 0; k < pk->nsrc; k++) {
		records += pk->src_records[k];
		tokens += pk->src_tokens[k];
	}
	m->records = pk->src_records[i];
	m->realised_share = records ? (double)pk->src_records[i] / (double)records : 0;
	m->tokens = pk->src_tokens[i];
	m->realised_token_share = tokens ? (double)pk->src_tokens[i] / (double)tokens : 0;
	m->weighs_tokens = l->cfg.mix_unit == PF_MIX_UNIT_TOKENS;
}

static void pack_destroy(pf_loader *f)
{
	pack_free(packing(f));
}

static int64_t pack_records_of(const pf_loader *f, uint64_t step, pf_record_ref *out,
			       size_t cap, pf_error *err)
{
	return pf_pack_records_of(cpacking(f), step, out, cap, err);
}

static const char *pack_file(const pf_loader *f, uint32_t source, uint32_t file)
{
	const pf_pack_run *pk = cpacking(f)->pack;

	if (pk->mix)
		return pf_mix_file(pk->mix, source, file);
	return source ? NULL : pf_pack_file(cpacking(f), file);
}

const pf_loader_ops pf_packing_ops = {
	.next = pack_next,
	.release = pack_release,
	.save_state = pack_save_state,
	.last_error = pack_last_error,
	.metrics = pack_metrics,
	.tuning = pack_tuning,
	.steps_per_epoch = pack_steps_per_epoch,
	.steps_left = pack_steps_left,
	.spec = pack_spec,
	.feature_shape = pack_feature_shape,
	.series = pack_series,
	.sources = pack_sources,
	.source_metrics = pack_source_metrics,
	.free = pack_destroy,
	.records_of = pack_records_of,
	.file = pack_file,
};
