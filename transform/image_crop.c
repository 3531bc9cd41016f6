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

void pf_image_crop_eval(uint32_t img_w, uint32_t img_h, uint32_t out_w, uint32_t out_h,
			double box[4])
{
	/* torchvision's Resize(int(H / 0.875)) then CenterCrop((H, W)): the
	 * shorter side to S, the longer to int(S * long / short); the crop's
	 * corner at round((resized - crop) / 2). */
	uint32_t s = (uint32_t)floor(out_h / 0.875 + 1e-9);
	uint32_t rw, rh;
	double sx, sy, left, top;

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
	sx = (double)img_w / rw;
	sy = (double)img_h / rh;
	left = nearbyint(((double)rw - out_w) / 2.0);
	top = nearbyint(((double)rh - out_h) / 2.0);
	box[0] = left * sx;
	box[1] = top * sy;
	box[2] = (left + out_w) * sx;
	box[3] = (top + out_h) * sy;
}
