/* SPDX-License-Identifier: Apache-2.0 */
/* The error context: what went wrong, in which file, at which byte. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pf_common.h"

void pf_error_clear(pf_error *err)
{
	if (!err)
		return;
	/* Called on entry of every public function, on hot paths too (a
	 * record parse): the header and the first byte of each text field
	 * say "no error", the rest of the text is never read. */
	err->code = 0;
	err->offset_kind = PF_OFFSET_NONE;
	err->offset = 0;
	err->frame = -1;
	err->record = -1;
	err->file[0] = '\0';
	err->msg[0] = '\0';
}

/* A text that did not fit ends in "..." so that the cut shows.  The sizes
 * are chosen so that podfeed's own messages never get here. */
static void mark_cut(char *dst, size_t cap)
{
	if (cap > 4)
		memcpy(dst + cap - 4, "...", 4);
}

int pf_error_set(pf_error *err, int code, pf_offset_kind kind, uint64_t offset,
		 const char *fmt, ...)
{
	va_list ap;
	int w;

	if (!err)
		return code;
	err->code = code;
	err->offset_kind = kind;
	err->offset = offset;
	va_start(ap, fmt);
	w = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	if (w < 0)
		err->msg[0] = '\0';
	else if ((size_t)w >= sizeof(err->msg))
		mark_cut(err->msg, sizeof(err->msg));
	return code;
}

void pf_error_set_file(pf_error *err, const char *file)
{
	if (!err || !file || err->file[0])
		return;
	if ((size_t)snprintf(err->file, sizeof(err->file), "%s", file) >= sizeof(err->file))
		mark_cut(err->file, sizeof(err->file));	/* longer than Linux takes */
}

/* Append to dst as snprintf() does, counting the whole length in *n even
 * past cap. */
static void __attribute__((format(printf, 4, 5)))
append(char *dst, size_t cap, size_t *n, const char *fmt, ...)
{
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vsnprintf(*n < cap ? dst + *n : NULL, *n < cap ? cap - *n : 0, fmt, ap);
	va_end(ap);
	if (w > 0)
		*n += (size_t)w;
}

size_t pf_error_format(const pf_error *err, char *dst, size_t cap)
{
	size_t n = 0;

	if (cap)
		dst[0] = '\0';
	if (err->file[0])
		append(dst, cap, &n, "%s: ", err->file);
	if (err->offset_kind == PF_OFFSET_FILE)
		append(dst, cap, &n, "byte %llu: ", (unsigned long long)err->offset);
	else if (err->offset_kind == PF_OFFSET_STREAM)
		append(dst, cap, &n, "decompressed byte %llu: ",
		       (unsigned long long)err->offset);
	append(dst, cap, &n, "%s", err->msg[0] ? err->msg : pf_strerror(err->code));
	if (err->frame >= 0 && err->record >= 0)
		append(dst, cap, &n, " (frame %lld, record %lld)", (long long)err->frame,
		       (long long)err->record);
	else if (err->frame >= 0)
		append(dst, cap, &n, " (frame %lld)", (long long)err->frame);
	else if (err->record >= 0)
		append(dst, cap, &n, " (record %lld)", (long long)err->record);
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
