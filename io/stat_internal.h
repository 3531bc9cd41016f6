/* SPDX-License-Identifier: Apache-2.0 */
/* Private to podfeed's modules (io/ and loader/): many stats at once with
 * each file's identity, as loader/paths.c needs to tell that two names
 * are one file.  Not installed; pf_stat_result itself (pf_io.h) is ABI
 * and stays as it is. */
#ifndef PF_STAT_INTERNAL_H
#define PF_STAT_INTERNAL_H

#include <stdint.h>

#include "pf_io.h"

/* A file's identity, so that "D/x", "./D/x" and a link to it are one
 * file (symlinks followed).  On a local file system: the device and
 * inode its path leads to.  On FUSE (canon set): the device and the
 * canonical path (realpath(3)), because a FUSE file system's inode
 * numbers name no file for sure: libfuse's high-level API without
 * use_ino (s3fs) gives every readdir entry d_ino 0xffffffff and stat
 * numbers that change once the kernel forgets a node; gcsfuse gives
 * every readdir entry inode 2; gcsfuse and mountpoint-s3 say their
 * inode numbers are not stable; rclone's are a hash of the path.  None
 * of the bucket clients has hard links (an object has one name), so on
 * them one canonical path is one file.  A hard link on a FUSE
 * passthrough (regionfs) is two files here. */
typedef struct pf_file_id {
	uint64_t dev, ino;
	char *canon;	/* FUSE: the canonical path (pf_free()); else NULL */
} pf_file_id;

/*! pf_stat_many_ids(): pf_stat_many(), and each path's identity into
 *  ids[i] (may be NULL; set only where out[i].error is 0; free their
 *  canonical paths with pf_file_ids_free()).  @return 0 or -ENOMEM. */
int pf_stat_many_ids(const char *const *paths, size_t n, pf_stat_result *out, pf_file_id *ids);
/*! Free the canonical paths of ids[0 .. n) and ids itself (pf_free()). */
void pf_file_ids_free(pf_file_id *ids, size_t n);
/*! Order identities: device, then canonical path or inode.  @return <0,
 *  0 (one file), >0. */
int pf_file_id_cmp(const pf_file_id *a, const pf_file_id *b);
/*! pf_dir_canon(): the canonical path of directory dir when it is on
 *  FUSE, for its entries' identities (pf_file_id_entry()): *canon
 *  (pf_free()), or NULL elsewhere.  @return 0 or -ENOMEM. */
int pf_dir_canon(const char *dir, char **canon);
/*! pf_file_id_entry(): the identity of directory entry name (a regular
 *  file, not a link) of a directory on device dev: its inode from
 *  readdir, or on FUSE (dir_canon from pf_dir_canon()) dir_canon/name.
 *  @return 0 or -ENOMEM. */
int pf_file_id_entry(pf_file_id *id, uint64_t dev, uint64_t ino, const char *dir_canon,
		     const char *name);

/*! What kind of non-regular file st_mode says it is ("a FIFO", "a
 *  directory", "a socket", ...), for an error that names it.  @return a
 *  static string. */
const char *pf_file_type_name(unsigned mode);

#endif /* PF_STAT_INTERNAL_H */
