/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz harness: the fast Example decoder against protobuf-c, as Example and SequenceExample. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"
#include "pf_formats.h"

/*
 * Every input is decoded four ways: {Example, SequenceExample} x {fast,
 * protobuf-c}.  The harness aborts when
 *   - the two paths disagree on acceptance, or on any name, kind, count or
 *     value (floats compared bit for bit, bytes byte for byte);
 *   - the fast path wants more than PF_ARENA_BYTES_FOR(len) of arena (its
 *     arena is exactly that big, starting at a misaligned offset, and
 *     malloc'd on its own so ASan sees any write past it);
 *   - a failing decode leaves anything in the arena, or an error offset
 *     outside the record;
 *   - the fast path does not report -ENOBUFS, cleanly, with one byte less
 *     than it used.
 */

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "fuzz_example: %s:%d: %s\n",        \
				__FILE__, __LINE__, #cond);                  \
			abort();                                             \
		}                                                            \
	} while (0)

static void same_feature(const pf_feature *a, const pf_feature *b)
{
	CHECK(a->name_len == b->name_len);
	CHECK(!a->name_len || !memcmp(a->name, b->name, a->name_len));
	CHECK(a->kind == b->kind);
	CHECK(a->count == b->count);
	if (!a->count)
		return;
	switch (a->kind) {
	case PF_KIND_BYTES:
		for (uint32_t i = 0; i < a->count; i++) {
			CHECK(a->v.bytes[i].len == b->v.bytes[i].len);
			CHECK(!a->v.bytes[i].len ||
			      !memcmp(a->v.bytes[i].data, b->v.bytes[i].data,
				      a->v.bytes[i].len));
		}
		break;
	case PF_KIND_FLOAT:
		CHECK(!memcmp(a->v.floats, b->v.floats, a->count * sizeof(float)));
		break;
	case PF_KIND_INT64:
		CHECK(!memcmp(a->v.int64s, b->v.int64s, a->count * sizeof(int64_t)));
		break;
	default:
		CHECK(!"a NONE feature with values");
	}
}

static void same_example(const pf_example *a, const pf_example *b)
{
	CHECK(a->n_features == b->n_features);
	for (uint32_t i = 0; i < a->n_features; i++)
		same_feature(&a->features[i], &b->features[i]);
	CHECK(a->n_lists == b->n_lists);
	for (uint32_t i = 0; i < a->n_lists; i++) {
		const pf_feature_list *x = &a->lists[i], *y = &b->lists[i];

		CHECK(x->name_len == y->name_len);
		CHECK(!x->name_len || !memcmp(x->name, y->name, x->name_len));
		CHECK(x->steps == y->steps);
		for (uint32_t k = 0; k < x->steps; k++)
			same_feature(&x->step[k], &y->step[k]);
	}
}

typedef int (*decode_fn)(const void *, size_t, pf_arena *, pf_example *,
			 pf_error *);

static void one_way(const uint8_t *data, size_t size, decode_fn fast,
		    decode_fn ref)
{
	const size_t skew = 3;	/* start misaligned: alignment is charged too */
	size_t bound = skew + PF_ARENA_BYTES_FOR(size);
	pf_arena fa = { 0 }, ra = { 0 }, small;
	pf_example fe, re, se;
	pf_error ferr, rerr, serr;
	int fret, rret, sret;
	size_t used;

	pf_error_clear(&ferr);
	pf_error_clear(&rerr);
	CHECK(!pf_arena_init(&fa, bound));
	CHECK(!pf_arena_init(&ra, 64 * size + 4096));
	fa.used = skew;
	fret = fast(data, size, &fa, &fe, &ferr);
	rret = ref(data, size, &ra, &re, &rerr);
	CHECK(fret != -ENOBUFS);	/* the bound is a promise */
	CHECK(rret != -ENOBUFS && rret != -ENOMEM);
	if ((fret == 0) != (rret == 0)) {
		fprintf(stderr, "fuzz_example: fast %d (%s), protobuf-c %d (%s)\n",
			fret, ferr.msg, rret, rerr.msg);
		abort();
	}
	if (fret) {
		CHECK(fret == -EBADMSG && rret == -EBADMSG);
		CHECK(fa.used == skew);
		CHECK(ferr.code == fret && ferr.offset <= size);
		CHECK(!fe.n_features && !fe.n_lists);
		goto out;
	}
	same_example(&fe, &re);
	used = fa.used;
	/* One byte short: -ENOBUFS, and the arena as it was. */
	if (used > skew) {
		small = fa;
		small.cap = used - 1;
		small.used = skew;
		pf_error_clear(&serr);
		sret = fast(data, size, &small, &se, &serr);
		CHECK(sret == -ENOBUFS && serr.code == -ENOBUFS);
		CHECK(small.used == skew);
	}
out:
	pf_arena_release(&fa);
	pf_arena_release(&ra);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly size bytes: reads past the record are caught. */
	uint8_t *rec = malloc(size ? size : 1);

	CHECK(rec);
	if (size)
		memcpy(rec, data, size);
	one_way(rec, size, pf_example_decode, pf_example_decode_ref);
	one_way(rec, size, pf_sequence_example_decode,
		pf_sequence_example_decode_ref);
	free(rec);
	return 0;
}
