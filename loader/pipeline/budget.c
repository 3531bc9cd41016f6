/* SPDX-License-Identifier: Apache-2.0 */
/* The memory budget: how many read buffers, stream buffers, batch slots,
 * shuffle permutations and chunks the loader has, sized at creation to
 * fit cfg.memory_budget (fewer reads in flight, then the least lookahead
 * that works, before refusing with what it would need), and the pools
 * built from that plan: every buffer the hot path uses.  The plan is
 * the most the loader may use; read buffers are handed out as the reads
 * need them, under the limit autotune sets (at the start, the few the
 * first batch needs), and batch slots as the schedule opens the steps
 * they hold (a freed one first, so those in use stay few and warm), up to
 * what the prefetch in force allows.  A buffer or slot never needed is
 * never touched: the pools are anonymous mappings, so what the first
 * batch does not need costs it no page fault.  Not here: where the
 * pools come from (pool.c), or what fills them. */
#include <errno.h>
#include <string.h>

#include "pipeline_internal.h"
#include "spec_internal.h"

typedef struct mem_plan {
	size_t cbufs, sbufs, decode, batches, perm, fcache;
} mem_plan;

static size_t plan_total(const mem_plan *p)
{
	return p->cbufs + p->sbufs + p->decode + p->batches + p->perm + p->fcache;
}

/* The global shuffle's cache of decompressed frames (frame_cache.c), in
 * what the budget has left after the other pools: the config's frames,
 * or (auto) those the plan's frame groups need; none when no frame is
 * read more than once an epoch, in skip mode, or when the budget has no
 * room.  @return 0, or -ENOMEM (a cache asked for that does not fit). */
static int plan_fcache(pf_pipe *l, mem_plan *p, pf_error *err)
{
	const pf_dataset *ds = l->ds;
	size_t eb = pf_fcache_entry_bytes(ds), used = plan_total(p);
	size_t left = used < l->cfg.memory_budget ? l->cfg.memory_budget - used : 0;
	uint64_t want = l->cfg.frame_cache;

	l->fcache_entries = 0;
	if (!l->slice || l->cfg.frame_cache == PF_FRAME_CACHE_OFF ||
	    l->cfg.on_corrupt == PF_CORRUPT_SKIP || ds->max_unit_records <= l->slice)
		return 0;
	if (want == PF_AUTO) {
		/* The frames of a group of the plan, and one for each chunk
		 * in flight (a group's last segments are decoded while the
		 * next group's first are read). */
		want = (uint64_t)l->group + l->nchunks;
		want = want < ds->nunits ? want : ds->nunits;
		want = want < left / eb ? want : left / eb;
	} else if (want > left / eb) {
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "memory budget of %zu MiB has room for %zu of the frame "
				    "cache's %u frames of %zu KiB (the other pools take %zu MiB)",
				    l->cfg.memory_budget >> 20, left / eb, l->cfg.frame_cache,
				    eb >> 10, used >> 20);
	}
	want = want < ds->nunits ? want : ds->nunits;
	l->fcache_entries = (unsigned)want;
	p->fcache = (size_t)want * eb;
	return 0;
}

/* The largest segment a chunk can carry decides how many blocks one read
 * can touch; the slots must cover the blocks of `lookahead` segments at
 * once, plus what the consumer may hold, or the I/O thread could wait for
 * a slot that only its next read would free.  One segment is the least
 * that works; with it, a shuffle window of a few host batches (or none)
 * let the I/O thread read only one frame past the block being drained,
 * and one of two decoders sat idle (1.3 M against 2.7 M records/s with
 * no shuffle, 250,000 token records, 2 threads).  The ring (cheap) has
 * slack. */
static void plan_sizes(pf_pipe *l, unsigned lookahead)
{
	const pf_dataset *ds = l->ds;
	uint64_t maxseg = ds->max_unit_records;
	uint32_t wmin = l->wblock;
	uint64_t span;

	l->wmax = l->wblock;
	l->spb = l->wblock / l->host_batch;
	if (l->resumed) {
		uint32_t spb = pf_resume_spb(l);

		wmin = l->resume.w < wmin ? l->resume.w : wmin;
		l->wmax = l->resume.w > l->wmax ? l->resume.w : l->wmax;
		l->spb = spb > l->spb ? spb : l->spb;
	}
	if (ds->any_stream && maxseg < PF_STREAM_CHUNK_ROWS)
		maxseg = PF_STREAM_CHUNK_ROWS;
	span = (lookahead * maxseg + wmin - 1) / wmin + 1;
	l->nring = (uint32_t)span + 2;
	l->nslots = (unsigned)(span * l->spb) + l->cfg.prefetch + 1;
}

/* The slots and shuffle permutations for `lookahead` segments. */
static void plan_blocks(pf_pipe *l, mem_plan *p, unsigned lookahead)
{
	plan_sizes(l, lookahead);
	p->batches = (size_t)l->nslots * l->topo.cores * l->block_bytes;
	p->perm = l->shuffle_rows || (l->resumed && l->resume.permute)
		  ? (size_t)l->nring * l->wmax * sizeof(uint32_t) : 0;
}

static int plan_memory(pf_pipe *l, mem_plan *p, pf_error *err)
{
	const pf_dataset *ds = l->ds;
	size_t budget = l->cfg.memory_budget;
	unsigned depth = l->cfg.io_depth;
	uint64_t arena_rec = ds->max_usize > ds->max_stream_record ? ds->max_usize
								   : ds->max_stream_record;

	l->cbuf_bytes = round_up(ds->max_csize ? ds->max_csize : 1, PF_ALIGN);
	/* Streams read at once: one per worker, and the next one, whose
	 * first blocks are read while the workers decode; each with
	 * PF_STREAM_BUFS blocks. */
	l->nstreams = l->nworkers + 1;
	p->sbufs = ds->any_stream ? (size_t)l->nstreams * PF_STREAM_BUFS * PF_READ_DEFAULT : 0;
	l->image_reserved = (size_t)l->nworkers * pf_images_scratch_estimate(l);
	p->decode = (size_t)l->nworkers * (ds->max_usize + PF_ARENA_BYTES_FOR(arena_rec)) +
		    l->image_reserved;
	/* A segment per worker and two more in flight (a mixture's source:
	 * its share of the mixture's); where the budget has no room for
	 * that, the least that works. */
	plan_blocks(l, p, l->lookahead && l->lookahead < l->nworkers + 2 ? l->lookahead
									 : l->nworkers + 2);
	l->ncbufs = ds->max_csize ? depth + l->nworkers : 0;
	p->cbufs = (size_t)l->ncbufs * l->cbuf_bytes;
	if (plan_total(p) > budget)
		plan_blocks(l, p, 1);
	for (;;) {
		l->ncbufs = ds->max_csize ? depth + l->nworkers : 0;
		p->cbufs = (size_t)l->ncbufs * l->cbuf_bytes;
		if (plan_total(p) <= budget || depth == 1)
			break;
		depth = depth > 4 ? depth / 2 : 1;	/* fewer reads in flight */
	}
	l->cfg.io_depth = depth;
	l->nchunks = depth + 2 * l->nworkers + 2;
	if (plan_total(p) > budget)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
			"memory budget of %zu MiB is too small: it needs %zu MiB "
			"(read buffers %zu, stream buffers %zu (%u streams x %u x %u KiB), "
			"decode %zu, batch slots %zu (%u of %zu KiB), shuffle %zu MiB); "
			"a smaller shuffle window or batch needs fewer slots, and fewer "
			"threads fewer stream buffers", budget >> 20,
			(plan_total(p) + (1u << 20) - 1) >> 20, p->cbufs >> 20,
			p->sbufs >> 20, p->sbufs ? l->nstreams : 0, PF_STREAM_BUFS,
			PF_READ_DEFAULT >> 10, p->decode >> 20, p->batches >> 20, l->nslots,
			((size_t)l->topo.cores * l->block_bytes) >> 10, p->perm >> 20);
	return 0;
}

static int setup_slot(pf_pipe *l, batch_slot *s)
{
	s->core = pf_calloc(l->topo.cores, sizeof(*s->core));
	s->tensors = pf_calloc((size_t)l->topo.cores * l->spec.n, sizeof(*s->tensors));
	s->valid = pf_malloc(l->host_batch);
	if (!s->core || !s->tensors || !s->valid)
		return -ENOMEM;
	memset(s->valid, 1, l->host_batch);
	for (uint32_t c = 0; c < l->topo.cores; c++) {
		pf_core_batch *cb = &s->core[c];

		cb->block = s->mem + (size_t)c * l->block_bytes;
		cb->block_bytes = l->block_bytes;
		cb->tensors = &s->tensors[(size_t)c * l->spec.n];
		cb->ntensors = l->spec.n;
		cb->valid = s->valid + (size_t)c * l->topo.per_core_batch;
		cb->nvalid = l->topo.per_core_batch;
		for (uint32_t f = 0; f < l->spec.n; f++) {
			cb->tensors[f].name = l->spec.f[f].name;
			cb->tensors[f].dtype = l->spec.f[f].dtype;
			cb->tensors[f].len = l->spec.f[f].len;
			cb->tensors[f].data = (uint8_t *)cb->block + l->toff[f];
		}
	}
	s->batch.core = s->core;
	s->batch.cores = l->topo.cores;
	s->batch.per_core_batch = l->topo.per_core_batch;
	return 0;
}

int pf_budget_setup(pf_pipe *l, pf_error *err)
{
	const pf_dataset *ds = l->ds;
	uint64_t arena_rec = ds->max_usize > ds->max_stream_record ? ds->max_usize
								   : ds->max_stream_record;
	mem_plan p = { 0 };
	int ret;

	/* Tensor layout: each core's block holds its features one after the
	 * other, [per_core_batch][len] each, 64-byte aligned. */
	l->toff = pf_calloc(l->spec.n, sizeof(*l->toff));
	l->fbytes = pf_calloc(l->spec.n, sizeof(*l->fbytes));
	if (!l->toff || !l->fbytes)
		return -ENOMEM;
	l->block_bytes = 0;
	for (uint32_t f = 0; f < l->spec.n; f++) {
		l->fbytes[f] = l->spec.f[f].len * pf_dtype_size(l->spec.f[f].dtype);
		l->toff[f] = l->block_bytes;
		l->block_bytes = round_up(l->block_bytes +
					  l->fbytes[f] * l->topo.per_core_batch, 64);
	}
	l->depth_plan = l->cfg.io_depth;
	ret = plan_memory(l, &p, err);
	if (ret < 0)
		return ret;
	/* PF_AUTO may raise prefetch: the slots for the most it may choose,
	 * where the budget has room for them (made only when chosen). */
	l->prefetch_max = l->cfg.prefetch;
	if (l->tune.prefetch.automatic && l->cfg.prefetch < PF_PREFETCH_AUTO_MAX) {
		size_t more = (size_t)(PF_PREFETCH_AUTO_MAX - l->cfg.prefetch) *
			      l->topo.cores * l->block_bytes;

		if (plan_total(&p) + more <= l->cfg.memory_budget) {
			l->nslots += PF_PREFETCH_AUTO_MAX - l->cfg.prefetch;
			p.batches += more;
			l->prefetch_max = PF_PREFETCH_AUTO_MAX;
		}
	}

	ret = plan_fcache(l, &p, err);
	if (ret < 0)
		return ret;
	l->chunks = pf_calloc(l->nchunks, sizeof(*l->chunks));
	l->streams = pf_calloc(l->nstreams, sizeof(*l->streams));
	l->mem_sbufs = pf_pool_alloc(p.sbufs);
	l->sbufs_size = p.sbufs;
	l->free_cbuf = pf_calloc(l->ncbufs ? l->ncbufs : 1, sizeof(*l->free_cbuf));
	l->ring = pf_calloc(l->nring, sizeof(*l->ring));
	l->mem_slotptr = pf_calloc((size_t)l->nring * l->spb, sizeof(*l->mem_slotptr));
	l->mem_cbufs = pf_pool_alloc(p.cbufs);
	l->cbufs_size = p.cbufs;
	l->slots = pf_calloc(l->nslots, sizeof(*l->slots));
	l->mem_batches = pf_spec_sparse(&l->spec) ? pf_pool_alloc_sparse(p.batches)
						 : pf_pool_alloc(p.batches);
	l->batches_size = p.batches;
	l->mem_perm = p.perm ? pf_malloc(p.perm) : NULL;
	if (!l->chunks || !l->streams || !l->free_cbuf || !l->ring || !l->mem_slotptr ||
	    (p.cbufs && !l->mem_cbufs) || (p.sbufs && !l->mem_sbufs) || !l->slots ||
	    (p.batches && !l->mem_batches) || (p.perm && !l->mem_perm))
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "cannot allocate %zu MiB of pools", plan_total(&p) >> 20);
	for (unsigned i = 0; i < l->nchunks; i++) {
		l->chunks[i].next = l->free_chunks;
		l->free_chunks = &l->chunks[i];
	}
	for (unsigned i = 0; i < l->nstreams; i++) {
		stream_state *ss = &l->streams[i];

		ss->l = l;
		for (unsigned j = 0; j < PF_STREAM_BUFS && l->mem_sbufs; j++) {
			ss->buf[j].ss = ss;
			ss->buf[j].mem = l->mem_sbufs +
					 ((size_t)i * PF_STREAM_BUFS + j) * PF_READ_DEFAULT;
		}
		ss->next = l->free_streams;
		l->free_streams = ss;
	}
	/* Read buffers are made as the reads need them
	 * (pf_budget_cbuf_ready()), batch slots as the schedule opens steps
	 * (pf_budget_slot_take()), up to those the prefetch of now allows:
	 * here only their descriptions, which touch no page of the pool. */
	for (unsigned i = 0; i < l->nslots; i++) {
		batch_slot *s = &l->slots[i];

		s->mem = l->mem_batches + (size_t)i * l->topo.cores * l->block_bytes;
		if (setup_slot(l, s) < 0)
			return -ENOMEM;
	}
	pf_budget_grow_slots(l, l->cfg.prefetch);
	for (unsigned i = 0; i < l->nworkers; i++) {
		worker *w = &l->workers[i];

		w->l = l;
		w->tally = pf_calloc((size_t)l->nring * l->spb, sizeof(*w->tally));
		w->touched = pf_calloc((size_t)l->nring * l->spb, sizeof(*w->touched));
		if (!w->tally || !w->touched ||
		    pf_arena_init(&w->arena, PF_ARENA_BYTES_FOR(arena_rec)) < 0)
			return -ENOMEM;
		if (!ds->max_csize)
			continue;	/* only stream files: no frames */
		w->ubuf = pf_malloc(ds->max_usize);
		if (!w->ubuf || pf_frame_decoder_create(&w->fdec) < 0)
			return -ENOMEM;
	}
	if (pf_fcache_setup(l, l->fcache_entries) < 0)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "cannot allocate the frame cache's %zu MiB", p.fcache >> 20);
	l->m.frame_cache_entries = l->fcache_entries;
	l->m.frame_cache_bytes = p.fcache;
	l->memory_bytes = plan_total(&p);
	return 0;
}

batch_slot *pf_budget_slot_take(pf_pipe *l, bool *fresh)
{
	batch_slot *s = l->free_slots;

	*fresh = !s;
	if (s)
		l->free_slots = s->next;
	else if (l->slots_made < l->slots_limit)
		s = &l->slots[l->slots_made++];
	if (s)
		s->next = NULL;
	return s;
}

void pf_budget_slot_make(pf_pipe *l, batch_slot *s)
{
	for (uint32_t c = 0; c < l->topo.cores; c++) {
		uint8_t *block = s->core[c].block;

		for (uint32_t f = 0; f < l->spec.n; f++) {
			size_t end = l->toff[f] + l->fbytes[f] * l->topo.per_core_batch;
			size_t next = f + 1 < l->spec.n ? l->toff[f + 1] : l->block_bytes;

			/* Rows are written whole, every time; the alignment gap
			 * after a tensor never is, and a pool kept from another
			 * loader (pool.c) may hold anything there. */
			if (next > end)
				memset(block + end, 0, next - end);
		}
	}
}

bool pf_budget_cbuf_ready(pf_pipe *l)
{
	/* Made in index order, taken most recently freed first: the buffers
	 * in use stay few and warm, and one never needed is never touched
	 * (nor pinned: the engine registers a buffer at its first read). */
	if (l->cbufs_made - l->nfree_cbuf >= l->cbuf_limit)
		return false;
	if (!l->nfree_cbuf && l->cbufs_made < l->ncbufs)
		l->free_cbuf[l->nfree_cbuf++] = (int)l->cbufs_made++;
	return l->nfree_cbuf != 0;
}

void pf_budget_grow_slots(pf_pipe *l, unsigned prefetch)
{
	l->slots_limit = l->nslots - (l->prefetch_max - prefetch);
	pthread_cond_broadcast(&l->cv_batch);	/* the I/O thread may wait for one */
}
