/* SPDX-License-Identifier: Apache-2.0 */
/* pfbench: micro-benchmarks of the formats layer, each beside its
 * reference measured in the same run (medians of interleaved runs). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "cli.h"
#include "example.pb-c.h"

extern char **environ;

static const char usage[] =
	"usage: pfbench crc [--mib N] [--runs R]\n"
	"       pfbench decompress [--runs R] FILE...\n"
	"       pfbench decode [--runs R] FILE...\n"
	"\n"
	"crc         CRC32C (dispatched and portable) GB/s against memcpy\n"
	"decompress  reading indexed shards through podfeed (one thread: read,\n"
	"            frame CRC, zstd, TFRecord framing and CRCs) against\n"
	"            `zstd -qdc FILE > /dev/null` on the same files\n"
	"decode      tf.train.Example decoding, podfeed's fast path against\n"
	"            protobuf-c unpack + free, records in memory\n"
	"Runs are interleaved (ours, reference, ours, ...) and medians reported;\n"
	"one JSON object per line on stdout.\n";

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ------------------------------------------------------------------ */

static int bench_crc(uint64_t mib, int runs)
{
	size_t len = (size_t)mib << 20;
	uint8_t *src = malloc(len), *dst = malloc(len);
	double t_crc[64], t_port[64], t_cpy[64];
	volatile uint32_t sink = 0;

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
	double crc = gb / median(t_crc, runs), port = gb / median(t_port, runs),
	       cpy = gb / median(t_cpy, runs);
	printf("{\"bench\":\"crc32c\",\"impl\":\"%s\",\"bytes\":%zu,\"runs\":%d,"
	       "\"crc32c_gbps\":%.2f,\"portable_gbps\":%.2f,\"memcpy_gbps\":%.2f,"
	       "\"ratio_to_memcpy\":%.2f}\n", pf_crc32c_impl(), len, runs, crc, port,
	       cpy, crc / cpy);
	free(src);
	free(dst);
	return sink == 0xdeadbeef;	/* keep the work alive */
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
	double pf = median(t_pf, runs), zs = median(t_zstd, runs);
	printf("{\"bench\":\"decompress\",\"files\":%d,\"records\":%llu,"
	       "\"compressed_bytes\":%llu,\"uncompressed_bytes\":%llu,\"runs\":%d,"
	       "\"podfeed_seconds\":%.4f,\"zstd_cli_seconds\":%.4f,"
	       "\"podfeed_mbps\":%.1f,\"zstd_cli_mbps\":%.1f,\"ratio_to_zstd\":%.3f}\n",
	       n, (unsigned long long)records, (unsigned long long)in,
	       (unsigned long long)out, runs, pf, zs, (double)out / pf / 1e6,
	       (double)out / zs / 1e6, zs / pf);
	return 0;
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
	double fast = median(t_fast, runs), pbc = median(t_pbc, runs);
	printf("{\"bench\":\"decode\",\"file\":\"%s\",\"records\":%zu,\"bytes\":%zu,"
	       "\"values\":%llu,\"runs\":%d,\"fast_records_per_s\":%.0f,"
	       "\"fast_mbps\":%.1f,\"protobuf_c_records_per_s\":%.0f,"
	       "\"protobuf_c_mbps\":%.1f,\"speedup\":%.2f}\n",
	       files[0], rs.n, rs.len, (unsigned long long)values, runs,
	       (double)rs.n / fast, (double)rs.len / fast / 1e6,
	       (double)rs.n / pbc, (double)rs.len / pbc / 1e6, pbc / fast);
	pf_arena_release(&arena);
	free(rs.data);
	free(rs.off);
	free(rs.rlen);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "mib", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t runs = 7, mib = 64;
	const char *cmd;
	char **files = NULL;
	int c, nfiles = 0, ret;

	cli_prog = "pfbench";
	if (argc < 2 || !strcmp(argv[1], "--help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	cmd = argv[1];
	argc--;
	argv++;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (cli_parse_u64("--runs", optarg, 1, 64, false, &runs))
				return 2;
			break;
		case 'm':
			if (cli_parse_u64("--mib", optarg, 1, 4096, false, &mib))
				return 2;
			break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (!strcmp(cmd, "crc"))
		return bench_crc(mib, (int)runs);
	nfiles = cli_expand_inputs(argv + optind, argc - optind, &files);
	if (nfiles <= 0) {
		cli_fail("%s: no input files", cmd);
		return 2;
	}
	if (!strcmp(cmd, "decompress"))
		ret = bench_decompress(files, nfiles, (int)runs);
	else if (!strcmp(cmd, "decode"))
		ret = bench_decode(files, nfiles, (int)runs);
	else {
		cli_fail("unknown benchmark '%s'", cmd);
		ret = 2;
	}
	cli_free_inputs(files, nfiles);
	return ret;
}
