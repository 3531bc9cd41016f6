/* SPDX-License-Identifier: Apache-2.0 */
/* Private to loader/: the dataset, the per-epoch plan, checkpoints and the
 * pools. */
#ifndef PF_LOADER_INTERNAL_H
#define PF_LOADER_INTERNAL_H

#include "common_internal.h"	/* the allocator, and pf_rng: splitmix64
				   streams, the one source of randomness
				   for order */
#include "podfeed.h"

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

/*! Online CPUs (at least 1): the default count of worker threads. */
unsigned pf_cpus(void);

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

/* ------------------------------------------------------------------ */
/* Packed lengths (pack_gather.c): each record's value count of each
 * packed feature, as varints, a record's features one after another. */

typedef struct pf_lenbuf {
	uint8_t *p;
	size_t len, cap;
} pf_lenbuf;

/*! Append v as a varint.  @return 0 or -ENOMEM. */
int pf_lenbuf_put(pf_lenbuf *b, uint32_t v);
/* Scratch of one thread measuring records (pf_lengths_measure()). */
typedef struct pf_len_scratch {
	pf_arena arena;
	uint8_t *row;
} pf_len_scratch;
void pf_len_scratch_free(pf_len_scratch *s);
/*! Decode rec with lspec (packing's lengths spec: feature 2k the k-th
 *  packed feature, one value; 2k + 1 its full length) and append its
 *  lengths to out.  @return 0, or <0 with err (the spec's error: a
 *  record that is not an Example, a packed feature missing). */
int pf_lengths_measure(const pf_spec *lspec, const pf_record *rec, pf_len_scratch *s,
		       pf_lenbuf *out, pf_error *err);
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

/* A contiguous run of records of one unit. */
typedef struct pf_segment {
	uint64_t unit;
	uint64_t first, count;	/* records [first, first+count) of the unit */
} pf_segment;

/* What one host reads in one epoch, in order. */
typedef struct pf_epoch_plan {
	pf_segment *seg;
	size_t nseg, cap;
	uint64_t share;		/* records of this host's range */
	uint64_t stream_len;	/* records in seg (share, + wrapped) */
	uint64_t quota;		/* records delivered: steps * host batch */
} pf_epoch_plan;

typedef struct pf_topology {
	uint32_t host_index, num_hosts, cores, per_core_batch;
} pf_topology;

#define PF_WINDOW_DEFAULT 8192u

/*! The shuffle block of a host's stream (loader.c's header says how a
 *  stream is cut into blocks): the shuffle window (shuffle_window, 0:
 *  PF_WINDOW_DEFAULT; 1 without shuffle) rounded up to whole host
 *  batches, into *block, and whether each block is permuted (a window
 *  over 1).  @return 0, or -EINVAL with err when the block would pass
 *  2^30 records. */
int pf_plan_block(bool shuffle, uint32_t shuffle_window, uint32_t host_batch, uint32_t *block,
		  bool *permute, pf_error *err);
/*! Block k of origin host `host`'s stream of epoch `epoch`: the record at
 *  offset r of the block comes out at offset perm[r] (n records; a
 *  Fisher-Yates permutation seeded by (seed, epoch, host, k)). */
void pf_plan_block_perm(uint64_t seed, uint32_t epoch, uint32_t host, uint64_t k,
			uint32_t *perm, uint32_t n);

/*! The global shuffle's slice (pf_plan_epoch()) for shuffle blocks of
 *  `block` records and per-core batches of pcb: the most records that
 *  may come from one frame in a row while a per-core batch's draw from
 *  the block stays close to independent draws (design effect
 *  1 + (pcb - 1)(slice - 1) / (block - 1) at most 1.1; docs/design.md,
 *  "The global shuffle"), at least 1. */
uint32_t pf_plan_slice(uint32_t block, uint32_t pcb);
/* The global shuffle's frame groups hold at most this many shuffle
 * windows of records, and at least PF_GROUP_MIN frames (pf_plan_group()). */
#define PF_GROUP_WINDOWS 8
#define PF_GROUP_MIN 32
/*! The global shuffle's frames per group (pf_plan_epoch()) for a
 *  per-core batch of pcb, a shuffle block of `block` records and a
 *  dataset of `records` in `nunits` frames: 10 (pcb - 1), so that two
 *  records of a per-core batch share a frame with odds of at most 1/10
 *  per record beyond what the slices add, but no more frames than hold
 *  PF_GROUP_WINDOWS blocks of records (nor fewer than PF_GROUP_MIN),
 *  then evened out: the fewest groups of at most that many, equal to
 *  within a frame.  At least 1; docs/design.md, "The global shuffle". */
uint32_t pf_plan_group(uint32_t pcb, uint32_t block, uint64_t nunits, uint64_t records);

/* The bytes a drop skipped: from its first byte to where reading resumed
 * (both in the drop's offset kind). */
static inline uint64_t pf_drop_bytes(const pf_drop *d)
{
	return d->resume > d->start ? d->resume - d->start : 0;
}

/*! Steps per epoch for this topology. */
uint64_t pf_plan_steps(uint64_t records, const pf_topology *t, pf_remainder rem);
/*! A dataset that cannot fill one global batch would give no step at all:
 *  a mistake (the wrong directory, or a topology too large for a small
 *  test set) best said before anything runs.  Wrap fills a host's step
 *  from the start of its share, so it needs a record on every host.
 *  @return 0, or -EINVAL with err saying which. */
int pf_plan_check_records(uint64_t records, const pf_topology *t, pf_remainder rem,
			  pf_error *err);
/*! Build host t->host_index's plan for epoch e into *p (its arrays are
 *  reused between calls; free with pf_plan_release()).  slice 0: the
 *  units, permuted when shuffle; slice > 0 (the global shuffle, indexed
 *  units only): every unit cut into slices of that many records (its
 *  last one shorter), and the slices of the whole dataset permuted: with
 *  group 0 as one permutation (the order of states saved before frame
 *  groups); else in frame groups of at most `group` frames, one drawn
 *  from each of `group` strata of the units in dataset order, the groups
 *  in a random order and each group's slices permuted together, so that
 *  a frame's slices lie within its group's span (docs/design.md, "The
 *  global shuffle"). */
int pf_plan_epoch(pf_epoch_plan *p, const pf_dataset *ds, const pf_topology *t,
		  uint64_t seed, uint32_t epoch, bool shuffle, uint32_t slice,
		  uint32_t group, pf_remainder rem);
void pf_plan_release(pf_epoch_plan *p);

/* ------------------------------------------------------------------ */
/* Checkpoints (state.c)                                                */

/* Outputs [begin, end) of origin host `host`'s stream: what host `host`
 * of the epoch's origin topology delivers, in its order. */
typedef struct pf_piece {
	uint32_t host;
	uint64_t begin, end;
} pf_piece;

#define PF_STATE_VERSION 1u
#define PF_STATE_HEADER 16u		/* magic, version, length, CRC32C */
#define PF_STATE_MAX (16u << 20)	/* payload bytes */
#define PF_STATE_MAX_PIECES (1u << 20)

/* A decoded state (formats/proto/pf_state.proto says what each field is). */
typedef struct pf_state {
	uint64_t fingerprint, records, seed;
	bool shuffle;
	uint32_t remainder;
	pf_topology saver;
	uint32_t block;
	uint32_t epoch;
	bool fresh;
	uint64_t step_in_epoch, global_step;
	pf_topology origin;		/* host_index unused */
	uint32_t origin_block;
	bool origin_permute;
	pf_piece *pieces;
	size_t npieces;
	uint64_t epoch_dropped, epoch_wrapped;	/* origin != saver only */
	bool global;			/* the global shuffle */
	uint32_t origin_slice;		/* its slice in the origin streams */
	uint32_t origin_group;		/* its frames per group (0: one
					   permutation of the slices) */
	/* A packing loader's part (pack.c): the fields above are its inner
	 * loader's position, from which the packer below rebuilds the rows
	 * not yet delivered. */
	bool has_pack;
	struct pf_pack_state {
		uint32_t length, mode, pool, nf;
		pf_topology saver;
		uint64_t step, global_step, ahead, next_row;
		uint64_t epoch_steps, epoch_rows, step_base;
		uint32_t nopen;
		uint64_t id[PF_PACK_POOL_MAX];
		uint32_t fill[PF_PACK_POOL_MAX][PF_PACK_MAX_FEATURES];
		uint32_t segments[PF_PACK_POOL_MAX];
	} pack;
} pf_state;

/*! Encode s into buf (cap bytes).  @return the blob's length (nothing is
 *  written when it is over cap), or -ENOMEM. */
int64_t pf_state_encode(const pf_state *s, void *buf, size_t cap);
/*! Decode and check a blob: envelope, CRC, protobuf, and the fields'
 *  consistency (not against a dataset).  @return 0 with *s (free with
 *  pf_state_release()), or -EBADMSG / -EPROTONOSUPPORT / -ENOMEM with err
 *  naming the byte offset in the blob and what was wrong. */
int pf_state_decode(pf_state *s, const void *blob, size_t len, pf_error *err);
void pf_state_release(pf_state *s);
/*! Records in the pieces. */
uint64_t pf_state_remaining(const pf_state *s);

/* A mixture's checkpoint (state.c encodes it; mixture.c makes it). */
typedef struct pf_mix_source_state {
	const uint8_t *state;	/* the source's loader state */
	size_t state_len;
	uint32_t consumed;	/* rows of its next batch already taken */
	uint32_t bridge_batch;	/* after an elastic resume: the batch of the */
	uint32_t bridge_epoch;	/* loader reading the rest of this epoch (0: none) */
	uint32_t whole_batch;	/* the batch of its loader of whole epochs (0: a
				   state from before it was kept: pf_mix_batch()) */
	/* The states of the bridges of the epochs after bridge_epoch. */
	const uint8_t *const *pending;
	const size_t *pending_len;
	size_t npending;
} pf_mix_source_state;

typedef struct pf_mix_state {
	uint64_t digest, next_step;
	uint64_t end_plus_one;	/* the stop rule's end + 1; 0: from the rule */
	uint32_t host_index, num_hosts, cores, per_core_batch;
	pf_mix_source_state *sources;
	size_t nsources;
	uint8_t *mem;		/* decoded: what sources point into */
	const uint8_t **pend;	/* decoded: the sources' pending, end to end */
	size_t *pend_len;
} pf_mix_state;

int64_t pf_mix_state_encode(const pf_mix_state *s, void *buf, size_t cap);
/*! Decode a "PFMX" blob: the envelope as pf_state_decode()'s, then the
 *  payload.  @return 0 with *s (free with pf_mix_state_release()), or
 *  -EBADMSG / -EPROTONOSUPPORT / -ENOMEM with err. */
int pf_mix_state_decode(pf_mix_state *s, const void *blob, size_t len, pf_error *err);
void pf_mix_state_release(pf_mix_state *s);

/* pool.c: the loader's large pools, anonymous mappings (huge pages
 * asked for), kept when freed with keep in a small process-wide cache
 * for the next loader, else given back.  pf_pool_alloc(0) is NULL (it
 * takes a cached pool of the size when there is one); pf_pool_free()
 * takes the size the pool was asked with.  pf_pool_cached(): bytes the
 * cache holds. */
void *pf_pool_alloc(size_t size);
/*! The same for memory most of whose pages are never written (packing's
 *  inner rows: a record's values, not the row's padding): ordinary pages,
 *  so that a row's first value does not fault in a zeroed 2 MiB. */
void *pf_pool_alloc_sparse(size_t size);
void pf_pool_free(void *p, size_t size, bool keep);
/* Back to the system, never to the cache (memory the kernel may still
 * write into). */
void pf_pool_unmap(void *p, size_t size);
size_t pf_pool_cached(void);
void pf_pool_trim(void);

/* The loader's sized structs as of the first sized ABI (0.5; pf_common.h,
 * "the ABI promise"): the least a caller may pass, and what the entries
 * kept for programs built before 0.5 (abi_compat.c) pass for them.  Their
 * ends never move: new fields are appended (the assertion holds the
 * config's on LP64). */
#define PF_LOADER_CONFIG_SIZE_0_5 PF_SIZE_THROUGH(pf_loader_config, keep_pools)
#define PF_LOADER_METRICS_SIZE_0_5 PF_SIZE_THROUGH(pf_loader_metrics, io_requests)
#define PF_STATE_INFO_SIZE_0_5 PF_SIZE_THROUGH(pf_state_info, dataset_records)
_Static_assert(sizeof(void *) != 8 || (PF_LOADER_CONFIG_SIZE_0_5 == 209 &&
				       PF_LOADER_METRICS_SIZE_0_5 == 464 &&
				       PF_STATE_INFO_SIZE_0_5 == 56),
	       "a field of the loader's 0.5 structs moved: new fields go at their end");

#endif
