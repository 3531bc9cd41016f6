/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz harness: the dataset manifest (formats/manifest.c).
 *
 * The first byte picks how the rest is used:
 *   even  as a whole file (envelope, CRC, version, zstd, protobuf);
 *   odd   as the protobuf payload, compressed and wrapped in a correct
 *         envelope, so that the unpack and the field checks are reached
 *         past the CRC.
 * The harness aborts when a refusal comes without a message, or when a
 * manifest that parses does not survive build -> encode -> parse
 * unchanged (its tails too: issue 38). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "pf_formats.h"

#define CHECK(cond)                                                             \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz_manifest: %s:%d: %s\n", __FILE__, \
				__LINE__, #cond);                               \
			abort();                                                \
		}                                                               \
	} while (0)

static bool same_shard(const pf_manifest_shard *a, const pf_manifest_shard *b)
{
	if (strcmp(a->path, b->path) || a->size != b->size || a->mtime_ns != b->mtime_ns ||
	    a->format != b->format || a->records != b->records ||
	    a->max_record != b->max_record || a->alignment != b->alignment ||
	    a->nframes != b->nframes)
		return false;
	return !a->nframes || !memcmp(a->frames, b->frames, a->nframes * sizeof(*a->frames));
}

/* Build m again and parse the encoding: the same manifest. */
static void round_trip(const pf_manifest *m)
{
	pf_manifest_builder *b;
	pf_manifest *again;
	pf_error err;
	uint8_t *buf;
	int64_t n;

	pf_error_clear(&err);
	CHECK(pf_manifest_builder_create(&b) == 0);
	for (size_t i = 0; i < pf_manifest_shards(m); i++) {
		uint32_t tl, tc;

		CHECK(pf_manifest_builder_add(b, pf_manifest_get(m, i), &err) == 0);
		if (pf_manifest_shard_tail(m, i, &tl, &tc))
			CHECK(pf_manifest_builder_set_tail(b, tl, tc) == 0);
	}
	/* One schema added whole merges into itself unchanged. */
	if (pf_manifest_schema_count(m) || pf_manifest_schema_records(m))
		CHECK(pf_manifest_builder_add_schema(b, pf_manifest_schema(m, 0),
						     pf_manifest_schema_count(m),
						     pf_manifest_schema_records(m)) == 0);
	n = pf_manifest_builder_encode(b, NULL, 0, &err);
	CHECK(n > 0);
	buf = malloc((size_t)n);
	CHECK(buf);
	CHECK(pf_manifest_builder_encode(b, buf, (size_t)n, &err) == n);
	CHECK(pf_manifest_parse(&again, buf, (size_t)n, &err) == 0);
	CHECK(pf_manifest_shards(again) == pf_manifest_shards(m));
	CHECK(pf_manifest_records(again) == pf_manifest_records(m));
	for (size_t i = 0; i < pf_manifest_shards(m); i++) {
		uint32_t l1 = 0, c1 = 0, l2 = 0, c2 = 0;
		bool t1 = pf_manifest_shard_tail(m, i, &l1, &c1);

		CHECK(same_shard(pf_manifest_get(m, i), pf_manifest_get(again, i)));
		CHECK(t1 == pf_manifest_shard_tail(again, i, &l2, &c2) && l1 == l2 && c1 == c2);
		CHECK(!t1 || l1 <= pf_manifest_get(m, i)->size);
	}
	CHECK(pf_manifest_schema_count(again) == pf_manifest_schema_count(m));
	for (size_t i = 0; i < pf_manifest_schema_count(m); i++) {
		const pf_feature_schema *x = pf_manifest_schema(m, i);
		const pf_feature_schema *y = pf_manifest_schema(again, i);

		CHECK(!strcmp(x->name, y->name) && x->kind == y->kind &&
		      x->records_present == y->records_present && x->max_len == y->max_len);
	}
	pf_manifest_free(again);
	free(buf);
	pf_manifest_builder_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pf_manifest *m = NULL;
	pf_error err;
	uint8_t *blob;
	size_t len;
	int ret;

	if (size < 1 || size > (1u << 20))
		return 0;
	if (data[0] & 1) {
		size_t bound = ZSTD_compressBound(size - 1), clen;
		uint32_t u;
		uint64_t v;

		blob = malloc(PF_MANIFEST_HEADER + bound);
		CHECK(blob);
		clen = ZSTD_compress(blob + PF_MANIFEST_HEADER, bound, data + 1, size - 1, 1);
		CHECK(!ZSTD_isError(clen));
		memcpy(blob, "PFMF", 4);
		u = PF_MANIFEST_VERSION;
		memcpy(blob + 4, &u, 4);
		v = size - 1;
		memcpy(blob + 8, &v, 8);
		v = clen;
		memcpy(blob + 16, &v, 8);
		u = pf_crc32c(0, blob + PF_MANIFEST_HEADER, clen);
		memcpy(blob + 24, &u, 4);
		memset(blob + 28, 0, 4);
		len = PF_MANIFEST_HEADER + clen;
	} else {
		len = size - 1;
		blob = malloc(len ? len : 1);
		CHECK(blob);
		memcpy(blob, data + 1, len);
	}
	pf_error_clear(&err);
	ret = pf_manifest_parse(&m, blob, len, &err);
	CHECK(ret == 0 || ((ret == -EBADMSG || ret == -EPROTONOSUPPORT || ret == -ENOMEM) &&
			   err.code == ret && err.msg[0]));
	CHECK((ret == 0) == (m != NULL));
	if (m)
		round_trip(m);
	pf_manifest_free(m);
	free(blob);
	return 0;
}
