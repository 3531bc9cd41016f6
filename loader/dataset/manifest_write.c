/* SPDX-License-Identifier: Apache-2.0 */
/* pf_manifest_write(): the manifest of existing shards, planned the way
 * a loader without one plans (dataset.c: index tails, stream files counted
 * once), so that no loader has to again; with each shard's tail CRC32C,
 * what the loader checks at the open (the mtime is written for older
 * readers).  Reading a manifest is
 * manifest_open.c's. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset_internal.h"

/* path relative to dir ("" for the current directory), or NULL when it
 * is not under it.  Points into path, or into *resolved (free with
 * free()). */
static const char *relative_to(const char *dir, const char *path, char **resolved)
{
	size_t n = strlen(dir);
	char real_dir[PATH_MAX];

	*resolved = NULL;
	if (!n)
		return path[0] == '/' ? NULL : path;
	if (!strncmp(path, dir, n) && path[n] == '/')
		return path + n + 1;
	/* "./a" and "a", a link, an absolute path: compare real paths. */
	if (!realpath(dir, real_dir) || !(*resolved = realpath(path, NULL)))
		return NULL;
	n = strlen(real_dir);
	if (!strncmp(*resolved, real_dir, n) && (*resolved)[n] == '/')
		return *resolved + n + 1;
	return NULL;
}

static int write_file(const char *out, const void *buf, size_t len, pf_error *err)
{
	char tmp[PATH_MAX];
	const uint8_t *p = buf;
	int fd, ret = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", out) >= sizeof(tmp))
		return pf_error_set(err, -ENAMETOOLONG, PF_OFFSET_NONE, 0, "path too long");
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		pf_error_set_file(err, tmp);
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "cannot create: %s",
				    pf_strerror(ret));
	}
	while (len && ret == 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			ret = w < 0 ? -errno : -EIO;
			break;
		}
		p += w;
		len -= (size_t)w;
	}
	if (ret == 0 && fsync(fd) < 0)
		ret = -errno;
	if (close(fd) < 0 && ret == 0)
		ret = -errno;
	if (ret == 0 && rename(tmp, out) < 0)
		ret = -errno;
	if (ret < 0) {
		unlink(tmp);
		pf_error_set_file(err, out);
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "cannot write the manifest: %s",
				    pf_strerror(ret));
	}
	return 0;
}

/* What identifies shard i's content beside its size: the CRC32C of its
 * tail (pf_manifest_tail_len()), as the loader reads it at its open. */
static int add_tail(pf_manifest_builder *b, const pf_dataset *ds, size_t i, pf_error *err)
{
	const pf_shard_index *ix = ds->index[i];
	uint64_t size = ds->file_size[i];
	uint32_t len = pf_manifest_tail_len(size, ix ? pf_shard_index_data_end(ix) : 0);
	uint8_t *tail = pf_malloc(len ? len : 1);
	int64_t got = 0;
	int fd, ret;

	if (!tail)
		return -ENOMEM;
	fd = pf_file_open(ds->paths[i], err);
	if (fd < 0) {
		pf_free(tail);
		return fd;
	}
	if (len)
		got = pf_file_pread(fd, tail, len, size - len, ds->paths[i], err);
	close(fd);
	if (got >= 0 && (uint64_t)got != len) {
		pf_error_set_file(err, ds->paths[i]);
		got = pf_error_set(err, -ESTALE, PF_OFFSET_NONE, 0,
				   "the shard changed while the manifest was made (%llu bytes, then "
				   "shorter)", (unsigned long long)size);
	}
	ret = got < 0 ? (int)got : pf_manifest_builder_set_tail(b, len, pf_crc32c(0, tail, len));
	pf_free(tail);
	return ret;
}

/* Shard i of ds as a manifest entry, its path relative to dir. */
static int add_shard(pf_manifest_builder *b, const pf_dataset *ds, size_t i, const char *dir,
		     uint64_t *unit, pf_manifest_info *info, pf_error *err)
{
	const pf_shard_index *ix = ds->index[i];
	pf_manifest_shard s = { .size = ds->file_size[i] };
	char *resolved = NULL;
	struct stat st;
	int ret;

	s.path = relative_to(dir, ds->paths[i], &resolved);
	if (!s.path) {
		pf_error_set_file(err, ds->paths[i]);
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the shard is not under the manifest's directory \"%s\"",
				    *dir ? dir : ".");
	}
	if (stat(ds->paths[i], &st) < 0) {
		ret = -errno;
		free(resolved);
		pf_error_set_file(err, ds->paths[i]);
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "cannot stat: %s",
				    pf_strerror(ret));
	}
	if ((uint64_t)st.st_size != ds->file_size[i]) {
		free(resolved);
		pf_error_set_file(err, ds->paths[i]);
		return pf_error_set(err, -ESTALE, PF_OFFSET_NONE, 0,
				    "the shard changed while the manifest was made (%llu bytes, "
				    "then %llu)", (unsigned long long)ds->file_size[i],
				    (unsigned long long)st.st_size);
	}
	s.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	if (ix) {
		s.format = PF_MANIFEST_INDEXED;
		s.records = pf_shard_index_records(ix);
		s.alignment = pf_shard_index_alignment(ix);
		s.nframes = pf_shard_index_frames(ix);
		s.frames = pf_shard_index_frame(ix, 0);
		*unit += s.nframes;
		info->indexed++;
	} else {
		/* A stream file is one unit; the largest record is the
		 * dataset's (a bound, all a reader sizes buffers by). */
		s.format = PF_MANIFEST_STREAM;
		s.records = ds->units[(*unit)++].records;
		s.max_record = ds->max_stream_record;
		info->streams++;
	}
	ret = pf_manifest_builder_add(b, &s, err);
	if (ret < 0)
		pf_error_set_file(err, ds->paths[i]);
	if (ret == 0)
		ret = add_tail(b, ds, i, err);
	if (ret == 0 && ix)
		ret = pf_manifest_builder_add_schema(b, pf_shard_index_schema(ix, 0),
						     pf_shard_index_schema_count(ix),
						     pf_shard_index_schema_records(ix));
	info->records += s.records;
	info->bytes += s.size;
	free(resolved);
	return ret;
}

int pf_manifest_write(const char *const *paths, size_t n, const char *out,
		      pf_manifest_info *info_out, pf_error *err)
{
	pf_source_config scfg = { 0 };
	pf_manifest_info info = { 0 };
	pf_manifest_builder *b = NULL;
	pf_dataset *ds = NULL;
	const char *slash = strrchr(out, '/');
	char *dir = NULL, *blob = NULL;
	int64_t len;
	int ret;

	dir = pf_strdup(out);
	if (!dir)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	dir[slash ? (size_t)(slash - out) : 0] = '\0';
	if (slash == out)
		strcpy(dir, "/");
	/* A stream file's records are its intact ones only in skip mode;
	 * a manifest is of sound data, so any damage fails it here. */
	ret = pf_dataset_open_shards(&ds, paths, n, &scfg,
				     &(pf_open_config){ .threads = pf_cpus() }, err);
	if (ret == 0)
		ret = pf_manifest_builder_create(&b);
	/* Units are in file order: add_shard() walks them along. */
	for (uint64_t i = 0, unit = 0; ret == 0 && i < ds->nfiles; i++) {
		info.shards++;
		ret = add_shard(b, ds, i, dir, &unit, &info, err);
	}
	if (ret == 0) {
		len = pf_manifest_builder_encode(b, NULL, 0, err);
		ret = len < 0 ? (int)len : 0;
	}
	if (ret == 0 && !(blob = pf_malloc((size_t)len)))
		ret = -ENOMEM;
	if (ret == 0) {
		pf_manifest_builder_encode(b, blob, (size_t)len, err);
		info.manifest_bytes = (uint64_t)len;
		ret = write_file(out, blob, (size_t)len, err);
	}
	if (ret == -ENOMEM && err && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory writing a manifest");
	if (ret == 0 && info_out)
		*info_out = info;
	pf_free(blob);
	pf_manifest_builder_free(b);
	pf_dataset_free(ds);
	pf_free(dir);
	return ret;
}
