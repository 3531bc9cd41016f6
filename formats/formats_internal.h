/* SPDX-License-Identifier: Apache-2.0 */
/* Private to formats/ (and its tests and benchmarks): little-endian helpers,
 * shared constants, and the reference paths the tests compare against. */
#ifndef PF_FORMATS_INTERNAL_H
#define PF_FORMATS_INTERNAL_H

#include <string.h>
#include "common_internal.h"
#include "pf_formats.h"

static inline uint32_t pf_load_le32(const void *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static inline uint64_t pf_load_le64(const void *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* zstd's allocations through pf_malloc() (alloc_internal.h's callbacks),
 * for ZSTD_create*_advanced(): define ZSTD_STATIC_LINKING_ONLY before
 * including zstd.h.  Those functions are zstd's experimental API, but
 * ZSTD_customMem has not changed since zstd 1.0, and libzstd.so exports
 * them (Debian 12's 1.5.4 does). */
#define PF_ZSTD_MEM ((ZSTD_customMem){ pf_alloc_cb, pf_free_cb, NULL })

/* Skip mode (tfrecord.c, for the record stream over a codec): the bytes
 * fed so far end where a frame or member was dropped (what names it:
 * "zstd frame", "gzip member").  The next calls of next() read out the
 * whole records still held, then drop what is left unreported (it belongs
 * to that drop), and look for a record from the next byte fed (reporting
 * a span when the next unit does not start with one).  Call when next()
 * has returned 0. */
void pf_tfr_reader_cut(pf_tfr_reader *r, const char *what);
/* The number the next delivered record gets. */
uint64_t pf_tfr_reader_next_index(const pf_tfr_reader *r);

/* Bump-allocate size bytes, 8-byte aligned, from a (arena.c); NULL when
 * they do not fit.  Shared by the fast and the reference Example decoders. */
void *pf_arena_alloc(pf_arena *a, size_t size);

/* The portable CRC32C path alone (for tests and benchmarks). */
uint32_t pf_crc32c_portable(uint32_t crc, const void *data, size_t len);

/* The reference Example decoders, through protobuf-c (example_ref.c),
 * filling the same structure as pf_example_decode() and
 * pf_sequence_example_decode() (for tests, fuzzing and benchmarks). */
int pf_example_decode_ref(const void *rec, size_t len, pf_arena *arena,
			  pf_example *out, pf_error *err);
int pf_sequence_example_decode_ref(const void *rec, size_t len,
				   pf_arena *arena, pf_example *out,
				   pf_error *err);

/* Use the named varint path from now on, for tests and benchmarks (not
 * while other threads decode).  @return 0, -ENOTSUP when the CPU lacks
 * it, -EINVAL for an unknown name. */
int pf_varint_set_impl(const char *name);

/* One implementation of the packed varint decoder (varint.c).  The
 * table pf_varint_paths lists them best first, ending with a NULL name;
 * tests run each one the CPU supports. */
typedef struct pf_varint_ops {
	const char *name;		/* "avx512", "avx2", "scalar" */
	bool (*supported)(void);	/* does this CPU have it */
	int64_t (*i64)(const uint8_t *src, size_t len, int64_t *dst, size_t max,
		       int64_t lo, int64_t hi, size_t *bad);
	int64_t (*i32)(const uint8_t *src, size_t len, int32_t *dst, size_t max,
		       int32_t lo, int32_t hi, size_t *bad);
} pf_varint_ops;

extern const pf_varint_ops pf_varint_paths[];

static inline void pf_store_le32(void *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void pf_store_le64(void *p, uint64_t v) { memcpy(p, &v, 8); }

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "podfeed's formats assume a little-endian host"
#endif

/* zstd frame magic numbers (RFC 8878) and the seekable format's. */
#define PF_ZSTD_MAGIC 0xFD2FB528u
#define PF_ZSTD_SKIPPABLE_MASK 0xFFFFFFF0u
#define PF_ZSTD_SKIPPABLE_BASE 0x184D2A50u
#define PF_SKIP_PADDING 0x184D2A50u	/* padding frames */
#define PF_SKIP_INDEX 0x184D2A5Bu	/* podfeed's index */
#define PF_SKIP_SEEKTABLE 0x184D2A5Eu	/* zstd seekable seek table */
#define PF_SEEKABLE_MAGIC 0x8F92EAB1u
#define PF_SEEKTABLE_FOOTER 9u
#define PF_INDEX_TRAILER_MAGIC 0x58494650u /* "PFIX" little-endian */

#endif
