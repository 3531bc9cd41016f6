/* SPDX-License-Identifier: Apache-2.0 */
/* zstd frames as podfeed makes and reads them (zstd_internal.h): the
 * indexed shard's frames and the manifest's payload. */
#include <errno.h>

#include "zstd_internal.h"

int pf_zstd_cctx_create(ZSTD_CCtx **out, int level, bool checksum)
{
	ZSTD_CCtx *c = ZSTD_createCCtx_advanced(PF_ZSTD_MEM);

	*out = NULL;
	if (!c)
		return -ENOMEM;
	/* Content size in every frame header lets a reader size its buffer
	 * before decompressing, and check what it got. */
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, checksum)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1))) {
		ZSTD_freeCCtx(c);
		return -EINVAL;
	}
	*out = c;
	return 0;
}

int64_t pf_zstd_compress(ZSTD_CCtx *c, void *dst, size_t cap, const void *src, size_t len,
			 uint64_t off, pf_error *err)
{
	size_t n = ZSTD_compress2(c, dst, cap, src, len);

	if (ZSTD_isError(n) && ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, off,
				    "zstd: no memory to compress a frame");
	if (ZSTD_isError(n))
		return pf_error_set(err, -EIO, PF_OFFSET_FILE, off,
				    "zstd compression failed: %s", ZSTD_getErrorName(n));
	return (int64_t)n;
}

int64_t pf_zstd_decompress_frame(ZSTD_DCtx *d, void *dst, size_t dst_cap, uint64_t size,
				 const void *src, size_t src_len, uint64_t off,
				 const char *what, pf_error *err)
{
	unsigned long long content = ZSTD_getFrameContentSize(src, src_len);
	size_t frame_len, n;

	if (content == ZSTD_CONTENTSIZE_ERROR)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off, "not a zstd frame");
	if (content == ZSTD_CONTENTSIZE_UNKNOWN)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
				    "zstd frame without a content size");
	if (content != size)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
				    "zstd frame content size %llu, %s says %llu", content, what,
				    (unsigned long long)size);
	if (dst_cap < size)
		return pf_error_set(err, -ENOBUFS, PF_OFFSET_FILE, off,
				    "frame needs %llu bytes, buffer holds %zu",
				    (unsigned long long)size, dst_cap);
	/* ZSTD_decompressDCtx would go on into a following frame: exactly
	 * one is promised. */
	frame_len = ZSTD_findFrameCompressedSize(src, src_len);
	if (ZSTD_isError(frame_len))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off, "zstd: %s",
				    ZSTD_getErrorName(frame_len));
	if (frame_len != src_len)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off + frame_len,
				    "%zu bytes after the zstd frame", src_len - frame_len);
	n = ZSTD_decompressDCtx(d, dst, (size_t)size, src, src_len);
	if (ZSTD_isError(n) && ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_FILE, off, "zstd: out of memory");
	if (ZSTD_isError(n))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off, "zstd: %s",
				    ZSTD_getErrorName(n));
	if (n != size)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
				    "zstd frame gave %zu bytes, %s says %llu", n, what,
				    (unsigned long long)size);
	return (int64_t)n;
}
