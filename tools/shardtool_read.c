/* SPDX-License-Identifier: Apache-2.0 */
/* `shardtool inspect`, `verify` and `cat`: what a shard holds, whether
 * every check passes, its records as JSON lines. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common_internal.h"
#include "pf_transform.h"
#include "shardtool.h"

/* ------------------------------------------------------------------ */

static json_t *schema_json(const pf_feature_schema *fs, size_t n, uint64_t records,
			   bool *bad)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++) {
		const pf_feature_schema *s = &fs[i];
		bool fixed = s->records_present == records && s->records_unset == 0 &&
			     s->min_len == s->max_len && !s->mixed;
		json_t *o = json_object();

		pf_json_put(o, "name", pf_json_str(s->name), bad);
		pf_json_put(o, "kind", pf_json_str(pf_kind_name(s->kind)), bad);
		pf_json_put(o, "list", pf_json_bool(s->is_list), bad);
		pf_json_put(o, "mixed", pf_json_bool(s->mixed), bad);
		pf_json_put(o, "fixed", pf_json_bool(fixed), bad);
		pf_json_put(o, "min_len", pf_json_u64(s->min_len), bad);
		pf_json_put(o, "max_len", pf_json_u64(s->max_len), bad);
		pf_json_put(o, "records_present", pf_json_u64(s->records_present), bad);
		pf_json_put(o, "records_unset", pf_json_u64(s->records_unset), bad);
		pf_json_put(o, "total_values", pf_json_u64(s->total_values), bad);
		if (json_array_append_new(arr, o))
			*bad = true;
	}
	return arr;
}

static void print_schema_text(const pf_feature_schema *fs, size_t n, uint64_t records)
{
	for (size_t i = 0; i < n; i++) {
		const pf_feature_schema *s = &fs[i];
		bool fixed = s->records_present == records && s->records_unset == 0 &&
			     s->min_len == s->max_len && !s->mixed;

		printf("    %-28s %-6s%s ", s->name, pf_kind_name(s->kind),
		       s->is_list ? " list" : "");
		if (fixed)
			printf("fixed %llu", (unsigned long long)s->min_len);
		else
			printf("variable %llu..%llu", (unsigned long long)s->min_len,
			       (unsigned long long)s->max_len);
		if (s->records_present < records || s->records_unset)
			printf(", in %llu/%llu records, unset in %llu",
			       (unsigned long long)s->records_present,
			       (unsigned long long)records,
			       (unsigned long long)s->records_unset);
		if (s->mixed)
			printf(", MIXED KINDS");
		putchar('\n');
	}
}

/* Images among a shard's bytes features: the first IMAGE_SAMPLE records'
 * values probed (their headers only), by format, with their size range
 * and how many are gray, CMYK or progressive. */
#define IMAGE_SAMPLE 64u

typedef struct image_stats {
	const char *name;	/* the schema's */
	uint64_t seen, by_format[3], gray, cmyk, progressive, other;
	uint32_t min_w, max_w, min_h, max_h;
} image_stats;

static void image_sample(const char *path, const pf_feature_schema *fs, size_t nfs,
			 image_stats *st, size_t *nst)
{
	decoder dec = { 0 };
	pf_source *src;
	pf_record rec;
	pf_error err;
	uint32_t n = 0;

	*nst = 0;
	for (size_t i = 0; i < nfs && *nst < 8; i++)
		if (fs[i].kind == PF_KIND_BYTES && !fs[i].is_list)
			st[(*nst)++] = (image_stats){ .name = fs[i].name, .min_w = UINT32_MAX,
						     .min_h = UINT32_MAX };
	if (!*nst || pf_source_open(&src, path, NULL, &err) < 0)
		return;
	while (n++ < IMAGE_SAMPLE && pf_source_next(src, &rec, &err) == 1) {
		pf_example ex;

		if (decode_record(&dec, &rec, &ex, &err) < 0)
			break;
		for (size_t k = 0; k < *nst; k++) {
			const pf_feature *f = pf_example_find(&ex, st[k].name);
			pf_image_info info;
			pf_error perr;

			if (!f || f->kind != PF_KIND_BYTES || !f->count)
				continue;
			if (pf_image_probe(f->v.bytes[0].data, f->v.bytes[0].len, &info, &perr) < 0) {
				st[k].other++;
				continue;
			}
			st[k].seen++;
			st[k].by_format[info.format]++;
			st[k].gray += info.components == 1;
			st[k].cmyk += !strcmp(info.color, "cmyk") || !strcmp(info.color, "ycck");
			st[k].progressive += info.progressive;
			st[k].min_w = info.width < st[k].min_w ? info.width : st[k].min_w;
			st[k].max_w = info.width > st[k].max_w ? info.width : st[k].max_w;
			st[k].min_h = info.height < st[k].min_h ? info.height : st[k].min_h;
			st[k].max_h = info.height > st[k].max_h ? info.height : st[k].max_h;
		}
	}
	pf_arena_release(&dec.arena);
	pf_source_close(src);
}

static void images_text(const image_stats *st, size_t nst)
{
	for (size_t k = 0; k < nst; k++) {
		if (!st[k].seen)
			continue;
		printf("  image        %s: %llu of the first %llu are images (JPEG %llu, PNG "
		       "%llu; %llu gray, %llu CMYK, %llu progressive/interlaced), %u-%u x "
		       "%u-%u pixels\n", st[k].name, (unsigned long long)st[k].seen,
		       (unsigned long long)(st[k].seen + st[k].other),
		       (unsigned long long)st[k].by_format[PF_IMAGE_JPEG],
		       (unsigned long long)st[k].by_format[PF_IMAGE_PNG],
		       (unsigned long long)st[k].gray, (unsigned long long)st[k].cmyk,
		       (unsigned long long)st[k].progressive, st[k].min_w, st[k].max_w,
		       st[k].min_h, st[k].max_h);
	}
}

static json_t *images_json(const image_stats *st, size_t nst, bool *bad)
{
	json_t *arr = json_array();

	for (size_t k = 0; arr && k < nst; k++) {
		json_t *o;

		if (!st[k].seen)
			continue;
		o = json_object();
		pf_json_put(o, "feature", pf_json_str(st[k].name), bad);
		pf_json_put(o, "sampled", pf_json_u64(st[k].seen + st[k].other), bad);
		pf_json_put(o, "images", pf_json_u64(st[k].seen), bad);
		pf_json_put(o, "jpeg", pf_json_u64(st[k].by_format[PF_IMAGE_JPEG]), bad);
		pf_json_put(o, "png", pf_json_u64(st[k].by_format[PF_IMAGE_PNG]), bad);
		pf_json_put(o, "gray", pf_json_u64(st[k].gray), bad);
		pf_json_put(o, "cmyk", pf_json_u64(st[k].cmyk), bad);
		pf_json_put(o, "progressive", pf_json_u64(st[k].progressive), bad);
		pf_json_put(o, "min_width", pf_json_u64(st[k].min_w), bad);
		pf_json_put(o, "max_width", pf_json_u64(st[k].max_w), bad);
		pf_json_put(o, "min_height", pf_json_u64(st[k].min_h), bad);
		pf_json_put(o, "max_height", pf_json_u64(st[k].max_h), bad);
		if (json_array_append_new(arr, o))
			*bad = true;
	}
	return arr;
}

/* ------------------------------------------------------------------ */
/* A manifest named to inspect or verify                                */

static const char *manifest_format_name(pf_manifest_format f)
{
	return f == PF_MANIFEST_INDEXED ? "indexed" : "stream";
}

/* The manifest at path, loaded.  @return 0 with *m, or <0 after
 * printing why (file, byte offset, what). */
static int load_manifest(const char *path, pf_manifest **m)
{
	pf_error err;

	pf_error_clear(&err);
	if (pf_manifest_load(m, path, NULL, &err) < 0) {
		cli_print_error(&err);
		return err.code ? err.code : -EBADMSG;
	}
	return 0;
}

/* What the manifest at path holds: its shards and their counts, and the
 * merged schema.  @return 0, or <0 after printing why. */
static int inspect_manifest(const char *path, bool json)
{
	pf_manifest *m = NULL;
	pf_feature_schema *fs = NULL;
	size_t ns, nfs;
	uint64_t bytes = 0, indexed = 0;
	int ret = load_manifest(path, &m);

	if (ret < 0)
		return ret;
	ns = pf_manifest_shards(m);
	nfs = pf_manifest_schema_count(m);
	fs = calloc(nfs ? nfs : 1, sizeof(*fs));
	if (!fs) {
		cli_fail("%s: out of memory", path);
		pf_manifest_free(m);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nfs; i++)
		fs[i] = *pf_manifest_schema(m, i);
	for (size_t i = 0; i < ns; i++) {
		bytes += pf_manifest_get(m, i)->size;
		indexed += pf_manifest_get(m, i)->format == PF_MANIFEST_INDEXED;
	}
	if (json) {
		json_t *o = json_object(), *arr = json_array();
		bool bad = false;

		pf_json_put(o, "file", pf_json_str(path), &bad);
		pf_json_put(o, "format", pf_json_str("manifest"), &bad);
		pf_json_put(o, "shards", pf_json_u64(ns), &bad);
		pf_json_put(o, "records", pf_json_u64(pf_manifest_records(m)), &bad);
		pf_json_put(o, "shard_bytes", pf_json_u64(bytes), &bad);
		for (size_t i = 0; i < ns; i++) {
			const pf_manifest_shard *s = pf_manifest_get(m, i);
			json_t *e = json_object();

			pf_json_put(e, "path", pf_json_str(s->path), &bad);
			pf_json_put(e, "format", pf_json_str(manifest_format_name(s->format)), &bad);
			pf_json_put(e, "records", pf_json_u64(s->records), &bad);
			pf_json_put(e, "frames", pf_json_u64(s->nframes), &bad);
			pf_json_put(e, "bytes", pf_json_u64(s->size), &bad);
			if (json_array_append_new(arr, e))
				bad = true;
		}
		pf_json_put(o, "shard_list", arr, &bad);
		pf_json_put(o, "schema", schema_json(fs, nfs, pf_manifest_schema_records(m), &bad),
			    &bad);
		if (cli_json_print(o, bad))
			ret = -ENOMEM;
	} else {
		printf("%s\n", path);
		printf("  format       manifest\n");
		printf("  shards       %zu (%llu indexed, %llu stream files)\n", ns,
		       (unsigned long long)indexed, (unsigned long long)(ns - indexed));
		printf("  records      %llu\n", (unsigned long long)pf_manifest_records(m));
		printf("  bytes        %llu in the shards\n", (unsigned long long)bytes);
		for (size_t i = 0; i < ns; i++) {
			const pf_manifest_shard *s = pf_manifest_get(m, i);

			printf("    %-40s %-7s %llu records, %llu bytes\n", s->path,
			       manifest_format_name(s->format), (unsigned long long)s->records,
			       (unsigned long long)s->size);
		}
		if (nfs) {
			printf("  schema\n");
			print_schema_text(fs, nfs, pf_manifest_schema_records(m));
		}
	}
	free(fs);
	pf_manifest_free(m);
	return ret;
}

/* Whether shard i's tail is the one the manifest at path holds the
 * CRC32C of (pf_manifest_shard_tail()).  @return 0, or <0 after printing
 * why not. */
static int verify_tail(const char *path, const pf_manifest *m, size_t i, const char *shard,
		       uint64_t size)
{
	uint32_t len, crc;
	uint8_t *tail;
	pf_error err;
	int64_t got = 0;
	int fd, ret = 0;

	if (!pf_manifest_shard_tail(m, i, &len, &crc))
		return 0;
	tail = malloc(len ? len : 1);
	if (!tail)
		return -ENOMEM;
	pf_error_clear(&err);
	fd = pf_file_open(shard, &err);
	if (fd >= 0 && len)
		got = pf_file_pread(fd, tail, len, size - len, shard, &err);
	if (fd >= 0)
		close(fd);
	if (fd < 0 || got < 0) {
		cli_print_error(&err);
		ret = fd < 0 ? fd : (int)got;
	} else if ((uint64_t)got != len || pf_crc32c(0, tail, len) != crc) {
		cli_fail("%s: its last %u bytes are not those %s holds the CRC32C of: it is not "
			 "the shard the manifest was written for (run `shardtool manifest` again)",
			 shard, len, path);
		ret = -ESTALE;
	}
	free(tail);
	return ret;
}

/* The manifest at path: its own checks (magic, version, CRC, entries
 * that hold together), then each shard it lists as it says: there, a
 * regular file of its size and tail (a manifest without tails: of its
 * size and mtime).  @return 0, or <0 after printing the first problem. */
static int verify_manifest(const char *path)
{
	pf_manifest *m = NULL;
	int ret = load_manifest(path, &m);

	if (ret < 0)
		return ret;
	for (size_t i = 0; ret == 0 && i < pf_manifest_shards(m); i++) {
		const pf_manifest_shard *s = pf_manifest_get(m, i);
		char shard[PF_PATH_MAX];
		struct stat st;
		int64_t mtime;

		pf_manifest_shard_path(path, s, shard, sizeof(shard));
		if (stat(shard, &st) != 0) {
			cli_fail("%s: lists %s: %s", path, shard, strerror(errno));
			ret = -ENOENT;
			break;
		}
		mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		if (!S_ISREG(st.st_mode))
			cli_fail("%s: lists %s, which is not a regular file", path, shard);
		else if ((uint64_t)st.st_size != s->size)
			cli_fail("%s: the shard is %llu bytes, %s says %llu: it changed since the "
				 "manifest was written (run `shardtool manifest` again)", shard,
				 (unsigned long long)st.st_size, path, (unsigned long long)s->size);
		else if (!pf_manifest_shard_tail(m, i, &(uint32_t){ 0 }, &(uint32_t){ 0 }) &&
			 mtime != s->mtime_ns)
			cli_fail("%s: the shard was modified since %s was written, or copied (this "
				 "manifest knows shards by their mtime: run `shardtool manifest` "
				 "again)", shard, path);
		else if ((ret = verify_tail(path, m, i, shard, s->size)) == 0)
			continue;
		if (ret != -ENOMEM)
			ret = -ESTALE;
		break;
	}
	if (ret == 0)
		printf("%s: OK (manifest, %zu shards, %llu records)\n", path,
		       pf_manifest_shards(m), (unsigned long long)pf_manifest_records(m));
	pf_manifest_free(m);
	return ret;
}

static int inspect_one(const char *path, bool json)
{
	image_stats ist[8];
	size_t nist = 0;
	pf_source *src;
	pf_schema *schema = NULL;
	decoder dec = { 0 };
	pf_record rec;
	pf_error err;
	const pf_shard_index *ix;
	uint64_t records = 0, frames = 0, ubytes, fsize;
	const pf_feature_schema *fs = NULL;
	pf_feature_schema *copy = NULL;
	size_t nfs = 0;
	int ret;

	pf_error_clear(&err);
	ret = pf_source_open(&src, path, NULL, &err);
	if (ret < 0) {
		cli_print_error(&err);
		return ret;
	}
	ix = pf_source_index(src);
	fsize = pf_source_file_size(src);
	if (ix && pf_shard_index_schema_count(ix)) {
		/* The index carries the schema: no scan needed. */
		records = pf_shard_index_records(ix);
		frames = pf_shard_index_frames(ix);
		ubytes = pf_shard_index_uncompressed_bytes(ix);
		nfs = pf_shard_index_schema_count(ix);
		copy = calloc(nfs, sizeof(*copy));
		if (!copy) {
			ret = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < nfs; i++)
			copy[i] = *pf_shard_index_schema(ix, i);
		fs = copy;
		rec.data = NULL;
		dec.kind = PF_MSG_EXAMPLE;
		dec.decided = true;
		for (size_t i = 0; i < nfs; i++)
			if (copy[i].is_list)
				dec.kind = PF_MSG_SEQUENCE_EXAMPLE;
	} else {
		ret = pf_schema_create(&schema);
		if (ret < 0)
			goto out;
		while ((ret = pf_source_next(src, &rec, &err)) == 1) {
			pf_example ex;
			pf_error derr;

			records++;
			if (dec.raw)
				continue;
			pf_error_clear(&derr);
			if (decode_record(&dec, &rec, &ex, &derr) == 0)
				pf_schema_add(schema, &ex);
			else
				dec.raw = true;
		}
		if (ret < 0) {
			cli_print_error(&err);
			goto out;
		}
		if (ix)
			frames = pf_shard_index_frames(ix);
		ubytes = pf_source_bytes_out(src);
		if (!dec.raw) {
			nfs = pf_schema_count(schema);
			copy = calloc(nfs ? nfs : 1, sizeof(*copy));
			if (!copy) {
				ret = -ENOMEM;
				goto out;
			}
			for (size_t i = 0; i < nfs; i++)
				copy[i] = *pf_schema_get(schema, i);
			fs = copy;
		}
	}
	if (fs && nfs && !dec.raw)
		image_sample(path, fs, nfs, ist, &nist);
	{
		const char *format = ix ? "indexed" : "tfrecord";
		const char *comp = pf_compression_name(pf_source_compression(src));
		double ratio = fsize ? (double)ubytes / (double)fsize : 0.0;
		const char *msg = dec.raw ? "raw" : records ? kind_label(dec.kind) : "empty";

		if (json) {
			json_t *o = json_object();
			bool bad = false;

			pf_json_put(o, "file", pf_json_str(path), &bad);
			pf_json_put(o, "format", pf_json_str(format), &bad);
			pf_json_put(o, "compression", pf_json_str(comp), &bad);
			pf_json_put(o, "records", pf_json_u64(records), &bad);
			pf_json_put(o, "frames", pf_json_u64(frames), &bad);
			pf_json_put(o, "file_bytes", pf_json_u64(fsize), &bad);
			pf_json_put(o, "uncompressed_bytes", pf_json_u64(ubytes), &bad);
			pf_json_put(o, "ratio", pf_json_num(ratio), &bad);
			pf_json_put(o, "message", pf_json_str(msg), &bad);
			if (ix)
				pf_json_put(o, "alignment",
					    pf_json_u64(pf_shard_index_alignment(ix)), &bad);
			pf_json_put(o, "schema", schema_json(fs, fs ? nfs : 0, records, &bad),
				    &bad);
			pf_json_put(o, "images", images_json(ist, nist, &bad), &bad);
			if (cli_json_print(o, bad)) {
				ret = -ENOMEM;
				goto out;
			}
		} else {
			printf("%s\n", path);
			printf("  format       %s%s\n", format,
			       ix && pf_shard_index_alignment(ix) ? " (frames aligned)" : "");
			printf("  compression  %s\n", comp);
			printf("  records      %llu\n", (unsigned long long)records);
			if (ix)
				printf("  frames       %llu\n", (unsigned long long)frames);
			printf("  bytes        %llu on disk, %llu TFRecord (ratio %.2f)\n",
			       (unsigned long long)fsize, (unsigned long long)ubytes, ratio);
			printf("  message      %s\n", msg);
			if (fs && nfs) {
				printf("  schema\n");
				print_schema_text(fs, nfs, records);
			}
			images_text(ist, nist);
		}
	}
	ret = 0;
out:
	if (ret == -ENOMEM)
		cli_fail("%s: out of memory", path);
	free(copy);
	pf_schema_free(schema);
	pf_arena_release(&dec.arena);
	pf_source_close(src);
	return ret;
}

typedef struct inspect_opts {
	bool json;
} inspect_opts;

static const cli_opt inspect_cli[] = {
	{ CLI_FLAG, "json", .off = offsetof(inspect_opts, json),
	  .help = "one JSON object per file per line" },
	{ CLI_END },
};

static const cli_command inspect_command = {
	.name = "shardtool inspect",
	.usage = "usage: shardtool inspect [--json] FILE...\n",
	.about = "Prints each file's format, compression, frames, records, sizes,\n"
		 "compression ratio and the inferred feature schema.\n",
	.opts = inspect_cli,
};

int cmd_inspect(int argc, char **argv)
{
	inspect_opts io = { 0 };
	bool json;
	char **inputs, *manifest = NULL;
	int n, bad = 0, ret, first;

	ret = cli_parse(&inspect_command, argc, argv, &io, &first);
	if (ret >= 0)
		return ret;
	json = io.json;
	if (first == argc)
		return cli_usage("no files given");
	n = cli_resolve_inputs(argv + first, argc - first, &inputs, &manifest);
	if (n < 0)
		return 1;
	/* A manifest prints what it holds; named alone, it is all that is
	 * printed (its shards are in it), beside shards they follow. */
	if (manifest && inspect_manifest(manifest, json) < 0)
		bad++;
	for (int i = 0; (!manifest || argc - first > 1) && i < n; i++)
		if (inspect_one(inputs[i], json) < 0)
			bad++;
	cli_free_inputs(inputs, n);
	free(manifest);
	return bad ? 1 : 0;
}

/* ------------------------------------------------------------------ */

/* verify's progress: records checked, their bytes, the files' bytes
 * done of all (a file counts once both its passes are done). */
typedef struct verify_progress {
	cli_progress line;
	uint64_t records, bytes, done_bytes, all_bytes;
} verify_progress;

static void verify_draw(verify_progress *vp, uint64_t records, uint64_t bytes)
{
	cli_progress_draw(&vp->line, "verify", vp->records + records, vp->bytes + bytes,
			  vp->all_bytes ? (double)vp->done_bytes / (double)vp->all_bytes : 0);
}

/* Every record of src, counted, the progress line drawn.  @return the
 * count, or -errno with err. */
static int64_t verify_drain(pf_source *src, verify_progress *vp, pf_error *err)
{
	pf_record rec;
	int64_t n = 0;
	uint64_t bytes = 0;
	int ret;

	while ((ret = pf_source_next(src, &rec, err)) == 1) {
		n++;
		bytes += rec.len;
		verify_draw(vp, (uint64_t)n, bytes);
	}
	vp->records += (uint64_t)n;
	vp->bytes += bytes;
	return ret < 0 ? ret : n;
}

static int verify_one(const char *path, verify_progress *vp)
{
	pf_source *src = NULL;
	pf_error err;
	int64_t n;
	int ret;

	pf_error_clear(&err);
	ret = pf_source_open(&src, path, NULL, &err);
	if (ret < 0)
		goto bad;
	n = verify_drain(src, vp, &err);
	if (n < 0) {
		ret = (int)n;
		goto bad;
	}
	if (pf_source_index(src)) {
		const pf_shard_index *ix = pf_source_index(src);
		pf_source *stream = NULL;
		int64_t m;

		if ((uint64_t)n != pf_shard_index_records(ix)) {
			ret = pf_error_set(&err, -EBADMSG, PF_OFFSET_NONE, 0,
					   "index says %llu records, frames hold %lld",
					   (unsigned long long)pf_shard_index_records(ix),
					   (long long)n);
			pf_error_set_file(&err, path);
			goto bad;
		}
		/* The file must also be a plain zstd stream of TFRecords:
		 * padding, index and seek table frames included. */
		pf_source_config scfg = { .ignore_index = true };
		ret = pf_source_open(&stream, path, &scfg, &err);
		if (ret < 0)
			goto bad;
		m = verify_drain(stream, vp, &err);
		pf_source_close(stream);
		if (m < 0) {
			ret = (int)m;
			goto bad;
		}
		if (m != n) {
			ret = pf_error_set(&err, -EBADMSG, PF_OFFSET_NONE, 0,
					   "read as a zstd stream it holds %lld records, "
					   "through the index %lld", (long long)m, (long long)n);
			pf_error_set_file(&err, path);
			goto bad;
		}
		cli_progress_end(&vp->line);
		printf("%s: OK (indexed, %u frames, %lld records)\n", path,
		       pf_shard_index_frames(ix), (long long)n);
	} else {
		cli_progress_end(&vp->line);
		printf("%s: OK (%s, %lld records)\n", path,
		       pf_compression_name(pf_source_compression(src)), (long long)n);
	}
	pf_source_close(src);
	return 0;
bad:
	cli_print_error(&err);
	pf_source_close(src);
	return ret < 0 ? ret : -EBADMSG;
}

static const cli_opt no_options[] = { { CLI_END } };

static const cli_command verify_command = {
	.name = "shardtool verify",
	.usage = "usage: shardtool verify FILE...\n",
	.about = "Checks every record CRC, and for indexed shards the index, every frame\n"
		 "CRC, the record counts and the zstd stream as a whole.  Exit 0 only\n"
		 "when everything is clean; else prints the first problem of each bad\n"
		 "file (file, byte offset, what) and exits 1.\n",
	.opts = no_options,
};

int cmd_verify(int argc, char **argv)
{
	char **inputs, *manifest = NULL;
	int n, bad = 0, ret, first;
	verify_progress vp = { 0 };
	uint64_t t0 = pf_now_ns();

	ret = cli_parse(&verify_command, argc, argv, NULL, &first);
	if (ret >= 0)
		return ret;
	if (first == argc)
		return cli_usage("no files given");
	n = cli_resolve_inputs(argv + first, argc - first, &inputs, &manifest);
	if (n < 0)
		return 1;
	/* A manifest as a manifest (its checksums, its shards' sizes), then
	 * the shards it lists as shards. */
	if (manifest && verify_manifest(manifest) < 0)
		bad++;
	for (int i = 0; i < n; i++) {
		struct stat st;

		if (stat(inputs[i], &st) == 0)
			vp.all_bytes += (uint64_t)st.st_size;
	}
	for (int i = 0; i < n; i++) {
		struct stat st;

		cli_progress_start(&vp.line, false);
		vp.line.start_ns = t0;
		if (verify_one(inputs[i], &vp) < 0)
			bad++;
		if (stat(inputs[i], &st) == 0)
			vp.done_bytes += (uint64_t)st.st_size;
	}
	cli_progress_end(&vp.line);
	cli_free_inputs(inputs, n);
	if (bad)
		fprintf(stderr, "%s: %d of %d files failed verification\n", cli_prog, bad,
			n + (manifest != NULL));
	free(manifest);
	return bad ? 1 : 0;
}

/* ------------------------------------------------------------------ */

/* A feature's values; bytes as Latin-1 (each byte one code point), so
 * that any bytes come out and can be had back. */
static json_t *values_json(const pf_feature *ft, bool *bad)
{
	json_t *arr = json_array();

	for (uint32_t i = 0; i < ft->count; i++) {
		json_t *v = NULL;

		switch (ft->kind) {
		case PF_KIND_BYTES:
			v = pf_json_latin1(ft->v.bytes[i].data, ft->v.bytes[i].len);
			break;
		case PF_KIND_FLOAT:
			v = pf_json_num(ft->v.floats[i]);
			break;
		case PF_KIND_INT64:
			v = json_integer(ft->v.int64s[i]);
			break;
		case PF_KIND_NONE:
			continue;
		}
		if (json_array_append_new(arr, v))
			*bad = true;
	}
	return arr;
}

static json_t *feature_json(const pf_feature *ft, bool *bad)
{
	json_t *o = json_object();

	pf_json_put(o, "kind", pf_json_str(pf_kind_name(ft->kind)), bad);
	pf_json_put(o, "values", values_json(ft, bad), bad);
	return o;
}

static json_t *features_json(const pf_feature *fs, uint32_t n, bool *bad)
{
	json_t *o = json_object();

	for (uint32_t i = 0; i < n; i++)
		pf_json_putn(o, fs[i].name, fs[i].name_len, feature_json(&fs[i], bad), bad);
	return o;
}

/* One record as a JSON line: its number, offset and size, and its
 * features (an Example's, or a SequenceExample's context and lists), or
 * the payload itself when it is not an Example. */
static int record_json(decoder *dec, const pf_record *rec)
{
	json_t *o = json_object();
	pf_example ex;
	pf_error derr;
	bool bad = false;

	pf_json_put(o, "record", pf_json_u64(rec->index), &bad);
	pf_json_put(o, "offset", pf_json_u64(rec->offset), &bad);
	pf_json_put(o, "bytes", pf_json_u64(rec->len), &bad);
	pf_error_clear(&derr);
	if (decode_record(dec, rec, &ex, &derr) == 0) {
		if (dec->kind == PF_MSG_SEQUENCE_EXAMPLE) {
			json_t *lists = json_object();

			pf_json_put(o, "context", features_json(ex.features, ex.n_features, &bad),
				    &bad);
			for (uint32_t i = 0; i < ex.n_lists; i++) {
				const pf_feature_list *l = &ex.lists[i];
				json_t *steps = json_array();

				for (uint32_t k = 0; k < l->steps; k++)
					if (json_array_append_new(steps, feature_json(&l->step[k], &bad)))
						bad = true;
				pf_json_putn(lists, l->name, l->name_len, steps, &bad);
			}
			pf_json_put(o, "feature_lists", lists, &bad);
		} else {
			pf_json_put(o, "features", features_json(ex.features, ex.n_features, &bad),
				    &bad);
		}
	} else {
		/* Not an Example: show the payload itself. */
		pf_json_put(o, "raw", pf_json_latin1(rec->data, rec->len), &bad);
		dec->decided = false;
	}
	return cli_json_print(o, bad);
}

typedef struct cat_opts {
	uint64_t from, to;
} cat_opts;

static int parse_range(void *field, const char *v)
{
	cat_opts *o = field;

	return cli_parse_range("--range", v, &o->from, &o->to);
}

static const cli_opt cat_cli[] = {
	{ CLI_CALL, "range", .arg = "A:B", .call = parse_range,
	  .help = "records A (inclusive) to B (exclusive); A: and :B are open ranges "
		  "(default: all)" },
	{ CLI_END },
};

static const cli_command cat_command = {
	.name = "shardtool cat",
	.usage = "usage: shardtool cat [--range A:B] FILE\n",
	.about = "Prints records as JSON lines with their feature values.\n",
	.opts = cat_cli,
};

int cmd_cat(int argc, char **argv)
{
	cat_opts co = { .from = 0, .to = UINT64_MAX };
	bool failed = false;
	uint64_t from, to;
	pf_source *src;
	decoder dec = { 0 };
	pf_record rec;
	pf_error err;
	int ret, first;

	ret = cli_parse(&cat_command, argc, argv, &co, &first);
	if (ret >= 0)
		return ret;
	from = co.from;
	to = co.to;
	if (argc - first != 1)
		return cli_usage("exactly one FILE is required");
	pf_error_clear(&err);
	if (pf_source_open(&src, argv[first], NULL, &err) < 0) {
		cli_print_error(&err);
		return 1;
	}
	/* Indexed shards jump to the first frame wanted. */
	if (from && pf_source_index(src)) {
		uint64_t total = pf_shard_index_records(pf_source_index(src));
		pf_source_seek_record(src, from < total ? from : total);
	}
	while ((ret = pf_source_next(src, &rec, &err)) == 1) {
		if (rec.index < from)
			continue;
		if (rec.index >= to)
			break;
		if (record_json(&dec, &rec)) {
			failed = true;	/* said why */
			break;
		}
	}
	if (ret < 0)
		cli_print_error(&err);
	pf_arena_release(&dec.arena);
	pf_source_close(src);
	return ret < 0 || failed ? 1 : 0;
}
