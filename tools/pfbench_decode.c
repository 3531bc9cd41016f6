/* SPDX-License-Identifier: Apache-2.0 */
/* pfbench specdecode and varint: decoding tf.train.Example records into
 * tensors, and the varint paths alone. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "cli.h"
#include "formats_internal.h"
#include "pfbench.h"

const char *const default_specs[] = {
	"tokens:int32[512],label:int32[1]",
	"tokens:int64[512],label:int64[1]",
};

/* The varint paths this CPU has, best first. */
static int simd_paths(const char *names[4])
{
	static const char *const all[] = { "avx512", "avx2", "scalar" };
	int n = 0;

	for (int i = 0; i < 3; i++)
		if (pf_varint_set_impl(all[i]) == 0)
			names[n++] = all[i];
	return n;
}

/* The records packed into zstd frames of about 1 MiB of whole records
 * (as an indexed shard holds them), for the decompression yardstick and
 * the pipeline: frame i holds records [first[i], first[i + 1]). */
typedef struct zframes {
	uint8_t *data;
	size_t *off, *csize, *dsize, *first;
	size_t n, max_dsize;
} zframes;

static int zstd_frames(const recset *rs, zframes *z)
{
	size_t cap = ZSTD_compressBound(rs->len) + rs->len / 4096 + 64;
	size_t at = 0, nmax = rs->len / (1u << 20) + 2;

	memset(z, 0, sizeof(*z));
	z->data = malloc(cap);
	z->off = calloc(nmax, sizeof(size_t));
	z->csize = calloc(nmax, sizeof(size_t));
	z->dsize = calloc(nmax, sizeof(size_t));
	z->first = calloc(nmax + 1, sizeof(size_t));
	if (!z->data || !z->off || !z->csize || !z->dsize || !z->first)
		return -ENOMEM;
	for (size_t r = 0; r < rs->n; ) {
		size_t from = rs->off[r], len = 0, r0 = r, c;

		while (r < rs->n && (len < (1u << 20) || r == r0))
			len += rs->rlen[r++];
		if (z->n == nmax)
			return -EIO;
		c = ZSTD_compress(z->data + at, cap - at, rs->data + from, len, 3);
		if (ZSTD_isError(c))
			return -EIO;
		z->off[z->n] = at;
		z->csize[z->n] = c;
		z->dsize[z->n] = len;
		z->first[z->n] = r0;
		if (len > z->max_dsize)
			z->max_dsize = len;
		z->n++;
		z->first[z->n] = r;
		at += c;
	}
	return 0;
}

static double time_zstd(const zframes *z, ZSTD_DCtx *dctx, uint8_t *out)
{
	double t0 = bench_now();

	for (size_t i = 0; i < z->n; i++)
		if (ZSTD_decompressDCtx(dctx, out, z->max_dsize, z->data + z->off[i],
					z->csize[i]) != z->dsize[i])
			return -1;
	return bench_now() - t0;
}

/* Destinations: a batch of `bench_rows` rows per feature, as the
 * loader's tensors; record i goes to row i % bench_rows.  256 rows of
 * int64[512] (1 MiB) stay in L2, as the loader's ~128 MiB of batch slots
 * do not: --rows says how many. */
size_t bench_rows = 256;

static double time_fast(const pf_spec *spec, const recset *rs, pf_arena *arena,
			uint8_t **tensor, int *bad)
{
	uint8_t *dst[PF_SPEC_MAX_FEATURES];
	double t0 = bench_now();

	for (size_t i = 0; i < rs->n; i++) {
		pf_error err;

		for (uint32_t k = 0; k < spec->n; k++)
			dst[k] = tensor[k] + (i % bench_rows) * spec->f[k].len *
					     pf_dtype_size(spec->f[k].dtype);
		if (pf_spec_decode(spec, rs->data + rs->off[i], rs->rlen[i], arena,
				   dst, &err) < 0)
			(*bad)++;
	}
	return bench_now() - t0;
}

static double time_slow(const pf_spec *spec, const recset *rs, pf_arena *arena,
			uint8_t **tensor, int *bad)
{
	uint8_t *dst[PF_SPEC_MAX_FEATURES];
	double t0 = bench_now();

	for (size_t i = 0; i < rs->n; i++) {
		pf_example ex;
		pf_error err;

		for (uint32_t k = 0; k < spec->n; k++)
			dst[k] = tensor[k] + (i % bench_rows) * spec->f[k].len *
					     pf_dtype_size(spec->f[k].dtype);
		pf_arena_reset(arena);
		if (pf_example_decode(rs->data + rs->off[i], rs->rlen[i], arena,
				      &ex, &err) < 0 ||
		    pf_spec_apply_to(spec, &ex, dst, &err) < 0)
			(*bad)++;
	}
	return bench_now() - t0;
}

/* What a loader's decode thread does, without I/O or threads: each
 * frame decompressed, then its records decoded into their rows (record
 * i into row i % bench_rows, as time_fast). */
static double time_pipeline(const pf_spec *spec, const recset *rs,
			    const zframes *z, ZSTD_DCtx *dctx, uint8_t *zout,
			    pf_arena *arena, uint8_t **tensor, int *bad)
{
	uint8_t *dst[PF_SPEC_MAX_FEATURES];
	double t0 = bench_now();

	for (size_t f = 0; f < z->n; f++) {
		size_t base = rs->off[z->first[f]];

		if (ZSTD_decompressDCtx(dctx, zout, z->max_dsize, z->data + z->off[f],
					z->csize[f]) != z->dsize[f])
			return -1;
		for (size_t i = z->first[f]; i < z->first[f + 1]; i++) {
			pf_error err;

			for (uint32_t k = 0; k < spec->n; k++)
				dst[k] = tensor[k] + (i % bench_rows) * spec->f[k].len *
						     pf_dtype_size(spec->f[k].dtype);
			if (pf_spec_decode(spec, zout + (rs->off[i] - base), rs->rlen[i],
					   arena, dst, &err) < 0)
				(*bad)++;
		}
	}
	return bench_now() - t0;
}

/* Both ways must agree before anything is timed. */
static int check_same(const pf_spec *spec, const recset *rs, pf_arena *arena,
		      uint8_t **a, uint8_t **b)
{
	for (size_t i = 0; i < rs->n; i++) {
		uint8_t *da[PF_SPEC_MAX_FEATURES], *db[PF_SPEC_MAX_FEATURES];
		pf_example ex;
		pf_error err;
		int ra, rb;

		for (uint32_t k = 0; k < spec->n; k++) {
			da[k] = a[k];
			db[k] = b[k];
		}
		ra = pf_spec_decode(spec, rs->data + rs->off[i], rs->rlen[i], arena,
				    da, &err);
		pf_arena_reset(arena);
		rb = pf_example_decode(rs->data + rs->off[i], rs->rlen[i], arena,
				       &ex, &err);
		if (!rb)
			rb = pf_spec_apply_to(spec, &ex, db, &err);
		if (ra != rb)
			return -1;
		for (uint32_t k = 0; !ra && k < spec->n; k++)
			if (memcmp(a[k], b[k], spec->f[k].len *
				   pf_dtype_size(spec->f[k].dtype)))
				return -1;
	}
	return 0;
}

int bench_specdecode(char **files, int n, int runs,
			    const char *const *spec_texts, int nspecs,
			    const char *simd)
{
	const char *paths[4];
	int npaths = simd_paths(paths);
	uint8_t *tensor[PF_SPEC_MAX_FEATURES] = { 0 }, *other[PF_SPEC_MAX_FEATURES] = { 0 };
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	uint64_t values = 0;
	uint8_t *zout;
	pf_arena arena;
	zframes z;
	recset rs;
	pf_spec *spec = malloc(sizeof(*spec));

	if (simd) {
		if (pf_varint_set_impl(simd) < 0) {
			cli_fail("specdecode: --simd %s: not a path this CPU has", simd);
			return 2;
		}
		paths[0] = simd;
		npaths = 1;
	}
	if (!spec || !dctx || load_records(files, n, &rs) < 0 ||
	    pf_arena_init(&arena, PF_ARENA_BYTES_FOR(rs.max_len)) < 0 ||
	    zstd_frames(&rs, &z) < 0 || !(zout = malloc(z.max_dsize + 1)))
		return 1;
	/* Values in the records' lists (the tokens of a tokens dataset). */
	for (size_t i = 0; i < rs.n; i++) {
		pf_example ex;
		pf_error err;

		pf_arena_reset(&arena);
		if (pf_example_decode(rs.data + rs.off[i], rs.rlen[i], &arena, &ex,
				      &err) == 0)
			for (uint32_t k = 0; k < ex.n_features; k++)
				values += ex.features[k].count;
	}
	for (int s = 0; s < nspecs; s++) {
		pf_error err;

		if (pf_spec_parse(spec, spec_texts[s], &err) < 0) {
			cli_fail("specdecode: %s", err.msg);
			return 2;
		}
		for (uint32_t k = 0; k < spec->n; k++) {
			size_t size = bench_rows * spec->f[k].len *
				      pf_dtype_size(spec->f[k].dtype);

			tensor[k] = aligned_alloc(64, (size + 63) & ~(size_t)63);
			other[k] = aligned_alloc(64, (size + 63) & ~(size_t)63);
			if (!tensor[k] || !other[k])
				return 1;
			memset(tensor[k], 0, size);
			memset(other[k], 0, size);	/* fault the pages in */
		}
		for (int p = 0; p < npaths; p++) {
			double t_fast[64], t_slow[64], t_zstd[64], t_pipe[64];
			int bad_fast = 0, bad_slow = 0;

			pf_varint_set_impl(paths[p]);
			if (check_same(spec, &rs, &arena, tensor, other) < 0) {
				cli_fail("specdecode: pf_spec_decode and the slow path disagree (%s)",
					 paths[p]);
				return 1;
			}
			time_fast(spec, &rs, &arena, tensor, &bad_fast);	/* warm */
			for (int r = 0; r < runs; r++) {
				t_fast[r] = time_fast(spec, &rs, &arena, tensor, &bad_fast);
				t_slow[r] = time_slow(spec, &rs, &arena, tensor, &bad_slow);
				t_zstd[r] = time_zstd(&z, dctx, zout);
				t_pipe[r] = time_pipeline(spec, &rs, &z, dctx, zout, &arena,
							  tensor, &bad_fast);
				if (t_zstd[r] < 0 || t_pipe[r] < 0) {
					cli_fail("specdecode: zstd failed");
					return 1;
				}
			}
			double fast = cli_median(t_fast, runs), slow = cli_median(t_slow, runs),
			       zs = cli_median(t_zstd, runs), pipe = cli_median(t_pipe, runs);
			double per = 1e9 / (double)rs.n;
			if (bench_line("specdecode", (const field[]){
				{ "spec", .s = spec_texts[s] }, { "simd", .s = paths[p] },
				{ "records", .u = rs.n, .d = -1 }, { "bytes", .u = rs.len, .d = -1 },
				{ "values", .u = values, .d = -1 },
				{ "rows", .u = bench_rows, .d = -1 },
				{ "runs", .u = (uint64_t)runs, .d = -1 },
				{ "rejected", .u = (uint64_t)(bad_fast / (2 * runs + 1)), .d = -1 },
				{ "fast_records_per_s", .v = (double)rs.n / fast, .d = 0 },
				{ "fast_ns_per_record", .v = fast * per, .d = 1 },
				{ "fast_ns_per_value", .v = fast * 1e9 / (double)values, .d = 3 },
				{ "slow_records_per_s", .v = (double)rs.n / slow, .d = 0 },
				{ "slow_ns_per_record", .v = slow * per, .d = 1 },
				{ "slow_ns_per_value", .v = slow * 1e9 / (double)values, .d = 3 },
				{ "speedup", .v = slow / fast, .d = 2 }, { "zstd_ns_per_record", .v = zs * per, .d = 1 },
				{ "fast_to_zstd", .v = fast / zs, .d = 3 },
				{ "pipeline_ns_per_record", .v = pipe * per, .d = 1 },
				{ "zstd_to_pipeline", .v = zs / pipe, .d = 3 }, { 0 } }))
				return 1;
			fflush(stdout);
		}
		for (uint32_t k = 0; k < spec->n; k++) {
			free(tensor[k]);
			free(other[k]);
		}
	}
	ZSTD_freeDCtx(dctx);
	free(zout);
	free(z.data);
	free(z.off);
	free(z.csize);
	free(z.dsize);
	free(z.first);
	free(spec);
	pf_arena_release(&arena);
	free(rs.data);
	free(rs.off);
	free(rs.rlen);
	return 0;
}

/* Every int64 list of the records, packed again (as TensorFlow packs
 * them: minimal varints), one after the other. */
typedef struct lists {
	uint8_t *data;
	size_t len, n, values, max_count;
	size_t *off, *blen, *count;
} lists;


static int int64_lists(const recset *rs, pf_arena *arena, lists *l)
{
	memset(l, 0, sizeof(*l));
	l->data = malloc(rs->len + 1);
	l->off = malloc((rs->len / 2 + 1) * sizeof(size_t));
	l->blen = malloc((rs->len / 2 + 1) * sizeof(size_t));
	l->count = malloc((rs->len / 2 + 1) * sizeof(size_t));
	if (!l->data || !l->off || !l->blen || !l->count)
		return -ENOMEM;
	for (size_t i = 0; i < rs->n; i++) {
		pf_example ex;
		pf_error err;

		pf_arena_reset(arena);
		if (pf_example_decode(rs->data + rs->off[i], rs->rlen[i], arena, &ex,
				      &err) < 0)
			continue;
		for (uint32_t k = 0; k < ex.n_features; k++) {
			const pf_feature *f = &ex.features[k];

			if (f->kind != PF_KIND_INT64 || !f->count)
				continue;
			l->off[l->n] = l->len;
			for (uint32_t v = 0; v < f->count; v++)
				l->len += pf_varint_put(l->data + l->len,
						     (uint64_t)f->v.int64s[v]);
			l->blen[l->n] = l->len - l->off[l->n];
			l->count[l->n] = f->count;
			if (f->count > l->max_count)
				l->max_count = f->count;
			l->values += f->count;
			l->n++;
		}
	}
	return 0;
}

static double time_varint(const lists *l, void *dst, int wide, int *bad)
{
	double t0 = bench_now();

	for (size_t i = 0; i < l->n; i++) {
		int64_t got = wide ?
			pf_varint_decode_i64(l->data + l->off[i], l->blen[i], dst,
					     l->count[i], INT64_MIN, INT64_MAX, NULL) :
			pf_varint_decode_i32(l->data + l->off[i], l->blen[i], dst,
					     l->count[i], INT32_MIN, INT32_MAX, NULL);

		*bad += got != (int64_t)l->count[i];
	}
	return bench_now() - t0;
}

int bench_varint(char **files, int n, int runs)
{
	const char *paths[4];
	int npaths = simd_paths(paths), bad = 0, ret = 0;
	double t32[4][64], t64[4][64];
	pf_arena arena;
	recset rs;
	lists l;
	void *dst;

	if (load_records(files, n, &rs) < 0 ||
	    pf_arena_init(&arena, PF_ARENA_BYTES_FOR(rs.max_len)) < 0 ||
	    int64_lists(&rs, &arena, &l) < 0 ||
	    !(dst = malloc((l.max_count + 1) * sizeof(int64_t))))
		return 1;
	if (!l.values) {
		cli_fail("varint: no int64 values in the records");
		return 1;
	}
	/* Interleaved: every path once per run. */
	for (int r = -1; r < runs; r++)
		for (int p = 0; p < npaths; p++) {
			double a, b;

			pf_varint_set_impl(paths[p]);
			a = time_varint(&l, dst, 0, &bad);
			b = time_varint(&l, dst, 1, &bad);
			if (r >= 0) {
				t32[p][r] = a;
				t64[p][r] = b;
			}
		}
	if (bad) {
		cli_fail("varint: %d lists decoded to the wrong count", bad);
		return 1;
	}
	double scalar32 = cli_median(t32[npaths - 1], runs), scalar64 = cli_median(t64[npaths - 1], runs);

	for (int p = 0; p < npaths; p++) {
		double a = cli_median(t32[p], runs), b = cli_median(t64[p], runs);

		if (bench_line("varint", (const field[]){
			{ "simd", .s = paths[p] }, { "lists", .u = l.n, .d = -1 },
			{ "values", .u = l.values, .d = -1 }, { "bytes", .u = l.len, .d = -1 },
			{ "runs", .u = (uint64_t)runs, .d = -1 },
			{ "i32_mvalues_per_s", .v = (double)l.values / a / 1e6, .d = 1 },
			{ "i32_ns_per_value", .v = a * 1e9 / (double)l.values, .d = 3 },
			{ "i64_mvalues_per_s", .v = (double)l.values / b / 1e6, .d = 1 },
			{ "i64_ns_per_value", .v = b * 1e9 / (double)l.values, .d = 3 },
			{ "i32_speedup_over_scalar", .v = scalar32 / a, .d = 2 },
			{ "i64_speedup_over_scalar", .v = scalar64 / b, .d = 2 }, { 0 } }))
			ret = 1;
	}
	free(dst);
	free(l.data);
	free(l.off);
	free(l.blen);
	free(l.count);
	pf_arena_release(&arena);
	free(rs.data);
	free(rs.off);
	free(rs.rlen);
	return ret;
}

