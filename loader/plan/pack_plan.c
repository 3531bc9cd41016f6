/* SPDX-License-Identifier: Apache-2.0 */
/* Packing's plan: the steps of an epoch, the same on every host, known
 * before its first batch.  The records' packed lengths (pack_gather.c:
 * from the shards' indexes where they tell them, as `shardtool convert`
 * writes them, else from the records; each file's read by one host of a
 * pod) and every host's record order (plan.c's, as the inner loader reads
 * them) go through the packer (transform/), lengths only, for each host:
 * the epoch's steps are the fewest rows any host makes over its rows a
 * step; the rows a host makes past them are dropped and counted.  Not
 * here: packing the values (pack.c). */
#include <errno.h>
#include <string.h>

#include "pf_transform.h"
#include "plan_internal.h"

/* Each file's first record number in dataset order (units are in file
 * order).  NULL: no memory. */
static uint64_t *file_bases(const pf_dataset *ds)
{
	uint64_t *base = pf_calloc(ds->nfiles ? ds->nfiles : 1, sizeof(*base));

	if (base)
		pf_dataset_file_layout(ds, base, NULL);
	return base;
}

/* One record of lengths l through the scratch packer, lengths only: 4
 * pieces hold any record in first_fit; concat's pieces are not needed,
 * only its rows.  @return 0, or <0 (the packer's error). */
static int feed(pf_packer *scratch, const uint32_t *l)
{
	pf_pack_piece pieces[4];
	uint64_t closed, end;
	pf_error err;
	int ret;

	if (scratch->mode != PF_PACKER_CONCAT) {
		ret = pf_pack_place(scratch, l, pieces, 4, &closed, &err);
		return ret < 0 ? ret : 0;
	}
	/* The rows concat opens for l values after the open row's fill
	 * (pack.c's place_concat()). */
	if (!l[0])
		return 0;
	if (!scratch->nopen) {
		scratch->nopen = 1;
		memset(&scratch->open[0], 0, sizeof(scratch->open[0]));
		scratch->open[0].id = scratch->next_row++;
	}
	end = (uint64_t)scratch->open[0].fill[0] + l[0];
	scratch->next_row += (end - 1) / scratch->length;
	scratch->open[0].fill[0] = (uint32_t)(end % scratch->length);
	if (!scratch->open[0].fill[0])
		scratch->nopen = 0;
	return 0;
}

/* Outputs [b, e) of host t->host_index's stream of epoch `epoch` (the
 * topology t's, in blocks of w records, permuted or not, slices of
 * `slice` records in groups of `group` frames) through the scratch
 * packer, lengths only. */
static int place_range(const pf_order *o, const pf_topology *t, uint32_t w, bool permute,
		       uint32_t slice, uint32_t group, uint64_t seed, uint32_t epoch, uint64_t b, uint64_t e,
		       const uint32_t *len, uint32_t nf, uint32_t cap, const uint64_t *file_base,
		       pf_packer *scratch, uint32_t *perm, uint32_t *order,
		       uint64_t *norder, pf_pack_where *where, pf_plan_record *ids)
{
	const pf_dataset *ds = o->ds;
	pf_epoch_plan p = { 0 };
	uint64_t seg_start = 0;
	size_t si = 0;
	int ret;

	ret = pf_plan_epoch(&p, ds, t, seed, epoch, o->shuffle, slice, group,
			    PF_REMAINDER_DROP);
	if (ret < 0)
		goto out;
	if (e > p.quota)
		e = p.quota;
	if (order)
		*norder = e > b ? e - b : 0;
	/* Outputs in order: block k's output o holds its input perm^-1(o). */
	for (uint64_t k = b / w; k * w < e; k++) {
		uint64_t first = k * w, left = p.stream_len - first;
		uint32_t n = left < w ? (uint32_t)left : w;

		if (permute) {
			uint32_t *inv = perm + w;

			pf_plan_block_perm(seed, epoch, t->host_index, k, perm, n);
			for (uint32_t r = 0; r < n; r++)
				inv[perm[r]] = r;
			memcpy(perm, inv, n * sizeof(*perm));
		} else {
			for (uint32_t r = 0; r < n; r++)
				perm[r] = r;
		}
		for (uint32_t o = first < b ? (uint32_t)(b - first) : 0; o < n && first + o < e;
		     o++) {
			uint64_t at = first + perm[o], rec;
			uint32_t l[PF_PACKER_MAX_FEATURES];
			const pf_unit *u;

			/* Segments: found from the start for outputs out of order. */
			if (at < seg_start) {
				seg_start = 0;
				si = 0;
			}
			while (at >= seg_start + p.seg[si].count)
				seg_start += p.seg[si++].count;
			u = &ds->units[p.seg[si].unit];
			rec = file_base[u->file] + (u->stream ? 0 : u->first_record) + p.seg[si].first +
			      (at - seg_start);
			if (where) {	/* the last output's file and record */
				where->file = u->file;
				where->record = rec - file_base[u->file];
			}
			for (uint32_t f = 0; f < nf; f++)
				l[f] = len[rec * nf + f] < cap ? len[rec * nf + f] : cap;
			if (order)	/* the host's lengths in its output order */
				memcpy(order + (first + o - b) * nf, l, nf * sizeof(*l));
			if (ids)	/* and its records */
				ids[first + o - b] = (pf_plan_record){
					u->file, rec - file_base[u->file] };
			if (!scratch)
				continue;	/* the order alone */
			ret = feed(scratch, l);
			if (ret < 0)
				goto out;
		}
	}
	ret = 0;
out:
	pf_plan_release(&p);
	return ret;
}

/* The rows host h's inner stream of epoch e packs into. */
static int64_t host_rows(const pf_order *o, uint32_t h, uint64_t seed, uint32_t epoch,
			 const uint32_t *len, uint32_t nf, uint32_t cap, const uint64_t *file_base,
			 const pf_packer *pk, uint32_t *perm)
{
	pf_topology t = o->topo;
	pf_packer scratch = *pk;
	int ret;

	t.host_index = h;
	ret = place_range(o, &t, o->block, o->permute, o->slice, o->group,
			  seed, epoch,
			  0, UINT64_MAX, len, nf, cap, file_base, &scratch, perm, NULL,
			  NULL, NULL, NULL);
	return ret < 0 ? ret : (int64_t)scratch.next_row;
}

int pf_pack_plan_pieces(const pf_order *o, const pf_packer *pk, uint64_t seed,
			uint32_t epoch, const uint32_t *len, uint32_t nf, uint32_t cap,
			const pf_topology *origin, uint32_t w, bool permute, uint32_t slice,
			uint32_t group, const pf_piece *pieces, size_t npieces, uint64_t *rows)
{
	uint64_t *file_base = file_bases(o->ds);
	uint32_t *perm = pf_malloc(2 * (size_t)(w ? w : 1) * sizeof(*perm));
	pf_packer scratch = *pk;
	int ret = 0;

	if (!file_base || !perm) {
		ret = -ENOMEM;
		goto out;
	}
	scratch.nopen = 0;
	scratch.next_row = 0;
	for (size_t i = 0; i < npieces && ret == 0; i++) {
		pf_topology t = *origin;

		t.host_index = pieces[i].host;
		ret = place_range(o, &t, w, permute, slice, group, seed, epoch, pieces[i].begin,
				  pieces[i].end, len, nf, cap, file_base, &scratch, perm, NULL,
				  NULL, NULL, NULL);
	}
	*rows = scratch.next_row;
out:
	pf_free(file_base);
	pf_free(perm);
	return ret;
}

int pf_pack_plan_steps(const pf_order *o, const pf_packer *pk, uint64_t seed,
		       uint32_t epoch, const uint32_t *len, uint32_t nf, uint32_t cap,
		       uint32_t host_batch, uint64_t *steps, uint64_t *own_rows)
{
	const pf_dataset *ds = o->ds;
	uint64_t *file_base = file_bases(ds);
	uint32_t *perm = pf_malloc(2 * (size_t)o->block * sizeof(*perm));
	pf_packer empty = *pk;
	uint64_t least = UINT64_MAX;
	int ret = 0;

	if (!file_base || !perm) {
		ret = -ENOMEM;
		goto out;
	}
	empty.nopen = 0;
	empty.next_row = 0;
	for (uint32_t h = 0; h < o->topo.num_hosts; h++) {
		int64_t rows = host_rows(o, h, seed, epoch, len, nf, cap, file_base, &empty,
					 perm);

		if (rows < 0) {
			ret = (int)rows;
			goto out;
		}
		if ((uint64_t)rows < least)
			least = (uint64_t)rows;
		if (h == o->topo.host_index)
			*own_rows = (uint64_t)rows;
	}
	*steps = least / host_batch;
out:
	pf_free(file_base);
	pf_free(perm);
	return ret;
}

/* pf_pack_plan_order(), and each output's record into ids (NULL: not
 * asked). */
static int plan_order(const pf_order *o, uint64_t seed, uint32_t epoch, const uint32_t *len,
		      uint32_t nf, uint32_t cap, uint32_t *order, uint64_t *norder,
		      pf_plan_record *ids)
{
	uint64_t *file_base = file_bases(o->ds);
	uint32_t *perm = pf_malloc(2 * (size_t)o->block * sizeof(*perm));
	int ret = -ENOMEM;

	if (file_base && perm)
		ret = place_range(o, &o->topo, o->block, o->permute,
				  o->slice, o->group, seed, epoch, 0, UINT64_MAX, len, nf,
				  cap, file_base, NULL, perm, order, norder, NULL, ids);
	pf_free(file_base);
	pf_free(perm);
	return ret;
}

int pf_pack_plan_order(const pf_order *o, uint64_t seed,
		       uint32_t epoch, const uint32_t *len, uint32_t nf, uint32_t cap,
		       uint32_t *order, uint64_t *norder)
{
	return plan_order(o, seed, epoch, len, nf, cap, order, norder, NULL);
}

int pf_pack_plan_where(const pf_order *o, uint64_t seed, uint32_t epoch, uint64_t at,
		       const uint32_t *len, uint32_t nf, uint32_t cap, pf_pack_where *where)
{
	uint64_t *file_base = file_bases(o->ds);
	uint32_t *perm = pf_malloc(2 * (size_t)o->block * sizeof(*perm));
	int ret = -ENOMEM;

	where->file = UINT32_MAX;
	if (file_base && perm)
		ret = place_range(o, &o->topo, o->block, o->permute,
				  o->slice, o->group, seed, epoch, at, at + 1, len, nf,
				  cap, file_base, NULL, perm, NULL, NULL, where, NULL);
	pf_free(file_base);
	pf_free(perm);
	return ret < 0 ? ret : where->file == UINT32_MAX ? -ERANGE : 0;
}

/* ------------------------------------------------------------------ */
/* A mixture's records, packed                                          */

/* A source's stream on one host: its epochs' records in its order, an
 * epoch's lengths at a time (and their records, for a walk that names
 * them). */
typedef struct mixed_cursor {
	pf_order o;		/* the source's, this host's */
	uint32_t epoch;
	uint64_t at, n;		/* the next record of the epoch's n */
	uint32_t *len;		/* [records x nf]: the epoch's lengths in order */
	pf_plan_record *ids;	/* [records]: the epoch's records (NULL: not kept) */
	bool ready;
	/* Or a course's: its link li, row a of it next; the records of its
	 * step g (its epoch), read through w; each file's first record in
	 * dataset order; the last record's lengths and record. */
	const pf_mixed_course *course;
	size_t li;
	uint64_t a, g;
	uint32_t g_epoch;
	pf_which w;
	bool w_on;
	pf_plan_record *recs;
	uint32_t nrecs;
	uint64_t *file_base;
	uint32_t l[PF_PACKER_MAX_FEATURES];
	pf_plan_record rec;
	int err;		/* why the next record is not there */
} mixed_cursor;

/* The next record of a course's stream: its links in turn, a step's
 * records at a time.  @return its lengths (c->rec, c->epoch: the
 * record), or NULL (c->err). */
static const uint32_t *course_next(const uint32_t *len, mixed_cursor *c, uint32_t nf,
				   uint32_t cap)
{
	const pf_mixed_link *lk;
	uint64_t g, in_epoch, at;
	pf_error err;

	for (;;) {
		if (c->li >= c->course->nlinks) {
			c->err = -ERANGE;	/* cannot be: the last has no end */
			return NULL;
		}
		lk = &c->course->links[c->li];
		if (c->a < lk->rows)
			break;
		c->li++;
		c->a = 0;
		c->g = UINT64_MAX;
		if (c->w_on)
			pf_which_release(&c->w);
		c->w_on = false;
	}
	if (!c->file_base) {
		const pf_dataset *ds = lk->run.o.ds;

		c->file_base = pf_calloc(ds->nfiles + 1, sizeof(*c->file_base));
		if (!c->file_base)
			return NULL;
		pf_dataset_file_layout(ds, c->file_base, NULL);
	}
	if (c->nrecs < lk->batch) {
		pf_free(c->recs);
		c->recs = pf_calloc(lk->batch, sizeof(*c->recs));
		c->nrecs = c->recs ? lk->batch : 0;
		if (!c->recs)
			return NULL;
	}
	if (!c->w_on) {
		pf_which_init(&c->w, &lk->run);
		c->w_on = true;
	}
	g = lk->run.start.gstep + c->a / lk->batch;
	if (g != c->g) {
		c->err = pf_which_step(&c->w, g, &c->g_epoch, &in_epoch, c->recs, &err);
		if (c->err < 0)
			return NULL;
		c->g = g;
	}
	c->rec = c->recs[c->a++ % lk->batch];
	c->epoch = c->g_epoch;
	at = (c->file_base[c->rec.file] + c->rec.record) * nf;
	for (uint32_t f = 0; f < nf; f++)
		c->l[f] = len[at + f] < cap ? len[at + f] : cap;
	return c->l;
}

/* The next record's lengths of source k's stream (its next epoch's first
 * when one ends, or its course's next).  @return them, or NULL (c->err:
 * out of memory, or an epoch of no record: a source's loader has a step
 * an epoch at least). */
static const uint32_t *mixed_next(const pf_mixed *mx, mixed_cursor *c, size_t k, uint64_t seed,
				  uint32_t nf, uint32_t cap)
{
	c->err = -ENOMEM;
	if (c->course)
		return course_next(mx->lengths[k], c, nf, cap);
	if (!c->ready || c->at == c->n) {
		if (c->ready)
			c->epoch++;
		if (plan_order(&c->o, seed, c->epoch, mx->lengths[k], nf, cap, c->len, &c->n,
			       c->ids) < 0 || c->n == 0)
			return NULL;
		c->at = 0;
		c->ready = true;
	}
	return c->len + c->at++ * nf;
}

/* A course cursor's walk let go (its which). */
static void cursor_stop(mixed_cursor *c)
{
	if (c->w_on)
		pf_which_release(&c->w);
	c->w_on = false;
}

static void cursors_free(const pf_mixed *mx, mixed_cursor *c)
{
	for (size_t k = 0; c && k < mx->nsources; k++) {
		cursor_stop(&c[k]);
		pf_free(c[k].len);
		pf_free(c[k].ids);
		pf_free(c[k].recs);
		pf_free(c[k].file_base);
	}
	pf_free(c);
}

/* Room for an epoch of each source (and its records, with ids).  NULL:
 * no memory. */
static mixed_cursor *cursors_new(const pf_mixed *mx, uint32_t nf, bool ids)
{
	mixed_cursor *c = pf_calloc(mx->nsources, sizeof(*c));

	for (size_t k = 0; c && k < mx->nsources; k++) {
		uint64_t records = mx->orders[k].ds->records;

		records = records ? records : 1;
		c[k].len = pf_malloc(records * nf * sizeof(*c[k].len));
		c[k].ids = ids ? pf_malloc(records * sizeof(*c[k].ids)) : NULL;
		if (!c[k].len || (ids && !c[k].ids)) {
			cursors_free(mx, c);
			return NULL;
		}
	}
	return c;
}

/* Every source's stream from its start on host h (its course's, with
 * courses). */
static void cursors_start(const pf_mixed *mx, mixed_cursor *c, uint32_t h)
{
	for (size_t k = 0; k < mx->nsources; k++) {
		c[k].o = mx->orders[k];
		c[k].o.topo.host_index = h;
		c[k].epoch = 0;
		c[k].ready = false;
		cursor_stop(&c[k]);
		c[k].course = !mx->courses ? NULL : mx->own_course ? &mx->courses[k]
				: &mx->courses[(size_t)h * mx->nsources + k];
		c[k].li = 0;
		c[k].a = c[k].course ? c[k].course->row0 : 0;
		c[k].g = UINT64_MAX;
	}
}

int pf_pack_plan_mixed(const pf_mixed *mx, uint64_t seed, const pf_packer *pk, uint32_t nf,
		       uint32_t cap, uint32_t host_batch, uint64_t *steps, uint64_t *own_rows)
{
	const uint64_t chunk = 1024;
	mixed_cursor *c = cursors_new(mx, nf, false);
	uint8_t *rs = pf_malloc((size_t)chunk * mx->rows);
	uint64_t least = UINT64_MAX;
	int ret = 0;

	if (!c || !rs) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t h = 0; h < mx->hosts && ret == 0; h++) {
		pf_packer scratch = *pk;
		uint32_t *order = h == mx->host_index ? mx->order : NULL;

		if (mx->endless && (h != mx->host_index || !order))
			continue;

		scratch.nopen = 0;
		scratch.next_row = 0;
		cursors_start(mx, c, h);
		for (uint64_t t = mx->t0; t < mx->t1 && ret == 0; t += chunk) {
			uint64_t n = mx->t1 - t < chunk ? mx->t1 - t : chunk;

			/* Its rows before the last pool's are closed. */
			if (mx->want_rows && scratch.next_row >= mx->want_rows + scratch.pool)
				break;
			if (mx->endless && t * mx->rows >= mx->order0 + mx->order_cap)
				break;

			mx->row_sources(mx->ctx, h, t, n, rs);
			for (uint64_t r = 0; r < n * mx->rows && ret == 0; r++) {
				const uint32_t *l = mixed_next(mx, &c[rs[r]], rs[r], seed, nf, cap);
				uint64_t at = t * mx->rows + r;

				if (!l) {
					ret = c[rs[r]].err;
					break;
				}
				if (order && at >= mx->order0 && at - mx->order0 < mx->order_cap) {
					memcpy(order + (at - mx->order0) * nf, l, nf * sizeof(*l));
					*mx->order_n = at - mx->order0 + 1;
				}
				ret = feed(&scratch, l);
			}
		}
		if (ret < 0)
			break;
		if (scratch.next_row < least)
			least = scratch.next_row;
		if (h == mx->host_index)
			*own_rows = scratch.next_row;
	}
	*steps = least == UINT64_MAX ? 0 : least / host_batch;
	if (mx->endless)
		*steps = *own_rows = UINT64_MAX;
out:
	cursors_free(mx, c);
	pf_free(rs);
	return ret;
}

int pf_pack_mixed_walk(const pf_mixed *mx, uint64_t seed, const pf_packer *pk, uint32_t nf,
		       uint32_t cap, const pf_mixed_visit *v)
{
	const uint64_t chunk = 64;
	mixed_cursor *c = cursors_new(mx, nf, v->piece != NULL);
	uint8_t *rs = pf_malloc((size_t)chunk * mx->rows);
	uint32_t npieces = cap / pk->length + 2;
	pf_pack_piece *pieces = pf_calloc(npieces, sizeof(*pieces));
	pf_packer packer = *pk;
	uint64_t closed = 0;
	pf_error err;
	int ret = 0, stop = 0;

	if (!c || !rs || !pieces) {
		ret = -ENOMEM;
		goto out;
	}
	cursors_start(mx, c, mx->host_index);
	/* From the start: each source's course's (or stream's from its first
	 * record at step 0). */
	for (uint64_t t = mx->courses ? mx->t0 : 0; t < mx->t1 && !stop && ret == 0; t += chunk) {
		uint64_t n = mx->t1 - t < chunk ? mx->t1 - t : chunk;

		mx->row_sources(mx->ctx, mx->host_index, t, n, rs);
		for (uint64_t r = 0; r < n * mx->rows && !stop && ret == 0; r++) {
			size_t k = rs[r];
			const uint32_t *l;
			pf_plan_record rec = { 0, 0 };
			int np;

			if (r % mx->rows == 0 && v->step)
				stop = v->step(v->ctx, t + r / mx->rows, &packer, closed);
			if (stop)
				break;
			l = mixed_next(mx, &c[k], k, seed, nf, cap);
			if (!l) {
				ret = c[k].err;
				break;
			}
			np = pf_pack_place(&packer, l, pieces, npieces, &closed, &err);
			if (np < 0) {
				ret = np;
				break;
			}
			if (c[k].course)
				rec = c[k].rec;
			else if (c[k].ids)
				rec = c[k].ids[c[k].at - 1];
			/* All of the record's pieces, then the stop (closed is
			 * the packer's after the whole record). */
			for (int j = 0; v->piece && j < np; j++)
				stop |= v->piece(v->ctx, &pieces[j], (uint32_t)k, c[k].epoch, &rec,
						 closed);
		}
	}
	/* The run's end: every row closed. */
	if (ret == 0 && !stop && v->step)
		v->step(v->ctx, mx->t1, &packer, packer.next_row);
out:
	cursors_free(mx, c);
	pf_free(rs);
	pf_free(pieces);
	return ret;
}
