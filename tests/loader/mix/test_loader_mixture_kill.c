/* SPDX-License-Identifier: Apache-2.0 */
/* A mixture's consumer killed with SIGKILL at random points (resume_child
 * over three sources, committing its state after every step): on 1 and 4
 * hosts the ids it logs, restarted from its last commit each time, are
 * byte for byte those of a run never killed; 4 hosts stopped at different
 * steps and resumed on 2, killed the same way, deliver no id twice. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kill_util.h"
#include "podfeed.h"
#include "testutil.h"

#define ID_BASE 1000000u	/* source k's ids: k * ID_BASE + [0, count) */

/* Three sources joined by commas, as resume_child takes a mixture: the
 * first ends the run (one epoch of it) before the others end theirs. */
static const char *mixture(char *buf, size_t len)
{
	static const uint64_t counts[3] = { 600, 900, 900 };
	size_t at = 0;

	for (uint32_t k = 0; k < 3; k++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", k ? "," : "",
				       tu_id_shards((uint64_t)k * ID_BASE, counts[k], 2, 2048));
	return buf;
}

static void same_file(const char *a, const char *b)
{
	size_t la, lb;
	uint8_t *x = tu_read_file(a, &la), *y = tu_read_file(b, &lb);

	cr_assert_gt(la, 0, "%s is empty", a);
	cr_assert_eq(la, lb, "%s: %zu bytes, %s: %zu", a, la, b, lb);
	cr_assert_eq(memcmp(x, y, la), 0, "%s and %s differ", a, b);
	free(x);
	free(y);
}

Test(mixture_kill, sigkill_at_random_points_one_and_four_hosts_and_a_resize, .timeout = 600)
{
	char d[4096], la[512], lb[512];
	const char *work = tu_tmpdir();
	const uint64_t nids = 3 * (uint64_t)ID_BASE;
	uint8_t *seen = calloc(nids, 1);
	killer k = { .rng = 0xfeed };
	const uint64_t stop[4] = { 20, 11, 30, 25 };
	unsigned before = 0;
	uint64_t n = 0;

	cr_assert_not_null(seen);
	mixture(d, sizeof(d));
	/* One host, then four: the killed runs' logs are the unkilled ones. */
	ku_unkilled(d, work, 'r', 1);
	ku_phase(&k, d, work, 'o', 1, NULL, 0, 15);
	same_file(ARG(la, "%s/lo0", work), ARG(lb, "%s/lr0", work));
	ku_took(&k, &before, "1 host");
	ku_unkilled(d, work, 's', 4);
	ku_phase(&k, d, work, 'f', 4, NULL, 0, 15);
	for (uint32_t h = 0; h < 4; h++) {
		same_file(ARG(la, "%s/lf%u", work, h), ARG(lb, "%s/ls%u", work, h));
		ku_count_log(la, seen, nids, &n);	/* and disjoint across hosts */
	}
	ku_took(&k, &before, "4 hosts");
	/* Four hosts stop at different steps; two go on from their states:
	 * no id twice across all six logs. */
	memset(seen, 0, nids);
	n = ku_four_stopped(&k, d, work, stop, seen, nids);
	ku_phase(&k, d, work, 'b', 2, NULL, 4, 10);
	{
		uint64_t n0 = n, n1;

		ku_count_log(ARG(la, "%s/lb0", work), seen, nids, &n);
		n1 = n;
		ku_count_log(ARG(la, "%s/lb1", work), seen, nids, &n);
		cr_assert_gt(n1 - n0, 0);
		cr_assert_eq(n1 - n0, n - n1, "the new hosts made different steps");
	}
	ku_took(&k, &before, "4 to 2");
	free(seen);
}
