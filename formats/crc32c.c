/* SPDX-License-Identifier: Apache-2.0 */
/* CRC32C (Castagnoli): SSE4.2 instruction when present, else slicing-by-8. */
#include <pthread.h>
#include <string.h>

#include "formats_internal.h"

#define PF_CRC32C_POLY 0x82F63B78u	/* reflected Castagnoli polynomial */

static uint32_t crc_table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (PF_CRC32C_POLY & (0u - (c & 1u)));
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
					  crc_table[0][crc_table[t - 1][i] & 0xff];
}

uint32_t pf_crc32c_portable(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;

	pthread_once(&table_once, build_table);
	crc = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
		len--;
	}
	while (len >= 8) {
		uint64_t w = pf_load_le64(p) ^ crc;
		crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
		      crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
		      crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
		      crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

/*
 * The crc32 instruction has a latency of 3 cycles and a throughput of 1, so
 * one dependent chain leaves two thirds of the unit idle.  Three independent
 * chains over three thirds of a block, merged with a shift-by-multiplication
 * in GF(2), run close to 8 bytes a cycle on long buffers.
 */
#define PF_CRC_LANE 1024u	/* bytes per lane in the 3-way loop */

static uint32_t shift_table[4][256];	/* x^(8*LANE) mod P, by byte */

__attribute__((target("sse4.2")))
static uint32_t crc32c_sse42(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t c0 = ~crc;

	while (len && ((uintptr_t)p & 7)) {
		c0 = _mm_crc32_u8((uint32_t)c0, *p++);
		len--;
	}
	while (len >= 3 * PF_CRC_LANE) {
		uint64_t c1 = 0, c2 = 0;
		const uint8_t *end = p + PF_CRC_LANE;

		while (p < end) {
			c0 = _mm_crc32_u64(c0, pf_load_le64(p));
			c1 = _mm_crc32_u64(c1, pf_load_le64(p + PF_CRC_LANE));
			c2 = _mm_crc32_u64(c2, pf_load_le64(p + 2 * PF_CRC_LANE));
			p += 8;
		}
		/* c0 covers lane 0; advance it past lane 1 and fold in c1,
		 * then past lane 2 and fold in c2. */
		uint32_t s = (uint32_t)c0;
		s = shift_table[0][s & 0xff] ^ shift_table[1][(s >> 8) & 0xff] ^
		    shift_table[2][(s >> 16) & 0xff] ^ shift_table[3][s >> 24];
		s ^= (uint32_t)c1;
		s = shift_table[0][s & 0xff] ^ shift_table[1][(s >> 8) & 0xff] ^
		    shift_table[2][(s >> 16) & 0xff] ^ shift_table[3][s >> 24];
		c0 = s ^ (uint32_t)c2;
		p += 2 * PF_CRC_LANE;
		len -= 3 * PF_CRC_LANE;
	}
	while (len >= 8) {
		c0 = _mm_crc32_u64(c0, pf_load_le64(p));
		p += 8;
		len -= 8;
	}
	while (len--)
		c0 = _mm_crc32_u8((uint32_t)c0, *p++);
	return ~(uint32_t)c0;
}

/* a * b modulo P, both reflected (bit 31 is x^0). */
static uint32_t gf2_mulmod(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	for (uint32_t m = 1u << 31; m; m >>= 1) {
		if (a & m)
			prod ^= b;
		b = (b >> 1) ^ (PF_CRC32C_POLY & (0u - (b & 1u)));
	}
	return prod;
}

/* x^n modulo P, by squaring. */
static uint32_t gf2_xpow(uint64_t n)
{
	uint32_t r = 1u << 31, sq = 1u << 30;	/* x^0, x^1 */

	for (; n; n >>= 1) {
		if (n & 1)
			r = gf2_mulmod(sq, r);
		sq = gf2_mulmod(sq, sq);
	}
	return r;
}

/* shift_table[b][i]: the register i << 8b after a lane of zero bytes
 * (no pre/post inversion), i.e. times x^(8 x lane) modulo P.  (Shifting
 * bit by bit took 8 M steps, 10-20 ms of every process's first CRC.) */
static void build_shift_table(void)
{
	uint32_t shift = gf2_xpow(8ull * PF_CRC_LANE);

	for (int b = 0; b < 4; b++)
		for (uint32_t i = 0; i < 256; i++)
			shift_table[b][i] = gf2_mulmod(shift, i << (8 * b));
}
#endif

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);
static crc_fn crc_impl = pf_crc32c_portable;
static const char *crc_impl_name = "portable";
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2")) {
		build_shift_table();
		crc_impl = crc32c_sse42;
		crc_impl_name = "sse4.2";
	}
#endif
}

uint32_t pf_crc32c(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&choose_once, choose);
	return crc_impl(crc, data, len);
}

const char *pf_crc32c_impl(void)
{
	pthread_once(&choose_once, choose);
	return crc_impl_name;
}
