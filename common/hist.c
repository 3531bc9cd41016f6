/* SPDX-License-Identifier: Apache-2.0 */
/* The log2 latency histogram: which bucket a latency falls in, and the
 * quantiles of a histogram (common_internal.h says the buckets). */
#include "common_internal.h"

unsigned pf_hist_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned b = 0;

	while (us > 1 && b < PF_HIST_BUCKETS - 1) {
		us >>= 1;
		b++;
	}
	return b;
}

double pf_hist_quantile_us(const uint64_t *hist, double q)
{
	uint64_t total = 0, seen = 0;

	for (unsigned i = 0; i < PF_HIST_BUCKETS; i++)
		total += hist[i];
	if (!total)
		return 0;
	for (unsigned i = 0; i < PF_HIST_BUCKETS; i++) {
		seen += hist[i];
		if ((double)seen >= q * (double)total)
			return (double)(2ull << i);
	}
	return (double)(2ull << (PF_HIST_BUCKETS - 1));
}
