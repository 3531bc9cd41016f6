/* SPDX-License-Identifier: Apache-2.0 */
/* Packed protobuf varints to int64/int32 arrays: scalar, AVX2 and AVX-512 paths, chosen at run time. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

/*
 * What a packed run of varints means here is what example.c (and so
 * protobuf-c) takes it to mean: the run splits after every byte whose top
 * bit is clear; each piece is one varint of at most 10 bytes whose value
 * is the low 64 bits of its 7-bit groups (overlong encodings are fine, the
 * 10th byte gives bit 63 and its other bits are dropped).  The run is
 * malformed when a varint has no terminating byte within 10 bytes or
 * before the end; the offset reported is that varint's first byte, the
 * one example.c reports.
 *
 * Every path produces the same output; they differ in how.  The scalar
 * path reads eight bytes at a time (example.c's unpack_varints).  The
 * vector paths work on fixed blocks of the input (60 bytes for AVX-512,
 * 32 for AVX2), each decoding the varints that END in its block, so
 * nothing a block computes depends on the previous block's result (the
 * only loop-carried values are the output count and the block position).  A chain "decode one varint ->
 * its length -> where the next starts", which every byte-walking decoder
 * has, costs a load latency per step; with 1-, 2- and 3-byte token ids in
 * random order it also mispredicts a branch per value.
 *
 * Inside a block every varint is assumed to be at most 4 bytes (values
 * below 2^28): a byte mask of continuation bits, a check that no four
 * continuation bytes follow each other near the block (so no longer
 * varint ends in it), then each varint's bytes are gathered into a 32-bit
 * lane (byte j of lane i = byte start_i + j), the bytes after its
 * terminator cleared (t ^ (t - 1) on the terminator bits), and the 7-bit
 * groups joined with two multiply-adds (maddubs: b0 + 128 b1, madd:
 * w0 + 16384 w1).  Blocks that fail the check (a varint of 5..10 bytes,
 * an error) and the last values when the destination is almost full go
 * through the scalar code, one varint at a time, and the vector loop then
 * goes on with the next block.
 *
 * AVX-512 (VBMI + VBMI2): the start offsets come from one vpcompressb of
 * 0..63 under the start mask, and one vpermb gathers 16 lanes at a time;
 * a leaner loop (avx512_hot) takes every block with room for 64 values.
 * AVX2: a varint can start at most 3 bytes before an 8-byte piece, so the
 * starts of the varints ending in a piece are a function of the piece's 8
 * terminator bits and of that lead (0..3): a 1024-entry table of 8 start
 * offsets, expanded into a vpshufb control.
 */

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
 * Count the varints in [src + pos, src + len), pos at a varint start, and
 * check them.  @return the count, or -EBADMSG with *bad at the first
 * varint without a terminator within 10 bytes or before the end.  A run
 * of continuation bytes is followed from word to word: only a run of 10
 * or more, or one reaching the end, is an error.
 */
static int64_t count_rest(const uint8_t *src, size_t pos, size_t len,
			  size_t *bad)
{
	size_t run = 0;		/* continuation bytes just before pos */
	int64_t n = 0;

	while (len - pos >= 8) {
		uint64_t t = ~pf_load_le64(src + pos) & TERM_BITS;

		if (!t) {
			run += 8;
			pos += 8;
			if (run >= 10)
				goto fail;
			continue;
		}
		n += __builtin_popcountll(t);
		if (run + ((unsigned)__builtin_ctzll(t) >> 3) >= 10)
			goto fail;
		run = (unsigned)__builtin_clzll(t) >> 3;
		pos += 8;
	}
	for (; pos < len; pos++) {
		if (src[pos] & 0x80) {
			if (++run >= 10) {
				pos++;
				goto fail;
			}
		} else {
			n++;
			run = 0;
		}
	}
	if (!run)
		return n;
fail:
	/* The run that is too long, or reaches the end, started here. */
	if (bad)
		*bad = pos - run;
	return -EBADMSG;
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
	rest = count_rest(src, pos, len, bad);
	return rest < 0 ? rest : (int64_t)o + rest;
}

static int64_t scalar_i64(const uint8_t *src, size_t len, int64_t *dst,
			  size_t max, int64_t lo, int64_t hi, size_t *bad)
{
	return scalar_from(src, len, 0, 0, dst, max, lo, hi, bad, 1);
}

static int64_t scalar_i32(const uint8_t *src, size_t len, int32_t *dst,
			  size_t max, int32_t lo, int32_t hi, size_t *bad)
{
	return scalar_from(src, len, 0, 0, dst, max, lo, hi, bad, 0);
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

/* Where the varint after the last terminator of a block starts: the
 * position after the highest set bit of t (bit i = byte base + i). */
static inline size_t after_last(size_t base, uint64_t t)
{
	return base + 64u - (unsigned)__builtin_clzll(t);
}

#if defined(__x86_64__)
#include <immintrin.h>

#define BLOCK 32u	/* input bytes per AVX2 step */
#ifndef AVX512_GROUPS
#define AVX512_GROUPS 4	/* 16 lanes each: 60-byte blocks; 3 (48) and 2 (32)
				   measured 12% and 25% slower: the one
				   vpcompressb per block is what costs */
#endif

/* ------------------------------------------------------------------ */
/* AVX-512: VBMI (vpermb) and VBMI2 (vpcompressb)                       */
/* ------------------------------------------------------------------ */

#define AVX512_TARGET \
	__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2,bmi,bmi2,popcnt")))

/* Constants of the AVX-512 lanes, made once per call. */
struct avx512_k {
	__m512i byte_in_lane, top, low7, mul7, mul14, one, l, h;
};

/* One group of 16 lanes: lane i decodes the varint starting at byte
 * starts[16g + i] of x (spread selects g).  @return the values, clamped
 * to [l, h] when clamp. */
AVX512_TARGET static inline __attribute__((always_inline))
__m512i avx512_group(__m512i x, __m512i starts, __m512i spread,
		     const struct avx512_k *k, int clamp)
{
	__m512i idx, d, t, keep, v;

	idx = _mm512_add_epi8(_mm512_permutexvar_epi8(spread, starts), k->byte_in_lane);
	d = _mm512_permutexvar_epi8(idx, x);
	/* Terminator bits of the lane; keep the bytes up to the first. */
	t = _mm512_andnot_si512(d, k->top);
	keep = _mm512_xor_si512(t, _mm512_sub_epi32(t, k->one));
	v = _mm512_ternarylogic_epi32(d, keep, k->low7, 0x80);	/* a & b & c */
	v = _mm512_madd_epi16(_mm512_maddubs_epi16(k->mul7, v), k->mul14);
	return clamp ? _mm512_min_epi32(_mm512_max_epi32(v, k->l), k->h) : v;
}

AVX512_TARGET static inline __attribute__((always_inline))
void avx512_store(void *dst, size_t o, __m512i v, __mmask16 k, int wide)
{
	if (wide) {
		int64_t *d = (int64_t *)dst + o;
		__m512i a = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(v));
		__m512i b = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(v, 1));

		_mm512_mask_storeu_epi64(d, (__mmask8)k, a);
		_mm512_mask_storeu_epi64(d + 8, (__mmask8)(k >> 8), b);
	} else {
		_mm512_mask_storeu_epi32((int32_t *)dst + o, k, v);
	}
}

/*
 * The hot loop: whole windows inside the input and room for 64 values,
 * so nothing is masked.  The same blocks as below (B = 60, window from
 * pos - 4), decoded with fewer operations per lane:
 *  - one vpcompressb lists the terminators, the lead's last one first:
 *    varint i starts after term[i] and ends at term[i + 1], and a lane
 *    keeps the bytes whose index is at most its varint's end (one compare
 *    into the zeroing mask of the gather) instead of finding its
 *    terminator in the gathered bytes (three operations);
 *  - the 7-bit groups are masked once per block, not once per lane group;
 *  - three groups of 16 lanes cover blocks of up to 48 varints, the
 *    fourth runs only when a block holds more (every value 1 byte long,
 *    most of them): token ids of 1-3 bytes come ~37 to a block;
 *  - into int64 the lanes are ordered so that unpacking against zero
 *    (lanes 0-1, 4-5, ... then 2-3, 6-7, ...) widens them in order.
 * The window of the first block is the input shifted up by 4 zero bytes
 * (terminators: the run starts with a varint), and windows crossing the
 * end are read with a masked load, the bytes past it no terminators.
 * Runs while pos < len and max - o >= 64 (a block holds at most 60
 * varints, so o stays within max); returns -EBADMSG from a block the
 * scalar code found malformed, else 0.  Measured on token lists (Zipf
 * ids < 32000, 1.6 bytes a value, 128-512 values into int64[512]): 0.19
 * ns a value against 0.33 for the loop below alone.
 */
struct avx512_hot_k {
	__m512i iota, byte_in_lane, low7, mul7, mul14, l, h;
	__m512i spread[4], spread_next[4];
};

AVX512_TARGET static inline __attribute__((always_inline))
__m512i avx512_hot_group(__m512i x7, __m512i term, __m512i spread,
			 __m512i spread_next, const struct avx512_hot_k *k, int clamp)
{
	__m512i idx = _mm512_add_epi8(_mm512_permutexvar_epi8(spread, term),
				      k->byte_in_lane);
	__m512i lim = _mm512_permutexvar_epi8(spread_next, term);
	__mmask64 keep = _mm512_cmple_epu8_mask(idx, lim);
	__m512i v = _mm512_maskz_permutexvar_epi8(keep, idx, x7);

	v = _mm512_madd_epi16(_mm512_maddubs_epi16(k->mul7, v), k->mul14);
	return clamp ? _mm512_min_epi32(_mm512_max_epi32(v, k->l), k->h) : v;
}

AVX512_TARGET static inline __attribute__((always_inline))
void avx512_hot_store(void *dst, size_t o, __m512i v, int wide)
{
	if (wide) {
		int64_t *d = (int64_t *)dst + o;
		__m512i zero = _mm512_setzero_si512();

		_mm512_storeu_si512((void *)d, _mm512_unpacklo_epi32(v, zero));
		_mm512_storeu_si512((void *)(d + 8), _mm512_unpackhi_epi32(v, zero));
	} else {
		_mm512_storeu_si512((void *)((int32_t *)dst + o), v);
	}
}

AVX512_TARGET static inline __attribute__((always_inline))
int avx512_hot(const uint8_t *src, size_t len, void *dst, size_t max,
	       int64_t lo, int64_t hi, size_t *bad, int wide, int clamp,
	       const struct avx512_hot_k *k, size_t *pos_io, size_t *vstart_io,
	       size_t *o_io)
{
	const uint64_t in_block = (1ull << 60) - 1;
	size_t pos = *pos_io, vstart = *vstart_io, o = *o_io;
	int ret = 0;

	while (pos < len && max - o >= 64) {
		__m512i x, x7, term;
		uint64_t c, t, r4, ends;
		unsigned n;

		if (__builtin_expect(pos >= 4 && len - pos >= 60, 1)) {
			x = _mm512_loadu_si512(src + pos - 4);
			c = _mm512_movepi8_mask(x);
			t = ~c;
		} else {
			/* pos is 0 or a multiple of 60: the first block, or
			 * the last ones. */
			size_t from = pos ? pos - 4 : 0, lead = pos ? 0 : 4;
			size_t n_in = len - from < 64 - lead ? len - from : 64 - lead;

			x = _mm512_maskz_loadu_epi8(n_in == 64 ? ~0ull : (1ull << n_in) - 1,
						    src + from);
			if (lead)
				x = _mm512_alignr_epi32(x, _mm512_setzero_si512(), 15);
			c = _mm512_movepi8_mask(x);
			t = ~c & (n_in + lead == 64 ? ~0ull : (1ull << (n_in + lead)) - 1);
		}
		r4 = c & (c >> 1) & (c >> 2) & (c >> 3);
		ends = t & (in_block << 4);
		n = (unsigned)__builtin_popcountll(ends);

		if (r4 & in_block) {
			if (scalar_some(src, len, &vstart, n, dst, &o, max, lo, hi,
					bad, wide) < 0) {
				ret = -EBADMSG;
				break;
			}
			pos += 60;
			continue;
		}
		/* The last terminator of the lead (there is one: no run of
		 * 4), then every terminator of the block: varint i starts
		 * after term[i] and ends at term[i + 1]. */
		t &= ~0ull << (63 - __builtin_clzll(t & 0xf));
		term = _mm512_maskz_compress_epi8(t, k->iota);
		x7 = _mm512_and_si512(x, k->low7);
#pragma GCC unroll 3
		for (int g = 0; g < 3; g++)
			avx512_hot_store(dst, o + 16u * (unsigned)g,
					 avx512_hot_group(x7, term, k->spread[g],
							  k->spread_next[g], k, clamp),
					 wide);
		if (n > 48)
			avx512_hot_store(dst, o + 48,
					 avx512_hot_group(x7, term, k->spread[3],
							  k->spread_next[3], k, clamp),
					 wide);
		o += n;
		if (ends)
			vstart = after_last(pos - 4, ends);
		pos += 60;
	}
	*pos_io = pos;
	*vstart_io = vstart;
	*o_io = o;
	return ret;
}

/*
 * A block covers input bytes [pos, pos + B), B = 16 groups or 60; its
 * window is the 64 bytes from pos - 4 (window bit i = byte pos - 4 + i).
 * Each group decodes 16 of the (at most B) varints ending in the block.  The window is read
 * with a masked load where it would cross either end of the input: bytes
 * outside read as zero, and zero bytes before the start are exactly what
 * is wanted there (terminators: the run starts with a varint).
 */
AVX512_TARGET static inline __attribute__((always_inline))
int64_t avx512_run(const uint8_t *src, size_t len, void *dst, size_t max,
		   int64_t lo, int64_t hi, size_t *bad, int wide, int groups,
		   int clamp)
{
	const unsigned block = groups == 4 ? 60u : 16u * (unsigned)groups;
	const uint64_t in_block = (1ull << block) - 1;
	const __m512i iota = _mm512_set_epi8(
		63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48,
		47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32,
		31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16,
		15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
	/* Byte 4i + j of spreadN = 16N + i: lane i takes start 16N + i. */
	const __m512i spread0 = _mm512_set_epi32(
		0x0f0f0f0f, 0x0e0e0e0e, 0x0d0d0d0d, 0x0c0c0c0c, 0x0b0b0b0b,
		0x0a0a0a0a, 0x09090909, 0x08080808, 0x07070707, 0x06060606,
		0x05050505, 0x04040404, 0x03030303, 0x02020202, 0x01010101, 0);
	/* Byte 4i + j = lane i's varint within its group of 16; into int64
	 * lanes 0-1, 4-5, 8-9, 12-13 take varints 0-7, the others 8-15. */
	const __m512i order64 = _mm512_set_epi32(
		0x0f0f0f0f, 0x0e0e0e0e, 0x07070707, 0x06060606, 0x0d0d0d0d,
		0x0c0c0c0c, 0x05050505, 0x04040404, 0x0b0b0b0b, 0x0a0a0a0a,
		0x03030303, 0x02020202, 0x09090909, 0x08080808, 0x01010101, 0);
	__m512i spread[4];
	struct avx512_k k;
	struct avx512_hot_k hk;
	size_t pos = 0, vstart = 0, o = 0;
	int32_t l32, h32;

	/* A label or a short list: not worth the setup. */
	if (len < 8 || !lane_bounds(lo, hi, &l32, &h32))
		return scalar_from(src, len, 0, 0, dst, max, lo, hi, bad, wide);
	k.byte_in_lane = _mm512_set1_epi32(0x03020100);
	k.top = _mm512_set1_epi32((int)0x80808080u);
	k.low7 = _mm512_set1_epi32(0x7f7f7f7f);
	k.mul7 = _mm512_set1_epi16((short)-32767);	/* 0x8001: bytes 1, 128 */
	k.mul14 = _mm512_set1_epi32(0x40000001);	/* words 1, 16384 */
	k.one = _mm512_set1_epi32(1);
	k.l = _mm512_set1_epi32(l32);
	k.h = _mm512_set1_epi32(h32);
	for (int g = 0; g < 4; g++)
		spread[g] = _mm512_add_epi8(spread0, _mm512_set1_epi8((char)(16 * g)));
	hk.iota = iota;
	hk.byte_in_lane = _mm512_set1_epi32(0x04030201);	/* after the terminator */
	hk.low7 = k.low7;
	hk.mul7 = k.mul7;
	hk.mul14 = k.mul14;
	hk.l = k.l;
	hk.h = k.h;
	for (int g = 0; g < 4; g++) {
		hk.spread[g] = _mm512_add_epi8(wide ? order64 : spread0,
					       _mm512_set1_epi8((char)(16 * g)));
		hk.spread_next[g] = _mm512_add_epi8(hk.spread[g], _mm512_set1_epi8(1));
	}
	while (pos < len && o < max) {
		__m512i x, starts;
		uint64_t c, t, pre, ends, r4;
		/* Lanes that may be stored: up to max, past it masked off. */
		__mmask64 room = max - o >= 64 ? ~0ull : (1ull << (max - o)) - 1;
		unsigned n;

		if (groups == 4) {
			if (avx512_hot(src, len, dst, max, lo, hi, bad, wide, clamp,
				       &hk, &pos, &vstart, &o) < 0)
				return -EBADMSG;
			if (pos >= len || o >= max)
				break;
			room = max - o >= 64 ? ~0ull : (1ull << (max - o)) - 1;
		}
		if (pos >= 4 && len - pos >= 60) {
			x = _mm512_loadu_si512(src + pos - 4);
			c = _mm512_movepi8_mask(x);
			t = ~c;
		} else {
			/* Bytes [pos - 4, len) of the window that exist. */
			size_t from = pos >= 4 ? pos - 4 : 0;
			size_t skip = from - (pos - 4);	/* 4 - pos at the start */
			size_t n_in = len - from < 64 - skip ? len - from : 64 - skip;
			__mmask64 in = n_in == 64 ? ~0ull : (1ull << n_in) - 1;

			x = _mm512_maskz_loadu_epi8(in, src + from);
			if (skip)	/* move the input up to window offset skip */
				x = _mm512_maskz_permutexvar_epi8(~0ull << skip,
								  _mm512_sub_epi8(iota, _mm512_set1_epi8((char)skip)), x);
			c = _mm512_movepi8_mask(x);
			/* Bytes past the end are no terminators. */
			t = ~c & (n_in + skip == 64 ? ~0ull : (1ull << (n_in + skip)) - 1);
		}
		/* Four continuation bytes in a row ending the lead or inside
		 * the block: a varint over 4 bytes ends here, or the run is
		 * broken.  The byte loop takes this block. */
		r4 = c & (c >> 1) & (c >> 2) & (c >> 3);
		ends = t & (in_block << 4);
		n = (unsigned)__builtin_popcountll(ends);
		if (r4 & in_block) {
			if (scalar_some(src, len, &vstart, n, dst, &o, max, lo, hi,
					bad, wide) < 0)
				return -EBADMSG;
			pos += block;
			continue;
		}
		/* The first varint ending in the block starts after the last
		 * terminator of the 4 bytes before it (there is one). */
		pre = t & 0xf;
		t = (t << 1) & (~0ull << (64 - __builtin_clzll(pre)));
		starts = _mm512_maskz_compress_epi8(t, iota);
#pragma GCC unroll 4
		for (int g = 0; g < groups; g++)
			avx512_store(dst, o + 16u * (unsigned)g,
				     avx512_group(x, starts, spread[g], &k, clamp),
				     (__mmask16)(room >> (16 * g)), wide);
		o += n;
		if (ends)
			vstart = after_last(pos - 4, ends);
		pos += block;
	}
	/* At max, the rest is counted and checked from the first varint
	 * not yet decoded (or at the end, a varint left unterminated). */
	return scalar_from(src, len, vstart, o, dst, max, lo, hi, bad, wide);
}

AVX512_TARGET
static int64_t avx512_i64(const uint8_t *src, size_t len, int64_t *dst,
			  size_t max, int64_t lo, int64_t hi, size_t *bad)
{
	if (lo <= 0 && hi >= (1 << 28) - 1)	/* no lane value is clamped */
		return avx512_run(src, len, dst, max, lo, hi, bad, 1, AVX512_GROUPS, 0);
	return avx512_run(src, len, dst, max, lo, hi, bad, 1, AVX512_GROUPS, 1);
}

AVX512_TARGET
static int64_t avx512_i32(const uint8_t *src, size_t len, int32_t *dst,
			  size_t max, int32_t lo, int32_t hi, size_t *bad)
{
	if (lo <= 0 && hi >= (1 << 28) - 1)
		return avx512_run(src, len, dst, max, lo, hi, bad, 0, AVX512_GROUPS, 0);
	return avx512_run(src, len, dst, max, lo, hi, bad, 0, AVX512_GROUPS, 1);
}

/* ------------------------------------------------------------------ */
/* AVX2 + BMI2                                                          */
/* ------------------------------------------------------------------ */

#define AVX2_TARGET __attribute__((target("avx2,bmi,bmi2,popcnt")))

/*
 * piece_starts[lead << 8 | term]: for an 8-byte piece at offset 8 of a
 * 16-byte window, whose terminator bits are term and before which the
 * varint running into it has `lead` bytes (0..3), the window offsets at
 * which the varints ending in the piece start, one per byte.
 */
static uint64_t piece_starts[4 << 8];
static pthread_once_t piece_once = PTHREAD_ONCE_INIT;

static void build_piece_starts(void)
{
	for (unsigned lead = 0; lead < 4; lead++)
		for (unsigned term = 0; term < 256; term++) {
			uint64_t e = 0;
			unsigned k = 0, start = 8 - lead;

			for (unsigned b = 0; b < 8; b++)
				if (term & (1u << b)) {
					e |= (uint64_t)start << (8 * k++);
					start = 8 + b + 1;
				}
			piece_starts[lead << 8 | term] = e;
		}
}

/* Lanes [0, max - o) of v to dst[o..]: all 8, or the first few (through
 * a buffer: vpmaskmov stores are slow on some CPUs). */
AVX2_TARGET static inline __attribute__((always_inline))
void avx2_store(void *dst, size_t o, size_t max, __m256i v, int wide)
{
	if (__builtin_expect(o + 8 > max, 0)) {
		uint32_t lanes[8];
		size_t n = max - o;

		if (o >= max)
			return;
		_mm256_storeu_si256((__m256i *)(void *)lanes, v);
		for (size_t i = 0; i < n; i++)
			if (wide)
				((int64_t *)dst)[o + i] = lanes[i];
			else
				((int32_t *)dst)[o + i] = (int32_t)lanes[i];
		return;
	}
	if (wide) {
		int64_t *d = (int64_t *)dst + o;

		_mm256_storeu_si256((__m256i *)(void *)d,
				    _mm256_cvtepu32_epi64(_mm256_castsi256_si128(v)));
		_mm256_storeu_si256((__m256i *)(void *)(d + 4),
				    _mm256_cvtepu32_epi64(_mm256_extracti128_si256(v, 1)));
	} else {
		_mm256_storeu_si256((__m256i *)(void *)((int32_t *)dst + o), v);
	}
}

/*
 * Block at pos: the window is the 48 bytes from pos - 8 (bit i = byte
 * pos - 8 + i), four 8-byte pieces at window offsets 8, 16, 24, 32, piece
 * k decoded from the 16 window bytes at 8k.  Windows crossing either end
 * of the input are copied into a zeroed buffer.
 */
AVX2_TARGET static inline __attribute__((always_inline))
int64_t avx2_run(const uint8_t *src, size_t len, void *dst, size_t max,
		 int64_t lo, int64_t hi, size_t *bad, int wide, int clamp)
{
	const __m256i spread = _mm256_setr_epi8(
		0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
		4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7);
	const __m256i byte_in_lane = _mm256_set1_epi32(0x03020100);
	const __m256i top = _mm256_set1_epi32((int)0x80808080u);
	const __m256i low7 = _mm256_set1_epi32(0x7f7f7f7f);
	const __m256i mul7 = _mm256_set1_epi16((short)-32767);	/* bytes 1, 128 */
	const __m256i mul14 = _mm256_set1_epi32(0x40000001);
	const __m256i one = _mm256_set1_epi32(1);
	uint8_t buf[48];
	size_t pos = 0, vstart = 0, o = 0;
	__m256i l, h;
	int32_t l32, h32;

	if (len < 8 || !lane_bounds(lo, hi, &l32, &h32))
		return scalar_from(src, len, 0, 0, dst, max, lo, hi, bad, wide);
	pthread_once(&piece_once, build_piece_starts);
	l = _mm256_set1_epi32(l32);
	h = _mm256_set1_epi32(h32);
	while (pos < len && o < max) {
		const uint8_t *w;
		uint64_t c, t, r4, ends;
		unsigned n;

		if (pos >= 8 && len - pos >= 40) {
			w = src + pos - 8;
			t = (1ull << 48) - 1;
		} else {
			size_t from = pos >= 8 ? pos - 8 : 0;
			size_t skip = from - (pos - 8);
			size_t n_in = len - from < 48 - skip ? len - from : 48 - skip;

			memset(buf, 0, sizeof(buf));
			memcpy(buf + skip, src + from, n_in);
			w = buf;
			t = (1ull << (n_in + skip)) - 1;
		}
		c = (uint32_t)_mm256_movemask_epi8(_mm256_loadu_si256((const __m256i *)(const void *)w)) |
		    (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(const void *)(w + 32))) << 32;
		t &= ~c;
		r4 = c & (c >> 1) & (c >> 2) & (c >> 3);
		ends = t & (0xffffffffull << 8);
		n = (unsigned)__builtin_popcountll(ends);
		if (r4 & (0xffffffffull << 4)) {
			if (scalar_some(src, len, &vstart, n, dst, &o, max, lo, hi,
					bad, wide) < 0)
				return -EBADMSG;
			pos += BLOCK;
			continue;
		}
		for (unsigned k = 0; k < 4; k++) {
			unsigned term = (unsigned)(t >> (8 * k + 8)) & 0xffu;
			/* The 4 bytes before the piece hold a terminator (no run
			 * of 4), unless they are past the end (and then so is the
			 * piece, term 0): the lead is their leading zero count. */
			unsigned lead = (unsigned)__builtin_clz((((unsigned)(t >> (8 * k + 4)) & 0xfu) | 1u) << 28);
			__m256i s, d, tb, keep, v;

			s = _mm256_set1_epi64x((long long)piece_starts[lead << 8 | term]);
			s = _mm256_add_epi8(_mm256_shuffle_epi8(s, spread), byte_in_lane);
			d = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(w + 8 * k)));
			d = _mm256_shuffle_epi8(d, s);
			tb = _mm256_andnot_si256(d, top);
			keep = _mm256_xor_si256(tb, _mm256_sub_epi32(tb, one));
			v = _mm256_and_si256(_mm256_and_si256(d, keep), low7);
			v = _mm256_madd_epi16(_mm256_maddubs_epi16(mul7, v), mul14);
			if (clamp)
				v = _mm256_min_epi32(_mm256_max_epi32(v, l), h);
			avx2_store(dst, o, max, v, wide);
			o += (unsigned)__builtin_popcount(term);
		}
		if (ends)
			vstart = after_last(pos - 8, ends);
		pos += BLOCK;
	}
	return scalar_from(src, len, vstart, o, dst, max, lo, hi, bad, wide);
}

AVX2_TARGET
static int64_t avx2_i64(const uint8_t *src, size_t len, int64_t *dst,
			size_t max, int64_t lo, int64_t hi, size_t *bad)
{
	if (lo <= 0 && hi >= (1 << 28) - 1)	/* no lane value is clamped */
		return avx2_run(src, len, dst, max, lo, hi, bad, 1, 0);
	return avx2_run(src, len, dst, max, lo, hi, bad, 1, 1);
}

AVX2_TARGET
static int64_t avx2_i32(const uint8_t *src, size_t len, int32_t *dst,
			size_t max, int32_t lo, int32_t hi, size_t *bad)
{
	if (lo <= 0 && hi >= (1 << 28) - 1)
		return avx2_run(src, len, dst, max, lo, hi, bad, 0, 0);
	return avx2_run(src, len, dst, max, lo, hi, bad, 0, 1);
}

static bool have_avx512(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("avx512vl") &&
	       __builtin_cpu_supports("avx512vbmi") &&
	       __builtin_cpu_supports("avx512vbmi2") &&
	       __builtin_cpu_supports("bmi2") &&
	       __builtin_cpu_supports("popcnt");
}

static bool have_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") &&
	       __builtin_cpu_supports("bmi2") &&
	       __builtin_cpu_supports("popcnt");
}
#endif

static bool have_scalar(void)
{
	return true;
}

/* Best first. */
const pf_varint_ops pf_varint_paths[] = {
#if defined(__x86_64__)
	{ "avx512", have_avx512, avx512_i64, avx512_i32 },
	{ "avx2", have_avx2, avx2_i64, avx2_i32 },
#endif
	{ "scalar", have_scalar, scalar_i64, scalar_i32 },
	{ NULL, NULL, NULL, NULL },
};

static const pf_varint_ops *varint_path;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

/* The best path the CPU has, or with PODFEED_SIMD=NAME that one when the
 * CPU has it (else the best below it). */
static void choose(void)
{
	const char *want = getenv("PODFEED_SIMD");
	const pf_varint_ops *p = pf_varint_paths, *best = NULL;
	bool below = !want || !*want;

	for (; p->name; p++) {
		if (!below && !strcmp(p->name, want))
			below = true;
		if (below && p->supported()) {
			best = p;
			break;
		}
	}
	if (!best)	/* an unknown name: the default */
		for (p = pf_varint_paths; p->name && !best; p++)
			if (p->supported())
				best = p;
	__atomic_store_n(&varint_path, best, __ATOMIC_RELEASE);
}

static inline const pf_varint_ops *path(void)
{
	pthread_once(&choose_once, choose);
	return __atomic_load_n(&varint_path, __ATOMIC_ACQUIRE);
}

int64_t pf_varint_decode_i64(const uint8_t *src, size_t len, int64_t *dst,
			     size_t max, int64_t lo, int64_t hi, size_t *bad)
{
	if (!len)
		return 0;
	return path()->i64(src, len, dst, max, lo, hi, bad);
}

int64_t pf_varint_decode_i32(const uint8_t *src, size_t len, int32_t *dst,
			     size_t max, int32_t lo, int32_t hi, size_t *bad)
{
	if (!len)
		return 0;
	return path()->i32(src, len, dst, max, lo, hi, bad);
}

const char *pf_varint_impl(void)
{
	return path()->name;
}

int pf_varint_set_impl(const char *name)
{
	pthread_once(&choose_once, choose);
	for (const pf_varint_ops *p = pf_varint_paths; p->name; p++) {
		if (strcmp(p->name, name))
			continue;
		if (!p->supported())
			return -ENOTSUP;
		__atomic_store_n(&varint_path, p, __ATOMIC_RELEASE);
		return 0;
	}
	return -EINVAL;
}
