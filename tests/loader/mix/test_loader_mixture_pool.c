/* SPDX-License-Identifier: Apache-2.0 */
/* A mixture's sources decoded by one pool of the threads asked for
 * (loader/decode.c, pf_decode_pool): the batches are the same as with
 * each source's own decode threads (PODFEED_MIX_POOL=0, the way before),
 * the mixture runs the threads asked for, a source that fails fails the
 * mixture naming it (the pool going on with the others), and a mixture
 * freed mid-run stops its pool; and a mixture's next() latencies are in
 * its metrics. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mix_util.h"
#include "podfeed.h"
#include "testutil.h"

typedef struct outcome {
	uint64_t steps;
	uint32_t crc;
	unsigned threads;	/* the metrics' decode threads */
} outcome;

static void run(pf_loader_config cfg, bool pooled, outcome *o)
{
	pf_loader_metrics mt;
	pf_loader *l;
	pf_batch *b;
	int ret;

	cr_assert_eq(setenv("PODFEED_MIX_POOL", pooled ? "1" : "0", 1), 0);
	l = mu_create(cfg, "id:int64[1]", 0, NULL, 0);
	memset(o, 0, sizeof(*o));
	while ((ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++)
			o->crc = pf_crc32c(o->crc, b->core[c].block, b->core[c].block_bytes);
		o->steps++;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "next: %s", ret < 0 ? pf_loader_last_error(l)->msg : "");
	pf_loader_get_metrics(l, &mt);
	o->threads = mt.decode_threads;
	/* The consumer's next() calls, each in the latency histogram. */
	{
		uint64_t calls = 0;

		for (size_t i = 0; i < PF_IO_HIST_BUCKETS; i++)
			calls += mt.next_hist[i];
		cr_assert_eq(calls, o->steps);
		cr_assert_gt(mt.next_wait_ns, 0);
	}
	pf_loader_free(l);
}

Test(mixture_pool, the_batches_of_the_sources_own_threads_with_the_threads_asked, .timeout = 300)
{
	for (unsigned threads = 1; threads <= 3; threads++)
		for (int shuffle = 0; shuffle < 2; shuffle++)
			for (int sample = 0; sample < 2; sample++)
				for (uint32_t h = 0; h < 4; h += 3) {
					pf_loader_config cfg = {
						.per_core_batch = 8, .cores_per_host = 2,
						.num_hosts = 4, .host_index = h, .epochs = 2,
						.shuffle = shuffle, .shuffle_window = 256,
						.threads = threads, .seed = 9,
						.mix = sample ? PF_MIX_SAMPLE : PF_MIX_STRATIFIED,
					};
					outcome pool, own;

					run(cfg, true, &pool);
					run(cfg, false, &own);
					cr_assert_gt(pool.steps, 0);
					cr_assert_eq(pool.steps, own.steps);
					cr_assert_eq(pool.crc, own.crc,
						     "threads %u shuffle %d sample %d host %u: other "
						     "batches", threads, shuffle, sample, h);
					cr_assert_eq(pool.threads, threads,
						     "the pool ran %u threads, %u asked",
						     pool.threads, threads);
					/* Without it: each source its share, rounded up. */
					cr_assert_geq(own.threads, 3);
				}
}

Test(mixture_pool, a_failing_source_fails_the_mixture_naming_it, .timeout = 120)
{
	const char *good = tu_id_shards(0, 3000, 2, 2048);
	const char *bad = tu_id_shards(MU_ID_BASE, 3000, 2, 2048);
	const char *p0[1] = { good }, *p1[1] = { bad };
	pf_loader_source src[2] = {
		{ .name = "web", .paths = p0, .npaths = 1, .weight = 0.5 },
		{ .name = "code", .paths = p1, .npaths = 1, .weight = 0.5 },
	};
	pf_loader_config cfg = { .sources = src, .nsources = 2, .features = "id:int64[1]",
				 .per_core_batch = 16, .epochs = 3, .threads = 2 };
	char path[512];
	struct stat sb;
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	uint8_t *data;
	size_t len;
	int ret;

	/* A byte of the second shard of 'code' flipped inside a frame: the
	 * frame's CRC32C refuses it when that frame is read. */
	snprintf(path, sizeof(path), "%s/s001.tfrecord.zst", bad);
	cr_assert_eq(stat(path, &sb), 0, "%s", path);
	data = tu_read_file(path, &len);
	data[len / 3] ^= 0x5a;
	tu_write_file(path, data, len);
	free(data);
	cr_assert_eq(setenv("PODFEED_MIX_POOL", "1", 1), 0);
	ret = pf_loader_create(&l, &cfg, &err);
	cr_assert_eq(ret, 0, "create: %s", err.msg);
	while ((ret = pf_loader_next(l, &b)) == 1)
		pf_loader_release(l, b);
	cr_assert_lt(ret, 0, "the damaged frame was not found");
	cr_assert_not_null(strstr(pf_loader_last_error(l)->msg, "source 'code'"), "%s",
			   pf_loader_last_error(l)->msg);
	cr_assert_not_null(strstr(pf_loader_last_error(l)->file, "s001.tfrecord.zst"), "%s",
			   pf_loader_last_error(l)->file);
	cr_assert_geq(pf_loader_last_error(l)->frame, 0);
	pf_loader_free(l);
}

Test(mixture_pool, freed_mid_run_and_before_its_first_batch, .timeout = 120)
{
	pf_loader_config cfg = { .per_core_batch = 8, .cores_per_host = 2, .epochs = 50,
				 .shuffle = true, .threads = 2 };

	cr_assert_eq(setenv("PODFEED_MIX_POOL", "1", 1), 0);
	for (int taken = 0; taken < 3; taken++) {
		pf_loader *l = mu_create(cfg, "id:int64[1]", 0, NULL, 0);
		pf_batch *b;

		for (int i = 0; i < taken * 5; i++) {
			cr_assert_eq(pf_loader_next(l, &b), 1);
			pf_loader_release(l, b);
		}
		pf_loader_free(l);	/* returns: the pool stopped */
	}
}
