/* SPDX-License-Identifier: Apache-2.0 */
/* image_ref: transform/'s image path on one file, its pixels to stdout, for
 * the Python tests to compare with PIL and torchvision.
 * usage:
 *   image_ref full FILE CHANNELS            whole image, as decoded
 *   image_ref box FILE X Y W H OUT_W OUT_H CHANNELS FLIP DCT
 *   image_ref transform FILE AUGMENT OUT_H OUT_W SEED EPOCH PLACE
 *   image_ref shard FILE N                  an indexed shard of N records:
 *       'image/encoded' a JPEG (record i: 40+7i%90 x 30+11i%70, gray when
 *       i%5==2), 'image/class/label' i
 * box and transform also print "x y w h flip dct upscaled" on stderr;
 * a failure prints the error line on stderr and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf_formats.h"
#include "pf_transform.h"

static int sink(void *ctx, const void *buf, size_t len)
{
	return fwrite(buf, 1, len, ctx) == len ? 0 : -1;
}

static int write_shard(const char *path, uint32_t n)
{
	pf_shard_writer_config cfg = { .frame_size = 32768 };
	static uint8_t px[200 * 200 * 3], jpeg[1 << 18], rec[1 << 18];
	pf_shard_writer *w;
	pf_error err;
	FILE *f = fopen(path, "wb");

	if (!f || pf_shard_writer_create(&w, &cfg, sink, f) < 0)
		return 1;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t iw = 40 + 7 * i % 90, ih = 30 + 11 * i % 70, comps = i % 5 == 2 ? 1 : 3;
		int64_t label = i, len, rlen;
		pf_bytes img;
		pf_feature feat[2] = {
			{ .name = "image/encoded", .name_len = 13, .kind = PF_KIND_BYTES, .count = 1,
			  .v.bytes = &img },
			{ .name = "image/class/label", .name_len = 17, .kind = PF_KIND_INT64,
			  .count = 1, .v.int64s = &label },
		};

		for (uint32_t k = 0; k < iw * ih * comps; k++)
			px[k] = (uint8_t)(k * 7 + i * 13 + (k / (iw * comps)) * 3);
		len = pf_image_encode_jpeg(px, iw, ih, comps, 90, i % 3 == 1, jpeg, sizeof(jpeg),
					   &err);
		if (len < 0)
			return 1;
		img.data = jpeg;
		img.len = (uint32_t)len;
		rlen = pf_example_encode(feat, 2, rec, sizeof(rec));
		if (rlen < 0 || pf_shard_writer_add(w, rec, (size_t)rlen, &err) < 0)
			return 1;
	}
	if (pf_shard_writer_close(w, &err) < 0)
		return 1;
	pf_shard_writer_free(w);
	return fclose(f) ? 1 : 0;
}

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

	if (argc == 4 && !strcmp(argv[1], "shard"))
		return write_shard(argv[2], (uint32_t)num(argv[3]));
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
