/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed formats: bytes to records to examples, over caller buffers. */
#ifndef PF_FORMATS_H
#define PF_FORMATS_H

/*
 * Everything here is pure computation over memory the caller owns: no file
 * I/O, no threads, no global state except the CRC32C dispatch chosen once.
 * Objects are not thread-safe; use one per thread.  Functions return >= 0 on
 * success and -errno on failure; the detail of a failure (what, where) goes
 * into a caller-provided pf_error.
 *
 * Error codes used throughout:
 *   -EBADMSG   corrupt input (bad CRC, bad framing, bad protobuf, bad index)
 *   -EFBIG     a record, frame or index larger than the configured limit
 *   -ENOMEM    allocation failed
 *   -ENOBUFS   a caller buffer (arena, dst) too small
 *   -ENODATA   not this format (e.g. a file without a podfeed index)
 *   -EINVAL    bad argument or configuration
 *   -EPROTONOSUPPORT  a format version from the future
 */

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "pf_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* CRC32C (Castagnoli) and TFRecord's masked CRC                        */
/* ------------------------------------------------------------------ */

/*! pf_crc32c(): extend crc (0 to start) over len bytes.  Uses the SSE4.2
 *  instruction when the CPU has it (chosen once, at first call), else a
 *  portable slicing-by-8 table.  Thread-safe. */
PF_API uint32_t pf_crc32c(uint32_t crc, const void *data, size_t len);
/*! Name of the implementation pf_crc32c() uses: "sse4.2" or "portable". */
PF_API const char *pf_crc32c_impl(void);

static inline uint32_t pf_crc32c_mask(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static inline uint32_t pf_crc32c_unmask(uint32_t masked)
{
	uint32_t rot = masked - 0xa282ead8u;
	return (rot >> 17) | (rot << 15);
}

/* ------------------------------------------------------------------ */
/* Corrupt data: fail, or skip and report                               */
/* ------------------------------------------------------------------ */
/*
 * Readers stop at the first damage by default.  In skip mode they drop the
 * smallest unit they must and go on: one record when the framing around it
 * holds, else the bytes up to the next valid record (TFRecord framing is
 * resynchronised), a zstd frame, a gzip member, or a frame of an indexed
 * shard.  Each drop is reported (pf_drop) and records keep their order;
 * record numbers count the records delivered, so damage leaves no gap in
 * them and a file read twice in the same pieces numbers its records the
 * same way both times.
 */
typedef enum pf_corrupt_policy {
	PF_CORRUPT_FAIL = 0,	/* stop with an error (the default) */
	PF_CORRUPT_SKIP,	/* drop the damaged unit, report it, go on */
} pf_corrupt_policy;

typedef enum pf_drop_unit {
	PF_DROP_RECORD = 1,	/* one record with a bad data CRC whose framing held
				   (the next header is where its length says) */
	PF_DROP_SPAN,		/* bytes where TFRecord framing broke, up to the
				   next valid record (or the end) */
	PF_DROP_FRAME,		/* a zstd frame (what it had not yet given), or a
				   frame of an indexed shard */
	PF_DROP_MEMBER,		/* a gzip member (what it had not yet given), or
				   the rest of a zlib stream */
} pf_drop_unit;

/*! "record", "span", "frame", "member". */
PF_API const char *pf_drop_unit_name(pf_drop_unit u);

typedef struct pf_drop {
	pf_drop_unit unit;
	pf_offset_kind offset_kind;	/* what start and resume count: FILE for
					   compressed units and indexed frames,
					   STREAM for records and spans */
	uint64_t start;		/* first byte dropped: where the damaged record,
				   span, frame or member starts */
	uint64_t resume;	/* where reading resumed: the next valid record,
				   frame or member, or the end */
	uint64_t next_record;	/* number the next delivered record gets */
	int64_t records;	/* records lost when known (a record: 1, an
				   indexed frame: from its index), else -1 */
	pf_error cause;		/* the check that failed, at the byte where it
				   failed (its offset kind may differ from
				   offset_kind's) */
} pf_drop;

/*! Told of each drop, on the thread that reads, before the records after
 *  it come out.  @return 0 to go on, or <0 to stop: the read call then
 *  returns that code with its error set to the drop's cause (a budget
 *  of drops is enforced this way). */
typedef int (*pf_drop_fn)(void *ctx, const pf_drop *drop);

/* ------------------------------------------------------------------ */
/* TFRecord framing                                                     */
/* ------------------------------------------------------------------ */
/*
 * A record on disk: uint64 length, uint32 masked_crc32c(length),
 * byte data[length], uint32 masked_crc32c(data); integers little-endian.
 */
#define PF_TFR_HEADER_SIZE 12u
#define PF_TFR_FOOTER_SIZE 4u
#define PF_TFR_OVERHEAD (PF_TFR_HEADER_SIZE + PF_TFR_FOOTER_SIZE)
#define PF_MAX_RECORD_DEFAULT (64ull << 20)

typedef struct pf_record {
	const uint8_t *data;	/* payload; see each producer for lifetime */
	uint64_t len;		/* payload bytes */
	uint64_t offset;	/* stream offset of the record's header */
	uint64_t index;		/* record number in the stream, from 0 */
} pf_record;

/*! pf_tfr_parse(): parse one record at the start of buf (contiguous).
 *  base_offset is buf's offset in the stream (for errors and rec->offset).
 *  @return bytes consumed (> 0) with rec->data pointing into buf;
 *          0 when buf ends inside the record (need more bytes; at end of
 *          stream that is a truncation: see pf_tfr_truncation());
 *          -EBADMSG on a bad length CRC or data CRC; -EFBIG when the length
 *          exceeds max_record.  rec->index is left alone. */
PF_API int64_t pf_tfr_parse(const void *buf, size_t len, uint64_t base_offset,
			    uint64_t max_record, pf_record *rec, pf_error *err);

/*! pf_tfr_parse_verified(): the same for bytes whose integrity is already
 *  proven as a whole (a zstd frame of an indexed shard, checked by its
 *  CRC32C and zstd's content checksum before it was decompressed): the
 *  length CRC and the bounds are checked, the data CRC is not (it could
 *  only fail where the writer itself was wrong). */
PF_API int64_t pf_tfr_parse_verified(const void *buf, size_t len,
				     uint64_t base_offset, uint64_t max_record,
				     pf_record *rec, pf_error *err);

/*! pf_tfr_truncation(): describe why the len (< one whole record) bytes at
 *  the end of a stream are not a record: "truncated header" or "truncated
 *  body" at the right offset.  @return -EBADMSG (or 0 when len == 0). */
PF_API int pf_tfr_truncation(const void *buf, size_t len, uint64_t base_offset,
			     uint64_t max_record, pf_error *err);

/*! pf_tfr_resync(): after a framing error, where can a record start again?
 *  Scans buf[0..len) for the first offset p where a valid record starts:
 *  its length CRC holds, its length is at most max_record, and its data
 *  CRC holds (so that random bytes, which pass a 32-bit CRC one time in
 *  4 billion, do not resynchronise on the length CRC alone).
 *  at_end false (more bytes follow buf): p may also be a header that
 *  passes its checks but whose record runs past len (feed more bytes and
 *  look again from p), or len - 11 when no earlier offset qualifies (the
 *  last 11 bytes are too few to tell).
 *  at_end true (buf ends where the stream or a frame ends, e.g. the rest
 *  of a decompressed frame, which holds whole records only): only whole
 *  valid records count; len when there is none.
 *  To resume after a record that failed at offset o: o + 1 +
 *  pf_tfr_resync(buf + o + 1, ...).  @return p in [0, len]. */
PF_API size_t pf_tfr_resync(const void *buf, size_t len, uint64_t max_record,
			    bool at_end);

/*! pf_tfr_next_intact(): skip mode over a buffer of whole records (a
 *  decompressed frame of an indexed shard): the next record from *pos that
 *  passes its checks (both CRCs, or the length CRC alone when
 *  !check_data_crc), dropping damage on the way, exactly as a skip-mode
 *  pf_tfr_reader fed buf and ended would.
 *  @return 1 with *rec (a view into buf, rec->offset = base_offset + its
 *          position, rec->index left alone) and *pos past it;
 *          2 with *drop: damage from *pos was dropped (PF_DROP_RECORD when
 *          the data CRC failed and the next header sits where the length
 *          says, else PF_DROP_SPAN up to the next valid record or len;
 *          stream offsets; drop->next_record left 0 for the caller) and
 *          *pos moved to where reading resumes;
 *          0 when *pos == len. */
PF_API int pf_tfr_next_intact(const void *buf, size_t len, size_t *pos,
			      uint64_t base_offset, uint64_t max_record,
			      bool check_data_crc, pf_record *rec,
			      pf_drop *drop);

/*! pf_tfr_count_intact(): the records pf_tfr_next_intact() would deliver
 *  from buf[0..len), and (when drops is not NULL) the drops it would
 *  report.  No allocation. */
PF_API uint64_t pf_tfr_count_intact(const void *buf, size_t len,
				    uint64_t max_record, bool check_data_crc,
				    uint64_t *drops);

/*! pf_tfr_encode(): frame one record into dst.  @return len + 16, or 0 when
 *  cap is too small. */
PF_API size_t pf_tfr_encode(void *dst, size_t cap, const void *data, size_t len);

/* Incremental reader: feed it buffers of any size; a record may straddle
 * buffers (it is then copied into an internal scratch buffer that grows to
 * the largest record seen, never past max_record_size).  Records wholly
 * inside one fed buffer are returned as zero-copy views into it. */
typedef struct pf_tfr_reader pf_tfr_reader;

typedef struct pf_tfr_config {
	uint64_t max_record_size;	/* 0: PF_MAX_RECORD_DEFAULT */
	bool skip_data_crc;		/* trust the data (length CRC still checked) */
	pf_corrupt_policy on_corrupt;	/* FAIL (default) or SKIP */
	pf_drop_fn on_drop;		/* SKIP: told of each drop; NULL: counted only */
	void *on_drop_ctx;
} pf_tfr_config;

/*! Create a reader; cfg may be NULL for defaults.  Free with
 *  pf_tfr_reader_free().  @return 0, -ENOMEM or -EINVAL. */
PF_API int pf_tfr_reader_create(pf_tfr_reader **out, const pf_tfr_config *cfg);
PF_API void pf_tfr_reader_free(pf_tfr_reader *r);
/*! Forget buffered state; the next byte fed is at stream_offset and
 *  starts record number first_record. */
PF_API void pf_tfr_reader_reset(pf_tfr_reader *r, uint64_t stream_offset,
				uint64_t first_record);
/*! Hand the reader the next bytes of the stream.  buf must stay valid
 *  until pf_tfr_reader_next() returns 0.  Only call when the previous
 *  buffer is used up (next() returned 0). */
PF_API void pf_tfr_reader_feed(pf_tfr_reader *r, const void *buf, size_t len);
/*! @return 1 with *rec filled (valid until the next call on r, or until
 *  the fed buffer is released); 0 when the fed bytes are used up; <0 on
 *  corrupt input (err says what and where).  After an error the reader is
 *  poisoned: reset it before further use.
 *  In skip mode damage is no error: it is dropped and reported to
 *  on_drop, and next() goes on with the next valid record; <0 then means
 *  out of memory or on_drop's own <0.  rec->index counts the records
 *  delivered.  A record is delivered only when both its CRCs hold (its
 *  length CRC alone with skip_data_crc, except the first after a resync,
 *  which always needs both). */
PF_API int pf_tfr_reader_next(pf_tfr_reader *r, pf_record *rec, pf_error *err);
/*! Skip mode: say that no bytes follow those fed.  Records that hid
 *  behind a damaged tail (a header whose length runs past the end) can
 *  then come out, so call next() until it returns 0 after this, then
 *  finish().  In fail mode it changes nothing. */
PF_API void pf_tfr_reader_end(pf_tfr_reader *r);
/*! At end of stream: @return 0 when it ended on a record boundary, else
 *  -EBADMSG ("truncated header" / "truncated body" with the offset).
 *  Skip mode: a damaged end was already dropped (after end()), so 0;
 *  -EINVAL when records are still to be read (end() was not called). */
PF_API int pf_tfr_reader_finish(pf_tfr_reader *r, pf_error *err);
/*! Drops reported since create or the last reset. */
PF_API uint64_t pf_tfr_reader_drops(const pf_tfr_reader *r);
/*! Stream offset of the next byte the reader expects. */
PF_API uint64_t pf_tfr_reader_offset(const pf_tfr_reader *r);

/* ------------------------------------------------------------------ */
/* Whole-stream compression (TFRecord's GZIP/ZLIB options, and zstd)    */
/* ------------------------------------------------------------------ */

typedef enum pf_compression {
	PF_COMP_NONE = 0,
	PF_COMP_GZIP,
	PF_COMP_ZLIB,
	PF_COMP_ZSTD,
} pf_compression;

#define PF_DETECT_BYTES 12u

/*! "none", "gzip", "zlib", "zstd". */
PF_API const char *pf_compression_name(pf_compression c);

/*! pf_compression_detect(): what the first len bytes of a file are, by
 *  content, never by name.  A valid TFRecord header (its length CRC
 *  matches) is PF_COMP_NONE even when its bytes look like a magic number.
 *  Give at least PF_DETECT_BYTES bytes unless the file is shorter.
 *  @return a pf_compression, or -ENODATA when the bytes are none of these
 *  (the caller should then report a corrupt or foreign file). */
PF_API int pf_compression_detect(const void *head, size_t len);

/* A streaming decompressor: gzip (multi-member, any header fields),
 * zlib, or zstd (several frames, skippable frames). */
typedef struct pf_inflate pf_inflate;

/*! @return 0, -ENOMEM, -EINVAL (PF_COMP_NONE is not a codec). */
PF_API int pf_inflate_create(pf_inflate **out, pf_compression comp);
PF_API void pf_inflate_free(pf_inflate *d);
PF_API void pf_inflate_reset(pf_inflate *d);
/*! Decompress from in[*in_pos..in_len) into out[*out_pos..out_cap),
 *  advancing both positions.  @return 0 on progress, <0 on corrupt input
 *  (err at PF_OFFSET_FILE offset of the compressed byte, as far as the
 *  codec tells). */
PF_API int pf_inflate_run(pf_inflate *d, const void *in, size_t in_len,
			  size_t *in_pos, void *out, size_t out_cap,
			  size_t *out_pos, pf_error *err);
/*! At end of input: @return 0 when the stream ended cleanly (between
 *  members or frames), -EBADMSG when it was cut inside one. */
PF_API int pf_inflate_finish(pf_inflate *d, pf_error *err);
/*! Compressed bytes consumed so far. */
PF_API uint64_t pf_inflate_total_in(const pf_inflate *d);

/* A record stream: compression detected from the first bytes, then
 * decompression and framing, over buffers the caller feeds (file bytes as
 * read).  Used for every file that is not read frame-by-frame through an
 * index. */
typedef struct pf_recstream pf_recstream;

typedef struct pf_recstream_config {
	uint64_t max_record_size;	/* 0: PF_MAX_RECORD_DEFAULT */
	size_t window;			/* decompressed bytes per step; 0: 256 KiB */
	pf_corrupt_policy on_corrupt;	/* FAIL (default) or SKIP (below) */
	pf_drop_fn on_drop;		/* SKIP: told of each drop; NULL: counted only */
	void *on_drop_ctx;
} pf_recstream_config;

/*
 * Skip mode, by layer:
 * - TFRecord framing (every format): as pf_tfr_reader in skip mode; the
 *   drops' offsets are in the decompressed stream (PF_OFFSET_STREAM).
 * - zstd: a frame that fails (bad block, checksum, garbage between
 *   frames) is dropped from where it started, and decoding resumes at the
 *   next zstd frame magic or skippable frame (believed only when another
 *   frame or the end follows where its size says it ends).
 * - gzip: a member that fails (bad deflate data, trailer CRC or length) is
 *   dropped, and decoding resumes at the next member header (1f 8b 08,
 *   reserved flags clear, XFL 0/2/4, a known OS).
 * - zlib: one stream has nothing to resynchronise on: the rest is dropped.
 * Codec drops have file offsets (PF_OFFSET_FILE).  The search for the next
 * frame or member starts one byte after the start of the one that failed
 * (a damaged size can take the decoder past the next one's start; the last
 * 256 KiB of a unit's bytes from earlier fed buffers are kept for this,
 * what lies before them is not searched), or after the first of the
 * skippable frames right before it when it failed before any output (a
 * damaged skippable size).  A file that ends inside a unit is searched the
 * same way before the rest is dropped.  A drop is reported once decoding
 * has resumed (output came, or a frame or member ended), or at the end of
 * the file.  What the TFRecord layer had received of a dropped frame or
 * member before it failed is still read: its whole records come out, the
 * record it cut off goes with the drop.  How much of a failing zstd frame
 * came out before zstd noticed can depend on how its bytes arrive (zstd
 * decodes a small frame in one go when all of it is at hand), so two reads
 * agree when fed in the same pieces; TFRecord files agree in any pieces.
 * A file whose first bytes are no known format (damage at byte 0) is read
 * as TFRecord, and its first MiB searched for a zstd frame or gzip member
 * header: from one found, the file is read with that codec (the TFRecord
 * reader first gives what it held, reporting the damage before it), once
 * a record or a whole unit comes out of it (the drops found in its output
 * until then are told then); should it fail before that (a false header),
 * the file is read on as TFRecord from there, as if never tried.
 */

PF_API int pf_recstream_create(pf_recstream **out, const pf_recstream_config *cfg);
PF_API void pf_recstream_free(pf_recstream *s);
/*! Hand over the next file bytes; buf must stay valid until next()
 *  returns 0.  len == 0 says the file has ended (then drain next() once
 *  more before finish()).  Usage:
 *      do { n = read(...); pf_recstream_feed(s, buf, n);
 *           while ((r = pf_recstream_next(s, &rec, &err)) == 1) use(rec);
 *           if (r < 0) fail; } while (n > 0);
 *      pf_recstream_finish(s, &err); */
PF_API void pf_recstream_feed(pf_recstream *s, const void *buf, size_t len);
/*! @return 1 with *rec (valid until the next call), 0 when the fed bytes
 *  are used up, <0 on error. */
PF_API int pf_recstream_next(pf_recstream *s, pf_record *rec, pf_error *err);
/*! After the end was fed and next() returned 0: @return 0 when the file
 *  ended cleanly, -EBADMSG when truncated (inside a compressed member or
 *  frame, or inside a record).  Skip mode: a truncated end is a drop, so
 *  0; -EINVAL when records are still to be read. */
PF_API int pf_recstream_finish(pf_recstream *s, pf_error *err);
/*! The compression detected (valid once a record came out or at finish). */
PF_API pf_compression pf_recstream_compression(const pf_recstream *s);
/*! Decompressed bytes produced so far. */
PF_API uint64_t pf_recstream_total_out(const pf_recstream *s);
/*! Skip mode: drops reported so far (codec and TFRecord layers). */
PF_API uint64_t pf_recstream_drops(const pf_recstream *s);

/* ------------------------------------------------------------------ */
/* tf.train.Example and tf.train.SequenceExample                        */
/* ------------------------------------------------------------------ */

typedef enum pf_kind {
	PF_KIND_NONE = 0,	/* Feature with no list set (TFX: missing) */
	PF_KIND_BYTES = 1,
	PF_KIND_FLOAT = 2,
	PF_KIND_INT64 = 3,
} pf_kind;

/*! "none", "bytes", "float", "int64". */
PF_API const char *pf_kind_name(pf_kind k);

typedef struct pf_bytes {
	const uint8_t *data;	/* view into the record */
	uint32_t len;
} pf_bytes;

typedef struct pf_feature {
	const char *name;	/* view into the record, NOT NUL-terminated */
	uint32_t name_len;
	pf_kind kind;
	uint32_t count;		/* number of values */
	union {
		const pf_bytes *bytes;
		const float *floats;
		const int64_t *int64s;
	} v;			/* typed arrays in the arena */
} pf_feature;

typedef struct pf_feature_list {
	const char *name;	/* view into the record, NOT NUL-terminated */
	uint32_t name_len;
	uint32_t steps;
	const pf_feature *step;	/* steps entries; their names are empty */
} pf_feature_list;

typedef struct pf_example {
	pf_feature *features;		/* Example features / SequenceExample context */
	uint32_t n_features;
	pf_feature_list *lists;		/* SequenceExample feature_lists */
	uint32_t n_lists;
} pf_example;

/* A bump allocator the caller owns: decode results live in it until the
 * caller resets it (typically once per batch). */
typedef struct pf_arena {
	uint8_t *base;
	size_t cap;
	size_t used;
} pf_arena;

/*! An arena large enough for any record of max_record bytes. */
#define PF_ARENA_BYTES_FOR(max_record) (16u * (size_t)(max_record) + 256u)

/*! pf_arena_init(): malloc cap bytes.  @return 0 or -ENOMEM.  Release
 *  with pf_arena_release(). */
PF_API int pf_arena_init(pf_arena *a, size_t cap);
PF_API void pf_arena_release(pf_arena *a);
static inline void pf_arena_reset(pf_arena *a) { a->used = 0; }

/*! pf_example_decode(): the fast path.  Walks the wire format of a
 *  tf.train.Example straight into typed arrays in the arena, without a
 *  per-field allocation; names and byte values are views into rec, which
 *  must outlive *out.  Packed and unpacked encodings both decode; a
 *  repeated map key keeps the last value.  Agrees with protobuf-c (the
 *  reference decoder) on every input: same acceptance, same values.
 *  @return 0, -EBADMSG (err->offset: the byte in rec), -ENOBUFS (arena
 *  too small; PF_ARENA_BYTES_FOR(len) is always enough). */
PF_API int pf_example_decode(const void *rec, size_t len, pf_arena *arena,
			     pf_example *out, pf_error *err);
/*! pf_sequence_example_decode(): the same for tf.train.SequenceExample
 *  (context into features, feature_lists into lists). */
PF_API int pf_sequence_example_decode(const void *rec, size_t len,
				      pf_arena *arena, pf_example *out,
				      pf_error *err);
/*! Find a feature by NUL-terminated name; NULL when absent. */
PF_API const pf_feature *pf_example_find(const pf_example *ex, const char *name);
PF_API const pf_feature_list *pf_example_find_list(const pf_example *ex,
						   const char *name);

/*! pf_example_encode(): serialize a tf.train.Example holding the n
 *  features (lists packed, as TensorFlow writes them) into dst.
 *  @return bytes written, or -ENOBUFS with nothing useful in dst when cap
 *  is too small (call with cap 0 to learn the size). */
PF_API int64_t pf_example_encode(const pf_feature *features, uint32_t n,
				 void *dst, size_t cap);

/* ------------------------------------------------------------------ */
/* Packed varints                                                       */
/* ------------------------------------------------------------------ */

/*! pf_varint_decode_i64(): decode the packed run of protobuf varints in
 *  src[0..len) (the content of a packed repeated int64 field, e.g. an
 *  Int64List's values) and store the first min(count, max) of them in
 *  dst, each the low 64 bits of its varint as an int64 clamped to
 *  [lo, hi] (lo <= hi; INT64_MIN, INT64_MAX for no clamp).  Values past
 *  max are counted and checked, not stored.  Overlong encodings are
 *  accepted, and bits past 64 dropped, as protobuf-c and
 *  pf_example_decode() do.
 *  @return the number of varints in src (all of them; at most len), or
 *  -EBADMSG when a varint has no terminating byte within 10 bytes or
 *  before len, with *bad (when not NULL) the offset of its first byte
 *  and dst[0..max) partly written.  src may be NULL when len is 0, dst
 *  when max is 0.  Uses AVX-512 (VBMI2), AVX2 or plain C, chosen once at
 *  run time (PODFEED_SIMD=avx512|avx2|scalar picks one the CPU has); all
 *  give the same results.  Thread-safe, no allocation. */
PF_API int64_t pf_varint_decode_i64(const uint8_t *src, size_t len,
				    int64_t *dst, size_t max, int64_t lo,
				    int64_t hi, size_t *bad);
/*! The same into int32: each value is clamped to [lo, hi] (lo <= hi)
 *  as an int64 first, so an int64 outside int32 saturates; INT32_MIN,
 *  INT32_MAX for plain saturation. */
PF_API int64_t pf_varint_decode_i32(const uint8_t *src, size_t len,
				    int32_t *dst, size_t max, int32_t lo,
				    int32_t hi, size_t *bad);
/*! Name of the path pf_varint_decode_*() use: "avx512", "avx2", "scalar". */
PF_API const char *pf_varint_impl(void);

typedef enum pf_message_kind {
	PF_MSG_RAW = 0,			/* not a tf.train message */
	PF_MSG_EXAMPLE,
	PF_MSG_SEQUENCE_EXAMPLE,
} pf_message_kind;

/*! pf_message_sniff(): guess what a record holds from its top-level
 *  fields: only field 1 (length-delimited) is an Example; field 2 as well
 *  is a SequenceExample; anything else, or bytes that are not protobuf,
 *  is raw.  A guess for tools (inspect, cat); decoding decides. */
PF_API pf_message_kind pf_message_sniff(const void *rec, size_t len);

/* ------------------------------------------------------------------ */
/* Schema inference                                                     */
/* ------------------------------------------------------------------ */

typedef struct pf_feature_schema {
	const char *name;	/* NUL-terminated, owned by the schema */
	pf_kind kind;		/* the value kind seen (NONE if only unset) */
	bool is_list;		/* a SequenceExample feature_list */
	bool mixed;		/* two different value kinds seen: an error in data */
	uint64_t records_present; /* records holding the feature (incl. unset) */
	uint64_t records_unset;	/* of those, with kind NONE */
	uint64_t total_values;
	uint64_t min_len, max_len; /* values per record (steps x values for lists) */
} pf_feature_schema;

typedef struct pf_schema pf_schema;

PF_API int pf_schema_create(pf_schema **out);
PF_API void pf_schema_free(pf_schema *s);
/*! Account one decoded example.  @return 0 or -ENOMEM. */
PF_API int pf_schema_add(pf_schema *s, const pf_example *ex);
PF_API uint64_t pf_schema_records(const pf_schema *s);
PF_API size_t pf_schema_count(const pf_schema *s);
/*! Features sorted by name. */
PF_API const pf_feature_schema *pf_schema_get(const pf_schema *s, size_t i);
/*! Fixed length: present in every record, always the same count. */
PF_API bool pf_schema_is_fixed(const pf_schema *s, const pf_feature_schema *f);

/* ------------------------------------------------------------------ */
/* The indexed shard                                                    */
/* ------------------------------------------------------------------ */
/*
 * A valid zstd stream whose content is a valid TFRecord stream.  Records
 * are grouped into independent zstd frames of whole records.  At the end:
 * a skippable frame holding podfeed's index (protobuf, see
 * formats/proto/pf_index.proto), then the zstd seekable format's seek
 * table.  Frames may be aligned to a power-of-two boundary with skippable
 * padding frames.
 */
#define PF_SHARD_VERSION 2u	/* 2: the index carries its CRC32C */
#define PF_SHARD_TAIL_HINT (64u << 10)	/* tail bytes to read first */
#define PF_SHARD_MAX_INDEX (256u << 20)	/* refuse larger index frames */
#define PF_SHARD_FRAME_DEFAULT (1u << 20)

typedef struct pf_frame_info {
	uint64_t offset;		/* file offset of the zstd frame */
	uint32_t compressed_size;	/* the zstd frame alone (no padding) */
	uint32_t uncompressed_size;	/* TFRecord bytes it holds */
	uint32_t records;
	uint64_t first_record;		/* number of its first record in the shard */
	uint32_t crc32c;		/* of the compressed bytes */
} pf_frame_info;

typedef struct pf_shard_index pf_shard_index;

/*! pf_shard_index_parse(): find, read and validate the index of an
 *  indexed shard from the last tail_len bytes of a file of file_size
 *  bytes (read PF_SHARD_TAIL_HINT first).
 *  @return 0 with *out (free with pf_shard_index_free());
 *          > 0: the number of tail bytes needed (call again with them);
 *          -ENODATA: not an indexed shard (no seek table or podfeed index);
 *          -EBADMSG: an index that does not hold together (offsets outside
 *          the file, not increasing, overlapping, counts that do not add
 *          up); -EPROTONOSUPPORT: a newer format version; -EFBIG. */
PF_API int64_t pf_shard_index_parse(pf_shard_index **out, const void *tail,
				    size_t tail_len, uint64_t file_size,
				    pf_error *err);
PF_API void pf_shard_index_free(pf_shard_index *ix);
PF_API uint32_t pf_shard_index_frames(const pf_shard_index *ix);
PF_API const pf_frame_info *pf_shard_index_frame(const pf_shard_index *ix,
						 uint32_t i);
PF_API uint64_t pf_shard_index_records(const pf_shard_index *ix);
PF_API uint64_t pf_shard_index_uncompressed_bytes(const pf_shard_index *ix);
PF_API uint32_t pf_shard_index_alignment(const pf_shard_index *ix);
/*! File offset where the trailing index frames start (end of data). */
PF_API uint64_t pf_shard_index_data_end(const pf_shard_index *ix);
PF_API size_t pf_shard_index_schema_count(const pf_shard_index *ix);
/*! Records the schema was inferred from. */
PF_API uint64_t pf_shard_index_schema_records(const pf_shard_index *ix);
PF_API const pf_feature_schema *pf_shard_index_schema(const pf_shard_index *ix,
						       size_t i);
/*! pf_shard_index_lengths(): each record's value count of the Example
 *  feature name into out[0 .. pf_shard_index_records(ix)), from the
 *  index's record lengths (`shardtool convert` writes them for int64 and
 *  float features whose count varies; a feature of one count in every
 *  record is told by the schema).  What packing plans from without
 *  reading the records.  @return 0; -ENOENT: the index does not tell. */
PF_API int pf_shard_index_lengths(const pf_shard_index *ix, const char *name, uint32_t *out);
/*! Frame holding record number rec (binary search); -1 when past the end. */
PF_API int64_t pf_shard_index_find_record(const pf_shard_index *ix, uint64_t rec);

/* Decodes frames of indexed shards; holds one ZSTD_DCtx, reused. */
typedef struct pf_frame_decoder pf_frame_decoder;

PF_API int pf_frame_decoder_create(pf_frame_decoder **out);
PF_API void pf_frame_decoder_free(pf_frame_decoder *d);
/*! pf_frame_decode(): check the CRC32C of the compressed frame src (its
 *  compressed_size bytes), then decompress it into dst.  Checks the
 *  content size and that dst_cap holds it before decompressing.
 *  @return uncompressed bytes (== fi->uncompressed_size), -EBADMSG with
 *  the file offset, -ENOBUFS, -EINVAL when src_len is not the frame's
 *  compressed_size (a caller mistake). */
PF_API int64_t pf_frame_decode(pf_frame_decoder *d, const pf_frame_info *fi,
			       const void *src, size_t src_len, void *dst,
			       size_t dst_cap, pf_error *err);

/* Writes an indexed shard through a caller's sink. */
typedef int (*pf_write_fn)(void *ctx, const void *buf, size_t len);

typedef struct pf_shard_writer pf_shard_writer;

typedef struct pf_shard_writer_config {
	size_t frame_size;	/* target uncompressed bytes per frame; 0: 1 MiB */
	int level;		/* zstd level; 0: 3 */
	uint32_t align;		/* 0 or a power of two >= 4096: frame alignment */
	uint64_t max_record_size; /* 0: PF_MAX_RECORD_DEFAULT */
} pf_shard_writer_config;

/*! Create a writer that sends bytes to write(ctx, buf, len) (which
 *  returns 0 or -errno).  cfg may be NULL.  Free with
 *  pf_shard_writer_free() after pf_shard_writer_close(). */
PF_API int pf_shard_writer_create(pf_shard_writer **out,
				  const pf_shard_writer_config *cfg,
				  pf_write_fn write, void *ctx);
/*! Append one record payload (unframed).  @return 0 or -errno. */
PF_API int pf_shard_writer_add(pf_shard_writer *w, const void *data,
			       size_t len, pf_error *err);
/*! Record the feature schema in the index (copied). */
PF_API int pf_shard_writer_set_schema(pf_shard_writer *w, const pf_schema *s);
/*! Flush the last frame, write the index and seek table.  @return 0 or
 *  -errno. */
PF_API int pf_shard_writer_close(pf_shard_writer *w, pf_error *err);
PF_API void pf_shard_writer_free(pf_shard_writer *w);
PF_API uint64_t pf_shard_writer_records(const pf_shard_writer *w);
PF_API uint64_t pf_shard_writer_bytes(const pf_shard_writer *w);

/* ------------------------------------------------------------------ */
/* The dataset manifest                                                 */
/* ------------------------------------------------------------------ */
/*
 * One file beside the shards (PF_MANIFEST_NAME) holding what planning
 * needs, so that a host plans an epoch from one read instead of opening
 * every shard: per shard its path (relative to the manifest's
 * directory), size, mtime, format and record count, an indexed shard's
 * frames, a stream file's largest record; and the feature schema of the
 * indexed shards, merged.  Layout (integers little-endian):
 *
 *   "PFMF"  u32 version  u64 raw length  u64 payload length
 *   u32 CRC32C(payload)  u32 0  payload
 *
 * payload: one zstd frame holding the podfeed.Manifest protobuf of raw
 * length bytes (formats/proto/pf_manifest.proto: columnar, packed
 * varints).  The version is outside the payload so that a newer format
 * is refused by name before anything is parsed; the CRC makes a damaged
 * or truncated file an error, never another dataset.
 *
 * What identifies a shard: its size, and the CRC32C of its tail (its
 * last tail_len bytes: an indexed shard's index and seek table, whose
 * index holds every frame's CRC32C, up to PF_MANIFEST_TAIL_MAX; a stream
 * file's last PF_MANIFEST_STREAM_TAIL bytes), read by the loader when it
 * opens the shard to read it: a shard whose size or tail no longer match
 * its entry is refused by name, a copy (cp -r, an upload to a bucket,
 * new mtimes) is not.  A manifest written before the tails were (no
 * pf_manifest_shard_tail()) identifies shards by size and mtime, as it
 * always did.
 */
#define PF_MANIFEST_NAME "podfeed.manifest"
#define PF_MANIFEST_VERSION 1u
#define PF_MANIFEST_HEADER 32u
#define PF_MANIFEST_MAX_RAW (1ull << 30)	/* refuse larger payloads */
#define PF_MANIFEST_TAIL_MAX (1u << 20)	/* an indexed shard's tail: at most */
#define PF_MANIFEST_STREAM_TAIL (64u << 10)	/* a stream file's tail: at most */

typedef enum pf_manifest_format {
	PF_MANIFEST_INDEXED = 1,	/* an indexed shard: frames known */
	PF_MANIFEST_STREAM = 2,		/* a stream file (plain, gzip, zlib, zstd) */
} pf_manifest_format;

typedef struct pf_manifest_shard {
	const char *path;	/* relative to the manifest's directory */
	uint64_t size;
	int64_t mtime_ns;
	pf_manifest_format format;
	uint64_t records;
	uint64_t max_record;	/* stream: its largest record's bytes */
	uint32_t alignment;	/* indexed: 0 or the frame alignment */
	uint32_t nframes;	/* indexed: frames (>= 1); stream: 0 */
	const pf_frame_info *frames;	/* nframes entries */
} pf_manifest_shard;

typedef struct pf_manifest pf_manifest;

/*! pf_manifest_parse(): check and decode a manifest file's bytes.
 *  @return 0 with *out (free with pf_manifest_free()); -EBADMSG with err
 *  naming the byte offset in the file and what was wrong (truncated,
 *  bad magic or CRC, a payload that does not decompress or unpack,
 *  arrays of different lengths, frames that do not add up to their
 *  shard's records or lie outside its size, a path that is absolute,
 *  empty, climbs out with "..", or repeats); -EPROTONOSUPPORT for a
 *  newer version; -ENOMEM.  The caller names the file
 *  (pf_error_set_file()). */
PF_API int pf_manifest_parse(pf_manifest **out, const void *buf, size_t len,
			     pf_error *err);
PF_API void pf_manifest_free(pf_manifest *m);
PF_API size_t pf_manifest_shards(const pf_manifest *m);
PF_API const pf_manifest_shard *pf_manifest_get(const pf_manifest *m, size_t i);
PF_API uint64_t pf_manifest_records(const pf_manifest *m);
PF_API size_t pf_manifest_schema_count(const pf_manifest *m);
PF_API const pf_feature_schema *pf_manifest_schema(const pf_manifest *m, size_t i);
PF_API uint64_t pf_manifest_schema_records(const pf_manifest *m);
/*! pf_manifest_shard_tail(): what identifies shard i beside its size:
 *  the CRC32C of its last *len bytes (*len 0: an empty file).  @return
 *  true; false when the manifest holds no tails (written before they
 *  were: its shards are known by size and mtime) or i is out of range. */
PF_API bool pf_manifest_shard_tail(const pf_manifest *m, size_t i, uint32_t *len,
				   uint32_t *crc32c);
/*! pf_manifest_tail_len(): the tail a manifest checks of a shard of size
 *  bytes whose index starts at data_end (pf_shard_index_data_end(); 0 for
 *  a stream file): from data_end to the end, at most
 *  PF_MANIFEST_TAIL_MAX (the seek table and the index's CRC32C are its
 *  last bytes), or a stream file's last PF_MANIFEST_STREAM_TAIL. */
PF_API uint32_t pf_manifest_tail_len(uint64_t size, uint64_t data_end);

/* Builds a manifest in memory: shards added in order, then encoded. */
typedef struct pf_manifest_builder pf_manifest_builder;

PF_API int pf_manifest_builder_create(pf_manifest_builder **out);
PF_API void pf_manifest_builder_free(pf_manifest_builder *b);
/*! Add a shard (everything copied).  @return 0, -EINVAL for an entry
 *  that does not hold together (the same checks as the parser), or
 *  -ENOMEM. */
PF_API int pf_manifest_builder_add(pf_manifest_builder *b, const pf_manifest_shard *s,
				   pf_error *err);
/*! pf_manifest_builder_set_tail(): the tail check of the shard added
 *  last (pf_manifest_tail_len() bytes and their CRC32C).  A manifest
 *  holds tails for all its shards or for none: encoding one where some
 *  shards have none fails with -EINVAL.  @return 0, or -EINVAL (no shard
 *  yet, or a tail longer than the shard). */
PF_API int pf_manifest_builder_set_tail(pf_manifest_builder *b, uint32_t len, uint32_t crc32c);
/*! Merge n features of schema (sorted by name, as pf_schema_get() and
 *  pf_shard_index_schema() give them) from `records` records into the
 *  manifest's schema.  @return 0 or -ENOMEM. */
PF_API int pf_manifest_builder_add_schema(pf_manifest_builder *b,
					  const pf_feature_schema *schema, size_t n,
					  uint64_t records);
/*! Encode into dst (cap bytes).  @return the manifest's length (nothing
 *  written when that is over cap: call with cap 0 to ask), or -ENOMEM,
 *  -EFBIG. */
PF_API int64_t pf_manifest_builder_encode(pf_manifest_builder *b, void *dst,
					  size_t cap, pf_error *err);

#ifdef __cplusplus
}
#endif

#endif /* PF_FORMATS_H */
