/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the indexed shard reader: the input is a whole shard file. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
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

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A version 2 index's CRC32C recomputed in a copy of the file, the index
 * where the parser found it (its bytes start at pb, the error's offset;
 * the CRC it read, stored, is the one the error names).
 * @return the copy, or NULL when the tail is not laid out as expected. */
static uint8_t *vouch_for_index(const uint8_t *data, size_t size, uint64_t pb, const char *msg,
				uint64_t *from)
{
	const char *at = strstr(msg, "stored 0x");
	uint8_t *copy;
	uint64_t crc_at;
	uint32_t len;
	unsigned stored;

	if (!at || sscanf(at, "stored 0x%x", &stored) != 1)
		return NULL;
	/* ... protobuf (L bytes) | u32 CRC | u32 L | "PFIC" | seek table:
	 * the CRC sits L bytes after pb, and L 4 bytes after that.  The
	 * protobuf's own bytes may look like such a trailer too (the
	 * campaign of 2026-11-28 made one, corpus/shard/finding-two_trailers,
	 * and one holding the same CRC, finding-two_trailers_same_crc): the
	 * trailer holds the CRC the parser read, and the caller tries each
	 * such one from *from on. */
	for (crc_at = *from; crc_at + 12 <= size; crc_at++) {
		len = le32(data + crc_at + 4);
		if (len == crc_at - pb && !memcmp(data + crc_at + 8, "PFIC", 4) &&
		    le32(data + crc_at) == stored)
			break;
	}
	if (crc_at + 12 > size || !(copy = malloc(size)))
		return NULL;
	*from = crc_at + 1;
	memcpy(copy, data, size);
	len = pf_crc32c(0, data + pb, crc_at - pb);
	for (int i = 0; i < 4; i++)
		copy[crc_at + i] = (uint8_t)(len >> (8 * i));
	return copy;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pf_shard_index *ix = NULL;
	uint8_t *vouched = NULL;
	pf_error err;
	int64_t rc;

	pf_error_clear(&err);
	rc = pf_shard_index_parse(&ix, data, size, size, &err);
	/* Mutations of a version 2 index nearly always break its CRC first;
	 * vouch for the bytes so the field checks behind it get fuzzed too
	 * (the version 1 corpus reaches them without). */
	if (rc == -EBADMSG && strstr(err.msg, "index CRC mismatch")) {
		uint64_t pb = err.offset, from = err.offset;
		char msg[256];
		bool tried = false;

		if (ix)
			abort();
		snprintf(msg, sizeof(msg), "%.200s", err.msg);
		while ((vouched = vouch_for_index(data, size, pb, msg, &from))) {
			tried = true;
			pf_error_clear(&err);
			rc = pf_shard_index_parse(&ix, vouched, size, size, &err);
			if (!(rc == -EBADMSG && strstr(err.msg, "index CRC mismatch"))) {
				data = vouched;
				break;
			}
			free(vouched);
		}
		/* One of the trailers holding the CRC read is the parser's:
		 * the CRC just written there must pass. */
		if (tried && !vouched)
			abort();
	}
	/* With the whole file as tail there is nothing more to ask for. */
	if (rc > 0)
		abort();
	if (rc < 0) {
		if (ix)
			abort();
		free(vouched);
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
	/* The records' lengths of each schema feature, when the index tells
	 * them: told twice the same (checked when parsed, never failing
	 * after). */
	if (pf_shard_index_records(ix) <= (1u << 20)) {
		uint64_t n = pf_shard_index_records(ix);
		uint32_t *a = malloc((n ? n : 1) * sizeof(*a)), *b = malloc((n ? n : 1) * sizeof(*b));

		if (!a || !b)
			abort();
		for (size_t i = 0; i < pf_shard_index_schema_count(ix); i++) {
			const pf_feature_schema *f = pf_shard_index_schema(ix, i);
			int r1 = pf_shard_index_lengths(ix, f->name, a);
			int r2 = pf_shard_index_lengths(ix, f->name, b);

			if (r1 != r2 || (r1 && r1 != -ENOENT) ||
			    (!r1 && memcmp(a, b, (n ? n : 1) * sizeof(*a))))
				abort();
		}
		/* A name no entry and no schema feature has is not told.  ("" is
		 * an Example key like any other: a schema may name it, and then
		 * tells its count; the campaign of 2026-11-28 found one,
		 * corpus/shard/finding-empty_schema_name.) */
		{
			bool named = false;

			for (size_t i = 0; i < pf_shard_index_schema_count(ix); i++)
				named |= !pf_shard_index_schema(ix, i)->name[0];
			if (!named && pf_shard_index_lengths(ix, "", a) != -ENOENT)
				abort();
			if (pf_shard_index_lengths(ix, "no such feature \x01", a) != -ENOENT)
				abort();
		}
		free(a);
		free(b);
	}
	decode_frames(ix, data, size);
	pf_shard_index_free(ix);
	free(vouched);
	return 0;
}
