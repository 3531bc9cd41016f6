/* SPDX-License-Identifier: Apache-2.0 */
/* Packed varints with AVX2 into int32/int64 arrays (pf_varint_paths' "avx2"). */
#include <pthread.h>
#include <string.h>

#include "varint_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2_TARGET __attribute__((target("avx2,bmi,bmi2,popcnt")))

/*
 * A block is the 32 input bytes from pos and decodes the varints that
 * START in it (a start: the first byte of the run, or a byte after a
 * terminator).  Each of them is at most 4 bytes long unless four
 * continuation bytes follow each other from a byte of the block, so its
 * bytes lie in [pos, pos + 35).
 *
 * The lanes do not look for the starts: lane i of group g decodes the 4
 * bytes from pos + 8g + i as if a varint started there (one vpshufb of a
 * constant control over 16 bytes broadcast to both halves), so no lane's
 * work depends on where a varint ended; each lane keeps its bytes up to
 * the first terminator (d & (t - 1), t its terminator bits) and joins
 * their 7-bit groups with two multiply-adds (maddubs: b0 + 128 b1, madd:
 * w0 + 16384 w1).  The lanes that are starts are then packed in order by
 * one vpermd, its control from a table of the 256 start masks of 8 bytes
 * (2 KiB).  Token ids of 1-3 bytes give about 20 starts a block: 32
 * lanes do the work of 20, for about 95 instructions a block where the
 * previous design (per 8-byte piece, a 1024-entry table of the start
 * offsets of the varints ending in it, by terminator bits and lead,
 * expanded into a vpshufb control) took about 210 (callgrind, the tokens
 * records of tools/bench/loader).
 *
 * A block that fails the check (a varint of 5..10 bytes, an error) goes
 * through the scalar code, one varint at a time.  The hot loop takes the
 * blocks whose 40 bytes of loads lie inside the input and that have room
 * for 32 values; the others are decoded through a zeroed copy of their
 * bytes (a zero byte past the end is a terminator, so the run must end
 * with one: a run ending in a continuation byte is left to the scalar
 * code, which says where the unterminated varint starts) and a spill
 * area for the values past max.
 */
#define AVX2_BLOCK 32u
#define AVX2_WINDOW 40u		/* bytes loaded for a block: 16 from pos + 8g */

/* compact_lanes[m]: the indexes of the set bits of m in order, a byte
 * each, then zeros; widened by vpmovzxbd, the vpermd control that packs
 * the lanes whose bit is set. */
static uint64_t compact_lanes[256];
static pthread_once_t compact_once = PTHREAD_ONCE_INIT;

static void build_compact_lanes(void)
{
	for (unsigned m = 0; m < 256; m++) {
		uint64_t e = 0;
		unsigned k = 0;

		for (unsigned b = 0; b < 8; b++)
			if (m & (1u << b))
				e |= (uint64_t)b << (8 * k++);
		compact_lanes[m] = e;
	}
}

/* Constants of the lanes. */
struct avx2_k {
	__m256i window, top, low7, mul7, mul14, one, l, h;
};

/* Lane i: the varint that would start at byte i of p (p[0..16) read),
 * at most 4 bytes, clamped to [l, h] when clamp. */
AVX2_TARGET static inline __attribute__((always_inline))
__m256i avx2_eight(const uint8_t *p, const struct avx2_k *k, int clamp)
{
	__m256i d, tb, v;

	d = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p));
	d = _mm256_shuffle_epi8(d, k->window);
	/* Terminator bits; tb - 1 clears the bytes past the first (where
	 * tb is 0x80 or 0 and d's byte has its top bit clear or is cleared
	 * by the 0), and keeps the bytes up to it. */
	tb = _mm256_andnot_si256(d, k->top);
	v = _mm256_and_si256(_mm256_and_si256(d, _mm256_sub_epi32(tb, k->one)), k->low7);
	v = _mm256_madd_epi16(_mm256_maddubs_epi16(k->mul7, v), k->mul14);
	return clamp ? _mm256_min_epi32(_mm256_max_epi32(v, k->l), k->h) : v;
}

/* The lanes of v whose bit is set in m, packed, to out; all 8 lanes are
 * written (the caller has room for them).  @return out past the packed
 * lanes. */
AVX2_TARGET static inline __attribute__((always_inline))
uint8_t *avx2_pack_store(uint8_t *out, __m256i v, unsigned m, int wide)
{
	v = _mm256_permutevar8x32_epi32(
		v, _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)
							&compact_lanes[m])));
	if (wide) {
		_mm256_storeu_si256((__m256i *)(void *)out,
				    _mm256_cvtepu32_epi64(_mm256_castsi256_si128(v)));
		_mm256_storeu_si256((__m256i *)(void *)(out + 32),
				    _mm256_cvtepu32_epi64(_mm256_extracti128_si256(v, 1)));
	} else {
		_mm256_storeu_si256((__m256i *)(void *)out, v);
	}
	return out + (unsigned)__builtin_popcount(m) * (wide ? 8u : 4u);
}

/* The block at w (40 bytes readable) with start mask st to out.
 * @return out past its values. */
AVX2_TARGET static inline __attribute__((always_inline))
uint8_t *avx2_block(const uint8_t *w, uint32_t st, uint8_t *out,
		    const struct avx2_k *k, int wide, int clamp)
{
#pragma GCC unroll 4
	for (unsigned g = 0; g < 4; g++)
		out = avx2_pack_store(out, avx2_eight(w + 8 * g, k, clamp),
				      (st >> (8 * g)) & 0xffu, wide);
	return out;
}

/* Continuation bits of the 35 bytes from w (bit i: byte w[i]); *c0 the
 * first 32. */
AVX2_TARGET static inline __attribute__((always_inline))
uint64_t avx2_cont(const uint8_t *w, uint32_t *c0)
{
	*c0 = (uint32_t)_mm256_movemask_epi8(_mm256_loadu_si256((const __m256i *)(const void *)w));
	return *c0 | (uint64_t)(uint32_t)_mm256_movemask_epi8(
		_mm256_loadu_si256((const __m256i *)(const void *)(w + 3))) << 3;
}

/* Four continuation bytes in a row from a byte of the block. */
static inline bool run_of_four(uint64_t c)
{
	return (c & (c >> 1) & (c >> 2) & (c >> 3) & 0xffffffffull) != 0;
}

/* The first varint start at or after pos, where the bytes before pos
 * hold whole varints up to one that may run into pos (prev: byte pos - 1
 * is a terminator, or pos is 0). */
static inline size_t start_from(const uint8_t *src, size_t len, size_t pos,
				bool prev)
{
	if (prev)
		return pos;
	while (pos < len && (src[pos] & 0x80))
		pos++;
	return pos < len ? pos + 1 : len;
}

/* Decode src[0..len) into dst[0..max).  @return the count, or -EBADMSG
 * with *bad. */
AVX2_TARGET static inline __attribute__((always_inline))
int64_t avx2_run(const uint8_t *src, size_t len, void *dst, size_t max,
		 int64_t lo, int64_t hi, size_t *bad, int wide, int clamp)
{
	const size_t size = wide ? 8 : 4;
	struct avx2_k k;
	uint8_t tail[64];
	uint8_t spill[AVX2_BLOCK * 8 + 32] __attribute__((aligned(32)));
	uint8_t *out;
	size_t pos = 0, o = 0;
	uint32_t prev = 1;	/* byte pos - 1 is a terminator (or pos is 0) */
	int32_t l32, h32;

	/* A label or a short list: not worth the setup. */
	if (len < 8 || !lane_bounds(lo, hi, &l32, &h32))
		return scalar_from(src, len, 0, 0, dst, max, lo, hi, bad, wide);
	pthread_once(&compact_once, build_compact_lanes);
	/* Lane i (bytes 4i..4i+3) takes bytes i..i+3 of its half's 16; the
	 * high half holds lanes 4..7. */
	k.window = _mm256_setr_epi8(0, 1, 2, 3, 1, 2, 3, 4, 2, 3, 4, 5, 3, 4, 5, 6,
				    4, 5, 6, 7, 5, 6, 7, 8, 6, 7, 8, 9, 7, 8, 9, 10);
	k.top = _mm256_set1_epi32((int)0x80808080u);
	k.low7 = _mm256_set1_epi32(0x7f7f7f7f);
	k.mul7 = _mm256_set1_epi16((short)-32767);	/* bytes 1, 128 */
	k.mul14 = _mm256_set1_epi32(0x40000001);	/* words 1, 16384 */
	k.one = _mm256_set1_epi32(1);
	k.l = _mm256_set1_epi32(l32);
	k.h = _mm256_set1_epi32(h32);
	out = dst;
	while (pos < len && o < max) {
		const uint8_t *w;
		uint32_t c0, live = ~0u, st;
		uint64_t c;
		unsigned n;

		/* The hot loop: inside the input, room for 32 values, no
		 * varint over 4 bytes. */
		if (len - pos >= AVX2_WINDOW && max - o >= AVX2_BLOCK) {
			const uint8_t *hot_end = src + len - AVX2_WINDOW;
			const uint8_t *out_end = (uint8_t *)dst + (max - AVX2_BLOCK) * size;

			w = src + pos;
			while (w <= hot_end && out <= out_end) {
				c = avx2_cont(w, &c0);
				if (run_of_four(c))
					break;
				out = avx2_block(w, (~c0 << 1) | prev, out, &k, wide, clamp);
				prev = ~c0 >> 31;
				w += AVX2_BLOCK;
			}
			pos = (size_t)(w - src);
			o = (size_t)(out - (uint8_t *)dst) / size;
			if (pos >= len || o >= max)
				break;
		}
		/* One block at an edge, or with a long varint. */
		w = src + pos;
		if (len - pos < AVX2_WINDOW) {
			if (src[len - 1] & 0x80)
				break;	/* unterminated: the scalar code's error */
			memset(tail, 0, sizeof(tail));
			memcpy(tail, w, len - pos);
			w = tail;
			if (len - pos < AVX2_BLOCK)
				live = (1u << (len - pos)) - 1;
		}
		c = avx2_cont(w, &c0);
		st = ((~c0 << 1) | prev) & live;
		n = (unsigned)__builtin_popcount(st);
		if (run_of_four(c)) {
			/* A varint over 4 bytes starts in the block, or the run
			 * is broken there: the byte loop takes its varints. */
			if (st) {
				size_t s = pos + (unsigned)__builtin_ctz(st), got = 0;

				if (scalar_some(src, len, &s, n, out, &got, max - o, lo, hi,
						bad, wide) < 0)
					return -EBADMSG;
				out += (n < max - o ? n : max - o) * size;
			}
		} else if (max - o >= AVX2_BLOCK) {
			out = avx2_block(w, st, out, &k, wide, clamp);
		} else {
			size_t keep = n < max - o ? n : max - o;

			avx2_block(w, st, spill, &k, wide, clamp);
			memcpy(out, spill, keep * size);
			out += keep * size;
		}
		o += n;
		prev = ~c0 >> 31;
		pos += AVX2_BLOCK;
	}
	if (pos >= len)
		return (int64_t)o;
	/* At max, the rest is counted and checked; an unterminated end is
	 * decoded and refused by the scalar code. */
	return scalar_from(src, len, start_from(src, len, pos, prev), o, dst, max,
			   lo, hi, bad, wide);
}

AVX2_TARGET
int64_t pf_varint_avx2_i64(const uint8_t *src, size_t len, int64_t *dst,
			   size_t max, int64_t lo, int64_t hi, size_t *bad)
{
	if (lo <= 0 && hi >= (1 << 28) - 1)	/* no lane value is clamped */
		return avx2_run(src, len, dst, max, lo, hi, bad, 1, 0);
	return avx2_run(src, len, dst, max, lo, hi, bad, 1, 1);
}

AVX2_TARGET
int64_t pf_varint_avx2_i32(const uint8_t *src, size_t len, int32_t *dst,
			   size_t max, int32_t lo, int32_t hi, size_t *bad)
{
	if (lo <= 0 && hi >= (1 << 28) - 1)
		return avx2_run(src, len, dst, max, lo, hi, bad, 0, 0);
	return avx2_run(src, len, dst, max, lo, hi, bad, 0, 1);
}

bool pf_varint_have_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") &&
	       __builtin_cpu_supports("bmi2") &&
	       __builtin_cpu_supports("popcnt");
}
#endif
