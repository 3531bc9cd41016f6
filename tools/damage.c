/* SPDX-License-Identifier: Apache-2.0 */
/* Damaged TFRecord streams (damage.h). */
#include <stdlib.h>
#include <string.h>

#include "common_internal.h"
#include "damage.h"
#include "pf_formats.h"

#define WHOLE (PF_DAMAGE_REC + PF_TFR_OVERHEAD)

const char *const pf_damage_names[PF_DAMAGE_KINDS] = { "none", "garbage", "zeros",
							"bad_crc", "shifted" };

/* One record at dst (WHOLE bytes): intact, its data spoilt (bad), or a
 * byte short (WHOLE - 1 bytes: its last data byte gone).  @return its size. */
static size_t put_record(uint8_t *dst, uint64_t *rng, bool bad, bool short_one)
{
	uint8_t data[PF_DAMAGE_REC];

	for (size_t i = 0; i < PF_DAMAGE_REC; i++)
		data[i] = (uint8_t)pf_splitmix64_next(rng);
	pf_tfr_encode(dst, WHOLE, data, PF_DAMAGE_REC);
	if (bad)
		dst[PF_TFR_HEADER_SIZE + 7] ^= 0x40;
	if (!short_one)
		return WHOLE;
	memmove(dst + PF_TFR_HEADER_SIZE + PF_DAMAGE_REC - 1,
		dst + PF_TFR_HEADER_SIZE + PF_DAMAGE_REC, PF_TFR_FOOTER_SIZE);
	return WHOLE - 1;
}

uint8_t *pf_damage_stream(size_t edge, size_t damage, pf_damage_kind kind, size_t *len,
			  pf_damage_expect *expect)
{
	/* The region's unit: a record, or a short one and an intact one. */
	size_t unit = kind == PF_DAMAGE_SHIFTED				     ? 2 * WHOLE - 1
		      : kind == PF_DAMAGE_GARBAGE || kind == PF_DAMAGE_ZEROS ? 1
									     : WHOLE;
	size_t units = damage / unit ? damage / unit : 1, at = 0;
	uint64_t rng = 0x5eedull + (uint64_t)kind;
	uint8_t *p;

	expect->damaged = units * unit;
	expect->records = 2 * edge;
	expect->drops = 0;
	*len = 2 * edge * WHOLE + expect->damaged;
	p = malloc(*len);
	if (!p)
		return NULL;
	for (size_t i = 0; i < edge; i++)
		at += put_record(p + at, &rng, false, false);
	for (size_t i = 0; i < units; i++) {
		switch (kind) {
		case PF_DAMAGE_GARBAGE:
			p[at++] = (uint8_t)pf_splitmix64_next(&rng);
			break;
		case PF_DAMAGE_ZEROS:
			p[at++] = 0;
			break;
		case PF_DAMAGE_BAD_CRC:
			at += put_record(p + at, &rng, true, false);
			expect->drops++;
			break;
		case PF_DAMAGE_SHIFTED:
			at += put_record(p + at, &rng, false, true);
			at += put_record(p + at, &rng, false, false);
			expect->drops++;
			expect->records++;
			break;
		default:
			at += put_record(p + at, &rng, false, false);
			expect->records++;
			break;
		}
	}
	if (kind == PF_DAMAGE_GARBAGE || kind == PF_DAMAGE_ZEROS)
		expect->drops = 1;
	for (size_t i = 0; i < edge; i++)
		at += put_record(p + at, &rng, false, false);
	return p;
}
