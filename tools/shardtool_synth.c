/* SPDX-License-Identifier: Apache-2.0 */
/* `shardtool synth`: a deterministic synthetic TFRecord dataset of
 * tf.train.Example (token, dense or image records with a hidden teacher's
 * labels; text records of log-normal lengths for packing). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common_internal.h"
#include "pf_transform.h"
#include "shardtool.h"

#define SYNTH_VOCAB 32000u
#define SYNTH_TOKEN_CLASSES 8u
#define SYNTH_DENSE_DIM 256u
#define SYNTH_DENSE_CLASSES 10u
/* text: log-normal lengths, ln(length) ~ N(ln(median), SYNTH_TEXT_SIGMA),
 * clamped to 1..max; the end-of-text id closes each record. */
#define SYNTH_TEXT_SIGMA 1.0
#define SYNTH_TEXT_EOS 1
#define SYNTH_TEXT_MAX_CAP 65536u

/* ------------------------------------------------------------------ */
/* Deterministic randomness: splitmix64, one stream per record.         */

static double rng_gauss(pf_rng *r)
{
	double u = pf_rng_unit(r), v = pf_rng_unit(r);

	return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

/* ------------------------------------------------------------------ */

typedef enum synth_kind {
	SYNTH_TOKENS, SYNTH_DENSE, SYNTH_IMAGES, SYNTH_BLOBS, SYNTH_TEXT
} synth_kind;
static const char *const kind_names[] = { "tokens", "dense", "images", "blobs", "text" };

typedef struct synth {
	synth_kind kind;
	uint64_t seed;
	float *teacher;		/* dense: [classes][dim] */
	int64_t *ids;
	float *x;
	uint8_t *image;
	uint8_t *out;
	size_t out_cap;
	uint32_t min_side, max_side;	/* images: the shorter side's range */
	uint32_t median_tokens, max_tokens;	/* text: the lengths */
	int64_t *targets;		/* text: the next token of each */
	uint8_t *pixels, *jpeg;		/* images: the scene, its JPEG */
	size_t jpeg_cap;
} synth;

/* ------------------------------------------------------------------ */
/* Images: scenes with edges and texture, encoded by libjpeg-turbo.     */

/* A w x h scene of comps (1, 3, 4) channels in s->pixels: a gradient,
 * rectangles and discs of flat color with hard edges, stripes, and
 * pixel noise, so that the JPEG has what a photo's has (smooth areas,
 * edges, high-frequency texture). */
static void scene(synth *s, pf_rng *r, uint32_t w, uint32_t h, uint32_t comps)
{
	double g0[3], gx[3], gy[3];
	uint32_t nshapes = 3 + (uint32_t)pf_rng_below(r, 6);
	double fx = 0.02 + 0.3 * pf_rng_unit(r), fy = 0.02 + 0.3 * pf_rng_unit(r);
	uint8_t *rgb = s->pixels;

	for (int c = 0; c < 3; c++) {
		g0[c] = 255 * pf_rng_unit(r);
		gx[c] = (pf_rng_unit(r) - 0.5) * 2.0 * 200 / w;
		gy[c] = (pf_rng_unit(r) - 0.5) * 2.0 * 200 / h;
	}
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			for (int c = 0; c < 3; c++) {
				double v = g0[c] + gx[c] * x + gy[c] * y +
					   18 * sin(x * fx + c) * cos(y * fy);

				rgb[((size_t)y * w + x) * 3 + c] =
					(uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
			}
	for (uint32_t k = 0; k < nshapes; k++) {
		uint32_t x0 = (uint32_t)pf_rng_below(r, w), y0 = (uint32_t)pf_rng_below(r, h);
		uint32_t rw = 8 + (uint32_t)pf_rng_below(r, w / 2), rh = 8 + (uint32_t)pf_rng_below(r, h / 2);
		bool disc = pf_rng_next(r) & 1;
		uint8_t col[3] = { (uint8_t)pf_rng_next(r), (uint8_t)pf_rng_next(r),
				   (uint8_t)pf_rng_next(r) };

		for (uint32_t y = y0; y < y0 + rh && y < h; y++)
			for (uint32_t x = x0; x < x0 + rw && x < w; x++) {
				double dx = ((double)x - x0) / rw - 0.5, dy = ((double)y - y0) / rh - 0.5;

				if (!disc || dx * dx + dy * dy < 0.25)
					memcpy(rgb + ((size_t)y * w + x) * 3, col, 3);
			}
	}
	/* Texture: noise of +-12 levels. */
	for (size_t i = 0; i < (size_t)w * h * 3; i += 8) {
		uint64_t bits = pf_rng_next(r);

		for (size_t k = 0; k < 8 && i + k < (size_t)w * h * 3; k++) {
			int v = rgb[i + k] + (int)((bits >> (8 * k)) & 0xff) % 25 - 12;

			rgb[i + k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
		}
	}
	if (comps == 1)
		pf_image_rgb_to_luma(rgb, rgb, w * h);
	else if (comps == 4)
		for (size_t i = (size_t)w * h; i-- > 0;) {
			uint8_t c = (uint8_t)(255 - rgb[i * 3]), m = (uint8_t)(255 - rgb[i * 3 + 1]);
			uint8_t yl = (uint8_t)(255 - rgb[i * 3 + 2]);
			uint8_t kk = c < m ? (c < yl ? c : yl) : (m < yl ? m : yl);

			rgb[i * 4] = (uint8_t)(c - kk);
			rgb[i * 4 + 1] = (uint8_t)(m - kk);
			rgb[i * 4 + 2] = (uint8_t)(yl - kk);
			rgb[i * 4 + 3] = kk;
		}
}

/* A Zipf-like token id: P(id) ~ 1/(id+1), a log-uniform rank (s = 1). */
static int64_t zipf_id(pf_rng *r)
{
	const double logv = log((double)SYNTH_VOCAB + 1.0);
	int64_t id = (int64_t)floor(exp(pf_rng_unit(r) * logv)) - 1;

	return id >= (int64_t)SYNTH_VOCAB ? SYNTH_VOCAB - 1 : id;
}

/* A text record's length: log-normal of median m (sigma
 * SYNTH_TEXT_SIGMA), rounded, clamped to 1..max. */
static uint32_t text_length(pf_rng *r, uint32_t median, uint32_t max)
{
	double v = exp(log((double)median) + SYNTH_TEXT_SIGMA * rng_gauss(r));

	if (!(v < (double)max))	/* NaN too */
		return max;
	return v < 1.0 ? 1 : (uint32_t)llround(v);
}

/* A token's vote for a class in the hidden teacher, in [-1, 1). */
static double token_vote(uint64_t seed, uint32_t cls, int64_t id)
{
	uint64_t h = pf_mix64(seed ^ pf_mix64((uint64_t)id * SYNTH_TOKEN_CLASSES + cls));

	return (double)(h >> 11) * 0x1.0p-52 - 1.0;
}

/* An ImageNet-layout record (the TensorFlow models' build_imagenet_data
 * features): a JPEG of quality 90 whose shorter side is in [min_side,
 * max_side] and longer side up to 1.5 times it, 8% grayscale, 12%
 * progressive, 2% CMYK; the label 1..1000. */
static int64_t synth_image(synth *s, pf_rng *r)
{
	uint32_t side = s->min_side + (uint32_t)pf_rng_below(r, s->max_side - s->min_side + 1);
	uint32_t other = side + (uint32_t)pf_rng_below(r, side / 2 + 1);
	bool wide = pf_rng_next(r) & 1;
	uint32_t w = wide ? other : side, h = wide ? side : other;
	uint32_t pick = (uint32_t)pf_rng_below(r, 100);
	uint32_t comps = pick < 8 ? 1 : pick < 10 ? 4 : 3;
	bool progressive = pf_rng_below(r, 100) < 12;
	int64_t label = 1 + (int64_t)pf_rng_below(r, 1000), height = h, width = w, channels = 3;
	pf_bytes img, fmt = { (const uint8_t *)"JPEG", 4 }, space;
	pf_feature f[7];
	pf_error err;
	int64_t n;

	scene(s, r, w, h, comps);
	n = pf_image_encode_jpeg(s->pixels, w, h, comps, 90, progressive, s->jpeg, s->jpeg_cap,
				 &err);
	if (n < 0)
		return n;
	img.data = s->jpeg;
	img.len = (uint32_t)n;
	space.data = (const uint8_t *)(comps == 1 ? "Grayscale" : comps == 4 ? "CMYK" : "RGB");
	space.len = (uint32_t)strlen((const char *)space.data);
	memset(f, 0, sizeof(f));
	f[0] = (pf_feature){ .name = "image/encoded", .name_len = 13, .kind = PF_KIND_BYTES,
			     .count = 1, .v.bytes = &img };
	f[1] = (pf_feature){ .name = "image/format", .name_len = 12, .kind = PF_KIND_BYTES,
			     .count = 1, .v.bytes = &fmt };
	f[2] = (pf_feature){ .name = "image/colorspace", .name_len = 16, .kind = PF_KIND_BYTES,
			     .count = 1, .v.bytes = &space };
	f[3] = (pf_feature){ .name = "image/height", .name_len = 12, .kind = PF_KIND_INT64,
			     .count = 1, .v.int64s = &height };
	f[4] = (pf_feature){ .name = "image/width", .name_len = 11, .kind = PF_KIND_INT64,
			     .count = 1, .v.int64s = &width };
	f[5] = (pf_feature){ .name = "image/channels", .name_len = 14, .kind = PF_KIND_INT64,
			     .count = 1, .v.int64s = &channels };
	f[6] = (pf_feature){ .name = "image/class/label", .name_len = 17, .kind = PF_KIND_INT64,
			     .count = 1, .v.int64s = &label };
	return pf_example_encode(f, 7, s->out, s->out_cap);
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

		for (uint32_t i = 0; i < n; i++) {
			int64_t id = zipf_id(&r);

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
	case SYNTH_IMAGES:
		return synth_image(s, &r);
	case SYNTH_TEXT: {
		/* tokens: Zipf-like ids 2.. ending in the end-of-text id;
		 * targets: each token's next (the last: end-of-text again). */
		uint32_t n = text_length(&r, s->median_tokens, s->max_tokens);

		for (uint32_t i = 0; i + 1 < n; i++) {
			int64_t id = zipf_id(&r);

			s->ids[i] = id < 2 ? id + 2 : id;
		}
		s->ids[n - 1] = SYNTH_TEXT_EOS;
		memcpy(s->targets, s->ids + 1, (n - 1) * sizeof(*s->ids));
		s->targets[n - 1] = SYNTH_TEXT_EOS;
		f[0] = (pf_feature){ .name = "tokens", .name_len = 6, .kind = PF_KIND_INT64,
				     .count = n, .v.int64s = s->ids };
		f[1] = (pf_feature){ .name = "targets", .name_len = 7, .kind = PF_KIND_INT64,
				     .count = n, .v.int64s = s->targets };
		break;
	}
	case SYNTH_BLOBS: {
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

typedef struct synth_opts {
	int kind;		/* synth_kind */
	uint64_t records, shards, seed;
	uint64_t min_side, max_side;
	uint64_t median_tokens, max_tokens;
	const char *out;
	bool kind_given;
} synth_opts;

static const cli_opt synth_cli[] = {
	{ CLI_CHOICE, "kind", .arg = "tokens|dense|images|blobs|text",
	  .choices = "tokens|dense|images|blobs|text",
	  .off = offsetof(synth_opts, kind), .seen = CLI_SEEN(synth_opts, kind_given),
	  .help = "tokens: 'tokens', Zipf-like int64 ids (vocab 32000), 128-512 per "
		  "record, and 'label', an int64 class from a hidden teacher (8 "
		  "classes); dense: 'x', 256 Gaussian floats, and 'label', the argmax "
		  "of a hidden linear teacher (10 classes); images: ImageNet's "
		  "TFRecord layout, 'image/encoded' a JPEG (quality 90, shorter side "
		  "in --min-side..--max-side; 8% gray, 12% progressive, 2% CMYK), "
		  "'image/class/label' 1..1000, 'image/height', 'image/width', "
		  "'image/format', 'image/colorspace', 'image/channels'; blobs: "
		  "'image', incompressible 16-64 KiB bytes, and 'label', int64 0..999; "
		  "text: 'tokens', Zipf-like int64 ids (vocab 32000) of log-normal "
		  "length (median --median-tokens, sigma 1, clamped to 1..--max-tokens) "
		  "ending in the end-of-text id 1, and 'targets', each token's next" },
	{ CLI_U64, "min-side", .arg = "PX", .off = offsetof(synth_opts, min_side), .min = 16,
	  .max = 8192, .help = "images: the shorter side's least (default 200)" },
	{ CLI_U64, "max-side", .arg = "PX", .off = offsetof(synth_opts, max_side), .min = 16,
	  .max = 8192, .help = "images: the shorter side's most (default 600)" },
	{ CLI_U64, "median-tokens", .arg = "N", .off = offsetof(synth_opts, median_tokens),
	  .min = 1, .max = SYNTH_TEXT_MAX_CAP, .help = "text: the records' median length "
	  "(default 300)" },
	{ CLI_U64, "max-tokens", .arg = "N", .off = offsetof(synth_opts, max_tokens), .min = 1,
	  .max = SYNTH_TEXT_MAX_CAP, .help = "text: the longest record; longer ones are cut "
	  "to it (default 16384)" },
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
	.usage = "usage: shardtool synth --kind tokens|dense|images|blobs|text --records N\n"
		 "                       --shards S --out DIR [--seed SEED] [--min-side PX\n"
		 "                       --max-side PX] [--median-tokens N --max-tokens N]\n",
	.about = "Writes S plain TFRecord shards of tf.train.Example to DIR; record i is\n"
		 "the same whatever S is.\n",
	.opts = synth_cli,
};

int cmd_synth(int argc, char **argv)
{
	synth_opts so = { .seed = 1, .min_side = 200, .max_side = 600, .median_tokens = 300,
			  .max_tokens = 16384 };
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
	kind = kind_names[s.kind];
	if (so.min_side > so.max_side)
		return cli_usage("--min-side %llu is more than --max-side %llu",
				 (unsigned long long)so.min_side, (unsigned long long)so.max_side);
	s.min_side = (uint32_t)so.min_side;
	s.max_side = (uint32_t)so.max_side;
	if (so.median_tokens > so.max_tokens)
		return cli_usage("--median-tokens %llu is more than --max-tokens %llu",
				 (unsigned long long)so.median_tokens,
				 (unsigned long long)so.max_tokens);
	s.median_tokens = (uint32_t)so.median_tokens;
	s.max_tokens = (uint32_t)so.max_tokens;
	if (ensure_dir(out) < 0)
		return 1;

	s.ids = malloc((s.kind == SYNTH_TEXT ? s.max_tokens : 512) * sizeof(*s.ids));
	s.targets = malloc((s.kind == SYNTH_TEXT ? s.max_tokens : 1) * sizeof(*s.targets));
	s.x = malloc(SYNTH_DENSE_DIM * sizeof(*s.x));
	s.image = malloc(64u << 10);
	s.teacher = malloc(SYNTH_DENSE_CLASSES * SYNTH_DENSE_DIM * sizeof(float));
	s.out_cap = (64u << 10) + 4096;
	if (s.kind == SYNTH_TEXT)	/* two lists of ids of at most 3 varint bytes */
		s.out_cap = (size_t)s.max_tokens * 2 * 3 + 4096;
	if (s.kind == SYNTH_IMAGES) {
		size_t px = (size_t)s.max_side * (s.max_side + s.max_side / 2 + 1);

		s.pixels = malloc(px * 4);
		s.jpeg_cap = px * 4 + 65536;
		s.jpeg = malloc(s.jpeg_cap);
		s.out_cap = s.jpeg_cap + 4096;
		if (!s.pixels || !s.jpeg) {
			cli_fail("out of memory");
			free(s.pixels);
			free(s.jpeg);
			return 1;
		}
	}
	s.out = malloc(s.out_cap + PF_TFR_OVERHEAD);
	count = calloc(shards, sizeof(*count));
	uint8_t *framed = malloc(s.out_cap + PF_TFR_OVERHEAD);
	if (!s.ids || !s.targets || !s.x || !s.image || !s.teacher || !s.out || !count ||
	    !framed) {
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
	free(s.targets);
	free(s.x);
	free(s.image);
	free(s.pixels);
	free(s.jpeg);
	free(s.teacher);
	free(s.out);
	return ret;
}
