/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed's allocator: every allocation of the library goes through the
 * pf_allocator in force (malloc and free unless pf_allocator_set() says
 * otherwise), behind pf_malloc() and friends. */
#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_internal.h"
#include "pf_common.h"

/*
 * Every block carries a header just below the address the caller gets:
 * its size, which pf_realloc() needs to copy a block when the allocator
 * has no realloc of its own (pf_allocator has none, as zstd's and
 * protobuf-c's), and its distance from the start of what the allocator
 * returned, which pf_free() needs for the blocks pf_malloc_aligned()
 * aligned further.  The header is a multiple of malloc's alignment, so a
 * block keeps the alignment of what the allocator returned.  The
 * library's allocations are few and large (hot paths allocate nothing:
 * pools, arenas), so the 16 bytes each cost nothing measurable.
 *
 * The count of blocks live is what lets pf_allocator_set() refuse to
 * change the allocator under a block: a block is always freed by the
 * allocator that made it.  It costs one relaxed atomic addition per
 * allocation and per free.
 */
typedef struct block_header {
	size_t size;	/* what the caller asked for */
	size_t offset;	/* from what the allocator returned to the block */
} block_header;

#define HEADER_ALIGN (alignof(max_align_t) > 16 ? alignof(max_align_t) : 16)
#define HEADER ((sizeof(block_header) + HEADER_ALIGN - 1) / HEADER_ALIGN * HEADER_ALIGN)

static void *libc_alloc(void *opaque, size_t size)
{
	(void)opaque;
	return malloc(size);
}

static void libc_free(void *opaque, void *p)
{
	(void)opaque;
	free(p);
}

static const pf_allocator libc_allocator = { libc_alloc, libc_free, NULL };

/* The allocator in force: &libc_allocator or one of the two copies of a
 * caller's (written while no block is live, then published). */
static pf_allocator installed[2];
static unsigned next_slot;
static const pf_allocator *current = &libc_allocator;
static pthread_mutex_t set_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t live;	/* blocks made and not freed */

static const pf_allocator *in_force(void)
{
	return __atomic_load_n(&current, __ATOMIC_ACQUIRE);
}

int pf_allocator_set(const pf_allocator *a)
{
	int ret = 0;

	if (a && (!a->alloc || !a->free))
		return -EINVAL;
	pthread_mutex_lock(&set_mu);
	if (__atomic_load_n(&live, __ATOMIC_ACQUIRE)) {
		ret = -EBUSY;
	} else if (!a) {
		__atomic_store_n(&current, &libc_allocator, __ATOMIC_RELEASE);
	} else {
		pf_allocator *slot = &installed[next_slot];

		next_slot ^= 1;
		*slot = *a;
		__atomic_store_n(&current, slot, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&set_mu);
	return ret;
}

/* A block of size bytes whose address is a multiple of align (a power of
 * two; HEADER_ALIGN or more), zeroed when zero says so. */
static void *block_alloc(size_t size, size_t align, bool zero)
{
	const pf_allocator *a = in_force();
	/* Room to round up to align from wherever the block starts. */
	size_t extra = HEADER + (align > HEADER_ALIGN ? align - 1 : 0);
	uint8_t *raw, *p;
	block_header *h;

	if (size > SIZE_MAX - extra)
		return NULL;
	/* calloc() gives large blocks from fresh (already zero) pages. */
	if (zero && a == &libc_allocator)
		raw = calloc(1, size + extra);
	else
		raw = a->alloc(a->opaque, size + extra);
	if (!raw)
		return NULL;
	p = raw + HEADER;
	if (align > HEADER_ALIGN)
		p = (uint8_t *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
	h = (block_header *)(p - HEADER);
	h->size = size;
	h->offset = (size_t)(p - raw);
	if (zero && a != &libc_allocator)
		memset(p, 0, size);
	__atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
	return p;
}

static block_header *header_of(void *p)
{
	return (block_header *)((uint8_t *)p - HEADER);
}

void *pf_malloc(size_t size)
{
	return block_alloc(size, HEADER_ALIGN, false);
}

void *pf_calloc(size_t n, size_t size)
{
	size_t bytes;

	if (__builtin_mul_overflow(n, size, &bytes))
		return NULL;
	return block_alloc(bytes, HEADER_ALIGN, true);
}

void *pf_malloc_aligned(size_t size, size_t align)
{
	if (!align || (align & (align - 1)) || align > 4096)
		return NULL;
	if (align < HEADER_ALIGN)
		align = HEADER_ALIGN;
	return block_alloc(size, align, false);
}

void *pf_realloc(void *p, size_t size)
{
	const pf_allocator *a = in_force();
	block_header *h;
	size_t align;
	void *q;

	if (!p)
		return pf_malloc(size);
	h = header_of(p);
	if (a == &libc_allocator && h->offset == HEADER) {
		/* libc's realloc() may grow in place. */
		uint8_t *raw;

		if (size > SIZE_MAX - HEADER)
			return NULL;
		raw = realloc((uint8_t *)p - HEADER, size + HEADER);
		if (!raw)
			return NULL;
		((block_header *)raw)->size = size;
		return raw + HEADER;
	}
	/* A block pf_malloc_aligned() made keeps an alignment at least its
	 * own: that of its address (at most 4096, as asked). */
	align = (uintptr_t)p & -(uintptr_t)p;
	align = h->offset == HEADER ? HEADER_ALIGN : align < 4096 ? align : 4096;
	q = block_alloc(size, align, false);
	if (!q)
		return NULL;
	memcpy(q, p, h->size < size ? h->size : size);
	pf_free(p);
	return q;
}

int pf_grow(void *array, size_t *cap, size_t need, size_t elem)
{
	void **p = array;
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return -ENOMEM;
		n *= 2;
	}
	if (elem && n > SIZE_MAX / elem)
		return -ENOMEM;
	q = pf_realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
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
	const pf_allocator *a;
	block_header *h;

	if (!p)
		return;
	a = in_force();
	h = header_of(p);
	__atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
	a->free(a->opaque, (uint8_t *)p - h->offset);
}

/* ------------------------------------------------------------------ */
/* Callbacks for the libraries that take an allocator                   */

void *pf_alloc_cb(void *opaque, size_t size)
{
	(void)opaque;
	return pf_malloc(size);
}

void *pf_alloc_cb_flag(void *failed, size_t size)
{
	void *p = pf_malloc(size);

	if (!p)
		*(bool *)failed = true;
	return p;
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
