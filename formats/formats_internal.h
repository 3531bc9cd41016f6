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

/* ------------------------------------------------------------------ */
/* Frames of an indexed shard, wherever they are described               */

/* The largest uncompressed frame podfeed writes or reads. */
#define PF_SHARD_MAX_FRAME (1u << 30)

/* Whether an index's or manifest's alignment can be: 0 (none) or a power
 * of two of 4096 or more. */
static inline bool pf_alignment_ok(uint32_t alignment)
{
	return !alignment || (alignment >= 4096 && !(alignment & (alignment - 1)));
}

/* The checks frame i's own fields pass wherever they are read from (a
 * shard's index, a manifest; shard_index.c): on the alignment (0: none), a
 * compressed size, an uncompressed size within PF_SHARD_MAX_FRAME, and a
 * record count its bytes can hold.  Where it lies against its neighbours
 * and the file is the caller's to check.  @return 0, or -EBADMSG with err
 * (which may be NULL) "<where>frame <i> ..." at file offset off. */
int pf_frame_check(const pf_frame_info *fi, uint32_t i, uint32_t alignment,
		   const char *where, uint64_t off, pf_error *err);

/* ------------------------------------------------------------------ */
/* Envelopes (envelope.c)                                               */
/*
 * The blobs podfeed writes for itself (the dataset manifest, the loader's
 * checkpoint state) wrap their payload in an envelope, so that a
 * truncated or damaged one is an error naming the byte rather than
 * another payload (protobuf parses many truncations as valid messages
 * with fields missing), and a version from the future is refused by name
 * before anything is parsed.  Integers little-endian:
 *
 *   stored: magic[4] u32 version, u32 payload length, u32 CRC32C(payload),
 *           then the payload (a 16-byte header);
 *   zstd:   magic[4] u32 version, u64 raw length, u64 payload length,
 *           u32 CRC32C(payload), u32 0, then the payload: one zstd frame
 *           of the raw length's bytes (a 32-byte header).
 */
typedef struct pf_envelope_kind {
	const char *what;	/* names it in errors: "manifest", "state" */
	char magic[4];
	uint32_t version;	/* the newest this podfeed writes and reads */
	bool zstd;		/* which layout */
	uint64_t max_raw;	/* largest (decompressed) payload accepted */
	const char *newer_hint;	/* after "version N is newer than ...", or NULL */
} pf_envelope_kind;

#define PF_ENVELOPE_STORED_HEADER 16u
#define PF_ENVELOPE_ZSTD_HEADER 32u

/* What pf_envelope_open() found. */
typedef struct pf_envelope_payload {
	const uint8_t *data;	/* the (decompressed) payload */
	size_t len;
	uint32_t version;
	uint8_t *owned;		/* zstd: data's buffer, for pf_free() */
} pf_envelope_payload;

/* Write the header of an envelope whose payload (payload_len bytes; for
 * zstd, the frame of raw_len bytes of content) already follows it in blob. */
void pf_envelope_seal(const pf_envelope_kind *k, uint8_t *blob, uint64_t raw_len,
		      uint64_t payload_len);
/* A zstd envelope of raw (len bytes) compressed at level, in *out
 * (pf_free()).  @return its length, or -ENOMEM / -EINVAL / -EIO with err. */
int64_t pf_envelope_compress(const pf_envelope_kind *k, const void *raw, size_t len,
			     int level, uint8_t **out, pf_error *err);
/* Check blob (len bytes) as an envelope of kind k and give its payload in
 * *out (pointing into blob when stored; pf_free(out->owned) when zstd).
 * @return 0, or -EBADMSG / -EPROTONOSUPPORT / -ENOMEM with err naming the
 * byte of blob and what was wrong. */
int pf_envelope_open(const pf_envelope_kind *k, const void *blob, size_t len,
		     pf_envelope_payload *out, pf_error *err);

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

/* The protobuf varint of v (its 7-bit groups, low first, each but the
 * last with the top bit set) into p, which has room for 10 bytes.
 * @return its length, 1 to 10.  The one varint writer of the library,
 * its tests and tools. */
static inline size_t pf_varint_put(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* The length pf_varint_put() writes for v. */
static inline size_t pf_varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

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
#define PF_INDEX_TRAILER_MAGIC 0x58494650u /* "PFIX" little-endian: version 1,
					      trailer {u32 L, magic} */
#define PF_INDEX_TRAILER_MAGIC_CRC 0x43494650u /* "PFIC": version 2 on, trailer
					      {u32 CRC32C of the protobuf,
					      u32 L, magic} */

/* ------------------------------------------------------------------ */
/* Records' lengths in a shard's index (lengths.c)                      */

#define PF_LENGTHS_VERSION 1u
#define PF_LENGTHS_MAX_NAME 1024u

/* One feature's counts while a shard's schema is inferred: nothing kept
 * while every record's count is the same (run records of value), then one
 * varint a record. */
typedef struct pf_len_col {
	uint64_t upto;		/* records accounted */
	uint64_t run;
	uint32_t value;
	bool varies;
	uint8_t *buf;
	size_t len, cap;
} pf_len_col;

/* Record number record's count (records before it without the feature:
 * 0).  @return 0 or -ENOMEM. */
int pf_len_col_push(pf_len_col *c, uint64_t record, uint32_t count);
/* The counts of records records (those past the last seen: 0) as packed
 * varints in *out (pf_free()), or *out NULL when every record's count is
 * the same.  @return 0 or -ENOMEM. */
int pf_len_col_finish(const pf_len_col *c, uint64_t records, uint8_t **out, size_t *len);
void pf_len_col_free(pf_len_col *c);

/* A feature's counts as the index holds them (checked when read). */
typedef struct pf_shard_lengths {
	char *name;
	uint8_t *counts;	/* packed varints, one a record */
	size_t len;
} pf_shard_lengths;

void pf_lengths_free(pf_shard_lengths *l, size_t n);
/* Decode the counts of records records into out.  @return 0 (-EBADMSG
 * only for counts not checked by pf_lengths_from_pb()). */
int pf_lengths_decode(const pf_shard_lengths *l, uint64_t records, uint32_t *out);
/* schema.c: the columns of s's features whose count varies, for the
 * index (pf_lengths_free()).  @return 0 or -ENOMEM. */
int pf_schema_lengths(const pf_schema *s, pf_shard_lengths **out, size_t *n);

#endif
