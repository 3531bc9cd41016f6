/* SPDX-License-Identifier: Apache-2.0 */
/* Private to podfeed (every module; never installed): the functions every
 * allocation of the library goes through. */
#ifndef PF_ALLOC_INTERNAL_H
#define PF_ALLOC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/*
 * Every allocation of the library, and those zstd, zlib and protobuf-c make
 * for it, goes through these, and they through the pf_allocator in force
 * (pf_common.h: malloc() and free() unless the caller set another).  They
 * behave as their libc namesakes except that a size of 0 is a valid block
 * (so NULL always means out of memory) and pf_calloc() refuses a count *
 * size that overflows.  Memory from them is released with pf_free(), never
 * free(), and memory from malloc() never with pf_free().  Thread-safe.
 */
void *pf_malloc(size_t size);
void *pf_calloc(size_t n, size_t size);
/* On failure NULL, with p left as it was (still to be freed). */
void *pf_realloc(void *p, size_t size);
char *pf_strdup(const char *s);
/* size bytes at an address that is a multiple of align (a power of two, at
 * most 4096; less than malloc's alignment is malloc's), for vector code.
 * Freed with pf_free(); NULL when align is not such a power of two. */
void *pf_malloc_aligned(size_t size, size_t align);
/* NULL is a no-op. */
void pf_free(void *p);
/* Make room for need elements of elem bytes in the array *array (room
 * for *cap now), doubling from 16.  @return 0, or -ENOMEM with *array and
 * *cap as they were. */
int pf_grow(void *array, size_t *cap, size_t need, size_t elem);

/* The allocator callbacks handed to zstd (ZSTD_customMem), protobuf-c
 * (ProtobufCAllocator) and zlib (z_stream zalloc/zfree), so that their
 * allocations go through pf_malloc() too.  The opaque argument is unused,
 * but for pf_alloc_cb_flag()'s: a bool set to true when an allocation
 * fails (protobuf-c's unpack returns NULL both for bad input and for out
 * of memory; the flag tells them apart). */
void *pf_alloc_cb(void *opaque, size_t size);
void *pf_alloc_cb_flag(void *failed, size_t size);
void pf_free_cb(void *opaque, void *p);
void *pf_zalloc_cb(void *opaque, unsigned items, unsigned size);

#endif
