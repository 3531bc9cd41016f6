/* SPDX-License-Identifier: Apache-2.0 */
/* The feature spec applied to decoded Examples (pf_spec_apply): casts,
 * saturation, scale/shift/clip, padding, defaults and kind mismatches. */
#include <criterion/criterion.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "spec_util.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* Apply                                                                */
/* ------------------------------------------------------------------ */

static pf_feature feat_i64(const char *name, const int64_t *v, uint32_t n)
{
	return (pf_feature){ .name = name, .name_len = (uint32_t)strlen(name),
			     .kind = PF_KIND_INT64, .count = n, .v.int64s = v };
}

static pf_feature feat_f(const char *name, const float *v, uint32_t n)
{
	return (pf_feature){ .name = name, .name_len = (uint32_t)strlen(name),
			     .kind = PF_KIND_FLOAT, .count = n, .v.floats = v };
}

static pf_feature feat_b(const char *name, const pf_bytes *v, uint32_t n)
{
	return (pf_feature){ .name = name, .name_len = (uint32_t)strlen(name),
			     .kind = PF_KIND_BYTES, .count = n, .v.bytes = v };
}

static pf_feature feat_none(const char *name)
{
	return (pf_feature){ .name = name, .name_len = (uint32_t)strlen(name),
			     .kind = PF_KIND_NONE };
}

/* An 8-aligned row, pre-filled with 0xAA so untouched bytes show. */
typedef union row {
	uint8_t b[4096];
	int32_t i32[1024];
	int64_t i64[512];
	float f32[1024];
} row_t;

static int apply(const char *text, pf_feature *f, uint32_t n, row_t *row,
		 pf_error *err)
{
	pf_spec *s = parse_ok(text);
	pf_example ex = { .features = f, .n_features = n };
	int ret;

	cr_assert_leq(s->row_bytes, sizeof(row->b));
	memset(row->b, 0xaa, sizeof(row->b));
	pf_error_clear(err);
	ret = pf_spec_apply(s, &ex, row->b, err);
	if (ret == 0) {
		cr_assert_eq(err->code, 0);
		/* nothing written past the row */
		cr_assert_eq(row->b[s->row_bytes], 0xaa);
	}
	free(s);
	return ret;
}

Test(apply, int64_to_int32_saturates_and_pads)
{
	const int64_t v[] = { 1, -1, INT64_MAX, INT64_MIN, 2147483648LL,
			      -2147483649LL, INT32_MAX, INT32_MIN };
	pf_feature f = feat_i64("t", v, 8);
	const int32_t want[] = { 1, -1, INT32_MAX, INT32_MIN, INT32_MAX,
				 INT32_MIN, INT32_MAX, INT32_MIN, -3, -3 };
	pf_error err;
	row_t row;

	cr_assert_eq(apply("t:int32[10]:pad=-3", &f, 1, &row, &err), 0);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(row.i32[i], want[i], "[%d] %d", i, row.i32[i]);
	/* row is 40 bytes, exactly a multiple of 8: nothing else touched */
	cr_assert_eq(row.b[40], 0xaa);
}

Test(apply, int64_as_is_and_truncated)
{
	const int64_t v[] = { INT64_MIN, 0, INT64_MAX, 5, 6 };
	pf_feature f = feat_i64("t", v, 5);
	pf_error err;
	row_t row;

	cr_assert_eq(apply("t:int64[3]", &f, 1, &row, &err), 0);
	cr_assert_eq(row.i64[0], INT64_MIN);
	cr_assert_eq(row.i64[1], 0);
	cr_assert_eq(row.i64[2], INT64_MAX);
	cr_assert_eq(row.i64[3], (int64_t)0xaaaaaaaaaaaaaaaaULL);
}

Test(apply, int_clip_after_the_cast)
{
	const int64_t v[] = { -100, -10, 0, 10, 100, INT64_MAX, INT64_MIN };
	pf_feature f = feat_i64("t", v, 7);
	pf_error err;
	row_t row;

	cr_assert_eq(apply("t:int32[8]:clip=-10:20:pad=99", &f, 1, &row, &err), 0);
	const int32_t w32[] = { -10, -10, 0, 10, 20, 20, -10, 99 };
	for (int i = 0; i < 8; i++)
		cr_assert_eq(row.i32[i], w32[i], "[%d] %d", i, row.i32[i]);

	/* the pad is not clipped */
	cr_assert_eq(apply("t:int64[8]:clip=-5:5:pad=-1000", &f, 1, &row, &err), 0);
	const int64_t w64[] = { -5, -5, 0, 5, 5, 5, -5, -1000 };
	for (int i = 0; i < 8; i++)
		cr_assert_eq(row.i64[i], w64[i], "[%d] %lld", i, (long long)row.i64[i]);
}

Test(apply, float_to_int_truncates_saturates_nan_is_zero)
{
	const float v[] = { 1.9f, -1.9f, 0.5f, -0.5f, 3e9f, -3e9f, NAN, INFINITY,
			    -INFINITY, 2147483520.0f, -2147483648.0f, 1e19f,
			    -1e19f, -9223372036854775808.0f };
	pf_feature f = feat_f("x", v, 14);
	pf_error err;
	row_t row;

	cr_assert_eq(apply("x:int32[14]", &f, 1, &row, &err), 0);
	const int32_t w32[] = { 1, -1, 0, 0, INT32_MAX, INT32_MIN, 0, INT32_MAX,
				INT32_MIN, 2147483520, INT32_MIN, INT32_MAX,
				INT32_MIN, INT32_MIN };
	for (int i = 0; i < 14; i++)
		cr_assert_eq(row.i32[i], w32[i], "[%d] %d", i, row.i32[i]);

	cr_assert_eq(apply("x:int64[14]", &f, 1, &row, &err), 0);
	const int64_t w64[] = { 1, -1, 0, 0, 3000000000LL, -3000000000LL, 0,
				INT64_MAX, INT64_MIN, 2147483520LL, -2147483648LL,
				INT64_MAX, INT64_MIN, INT64_MIN };
	for (int i = 0; i < 14; i++)
		cr_assert_eq(row.i64[i], w64[i], "[%d] %lld", i, (long long)row.i64[i]);

	/* NaN becomes 0, then the clip applies */
	cr_assert_eq(apply("x:int32[14]:clip=1:5", &f, 1, &row, &err), 0);
	cr_assert_eq(row.i32[6], 1);
	cr_assert_eq(row.i32[0], 1);
	cr_assert_eq(row.i32[4], 5);
}

Test(apply, float32_scale_shift_clip_pad_not_scaled)
{
	const float v[] = { 2, 10, -10, NAN, 0.25f };
	pf_feature f = feat_f("x", v, 5);
	pf_error err;
	row_t row;

	cr_assert_eq(apply("x:float32[7]:scale=0.5:shift=1:clip=-3:3:pad=7",
			   &f, 1, &row, &err), 0);
	cr_assert_eq(row.f32[0], 2.0f);		/* 2 * .5 + 1 */
	cr_assert_eq(row.f32[1], 3.0f);		/* 6, clipped */
	cr_assert_eq(row.f32[2], -3.0f);	/* -4, clipped */
	cr_assert(isnan(row.f32[3]));		/* NaN stays NaN */
	cr_assert_eq(row.f32[4], 1.125f);
	cr_assert_eq(row.f32[5], 7.0f);		/* pad: not scaled, not clipped */
	cr_assert_eq(row.f32[6], 7.0f);
	cr_assert_eq(row.b[28], 0, "tail padding zeroed");
	cr_assert_eq(row.b[31], 0);

	/* scale only; shift only */
	cr_assert_eq(apply("x:float32[2]:scale=-2", &f, 1, &row, &err), 0);
	cr_assert_eq(row.f32[0], -4.0f);
	cr_assert_eq(row.f32[1], -20.0f);
	cr_assert_eq(apply("x:float32[2]:shift=-0.5", &f, 1, &row, &err), 0);
	cr_assert_eq(row.f32[0], 1.5f);
	cr_assert_eq(row.f32[1], 9.5f);
}

Test(apply, float32_copies_as_is)
{
	const float v[] = { -0.0f, FLT_MAX, -FLT_MIN, INFINITY, 1e-45f };
	pf_feature f = feat_f("x", v, 5);
	pf_error err;
	row_t row;

	cr_assert_eq(apply("x:float32[5]", &f, 1, &row, &err), 0);
	cr_assert(!memcmp(row.f32, v, sizeof(v)));
	/* with a clip, -0 still keeps its sign (the zero shift adds -0) */
	cr_assert_eq(apply("x:float32[5]:clip=-1e300:1e300", &f, 1, &row, &err), 0);
	cr_assert(!memcmp(row.f32, v, sizeof(v)));
	cr_assert_eq(apply("x:float32[1]:scale=2", &f, 1, &row, &err), 0);
	cr_assert(signbit(row.f32[0]) && row.f32[0] == 0.0f);
}

Test(apply, int64_to_float32_rounds_to_nearest)
{
	const int64_t v[] = { 1, -3, 16777217, 16777219, INT64_MAX, INT64_MIN };
	pf_feature f = feat_i64("x", v, 6);
	pf_error err;
	row_t row;

	cr_assert_eq(apply("x:float32[6]", &f, 1, &row, &err), 0);
	cr_assert_eq(row.f32[0], 1.0f);
	cr_assert_eq(row.f32[1], -3.0f);
	cr_assert_eq(row.f32[2], 16777216.0f);	/* tie to even */
	cr_assert_eq(row.f32[3], 16777220.0f);	/* nearest, not toward zero */
	cr_assert_eq(row.f32[4], 9223372036854775808.0f);
	cr_assert_eq(row.f32[5], -9223372036854775808.0f);

	cr_assert_eq(apply("x:float32[3]:scale=0.25:shift=-1", &f, 1, &row, &err), 0);
	cr_assert_eq(row.f32[0], -0.75f);
	cr_assert_eq(row.f32[1], -1.75f);
	cr_assert_eq(row.f32[2], 4194303.0f);	/* (float)16777217 / 4 - 1 */
}

/* As tf.io.FixedLenFeature: absent (or unset) is an error unless the
 * feature has a default, which then fills the whole row; pad= is only
 * the pad of short lists. */
Test(apply, absent_and_unset_are_errors_unless_defaulted)
{
	pf_feature f[2] = { feat_none("unset"), feat_i64("other", NULL, 0) };
	pf_error err;
	row_t row;

	cr_assert_eq(apply("unset:int32[2]:pad=3:default=4,gone:float32[2]:pad=7:default=-1.5,"
			   "b:bytes[3]:default=9,other:int64[1]:pad=-2",
			   f, 2, &row, &err), 0);
	cr_assert_eq(row.i32[0], 4);
	cr_assert_eq(row.i32[1], 4);
	cr_assert_eq(row.f32[2], -1.5f);
	cr_assert_eq(row.f32[3], -1.5f);
	cr_assert_eq(row.b[16], 9);
	cr_assert_eq(row.b[18], 9);
	for (int i = 19; i < 24; i++)
		cr_assert_eq(row.b[i], 0, "gap byte %d", i);
	cr_assert_eq(row.i64[3], -2);	/* present but empty: padding */

	/* No default: an error naming the feature and what the record has,
	 * 'required' or not (it is the default behaviour). */
	for (int req = 0; req < 2; req++) {
		cr_assert_eq(apply(req ? "gone:int32[1]:required" : "gone:int32[1]:pad=5",
				   f, 2, &row, &err), -ENOMSG);
		cr_assert_eq(err.code, -ENOMSG);
		cr_assert_str_eq(err.msg, "feature 'gone' is missing; the record has: unset, "
			       "other (a feature with :default=V may be absent)");
	}
	cr_assert_eq(apply("unset:int32[1]", f, 2, &row, &err), -ENOMSG);
	cr_assert(strstr(err.msg, "feature 'unset' is present but has no value list; "
			 "the record has: unset, other"), "%s", err.msg);
	/* empty but set: present */
	cr_assert_eq(apply("other:int64[1]", f, 2, &row, &err), 0);
	/* an empty example */
	cr_assert_eq(apply("x:int32[1]", NULL, 0, &row, &err), -ENOMSG);
	cr_assert(strstr(err.msg, "the record has: none"), "%s", err.msg);
	cr_assert_eq(apply("x:int32[2]:default=-3", NULL, 0, &row, &err), 0);
	cr_assert_eq(row.i32[0], -3);
	cr_assert_eq(row.i32[1], -3);
}

Test(apply, kind_mismatches_name_the_feature)
{
	const pf_bytes b[] = { { (const uint8_t *)"hi", 2 } };
	const int64_t i[] = { 1 };
	const float x[] = { 1 };
	pf_feature f[3] = { feat_b("b", b, 1), feat_i64("i", i, 1),
			    feat_f("f", x, 1) };
	pf_error err;
	row_t row;

	cr_assert_eq(apply("b:int32[1]", f, 3, &row, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "feature 'b' holds bytes values, which cannot become int32");
	cr_assert_eq(apply("b:int64[1]", f, 3, &row, &err), -EBADMSG);
	cr_assert_eq(apply("b:float32[1]", f, 3, &row, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "feature 'b' holds bytes values, which cannot become float32");
	cr_assert_eq(apply("i:bytes[1]", f, 3, &row, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "feature 'i' holds int64 values, which cannot become bytes");
	cr_assert_eq(apply("f:bytes[1]", f, 3, &row, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "feature 'f' holds float values, which cannot become bytes");
	/* an empty list of the wrong kind is still the wrong kind */
	f[0].count = 0;
	cr_assert_eq(apply("b:int32[1]", f, 3, &row, &err), -EBADMSG);
	/* the first bad feature stops the row */
	cr_assert_eq(apply("i:int32[1],f:bytes[1],b:int32[1]", f, 3, &row, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "'f'"), "%s", err.msg);
}

Test(apply, bytes_first_value_padded_or_truncated)
{
	const pf_bytes b[] = { { (const uint8_t *)"hello", 5 },
			       { (const uint8_t *)"world", 5 } };
	const pf_bytes empty[] = { { NULL, 0 } };
	pf_feature f[3] = { feat_b("b", b, 2), feat_b("e", empty, 1),
			    feat_b("z", NULL, 0) };
	pf_error err;
	row_t row;

	cr_assert_eq(apply("b:bytes[8]:pad=42", f, 3, &row, &err), 0);
	cr_assert(!memcmp(row.b, "hello\x2a\x2a\x2a", 8));
	cr_assert_eq(apply("b:bytes[3]", f, 3, &row, &err), 0);
	cr_assert(!memcmp(row.b, "hel\0\0\0\0\0", 8));
	cr_assert_eq(apply("b:bytes[5]", f, 3, &row, &err), 0);
	cr_assert(!memcmp(row.b, "hello\0\0\0", 8));
	cr_assert_eq(apply("e:bytes[4]:pad=255,z:bytes[2]:pad=1", f, 3, &row, &err), 0);
	cr_assert(!memcmp(row.b, "\xff\xff\xff\xff\x01\x01\0\0", 8));
}

Test(apply, spec_order_not_example_order_and_layout)
{
	const int64_t ids[] = { 7, 8, 9 };
	const float x[] = { 0.5f };
	const pf_bytes b[] = { { (const uint8_t *)"ab", 2 } };
	pf_feature f[3] = { feat_f("x", x, 1), feat_b("tag", b, 1),
			    feat_i64("ids", ids, 3) };
	pf_spec *s = parse_ok("tag:bytes[3],ids:int64[2],x:float32[1],n:int32[1]:default=-1");
	pf_example ex = { .features = f, .n_features = 3 };
	pf_error err;
	row_t row;

	memset(row.b, 0xaa, sizeof(row.b));
	cr_assert_eq(pf_spec_apply(s, &ex, row.b, &err), 0);
	cr_assert_eq(s->row_bytes, 32);
	cr_assert(!memcmp(row.b, "ab\0\0\0\0\0\0", 8));	/* tag, gap to 8 */
	cr_assert_eq(pf_spec_offset(s, 1), 8);
	cr_assert_eq(row.i64[1], 7);
	cr_assert_eq(row.i64[2], 8);
	cr_assert_eq(pf_spec_offset(s, 2), 24);
	cr_assert_eq(row.f32[6], 0.5f);
	cr_assert_eq(pf_spec_offset(s, 3), 28);
	cr_assert_eq(row.i32[7], -1);
	cr_assert_eq(row.b[32], 0xaa);
	free(s);
}

Test(apply, misaligned_row_is_refused)
{
	pf_spec *s = parse_ok("x:int32[1]");
	pf_example ex = { 0 };
	pf_error err;
	row_t row;

	pf_error_clear(&err);
	cr_assert_eq(pf_spec_apply(s, &ex, row.b + 4, &err), -EINVAL);
	cr_assert(strstr(err.msg, "aligned"), "%s", err.msg);
	free(s);
}

/* Through the real wire format: encode, decode with the fast decoder into
 * an arena, apply. */
Test(apply, encoded_and_decoded_example)
{
	int64_t tokens[300];
	const float x[] = { 1.5f, -2.5f };
	const pf_bytes b[] = { { (const uint8_t *)"jpeg", 4 } };
	pf_feature in[3];
	pf_spec *s = parse_ok("tokens:int32[256]:pad=0,x:float32[4]:scale=2:pad=-1,"
			      "img:bytes[6]:required,label:int64[1]:default=-1");
	pf_example ex;
	pf_arena arena;
	pf_error err;
	uint8_t wire[8192];
	int64_t n;
	row_t row;

	for (int i = 0; i < 300; i++)
		tokens[i] = i % 3 ? i * 1000003LL : -i * 99999999999LL;
	in[0] = feat_i64("tokens", tokens, 300);
	in[1] = feat_f("x", x, 2);
	in[2] = feat_b("img", b, 1);
	n = pf_example_encode(in, 3, wire, sizeof(wire));
	cr_assert_gt(n, 0);
	cr_assert_eq(pf_arena_init(&arena, PF_ARENA_BYTES_FOR((size_t)n)), 0);
	pf_error_clear(&err);
	cr_assert_eq(pf_example_decode(wire, (size_t)n, &arena, &ex, &err), 0, "%s", err.msg);
	memset(row.b, 0xaa, sizeof(row.b));
	cr_assert_eq(pf_spec_apply(s, &ex, row.b, &err), 0, "%s", err.msg);
	for (int i = 0; i < 256; i++) {
		int64_t t = tokens[i];
		int32_t want = t > INT32_MAX ? INT32_MAX : t < INT32_MIN ? INT32_MIN : (int32_t)t;

		cr_assert_eq(row.i32[i], want, "[%d]", i);
	}
	cr_assert_eq(row.f32[256], 3.0f);
	cr_assert_eq(row.f32[257], -5.0f);
	cr_assert_eq(row.f32[258], -1.0f);
	cr_assert_eq(row.f32[259], -1.0f);
	cr_assert(!memcmp(row.b + 1040, "jpeg\0\0", 6));
	cr_assert_eq(pf_spec_offset(s, 3), 1048);
	cr_assert_eq(row.i64[131], -1);
	cr_assert_eq(s->row_bytes, 1056);
	pf_arena_release(&arena);
	free(s);
}


/* ------------------------------------------------------------------ */
/* :lengths and a missing feature (issue 40)                            */
/* ------------------------------------------------------------------ */

/* NAME_lengths is made from NAME (PF_ROLE_LENGTHS), never read from the
 * record: with NAME present the record needs no NAME_lengths (fuzz_spec's
 * "x:int32[1]:lengths", corpus/spec/finding-lengths_is_made, where x has
 * ten floats), and a record's own NAME_lengths is not what it holds. */
Test(apply, lengths_made_from_the_parent_not_read)
{
	const float x[10] = { 0 };
	const int64_t liar[1] = { 99 };
	pf_feature f[2] = { feat_f("x", x, 10), feat_i64("x_lengths", liar, 1) };
	pf_error err;
	row_t row;

	cr_assert_eq(apply("x:int32[1]:lengths", f, 1, &row, &err), 0, "%s", err.msg);
	cr_assert_eq(row.i32[0], 0);
	cr_assert_eq(row.i32[1], 1, "ten values capped at len 1");
	cr_assert_eq(apply("x:int32[4]:lengths", f, 2, &row, &err), 0, "%s", err.msg);
	cr_assert_eq(row.i32[4], 4, "the parent's count, not the record's x_lengths");
}

/* A feature the spec names without :default is in every record, with
 * :lengths too: a record without it is -ENOMSG naming it (and what the
 * record has), through pf_spec_apply(), pf_spec_apply_to() and the fast
 * decode alike, and nothing of the row is left as if it were there.
 * With :default its lengths are 0. */
Test(apply, missing_feature_with_lengths_is_enomsg_naming_it)
{
	const int64_t one[1] = { 7 };
	pf_feature f[2] = { feat_i64("label", one, 1), feat_none("unset") };
	pf_example ex = { .features = f, .n_features = 2 };
	static const char *const specs[] = { "gone:int32[3]:lengths",
					     "label:int64[1],gone:bytes[4]:lengths",
					     "unset:float32[2]:lengths" };
	uint8_t wire[256];
	int64_t n = pf_example_encode(f, 1, wire, sizeof(wire));
	pf_arena a;
	pf_error err;
	row_t row;

	cr_assert_gt(n, 0);
	cr_assert_eq(pf_arena_init(&a, PF_ARENA_BYTES_FOR((size_t)n)), 0);
	for (size_t k = 0; k < sizeof(specs) / sizeof(specs[0]); k++) {
		pf_spec *s = parse_ok(specs[k]);
		bool unset = k == 2;
		const char *name = unset ? "unset" : "gone";
		char want[160];
		uint8_t *dst[PF_SPEC_MAX_FEATURES];

		snprintf(want, sizeof(want), "feature '%s' is %s; the record has: label, unset "
			 "(a feature with :default=V may be absent)", name,
			 unset ? "present but has no value list" : "missing");
		cr_assert_eq(apply(specs[k], f, 2, &row, &err), -ENOMSG, "%s", specs[k]);
		cr_assert_eq(err.code, -ENOMSG);
		cr_assert_str_eq(err.msg, want);
		for (uint32_t i = 0; i < s->n; i++)
			dst[i] = row.b + pf_spec_offset(s, i);
		pf_error_clear(&err);
		cr_assert_eq(pf_spec_apply_to(s, &ex, dst, &err), -ENOMSG, "%s", specs[k]);
		cr_assert_str_eq(err.msg, want);
		/* The fast decode (the loader's path) from the wire bytes,
		 * which hold label alone. */
		if (!unset) {
			pf_arena_reset(&a);
			pf_error_clear(&err);
			cr_assert_eq(pf_spec_decode(s, wire, (size_t)n, &a, dst, &err), -ENOMSG,
				     "%s: %s", specs[k], err.msg);
			cr_assert(strstr(err.msg, "'gone'"), "%s", err.msg);
		}
		free(s);
	}
	/* Optional: the default's row, lengths 0. */
	cr_assert_eq(apply("gone:int32[3]:default=-2:lengths", f, 2, &row, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(row.i32[0], -2);
	cr_assert_eq(row.i32[2], -2);
	cr_assert_eq(row.i32[3], 0);
	pf_arena_release(&a);
}
