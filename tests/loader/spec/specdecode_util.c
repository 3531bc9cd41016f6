/* SPDX-License-Identifier: Apache-2.0 */
/* The pf_spec_decode() tests' shared helpers (specdecode_util.h). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "specdecode_util.h"

unsigned sd_compared, sd_failures_seen;

uint64_t sd_next(sd_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

pf_spec *sd_spec_of(const char *text)
{
	pf_spec *s = calloc(1, sizeof(*s));
	pf_error err;

	cr_assert_not_null(s);
	pf_error_clear(&err);
	cr_assert_eq(pf_spec_parse(s, text, &err), 0, "'%s': %s", text, err.msg);
	return s;
}

/* One decode both ways on the current path. */
static int compare_once(const pf_spec *spec, const uint8_t *rec, size_t len,
			const char *what)
{
	uint8_t *fast[PF_SPEC_MAX_FEATURES], *slow[PF_SPEC_MAX_FEATURES];
	pf_arena fa, sa;
	pf_error ferr, serr;
	pf_example ex;
	int fret, sret;

	cr_assert_eq(pf_arena_init(&fa, PF_ARENA_BYTES_FOR(len)), 0);
	cr_assert_eq(pf_arena_init(&sa, PF_ARENA_BYTES_FOR(len)), 0);
	fa.used = 5;	/* a caller's arena need not be empty or aligned */
	for (uint32_t i = 0; i < spec->n; i++) {
		size_t size = (size_t)spec->f[i].len * pf_dtype_size(spec->f[i].dtype);

		fast[i] = malloc(size);
		slow[i] = malloc(size);
		cr_assert(fast[i] && slow[i]);
		memset(fast[i], 0xa5, size);
		memset(slow[i], 0xa5, size);
	}
	pf_error_clear(&ferr);
	pf_error_clear(&serr);
	fret = pf_spec_decode(spec, rec, len, &fa, fast, &ferr);
	sret = pf_example_decode(rec, len, &sa, &ex, &serr);
	if (!sret)
		sret = pf_spec_apply_to(spec, &ex, slow, &serr);
	cr_assert_eq(fa.used, 5, "%s: arena not given back", what);
	cr_assert_eq(fret, sret, "%s [%s]: pf_spec_decode %d (%s), slow path %d (%s)",
		     what, pf_varint_impl(), fret, ferr.msg, sret, serr.msg);
	cr_assert_eq(ferr.code, serr.code, "%s", what);
	cr_assert_eq(ferr.offset, serr.offset, "%s", what);
	cr_assert_str_eq(ferr.msg, serr.msg, "%s", what);
	for (uint32_t i = 0; i < spec->n; i++) {
		size_t size = (size_t)spec->f[i].len * pf_dtype_size(spec->f[i].dtype);

		if (!fret)
			cr_assert(!memcmp(fast[i], slow[i], size),
				  "%s [%s]: feature '%s' differs", what,
				  pf_varint_impl(), spec->f[i].name);
		free(fast[i]);
		free(slow[i]);
	}
	pf_arena_release(&fa);
	pf_arena_release(&sa);
	sd_compared++;
	sd_failures_seen += fret != 0;
	return fret;
}

/* On every path. */
int sd_compare(const pf_spec *spec, const uint8_t *rec, size_t len, const char *what)
{
	int first = 1, ret = 0;

	for (const pf_varint_ops *p = pf_varint_paths; p->name; p++) {
		int r;

		if (!p->supported())
			continue;
		cr_assert_eq(pf_varint_set_impl(p->name), 0);
		r = compare_once(spec, rec, len, what);
		if (first)
			ret = r;
		first = 0;
	}
	return ret;
}

sd_buf *sd_buf_new(void)
{
	sd_buf *b = calloc(1, sizeof(*b));

	cr_assert_not_null(b);
	return b;
}

/* An encoded Example of the given features (packed, as TensorFlow). */
sd_buf *sd_encode(const pf_feature *f, uint32_t n)
{
	sd_buf *b = sd_buf_new();
	int64_t len = pf_example_encode(f, n, b->b, sizeof(b->b));

	cr_assert_geq(len, 0);
	b->n = (size_t)len;
	return b;
}
