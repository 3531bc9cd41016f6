/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz TFRecord framing: the incremental reader, fed in pieces whose size
 * comes from the input, must agree exactly with one-shot parsing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pf_formats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORD (1u << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pf_tfr_config cfg = { .max_record_size = MAX_RECORD };
	pf_tfr_reader *r;
	pf_error err, err1;
	pf_record rec, ref;
	size_t piece, pos = 0, off = 0;
	int ret = 0, ref_ret = 0;
	uint64_t count = 0;

	if (size < 1)
		return 0;
	piece = (size_t)data[0] % 32 + 1;
	data++;
	size--;
	if (pf_tfr_reader_create(&r, &cfg) < 0)
		return 0;
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
			count++;
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
	return 0;
}
