/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz harness: the image path (transform/): probe, decode, crop, resize,
 * output, on any bytes. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf_transform.h"

/*
 * The first two bytes choose the spec (augment, output size, channels,
 * layout and dtype, a DCT scale forced or not); the rest is the image.
 * The harness aborts when
 *   - a transform returns anything but 0, -EBADMSG or -EFBIG (or -ENOMEM),
 *     or fails without a message, or with a byte offset past the input;
 *   - a second run of the same input gives other bytes or another result;
 *   - the probe accepts an image the transform then calls not an image,
 *     or the other way round (a header the probe refuses must fail).
 * The pixel limit is 4 Mi pixels, so that a header of a huge image is
 * refused rather than decoded (time, not safety: every path is bounded).
 * The output buffer is malloc'd at its exact size so ASan sees a write
 * past it.
 */

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "fuzz_image: %s:%d: %s\n",          \
				__FILE__, __LINE__, #cond);                  \
			abort();                                             \
		}                                                            \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pf_image_scratch scratch;

static int run(const pf_image_spec *spec, const uint8_t *img, size_t len, uint8_t sel,
	       void *out, pf_error *err)
{
	pf_crop_box box = { sel & 7, (sel >> 3) & 7, 1 + (sel & 31), 1 + ((sel >> 2) & 31) };

	if (sel & 0x80)
		return pf_image_transform_box(spec, img, len, &box, sel & 1, (sel >> 5) & 3 ? 1 << ((sel >> 5) & 3) : 0,
					      out, &scratch, NULL, err);
	return pf_image_transform(spec, img, len, sel, sel >> 4, sel * 7u, out, &scratch, NULL,
				  err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const pf_image_augment augments[] = { PF_AUGMENT_RESIZE, PF_AUGMENT_TRAIN,
						     PF_AUGMENT_EVAL, PF_AUGMENT_TRAIN };
	pf_image_spec spec;
	pf_image_info info;
	pf_error err, err2;
	uint8_t *out, *again;
	size_t n;
	int rc, rc2, prc;

	if (size < 2)
		return 0;
	pf_image_spec_init(&spec, 1 + data[0] % 40, 1 + (data[0] >> 3) % 40,
			   augments[data[1] & 3]);
	spec.channels = data[1] & 4 ? 1 : 3;
	spec.nchw = data[1] & 8;
	spec.dtype = (pf_image_dtype)((data[1] >> 4) % 3);
	spec.max_pixels = 4u << 20;
	n = pf_image_out_bytes(&spec);
	out = malloc(n);
	again = malloc(n);
	CHECK(out && again);
	rc = run(&spec, data + 2, size - 2, data[1], out, &err);
	CHECK(rc == 0 || rc == -EBADMSG || rc == -EFBIG || rc == -ENOMEM || rc == -EINVAL);
	if (rc) {
		CHECK(err.code == rc && err.msg[0]);
		CHECK(err.offset_kind != PF_OFFSET_STREAM || err.offset <= size - 2);
	}
	/* -EINVAL only for a box outside the image (transform_box). */
	CHECK(rc != -EINVAL || (data[1] & 0x80));
	rc2 = run(&spec, data + 2, size - 2, data[1], again, &err2);
	CHECK(rc2 == rc);
	CHECK(rc || !memcmp(out, again, n));
	prc = pf_image_probe(data + 2, size - 2, &info, &err2);
	if (prc)
		CHECK(rc != 0);
	free(out);
	free(again);
	pf_image_scratch_free(&scratch);
	return 0;
}
