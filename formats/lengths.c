/* SPDX-License-Identifier: Apache-2.0 */
/* The records' lengths an indexed shard's index may carry (the
 * RecordLengths entries of pf_index.proto): each record's value count of
 * a feature whose count varies, so that packing plans its rows without
 * reading the records.  Counted as the schema is inferred (a column a
 * feature, kept only once its count varies), written by the shard
 * writer, checked entry by entry when the index is read.  Not here: the
 * rest of the index (shard_index.c, shard_writer.c). */
#include <errno.h>
#include <string.h>

#include "pb_internal.h"

/* ------------------------------------------------------------------ */
/* Counting (schema.c's columns)                                        */

static int put(pf_len_col *c, uint64_t v)
{
	if (c->len + 10 > c->cap && pf_grow(&c->buf, &c->cap, c->len + 10, 1) < 0)
		return -ENOMEM;
	c->len += pf_varint_put(c->buf + c->len, v);
	return 0;
}

/* The next record's count: nothing kept while every count so far is the
 * same (run records of value), then one varint a record. */
static int push_one(pf_len_col *c, uint32_t count)
{
	if (!c->varies) {
		if (!c->run || count == c->value) {
			c->value = count;
			c->run++;
			return 0;
		}
		for (uint64_t k = 0; k < c->run; k++)
			if (put(c, c->value) < 0)
				return -ENOMEM;
		c->varies = true;
	}
	return put(c, count);
}

/* The records from c->upto to record had none of the feature: 0. */
static int fill_to(pf_len_col *c, uint64_t record)
{
	while (c->upto < record) {
		if (push_one(c, 0) < 0)
			return -ENOMEM;
		c->upto++;
	}
	return 0;
}

int pf_len_col_push(pf_len_col *c, uint64_t record, uint32_t count)
{
	if (fill_to(c, record) < 0 || push_one(c, count) < 0)
		return -ENOMEM;
	c->upto = record + 1;
	return 0;
}

void pf_len_col_free(pf_len_col *c)
{
	pf_free(c->buf);
	memset(c, 0, sizeof(*c));
}

int pf_len_col_finish(const pf_len_col *c, uint64_t records, uint8_t **out, size_t *len)
{
	pf_len_col copy = *c;

	*out = NULL;
	*len = 0;
	copy.buf = NULL;
	copy.cap = copy.len = 0;
	if (c->varies) {
		copy.buf = pf_malloc(c->len + 10);
		if (!copy.buf)
			return -ENOMEM;
		memcpy(copy.buf, c->buf, c->len);
		copy.len = c->len;
		copy.cap = c->len + 10;
	}
	if (fill_to(&copy, records) < 0) {
		pf_free(copy.buf);
		return -ENOMEM;
	}
	if (!copy.varies) {
		pf_free(copy.buf);
		return 0;	/* one count for every record: nothing to plan from */
	}
	*out = copy.buf;
	*len = copy.len;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Reading                                                              */

/* Decode n counts from buf[0..len): exactly n varints of at most 32
 * bits, nothing after them.  out may be NULL (check only).  @return 0,
 * or the byte offset + 1 of the first fault with *what set. */
static size_t decode(const uint8_t *buf, size_t len, uint64_t n, uint32_t *out,
		     const char **what)
{
	size_t pos = 0;

	for (uint64_t r = 0; r < n; r++) {
		uint64_t v = 0;
		unsigned shift = 0;

		for (;;) {
			if (pos == len) {
				*what = "the counts end before the shard's last record";
				return pos + 1;
			}
			if (shift == 35) {
				*what = "a count longer than 5 bytes";
				return pos + 1;
			}
			v |= (uint64_t)(buf[pos] & 0x7f) << shift;
			shift += 7;
			if (!(buf[pos++] & 0x80))
				break;
		}
		if (v > UINT32_MAX) {
			*what = "a count over 2^32 - 1";
			return pos;
		}
		if (out)
			out[r] = (uint32_t)v;
	}
	if (pos != len) {
		*what = "bytes after the shard's last record's count";
		return pos + 1;
	}
	return 0;
}

int pf_lengths_from_pb(pf_shard_lengths **out, size_t *n, const Podfeed__ShardIndex *pb,
		       bool crc_checked, uint64_t at, pf_error *err)
{
	pf_shard_lengths *l;

	*out = NULL;
	*n = 0;
	if (!pb->n_record_lengths)
		return 0;
	if (!crc_checked)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, at,
				    "index: record lengths in a version-1 index, which has no "
				    "CRC32C to check them by");
	l = pf_calloc(pb->n_record_lengths, sizeof(*l));
	if (!l)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, at,
				    "no memory for the index's record lengths");
	*out = l;
	for (size_t i = 0; i < pb->n_record_lengths; i++) {
		const Podfeed__RecordLengths *e = pb->record_lengths[i];
		const char *name = e->name ? e->name : "";
		const char *what = NULL;
		size_t bad;

		if (e->version > PF_LENGTHS_VERSION)
			return pf_error_set(err, -EPROTONOSUPPORT, PF_OFFSET_FILE, at,
					    "index: record lengths %zu ('%s') are of version %u, "
					    "newer than %u", i, name, e->version,
					    PF_LENGTHS_VERSION);
		if (!e->version)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, at,
					    "index: record lengths %zu ('%s'): version missing (0)",
					    i, name);
		if (!name[0] || strlen(name) > PF_LENGTHS_MAX_NAME)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, at,
					    "index: record lengths %zu: a feature name of %zu bytes "
					    "(1..%u)", i, strlen(name), PF_LENGTHS_MAX_NAME);
		for (size_t k = 0; k < i; k++)
			if (!strcmp(l[k].name, name))
				return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, at,
						    "index: record lengths %zu and %zu are both "
						    "of '%s'", k, i, name);
		bad = decode(e->counts.data, e->counts.len, pb->records, NULL, &what);
		if (bad)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, at,
					    "index: record lengths of '%s': %s (byte %zu of %zu, "
					    "%llu records)", name, what, bad - 1, e->counts.len,
					    (unsigned long long)pb->records);
		l[i].name = pf_strdup(name);
		l[i].counts = pf_malloc(e->counts.len ? e->counts.len : 1);
		if (!l[i].name || !l[i].counts) {
			pf_free(l[i].name);
			pf_free(l[i].counts);
			l[i].name = NULL;
			l[i].counts = NULL;
			return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, at,
					    "no memory for the index's record lengths");
		}
		memcpy(l[i].counts, e->counts.data, e->counts.len);
		l[i].len = e->counts.len;
		*n = i + 1;
	}
	return 0;
}

void pf_lengths_free(pf_shard_lengths *l, size_t n)
{
	for (size_t i = 0; l && i < n; i++) {
		pf_free(l[i].name);
		pf_free(l[i].counts);
	}
	pf_free(l);
}

int pf_lengths_decode(const pf_shard_lengths *l, uint64_t records, uint32_t *out)
{
	const char *what;

	return decode(l->counts, l->len, records, out, &what) ? -EBADMSG : 0;
}
