/* SPDX-License-Identifier: Apache-2.0 */
/* pfbench: micro-benchmarks of the formats layer, each beside its
 * reference measured in the same run (medians of interleaved runs). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <zstd.h>

#include "cli.h"
#include "damage.h"
#include "formats_internal.h"
#include "example.pb-c.h"

extern char **environ;

/* --cpu: time the benchmark thread's CPU time, not the wall clock (on a
 * machine shared with other work, time spent preempted is not ours; the
 * decompress benchmark's zstd child is not counted then). */
static clockid_t bench_clock = CLOCK_MONOTONIC;

/* One benchmark's figures: a name and a string (s), a count (u; d < 0) or
 * a number rounded to d decimals, as the figures have always been given. */
typedef struct field {
	const char *key;
	double v;
	int d;
	uint64_t u;
	const char *s;
} field;

/* {"bench":NAME, the fields...} as one JSON line.  @return 0, or 1 after
 * saying the memory ran out. */
static int line(const char *bench, const field *f)
{
	json_t *o = json_object();
	bool bad = false;

	pf_json_put(o, "bench", pf_json_str(bench), &bad);
	for (; f->key; f++) {
		json_t *v;

		if (f->s)
			v = pf_json_str(f->s);
		else if (f->d < 0)
			v = pf_json_u64(f->u);
		else if (!isfinite(f->v))
			v = pf_json_num(f->v);
		else if (f->d == 0)
			v = json_integer((json_int_t)llround(f->v));
		else
			v = json_real(round(f->v * pow(10, f->d)) / pow(10, f->d));
		pf_json_put(o, f->key, v, &bad);
	}
	return cli_json_print(o, bad);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(bench_clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ */

static int bench_crc(uint64_t mib, int runs)
{
	size_t len = (size_t)mib << 20;
	uint8_t *src = malloc(len), *dst = malloc(len);
	double t_crc[64], t_port[64], t_cpy[64];
	volatile uint32_t sink = 0;
	int ret;

	if (!src || !dst)
		return 1;
	for (size_t i = 0; i < len; i++)
		src[i] = (uint8_t)(i * 131 + 7);
	memcpy(dst, src, len);	/* fault the pages in */
	for (int r = 0; r < runs; r++) {
		double t0 = now();
		sink ^= pf_crc32c(0, src, len);
		double t1 = now();
		sink ^= pf_crc32c_portable(0, src, len);
		double t2 = now();
		memcpy(dst, src, len);
		sink ^= dst[r];
		double t3 = now();
		t_crc[r] = t1 - t0;
		t_port[r] = t2 - t1;
		t_cpy[r] = t3 - t2;
	}
	double gb = (double)len / 1e9;
	double crc = gb / cli_median(t_crc, runs), port = gb / cli_median(t_port, runs),
	       cpy = gb / cli_median(t_cpy, runs);
	ret = line("crc32c", (const field[]){
		{ "impl", .s = pf_crc32c_impl() }, { "bytes", .u = len, .d = -1 },
		{ "runs", .u = (uint64_t)runs, .d = -1 }, { "crc32c_gbps", .v = crc, .d = 2 },
		{ "portable_gbps", .v = port, .d = 2 }, { "memcpy_gbps", .v = cpy, .d = 2 },
		{ "ratio_to_memcpy", .v = crc / cpy, .d = 2 }, { 0 } });
	free(src);
	free(dst);
	return ret | (sink == 0xdeadbeef);	/* keep the work alive */
}

/* ------------------------------------------------------------------ */

static int read_through_podfeed(char **files, int n, uint64_t *out_bytes,
				uint64_t *in_bytes, uint64_t *records)
{
	*out_bytes = *in_bytes = *records = 0;
	for (int i = 0; i < n; i++) {
		pf_source *src;
		pf_record rec;
		pf_error err;
		int ret;

		pf_error_clear(&err);
		if (pf_source_open(&src, files[i], NULL, &err) < 0) {
			cli_print_error(&err);
			return -1;
		}
		while ((ret = pf_source_next(src, &rec, &err)) == 1)
			(*records)++;
		if (ret < 0) {
			cli_print_error(&err);
			pf_source_close(src);
			return -1;
		}
		*out_bytes += pf_source_bytes_out(src);
		*in_bytes += pf_source_file_size(src);
		pf_source_close(src);
	}
	return 0;
}

static int run_zstd_cli(char **files, int n)
{
	char **argv = calloc((size_t)n + 4, sizeof(*argv));
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st = -1;

	if (!argv)
		return -1;
	argv[0] = "zstd";
	argv[1] = "-qdc";
	for (int i = 0; i < n; i++)
		argv[2 + i] = files[i];
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (posix_spawnp(&pid, "zstd", &fa, NULL, argv, environ) == 0)
		waitpid(pid, &st, 0);
	posix_spawn_file_actions_destroy(&fa);
	free(argv);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int bench_decompress(char **files, int n, int runs)
{
	double t_pf[64], t_zstd[64];
	uint64_t out, in, records;

	/* Warm the page cache so both read from memory. */
	if (read_through_podfeed(files, n, &out, &in, &records) < 0)
		return 1;
	if (run_zstd_cli(files, n) < 0) {
		cli_fail("decompress: `zstd -qdc` failed (is zstd installed?)");
		return 1;
	}
	for (int r = 0; r < runs; r++) {
		double t0 = now();
		read_through_podfeed(files, n, &out, &in, &records);
		double t1 = now();
		run_zstd_cli(files, n);
		double t2 = now();
		t_pf[r] = t1 - t0;
		t_zstd[r] = t2 - t1;
	}
	double pf = cli_median(t_pf, runs), zs = cli_median(t_zstd, runs);
	return line("decompress", (const field[]){
		{ "files", .u = (uint64_t)n, .d = -1 }, { "records", .u = records, .d = -1 },
		{ "compressed_bytes", .u = in, .d = -1 },
		{ "uncompressed_bytes", .u = out, .d = -1 },
		{ "runs", .u = (uint64_t)runs, .d = -1 }, { "podfeed_seconds", .v = pf, .d = 4 },
		{ "zstd_cli_seconds", .v = zs, .d = 4 }, { "podfeed_mbps", .v = (double)out / pf / 1e6, .d = 1 },
		{ "zstd_cli_mbps", .v = (double)out / zs / 1e6, .d = 1 }, { "ratio_to_zstd", .v = zs / pf, .d = 3 },
		{ 0 } });
}

/* ------------------------------------------------------------------ */

typedef struct recset {
	uint8_t *data;
	size_t len, cap;
	size_t *off;
	uint32_t *rlen;
	size_t n, ncap;
	size_t max_len;
} recset;

static int load_records(char **files, int n, recset *rs)
{
	memset(rs, 0, sizeof(*rs));
	for (int i = 0; i < n; i++) {
		pf_source *src;
		pf_record rec;
		pf_error err;
		int ret;

		pf_error_clear(&err);
		if (pf_source_open(&src, files[i], NULL, &err) < 0) {
			cli_print_error(&err);
			return -1;
		}
		while ((ret = pf_source_next(src, &rec, &err)) == 1) {
			if (rs->len + rec.len > rs->cap) {
				rs->cap = (rs->cap + rec.len) * 2;
				rs->data = realloc(rs->data, rs->cap);
			}
			if (rs->n == rs->ncap) {
				rs->ncap = rs->ncap ? rs->ncap * 2 : 1024;
				rs->off = realloc(rs->off, rs->ncap * sizeof(*rs->off));
				rs->rlen = realloc(rs->rlen, rs->ncap * sizeof(*rs->rlen));
			}
			if (!rs->data || !rs->off || !rs->rlen) {
				pf_source_close(src);
				return -ENOMEM;
			}
			memcpy(rs->data + rs->len, rec.data, rec.len);
			rs->off[rs->n] = rs->len;
			rs->rlen[rs->n] = (uint32_t)rec.len;
			rs->len += rec.len;
			if (rec.len > rs->max_len)
				rs->max_len = rec.len;
			rs->n++;
		}
		pf_source_close(src);
		if (ret < 0) {
			cli_print_error(&err);
			return -1;
		}
	}
	return 0;
}

static int bench_decode(char **files, int n, int runs)
{
	recset rs;
	pf_arena arena;
	double t_fast[64], t_pbc[64];
	uint64_t values = 0;
	int ret;

	if (load_records(files, n, &rs) < 0 ||
	    pf_arena_init(&arena, PF_ARENA_BYTES_FOR(rs.max_len)) < 0)
		return 1;
	for (int r = 0; r < runs; r++) {
		double t0 = now();
		values = 0;
		for (size_t i = 0; i < rs.n; i++) {
			pf_example ex;
			pf_error err;

			pf_arena_reset(&arena);
			if (pf_example_decode(rs.data + rs.off[i], rs.rlen[i], &arena,
					      &ex, &err) < 0) {
				cli_fail("decode: record %zu: %s", i, err.msg);
				return 1;
			}
			for (uint32_t k = 0; k < ex.n_features; k++)
				values += ex.features[k].count;
		}
		double t1 = now();
		for (size_t i = 0; i < rs.n; i++) {
			Tensorflow__Example *m = tensorflow__example__unpack(
				NULL, rs.rlen[i], rs.data + rs.off[i]);
			if (!m) {
				cli_fail("decode: protobuf-c refused record %zu", i);
				return 1;
			}
			tensorflow__example__free_unpacked(m, NULL);
		}
		double t2 = now();
		t_fast[r] = t1 - t0;
		t_pbc[r] = t2 - t1;
	}
	double fast = cli_median(t_fast, runs), pbc = cli_median(t_pbc, runs);
	ret = line("decode", (const field[]){
		{ "file", .s = files[0] }, { "records", .u = rs.n, .d = -1 },
		{ "bytes", .u = rs.len, .d = -1 }, { "values", .u = values, .d = -1 },
		{ "runs", .u = (uint64_t)runs, .d = -1 },
		{ "fast_records_per_s", .v = (double)rs.n / fast, .d = 0 },
		{ "fast_mbps", .v = (double)rs.len / fast / 1e6, .d = 1 },
		{ "protobuf_c_records_per_s", .v = (double)rs.n / pbc, .d = 0 },
		{ "protobuf_c_mbps", .v = (double)rs.len / pbc / 1e6, .d = 1 },
		{ "speedup", .v = pbc / fast, .d = 2 }, { 0 } });
	pf_arena_release(&arena);
	free(rs.data);
	free(rs.off);
	free(rs.rlen);
	return ret;
}

/* ------------------------------------------------------------------ */

static const char *const default_specs[] = {
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
	double t0 = now();

	for (size_t i = 0; i < z->n; i++)
		if (ZSTD_decompressDCtx(dctx, out, z->max_dsize, z->data + z->off[i],
					z->csize[i]) != z->dsize[i])
			return -1;
	return now() - t0;
}

/* Destinations: a batch of `bench_rows` rows per feature, as the
 * loader's tensors; record i goes to row i % bench_rows.  256 rows of
 * int64[512] (1 MiB) stay in L2, as the loader's ~128 MiB of batch slots
 * do not: --rows says how many. */
static size_t bench_rows = 256;

static double time_fast(const pf_spec *spec, const recset *rs, pf_arena *arena,
			uint8_t **tensor, int *bad)
{
	uint8_t *dst[PF_SPEC_MAX_FEATURES];
	double t0 = now();

	for (size_t i = 0; i < rs->n; i++) {
		pf_error err;

		for (uint32_t k = 0; k < spec->n; k++)
			dst[k] = tensor[k] + (i % bench_rows) * spec->f[k].len *
					     pf_dtype_size(spec->f[k].dtype);
		if (pf_spec_decode(spec, rs->data + rs->off[i], rs->rlen[i], arena,
				   dst, &err) < 0)
			(*bad)++;
	}
	return now() - t0;
}

static double time_slow(const pf_spec *spec, const recset *rs, pf_arena *arena,
			uint8_t **tensor, int *bad)
{
	uint8_t *dst[PF_SPEC_MAX_FEATURES];
	double t0 = now();

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
	return now() - t0;
}

/* What a loader's decode thread does, without I/O or threads: each
 * frame decompressed, then its records decoded into their rows (record
 * i into row i % bench_rows, as time_fast). */
static double time_pipeline(const pf_spec *spec, const recset *rs,
			    const zframes *z, ZSTD_DCtx *dctx, uint8_t *zout,
			    pf_arena *arena, uint8_t **tensor, int *bad)
{
	uint8_t *dst[PF_SPEC_MAX_FEATURES];
	double t0 = now();

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
	return now() - t0;
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

static int bench_specdecode(char **files, int n, int runs,
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
			if (line("specdecode", (const field[]){
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

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

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
				l->len += put_varint(l->data + l->len,
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
	double t0 = now();

	for (size_t i = 0; i < l->n; i++) {
		int64_t got = wide ?
			pf_varint_decode_i64(l->data + l->off[i], l->blen[i], dst,
					     l->count[i], INT64_MIN, INT64_MAX, NULL) :
			pf_varint_decode_i32(l->data + l->off[i], l->blen[i], dst,
					     l->count[i], INT32_MIN, INT32_MAX, NULL);

		*bad += got != (int64_t)l->count[i];
	}
	return now() - t0;
}

static int bench_varint(char **files, int n, int runs)
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

		if (line("varint", (const field[]){
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

/* ------------------------------------------------------------------ */
/* skip: skip mode over damaged regions of growing size                 */

#define SKIP_PIECE (64u << 10)	/* the reader is fed this much at a time */
#define SKIP_EDGE 300u		/* intact records before and after (64 KB) */

/* One pass of a skip-mode reader fed SKIP_PIECE bytes at a time (walker
 * false), or of pf_tfr_next_intact over the whole buffer (true).
 * @return the seconds, with the records and drops counted. */
static double skip_pass(const uint8_t *p, size_t len, bool walker, uint64_t *records,
			uint64_t *drops)
{
	pf_tfr_config cfg = { .max_record_size = 1u << 20, .on_corrupt = PF_CORRUPT_SKIP };
	static pf_drop drop;	/* 13 KB */
	pf_tfr_reader *r;
	pf_record rec;
	pf_error err;
	size_t pos = 0;
	double t0 = now();
	int ret = 0;

	*records = *drops = 0;
	if (walker) {
		while ((ret = pf_tfr_next_intact(p, len, &pos, 0, cfg.max_record_size, true, &rec,
						 &drop)) > 0)
			*(ret == 1 ? records : drops) += 1;
		return now() - t0;
	}
	if (pf_tfr_reader_create(&r, &cfg) < 0)
		return -1;
	while (pos < len && ret >= 0) {
		size_t n = len - pos < SKIP_PIECE ? len - pos : SKIP_PIECE;

		pf_tfr_reader_feed(r, p + pos, n);
		pos += n;
		if (pos == len)
			pf_tfr_reader_end(r);
		while ((ret = pf_tfr_reader_next(r, &rec, &err)) == 1)
			(*records)++;
	}
	if (ret < 0 || pf_tfr_reader_finish(r, &err) < 0)
		*records = UINT64_MAX;
	*drops = pf_tfr_reader_drops(r);
	pf_tfr_reader_free(r);
	return now() - t0;
}

/* Skip mode over damage of each kind, in regions of mib/8 .. mib MiB,
 * beside an intact stream of the same length read in the same run
 * (interleaved): the ns a damaged byte (the stream's time less its intact
 * edges' at the intact stream's rate) and its ratio to the intact rate.
 * Linear: the same ns a damaged byte at every size (per_byte_vs_smallest
 * about 1). */
static int bench_skip(uint64_t mib, int runs)
{
	int ret = 0;

	for (int k = PF_DAMAGE_GARBAGE; k < PF_DAMAGE_KINDS; k++) {
		for (int w = 0; w < 2; w++) {
			double first = 0;

			for (uint64_t d = mib << 17; d <= mib << 20; d *= 2) {
				double t_bad[64], t_ok[64];
				uint64_t rec_bad = 0, drop_bad = 0, rec_ok = 0, drop_ok = 0;
				pf_damage_expect xb, xo;
				size_t len, len_ok;
				uint8_t *bad = pf_damage_stream(SKIP_EDGE, (size_t)d, k, &len, &xb);
				uint8_t *ok = pf_damage_stream(SKIP_EDGE, (size_t)d, PF_DAMAGE_NONE,
							       &len_ok, &xo);

				if (!bad || !ok) {
					free(bad);
					free(ok);
					return 1;
				}
				for (int r = 0; r < runs; r++) {
					t_bad[r] = skip_pass(bad, len, w, &rec_bad, &drop_bad);
					t_ok[r] = skip_pass(ok, len_ok, w, &rec_ok, &drop_ok);
				}
				free(bad);
				free(ok);
				double no = cli_median(t_ok, runs) * 1e9 / (double)len_ok;
				double nb = (cli_median(t_bad, runs) * 1e9 -
					     no * (double)(len - xb.damaged)) /
					    (double)xb.damaged;

				if (d == mib << 17)
					first = nb;
				ret |= line("skip", (const field[]){
					{ "damage", .s = pf_damage_names[k] },
					{ "reading", .s = w ? "walker" : "reader" },
					{ "damaged_bytes", .u = xb.damaged, .d = -1 },
					{ "stream_bytes", .u = len, .d = -1 },
					{ "runs", .u = (uint64_t)runs, .d = -1 },
					{ "records", .u = rec_bad, .d = -1 },
					{ "drops", .u = drop_bad, .d = -1 },
					{ "ns_per_damaged_byte", .v = nb, .d = 3 },
					{ "intact_ns_per_byte", .v = no, .d = 3 },
					{ "ratio_to_intact", .v = nb / no, .d = 2 },
					{ "per_byte_vs_smallest", .v = nb / first, .d = 2 },
					{ 0 } });
				/* Not what the stream holds: say so by failing. */
				if (rec_bad != xb.records || drop_bad != xb.drops ||
				    rec_ok != xo.records || drop_ok != xo.drops)
					ret |= 1;
			}
		}
	}
	return ret;
}

typedef struct bench_opts {
	uint64_t runs, mib, rows;
	const char *simd;
	const char *specs[16];
	int nspecs;
	bool cpu;
} bench_opts;

static int add_spec(void *field, const char *v)
{
	bench_opts *o = field;

	if (o->nspecs == 16) {
		cli_usage("--spec: at most 16");
		return -EINVAL;
	}
	o->specs[o->nspecs++] = v;
	return 0;
}

static const cli_opt bench_cli[] = {
	{ CLI_U64, "runs", .arg = "R", .off = offsetof(bench_opts, runs), .min = 1, .max = 64,
	  .help = "interleaved runs; medians (default 7)" },
	{ CLI_U64, "mib", .arg = "N", .off = offsetof(bench_opts, mib), .min = 1, .max = 4096,
	  .help = "crc: MiB of data (default 64); skip: the largest damaged region "
		  "(default 64; regions of N/8, N/4, N/2 and N MiB)" },
	{ CLI_CALL, "spec", .arg = "SPEC", .call = add_spec,
	  .help = "specdecode: a feature spec (repeatable; default "
		  "tokens:int32[512],label:int32[1] and the same as int64)" },
	{ CLI_U64, "rows", .arg = "N", .off = offsetof(bench_opts, rows), .min = 1,
	  .max = 1u << 20,
	  .help = "specdecode: destination rows, record i into row i % N (default 256: "
		  "a batch that stays in L2; the loader's batch slots are ~128 MiB, "
		  "so e.g. 32768 rows of int64[512] (128 MiB) is what it sees)" },
	{ CLI_STRING, "simd", .arg = "NAME", .off = offsetof(bench_opts, simd),
	  .help = "specdecode: that varint path only" },
	{ CLI_FLAG, "cpu", .off = offsetof(bench_opts, cpu),
	  .help = "time the thread's CPU time instead of the wall clock (for "
		  "specdecode, varint and crc on a busy machine)" },
	{ CLI_END },
};

static const cli_command bench_command = {
	.name = "pfbench",
	.usage = "usage: pfbench crc [--mib N] [--runs R]\n"
		 "       pfbench decompress [--runs R] FILE...\n"
		 "       pfbench decode [--runs R] FILE...\n"
		 "       pfbench specdecode [--runs R] [--spec SPEC]... [--rows N] [--simd NAME]\n"
		 "                          FILE...\n"
		 "       pfbench varint [--runs R] FILE...\n"
		 "       pfbench skip [--mib N] [--runs R]\n",
	.about = "crc         CRC32C (dispatched and portable) GB/s against memcpy\n"
		 "decompress  reading indexed shards through podfeed (one thread: read,\n"
		 "            frame CRC, zstd, TFRecord framing and CRCs) against\n"
		 "            `zstd -qdc FILE > /dev/null` on the same files\n"
		 "decode      tf.train.Example decoding, podfeed's fast path against\n"
		 "            protobuf-c unpack + free, records in memory\n"
		 "specdecode  pf_spec_decode (one pass, wire bytes to tensors) against\n"
		 "            pf_example_decode + pf_spec_apply_to, per varint path, with\n"
		 "            zstd decompression of the same records (1 MiB frames,\n"
		 "            level 3) as the yardstick, and the pipeline (each frame\n"
		 "            decompressed, then its records decoded: a loader thread's\n"
		 "            work without I/O) against zstd alone\n"
		 "varint      pf_varint_decode_i32/_i64 alone on every int64 list of the\n"
		 "            records (packed as on the wire), per path\n"
		 "skip        TFRecord skip mode (the reader fed 64 KiB pieces, and the\n"
		 "            walker pf_tfr_next_intact) over damaged regions of growing\n"
		 "            size: random bytes, zeros, records with a bad data CRC,\n"
		 "            records a byte short; ns a byte against an intact stream\n"
		 "            of the same length (linear: the same ns a byte at every size)\n"
		 "Runs are interleaved (ours, reference, ours, ...) and medians reported;\n"
		 "one JSON object per line on stdout.\n",
	.opts = bench_cli,
};

int main(int argc, char **argv)
{
	static const char *const benches[] = { "crc", "decompress", "decode", "specdecode",
					       "varint", "skip" };
	bench_opts o = { .runs = 7, .mib = 64, .rows = 256 };
	uint64_t runs, mib;
	const char *cmd, *simd;
	char **files = NULL;
	const char **specs;
	int nfiles = 0, nspecs, ret, first;
	bool known = false;

	cli_prog = "pfbench";
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "--help-all") ||
			 !strcmp(argv[1], "-h"))) {
		cli_help(&bench_command, stdout, true);
		return 0;
	}
	if (argc < 2)
		return cli_usage("name a benchmark");
	cmd = argv[1];
	for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]); i++)
		known |= !strcmp(cmd, benches[i]);
	if (!known)
		return cli_usage("unknown benchmark '%s'", cmd);
	ret = cli_parse(&bench_command, argc - 1, argv + 1, &o, &first);
	if (ret >= 0)
		return ret;
	argc--;
	argv++;
	runs = o.runs;
	mib = o.mib;
	bench_rows = (size_t)o.rows;
	simd = o.simd;
	specs = o.specs;
	nspecs = o.nspecs;
	if (o.cpu)
		bench_clock = CLOCK_THREAD_CPUTIME_ID;
	if (!strcmp(cmd, "crc"))
		return bench_crc(mib, (int)runs);
	if (!strcmp(cmd, "skip"))
		return bench_skip(mib, (int)runs);
	if (first == argc)
		return cli_usage("%s: no input files", cmd);
	nfiles = cli_expand_inputs(argv + first, argc - first, &files);
	if (nfiles <= 0) {
		if (nfiles == 0)
			cli_fail("%s: the inputs name no files", cmd);
		return 1;
	}
	if (!strcmp(cmd, "decompress"))
		ret = bench_decompress(files, nfiles, (int)runs);
	else if (!strcmp(cmd, "decode"))
		ret = bench_decode(files, nfiles, (int)runs);
	else if (!strcmp(cmd, "specdecode"))
		ret = nspecs ? bench_specdecode(files, nfiles, (int)runs, specs, nspecs, simd) :
			       bench_specdecode(files, nfiles, (int)runs, default_specs, 2, simd);
	else if (!strcmp(cmd, "varint"))
		ret = bench_varint(files, nfiles, (int)runs);
	else
		ret = cli_usage("unknown benchmark '%s'", cmd);
	cli_free_inputs(files, nfiles);
	return ret;
}
