/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers of the skip and records-of tests (test_loader_skip,
 * test_loader_which; never linked into the library): a loader run from
 * given states, each step's batch kept as a digest and its ids. */
#ifndef PF_SKIP_UTIL_H
#define PF_SKIP_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "podfeed.h"

#define SK_MAX_STEPS 4096u

typedef struct sk_blob {
	uint8_t *data;
	size_t len;
} sk_blob;

/* What a run handed out: per step its digest (a CRC32C of every core's
 * block), numbers, and the ids of its rows (feature 0, int64, when the
 * spec starts with one: -1 in a hole). */
typedef struct sk_steps {
	uint64_t n;
	uint32_t crc[SK_MAX_STEPS];
	uint64_t global[SK_MAX_STEPS];
	uint32_t epoch[SK_MAX_STEPS];
	uint64_t step[SK_MAX_STEPS];
	int64_t *ids;		/* [n x host batch] */
	uint32_t host_batch, per_core_batch;
	/* keep_rows (set before sk_run()): a packed run's first feature and
	 * its segment ids, step by step ([n][host batch][row_len]). */
	bool keep_rows;
	uint32_t row_len;
	int32_t *values, *segs;
	pf_loader_metrics m;	/* at the run's end */
} sk_steps;

/* Run cfg (its paths, features and the rest as given) from the states
 * `from` (nfrom of them), skipping `skip` steps, for at most max steps
 * (SK_ALL: to the end), into *s (reset first; NULL: not kept); @return
 * the state after (its data malloc()ed). */
#define SK_ALL UINT64_MAX
sk_blob sk_run(pf_loader_config cfg, const sk_blob *from, size_t nfrom, uint64_t skip,
	       uint64_t max, sk_steps *s);
/* The same, creating the loader only: @return pf_loader_create()'s, err
 * its error. */
int sk_create_fails(pf_loader_config cfg, const sk_blob *from, size_t nfrom, uint64_t skip,
		    pf_error *err);
/* b's steps equal a's from a's step `at` on, to b's end (digests and
 * numbers); what for messages. */
void sk_expect_same(const sk_steps *a, uint64_t at, const sk_steps *b, const char *what);
void sk_steps_free(sk_steps *s);
/* The id (feature "id", int64) of record `record` of the file at path,
 * read from the file itself (an indexed shard through its index, a stream
 * from its start; the last file's reader kept). */
int64_t sk_record_id(const char *path, uint64_t record);
/* The int64 values of `feature` of that record into out (at most cap);
 * @return how many it has. */
uint32_t sk_record_values(const char *path, uint64_t record, const char *feature,
			  int64_t *out, uint32_t cap);
/* Every step of s (a packed run kept with keep_rows): each piece
 * l's pf_loader_records_of() names holds, in its row, the values of
 * `feature` of that record it says, with its segment id, and the pieces
 * name every value the rows hold (a packed mixture's pieces say their
 * source's epoch, not the step's). */
void sk_expect_packed(const pf_loader *l, const sk_steps *s, const char *feature,
		      const char *what);
/* Every step of s (a run of l's config, l a loader of it): l's
 * pf_loader_records_of() of each names, row by row, the record whose id
 * the run delivered there. */
void sk_expect_records(const pf_loader *l, const sk_steps *s, const char *what);

#endif
