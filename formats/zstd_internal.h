/* SPDX-License-Identifier: Apache-2.0 */
/* Private to formats/: zstd as podfeed uses it, written once: contexts
 * that allocate through pf_malloc(), one frame compressed, one frame
 * decompressed with every check, and zstd's errors as -errno. */
#ifndef PF_ZSTD_INTERNAL_H
#define PF_ZSTD_INTERNAL_H

/* ZSTD_create*_advanced() and ZSTD_customMem are zstd's experimental API,
 * but ZSTD_customMem has not changed since zstd 1.0, and libzstd.so
 * exports them (Debian 12's 1.5.4 does). */
#ifndef ZSTD_STATIC_LINKING_ONLY
#define ZSTD_STATIC_LINKING_ONLY
#endif
#include <zstd.h>
#include <zstd_errors.h>

#include "formats_internal.h"

/* zstd's allocations through pf_malloc() (alloc_internal.h's callbacks). */
#define PF_ZSTD_MEM ((ZSTD_customMem){ pf_alloc_cb, pf_free_cb, NULL })

/* A compression context that makes frames at level with their content
 * size in the header, and a content checksum when checksum says so.
 * @return 0 with *out (ZSTD_freeCCtx()), -ENOMEM, or -EINVAL for a level
 * zstd refuses. */
int pf_zstd_cctx_create(ZSTD_CCtx **out, int level, bool checksum);

/* Compress src (len bytes) into one zstd frame at dst (cap bytes, at
 * least ZSTD_compressBound(len)).  @return its size, or -ENOMEM / -EIO
 * with err saying so at file offset off. */
int64_t pf_zstd_compress(ZSTD_CCtx *c, void *dst, size_t cap, const void *src, size_t len,
			 uint64_t off, pf_error *err);

/* Decompress src (src_len bytes, at file offset off), which must be
 * exactly one zstd frame whose header says `size` bytes of content, into
 * dst (dst_cap bytes).  what names where size came from in errors
 * ("index", "manifest header").  @return size, or -EBADMSG (not that
 * frame, or corrupt), -ENOBUFS (dst_cap < size) or -ENOMEM, with err
 * saying which at the byte it concerns. */
int64_t pf_zstd_decompress_frame(ZSTD_DCtx *d, void *dst, size_t dst_cap, uint64_t size,
				 const void *src, size_t src_len, uint64_t off,
				 const char *what, pf_error *err);

#endif
