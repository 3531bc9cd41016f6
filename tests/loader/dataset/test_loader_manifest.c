/* SPDX-License-Identifier: Apache-2.0 */
/* A dataset opened from its manifest: the same batches as without it,
 * one read to plan, a copy read (new mtimes), a changed shard refused by
 * name (by its size and tail), an older manifest (no tails) read and
 * checked by size and mtime, states resumed across copies and manifest
 * versions, the manifest never read as a shard. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "podfeed.h"
#include "testutil.h"

typedef struct digest {
	int ret;
	pf_error err;
	uint64_t steps, records;
	uint32_t crc;
	pf_loader_metrics m;
} digest;

static void run(const char *path, bool ignore_manifest, uint32_t host, uint32_t hosts,
		digest *d)
{
	const char *paths[1] = { path };
	pf_loader_config cfg = { .paths = paths, .npaths = 1,
				 .features = "id:int64[1],v:float32[4]:pad=-1",
				 .per_core_batch = 16, .cores_per_host = 2, .shuffle = true,
				 .shuffle_window = 100, .seed = 7, .epochs = 2, .threads = 2,
				 .host_index = host, .num_hosts = hosts,
				 .ignore_manifest = ignore_manifest };
	pf_loader *l;
	pf_batch *b;

	memset(d, 0, sizeof(*d));
	pf_error_clear(&d->err);
	d->ret = pf_loader_create(&l, &cfg, &d->err);
	if (d->ret < 0)
		return;
	while ((d->ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++) {
			d->crc = pf_crc32c(d->crc, b->core[c].block, b->core[c].block_bytes);
			d->records += b->per_core_batch;
		}
		d->steps++;
		pf_loader_release(l, b);
	}
	if (d->ret < 0)
		d->err = *pf_loader_last_error(l);
	pf_loader_get_metrics(l, &d->m);
	pf_loader_free(l);
}

/* Indexed shards (one empty), a plain and a gzip stream file. */
static const char *mixed_dataset(uint64_t *nids)
{
	const char *dir = tu_tmpdir();
	const uint64_t counts[] = { 300, 0, 1000, 17 };
	char p[512];
	uint64_t id = 0;

	for (size_t i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/s%zu.tfrecord.zst", dir, i);
		tu_write_id_shard(p, id, counts[i], 2048, 0);
		id += counts[i];
	}
	snprintf(p, sizeof(p), "%s/plain.tfrecord", dir);
	tu_write_id_stream(p, id, 250, false);
	id += 250;
	snprintf(p, sizeof(p), "%s/z.tfrecord.gz", dir);
	tu_write_id_stream(p, id, 120, true);
	id += 120;
	*nids = id;
	return dir;
}

static void write_manifest(const char *dir)
{
	const char *paths[1] = { dir };
	char out[512];
	pf_manifest_info info;
	pf_error err;

	snprintf(out, sizeof(out), "%s/%s", dir, PF_MANIFEST_NAME);
	pf_error_clear(&err);
	cr_assert_eq(pf_manifest_write(paths, 1, out, &info, &err), 0, "%s", err.msg);
	cr_assert_eq(info.shards, 6);
	cr_assert_eq(info.indexed, 4);
	cr_assert_eq(info.streams, 2);
}

Test(loader_manifest, the_same_batches_with_and_without_it_on_every_host, .timeout = 120)
{
	uint64_t nids;
	const char *dir = mixed_dataset(&nids);
	char mpath[512];
	digest with, without;

	write_manifest(dir);
	for (uint32_t h = 0; h < 3; h++) {
		run(dir, false, h, 3, &with);
		cr_assert_eq(with.ret, 0, "%s", with.err.msg);
		run(dir, true, h, 3, &without);
		cr_assert_eq(without.ret, 0, "%s", without.err.msg);
		cr_assert_eq(with.steps, without.steps);
		cr_assert_eq(with.crc, without.crc, "host %u", h);
		cr_assert_eq(with.m.records_per_epoch, nids,
			     "the manifest is not a shard: %llu records",
			     (unsigned long long)with.m.records_per_epoch);
		cr_assert_eq(without.m.records_per_epoch, nids);
	}
	/* A glob over the directory, expanded here as the shell would:
	 * the manifest among its matches is their manifest (not a shard),
	 * and plans the dataset (one file opened to plan, not six). */
	snprintf(mpath, sizeof(mpath), "%s/*", dir);
	run(mpath, false, 2, 3, &without);
	cr_assert_eq(without.ret, 0, "%s", without.err.msg);
	cr_assert_eq(without.m.records_per_epoch, nids);
	cr_assert_eq(without.crc, with.crc);
	cr_assert_eq(without.m.open_files, 1, "%llu files opened to plan",
		     (unsigned long long)without.m.open_files);
	/* A glob of the shards alone leaves the manifest out: every file. */
	snprintf(mpath, sizeof(mpath), "%s/*.tfrecord*", dir);
	run(mpath, false, 2, 3, &without);
	cr_assert_eq(without.ret, 0, "%s", without.err.msg);
	cr_assert_eq(without.crc, with.crc);
	cr_assert_eq(without.m.open_files, 6, "%llu files opened to plan",
		     (unsigned long long)without.m.open_files);
	/* The manifest named itself. */
	snprintf(mpath, sizeof(mpath), "%s/%s", dir, PF_MANIFEST_NAME);
	run(mpath, false, 2, 3, &without);
	cr_assert_eq(without.ret, 0, "%s", without.err.msg);
	cr_assert_eq(without.crc, with.crc);
}

/* The dataset's files copied to a new directory as cp -r or an upload
 * does: the same bytes, new mtimes (set far from the originals'). */
static const char *copy_dataset(const char *dir)
{
	static const char *const names[] = { "s0.tfrecord.zst", "s1.tfrecord.zst",
					     "s2.tfrecord.zst", "s3.tfrecord.zst",
					     "plain.tfrecord", "z.tfrecord.gz", PF_MANIFEST_NAME };
	const char *copy = tu_tmpdir();
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 2000000000, 123 } };
	char from[512], to[512];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t len;
		uint8_t *bytes;

		snprintf(from, sizeof(from), "%s/%s", dir, names[i]);
		snprintf(to, sizeof(to), "%s/%s", copy, names[i]);
		bytes = tu_read_file(from, &len);
		tu_write_file(to, bytes, len);
		free(bytes);
		cr_assert_eq(utimensat(AT_FDCWD, to, ts, 0), 0);
	}
	return copy;
}

Test(loader_manifest, a_copy_is_read_and_a_changed_shard_is_named, .timeout = 60)
{
	uint64_t nids;
	const char *dir = mixed_dataset(&nids), *copy;
	char p[512];
	uint8_t *bytes;
	size_t len;
	digest d, orig;
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 1000, 0 } };

	write_manifest(dir);
	run(dir, false, 0, 1, &orig);
	cr_assert_eq(orig.ret, 0, "%s", orig.err.msg);
	/* A copy (new mtimes): the same batches, through its manifest. */
	copy = copy_dataset(dir);
	run(copy, false, 0, 1, &d);
	cr_assert_eq(d.ret, 0, "%s", d.err.msg);
	cr_assert_eq(d.crc, orig.crc);
	cr_assert_eq(d.m.open_files, 1, "planned from the manifest");
	/* Another mtime, the same bytes. */
	snprintf(p, sizeof(p), "%s/s2.tfrecord.zst", dir);
	cr_assert_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
	run(dir, false, 0, 1, &d);
	cr_assert_eq(d.ret, 0, "%s", d.err.msg);
	cr_assert_eq(d.crc, orig.crc);
	/* The same size, other bytes (an index byte, a stream file's last
	 * byte): refused by the tail, naming the shard and the manifest. */
	bytes = tu_read_file(p, &len);
	bytes[len - 30] ^= 0x80;
	tu_write_file(p, bytes, len);
	free(bytes);
	run(dir, false, 0, 1, &d);
	cr_assert_eq(d.ret, -ESTALE, "%d %s", d.ret, d.err.msg);
	cr_assert(strstr(d.err.file, "s2.tfrecord.zst"), "%s", d.err.file);
	cr_assert(strstr(d.err.msg, PF_MANIFEST_NAME), "%s", d.err.msg);
	cr_assert(strstr(d.err.msg, "not the shard the manifest was written for"), "%s",
		  d.err.msg);
	bytes = tu_read_file(p, &len);
	bytes[len - 30] ^= 0x80;	/* as it was */
	tu_write_file(p, bytes, len);
	free(bytes);
	snprintf(p, sizeof(p), "%s/z.tfrecord.gz", copy);
	bytes = tu_read_file(p, &len);
	bytes[len - 1] ^= 0x01;	/* the gzip trailer's length */
	tu_write_file(p, bytes, len);
	free(bytes);
	run(copy, false, 0, 1, &d);
	cr_assert_eq(d.ret, -ESTALE, "%d %s", d.ret, d.err.msg);
	cr_assert(strstr(d.err.file, "z.tfrecord.gz"), "%s", d.err.file);
	/* Other bytes: a stream file one record longer. */
	write_manifest(dir);
	snprintf(p, sizeof(p), "%s/plain.tfrecord", dir);
	tu_write_id_stream(p, 0, 251, false);
	run(dir, false, 0, 1, &d);
	cr_assert_eq(d.ret, -ESTALE, "%d %s", d.ret, d.err.msg);
	cr_assert(strstr(d.err.file, "plain.tfrecord"), "%s", d.err.file);
	cr_assert(strstr(d.err.msg, "bytes"), "%s", d.err.msg);
	/* Without the manifest the changed file is simply read. */
	run(dir, true, 0, 1, &d);
	cr_assert_eq(d.ret, 0, "%s", d.err.msg);
	cr_assert_eq(d.m.records_per_epoch, nids + 1);
}

/* The manifest at dir/PF_MANIFEST_NAME written again as the library
 * before tails wrote it: the same entries and schema, no tails. */
static void write_old_manifest(const char *dir)
{
	char mpath[512];
	uint8_t *bytes, *blob;
	size_t len;
	pf_manifest *m;
	pf_manifest_builder *b;
	pf_error err;
	int64_t n;
	uint32_t tl, tc;

	snprintf(mpath, sizeof(mpath), "%s/%s", dir, PF_MANIFEST_NAME);
	bytes = tu_read_file(mpath, &len);
	pf_error_clear(&err);
	cr_assert_eq(pf_manifest_parse(&m, bytes, len, &err), 0, "%s", err.msg);
	free(bytes);
	cr_assert(pf_manifest_shard_tail(m, 0, &tl, &tc), "a manifest written now has tails");
	cr_assert_eq(pf_manifest_builder_create(&b), 0);
	for (size_t i = 0; i < pf_manifest_shards(m); i++)
		cr_assert_eq(pf_manifest_builder_add(b, pf_manifest_get(m, i), &err), 0, "%s",
			     err.msg);
	for (size_t i = 0; i < pf_manifest_schema_count(m); i++)
		cr_assert_eq(pf_manifest_builder_add_schema(b, pf_manifest_schema(m, i), 1,
							    i ? 0 : pf_manifest_schema_records(m)), 0);
	n = pf_manifest_builder_encode(b, NULL, 0, &err);
	cr_assert_gt(n, 0, "%s", err.msg);
	blob = malloc((size_t)n);
	cr_assert_eq(pf_manifest_builder_encode(b, blob, (size_t)n, &err), n);
	tu_write_file(mpath, blob, (size_t)n);
	free(blob);
	pf_manifest_builder_free(b);
	pf_manifest_free(m);
	bytes = tu_read_file(mpath, &len);
	cr_assert_eq(pf_manifest_parse(&m, bytes, len, &err), 0, "%s", err.msg);
	cr_assert_not(pf_manifest_shard_tail(m, 0, &tl, &tc));
	pf_manifest_free(m);
	free(bytes);
}

/* A manifest of the library before tails loads, plans the same batches,
 * and knows shards as it did: by size and mtime (a copy is refused by
 * it, saying how to write one that knows them by content). */
Test(loader_manifest, an_older_manifest_checks_size_and_mtime, .timeout = 60)
{
	uint64_t nids;
	const char *dir = mixed_dataset(&nids), *copy;
	digest d, orig;

	write_manifest(dir);
	run(dir, false, 0, 1, &orig);
	cr_assert_eq(orig.ret, 0, "%s", orig.err.msg);
	write_old_manifest(dir);
	run(dir, false, 0, 1, &d);
	cr_assert_eq(d.ret, 0, "%s", d.err.msg);
	cr_assert_eq(d.crc, orig.crc);
	copy = copy_dataset(dir);
	run(copy, false, 0, 1, &d);
	cr_assert_eq(d.ret, -ESTALE, "%d %s", d.ret, d.err.msg);
	cr_assert(strstr(d.err.msg, "knows shards by their mtime") &&
		  strstr(d.err.msg, "shardtool manifest"), "%s", d.err.msg);
	/* ... until the manifest is written again there. */
	write_manifest(copy);
	run(copy, false, 0, 1, &d);
	cr_assert_eq(d.ret, 0, "%s", d.err.msg);
	cr_assert_eq(d.crc, orig.crc);
}

/* Run to step `stop` (0: to the end) from the state `from` (may be
 * NULL), the batches' CRC into *crc; @return the state after (malloc). */
static uint8_t *run_saved(const char *dir, const uint8_t *from, size_t from_len, uint64_t stop,
			  uint32_t *crc, size_t *len)
{
	const char *paths[1] = { dir };
	pf_state_blob sb = { from, from_len };
	pf_loader_config cfg = { .paths = paths, .npaths = 1,
				 .features = "id:int64[1],v:float32[4]:pad=-1",
				 .per_core_batch = 16, .cores_per_host = 2, .shuffle = true,
				 .shuffle_window = 100, .seed = 7, .epochs = 2, .threads = 2,
				 .max_steps = stop, .resume = from ? &sb : NULL,
				 .nresume = from ? 1 : 0 };
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	uint8_t *state;
	int64_t n;
	int ret;

	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while ((ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++)
			*crc = pf_crc32c(*crc, b->core[c].block, b->core[c].block_bytes);
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "%s", ret < 0 ? pf_loader_last_error(l)->msg : "");
	n = pf_loader_save_state(l, NULL, 0);
	cr_assert_gt(n, 0);
	state = malloc((size_t)n);
	cr_assert_eq(pf_loader_save_state(l, state, (size_t)n), n);
	*len = (size_t)n;
	pf_loader_free(l);
	return state;
}

/* A state saved against a manifest resumes against the same dataset
 * copied elsewhere (new mtimes), with the manifest copied or written
 * again, and one saved against an older manifest resumes against a new
 * one: the rest of the run is the run's. */
Test(loader_manifest, states_resume_across_copies_and_manifest_versions, .timeout = 120)
{
	uint64_t nids;
	const char *dir = mixed_dataset(&nids), *copy;
	uint32_t whole = 0, part = 0, again = 0, old = 0;
	uint8_t *state, *end;
	size_t len, end_len;

	write_manifest(dir);
	end = run_saved(dir, NULL, 0, 0, &whole, &end_len);
	free(end);
	state = run_saved(dir, NULL, 0, 37, &part, &len);
	copy = copy_dataset(dir);
	again = part;
	end = run_saved(copy, state, len, 0, &again, &end_len);
	cr_assert_eq(again, whole, "resumed on a copy through its copied manifest");
	free(end);
	write_manifest(copy);
	again = part;
	end = run_saved(copy, state, len, 0, &again, &end_len);
	cr_assert_eq(again, whole, "resumed on a copy through a manifest written there");
	free(end);
	free(state);
	/* Saved against a manifest of the library before tails. */
	write_old_manifest(dir);
	old = 0;
	state = run_saved(dir, NULL, 0, 37, &old, &len);
	cr_assert_eq(old, part);
	write_manifest(dir);
	end = run_saved(dir, state, len, 0, &old, &end_len);
	cr_assert_eq(old, whole, "an older manifest's state, resumed with a new one");
	free(end);
	free(state);
}

Test(loader_manifest, a_damaged_manifest_is_an_error_naming_it)
{
	uint64_t nids;
	const char *dir = mixed_dataset(&nids);
	char mpath[512];
	uint8_t *buf;
	size_t len;
	digest d;

	write_manifest(dir);
	snprintf(mpath, sizeof(mpath), "%s/%s", dir, PF_MANIFEST_NAME);
	buf = tu_read_file(mpath, &len);
	buf[len - 3] ^= 0x10;
	tu_write_file(mpath, buf, len);
	run(dir, false, 0, 1, &d);
	cr_assert_eq(d.ret, -EBADMSG);
	cr_assert(strstr(d.err.file, PF_MANIFEST_NAME), "%s", d.err.file);
	cr_assert_eq(d.err.offset, 24);
	cr_assert(strstr(d.err.msg, "CRC32C"), "%s", d.err.msg);
	tu_write_file(mpath, buf, len - 1);
	run(dir, false, 0, 1, &d);
	cr_assert_eq(d.ret, -EBADMSG);
	cr_assert(strstr(d.err.msg, "truncated"), "%s", d.err.msg);
	free(buf);
}

Test(loader_manifest, shardtool_writes_it, .timeout = 60)
{
	uint64_t nids;
	const char *dir = mixed_dataset(&nids);
	const char *out = tu_tmpdir();
	char cmd[2048], text[4096], p[512];
	size_t len;
	digest a, b;
	struct stat st;

	snprintf(cmd, sizeof(cmd), "%s manifest %s", tu_env_tool("SHARDTOOL"), dir);
	cr_assert_eq(tu_capture(cmd, text, sizeof(text), &len), 0, "%s", text);
	cr_assert(strstr(text, "6 shards (4 indexed, 2 stream files)"), "%s", text);
	/* convert writes one beside the shards it makes */
	snprintf(cmd, sizeof(cmd), "%s convert --out %s/c --shards 3 --frame-size 2048 %s",
		 tu_env_tool("SHARDTOOL"), out, dir);
	cr_assert_eq(tu_capture(cmd, text, sizeof(text), &len), 0, "%s", text);
	snprintf(p, sizeof(p), "%s/c/%s", out, PF_MANIFEST_NAME);
	cr_assert_eq(stat(p, &st), 0, "%s", p);
	snprintf(p, sizeof(p), "%s/c", out);
	run(p, false, 0, 1, &a);
	run(p, true, 0, 1, &b);
	cr_assert_eq(a.ret, 0, "%s", a.err.msg);
	cr_assert_eq(a.m.records_per_epoch, nids);
	cr_assert_eq(a.crc, b.crc);
	/* One directory or --out */
	snprintf(cmd, sizeof(cmd), "%s manifest %s/s0.tfrecord.zst 2>&1",
		 tu_env_tool("SHARDTOOL"), dir);
	cr_assert_neq(tu_capture(cmd, text, sizeof(text), &len), 0);
	cr_assert(strstr(text, "--out"), "%s", text);
	/* A shard outside the manifest's directory is refused. */
	snprintf(cmd, sizeof(cmd), "%s manifest --out %s/c/x.manifest %s 2>&1",
		 tu_env_tool("SHARDTOOL"), out, dir);
	cr_assert_neq(tu_capture(cmd, text, sizeof(text), &len), 0);
	cr_assert(strstr(text, "not under the manifest's directory"), "%s", text);
}

/* A shard's path is the manifest's directory and the shard's name, as
 * snprintf() writes: the whole length returned, the text cut to fit. */
Test(loader_manifest, shard_paths_are_relative_to_the_manifest)
{
	pf_manifest_shard s = { .path = "part-1.tfrecord.zst" };
	char buf[64];

	cr_assert_eq(pf_manifest_shard_path("d/e/x.manifest", &s, buf, sizeof(buf)), 23);
	cr_assert_str_eq(buf, "d/e/part-1.tfrecord.zst");
	cr_assert_eq(pf_manifest_shard_path("/x.manifest", &s, buf, sizeof(buf)), 20);
	cr_assert_str_eq(buf, "/part-1.tfrecord.zst");
	cr_assert_eq(pf_manifest_shard_path("x.manifest", &s, buf, sizeof(buf)), 19);
	cr_assert_str_eq(buf, "part-1.tfrecord.zst");
	cr_assert_eq(pf_manifest_shard_path("d/e/x.manifest", &s, buf, 6), 23);
	cr_assert_str_eq(buf, "d/e/p");
	cr_assert_eq(pf_manifest_shard_path("d/e/x.manifest", &s, buf, 3), 23);
	cr_assert_str_eq(buf, "d/");
	cr_assert_eq(pf_manifest_shard_path("d/e/x.manifest", &s, NULL, 0), 23);
}

