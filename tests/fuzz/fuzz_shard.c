/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the indexed shard reader: the input is a whole shard file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pf_formats.h"

/* Bigger frames are valid but would only make the fuzzer slow. */
#define FUZZ_MAX_FRAME (16u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void decode_frames(const pf_shard_index *ix, const uint8_t *file,
			  size_t size)
{
	pf_frame_decoder *d;
	pf_error err;

	if (pf_frame_decoder_create(&d))
		return;
	for (uint32_t i = 0; i < pf_shard_index_frames(ix); i++) {
		const pf_frame_info *fi = pf_shard_index_frame(ix, i);
		uint8_t *dst;
		int64_t n;
		size_t pos = 0;

		/* The parser promised the frame lies inside the file. */
		if (fi->offset > size || fi->compressed_size > size - fi->offset)
			abort();
		if (fi->uncompressed_size > FUZZ_MAX_FRAME)
			continue;
		dst = malloc(fi->uncompressed_size ? fi->uncompressed_size : 1);
		if (!dst)
			break;
		pf_error_clear(&err);
		n = pf_frame_decode(d, fi, file + fi->offset, fi->compressed_size,
				    dst, fi->uncompressed_size, &err);
		if (n == -EBADMSG) {
			/* Mutations nearly always break the CRC first; vouch
			 * for the bytes so the zstd checks behind it get
			 * fuzzed too. */
			pf_frame_info forged = *fi;

			forged.crc32c = pf_crc32c(0, file + fi->offset,
						  fi->compressed_size);
			n = pf_frame_decode(d, &forged, file + fi->offset,
					    fi->compressed_size, dst,
					    fi->uncompressed_size, &err);
		}
		if (n >= 0 && (uint64_t)n != fi->uncompressed_size)
			abort();
		while (n > 0 && pos < (size_t)n) {
			pf_record rec;
			int64_t used = pf_tfr_parse(dst + pos, (size_t)n - pos, pos,
						    PF_MAX_RECORD_DEFAULT, &rec, &err);

			if (used <= 0)
				break;
			pos += (size_t)used;
		}
		free(dst);
	}
	pf_frame_decoder_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pf_shard_index *ix = NULL;
	pf_error err;
	int64_t rc;

	pf_error_clear(&err);
	rc = pf_shard_index_parse(&ix, data, size, size, &err);
	/* With the whole file as tail there is nothing more to ask for. */
	if (rc > 0)
		abort();
	if (rc < 0) {
		if (ix)
			abort();
		return 0;
	}
	for (uint64_t r = 0; r < pf_shard_index_records(ix); r += 1 + r / 2) {
		int64_t f = pf_shard_index_find_record(ix, r);
		const pf_frame_info *fi;

		if (f < 0)
			abort();
		fi = pf_shard_index_frame(ix, (uint32_t)f);
		if (!fi || r < fi->first_record || r - fi->first_record >= fi->records)
			abort();
	}
	if (pf_shard_index_data_end(ix) > size)
		abort();
	for (size_t i = 0; i < pf_shard_index_schema_count(ix); i++) {
		const pf_feature_schema *f = pf_shard_index_schema(ix, i);

		if (!f || !f->name || strlen(f->name) > size ||
		    f->kind > PF_KIND_INT64)
			abort();
	}
	decode_frames(ix, data, size);
	pf_shard_index_free(ix);
	return 0;
}
