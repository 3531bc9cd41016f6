/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's --resume and --save-state files (tools/ckpt.c). */
#ifndef PF_CKPT_H
#define PF_CKPT_H

#include <stdbool.h>

#include "podfeed.h"

#define CKPT_MAX_FILES 64u

typedef struct ckpt_set {
	char *path[CKPT_MAX_FILES];
	uint8_t *data[CKPT_MAX_FILES];
	pf_state_blob blob[CKPT_MAX_FILES];
	unsigned n;
} ckpt_set;

/*! --resume FILE[,FILE...]: read each state file into the ckpt_set at
 *  field (a CLI_CALL of an option table).  @return 0, or <0 after a
 *  usage error naming the file. */
int ckpt_add(void *field, const char *value);
/*! Check every state (envelope, CRC, version) and, unless quiet, say on
 *  stderr where each resumes.  @return 0, or -1 after printing the error
 *  naming the file and byte offset. */
int ckpt_check(const ckpt_set *set, bool quiet);
void ckpt_free(ckpt_set *set);
/*! Write l's state to path atomically.  @return 0, or -errno after
 *  printing why. */
int ckpt_save(const char *path, pf_loader *l);

/*! `loadbench state show [--json] FILE...` (argv[0] "state").  @return
 *  the exit status: 0, 1 (a state damaged: the error names the file and
 *  the byte), 2 (usage). */
int state_main(int argc, char **argv);

#endif
