/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz harness: the feature spec parser, its canonical text, and pf_spec_apply. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"

/*
 * Every input is NUL-terminated and parsed.  The harness aborts when
 *   - a failure is not -EINVAL, or its message does not start with
 *     "feature spec: byte N: " with N inside the text, or leaves a spec;
 *   - a parsed spec breaks its own invariants (names, lengths, options
 *     allowed for the dtype, layout);
 *   - the canonical text does not parse back to the very same struct, or
 *     is not a fixed point, or pf_spec_format() disagrees with itself
 *     about the length when dst is short;
 *   - pf_spec_apply() on a small fixed example fails in a way the spec
 *     does not explain, or writes outside its row (the row is malloc'd at
 *     exactly row_bytes so ASan sees it), or a NAME_lengths (:lengths)
 *     is not NAME's length in the example (a feature made from NAME,
 *     not one the example must hold).
 */

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "fuzz_spec: %s:%d: %s\n", __FILE__,  \
				__LINE__, #cond);                            \
			abort();                                             \
		}                                                            \
	} while (0)

/* The fixed example: names the seed corpus uses, one of each kind, a
 * NONE and an empty list. */
static const int64_t ids[] = { 0, 1, -1, INT64_MAX, INT64_MIN, 2147483648LL,
			       -2147483649LL, 42 };
static const float xs[] = { 0.0f, -0.0f, 1.5f, -2.5f, 3e9f, -3e9f, NAN,
			    INFINITY, -INFINITY, 1e-45f };
static const pf_bytes strs[] = { { (const uint8_t *)"hello, world", 12 },
				 { (const uint8_t *)"second", 6 } };

#define FEAT(n, k, c, field, arr)                                            \
	{ .name = n, .name_len = sizeof(n) - 1, .kind = k, .count = c,       \
	  .v.field = arr }

static pf_feature features[] = {
	FEAT("tokens", PF_KIND_INT64, 8, int64s, ids),
	FEAT("label", PF_KIND_INT64, 1, int64s, ids + 7),
	FEAT("x", PF_KIND_FLOAT, 10, floats, xs),
	FEAT("img/raw", PF_KIND_BYTES, 2, bytes, strs),
	FEAT("unset", PF_KIND_NONE, 0, int64s, NULL),
	FEAT("empty", PF_KIND_FLOAT, 0, floats, NULL),
	FEAT("a", PF_KIND_INT64, 3, int64s, ids + 2),
	FEAT("b", PF_KIND_BYTES, 1, bytes, strs + 1),
};

static const pf_example example = {
	.features = features,
	.n_features = sizeof(features) / sizeof(features[0]),
};

static void check_failure(int ret, const pf_error *err, const pf_spec *s,
			  size_t len)
{
	unsigned long long at;
	int used = 0;

	CHECK(ret == -EINVAL && err->code == -EINVAL);
	CHECK(sscanf(err->msg, "feature spec: byte %llu: %n", &at, &used) == 1);
	CHECK(used > 0 && err->msg[used]);
	CHECK(at <= len);
	CHECK(s->n == 0 && s->row_bytes == 0);
}

static void check_spec(const pf_spec *s)
{
	size_t off = 0;

	CHECK(s->n >= 1 && s->n <= PF_SPEC_MAX_FEATURES);
	for (uint32_t i = 0; i < s->n; i++) {
		const pf_feature_spec *f = &s->f[i];
		size_t size = pf_dtype_size(f->dtype), nl = strlen(f->name);

		CHECK(nl >= 1 && nl < PF_SPEC_MAX_NAME);
		for (uint32_t k = 0; k < i; k++)
			CHECK(strcmp(s->f[k].name, f->name));
		CHECK(size);
		/* [*]: no length until packing gives it one; numeric, no
		 * default (a packed feature is in every record). */
		if (f->ragged)
			CHECK(f->len == 0 && f->dtype != PF_DTYPE_BYTES && !f->has_default);
		else
			CHECK(f->len >= 1 && f->len <= (1u << 24));
		CHECK(isfinite(f->pad) && isfinite(f->scale) && isfinite(f->shift));
		if (f->dtype != PF_DTYPE_FLOAT32)
			CHECK(f->scale == 1.0 && f->shift == 0.0);
		if (f->clip) {
			CHECK(f->dtype != PF_DTYPE_BYTES);
			CHECK(f->clip_lo <= f->clip_hi);
		}
		if (f->dtype == PF_DTYPE_INT32)
			CHECK(f->pad == trunc(f->pad) && f->pad >= INT32_MIN &&
			      f->pad <= INT32_MAX);
		if (f->dtype == PF_DTYPE_BYTES)
			CHECK(f->pad == trunc(f->pad) && f->pad >= 0 && f->pad <= 255);
		off = (off + size - 1) & ~(size - 1);
		CHECK(pf_spec_offset(s, i) == off);
		off += (size_t)f->len * size;
	}
	CHECK(s->row_bytes == ((off + 7) & ~(size_t)7));
	CHECK(pf_spec_offset(s, s->n) == s->row_bytes);
}

static void round_trip(const pf_spec *s)
{
	size_t n = pf_spec_format(s, NULL, 0), n2;
	char *text = malloc(n + 1), *again = malloc(n + 1), shorter[16];
	pf_spec *t = malloc(sizeof(*t));
	pf_error err;
	int ret;

	CHECK(text && again && t);
	CHECK(pf_spec_format(s, text, n + 1) == n);
	CHECK(strlen(text) == n);
	pf_error_clear(&err);
	ret = pf_spec_parse(t, text, &err);
	if (ret) {
		fprintf(stderr, "fuzz_spec: canonical text does not parse: %s\n%s\n",
			err.msg, text);
		abort();
	}
	if (memcmp(s, t, sizeof(*s))) {
		fprintf(stderr, "fuzz_spec: canonical text parses differently:\n%s\n",
			text);
		abort();
	}
	n2 = pf_spec_format(t, again, n + 1);
	CHECK(n2 == n && !strcmp(text, again));
	/* a short dst: same length, terminated prefix */
	CHECK(pf_spec_format(s, shorter, sizeof(shorter)) == n);
	CHECK(strlen(shorter) == (n < sizeof(shorter) ? n : sizeof(shorter) - 1));
	CHECK(!strncmp(shorter, text, strlen(shorter)));
	free(text);
	free(again);
	free(t);
}

/* Each NAME_lengths the row holds: NAME's values (bytes: of its first
 * value) in the example, capped at NAME's len; 0 when it is absent. */
static void check_lengths(const pf_spec *s, const uint8_t *row)
{
	for (uint32_t i = 1; i < s->n; i++) {
		const pf_feature_spec *parent = &s->f[i - 1];
		const pf_feature *f = pf_example_find(&example, parent->name);
		uint64_t want = 0;
		int32_t got;

		if (s->f[i].role != PF_ROLE_LENGTHS)
			continue;
		CHECK(s->f[i].dtype == PF_DTYPE_INT32 && s->f[i].len == 1);
		if (f && f->kind == PF_KIND_BYTES)
			want = f->count ? f->v.bytes[0].len : 0;
		else if (f && f->kind != PF_KIND_NONE)
			want = f->count;
		if (want > parent->len)
			want = parent->len;
		memcpy(&got, row + pf_spec_offset(s, i), sizeof(got));
		CHECK((uint64_t)got == want);
	}
}

static void apply(const pf_spec *s)
{
	bool missing = false, mismatch = false;
	pf_error err;
	uint8_t *row;
	int ret;

	/* Rows of a long spec can reach gigabytes (64 x 2^24 x 8): the
	 * harness only applies specs of modest rows. */
	if (s->row_bytes > (1u << 20))
		return;
	row = malloc(s->row_bytes);
	CHECK(row);
	for (uint32_t i = 0; i < s->n && !missing && !mismatch; i++) {
		const pf_feature *f = pf_example_find(&example, s->f[i].name);
		bool is_bytes = s->f[i].dtype == PF_DTYPE_BYTES;

		/* NAME_lengths (:lengths) is made from NAME, f[i - 1], which
		 * this loop has judged: the record need not hold it (issue
		 * 40, corpus/spec/finding-lengths_is_made). */
		if (s->f[i].role != PF_ROLE_VALUES)
			continue;
		if (!f || f->kind == PF_KIND_NONE)
			missing = !s->f[i].has_default;
		else
			mismatch = is_bytes != (f->kind == PF_KIND_BYTES);
	}
	pf_error_clear(&err);
	ret = pf_spec_apply(s, &example, row, &err);
	if (missing) {
		CHECK(ret == -ENOMSG && err.code == -ENOMSG);
		CHECK(strstr(err.msg, "feature '") && strstr(err.msg, "the record has: "));
	} else if (mismatch) {
		CHECK(ret == -EBADMSG && err.code == -EBADMSG);
		CHECK(strstr(err.msg, "feature '"));
	} else {
		CHECK(ret == 0 && err.code == 0);
		check_lengths(s, row);
		/* applying is a pure function of spec and example */
		uint8_t *again = malloc(s->row_bytes);

		CHECK(again);
		CHECK(pf_spec_apply(s, &example, again, &err) == 0);
		CHECK(!memcmp(row, again, s->row_bytes));
		free(again);
	}
	free(row);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	pf_spec *s = malloc(sizeof(*s));
	pf_error err;
	int ret;

	CHECK(text && s);
	if (size)
		memcpy(text, data, size);
	text[size] = '\0';
	pf_error_clear(&err);
	ret = pf_spec_parse(s, text, &err);
	if (ret) {
		check_failure(ret, &err, s, strlen(text));
	} else {
		check_spec(s);
		round_trip(s);
		apply(s);
	}
	free(text);
	free(s);
	return 0;
}
