/* SPDX-License-Identifier: Apache-2.0 */
/* The loader end to end: order independent of threads and runs, equal
 * steps on every host over uneven shards, every record once, errors that
 * name the file, the memory budget, holding too many batches, O_DIRECT, a
 * spec feature the data lacks, an index larger than the first tail read.
 * Stream files read through the I/O engine in blocks are
 * test_loader_streams.c's. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline_util.h"
#include "podfeed.h"
#include "testutil.h"

Test(loader, same_batches_at_every_thread_count_and_every_run, .timeout = 120)
{
	uint64_t nids;
	const char *d = pl_uneven_dataset(&nids);
	pl_run_result ref, r;
	unsigned threads[] = { 1, 2, 4, 1 };

	for (size_t i = 0; i < 4; i++) {
		pf_loader_config cfg = { .per_core_batch = 32, .cores_per_host = 2,
					 .shuffle = true, .shuffle_window = 500, .seed = 42,
					 .epochs = 2, .threads = threads[i] };
		pl_run(d, &cfg, nids, i ? &r : &ref);
		cr_assert_eq((i ? r : ref).ret, 0, "%s", (i ? r : ref).err.msg);
		if (i) {
			cr_assert_eq(r.steps, ref.steps);
			cr_assert_eq(r.digest, ref.digest, "threads %u differ", threads[i]);
			free(r.seen);
		}
	}
	/* 13789 records, global batch 64: 215 steps an epoch, 29 dropped. */
	cr_assert_eq(ref.steps, 2 * (nids / 64));
	cr_assert_eq(ref.dropped, 2 * (nids % 64));
	/* Checking every record's data CRC changes nothing on good data. */
	{
		pf_loader_config vc = { .per_core_batch = 32, .cores_per_host = 2,
					.shuffle = true, .shuffle_window = 500, .seed = 42,
					.epochs = 2, .threads = 2, .verify_records = true };
		pl_run(d, &vc, nids, &r);
		cr_assert_eq(r.ret, 0, "%s", r.err.msg);
		cr_assert_eq(r.digest, ref.digest);
		free(r.seen);
	}
	/* Shuffled: a different seed gives a different order. */
	pf_loader_config cfg = { .per_core_batch = 32, .cores_per_host = 2, .shuffle = true,
				 .shuffle_window = 500, .seed = 43, .epochs = 2, .threads = 2 };
	pl_run(d, &cfg, nids, &r);
	cr_assert_neq(r.digest, ref.digest);
	free(r.seen);
	free(ref.seen);
}

static void check_hosts(const char *d, uint64_t nids, uint32_t hosts, bool shuffle,
			uint32_t cores, uint32_t b)
{
	uint8_t *total = calloc(nids ? nids : 1, 1);
	uint64_t steps = UINT64_MAX, delivered = 0, dropped = 0;

	for (uint32_t h = 0; h < hosts; h++) {
		pf_loader_config cfg = { .per_core_batch = b, .cores_per_host = cores,
					 .host_index = h, .num_hosts = hosts,
					 .shuffle = shuffle, .seed = 7, .threads = 2 };
		pl_run_result r;

		pl_run(d, &cfg, nids, &r);
		cr_assert_eq(r.ret, 0, "host %u/%u: %s", h, hosts, r.err.msg);
		if (steps == UINT64_MAX)
			steps = r.steps;
		cr_assert_eq(r.steps, steps, "host %u of %u: %llu steps, host 0 %llu",
			     h, hosts, (unsigned long long)r.steps, (unsigned long long)steps);
		for (uint64_t i = 0; i < nids; i++)
			total[i] += r.seen[i];
		delivered += r.records;
		dropped += r.dropped;
		free(r.seen);
	}
	uint64_t global = (uint64_t)hosts * cores * b;
	cr_assert_eq(steps, nids / global, "%u hosts: %llu steps, want %llu", hosts,
		     (unsigned long long)steps, (unsigned long long)(nids / global));
	for (uint64_t i = 0; i < nids; i++)
		cr_assert_leq(total[i], 1, "record %llu delivered %u times (%u hosts)",
			      (unsigned long long)i, total[i], hosts);
	/* The union is the epoch minus the reported remainder. */
	cr_assert_eq(delivered + dropped, nids, "%u hosts", hosts);
	free(total);
}

Test(loader, hosts_get_equal_steps_and_disjoint_records, .timeout = 240)
{
	uint64_t nids;
	const char *d = pl_uneven_dataset(&nids);
	uint32_t hosts[] = { 1, 2, 3, 8 };

	for (size_t i = 0; i < 4; i++) {
		check_hosts(d, nids, hosts[i], false, 2, 16);
		check_hosts(d, nids, hosts[i], true, 1, 24);
	}
}

Test(loader, fewer_shards_than_hosts_and_stream_files, .timeout = 120)
{
	const char *d = tu_tmpdir();
	char p[512];

	/* Two indexed shards, a plain stream and a gzip stream: 4 files. */
	snprintf(p, sizeof(p), "%s/a.tfrecord.zst", d);
	tu_write_id_shard(p, 0, 300, 1 << 20, 0);
	snprintf(p, sizeof(p), "%s/b.tfrecord", d);
	tu_write_id_stream(p, 300, 200, false);
	snprintf(p, sizeof(p), "%s/c.tfrecord.gz", d);
	tu_write_id_stream(p, 500, 250, true);
	snprintf(p, sizeof(p), "%s/d.tfrecord.zst", d);
	tu_write_id_shard(p, 750, 5, 1 << 20, 0);
	check_hosts(d, 755, 8, false, 1, 8);
	check_hosts(d, 755, 8, true, 2, 4);
	check_hosts(d, 755, 3, true, 1, 10);
}

Test(loader, only_stream_files, .timeout = 120)
{
	const char *d = tu_tmpdir();
	char p[512];

	snprintf(p, sizeof(p), "%s/a.tfrecord", d);
	tu_write_id_stream(p, 0, 400, false);
	snprintf(p, sizeof(p), "%s/b.tfrecord.gz", d);
	tu_write_id_stream(p, 400, 100, true);
	check_hosts(d, 500, 1, false, 2, 8);
	check_hosts(d, 500, 2, true, 1, 16);
}

Test(loader, wrap_fills_the_last_step)
{
	uint64_t nids;
	const char *d = pl_uneven_dataset(&nids);
	pf_loader_config cfg = { .per_core_batch = 100, .remainder = PF_REMAINDER_WRAP,
				 .threads = 2 };
	pl_run_result r;

	pl_run(d, &cfg, nids, &r);
	cr_assert_eq(r.ret, 0, "%s", r.err.msg);
	cr_assert_eq(r.steps, (nids + 99) / 100);
	for (uint64_t i = 0; i < nids; i++)
		cr_assert_geq(r.seen[i], 1, "record %llu missing", (unsigned long long)i);
	free(r.seen);
}

Test(loader, max_steps_and_epochs)
{
	uint64_t nids;
	const char *d = pl_uneven_dataset(&nids);
	pf_loader_config cfg = { .per_core_batch = 50, .epochs = 3, .max_steps = 300,
				 .threads = 2 };
	pl_run_result r;

	pl_run(d, &cfg, nids, &r);
	cr_assert_eq(r.ret, 0, "%s", r.err.msg);
	cr_assert_eq(r.steps, 300);
	free(r.seen);
}

Test(loader, errors_name_the_file)
{
	const char *d = tu_tmpdir();
	char p[512], q[512];
	pl_run_result r;
	pf_loader_config cfg = { .per_core_batch = 8, .threads = 2 };

	/* Missing file. */
	snprintf(p, sizeof(p), "%s/missing.tfrecord.zst", d);
	{
		const char *paths[1] = { p };
		pf_loader *l;
		pf_error err;
		cfg.paths = paths;
		cfg.npaths = 1;
		cfg.features = "id:int64[1]";
		pf_error_clear(&err);
		cr_assert_eq(pf_loader_create(&l, &cfg, &err), -ENOENT);
		cr_assert_str_eq(err.file, p);
	}
	/* Unreadable file (root reads anything: make it a directory-less
	 * path with a file where a directory should be). */
	snprintf(q, sizeof(q), "%s/f", d);
	tu_write_file(q, "x", 1);
	snprintf(p, sizeof(p), "%s/f/sub.tfrecord", d);
	{
		const char *paths[1] = { p };
		pf_loader *l;
		pf_error err;
		cfg.paths = paths;
		pf_error_clear(&err);
		cr_assert_lt(pf_loader_create(&l, &cfg, &err), 0);
		cr_assert_str_eq(err.file, p);
	}
	/* A corrupt frame: the error comes from next(), with file and offset. */
	const char *cd = tu_tmpdir();
	snprintf(p, sizeof(p), "%s/bad.tfrecord.zst", cd);
	tu_write_id_shard(p, 0, 2000, 4096, 0);
	int fd = open(p, O_WRONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "\xff\xff\xff\xff", 4, 10000), 4);
	close(fd);
	cfg.features = NULL;
	pl_run(cd, &cfg, 2000, &r);
	cr_assert_eq(r.ret, -EBADMSG, "%d %s", r.ret, r.err.msg);
	cr_assert_str_eq(r.err.file, p);
	cr_assert_eq(r.err.offset_kind, PF_OFFSET_FILE);
	cr_assert_leq(r.err.offset, 10000);
	cr_assert(strstr(r.err.msg, "CRC"), "%s", r.err.msg);
	free(r.seen);
}

Test(loader, bad_config_is_refused)
{
	uint64_t nids;
	const char *d = pl_uneven_dataset(&nids);
	const char *paths[1] = { d };
	pf_loader *l;
	pf_error err;
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 8,
				 .features = "id:int64[1]", .host_index = 4, .num_hosts = 4 };

	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "host index 4"), "%s", err.msg);
	cfg.host_index = 0;
	cfg.features = "id:int99[1]";
	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -EINVAL);
	cfg.features = "id:int64[1]";
	cfg.shuffle = true;
	cfg.shuffle_window = 0xfffffff0u;
	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "shuffle window"), "%s", err.msg);
	cfg.shuffle = false;
	cfg.memory_budget = 4096;
	pf_error_clear(&err);
	cfg.features = "id:int64[1],v:float32[4]:pad=-1";
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -ENOMEM);
	cr_assert(strstr(err.msg, "memory budget"), "%s", err.msg);
}

/* Every window (shuffle block) size, whole or not a multiple of the host
 * batch, smaller or larger than a frame or the whole epoch: each epoch
 * still delivers every record at most once, and the rest is the reported
 * remainder. */
Test(loader, every_window_delivers_each_record_once, .timeout = 240)
{
	uint64_t nids;
	const char *d = pl_uneven_dataset(&nids);
	const uint32_t windows[] = { 1, 2, 7, 63, 500, 4096, 100000 };
	const uint32_t shapes[][2] = { { 3, 5 }, { 1, 64 } };	/* cores, per-core */

	for (size_t s = 0; s < 2; s++) {
		for (size_t i = 0; i < sizeof(windows) / sizeof(windows[0]); i++) {
			pf_loader_config cfg = { .cores_per_host = shapes[s][0],
						 .per_core_batch = shapes[s][1],
						 .shuffle = true, .shuffle_window = windows[i],
						 .seed = 9, .threads = 2 };
			uint64_t hb = (uint64_t)shapes[s][0] * shapes[s][1];
			pl_run_result r;

			pl_run(d, &cfg, nids, &r);
			cr_assert_eq(r.ret, 0, "window %u: %s", windows[i], r.err.msg);
			cr_assert_eq(r.steps, nids / hb, "window %u", windows[i]);
			for (uint64_t k = 0; k < nids; k++)
				cr_assert_leq(r.seen[k], 1, "window %u: record %llu twice",
					      windows[i], (unsigned long long)k);
			cr_assert_eq(r.records + r.dropped, nids, "window %u", windows[i]);
			free(r.seen);
		}
	}
}

/* The batch slots cover the blocks of a few frames past the one being
 * drained (so that every decoder has a frame with a small window); a
 * budget without room for that gets the fewest slots that work, with
 * the same batches. */
Test(loader, a_tight_budget_gets_fewer_slots_and_the_same_batches, .timeout = 120)
{
	uint64_t nids;
	const char *d = pl_uneven_dataset(&nids);
	pf_loader_config cfg = { .cores_per_host = 2, .per_core_batch = 8, .shuffle = true,
				 .shuffle_window = 16, .seed = 5, .epochs = 2, .threads = 2,
				 .io_depth = 1 };
	pl_run_result ref, r;

	/* One read in flight: the depth cannot give, only the slots can. */
	pl_run(d, &cfg, nids, &ref);
	cr_assert_eq(ref.ret, 0, "%s", ref.err.msg);
	cfg.memory_budget = ref.m.memory_bytes - 1;
	pl_run(d, &cfg, nids, &r);
	cr_assert_eq(r.ret, 0, "%s", r.err.msg);
	cr_assert_lt(r.m.memory_bytes, ref.m.memory_bytes);
	cr_assert_eq(r.steps, ref.steps);
	cr_assert_eq(r.digest, ref.digest);
	free(ref.seen);
	free(r.seen);
}

/* The window shuffle moves records: the same frame order with and
 * without it gives different batches, and two epochs differ. */
Test(loader, the_window_shuffles_records)
{
	uint64_t nids;
	const char *d = pl_uneven_dataset(&nids);
	pf_loader_config cfg = { .per_core_batch = 64, .shuffle = true,
				 .shuffle_window = 1, .seed = 5, .threads = 2 };
	pl_run_result a, b;

	pl_run(d, &cfg, nids, &a);
	cfg.shuffle_window = 256;
	pl_run(d, &cfg, nids, &b);
	cr_assert_eq(a.ret, 0, "%s", a.err.msg);
	cr_assert_eq(b.ret, 0, "%s", b.err.msg);
	cr_assert_neq(a.digest, b.digest);
	free(a.seen);
	free(b.seen);
}

/* max_steps reads only what the steps need (up to one shuffle block
 * ahead), not the whole epoch. */
Test(loader, max_steps_reads_little)
{
	uint64_t nids;
	const char *d = pl_uneven_dataset(&nids);
	const char *paths[1] = { d };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 16,
				 .features = "id:int64[1]", .max_steps = 2, .threads = 2,
				 .shuffle = true, .shuffle_window = 32 };
	pf_loader_metrics full, few;
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	int ret;

	for (int pass = 0; pass < 2; pass++) {
		cfg.max_steps = pass ? 2 : 0;
		pf_error_clear(&err);
		cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
		while ((ret = pf_loader_next(l, &b)) == 1)
			pf_loader_release(l, b);
		cr_assert_eq(ret, 0);
		pf_loader_get_metrics(l, pass ? &few : &full);
		pf_loader_free(l);
	}
	cr_assert_eq(few.steps, 2);
	cr_assert_lt(few.bytes_read * 4, full.bytes_read,
		     "2 steps read %llu bytes, the epoch %llu",
		     (unsigned long long)few.bytes_read, (unsigned long long)full.bytes_read);
}

/* The ids of batch b, appended to ids[*n]. */
static void take_ids(const pf_batch *b, int64_t *ids, size_t *n, size_t cap)
{
	for (uint32_t c = 0; c < b->cores; c++) {
		const int64_t *v = b->core[c].tensors[0].data;

		for (uint32_t i = 0; i < b->per_core_batch; i++) {
			cr_assert_lt(*n, cap);
			ids[(*n)++] = v[i];
		}
	}
}

/* A consumer may hold prefetch + 1 batches; asking for more is an error
 * that says so, not a hang, and changes nothing: after a release the
 * loader goes on with exactly the batches of a run without the mistake. */
Test(loader, holding_too_many_batches_is_an_error_that_changes_nothing, .timeout = 60)
{
	uint64_t nids;
	const char *d = pl_uneven_dataset(&nids);
	const char *paths[1] = { d };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 16,
				 .features = "id:int64[1]", .prefetch = 1, .threads = 2,
				 .shuffle = true, .seed = 3, .epochs = 2 };
	size_t cap = 2 * (size_t)nids + 64, nclean = 0, nmistake = 0;
	int64_t *clean = calloc(cap, sizeof(*clean)), *mistake = calloc(cap, sizeof(*mistake));
	pf_loader *l;
	pf_batch *b[3];
	pf_error err;
	const pf_error *e;
	int ret;

	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while ((ret = pf_loader_next(l, &b[0])) == 1) {
		take_ids(b[0], clean, &nclean, cap);
		pf_loader_release(l, b[0]);
	}
	cr_assert_eq(ret, 0);
	pf_loader_free(l);

	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_loader_next(l, &b[0]), 1);
	cr_assert_eq(pf_loader_next(l, &b[1]), 1);
	cr_assert_null(pf_loader_last_error(l));
	for (int again = 0; again < 3; again++) {
		b[2] = NULL;
		cr_assert_eq(pf_loader_next(l, &b[2]), -EBUSY);
		cr_assert_null(b[2], "no batch taken");
		e = pf_loader_last_error(l);
		cr_assert_not_null(e);
		cr_assert_eq(e->code, -EBUSY);
		cr_assert_str_eq(e->msg, "2 batches held, at most prefetch + 1 = 2; "
			     "release one first");
	}
	take_ids(b[0], mistake, &nmistake, cap);
	pf_loader_release(l, b[0]);
	take_ids(b[1], mistake, &nmistake, cap);
	cr_assert_eq(pf_loader_next(l, &b[2]), 1, "the loader goes on after a release");
	cr_assert_null(pf_loader_last_error(l), "the mistake is forgotten");
	pf_loader_release(l, b[1]);
	take_ids(b[2], mistake, &nmistake, cap);
	pf_loader_release(l, b[2]);
	while ((ret = pf_loader_next(l, &b[0])) == 1) {
		take_ids(b[0], mistake, &nmistake, cap);
		pf_loader_release(l, b[0]);
	}
	cr_assert_eq(ret, 0, "%s", pf_loader_last_error(l) ? pf_loader_last_error(l)->msg : "");
	pf_loader_free(l);
	cr_assert_gt(nclean, 0);
	cr_assert_eq(nmistake, nclean, "%zu records, %zu without the mistake", nmistake, nclean);
	cr_assert_eq(memcmp(mistake, clean, nclean * sizeof(*clean)), 0,
		     "the same batches as a run without the mistake");
	free(clean);
	free(mistake);
}

/* O_DIRECT end to end: aligned shards are read with it (an unaligned one
 * in the same dataset is read through the page cache), and the batches
 * are the same as without it. */
Test(loader, direct_io_reads_aligned_shards, .timeout = 120)
{
	const char *d = tu_tmpdir();
	char p[512];
	pl_run_result a, b;
	int fd;

	snprintf(p, sizeof(p), "%s/a.tfrecord.zst", d);
	tu_write_id_shard(p, 0, 3000, 8192, 4096);
	fd = open(p, O_RDONLY | O_DIRECT);
	if (fd < 0)
		cr_skip_test("the filesystem under %s refuses O_DIRECT (%s)", d,
			     strerror(errno));
	close(fd);
	snprintf(p, sizeof(p), "%s/b.tfrecord.zst", d);
	tu_write_id_shard(p, 3000, 2000, 8192, 8192);
	snprintf(p, sizeof(p), "%s/c.tfrecord.zst", d);
	tu_write_id_shard(p, 5000, 1000, 8192, 0);

	pf_loader_config cfg = { .per_core_batch = 32, .cores_per_host = 2, .shuffle = true,
				 .seed = 3, .threads = 2, .direct_io = true };
	pl_run(d, &cfg, 6000, &a);
	cr_assert_eq(a.ret, 0, "%s", a.err.msg);
	cr_assert_eq(a.files_direct, 2, "aligned shards read with O_DIRECT: %u", a.files_direct);
	cfg.direct_io = false;
	pl_run(d, &cfg, 6000, &b);
	cr_assert_eq(b.ret, 0, "%s", b.err.msg);
	cr_assert_eq(b.files_direct, 0);
	cr_assert_eq(a.digest, b.digest, "O_DIRECT changed the batches");
	cr_assert_eq(a.records + a.dropped, 6000);
	free(a.seen);
	free(b.seen);
}

/* A long stream file read without shuffling: its blocks (one host batch
 * each) far outnumber the ring; each sub-segment opens only the blocks
 * it reaches.  (This hung when the whole segment's blocks were opened
 * before its first read.) */
Test(loader, long_stream_file_without_shuffle, .timeout = 60)
{
	const char *d = tu_tmpdir();
	char p[512];
	pl_run_result r;

	snprintf(p, sizeof(p), "%s/long.tfrecord", d);
	tu_write_id_stream(p, 0, 4000, false);
	for (int pass = 0; pass < 3; pass++) {
		pf_loader_config cfg = { .per_core_batch = 100, .threads = 2,
					 .shuffle = pass == 2, .shuffle_window = 150,
					 .max_steps = pass == 1 ? 7 : 0 };
		pl_run(d, &cfg, 4000, &r);
		cr_assert_eq(r.ret, 0, "pass %d: %s", pass, r.err.msg);
		cr_assert_eq(r.steps, pass == 1 ? 7 : 40, "pass %d", pass);
		if (pass != 1)
			for (uint64_t i = 0; i < 4000; i++)
				cr_assert_eq(r.seen[i], 1, "pass %d: record %llu", pass,
					     (unsigned long long)i);
		free(r.seen);
	}
}

/* A plain TFRecord file of records holding only {"id": [id]}. */
static void write_id_only_stream(const char *path, uint64_t first, uint64_t count)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f, "%s", path);
	for (uint64_t i = 0; i < count; i++) {
		int64_t idv = (int64_t)(first + i);
		pf_feature feat = { .name = "id", .name_len = 2, .kind = PF_KIND_INT64,
				    .count = 1, .v.int64s = &idv };
		uint8_t rec[64], framed[64 + PF_TFR_OVERHEAD];
		int64_t n = pf_example_encode(&feat, 1, rec, sizeof(rec));
		size_t fl;

		cr_assert_gt(n, 0);
		fl = pf_tfr_encode(framed, sizeof(framed), rec, (size_t)n);
		cr_assert_eq(fwrite(framed, 1, fl, f), fl);
	}
	cr_assert_eq(fclose(f), 0);
}

static int create_with(const char *path, const char *features, pf_corrupt_policy pol,
		       pf_loader **l, pf_error *err)
{
	const char *paths[1] = { path };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .features = features,
				 .per_core_batch = 10, .threads = 2, .on_corrupt = pol };

	pf_error_clear(err);
	return pf_loader_create(l, &cfg, err);
}

/* As tf.io.FixedLenFeature: a spec feature without default= that the data
 * lacks is an error naming it (at create time from an index's schema, else
 * at the first record without it), never rows of padding; default= makes
 * it optional. */
Test(loader, a_spec_feature_the_data_lacks_is_named, .timeout = 120)
{
	const char *d = tu_tmpdir();
	char raw[512], shard[512], mixed[512];
	pf_loader *l = NULL;
	pf_batch *b;
	pf_error err;

	/* An indexed shard with the schema {id, v} (convert infers it). */
	snprintf(raw, sizeof(raw), "%s/raw", d);
	cr_assert_eq(tu_system("mkdir -p %s", raw), 0);
	snprintf(shard, sizeof(shard), "%s/raw/a.tfrecord", d);
	tu_write_id_stream(shard, 0, 100, false);
	cr_assert_eq(tu_system("%s convert --shards 1 --out %s/z %s >/dev/null",
			       tu_env_tool("SHARDTOOL"), d, raw), 0);
	snprintf(shard, sizeof(shard), "%s/z/part-00000-of-00001.tfrecord.zst", d);

	/* A misspelled name fails create, with the shard, the schema and a
	 * near name; 'required' changes nothing. */
	cr_assert_eq(create_with(shard, "idd:int64[1],v:float32[3]", PF_CORRUPT_FAIL, &l, &err),
		     -ENOMSG);
	cr_assert_str_eq(err.file, shard);
	cr_assert_str_eq(err.msg, "feature spec: 'idd' is not in the shard's schema (id, v); "
			 "did you mean 'id'? a feature with :default=V may be absent");
	cr_assert_eq(create_with(shard, "v:float32[3],xyzzy:int32[2]:required", PF_CORRUPT_SKIP,
				 &l, &err), -ENOMSG);
	cr_assert(strstr(err.msg, "'xyzzy' is not in the shard's schema (id, v); a feature"),
		  "%s", err.msg);
	/* With a default it is optional: a row of the default. */
	cr_assert_eq(create_with(shard, "id:int64[1],idd:int64[2]:pad=5:default=-7",
				 PF_CORRUPT_FAIL, &l, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_loader_next(l, &b), 1);
	for (uint32_t i = 0; i < 2 * b->per_core_batch; i++)
		cr_assert_eq(((const int64_t *)b->core[0].tensors[1].data)[i], -7);
	pf_loader_release(l, b);
	pf_loader_free(l);

	/* Some records lack it: the index says how many. */
	snprintf(mixed, sizeof(mixed), "%s/raw/b.tfrecord", d);
	write_id_only_stream(mixed, 100, 30);
	cr_assert_eq(tu_system("%s convert --shards 1 --out %s/m %s >/dev/null",
			       tu_env_tool("SHARDTOOL"), d, raw), 0);
	snprintf(shard, sizeof(shard), "%s/m/part-00000-of-00001.tfrecord.zst", d);
	cr_assert_eq(create_with(shard, "id:int64[1],v:float32[3]", PF_CORRUPT_FAIL, &l, &err),
		     -ENOMSG);
	cr_assert_str_eq(err.msg, "feature spec: 'v' is missing from 30 of the 130 records "
			 "(by the shard's index): give it :default=V to make it optional");

	/* A stream file has no schema: the first record without the feature
	 * stops the loader, naming the file, the record, its byte and what
	 * the record has; skip mode does not drop it as damage. */
	for (int pol = 0; pol < 2; pol++) {
		cr_assert_eq(create_with(mixed, "id:int64[1],v:float32[3]",
					 pol ? PF_CORRUPT_SKIP : PF_CORRUPT_FAIL, &l, &err), 0,
			     "%s", err.msg);
		int ret;
		while ((ret = pf_loader_next(l, &b)) == 1)
			pf_loader_release(l, b);
		cr_assert_eq(ret, -ENOMSG);
		const pf_error *le = pf_loader_last_error(l);
		cr_assert_str_eq(le->file, mixed);
		cr_assert_geq(le->record, 0);
		cr_assert_lt(le->record, 30);
		cr_assert_eq(le->offset_kind, PF_OFFSET_STREAM);
		/* the record's header: record k of these starts past byte 28 k */
		cr_assert(le->record ? le->offset >= 28u * (uint64_t)le->record : !le->offset,
			  "record %lld at %llu", (long long)le->record,
			  (unsigned long long)le->offset);
		cr_assert_str_eq(le->msg, "feature 'v' is missing; the record has: id "
				 "(a feature with :default=V may be absent)");
		pf_loader_free(l);
	}
	/* ... and a default reads it whole. */
	cr_assert_eq(create_with(mixed, "id:int64[1],v:float32[3]:default=0.5", PF_CORRUPT_FAIL,
				 &l, &err), 0, "%s", err.msg);
	int ret, steps = 0;
	while ((ret = pf_loader_next(l, &b)) == 1) {
		cr_assert_eq(((const float *)b->core[0].tensors[1].data)[0], 0.5f);
		steps++;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0);
	cr_assert_eq(steps, 3);
	pf_loader_free(l);
}

/* A shard of 9,000 one-record frames: its seek table alone (8 bytes a
 * frame at least) is larger than the first tail read
 * (PF_SHARD_TAIL_HINT), so its index takes three reads (the hint, the
 * seek table, the index).  pf_source and the loader find it the same
 * way. */
Test(loader, an_index_larger_than_the_first_tail_read, .timeout = 120)
{
	const char *d = tu_tmpdir();
	const uint64_t nids = 9000;
	pf_loader_config cfg = { .per_core_batch = 100, .threads = 2 };
	pl_run_result r;
	pf_source *src;
	pf_record rec;
	pf_example ex;
	pf_arena arena;
	pf_error err;
	char p[512];
	uint64_t n = 0;
	int ret;

	snprintf(p, sizeof(p), "%s/frames.tfrecord.zst", d);
	tu_write_id_shard(p, 0, nids, 1, 0);
	cr_assert_eq(pf_arena_init(&arena, PF_ARENA_BYTES_FOR(4096)), 0);
	pf_error_clear(&err);
	cr_assert_eq(pf_source_open(&src, p, NULL, &err), 0, "%s", err.msg);
	cr_assert_not_null(pf_source_index(src), "read as a stream");
	cr_assert_eq(pf_shard_index_frames(pf_source_index(src)), nids);
	cr_assert_gt(pf_shard_index_frames(pf_source_index(src)) * 8, PF_SHARD_TAIL_HINT);
	while ((ret = pf_source_next(src, &rec, &err)) == 1) {
		const pf_feature *f;

		pf_arena_reset(&arena);
		cr_assert_eq(pf_example_decode(rec.data, rec.len, &arena, &ex, &err), 0, "%s",
			     err.msg);
		f = pf_example_find(&ex, "id");
		cr_assert_not_null(f);
		cr_assert_eq(f->v.int64s[0], (int64_t)n, "record %llu", (unsigned long long)n);
		n++;
	}
	cr_assert_eq(ret, 0, "%s", err.msg);
	cr_assert_eq(n, nids);
	pf_source_close(src);
	pf_arena_release(&arena);

	pl_run(d, &cfg, nids, &r);
	cr_assert_eq(r.ret, 0, "%s", r.err.msg);
	for (uint64_t i = 0; i < nids; i++)
		cr_assert_eq(r.seen[i], 1, "id %llu seen %u times", (unsigned long long)i,
			     r.seen[i]);
	free(r.seen);
}
