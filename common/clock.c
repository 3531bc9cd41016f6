/* SPDX-License-Identifier: Apache-2.0 */
/* The monotonic clock every layer times intervals with, and the thread CPU
 * clock autotune weighs work with. */
#include <time.h>

#include "common_internal.h"

uint64_t pf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t pf_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
