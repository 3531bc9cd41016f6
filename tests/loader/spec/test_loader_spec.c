/* SPDX-License-Identifier: Apache-2.0 */
/* The feature spec: parsing, canonical text, errors with byte offsets, row
 * layout, ragged features (applying it: test_loader_spec_apply.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "spec_util.h"
#include "testutil.h"

/* text must fail with -EINVAL, the message starting "feature spec: byte
 * <at>: " and containing what; the spec is left empty. */
static void parse_fails(const char *text, size_t at, const char *what)
{
	pf_spec *s = spec_new();
	char prefix[64];
	pf_error err;
	int ret;

	pf_error_clear(&err);
	ret = pf_spec_parse(s, text, &err);
	cr_assert_eq(ret, -EINVAL, "'%s' parsed (%d)", text, ret);
	cr_assert_eq(err.code, -EINVAL);
	snprintf(prefix, sizeof(prefix), "feature spec: byte %zu: ", at);
	cr_assert(!strncmp(err.msg, prefix, strlen(prefix)),
		  "'%s': got \"%s\", want prefix \"%s\"", text, err.msg, prefix);
	cr_assert(strstr(err.msg, what), "'%s': got \"%s\", want \"%s\"",
		  text, err.msg, what);
	cr_assert_eq(s->n, 0);
	cr_assert_eq(s->row_bytes, 0);
	free(s);
}

static void format_is(const pf_spec *s, const char *want)
{
	char buf[4096];
	size_t n = pf_spec_format(s, buf, sizeof(buf));

	cr_assert_str_eq(buf, want);
	cr_assert_eq(n, strlen(want));
}

/* text parses, formats as canon, and canon parses to the same struct. */
static void canonical(const char *text, const char *canon)
{
	pf_spec *a = parse_ok(text), *b;

	format_is(a, canon);
	b = parse_ok(canon);
	cr_assert(!memcmp(a, b, sizeof(*a)), "'%s' and '%s' differ", text, canon);
	format_is(b, canon);
	free(a);
	free(b);
}

/* ------------------------------------------------------------------ */
/* dtypes                                                               */
/* ------------------------------------------------------------------ */

Test(spec, dtype_sizes_and_names)
{
	cr_assert_eq(pf_dtype_size(PF_DTYPE_INT32), 4);
	cr_assert_eq(pf_dtype_size(PF_DTYPE_INT64), 8);
	cr_assert_eq(pf_dtype_size(PF_DTYPE_FLOAT32), 4);
	cr_assert_eq(pf_dtype_size(PF_DTYPE_BYTES), 1);
	cr_assert_str_eq(pf_dtype_name(PF_DTYPE_INT32), "int32");
	cr_assert_str_eq(pf_dtype_name(PF_DTYPE_INT64), "int64");
	cr_assert_str_eq(pf_dtype_name(PF_DTYPE_FLOAT32), "float32");
	cr_assert_str_eq(pf_dtype_name(PF_DTYPE_BYTES), "bytes");
	cr_assert_eq(pf_dtype_size((pf_dtype)17), 0);
	cr_assert_str_eq(pf_dtype_name((pf_dtype)17), "?");
}

/* ------------------------------------------------------------------ */
/* Valid specs                                                          */
/* ------------------------------------------------------------------ */

Test(spec, header_example_tokens_and_label)
{
	pf_spec *s = parse_ok("tokens:int32[256]:pad=0,label:int64[1]");

	cr_assert_eq(s->n, 2);
	cr_assert_str_eq(s->f[0].name, "tokens");
	cr_assert_eq(s->f[0].dtype, PF_DTYPE_INT32);
	cr_assert_eq(s->f[0].len, 256);
	cr_assert_eq(s->f[0].pad, 0.0);
	cr_assert_eq(s->f[0].scale, 1.0);
	cr_assert_eq(s->f[0].shift, 0.0);
	cr_assert(!s->f[0].clip);
	cr_assert(!s->f[0].has_default);
	cr_assert_str_eq(s->f[1].name, "label");
	cr_assert_eq(s->f[1].dtype, PF_DTYPE_INT64);
	cr_assert_eq(s->f[1].len, 1);
	cr_assert_eq(s->row_bytes, 1024 + 8);
	format_is(s, "tokens:int32[256],label:int64[1]");
	free(s);
}

Test(spec, header_example_float_scale_clip)
{
	pf_spec *s = parse_ok("x:float32[256]:scale=0.5:clip=-3:3,label:int32[1]");

	cr_assert_eq(s->n, 2);
	cr_assert_eq(s->f[0].dtype, PF_DTYPE_FLOAT32);
	cr_assert_eq(s->f[0].scale, 0.5);
	cr_assert_eq(s->f[0].shift, 0.0);
	cr_assert(s->f[0].clip);
	cr_assert_eq(s->f[0].clip_lo, -3.0);
	cr_assert_eq(s->f[0].clip_hi, 3.0);
	cr_assert_eq(s->f[1].dtype, PF_DTYPE_INT32);
	format_is(s, "x:float32[256]:scale=0.5:clip=-3:3,label:int32[1]");
	free(s);
}

Test(spec, every_option_every_dtype)
{
	pf_spec *s = parse_ok("a.b-c_9/x:float32[3]:required:clip=-1.5:2.25:"
			      "shift=-1:scale=2:pad=-0.5:default=0.25,"
			      "img/raw:bytes[16]:pad=255:required:default=7,"
			      "ids:int64[4]:default=-9007199254740992:clip=-7:9:pad=-1,"
			      "n:int32[2]:pad=-2147483648:clip=-2147483648:2147483647");
	const pf_feature_spec *f = s->f;

	cr_assert_eq(s->n, 4);
	cr_assert_str_eq(f[0].name, "a.b-c_9/x");
	cr_assert(f[0].has_default && f[0].clip);
	cr_assert_eq(f[0].default_value, 0.25);
	cr_assert_eq(f[0].clip_lo, -1.5);
	cr_assert_eq(f[0].clip_hi, 2.25);
	cr_assert_eq(f[0].shift, -1.0);
	cr_assert_eq(f[0].scale, 2.0);
	cr_assert_eq(f[0].pad, -0.5);
	cr_assert_eq(f[1].dtype, PF_DTYPE_BYTES);
	cr_assert_eq(f[1].pad, 255.0);
	cr_assert(f[1].has_default && !f[1].clip);
	cr_assert_eq(f[1].default_value, 7.0);
	cr_assert(f[2].has_default);
	cr_assert_eq(f[2].default_value, -9007199254740992.0);
	cr_assert(!f[3].has_default);
	cr_assert_eq(f[2].clip_lo, -7.0);
	cr_assert_eq(f[2].clip_hi, 9.0);
	cr_assert_eq(f[2].pad, -1.0);
	cr_assert_eq(f[3].pad, (double)INT32_MIN);
	/* Options come out in one order: pad, default, scale, shift, clip;
	 * 'required' (the behaviour of every feature without a default)
	 * is not written. */
	format_is(s, "a.b-c_9/x:float32[3]:pad=-0.5:default=0.25:scale=2:shift=-1:"
		  "clip=-1.5:2.25,"
		  "img/raw:bytes[16]:pad=255:default=7,"
		  "ids:int64[4]:pad=-1:default=-9007199254740992:clip=-7:9,"
		  "n:int32[2]:pad=-2147483648:clip=-2147483648:2147483647");
	free(s);
}

Test(spec, canonical_forms)
{
	canonical("x:int32[007]", "x:int32[7]");
	canonical("x:int32[1]:pad=+2", "x:int32[1]:pad=2");
	canonical("x:int32[1]:pad=1e3", "x:int32[1]:pad=1000");
	canonical("x:int32[1]:pad=-0", "x:int32[1]");
	canonical("x:int32[1]:pad=5.0", "x:int32[1]:pad=5");
	canonical("x:bytes[1]:pad=0", "x:bytes[1]");
	canonical("x:float32[1]:scale=1e-3", "x:float32[1]:scale=0.001");
	canonical("x:float32[1]:scale=1:shift=0", "x:float32[1]");
	canonical("x:float32[1]:scale=.1", "x:float32[1]:scale=0.1");
	canonical("x:float32[1]:shift=1E20", "x:float32[1]:shift=1e+20");
	canonical("x:float32[1]:pad=0.30000000000000004",
		  "x:float32[1]:pad=0.30000000000000004");
	canonical("x:float32[1]:clip=0:0", "x:float32[1]:clip=0:0");
	canonical("x:int64[1]:pad=-9223372036854775808",
		  "x:int64[1]:pad=-9223372036854775808");
	canonical("x:int64[1]:pad=4611686018427387904",
		  "x:int64[1]:pad=4611686018427387904");
	canonical("x:int64[1]:pad=9007199254740992",
		  "x:int64[1]:pad=9007199254740992");
	canonical("x:int32[16777216]", "x:int32[16777216]");
}

Test(spec, float_pad_negative_zero_is_kept)
{
	pf_spec *s = parse_ok("x:float32[1]:pad=-0");

	cr_assert(signbit(s->f[0].pad));
	format_is(s, "x:float32[1]:pad=-0");
	free(s);
	canonical("x:float32[1]:pad=-0", "x:float32[1]:pad=-0");
}

Test(spec, longest_name_and_most_features)
{
	char text[64 * 16 + 1], name[128];
	pf_spec *s;
	size_t o = 0;

	memset(name, 'n', 127);
	name[127] = '\0';
	snprintf(text, sizeof(text), "%s:bytes[1]", name);
	s = parse_ok(text);
	cr_assert_eq(strlen(s->f[0].name), 127);
	free(s);

	for (unsigned i = 0; i < PF_SPEC_MAX_FEATURES; i++)
		o += (size_t)snprintf(text + o, sizeof(text) - o, "%sf%u:int32[1]",
				      i ? "," : "", i);
	s = parse_ok(text);
	cr_assert_eq(s->n, PF_SPEC_MAX_FEATURES);
	cr_assert_str_eq(s->f[63].name, "f63");
	cr_assert_eq(s->row_bytes, 64 * 4);
	free(s);
}

Test(spec, format_is_like_snprintf)
{
	pf_spec *s = parse_ok("tokens:int32[256],label:int64[1]");
	const char *want = "tokens:int32[256],label:int64[1]";
	char small[8];

	cr_assert_eq(pf_spec_format(s, NULL, 0), strlen(want));
	memset(small, 'Z', sizeof(small));
	cr_assert_eq(pf_spec_format(s, small, sizeof(small)), strlen(want));
	cr_assert_str_eq(small, "tokens:");
	free(s);
}

/* LC_NUMERIC with a decimal comma must not change what "0.5" means. */
Test(spec, numbers_ignore_the_locale)
{
	static const char *names[] = { "de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8",
				       "fr_FR.utf8", "ru_RU.UTF-8" };
	const char *got = NULL;
	pf_spec *s;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !got; i++)
		got = setlocale(LC_NUMERIC, names[i]);
	if (!got)
		cr_skip_test("no locale with a decimal comma installed");
	cr_assert_str_eq(localeconv()->decimal_point, ",");
	s = parse_ok("x:float32[1]:scale=0.5:shift=1.25");
	cr_assert_eq(s->f[0].scale, 0.5);
	format_is(s, "x:float32[1]:scale=0.5:shift=1.25");
	free(s);
}

/* ------------------------------------------------------------------ */
/* Errors: each names its byte                                          */
/* ------------------------------------------------------------------ */

Test(spec, error_message_in_full)
{
	pf_spec *s = spec_new();
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_spec_parse(s, "abcdefghijklmnop:int8[1]", &err), -EINVAL);
	cr_assert_str_eq(err.msg, "feature spec: byte 17: unknown dtype 'int8' "
			 "(int32, int64, float32, bytes, image)");
	cr_assert_eq(err.offset_kind, PF_OFFSET_NONE);
	/* err may be NULL */
	cr_assert_eq(pf_spec_parse(s, "x", NULL), -EINVAL);
	cr_assert_eq(pf_spec_parse(s, NULL, &err), -EINVAL);
	free(s);
}

Test(spec, errors_empty_and_structure)
{
	parse_fails("", 0, "empty spec");
	parse_fails(",x:int32[1]", 0, "empty feature name");
	parse_fails(":int32[1]", 0, "empty feature name");
	parse_fails("x:int32[1],", 10, "trailing ','");
	parse_fails("x:int32[1],,y:int32[1]", 11, "empty feature name");
	parse_fails("x", 1, "feature 'x' has no type");
	parse_fails("x,y:int32[1]", 1, "feature 'x' has no type");
	parse_fails("x!:int32[1]", 1, "unexpected '!' in a feature name");
	parse_fails("x\x01:int32[1]", 1, "unexpected byte 0x01");
	parse_fails("\xc3\xa9:int32[1]", 0, "unexpected byte 0xc3");
	parse_fails("x:int32[1]junk", 10, "unexpected 'j' after ']'");
	parse_fails("x:int32[1]:required]", 11, "unknown option 'required]'");
	parse_fails("x:int32[1]:required ", 19, "white space after an option");
}

Test(spec, errors_white_space)
{
	parse_fails(" x:int32[1]", 0, "white space");
	parse_fails("x :int32[1]", 1, "a spec has no spaces");
	parse_fails("x: int32[1]", 2, "white space");
	parse_fails("x:int32 [1]", 7, "white space");
	parse_fails("x:int32[ 1]", 8, "white space");
	parse_fails("x:int32[1 ]", 9, "white space");
	parse_fails("x:int32[1] ", 10, "white space");
	parse_fails("x:int32[1], y:int32[1]", 11, "white space");
	parse_fails("x:int32[1]: pad=1", 11, "white space");
	parse_fails("x:int32[1]:pad =1", 14, "white space");
	parse_fails("x:int32[1]:pad= 1", 15, "white space");
	parse_fails("x:int32[1]:pad=1 ", 16, "white space");
	parse_fails("x:int32[1]\n", 10, "white space");
}

Test(spec, errors_dtype_and_length)
{
	parse_fails("x:int8[1]", 2, "unknown dtype 'int8'");
	parse_fails("x:INT32[1]", 2, "unknown dtype 'INT32'");
	parse_fails("x:[1]", 2, "missing dtype");
	parse_fails("x:int32", 7, "expected '[len]' after 'int32'");
	parse_fails("x:int32[]", 8, "expected a length 1..16777216");
	parse_fails("x:int32[-1]", 8, "expected a length");
	parse_fails("x:int32[+1]", 8, "expected a length");
	parse_fails("x:int32[0]", 8, "length 0 out of range 1..16777216");
	parse_fails("x:int32[16777217]", 8, "length 16777217 out of range");
	parse_fails("x:int32[99999999999999999999999]", 8, "out of range");
	parse_fails("x:int32[1", 9, "expected ']'");
	parse_fails("x:int32[1x]", 9, "expected ']'");
	parse_fails("x:int32[0x10]", 9, "expected ']'");
}

Test(spec, errors_names)
{
	char text[300];
	char name[129];

	memset(name, 'n', 128);
	name[128] = '\0';
	snprintf(text, sizeof(text), "%s:bytes[1]", name);
	parse_fails(text, 127, "feature name longer than 127 bytes");
	parse_fails("x:int32[1],x:int64[2]", 11, "duplicate feature 'x' (also feature 0)");
	parse_fails("a:int32[1],b:int32[1],a:int32[1]", 22, "duplicate feature 'a'");
}

Test(spec, errors_too_many_features)
{
	char text[65 * 16 + 1];
	size_t o = 0, at = 0;

	for (unsigned i = 0; i <= PF_SPEC_MAX_FEATURES; i++) {
		if (i == PF_SPEC_MAX_FEATURES)
			at = o + 1;	/* after the ',' */
		o += (size_t)snprintf(text + o, sizeof(text) - o, "%sf%u:int32[1]",
				      i ? "," : "", i);
	}
	parse_fails(text, at, "more than 64 features");
}

Test(spec, errors_options)
{
	parse_fails("x:int32[1]:", 11, "empty option");
	parse_fails("x:int32[1]::required", 11, "empty option");
	parse_fails("x:int32[1]:foo=1", 11, "unknown option 'foo' (pad, default, scale, shift, clip, required, lengths)");
	parse_fails("x:int32[1]:Pad=1", 11, "unknown option 'Pad'");
	parse_fails("x:int32[1]:requiredx", 11, "unknown option 'requiredx'");
	parse_fails("x:int32[1]:pad=1:pad=2", 17, "option 'pad' given twice");
	parse_fails("x:int32[1]:required:required", 20, "option 'required' given twice");
	parse_fails("x:int32[1]:default=1:default=2", 21, "option 'default' given twice");
	parse_fails("x:int32[1]:default", 18, "option 'default' needs a value (default=V)");
	parse_fails("x:int32[1]:default=", 19, "missing value for default");
	parse_fails("x:int32[1]:default=1.5", 19, "default=1.5: int32 needs an integer");
	parse_fails("x:int32[1]:default=2147483648", 19, "default=2147483648 is out of range for int32");
	parse_fails("x:bytes[4]:default=256", 19, "default=256: a bytes feature defaults to a byte value 0..255");
	parse_fails("x:float32[4]:default=1e39", 21, "default=1e39 is out of range for float32");
	parse_fails("x:float32[1]:clip=0:1:clip=0:1", 22, "option 'clip' given twice");
	parse_fails("x:int32[1]:required=1", 19, "option 'required' takes no value");
	parse_fails("x:int32[1]:pad", 14, "option 'pad' needs a value (pad=V)");
	parse_fails("x:int32[1]:clip,y:int32[1]", 15, "needs a value (clip=LO:HI)");
	parse_fails("x:int32[1]:pad=", 15, "missing value for pad");
	parse_fails("x:int32[1]:pad=:required", 15, "missing value for pad");
	parse_fails("x:int32[1]:scale=2", 11, "option 'scale' is for float32 only (feature 'x' is int32)");
	parse_fails("x:int64[1]:shift=2", 11, "option 'shift' is for float32 only");
	parse_fails("x:bytes[1]:scale=2", 11, "for float32 only");
	parse_fails("x:bytes[1]:clip=0:1", 11, "option 'clip' does not apply to bytes");
	parse_fails("x:int32[1]:clip=5", 17, "clip needs two bounds (clip=LO:HI)");
	parse_fails("x:int32[1]:clip=5,y:int32[1]", 17, "clip needs two bounds");
	parse_fails("x:int32[1]:clip=:5", 16, "missing value for clip");
	parse_fails("x:int32[1]:clip=5:", 18, "missing value for clip");
	parse_fails("x:int32[1]:clip=5:3", 16, "clip=5:3 has LO > HI");
	parse_fails("x:float32[1]:clip=0.5:-0.5", 18, "clip=0.5:-0.5 has LO > HI");
}

Test(spec, errors_numbers)
{
	parse_fails("x:float32[1]:pad=abc", 17, "bad number 'abc' for pad");
	parse_fails("x:float32[1]:pad=nan", 17, "bad number 'nan'");
	parse_fails("x:float32[1]:pad=inf", 17, "bad number 'inf'");
	parse_fails("x:float32[1]:pad=0x10", 17, "bad number '0x10'");
	parse_fails("x:float32[1]:pad=1.0.0", 17, "bad number '1.0.0'");
	parse_fails("x:float32[1]:pad=1e", 17, "bad number '1e'");
	parse_fails("x:float32[1]:pad=--1", 17, "bad number");
	parse_fails("x:float32[1]:pad=.", 17, "bad number");
	parse_fails("x:float32[1]:scale=1e999", 19, "number '1e999' for scale is out of range");
	parse_fails("x:float32[1]:pad=1e39", 17, "pad=1e39 is out of range for float32");
	parse_fails("x:float32[1]:scale=1111111111111111111111111111111111111111111111111111111111111111111",
		    19, "longer than 64 bytes");
	parse_fails("x:int32[1]:pad=1e20", 15, "pad=1e20 is out of range for int32");
	parse_fails("x:int32[1]:pad=2147483648", 15, "out of range for int32");
	parse_fails("x:int32[1]:pad=-2147483649", 15, "out of range for int32");
	parse_fails("x:int32[1]:pad=1.5", 15, "pad=1.5: int32 needs an integer");
	parse_fails("x:int32[1]:clip=0.5:1", 16, "clip=0.5: int32 needs an integer");
	parse_fails("x:int32[1]:clip=0:3000000000", 18, "clip=3000000000 is out of range for int32");
	parse_fails("x:int64[1]:pad=9223372036854775808", 15, "out of range for int64");
	parse_fails("x:int64[1]:pad=1e19", 15, "out of range for int64");
	parse_fails("x:int64[1]:pad=9223372036854775807", 15, "cannot be held exactly");
	parse_fails("x:int64[1]:pad=9007199254740993", 15, "cannot be held exactly");
	parse_fails("x:bytes[4]:pad=256", 15, "pad=256: a bytes feature pads with a byte value 0..255");
	parse_fails("x:bytes[4]:pad=-1", 15, "0..255");
	parse_fails("x:bytes[4]:pad=0.5", 15, "0..255");
}

/* ------------------------------------------------------------------ */
/* Row layout                                                           */
/* ------------------------------------------------------------------ */

Test(spec, layout_aligns_each_dtype_and_rounds_the_row)
{
	pf_spec *s = parse_ok("a:bytes[3],b:int32[2],c:bytes[1],d:int64[1],"
			      "e:float32[1],f:bytes[2],g:int64[2]");

	cr_assert_eq(pf_spec_offset(s, 0), 0);
	cr_assert_eq(pf_spec_offset(s, 1), 4);	/* 3 -> 4 */
	cr_assert_eq(pf_spec_offset(s, 2), 12);
	cr_assert_eq(pf_spec_offset(s, 3), 16);	/* 13 -> 16 */
	cr_assert_eq(pf_spec_offset(s, 4), 24);
	cr_assert_eq(pf_spec_offset(s, 5), 28);
	cr_assert_eq(pf_spec_offset(s, 6), 32);	/* 30 -> 32 */
	cr_assert_eq(s->row_bytes, 48);
	cr_assert_eq(pf_spec_offset(s, 7), s->row_bytes);
	cr_assert_eq(pf_spec_offset(s, 1000), s->row_bytes);
	free(s);

	s = parse_ok("a:bytes[1]");
	cr_assert_eq(s->row_bytes, 8);
	free(s);
	s = parse_ok("a:int32[3]");
	cr_assert_eq(s->row_bytes, 16);
	free(s);
	s = parse_ok("a:int64[16777216]");
	cr_assert_eq(s->row_bytes, (size_t)8 << 24);
	free(s);
}

/* ------------------------------------------------------------------ */
/* Ragged features ([*]) and true lengths (:lengths)                    */

/* The fields 0.7 added sit in what was padding: the struct keeps its
 * size and every older field its offset. */
Test(ragged, feature_spec_layout_unchanged)
{
	cr_assert_eq(sizeof(pf_feature_spec), 200);
	cr_assert_eq(offsetof(pf_feature_spec, pad), 144);
	cr_assert_eq(offsetof(pf_feature_spec, clip), 176);
	cr_assert_lt(offsetof(pf_feature_spec, role), offsetof(pf_feature_spec, pad));
}

Test(ragged, star_parses_as_ragged)
{
	pf_spec *s = parse_ok("tokens:int32[*],targets:int64[*]:pad=-1,w:float32[*]:scale=2");

	cr_assert_eq(s->n, 3);
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert(s->f[i].ragged);
		cr_assert_eq(s->f[i].len, 0);
		cr_assert_eq(s->f[i].role, PF_ROLE_VALUES);
	}
	cr_assert_eq(s->f[1].pad, -1.0);
	cr_assert_eq(s->f[2].scale, 2.0);
	cr_assert_eq(s->row_bytes, 0);
	free(s);
	canonical("tokens:int32[*]:pad=-1:clip=0:100", "tokens:int32[*]:pad=-1:clip=0:100");
}

Test(ragged, lengths_adds_a_feature_after_its_parent)
{
	pf_spec *s = parse_ok("tokens:int32[6]:lengths:pad=-1,img:bytes[4]:lengths,label:int64[1]");

	cr_assert_eq(s->n, 5);
	cr_assert_str_eq(s->f[0].name, "tokens");
	cr_assert_str_eq(s->f[1].name, "tokens_lengths");
	cr_assert_eq(s->f[1].role, PF_ROLE_LENGTHS);
	cr_assert_eq(s->f[1].dtype, PF_DTYPE_INT32);
	cr_assert_eq(s->f[1].len, 1);
	cr_assert_str_eq(s->f[3].name, "img_lengths");
	cr_assert_str_eq(s->f[4].name, "label");
	/* tokens 24 bytes, its length 4, img 4, its length 4, label at 40 */
	cr_assert_eq(pf_spec_offset(s, 1), 24);
	cr_assert_eq(pf_spec_offset(s, 4), 40);
	cr_assert_eq(s->row_bytes, 48);
	free(s);
	canonical("tokens:int32[6]:lengths:pad=-1,img:bytes[4]:lengths,label:int64[1]",
		  "tokens:int32[6]:pad=-1:lengths,img:bytes[4]:lengths,label:int64[1]");
}

Test(ragged, errors_name_the_byte)
{
	parse_fails("t:bytes[*]", 8, "a ragged feature ([*]) is int32, int64 or float32");
	parse_fails("t:int32[*x]", 9, "expected ']' after '*'");
	parse_fails("t:int32[**]", 9, "expected ']' after '*'");
	parse_fails("t:int32[*]:lengths", 11, "option 'lengths' is for [len] features");
	parse_fails("t:int32[*]:default=1", 11, "'default' does not apply to a ragged feature");
	parse_fails("t:int32[2]:lengths=1", 18, "option 'lengths' takes no value");
	parse_fails("t:int32[2]:lengths:lengths", 19, "option 'lengths' given twice");
	parse_fails("t:int32[2]:lengths,t_lengths:int32[1]", 19,
		    "duplicate feature 't_lengths' (also feature 1, made by :lengths)");
	parse_fails("t_lengths:int32[1],t:int32[2]:lengths", 19,
		    "duplicate feature 't_lengths' (also feature 0)");
}

Test(ragged, lengths_name_too_long)
{
	char text[300], name[128];

	memset(name, 'a', 120);
	name[120] = '\0';
	snprintf(text, sizeof(text), "%s:int32[2]:lengths", name);
	parse_fails(text, 0, "(from :lengths) longer than 127 bytes");
}

/* Lengths counted both ways (the fast decode and the slow one): values of
 * int64 lists, floats, a bytes value's bytes; capped at len; 0 absent. */
Test(ragged, lengths_values)
{
	int64_t tok[9] = { 1, 300, -5, 70000, 2, 3, 4, 5, 6 };
	float v[3] = { 1, 2, 3 };
	pf_bytes b = { (const uint8_t *)"abcdefg", 7 };
	pf_feature f[3] = {
		{ .name = "tokens", .name_len = 6, .kind = PF_KIND_INT64, .count = 9, .v.int64s = tok },
		{ .name = "v", .name_len = 1, .kind = PF_KIND_FLOAT, .count = 3, .v.floats = v },
		{ .name = "img", .name_len = 3, .kind = PF_KIND_BYTES, .count = 1, .v.bytes = &b },
	};
	uint8_t rec[512];
	int64_t n = pf_example_encode(f, 3, rec, sizeof(rec));
	pf_spec *s = parse_ok("tokens:int32[16]:lengths,v:float32[2]:lengths,img:bytes[10]:lengths,"
			      "gone:int32[2]:default=7:lengths");
	uint8_t *row = aligned_alloc(64, 4096);
	int32_t got[4];
	pf_arena a;
	pf_error err;
	uint8_t *dst[PF_SPEC_MAX_FEATURES];
	pf_example ex;

	cr_assert_gt(n, 0);
	cr_assert_eq(pf_arena_init(&a, PF_ARENA_BYTES_FOR((size_t)n)), 0);
	for (int way = 0; way < 2; way++) {
		memset(row, 0xee, 4096);
		for (uint32_t i = 0; i < s->n; i++)
			dst[i] = row + pf_spec_offset(s, i);
		if (way == 0) {
			cr_assert_eq(pf_spec_decode(s, rec, (size_t)n, &a, dst, &err), 0, "%s",
				     err.msg);
		} else {
			pf_arena_reset(&a);
			cr_assert_eq(pf_example_decode(rec, (size_t)n, &a, &ex, &err), 0);
			cr_assert_eq(pf_spec_apply_to(s, &ex, dst, &err), 0, "%s", err.msg);
		}
		memcpy(&got[0], dst[1], 4);
		memcpy(&got[1], dst[3], 4);
		memcpy(&got[2], dst[5], 4);
		memcpy(&got[3], dst[7], 4);
		cr_assert_eq(got[0], 9, "way %d", way);
		cr_assert_eq(got[1], 2, "way %d: 3 floats capped at len 2", way);
		cr_assert_eq(got[2], 7, "way %d", way);
		cr_assert_eq(got[3], 0, "way %d: absent", way);
		cr_assert_eq(((int32_t *)(void *)dst[0])[1], 300);
		cr_assert_eq(((int32_t *)(void *)dst[6])[1], 7, "the default");
	}
	pf_arena_release(&a);
	free(row);
	free(s);
}

Test(ragged, loader_refuses_star_without_a_pack_length)
{
	const char *dir = tu_id_dataset(64);
	const char *paths[] = { dir };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 4,
				 .features = "v:float32[*],id:int64[1]" };
	pf_loader *l = NULL;
	pf_error err;

	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -EINVAL);
	cr_assert_null(l);
	cr_assert(strstr(err.msg, "'v' is ragged ([*]): give it a length (v:float32[N]) "
			 "or a pack length"), "%s", err.msg);
}

/* :lengths through the loader: id_lengths is 1 in every row, v_lengths
 * the 3 floats capped at 2. */
Test(ragged, loader_delivers_lengths)
{
	const char *dir = tu_id_dataset(64);
	const char *paths[] = { dir };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 8,
				 .cores_per_host = 2, .threads = 2,
				 .features = "id:int64[1]:lengths,v:float32[2]:lengths" };
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	uint64_t rows = 0;

	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_loader_spec(l)->n, 4);
	while (pf_loader_next(l, &b) == 1) {
		for (uint32_t c = 0; c < b->cores; c++) {
			pf_core_batch *cb = &b->core[c];

			cr_assert_eq(cb->ntensors, 4);
			cr_assert_str_eq(cb->tensors[1].name, "id_lengths");
			cr_assert_str_eq(cb->tensors[3].name, "v_lengths");
			for (uint32_t r = 0; r < b->per_core_batch; r++) {
				cr_assert_eq(((int32_t *)cb->tensors[1].data)[r], 1);
				cr_assert_eq(((int32_t *)cb->tensors[3].data)[r], 2);
				rows++;
			}
		}
		pf_loader_release(l, b);
	}
	cr_assert_eq(rows, 64);
	pf_loader_free(l);
}
