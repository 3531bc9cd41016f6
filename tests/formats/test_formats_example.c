/* SPDX-License-Identifier: Apache-2.0 */
/* tf.train.Example: the fast decoder against protobuf-c on hand-built wire
 * cases (test_formats_example_fixtures.c has the fixtures and the schema). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "example_util.h"
#include "formats_internal.h"
#include "pf_formats.h"
#include "testutil.h"


TestSuite(example, .fini = arenas_fini);

/* ------------------------------------------------------------------ */
/* Hand-built wire messages                                             */
/* ------------------------------------------------------------------ */

Test(example, kind_names)
{
	cr_assert_str_eq(pf_kind_name(PF_KIND_NONE), "none");
	cr_assert_str_eq(pf_kind_name(PF_KIND_BYTES), "bytes");
	cr_assert_str_eq(pf_kind_name(PF_KIND_FLOAT), "float");
	cr_assert_str_eq(pf_kind_name(PF_KIND_INT64), "int64");
}

Test(example, three_kinds_and_find)
{
	pf_example ex;
	const pf_feature *f;

	cr_assert_eq(decode_wire(example("label", feat_int64(1, (int64_t)7),
					 "img", feat_float(3, 0.5, -1.0, 2.25),
					 "word", feat_bytes(2, "ab", ""),
					 NULL), false, &ex), 0);
	cr_assert_eq(ex.n_features, 3);
	cr_assert_eq(ex.n_lists, 0);
	/* Wire order is kept. */
	cr_assert_eq(ex.features[0].name_len, 5);
	cr_assert(!memcmp(ex.features[0].name, "label", 5));
	expect_int64(find(&ex, "label"), 1, I64(7));
	expect_float(find(&ex, "img"), 3, F32(0.5f, -1.0f, 2.25f));
	f = find(&ex, "word");
	cr_assert_eq(f->kind, PF_KIND_BYTES);
	cr_assert_eq(f->count, 2);
	cr_assert_eq(f->v.bytes[0].len, 2);
	cr_assert(!memcmp(f->v.bytes[0].data, "ab", 2));
	cr_assert_eq(f->v.bytes[1].len, 0);
	cr_assert_null(pf_example_find(&ex, "lab"));
	cr_assert_null(pf_example_find(&ex, "labels"));
	cr_assert_null(pf_example_find_list(&ex, "label"));
}

Test(example, empty_record_and_empty_features)
{
	pf_example ex;

	cr_assert_eq(decode_both("", 0, false, &ex), 0);
	cr_assert_eq(ex.n_features, 0);
	cr_assert_eq(decode_wire(w_bytes(w_new(), "0a 00"), false, &ex), 0);
	cr_assert_eq(ex.n_features, 0);
	cr_assert_eq(decode_both("", 0, true, &ex), 0);
	cr_assert_eq(ex.n_features + ex.n_lists, 0);
}

Test(example, int64_extremes_and_negative)
{
	pf_example ex;

	cr_assert_eq(decode_wire(example("i", feat_int64(6, (int64_t)0, (int64_t)-1,
							  INT64_MIN, INT64_MAX,
							  (int64_t)127, (int64_t)128),
					 NULL), false, &ex), 0);
	expect_int64(find(&ex, "i"), 6, I64(0, -1, INT64_MIN, INT64_MAX, 127, 128));
}

Test(example, packed_int64_every_varint_length)
{
	pf_example ex;
	int64_t want[64 + 9];
	wire *packed = w_new();

	/* 1..10-byte varints, then a run of 1-byte ones long enough for the
	 * eight-at-a-time path, interleaved with 2-byte ones. */
	for (int i = 0; i < 64; i++) {
		want[i] = i % 9 == 4 ? 300 + i : i;
		w_varint(packed, (uint64_t)want[i]);
	}
	for (int k = 0; k < 9; k++) {
		want[64 + k] = k == 8 ? -5 : (int64_t)(1ull << (7 * k + 6));
		w_varint(packed, (uint64_t)want[64 + k]);
	}
	cr_assert_eq(decode_wire(w_ld(w_new(), 1, w_entry(w_new(), "i",
		w_ld(w_new(), 3, w_ld(w_new(), 1, packed)))), false, &ex), 0);
	expect_int64(find(&ex, "i"), 73, want);
}

Test(example, unpacked_and_mixed_encodings)
{
	pf_example ex;
	wire *fl = w_new(), *il = w_new(), *chunk = w_new();

	/* FloatList: fixed32, packed {2, 3}, fixed32. */
	w_tag(fl, 1, 5);
	w_float(fl, 1.5f);
	w_float(chunk, 2.0f);
	w_float(chunk, 3.0f);
	w_ld(fl, 1, chunk);
	w_tag(fl, 1, 5);
	w_float(fl, 4.0f);
	/* Int64List: varint, packed {300, 1}, varint -1. */
	w_tag(il, 1, 0);
	w_varint(il, 5);
	w_ld(il, 1, w_varint(w_varint(w_new(), 300), 1));
	w_tag(il, 1, 0);
	w_varint(il, UINT64_MAX);
	cr_assert_eq(decode_wire(example("f", w_ld(w_new(), 2, fl),
					 "i", w_ld(w_new(), 3, il), NULL),
				 false, &ex), 0);
	expect_float(find(&ex, "f"), 4, F32(1.5f, 2.0f, 3.0f, 4.0f));
	expect_int64(find(&ex, "i"), 4, I64(5, 300, 1, -1));
}

Test(example, empty_lists_keep_their_kind)
{
	pf_example ex;

	cr_assert_eq(decode_wire(example("b", w_bytes(w_new(), "0a 00"),
					 "f", w_bytes(w_new(), "12 00"),
					 "i", w_bytes(w_new(), "1a 00"), NULL),
				 false, &ex), 0);
	cr_assert_eq(find(&ex, "b")->kind, PF_KIND_BYTES);
	cr_assert_eq(find(&ex, "f")->kind, PF_KIND_FLOAT);
	cr_assert_eq(find(&ex, "i")->kind, PF_KIND_INT64);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ex.features[i].count, 0);
}

Test(example, feature_without_kind_is_none)
{
	pf_example ex;
	wire *features = w_new();

	/* TFX's missing value: map value bytes 12 00. */
	w_entry(features, "missing", w_new());
	/* An entry without a value, and one without a key. */
	w_entry(features, "novalue", NULL);
	w_ld(features, 1, w_ld(w_new(), 2, feat_int64(1, (int64_t)3)));
	cr_assert_eq(decode_wire(w_ld(w_new(), 1, features), false, &ex), 0);
	cr_assert_eq(ex.n_features, 3);
	cr_assert_eq(find(&ex, "missing")->kind, PF_KIND_NONE);
	cr_assert_eq(find(&ex, "missing")->count, 0);
	cr_assert_eq(find(&ex, "novalue")->kind, PF_KIND_NONE);
	expect_int64(find(&ex, ""), 1, I64(3));
}

Test(example, duplicate_keys_last_value_first_position)
{
	pf_example ex;

	cr_assert_eq(decode_wire(example("a", feat_int64(1, (int64_t)1),
					 "b", feat_float(1, 2.0),
					 "a", feat_bytes(1, "x"),
					 "c", w_new(),
					 "a", feat_int64(2, (int64_t)8, (int64_t)9),
					 NULL), false, &ex), 0);
	cr_assert_eq(ex.n_features, 3);
	cr_assert(!memcmp(ex.features[0].name, "a", 1));
	cr_assert(!memcmp(ex.features[1].name, "b", 1));
	cr_assert(!memcmp(ex.features[2].name, "c", 1));
	expect_int64(&ex.features[0], 2, I64(8, 9));
}

Test(example, many_duplicates_through_the_hash)
{
	pf_example ex;
	wire *features = w_new();
	char key[16];

	/* More names than the linear search takes, each given three times. */
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 100; i++) {
			snprintf(key, sizeof(key), "k%d", i);
			w_entry(features, key, feat_int64(1, (int64_t)(round * 1000 + i)));
		}
	cr_assert_eq(decode_wire(w_ld(w_new(), 1, features), false, &ex), 0);
	cr_assert_eq(ex.n_features, 100);
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		cr_assert_eq(ex.features[i].name_len, strlen(key));
		cr_assert(!memcmp(ex.features[i].name, key, strlen(key)));
		expect_int64(&ex.features[i], 1, I64(2000 + i));
	}
}

Test(example, oneof_member_twice_last_wins_unmerged)
{
	pf_example ex;
	wire *f = feat_int64(2, (int64_t)1, (int64_t)2);
	wire *g = feat_float(1, 1.0);

	/* protobuf-c's parse_oneof_member() frees the earlier member: two
	 * int64_lists do not concatenate, the later one is the value. */
	w_raw(f, g->d, g->n);
	w_free(g);
	g = feat_int64(1, (int64_t)4);
	w_raw(f, g->d, g->n);
	w_free(g);
	cr_assert_eq(decode_wire(example("k", f, NULL), false, &ex), 0);
	expect_int64(find(&ex, "k"), 1, I64(4));

	f = feat_float(2, 1.0, 2.0);
	w_bytes(f, "12 00");
	cr_assert_eq(decode_wire(example("k", f, NULL), false, &ex), 0);
	cr_assert_eq(find(&ex, "k")->kind, PF_KIND_FLOAT);
	cr_assert_eq(find(&ex, "k")->count, 0);
}

Test(example, repeated_features_field_merges)
{
	pf_example ex;
	wire *w = example("a", feat_int64(1, (int64_t)1), NULL);
	wire *w2 = example("b", feat_int64(1, (int64_t)2), "a", w_new(), NULL);

	w_raw(w, w2->d, w2->n);
	w_free(w2);
	w_bytes(w, "10 07");	/* an unknown varint field 2 */
	cr_assert_eq(decode_wire(w, false, &ex), 0);
	cr_assert_eq(ex.n_features, 2);
	cr_assert(!memcmp(ex.features[0].name, "a", 1));
	cr_assert_eq(ex.features[0].kind, PF_KIND_NONE);
	expect_int64(&ex.features[1], 1, I64(2));
}

static wire *entry_two_values(wire *v1, wire *v2)
{
	wire *e = w_new();

	w_str(e, 1, "m", 1);
	w_ld(e, 2, v1);
	w_ld(e, 2, v2);
	return w_ld(w_new(), 1, w_ld(w_new(), 1, e));
}

Test(example, map_value_twice_merges_like_protobuf_c)
{
	pf_example ex;

	/* merge_messages(): the later Feature wins when it has a kind... */
	cr_assert_eq(decode_wire(entry_two_values(feat_int64(1, (int64_t)1),
						  feat_float(1, 2.0)), false, &ex), 0);
	expect_float(find(&ex, "m"), 1, F32(2.0f));
	cr_assert_eq(decode_wire(entry_two_values(w_new(), feat_int64(1, (int64_t)5)),
				 false, &ex), 0);
	expect_int64(find(&ex, "m"), 1, I64(5));
	/* ...the earlier one stays when the later has none... */
	cr_assert_eq(decode_wire(entry_two_values(feat_int64(1, (int64_t)9), w_new()),
				 false, &ex), 0);
	expect_int64(find(&ex, "m"), 1, I64(9));
	/* ...and two kind-less values cannot be merged: refused. */
	reject(entry_two_values(w_new(), w_new()), false);
	reject(entry_two_values(w_new(), w_new()), true);
}

Test(example, key_is_cut_at_nul_and_not_utf8_checked)
{
	pf_example ex;
	wire *features = w_new();

	w_ld(features, 1, w_ld(w_str(w_new(), 1, "a\0b", 3), 2, feat_int64(1, (int64_t)1)));
	w_ld(features, 1, w_ld(w_str(w_new(), 1, "a\0c", 3), 2, feat_int64(1, (int64_t)2)));
	w_ld(features, 1, w_ld(w_str(w_new(), 1, "\xff\xfe", 2), 2, feat_int64(1, (int64_t)3)));
	/* The last key of an entry wins. */
	w_ld(features, 1, w_ld(w_str(w_str(w_new(), 1, "x", 1), 1, "y", 1), 2, w_new()));
	cr_assert_eq(decode_wire(w_ld(w_new(), 1, features), false, &ex), 0);
	cr_assert_eq(ex.n_features, 3);
	expect_int64(find(&ex, "a"), 1, I64(2));
	expect_int64(find(&ex, "\xff\xfe"), 1, I64(3));
	cr_assert_not_null(pf_example_find(&ex, "y"));
	cr_assert_null(pf_example_find(&ex, "x"));
}

Test(example, unknown_fields_are_skipped_everywhere)
{
	pf_example ex;
	/* varint, fixed64, length-delimited and fixed32 unknown fields, and
	 * field 0 in a two-byte tag (80 00), at every message level. */
	static const char unknown[] =
		"28 96 01  31 01 02 03 04 05 06 07 08  3a 02 ff ff  3d 01 02 03 04  80 00 05";
	wire *il = w_bytes(w_new(), unknown);
	wire *feat, *entry, *features, *top;

	w_ld(il, 1, w_varint(w_new(), 42));
	feat = w_bytes(w_new(), unknown);
	w_ld(feat, 3, il);
	entry = w_bytes(w_new(), unknown);
	w_str(entry, 1, "u", 1);
	w_ld(entry, 2, feat);
	features = w_bytes(w_new(), unknown);
	w_ld(features, 1, entry);
	top = w_bytes(w_new(), unknown);
	w_ld(top, 1, features);
	w_bytes(top, unknown);
	cr_assert_eq(decode_wire(top, false, &ex), 0);
	expect_int64(find(&ex, "u"), 1, I64(42));
}

Test(example, tags_up_to_five_bytes)
{
	pf_example ex;

	/* Field 1 wire type 2 as a 5-byte tag, and a 5-byte length. */
	cr_assert_eq(decode_wire(w_bytes(w_new(), "8a 80 80 80 00 82 80 80 80 00 0a 00"),
				 false, &ex), 0);
	/* A 5-byte tag whose bits pass 32 is an unknown field (bits dropped). */
	cr_assert_eq(decode_wire(w_bytes(w_new(), "f8 ff ff ff 7f 00"), false, &ex), 0);
	reject(w_bytes(w_new(), "8a 80 80 80 80 00 00"), false);	/* 6 bytes */
	reject(w_bytes(w_new(), "0a 80 80 80 80 80 00"), false);	/* 6-byte length */
}

Test(example, malformed_wire_is_refused)
{
	/* Field number 0 in a one-byte tag, at the top and deep inside. */
	reject(w_bytes(w_new(), "00 00"), false);
	reject(w_bytes(w_new(), "07 00 00 00 00"), false);
	reject(example("i", w_bytes(w_new(), "1a 02 00 05"), NULL), false);
	/* Groups, wire types 6 and 7. */
	reject(w_bytes(w_new(), "0b 0c"), false);
	reject(w_bytes(w_new(), "0c"), false);
	reject(w_bytes(w_new(), "1e 00"), false);
	reject(w_bytes(w_new(), "1f 00"), true);
	reject(example("g", w_bytes(w_new(), "1a 02 08 01 23 24"), NULL), false);
	/* Varints over 10 bytes, unpacked and packed. */
	reject(example("i", w_bytes(w_new(), "1a 0c 08 ff ff ff ff ff ff ff ff ff ff 01"), NULL), false);
	reject(example("i", w_bytes(w_new(), "1a 0d 0a 0b ff ff ff ff ff ff ff ff ff ff 01"), NULL), false);
	/* A packed varint cut by the end of its chunk. */
	reject(example("i", w_bytes(w_new(), "1a 04 0a 02 81 82"), NULL), false);
	/* Lengths running past the end; a length over 2 GiB. */
	reject(w_bytes(w_new(), "0a 85 80 80 80 00 01"), false);
	reject(w_bytes(w_new(), "0a 05 0a 03 0a 05 61"), false);
	reject(w_bytes(w_new(), "3a 80 80 80 80 08 00"), false);
	/* Truncated fixed-width values. */
	reject(example("f", w_bytes(w_new(), "12 03 0d 00 00"), NULL), false);
	reject(w_bytes(w_new(), "09 00 00"), false);
	/* A packed float chunk not a multiple of 4. */
	reject(example("f", w_bytes(w_new(), "12 05 0a 03 00 00 00"), NULL), false);
}

Test(example, wrong_wire_type_for_a_known_field)
{
	reject(w_bytes(w_new(), "08 01"), false);			/* Example.features */
	reject(w_bytes(w_new(), "0a 02 08 01"), false);		/* map entry */
	reject(w_bytes(w_new(), "0a 04 0a 02 08 01"), false);		/* key */
	reject(w_bytes(w_new(), "0a 04 0a 02 10 01"), false);		/* value */
	reject(example("x", w_bytes(w_new(), "08 01"), NULL), false);		/* bytes_list */
	reject(example("x", w_bytes(w_new(), "15 00 00 00 00"), NULL), false);	/* float_list */
	reject(example("x", w_bytes(w_new(), "0a 02 08 01"), NULL), false);	/* bytes value */
	reject(example("x", w_bytes(w_new(), "12 02 08 01"), NULL), false);	/* float as varint */
	reject(example("x", w_bytes(w_new(), "12 09 09 00 00 00 00 00 00 00 00"), NULL), false);
	reject(example("x", w_bytes(w_new(), "1a 05 0d 00 00 00 00"), NULL), false); /* int64 fixed32 */
	reject(example("x", w_bytes(w_new(), "1a 09 09 00 00 00 00 00 00 00 00"), NULL), false);
	reject(w_bytes(w_new(), "10 01"), true);			/* feature_lists */
	reject(w_bytes(w_new(), "12 06 0a 04 12 02 08 01"), true);	/* a step */
}

Test(example, error_names_the_byte)
{
	pf_example ex;
	wire *w = example("i", feat_int64(1, (int64_t)1), NULL);
	size_t n = w->n;

	/* Make the last tag byte (of the packed values, 0a) a group start. */
	cr_assert_eq(w->d[n - 3], 0x0a);
	w->d[n - 3] = 0x0b;
	cr_assert_eq(decode_wire(w, false, &ex), -EBADMSG);
	cr_assert_eq(fast_err.offset, n - 3, "offset %llu", (unsigned long long)fast_err.offset);
}

/* ------------------------------------------------------------------ */
/* SequenceExample                                                      */
/* ------------------------------------------------------------------ */


Test(example, sequence_example_context_and_lists)
{
	pf_example ex;
	wire *ctx = w_new(), *lists = w_new(), *top = w_new();
	const pf_feature_list *l;

	w_entry(ctx, "len", feat_int64(1, (int64_t)2));
	w_list_entry(lists, "tok", 2, feat_bytes(1, "hi"), feat_bytes(2, "a", "b"));
	w_list_entry(lists, "gap", 3, w_new(), feat_float(1, 1.0), w_new());
	w_ld(top, 1, ctx);
	w_ld(top, 2, lists);
	cr_assert_eq(decode_wire(top, true, &ex), 0);
	expect_int64(find(&ex, "len"), 1, I64(2));
	cr_assert_eq(ex.n_lists, 2);
	l = pf_example_find_list(&ex, "tok");
	cr_assert_not_null(l);
	cr_assert_eq(l->steps, 2);
	cr_assert_eq(l->step[1].kind, PF_KIND_BYTES);
	cr_assert_eq(l->step[1].count, 2);
	cr_assert_eq(l->step[1].name_len, 0);
	l = pf_example_find_list(&ex, "gap");
	cr_assert_eq(l->steps, 3);
	cr_assert_eq(l->step[0].kind, PF_KIND_NONE);
	expect_float(&l->step[1], 1, F32(1.0f));
	cr_assert_null(pf_example_find_list(&ex, "len"));
}

Test(example, sequence_example_merges)
{
	pf_example ex;
	wire *top = w_new(), *lists = w_new(), *e = w_new(), *lists2 = w_new();
	const pf_feature_list *l;

	/* One entry with its FeatureList value twice: steps concatenate. */
	w_str(e, 1, "s", 1);
	w_ld(e, 2, w_ld(w_new(), 1, feat_int64(1, (int64_t)1)));
	w_ld(e, 2, w_ld(w_ld(w_new(), 1, feat_int64(1, (int64_t)2)), 1, w_new()));
	w_ld(lists, 1, e);
	/* An entry without a value: no steps. */
	w_ld(lists, 1, w_str(w_new(), 1, "empty", 5));
	w_ld(top, 2, lists);
	/* feature_lists again: entries concatenate; "empty" gets a value. */
	w_list_entry(lists2, "empty", 1, feat_float(1, 3.0));
	w_ld(top, 2, lists2);
	w_ld(top, 1, w_entry(w_new(), "c", feat_int64(1, (int64_t)5)));
	cr_assert_eq(decode_wire(top, true, &ex), 0);
	cr_assert_eq(ex.n_lists, 2);
	l = pf_example_find_list(&ex, "s");
	cr_assert_eq(l->steps, 3);
	expect_int64(&l->step[0], 1, I64(1));
	expect_int64(&l->step[1], 1, I64(2));
	cr_assert_eq(l->step[2].kind, PF_KIND_NONE);
	cr_assert(!memcmp(ex.lists[1].name, "empty", 5));
	cr_assert_eq(ex.lists[1].steps, 1);
	expect_int64(find(&ex, "c"), 1, I64(5));
}

Test(example, example_and_sequence_read_each_other)
{
	pf_example ex;
	wire *top = w_new();

	/* As an Example, a SequenceExample's feature_lists is an unknown field. */
	w_ld(top, 1, w_entry(w_new(), "c", feat_int64(1, (int64_t)5)));
	w_ld(top, 2, w_list_entry(w_new(), "s", 1, w_new()));
	cr_assert_eq(decode_both(top->d, top->n, false, &ex), 0);
	cr_assert_eq(ex.n_features, 1);
	cr_assert_eq(ex.n_lists, 0);
	cr_assert_eq(decode_wire(top, true, &ex), 0);
	cr_assert_eq(ex.n_lists, 1);
}

/* ------------------------------------------------------------------ */
/* The arena                                                            */
/* ------------------------------------------------------------------ */

Test(example, arena_too_small_is_enobufs_and_leaves_it_alone)
{
	wire *w = example("img", feat_float(4, 1.0, 2.0, 3.0, 4.0), NULL);
	pf_arena a;
	pf_example ex;
	pf_error err;
	size_t need, start;

	cr_assert_eq(pf_arena_init(&a, 4096), 0);
	cr_assert_eq(pf_example_decode(w->d, w->n, &a, &ex, &err), 0);
	need = a.used;
	cr_assert_gt(need, 0);
	/* A second record goes after the first, 8-byte aligned. */
	start = (need + 7) & ~(size_t)7;
	a.cap = start + need - 1;
	pf_error_clear(&err);
	cr_assert_eq(pf_example_decode(w->d, w->n, &a, &ex, &err), -ENOBUFS);
	cr_assert_eq(err.code, -ENOBUFS);
	cr_assert_eq(a.used, need);
	cr_assert_eq(ex.n_features, 0);
	a.cap = start + need;
	cr_assert_eq(pf_example_decode(w->d, w->n, &a, &ex, &err), 0);
	expect_float(find(&ex, "img"), 4, F32(1.0f, 2.0f, 3.0f, 4.0f));
	pf_arena_reset(&a);
	a.cap = 8;
	cr_assert_eq(pf_example_decode_ref(w->d, w->n, &a, &ex, &err), -ENOBUFS);
	cr_assert_eq(a.used, 0);
	pf_arena_release(&a);
	w_free(w);
}

/* The worst cases for the arena: the fewest wire bytes per output byte. */
static void fits_bound(wire *w, bool seq)
{
	pf_example ex;
	pf_arena a;
	pf_error err;

	cr_assert_eq(pf_arena_init(&a, 1 + PF_ARENA_BYTES_FOR(w->n)), 0);
	a.used = 1;	/* misaligned start */
	cr_assert_eq(seq ? pf_sequence_example_decode(w->d, w->n, &a, &ex, &err)
			 : pf_example_decode(w->d, w->n, &a, &ex, &err), 0,
		     "%zu bytes: %s", w->n, err.msg);
	cr_assert_leq(a.used, a.cap);
	pf_arena_release(&a);
	/* And protobuf-c agrees. */
	cr_assert_eq(decode_wire(w, seq, &ex), 0);
}

Test(example, arena_bound_holds_on_adversarial_records)
{
	wire *w;
	char key[8];

	/* 20000 map entries of 2 bytes (0a 00): all the empty name. */
	w = w_new();
	for (int i = 0; i < 20000; i++)
		w_bytes(w, "0a 00");
	fits_bound(w_ld(w_new(), 1, w), false);
	/* Many distinct 1- and 2-byte keys with no value. */
	w = w_new();
	for (int i = 0; i < 20000; i++) {
		int n = i < 256 ? 1 : 2;

		key[0] = (char)(i & 0xff);
		key[1] = (char)(1 + (i >> 8));
		w_ld(w, 1, w_str(w_new(), 1, key, (size_t)n));
	}
	fits_bound(w_ld(w_new(), 1, w), false);
	/* 1-byte int64 varints, packed and unpacked. */
	w = w_new();
	for (int i = 0; i < 30000; i++)
		w_bytes(w, "05");
	fits_bound(example("i", w_ld(w_new(), 3, w_ld(w_new(), 1, w)), NULL), false);
	w = w_new();
	for (int i = 0; i < 30000; i++)
		w_bytes(w, "08 05");
	fits_bound(example("i", w_ld(w_new(), 3, w), NULL), false);
	/* Empty bytes values; one-float lists under many keys. */
	w = w_new();
	for (int i = 0; i < 30000; i++)
		w_bytes(w, "0a 00");
	fits_bound(example("b", w_ld(w_new(), 1, w), NULL), false);
	w = w_new();
	for (int i = 0; i < 3000; i++) {
		snprintf(key, sizeof(key), "%d", i);
		w_entry(w, key, feat_float(1, 1.0));
	}
	fits_bound(w_ld(w_new(), 1, w), false);
	/* Steps of 2 bytes (0a 00): 32 bytes each, the 16x worst case. */
	w = w_new();
	for (int i = 0; i < 30000; i++)
		w_bytes(w, "0a 00");
	fits_bound(w_ld(w_new(), 2, w_ld(w_new(), 1,
		w_ld(w_str(w_new(), 1, "s", 1), 2, w))), true);
	/* The same Feature replaced over and over inside one value. */
	w = w_new();
	for (int i = 0; i < 5000; i++)
		w_bytes(w, "1a 02 08 05");
	fits_bound(example("i", w, NULL), false);
}

