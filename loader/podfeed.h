/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed: the embedding API (loader/). */
#ifndef PODFEED_H
#define PODFEED_H

#include <stdio.h>

#include "pf_formats.h"
#include "pf_io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* pf_source: every record of one file, in order                       */
/* ------------------------------------------------------------------ */
/*
 * Opens any file podfeed reads: plain TFRecord, GZIP or ZLIB TFRecord,
 * a zstd stream of TFRecords, or an indexed shard (read frame by frame
 * through its index, CRCs of frames and records checked).  The format is
 * found from the bytes, never the name, with one exception: a file of 0
 * bytes is 0 records unless its name says compressed (.zst, .zstd, .gz,
 * .gzip, .zlib), whose data is never empty: then it is damaged data
 * (FAIL: -EBADMSG naming the file; SKIP: a drop of a frame or member,
 * records -1, and 0 records).  Not thread-safe; one per thread.
 */
typedef struct pf_source pf_source;

/* Bytes per read of a stream file, unless read_size says otherwise: the
 * pieces its bytes are cut into (at offsets k x PF_READ_DEFAULT, every one
 * whole but the file's last).  Skip mode's record numbers depend on them. */
#define PF_READ_DEFAULT (1u << 20)

typedef struct pf_source_config {
	uint64_t max_record_size;	/* 0: PF_MAX_RECORD_DEFAULT */
	size_t read_size;		/* bytes per read for streams; 0:
					   PF_READ_DEFAULT */
	bool ignore_index;		/* read an indexed shard as a zstd stream */
	pf_region_table *regions;	/* count every read to the file's mount and
					   region (io/pf_io.h); NULL: not */
	pf_corrupt_policy on_corrupt;	/* FAIL (default) or SKIP, below */
	pf_drop_fn on_drop;		/* SKIP: told of each drop (its cause names
					   the file); its <0 stops the read */
	void *on_drop_ctx;
	/* Pull mode, below; NULL: the source reads the file itself. */
	int (*pull)(void *ctx, const uint8_t **buf, size_t *len, pf_error *err);
	void *pull_ctx;
	uint64_t file_size;		/* pull mode with ignore_index: the file's
					   size (pf_source_file_size()) */
} pf_source_config;

/*
 * Pull mode (pull set): a stream file's bytes are not read by the source
 * but asked of the caller, in file order: pull(pull_ctx, &buf, &len, err)
 * stores the next piece and returns 0 (len 0: the file has ended), or
 * returns <0 with err saying why (file, offset; pf_source_next() then
 * fails with it).  A piece stays the source's until pull is called again
 * (the record stream is done with it then) or the source is closed; the
 * caller owns its memory.  With ignore_index the file is never opened:
 * its size is cfg->file_size, and read_size and regions play no part
 * (the caller reads and counts).  Without ignore_index the index is
 * looked for as ever, by reading the file's tail, and an indexed shard is
 * read through it; pull is then used only for a file read as a stream.
 * Skip mode numbers a stream's records by where its input is cut: pieces
 * of PF_READ_DEFAULT bytes at offsets k x PF_READ_DEFAULT (the last one
 * shorter) give the numbers of the source's own reads (and so the
 * loader's, which counts a stream's records when it opens the dataset
 * and reads them again through its I/O engine, cut the same way).
 */

/*
 * Skip mode (pf_formats.h says what each layer drops): streams as
 * pf_recstream (records numbered among those delivered, the same numbers
 * whenever the file is read again with the same read_size).  Indexed
 * shards: a frame that fails its checks (CRC32C, zstd, sizes; -EBADMSG)
 * is dropped whole (PF_DROP_FRAME, file offsets from the frame to the
 * next one, drop.records from the index, cause.frame its number) and
 * reading goes on with the next frame; inside a frame damage is dropped
 * as pf_tfr_next_intact() does, and the frame's intact records are
 * numbered from its first_record on; records past the index's count go
 * as one frame drop, and a frame that holds fewer intact records than
 * its index entry, with nothing dropped, is reported as a frame drop of
 * the missing ones.  An index that fails its checks (-EBADMSG) is a drop
 * of no records (cause: the index error), and the file is read as a zstd
 * stream.  I/O errors and -ENOMEM still fail.
 */

/*! Open path.  cfg may be NULL.  @return 0 with *out (close with
 *  pf_source_close()), or -errno with err naming the file and cause. */
PF_API int pf_source_open(pf_source **out, const char *path,
			  const pf_source_config *cfg, pf_error *err);
PF_API void pf_source_close(pf_source *s);
/*! The next record.  @return 1 with *rec (valid until the next call), 0 at
 *  a clean end of file, <0 with err naming file, byte offset, frame and
 *  record number where known. */
PF_API int pf_source_next(pf_source *s, pf_record *rec, pf_error *err);
/*! Indexed shards only: continue from record number rec (the next call
 *  of pf_source_next returns it).  @return 0, -ENOTSUP for streams,
 *  -ERANGE past the end. */
PF_API int pf_source_seek_record(pf_source *s, uint64_t rec);
/*! The index, when the file is an indexed shard read through it. */
PF_API const pf_shard_index *pf_source_index(const pf_source *s);
/*! Compression of the file (PF_COMP_ZSTD for indexed shards); known
 *  after open for indexed shards, after the first record otherwise. */
PF_API pf_compression pf_source_compression(const pf_source *s);
PF_API uint64_t pf_source_file_size(const pf_source *s);
/*! Decompressed (TFRecord) bytes produced so far. */
PF_API uint64_t pf_source_bytes_out(const pf_source *s);
PF_API const char *pf_source_path(const pf_source *s);
/*! Skip mode: drops reported so far. */
PF_API uint64_t pf_source_drops(const pf_source *s);

/*! pf_paths_expand(): the shards that args name, every file once.  A
 *  directory gives its regular files (sorted, hidden ones and
 *  PF_MANIFEST_NAME skipped; one that gives none is an error, and so is
 *  an entry that cannot be stat()ed: a symlink loop, a dangling link); a
 *  pattern with * ? [ is globbed (sorted; the directory's manifest
 *  skipped); a named file ending in ".manifest" is read as a manifest
 *  (magic and checksums): alone it gives the shards it lists, beside
 *  shards it must list exactly them (by identity); anything else is a
 *  file name.  Order otherwise as given.  Refused with err naming the
 *  path: a named file that is not a regular file (a FIFO, a socket, a
 *  device: -EINVAL), a file reached twice by identity (named twice, a
 *  directory twice, "D/x" and "./D/x", a link and its target: -EINVAL,
 *  naming both arguments), a shard named beside a manifest that does not
 *  list it or a listed one not named (-EINVAL, naming both); an empty
 *  name (-ENOENT, naming its place).
 *  @return the count with *out (free with pf_paths_free()), or -errno
 *  with err naming the argument. */
PF_API int pf_paths_expand(const char *const *args, size_t n, char ***out,
			   pf_error *err);
/*! pf_paths_resolve(): pf_paths_expand(), and *manifest (may be NULL)
 *  the manifest file args name when they name exactly one (alone, or
 *  beside the shards it lists), else NULL; free it with free().  The
 *  caller may then open the dataset from it (one read plans it). */
PF_API int pf_paths_resolve(const char *const *args, size_t n, char ***out, char **manifest,
			    pf_error *err);
PF_API void pf_paths_free(char **list, size_t n);

/* ------------------------------------------------------------------ */
/* The dataset manifest (pf_formats.h)                                  */
/* ------------------------------------------------------------------ */

typedef struct pf_manifest_info {
	uint64_t shards, indexed, streams;	/* files in it; of them */
	uint64_t records;
	uint64_t bytes;				/* the shards' bytes */
	uint64_t manifest_bytes;		/* the manifest's */
} pf_manifest_info;

/*! pf_manifest_write(): write the manifest of the shards that paths name
 *  (files, directories, globs; an existing manifest among them is not a
 *  shard) to out (written to out.tmp, then renamed), every shard's path
 *  relative to out's directory, which must hold them all.  Indexed shards
 *  are read from their index tails; stream files are read once to count
 *  their records.  info (may be NULL) says what it holds.  @return 0, or
 *  -errno with err naming the file and what was wrong. */
PF_API int pf_manifest_write(const char *const *paths, size_t n, const char *out,
			     pf_manifest_info *info, pf_error *err);
/*! pf_manifest_locate(): whether the dataset paths name a manifest: one
 *  path that is a manifest file (named "*.manifest") or a directory
 *  holding PF_MANIFEST_NAME.  @return 1 with *manifest (its path; free
 *  with free()), 0 when not, or -ENOMEM. */
PF_API int pf_manifest_locate(const char *const *paths, size_t n, char **manifest);
/*! pf_manifest_load(): read the manifest at path with one read (counted
 *  to its mount in regions, which may be NULL) and parse it.  @return 0
 *  with *out (free with pf_manifest_free()), or -errno with err naming
 *  the file, the byte offset and what was wrong. */
PF_API int pf_manifest_load(pf_manifest **out, const char *path, pf_region_table *regions,
			    pf_error *err);
/*! pf_manifest_shard_path(): shard s's path, relative to the directory
 *  of the manifest at manifest (as it names its shards), into buf, as
 *  snprintf() does.  @return the path's length (buf holds it whole when
 *  that is below cap). */
PF_API size_t pf_manifest_shard_path(const char *manifest, const pf_manifest_shard *s,
				     char *buf, size_t cap);

/* ------------------------------------------------------------------ */
/* Feature spec: which features, how they become dense tensors          */
/* ------------------------------------------------------------------ */
/*
 * A spec is a comma-separated list of features:
 *
 *     name:dtype[len][:option]...
 *
 *   dtype   int32 | int64 | float32 | bytes
 *   len     values per record (bytes: bytes per record); shorter lists
 *           are padded, longer ones truncated; or '*': a ragged feature
 *           (int32, int64, float32) of any length, which only packing
 *           (pf_loader_config.pack_length) can batch: the loader refuses
 *           it without a pack length
 *   option  pad=V          value for padding short lists (default 0)
 *           lengths        also give NAME_lengths, int32[1]: the record's
 *                          length of this feature (values; bytes: of its
 *                          first value) before padding or truncation,
 *                          capped at len; 0 when absent.  It follows the
 *                          feature in the spec (f[i + 1], role
 *                          PF_ROLE_LENGTHS) and in every batch.
 *           default=V      the feature is optional: a record without it
 *                          gets a row of len values V
 *           scale=V        multiply (float32 only, after the cast)
 *           shift=V        add (float32 only, after scale)
 *           clip=LO:HI     clamp into [LO, HI] (after scale and shift)
 *           required       accepted for older specs; does nothing, as
 *                          every feature without default= is required
 *
 * e.g. "tokens:int32[256]:pad=0,label:int64[1]" or
 *      "x:float32[256]:scale=0.5:clip=-3:3,label:int32[1]:default=-1".
 *
 * An image (a JPEG or PNG the loader decodes, crops and resizes):
 *
 *     name:image[H,W][:train|:eval|:resize][:option]...
 *
 *   options channels=3|1, layout=nhwc|nchw, dtype=uint8|float32|bfloat16,
 *           mean=R:G:B, std=R:G:B (float dtypes), scale=A:B, ratio=A:B,
 *           flip=0|1 (train), max_pixels=N (docs/api.md, "Images").
 *   In a pf_spec it is the tensor it fills: bytes of H x W x C values
 *   (uint8; bfloat16 two bytes each) or float32; pf_spec_apply() and
 *   pf_spec_decode() do not decode images, the loader does.
 * As tf.io.FixedLenFeature: a feature without default= must be in every
 * record; a record without it (or with the key but no value list set) is
 * an error (-ENOMSG) naming the feature and the features the record has,
 * whatever the corrupt-data policy (a misspelled name is not damaged
 * data).  pf_loader_create() also checks the spec against the schema in
 * each indexed shard's index: a feature without default= that a shard's
 * records lack fails at once, naming the feature, the shard and the
 * schema's features.  An empty list is a list: all padding.
 * No white space anywhere.  Source values are cast to dtype: int64 to
 * int32 saturates; int64 to float32 rounds to nearest; float to int32/int64
 * rounds toward zero, saturating, NaN becoming 0 (float32 keeps NaN).  A
 * bytes feature takes the first value of the list, cut or padded to len;
 * bytes into a number, or a number into bytes, is an error.  The pad and
 * the default are written as given: neither scaled nor clipped.
 */
typedef enum pf_dtype {
	PF_DTYPE_INT32 = 0,
	PF_DTYPE_INT64,
	PF_DTYPE_FLOAT32,
	PF_DTYPE_BYTES,
} pf_dtype;

#define PF_SPEC_MAX_FEATURES 64u
#define PF_SPEC_MAX_NAME 128u

/* What a feature of a spec is (pf_feature_spec.role): a record's
 * feature, or one the loader makes beside the feature before it (its
 * parent, f[i - 1]).  Made features are never looked up in a record. */
typedef enum pf_feature_role {
	PF_ROLE_VALUES = 0,	/* the record's feature of that name */
	PF_ROLE_LENGTHS,	/* int32[1]: the parent's length in the record
				   (values; bytes: of its first value), capped at
				   the parent's len; 0 when absent (:lengths) */
	PF_ROLE_SEGMENT_IDS,	/* int32[L]: the packed parent's segment ids */
	PF_ROLE_POSITIONS,	/* int32[L]: the packed parent's positions */
	PF_ROLE_LENGTHS_FULL,	/* the loader's own: PF_ROLE_LENGTHS, not capped */
} pf_feature_role;

typedef struct pf_feature_spec {
	char name[PF_SPEC_MAX_NAME];
	pf_dtype dtype;
	uint32_t len;		/* values (bytes for PF_DTYPE_BYTES) per record;
				   ragged: 0 until packing gives it L */
	bool has_default;	/* default=: optional, absent = default_value */
	/* 0.7, in what was padding (the struct's size and offsets stay): */
	bool ragged;		/* [*]: any length, packed (pack_length) */
	uint8_t role;		/* pf_feature_role */
	bool nopad;		/* the loader's own (packing's inner rows): an int
				   list's values past the record's are left as
				   they are, not padded (its length says where
				   they end) */
	double pad;
	double default_value;
	double scale, shift;	/* float32: v * scale + shift (1, 0 default) */
	bool clip;
	double clip_lo, clip_hi;
} pf_feature_spec;

typedef struct pf_spec {
	pf_feature_spec f[PF_SPEC_MAX_FEATURES];
	uint32_t n;
	size_t row_bytes;	/* bytes of one preprocessed record */
} pf_spec;

/*! Bytes per value of a dtype (1 for bytes). */
PF_API size_t pf_dtype_size(pf_dtype t);
PF_API const char *pf_dtype_name(pf_dtype t);
/*! pf_spec_parse(): parse text into *spec.  @return 0, or -EINVAL with err
 *  naming the byte offset in text and what was wrong. */
PF_API int pf_spec_parse(pf_spec *spec, const char *text, pf_error *err);
/*! pf_spec_format(): the canonical text of a spec.  @return its length
 *  (as snprintf: the whole length even when cap is short; dst is
 *  terminated whenever cap > 0). */
PF_API size_t pf_spec_format(const pf_spec *spec, char *dst, size_t cap);
/*! Byte offset of feature i inside a row (features packed in order, each
 *  aligned to its dtype); row_bytes for i >= n. */
PF_API size_t pf_spec_offset(const pf_spec *spec, uint32_t i);
/*! pf_spec_apply(): preprocess one decoded example into row (row_bytes
 *  bytes, 8-byte aligned, else -EINVAL).  @return 0, -ENOMSG when a
 *  feature without default= is missing (err names it and lists the
 *  record's features), or -EBADMSG when a feature has a kind that cannot
 *  become its dtype (bytes into int32, a number into bytes); err says
 *  which feature, and the row is left partly written.  Thread-safe. */
PF_API int pf_spec_apply(const pf_spec *spec, const pf_example *ex, void *row,
			 pf_error *err);
/*! pf_spec_apply_to(): the same, feature i written to dst[i] (aligned to
 *  its dtype's size), so each feature can go straight into its tensor. */
PF_API int pf_spec_apply_to(const pf_spec *spec, const pf_example *ex,
			    uint8_t *const dst[], pf_error *err);
/*! pf_spec_decode(): pf_example_decode() of the record rec[0..len) and
 *  pf_spec_apply_to() in one pass over its wire bytes, feature i written
 *  to dst[i] (aligned to its dtype's size).  The output bytes, the return
 *  value and the error are those of the two calls, on every input; the
 *  common shapes (packed lists, each key once) are decoded straight into
 *  dst (int64 lists through pf_varint_decode_*()), anything else by the
 *  two calls themselves.  arena is scratch, the caller's (one per
 *  thread): give it PF_ARENA_BYTES_FOR(len) free bytes, as for
 *  pf_example_decode() (less may make this fail with -ENOBUFS where the
 *  fast path alone would not); it is left as it was on entry.
 *  @return 0, -EBADMSG (corrupt record: err->offset is the byte in rec;
 *  or a kind that cannot become its dtype), -ENOMSG (a feature without
 *  default= missing), -EFBIG, -ENOBUFS, -EINVAL (misaligned dst); on
 *  error dst is partly written.  Thread-safe with distinct arenas and destinations; no
 *  allocation. */
PF_API int pf_spec_decode(const pf_spec *spec, const void *rec, size_t len,
			  pf_arena *arena, uint8_t *const dst[], pf_error *err);

/* ------------------------------------------------------------------ */
/* The loader                                                           */
/* ------------------------------------------------------------------ */
/*
 * One loader per host.  It hands each of the host's cores a batch of
 * exactly per_core_batch records every step.  The order of records is a
 * pure function of (dataset, seed, epoch, topology): the same on every
 * run and at every thread count.  Each host reads about 1/num_hosts of
 * the bytes, and every host yields the same number of steps per epoch:
 * floor(records / global_batch); the remainder is dropped and counted
 * (or, with PF_REMAINDER_WRAP, filled from the start of the host's share).
 * A dataset that cannot make one step is refused by pf_loader_create()
 * (-EINVAL, naming the dataset's record count and the global batch of
 * per_core_batch x cores_per_host x num_hosts records): fewer records
 * than one global batch, unless PF_REMAINDER_WRAP, which needs only one
 * record per host; a dataset of no records, always.
 */
typedef struct pf_loader pf_loader;

typedef enum pf_remainder {
	PF_REMAINDER_DROP = 0,
	PF_REMAINDER_WRAP,
} pf_remainder;

/* Which shuffle pf_loader_config.shuffle turns on (shuffle_mode, a field
 * appended in 0.7: its zero is the window shuffle of before). */
typedef enum pf_shuffle_mode {
	/* Frames permuted each epoch, records shuffled in a window: a
	 * batch draws from the few frames a window holds, so shards sorted
	 * by label (or date, or source) give batches of few labels. */
	PF_SHUFFLE_WINDOW = 0,
	/* Each epoch a new permutation over the whole dataset: every
	 * indexed frame is cut into slices of a few records and the slices
	 * of all shards are permuted together, then shuffled in the
	 * window, so that a batch draws from about window / slice frames
	 * anywhere in the dataset.  A slice is read by reading its frame
	 * (random access through the index), so a frame is read once per
	 * slice: the slice is the largest that keeps a per-core batch's
	 * records independent enough (docs/design.md, "The global
	 * shuffle"); a larger shuffle_window cuts frames less.  Indexed
	 * shards only: a stream file is refused at create, naming it
	 * (`shardtool index` gives it an index).  Implies shuffle. */
	PF_SHUFFLE_GLOBAL = 1,
} pf_shuffle_mode;

/*! pf_steps_per_epoch(): the steps every host of a pod yields in one
 *  epoch of `records` records, in global batches of `global_batch` records
 *  (per_core_batch x cores_per_host x num_hosts): floor(records /
 *  global_batch) with PF_REMAINDER_DROP, the ceiling with
 *  PF_REMAINDER_WRAP (the last batch filled from the start).  0 for a
 *  global batch of 0.  The rule the loader follows, and host/'s scaling
 *  plan with it. */
static inline uint64_t pf_steps_per_epoch(uint64_t records, uint64_t global_batch,
					  pf_remainder rem)
{
	if (!global_batch)
		return 0;
	return records / global_batch +
	       (rem == PF_REMAINDER_WRAP && records % global_batch != 0);
}

/* A saved loader state (pf_loader_save_state()), as bytes. */
typedef struct pf_state_blob {
	const void *data;
	size_t len;
} pf_state_blob;

/*! An all-gather among the hosts of a pod: every host gives len bytes
 *  (mine; len is the same on every host) and receives every host's, host
 *  h's at all + h x len (num_hosts x len bytes).  @return 0, or <0 with
 *  err saying why.  host/pf_host.h's pf_pod_allgather() is one, over MPI
 *  (ctx: the pf_pod). */
typedef int (*pf_allgather_fn)(void *ctx, const void *mine, size_t len, void *all,
			       pf_error *err);

/* Packed sequences (pf_loader_config.pack_length; docs/api.md, "Packed
 * sequences"). */
typedef enum pf_pack_mode {
	PF_PACK_FIRST_FIT = 0,	/* each record whole into the first of a pool
				   of open rows with room (the oldest closes
				   when none has and the pool is full); longer
				   than L: cut to L, counted */
	PF_PACK_CONCAT,		/* the records' values one after the other,
				   cut into rows of exactly L */
} pf_pack_mode;
#define PF_PACK_LENGTH_MAX (1u << 20)	/* pack_length at most */
#define PF_PACK_POOL_DEFAULT 8u		/* first_fit's open rows */
#define PF_PACK_POOL_MAX 64u
#define PF_PACK_MAX_FEATURES 16u	/* packed features at most */

/*! "first_fit", "concat"; NULL for another value. */
PF_API const char *pf_pack_mode_name(pf_pack_mode mode);
/*! pf_pack_mode_parse(): "first_fit" (or "first-fit") and "concat".
 *  @return 0 with *mode, or -EINVAL. */
PF_API int pf_pack_mode_parse(const char *name, pf_pack_mode *mode);
/* A mixture's sources (pf_loader_config.sources).  The name pf_source is
 * the formats layer's record reader, hence pf_loader_source. */
typedef struct pf_loader_source {
	const char *name;		/* unique among the sources; NULL: "source<i>" */
	const char *const *paths;	/* files, directories or globs, as
					   pf_loader_config.paths (a manifest too) */
	size_t npaths;
	double weight;			/* > 0 and finite; the shares are the
					   weights over their sum */
} pf_loader_source;

/* How a mixture fills a batch's rows from its sources. */
typedef enum pf_mix {
	/* Each global batch carries from source k its share p_k of the
	 * batch, floor or ceil of p_k x B, the rounding rotating so that
	 * every source's count over steps stays within one record of
	 * t x B x p_k (long-run shares exact). */
	PF_MIX_STRATIFIED = 0,
	/* Each row's source drawn at random from the shares, seeded by
	 * (seed, step, row): a host's counts vary from batch to batch. */
	PF_MIX_SAMPLE,
} pf_mix;

/* What a mixture's weights count (0.8). */
typedef enum pf_mix_unit {
	/* Records (the default): source k gives w_k / sum(w) of the rows. */
	PF_MIX_UNIT_RECORDS = 0,
	/* Tokens (a packed mixture only: pack_length with sources): source
	 * k gives w_k / sum(w) of the tokens, the first packed feature's
	 * values, its rows' share then w_k / mean_k over the sum of them,
	 * mean_k its records' mean length (capped as packing caps them),
	 * known from the lengths every host reads before the first batch:
	 * the proportions data-mixture papers quote. */
	PF_MIX_UNIT_TOKENS,
} pf_mix_unit;

/* When a mixture ends (besides max_steps).  Every source has its own
 * epochs: a source that runs out starts its next epoch, with a new
 * shuffle when shuffling, whatever the others do. */
typedef enum pf_mix_stop {
	/* After `epochs` passes of the first source (the default): the last
	 * step is the last whose records of the first source all lie in its
	 * first `epochs` epochs. */
	PF_MIX_STOP_FIRST_SOURCE = 0,
	/* When any source has run out of its first epoch (tf.data's
	 * stop_on_empty_dataset): the last step is the last whose records
	 * of every source lie in its first epoch. */
	PF_MIX_STOP_FIRST_EXHAUSTED,
} pf_mix_stop;

/* pf_loader_config's threads, io_depth and prefetch: chosen by the loader
 * (pf_loader_tuning()). */
#define PF_AUTO 0u
#define PF_PREFETCH_AUTO_MAX 8u
#define PF_TUNE_BATCHES 16u

typedef struct pf_loader_config {
	const char *const *paths;	/* files, directories or globs */
	size_t npaths;
	const char *features;		/* feature spec (see above); required */
	bool ignore_manifest;		/* plan from the shards themselves even when
					   paths name a dataset manifest (one
					   directory holding PF_MANIFEST_NAME, or
					   the manifest file): then one read plans
					   the dataset and shards are opened only
					   to be read */

	uint32_t host_index;		/* 0 .. num_hosts-1 */
	uint32_t num_hosts;		/* 0: 1 */
	uint32_t cores_per_host;	/* 0: 1 */
	uint32_t per_core_batch;	/* required */

	uint64_t seed;
	uint32_t epochs;		/* epochs in all (a resumed run goes on to
					   the same count); 0: 1 */
	uint64_t max_steps;		/* stop after this many steps of this run;
					   0: no limit */
	bool shuffle;			/* false (the default, as in tf.data and
					   Grain): records in the files' order;
					   true: frames permuted each epoch and
					   records shuffled in a window (loadbench
					   --shuffle) */
	uint32_t shuffle_window;	/* records, rounded up to whole host batches:
					   each block of that many records of the
					   host's stream comes out permuted; 0: 8192,
					   or fewer where the memory budget cannot
					   hold them (pf_loader_tuning() says why; a
					   window set here that it cannot hold is
					   refused naming the largest it can) */
	pf_remainder remainder;

	/* PF_AUTO (0, the default) for threads, io_depth and prefetch: the
	 * loader picks from what it measures in the first batches, and
	 * pf_loader_tuning() says what it chose and why. */
	unsigned threads;		/* decode workers; PF_AUTO: up to the CPUs
					   this process may run on (fewer where the
					   memory budget cannot hold their buffers),
					   as many as decoding needs beside the
					   consumer */
	unsigned io_depth;		/* reads in flight; PF_AUTO: as many as the
					   measured read latency needs to keep the
					   decoders busy, at most 32 */
	size_t memory_budget;		/* bytes for all pools (mmap()ed, outside
					   pf_allocator: pf_common.h says why);
					   0: 512 MiB */
	unsigned prefetch;		/* the consumer may hold prefetch + 1 batches;
					   PF_AUTO: 2 (fewer where the memory
					   budget cannot hold them), raised (up to
					   PF_PREFETCH_AUTO_MAX, as the budget
					   allows) when the consumer's stalls need
					   more batches ready; never lowered */
	uint64_t max_record_size;	/* 0: PF_MAX_RECORD_DEFAULT */
	bool direct_io;			/* O_DIRECT for aligned indexed shards */
	bool verify_records;		/* also check each record's data CRC inside
					   frames already verified by their CRC32C
					   and zstd checksum (streams: always) */
	const char *io_backend;		/* NULL: $PODFEED_IO or io_uring */
	/* Reliability of reads (io/pf_io.h, "Reliability"): injected faults,
	 * retries of transient errors with backoff, a timeout per read.  0 /
	 * NULL: the environment ($PODFEED_FAULTS, $PODFEED_IO_RETRIES,
	 * $PODFEED_IO_BACKOFF_US, $PODFEED_IO_TIMEOUT_MS), else 3 retries from
	 * 10 ms and 60 s.  A read that still fails goes to on_corrupt below.
	 * The loader's own pread reads (index tails, stream files) go through
	 * pf_file_pread(), whose policy is the process's: setting any of
	 * these puts it in force for the loader's life, and pf_loader_free()
	 * puts back the one it replaced (unless pf_file_set_policy() was
	 * called since: the caller's choice stays). */
	const char *io_faults;
	int io_retries;			/* PF_IO_RETRIES_NONE: none */
	int io_retry_backoff_us;	/* PF_IO_BACKOFF_NONE: none */
	int io_timeout_ms;		/* PF_IO_TIMEOUT_NONE: no limit */
	pf_region_table *regions;	/* count every read (index tails, frames,
					   stream files) to its mount and region
					   (io/pf_io.h); NULL: not */

	/* Continue from saved states (see pf_loader_save_state()).  With the
	 * topology they were saved with, this host's own state is used and
	 * the batches are those of a run never stopped; with another host
	 * count or host batch, the states of every old host are needed: the
	 * records of the epoch they had not delivered are cut among the new
	 * hosts (whole global batches; the rest is this epoch's remainder),
	 * and later epochs follow the new topology.  Dataset, seed, shuffle
	 * and remainder must be those of the saved run. */
	const pf_state_blob *resume;
	size_t nresume;

	/* Corrupt data (pf_formats.h, "Corrupt data").  FAIL: the first
	 * damage, or a read that still fails after the I/O engine's retries,
	 * ends the loader with an error naming file, byte offset, frame,
	 * record and cause.  SKIP: the smallest unit is dropped and reported.
	 * Inside an indexed shard's frame the intact records fill the frame's
	 * places in order and the places left over (as many as records were
	 * lost) come out as holes: rows of zeros with valid[row] = 0, so that
	 * every host still yields the same steps; a frame that cannot be read
	 * or decompressed is all holes.  A stream file's records are its
	 * intact ones (so counted when the dataset is opened): no holes. */
	pf_corrupt_policy on_corrupt;
	uint64_t max_corrupt;		/* SKIP: drops allowed; one more stops the
					   loader with an error; 0: no limit */
	const char *quarantine;		/* SKIP: append a JSON line per drop to this
					   file (file, offset, unit, records, cause,
					   host); NULL: none */

	/* pf_loader_free() keeps the large pools (batch slots, read buffers:
	 * most of the memory budget) for the next loader the process creates
	 * with the same sizes, which then starts without faulting them in
	 * (on a VM: 15-200 ms for 130 MiB); at most 8 pools and 1 GiB are
	 * kept, the oldest returned first, until pf_loader_trim().  For a
	 * process that makes loaders one after another (one per epoch, an
	 * evaluation loader, loadbench --repeat).  false: everything goes
	 * back to the system at pf_loader_free(). */
	bool keep_pools;

	/* The pod's collective, for opening the dataset.  With it and more
	 * than one host, pf_loader_create() is collective: every host must
	 * call it (a host that fails before it opens the dataset still takes
	 * its part, so that the others fail naming it rather than wait); the
	 * hosts check that they plan the same dataset (the same files,
	 * sizes and record counts; all from the manifest or all without),
	 * and without a manifest they split the counting of stream files:
	 * host h counts the stream files j (in file order among them) with
	 * j % num_hosts == h, and the counts are exchanged, so that a host
	 * decompresses about 1/num_hosts of the streams before its first
	 * batch instead of all of them (a drop found counting, in skip mode,
	 * is logged by the host that counted it and counted by every host).
	 * Called from the thread that calls pf_loader_create(), a few times.
	 * NULL: this host counts every stream file itself, on `threads`
	 * threads at once. */
	pf_allgather_fn allgather;
	void *allgather_ctx;
	/* 0.7: PF_SHUFFLE_WINDOW (0, the shuffle of before: with shuffle
	 * on) or PF_SHUFFLE_GLOBAL (a shuffle over the whole dataset, on
	 * whatever shuffle says).  Any other value is refused at create. */
	pf_shuffle_mode shuffle_mode;

	/* 0.7: packed sequences (docs/api.md, "Packed sequences").  With
	 * pack_length L (1 .. PF_PACK_LENGTH_MAX; 0: no packing) every
	 * feature of the spec must be ragged ([*]): they are packed together
	 * into rows of L values (pf_pack_mode, above),
	 * each row of a batch one packed row, and each gets NAME_segment_ids
	 * and NAME_positions (int32[L]) after it.  pack_pool: open rows of
	 * first_fit (0: PF_PACK_POOL_DEFAULT). */
	uint32_t pack_length;
	pf_pack_mode pack_mode;
	uint32_t pack_pool;
	/* 0.7: a mixture (docs/api.md, "Mixtures"): nsources sources, each
	 * its own dataset with a weight, read with this config's feature
	 * spec (a feature a source's schema lacks needs default=, else
	 * create fails naming the source and the feature), topology, seed,
	 * shuffle and budget (shared among the sources by weight).  paths
	 * must then be empty; plain paths are one source of weight 1. */
	const pf_loader_source *sources;
	size_t nsources;
	pf_mix mix;			/* PF_MIX_STRATIFIED (0) or PF_MIX_SAMPLE */
	pf_mix_stop mix_stop;		/* PF_MIX_STOP_FIRST_SOURCE (0) or
					   PF_MIX_STOP_FIRST_EXHAUSTED */
	bool source_feature;		/* a mixture: append the feature "_source",
					   int32[1], the row's source index */
	/* 0.7: the global shuffle's cache of decompressed frames, in frames
	 * (docs/design.md, "The global shuffle"): a frame cut into slices
	 * is read and decompressed once while it is kept, whatever the
	 * number of its slices a window holds.  PF_AUTO (0): as many as the
	 * plan's frame groups need, where the memory budget has room left
	 * after the other pools (fewer, down to none, where it has not);
	 * PF_FRAME_CACHE_OFF: none (every slice reads its frame); n: n
	 * frames, refused at create when the budget has no room for them.
	 * Batches are the same whatever the cache holds.  Not used in skip
	 * mode (on_corrupt=skip) or by the window shuffle. */
	uint32_t frame_cache;
	/* 0.8: what a mixture's weights count (pf_mix_unit; tokens: a
	 * packed mixture).  A mixture with pack_length is mixed, then
	 * packed (docs/api.md, "Packed mixtures"). */
	pf_mix_unit mix_unit;
	/* 0.8: start skip_steps steps on, as if the run (from its start, or
	 * from the states in resume) had delivered them and they had been
	 * dropped: the first batch is the one a run never stopped hands out
	 * at that global step, on every host alike (each host skips the same
	 * steps), across epochs, packed (packed steps) and mixed too.  What
	 * is skipped is not read where the plan says where the first batch's
	 * records are (the shuffle block it starts in is read, as a resume
	 * reads it); the metrics count it (skipped_*), and a state saved
	 * later is past it.  max_steps counts the steps after the skip.  A
	 * skip that reaches past the run's last step (its epochs) is refused
	 * at create (-ERANGE, naming that step); nothing is started then. */
	uint64_t skip_steps;
	/* 0.8: open the dataset and plan the run (the states resumed,
	 * skip_steps applied) but start no thread and read no record:
	 * pf_loader_records_of(), the steps, the state and the metrics
	 * answer, pf_loader_next() refuses (-EINVAL).  What `loadbench
	 * which` creates to say which records a run's steps hold. */
	bool plan_only;
	/* New fields go here, at the end, only (pf_common.h, "the ABI
	 * promise"): their zero is their default. */
} pf_loader_config;

/*! pf_loader_config.frame_cache: no cache of decompressed frames. */
#define PF_FRAME_CACHE_OFF UINT32_MAX

/* One feature of one core's batch: values[per_core_batch][len]. */
typedef struct pf_tensor {
	const char *name;
	pf_dtype dtype;
	uint32_t len;		/* values per record */
	void *data;		/* per_core_batch * len * pf_dtype_size(dtype) bytes */
} pf_tensor;

typedef struct pf_core_batch {
	pf_tensor *tensors;	/* one per spec feature, in spec order */
	uint32_t ntensors;
	void *block;		/* all of this core's tensors, contiguous */
	size_t block_bytes;
	const uint8_t *valid;	/* [per_core_batch]: 1 a record, 0 a hole left by
				   a corrupt record dropped (PF_CORRUPT_SKIP) */
	uint32_t nvalid;	/* records (per_core_batch unless holes) */
} pf_core_batch;

typedef struct pf_batch {
	uint32_t epoch;		/* from 0 */
	uint64_t step;		/* step within the epoch, from 0 */
	uint64_t global_step;	/* steps since the start */
	bool epoch_start;	/* first step of its epoch */
	bool epoch_end;		/* last step of its epoch */
	uint32_t per_core_batch;
	uint32_t cores;
	pf_core_batch *core;	/* cores entries; their blocks lie one after
				   the other: core[c].block is core[0].block
				   + c * block_bytes (so a feature of every
				   core is one strided array) */
} pf_batch;

typedef struct pf_stage_metrics {
	uint64_t busy_ns;	/* time spent working */
	uint64_t wait_ns;	/* time blocked on input or output */
} pf_stage_metrics;

typedef struct pf_loader_metrics {
	uint64_t records;		/* delivered to the consumer */
	uint64_t steps;
	uint64_t bytes_read;		/* compressed bytes read from files */
	uint64_t bytes_decompressed;	/* TFRecord bytes produced */
	uint64_t remainder_dropped;	/* records dropped to keep steps equal */
	uint64_t remainder_wrapped;	/* records repeated to fill the last step;
					   both counted for the epochs this run
					   ends (a resumed run: the one it
					   finishes, too) */
	uint64_t records_per_epoch;	/* of the whole dataset */
	uint64_t steps_per_epoch;
	pf_stage_metrics io, decode;
	unsigned decode_threads;
	uint64_t next_wait_ns;		/* consumer time blocked in next() */
	uint64_t queue_fill_sum;	/* summed queue fill at each next() */
	uint64_t next_hist[PF_IO_HIST_BUCKETS];	/* next() latency, log2 us */
	uint64_t memory_bytes;		/* pools allocated from the budget */
	const char *io_backend;
	uint32_t files_direct;		/* files read with O_DIRECT */
	/* Reads repeated after a transient error, changed by an injected
	 * fault, not finished in time: the process's, over the loader's life
	 * (every read path, pf_file_pread()'s too). */
	uint64_t io_retries, io_faults, io_timeouts;
	uint64_t io_short_reads;	/* engine reads that returned less than asked */
	uint64_t corrupt_drops;		/* units dropped (PF_CORRUPT_SKIP) */
	uint64_t corrupt_records;	/* records they held, where known
					   (corrupt_unknown below: those not) */
	uint64_t holes;			/* rows handed out empty for them */
	/* Reads the loader's I/O engine completed: one per frame of an
	 * indexed shard, one per block of PF_READ_DEFAULT bytes of a stream
	 * file (a few blocks past what a stream's last segment needs may
	 * be read ahead); their bytes are bytes_read. */
	uint64_t io_requests;

	/* Fields below were appended after 0.1 (the struct only grows).
	 * Opening the dataset in pf_loader_create(), which the first batch
	 * waits for, by phase: */
	uint64_t open_manifest_ns;	/* reading and parsing the manifest */
	uint64_t open_index_ns;		/* every shard's index tail (no manifest) */
	uint64_t open_count_ns;		/* counting this host's stream files (no
					   manifest; allgather: its share) */
	uint64_t open_exchange_ns;	/* the pod's collectives (allgather), waiting
					   for the other hosts included */
	uint64_t open_files;		/* files opened to plan: 1 (the manifest) or
					   every shard */
	uint64_t open_count_files;	/* stream files this host counted */
	uint64_t open_count_bytes;	/* their bytes, read whole */
	uint64_t open_count_decompressed; /* TFRecord bytes counting produced */
	uint64_t create_ns;		/* pf_loader_create() in all: the open, the
					   pools, the threads */
	uint64_t first_batch_ns;	/* from the start of pf_loader_create() to
					   the first batch pf_loader_next() returned
					   (0 before); minus create_ns: the first
					   reads */
	/* The dataset's files the I/O thread opened: each when the schedule
	 * came near it (a bounded number ahead) and closed once no read
	 * wanted it, so a file read again after its close counts again;
	 * and the most held open at once (opening ones too), at most
	 * 3 x io_depth + threads + 1, whatever the number of files. */
	uint64_t files_opened;
	uint32_t files_open_peak;
	/* 0.6: the dataset's files as planned (the manifest's, or those
	 * named), and those of 0 bytes among them: a report names the empty
	 * ones (pf_report_add_loader()) without a stat per file when there
	 * are none. */
	uint64_t dataset_files;
	uint64_t empty_files;
	/* 0.7: image features (`name:image[H,W]`): images decoded, those
	 * whose box was smaller than the output (upscaled), the decode
	 * threads' time in the image decode stage (part of decode.busy_ns),
	 * and the image scratch the threads hold now (a typical image's is
	 * set aside in the budget; a larger image grows it, and memory_bytes
	 * counts what goes past). */
	uint64_t images;
	uint64_t images_upscaled;
	uint64_t image_decode_ns;
	uint64_t image_scratch_bytes;
	/* 0.7: corrupt data in skip mode, what is not known.  A drop whose
	 * records cannot be counted (a damaged span of a stream, a compressed
	 * member, a stream cut short: what follows the damage cannot be
	 * read) adds to corrupt_unknown and not to corrupt_records, which
	 * is then a lower bound: the records lost are unknown while
	 * corrupt_unknown > 0 (reports say "unknown", JSON null).
	 * corrupt_bytes: the bytes every drop skipped, from its start to
	 * where reading resumed (file bytes for frames and compressed
	 * members, decompressed bytes for a stream's records and spans). */
	uint64_t corrupt_unknown;
	uint64_t corrupt_bytes;
	/* 0.7: packing (pack_length; all 0 without it).  Rows delivered, the
	 * value slots they hold (rows x L x packed features) and the records'
	 * values among them (efficiency: pack_values / pack_slots), the
	 * segments in them (records a row: pack_segments / pack_rows; a
	 * record concat splits counts in each row); records longer than L
	 * cut (first_fit) and the values cut; records of no values (skipped);
	 * and rows made past an epoch's last step, dropped. */
	uint64_t pack_rows, pack_slots, pack_values, pack_segments;
	uint64_t pack_truncated_records, pack_truncated_values;
	uint64_t pack_empty_records;
	uint64_t pack_rows_dropped;
	/* 0.7: the global shuffle's cache of decompressed frames
	 * (frame_cache): its entries and their bytes (in memory_bytes too);
	 * segments served from it (no read), frames read and decompressed
	 * into it, entries replaced by a frame used sooner, and segments
	 * decoded outside it (their frame not worth keeping, or every entry
	 * in use). */
	uint64_t frame_cache_entries, frame_cache_bytes;
	uint64_t frame_cache_hits, frame_cache_loads;
	uint64_t frame_cache_evictions, frame_cache_bypassed;
	/* 0.7: packing's plan: the records whose packed lengths the shards'
	 * indexes told (shardtool convert writes them); 0 when they were read
	 * from the records at create (a stream file, a shard without them,
	 * on_corrupt skip). */
	uint64_t pack_lengths_from_index;
	/* 0.7: what planning the packing cost this host: the shards' index
	 * tails it read for their lengths, the files it read whole for them
	 * (stream files: at the open's count, which measures them on the
	 * way), and the bytes of lengths the pod's hosts exchanged (every
	 * host's; 0 alone).  With the pod's all-gather each file is read by
	 * one host (docs/api.md, "Packed sequences"). */
	uint64_t pack_lengths_tails;
	uint64_t pack_lengths_files;
	uint64_t pack_lengths_exchanged;
	/* 0.7: packing: the records the decode threads wrote straight into
	 * their packed rows, planned ahead from the plan's lengths (the
	 * others are copied there by the consumer's thread). */
	uint64_t pack_direct_records;
	/* 0.8: packing: the records and the tokens (values of the first
	 * packed feature) in the rows made past an epoch's last step and
	 * dropped (pack_rows_dropped of them), as far as the rows hold them
	 * (a record concat splits counts once, in its first row). */
	uint64_t pack_dropped_records, pack_dropped_tokens;
	/* 0.8: skip_steps: the steps skipped (from global step
	 * skipped_from), the records their batches held (packed: the
	 * records' pieces in their rows) and, packed, the values of the
	 * packed features in those rows (0 unpacked).  All 0 without a
	 * skip. */
	uint64_t skipped_steps, skipped_from;
	uint64_t skipped_records, skipped_tokens;
	/* 0.8: the shuffle window.  shuffle_window: records per shuffle
	 * block in force (0: no shuffle); a default window the memory budget
	 * cannot hold is fitted to it (`fitted`, pf_loader_tuning() says
	 * why).  window_as_read: 1 when the window holds records as read
	 * (their bytes, in pages, until the order has put each in its step;
	 * image features are decoded then, straight into the batch), 0 when
	 * it holds them as decoded rows in batch slots.  window_bytes: the
	 * memory planned for the window (its pages, or the batch slots of the
	 * blocks being filled; in memory_bytes too), window_peak_bytes: the
	 * most of its pages the records took at once (0 as rows). */
	uint64_t shuffle_window;
	uint32_t window_as_read;
	uint64_t window_bytes, window_peak_bytes;
	/* 0.8: the defaults the memory budget could not hold, each cut to
	 * what it holds (a bit each, PF_FITTED_*); pf_loader_tuning() says
	 * what was chosen and why, reports a line each. */
	uint32_t fitted;
	/* New fields go here, at the end, only (pf_common.h, "the ABI
	 * promise"): their zero is their default. */
} pf_loader_metrics;

/* pf_loader_metrics.fitted: the defaults cut to the memory budget. */
#define PF_FITTED_WINDOW 1u		/* shuffle_window */
#define PF_FITTED_PREFETCH 2u		/* prefetch (PF_AUTO starts lower than 2) */
#define PF_FITTED_THREADS 4u		/* threads (fewer decode workers) */
#define PF_FITTED_FRAME_CACHE 8u	/* frame_cache (fewer frames than the plan's groups) */

/* One setting of the pipeline, as the loader runs it. */
typedef struct pf_tuning_choice {
	unsigned value;		/* in force now */
	bool automatic;		/* PF_AUTO: the loader's choice, else the config's */
	bool measured;		/* chosen from measurements; false: the
				   starting value (too few batches yet) or
				   the config's */
	char why[256];		/* one line: what was measured, why this value */
} pf_tuning_choice;

typedef struct pf_tuning {
	pf_tuning_choice threads;	/* decode workers taking work */
	pf_tuning_choice io_depth;	/* frame reads in flight */
	pf_tuning_choice prefetch;	/* the consumer may hold prefetch + 1 */
	/* 0.8: sized at create from the memory budget (measured is false):
	 * records per shuffle block (0: no shuffle), and the global
	 * shuffle's decompressed frames kept (frame_cache). */
	pf_tuning_choice shuffle_window;
	pf_tuning_choice frame_cache;
	/* New fields go here, at the end, only (pf_common.h, "the ABI
	 * promise"). */
} pf_tuning;

/*! pf_loader_create(): open the dataset (indexed shards through their
 *  index; stream files are scanned once to count records), plan this
 *  host's share, size every pool from the memory budget, start threads.
 *  @return 0 with *out, or -errno with err (may be NULL) saying why;
 *  -EINVAL for a dataset too small for one step (above). */
PF_API int pf_loader_create_sized(pf_loader **out, const pf_loader_config *cfg,
				  size_t cfg_size, pf_error *err);
static inline int pf_loader_create(pf_loader **out, const pf_loader_config *cfg,
				   pf_error *err)
{
	/* The ABI promise (pf_common.h): the library learns which header
	 * the caller was built with from the size of its config. */
	return pf_loader_create_sized(out, cfg, sizeof(*cfg), err);
}
/*! pf_loader_next(): block until the next host batch is ready.
 *  @return 1 with *batch (valid until pf_loader_release()), 0 when all
 *  epochs are done, <0 on error (pf_loader_last_error() says what and
 *  where).  At most cfg->prefetch + 1 batches may be held at once: a
 *  call with that many held is a caller's mistake that changes nothing:
 *  it returns -EBUSY (pf_loader_last_error(): "N batches held, at most
 *  M; release one first"), takes no batch and stops nothing; after a
 *  pf_loader_release() the next call returns the batch it would have. */
PF_API int pf_loader_next(pf_loader *l, pf_batch **batch);
/*! pf_loader_next_timed(): pf_loader_next() that waits at most
 *  timeout_ns (0: not at all; UINT64_MAX: as long as it takes), so that
 *  a caller can look at other things (a signal, a stop flag) between
 *  waits.  @return as pf_loader_next(), or -ETIMEDOUT when no batch was
 *  ready in time: nothing is taken then, and the next call goes on.  A
 *  loader that failed because a read timed out returns -ETIMEDOUT too:
 *  then pf_loader_last_error() is not NULL (it is NULL after a wait). */
PF_API int pf_loader_next_timed(pf_loader *l, pf_batch **batch,
				uint64_t timeout_ns);
/*! Give a batch back to the loader. */
PF_API void pf_loader_release(pf_loader *l, pf_batch *batch);
/*! pf_loader_save_state(): where this host is, as a small versioned
 *  blob: every batch pf_loader_next() has returned counts as delivered
 *  (whether released or not), nothing in flight does.  Call it from the
 *  consumer's thread, between pf_loader_next() calls.  @return the blob's
 *  length; the blob is written to buf only when that is at most cap (so a
 *  call with cap 0 asks the size), or -ENOMEM. */
PF_API int64_t pf_loader_save_state(pf_loader *l, void *buf, size_t cap);

/* What a state says, for reports and tools. */
typedef struct pf_state_info {
	uint32_t host_index, num_hosts, cores_per_host, per_core_batch;
	uint32_t epoch;			/* in progress, or next when fresh */
	bool fresh;			/* that epoch has not started */
	uint64_t step_in_epoch;		/* batches of it delivered */
	uint64_t global_step;		/* batches delivered in all */
	uint64_t records_left;		/* of the epoch, on this host */
	uint64_t dataset_records;
	/* 0.7: a packing loader's state: its pack length (0: not packing).
	 * The fields above are then the packing loader's (its topology, packed
	 * steps), records_left its inner loader's records still to read. */
	uint32_t pack_length;
	/* 0.8: the rest of what a state says (pf_state_describe() prints it
	 * all): the dataset's fingerprint (of its files' sizes and record
	 * counts), the order's seed, shuffle and remainder policy; a packing
	 * loader's mode, pool and packed features; a mixture's sources (0:
	 * not a mixture; its position is then `global_step`, the next step);
	 * and the steps skip_steps skipped in the job so far (a record: the
	 * position counts them already). */
	uint64_t dataset_fingerprint;
	uint64_t seed;
	bool shuffle, global_shuffle;
	uint32_t remainder;		/* pf_remainder */
	uint32_t pack_mode, pack_pool, pack_features;
	uint32_t sources;
	uint64_t skipped_steps;
	/* New fields go here, at the end, only (pf_common.h, "the ABI
	 * promise"): their zero is their default. */
} pf_state_info;

/*! pf_state_inspect(): check a blob (envelope, CRC, format version,
 *  fields) and say what it holds.  @return 0, or -EBADMSG (truncated,
 *  corrupt), -EPROTONOSUPPORT (a newer format) with err naming the byte
 *  offset in the blob and what was wrong. */
PF_API int pf_state_inspect_sized(const void *blob, size_t len, pf_state_info *info,
				  size_t info_size, pf_error *err);
static inline int pf_state_inspect(const void *blob, size_t len, pf_state_info *info,
				   pf_error *err)
{
	return pf_state_inspect_sized(blob, len, info, sizeof(*info), err);
}
/*! Why the last pf_loader_next() failed: a caller's mistake that changed
 *  nothing (-EBUSY), or else the error that ended the loader; NULL when
 *  neither (a -EBUSY is forgotten at the next call).  Valid until the next
 *  pf_loader_next() or pf_loader_free(); the consumer's thread. */
PF_API const pf_error *pf_loader_last_error(const pf_loader *l);
/*! The loader's figures so far (any thread).  Through the inline
 *  wrapper: filled up to the caller's sizeof(pf_loader_metrics). */
PF_API void pf_loader_get_metrics_sized(const pf_loader *l, pf_loader_metrics *m,
					size_t m_size);
static inline void pf_loader_get_metrics(const pf_loader *l, pf_loader_metrics *m)
{
	pf_loader_get_metrics_sized(l, m, sizeof(*m));
}
/*! pf_loader_tuning(): the threads, reads in flight and prefetch in force,
 *  each with whether the loader chose it (PF_AUTO) and why, in one line.
 *  threads and prefetch are chosen once, after the first
 *  PF_TUNE_BATCHES batches; io_depth follows the reads' latency all along.
 *  Thread-safe.  Through the inline wrapper: filled up to the caller's
 *  sizeof(pf_tuning). */
PF_API void pf_loader_tuning_sized(const pf_loader *l, pf_tuning *out, size_t out_size);
static inline void pf_loader_tuning(const pf_loader *l, pf_tuning *out)
{
	pf_loader_tuning_sized(l, out, sizeof(*out));
}
PF_API uint64_t pf_loader_steps_per_epoch(const pf_loader *l);
/*! pf_loader_steps_left(): the batches pf_loader_next() will still hand
 *  out: the run's steps (the rest of a resumed epoch, the epochs after
 *  it, cut at max_steps) less those handed out; a progress bar's total.
 *  0 once the run is done; UINT64_MAX when the count does not fit.  Any
 *  thread. */
PF_API uint64_t pf_loader_steps_left(const pf_loader *l);
/* One source of a mixture, as the run has used it. */
typedef struct pf_source_metrics {
	const char *name;		/* valid while the loader lives */
	double weight;
	double share;			/* the weight over the weights' sum */
	uint64_t records;		/* its rows handed out by this run */
	double realised_share;		/* records over the run's rows */
	uint32_t epochs_started;	/* of its own epochs (0: none yet) */
	uint64_t bytes_read, bytes_decompressed;
	uint64_t dataset_records;	/* of one epoch of it */
	uint64_t dataset_files;
	double seconds;			/* since the loader's creation: MB/s is
					   bytes_read over it */
	/* The storage region its files are in (pf_region_info.label: a
	 * declared region, "local" or "undeclared"), from the config's
	 * regions table, else from one of $PODFEED_REGION and the mounts
	 * alone; "mixed" when its files are in several. */
	const char *region;
	bool cross_region;		/* a declared region other than the host's */
	/* 0.8: a packed mixture's: the tokens (values of the first packed
	 * feature) of its records handed out in packed rows, and their share
	 * of the run's tokens; 0 unpacked. */
	uint64_t tokens;
	double realised_token_share;
	bool weighs_tokens;		/* the weights count tokens (mix_unit) */
	/* New fields go here, at the end, only. */
} pf_source_metrics;

/*! pf_loader_sources(): a mixture's sources (0: not a mixture). */
PF_API size_t pf_loader_sources(const pf_loader *l);
/*! pf_loader_source_metrics(): source i's figures so far.  The consumer's
 *  thread.  @return 0, or -ENOENT (no such source). */
PF_API int pf_loader_source_metrics_sized(const pf_loader *l, size_t i, pf_source_metrics *out,
					  size_t out_size);
static inline int pf_loader_source_metrics(const pf_loader *l, size_t i, pf_source_metrics *out)
{
	return pf_loader_source_metrics_sized(l, i, out, sizeof(*out));
}
PF_API const pf_spec *pf_loader_spec(const pf_loader *l);
/*! pf_loader_feature_shape(): the shape of feature i's values in one
 *  record, and their element type.  A plain feature is [len]; an image is
 *  [H, W, C] ([C, H, W] with layout=nchw).  shape gets the dims (at most
 *  3), *elem the element type's name ("int32", "int64", "float32",
 *  "uint8" for bytes and images, "bfloat16": two bytes each) and
 *  *elem_size its bytes; elem and elem_size may be NULL.  @return the
 *  number of dims, or -EINVAL when i is not a feature.  Thread-safe. */
PF_API int pf_loader_feature_shape(const pf_loader *l, uint32_t i, uint32_t shape[3],
				   const char **elem, uint32_t *elem_size);
/* The records of a step (pf_loader_records_of()): one for each row of
 * each core, or, packed, one for each piece of a record in a row. */
typedef struct pf_record_ref {
	uint32_t epoch;		/* the step's epoch, and its step in it */
	uint64_t step;
	uint32_t core, row;	/* where: core and its batch's row */
	uint32_t source;	/* a mixture's source (its index; 0 otherwise) */
	uint32_t file;		/* the file (pf_loader_file(l, source, file)) */
	uint64_t record;	/* its record number in the file, from 0 */
	/* Packed (pack_length): the record's segment id in the row (1, 2,
	 * ...), the value its first packed feature starts at in the row,
	 * and which of its values are there: [from, from + count) (concat
	 * cuts a record over rows).  0 unpacked. */
	uint32_t segment, at, from, count;
	/* New fields go here, at the end, only (pf_common.h, "the ABI
	 * promise"). */
} pf_record_ref;

/*! pf_loader_records_of(): which record of which file each row of
 *  global step `step` holds, computed from the plan without reading
 *  anything: what pf_loader_next() delivers at that step (or, for a step
 *  skip_steps skipped, what a run never stopped delivered there).  The
 *  steps asked may be any of the run's, from the first it started at
 *  (before skip_steps) to its last: whether delivered yet or not.  Refs
 *  come core by core, row by row (packed: each row's pieces in segment
 *  order; a row of padding alone has none).  Any thread, while the
 *  loader lives.  Through the inline wrapper: refs of the caller's
 *  sizeof(pf_record_ref).  @return the number of refs (written to out
 *  only when at most cap: cap 0 asks the count), or -ERANGE with err
 *  naming the run's first and last steps, or -ENOMEM. */
PF_API int64_t pf_loader_records_of_sized(const pf_loader *l, uint64_t step,
					  pf_record_ref *out, size_t cap, size_t ref_size,
					  pf_error *err);
static inline int64_t pf_loader_records_of(const pf_loader *l, uint64_t step,
					   pf_record_ref *out, size_t cap, pf_error *err)
{
	return pf_loader_records_of_sized(l, step, out, cap, sizeof(*out), err);
}
/*! pf_loader_file(): the path of file `file` of source `source` (0 for a
 *  loader of one dataset), as pf_record_ref names it; valid while the
 *  loader lives.  NULL when there is no such file.  Any thread. */
PF_API const char *pf_loader_file(const pf_loader *l, uint32_t source, uint32_t file);
/*! Stop threads and free everything.  NULL is a no-op.  Nothing the
 *  loader changed in the process outlives it: its memory goes back to
 *  the system (unless cfg->keep_pools), and pf_file_pread()'s policy to
 *  the one before it (see io_faults above).  What a loader reads from
 *  the environment is in docs/api.md, "Environment variables". */
PF_API void pf_loader_free(pf_loader *l);
/*! Return the pools loaders freed with keep_pools left to the system.
 *  Thread-safe. */
PF_API void pf_loader_trim(void);

/* ------------------------------------------------------------------ */
/* The time series (loader/series.c)                                    */
/* ------------------------------------------------------------------ */
/*
 * A loader samples its counters over the run, for charts (throughput,
 * each stage's busy share, bytes per storage region, resident memory, all
 * over time): a point every 20 ms of the consumer's calls to
 * pf_loader_next(), the run's end a point too.  Memory is bounded: at
 * 240 points every other one goes and the interval doubles, so a run of
 * any length keeps 121 to 240 points over all of it.
 *
 * A series is a table of named columns of doubles, one value per point:
 *   t_s                   seconds since pf_loader_create() began (the
 *                         first point is 0, before anything was read)
 *   records, steps, bytes_read, bytes_decompressed
 *                         running totals (as pf_loader_metrics)
 *   rss_bytes             the process's resident memory: the highest
 *                         sampled since the point before
 *   stage.NAME.busy_s     a stage's threads' busy seconds, summed (io,
 *                         decode, consumer_wait: the consumer blocked in
 *                         next(); more stages may be added)
 *   stage.NAME.threads    its threads then: the stage's busy share of an
 *                         interval is busy_s's growth over the interval
 *                         times threads
 *   region.LABEL.bytes    bytes read from each region of
 *                         pf_loader_config.regions (pf_region_info.label)
 * Columns may be added in later versions: find them by name.
 */
typedef struct pf_series pf_series;

/*! pf_loader_series(): a copy of the loader's series now (with a point
 *  for now unless the run has ended), for any thread.  @return 0 with
 *  *out (free with pf_series_free()), or -ENOMEM. */
PF_API int pf_loader_series(const pf_loader *l, pf_series **out);
/*! NULL is a no-op. */
PF_API void pf_series_free(pf_series *s);
/*! Points (>= 1) and columns. */
PF_API size_t pf_series_points(const pf_series *s);
PF_API size_t pf_series_columns(const pf_series *s);
/*! Column c's name, or NULL past the last; valid while s lives. */
PF_API const char *pf_series_column_name(const pf_series *s, size_t c);
/*! Column c's values, pf_series_points() of them, or NULL past the last;
 *  valid while s lives. */
PF_API const double *pf_series_column(const pf_series *s, size_t c);
/*! The index of the column called name, or -ENOENT. */
PF_API int pf_series_find(const pf_series *s, const char *name);

/* ------------------------------------------------------------------ */
/* The pod simulation                                                   */
/* ------------------------------------------------------------------ */
/*
 * Plans one epoch of a dataset as each host of a pod of num_hosts would,
 * in one process, with the loader's own code: the dataset opened as
 * pf_loader_create() opens it (from its manifest when the paths name
 * one), and every host's plan and shuffle blocks made by the functions
 * a loader uses.  It reports, per host, what it reads to plan, what its
 * first batch needs, its steps and its records; for the pod, what the
 * bucket sees at start, with the manifest and without it.  And it checks
 * the plans by enumerating every record each host delivers: the same
 * steps on every host, no record delivered by two hosts (a host's own
 * repeats under PF_REMAINDER_WRAP aside), and the records delivered are
 * the epoch's but its remainder.
 *
 * Requests are counted as a bucket mounted through a FUSE file system
 * (gcsfuse, regionfs) sees them: a file opened is one metadata request,
 * each read one request; reads and bytes are those the open really made
 * (counted in a region table).  Without a manifest every host opens
 * every shard and reads its index tail, and counts stream files; a pod
 * with a collective (pf_loader_config.allgather) splits that counting,
 * which the per-host figures show.  What a host's first batch needs: the
 * frames (and stream files, whole: where a record lies in a stream is not
 * known before it is decompressed) that hold the records of its first
 * step, and the shards they are in.
 */
#define PF_PODSIM_MAX_HOSTS 65536u

typedef struct pf_podsim_config {
	const char *const *paths;	/* the dataset, as pf_loader_config */
	size_t npaths;
	bool ignore_manifest;		/* plan from the shards themselves */
	uint32_t num_hosts;		/* 1 .. PF_PODSIM_MAX_HOSTS */
	uint32_t cores_per_host;	/* 0: 1 */
	uint32_t per_core_batch;	/* required */
	uint64_t seed;
	uint32_t epoch;			/* the epoch planned, from 0 */
	bool shuffle;
	uint32_t shuffle_window;	/* as pf_loader_config */
	pf_remainder remainder;
	uint64_t max_record_size;	/* 0: PF_MAX_RECORD_DEFAULT */
	unsigned threads;		/* stream files counted at once; 0: CPUs */
	/* With a manifest: also open the dataset as a host without it does
	 * (every shard's tail, every stream file counted), to measure that
	 * too; otherwise the pod's figures without a manifest stay 0. */
	bool measure_without_manifest;
} pf_podsim_config;

/* What one host does (the open's figures are the host's own; every
 * host's are the same but for a split counting of stream files). */
typedef struct pf_podsim_host {
	uint64_t steps;			/* in the epoch */
	uint64_t records_owned;		/* its range of the epoch's records */
	uint64_t records_delivered;	/* steps x host batch */
	uint64_t records_dropped;	/* owned, past its last step */
	uint64_t records_wrapped;	/* repeated to fill its last step */
	uint64_t units, files, bytes;	/* frames and stream files its plan reads,
					   the shards they are in, their bytes */
	/* Opening the dataset as it was opened (the manifest, or every shard
	 * and this host's share of stream counting). */
	uint64_t open_files, open_reads, open_bytes;
	/* Without the manifest (measured, or the dataset has none): every
	 * shard's tail, and this host's share of counting stream files when
	 * the pod splits it (each stream file read whole, in reads of
	 * PF_READ_DEFAULT bytes). */
	uint64_t bare_files, bare_reads, bare_bytes;
	uint64_t bare_count_files, bare_count_bytes;	/* of them, counting */
	/* What its first batch needs. */
	uint64_t first_files, first_units, first_reads, first_bytes;
} pf_podsim_host;

typedef struct pf_podsim_summary {
	uint32_t num_hosts, cores_per_host, per_core_batch;
	uint64_t global_batch;
	uint32_t block;			/* records per shuffle block */
	bool manifest;			/* planned from a manifest */
	uint64_t manifest_bytes;
	uint64_t shards, indexed, streams;
	uint64_t units, records, bytes;	/* frames and stream files, records,
					   the shards' bytes */
	uint64_t steps;			/* per epoch, on every host (when equal) */
	uint64_t remainder_dropped, remainder_wrapped;
	/* The bucket at start, every host: opening (as opened, and without
	 * the manifest when measured) and before the first batches.
	 * Requests: files opened + reads. */
	uint64_t open_requests, open_bytes;
	bool bare_measured;
	uint64_t bare_requests, bare_bytes;
	uint64_t first_requests, first_bytes;
	/* Time: opening as one host did, without the manifest (when
	 * measured), planning every host, and the checks. */
	uint64_t open_ns, bare_open_ns, plan_ns, check_ns;
	/* The checks, over every record each host delivers. */
	bool steps_equal;		/* every host the same steps, each one full */
	bool disjoint;			/* no record delivered by two hosts */
	bool complete;			/* the union: the epoch minus the remainder */
	uint64_t delivered;		/* records delivered, all hosts */
	uint64_t distinct;		/* of them, distinct */
	const char *problem;		/* the first check that failed, said; NULL */
} pf_podsim_summary;

typedef struct pf_podsim pf_podsim;

/*! pf_podsim_run(): open the dataset and plan the epoch as each host of
 *  the pod.  A failed check is a finding, not an error: the summary says
 *  it.  @return 0 with *out (free with pf_podsim_free()), or -errno with
 *  err saying why (a bad config, the dataset's error, -ENOMEM). */
PF_API int pf_podsim_run(pf_podsim **out, const pf_podsim_config *cfg, pf_error *err);
PF_API void pf_podsim_free(pf_podsim *s);
/*! The pod's figures and the checks; valid while s lives. */
PF_API const pf_podsim_summary *pf_podsim_summary_get(const pf_podsim *s);
/*! Host h's figures (h < num_hosts; else NULL); valid while s lives. */
PF_API const pf_podsim_host *pf_podsim_host_get(const pf_podsim *s, uint32_t h);

/* ------------------------------------------------------------------ */
/* Reports (loader/report.c, loader/report_regions.c)                   */
/* ------------------------------------------------------------------ */
/*
 * What a run did, as loadbench prints it: lines for people and one JSON
 * object for programs, both made from the same figures by the same code,
 * so that loadbench, the host tools and the Python package say the same.
 * Make a report, add the sections that apply (each copies what it needs:
 * the inputs may go after the call), then format or print it:
 *
 *   pf_report_create(&r);
 *   pf_report_add_loader(r, &cfg, &metrics, &run, err);    the loader's figures
 *   pf_report_add_baseline(r, &passes, err);              raw passes beside it
 *   pf_report_add_regions(r, usage, run_index, err);      per region and mount
 *   pf_report_add_train(r, ...), pf_report_add_pod(...)   (host/pf_host.h)
 *   pf_report_print(r, PF_REPORT_TEXT, stdout);
 *
 * Sections come out in the order added, each kind at most once.  In JSON
 * the loader's members are the object's own (records, steps, seconds,
 * records_per_s, bottleneck, stages, next_latency_us, ..., topology) and
 * the others sit under their names ("baseline", "regions", "train",
 * "pod"); the keys are stable, since programs read them.  A number JSON
 * cannot hold (NaN, an infinity) is the string "NaN", "Infinity" or
 * "-Infinity"; a string that is not UTF-8 is read as Latin-1.  The JSON
 * is made by jansson (pf_common.h, "The allocator", says whose memory that
 * is).  A report is not thread-safe.
 */
typedef struct pf_report pf_report;

typedef enum pf_report_output {
	PF_REPORT_TEXT = 0,	/* lines of "label       figures" */
	PF_REPORT_JSON,		/* one object on one line */
	PF_REPORT_HTML,		/* one self-contained page: the JSON's
				   figures, with SVG charts (0.7) */
} pf_report_output;

/*! pf_state_describe(): a state blob for a person (PF_REPORT_TEXT: a
 *  line a field, "label  value") or a program (PF_REPORT_JSON: one
 *  object, ending in a newline, whose keys are the readable fields the
 *  Python package's state_dict() carries: kind, host_index, num_hosts,
 *  cores, per_core_batch, epoch, fresh, step_in_epoch, global_step,
 *  records_left, dataset_records, dataset_fingerprint (16 hex digits),
 *  seed, shuffle ("off", "window", "global"), remainder, skipped_steps,
 *  pack_length (0 unpacked) and, packed, pack_mode, pack_pool,
 *  pack_features; a mixture's "sources", one object each: name (when the
 *  state keeps it), rows_taken of the batch it is inside, and its
 *  loader's epoch, step_in_epoch, global_step, records_left,
 *  dataset_records, dataset_fingerprint), into dst as snprintf() does.
 *  The blob is checked as pf_state_inspect() checks it.  @return the
 *  whole length (cap 0 asks it), or -EBADMSG, -EPROTONOSUPPORT (err
 *  naming the byte), -EINVAL (fmt), -ENOMEM.  Thread-safe. */
PF_API int64_t pf_state_describe(const void *blob, size_t len, pf_report_output fmt,
				 char *dst, size_t cap, pf_error *err);

/* The defaults pf_loader_config's zeroes stand for, as reports state them. */
#define PF_LOADER_BUDGET_DEFAULT (512ull << 20)	/* memory_budget */
#define PF_LOADER_IO_DEPTH_DEFAULT 32u	/* io_depth: PF_AUTO's most */
#define PF_LOADER_WINDOW_DEFAULT 8192u			/* shuffle_window */

/*! pf_report_create(): an empty report.  @return 0 with *out (free with
 *  pf_report_free()), or -ENOMEM. */
PF_API int pf_report_create(pf_report **out);
/*! NULL is a no-op. */
PF_API void pf_report_free(pf_report *r);
/*! pf_report_format(): the report as text, JSON or HTML into dst (as
 *  snprintf: at most cap - 1 bytes and a NUL when cap > 0), ending in a
 *  newline.  HTML is one page that needs nothing else (no script, font or
 *  image from anywhere; inline SVG charts of the series section, the
 *  first batch's split and the pod's hosts; a one-line reading under
 *  each; a table of every figure of the JSON).  @return its whole length
 *  (call with cap 0 to size a buffer); HTML: -ENOMEM when out of memory;
 *  -EINVAL for an unknown fmt. */
PF_API int64_t pf_report_format(const pf_report *r, pf_report_output fmt, char *dst,
				size_t cap);
/*! pf_report_print(): the same, written to f.  @return 0, -ENOMEM,
 *  -EINVAL (fmt) or -EIO (f refused it). */
PF_API int pf_report_print(const pf_report *r, pf_report_output fmt, FILE *f);

/* What the caller knows of one loader run that the loader does not: when
 * its consumer started and stopped, and which files the dataset is. */
typedef struct pf_run_info {
	double seconds;		/* pf_loader_create() to the last batch (> 0) */
	double first_batch_ms;	/* pf_loader_create() to the first batch */
	double steady_seconds;	/* the first batch's return to the last one's */
	uint64_t steady_records; /* records of the batches after the first */
	uint64_t steady_batches; /* batches after the first */
	uint64_t peak_rss_bytes; /* the process's peak; 0: not known */
	unsigned runs;		/* the figures are medians of this many runs
				   (0: one run) */
	const char *const *files; /* the dataset's files (pf_paths_expand()):
				   counted, and those of 0 bytes named; NULL:
				   neither */
	size_t nfiles;
	const pf_tuning *tuning; /* pf_loader_tuning() at the run's end: a line
				   each for threads, io_depth and prefetch,
				   and the shuffle window and the frame cache
				   where it says why (the value, auto or set,
				   why) and "tuning" in JSON; NULL: neither,
				   and the depth is the config's */
} pf_run_info;

/* What the loader's figures say about where the time went. */
typedef struct pf_loader_verdict {
	double io_busy;		/* the I/O thread's busy share of the run */
	double decode_busy;	/* a decode thread's, on average */
	double consumer_wait;	/* the consumer's time blocked in next() */
	const char *bottleneck;	/* "io" or "decode": the busier stage;
				   "image decode" when decode is and images
				   took most of its time */
	double next_p50_us, next_p90_us, next_p99_us;	/* next()'s latency */
	/* Records after the first batch over the time from its return to
	 * the last one's; with fewer than 10 batches after the first or under
	 * 100 ms there is none (0) and steady_na says why. */
	double steady_records_per_s;
	const char *steady_na;
} pf_loader_verdict;

/*! pf_loader_verdict_compute(): the verdict of a run of m (its
 *  pf_loader_get_metrics()) timed as run says.  Pure; thread-safe. */
PF_API void pf_loader_verdict_compute(const pf_loader_metrics *m, const pf_run_info *run,
				      pf_loader_verdict *out);

/*! pf_report_add_loader(): the loader's section: files, features,
 *  topology, order, records, time and rates, the steady rate, bytes
 *  read, each stage's busy share and the bottleneck, next() latency,
 *  memory against the budget, the remainder, empty files, corrupt data
 *  and the I/O engine.  cfg is the loader's configuration (its host
 *  index and count as resolved), m its metrics.  @return 0, -EINVAL (run
 *  has no time), -EEXIST (a loader section is there), -ENOMEM. */
PF_API int pf_report_add_loader(pf_report *r, const pf_loader_config *cfg,
				const pf_loader_metrics *m, const pf_run_info *run,
				pf_error *err);

/*! pf_report_add_sources(): a mixture's sources (pf_loader_source_metrics()
 *  of each, n of them): per source its share as configured and realised,
 *  records, epochs started and MB/s read; in JSON the array "sources".
 *  @return 0, -EINVAL (none), -EEXIST, -ENOMEM. */
PF_API int pf_report_add_sources(pf_report *r, const pf_source_metrics *s, size_t n,
				 pf_error *err);

/* Raw passes over the same indexed shards (what loadbench --baseline
 * times): reading whole frames, pread + frame CRC + zstd, and decoding
 * frames already decompressed in memory (TFRecord framing, the spec's
 * decode into batch rows). */
typedef struct pf_baseline {
	double read_seconds, decompress_seconds;	/* > 0 */
	uint64_t bytes;			/* compressed bytes read */
	uint64_t bytes_decompressed;	/* what they decompress to */
	uint64_t files, frames;
	unsigned threads;
	const char *io_backend;		/* of the read pass; NULL: "none" */
	/* The decode pass (0 seconds: not run): its wall time over
	 * decode_bytes of decompressed frames (all of bytes_decompressed, or
	 * what fitted in memory) holding decode_records records. */
	double decode_seconds;
	uint64_t decode_records, decode_bytes;
} pf_baseline;

/*! pf_report_add_baseline(): the passes' rates and the loader as a ratio
 *  to each (its decompressed MB/s over the pass's), after the loader's
 *  section.  With a decode pass, also the bound the decompress and decode
 *  passes allow a loader that does both on the same threads: 1 /
 *  (1/decompress + 1/decode), the rates in decompressed bytes a second
 *  (per thread, times the threads: the same), and the loader's ratio to
 *  it.  @return 0, -EINVAL (no loader section, a pass without time, a
 *  decode pass of no bytes), -EEXIST, -ENOMEM. */
PF_API int pf_report_add_baseline(pf_report *r, const pf_baseline *b, pf_error *err);

/* Storage regions: which regions the dataset lives in, and what a run
 * read from each (io/pf_io.h has the region table). */
typedef struct pf_region_usage pf_region_usage;

typedef enum pf_cross_region {
	PF_CROSS_REGION_WARN = 0,	/* say so before reading (the default) */
	PF_CROSS_REGION_REFUSE,		/* refuse to read */
	PF_CROSS_REGION_ALLOW,		/* say nothing */
} pf_cross_region;

#define PF_EGRESS_USD_PER_GIB_DEFAULT 0.02

typedef struct pf_region_usage_config {
	pf_cross_region policy;
	double usd_per_gib;		/* the egress estimate's price (>= 0) */
	const char *host_source;	/* where the host's region came from
					   ("--region", "PODFEED_REGION"; see
					   pf_region_host()), or NULL */
} pf_region_usage_config;

/*! pf_region_usage_create(): give each of the dataset's files its mount
 *  and region in t and count their bytes per region and per mount.  t
 *  must outlive the usage; its counters are what runs read.  @return 0
 *  with *out (free with pf_region_usage_free()), -EINVAL (a bad price),
 *  -ENOMEM. */
PF_API int pf_region_usage_create(pf_region_usage **out, pf_region_table *t,
				  const char *const *files, size_t nfiles,
				  const pf_region_usage_config *cfg, pf_error *err);
/*! pf_region_usage_create_sized(): pf_region_usage_create() with each
 *  file's size given (sizes[i], e.g. from the dataset's manifest), so no
 *  file is stat()ed: on a far bucket each stat is a round trip, 10,000
 *  shards 5 minutes at 30 ms.  sizes NULL: stat()ed (that function). */
PF_API int pf_region_usage_create_sized(pf_region_usage **out, pf_region_table *t,
					const char *const *files, const uint64_t *sizes,
					size_t nfiles, const pf_region_usage_config *cfg,
					pf_error *err);
PF_API void pf_region_usage_free(pf_region_usage *u);

/*! pf_region_usage_check(): what to say before anything is read, a line
 *  at a time through say(ctx, line): the host's region, and per region
 *  other than the host's its share of the dataset's bytes with a warning
 *  (cross-region, policy warn), a refusal (policy refuse) or a note
 *  (undeclared FUSE mounts, or the host's region not set).  Lines start
 *  "warning: ", "note: " or "refusing "; a tool prefixes its name.
 *  @return 1 when the policy refuses (nothing may be read), else 0. */
PF_API int pf_region_usage_check(const pf_region_usage *u,
				 void (*say)(void *ctx, const char *line), void *ctx);

/*! pf_region_usage_run_done(): after a run of seconds: keep the table's
 *  counters as the next run and zero them.  @return the run's number
 *  (from 0), or -ENOMEM. */
PF_API int pf_region_usage_run_done(pf_region_usage *u, double seconds);

/*! pf_report_add_regions(): run number run's section: per region and
 *  mount the files, share, MB read, MB/s over the time the region had
 *  reads in flight, read latency, that time over the run's, the
 *  cross-region rate against the in-region one, and the egress estimate.
 *  The text is left out when nothing says regions matter (no host
 *  region, no declared mount, no FUSE mount holding files); the JSON is
 *  always there.  @return 0, -EINVAL (no such run), -EEXIST, -ENOMEM. */
PF_API int pf_report_add_regions(pf_report *r, const pf_region_usage *u, size_t run,
				 pf_error *err);

/*! pf_report_add_series(): the "series" section of a loader's series
 *  (pf_loader_series()): per interval between its points the records/s,
 *  MB/s read and decompressed, each stage's busy share, each region's
 *  MB/s, and the resident memory, with the first batch's time, the
 *  memory budget and the pools; one line of text.  Fewer than 3 points
 *  (a run too short to plot) gives the totals and "too_short" saying
 *  so.  @return 0, -EEXIST, -ENOMEM. */
PF_API int pf_report_add_series(pf_report *r, const pf_series *s, pf_error *err);

/* ------------------------------------------------------------------ */
/* The spec from the data (loader/spec_infer.c)                         */
/* ------------------------------------------------------------------ */

typedef struct pf_spec_infer_config {
	bool ignore_manifest;	/* as pf_loader_config's */
	bool int64_as_int32;	/* int64 features as int32 (token ids and
				   labels, as a model takes them) */
} pf_spec_infer_config;

/*! pf_spec_infer(): a feature spec for the dataset paths name, from the
 *  schema in its manifest or else in the first file with bytes' index:
 *  int64 -> int64[max_len] (int32 with int64_as_int32), float ->
 *  float32[max_len], bytes -> bytes[the mean record size rounded up to
 *  64], default=0 where some records lack the feature; sequence lists,
 *  features of mixed kinds and names the spec cannot carry are left out.
 *  pf_spec_format() gives its text (what pf_loader_config.features
 *  takes).  cfg may be NULL.  @return 0 with *out, -ENODATA when there is
 *  no usable schema (err names the file), or -errno with err naming the
 *  file and what was wrong. */
PF_API int pf_spec_infer(const char *const *paths, size_t n, const pf_spec_infer_config *cfg,
			 pf_spec *out, pf_error *err);

#ifdef __cplusplus
}
#endif

#endif
