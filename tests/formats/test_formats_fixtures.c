/* SPDX-License-Identifier: Apache-2.0 */
/* Every TFRecord fixture written by TensorFlow/Beam, read through the
 * library and checked against its recorded ground truth. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "testutil.h"

/* An integer member of a JSON object, as unsigned (the counts here). */
static uint64_t ju(json_t *obj, const char *key)
{
	return (uint64_t)json_integer_value(json_object_get(obj, key));
}

/* Per-feature totals accumulated over a file. */
typedef struct agg {
	char name[128];
	bool list;
	uint64_t present, values, bytes_len, unset;
	uint64_t min_len, max_len, steps;
	int64_t int64_sum;
	double float_sum;
	uint32_t bytes_chain;
	unsigned kinds;		/* bit per pf_kind seen */
} agg;

typedef struct totals {
	agg a[64];
	int n;
} totals;

static agg *find(totals *t, const char *name, size_t len, bool list)
{
	for (int i = 0; i < t->n; i++)
		if (t->a[i].list == list && strlen(t->a[i].name) == len &&
		    !memcmp(t->a[i].name, name, len))
			return &t->a[i];
	cr_assert_lt(t->n, 64);
	agg *a = &t->a[t->n++];
	memset(a, 0, sizeof(*a));
	memcpy(a->name, name, len < 127 ? len : 127);
	a->list = list;
	a->min_len = UINT64_MAX;
	return a;
}

static void add_values(agg *a, const pf_feature *f)
{
	a->kinds |= 1u << f->kind;
	a->values += f->count;
	for (uint32_t i = 0; i < f->count; i++) {
		switch (f->kind) {
		case PF_KIND_INT64: a->int64_sum += f->v.int64s[i]; break;
		case PF_KIND_FLOAT: a->float_sum += (double)f->v.floats[i]; break;
		case PF_KIND_BYTES:
			a->bytes_len += f->v.bytes[i].len;
			a->bytes_chain = pf_crc32c(a->bytes_chain, f->v.bytes[i].data,
						   f->v.bytes[i].len);
			break;
		case PF_KIND_NONE: break;
		}
	}
}

static void add_example(totals *t, const pf_example *ex)
{
	for (uint32_t i = 0; i < ex->n_features; i++) {
		const pf_feature *f = &ex->features[i];
		agg *a = find(t, f->name, f->name_len, false);

		a->present++;
		if (f->kind == PF_KIND_NONE)
			a->unset++;
		add_values(a, f);
		if (f->count < a->min_len) a->min_len = f->count;
		if (f->count > a->max_len) a->max_len = f->count;
	}
	for (uint32_t i = 0; i < ex->n_lists; i++) {
		const pf_feature_list *l = &ex->lists[i];
		agg *a = find(t, l->name, l->name_len, true);

		a->present++;
		a->steps += l->steps;
		for (uint32_t s = 0; s < l->steps; s++) {
			add_values(a, &l->step[s]);
			if (l->step[s].count < a->min_len) a->min_len = l->step[s].count;
			if (l->step[s].count > a->max_len) a->max_len = l->step[s].count;
		}
	}
}

static void check_feature(const char *file, agg *a, json_t *gt)
{
	const char *type = json_string_value(json_object_get(gt, "type"));
	json_t *v;

	cr_assert_eq(a->present, ju(gt, "records_present"),
		     "%s %s: records_present", file, a->name);
	cr_assert_eq(a->values, ju(gt, "total_values"),
		     "%s %s: total_values", file, a->name);
	cr_assert_eq(a->min_len, ju(gt, "min_len"),
		     "%s %s: min_len", file, a->name);
	cr_assert_eq(a->max_len, ju(gt, "max_len"),
		     "%s %s: max_len", file, a->name);
	/* "float/none": some records have the Feature with no kind set. */
	cr_assert_eq(strstr(type, "none") != NULL, (a->kinds & 1u) != 0,
		     "%s %s: unset kinds (type %s)", file, a->name, type);
	if (strstr(type, "int64"))
		cr_assert(a->kinds & (1u << PF_KIND_INT64), "%s %s", file, a->name);
	if (strstr(type, "float"))
		cr_assert(a->kinds & (1u << PF_KIND_FLOAT), "%s %s", file, a->name);
	if (strstr(type, "bytes"))
		cr_assert(a->kinds & (1u << PF_KIND_BYTES), "%s %s", file, a->name);
	if ((v = json_object_get(gt, "int64_sum")))
		cr_assert_eq(a->int64_sum, (int64_t)json_integer_value(v), "%s %s: int64_sum",
			     file, a->name);
	if ((v = json_object_get(gt, "float_sum_f64"))) {
		double want = json_number_value(v);
		/* Recorded rounded to 1e-6. */
		cr_assert_leq(fabs(a->float_sum - want), 1e-6 + 1e-12 * fabs(want),
			      "%s %s: float sum %.9f vs %.9f", file, a->name,
			      a->float_sum, want);
	}
	if ((v = json_object_get(gt, "bytes_total_len")))
		cr_assert_eq(a->bytes_len, (uint64_t)json_integer_value(v), "%s %s", file, a->name);
	if ((v = json_object_get(gt, "bytes_crc32c_chain")))
		cr_assert_eq(a->bytes_chain, strtoul(json_string_value(v), NULL, 16),
			     "%s %s: bytes crc chain", file, a->name);
	if ((v = json_object_get(gt, "steps_total")))
		cr_assert_eq(a->steps, (uint64_t)json_integer_value(v), "%s %s", file, a->name);
}

static void check_features(const char *file, totals *t, json_t *obj, bool list)
{
	const char *key;
	json_t *gt;
	int seen = 0;

	if (!obj)
		return;
	json_object_foreach(obj, key, gt) {
		agg *a = find(t, key, strlen(key), list);
		check_feature(file, a, gt);
		seen++;
	}
	int ours = 0;
	for (int i = 0; i < t->n; i++)
		ours += t->a[i].list == list;
	cr_assert_eq(ours, seen, "%s: feature count", file);
}

static void check_fixture(const char *name, pf_source_config *cfg)
{
	char gtpath[1024];
	json_error_t jerr;
	json_t *gt, *records;
	pf_source *src;
	pf_record rec;
	pf_error err;
	pf_arena arena;
	totals t = { .n = 0 };
	uint64_t n = 0, payload = 0;
	uint32_t chain = 0;
	int ret;

	snprintf(gtpath, sizeof(gtpath), "%s/groundtruth/%s.json", PF_FIXTURES_DIR, name);
	gt = json_load_file(gtpath, 0, &jerr);
	cr_assert_not_null(gt, "%s: %s", gtpath, jerr.text);
	records = json_object_get(gt, "records");
	const char *msg = json_string_value(json_object_get(gt, "message_type"));
	bool is_seq = !strcmp(msg, "tf.train.SequenceExample");
	bool is_ex = !strcmp(msg, "tf.train.Example");

	cr_assert_eq(pf_arena_init(&arena, 1 << 20), 0);
	pf_error_clear(&err);
	cr_assert_eq(pf_source_open(&src, tu_fixture(name), cfg, &err), 0, "%s", err.msg);
	while ((ret = pf_source_next(src, &rec, &err)) == 1) {
		json_t *r = json_array_get(records, n);

		cr_assert_not_null(r, "%s: more records than recorded", name);
		cr_assert_eq(rec.offset, ju(r, "offset"),
			     "%s record %llu offset", name, (unsigned long long)n);
		cr_assert_eq(rec.len, ju(r, "length"));
		cr_assert_eq(rec.index, n);
		chain = pf_crc32c(chain, rec.data, rec.len);
		payload += rec.len;
		if (is_seq || is_ex) {
			pf_example ex;
			pf_arena_reset(&arena);
			if (is_seq)
				ret = pf_sequence_example_decode(rec.data, rec.len, &arena, &ex, &err);
			else
				ret = pf_example_decode(rec.data, rec.len, &arena, &ex, &err);
			cr_assert_eq(ret, 0, "%s record %llu: %s", name,
				     (unsigned long long)n, err.msg);
			add_example(&t, &ex);
		}
		n++;
	}
	cr_assert_eq(ret, 0, "%s: %s", name, err.msg);
	cr_assert_eq(n, ju(gt, "num_records"), "%s", name);
	cr_assert_eq(payload, ju(gt, "total_payload_bytes"));
	cr_assert_eq(chain, strtoul(json_string_value(json_object_get(gt,
		     "crc32c_chain_of_all_payloads")), NULL, 16), "%s: payload chain", name);
	cr_assert_eq(pf_source_bytes_out(src),
		     ju(gt, "uncompressed_size"));
	const char *comp = json_string_value(json_object_get(gt, "compression"));
	cr_assert_eq(pf_source_compression(src),
		     !strcmp(comp, "GZIP") ? PF_COMP_GZIP : PF_COMP_NONE, "%s", name);
	check_features(name, &t, json_object_get(gt, "features"), false);
	check_features(name, &t, json_object_get(gt, "context_features"), false);
	check_features(name, &t, json_object_get(gt, "feature_lists"), true);
	pf_source_close(src);
	pf_arena_release(&arena);
	json_decref(gt);
}

static const char *fixtures[] = {
	"grain_morris_sequence_first_5.tfrecord",
	"lingvo_wmt14_ende_wpm_32k_test.tfrecord",
	"tfx_chicago_taxi_unlabelled_00008.tfrecord.gz",
	"tfx_mnist_1000.tfrecord",
	"tfx_penguin_train.tfrecord.gz",
	"tfx_sequence_example_eval.tfrecord.gz",
};

Test(fixtures, morris_raw_records) { check_fixture(fixtures[0], NULL); }
Test(fixtures, lingvo_variable_lists) { check_fixture(fixtures[1], NULL); }
Test(fixtures, chicago_taxi_gzip_with_unset_features) { check_fixture(fixtures[2], NULL); }
Test(fixtures, mnist_packed_floats) { check_fixture(fixtures[3], NULL); }
Test(fixtures, penguin_gzip) { check_fixture(fixtures[4], NULL); }
Test(fixtures, sequence_example_gzip) { check_fixture(fixtures[5], NULL); }

Test(fixtures, small_reads_give_the_same_answers)
{
	pf_source_config cfg = { .read_size = 333 };

	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++)
		check_fixture(fixtures[i], &cfg);
}

Test(fixtures, idx_files_agree_with_record_offsets)
{
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		char idx[1024];
		pf_source *src;
		pf_record rec;
		pf_error err;
		unsigned long long off, total;
		const char *name = fixtures[i];
		bool gz = strstr(name, ".gz") != NULL;

		snprintf(idx, sizeof(idx), "%s/idx/%s%s", PF_FIXTURES_DIR, name,
			 gz ? ".uncompressed-stream.idx" : ".idx");
		FILE *f = fopen(idx, "r");
		cr_assert_not_null(f, "%s", idx);
		cr_assert_eq(pf_source_open(&src, tu_fixture(name), NULL, &err), 0);
		while (fscanf(f, "%llu %llu", &off, &total) == 2) {
			cr_assert_eq(pf_source_next(src, &rec, &err), 1, "%s", name);
			cr_assert_eq(rec.offset, off, "%s", name);
			cr_assert_eq(rec.len + PF_TFR_OVERHEAD, total, "%s", name);
		}
		cr_assert_eq(pf_source_next(src, &rec, &err), 0, "%s: extra records", name);
		pf_source_close(src);
		fclose(f);
	}
}

Test(fixtures, missing_file_is_named)
{
	pf_source *src;
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_source_open(&src, "/nonexistent/x.tfrecord", NULL, &err), -ENOENT);
	cr_assert_str_eq(err.file, "/nonexistent/x.tfrecord");
	cr_assert(strstr(err.msg, "cannot open"), "%s", err.msg);
}
