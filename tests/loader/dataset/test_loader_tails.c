/* SPDX-License-Identifier: Apache-2.0 */
/* Planning without a manifest (loader/tails.c): the index tails of many
 * files read at once give the dataset that reading them one after another
 * (one file in flight) gives, on both back-ends; more files than the
 * engine's old 4,096-file table plan; a damaged tail fails naming the
 * first damaged file in file order and the byte offset, or in skip mode
 * is a drop told in file order and its shard read as the zstd stream it
 * also is; and the hint to write a manifest is one line, once. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan_internal.h"
#include "podfeed.h"
#include "testutil.h"

static const char *const backend_names[] = { "uring", "pread" };

static struct criterion_test_params both_backends(void)
{
	static int which[] = { 0, 1 };
	return cr_make_param_array(int, which, 2);
}

/* The dataset of the files under dir, with at most depth files in
 * flight on the back-end.  @return pf_dataset_open_shards()'s. */
static int open_depth(const char *dir, unsigned depth, const char *backend,
		      const pf_source_config *scfg, pf_dataset **ds, pf_error *err)
{
	const char *paths[1] = { dir };
	pf_io_config icfg = { .queue_depth = depth, .backend = backend };

	pf_error_clear(err);
	return pf_dataset_open_shards(ds, paths, 1, scfg, &(pf_open_config){ .io = &icfg }, err);
}

/* A mixed dataset of n files (ids from 0 in file order, *nids of them):
 * indexed shards of uneven sizes and frames, one with an index larger
 * than the first tail read, plain and gzip streams, an empty plain file. */
static const char *mixed_dataset(unsigned n, uint64_t *nids)
{
	const char *dir = tu_tmpdir_mem();
	uint64_t id = 0;
	char p[512];

	for (unsigned i = 0; i < n; i++) {
		uint64_t count = 1 + (i * 7) % 23;

		if (i == 5) {
			/* Frames of a few records: an index above PF_SHARD_TAIL_HINT. */
			count = 20000;
			snprintf(p, sizeof(p), "%s/part-%05u.tfrecord.zst", dir, i);
			tu_write_id_shard(p, id, count, 256, 0);
		} else if (i % 17 == 3) {
			snprintf(p, sizeof(p), "%s/part-%05u.tfrecord", dir, i);
			tu_write_id_stream(p, id, count, false);
		} else if (i % 29 == 4) {
			snprintf(p, sizeof(p), "%s/part-%05u.tfrecord.gz", dir, i);
			tu_write_id_stream(p, id, count, true);
		} else if (i == 9) {
			count = 0;
			snprintf(p, sizeof(p), "%s/part-%05u.tfrecord", dir, i);
			tu_write_file(p, "", 0);
		} else {
			snprintf(p, sizeof(p), "%s/part-%05u.tfrecord.zst", dir, i);
			tu_write_id_shard(p, id, count, 512 + 256 * (i % 5), i % 2 ? 0 : 4096);
		}
		id += count;
	}
	*nids = id;
	return dir;
}

static void assert_same_dataset(const pf_dataset *a, const pf_dataset *b)
{
	cr_assert_eq(a->nfiles, b->nfiles);
	cr_assert_eq(a->nunits, b->nunits);
	cr_assert_eq(a->records, b->records);
	cr_assert_eq(a->fingerprint, b->fingerprint);
	cr_assert_eq(a->any_stream, b->any_stream);
	cr_assert_eq(a->max_csize, b->max_csize);
	cr_assert_eq(a->max_usize, b->max_usize);
	cr_assert_eq(a->max_stream_record, b->max_stream_record);
	for (size_t i = 0; i < a->nfiles; i++) {
		cr_assert_str_eq(a->paths[i], b->paths[i]);
		cr_assert_eq(a->file_size[i], b->file_size[i], "%s", a->paths[i]);
		cr_assert_eq(!a->index[i], !b->index[i], "%s", a->paths[i]);
		cr_assert_eq(a->alignment[i], b->alignment[i], "%s", a->paths[i]);
	}
	for (uint64_t u = 0; u < a->nunits; u++) {
		const pf_unit *x = &a->units[u], *y = &b->units[u];

		cr_assert(x->file == y->file && x->frame == y->frame && x->stream == y->stream &&
			  x->records == y->records && x->offset == y->offset &&
			  x->csize == y->csize && x->usize == y->usize &&
			  x->crc32c == y->crc32c && x->first_record == y->first_record,
			  "unit %llu", (unsigned long long)u);
	}
}

ParameterizedTestParameters(tails, parallel_gives_the_serial_dataset)
{
	return both_backends();
}

/* 300 files read 64 at a time and one at a time: the same files, sizes,
 * units and records, and every record of the data counted. */
ParameterizedTest(int *which, tails, parallel_gives_the_serial_dataset, .timeout = 120)
{
	uint64_t nids;
	const char *dir = mixed_dataset(300, &nids);
	pf_source_config scfg = { 0 };
	pf_dataset *par, *ser;
	pf_error err;
	pf_epoch_plan pp = { 0 }, ps = { 0 };
	pf_topology t = { .host_index = 1, .num_hosts = 3, .cores = 2, .per_core_batch = 7 };

	cr_assert_eq(open_depth(dir, 64, backend_names[*which], &scfg, &par, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(open_depth(dir, 1, backend_names[*which], &scfg, &ser, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(par->nfiles, 300);
	cr_assert_eq(par->records, nids);
	cr_assert(par->any_stream);
	cr_assert_gt(pf_shard_index_frames(par->index[5]), 2000, "the large index");
	assert_same_dataset(par, ser);
	/* And so the same plan. */
	cr_assert_eq(pf_plan_epoch(&pp, par, &t, 5, 1, true, 0, 0, PF_REMAINDER_DROP), 0);
	cr_assert_eq(pf_plan_epoch(&ps, ser, &t, 5, 1, true, 0, 0, PF_REMAINDER_DROP), 0);
	cr_assert_eq(pp.nseg, ps.nseg);
	cr_assert_eq(memcmp(pp.seg, ps.seg, pp.nseg * sizeof(*pp.seg)), 0);
	pf_plan_release(&pp);
	pf_plan_release(&ps);
	pf_dataset_free(par);
	pf_dataset_free(ser);
}

ParameterizedTestParameters(tails, more_files_than_the_old_table)
{
	return both_backends();
}

/* 4,500 shards without a manifest: planned (the old engine's table held
 * 4,096 files), and the hint to write a manifest said once, naming the
 * directory, however often the dataset is opened (pf_dataset_open(),
 * which looked for a manifest and found none). */
ParameterizedTest(int *which, tails, more_files_than_the_old_table, .timeout = 240)
{
	const unsigned n = 4500;
	const char *dir = tu_tmpdir_mem();
	const char *log = tu_tmpdir();
	pf_source_config scfg = { 0 };
	char p[512], *text;
	size_t len;
	int saved, fd;

	for (unsigned i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "%s/part-%05u.tfrecord.zst", dir, i);
		tu_write_id_shard(p, (uint64_t)i * 2, 2, 1024, 0);
	}
	snprintf(p, sizeof(p), "%s/stderr", log);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	close(fd);
	for (int k = 0; k < 2; k++) {
		const char *paths[1] = { dir };
		pf_io_config icfg = { .backend = backend_names[*which] };
		pf_dataset *ds;
		pf_error err;
		int ret;

		pf_error_clear(&err);
		ret = pf_dataset_open(&ds, paths, 1, &scfg, &(pf_open_config){ .io = &icfg }, &err);

		if (ret < 0) {
			fflush(stderr);
			dup2(saved, STDERR_FILENO);
		}
		cr_assert_eq(ret, 0, "%s: %s", err.file, err.msg);
		cr_assert_eq(ds->nfiles, n);
		cr_assert_eq(ds->records, 2 * n);
		cr_assert_eq(ds->nunits, n);
		pf_dataset_free(ds);
	}
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	text = (char *)tu_read_file(p, &len);
	text = realloc(text, len + 1);
	text[len] = '\0';
	cr_assert(strstr(text, "podfeed: planned 4500 files from their index tails"), "%s", text);
	snprintf(p, sizeof(p), "`shardtool manifest %s`", dir);
	cr_assert(strstr(text, p), "%s", text);
	cr_assert(strchr(text, '\n') == text + len - 1, "one line: %s", text);
	free(text);
}

typedef struct drops_seen {
	char file[8][PF_PATH_MAX];
	uint64_t start[8];
	unsigned n;
} drops_seen;

static int on_drop(void *ctx, const pf_drop *d)
{
	drops_seen *s = ctx;

	if (s->n < 8) {
		snprintf(s->file[s->n], sizeof(s->file[0]), "%s", d->cause.file);
		s->start[s->n] = d->start;
	}
	s->n++;
	return 0;
}

/* Flip a byte of the shard's index, where its tail read finds it. */
static void damage_index(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDWR);
	uint8_t b;

	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(pread(fd, &b, 1, st.st_size - 40), 1);
	b ^= 0x5a;
	cr_assert_eq(pwrite(fd, &b, 1, st.st_size - 40), 1);
	close(fd);
}

ParameterizedTestParameters(tails, a_damaged_tail_names_the_file_and_offset)
{
	return both_backends();
}

/* Two damaged indexes among 200 shards read 64 at a time: fail mode names
 * the first in file order (whichever was read first) and a byte offset
 * (the frame the index and the seek table disagree on); skip mode drops both indexes, told in file order, and reads
 * their records from the zstd stream. */
ParameterizedTest(int *which, tails, a_damaged_tail_names_the_file_and_offset, .timeout = 120)
{
	const char *dir = tu_tmpdir_mem();
	char bad[2][512];
	drops_seen seen = { .n = 0 };
	pf_source_config scfg = { 0 };
	pf_dataset *ds;
	pf_error err;
	struct stat st;
	int ret;

	for (unsigned i = 0; i < 200; i++) {
		char p[512];

		snprintf(p, sizeof(p), "%s/part-%05u.tfrecord.zst", dir, i);
		tu_write_id_shard(p, (uint64_t)i * 40, 40, 512, 0);
	}
	snprintf(bad[0], sizeof(bad[0]), "%s/part-%05u.tfrecord.zst", dir, 150u);
	snprintf(bad[1], sizeof(bad[1]), "%s/part-%05u.tfrecord.zst", dir, 170u);
	damage_index(bad[1]);
	damage_index(bad[0]);
	cr_assert_eq(stat(bad[0], &st), 0);
	for (int k = 0; k < 3; k++) {
		ret = open_depth(dir, 64, backend_names[*which], &scfg, &ds, &err);
		cr_assert_eq(ret, -EBADMSG, "%d %s", ret, err.msg);
		cr_assert_str_eq(err.file, bad[0], "%s", err.msg);
		cr_assert_eq(err.offset_kind, PF_OFFSET_FILE, "%s", err.msg);
		cr_assert_lt(err.offset, (uint64_t)st.st_size, "%s", err.msg);
	}

	scfg.on_corrupt = PF_CORRUPT_SKIP;
	scfg.on_drop = on_drop;
	scfg.on_drop_ctx = &seen;
	ret = open_depth(dir, 64, backend_names[*which], &scfg, &ds, &err);
	cr_assert_eq(ret, 0, "%d %s: %s (%u drops)", ret, err.file, err.msg, seen.n);
	cr_assert_eq(seen.n, 2);
	cr_assert_str_eq(seen.file[0], bad[0]);
	cr_assert_str_eq(seen.file[1], bad[1]);
	cr_assert_eq(ds->records, 200 * 40, "the damaged shards read as streams");
	cr_assert_null(ds->index[150]);
	cr_assert_null(ds->index[170]);
	cr_assert_not_null(ds->index[160]);
	pf_dataset_free(ds);
}

ParameterizedTestParameters(tails, a_failed_open_is_named)
{
	return both_backends();
}

/* The 30th open fails (an injected ENOENT; opens start in file order)
 * while others are in flight: the 30th file is named, and no later one. */
ParameterizedTest(int *which, tails, a_failed_open_is_named, .timeout = 60)
{
	const char *dir = tu_tmpdir_mem();
	char p[512];
	const char *paths[1] = { dir };
	pf_io_config icfg = { .backend = backend_names[*which], .faults = "open-enoent@30" };
	pf_source_config scfg = { 0 };
	pf_dataset *ds;
	pf_error err;
	int ret;

	for (unsigned i = 0; i < 200; i++) {
		snprintf(p, sizeof(p), "%s/part-%05u.tfrecord.zst", dir, i);
		tu_write_id_shard(p, (uint64_t)i * 3, 3, 512, 0);
	}
	pf_error_clear(&err);
	ret = pf_dataset_open_shards(&ds, paths, 1, &scfg, &(pf_open_config){ .io = &icfg }, &err);
	cr_assert_eq(ret, -ENOENT, "%d %s", ret, err.msg);
	snprintf(p, sizeof(p), "%s/part-%05u.tfrecord.zst", dir, 29u);
	cr_assert_str_eq(err.file, p, "%s", err.msg);
	cr_assert(strstr(err.msg, "cannot open"), "%s", err.msg);
}
