// SPDX-License-Identifier: Apache-2.0
/* The image decode stage: a record with image features decoded on the
 * worker's thread, its other features through the spec's fast decode,
 * each image through transform/ into its row.  Not here: what an image
 * becomes (transform/), where the row is (placement.c), what a damaged
 * record does to the batch (placement.c, drops.c).
 *
 * An image's crop and flip are drawn from (seed, epoch, the record's
 * place): its file's index in the dataset and its record number in the
 * file, so they are the same at any thread count, host count, and after
 * a resume. */
#include <errno.h>
#include <string.h>

#include "common_internal.h"
#include "pipeline_internal.h"

void pf_images_setup(pf_pipe *l)
{
	memset(&l->rowspec, 0, sizeof(l->rowspec));
	for (uint32_t i = 0; i < l->spec.n; i++) {
		if (pf_spec_image_of(&l->images, i))
			continue;
		l->rowmap[l->rowspec.n] = i;
		l->rowspec.f[l->rowspec.n++] = l->spec.f[i];
	}
}

size_t pf_images_scratch_estimate(const pf_pipe *l)
{
	size_t most = 0;

	/* The resampler's ring and weights for a box up to twice the output
	 * (what DCT scaling leaves; the SIMD passes' weights, 96 bytes an
	 * output column, and sums, 4 a byte), the output, and a decoded row
	 * of an image 4,096 pixels wide: an ImageNet photo's needs are well
	 * inside it. */
	for (uint32_t k = 0; k < l->images.n; k++) {
		const pf_image_spec *s = &l->images.image[k];
		size_t need = (size_t)s->width * s->channels * 8 * 2 +
			      (size_t)(s->width + s->height) * 48 +
			      (size_t)s->width * (96 + s->channels * 4) + 1024 +
			      pf_image_out_bytes(s) + (size_t)4096 * 7 + 4096;

		most = need > most ? need : most;
	}
	return most;
}

/* The place of record `index` of file `file`: distinct for every record
 * of a dataset of fewer than 2^40 records a file. */
static uint64_t place_of(uint32_t file, uint64_t index)
{
	return ((uint64_t)file << 40) ^ index;
}

int pf_images_decode(pf_pipe *l, worker *w, uint32_t file, uint32_t epoch,
		     const pf_record *rec, pf_error *err)
{
	uint8_t *rowdst[PF_SPEC_MAX_FEATURES];
	pf_example ex;
	int ret;

	if (l->rowspec.n) {
		for (uint32_t k = 0; k < l->rowspec.n; k++)
			rowdst[k] = w->dst[l->rowmap[k]];
		ret = pf_spec_decode_unfenced(&l->rowspec, rec->data, (size_t)rec->len,
					      &w->arena, rowdst, err);
		if (ret < 0)
			return ret;
	}
	pf_arena_reset(&w->arena);
	ret = pf_example_decode(rec->data, (size_t)rec->len, &w->arena, &ex, err);
	if (ret < 0)
		return ret;
	for (uint32_t k = 0; k < l->images.n; k++) {
		const pf_image_spec *spec = &l->images.image[k];
		const char *name = l->spec.f[l->images.feature[k]].name;
		const pf_feature *f = pf_example_find(&ex, name);
		pf_image_note note;
		pf_error ierr;
		uint64_t t0, at;

		if (!f)
			return pf_error_set(err, -ENOMSG, PF_OFFSET_NONE, 0,
					    "image feature '%s' is missing from the record", name);
		if (f->kind != PF_KIND_BYTES || f->count < 1)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
					    "image feature '%s' holds %u %s values, not an "
					    "image's bytes", name, f->count,
					    f->kind == PF_KIND_BYTES ? "bytes" :
					    f->kind == PF_KIND_FLOAT ? "float" : "int64");
		t0 = pf_now_ns();
		ret = pf_image_transform(spec, f->v.bytes[0].data, f->v.bytes[0].len,
					 l->cfg.seed, epoch, place_of(file, rec->index),
					 w->dst[l->images.feature[k]], &w->image_scratch, &note,
					 &ierr);
		w->image_ns += pf_now_ns() - t0;
		if (ret < 0) {
			/* The byte in the record's stream: the image's start
			 * in the record, and the decoder's place in it. */
			at = rec->offset + (uint64_t)(f->v.bytes[0].data - rec->data);
			if (ierr.offset_kind == PF_OFFSET_STREAM)
				pf_error_set(err, ret == -ENOMEM ? -ENOMEM : -EBADMSG,
					     PF_OFFSET_STREAM, at + ierr.offset,
					     "image feature '%s' (%u bytes; byte %llu of the "
					     "image): %s", name, f->v.bytes[0].len,
					     (unsigned long long)ierr.offset, ierr.msg);
			else
				pf_error_set(err, ret == -ENOMEM ? -ENOMEM : -EBADMSG,
					     PF_OFFSET_STREAM, at,
					     "image feature '%s' (%u bytes, from the byte named): "
					     "%s", name, f->v.bytes[0].len, ierr.msg);
			return err->code;
		}
		w->images++;
		w->images_upscaled += note.upscaled;
	}
	return 0;
}
