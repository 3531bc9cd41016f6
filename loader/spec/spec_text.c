/* SPDX-License-Identifier: Apache-2.0 */
/* The feature spec as text: parse it (the grammar below) into a pf_spec
 * and write one back canonically; dtype sizes and names, and the row
 * layout (pf_spec_offset()).  Not here: what a spec does to a record
 * (spec_apply.c, spec_fast.c). */
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
 *   len     := [0-9]+, value 1..2^24 | '*' (ragged: numeric dtypes only)
 *   option  := 'pad=' num | 'default=' num | 'scale=' num | 'shift=' num
 *            | 'clip=' num ':' num | 'required' | 'lengths'
 *   num     := [0-9+-.eE]+ read by strtod in the C locale, finite
 *
 * Each option at most once per feature.  scale and shift are float32 only;
 * clip is for every dtype but bytes.  'required' is a no-op kept for older
 * specs: every feature without a default is required.  For integer dtypes
 * pad, default and clip bounds must be integers inside the dtype (bytes: pad 0..255) and, since
 * pf_feature_spec holds them as doubles, exactly representable: an int64
 * pad written as a decimal integer above 2^53 that a double cannot hold
 * is refused rather than silently rounded.  'lengths' (a [len] feature's
 * true lengths) adds the feature NAME_lengths right after it, role
 * PF_ROLE_LENGTHS; a ragged feature takes neither 'lengths' (packing
 * gives its segments) nor 'default' (a packed record has no default
 * length).
 */

#define SPEC_MAX_LEN (1u << 24)
#define SPEC_NAME_MAX (PF_SPEC_MAX_NAME - 1)
#define SPEC_NUM_MAX 64		/* longest number token accepted */
#define DTYPE_LIST "int32, int64, float32, bytes, image"
#define OPTION_LIST "pad, default, scale, shift, clip, required, lengths"
#define LENGTHS_SUFFIX "_lengths"

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
	OPT_LENGTHS = 1u << 6,
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
	{ "lengths", OPT_LENGTHS },
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
			if (v >= PF_TWO63 || (long long)v != ll)
				return fail(c, start,
					    "%s=%s cannot be held exactly (values above 2^53 must be exact doubles)",
					    what, buf);
		}
		if (fs->dtype == PF_DTYPE_INT32 ? v < -PF_TWO31 || v >= PF_TWO31 :
		    v < -PF_TWO63 || v >= PF_TWO63)
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

	if (opt == OPT_REQUIRED || opt == OPT_LENGTHS) {
		/* Every feature without a default is required: nothing to set;
		 * lengths: parse() adds the feature. */
		if (c->s[c->pos] == '=')
			return fail(c, c->pos, "option '%s' takes no value", oname);
		if (opt == OPT_LENGTHS && fs->ragged)
			return fail(c, start,
				    "option 'lengths' is for [len] features; a ragged "
				    "feature's records are told apart by its segment ids "
				    "(feature '%s')", fs->name);
		return 0;
	}
	if (opt == OPT_DEFAULT && fs->ragged)
		return fail(c, start,
			    "option 'default' does not apply to a ragged feature (feature "
			    "'%s' is [*]): a packed feature must be in every record",
			    fs->name);
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

/* An image feature (spec_image.c) from the '[' after `image`. */
static int parse_image(cursor *c, pf_feature_spec *fs, pf_image_spec *image)
{
	char why[224];
	size_t at = c->pos;
	int ret = pf_spec_image_parse(c->s, &c->pos, image, why, sizeof(why), &at);

	if (ret < 0)
		return fail(c, at, "feature '%s': %s", fs->name, why);
	pf_spec_image_tensor(image, fs);
	return 0;
}

static int parse_feature(cursor *c, pf_feature_spec *fs, pf_image_spec *image, bool *is_image,
			 bool *lengths)
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
	if (token_is(tok, n, "image")) {
		*is_image = true;
		return parse_image(c, fs, image);
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
	 * of digits cannot overflow.  [*]: ragged. */
	len_start = ++c->pos;
	if (c->s[c->pos] == '*') {
		if (fs->dtype == PF_DTYPE_BYTES)
			return fail(c, c->pos,
				    "a ragged feature ([*]) is int32, int64 or float32 "
				    "(feature '%s' is bytes)", fs->name);
		c->pos++;
		if (c->s[c->pos] != ']')
			return fail(c, c->pos, "expected ']' after '*'");
		fs->ragged = true;
		c->pos++;
		goto options;
	}
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

options:
	fs->scale = 1.0;
	while (c->s[c->pos] == ':') {
		c->pos++;
		ret = parse_option(c, fs, &seen);
		if (ret < 0)
			return ret;
	}
	*lengths = seen & OPT_LENGTHS;
	if (c->s[c->pos] && c->s[c->pos] != ',')
		return unexpected(c, seen ? "after an option" : "after ']'");
	return 0;
}

/* Add fs (its name set) as the spec's next feature, unless its name is
 * taken. */
static int add_feature(cursor *c, pf_spec *spec, size_t start)
{
	const pf_feature_spec *fs = &spec->f[spec->n];

	for (uint32_t i = 0; i < spec->n; i++)
		if (!strcmp(spec->f[i].name, fs->name))
			return fail(c, start, "duplicate feature '%s' (also feature %u%s)",
				    fs->name, i,
				    spec->f[i].role == PF_ROLE_LENGTHS ? ", made by :lengths" : "");
	spec->n++;
	return 0;
}

int pf_spec_add_made(pf_spec *spec, uint32_t parent, pf_feature_role role,
		     const char *suffix, pf_dtype dtype, uint32_t len, pf_error *err)
{
	pf_feature_spec *fs;
	char name[PF_SPEC_MAX_NAME];

	memcpy(name, spec->f[parent].name, sizeof(name));

	if (spec->n == PF_SPEC_MAX_FEATURES)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "feature spec: more than %u features with '%s%s'",
				    PF_SPEC_MAX_FEATURES, name, suffix);
	if (strlen(name) + strlen(suffix) > SPEC_NAME_MAX)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "feature spec: '%s%s' is longer than %u bytes", name,
				    suffix, SPEC_NAME_MAX);
	/* Made features follow their parent: the ones after it move up. */
	memmove(&spec->f[parent + 2], &spec->f[parent + 1],
		(spec->n - parent - 1) * sizeof(spec->f[0]));
	fs = &spec->f[parent + 1];
	memset(fs, 0, sizeof(*fs));
	snprintf(fs->name, sizeof(fs->name), "%s%s", name, suffix);
	fs->dtype = dtype;
	fs->len = len;
	fs->scale = 1.0;
	fs->role = (uint8_t)role;
	for (uint32_t i = 0; i < spec->n + 1; i++)
		if (i != parent + 1 && !strcmp(spec->f[i].name, fs->name)) {
			memmove(&spec->f[parent + 1], &spec->f[parent + 2],
				(spec->n - parent - 1) * sizeof(spec->f[0]));
			memset(&spec->f[spec->n], 0, sizeof(spec->f[0]));
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "feature spec: '%s' would be made for '%s', but "
					    "the spec has a feature of that name", fs->name, name);
		}
	spec->n++;
	pf_spec_layout(spec);
	return 0;
}

void pf_spec_layout(pf_spec *spec)
{
	size_t off = 0;

	for (uint32_t i = 0; i < spec->n && i < PF_SPEC_MAX_FEATURES; i++) {
		off = pf_spec_align(off, pf_dtype_size(spec->f[i].dtype));
		off += (size_t)spec->f[i].len * pf_dtype_size(spec->f[i].dtype);
	}
	spec->row_bytes = pf_spec_align(off, 8);
}

/* Every feature of text into spec, the row laid out as they come: each
 * feature at the next multiple of its dtype size, the row rounded up to 8
 * so rows can follow each other aligned. */
static int parse(pf_spec *spec, pf_spec_images *images, const char *text, pf_error *err)
{
	cursor c = { .s = text, .pos = 0, .err = err };
	int ret;

	for (;;) {
		pf_feature_spec *fs;
		pf_image_spec image;
		bool is_image = false;
		size_t start = c.pos;
		bool lengths = false;

		if (spec->n == PF_SPEC_MAX_FEATURES)
			return fail(&c, start, "more than %u features",
				    PF_SPEC_MAX_FEATURES);
		fs = &spec->f[spec->n];
		ret = parse_feature(&c, fs, &image, &is_image, &lengths);
		if (ret < 0)
			return ret;
		if (is_image && images) {
			images->feature[images->n] = spec->n;
			images->image[images->n++] = image;
		}
		ret = add_feature(&c, spec, start);
		if (ret < 0)
			return ret;
		if (lengths) {
			pf_feature_spec *ls;

			if (spec->n == PF_SPEC_MAX_FEATURES)
				return fail(&c, start, "more than %u features (with '%s"
					    LENGTHS_SUFFIX "')", PF_SPEC_MAX_FEATURES, fs->name);
			if (strlen(fs->name) + strlen(LENGTHS_SUFFIX) > SPEC_NAME_MAX)
				return fail(&c, start, "feature name '%s" LENGTHS_SUFFIX
					    "' (from :lengths) longer than %u bytes",
					    fs->name, SPEC_NAME_MAX);
			ls = &spec->f[spec->n];
			memcpy(ls->name, fs->name, strlen(fs->name));
			memcpy(ls->name + strlen(fs->name), LENGTHS_SUFFIX, sizeof(LENGTHS_SUFFIX));
			ls->dtype = PF_DTYPE_INT32;
			ls->len = 1;
			ls->scale = 1.0;
			ls->role = PF_ROLE_LENGTHS;
			ret = add_feature(&c, spec, start);
			if (ret < 0)
				return ret;
		}
		if (!text[c.pos])
			break;
		c.pos++;	/* ',' */
	}
	pf_spec_layout(spec);
	return 0;
}

int pf_spec_parse(pf_spec *spec, const char *text, pf_error *err)
{
	return pf_spec_parse_images(spec, NULL, text, err);
}

int pf_spec_parse_images(pf_spec *spec, pf_spec_images *images, const char *text,
			 pf_error *err)
{
	locale_t old;
	int ret;

	pf_error_clear(err);
	/* Zero everything, padding and name tails included, so two parses
	 * of equal text compare equal with memcmp(). */
	memset(spec, 0, sizeof(*spec));
	if (images)
		memset(images, 0, sizeof(*images));
	if (!text)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "feature spec: no spec given");
	old = c_locale_enter();
	ret = parse(spec, images, text, err);
	c_locale_leave(old);
	if (ret < 0) {
		memset(spec, 0, sizeof(*spec));
		if (images)
			memset(images, 0, sizeof(*images));
	}
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

		/* Made features come from their parent's text. */
		if (fs->role != PF_ROLE_VALUES)
			continue;
		if (fs->ragged)
			put(&o, "%s%.*s:%s[*]", o.n ? "," : "", (int)SPEC_NAME_MAX,
			    fs->name, pf_dtype_name(fs->dtype));
		else
			put(&o, "%s%.*s:%s[%u]", o.n ? "," : "", (int)SPEC_NAME_MAX,
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
		if (i + 1 < spec->n && spec->f[i + 1].role == PF_ROLE_LENGTHS)
			put(&o, ":lengths");
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

		off = pf_spec_align(off, size);
		if (k < i)
			off += (size_t)spec->f[k].len * size;
	}
	return off;
}

