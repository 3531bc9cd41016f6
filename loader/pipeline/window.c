/* SPDX-License-Identifier: Apache-2.0 */
/* The window of records as read: where a shuffle block's records wait,
 * as their bytes, when decoding them into rows is the expensive part
 * (image features; budget.c decides, l->staged).  The order is fixed
 * before a record is read (schedule.c opens its block and its steps'
 * slots), so a record is only copied here on its way through a worker
 * (placement.c), and decoded into its row once every record of its step
 * is in: the window's memory follows the records' stored size, and only
 * the steps being decoded and held need rows.
 *
 * Pages.  The window is npages pages of PF_WINDOW_PAGE bytes in one
 * mapping.  The I/O thread reserves a chunk's pages before it reads the
 * chunk (as many as its frame's decompressed bytes need), in the order
 * of the plan, so that the records of the oldest shuffle block always get
 * theirs first: a worker never waits for a page.  The worker copies the
 * chunk's records one after the other through the chain of its pages (a
 * record may run on into the next page) and gives back the pages it did
 * not fill.  A page counts the records on it; decoding the last one gives
 * it back, and wakes the I/O thread, which may wait for pages.
 *
 * Steps.  The slots of a block's steps are opened in step order with no
 * rows (pf_window_slot_opened()); once all of a step's records are in
 * (their chunks flushed: placement.c's pf_place_flush()), the workers
 * take its rows in tasks of a few, in step order (pf_window_take_task()),
 * the first task taking a row block for it, which goes back when the
 * consumer releases the batch.  Taking steps in order with at most
 * prefetch + 3 row blocks cannot deadlock: the consumer takes batches in
 * that order and holds at most prefetch + 1.
 *
 * If the records of one block need more pages than the window has (the
 * budget sized it for the largest bytes a block of the dataset's frames
 * can hold: budget.c), nothing could give a page back: the loader fails
 * naming the window and what to change, rather than wait for ever.
 *
 * Not here: where a record goes (placement.c), sizing the window
 * (budget.c), what is read when (schedule.c). */
#include <errno.h>
#include <string.h>

#include "pipeline_internal.h"

static uint32_t pages_for(uint64_t bytes)
{
	uint64_t n = (bytes + PF_WINDOW_PAGE - 1) / PF_WINDOW_PAGE;

	return n ? (n < UINT32_MAX ? (uint32_t)n : UINT32_MAX - 1) : 1;
}

static uint8_t *page_at(const pf_pipe *l, uint32_t p)
{
	return l->win.mem + (size_t)p * PF_WINDOW_PAGE;
}

int pf_window_setup(pf_pipe *l, uint32_t pages, unsigned rows)
{
	pf_window *win = &l->win;

	win->npages = pages;
	win->mem_size = (size_t)pages * PF_WINDOW_PAGE;
	win->mem = pf_pool_alloc(win->mem_size);
	win->next = pf_calloc(pages, sizeof(*win->next));
	win->refs = pf_calloc(pages, sizeof(*win->refs));
	win->free = pf_calloc(pages, sizeof(*win->free));
	win->free_rows = pf_calloc(rows ? rows : 1, sizeof(*win->free_rows));
	win->wrecs = pf_calloc((size_t)l->nslots * l->host_batch, sizeof(*win->wrecs));
	for (unsigned i = 0; l->workers && i < l->nworkers; i++) {
		l->workers[i].freed = pf_calloc(pages, sizeof(*l->workers[i].freed));
		if (!l->workers[i].freed)
			return -ENOMEM;
	}
	if (!win->mem || !win->next || !win->refs || !win->free || !win->free_rows ||
	    !win->wrecs)
		return -ENOMEM;
	/* Taken from the top of the stack: page 0 first, so that a fresh
	 * window's chains are runs of adjacent pages (read in place). */
	for (uint32_t i = 0; i < pages; i++)
		win->free[i] = pages - 1 - i;
	win->nfree = pages;
	win->nrows = rows;
	win->rows_limit = rows;
	/* A few rows a task: both threads on one step, each task long
	 * enough (an image's decode is about a millisecond) that taking it
	 * costs nothing. */
	win->task_rows = l->host_batch / (4 * (l->nworkers ? l->nworkers : 1));
	win->task_rows = win->task_rows < 1 ? 1 : win->task_rows > 16 ? 16 : win->task_rows;
	for (unsigned i = 0; i < l->nslots; i++) {
		l->slots[i].wrec = win->wrecs + (size_t)i * l->host_batch;
		l->slots[i].rowblock = -1;
	}
	return 0;
}

void pf_window_teardown(pf_pipe *l)
{
	pf_window *win = &l->win;

	/* (The workers' freed lists go with the workers: pf_pipe_free().) */
	pf_pool_free(win->mem, win->mem_size, l->cfg.keep_pools);
	pf_free(win->next);
	pf_free(win->refs);
	pf_free(win->free);
	pf_free(win->free_rows);
	pf_free(win->wrecs);
	memset(win, 0, sizeof(*win));
}

/* Pop n free pages (l->mu held, n <= nfree) onto c's chain. */
static void take_pages(pf_pipe *l, uint32_t n, chunk *c)
{
	pf_window *win = &l->win;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t p = win->free[--win->nfree];

		win->next[p] = PF_WINDOW_NONE;
		win->refs[p] = 0;
		if (c->npages)
			win->next[c->pages_tail] = p;
		else
			c->pages = p;
		c->pages_tail = p;
		c->npages++;
	}
	if (win->npages - win->nfree > win->peak)
		win->peak = win->npages - win->nfree;
}

/* Give pages back (l->mu held), waking the I/O thread, which may wait
 * for them. */
static void give_pages(pf_pipe *l, const uint32_t *p, uint32_t n)
{
	pf_window *win = &l->win;

	for (uint32_t i = 0; i < n; i++)
		win->free[win->nfree++] = p[i];
	if (n)
		pf_pipe_wake_io(l);
}

/* Nothing can give a page back: no chunk is being read or decoded, none
 * is being decoded into rows, and the next step to decode still lacks
 * records (they are in chunks not yet read, which wait for pages). */
static bool stuck(const pf_pipe *l)
{
	const batch_slot *s = l->win.expand_next;

	return l->chunks_out == 0 && l->win.expanding == 0 &&
	       !(s && __atomic_load_n(&s->staged, __ATOMIC_ACQUIRE) == l->host_batch);
}

bool pf_window_room(const pf_pipe *l, uint64_t pages)
{
	return l->win.nfree >= pages || stuck(l);
}

uint32_t pf_window_pages(uint64_t bytes)
{
	return pages_for(bytes);
}

/* The loader failed: a chunk's n pages will never come free. */
static int overflow(pf_pipe *l, uint32_t n)
{
	pf_error err;

	pf_error_clear(&err);
	pf_error_set(&err, -ENOMEM, PF_OFFSET_NONE, 0,
		     "memory budget: the shuffle window's records as read need more than its "
		     "%zu MiB (a chunk of %u KiB waits for %u of %u pages; the window of %u "
		     "records was sized for the dataset's frames, and these records are "
		     "larger): a smaller shuffle_window or a larger memory budget reads them",
		     l->win.mem_size >> 20, (unsigned)((uint64_t)n * PF_WINDOW_PAGE >> 10), n,
		     l->win.npages, l->wblock);
	pf_pipe_fail_locked(l, &err, -ENOMEM);
	return -ENOMEM;
}

int pf_window_take(pf_pipe *l, uint32_t n, chunk *c, bool wait)
{
	if (l->win.nfree >= n) {
		take_pages(l, n, c);
		return 1;
	}
	if (!wait)
		return 0;
	return overflow(l, n);
}

void pf_window_slot_opened(pf_pipe *l, batch_slot *s)
{
	s->staged = 0;
	s->taken = 0;
	if (!l->win.expand_next)
		l->win.expand_next = s;
}

void pf_window_begin(pf_pipe *l, worker *w, const chunk *c)
{
	(void)l;
	w->wpage = c->npages ? c->pages : PF_WINDOW_NONE;
	w->woff = 0;
}

void pf_window_stage(pf_pipe *l, worker *w, const pf_record *rec, uint64_t unit, pf_wrec *r)
{
	pf_window *win = &l->win;
	const uint8_t *src = rec->data;
	uint64_t left = rec->len;

	/* A page filled to its end: the record starts on the next. */
	if (w->woff == PF_WINDOW_PAGE && left) {
		w->wpage = win->next[w->wpage];
		w->woff = 0;
	}
	*r = (pf_wrec){ .unit = unit, .index = rec->index, .offset = rec->offset,
			.page = w->wpage, .off = w->woff, .len = (uint32_t)rec->len };
	while (left) {
		uint32_t n = PF_WINDOW_PAGE - w->woff;

		if (w->woff == PF_WINDOW_PAGE) {
			w->wpage = win->next[w->wpage];
			w->woff = 0;
			n = PF_WINDOW_PAGE;
		}
		n = left < n ? (uint32_t)left : n;
		memcpy(page_at(l, w->wpage) + w->woff, src, n);
		/* The worker's alone until pf_place_flush() publishes the
		 * chunk's rows: no record on its pages is decoded before. */
		win->refs[w->wpage]++;
		w->woff += n;
		src += n;
		left -= n;
	}
}

void pf_window_end(pf_pipe *l, worker *w, chunk *c)
{
	pf_window *win = &l->win;
	uint32_t p = c->npages ? c->pages : PF_WINDOW_NONE, n = 0;

	/* The chain's pages no record reached: its tail. */
	while (p != PF_WINDOW_NONE && win->refs[p])
		p = win->next[p];
	w->nfreed = 0;
	for (; p != PF_WINDOW_NONE; p = win->next[p])
		w->freed[n++] = p;
	c->npages = 0;
	c->pages = c->pages_tail = PF_WINDOW_NONE;
	if (n) {
		pthread_mutex_lock(&l->mu);
		give_pages(l, w->freed, n);
		pthread_mutex_unlock(&l->mu);
	}
}

/* Slot s's rows: a row block, the last freed first, else one more made
 * while fewer than rows_limit are in use.  The first use of a block
 * zeroes the gaps between its tensors (pf_budget_slot_make()). */
static bool attach(pf_pipe *l, batch_slot *s)
{
	pf_window *win = &l->win;
	size_t bytes = (size_t)l->topo.cores * l->block_bytes;
	uint32_t b;
	bool fresh = false;

	if (win->rows_used >= win->rows_limit)
		return false;
	if (win->nfree_rows) {
		b = win->free_rows[--win->nfree_rows];
	} else if (win->rows_made < win->nrows) {
		b = win->rows_made++;
		fresh = true;
	} else {
		return false;
	}
	win->rows_used++;
	s->rowblock = (int32_t)b;
	pf_budget_slot_point(l, s, l->mem_batches + (size_t)b * bytes);
	if (fresh)
		pf_budget_slot_make(l, s);
	return true;
}

bool pf_window_take_task(pf_pipe *l, pf_wtask *t)
{
	pf_window *win = &l->win;
	batch_slot *s = win->expand_next;

	if (!s || __atomic_load_n(&s->staged, __ATOMIC_ACQUIRE) != l->host_batch)
		return false;
	if (s->rowblock < 0 && !attach(l, s))
		return false;
	t->s = s;
	t->r0 = s->taken;
	t->r1 = s->taken + win->task_rows < l->host_batch ? s->taken + win->task_rows
							   : l->host_batch;
	s->taken = t->r1;
	if (s->taken == l->host_batch)
		win->expand_next = s->next;
	win->expanding++;
	return true;
}

bool pf_window_work_left(const pf_pipe *l)
{
	return l->win.expand_next != NULL;
}

const uint8_t *pf_window_bytes(const pf_pipe *l, worker *w, const pf_wrec *r)
{
	const pf_window *win = &l->win;
	uint32_t p = r->page, off = r->off, left = r->len;
	uint8_t *dst = w->ubuf;
	bool adjacent = true;

	if (!left)
		return page_at(l, p) + off;
	/* Its pages one after the other in the mapping: read in place. */
	for (uint32_t q = p, end = off + left; end > PF_WINDOW_PAGE && adjacent;
	     end -= PF_WINDOW_PAGE) {
		adjacent = win->next[q] == q + 1;
		q = win->next[q];
	}
	if (adjacent)
		return page_at(l, p) + off;
	while (left) {
		uint32_t n = PF_WINDOW_PAGE - off < left ? PF_WINDOW_PAGE - off : left;

		memcpy(dst, page_at(l, p) + off, n);
		dst += n;
		left -= n;
		off = 0;
		if (left)
			p = win->next[p];
	}
	return w->ubuf;
}

void pf_window_release(pf_pipe *l, worker *w, const pf_wrec *r)
{
	pf_window *win = &l->win;
	uint32_t p = r->page, end = r->off + r->len;

	if (r->len == PF_WREC_HOLE || !r->len)
		return;
	for (;;) {
		if (__atomic_sub_fetch(&win->refs[p], 1, __ATOMIC_ACQ_REL) == 0)
			w->freed[w->nfreed++] = p;
		if (end <= PF_WINDOW_PAGE)
			break;
		end -= PF_WINDOW_PAGE;
		p = win->next[p];
	}
}

void pf_window_task_done(pf_pipe *l, worker *w)
{
	give_pages(l, w->freed, w->nfreed);
	w->nfreed = 0;
	/* The I/O thread may wait for the last task to end (stuck()), and
	 * the consumer's last next() for its figures. */
	if (--l->win.expanding == 0) {
		pf_pipe_wake_io(l);
		pthread_cond_broadcast(&l->cv_ready);
	}
}

void pf_window_slot_released(pf_pipe *l, batch_slot *s)
{
	pf_window *win = &l->win;

	if (s->rowblock < 0)
		return;
	win->free_rows[win->nfree_rows++] = (uint32_t)s->rowblock;
	win->rows_used--;
	s->rowblock = -1;
	s->mem = NULL;
	pf_decode_broadcast(l);	/* a step may wait for a row block */
}

void pf_window_grow_rows(pf_pipe *l, unsigned prefetch)
{
	pf_window *win = &l->win;
	unsigned want = prefetch + 3;

	win->rows_limit = want < win->nrows ? want : win->nrows;
	pf_decode_broadcast(l);
}
