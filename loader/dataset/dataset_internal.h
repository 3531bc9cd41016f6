/* SPDX-License-Identifier: Apache-2.0 */
/* Private to loader/: the dataset room (loader/dataset/): names to a
 * dataset.  Paths, directories, globs and manifests to a sorted list of
 * files (paths.c); pf_source, every record of one file (source.c); the
 * dataset opened from its manifest with one read (manifest_open.c) or
 * from its files' index tails read many at once (tails.c), its stream
 * files counted, split among the hosts of a pod (count.c), and its units
 * (dataset.c); a manifest written (manifest_write.c); a spec inferred
 * from its schema (spec_infer.c).  Below the plan: it knows files,
 * frames and records, never an order, a loader or a thread of the
 * pipeline's.  Uses the spec room (lengths measured while counting). */
#ifndef PF_DATASET_INTERNAL_H
#define PF_DATASET_INTERNAL_H

#include "common_internal.h"
#include "podfeed.h"
#include "spec_internal.h"

/* Mixed into pf_dataset.digest for each file: its size, and its record
 * count when it has an index (a stream file's comes from counting). */
static inline uint64_t pf_dataset_digest_file(uint64_t digest, uint64_t size, bool stream,
					      uint64_t records)
{
	digest = pf_mix64(digest ^ size);
	return pf_mix64(digest ^ (stream ? 0x73747265616dull /* "stream" */ : records));
}

/* A unit of reading: one frame of an indexed shard, or a whole stream
 * file (plain, gzip, zlib or zstd without an index). */
typedef struct pf_unit {
	uint32_t file;
	uint32_t frame;		/* frame index (indexed only) */
	bool stream;
	uint64_t records;
	uint64_t offset;	/* indexed: the frame's file offset */
	uint32_t csize, usize;	/* indexed: compressed / uncompressed bytes */
	uint32_t crc32c;	/* indexed: of the compressed bytes */
	uint64_t first_record;	/* indexed: its first record's number in the shard */
} pf_unit;

/* An indexed unit's frame, as its index (or the manifest) describes it. */
static inline pf_frame_info pf_unit_frame(const pf_unit *u)
{
	pf_frame_info fi = { .offset = u->offset, .compressed_size = u->csize,
			     .uncompressed_size = u->usize, .records = (uint32_t)u->records,
			     .first_record = u->first_record, .crc32c = u->crc32c };
	return fi;
}

/* One phase of opening a dataset: its time, the files it opened, and
 * the reads it made and their bytes (counted in the source config's
 * regions; 0 without them). */
typedef struct pf_open_phase {
	uint64_t ns;
	uint64_t files;
	uint64_t reads, bytes;
} pf_open_phase;

/* What opening the dataset cost this host, by phase. */
typedef struct pf_open_stats {
	pf_open_phase manifest;	/* reading and parsing the manifest */
	pf_open_phase index;	/* every shard's index tail (no manifest) */
	pf_open_phase count;	/* the stream files this host counted */
	pf_open_phase exchange;	/* the pod's collectives (waiting included) */
	uint64_t count_decompressed;	/* TFRecord bytes counting produced */
	uint64_t streams;		/* stream files to count, on all hosts */
	bool count_split;		/* the pod split the counting */
	uint64_t remote_drops;		/* drops other hosts found counting */
	uint64_t remote_dropped;	/* the records they held, where known */
	uint64_t remote_unknown;	/* the drops of records not known */
	uint64_t remote_skipped;	/* the bytes the drops skipped */
} pf_open_stats;

typedef struct pf_dataset {
	char **paths;
	size_t nfiles;
	pf_shard_index **index;	/* per file; NULL for stream files, and for
				   every file of a dataset opened from its
				   manifest (the units hold the frames) */
	uint64_t *file_size;
	uint32_t *alignment;	/* per file: its frames' alignment, or 0 */
	int64_t *mtime_ns;	/* per file, from the manifest; NULL without one */
	/* Per file, from a manifest that has them: the CRC32C of its last
	 * tail_len bytes, checked when the file is opened to be read (its
	 * mtime is not then); NULL without (no manifest, or an older one). */
	uint32_t *tail_len, *tail_crc;
	pf_manifest *manifest;	/* the manifest it was opened from, or NULL */
	char *manifest_path;
	pf_unit *units;
	uint64_t nunits;
	uint64_t records;
	uint32_t max_csize, max_usize;	/* over indexed frames */
	uint64_t max_unit_records;	/* over indexed frames */
	bool any_stream;
	uint64_t max_stream_record;	/* largest record of a stream file */
	uint64_t fingerprint;		/* of paths, sizes and record counts */
	uint64_t digest;		/* of sizes and indexed record counts: what
					   every host of a pod must agree on before
					   counting stream files */
	pf_open_stats open;
	/* Per file (NULL unless the open config asked for lengths): the
	 * packed lengths of the records of the stream files this host
	 * counted (pf_lengths_measure()); empty for the others. */
	struct pf_lenbuf *lengths;
} pf_dataset;

/* How a dataset is opened beyond its files (pf_dataset_open()). */
typedef struct pf_open_config {
	unsigned threads;		/* stream files counted at once; 0: 1 */
	uint32_t host_index, num_hosts;	/* this host of the pod (0 hosts: 1) */
	/* The pod's all-gather (podfeed.h, pf_loader_config.allgather);
	 * NULL, or one host: this host counts every stream file. */
	pf_allgather_fn allgather;
	void *allgather_ctx;
	/* Drops found counting stream files (skip mode), from the counting
	 * threads at once; NULL: the source config's on_drop. */
	pf_drop_fn count_drop;
	void *count_drop_ctx;
	/* The engine the index tails are read on (tails.c): its back-end
	 * and read policy (faults, retries, timeout) and queue_depth, the
	 * files read at once (0: 64); NULL: the environment's. */
	const pf_io_config *io;
	/* Packing (pack_gather.c): counting a stream file also measures
	 * each record's packed lengths with this spec (pf_lengths_measure()),
	 * kept in ds->lengths, so that the file is read once.  NULL: not. */
	const pf_spec *lengths;
} pf_open_config;

/*! Open a dataset: from its manifest when the paths name one
 *  (pf_manifest_locate()), else as pf_dataset_open_shards().  ocfg (may
 *  be NULL: one host, one thread) says how stream files are counted;
 *  with a collective and more than one host the call is collective:
 *  every host must make it, and on every host it fails (each host naming
 *  the first that failed) or plans the same dataset. */
int pf_dataset_open(pf_dataset **out, const char *const *paths, size_t n,
		    const pf_source_config *scfg, const pf_open_config *ocfg, pf_error *err);
/*! Open every file: indexed shards from their tails, read many at once
 *  (pf_dataset_read_tails()); stream files are read once to count records (count.c: on ocfg's threads, split among
 *  the hosts of a pod with a collective).  scfg gives the record size
 *  limit, the regions reads are counted in (may be NULL) and the
 *  corrupt-data policy: in skip mode a stream file's records are its
 *  intact ones and a damaged index makes its shard a stream, each drop
 *  told to scfg->on_drop (counting's to ocfg's count_drop). */
int pf_dataset_open_shards(pf_dataset **out, const char *const *paths, size_t n,
			   const pf_source_config *scfg, const pf_open_config *ocfg,
			   pf_error *err);
/*! A host that fails before it can open the dataset still takes its
 *  part in the pod's collective (with ocfg's allgather and more than one
 *  host), so that the others fail naming it instead of waiting for it;
 *  why is err (code < 0).  Otherwise nothing. */
void pf_dataset_open_abandon(const pf_open_config *ocfg, const pf_error *why);
/*! tails.c: read the index tail of every file of ds (its paths, and
 *  index and file_size zeroed, allocated), up to icfg->queue_depth files
 *  at once (0: 64) on an engine of their own, opens and reads
 *  overlapping: ds->file_size[i], and ds->index[i] or NULL for a file
 *  without an index.  A damaged index in skip mode leaves the file
 *  without one (it is read as the zstd stream it also is) and is told to
 *  scfg->on_drop, after the reads and in file order.  The first file in
 *  file order that fails fails the call, err naming it (and the byte
 *  offset), as if the files had been read one after another.  @return 0
 *  or -errno. */
int pf_dataset_read_tails(pf_dataset *ds, const pf_source_config *scfg,
			  const pf_io_config *icfg, pf_error *err);
/*! tails.c: once per process, one line on stderr when a dataset opened
 *  without a manifest (pf_dataset_open() found none) is large or took
 *  ns to plan: `shardtool manifest DIR` writes one that plans it with
 *  one read. */
void pf_dataset_manifest_hint(const pf_dataset *ds, uint64_t ns);
void pf_dataset_free(pf_dataset *ds);
/* Append file i's units (its frames, or for a stream file one unit of
 * stream_records records) to ds->units (room made by the caller) and
 * account them. */
void pf_dataset_add_units(pf_dataset *ds, size_t i, bool stream, const pf_frame_info *frames,
			  uint32_t nframes, uint64_t stream_records);

/* source.c: read the tail of an open file of size bytes (counted to mount
 * in regions, which may be NULL) and parse its index; *tail (capacity
 * *tail_cap, the caller's to pf_free()) is grown as needed and reused
 * across calls.  @return 0 with *ix, -ENODATA for a file without an
 * index, or another -errno with err. */
int pf_shard_tail_read(int fd, const char *path, uint64_t size, pf_region_table *regions,
		       size_t mount, uint8_t **tail, size_t *tail_cap, pf_shard_index **ix,
		       pf_error *err);

/* Push mode (the loader's stream files, read by its I/O thread): a stream
 * file the source neither opens nor reads (its size is file_size); the
 * caller pushes its pieces in file order, cut as pull mode's are
 * (podfeed.h).  pf_source_next() returns PF_SOURCE_HUNGRY when it is done
 * with the piece pushed last (the caller may reuse that memory) and needs
 * the next: push it with pf_source_push() (len 0: the file has ended) and
 * call again.  A piece stays the source's until then. */
#define PF_SOURCE_HUNGRY 2
int pf_source_open_push(pf_source **out, const char *path, const pf_source_config *cfg,
			uint64_t file_size, pf_error *err);
void pf_source_push(pf_source *s, const uint8_t *piece, size_t len);

/*! count.c: read the files files[0..n) of ds whole (as streams, their
 *  index ignored) on up to threads threads: each one's records into
 *  records[k] and their lengths measured with lspec into lens[k];
 *  *decompressed: the TFRecord bytes read.  Fail mode (a damaged record
 *  fails).  @return 0, or the lowest failed file's error (naming it). */
int pf_count_measure(const pf_dataset *ds, const uint32_t *files, size_t n, const pf_spec *lspec,
		     unsigned threads, uint64_t max_record_size, uint64_t *records, pf_lenbuf *lens,
		     uint64_t *decompressed, pf_error *err);

/* count.c: the pod's collectives of the open, for other collectives of
 * a create (pack_gather.c). */
#define PF_POD_ERROR_LINE 1024u
/*! An error as the line a failed host sends the others. */
void pf_pod_error_line(const pf_error *e, char *dst);
/*! ocfg's all-gather of len bytes (its time counted in ds's exchange
 *  phase when ds is not NULL); err says what failed, naming what.
 *  @return 0 or <0. */
int pf_pod_exchange(pf_dataset *ds, const pf_open_config *ocfg, const void *mine, size_t len,
		    void *all, const char *what, pf_error *err);

/* count.c: stream files counted, and the pod's agreement on the dataset. */
/*! Whether the pod takes part in opening (a collective, more than one
 *  host). */
static inline bool pf_open_collective(const pf_open_config *ocfg)
{
	return ocfg && ocfg->allgather && ocfg->num_hosts > 1;
}
/*! The host that counts the stream file of ordinal j (among the
 *  dataset's stream files, in file order) in a pod of hosts. */
static inline uint32_t pf_count_owner(uint64_t j, uint32_t hosts)
{
	return hosts > 1 ? (uint32_t)(j % hosts) : 0;
}
/*! The pod's vote after each host opened (or failed to open, status <0
 *  with why) its dataset: every host learns whether all succeeded and
 *  planned the same files (ds->digest, the manifest or not).  @return 0,
 *  or <0 with err naming the host that failed (this one: why as is) or
 *  how the hosts disagree. */
int pf_dataset_vote(const pf_dataset *ds, int status, const pf_error *why,
		    const pf_open_config *ocfg, pf_error *err);
/*! Count the stream files of ds (the files without an index) into
 *  records[i] (i: the file), and ds->max_stream_record: this host's
 *  share on ocfg's threads, the rest from the other hosts through the
 *  collective (after pf_dataset_vote()).  @return 0, or <0 with err
 *  naming the file (and the host that counted it). */
int pf_dataset_count_streams(pf_dataset *ds, uint64_t *records, const pf_source_config *scfg,
			     const pf_open_config *ocfg, pf_error *err);

/* manifest_open.c: a dataset from its manifest. */
/*! Fill an empty ds from the manifest at path, read with one request
 *  (counted to its mount in scfg->regions).  @return 0, or -errno with
 *  err naming the manifest, the byte offset and what was wrong. */
int pf_dataset_open_manifest(pf_dataset *ds, const char *path,
			     const pf_source_config *scfg, pf_error *err);
/*! Whether the file of dataset file i, opened and stat()ed to size and
 *  mtime_ns, is still what the dataset was planned from.  @return 0, or
 *  -ESTALE with err naming the shard, the manifest and what changed. */
int pf_dataset_check_file(const pf_dataset *ds, size_t i, uint64_t size, int64_t mtime_ns,
			  pf_error *err);
/*! Whether the last len bytes of dataset file i (in tail) are those its
 *  manifest holds the CRC32C of (ds->tail_len[i] bytes).  @return 0, or
 *  -ESTALE with err naming the shard, the manifest and both CRCs. */
int pf_dataset_check_tail(const pf_dataset *ds, size_t i, const void *tail, size_t len,
			  pf_error *err);

/* The bytes a drop skipped: from its first byte to where reading resumed
 * (both in the drop's offset kind). */
static inline uint64_t pf_drop_bytes(const pf_drop *d)
{
	return d->resume > d->start ? d->resume - d->start : 0;
}

/* dataset.c: each file's first record number in dataset order (units
 * are in file order) into base, and its records added to records (when
 * not NULL). */
void pf_dataset_file_layout(const pf_dataset *ds, uint64_t *base, uint64_t *records);

#endif
