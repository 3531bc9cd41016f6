/* SPDX-License-Identifier: Apache-2.0 */
/* Private to podfeed's modules (io/ and loader/): many stats at once with
 * each file's identity, as loader/paths.c needs to tell that two names
 * are one file.  Not installed; pf_stat_result itself (pf_io.h) is ABI
 * and stays as it is. */
#ifndef PF_STAT_INTERNAL_H
#define PF_STAT_INTERNAL_H

#include <stdint.h>

#include "pf_io.h"

/* A file's identity: the device and inode its path leads to (symlinks
 * followed), so that "D/x", "./D/x" and a link to it are one file. */
typedef struct pf_file_id {
	uint64_t dev, ino;
} pf_file_id;

/*! pf_stat_many_ids(): pf_stat_many(), and each path's identity into
 *  ids[i] (may be NULL; set only where out[i].error is 0).  @return 0 or
 *  -ENOMEM. */
int pf_stat_many_ids(const char *const *paths, size_t n, pf_stat_result *out, pf_file_id *ids);

/*! What kind of non-regular file st_mode says it is ("a FIFO", "a
 *  directory", "a socket", ...), for an error that names it.  @return a
 *  static string. */
const char *pf_file_type_name(unsigned mode);

#endif /* PF_STAT_INTERNAL_H */
