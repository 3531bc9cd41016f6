/* SPDX-License-Identifier: Apache-2.0 */
/* tf.train.Example and SequenceExample: the fast decoder, wire format to
 * arena (the arena itself is arena.c, the reference decoder example_ref.c). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

/*
 * The reference is protobuf-c 1.4.1 (example_ref.c): this decoder accepts
 * exactly the records protobuf-c accepts and yields the same values.  What
 * protobuf-c does, and so what this file does (tests/fuzz/fuzz_example.c
 * checks it on every input it generates):
 *
 *  - A tag is a varint of at most 5 bytes; bits past 32 of (varint >> 3) are
 *    dropped.  A first tag byte of 0x00..0x07 (field number 0 in one byte)
 *    is an error, but a longer encoding of field 0 is an unknown field.
 *  - Wire types 0 (varint, at most 10 bytes), 1 (8 bytes), 2 (length of at
 *    most 5 bytes and at most INT_MAX) and 5 (4 bytes) are skipped when the
 *    field is unknown; 3, 4 (groups), 6 and 7 are errors anywhere.
 *  - A known field with a wire type its type does not take is an error;
 *    repeated float takes 2 (packed, length a multiple of 4) and 5,
 *    repeated int64 takes 2 (packed varints, each at most 10 bytes) and 0;
 *    varint values keep their low 64 bits.
 *  - The oneof in Feature: the last member on the wire wins, whole; a
 *    repeated member is NOT merged (float_list twice keeps the second).
 *  - A map entry's key: the last one wins; no UTF-8 check; protobuf-c makes
 *    it a C string, so a key is cut at its first NUL byte.  No key: "".
 *  - A map entry's value given twice is merged (merge_messages()): for a
 *    Feature the later value wins when it has a kind, else the earlier one
 *    stays; two values both without a kind cannot be merged and the record
 *    is refused.  For a FeatureList the steps are concatenated.  No value:
 *    a Feature of kind NONE, a FeatureList of no steps.
 *  - Example.features, SequenceExample.context and .feature_lists given
 *    twice are merged: their map entries are concatenated in wire order.
 *
 * Maps come out deduplicated: one entry per name (after the NUL cut), at
 * the position of the name's first appearance, holding the value of its
 * last appearance.  example_ref.c applies the same rule to protobuf-c's
 * list of entries, so both paths fill identical arrays.
 *
 * Memory: everything goes into the caller's arena, nothing is malloc'd.
 * PF_ARENA_BYTES_FOR(len) = 16 * len + 256 always suffices; each allocation
 * is charged to wire bytes that no other allocation is charged to:
 *
 *  - int64 values: 8 * (bytes of the Int64List content), the upper bound
 *    allocated before decoding (every value takes at least one byte), cut
 *    back to the real count after.  Charge: 8 per byte of that content.
 *  - float values: 4 * count, rounded up to 8; every value takes 4 (packed)
 *    or 5 (unpacked) content bytes and the FloatList has a 2-byte tag and
 *    length in its Feature: (4c + 4) <= 16 * (4c + 2).
 *  - bytes values: a 16-byte pf_bytes per value, each value at least 2
 *    content bytes (tag, length): 8 per byte.  Counted as content / 2.
 *  - FeatureList steps: a 32-byte pf_feature per step, each step at least
 *    2 bytes (tag, length) of the FeatureList content: 16 per byte.  This
 *    is the worst case, and why the factor is 16.
 *  - the features table: one 32-byte pf_feature per map entry whose
 *    content is 3 bytes or more, plus one shared by all shorter entries
 *    (which all have the empty name, see count_entries()), plus a hash of
 *    at most 4 four-byte slots per table entry once there are more than
 *    PF_LINEAR_MAX entries.  A counted entry has at least 4 bytes charged
 *    to nothing else: its own tag and length, and the tag and the next
 *    byte of its first field (a key's or value's length, or an unknown
 *    field).  48 / 4 = 12 per byte.  The lists table: 24 + 16 bytes per
 *    counted entry, 10 per byte.
 *  - constant: the two shared slots with their hash share (48 + 40), the
 *    alignment of the arena's starting point and of the tables (< 40).
 *
 * Everything else (the wrappers' tags and lengths, unknown fields, keys) is
 * charged nothing, so the total is at most 16 * len + 128.
 */

#define PF_LINEAR_MAX 16u	/* map entries searched linearly, no hash */

const char *pf_kind_name(pf_kind k)
{
	switch (k) {
	case PF_KIND_NONE: return "none";
	case PF_KIND_BYTES: return "bytes";
	case PF_KIND_FLOAT: return "float";
	case PF_KIND_INT64: return "int64";
	}
	return "unknown";
}

/* ------------------------------------------------------------------ */
/* Wire format                                                          */
/* ------------------------------------------------------------------ */

struct dec {
	const uint8_t *rec;	/* the record: error offsets count from here */
	pf_arena *arena;
	pf_error *err;
};

/* One field of a message as protobuf-c's scan sees it. */
struct field {
	uint32_t num;		/* field number (low 32 bits) */
	unsigned wt;		/* wire type */
	const uint8_t *at;	/* its tag, for errors */
	const uint8_t *data;	/* varint/fixed bytes, or content after a length */
	size_t len;
};

__attribute__((cold, format(printf, 3, 4)))
static int bad(struct dec *d, const uint8_t *at, const char *fmt, ...)
{
	char what[160];
	va_list ap;
	size_t off = (size_t)(at - d->rec);

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	/* The kind stays NONE: the caller knows where the record starts and
	 * turns err->offset into a stream offset. */
	return pf_error_set(d->err, -EBADMSG, PF_OFFSET_NONE, off,
			    "bad tf.train.Example at byte %zu of the record: %s",
			    off, what);
}

__attribute__((cold))
static int nobufs(struct dec *d, size_t size)
{
	return pf_error_set(d->err, -ENOBUFS, PF_OFFSET_NONE, 0,
			    "example arena too small: %zu of %zu bytes used, %zu more wanted",
			    d->arena->used, d->arena->cap, size);
}

/*
 * Scan the field at p (p < end) into *f.  @return the byte after it, or
 * NULL with the error set.  The checks are protobuf-c's scan phase.
 */
static const uint8_t *next_field(struct dec *d, const uint8_t *p,
				 const uint8_t *end, struct field *f)
{
	size_t rem, max, i;
	uint64_t val;
	unsigned b = p[0];

	f->at = p;
	f->wt = b & 7u;
	if (b < 0x80) {
		if (b < 8) {
			bad(d, p, "field number 0");
			return NULL;
		}
		f->num = b >> 3;
		p++;
	} else {
		uint32_t num = (b & 0x7fu) >> 3;
		unsigned shift = 4;

		max = (size_t)(end - p) < 5 ? (size_t)(end - p) : 5;
		for (i = 1; i < max; i++) {
			num |= (uint32_t)(p[i] & 0x7fu) << shift;
			shift += 7;
			if (!(p[i] & 0x80))
				break;
		}
		if (i >= max) {
			bad(d, p, "tag not terminated within %zu bytes", max);
			return NULL;
		}
		f->num = num;
		p += i + 1;
	}
	rem = (size_t)(end - p);
	switch (f->wt) {
	case 0:
		max = rem < 10 ? rem : 10;
		for (i = 0; i < max; i++)
			if (!(p[i] & 0x80))
				break;
		if (i == max) {
			bad(d, p, "varint not terminated within %zu bytes", max);
			return NULL;
		}
		f->data = p;
		f->len = i + 1;
		return p + i + 1;
	case 1:
	case 5:
		f->len = f->wt == 1 ? 8 : 4;
		if (rem < f->len) {
			bad(d, f->at, "%zu-byte value cut off by the end of its message",
			    f->len);
			return NULL;
		}
		f->data = p;
		return p + f->len;
	case 2:
		max = rem < 5 ? rem : 5;
		val = 0;
		for (i = 0; i < max; i++) {
			val |= (uint64_t)(p[i] & 0x7fu) << (7 * i);
			if (!(p[i] & 0x80))
				break;
		}
		if (i == max) {
			bad(d, p, "length not terminated within %zu bytes", max);
			return NULL;
		}
		i++;
		if (val > INT_MAX) {
			bad(d, p, "length %llu over 2 GiB", (unsigned long long)val);
			return NULL;
		}
		if (val > rem - i) {
			bad(d, f->at, "field %u of %llu bytes runs %llu bytes past the end of its message",
			    f->num, (unsigned long long)val,
			    (unsigned long long)(val - (rem - i)));
			return NULL;
		}
		f->data = p + i;
		f->len = (size_t)val;
		return p + i + val;
	default:
		bad(d, f->at, "wire type %u (field %u) is not supported",
		    f->wt, f->num);
		return NULL;
	}
}

/* Low 64 bits of a scanned varint of n (1..10) bytes. */
static inline uint64_t varint_value(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)(p[i] & 0x7fu) << (7 * i);
	return v;
}

/* Low 64 bits of the varint whose bytes, up to and including the first
 * without a continuation bit, are x (the rest zeroed): the 7-bit groups
 * squeezed together. */
static inline uint64_t varint_squeeze(uint64_t x)
{
	return (x & 0x7full) | ((x >> 1) & (0x7full << 7)) |
	       ((x >> 2) & (0x7full << 14)) | ((x >> 3) & (0x7full << 21)) |
	       ((x >> 4) & (0x7full << 28)) | ((x >> 5) & (0x7full << 35)) |
	       ((x >> 6) & (0x7full << 42)) | ((x >> 7) & (0x7full << 49));
}

/*
 * Packed int64 varints in [p, end) to out.  @return the number decoded, or
 * -1 with *stop at the varint that is not terminated (within 10 bytes or
 * before end).  The caller sized out for one value per byte.
 *
 * Token ids mix 1-, 2- and 3-byte varints at random, so a branch on the
 * length mispredicts about every other value.  With 8 bytes readable, the
 * varints ending in the next 8 bytes are found at once (the bytes without
 * a continuation bit) and each value comes from a fixed sequence of masks
 * and shifts, without a branch on its length, and without the chain
 * load -> length -> next load per value (which ran at ~12 cycles a value).  Eight 1-byte values in a row (labels, small ids) are taken
 * at once.  Varints of 9 or 10 bytes (negative numbers) and the last bytes
 * of the chunk take the byte loop.
 */
static ptrdiff_t unpack_varints(const uint8_t *p, const uint8_t *end,
				int64_t *out, const uint8_t **stop)
{
	int64_t *o = out;

	while (end - p >= 8) {
		uint64_t w = pf_load_le64(p);
		uint64_t term = ~w & 0x8080808080808080ull;

		if (term == 0x8080808080808080ull) {
			for (int k = 0; k < 8; k++)
				o[k] = (int64_t)((w >> (8 * k)) & 0xff);
			o += 8;
			p += 8;
			continue;
		}
		if (!term)
			goto slow;	/* more than 8 bytes */
		/* Every varint that ends in this word, from this word: the
		 * only chain from one to the next is clearing a bit. */
		p += (64 - __builtin_clzll(term)) >> 3;
		for (unsigned shift = 0; term; term &= term - 1) {
			uint64_t upto = term ^ (term - 1);	/* bits to its end */

			*o++ = (int64_t)varint_squeeze((w & upto) >> shift);
			shift = (unsigned)__builtin_ctzll(term) + 1;
		}
		continue;
slow:
		{
			size_t i, max = (size_t)(end - p) < 10 ? (size_t)(end - p) : 10;

			for (i = 8; i < max; i++)
				if (!(p[i] & 0x80))
					break;
			if (i == max) {
				*stop = p;
				return -1;
			}
			*o++ = (int64_t)varint_value(p, i + 1);
			p += i + 1;
		}
	}
	while (p < end) {
		size_t i, max = (size_t)(end - p);

		for (i = 0; i < max; i++)
			if (!(p[i] & 0x80))
				break;
		if (i == max) {
			*stop = p;
			return -1;
		}
		*o++ = (int64_t)varint_value(p, i + 1);
		p += i + 1;
	}
	return o - out;
}

/* ------------------------------------------------------------------ */
/* Value lists                                                          */
/* ------------------------------------------------------------------ */

static int parse_int64_list(struct dec *d, const uint8_t *p, size_t len,
			    pf_feature *ft)
{
	const uint8_t *end = p + len, *next;
	size_t mark = d->arena->used;
	int64_t *vals = NULL;
	size_t n = 0;
	struct field f;

	/* Upper bound: every value takes at least one byte. */
	if (len && !(vals = pf_arena_alloc(d->arena, len * sizeof(*vals))))
		return nobufs(d, len * sizeof(*vals));
	for (; p < end; p = next) {
		if (!(next = next_field(d, p, end, &f)))
			return -EBADMSG;
		if (f.num != 1)
			continue;
		if (f.wt == 2) {
			const uint8_t *stop = f.data;
			ptrdiff_t k = unpack_varints(f.data, f.data + f.len,
						     vals + n, &stop);

			if (k < 0)
				return bad(d, stop, "packed int64 varint not terminated");
			n += (size_t)k;
		} else if (f.wt == 0) {
			vals[n++] = (int64_t)varint_value(f.data, f.len);
		} else {
			return bad(d, f.at, "int64_list value with wire type %u",
				   f.wt);
		}
	}
	/* Give back what the upper bound did not need (the last allocation). */
	d->arena->used = n ? (size_t)((uint8_t *)(vals + n) - d->arena->base) : mark;
	ft->kind = PF_KIND_INT64;
	ft->count = (uint32_t)n;
	ft->v.int64s = n ? vals : NULL;
	return 0;
}

static int parse_float_list(struct dec *d, const uint8_t *p, size_t len,
			    pf_feature *ft)
{
	const uint8_t *start = p, *end = p + len, *next;
	float *vals = NULL;
	size_t n = 0;
	struct field f;

	/* Count first (protobuf-c's scan), then copy: one memcpy per chunk. */
	for (; p < end; p = next) {
		if (!(next = next_field(d, p, end, &f)))
			return -EBADMSG;
		if (f.num != 1)
			continue;
		if (f.wt == 2) {
			if (f.len % 4)
				return bad(d, f.at, "packed float_list of %zu bytes, not a multiple of 4",
					   f.len);
			n += f.len / 4;
		} else if (f.wt == 5) {
			n++;
		} else {
			return bad(d, f.at, "float_list value with wire type %u",
				   f.wt);
		}
	}
	if (n) {
		size_t i = 0;

		if (!(vals = pf_arena_alloc(d->arena, n * sizeof(*vals))))
			return nobufs(d, n * sizeof(*vals));
		for (p = start; p < end; p = next) {
			next = next_field(d, p, end, &f);
			if (f.num != 1)
				continue;
			memcpy(vals + i, f.data, f.len);
			i += f.len / 4;
		}
	}
	ft->kind = PF_KIND_FLOAT;
	ft->count = (uint32_t)n;
	ft->v.floats = vals;
	return 0;
}

static int parse_bytes_list(struct dec *d, const uint8_t *p, size_t len,
			    pf_feature *ft)
{
	const uint8_t *end = p + len, *next;
	size_t mark = d->arena->used;
	size_t cap = len / 2, n = 0;
	pf_bytes *vals = NULL;
	struct field f;

	/* Upper bound: every value takes a tag and a length byte. */
	if (cap && !(vals = pf_arena_alloc(d->arena, cap * sizeof(*vals))))
		return nobufs(d, cap * sizeof(*vals));
	for (; p < end; p = next) {
		if (!(next = next_field(d, p, end, &f)))
			return -EBADMSG;
		if (f.num != 1)
			continue;
		if (f.wt != 2)
			return bad(d, f.at, "bytes_list value with wire type %u",
				   f.wt);
		vals[n].data = f.data;
		vals[n].len = (uint32_t)f.len;
		n++;
	}
	d->arena->used = n ? (size_t)((uint8_t *)(vals + n) - d->arena->base) : mark;
	ft->kind = PF_KIND_BYTES;
	ft->count = (uint32_t)n;
	ft->v.bytes = n ? vals : NULL;
	return 0;
}

/* A Feature: kind NONE when no list is set; the last list set wins. */
static int parse_feature(struct dec *d, const uint8_t *p, size_t len,
			 pf_feature *ft)
{
	const uint8_t *end = p + len, *next;
	struct field f;
	int ret;

	ft->kind = PF_KIND_NONE;
	ft->count = 0;
	ft->v.bytes = NULL;
	for (; p < end; p = next) {
		if (!(next = next_field(d, p, end, &f)))
			return -EBADMSG;
		if (f.num < 1 || f.num > 3)
			continue;
		if (f.wt != 2)
			return bad(d, f.at, "Feature list (field %u) with wire type %u",
				   f.num, f.wt);
		if (f.num == 1)
			ret = parse_bytes_list(d, f.data, f.len, ft);
		else if (f.num == 2)
			ret = parse_float_list(d, f.data, f.len, ft);
		else
			ret = parse_int64_list(d, f.data, f.len, ft);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Maps                                                                 */
/* ------------------------------------------------------------------ */

/* A map's entries, deduplicated by name as they come. */
struct table {
	pf_feature *features;	/* one of these two */
	pf_feature_list *lists;
	uint32_t n, cap;
	uint32_t *slots;	/* hash: entry index + 1, 0 free; NULL: linear */
	uint32_t mask;
};

static inline const char *entry_name(const struct table *t, uint32_t i,
				     uint32_t *len)
{
	if (t->features) {
		*len = t->features[i].name_len;
		return t->features[i].name;
	}
	*len = t->lists[i].name_len;
	return t->lists[i].name;
}

/*
 * The index of name in t, adding a fresh entry (name set, rest zero) when
 * it is new.  @return the index, or -1 when the table is full (cannot
 * happen: count_entries() counted every entry).
 */
static int64_t table_slot(struct table *t, const char *name, uint32_t len)
{
	uint32_t i, l, h = 0;
	const char *s;

	if (!t->slots) {
		for (i = 0; i < t->n; i++) {
			s = entry_name(t, i, &l);
			if (l == len && !memcmp(s, name, len))
				return i;
		}
	} else {
		h = pf_fnv1a32(name, len) & t->mask;
		for (; t->slots[h]; h = (h + 1) & t->mask) {
			i = t->slots[h] - 1;
			s = entry_name(t, i, &l);
			if (l == len && !memcmp(s, name, len))
				return i;
		}
	}
	if (t->n == t->cap)
		return -1;
	i = t->n++;
	if (t->slots)
		t->slots[h] = i + 1;
	if (t->features) {
		memset(&t->features[i], 0, sizeof(t->features[i]));
		t->features[i].name = name;
		t->features[i].name_len = len;
	} else {
		memset(&t->lists[i], 0, sizeof(t->lists[i]));
		t->lists[i].name = name;
		t->lists[i].name_len = len;
	}
	return i;
}

static int table_init(struct dec *d, struct table *t, uint32_t cap, bool lists)
{
	size_t size = cap * (lists ? sizeof(pf_feature_list) : sizeof(pf_feature));
	void *items = pf_arena_alloc(d->arena, size);

	memset(t, 0, sizeof(*t));
	if (!items)
		return nobufs(d, size);
	if (lists)
		t->lists = items;
	else
		t->features = items;
	t->cap = cap;
	if (cap > PF_LINEAR_MAX) {
		uint32_t slots = 32;

		while (slots < 2 * cap)
			slots *= 2;
		if (!(t->slots = pf_arena_alloc(d->arena, slots * sizeof(uint32_t))))
			return nobufs(d, slots * sizeof(uint32_t));
		memset(t->slots, 0, slots * sizeof(uint32_t));
		t->mask = slots - 1;
	}
	return 0;
}

/* protobuf-c turns the key into a C string: it ends at the first NUL. */
static inline uint32_t key_len(const uint8_t *key, size_t len)
{
	const uint8_t *nul = memchr(key, 0, len);

	return (uint32_t)(nul ? (size_t)(nul - key) : len);
}

/* One Features map entry {string key = 1; Feature value = 2}. */
static int parse_feature_entry(struct dec *d, const uint8_t *p, size_t len,
			       struct table *t)
{
	const uint8_t *end = p + len, *next;
	const char *name = "";
	uint32_t name_len = 0;
	pf_feature value = { .kind = PF_KIND_NONE };
	bool have_value = false;
	struct field f;
	int64_t i;
	int ret;

	for (; p < end; p = next) {
		if (!(next = next_field(d, p, end, &f)))
			return -EBADMSG;
		if (f.num == 1) {
			if (f.wt != 2)
				return bad(d, f.at, "map key with wire type %u", f.wt);
			name = (const char *)f.data;
			name_len = key_len(f.data, f.len);
		} else if (f.num == 2) {
			pf_feature v;

			if (f.wt != 2)
				return bad(d, f.at, "map value with wire type %u", f.wt);
			if ((ret = parse_feature(d, f.data, f.len, &v)) < 0)
				return ret;
			/* protobuf-c merges a repeated value: merge_messages()
			 * keeps the earlier oneof member only when the later
			 * message has none, and fails when neither has one. */
			if (!have_value || v.kind != PF_KIND_NONE)
				value = v;
			else if (value.kind == PF_KIND_NONE)
				return bad(d, f.at, "map entry with two values, neither with a kind (protobuf-c cannot merge them)");
			have_value = true;
		}
	}
	if ((i = table_slot(t, name, name_len)) < 0)
		return bad(d, end, "more map entries than counted");
	t->features[i].kind = value.kind;
	t->features[i].count = value.count;
	t->features[i].v = value.v;
	return 0;
}

/* Features {map<string, Feature> feature = 1}, into t. */
static int parse_features(struct dec *d, const uint8_t *p, size_t len,
			  struct table *t)
{
	const uint8_t *end = p + len, *next;
	struct field f;
	int ret;

	for (; p < end; p = next) {
		if (!(next = next_field(d, p, end, &f)))
			return -EBADMSG;
		if (f.num != 1)
			continue;
		if (f.wt != 2)
			return bad(d, f.at, "map entry with wire type %u", f.wt);
		if ((ret = parse_feature_entry(d, f.data, f.len, t)) < 0)
			return ret;
	}
	return 0;
}

/*
 * Steps in the FeatureList values of one FeatureLists entry, so that their
 * concatenation gets one array.  Counts fields numbered 1 of any wire type
 * (a wrong one fails later, in the parse).
 */
static int count_steps(struct dec *d, const uint8_t *p, size_t len,
		       size_t *steps)
{
	const uint8_t *end = p + len, *next, *q, *qend;
	struct field f, g;

	*steps = 0;
	for (; p < end; p = next) {
		if (!(next = next_field(d, p, end, &f)))
			return -EBADMSG;
		if (f.num != 2 || f.wt != 2)
			continue;
		for (q = f.data, qend = f.data + f.len; q < qend; q = next) {
			if (!(next = next_field(d, q, qend, &g)))
				return -EBADMSG;
			*steps += g.num == 1;
		}
		next = f.data + f.len;
	}
	return 0;
}

/* One FeatureLists map entry {string key = 1; FeatureList value = 2}. */
static int parse_list_entry(struct dec *d, const uint8_t *p, size_t len,
			    struct table *t)
{
	const uint8_t *end = p + len, *next, *q, *qend;
	const char *name = "";
	uint32_t name_len = 0;
	pf_feature *steps = NULL;
	size_t n_steps, n = 0;
	struct field f, g;
	int64_t i;
	int ret;

	if ((ret = count_steps(d, p, len, &n_steps)) < 0)
		return ret;
	if (n_steps && !(steps = pf_arena_alloc(d->arena, n_steps * sizeof(*steps))))
		return nobufs(d, n_steps * sizeof(*steps));
	for (; p < end; p = next) {
		if (!(next = next_field(d, p, end, &f)))
			return -EBADMSG;
		if (f.num == 1) {
			if (f.wt != 2)
				return bad(d, f.at, "map key with wire type %u", f.wt);
			name = (const char *)f.data;
			name_len = key_len(f.data, f.len);
			continue;
		}
		if (f.num != 2)
			continue;
		if (f.wt != 2)
			return bad(d, f.at, "map value with wire type %u", f.wt);
		/* A FeatureList {repeated Feature feature = 1}; a repeated
		 * value merges, i.e. its steps follow the earlier ones. */
		for (q = f.data, qend = f.data + f.len; q < qend; q = next) {
			if (!(next = next_field(d, q, qend, &g)))
				return -EBADMSG;
			if (g.num != 1)
				continue;
			if (g.wt != 2)
				return bad(d, g.at, "FeatureList step with wire type %u",
					   g.wt);
			steps[n].name = "";
			steps[n].name_len = 0;
			if ((ret = parse_feature(d, g.data, g.len, &steps[n])) < 0)
				return ret;
			n++;
		}
		next = f.data + f.len;
	}
	if ((i = table_slot(t, name, name_len)) < 0)
		return bad(d, end, "more map entries than counted");
	t->lists[i].steps = (uint32_t)n;
	t->lists[i].step = steps;
	return 0;
}

/* FeatureLists {map<string, FeatureList> feature_list = 1}, into t. */
static int parse_feature_lists(struct dec *d, const uint8_t *p, size_t len,
			       struct table *t)
{
	const uint8_t *end = p + len, *next;
	struct field f;
	int ret;

	for (; p < end; p = next) {
		if (!(next = next_field(d, p, end, &f)))
			return -EBADMSG;
		if (f.num != 1)
			continue;
		if (f.wt != 2)
			return bad(d, f.at, "map entry with wire type %u", f.wt);
		if ((ret = parse_list_entry(d, f.data, f.len, t)) < 0)
			return ret;
	}
	return 0;
}

/*
 * Entries of the map messages in field `field` of the top-level message,
 * over all its occurrences: the table size.  An entry whose content is
 * under 3 bytes has no room for a non-empty key (a key takes a tag, a
 * length and a byte), so all such entries share one slot, the empty name.
 */
static int count_entries(struct dec *d, const uint8_t *p, size_t len,
			 uint32_t field, uint32_t *count)
{
	const uint8_t *end = p + len, *next, *q, *qend;
	struct field f, g;
	size_t n = 1;

	for (; p < end; p = next) {
		if (!(next = next_field(d, p, end, &f)))
			return -EBADMSG;
		if (f.num != field || f.wt != 2)
			continue;
		for (q = f.data, qend = f.data + f.len; q < qend; q = next) {
			if (!(next = next_field(d, q, qend, &g)))
				return -EBADMSG;
			n += g.num == 1 && g.wt == 2 && g.len >= 3;
		}
		next = f.data + f.len;
	}
	*count = (uint32_t)n;	/* n <= len / 5 + 1: fits */
	return 0;
}

static int decode(const void *rec, size_t len, pf_arena *arena,
		  pf_example *out, pf_error *err, bool sequence)
{
	struct dec d = { .rec = rec, .arena = arena, .err = err };
	const uint8_t *p = rec, *end = p + len, *next;
	size_t mark = arena->used;
	struct table features, lists = { 0 };
	uint32_t n_features, n_lists = 0;
	struct field f;
	int ret;

	memset(out, 0, sizeof(*out));
	if (len > INT_MAX)
		return pf_error_set(err, -EFBIG, PF_OFFSET_NONE, 0,
				    "example of %zu bytes over 2 GiB", len);
	if ((ret = count_entries(&d, p, len, 1, &n_features)) < 0)
		goto out;
	if (sequence && (ret = count_entries(&d, p, len, 2, &n_lists)) < 0)
		goto out;
	if ((ret = table_init(&d, &features, n_features, false)) < 0)
		goto out;
	if (sequence && (ret = table_init(&d, &lists, n_lists, true)) < 0)
		goto out;
	for (; p < end; p = next) {
		if (!(next = next_field(&d, p, end, &f))) {
			ret = -EBADMSG;
			goto out;
		}
		if (f.num == 1 || (sequence && f.num == 2)) {
			if (f.wt != 2) {
				ret = bad(&d, f.at, "field %u with wire type %u",
					  f.num, f.wt);
				goto out;
			}
			if (f.num == 1)
				ret = parse_features(&d, f.data, f.len, &features);
			else
				ret = parse_feature_lists(&d, f.data, f.len, &lists);
			if (ret < 0)
				goto out;
		}
	}
	out->features = features.features;
	out->n_features = features.n;
	if (sequence) {
		out->lists = lists.lists;
		out->n_lists = lists.n;
	}
	return 0;
out:
	/* Nothing half-built stays in the arena. */
	arena->used = mark;
	memset(out, 0, sizeof(*out));
	return ret;
}

int pf_example_decode(const void *rec, size_t len, pf_arena *arena,
		      pf_example *out, pf_error *err)
{
	pf_error_clear(err);
	return decode(rec, len, arena, out, err, false);
}

int pf_sequence_example_decode(const void *rec, size_t len, pf_arena *arena,
			       pf_example *out, pf_error *err)
{
	pf_error_clear(err);
	return decode(rec, len, arena, out, err, true);
}

const pf_feature *pf_example_find(const pf_example *ex, const char *name)
{
	size_t len = strlen(name);

	for (uint32_t i = 0; i < ex->n_features; i++)
		if (ex->features[i].name_len == len &&
		    !memcmp(ex->features[i].name, name, len))
			return &ex->features[i];
	return NULL;
}

const pf_feature_list *pf_example_find_list(const pf_example *ex,
					    const char *name)
{
	size_t len = strlen(name);

	for (uint32_t i = 0; i < ex->n_lists; i++)
		if (ex->lists[i].name_len == len &&
		    !memcmp(ex->lists[i].name, name, len))
			return &ex->lists[i];
	return NULL;
}
