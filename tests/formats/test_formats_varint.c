/* SPDX-License-Identifier: Apache-2.0 */
/* Packed varint decoding: every path the CPU has against a plain byte loop. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

/*
 * The reference is the obvious loop, written from the rule in varint.c
 * (and example.c): a varint ends at the first byte below 0x80, within 10
 * bytes and before the end, and is worth the low 64 bits of its 7-bit
 * groups.  Every case runs on every path this CPU supports, called
 * directly through pf_varint_paths, with src in a buffer of exactly len
 * bytes (ASan sees a read past it) and canaries after dst[max).
 */

typedef struct rng {
	uint64_t s;
} rng;

static uint64_t next(rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int64_t ref_decode(const uint8_t *src, size_t len, int64_t *vals,
			  size_t *bad)
{
	size_t pos = 0;
	int64_t n = 0;

	while (pos < len) {
		uint64_t v = 0;
		size_t i;

		for (i = 0; i < 10 && pos + i < len; i++) {
			v |= (uint64_t)(src[pos + i] & 0x7f) << (7 * i);
			if (!(src[pos + i] & 0x80))
				break;
		}
		if (i == 10 || pos + i == len) {
			*bad = pos;
			return -EBADMSG;
		}
		vals[n++] = (int64_t)v;
		pos += i + 1;
	}
	return n;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* Append the varint of v in exactly n bytes (n at least its length; the
 * extra bytes are overlong padding 0x80 .. 0x00). */
static size_t put_varint(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint8_t b = (uint8_t)(v & 0x7f);

		v >>= 7;
		p[i] = (uint8_t)(b | (i + 1 < n ? 0x80 : 0));
	}
	return n;
}

static unsigned varint_len(uint64_t v)
{
	return (unsigned)pf_varint_size(v);
}

static const int64_t bounds[][2] = {
	{ INT64_MIN, INT64_MAX },
	{ INT32_MIN, INT32_MAX },
	{ 0, 1000 },
	{ 100, 200 },
	{ -5, 5 },
	{ -100, -10 },			/* all of [0, 2^28) clamps to -10 */
	{ 1ll << 31, 1ll << 40 },	/* all of [0, 2^28) clamps to 2^31 */
	{ 127, 128 },
	{ 0, 0 },
};
#define NBOUNDS (sizeof(bounds) / sizeof(bounds[0]))

#define CANARY 0x5a

/*
 * Decode src[0..len) with every path, as int64 and int32, at this max
 * and these bounds, and compare with the reference: return value, *bad,
 * the values stored, and nothing stored past max.
 */
static void check_one(const uint8_t *src, size_t len, size_t max,
		      int64_t lo, int64_t hi, const char *what)
{
	int64_t *vals = malloc((len + 1) * sizeof(*vals));
	int64_t *d64 = malloc((max + 64) * sizeof(*d64));
	int32_t *d32 = malloc((max + 64) * sizeof(*d32));
	size_t want_bad = SIZE_MAX;
	int64_t want;
	int32_t lo32 = (int32_t)clamp(lo, INT32_MIN, INT32_MAX);
	int32_t hi32 = (int32_t)clamp(hi, INT32_MIN, INT32_MAX);

	cr_assert(vals && d64 && d32);
	want = ref_decode(src, len, vals, &want_bad);
	for (const pf_varint_ops *p = pf_varint_paths; p->name; p++) {
		size_t bad = SIZE_MAX;
		int64_t got;

		if (!p->supported())
			continue;
		memset(d64, CANARY, (max + 64) * sizeof(*d64));
		got = p->i64(src, len, d64, max, lo, hi, &bad);
		cr_assert_eq(got, want, "%s: %s i64 len %zu max %zu: got %lld want %lld",
			     what, p->name, len, max, (long long)got, (long long)want);
		if (want < 0) {
			cr_assert_eq(bad, want_bad, "%s: %s i64 len %zu: bad at %zu, want %zu",
				     what, p->name, len, bad, want_bad);
		} else {
			for (size_t i = 0; i < max && i < (size_t)want; i++)
				cr_assert_eq(d64[i], clamp(vals[i], lo, hi),
					     "%s: %s i64 len %zu value %zu [%lld, %lld]: got %lld want %lld",
					     what, p->name, len, i, (long long)lo,
					     (long long)hi, (long long)d64[i],
					     (long long)clamp(vals[i], lo, hi));
		}
		for (size_t i = max; i < max + 64; i++)
			cr_assert_eq(d64[i], (int64_t)0x5a5a5a5a5a5a5a5all,
				     "%s: %s i64 wrote past max %zu at %zu",
				     what, p->name, max, i);

		memset(d32, CANARY, (max + 64) * sizeof(*d32));
		bad = SIZE_MAX;
		got = p->i32(src, len, d32, max, lo32, hi32, &bad);
		cr_assert_eq(got, want, "%s: %s i32 len %zu max %zu: got %lld want %lld",
			     what, p->name, len, max, (long long)got, (long long)want);
		if (want < 0) {
			cr_assert_eq(bad, want_bad, "%s: %s i32 len %zu: bad at %zu, want %zu",
				     what, p->name, len, bad, want_bad);
		} else {
			for (size_t i = 0; i < max && i < (size_t)want; i++)
				cr_assert_eq(d32[i], (int32_t)clamp(vals[i], lo32, hi32),
					     "%s: %s i32 len %zu value %zu [%d, %d]: got %d want %d",
					     what, p->name, len, i, lo32, hi32, d32[i],
					     (int32_t)clamp(vals[i], lo32, hi32));
		}
		for (size_t i = max; i < max + 64; i++)
			cr_assert_eq(d32[i], 0x5a5a5a5a,
				     "%s: %s i32 wrote past max %zu at %zu",
				     what, p->name, max, i);
	}
	free(vals);
	free(d64);
	free(d32);
}

/* src copied into a buffer of exactly len bytes, at max = a few values
 * around the count, all bounds. */
static void check_all(const uint8_t *data, size_t len, const char *what)
{
	uint8_t *src = malloc(len ? len : 1);
	int64_t *vals = malloc((len + 1) * sizeof(*vals));
	size_t bad, count, maxes[8];
	int64_t n;

	cr_assert(src && vals);
	memcpy(src, data, len);
	n = ref_decode(src, len, vals, &bad);
	count = n < 0 ? len : (size_t)n;
	maxes[0] = 0;
	maxes[1] = 1;
	maxes[2] = count / 2;
	maxes[3] = count > 0 ? count - 1 : 0;
	maxes[4] = count;
	maxes[5] = count + 1;
	maxes[6] = count + 40;
	maxes[7] = 512;
	for (size_t m = 0; m < 8; m++)
		for (size_t b = 0; b < NBOUNDS; b++)
			check_one(src, len, maxes[m], bounds[b][0], bounds[b][1], what);
	free(src);
	free(vals);
}

/* A run of n varints, lengths drawn by kind; returns its length. */
enum mix { MIX_TOKENS, MIX_ONE, MIX_ANY, MIX_LONG, MIX_OVERLONG };

static size_t make_run(rng *r, uint8_t *out, size_t n, enum mix mix)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t v;
		unsigned nb;

		switch (mix) {
		case MIX_TOKENS:	/* Zipf-like ids < 32000: 1..3 bytes */
			v = next(r) % 32000;
			v >>= next(r) % 15;
			nb = varint_len(v);
			break;
		case MIX_ONE:
			v = next(r) % 128;
			nb = 1;
			break;
		case MIX_ANY:		/* every byte length 1..10 */
			nb = 1 + (unsigned)(next(r) % 10);
			v = nb == 10 ? next(r) | (1ull << 63) :
			    (next(r) & ((1ull << (7 * nb)) - 1)) | (1ull << (7 * nb - 7));
			if (nb == 1)
				v &= 0x7f;
			nb = varint_len(v);
			break;
		case MIX_LONG:		/* mostly short, a few of 5..10 bytes */
			v = next(r) % 16 ? next(r) % 20000 :
			    next(r) >> (next(r) % 30);
			nb = varint_len(v);
			break;
		default:		/* overlong encodings of small values */
			v = next(r) % 300;
			nb = varint_len(v) + (unsigned)(next(r) % 3);
			if (nb > 10)
				nb = 10;
			break;
		}
		len += put_varint(out + len, v, nb);
	}
	return len;
}

Test(varint, paths_are_listed_and_scalar_is_always_there)
{
	bool scalar = false;
	int n = 0;

	for (const pf_varint_ops *p = pf_varint_paths; p->name; p++, n++) {
		cr_assert(p->i64 && p->i32 && p->supported);
		if (!strcmp(p->name, "scalar"))
			scalar = p->supported();
		cr_log_info("varint path %s: %s", p->name,
			    p->supported() ? "supported" : "not on this CPU");
	}
	cr_assert(scalar);
	cr_assert_geq(n, 1);
}

Test(varint, known_values)
{
	/* 0, 1, 127, 128, 300, 2^31 - 1, -1 (10 bytes), INT64_MIN, 2^63 - 1 */
	static const uint8_t src[] = {
		0x00, 0x01, 0x7f, 0x80, 0x01, 0xac, 0x02,
		0xff, 0xff, 0xff, 0xff, 0x07,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
		0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
	};
	static const int64_t want[] = { 0, 1, 127, 128, 300, INT32_MAX, -1,
					INT64_MIN, INT64_MAX };
	static const int32_t want32[] = { 0, 1, 127, 128, 300, INT32_MAX, -1,
					  INT32_MIN, INT32_MAX };
	int64_t d[9];
	int32_t d32[9];

	for (const pf_varint_ops *p = pf_varint_paths; p->name; p++) {
		if (!p->supported())
			continue;
		cr_assert_eq(p->i64(src, sizeof(src), d, 9, INT64_MIN, INT64_MAX, NULL), 9);
		cr_assert_arr_eq(d, want, sizeof(want), "%s", p->name);
		cr_assert_eq(p->i32(src, sizeof(src), d32, 9, INT32_MIN, INT32_MAX, NULL), 9);
		cr_assert_arr_eq(d32, want32, sizeof(want32), "%s", p->name);
	}
	check_all(src, sizeof(src), "known");
}

Test(varint, tenth_byte_keeps_only_bit_63)
{
	/* A 10th byte of 0x7f: bits past 64 are dropped, as protobuf-c and
	 * example.c do, so this is 2^63 | 5 and not an error. */
	uint8_t src[10] = { 0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
			    0x80, 0x7f };
	uint8_t src2[10] = { 0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
			     0x80, 0x7e };
	int64_t d;

	for (const pf_varint_ops *p = pf_varint_paths; p->name; p++) {
		if (!p->supported())
			continue;
		cr_assert_eq(p->i64(src, 10, &d, 1, INT64_MIN, INT64_MAX, NULL), 1);
		cr_assert_eq((uint64_t)d, (1ull << 63) | 5);
		cr_assert_eq(p->i64(src2, 10, &d, 1, INT64_MIN, INT64_MAX, NULL), 1);
		cr_assert_eq(d, 5);
	}
	check_all(src, 10, "10th byte");
}

Test(varint, eleven_bytes_and_unterminated_are_errors_at_their_start)
{
	uint8_t src[64];
	size_t bad;

	/* "1, 2, then 11 bytes": error at byte 2. */
	src[0] = 1;
	src[1] = 2;
	memset(src + 2, 0x80, 10);
	src[12] = 0x01;
	for (const pf_varint_ops *p = pf_varint_paths; p->name; p++) {
		int64_t d[4];

		if (!p->supported())
			continue;
		bad = 0;
		cr_assert_eq(p->i64(src, 13, d, 4, INT64_MIN, INT64_MAX, &bad), -EBADMSG);
		cr_assert_eq(bad, 2, "%s: %zu", p->name, bad);
		bad = 0;
		cr_assert_eq(p->i64(src, 12, d, 4, INT64_MIN, INT64_MAX, &bad), -EBADMSG);
		cr_assert_eq(bad, 2, "%s: %zu", p->name, bad);
		cr_assert_eq(p->i64(src, 12, d, 0, INT64_MIN, INT64_MAX, NULL), -EBADMSG);
		/* a trailing 0x80: unterminated at the last byte */
		bad = 0;
		cr_assert_eq(p->i64(src, 3, d, 4, INT64_MIN, INT64_MAX, &bad), -EBADMSG);
		cr_assert_eq(bad, 2, "%s: %zu", p->name, bad);
	}
	check_all(src, 13, "eleven");
	check_all(src, 12, "eleven cut");
}

Test(varint, empty_run)
{
	for (const pf_varint_ops *p = pf_varint_paths; p->name; p++) {
		if (!p->supported())
			continue;
		cr_assert_eq(p->i64(NULL, 0, NULL, 0, INT64_MIN, INT64_MAX, NULL), 0);
	}
	cr_assert_eq(pf_varint_decode_i64(NULL, 0, NULL, 0, INT64_MIN, INT64_MAX, NULL), 0);
	cr_assert_eq(pf_varint_decode_i32(NULL, 0, NULL, 0, INT32_MIN, INT32_MAX, NULL), 0);
}

Test(varint, random_runs_every_count_and_mix)
{
	rng r = { 42 };
	uint8_t *buf = malloc(1001 * 10);
	static const size_t counts[] = { 0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32,
					 33, 40, 63, 64, 65, 100, 127, 128,
					 129, 255, 300, 511, 512, 513, 777,
					 1000 };

	cr_assert_not_null(buf);
	for (int mix = MIX_TOKENS; mix <= MIX_OVERLONG; mix++)
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			char what[64];
			size_t len = make_run(&r, buf, counts[c], (enum mix)mix);

			snprintf(what, sizeof(what), "mix %d count %zu", mix, counts[c]);
			check_all(buf, len, what);
		}
	free(buf);
}

Test(varint, random_lengths_0_to_1000_values)
{
	rng r = { 7 };
	uint8_t *buf = malloc(1001 * 10);

	cr_assert_not_null(buf);
	for (int i = 0; i < 120; i++) {
		size_t n = next(&r) % 1001;
		enum mix mix = (enum mix)(next(&r) % 5);
		size_t len = make_run(&r, buf, n, mix);
		size_t max = next(&r) % (n + 50);

		for (size_t b = 0; b < NBOUNDS; b++)
			check_one(buf, len, max, bounds[b][0], bounds[b][1], "random");
	}
	free(buf);
}

Test(varint, every_truncation)
{
	rng r = { 99 };
	uint8_t buf[400 * 10];

	for (int mix = MIX_TOKENS; mix <= MIX_OVERLONG; mix++) {
		size_t len = make_run(&r, buf, 150, (enum mix)mix);

		for (size_t cut = 0; cut <= len; cut++) {
			uint8_t *src = malloc(cut ? cut : 1);

			memcpy(src, buf, cut);
			check_one(src, cut, 512, INT64_MIN, INT64_MAX, "cut");
			check_one(src, cut, cut / 3, 0, 1000, "cut, short max");
			free(src);
		}
	}
}

Test(varint, continuation_runs_at_every_offset)
{
	/* A run of k continuation bytes (k = 1..14, so 10 is the limit)
	 * at every offset in 1-byte and 2-byte neighbours, across block
	 * boundaries, terminated or reaching the end. */
	uint8_t buf[200];

	for (size_t k = 1; k <= 14; k++)
		for (size_t at = 0; at < 100; at++)
			for (int two = 0; two < 2; two++)
				for (int term = 0; term < 2; term++) {
					size_t len = 0;

					while (len < at) {
						if (two && len + 2 <= at) {
							buf[len++] = 0x81;
							buf[len++] = 0x01;
						} else {
							buf[len++] = 0x05;
						}
					}
					memset(buf + len, 0xff, k);
					len += k;
					if (term) {
						buf[len++] = 0x01;
						for (int i = 0; i < 40; i++)
							buf[len++] = (uint8_t)(i & 0x7f);
					}
					uint8_t *src = malloc(len);

					memcpy(src, buf, len);
					check_one(src, len, 512, INT64_MIN, INT64_MAX, "run");
					check_one(src, len, 512, INT32_MIN, INT32_MAX, "run 32");
					check_one(src, len, 3, INT64_MIN, INT64_MAX, "run max 3");
					free(src);
				}
}

Test(varint, block_fills_and_room)
{
	/* The AVX-512 path decodes 60-byte blocks, 48 values a block with
	 * a fourth group of 16 for fuller ones, while there is room for 64
	 * values.  Blocks from 12 varints (5 bytes each: the scalar code) to
	 * 60 (1 byte each), a 2-, 3- or 4-byte varint at every offset of the
	 * first three blocks (ending on a block's last byte, starting in a
	 * block's 4-byte lead), and max around the count and 64 past it. */
	uint8_t buf[400];

	for (unsigned wide = 2; wide <= 5; wide++)
		for (size_t at = 0; at < 180; at++) {
			size_t len = 0, count = 0;
			rng r = { at * 8 + wide };

			while (len < at) {
				buf[len++] = (uint8_t)(next(&r) & 0x7f);
				count++;
			}
			len += put_varint(buf + len, 3000 + at, wide);
			count++;
			for (int i = 0; i < 120; i++, count++)
				len += put_varint(buf + len, next(&r) % (i % 3 ? 128 : 16384),
						  i % 3 ? 1 : 2);
			uint8_t *src = malloc(len);
			static const size_t extra[] = { 0, 1, 47, 63, 64, 65, 200 };

			memcpy(src, buf, len);
			for (size_t e = 0; e < sizeof(extra) / sizeof(extra[0]); e++) {
				check_one(src, len, count + extra[e], INT64_MIN, INT64_MAX, "fill");
				check_one(src, len, count + extra[e], 100, 5000, "fill clamp");
			}
			check_one(src, len, count > 64 ? count - 64 : 0, INT64_MIN,
				  INT64_MAX, "fill, 64 short");
			free(src);
		}
}

Test(varint, random_bytes)
{
	rng r = { 2024 };
	uint8_t buf[300];

	for (int i = 0; i < 3000; i++) {
		size_t len = next(&r) % sizeof(buf);
		/* continuation bits dense or sparse */
		unsigned p = (unsigned)(next(&r) % 8);

		for (size_t k = 0; k < len; k++) {
			buf[k] = (uint8_t)next(&r);
			if (next(&r) % 8 >= p)
				buf[k] &= 0x7f;
		}
		uint8_t *src = malloc(len ? len : 1);

		memcpy(src, buf, len);
		check_one(src, len, next(&r) % 300, INT64_MIN, INT64_MAX, "bytes");
		check_one(src, len, 512, -3, 90, "bytes clamp");
		free(src);
	}
}

Test(varint, max_values_and_negatives)
{
	rng r = { 5 };
	uint8_t buf[600 * 10];
	size_t len = 0;

	for (int i = 0; i < 600; i++) {
		static const uint64_t special[] = {
			0, 1, 127, 128, 16383, 16384, (1u << 21) - 1, 1u << 21,
			(1u << 28) - 1, 1u << 28, INT32_MAX, 1ull << 31,
			UINT32_MAX, INT64_MAX, 1ull << 63, UINT64_MAX,
			(uint64_t)-2, (uint64_t)INT32_MIN,
		};
		uint64_t v = special[next(&r) % (sizeof(special) / sizeof(special[0]))];

		len += put_varint(buf + len, v, varint_len(v));
	}
	check_all(buf, len, "specials");
}

Test(varint, int32_limits_at_every_offset)
{
	/* Into int32 a value saturates; the vector paths take varints of 1-4
	 * bytes (values < 2^28) in their lanes and leave longer ones to the
	 * scalar code, per block.  Each value at and around the int32 limits,
	 * and at the 4-byte limit, at every offset of a run of token ids
	 * (so in every lane and group of the first blocks, and across their
	 * edges), decoded into int32 (saturated, and under a clip) and int64,
	 * with max at the count and short of it. */
	static const uint64_t edge[] = {
		INT32_MAX, (uint64_t)INT32_MAX + 1, (uint64_t)INT32_MIN,
		(uint64_t)INT32_MIN - 1, (uint64_t)-1, (1u << 28) - 1, 1u << 28,
		UINT32_MAX, (uint64_t)UINT32_MAX + 1, (1ull << 35) - 1,
	};
	uint8_t buf[160 * 10];

	for (size_t e = 0; e < sizeof(edge) / sizeof(edge[0]); e++)
		for (size_t at = 0; at < 100; at++) {
			rng r = { e * 1000 + at };
			size_t len = 0, count = 0;

			for (; count < at; count++)
				len += put_varint(buf + len, next(&r) % 20000,
						  varint_len(next(&r) % 20000));
			len += put_varint(buf + len, edge[e], varint_len(edge[e]));
			for (count++; count < at + 60; count++) {
				uint64_t v = next(&r) % 20000;

				len += put_varint(buf + len, v, varint_len(v));
			}
			uint8_t *src = malloc(len);

			memcpy(src, buf, len);
			check_one(src, len, count, INT32_MIN, INT32_MAX, "int32 edge");
			check_one(src, len, count, INT64_MIN, INT64_MAX, "int64 edge");
			check_one(src, len, count, -1000, 1000000, "clip edge");
			check_one(src, len, at + 1, INT32_MIN, INT32_MAX, "int32 edge, max after it");
			check_one(src, len, at, INT32_MIN, INT32_MAX, "int32 edge, max before it");
			free(src);
		}
}

Test(varint, runs_end_at_every_offset_of_the_last_blocks)
{
	/* The AVX2 path reads 40 bytes for a 32-byte block and takes the
	 * blocks near the end through a zeroed copy: runs of 1- to 4-byte
	 * varints ending at every offset past the last whole window, whole
	 * and cut inside their last varint (an error at its start). */
	uint8_t buf[200];

	for (unsigned wide = 1; wide <= 4; wide++)
		for (size_t len = 8; len < 140; len++) {
			rng r = { len * 4 + wide };
			size_t n = 0;

			while (n + wide < len) {
				uint64_t v = next(&r) % 300;

				n += put_varint(buf + n, v, varint_len(v));
			}
			/* the last varint: `wide` bytes, ending at or past len */
			n += put_varint(buf + n, 5, wide);
			for (size_t cut = len; cut <= n && cut <= len + 3; cut++) {
				uint8_t *src = malloc(cut);

				memcpy(src, buf, cut);
				check_one(src, cut, 512, INT32_MIN, INT32_MAX, "end");
				check_one(src, cut, 512, INT64_MIN, INT64_MAX, "end 64");
				free(src);
			}
		}
}

Test(varint, dispatch_and_set_impl)
{
	const char *name = pf_varint_impl();
	uint8_t src[3] = { 0x96, 0x01, 0x05 };
	int64_t d[2];
	int32_t d32[2];

	cr_assert_not_null(name);
	cr_assert_eq(pf_varint_set_impl("no-such-path"), -EINVAL);
	for (const pf_varint_ops *p = pf_varint_paths; p->name; p++) {
		int ret = pf_varint_set_impl(p->name);

		if (!p->supported()) {
			cr_assert_eq(ret, -ENOTSUP);
			continue;
		}
		cr_assert_eq(ret, 0);
		cr_assert_str_eq(pf_varint_impl(), p->name);
		cr_assert_eq(pf_varint_decode_i64(src, 3, d, 2, INT64_MIN, INT64_MAX, NULL), 2);
		cr_assert(d[0] == 150 && d[1] == 5);
		cr_assert_eq(pf_varint_decode_i32(src, 3, d32, 2, 0, 100, NULL), 2);
		cr_assert(d32[0] == 100 && d32[1] == 5);
	}
}

/* The environment picks the path at first use: this runs in its own
 * process (Criterion forks per test), so the choice is still open. */
Test(varint, podfeed_simd_environment)
{
	setenv("PODFEED_SIMD", "scalar", 1);
	cr_assert_str_eq(pf_varint_impl(), "scalar");
}

Test(varint, podfeed_simd_unknown_name_is_the_default)
{
	const char *best = NULL;

	for (const pf_varint_ops *p = pf_varint_paths; p->name && !best; p++)
		if (p->supported())
			best = p->name;
	setenv("PODFEED_SIMD", "sse9", 1);
	cr_assert_str_eq(pf_varint_impl(), best);
}
