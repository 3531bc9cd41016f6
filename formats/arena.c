/* SPDX-License-Identifier: Apache-2.0 */
/* The arena: one block a batch of decoded examples is bump-allocated from
 * and reset as a whole (the fast decoder, the reference decoder and the
 * loader's spec decode all write into one). */
#include <errno.h>

#include "formats_internal.h"

void *pf_arena_alloc(pf_arena *a, size_t size)
{
	size_t off = (a->used + 7u) & ~(size_t)7u;

	if (off < a->used || off > a->cap || size > a->cap - off)
		return NULL;
	a->used = off + size;
	return a->base + off;
}

int pf_arena_init(pf_arena *a, size_t cap)
{
	a->base = pf_malloc(cap);
	a->cap = a->base ? cap : 0;
	a->used = 0;
	return a->base ? 0 : -ENOMEM;
}

void pf_arena_release(pf_arena *a)
{
	if (!a)
		return;
	pf_free(a->base);
	a->base = NULL;
	a->cap = 0;
	a->used = 0;
}
