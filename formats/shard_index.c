/* SPDX-License-Identifier: Apache-2.0 */
/* Reads and validates an indexed shard's index; decodes single frames. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pb_internal.h"
#include "zstd_internal.h"

/*
 * The tail of an indexed shard (see shard_writer.c for the whole layout):
 *
 *   ... data frames ... | index frame | seek table frame |
 *
 *   index frame:  u32 PF_SKIP_INDEX, u32 size (= L + 12),
 *                 ShardIndex protobuf (L bytes), u32 CRC32C of those L
 *                 bytes, u32 L, u32 "PFIC" (version 2 on); version 1
 *                 (still read): size L + 8, no CRC, u32 L, u32 "PFIX"
 *   seek table:   u32 PF_SKIP_SEEKTABLE, u32 size (= n * entry + 9),
 *                 n entries {u32 compressed, u32 decompressed[, u32 xxh]},
 *                 u32 n, u8 descriptor, u32 PF_SEEKABLE_MAGIC
 *
 * Everything is read backwards from the file's last byte, and every size
 * is checked against the file size and the limits before it is used, so a
 * corrupt or hostile tail costs at most PF_SHARD_MAX_INDEX bytes.
 */

#define PF_SKIP_HEADER 8u
#define PF_INDEX_TRAILER 8u		/* version 1: u32 L, "PFIX" */
#define PF_INDEX_TRAILER_CRC 12u	/* version 2: u32 CRC32C, u32 L, "PFIC" */
#define PF_SEEK_CHECKSUM_FLAG 0x80u
#define PF_SEEK_RESERVED_BITS 0x7cu

struct pf_shard_index {
	pf_frame_info *frames;
	uint32_t n_frames;
	uint64_t records;
	uint64_t uncompressed;
	uint32_t alignment;
	uint64_t data_end;
	pf_feature_schema *schema;	/* names owned (pf_malloc'd) */
	size_t n_schema;
	uint64_t schema_records;
	pf_shard_lengths *lengths;	/* the records' counts (lengths.c) */
	size_t n_lengths;
};

struct pf_frame_decoder {
	ZSTD_DCtx *dctx;
};

void pf_shard_index_free(pf_shard_index *ix)
{
	if (!ix)
		return;
	for (size_t i = 0; i < ix->n_schema; i++)
		pf_free((char *)ix->schema[i].name);
	pf_free(ix->schema);
	pf_free(ix->frames);
	pf_lengths_free(ix->lengths, ix->n_lengths);
	pf_free(ix);
}

uint32_t pf_shard_index_frames(const pf_shard_index *ix)
{
	return ix->n_frames;
}

const pf_frame_info *pf_shard_index_frame(const pf_shard_index *ix, uint32_t i)
{
	return i < ix->n_frames ? &ix->frames[i] : NULL;
}

uint64_t pf_shard_index_records(const pf_shard_index *ix)
{
	return ix->records;
}

uint64_t pf_shard_index_uncompressed_bytes(const pf_shard_index *ix)
{
	return ix->uncompressed;
}

uint32_t pf_shard_index_alignment(const pf_shard_index *ix)
{
	return ix->alignment;
}

uint64_t pf_shard_index_data_end(const pf_shard_index *ix)
{
	return ix->data_end;
}

uint64_t pf_shard_index_schema_records(const pf_shard_index *ix)
{
	return ix->schema_records;
}

size_t pf_shard_index_schema_count(const pf_shard_index *ix)
{
	return ix->n_schema;
}

const pf_feature_schema *pf_shard_index_schema(const pf_shard_index *ix,
					       size_t i)
{
	return i < ix->n_schema ? &ix->schema[i] : NULL;
}

int pf_shard_index_lengths(const pf_shard_index *ix, const char *name, uint32_t *out)
{
	for (size_t i = 0; i < ix->n_lengths; i++)
		if (!strcmp(ix->lengths[i].name, name))
			return pf_lengths_decode(&ix->lengths[i], ix->records, out);
	/* No column: a feature of one count in every record has none. */
	for (size_t i = 0; i < ix->n_schema; i++) {
		const pf_feature_schema *f = &ix->schema[i];

		if (f->is_list || strcmp(f->name, name) || ix->schema_records != ix->records ||
		    f->records_present != ix->records || f->min_len != f->max_len ||
		    f->min_len > UINT32_MAX)
			continue;
		for (uint64_t r = 0; r < ix->records; r++)
			out[r] = (uint32_t)f->min_len;
		return 0;
	}
	return -ENOENT;
}

int64_t pf_shard_index_find_record(const pf_shard_index *ix, uint64_t rec)
{
	uint32_t lo = 0, hi = ix->n_frames;

	if (rec >= ix->records)
		return -1;
	/* Last frame whose first_record <= rec; frames hold >= 1 record, so
	 * first_record is strictly increasing (checked at parse time). */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (ix->frames[mid].first_record <= rec)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* The seek table frame: its location and what it says. */
struct seek_table {
	uint64_t start;			/* file offset of its skippable header */
	uint32_t n;
	uint32_t entry;			/* 8 or 12 bytes */
	const uint8_t *entries;		/* into the tail */
};

/* Bytes of the tail from file offset off on: the caller made sure they
 * are in it. */
static const uint8_t *at(const uint8_t *tail, size_t tail_len,
			 uint64_t file_size, uint64_t off)
{
	return tail + (off - (file_size - tail_len));
}

static int64_t check_frames(pf_shard_index *ix, const Podfeed__ShardIndex *pb,
			    const struct seek_table *st, const uint8_t *tail,
			    size_t tail_len, uint64_t file_size,
			    uint64_t ix_start, pf_error *err)
{
	uint64_t next_record = 0, total_uncompressed = 0, seek_sum = 0;
	uint32_t n = st->n;

#define FRAME_FAIL(i, off, ...)                                              \
	do {                                                                 \
		int64_t r_ = pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, (off), \
					  __VA_ARGS__);                      \
		if (err)                                                     \
			err->frame = (int64_t)(i);                           \
		return r_;                                                   \
	} while (0)

	for (uint32_t i = 0; i < n; i++) {
		pf_frame_info *fi = &ix->frames[i];
		uint64_t end = i + 1 < n ? pb->frame_offset[i + 1] : ix->data_end;

		fi->offset = pb->frame_offset[i];
		fi->compressed_size = pb->frame_compressed_size[i];
		fi->uncompressed_size = pb->frame_uncompressed_size[i];
		fi->records = pb->frame_records[i];
		fi->first_record = pb->frame_first_record[i];
		fi->crc32c = pb->frame_crc32c[i];

		if (fi->offset >= ix->data_end)
			FRAME_FAIL(i, ix_start, "index: frame %u offset %llu is past the end of data (%llu)",
				   i, (unsigned long long)fi->offset,
				   (unsigned long long)ix->data_end);
		if (i + 1 < n && end <= fi->offset)
			FRAME_FAIL(i, fi->offset, "index: frame offsets not increasing (frame %u at %llu, next at %llu)",
				   i, (unsigned long long)fi->offset,
				   (unsigned long long)end);
	}
	/* Offsets are now increasing and inside the data: sizes next. */
	for (uint32_t i = 0; i < n; i++) {
		pf_frame_info *fi = &ix->frames[i];
		uint64_t end = i + 1 < n ? ix->frames[i + 1].offset : ix->data_end;

		if (i == 0 && fi->offset != 0)
			FRAME_FAIL(i, fi->offset, "index: first frame does not start at offset 0");
		if (pf_frame_check(fi, i, ix->alignment, "index: ", fi->offset, err) < 0) {
			if (err)
				err->frame = (int64_t)i;
			return -EBADMSG;
		}
		if (fi->compressed_size > end - fi->offset)
			FRAME_FAIL(i, fi->offset, i + 1 < n ?
				   "index: frame %u overlaps the next frame (%u bytes, %llu available)" :
				   "index: frame %u runs past the end of data (%u bytes, %llu available)",
				   i, fi->compressed_size,
				   (unsigned long long)(end - fi->offset));
		if (fi->first_record != next_record)
			FRAME_FAIL(i, fi->offset, "index: frame %u first record %llu, expected %llu (running sum of record counts)",
				   i, (unsigned long long)fi->first_record,
				   (unsigned long long)next_record);
		next_record += fi->records;
		total_uncompressed += fi->uncompressed_size;
	}
	/* The seek table must describe the same frames: its sizes (frame
	 * plus the padding after it) sum to each frame's offset. */
	for (uint32_t i = 0; i < n; i++) {
		const pf_frame_info *fi = &ix->frames[i];
		uint64_t end = i + 1 < n ? ix->frames[i + 1].offset : ix->data_end;
		const uint8_t *e = at(tail, tail_len, file_size,
				      st->start + PF_SKIP_HEADER +
				      (uint64_t)i * st->entry);
		uint32_t seek_csize = pf_load_le32(e);
		uint32_t seek_usize = pf_load_le32(e + 4);

		if (seek_sum != fi->offset)
			FRAME_FAIL(i, fi->offset, "seek table disagrees with the index: frame %u at %llu by the seek table, %llu by the index",
				   i, (unsigned long long)seek_sum,
				   (unsigned long long)fi->offset);
		if (seek_csize != end - fi->offset || seek_usize != fi->uncompressed_size)
			FRAME_FAIL(i, fi->offset, "seek table disagrees with the index: frame %u sizes %u/%u, index %llu/%u",
				   i, seek_csize, seek_usize,
				   (unsigned long long)(end - fi->offset),
				   fi->uncompressed_size);
		seek_sum += seek_csize;
	}
#undef FRAME_FAIL
	if (next_record != ix->records)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, ix_start,
				    "index: frame record counts sum to %llu, total says %llu",
				    (unsigned long long)next_record,
				    (unsigned long long)ix->records);
	if (total_uncompressed != ix->uncompressed)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, ix_start,
				    "index: frame sizes sum to %llu uncompressed bytes, total says %llu",
				    (unsigned long long)total_uncompressed,
				    (unsigned long long)ix->uncompressed);
	return 0;
}

static int64_t copy_schema(pf_shard_index *ix, const Podfeed__ShardIndex *pb,
			   uint64_t ix_start, pf_error *err)
{
	if (!pb->n_schema)
		return 0;
	ix->schema = pf_calloc(pb->n_schema, sizeof(*ix->schema));
	if (!ix->schema)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, ix_start,
				    "no memory for the index schema");
	for (size_t i = 0; i < pb->n_schema; i++) {
		const Podfeed__FeatureSchema *f = pb->schema[i];

		if (pf_schema_pb_fault(f))
			return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, ix_start,
					    "index: schema entry %zu does not hold together (kind %u, unset in %llu of %llu records)",
					    i, f->kind,
					    (unsigned long long)f->records_unset,
					    (unsigned long long)f->records_present);
		if (pf_schema_from_pb(&ix->schema[i], f) < 0)
			return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, ix_start,
					    "no memory for the index schema");
		ix->n_schema = i + 1;
	}
	return 0;
}

int64_t pf_shard_index_parse(pf_shard_index **out, const void *tail_buf,
			     size_t tail_len, uint64_t file_size, pf_error *err)
{
	/* protobuf-c returns NULL both for bad input and for a failed
	 * allocation: the flag tells them apart. */
	bool pb_failed = false;
	ProtobufCAllocator pb_allocator = {
		.alloc = pf_alloc_cb_flag, .free = pf_free_cb, .allocator_data = &pb_failed,
	};
	Podfeed__ShardIndex *pb = NULL;
	pf_shard_index *ix = NULL;
	const uint8_t *tail = tail_buf;
	const uint8_t *p;
	struct seek_table st;
	uint64_t st_len, ix_end, ix_len, ix_start, need;
	uint32_t pb_len, trailer;
	uint8_t desc;
	int64_t ret;

	pf_error_clear(err);
	*out = NULL;
	if (tail_len > file_size || (tail_len && !tail))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "tail of %zu bytes for a file of %llu",
				    tail_len, (unsigned long long)file_size);

	/* 1. The seekable footer, the file's last 9 bytes. */
	if (file_size < PF_SKIP_HEADER + PF_SEEKTABLE_FOOTER)
		return pf_error_set(err, -ENODATA, PF_OFFSET_FILE, 0,
				    "file of %llu bytes too short for a seek table",
				    (unsigned long long)file_size);
	if (tail_len < PF_SKIP_HEADER + PF_SEEKTABLE_FOOTER)
		return PF_SKIP_HEADER + PF_SEEKTABLE_FOOTER;
	p = tail + tail_len - PF_SEEKTABLE_FOOTER;
	if (pf_load_le32(p + 5) != PF_SEEKABLE_MAGIC)
		return pf_error_set(err, -ENODATA, PF_OFFSET_FILE,
				    file_size - 4, "no seekable footer magic");
	st.n = pf_load_le32(p);
	desc = p[4];
	/* Reserved bits are for breaking changes: not a seek table we know,
	 * so not our shard; the file can still be read as a stream. */
	if (desc & PF_SEEK_RESERVED_BITS)
		return pf_error_set(err, -ENODATA, PF_OFFSET_FILE,
				    file_size - 5,
				    "seek table descriptor 0x%02x has reserved bits set",
				    desc);
	st.entry = desc & PF_SEEK_CHECKSUM_FLAG ? 12 : 8;

	/* 2. The seek table frame: its size follows from the frame count. */
	st_len = PF_SKIP_HEADER + (uint64_t)st.n * st.entry + PF_SEEKTABLE_FOOTER;
	if (st_len > file_size)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE,
				    file_size - PF_SEEKTABLE_FOOTER,
				    "seek table of %u frames (%llu bytes) larger than the file",
				    st.n, (unsigned long long)st_len);
	if (st_len > PF_SHARD_MAX_INDEX)
		return pf_error_set(err, -EFBIG, PF_OFFSET_FILE,
				    file_size - PF_SEEKTABLE_FOOTER,
				    "seek table of %llu bytes above the limit of %u",
				    (unsigned long long)st_len, PF_SHARD_MAX_INDEX);
	st.start = file_size - st_len;
	/* Ask for the index trailer too, so that a short first read costs
	 * one more round trip, not two. */
	need = st_len + (st.start >= PF_INDEX_TRAILER_CRC ? PF_INDEX_TRAILER_CRC : 0);
	if (tail_len < need)
		return (int64_t)need;
	p = at(tail, tail_len, file_size, st.start);
	if (pf_load_le32(p) != PF_SKIP_SEEKTABLE ||
	    pf_load_le32(p + 4) != st_len - PF_SKIP_HEADER)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, st.start,
				    "seek table frame header (magic 0x%08x, size %u) does not match its frame count %u",
				    pf_load_le32(p), pf_load_le32(p + 4), st.n);
	st.entries = p + PF_SKIP_HEADER;

	/* 3. podfeed's index frame, right before the seek table. */
	ix_end = st.start;
	if (ix_end < PF_SKIP_HEADER + PF_INDEX_TRAILER)
		return pf_error_set(err, -ENODATA, PF_OFFSET_FILE, st.start,
				    "no podfeed index before the seek table");
	p = at(tail, tail_len, file_size, ix_end - PF_INDEX_TRAILER);
	if (pf_load_le32(p + 4) == PF_INDEX_TRAILER_MAGIC_CRC)
		trailer = PF_INDEX_TRAILER_CRC;
	else if (pf_load_le32(p + 4) == PF_INDEX_TRAILER_MAGIC)
		trailer = PF_INDEX_TRAILER;
	else
		return pf_error_set(err, -ENODATA, PF_OFFSET_FILE,
				    ix_end - 4,
				    "no podfeed index before the seek table");
	pb_len = pf_load_le32(p);
	ix_len = PF_SKIP_HEADER + (uint64_t)pb_len + trailer;
	if (ix_len > ix_end)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE,
				    ix_end - PF_INDEX_TRAILER,
				    "index length %u runs past the start of the file",
				    pb_len);
	if (ix_len > PF_SHARD_MAX_INDEX)
		return pf_error_set(err, -EFBIG, PF_OFFSET_FILE,
				    ix_end - PF_INDEX_TRAILER,
				    "index of %llu bytes above the limit of %u",
				    (unsigned long long)ix_len, PF_SHARD_MAX_INDEX);
	ix_start = ix_end - ix_len;
	if (tail_len < file_size - ix_start)
		return (int64_t)(file_size - ix_start);
	p = at(tail, tail_len, file_size, ix_start);
	if (pf_load_le32(p) != PF_SKIP_INDEX ||
	    pf_load_le32(p + 4) != (uint64_t)pb_len + trailer)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, ix_start,
				    "index frame header (magic 0x%08x, size %u) does not match its trailer (length %u)",
				    pf_load_le32(p), pf_load_le32(p + 4), pb_len);

	/* 4. Version 2 on: the index's CRC32C, before a byte of it is
	 * trusted (a flipped byte of a feature name would otherwise pass as
	 * another schema).  One reading (docs/formats.md, "The index
	 * frame"): it covers the protobuf's L bytes, no more, and is the u32
	 * right after them, where the frame's header, its trailer and the
	 * seek table after it (all checked above) agree the protobuf ends;
	 * it is never searched for.  The error names both places. */
	if (trailer == PF_INDEX_TRAILER_CRC) {
		uint64_t pb_at = ix_start + PF_SKIP_HEADER;
		uint32_t stored = pf_load_le32(p + PF_SKIP_HEADER + pb_len);
		uint32_t crc = pf_crc32c(0, p + PF_SKIP_HEADER, pb_len);

		if (crc != stored)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, pb_at,
					    "index CRC mismatch (0x%08x, stored 0x%08x at byte "
					    "%llu, over the %u bytes of the protobuf from byte "
					    "%llu): the shard's index is damaged", crc, stored,
					    (unsigned long long)(pb_at + pb_len), pb_len,
					    (unsigned long long)pb_at);
	}
	/* 5. The protobuf, then every field checked before it is trusted. */
	pb = podfeed__shard_index__unpack(&pb_allocator, pb_len,
					  p + PF_SKIP_HEADER);
	if (!pb) {
		if (pb_failed)
			return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, ix_start,
					    "no memory to unpack the index");
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE,
				    ix_start + PF_SKIP_HEADER,
				    "index protobuf does not unpack");
	}
	if (pb->version > PF_SHARD_VERSION) {
		ret = pf_error_set(err, -EPROTONOSUPPORT, PF_OFFSET_FILE, ix_start,
				   "index version %u is newer than %u",
				   pb->version, PF_SHARD_VERSION);
		goto out;
	}
	ret = -EBADMSG;
	if (!pb->version) {
		pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, ix_start,
			     "index version missing (0)");
		goto out;
	}
	if (pb->n_frame_offset != st.n || pb->n_frame_compressed_size != st.n ||
	    pb->n_frame_uncompressed_size != st.n || pb->n_frame_records != st.n ||
	    pb->n_frame_crc32c != st.n || pb->n_frame_first_record != st.n) {
		pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, ix_start,
			     "index frame arrays (%zu offsets, %zu compressed sizes, %zu uncompressed sizes, %zu record counts, %zu CRCs, %zu first records) do not match the seek table's %u frames",
			     pb->n_frame_offset, pb->n_frame_compressed_size,
			     pb->n_frame_uncompressed_size, pb->n_frame_records,
			     pb->n_frame_crc32c, pb->n_frame_first_record, st.n);
		goto out;
	}
	if (pb->data_end != ix_start) {
		pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, ix_start,
			     "index data_end %llu but the index frame starts at %llu",
			     (unsigned long long)pb->data_end,
			     (unsigned long long)ix_start);
		goto out;
	}
	if (!pf_alignment_ok(pb->alignment)) {
		pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, ix_start,
			     "index alignment %u is not a power of two >= 4096",
			     pb->alignment);
		goto out;
	}

	ix = pf_calloc(1, sizeof(*ix));
	if (!ix || (st.n && !(ix->frames = pf_calloc(st.n, sizeof(*ix->frames))))) {
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, ix_start,
				   "no memory for an index of %u frames", st.n);
		goto out;
	}
	ix->n_frames = st.n;
	ix->records = pb->records;
	ix->uncompressed = pb->uncompressed_bytes;
	ix->alignment = pb->alignment;
	ix->data_end = pb->data_end;
	ix->schema_records = pb->schema_records;
	ret = check_frames(ix, pb, &st, tail, tail_len, file_size, ix_start, err);
	if (ret)
		goto out;
	ret = copy_schema(ix, pb, ix_start, err);
	if (ret)
		goto out;
	ret = pf_lengths_from_pb(&ix->lengths, &ix->n_lengths, pb,
				 trailer == PF_INDEX_TRAILER_CRC, ix_start, err);
	if (ret)
		goto out;
	*out = ix;
	ix = NULL;
out:
	podfeed__shard_index__free_unpacked(pb, &pb_allocator);
	pf_shard_index_free(ix);
	return ret;
}

int pf_frame_decoder_create(pf_frame_decoder **out)
{
	pf_frame_decoder *d;

	*out = NULL;
	d = pf_calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->dctx = ZSTD_createDCtx_advanced(PF_ZSTD_MEM);
	if (!d->dctx) {
		pf_free(d);
		return -ENOMEM;
	}
	/* Content size and dst_cap are checked before decompressing, and a
	 * one-shot decompression writes straight into dst, so a window as
	 * large as the largest frame costs no memory of ours. */
	ZSTD_DCtx_setParameter(d->dctx, ZSTD_d_windowLogMax, 30);
	*out = d;
	return 0;
}

void pf_frame_decoder_free(pf_frame_decoder *d)
{
	if (!d)
		return;
	ZSTD_freeDCtx(d->dctx);
	pf_free(d);
}

int64_t pf_frame_decode(pf_frame_decoder *d, const pf_frame_info *fi,
			const void *src, size_t src_len, void *dst,
			size_t dst_cap, pf_error *err)
{
	uint32_t crc;

	pf_error_clear(err);
	if (src_len != fi->compressed_size)
		return pf_error_set(err, -EINVAL, PF_OFFSET_FILE, fi->offset,
				    "frame of %zu bytes given, index says %u",
				    src_len, fi->compressed_size);
	/* Integrity first: a flipped bit must not reach the decompressor. */
	crc = pf_crc32c(0, src, src_len);
	if (crc != fi->crc32c)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, fi->offset,
				    "frame CRC mismatch (0x%08x, index says 0x%08x)",
				    crc, fi->crc32c);
	return pf_zstd_decompress_frame(d->dctx, dst, dst_cap, fi->uncompressed_size, src,
					src_len, fi->offset, "index", err);
}

int pf_frame_check(const pf_frame_info *fi, uint32_t i, uint32_t alignment,
		   const char *where, uint64_t off, pf_error *err)
{
	if (alignment && (fi->offset & (alignment - 1)))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
				    "%sframe %u offset %llu is not a multiple of the alignment %u",
				    where, i, (unsigned long long)fi->offset, alignment);
	if (!fi->compressed_size)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
				    "%sframe %u has compressed size 0", where, i);
	if (fi->uncompressed_size > PF_SHARD_MAX_FRAME)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
				    "%sframe %u uncompressed size %u above the limit of %u",
				    where, i, fi->uncompressed_size, PF_SHARD_MAX_FRAME);
	if (!fi->records || fi->records > fi->uncompressed_size / PF_TFR_OVERHEAD)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
				    "%sframe %u record count %u impossible for %u bytes",
				    where, i, fi->records, fi->uncompressed_size);
	return 0;
}
