/* SPDX-License-Identifier: Apache-2.0 */
/* The memory budget: how many read buffers, stream buffers, batch slots,
 * shuffle permutations, window pages and chunks the loader has, sized at
 * creation to fit cfg.memory_budget, and the pools built from that plan:
 * every buffer the hot path uses.
 *
 * Fitting.  What the config leaves to the loader is fitted to the budget
 * rather than refused; what it sets and the budget cannot hold is refused
 * naming the largest it can (tf.data's autotune works within its RAM
 * budget the same way).  First, once the dataset is open
 * (pf_budget_fit()): where the shuffle window's records wait (as read, in
 * the window's pages, when their rows cost more than their stored bytes:
 * image features; else as decoded rows in batch slots), and a default
 * window's size, which is part of the order and so is chosen from what
 * does not depend on the machine (the dataset, the spec, the topology,
 * the budget): the default 8,192 records when they fit in a quarter of
 * the budget (or, as rows, beside the least the other pools need: every
 * window that fitted before still does), else the largest that fits in a
 * quarter, the rest left for the reads in flight, the decode buffers,
 * the batches being made and held, and the global shuffle's frame cache.
 * A quarter, not more: every page of a window is touched, and fresh
 * memory costs the kernel a clear (on this project's VMs, a host fault
 * too): tools/bench/images' 5,000 images on the defaults took 11% more
 * CPU with the window in half the budget (4,352 records) than in a
 * quarter (2,176), which took 1.8% more than 1,088 (medians of 3
 * interleaved rounds: 5.04, 4.53 and 4.45 CPU s, of which sys 0.61,
 * 0.15 and 0.12; a later sweep of 1,920, 1,440 and 960 records differed
 * by less than the machine's noise).  Then (pf_budget_setup()) the rest, cutting only what the config
 * left open: fewer segments ahead, fewer reads in flight, a smaller
 * prefetch, fewer decode threads; then the global shuffle's frame cache
 * takes what is left.  Each choice is said in l->tune (pf_loader_tuning())
 * and l->fitted (the metrics).
 *
 * The plan is the most the loader may use; read buffers are handed out
 * as the reads need them, under the limit autotune sets (at the start,
 * the few the first batch needs), and batch slots (or the window's row
 * blocks) as the schedule opens the steps they hold (a freed one first,
 * so those in use stay few and warm), up to what the prefetch in force
 * allows.  A buffer or slot never needed is never touched: the pools are
 * anonymous mappings, so what the first batch does not need costs it no
 * page fault.  Not here: where the pools come from (pool.c), what fills
 * them, the window's pages at work (window.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline_internal.h"
#include "spec_internal.h"

/* What the plan is made from: the block, and the settings the budget may
 * cut. */
typedef struct knobs {
	uint32_t w;		/* records per shuffle block */
	unsigned workers, depth, lookahead, prefetch;
} knobs;

typedef struct mem_plan {
	size_t cbufs, sbufs, decode, batches, perm, fcache, window;
	uint32_t wmax, spb, nring, pages;
	unsigned nslots, ncbufs, nstreams, nchunks, nrows;
} mem_plan;

static size_t plan_total(const mem_plan *p)
{
	return p->cbufs + p->sbufs + p->decode + p->batches + p->perm + p->fcache + p->window;
}

static size_t batch_bytes(const pf_pipe *l)
{
	return (size_t)l->topo.cores * l->block_bytes;
}

static void say(pf_tuning_choice *c, unsigned value, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void say(pf_tuning_choice *c, unsigned value, const char *fmt, ...)
{
	va_list ap;

	c->value = value;
	c->measured = false;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* The window of records as read: what a block's records take           */

static uint32_t unit_pages(uint64_t usize)
{
	uint64_t n = (usize + PF_WINDOW_PAGE - 1) / PF_WINDOW_PAGE;

	return n ? (uint32_t)n : 1;
}

/* Pages per record of the dataset's frames (a frame's pages over its
 * records, 2^-32 units), in buckets of 1/16 octave; a frame's records
 * take at most its decompressed bytes' pages. */
#define QBUCKETS (64 * 16)

typedef struct pf_stored {
	uint64_t rec[QBUCKETS];
	uint32_t unit_max;	/* the largest frame's pages */
	uint64_t usize, records;
} pf_stored;

static unsigned qbucket(uint64_t q)
{
	unsigned e = 63u - (unsigned)__builtin_clzll(q);
	uint64_t m = e >= 4 ? (q >> (e - 4)) & 15 : (q << (4 - e)) & 15;

	return e * 16 + (unsigned)m;
}

/* The bucket's upper edge, 2^-32 units. */
static pf_u128 qedge(unsigned b)
{
	unsigned e = b / 16, m = b % 16;

	return e >= 4 ? (pf_u128)(16 + m + 1) << (e - 4) : 16;
}

static pf_stored *stored_make(const pf_dataset *ds)
{
	pf_stored *st = pf_calloc(1, sizeof(*st));

	for (uint64_t u = 0; st && u < ds->nunits; u++) {
		const pf_unit *un = &ds->units[u];
		uint32_t pages = unit_pages(un->usize);
		uint64_t q;

		if (un->stream || !un->records)
			continue;
		q = (uint64_t)(((pf_u128)pages << 32) / un->records);
		st->rec[qbucket(q ? q : 1)] += un->records;
		st->unit_max = pages > st->unit_max ? pages : st->unit_max;
		st->usize += un->usize;
		st->records += un->records;
	}
	return st;
}

/* The most pages the records of one block of w records can take: the
 * frames that take the most pages a record first (whole frames inside
 * the block), and the two frames cut at its ends. */
static uint32_t block_pages(const pf_pipe *l, uint64_t w)
{
	const pf_stored *st = l->stored;
	uint64_t left = w < st->records ? w : st->records;
	pf_u128 q = 0;
	uint64_t pages;

	for (unsigned b = QBUCKETS; b-- > 0 && left;) {
		uint64_t take = st->rec[b] < left ? st->rec[b] : left;

		q += (pf_u128)take * qedge(b);
		left -= take;
	}
	pages = (uint64_t)((q + ((pf_u128)1 << 32) - 1) >> 32) + 2ull * st->unit_max;
	return pages < UINT32_MAX / 2 ? (uint32_t)pages : UINT32_MAX / 2;
}

/* The global shuffle's slices: a chunk of slices fills its last page
 * only partly, and a block's records may come a slice a chunk (a frame
 * read again, or loaded into the cache), so a block of w records takes up
 * to a page more for each of its slices than its bytes need (frames of
 * no more records than a slice are read whole: no more than their pages).
 * The slice of a block of w records: pf_plan_slice(w), or a resumed
 * epoch's. */
static uint32_t slice_pages(const pf_pipe *l, uint32_t w)
{
	uint32_t s = l->slice ? pf_plan_slice(w, l->topo.per_core_batch) : 0;

	if (l->resumed && l->resume.slice && (!s || l->resume.slice < s))
		s = l->resume.slice;
	if (!s || l->ds->max_unit_records <= s)
		return 0;
	return w / s + 2;
}

/* Pages for the chunks read ahead beside a block: a frame for each
 * worker and two more. */
static uint32_t ahead_pages(const pf_pipe *l, unsigned workers)
{
	return (workers + 2) * l->stored->unit_max;
}

/* Where the window's records wait.  As read when a record's rows cost
 * more than its stored bytes: image features (their decode is also the
 * expensive part, done once the order is fixed), of indexed shards (a
 * stream's records are not sized before they are read), in a loader of
 * its own (a mixture's sources write into the mixture's batches as they
 * decode).  PODFEED_WINDOW=rows|records forces either (to measure; the
 * batches are the same). */
static bool stage_records(const pf_pipe *l)
{
	const char *want = getenv("PODFEED_WINDOW");
	size_t row = 0;

	if (!l->images.n || l->source || l->ds->any_stream || !l->ds->max_csize ||
	    !l->ds->records)
		return false;
	if (want && !strcmp(want, "rows"))
		return false;
	if (want && !strcmp(want, "records"))
		return true;
	for (uint32_t f = 0; f < l->spec.n; f++)
		row += l->fbytes[f];
	return l->stored->usize / l->stored->records < row;
}

/* ------------------------------------------------------------------ */
/* The plan                                                             */

/* The pools for knobs k.  The slots (or the window's descriptors) cover
 * the blocks of `lookahead` segments at once, plus what the consumer may
 * hold, or the I/O thread could wait for a slot only its next read would
 * free.  One segment is the least that works; with it, a shuffle window
 * of a few host batches (or none) let the I/O thread read only one frame
 * past the block being drained, and one of two decoders sat idle (1.3 M
 * against 2.7 M records/s with no shuffle, 250,000 token records, 2
 * threads).  The ring (cheap) has slack. */
static void plan_of(const pf_pipe *l, const knobs *k, mem_plan *p)
{
	const pf_dataset *ds = l->ds;
	uint64_t maxseg = ds->max_unit_records;
	uint64_t arena_rec = ds->max_usize > ds->max_stream_record ? ds->max_usize
								   : ds->max_stream_record;
	uint32_t wmin = k->w;
	uint64_t span;

	memset(p, 0, sizeof(*p));
	p->wmax = k->w;
	p->spb = k->w / l->host_batch;
	if (l->resumed) {
		uint32_t spb = pf_resume_spb(l);

		wmin = l->resume.w < wmin ? l->resume.w : wmin;
		p->wmax = l->resume.w > p->wmax ? l->resume.w : p->wmax;
		p->spb = spb > p->spb ? spb : p->spb;
	}
	if (ds->any_stream && maxseg < PF_STREAM_CHUNK_ROWS)
		maxseg = PF_STREAM_CHUNK_ROWS;
	span = (k->lookahead * maxseg + wmin - 1) / wmin + 1;
	p->nring = (uint32_t)span + 2;
	p->nslots = (unsigned)(span * p->spb) + k->prefetch + 1;
	p->perm = l->shuffle_rows || (l->resumed && l->resume.permute)
		  ? (size_t)p->nring * p->wmax * sizeof(uint32_t) : 0;
	p->ncbufs = ds->max_csize ? k->depth + k->workers : 0;
	p->cbufs = (size_t)p->ncbufs * l->cbuf_bytes;
	/* Streams read at once: one per worker, and the next one, whose
	 * first blocks are read while the workers decode; each with
	 * PF_STREAM_BUFS blocks. */
	p->nstreams = k->workers + 1;
	p->sbufs = ds->any_stream ? (size_t)p->nstreams * PF_STREAM_BUFS * PF_READ_DEFAULT : 0;
	p->decode = (size_t)k->workers * (ds->max_usize + PF_ARENA_BYTES_FOR(arena_rec) +
					  pf_images_scratch_estimate(l));
	p->nchunks = k->depth + 2 * k->workers + 2;
	if (l->staged) {
		/* Row blocks for the consumer's prefetch + 1 and two steps
		 * being decoded; pages for a block's records and the chunks
		 * read ahead; each slot's records' places. */
		p->nrows = k->prefetch + 3;
		p->batches = (size_t)p->nrows * batch_bytes(l);
		p->pages = block_pages(l, p->wmax) + slice_pages(l, p->wmax) +
			   ahead_pages(l, k->workers);
		p->window = (size_t)p->pages * (PF_WINDOW_PAGE + 3 * sizeof(uint32_t)) +
			    (size_t)p->nslots * l->host_batch * sizeof(pf_wrec);
	} else {
		p->batches = (size_t)p->nslots * batch_bytes(l);
	}
}

/* What the window of w records takes: its blocks' slots of decoded rows,
 * or its records' pages and places, and its permutations, reading one
 * segment ahead (no thread's share: the window is part of the order). */
static size_t window_mem(const pf_pipe *l, uint32_t w)
{
	knobs k = { .w = w, .workers = 0, .depth = 0, .lookahead = 1, .prefetch = 0 };
	mem_plan p;

	plan_of(l, &k, &p);
	if (l->staged)
		return p.window - (size_t)ahead_pages(l, 0) * PF_WINDOW_PAGE + p.perm;
	return (size_t)(p.nslots - 1) * batch_bytes(l) + p.perm;
}

/* The least the loader needs with a window of w: one worker, one read,
 * one segment ahead, the config's prefetch (PF_AUTO's least: 0). */
static size_t plan_min(const pf_pipe *l, uint32_t w)
{
	knobs k = { .w = w, .workers = 1, .depth = 1, .lookahead = 1,
		    .prefetch = l->tune.prefetch.automatic ? 0 : l->cfg.prefetch };
	mem_plan p;

	plan_of(l, &k, &p);
	return plan_total(&p);
}

static double mib(size_t bytes)
{
	return (double)bytes / (1 << 20);
}

/* The tensor layout: each core's block holds its features one after the
 * other, [per_core_batch][len] each, 64-byte aligned; and a read
 * buffer's size. */
static int layout(pf_pipe *l)
{
	if (l->toff)
		return 0;
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
	l->cbuf_bytes = round_up(l->ds->max_csize ? l->ds->max_csize : 1, PF_ALIGN);
	return 0;
}

/* A default window the budget cannot hold in a quarter: the largest of whole
 * host batches that it can (and beside which the least of the rest
 * fits), at least one host batch.  Monotone enough for a bisection: the
 * window's memory grows with its records. */
static uint32_t fit_window(const pf_pipe *l, uint32_t w0, size_t share)
{
	uint64_t lo = 0, hi = w0 / l->host_batch;

	while (lo < hi) {
		uint64_t m = lo + (hi - lo + 1) / 2;
		uint32_t w = (uint32_t)(m * l->host_batch);

		if (window_mem(l, w) <= share && plan_min(l, w) <= l->cfg.memory_budget)
			lo = m;
		else
			hi = m - 1;
	}
	return (uint32_t)(lo ? lo : 1) * l->host_batch;
}

int pf_budget_fit(pf_pipe *l, pf_error *err)
{
	size_t budget = l->cfg.memory_budget, share = budget / 4;
	pf_tuning_choice *c = &l->tune.shuffle_window;
	const char *as;
	uint32_t w0 = l->wblock;

	if (layout(l) < 0)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory creating the loader");
	pf_free(l->stored);
	l->stored = stored_make(l->ds);
	if (!l->stored)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory creating the loader");
	l->staged = stage_records(l);
	as = l->staged ? "as read" : "as decoded rows";
	l->window_default = w0;
	c->automatic = !l->cfg.shuffle_window;
	if (!l->cfg.shuffle) {
		say(c, 0, "no shuffle");
		return 0;
	}
	if (l->cfg.shuffle_window) {
		say(c, w0, "set by the config: its records %s take %.1f MiB of the budget's %zu",
		    as, mib(window_mem(l, w0)), budget >> 20);
		return 0;
	}
	if (window_mem(l, w0) <= share || (!l->staged && plan_min(l, w0) <= budget)) {
		say(c, w0, "the default %u records (in whole host batches of %u): %s they take "
		    "%.1f MiB of the budget's %zu", PF_WINDOW_DEFAULT, l->host_batch, as,
		    mib(window_mem(l, w0)), budget >> 20);
		return 0;
	}
	l->wblock = fit_window(l, w0, share);
	if (l->slice)
		l->slice = pf_plan_slice(l->wblock, l->topo.per_core_batch);
	l->fitted |= PF_FITTED_WINDOW;
	say(c, l->wblock, "cut from the default %u to fit the memory budget: %u records %s "
	    "(~%.1f KiB each) take %.1f MiB, over a quarter of the budget's %zu; %u take "
	    "%.1f MiB",
	    w0, w0, as, l->staged ? (double)l->stored->usize / l->stored->records / 1024
				  : (double)batch_bytes(l) / l->host_batch / 1024,
	    mib(window_mem(l, w0)), budget >> 20, l->wblock, mib(window_mem(l, l->wblock)));
	return 0;
}

/* ------------------------------------------------------------------ */
/* The pools                                                            */

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
	uint64_t want = l->cfg.frame_cache, plan;
	pf_tuning_choice *c = &l->tune.frame_cache;

	l->fcache_entries = 0;
	c->automatic = l->cfg.frame_cache == PF_AUTO;
	if (!l->slice) {
		say(c, 0, "none: the window shuffle reads each frame once an epoch");
		return 0;
	}
	if (l->cfg.frame_cache == PF_FRAME_CACHE_OFF) {
		say(c, 0, "off, set by the config: every slice reads its frame");
		return 0;
	}
	if (l->cfg.on_corrupt == PF_CORRUPT_SKIP) {
		say(c, 0, "none: skip mode decides a damaged frame's holes per slice");
		return 0;
	}
	if (ds->max_unit_records <= l->slice) {
		say(c, 0, "none: no frame holds more than a slice of %u records", l->slice);
		return 0;
	}
	if (want == PF_AUTO) {
		/* The frames of a group of the plan, and one for each chunk
		 * in flight (a group's last segments are decoded while the
		 * next group's first are read). */
		plan = (uint64_t)l->group + l->nchunks;
		plan = plan < ds->nunits ? plan : ds->nunits;
		want = plan < left / eb ? plan : left / eb;
		if (want < plan) {
			l->fitted |= PF_FITTED_FRAME_CACHE;
			say(c, (unsigned)want, "cut from %llu frames (a group of %u and %u chunks in "
			    "flight) to fit the memory budget: %.1f MiB left after the other pools, "
			    "%zu KiB a frame", (unsigned long long)plan, l->group, l->nchunks,
			    mib(left), eb >> 10);
		} else {
			say(c, (unsigned)want, "a frame group of %u and %u chunks in flight "
			    "(%.1f MiB)", l->group, l->nchunks, mib((size_t)want * eb));
		}
	} else if (want > left / eb) {
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "memory budget of %zu MiB has room for %zu of the frame "
				    "cache's %u frames of %zu KiB (the other pools take %zu MiB)",
				    l->cfg.memory_budget >> 20, left / eb, l->cfg.frame_cache,
				    eb >> 10, used >> 20);
	} else {
		say(c, (unsigned)want, "set by the config (%.1f MiB)", mib((size_t)want * eb));
	}
	want = want < ds->nunits ? want : ds->nunits;
	l->fcache_entries = (unsigned)want;
	p->fcache = (size_t)want * eb;
	return 0;
}

/* The largest value of the knob at `off` in [least, most], in steps of
 * `step` (a window: whole host batches), with which the plan fits, the
 * other knobs as in k.  @return it, or -1: not even the least. */
static int64_t largest(const pf_pipe *l, knobs k, size_t off, uint32_t least, uint32_t most,
		       uint32_t step)
{
	int64_t lo = (int64_t)least / step - 1, hi = most / step;

	while (lo < hi) {
		int64_t m = lo + (hi - lo + 1) / 2;
		mem_plan p;

		*(uint32_t *)((char *)&k + off) = (uint32_t)(m * step);
		plan_of(l, &k, &p);
		if (plan_total(&p) <= l->cfg.memory_budget)
			lo = m;
		else
			hi = m - 1;
	}
	return lo * step >= least ? lo * step : -1;
}

/* The budget too small for the plan at k: the value the config set that
 * does not fit (the window, the prefetch, the threads), with the largest
 * that does, else what each pool would need. */
static int too_small(pf_pipe *l, const knobs *k, const mem_plan *p, pf_error *err)
{
	size_t budget = l->cfg.memory_budget;
	size_t need = (plan_total(p) + (1u << 20) - 1) >> 20;
	int64_t fit;

	if (l->cfg.shuffle && l->cfg.shuffle_window && k->w > l->host_batch &&
	    (fit = largest(l, *k, offsetof(knobs, w), l->host_batch, k->w - l->host_batch,
			   l->host_batch)) > 0)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "shuffle_window of %u records does not fit the memory "
				    "budget of %zu MiB: the loader needs %zu MiB with it (its "
				    "records %s take %.1f MiB); the largest window that fits is "
				    "%lld records", l->cfg.shuffle_window, budget >> 20, need,
				    l->staged ? "as read" : "as decoded rows",
				    mib(window_mem(l, k->w)), (long long)fit);
	if (!l->tune.prefetch.automatic && k->prefetch &&
	    (fit = largest(l, *k, offsetof(knobs, prefetch), 0, k->prefetch - 1, 1)) >= 0)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "prefetch of %u does not fit the memory budget of %zu MiB: "
				    "the loader needs %zu MiB with it (a batch is %.1f MiB); the "
				    "largest prefetch that fits is %lld", k->prefetch, budget >> 20,
				    need, mib(batch_bytes(l)), (long long)fit);
	if (!l->tune.threads.automatic && k->workers > 1 &&
	    (fit = largest(l, *k, offsetof(knobs, workers), 1, k->workers - 1, 1)) > 0)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "threads of %u do not fit the memory budget of %zu MiB: the "
				    "loader needs %zu MiB with them (%.1f MiB of decode buffers "
				    "each); the most threads that fit are %lld", k->workers,
				    budget >> 20, need, mib(p->decode / k->workers), (long long)fit);
	return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
		"memory budget of %zu MiB is too small: it needs %zu MiB "
		"(read buffers %zu, stream buffers %zu (%u streams x %u x %u KiB), "
		"decode %zu, batch slots %zu (%u of %zu KiB), shuffle %zu MiB%s); "
		"a smaller shuffle window or batch needs fewer slots, and fewer "
		"threads fewer stream buffers", budget >> 20, need, p->cbufs >> 20,
		p->sbufs >> 20, p->sbufs ? p->nstreams : 0, PF_STREAM_BUFS,
		PF_READ_DEFAULT >> 10, p->decode >> 20, p->batches >> 20,
		l->staged ? p->nrows : p->nslots, batch_bytes(l) >> 10, p->perm >> 20,
		l->staged ? ", the window's records as read more" : "");
}

/* The plan that fits: what the config left open cut, in turn, to what
 * the budget holds (segments ahead, reads in flight, prefetch, threads).
 * @return 0 with *k and *p, or -ENOMEM with err. */
static int plan_memory(pf_pipe *l, knobs *k, mem_plan *p, pf_error *err)
{
	size_t budget = l->cfg.memory_budget;

	*k = (knobs){ .w = l->wblock, .workers = l->nworkers, .depth = l->cfg.io_depth,
		      .prefetch = l->cfg.prefetch };
	/* A segment per worker and two more in flight (a mixture's source:
	 * its share of the mixture's); where the budget has no room for
	 * that, the least that works. */
	k->lookahead = l->lookahead && l->lookahead < l->nworkers + 2 ? l->lookahead
								      : l->nworkers + 2;
	plan_of(l, k, p);
	if (plan_total(p) > budget) {
		k->lookahead = 1;
		plan_of(l, k, p);
	}
	while (plan_total(p) > budget && k->depth > 1) {
		k->depth = k->depth > 4 ? k->depth / 2 : 1;	/* fewer reads in flight */
		plan_of(l, k, p);
	}
	while (plan_total(p) > budget && l->tune.prefetch.automatic && k->prefetch) {
		k->prefetch--;
		l->fitted |= PF_FITTED_PREFETCH;
		plan_of(l, k, p);
	}
	while (plan_total(p) > budget && l->tune.threads.automatic && k->workers > 1) {
		k->workers = k->workers > 4 ? k->workers / 2 : k->workers - 1;
		l->fitted |= PF_FITTED_THREADS;
		if (k->lookahead > 1)
			k->lookahead = k->workers + 2;
		plan_of(l, k, p);
	}
	if (plan_total(p) > budget)
		return too_small(l, k, p, err);
	return 0;
}

static int setup_slot(pf_pipe *l, batch_slot *s)
{
	s->core = pf_calloc(l->topo.cores, sizeof(*s->core));
	s->tensors = pf_calloc((size_t)l->topo.cores * l->spec.n, sizeof(*s->tensors));
	s->valid = pf_malloc(l->host_batch);
	s->rowblock = -1;
	if (!s->core || !s->tensors || !s->valid)
		return -ENOMEM;
	memset(s->valid, 1, l->host_batch);
	for (uint32_t c = 0; c < l->topo.cores; c++) {
		pf_core_batch *cb = &s->core[c];

		cb->block_bytes = l->block_bytes;
		cb->tensors = &s->tensors[(size_t)c * l->spec.n];
		cb->ntensors = l->spec.n;
		cb->valid = s->valid + (size_t)c * l->topo.per_core_batch;
		cb->nvalid = l->topo.per_core_batch;
		for (uint32_t f = 0; f < l->spec.n; f++) {
			cb->tensors[f].name = l->spec.f[f].name;
			cb->tensors[f].dtype = l->spec.f[f].dtype;
			cb->tensors[f].len = l->spec.f[f].len;
		}
	}
	pf_budget_slot_point(l, s, s->mem);
	s->batch.core = s->core;
	s->batch.cores = l->topo.cores;
	s->batch.per_core_batch = l->topo.per_core_batch;
	return 0;
}

void pf_budget_slot_point(pf_pipe *l, batch_slot *s, uint8_t *mem)
{
	s->mem = mem;
	for (uint32_t c = 0; c < l->topo.cores; c++) {
		pf_core_batch *cb = &s->core[c];

		cb->block = mem ? mem + (size_t)c * l->block_bytes : NULL;
		for (uint32_t f = 0; f < l->spec.n; f++)
			cb->tensors[f].data = mem ? (uint8_t *)cb->block + l->toff[f] : NULL;
	}
}

/* What was chosen for the threads and the prefetch, when the budget cut
 * them (autotune says the rest: pf_tune_start()). */
static void say_cuts(pf_pipe *l, const knobs *k, const mem_plan *p, unsigned workers0,
		     unsigned prefetch0)
{
	if (l->fitted & PF_FITTED_THREADS)
		say(&l->tune.threads, k->workers, "cut from %u (every CPU) to %u to fit the "
		    "memory budget of %zu MiB: each takes %.1f MiB of decode buffers",
		    workers0, k->workers, l->cfg.memory_budget >> 20,
		    mib(p->decode / k->workers));
	if (l->fitted & PF_FITTED_PREFETCH)
		say(&l->tune.prefetch, k->prefetch, "cut from %u to %u to fit the memory "
		    "budget of %zu MiB: a batch is %.1f MiB", prefetch0, k->prefetch,
		    l->cfg.memory_budget >> 20, mib(batch_bytes(l)));
}

int pf_budget_setup(pf_pipe *l, pf_error *err)
{
	const pf_dataset *ds = l->ds;
	uint64_t arena_rec = ds->max_usize > ds->max_stream_record ? ds->max_usize
								   : ds->max_stream_record;
	unsigned workers0 = l->nworkers, prefetch0 = l->cfg.prefetch;
	mem_plan p = { 0 };
	knobs k;
	int ret;

	if (!l->stored && pf_budget_fit(l, err) < 0)
		return err->code;
	l->depth_plan = l->cfg.io_depth;
	ret = plan_memory(l, &k, &p, err);
	if (ret < 0)
		return ret;
	l->nworkers = k.workers;
	l->cfg.io_depth = k.depth;
	l->cfg.prefetch = k.prefetch;
	l->wmax = p.wmax;
	l->spb = p.spb;
	l->nring = p.nring;
	l->nslots = p.nslots;
	l->ncbufs = p.ncbufs;
	l->nstreams = p.nstreams;
	l->nchunks = p.nchunks;
	say_cuts(l, &k, &p, workers0, prefetch0);
	/* PF_AUTO may raise prefetch: the slots (or row blocks) for the most
	 * it may choose, where the budget has room for them (made only when
	 * chosen). */
	l->prefetch_max = l->cfg.prefetch;
	if (l->tune.prefetch.automatic && l->cfg.prefetch < PF_PREFETCH_AUTO_MAX &&
	    !(l->fitted & PF_FITTED_PREFETCH)) {
		unsigned more = PF_PREFETCH_AUTO_MAX - l->cfg.prefetch;
		size_t bytes = (size_t)more * batch_bytes(l) +
			       (l->staged ? (size_t)more * l->host_batch * sizeof(pf_wrec) : 0);

		if (plan_total(&p) + bytes <= l->cfg.memory_budget) {
			l->nslots += more;
			if (l->staged) {
				p.nrows += more;
				p.window += (size_t)more * l->host_batch * sizeof(pf_wrec);
			}
			p.batches += (size_t)more * batch_bytes(l);
			l->prefetch_max = PF_PREFETCH_AUTO_MAX;
		}
	}
	l->image_reserved = (size_t)l->nworkers * pf_images_scratch_estimate(l);

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
	 * here only their descriptions, which touch no page of the pool.
	 * With the window of records as read the slots hold no rows: a row
	 * block is taken when a step's rows are (window.c). */
	for (unsigned i = 0; i < l->nslots; i++) {
		batch_slot *s = &l->slots[i];

		s->mem = l->staged ? NULL : l->mem_batches + (size_t)i * batch_bytes(l);
		if (setup_slot(l, s) < 0)
			return -ENOMEM;
	}
	if (l->staged && pf_window_setup(l, p.pages, p.nrows) < 0)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "cannot allocate the shuffle window's %zu MiB",
				    p.window >> 20);
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
	l->window_bytes = l->staged ? p.window : p.batches;
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
	if (l->staged)
		pf_window_grow_rows(l, prefetch);
	pthread_cond_broadcast(&l->cv_batch);	/* the I/O thread may wait for one */
}
