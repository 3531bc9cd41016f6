/* SPDX-License-Identifier: Apache-2.0 */
/* pf_spec_decode() against pf_example_decode() + pf_spec_apply_to(), byte
 * for byte, on every SIMD path: hand-made, odd, random and damaged records,
 * the padding and the errors of its own.  Not here: TensorFlow's own records
 * (test_loader_specfixtures.c) and long rows written with streaming stores
 * (test_loader_rowstream.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "formats_internal.h"
#include "specdecode_util.h"

/*
 * Every comparison is sd_compare() (specdecode_util.h): both ways, into
 * exact-size destinations, once per varint path this CPU supports.
 */

/* Whether the fast path alone decides: it needs no arena for int64
 * lists into int32/int64, so with an empty arena it succeeds where the
 * slow path could not. */
static bool fast_alone(const pf_spec *spec, const uint8_t *rec, size_t len)
{
	uint8_t *dst[PF_SPEC_MAX_FEATURES];
	pf_arena none = { 0 };
	pf_error err;
	bool ok;

	for (uint32_t i = 0; i < spec->n; i++) {
		dst[i] = malloc((size_t)spec->f[i].len * pf_dtype_size(spec->f[i].dtype));
		cr_assert_not_null(dst[i]);
	}
	pf_error_clear(&err);
	ok = pf_spec_decode(spec, rec, len, &none, dst, &err) == 0;
	for (uint32_t i = 0; i < spec->n; i++)
		free(dst[i]);
	return ok;
}

/* ------------------------------------------------------------------ */
/* Records                                                              */
/* ------------------------------------------------------------------ */

static void put_byte(sd_buf *b, uint8_t v)
{
	cr_assert_lt(b->n, sizeof(b->b));
	b->b[b->n++] = v;
}

static void put_varint(sd_buf *b, uint64_t v)
{
	uint8_t t[10];
	size_t n = pf_varint_put(t, v);

	for (size_t i = 0; i < n; i++)
		put_byte(b, t[i]);
}

static void put_bytes(sd_buf *b, const void *p, size_t n)
{
	cr_assert_leq(b->n + n, sizeof(b->b));
	if (n)
		memcpy(b->b + b->n, p, n);
	b->n += n;
}

/* tag, length, content */
static void put_field(sd_buf *b, uint8_t tag, const sd_buf *content)
{
	put_byte(b, tag);
	put_varint(b, content->n);
	put_bytes(b, content->b, content->n);
}

static const int64_t tokens[] = { 0, 1, 127, 128, 300, 16383, 16384,
				  31999, 2097151, 2097152, 268435455,
				  268435456, INT32_MAX, (int64_t)INT32_MAX + 1,
				  -1, INT32_MIN, (int64_t)INT32_MIN - 1,
				  INT64_MAX, INT64_MIN, 5, 6, 7 };
static const float floats[] = { 0.0f, -0.0f, 1.5f, -2.5f, 3e9f, -3e9f, NAN,
				INFINITY, -INFINITY, 1e-45f, 1e20f, -7.25f };
static const pf_bytes strs[] = { { (const uint8_t *)"hello, world", 12 },
				 { (const uint8_t *)"", 0 },
				 { (const uint8_t *)"x\0y", 3 } };

#define FEAT(n, k, c, field, arr)                                            \
	{ .name = n, .name_len = sizeof(n) - 1, .kind = k, .count = c,       \
	  .v.field = arr }

static const pf_feature base_features[] = {
	FEAT("tokens", PF_KIND_INT64, 22, int64s, tokens),
	FEAT("label", PF_KIND_INT64, 1, int64s, tokens + 19),
	FEAT("x", PF_KIND_FLOAT, 12, floats, floats),
	FEAT("img", PF_KIND_BYTES, 3, bytes, strs),
	FEAT("unset", PF_KIND_NONE, 0, int64s, NULL),
	FEAT("empty_i", PF_KIND_INT64, 0, int64s, NULL),
	FEAT("empty_f", PF_KIND_FLOAT, 0, floats, NULL),
	FEAT("empty_b", PF_KIND_BYTES, 0, bytes, NULL),
};
#define NBASE (sizeof(base_features) / sizeof(base_features[0]))

static const char *const base_specs[] = {
	"tokens:int32[512],label:int32[1]",
	"tokens:int64[512],label:int64[1]",
	"tokens:int32[4]:pad=-7,label:int64[3]:pad=9",
	"tokens:int32[30]:clip=-5:300,label:int32[2]:required",
	"tokens:int64[30]:clip=-9223372036854775808:1000:pad=3",
	"tokens:int64[30]:clip=-100:-10",
	"tokens:float32[30]:scale=0.5:shift=-1:clip=-100:1e9",
	"tokens:float32[30],x:float32[13]:pad=-0",
	"x:float32[20]:scale=2:shift=0:clip=-1e10:1e10,x2:float32[2]",
	"x:int32[13]:pad=5,tokens:float32[2]",
	"x:int64[13]:clip=-100:100",
	"img:bytes[20]:pad=32,x:float32[1]",
	"img:bytes[3]",
	"unset:int32[3]:default=1,empty_i:int64[2]:required,empty_f:float32[2]:required,empty_b:bytes[4]:required",
	"unset:int32[3]:required",
	"unset:int32[3]:pad=1",
	"absent:int32[3]:required",
	"absent:int64[3]:pad=4",
	"absent:float32[3]:pad=-0.5:default=2.5,absent2:bytes[2]:default=7",
	"absent:int32[3]:default=-1,unset:float32[2]:default=-0,label:int64[1]:default=3",
	"img:int32[3]",
	"tokens:bytes[3]",
	"x:bytes[1]",
	"label:int32[1],tokens:int32[8],x:float32[4],img:bytes[8],unset:int64[1]",
	"tokens:int32[8]:lengths,label:int32[1]:lengths",
	"tokens:int64[64]:lengths,x:float32[4]:lengths,img:bytes[4]:lengths",
	"absent:int32[3]:default=-1:lengths,unset:float32[2]:default=0:lengths",
	"empty_i:int32[2]:lengths,empty_b:bytes[2]:lengths,empty_f:float32[1]:lengths",
	"tokens:int32[*],label:int32[1]",
};
#define NSPECS (sizeof(base_specs) / sizeof(base_specs[0]))

static pf_spec *specs[NSPECS];

static void load_specs(void)
{
	for (size_t i = 0; i < NSPECS; i++)
		if (!specs[i])
			specs[i] = sd_spec_of(base_specs[i]);
}

static void compare_all_specs(const uint8_t *rec, size_t len, const char *what)
{
	char w[256];

	load_specs();
	for (size_t i = 0; i < NSPECS; i++) {
		snprintf(w, sizeof(w), "%s, spec '%s'", what, base_specs[i]);
		sd_compare(specs[i], rec, len, w);
	}
}

/* ------------------------------------------------------------------ */

Test(specdecode, base_record_every_spec)
{
	sd_buf *b = sd_encode(base_features, NBASE);

	compare_all_specs(b->b, b->n, "base");
	cr_assert_gt(sd_compared, 0);
	free(b);
}

Test(specdecode, tokens_record_takes_the_fast_path)
{
	pf_feature f[2] = {
		FEAT("tokens", PF_KIND_INT64, 22, int64s, tokens),
		FEAT("label", PF_KIND_INT64, 1, int64s, tokens + 3),
	};
	sd_buf *b = sd_encode(f, 2);
	pf_spec *s32 = sd_spec_of("tokens:int32[512],label:int32[1]");
	pf_spec *s64 = sd_spec_of("tokens:int64[16]:clip=0:1000,label:int64[1]");
	pf_spec *sf = sd_spec_of("tokens:float32[16],label:int64[1]");

	for (const pf_varint_ops *p = pf_varint_paths; p->name; p++) {
		if (!p->supported())
			continue;
		pf_varint_set_impl(p->name);
		cr_assert(fast_alone(s32, b->b, b->n), "%s", p->name);
		cr_assert(fast_alone(s64, b->b, b->n), "%s", p->name);
		/* float32 needs scratch: with no arena it cannot be done */
		cr_assert(!fast_alone(sf, b->b, b->n), "%s", p->name);
		sd_compare(s32, b->b, b->n, "tokens");
		sd_compare(s64, b->b, b->n, "tokens");
		sd_compare(sf, b->b, b->n, "tokens");
	}
	free(b);
	free(s32);
	free(s64);
	free(sf);
}

Test(specdecode, empty_record_and_empty_features)
{
	static const uint8_t empty_features[] = { 0x0a, 0x00 };
	static const uint8_t empty_entry[] = { 0x0a, 0x02, 0x0a, 0x00 };

	compare_all_specs(NULL, 0, "empty record");
	compare_all_specs(empty_features, sizeof(empty_features), "empty features");
	compare_all_specs(empty_entry, sizeof(empty_entry), "empty entry");
}

/* Build an Example from raw entries: each entry is (key, Feature bytes). */
static void add_entry(sd_buf *features, const char *key, size_t key_len,
		      const sd_buf *feature, bool value_first)
{
	sd_buf *e = sd_buf_new(), *k = sd_buf_new();

	put_bytes(k, key, key_len);
	if (value_first && feature)
		put_field(e, 0x12, feature);
	if (key)
		put_field(e, 0x0a, k);
	if (!value_first && feature)
		put_field(e, 0x12, feature);
	put_field(features, 0x0a, e);
	free(e);
	free(k);
}

static sd_buf *example_of(const sd_buf *features)
{
	sd_buf *b = sd_buf_new();

	put_field(b, 0x0a, features);
	return b;
}

/* A Feature holding one list of kind tag (0x0a bytes, 0x12 float, 0x1a
 * int64) whose content is given. */
static sd_buf *feature_of(uint8_t tag, const sd_buf *list)
{
	sd_buf *f = sd_buf_new();

	put_field(f, tag, list);
	return f;
}

static sd_buf *int64_list(const int64_t *v, size_t n, bool packed)
{
	sd_buf *l = sd_buf_new(), *p = sd_buf_new();

	for (size_t i = 0; i < n; i++) {
		if (packed) {
			put_varint(p, (uint64_t)v[i]);
		} else {
			put_byte(l, 0x08);
			put_varint(l, (uint64_t)v[i]);
		}
	}
	if (packed)
		put_field(l, 0x0a, p);
	free(p);
	return l;
}

static sd_buf *float_list(const float *v, size_t n, bool packed)
{
	sd_buf *l = sd_buf_new(), *p = sd_buf_new();

	for (size_t i = 0; i < n; i++) {
		if (packed) {
			put_bytes(p, &v[i], 4);
		} else {
			put_byte(l, 0x15);
			put_bytes(l, &v[i], 4);
		}
	}
	if (packed)
		put_field(l, 0x0a, p);
	free(p);
	return l;
}

static void check_features(sd_buf *features, const char *what)
{
	sd_buf *ex = example_of(features);

	compare_all_specs(ex->b, ex->n, what);
	free(ex);
}

Test(specdecode, odd_encodings)
{
	sd_buf *packed = int64_list(tokens, 22, true);
	sd_buf *unpacked = int64_list(tokens, 22, false);
	sd_buf *fpacked = float_list(floats, 12, true);
	sd_buf *funpacked = float_list(floats, 12, false);
	sd_buf *ftok = feature_of(0x1a, packed), *ftok_u = feature_of(0x1a, unpacked);
	sd_buf *fx = feature_of(0x12, fpacked), *fx_u = feature_of(0x12, funpacked);
	sd_buf *fs = sd_buf_new(), *empty = sd_buf_new();
	sd_buf *f2 = sd_buf_new();

	/* unpacked int64 and float lists */
	add_entry(fs, "tokens", 6, ftok_u, false);
	add_entry(fs, "x", 1, fx_u, false);
	check_features(fs, "unpacked");

	/* value before key */
	fs->n = 0;
	add_entry(fs, "tokens", 6, ftok, true);
	add_entry(fs, "x", 1, fx, true);
	check_features(fs, "value first");

	/* duplicate keys: the last wins, whatever its kind */
	fs->n = 0;
	add_entry(fs, "tokens", 6, fx, false);
	add_entry(fs, "tokens", 6, ftok, false);
	add_entry(fs, "x", 1, fx, false);
	add_entry(fs, "x", 1, ftok, false);
	check_features(fs, "duplicates");
	fs->n = 0;
	add_entry(fs, "tokens", 6, ftok, false);
	add_entry(fs, "tokens", 6, empty, false);	/* a Feature of no kind */
	check_features(fs, "duplicate, then unset");
	fs->n = 0;
	add_entry(fs, "tokens", 6, ftok, false);
	add_entry(fs, "tokens", 6, NULL, false);	/* no value at all */
	check_features(fs, "duplicate, then no value");

	/* a key cut by a NUL, as protobuf-c does */
	fs->n = 0;
	add_entry(fs, "tokens\0junk", 11, ftok, false);
	add_entry(fs, "x\0", 2, fx, false);
	check_features(fs, "NUL in key");
	fs->n = 0;
	add_entry(fs, "tokens", 6, fx, false);
	add_entry(fs, "tokens\0b", 8, ftok, false);
	check_features(fs, "NUL-cut duplicate");

	/* no key, no value, empty key */
	fs->n = 0;
	add_entry(fs, NULL, 0, ftok, false);
	add_entry(fs, "", 0, fx, false);
	add_entry(fs, "label", 5, NULL, false);
	check_features(fs, "no key");

	/* two lists in one Feature: the last wins */
	f2->n = 0;
	put_field(f2, 0x1a, packed);
	put_field(f2, 0x12, fpacked);
	fs->n = 0;
	add_entry(fs, "tokens", 6, f2, false);
	add_entry(fs, "x", 1, f2, false);
	check_features(fs, "two lists");

	/* a malformed list, then a good one: the last wins, but the first
	 * must still be well-formed */
	{
		static const uint8_t bad_lists[][8] = {
			{ 0x1a, 0x04, 0x0a, 0x02, 0x05, 0x80 },	/* unterminated */
			{ 0x12, 0x07, 0x0a, 0x05, 1, 2, 3, 4, },	/* 5-byte floats (cut) */
			{ 0x0a, 0x02, 0x08, 0x01 },		/* a varint value */
		};
		static const size_t bad_len[] = { 6, 8, 4 };

		for (size_t i = 0; i < 3; i++)
			for (int good = 0; good < 2; good++) {
				f2->n = 0;
				put_bytes(f2, bad_lists[i], bad_len[i]);
				if (i == 1)
					put_byte(f2, 5);
				if (good)
					put_field(f2, 0x1a, packed);
				fs->n = 0;
				add_entry(fs, "tokens", 6, f2, false);
				add_entry(fs, "zz", 2, f2, false);
				check_features(fs, "malformed list, then a good one");
				fs->n = 0;
				add_entry(fs, "zz", 2, f2, false);
				check_features(fs, "malformed list, not in the spec");
			}
	}

	/* two values in one entry: merged */
	{
		sd_buf *e = sd_buf_new(), *k = sd_buf_new();

		put_bytes(k, "tokens", 6);
		put_field(e, 0x0a, k);
		put_field(e, 0x12, ftok);
		put_field(e, 0x12, fx);
		fs->n = 0;
		put_field(fs, 0x0a, e);
		check_features(fs, "two values");
		e->n = 0;
		put_field(e, 0x0a, k);
		put_field(e, 0x12, empty);
		put_field(e, 0x12, empty);
		fs->n = 0;
		put_field(fs, 0x0a, e);
		check_features(fs, "two values, no kind");
		/* two keys: the last one names it */
		e->n = 0;
		put_field(e, 0x0a, k);
		k->n = 0;
		put_bytes(k, "x", 1);
		put_field(e, 0x0a, k);
		put_field(e, 0x12, ftok);
		fs->n = 0;
		put_field(fs, 0x0a, e);
		check_features(fs, "two keys");
		free(e);
		free(k);
	}

	/* unknown fields at every level */
	{
		static const uint8_t unknown[] = { 0x20, 0x05, 0x2d, 1, 2, 3, 4,
						   0x31, 1, 2, 3, 4, 5, 6, 7, 8,
						   0x3a, 0x01, 0x00 };
		sd_buf *l = sd_buf_new(), *f = sd_buf_new(), *e = sd_buf_new(), *k = sd_buf_new();

		put_bytes(l, packed->b, packed->n);
		put_bytes(l, unknown, sizeof(unknown));
		put_field(f, 0x1a, l);
		put_bytes(f, unknown, sizeof(unknown));
		put_bytes(k, "tokens", 6);
		put_field(e, 0x0a, k);
		put_bytes(e, unknown, sizeof(unknown));
		put_field(e, 0x12, f);
		fs->n = 0;
		put_field(fs, 0x0a, e);
		put_bytes(fs, unknown, sizeof(unknown));
		check_features(fs, "unknown fields");
		{
			sd_buf *ex = example_of(fs);

			put_bytes(ex, unknown, sizeof(unknown));
			compare_all_specs(ex->b, ex->n, "unknown top-level field");
			/* the Features twice: the entries follow each other */
			put_field(ex, 0x0a, fs);
			compare_all_specs(ex->b, ex->n, "features twice");
			free(ex);
		}
		free(l);
		free(f);
		free(e);
		free(k);
	}

	/* a packed int64 list in two chunks, an empty packed chunk */
	{
		sd_buf *l = sd_buf_new(), *p = sd_buf_new(), *f, *g;

		/* packed->b is the list: 0x0a, a 1-byte length, the varints */
		cr_assert_lt(packed->b[1], 0x80);
		put_bytes(p, packed->b + 2, packed->n - 2);
		put_field(l, 0x0a, p);
		put_field(l, 0x0a, p);
		f = feature_of(0x1a, l);
		fs->n = 0;
		add_entry(fs, "tokens", 6, f, false);
		check_features(fs, "two packed chunks");
		free(f);
		p->n = 0;
		l->n = 0;
		put_field(l, 0x0a, p);
		f = feature_of(0x1a, l);
		g = feature_of(0x12, l);
		fs->n = 0;
		add_entry(fs, "tokens", 6, f, false);
		add_entry(fs, "x", 1, g, false);
		check_features(fs, "empty packed chunk");
		free(f);
		free(g);
		free(l);
		free(p);
	}

	/* wrong wire types and kinds */
	{
		static const uint8_t bad_tags[][5] = {
			{ 0x08, 0x01, 0, 0, 0 },	/* int64_list as varint */
			{ 0x0d, 1, 2, 3, 4 },		/* fixed32 for a list */
		};
		sd_buf *l = sd_buf_new(), *f;

		for (size_t i = 0; i < 2; i++) {
			sd_buf *f = sd_buf_new();

			put_bytes(f, bad_tags[i], i ? 5 : 2);
			fs->n = 0;
			add_entry(fs, "tokens", 6, f, false);
			check_features(fs, "wrong wire type");
			free(f);
		}
		/* bytes values of the wrong wire type */
		put_byte(l, 0x08);
		put_byte(l, 0x01);
		f = feature_of(0x0a, l);
		fs->n = 0;
		add_entry(fs, "img", 3, f, false);
		check_features(fs, "bytes_list varint");
		fs->n = 0;
		add_entry(fs, "other", 5, f, false);
		check_features(fs, "bytes_list varint, not in the spec");
		free(f);
		/* float packed of 5 bytes */
		l->n = 0;
		put_byte(l, 0x0a);
		put_byte(l, 0x05);
		put_bytes(l, "abcde", 5);
		f = feature_of(0x12, l);
		fs->n = 0;
		add_entry(fs, "other", 5, f, false);
		check_features(fs, "float 5 bytes, not in the spec");
		fs->n = 0;
		add_entry(fs, "x", 1, f, false);
		check_features(fs, "float 5 bytes");
		free(f);
		free(l);
	}

	/* overlong tags and lengths: valid, and the slow path's business */
	{
		static const uint8_t rec[] = {
			0x8a, 0x00, 0x0e,		/* Example.features, tag in 2 bytes */
			0x0a, 0x8c, 0x00,		/* entry, length in 2 bytes */
			0x0a, 0x05, 'l', 'a', 'b', 'e', 'l',
			0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x07,
		};
		static const uint8_t rec2[] = {
			0x0a, 0x11,
			0x0a, 0x0f,
			0x0a, 0x05, 'l', 'a', 'b', 'e', 'l',
			0x12, 0x06, 0x1a, 0x04, 0x0a, 0x82, 0x00, 0x87,
		};
		compare_all_specs(rec, sizeof(rec), "overlong tag");
		compare_all_specs(rec2, sizeof(rec2), "overlong length");
	}

	free(packed);
	free(unpacked);
	free(fpacked);
	free(funpacked);
	free(ftok);
	free(ftok_u);
	free(fx);
	free(fx_u);
	free(fs);
	free(empty);
	free(f2);
}

Test(specdecode, misaligned_destination_is_the_slow_paths_error)
{
	sd_buf *b = sd_encode(base_features, NBASE);
	pf_spec *s = sd_spec_of("label:int32[1],tokens:int64[4]");
	uint64_t space[8];
	uint8_t *dst[2] = { (uint8_t *)space, (uint8_t *)space + 12 };
	pf_arena a;
	pf_error err;

	cr_assert_eq(pf_arena_init(&a, PF_ARENA_BYTES_FOR(b->n)), 0);
	pf_error_clear(&err);
	cr_assert_eq(pf_spec_decode(s, b->b, b->n, &a, dst, &err), -EINVAL);
	cr_assert(strstr(err.msg, "'tokens' is not 8-byte aligned"), "%s", err.msg);
	cr_assert_eq(a.used, 0);
	pf_arena_release(&a);
	free(b);
	free(s);
}

Test(specdecode, arena_too_small_for_the_slow_path)
{
	sd_buf *b = sd_encode(base_features, NBASE);
	pf_spec *s = sd_spec_of("x:float32[4]");
	float out[4];
	uint8_t *dst[1] = { (uint8_t *)out };
	pf_arena a = { 0 };
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_spec_decode(s, b->b, b->n, &a, dst, &err), -ENOBUFS);
	free(b);
	free(s);
}

/* ------------------------------------------------------------------ */
/* Random examples, random specs                                        */
/* ------------------------------------------------------------------ */

static const char *const names[] = { "tokens", "label", "x", "img", "a",
				     "b/c", "long.name-9", "t" };
#define NNAMES (sizeof(names) / sizeof(names[0]))

static int64_t random_int(sd_rng *r)
{
	switch (sd_next(r) % 6) {
	case 0: return (int64_t)(sd_next(r) % 128);
	case 1: return (int64_t)(sd_next(r) % 32000);
	case 2: return (int64_t)(sd_next(r) % (1u << 28));
	case 3: return (int64_t)sd_next(r);
	case 4: return -(int64_t)(sd_next(r) % 1000);
	default: return (int64_t)(sd_next(r) >> (sd_next(r) % 64));
	}
}

static float random_float(sd_rng *r)
{
	uint32_t bits;
	float f;

	switch (sd_next(r) % 4) {
	case 0:
		bits = (uint32_t)sd_next(r);	/* any bits: NaNs, infinities */
		memcpy(&f, &bits, 4);
		return f;
	case 1: return floats[sd_next(r) % (sizeof(floats) / sizeof(floats[0]))];
	default: return (float)((double)(int64_t)(sd_next(r) % 200000) / 7.0 - 10000.0);
	}
}

static void random_spec_text(sd_rng *r, char *text, size_t cap)
{
	size_t n = 1 + sd_next(r) % 5, o = 0;
	bool used[NNAMES] = { false };

	for (size_t i = 0; i < n; i++) {
		size_t k = sd_next(r) % NNAMES;
		static const char *const dtypes[] = { "int32", "int64", "float32", "bytes" };
		unsigned d = (unsigned)(sd_next(r) % 4);
		unsigned len = 1 + (unsigned)(sd_next(r) % (sd_next(r) % 2 ? 600 : 8));

		if (used[k])
			continue;
		used[k] = true;
		o += (size_t)snprintf(text + o, cap - o, "%s%s:%s[%u]", o ? "," : "",
				      names[k], dtypes[d], len);
		if (sd_next(r) % 3 == 0) {
			if (d == 3)
				o += (size_t)snprintf(text + o, cap - o, ":pad=%u", (unsigned)(sd_next(r) % 256));
			else if (d == 2)
				o += (size_t)snprintf(text + o, cap - o, ":pad=-0.25");
			else
				o += (size_t)snprintf(text + o, cap - o, ":pad=%d", (int)(sd_next(r) % 200) - 100);
		}
		if (d == 2 && sd_next(r) % 3 == 0)
			o += (size_t)snprintf(text + o, cap - o, ":scale=%g:shift=%g",
					      (double)(sd_next(r) % 9) / 4 - 1, (double)(sd_next(r) % 5) - 2);
		if (d != 3 && sd_next(r) % 3 == 0) {
			long long lo = (long long)(sd_next(r) % 100000) - 50000;
			long long hi = lo + (long long)(sd_next(r) % 100000);

			o += (size_t)snprintf(text + o, cap - o, ":clip=%lld:%lld", lo, hi);
		}
		if (sd_next(r) % 4 == 0)
			o += (size_t)snprintf(text + o, cap - o, ":lengths");
		if (sd_next(r) % 8 == 0)
			o += (size_t)snprintf(text + o, cap - o, ":required");
		else if (sd_next(r) % 2 == 0)
			o += (size_t)snprintf(text + o, cap - o, ":default=%d",
					      d == 3 ? (int)(sd_next(r) % 256) :
					      (int)(sd_next(r) % 200) - 100);
	}
}

static sd_buf *random_example(sd_rng *r, int64_t *ints, float *fl, pf_bytes *bs)
{
	pf_feature f[NNAMES];
	uint32_t n = 0;

	for (size_t k = 0; k < NNAMES; k++) {
		uint32_t count = (uint32_t)(sd_next(r) % (sd_next(r) % 2 ? 700 : 6));

		if (sd_next(r) % 4 == 0)
			continue;
		f[n].name = names[k];
		f[n].name_len = (uint32_t)strlen(names[k]);
		switch (sd_next(r) % 7) {
		case 0:
			f[n].kind = PF_KIND_NONE;
			f[n].count = 0;
			f[n].v.int64s = NULL;
			break;
		case 1:
		case 2:
			f[n].kind = PF_KIND_FLOAT;
			f[n].count = count;
			for (uint32_t i = 0; i < count; i++)
				fl[i] = random_float(r);
			f[n].v.floats = fl;
			fl += count;
			break;
		case 3:
			f[n].kind = PF_KIND_BYTES;
			f[n].count = count % 4;
			for (uint32_t i = 0; i < count % 4; i++) {
				bs[i].data = (const uint8_t *)"some bytes of a value, and more";
				bs[i].len = (uint32_t)(sd_next(r) % 30);
			}
			f[n].v.bytes = bs;
			bs += count % 4;
			break;
		default:
			f[n].kind = PF_KIND_INT64;
			f[n].count = count;
			for (uint32_t i = 0; i < count; i++)
				ints[i] = random_int(r);
			f[n].v.int64s = ints;
			ints += count;
			break;
		}
		n++;
	}
	return sd_encode(f, n);
}

Test(specdecode, random_examples_random_specs)
{
	sd_rng r = { 1234 };
	int64_t *ints = malloc(NNAMES * 700 * sizeof(*ints));
	float *fl = malloc(NNAMES * 700 * sizeof(*fl));
	pf_bytes bs[NNAMES * 4];
	unsigned ok = 0;

	cr_assert(ints && fl);
	for (int i = 0; i < 400; i++) {
		sd_buf *b = random_example(&r, ints, fl, bs);

		for (int k = 0; k < 4; k++) {
			char text[1024], what[1100];
			pf_spec *s;

			random_spec_text(&r, text, sizeof(text));
			s = sd_spec_of(text);
			snprintf(what, sizeof(what), "random %d, spec '%s'", i, text);
			ok += sd_compare(s, b->b, b->n, what) == 0;
			free(s);
		}
		free(b);
	}
	/* Both outcomes were exercised. */
	cr_assert_gt(ok, 100);
	cr_assert_gt(sd_failures_seen, 10);
	free(ints);
	free(fl);
}

/* ------------------------------------------------------------------ */
/* Damage: every truncation, every bit flip                             */
/* ------------------------------------------------------------------ */

static void damage(const uint8_t *rec, size_t len, const pf_spec *s,
		   const char *what)
{
	uint8_t *b = malloc(len ? len : 1);
	char w[256];

	cr_assert_not_null(b);
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *t = malloc(cut ? cut : 1);

		memcpy(t, rec, cut);
		snprintf(w, sizeof(w), "%s cut at %zu", what, cut);
		sd_compare(s, t, cut, w);
		free(t);
	}
	for (size_t bit = 0; bit < len * 8; bit++) {
		memcpy(b, rec, len);
		b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		snprintf(w, sizeof(w), "%s bit %zu flipped", what, bit);
		sd_compare(s, b, len, w);
	}
	free(b);
}

Test(specdecode, every_truncation_and_bit_flip, .timeout = 240)
{
	sd_rng r = { 77 };
	int64_t ids[300];
	pf_feature f[3] = {
		FEAT("tokens", PF_KIND_INT64, 0, int64s, ids),
		FEAT("label", PF_KIND_INT64, 1, int64s, tokens + 4),
		FEAT("x", PF_KIND_FLOAT, 5, floats, floats + 2),
	};
	pf_spec *s1 = sd_spec_of("tokens:int32[64],label:int32[1]");
	pf_spec *s2 = sd_spec_of("tokens:int64[300]:clip=0:20000,label:float32[1],x:float32[3]:scale=2");

	/* A tokens record (ids of 1..3 bytes), and the base record. */
	f[0].count = 120;
	for (int i = 0; i < 120; i++)
		ids[i] = (int64_t)(sd_next(&r) % 32000) >> (sd_next(&r) % 14);
	sd_buf *b = sd_encode(f, 3);
	damage(b->b, b->n, s1, "tokens");
	damage(b->b, b->n, s2, "tokens s2");
	free(b);
	b = sd_encode(base_features, NBASE);
	damage(b->b, b->n, s1, "base");
	free(b);
	free(s1);
	free(s2);
}

/* The feature count limit: a 64-feature spec over a record with all of them. */
Test(specdecode, sixty_four_features)
{
	static char names64[64][8];
	int64_t vals[64];
	pf_feature f[64];
	char text[64 * 24];
	size_t o = 0;
	pf_spec *s;
	sd_buf *b;

	for (int i = 0; i < 64; i++) {
		snprintf(names64[i], sizeof(names64[i]), "f%d", i);
		vals[i] = i * 1000;
		f[i].name = names64[i];
		f[i].name_len = (uint32_t)strlen(names64[i]);
		f[i].kind = PF_KIND_INT64;
		f[i].count = (uint32_t)(i % 3);
		f[i].v.int64s = vals;
		o += (size_t)snprintf(text + o, sizeof(text) - o, "%sf%d:%s[2]",
				      i ? "," : "", 63 - i, i % 2 ? "int32" : "int64");
	}
	s = sd_spec_of(text);
	b = sd_encode(f, 64);
	cr_assert_eq(sd_compare(s, b->b, b->n, "64 features"), 0);
	cr_assert(fast_alone(s, b->b, b->n));
	free(b);
	free(s);
}

/* The padding itself, checked against explicit values (both paths share
 * it, so comparing them cannot catch a wrong pad): 0 and -1 go through
 * memset, other pads through the loop; -0.0 is not +0.0.  w and x are
 * absent: their rows are their defaults (the same fill), not their pads. */
Test(specdecode, padding_values_exact)
{
	static const int64_t one[] = { 3 };
	pf_feature f = FEAT("v", PF_KIND_INT64, 1, int64s, one);
	sd_buf *b = sd_encode(&f, 1);
	static const char *const texts[] = {
		"v:int32[5]:pad=0,w:int64[3]:default=0:pad=5,x:float32[3]:default=0",
		"v:int32[5]:pad=-1,w:int64[3]:default=-1,x:float32[3]:default=-0:pad=3",
		"v:int32[5]:pad=7,w:int64[3]:default=-2,x:float32[3]:default=1.5",
	};
	static const int32_t want_v[3] = { 0, -1, 7 };
	static const int64_t want_w[3] = { 0, -1, -2 };
	static const float want_x[3] = { 0.0f, -0.0f, 1.5f };

	for (int t = 0; t < 3; t++) {
		pf_spec *s = sd_spec_of(texts[t]);
		int32_t v[5];
		int64_t w[3];
		float x[3];
		uint8_t *dst[3] = { (uint8_t *)v, (uint8_t *)w, (uint8_t *)x };
		pf_arena a;
		pf_error err;

		memset(v, 0x11, sizeof(v));
		memset(w, 0x11, sizeof(w));
		memset(x, 0x11, sizeof(x));
		cr_assert_eq(pf_arena_init(&a, PF_ARENA_BYTES_FOR(b->n)), 0);
		cr_assert_eq(pf_spec_decode(s, b->b, b->n, &a, dst, &err), 0, "%s", err.msg);
		cr_assert_eq(v[0], 3);
		for (int i = 1; i < 5; i++)
			cr_assert_eq(v[i], want_v[t], "%s: v[%d] = %d", texts[t], i, v[i]);
		for (int i = 0; i < 3; i++) {
			cr_assert_eq(w[i], want_w[t], "%s: w[%d]", texts[t], i);
			cr_assert(!memcmp(&x[i], &want_x[t], sizeof(float)), "%s: x[%d]",
				  texts[t], i);
		}
		sd_compare(s, b->b, b->n, texts[t]);
		pf_arena_release(&a);
		free(s);
	}
	free(b);
}

/* pf_spec_parse() refuses a name given twice, but a spec made by hand
 * may have one: both features get the value, as pf_spec_apply_to() does. */
Test(specdecode, hand_made_spec_with_a_name_twice)
{
	sd_buf *b = sd_encode(base_features, NBASE);
	pf_spec *s = sd_spec_of("tokens:int32[4],tokenz:int64[30]:clip=0:99,x:float32[2],xx:int32[3]");

	strcpy(s->f[1].name, "tokens");
	strcpy(s->f[3].name, "x");
	cr_assert_eq(sd_compare(s, b->b, b->n, "name twice"), 0);
	free(b);
	free(s);
}
