/* SPDX-License-Identifier: Apache-2.0 */
/* Schema inference: what features a stream of examples holds, and how many
 * values; and the schema's protobuf form, as indexes and manifests carry it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pb_internal.h"

/*
 * Not a hot path (a writer accounts each record once): a sorted array with
 * binary search and malloc'd names.  Entries are keyed by (name, is_list):
 * a SequenceExample may have a context feature and a feature list of the
 * same name.  Sorted by name, a context feature before a list of that name.
 */
struct pf_schema {
	pf_feature_schema *f;
	size_t n, cap;
	uint64_t records;
	pf_len_col *col;	/* [n]: each feature's counts (lengths.c) */
	size_t col_cap;
};

int pf_schema_create(pf_schema **out)
{
	*out = pf_calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void pf_schema_free(pf_schema *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		pf_free((char *)s->f[i].name);
		pf_len_col_free(&s->col[i]);
	}
	pf_free(s->f);
	pf_free(s->col);
	pf_free(s);
}

/* Bytewise order, a prefix first; then context features before lists. */
static int key_cmp(const char *a, const char *b, uint32_t b_len, bool a_list,
		   bool b_list)
{
	size_t a_len = strlen(a);
	int c = memcmp(a, b, a_len < b_len ? a_len : b_len);

	if (c)
		return c;
	if (a_len != b_len)
		return a_len < b_len ? -1 : 1;
	return (int)a_list - (int)b_list;
}

/* The entry for (name, is_list), created when new (its column of
 * counts beside it in s->col).  NULL: out of memory. */
static pf_feature_schema *lookup(pf_schema *s, const char *name,
				 uint32_t name_len, bool is_list)
{
	size_t lo = 0, hi = s->n;
	pf_feature_schema *f;
	char *copy;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = key_cmp(s->f[mid].name, name, name_len, s->f[mid].is_list,
				is_list);

		if (!c)
			return &s->f[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (pf_grow(&s->f, &s->cap, s->n + 1, sizeof(*s->f)) < 0 ||
	    pf_grow(&s->col, &s->col_cap, s->n + 1, sizeof(*s->col)) < 0)
		return NULL;
	if (!(copy = pf_malloc(name_len + 1u)))
		return NULL;
	memcpy(copy, name, name_len);
	copy[name_len] = '\0';
	memmove(&s->f[lo + 1], &s->f[lo], (s->n - lo) * sizeof(*s->f));
	memmove(&s->col[lo + 1], &s->col[lo], (s->n - lo) * sizeof(*s->col));
	memset(&s->col[lo], 0, sizeof(*s->col));
	s->n++;
	f = &s->f[lo];
	memset(f, 0, sizeof(*f));
	f->name = copy;
	f->is_list = is_list;
	f->min_len = UINT64_MAX;
	return f;
}

/* One record's worth of a feature: its kind (NONE when no value kind was
 * seen) and its number of values. */
static void account(pf_feature_schema *f, pf_kind kind, bool mixed,
		    uint64_t values)
{
	f->records_present++;
	if (kind == PF_KIND_NONE)
		f->records_unset++;
	else if (f->kind == PF_KIND_NONE)
		f->kind = kind;
	else if (f->kind != kind)
		f->mixed = true;
	f->mixed |= mixed;
	f->total_values += values;
	if (values < f->min_len)
		f->min_len = values;
	if (values > f->max_len)
		f->max_len = values;
}

int pf_schema_add(pf_schema *s, const pf_example *ex)
{
	pf_feature_schema *f;

	for (uint32_t i = 0; i < ex->n_features; i++) {
		const pf_feature *ft = &ex->features[i];

		if (!(f = lookup(s, ft->name, ft->name_len, false)))
			return -ENOMEM;
		account(f, ft->kind, false, ft->count);
		/* Each record's count, for packing's plan (lengths.c). */
		if (pf_len_col_push(&s->col[f - s->f], s->records, ft->count) < 0)
			return -ENOMEM;
	}
	/* A list's record: the values over all its steps; unset when no step
	 * has a value kind; mixed when its steps disagree. */
	for (uint32_t i = 0; i < ex->n_lists; i++) {
		const pf_feature_list *fl = &ex->lists[i];
		pf_kind kind = PF_KIND_NONE;
		bool mixed = false;
		uint64_t values = 0;

		for (uint32_t k = 0; k < fl->steps; k++) {
			const pf_feature *st = &fl->step[k];

			values += st->count;
			if (st->kind == PF_KIND_NONE)
				continue;
			if (kind == PF_KIND_NONE)
				kind = st->kind;
			else if (kind != st->kind)
				mixed = true;
		}
		if (!(f = lookup(s, fl->name, fl->name_len, true)))
			return -ENOMEM;
		account(f, kind, mixed, values);
	}
	s->records++;
	return 0;
}

int pf_schema_lengths(const pf_schema *s, pf_shard_lengths **out, size_t *n)
{
	pf_shard_lengths *l = NULL;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (s && s->n && !(l = pf_calloc(s->n, sizeof(*l))))
		return -ENOMEM;
	for (size_t i = 0; s && i < s->n; i++) {
		const pf_feature_schema *f = &s->f[i];
		uint8_t *buf;
		size_t len;

		/* The features packing can take: int64 or float values. */
		if (f->is_list || f->mixed || (f->kind != PF_KIND_INT64 && f->kind != PF_KIND_FLOAT))
			continue;
		if (pf_len_col_finish(&s->col[i], s->records, &buf, &len) < 0)
			goto fail;
		if (!buf)
			continue;	/* of one count: the schema says it */
		l[k].name = pf_strdup(f->name);
		l[k].counts = buf;
		l[k].len = len;
		if (!l[k++].name)
			goto fail;
	}
	*out = l;
	*n = k;
	return 0;
fail:
	pf_lengths_free(l, k);
	return -ENOMEM;
}

uint64_t pf_schema_records(const pf_schema *s)
{
	return s->records;
}

size_t pf_schema_count(const pf_schema *s)
{
	return s->n;
}

const pf_feature_schema *pf_schema_get(const pf_schema *s, size_t i)
{
	return i < s->n ? &s->f[i] : NULL;
}

bool pf_schema_is_fixed(const pf_schema *s, const pf_feature_schema *f)
{
	return s->records && f->records_present == s->records &&
	       f->min_len == f->max_len;
}

/* ------------------------------------------------------------------ */
/* The protobuf form (pb_internal.h)                                    */

int pf_schema_to_pb(const pf_feature_schema *schema, size_t n, Podfeed__FeatureSchema ***out)
{
	Podfeed__FeatureSchema **ptrs, *fs;

	*out = NULL;
	if (!n)
		return 0;
	/* One block: the pointers, then the messages. */
	ptrs = pf_calloc(n, sizeof(*ptrs) + sizeof(*fs));
	if (!ptrs)
		return -ENOMEM;
	fs = (Podfeed__FeatureSchema *)(ptrs + n);
	for (size_t i = 0; i < n; i++) {
		const pf_feature_schema *f = &schema[i];

		podfeed__feature_schema__init(&fs[i]);
		fs[i].name = (char *)f->name;
		fs[i].kind = (uint32_t)f->kind;
		fs[i].is_list = f->is_list;
		fs[i].records_present = f->records_present;
		fs[i].records_unset = f->records_unset;
		fs[i].total_values = f->total_values;
		fs[i].min_len = f->min_len;
		fs[i].max_len = f->max_len;
		fs[i].mixed = f->mixed;
		ptrs[i] = &fs[i];
	}
	*out = ptrs;
	return 0;
}

const char *pf_schema_pb_fault(const Podfeed__FeatureSchema *f)
{
	if (f->kind > PF_KIND_INT64)
		return "an unknown kind";
	if (f->records_unset > f->records_present)
		return "more records unset than present";
	return NULL;
}

int pf_schema_from_pb(pf_feature_schema *dst, const Podfeed__FeatureSchema *f)
{
	dst->name = pf_strdup(f->name ? f->name : "");
	if (!dst->name)
		return -ENOMEM;
	dst->kind = (pf_kind)f->kind;
	dst->is_list = f->is_list;
	dst->records_present = f->records_present;
	dst->records_unset = f->records_unset;
	dst->total_values = f->total_values;
	dst->min_len = f->min_len;
	dst->max_len = f->max_len;
	dst->mixed = f->mixed;
	return 0;
}
