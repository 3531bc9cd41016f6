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
#define MAX_DROPS 4096

/* What the walker reports, in order, for the reader to be held to. */
struct expect {
	const uint8_t *data;
	size_t size;
	bool check;
	size_t nrec, ndrop, rec_at, drop_at;
	pf_record *recs;
	pf_drop *drops;
};

static int on_drop(void *ctx, const pf_drop *d)
{
	struct expect *e = ctx;
	const pf_drop *w;

	if (e->drop_at >= e->ndrop || e->drop_at >= MAX_DROPS)
		abort();
	w = &e->drops[e->drop_at++];
	if (d->unit != w->unit || d->start != w->start || d->resume != w->resume ||
	    d->offset_kind != PF_OFFSET_STREAM || d->records != w->records ||
	    d->cause.code != w->cause.code || d->cause.offset != w->cause.offset ||
	    strcmp(d->cause.msg, w->cause.msg) || d->next_record != e->rec_at ||
	    d->start >= d->resume || d->cause.code >= 0)
		abort();
	return 0;
}

/* Every record given in skip mode is a whole record at its offset in
 * data, with its length CRC (and data CRC when checked) holding. */
static void check_real(const struct expect *e, const pf_record *rec)
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

static void skip_mode(const uint8_t *data, size_t size, size_t piece, bool check,
		      const uint64_t *fail_off, uint64_t fail_count, bool clean)
{
	struct expect e = { .data = data, .size = size, .check = check };
	pf_tfr_config cfg = { .max_record_size = MAX_RECORD, .skip_data_crc = !check,
			      .on_corrupt = PF_CORRUPT_SKIP, .on_drop = on_drop, .on_drop_ctx = &e };
	pf_tfr_reader *r;
	pf_record rec;
	pf_drop d;
	pf_error err;
	size_t pos = 0, at = 0;
	uint64_t drops;
	int ret;

	/* The walker's view first. */
	e.recs = malloc((size / 16 + 1) * sizeof(*e.recs));
	e.drops = malloc(MAX_DROPS * sizeof(*e.drops));
	if (!e.recs || !e.drops)
		abort();
	while ((ret = pf_tfr_next_intact(data, size, &at, 0, MAX_RECORD, check, &rec, &d)) > 0) {
		if (ret == 1)
			e.recs[e.nrec++] = rec;
		else if (e.ndrop < MAX_DROPS && d.resume == at)
			e.drops[e.ndrop++] = d;
		else
			abort();
		if (e.nrec > size / 16)
			abort();
	}
	if (pf_tfr_count_intact(data, size, MAX_RECORD, check, &drops) != e.nrec ||
	    drops != e.ndrop)
		abort();
	/* A stream fail mode reads cleanly: the same records, no drop. */
	if (clean && (e.ndrop || e.nrec != fail_count))
		abort();

	/* The reader, in pieces. */
	if (pf_tfr_reader_create(&r, &cfg) < 0)
		abort();
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
			const pf_record *w = &e.recs[e.rec_at];

			if (e.rec_at >= e.nrec || rec.index != e.rec_at || rec.offset != w->offset ||
			    rec.len != w->len || memcmp(rec.data, w->data, rec.len))
				abort();
			check_real(&e, &rec);
			/* Before the first drop, what fail mode gave. */
			if (e.drop_at == 0 && check &&
			    (e.rec_at >= fail_count || fail_off[e.rec_at] != rec.offset))
				abort();
			e.rec_at++;
		}
		if (ret != 0)
			abort();
	}
	if (pf_tfr_reader_finish(r, &err) != 0 || e.rec_at != e.nrec || e.drop_at != e.ndrop ||
	    pf_tfr_reader_drops(r) != e.ndrop)
		abort();
	pf_tfr_reader_free(r);
	free(e.recs);
	free(e.drops);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pf_tfr_config cfg = { .max_record_size = MAX_RECORD };
	pf_tfr_reader *r;
	pf_error err, err1;
	pf_record rec, ref;
	size_t piece, pos = 0, off = 0;
	int ret = 0, ref_ret = 0;
	uint64_t count = 0, *offs;
	bool check;

	if (size < 1)
		return 0;
	piece = (size_t)data[0] % 32 + 1;
	check = !(data[0] & 0x80);
	data++;
	size--;
	offs = malloc((size / 16 + 1) * sizeof(*offs));
	if (!offs || pf_tfr_reader_create(&r, &cfg) < 0)
		abort();
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
	pf_tfr_reader_free(r);

	skip_mode(data, size, piece, check, offs, count, ret == 0);
	free(offs);
	return 0;
}
