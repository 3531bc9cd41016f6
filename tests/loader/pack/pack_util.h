/* SPDX-License-Identifier: Apache-2.0 */
/* For the packing loader's tests (test_loader_packindex, _packresume,
 * _packdirect): a text dataset from `shardtool synth --kind text` and a
 * digest of a batch. */
#ifndef PF_TESTS_PACK_UTIL_H
#define PF_TESTS_PACK_UTIL_H

#include <stdint.h>

#include "podfeed.h"

/* records text records (median tokens, to max; seed) in a new temporary
 * directory d: in plain_shards stream files under d/plain, converted to
 * z_shards indexed shards of frame_size frames (and the manifest) under
 * d/z.  @return d. */
const char *pu_text_dataset(unsigned records, unsigned plain_shards, unsigned median,
			    unsigned max, unsigned seed, unsigned z_shards, const char *frame_size);

/* A batch's numbers (epoch, step, global step, epoch end) and every
 * tensor's bytes (4-byte values: packed features are int32 here). */
uint64_t pu_batch_digest(const pf_batch *b);

#endif
