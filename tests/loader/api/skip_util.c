/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers of the skip and records-of tests: skip_util.h. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "skip_util.h"

static void keep(sk_steps *s, const pf_batch *b)
{
	uint32_t crc = 0, hb = b->cores * b->per_core_batch;

	cr_assert_lt(s->n, SK_MAX_STEPS);
	s->host_batch = hb;
	s->per_core_batch = b->per_core_batch;
	s->ids = realloc(s->ids, (s->n + 1) * hb * sizeof(*s->ids));
	cr_assert_not_null(s->ids);
	for (uint32_t c = 0; c < b->cores; c++) {
		const pf_core_batch *cb = &b->core[c];

		for (uint32_t t = 0; t < cb->ntensors; t++)
			crc = pf_crc32c(crc, cb->tensors[t].data, (size_t)b->per_core_batch *
					cb->tensors[t].len * pf_dtype_size(cb->tensors[t].dtype));
		for (uint32_t i = 0; i < b->per_core_batch; i++)
			s->ids[s->n * hb + c * b->per_core_batch + i] =
				cb->ntensors && cb->tensors[0].dtype == PF_DTYPE_INT64 &&
				cb->valid[i] ? ((const int64_t *)cb->tensors[0].data)[i] : -1;
	}
	/* Packed: every step's first two tensors kept (the first packed
	 * feature and its segment ids), each core's rows in turn. */
	if (s->keep_rows && b->core[0].ntensors >= 2) {
		size_t row = (size_t)b->core[0].tensors[0].len * sizeof(int32_t);
		size_t step = (size_t)b->cores * b->per_core_batch * row;

		s->row_len = b->core[0].tensors[0].len;
		s->values = realloc(s->values, (s->n + 1) * step);
		s->segs = realloc(s->segs, (s->n + 1) * step);
		cr_assert(s->values && s->segs);
		for (uint32_t c = 0; c < b->cores; c++) {
			memcpy((uint8_t *)s->values + s->n * step + c * b->per_core_batch * row,
			       b->core[c].tensors[0].data, b->per_core_batch * row);
			memcpy((uint8_t *)s->segs + s->n * step + c * b->per_core_batch * row,
			       b->core[c].tensors[1].data, b->per_core_batch * row);
		}
	}
	s->crc[s->n] = crc;
	s->global[s->n] = b->global_step;
	s->epoch[s->n] = b->epoch;
	s->step[s->n] = b->step;
	s->n++;
}

static pf_state_blob *blobs_of(const sk_blob *from, size_t nfrom)
{
	pf_state_blob *sb = calloc(nfrom + 1, sizeof(*sb));

	cr_assert_not_null(sb);
	for (size_t i = 0; i < nfrom; i++)
		sb[i] = (pf_state_blob){ from[i].data, from[i].len };
	return sb;
}

sk_blob sk_run(pf_loader_config cfg, const sk_blob *from, size_t nfrom, uint64_t skip,
	       uint64_t max, sk_steps *s)
{
	pf_state_blob *sb = blobs_of(from, nfrom);
	sk_blob out = { NULL, 0 };
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	int64_t n;
	int ret = 0;

	if (s) {
		bool rows = s->keep_rows;

		sk_steps_free(s);
		memset(s, 0, sizeof(*s));
		s->keep_rows = rows;
	}
	cfg.max_steps = max == SK_ALL ? 0 : max;
	cfg.resume = nfrom ? sb : NULL;
	cfg.nresume = nfrom;
	cfg.skip_steps = skip;
	pf_error_clear(&err);
	ret = pf_loader_create(&l, &cfg, &err);
	cr_assert_eq(ret, 0, "create (skip %llu): %s", (unsigned long long)skip, err.msg);
	while (max && (ret = pf_loader_next(l, &b)) == 1) {
		if (s)
			keep(s, b);
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "next: %s", ret < 0 ? pf_loader_last_error(l)->msg : "");
	if (s)
		pf_loader_get_metrics(l, &s->m);
	n = pf_loader_save_state(l, NULL, 0);
	cr_assert_gt(n, 0);
	out.data = malloc((size_t)n);
	cr_assert_not_null(out.data);
	cr_assert_eq(pf_loader_save_state(l, out.data, (size_t)n), n);
	out.len = (size_t)n;
	pf_loader_free(l);
	free(sb);
	return out;
}

int sk_create_fails(pf_loader_config cfg, const sk_blob *from, size_t nfrom, uint64_t skip,
		    pf_error *err)
{
	pf_state_blob *sb = blobs_of(from, nfrom);
	pf_loader *l = NULL;
	int ret;

	cfg.resume = nfrom ? sb : NULL;
	cfg.nresume = nfrom;
	cfg.skip_steps = skip;
	pf_error_clear(err);
	ret = pf_loader_create(&l, &cfg, err);
	if (ret == 0)
		pf_loader_free(l);
	free(sb);
	return ret;
}

void sk_expect_same(const sk_steps *a, uint64_t at, const sk_steps *b, const char *what)
{
	cr_assert_eq(at + b->n, a->n, "%s: %llu steps from step %llu, the run never stopped "
		     "has %llu", what, (unsigned long long)b->n, (unsigned long long)at,
		     (unsigned long long)a->n);
	for (uint64_t j = 0; j < b->n; j++) {
		cr_assert_eq(b->global[j], a->global[at + j], "%s: step %llu's global step",
			     what, (unsigned long long)j);
		cr_assert_eq(b->epoch[j], a->epoch[at + j], "%s: step %llu's epoch", what,
			     (unsigned long long)j);
		cr_assert_eq(b->step[j], a->step[at + j], "%s: step %llu's step in epoch",
			     what, (unsigned long long)j);
		cr_assert_eq(b->crc[j], a->crc[at + j], "%s: global step %llu differs from "
			     "the run never stopped", what, (unsigned long long)b->global[j]);
	}
}

void sk_steps_free(sk_steps *s)
{
	free(s->ids);
	free(s->values);
	free(s->segs);
	s->ids = NULL;
	s->values = s->segs = NULL;
}

/* Record `record` of the file at path (valid until the next call). */
static pf_record read_record(const char *path, uint64_t record)
{
	static pf_source *src;
	static char open_path[4096];
	static uint64_t next;
	pf_record rec;
	pf_error err;

	pf_error_clear(&err);
	if (!src || strcmp(open_path, path) || record < next) {
		pf_source_close(src);
		src = NULL;
		cr_assert_eq(pf_source_open(&src, path, NULL, &err), 0, "%s: %s", path, err.msg);
		snprintf(open_path, sizeof(open_path), "%s", path);
		next = 0;
	}
	if (record != next && pf_source_seek_record(src, record) == 0)
		next = record;
	for (;;) {
		cr_assert_eq(pf_source_next(src, &rec, &err), 1, "%s record %llu: %s", path,
			     (unsigned long long)record, err.msg);
		if (next++ == record)
			break;
	}
	return rec;
}

int64_t sk_record_id(const char *path, uint64_t record)
{
	pf_record rec = read_record(path, record);
	pf_arena arena = { 0 };
	int64_t id = -1;
	uint8_t *dst[1] = { (uint8_t *)&id };
	pf_spec spec;
	pf_error err;

	cr_assert_eq(pf_spec_parse(&spec, "id:int64[1]", &err), 0);
	cr_assert_eq(pf_arena_init(&arena, PF_ARENA_BYTES_FOR(rec.len)), 0);
	cr_assert_eq(pf_spec_decode(&spec, rec.data, (size_t)rec.len, &arena, dst, &err), 0,
		     "%s", err.msg);
	pf_arena_release(&arena);
	return id;
}

void sk_expect_records(const pf_loader *l, const sk_steps *s, const char *what)
{
	pf_record_ref *refs = calloc(s->host_batch, sizeof(*refs));
	pf_error err;

	cr_assert_not_null(refs);
	for (uint64_t j = 0; j < s->n; j++) {
		int64_t n = pf_loader_records_of(l, s->global[j], refs, s->host_batch, &err);

		cr_assert_eq(n, s->host_batch, "%s: step %llu: %s", what,
			     (unsigned long long)s->global[j], n < 0 ? err.msg : "");
		for (uint32_t i = 0; i < s->host_batch; i++) {
			const pf_record_ref *r = &refs[i];
			const char *path = pf_loader_file(l, r->source, r->file);
			cr_assert_not_null(path);
			cr_assert_eq(r->core * s->per_core_batch + r->row, i, "%s: ref %u is core %u "
				     "row %u", what, i, r->core, r->row);
			/* A mixture's ref says its source's epoch; its step is the
			 * mixture's. */
			if (!pf_loader_sources(l))
				cr_assert_eq(r->epoch, s->epoch[j], "%s: step %llu's epoch", what,
					     (unsigned long long)s->global[j]);
			cr_assert_eq(r->step, s->step[j]);
			cr_assert_eq(sk_record_id(path, r->record), s->ids[j * s->host_batch + i],
				     "%s: global step %llu core %u row %u: %s record %llu holds "
				     "id %lld, the run delivered %lld", what,
				     (unsigned long long)s->global[j], r->core, r->row, path,
				     (unsigned long long)r->record,
				     (long long)sk_record_id(path, r->record),
				     (long long)s->ids[j * s->host_batch + i]);
		}
	}
	free(refs);
}

uint32_t sk_record_values(const char *path, uint64_t record, const char *feature,
			  int64_t *out, uint32_t cap)
{
	pf_record rec = read_record(path, record);
	pf_arena arena = { 0 };
	const pf_feature *f;
	pf_example ex;
	pf_error err;
	uint32_t n, len;

	cr_assert_eq(pf_arena_init(&arena, PF_ARENA_BYTES_FOR(rec.len)), 0);
	cr_assert_eq(pf_example_decode(rec.data, (size_t)rec.len, &arena, &ex, &err), 0, "%s",
		     err.msg);
	f = pf_example_find(&ex, feature);
	cr_assert_not_null(f, "%s record %llu has no %s", path, (unsigned long long)record,
			   feature);
	cr_assert_eq(f->kind, PF_KIND_INT64);
	len = f->count;
	n = len < cap ? len : cap;
	memcpy(out, f->v.int64s, n * sizeof(*out));
	pf_arena_release(&arena); /* f lives in the arena: read it before */
	return len;
}

void sk_expect_packed(const pf_loader *l, const sk_steps *s, const char *feature,
		      const char *what)
{
	size_t cap = 1024;
	pf_record_ref *refs = calloc(cap, sizeof(*refs));
	int64_t *vals = calloc(1u << 16, sizeof(*vals));
	size_t step_ints = (size_t)s->host_batch * s->row_len;
	pf_error err;

	cr_assert(refs && vals && s->values);
	for (uint64_t j = 0; j < s->n; j++) {
		int64_t n = pf_loader_records_of(l, s->global[j], refs, cap, &err);
		const int32_t *v = s->values + j * step_ints, *sg = s->segs + j * step_ints;
		uint64_t covered = 0, filled = 0;

		cr_assert_gt(n, 0, "%s: step %llu: %s", what, (unsigned long long)s->global[j],
			     n < 0 ? err.msg : "no pieces");
		cr_assert_leq((size_t)n, cap);
		for (int64_t i = 0; i < n; i++) {
			const pf_record_ref *r = &refs[i];
			const char *path = pf_loader_file(l, r->source, r->file);
			size_t row = (size_t)r->core * s->per_core_batch + r->row;
			uint32_t len = sk_record_values(path, r->record, feature, vals, 1u << 16);

			/* (A packed mixture's piece says its source's epoch.) */
			if (!pf_loader_sources(l))
				cr_assert_eq(r->epoch, s->epoch[j]);
			cr_assert_eq(r->step, s->step[j]);
			cr_assert_leq(r->from + r->count, len);
			cr_assert_leq(r->at + r->count, s->row_len);
			for (uint32_t k = 0; k < r->count; k++) {
				cr_assert_eq(v[row * s->row_len + r->at + k], (int32_t)vals[r->from + k],
					     "%s: step %llu core %u row %u value %u: %s record %llu "
					     "[%u]", what, (unsigned long long)s->global[j], r->core,
					     r->row, r->at + k, path, (unsigned long long)r->record,
					     r->from + k);
				cr_assert_eq(sg[row * s->row_len + r->at + k], (int32_t)r->segment);
			}
			covered += r->count;
		}
		/* Every value of the step's rows is a piece's: none unnamed. */
		for (size_t k = 0; k < step_ints; k++)
			filled += sg[k] != 0;
		cr_assert_eq(covered, filled, "%s: step %llu: the pieces name %llu values, the "
			     "rows hold %llu", what, (unsigned long long)s->global[j],
			     (unsigned long long)covered, (unsigned long long)filled);
	}
	free(refs);
	free(vals);
}
