/* SPDX-License-Identifier: Apache-2.0 */
/* A feature spec from the data: the schema a manifest or an indexed
 * shard's index carries, as the spec text a loader takes (what loadbench
 * and the host tools use when no --features is given).  Parsing specs is
 * spec.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc_internal.h"
#include "podfeed.h"

/* Names the spec grammar cannot carry are left out. */
static bool name_ok(const char *name)
{
	return *name && strlen(name) < PF_SPEC_MAX_NAME && !strpbrk(name, ",:[]= \t\n");
}

/* The spec of n schema entries over records records of mean bytes, as
 * text (pf_spec_parse()d into *out). */
static int spec_of(const pf_feature_schema *const *fs, size_t n, uint64_t records,
		   uint64_t mean, bool int32, pf_spec *out, pf_error *err)
{
	size_t cap = 64, len = 0;
	char *spec;
	int ret;

	for (size_t i = 0; i < n; i++)
		cap += strlen(fs[i]->name) + 48;
	spec = pf_malloc(cap);
	if (!spec)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	spec[0] = '\0';
	for (size_t i = 0; i < n && i < PF_SPEC_MAX_FEATURES; i++) {
		const char *dtype;
		uint64_t flen = fs[i]->max_len;

		if (fs[i]->is_list || fs[i]->mixed || !name_ok(fs[i]->name))
			continue;
		switch (fs[i]->kind) {
		case PF_KIND_INT64: dtype = int32 ? "int32" : "int64"; break;
		case PF_KIND_FLOAT: dtype = "float32"; break;
		case PF_KIND_BYTES:
			dtype = "bytes";
			flen = ((mean ? mean : 1) + 63) / 64 * 64;
			break;
		default: continue;
		}
		if (!flen)
			continue;
		len += (size_t)snprintf(spec + len, cap - len, "%s%s:%s[%llu]", len ? "," : "",
					fs[i]->name, dtype, (unsigned long long)flen);
		/* A feature some records lack is optional: 0 for them. */
		if (fs[i]->records_present - fs[i]->records_unset < records)
			len += (size_t)snprintf(spec + len, cap - len, ":default=0");
	}
	if (!len) {
		pf_free(spec);
		return -ENODATA;
	}
	ret = pf_spec_parse(out, spec, err);
	pf_free(spec);
	return ret;
}

static int from_manifest(const char *path, bool int32, pf_spec *out, pf_error *err)
{
	pf_manifest *man = NULL;
	const pf_feature_schema **fs = NULL;
	uint64_t records = 0, bytes = 0;
	size_t n;
	int ret = pf_manifest_load(&man, path, NULL, err);

	if (ret < 0)
		return ret;
	n = pf_manifest_schema_count(man);
	fs = pf_calloc(n ? n : 1, sizeof(*fs));
	if (!fs) {
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		fs[i] = pf_manifest_schema(man, i);
	/* The mean record of the shards with frames (indexed ones). */
	for (size_t i = 0; i < pf_manifest_shards(man); i++) {
		const pf_manifest_shard *s = pf_manifest_get(man, i);

		for (uint32_t f = 0; f < s->nframes; f++)
			bytes += s->frames[f].uncompressed_size;
		records += s->nframes ? s->records : 0;
	}
	ret = spec_of(fs, n, pf_manifest_schema_records(man), records ? bytes / records : 0,
		      int32, out, err);
	if (ret == -ENODATA) {
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "the manifest has no usable schema");
		pf_error_set_file(err, path);
	}
out:
	pf_free(fs);
	pf_manifest_free(man);
	return ret;
}

static int from_index(const char *path, bool int32, pf_spec *out, pf_error *err)
{
	pf_source *src = NULL;
	const pf_shard_index *ix;
	const pf_feature_schema **fs = NULL;
	uint64_t records;
	size_t n;
	int ret = pf_source_open(&src, path, NULL, err);

	if (ret < 0)
		return ret;
	ix = pf_source_index(src);
	n = ix ? pf_shard_index_schema_count(ix) : 0;
	if (!n) {
		ret = pf_error_set(err, -ENODATA, PF_OFFSET_NONE, 0,
				   "no schema in an index (the file is %s)",
				   ix ? "an indexed shard without one" : "not an indexed shard");
		pf_error_set_file(err, path);
		goto out;
	}
	fs = pf_calloc(n, sizeof(*fs));
	if (!fs) {
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		fs[i] = pf_shard_index_schema(ix, i);
	records = pf_shard_index_records(ix);
	ret = spec_of(fs, n, records, records ? pf_shard_index_uncompressed_bytes(ix) / records
					      : 0, int32, out, err);
	if (ret == -ENODATA) {
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "no usable feature in the index schema");
		pf_error_set_file(err, path);
	}
out:
	pf_free(fs);
	pf_source_close(src);
	return ret;
}

int pf_spec_infer(const char *const *paths, size_t n, const pf_spec_infer_config *cfg,
		  pf_spec *out, pf_error *err)
{
	pf_spec_infer_config none = { 0 };
	char *manifest = NULL, **files = NULL;
	int nfiles, ret, found;
	size_t first = 0;

	pf_error_clear(err);
	memset(out, 0, sizeof(*out));
	if (!cfg)
		cfg = &none;
	if (!cfg->ignore_manifest) {
		found = pf_manifest_locate(paths, n, &manifest);
		if (found < 0)
			return pf_error_set(err, found, PF_OFFSET_NONE, 0, "out of memory");
		if (found > 0) {
			ret = from_manifest(manifest, cfg->int64_as_int32, out, err);
			free(manifest);
			return ret;
		}
	}
	/* A manifest named beside its shards: from it, as named alone. */
	nfiles = pf_paths_resolve(paths, n, &files, cfg->ignore_manifest ? NULL : &manifest, err);
	if (nfiles < 0)
		return nfiles;
	if (manifest) {
		pf_paths_free(files, (size_t)nfiles);
		ret = from_manifest(manifest, cfg->int64_as_int32, out, err);
		free(manifest);
		return ret;
	}
	if (nfiles == 0) {
		pf_paths_free(files, 0);
		return pf_error_set(err, -ENOENT, PF_OFFSET_NONE, 0, "the paths name no files");
	}
	/* From the first file with bytes: an empty one has no index. */
	for (struct stat st; first + 1 < (size_t)nfiles && stat(files[first], &st) == 0 &&
			     !st.st_size; )
		first++;
	ret = from_index(files[first], cfg->int64_as_int32, out, err);
	pf_paths_free(files, (size_t)nfiles);
	return ret;
}
