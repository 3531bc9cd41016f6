/* SPDX-License-Identifier: Apache-2.0 */
/* Private to podfeed (every module, the tools and the tests; never
 * installed): the small helpers every layer shares, written once: the
 * monotonic clock and the CPUs, splitmix64 and the seeded random streams
 * made of it, FNV-1a hashing, and the log2 latency histogram.  The
 * allocator is alloc_internal.h, the error context pf_common.h, JSON
 * json_internal.h. */
#ifndef PF_COMMON_INTERNAL_H
#define PF_COMMON_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "alloc_internal.h"
#include "pf_common.h"

/* ------------------------------------------------------------------ */
/* Sized structs (abi.c; pf_common.h, "the ABI promise")                 */

/* Copy a caller's struct of src_size bytes into the library's dst of
 * dst_size: the bytes the caller's header lacks are zeroed; bytes beyond
 * the library's struct must be zero (-E2BIG naming the first one set);
 * a src_size below min_size (the smallest the struct ever was) is
 * -EINVAL.  what names the struct in the message. */
int pf_struct_in(void *dst, size_t dst_size, const void *src, size_t src_size,
		 size_t min_size, const char *what, pf_error *err);
/* Copy the library's struct out into the caller's of dst_size bytes: cut
 * to it, or zero-extended when the caller's header is the newer. */
void pf_struct_out(void *dst, size_t dst_size, const void *src, size_t src_size);

/* The size of TYPE up to and including FIELD: a struct's size as of the
 * header whose last field FIELD was. */
#define PF_SIZE_THROUGH(type, field) \
	(offsetof(type, field) + sizeof(((type *)0)->field))

/* ------------------------------------------------------------------ */
/* The clock (clock.c)                                                  */

/* CLOCK_MONOTONIC in nanoseconds: for intervals, never for dates. */
uint64_t pf_now_ns(void);
/* The calling thread's CPU time in nanoseconds: what work costs, whatever
 * else the machine runs. */
uint64_t pf_thread_cpu_ns(void);
/* Online CPUs (at least 1): the default count of worker threads. */
unsigned pf_cpus(void);

/* ------------------------------------------------------------------ */
/* splitmix64 and seeded streams                                        */
/*
 * The one source of randomness: everything drawn (record order, injected
 * faults, synthetic data, initial parameters) is a pure function of a seed
 * and of what is drawn, never of timing or of a C library's rand().
 * Inline: the loader's shuffles draw per record.
 */

#define PF_GOLDEN_GAMMA 0x9e3779b97f4a7c15ull

/* splitmix64's output function (Stafford's mix13): a bijection of 64-bit
 * words that scatters every input bit over the output. */
static inline uint64_t pf_mix64_final(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A hash of x: splitmix64's next output from state x.  Combine hashes of
 * several values as pf_mix64(a ^ pf_mix64(b)). */
static inline uint64_t pf_mix64(uint64_t x)
{
	return pf_mix64_final(x + PF_GOLDEN_GAMMA);
}

/* splitmix64 itself: the next output of the stream whose state is *state. */
static inline uint64_t pf_splitmix64_next(uint64_t *state)
{
	*state += PF_GOLDEN_GAMMA;
	return pf_mix64_final(*state);
}

/* Uniform in [0, 1) from 64 random bits (their top 53). */
static inline double pf_unit_double(uint64_t bits)
{
	return (double)(bits >> 11) * 0x1.0p-53;
}

__extension__ typedef unsigned __int128 pf_u128;

/* A seeded stream: every stream is seeded from (seed, a, b), e.g. (seed,
 * epoch, what it orders), so that order never depends on timing. */
typedef struct pf_rng {
	uint64_t s;
} pf_rng;

static inline pf_rng pf_rng_seed(uint64_t seed, uint64_t a, uint64_t b)
{
	pf_rng r = { pf_mix64(seed ^ pf_mix64(a ^ pf_mix64(b + 0x51ed27ull))) };
	return r;
}

static inline uint64_t pf_rng_next(pf_rng *r)
{
	r->s += PF_GOLDEN_GAMMA;
	return pf_mix64(r->s);
}

/* Uniform in [0, n) without modulo bias worth caring about (n < 2^32). */
static inline uint64_t pf_rng_below(pf_rng *r, uint64_t n)
{
	return (uint64_t)(((pf_u128)pf_rng_next(r) * n) >> 64);
}

/* Uniform in [0, 1). */
static inline double pf_rng_unit(pf_rng *r)
{
	return pf_unit_double(pf_rng_next(r));
}

/* ------------------------------------------------------------------ */
/* FNV-1a                                                               */

#define PF_FNV64_OFFSET 0xcbf29ce484222325ull
#define PF_FNV32_OFFSET 2166136261u

/* Extend the 64-bit FNV-1a hash h (PF_FNV64_OFFSET to start) over len
 * bytes: a digest of bytes that must compare equal across runs and hosts
 * (not a defence against anyone). */
static inline uint64_t pf_fnv1a64(uint64_t h, const void *data, size_t len)
{
	const uint8_t *p = data;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The 32-bit FNV-1a hash of len bytes, for hash tables of short names. */
static inline uint32_t pf_fnv1a32(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t h = PF_FNV32_OFFSET;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* ------------------------------------------------------------------ */
/* The log2 latency histogram (hist.c)                                  */
/*
 * Latencies counted in PF_HIST_BUCKETS buckets of powers of two of
 * microseconds: bucket i holds [2^i, 2^(i+1)) us, bucket 0 everything
 * below 2 us, the last everything above.  The I/O engine's per-file and
 * per-region read latencies (pf_io_stats.hist) and the loader's next()
 * latencies (pf_loader_metrics.next_hist) are such histograms.
 */
#define PF_HIST_BUCKETS 32u

/* The bucket of a latency in nanoseconds. */
unsigned pf_hist_bucket(uint64_t ns);
/* The latency at quantile q (0..1) of hist[PF_HIST_BUCKETS], in
 * microseconds: the upper bound of the bucket the quantile falls in; 0
 * for an empty histogram. */
double pf_hist_quantile_us(const uint64_t *hist, double q);

#endif
