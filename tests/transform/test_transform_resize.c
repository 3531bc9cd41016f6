/* SPDX-License-Identifier: Apache-2.0 */
/* transform/'s resize on each of its paths (pf_resize_paths: AVX2, SSE2,
 * scalar, those this CPU has): every path's bytes equal the scalar
 * path's, over random regions, fractional boxes, odd and tiny output
 * widths (the SIMD passes' tails), flips, 1 and 3 channels, upscales and
 * downscales past the SIMD passes' tap limit; each source row in a buffer
 * of exactly its bytes, so a load past a row's end is an ASan error.  The
 * scalar path against PIL is tests/python/test_image_pil.py's (there on
 * the CPU's best path; here the others equal it). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"

typedef struct resize_case {
	uint32_t src_w, src_h, out_w, out_h, channels;
	double box[4];
	bool flip;
} resize_case;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static uint32_t below(uint32_t n)
{
	return (uint32_t)(next() % n);
}

/* The source's pixel bytes: noise, or (style 1) only 0 and 255, whose
 * sums reach the clamp at both ends, or (style 2) smooth ramps. */
static uint8_t *make_source(const resize_case *c, int style)
{
	size_t n = (size_t)c->src_w * c->src_h * c->channels;
	uint8_t *px = malloc(n);

	cr_assert_not_null(px);
	for (size_t i = 0; i < n; i++)
		px[i] = style == 0 ? (uint8_t)next()
		      : style == 1 ? (next() & 1 ? 255 : 0)
				   : (uint8_t)(i * 7 / 5 + i / (c->src_w * c->channels));
	return px;
}

/* The resize of c on path ops into out (out_w * out_h * channels bytes). */
static void resize_on(const resize_case *c, const uint8_t *src, const pf_resize_ops *ops,
		      uint8_t *out)
{
	size_t bytes = pf_resampler_bytes(c->src_w, c->src_h, c->box[0], c->box[1], c->box[2],
					  c->box[3], c->out_w, c->out_h, c->channels);
	void *mem = malloc(bytes);
	pf_resampler r;

	cr_assert_not_null(mem);
	pf_resampler_init(&r, mem, c->src_w, c->src_h, c->box[0], c->box[1], c->box[2],
			  c->box[3], c->out_w, c->out_h, c->channels, c->flip, out);
	r.ops = ops;
	cr_assert(r.first_col + r.cols <= c->src_w && r.first_row + r.rows <= c->src_h);
	for (uint32_t y = 0; y < r.rows; y++) {
		size_t row = (size_t)r.cols * c->channels;
		/* Exactly the row's bytes: a read past them is ASan's. */
		uint8_t *px = malloc(row ? row : 1);

		cr_assert_not_null(px);
		memcpy(px, src + ((size_t)(r.first_row + y) * c->src_w + r.first_col) * c->channels,
		       row);
		pf_resampler_push(&r, px);
		free(px);
	}
	cr_assert(pf_resampler_done(&r), "%s: %u of %u rows", ops->name, r.next_out, c->out_h);
	free(mem);
}

static const pf_resize_ops *scalar_path(void)
{
	for (const pf_resize_ops *p = pf_resize_paths; p->name; p++)
		if (!strcmp(p->name, "scalar"))
			return p;
	cr_assert_fail("no scalar path");
	return NULL;
}

/* Every supported path's output equals the scalar path's; returns how
 * many paths other than scalar ran. */
static int check_case(const resize_case *c, int style)
{
	size_t n = (size_t)c->out_w * c->out_h * c->channels;
	uint8_t *src = make_source(c, style), *want = malloc(n), *got = malloc(n);
	int others = 0;

	cr_assert(want && got);
	resize_on(c, src, scalar_path(), want);
	for (const pf_resize_ops *p = pf_resize_paths; p->name; p++) {
		if (!p->supported() || !strcmp(p->name, "scalar"))
			continue;
		memset(got, 0xa5, n);
		resize_on(c, src, p, got);
		for (size_t i = 0; i < n; i++)
			cr_assert_eq(got[i], want[i],
				     "%s: byte %zu (row %zu) differs: %u, scalar %u; source "
				     "%ux%u, box %g,%g-%g,%g, out %ux%u, %u channels, flip %d, "
				     "style %d",
				     p->name, i, i / ((size_t)c->out_w * c->channels), got[i],
				     want[i], c->src_w, c->src_h, c->box[0], c->box[1], c->box[2],
				     c->box[3], c->out_w, c->out_h, c->channels, c->flip, style);
		others++;
	}
	free(src);
	free(want);
	free(got);
	return others;
}

static void random_case(resize_case *c, uint32_t max_side, uint32_t max_out)
{
	double bw, bh;

	c->src_w = 1 + below(max_side);
	c->src_h = 1 + below(max_side);
	c->out_w = 1 + below(max_out);
	c->out_h = 1 + below(max_out);
	c->channels = below(4) ? 3 : 1;
	c->flip = below(2);
	/* A box inside the region, fractional (eval's are), at least 0.5 px. */
	bw = 0.5 + (c->src_w - 0.5) * (double)below(1 << 20) / (1 << 20);
	bh = 0.5 + (c->src_h - 0.5) * (double)below(1 << 20) / (1 << 20);
	c->box[0] = (c->src_w - bw) * (double)below(1 << 20) / (1 << 20);
	c->box[1] = (c->src_h - bh) * (double)below(1 << 20) / (1 << 20);
	c->box[2] = c->box[0] + bw;
	c->box[3] = c->box[1] + bh;
	if (below(3) == 0) {	/* whole pixels, as train's boxes */
		c->box[0] = (double)(uint32_t)c->box[0];
		c->box[1] = (double)(uint32_t)c->box[1];
		c->box[2] = c->box[0] + (uint32_t)(bw < 1 ? 1 : bw);
		c->box[3] = c->box[1] + (uint32_t)(bh < 1 ? 1 : bh);
		if (c->box[2] > c->src_w)
			c->box[2] = c->src_w;
		if (c->box[3] > c->src_h)
			c->box[3] = c->src_h;
	}
}

Test(image_resize, paths_are_listed_and_scalar_is_there)
{
	int n = 0;

	for (const pf_resize_ops *p = pf_resize_paths; p->name; p++, n++) {
		cr_assert(p->supported && p->horizontal3 && p->vertical);
		cr_log_info("resize path %s: %s", p->name,
			    p->supported() ? "supported" : "not on this CPU");
	}
	cr_assert(scalar_path()->supported());
	cr_assert_geq(n, 1);
	cr_assert(pf_resize_path()->supported());
}

Test(image_resize, random_cases_equal_scalar)
{
	int others = 0;

	for (int i = 0; i < 600; i++) {
		resize_case c;

		random_case(&c, i % 3 ? 160 : 700, i % 2 ? 70 : 300);
		others += check_case(&c, i % 3);
	}
	/* On x86-64 SSE2 always runs: the comparison is never empty there. */
#if defined(__x86_64__)
	cr_assert_geq(others, 600);
#endif
}

Test(image_resize, train_sized_crops_equal_scalar)
{
	/* 224 x 224 from the box sizes a JPEG's DCT scaling leaves (up to
	 * twice the output), and upscales; every output width's tail. */
	for (int i = 0; i < 120; i++) {
		resize_case c = { .src_w = 100 + below(400), .src_h = 100 + below(400),
				  .channels = 3, .flip = i & 1 };

		c.out_w = i < 40 ? 224 : 200 + (uint32_t)i;
		c.out_h = 224;
		c.box[0] = below(c.src_w / 4);
		c.box[1] = below(c.src_h / 4);
		c.box[2] = c.box[0] + 1 + below(c.src_w - (uint32_t)c.box[0]);
		c.box[3] = c.box[1] + 1 + below(c.src_h - (uint32_t)c.box[1]);
		check_case(&c, i % 3);
	}
}

Test(image_resize, narrow_and_tall_downscales_equal_scalar)
{
	/* Widths 1..40 (the SIMD passes' tails and their scalar pixels);
	 * downscales by 100-600 (taps past the SIMD vertical pass's limit,
	 * sums of hundreds of products). */
	for (uint32_t w = 1; w <= 40; w++) {
		resize_case c = { .src_w = w + below(20), .src_h = 3 + below(30), .out_w = w,
				  .out_h = 1 + below(9), .channels = w % 3 ? 3 : 1,
				  .flip = w & 1 };

		c.box[2] = c.src_w;
		c.box[3] = c.src_h;
		check_case(&c, (int)(w % 3));
	}
	for (int i = 0; i < 6; i++) {
		resize_case c = { .src_w = 600 + below(1200), .src_h = 600 + below(1200),
				  .out_w = 1 + below(6), .out_h = 1 + below(6),
				  .channels = i % 2 ? 3 : 1, .flip = i & 2 };

		c.box[2] = c.src_w;
		c.box[3] = c.src_h;
		check_case(&c, i % 3);
	}
}

Test(image_resize, simd_names_a_path_or_the_best)
{
	/* Each test is a process of its own: the choice is made once, here. */
	setenv("PODFEED_SIMD", "scalar", 1);
	cr_assert_str_eq(pf_resize_path()->name, "scalar");
}

Test(image_resize, simd_unknown_name_is_the_best)
{
	const pf_resize_ops *best = NULL;

	setenv("PODFEED_SIMD", "avx512", 1);	/* the varint decoder's, not the resize's */
	for (const pf_resize_ops *p = pf_resize_paths; p->name && !best; p++)
		if (p->supported())
			best = p;
	cr_assert_str_eq(pf_resize_path()->name, best->name);
}

#if defined(__x86_64__)
Test(image_resize, simd_sse2_is_taken_when_named)
{
	setenv("PODFEED_SIMD", "sse2", 1);
	cr_assert_str_eq(pf_resize_path()->name, "sse2");
}
#endif
