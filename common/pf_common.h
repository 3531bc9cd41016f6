/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed common: what every part of the library shares in its API: the
 * export macro and the error context. */
#ifndef PF_COMMON_H
#define PF_COMMON_H

/*
 * Every public header of podfeed includes this one (pf_formats.h, pf_io.h,
 * podfeed.h, pf_host.h), so a user never includes it alone.  Functions
 * return >= 0 on success and -errno on failure; the detail of a failure
 * (what, where) goes into a caller-provided pf_error, defined here.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PF_API __attribute__((visibility("default")))
#else
#define PF_API
#endif

/* ------------------------------------------------------------------ */
/* Error context                                                        */
/* ------------------------------------------------------------------ */

/* What an offset in a pf_error counts. */
typedef enum pf_offset_kind {
	PF_OFFSET_NONE = 0,	/* no offset known */
	PF_OFFSET_FILE,		/* byte offset in the file as stored */
	PF_OFFSET_STREAM,	/* byte offset in the decompressed stream */
} pf_offset_kind;

/* The longest path Linux takes (PATH_MAX, with its NUL), so that a file
 * name is never cut; spelled out so that the header needs no POSIX
 * feature macro. */
#define PF_PATH_MAX 4096u
/* Room for the longest message podfeed composes: the cause and up to two
 * whole paths in it (a mount declared in two files, a drop budget spent
 * whose last cause names a file). */
#define PF_ERROR_MSG_MAX (2 * PF_PATH_MAX + 1024u)
/* The longest line pf_error_format() writes, with its NUL: a buffer of
 * this size is never too short. */
#define PF_ERROR_LINE_MAX (PF_PATH_MAX + PF_ERROR_MSG_MAX + 128u)

/*
 * The error contract, for every public function that takes a pf_error *
 * (formats/, io/, loader/, host/): it clears the error on entry, so that
 * a caller may declare `pf_error err;` uninitialised and print it after
 * any failing call; on failure it fills code, msg and whichever of file,
 * offset, frame and record apply (those that do not stay "unknown": file
 * empty, offset_kind PF_OFFSET_NONE, frame and record -1); on success
 * the error stays clear (code 0).  err may be NULL where the function
 * says so.  The exceptions fill or read an error the caller hands them:
 * pf_error_set(), pf_error_set_file(), pf_error_format() and
 * pf_io_req_error().  Nothing is cut: file holds any path Linux takes and
 * msg the longest message podfeed composes.
 */
typedef struct pf_error {
	int code;		/* -errno, 0 when clear */
	pf_offset_kind offset_kind;
	uint64_t offset;	/* meaningful only when offset_kind says so */
	int64_t frame;		/* frame index in an indexed shard, or -1 */
	int64_t record;		/* record number in the file, or -1 */
	char file[PF_PATH_MAX];	/* set by the layer that knows the file; "" */
	char msg[PF_ERROR_MSG_MAX];	/* what was wrong; "": pf_strerror(code) */
} pf_error;

/*! pf_error_clear(): reset to "no error" (code 0, no file, no offset,
 *  frame and record -1).  Cheap: the text fields are emptied, not wiped.
 *  err may be NULL. */
PF_API void pf_error_clear(pf_error *err);

/*! pf_error_set(): record a failure: code, offset and message (other
 *  fields as they are).  @return code (so callers can
 *  `return pf_error_set(err, -EBADMSG, ...)`).  err may be NULL. */
PF_API int pf_error_set(pf_error *err, int code, pf_offset_kind kind,
			uint64_t offset, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/*! pf_error_set_file(): name the file an error belongs to, unless one is
 *  already named.  err may be NULL. */
PF_API void pf_error_set_file(pf_error *err, const char *file);

/*! pf_error_format(): one line for people, e.g.
 *  "data/a.tfrecord: byte 1234: bad data CRC (record 7)": only the fields
 *  that apply (a file when named, an offset when its kind says so, frame
 *  and record when >= 0).  Writes at most cap bytes, terminated when
 *  cap > 0 (dst may be NULL when cap is 0).  @return the length of the
 *  whole line, as snprintf() does: a result >= cap means it was cut, and
 *  a buffer of that length + 1 (at most PF_ERROR_LINE_MAX) holds it. */
PF_API size_t pf_error_format(const pf_error *err, char *dst, size_t cap);

/*! pf_strerror(): a short name for a -errno code used by podfeed. */
PF_API const char *pf_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif /* PF_COMMON_H */
