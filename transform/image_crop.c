// SPDX-License-Identifier: Apache-2.0
/* The crop rules: which box of an image becomes the output (train's
 * random-resized crop and flip, eval's center crop, resize's whole
 * image), and their random draws.  Not the decode nor the resize. */
#include <math.h>

#include "common_internal.h"
#include "image_internal.h"

/* Images draw from streams of their own: the seed's image stream is
 * unrelated to its shuffle streams. */
#define IMAGE_STREAM_TAG 0x696d6167652d3238ull

void pf_image_crop_train(uint32_t img_w, uint32_t img_h, double scale_lo, double scale_hi,
			 double ratio_lo, double ratio_hi, uint64_t seed, uint32_t epoch,
			 uint64_t place, pf_crop_box *box, bool *flip)
{
	pf_rng rng = pf_rng_seed(seed ^ IMAGE_STREAM_TAG, epoch, place);
	double area = (double)img_w * img_h;
	double log_lo = log(ratio_lo), log_hi = log(ratio_hi);
	double in_ratio;

	/* The flip first, so that it does not depend on how many crop
	 * draws were made. */
	*flip = pf_rng_next(&rng) >> 63;
	for (int i = 0; i < 10; i++) {
		double target = area * (scale_lo + (scale_hi - scale_lo) * pf_rng_unit(&rng));
		double aspect = exp(log_lo + (log_hi - log_lo) * pf_rng_unit(&rng));
		/* Python's round(): half to even, as nearbyint() in the
		 * default rounding mode. */
		double w = nearbyint(sqrt(target * aspect));
		double h = nearbyint(sqrt(target / aspect));

		if (w > 0 && w <= img_w && h > 0 && h <= img_h) {
			box->w = (uint32_t)w;
			box->h = (uint32_t)h;
			box->x = (uint32_t)pf_rng_below(&rng, img_w - box->w + 1);
			box->y = (uint32_t)pf_rng_below(&rng, img_h - box->h + 1);
			return;
		}
	}
	/* torchvision's fallback: the whole image, cut to the ratio range,
	 * centered. */
	in_ratio = (double)img_w / img_h;
	if (in_ratio < ratio_lo) {
		box->w = img_w;
		box->h = (uint32_t)nearbyint(img_w / ratio_lo);
	} else if (in_ratio > ratio_hi) {
		box->h = img_h;
		box->w = (uint32_t)nearbyint(img_h * ratio_hi);
	} else {
		box->w = img_w;
		box->h = img_h;
	}
	if (box->w < 1)
		box->w = 1;
	if (box->h < 1)
		box->h = 1;
	if (box->w > img_w)
		box->w = img_w;
	if (box->h > img_h)
		box->h = img_h;
	box->x = (img_w - box->w) / 2;
	box->y = (img_h - box->h) / 2;
}

/* One side of eval: the resized length r of an image side of n pixels and
 * the output's o: the box's ends in the image's pixels, and the output's
 * pixels it fills (at, len).  CenterCrop pads a side shorter than o with
 * (o - r) / 2 zeros before it (and the rest after): the whole side is
 * resized to r pixels at that place; else it crops at round((r - o) / 2). */
static void eval_side(uint32_t n, uint32_t r, uint32_t o, double *b0, double *b1, uint32_t *at,
		      uint32_t *len)
{
	double scale = (double)n / r, left;

	if (o > r) {
		*b0 = 0;
		*b1 = n;
		*at = (o - r) / 2;
		*len = r;
		return;
	}
	left = nearbyint(((double)r - o) / 2.0);
	*b0 = left * scale;
	*b1 = (left + o) * scale;
	*at = 0;
	*len = o;
}

void pf_image_crop_eval(uint32_t img_w, uint32_t img_h, uint32_t out_w, uint32_t out_h,
			double box[4], pf_crop_box *place)
{
	/* torchvision's Resize(int(H / 0.875)) then CenterCrop((H, W)): the
	 * shorter side to S, the longer to int(S * long / short); the crop's
	 * corner at round((resized - crop) / 2), or zeros around the resized
	 * image where it is the smaller. */
	uint32_t s = (uint32_t)floor(out_h / 0.875 + 1e-9);
	uint32_t rw, rh;

	if (img_w <= img_h) {
		rw = s;
		rh = (uint32_t)((uint64_t)s * img_h / img_w);
	} else {
		rh = s;
		rw = (uint32_t)((uint64_t)s * img_w / img_h);
	}
	if (rw < 1)
		rw = 1;
	if (rh < 1)
		rh = 1;
	eval_side(img_w, rw, out_w, &box[0], &box[2], &place->x, &place->w);
	eval_side(img_h, rh, out_h, &box[1], &box[3], &place->y, &place->h);
}
