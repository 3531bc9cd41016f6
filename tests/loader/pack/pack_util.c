/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>

#include "pack_util.h"
#include "testutil.h"

const char *pu_text_dataset(unsigned records, unsigned plain_shards, unsigned median,
			    unsigned max, unsigned seed, unsigned z_shards, const char *frame_size)
{
	const char *d = tu_tmpdir(), *st = tu_env_tool("SHARDTOOL");

	cr_assert_eq(tu_system("%s synth --kind text --records %u --shards %u --median-tokens %u "
			       "--max-tokens %u --seed %u --out %s/plain >/dev/null && %s convert "
			       "--out %s/z --shards %u --frame-size %s %s/plain >/dev/null", st,
			       records, plain_shards, median, max, seed, d, st, d, z_shards,
			       frame_size, d), 0);
	return d;
}

uint64_t pu_batch_digest(const pf_batch *b)
{
	uint64_t d = (uint64_t)b->epoch << 48 ^ b->step << 24 ^ b->global_step ^
		     (uint64_t)b->epoch_end << 63;

	for (uint32_t c = 0; c < b->cores; c++)
		for (uint32_t t = 0; t < b->core[c].ntensors; t++) {
			const pf_tensor *tt = &b->core[c].tensors[t];

			d = d * 0x100000001b3ull ^
			    pf_crc32c(0, tt->data, (size_t)b->per_core_batch * tt->len * 4);
		}
	return d;
}
