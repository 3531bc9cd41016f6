/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the shard tests (test_formats_shard: writing and
 * reading shards; test_formats_shard_bad: damaged and forged ones): a
 * writer sink in memory, record sets, shards written and parsed, and the
 * checks of a shard's contents and layout. */
#ifndef PF_SHARD_UTIL_H
#define PF_SHARD_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "formats_internal.h"
#include "pf_formats.h"

/* An assertion for loops: the suite runs with --full-stats, where every
 * cr_assert is reported to the runner, which costs seconds per million. */
#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond))                                                 \
			cr_assert_fail(__VA_ARGS__);                         \
	} while (0)

struct membuf {
	uint8_t *data;
	size_t len, cap;
	int fail_after;		/* fail the Nth write (1-based); 0: never */
	int writes;
};

/* A set of record payloads. */
struct recset {
	uint8_t **data;
	size_t *len;
	size_t n, cap;
};

int mem_write(void *ctx, const void *buf, size_t len);
void recset_add(struct recset *rs, const void *data, size_t len);
void recset_free(struct recset *rs);
uint64_t rng_next(uint64_t *s);
void synth_records(struct recset *rs, size_t n, size_t maxlen, uint64_t seed);
void random_bytes(uint8_t *p, size_t len, uint64_t seed);
void fixture_records(struct recset *rs, const char *name);
uint8_t *framed_stream(const struct recset *rs, size_t *out_len);
void write_shard(struct membuf *m, const struct recset *rs,
			const pf_shard_writer_config *cfg, const pf_schema *schema);
int64_t parse_tail(pf_shard_index **ix, const uint8_t *file, size_t len,
			  size_t first_tail, pf_error *err);
pf_shard_index *parse_ok(const uint8_t *file, size_t len);
int64_t parse_whole(const uint8_t *file, size_t len, pf_error *err);
void check_contents(const uint8_t *file, size_t len,
			   const pf_shard_index *ix, const struct recset *rs);
void check_zstd_cli(const uint8_t *file, size_t len, const struct recset *rs);
uint32_t seek_count(const uint8_t *file, size_t len);
void seek_entry(const uint8_t *file, size_t len, uint32_t i,
		       uint32_t *csize, uint32_t *usize);
void check_layout(const uint8_t *file, size_t len, const pf_shard_index *ix);
void roundtrip(const struct recset *rs, const pf_shard_writer_config *cfg,
		      struct membuf *m, pf_shard_index **ix_out);

#endif /* PF_SHARD_UTIL_H */
