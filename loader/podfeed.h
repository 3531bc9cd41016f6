/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed: the embedding API (loader/). */
#ifndef PODFEED_H
#define PODFEED_H

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
 * found from the bytes, never the name.  Not thread-safe; one per thread.
 */
typedef struct pf_source pf_source;

typedef struct pf_source_config {
	uint64_t max_record_size;	/* 0: PF_MAX_RECORD_DEFAULT */
	size_t read_size;		/* bytes per read for streams; 0: 1 MiB */
	bool ignore_index;		/* read an indexed shard as a zstd stream */
} pf_source_config;

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

#ifdef __cplusplus
}
#endif

#endif
