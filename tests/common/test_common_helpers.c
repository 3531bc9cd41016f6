/* SPDX-License-Identifier: Apache-2.0 */
/* common/'s helpers against their published definitions: splitmix64's
 * reference outputs, FNV-1a's test vectors, and the log2 histogram's
 * bucket edges and quantiles; the clocks. */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "common_internal.h"

Test(common_rng, splitmix64_reference_outputs)
{
	/* The first outputs of Vigna's splitmix64.c seeded with 0 and with
	 * 1234567. */
	uint64_t s = 0;

	cr_assert_eq(pf_splitmix64_next(&s), 0xe220a8397b1dcdafull);
	cr_assert_eq(pf_splitmix64_next(&s), 0x6e789e6aa1b965f4ull);
	cr_assert_eq(pf_splitmix64_next(&s), 0x06c45d188009454full);
	s = 1234567;
	cr_assert_eq(pf_splitmix64_next(&s), 0x599ed017fb08fc85ull);
	cr_assert_eq(pf_splitmix64_next(&s), 0x2c73f08458540fa5ull);
}

Test(common_rng, mix64_is_the_next_output_of_its_state)
{
	for (uint64_t x = 0; x < 1000; x++) {
		uint64_t s = x * 0x2545f4914f6cdd1dull;
		uint64_t h = pf_mix64(s);

		cr_assert_eq(h, pf_splitmix64_next(&s));
		cr_assert_eq(h, pf_mix64_final(s));
	}
}

Test(common_rng, streams_repeat_and_stay_in_range)
{
	pf_rng a = pf_rng_seed(7, 3, 1), b = pf_rng_seed(7, 3, 1), c = pf_rng_seed(7, 3, 2);
	int same = 0;

	for (int i = 0; i < 1000; i++) {
		uint64_t x = pf_rng_next(&a);
		double u;

		cr_assert_eq(x, pf_rng_next(&b), "the same seed gives the same stream");
		same += x == pf_rng_next(&c);
		cr_assert_lt(pf_rng_below(&a, 10), 10);
		u = pf_rng_unit(&a);
		cr_assert(u >= 0.0 && u < 1.0, "%g", u);
		pf_rng_below(&b, 10);
		pf_rng_unit(&b);
	}
	cr_assert_eq(same, 0, "another seed gives another stream");
	cr_assert_eq(pf_unit_double(0), 0.0);
	cr_assert_lt(pf_unit_double(UINT64_MAX), 1.0);
}

Test(common_hash, fnv1a_test_vectors)
{
	/* From the FNV reference (Fowler, Noll, Vo: test vectors). */
	cr_assert_eq(pf_fnv1a64(PF_FNV64_OFFSET, "", 0), 0xcbf29ce484222325ull);
	cr_assert_eq(pf_fnv1a64(PF_FNV64_OFFSET, "a", 1), 0xaf63dc4c8601ec8cull);
	cr_assert_eq(pf_fnv1a64(PF_FNV64_OFFSET, "foobar", 6), 0x85944171f73967e8ull);
	cr_assert_eq(pf_fnv1a32("", 0), 0x811c9dc5u);
	cr_assert_eq(pf_fnv1a32("a", 1), 0xe40c292cu);
	cr_assert_eq(pf_fnv1a32("foobar", 6), 0xbf9cf968u);
	/* Extending is hashing the concatenation. */
	cr_assert_eq(pf_fnv1a64(pf_fnv1a64(PF_FNV64_OFFSET, "foo", 3), "bar", 3),
		     pf_fnv1a64(PF_FNV64_OFFSET, "foobar", 6));
}

Test(common_hist, bucket_edges)
{
	cr_assert_eq(pf_hist_bucket(0), 0);
	cr_assert_eq(pf_hist_bucket(1999), 0);	/* 1 us */
	cr_assert_eq(pf_hist_bucket(2000), 1);	/* [2, 4) us */
	cr_assert_eq(pf_hist_bucket(3999), 1);
	cr_assert_eq(pf_hist_bucket(4000), 2);
	cr_assert_eq(pf_hist_bucket(1000ull * 1024), 10);
	cr_assert_eq(pf_hist_bucket(UINT64_MAX), PF_HIST_BUCKETS - 1);
}

Test(common_hist, quantiles_are_bucket_upper_bounds)
{
	uint64_t h[PF_HIST_BUCKETS];

	memset(h, 0, sizeof(h));
	cr_assert_eq(pf_hist_quantile_us(h, 0.5), 0.0, "an empty histogram");
	h[pf_hist_bucket(3000)] = 90;		/* [2, 4) us */
	h[pf_hist_bucket(100000)] = 10;		/* [64, 128) us */
	cr_assert_eq(pf_hist_quantile_us(h, 0.50), 4.0);
	cr_assert_eq(pf_hist_quantile_us(h, 0.90), 4.0);
	cr_assert_eq(pf_hist_quantile_us(h, 0.91), 128.0);
	cr_assert_eq(pf_hist_quantile_us(h, 1.00), 128.0);
}

Test(common_clock, monotonic)
{
	uint64_t a = pf_now_ns(), b = pf_now_ns();

	cr_assert_gt(a, 0);
	cr_assert_geq(b, a);
}

/* The thread CPU clock counts this thread's work and not its sleep. */
Test(common_clock, thread_cpu_counts_work_not_sleep)
{
	uint64_t c0 = pf_thread_cpu_ns(), w0 = pf_now_ns(), c1, c2;
	volatile uint64_t x = 0;
	struct timespec nap = { 0, 50 * 1000000 };

	while (pf_thread_cpu_ns() - c0 < 20 * 1000000)
		x += 1;
	c1 = pf_thread_cpu_ns();
	cr_assert_geq(pf_now_ns() - w0, c1 - c0, "CPU time past wall time");
	nanosleep(&nap, NULL);
	c2 = pf_thread_cpu_ns();
	cr_assert_lt(c2 - c1, 10 * 1000000, "50 ms asleep counted %llu ns of CPU",
		     (unsigned long long)(c2 - c1));
}
