/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the pf_spec_decode() tests (test_loader_specdecode,
 * test_loader_specfixtures, test_loader_rowstream; never linked into the
 * library): a seeded random stream, specs from text, encoded Examples, and
 * the comparison of pf_spec_decode() with the slow path on every varint
 * path. */
#ifndef PF_SPECDECODE_UTIL_H
#define PF_SPECDECODE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "formats_internal.h"

/* splitmix64 over s: the same stream for the same seed. */
typedef struct sd_rng {
	uint64_t s;
} sd_rng;

uint64_t sd_next(sd_rng *r);

/* A spec parsed from text (calloc'd, the caller frees); fails the test
 * when text does not parse. */
pf_spec *sd_spec_of(const char *text);

/*
 * sd_compare() decodes the record both ways, pf_spec_decode() and
 * pf_example_decode() + pf_spec_apply_to(), into destinations of exactly
 * the feature's size (malloc'd one by one so ASan sees a write past them),
 * prefilled with the same garbage, and asserts the same return value, the
 * same error (code, offset, message) and, on success, the same bytes.  It
 * does so once per varint path this CPU supports (leaving the last one
 * set), and checks that pf_spec_decode() leaves the arena as it found it.
 * what names the case in a failure.  @return the first path's return
 * value.  sd_compared counts the decodes compared (one per path),
 * sd_failures_seen those that failed (both ways alike).
 */
int sd_compare(const pf_spec *spec, const uint8_t *rec, size_t len, const char *what);
extern unsigned sd_compared, sd_failures_seen;

/* A record being built: n bytes of b. */
typedef struct sd_buf {
	uint8_t b[1 << 16];
	size_t n;
} sd_buf;

/* An empty sd_buf (calloc'd, the caller frees). */
sd_buf *sd_buf_new(void);
/* An encoded Example of the given features (packed, as TensorFlow), in a
 * new sd_buf (the caller frees). */
sd_buf *sd_encode(const pf_feature *f, uint32_t n);

#endif
