/* SPDX-License-Identifier: Apache-2.0 */
/* A mixture's sources' decoders write their rows straight into the
 * mixture's batches (loader/mixture_batch.c): the batches are the same
 * bit for bit as when every row is copied from the sources' own batches
 * (PODFEED_MIX_DIRECT=0, the way every row went before), over whole runs
 * of every stop rule, 1 and 4 threads, hosts 1, 4 and 7, stratified and
 * sampled mixing, with long rows (streamed) and short ones, and across a
 * resume mid-epoch; and rows do go straight in. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixture_internal.h"
#include "podfeed.h"
#include "mix_util.h"
#include "testutil.h"

#define MAX_STEPS 4096

typedef struct digest {
	uint64_t steps;
	uint32_t crc[MAX_STEPS];	/* each batch: its tensors, valid rows, epoch, step */
	uint64_t direct;		/* rows written straight in */
	uint64_t rows;
} digest;

/* A run of the 3-source mixture of cfg with every row copied or not (at
 * most `max` steps, 0: to its end; from a state, or fresh), its batches'
 * digests appended to d.  @return its state after (*slen), the caller's. */
static uint8_t *run(pf_loader_config cfg, const char *features, bool direct, uint64_t max,
		    const uint8_t *from, size_t from_len, digest *d, size_t *slen)
{
	pf_loader *l;
	pf_batch *b;
	uint8_t *st;
	int ret;

	cfg.source_feature = true;
	cr_assert_eq(setenv("PODFEED_MIX_DIRECT", direct ? "1" : "0", 1), 0);
	l = mu_create(cfg, features, max, from, from_len);
	while ((ret = pf_loader_next(l, &b)) == 1) {
		uint32_t crc = 0;

		cr_assert_lt(d->steps, MAX_STEPS);
		for (uint32_t c = 0; c < b->cores; c++) {
			const pf_core_batch *cb = &b->core[c];

			for (uint32_t t = 0; t < cb->ntensors; t++)
				crc = pf_crc32c(crc, cb->tensors[t].data,
						pf_dtype_size(cb->tensors[t].dtype) *
							cb->tensors[t].len * b->per_core_batch);
			crc = pf_crc32c(crc, cb->valid, b->per_core_batch);
			crc = pf_crc32c(crc, &cb->nvalid, sizeof(cb->nvalid));
		}
		{
			/* Not epoch_end: a run cut by max_steps ends early. */
			uint64_t f[3] = { b->epoch, b->step, b->epoch_start };

			crc = pf_crc32c(crc, f, sizeof(f));
		}
		d->crc[d->steps++] = crc;
		d->rows += (uint64_t)b->cores * b->per_core_batch;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "next: %s", ret < 0 ? pf_loader_last_error(l)->msg : "");
	d->direct += pf_mixture_direct_rows(pf_mixture_of(l));
	st = tu_save_state(l, slen);
	pf_loader_free(l);
	return st;
}

static void same(const digest *a, const digest *b, const char *what)
{
	cr_assert_eq(a->steps, b->steps, "%s: %llu steps copied, %llu straight", what,
		     (unsigned long long)a->steps, (unsigned long long)b->steps);
	for (uint64_t j = 0; j < a->steps; j++)
		cr_assert_eq(a->crc[j], b->crc[j], "%s: step %llu differs", what,
			     (unsigned long long)j);
}

/* Every host of `hosts`, both ways, the whole run; the rows written
 * straight in added to *direct of *rows. */
static void compare_hosts(pf_loader_config cfg, const char *features, uint32_t hosts,
			  const char *what, uint64_t *direct, uint64_t *rows)
{
	static digest copied, straight;
	char msg[160];

	for (uint32_t h = 0; h < hosts; h++) {
		size_t slen;

		memset(&copied, 0, sizeof(copied));
		memset(&straight, 0, sizeof(straight));
		cfg.num_hosts = hosts;
		cfg.host_index = h;
		free(run(cfg, features, false, cfg.max_steps, NULL, 0, &copied, &slen));
		free(run(cfg, features, true, cfg.max_steps, NULL, 0, &straight, &slen));
		snprintf(msg, sizeof(msg), "%s, host %u of %u, %u threads, %s", what, h, hosts,
			 cfg.threads, features);
		cr_assert_gt(copied.steps, 0, "%s: no batch", msg);
		cr_assert_eq(copied.direct, 0, "%s: rows went straight in with "
			     "PODFEED_MIX_DIRECT=0", msg);
		same(&copied, &straight, msg);
		*direct += straight.direct;
		*rows += straight.rows;
	}
}

static void compare_all(pf_mix mix)
{
	static const char *features[2] = { "id:int64[512]:pad=-1", "id:int64[1]" };
	static const uint32_t hosts[3] = { 1, 4, 7 };
	static const unsigned threads[2] = { 1, 4 };
	uint64_t direct = 0, rows = 0;

	for (size_t t = 0; t < 2; t++)
		for (size_t h = 0; h < 3; h++) {
			pf_loader_config cfg = { .cores_per_host = 2, .per_core_batch = 4,
						 .seed = 11, .shuffle = true, .epochs = 3,
						 .threads = threads[t], .mix = mix };

			/* The first source's epochs; the first to run out;
			 * max_steps. */
			compare_hosts(cfg, features[t == 0 ? 0 : 1], hosts[h], "epochs 3", &direct,
				      &rows);
			cfg.mix_stop = PF_MIX_STOP_FIRST_EXHAUSTED;
			compare_hosts(cfg, features[t == 0 ? 1 : 0], hosts[h], "first exhausted",
				      &direct, &rows);
			cfg.mix_stop = PF_MIX_STOP_FIRST_SOURCE;
			cfg.max_steps = 61;
			compare_hosts(cfg, features[0], hosts[h], "max_steps 61", &direct, &rows);
		}
	/* Some rows of these runs were written by the decoders where they
	 * belong (more than the first batches, decoded before the mixture
	 * is ready for them): the comparison covers that way. */
	cr_log_info("%llu of %llu rows written straight in", (unsigned long long)direct,
		    (unsigned long long)rows);
	cr_assert_gt(direct * 4, rows, "%llu of %llu rows written straight in",
		     (unsigned long long)direct, (unsigned long long)rows);
}

Test(mixture_direct, stratified_batches_are_the_copied_ones, .timeout = 600)
{
	compare_all(PF_MIX_STRATIFIED);
}

Test(mixture_direct, sampled_batches_are_the_copied_ones, .timeout = 600)
{
	compare_all(PF_MIX_SAMPLE);
}

/* A ring of a few steps: the rows of steps past it are decoded into the
 * sources' batches and copied, as are those that find no free slot, all
 * along the run (a row's mark of having been written straight in must
 * not outlive it). */
Test(mixture_direct, a_short_ring_copies_rows_past_it, .timeout = 600)
{
	static const char *ring[3] = { "1", "3", "17" };

	for (size_t i = 0; i < 3; i++) {
		pf_loader_config cfg = { .cores_per_host = 2, .per_core_batch = 4, .seed = 2,
					 .shuffle = true, .epochs = 3, .threads = 2 };
		uint64_t direct = 0, rows = 0;

		cr_assert_eq(setenv("PODFEED_MIX_RING", ring[i], 1), 0);
		compare_hosts(cfg, "id:int64[512]:pad=-1", 4, "a short ring", &direct, &rows);
		cfg.mix = PF_MIX_SAMPLE;
		compare_hosts(cfg, "id:int64[512]:pad=-1", 1, "a short ring, sampled", &direct,
			      &rows);
		cr_log_info("ring %s: %llu of %llu rows written straight in", ring[i],
			    (unsigned long long)direct, (unsigned long long)rows);
		cr_assert_lt(direct, rows);
	}
	cr_assert_eq(unsetenv("PODFEED_MIX_RING"), 0);
}

/* Stopped mid-epoch and resumed (either way, from either's state): the
 * rest is the copied run's rest. */
Test(mixture_direct, resumed_mid_epoch_bit_for_bit, .timeout = 600)
{
	static digest ref, a, b;
	static const uint64_t stops[] = { 1, 37, 150 };
	static const pf_mix mixes[2] = { PF_MIX_STRATIFIED, PF_MIX_SAMPLE };

	for (size_t mi = 0; mi < 2; mi++)
		for (uint32_t hosts = 1; hosts <= 4; hosts += 3) {
			pf_loader_config cfg = { .cores_per_host = 2, .per_core_batch = 4,
						 .seed = 5, .shuffle = true, .epochs = 2,
						 .threads = 2, .mix = mixes[mi],
						 .num_hosts = hosts, .host_index = hosts - 1 };
			size_t slen;

			memset(&ref, 0, sizeof(ref));
			free(run(cfg, "id:int64[512]:pad=-1", false, 0, NULL, 0, &ref, &slen));
			cr_assert_gt(ref.steps, stops[2] + 10);
			for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
				for (int way = 0; way < 4; way++) {
					uint8_t *st;
					size_t len;

					memset(&a, 0, sizeof(a));
					memset(&b, 0, sizeof(b));
					st = run(cfg, "id:int64[512]:pad=-1", way & 1, stops[i], NULL,
						 0, &a, &len);
					free(run(cfg, "id:int64[512]:pad=-1", way & 2, 0, st, len, &b,
						 &slen));
					free(st);
					cr_assert_eq(a.steps, stops[i]);
					cr_assert_eq(a.steps + b.steps, ref.steps);
					for (uint64_t j = 0; j < a.steps; j++)
						cr_assert_eq(a.crc[j], ref.crc[j],
							     "mix %zu, %u hosts, stop %llu, way %d: "
							     "step %llu", mi, hosts,
							     (unsigned long long)stops[i], way,
							     (unsigned long long)j);
					for (uint64_t j = 0; j < b.steps; j++)
						cr_assert_eq(b.crc[j], ref.crc[a.steps + j],
							     "mix %zu, %u hosts, stop %llu, way %d: "
							     "resumed step %llu", mi, hosts,
							     (unsigned long long)stops[i], way,
							     (unsigned long long)(a.steps + j));
				}
		}
}

/* Epochs without end (loadbench --steps asks UINT32_MAX) cut by
 * max_steps: made at once (the stop rule's end was counted step by step
 * for hours), its steps those asked, straight in as copied. */
Test(mixture_direct, endless_epochs_cut_by_max_steps, .timeout = 120)
{
	static digest copied, straight;
	pf_loader_config cfg = { .cores_per_host = 2, .per_core_batch = 4, .seed = 1,
				 .shuffle = true, .epochs = UINT32_MAX, .threads = 2 };
	size_t slen;

	free(run(cfg, "id:int64[1]", false, 700, NULL, 0, &copied, &slen));
	free(run(cfg, "id:int64[1]", true, 700, NULL, 0, &straight, &slen));
	cr_assert_eq(copied.steps, 700);
	same(&copied, &straight, "endless epochs");
}
