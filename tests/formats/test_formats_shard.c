/* SPDX-License-Identifier: Apache-2.0 */
/* Indexed shards: the writer, the index parser and frame decoding on shards
 * as the writer makes them (damaged ones: test_formats_shard_bad.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"
#include "pf_formats.h"
#include "pf_index.pb-c.h"
#include "shard_util.h"
#include "testutil.h"


/* ------------------------------------------------------------------ */
/* Round trips                                                          */
/* ------------------------------------------------------------------ */

Test(shard, synthetic_default_frames)
{
	struct recset rs = { 0 };
	struct membuf m;
	pf_shard_index *ix;

	synth_records(&rs, 3000, 2000, 42);
	roundtrip(&rs, NULL, &m, &ix);
	cr_assert_geq(pf_shard_index_frames(ix), 2);
	cr_assert_eq(pf_shard_index_alignment(ix), 0);
	for (uint32_t i = 0; i < pf_shard_index_frames(ix); i++)
		cr_assert_leq(pf_shard_index_frame(ix, i)->uncompressed_size,
			      PF_SHARD_FRAME_DEFAULT);
	pf_shard_index_free(ix);
	check_zstd_cli(m.data, m.len, &rs);
	free(m.data);
	recset_free(&rs);
}

Test(shard, tiny_frames_one_record_each)
{
	struct recset rs = { 0 };
	pf_shard_writer_config cfg = { .frame_size = 1 };
	struct membuf m;
	pf_shard_index *ix;

	synth_records(&rs, 200, 300, 7);
	roundtrip(&rs, &cfg, &m, &ix);
	cr_assert_eq(pf_shard_index_frames(ix), 200);
	for (uint32_t i = 0; i < 200; i++) {
		CHECK(pf_shard_index_frame(ix, i)->records == 1, "frame %u", i);
		CHECK(pf_shard_index_frame(ix, i)->first_record == i, "frame %u", i);
	}
	pf_shard_index_free(ix);
	check_zstd_cli(m.data, m.len, &rs);
	free(m.data);
	recset_free(&rs);
}

Test(shard, record_larger_than_frame)
{
	struct recset rs = { 0 };
	pf_shard_writer_config cfg = { .frame_size = 4096 };
	struct membuf m;
	pf_shard_index *ix;
	uint8_t *big = malloc(100000);
	int found = 0;

	random_bytes(big, 100000, 9);
	synth_records(&rs, 50, 200, 3);
	recset_add(&rs, big, 100000);
	synth_records(&rs, 50, 200, 4);
	roundtrip(&rs, &cfg, &m, &ix);
	for (uint32_t i = 0; i < pf_shard_index_frames(ix); i++) {
		const pf_frame_info *fi = pf_shard_index_frame(ix, i);

		if (fi->uncompressed_size > 4096) {
			cr_assert_eq(fi->records, 1);
			cr_assert_eq(fi->first_record, 50);
			cr_assert_eq(fi->uncompressed_size, 100000 + PF_TFR_OVERHEAD);
			found++;
		}
	}
	cr_assert_eq(found, 1);
	pf_shard_index_free(ix);
	check_zstd_cli(m.data, m.len, &rs);
	free(big);
	free(m.data);
	recset_free(&rs);
}

Test(shard, mnist_fixture)
{
	struct recset rs = { 0 };
	pf_shard_writer_config small = { .frame_size = 64 << 10, .level = 1 };
	struct membuf m;
	pf_shard_index *ix;

	fixture_records(&rs, "tfx_mnist_1000.tfrecord");
	cr_assert_eq(rs.n, 1000);
	roundtrip(&rs, NULL, &m, NULL);
	check_zstd_cli(m.data, m.len, &rs);
	free(m.data);
	roundtrip(&rs, &small, &m, &ix);
	cr_assert_gt(pf_shard_index_frames(ix), 5);
	pf_shard_index_free(ix);
	free(m.data);
	recset_free(&rs);
}

Test(shard, aligned_frames)
{
	struct recset rs = { 0 };
	pf_shard_writer_config cfg = { .frame_size = 32 << 10, .align = 4096 };
	struct membuf m;
	pf_shard_index *ix;

	fixture_records(&rs, "tfx_mnist_1000.tfrecord");
	roundtrip(&rs, &cfg, &m, &ix);
	cr_assert_eq(pf_shard_index_alignment(ix), 4096);
	cr_assert_gt(pf_shard_index_frames(ix), 5);
	for (uint32_t i = 0; i < pf_shard_index_frames(ix); i++)
		CHECK(pf_shard_index_frame(ix, i)->offset % 4096 == 0,
			     "frame %u at %llu", i,
			     (unsigned long long)pf_shard_index_frame(ix, i)->offset);
	pf_shard_index_free(ix);
	check_zstd_cli(m.data, m.len, &rs);
	free(m.data);
	recset_free(&rs);
}

/*
 * Incompressible records make frames whose size we steer, so the gaps
 * before the next boundary cover 0 (no padding) and 1..7 (too small for a
 * skippable frame: padding reaches the boundary after).
 */
Test(shard, aligned_small_gaps)
{
	bool saw_zero = false, saw_small = false;
	uint8_t *rec = malloc(8192);

	for (size_t len = 4040; len <= 4090; len++) {
		struct recset rs = { 0 };
		pf_shard_writer_config cfg = { .frame_size = 1, .align = 4096 };
		struct membuf m;
		pf_shard_index *ix;
		const pf_frame_info *f0, *f1;
		uint64_t gap;

		random_bytes(rec, len, len);
		recset_add(&rs, rec, len);
		recset_add(&rs, rec, 100);
		roundtrip(&rs, &cfg, &m, &ix);
		f0 = pf_shard_index_frame(ix, 0);
		f1 = pf_shard_index_frame(ix, 1);
		cr_assert_eq(f1->offset % 4096, 0);
		gap = 4096 - f0->compressed_size % 4096;
		if (gap == 4096) {
			saw_zero = true;
			cr_assert_eq(f1->offset, f0->compressed_size);
		} else if (gap < 8) {
			saw_small = true;
			cr_assert_eq(f1->offset, f0->compressed_size + gap + 4096);
			check_zstd_cli(m.data, m.len, &rs);
		}
		pf_shard_index_free(ix);
		free(m.data);
		recset_free(&rs);
	}
	cr_assert(saw_zero && saw_small, "frame sizes did not cover the edge gaps");
	free(rec);
}

Test(shard, empty_shard)
{
	struct recset rs = { 0 };
	pf_shard_writer_config cfg = { .align = 4096 };
	struct membuf m;
	pf_shard_index *ix;

	roundtrip(&rs, NULL, &m, &ix);
	cr_assert_eq(pf_shard_index_frames(ix), 0);
	cr_assert_eq(pf_shard_index_records(ix), 0);
	cr_assert_eq(pf_shard_index_data_end(ix), 0);
	cr_assert_eq(pf_shard_index_find_record(ix, 0), -1);
	cr_assert_null(pf_shard_index_frame(ix, 0));
	pf_shard_index_free(ix);
	check_zstd_cli(m.data, m.len, &rs);
	free(m.data);
	roundtrip(&rs, &cfg, &m, NULL);
	free(m.data);
}

Test(shard, empty_records)
{
	struct recset rs = { 0 };
	struct membuf m;

	for (int i = 0; i < 100; i++)
		recset_add(&rs, "", 0);
	roundtrip(&rs, NULL, &m, NULL);
	check_zstd_cli(m.data, m.len, &rs);
	free(m.data);
	/* (NULL, 0) is an empty record too. */
	{
		pf_shard_writer *w;
		pf_shard_index *ix;

		memset(&m, 0, sizeof(m));
		cr_assert_eq(pf_shard_writer_create(&w, NULL, mem_write, &m), 0);
		cr_assert_eq(pf_shard_writer_add(w, NULL, 0, NULL), 0);
		cr_assert_eq(pf_shard_writer_close(w, NULL), 0);
		pf_shard_writer_free(w);
		ix = parse_ok(m.data, m.len);
		cr_assert_eq(pf_shard_index_records(ix), 1);
		cr_assert_eq(pf_shard_index_uncompressed_bytes(ix), PF_TFR_OVERHEAD);
		pf_shard_index_free(ix);
	}
	free(m.data);
	recset_free(&rs);
}

Test(shard, tail_protocol)
{
	struct recset rs = { 0 };
	pf_shard_writer_config cfg = { .frame_size = 1 };
	struct membuf m;
	pf_shard_index *ix = NULL;
	pf_error err;
	int64_t rc;

	/* 5000 frames: index and seek table are well over 17 bytes. */
	synth_records(&rs, 5000, 20, 11);
	write_shard(&m, &rs, &cfg, NULL);
	rc = pf_shard_index_parse(&ix, m.data + m.len - 17, 17, m.len, &err);
	cr_assert_eq(rc, 8 + 5000 * 8 + 9 + 12);	/* and a version 2 trailer */
	rc = pf_shard_index_parse(&ix, m.data + m.len - rc, (size_t)rc, m.len, &err);
	cr_assert_gt(rc, 8 + 5000 * 8 + 9 + 8);
	rc = pf_shard_index_parse(&ix, m.data + m.len - rc, (size_t)rc, m.len, &err);
	cr_assert_eq(rc, 0, "%s", err.msg);
	pf_shard_index_free(ix);
	/* The hint is enough for a small shard. */
	rc = parse_tail(&ix, m.data, m.len, PF_SHARD_TAIL_HINT, &err);
	cr_assert_eq(rc, 0);
	pf_shard_index_free(ix);
	/* Shorter than the footer. */
	rc = pf_shard_index_parse(&ix, m.data + m.len - 3, 3, m.len, &err);
	cr_assert_eq(rc, 17);
	cr_assert_eq(pf_shard_index_parse(&ix, m.data, m.len, m.len - 1, &err), -EINVAL);
	free(m.data);
	recset_free(&rs);
}

Test(shard, schema_in_index)
{
	struct recset rs = { 0 };
	struct membuf m;
	pf_schema *s;
	pf_shard_index *ix;
	int64_t vals[3] = { 1, 2, 3 };
	float fl[2] = { 1.5f, 2.5f };
	pf_feature feats[2] = {
		{ .name = "label", .name_len = 5, .kind = PF_KIND_INT64,
		  .count = 3, .v.int64s = vals },
		{ .name = "weight", .name_len = 6, .kind = PF_KIND_FLOAT,
		  .count = 2, .v.floats = fl },
	};
	pf_example ex = { .features = feats, .n_features = 2 };

	cr_assert_eq(pf_schema_create(&s), 0);
	cr_assert_eq(pf_schema_add(s, &ex), 0);
	ex.n_features = 1;
	feats[0].count = 1;
	cr_assert_eq(pf_schema_add(s, &ex), 0);
	synth_records(&rs, 10, 100, 5);
	write_shard(&m, &rs, NULL, s);
	ix = parse_ok(m.data, m.len);
	cr_assert_eq(pf_shard_index_schema_count(ix), pf_schema_count(s));
	cr_assert_gt(pf_schema_count(s), 0);
	for (size_t i = 0; i < pf_schema_count(s); i++) {
		const pf_feature_schema *a = pf_schema_get(s, i);
		const pf_feature_schema *b = pf_shard_index_schema(ix, i);

		cr_assert_str_eq(a->name, b->name);
		cr_assert_eq(a->kind, b->kind);
		cr_assert_eq(a->is_list, b->is_list);
		cr_assert_eq(a->records_present, b->records_present);
		cr_assert_eq(a->records_unset, b->records_unset);
		cr_assert_eq(a->total_values, b->total_values);
		cr_assert_eq(a->min_len, b->min_len);
		cr_assert_eq(a->max_len, b->max_len);
	}
	cr_assert_null(pf_shard_index_schema(ix, pf_schema_count(s)));
	pf_shard_index_free(ix);
	pf_schema_free(s);
	free(m.data);
	recset_free(&rs);
}

/* ------------------------------------------------------------------ */
/* Writer errors                                                        */
/* ------------------------------------------------------------------ */

Test(shard, writer_bad_config)
{
	pf_shard_writer *w;
	struct membuf m = { 0 };
	pf_shard_writer_config bad_align = { .align = 1000 };
	pf_shard_writer_config small_align = { .align = 2048 };
	pf_shard_writer_config bad_level = { .level = 1000 };

	cr_assert_eq(pf_shard_writer_create(&w, &bad_align, mem_write, &m), -EINVAL);
	cr_assert_eq(pf_shard_writer_create(&w, &small_align, mem_write, &m), -EINVAL);
	cr_assert_eq(pf_shard_writer_create(&w, &bad_level, mem_write, &m), -EINVAL);
	cr_assert_eq(pf_shard_writer_create(&w, NULL, NULL, &m), -EINVAL);
	pf_shard_writer_free(NULL);
}

Test(shard, writer_record_too_large)
{
	pf_shard_writer *w;
	struct membuf m = { 0 };
	pf_shard_writer_config cfg = { .max_record_size = 100 };
	uint8_t rec[101] = { 0 };
	pf_error err;
	pf_shard_index *ix;

	pf_error_clear(&err);
	cr_assert_eq(pf_shard_writer_create(&w, &cfg, mem_write, &m), 0);
	cr_assert_eq(pf_shard_writer_add(w, rec, 101, &err), -EFBIG);
	cr_assert_eq(pf_shard_writer_add(w, rec, 100, &err), 0);
	cr_assert_eq(pf_shard_writer_close(w, &err), 0);
	pf_shard_writer_free(w);
	ix = parse_ok(m.data, m.len);
	cr_assert_eq(pf_shard_index_records(ix), 1);
	pf_shard_index_free(ix);
	free(m.data);
}

Test(shard, writer_sink_failure)
{
	struct recset rs = { 0 };
	pf_shard_writer_config cfg = { .frame_size = 1000 };

	synth_records(&rs, 100, 100, 2);
	/* Fail each write in turn: the error comes back and sticks. */
	for (int fail = 1; fail < 40; fail++) {
		pf_shard_writer *w;
		struct membuf m = { .fail_after = fail };
		pf_error err;
		int ret = 0;

		pf_error_clear(&err);
		cr_assert_eq(pf_shard_writer_create(&w, &cfg, mem_write, &m), 0);
		for (size_t i = 0; i < rs.n && !ret; i++)
			ret = pf_shard_writer_add(w, rs.data[i], rs.len[i], &err);
		if (!ret)
			ret = pf_shard_writer_close(w, &err);
		if (m.writes >= fail) {
			cr_assert_eq(ret, -EIO, "write %d", fail);
			cr_assert_eq(err.code, -EIO);
			cr_assert_eq(pf_shard_writer_close(w, &err), -EIO);
		}
		pf_shard_writer_free(w);
		free(m.data);
	}
	recset_free(&rs);
}

