/* SPDX-License-Identifier: Apache-2.0 */
/* A pipeline's life: pf_pipe_create() checks the config, opens the
 * dataset, restores a saved run, builds the pools and starts the threads;
 * pf_pipe_next() and pf_pipe_release() hand the batch slots out in step
 * order and take them back; the metrics, errors and pf_pipe_free(); the
 * face the public calls reach it through (pf_pipe_ops).  How the pipeline
 * works, and which file holds each part of it, is in pipeline_internal.h.
 * Not here: the public calls (loader/api/), the pipeline's threads
 * (io_thread.c, schedule.c, decode.c), waking and failing them (wake.c),
 * the memory budget (budget.c), resume (resume.c, which also saves the
 * state). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipeline_internal.h"
#include "series_internal.h"
#include "spec_internal.h"

#define PF_BUDGET_DEFAULT (512ull << 20)
#define PF_IO_DEPTH_DEFAULT 32u

/* How this loader opens its dataset (loader/dataset/). */
static pf_open_config open_config(pf_pipe *l)
{
	return (pf_open_config){ .threads = l->nworkers, .host_index = l->topo.host_index,
				 .num_hosts = l->topo.num_hosts, .allgather = l->cfg.allgather,
				 .allgather_ctx = l->cfg.allgather_ctx, .count_drop = pf_drop_at_count,
				 .count_drop_ctx = l };
}

/* The global shuffle's frame cache reads each frame once an epoch when
 * it holds a frame group (and the chunks in flight); where the budget
 * left it fewer entries, frames are read again: once per process, a
 * line on stderr naming the cache, the group and what reads less
 * (design.md, "The global shuffle"). */
static void global_reads_hint(const pf_pipe *l)
{
	static int said;
	const pf_dataset *ds = l->ds;
	uint64_t frame = ds->nunits ? ds->records / ds->nunits : 0;
	uint64_t group = l->group < ds->nunits ? l->group : ds->nunits;

	if (!l->slice || ds->max_unit_records <= l->slice || l->cfg.on_corrupt == PF_CORRUPT_SKIP ||
	    l->cfg.frame_cache == PF_FRAME_CACHE_OFF ||
	    l->fcache_entries >= group || __atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		return;
	fprintf(stderr, "podfeed: the global shuffle's frame cache holds %u frames, and its "
		"frame groups are of %llu (frames of ~%llu records, %llu KiB, cut into slices of "
		"%u): frames are read and decompressed again, up to ~%llu times an epoch; a "
		"larger memory budget (%zu MiB now) or smaller frames (`shardtool convert "
		"--frame-size 64K`) read each once\n", l->fcache_entries,
		(unsigned long long)group, (unsigned long long)frame,
		(unsigned long long)(ds->max_usize >> 10), l->slice,
		(unsigned long long)((frame + l->slice - 1) / l->slice),
		l->cfg.memory_budget >> 20);
}

/* Defaults the memory budget could not hold were cut to it: once per
 * process, a line on stderr saying which and where the reasons are (the
 * frame cache says its own: global_reads_hint()). */
static void fitted_note(const pf_pipe *l)
{
	static int said;
	char what[256];
	int n = 0;

	if (!(l->fitted & (PF_FITTED_WINDOW | PF_FITTED_PREFETCH | PF_FITTED_THREADS)) ||
	    __atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		return;
	what[0] = 0;
	if (l->fitted & PF_FITTED_WINDOW)
		n += snprintf(what + n, sizeof(what) - (size_t)n, "%sshuffle window %u records "
			      "(default %u)", n ? ", " : "", l->wblock, l->window_default);
	if (l->fitted & PF_FITTED_PREFETCH)
		n += snprintf(what + n, sizeof(what) - (size_t)n, "%sprefetch %u", n ? ", " : "",
			      l->cfg.prefetch);
	if (l->fitted & PF_FITTED_THREADS)
		snprintf(what + n, sizeof(what) - (size_t)n, "%sthreads %u", n ? ", " : "",
			 l->nworkers);
	fprintf(stderr, "podfeed: the memory budget of %zu MiB does not hold the defaults; "
		"fitted to it: %s (the report's tuning lines, or pf_loader_tuning(), say "
		"why; set them, or a larger budget, to choose)\n", l->cfg.memory_budget >> 20,
		what);
}

/* The global shuffle reads slices of frames through the index: a file
 * without one (a stream) cannot be sliced, and is refused by name. */
static int check_global(const pf_pipe *l, pf_error *err)
{
	const pf_dataset *ds = l->ds;

	for (uint64_t u = 0; l->slice && ds->any_stream && u < ds->nunits; u++) {
		if (!ds->units[u].stream)
			continue;
		pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
			     "shuffle=global needs indexed shards, and this file has no "
			     "index (a stream is read from its start): `shardtool index` "
			     "gives it one, or use the window shuffle");
		pf_error_set_file(err, ds->paths[ds->units[u].file]);
		return err->code;
	}
	return 0;
}

typedef pf_pipe_opts create_opts;

static int create(pf_pipe **out, const pf_loader_config *cfg, const pf_spec *spec,
		  const create_opts *o, pf_error *err);

int pf_pipe_create_opts(pf_pipe **out, const pf_loader_config *cfg, const pf_pipe_opts *o,
			pf_error *err)
{
	if (o->opened)
		*o->opened = false;
	return create(out, cfg, o->spec, o, err);
}

int pf_pipe_create(pf_pipe **out, const pf_loader_config *cfg, pf_error *err)
{
	return create(out, cfg, NULL, &(create_opts){ 0 }, err);
}

int pf_pipe_create_spec(pf_pipe **out, const pf_loader_config *cfg, const pf_spec *spec,
			  pf_error *err)
{
	return create(out, cfg, spec, &(create_opts){ 0 }, err);
}

int pf_pipe_start_workers(pf_pipe *l, pf_error *err)
{
	for (unsigned i = 0; i < l->nworkers; i++) {
		if (pthread_create(&l->workers[i].thread, NULL, pf_pipe_worker_main,
				   &l->workers[i]))
			return pf_error_set(err, -EAGAIN, PF_OFFSET_NONE, 0,
					    "cannot start loader threads");
		l->workers[i].started = true;
	}
	return 0;
}

int pf_pipe_create_packing(pf_pipe **out, const pf_loader_config *cfg, const pf_spec *spec,
			     const pf_spec *lspec, bool gated, bool *opened, pf_error *err)
{
	*opened = false;
	return create(out, cfg, spec,
		      &(create_opts){ .lspec = lspec, .opened = opened, .gated = gated }, err);
}

void pf_pipe_open_gate(pf_pipe *l, uint64_t max_steps)
{
	pthread_mutex_lock(&l->mu);
	if (l->gated) {
		if (max_steps && (!l->cfg.max_steps || max_steps < l->cfg.max_steps))
			l->cfg.max_steps = max_steps;
		l->gated = false;
		pthread_cond_broadcast(&l->cv_init);
	}
	pthread_mutex_unlock(&l->mu);
}

/* The batch the rule fit gives for the dataset's records (at most the
 * config's, at least 1), and what follows from it: the host batch and
 * the shuffle's blocks of whole host batches. */
static int fit_batch(pf_pipe *l, pf_batch_fit fit, pf_error *err)
{
	uint32_t b = fit(l->ds->records, l->topo.num_hosts, l->topo.per_core_batch);
	int ret;

	if (b == 0 || b >= l->topo.per_core_batch)
		return 0;
	l->topo.per_core_batch = l->cfg.per_core_batch = b;
	l->host_batch = l->topo.cores * b;
	ret = pf_plan_block(l->cfg.shuffle, l->cfg.shuffle_window, l->host_batch, &l->wblock,
			    &l->shuffle_rows, err);
	if (ret == 0 && l->cfg.shuffle_mode == PF_SHUFFLE_GLOBAL)
		l->slice = pf_plan_slice(l->wblock, b);
	return ret;
}

/* The config's topology, defaults, shuffle and spec into l. */
static int take_config(pf_pipe *l, const pf_loader_config *cfg, const pf_spec *spec,
		       const create_opts *o, pf_error *err)
{
	int ret;

	l->topo.host_index = cfg->host_index;
	l->topo.num_hosts = cfg->num_hosts ? cfg->num_hosts : 1;
	l->topo.cores = cfg->cores_per_host ? cfg->cores_per_host : 1;
	l->topo.per_core_batch = cfg->per_core_batch;
	if (l->topo.host_index >= l->topo.num_hosts)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "host index %u is not below the host count %u",
				    l->topo.host_index, l->topo.num_hosts);
	if ((uint64_t)l->topo.cores * l->topo.per_core_batch > UINT32_MAX / 2)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "host batch of %u cores x %u records is too large",
				    l->topo.cores, l->topo.per_core_batch);
	l->epochs = cfg->epochs ? cfg->epochs : 1;
	l->tune.threads.automatic = cfg->threads == PF_AUTO;
	l->tune.io_depth.automatic = cfg->io_depth == PF_AUTO;
	l->tune.prefetch.automatic = cfg->prefetch == PF_AUTO;
	l->cfg.memory_budget = cfg->memory_budget ? cfg->memory_budget : PF_BUDGET_DEFAULT;
	l->cfg.io_depth = cfg->io_depth ? cfg->io_depth : PF_IO_DEPTH_DEFAULT;
	l->cfg.max_record_size = cfg->max_record_size ? cfg->max_record_size
						      : PF_MAX_RECORD_DEFAULT;
	l->cfg.prefetch = cfg->prefetch ? cfg->prefetch : 2;
	l->nworkers = cfg->threads ? cfg->threads : pf_cpus();
	l->lookahead = o->lookahead;
	l->source = o->source;
	l->sink = o->sink;
	l->gated = o->gated;
	l->host_batch = l->topo.cores * l->topo.per_core_batch;
	if ((unsigned)cfg->shuffle_mode > PF_SHUFFLE_GLOBAL)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "shuffle_mode %u is neither PF_SHUFFLE_WINDOW (0) nor "
				    "PF_SHUFFLE_GLOBAL (1)", (unsigned)cfg->shuffle_mode);
	/* The global shuffle is a shuffle: its slices go through the window
	 * as a window shuffle's frames do. */
	l->cfg.shuffle = cfg->shuffle || cfg->shuffle_mode == PF_SHUFFLE_GLOBAL;
	ret = pf_plan_block(l->cfg.shuffle, cfg->shuffle_window, l->host_batch, &l->wblock,
			    &l->shuffle_rows, err);
	if (ret < 0)
		return ret;
	if (cfg->shuffle_mode == PF_SHUFFLE_GLOBAL)
		l->slice = pf_plan_slice(l->wblock, l->topo.per_core_batch);

	if (spec)
		l->spec = *spec;
	else
		ret = pf_spec_parse_images(&l->spec, &l->images, cfg->features, err);
	if (ret < 0)
		return ret;
	pf_images_setup(l);
	for (uint32_t i = 0; i < l->spec.n; i++)
		if (l->spec.f[i].ragged)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "feature spec: '%s' is ragged ([*]): give it a length "
					    "(%s:%s[N]) or a pack length (pack_length, loadbench "
					    "--pack L) to pack it", l->spec.f[i].name,
					    l->spec.f[i].name, pf_dtype_name(l->spec.f[i].dtype));
	return 0;
}

/* The read policy and the quarantine log taken up, and the dataset
 * opened (a collective in a pod: l->open_tried says it was joined). */
static int open_dataset(pf_pipe *l, const pf_loader_config *cfg, const create_opts *o,
			pf_error *err)
{
	int ret;

	pf_io_totals_get(&l->totals0);
	if (cfg->io_faults || cfg->io_retries || cfg->io_retry_backoff_us || cfg->io_timeout_ms) {
		pf_io_config pol = { .faults = cfg->io_faults, .retries = cfg->io_retries,
				     .retry_backoff_us = cfg->io_retry_backoff_us,
				     .timeout_ms = cfg->io_timeout_ms };

		/* pf_file_pread() reads the index tails and stream files: the
		 * loader's policy governs them while it lives, and is taken
		 * back by pf_pipe_free(). */
		ret = pf_file_policy_push(&l->file_policy, &pol, err);
		if (ret < 0)
			return ret;
	}
	if (cfg->on_corrupt == PF_CORRUPT_SKIP && cfg->quarantine) {
		l->qfd = open(cfg->quarantine, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (l->qfd < 0) {
			ret = pf_error_set(err, -errno, PF_OFFSET_NONE, 0,
					   "cannot open the quarantine log: %s",
					   strerror(errno));
			pf_error_set_file(err, cfg->quarantine);
			return ret;
		}
	}
	pf_source_config scfg = {
		.max_record_size = l->cfg.max_record_size, .regions = cfg->regions,
		.on_corrupt = cfg->on_corrupt, .on_drop = pf_drop_at_open, .on_drop_ctx = l,
	};
	/* The index tails are read on an engine of the I/O thread's
	 * back-end and read policy. */
	pf_io_config icfg = {
		.backend = cfg->io_backend, .faults = cfg->io_faults,
		.retries = cfg->io_retries, .retry_backoff_us = cfg->io_retry_backoff_us,
		.timeout_ms = cfg->io_timeout_ms,
	};
	pf_open_config ocfg = open_config(l);

	ocfg.io = &icfg;
	l->open_tried = true;
	ocfg.lengths = o->lspec;
	ret = cfg->ignore_manifest
		? pf_dataset_open_shards(&l->ds, cfg->paths, cfg->npaths, &scfg, &ocfg, err)
		: pf_dataset_open(&l->ds, cfg->paths, cfg->npaths, &scfg, &ocfg, err);
	if (ret == 0 && o->opened)
		*o->opened = true;
	if (ret < 0 && l->failed)
		*err = l->err;	/* the corrupt-data budget, or the log */
	return ret;
}

/* What opening the dataset cost and found, into the metrics; the drops
 * other hosts found counting their streams are this host's too, against
 * the same budget. */
static int count_open(pf_pipe *l, pf_error *err)
{
	l->m.open_manifest_ns = l->ds->open.manifest.ns;
	l->m.open_index_ns = l->ds->open.index.ns;
	l->m.open_count_ns = l->ds->open.count.ns;
	l->m.open_exchange_ns = l->ds->open.exchange.ns;
	l->m.open_files = l->ds->open.manifest.files + l->ds->open.index.files;
	l->m.open_count_files = l->ds->open.count.files;
	l->m.open_count_bytes = l->ds->open.count.bytes;
	l->m.open_count_decompressed = l->ds->open.count_decompressed;
	l->m.dataset_files = l->ds->nfiles;
	for (size_t i = 0; i < l->ds->nfiles; i++)
		l->m.empty_files += l->ds->file_size[i] == 0;
	if (!l->ds->open.remote_drops)
		return 0;
	l->m.corrupt_drops += l->ds->open.remote_drops;
	l->m.corrupt_records += l->ds->open.remote_dropped;
	l->m.corrupt_unknown += l->ds->open.remote_unknown;
	l->m.corrupt_bytes += l->ds->open.remote_skipped;
	if (l->cfg.max_corrupt && l->m.corrupt_drops > l->cfg.max_corrupt)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "more than %llu corrupt units dropped (the budget): %llu "
				    "counting the stream files, %llu of them on other hosts",
				    (unsigned long long)l->cfg.max_corrupt,
				    (unsigned long long)l->m.corrupt_drops,
				    (unsigned long long)l->ds->open.remote_drops);
	return 0;
}

/* A spec feature the shards' records lack is a mistake in the spec (a
 * misspelled name): say so now, not as padding or at the first record
 * that lacks it. */
static int check_schema(const pf_pipe *l, pf_error *err)
{
	int ret;

	for (size_t i = 0; i < l->ds->nfiles; i++) {
		const pf_shard_index *ix = l->ds->index[i];

		if (!ix)
			continue;
		ret = pf_spec_check_schema(&l->spec, pf_shard_index_schema(ix, 0),
					   pf_shard_index_schema_count(ix),
					   pf_shard_index_records(ix), l->ds->paths[i], "shard's",
					   err);
		if (ret < 0)
			return ret;
	}
	/* From a manifest: its schema, of every indexed shard merged. */
	if (l->ds->manifest)
		return pf_spec_check_schema(&l->spec, pf_manifest_schema(l->ds->manifest, 0),
					    pf_manifest_schema_count(l->ds->manifest),
					    pf_manifest_schema_records(l->ds->manifest),
					    l->ds->manifest_path, "manifest's", err);
	return 0;
}

/* A default window resumed keeps the window of the run whose states
 * these are (the fit of a default window follows the memory budget, and
 * a resumed run may have another): so the epochs after the one the
 * states are inside come out as that run's would have.  The blocks'
 * size is in every state (pf_state.block); a state that does not decode
 * is left for pf_resume_restore() to name. */
static void keep_states_window(pf_pipe *l, const pf_loader_config *cfg)
{
	pf_state st;
	pf_error e;
	uint32_t w;
	bool permute;

	if (!cfg->nresume || !cfg->resume || !l->cfg.shuffle || cfg->shuffle_window ||
	    pf_state_decode(&st, cfg->resume[0].data, cfg->resume[0].len, &e) < 0)
		return;
	if (st.shuffle && st.block &&
	    pf_plan_block(true, st.block, l->host_batch, &w, &permute, &e) == 0 &&
	    w != l->wblock) {
		uint32_t fitted = l->wblock;

		l->wblock = w;
		if (l->slice)
			l->slice = pf_plan_slice(w, l->topo.per_core_batch);
		l->fitted &= ~PF_FITTED_WINDOW;
		if (w < l->window_default)
			l->fitted |= PF_FITTED_WINDOW;
		snprintf(l->tune.shuffle_window.why, sizeof(l->tune.shuffle_window.why),
			 "the states' window: a default window keeps the one its run was "
			 "fitted to (%u records; this budget alone would give %u)", w, fitted);
		l->tune.shuffle_window.value = w;
	}
	pf_state_release(&st);
}

/* The run's shape from the dataset: the batch fitted (a mixture's
 * source), the shuffle window fitted to the budget, the steps of an
 * epoch, the global shuffle's frame groups, and where a saved state says
 * it starts. */
static int plan_run(pf_pipe *l, const pf_loader_config *cfg, const create_opts *o,
		    pf_error *err)
{
	int ret;

	if (o->fit) {
		ret = fit_batch(l, o->fit, err);
		if (ret < 0)
			return ret;
	}
	ret = pf_plan_check_records(l->ds->records, &l->topo, cfg->remainder, err);
	if (ret < 0)
		return pf_drops_explain_size(l, err);
	ret = check_global(l, err);
	if (ret < 0)
		return ret;
	ret = pf_budget_fit(l, err);
	if (ret < 0)
		return ret;
	keep_states_window(l, cfg);
	if (l->slice)
		l->group = pf_plan_group(l->topo.per_core_batch, l->wblock, l->ds->nunits,
					 l->ds->records);
	l->steps_per_epoch = pf_plan_steps(l->ds->records, &l->topo, cfg->remainder);
	l->m.records_per_epoch = l->ds->records;
	l->m.steps_per_epoch = l->steps_per_epoch;
	if (cfg->nresume && !cfg->resume)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "nresume is %zu but resume is NULL", cfg->nresume);
	ret = cfg->nresume ? pf_resume_restore(l, err) : 0;
	/* Where the run starts, for pf_loader_records_of(), then moved on
	 * by skip_steps (skip.c). */
	if (ret == 0)
		ret = pf_pipe_keep_start(l);
	if (ret == 0 && cfg->skip_steps)
		ret = pf_pipe_skip(l, cfg->skip_steps, err);
	if (ret == 0)
		l->skipped_total += cfg->skip_steps;
	return ret;
}

/* The pools from the budget, then the threads: I/O first (it reports
 * whether the engine came up), then the decode workers, unless packing's
 * inner loader's packer plans where its first records go before they are
 * decoded (pack.c starts them) or a mixture's pool decodes for it. */
static int start(pf_pipe *l, const create_opts *o, pf_error *err)
{
	int ret;

	/* A plan alone (plan_only): no pool, no thread. */
	if (l->cfg.plan_only)
		return pf_series_init(l);
	l->workers = pf_calloc(l->nworkers, sizeof(*l->workers));
	if (!l->workers)
		return -ENOMEM;
	ret = pf_budget_setup(l, err);
	if (ret < 0)
		return ret;
	fitted_note(l);
	global_reads_hint(l);
	l->m.memory_bytes = l->memory_bytes;
	ret = pf_series_init(l);
	if (ret < 0)
		return ret;
	pf_tune_start(l);

	if (pthread_create(&l->io_thread, NULL, pf_pipe_io_main, l))
		return -EAGAIN;
	l->io_started = true;
	pthread_mutex_lock(&l->mu);
	while (!l->io_ready)
		pthread_cond_wait(&l->cv_init, &l->mu);
	ret = l->io_init_ret;
	if (ret < 0)
		*err = l->err;
	pthread_mutex_unlock(&l->mu);
	if (ret < 0)
		return ret;
	if (!o->opened && !o->pooled)
		return pf_pipe_start_workers(l, err);
	return 0;
}

static int create(pf_pipe **out, const pf_loader_config *cfg, const pf_spec *spec,
		  const create_opts *o, pf_error *err)
{
	uint64_t t_create = pf_now_ns();
	pf_pipe *l = NULL;
	int ret = 0;

	pf_error_clear(err);
	if (!cfg->npaths || (!cfg->features && !spec) || !cfg->per_core_batch)
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "the loader needs paths, a feature spec and a per-core batch");
	else if (!(l = pf_calloc(1, sizeof(*l))))
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				   "out of memory creating the loader");
	if (ret < 0) {
		/* The other hosts of a pod wait for this one's part. */
		pf_dataset_open_abandon(&(pf_open_config){
			.host_index = cfg->host_index, .num_hosts = cfg->num_hosts,
			.allgather = cfg->allgather, .allgather_ctx = cfg->allgather_ctx },
			err);
		return ret;
	}
	l->face.ops = &pf_pipe_ops;
	l->cfg = *cfg;
	l->qfd = -1;
	pf_error_clear(&l->err);
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv_chunk, NULL);
	pthread_cond_init(&l->cv_cbuf, NULL);
	pthread_cond_init(&l->cv_decode, NULL);
	pthread_cond_init(&l->cv_block, NULL);
	pthread_cond_init(&l->cv_batch, NULL);
	pthread_cond_init(&l->cv_ready, NULL);
	pthread_cond_init(&l->cv_init, NULL);

	ret = take_config(l, cfg, spec, o, err);
	if (ret == 0)
		ret = open_dataset(l, cfg, o, err);
	if (ret == 0) {
		l->create_start_ns = t_create;
		ret = count_open(l, err);
	}
	if (ret == 0)
		ret = check_schema(l, err);
	if (ret == 0)
		ret = plan_run(l, cfg, o, err);
	if (ret == 0)
		ret = start(l, o, err);
	if (ret < 0)
		goto fail;
	l->m.create_ns = pf_now_ns() - t_create;
	*out = l;
	return 0;
fail:
	if (ret == -ENOMEM && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory creating the loader");
	if (ret == -EAGAIN && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "cannot start loader threads");
	if (!l->open_tried) {
		pf_open_config ocfg = open_config(l);

		pf_dataset_open_abandon(&ocfg, err);
	}
	pf_pipe_free(l);
	return ret;
}

/* ------------------------------------------------------------------ */
/* The consumer side                                                    */

static bool slot_full(const pf_pipe *l, const batch_slot *b)
{
	return __atomic_load_n(&b->filled, __ATOMIC_ACQUIRE) == l->host_batch;
}

/* A deadline timeout_ns from now on the clock cv_ready waits with
 * (CLOCK_REALTIME, the default of pthread_cond_init). */
static struct timespec deadline_in(uint64_t timeout_ns)
{
	struct timespec ts;
	uint64_t ns;

	clock_gettime(CLOCK_REALTIME, &ts);
	ns = (uint64_t)ts.tv_nsec + timeout_ns % 1000000000u;
	ts.tv_sec += (time_t)(timeout_ns / 1000000000u + ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	return ts;
}

int pf_pipe_next(pf_pipe *l, pf_batch **out)
{
	return pf_pipe_next_timed(l, out, UINT64_MAX);
}

int pf_pipe_next_timed(pf_pipe *l, pf_batch **out, uint64_t timeout_ns)
{
	uint64_t t0 = pf_now_ns(), dt;
	unsigned fill = 0;
	batch_slot *b;
	struct timespec deadline = { 0 };

	if (l->cfg.plan_only) {
		l->misused = true;
		pf_error_clear(&l->misuse);
		return pf_error_set(&l->misuse, -EINVAL, PF_OFFSET_NONE, 0,
				    "a plan-only loader (plan_only) hands out no batch");
	}
	pthread_mutex_lock(&l->mu);
	pf_tune_next_entry(l, t0);
	/* A caller's mistake changes nothing: no batch is taken, the loader
	 * goes on, and the call after a release is the one this should
	 * have been. */
	l->misused = l->held > l->cfg.prefetch;
	if (l->misused) {
		pf_error_clear(&l->misuse);
		pf_error_set(&l->misuse, -EBUSY, PF_OFFSET_NONE, 0,
			     "%u batches held, at most prefetch + 1 = %u; release one first",
			     l->held, l->cfg.prefetch + 1);
		pthread_mutex_unlock(&l->mu);
		return -EBUSY;
	}
	if (timeout_ns != UINT64_MAX && timeout_ns)
		deadline = deadline_in(timeout_ns);
	for (;;) {
		b = l->open_head;
		if (b && slot_full(l, b))
			break;
		/* Batches made before a failure are still good: hand them out. */
		/* The end: when the last decode (and the last rows' task) is
		 * accounted, not earlier. */
		if (l->failed || (!b && l->io_done && !l->chunks_out && !l->win.expanding) ||
		    l->stop) {
			int ret = l->failed ? (l->err.code ? l->err.code : -EIO) : 0;
			pthread_mutex_unlock(&l->mu);
			if (ret == 0)
				pf_series_sample(l, pf_now_ns(), true);
			return ret;
		}
		if (timeout_ns == UINT64_MAX) {
			pthread_cond_wait(&l->cv_ready, &l->mu);
			continue;
		}
		/* Nothing is taken and nothing counted: the next call goes on
		 * where this one stopped. */
		if (timeout_ns == 0 ||
		    pthread_cond_timedwait(&l->cv_ready, &l->mu, &deadline) == ETIMEDOUT) {
			pthread_mutex_unlock(&l->mu);
			return -ETIMEDOUT;
		}
	}
	l->open_head = b->next;
	if (!l->open_head)
		l->open_tail = NULL;
	for (batch_slot *s = b; s && slot_full(l, s); s = s->next)
		fill++;
	l->held++;
	l->m.queue_fill_sum += fill;
	dt = pf_now_ns() - t0;
	l->m.next_wait_ns += dt;
	l->m.next_hist[pf_hist_bucket(dt)]++;
	l->m.steps++;
	l->m.records += l->host_batch;
	if (!l->m.first_batch_ns)
		l->m.first_batch_ns = pf_now_ns() - l->create_start_ns;
	if (__atomic_load_n(&b->holes, __ATOMIC_RELAXED)) {
		for (uint32_t c = 0; c < l->topo.cores; c++) {
			pf_core_batch *cb = &b->core[c];

			cb->nvalid = 0;
			for (uint32_t i = 0; i < l->topo.per_core_batch; i++)
				cb->nvalid += cb->valid[i];
			l->m.holes += l->topo.per_core_batch - cb->nvalid;
			l->m.records -= l->topo.per_core_batch - cb->nvalid;
		}
	}
	if (!l->c_any || b->batch.epoch != l->c_epoch) {
		l->c_epoch = b->batch.epoch;
		l->c_delivered = 0;
	}
	l->c_any = true;
	l->c_delivered += l->host_batch;
	l->c_last = b->batch;
	pf_tune_next_taken(l, t0 + dt, dt);
	pthread_mutex_unlock(&l->mu);
	pf_series_sample(l, t0 + dt, false);
	*out = &b->batch;
	return 1;
}

void pf_pipe_release(pf_pipe *l, pf_batch *batch)
{
	batch_slot *b;

	if (!batch)
		return;
	b = (batch_slot *)((char *)batch - offsetof(batch_slot, batch));
	pthread_mutex_lock(&l->mu);
	l->held--;
	if (l->staged)
		pf_window_slot_released(l, b);
	b->next = l->free_slots;
	l->free_slots = b;
	pthread_cond_signal(&l->cv_batch);
	pthread_mutex_unlock(&l->mu);
}

const pf_error *pf_pipe_last_error(const pf_pipe *l)
{
	if (l->misused)
		return &l->misuse;
	return l->failed ? &l->err : NULL;
}

void pf_pipe_metrics(const pf_pipe *l, pf_loader_metrics *m)
{
	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	*m = l->m;
	m->decode_threads = l->active_workers;
	{
		pf_io_totals t;

		pf_io_totals_get(&t);
		m->io_retries = t.retries - l->totals0.retries;
		m->io_faults = t.faults - l->totals0.faults;
		m->io_timeouts = t.timeouts - l->totals0.timeouts;
	}
	if (l->io_start_ns) {
		uint64_t end = l->io_end_ns ? l->io_end_ns : pf_now_ns();
		uint64_t span = end - l->io_start_ns;
		uint64_t since = __atomic_load_n(&l->io_wait_since, __ATOMIC_RELAXED);

		/* A wait in progress is wait, not work. */
		if (since && !l->io_end_ns && end > since)
			m->io.wait_ns += end - since;
		m->io.busy_ns = span > m->io.wait_ns ? span - m->io.wait_ns : 0;
	}
	if (m->image_scratch_bytes > l->image_reserved)
		m->memory_bytes += m->image_scratch_bytes - l->image_reserved;
	m->shuffle_window = l->cfg.shuffle ? l->wblock : 0;
	m->window_as_read = l->staged;
	m->window_bytes = l->window_bytes;
	m->window_peak_bytes = (uint64_t)l->win.peak * PF_WINDOW_PAGE;
	m->fitted = l->fitted;
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
}

uint64_t pf_pipe_steps_per_epoch(const pf_pipe *l)
{
	return l->steps_per_epoch;
}

uint64_t pf_pipe_steps_left(const pf_pipe *l)
{
	uint64_t taken;

	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	taken = l->m.steps;
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
	return pf_plan_steps_left(l->start_epoch, l->epochs,
				  l->resumed ? l->resume.steps : l->steps_per_epoch,
				  l->steps_per_epoch, l->cfg.max_steps, taken);
}

const pf_spec *pf_pipe_spec(const pf_pipe *l)
{
	return &l->spec;
}

void pf_pipe_free(pf_pipe *l)
{
	if (!l)
		return;
	pf_pipe_halt(l);
	for (unsigned i = 0; l->workers && i < l->nworkers; i++) {
		if (l->workers[i].started)
			pthread_join(l->workers[i].thread, NULL);
		pf_free(l->workers[i].ubuf);
		pf_free(l->workers[i].tally);
		pf_free(l->workers[i].touched);
		pf_frame_decoder_free(l->workers[i].fdec);
		pf_arena_release(&l->workers[i].arena);
		pf_image_scratch_free(&l->workers[i].image_scratch);
		pf_free(l->workers[i].freed);
	}
	if (l->io_started) {
		bool abandoned;

		/* With reads abandoned the thread's end may wait in the
		 * kernel for the storage (io_thread.c): not joined. */
		pthread_mutex_lock(&l->mu);
		while (!l->io_exited)
			pthread_cond_wait(&l->cv_init, &l->mu);
		abandoned = l->io_abandoned;
		pthread_mutex_unlock(&l->mu);
		if (abandoned)
			pthread_detach(l->io_thread);
		else
			pthread_join(l->io_thread, NULL);
	}
	for (unsigned i = 0; l->slots && i < l->nslots; i++) {
		pf_free(l->slots[i].core);
		pf_free(l->slots[i].tensors);
		pf_free(l->slots[i].valid);
	}
	for (unsigned i = 0; l->streams && i < l->nstreams; i++)
		pf_source_close(l->streams[i].src);
	pf_free(l->workers);
	pf_free(l->slots);
	pf_free(l->chunks);
	pf_free(l->streams);
	pf_free(l->ring);
	pf_free(l->mem_slotptr);
	pf_free(l->mem_perm);
	pf_pool_free(l->mem_batches, l->batches_size, l->cfg.keep_pools);
	pf_fcache_teardown(l);
	pf_window_teardown(l);
	pf_free(l->stored);
	if (l->io_left) {
		pf_pool_unmap(l->mem_cbufs, l->cbufs_size);
		pf_pool_unmap(l->mem_sbufs, l->sbufs_size);
	} else {
		pf_pool_free(l->mem_cbufs, l->cbufs_size, l->cfg.keep_pools);
		pf_pool_free(l->mem_sbufs, l->sbufs_size, l->cfg.keep_pools);
	}
	pf_file_policy_pop(&l->file_policy);
	pf_free(l->free_cbuf);
	pf_free(l->toff);
	pf_free(l->fbytes);
	pf_free(l->resume.pieces);
	pf_run_start_release(&l->which0);
	if (l->qfd >= 0)
		close(l->qfd);
	pf_dataset_free(l->ds);
	pf_series_exit(l);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv_chunk);
	pthread_cond_destroy(&l->cv_cbuf);
	pthread_cond_destroy(&l->cv_decode);
	pthread_cond_destroy(&l->cv_block);
	pthread_cond_destroy(&l->cv_batch);
	pthread_cond_destroy(&l->cv_ready);
	pthread_cond_destroy(&l->cv_init);
	pf_free(l);
}

void pf_pipe_order(const pf_pipe *l, pf_order *o)
{
	*o = (pf_order){ .ds = l->ds, .topo = l->topo, .shuffle = l->cfg.shuffle,
			 .block = l->wblock, .permute = l->shuffle_rows, .slice = l->slice,
			 .group = l->group };
}

/* ------------------------------------------------------------------ */
/* The face: pf_loader_*() of a pipeline                                */

static pf_pipe *pipe_of(pf_loader *f)
{
	return (pf_pipe *)f;
}

static const pf_pipe *cpipe_of(const pf_loader *f)
{
	return (const pf_pipe *)f;
}

pf_pipe *pf_pipe_of(pf_loader *l)
{
	return l && l->ops == &pf_pipe_ops ? pipe_of(l) : NULL;
}

static int ops_next(pf_loader *f, pf_batch **out, uint64_t timeout_ns)
{
	return pf_pipe_next_timed(pipe_of(f), out, timeout_ns);
}

static void ops_release(pf_loader *f, pf_batch *batch)
{
	pf_pipe_release(pipe_of(f), batch);
}

static int64_t ops_save_state(pf_loader *f, void *buf, size_t cap)
{
	return pf_pipe_save_state(pipe_of(f), buf, cap);
}

static const pf_error *ops_last_error(const pf_loader *f)
{
	return pf_pipe_last_error(cpipe_of(f));
}

static void ops_metrics(const pf_loader *f, pf_loader_metrics *m)
{
	pf_pipe_metrics(cpipe_of(f), m);
}

static void ops_tuning(const pf_loader *f, pf_tuning *t)
{
	pf_pipe_tuning(cpipe_of(f), t);
}

static uint64_t ops_steps_per_epoch(const pf_loader *f)
{
	return pf_pipe_steps_per_epoch(cpipe_of(f));
}

static uint64_t ops_steps_left(const pf_loader *f)
{
	return pf_pipe_steps_left(cpipe_of(f));
}

static const pf_spec *ops_spec(const pf_loader *f)
{
	return pf_pipe_spec(cpipe_of(f));
}

static int ops_feature_shape(const pf_loader *f, uint32_t i, uint32_t shape[3],
			     const char **elem, uint32_t *elem_size)
{
	const pf_pipe *l = cpipe_of(f);

	return pf_spec_feature_shape(&l->spec, &l->images, i, shape, elem, elem_size);
}

static int ops_series(const pf_loader *f, pf_series **out)
{
	return pf_pipe_series(cpipe_of(f), out);
}

static void ops_free(pf_loader *f)
{
	pf_pipe_free(pipe_of(f));
}

static int64_t ops_records_of(const pf_loader *f, uint64_t step, pf_record_ref *out,
			      size_t cap, pf_error *err)
{
	return pf_pipe_records_of(cpipe_of(f), step, out, cap, err);
}

static const char *ops_file(const pf_loader *f, uint32_t source, uint32_t file)
{
	return source ? NULL : pf_pipe_file(cpipe_of(f), file);
}

const pf_loader_ops pf_pipe_ops = {
	.next = ops_next,
	.release = ops_release,
	.save_state = ops_save_state,
	.last_error = ops_last_error,
	.metrics = ops_metrics,
	.tuning = ops_tuning,
	.steps_per_epoch = ops_steps_per_epoch,
	.steps_left = ops_steps_left,
	.spec = ops_spec,
	.feature_shape = ops_feature_shape,
	.series = ops_series,
	.free = ops_free,
	.records_of = ops_records_of,
	.file = ops_file,
};
