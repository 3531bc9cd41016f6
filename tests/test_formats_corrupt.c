/* SPDX-License-Identifier: Apache-2.0 */
/* Corrupt data in skip mode: damage at many offsets (bit flips,
 * truncations, inserted garbage, zeroed ranges) in plain TFRecord, gzip
 * members, zstd frames and indexed shards.  Never a crash or a hang; every
 * record outside the damaged unit comes out exactly once and in order; the
 * drops name the right offsets; the same damage read twice gives the same
 * records with the same numbers; fail mode keeps its errors. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "pf_formats.h"
#include "podfeed.h"
#include "testutil.h"

/* An assertion for loops (the runner's --full-stats counts every
 * cr_assert, which costs seconds per million). */
#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond))                                                 \
			cr_assert_fail(__VA_ARGS__);                         \
	} while (0)

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ------------------------------------------------------------------ */
/* Records with ids: tf.train.Examples {id: int64, pad: random bytes}   */

#define NREC 240
#define MAX_PAYLOAD 4096

static uint8_t *payload[NREC];
static size_t plen[NREC];
static pf_arena arena;

static void make_records(uint64_t seed)
{
	uint8_t pad[1400];

	for (int i = 0; i < NREC; i++) {
		int64_t id = i;
		size_t padlen = (size_t)(rng_next(&seed) % sizeof(pad));
		pf_bytes b = { pad, (uint32_t)padlen };
		pf_feature f[2] = {
			{ .name = "id", .name_len = 2, .kind = PF_KIND_INT64, .count = 1,
			  .v.int64s = &id },
			{ .name = "pad", .name_len = 3, .kind = PF_KIND_BYTES, .count = 1,
			  .v.bytes = &b },
		};
		int64_t n;

		for (size_t k = 0; k < padlen; k++)
			pad[k] = (uint8_t)rng_next(&seed);
		payload[i] = malloc(MAX_PAYLOAD);
		n = pf_example_encode(f, 2, payload[i], MAX_PAYLOAD);
		cr_assert_gt(n, 0);
		plen[i] = (size_t)n;
	}
	if (!arena.base)
		cr_assert_eq(pf_arena_init(&arena, PF_ARENA_BYTES_FOR(MAX_PAYLOAD)), 0);
}

/* The id of a delivered record, or -1 unless it is exactly that record. */
static int64_t identify(const pf_record *rec)
{
	pf_example ex;
	pf_error err;
	const pf_feature *f;
	int64_t id;

	pf_arena_reset(&arena);
	if (rec->len > MAX_PAYLOAD ||
	    pf_example_decode(rec->data, rec->len, &arena, &ex, &err) < 0)
		return -1;
	f = pf_example_find(&ex, "id");
	if (!f || f->kind != PF_KIND_INT64 || f->count != 1)
		return -1;
	id = f->v.int64s[0];
	if (id < 0 || id >= NREC || plen[id] != rec->len ||
	    memcmp(payload[id], rec->data, rec->len))
		return -1;
	return id;
}

/* ------------------------------------------------------------------ */
/* File images and their units                                          */

/* A unit: file bytes [start, end) that are dropped or kept together
 * (a record, gzip member, zstd frame), holding records [first, first+n). */
typedef struct unit {
	uint64_t start, end;
	int first, n;
} unit;

typedef struct image {
	uint8_t *data;
	size_t len, cap;
	unit units[NREC + 8];
	int nunits;
	pf_compression comp;
	bool indexed;
} image;

static void img_put(image *img, const void *p, size_t n)
{
	if (img->len + n > img->cap) {
		img->cap = (img->len + n) * 2 + 4096;
		img->data = realloc(img->data, img->cap);
		cr_assert_not_null(img->data);
	}
	memcpy(img->data + img->len, p, n);
	img->len += n;
}

static size_t framed(int first, int n, uint8_t *dst, size_t cap)
{
	size_t len = 0;

	for (int i = first; i < first + n; i++) {
		size_t w = pf_tfr_encode(dst + len, cap - len, payload[i], plen[i]);

		cr_assert_gt(w, 0);
		len += w;
	}
	return len;
}

static void add_unit(image *img, uint64_t start, int first, int n)
{
	cr_assert_lt(img->nunits, NREC + 8);
	img->units[img->nunits++] = (unit){ start, img->len, first, n };
}

static void build_plain(image *img)
{
	uint8_t buf[MAX_PAYLOAD + 16];

	memset(img, 0, sizeof(*img));
	img->comp = PF_COMP_NONE;
	for (int i = 0; i < NREC; i++) {
		uint64_t start = img->len;

		img_put(img, buf, framed(i, 1, buf, sizeof(buf)));
		add_unit(img, start, i, 1);
	}
}

/* gzip: a member per `per` records (as concatenated .gz files are). */
static void build_gzip(image *img, int per)
{
	size_t cap = (size_t)per * (MAX_PAYLOAD + 16);
	uint8_t *raw = malloc(cap), *out = malloc(compressBound(cap) + 64);

	memset(img, 0, sizeof(*img));
	img->comp = PF_COMP_GZIP;
	for (int i = 0; i < NREC; i += per) {
		int n = NREC - i < per ? NREC - i : per;
		size_t rl = framed(i, n, raw, cap);
		z_stream z = { 0 };
		uint64_t start = img->len;

		cr_assert_eq(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8,
					  Z_DEFAULT_STRATEGY), Z_OK);
		z.next_in = raw;
		z.avail_in = (uInt)rl;
		z.next_out = out;
		z.avail_out = (uInt)(compressBound(cap) + 64);
		cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
		img_put(img, out, z.total_out);
		deflateEnd(&z);
		add_unit(img, start, i, n);
	}
	free(raw);
	free(out);
}

/* zstd: a frame (content size and checksum, as the zstd CLI writes) per
 * `per` records, with a skippable frame after every third. */
static void build_zstd(image *img, int per, uint64_t seed)
{
	size_t cap = (size_t)per * (MAX_PAYLOAD + 16);
	uint8_t *raw = malloc(cap), *out = malloc(ZSTD_compressBound(cap));
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	int f = 0;

	memset(img, 0, sizeof(*img));
	img->comp = PF_COMP_ZSTD;
	ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 3);
	for (int i = 0; i < NREC; i += per, f++) {
		int n = NREC - i < per ? NREC - i : per;
		size_t rl = framed(i, n, raw, cap);
		size_t cl = ZSTD_compress2(cc, out, ZSTD_compressBound(cap), raw, rl);
		uint64_t start = img->len;

		cr_assert(!ZSTD_isError(cl));
		img_put(img, out, cl);
		add_unit(img, start, i, n);
		if (f % 3 == 2) {
			uint8_t skip[8 + 40];
			uint32_t size = (uint32_t)(rng_next(&seed) % 40);

			skip[0] = 0x50 + (uint8_t)(f % 16);
			skip[1] = 0x2a;
			skip[2] = 0x4d;
			skip[3] = 0x18;
			memcpy(skip + 4, &size, 4);
			for (uint32_t k = 0; k < size; k++)
				skip[8 + k] = (uint8_t)rng_next(&seed);
			img_put(img, skip, 8 + size);
		}
	}
	ZSTD_freeCCtx(cc);
	free(raw);
	free(out);
}

static int img_sink(void *ctx, const void *buf, size_t len)
{
	img_put(ctx, buf, len);
	return 0;
}

/* An indexed shard of small frames; its units are the zstd frames. */
static void build_shard(image *img, size_t frame_size, uint32_t align)
{
	pf_shard_writer_config cfg = { .frame_size = frame_size, .align = align };
	pf_shard_writer *w;
	pf_shard_index *ix;
	pf_error err;

	memset(img, 0, sizeof(*img));
	img->comp = PF_COMP_ZSTD;
	img->indexed = true;
	cr_assert_eq(pf_shard_writer_create(&w, &cfg, img_sink, img), 0);
	for (int i = 0; i < NREC; i++)
		cr_assert_eq(pf_shard_writer_add(w, payload[i], plen[i], &err), 0);
	cr_assert_eq(pf_shard_writer_close(w, &err), 0);
	pf_shard_writer_free(w);
	cr_assert_eq(pf_shard_index_parse(&ix, img->data, img->len, img->len, &err), 0,
		     "%s", err.msg);
	for (uint32_t f = 0; f < pf_shard_index_frames(ix); f++) {
		const pf_frame_info *fi = pf_shard_index_frame(ix, f);

		img->units[img->nunits++] = (unit){ fi->offset, fi->offset + fi->compressed_size,
						    (int)fi->first_record, (int)fi->records };
	}
	cr_assert_gt(img->nunits, 8);
	pf_shard_index_free(ix);
}

/* ------------------------------------------------------------------ */
/* Damage                                                               */

typedef enum { DMG_FLIP, DMG_TRUNC, DMG_INSERT, DMG_ZERO } dmg_kind;

typedef struct damage {
	dmg_kind kind;
	uint64_t at, len;	/* len: ZERO's bytes, INSERT's garbage */
	int bit;
} damage;

static const char *dmg_name(const damage *d)
{
	static char s[96];
	static const char *k[] = { "flip", "trunc", "insert", "zero" };

	snprintf(s, sizeof(s), "%s at %llu (len %llu, bit %d)", k[d->kind],
		 (unsigned long long)d->at, (unsigned long long)d->len, d->bit);
	return s;
}

static uint8_t *apply(const image *img, const damage *d, size_t *out_len)
{
	uint8_t *p = malloc(img->len + d->len + 1);
	uint64_t seed = d->at * 31 + d->len;

	memcpy(p, img->data, img->len);
	*out_len = img->len;
	switch (d->kind) {
	case DMG_FLIP:
		p[d->at] ^= (uint8_t)(1u << d->bit);
		break;
	case DMG_TRUNC:
		*out_len = d->at;
		break;
	case DMG_INSERT:
		memmove(p + d->at + d->len, p + d->at, img->len - d->at);
		for (uint64_t k = 0; k < d->len; k++)
			p[d->at + k] = (uint8_t)rng_next(&seed);
		*out_len = img->len + d->len;
		break;
	case DMG_ZERO:
		memset(p + d->at, 0, d->len);
		break;
	}
	return p;
}

/* Is unit u untouched by d? */
static bool unit_clean(const unit *u, const damage *d)
{
	switch (d->kind) {
	case DMG_FLIP:
		return u->end <= d->at || u->start > d->at;
	case DMG_TRUNC:
		return u->end <= d->at;
	case DMG_INSERT:
		return !(u->start < d->at && d->at < u->end);
	case DMG_ZERO:
		return u->end <= d->at || u->start >= d->at + d->len;
	}
	return false;
}

/* The unit holding byte at, or -1 (between units, e.g. padding). */
static int unit_of(const image *img, uint64_t at)
{
	for (int i = 0; i < img->nunits; i++)
		if (img->units[i].start <= at && at < img->units[i].end)
			return i;
	return -1;
}

/* A deterministic list of damages over an image: around every unit's
 * start and end, and at random offsets. */
static size_t make_damages(const image *img, damage *out, size_t cap, uint64_t seed,
			   bool only_in_units)
{
	size_t n = 0;
	uint64_t len = img->len;
	int stride = img->nunits > 40 ? img->nunits / 40 : 1;

#define ADD(...)                                                            \
	do {                                                                 \
		if (n < cap)                                                 \
			out[n++] = (damage){ __VA_ARGS__ };                  \
	} while (0)
	for (int i = 0; i < img->nunits; i += stride) {
		const unit *u = &img->units[i];
		uint64_t mid = (u->start + u->end) / 2;

		ADD(DMG_FLIP, u->start, 0, 0);
		ADD(DMG_FLIP, u->start + 4, 0, 3);
		ADD(DMG_FLIP, u->start + 9, 0, 6);
		ADD(DMG_FLIP, u->start + 13, 0, 1);
		ADD(DMG_FLIP, mid, 0, 5);
		ADD(DMG_FLIP, u->end - 1, 0, 7);
		ADD(DMG_FLIP, u->end - 5, 0, 2);
		ADD(DMG_ZERO, u->start, u->end - u->start, 0);
		ADD(DMG_ZERO, mid, 64, 0);
		if (!only_in_units) {
			ADD(DMG_TRUNC, u->start, 0, 0);
			ADD(DMG_TRUNC, mid, 0, 0);
			ADD(DMG_TRUNC, u->end - 3, 0, 0);
			ADD(DMG_INSERT, u->start, 1 + i % 40, 0);
			ADD(DMG_INSERT, mid, 7, 0);
			ADD(DMG_INSERT, u->start + 3, 100, 0);
		}
	}
	for (int k = 0; k < 60; k++) {
		uint64_t at = rng_next(&seed) % len;

		if (only_in_units && unit_of(img, at) < 0)
			continue;
		ADD(DMG_FLIP, at, 0, (int)(rng_next(&seed) % 8));
		if (only_in_units)
			continue;
		if (k % 3 == 0)
			ADD(DMG_TRUNC, at, 0, 0);
		if (k % 3 == 1)
			ADD(DMG_INSERT, at, 1 + rng_next(&seed) % 300, 0);
	}
	if (!only_in_units) {
		ADD(DMG_INSERT, len, 20, 0);
		ADD(DMG_TRUNC, 1, 0, 0);
		ADD(DMG_INSERT, 0, 1, 0);
		ADD(DMG_INSERT, 0, 333, 0);
	}
	ADD(DMG_ZERO, 0, 4096 < len ? 4096 : len, 0);
#undef ADD
	return n;
}

/* ------------------------------------------------------------------ */
/* Reading                                                              */

#define MAX_DROPS 64

typedef struct result {
	int ret;
	pf_error err;
	int nrec;
	int64_t ids[2 * NREC];
	uint64_t index[2 * NREC];
	int unknown;			/* records that are no original */
	int ndrop;
	pf_drop drops[MAX_DROPS];
	int stop_at;			/* on_drop returns -ECANCELED at this drop (1-based) */
} result;

static int collect(void *ctx, const pf_drop *d)
{
	result *r = ctx;

	if (r->ndrop < MAX_DROPS)
		r->drops[r->ndrop] = *d;
	r->ndrop++;
	return r->stop_at && r->ndrop == r->stop_at ? -ECANCELED : 0;
}

static void take(result *r, const pf_record *rec)
{
	int64_t id = identify(rec);

	if (id < 0) {
		r->unknown++;
		return;
	}
	CHECK(r->nrec < 2 * NREC, "too many records");
	r->ids[r->nrec] = id;
	r->index[r->nrec] = rec->index;
	r->nrec++;
}

static void reset_result(result *r)
{
	int stop = r->stop_at;

	memset(r, 0, sizeof(*r) - sizeof(r->drops) - sizeof(r->stop_at));
	r->ndrop = 0;
	r->stop_at = stop;
	pf_error_clear(&r->err);
}

static void read_stream(const uint8_t *file, size_t len, size_t piece,
			pf_corrupt_policy pol, result *r)
{
	pf_recstream_config cfg = { .window = 5000, .on_corrupt = pol, .on_drop = collect,
				    .on_drop_ctx = r };
	pf_recstream *s;
	pf_record rec;
	size_t pos = 0;
	int ret;

	reset_result(r);
	cr_assert_eq(pf_recstream_create(&s, &cfg), 0);
	for (;;) {
		size_t n = len - pos < piece ? len - pos : piece;

		pf_recstream_feed(s, file + pos, n);
		pos += n;
		while ((ret = pf_recstream_next(s, &rec, &r->err)) == 1)
			take(r, &rec);
		if (ret < 0 || n == 0)
			break;
	}
	if (ret == 0)
		ret = pf_recstream_finish(s, &r->err);
	r->ret = ret;
	if (pol == PF_CORRUPT_SKIP && ret == 0)
		CHECK(pf_recstream_drops(s) == (uint64_t)r->ndrop, "drop count");
	pf_recstream_free(s);
}

static void read_source(const char *path, bool ignore_index, size_t read_size,
			pf_corrupt_policy pol, result *r)
{
	pf_source_config cfg = { .read_size = read_size, .ignore_index = ignore_index,
				 .on_corrupt = pol, .on_drop = collect, .on_drop_ctx = r };
	pf_source *src;
	pf_record rec;
	int ret;

	reset_result(r);
	ret = pf_source_open(&src, path, &cfg, &r->err);
	if (ret < 0) {
		r->ret = ret;
		return;
	}
	while ((ret = pf_source_next(src, &rec, &r->err)) == 1)
		take(r, &rec);
	r->ret = ret;
	if (pol == PF_CORRUPT_SKIP && ret == 0)
		CHECK(pf_source_drops(src) == (uint64_t)r->ndrop, "drop count");
	pf_source_close(src);
}

static bool same_result(const result *a, const result *b)
{
	if (a->ret != b->ret || a->nrec != b->nrec || a->ndrop != b->ndrop ||
	    a->unknown != b->unknown)
		return false;
	for (int i = 0; i < a->nrec; i++)
		if (a->ids[i] != b->ids[i] || a->index[i] != b->index[i])
			return false;
	for (int i = 0; i < a->ndrop && i < MAX_DROPS; i++) {
		const pf_drop *x = &a->drops[i], *y = &b->drops[i];

		if (x->unit != y->unit || x->start != y->start || x->resume != y->resume ||
		    x->next_record != y->next_record || x->cause.code != y->cause.code ||
		    x->cause.offset != y->cause.offset || strcmp(x->cause.msg, y->cause.msg))
			return false;
	}
	return true;
}

/* ------------------------------------------------------------------ */
/* What skip mode must give                                             */

/* Records in order, each once, numbered consecutively (streams), every
 * record of a clean unit present. */
static void check_records(const image *img, const damage *d, const result *r,
			  bool numbered_by_index, const char *what)
{
	bool seen[NREC] = { false };

	CHECK(r->ret == 0, "%s, %s: skip mode failed: %d %s", what, dmg_name(d), r->ret,
	      r->err.msg);
	CHECK(r->unknown == 0, "%s, %s: %d records that are none of the originals", what,
	      dmg_name(d), r->unknown);
	for (int i = 0; i < r->nrec; i++) {
		CHECK(i == 0 || r->ids[i] > r->ids[i - 1], "%s, %s: record %lld after %lld",
		      what, dmg_name(d), (long long)r->ids[i], (long long)r->ids[i - 1]);
		if (!numbered_by_index)
			CHECK(r->index[i] == (uint64_t)i, "%s, %s: record %d numbered %llu",
			      what, dmg_name(d), i, (unsigned long long)r->index[i]);
		seen[r->ids[i]] = true;
	}
	for (int u = 0; u < img->nunits; u++) {
		if (!unit_clean(&img->units[u], d))
			continue;
		for (int k = 0; k < img->units[u].n; k++)
			CHECK(seen[img->units[u].first + k],
			      "%s, %s: record %d of clean unit %d [%llu, %llu) missing", what,
			      dmg_name(d), img->units[u].first + k, u,
			      (unsigned long long)img->units[u].start,
			      (unsigned long long)img->units[u].end);
	}
	for (int i = 0; i < r->ndrop && i < MAX_DROPS; i++)
		CHECK(r->drops[i].start <= r->drops[i].resume &&
		      r->drops[i].cause.code < 0 && r->drops[i].cause.msg[0],
		      "%s, %s: drop %d [%llu, %llu) code %d", what, dmg_name(d), i,
		      (unsigned long long)r->drops[i].start,
		      (unsigned long long)r->drops[i].resume, r->drops[i].cause.code);
}

/* Plain TFRecord: exactly the damaged records go, in one drop at their
 * bounds. */
static void check_plain_drops(const image *img, const damage *d, const result *r)
{
	int first = -1, last = -1;
	uint64_t start, resume;
	pf_drop_unit unit = PF_DROP_SPAN;

	for (int u = 0; u < img->nunits; u++) {
		if (unit_clean(&img->units[u], d))
			continue;
		if (first < 0)
			first = u;
		last = u;
	}
	if (d->kind == DMG_INSERT && first < 0) {
		/* Garbage between records: it alone goes. */
		CHECK(r->ndrop == 1 && r->drops[0].start == d->at &&
		      r->drops[0].resume == d->at + d->len && r->drops[0].unit == PF_DROP_SPAN,
		      "%s: %d drops, first [%llu, %llu)", dmg_name(d), r->ndrop,
		      (unsigned long long)r->drops[0].start,
		      (unsigned long long)r->drops[0].resume);
		CHECK(r->nrec == NREC, "%s: %d records", dmg_name(d), r->nrec);
		return;
	}
	if (first < 0 || (d->kind == DMG_TRUNC && d->at == img->units[first].start)) {
		/* Undamaged, or cut between records: nothing to drop. */
		CHECK(r->ndrop == 0 && r->nrec == (first < 0 ? NREC : first),
		      "%s: %d drops, %d records", dmg_name(d), r->ndrop, r->nrec);
		return;
	}
	start = img->units[first].start;
	resume = img->units[last].end;
	switch (d->kind) {
	case DMG_TRUNC:
		resume = d->at;
		break;
	case DMG_INSERT:
		resume += d->len;
		break;
	case DMG_FLIP:
		if (d->at >= start + PF_TFR_HEADER_SIZE)
			unit = PF_DROP_RECORD;	/* payload or footer: framing holds */
		break;
	case DMG_ZERO:
		if (first == last && d->at >= start + PF_TFR_HEADER_SIZE)
			unit = PF_DROP_RECORD;
		break;
	}
	CHECK(r->ndrop == 1, "%s: %d drops (want 1, records %d..%d)", dmg_name(d), r->ndrop,
	      first, last);
	CHECK(r->drops[0].start == start && r->drops[0].resume == resume &&
	      r->drops[0].unit == unit,
	      "%s: drop %s [%llu, %llu), want %s [%llu, %llu): %s", dmg_name(d),
	      pf_drop_unit_name(r->drops[0].unit), (unsigned long long)r->drops[0].start,
	      (unsigned long long)r->drops[0].resume, pf_drop_unit_name(unit),
	      (unsigned long long)start, (unsigned long long)resume, r->drops[0].cause.msg);
	CHECK(r->nrec == NREC - (last - first + 1), "%s: %d records", dmg_name(d), r->nrec);
	CHECK(r->drops[0].next_record == (uint64_t)first, "%s: next record %llu, want %d",
	      dmg_name(d), (unsigned long long)r->drops[0].next_record, first);
}

/* Compressed streams: when records of the first damaged unit are missing,
 * a codec drop starts at that unit; garbage inserted between units is one
 * drop of exactly it. */
static void check_codec_drops(const image *img, const damage *d, const result *r,
			      pf_drop_unit codec_unit)
{
	bool seen[NREC] = { false };
	int first = -1;
	bool found = false;

	for (int i = 0; i < r->nrec; i++)
		seen[r->ids[i]] = true;
	for (int u = 0; u < img->nunits && first < 0; u++)
		if (!unit_clean(&img->units[u], d))
			first = u;
	if (d->kind == DMG_INSERT && first < 0 && unit_of(img, d->at) < 0 &&
	    (d->at == img->len || d->at == img->units[0].start ||
	     (unit_of(img, d->at - 1) >= 0))) {
		/* Right after a unit (or at the start or the end). */
		for (int i = 0; i < r->ndrop && i < MAX_DROPS; i++)
			found |= r->drops[i].offset_kind == PF_OFFSET_FILE &&
				 r->drops[i].start == d->at &&
				 r->drops[i].resume == d->at + d->len;
		CHECK(found || (d->at == 0 && r->ndrop == 1 &&
				r->drops[0].unit == PF_DROP_SPAN && r->drops[0].start == 0 &&
				r->drops[0].resume == d->len),
		      "%s: no drop of exactly the garbage (%d drops, first %s [%llu, %llu))",
		      dmg_name(d), r->ndrop, r->ndrop ? pf_drop_unit_name(r->drops[0].unit) : "-",
		      r->ndrop ? (unsigned long long)r->drops[0].start : 0ull,
		      r->ndrop ? (unsigned long long)r->drops[0].resume : 0ull);
		CHECK(r->nrec == NREC, "%s: %d records", dmg_name(d), r->nrec);
		return;
	}
	if (first < 0 || (d->kind == DMG_TRUNC && d->at <= img->units[first].start))
		return;	/* undamaged, or cut between units */
	for (int k = 0; k < img->units[first].n; k++)
		if (!seen[img->units[first].first + k])
			break;
		else if (k == img->units[first].n - 1)
			return;	/* nothing of it lost (damage zstd or zlib ignores) */
	/* Damage at byte 0 may hide the file's format: then the bytes up to
	 * the next header are read as TFRecord, the drop a span from byte 0
	 * (the sniffing in stream.c). */
	for (int i = 0; i < r->ndrop && i < MAX_DROPS; i++)
		found |= (r->drops[i].offset_kind == PF_OFFSET_FILE &&
			  r->drops[i].unit == codec_unit &&
			  r->drops[i].start == img->units[first].start) ||
			 (img->units[first].start == 0 && r->drops[i].unit == PF_DROP_SPAN &&
			  r->drops[i].start == 0);
	CHECK(found, "%s: records of unit %d [%llu, %llu) lost, no %s drop from its start "
	      "(%d drops, first %s [%llu, %llu): %s)", dmg_name(d), first,
	      (unsigned long long)img->units[first].start,
	      (unsigned long long)img->units[first].end, pf_drop_unit_name(codec_unit),
	      r->ndrop, r->ndrop ? pf_drop_unit_name(r->drops[0].unit) : "-",
	      r->ndrop ? (unsigned long long)r->drops[0].start : 0ull,
	      r->ndrop ? (unsigned long long)r->drops[0].resume : 0ull,
	      r->ndrop ? r->drops[0].cause.msg : "");
}

/* Fail mode: an error, or (damage the checks cannot see) a clean read; the
 * records before the error are where skip mode's start. */
static void check_fail(const damage *d, const result *fail, const result *skip)
{
	if (fail->ret == 0) {
		CHECK(skip->ndrop == 0 && skip->nrec == fail->nrec,
		      "%s: fail mode read it cleanly, skip mode dropped %d", dmg_name(d),
		      skip->ndrop);
		return;
	}
	CHECK(fail->ret == -EBADMSG || fail->ret == -EFBIG, "%s: fail mode gave %d (%s)",
	      dmg_name(d), fail->ret, fail->err.msg);
	CHECK(fail->err.msg[0] && fail->err.offset_kind != PF_OFFSET_NONE,
	      "%s: fail mode error says no place", dmg_name(d));
	CHECK(fail->nrec <= skip->nrec, "%s: fail %d records, skip %d", dmg_name(d), fail->nrec,
	      skip->nrec);
	for (int i = 0; i < fail->nrec; i++)
		CHECK(fail->ids[i] == skip->ids[i] && fail->index[i] == skip->index[i],
		      "%s: record %d differs between fail and skip mode", dmg_name(d), i);
}

static result ra, rb, rc;

/* Every damage: skip mode read in two piece sizes and twice in one; the
 * checks above; fail mode beside it. */
static void stream_matrix(const image *img, uint64_t seed, const char *what)
{
	static damage dmg[4096];
	size_t n = make_damages(img, dmg, 4096, seed, false);

	for (size_t i = 0; i < n; i++) {
		const damage *d = &dmg[i];
		size_t len;
		uint8_t *file = apply(img, d, &len);

		read_stream(file, len, 4096, PF_CORRUPT_SKIP, &ra);
		check_records(img, d, &ra, false, what);
		if (img->comp == PF_COMP_NONE)
			check_plain_drops(img, d, &ra);
		else
			check_codec_drops(img, d, &ra, img->comp == PF_COMP_GZIP
							 ? PF_DROP_MEMBER : PF_DROP_FRAME);
		read_stream(file, len, 4096, PF_CORRUPT_SKIP, &rb);
		CHECK(same_result(&ra, &rb), "%s, %s: a second read differs", what, dmg_name(d));

		read_stream(file, len, 997, PF_CORRUPT_SKIP, &rb);
		check_records(img, d, &rb, false, what);
		if (img->comp == PF_COMP_NONE)
			CHECK(same_result(&ra, &rb), "%s, %s: pieces of 997 read otherwise",
			      what, dmg_name(d));

		read_stream(file, len, 4096, PF_CORRUPT_FAIL, &rc);
		check_fail(d, &rc, &ra);
		if (img->comp == PF_COMP_NONE && rc.ret < 0) {
			/* The first drop is the failure fail mode stops at. */
			CHECK(ra.ndrop > 0 && ra.drops[0].cause.code == rc.ret &&
			      ra.drops[0].cause.offset == rc.err.offset &&
			      !strcmp(ra.drops[0].cause.msg, rc.err.msg),
			      "%s: first drop's cause '%s' at %llu, fail mode '%s' at %llu",
			      dmg_name(d), ra.ndrop ? ra.drops[0].cause.msg : "-",
			      ra.ndrop ? (unsigned long long)ra.drops[0].cause.offset : 0ull,
			      rc.err.msg, (unsigned long long)rc.err.offset);
		}
		free(file);
	}
	cr_log_info("%s: %zu damages", what, n);
}

/* ------------------------------------------------------------------ */

TestSuite(corrupt, .init = NULL);

Test(corrupt, plain_damage_matrix)
{
	image img;

	make_records(1);
	build_plain(&img);
	stream_matrix(&img, 11, "plain");
	free(img.data);
}

Test(corrupt, gzip_members_damage_matrix)
{
	image img;

	make_records(2);
	build_gzip(&img, 12);
	stream_matrix(&img, 12, "gzip");
	free(img.data);
}

Test(corrupt, zstd_frames_damage_matrix)
{
	image img;

	make_records(3);
	build_zstd(&img, 12, 99);
	stream_matrix(&img, 13, "zstd");
	free(img.data);
}

Test(corrupt, shard_as_zstd_stream_damage_matrix)
{
	image img;

	make_records(4);
	build_shard(&img, 8192, 0);
	stream_matrix(&img, 14, "shard as stream");
	free(img.data);
}

Test(corrupt, aligned_shard_as_zstd_stream_damage_matrix)
{
	image img;

	make_records(5);
	build_shard(&img, 8192, 4096);	/* skippable padding between frames */
	stream_matrix(&img, 15, "aligned shard as stream");
	free(img.data);
}

/* Indexed shards read through the index: a damaged frame fails its CRC32C
 * and goes whole; every other frame's records keep their index numbers. */
static void shard_matrix(uint32_t align, uint64_t seed)
{
	static damage dmg[4096];
	const char *dir = tu_tmpdir();
	char path[256];
	image img;
	size_t n;

	make_records(seed);
	build_shard(&img, 8192, align);
	n = make_damages(&img, dmg, 4096, seed, true);
	snprintf(path, sizeof(path), "%s/shard.tfrecord.zst", dir);
	for (size_t i = 0; i < n; i++) {
		const damage *d = &dmg[i];
		size_t len;
		uint8_t *file = apply(&img, d, &len);
		int hit = 0;

		tu_write_file(path, file, len);
		read_source(path, false, 0, PF_CORRUPT_SKIP, &ra);
		check_records(&img, d, &ra, true, "shard");
		for (int j = 0; j < ra.nrec; j++) {
			/* Intact frames: numbers from the index. */
			CHECK(ra.index[j] == (uint64_t)ra.ids[j], "%s: record %lld numbered %llu",
			      dmg_name(d), (long long)ra.ids[j], (unsigned long long)ra.index[j]);
		}
		for (int u = 0; u < img.nunits; u++) {
			const unit *un = &img.units[u];
			bool dropped = false;

			if (unit_clean(un, d))
				continue;
			hit++;
			for (int k = 0; k < ra.ndrop && k < MAX_DROPS; k++)
				dropped |= ra.drops[k].unit == PF_DROP_FRAME &&
					   ra.drops[k].start == un->start &&
					   ra.drops[k].records == un->n &&
					   ra.drops[k].cause.frame == u;
			CHECK(dropped, "%s: frame %d not dropped whole (%d drops, first %s at %llu: %s)",
			      dmg_name(d), u, ra.ndrop,
			      ra.ndrop ? pf_drop_unit_name(ra.drops[0].unit) : "-",
			      ra.ndrop ? (unsigned long long)ra.drops[0].start : 0ull,
			      ra.ndrop ? ra.drops[0].cause.msg : "");
			for (int k = 0; k < un->n; k++)
				for (int j = 0; j < ra.nrec; j++)
					CHECK(ra.ids[j] != un->first + k,
					      "%s: record %d of dropped frame %d delivered",
					      dmg_name(d), un->first + k, u);
		}
		CHECK(ra.ndrop == hit, "%s: %d drops for %d damaged frames", dmg_name(d), ra.ndrop,
		      hit);
		for (int k = 0; k < ra.ndrop && k < MAX_DROPS; k++)
			CHECK(!strcmp(ra.drops[k].cause.file, path) &&
			      ra.drops[k].offset_kind == PF_OFFSET_FILE &&
			      ra.drops[k].resume > ra.drops[k].start,
			      "%s: drop %d names '%s'", dmg_name(d), k, ra.drops[k].cause.file);

		/* Fail mode: the same first error as ever (frame CRC). */
		read_source(path, false, 0, PF_CORRUPT_FAIL, &rc);
		if (hit) {
			CHECK(rc.ret == -EBADMSG && strstr(rc.err.msg, "frame CRC mismatch") &&
			      !strcmp(rc.err.file, path) && rc.err.frame == ra.drops[0].cause.frame,
			      "%s: fail mode: %d %s (frame %lld)", dmg_name(d), rc.ret, rc.err.msg,
			      (long long)rc.err.frame);
			CHECK(!strcmp(rc.err.msg, ra.drops[0].cause.msg),
			      "%s: fail '%s', first drop '%s'", dmg_name(d), rc.err.msg,
			      ra.drops[0].cause.msg);
		} else {
			CHECK(rc.ret == 0 && rc.nrec == NREC, "%s: fail mode %d", dmg_name(d), rc.ret);
		}
		free(file);
	}
	cr_log_info("shard (align %u): %zu damages", align, n);
	free(img.data);
}

Test(corrupt, indexed_shard_damage_matrix)
{
	shard_matrix(0, 21);
}

Test(corrupt, aligned_indexed_shard_damage_matrix)
{
	shard_matrix(4096, 22);
}
