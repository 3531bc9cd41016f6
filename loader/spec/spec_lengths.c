/* SPDX-License-Identifier: Apache-2.0 */
/* Packed lengths: a record's value count of each packed feature, measured
 * by the fast decode with a spec made for it (each packed feature cut to
 * one value, its full length beside it), and appended as varints.  What
 * packing plans its rows from; measured where a record is read anyway
 * (loader/dataset/count.c when a stream file is counted, loader/pack/
 * when a shard is read for them).  Not here: the plan (loader/plan/
 * pack_plan.c), nor the exchange among hosts (loader/pack/pack_gather.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc_internal.h"
#include "spec_internal.h"

int pf_lenbuf_put(pf_lenbuf *b, uint32_t v)
{
	if (b->cap - b->len < 5) {
		size_t cap = b->cap ? 2 * b->cap : 256;
		uint8_t *p = pf_realloc(b->p, cap);

		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	while (v >= 0x80) {
		b->p[b->len++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->p[b->len++] = (uint8_t)v;
	return 0;
}

int pf_lenbuf_bytes(pf_lenbuf *b, const void *p, size_t n)
{
	if (!n)
		return 0;
	if (b->cap - b->len < n) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *q;

		while (cap - b->len < n)
			cap *= 2;
		q = pf_realloc(b->p, cap);
		if (!q)
			return -ENOMEM;
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

void pf_len_scratch_free(pf_len_scratch *s)
{
	if (s->arena.base)
		pf_arena_release(&s->arena);
	pf_free(s->row);
	memset(s, 0, sizeof(*s));
}

int pf_lengths_measure(const pf_spec *lspec, const pf_record *rec, pf_len_scratch *s,
		       pf_lenbuf *out, pf_error *err)
{
	uint8_t *dst[PF_SPEC_MAX_FEATURES];
	size_t need = PF_ARENA_BYTES_FOR(rec->len);
	int ret;

	if (!s->row && !(s->row = pf_malloc(lspec->row_bytes ? lspec->row_bytes : 8)))
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory measuring packed lengths");
	if (s->arena.cap < need) {
		if (s->arena.base)
			pf_arena_release(&s->arena);
		memset(&s->arena, 0, sizeof(s->arena));
		if (pf_arena_init(&s->arena, need) < 0)
			return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
					    "out of memory measuring packed lengths");
	}
	pf_arena_reset(&s->arena);
	for (uint32_t i = 0; i < lspec->n; i++)
		dst[i] = s->row + pf_spec_offset(lspec, i);
	ret = pf_spec_decode(lspec, rec->data, rec->len, &s->arena, dst, err);
	if (ret < 0) {
		char why[512];

		snprintf(why, sizeof(why), "%.500s", err->msg[0] ? err->msg : pf_strerror(ret));
		pf_error_set(err, ret, PF_OFFSET_STREAM, rec->offset,
			     "record %llu, measuring its packed lengths: %s",
			     (unsigned long long)rec->index, why);
		err->record = (int64_t)rec->index;
		return ret;
	}
	for (uint32_t i = 1; i < lspec->n; i += 2) {
		int32_t v;

		memcpy(&v, dst[i], sizeof(v));
		if (pf_lenbuf_put(out, (uint32_t)v) < 0)
			return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
					    "out of memory measuring packed lengths");
	}
	return 0;
}

int pf_spec_lengths(const pf_spec *user, uint32_t nf, pf_spec *out, pf_error *err)
{
	*out = *user;
	for (uint32_t i = nf; i-- > 0;) {
		int ret;

		out->f[i].ragged = false;
		out->f[i].len = 1;
		ret = pf_spec_add_made(out, i, PF_ROLE_LENGTHS_FULL, "_lengths", PF_DTYPE_INT32, 1,
				       err);
		if (ret < 0)
			return ret;
	}
	pf_spec_layout(out);
	return 0;
}
