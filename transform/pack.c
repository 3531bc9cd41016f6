/* SPDX-License-Identifier: Apache-2.0 */
/* The packer: where each record's values go among rows of L values
 * (first fit over a bounded pool of open rows, or concatenation cut into
 * rows), from the records' lengths alone, and the copy of a piece into its
 * row.  Not here: reading, decoding or batching the records (loader/). */
#include <errno.h>
#include <string.h>

#include "pf_transform.h"

static const char *mode_name(pf_packer_mode mode)
{
	switch (mode) {
	case PF_PACKER_FIRST_FIT: return "first_fit";
	case PF_PACKER_CONCAT: return "concat";
	}
	return NULL;
}

int pf_packer_init(pf_packer *p, uint32_t length, uint32_t nfeatures, pf_packer_mode mode,
		   uint32_t pool, pf_error *err)
{
	memset(p, 0, sizeof(*p));
	if (!pool)
		pool = PF_PACKER_POOL_DEFAULT;
	if (length < 1 || length > PF_PACKER_LENGTH_MAX)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "pack length %u is out of range 1..%u", length,
				    PF_PACKER_LENGTH_MAX);
	if (nfeatures < 1 || nfeatures > PF_PACKER_MAX_FEATURES)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%u packed features: a packer takes 1..%u", nfeatures,
				    PF_PACKER_MAX_FEATURES);
	if (pool > PF_PACKER_POOL_MAX)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "pack pool of %u open rows is out of range 1..%u", pool,
				    PF_PACKER_POOL_MAX);
	if (!mode_name(mode))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "pack mode %d is not first_fit or concat", (int)mode);
	p->length = length;
	p->nfeatures = nfeatures;
	p->pool = mode == PF_PACKER_CONCAT ? 1 : pool;
	p->mode = mode;
	return 0;
}

/* Open a row at the end of the pool (there is room). */
static pf_pack_row *open_row(pf_packer *p)
{
	pf_pack_row *r = &p->open[p->nopen++];

	memset(r, 0, sizeof(*r));
	r->id = p->next_row++;
	return r;
}

/* Close the oldest open row. */
static void close_oldest(pf_packer *p)
{
	memmove(&p->open[0], &p->open[1], (p->nopen - 1) * sizeof(p->open[0]));
	p->nopen--;
}

static uint64_t closed_below(const pf_packer *p)
{
	return p->nopen ? p->open[0].id : p->next_row;
}

static int place_first_fit(pf_packer *p, const uint32_t *len, pf_pack_piece *pc)
{
	uint32_t take[PF_PACKER_MAX_FEATURES];
	pf_pack_row *r = NULL;
	bool cut = false;

	for (uint32_t f = 0; f < p->nfeatures; f++) {
		take[f] = len[f] < p->length ? len[f] : p->length;
		if (take[f] < len[f]) {
			cut = true;
			p->truncated_values += len[f] - take[f];
		}
	}
	p->truncated_records += cut;
	for (uint32_t i = 0; i < p->nopen && !r; i++) {
		bool room = true;

		for (uint32_t f = 0; f < p->nfeatures && room; f++)
			room = p->open[i].fill[f] + take[f] <= p->length;
		if (room)
			r = &p->open[i];
	}
	if (!r) {
		if (p->nopen == p->pool)
			close_oldest(p);
		r = open_row(p);
	}
	memset(pc, 0, sizeof(*pc));
	pc->row = r->id;
	pc->segment = ++r->segments;
	for (uint32_t f = 0; f < p->nfeatures; f++) {
		pc->at[f] = r->fill[f];
		pc->count[f] = take[f];
		r->fill[f] += take[f];
		p->values += take[f];
	}
	return 1;
}

static int place_concat(pf_packer *p, uint32_t n, pf_pack_piece *pieces, uint32_t cap)
{
	uint32_t done = 0;
	int k = 0;

	while (done < n) {
		pf_pack_row *r;
		uint32_t take;

		if ((uint32_t)k == cap)
			return -ENOBUFS;
		if (!p->nopen)
			open_row(p);
		r = &p->open[0];
		take = p->length - r->fill[0];
		take = take < n - done ? take : n - done;
		memset(&pieces[k], 0, sizeof(pieces[k]));
		pieces[k].row = r->id;
		pieces[k].segment = ++r->segments;
		pieces[k].from = done;
		for (uint32_t f = 0; f < p->nfeatures; f++) {
			pieces[k].at[f] = r->fill[f];
			pieces[k].count[f] = take;
			r->fill[f] += take;
		}
		done += take;
		k++;
		if (r->fill[0] == p->length)
			close_oldest(p);	/* full: the next value opens a row */
	}
	p->values += (uint64_t)n * p->nfeatures;
	return k;
}

int pf_pack_place(pf_packer *p, const uint32_t *len, pf_pack_piece *pieces, uint32_t cap,
		  uint64_t *closed, pf_error *err)
{
	uint64_t total = 0;
	int k;

	for (uint32_t f = 0; f < p->nfeatures; f++)
		total += len[f];
	if (!total) {
		p->empty_records++;
		*closed = closed_below(p);
		return 0;
	}
	if (p->mode == PF_PACKER_CONCAT) {
		for (uint32_t f = 1; f < p->nfeatures; f++)
			if (len[f] != len[0])
				return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
						    "concat packing needs a record's packed "
						    "features to be of one length: packed "
						    "feature 0 has %u values, feature %u has %u",
						    len[0], f, len[f]);
		k = place_concat(p, len[0], pieces, cap);
	} else {
		if (!cap)
			return -ENOBUFS;
		k = place_first_fit(p, len, pieces);
	}
	if (k < 0)
		return pf_error_set(err, k, PF_OFFSET_NONE, 0,
				    "a record of %u values needs more than %u pieces", len[0],
				    cap);
	p->records++;
	*closed = closed_below(p);
	return k;
}

uint64_t pf_pack_finish(pf_packer *p)
{
	p->nopen = 0;
	return p->next_row;
}

void pf_pack_copy(const pf_pack_piece *pc, uint32_t f, const void *src, size_t elem,
		  void *row, int32_t *seg, int32_t *pos)
{
	uint32_t at = pc->at[f], n = pc->count[f];

	if (n)
		memcpy((uint8_t *)row + (size_t)at * elem,
		       (const uint8_t *)src + (size_t)pc->from * elem, (size_t)n * elem);
	/* Two plain loops over pointers (vectorized: a 32-bit index that
	 * might wrap kept them scalar), not one with two branches. */
	if (seg) {
		int32_t *s = seg + at, id = (int32_t)pc->segment;

		for (size_t i = 0; i < n; i++)
			s[i] = id;
	}
	if (pos) {
		int32_t *p = pos + at, from = (int32_t)pc->from;

		for (size_t i = 0; i < n; i++)
			p[i] = from + (int32_t)i;
	}
}
