/* SPDX-License-Identifier: Apache-2.0 */
/* The global shuffle's cache of decompressed frames.
 *
 * The global shuffle reads slices of frames: a frame of r records is
 * wanted by about r / s segments of an epoch's plan.  Without a cache
 * each of them reads and decompresses the whole frame.  Here a frame is
 * read and decompressed once into an entry (with the offset of each of
 * its records, so a slice is found without framing what precedes it),
 * and the plan's later segments of that frame are served from the entry
 * while it is kept.  The plan is known in full before it is read, so the
 * I/O thread knows each entry's next use (the plan index of the next
 * segment of its frame): a frame that must come in while the cache is
 * full replaces the entry used farthest ahead (or used no more), or is
 * not kept at all when its own next use is the farthest (Belady's
 * optimal replacement).  An entry some dispatched segment still needs
 * (pinned) is never replaced; when every entry is pinned, the frame is
 * decoded as without a cache.  So the cache changes which worker
 * decompresses what, never where a record goes: batches are the same
 * with it, without it and for any number of threads.
 *
 * Entries live in one anonymous mapping counted in the memory budget
 * (budget.c sizes it); the I/O thread assigns them (under l->mu), the
 * worker that decodes a frame's first segment fills its entry and marks
 * it ready, and the workers of its other segments wait for that by
 * leaving them in the queue (take_work(), decode.c).  Skip mode
 * (on_corrupt=skip) does not use the cache: a damaged frame's places are
 * holes decided per segment (decode.c). */
#include <errno.h>
#include <string.h>

#include "pipeline_internal.h"

#define NONE UINT64_MAX

size_t pf_fcache_entry_bytes(const pf_dataset *ds)
{
	return round_up(ds->max_usize ? ds->max_usize : 1, PF_ALIGN) +
	       round_up(((size_t)ds->max_unit_records + 1) * sizeof(uint32_t), PF_ALIGN);
}

int pf_fcache_setup(pf_pipe *l, unsigned entries)
{
	pf_fcache *fc = &l->fcache;
	size_t eb = pf_fcache_entry_bytes(l->ds);

	if (!entries)
		return 0;
	fc->e = pf_calloc(entries, sizeof(*fc->e));
	fc->map = pf_malloc(l->ds->nunits * sizeof(*fc->map));
	fc->mem = pf_pool_alloc((size_t)entries * eb);
	if (!fc->e || !fc->map || !fc->mem)
		return -ENOMEM;
	fc->mem_size = (size_t)entries * eb;
	memset(fc->map, 0xff, l->ds->nunits * sizeof(*fc->map));
	for (unsigned i = 0; i < entries; i++) {
		pf_dframe *d = &fc->e[i];

		d->unit = NONE;
		d->next_use = NONE;
		d->mem = fc->mem + (size_t)i * eb;
		d->offs = (uint32_t *)(d->mem + round_up(l->ds->max_usize ? l->ds->max_usize : 1,
							 PF_ALIGN));
	}
	fc->n = entries;
	return 0;
}

void pf_fcache_teardown(pf_pipe *l)
{
	pf_fcache *fc = &l->fcache;

	pf_free(fc->e);
	pf_free(fc->map);
	pf_free(fc->next);
	pf_pool_free(fc->mem, fc->mem_size, l->cfg.keep_pools);
	memset(fc, 0, sizeof(*fc));
}

int pf_fcache_plan(pf_pipe *l, const pf_epoch_plan *plan)
{
	pf_fcache *fc = &l->fcache;

	if (!fc->n)
		return 0;
	/* Plan indexes are kept in 32 bits: a plan of more segments (some
	 * 10^11 records a host) is read without the cache. */
	fc->off = plan->nseg >= UINT32_MAX;
	if (fc->off)
		return 0;
	if (plan->nseg > fc->next_cap) {
		uint64_t *n = pf_malloc(plan->nseg * sizeof(*n));

		if (!n)
			return -ENOMEM;
		pf_free(fc->next);
		fc->next = n;
		fc->next_cap = plan->nseg;
	}
	/* Walked backwards with fc->map as each unit's first segment after
	 * i: the cached entries are unmapped meanwhile, and mapped again
	 * after with their first use in this plan as the next.  The map, the
	 * units and the next uses are the I/O thread's alone. */
	for (unsigned i = 0; i < fc->n; i++)
		if (fc->e[i].unit != NONE)
			fc->map[fc->e[i].unit] = UINT32_MAX;
	for (size_t i = plan->nseg; i-- > 0;) {
		uint64_t u = plan->seg[i].unit;

		fc->next[i] = fc->map[u] == UINT32_MAX ? NONE : fc->map[u];
		fc->map[u] = (uint32_t)i;
	}
	for (unsigned i = 0; i < fc->n; i++) {
		pf_dframe *d = &fc->e[i];

		if (d->unit == NONE)
			continue;
		d->next_use = fc->map[d->unit] == UINT32_MAX ? NONE : fc->map[d->unit];
	}
	for (size_t i = 0; i < plan->nseg; i++)
		fc->map[plan->seg[i].unit] = UINT32_MAX;
	for (unsigned i = 0; i < fc->n; i++)
		if (fc->e[i].unit != NONE)
			fc->map[fc->e[i].unit] = i;
	return 0;
}

pf_dframe *pf_fcache_take(pf_pipe *l, uint64_t unit, size_t s, bool *load)
{
	pf_fcache *fc = &l->fcache;
	uint64_t next = fc->next[s];
	pf_dframe *d = NULL;

	*load = false;
	if (!fc->n || fc->off)
		return NULL;
	if (fc->map[unit] != UINT32_MAX) {
		d = &fc->e[fc->map[unit]];
		d->next_use = next;
		d->pins++;
		l->m.frame_cache_hits++;
		return d;
	}
	/* A miss: the entry used farthest ahead that no dispatched segment
	 * still needs (a free one first), unless this frame's next use is
	 * farther still (then it is not kept). */
	for (unsigned i = 0; i < fc->n; i++) {
		pf_dframe *e = &fc->e[i];

		if (e->pins)
			continue;
		if (e->unit == NONE) {
			d = e;
			break;
		}
		if (!d || e->next_use > d->next_use)
			d = e;
	}
	if (!d || next == NONE || (d->unit != NONE && d->next_use <= next)) {
		l->m.frame_cache_bypassed++;
		return NULL;
	}
	if (d->unit != NONE) {
		fc->map[d->unit] = UINT32_MAX;
		l->m.frame_cache_evictions++;
	}
	d->unit = unit;
	d->next_use = next;
	d->ready = false;
	d->pins = 1;
	fc->map[unit] = (uint32_t)(d - fc->e);
	l->m.frame_cache_loads++;
	*load = true;
	return d;
}
