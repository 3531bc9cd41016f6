/* SPDX-License-Identifier: Apache-2.0 */
/* Private to transform/: the image decoders' table and the resampler that
 * the decoders feed row by row (image.c joins them). */
#ifndef PF_IMAGE_INTERNAL_H
#define PF_IMAGE_INTERNAL_H

#include "pf_transform.h"

/* The region of an image a decoder is asked for, in the pixels of the
 * image scaled by 1/scale (JPEG's DCT scaling: the scaled image is
 * ceil(width / scale) x ceil(height / scale)). */
typedef struct pf_image_request {
	uint32_t x, y, w, h;
	uint32_t scale;		/* 1, 2, 4, 8; 1 for decoders without scaling */
	uint32_t channels;	/* 3: RGB, 1: luma (PIL's "L") */
	uint64_t max_pixels;	/* the limit (libjpeg's own memory is bounded by it) */
} pf_image_request;

/* The decoder hands the region's rows top to bottom: row r (0 .. h-1) is
 * w pixels of channels bytes.  A nonzero return stops the decode and is
 * returned. */
typedef int (*pf_image_row_fn)(void *ctx, uint32_t row, const uint8_t *pixels);

/* One image format: a const table (STYLE.md, "Back-ends are tables"). */
typedef struct pf_image_decoder {
	pf_image_format format;
	const char *name;
	bool dct_scaling;	/* can decode at 1/2, 1/4, 1/8 */
	/* The header: size, components.  -EBADMSG with err. */
	int (*probe)(const uint8_t *data, size_t len, pf_image_info *info, pf_error *err);
	/* Scratch bytes decode() needs for req (besides what the decoder's
	 * library allocates itself). */
	size_t (*scratch_bytes)(const pf_image_info *info, const pf_image_request *req);
	/* The region's rows to row(); scratch has scratch_bytes() bytes. */
	int (*decode)(const uint8_t *data, size_t len, const pf_image_info *info,
		      const pf_image_request *req, uint8_t *scratch, pf_image_row_fn row,
		      void *ctx, pf_error *err);
} pf_image_decoder;

extern const pf_image_decoder pf_image_jpeg;
extern const pf_image_decoder pf_image_png;

/* The decoder of a format, NULL for PF_IMAGE_UNKNOWN. */
const pf_image_decoder *pf_image_decoder_for(pf_image_format f);

/* eval's box, in the image's (fractional) pixels: x0, y0, x1, y1 of
 * torchvision's Resize(int(out_h / 0.875)) then CenterCrop((out_h,
 * out_w)), so that resizing it to the output is the two in one pass; and
 * where in the output it goes (place: the whole output, unless the
 * output is wider or taller than the resized image: then CenterCrop pads
 * that side with zeros, and the resized image fills only place). */
void pf_image_crop_eval(uint32_t img_w, uint32_t img_h, uint32_t out_w, uint32_t out_h,
			double box[4], pf_crop_box *place);


/* libjpeg's error manager that jumps back with the message (decode and
 * encode share it): pf_jpeg_on_error() formats the message into msg and
 * longjmp()s to jump. */
#include <setjmp.h>
#include <stdio.h>
#include <jpeglib.h>

typedef struct pf_jpeg_guard {
	struct jpeg_error_mgr pub;
	jmp_buf jump;
	char msg[JMSG_LENGTH_MAX];
} pf_jpeg_guard;

void pf_jpeg_on_error(j_common_ptr cinfo);

/* ------------------------------------------------------------------ */
/* The resampler: PIL's ImagingResample with its bilinear filter, in its
 * fixed point (22 fractional bits), horizontal pass first, then vertical,
 * so that the output equals Image.resize(size, BILINEAR, box) on the same
 * source.  Rows come in one at a time (pf_resampler_push()); the vertical
 * pass keeps a ring of the horizontally resized rows its window needs,
 * so memory is that ring, not the image.  A flip mirrors the horizontal
 * pass's output columns (the vertical pass is the same on every column).
 *
 * The source is a region of src_w x src_h pixels (the filter clamps at
 * its edges, as PIL's at an image's); box is the part of it resized to
 * out_w x out_h, in the region's pixels (fractional).
 *
 * The passes run on one of pf_resize_paths (AVX2, SSE2, scalar: chosen
 * once from the CPU, PODFEED_SIMD naming one), every one of them the same
 * integer sums, so the same bytes (tests/transform/test_transform_resize.c). */
struct pf_resampler;

/* PRECISION_BITS of Pillow's Resample.c: the weights' fraction. */
#define PF_RESIZE_BITS 22
/* The SIMD paths multiply 16-bit numbers (pmaddwd): a 22-bit weight k is
 * k_hi * 2^15 + k_lo, both summed apart and joined, exactly. */
#define PF_RESIZE_SPLIT 15

typedef struct pf_resize_ops {
	const char *name;
	bool (*supported)(void);
	/* One source row (channels 3) into the ring's slot dst. */
	void (*horizontal3)(const struct pf_resampler *r, const uint8_t *px, uint8_t *dst);
	/* Output row yy from the ring's rows. */
	void (*vertical)(const struct pf_resampler *r, uint32_t yy);
} pf_resize_ops;

/* Best first, ended by a NULL name. */
extern const pf_resize_ops pf_resize_paths[];
/* The path pf_resampler_init() takes (the best the CPU has, or
 * PODFEED_SIMD's if the CPU has it, else the best below it). */
const pf_resize_ops *pf_resize_path(void);

/* The scalar passes (the other paths' tails and non-x86 machines). */
void pf_resize_h3_scalar(const struct pf_resampler *r, const uint8_t *px, uint8_t *dst,
			 uint32_t from);
void pf_resize_v_scalar(const struct pf_resampler *r, uint32_t yy, size_t from);
#if defined(__x86_64__)
bool pf_resize_have_avx2(void);
void pf_resize_h3_avx2(const struct pf_resampler *r, const uint8_t *px, uint8_t *dst);
void pf_resize_v_avx2(const struct pf_resampler *r, uint32_t yy);
void pf_resize_h3_sse2(const struct pf_resampler *r, const uint8_t *px, uint8_t *dst);
void pf_resize_v_sse2(const struct pf_resampler *r, uint32_t yy);
#endif

typedef struct pf_resampler {
	uint32_t src_w, src_h, out_w, out_h, channels;
	uint32_t ksize_h, ksize_v;
	int32_t *bounds_h, *bounds_v;	/* [out][2]: first source pixel, count */
	int32_t *k_h, *k_v;		/* [out][ksize] fixed-point weights */
	/* The SIMD paths' horizontal weights: for output pixels 2j, 2j+1
	 * and their taps 2p, 2p+1, 64 bytes at ((j * pairs16_h) + p) * 64:
	 * k_hi of pixel 2j, k_hi of 2j+1, k_lo of 2j, k_lo of 2j+1, each 8
	 * int16 (k0 k1 k0 k1 k0 k1 0 0: R, G, B and a zero lane).  Past a
	 * pixel's taps the weights are 0. */
	int16_t *k16_h;
	uint32_t pairs_h;		/* tap pairs of the widest output pixel */
	uint32_t pairs16_h;		/* pairs_h rounded up to even */
	uint32_t taps_v;		/* taps of the tallest output row */
	/* Output pixels 0 .. simd_w - 1 (even): their loads (8 bytes a tap
	 * pair, or 16 bytes a 4 taps) stay inside the row; the others go
	 * through the scalar code. */
	uint32_t simd_w;
	uint32_t first_col, cols;	/* source columns the filter reads */
	uint32_t first_row, rows;	/* source rows the filter reads */
	uint8_t *ring;			/* ksize_v rows of out_w * channels */
	size_t ring_stride;		/* bytes from a ring row to the next */
	int32_t *acc;			/* out_w * channels sums (scalar pass) */
	uint32_t next_out;		/* output rows written */
	uint32_t rows_in;		/* source rows pushed (from first_row) */
	bool flip;			/* output columns mirrored */
	uint8_t *out;			/* out_h rows of out_w * channels */
	size_t out_stride;		/* bytes from an output row to the next
					 * (out_w * channels unless set after
					 * pf_resampler_init()) */
	const pf_resize_ops *ops;	/* the passes' code */
} pf_resampler;

/* Bytes pf_resampler_init() carves out of its memory. */
size_t pf_resampler_bytes(uint32_t src_w, uint32_t src_h, double x0, double y0, double x1,
			  double y1, uint32_t out_w, uint32_t out_h, uint32_t channels);
/* Set up in mem (pf_resampler_bytes() bytes, 8-aligned).  After it,
 * first_row/rows and first_col/cols say which source pixels to push. */
void pf_resampler_init(pf_resampler *r, void *mem, uint32_t src_w, uint32_t src_h, double x0,
		       double y0, double x1, double y1, uint32_t out_w, uint32_t out_h,
		       uint32_t channels, bool flip, uint8_t *out);
/* Source row first_row + rows_in: pixels first_col .. first_col + cols - 1
 * at px (channels bytes each).  Writes every output row it completes. */
void pf_resampler_push(pf_resampler *r, const uint8_t *px);
/* True once every output row is written. */
static inline bool pf_resampler_done(const pf_resampler *r)
{
	return r->next_out == r->out_h;
}

/* The ring's row of source row s (from the region's top). */
static inline uint8_t *pf_resampler_slot(const pf_resampler *r, uint32_t s)
{
	return r->ring + (size_t)(s % r->ksize_v) * r->ring_stride;
}

#endif
