/* SPDX-License-Identifier: Apache-2.0 */
/* tf.train.Example: the fixtures (mnist, lingvo, taxi, SequenceExamples)
 * decoded by the fast decoder and by protobuf-c, every truncation and byte
 * flip, the schema of mixed absent features (test_formats_example.c has
 * the hand-built wire cases). */
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
/* Fixtures                                                             */
/* ------------------------------------------------------------------ */

typedef struct records {
	uint8_t *buf;
	size_t len;
	size_t n;
	const uint8_t **data;
	size_t *size;
} records;

/* Frame a plain TFRecord stream by hand: u64 len, u32 crc, data, u32 crc. */
static void frame(records *r)
{
	size_t off = 0, cap = 0;

	r->n = 0;
	r->data = NULL;
	r->size = NULL;
	while (off < r->len) {
		uint64_t n;

		CHECK(off + 16 <= r->len);
		memcpy(&n, r->buf + off, 8);
		CHECK(off + 16 + n <= r->len);
		if (r->n == cap) {
			cap = cap ? 2 * cap : 64;
			r->data = realloc(r->data, cap * sizeof(*r->data));
			r->size = realloc(r->size, cap * sizeof(*r->size));
		}
		r->data[r->n] = r->buf + off + 12;
		r->size[r->n] = (size_t)n;
		r->n++;
		off += 16 + n;
	}
}

static void load_plain(records *r, const char *name)
{
	r->buf = tu_read_file(tu_fixture(name), &r->len);
	frame(r);
}

static void load_gz(records *r, const char *name)
{
	gzFile gz = gzopen(tu_fixture(name), "rb");
	size_t cap = 1 << 20;
	int n;

	cr_assert_not_null(gz);
	r->buf = malloc(cap);
	r->len = 0;
	while ((n = gzread(gz, r->buf + r->len, (unsigned)(cap - r->len))) > 0) {
		r->len += (size_t)n;
		if (r->len == cap)
			r->buf = realloc(r->buf, cap *= 2);
	}
	cr_assert_eq(n, 0);
	gzclose(gz);
	frame(r);
}

static void records_free(records *r)
{
	free(r->buf);
	free(r->data);
	free(r->size);
}

Test(example, fixture_mnist)
{
	records r;
	pf_example ex;
	pf_schema *s;
	int64_t class_sum = 0;
	double float_sum = 0;

	load_plain(&r, "tfx_mnist_1000.tfrecord");
	cr_assert_eq(r.n, 1000);
	cr_assert_eq(pf_schema_create(&s), 0);
	for (size_t i = 0; i < r.n; i++) {
		CHECK(r.size[i] == 3187);
		CHECK(decode_both(r.data[i], r.size[i], false, &ex) == 0);
		const pf_feature *c = find(&ex, "image_class");
		const pf_feature *f = find(&ex, "image_floats");

		CHECK(c->kind == PF_KIND_INT64);
		CHECK(c->count == 1);
		if (i == 0)
			CHECK(c->v.int64s[0] == 9);
		class_sum += c->v.int64s[0];
		CHECK(f->kind == PF_KIND_FLOAT);
		CHECK(f->count == 784);
		if (i == 0)
			CHECK(f->v.floats[0] == -0.5f);
		for (uint32_t k = 0; k < 784; k++)
			float_sum += f->v.floats[k];
		CHECK(pf_schema_add(s, &ex) == 0);
	}
	cr_assert_eq(class_sum, 4498);
	cr_assert(fabs(float_sum - -291181.686238) < 1e-3, "%f", float_sum);

	cr_assert_eq(pf_schema_records(s), 1000);
	cr_assert_eq(pf_schema_count(s), 2);
	const pf_feature_schema *c = pf_schema_get(s, 0), *f = pf_schema_get(s, 1);
	cr_assert_str_eq(c->name, "image_class");
	cr_assert_eq(c->kind, PF_KIND_INT64);
	cr_assert(!c->is_list && !c->mixed);
	cr_assert_eq(c->records_present, 1000);
	cr_assert_eq(c->records_unset, 0);
	cr_assert_eq(c->total_values, 1000);
	cr_assert_eq(c->min_len, 1);
	cr_assert_eq(c->max_len, 1);
	cr_assert(pf_schema_is_fixed(s, c));
	cr_assert_str_eq(f->name, "image_floats");
	cr_assert_eq(f->kind, PF_KIND_FLOAT);
	cr_assert_eq(f->total_values, 784000);
	cr_assert_eq(f->min_len, 784);
	cr_assert_eq(f->max_len, 784);
	cr_assert(pf_schema_is_fixed(s, f));
	cr_assert_null(pf_schema_get(s, 2));
	pf_schema_free(s);
	records_free(&r);
}

Test(example, fixture_lingvo)
{
	static const char *const names[] = {
		"example_index", "natural_order", "source_id", "source_padding",
		"source_word", "target_id", "target_label", "target_padding",
		"target_weight", "target_word",
	};
	records r;
	pf_example ex;
	pf_schema *s;
	int64_t index_sum = 0, source_id_sum = 0;
	uint64_t word_bytes = 0;
	double weight_sum = 0;

	load_plain(&r, "lingvo_wmt14_ende_wpm_32k_test.tfrecord");
	cr_assert_eq(r.n, 100);
	cr_assert_eq(pf_schema_create(&s), 0);
	for (size_t i = 0; i < r.n; i++) {
		CHECK(decode_both(r.data[i], r.size[i], false, &ex) == 0);
		CHECK(ex.n_features == 10);
		index_sum += find(&ex, "example_index")->v.int64s[0];
		const pf_feature *f = find(&ex, "source_id");
		for (uint32_t k = 0; k < f->count; k++)
			source_id_sum += f->v.int64s[k];
		f = find(&ex, "source_word");
		CHECK(f->kind == PF_KIND_BYTES);
		for (uint32_t k = 0; k < f->count; k++)
			word_bytes += f->v.bytes[k].len;
		f = find(&ex, "target_weight");
		for (uint32_t k = 0; k < f->count; k++)
			weight_sum += f->v.floats[k];
		CHECK(pf_schema_add(s, &ex) == 0);
	}
	cr_assert_eq(index_sum, 5050);
	cr_assert_eq(source_id_sum, 4403658);
	cr_assert_eq(word_bytes, 14147);
	cr_assert_eq(weight_sum, 2315.0);
	/* Schema: sorted by name, everything present, lists variable. */
	cr_assert_eq(pf_schema_count(s), 10);
	for (size_t i = 0; i < 10; i++) {
		const pf_feature_schema *f = pf_schema_get(s, i);

		cr_assert_str_eq(f->name, names[i]);
		cr_assert_eq(f->records_present, 100);
	}
	const pf_feature_schema *sid = pf_schema_get(s, 2);
	cr_assert_eq(sid->kind, PF_KIND_INT64);
	cr_assert_eq(sid->total_values, 2031);
	cr_assert_eq(sid->min_len, 2);
	cr_assert_eq(sid->max_len, 53);
	cr_assert_not(pf_schema_is_fixed(s, sid));
	cr_assert(pf_schema_is_fixed(s, pf_schema_get(s, 0)));
	cr_assert_eq(pf_schema_get(s, 9)->kind, PF_KIND_BYTES);
	cr_assert_eq(pf_schema_get(s, 9)->total_values, 2315);
	pf_schema_free(s);
	records_free(&r);
}

Test(example, fixture_chicago_taxi_unset_features)
{
	records r;
	pf_example ex;
	pf_schema *s;

	load_gz(&r, "tfx_chicago_taxi_unlabelled_00008.tfrecord.gz");
	cr_assert_eq(r.n, 205);
	cr_assert_eq(pf_schema_create(&s), 0);
	for (size_t i = 0; i < r.n; i++) {
		CHECK(decode_both(r.data[i], r.size[i], false, &ex) == 0);
		CHECK(find(&ex, "pickup_census_tract")->kind == PF_KIND_NONE);
		CHECK(pf_schema_add(s, &ex) == 0);
	}
	cr_assert_eq(pf_schema_count(s), 17);
	for (size_t i = 0; i < pf_schema_count(s); i++) {
		const pf_feature_schema *f = pf_schema_get(s, i);

		cr_assert_eq(f->records_present, 205);
		cr_assert_not(f->mixed);
		if (!strcmp(f->name, "pickup_census_tract")) {
			cr_assert_eq(f->kind, PF_KIND_NONE);
			cr_assert_eq(f->records_unset, 205);
			cr_assert_eq(f->max_len, 0);
		} else if (!strcmp(f->name, "company")) {
			cr_assert_eq(f->kind, PF_KIND_BYTES);
			cr_assert_eq(f->records_unset, 205 - 135);
			cr_assert_eq(f->total_values, 135);
			cr_assert_eq(f->min_len, 0);
			cr_assert_eq(f->max_len, 1);
			cr_assert_not(pf_schema_is_fixed(s, f));
		} else if (!strcmp(f->name, "trip_seconds")) {
			cr_assert(pf_schema_is_fixed(s, f));
		}
	}
	pf_schema_free(s);
	records_free(&r);
}

Test(example, fixture_sequence_examples)
{
	records r;
	pf_example ex;
	pf_schema *s;
	int64_t i_sum = 0;
	uint64_t s_bytes = 0;

	load_gz(&r, "tfx_sequence_example_eval.tfrecord.gz");
	cr_assert_eq(r.n, 4500);
	cr_assert_eq(pf_schema_create(&s), 0);
	for (size_t i = 0; i < r.n; i++) {
		CHECK(decode_both(r.data[i], r.size[i], true, &ex) == 0);
		const pf_feature *f = find(&ex, "i");
		if (f->count)
			i_sum += f->v.int64s[0];
		const pf_feature_list *l = pf_example_find_list(&ex, "s");
		CHECK(l);
		CHECK(l->steps == 2);
		for (uint32_t k = 0; k < 2; k++) {
			CHECK(l->step[k].kind == PF_KIND_BYTES);
			s_bytes += l->step[k].v.bytes[0].len;
		}
		if (i == 0)
			CHECK(!memcmp(l->step[0].v.bytes[0].data, "10500", 5));
		CHECK(pf_schema_add(s, &ex) == 0);
	}
	cr_assert_eq(i_sum, 51637500);
	cr_assert_eq(s_bytes, 45000);
	cr_assert_eq(pf_schema_count(s), 3);
	const pf_feature_schema *f = pf_schema_get(s, 0), *sl = pf_schema_get(s, 2);
	cr_assert_str_eq(f->name, "f");
	cr_assert_eq(f->kind, PF_KIND_FLOAT);
	cr_assert_eq(f->records_unset, 450);
	cr_assert_eq(f->total_values, 4050);
	cr_assert_str_eq(sl->name, "s");
	cr_assert(sl->is_list);
	cr_assert_eq(sl->kind, PF_KIND_BYTES);
	cr_assert_eq(sl->total_values, 9000);
	cr_assert_eq(sl->min_len, 2);
	cr_assert(pf_schema_is_fixed(s, sl));
	pf_schema_free(s);
	records_free(&r);
}

/* Cut a real record at every byte: both paths agree, nothing crashes. */
static void truncate_everywhere(const uint8_t *rec, size_t len, bool seq)
{
	pf_example ex;
	size_t accepted = 0;

	for (size_t cut = 0; cut <= len; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1);

		memcpy(copy, rec, cut);
		accepted += decode_both(copy, cut, seq, &ex) == 0;
		free(copy);
	}
	/* The whole record and the empty prefix are examples; most cuts are
	 * not (a cut inside a length-delimited field always fails). */
	cr_assert_geq(accepted, 2);
	cr_assert_lt(accepted, len / 2);
}

Test(example, truncation_at_every_byte)
{
	records r;

	load_plain(&r, "lingvo_wmt14_ende_wpm_32k_test.tfrecord");
	truncate_everywhere(r.data[0], r.size[0], false);
	truncate_everywhere(r.data[0], r.size[0], true);
	records_free(&r);
	load_gz(&r, "tfx_chicago_taxi_unlabelled_00008.tfrecord.gz");
	truncate_everywhere(r.data[0], r.size[0], false);
	records_free(&r);
	load_gz(&r, "tfx_sequence_example_eval.tfrecord.gz");
	truncate_everywhere(r.data[1], r.size[1], true);
	records_free(&r);
}

Test(example, byte_flips_agree)
{
	records r;
	pf_example ex;

	/* Every byte of a small record XORed with a few masks. */
	load_gz(&r, "tfx_penguin_train.tfrecord.gz");
	uint8_t *copy = malloc(r.size[0]);
	for (size_t i = 0; i < r.size[0]; i++) {
		static const uint8_t masks[] = { 0x01, 0x07, 0x80, 0xff };

		for (size_t m = 0; m < sizeof(masks); m++) {
			memcpy(copy, r.data[0], r.size[0]);
			copy[i] ^= masks[m];
			decode_both(copy, r.size[0], false, &ex);
			decode_both(copy, r.size[0], true, &ex);
		}
	}
	free(copy);
	records_free(&r);
}

/* ------------------------------------------------------------------ */
/* Schema edge cases                                                    */
/* ------------------------------------------------------------------ */

Test(example, schema_mixed_absent_and_lists)
{
	pf_schema *s;
	pf_example ex;
	wire *top;

	cr_assert_eq(pf_schema_create(&s), 0);
	cr_assert_eq(decode_wire(example("x", feat_int64(1, (int64_t)1),
					 "y", feat_float(2, 1.0, 2.0), NULL),
				 false, &ex), 0);
	cr_assert_eq(pf_schema_add(s, &ex), 0);
	cr_assert_eq(decode_wire(example("x", feat_float(1, 1.0), NULL), false, &ex), 0);
	cr_assert_eq(pf_schema_add(s, &ex), 0);
	/* A list and a context feature of the same name are two entries. */
	top = w_new();
	w_ld(top, 1, w_entry(w_new(), "x", feat_int64(1, (int64_t)2)));
	w_ld(top, 2, w_list_entry(w_new(), "x", 3, feat_int64(2, (int64_t)1, (int64_t)2),
				  w_new(), feat_int64(1, (int64_t)3)));
	cr_assert_eq(decode_wire(top, true, &ex), 0);
	cr_assert_eq(pf_schema_add(s, &ex), 0);

	cr_assert_eq(pf_schema_records(s), 3);
	cr_assert_eq(pf_schema_count(s), 3);
	const pf_feature_schema *x = pf_schema_get(s, 0), *xl = pf_schema_get(s, 1),
				*y = pf_schema_get(s, 2);
	cr_assert_str_eq(x->name, "x");
	cr_assert_not(x->is_list);
	cr_assert(x->mixed);
	cr_assert_eq(x->records_present, 3);
	cr_assert_str_eq(xl->name, "x");
	cr_assert(xl->is_list);
	cr_assert_eq(xl->kind, PF_KIND_INT64);
	cr_assert_eq(xl->total_values, 3);
	cr_assert_eq(xl->min_len, 3);
	cr_assert_not(pf_schema_is_fixed(s, xl));	/* in 1 record of 3 */
	cr_assert_str_eq(y->name, "y");
	cr_assert_eq(y->records_present, 1);
	cr_assert_eq(y->total_values, 2);
	cr_assert_not(pf_schema_is_fixed(s, y));
	pf_schema_free(s);
	pf_schema_free(NULL);
}
