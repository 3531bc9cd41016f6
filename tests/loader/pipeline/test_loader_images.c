/* SPDX-License-Identifier: Apache-2.0 */
/* Image features through the loader: each row is transform/'s output for
 * (seed, epoch, the record's place), the same batches at every thread
 * count and after a resume, a damaged image a corrupt record under each
 * policy (naming file, record, byte and the decoder's message), the
 * spec's image grammar and its errors. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "pf_transform.h"
#include "testutil.h"

#define NREC 96u
#define OUT 32u
#define FEATURES "image/encoded:image[32,32]:train,image/class/label:int64[1]"

static uint8_t *jpegs[NREC];
static size_t jpeg_len[NREC];

static int sink(void *ctx, const void *buf, size_t len)
{
	return fwrite(buf, 1, len, ctx) == len ? 0 : -EIO;
}

/* Record i: a JPEG of a scene whose size and kind vary with i (some gray,
 * some progressive, some CMYK), and its label i.  bad: record `bad` gets
 * its JPEG cut in half. */
static void make_images(void)
{
	static bool made;

	if (made)
		return;
	for (uint32_t i = 0; i < NREC; i++) {
		uint32_t w = 60 + (i * 37) % 140, h = 50 + (i * 53) % 120;
		uint32_t comps = i % 7 == 3 ? 1 : i % 11 == 5 ? 4 : 3;
		uint8_t *px = malloc((size_t)w * h * comps);
		size_t cap = (size_t)w * h * comps * 2 + 4096;
		pf_error err;
		int64_t n;

		jpegs[i] = malloc(cap);
		cr_assert(px && jpegs[i]);
		for (uint32_t y = 0; y < h; y++)
			for (uint32_t x = 0; x < w; x++)
				for (uint32_t c = 0; c < comps; c++)
					px[((size_t)y * w + x) * comps + c] =
						(uint8_t)(x * (c + 2) + y * (i % 5 + 1) +
							  ((x / 8 + y / 8) % 2) * 70);
		n = pf_image_encode_jpeg(px, w, h, comps, 85, i % 4 == 1, jpegs[i], cap, &err);
		cr_assert_gt(n, 0, "%s", err.msg);
		jpeg_len[i] = (size_t)n;
		free(px);
	}
	made = true;
}

static void write_shard(const char *path, int64_t bad, bool not_bytes)
{
	pf_shard_writer_config cfg = { .frame_size = 16384 };
	pf_shard_writer *w;
	pf_error err;
	FILE *f = fopen(path, "wb");
	static uint8_t rec[1 << 20];

	make_images();
	cr_assert_not_null(f);
	cr_assert_eq(pf_shard_writer_create(&w, &cfg, sink, f), 0);
	for (uint32_t i = 0; i < NREC; i++) {
		pf_bytes img = { jpegs[i], (uint32_t)(i == bad ? jpeg_len[i] / 2 : jpeg_len[i]) };
		int64_t label = i;
		pf_feature feat[2] = {
			{ .name = "image/encoded", .name_len = 13, .kind = PF_KIND_BYTES, .count = 1,
			  .v.bytes = &img },
			{ .name = "image/class/label", .name_len = 17, .kind = PF_KIND_INT64,
			  .count = 1, .v.int64s = &label },
		};
		int64_t n;

		if (not_bytes && i == bad) {
			feat[0].kind = PF_KIND_INT64;
			feat[0].v.int64s = &label;
		}
		n = pf_example_encode(feat, 2, rec, sizeof(rec));
		cr_assert_gt(n, 0);
		cr_assert_eq(pf_shard_writer_add(w, rec, (size_t)n, &err), 0, "%s", err.msg);
	}
	cr_assert_eq(pf_shard_writer_close(w, &err), 0);
	pf_shard_writer_free(w);
	cr_assert_eq(fclose(f), 0);
}

static const char *dataset(int64_t bad, bool not_bytes)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/images.tfrecord.zst", tu_tmpdir());
	write_shard(path, bad, not_bytes);
	return path;
}

typedef struct run_out {
	uint32_t crc[64];
	uint32_t n;
	uint64_t images;
	bool as_read;		/* the window held the records as read */
	int ret;
	pf_error err;
} run_out;

/* Every row checked against transform/ called directly, place (file 0,
 * record = label). */
static void check_row(const uint8_t *img, int64_t label, uint32_t epoch, uint64_t seed)
{
	static uint8_t want[OUT * OUT * 3];
	pf_image_scratch scratch = { 0 };
	pf_image_spec spec;
	pf_error err;

	pf_image_spec_init(&spec, OUT, OUT, PF_AUGMENT_TRAIN);
	cr_assert_eq(pf_image_transform(&spec, jpegs[label], jpeg_len[label], seed, epoch,
					(uint64_t)label, want, &scratch, NULL, &err), 0, "%s",
		     err.msg);
	pf_image_scratch_free(&scratch);
	cr_assert(!memcmp(img, want, sizeof(want)), "record %lld epoch %u differs",
		  (long long)label, epoch);
}

/* The loader of these tests: the one file in paths, FEATURES, 4 rows a
 * core on 2 cores. */
static void image_config(pf_loader_config *cfg, const char **paths)
{
	cfg->paths = paths;
	cfg->npaths = 1;
	cfg->features = FEATURES;
	cfg->per_core_batch = 4;
	cfg->cores_per_host = 2;
}

static run_out run(const char *path, unsigned threads, const pf_state_blob *from,
		   uint64_t max_steps, pf_state_blob *save, bool check)
{
	pf_loader_config cfg = { 0 };
	const char *paths[1] = { path };
	pf_loader_metrics m;
	pf_loader *l;
	pf_batch *b;
	run_out o = { 0 };
	int ret;

	image_config(&cfg, paths);
	cfg.epochs = 3;
	cfg.seed = 42;
	cfg.shuffle = true;
	cfg.threads = threads;
	cfg.max_steps = max_steps;
	cfg.resume = from;
	cfg.nresume = from ? 1 : 0;
	pf_error_clear(&o.err);
	o.ret = pf_loader_create(&l, &cfg, &o.err);
	if (o.ret)
		return o;
	while ((ret = pf_loader_next(l, &b)) == 1) {
		uint32_t crc = 0;

		cr_assert_eq(b->core[0].tensors[0].len, OUT * OUT * 3);
		cr_assert_eq(b->core[0].tensors[0].dtype, PF_DTYPE_BYTES);
		for (uint32_t c = 0; c < b->cores; c++) {
			crc = pf_crc32c(crc, b->core[c].block, b->core[c].block_bytes);
			for (uint32_t r = 0; check && r < b->per_core_batch; r++)
				check_row((const uint8_t *)b->core[c].tensors[0].data +
						  (size_t)r * OUT * OUT * 3,
					  ((const int64_t *)b->core[c].tensors[1].data)[r], b->epoch,
					  42);
		}
		cr_assert_lt(o.n, 64);
		o.crc[o.n++] = crc;
		pf_loader_release(l, b);
	}
	o.ret = ret;
	if (ret < 0)
		o.err = *pf_loader_last_error(l);
	pf_loader_get_metrics(l, &m);
	o.images = m.images;
	o.as_read = m.window_as_read;
	if (save) {
		int64_t n = pf_loader_save_state(l, NULL, 0);
		void *buf = malloc((size_t)n);

		cr_assert_eq(pf_loader_save_state(l, buf, (size_t)n), n);
		save->data = buf;
		save->len = (size_t)n;
	}
	pf_loader_free(l);
	return o;
}

Test(loader_images, rows_are_the_transform_of_their_place)
{
	run_out o = run(dataset(-1, false), 2, NULL, 0, NULL, true);

	cr_assert_eq(o.ret, 0, "%s", o.err.msg);
	cr_assert_eq(o.n, 3 * NREC / 8);
	cr_assert_eq(o.images, 3 * NREC);
}

Test(loader_images, same_batches_at_any_thread_count)
{
	const char *path = dataset(-1, false);
	run_out one = run(path, 1, NULL, 0, NULL, false);
	run_out three = run(path, 3, NULL, 0, NULL, false);

	cr_assert_eq(one.ret, 0, "%s", one.err.msg);
	cr_assert_eq(three.ret, 0, "%s", three.err.msg);
	cr_assert_eq(one.n, three.n);
	cr_assert(!memcmp(one.crc, three.crc, one.n * sizeof(one.crc[0])));
}

Test(loader_images, resume_gives_the_same_batches)
{
	const char *path = dataset(-1, false);
	run_out whole = run(path, 2, NULL, 0, NULL, false);
	pf_state_blob st;
	run_out first = run(path, 2, NULL, 17, &st, false);
	run_out rest = run(path, 1, &st, 0, NULL, false);

	cr_assert_eq(whole.ret, 0, "%s", whole.err.msg);
	cr_assert_eq(first.n, 17);
	cr_assert_eq(rest.ret, 0, "%s", rest.err.msg);
	cr_assert_eq(first.n + rest.n, whole.n);
	cr_assert(!memcmp(first.crc, whole.crc, first.n * sizeof(whole.crc[0])));
	cr_assert(!memcmp(rest.crc, whole.crc + first.n, rest.n * sizeof(whole.crc[0])));
	free((void *)st.data);
}

static void damaged_image_fails(void)
{
	run_out o = run(dataset(37, false), 2, NULL, 0, NULL, false);

	cr_assert_eq(o.ret, -EBADMSG);
	cr_assert(strstr(o.err.file, "images.tfrecord.zst"), "%s", o.err.file);
	cr_assert_eq(o.err.record, 37);
	/* The file's byte: the image's in the record, and the decoder's
	 * place in the image. */
	cr_assert_eq(o.err.offset_kind, PF_OFFSET_FILE);
	cr_assert_gt(o.err.offset, 0);
	cr_assert(strstr(o.err.msg, "image feature 'image/encoded'") && strstr(o.err.msg, "JPEG"),
		  "%s", o.err.msg);
}

Test(loader_images, damaged_image_fails_naming_its_place)
{
	damaged_image_fails();
}

static void damaged_image_skipped(void)
{
	pf_loader_config cfg = { 0 };
	const char *paths[1] = { dataset(37, false) };
	pf_loader_metrics m;
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	uint32_t holes = 0;
	int ret;

	image_config(&cfg, paths);
	cfg.on_corrupt = PF_CORRUPT_SKIP;
	cfg.max_corrupt = 1;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while ((ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++)
			holes += b->per_core_batch - b->core[c].nvalid;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "%s", pf_loader_last_error(l)->msg);
	pf_loader_get_metrics(l, &m);
	cr_assert_eq(holes, 1);
	cr_assert_eq(m.corrupt_records, 1);
	cr_assert_eq(m.images, NREC - 1);
	pf_loader_free(l);
}

Test(loader_images, damaged_image_skipped_is_a_hole)
{
	damaged_image_skipped();
}

/* The same with the records waiting in the shuffle window as read (these
 * small JPEGs' rows are no larger than their bytes: forced), decoded once
 * their step's records are in: the same batches, the same errors. */
Test(loader_images, as_read_same_batches_resume_and_errors)
{
	const char *path = dataset(-1, false);
	run_out rows = run(path, 2, NULL, 0, NULL, false), whole, first, rest;
	pf_state_blob st;

	setenv("PODFEED_WINDOW", "records", 1);
	whole = run(path, 2, NULL, 0, NULL, true);
	cr_assert_eq(whole.ret, 0, "%s", whole.err.msg);
	cr_assert(whole.as_read && !rows.as_read);
	cr_assert_eq(whole.n, rows.n);
	cr_assert(!memcmp(whole.crc, rows.crc, rows.n * sizeof(rows.crc[0])));
	first = run(path, 3, NULL, 17, &st, false);
	rest = run(path, 1, &st, 0, NULL, false);
	cr_assert_eq(first.n + rest.n, whole.n);
	cr_assert(!memcmp(first.crc, whole.crc, first.n * sizeof(whole.crc[0])));
	cr_assert(!memcmp(rest.crc, whole.crc + first.n, rest.n * sizeof(whole.crc[0])));
	free((void *)st.data);
	damaged_image_fails();
	damaged_image_skipped();
}

Test(loader_images, image_feature_of_numbers_is_corrupt)
{
	run_out o = run(dataset(5, true), 1, NULL, 0, NULL, false);

	cr_assert_eq(o.ret, -EBADMSG);
	cr_assert_eq(o.err.record, 5);
	cr_assert(strstr(o.err.msg, "not an image's bytes"), "%s", o.err.msg);
}

Test(loader_images, missing_image_feature_is_named)
{
	pf_loader_config cfg = { 0 };
	const char *paths[1] = { dataset(-1, false) };
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	int ret;

	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.features = "jpeg:image[8,8],image/class/label:int64[1]";
	cfg.per_core_batch = 4;
	ret = pf_loader_create(&l, &cfg, &err);
	if (ret == 0) {
		while ((ret = pf_loader_next(l, &b)) == 1)
			pf_loader_release(l, b);
		err = *pf_loader_last_error(l);
		pf_loader_free(l);
	}
	cr_assert_eq(ret, -ENOMSG);
	cr_assert(strstr(err.msg, "'jpeg'"), "%s", err.msg);
}

Test(image_spec, grammar_and_tensor)
{
	pf_spec spec;
	pf_error err;

	cr_assert_eq(pf_spec_parse(&spec, "img:image[224,200]:train:channels=1:scale=0.2:1:"
				   "ratio=0.5:2:flip=0:max_pixels=1000,y:int64[1]", &err),
		     0, "%s", err.msg);
	cr_assert_eq(spec.n, 2);
	cr_assert_eq(spec.f[0].dtype, PF_DTYPE_BYTES);
	cr_assert_eq(spec.f[0].len, 224 * 200);
	cr_assert_eq(pf_spec_parse(&spec, "img:image[4,4]:eval:dtype=float32:layout=nchw:"
				   "mean=0.485:0.456:0.406:std=0.229:0.224:0.225", &err), 0,
		     "%s", err.msg);
	cr_assert_eq(spec.f[0].dtype, PF_DTYPE_FLOAT32);
	cr_assert_eq(spec.f[0].len, 48);
	cr_assert_eq(pf_spec_parse(&spec, "img:image[4,4]:dtype=bfloat16:mean=0.5:std=0.5",
				   &err), 0, "%s", err.msg);
	cr_assert_eq(spec.f[0].dtype, PF_DTYPE_BYTES);
	cr_assert_eq(spec.f[0].len, 96);
}

Test(image_spec, errors_name_the_byte_and_the_value)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "img:image[224]", "expected ','" },
		{ "img:image[0,224]", "height must be 1..16384" },
		{ "img:image[224,99999]", "width must be 1..16384" },
		{ "img:image", "expected '[H,W]'" },
		{ "img:image[8,8]:crop", "unknown image option 'crop'" },
		{ "img:image[8,8]:channels=2", "channels must be 3 or 1" },
		{ "img:image[8,8]:layout=hwc", "layout must be nhwc or nchw" },
		{ "img:image[8,8]:dtype=int8", "uint8, float32 or bfloat16" },
		{ "img:image[8,8]:mean=0.5", "mean and std need dtype=float32" },
		{ "img:image[8,8]:eval:scale=0.1:1", "train's options" },
		{ "img:image[8,8]:train:scale=0.1", "scale needs two values" },
		{ "img:image[8,8]:train:scale=0.9:0.1", "scale=0.9:0.1" },
		{ "img:image[8,8]:train:ratio=0:1", "ratio=0:1" },
		{ "img:image[8,8]:train:flip=2", "flip must be 0 or 1" },
		{ "img:image[8,8]:dtype=float32:std=1:0:1", "std nonzero" },
		{ "img:image[8,8]:dtype=float32:mean=1:2", "1 or 3 values" },
		{ "img:image[8,8]:max_pixels=0", "max_pixels" },
		{ "img:image[8,8]:train:train", "given twice" },
		{ "img:image[8,8]:train=1", "takes no value" },
		{ "img:image[8,8] ", "unexpected ' '" },
	};
	pf_spec spec;
	pf_error err;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(pf_spec_parse(&spec, bad[i].text, &err), -EINVAL, "%s", bad[i].text);
		cr_assert(strstr(err.msg, bad[i].want) && strstr(err.msg, "byte "),
			  "%s: %s", bad[i].text, err.msg);
	}
}
