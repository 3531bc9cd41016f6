/* SPDX-License-Identifier: Apache-2.0 */
/* Private to loader/: the spec room (loader/spec/): the feature spec.  Its
 * text and row layout (spec_text.c, with the image type's options in
 * spec_image.c), an example's values into the spec's dtypes and lengths
 * (spec_apply.c), the fast decode of a record's wire bytes into a row
 * (spec_fast.c), and a record's packed lengths (spec_lengths.c).  What
 * the files share, so that both decode paths preprocess with the very
 * same code.  No I/O, no threads: it sits beside transform/, which it
 * calls for images, and every room above may use it. */
#ifndef PF_SPEC_INTERNAL_H
#define PF_SPEC_INTERNAL_H

#include <string.h>

#include "podfeed.h"
#include "pf_transform.h"

/* 2^63 and 2^31 as doubles: the first values outside int64 / int32. */
#define PF_TWO63 9223372036854775808.0
#define PF_TWO31 2147483648.0

/* v rounded up to a multiple of a (a power of two): a feature's offset in
 * a row is one of its dtype size, a row's length one of 8. */
static inline size_t pf_spec_align(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* The range integer values of fs are clamped to: the dtype's, or the
 * clip's (int32/int64 dtypes). */
void pf_spec_int_bounds(const pf_feature_spec *fs, int64_t *lo, int64_t *hi);
/* Values [n, fs->len) of out set to the pad. */
void pf_spec_pad_from(const pf_feature_spec *fs, uint8_t *out, uint32_t n);
/* One feature (f NULL: absent) into out, as pf_spec_apply_to() does it.
 * @return 0, or -ENOMSG (missing, no default) or -EBADMSG (wrong kind)
 * with err. */
int pf_spec_apply_one(const pf_feature_spec *fs, const pf_feature *f,
		      uint8_t *out, pf_error *err);

/* Check spec against a schema of n features inferred from `records`
 * records (a shard's index, or a manifest's merged schema) of the file
 * path (whose: "shard's", "manifest's", for the message): every feature
 * without a default must be in every record.
 * @return 0 (also when there is no schema), or -ENOMSG with err naming
 * the feature, the file and the schema's features (and a near name). */
int pf_spec_check_schema(const pf_spec *spec, const pf_feature_schema *schema, size_t n,
			 uint64_t records, const char *path, const char *whose,
			 pf_error *err);

/* pf_spec_decode() without its closing store fence: rows it streamed
 * (non-temporal stores) may not yet be visible to other threads.  The
 * loader decodes a chunk's records this way and calls pf_spec_fence()
 * once before it publishes them. */
int pf_spec_decode_unfenced(const pf_spec *spec, const void *rec, size_t len,
			    pf_arena *arena, uint8_t *const dst[], pf_error *err);
void pf_spec_fence(void);

/* ------------------------------------------------------------------ */
/* Image features (spec_image.c): `name:image[H,W]:options`.  The public
 * pf_spec holds an image feature as the tensor it fills (bytes or
 * float32 of H x W x C values: pf_spec_image_tensor()); what to do to the
 * record is here, beside it, for the loader. */

#define PF_SPEC_IMAGE_MAX_BYTES (1u << 28)

typedef struct pf_spec_images {
	uint32_t n;				/* image features */
	uint32_t feature[PF_SPEC_MAX_FEATURES];	/* their index in the spec */
	pf_image_spec image[PF_SPEC_MAX_FEATURES];
} pf_spec_images;

/* The text after `image` at s[*pos] ('[') up to the feature's end (',' or
 * the end of s) into *out; *pos moved there.  @return 0, or -EINVAL with
 * why (cap bytes) and *at the byte it is about. */
int pf_spec_image_parse(const char *s, size_t *pos, pf_image_spec *out, char *why,
			size_t cap, size_t *at);
void pf_spec_image_tensor(const pf_image_spec *sp, pf_feature_spec *fs);

/* pf_spec_parse() keeping the image features' specs in *images (NULL:
 * dropped, the tensors kept). */
int pf_spec_parse_images(pf_spec *spec, pf_spec_images *images, const char *text,
			 pf_error *err);

/* The image feature of spec index i, or NULL. */
static inline const pf_image_spec *pf_spec_image_of(const pf_spec_images *im, uint32_t i)
{
	for (uint32_t k = 0; im && k < im->n; k++)
		if (im->feature[k] == i)
			return &im->image[k];
	return NULL;
}
/* Feature i's shape and element type, as pf_loader_feature_shape() says
 * them (images: NULL, or the image features of spec).  @return its
 * dimensions (1, or 3 for an image), or -EINVAL. */
int pf_spec_feature_shape(const pf_spec *spec, const pf_spec_images *images, uint32_t i,
			  uint32_t shape[3], const char **elem, uint32_t *elem_size);
/* Lay out spec's rows again (row_bytes) after its features changed. */
void pf_spec_layout(pf_spec *spec);
/* Whether a spec's rows are mostly never written (a feature not padded:
 * packing's inner rows), for pf_pool_alloc_sparse(). */
static inline bool pf_spec_sparse(const pf_spec *spec)
{
	for (uint32_t i = 0; i < spec->n; i++)
		if (spec->f[i].nopad)
			return true;
	return false;
}
/* Insert a made feature (role) right after feature parent, named the
 * parent's name and suffix.  @return 0, or -EINVAL with err (no room, the
 * name too long or taken). */
int pf_spec_add_made(pf_spec *spec, uint32_t parent, pf_feature_role role,
		     const char *suffix, pf_dtype dtype, uint32_t len, pf_error *err);
/* A made feature of role LENGTHS(_FULL) into out: n, the parent's length
 * in the record, capped at the parent's len unless FULL. */
static inline void pf_spec_store_length(const pf_feature_spec *parent,
					const pf_feature_spec *fs, uint64_t n, uint8_t *out)
{
	int32_t v;

	if (fs->role == PF_ROLE_LENGTHS && n > parent->len)
		n = parent->len;
	v = n > INT32_MAX ? INT32_MAX : (int32_t)n;
	memcpy(out, &v, sizeof(v));
}
/* A made feature without a record's part (segment ids, positions: the
 * packer's): zeros. */
void pf_spec_apply_made(const pf_spec *spec, uint32_t i, const pf_feature *parent,
			uint8_t *out);

/* ------------------------------------------------------------------ */
/* Packed lengths (spec_lengths.c): each record's value count of each
 * packed feature, as varints, a record's features one after another:
 * what packing plans its rows from (loader/pack/), measured when a
 * stream file is counted (loader/dataset/count.c) or read for them. */

typedef struct pf_lenbuf {
	uint8_t *p;
	size_t len, cap;
} pf_lenbuf;

/*! Append v as a varint.  @return 0 or -ENOMEM. */
int pf_lenbuf_put(pf_lenbuf *b, uint32_t v);
/*! Append n bytes.  @return 0 or -ENOMEM. */
int pf_lenbuf_bytes(pf_lenbuf *b, const void *p, size_t n);
/* Scratch of one thread measuring records (pf_lengths_measure()). */
typedef struct pf_len_scratch {
	pf_arena arena;
	uint8_t *row;
} pf_len_scratch;
void pf_len_scratch_free(pf_len_scratch *s);
/*! Decode rec with lspec (packing's lengths spec: feature 2k the k-th
 *  packed feature, one value; 2k + 1 its full length) and append its
 *  lengths to out.  @return 0, or <0 with err (the spec's error: a
 *  record that is not an Example, a packed feature missing). */
int pf_lengths_measure(const pf_spec *lspec, const pf_record *rec, pf_len_scratch *s,
		       pf_lenbuf *out, pf_error *err);
/*! The spec that measures the nf packed features of user (the first nf,
 *  as parsed): feature 2k the k-th with one value, 2k + 1 its full
 *  length.  @return 0 or <0 with err. */
int pf_spec_lengths(const pf_spec *user, uint32_t nf, pf_spec *out, pf_error *err);

#endif
