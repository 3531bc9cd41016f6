/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the record stream (detection, gzip/zlib/zstd, framing): never a
 * crash, a hang or a leak.  Fed whole or in pieces, a clean stream gives
 * the same records, and a bad one fails both ways.  (How many records of
 * a corrupt compressed frame come out before the codec notices depends
 * on how its input arrives, so counts are only compared when clean.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pf_formats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* @return result code; *count and *chain describe the records. */
static int run(const uint8_t *data, size_t size, size_t piece, uint64_t *count,
	       uint32_t *chain)
{
	pf_recstream_config cfg = { .max_record_size = 1u << 16, .window = 4096 };
	pf_recstream *s;
	pf_record rec;
	pf_error err;
	size_t pos = 0;
	int ret = 0;
	/* Decompression bombs: stop after this much output. */
	const uint64_t max_out = 64u << 20;

	*count = 0;
	*chain = 0;
	if (pf_recstream_create(&s, &cfg) < 0)
		return -1;
	pf_error_clear(&err);
	for (;;) {
		size_t n = size - pos < piece ? size - pos : piece;

		pf_recstream_feed(s, data + pos, n);
		pos += n;
		while ((ret = pf_recstream_next(s, &rec, &err)) == 1) {
			(*count)++;
			*chain = pf_crc32c(*chain, rec.data, rec.len);
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
	pf_recstream_free(s);
	return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t n1, n2;
	uint32_t c1, c2;
	int r1 = run(data, size, size ? size : 1, &n1, &c1);
	int r2 = run(data, size, 7, &n2, &c2);

	if (r1 == 2 || r2 == 2)
		return 0;
	if ((r1 < 0) != (r2 < 0))
		abort();
	if (r1 == 0 && (r2 != 0 || n1 != n2 || c1 != c2))
		abort();
	return 0;
}
