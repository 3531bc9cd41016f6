/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench --baseline: raw passes over every frame of the indexed
 * shards, split among T threads, that the loader is quoted against: a
 * read pass (whole frames through one I/O engine a thread), a decompress
 * pass (pread, frame CRC, zstd) and a decode pass (the frames already
 * decompressed in memory: TFRecord framing and the spec's decode into
 * batch rows).  The report section, and the bound the decompress and
 * decode passes allow together, are the library's
 * (pf_report_add_baseline()). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common_internal.h"
#include "loadbench.h"
#include "spec_internal.h"

#define ALIGN 4096u
#define BL_READ_BYTES (256u << 20)	/* read-pass buffers per thread */
#define BL_DECODE_BYTES (96u << 20)	/* decode pass: frames in memory per thread */
#define BL_DECODE_ROWS (32u << 20)	/* decode pass: its rows per thread */

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

void baseline_free(bl_set *s)
{
	free(s->aligned);
	free(s->frames);
	memset(s, 0, sizeof(*s));
}

int baseline_load(bl_set *s, char **paths, size_t n)
{
	size_t cap = 0;

	memset(s, 0, sizeof(*s));
	s->paths = paths;
	s->nfiles = n;
	s->aligned = calloc(n ? n : 1, sizeof(*s->aligned));
	if (!s->aligned)
		return -1;
	for (size_t i = 0; i < n; i++) {
		pf_source *src;
		const pf_shard_index *ix;
		pf_error err;

		pf_error_clear(&err);
		if (pf_source_open(&src, paths[i], NULL, &err) < 0) {
			cli_print_error(&err);
			return -1;
		}
		ix = pf_source_index(src);
		if (!ix) {		/* a stream: not part of the baselines */
			pf_source_close(src);
			continue;
		}
		s->nindexed++;
		s->aligned[i] = pf_shard_index_alignment(ix) >= ALIGN;
		uint32_t nf = pf_shard_index_frames(ix);
		if (s->nframes + nf > cap) {
			size_t ncap = (s->nframes + nf) * 2;
			bl_frame *g = realloc(s->frames, ncap * sizeof(*g));
			if (!g) {
				pf_source_close(src);
				return -1;
			}
			s->frames = g;
			cap = ncap;
		}
		for (uint32_t k = 0; k < nf; k++) {
			const pf_frame_info *fi = pf_shard_index_frame(ix, k);
			bl_frame *f = &s->frames[s->nframes++];

			f->file = (uint32_t)i;
			f->fi = *fi;
			s->cbytes += fi->compressed_size;
			s->ubytes += fi->uncompressed_size;
			if (fi->compressed_size > s->max_c)
				s->max_c = fi->compressed_size;
			if (fi->uncompressed_size > s->max_u)
				s->max_u = fi->uncompressed_size;
		}
		pf_source_close(src);
	}
	return 0;
}

typedef struct bl_thread {
	const bl_set *set;
	size_t lo, hi;		/* frames [lo, hi) */
	unsigned depth;
	bool direct;
	const bl_decode *dec;	/* the decode pass's spec and rows */
	uint64_t records, bytes;	/* what the decode pass decoded */
	uint64_t start_ns, end_ns;	/* the decode pass's work, without the
					   memory it frees after */
	pthread_t thread;
	int ret;
	pf_error err;
	const char *backend;
	pthread_barrier_t *start;	/* the clock starts when all are set up */
	bool started;
} bl_thread;

/* Set-up (rings, buffers) is not part of a pass's time: wait here once,
 * after it, or on the way out when it failed. */
static void bl_start(bl_thread *t)
{
	if (!t->started) {
		t->started = true;
		pthread_barrier_wait(t->start);
	}
}

/* The read pass's plan: frames [lo, hi) of the set, each read whole into
 * the buffer of its request slot. */
typedef struct bl_reads {
	bl_thread *t;
	pf_io *io;
	int *file_slot;		/* each file's index in the engine, or -1 */
	uint8_t *bufs;
	size_t bufsz;
	size_t next;		/* the next frame to read */
	size_t *frame;		/* the frame each request slot reads */
} bl_reads;

static int bl_next(void *ctx, unsigned r, pf_io_req *q, pf_error *err)
{
	bl_reads *p = ctx;
	const bl_set *s = p->t->set;
	const bl_frame *f;
	size_t len;

	if (p->next >= p->t->hi)
		return 0;
	f = &s->frames[p->next];
	if (p->file_slot[f->file] < 0) {
		unsigned fl = p->t->direct && s->aligned[f->file] ? PF_IO_DIRECT : 0;
		int ret = pf_io_add_file(p->io, s->paths[f->file], fl, err);

		if (ret < 0)
			return ret;
		p->file_slot[f->file] = ret;
	}
	len = f->fi.compressed_size;
	if (pf_io_file_direct(p->io, (uint32_t)p->file_slot[f->file]))
		len = round_up(len, ALIGN);
	*q = (pf_io_req){
		.file = (uint32_t)p->file_slot[f->file],
		.offset = f->fi.offset,
		.len = (uint32_t)len,
		.buf = p->bufs + (size_t)r * p->bufsz,
		.buf_index = pf_io_buffers_registered(p->io) ? (int)r : -1,
	};
	p->frame[r] = p->next++;
	return 1;
}

static int bl_done(void *ctx, unsigned r, pf_io_req *q, pf_error *err)
{
	bl_reads *p = ctx;
	const bl_set *s = p->t->set;
	const bl_frame *f = &s->frames[p->frame[r]];
	int code;

	if (q->result >= (int64_t)f->fi.compressed_size)
		return 0;
	code = q->result < 0 ? (int)q->result : -EIO;
	pf_error_set(err, code, PF_OFFSET_FILE, f->fi.offset, "read pass: %s",
		     q->result < 0 ? pf_strerror(code) : "short read");
	pf_error_set_file(err, s->paths[f->file]);
	return code;
}

/* Read whole frames through this thread's own I/O engine. */
static void *bl_read_main(void *arg)
{
	bl_thread *t = arg;
	const bl_set *s = t->set;
	size_t bufsz = round_up((size_t)s->max_c + ALIGN, ALIGN);
	/* Whole-frame buffers: keep a deep queue of large frames in bounds. */
	if (t->depth > BL_READ_BYTES / bufsz)
		t->depth = BL_READ_BYTES / bufsz ? (unsigned)(BL_READ_BYTES / bufsz) : 1;
	pf_io_config icfg = { .queue_depth = t->depth, .max_files = 0,
			      .buffer_size = bufsz, .nbuffers = t->depth };
	pf_io_req *reqs = calloc(t->depth, sizeof(*reqs));
	bl_reads p = {
		.t = t, .bufsz = bufsz, .next = t->lo,
		.file_slot = malloc(s->nfiles * sizeof(int)),
		.frame = calloc(t->depth, sizeof(size_t)),
		.bufs = aligned_alloc(ALIGN, bufsz * t->depth),
	};
	pf_io_plan plan = { bl_next, bl_done, &p };
	int ret = -ENOMEM;

	if (!reqs || !p.file_slot || !p.frame || !p.bufs)
		goto out;
	for (size_t i = 0; i < s->nfiles; i++)
		p.file_slot[i] = -1;
	icfg.buffers = p.bufs;
	icfg.max_files = (unsigned)(s->nfiles < 4096 ? 4096 : s->nfiles + 1);
	ret = pf_io_create(&p.io, &icfg, &t->err);
	if (ret < 0)
		goto out;
	t->backend = pf_io_backend_name(p.io);
	bl_start(t);
	ret = pf_io_run(p.io, reqs, t->depth, &plan, &t->err);
out:
	bl_start(t);
	if (ret < 0 && !t->err.code)
		pf_error_set(&t->err, ret, PF_OFFSET_NONE, 0, "read pass: %s",
			     pf_strerror(ret));
	t->ret = ret < 0 ? ret : 0;
	pf_io_free(p.io);
	free(reqs);
	free(p.frame);
	free(p.file_slot);
	free(p.bufs);
	return NULL;
}

/* A thread's reader of frames, in file order: one file open at a time. */
typedef struct bl_reader {
	int fd;
	uint32_t cur;		/* the file open, or UINT32_MAX */
	uint8_t *src;		/* a compressed frame */
	pf_frame_decoder *dec;
} bl_reader;

static int bl_reader_init(bl_reader *rd, const bl_set *s)
{
	rd->fd = -1;
	rd->cur = UINT32_MAX;
	rd->src = malloc(s->max_c ? s->max_c : 1);
	rd->dec = NULL;
	return rd->src && pf_frame_decoder_create(&rd->dec) == 0 ? 0 : -ENOMEM;
}

static void bl_reader_free(bl_reader *rd)
{
	if (rd->fd >= 0)
		close(rd->fd);
	pf_frame_decoder_free(rd->dec);
	free(rd->src);
}

/* pread frame i of the set, check its CRC and decompress it into dst
 * (cap bytes).  @return its length, or <0 with t->err naming the file. */
static int64_t bl_reader_frame(bl_reader *rd, bl_thread *t, size_t i, uint8_t *dst,
			       size_t cap, const char *pass)
{
	const bl_set *s = t->set;
	const bl_frame *f = &s->frames[i];
	int64_t n;

	if (f->file != rd->cur) {
		if (rd->fd >= 0)
			close(rd->fd);
		rd->cur = f->file;
		rd->fd = pf_file_open(s->paths[rd->cur], &t->err);
		if (rd->fd < 0)
			return rd->fd;
	}
	n = pf_file_pread(rd->fd, rd->src, f->fi.compressed_size, f->fi.offset,
			  s->paths[rd->cur], &t->err);
	if (n >= 0 && n < (int64_t)f->fi.compressed_size)
		n = pf_error_set(&t->err, -EIO, PF_OFFSET_FILE, f->fi.offset,
				 "%s pass: short read", pass);
	if (n >= 0)
		n = pf_frame_decode(rd->dec, &f->fi, rd->src, f->fi.compressed_size, dst, cap,
				    &t->err);
	if (n < 0)
		pf_error_set_file(&t->err, s->paths[rd->cur]);
	return n;
}

/* pread each frame, check its CRC and decompress it: the work the loader
 * must do before it can decode a record, and nothing else. */
static void *bl_decompress_main(void *arg)
{
	bl_thread *t = arg;
	const bl_set *s = t->set;
	uint8_t *dst = malloc(s->max_u ? s->max_u : 1);
	bl_reader rd;
	int ret = bl_reader_init(&rd, s);

	if (!dst)
		ret = -ENOMEM;
	bl_start(t);
	for (size_t i = t->lo; i < t->hi && ret == 0; i++) {
		int64_t n = bl_reader_frame(&rd, t, i, dst, s->max_u, "decompress");

		if (n < 0)
			ret = (int)n;
	}
	bl_start(t);
	if (ret < 0 && !t->err.code)
		pf_error_set(&t->err, ret, PF_OFFSET_NONE, 0, "decompress pass: %s",
			     pf_strerror(ret));
	t->ret = ret;
	bl_reader_free(&rd);
	free(dst);
	return NULL;
}

/* The decode pass's frames: the first of the thread's share that fit in
 * BL_DECODE_BYTES (at least one), decompressed beforehand. */
typedef struct bl_mem {
	uint8_t *data;
	size_t *end;		/* frame k's bytes end at data + end[k] */
	size_t n;
	uint64_t max_record;	/* the longest record's length */
} bl_mem;

/* pread, check and decompress frames [lo, hi) of the thread into m,
 * while they fit; find the longest record.  Not timed. */
static int bl_mem_load(bl_thread *t, bl_mem *m)
{
	const bl_set *s = t->set;
	size_t want = 0, k;
	bl_reader rd;
	int ret = bl_reader_init(&rd, s);

	for (k = t->lo; k < t->hi; k++) {
		if (k > t->lo && want + s->frames[k].fi.uncompressed_size > BL_DECODE_BYTES)
			break;
		want += s->frames[k].fi.uncompressed_size;
	}
	m->data = malloc(want ? want : 1);
	m->end = calloc(k - t->lo + 1, sizeof(*m->end));
	if (!m->data || !m->end)
		ret = -ENOMEM;
	for (size_t i = t->lo; i < k && ret == 0; i++) {
		size_t at = m->n ? m->end[m->n - 1] : 0, pos = 0;
		int64_t n = bl_reader_frame(&rd, t, i, m->data + at, want - at, "decode");

		/* The longest record, for the arena (the loader's, from the
		 * dataset's index, is at least as large). */
		while (n >= 0 && pos < (size_t)n) {
			pf_record rec;
			int64_t r = pf_tfr_parse_verified(m->data + at + pos, (size_t)n - pos,
							  pos, PF_MAX_RECORD_DEFAULT, &rec,
							  &t->err);

			if (r <= 0) {
				n = r < 0 ? r : pf_tfr_truncation(m->data + at + pos,
								   (size_t)n - pos, pos,
								   PF_MAX_RECORD_DEFAULT,
								   &t->err);
				pf_error_set_file(&t->err, s->paths[s->frames[i].file]);
				break;
			}
			if (rec.len > m->max_record)
				m->max_record = rec.len;
			pos += (size_t)r;
		}
		if (n < 0) {
			ret = (int)n;
			break;
		}
		m->end[m->n++] = at + (size_t)n;
		t->bytes += (uint64_t)n;
	}
	bl_reader_free(&rd);
	return ret;
}

/* Decode the frames in memory, every record into the next row of a ring
 * of batches (BL_DECODE_ROWS of rows: beyond the caches, as the loader's
 * slots are), a store fence after each frame: the loader's work on a
 * frame once it is decompressed, without its I/O and scheduling. */
static void *bl_decode_main(void *arg)
{
	bl_thread *t = arg;
	const bl_decode *d = t->dec;
	const pf_spec *spec = d->spec;
	uint8_t *tensor[PF_SPEC_MAX_FEATURES] = { 0 }, *dst[PF_SPEC_MAX_FEATURES];
	size_t row[PF_SPEC_MAX_FEATURES], row_bytes = 0, rows;
	pf_arena arena = { 0 };
	bl_mem m = { 0 };
	uint64_t r = 0;
	int ret = bl_mem_load(t, &m);

	for (uint32_t f = 0; f < spec->n; f++) {
		row[f] = (size_t)spec->f[f].len * pf_dtype_size(spec->f[f].dtype);
		row_bytes += row[f];
	}
	/* Whole batches, or at least a row of very long rows. */
	rows = BL_DECODE_ROWS / (row_bytes ? row_bytes : 1);
	if (rows >= d->batch)
		rows = rows / d->batch * d->batch;
	if (!rows)
		rows = 1;
	for (uint32_t f = 0; f < spec->n && ret == 0; f++) {
		tensor[f] = aligned_alloc(64, (rows * row[f] + 63) & ~(size_t)63);
		if (!tensor[f])
			ret = -ENOMEM;
		else
			memset(tensor[f], 0, rows * row[f]);	/* fault the pages in */
	}
	if (ret == 0)
		ret = pf_arena_init(&arena, PF_ARENA_BYTES_FOR(m.max_record));
	bl_start(t);
	t->start_ns = pf_now_ns();
	for (size_t k = 0; k < m.n && ret == 0; k++) {
		size_t start = k ? m.end[k - 1] : 0, pos = start;

		while (pos < m.end[k]) {
			pf_record rec;
			int64_t n = d->verify
				? pf_tfr_parse(m.data + pos, m.end[k] - pos, pos - start,
					       PF_MAX_RECORD_DEFAULT, &rec, &t->err)
				: pf_tfr_parse_verified(m.data + pos, m.end[k] - pos, pos - start,
							PF_MAX_RECORD_DEFAULT, &rec, &t->err);

			if (n <= 0) {	/* read whole in bl_mem_load() */
				ret = n < 0 ? (int)n : -EBADMSG;
				break;
			}
			for (uint32_t f = 0; f < spec->n; f++)
				dst[f] = tensor[f] + (r % rows) * row[f];
			ret = pf_spec_decode_unfenced(spec, rec.data, (size_t)rec.len, &arena,
						      dst, &t->err);
			if (ret < 0)
				break;
			pos += (size_t)n;
			r++;
		}
		pf_spec_fence();
		/* (Offsets in a frame's decompressed bytes.) */
		if (ret < 0)
			pf_error_set_file(&t->err, t->set->paths[t->set->frames[t->lo + k].file]);
	}
	t->records = r;
	t->end_ns = pf_now_ns();	/* 128 MiB given back is not the pass's */
	bl_start(t);
	if (ret < 0 && !t->err.code)
		pf_error_set(&t->err, ret, PF_OFFSET_NONE, 0, "decode pass: %s",
			     pf_strerror(ret));
	t->ret = ret < 0 ? ret : 0;
	pf_arena_release(&arena);
	for (uint32_t f = 0; f < spec->n; f++)
		free(tensor[f]);
	free(m.data);
	free(m.end);
	return NULL;
}

/* Run T threads over contiguous frame ranges of equal compressed bytes.
 * @return 0 with the wall seconds in *seconds, or 1 after printing. */
static int pass(const bl_set *s, unsigned nthreads, unsigned depth,
		   bool direct, bl_decode *dec, void *(*fn)(void *), double *seconds,
		   const char **backend)
{
	bl_thread *t = calloc(nthreads, sizeof(*t));
	pthread_barrier_t start;
	uint64_t acc = 0, t0, t1;
	size_t k = 0;
	int ret = 0;

	if (!t || pthread_barrier_init(&start, NULL, nthreads + 1)) {
		cli_fail("out of memory");
		free(t);
		return 1;
	}
	for (unsigned i = 0; i < nthreads; i++) {
		uint64_t goal = s->cbytes * (i + 1) / nthreads;

		t[i].set = s;
		t[i].depth = depth;
		t[i].direct = direct;
		t[i].dec = dec;
		t[i].lo = k;
		while (k < s->nframes && (acc < goal || i + 1 == nthreads))
			acc += s->frames[k++].fi.compressed_size;
		t[i].hi = k;
		t[i].start = &start;
		pf_error_clear(&t[i].err);
	}
	for (unsigned i = 0; i < nthreads; i++) {
		if (pthread_create(&t[i].thread, NULL, fn, &t[i])) {
			/* The others wait at the barrier for it: nothing to undo. */
			cli_fail("cannot start a baseline thread");
			exit(1);
		}
	}
	pthread_barrier_wait(&start);
	t0 = pf_now_ns();
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(t[i].thread, NULL);
	t1 = pf_now_ns();
	if (dec) {	/* from the first start to the last end */
		t0 = UINT64_MAX;
		t1 = 0;
		for (unsigned i = 0; i < nthreads; i++) {
			t0 = t[i].start_ns < t0 ? t[i].start_ns : t0;
			t1 = t[i].end_ns > t1 ? t[i].end_ns : t1;
		}
	}
	*seconds = (double)(t1 - t0) * 1e-9;
	pthread_barrier_destroy(&start);
	for (unsigned i = 0; i < nthreads && !ret; i++) {
		if (t[i].ret < 0) {
			cli_print_error(&t[i].err);
			ret = 1;
		}
		if (backend && t[i].backend)
			*backend = t[i].backend;
	}
	if (dec) {
		dec->records = dec->bytes = 0;
		for (unsigned i = 0; i < nthreads; i++) {
			dec->records += t[i].records;
			dec->bytes += t[i].bytes;
		}
	}
	free(t);
	return ret;
}

int baseline_read(const bl_set *s, unsigned threads, unsigned depth, bool direct,
		  double *seconds, const char **backend)
{
	return pass(s, threads, depth, direct, NULL, bl_read_main, seconds, backend);
}

int baseline_decompress(const bl_set *s, unsigned threads, double *seconds)
{
	return pass(s, threads, 0, false, NULL, bl_decompress_main, seconds, NULL);
}

int baseline_decode(const bl_set *s, unsigned threads, bl_decode *d, double *seconds)
{
	return pass(s, threads, 0, false, d, bl_decode_main, seconds, NULL);
}
