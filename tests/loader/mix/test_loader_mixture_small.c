/* SPDX-License-Identifier: Apache-2.0 */
/* Small sources in a mixture: a source's batches are fitted to its
 * records (at most its share of 8 host batches, at most its records /
 * (8 hosts), at least 1), so that a source of one record a host runs and
 * what its epochs drop stays under 1/8 of it (or under one record a
 * host).  On 1, 4 and 7 hosts, stratified and sampled, every stop rule:
 * equal steps, each source's records once per its epoch across the pod,
 * every epoch whole but for that remainder; resume on the same topology
 * bit for bit; elastic resume with a small source repeats nothing and
 * loses under one global batch; a source of fewer records than hosts
 * refused by name. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"
#include "mixsmall_util.h"
#include "podfeed.h"
#include "testutil.h"

/* The issue's mixture: a fine-tuning set of 50 records mixed in at 10%
 * with a larger set, 32 rows a host batch (the small source's share of 8
 * of them, 26 rows, is over its records on 4 hosts). */
static ms_mix issue_mix(pf_mix mode, pf_mix_stop stop, uint32_t epochs)
{
	ms_mix c = { .n = 2, .counts = { 4000, 50 }, .w = { 0.9, 0.1 }, .hb = 32, .mode = mode,
		     .stop = stop, .epochs = epochs };

	ms_make(&c);
	return c;
}

/* Every host of h to the end (or max steps): equal steps, each source's
 * epochs whole and disjoint across the pod, its epochs started as its
 * records say.  @return host 0's rows of each source in *n. */
static void pod(const ms_mix *c, uint32_t h, uint64_t max, uint64_t *steps, uint64_t *n)
{
	static ms_run r[MS_HOSTS];
	uint64_t zero[MS_HOSTS] = { 0 };

	for (uint32_t x = 0; x < h; x++) {
		ms_run_host(c, x, h, NULL, 0, max, &r[x]);
		cr_assert_eq(r[x].steps, r[0].steps, "%u hosts: host %u made %llu steps, host 0 "
			     "%llu", h, x, (unsigned long long)r[x].steps,
			     (unsigned long long)r[0].steps);
	}
	cr_assert_gt(r[0].steps, 0);
	*steps = r[0].steps;
	for (size_t k = 0; k < c->n; k++) {
		uint64_t e = ms_epoch(c, k, h), whole = ms_check_epochs(c, k, r, h, zero, e);
		uint64_t least = UINT64_MAX;

		for (uint32_t x = 0; x < h; x++) {
			least = r[x].n[k] < least ? r[x].n[k] : least;
			cr_assert_eq(r[x].started[k], r[x].n[k] ? (r[x].n[k] - 1) / e + 1 : 0,
				     "source %zu, host %u of %u: %llu epochs started, %llu rows "
				     "in epochs of %llu", k, x, h,
				     (unsigned long long)r[x].started[k],
				     (unsigned long long)r[x].n[k], (unsigned long long)e);
		}
		/* Every epoch all hosts went through was checked whole. */
		cr_assert_eq(whole, least / e);
		n[k] = r[0].n[k];
	}
	for (uint32_t x = 0; x < h; x++)
		ms_run_free(&r[x]);
}

Test(mixture_small, a_small_source_on_1_4_7_hosts_every_stop_rule, .timeout = 240)
{
	static const uint32_t hosts[] = { 1, 4, 7 };
	/* The small source's epoch on a host: 50 records in batches of 6
	 * (48, 2 dropped), of 1 on 4 hosts (12, 2 dropped), of 1 on 7 hosts
	 * (7, 1 dropped). */
	static const uint64_t small_epoch[] = { 48, 12, 7 };

	for (int mode = 0; mode < 2; mode++)
		for (size_t i = 0; i < 3; i++) {
			uint32_t h = hosts[i];
			ms_mix c = issue_mix((pf_mix)mode, PF_MIX_STOP_FIRST_SOURCE, 2);
			uint64_t steps, n[MS_MAX], e0 = ms_epoch(&c, 0, h);

			cr_assert_eq(ms_epoch(&c, 1, h), small_epoch[i]);
			/* Two epochs of the first source. */
			pod(&c, h, 0, &steps, n);
			if (mode == PF_MIX_STRATIFIED) {
				cr_assert_leq(n[0], 2 * e0);
				cr_assert_gt(n[0] + 29, 2 * e0, "%u hosts: %llu rows of the first "
					     "source, 2 epochs hold %llu", h,
					     (unsigned long long)n[0],
					     (unsigned long long)(2 * e0));
			}
			/* The first source to run out: the small one, at its
			 * first epoch's end. */
			c.stop = PF_MIX_STOP_FIRST_EXHAUSTED;
			pod(&c, h, 0, &steps, n);
			if (mode == PF_MIX_STRATIFIED) {
				cr_assert_leq(n[0], e0);
				cr_assert_leq(n[1], small_epoch[i]);
				cr_assert_gt(n[1] + 4, small_epoch[i], "%u hosts: %llu rows of the "
					     "small source, its epoch holds %llu", h,
					     (unsigned long long)n[1],
					     (unsigned long long)small_epoch[i]);
			}
			/* max_steps first: the small source through several
			 * epochs of its own. */
			c.stop = PF_MIX_STOP_FIRST_SOURCE;
			c.epochs = 10;
			pod(&c, h, 40, &steps, n);
			cr_assert_eq(steps, 40);
			cr_assert_gt(n[1], 2 * small_epoch[i]);
		}
}

/* Host 1 of 4 stopped at several steps and resumed on its topology: the
 * rows of every source are those of the run never stopped. */
Test(mixture_small, a_small_source_resumes_bit_for_bit, .timeout = 240)
{
	static const uint64_t stops[] = { 1, 3, 13, 30 };

	for (int mode = 0; mode < 2; mode++) {
		ms_mix c = issue_mix((pf_mix)mode, PF_MIX_STOP_FIRST_SOURCE, 1);
		ms_run ref = { 0 };

		ms_run_host(&c, 1, 4, NULL, 0, 45, &ref);
		for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) {
			ms_run a = { 0 }, b = { 0 };
			pf_state_blob sb;

			ms_run_host(&c, 1, 4, NULL, 0, stops[i], &a);
			sb = (pf_state_blob){ a.state, a.state_len };
			ms_run_host(&c, 1, 4, &sb, 1, 45 - stops[i], &b);
			cr_assert_eq(a.steps + b.steps, ref.steps);
			for (size_t k = 0; k < c.n; k++) {
				cr_assert_eq(a.n[k] + b.n[k], ref.n[k]);
				cr_assert_eq(memcmp(a.ids[k], ref.ids[k], a.n[k] * sizeof(uint64_t)),
					     0);
				cr_assert_eq(memcmp(b.ids[k], ref.ids[k] + a.n[k],
						    b.n[k] * sizeof(uint64_t)), 0, "mode %d, stop at "
					     "%llu: source %zu differs", mode,
					     (unsigned long long)stops[i], k);
			}
			ms_run_free(&a);
			ms_run_free(&b);
		}
		ms_run_free(&ref);
	}
}

/* h hosts for `steps` steps, then h2 from their states to the end: per
 * source, the rows of the epoch the old hosts were in and the bridge's
 * on the new ones hold no id twice, the bridge loses under its per-step
 * share a new host (all sources: under one global batch), and the
 * source's next epochs, fitted to the new hosts, are whole. */
static void elastic(ms_mix *c, uint32_t h, uint32_t h2, uint64_t steps)
{
	static ms_run old[MS_HOSTS], neu[MS_HOSTS];
	pf_state_blob blobs[MS_HOSTS];
	uint64_t lost_all = 0;

	for (uint32_t x = 0; x < h; x++) {
		ms_run_host(c, x, h, NULL, 0, steps, &old[x]);
		blobs[x] = (pf_state_blob){ old[x].state, old[x].state_len };
	}
	for (uint32_t y = 0; y < h2; y++) {
		ms_run_host(c, y, h2, blobs, h, 0, &neu[y]);
		cr_assert_eq(neu[y].steps, neu[0].steps, "new host %u: %llu steps, host 0 %llu",
			     y, (unsigned long long)neu[y].steps,
			     (unsigned long long)neu[0].steps);
	}
	cr_assert_gt(neu[0].steps, 0);
	for (size_t k = 0; k < c->n; k++) {
		uint64_t e = ms_epoch(c, k, h), e2 = ms_epoch(c, k, h2);
		uint64_t share = (uint64_t)floor(c->hb * c->w[k]), bridge_b = share ? share : 1;
		uint64_t ep = old[0].n[k] / e, pre = 0, left, bridge, lost, from[MS_HOSTS];
		uint8_t *seen = calloc(c->counts[k], 1);

		/* The epoch the old hosts were in (each the same: the
		 * schedule's counts are every host's). */
		for (uint32_t x = 0; x < h; x++) {
			cr_assert_eq(old[x].n[k], old[0].n[k]);
			for (uint64_t j = ep * e; j < old[x].n[k]; j++, pre++)
				cr_assert_eq(seen[old[x].ids[k][j]]++, 0);
		}
		/* Its rest, cut among the new hosts in whole bridge batches. */
		left = h * e - pre;
		bridge = left / (bridge_b * h2) * bridge_b;
		lost = left - bridge * h2;
		for (uint32_t y = 0; y < h2; y++) {
			cr_assert_geq(neu[y].n[k], bridge);
			for (uint64_t j = 0; j < bridge; j++)
				cr_assert_eq(seen[neu[y].ids[k][j]]++, 0, "source %zu: id %llu "
					     "twice in its epoch %llu (new host %u, row %llu)", k,
					     (unsigned long long)neu[y].ids[k][j],
					     (unsigned long long)ep, y, (unsigned long long)j);
			from[y] = bridge;
		}
		cr_assert_lt(lost, bridge_b * h2, "source %zu lost %llu", k,
			     (unsigned long long)lost);
		lost_all += lost;
		/* Its next epochs: whole, on the new hosts' batches. */
		ms_check_epochs(c, k, neu, h2, from, e2);
		free(seen);
	}
	cr_assert_lt(lost_all, (uint64_t)c->hb * h2, "lost %llu, a global batch is %u",
		     (unsigned long long)lost_all, c->hb * h2);
	for (uint32_t x = 0; x < MS_HOSTS; x++) {
		ms_run_free(&old[x]);
		ms_run_free(&neu[x]);
	}
}

Test(mixture_small, elastic_resume_with_a_small_source, .timeout = 240)
{
	/* 60 records at 20% of 8 rows: its batches fitted (3 rows on 2
	 * hosts, 1 on 7), several of its epochs before the resume. */
	ms_mix c = { .n = 2, .counts = { 3000, 60 }, .w = { 0.8, 0.2 }, .hb = 8,
		     .stop = PF_MIX_STOP_FIRST_SOURCE, .epochs = 2 };

	ms_make(&c);
	elastic(&c, 2, 3, 47);
	elastic(&c, 4, 7, 23);
	elastic(&c, 7, 1, 30);
	elastic(&c, 1, 4, 61);
}

Test(mixture_small, fewer_records_than_hosts_is_refused_naming_the_source, .timeout = 60)
{
	ms_mix c = { .n = 2, .counts = { 400, 5 }, .w = { 0.9, 0.1 }, .hb = 8 };
	const char *paths[2][1];
	pf_loader_source src[2];
	pf_loader_config cfg = { .host_index = 0, .num_hosts = 7, .per_core_batch = 8,
				 .features = "id:int64[1]", .threads = 1 };
	pf_loader *l = NULL;
	pf_error err;

	ms_make(&c);
	for (size_t k = 0; k < 2; k++) {
		paths[k][0] = c.dirs[k];
		src[k] = (pf_loader_source){ .name = k ? "tiny" : "big", .paths = paths[k],
					     .npaths = 1, .weight = c.w[k] };
	}
	cfg.sources = src;
	cfg.nsources = 2;
	cr_assert_lt(pf_loader_create(&l, &cfg, &err), 0);
	cr_assert_null(l);
	cr_assert(strstr(err.msg, "source 'tiny'") && strstr(err.msg, "holds 5 records"),
		  "%s", err.msg);
	/* On 5 hosts it runs: one record a host an epoch. */
	cfg.num_hosts = 5;
	cfg.max_steps = 3;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	pf_loader_free(l);
}

/* mix=sample: each host draws its own rows, and after 20 steps the old
 * hosts are in different epochs of the small source (12 records a host
 * an epoch, about 3.2 a step drawn; the large one all in its first).
 * Resumed on h2 hosts, each epoch they were in is bridged in turn (in
 * batches of the per-step share over the epochs spanned, at least 1):
 * per source and epoch, the old hosts' rows and the new hosts' bridge
 * hold no id twice, each cut loses under its batch a new host (all the
 * cuts: under one record a host per epoch spanned, or under the share),
 * the later epochs are whole, the new hosts make equal steps, and a
 * resume inside the bridges on the new topology is bit for bit. */
static void sample_elastic(uint32_t h2)
{
	ms_mix c = issue_mix(PF_MIX_SAMPLE, PF_MIX_STOP_FIRST_SOURCE, 2);
	static ms_run old[4], neu[MS_HOSTS];
	pf_state_blob blobs[4];
	uint64_t spread = 0;

	for (uint32_t x = 0; x < 4; x++) {
		ms_run_host(&c, x, 4, NULL, 0, 20, &old[x]);
		blobs[x] = (pf_state_blob){ old[x].state, old[x].state_len };
	}
	for (uint32_t y = 0; y < h2; y++) {
		ms_run_host(&c, y, h2, blobs, 4, 0, &neu[y]);
		cr_assert_eq(neu[y].steps, neu[0].steps);
	}
	for (size_t k = 0; k < c.n; k++) {
		uint64_t e = ms_epoch(&c, k, 4), lo = UINT64_MAX, hi = 0, at[MS_HOSTS] = { 0 };
		uint64_t share = (uint64_t)(c.hb * c.w[k]), lost = 0, bb;
		uint8_t *seen = malloc(c.counts[k]);

		for (uint32_t x = 0; x < 4; x++) {
			lo = old[x].n[k] / e < lo ? old[x].n[k] / e : lo;
			hi = old[x].n[k] / e > hi ? old[x].n[k] / e : hi;
		}
		bb = share / (hi - lo + 1) ? share / (hi - lo + 1) : 1;
		spread = hi - lo > spread ? hi - lo : spread;
		for (uint64_t ep = lo; ep <= hi; ep++) {
			uint64_t m = 4 * e, rows;

			memset(seen, 0, c.counts[k]);
			for (uint32_t x = 0; x < 4; x++)
				for (uint64_t j = ep * e; j < (ep + 1) * e && j < old[x].n[k]; j++, m--)
					cr_assert_eq(seen[old[x].ids[k][j]]++, 0);
			rows = m / (bb * h2) * bb;
			lost += m - rows * h2;
			cr_assert_lt(m - rows * h2, bb * h2);
			for (uint32_t y = 0; y < h2; y++) {
				for (uint64_t j = at[y]; j < at[y] + rows && j < neu[y].n[k]; j++)
					cr_assert_eq(seen[neu[y].ids[k][j]]++, 0, "source %zu: id %llu "
						     "twice in its epoch %llu (new host %u, row %llu)",
						     k, (unsigned long long)neu[y].ids[k][j],
						     (unsigned long long)ep, y, (unsigned long long)j);
				at[y] += rows;
			}
		}
		cr_assert_lt(lost, h2 * (share > hi - lo + 1 ? share : hi - lo + 1));
		ms_check_epochs(&c, k, neu, h2, at, ms_epoch(&c, k, h2));
		free(seen);
	}
	cr_assert_gt(spread, 0, "the old hosts are in one epoch of each source: the case is "
		     "not made");
	/* On the new topology, a resume inside the bridges is bit for bit. */
	for (uint64_t stop = 1; stop < 8; stop += 3) {
		ms_run a = { 0 }, b = { 0 };
		pf_state_blob own;

		ms_run_host(&c, h2 - 1, h2, blobs, 4, stop, &a);
		own = (pf_state_blob){ a.state, a.state_len };
		if (stop == 1 && h2 == 2) {
			/* Inside the first bridge of the small source's chain
			 * (this host took none of its rows in step 1): the later
			 * bridges' states are in the state. */
			pf_mix_state ms;
			pf_error err;
			size_t pending = 0;

			cr_assert_eq(pf_mix_state_decode(&ms, a.state, a.state_len, &err), 0);
			for (size_t k = 0; k < ms.nsources; k++)
				pending += ms.sources[k].npending;
			cr_assert_gt(pending, 0);
			pf_mix_state_release(&ms);
		}
		ms_run_host(&c, h2 - 1, h2, &own, 1, 0, &b);
		cr_assert_eq(a.steps + b.steps, neu[h2 - 1].steps);
		for (size_t k = 0; k < c.n; k++) {
			cr_assert_eq(a.n[k] + b.n[k], neu[h2 - 1].n[k]);
			cr_assert_eq(memcmp(b.ids[k], neu[h2 - 1].ids[k] + a.n[k],
					    b.n[k] * sizeof(uint64_t)), 0, "stop %llu: source %zu "
				     "differs", (unsigned long long)stop, k);
		}
		ms_run_free(&a);
		ms_run_free(&b);
	}
	for (uint32_t x = 0; x < MS_HOSTS; x++) {
		ms_run_free(&neu[x]);
		if (x < 4)
			ms_run_free(&old[x]);
	}
}

Test(mixture_small, sample_hosts_in_different_epochs_resume_elastic, .timeout = 240)
{
	sample_elastic(2);
	sample_elastic(7);
}

/* The 2-source mixture of c (sources "a" and "b") on host 0 of hosts,
 * resumed from the n states given, refused saying `says` and naming
 * source `name` (NULL: a source). */
static void refused(const ms_mix *c, uint32_t hosts, pf_state_blob *from, size_t n,
		    const char *name, const char *says)
{
	char named[32];

	const char *paths[2][1];
	pf_loader_source src[2];
	pf_loader_config cfg = { .host_index = 0, .num_hosts = hosts, .per_core_batch = c->hb,
				 .seed = 5, .shuffle = true, .threads = 1, .epochs = 2,
				 .mix = c->mode, .features = "id:int64[1]",
				 .source_feature = true, .resume = from, .nresume = n };
	pf_loader *l = NULL;
	pf_error err;

	snprintf(named, sizeof(named), "source '%s", name ? name : "");
	if (name)
		strcat(named, "'");
	for (size_t k = 0; k < 2; k++) {
		paths[k][0] = c->dirs[k];
		src[k] = (pf_loader_source){ .name = k ? "b" : "a", .paths = paths[k], .npaths = 1,
					     .weight = c->w[k] };
	}
	cfg.sources = src;
	cfg.nsources = 2;
	cr_assert_lt(pf_loader_create(&l, &cfg, &err), 0);
	cr_assert_null(l);
	cr_assert(strstr(err.msg, named) && strstr(err.msg, says), "%s", err.msg);
}

/* c's hosts: 4 fresh for 20 steps, then their states resumed on 2 for 1
 * step (elastic: inside its bridges), those 2 states in b2. */
static void four_then_two(const ms_mix *c, ms_run old[4], ms_run mid[2], pf_state_blob b2[2])
{
	pf_state_blob b4[4];

	for (uint32_t x = 0; x < 4; x++) {
		ms_run_host(c, x, 4, NULL, 0, 20, &old[x]);
		b4[x] = (pf_state_blob){ old[x].state, old[x].state_len };
	}
	for (uint32_t y = 0; y < 2; y++) {
		ms_run_host(c, y, 2, b4, 4, 1, &mid[y]);
		b2[y] = (pf_state_blob){ mid[y].state, mid[y].state_len };
	}
}

/* Old hosts more than 8 epochs of a source apart (a 4-record source on 4
 * hosts, an epoch a record a host, half of each batch drawn from it):
 * refused naming the source and the epochs, not bridged by as many
 * loaders. */
Test(mixture_small, sample_hosts_over_8_epochs_apart_are_refused, .timeout = 120)
{
	ms_mix c = { .n = 2, .counts = { 4000, 4 }, .w = { 0.5, 0.5 }, .hb = 8,
		     .mode = PF_MIX_SAMPLE, .stop = PF_MIX_STOP_FIRST_SOURCE, .epochs = 2 };
	static ms_run old[4];
	pf_state_blob blobs[4];
	uint64_t lo = UINT64_MAX, hi = 0;

	ms_make(&c);
	for (uint32_t x = 0; x < 4; x++) {
		ms_run_host(&c, x, 4, NULL, 0, 120, &old[x]);
		blobs[x] = (pf_state_blob){ old[x].state, old[x].state_len };
		lo = old[x].n[1] < lo ? old[x].n[1] : lo;
		hi = old[x].n[1] > hi ? old[x].n[1] : hi;
	}
	cr_assert_gt(hi - lo, 9, "the old hosts are %llu epochs apart: the case is not made",
		     (unsigned long long)(hi - lo));
	refused(&c, 2, blobs, 4, "b", "epochs of it apart");
	for (uint32_t x = 0; x < 4; x++)
		ms_run_free(&old[x]);
}

Test(mixture_small, a_second_elastic_resume_inside_a_chain_is_refused, .timeout = 240)
{
	/* Sampled hosts in different epochs of the small source resumed on
	 * 2 (a chain of bridges, the later ones pending in the states), and
	 * those states on 3 before the chain ends: its pending bridges would
	 * not be merged again, and the new hosts would read rows the chain
	 * had delivered (the reviewer's case: 9 ids of epoch 6 twice). */
	ms_mix c = { .n = 2, .counts = { 4000, 50 }, .w = { 0.9, 0.1 }, .hb = 32,
		     .mode = PF_MIX_SAMPLE, .stop = PF_MIX_STOP_FIRST_SOURCE, .epochs = 2 };
	static ms_run old[4], mid[2];
	pf_state_blob b2[2];
	size_t pending = 0;
	pf_error err;

	ms_make(&c);
	four_then_two(&c, old, mid, b2);
	for (uint32_t y = 0; y < 2; y++) {
		pf_mix_state st;

		cr_assert_eq(pf_mix_state_decode(&st, mid[y].state, mid[y].state_len, &err), 0,
			     "%s", err.msg);
		for (size_t k = 0; k < st.nsources; k++)
			pending += st.sources[k].npending;
		pf_mix_state_release(&st);
	}
	cr_assert_gt(pending, 0, "no state has pending bridges: the case is not made");
	refused(&c, 3, b2, 2, "b", "chain of bridges");
	for (uint32_t x = 0; x < 4; x++)
		ms_run_free(&old[x]);
	for (uint32_t y = 0; y < 2; y++)
		ms_run_free(&mid[y]);
}

Test(mixture_small, a_bridge_state_with_a_batch_not_the_mixtures_is_refused, .timeout = 240)
{
	/* A state saved inside an elastic resume's bridge says the batch of
	 * the source's later epochs (whole_batch): one larger than the
	 * mixture's is refused naming the source, not handed to a loader. */
	ms_mix c = { .n = 2, .counts = { 4000, 50 }, .w = { 0.9, 0.1 }, .hb = 32,
		     .mode = PF_MIX_STRATIFIED, .stop = PF_MIX_STOP_FIRST_SOURCE, .epochs = 2 };
	static ms_run old[4], mid[2];
	pf_state_blob b2[2];
	pf_mix_state st;
	uint8_t *bad;
	int64_t n;
	size_t bridged = 0;
	pf_error err;

	ms_make(&c);
	four_then_two(&c, old, mid, b2);
	cr_assert_eq(pf_mix_state_decode(&st, mid[0].state, mid[0].state_len, &err), 0, "%s",
		     err.msg);
	for (size_t k = 0; k < st.nsources; k++)
		if (st.sources[k].bridge_batch) {
			st.sources[k].whole_batch = 1u << 30;
			bridged++;
		}
	cr_assert_gt(bridged, 0, "no source is inside a bridge: the case is not made");
	n = pf_mix_state_encode(&st, NULL, 0);
	cr_assert_gt(n, 0);
	bad = malloc((size_t)n);
	cr_assert_eq(pf_mix_state_encode(&st, bad, (size_t)n), n);
	pf_mix_state_release(&st);
	b2[0] = (pf_state_blob){ bad, (size_t)n };
	refused(&c, 2, b2, 2, NULL, "is not this mixture's");
	free(bad);
	for (uint32_t x = 0; x < 4; x++)
		ms_run_free(&old[x]);
	for (uint32_t y = 0; y < 2; y++)
		ms_run_free(&mid[y]);
}
