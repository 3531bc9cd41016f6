/* SPDX-License-Identifier: Apache-2.0 */
/* The error context: what went wrong, in which file, at which byte. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pf_formats.h"

void pf_error_clear(pf_error *err)
{
	if (!err)
		return;
	memset(err, 0, sizeof(*err));
	err->frame = -1;
	err->record = -1;
}

int pf_error_set(pf_error *err, int code, pf_offset_kind kind, uint64_t offset,
		 const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	err->offset_kind = kind;
	err->offset = offset;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

void pf_error_set_file(pf_error *err, const char *file)
{
	if (!err || !file || err->file[0])
		return;
	snprintf(err->file, sizeof(err->file), "%s", file);
}

size_t pf_error_format(const pf_error *err, char *dst, size_t cap)
{
	size_t n = 0;
	int w;

	if (!cap)
		return 0;
	dst[0] = '\0';
#define PF_APPEND(...)                                                       \
	do {                                                                 \
		w = snprintf(dst + n, cap - n, __VA_ARGS__);                 \
		if (w < 0)                                                   \
			return n;                                            \
		n += (size_t)w < cap - n ? (size_t)w : cap - n - 1;          \
	} while (0)
	if (err->file[0])
		PF_APPEND("%s: ", err->file);
	if (err->offset_kind == PF_OFFSET_FILE)
		PF_APPEND("byte %llu: ", (unsigned long long)err->offset);
	else if (err->offset_kind == PF_OFFSET_STREAM)
		PF_APPEND("decompressed byte %llu: ",
			  (unsigned long long)err->offset);
	PF_APPEND("%s", err->msg[0] ? err->msg : pf_strerror(err->code));
	if (err->frame >= 0 && err->record >= 0)
		PF_APPEND(" (frame %lld, record %lld)", (long long)err->frame,
			  (long long)err->record);
	else if (err->frame >= 0)
		PF_APPEND(" (frame %lld)", (long long)err->frame);
	else if (err->record >= 0)
		PF_APPEND(" (record %lld)", (long long)err->record);
#undef PF_APPEND
	return n;
}

const char *pf_strerror(int code)
{
	switch (-code) {
	case 0: return "success";
	case EBADMSG: return "corrupt data";
	case EFBIG: return "larger than the configured limit";
	case ENOMEM: return "out of memory";
	case ENOBUFS: return "buffer too small";
	case ENODATA: return "not in the expected format";
	case EINVAL: return "invalid argument";
	case EPROTONOSUPPORT: return "unsupported format version";
	case EIO: return "I/O error";
	case ENOENT: return "no such file";
	case EACCES: return "permission denied";
	case ETIMEDOUT: return "timed out";
	default: return strerror(-code);
	}
}
