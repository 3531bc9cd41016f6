/* SPDX-License-Identifier: Apache-2.0 */
/* Private to loader/: what the spec's files share (spec_text.c parses,
 * spec_apply.c preprocesses, spec_fast.c decodes), so that both decode
 * paths preprocess with the very same code. */
#ifndef PF_SPEC_INTERNAL_H
#define PF_SPEC_INTERNAL_H

#include "podfeed.h"

/* 2^63 and 2^31 as doubles: the first values outside int64 / int32. */
#define PF_TWO63 9223372036854775808.0
#define PF_TWO31 2147483648.0

/* v rounded up to a multiple of a (a power of two): a feature's offset in
 * a row is one of its dtype size, a row's length one of 8. */
static inline size_t pf_spec_align(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* The range integer values of fs are clamped to: the dtype's, or the
 * clip's (int32/int64 dtypes). */
void pf_spec_int_bounds(const pf_feature_spec *fs, int64_t *lo, int64_t *hi);
/* Values [n, fs->len) of out set to the pad. */
void pf_spec_pad_from(const pf_feature_spec *fs, uint8_t *out, uint32_t n);
/* One feature (f NULL: absent) into out, as pf_spec_apply_to() does it.
 * @return 0, or -ENOMSG (missing, no default) or -EBADMSG (wrong kind)
 * with err. */
int pf_spec_apply_one(const pf_feature_spec *fs, const pf_feature *f,
		      uint8_t *out, pf_error *err);

/* Check spec against a schema of n features inferred from `records`
 * records (a shard's index, or a manifest's merged schema) of the file
 * path (whose: "shard's", "manifest's", for the message): every feature
 * without a default must be in every record.
 * @return 0 (also when there is no schema), or -ENOMSG with err naming
 * the feature, the file and the schema's features (and a near name). */
int pf_spec_check_schema(const pf_spec *spec, const pf_feature_schema *schema, size_t n,
			 uint64_t records, const char *path, const char *whose,
			 pf_error *err);

/* pf_spec_decode() without its closing store fence: rows it streamed
 * (non-temporal stores) may not yet be visible to other threads.  The
 * loader decodes a chunk's records this way and calls pf_spec_fence()
 * once before it publishes them. */
int pf_spec_decode_unfenced(const pf_spec *spec, const void *rec, size_t len,
			    pf_arena *arena, uint8_t *const dst[], pf_error *err);
void pf_spec_fence(void);

#endif
