/* SPDX-License-Identifier: Apache-2.0 */
/* tf.train.Example tests' helpers: see example_util.h. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

/* ------------------------------------------------------------------ */
/* A wire-format builder                                                */
/* ------------------------------------------------------------------ */


wire *w_new(void)
{
	wire *w = calloc(1, sizeof(*w));

	CHECK(w);
	return w;
}

void w_free(wire *w)
{
	if (w)
		free(w->d);
	free(w);
}

wire *w_raw(wire *w, const void *p, size_t n)
{
	if (w->n + n > w->cap) {
		w->cap = (w->n + n) * 2 + 64;
		w->d = realloc(w->d, w->cap);
		CHECK(w->d);
	}
	if (n)
		memcpy(w->d + w->n, p, n);
	w->n += n;
	return w;
}

/* hex: "0a 00 ..." */
wire *w_bytes(wire *w, const char *hex)
{
	unsigned v;

	while (*hex) {
		if (*hex == ' ') {
			hex++;
			continue;
		}
		CHECK(sscanf(hex, "%2x", &v) == 1);
		uint8_t b = (uint8_t)v;
		w_raw(w, &b, 1);
		hex += 2;
	}
	return w;
}

wire *w_varint(wire *w, uint64_t v)
{
	uint8_t b[10];

	return w_raw(w, b, pf_varint_put(b, v));
}

wire *w_tag(wire *w, uint32_t field, unsigned wt)
{
	return w_varint(w, (uint64_t)field << 3 | wt);
}

/* field, length, then body (consumed: freed). */
wire *w_ld(wire *w, uint32_t field, wire *body)
{
	w_tag(w, field, 2);
	w_varint(w, body->n);
	w_raw(w, body->d, body->n);
	w_free(body);
	return w;
}

wire *w_str(wire *w, uint32_t field, const void *s, size_t n)
{
	w_tag(w, field, 2);
	w_varint(w, n);
	return w_raw(w, s, n);
}

wire *w_float(wire *w, float f)
{
	return w_raw(w, &f, 4);
}

/* Feature{int64_list{value: packed}} */
wire *feat_int64(int n, ...)
{
	wire *packed = w_new();
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		w_varint(packed, (uint64_t)va_arg(ap, int64_t));
	va_end(ap);
	return w_ld(w_new(), 3, w_ld(w_new(), 1, packed));
}

wire *feat_float(int n, ...)
{
	wire *packed = w_new();
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		w_float(packed, (float)va_arg(ap, double));
	va_end(ap);
	return w_ld(w_new(), 2, w_ld(w_new(), 1, packed));
}

wire *feat_bytes(int n, ...)
{
	wire *list = w_new();
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++) {
		const char *s = va_arg(ap, const char *);
		w_str(list, 1, s, strlen(s));
	}
	va_end(ap);
	return w_ld(w_new(), 1, list);
}

/* Features map entry {key, value}, as field 1 of w. */
wire *w_entry(wire *w, const char *key, wire *value)
{
	wire *e = w_new();

	w_str(e, 1, key, strlen(key));
	if (value)
		w_ld(e, 2, value);
	return w_ld(w, 1, e);
}

/* Example{features{entries}} from (key, Feature) pairs ending in NULL. */
wire *example(const char *key, ...)
{
	wire *features = w_new();
	va_list ap;

	va_start(ap, key);
	for (; key; key = va_arg(ap, const char *))
		w_entry(features, key, va_arg(ap, wire *));
	va_end(ap);
	return w_ld(w_new(), 1, features);
}

/* ------------------------------------------------------------------ */
/* Both decoders                                                        */
/* ------------------------------------------------------------------ */

void same_feature(const pf_feature *a, const pf_feature *b)
{
	CHECK(a->name_len == b->name_len);
	CHECK(!a->name_len || !memcmp(a->name, b->name, a->name_len));
	CHECK(a->kind == b->kind);
	CHECK(a->count == b->count);
	for (uint32_t i = 0; i < a->count; i++) {
		switch (a->kind) {
		case PF_KIND_BYTES:
			CHECK(a->v.bytes[i].len == b->v.bytes[i].len);
			CHECK(!a->v.bytes[i].len ||
				  !memcmp(a->v.bytes[i].data, b->v.bytes[i].data,
					  a->v.bytes[i].len));
			break;
		case PF_KIND_FLOAT:
			CHECK(!memcmp(&a->v.floats[i], &b->v.floats[i], 4));
			break;
		case PF_KIND_INT64:
			CHECK(a->v.int64s[i] == b->v.int64s[i]);
			break;
		default:
			CHECK(!"values in a NONE feature");
		}
	}
}

void same_example(const pf_example *a, const pf_example *b)
{
	CHECK(a->n_features == b->n_features);
	for (uint32_t i = 0; i < a->n_features; i++)
		same_feature(&a->features[i], &b->features[i]);
	CHECK(a->n_lists == b->n_lists);
	for (uint32_t i = 0; i < a->n_lists; i++) {
		CHECK(a->lists[i].name_len == b->lists[i].name_len);
		CHECK(!memcmp(a->lists[i].name, b->lists[i].name,
				  a->lists[i].name_len));
		CHECK(a->lists[i].steps == b->lists[i].steps);
		for (uint32_t k = 0; k < a->lists[i].steps; k++)
			same_feature(&a->lists[i].step[k], &b->lists[i].step[k]);
	}
}

/* Arenas kept across calls so results stay valid until the next decode. */
pf_arena fast_arena, ref_arena;
pf_error fast_err;
wire *last_wire;	/* the fast path's names and bytes point into it */

void arenas_fini(void)
{
	pf_arena_release(&fast_arena);
	pf_arena_release(&ref_arena);
	w_free(last_wire);
	last_wire = NULL;
}

/*
 * Decode rec both ways (as a SequenceExample when seq), check that the two
 * agree on acceptance and on every value, and that the fast path fits in
 * PF_ARENA_BYTES_FOR(len).  @return the fast path's result, *ex its output.
 */
int decode_both(const void *rec, size_t len, bool seq, pf_example *ex)
{
	pf_example ref;
	pf_error rerr;
	int fret, rret;

	pf_arena_release(&fast_arena);
	pf_arena_release(&ref_arena);
	CHECK(pf_arena_init(&fast_arena, PF_ARENA_BYTES_FOR(len)) == 0);
	CHECK(pf_arena_init(&ref_arena, 64 * len + 4096) == 0);
	pf_error_clear(&fast_err);
	pf_error_clear(&rerr);
	if (seq) {
		fret = pf_sequence_example_decode(rec, len, &fast_arena, ex, &fast_err);
		rret = pf_sequence_example_decode_ref(rec, len, &ref_arena, &ref, &rerr);
	} else {
		fret = pf_example_decode(rec, len, &fast_arena, ex, &fast_err);
		rret = pf_example_decode_ref(rec, len, &ref_arena, &ref, &rerr);
	}
	if (fret == -ENOBUFS)
		cr_assert_fail("PF_ARENA_BYTES_FOR(%zu) was not enough", len);
	if ((fret == 0) != (rret == 0))
		cr_assert_fail("fast %d (%s) but protobuf-c %d (%s)", fret,
			       fast_err.msg, rret, rerr.msg);
	if (fret == 0)
		same_example(ex, &ref);
	else
		CHECK(fast_arena.used == 0);	/* nothing left behind */
	return fret;
}

int decode_wire(wire *w, bool seq, pf_example *ex)
{
	w_free(last_wire);
	last_wire = w;
	return decode_both(w->d, w->n, seq, ex);
}

void reject(wire *w, bool seq)
{
	pf_example ex;
	size_t n = w->n;

	cr_assert_eq(decode_wire(w, seq, &ex), -EBADMSG);
	cr_assert_eq(fast_err.code, -EBADMSG);
	cr_assert_eq(fast_err.offset_kind, PF_OFFSET_NONE);
	cr_assert_leq(fast_err.offset, n);
	cr_assert_not_null(strstr(fast_err.msg, "of the record"), "%s", fast_err.msg);
}

const pf_feature *find(const pf_example *ex, const char *name)
{
	const pf_feature *f = pf_example_find(ex, name);

	if (!f)
		cr_assert_fail("no feature %s", name);
	return f;
}

void expect_int64(const pf_feature *f, uint32_t n, const int64_t *v)
{
	CHECK(f->kind == PF_KIND_INT64);
	CHECK(f->count == n);
	for (uint32_t i = 0; i < n; i++)
		if (f->v.int64s[i] != v[i])
			cr_assert_fail("[%u] %lld want %lld", i,
				       (long long)f->v.int64s[i], (long long)v[i]);
}

void expect_float(const pf_feature *f, uint32_t n, const float *v)
{
	CHECK(f->kind == PF_KIND_FLOAT);
	CHECK(f->count == n);
	for (uint32_t i = 0; i < n; i++)
		if (memcmp(&f->v.floats[i], &v[i], 4))
			cr_assert_fail("[%u] %g want %g", i, f->v.floats[i], v[i]);
}


/* FeatureLists entry {key, value: FeatureList{steps}} as field 1 of w. */
wire *w_list_entry(wire *w, const char *key, int n, ...)
{
	wire *fl = w_new(), *e = w_new();
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		w_ld(fl, 1, va_arg(ap, wire *));
	va_end(ap);
	w_str(e, 1, key, strlen(key));
	w_ld(e, 2, fl);
	return w_ld(w, 1, e);
}
