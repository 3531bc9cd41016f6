/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed transforms: what a record's feature becomes beyond fixed rows
 * (images: decode, crop, flip, resize; the packer of token lists).  Not installed: the loader and the
 * tools use it; its functions are not exported. */
#ifndef PF_TRANSFORM_H
#define PF_TRANSFORM_H

/*
 * Pure computation over caller memory, as formats/: no I/O, no threads, no
 * global state.  Each transform is a pure function of its input bytes and
 * of (seed, epoch, the record's place), so that a resumed run, or one at
 * another thread count, makes the same bytes.
 *
 * Errors: -EBADMSG the input is damaged or not an image (err names the
 * byte where known and the decoder's own message), -EFBIG an image over
 * the pixel limit, -ENOMEM, -EINVAL a bad spec.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "pf_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Images                                                               */
/* ------------------------------------------------------------------ */

typedef enum pf_image_format {
	PF_IMAGE_UNKNOWN = 0,
	PF_IMAGE_JPEG,
	PF_IMAGE_PNG,
} pf_image_format;

/* How the crop box of a record is chosen. */
typedef enum pf_image_augment {
	PF_AUGMENT_RESIZE = 0,	/* the whole image to [H, W] */
	PF_AUGMENT_TRAIN,	/* random-resized crop and flip */
	PF_AUGMENT_EVAL,	/* shorter side to H / 0.875, center crop */
} pf_image_augment;

typedef enum pf_image_dtype {
	PF_IMAGE_UINT8 = 0,
	PF_IMAGE_FLOAT32,	/* (v / 255 - mean) / std */
	PF_IMAGE_BFLOAT16,	/* the same, rounded to bfloat16 (nearest even) */
} pf_image_dtype;

#define PF_IMAGE_MAX_SIDE 16384u	/* of the output */
#define PF_IMAGE_DEFAULT_MAX_PIXELS (64ull << 20)

/* One image feature: what comes out, and how. */
typedef struct pf_image_spec {
	uint32_t height, width;
	uint32_t channels;		/* 3 (RGB) or 1 (luma) */
	pf_image_augment augment;
	bool nchw;			/* [C, H, W] per record, else [H, W, C] */
	pf_image_dtype dtype;
	float mean[3], std[3];		/* float outputs: in 0..1 units */
	double scale_lo, scale_hi;	/* train: crop area over image area */
	double ratio_lo, ratio_hi;	/* train: crop width over height */
	bool flip;			/* train: mirror with probability 1/2 */
	uint64_t max_pixels;		/* larger images are refused (-EFBIG) */
} pf_image_spec;

/*! The defaults of an image feature of [height, width]: 3 channels, NHWC
 *  uint8, scale 0.08..1, ratio 3/4..4/3, flip, 64 megapixels. */
void pf_image_spec_init(pf_image_spec *s, uint32_t height, uint32_t width,
			pf_image_augment augment);
/*! Bytes of one record's output. */
size_t pf_image_out_bytes(const pf_image_spec *s);
/*! The spec checked: sizes, channels, ranges.  @return 0 or -EINVAL with
 *  err saying which value. */
int pf_image_spec_check(const pf_image_spec *s, pf_error *err);

/* What the header of an image says. */
typedef struct pf_image_info {
	pf_image_format format;
	uint32_t width, height;
	uint32_t components;		/* in the file: 1 gray, 3, 4 (CMYK/RGBA) */
	bool progressive;		/* JPEG progressive, PNG interlaced */
	const char *color;		/* "gray", "rgb", "ycbcr", "cmyk", "ycck",
					   "palette", "gray+alpha", "rgba" */
} pf_image_info;

/*! The format from the first bytes (JPEG's FF D8 FF, PNG's signature). */
pf_image_format pf_image_sniff(const void *data, size_t len);
const char *pf_image_format_name(pf_image_format f);
/*! Read the header only.  @return 0, or -EBADMSG (not an image, damaged
 *  header; err says what and where). */
int pf_image_probe(const void *data, size_t len, pf_image_info *info, pf_error *err);

/* A crop box in the image's pixels. */
typedef struct pf_crop_box {
	uint32_t x, y, w, h;
} pf_crop_box;

/*! The random-resized crop of torchvision's RandomResizedCrop.get_params()
 *  (the Inception rule): up to 10 draws of an area in [scale_lo, scale_hi]
 *  of the image's and a log-uniform aspect in [ratio_lo, ratio_hi], w and
 *  h rounded half to even; the first that fits is placed uniformly; after
 *  10 misses the center crop of the whole image clamped to the ratio
 *  range.  Draws from a stream seeded by (seed, epoch, place). */
void pf_image_crop_train(uint32_t img_w, uint32_t img_h, double scale_lo, double scale_hi,
			 double ratio_lo, double ratio_hi, uint64_t seed, uint32_t epoch,
			 uint64_t place, pf_crop_box *box, bool *flip);

/* Scratch of one thread: grown as images need, freed by
 * pf_image_scratch_free(); peak says its largest size. */
typedef struct pf_image_scratch {
	uint8_t *mem;
	size_t cap;
	size_t peak;
} pf_image_scratch;

void pf_image_scratch_free(pf_image_scratch *s);

/* What a transform did, for the loader's counts. */
typedef struct pf_image_note {
	pf_image_info info;
	pf_crop_box box;		/* in the image's pixels */
	bool flipped;
	bool upscaled;			/* the box was smaller than the output */
	uint32_t dct_scale;		/* 1, 2, 4 or 8: JPEG's DCT scaling */
} pf_image_note;

/*! pf_image_transform(): decode the image data[0..len), choose its box
 *  and flip from spec and (seed, epoch, place), resize the box to the
 *  output with PIL's antialiased bilinear filter, and write
 *  pf_image_out_bytes(spec) bytes to dst.  Only the box's rows and columns
 *  are decoded (JPEG: from the first row of the box's iMCU row, columns
 *  from its iMCU column); a JPEG box at least twice the output is decoded
 *  at 1/2, 1/4 or 1/8 scale.  note may be NULL.  @return 0, -EBADMSG,
 *  -EFBIG, -ENOMEM (scratch could not grow).  Thread-safe with distinct
 *  scratches. */
int pf_image_transform(const pf_image_spec *spec, const void *data, size_t len,
		       uint64_t seed, uint32_t epoch, uint64_t place, void *dst,
		       pf_image_scratch *scratch, pf_image_note *note, pf_error *err);

/*! The same with a box (and flip) given, in the image's pixels: what the
 *  tests compare with PIL.  dct_scale 0 chooses as above, 1 forbids
 *  scaling. */
int pf_image_transform_box(const pf_image_spec *spec, const void *data, size_t len,
			   const pf_crop_box *box, bool flip, uint32_t dct_scale, void *dst,
			   pf_image_scratch *scratch, pf_image_note *note, pf_error *err);

/*! The whole image decoded to channels (3 or 1) in dst (w * h *
 *  channels bytes, w and h from pf_image_probe()): the decoders' output
 *  as PIL's Image.open(...).convert("RGB" or "L") would give it. */
int pf_image_decode_full(const void *data, size_t len, uint32_t channels, uint64_t max_pixels,
			 void *dst, size_t cap, pf_image_scratch *scratch, pf_error *err);

/* PIL's RGB to "L": (R * 19595 + G * 38470 + B * 7471 + 0x8000) >> 16,
 * n pixels, in place is fine (dst <= src). */
void pf_image_rgb_to_luma(uint8_t *dst, const uint8_t *src, uint32_t n);

/*! pf_image_encode_jpeg(): w x h pixels of components bytes (1 gray, 3
 *  RGB, 4 CMYK written in Adobe's inverted polarity, as PIL writes it) as
 *  a JPEG of quality 1..100, progressive or baseline, into dst[0..cap):
 *  for the tools' synthetic images and the tests.  @return its bytes, or
 *  -ENOBUFS (cap too small), -EINVAL, -ENOMEM with err. */
int64_t pf_image_encode_jpeg(const uint8_t *px, uint32_t w, uint32_t h, uint32_t components,
			     int quality, bool progressive, void *dst, size_t cap,
			     pf_error *err);

/* ------------------------------------------------------------------ */
/* The packer (transform/pack.c)                                        */
/* ------------------------------------------------------------------ */
/*
 * Packing puts several records' token lists into rows of L values, as
 * seqio's trim_and_pack, Grain's first-fit packing or a GPT-style
 * concatenate-and-chunk do.  A record has up to PF_PACKER_MAX_FEATURES
 * packed features (inputs, targets, ...), each of its own length; a row
 * holds L values of each.  The packer is a pure function of the records'
 * lengths in order: it says where each record goes (its pieces: row,
 * offset, segment id, the values of the record that go there), and the
 * caller copies the values (pf_pack_copy()).  Rows are numbered from 0
 * in the order they are opened, which is also the order they close, so
 * a row's number is its place in the output.
 *
 *   PF_PACKER_FIRST_FIT  a record goes whole into the first open row (of at
 *                      most `pool`, the oldest first) with room for every
 *                      one of its features; when none has room and the
 *                      pool is full, the oldest row closes and a new one
 *                      opens at the end.  A feature longer than L is cut
 *                      to L, and the record counted as truncated.
 *   PF_PACKER_CONCAT     the records' values one after the other, cut into
 *                      rows of exactly L: a record may go on in the next
 *                      row (its positions go on too; its segment id there
 *                      is that row's).  Only the last row has padding.
 *                      A record's packed features must be of one length.
 *
 * Segment ids are 1, 2, ... for the records of a row in the order they
 * went in (0 is padding); positions are 0 .. n-1 inside each record.
 * A record of no values in every feature goes nowhere and is counted.
 */
#define PF_PACKER_MAX_FEATURES 16u
#define PF_PACKER_POOL_MAX 64u
#define PF_PACKER_POOL_DEFAULT 8u
#define PF_PACKER_LENGTH_MAX (1u << 20)

typedef enum pf_packer_mode {
	PF_PACKER_FIRST_FIT = 0,
	PF_PACKER_CONCAT,
} pf_packer_mode;

/* An open row: its number and its fill of each feature. */
typedef struct pf_pack_row {
	uint64_t id;
	uint32_t segments;
	uint32_t fill[PF_PACKER_MAX_FEATURES];
} pf_pack_row;

/* The packer: plain data, the caller's (no allocation).  What it has
 * counted is the caller's to read. */
typedef struct pf_packer {
	uint32_t length;		/* L */
	uint32_t nfeatures;
	uint32_t pool;			/* open rows at most (first_fit) */
	pf_packer_mode mode;
	pf_pack_row open[PF_PACKER_POOL_MAX];	/* oldest first */
	uint32_t nopen;
	uint64_t next_row;		/* the number the next row opened gets */
	/* Counts (values: summed over the features) */
	uint64_t records;		/* placed */
	uint64_t values;		/* placed (after truncation) */
	uint64_t empty_records;		/* of no values: placed nowhere */
	uint64_t truncated_records;	/* first_fit: longer than L */
	uint64_t truncated_values;	/* the values cut off them */
} pf_packer;

/* Where a record (or a part of it) goes: row `row`, feature f's values
 * [from, from + count[f]) of the record at offsets at[f] ... of the row,
 * with segment id `segment`. */
typedef struct pf_pack_piece {
	uint64_t row;
	uint32_t segment;
	uint32_t from;
	uint32_t at[PF_PACKER_MAX_FEATURES];
	uint32_t count[PF_PACKER_MAX_FEATURES];
} pf_pack_piece;

/*! pf_packer_init(): an empty packer of rows of length values for
 *  nfeatures features; pool 0: PF_PACKER_POOL_DEFAULT.  @return 0, or
 *  -EINVAL with err saying which setting is out of range (length
 *  1..PF_PACKER_LENGTH_MAX, nfeatures 1..PF_PACKER_MAX_FEATURES, pool
 *  1..PF_PACKER_POOL_MAX, the mode). */
int pf_packer_init(pf_packer *p, uint32_t length, uint32_t nfeatures,
			  pf_packer_mode mode, uint32_t pool, pf_error *err);

/*! pf_pack_place(): place the next record, whose feature f holds len[f]
 *  values, writing its pieces to pieces[0 .. cap) (first_fit: one;
 *  concat: at most 1 + (largest len - 1) / L + 1; 0 for an empty record).
 *  Rows numbered below *closed (set on return) will take nothing more:
 *  they are final.  @return the pieces, or -EINVAL (concat: the features'
 *  lengths differ; err names them), -ENOBUFS (cap too small). */
int pf_pack_place(pf_packer *p, const uint32_t *len, pf_pack_piece *pieces,
			 uint32_t cap, uint64_t *closed, pf_error *err);

/*! pf_pack_finish(): close every open row (the end of the records).
 *  @return the rows made since pf_packer_init(): all of them final. */
uint64_t pf_pack_finish(pf_packer *p);

/*! pf_pack_copy(): feature f of piece pc into its row: values
 *  src[from .. from + count) (elements of elem bytes) to row[at ..],
 *  segment ids seg[at ..] = segment, positions pos[at ..] = from, from +
 *  1, ...  (seg and pos may be NULL).  The row's other places are the
 *  caller's (padding: pad, 0, 0). */
void pf_pack_copy(const pf_pack_piece *pc, uint32_t f, const void *src, size_t elem,
			 void *row, int32_t *seg, int32_t *pos);

#ifdef __cplusplus
}
#endif

#endif /* PF_TRANSFORM_H */
