/* SPDX-License-Identifier: Apache-2.0 */
/* Private to formats/: the feature schema's protobuf form
 * (podfeed.FeatureSchema), which the shard index and the manifest both
 * carry, converted and checked in one place (schema.c). */
#ifndef PF_PB_INTERNAL_H
#define PF_PB_INTERNAL_H

#include "formats_internal.h"
#include "pf_index.pb-c.h"

/* The protobuf form of schema[0..n): *out an array of n pointers to
 * messages whose names are borrowed from schema (one block: pf_free(*out)
 * frees it).  n 0 gives *out NULL.  @return 0 or -ENOMEM. */
int pf_schema_to_pb(const pf_feature_schema *schema, size_t n, Podfeed__FeatureSchema ***out);

/* Whether a decoded entry holds together (a known kind, no more records
 * unset than present): NULL when it does, else what is wrong. */
const char *pf_schema_pb_fault(const Podfeed__FeatureSchema *f);

/* Copy a decoded entry into *dst, its name pf_strdup()ed.  @return 0 or
 * -ENOMEM (dst->name NULL). */
int pf_schema_from_pb(pf_feature_schema *dst, const Podfeed__FeatureSchema *f);

/* lengths.c: the index's RecordLengths entries, each checked (a known
 * version, a name, unique, exactly pb->records counts of at most 32 bits)
 * and copied into *out[0..*n) (pf_lengths_free()); crc_checked false (a
 * version-1 index) refuses any.  at: the index's file offset, for the
 * errors.  @return 0, -EBADMSG, -EPROTONOSUPPORT or -ENOMEM. */
int pf_lengths_from_pb(pf_shard_lengths **out, size_t *n, const Podfeed__ShardIndex *pb,
		       bool crc_checked, uint64_t at, pf_error *err);

#endif
