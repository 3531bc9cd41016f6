/* SPDX-License-Identifier: Apache-2.0 */
/* Packed protobuf varints to int64/int32 arrays: scalar, AVX2 and AVX-512 paths, chosen at run time. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "varint_internal.h"

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
 * 32 for AVX2), each decoding the varints that end in its block
 * (AVX-512) or start in it (AVX2), so nothing a block computes depends
 * on the previous block's result (the only loop-carried values are the
 * output count, the block position and, for AVX2, whether the byte
 * before the block ends a varint).  A chain "decode one varint -> its
 * length -> where the next starts", which every byte-walking decoder
 * has, costs a load latency per step; with 1-, 2- and 3-byte token ids in
 * random order it also mispredicts a branch per value.
 *
 * Inside a block every varint is assumed to be at most 4 bytes (values
 * below 2^28): a byte mask of continuation bits, a check that no four
 * continuation bytes follow each other near the block (so no longer
 * varint is in it), then each varint's bytes are gathered into a 32-bit
 * lane (byte j of lane i = byte start_i + j), the bytes after its
 * terminator cleared, and the 7-bit groups joined with two multiply-adds
 * (maddubs: b0 + 128 b1, madd: w0 + 16384 w1).  Blocks that fail the
 * check (a varint of 5..10 bytes, an error) and the last values when the
 * destination is almost full go through the scalar code, one varint at a
 * time, and the vector loop then goes on with the next block.
 *
 * AVX-512 (VBMI + VBMI2): the start offsets come from one vpcompressb of
 * 0..63 under the start mask, and one vpermb gathers 16 lanes at a time;
 * a leaner loop (avx512_hot) takes every block with room for 64 values.
 * AVX2 (varint_avx2.c): every byte of the block is decoded as if a varint
 * started there, and the lanes that are starts are packed by a vpermd.
 */

/*
 * Count the varints in [src + pos, src + len), pos at a varint start, and
 * check them.  @return the count, or -EBADMSG with *bad at the first
 * varint without a terminator within 10 bytes or before the end.  A run
 * of continuation bytes is followed from word to word: only a run of 10
 * or more, or one reaching the end, is an error.
 */
int64_t pf_varint_count_rest(const uint8_t *src, size_t pos, size_t len,
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
		/* t's bits are its bytes' top bits: the sum of the bytes
		 * (each 0 or 1 after the shift) is their count, without a
		 * popcount (a library call without -mpopcnt). */
		n += (int64_t)(((t >> 7) * 0x0101010101010101ull) >> 56);
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

/* Where the varint after the last terminator of a block starts: the
 * position after the highest set bit of t (bit i = byte base + i). */
static inline size_t after_last(size_t base, uint64_t t)
{
	return base + 64u - (unsigned)__builtin_clzll(t);
}


#if defined(__x86_64__)
#include <immintrin.h>

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
#endif

static bool have_scalar(void)
{
	return true;
}

/* Best first. */
const pf_varint_ops pf_varint_paths[] = {
#if defined(__x86_64__)
	{ "avx512", have_avx512, avx512_i64, avx512_i32 },
	{ "avx2", pf_varint_have_avx2, pf_varint_avx2_i64, pf_varint_avx2_i32 },
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
