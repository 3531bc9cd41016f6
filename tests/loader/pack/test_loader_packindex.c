/* SPDX-License-Identifier: Apache-2.0 */
/* Packing planned from the shards' indexes (the record lengths `shardtool
 * convert` writes): the same steps and the same batches as planned from
 * the records, on one host and on 4 emulated, shuffled, in both modes,
 * with and without the manifest; stream files and skip mode plan from the
 * records, and the metrics say which. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "pack_util.h"
#include "testutil.h"

/* 3,000 text records (median 40 tokens, to 300): plain in d/plain (3
 * stream files), indexed in d/z (5 shards and the manifest). */
static const char *text_dataset(void)
{
	return pu_text_dataset(3000, 3, 40, 300, 4, 5, "16K");
}

/* The shuffle a shuffled epoch() takes (the tests of the global one set it). */
static pf_shuffle_mode shuffle_mode = PF_SHUFFLE_WINDOW;

typedef struct run {
	uint64_t steps, steps_per_epoch, digest, from_index, values, dropped;
} run;

/* A packing loader's epoch: every batch's bytes digested. */
static run epoch(const char *path, uint32_t hosts, uint32_t host, bool shuffle,
		 pf_pack_mode mode, pf_corrupt_policy corrupt, bool no_manifest)
{
	const char *paths[] = { path };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 2,
				 .cores_per_host = 2, .features = "tokens:int32[*],targets:int32[*]",
				 .pack_length = 128, .pack_mode = mode, .shuffle = shuffle,
				 .seed = 11, .num_hosts = hosts, .host_index = host, .threads = 2,
				 .on_corrupt = corrupt, .ignore_manifest = no_manifest,
				 .shuffle_mode = shuffle ? shuffle_mode : PF_SHUFFLE_WINDOW };
	pf_loader_metrics m;
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	run r = { .digest = 1469598103934665603ull };
	int ret;

	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while ((ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++)
			for (uint32_t t = 0; t < b->core[c].ntensors; t++) {
				const pf_tensor *tt = &b->core[c].tensors[t];

				r.digest = pf_crc32c((uint32_t)r.digest, tt->data,
						     (size_t)b->per_core_batch * tt->len * 4) ^
					   (r.digest << 32);
			}
		r.steps++;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "%s", pf_loader_last_error(l)->msg);
	pf_loader_get_metrics(l, &m);
	r.steps_per_epoch = m.steps_per_epoch;
	r.from_index = m.pack_lengths_from_index;
	r.values = m.pack_values;
	r.dropped = m.pack_rows_dropped;
	pf_loader_free(l);
	return r;
}

static void same(const run *a, const run *b, const char *what)
{
	cr_assert_eq(a->steps, b->steps, "%s: %llu steps, %llu", what,
		     (unsigned long long)a->steps, (unsigned long long)b->steps);
	cr_assert_eq(a->steps_per_epoch, b->steps_per_epoch, "%s", what);
	cr_assert_eq(a->values, b->values, "%s", what);
	cr_assert_eq(a->dropped, b->dropped, "%s", what);
	cr_assert_eq(a->digest, b->digest, "%s: other batches", what);
}

/* One host, in order: the indexed shards (planned from their indexes,
 * from the manifest or without it) give the batches the plain stream
 * files (planned from their records) give. */
Test(packindex, one_host_index_plan_is_the_records_plan)
{
	const char *d = text_dataset();
	char z[1024], plain[1024];

	snprintf(z, sizeof(z), "%s/z", d);
	snprintf(plain, sizeof(plain), "%s/plain", d);
	for (int mode = 0; mode < 2; mode++) {
		run a = epoch(z, 1, 0, false, mode, PF_CORRUPT_FAIL, false);
		run b = epoch(z, 1, 0, false, mode, PF_CORRUPT_FAIL, true);
		run c = epoch(plain, 1, 0, false, mode, PF_CORRUPT_FAIL, false);

		cr_assert_eq(a.from_index, 3000);
		cr_assert_eq(b.from_index, 3000);
		cr_assert_eq(c.from_index, 0);
		cr_assert_gt(a.steps, 10);
		same(&a, &b, "manifest / no manifest");
		same(&a, &c, "indexed / plain");
	}
}

/* Four hosts, shuffled: each host's plan from the indexes (fail mode) is
 * its plan from the records (skip mode reads them), steps equal on every
 * host. */
Test(packindex, four_hosts_shuffled_index_plan_is_the_records_plan)
{
	const char *d = text_dataset();
	char z[1024];

	snprintf(z, sizeof(z), "%s/z", d);
	for (int mode = 0; mode < 2; mode++) {
		uint64_t steps = 0;

		for (uint32_t h = 0; h < 4; h++) {
			run a = epoch(z, 4, h, true, mode, PF_CORRUPT_FAIL, false);
			run b = epoch(z, 4, h, true, mode, PF_CORRUPT_SKIP, false);

			cr_assert_eq(a.from_index, 3000);
			cr_assert_eq(b.from_index, 0);
			same(&a, &b, "index / records");
			if (h == 0)
				steps = a.steps;
			cr_assert_eq(a.steps, steps, "host %u", h);
			cr_assert_gt(a.steps, 2);
		}
	}
}

/* The same with the global shuffle: skip mode's pass over the records
 * for their lengths reads them in file order whatever the loader's
 * shuffle (it once kept the global one, and planned the lengths of
 * shuffled records as if in order: other steps, rows dropped). */
Test(packindex, four_hosts_global_shuffle_index_plan_is_the_records_plan)
{
	const char *d = text_dataset();
	char z[1024];

	snprintf(z, sizeof(z), "%s/z", d);
	shuffle_mode = PF_SHUFFLE_GLOBAL;
	for (int mode = 0; mode < 2; mode++)
		for (uint32_t h = 0; h < 4; h++) {
			run a = epoch(z, 4, h, true, mode, PF_CORRUPT_FAIL, false);
			run b = epoch(z, 4, h, true, mode, PF_CORRUPT_SKIP, false);

			cr_assert_eq(a.from_index, 3000);
			cr_assert_eq(b.from_index, 0);
			same(&a, &b, "index / records, global shuffle");
			cr_assert_gt(a.steps, 2);
		}
}

/* loadbench says where the plan came from. */
Test(packindex, loadbench_says_where_the_plan_came_from)
{
	const char *d = text_dataset();
	char args[2048];

	snprintf(args, sizeof(args), "--quiet --features tokens:int32[*] --pack 256 "
		 "--per-core-batch 2 %s/z", d);
	tu_expect_run(tu_env_tool("LOADBENCH"), args, 0, "planned from the shards' indexes");
	snprintf(args, sizeof(args), "--quiet --features tokens:int32[*] --pack 256 "
		 "--per-core-batch 2 %s/plain", d);
	tu_expect_run(tu_env_tool("LOADBENCH"), args, 0, "planned from the records");
	snprintf(args, sizeof(args), "--quiet --json --features tokens:int32[*] --pack 256 "
		 "--per-core-batch 2 %s/z", d);
	tu_expect_run(tu_env_tool("LOADBENCH"), args, 0, "\"lengths_from_index\":3000");
}
