/* SPDX-License-Identifier: Apache-2.0 */
/* The version and the ABI's sized structs: a struct that crosses the
 * library's boundary with its size (pf_common.h, "the ABI promise") is
 * copied in zero-extended, or copied out cut to the caller's size, here
 * and only here. */
#include <errno.h>
#include <string.h>

#include "common_internal.h"

unsigned pf_version(void)
{
	return PF_VERSION_NUMBER;
}

const char *pf_version_string(void)
{
	return PF_VERSION_STRING;
}

int pf_struct_in(void *dst, size_t dst_size, const void *src, size_t src_size,
		 size_t min_size, const char *what, pf_error *err)
{
	const unsigned char *s = src;

	if (src_size < min_size)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%s of %zu bytes: no podfeed header ever had one smaller than %zu "
				    "(pass sizeof the struct)",
				    what, src_size, min_size);
	for (size_t i = dst_size; i < src_size; i++)
		if (s[i])
			return pf_error_set(err, -E2BIG, PF_OFFSET_NONE, 0,
					    "%s: byte %zu of %zu is set, but libpodfeed %s knows its first "
					    "%zu bytes only: a field of a newer podfeed.h this library "
					    "cannot honour (built against headers newer than the library?)",
					    what, i, src_size, PF_VERSION_STRING, dst_size);
	if (src_size >= dst_size) {
		memcpy(dst, src, dst_size);
	} else {
		memcpy(dst, src, src_size);
		memset((unsigned char *)dst + src_size, 0, dst_size - src_size);
	}
	return 0;
}

void pf_struct_out(void *dst, size_t dst_size, const void *src, size_t src_size)
{
	if (dst_size <= src_size) {
		memcpy(dst, src, dst_size);
	} else {
		memcpy(dst, src, src_size);
		memset((unsigned char *)dst + src_size, 0, dst_size - src_size);
	}
}
