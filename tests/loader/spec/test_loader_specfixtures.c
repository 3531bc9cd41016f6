/* SPDX-License-Identifier: Apache-2.0 */
/* pf_spec_decode() against pf_example_decode() + pf_spec_apply_to(), byte
 * for byte, on every SIMD path, over TensorFlow's own records (the
 * fixtures), with specs made to fit each record and specs of any dtype.
 * Hand-made, random and damaged records are test_loader_specdecode.c's. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "formats_internal.h"
#include "specdecode_util.h"
#include "testutil.h"

static bool spec_name_ok(const char *name, uint32_t len)
{
	if (!len || len >= PF_SPEC_MAX_NAME)
		return false;
	for (uint32_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '/' || c == '-'))
			return false;
	}
	return true;
}

/* A spec over the record's own features, dtypes fitting their kinds. */
static pf_spec *spec_for(sd_rng *r, const pf_example *ex, bool any_dtype)
{
	char text[4096];
	size_t o = 0;

	for (uint32_t i = 0; i < ex->n_features && i < 12; i++) {
		const pf_feature *f = &ex->features[i];
		const char *dt;
		unsigned len = 1 + (unsigned)(sd_next(r) % (f->count * 2 + 2));

		if (!spec_name_ok(f->name, f->name_len))
			continue;
		if (any_dtype) {
			static const char *const d[] = { "int32", "int64", "float32", "bytes" };
			dt = d[sd_next(r) % 4];
		} else if (f->kind == PF_KIND_BYTES) {
			dt = "bytes";
		} else if (f->kind == PF_KIND_FLOAT) {
			dt = sd_next(r) % 2 ? "float32" : "int32";
		} else {
			dt = sd_next(r) % 3 == 0 ? "float32" : sd_next(r) % 2 ? "int64" : "int32";
		}
		if (o + f->name_len + 64 > sizeof(text))
			break;
		o += (size_t)snprintf(text + o, sizeof(text) - o, "%s%.*s:%s[%u]",
				      o ? "," : "", (int)f->name_len, f->name, dt, len);
	}
	o += (size_t)snprintf(text + o, sizeof(text) - o, "%sabsent_feature:int32[2]:pad=-1",
			      o ? "," : "");
	return sd_spec_of(text);
}

static const char *fixture_files[] = {
	"tfx_mnist_1000.tfrecord",
	"tfx_penguin_train.tfrecord.gz",
	"tfx_chicago_taxi_unlabelled_00008.tfrecord.gz",
	"lingvo_wmt14_ende_wpm_32k_test.tfrecord",
	"grain_morris_sequence_first_5.tfrecord",
	"tfx_sequence_example_eval.tfrecord.gz",
};

Test(specdecode, fixtures, .timeout = 240)
{
	sd_rng r = { 3 };

	for (size_t k = 0; k < sizeof(fixture_files) / sizeof(fixture_files[0]); k++) {
		pf_source *src;
		pf_record rec;
		pf_error err;
		pf_arena a;
		unsigned n = 0, fast_ok = 0;
		int ret;

		pf_error_clear(&err);
		cr_assert_eq(pf_source_open(&src, tu_fixture(fixture_files[k]), NULL, &err),
			     0, "%s", err.msg);
		cr_assert_eq(pf_arena_init(&a, 1u << 24), 0);
		while ((ret = pf_source_next(src, &rec, &err)) == 1) {
			pf_example ex;
			uint8_t *copy = malloc(rec.len ? rec.len : 1);
			char what[256];

			/* Every record for the small files, one in 7 of mnist. */
			if (n++ % 7 && !strcmp(fixture_files[k], "tfx_mnist_1000.tfrecord")) {
				free(copy);
				continue;
			}
			memcpy(copy, rec.data, rec.len);
			pf_arena_reset(&a);
			if (pf_example_decode(copy, rec.len, &a, &ex, &err) == 0) {
				for (int s = 0; s < 3; s++) {
					pf_spec *spec = spec_for(&r, &ex, s == 2);

					snprintf(what, sizeof(what), "%s record %llu spec %d",
						 fixture_files[k], (unsigned long long)rec.index, s);
					fast_ok += sd_compare(spec, copy, rec.len, what) == 0 &&
						   s < 2;
					free(spec);
				}
			} else {
				pf_spec *spec = sd_spec_of("x:int32[2]");

				sd_compare(spec, copy, rec.len, fixture_files[k]);
				free(spec);
			}
			free(copy);
		}
		cr_assert_eq(ret, 0, "%s: %s", fixture_files[k], err.msg);
		cr_log_info("%s: %u records, %u decoded with fitting specs",
			    fixture_files[k], n, fast_ok);
		pf_arena_release(&a);
		pf_source_close(src);
	}
	cr_assert_gt(sd_compared, 0);
}
