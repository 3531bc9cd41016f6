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

#include "formats_internal.h"
#include "pf_formats.h"
#include "pf_index.pb-c.h"
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
	ret = pf_recstream_create(&s, &cfg);
	if (ret < 0) {
		r->ret = ret;
		return;
	}
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
	 * (the sniffing in recstream_skip.c). */
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

/* ------------------------------------------------------------------ */
/* Resynchronisation and the frame walker                               */

Test(corrupt, resync_needs_both_crcs)
{
	uint8_t buf[4096], rec[64];
	size_t n = 0, q;
	uint32_t crc;

	make_records(6);
	memset(rec, 'r', sizeof(rec));
	/* 30 bytes of garbage, then a header whose length CRC holds over a
	 * body whose data CRC does not, then a good record. */
	for (int i = 0; i < 30; i++)
		buf[n++] = (uint8_t)(i * 37 + 11);
	n += pf_tfr_encode(buf + n, sizeof(buf) - n, rec, sizeof(rec));
	buf[n - 1] ^= 0x40;			/* its data CRC */
	q = n;
	n += pf_tfr_encode(buf + n, sizeof(buf) - n, payload[0], plen[0]);
	cr_assert_eq(pf_tfr_resync(buf, n, 1 << 20, true), q);
	cr_assert_eq(pf_tfr_resync(buf, n, 1 << 20, false), q);
	cr_assert_eq(pf_tfr_resync(buf + q, n - q, 1 << 20, true), 0);
	/* Past the limit: not a record. */
	cr_assert_eq(pf_tfr_resync(buf, n, plen[0] - 1, true), n);
	/* Cut inside the good record: more bytes may make it whole. */
	cr_assert_eq(pf_tfr_resync(buf, n - 3, 1 << 20, false), q);
	cr_assert_eq(pf_tfr_resync(buf, n - 3, 1 << 20, true), n - 3);
	/* Garbage alone: the last 11 bytes cannot be told yet. */
	cr_assert_eq(pf_tfr_resync(buf, 30, 1 << 20, false), 30 - 11);
	cr_assert_eq(pf_tfr_resync(buf, 30, 1 << 20, true), 30);
	cr_assert_eq(pf_tfr_resync(buf, 5, 1 << 20, false), 0);
	cr_assert_eq(pf_tfr_resync(buf, 0, 1 << 20, true), 0);
	/* A length CRC that holds for a zero-length record whose data CRC
	 * (of nothing) is wrong. */
	memset(buf, 0, 16);
	crc = pf_crc32c_mask(pf_crc32c(0, buf, 8));
	memcpy(buf + 8, &crc, 4);
	cr_assert_eq(pf_tfr_resync(buf, 16, 1 << 20, true), 16);
	crc = pf_crc32c_mask(pf_crc32c(0, buf, 0));
	memcpy(buf + 12, &crc, 4);
	cr_assert_eq(pf_tfr_resync(buf, 16, 1 << 20, true), 0);
}

typedef struct walk {
	int nrec, ndrop;
	uint64_t off[2 * NREC], len[2 * NREC];
	pf_drop drops[MAX_DROPS];
} walk;

static int walk_drop(void *ctx, const pf_drop *d)
{
	walk *w = ctx;

	if (w->ndrop < MAX_DROPS)
		w->drops[w->ndrop] = *d;
	w->ndrop++;
	return 0;
}

static void walk_reader(const uint8_t *buf, size_t len, size_t piece, bool check, walk *w)
{
	pf_tfr_config cfg = { .max_record_size = 1 << 20, .skip_data_crc = !check,
			      .on_corrupt = PF_CORRUPT_SKIP, .on_drop = walk_drop, .on_drop_ctx = w };
	pf_tfr_reader *r;
	pf_record rec;
	pf_error err;
	size_t pos = 0;
	int ret;

	memset(w, 0, sizeof(*w) - sizeof(w->drops));
	cr_assert_eq(pf_tfr_reader_create(&r, &cfg), 0);
	while (pos < len) {
		size_t n = len - pos < piece ? len - pos : piece;

		pf_tfr_reader_feed(r, buf + pos, n);
		pos += n;
		while ((ret = pf_tfr_reader_next(r, &rec, &err)) == 1) {
			CHECK(rec.index == (uint64_t)w->nrec, "numbering");
			w->off[w->nrec] = rec.offset;
			w->len[w->nrec++] = rec.len;
		}
		CHECK(ret == 0, "reader: %d %s", ret, err.msg);
	}
	pf_tfr_reader_end(r);
	while ((ret = pf_tfr_reader_next(r, &rec, &err)) == 1) {
		w->off[w->nrec] = rec.offset;
		w->len[w->nrec++] = rec.len;
	}
	CHECK(ret == 0 && pf_tfr_reader_finish(r, &err) == 0, "end: %d %s", ret, err.msg);
	CHECK(pf_tfr_reader_drops(r) == (uint64_t)w->ndrop, "drop count");
	pf_tfr_reader_free(r);
}

static void walk_whole(const uint8_t *buf, size_t len, bool check, walk *w)
{
	size_t pos = 0;
	pf_record rec;
	pf_drop d;
	int ret;

	memset(w, 0, sizeof(*w) - sizeof(w->drops));
	while ((ret = pf_tfr_next_intact(buf, len, &pos, 0, 1 << 20, check, &rec, &d)) > 0) {
		if (ret == 1) {
			w->off[w->nrec] = rec.offset;
			w->len[w->nrec++] = rec.len;
		} else {
			CHECK(d.resume == pos, "resume %llu, pos %zu", (unsigned long long)d.resume, pos);
			if (w->ndrop < MAX_DROPS)
				w->drops[w->ndrop] = d;
			w->ndrop++;
		}
	}
}

static bool same_walk(const walk *a, const walk *b)
{
	if (a->nrec != b->nrec || a->ndrop != b->ndrop)
		return false;
	for (int i = 0; i < a->nrec; i++)
		if (a->off[i] != b->off[i] || a->len[i] != b->len[i])
			return false;
	for (int i = 0; i < a->ndrop && i < MAX_DROPS; i++)
		if (a->drops[i].unit != b->drops[i].unit || a->drops[i].start != b->drops[i].start ||
		    a->drops[i].resume != b->drops[i].resume ||
		    a->drops[i].cause.offset != b->drops[i].cause.offset ||
		    strcmp(a->drops[i].cause.msg, b->drops[i].cause.msg))
			return false;
	return true;
}

/* The walker over a whole buffer, the skip-mode reader fed in pieces of
 * any size, and pf_tfr_count_intact() agree on every damage, with the
 * data CRC checked and without. */
Test(corrupt, walker_reader_and_count_agree)
{
	static damage dmg[4096];
	static walk w1, w2;
	image img;
	size_t n, pieces[] = { 1, 5, 12, 13, 100, 4093, 1 << 20 };

	make_records(7);
	build_plain(&img);
	n = make_damages(&img, dmg, 4096, 31, false);
	for (size_t i = 0; i < n; i += 3) {
		size_t len;
		uint8_t *file = apply(&img, &dmg[i], &len);

		for (int check = 0; check < 2; check++) {
			uint64_t drops;

			walk_whole(file, len, check, &w1);
			CHECK(pf_tfr_count_intact(file, len, 1 << 20, check, &drops) ==
			      (uint64_t)w1.nrec && drops == (uint64_t)w1.ndrop,
			      "%s: count_intact differs", dmg_name(&dmg[i]));
			for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
				if (pieces[k] < 100 && i % 12)
					continue;	/* byte-sized pieces are slow */
				walk_reader(file, len, pieces[k], check, &w2);
				CHECK(same_walk(&w1, &w2), "%s, check %d, pieces of %zu: the reader "
				      "gives %d records %d drops, the walker %d, %d", dmg_name(&dmg[i]),
				      check, pieces[k], w2.nrec, w2.ndrop, w1.nrec, w1.ndrop);
			}
		}
		free(file);
	}
	free(img.data);
}

/* A verified frame (skip_data_crc): a bad payload byte goes unseen, as the
 * frame's own checks vouch for it; broken framing still resyncs, and the
 * first record after it is checked whole. */
Test(corrupt, walker_without_data_crc)
{
	uint8_t buf[3 * (MAX_PAYLOAD + 16)];
	size_t len = 0, pos = 0, r0 = 0;
	pf_record rec;
	pf_drop d;

	make_records(8);
	for (int i = 0; i < 3; i++) {
		if (i == 1)
			r0 = len;
		len += pf_tfr_encode(buf + len, sizeof(buf) - len, payload[i], plen[i]);
	}
	buf[r0 + 20] ^= 1;	/* payload of record 1 */
	cr_assert_eq(pf_tfr_count_intact(buf, len, 1 << 20, false, NULL), 3);
	cr_assert_eq(pf_tfr_count_intact(buf, len, 1 << 20, true, NULL), 2);
	buf[r0 + 20] ^= 1;
	buf[r0 + 2] ^= 1;	/* its length */
	cr_assert_eq(pf_tfr_next_intact(buf, len, &pos, 1000, 1 << 20, false, &rec, &d), 1);
	cr_assert_eq(rec.offset, 1000);
	cr_assert_eq(pf_tfr_next_intact(buf, len, &pos, 1000, 1 << 20, false, &rec, &d), 2);
	cr_assert_eq(d.unit, PF_DROP_SPAN);
	cr_assert_eq(d.start, 1000 + r0);
	cr_assert_eq(d.offset_kind, PF_OFFSET_STREAM);
	cr_assert(strstr(d.cause.msg, "bad length CRC"), "%s", d.cause.msg);
	cr_assert_eq(d.cause.offset, 1000 + r0);
	cr_assert_eq(pf_tfr_next_intact(buf, len, &pos, 1000, 1 << 20, false, &rec, &d), 1);
	cr_assert_eq(identify(&rec), 2);
	cr_assert_eq(pf_tfr_next_intact(buf, len, &pos, 1000, 1 << 20, false, &rec, &d), 0);
	cr_assert_eq(pos, len);
}

/* ------------------------------------------------------------------ */
/* The budget: on_drop's <0 stops the read with the drop's cause        */

Test(corrupt, on_drop_stops_reading)
{
	image img;
	damage d1 = { DMG_FLIP, 0, 0, 0 };
	size_t len, len2;
	uint8_t *f1, *f2;
	const char *dir = tu_tmpdir();
	char path[256];

	make_records(9);
	build_plain(&img);
	d1.at = img.units[10].start + 30;	/* record 10's payload */
	f1 = apply(&img, &d1, &len);
	d1.at = img.units[50].start + 3;	/* record 50's length */
	f2 = apply(&(image){ .data = f1, .len = len }, &d1, &len2);

	ra.stop_at = 2;
	read_stream(f2, len2, 4096, PF_CORRUPT_SKIP, &ra);
	cr_assert_eq(ra.ret, -ECANCELED);
	cr_assert_eq(ra.ndrop, 2);
	cr_assert_eq(ra.nrec, 49);		/* 0..49 but 10 */
	cr_assert_eq(ra.err.code, -ECANCELED);
	cr_assert_eq(ra.err.offset, img.units[50].start);
	cr_assert(strstr(ra.err.msg, "bad length CRC"), "%s", ra.err.msg);

	snprintf(path, sizeof(path), "%s/plain.tfrecord", dir);
	tu_write_file(path, f2, len2);
	read_source(path, false, 1000, PF_CORRUPT_SKIP, &ra);
	cr_assert_eq(ra.ret, -ECANCELED);
	cr_assert_str_eq(ra.err.file, path);
	cr_assert_eq(ra.err.offset_kind, PF_OFFSET_FILE);
	cr_assert_eq(ra.err.offset, img.units[50].start);
	ra.stop_at = 0;
	read_source(path, false, 1000, PF_CORRUPT_SKIP, &ra);
	cr_assert_eq(ra.ret, 0);
	cr_assert_eq(ra.nrec, NREC - 2);
	cr_assert_eq(ra.drops[0].unit, PF_DROP_RECORD);
	cr_assert_eq(ra.drops[0].offset_kind, PF_OFFSET_FILE);
	cr_assert_eq(ra.drops[0].records, 1);
	cr_assert_eq(ra.drops[0].next_record, 10);
	cr_assert_str_eq(ra.drops[0].cause.file, path);
	cr_assert_eq(ra.drops[1].unit, PF_DROP_SPAN);
	cr_assert_eq(ra.drops[1].next_record, 49);
	free(f1);
	free(f2);
	free(img.data);

	/* A codec drop, and an indexed frame, stop the same way. */
	make_records(10);
	build_zstd(&img, 12, 5);
	d1 = (damage){ DMG_ZERO, img.units[3].start, 64, 0 };
	f1 = apply(&img, &d1, &len);
	ra.stop_at = 1;
	read_stream(f1, len, 4096, PF_CORRUPT_SKIP, &ra);
	cr_assert_eq(ra.ret, -ECANCELED);
	cr_assert_eq(ra.ndrop, 1);
	cr_assert_eq(ra.drops[0].unit, PF_DROP_FRAME);
	cr_assert_eq(ra.drops[0].start, img.units[3].start);
	cr_assert_eq(ra.err.offset_kind, PF_OFFSET_FILE);
	free(f1);
	free(img.data);

	build_shard(&img, 8192, 0);
	d1 = (damage){ DMG_FLIP, img.units[4].start + 100, 0, 2 };
	f1 = apply(&img, &d1, &len);
	snprintf(path, sizeof(path), "%s/shard.tfrecord.zst", dir);
	tu_write_file(path, f1, len);
	read_source(path, false, 0, PF_CORRUPT_SKIP, &ra);
	cr_assert_eq(ra.ret, -ECANCELED);
	cr_assert_eq(ra.err.frame, 4);
	cr_assert_str_eq(ra.err.file, path);
	cr_assert(strstr(ra.err.msg, "frame CRC mismatch"), "%s", ra.err.msg);
	cr_assert_eq(ra.nrec, img.units[4].first);
	ra.stop_at = 0;
	free(f1);
	free(img.data);
}

Test(corrupt, bad_policy_refused)
{
	pf_tfr_config tc = { .on_corrupt = (pf_corrupt_policy)7 };
	pf_recstream_config rc = { .on_corrupt = (pf_corrupt_policy)7 };
	pf_source_config sc = { .on_corrupt = (pf_corrupt_policy)7 };
	pf_tfr_reader *r;
	pf_recstream *s;
	pf_source *src;
	pf_error err;
	const char *dir = tu_tmpdir();
	char path[256];

	snprintf(path, sizeof(path), "%s/empty", dir);
	tu_write_file(path, "", 0);
	cr_assert_eq(pf_tfr_reader_create(&r, &tc), -EINVAL);
	cr_assert_eq(pf_recstream_create(&s, &rc), -EINVAL);
	cr_assert_eq(pf_source_open(&src, path, &sc, &err), -EINVAL);
}

/* In skip mode finish() wants the records read: end() first. */
Test(corrupt, reader_finish_needs_end_in_skip_mode)
{
	pf_tfr_config cfg = { .on_corrupt = PF_CORRUPT_SKIP };
	uint8_t buf[2 * (MAX_PAYLOAD + 16) + 40];
	size_t len;
	pf_tfr_reader *r;
	pf_record rec;
	pf_error err;
	int n = 0;

	make_records(11);
	/* A header that passes its checks and claims more bytes than
	 * follow, hiding a whole record behind it. */
	uint64_t claim = 3 * MAX_PAYLOAD;
	uint32_t crc;

	memcpy(buf, &claim, 8);
	crc = pf_crc32c_mask(pf_crc32c(0, buf, 8));
	memcpy(buf + 8, &crc, 4);
	len = 12;
	len += pf_tfr_encode(buf + len, sizeof(buf) - len, payload[1], plen[1]);
	cr_assert_eq(pf_tfr_reader_create(&r, &cfg), 0);
	pf_tfr_reader_feed(r, buf, len);
	while (pf_tfr_reader_next(r, &rec, &err) == 1)
		n++;
	cr_assert_eq(n, 0);	/* the first header waits for its record */
	cr_assert_eq(pf_tfr_reader_finish(r, &err), -EINVAL);
	pf_tfr_reader_reset(r, 0, 0);
	pf_tfr_reader_feed(r, buf, len);
	pf_tfr_reader_end(r);
	cr_assert_eq(pf_tfr_reader_next(r, &rec, &err), 1);
	cr_assert_eq(identify(&rec), 1);
	cr_assert_eq(rec.index, 0);
	cr_assert_eq(pf_tfr_reader_next(r, &rec, &err), 0);
	cr_assert_eq(pf_tfr_reader_finish(r, &err), 0);
	cr_assert_eq(pf_tfr_reader_drops(r), 1);
	pf_tfr_reader_free(r);
}

/* ------------------------------------------------------------------ */
/* Codec cases the matrix may not reach                                 */

/* A skippable frame's size damaged: zstd lands inside the next frame (or
 * inside the skippable one), which must not be lost: no records go. */
Test(corrupt, zstd_skippable_size_damaged)
{
	image img;
	uint64_t skip_at;
	size_t len;
	uint8_t *file;

	make_records(12);
	build_zstd(&img, 12, 3);
	skip_at = img.units[2].end;	/* after frame 2 comes a skippable frame */
	cr_assert_eq(img.data[skip_at + 1], 0x2a);
	for (int bit = 0; bit < 8; bit++) {
		for (int byte = 4; byte < 6; byte++) {
			damage d = { DMG_FLIP, skip_at + byte, 0, bit };

			file = apply(&img, &d, &len);
			for (size_t piece = 1000; piece <= 4000; piece += 3000) {
				read_stream(file, len, piece, PF_CORRUPT_SKIP, &ra);
				check_records(&img, &d, &ra, false, "skippable");
				CHECK(ra.nrec == NREC, "%s, pieces of %zu: %d records", dmg_name(&d),
				      piece, ra.nrec);
				CHECK(ra.ndrop == 1 && ra.drops[0].unit == PF_DROP_FRAME &&
				      ra.drops[0].resume == img.units[3].start,
				      "%s: %d drops, first [%llu, %llu), want resume %llu", dmg_name(&d),
				      ra.ndrop, (unsigned long long)ra.drops[0].start,
				      (unsigned long long)ra.drops[0].resume,
				      (unsigned long long)img.units[3].start);
			}
			free(file);
		}
	}
	free(img.data);
}

/* A bad CRC in a gzip member's trailer: its records (each with good CRCs)
 * all came out; the member is reported, and the next one read. */
Test(corrupt, gzip_bad_trailer)
{
	image img;
	damage d = { DMG_FLIP, 0, 0, 4 };
	size_t len;
	uint8_t *file;

	make_records(13);
	build_gzip(&img, 12);
	d.at = img.units[5].end - 6;	/* its CRC32 */
	file = apply(&img, &d, &len);
	read_stream(file, len, 4096, PF_CORRUPT_SKIP, &ra);
	cr_assert_eq(ra.ret, 0);
	cr_assert_eq(ra.nrec, NREC);
	cr_assert_eq(ra.ndrop, 1);
	cr_assert_eq(ra.drops[0].unit, PF_DROP_MEMBER);
	cr_assert_eq(ra.drops[0].start, img.units[5].start);
	cr_assert_eq(ra.drops[0].resume, img.units[6].start);
	cr_assert_eq(ra.drops[0].next_record, img.units[6].first);
	cr_assert(strstr(ra.drops[0].cause.msg, "incorrect data check"), "%s",
		  ra.drops[0].cause.msg);
	read_stream(file, len, 4096, PF_CORRUPT_FAIL, &rc);
	cr_assert_eq(rc.ret, -EBADMSG);
	cr_assert_str_eq(rc.err.msg, ra.drops[0].cause.msg);
	free(file);
	free(img.data);
}

/* zlib has no member headers to find again: the rest of the stream goes,
 * what came before stays. */
Test(corrupt, zlib_drops_the_rest)
{
	uint8_t *raw = malloc(NREC * (MAX_PAYLOAD + 16)), *z;
	size_t rl, zl;
	uLongf cap;

	make_records(14);
	rl = framed(0, NREC, raw, NREC * (MAX_PAYLOAD + 16));
	cap = compressBound(rl);
	z = malloc(cap);
	cr_assert_eq(compress2(z, &cap, raw, rl, 6), Z_OK);
	zl = cap;
	z[zl / 2] ^= 0x10;
	read_stream(z, zl, 4096, PF_CORRUPT_SKIP, &ra);
	cr_assert_eq(ra.ret, 0, "%s", ra.err.msg);
	cr_assert_gt(ra.nrec, 10);
	cr_assert_lt(ra.nrec, NREC);
	for (int i = 0; i < ra.nrec; i++)
		cr_assert(i == 0 || ra.ids[i] > ra.ids[i - 1]);
	cr_assert_eq(ra.ids[0], 0);
	cr_assert_geq(ra.ndrop, 1);
	cr_assert_eq(ra.drops[ra.ndrop - 1].unit, PF_DROP_MEMBER);
	cr_assert_eq(ra.drops[ra.ndrop - 1].resume, zl);
	free(raw);
	free(z);
}

/* The zstd CLI writes one frame: damage in it loses the rest of the file,
 * never the records before it, and never hangs. */
Test(corrupt, single_zstd_frame)
{
	uint8_t *raw = malloc(NREC * (MAX_PAYLOAD + 16)), *z;
	size_t rl, zl;

	make_records(15);
	rl = framed(0, NREC, raw, NREC * (MAX_PAYLOAD + 16));
	z = malloc(ZSTD_compressBound(rl));
	zl = ZSTD_compress(z, ZSTD_compressBound(rl), raw, rl, 19);
	cr_assert(!ZSTD_isError(zl));
	for (size_t at = 7; at < zl; at += zl / 13) {
		damage d = { DMG_FLIP, at, 0, 3 };
		image img = { .data = z, .len = zl };
		size_t len;
		uint8_t *file = apply(&img, &d, &len);

		read_stream(file, len, 4096, PF_CORRUPT_SKIP, &ra);
		CHECK(ra.ret == 0 && ra.unknown == 0, "%s: %d", dmg_name(&d), ra.ret);
		/* zstd decodes the frame block by block: records after a
		 * damaged one may come out before the checksum fails. */
		for (int i = 0; i < ra.nrec; i++)
			CHECK(i == 0 || ra.ids[i] > ra.ids[i - 1], "%s: record %d is %lld",
			      dmg_name(&d), i, (long long)ra.ids[i]);
		CHECK(ra.nrec == NREC || ra.ndrop >= 1, "%s: records lost unreported", dmg_name(&d));
		free(file);
	}
	free(raw);
	free(z);
}

/* Damage at byte 0 hides the format: a zeroed first frame of a zstd file
 * costs that frame only, and so does garbage put before the file. */
Test(corrupt, zstd_head_damaged)
{
	image img;
	size_t len;
	uint8_t *file;
	damage zero, ins = { DMG_INSERT, 0, 5, 0 };

	make_records(16);
	build_zstd(&img, 12, 4);
	zero = (damage){ DMG_ZERO, 0, img.units[0].end, 0 };
	file = apply(&img, &zero, &len);
	read_stream(file, len, 4096, PF_CORRUPT_SKIP, &ra);
	cr_assert_eq(ra.ret, 0);
	cr_assert_eq(ra.nrec, NREC - img.units[0].n);
	cr_assert_eq(ra.ids[0], img.units[1].first);
	cr_assert_eq(ra.index[0], 0);
	cr_assert_eq(ra.ndrop, 1);
	cr_assert_eq(ra.drops[0].unit, PF_DROP_SPAN);
	cr_assert_eq(ra.drops[0].start, 0);
	cr_assert_eq(ra.drops[0].resume, img.units[1].start);
	free(file);

	file = apply(&img, &ins, &len);
	for (size_t piece = 1; piece <= 4096; piece *= 8) {
		read_stream(file, len, piece, PF_CORRUPT_SKIP, &ra);
		cr_assert_eq(ra.ret, 0);
		cr_assert_eq(ra.nrec, NREC, "pieces of %zu", piece);
		cr_assert_eq(ra.ndrop, 1);
		cr_assert_eq(ra.drops[0].start, 0);
		cr_assert_eq(ra.drops[0].resume, 5);
	}
	free(file);
	free(img.data);
}

/* A damaged TFRecord head with what looks like a zstd frame in it: the
 * trial decode fails, and the file is read on as TFRecord. */
Test(corrupt, false_codec_header_in_a_damaged_head)
{
	image img;
	damage z = { DMG_ZERO, 0, 0, 0 };
	size_t len;
	uint8_t *file;

	make_records(17);
	build_plain(&img);
	z.len = img.units[0].end;
	file = apply(&img, &z, &len);
	memcpy(file + 3, "\x28\xb5\x2f\xfd\x00\x48", 6);
	for (size_t piece = 2; piece <= 4096; piece *= 4) {
		read_stream(file, len, piece, PF_CORRUPT_SKIP, &ra);
		cr_assert_eq(ra.ret, 0);
		cr_assert_eq(ra.nrec, NREC - 1, "pieces of %zu", piece);
		cr_assert_eq(ra.ids[0], 1);
		cr_assert_eq(ra.index[0], 0);
		for (int i = 0; i < ra.ndrop && i < MAX_DROPS; i++)
			cr_assert_leq(ra.drops[i].resume, img.units[1].start);
	}
	free(file);
	free(img.data);
}

/* ------------------------------------------------------------------ */
/* pf_source on indexed shards                                          */

/* Numbers stay the index's after a dropped frame, and a seek counts
 * intact records. */
Test(corrupt, indexed_numbers_and_seek)
{
	const char *dir = tu_tmpdir();
	char path[256];
	image img;
	damage d;
	size_t len;
	uint8_t *file;
	pf_source_config cfg = { .on_corrupt = PF_CORRUPT_SKIP, .on_drop = collect,
				 .on_drop_ctx = &ra };
	pf_source *src;
	pf_record rec;
	pf_error err;
	int u3;

	make_records(18);
	build_shard(&img, 8192, 0);
	d = (damage){ DMG_ZERO, img.units[3].start + 10, 50, 0 };
	file = apply(&img, &d, &len);
	snprintf(path, sizeof(path), "%s/s.zst", dir);
	tu_write_file(path, file, len);
	reset_result(&ra);
	cr_assert_eq(pf_source_open(&src, path, &cfg, &err), 0);
	u3 = img.units[3].first;
	cr_assert_eq(pf_source_seek_record(src, (uint64_t)u3 - 1), 0);
	cr_assert_eq(pf_source_next(src, &rec, &err), 1);
	cr_assert_eq(rec.index, (uint64_t)u3 - 1);
	cr_assert_eq(pf_source_next(src, &rec, &err), 1);	/* frame 3 dropped */
	cr_assert_eq(rec.index, (uint64_t)img.units[4].first);
	cr_assert_eq(identify(&rec), img.units[4].first);
	cr_assert_eq(ra.ndrop, 1);
	cr_assert_eq(ra.drops[0].records, img.units[3].n);
	cr_assert_eq(ra.drops[0].start, img.units[3].start);
	cr_assert_eq(ra.drops[0].resume, img.units[4].start);
	cr_assert_eq(ra.drops[0].next_record, (uint64_t)u3);
	cr_assert_eq(pf_source_drops(src), 1);
	/* Seeking into the damaged frame lands on the next good record. */
	cr_assert_eq(pf_source_seek_record(src, (uint64_t)u3 + 1), 0);
	cr_assert_eq(pf_source_next(src, &rec, &err), 1);
	cr_assert_eq(identify(&rec), img.units[4].first);
	pf_source_close(src);
	free(file);
	free(img.data);
}

/* An index that fails its checks: skip mode reads the file as a zstd
 * stream (every record), reporting the index as a drop of none. */
Test(corrupt, damaged_index_read_as_stream)
{
	const char *dir = tu_tmpdir();
	char path[256];
	image img;
	pf_shard_index *ix;
	pf_error err;
	size_t len;
	uint8_t *file;
	int hit = 0;

	make_records(19);
	build_shard(&img, 8192, 0);
	cr_assert_eq(pf_shard_index_parse(&ix, img.data, img.len, img.len, &err), 0);
	snprintf(path, sizeof(path), "%s/s.zst", dir);
	for (uint64_t at = pf_shard_index_data_end(ix) + 8; at < img.len; at += 7) {
		damage d = { DMG_FLIP, at, 0, 0 };

		file = apply(&img, &d, &len);
		tu_write_file(path, file, len);
		read_source(path, false, 0, PF_CORRUPT_FAIL, &rc);
		if (rc.ret == 0 || rc.nrec > 0 || rc.err.frame >= 0) {
			/* A field the parser cannot check (a frame's CRC or
			 * sizes): that frame fails when read, as damage in it
			 * would (the matrix covers frames). */
			free(file);
			continue;
		}
		read_source(path, false, 0, PF_CORRUPT_SKIP, &ra);
		CHECK(ra.ret == 0 && ra.nrec == NREC, "%s: %d, %d records (%s)", dmg_name(&d),
		      ra.ret, ra.nrec, ra.err.msg);
		CHECK(rc.ret == -EBADMSG && ra.ndrop >= 1 && ra.drops[0].records == 0 &&
		      !strcmp(ra.drops[0].cause.msg, rc.err.msg) &&
		      !strcmp(ra.drops[0].cause.file, path),
		      "%s: fail mode %d, first drop %s", dmg_name(&d), rc.ret,
		      ra.ndrop ? ra.drops[0].cause.msg : "-");
		hit++;
		free(file);
	}
	cr_assert_gt(hit, 3);
	pf_shard_index_free(ix);
	free(img.data);
}

/* ------------------------------------------------------------------ */
/* Frames that pass their checks and hold bad TFRecords (a buggy writer) */

typedef void (*tamper_fn)(uint8_t **content, size_t *len, const unit *u);

/* Rebuild img (indexed, unaligned) with frame f's TFRecord bytes passed
 * through tamper, recompressed, and the index and seek table made to
 * vouch for them (offsets, sizes, CRC32C). */
static void rebuild_shard(image *img, int f, tamper_fn tamper)
{
	pf_shard_index *ix;
	pf_error err;
	size_t nf, st_len, pb_len, data_end, pb_new, total = 0;
	Podfeed__ShardIndex *pb;
	image out = { 0 };
	ZSTD_CCtx *cc = ZSTD_createCCtx();

	cr_assert_eq(pf_shard_index_parse(&ix, img->data, img->len, img->len, &err), 0);
	nf = pf_shard_index_frames(ix);
	data_end = (size_t)pf_shard_index_data_end(ix);
	st_len = 8 + nf * 8 + 9;
	pb_len = pf_load_le32(img->data + img->len - st_len - 8);
	pb = podfeed__shard_index__unpack(NULL, pb_len, img->data + data_end + 8);
	cr_assert_not_null(pb);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
	for (size_t i = 0; i < nf; i++) {
		const pf_frame_info *fi = pf_shard_index_frame(ix, (uint32_t)i);
		uint8_t *frame = img->data + fi->offset;
		size_t csize = fi->compressed_size, usize = fi->uncompressed_size;
		uint8_t *content = NULL, *z = NULL;

		if ((int)i == f) {
			content = malloc(usize);
			cr_assert_eq(ZSTD_decompress(content, usize, frame, csize), usize);
			tamper(&content, &usize, &img->units[i]);
			z = malloc(ZSTD_compressBound(usize));
			csize = ZSTD_compress2(cc, z, ZSTD_compressBound(usize), content, usize);
			cr_assert(!ZSTD_isError(csize));
			frame = z;
		}
		pb->frame_offset[i] = out.len;
		pb->frame_compressed_size[i] = (uint32_t)csize;
		pb->frame_uncompressed_size[i] = (uint32_t)usize;
		pb->frame_crc32c[i] = pf_crc32c(0, frame, csize);
		total += usize;
		img_put(&out, frame, csize);
		free(content);
		free(z);
	}
	pb->data_end = out.len;
	pb->uncompressed_bytes = total;
	pb_new = podfeed__shard_index__get_packed_size(pb);
	{
		uint8_t hdr[8], *packed = malloc(pb_new), trailer[8], *st;

		pf_store_le32(hdr, PF_SKIP_INDEX);
		pf_store_le32(hdr + 4, (uint32_t)(pb_new + 8));
		img_put(&out, hdr, 8);
		podfeed__shard_index__pack(pb, packed);
		img_put(&out, packed, pb_new);
		pf_store_le32(trailer, (uint32_t)pb_new);
		pf_store_le32(trailer + 4, PF_INDEX_TRAILER_MAGIC);
		img_put(&out, trailer, 8);
		st = malloc(st_len);
		memcpy(st, img->data + img->len - st_len, st_len);
		for (size_t i = 0; i < nf; i++) {
			pf_store_le32(st + 8 + i * 8, pb->frame_compressed_size[i]);
			pf_store_le32(st + 12 + i * 8, pb->frame_uncompressed_size[i]);
		}
		img_put(&out, st, st_len);
		free(packed);
		free(st);
	}
	for (size_t i = 0; i < nf; i++) {
		out.units[i] = img->units[i];
		out.units[i].start = pb->frame_offset[i];
		out.units[i].end = pb->frame_offset[i] + pb->frame_compressed_size[i];
	}
	out.nunits = img->nunits;
	out.comp = img->comp;
	out.indexed = true;
	podfeed__shard_index__free_unpacked(pb, NULL);
	pf_shard_index_free(ix);
	ZSTD_freeCCtx(cc);
	free(img->data);
	*img = out;
	cr_assert_eq(pf_shard_index_parse(&ix, img->data, img->len, img->len, &err), 0,
		     "rebuilt shard: %s", err.msg);
	pf_shard_index_free(ix);
}

/* Offset of record k of a frame's content. */
static size_t record_at(const uint8_t *content, int k)
{
	size_t at = 0;

	for (int i = 0; i < k; i++)
		at += pf_load_le64(content + at) + PF_TFR_OVERHEAD;
	return at;
}

static void tamper_payload(uint8_t **c, size_t *len, const unit *u)
{
	(void)len;
	(void)u;
	(*c)[record_at(*c, 2) + PF_TFR_HEADER_SIZE + 5] ^= 0x08;
}

static void tamper_length(uint8_t **c, size_t *len, const unit *u)
{
	(void)len;
	(void)u;
	(*c)[record_at(*c, 2) + 1] ^= 0x01;
}

static void tamper_extra(uint8_t **c, size_t *len, const unit *u)
{
	size_t first = record_at(*c, 1);

	(void)u;
	*c = realloc(*c, *len + first);
	memcpy(*c + *len, *c, first);	/* record 0 once more */
	*len += first;
}

static void tamper_short(uint8_t **c, size_t *len, const unit *u)
{
	*len = record_at(*c, u->n - 1);	/* the last record gone */
}

static void read_forged(tamper_fn tamper, int seed, result *r, result *fail, image *img)
{
	const char *dir = tu_tmpdir();
	char path[256];

	make_records((uint64_t)seed);
	build_shard(img, 8192, 0);
	rebuild_shard(img, 3, tamper);
	snprintf(path, sizeof(path), "%s/forged.zst", dir);
	tu_write_file(path, img->data, img->len);
	read_source(path, false, 0, PF_CORRUPT_SKIP, r);
	read_source(path, false, 0, PF_CORRUPT_FAIL, fail);
	cr_assert_eq(r->ret, 0, "%s", r->err.msg);
	cr_assert_eq(r->unknown, 0);
}

Test(corrupt, indexed_frame_with_a_bad_record)
{
	image img;
	const unit *u;

	read_forged(tamper_payload, 23, &ra, &rc, &img);
	u = &img.units[3];
	cr_assert_eq(ra.nrec, NREC - 1);
	cr_assert_eq(ra.ndrop, 1);
	cr_assert_eq(ra.drops[0].unit, PF_DROP_RECORD);
	cr_assert_eq(ra.drops[0].offset_kind, PF_OFFSET_STREAM);
	cr_assert_eq(ra.drops[0].records, 1);
	cr_assert_eq(ra.drops[0].cause.frame, 3);
	cr_assert_eq(ra.drops[0].next_record, (uint64_t)u->first + 2);
	cr_assert(strstr(ra.drops[0].cause.msg, "bad data CRC"), "%s", ra.drops[0].cause.msg);
	for (int i = 0; i < ra.nrec; i++) {
		int64_t id = ra.ids[i];
		/* Frame 3's intact records are numbered from its first on. */
		uint64_t want = id < u->first + 2 || id >= u->first + u->n ? (uint64_t)id
									   : (uint64_t)id - 1;

		cr_assert_neq(id, u->first + 2);
		cr_assert_eq(ra.index[i], want, "record %lld numbered %llu", (long long)id,
			     (unsigned long long)ra.index[i]);
	}
	/* Fail mode: the error as before, naming frame and record. */
	cr_assert_eq(rc.ret, -EBADMSG);
	cr_assert_eq(rc.nrec, u->first + 2);
	cr_assert_eq(rc.err.frame, 3);
	cr_assert_eq(rc.err.record, u->first + 2);
	cr_assert_str_eq(rc.err.msg, ra.drops[0].cause.msg);
	cr_assert_eq(rc.err.offset, ra.drops[0].cause.offset);
	free(img.data);
}

Test(corrupt, indexed_frame_with_broken_framing)
{
	image img;
	const unit *u;

	read_forged(tamper_length, 24, &ra, &rc, &img);
	u = &img.units[3];
	cr_assert_eq(ra.nrec, NREC - 1);
	cr_assert_eq(ra.ndrop, 1);
	cr_assert_eq(ra.drops[0].unit, PF_DROP_SPAN);
	cr_assert_eq(ra.drops[0].cause.frame, 3);
	cr_assert_eq(ra.drops[0].records, -1);
	cr_assert(strstr(ra.drops[0].cause.msg, "bad length CRC"), "%s", ra.drops[0].cause.msg);
	for (int i = 0; i < ra.nrec; i++)
		cr_assert_neq(ra.ids[i], u->first + 2);
	cr_assert_eq(rc.ret, -EBADMSG);
	cr_assert_str_eq(rc.err.msg, ra.drops[0].cause.msg);
	/* The loader's route: the frame walker over the decompressed frame
	 * counts what pf_source delivered of it. */
	{
		pf_shard_index *ix;
		pf_frame_decoder *fd;
		pf_error err;
		const pf_frame_info *fi;
		uint8_t *ubuf;
		uint64_t drops;
		int64_t n;

		cr_assert_eq(pf_shard_index_parse(&ix, img.data, img.len, img.len, &err), 0);
		cr_assert_eq(pf_frame_decoder_create(&fd), 0);
		fi = pf_shard_index_frame(ix, 3);
		ubuf = malloc(fi->uncompressed_size);
		n = pf_frame_decode(fd, fi, img.data + fi->offset, fi->compressed_size, ubuf,
				    fi->uncompressed_size, &err);
		cr_assert_eq(n, fi->uncompressed_size);
		cr_assert_eq(pf_tfr_count_intact(ubuf, (size_t)n, 1 << 20, false, &drops),
			     fi->records - 1);
		cr_assert_eq(drops, 1);
		free(ubuf);
		pf_frame_decoder_free(fd);
		pf_shard_index_free(ix);
	}
	free(img.data);
}

Test(corrupt, indexed_frame_with_more_records_than_its_index)
{
	image img;
	const unit *u;

	read_forged(tamper_extra, 25, &ra, &rc, &img);
	u = &img.units[3];
	cr_assert_eq(ra.nrec, NREC);	/* the extra one (a copy) goes */
	for (int i = 0; i < ra.nrec; i++)
		cr_assert_eq(ra.index[i], (uint64_t)ra.ids[i]);
	cr_assert_eq(ra.ndrop, 1);
	cr_assert_eq(ra.drops[0].unit, PF_DROP_FRAME);
	cr_assert_eq(ra.drops[0].start, u->start);
	cr_assert_eq(ra.drops[0].resume, img.units[4].start);
	cr_assert(strstr(ra.drops[0].cause.msg, "more records than its index"), "%s",
		  ra.drops[0].cause.msg);
	cr_assert_eq(rc.ret, -EBADMSG);
	cr_assert_str_eq(rc.err.msg, ra.drops[0].cause.msg);
	free(img.data);
}

Test(corrupt, indexed_frame_with_fewer_records_than_its_index)
{
	image img;
	const unit *u;

	read_forged(tamper_short, 26, &ra, &rc, &img);
	u = &img.units[3];
	cr_assert_eq(ra.nrec, NREC - 1);
	cr_assert_eq(ra.ndrop, 1);
	cr_assert_eq(ra.drops[0].unit, PF_DROP_FRAME);
	cr_assert_eq(ra.drops[0].records, 1);
	cr_assert_eq(ra.drops[0].start, u->start);
	cr_assert_eq(ra.drops[0].next_record, (uint64_t)u->first + u->n - 1);
	cr_assert(strstr(ra.drops[0].cause.msg, "1 fewer records than its index"), "%s",
		  ra.drops[0].cause.msg);
	cr_assert_eq(rc.ret, -EBADMSG);
	cr_assert_str_eq(rc.err.msg, ra.drops[0].cause.msg);
	free(img.data);
}

/* ------------------------------------------------------------------ */
/* Sniffing and history, at their edges                                 */

/* The next frame's magic cut by the end of a fed buffer, after a damaged
 * head: found across the two. */
Test(corrupt, sniffed_header_across_buffers)
{
	image img;
	damage zero;
	size_t len;
	uint8_t *file;

	make_records(27);
	build_zstd(&img, 12, 8);
	zero = (damage){ DMG_ZERO, 0, img.units[0].end, 0 };
	file = apply(&img, &zero, &len);
	for (uint64_t cut = 1; cut < 6; cut++) {
		read_stream(file, len, (size_t)(img.units[1].start + cut), PF_CORRUPT_SKIP, &ra);
		cr_assert_eq(ra.ret, 0);
		cr_assert_eq(ra.nrec, NREC - img.units[0].n, "cut %llu: %d records",
			     (unsigned long long)cut, ra.nrec);
		cr_assert_eq(ra.ndrop, 1);
		cr_assert_eq(ra.drops[0].resume, img.units[1].start);
	}
	free(file);
	free(img.data);
}

/* No header in the first MiB of a damaged TFRecord file: sniffing stops,
 * and the file is read as TFRecord to its end. */
Test(corrupt, sniffing_stops_after_a_mib)
{
	size_t n = 0, len = 0, cap = (3u << 20) / 2 + 1024;
	uint8_t *file = malloc(cap), pay[3000];
	uint64_t seed = 5;

	while (len + sizeof(pay) + 16 < cap) {
		for (size_t k = 0; k < sizeof(pay); k++)
			pay[k] = (uint8_t)rng_next(&seed);
		len += pf_tfr_encode(file + len, cap - len, pay, sizeof(pay));
		n++;
	}
	file[9] ^= 0x80;	/* record 0's length CRC */
	read_stream(file, len, 65536, PF_CORRUPT_SKIP, &ra);
	cr_assert_eq(ra.ret, 0);
	cr_assert_eq(ra.unknown, (int)n - 1);	/* not Examples: counted as unknown */
	cr_assert_eq(ra.ndrop, 1);
	cr_assert_eq(ra.drops[0].start, 0);
	cr_assert_eq(ra.drops[0].resume, sizeof(pay) + 16);
	free(file);
}

/* A false zstd header close to the end of a damaged TFRecord file: the
 * trial runs into the end; the bytes are read as TFRecord after all. */
Test(corrupt, false_codec_header_at_the_end)
{
	uint8_t file[64 + MAX_PAYLOAD + 16];
	size_t len = 40;

	make_records(28);
	memset(file, 0, sizeof(file));
	memcpy(file + 30, "\x28\xb5\x2f\xfd\x00\x48", 6);
	len += pf_tfr_encode(file + len, sizeof(file) - len, payload[7], plen[7]);
	for (size_t piece = 3; piece <= 4096; piece *= 8) {
		read_stream(file, len, piece, PF_CORRUPT_SKIP, &ra);
		cr_assert_eq(ra.ret, 0);
		cr_assert_eq(ra.nrec, 1, "pieces of %zu", piece);
		cr_assert_eq(ra.ids[0], 7);
		/* Spans before and after the false header, back to back. */
		cr_assert_geq(ra.ndrop, 1);
		cr_assert_eq(ra.drops[0].start, 0);
		for (int i = 1; i < ra.ndrop; i++)
			cr_assert_eq(ra.drops[i].start, ra.drops[i - 1].resume);
		cr_assert_eq(ra.drops[ra.ndrop - 1].resume, 40);
	}
}

/* A zstd frame larger than the history, its last block's size enlarged:
 * zstd takes in the start of the next frame before it fails; that frame
 * is found again in the kept bytes, whatever the buffers. */
Test(corrupt, swallowed_next_frame_found_in_history)
{
	size_t cap = 900u << 10, raw_len = 0, big_n = 0, small_n = 0;
	uint8_t *raw = malloc(cap), *file, pay[2000];
	uint64_t seed = 9;
	size_t big, small, pos, hdr = 0, len;
	ZSTD_CCtx *cc = ZSTD_createCCtx();

	/* Frame A: ~600 KiB of records; frame B: 40 records. */
	while (raw_len < (600u << 10)) {
		for (size_t k = 0; k < sizeof(pay); k++)
			pay[k] = (uint8_t)rng_next(&seed);
		raw_len += pf_tfr_encode(raw + raw_len, cap - raw_len, pay, sizeof(pay));
		big_n++;
	}
	file = malloc(2 * ZSTD_compressBound(cap));
	ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
	big = ZSTD_compress2(cc, file, ZSTD_compressBound(cap), raw, raw_len);
	cr_assert(!ZSTD_isError(big));
	raw_len = 0;
	for (; small_n < 40; small_n++) {
		for (size_t k = 0; k < 100; k++)
			pay[k] = (uint8_t)rng_next(&seed);
		raw_len += pf_tfr_encode(raw + raw_len, cap - raw_len, pay, 100);
	}
	small = ZSTD_compress2(cc, file + big, ZSTD_compressBound(cap), raw, raw_len);
	cr_assert(!ZSTD_isError(small));
	len = big + small;
	/* Walk frame A's blocks to its last one (RFC 8878's header sizes). */
	{
		uint8_t fhd = file[4];
		static const size_t did[4] = { 0, 1, 2, 4 }, fcs[4] = { 0, 2, 4, 8 };
		bool single = fhd & 0x20;

		pos = 5 + (single ? 0 : 1) + did[fhd & 3] +
		      (fhd >> 6 == 0 ? (single ? 1 : 0) : fcs[fhd >> 6]);
	}
	for (;;) {
		uint32_t h = file[pos] | file[pos + 1] << 8 | (uint32_t)file[pos + 2] << 16;
		uint32_t bsize = h >> 3, type = (h >> 1) & 3;

		hdr = pos;
		if (h & 1)
			break;
		pos += 3 + (type == 1 ? 1 : bsize);
	}
	{
		uint32_t h = file[hdr] | file[hdr + 1] << 8 | (uint32_t)file[hdr + 2] << 16;
		uint32_t bsize = (h >> 3) + 3000;	/* 3000 bytes more: B's start */

		cr_assert_lt(bsize, 128u << 10);
		h = (h & 7) | bsize << 3;
		file[hdr] = (uint8_t)h;
		file[hdr + 1] = (uint8_t)(h >> 8);
		file[hdr + 2] = (uint8_t)(h >> 16);
	}
	for (size_t piece = 4096; piece <= (1u << 20); piece *= 16) {
		int small_seen = 0;

		read_stream(file, len, piece, PF_CORRUPT_SKIP, &ra);
		cr_assert_eq(ra.ret, 0);
		/* Records are raw bytes here: those of 100 bytes are B's. */
		small_seen = ra.unknown;
		cr_assert_geq(small_seen, (int)small_n, "pieces of %zu: %d records", piece,
			      small_seen);
		cr_assert_geq(ra.ndrop, 1);
		cr_assert_eq(ra.drops[0].unit, PF_DROP_FRAME);
		cr_assert_eq(ra.drops[0].start, 0);
		cr_assert_eq(ra.drops[ra.ndrop - 1].resume, big, "pieces of %zu", piece);
	}
	ZSTD_freeCCtx(cc);
	free(raw);
	free(file);
}

/* ------------------------------------------------------------------ */
/* Allocation failures in skip mode: each one fails the read with        */
/* -ENOMEM (or is retried), never a crash, a leak or a wrong record.    */

static void alloc_sweep(const uint8_t *file, size_t len, const char *path,
			const result *want, const char *what)
{
	uint64_t base = tu_alloc_live(), n0, count;

	/* How many allocations one read makes. */
	n0 = tu_alloc_count();
	if (path)
		read_source(path, false, 777, PF_CORRUPT_SKIP, &rb);
	else
		read_stream(file, len, 777, PF_CORRUPT_SKIP, &rb);
	count = tu_alloc_count() - n0;
	cr_assert_gt(count, 0);
	cr_assert(same_result(want, &rb), "%s: a clean rerun differs", what);
	for (uint64_t k = 1; k <= count; k++) {
		tu_alloc_fail_at(k);
		if (path)
			read_source(path, false, 777, PF_CORRUPT_SKIP, &rb);
		else
			read_stream(file, len, 777, PF_CORRUPT_SKIP, &rb);
		tu_alloc_fail_at(0);
		CHECK(rb.ret == 0 || rb.ret == -ENOMEM, "%s: allocation %llu failed: %d (%s)",
		      what, (unsigned long long)k, rb.ret, rb.err.msg);
		if (rb.ret == 0)
			CHECK(same_result(want, &rb), "%s: allocation %llu failed, read differs",
			      what, (unsigned long long)k);
		for (int i = 0; i < rb.nrec; i++)
			CHECK(rb.ids[i] == want->ids[i], "%s: allocation %llu: record %d differs",
			      what, (unsigned long long)k, i);
		CHECK(tu_alloc_live() == base, "%s: allocation %llu failed: %llu left", what,
		      (unsigned long long)k, (unsigned long long)(tu_alloc_live() - base));
	}
}

Test(corrupt, allocation_failures)
{
	const char *dir = tu_tmpdir();
	char path[256];
	image img;
	damage d;
	size_t len;
	uint8_t *file;

	make_records(29);
	build_zstd(&img, 12, 2);
	d = (damage){ DMG_FLIP, img.units[4].start + 300, 0, 6 };
	file = apply(&img, &d, &len);
	read_stream(file, len, 777, PF_CORRUPT_SKIP, &ra);
	cr_assert_gt(ra.ndrop, 0);
	alloc_sweep(file, len, NULL, &ra, "zstd");
	free(file);
	free(img.data);

	build_plain(&img);
	d = (damage){ DMG_INSERT, img.units[9].start + 40, 50, 0 };
	file = apply(&img, &d, &len);
	read_stream(file, len, 777, PF_CORRUPT_SKIP, &ra);
	alloc_sweep(file, len, NULL, &ra, "plain");
	free(file);
	free(img.data);

	build_shard(&img, 8192, 0);
	d = (damage){ DMG_FLIP, img.units[2].start + 60, 0, 1 };
	file = apply(&img, &d, &len);
	snprintf(path, sizeof(path), "%s/s.zst", dir);
	tu_write_file(path, file, len);
	read_source(path, false, 777, PF_CORRUPT_SKIP, &ra);
	cr_assert_eq(ra.ndrop, 1);
	alloc_sweep(NULL, 0, path, &ra, "indexed");
	free(file);
	free(img.data);
}
