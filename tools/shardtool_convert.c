/* SPDX-License-Identifier: Apache-2.0 */
/* `shardtool convert` (any readable records into indexed zstd shards)
 * and `shardtool manifest` (the dataset manifest). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardtool.h"

typedef struct out_shard {
	pf_shard_writer *w;
	pf_schema *schema;
	decoder dec;
	int fd;
	char path[4096], tmp[4200];
} out_shard;

static int finish_shard(out_shard *o, bool ok, pf_error *err)
{
	int ret = 0;

	if (ok && o->schema && !o->dec.raw)
		ret = pf_shard_writer_set_schema(o->w, o->schema);
	if (ok && ret == 0)
		ret = pf_shard_writer_close(o->w, err);
	if (ret < 0 && ok) {
		pf_error_set_file(err, o->tmp);
		cli_print_error(err);
		ok = false;
	}
	pf_shard_writer_free(o->w);
	pf_schema_free(o->schema);
	pf_arena_release(&o->dec.arena);
	o->w = NULL;
	o->schema = NULL;
	memset(&o->dec, 0, sizeof(o->dec));
	return close_out(o->fd, o->tmp, o->path, ok);
}

static int count_records(char **inputs, int n, uint64_t *total)
{
	*total = 0;
	for (int i = 0; i < n; i++) {
		pf_source *src;
		pf_record rec;
		pf_error err;
		int ret;

		pf_error_clear(&err);
		ret = pf_source_open(&src, inputs[i], NULL, &err);
		if (ret < 0) {
			cli_print_error(&err);
			return ret;
		}
		if (pf_source_index(src)) {
			*total += pf_shard_index_records(pf_source_index(src));
		} else {
			while ((ret = pf_source_next(src, &rec, &err)) == 1)
				(*total)++;
			if (ret < 0) {
				cli_print_error(&err);
				pf_source_close(src);
				return ret;
			}
		}
		pf_source_close(src);
	}
	return 0;
}

/* "part-NNNNN-of-NNNNN.tfrecord.zst", or that with ".tmp.<digits>" after
 * it (a run that died before its rename), or the manifest: the names
 * convert writes. */
static bool is_convert_output(const char *name)
{
	const char *p = name;

	/* the manifest, and its .tmp (a run that died before the rename) */
	if (!strcmp(p, PF_MANIFEST_NAME) || !strcmp(p, PF_MANIFEST_NAME ".tmp"))
		return true;
	if (strncmp(p, "part-", 5))
		return false;
	p += 5;
	for (int k = 0; k < 2; k++) {
		size_t d = strspn(p, "0123456789");

		if (d < 5)
			return false;
		p += d;
		if (k == 0) {
			if (strncmp(p, "-of-", 4))
				return false;
			p += 4;
		}
	}
	if (strncmp(p, ".tfrecord.zst", 13))
		return false;
	p += 13;
	if (!*p)
		return true;
	if (strncmp(p, ".tmp.", 5))
		return false;
	p += 5;
	return *p && strspn(p, "0123456789") == strlen(p);
}

/*
 * What convert may do to an existing --out DIR.  A directory is read as
 * all its non-hidden files, so anything left in it beside the new shards
 * (an input, an earlier convert's shards of another count, any other
 * file) would be read again by the next run: duplicated records.  So DIR
 * must hold no non-hidden entry; with force, convert's own earlier output
 * (is_convert_output()) is removed first, and anything else is still
 * refused.  An input inside DIR (the same file, by device and inode) is
 * refused even with force: convert never removes an input.
 * @return 0, or 2 after printing one line naming the file.
 */
static int check_out_dir(const char *out, char **inputs, int n, bool force)
{
	DIR *dir = opendir(out);
	struct dirent *e;
	char path[4096];
	int ret = 0;

	if (!dir)
		return 0;	/* absent: made later; not a directory: said later */
	/* Pass 0 looks for inputs (refused whatever the flags), pass 1 for
	 * anything else, pass 2 (force) removes: nothing is removed unless
	 * everything may be. */
	for (int pass = 0; pass < (force ? 3 : 2) && !ret; pass++) {
		rewinddir(dir);
		while (!ret && (e = readdir(dir))) {
			struct stat st;

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", out, e->d_name);
			if (pass == 0 && stat(path, &st) == 0) {
				for (int i = 0; i < n && !ret; i++) {
					struct stat in;

					if (stat(inputs[i], &in) == 0 && in.st_dev == st.st_dev &&
					    in.st_ino == st.st_ino) {
						ret = cli_usage("input %s is inside --out %s: a run "
							 "reading %s would read it and its copy; "
							 "write to another directory", inputs[i], out, out);
					}
				}
			} else if (pass == 1 && !force) {
				ret = cli_usage("--out %s is not empty (it holds %s): a run "
						"reading it would read old files beside the new shards; "
						"use an empty directory, or --force to replace an "
						"earlier convert's output", out, e->d_name);
			} else if (pass == 1 && !is_convert_output(e->d_name)) {
				ret = cli_usage("--out %s holds %s, which convert did not "
						"write (--force replaces only part-NNNNN-of-NNNNN.tfrecord.zst "
						"and " PF_MANIFEST_NAME "); "
						"move it away or use an empty directory", out, e->d_name);
			} else if (pass == 2 && unlink(path) < 0) {
				cli_fail("--force: cannot remove %s: %s", path,
					 strerror(errno));
				ret = 1;
			}
		}
	}
	closedir(dir);
	return ret;
}

/* The manifest of the shards convert wrote (and nothing else in dir). */
static int write_convert_manifest(const char *dir, uint64_t shards)
{
	char **paths = calloc(shards, sizeof(*paths));
	char out[4096];
	pf_error err;
	int ret = paths ? 0 : -ENOMEM;

	for (uint64_t i = 0; ret == 0 && i < shards; i++)
		if (asprintf(&paths[i], "%s/part-%05llu-of-%05llu.tfrecord.zst", dir,
			     (unsigned long long)i, (unsigned long long)shards) < 0) {
			paths[i] = NULL;
			ret = -ENOMEM;
		}
	pf_error_clear(&err);
	snprintf(out, sizeof(out), "%s/%s", dir, PF_MANIFEST_NAME);
	if (ret == 0)
		ret = pf_manifest_write((const char *const *)paths, shards, out, NULL, &err);
	if (ret < 0 && err.code)
		cli_print_error(&err);
	else if (ret < 0)
		cli_fail("out of memory writing the manifest");
	for (uint64_t i = 0; paths && i < shards; i++)
		free(paths[i]);
	free(paths);
	return ret;
}

typedef struct manifest_opts {
	const char *out;
} manifest_opts;

static const cli_opt manifest_cli[] = {
	{ CLI_STRING, "out", .arg = "FILE", .off = offsetof(manifest_opts, out),
	  .help = "where to write it (default: DIR/" PF_MANIFEST_NAME " when PATH is one "
		  "directory)" },
	{ CLI_END },
};

static const cli_command manifest_command = {
	.name = "shardtool manifest",
	.usage = "usage: shardtool manifest [--out FILE] PATH...\n",
	.about = "Writes the dataset manifest of the shards PATH names (files, directories\n"
		 "or globs): every shard's path, size, mtime, format, record count and\n"
		 "frames, and the feature schema, so that every host plans the dataset\n"
		 "from one read instead of opening every shard.  Stream files (plain,\n"
		 "GZIP, zstd without an index) are read once here to count them.  Every\n"
		 "shard must be under FILE's directory.  A loader given the directory (or\n"
		 "the manifest) then uses it; a shard changed since is an error when it\n"
		 "is read: run this again after changing shards.\n",
	.opts = manifest_cli,
};

int cmd_manifest(int argc, char **argv)
{
	manifest_opts mo = { 0 };
	const char *out;
	char buf[4096];
	pf_manifest_info info;
	pf_error err;
	struct stat st;
	int ret, first;

	ret = cli_parse(&manifest_command, argc, argv, &mo, &first);
	if (ret >= 0)
		return ret;
	out = mo.out;
	if (first == argc)
		return cli_usage("name the shards (files, directories or globs)");
	if (!out) {
		if (argc - first != 1 || stat(argv[first], &st) < 0 || !S_ISDIR(st.st_mode))
			return cli_usage("--out FILE is needed unless PATH is one directory");
		if ((size_t)snprintf(buf, sizeof(buf), "%s/%s", argv[first], PF_MANIFEST_NAME) >=
		    sizeof(buf)) {
			return cli_usage("%s: path too long", argv[first]);
		}
		out = buf;
	}
	pf_error_clear(&err);
	if (pf_manifest_write((const char *const *)argv + first, (size_t)(argc - first), out,
			      &info, &err) < 0) {
		cli_print_error(&err);
		return 1;
	}
	printf("manifest: %s: %llu shards (%llu indexed, %llu stream files), %llu records, "
	       "%llu shard bytes, %llu manifest bytes\n", out, (unsigned long long)info.shards,
	       (unsigned long long)info.indexed, (unsigned long long)info.streams,
	       (unsigned long long)info.records, (unsigned long long)info.bytes,
	       (unsigned long long)info.manifest_bytes);
	return 0;
}

typedef struct convert_opts {
	const char *out;
	uint64_t shards, frame_size, level, align;
	bool force;
} convert_opts;

static int check_align(void *field, const char *v)
{
	uint64_t *align = field;

	if (cli_parse_u64("--align", v, 4096, 1u << 30, true, align) < 0)
		return -EINVAL;
	if (*align & (*align - 1)) {
		cli_usage("--align: %llu is not a power of two", (unsigned long long)*align);
		return -EINVAL;
	}
	return 0;
}

static const cli_opt convert_cli[] = {
	{ CLI_STRING, "out", .arg = "DIR", .off = offsetof(convert_opts, out),
	  .help = "the directory to write the shards to (required; empty unless --force)" },
	{ CLI_U64, "shards", .arg = "M", .off = offsetof(convert_opts, shards), .min = 1,
	  .max = 1000000, .help = "shards to write (default: the number of inputs)" },
	{ CLI_U64, "frame-size", .arg = "BYTES", .off = offsetof(convert_opts, frame_size),
	  .min = 1, .max = 1ull << 30, .suffix = true,
	  .help = "target uncompressed bytes per zstd frame (default 1M)" },
	{ CLI_U64, "level", .arg = "L", .off = offsetof(convert_opts, level), .min = 1,
	  .max = 19, .help = "zstd level 1..19 (default 3)" },
	{ CLI_CALL, "align", .arg = "BYTES", .off = offsetof(convert_opts, align),
	  .call = check_align,
	  .help = "align frames to this power of two >= 4096 (O_DIRECT)" },
	{ CLI_FLAG, "force", .off = offsetof(convert_opts, force),
	  .help = "DIR may hold an earlier convert's output: every file named "
		  "part-NNNNN-of-NNNNN.tfrecord.zst (any count), " PF_MANIFEST_NAME
		  " and their leftovers are removed first, then the new shards are "
		  "written" },
	{ CLI_END },
};

static const cli_command convert_command = {
	.name = "shardtool convert",
	.usage = "usage: shardtool convert --out DIR [--shards M] [--frame-size BYTES]\n"
		 "                         [--level L] [--align 4096] [--force] INPUT...\n",
	.about = "Reads every record of the inputs (plain, GZIP, ZLIB, zstd or indexed;\n"
		 "files, directories or globs, in the order given) and writes M indexed\n"
		 "shards part-NNNNN-of-MMMMM.tfrecord.zst to DIR, records and their order\n"
		 "unchanged, split by record count, and DIR/" PF_MANIFEST_NAME " (see\n"
		 "`shardtool manifest`).\n",
	.opts = convert_cli,
	.footer = "DIR must be empty (hidden files aside) unless --force; any other file\n"
		  "in it, and an input inside it, is refused even with --force (a later\n"
		  "run reading DIR would read it beside the shards; inputs are never\n"
		  "removed).\n",
};

int cmd_convert(int argc, char **argv)
{
	convert_opts co = { .frame_size = PF_SHARD_FRAME_DEFAULT, .level = 3 };
	bool force;
	pf_shard_writer_config wcfg;
	uint64_t shards, total, done = 0;
	const char *out;
	char **inputs = NULL;
	int n = 0, ret, first;
	out_shard o = { .fd = -1 };
	uint64_t cur = 0, cur_end = 0, written_shards = 0, bytes = 0;
	cli_progress pg = { 0 };

	ret = cli_parse(&convert_command, argc, argv, &co, &first);
	if (ret >= 0)
		return ret;
	if (!co.out || first == argc)
		return cli_usage("--out and at least one input are required");
	ret = 1;
	out = co.out;
	shards = co.shards;
	force = co.force;
	wcfg = (pf_shard_writer_config){ .frame_size = co.frame_size, .level = (int)co.level,
					 .align = (uint32_t)co.align };
	n = cli_expand_inputs(argv + first, argc - first, &inputs);
	if (n < 0)
		return 1;
	if (n == 0) {
		cli_fail("the inputs name no files");
		return 1;
	}
	if (!shards)
		shards = (uint64_t)n;
	ret = check_out_dir(out, inputs, n, force);
	if (ret)
		goto out;
	ret = 1;
	if (count_records(inputs, n, &total) < 0)
		goto out;
	if (total == 0) {
		cli_fail("%s%s: no records to convert", inputs[0],
			 n > 1 ? " and the other inputs" : "");
		goto out;
	}
	/* A shard holds at least one record: an empty one is no shard (a
	 * reader finds no schema in it). */
	if (shards > total) {
		fprintf(stderr, "convert: %llu shards %s, the inputs hold %llu records: writing "
			"%llu shards of one record\n", (unsigned long long)shards,
			co.shards ? "asked for (--shards)" : "(one per input)",
			(unsigned long long)total, (unsigned long long)total);
		shards = total;
	}
	if (ensure_dir(out) < 0)
		goto out;
	cli_progress_start(&pg, false);

	for (int i = 0; i < n; i++) {
		pf_source *src;
		pf_record rec;
		pf_error err;

		pf_error_clear(&err);
		if (pf_source_open(&src, inputs[i], NULL, &err) < 0) {
			cli_print_error(&err);
			goto fail;
		}
		while ((ret = pf_source_next(src, &rec, &err)) == 1) {
			pf_example ex;
			pf_error derr;

			/* Open the next output when this one is full. */
			while (done == cur_end) {
				if (o.w && finish_shard(&o, true, &err) < 0) {
					pf_source_close(src);
					goto fail;
				}
				cur = written_shards++;
				cur_end = total * (cur + 1) / shards;
				snprintf(o.path, sizeof(o.path),
					 "%s/part-%05llu-of-%05llu.tfrecord.zst", out,
					 (unsigned long long)cur, (unsigned long long)shards);
				o.fd = open_out(o.path, o.tmp, sizeof(o.tmp));
				if (o.fd < 0 ||
				    pf_shard_writer_create(&o.w, &wcfg, sink_fd, &o.fd) < 0 ||
				    pf_schema_create(&o.schema) < 0) {
					cli_fail("cannot start %s", o.path);
					pf_source_close(src);
					goto fail;
				}
			}
			pf_error_clear(&derr);
			if (!o.dec.raw) {
				if (decode_record(&o.dec, &rec, &ex, &derr) == 0)
					ret = pf_schema_add(o.schema, &ex);
				else
					o.dec.raw = true;	/* not all Examples */
			}
			ret = pf_shard_writer_add(o.w, rec.data, rec.len, &err);
			if (ret < 0) {
				pf_error_set_file(&err, o.tmp);
				cli_print_error(&err);
				pf_source_close(src);
				goto fail;
			}
			done++;
			bytes += rec.len;
			cli_progress_draw(&pg, "convert", done, bytes,
					  total ? (double)done / (double)total : 0);
		}
		pf_source_close(src);
		if (ret < 0) {
			cli_print_error(&err);
			goto fail;
		}
	}
	if (done != total) {
		cli_fail("inputs changed while converting (%llu records, counted %llu)",
			 (unsigned long long)done, (unsigned long long)total);
		goto fail;
	}
	{
		pf_error err;
		pf_error_clear(&err);
		if (o.w && finish_shard(&o, true, &err) < 0)
			goto out;
	}
	if (write_convert_manifest(out, shards) < 0)
		goto fail;
	cli_progress_end(&pg);
	printf("convert: %llu records from %d input%s into %llu indexed shards under %s\n",
	       (unsigned long long)total, n, n == 1 ? "" : "s",
	       (unsigned long long)shards, out);
	ret = 0;
	goto out;
fail:
	if (o.w) {
		pf_error err;
		pf_error_clear(&err);
		finish_shard(&o, false, &err);
	} else if (o.fd >= 0) {
		close_out(o.fd, o.tmp, o.path, false);
	}
	ret = 1;
out:
	cli_progress_end(&pg);
	cli_free_inputs(inputs, n);
	return ret;
}
