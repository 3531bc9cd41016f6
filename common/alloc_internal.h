/* SPDX-License-Identifier: Apache-2.0 */
/* Private to podfeed (every module; never installed): the functions every
 * allocation of the library goes through. */
#ifndef PF_ALLOC_INTERNAL_H
#define PF_ALLOC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/*
 * Every allocation of the library, and those zstd, zlib and protobuf-c make
 * for it, goes through these, so that a test can make any one of them fail.
 * They behave as their libc namesakes except that a size of 0 allocates
 * one byte (so NULL always means out of memory) and pf_calloc() refuses a
 * count * size that overflows.  Memory from them is released with
 * pf_free(), never free().  Thread-safe.
 */
void *pf_malloc(size_t size);
void *pf_calloc(size_t n, size_t size);
/* On failure NULL, with p left as it was (still to be freed). */
void *pf_realloc(void *p, size_t size);
char *pf_strdup(const char *s);
/* NULL is a no-op. */
void pf_free(void *p);

/* TEST HOOK, for allocation-failure tests only: make the nth allocation
 * from now fail (return NULL), once; the allocations after it succeed
 * again.  n = 0 turns the hook off.  Process-wide: an allocation by any
 * thread counts. */
void pf_alloc_fail_at(uint64_t n);
/* TEST HOOK: allocations attempted since the process started (failed
 * ones too; a pf_realloc() counts as one). */
uint64_t pf_alloc_count(void);
/* TEST HOOK: allocations made and not yet freed.  A cycle that frees all
 * it made leaves it where it found it. */
uint64_t pf_alloc_live(void);

/* The allocator callbacks handed to zstd (ZSTD_customMem), protobuf-c
 * (ProtobufCAllocator) and zlib (z_stream zalloc/zfree), so that their
 * allocations go through pf_malloc() too.  The opaque argument is unused. */
void *pf_alloc_cb(void *opaque, size_t size);
void pf_free_cb(void *opaque, void *p);
void *pf_zalloc_cb(void *opaque, unsigned items, unsigned size);

#endif
