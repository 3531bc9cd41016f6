/* SPDX-License-Identifier: Apache-2.0 */
/* The loader end-to-end tests' shared helpers (pipeline_util.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline_util.h"
#include "testutil.h"

void pl_run(const char *dir, pf_loader_config *cfg, uint64_t nids, pl_run_result *r)
{
	const char *paths[1] = { dir };
	pf_loader *l;
	pf_batch *b;
	pf_loader_metrics m;

	memset(r, 0, sizeof(*r));
	r->seen = calloc(nids ? nids : 1, 1);
	cfg->paths = paths;
	cfg->npaths = 1;
	if (!cfg->features)
		cfg->features = "id:int64[1],v:float32[4]:pad=-1";
	pf_error_clear(&r->err);
	r->ret = pf_loader_create(&l, cfg, &r->err);
	if (r->ret < 0)
		return;
	while ((r->ret = pf_loader_next(l, &b)) == 1) {
		cr_assert_eq(b->cores, cfg->cores_per_host ? cfg->cores_per_host : 1);
		cr_assert_eq(b->global_step, r->steps);
		cr_assert_eq(b->epoch_start, b->step == 0);
		for (uint32_t c = 0; c < b->cores; c++) {
			const pf_core_batch *cb = &b->core[c];
			const int64_t *ids = cb->tensors[0].data;
			const float *v = cb->tensors[1].data;

			r->digest = pf_crc32c(r->digest, cb->block, cb->block_bytes);
			for (uint32_t i = 0; i < b->per_core_batch; i++) {
				cr_assert_lt((uint64_t)ids[i], nids);
				r->seen[ids[i]]++;
				/* Features of one record stay together. */
				cr_assert_eq(v[i * 4], (float)ids[i]);
				cr_assert_eq(v[i * 4 + 3], -1.0f, "padding");
			}
			r->records += b->per_core_batch;
		}
		r->steps++;
		pf_loader_release(l, b);
	}
	if (r->ret < 0)
		r->err = *pf_loader_last_error(l);
	pf_loader_get_metrics(l, &m);
	r->dropped = m.remainder_dropped;
	r->files_direct = m.files_direct;
	r->m = m;
	pf_loader_free(l);
}

const char *pl_uneven_dataset(uint64_t *nids)
{
	const char *d = tu_tmpdir();
	char p[512];
	uint64_t id = 0;
	/* One shard of 10 records, one of 10,000, two empty, and some in
	 * between, with small frames so hosts split inside shards. */
	const uint64_t counts[] = { 10, 10000, 0, 777, 0, 3001, 1 };

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		snprintf(p, sizeof(p), "%s/s%02zu.tfrecord.zst", d, i);
		tu_write_id_shard(p, id, counts[i], 4096, 0);
		id += counts[i];
	}
	*nids = id;
	return d;
}
