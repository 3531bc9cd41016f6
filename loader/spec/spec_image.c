// SPDX-License-Identifier: Apache-2.0
/* The feature spec's image type: `name:image[H,W]` and its options, read
 * into a pf_image_spec (transform/).  spec_text.c calls it when a
 * feature's dtype is `image`; the rest of the grammar is spec_text.c's.
 *
 *   image   := 'image[' H ',' W ']' (':' iopt)*
 *   iopt    := 'train' | 'eval' | 'resize'
 *            | 'channels=' ('3' | '1') | 'layout=' ('nhwc' | 'nchw')
 *            | 'dtype=' ('uint8' | 'float32' | 'bfloat16')
 *            | 'mean=' num (':' num ':' num)? | 'std=' num (':' num ':' num)?
 *            | 'scale=' num ':' num | 'ratio=' num ':' num | 'flip=' ('0' | '1')
 *            | 'max_pixels=' digits
 *
 * The augment defaults to resize; scale, ratio and flip are train's, mean
 * and std a float dtype's: given elsewhere they are errors, not ignored.
 * The numbers are read by strtod in the C locale (spec_text.c holds it). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_internal.h"

#define IMAGE_OPTIONS "train, eval, resize, channels, layout, dtype, mean, std, scale, " \
		      "ratio, flip, max_pixels"

typedef struct icur {
	const char *s;
	size_t pos;
	char *why;
	size_t cap;
	size_t *at;
} icur;

__attribute__((format(printf, 3, 4)))
static int ifail(icur *c, size_t at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, c->cap, fmt, ap);
	va_end(ap);
	*c->at = at;
	return -EINVAL;
}

/* A token up to the next ':', ',' or ']' (or '=' when stop_eq). */
static size_t token(const icur *c, size_t from, bool stop_eq)
{
	size_t i = from;

	while (c->s[i] && c->s[i] != ':' && c->s[i] != ',' && c->s[i] != ']' &&
	       !(stop_eq && c->s[i] == '='))
		i++;
	return i - from;
}

static bool is(const icur *c, size_t at, size_t n, const char *word)
{
	return strlen(word) == n && !memcmp(c->s + at, word, n);
}

static int number(icur *c, const char *what, double *out)
{
	size_t n = token(c, c->pos, false);
	char buf[65], *end;

	if (!n || n > 64)
		return ifail(c, c->pos, "%s needs a number", what);
	memcpy(buf, c->s + c->pos, n);
	buf[n] = '\0';
	*out = strtod(buf, &end);
	if (end != buf + n || !isfinite(*out))
		return ifail(c, c->pos, "bad number '%s' for %s", buf, what);
	c->pos += n;
	return 0;
}

static int side(icur *c, const char *what, uint32_t *out)
{
	size_t start = c->pos;
	uint64_t v = 0;

	while (c->s[c->pos] >= '0' && c->s[c->pos] <= '9') {
		v = v * 10 + (uint64_t)(c->s[c->pos] - '0');
		if (v > PF_IMAGE_MAX_SIDE)
			v = PF_IMAGE_MAX_SIDE + 1;
		c->pos++;
	}
	if (c->pos == start || v < 1 || v > PF_IMAGE_MAX_SIDE)
		return ifail(c, start, "image %s must be 1..%u (image[H,W])", what,
			     PF_IMAGE_MAX_SIDE);
	*out = (uint32_t)v;
	return 0;
}

/* n numbers separated by ':' (n 2), or 1 or 3 of them (n 3). */
static int numbers(icur *c, const char *what, unsigned n, double *v, unsigned *got)
{
	unsigned k = 0;
	int ret;

	for (;;) {
		ret = number(c, what, &v[k++]);
		if (ret)
			return ret;
		if (k == n || c->s[c->pos] != ':')
			break;
		/* A ':' then a name is the next option, not a value. */
		if (!((c->s[c->pos + 1] >= '0' && c->s[c->pos + 1] <= '9') ||
		      c->s[c->pos + 1] == '.' || c->s[c->pos + 1] == '-' ||
		      c->s[c->pos + 1] == '+'))
			break;
		c->pos++;
	}
	*got = k;
	if (n == 2 && k != 2)
		return ifail(c, c->pos, "%s needs two values (%s=A:B)", what, what);
	if (n == 3 && k == 2)
		return ifail(c, c->pos, "%s needs 1 or 3 values (%s=R:G:B)", what, what);
	return 0;
}

enum iopt {
	I_AUGMENT = 1u << 0, I_CHANNELS = 1u << 1, I_LAYOUT = 1u << 2, I_DTYPE = 1u << 3,
	I_MEAN = 1u << 4, I_STD = 1u << 5, I_SCALE = 1u << 6, I_RATIO = 1u << 7,
	I_FLIP = 1u << 8, I_MAXPX = 1u << 9,
};

static int option(icur *c, pf_image_spec *sp, unsigned *seen, size_t *train_only)
{
	static const struct { const char *name; enum iopt opt; } opts[] = {
		{ "train", I_AUGMENT }, { "eval", I_AUGMENT }, { "resize", I_AUGMENT },
		{ "channels", I_CHANNELS }, { "layout", I_LAYOUT }, { "dtype", I_DTYPE },
		{ "mean", I_MEAN }, { "std", I_STD }, { "scale", I_SCALE },
		{ "ratio", I_RATIO }, { "flip", I_FLIP }, { "max_pixels", I_MAXPX },
	};
	size_t start = c->pos, n = token(c, start, true), vn;
	enum iopt opt = 0;
	double v[3];
	unsigned got;
	int ret;

	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if (is(c, start, n, opts[i].name))
			opt = opts[i].opt;
	if (!opt)
		return ifail(c, start, "unknown image option '%.*s' (" IMAGE_OPTIONS ")",
			     (int)(n > 40 ? 40 : n), c->s + start);
	if (*seen & opt)
		return ifail(c, start, "image option '%.*s' given twice", (int)n, c->s + start);
	*seen |= opt;
	c->pos += n;
	if (opt == I_AUGMENT) {
		sp->augment = is(c, start, n, "train") ? PF_AUGMENT_TRAIN
			    : is(c, start, n, "eval") ? PF_AUGMENT_EVAL : PF_AUGMENT_RESIZE;
		if (c->s[c->pos] == '=')
			return ifail(c, c->pos, "'%.*s' takes no value", (int)n, c->s + start);
		return 0;
	}
	if (c->s[c->pos] != '=')
		return ifail(c, c->pos, "image option '%.*s' needs a value", (int)n,
			     c->s + start);
	c->pos++;
	vn = token(c, c->pos, false);
	switch (opt) {
	case I_CHANNELS:
		if (!is(c, c->pos, vn, "3") && !is(c, c->pos, vn, "1"))
			return ifail(c, c->pos, "channels must be 3 or 1");
		sp->channels = c->s[c->pos] == '3' ? 3 : 1;
		c->pos += vn;
		return 0;
	case I_LAYOUT:
		if (!is(c, c->pos, vn, "nhwc") && !is(c, c->pos, vn, "nchw"))
			return ifail(c, c->pos, "layout must be nhwc or nchw");
		sp->nchw = is(c, c->pos, vn, "nchw");
		c->pos += vn;
		return 0;
	case I_DTYPE:
		if (is(c, c->pos, vn, "uint8"))
			sp->dtype = PF_IMAGE_UINT8;
		else if (is(c, c->pos, vn, "float32"))
			sp->dtype = PF_IMAGE_FLOAT32;
		else if (is(c, c->pos, vn, "bfloat16"))
			sp->dtype = PF_IMAGE_BFLOAT16;
		else
			return ifail(c, c->pos, "image dtype must be uint8, float32 or bfloat16");
		c->pos += vn;
		return 0;
	case I_MEAN:
	case I_STD:
		ret = numbers(c, opt == I_MEAN ? "mean" : "std", 3, v, &got);
		if (ret)
			return ret;
		for (int k = 0; k < 3; k++)
			(opt == I_MEAN ? sp->mean : sp->std)[k] = (float)v[got == 3 ? k : 0];
		return 0;
	case I_SCALE:
	case I_RATIO:
		*train_only = start;
		ret = numbers(c, opt == I_SCALE ? "scale" : "ratio", 2, v, &got);
		if (ret)
			return ret;
		if (opt == I_SCALE) {
			sp->scale_lo = v[0];
			sp->scale_hi = v[1];
		} else {
			sp->ratio_lo = v[0];
			sp->ratio_hi = v[1];
		}
		return 0;
	case I_FLIP:
		*train_only = start;
		if (!is(c, c->pos, vn, "0") && !is(c, c->pos, vn, "1"))
			return ifail(c, c->pos, "flip must be 0 or 1");
		sp->flip = c->s[c->pos] == '1';
		c->pos += vn;
		return 0;
	case I_MAXPX: {
		char *end;
		unsigned long long px;

		if (!vn || !(c->s[c->pos] >= '0' && c->s[c->pos] <= '9'))
			return ifail(c, c->pos, "max_pixels needs a whole number");
		errno = 0;
		px = strtoull(c->s + c->pos, &end, 10);
		if (errno || (size_t)(end - (c->s + c->pos)) != vn || px < 1)
			return ifail(c, c->pos, "max_pixels needs a whole number >= 1");
		sp->max_pixels = px;
		c->pos += vn;
		return 0;
	}
	default:
		return -EINVAL;
	}
}

int pf_spec_image_parse(const char *s, size_t *pos, pf_image_spec *out, char *why,
			size_t cap, size_t *at)
{
	icur c = { .s = s, .pos = *pos, .why = why, .cap = cap, .at = at };
	size_t train_only = SIZE_MAX, start;
	uint32_t h = 0, w = 0;
	unsigned seen = 0;
	pf_error err;
	int ret;

	if (s[c.pos] != '[')
		return ifail(&c, c.pos, "expected '[H,W]' after 'image'");
	c.pos++;
	ret = side(&c, "height", &h);
	if (ret)
		return ret;
	if (s[c.pos] != ',')
		return ifail(&c, c.pos, "expected ',' between the image's height and width "
			     "(image[H,W])");
	c.pos++;
	ret = side(&c, "width", &w);
	if (ret)
		return ret;
	if (s[c.pos] != ']')
		return ifail(&c, c.pos, "expected ']' after the image's width");
	c.pos++;
	pf_image_spec_init(out, h, w, PF_AUGMENT_RESIZE);
	while (s[c.pos] == ':') {
		c.pos++;
		ret = option(&c, out, &seen, &train_only);
		if (ret)
			return ret;
	}
	if (s[c.pos] && s[c.pos] != ',')
		return ifail(&c, c.pos, "unexpected '%c' after an image option", s[c.pos]);
	if (train_only != SIZE_MAX && out->augment != PF_AUGMENT_TRAIN)
		return ifail(&c, train_only, "scale, ratio and flip are train's options (this "
			     "image feature is %s)",
			     out->augment == PF_AUGMENT_EVAL ? "eval" : "resize");
	start = *pos;
	if ((seen & (I_MEAN | I_STD)) && out->dtype == PF_IMAGE_UINT8)
		return ifail(&c, start, "mean and std need dtype=float32 or dtype=bfloat16");
	ret = pf_image_spec_check(out, &err);
	if (ret)
		return ifail(&c, start, "%s", err.msg);
	if (pf_image_out_bytes(out) > PF_SPEC_IMAGE_MAX_BYTES)
		return ifail(&c, start, "an image of %zu bytes a record (at most %u)",
			     pf_image_out_bytes(out), PF_SPEC_IMAGE_MAX_BYTES);
	*pos = c.pos;
	return 0;
}

/* The tensor an image feature fills: its values per record and their
 * dtype (bytes for uint8 and for bfloat16's two bytes a value). */
void pf_spec_image_tensor(const pf_image_spec *sp, pf_feature_spec *fs)
{
	size_t values = (size_t)sp->height * sp->width * sp->channels;

	fs->dtype = sp->dtype == PF_IMAGE_FLOAT32 ? PF_DTYPE_FLOAT32 : PF_DTYPE_BYTES;
	fs->len = (uint32_t)(sp->dtype == PF_IMAGE_BFLOAT16 ? values * 2 : values);
	fs->scale = 1.0;
}

/* What pf_loader_feature_shape() says of feature i. */
int pf_spec_feature_shape(const pf_spec *spec, const pf_spec_images *images, uint32_t i,
			  uint32_t shape[3], const char **elem, uint32_t *elem_size)
{
	const pf_image_spec *im;
	const char *name;
	uint32_t size;

	if (!spec || i >= spec->n)
		return -EINVAL;
	im = pf_spec_image_of(images, i);
	if (!im) {
		shape[0] = spec->f[i].len;
		size = (uint32_t)pf_dtype_size(spec->f[i].dtype);
		name = spec->f[i].dtype == PF_DTYPE_BYTES ? "uint8"
							  : pf_dtype_name(spec->f[i].dtype);
	} else {
		shape[0] = im->nchw ? im->channels : im->height;
		shape[1] = im->nchw ? im->height : im->width;
		shape[2] = im->nchw ? im->width : im->channels;
		size = im->dtype == PF_IMAGE_FLOAT32 ? 4 : im->dtype == PF_IMAGE_BFLOAT16 ? 2 : 1;
		name = im->dtype == PF_IMAGE_FLOAT32 ? "float32"
		     : im->dtype == PF_IMAGE_BFLOAT16 ? "bfloat16" : "uint8";
	}
	if (elem)
		*elem = name;
	if (elem_size)
		*elem_size = size;
	return im ? 3 : 1;
}
