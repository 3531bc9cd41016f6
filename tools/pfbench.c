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
#include "pfbench.h"
#include "damage.h"
#include "formats_internal.h"
#include "example.pb-c.h"

extern char **environ;

/* --cpu: time the benchmark thread's CPU time, not the wall clock (on a
 * machine shared with other work, time spent preempted is not ours; the
 * decompress benchmark's zstd child is not counted then). */
clockid_t bench_clock = CLOCK_MONOTONIC;


/* {"bench":NAME, the fields...} as one JSON line.  @return 0, or 1 after
 * saying the memory ran out. */
int bench_line(const char *bench, const field *f)
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

double bench_now(void)
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
		double t0 = bench_now();
		sink ^= pf_crc32c(0, src, len);
		double t1 = bench_now();
		sink ^= pf_crc32c_portable(0, src, len);
		double t2 = bench_now();
		memcpy(dst, src, len);
		sink ^= dst[r];
		double t3 = bench_now();
		t_crc[r] = t1 - t0;
		t_port[r] = t2 - t1;
		t_cpy[r] = t3 - t2;
	}
	double gb = (double)len / 1e9;
	double crc = gb / cli_median(t_crc, runs), port = gb / cli_median(t_port, runs),
	       cpy = gb / cli_median(t_cpy, runs);
	ret = bench_line("crc32c", (const field[]){
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
		double t0 = bench_now();
		read_through_podfeed(files, n, &out, &in, &records);
		double t1 = bench_now();
		run_zstd_cli(files, n);
		double t2 = bench_now();
		t_pf[r] = t1 - t0;
		t_zstd[r] = t2 - t1;
	}
	double pf = cli_median(t_pf, runs), zs = cli_median(t_zstd, runs);
	return bench_line("decompress", (const field[]){
		{ "files", .u = (uint64_t)n, .d = -1 }, { "records", .u = records, .d = -1 },
		{ "compressed_bytes", .u = in, .d = -1 },
		{ "uncompressed_bytes", .u = out, .d = -1 },
		{ "runs", .u = (uint64_t)runs, .d = -1 }, { "podfeed_seconds", .v = pf, .d = 4 },
		{ "zstd_cli_seconds", .v = zs, .d = 4 }, { "podfeed_mbps", .v = (double)out / pf / 1e6, .d = 1 },
		{ "zstd_cli_mbps", .v = (double)out / zs / 1e6, .d = 1 }, { "ratio_to_zstd", .v = zs / pf, .d = 3 },
		{ 0 } });
}

/* ------------------------------------------------------------------ */


int load_records(char **files, int n, recset *rs)
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
		double t0 = bench_now();
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
		double t1 = bench_now();
		for (size_t i = 0; i < rs.n; i++) {
			Tensorflow__Example *m = tensorflow__example__unpack(
				NULL, rs.rlen[i], rs.data + rs.off[i]);
			if (!m) {
				cli_fail("decode: protobuf-c refused record %zu", i);
				return 1;
			}
			tensorflow__example__free_unpacked(m, NULL);
		}
		double t2 = bench_now();
		t_fast[r] = t1 - t0;
		t_pbc[r] = t2 - t1;
	}
	double fast = cli_median(t_fast, runs), pbc = cli_median(t_pbc, runs);
	ret = bench_line("decode", (const field[]){
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
	double t0 = bench_now();
	int ret = 0;

	*records = *drops = 0;
	if (walker) {
		while ((ret = pf_tfr_next_intact(p, len, &pos, 0, cfg.max_record_size, true, &rec,
						 &drop)) > 0)
			*(ret == 1 ? records : drops) += 1;
		return bench_now() - t0;
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
	return bench_now() - t0;
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
				ret |= bench_line("skip", (const field[]){
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
