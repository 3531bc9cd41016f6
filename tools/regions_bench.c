/* SPDX-License-Identifier: Apache-2.0 */
/* `loadbench regions`: the same sample of shard files read from each
 * declared mount, one column per mount (region, file system, MB/s, first
 * byte, read latency, the ratio to the fastest in-region mount, the
 * egress estimate), as a table or one JSON object. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common_internal.h"
#include "regions.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define SAMPLE_DEFAULT 4u
#define SAMPLE_MAX 4096u
#define READ_DEFAULT (1u << 20)
#define DEPTH_DEFAULT 8u
#define BENCH_MAX_REPEAT 101u

static double mb(uint64_t bytes)
{
	return (double)bytes / 1e6;
}

static const char *kind_name(pf_region_kind k)
{
	return k == PF_REGION_IN ? "in" : k == PF_REGION_CROSS ? "cross" : "unknown";
}


typedef struct bench_opts {
	regions_opts ro;
	uint64_t sample, depth, read_size, repeat;
	bool warm, json;
} bench_opts;

static const cli_opt bench_cli[] = {
	{ CLI_INCLUDE, .table = regions_cli, .off = offsetof(bench_opts, ro) },
	{ CLI_SECTION, .help = "the passes:" },
	{ CLI_U64, "sample", .arg = "N", .off = offsetof(bench_opts, sample), .min = 1,
	  .max = SAMPLE_MAX, .help = "files per mount (default 4)" },
	{ CLI_U64, "io-depth", .arg = "N", .off = offsetof(bench_opts, depth), .min = 1,
	  .max = 256, .help = "reads in flight (default 8)" },
	{ CLI_U64, "read-size", .arg = "BYTES", .off = offsetof(bench_opts, read_size),
	  .min = 4096, .max = 64u << 20, .suffix = true,
	  .help = "bytes per read (default 1M; K, M suffixes)" },
	{ CLI_U64, "repeat", .arg = "N", .off = offsetof(bench_opts, repeat), .min = 1,
	  .max = BENCH_MAX_REPEAT, .help = "passes, interleaved over the mounts; medians (default 1)" },
	{ CLI_FLAG, "warm", .off = offsetof(bench_opts, warm),
	  .help = "keep cached pages (measure the page cache instead)" },
	{ CLI_FLAG, "json", .off = offsetof(bench_opts, json),
	  .help = "one JSON object on stdout instead of the table" },
	{ CLI_END },
};

static const cli_command bench_command = {
	.name = "loadbench regions",
	.usage = "usage: loadbench regions [options] [SUBDIR]\n",
	.about = "Reads the same sample of shard files from each declared mount (the\n"
		 "files under MOUNT/SUBDIR whose names all the mounts share: the mounts\n"
		 "compared are those --mount and --mounts declare) and prints one column\n"
		 "per mount: region, file system, MB/s, time to the first byte, read\n"
		 "latency, the ratio to the fastest in-region mount, and the estimated\n"
		 "egress cost.  Each file's cached pages are dropped first\n"
		 "(posix_fadvise), so a local disk is read from the disk.\n",
	.opts = bench_cli,
	.footer = "Exit status: 0 done, 1 a read failed, 2 bad usage.\n",
};

typedef struct pass_result {
	double seconds, first_byte_ms;
	uint64_t bytes;
	pf_region_stats st;
} pass_result;

typedef struct column {
	size_t mount;
	pf_mount_info mi;
	pf_region_info ri;
	char **paths;		/* the sample under this mount */
	pass_result *pass;	/* [repeat] */
	double mbps, first_byte_ms, p50, p99, seconds, ratio, cost;
	uint64_t bytes;
} column;

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A read pass's plan: the column's files one after the other, each whole
 * in reads of read_size, opened as its turn comes (an open is a round trip
 * too). */
typedef struct probe {
	const column *c;
	pf_io *io;
	size_t nfiles, file;
	int slot;		/* the current file's index in the engine, or -1 */
	uint64_t off;		/* its next read */
	size_t read_size;
	uint8_t *bufs;
	uint64_t first;		/* when the first bytes came, or 0 */
	uint64_t bytes;
} probe;

static int probe_next(void *ctx, unsigned r, pf_io_req *q, pf_error *err)
{
	probe *p = ctx;

	for (;;) {
		if (p->file >= p->nfiles)
			return 0;
		if (p->slot < 0) {
			p->slot = pf_io_add_file(p->io, p->c->paths[p->file], 0, err);
			if (p->slot < 0)
				return p->slot;
			p->off = 0;
		}
		if (p->off < pf_io_file_size(p->io, (uint32_t)p->slot))
			break;
		p->file++;
		p->slot = -1;
	}
	*q = (pf_io_req){ .file = (uint32_t)p->slot, .offset = p->off,
			  .len = (uint32_t)p->read_size,
			  .buf = p->bufs + (size_t)r * p->read_size, .buf_index = -1 };
	p->off += p->read_size;
	return 1;
}

static int probe_done(void *ctx, unsigned r, pf_io_req *q, pf_error *err)
{
	probe *p = ctx;

	(void)r;
	if (q->result < 0)
		return pf_io_req_error(p->io, q, err);
	if (!p->first)
		p->first = pf_now_ns();
	p->bytes += (uint64_t)q->result;
	return 0;
}

/* Read every sample file of one column whole through an I/O engine that
 * counts into the table.  @return 0, or 1 after printing why. */
static int read_pass(pf_region_table *t, const column *c, size_t nfiles, unsigned depth,
		     size_t read_size, bool warm, pass_result *out)
{
	pf_io_config cfg = { .queue_depth = depth, .regions = t };
	pf_io_req *reqs = calloc(depth, sizeof(*reqs));
	probe p = { .c = c, .nfiles = nfiles, .slot = -1, .read_size = read_size };
	pf_io_plan plan = { probe_next, probe_done, &p };
	uint64_t t0;
	pf_error err;
	int ret = 1;

	memset(out, 0, sizeof(*out));
	pf_error_clear(&err);
	if (!reqs || posix_memalign((void **)&p.bufs, 4096, depth * read_size)) {
		cli_fail("out of memory");
		goto out;
	}
	if (!warm) {
		for (size_t i = 0; i < nfiles; i++) {
			int fd = open(c->paths[i], O_RDONLY | O_CLOEXEC);

			if (fd >= 0) {
				posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
				close(fd);
			}
		}
	}
	if (pf_io_create(&p.io, &cfg, &err) < 0) {
		cli_print_error(&err);
		goto out;
	}
	pf_region_table_reset_stats(t);
	t0 = pf_now_ns();
	if (pf_io_run(p.io, reqs, depth, &plan, &err) < 0) {
		cli_print_error(&err);
		goto out;
	}
	out->seconds = (double)(pf_now_ns() - t0) * 1e-9;
	out->first_byte_ms = p.first ? (double)(p.first - t0) * 1e-6 : 0;
	out->bytes = p.bytes;
	pf_region_table_mount_stats(t, c->mount, &out->st);
	ret = 0;
out:
	pf_io_free(p.io);
	free(reqs);
	free(p.bufs);
	return ret;
}

/* The relative names of the regular files under dir (sorted), in *out.
 * @return the count, or -1 after printing why. */
static int list_names(const char *dir, char ***out)
{
	const char *args[1] = { dir };
	char **paths = NULL;
	size_t dlen = strlen(dir);
	pf_error err;
	int n;

	pf_error_clear(&err);
	n = pf_paths_expand(args, 1, &paths, &err);
	if (n < 0) {
		cli_print_error(&err);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const char *p = paths[i];

		if (!strncmp(p, dir, dlen))
			p += dlen;
		while (*p == '/')
			p++;
		memmove(paths[i], p, strlen(p) + 1);
	}
	qsort(paths, (size_t)n, sizeof(*paths), cmp_str);
	*out = paths;
	return n;
}

/* The tail of s when it is longer than w (so a path keeps its end). */
static const char *tail(const char *s, size_t w, char *buf, size_t cap)
{
	size_t n = strlen(s);

	if (n <= w)
		return s;
	snprintf(buf, cap, "...%s", s + n - (w - 3));
	return buf;
}

#define CELL 24

/* One row of the side-by-side table; fmt gets each column in turn. */
static void row(const char *label, const column *cols, size_t n,
		void (*cell)(const column *c, char *buf, size_t cap))
{
	printf("%-16s", label);
	for (size_t i = 0; i < n; i++) {
		char buf[128];

		cell(&cols[i], buf, sizeof(buf));
		printf(" %*s", CELL, buf);
	}
	putchar('\n');
}

static void cell_mount(const column *c, char *buf, size_t cap)
{
	char t[128];

	snprintf(buf, cap, "%s", tail(c->mi.path, CELL, t, sizeof(t)));
}

static void cell_region(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.16s (%s)", c->ri.label, kind_name(c->ri.kind));
}

static void cell_fs(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.24s", c->mi.fstype ? c->mi.fstype : "unknown");
}

static void cell_mb(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.1f", mb(c->bytes));
}

static void cell_seconds(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.3f", c->seconds);
}

static void cell_mbps(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.1f", c->mbps);
}

static void cell_ratio(const column *c, char *buf, size_t cap)
{
	if (c->ratio >= 0)
		snprintf(buf, cap, "%.3fx", c->ratio);
	else
		snprintf(buf, cap, "-");
}

static void cell_first(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.1f", c->first_byte_ms);
}

static void cell_p50(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.0f", c->p50);
}

static void cell_p99(const column *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.0f", c->p99);
}

static void cell_cost(const column *c, char *buf, size_t cap)
{
	if (c->ri.kind == PF_REGION_CROSS)
		snprintf(buf, cap, "$%.4f", c->cost);
	else
		snprintf(buf, cap, "-");
}

static void print_table(const column *cols, size_t n, size_t nsample, const char *subdir,
			unsigned repeat, const char *ratio_ref, double price, const char *host)
{
	printf("%zu file%s from each mount%s%s, read whole; host region %s%s\n", nsample,
	       nsample == 1 ? "" : "s", subdir ? " under " : "", subdir ? subdir : "",
	       host ? host : "not set", repeat > 1 ? "; medians of the passes" : "");
	row("mount", cols, n, cell_mount);
	row("region", cols, n, cell_region);
	row("file system", cols, n, cell_fs);
	row("MB read", cols, n, cell_mb);
	row("seconds", cols, n, cell_seconds);
	row("MB/s", cols, n, cell_mbps);
	row(ratio_ref, cols, n, cell_ratio);
	row("first byte ms", cols, n, cell_first);
	row("read p50 us", cols, n, cell_p50);
	row("read p99 us", cols, n, cell_p99);
	row("egress est.", cols, n, cell_cost);
	printf("(egress: an estimate at $%g/GiB from --egress-usd-per-gib, not a bill)\n", price);
}

static int print_json_table(const column *cols, size_t n, char **sample, size_t nsample,
			    const char *subdir, unsigned repeat, double price, const char *host)
{
	json_t *o = json_object(), *arr = json_array(), *c;
	bool bad = false;

	pf_json_put(o, "host", pf_json_str(host), &bad);
	pf_json_put(o, "subdir", pf_json_str(subdir), &bad);
	pf_json_put(o, "repeat", pf_json_u64(repeat), &bad);
	for (size_t i = 0; i < nsample; i++)
		if (json_array_append_new(arr, pf_json_str(sample[i])))
			bad = true;
	pf_json_put(o, "sample", arr, &bad);
	pf_json_put(o, "usd_per_gib", pf_json_num(price), &bad);
	arr = json_array();
	for (size_t i = 0; i < n; i++) {
		const column *col = &cols[i];

		c = json_object();
		pf_json_put(c, "path", pf_json_str(col->mi.path), &bad);
		pf_json_put(c, "region", pf_json_str(col->ri.name), &bad);
		pf_json_put(c, "kind", pf_json_str(kind_name(col->ri.kind)), &bad);
		pf_json_put(c, "fstype", pf_json_str(col->mi.fstype), &bad);
		pf_json_put(c, "bytes", pf_json_u64(col->bytes), &bad);
		pf_json_put(c, "seconds", pf_json_num(col->seconds), &bad);
		pf_json_put(c, "mb_per_s", pf_json_num(col->mbps), &bad);
		pf_json_put(c, "ratio", col->ratio >= 0 ? pf_json_num(col->ratio) : json_null(),
			    &bad);
		pf_json_put(c, "first_byte_ms", pf_json_num(col->first_byte_ms), &bad);
		pf_json_put(c, "read_p50_us", pf_json_num(col->p50), &bad);
		pf_json_put(c, "read_p99_us", pf_json_num(col->p99), &bad);
		pf_json_put(c, "egress_usd_estimate", col->ri.kind == PF_REGION_CROSS ?
			    pf_json_num(col->cost) : json_null(), &bad);
		if (json_array_append_new(arr, c))
			bad = true;
	}
	pf_json_put(o, "mounts", arr, &bad);
	return cli_json_print(o, bad);
}

int regions_main(int argc, char **argv)
{
	bench_opts o = { .sample = SAMPLE_DEFAULT, .depth = DEPTH_DEFAULT,
			 .read_size = READ_DEFAULT, .repeat = 1 };
	regions_opts ro;
	uint64_t nsample, depth, read_size, repeat;
	bool warm, json;
	const char *subdir = NULL;
	column *cols = NULL;
	size_t ncols = 0, nmounts;
	char **common = NULL;
	int ncommon = 0, nlisted = 0, ret, first;
	const char *ratio_ref = "vs fastest in";

	regions_defaults(&o.ro);
	ret = cli_parse(&bench_command, argc, argv, &o, &first);
	if (ret >= 0)
		return ret;
	ro = o.ro;
	nsample = o.sample;
	depth = o.depth;
	read_size = o.read_size;
	repeat = o.repeat;
	warm = o.warm;
	json = o.json;
	if (first + 1 < argc)
		return cli_usage("one SUBDIR at most ('%s' is one more)", argv[first + 1]);
	if (first < argc)
		subdir = argv[first];
	ret = regions_build_table(&ro);
	if (ret)
		goto out;
	ret = 2;
	nmounts = pf_region_table_mounts(ro.table);
	cols = calloc(nmounts, sizeof(*cols));
	if (!cols) {
		cli_fail("out of memory");
		goto out;
	}
	for (size_t m = 1; m < nmounts; m++) {
		pf_mount_info mi;

		pf_region_table_mount(ro.table, m, &mi);
		if (mi.origin != PF_MOUNT_FLAG && mi.origin != PF_MOUNT_FILE)
			continue;
		cols[ncols].mount = m;
		cols[ncols].mi = mi;
		pf_region_table_region(ro.table, mi.region_index, &cols[ncols].ri);
		ncols++;
	}
	if (!ncols) {
		cli_fail("no mounts to compare: declare them with --mount PATH=REGION or --mounts FILE");
		goto out;
	}

	/* The names every mount has, under SUBDIR. */
	ret = 1;
	for (size_t i = 0; i < ncols; i++) {
		char dir[8192], **names = NULL;
		int n, kept = 0;

		snprintf(dir, sizeof(dir), "%s%s%s", cols[i].mi.path, subdir ? "/" : "",
			 subdir ? subdir : "");
		n = list_names(dir, &names);
		if (n < 0)
			goto out;
		if (i == 0) {
			common = names;
			ncommon = nlisted = n;
			continue;
		}
		/* The names kept move to the front, in order; those dropped
		 * stay in the list (pf_paths_free() frees them). */
		for (int k = 0; k < ncommon; k++) {
			if (bsearch(&common[k], names, (size_t)n, sizeof(*names), cmp_str)) {
				char *keep = common[k];

				common[k] = common[kept];
				common[kept++] = keep;
			}
		}
		ncommon = kept;
		pf_paths_free(names, (size_t)n);
	}
	if (ncommon == 0) {
		cli_fail("the mounts have no file name in common%s%s", subdir ? " under " : "",
			 subdir ? subdir : "");
		goto out;
	}
	/* Spread the sample over the sorted names. */
	if (nsample > (uint64_t)ncommon)
		nsample = (uint64_t)ncommon;
	for (size_t k = 0; k < nsample; k++) {
		size_t from = k * (size_t)ncommon / nsample;
		char *keep = common[from];

		common[from] = common[k];
		common[k] = keep;
	}
	for (size_t i = 0; i < ncols; i++) {
		cols[i].paths = calloc(nsample, sizeof(char *));
		cols[i].pass = calloc(repeat, sizeof(pass_result));
		if (!cols[i].paths || !cols[i].pass) {
			cli_fail("out of memory");
			goto out;
		}
		for (size_t k = 0; k < nsample; k++) {
			if (asprintf(&cols[i].paths[k], "%s%s%s/%s", cols[i].mi.path,
				     subdir ? "/" : "", subdir ? subdir : "", common[k]) < 0) {
				cols[i].paths[k] = NULL;
				cli_fail("out of memory");
				goto out;
			}
		}
	}

	/* Interleaved: each pass visits the mounts in a rotated order. */
	for (unsigned p = 0; p < repeat; p++)
		for (size_t j = 0; j < ncols; j++) {
			column *col = &cols[(j + p) % ncols];

			if (read_pass(ro.table, col, nsample, (unsigned)depth, (size_t)read_size,
				      warm, &col->pass[p]))
				goto out;
		}

	double best_in = 0, best_any = 0;
	for (size_t i = 0; i < ncols; i++) {
		column *col = &cols[i];
		double v[BENCH_MAX_REPEAT];

		for (unsigned p = 0; p < repeat; p++)
			v[p] = col->pass[p].seconds;
		col->seconds = cli_median(v, (unsigned)repeat);
		for (unsigned p = 0; p < repeat; p++)
			v[p] = col->pass[p].seconds > 0 ? mb(col->pass[p].bytes) / col->pass[p].seconds : 0;
		col->mbps = cli_median(v, (unsigned)repeat);
		for (unsigned p = 0; p < repeat; p++)
			v[p] = col->pass[p].first_byte_ms;
		col->first_byte_ms = cli_median(v, (unsigned)repeat);
		for (unsigned p = 0; p < repeat; p++)
			v[p] = pf_io_stats_quantile_us(&col->pass[p].st.io, 0.50);
		col->p50 = cli_median(v, (unsigned)repeat);
		for (unsigned p = 0; p < repeat; p++)
			v[p] = pf_io_stats_quantile_us(&col->pass[p].st.io, 0.99);
		col->p99 = cli_median(v, (unsigned)repeat);
		col->bytes = col->pass[0].bytes;
		col->cost = (double)col->bytes / GIB * ro.usd_per_gib;
		if (col->ri.kind == PF_REGION_IN && col->mbps > best_in)
			best_in = col->mbps;
		if (col->mbps > best_any)
			best_any = col->mbps;
	}
	if (best_in <= 0)
		ratio_ref = "vs fastest";	/* no in-region mount to compare with */
	for (size_t i = 0; i < ncols; i++) {
		double ref = best_in > 0 ? best_in : best_any;

		cols[i].ratio = ref > 0 ? cols[i].mbps / ref : -1;
	}
	ret = 0;
	if (json)
		ret = print_json_table(cols, ncols, common, (size_t)nsample, subdir,
				       (unsigned)repeat, ro.usd_per_gib,
				       pf_region_table_host(ro.table));
	else
		print_table(cols, ncols, (size_t)nsample, subdir, (unsigned)repeat, ratio_ref,
			    ro.usd_per_gib, pf_region_table_host(ro.table));
out:
	for (size_t i = 0; cols && i < ncols; i++) {
		for (size_t k = 0; cols[i].paths && k < nsample; k++)
			free(cols[i].paths[k]);
		free(cols[i].paths);
		free(cols[i].pass);
	}
	free(cols);
	if (common)
		pf_paths_free(common, (size_t)nlisted);
	regions_free(&ro);
	return ret;
}
