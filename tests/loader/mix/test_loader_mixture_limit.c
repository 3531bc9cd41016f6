/* SPDX-License-Identifier: Apache-2.0 */
/* A stratified mixture's sources' loaders read no further than the run
 * takes from each (loader/mixture.c, open_gates()): when the run ends,
 * every source's loader is at its own end too, having delivered exactly
 * the batches the mixture took, over fresh runs, max_steps, both stop
 * rules and a resume; and the batches are the same as when the sources
 * read ahead without bound (PODFEED_MIX_LIMIT=0, as before). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mix_util.h"
#include "mixture_internal.h"
#include "podfeed.h"
#include "testutil.h"

typedef struct outcome {
	uint64_t steps;
	uint32_t crc;		/* of every batch's blocks */
	bool sources_ended;	/* every source's loader had no batch left */
} outcome;

/* Run the mixture of cfg (at most max steps; from a state, or fresh); if
 * check, look whether each source's loader has a batch past the run's.
 * @return the state after `stop_at` steps (0: none), the caller's. */
static uint8_t *run(pf_loader_config cfg, bool limited, uint64_t max, const uint8_t *from,
		    size_t from_len, uint64_t stop_at, outcome *o, size_t *slen)
{
	uint8_t *st = NULL;
	pf_loader *l;
	pf_batch *b;
	int ret;

	/* The frames of a few records give a loader reading ahead blocks
	 * to read past the end. */
	cr_assert_eq(setenv("PODFEED_MIX_LIMIT", limited ? "1" : "0", 1), 0);
	l = mu_create(cfg, "id:int64[1]", max, from, from_len);
	memset(o, 0, sizeof(*o));
	while ((ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++)
			o->crc = pf_crc32c(o->crc, b->core[c].block, b->core[c].block_bytes);
		pf_loader_release(l, b);
		if (++o->steps == stop_at) {
			st = tu_save_state(l, slen);
			break;
		}
	}
	cr_assert_geq(ret, 0, "next: %s", ret < 0 ? pf_loader_last_error(l)->msg : "");
	if (!st) {
		/* The run is over: each source's loader, its batch given back,
		 * has none left when it was bounded. */
		o->sources_ended = true;
		for (size_t k = 0; k < 3; k++) {
			mix_source *s = &pf_mixture_of(l)->src[k];
			pf_batch *more = NULL;

			if (s->cur)
				pf_pipe_release(s->l, s->cur);
			s->cur = NULL;
			ret = pf_pipe_next(s->l, &more);
			cr_assert_geq(ret, 0, "source %zu: %s", k,
				      ret < 0 ? pf_pipe_last_error(s->l)->msg : "");
			if (ret == 1) {
				o->sources_ended = false;
				pf_pipe_release(s->l, more);
			}
		}
	}
	pf_loader_free(l);
	return st;
}

static pf_loader_config base(uint32_t hosts, uint32_t host, bool shuffle, pf_mix_stop stop)
{
	return (pf_loader_config){ .per_core_batch = 8, .cores_per_host = 2, .num_hosts = hosts,
				   .host_index = host, .epochs = 2, .shuffle = shuffle,
				   .shuffle_window = 256, .threads = 2, .seed = 5,
				   .mix_stop = stop };
}

Test(mixture_limit, sources_end_with_the_run_and_batches_are_unchanged, .timeout = 240)
{
	static const uint64_t maxes[] = { 0, 17 };

	for (int shuffle = 0; shuffle < 2; shuffle++)
		for (int stop = 0; stop < 2; stop++)
			for (size_t i = 0; i < 2; i++)
				for (uint32_t h = 0; h < 4; h += 3) {
					pf_loader_config cfg = base(4, h, shuffle, (pf_mix_stop)stop);
					outcome lim, free_run;
					size_t n;

					run(cfg, true, maxes[i], NULL, 0, 0, &lim, &n);
					run(cfg, false, maxes[i], NULL, 0, 0, &free_run, &n);
					cr_assert_gt(lim.steps, 0);
					cr_assert_eq(lim.steps, free_run.steps);
					cr_assert_eq(lim.crc, free_run.crc,
						     "shuffle %d stop %d max %lu host %u: other batches",
						     shuffle, stop, (unsigned long)maxes[i], h);
					cr_assert(lim.sources_ended,
						  "shuffle %d stop %d max %lu host %u: a source's loader "
						  "had batches past the run's", shuffle, stop,
						  (unsigned long)maxes[i], h);
				}
}

Test(mixture_limit, a_resumed_run_is_bounded_too, .timeout = 120)
{
	for (int shuffle = 0; shuffle < 2; shuffle++) {
		pf_loader_config cfg = base(1, 0, shuffle, PF_MIX_STOP_FIRST_SOURCE);
		outcome whole, first, rest, rest_free;
		size_t n = 0, n2 = 0;
		uint8_t *st, *st2;

		run(cfg, true, 0, NULL, 0, 0, &whole, &n);
		/* Stopped inside a source's batch, then resumed to the end. */
		st = run(cfg, true, 0, NULL, 0, 23, &first, &n);
		cr_assert_not_null(st);
		st2 = run(cfg, false, 0, NULL, 0, 23, &first, &n2);
		cr_assert_eq(n, n2);
		cr_assert_eq(memcmp(st, st2, n), 0);
		run(cfg, true, 0, st, n, 0, &rest, &n2);
		run(cfg, false, 0, st, n, 0, &rest_free, &n2);
		cr_assert_eq(first.steps + rest.steps, whole.steps);
		cr_assert_eq(rest.crc, rest_free.crc);
		cr_assert(rest.sources_ended, "shuffle %d: a resumed source read past the run",
			  shuffle);
		free(st);
		free(st2);
	}
}

Test(mixture_limit, sampled_sources_are_not_bounded, .timeout = 60)
{
	/* A host's draws are not counted ahead: its sources read on (the
	 * run stays right, which the mixture tests check). */
	pf_loader_config cfg = base(1, 0, false, PF_MIX_STOP_FIRST_SOURCE);
	outcome o;
	size_t n;

	cfg.mix = PF_MIX_SAMPLE;
	run(cfg, true, 0, NULL, 0, 0, &o, &n);
	cr_assert_gt(o.steps, 0);
	cr_assert_not(o.sources_ended);
}
