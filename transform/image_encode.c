// SPDX-License-Identifier: Apache-2.0
/* JPEG encoding through libjpeg-turbo, for synthetic data (shardtool synth
 * --kind images) and the tests; the loader never encodes. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "image_internal.h"


int64_t pf_image_encode_jpeg(const uint8_t *px, uint32_t w, uint32_t h, uint32_t components,
			     int quality, bool progressive, void *dst, size_t cap,
			     pf_error *err)
{
	struct jpeg_compress_struct cinfo;
	pf_jpeg_guard g;
	unsigned char *volatile mem = NULL;
	uint8_t *volatile row = NULL;
	unsigned long size = 0;
	volatile int64_t rc = 0;

	pf_error_clear(err);
	if ((components != 1 && components != 3 && components != 4) || w == 0 || h == 0 ||
	    w > 65500 || h > 65500 || quality < 1 || quality > 100)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "JPEG encode: %ux%u of %u components at quality %d", w, h,
				    components, quality);
	memset(&cinfo, 0, sizeof(cinfo));
	cinfo.err = jpeg_std_error(&g.pub);
	g.pub.error_exit = pf_jpeg_on_error;
	if (setjmp(g.jump)) {
		rc = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "JPEG encode: %s", g.msg);
		goto out;
	}
	jpeg_create_compress(&cinfo);
	jpeg_mem_dest(&cinfo, (unsigned char **)&mem, &size);
	cinfo.image_width = w;
	cinfo.image_height = h;
	cinfo.input_components = (int)components;
	cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB
									      : JCS_CMYK;
	jpeg_set_defaults(&cinfo);
	jpeg_set_quality(&cinfo, quality, TRUE);
	if (progressive)
		jpeg_simple_progression(&cinfo);
	jpeg_start_compress(&cinfo, TRUE);
	if (components == 4) {
		/* PIL's polarity: what is stored is 255 - ink. */
		row = malloc((size_t)w * 4);

		if (!row) {
			rc = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "JPEG encode: no memory");
			jpeg_abort_compress(&cinfo);
			goto out;
		}
		while (cinfo.next_scanline < h) {
			JSAMPROW r[1] = { row };

			for (size_t i = 0; i < (size_t)w * 4; i++)
				row[i] = (uint8_t)(255 - px[(size_t)cinfo.next_scanline * w * 4 + i]);
			jpeg_write_scanlines(&cinfo, r, 1);
		}
	} else {
		while (cinfo.next_scanline < h) {
			JSAMPROW r[1] = { (JSAMPROW)(px + (size_t)cinfo.next_scanline * w *
							     components) };

			jpeg_write_scanlines(&cinfo, r, 1);
		}
	}
	jpeg_finish_compress(&cinfo);
	if (size > cap) {
		rc = pf_error_set(err, -ENOBUFS, PF_OFFSET_NONE, 0,
				  "JPEG encode: %lu bytes, room for %zu", size, cap);
		goto out;
	}
	memcpy(dst, mem, size);
	rc = (int64_t)size;
out:
	jpeg_destroy_compress(&cinfo);
	/* jpeg_mem_dest()'s buffer is libjpeg's malloc(). */
	free(mem);
	free(row);
	return rc;
}
