/* SPDX-License-Identifier: Apache-2.0 */
/* Preprocessing: an example's feature values into the spec's dtype and
 * length (pad, default, scale, shift, clip), for pf_spec_apply() and
 * pf_spec_apply_to() and, one feature at a time, for the fast decoder
 * (spec_fast.c, through spec_internal.h); and a spec checked against a
 * shard's or manifest's schema before any record is read.  Not here: the
 * spec's text (spec_text.c), a record's wire bytes (spec_fast.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "podfeed.h"
#include "spec_internal.h"

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

	if (__builtin_expect(d > -PF_TWO31 - 1.0 && d < PF_TWO31, 1))
		return (int32_t)x;
	if (x != x)
		return 0;
	return x > 0 ? INT32_MAX : INT32_MIN;
}

/* float to int64: the same over [-2^63, 2^63). */
static inline int64_t float_to_i64(float x)
{
	if (__builtin_expect(x >= (float)-PF_TWO63 && x < (float)PF_TWO63, 1))
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

/* A record's length of a feature: its values, or its first value's
 * bytes. */
static uint64_t value_count(const pf_feature *f)
{
	if (!f || f->kind == PF_KIND_NONE)
		return 0;
	if (f->kind == PF_KIND_BYTES)
		return f->count ? f->v.bytes[0].len : 0;
	return f->count;
}

void pf_spec_apply_made(const pf_spec *spec, uint32_t i, const pf_feature *parent,
			uint8_t *out)
{
	const pf_feature_spec *fs = &spec->f[i];

	if ((fs->role == PF_ROLE_LENGTHS || fs->role == PF_ROLE_LENGTHS_FULL) && i)
		pf_spec_store_length(&spec->f[i - 1], fs, value_count(parent), out);
	else
		memset(out, 0, (size_t)fs->len * pf_dtype_size(fs->dtype));
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
		if (fs->role != PF_ROLE_VALUES) {
			pf_spec_apply_made(spec, i, i ? pf_example_find(ex, spec->f[i - 1].name) :
						      NULL, dst[i]);
			continue;
		}
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
		size_t at = pf_spec_align(off, size);

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

		if (fs->has_default || fs->role != PF_ROLE_VALUES)
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
