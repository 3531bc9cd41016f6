/* SPDX-License-Identifier: Apache-2.0 */
/* image_ref: transform/'s image path on one file, its pixels to stdout, for
 * the Python tests to compare with PIL and torchvision.
 * usage:
 *   image_ref full FILE CHANNELS            whole image, as decoded
 *   image_ref box FILE X Y W H OUT_W OUT_H CHANNELS FLIP DCT
 *   image_ref transform FILE AUGMENT OUT_H OUT_W SEED EPOCH PLACE
 * box and transform also print "x y w h flip dct upscaled" on stderr;
 * a failure prints the error line on stderr and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf_transform.h"

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*len = (size_t)n;
	}
	fclose(f);
	return buf;
}

static unsigned long num(const char *s)
{
	return strtoul(s, NULL, 10);
}

int main(int argc, char **argv)
{
	pf_image_scratch scratch = { 0 };
	pf_image_note note;
	pf_image_spec spec;
	pf_image_info info;
	pf_error err;
	char line[PF_ERROR_LINE_MAX];
	uint8_t *data, *out = NULL;
	size_t len = 0, out_len = 0;
	int rc = -1;

	if (argc < 4 || !(data = slurp(argv[2], &len))) {
		fputs("usage: image_ref full|box|transform FILE ...\n", stderr);
		return 2;
	}
	memset(&note, 0, sizeof(note));
	if (!strcmp(argv[1], "full") && argc == 4) {
		rc = pf_image_probe(data, len, &info, &err);
		if (!rc) {
			out_len = (size_t)info.width * info.height * num(argv[3]);
			out = malloc(out_len ? out_len : 1);
			rc = pf_image_decode_full(data, len, (uint32_t)num(argv[3]),
						  PF_IMAGE_DEFAULT_MAX_PIXELS, out, out_len,
						  &scratch, &err);
		}
	} else if (!strcmp(argv[1], "box") && argc == 12) {
		pf_crop_box box = { (uint32_t)num(argv[3]), (uint32_t)num(argv[4]),
				    (uint32_t)num(argv[5]), (uint32_t)num(argv[6]) };

		pf_image_spec_init(&spec, (uint32_t)num(argv[8]), (uint32_t)num(argv[7]),
				   PF_AUGMENT_RESIZE);
		spec.channels = (uint32_t)num(argv[9]);
		out_len = pf_image_out_bytes(&spec);
		out = malloc(out_len);
		rc = pf_image_transform_box(&spec, data, len, &box, num(argv[10]) != 0,
					    (uint32_t)num(argv[11]), out, &scratch, &note, &err);
	} else if (!strcmp(argv[1], "transform") && argc == 9) {
		pf_image_augment a = !strcmp(argv[3], "train") ? PF_AUGMENT_TRAIN
				   : !strcmp(argv[3], "eval") ? PF_AUGMENT_EVAL
				   : PF_AUGMENT_RESIZE;

		pf_image_spec_init(&spec, (uint32_t)num(argv[4]), (uint32_t)num(argv[5]), a);
		out_len = pf_image_out_bytes(&spec);
		out = malloc(out_len);
		rc = pf_image_transform(&spec, data, len, strtoull(argv[6], NULL, 10),
					(uint32_t)num(argv[7]), strtoull(argv[8], NULL, 10), out,
					&scratch, &note, &err);
	} else {
		fputs("usage: image_ref full|box|transform FILE ...\n", stderr);
		free(data);
		return 2;
	}
	if (rc) {
		pf_error_format(&err, line, sizeof(line));
		fprintf(stderr, "%s\n", line);
	} else {
		fwrite(out, 1, out_len, stdout);
		if (strcmp(argv[1], "full"))
			fprintf(stderr, "%u %u %u %u %d %u %d\n", note.box.x, note.box.y,
				note.box.w, note.box.h, note.flipped, note.dct_scale,
				note.upscaled);
	}
	pf_image_scratch_free(&scratch);
	free(out);
	free(data);
	return rc ? 1 : 0;
}
