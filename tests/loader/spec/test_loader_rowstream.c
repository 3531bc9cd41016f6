/* SPDX-License-Identifier: Apache-2.0 */
/* pf_spec_decode()'s long rows, written with streaming stores: at every
 * offset in a cache line, with PODFEED_STREAM=0 and under PODFEED_SIMD=avx2
 * and =scalar, the same bytes as the slow path and nothing written around
 * the row.  The decode's comparisons on short rows are
 * test_loader_specdecode.c's. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "formats_internal.h"
#include "specdecode_util.h"

/*
 * Long int rows (1 KiB and more) are staged in the arena and written a
 * whole 64-byte line per streaming store, the partial lines at either
 * end with ordinary stores, the lines past the values from a line of the
 * pad.  Each row here is placed at every offset in a line its dtype
 * allows, between guard bytes, with value counts around the line and
 * row boundaries and past the row, several pads and a clip; the bytes
 * must be the slow path's and the guards untouched.
 */
static void streamed_row(const char *text, size_t count, size_t off, uint64_t seed)
{
	pf_spec *s = sd_spec_of(text);
	size_t size = pf_dtype_size(s->f[0].dtype), bytes = (size_t)s->f[0].len * size;
	int64_t *vals = malloc((count + 1) * sizeof(*vals));
	uint8_t *mem = aligned_alloc(64, (bytes + 256 + 63) / 64 * 64), *want = malloc(bytes);
	pf_feature f = { .name = "v", .name_len = 1, .kind = PF_KIND_INT64,
			 .count = (uint32_t)count, .v.int64s = vals };
	uint8_t *dst[1], *slow[1] = { want };
	pf_arena a, sa;
	pf_error err;
	pf_example ex;
	sd_rng r = { seed };
	sd_buf *b;
	char what[160];

	cr_assert(vals && mem && want);
	for (size_t i = 0; i < count; i++)
		vals[i] = sd_next(&r) % 4 ? (int64_t)(sd_next(&r) % 32000) :
			  (int64_t)sd_next(&r) >> (sd_next(&r) % 64);
	b = sd_encode(&f, 1);
	snprintf(what, sizeof(what), "'%s', %zu values at offset %zu", text, count, off);
	memset(mem, 0xa5, bytes + 256);
	dst[0] = mem + 64 + off;
	cr_assert_eq(pf_arena_init(&a, PF_ARENA_BYTES_FOR(b->n)), 0);
	cr_assert_eq(pf_arena_init(&sa, PF_ARENA_BYTES_FOR(b->n)), 0);
	a.used = 3;
	pf_error_clear(&err);
	cr_assert_eq(pf_spec_decode(s, b->b, b->n, &a, dst, &err), 0, "%s: %s", what, err.msg);
	cr_assert_eq(a.used, 3, "%s: arena not given back", what);
	cr_assert_eq(pf_example_decode(b->b, b->n, &sa, &ex, &err), 0);
	cr_assert_eq(pf_spec_apply_to(s, &ex, slow, &err), 0);
	cr_assert(!memcmp(dst[0], want, bytes), "%s [%s]: differs", what, pf_varint_impl());
	for (size_t i = 0; i < 64 + off; i++)
		cr_assert_eq(mem[i], 0xa5, "%s: wrote %zu bytes before the row", what,
			     64 + off - i);
	for (size_t i = 64 + off + bytes; i < bytes + 256; i++)
		cr_assert_eq(mem[i], 0xa5, "%s: wrote %zu bytes past the row", what,
			     i - (64 + off + bytes));
	pf_arena_release(&a);
	pf_arena_release(&sa);
	free(b);
	free(want);
	free(mem);
	free(vals);
	free(s);
}

Test(specdecode, long_rows_streamed_at_every_offset, .timeout = 120)
{
	static const char *const texts[] = {
		"v:int64[512]", "v:int32[512]:pad=-1", "v:int64[200]:pad=7",
		"v:int32[300]:pad=-3:clip=0:20000", "v:int64[128]:pad=-1",
		"v:int32[256]", "v:int64[2000]:clip=-5:100000:pad=9",
	};
	static const size_t counts[] = { 0, 1, 7, 8, 15, 16, 17, 63, 64, 65,
					 127, 128, 129, 199, 200, 201, 255,
					 256, 257, 300, 301, 511, 512, 513, 700,
					 1999, 2000, 2100 };

	for (const pf_varint_ops *p = pf_varint_paths; p->name; p++) {
		if (!p->supported())
			continue;
		cr_assert_eq(pf_varint_set_impl(p->name), 0);
		for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
			pf_spec *s = sd_spec_of(texts[t]);
			size_t size = pf_dtype_size(s->f[0].dtype);

			for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
				if (counts[c] > 2 * s->f[0].len + 100)
					continue;
				for (size_t off = 0; off < 64; off += size)
					streamed_row(texts[t], counts[c], off,
						     t * 1000 + c * 64 + off);
			}
			free(s);
		}
	}
}

/* PODFEED_STREAM=0 (ordinary stores) is read at first use: this runs
 * in its own process.  Same bytes. */
Test(specdecode, streaming_off_same_bytes)
{
	setenv("PODFEED_STREAM", "0", 1);
	for (size_t off = 0; off < 64; off += 8)
		streamed_row("v:int64[512]:pad=-1", 300, off, off);
	streamed_row("v:int32[512]", 600, 4, 1);
}

/* PODFEED_SIMD=avx2 and =scalar also choose the streaming stores of a
 * machine without AVX-512 (AVX) or without AVX (SSE2), read at first
 * use: each in its own process, on whatever this CPU has.  Same bytes,
 * at every offset of the row in its line. */
static void streamed_rows_under(const char *simd)
{
	setenv("PODFEED_SIMD", simd, 1);
	for (size_t off = 0; off < 64; off += 4) {
		streamed_row("v:int32[512]:pad=-1", 300, off, off);
		streamed_row("v:int32[300]:pad=-3:clip=0:20000", 301, off, off + 1);
	}
	for (size_t off = 0; off < 64; off += 8)
		streamed_row("v:int64[512]:pad=7", 700, off, off + 2);
}

Test(specdecode, podfeed_simd_avx2_streams_the_same_bytes)
{
	streamed_rows_under("avx2");
}

Test(specdecode, podfeed_simd_scalar_streams_the_same_bytes)
{
	streamed_rows_under("scalar");
}
