/* SPDX-License-Identifier: Apache-2.0 */
/* Writes indexed shards: zstd frames of whole TFRecords, index, seek table. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pb_internal.h"
#include "zstd_internal.h"

/*
 * The file, as written:
 *
 *   frame 0            zstd frame (content size, content checksum)
 *   [padding]          skippable frame PF_SKIP_PADDING, only with align
 *   frame 1 ...        each frame starts on an align boundary
 *   frame n-1          no padding after the last frame
 *   index              skippable PF_SKIP_INDEX:
 *                        [ShardIndex protobuf][u32 its CRC32C]
 *                        [u32 its length][u32 "PFIC"]
 *                      (version 1, still read: no CRC, "PFIX")
 *   seek table         skippable PF_SKIP_SEEKTABLE: n x {u32 compressed,
 *                        u32 decompressed}, then {u32 n, u8 0, u32 magic}
 *
 * The seek table's compressed size of a frame includes the padding after
 * it, so that its running sum is the next frame's offset, as zstd's
 * seekable decoder assumes.  The index records the zstd frame alone.
 */

/* Largest alignment we pad to (padding is written as zeros). */
#define PF_SHARD_MAX_ALIGN (16u << 20)
#define PF_SKIP_HEADER 8u

struct written_frame {
	pf_frame_info info;		/* as the index records it */
	uint32_t seek_size;		/* frame + the padding after it */
};

struct pf_shard_writer {
	pf_write_fn write;
	void *ctx;
	size_t frame_size;
	uint32_t align;
	uint64_t max_record_size;
	ZSTD_CCtx *cctx;

	uint8_t *frame;			/* TFRecord bytes of the open frame */
	size_t frame_len, frame_cap;
	uint32_t frame_records;
	uint8_t *compressed;		/* one compressed frame */
	size_t compressed_cap;

	struct written_frame *frames;	/* every frame written so far */
	size_t frames_cap;
	uint32_t n_frames;

	pf_feature_schema *schema;	/* names owned (pf_strdup) */
	size_t n_schema;
	uint64_t schema_records;
	pf_shard_lengths *lengths;	/* the schema's records' counts (lengths.c) */
	size_t n_lengths;

	uint64_t records;		/* records added */
	uint64_t uncompressed;		/* TFRecord bytes in written frames */
	uint64_t pos;			/* bytes sent to the sink */
	int failed;			/* first error: the writer is poisoned */
	bool closed;
};

static const uint8_t zero_page[4096];

static int sink(pf_shard_writer *w, const void *buf, size_t len, pf_error *err)
{
	int ret;

	if (!len)
		return 0;
	ret = w->write(w->ctx, buf, len);
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_FILE, w->pos,
				    "shard sink failed writing %zu bytes", len);
	w->pos += len;
	return 0;
}

static void schema_clear(pf_shard_writer *w)
{
	for (size_t i = 0; i < w->n_schema; i++)
		pf_free((char *)w->schema[i].name);
	pf_free(w->schema);
	w->schema = NULL;
	w->n_schema = 0;
	w->schema_records = 0;
	pf_lengths_free(w->lengths, w->n_lengths);
	w->lengths = NULL;
	w->n_lengths = 0;
}

int pf_shard_writer_create(pf_shard_writer **out,
			   const pf_shard_writer_config *cfg, pf_write_fn write,
			   void *ctx)
{
	pf_shard_writer_config c = { 0 };
	pf_shard_writer *w;
	int ret = -EINVAL;

	*out = NULL;
	if (cfg)
		c = *cfg;
	if (!c.frame_size)
		c.frame_size = PF_SHARD_FRAME_DEFAULT;
	if (!c.level)
		c.level = 3;
	if (!c.max_record_size)
		c.max_record_size = PF_MAX_RECORD_DEFAULT;
	if (!write || c.frame_size > PF_SHARD_MAX_FRAME ||
	    c.max_record_size > PF_SHARD_MAX_FRAME - PF_TFR_OVERHEAD ||
	    c.level < ZSTD_minCLevel() || c.level > ZSTD_maxCLevel())
		return -EINVAL;
	if (c.align && (c.align < 4096 || c.align > PF_SHARD_MAX_ALIGN ||
			(c.align & (c.align - 1))))
		return -EINVAL;

	w = pf_calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->write = write;
	w->ctx = ctx;
	w->frame_size = c.frame_size;
	w->align = c.align;
	w->max_record_size = c.max_record_size;
	/* The content checksum catches a bad decompressor or memory, which
	 * the CRC32C of the compressed bytes cannot. */
	ret = pf_zstd_cctx_create(&w->cctx, c.level, true);
	if (ret < 0)
		goto out;
	*out = w;
	return 0;
out:
	pf_shard_writer_free(w);
	return ret;
}

void pf_shard_writer_free(pf_shard_writer *w)
{
	if (!w)
		return;
	ZSTD_freeCCtx(w->cctx);
	pf_free(w->frame);
	pf_free(w->compressed);
	pf_free(w->frames);
	schema_clear(w);
	pf_free(w);
}

uint64_t pf_shard_writer_records(const pf_shard_writer *w)
{
	return w->records;
}

uint64_t pf_shard_writer_bytes(const pf_shard_writer *w)
{
	return w->pos;
}

/* Skippable padding so that the next frame starts on an align boundary.
 * A skippable frame is at least its 8-byte header, so a gap of 1..7 bytes
 * is widened by one more boundary. */
static uint64_t padding_for(const pf_shard_writer *w, uint64_t pos)
{
	uint64_t gap;

	if (!w->align)
		return 0;
	gap = (w->align - (pos & (w->align - 1))) & (w->align - 1);
	if (gap && gap < PF_SKIP_HEADER)
		gap += w->align;
	return gap;
}

static int write_padding(pf_shard_writer *w, uint64_t gap, pf_error *err)
{
	uint8_t header[PF_SKIP_HEADER];
	int ret;

	pf_store_le32(header, PF_SKIP_PADDING);
	pf_store_le32(header + 4, (uint32_t)(gap - PF_SKIP_HEADER));
	ret = sink(w, header, sizeof(header), err);
	gap -= PF_SKIP_HEADER;
	while (!ret && gap) {
		size_t n = gap < sizeof(zero_page) ? (size_t)gap : sizeof(zero_page);

		ret = sink(w, zero_page, n, err);
		gap -= n;
	}
	return ret;
}

/* Compress the open frame as one independent zstd frame and send it. */
static int flush_frame(pf_shard_writer *w, pf_error *err)
{
	size_t bound, csize;
	int64_t n;
	uint64_t gap;
	struct written_frame *wf;
	int ret;

	if (!w->frame_len)
		return 0;
	/* The seek table counts frames in a u32, and its own size must fit
	 * the skippable frame's u32 size field. */
	if (w->n_frames >= (UINT32_MAX - PF_SEEKTABLE_FOOTER) / 8)
		return pf_error_set(err, -EFBIG, PF_OFFSET_FILE, w->pos,
				    "too many frames for one shard");
	bound = ZSTD_compressBound(w->frame_len);
	if (pf_grow(&w->compressed, &w->compressed_cap, bound, 1) < 0)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, w->pos,
				    "no memory for a compressed frame");
	if (pf_grow(&w->frames, &w->frames_cap, (size_t)w->n_frames + 1, sizeof(*w->frames)) < 0)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, w->pos,
				    "no memory for the frame table");

	n = pf_zstd_compress(w->cctx, w->compressed, w->compressed_cap, w->frame,
			     w->frame_len, w->pos, err);
	if (n < 0)
		return (int)n;
	csize = (size_t)n;
	/* The padding goes before this frame, so the previous frame's seek
	 * table size can take it in. */
	if (w->n_frames) {
		gap = padding_for(w, w->pos);
		if (gap) {
			ret = write_padding(w, gap, err);
			if (ret)
				return ret;
			w->frames[w->n_frames - 1].seek_size += (uint32_t)gap;
		}
	}
	wf = &w->frames[w->n_frames];
	wf->info.offset = w->pos;
	wf->info.compressed_size = (uint32_t)csize;
	wf->info.uncompressed_size = (uint32_t)w->frame_len;
	wf->info.records = w->frame_records;
	wf->info.first_record = w->records - w->frame_records;
	wf->info.crc32c = pf_crc32c(0, w->compressed, csize);
	wf->seek_size = (uint32_t)csize;
	ret = sink(w, w->compressed, csize, err);
	if (ret)
		return ret;
	w->n_frames++;
	w->uncompressed += w->frame_len;
	w->frame_len = 0;
	w->frame_records = 0;
	return 0;
}

int pf_shard_writer_add(pf_shard_writer *w, const void *data, size_t len,
			pf_error *err)
{
	size_t framed;
	int ret;

	pf_error_clear(err);
	if (w->failed)
		return w->failed;
	if (w->closed)
		return -EINVAL;
	if (len > w->max_record_size)
		return pf_error_set(err, -EFBIG, PF_OFFSET_STREAM,
				    w->uncompressed + w->frame_len,
				    "record of %zu bytes is larger than the limit of %llu",
				    len, (unsigned long long)w->max_record_size);
	framed = len + PF_TFR_OVERHEAD;
	/* A frame holds whole records; a record larger than frame_size
	 * gets a frame of its own. */
	if (w->frame_len && w->frame_len + framed > w->frame_size) {
		ret = flush_frame(w, err);
		if (ret)
			goto fail;
	}
	if (w->frame_records == UINT32_MAX) {
		ret = flush_frame(w, err);
		if (ret)
			goto fail;
	}
	if (pf_grow(&w->frame, &w->frame_cap, w->frame_len + framed, 1) < 0) {
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, w->pos,
				   "no memory for a frame of %zu bytes",
				   w->frame_len + framed);
		goto fail;
	}
	/* An empty record may come as (NULL, 0); memcpy wants a pointer. */
	pf_tfr_encode(w->frame + w->frame_len, framed, len ? data : "", len);
	w->frame_len += framed;
	w->frame_records++;
	w->records++;
	return 0;
fail:
	w->failed = ret;
	return ret;
}

int pf_shard_writer_set_schema(pf_shard_writer *w, const pf_schema *s)
{
	size_t n = s ? pf_schema_count(s) : 0;
	pf_feature_schema *copy = NULL;
	pf_shard_lengths *lengths;
	size_t i = 0, n_lengths;

	if (pf_schema_lengths(s, &lengths, &n_lengths) < 0)
		return -ENOMEM;
	if (n) {
		copy = pf_calloc(n, sizeof(*copy));
		if (!copy) {
			pf_lengths_free(lengths, n_lengths);
			return -ENOMEM;
		}
		for (i = 0; i < n; i++) {
			const pf_feature_schema *f = pf_schema_get(s, i);

			copy[i] = *f;
			copy[i].name = pf_strdup(f->name ? f->name : "");
			if (!copy[i].name)
				goto out;
		}
	}
	schema_clear(w);
	w->schema = copy;
	w->n_schema = n;
	w->schema_records = s ? pf_schema_records(s) : 0;
	w->lengths = lengths;
	w->n_lengths = n_lengths;
	return 0;
out:
	while (i--)
		pf_free((char *)copy[i].name);
	pf_free(copy);
	pf_lengths_free(lengths, n_lengths);
	return -ENOMEM;
}

/* Pack the index into a skippable frame: header, protobuf, u32 length,
 * u32 trailer magic.  *out is pf_malloc'd; the caller frees it
 * with pf_free(). */
static int build_index(pf_shard_writer *w, uint64_t data_end, uint8_t **out,
		       size_t *out_len, pf_error *err)
{
	Podfeed__ShardIndex ix = PODFEED__SHARD_INDEX__INIT;
	Podfeed__FeatureSchema **fsp = NULL;
	Podfeed__RecordLengths *rl = NULL, **rlp = NULL;
	uint64_t *offset = NULL, *first = NULL;
	uint32_t *csize = NULL, *usize = NULL, *recs = NULL, *crc = NULL;
	uint32_t n = w->n_frames;
	size_t alloc_n = n ? n : 1;
	size_t pb_len, total;
	uint8_t *buf = NULL;
	int ret = -ENOMEM;

	offset = pf_calloc(alloc_n, sizeof(*offset));
	first = pf_calloc(alloc_n, sizeof(*first));
	csize = pf_calloc(alloc_n, sizeof(*csize));
	usize = pf_calloc(alloc_n, sizeof(*usize));
	recs = pf_calloc(alloc_n, sizeof(*recs));
	crc = pf_calloc(alloc_n, sizeof(*crc));
	if (!offset || !first || !csize || !usize || !recs || !crc ||
	    pf_schema_to_pb(w->schema, w->n_schema, &fsp) < 0)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		const pf_frame_info *fi = &w->frames[i].info;

		offset[i] = fi->offset;
		first[i] = fi->first_record;
		csize[i] = fi->compressed_size;
		usize[i] = fi->uncompressed_size;
		recs[i] = fi->records;
		crc[i] = fi->crc32c;
	}
	ix.version = PF_SHARD_VERSION;
	ix.records = w->records;
	ix.uncompressed_bytes = w->uncompressed;
	ix.alignment = w->align;
	ix.data_end = data_end;
	ix.n_frame_offset = n;
	ix.frame_offset = offset;
	ix.n_frame_compressed_size = n;
	ix.frame_compressed_size = csize;
	ix.n_frame_uncompressed_size = n;
	ix.frame_uncompressed_size = usize;
	ix.n_frame_records = n;
	ix.frame_records = recs;
	ix.n_frame_crc32c = n;
	ix.frame_crc32c = crc;
	ix.n_frame_first_record = n;
	ix.frame_first_record = first;
	ix.n_schema = w->n_schema;
	ix.schema = fsp;
	ix.schema_records = w->schema_records;
	/* The records' counts, when the schema is every record's. */
	if (w->n_lengths && w->schema_records == w->records) {
		rl = pf_calloc(w->n_lengths, sizeof(*rl));
		rlp = pf_calloc(w->n_lengths, sizeof(*rlp));
		if (!rl || !rlp)
			goto out;
		for (size_t i = 0; i < w->n_lengths; i++) {
			podfeed__record_lengths__init(&rl[i]);
			rl[i].version = PF_LENGTHS_VERSION;
			rl[i].name = w->lengths[i].name;
			rl[i].counts.data = w->lengths[i].counts;
			rl[i].counts.len = w->lengths[i].len;
			rlp[i] = &rl[i];
		}
		ix.n_record_lengths = w->n_lengths;
		ix.record_lengths = rlp;
	}

	pb_len = podfeed__shard_index__get_packed_size(&ix);
	total = PF_SKIP_HEADER + pb_len + 12;
	if (total > PF_SHARD_MAX_INDEX) {
		ret = pf_error_set(err, -EFBIG, PF_OFFSET_FILE, data_end,
				   "index of %zu bytes is larger than the limit of %u",
				   total, PF_SHARD_MAX_INDEX);
		goto out;
	}
	buf = pf_malloc(total);
	if (!buf)
		goto out;
	pf_store_le32(buf, PF_SKIP_INDEX);
	pf_store_le32(buf + 4, (uint32_t)(pb_len + 12));
	podfeed__shard_index__pack(&ix, buf + PF_SKIP_HEADER);
	/* The whole index checked, the schema with it: the frame table is
	 * cross-checked against the seek table, the schema by nothing else. */
	pf_store_le32(buf + PF_SKIP_HEADER + pb_len,
		      pf_crc32c(0, buf + PF_SKIP_HEADER, pb_len));
	pf_store_le32(buf + PF_SKIP_HEADER + pb_len + 4, (uint32_t)pb_len);
	pf_store_le32(buf + PF_SKIP_HEADER + pb_len + 8, PF_INDEX_TRAILER_MAGIC_CRC);
	*out = buf;
	*out_len = total;
	ret = 0;
out:
	if (ret == -ENOMEM)
		pf_error_set(err, ret, PF_OFFSET_FILE, data_end,
			     "no memory for the shard index");
	pf_free(offset);
	pf_free(first);
	pf_free(csize);
	pf_free(usize);
	pf_free(recs);
	pf_free(crc);
	pf_free(fsp);
	pf_free(rl);
	pf_free(rlp);
	return ret;
}

/* The zstd seekable format's seek table; *out is pf_malloc'd, the caller
 * frees it with pf_free(). */
static int build_seek_table(pf_shard_writer *w, uint8_t **out, size_t *out_len,
			    pf_error *err)
{
	size_t content = (size_t)w->n_frames * 8 + PF_SEEKTABLE_FOOTER;
	size_t total = PF_SKIP_HEADER + content;
	uint8_t *buf, *p;

	if (total > PF_SHARD_MAX_INDEX)
		return pf_error_set(err, -EFBIG, PF_OFFSET_FILE, w->pos,
				    "seek table of %zu bytes is larger than the limit of %u",
				    total, PF_SHARD_MAX_INDEX);
	buf = pf_malloc(total);
	if (!buf)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, w->pos,
				    "no memory for the seek table");
	pf_store_le32(buf, PF_SKIP_SEEKTABLE);
	pf_store_le32(buf + 4, (uint32_t)content);
	p = buf + PF_SKIP_HEADER;
	for (uint32_t i = 0; i < w->n_frames; i++, p += 8) {
		pf_store_le32(p, w->frames[i].seek_size);
		pf_store_le32(p + 4, w->frames[i].info.uncompressed_size);
	}
	pf_store_le32(p, w->n_frames);
	p[4] = 0;	/* descriptor: no checksums */
	pf_store_le32(p + 5, PF_SEEKABLE_MAGIC);
	*out = buf;
	*out_len = total;
	return 0;
}

int pf_shard_writer_close(pf_shard_writer *w, pf_error *err)
{
	uint8_t *index = NULL, *seek = NULL;
	size_t index_len = 0, seek_len = 0;
	uint64_t data_end;
	int ret;

	pf_error_clear(err);
	if (w->failed)
		return w->failed;
	if (w->closed)
		return 0;
	ret = flush_frame(w, err);
	if (ret)
		goto out;
	data_end = w->pos;
	ret = build_index(w, data_end, &index, &index_len, err);
	if (ret)
		goto out;
	ret = build_seek_table(w, &seek, &seek_len, err);
	if (ret)
		goto out;
	ret = sink(w, index, index_len, err);
	if (ret)
		goto out;
	ret = sink(w, seek, seek_len, err);
	if (ret)
		goto out;
	w->closed = true;
out:
	if (ret)
		w->failed = ret;
	pf_free(index);
	pf_free(seek);
	return ret;
}
