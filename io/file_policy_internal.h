/* SPDX-License-Identifier: Apache-2.0 */
/* Private to podfeed (io/ and loader/): a pf_file_pread() policy that
 * lasts as long as the object that asked for it (a loader), not the
 * process. */
#ifndef PF_FILE_POLICY_INTERNAL_H
#define PF_FILE_POLICY_INTERNAL_H

#include "pf_io.h"

/* One scope: the policy it put in force and the one it replaced.
 * Opaque to its owner; linked in io/file.c while it is open. */
typedef struct pf_file_policy_scope {
	struct file_policy *mine, *prev;
	struct pf_file_policy_scope *next;	/* the open scopes */
	bool open;
} pf_file_policy_scope;

/*! pf_file_policy_push(): pf_file_set_policy(cfg) until
 *  pf_file_policy_pop(s).  @return 0, or -EINVAL / -ENOMEM with err
 *  saying why (then nothing changed and s is not open). */
int pf_file_policy_push(pf_file_policy_scope *s, const pf_io_config *cfg, pf_error *err);
/*! pf_file_policy_pop(): end scope s (an unopened s is a no-op).  When
 *  its policy is still the process's, the one it replaced is put back;
 *  when a later call replaced it, the later scope will put back the one
 *  s replaced, so that s's policy never outlives it.  Thread-safe. */
void pf_file_policy_pop(pf_file_policy_scope *s);

#endif
