/* SPDX-License-Identifier: Apache-2.0 */
/* shardtool's commands and what they share (tools/shardtool*.c). */
#ifndef PF_TOOLS_SHARDTOOL_H
#define PF_TOOLS_SHARDTOOL_H

#include "cli.h"

/* Each command, argv[0] its name.  @return the exit status. */
int cmd_synth(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_manifest(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_cat(int argc, char **argv);

/* Writing files: every byte (EINTR retried; -errno), the same as a
 * pf_write_fn over an int fd at ctx, the output directory made if
 * missing, and a file written under a temporary name and renamed into
 * place when complete (so a crash never leaves half a shard under its
 * name; close_out() with !ok removes it).  Each says why on failure. */
int write_all(int fd, const void *buf, size_t len);
int sink_fd(void *ctx, const void *buf, size_t len);
int ensure_dir(const char *dir);
int open_out(const char *path, char *tmp, size_t tmp_cap);
int close_out(int fd, const char *tmp, const char *path, bool ok);

/* Decodes records of unknown kind for schema inference and cat. */
typedef struct decoder {
	pf_arena arena;
	pf_message_kind kind;	/* decided from the first record */
	bool decided;
	bool raw;		/* some record did not decode: no schema */
} decoder;

/*! Decode rec as the kind of the first record (Example or
 *  SequenceExample).  @return 0 with *ex, -ENODATA for raw records, or
 *  the decoder's error. */
int decode_record(decoder *d, const pf_record *rec, pf_example *ex, pf_error *err);
/*! "tf.train.Example", "tf.train.SequenceExample" or "raw". */
const char *kind_label(pf_message_kind k);

#endif
