/* SPDX-License-Identifier: Apache-2.0 */
/* Writing tf.train.Example (for synth datasets and tests), and sniffing
 * which message a record holds. */
#include <errno.h>
#include <string.h>

#include "formats_internal.h"

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	return p + pf_varint_put(p, v);
}

/* Size of the list message inside a Feature (BytesList etc.). */
static size_t list_size(const pf_feature *f)
{
	size_t n = 0;

	switch (f->kind) {
	case PF_KIND_BYTES:
		for (uint32_t i = 0; i < f->count; i++)
			n += 1 + pf_varint_size(f->v.bytes[i].len) + f->v.bytes[i].len;
		return n;
	case PF_KIND_FLOAT:
		n = 4ull * f->count;
		return f->count ? 1 + pf_varint_size(n) + n : 0;
	case PF_KIND_INT64:
		for (uint32_t i = 0; i < f->count; i++)
			n += pf_varint_size((uint64_t)f->v.int64s[i]);
		return f->count ? 1 + pf_varint_size(n) + n : 0;
	case PF_KIND_NONE:
		break;
	}
	return 0;
}

/* Size of the Feature message. */
static size_t feature_size(const pf_feature *f)
{
	size_t l = list_size(f);

	return f->kind == PF_KIND_NONE ? 0 : 1 + pf_varint_size(l) + l;
}

/* Size of one map entry message {key=1, value=2}. */
static size_t entry_size(const pf_feature *f)
{
	size_t fs = feature_size(f);

	return 1 + pf_varint_size(f->name_len) + f->name_len + 1 + pf_varint_size(fs) + fs;
}

int64_t pf_example_encode(const pf_feature *features, uint32_t n, void *dst,
			  size_t cap)
{
	size_t feats = 0, total;
	uint8_t *p = dst;

	for (uint32_t i = 0; i < n; i++) {
		size_t e = entry_size(&features[i]);
		feats += 1 + pf_varint_size(e) + e;
	}
	total = 1 + pf_varint_size(feats) + feats;
	if (total > cap)
		return -ENOBUFS;

	p = put_varint(p, 1 << 3 | 2);			/* Example.features */
	p = put_varint(p, feats);
	for (uint32_t i = 0; i < n; i++) {
		const pf_feature *f = &features[i];
		size_t fs = feature_size(f), ls = list_size(f);

		p = put_varint(p, 1 << 3 | 2);		/* Features.feature entry */
		p = put_varint(p, entry_size(f));
		p = put_varint(p, 1 << 3 | 2);		/* key */
		p = put_varint(p, f->name_len);
		memcpy(p, f->name, f->name_len);
		p += f->name_len;
		p = put_varint(p, 2 << 3 | 2);		/* value: Feature */
		p = put_varint(p, fs);
		if (f->kind == PF_KIND_NONE)
			continue;
		p = put_varint(p, (uint64_t)f->kind << 3 | 2); /* oneof member */
		p = put_varint(p, ls);
		switch (f->kind) {
		case PF_KIND_BYTES:
			for (uint32_t k = 0; k < f->count; k++) {
				p = put_varint(p, 1 << 3 | 2);
				p = put_varint(p, f->v.bytes[k].len);
				memcpy(p, f->v.bytes[k].data, f->v.bytes[k].len);
				p += f->v.bytes[k].len;
			}
			break;
		case PF_KIND_FLOAT:
			if (!f->count)
				break;
			p = put_varint(p, 1 << 3 | 2);
			p = put_varint(p, 4ull * f->count);
			memcpy(p, f->v.floats, 4ull * f->count);
			p += 4ull * f->count;
			break;
		case PF_KIND_INT64: {
			size_t payload = 0;

			if (!f->count)
				break;
			for (uint32_t k = 0; k < f->count; k++)
				payload += pf_varint_size((uint64_t)f->v.int64s[k]);
			p = put_varint(p, 1 << 3 | 2);
			p = put_varint(p, payload);
			for (uint32_t k = 0; k < f->count; k++)
				p = put_varint(p, (uint64_t)f->v.int64s[k]);
			break;
		}
			p = put_varint(p, 1 << 3 | 2);
			p = put_varint(p, ls - 1 - pf_varint_size(ls - 1 -
				pf_varint_size(ls) + 0) * 0 - 1 - 0 + 1 - 1);
			break;
		case PF_KIND_NONE:
			break;
		}
	}
	return (int64_t)(p - (uint8_t *)dst);
}

/* Walk the top-level fields; @return a bitmask of the field numbers 1..31
 * seen, or 0 when the bytes are not a well-formed protobuf message. */
static uint32_t top_fields(const uint8_t *p, const uint8_t *end)
{
	uint32_t seen = 0;

	while (p < end) {
		uint64_t tag = 0, v = 0;
		int shift = 0;

		do {
			if (p >= end || shift > 63)
				return 0;
			tag |= (uint64_t)(*p & 0x7f) << shift;
			shift += 7;
		} while (*p++ & 0x80);
		if ((tag >> 3) == 0 || (tag >> 3) > 31)
			return 0;
		switch (tag & 7) {
		case 0:
			do {
				if (p >= end)
					return 0;
			} while (*p++ & 0x80);
			break;
		case 1:
			if (end - p < 8)
				return 0;
			p += 8;
			break;
		case 5:
			if (end - p < 4)
				return 0;
			p += 4;
			break;
		case 2:
			shift = 0;
			do {
				if (p >= end || shift > 63)
					return 0;
				v |= (uint64_t)(*p & 0x7f) << shift;
				shift += 7;
			} while (*p++ & 0x80);
			if (v > (uint64_t)(end - p))
				return 0;
			p += v;
			break;
		default:
			return 0;
		}
		seen |= 1u << (tag >> 3);
	}
	return seen;
}

pf_message_kind pf_message_sniff(const void *rec, size_t len)
{
	const uint8_t *p = rec;
	uint32_t seen = top_fields(p, p + len);

	if (seen == (1u << 1))
		return PF_MSG_EXAMPLE;
	if (seen == (1u << 2) || seen == ((1u << 1) | (1u << 2)))
		return PF_MSG_SEQUENCE_EXAMPLE;
	/* An empty record is an Example with no features. */
	if (len == 0)
		return PF_MSG_EXAMPLE;
	return PF_MSG_RAW;
}
