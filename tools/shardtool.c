/* SPDX-License-Identifier: Apache-2.0 */
/* shardtool: make, convert, inspect, verify and print record shards. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "common_internal.h"
#include "podsim.h"

#define SYNTH_VOCAB 32000u
#define SYNTH_TOKEN_CLASSES 8u
#define SYNTH_DENSE_DIM 256u
#define SYNTH_DENSE_CLASSES 10u

/* ------------------------------------------------------------------ */
/* Deterministic randomness: splitmix64, one stream per record.         */

static double rng_gauss(pf_rng *r)
{
	double u = pf_rng_unit(r), v = pf_rng_unit(r);

	return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

/* ------------------------------------------------------------------ */

typedef enum synth_kind { SYNTH_TOKENS, SYNTH_DENSE, SYNTH_IMAGES } synth_kind;

typedef struct synth {
	synth_kind kind;
	uint64_t seed;
	float *teacher;		/* dense: [classes][dim] */
	int64_t *ids;
	float *x;
	uint8_t *image;
	uint8_t *out;
	size_t out_cap;
} synth;

/* A token's vote for a class in the hidden teacher, in [-1, 1). */
static double token_vote(uint64_t seed, uint32_t cls, int64_t id)
{
	uint64_t h = pf_mix64(seed ^ pf_mix64((uint64_t)id * SYNTH_TOKEN_CLASSES + cls));

	return (double)(h >> 11) * 0x1.0p-52 - 1.0;
}

/* Encode record number g into s->out.  @return bytes or -errno. */
static int64_t synth_record(synth *s, uint64_t g)
{
	pf_rng r = { pf_mix64(s->seed) ^ pf_mix64(g + 1) };
	pf_feature f[2];
	int64_t label;
	pf_bytes img;

	memset(f, 0, sizeof(f));
	f[1].name = "label";
	f[1].name_len = 5;
	f[1].kind = PF_KIND_INT64;
	f[1].count = 1;
	f[1].v.int64s = &label;

	switch (s->kind) {
	case SYNTH_TOKENS: {
		uint32_t n = 128 + (uint32_t)(pf_rng_next(&r) % 385);
		double score[SYNTH_TOKEN_CLASSES] = { 0 };
		const double logv = log((double)SYNTH_VOCAB + 1.0);

		for (uint32_t i = 0; i < n; i++) {
			/* P(id) ~ 1/(id+1): log-uniform rank, Zipf with s = 1. */
			int64_t id = (int64_t)floor(exp(pf_rng_unit(&r) * logv)) - 1;
			if (id >= (int64_t)SYNTH_VOCAB)
				id = SYNTH_VOCAB - 1;
			s->ids[i] = id;
			for (uint32_t c = 0; c < SYNTH_TOKEN_CLASSES; c++)
				score[c] += token_vote(s->seed, c, id);
		}
		label = 0;
		for (uint32_t c = 1; c < SYNTH_TOKEN_CLASSES; c++)
			if (score[c] > score[label])
				label = c;
		f[0].name = "tokens";
		f[0].name_len = 6;
		f[0].kind = PF_KIND_INT64;
		f[0].count = n;
		f[0].v.int64s = s->ids;
		break;
	}
	case SYNTH_DENSE: {
		double best = -INFINITY;

		for (uint32_t i = 0; i < SYNTH_DENSE_DIM; i++)
			s->x[i] = (float)rng_gauss(&r);
		label = 0;
		for (uint32_t c = 0; c < SYNTH_DENSE_CLASSES; c++) {
			double z = 0;
			for (uint32_t i = 0; i < SYNTH_DENSE_DIM; i++)
				z += (double)s->teacher[c * SYNTH_DENSE_DIM + i] * s->x[i];
			if (z > best) {
				best = z;
				label = c;
			}
		}
		f[0].name = "x";
		f[0].name_len = 1;
		f[0].kind = PF_KIND_FLOAT;
		f[0].count = SYNTH_DENSE_DIM;
		f[0].v.floats = s->x;
		break;
	}
	case SYNTH_IMAGES: {
		uint32_t n = (16u << 10) + (uint32_t)(pf_rng_next(&r) % ((48u << 10) + 1));

		for (uint32_t i = 0; i < n; i += 8) {
			uint64_t w = pf_rng_next(&r);
			memcpy(s->image + i, &w, n - i < 8 ? n - i : 8);
		}
		label = (int64_t)(pf_rng_next(&r) % 1000);
		img.data = s->image;
		img.len = n;
		f[0].name = "image";
		f[0].name_len = 5;
		f[0].kind = PF_KIND_BYTES;
		f[0].count = 1;
		f[0].v.bytes = &img;
		break;
	}
	}
	return pf_example_encode(f, 2, s->out, s->out_cap);
}

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int sink_fd(void *ctx, const void *buf, size_t len)
{
	return write_all(*(int *)ctx, buf, len);
}

/* Create the output directory if missing. */
static int ensure_dir(const char *dir)
{
	struct stat st;

	if (stat(dir, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return 0;
		cli_fail("%s: exists and is not a directory", dir);
		return -ENOTDIR;
	}
	if (mkdir(dir, 0755) < 0) {
		cli_fail("%s: cannot create directory: %s", dir, strerror(errno));
		return -errno;
	}
	return 0;
}

/* Write to a temporary name, rename into place when complete, so a crash
 * never leaves a half shard under the final name. */
static int open_out(const char *path, char *tmp, size_t tmp_cap)
{
	int fd;

	snprintf(tmp, tmp_cap, "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		cli_fail("%s: cannot create: %s", tmp, strerror(errno));
	return fd;
}

static int close_out(int fd, const char *tmp, const char *path, bool ok)
{
	if (close(fd) < 0 && ok) {
		cli_fail("%s: %s", tmp, strerror(errno));
		ok = false;
	}
	if (!ok) {
		unlink(tmp);
		return -EIO;
	}
	if (rename(tmp, path) < 0) {
		cli_fail("%s: cannot rename into place: %s", path, strerror(errno));
		unlink(tmp);
		return -errno;
	}
	return 0;
}

typedef struct synth_opts {
	int kind;		/* synth_kind */
	uint64_t records, shards, seed;
	const char *out;
	bool kind_given;
} synth_opts;

static const cli_opt synth_cli[] = {
	{ CLI_CHOICE, "kind", .arg = "tokens|dense|images", .choices = "tokens|dense|images",
	  .off = offsetof(synth_opts, kind), .seen = CLI_SEEN(synth_opts, kind_given),
	  .help = "tokens: 'tokens', Zipf-like int64 ids (vocab 32000), 128-512 per "
		  "record, and 'label', an int64 class from a hidden teacher (8 "
		  "classes); dense: 'x', 256 Gaussian floats, and 'label', the argmax "
		  "of a hidden linear teacher (10 classes); images: 'image', "
		  "incompressible 16-64 KiB bytes, and 'label', int64 0..999" },
	{ CLI_U64, "records", .arg = "N", .off = offsetof(synth_opts, records),
	  .max = 1ull << 40, .suffix = true, .help = "records in all" },
	{ CLI_U64, "shards", .arg = "S", .off = offsetof(synth_opts, shards), .min = 1,
	  .max = 1000000, .help = "shards (their sizes vary)" },
	{ CLI_STRING, "out", .arg = "DIR", .off = offsetof(synth_opts, out),
	  .help = "the directory to write them to" },
	{ CLI_U64, "seed", .arg = "SEED", .off = offsetof(synth_opts, seed), .max = UINT64_MAX,
	  .help = "the same seed gives the same bytes (default 1)" },
	{ CLI_END },
};

static const cli_command synth_command = {
	.name = "shardtool synth",
	.usage = "usage: shardtool synth --kind tokens|dense|images --records N --shards S\n"
		 "                       --out DIR [--seed SEED]\n",
	.about = "Writes S plain TFRecord shards of tf.train.Example to DIR; record i is\n"
		 "the same whatever S is.\n",
	.opts = synth_cli,
};

static int cmd_synth(int argc, char **argv)
{
	synth_opts so = { .seed = 1 };
	synth s = { .kind = SYNTH_TOKENS, .seed = 1 };
	uint64_t records, shards, *count = NULL;
	const char *out, *kind;
	int ret, first;

	ret = cli_parse(&synth_command, argc, argv, &so, &first);
	if (ret >= 0)
		return ret;
	if (first != argc)
		return cli_usage("unexpected argument '%s'", argv[first]);
	if (!so.kind_given || !so.out || !so.shards)
		return cli_usage("--kind, --records, --shards and --out are required");
	ret = 2;
	s.kind = (synth_kind)so.kind;
	s.seed = so.seed;
	records = so.records;
	shards = so.shards;
	out = so.out;
	kind = s.kind == SYNTH_TOKENS ? "tokens" : s.kind == SYNTH_DENSE ? "dense" : "images";
	if (ensure_dir(out) < 0)
		return 1;

	s.ids = malloc(512 * sizeof(*s.ids));
	s.x = malloc(SYNTH_DENSE_DIM * sizeof(*s.x));
	s.image = malloc(64u << 10);
	s.teacher = malloc(SYNTH_DENSE_CLASSES * SYNTH_DENSE_DIM * sizeof(float));
	s.out_cap = (64u << 10) + 4096;
	s.out = malloc(s.out_cap + PF_TFR_OVERHEAD);
	count = calloc(shards, sizeof(*count));
	uint8_t *framed = malloc(s.out_cap + PF_TFR_OVERHEAD);
	if (!s.ids || !s.x || !s.image || !s.teacher || !s.out || !count || !framed) {
		cli_fail("out of memory");
		ret = 1;
		goto out;
	}
	{
		pf_rng tr = { pf_mix64(s.seed ^ 0x7eac4e5ull) };
		for (uint32_t i = 0; i < SYNTH_DENSE_CLASSES * SYNTH_DENSE_DIM; i++)
			s.teacher[i] = (float)rng_gauss(&tr);
	}
	/* Shard sizes vary: weights in [0.25, 1.75), counts by largest
	 * remainder so they add up to exactly --records. */
	{
		pf_rng wr = { pf_mix64(s.seed ^ 0x5a4dull) };
		double *w = malloc(shards * sizeof(*w)), sum = 0;
		uint64_t given = 0;

		if (!w) {
			cli_fail("out of memory");
			ret = 1;
			goto out;
		}
		for (uint64_t i = 0; i < shards; i++)
			sum += (w[i] = 0.25 + 1.5 * pf_rng_unit(&wr));
		for (uint64_t i = 0; i < shards; i++)
			given += (count[i] = (uint64_t)floor((double)records * w[i] / sum));
		for (uint64_t i = 0; given < records; i = (i + 1) % shards, given++)
			count[i]++;
		free(w);
	}

	uint64_t g = 0;
	for (uint64_t i = 0; i < shards; i++) {
		char path[4096], tmp[4200];
		bool ok = true;
		int fd;

		snprintf(path, sizeof(path), "%s/%s-%05llu-of-%05llu.tfrecord", out,
			 kind, (unsigned long long)i, (unsigned long long)shards);
		fd = open_out(path, tmp, sizeof(tmp));
		if (fd < 0) {
			ret = 1;
			goto out;
		}
		/* Batch writes through a 1 MiB buffer. */
		static uint8_t wbuf[1 << 20];
		size_t wlen = 0;
		for (uint64_t k = 0; k < count[i] && ok; k++, g++) {
			int64_t n = synth_record(&s, g);
			size_t fl;

			if (n < 0) {
				cli_fail("record %llu does not fit", (unsigned long long)g);
				ok = false;
				break;
			}
			fl = pf_tfr_encode(framed, s.out_cap + PF_TFR_OVERHEAD, s.out, (size_t)n);
			if (wlen + fl > sizeof(wbuf)) {
				if (write_all(fd, wbuf, wlen) < 0)
					ok = false;
				wlen = 0;
			}
			if (fl > sizeof(wbuf)) {
				if (write_all(fd, framed, fl) < 0)
					ok = false;
			} else {
				memcpy(wbuf + wlen, framed, fl);
				wlen += fl;
			}
		}
		if (ok && wlen && write_all(fd, wbuf, wlen) < 0)
			ok = false;
		if (!ok)
			cli_fail("%s: write failed: %s", tmp, strerror(errno));
		if (close_out(fd, tmp, path, ok) < 0) {
			ret = 1;
			goto out;
		}
	}
	printf("synth: %llu %s records in %llu shards under %s (seed %llu)\n",
	       (unsigned long long)records, kind, (unsigned long long)shards, out,
	       (unsigned long long)s.seed);
	ret = 0;
out:
	free(framed);
	free(count);
	free(s.ids);
	free(s.x);
	free(s.image);
	free(s.teacher);
	free(s.out);
	return ret;
}

/* ------------------------------------------------------------------ */

/* Decodes records of unknown kind for schema inference and cat. */
typedef struct decoder {
	pf_arena arena;
	pf_message_kind kind;	/* decided from the first record */
	bool decided;
	bool raw;		/* some record did not decode: no schema */
} decoder;

static int decode_record(decoder *d, const pf_record *rec, pf_example *ex,
			 pf_error *err)
{
	size_t need = PF_ARENA_BYTES_FOR(rec->len);
	int ret;

	if (!d->decided) {
		d->kind = pf_message_sniff(rec->data, rec->len);
		d->decided = true;
	}
	if (d->kind == PF_MSG_RAW)
		return -ENODATA;
	if (d->arena.cap < need) {
		pf_arena_release(&d->arena);
		ret = pf_arena_init(&d->arena, need);
		if (ret < 0)
			return ret;
	}
	pf_arena_reset(&d->arena);
	if (d->kind == PF_MSG_SEQUENCE_EXAMPLE)
		ret = pf_sequence_example_decode(rec->data, rec->len, &d->arena, ex, err);
	else
		ret = pf_example_decode(rec->data, rec->len, &d->arena, ex, err);
	return ret;
}

static const char *kind_label(pf_message_kind k)
{
	switch (k) {
	case PF_MSG_EXAMPLE: return "tf.train.Example";
	case PF_MSG_SEQUENCE_EXAMPLE: return "tf.train.SequenceExample";
	case PF_MSG_RAW: break;
	}
	return "raw";
}

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

static int cmd_manifest(int argc, char **argv)
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

static int cmd_convert(int argc, char **argv)
{
	convert_opts co = { .frame_size = PF_SHARD_FRAME_DEFAULT, .level = 3 };
	bool force;
	pf_shard_writer_config wcfg;
	uint64_t shards, total, done = 0;
	const char *out;
	char **inputs = NULL;
	int n = 0, ret, first;
	out_shard o = { .fd = -1 };
	uint64_t cur = 0, cur_end = 0, written_shards = 0;

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
	if (ensure_dir(out) < 0 || count_records(inputs, n, &total) < 0)
		goto out;

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
		/* Shards left empty (more shards than records) still exist. */
		while (written_shards < shards) {
			cur = written_shards++;
			snprintf(o.path, sizeof(o.path),
				 "%s/part-%05llu-of-%05llu.tfrecord.zst", out,
				 (unsigned long long)cur, (unsigned long long)shards);
			o.fd = open_out(o.path, o.tmp, sizeof(o.tmp));
			if (o.fd < 0 || pf_shard_writer_create(&o.w, &wcfg, sink_fd, &o.fd) < 0)
				goto fail;
			o.dec.raw = true;
			if (finish_shard(&o, true, &err) < 0)
				goto out;
		}
	}
	if (write_convert_manifest(out, shards) < 0)
		goto fail;
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
	cli_free_inputs(inputs, n);
	return ret;
}

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

static int inspect_one(const char *path, bool json)
{
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

static int cmd_inspect(int argc, char **argv)
{
	inspect_opts io = { 0 };
	bool json;
	char **inputs;
	int n, bad = 0, ret, first;

	ret = cli_parse(&inspect_command, argc, argv, &io, &first);
	if (ret >= 0)
		return ret;
	json = io.json;
	if (first == argc)
		return cli_usage("no files given");
	n = cli_expand_inputs(argv + first, argc - first, &inputs);
	if (n < 0)
		return 1;
	for (int i = 0; i < n; i++)
		if (inspect_one(inputs[i], json) < 0)
			bad++;
	cli_free_inputs(inputs, n);
	return bad ? 1 : 0;
}

/* ------------------------------------------------------------------ */

/* Read every record through src; @return records or <0 (err set). */
static int64_t drain(pf_source *src, pf_error *err)
{
	pf_record rec;
	int64_t n = 0;
	int ret;

	while ((ret = pf_source_next(src, &rec, err)) == 1)
		n++;
	return ret < 0 ? ret : n;
}

static int verify_one(const char *path)
{
	pf_source *src = NULL;
	pf_error err;
	int64_t n;
	int ret;

	pf_error_clear(&err);
	ret = pf_source_open(&src, path, NULL, &err);
	if (ret < 0)
		goto bad;
	n = drain(src, &err);
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
		m = drain(stream, &err);
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
		printf("%s: OK (indexed, %u frames, %lld records)\n", path,
		       pf_shard_index_frames(ix), (long long)n);
	} else {
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

static int cmd_verify(int argc, char **argv)
{
	char **inputs;
	int n, bad = 0, ret, first;

	ret = cli_parse(&verify_command, argc, argv, NULL, &first);
	if (ret >= 0)
		return ret;
	if (first == argc)
		return cli_usage("no files given");
	n = cli_expand_inputs(argv + first, argc - first, &inputs);
	if (n < 0)
		return 1;
	for (int i = 0; i < n; i++)
		if (verify_one(inputs[i]) < 0)
			bad++;
	cli_free_inputs(inputs, n);
	if (bad)
		fprintf(stderr, "%s: %d of %d files failed verification\n", cli_prog, bad, n);
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

static int cmd_cat(int argc, char **argv)
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

int main(int argc, char **argv)
{
	static const cli_subcommand cmds[] = {
		{ "synth", "make a deterministic synthetic TFRecord dataset", cmd_synth },
		{ "convert", "rewrite any readable records as indexed zstd shards", cmd_convert },
		{ "manifest", "write the dataset manifest that plans a dataset in one read",
		  cmd_manifest },
		{ "podsim", "plan an epoch as each host of a pod, report and check it",
		  podsim_main },
		{ "inspect", "format, compression, frames, records, sizes, schema", cmd_inspect },
		{ "verify", "check every CRC and the index; exit 1 on the first problem",
		  cmd_verify },
		{ "cat", "print records as JSON lines", cmd_cat },
		{ 0 },
	};
	const cli_subcommand *cmd;

	cli_prog = "shardtool";
	if (argc < 2)
		return cli_usage("a command is required");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "--help-all") || !strcmp(argv[1], "help")) {
		fputs("usage: shardtool COMMAND [options] ...\n\n", stdout);
		cli_help_subcommands(cmds, stdout);
		fputs("\n`shardtool COMMAND --help` for each command's options.\n", stdout);
		return 0;
	}
	cmd = cli_find_subcommand(cmds, argv[1]);
	if (!cmd)
		return cli_usage("unknown command '%s'", argv[1]);
	return cmd->main(argc - 1, argv + 1);
}
