/* SPDX-License-Identifier: Apache-2.0 */
/* pf_source: the records of one file, in order, from any format. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset_internal.h"

struct pf_source {
	char *path;
	int fd;
	pf_region_table *regions;	/* reads are counted to mount there */
	size_t mount;
	uint64_t file_size;
	uint64_t max_record;

	/* indexed shards */
	pf_shard_index *index;
	pf_frame_decoder *fdec;
	uint32_t frame;			/* next frame to load */
	uint8_t *cbuf, *ubuf;		/* compressed / uncompressed frame */
	size_t cbuf_cap, ubuf_cap;
	size_t upos, ulen;		/* parse position in ubuf */
	uint64_t frame_stream_off;	/* stream offset of ubuf[0] */
	uint64_t stream_next;		/* stream offset of frame s->frame */
	uint64_t next_record;
	uint64_t skip;			/* records to drop after a seek */
	uint32_t frame_left;		/* records the index promises still */
	/* skip mode: the frame being read (s->frame - 1) */
	bool frame_open;		/* loaded, its end not yet checked */
	bool frame_damaged;		/* something in it was dropped */
	uint32_t frame_intact;		/* its records that passed so far */

	/* streams: read here with pread into rbuf, pulled from the caller
	 * (cfg->pull), or pushed by it (push mode, pf_source_push()); the
	 * caller's pieces are fed as they are */
	pf_recstream *rs;
	uint8_t *rbuf;
	size_t rbuf_cap;
	uint64_t read_off;
	bool fed_eof, done;
	int (*pull)(void *ctx, const uint8_t **buf, size_t *len, pf_error *err);
	void *pull_ctx;
	bool push;			/* push mode */
	bool starved;			/* push mode: said PF_SOURCE_HUNGRY, and
					   has not been fed since */
	const uint8_t *pushed;		/* the piece pushed, not yet fed */
	size_t pushed_len;
	bool has_pushed;

	uint64_t bytes_out;		/* indexed (streams: pf_recstream_total_out) */

	bool skip_mode;			/* PF_CORRUPT_SKIP */
	pf_drop_fn on_drop;
	void *on_drop_ctx;
	uint64_t drops;
};

/* Hand a drop on, its cause naming the file.  @return 0, or on_drop's <0
 * (then err holds the cause with that code). */
static int report(pf_source *s, pf_drop *d, pf_error *err)
{
	int ret = 0;

	pf_error_set_file(&d->cause, s->path);
	s->drops++;
	if (s->on_drop)
		ret = s->on_drop(s->on_drop_ctx, d);
	if (ret < 0 && err) {
		*err = d->cause;
		err->code = ret;
	}
	return ret;
}

/* The record stream's drops: name the file, and for an uncompressed file
 * say "byte N" of the file (the stream is the file). */
static int stream_drop(void *ctx, const pf_drop *drop)
{
	pf_source *s = ctx;
	pf_drop d = *drop;

	if (pf_recstream_compression(s->rs) == PF_COMP_NONE) {
		if (d.offset_kind == PF_OFFSET_STREAM)
			d.offset_kind = PF_OFFSET_FILE;
		if (d.cause.offset_kind == PF_OFFSET_STREAM)
			d.cause.offset_kind = PF_OFFSET_FILE;
	}
	return report(s, &d, NULL);
}

int pf_shard_tail_read(int fd, const char *path, uint64_t size, pf_region_table *regions,
		       size_t mount, uint8_t **tail, size_t *tail_cap, pf_shard_index **ix,
		       pf_error *err)
{
	size_t want = PF_SHARD_TAIL_HINT;

	/* The hint, then the seek table with the index trailer, then the
	 * index itself: each pass asks for what the last one found. */
	for (int attempt = 0; attempt < 3; attempt++) {
		int64_t got, ret;

		if (want > size)
			want = (size_t)size;
		if (*tail_cap < want) {
			uint8_t *t = pf_realloc(*tail, want);

			if (!t)
				return -ENOMEM;
			*tail = t;
			*tail_cap = want;
		}
		got = pf_region_pread(regions, mount, fd, *tail, want, size - want, path, err);
		if (got < 0)
			return (int)got;
		ret = pf_shard_index_parse(ix, *tail, (size_t)got, size, err);
		if (ret <= 0)
			return (int)ret;
		want = (size_t)ret;	/* the index is larger than the hint */
	}
	return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, 0,
			    "shard index keeps asking for more tail bytes");
}

static int open_index(pf_source *s, pf_error *err)
{
	uint8_t *tail = NULL;
	size_t cap = 0;
	int ret = pf_shard_tail_read(s->fd, s->path, s->file_size, s->regions, s->mount, &tail,
				     &cap, &s->index, err);

	pf_free(tail);
	return ret;
}

/* Open the file, and its index unless cfg says to ignore it.  @return 0
 * for an indexed shard (ready to read), -ENODATA for a stream, or <0. */
static int open_file(pf_source *s, const pf_source_config *cfg, pf_error *err)
{
	int ret = s->fd = pf_file_open(s->path, err);

	if (ret < 0)
		return ret;
	ret = pf_file_size(s->fd, &s->file_size);
	if (ret < 0 || (cfg && cfg->ignore_index))
		return ret < 0 ? ret : -ENODATA;
	ret = open_index(s, err);
	if (ret == 0)
		return pf_frame_decoder_create(&s->fdec);
	if (ret == -EBADMSG && s->skip_mode) {
		/* Skip mode: the records are all in the zstd stream; the
		 * broken index is a drop of none of them. */
		pf_drop d = { .unit = PF_DROP_FRAME, .records = 0 };

		pf_shard_index_free(s->index);
		s->index = NULL;
		if (err) {
			d.cause = *err;
			d.offset_kind = err->offset_kind;
			d.start = d.resume = err->offset;
		} else {
			pf_error_clear(&d.cause);
			pf_error_set(&d.cause, ret, PF_OFFSET_NONE, 0, "bad shard index");
		}
		ret = report(s, &d, err);
		if (ret < 0)
			return ret;
		ret = -ENODATA;
	}
	if (ret == -ENODATA)
		pf_error_clear(err);
	return ret;
}

/* The compression a file's name promises: PF_COMP_ZSTD for .zst/.zstd,
 * PF_COMP_GZIP for .gz/.gzip, PF_COMP_ZLIB for .zlib, else PF_COMP_NONE.
 * Only asked of a file of 0 bytes, which has nothing to detect. */
static pf_compression name_says(const char *path)
{
	static const struct { const char *suffix; pf_compression c; } names[] = {
		{ ".zst", PF_COMP_ZSTD }, { ".zstd", PF_COMP_ZSTD },
		{ ".gz", PF_COMP_GZIP }, { ".gzip", PF_COMP_GZIP },
		{ ".zlib", PF_COMP_ZLIB },
	};
	size_t n = strlen(path);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t k = strlen(names[i].suffix);

		if (n > k && !strcmp(path + n - k, names[i].suffix))
			return names[i].c;
	}
	return PF_COMP_NONE;
}

/*
 * A stream file of 0 bytes.  Plain TFRecord: 0 records, nothing wrong.
 * A name that says compressed: a zstd frame or a gzip/zlib header is never
 * 0 bytes, so the file was cut or never written: damaged data, to the
 * corrupt policy (fail: the error; skip: a drop of an unknown number of
 * records, then 0 records).  @return 0 or <0 with err.
 */
static int check_empty(pf_source *s, pf_error *err)
{
	pf_compression c = name_says(s->path);
	pf_drop d = { .unit = c == PF_COMP_ZSTD ? PF_DROP_FRAME : PF_DROP_MEMBER,
		      .offset_kind = PF_OFFSET_FILE, .records = -1 };

	if (s->file_size || c == PF_COMP_NONE)
		return 0;
	pf_error_clear(&d.cause);
	pf_error_set(&d.cause, -EBADMSG, PF_OFFSET_FILE, 0,
		     "0 bytes, but the name says %s, whose data is never empty "
		     "(a file cut short or never written)", pf_compression_name(c));
	if (!s->skip_mode) {
		if (err)
			*err = d.cause;
		return -EBADMSG;
	}
	return report(s, &d, err);
}

/* pf_source_open(), or with push pf_source_open_push() of a stream file of
 * push_size bytes. */
static int open_source(pf_source **out, const char *path, const pf_source_config *cfg,
		       bool push, uint64_t push_size, pf_error *err)
{
	pf_recstream_config rcfg = { 0 };
	pf_source *s = pf_calloc(1, sizeof(*s));
	int ret;

	pf_error_clear(err);
	if (!s) {
		pf_error_set_file(err, path);
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	}
	s->fd = -1;
	s->path = pf_strdup(path);
	if (!s->path) {
		ret = -ENOMEM;
		goto fail;
	}
	s->max_record = cfg && cfg->max_record_size ? cfg->max_record_size
						    : PF_MAX_RECORD_DEFAULT;
	s->regions = cfg ? cfg->regions : NULL;
	if (s->regions)
		s->mount = pf_region_table_lookup(s->regions, path);
	if (cfg && cfg->on_corrupt != PF_CORRUPT_FAIL && cfg->on_corrupt != PF_CORRUPT_SKIP) {
		ret = -EINVAL;
		goto fail;
	}
	s->skip_mode = cfg && cfg->on_corrupt == PF_CORRUPT_SKIP;
	s->on_drop = cfg ? cfg->on_drop : NULL;
	s->on_drop_ctx = cfg ? cfg->on_drop_ctx : NULL;
	s->push = push;
	s->pull = cfg && !push ? cfg->pull : NULL;
	s->pull_ctx = cfg ? cfg->pull_ctx : NULL;
	if (push || (s->pull && cfg->ignore_index)) {
		/* A stream whose bytes come from the caller: nothing here
		 * reads the file, so it is not even opened. */
		s->file_size = push ? push_size : cfg->file_size;
	} else {
		ret = open_file(s, cfg, err);
		if (ret == 0) {
			*out = s;	/* an indexed shard */
			return 0;
		}
		if (ret != -ENODATA)
			goto fail;
	}
	ret = check_empty(s, err);
	if (ret < 0)
		goto fail;

	rcfg.max_record_size = s->max_record;
	if (s->skip_mode) {
		rcfg.on_corrupt = PF_CORRUPT_SKIP;
		rcfg.on_drop = stream_drop;
		rcfg.on_drop_ctx = s;
	}
	if (!s->pull && !s->push) {
		s->rbuf_cap = cfg && cfg->read_size ? cfg->read_size : PF_READ_DEFAULT;
		s->rbuf = pf_malloc(s->rbuf_cap);
		if (!s->rbuf) {
			ret = -ENOMEM;
			goto fail;
		}
	}
	ret = pf_recstream_create(&s->rs, &rcfg);
	if (ret < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	pf_error_set_file(err, path);
	if (err && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "%s", pf_strerror(ret));
	pf_source_close(s);
	return ret;
}

int pf_source_open(pf_source **out, const char *path,
		   const pf_source_config *cfg, pf_error *err)
{
	return open_source(out, path, cfg, false, 0, err);
}

int pf_source_open_push(pf_source **out, const char *path, const pf_source_config *cfg,
			uint64_t file_size, pf_error *err)
{
	return open_source(out, path, cfg, true, file_size, err);
}

void pf_source_push(pf_source *s, const uint8_t *piece, size_t len)
{
	s->pushed = piece;
	s->pushed_len = len;
	s->has_pushed = true;
}

void pf_source_close(pf_source *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	pf_shard_index_free(s->index);
	pf_frame_decoder_free(s->fdec);
	pf_recstream_free(s->rs);
	pf_free(s->cbuf);
	pf_free(s->ubuf);
	pf_free(s->rbuf);
	pf_free(s->path);
	pf_free(s);
}

static int grow(uint8_t **buf, size_t *cap, size_t want)
{
	uint8_t *p;

	if (*cap >= want)
		return 0;
	p = pf_realloc(*buf, want);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = want;
	return 0;
}

/* Read and decode frame s->frame into ubuf. */
static int load_frame(pf_source *s, pf_error *err)
{
	const pf_frame_info *fi = pf_shard_index_frame(s->index, s->frame);
	int64_t got;
	int ret;

	/* Both sizes come from a validated index and are bounded by it. */
	ret = grow(&s->cbuf, &s->cbuf_cap, fi->compressed_size);
	if (ret == 0)
		ret = grow(&s->ubuf, &s->ubuf_cap, fi->uncompressed_size);
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_FILE, fi->offset,
				    "no memory for a frame of %u bytes",
				    fi->uncompressed_size);
	got = pf_region_pread(s->regions, s->mount, s->fd, s->cbuf,
			      fi->compressed_size, fi->offset, s->path, err);
	if (got < 0)
		return (int)got;
	if ((uint64_t)got < fi->compressed_size)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, fi->offset + got,
				    "file ends inside frame %u", s->frame);
	got = pf_frame_decode(s->fdec, fi, s->cbuf, fi->compressed_size,
			      s->ubuf, s->ubuf_cap, err);
	if (got < 0)
		return (int)got;
	s->ulen = (size_t)got;
	s->upos = 0;
	s->frame_left = fi->records;
	s->next_record = fi->first_record;
	s->bytes_out += (uint64_t)got;
	return 0;
}

static int next_indexed(pf_source *s, pf_record *rec, pf_error *err)
{
	for (;;) {
		if (s->upos == s->ulen) {
			if (s->frame_left)
				goto short_frame;
			if (s->frame >= pf_shard_index_frames(s->index))
				return 0;
			int ret = load_frame(s, err);
			if (ret < 0) {
				err->frame = s->frame;
				return ret;
			}
			s->frame_stream_off = s->stream_next;
			s->stream_next += s->ulen;
			s->frame++;
			continue;
		}
		uint64_t off = s->frame_stream_off + s->upos;
		int64_t n = pf_tfr_parse(s->ubuf + s->upos, s->ulen - s->upos,
					 off, s->max_record, rec, err);
		if (n == 0)	/* a frame holds whole records only */
			n = pf_tfr_truncation(s->ubuf + s->upos, s->ulen - s->upos,
					      off, s->max_record, err);
		if (n < 0) {
			err->frame = s->frame - 1;
			err->record = (int64_t)s->next_record;
			return (int)n;
		}
		if (s->frame_left == 0)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE,
				pf_shard_index_frame(s->index, s->frame - 1)->offset,
				"frame %u holds more records than its index entry says",
				s->frame - 1);
		s->upos += (size_t)n;
		s->frame_left--;
		rec->index = s->next_record++;
		if (s->skip) {
			s->skip--;
			continue;
		}
		return 1;
	}
short_frame:
	return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE,
			    pf_shard_index_frame(s->index, s->frame - 1)->offset,
			    "frame %u holds %u fewer records than its index entry says",
			    s->frame - 1, s->frame_left);
}

/* File offset where frame f's bytes end for good: the next frame, or the
 * index. */
static uint64_t frame_end(const pf_source *s, uint32_t f)
{
	return f + 1 < pf_shard_index_frames(s->index)
		? pf_shard_index_frame(s->index, f + 1)->offset
		: pf_shard_index_data_end(s->index);
}

static int frame_drop(pf_source *s, uint32_t f, int64_t records, const pf_error *cause,
		      pf_error *err)
{
	const pf_frame_info *fi = pf_shard_index_frame(s->index, f);
	pf_drop d = { .unit = PF_DROP_FRAME, .offset_kind = PF_OFFSET_FILE,
		      .start = fi->offset, .resume = frame_end(s, f),
		      .next_record = s->next_record, .records = records, .cause = *cause };

	s->frame_damaged = true;
	d.cause.frame = f;
	return report(s, &d, err);
}

/* Skip mode: the frame just read has ended.  Fewer intact records than its
 * index entry promises, with nothing dropped to explain it, is damage too
 * (the frame passed its checks, so the writer or the index is wrong). */
static int close_frame(pf_source *s, pf_error *err)
{
	uint32_t f = s->frame - 1;
	const pf_frame_info *fi = pf_shard_index_frame(s->index, f);
	pf_error cause;

	s->frame_open = false;
	s->skip = 0;	/* a seek's count ends with its frame */
	if (s->frame_damaged || s->frame_intact >= fi->records)
		return 0;
	pf_error_clear(&cause);
	pf_error_set(&cause, -EBADMSG, PF_OFFSET_FILE, fi->offset,
		     "frame %u holds %u fewer records than its index entry says",
		     f, fi->records - s->frame_intact);
	return frame_drop(s, f, fi->records - s->frame_intact, &cause, err);
}

/* next_indexed() in skip mode: damaged frames and records are dropped
 * and reported; intact records are numbered from the frame's first. */
static int next_indexed_skip(pf_source *s, pf_record *rec, pf_error *err)
{
	for (;;) {
		const pf_frame_info *fi;
		pf_error cause;
		pf_drop d;
		int ret;

		if (s->upos == s->ulen) {
			if (s->frame_open && (ret = close_frame(s, err)) < 0)
				return ret;
			if (s->frame >= pf_shard_index_frames(s->index))
				return 0;
			fi = pf_shard_index_frame(s->index, s->frame);
			pf_error_clear(&cause);
			ret = load_frame(s, &cause);
			if (ret == -EBADMSG) {
				/* The frame alone goes; the index still places
				 * the next one. */
				s->next_record = fi->first_record;
				s->skip = 0;	/* a seek into it ends here */
				ret = frame_drop(s, s->frame, fi->records, &cause, err);
				if (ret < 0)
					return ret;
				s->stream_next += fi->uncompressed_size;
				s->frame++;
				s->upos = s->ulen = 0;
				continue;
			}
			if (ret < 0) {
				if (err) {
					*err = cause;
					err->frame = s->frame;
				}
				return ret;
			}
			s->frame_stream_off = s->stream_next;
			s->stream_next += s->ulen;
			s->frame++;
			s->frame_open = true;
			s->frame_damaged = false;
			s->frame_intact = 0;
			continue;
		}
		fi = pf_shard_index_frame(s->index, s->frame - 1);
		ret = pf_tfr_next_intact(s->ubuf, s->ulen, &s->upos, s->frame_stream_off,
					 s->max_record, true, rec, &d);
		if (ret == 2) {
			s->frame_damaged = true;
			d.next_record = s->next_record;
			d.cause.frame = s->frame - 1;
			d.cause.record = (int64_t)s->next_record;
			ret = report(s, &d, err);
			if (ret < 0)
				return ret;
			continue;
		}
		if (s->frame_intact == fi->records) {
			/* More records than the index says: they cannot be
			 * numbered without taking the next frame's numbers. */
			pf_error_clear(&cause);
			pf_error_set(&cause, -EBADMSG, PF_OFFSET_FILE, fi->offset,
				     "frame %u holds more records than its index entry says",
				     s->frame - 1);
			s->upos = s->ulen;
			ret = frame_drop(s, s->frame - 1, -1, &cause, err);
			if (ret < 0)
				return ret;
			continue;
		}
		s->frame_intact++;
		rec->index = s->next_record++;
		if (s->skip) {
			s->skip--;
			continue;
		}
		return 1;
	}
}

/* The next piece of a stream file: pushed or pulled by the caller, or
 * read into rbuf.  Either way the record stream is done with the previous
 * piece (pf_recstream_next() returned 0).  @return its length (0: the
 * end), or <0 with err. */
static int64_t next_piece(pf_source *s, const uint8_t **piece, pf_error *err)
{
	int64_t got;

	if (s->push) {
		s->has_pushed = false;
		*piece = s->pushed;
		return (int64_t)s->pushed_len;
	}
	if (s->pull) {
		size_t len = 0;
		int ret = s->pull(s->pull_ctx, piece, &len, err);

		if (ret < 0 && err && !err->code)
			pf_error_set(err, ret, PF_OFFSET_FILE, s->read_off, "read failed: %s",
				     pf_strerror(ret));
		return ret < 0 ? ret : (int64_t)len;
	}
	*piece = s->rbuf;
	got = pf_region_pread(s->regions, s->mount, s->fd, s->rbuf, s->rbuf_cap,
			      s->read_off, s->path, err);
	return got;
}

static int next_stream(pf_source *s, pf_record *rec, pf_error *err)
{
	for (;;) {
		const uint8_t *piece = NULL;
		int ret;

		/* Starved: the record stream said it needs more, and waits for
		 * the piece the caller is to push. */
		if (!s->starved) {
			ret = pf_recstream_next(s->rs, rec, err);
			if (ret != 0)
				return ret;
			if (s->fed_eof) {
				if (!s->done) {
					s->done = true;
					ret = pf_recstream_finish(s->rs, err);
					if (ret < 0)
						return ret;
				}
				return 0;
			}
		}
		s->starved = s->push && !s->has_pushed;
		if (s->starved)
			return PF_SOURCE_HUNGRY;
		int64_t got = next_piece(s, &piece, err);

		if (got < 0)
			return (int)got;
		s->read_off += (uint64_t)got;
		if (got == 0)
			s->fed_eof = true;
		pf_recstream_feed(s->rs, piece, (size_t)got);
	}
}

int pf_source_next(pf_source *s, pf_record *rec, pf_error *err)
{
	int ret;

	pf_error_clear(err);
	ret = !s->index ? next_stream(s, rec, err)
	      : s->skip_mode ? next_indexed_skip(s, rec, err) : next_indexed(s, rec, err);
	if (ret < 0 && err) {
		pf_error_set_file(err, s->path);
		/* Uncompressed: the stream is the file, say "byte N". */
		if (!s->index && err->offset_kind == PF_OFFSET_STREAM &&
		    pf_recstream_compression(s->rs) == PF_COMP_NONE)
			err->offset_kind = PF_OFFSET_FILE;
	}
	return ret;
}

int pf_source_seek_record(pf_source *s, uint64_t rec)
{
	int64_t f;

	if (!s->index)
		return -ENOTSUP;
	if (rec == pf_shard_index_records(s->index)) {
		s->frame = pf_shard_index_frames(s->index);
		s->upos = s->ulen = 0;
		s->frame_left = 0;
		s->frame_open = false;
		return 0;
	}
	f = pf_shard_index_find_record(s->index, rec);
	if (f < 0)
		return -ERANGE;
	s->frame = (uint32_t)f;
	s->upos = s->ulen = 0;
	s->frame_left = 0;
	s->frame_open = false;
	s->stream_next = 0;
	for (uint32_t i = 0; i < s->frame; i++)
		s->stream_next += pf_shard_index_frame(s->index, i)->uncompressed_size;
	s->skip = rec - pf_shard_index_frame(s->index, (uint32_t)f)->first_record;
	return 0;
}

const pf_shard_index *pf_source_index(const pf_source *s)
{
	return s->index;
}

pf_compression pf_source_compression(const pf_source *s)
{
	return s->index ? PF_COMP_ZSTD : pf_recstream_compression(s->rs);
}

uint64_t pf_source_file_size(const pf_source *s)
{
	return s->file_size;
}

uint64_t pf_source_bytes_out(const pf_source *s)
{
	/* A stream's count grows as records come out, not as input is fed. */
	return s->index ? s->bytes_out : pf_recstream_total_out(s->rs);
}

const char *pf_source_path(const pf_source *s)
{
	return s->path;
}

uint64_t pf_source_drops(const pf_source *s)
{
	return s->drops;
}
