/* SPDX-License-Identifier: Apache-2.0 */
/* A mixture resumed on another host count (elastic resume), 4 -> 2 and
 * 2 -> 3 hosts emulated in one process: per source, no record of the
 * epoch it was in is delivered twice, what the new hosts drop of it is
 * under its per-step share times the hosts (all sources together: under
 * one global batch), its next epoch then starts whole, every new host
 * makes the same steps, the stop rule counts the first source's records
 * across the resume, and a resume on the new topology inside the bridge
 * is bit for bit. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixsmall_util.h"
#include "podfeed.h"
#include "testutil.h"

#define ID_BASE MS_ID_BASE	/* source k's ids: k * ID_BASE + [0, count) */
#define NSRC 3
#define HB 8u			/* a host batch: 1 core x 8 */

static const uint64_t counts[NSRC] = { 1536, 768, 1024 };
static const double weights[NSRC] = { 0.5, 0.25, 0.25 };

typedef ms_run hostrun;

static const char *dirs[NSRC];

/* Host x of h: from the states given (none: fresh), at most max steps (0:
 * to the end), the state after it kept. */
static void run_host(uint32_t x, uint32_t h, const pf_state_blob *from, size_t nfrom,
		     uint64_t max, hostrun *r)
{
	ms_mix c = { .n = NSRC, .hb = HB, .stop = PF_MIX_STOP_FIRST_SOURCE, .epochs = 2 };

	for (size_t k = 0; k < NSRC; k++) {
		c.counts[k] = counts[k];
		c.w[k] = weights[k];
		c.dirs[k] = dirs[k];
	}
	ms_run_host(&c, x, h, from, nfrom, max, r);
}

static void hostrun_free(hostrun *r)
{
	ms_run_free(r);
}

/* Rows of source k in a source's batches: MIX_BATCHES (8) host batches'
 * share, and in the bridge one step's share rounded down. */
static uint64_t batch_of(size_t k)
{
	return (uint64_t)(HB * 8 * weights[k] + 0.5);
}

static uint64_t bridge_of(size_t k)
{
	return (uint64_t)(HB * weights[k]);
}

/* h old hosts for `steps` steps, then h2 new hosts from their states to
 * the end of the first source's second epoch. */
static void elastic(uint32_t h, uint32_t h2, uint64_t steps)
{
	static hostrun old[8], neu[8];
	pf_state_blob blobs[8];
	uint8_t *seen = calloc(2 * ID_BASE, 1);
	uint64_t lost_all = 0;

	cr_assert_not_null(seen);
	for (size_t k = 0; k < NSRC; k++)
		dirs[k] = tu_id_shards((uint64_t)k * ID_BASE, counts[k], 2, 1024);
	for (uint32_t x = 0; x < h; x++) {
		run_host(x, h, NULL, 0, steps, &old[x]);
		cr_assert_eq(old[x].steps, steps);
		blobs[x] = (pf_state_blob){ old[x].state, old[x].state_len };
	}
	for (uint32_t y = 0; y < h2; y++) {
		run_host(y, h2, blobs, h, 0, &neu[y]);
		cr_assert_eq(neu[y].steps, neu[0].steps, "new host %u: %llu steps, host 0 %llu", y,
			     (unsigned long long)neu[y].steps, (unsigned long long)neu[0].steps);
	}
	cr_assert_gt(neu[0].steps, 0);
	for (size_t k = 0; k < NSRC; k++) {
		uint64_t pre = 0, left, bridge, lost, epoch1;

		/* Before: every source inside its first epoch, each record at
		 * most once on the old hosts. */
		memset(seen, 0, counts[k]);
		for (uint32_t x = 0; x < h; x++)
			for (uint64_t j = 0; j < old[x].n[k]; j++, pre++)
				cr_assert_eq(seen[old[x].ids[k][j]]++, 0, "source %zu: id %llu twice "
					     "before", k, (unsigned long long)old[x].ids[k][j]);
		cr_assert_lt(pre, counts[k], "source %zu left its first epoch", k);
		/* The rest of that epoch, cut among the new hosts in whole
		 * bridge batches: none of it seen before or twice. */
		left = counts[k] - pre;
		bridge = left / (bridge_of(k) * h2) * bridge_of(k);
		lost = left - bridge * h2;
		for (uint32_t y = 0; y < h2; y++) {
			cr_assert_geq(neu[y].n[k], bridge, "source %zu, host %u: %llu rows, the "
				      "bridge %llu", k, y, (unsigned long long)neu[y].n[k],
				      (unsigned long long)bridge);
			for (uint64_t j = 0; j < bridge; j++)
				cr_assert_eq(seen[neu[y].ids[k][j]]++, 0, "source %zu: id %llu "
					     "twice in its epoch (new host %u, row %llu)", k,
					     (unsigned long long)neu[y].ids[k][j], y,
					     (unsigned long long)j);
		}
		cr_assert_lt(lost, bridge_of(k) * h2, "source %zu lost %llu", k,
			     (unsigned long long)lost);
		lost_all += lost;
		/* Its next epoch whole: the new topology's epoch, each record
		 * once among the new hosts (as far as the run went). */
		epoch1 = counts[k] / (batch_of(k) * h2) * batch_of(k);
		memset(seen + ID_BASE, 0, counts[k]);
		for (uint32_t y = 0; y < h2; y++)
			for (uint64_t j = bridge; j < neu[y].n[k] && j < bridge + epoch1; j++)
				cr_assert_eq(seen[ID_BASE + neu[y].ids[k][j]]++, 0, "source %zu: id "
					     "%llu twice in its next epoch", k,
					     (unsigned long long)neu[y].ids[k][j]);
		/* The first source's second epoch ends the run: its rows after
		 * the resume are the bridge and one epoch, less at most one
		 * step's share. */
		if (k == 0) {
			cr_assert_leq(neu[0].n[0], bridge + epoch1);
			cr_assert_gt(neu[0].n[0] + (uint64_t)(HB * weights[0]) + 1, bridge + epoch1,
				     "%llu rows of the first source, its epochs hold %llu",
				     (unsigned long long)neu[0].n[0],
				     (unsigned long long)(bridge + epoch1));
		}
	}
	cr_assert_lt(lost_all, (uint64_t)HB * h2, "lost %llu, a global batch is %u",
		     (unsigned long long)lost_all, HB * h2);
	/* On the new topology, a resume inside the bridge is bit for bit. */
	{
		hostrun a = { 0 }, b = { 0 };
		pf_state_blob own;

		run_host(1, h2, blobs, h, 5, &a);
		own = (pf_state_blob){ a.state, a.state_len };
		run_host(1, h2, &own, 1, 0, &b);
		cr_assert_eq(a.steps + b.steps, neu[1].steps);
		for (size_t k = 0; k < NSRC; k++) {
			cr_assert_eq(a.n[k] + b.n[k], neu[1].n[k]);
			cr_assert_eq(memcmp(a.ids[k], neu[1].ids[k], a.n[k] * sizeof(uint64_t)), 0);
			cr_assert_eq(memcmp(b.ids[k], neu[1].ids[k] + a.n[k],
					    b.n[k] * sizeof(uint64_t)), 0, "source %zu differs", k);
		}
		hostrun_free(&a);
		hostrun_free(&b);
	}
	for (uint32_t x = 0; x < 8; x++) {
		hostrun_free(&old[x]);
		hostrun_free(&neu[x]);
	}
	free(seen);
}

Test(mixture_elastic, four_hosts_to_two, .timeout = 240)
{
	elastic(4, 2, 20);
}

Test(mixture_elastic, two_hosts_to_three, .timeout = 240)
{
	elastic(2, 3, 37);
}

Test(mixture_elastic, bad_states_are_refused, .timeout = 120)
{
	hostrun r[4] = { 0 };
	pf_state_blob blobs[4];
	pf_loader_source src[NSRC];
	const char *paths[NSRC][1];
	pf_loader_config cfg = { .num_hosts = 2, .cores_per_host = 1, .per_core_batch = HB,
				 .seed = 5, .shuffle = true, .threads = 1, .epochs = 2,
				 .features = "id:int64[1]", .source_feature = true };
	pf_loader *l = NULL;
	pf_error err;

	for (size_t k = 0; k < NSRC; k++)
		dirs[k] = tu_id_shards((uint64_t)k * ID_BASE, counts[k], 2, 1024);
	for (uint32_t x = 0; x < 4; x++) {
		run_host(x, 4, NULL, 0, 3, &r[x]);
		blobs[x] = (pf_state_blob){ r[x].state, r[x].state_len };
	}
	for (size_t k = 0; k < NSRC; k++) {
		paths[k][0] = dirs[k];
		src[k] = (pf_loader_source){ .name = k == 0 ? "a" : k == 1 ? "b" : "c",
					     .paths = paths[k], .npaths = 1, .weight = weights[k] };
	}
	cfg.sources = src;
	cfg.nsources = NSRC;
	/* An old host's state missing. */
	cfg.resume = blobs;
	cfg.nresume = 3;
	cr_assert_lt(pf_loader_create(&l, &cfg, &err), 0);
	cr_assert(strstr(err.msg, "needs the state of each old host once"), "%s", err.msg);
	/* One twice. */
	blobs[3] = blobs[2];
	cfg.nresume = 4;
	cr_assert_lt(pf_loader_create(&l, &cfg, &err), 0);
	cr_assert(strstr(err.msg, "two states of host 2 of 4"), "%s", err.msg);
	/* Another mixture's (the weights differ). */
	blobs[3] = (pf_state_blob){ r[3].state, r[3].state_len };
	src[1].weight = 0.5;
	cr_assert_lt(pf_loader_create(&l, &cfg, &err), 0);
	cr_assert(strstr(err.msg, "is of another mixture"), "%s", err.msg);
	cr_assert_null(l);
	for (uint32_t x = 0; x < 4; x++)
		hostrun_free(&r[x]);
}
