/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's --resume and --save-state files (tools/ckpt.c). */
#ifndef PF_CKPT_H
#define PF_CKPT_H

#include <stdbool.h>

#include "podfeed.h"

#define CKPT_MAX_FILES 64u

#define CKPT_USAGE \
	"checkpoints:\n" \
	"  --save-state FILE    write this host's loader state to FILE (atomically)\n" \
	"                       at the end, on SIGINT/SIGTERM (then exit 130), and\n" \
	"                       every --save-every N steps\n" \
	"  --save-every N       steps between saves (default: only at the end)\n" \
	"  --resume FILE        continue from a saved state; repeat it (or give\n" \
	"                       FILE,FILE...) with every old host's state to resume\n" \
	"                       on another host count or host batch; --epochs counts\n" \
	"                       from the first epoch, --steps from the resume\n"

typedef struct ckpt_set {
	const char *path[CKPT_MAX_FILES];
	uint8_t *data[CKPT_MAX_FILES];
	pf_state_blob blob[CKPT_MAX_FILES];
	unsigned n;
} ckpt_set;

/*! Read the state file path into set.  @return 0, or -errno after
 *  printing why. */
int ckpt_load(ckpt_set *set, const char *path);
/*! Check every state (envelope, CRC, version) and, unless quiet, say on
 *  stderr where each resumes.  @return 0, or -1 after printing the error
 *  naming the file and byte offset. */
int ckpt_check(const ckpt_set *set, bool quiet);
void ckpt_free(ckpt_set *set);
/*! Write l's state to path atomically.  @return 0, or -errno after
 *  printing why. */
int ckpt_save(const char *path, pf_loader *l);

#endif
