/* SPDX-License-Identifier: Apache-2.0 */
/* shardtool: make, convert, inspect, verify and print record shards. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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

static const char usage_main[] =
	"usage: shardtool COMMAND [options] ...\n"
	"\n"
	"commands:\n"
	"  synth    make a deterministic synthetic TFRecord dataset\n"
	"  convert  rewrite any readable records as indexed zstd shards\n"
	"  manifest write the dataset manifest that plans a dataset in one read\n"
	"  podsim   plan an epoch as each host of a pod, report and check it\n"
	"  inspect  format, compression, frames, records, sizes, schema\n"
	"  verify   check every CRC and the index; exit 1 on the first problem\n"
	"  cat      print records as JSON lines\n"
	"\n"
	"`shardtool COMMAND --help` for each command's options.\n";

static const char usage_synth[] =
	"usage: shardtool synth --kind tokens|dense|images --records N --shards S\n"
	"                       --out DIR [--seed SEED]\n"
	"\n"
	"Writes S plain TFRecord shards of tf.train.Example (sizes vary) to DIR:\n"
	"  tokens  'tokens': Zipf-like int64 ids (vocab 32000), 128-512 per record;\n"
	"          'label': int64 class from a hidden teacher (8 classes)\n"
	"  dense   'x': 256 Gaussian floats; 'label': argmax of a hidden linear\n"
	"          teacher (10 classes)\n"
	"  images  'image': incompressible 16-64 KiB bytes; 'label': int64 0..999\n"
	"The same seed gives the same bytes; record i is the same whatever S is.\n";

static const char usage_convert[] =
	"usage: shardtool convert --out DIR [--shards M] [--frame-size BYTES]\n"
	"                         [--level L] [--align 4096] INPUT...\n"
	"\n"
	"Reads every record of the inputs (plain, GZIP, ZLIB, zstd or indexed;\n"
	"files, directories or globs, in the order given) and writes M indexed\n"
	"shards part-NNNNN-of-MMMMM.tfrecord.zst to DIR, records and their order\n"
	"unchanged, split by record count.  M defaults to the number of inputs.\n"
	"  --frame-size  target uncompressed bytes per zstd frame (default 1M)\n"
	"  --level       zstd level 1..19 (default 3)\n"
	"  --align       align frames to this power of two >= 4096 (O_DIRECT)\n"
	"  --force       DIR may hold an earlier convert's output: every file\n"
	"                named part-NNNNN-of-NNNNN.tfrecord.zst (any count) and\n"
	"                its .tmp.PID leftovers are removed first, then the new\n"
	"                shards are written\n"
	"DIR must be empty (hidden files aside) unless --force; any other file\n"
	"in it, and an input inside it, is refused even with --force (a later\n"
	"run reading DIR would read it beside the shards; inputs are never\n"
	"removed).\n"
	"DIR/" PF_MANIFEST_NAME " is written too (see `shardtool manifest`).\n";

static const char usage_manifest[] =
	"usage: shardtool manifest [--out FILE] PATH...\n"
	"\n"
	"Writes the dataset manifest of the shards PATH names (files, directories\n"
	"or globs): every shard's path, size, mtime, format, record count and\n"
	"frames, and the feature schema, so that every host plans the dataset\n"
	"from one read instead of opening every shard.  Stream files (plain,\n"
	"GZIP, zstd without an index) are read once here to count them.  FILE\n"
	"defaults to DIR/" PF_MANIFEST_NAME " when PATH is one directory; every\n"
	"shard must be under FILE's directory.  A loader given the directory (or\n"
	"the manifest) then uses it; a shard changed since is an error when it\n"
	"is read: run this again after changing shards.\n";

static const char usage_inspect[] =
	"usage: shardtool inspect [--json] FILE...\n"
	"\n"
	"Prints each file's format, compression, frames, records, sizes,\n"
	"compression ratio and the inferred feature schema.  With --json, one\n"
	"JSON object per file per line.\n";

static const char usage_verify[] =
	"usage: shardtool verify FILE...\n"
	"\n"
	"Checks every record CRC, and for indexed shards the index, every frame\n"
	"CRC, the record counts and the zstd stream as a whole.  Exit 0 only\n"
	"when everything is clean; else prints the first problem of each bad\n"
	"file (file, byte offset, what) and exits 1.\n";

static const char usage_cat[] =
	"usage: shardtool cat [--range A:B] FILE\n"
	"\n"
	"Prints records A (inclusive) to B (exclusive) as JSON lines with their\n"
	"feature values; A: and :B are open ranges.\n";

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

static int cmd_synth(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "kind", required_argument, NULL, 'k' },
		{ "records", required_argument, NULL, 'n' },
		{ "shards", required_argument, NULL, 's' },
		{ "out", required_argument, NULL, 'o' },
		{ "seed", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	synth s = { .kind = SYNTH_TOKENS, .seed = 1 };
	uint64_t records = 0, shards = 0, *count = NULL;
	const char *out = NULL, *kind = NULL;
	int c, ret = 2;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'k': kind = optarg; break;
		case 'n':
			if (cli_parse_u64("--records", optarg, 0, 1ull << 40, true, &records))
				return 2;
			break;
		case 's':
			if (cli_parse_u64("--shards", optarg, 1, 1000000, false, &shards))
				return 2;
			break;
		case 'o': out = optarg; break;
		case 'S':
			if (cli_parse_u64("--seed", optarg, 0, UINT64_MAX, false, &s.seed))
				return 2;
			break;
		case 'h': fputs(usage_synth, stdout); return 0;
		default: fputs(usage_synth, stderr); return 2;
		}
	}
	if (optind != argc) {
		cli_fail("synth: unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (!kind || !out || !shards) {
		cli_fail("synth: --kind, --records, --shards and --out are required");
		fputs(usage_synth, stderr);
		return 2;
	}
	if (!strcmp(kind, "tokens"))
		s.kind = SYNTH_TOKENS;
	else if (!strcmp(kind, "dense"))
		s.kind = SYNTH_DENSE;
	else if (!strcmp(kind, "images"))
		s.kind = SYNTH_IMAGES;
	else {
		cli_fail("synth: --kind: '%s' is not tokens, dense or images", kind);
		return 2;
	}
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
				cli_fail("synth: record %llu does not fit", (unsigned long long)g);
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
						cli_fail("convert: input %s is inside --out %s: a run "
							 "reading %s would read it and its copy; "
							 "write to another directory", inputs[i], out, out);
						ret = 2;
					}
				}
			} else if (pass == 1 && !force) {
				cli_fail("convert: --out %s is not empty (it holds %s): a run "
					 "reading it would read old files beside the new shards; "
					 "use an empty directory, or --force to replace an "
					 "earlier convert's output", out, e->d_name);
				ret = 2;
			} else if (pass == 1 && !is_convert_output(e->d_name)) {
				cli_fail("convert: --out %s holds %s, which convert did not "
					 "write (--force replaces only part-NNNNN-of-NNNNN.tfrecord.zst "
					 "and " PF_MANIFEST_NAME "); "
					 "move it away or use an empty directory", out, e->d_name);
				ret = 2;
			} else if (pass == 2 && unlink(path) < 0) {
				cli_fail("convert: --force: cannot remove %s: %s", path,
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
		cli_fail("convert: out of memory writing the manifest");
	for (uint64_t i = 0; paths && i < shards; i++)
		free(paths[i]);
	free(paths);
	return ret;
}

static int cmd_manifest(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *out = NULL;
	char buf[4096];
	pf_manifest_info info;
	pf_error err;
	struct stat st;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'h': fputs(usage_manifest, stdout); return 0;
		default: fputs(usage_manifest, stderr); return 2;
		}
	}
	if (optind == argc) {
		cli_fail("manifest: name the shards (files, directories or globs)");
		fputs(usage_manifest, stderr);
		return 2;
	}
	if (!out) {
		if (argc - optind != 1 || stat(argv[optind], &st) < 0 || !S_ISDIR(st.st_mode)) {
			cli_fail("manifest: --out FILE is needed unless PATH is one directory");
			return 2;
		}
		if ((size_t)snprintf(buf, sizeof(buf), "%s/%s", argv[optind], PF_MANIFEST_NAME) >=
		    sizeof(buf)) {
			cli_fail("manifest: %s: path too long", argv[optind]);
			return 2;
		}
		out = buf;
	}
	pf_error_clear(&err);
	if (pf_manifest_write((const char *const *)argv + optind, (size_t)(argc - optind), out,
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

static int cmd_convert(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "shards", required_argument, NULL, 's' },
		{ "frame-size", required_argument, NULL, 'f' },
		{ "level", required_argument, NULL, 'l' },
		{ "align", required_argument, NULL, 'a' },
		{ "force", no_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool force = false;
	pf_shard_writer_config wcfg = { .frame_size = PF_SHARD_FRAME_DEFAULT, .level = 3 };
	uint64_t shards = 0, v, total, done = 0;
	const char *out = NULL;
	char **inputs = NULL;
	int n = 0, c, ret = 1;
	out_shard o = { .fd = -1 };
	uint64_t cur = 0, cur_end = 0, written_shards = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 's':
			if (cli_parse_u64("--shards", optarg, 1, 1000000, false, &shards))
				return 2;
			break;
		case 'f':
			if (cli_parse_u64("--frame-size", optarg, 1, 1ull << 30, true, &v))
				return 2;
			wcfg.frame_size = v;
			break;
		case 'l':
			if (cli_parse_u64("--level", optarg, 1, 19, false, &v))
				return 2;
			wcfg.level = (int)v;
			break;
		case 'a':
			if (cli_parse_u64("--align", optarg, 4096, 1u << 30, true, &v))
				return 2;
			if (v & (v - 1)) {
				cli_fail("--align: %llu is not a power of two",
					 (unsigned long long)v);
				return 2;
			}
			wcfg.align = (uint32_t)v;
			break;
		case 'F': force = true; break;
		case 'h': fputs(usage_convert, stdout); return 0;
		default: fputs(usage_convert, stderr); return 2;
		}
	}
	if (!out || optind == argc) {
		cli_fail("convert: --out and at least one input are required");
		fputs(usage_convert, stderr);
		return 2;
	}
	n = cli_expand_inputs(argv + optind, argc - optind, &inputs);
	if (n < 0)
		return 1;
	if (n == 0) {
		cli_fail("convert: the inputs name no files");
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
					cli_fail("convert: cannot start %s", o.path);
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
		cli_fail("convert: inputs changed while converting (%llu records, counted %llu)",
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

static void print_schema_json(FILE *f, const pf_feature_schema *fs, size_t n,
			      uint64_t records)
{
	fputs("[", f);
	for (size_t i = 0; i < n; i++) {
		const pf_feature_schema *s = &fs[i];
		bool fixed = s->records_present == records && s->records_unset == 0 &&
			     s->min_len == s->max_len && !s->mixed;

		fprintf(f, "%s{\"name\":", i ? "," : "");
		cli_json_string(f, s->name, strlen(s->name));
		fprintf(f, ",\"kind\":\"%s\",\"list\":%s,\"mixed\":%s,\"fixed\":%s,"
			"\"min_len\":%llu,\"max_len\":%llu,\"records_present\":%llu,"
			"\"records_unset\":%llu,\"total_values\":%llu}",
			pf_kind_name(s->kind), s->is_list ? "true" : "false",
			s->mixed ? "true" : "false", fixed ? "true" : "false",
			(unsigned long long)s->min_len, (unsigned long long)s->max_len,
			(unsigned long long)s->records_present,
			(unsigned long long)s->records_unset,
			(unsigned long long)s->total_values);
	}
	fputs("]", f);
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
			fputs("{\"file\":", stdout);
			cli_json_string(stdout, path, strlen(path));
			printf(",\"format\":\"%s\",\"compression\":\"%s\",\"records\":%llu,"
			       "\"frames\":%llu,\"file_bytes\":%llu,\"uncompressed_bytes\":%llu,"
			       "\"ratio\":", format, comp, (unsigned long long)records,
			       (unsigned long long)frames, (unsigned long long)fsize,
			       (unsigned long long)ubytes);
			cli_json_double(stdout, ratio);
			printf(",\"message\":\"%s\"", msg);
			if (ix)
				printf(",\"alignment\":%u", pf_shard_index_alignment(ix));
			fputs(",\"schema\":", stdout);
			print_schema_json(stdout, fs, fs ? nfs : 0, records);
			fputs("}\n", stdout);
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

static int cmd_inspect(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool json = false;
	char **inputs;
	int n, c, bad = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'h': fputs(usage_inspect, stdout); return 0;
		default: fputs(usage_inspect, stderr); return 2;
		}
	}
	if (optind == argc) {
		cli_fail("inspect: no files given");
		fputs(usage_inspect, stderr);
		return 2;
	}
	n = cli_expand_inputs(argv + optind, argc - optind, &inputs);
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

static int cmd_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char **inputs;
	int n, c, bad = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(usage_verify, stdout); return 0;
		default: fputs(usage_verify, stderr); return 2;
		}
	}
	if (optind == argc) {
		cli_fail("verify: no files given");
		fputs(usage_verify, stderr);
		return 2;
	}
	n = cli_expand_inputs(argv + optind, argc - optind, &inputs);
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

static void print_values_json(FILE *f, const pf_feature *ft)
{
	fputc('[', f);
	for (uint32_t i = 0; i < ft->count; i++) {
		if (i)
			fputc(',', f);
		switch (ft->kind) {
		case PF_KIND_BYTES:
			cli_json_string(f, ft->v.bytes[i].data, ft->v.bytes[i].len);
			break;
		case PF_KIND_FLOAT:
			cli_json_double(f, ft->v.floats[i]);
			break;
		case PF_KIND_INT64:
			fprintf(f, "%lld", (long long)ft->v.int64s[i]);
			break;
		case PF_KIND_NONE:
			break;
		}
	}
	fputc(']', f);
}

static void print_features_json(FILE *f, const pf_feature *fs, uint32_t n)
{
	fputc('{', f);
	for (uint32_t i = 0; i < n; i++) {
		fprintf(f, "%s", i ? "," : "");
		cli_json_string(f, fs[i].name, fs[i].name_len);
		fprintf(f, ":{\"kind\":\"%s\",\"values\":", pf_kind_name(fs[i].kind));
		print_values_json(f, &fs[i]);
		fputc('}', f);
	}
	fputc('}', f);
}

static int cmd_cat(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "range", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t from = 0, to = UINT64_MAX;
	pf_source *src;
	decoder dec = { 0 };
	pf_record rec;
	pf_error err;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (cli_parse_range("--range", optarg, &from, &to) < 0)
				return 2;
			break;
		case 'h': fputs(usage_cat, stdout); return 0;
		default: fputs(usage_cat, stderr); return 2;
		}
	}
	if (argc - optind != 1) {
		cli_fail("cat: exactly one FILE is required");
		fputs(usage_cat, stderr);
		return 2;
	}
	pf_error_clear(&err);
	if (pf_source_open(&src, argv[optind], NULL, &err) < 0) {
		cli_print_error(&err);
		return 1;
	}
	/* Indexed shards jump to the first frame wanted. */
	if (from && pf_source_index(src)) {
		uint64_t total = pf_shard_index_records(pf_source_index(src));
		pf_source_seek_record(src, from < total ? from : total);
	}
	while ((ret = pf_source_next(src, &rec, &err)) == 1) {
		pf_example ex;
		pf_error derr;

		if (rec.index < from)
			continue;
		if (rec.index >= to)
			break;
		printf("{\"record\":%llu,\"offset\":%llu,\"bytes\":%llu",
		       (unsigned long long)rec.index, (unsigned long long)rec.offset,
		       (unsigned long long)rec.len);
		pf_error_clear(&derr);
		if (decode_record(&dec, &rec, &ex, &derr) == 0) {
			if (dec.kind == PF_MSG_SEQUENCE_EXAMPLE) {
				fputs(",\"context\":", stdout);
				print_features_json(stdout, ex.features, ex.n_features);
				fputs(",\"feature_lists\":{", stdout);
				for (uint32_t i = 0; i < ex.n_lists; i++) {
					const pf_feature_list *l = &ex.lists[i];
					fprintf(stdout, "%s", i ? "," : "");
					cli_json_string(stdout, l->name, l->name_len);
					fputs(":[", stdout);
					for (uint32_t k = 0; k < l->steps; k++) {
						fprintf(stdout, "%s{\"kind\":\"%s\",\"values\":",
							k ? "," : "", pf_kind_name(l->step[k].kind));
						print_values_json(stdout, &l->step[k]);
						fputc('}', stdout);
					}
					fputc(']', stdout);
				}
				fputc('}', stdout);
			} else {
				fputs(",\"features\":", stdout);
				print_features_json(stdout, ex.features, ex.n_features);
			}
		} else {
			/* Not an Example: show the payload itself. */
			fputs(",\"raw\":", stdout);
			cli_json_string(stdout, rec.data, rec.len);
			dec.decided = false;
		}
		fputs("}\n", stdout);
	}
	if (ret < 0)
		cli_print_error(&err);
	pf_arena_release(&dec.arena);
	pf_source_close(src);
	return ret < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "synth", cmd_synth },
		{ "convert", cmd_convert },
		{ "manifest", cmd_manifest },
		{ "podsim", podsim_main },
		{ "inspect", cmd_inspect },
		{ "verify", cmd_verify },
		{ "cat", cmd_cat },
	};

	cli_prog = "shardtool";
	if (argc < 2) {
		fputs(usage_main, stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		fputs(usage_main, stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	cli_fail("unknown command '%s'", argv[1]);
	fputs(usage_main, stderr);
	return 2;
}
