/* SPDX-License-Identifier: Apache-2.0 */
/* pfbench's parts shared by its files: pfbench.c (main, crc, decompress,
 * decode, skip) and pfbench_decode.c (specdecode, varint). */
#ifndef PF_PFBENCH_H
#define PF_PFBENCH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* --cpu: CLOCK_THREAD_CPUTIME_ID instead of CLOCK_MONOTONIC. */
extern clockid_t bench_clock;

/* One benchmark's figures: a name and a string (s), a count (u; d < 0) or
 * a number rounded to d decimals, as the figures have always been given. */
typedef struct field {
	const char *key;
	double v;
	int d;
	uint64_t u;
	const char *s;
} field;

/* {"bench":NAME, the fields...} as one JSON line.  @return 0, or 1 after
 * saying the memory ran out. */
int bench_line(const char *bench, const field *f);

/* Seconds on bench_clock. */
double bench_now(void);

/* Every record of the files, back to back in memory. */
typedef struct recset {
	uint8_t *data;
	size_t len, cap;
	size_t *off;
	uint32_t *rlen;
	size_t n, ncap;
	size_t max_len;
} recset;

/* @return 0, or < 0 after saying why. */
int load_records(char **files, int n, recset *rs);

/* specdecode's destination rows (--rows) and default specs. */
extern size_t bench_rows;
extern const char *const default_specs[];

int bench_specdecode(char **files, int n, int runs, const char *const *specs, int nspecs,
		     const char *simd);
int bench_varint(char **files, int n, int runs);

#endif /* PF_PFBENCH_H */
