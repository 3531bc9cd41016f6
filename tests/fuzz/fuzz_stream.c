/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the record stream (detection, gzip/zlib/zstd, framing): never a
 * crash, a hang or a leak.  Fed whole or in pieces, a clean stream gives
 * the same records, and a bad one fails both ways.  (How many records of
 * a corrupt compressed frame come out before the codec notices depends
 * on how its input arrives, so counts are only compared when clean.)
 * Skip mode, fed the same ways: never an error; the same records and
 * drops when read twice in the same pieces (one input in four, chosen by
 * its CRC: the fifth run is the harness's most expendable, issue 30); for
 * a stream fail mode reads cleanly, the same records and no drop; up to
 * fail mode's failure, the records fail mode gave; read as TFRecord, no
 * more records than 16-byte slots in the file, and the same ones whatever
 * the pieces. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pf_formats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KEEP 512	/* records whose running chain is kept */

struct run {
	int ret;
	uint64_t count, drops;
	uint32_t chain, drop_chain;
	uint32_t prefix[KEEP];	/* chain after each of the first records */
	pf_compression comp;
	uint64_t size;
};

static int on_drop(void *ctx, const pf_drop *d)
{
	struct run *r = ctx;
	uint64_t f[4] = { d->unit, d->start, d->resume, d->next_record };

	if (d->start > d->resume || d->cause.code >= 0 || !d->cause.msg[0] ||
	    d->next_record != r->count ||
	    (d->offset_kind == PF_OFFSET_FILE && d->resume > r->size))
		abort();
	r->drops++;
	r->drop_chain = pf_crc32c(r->drop_chain, f, sizeof(f));
	r->drop_chain = pf_crc32c(r->drop_chain, d->cause.msg, strlen(d->cause.msg));
	return 0;
}

/* @return result code (2: stopped at the output cap, not comparable). */
static int run(const uint8_t *data, size_t size, size_t piece, pf_corrupt_policy pol,
	       struct run *out)
{
	pf_recstream_config cfg = { .max_record_size = 1u << 16, .window = 4096,
				    .on_corrupt = pol, .on_drop = on_drop, .on_drop_ctx = out };
	pf_recstream *s;
	pf_record rec;
	pf_error err;
	size_t pos = 0;
	int ret = 0;
	/* Decompression bombs: stop after this much output. */
	const uint64_t max_out = 64u << 20;

	memset(out, 0, sizeof(*out));
	out->size = size;
	if (pf_recstream_create(&s, &cfg) < 0)
		return -1;
	pf_error_clear(&err);
	for (;;) {
		size_t n = size - pos < piece ? size - pos : piece;

		pf_recstream_feed(s, data + pos, n);
		pos += n;
		while ((ret = pf_recstream_next(s, &rec, &err)) == 1) {
			if (rec.index != out->count)
				abort();
			out->chain = pf_crc32c(out->chain, rec.data, rec.len);
			if (out->count < KEEP)
				out->prefix[out->count] = out->chain;
			out->count++;
			if (pf_recstream_total_out(s) > max_out)
				break;
		}
		if (ret != 0 || n == 0 || pf_recstream_total_out(s) > max_out)
			break;
	}
	if (ret == 0 && pf_recstream_total_out(s) <= max_out)
		ret = pf_recstream_finish(s, &err);
	else if (ret == 1)
		ret = 2;	/* stopped early: not comparable */
	if (pol == PF_CORRUPT_SKIP && ret == 0 && pf_recstream_drops(s) != out->drops)
		abort();
	out->comp = pf_recstream_compression(s);
	pf_recstream_free(s);
	out->ret = ret;
	return ret;
}

static bool same(const struct run *a, const struct run *b)
{
	return a->ret == b->ret && a->count == b->count && a->chain == b->chain &&
	       a->drops == b->drops && a->drop_chain == b->drop_chain && a->comp == b->comp;
}

/* Fail mode's records are where skip mode's start. */
static void prefix_of(const struct run *fail, const struct run *skip)
{
	if (fail->ret == 2 || skip->ret == 2 || !fail->count)
		return;
	if (fail->count > skip->count ||
	    (fail->count <= KEEP && skip->prefix[fail->count - 1] != fail->prefix[fail->count - 1]))
		abort();
	if (fail->ret == 0 && (skip->count != fail->count || skip->chain != fail->chain ||
			       skip->drops))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run f1, f2, s1, s2, t;
	int r1 = run(data, size, size ? size : 1, PF_CORRUPT_FAIL, &f1);
	int r2 = run(data, size, 7, PF_CORRUPT_FAIL, &f2);

	if (r1 != 2 && r2 != 2) {
		if ((r1 < 0) != (r2 < 0))
			abort();
		if (r1 == 0 && (r2 != 0 || f1.count != f2.count || f1.chain != f2.chain))
			abort();
	}

	run(data, size, size ? size : 1, PF_CORRUPT_SKIP, &s1);
	run(data, size, 7, PF_CORRUPT_SKIP, &s2);
	if ((s1.ret != 0 && s1.ret != 2) || (s2.ret != 0 && s2.ret != 2))
		abort();
	prefix_of(&f1, &s1);
	prefix_of(&f2, &s2);
	if ((pf_crc32c(0, data, size) & 3) == 0) {
		run(data, size, 7, PF_CORRUPT_SKIP, &t);
		if (!same(&s2, &t))
			abort();
	}
	if (s1.ret == 0 && s2.ret == 0 && s1.comp == PF_COMP_NONE && s2.comp == PF_COMP_NONE) {
		if (s1.count * 16 > size || !same(&s1, &s2))
			abort();
	}
	return 0;
}
