/* SPDX-License-Identifier: Apache-2.0 */
/* tf.train.Example tests' helpers (tests/formats/example_util.c): a wire-format
 * builder, the fast decoder checked against protobuf-c's, and
 * expectations, shared by test_formats_example and
 * test_formats_example_fixtures. */
#ifndef PF_EXAMPLE_UTIL_H
#define PF_EXAMPLE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats_internal.h"
#include "pf_formats.h"

/*
 * An assertion that costs nothing when it holds: the suite runs with
 * --full-stats, where every cr_assert is a message to the runner, and the
 * fixture and truncation tests check millions of values.
 */
#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond))                                                 \
			cr_assert_fail("%s:%d: %s", __FILE__, __LINE__, #cond); \
	} while (0)

typedef struct wire {
	uint8_t *d;
	size_t n, cap;
} wire;

/* decode_both()'s arenas, the fast path's error, and the wire its output
 * points into (freed by the suites' fini, arenas_fini()). */
extern pf_arena fast_arena, ref_arena;
extern pf_error fast_err;
extern wire *last_wire;

/* The wire builder: each appends to w and returns it. */
wire *w_new(void);
void w_free(wire *w);
wire *w_bytes(wire *w, const char *hex);	/* "0a 00 ..." */
wire *w_raw(wire *w, const void *p, size_t n);
wire *w_varint(wire *w, uint64_t v);
wire *w_tag(wire *w, uint32_t field, unsigned wt);
wire *w_ld(wire *w, uint32_t field, wire *body);
wire *w_str(wire *w, uint32_t field, const void *s, size_t n);
wire *w_float(wire *w, float f);
wire *feat_int64(int n, ...);
wire *feat_float(int n, ...);
wire *feat_bytes(int n, ...);
wire *w_entry(wire *w, const char *key, wire *value);
wire *example(const char *key, ...);
/* The fast decoder against protobuf-c's: decode_both() decodes rec both
 * ways, asserts they agree and fit PF_ARENA_BYTES_FOR(len), and returns
 * the fast one's result; decode_wire() the same of a built wire (kept
 * alive in last_wire); reject() asserts a refusal naming its byte. */
void same_feature(const pf_feature *a, const pf_feature *b);
void same_example(const pf_example *a, const pf_example *b);
void arenas_fini(void);
int decode_both(const void *rec, size_t len, bool seq, pf_example *ex);
int decode_wire(wire *w, bool seq, pf_example *ex);
void reject(wire *w, bool seq);
const pf_feature *find(const pf_example *ex, const char *name);
void expect_int64(const pf_feature *f, uint32_t n, const int64_t *v);
void expect_float(const pf_feature *f, uint32_t n, const float *v);
wire *w_list_entry(wire *w, const char *key, int n, ...);

#define I64(...) (const int64_t[]){ __VA_ARGS__ }
#define F32(...) (const float[]){ __VA_ARGS__ }

#endif
