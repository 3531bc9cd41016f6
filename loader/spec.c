/* SPDX-License-Identifier: Apache-2.0 */
/* The feature spec: parse and format its text, lay out a row, fill one. */
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "spec_internal.h"

/*
 * Grammar (no white space anywhere; a space is an error, not a separator):
 *
 *   spec    := feature (',' feature)*
 *   feature := name ':' dtype '[' len ']' (':' option)*
 *   name    := 1..127 of [A-Za-z0-9_./-]
 *   dtype   := 'int32' | 'int64' | 'float32' | 'bytes'
 *   len     := [0-9]+, value 1..2^24
 *   option  := 'pad=' num | 'default=' num | 'scale=' num | 'shift=' num
 *            | 'clip=' num ':' num | 'required'
 *   num     := [0-9+-.eE]+ read by strtod in the C locale, finite
 *
 * Each option at most once per feature.  scale and shift are float32 only;
 * clip is for every dtype but bytes.  'required' is a no-op kept for older
 * specs: every feature without a default is required.  For integer dtypes
 * pad, default and clip bounds must be integers inside the dtype (bytes: pad 0..255) and, since
 * pf_feature_spec holds them as doubles, exactly representable: an int64
 * pad written as a decimal integer above 2^53 that a double cannot hold
 * is refused rather than silently rounded.
 */

#define SPEC_MAX_LEN (1u << 24)
#define SPEC_NAME_MAX (PF_SPEC_MAX_NAME - 1)
#define SPEC_NUM_MAX 64		/* longest number token accepted */
#define DTYPE_LIST "int32, int64, float32, bytes"
#define OPTION_LIST "pad, default, scale, shift, clip, required"

/* 2^63 and 2^31 as doubles: the first values outside int64 / int32. */
#define TWO63 9223372036854775808.0
#define TWO31 2147483648.0

size_t pf_dtype_size(pf_dtype t)
{
	switch (t) {
	case PF_DTYPE_INT32: return 4;
	case PF_DTYPE_INT64: return 8;
	case PF_DTYPE_FLOAT32: return 4;
	case PF_DTYPE_BYTES: return 1;
	}
	return 0;
}

const char *pf_dtype_name(pf_dtype t)
{
	switch (t) {
	case PF_DTYPE_INT32: return "int32";
	case PF_DTYPE_INT64: return "int64";
	case PF_DTYPE_FLOAT32: return "float32";
	case PF_DTYPE_BYTES: return "bytes";
	}
	return "?";
}

/* ------------------------------------------------------------------ */
/* Numbers in the C locale                                              */
/* ------------------------------------------------------------------ */

/*
 * strtod() and printf("%g") follow LC_NUMERIC, and an embedding program
 * (a Python interpreter, a GUI) may have set one whose decimal point is a
 * comma.  The spec's text must mean the same everywhere, so numbers are
 * read and written with the thread switched to the C locale.  glibc's
 * newlocale(LC_ALL_MASK, "C") hands back its static C locale object, so
 * there is nothing to free.
 */
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;

static void c_locale_init(void)
{
	c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

static locale_t c_locale_enter(void)
{
	pthread_once(&c_locale_once, c_locale_init);
	return c_locale ? uselocale(c_locale) : (locale_t)0;
}

static void c_locale_leave(locale_t old)
{
	if (old)
		uselocale(old);
}

/* ------------------------------------------------------------------ */
/* Parsing                                                              */
/* ------------------------------------------------------------------ */

typedef struct cursor {
	const char *s;
	size_t pos;
	pf_error *err;
} cursor;

__attribute__((format(printf, 3, 4)))
static int fail(cursor *c, size_t at, const char *fmt, ...)
{
	char what[224];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return pf_error_set(c->err, -EINVAL, PF_OFFSET_NONE, 0,
			    "feature spec: byte %zu: %s", at, what);
}

static bool is_name_char(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
	       ch == '/' || ch == '-';
}

static bool is_space(unsigned char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' ||
	       ch == '\v' || ch == '\f';
}

static bool is_num_char(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || ch == '+' || ch == '-' ||
	       ch == '.' || ch == 'e' || ch == 'E';
}

/* s[0..n) quoted for a message: printable ASCII as is, the rest as \xNN,
 * cut at 32 bytes. */
static const char *quote(char *buf, size_t cap, const char *s, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 5 < cap; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (i == 32) {
			o += (size_t)snprintf(buf + o, cap - o, "...");
			break;
		}
		if (ch >= 0x20 && ch < 0x7f && ch != '\'' && ch != '\\')
			buf[o++] = (char)ch;
		else
			o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", ch);
	}
	buf[o] = '\0';
	return buf;
}

/* One character for a message: "end of spec", "' '", "'x'", "byte 0x07". */
static const char *describe(char *buf, size_t cap, unsigned char ch)
{
	if (!ch)
		snprintf(buf, cap, "end of spec");
	else if (ch >= 0x20 && ch < 0x7f)
		snprintf(buf, cap, "'%c'", ch);
	else
		snprintf(buf, cap, "byte 0x%02x", ch);
	return buf;
}

/* The error for an unexpected character at c->pos, with a hint. */
static int unexpected(cursor *c, const char *where)
{
	unsigned char ch = (unsigned char)c->s[c->pos];
	char d[16];

	if (is_space(ch))
		return fail(c, c->pos, "unexpected white space %s (a spec has no spaces)",
			    where);
	return fail(c, c->pos, "unexpected %s %s",
		    describe(d, sizeof(d), ch), where);
}

enum opt {
	OPT_PAD = 1u << 0,
	OPT_SCALE = 1u << 1,
	OPT_SHIFT = 1u << 2,
	OPT_CLIP = 1u << 3,
	OPT_REQUIRED = 1u << 4,
	OPT_DEFAULT = 1u << 5,
};

static const struct {
	const char *name;
	enum opt opt;
} options[] = {
	{ "pad", OPT_PAD },
	{ "default", OPT_DEFAULT },
	{ "scale", OPT_SCALE },
	{ "shift", OPT_SHIFT },
	{ "clip", OPT_CLIP },
	{ "required", OPT_REQUIRED },
};

static const struct {
	const char *name;
	pf_dtype dtype;
} dtypes[] = {
	{ "int32", PF_DTYPE_INT32 },
	{ "int64", PF_DTYPE_INT64 },
	{ "float32", PF_DTYPE_FLOAT32 },
	{ "bytes", PF_DTYPE_BYTES },
};

static bool token_is(const char *tok, size_t n, const char *word)
{
	return strlen(word) == n && !memcmp(tok, word, n);
}

/*
 * Read the number token s[start..start+n) for option what of feature fs
 * into *out, checking it against fs's dtype.
 */
static int parse_number(cursor *c, size_t start, size_t n, const char *what,
			const pf_feature_spec *fs, double *out)
{
	const char *tok = c->s + start;
	char buf[SPEC_NUM_MAX + 1], q[160];
	bool int_syntax = true;
	char *end;
	double v;

	if (!n)
		return fail(c, start, "missing value for %s", what);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)tok[i];

		if (is_space(ch)) {
			c->pos = start + i;
			return unexpected(c, "in a number");
		}
		if (!is_num_char(ch))
			return fail(c, start, "bad number '%s' for %s",
				    quote(q, sizeof(q), tok, n), what);
		if (!(ch >= '0' && ch <= '9') && !(i == 0 && (ch == '-' || ch == '+')))
			int_syntax = false;
	}
	if (n > SPEC_NUM_MAX)
		return fail(c, start, "number for %s longer than %d bytes",
			    what, SPEC_NUM_MAX);
	memcpy(buf, tok, n);
	buf[n] = '\0';
	v = strtod(buf, &end);
	if (end != buf + n)
		return fail(c, start, "bad number '%s' for %s", buf, what);
	if (!isfinite(v))
		return fail(c, start, "number '%s' for %s is out of range",
			    buf, what);

	switch (fs->dtype) {
	case PF_DTYPE_FLOAT32:
		/* scale, shift and clip are computed in double; only the pad
		 * is stored as a float32 as it is. */
		if ((!strcmp(what, "pad") || !strcmp(what, "default")) &&
		    fabs(v) > FLT_MAX)
			return fail(c, start, "%s=%s is out of range for float32",
				    what, buf);
		break;
	case PF_DTYPE_BYTES:
		if (v != trunc(v) || v < 0 || v > 255)
			return fail(c, start,
				    "%s=%s: a bytes feature %s a byte value 0..255",
				    what, buf, strcmp(what, "pad") ? "defaults to" : "pads with");
		v += 0.0;	/* -0 is 0 */
		break;
	case PF_DTYPE_INT32:
	case PF_DTYPE_INT64:
		if (v != trunc(v))
			return fail(c, start, "%s=%s: %s needs an integer",
				    what, buf, pf_dtype_name(fs->dtype));
		/* A decimal integer for int64 is read exactly too: it must
		 * fit int64 and survive the trip through the double. */
		if (int_syntax && fs->dtype == PF_DTYPE_INT64) {
			long long ll;

			errno = 0;
			ll = strtoll(buf, &end, 10);
			if (errno)
				return fail(c, start, "%s=%s is out of range for int64",
					    what, buf);
			if (v >= TWO63 || (long long)v != ll)
				return fail(c, start,
					    "%s=%s cannot be held exactly (values above 2^53 must be exact doubles)",
					    what, buf);
		}
		if (fs->dtype == PF_DTYPE_INT32 ? v < -TWO31 || v >= TWO31 :
		    v < -TWO63 || v >= TWO63)
			return fail(c, start, "%s=%s is out of range for %s",
				    what, buf, pf_dtype_name(fs->dtype));
		v += 0.0;
		break;
	}
	*out = v;
	return 0;
}

/* The end of a value token: the next ':', ',' or end of text. */
static size_t value_end(const cursor *c, size_t from)
{
	size_t i = from;

	while (c->s[i] && c->s[i] != ':' && c->s[i] != ',')
		i++;
	return i;
}

static int parse_option(cursor *c, pf_feature_spec *fs, unsigned *seen)
{
	size_t start = c->pos, n, vstart, vend;
	const char *tok = c->s + start;
	char q[160];
	const char *oname = NULL;
	enum opt opt = 0;
	int ret;

	while (tok[n = c->pos - start] && tok[n] != '=' && tok[n] != ':' &&
	       tok[n] != ',' && !is_space((unsigned char)tok[n]))
		c->pos++;
	if (!n) {
		if (is_space((unsigned char)tok[0]))
			return unexpected(c, "after ':'");
		return fail(c, start, "empty option after ':' (" OPTION_LIST ")");
	}
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++)
		if (token_is(tok, n, options[i].name)) {
			opt = options[i].opt;
			oname = options[i].name;
		}
	if (!opt)
		return fail(c, start, "unknown option '%s' (" OPTION_LIST ")",
			    quote(q, sizeof(q), tok, n));
	if (*seen & opt)
		return fail(c, start, "option '%s' given twice for feature '%s'",
			    oname, fs->name);
	*seen |= opt;

	if (opt == OPT_REQUIRED) {
		/* Every feature without a default is required: nothing to set. */
		if (c->s[c->pos] == '=')
			return fail(c, c->pos, "option 'required' takes no value");
		return 0;
	}
	if ((opt == OPT_SCALE || opt == OPT_SHIFT) &&
	    fs->dtype != PF_DTYPE_FLOAT32)
		return fail(c, start, "option '%s' is for float32 only (feature '%s' is %s)",
			    oname, fs->name, pf_dtype_name(fs->dtype));
	if (opt == OPT_CLIP && fs->dtype == PF_DTYPE_BYTES)
		return fail(c, start, "option 'clip' does not apply to bytes (feature '%s')",
			    fs->name);
	if (c->s[c->pos] != '=') {
		if (is_space((unsigned char)c->s[c->pos]))
			return unexpected(c, "after an option name");
		return fail(c, c->pos, "option '%s' needs a value (%s=%s)",
			    oname, oname, opt == OPT_CLIP ? "LO:HI" : "V");
	}
	vstart = ++c->pos;
	vend = value_end(c, vstart);

	switch (opt) {
	case OPT_PAD:
		ret = parse_number(c, vstart, vend - vstart, "pad", fs, &fs->pad);
		break;
	case OPT_DEFAULT:
		ret = parse_number(c, vstart, vend - vstart, "default", fs,
				   &fs->default_value);
		fs->has_default = true;
		break;
	case OPT_SCALE:
		ret = parse_number(c, vstart, vend - vstart, "scale", fs, &fs->scale);
		break;
	case OPT_SHIFT:
		ret = parse_number(c, vstart, vend - vstart, "shift", fs, &fs->shift);
		break;
	case OPT_CLIP:
		if (c->s[vend] != ':')
			return fail(c, vend, "clip needs two bounds (clip=LO:HI)");
		ret = parse_number(c, vstart, vend - vstart, "clip", fs,
				   &fs->clip_lo);
		if (ret < 0)
			return ret;
		c->pos = vend + 1;
		vend = value_end(c, c->pos);
		ret = parse_number(c, c->pos, vend - c->pos, "clip", fs,
				   &fs->clip_hi);
		if (ret < 0)
			return ret;
		if (fs->clip_lo > fs->clip_hi)
			return fail(c, vstart, "clip=%s has LO > HI",
				    quote(q, sizeof(q), c->s + vstart, vend - vstart));
		fs->clip = true;
		break;
	default:
		ret = -EINVAL;
		break;
	}
	if (ret < 0)
		return ret;
	c->pos = vend;
	return 0;
}

static int parse_feature(cursor *c, pf_feature_spec *fs)
{
	size_t start = c->pos, n, len_start;
	const char *tok;
	char q[160];
	uint64_t len = 0;
	unsigned seen = 0;
	bool found = false;
	int ret;

	while (is_name_char((unsigned char)c->s[c->pos]))
		c->pos++;
	n = c->pos - start;
	if (!n) {
		if (!c->s[c->pos])
			return start ? fail(c, start - 1, "trailing ','") :
				       fail(c, 0, "empty spec");
		if (c->s[c->pos] == ',' || c->s[c->pos] == ':')
			return fail(c, start, "empty feature name");
		return unexpected(c, "in a feature name (A-Z a-z 0-9 _ . / -)");
	}
	if (n > SPEC_NAME_MAX)
		return fail(c, start + SPEC_NAME_MAX,
			    "feature name longer than %u bytes", SPEC_NAME_MAX);
	memcpy(fs->name, c->s + start, n);
	fs->name[n] = '\0';
	if (c->s[c->pos] != ':') {
		if (!c->s[c->pos] || c->s[c->pos] == ',')
			return fail(c, c->pos, "feature '%s' has no type (name:dtype[len])",
				    fs->name);
		return unexpected(c, "in a feature name (A-Z a-z 0-9 _ . / -)");
	}

	/* dtype */
	start = ++c->pos;
	tok = c->s + start;
	while (tok[n = c->pos - start] && tok[n] != '[' && tok[n] != ':' &&
	       tok[n] != ',' && !is_space((unsigned char)tok[n]))
		c->pos++;
	if (!n) {
		if (is_space((unsigned char)tok[0]))
			return unexpected(c, "after ':'");
		return fail(c, start, "missing dtype for feature '%s' (" DTYPE_LIST ")",
			    fs->name);
	}
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
		if (token_is(tok, n, dtypes[i].name)) {
			fs->dtype = dtypes[i].dtype;
			found = true;
		}
	}
	if (!found)
		return fail(c, start, "unknown dtype '%s' (" DTYPE_LIST ")",
			    quote(q, sizeof(q), tok, n));
	if (c->s[c->pos] != '[') {
		if (is_space((unsigned char)c->s[c->pos]))
			return unexpected(c, "after the dtype");
		return fail(c, c->pos, "expected '[len]' after '%s'",
			    pf_dtype_name(fs->dtype));
	}

	/* [len]: digits only, no sign; saturate while reading so a long run
	 * of digits cannot overflow. */
	len_start = ++c->pos;
	while (c->s[c->pos] >= '0' && c->s[c->pos] <= '9') {
		len = len * 10 + (uint64_t)(c->s[c->pos] - '0');
		if (len > SPEC_MAX_LEN)
			len = SPEC_MAX_LEN + 1;
		c->pos++;
	}
	if (c->pos == len_start) {
		if (is_space((unsigned char)c->s[c->pos]))
			return unexpected(c, "after '['");
		return fail(c, len_start, "expected a length 1..%u after '['",
			    SPEC_MAX_LEN);
	}
	if (c->s[c->pos] != ']') {
		if (is_space((unsigned char)c->s[c->pos]))
			return unexpected(c, "in the length");
		return fail(c, c->pos, "expected ']' after the length");
	}
	if (len < 1 || len > SPEC_MAX_LEN)
		return fail(c, len_start, "length %s out of range 1..%u",
			    quote(q, sizeof(q), c->s + len_start, c->pos - len_start),
			    SPEC_MAX_LEN);
	fs->len = (uint32_t)len;
	c->pos++;

	fs->scale = 1.0;
	while (c->s[c->pos] == ':') {
		c->pos++;
		ret = parse_option(c, fs, &seen);
		if (ret < 0)
			return ret;
	}
	if (c->s[c->pos] && c->s[c->pos] != ',')
		return unexpected(c, seen ? "after an option" : "after ']'");
	return 0;
}

/* Lay out a row: each feature at the next multiple of its dtype size; the
 * row rounded up to 8 so rows can follow each other aligned. */
static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static int parse(pf_spec *spec, const char *text, pf_error *err)
{
	cursor c = { .s = text, .pos = 0, .err = err };
	size_t off = 0;
	int ret;

	for (;;) {
		pf_feature_spec *fs;
		size_t start = c.pos;

		if (spec->n == PF_SPEC_MAX_FEATURES)
			return fail(&c, start, "more than %u features",
				    PF_SPEC_MAX_FEATURES);
		fs = &spec->f[spec->n];
		ret = parse_feature(&c, fs);
		if (ret < 0)
			return ret;
		for (uint32_t i = 0; i < spec->n; i++)
			if (!strcmp(spec->f[i].name, fs->name))
				return fail(&c, start,
					    "duplicate feature '%s' (also feature %u)",
					    fs->name, i);
		spec->n++;
		off = align_up(off, pf_dtype_size(fs->dtype));
		off += (size_t)fs->len * pf_dtype_size(fs->dtype);
		if (!text[c.pos])
			break;
		c.pos++;	/* ',' */
	}
	spec->row_bytes = align_up(off, 8);
	return 0;
}

int pf_spec_parse(pf_spec *spec, const char *text, pf_error *err)
{
	locale_t old;
	int ret;

	pf_error_clear(err);
	/* Zero everything, padding and name tails included, so two parses
	 * of equal text compare equal with memcmp(). */
	memset(spec, 0, sizeof(*spec));
	if (!text)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "feature spec: no spec given");
	old = c_locale_enter();
	ret = parse(spec, text, err);
	c_locale_leave(old);
	if (ret < 0)
		memset(spec, 0, sizeof(*spec));
	return ret;
}

/* ------------------------------------------------------------------ */
/* Formatting                                                           */
/* ------------------------------------------------------------------ */

typedef struct outbuf {
	char *dst;
	size_t cap, n;		/* n counts every byte, written or not */
} outbuf;

__attribute__((format(printf, 2, 3)))
static void put(outbuf *o, const char *fmt, ...)
{
	va_list ap;
	int w;

	va_start(ap, fmt);
	if (o->n < o->cap)
		w = vsnprintf(o->dst + o->n, o->cap - o->n, fmt, ap);
	else
		w = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (w > 0)
		o->n += (size_t)w;
}

/* The shortest %g text that reads back as exactly v. */
static void put_double(outbuf *o, double v)
{
	char buf[40];

	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	put(o, "%s", buf);
}

/* An option value in the feature's dtype: integers as integers. */
static void put_value(outbuf *o, const pf_feature_spec *fs, double v)
{
	if (fs->dtype == PF_DTYPE_FLOAT32)
		put_double(o, v);
	else
		put(o, "%lld", (long long)v);
}

/* Bitwise: -0.0 is not the default 0.0 (it is a different float pad). */
static bool same_bits(double a, double b)
{
	return !memcmp(&a, &b, sizeof(a));
}

size_t pf_spec_format(const pf_spec *spec, char *dst, size_t cap)
{
	outbuf o = { .dst = dst, .cap = cap, .n = 0 };
	locale_t old = c_locale_enter();

	if (cap)
		dst[0] = '\0';
	for (uint32_t i = 0; i < spec->n && i < PF_SPEC_MAX_FEATURES; i++) {
		const pf_feature_spec *fs = &spec->f[i];

		put(&o, "%s%.*s:%s[%u]", i ? "," : "", (int)SPEC_NAME_MAX,
		    fs->name, pf_dtype_name(fs->dtype), fs->len);
		if (!same_bits(fs->pad, 0.0)) {
			put(&o, ":pad=");
			put_value(&o, fs, fs->pad);
		}
		if (fs->has_default) {
			put(&o, ":default=");
			put_value(&o, fs, fs->default_value);
		}
		if (fs->dtype == PF_DTYPE_FLOAT32 && !same_bits(fs->scale, 1.0)) {
			put(&o, ":scale=");
			put_double(&o, fs->scale);
		}
		if (fs->dtype == PF_DTYPE_FLOAT32 && !same_bits(fs->shift, 0.0)) {
			put(&o, ":shift=");
			put_double(&o, fs->shift);
		}
		if (fs->clip) {
			put(&o, ":clip=");
			put_value(&o, fs, fs->clip_lo);
			put(&o, ":");
			put_value(&o, fs, fs->clip_hi);
		}
	}
	c_locale_leave(old);
	return o.n;
}

size_t pf_spec_offset(const pf_spec *spec, uint32_t i)
{
	size_t off = 0;

	if (i >= spec->n || i >= PF_SPEC_MAX_FEATURES)
		return spec->row_bytes;
	for (uint32_t k = 0; k <= i; k++) {
		size_t size = pf_dtype_size(spec->f[k].dtype);

		off = align_up(off, size);
		if (k < i)
			off += (size_t)spec->f[k].len * size;
	}
	return off;
}

/* ------------------------------------------------------------------ */
/* Applying a spec to one example: the per-record hot path              */
/* ------------------------------------------------------------------ */

/*
 * Integer clip bounds were checked at parse time to lie inside the dtype,
 * so "saturate to the dtype, then clip" is one clamp to [lo, hi]: the
 * dtype's range, or the clip's.  Values almost always lie inside, so the
 * clamp is a test on a well-predicted branch: measured on 256 int64 token
 * ids to int32 at -O2, twice as fast as a branch-free min/max (which GCC
 * does not vectorize at -O2 either, and SSE2 has no 64-bit compare).
 */
static inline int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi)
{
	if (__builtin_expect((uint64_t)v - (uint64_t)lo <=
			     (uint64_t)hi - (uint64_t)lo, 1))
		return v;
	return v < lo ? lo : hi;
}

/* float to int32: toward zero, saturating, NaN to 0.  Every float in
 * (-2^31 - 1, 2^31) truncates inside int32; NaN fails both tests. */
static inline int32_t float_to_i32(float x)
{
	double d = x;

	if (__builtin_expect(d > -TWO31 - 1.0 && d < TWO31, 1))
		return (int32_t)x;
	if (x != x)
		return 0;
	return x > 0 ? INT32_MAX : INT32_MIN;
}

/* float to int64: the same over [-2^63, 2^63). */
static inline int64_t float_to_i64(float x)
{
	if (__builtin_expect(x >= (float)-TWO63 && x < (float)TWO63, 1))
		return (int64_t)x;
	if (x != x)
		return 0;
	return x > 0 ? INT64_MAX : INT64_MIN;
}

void pf_spec_int_bounds(const pf_feature_spec *fs, int64_t *lo, int64_t *hi)
{
	if (fs->dtype == PF_DTYPE_INT32) {
		*lo = INT32_MIN;
		*hi = INT32_MAX;
	} else {
		*lo = INT64_MIN;
		*hi = INT64_MAX;
	}
	if (fs->clip) {
		*lo = (int64_t)fs->clip_lo;
		*hi = (int64_t)fs->clip_hi;
	}
}

/*
 * The usual pads, 0 and -1 (and +0.0), are one byte repeated: memset.
 * GCC does not vectorize these loops at -O2: padding a tokens record's
 * ~190 free int32 slots one store at a time cost ~65 ns of the ~410 ns
 * pf_spec_decode took for it (pfbench specdecode, tokens:int32[512],
 * medians on a busy machine).
 */
static void fill_i32(int32_t *dst, uint32_t n, int32_t v)
{
	if (v == 0 || v == -1) {
		memset(dst, v & 0xff, (size_t)n * sizeof(*dst));
		return;
	}
	for (uint32_t k = 0; k < n; k++)
		dst[k] = v;
}

static void fill_i64(int64_t *dst, uint32_t n, int64_t v)
{
	if (v == 0 || v == -1) {
		memset(dst, (int)(v & 0xff), (size_t)n * sizeof(*dst));
		return;
	}
	for (uint32_t k = 0; k < n; k++)
		dst[k] = v;
}

static void fill_f32(float *dst, uint32_t n, float v)
{
	uint32_t bits;

	memcpy(&bits, &v, sizeof(bits));
	if (!bits) {
		memset(dst, 0, (size_t)n * sizeof(*dst));
		return;
	}
	for (uint32_t k = 0; k < n; k++)
		dst[k] = v;
}

/* Values [n, len) set to v, written as given (not scaled, not clipped). */
static void fill_from(const pf_feature_spec *fs, uint8_t *out, uint32_t n, double v)
{
	switch (fs->dtype) {
	case PF_DTYPE_INT32:
		fill_i32((int32_t *)(void *)out + n, fs->len - n, (int32_t)v);
		break;
	case PF_DTYPE_INT64:
		fill_i64((int64_t *)(void *)out + n, fs->len - n, (int64_t)v);
		break;
	case PF_DTYPE_FLOAT32:
		fill_f32((float *)(void *)out + n, fs->len - n, (float)v);
		break;
	case PF_DTYPE_BYTES:
		memset(out + n, (int)v, fs->len - n);
		break;
	}
}

void pf_spec_pad_from(const pf_feature_spec *fs, uint8_t *out, uint32_t n)
{
	fill_from(fs, out, n, fs->pad);
}

static void int64_to_int(const pf_feature_spec *fs, const int64_t *src,
			 uint32_t n, uint8_t *out)
{
	int64_t lo, hi;

	pf_spec_int_bounds(fs, &lo, &hi);
	if (fs->dtype == PF_DTYPE_INT32) {
		int32_t *dst = (int32_t *)(void *)out;

		for (uint32_t k = 0; k < n; k++)
			dst[k] = (int32_t)clamp_i64(src[k], lo, hi);
		fill_i32(dst + n, fs->len - n, (int32_t)fs->pad);
	} else {
		int64_t *dst = (int64_t *)(void *)out;

		if (fs->clip) {
			for (uint32_t k = 0; k < n; k++)
				dst[k] = clamp_i64(src[k], lo, hi);
		} else if (n) {
			memcpy(dst, src, (size_t)n * sizeof(*dst));
		}
		fill_i64(dst + n, fs->len - n, (int64_t)fs->pad);
	}
}

static void float_to_int(const pf_feature_spec *fs, const float *src,
			 uint32_t n, uint8_t *out)
{
	int64_t lo, hi;

	pf_spec_int_bounds(fs, &lo, &hi);
	if (fs->dtype == PF_DTYPE_INT32) {
		int32_t *dst = (int32_t *)(void *)out;

		for (uint32_t k = 0; k < n; k++)
			dst[k] = (int32_t)clamp_i64(float_to_i32(src[k]), lo, hi);
		fill_i32(dst + n, fs->len - n, (int32_t)fs->pad);
	} else {
		int64_t *dst = (int64_t *)(void *)out;

		for (uint32_t k = 0; k < n; k++)
			dst[k] = clamp_i64(float_to_i64(src[k]), lo, hi);
		fill_i64(dst + n, fs->len - n, (int64_t)fs->pad);
	}
}

/* v * scale + shift and the clip, in double, rounded to float once.  A
 * NaN stays NaN: no comparison holds for it, so the clip leaves it alone. */
static inline float transform(double v, double scale, double shift, double lo,
			      double hi)
{
	double d = v * scale + shift;

	d = d < lo ? lo : d;
	d = d > hi ? hi : d;
	return (float)d;
}

static void to_float(const pf_feature_spec *fs, pf_kind kind,
		     const pf_feature *f, uint32_t n, uint8_t *out)
{
	float *dst = (float *)(void *)out;
	double lo = fs->clip ? fs->clip_lo : -HUGE_VAL;
	double hi = fs->clip ? fs->clip_hi : HUGE_VAL;
	/* A zero shift is added as -0.0, the one value with v + s == v for
	 * every v: +0.0 would turn a -0.0 input into +0.0. */
	double shift = fs->shift == 0.0 ? -0.0 : fs->shift;
	bool copy = fs->scale == 1.0 && shift == 0.0 && !fs->clip;

	if (kind == PF_KIND_FLOAT) {
		const float *src = f->v.floats;

		if (copy) {
			if (n)
				memcpy(dst, src, (size_t)n * sizeof(*dst));
		} else {
			for (uint32_t k = 0; k < n; k++)
				dst[k] = transform(src[k], fs->scale, shift,
						   lo, hi);
		}
	} else {
		/* int64 to float32 rounds to nearest (as tf.cast does); scale,
		 * shift and clip then apply to that float, as for a float
		 * source. */
		const int64_t *src = f->v.int64s;

		if (copy) {
			for (uint32_t k = 0; k < n; k++)
				dst[k] = (float)src[k];
		} else {
			for (uint32_t k = 0; k < n; k++)
				dst[k] = transform((float)src[k], fs->scale,
						   shift, lo, hi);
		}
	}
	fill_f32(dst + n, fs->len - n, (float)fs->pad);
}

static void to_bytes(const pf_feature_spec *fs, const pf_feature *f,
		     uint8_t *out)
{
	uint32_t n = 0;

	/* The first value only; an empty list is all padding. */
	if (f->count) {
		n = f->v.bytes[0].len < fs->len ? f->v.bytes[0].len : fs->len;
		if (n)
			memcpy(out, f->v.bytes[0].data, n);
	}
	memset(out + n, (int)fs->pad, fs->len - n);
}

int pf_spec_apply_one(const pf_feature_spec *fs, const pf_feature *f,
		      uint8_t *out, pf_error *err)
{
	pf_kind kind = f ? f->kind : PF_KIND_NONE;
	uint32_t n;

	if (kind == PF_KIND_NONE) {
		if (!fs->has_default)
			return pf_error_set(err, -ENOMSG, PF_OFFSET_NONE, 0,
					    "feature '%s' is missing%s", fs->name,
					    f ? " (present, but no value list set)" : "");
		fill_from(fs, out, 0, fs->default_value);
		return 0;
	}
	n = f->count < fs->len ? f->count : fs->len;
	switch (fs->dtype) {
	case PF_DTYPE_INT32:
	case PF_DTYPE_INT64:
		if (kind == PF_KIND_INT64) {
			int64_to_int(fs, f->v.int64s, n, out);
			return 0;
		}
		if (kind == PF_KIND_FLOAT) {
			float_to_int(fs, f->v.floats, n, out);
			return 0;
		}
		break;
	case PF_DTYPE_FLOAT32:
		if (kind == PF_KIND_INT64 || kind == PF_KIND_FLOAT) {
			to_float(fs, kind, f, n, out);
			return 0;
		}
		break;
	case PF_DTYPE_BYTES:
		if (kind == PF_KIND_BYTES) {
			to_bytes(fs, f, out);
			return 0;
		}
		break;
	}
	return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
			    "feature '%s' holds %s values, which cannot become %s",
			    fs->name, pf_kind_name(kind), pf_dtype_name(fs->dtype));
}

/* "a, b, c" into dst: the first of the n names (of total in all) that
 * fit in cap, then "... (K more)". */
static void list_names(char *dst, size_t cap, const char *const *names,
		       const uint32_t *lens, size_t n, size_t total)
{
	size_t o = 0, i;

	dst[0] = '\0';
	if (!total) {
		snprintf(dst, cap, "none");
		return;
	}
	for (i = 0; i < n; i++) {
		/* Room for this name and, if others follow, the tail. */
		if (o + lens[i] + 2 + (i + 1 < total ? 24 : 0) >= cap)
			break;
		o += (size_t)snprintf(dst + o, cap - o, "%s%.*s", i ? ", " : "",
				      (int)lens[i], names[i]);
	}
	if (i < total)
		snprintf(dst + o, cap - o, "%s... (%zu more)", i ? ", " : "", total - i);
}

/* The error for spec feature fs missing from ex (f: its entry, when it
 * is there with no value list): the features ex does have, by name. */
static int missing(const pf_feature_spec *fs, const pf_example *ex,
		   const pf_feature *f, pf_error *err)
{
	const char *names[16];
	uint32_t lens[16];
	size_t n = ex->n_features < 16 ? ex->n_features : 16;
	char list[112];

	for (size_t i = 0; i < n; i++) {
		names[i] = ex->features[i].name;
		lens[i] = ex->features[i].name_len;
	}
	list_names(list, sizeof(list), names, lens, n, ex->n_features);
	return pf_error_set(err, -ENOMSG, PF_OFFSET_NONE, 0,
			    "feature '%s' is %s; the record has: %s "
			    "(a feature with :default=V may be absent)", fs->name,
			    f ? "present but has no value list" : "missing", list);
}

int pf_spec_apply_to(const pf_spec *spec, const pf_example *ex,
		     uint8_t *const dst[], pf_error *err)
{
	pf_error_clear(err);
	for (uint32_t i = 0; i < spec->n && i < PF_SPEC_MAX_FEATURES; i++) {
		const pf_feature_spec *fs = &spec->f[i];
		const pf_feature *f;
		int ret;

		/* Typed stores below need aligned destinations. */
		if ((uintptr_t)dst[i] & (pf_dtype_size(fs->dtype) - 1))
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "feature spec: destination %p of '%s' is not %zu-byte aligned",
					    (void *)dst[i], fs->name,
					    pf_dtype_size(fs->dtype));
		f = pf_example_find(ex, fs->name);
		if ((!f || f->kind == PF_KIND_NONE) && !fs->has_default)
			return missing(fs, ex, f, err);
		ret = pf_spec_apply_one(fs, f, dst[i], err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int pf_spec_apply(const pf_spec *spec, const pf_example *ex, void *row,
		  pf_error *err)
{
	uint8_t *base = row;
	uint8_t *dst[PF_SPEC_MAX_FEATURES];
	size_t off = 0;

	pf_error_clear(err);
	/* Typed stores below need an aligned row; rows of row_bytes (a
	 * multiple of 8) laid end to end from an aligned block are. */
	if ((uintptr_t)row & 7)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "feature spec: row %p is not 8-byte aligned",
				    row);
	for (uint32_t i = 0; i < spec->n && i < PF_SPEC_MAX_FEATURES; i++) {
		const pf_feature_spec *fs = &spec->f[i];
		size_t size = pf_dtype_size(fs->dtype);
		size_t at = align_up(off, size);

		/* Alignment gaps are zeroed: a row never carries stale bytes. */
		if (at > off)
			memset(base + off, 0, at - off);
		dst[i] = base + at;
		off = at + (size_t)fs->len * size;
	}
	if (spec->row_bytes > off)
		memset(base + off, 0, spec->row_bytes - off);
	return pf_spec_apply_to(spec, ex, dst, err);
}

/* ------------------------------------------------------------------ */
/* The spec against a shard's schema                                    */
/* ------------------------------------------------------------------ */

/* Levenshtein distance of a and b (names shorter than PF_SPEC_MAX_NAME;
 * longer ones are cut there: a hint, not an answer). */
static unsigned edit_distance(const char *a, const char *b)
{
	unsigned row[PF_SPEC_MAX_NAME + 1];
	size_t na = strnlen(a, PF_SPEC_MAX_NAME), nb = strnlen(b, PF_SPEC_MAX_NAME);

	for (size_t j = 0; j <= nb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= na; i++) {
		unsigned diag = row[0];

		row[0] = (unsigned)i;
		for (size_t j = 1; j <= nb; j++) {
			unsigned up = row[j];
			unsigned best = diag + (a[i - 1] != b[j - 1]);

			best = up + 1 < best ? up + 1 : best;
			best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
			diag = up;
			row[j] = best;
		}
	}
	return row[nb];
}

int pf_spec_check_schema(const pf_spec *spec, const pf_feature_schema *schema, size_t n,
			 uint64_t records, const char *path, const char *whose, pf_error *err)
{
	/* No schema (raw records, an empty shard): nothing to check against. */
	if (!n || !records)
		return 0;
	for (uint32_t i = 0; i < spec->n && i < PF_SPEC_MAX_FEATURES; i++) {
		const pf_feature_spec *fs = &spec->f[i];
		const pf_feature_schema *found = NULL, *near = NULL;
		unsigned near_d = UINT32_MAX;
		uint64_t with = 0;
		int ret;

		if (fs->has_default)
			continue;
		for (size_t k = 0; k < n; k++) {
			const pf_feature_schema *s = &schema[k];
			unsigned d;

			/* A SequenceExample's feature_lists are not features. */
			if (s->is_list)
				continue;
			if (!strcmp(s->name, fs->name)) {
				found = s;
				break;
			}
			d = edit_distance(s->name, fs->name);
			if (d < near_d) {
				near_d = d;
				near = s;
			}
		}
		if (found) {
			with = found->records_present - found->records_unset;
			if (with >= records)
				continue;
			ret = pf_error_set(err, -ENOMSG, PF_OFFSET_NONE, 0,
					   "feature spec: '%s' is missing from %llu of the "
					   "%llu records (by the %s index): give it "
					   ":default=V to make it optional", fs->name,
					   (unsigned long long)(records - with),
					   (unsigned long long)records, whose);
		} else {
			const char *names[16];
			uint32_t lens[16];
			size_t m = 0, total = 0;
			char list[112], hint[PF_SPEC_MAX_NAME + 24] = "";

			for (size_t k = 0; k < n; k++) {
				const pf_feature_schema *s = &schema[k];

				if (s->is_list)
					continue;
				total++;
				if (m < 16) {
					names[m] = s->name;
					lens[m++] = (uint32_t)strlen(s->name);
				}
			}
			list_names(list, sizeof(list), names, lens, m, total);
			/* A near miss: at most a third of the name changed. */
			if (near && near_d * 3 <= strlen(fs->name) + 2)
				snprintf(hint, sizeof(hint), "did you mean '%s'? ",
					 near->name);
			ret = pf_error_set(err, -ENOMSG, PF_OFFSET_NONE, 0,
					   "feature spec: '%s' is not in the %s schema "
					   "(%s); %sa feature with :default=V may be absent",
					   fs->name, whose, list, hint);
		}
		pf_error_set_file(err, path);
		return ret;
	}
	return 0;
}
