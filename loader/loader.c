/* SPDX-License-Identifier: Apache-2.0 */
/* The loader's public API (podfeed.h): pf_loader_create() checks the
 * config, opens the dataset, restores a saved run, builds the pools and
 * starts the threads; pf_loader_next() and pf_loader_release() hand the
 * batch slots out in step order and take them back; the metrics, errors
 * and pf_loader_free().  How the pipeline behind it works, and which
 * file holds each part of it, is in pipeline_internal.h.  Not here: the
 * pipeline's threads (io_thread.c, schedule.c, decode.c), the memory
 * budget (budget.c), resume (resume.c, which also saves the state). */
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

/* Wake every thread waiting on the loader.  Call with mu held. */
static void wake_all(pf_loader *l)
{
	pthread_cond_broadcast(&l->cv_chunk);
	pthread_cond_broadcast(&l->cv_cbuf);
	pf_decode_broadcast(l);
	pthread_cond_broadcast(&l->cv_block);
	pthread_cond_broadcast(&l->cv_batch);
	pthread_cond_broadcast(&l->cv_ready);
	pthread_cond_broadcast(&l->cv_init);	/* an I/O thread at its gate */
}

/* Wake the I/O thread if it sleeps, whatever it waits for.  Call with mu
 * held. */
void pf_loader_wake_io(pf_loader *l)
{
	if (l->io_sleep)
		pthread_cond_broadcast(l->io_sleep);
}

/* Record the first failure and wake everyone.  Call with mu held. */
void pf_loader_fail_locked(pf_loader *l, const pf_error *err, int code)
{
	if (!l->failed) {
		l->failed = true;
		if (err && err->code)
			l->err = *err;
		else
			pf_error_set(&l->err, code, PF_OFFSET_NONE, 0, "%s",
				     pf_strerror(code));
		if (!l->err.code)
			l->err.code = code;
	}
	wake_all(l);
}

void pf_loader_fail(pf_loader *l, const pf_error *err, int code)
{
	pthread_mutex_lock(&l->mu);
	pf_loader_fail_locked(l, err, code);
	pthread_mutex_unlock(&l->mu);
}

/* How this loader opens its dataset (plan.c, count.c). */
static pf_open_config open_config(pf_loader *l)
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
static void global_reads_hint(const pf_loader *l)
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

/* A loader over cfg's sources (mixture.c). */
static int create_mixture(pf_loader **out, const pf_loader_config *cfg, pf_error *err)
{
	pf_loader *l;
	int ret;

	if (!cfg->sources || !cfg->nsources || !cfg->features || !cfg->per_core_batch)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "a mixture needs sources (%zu given), a feature spec and a "
				    "per-core batch", cfg->sources ? cfg->nsources : 0);
	/* Packing packs one record order; a mixture deals rows among
	 * loaders: the two together are not built (docs/api.md). */
	if (cfg->pack_length)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "a mixture cannot be packed: pack_length %u with %zu sources "
				    "(pack one dataset, or mix without packing)",
				    cfg->pack_length, cfg->nsources);
	l = pf_calloc(1, sizeof(*l));
	if (!l)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory creating the loader");
	ret = pf_mixture_create(&l->mix, cfg, err);
	if (ret < 0) {
		pf_free(l);
		return ret;
	}
	l->cfg = *cfg;
	*out = l;
	return 0;
}

/* The global shuffle reads slices of frames through the index: a file
 * without one (a stream) cannot be sliced, and is refused by name. */
static int check_global(const pf_loader *l, pf_error *err)
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

/* The config's size as of the first sized ABI (0.5): the least any
 * caller may pass (abi_compat.c gives it for programs built before). */
#define CONFIG_SIZE_0_5 PF_LOADER_CONFIG_SIZE_0_5

/* Internal options of create(): a packer's inner loader's (lspec, opened:
 * pack.c), a mixture's source's (lookahead, sink, fit: mixture.c). */
typedef struct create_opts {
	const pf_spec *lspec;
	bool *opened;
	unsigned lookahead;
	const pf_row_sink *sink;
	pf_batch_fit fit;
	bool gated, pooled;
} create_opts;

static int create(pf_loader **out, const pf_loader_config *ucfg, size_t cfg_size,
		  const pf_spec *spec, const create_opts *o, pf_error *err);

int pf_loader_create_sized(pf_loader **out, const pf_loader_config *ucfg, size_t cfg_size,
			   pf_error *err)
{
	return create(out, ucfg, cfg_size, NULL, &(create_opts){ 0 }, err);
}

int pf_loader_create_spec(pf_loader **out, const pf_loader_config *cfg, const pf_spec *spec,
			  pf_error *err)
{
	return create(out, cfg, sizeof(*cfg), spec, &(create_opts){ 0 }, err);
}

int pf_loader_start_workers(pf_loader *l, pf_error *err)
{
	for (unsigned i = 0; i < l->nworkers; i++) {
		if (pthread_create(&l->workers[i].thread, NULL, pf_loader_worker_main,
				   &l->workers[i]))
			return pf_error_set(err, -EAGAIN, PF_OFFSET_NONE, 0,
					    "cannot start loader threads");
		l->workers[i].started = true;
	}
	return 0;
}

int pf_loader_create_packing(pf_loader **out, const pf_loader_config *cfg, const pf_spec *spec,
			     const pf_spec *lspec, bool *opened, pf_error *err)
{
	*opened = false;
	return create(out, cfg, sizeof(*cfg), spec,
		      &(create_opts){ .lspec = lspec, .opened = opened }, err);
}

int pf_loader_create_lookahead(pf_loader **out, const pf_loader_config *cfg,
			       unsigned lookahead, const pf_row_sink *sink, pf_batch_fit fit,
			       bool gated, bool pooled, pf_error *err)
{
	return create(out, cfg, sizeof(*cfg), NULL,
		      &(create_opts){ .lookahead = lookahead, .sink = sink, .fit = fit,
				      .gated = gated, .pooled = pooled },
		      err);
}

void pf_loader_halt(pf_loader *l)
{
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	wake_all(l);
	pthread_mutex_unlock(&l->mu);
}

void pf_loader_open_gate(pf_loader *l, uint64_t max_steps)
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
static int fit_batch(pf_loader *l, pf_batch_fit fit, pf_error *err)
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

static int create(pf_loader **out, const pf_loader_config *ucfg, size_t cfg_size,
		  const pf_spec *spec, const create_opts *o, pf_error *err)
{
	uint64_t t_create = pf_now_ns();
	pf_loader_config config;
	const pf_loader_config *cfg = &config;
	pf_error local;
	pf_loader *l = NULL;
	int ret = 0;

	pf_error_clear(err);
	if (!err) {
		pf_error_clear(&local);
		err = &local;
	}
	/* A config this library cannot read is every host's (one binary):
	 * no host waits for another's part then. */
	if (!ucfg)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "no loader config given");
	ret = pf_struct_in(&config, sizeof(config), ucfg, cfg_size, CONFIG_SIZE_0_5,
			   "pf_loader_config", err);
	if (ret < 0)
		return ret;
	if (cfg->nsources || cfg->sources)
		return create_mixture(out, cfg, err);
	if (!cfg->npaths || (!cfg->features && !spec) || !cfg->per_core_batch)
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "the loader needs paths, a feature spec and a per-core batch");
	else if (cfg->pack_length)
		return pf_pack_create(out, cfg, err);
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

	l->topo.host_index = cfg->host_index;
	l->topo.num_hosts = cfg->num_hosts ? cfg->num_hosts : 1;
	l->topo.cores = cfg->cores_per_host ? cfg->cores_per_host : 1;
	l->topo.per_core_batch = cfg->per_core_batch;
	if (l->topo.host_index >= l->topo.num_hosts) {
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "host index %u is not below the host count %u",
				   l->topo.host_index, l->topo.num_hosts);
		goto fail;
	}
	if ((uint64_t)l->topo.cores * l->topo.per_core_batch > UINT32_MAX / 2) {
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "host batch of %u cores x %u records is too large",
				   l->topo.cores, l->topo.per_core_batch);
		goto fail;
	}
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
	l->sink = o->sink;
	l->gated = o->gated;
	l->host_batch = l->topo.cores * l->topo.per_core_batch;
	if ((unsigned)cfg->shuffle_mode > PF_SHUFFLE_GLOBAL) {
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "shuffle_mode %u is neither PF_SHUFFLE_WINDOW (0) nor "
				   "PF_SHUFFLE_GLOBAL (1)", (unsigned)cfg->shuffle_mode);
		goto fail;
	}
	/* The global shuffle is a shuffle: its slices go through the window
	 * as a window shuffle's frames do. */
	l->cfg.shuffle = cfg->shuffle || cfg->shuffle_mode == PF_SHUFFLE_GLOBAL;
	ret = pf_plan_block(l->cfg.shuffle, cfg->shuffle_window, l->host_batch, &l->wblock,
			    &l->shuffle_rows, err);
	if (ret < 0)
		goto fail;
	if (cfg->shuffle_mode == PF_SHUFFLE_GLOBAL)
	{
		l->slice = pf_plan_slice(l->wblock, l->topo.per_core_batch);
	}

	if (spec)
		l->spec = *spec;
	else
		ret = pf_spec_parse_images(&l->spec, &l->images, cfg->features, err);
	if (ret < 0)
		goto fail;
	pf_images_setup(l);
	for (uint32_t i = 0; i < l->spec.n; i++)
		if (l->spec.f[i].ragged) {
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "feature spec: '%s' is ragged ([*]): give it a length "
					   "(%s:%s[N]) or a pack length (pack_length, loadbench "
					   "--pack L) to pack it", l->spec.f[i].name,
					   l->spec.f[i].name, pf_dtype_name(l->spec.f[i].dtype));
			goto fail;
		}
	pf_io_totals_get(&l->totals0);
	if (cfg->io_faults || cfg->io_retries || cfg->io_retry_backoff_us || cfg->io_timeout_ms) {
		pf_io_config pol = { .faults = cfg->io_faults, .retries = cfg->io_retries,
				     .retry_backoff_us = cfg->io_retry_backoff_us,
				     .timeout_ms = cfg->io_timeout_ms };

		/* pf_file_pread() reads the index tails and stream files: the
		 * loader's policy governs them while it lives, and is taken
		 * back by pf_loader_free(). */
		ret = pf_file_policy_push(&l->file_policy, &pol, err);
		if (ret < 0)
			goto fail;
	}
	if (cfg->on_corrupt == PF_CORRUPT_SKIP && cfg->quarantine) {
		l->qfd = open(cfg->quarantine, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (l->qfd < 0) {
			ret = pf_error_set(err, -errno, PF_OFFSET_NONE, 0,
					   "cannot open the quarantine log: %s",
					   strerror(errno));
			pf_error_set_file(err, cfg->quarantine);
			goto fail;
		}
	}
	{
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
	}
	if (ret < 0) {
		if (l->failed)
			*err = l->err;	/* the corrupt-data budget, or the log */
		goto fail;
	}
	l->create_start_ns = t_create;
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
	/* Drops the other hosts found counting their streams: this host's
	 * too, against the same budget. */
	if (l->ds->open.remote_drops) {
		l->m.corrupt_drops += l->ds->open.remote_drops;
		l->m.corrupt_records += l->ds->open.remote_dropped;
		l->m.corrupt_unknown += l->ds->open.remote_unknown;
		l->m.corrupt_bytes += l->ds->open.remote_skipped;
		if (l->cfg.max_corrupt && l->m.corrupt_drops > l->cfg.max_corrupt) {
			ret = pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
					   "more than %llu corrupt units dropped (the budget): %llu "
					   "counting the stream files, %llu of them on other hosts",
					   (unsigned long long)l->cfg.max_corrupt,
					   (unsigned long long)l->m.corrupt_drops,
					   (unsigned long long)l->ds->open.remote_drops);
			goto fail;
		}
	}
	/* A spec feature the shards' records lack is a mistake in the spec
	 * (a misspelled name): say so now, not as padding or at the first
	 * record that lacks it. */
	for (size_t i = 0; i < l->ds->nfiles; i++) {
		const pf_shard_index *ix = l->ds->index[i];

		if (!ix)
			continue;
		ret = pf_spec_check_schema(&l->spec, pf_shard_index_schema(ix, 0),
					   pf_shard_index_schema_count(ix),
					   pf_shard_index_records(ix), l->ds->paths[i], "shard's",
					   err);
		if (ret < 0)
			goto fail;
	}
	/* From a manifest: its schema, of every indexed shard merged. */
	if (l->ds->manifest) {
		ret = pf_spec_check_schema(&l->spec, pf_manifest_schema(l->ds->manifest, 0),
					   pf_manifest_schema_count(l->ds->manifest),
					   pf_manifest_schema_records(l->ds->manifest),
					   l->ds->manifest_path, "manifest's", err);
		if (ret < 0)
			goto fail;
	}
	if (o->fit) {
		ret = fit_batch(l, o->fit, err);
		if (ret < 0)
			goto fail;
	}
	ret = pf_plan_check_records(l->ds->records, &l->topo, cfg->remainder, err);
	if (ret < 0) {
		ret = pf_drops_explain_size(l, err);
		goto fail;
	}
	ret = check_global(l, err);
	if (ret < 0)
		goto fail;
	if (l->slice)
		l->group = pf_plan_group(l->topo.per_core_batch, l->wblock, l->ds->nunits,
					 l->ds->records);
	l->steps_per_epoch = pf_plan_steps(l->ds->records, &l->topo, cfg->remainder);
	l->m.records_per_epoch = l->ds->records;
	l->m.steps_per_epoch = l->steps_per_epoch;
	if (cfg->nresume) {
		if (!cfg->resume) {
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "nresume is %zu but resume is NULL", cfg->nresume);
			goto fail;
		}
		ret = pf_resume_restore(l, err);
		if (ret < 0)
			goto fail;
	}
	l->workers = pf_calloc(l->nworkers, sizeof(*l->workers));
	if (!l->workers) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = pf_budget_setup(l, err);
	if (ret < 0)
		goto fail;
	global_reads_hint(l);
	l->m.memory_bytes = l->memory_bytes;
	ret = pf_series_init(l);
	if (ret < 0)
		goto fail;
	pf_tune_start(l);

	/* Start: I/O first (it reports whether the engine came up). */
	if (pthread_create(&l->io_thread, NULL, pf_loader_io_main, l)) {
		ret = -EAGAIN;
		goto fail;
	}
	l->io_started = true;
	pthread_mutex_lock(&l->mu);
	while (!l->io_ready)
		pthread_cond_wait(&l->cv_init, &l->mu);
	ret = l->io_init_ret;
	if (ret < 0)
		*err = l->err;
	pthread_mutex_unlock(&l->mu);
	if (ret < 0)
		goto fail;
	/* Packing's inner loader: its packer plans where its first records
	 * go before they are decoded (pack.c starts them). */
	if (!o->opened && !o->pooled) {
		ret = pf_loader_start_workers(l, err);
		if (ret < 0)
			goto fail;
	}
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
	pf_loader_free(l);
	return ret;
}

/* ------------------------------------------------------------------ */
/* The consumer side                                                    */

static bool slot_full(const pf_loader *l, const batch_slot *b)
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

int pf_loader_next(pf_loader *l, pf_batch **out)
{
	return pf_loader_next_timed(l, out, UINT64_MAX);
}

int pf_loader_next_timed(pf_loader *l, pf_batch **out, uint64_t timeout_ns)
{
	uint64_t t0 = pf_now_ns(), dt;
	unsigned fill = 0;
	batch_slot *b;
	struct timespec deadline = { 0 };

	if (l->pack)
		return pf_pack_next(l, out, timeout_ns);
	/* A mixture's batch is made in this call, from its sources' batches
	 * (which it waits for whatever the timeout). */
	if (l->mix)
		return pf_mixture_next(l->mix, out);
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
		if (l->failed || (!b && l->io_done && !l->chunks_out) || l->stop) {
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

void pf_loader_release(pf_loader *l, pf_batch *batch)
{
	batch_slot *b;

	if (!batch)
		return;
	if (l->pack) {
		pf_pack_release(l, batch);
		return;
	}
	if (l->mix) {
		pf_mixture_release(l->mix, batch);
		return;
	}
	b = (batch_slot *)((char *)batch - offsetof(batch_slot, batch));
	pthread_mutex_lock(&l->mu);
	l->held--;
	b->next = l->free_slots;
	l->free_slots = b;
	pthread_cond_signal(&l->cv_batch);
	pthread_mutex_unlock(&l->mu);
}

const pf_error *pf_loader_last_error(const pf_loader *l)
{
	if (l->mix)
		return pf_mixture_last_error(l->mix);
	if (l->misused)
		return &l->misuse;
	return l->failed ? &l->err : NULL;
}

void pf_loader_get_metrics_sized(const pf_loader *l, pf_loader_metrics *um, size_t m_size)
{
	pf_loader_metrics metrics, *m = &metrics;

	if (l->pack) {
		pf_pack_metrics(l, m);
		pf_struct_out(um, m_size, m, sizeof(*m));
		return;
	}
	if (l->mix) {
		pf_mixture_metrics(l->mix, m);
		pf_struct_out(um, m_size, m, sizeof(*m));
		return;
	}
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
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
	pf_struct_out(um, m_size, m, sizeof(*m));
}

uint64_t pf_loader_steps_per_epoch(const pf_loader *l)
{
	return l->mix ? pf_mixture_steps(l->mix) : l->steps_per_epoch;
}

uint64_t pf_loader_steps_left(const pf_loader *l)
{
	uint64_t total = 0, taken;

	if (l->mix)
		return pf_mixture_steps_left(l->mix);
	/* The run: the rest of a resumed epoch (or a whole one), then whole
	 * epochs up to the count, cut at max_steps (counted from this
	 * run's start, as the schedule counts it). */
	if (l->start_epoch < l->epochs) {
		uint64_t first = l->resumed ? l->resume.steps : l->steps_per_epoch;
		uint64_t rest = l->epochs - l->start_epoch - 1;

		if (rest && l->steps_per_epoch > (UINT64_MAX - first) / rest)
			total = UINT64_MAX;
		else
			total = first + rest * l->steps_per_epoch;
	}
	if (l->cfg.max_steps && l->cfg.max_steps < total)
		total = l->cfg.max_steps;
	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	taken = l->m.steps;
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
	if (total == UINT64_MAX)
		return UINT64_MAX;
	return total > taken ? total - taken : 0;
}

const pf_spec *pf_loader_spec(const pf_loader *l)
{
	return l->mix ? pf_mixture_spec(l->mix) : &l->spec;
}

size_t pf_loader_sources(const pf_loader *l)
{
	return l->mix ? pf_mixture_sources(l->mix) : 0;
}

int pf_loader_source_metrics_sized(const pf_loader *l, size_t i, pf_source_metrics *out,
				   size_t out_size)
{
	pf_source_metrics m;

	if (!l->mix || i >= pf_mixture_sources(l->mix))
		return -ENOENT;
	pf_mixture_source_metrics(l->mix, i, &m);
	pf_struct_out(out, out_size, &m, sizeof(m));
	return 0;
}

void pf_loader_free(pf_loader *l)
{
	if (!l)
		return;
	if (l->pack) {
		pf_pack_free(l);
		return;
	}
	if (l->mix) {
		pf_mixture_free(l->mix);
		pf_free(l);
		return;
	}
	pf_loader_halt(l);
	for (unsigned i = 0; l->workers && i < l->nworkers; i++) {
		if (l->workers[i].started)
			pthread_join(l->workers[i].thread, NULL);
		pf_free(l->workers[i].ubuf);
		pf_free(l->workers[i].tally);
		pf_free(l->workers[i].touched);
		pf_frame_decoder_free(l->workers[i].fdec);
		pf_arena_release(&l->workers[i].arena);
		pf_image_scratch_free(&l->workers[i].image_scratch);
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

