/* SPDX-License-Identifier: Apache-2.0 */
/* The loader's large pools (batch slots, read buffers, stream buffers):
 * anonymous mappings asking for transparent huge pages, and a small
 * process-wide cache of the mappings freed loaders leave, so that the
 * next loader of the process starts on memory that is already there.
 *
 * Why a cache: a pool is written in full on a loader's first pass, and
 * the first touch of a page costs a fault and a page clear; on a virtual
 * machine whose host backs guest memory lazily it costs a host fault
 * too.  Measured here (loadbench, 250,000 token records, 2 threads): the
 * 130 MiB of pools took 15 to 200 ms to fault in, against the 90 ms the
 * whole epoch then takes.  A process that makes loaders one after the
 * other (one per epoch, an evaluation loader every N steps, a resume,
 * loadbench --repeat) pays that once with the cache, as glibc's malloc
 * makes it pay once for its heap.
 *
 * The cache is the caller's choice (pf_loader_config.keep_pools): a
 * loader that did not ask gives its pools back to the system, so that
 * nothing of it outlives it.  A cached mapping is reused for a pool of
 * the same mapped size only (equal configurations ask equal sizes), by
 * any loader; the cache holds at most PF_POOL_CACHE mappings and
 * PF_POOL_CACHE_BYTES, the oldest going back to the system first.
 * pf_pool_trim() (public: pf_loader_trim()) gives all of it back.  Read buffers
 * the kernel may still write into (a loader whose I/O engine failed with
 * reads in flight, or abandoned reads it could not cancel) give their
 * pages back but keep their addresses, inaccessible (pf_pool_unmap()),
 * never handed to the next loader. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pipeline_internal.h"

#define PF_HUGE (2u << 20)
#define PF_POOL_CACHE 8u
#define PF_POOL_CACHE_BYTES (1ull << 30)

typedef struct cached {
	void *p;
	size_t size;	/* mapped bytes */
	uint64_t age;	/* order of caching: lower is older */
} cached;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static cached cache[PF_POOL_CACHE];
static unsigned ncache;
static size_t cache_bytes;
static uint64_t cache_age;

static size_t mapped_size(size_t size)
{
	return (size + PF_HUGE - 1) / PF_HUGE * PF_HUGE;
}

/* Drop entry i from the cache (not unmapped).  Call with cache_mu held. */
static void cache_take(unsigned i)
{
	cache_bytes -= cache[i].size;
	cache[i] = cache[--ncache];
}

static void *pool_alloc(size_t size, bool sparse)
{
	size_t m = mapped_size(size);
	void *p = NULL;

	if (!size)
		return NULL;
	pthread_mutex_lock(&cache_mu);
	for (unsigned i = 0; i < ncache; i++) {
		if (cache[i].size == m) {
			p = cache[i].p;
			cache_take(i);
			break;
		}
	}
	pthread_mutex_unlock(&cache_mu);
	if (!p) {
		p = mmap(NULL, m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
	}
	/* Every page is touched on the first pass: 2 MiB pages cut the
	 * faults (and the pinning of registered buffers) 512-fold.  Without
	 * THP they are ordinary pages.  Sparse memory (a 64 KiB row holding
	 * a few hundred tokens) would fault in 2 MiB for each: ordinary
	 * pages (concat packing: 213 -> 57 MB resident, 1.6 -> 0.8 s).  A
	 * cached mapping takes its new user's advice. */
	(void)madvise(p, m, sparse ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
	return p;
}

void *pf_pool_alloc(size_t size)
{
	return pool_alloc(size, false);
}

void *pf_pool_alloc_sparse(size_t size)
{
	return pool_alloc(size, true);
}

void pf_pool_free(void *p, size_t size, bool keep)
{
	size_t m = mapped_size(size);
	void *evict[PF_POOL_CACHE + 1];
	size_t evict_size[PF_POOL_CACHE + 1];
	unsigned nevict = 0;

	if (!p)
		return;
	pthread_mutex_lock(&cache_mu);
	if (!keep || m > PF_POOL_CACHE_BYTES) {
		evict[nevict] = p;
		evict_size[nevict++] = m;
	} else {
		/* Room first: the oldest entries go back to the system. */
		while (ncache == PF_POOL_CACHE || cache_bytes + m > PF_POOL_CACHE_BYTES) {
			unsigned old = 0;

			for (unsigned i = 1; i < ncache; i++)
				if (cache[i].age < cache[old].age)
					old = i;
			evict[nevict] = cache[old].p;
			evict_size[nevict++] = cache[old].size;
			cache_take(old);
		}
		cache[ncache++] = (cached){ p, m, cache_age++ };
		cache_bytes += m;
	}
	pthread_mutex_unlock(&cache_mu);
	for (unsigned i = 0; i < nevict; i++)
		munmap(evict[i], evict_size[i]);
}

void pf_pool_unmap(void *p, size_t size)
{
	/* The kernel may still write here (a read left in flight or
	 * abandoned): its pages go, its addresses stay reserved and
	 * inaccessible, so that a late write faults in the kernel (the read
	 * fails, EFAULT) instead of landing in whatever would be mapped here
	 * next.  Registered buffers' pages stay pinned by the ring until
	 * its read ends, mapped nowhere. */
	if (p && mmap(p, mapped_size(size), PROT_NONE,
		      MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED)
		munmap(p, mapped_size(size));
}

size_t pf_pool_cached(void)
{
	size_t n;

	pthread_mutex_lock(&cache_mu);
	n = cache_bytes;
	pthread_mutex_unlock(&cache_mu);
	return n;
}

void pf_pool_trim(void)
{
	pthread_mutex_lock(&cache_mu);
	while (ncache) {
		cached c = cache[ncache - 1];

		cache_take(ncache - 1);
		pthread_mutex_unlock(&cache_mu);
		munmap(c.p, c.size);
		pthread_mutex_lock(&cache_mu);
	}
	pthread_mutex_unlock(&cache_mu);
}

void pf_loader_trim(void)
{
	pf_pool_trim();
}
