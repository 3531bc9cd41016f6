/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's checkpoint files: --resume reads saved loader states,
 * --save-state writes this host's state atomically (a temporary file in
 * the same directory, fsync, rename), so a kill at any instant leaves
 * either the old state or the new one, never half of one; `loadbench
 * state show FILE` says what one holds (pf_state_describe()). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli.h"
#include "json_internal.h"

/* Loader states are small; anything near this is not one. */
#define CKPT_MAX_BYTES (64u << 20)

/* Read the state file path into set (flag: what names it in errors).
 * @return 0, or -errno after a usage error naming it. */
static int ckpt_load(ckpt_set *set, const char *path, const char *flag)
{
	struct stat sb;
	uint8_t *buf = NULL;
	size_t got = 0;
	int fd, ret = 0;

	if (set->n == CKPT_MAX_FILES) {
		cli_usage("%s: at most %u states", flag, CKPT_MAX_FILES);
		return -E2BIG;
	}
	/* O_NONBLOCK: a FIFO named here would hold open(2) until a writer
	 * came; it is refused below as not a regular file. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		ret = -errno;
		cli_usage("%s: %s: %s", flag, path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > CKPT_MAX_BYTES) {
		cli_usage("%s: %s: not a loader state (%s)", flag, path,
			 S_ISREG(sb.st_mode) ? "over 64 MiB" : "not a regular file");
		ret = -EINVAL;
		goto out;
	}
	buf = malloc(sb.st_size ? (size_t)sb.st_size : 1);
	if (!buf) {
		ret = -ENOMEM;
		cli_usage("%s: %s: out of memory", flag, path);
		goto out;
	}
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			cli_usage("%s: %s: %s", flag, path, n < 0 ? strerror(errno)
								  : "file shrank while read");
			goto out;
		}
		got += (size_t)n;
	}
	set->path[set->n] = strdup(path);
	if (!set->path[set->n]) {
		ret = -ENOMEM;
		cli_usage("%s: %s: out of memory", flag, path);
		goto out;
	}
	set->data[set->n] = buf;
	set->blob[set->n] = (pf_state_blob){ buf, got };
	set->n++;
	buf = NULL;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

int ckpt_add(void *field, const char *value)
{
	ckpt_set *set = field;
	char *list = strdup(value);
	char *f = list;
	int ret = list ? 0 : -ENOMEM;

	/* An empty name in the list ("a,,b", "a,") is an unset variable in
	 * a job script, never "no state": refused before any is read. */
	if (!*value || *value == ',' || strstr(value, ",,") || value[strlen(value) - 1] == ',') {
		free(list);
		cli_usage("--resume: an empty path in '%s' (an unset variable?)", value);
		return -EINVAL;
	}
	while (f && ret == 0) {
		char *comma = strchr(f, ',');

		if (comma)
			*comma = '\0';
		ret = ckpt_load(set, f, "--resume");
		f = comma ? comma + 1 : NULL;
	}
	if (!list)
		cli_usage("--resume: out of memory");
	free(list);
	return ret;
}

int ckpt_check(const ckpt_set *set, bool quiet)
{
	for (unsigned i = 0; i < set->n; i++) {
		pf_state_info in;
		pf_error err;

		pf_error_clear(&err);
		if (pf_state_inspect(set->blob[i].data, set->blob[i].len, &in, &err) < 0) {
			pf_error_set_file(&err, set->path[i]);
			cli_print_error(&err);
			return -1;
		}
		if (quiet)
			continue;
		if (in.fresh)
			fprintf(stderr, "%s: resuming host %u of %u at the start of epoch %u "
				"(global step %llu)\n", set->path[i], in.host_index, in.num_hosts,
				in.epoch, (unsigned long long)in.global_step);
		else
			fprintf(stderr, "%s: resuming host %u of %u at epoch %u step %llu "
				"(global step %llu), %llu records of the epoch left\n",
				set->path[i], in.host_index, in.num_hosts, in.epoch,
				(unsigned long long)in.step_in_epoch,
				(unsigned long long)in.global_step,
				(unsigned long long)in.records_left);
	}
	return 0;
}

void ckpt_free(ckpt_set *set)
{
	for (unsigned i = 0; i < set->n; i++) {
		free(set->data[i]);
		free(set->path[i]);
	}
	memset(set, 0, sizeof(*set));
}

int ckpt_save(const char *path, pf_loader *l)
{
	char tmp[4096];
	int64_t n = pf_loader_save_state(l, NULL, 0);
	uint8_t *blob = n > 0 ? malloc((size_t)n) : NULL;
	size_t done = 0;
	int fd = -1, ret = 0;

	if (!blob || pf_loader_save_state(l, blob, (size_t)n) != n) {
		cli_fail("--save-state: cannot encode the state");
		free(blob);
		return -ENOMEM;
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		cli_fail("--save-state: %s: name too long", path);
		free(blob);
		return -ENAMETOOLONG;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto fail;
	while (done < (size_t)n) {
		ssize_t w = write(fd, blob + done, (size_t)n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			goto fail;
		done += (size_t)w;
	}
	if (fsync(fd) < 0 || close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) < 0)
		goto fail;
	free(blob);
	return 0;
fail:
	ret = errno ? -errno : -EIO;
	cli_fail("--save-state: %s: %s", fd >= 0 || done ? tmp : path, strerror(-ret));
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(blob);
	return ret;
}

/* `loadbench state show [--json] FILE...`: each state's readable fields
 * (pf_state_describe()), for a person or, with --json, a JSON object a
 * line with the file's name added. */
int state_main(int argc, char **argv)
{
	ckpt_set set = { 0 };
	bool json = false;
	int ret = 0, files = 0;

	cli_prog = "loadbench state";
	if (argc < 2 || strcmp(argv[1], "show")) {
		if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
				 !strcmp(argv[1], "--help-all"))) {
			printf("usage: loadbench state show [--json] FILE...\n"
			       "Says what each saved loader state holds: its kind, topology, "
			       "epoch and step,\nrecords left, dataset, order, packing, a "
			       "mixture's sources, the steps skipped.\n");
			return 0;
		}
		return cli_usage("'%s' is not a state command (show)", argc > 1 ? argv[1] : "");
	}
	for (int i = 2; i < argc && ret == 0; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") ||
			 !strcmp(argv[i], "--help-all"))
			return printf("usage: loadbench state show [--json] FILE...\n"), 0;
		else if (argv[i][0] == '-' && argv[i][1])
			ret = cli_usage("state show: unknown option %s", argv[i]);
		else if (!*argv[i])
			ret = cli_usage("state show: an empty file name (an unset variable?)");
		else if (ckpt_load(&set, argv[i], "state show") < 0)
			ret = 2;
		else
			files++;
	}
	if (ret == 0 && !files)
		ret = cli_usage("state show: give a state FILE");
	for (unsigned i = 0; ret == 0 && i < set.n; i++) {
		pf_report_output fmt = json ? PF_REPORT_JSON : PF_REPORT_TEXT;
		pf_error err;
		int64_t n = pf_state_describe(set.blob[i].data, set.blob[i].len, fmt, NULL, 0, &err);
		char *text = n > 0 ? malloc((size_t)n + 1) : NULL;

		if (n < 0 || !text) {
			if (n < 0) {
				pf_error_set_file(&err, set.path[i]);
				cli_print_error(&err);
			} else {
				cli_fail("out of memory");
			}
			free(text);
			ret = 1;
			break;
		}
		pf_state_describe(set.blob[i].data, set.blob[i].len, fmt, text, (size_t)n + 1, &err);
		if (json) {
			json_error_t je;
			json_t *o = json_loads(text, 0, &je);
			bool bad = !o;

			if (o)
				pf_json_put(o, "file", pf_json_str(set.path[i]), &bad);
			ret = cli_json_print(o, bad);
		} else {
			if (set.n > 1)
				printf("%s%s\n", i ? "\n" : "", set.path[i]);
			fputs(text, stdout);
		}
		free(text);
	}
	ckpt_free(&set);
	return ret;
}
