/* SPDX-License-Identifier: Apache-2.0 */
/* tf.train.Example and SequenceExample through protobuf-c: the reference decoder. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "example.pb-c.h"
#include "formats_internal.h"

/*
 * Not the hot path: protobuf-c unpacks into malloc'd memory, the result is
 * copied into the arena (names and byte values too, so it stands alone,
 * unlike the fast path's views into the record), and the message is freed.
 * Maps are deduplicated by a plain linear search, on purpose a different
 * algorithm from example.c's, with the same rule: one entry per name, at
 * the name's first appearance, holding its last value.
 */

/* pf_malloc that remembers a failure: a NULL from unpack is then -ENOMEM,
 * not corrupt input. */
struct ref_alloc {
	ProtobufCAllocator pc;
	bool failed;
};

static void ref_alloc_init(struct ref_alloc *ra)
{
	ra->pc.alloc = pf_alloc_cb_flag;
	ra->pc.free = pf_free_cb;
	ra->pc.allocator_data = &ra->failed;
	ra->failed = false;
}

static int unpack_failed(const struct ref_alloc *ra, pf_error *err)
{
	if (ra->failed)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "protobuf-c ran out of memory");
	return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
			    "bad tf.train.Example: protobuf-c refused the record");
}

#define REF_NOBUFS 1	/* internal: the arena is full */

static void *ref_copy(pf_arena *a, const void *src, size_t len)
{
	void *dst;

	if (!len)
		return NULL;
	if ((dst = pf_arena_alloc(a, len)))
		memcpy(dst, src, len);
	return dst;
}

static int copy_feature(pf_arena *a, const Tensorflow__Feature *src,
			pf_feature *dst)
{
	size_t i, n;

	dst->kind = PF_KIND_NONE;
	dst->count = 0;
	dst->v.bytes = NULL;
	if (!src)
		return 0;
	switch (src->kind_case) {
	case TENSORFLOW__FEATURE__KIND_BYTES_LIST: {
		pf_bytes *vals = NULL;

		n = src->bytes_list->n_value;
		if (n && !(vals = pf_arena_alloc(a, n * sizeof(*vals))))
			return REF_NOBUFS;
		for (i = 0; i < n; i++) {
			const ProtobufCBinaryData *bd = &src->bytes_list->value[i];

			vals[i].len = (uint32_t)bd->len;
			vals[i].data = ref_copy(a, bd->data, bd->len);
			if (bd->len && !vals[i].data)
				return REF_NOBUFS;
		}
		dst->kind = PF_KIND_BYTES;
		dst->v.bytes = vals;
		break;
	}
	case TENSORFLOW__FEATURE__KIND_FLOAT_LIST:
		n = src->float_list->n_value;
		dst->kind = PF_KIND_FLOAT;
		dst->v.floats = ref_copy(a, src->float_list->value, n * sizeof(float));
		if (n && !dst->v.floats)
			return REF_NOBUFS;
		break;
	case TENSORFLOW__FEATURE__KIND_INT64_LIST:
		n = src->int64_list->n_value;
		dst->kind = PF_KIND_INT64;
		dst->v.int64s = ref_copy(a, src->int64_list->value, n * sizeof(int64_t));
		if (n && !dst->v.int64s)
			return REF_NOBUFS;
		break;
	default:
		n = 0;
		break;
	}
	dst->count = (uint32_t)n;
	return 0;
}

/* The entry named key in names[0..n), or n. */
static uint32_t ref_find(const pf_feature *features, const pf_feature_list *lists,
			 uint32_t n, const char *key, size_t len)
{
	for (uint32_t i = 0; i < n; i++) {
		const char *name = features ? features[i].name : lists[i].name;
		uint32_t name_len = features ? features[i].name_len : lists[i].name_len;

		if (name_len == len && !memcmp(name, key, len))
			return i;
	}
	return n;
}

/* A new entry's name: key's len bytes, copied into the arena.  @return 0
 * or REF_NOBUFS. */
static int ref_name(pf_arena *a, const char *key, size_t len, const char **name,
		    uint32_t *name_len)
{
	*name = len ? ref_copy(a, key, len) : "";
	*name_len = (uint32_t)len;
	return *name ? 0 : REF_NOBUFS;
}

static int copy_features(pf_arena *a, const Tensorflow__Features *src,
			 pf_example *out)
{
	pf_feature *features;
	uint32_t n = 0;

	if (!src || !src->n_feature)
		return 0;
	if (!(features = pf_arena_alloc(a, src->n_feature * sizeof(*features))))
		return REF_NOBUFS;
	for (size_t e = 0; e < src->n_feature; e++) {
		const Tensorflow__Features__FeatureEntry *entry = src->feature[e];
		size_t len = strlen(entry->key);
		uint32_t i = ref_find(features, NULL, n, entry->key, len);

		if (i == n) {
			if (ref_name(a, entry->key, len, &features[n].name, &features[n].name_len))
				return REF_NOBUFS;
			n++;
		}
		if (copy_feature(a, entry->value, &features[i]))
			return REF_NOBUFS;
	}
	out->features = features;
	out->n_features = n;
	return 0;
}

static int copy_lists(pf_arena *a, const Tensorflow__FeatureLists *src,
		      pf_example *out)
{
	pf_feature_list *lists;
	uint32_t n = 0;

	if (!src || !src->n_feature_list)
		return 0;
	if (!(lists = pf_arena_alloc(a, src->n_feature_list * sizeof(*lists))))
		return REF_NOBUFS;
	for (size_t e = 0; e < src->n_feature_list; e++) {
		const Tensorflow__FeatureLists__FeatureListEntry *entry =
			src->feature_list[e];
		const Tensorflow__FeatureList *fl = entry->value;
		size_t len = strlen(entry->key);
		uint32_t i = ref_find(NULL, lists, n, entry->key, len);
		size_t steps = fl ? fl->n_feature : 0;
		pf_feature *step = NULL;

		if (i == n) {
			if (ref_name(a, entry->key, len, &lists[n].name, &lists[n].name_len))
				return REF_NOBUFS;
			n++;
		}
		if (steps && !(step = pf_arena_alloc(a, steps * sizeof(*step))))
			return REF_NOBUFS;
		for (size_t s = 0; s < steps; s++) {
			step[s].name = "";
			step[s].name_len = 0;
			if (copy_feature(a, fl->feature[s], &step[s]))
				return REF_NOBUFS;
		}
		lists[i].steps = (uint32_t)steps;
		lists[i].step = step;
	}
	out->lists = lists;
	out->n_lists = n;
	return 0;
}

static int ref_nobufs(pf_arena *a, size_t mark, pf_example *out, pf_error *err)
{
	a->used = mark;
	memset(out, 0, sizeof(*out));
	return pf_error_set(err, -ENOBUFS, PF_OFFSET_NONE, 0,
			    "example arena too small (%zu bytes)", a->cap);
}

/* What both decoders do first: err cleared, out empty, a record
 * protobuf-c takes (its lengths are ints), ra ready.  @return 0 or
 * -EFBIG. */
static int ref_begin(size_t len, struct ref_alloc *ra, pf_example *out, pf_error *err)
{
	pf_error_clear(err);
	memset(out, 0, sizeof(*out));
	if (len > INT_MAX)
		return pf_error_set(err, -EFBIG, PF_OFFSET_NONE, 0,
				    "example of %zu bytes over 2 GiB", len);
	ref_alloc_init(ra);
	return 0;
}

int pf_example_decode_ref(const void *rec, size_t len, pf_arena *arena,
			  pf_example *out, pf_error *err)
{
	struct ref_alloc ra;
	Tensorflow__Example *msg;
	size_t mark = arena->used;
	int ret;

	if ((ret = ref_begin(len, &ra, out, err)) < 0)
		return ret;
	msg = tensorflow__example__unpack(&ra.pc, len, rec);
	if (!msg)
		return unpack_failed(&ra, err);
	ret = copy_features(arena, msg->features, out);
	tensorflow__example__free_unpacked(msg, &ra.pc);
	return ret ? ref_nobufs(arena, mark, out, err) : 0;
}

int pf_sequence_example_decode_ref(const void *rec, size_t len,
				   pf_arena *arena, pf_example *out,
				   pf_error *err)
{
	struct ref_alloc ra;
	Tensorflow__SequenceExample *msg;
	size_t mark = arena->used;
	int ret;

	if ((ret = ref_begin(len, &ra, out, err)) < 0)
		return ret;
	msg = tensorflow__sequence_example__unpack(&ra.pc, len, rec);
	if (!msg)
		return unpack_failed(&ra, err);
	ret = copy_features(arena, msg->context, out);
	if (!ret)
		ret = copy_lists(arena, msg->feature_lists, out);
	tensorflow__sequence_example__free_unpacked(msg, &ra.pc);
	return ret ? ref_nobufs(arena, mark, out, err) : 0;
}
