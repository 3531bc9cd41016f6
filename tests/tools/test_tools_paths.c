/* SPDX-License-Identifier: Apache-2.0 */
/* The names a user gives as the dataset (issue 25): a manifest among the
 * shards (the shell's glob of a convert directory), the same file named
 * twice, directories that hold nothing, links that lead nowhere, FIFOs.
 * Through the tools (loadbench, shardtool verify and inspect) and
 * pf_paths_resolve() itself. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "podfeed.h"
#include "testutil.h"

#define RECORDS 847u
#define SHARD0 "part-00000-of-00003.tfrecord.zst"
#define SHARD1 "part-00001-of-00003.tfrecord.zst"
#define SHARD2 "part-00002-of-00003.tfrecord.zst"

static char dir[512];	/* D: three indexed shards and their manifest */

/* D as the issue has it: `shardtool convert --out D --shards 3`. */
static void make_d(void)
{
	const char *st = tu_env_tool("SHARDTOOL");

	snprintf(dir, sizeof(dir), "%s", tu_tmpdir());
	cr_assert_eq(tu_system("cd %s && %s synth --kind tokens --records %u --shards 2 --out raw "
			       ">/dev/null && %s convert --out D --shards 3 raw/* >/dev/null",
			       dir, st, RECORDS, st), 0);
}

typedef struct ran {
	int status;
	char out[16384];
} ran;

/* Run a shell command line in dir, stdout and stderr together.  A tool
 * that would hang (a FIFO's open) fails the test by its timeout. */
static ran run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static ran run(const char *fmt, ...)
{
	char line[4096], cmd[5000];
	ran r;
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "cd %s && LOADBENCH=%s SHARDTOOL=%s; %s 2>&1", dir,
		 tu_env_tool("LOADBENCH"), tu_env_tool("SHARDTOOL"), line);
	st = tu_capture(cmd, r.out, sizeof(r.out), NULL);
	r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
	return r;
}

#define LB "$LOADBENCH --quiet --per-core-batch 1 --epochs 1 --json"

/* The records one epoch delivered, from loadbench's JSON report (its
 * last line). */
static uint64_t records_of(const ran *r)
{
	const char *last = strstr(r->out, "{\"records\"");
	json_error_t jerr;
	json_t *o;
	uint64_t n;

	cr_assert_not_null(last, "%s", r->out);
	o = json_loads(last, 0, &jerr);
	cr_assert_not_null(o, "%s: %s", jerr.text, r->out);
	n = (uint64_t)json_integer_value(json_object_get(o, "records"));
	json_decref(o);
	return n;
}

/* ------------------------------------------------------------------ */
/* 1. The manifest among the shards                                     */

Test(paths, loadbench_reads_the_shell_glob_of_a_convert_directory, .init = make_d,
     .timeout = 120)
{
	ran r = run(LB " D/*");

	cr_assert_eq(r.status, 0, "%s", r.out);
	cr_assert_eq(records_of(&r), RECORDS, "%s", r.out);
	/* Named alone, the manifest is the dataset: its three shards. */
	r = run("$LOADBENCH --per-core-batch 1 --epochs 1 D/podfeed.manifest");
	cr_assert_eq(r.status, 0, "%s", r.out);
	cr_assert(strstr(r.out, "files       3"), "%s", r.out);
	cr_assert_null(strstr(r.out, "holds 1 files"), "%s", r.out);
	/* And with --no-manifest, the shards the manifest stands for. */
	r = run(LB " --no-manifest D/*");
	cr_assert_eq(r.status, 0, "%s", r.out);
	cr_assert_eq(records_of(&r), RECORDS, "%s", r.out);
}

Test(paths, a_manifest_beside_shards_it_does_not_list_is_refused, .init = make_d,
     .timeout = 120)
{
	ran r;

	/* A shard named that the manifest does not list. */
	cr_assert_eq(tu_system("cp %s/raw/$(ls %s/raw | head -1) %s/D/extra.tfrecord", dir, dir,
			       dir), 0);
	r = run(LB " D/*");
	cr_assert_eq(r.status, 1, "%s", r.out);
	cr_assert(strstr(r.out, "D/extra.tfrecord") && strstr(r.out, "D/podfeed.manifest") &&
		  strstr(r.out, "does not list it"), "%s", r.out);
	/* A shard listed that is not named. */
	r = run(LB " D/" SHARD0 " D/" SHARD2 " D/podfeed.manifest");
	cr_assert_eq(r.status, 1, "%s", r.out);
	cr_assert(strstr(r.out, "D/podfeed.manifest") && strstr(r.out, "D/" SHARD1) &&
		  strstr(r.out, "not named beside it"), "%s", r.out);
}

Test(paths, shardtool_verifies_and_inspects_a_manifest, .init = make_d, .timeout = 120)
{
	ran r = run("$SHARDTOOL verify D/*");

	cr_assert_eq(r.status, 0, "%s", r.out);
	cr_assert(strstr(r.out, "D/podfeed.manifest: OK (manifest, 3 shards, 847 records)"),
		  "%s", r.out);
	cr_assert(strstr(r.out, "D/" SHARD2 ": OK"), "%s", r.out);
	r = run("$SHARDTOOL verify D/podfeed.manifest");
	cr_assert_eq(r.status, 0, "%s", r.out);
	cr_assert(strstr(r.out, "D/" SHARD0 ": OK"), "the shards it lists: %s", r.out);
	r = run("$SHARDTOOL inspect D/podfeed.manifest");
	cr_assert_eq(r.status, 0, "%s", r.out);
	cr_assert(strstr(r.out, "format       manifest") && strstr(r.out, "records      847") &&
		  strstr(r.out, SHARD1) && strstr(r.out, "tokens"), "%s", r.out);
	r = run("$SHARDTOOL inspect --json D/podfeed.manifest");
	cr_assert_eq(r.status, 0, "%s", r.out);
	cr_assert(strstr(r.out, "\"format\":\"manifest\"") && strstr(r.out, "\"shards\":3"),
		  "%s", r.out);

	/* A shard grown since the manifest was written: the manifest's
	 * check names both. */
	cr_assert_eq(tu_system("cp -a %s/D %s/G && printf x >> %s/G/" SHARD1, dir, dir, dir), 0);
	r = run("$SHARDTOOL verify G/podfeed.manifest");
	cr_assert_eq(r.status, 1, "%s", r.out);
	cr_assert(strstr(r.out, "G/" SHARD1 ": the shard is") &&
		  strstr(r.out, "G/podfeed.manifest says"), "%s", r.out);
	/* A flipped byte in the manifest: its checksum. */
	cr_assert_eq(tu_system("cp -a %s/D %s/H && printf '\\377' | dd of=%s/H/podfeed.manifest "
			       "bs=1 seek=40 conv=notrunc 2>/dev/null", dir, dir, dir), 0);
	r = run("$SHARDTOOL verify H/*");
	cr_assert_eq(r.status, 1, "%s", r.out);
	cr_assert(strstr(r.out, "H/podfeed.manifest: byte"), "%s", r.out);
}

Test(paths, resolve_says_which_manifest, .init = make_d)
{
	char a[700], b[700], c[700], m[700], **files = NULL, *manifest = NULL;
	const char *args[4] = { a, b, c, m };
	pf_error err;
	int n;

	snprintf(a, sizeof(a), "%s/D/" SHARD0, dir);
	snprintf(b, sizeof(b), "%s/D/" SHARD1, dir);
	snprintf(c, sizeof(c), "%s/D/" SHARD2, dir);
	snprintf(m, sizeof(m), "%s/D/podfeed.manifest", dir);
	n = pf_paths_resolve(args, 4, &files, &manifest, &err);
	cr_assert_eq(n, 3, "%d %s", n, err.msg);
	cr_assert_str_eq(manifest, m);
	cr_assert_str_eq(files[2], c);
	pf_paths_free(files, (size_t)n);
	free(manifest);
	/* Alone: the shards it lists. */
	n = pf_paths_resolve(args + 3, 1, &files, &manifest, &err);
	cr_assert_eq(n, 3, "%d %s", n, err.msg);
	cr_assert_str_eq(manifest, m);
	cr_assert_str_eq(files[0], a);
	pf_paths_free(files, (size_t)n);
	free(manifest);
}

/* ------------------------------------------------------------------ */
/* 2. The same file twice; names that give nothing                     */

Test(paths, the_same_shard_twice_is_refused_naming_both_arguments, .init = make_d,
     .timeout = 120)
{
	struct { const char *args, *says[3]; } cases[] = {
		{ "D/part-00000* D/part-00000*", { "D/" SHARD0, "argument 1", "argument 2" } },
		{ "D D", { "D", "the directory is named twice", "argument 2" } },
		{ "D ./D", { "./D", "argument 1 (D)", "argument 2 (./D)" } },
		{ "D/" SHARD0 " ./D/" SHARD0, { "named twice", "argument 2", "./D/" SHARD0 } },
		{ "D D/" SHARD1, { "D/" SHARD1, "argument 1 (D)", "argument 2" } },
		{ "D/*.zst lk", { "D/" SHARD1, "named twice", "lk" } },
	};

	cr_assert_eq(tu_system("ln -s D/" SHARD1 " %s/lk", dir), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ran r = run(LB " %s", cases[i].args);

		cr_assert_eq(r.status, 1, "%s: %s", cases[i].args, r.out);
		for (int k = 0; k < 3; k++)
			cr_assert(strstr(r.out, cases[i].says[k]), "%s: no '%s' in %s",
				  cases[i].args, cases[i].says[k], r.out);
	}
	/* shardtool verify alike. */
	ran r = run("$SHARDTOOL verify D D");

	cr_assert_eq(r.status, 1, "%s", r.out);
	cr_assert(strstr(r.out, "named twice"), "%s", r.out);
}

Test(paths, names_that_hold_no_shards_are_errors, .init = make_d, .timeout = 120)
{
	struct { const char *cmd, *says; } cases[] = {
		/* part-00001 a directory where a shard was expected */
		{ LB " F/part-0000*", "F/" SHARD1 ": the directory (argument 2) holds no shards" },
		{ LB " D/*.zst EMPTY", "EMPTY: the directory (argument 4) holds no shards" },
		{ "$SHARDTOOL verify EMPTY", "EMPTY: the directory (argument 1) holds no shards" },
		{ "$SHARDTOOL inspect EMPTY", "EMPTY: the directory (argument 1) holds no shards" },
		{ "$SHARDTOOL verify F/part-0000*", "F/" SHARD1 ": the directory" },
		{ LB " L", "L/loop: in directory L (argument 1): cannot stat" },
		{ LB " N", "N/gone: in directory N (argument 1): cannot stat" },
	};

	cr_assert_eq(tu_system("cd %s && mkdir EMPTY F L N && cp D/" SHARD0 " D/" SHARD2 " F/ && "
			       "mkdir F/" SHARD1 " && cp D/*.zst L/ && ln -s loop L/loop && "
			       "cp D/*.zst N/ && ln -s nowhere N/gone", dir), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ran r = run("%s", cases[i].cmd);

		cr_assert_eq(r.status, 1, "%s: %s", cases[i].cmd, r.out);
		cr_assert(strstr(r.out, cases[i].says), "%s: no '%s' in %s", cases[i].cmd,
			  cases[i].says, r.out);
	}
}

/* ------------------------------------------------------------------ */
/* 5. Not a regular file                                                */

/* A FIFO with no writer: open(2) would wait forever.  The test's
 * timeout is the hang's failure. */
Test(paths, a_fifo_or_socket_or_device_is_refused_not_opened, .init = make_d, .timeout = 120)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int sock = socket(AF_UNIX, SOCK_STREAM, 0);
	struct { const char *cmd, *says; int status; } cases[] = {
		{ LB " fifo", "fifo: is a FIFO, not a regular file", 1 },
		{ LB " D/*.zst fifo", "fifo: is a FIFO, not a regular file", 1 },
		{ LB " sock", "sock: is a socket, not a regular file", 1 },
		{ LB " /dev/null", "/dev/null: is a character device", 1 },
		{ "$SHARDTOOL verify fifo", "fifo: is a FIFO", 1 },
		{ "$SHARDTOOL inspect fifo", "fifo: is a FIFO", 1 },
		{ "$SHARDTOOL cat fifo", "fifo: is a FIFO", 1 },
		{ LB " --resume fifo D", "--resume: fifo: not a loader state (not a regular file)", 2 },
	};

	cr_assert_eq(tu_system("mkfifo %s/fifo", dir), 0);
	/* sun_path holds 108 bytes: the socket named from within dir (this
	 * test's own process). */
	cr_assert_eq(chdir(dir), 0);
	memcpy(sa.sun_path, "sock", 5);
	cr_assert_eq(bind(sock, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ran r = run("%s", cases[i].cmd);

		cr_assert_eq(r.status, cases[i].status, "%s: %s", cases[i].cmd, r.out);
		cr_assert(strstr(r.out, cases[i].says), "%s: no '%s' in %s", cases[i].cmd,
			  cases[i].says, r.out);
	}
	close(sock);
}

/* pf_file_open() itself: a FIFO is refused at once, not waited on. */
Test(paths, file_open_refuses_a_fifo, .init = make_d, .timeout = 60)
{
	char p[700];
	pf_error err;

	snprintf(p, sizeof(p), "%s/fifo2", dir);
	cr_assert_eq(mkfifo(p, 0644), 0);
	cr_assert_eq(pf_file_open(p, &err), -EINVAL);
	cr_assert(strstr(err.file, "fifo2") && strstr(err.msg, "a FIFO"), "%s: %s", err.file,
		  err.msg);
}

/* Every host of an MPI pod given the shell's glob: each plans from the
 * manifest (before, every rank failed reading it as a shard). */
Test(paths, an_mpirun_pod_reads_the_shell_glob, .init = make_d, .timeout = 240)
{
	ran r;

	tu_need_mpirun();
	r = run(TU_MPI_ENV "mpirun --oversubscribe -np 2 $LOADBENCH --quiet --json "
		"--per-core-batch 4 --epochs 1 --threads 1 --memory 128 D/*");
	cr_assert_eq(r.status, 0, "%s", r.out);
	cr_assert_null(strstr(r.out, "CRC"), "%s", r.out);
	cr_assert(strstr(r.out, "\"records\":"), "%s", r.out);
}
