/* SPDX-License-Identifier: Apache-2.0 */
/* Private to io/'s region files: the seams between the region table
 * (region.c) and the parsers of the mount table file and mountinfo that
 * fill it (region_mounts.c). */
#ifndef PF_REGION_INTERNAL_H
#define PF_REGION_INTERNAL_H

#include "io_internal.h"

#define PF_MOUNTINFO_ENTRIES_MAX 65536u	/* file system entries kept */

/* Lexical normalisation: make path absolute (against the working
 * directory), drop empty and "." components, let ".." remove the one
 * before.  @return the length written to out, or -ENAMETOOLONG, -EINVAL
 * (empty path), -errno of getcwd. */
int pf_region_path_normalize(const char *path, char *out, size_t cap);
/* Declare path a mount in region (checked), from origin (file and line
 * for PF_MOUNT_FILE).  @return the mount's index, or -errno with err
 * saying why (-EINVAL for a bad path or a second region, -EBUSY once the
 * table is frozen). */
int pf_region_table_declare(pf_region_table *t, const char *path, const char *region,
			    pf_mount_origin origin, const char *file, unsigned line,
			    pf_error *err);
/* Keep mountinfo entry e, whose mount point is canon (len bytes,
 * canonical): the file system of the paths under it, and when it is a
 * FUSE mount, a detected mount.  @return 1 when it was a FUSE mount, 0
 * for another, or -errno: -E2BIG past PF_MOUNTINFO_ENTRIES_MAX entries,
 * -ENOMEM, or the mount's error (err says). */
int pf_region_table_add_fs(pf_region_table *t, const char *canon, size_t len,
			   const pf_mountinfo_entry *e, pf_error *err);
/* Whether the table is frozen (looked up in: no mount may be added). */
bool pf_region_table_frozen(const pf_region_table *t);

#endif
