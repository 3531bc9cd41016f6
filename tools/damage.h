/* SPDX-License-Identifier: Apache-2.0 */
/* TFRecord streams with a damaged region of a chosen kind and size, for
 * measuring skip mode: `pfbench skip` times them, and
 * tests/formats/test_formats_skipwork.c counts the CRC work they cost. */
#ifndef PF_TOOLS_DAMAGE_H
#define PF_TOOLS_DAMAGE_H

#include <stddef.h>
#include <stdint.h>

#define PF_DAMAGE_REC 200u	/* each record's payload bytes */

typedef enum pf_damage_kind {
	PF_DAMAGE_NONE,		/* intact records (the reference) */
	PF_DAMAGE_GARBAGE,	/* random bytes: one drop, every byte searched */
	PF_DAMAGE_ZEROS,	/* zero bytes (a block lost to a sparse or zeroed
				 * page): one drop, every byte searched, and
				 * each has a length (0) within the limit */
	PF_DAMAGE_BAD_CRC,	/* records whose data CRC fails, framing whole: a drop each */
	PF_DAMAGE_SHIFTED,	/* records a byte short, each before an intact one:
				 * framing broken, a search (and a drop) each */
	PF_DAMAGE_KINDS
} pf_damage_kind;

extern const char *const pf_damage_names[PF_DAMAGE_KINDS];

/* What reading the stream in skip mode must give. */
typedef struct pf_damage_expect {
	uint64_t records, drops;
	size_t damaged;		/* the damaged region's bytes */
} pf_damage_expect;

/* A malloc'd stream of *len bytes: edge intact records, a damaged region
 * of about damage bytes (whole units of its kind, at least one), edge
 * intact records.  NULL when out of memory. */
uint8_t *pf_damage_stream(size_t edge, size_t damage, pf_damage_kind kind, size_t *len,
			  pf_damage_expect *expect);

#endif
