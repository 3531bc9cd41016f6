/* SPDX-License-Identifier: Apache-2.0 */
/* transform/'s images: the crop rule (bounds, distribution, fallback,
 * determinism), bad input (each a named error, never a crash), the spec's
 * checks.  Exactness against PIL is tests/python/test_image_pil.py's. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pf_transform.h"

/* A 300 x 200 scene (gradients and a checkerboard) as a JPEG of
 * components 1, 3 or 4. */
static size_t make_jpeg(uint8_t *dst, size_t cap, uint32_t w, uint32_t h, uint32_t comps,
			bool progressive)
{
	uint8_t *px = malloc((size_t)w * h * comps);
	pf_error err;
	int64_t n;

	cr_assert_not_null(px);
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			for (uint32_t c = 0; c < comps; c++)
				px[((size_t)y * w + x) * comps + c] =
					(uint8_t)((x * (c + 1) + y * 3 + ((x / 16 + y / 16) % 2) * 90) & 255);
	n = pf_image_encode_jpeg(px, w, h, comps, 90, progressive, dst, cap, &err);
	free(px);
	cr_assert_gt(n, 0, "%s", err.msg);
	return (size_t)n;
}

static uint8_t jpeg[1 << 20];
static uint8_t out[224 * 224 * 4 * 3];

static int run(const pf_image_spec *spec, const void *data, size_t len, pf_image_note *note,
	       pf_error *err)
{
	pf_image_scratch scratch = { 0 };
	int rc = pf_image_transform(spec, data, len, 1, 0, 7, out, &scratch, note, err);

	pf_image_scratch_free(&scratch);
	return rc;
}

Test(image_crop, boxes_inside_and_bounded)
{
	for (uint64_t place = 0; place < 20000; place++) {
		uint32_t w = 50 + (uint32_t)(place % 7) * 101, h = 40 + (uint32_t)(place % 5) * 77;
		pf_crop_box b;
		bool flip;
		double area, ratio;

		pf_image_crop_train(w, h, 0.08, 1.0, 3.0 / 4, 4.0 / 3, 3, 1, place, &b, &flip);
		cr_assert(b.w >= 1 && b.h >= 1 && b.x + b.w <= w && b.y + b.h <= h,
			  "box %ux%u at %u,%u in %ux%u", b.w, b.h, b.x, b.y, w, h);
		area = (double)b.w * b.h / ((double)w * h);
		ratio = (double)b.w / b.h;
		/* Rounding w and h to whole pixels moves area and ratio by at
		 * most about a pixel's worth. */
		cr_assert(area >= 0.08 * (1 - 2.0 / b.h) * (1 - 2.0 / b.w) - 1e-9 && area <= 1 + 1e-9,
			  "area %g", area);
		cr_assert(ratio >= 0.75 * (b.h - 1.0) / b.h * (b.w - 1.0) / b.w - 1e-9 &&
				  ratio <= 4.0 / 3 * (b.h + 1.0) / b.h * (b.w + 1.0) / b.w + 1e-9,
			  "ratio %g of %ux%u", ratio, b.w, b.h);
	}
}

/* On an image large enough that no draw misses (scale at most 0.5), the
 * area is uniform in [0.08, 0.5], the log-ratio uniform, the corner
 * uniform over its range, the flip a fair coin. */
Test(image_crop, distribution)
{
	enum { N = 40000, BINS = 4 };
	unsigned area_bins[BINS] = { 0 }, ratio_bins[BINS] = { 0 }, x_bins[BINS] = { 0 };
	unsigned flips = 0;

	for (uint64_t place = 0; place < N; place++) {
		pf_crop_box b;
		bool flip;
		double a, lr, xr;

		pf_image_crop_train(4000, 4000, 0.08, 0.5, 3.0 / 4, 4.0 / 3, 11, 2, place, &b, &flip);
		a = ((double)b.w * b.h / 16e6 - 0.08) / 0.42;
		lr = (log((double)b.w / b.h) - log(0.75)) / (log(4.0 / 3) - log(0.75));
		xr = (double)b.x / (4000 - b.w + 1);
		area_bins[a < 0 ? 0 : a >= 1 ? BINS - 1 : (int)(a * BINS)]++;
		ratio_bins[lr < 0 ? 0 : lr >= 1 ? BINS - 1 : (int)(lr * BINS)]++;
		x_bins[(int)(xr * BINS)]++;
		flips += flip;
	}
	/* Each bin N/4 = 10,000 +- 5 sigma (sigma ~ 87). */
	for (int i = 0; i < BINS; i++) {
		cr_assert(abs((int)area_bins[i] - N / BINS) < 450, "area bin %d: %u", i, area_bins[i]);
		cr_assert(abs((int)ratio_bins[i] - N / BINS) < 450, "ratio bin %d: %u", i,
			  ratio_bins[i]);
		cr_assert(abs((int)x_bins[i] - N / BINS) < 450, "x bin %d: %u", i, x_bins[i]);
	}
	cr_assert(abs((int)flips - N / 2) < 500, "flips %u of %d", flips, N);
}

/* A 1000 x 50 image: every draw is too tall, so torchvision's fallback,
 * the widest box of ratio 4/3, centered. */
Test(image_crop, fallback_is_the_centered_ratio_box)
{
	pf_crop_box b;
	bool flip;

	pf_image_crop_train(1000, 50, 0.08, 1.0, 3.0 / 4, 4.0 / 3, 1, 0, 5, &b, &flip);
	cr_assert_eq(b.h, 50);
	cr_assert_eq(b.w, 67);
	cr_assert_eq(b.x, (1000 - 67) / 2);
	cr_assert_eq(b.y, 0);
	pf_image_crop_train(40, 900, 0.08, 1.0, 3.0 / 4, 4.0 / 3, 1, 0, 5, &b, &flip);
	cr_assert_eq(b.w, 40);
	cr_assert_eq(b.h, 53);
	cr_assert_eq(b.y, (900 - 53) / 2);
}

Test(image_crop, determined_by_seed_epoch_place)
{
	pf_crop_box a, b;
	bool fa, fb;
	unsigned same = 0;

	pf_image_crop_train(640, 480, 0.08, 1, 0.75, 4.0 / 3, 9, 3, 12345, &a, &fa);
	pf_image_crop_train(640, 480, 0.08, 1, 0.75, 4.0 / 3, 9, 3, 12345, &b, &fb);
	cr_assert(!memcmp(&a, &b, sizeof(a)) && fa == fb);
	for (uint64_t k = 0; k < 3; k++) {
		pf_image_crop_train(640, 480, 0.08, 1, 0.75, 4.0 / 3, 9 + (k == 0), 3 + (k == 1),
				    12345 + (k == 2), &b, &fb);
		same += !memcmp(&a, &b, sizeof(a));
	}
	cr_assert_eq(same, 0, "another seed, epoch or place drew the same box");
}

Test(image_transform, same_bytes_every_time_and_each_kind_decodes)
{
	static uint8_t first[224 * 224 * 3];
	pf_image_spec spec;
	pf_image_note note;
	pf_error err;

	pf_image_spec_init(&spec, 224, 224, PF_AUGMENT_TRAIN);
	for (uint32_t comps = 1; comps <= 4; comps++) {
		size_t len;

		if (comps == 2)
			continue;
		for (int prog = 0; prog < 2; prog++) {
			len = make_jpeg(jpeg, sizeof(jpeg), 500, 375, comps, prog);
			cr_assert_eq(run(&spec, jpeg, len, &note, &err), 0, "%s", err.msg);
			memcpy(first, out, sizeof(first));
			memset(out, 0, sizeof(first));
			cr_assert_eq(run(&spec, jpeg, len, &note, &err), 0, "%s", err.msg);
			cr_assert(!memcmp(first, out, sizeof(first)));
			cr_assert_eq(note.info.progressive, prog);
			cr_assert_eq(note.info.components, comps);
		}
	}
}

Test(image_bad, empty_and_not_an_image)
{
	pf_image_spec spec;
	pf_error err;

	pf_image_spec_init(&spec, 32, 32, PF_AUGMENT_TRAIN);
	cr_assert_eq(run(&spec, "", 0, NULL, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "0 bytes"), "%s", err.msg);
	cr_assert_eq(run(&spec, "hello, world", 12, NULL, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "not an image") && strstr(err.msg, "68 65 6c 6c"), "%s",
		  err.msg);
	/* A JPEG's signature and nothing else. */
	cr_assert_eq(run(&spec, "\xff\xd8\xff", 3, NULL, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "JPEG"), "%s", err.msg);
}

Test(image_bad, truncated_jpeg_anywhere)
{
	pf_image_spec spec;
	pf_error err;
	size_t len = make_jpeg(jpeg, sizeof(jpeg), 300, 200, 3, false);

	pf_image_spec_init(&spec, 64, 64, PF_AUGMENT_RESIZE);
	for (size_t cut = 1; cut < len; cut += len / 37 + 1) {
		int rc = run(&spec, jpeg, cut, NULL, &err);

		cr_assert_eq(rc, -EBADMSG, "cut at %zu of %zu: %d", cut, len, rc);
		cr_assert(err.msg[0]);
	}
	/* Cut in the entropy-coded data with the EOI put back: libjpeg's
	 * "premature end" warning is an error. */
	memcpy(jpeg + len / 2, "\xff\xd9", 2);
	cr_assert_eq(run(&spec, jpeg, len / 2 + 2, NULL, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "JPEG: "), "%s", err.msg);
	cr_assert_eq(err.offset_kind, PF_OFFSET_STREAM);
}

Test(image_bad, corrupt_entropy_data_is_an_error)
{
	pf_image_spec spec;
	pf_error err;
	size_t len = make_jpeg(jpeg, sizeof(jpeg), 300, 200, 3, false);

	pf_image_spec_init(&spec, 300, 200, PF_AUGMENT_RESIZE);
	/* A restart marker where none belongs. */
	memcpy(jpeg + len / 2, "\xff\xd3\xff\xd5", 4);
	cr_assert_eq(run(&spec, jpeg, len, NULL, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "JPEG"), "%s", err.msg);
}

Test(image_bad, pixel_limit)
{
	pf_image_spec spec;
	pf_error err;
	size_t len = make_jpeg(jpeg, sizeof(jpeg), 300, 200, 3, false);

	pf_image_spec_init(&spec, 64, 64, PF_AUGMENT_TRAIN);
	spec.max_pixels = 59999;
	cr_assert_eq(run(&spec, jpeg, len, NULL, &err), -EFBIG);
	cr_assert(strstr(err.msg, "300x200") && strstr(err.msg, "59999"), "%s", err.msg);
	spec.max_pixels = 60000;
	cr_assert_eq(run(&spec, jpeg, len, NULL, &err), 0, "%s", err.msg);
}

/* A header claiming 65500 x 65500 in 1 KiB: refused before any decode. */
Test(image_bad, decompression_bomb_header)
{
	pf_image_spec spec;
	pf_error err;
	size_t len = make_jpeg(jpeg, sizeof(jpeg), 16, 16, 3, false);

	for (size_t i = 0; i + 9 < len; i++)
		if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc0) {
			jpeg[i + 5] = 0xff;
			jpeg[i + 6] = 0xdc;
			jpeg[i + 7] = 0xff;
			jpeg[i + 8] = 0xdc;
			break;
		}
	pf_image_spec_init(&spec, 64, 64, PF_AUGMENT_TRAIN);
	cr_assert_eq(run(&spec, jpeg, len, NULL, &err), -EFBIG);
	cr_assert(strstr(err.msg, "65500x65500"), "%s", err.msg);
}

Test(image_transform, smaller_than_target_is_upscaled_and_said)
{
	pf_image_spec spec;
	pf_image_note note;
	pf_error err;
	size_t len = make_jpeg(jpeg, sizeof(jpeg), 40, 30, 3, false);

	pf_image_spec_init(&spec, 64, 64, PF_AUGMENT_EVAL);
	cr_assert_eq(run(&spec, jpeg, len, &note, &err), 0, "%s", err.msg);
	cr_assert(note.upscaled);
	pf_image_spec_init(&spec, 16, 16, PF_AUGMENT_RESIZE);
	cr_assert_eq(run(&spec, jpeg, len, &note, &err), 0, "%s", err.msg);
	cr_assert(!note.upscaled);
}

Test(image_transform, eval_wider_than_resized_is_padded_with_zeros)
{
	/* 300x200 to eval 64x160: the shorter side to int(64 / 0.875) = 73,
	 * the longer to 109; CenterCrop((64, 160)) pads (160 - 109) / 2 = 25
	 * zero columns on the left and 26 on the right (torchvision), and
	 * normalized output has (0 - mean) / std there. */
	static uint8_t u8[64 * 160 * 3];
	static float f32[64 * 160 * 3];
	pf_image_spec spec;
	pf_error err;
	pf_image_scratch scratch = { 0 };
	size_t len = make_jpeg(jpeg, sizeof(jpeg), 300, 200, 3, false);

	pf_image_spec_init(&spec, 64, 160, PF_AUGMENT_EVAL);
	memset(u8, 0xa5, sizeof(u8));
	cr_assert_eq(pf_image_transform(&spec, jpeg, len, 1, 0, 7, u8, &scratch, NULL, &err), 0,
		     "%s", err.msg);
	spec.dtype = PF_IMAGE_FLOAT32;
	spec.nchw = true;
	for (int c = 0; c < 3; c++) {
		spec.mean[c] = 0.5f;
		spec.std[c] = 0.25f;
	}
	cr_assert_eq(pf_image_transform(&spec, jpeg, len, 1, 0, 7, f32, &scratch, NULL, &err),
		     0, "%s", err.msg);
	pf_image_scratch_free(&scratch);
	for (uint32_t y = 0; y < 64; y++)
		for (uint32_t x = 0; x < 160; x++)
			for (uint32_t c = 0; c < 3; c++) {
				uint8_t v = u8[(y * 160 + x) * 3 + c];
				float f = f32[(c * 64 + y) * 160 + x];
				bool pad = x < 25 || x >= 160 - 26;

				if (pad)
					cr_assert(v == 0 && f == -2.0f, "%u,%u,%u: %u %g", y, x,
						  c, v, f);
				cr_assert_float_eq(f, (v / 255.0f - 0.5f) / 0.25f, 1e-5);
			}
	/* The image's own columns are not all black. */
	cr_assert(u8[(32 * 160 + 25) * 3] | u8[(32 * 160 + 25) * 3 + 1] |
		  u8[(32 * 160 + 133) * 3 + 2]);
}

Test(image_transform, layouts_and_dtypes_agree)
{
	static uint8_t hwc[32 * 48 * 3];
	pf_image_spec spec;
	pf_error err;
	size_t len = make_jpeg(jpeg, sizeof(jpeg), 300, 200, 3, true);
	const float mean[3] = { 0.485f, 0.456f, 0.406f }, std[3] = { 0.229f, 0.224f, 0.225f };

	pf_image_spec_init(&spec, 32, 48, PF_AUGMENT_EVAL);
	cr_assert_eq(run(&spec, jpeg, len, NULL, &err), 0, "%s", err.msg);
	memcpy(hwc, out, sizeof(hwc));
	spec.nchw = true;
	cr_assert_eq(run(&spec, jpeg, len, NULL, &err), 0, "%s", err.msg);
	for (size_t i = 0; i < 32 * 48; i++)
		for (size_t c = 0; c < 3; c++)
			cr_assert_eq(out[c * 32 * 48 + i], hwc[i * 3 + c]);
	spec.dtype = PF_IMAGE_FLOAT32;
	memcpy(spec.mean, mean, sizeof(mean));
	memcpy(spec.std, std, sizeof(std));
	cr_assert_eq(run(&spec, jpeg, len, NULL, &err), 0, "%s", err.msg);
	for (size_t i = 0; i < 32 * 48; i++)
		for (size_t c = 0; c < 3; c++) {
			float f;

			memcpy(&f, out + (c * 32 * 48 + i) * 4, 4);
			cr_assert_float_eq(f, (hwc[i * 3 + c] / 255.0f - mean[c]) / std[c], 1e-5);
		}
	spec.dtype = PF_IMAGE_BFLOAT16;
	spec.nchw = false;
	cr_assert_eq(run(&spec, jpeg, len, NULL, &err), 0, "%s", err.msg);
	for (size_t i = 0; i < 32 * 48 * 3; i++) {
		uint16_t b;
		uint32_t u;
		float f, want = (hwc[i] / 255.0f - mean[i % 3]) / std[i % 3];

		memcpy(&b, out + i * 2, 2);
		u = (uint32_t)b << 16;
		memcpy(&f, &u, 4);
		cr_assert(fabsf(f - want) <= fabsf(want) / 128 + 1e-6, "%g vs %g", f, want);
	}
}

Test(image_spec, checks_name_the_value)
{
	pf_image_spec spec;
	pf_error err;

	pf_image_spec_init(&spec, 224, 224, PF_AUGMENT_TRAIN);
	cr_assert_eq(pf_image_spec_check(&spec, &err), 0);
	spec.channels = 2;
	cr_assert_eq(pf_image_spec_check(&spec, &err), -EINVAL);
	cr_assert(strstr(err.msg, "channels=2"), "%s", err.msg);
	pf_image_spec_init(&spec, 224, 0, PF_AUGMENT_TRAIN);
	cr_assert_eq(pf_image_spec_check(&spec, &err), -EINVAL);
	pf_image_spec_init(&spec, 224, 224, PF_AUGMENT_TRAIN);
	spec.scale_lo = 0.9;
	spec.scale_hi = 0.5;
	cr_assert_eq(pf_image_spec_check(&spec, &err), -EINVAL);
	cr_assert(strstr(err.msg, "scale=0.9:0.5"), "%s", err.msg);
	pf_image_spec_init(&spec, 224, 224, PF_AUGMENT_TRAIN);
	spec.ratio_lo = 0;
	cr_assert_eq(pf_image_spec_check(&spec, &err), -EINVAL);
	pf_image_spec_init(&spec, 224, 224, PF_AUGMENT_TRAIN);
	spec.std[1] = 0;
	cr_assert_eq(pf_image_spec_check(&spec, &err), -EINVAL);
}
