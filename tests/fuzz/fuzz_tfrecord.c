/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz TFRecord framing: the incremental reader, fed in pieces whose size
 * comes from the input, must agree exactly with one-shot parsing.  In skip
 * mode it must agree exactly with the one-shot frame walker
 * (pf_tfr_next_intact) and pf_tfr_count_intact: the same records and the
 * same drops; each record it gives is one a clean parse at its offset
 * gives too; and up to its first drop it gives what fail mode gives. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pf_formats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORD (1u << 16)

/*
 * Cheap per input (issue 30: it had fallen to 11 executions a second):
 * the walker runs in step with the reader instead of ahead of it into
 * arrays (4096 pf_drops of 13 KB each, 54 MB, were allocated and
 * poisoned for every input), and the readers are created once and reset.
 */

/* The walker's state: each record or drop the reader gives is checked
 * against the walker's next item, taken from it right then. */
struct walk {
	const uint8_t *data;
	size_t size, at;
	bool check;
	uint64_t nrec, ndrop;	/* the walker's items so far, of each kind */
	uint64_t rec_at;	/* records the reader gave */
	const uint64_t *fail_off;
	uint64_t fail_count;
	pf_record rec;
	pf_drop drop;
};

static struct walk w;

/* The walker's next item: 1 a record (w->rec), 2 a drop (w->drop), 0 none. */
static int walk_next(struct walk *e)
{
	int ret = pf_tfr_next_intact(e->data, e->size, &e->at, 0, MAX_RECORD, e->check,
				     &e->rec, &e->drop);

	if (ret == 1)
		e->nrec++;
	else if (ret == 2 && e->drop.resume == e->at)
		e->ndrop++;
	else if (ret != 0)
		abort();
	if (e->nrec > e->size / 16)
		abort();
	return ret;
}

static int on_drop(void *ctx, const pf_drop *d)
{
	struct walk *e = ctx;
	const pf_drop *x = &e->drop;

	if (walk_next(e) != 2)
		abort();
	if (d->unit != x->unit || d->start != x->start || d->resume != x->resume ||
	    d->offset_kind != PF_OFFSET_STREAM || d->records != x->records ||
	    d->cause.code != x->cause.code || d->cause.offset != x->cause.offset ||
	    strcmp(d->cause.msg, x->cause.msg) || d->next_record != e->rec_at ||
	    d->start >= d->resume || d->cause.code >= 0)
		abort();
	return 0;
}

/* Every record given in skip mode is a whole record at its offset in
 * data, with its length CRC (and data CRC when checked) holding. */
static void check_real(const struct walk *e, const pf_record *rec)
{
	pf_error err;
	pf_record ref;
	int64_t c = e->check ? pf_tfr_parse(e->data + rec->offset, e->size - rec->offset,
					    rec->offset, MAX_RECORD, &ref, &err)
			     : pf_tfr_parse_verified(e->data + rec->offset,
						     e->size - rec->offset, rec->offset,
						     MAX_RECORD, &ref, &err);

	if (c <= 0 || ref.len != rec->len || memcmp(ref.data, rec->data, rec->len))
		abort();
}

/* A reader of each kind, made once: fail mode, and skip mode with and
 * without the data CRC. */
static pf_tfr_reader *reader(int kind)
{
	static pf_tfr_reader *r[3];

	if (!r[kind]) {
		pf_tfr_config cfg = { .max_record_size = MAX_RECORD };

		if (kind) {
			cfg.on_corrupt = PF_CORRUPT_SKIP;
			cfg.skip_data_crc = kind == 2;
			cfg.on_drop = on_drop;
			cfg.on_drop_ctx = &w;
		}
		if (pf_tfr_reader_create(&r[kind], &cfg) < 0)
			abort();
	}
	pf_tfr_reader_reset(r[kind], 0, 0);
	return r[kind];
}

static void skip_mode(const uint8_t *data, size_t size, size_t piece, bool check,
		      const uint64_t *fail_off, uint64_t fail_count, bool clean)
{
	pf_tfr_reader *r = reader(check ? 1 : 2);
	pf_record rec;
	pf_error err;
	size_t pos = 0;
	uint64_t drops;
	int ret;

	w.data = data;
	w.size = size;
	w.at = 0;
	w.check = check;
	w.nrec = w.ndrop = w.rec_at = 0;
	w.fail_off = fail_off;
	w.fail_count = fail_count;
	/* The reader, in pieces, against the walker as it goes. */
	for (int last = 0; !last;) {
		size_t n = size - pos < piece ? size - pos : piece;

		if (n) {
			pf_tfr_reader_feed(r, data + pos, n);
			pos += n;
		}
		if (pos == size) {
			pf_tfr_reader_end(r);
			last = 1;
		}
		while ((ret = pf_tfr_reader_next(r, &rec, &err)) == 1) {
			if (walk_next(&w) != 1 || rec.index != w.rec_at ||
			    rec.offset != w.rec.offset || rec.len != w.rec.len ||
			    memcmp(rec.data, w.rec.data, rec.len))
				abort();
			check_real(&w, &rec);
			/* Before the first drop, what fail mode gave. */
			if (w.ndrop == 0 && check &&
			    (w.rec_at >= fail_count || fail_off[w.rec_at] != rec.offset))
				abort();
			w.rec_at++;
		}
		if (ret != 0)
			abort();
	}
	/* The walker has nothing more, and the counter agrees with it. */
	if (pf_tfr_reader_finish(r, &err) != 0 || walk_next(&w) != 0 || w.rec_at != w.nrec ||
	    pf_tfr_reader_drops(r) != w.ndrop)
		abort();
	if (pf_tfr_count_intact(data, size, MAX_RECORD, check, &drops) != w.nrec ||
	    drops != w.ndrop)
		abort();
	/* A stream fail mode reads cleanly: the same records, no drop. */
	if (clean && (w.ndrop || w.nrec != fail_count))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint64_t *offs;
	static size_t offs_cap;
	pf_tfr_reader *r;
	pf_error err, err1;
	pf_record rec, ref;
	size_t piece, pos = 0, off = 0;
	int ret = 0, ref_ret = 0;
	uint64_t count = 0;
	bool check;

	if (size < 1)
		return 0;
	piece = (size_t)data[0] % 32 + 1;
	check = !(data[0] & 0x80);
	data++;
	size--;
	if (size / 16 + 1 > offs_cap) {
		offs_cap = size / 16 + 1;
		free(offs);
		offs = malloc(offs_cap * sizeof(*offs));
		if (!offs)
			abort();
	}
	r = reader(0);
	pf_error_clear(&err);
	pf_error_clear(&err1);
	while (pos < size && ret >= 0) {
		size_t n = size - pos < piece ? size - pos : piece;

		pf_tfr_reader_feed(r, data + pos, n);
		pos += n;
		while ((ret = pf_tfr_reader_next(r, &rec, &err)) == 1) {
			/* The same record, one-shot, at the same offset. */
			int64_t c = pf_tfr_parse(data + off, size - off, off,
						 MAX_RECORD, &ref, &err1);
			if (c <= 0 || ref.len != rec.len || ref.offset != rec.offset ||
			    rec.index != count || memcmp(ref.data, rec.data, rec.len))
				abort();
			off += (size_t)c;
			offs[count++] = rec.offset;
		}
	}
	if (ret >= 0)
		ret = pf_tfr_reader_finish(r, &err);
	/* One-shot parsing must fail (or end) exactly where the reader did. */
	if (ret < 0) {
		int64_t c = pf_tfr_parse(data + off, size - off, off, MAX_RECORD, &ref, &err1);
		if (c == 0)
			ref_ret = pf_tfr_truncation(data + off, size - off, off,
						    MAX_RECORD, &err1);
		else
			ref_ret = (int)c;
		if (ref_ret != ret || err1.offset != err.offset)
			abort();
	} else if (off != size) {
		abort();
	}

	skip_mode(data, size, piece, check, offs, count, ret == 0);
	return 0;
}
