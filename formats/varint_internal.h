/* SPDX-License-Identifier: Apache-2.0 */
/* Private to formats/varint.c and varint_avx2.c: the rule of a packed run
 * in scalar code, which every path falls back to, and the AVX2 entries. */
#ifndef PF_VARINT_INTERNAL_H
#define PF_VARINT_INTERNAL_H

#include <errno.h>
#include <stdbool.h>

#include "formats_internal.h"

/* What a run means, and how the paths share the work: varint.c. */

/*
 * Count the varints in [src + pos, src + len), pos at a varint start, and
 * check them.  @return the count, or -EBADMSG with *bad at the first
 * varint without a terminator within 10 bytes or before the end.
 */
int64_t pf_varint_count_rest(const uint8_t *src, size_t pos, size_t len,
			     size_t *bad);

#define TERM_BITS 0x8080808080808080ull

/* Lanes hold values < 2^28, so vector clamps use 32-bit lanes; see
 * lane_bounds(). */
#define LANE_MAX 0x7fffffffll

static inline int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi)
{
	if (__builtin_expect((uint64_t)v - (uint64_t)lo <=
			     (uint64_t)hi - (uint64_t)lo, 1))
		return v;
	return v < lo ? lo : hi;
}

static inline void put(void *dst, size_t i, uint64_t v, int64_t lo, int64_t hi,
		       int wide)
{
	int64_t c = clamp_i64((int64_t)v, lo, hi);

	if (wide)
		((int64_t *)dst)[i] = c;
	else
		((int32_t *)dst)[i] = (int32_t)c;
}

/* The varint at p (p < end): its length 1..10, with its low 64 bits in
 * *v; 0 when it is not terminated within 10 bytes or before end. */
static inline size_t varint_one(const uint8_t *p, const uint8_t *end,
				uint64_t *v)
{
	size_t max = (size_t)(end - p) < 10 ? (size_t)(end - p) : 10;
	uint64_t x = 0;

	for (size_t i = 0; i < max; i++) {
		x |= (uint64_t)(p[i] & 0x7fu) << (7 * i);
		if (!(p[i] & 0x80)) {
			*v = x;
			return i + 1;
		}
	}
	return 0;
}

/* The 7-bit groups of the bytes in x (a varint of at most 8 bytes, the
 * bytes past its terminator zero) squeezed together. */
static inline uint64_t squeeze(uint64_t x)
{
	/* Pairs of bytes to 14 bits, pairs of those to 28, then 56. */
	x = ((x & 0x7f007f007f007f00ull) >> 1) | (x & 0x007f007f007f007full);
	x = ((x & 0x3fff00003fff0000ull) >> 2) | (x & 0x00003fff00003fffull);
	return ((x & 0x0fffffff00000000ull) >> 4) | (x & 0x000000000fffffffull);
}

/*
 * Decode varints from src + *pos while *o < max (the caller's loop, or the
 * rest of the run), at most `limit` of them.  @return 0, or -EBADMSG with
 * *bad.  Advances *pos and *o.
 */
static inline __attribute__((always_inline))
int scalar_some(const uint8_t *src, size_t len, size_t *pos, size_t limit,
		void *dst, size_t *o, size_t max, int64_t lo, int64_t hi,
		size_t *bad, int wide)
{
	const uint8_t *end = src + len;

	for (size_t k = 0; k < limit; k++) {
		uint64_t v;
		size_t n = varint_one(src + *pos, end, &v);

		if (!n) {
			if (bad)
				*bad = *pos;
			return -EBADMSG;
		}
		if (*o < max)
			put(dst, *o, v, lo, hi, wide);
		++*o;
		*pos += n;
	}
	return 0;
}

/*
 * The portable path, from a varint start at pos with o values already
 * stored.  Eight bytes at a time while there are 8 bytes and room for 8
 * values: every varint ending in the word is taken from the word, by
 * masks and shifts, with no branch on its length.
 */
static inline __attribute__((always_inline))
int64_t scalar_from(const uint8_t *src, size_t len, size_t pos, size_t o,
		    void *dst, size_t max, int64_t lo, int64_t hi, size_t *bad,
		    int wide)
{
	int64_t rest;

	while (o < max && pos < len) {
		if (len - pos >= 8 && max - o >= 8) {
			uint64_t w = pf_load_le64(src + pos);
			uint64_t term = ~w & TERM_BITS;

			if (term == TERM_BITS) {
				for (int k = 0; k < 8; k++)
					put(dst, o + (size_t)k, (w >> (8 * k)) & 0xff,
					    lo, hi, wide);
				o += 8;
				pos += 8;
				continue;
			}
			if (term) {
				pos += (64u - (unsigned)__builtin_clzll(term)) >> 3;
				for (unsigned shift = 0; term; term &= term - 1) {
					uint64_t upto = term ^ (term - 1);

					put(dst, o++, squeeze((w & upto) >> shift),
					    lo, hi, wide);
					shift = (unsigned)__builtin_ctzll(term) + 1;
				}
				continue;
			}
			/* 9 or 10 bytes, or an error: the byte loop. */
		}
		if (scalar_some(src, len, &pos, 1, dst, &o, max, lo, hi, bad,
				wide) < 0)
			return -EBADMSG;
	}
	if (pos == len)
		return (int64_t)o;
	rest = pf_varint_count_rest(src, pos, len, bad);
	return rest < 0 ? rest : (int64_t)o + rest;
}

/*
 * Vector lanes hold values in [0, 2^28).  Clamping such a value v to
 * [lo, hi] equals clamping it to [max(lo, 0), min(hi, 2^31 - 1)] in 32-bit
 * lanes, provided that interval is not empty (hi >= 0, lo < 2^31).  When
 * it is empty every lane would get the same bound; that case (a clip
 * entirely below 0 or above 2^31) is left to the scalar path.
 */
static inline bool lane_bounds(int64_t lo, int64_t hi, int32_t *l, int32_t *h)
{
	if (hi < 0 || lo > LANE_MAX)
		return false;
	*l = (int32_t)(lo < 0 ? 0 : lo);
	*h = (int32_t)(hi > LANE_MAX ? LANE_MAX : hi);
	return true;
}

#if defined(__x86_64__)
/* varint_avx2.c: does the CPU have AVX2 (and BMI2, POPCNT); the
 * pf_varint_ops entries of that path. */
bool pf_varint_have_avx2(void);
int64_t pf_varint_avx2_i64(const uint8_t *src, size_t len, int64_t *dst,
			   size_t max, int64_t lo, int64_t hi, size_t *bad);
int64_t pf_varint_avx2_i32(const uint8_t *src, size_t len, int32_t *dst,
			   size_t max, int32_t lo, int32_t hi, size_t *bad);
#endif

#endif
