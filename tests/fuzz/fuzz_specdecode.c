/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz harness: pf_spec_decode() against pf_example_decode() + pf_spec_apply_to(), on every varint path. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "formats_internal.h"

/*
 * Input: one byte choosing a spec from the table below (its value modulo
 * the table's size) and where in a 64-byte line the fast path's rows
 * start (the rest of it: 0, 8, ... 56 bytes past a line), then the
 * record.  The record is decoded with each varint path the CPU has, both
 * ways: the slow path into destinations of exactly the feature's size
 * (so ASan sees a write past one), the fast path into rows at that offset
 * with guard bytes before and after (long int rows are streamed a whole
 * line at a time, partial lines at either end), both prefilled alike.
 * The harness aborts when the two ways disagree on the return value, the
 * error (code, offset, message) or, on success, on any output byte, when
 * the fast path wrote a guard byte, or when pf_spec_decode() does not
 * give the arena back as it found it.
 *
 * The specs name the features of the seed records (tests/fuzz/corpus/
 * specdecode: the example corpus with a spec byte in front) and short
 * names ("a", "k", ...) that mutated keys hit easily, with every dtype
 * and option.
 */

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "fuzz_specdecode: %s:%d: %s\n",     \
				__FILE__, __LINE__, #cond);                  \
			abort();                                             \
		}                                                            \
	} while (0)

static const char *const spec_texts[] = {
	"tokens:int32[512],label:int32[1]",
	"tokens:int64[512],label:int64[1]",
	"input_ids:int32[64]:pad=-1,label:int64[2]",
	"input_ids:int64[300]:clip=0:1000",
	"input_ids:int32[16]:clip=-5:100000,a:int32[2]",
	"a:int32[4],b:int64[4]:required",
	"a:float32[4]:scale=0.5:shift=-1,k:float32[3]:clip=-2:2",
	"a:int32[3]:clip=-5:5,i:int64[2]:clip=-100:-10,f:int64[3]",
	"a:bytes[8]:pad=32,b:bytes[1],m:bytes[3]",
	"f:float32[16]:pad=-0,i:int32[4]:required",
	"a:float32[2],k:int32[2],m:int64[2],z:bytes[2]",
	"i:float32[32],f:int32[8]",
	"image_floats:float32[784],image_class:int32[1]",
	"image_floats:int32[10]:clip=0:1,image_class:float32[1]:scale=2",
	"fare:float32[1],company:bytes[12],dropoff_latitude:int64[1]",
	"species:int32[1],body_mass_g:float32[1]:required,flipper_length_mm:int64[1]",
	"source_id:int32[64],target_word:bytes[5],example_index:int64[1]",
	"k:int64[1]:clip=-9223372036854775808:0,z:int32[1]:clip=1:1",
	/* optional features: absent ones are their defaults */
	"a:int32[4]:default=-1,b:int64[4]:default=7,f:float32[3]:default=0.5,m:bytes[3]:default=9",
	"tokens:int32[64]:default=0,label:int64[1]:pad=4:default=-1",
	"input_ids:int32[16]:pad=-1:default=3,image_class:int64[2]:default=0",
};
#define NSPECS (sizeof(spec_texts) / sizeof(spec_texts[0]))

static pf_spec specs[NSPECS];
static bool parsed;

static void parse_specs(void)
{
	pf_error err;

	for (size_t i = 0; i < NSPECS; i++) {
		if (pf_spec_parse(&specs[i], spec_texts[i], &err)) {
			fprintf(stderr, "fuzz_specdecode: '%s': %s\n",
				spec_texts[i], err.msg);
			abort();
		}
	}
	parsed = true;
}

#define GUARD 64u

static void compare(const pf_spec *spec, const uint8_t *rec, size_t len,
		    size_t off)
{
	uint8_t *fast[PF_SPEC_MAX_FEATURES], *slow[PF_SPEC_MAX_FEATURES];
	uint8_t *mem[PF_SPEC_MAX_FEATURES];
	const size_t skew = 3;
	pf_arena fa, sa;
	pf_error ferr, serr;
	pf_example ex;
	int fret, sret;

	CHECK(!pf_arena_init(&fa, skew + PF_ARENA_BYTES_FOR(len)));
	CHECK(!pf_arena_init(&sa, PF_ARENA_BYTES_FOR(len)));
	fa.used = skew;
	for (uint32_t i = 0; i < spec->n; i++) {
		size_t size = (size_t)spec->f[i].len * pf_dtype_size(spec->f[i].dtype);

		mem[i] = aligned_alloc(64, (GUARD + off + size + GUARD + 63) / 64 * 64);
		slow[i] = malloc(size);
		CHECK(mem[i] && slow[i]);
		memset(mem[i], 0xa5, GUARD + off + size + GUARD);
		fast[i] = mem[i] + GUARD + off;
		memset(slow[i], 0xa5, size);
	}
	pf_error_clear(&ferr);
	pf_error_clear(&serr);
	fret = pf_spec_decode(spec, rec, len, &fa, fast, &ferr);
	sret = pf_example_decode(rec, len, &sa, &ex, &serr);
	if (!sret)
		sret = pf_spec_apply_to(spec, &ex, slow, &serr);
	if (fret != sret || ferr.code != serr.code ||
	    ferr.offset != serr.offset || strcmp(ferr.msg, serr.msg)) {
		fprintf(stderr, "fuzz_specdecode [%s]: fast %d (%s), slow %d (%s)\n",
			pf_varint_impl(), fret, ferr.msg, sret, serr.msg);
		abort();
	}
	CHECK(fa.used == skew);
	for (uint32_t i = 0; i < spec->n; i++) {
		size_t size = (size_t)spec->f[i].len * pf_dtype_size(spec->f[i].dtype);

		if (!fret && memcmp(fast[i], slow[i], size)) {
			fprintf(stderr, "fuzz_specdecode [%s]: feature '%s' differs\n",
				pf_varint_impl(), spec->f[i].name);
			abort();
		}
		for (size_t k = 0; k < GUARD + off; k++)
			CHECK(mem[i][k] == 0xa5);
		for (size_t k = 0; k < GUARD; k++)
			CHECK(fast[i][size + k] == 0xa5);
		free(mem[i]);
		free(slow[i]);
	}
	pf_arena_release(&fa);
	pf_arena_release(&sa);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *rec;

	if (!parsed)
		parse_specs();
	if (!size)
		return 0;
	/* A copy of exactly the record: reads past it are caught. */
	rec = malloc(size - 1 ? size - 1 : 1);
	CHECK(rec);
	memcpy(rec, data + 1, size - 1);
	for (const pf_varint_ops *p = pf_varint_paths; p->name; p++) {
		if (!p->supported())
			continue;
		CHECK(!pf_varint_set_impl(p->name));
		compare(&specs[data[0] % NSPECS], rec, size - 1,
			8u * (data[0] / NSPECS % 8u));
	}
	free(rec);
	return 0;
}
