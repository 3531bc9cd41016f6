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

/* The parser's own words for a version 2 index whose CRC32C fails: its
 * message starts with them (a message may quote bytes of the index, a
 * feature name holding "index CRC mismatch" say, but never first), and
 * its offset is the first byte the CRC covers. */
#define INDEX_CRC_FAILED "index CRC mismatch ("

static bool index_crc_failed(int64_t rc, const pf_error *err)
{
	return rc == -EBADMSG && err->offset_kind == PF_OFFSET_FILE &&
	       !strncmp(err->msg, INDEX_CRC_FAILED, strlen(INDEX_CRC_FAILED));
}

/*
 * A version 2 index's CRC32C recomputed in a copy of the file, where the
 * format has it (docs/formats.md, "The index frame"; one reading, no
 * search: issue 40):
 *
 *   pb - 8: u32 PF_SKIP_INDEX, u32 S | pb: protobuf, L = S - 12 bytes |
 *   u32 CRC32C of those L bytes | u32 L | "PFIC" | the seek table frame
 *
 * pb is the failure's offset.  The parser checked the header, the
 * trailer and that the seek table follows before it checked the CRC, so
 * each is a promise here: a file where they disagree is an abort.
 * @return the copy (the caller frees).
 */
static uint8_t *vouch_for_index(const uint8_t *data, size_t size, uint64_t pb)
{
	uint64_t len, crc_at;
	uint8_t *copy;
	uint32_t crc;

	if (pb < 8 || pb > size || le32(data + pb - 8) != 0x184D2A5Bu ||
	    le32(data + pb - 4) < 12 || le32(data + pb - 4) > size - pb)
		abort();
	len = le32(data + pb - 4) - 12;
	crc_at = pb + len;
	if (le32(data + crc_at + 4) != len || memcmp(data + crc_at + 8, "PFIC", 4) ||
	    crc_at + 12 + 8 > size || le32(data + crc_at + 12) != 0x184D2A5Eu)
		abort();
	copy = malloc(size);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	crc = pf_crc32c(0, data + pb, len);
	for (int i = 0; i < 4; i++)
		copy[crc_at + i] = (uint8_t)(crc >> (8 * i));
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
	 * (the version 1 corpus reaches them without).  The CRC written where
	 * the format has it must pass: the parser and the format agree on
	 * where it lives and what it covers. */
	if (index_crc_failed(rc, &err)) {
		if (ix)
			abort();
		vouched = vouch_for_index(data, size, err.offset);
		pf_error_clear(&err);
		rc = pf_shard_index_parse(&ix, vouched, size, size, &err);
		if (index_crc_failed(rc, &err)) {
			fprintf(stderr, "fuzz_shard: the CRC written where the format has it "
				"fails: %s\n", err.msg);
			abort();
		}
		data = vouched;
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
