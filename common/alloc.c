/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed's allocator: malloc and friends behind one hook that counts every
 * allocation and can make the Nth one fail, for allocation-failure tests. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_internal.h"

/*
 * Every allocation of the library goes through here (and the allocations
 * of zstd, zlib and protobuf-c through the callbacks at the end), so that
 * a test can fail each one in turn and check that the error path returns
 * -ENOMEM and leaks nothing (DESIGN/STYLE: "fail the Nth allocation", in
 * the manner of protobuf-c's failing-allocator test).
 *
 * The counters are process-wide and updated with relaxed atomics: the
 * loader's threads allocate too, and each allocation must draw a distinct
 * number so that exactly one of them fails.  The cost is two atomic
 * additions per allocation; the hot paths do not allocate (buffer pools,
 * arenas), so nobody pays it per record.
 *
 * A failure is one-shot: the allocation numbered fail_target fails, those
 * after it succeed again.  That is what makes "for every N" meaningful:
 * run N fails the Nth allocation and only it, so the error path of every
 * allocation site is taken exactly once over the sweep, and any cleanup
 * that itself allocates still can.
 */

static uint64_t alloc_count;	/* allocations attempted so far */
static uint64_t fail_target;	/* the count that fails; 0: none */
static uint64_t alloc_live;	/* succeeded and not yet freed */

/* Draw this allocation's number; @return true when it must fail. */
static bool draw_fails(void)
{
	uint64_t n = __atomic_add_fetch(&alloc_count, 1, __ATOMIC_RELAXED);
	uint64_t target = __atomic_load_n(&fail_target, __ATOMIC_RELAXED);

	return target && n == target;
}

static void *counted(void *p)
{
	if (p)
		__atomic_add_fetch(&alloc_live, 1, __ATOMIC_RELAXED);
	return p;
}

void pf_alloc_fail_at(uint64_t n)
{
	uint64_t now = __atomic_load_n(&alloc_count, __ATOMIC_RELAXED);

	__atomic_store_n(&fail_target, n ? now + n : 0, __ATOMIC_RELAXED);
}

uint64_t pf_alloc_count(void)
{
	return __atomic_load_n(&alloc_count, __ATOMIC_RELAXED);
}

uint64_t pf_alloc_live(void)
{
	return __atomic_load_n(&alloc_live, __ATOMIC_RELAXED);
}

/* Size 0 is made 1 byte everywhere: malloc(0) may return NULL, and a NULL
 * must mean only "out of memory" to the callers. */
void *pf_malloc(size_t size)
{
	if (draw_fails())
		return NULL;
	return counted(malloc(size ? size : 1));
}

void *pf_calloc(size_t n, size_t size)
{
	size_t bytes;

	/* Overflow is refused before the hook draws a number, so a sweep
	 * counts only allocations that could succeed. */
	if (__builtin_mul_overflow(n, size, &bytes))
		return NULL;
	if (draw_fails())
		return NULL;
	return counted(calloc(bytes ? n : 1, bytes ? size : 1));
}

void *pf_realloc(void *p, size_t size)
{
	void *q;

	if (draw_fails())
		return NULL;
	q = realloc(p, size ? size : 1);
	/* Only a new block changes the live count; a moved one is still one. */
	if (q && !p)
		__atomic_add_fetch(&alloc_live, 1, __ATOMIC_RELAXED);
	return q;
}

char *pf_strdup(const char *s)
{
	size_t len = strlen(s) + 1;
	char *copy = pf_malloc(len);

	if (copy)
		memcpy(copy, s, len);
	return copy;
}

void pf_free(void *p)
{
	if (!p)
		return;
	__atomic_sub_fetch(&alloc_live, 1, __ATOMIC_RELAXED);
	free(p);
}

/* ------------------------------------------------------------------ */
/* Callbacks for the libraries that take an allocator                   */

void *pf_alloc_cb(void *opaque, size_t size)
{
	(void)opaque;
	return pf_malloc(size);
}

void pf_free_cb(void *opaque, void *p)
{
	(void)opaque;
	pf_free(p);
}

/* zlib does not need zeroed memory; both factors are 32-bit, so their
 * product fits a size_t. */
void *pf_zalloc_cb(void *opaque, unsigned items, unsigned size)
{
	(void)opaque;
	return pf_malloc((size_t)items * size);
}
