/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed io: reading byte extents of files. */
#ifndef PF_IO_H
#define PF_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pf_formats.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! pf_file_open(): open path read-only.  @return an fd (>= 0) or -errno;
 *  on failure err names the file and the cause.  Close with close(). */
PF_API int pf_file_open(const char *path, pf_error *err);

/*! pf_file_size(): size of an open file.  @return 0 with *size, or -errno. */
PF_API int pf_file_size(int fd, uint64_t *size);

/*! pf_file_pread(): read exactly len bytes at offset, retrying EINTR and
 *  short reads.  @return bytes read (< len only at end of file) or -errno;
 *  on failure err names path and offset. */
PF_API int64_t pf_file_pread(int fd, void *buf, size_t len, uint64_t offset,
			     const char *path, pf_error *err);

#ifdef __cplusplus
}
#endif

#endif
