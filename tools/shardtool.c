/* SPDX-License-Identifier: Apache-2.0 */
/* shardtool: make, convert, inspect, verify and print record shards: the
 * commands, and what they share (writing files, decoding records).  The
 * commands are shardtool_synth.c, shardtool_convert.c and shardtool_read.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "podsim.h"
#include "shardtool.h"

int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int sink_fd(void *ctx, const void *buf, size_t len)
{
	return write_all(*(int *)ctx, buf, len);
}

/* Create the output directory if missing. */
int ensure_dir(const char *dir)
{
	struct stat st;

	if (stat(dir, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return 0;
		cli_fail("%s: exists and is not a directory", dir);
		return -ENOTDIR;
	}
	if (mkdir(dir, 0755) < 0) {
		cli_fail("%s: cannot create directory: %s", dir, strerror(errno));
		return -errno;
	}
	return 0;
}

/* Write to a temporary name, rename into place when complete, so a crash
 * never leaves a half shard under the final name. */
int open_out(const char *path, char *tmp, size_t tmp_cap)
{
	int fd;

	snprintf(tmp, tmp_cap, "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		cli_fail("%s: cannot create: %s", tmp, strerror(errno));
	return fd;
}

int close_out(int fd, const char *tmp, const char *path, bool ok)
{
	if (close(fd) < 0 && ok) {
		cli_fail("%s: %s", tmp, strerror(errno));
		ok = false;
	}
	if (!ok) {
		unlink(tmp);
		return -EIO;
	}
	if (rename(tmp, path) < 0) {
		cli_fail("%s: cannot rename into place: %s", path, strerror(errno));
		unlink(tmp);
		return -errno;
	}
	return 0;
}

/* ------------------------------------------------------------------ */


int decode_record(decoder *d, const pf_record *rec, pf_example *ex,
			 pf_error *err)
{
	size_t need = PF_ARENA_BYTES_FOR(rec->len);
	int ret;

	if (!d->decided) {
		d->kind = pf_message_sniff(rec->data, rec->len);
		d->decided = true;
	}
	if (d->kind == PF_MSG_RAW)
		return -ENODATA;
	if (d->arena.cap < need) {
		pf_arena_release(&d->arena);
		ret = pf_arena_init(&d->arena, need);
		if (ret < 0)
			return ret;
	}
	pf_arena_reset(&d->arena);
	if (d->kind == PF_MSG_SEQUENCE_EXAMPLE)
		ret = pf_sequence_example_decode(rec->data, rec->len, &d->arena, ex, err);
	else
		ret = pf_example_decode(rec->data, rec->len, &d->arena, ex, err);
	return ret;
}

const char *kind_label(pf_message_kind k)
{
	switch (k) {
	case PF_MSG_EXAMPLE: return "tf.train.Example";
	case PF_MSG_SEQUENCE_EXAMPLE: return "tf.train.SequenceExample";
	case PF_MSG_RAW: break;
	}
	return "raw";
}

int main(int argc, char **argv)
{
	static const cli_subcommand cmds[] = {
		{ "synth", "make a deterministic synthetic TFRecord dataset", cmd_synth },
		{ "convert", "rewrite any readable records as indexed zstd shards", cmd_convert },
		{ "manifest", "write the dataset manifest that plans a dataset in one read",
		  cmd_manifest },
		{ "podsim", "plan an epoch as each host of a pod, report and check it",
		  podsim_main },
		{ "inspect", "format, compression, frames, records, sizes, schema", cmd_inspect },
		{ "verify", "check every CRC and the index; exit 1 on the first problem",
		  cmd_verify },
		{ "cat", "print records as JSON lines", cmd_cat },
		{ 0 },
	};
	const cli_subcommand *cmd;

	cli_prog = "shardtool";
	if (argc < 2)
		return cli_usage("a command is required");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "--help-all") || !strcmp(argv[1], "help")) {
		fputs("usage: shardtool COMMAND [options] ...\n\n", stdout);
		cli_help_subcommands(cmds, stdout);
		fputs("\n`shardtool COMMAND --help` for each command's options.\n", stdout);
		return 0;
	}
	cmd = cli_find_subcommand(cmds, argv[1]);
	if (!cmd)
		return cli_usage("unknown command '%s'", argv[1]);
	return cmd->main(argc - 1, argv + 1);
}
