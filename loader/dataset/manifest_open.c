/* SPDX-License-Identifier: Apache-2.0 */
/* A dataset opened from its manifest (pf_formats.h, "The dataset
 * manifest"): one read plans every shard, none is opened to do so; a
 * shard that changed since is refused when it is opened to be read: by
 * its size and its tail's CRC32C (pipeline/files.c reads the tail at the open),
 * or, with a manifest written before tails were, by its size and mtime.
 * Opening without a manifest is dataset.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset_internal.h"

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

int pf_manifest_locate(const char *const *paths, size_t n, char **manifest)
{
	struct stat st;
	char *m;

	*manifest = NULL;
	if (n != 1 || !paths[0])
		return 0;
	if (ends_with(paths[0], ".manifest")) {
		m = strdup(paths[0]);
	} else if (stat(paths[0], &st) == 0 && S_ISDIR(st.st_mode)) {
		size_t len = strlen(paths[0]) + sizeof(PF_MANIFEST_NAME) + 1;

		m = malloc(len);
		if (!m)
			return -ENOMEM;
		snprintf(m, len, "%s/%s", paths[0], PF_MANIFEST_NAME);
		if (access(m, F_OK) != 0) {
			free(m);
			return 0;
		}
	} else {
		return 0;
	}
	if (!m)
		return -ENOMEM;
	*manifest = m;
	return 1;
}

/* The whole file, with one read (the size from fstat). */
static int read_all(const char *path, pf_region_table *regions, uint8_t **buf,
		    size_t *len, pf_error *err)
{
	size_t mount = regions ? pf_region_table_lookup(regions, path) : 0;
	uint64_t size;
	int64_t got;
	int fd = pf_file_open(path, err), ret;

	if (fd < 0)
		return fd;
	ret = pf_file_size(fd, &size);
	if (ret == 0 && size > PF_MANIFEST_MAX_RAW)
		ret = pf_error_set(err, -EFBIG, PF_OFFSET_NONE, 0,
				   "manifest is %llu bytes, above the limit of %llu",
				   (unsigned long long)size, PF_MANIFEST_MAX_RAW);
	if (ret == 0 && !(*buf = pf_malloc(size ? size : 1)))
		ret = -ENOMEM;
	if (ret == 0) {
		got = pf_region_pread(regions, mount, fd, *buf, size, 0, path, err);
		if (got < 0)
			ret = (int)got;
		*len = got < 0 ? 0 : (size_t)got;
	}
	close(fd);
	return ret;
}

int pf_manifest_load(pf_manifest **out, const char *path, pf_region_table *regions,
		     pf_error *err)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int ret = read_all(path, regions, &buf, &len, err);

	if (ret == 0)
		ret = pf_manifest_parse(out, buf, len, err);
	pf_free(buf);
	if (ret < 0) {
		if (ret == -ENOMEM && err && !err->code)
			pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory reading a manifest");
		pf_error_set_file(err, path);
	}
	return ret;
}

size_t pf_manifest_shard_path(const char *manifest, const pf_manifest_shard *s,
			      char *buf, size_t cap)
{
	const char *slash = strrchr(manifest, '/');
	/* Shard paths are relative to the manifest's directory:
	 * "d/x.manifest" gives "d/", "/x.manifest" "/", "x.manifest" "". */
	size_t dirlen = slash ? (size_t)(slash - manifest) + 1 : 0;
	size_t plen = strlen(s->path);

	if (cap) {
		size_t d = dirlen < cap - 1 ? dirlen : cap - 1;
		size_t p = plen < cap - 1 - d ? plen : cap - 1 - d;

		memcpy(buf, manifest, d);
		memcpy(buf + d, s->path, p);
		buf[d + p] = '\0';
	}
	return dirlen + plen;
}

int pf_dataset_open_manifest(pf_dataset *ds, const char *path, const pf_source_config *scfg,
			     pf_error *err)
{
	size_t ucap = 0;
	int ret = pf_manifest_load(&ds->manifest, path, scfg ? scfg->regions : NULL, err);

	if (ret < 0)
		return ret;
	ds->nfiles = pf_manifest_shards(ds->manifest);
	if (!ds->nfiles) {
		ret = pf_error_set(err, -ENOENT, PF_OFFSET_NONE, 0, "the manifest names no shards");
		goto out;
	}
	ds->paths = pf_calloc(ds->nfiles, sizeof(*ds->paths));
	ds->index = pf_calloc(ds->nfiles, sizeof(*ds->index));
	ds->file_size = pf_calloc(ds->nfiles, sizeof(*ds->file_size));
	ds->alignment = pf_calloc(ds->nfiles, sizeof(*ds->alignment));
	ds->mtime_ns = pf_calloc(ds->nfiles, sizeof(*ds->mtime_ns));
	if (!ds->paths || !ds->index || !ds->file_size || !ds->alignment || !ds->mtime_ns) {
		ret = -ENOMEM;
		goto out;
	}
	if (pf_manifest_shard_tail(ds->manifest, 0, &(uint32_t){ 0 }, &(uint32_t){ 0 })) {
		/* Content, not time: a copy or an upload keeps the first. */
		ds->tail_len = pf_calloc(ds->nfiles, sizeof(*ds->tail_len));
		ds->tail_crc = pf_calloc(ds->nfiles, sizeof(*ds->tail_crc));
		if (!ds->tail_len || !ds->tail_crc) {
			ret = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < ds->nfiles; i++)
			pf_manifest_shard_tail(ds->manifest, i, &ds->tail_len[i], &ds->tail_crc[i]);
	}
	for (size_t i = 0; i < ds->nfiles; i++) {
		const pf_manifest_shard *s = pf_manifest_get(ds->manifest, i);
		size_t len = pf_manifest_shard_path(path, s, NULL, 0);

		ds->paths[i] = pf_malloc(len + 1);
		if (!ds->paths[i]) {
			ret = -ENOMEM;
			goto out;
		}
		pf_manifest_shard_path(path, s, ds->paths[i], len + 1);
		ds->file_size[i] = s->size;
		ds->mtime_ns[i] = s->mtime_ns;
		ds->alignment[i] = s->alignment;
		ucap += s->format == PF_MANIFEST_STREAM ? 1 : s->nframes;
	}
	ds->units = pf_calloc(ucap ? ucap : 1, sizeof(*ds->units));
	if (!ds->units) {
		ret = -ENOMEM;
		goto out;
	}
	ds->fingerprint = pf_mix64(ds->nfiles);
	ds->digest = pf_mix64(ds->nfiles);
	for (size_t i = 0; i < ds->nfiles; i++) {
		const pf_manifest_shard *s = pf_manifest_get(ds->manifest, i);
		bool stream = s->format == PF_MANIFEST_STREAM;

		pf_dataset_add_units(ds, i, stream, s->frames, s->nframes, s->records);
		ds->digest = pf_dataset_digest_file(ds->digest, s->size, stream, s->records);
		if (stream) {
			ds->any_stream = true;
			if (s->max_record > ds->max_stream_record)
				ds->max_stream_record = s->max_record;
		}
	}
out:
	if (ret < 0) {
		if (ret == -ENOMEM && err && !err->code)
			pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				     "out of memory opening the dataset");
		pf_error_set_file(err, path);
	}
	return ret;
}

int pf_dataset_check_file(const pf_dataset *ds, size_t i, uint64_t size, int64_t mtime_ns,
			  pf_error *err)
{
	bool size_ok = size == ds->file_size[i];

	/* With tails the time is not checked (the tail is, once read). */
	if (size_ok && (!ds->mtime_ns || ds->tail_len || mtime_ns == ds->mtime_ns[i]))
		return 0;
	pf_error_set_file(err, ds->paths[i]);
	if (!size_ok && !ds->manifest_path)
		return pf_error_set(err, -ESTALE, PF_OFFSET_NONE, 0,
				    "the shard is %llu bytes, it was %llu when the dataset was "
				    "opened: it changed since", (unsigned long long)size,
				    (unsigned long long)ds->file_size[i]);
	if (!size_ok)
		return pf_error_set(err, -ESTALE, PF_OFFSET_NONE, 0,
				    "the shard is %llu bytes, %s says %llu: it changed since the "
				    "manifest was written (run `shardtool manifest` again)",
				    (unsigned long long)size, ds->manifest_path,
				    (unsigned long long)ds->file_size[i]);
	return pf_error_set(err, -ESTALE, PF_OFFSET_NONE, 0,
			    "the shard was modified at %lld.%09lld, %s says %lld.%09lld: it "
			    "changed since the manifest was written, or was copied (this "
			    "manifest, of an older shardtool, knows shards by their mtime; "
			    "`shardtool manifest` writes one that knows them by content)",
			    (long long)(mtime_ns / 1000000000),
			    (long long)(mtime_ns % 1000000000), ds->manifest_path,
			    (long long)(ds->mtime_ns[i] / 1000000000),
			    (long long)(ds->mtime_ns[i] % 1000000000));
}

int pf_dataset_check_tail(const pf_dataset *ds, size_t i, const void *tail, size_t len,
			  pf_error *err)
{
	uint32_t crc = pf_crc32c(0, tail, len);

	if (len == ds->tail_len[i] && crc == ds->tail_crc[i])
		return 0;
	pf_error_set_file(err, ds->paths[i]);
	return pf_error_set(err, -ESTALE, PF_OFFSET_FILE, ds->file_size[i] - ds->tail_len[i],
			    "its last %u bytes have CRC32C 0x%08x, %s says 0x%08x: it is not the "
			    "shard the manifest was written for (replaced since; run `shardtool "
			    "manifest` again)", ds->tail_len[i], crc, ds->manifest_path,
			    ds->tail_crc[i]);
}
