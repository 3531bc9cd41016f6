/* SPDX-License-Identifier: Apache-2.0 */
/* Faults end to end: the loader in process and loadbench under
 * PODFEED_FAULTS (retried faults give the same batches, unretried ones name
 * the file and offset), and reads over regionfs (FUSE) that fail
 * (--eio-rate) or never answer (--stall-rate).  The fault injection itself
 * (the engine, pf_file_pread(), the spec) is test_io_faults.c's. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faults_util.h"
#include "pf_io.h"
#include "podfeed.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* The loader end to end (loader/ untouched: the environment)         */

#define DATASET_RECORDS 3000u
#define FEATURES "tokens:int64[512]:pad=0,label:int64[1]"

/* 3000 token records: 3 plain shards (stream files, read by pf_source
 * with pf_file_pread) in dir/raw, converted to 3 indexed shards (read by
 * the engine) in dir/z, with small frames so there are many reads. */
static void make_dataset(const char *d)
{
	const char *st = tu_env_tool("SHARDTOOL");

	cr_assert_eq(tu_system("%s synth --kind tokens --records %u --shards 3 --out %s/raw "
			       ">/dev/null", st, DATASET_RECORDS, d), 0);
	cr_assert_eq(tu_system("%s convert --shards 3 --frame-size 65536 --out %s/z %s/raw "
			       ">/dev/null", st, d, d), 0);
}

typedef struct loader_run {
	int ret;
	uint64_t steps, digest;
	pf_error err;
	pf_io_totals io;	/* this run's share of the process totals */
} loader_run;

/* One epoch over paths, every batch's bytes hashed in order (FNV-1a). */
static void run_loader(const char *const *paths, size_t npaths, loader_run *out)
{
	pf_loader_config cfg = { .paths = paths, .npaths = npaths, .features = FEATURES,
				 .per_core_batch = 16, .cores_per_host = 2, .seed = 5,
				 .shuffle = true, .shuffle_window = 256, .epochs = 1,
				 .threads = 2, .io_depth = 8 };
	pf_io_totals t0, t1;
	pf_loader *l;
	pf_batch *b;
	pf_error err;

	memset(out, 0, sizeof(*out));
	out->digest = 14695981039346656037ull;
	pf_error_clear(&err);
	pf_io_totals_get(&t0);
	out->ret = pf_loader_create(&l, &cfg, &err);
	if (out->ret < 0) {
		out->err = err;
		return;
	}
	while ((out->ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++) {
			const uint8_t *p = b->core[c].block;

			for (size_t i = 0; i < b->core[c].block_bytes; i++)
				out->digest = (out->digest ^ p[i]) * 1099511628211ull;
		}
		out->steps++;
		pf_loader_release(l, b);
	}
	if (out->ret < 0 && pf_loader_last_error(l))
		out->err = *pf_loader_last_error(l);
	pf_loader_free(l);
	pf_io_totals_get(&t1);
	out->io.reads = t1.reads - t0.reads;
	out->io.faults = t1.faults - t0.faults;
	out->io.retries = t1.retries - t0.retries;
	out->io.timeouts = t1.timeouts - t0.timeouts;
	out->io.errors = t1.errors - t0.errors;
}

/* Set the reliability variables (NULL: unset) and have pf_file_pread()
 * read them again, as a new process would. */
static void set_env(const char *faults, const char *retries, const char *backoff)
{
	pf_error err;

	faults ? setenv("PODFEED_FAULTS", faults, 1) : unsetenv("PODFEED_FAULTS");
	retries ? setenv("PODFEED_IO_RETRIES", retries, 1) : unsetenv("PODFEED_IO_RETRIES");
	backoff ? setenv("PODFEED_IO_BACKOFF_US", backoff, 1) : unsetenv("PODFEED_IO_BACKOFF_US");
	cr_assert_eq(pf_file_set_policy(NULL, &err), 0, "%s", err.msg);
}

/* Faults on every read path (index tails, frames through the engine,
 * stream files through pf_source), retried: the same batches, byte for
 * byte, as a run without faults. */
Test(loader_faults, retried_faults_give_the_same_batches, .timeout = 120)
{
	const char *d = tu_tmpdir();
	char z[256], raw[256];
	const char *paths[] = { z, raw };
	loader_run clean, faulty;

	make_dataset(d);
	snprintf(z, sizeof(z), "%s/z", d);
	snprintf(raw, sizeof(raw), "%s/raw", d);
	set_env(NULL, NULL, NULL);
	run_loader(paths, 2, &clean);
	cr_assert_eq(clean.ret, 0, "%s", clean.err.msg);
	cr_assert_eq(clean.steps, 2 * DATASET_RECORDS / 32);
	cr_assert_eq(clean.io.faults, 0);

	set_env("eio:0.15,short:0.2,delay=1ms:0.05,seed=9", "8", "200");
	run_loader(paths, 2, &faulty);
	cr_assert_eq(faulty.ret, 0, "%s", faulty.err.msg);
	cr_assert_eq(faulty.steps, clean.steps);
	cr_assert_eq(faulty.digest, clean.digest, "faults changed the batches");
	cr_assert_geq(faulty.io.faults, 5, "%llu faults in %llu reads", (unsigned long long)faulty.io.faults,
		       (unsigned long long)faulty.io.reads);
	cr_assert_gt(faulty.io.retries, 0);
	cr_assert_eq(faulty.io.errors, 0);
	set_env(NULL, NULL, NULL);
}

/* Retries off: the first EIO ends the load, naming the file and offset. */
Test(loader_faults, unretried_eio_names_the_file_and_offset, .timeout = 120)
{
	const char *d = tu_tmpdir();
	char z[256], raw[256], line[1024];
	const char *paths[] = { z };
	loader_run r;

	make_dataset(d);
	snprintf(z, sizeof(z), "%s/z", d);
	snprintf(raw, sizeof(raw), "%s/raw", d);
	/* Request 2 of the engine: a frame of an indexed shard (the index
	 * tails are read with pf_file_pread, numbered apart). */
	set_env("eio@2", "0", NULL);
	run_loader(paths, 1, &r);
	cr_assert_eq(r.ret, -EIO, "%d %s", r.ret, r.err.msg);
	pf_error_format(&r.err, line, sizeof(line));
	cr_assert(strstr(line, z) && strstr(line, ".zst: byte ") &&
		  strstr(line, "I/O error"), "%s", line);
	/* A stream file: pf_file_pread's request 1 is an index probe or the
	 * first read of a shard; either way the error names it. */
	paths[0] = raw;
	set_env("eio@1", "0", NULL);
	run_loader(paths, 1, &r);
	cr_assert_eq(r.ret, -EIO, "%d %s", r.ret, r.err.msg);
	pf_error_format(&r.err, line, sizeof(line));
	cr_assert(strstr(line, raw) && strstr(line, ".tfrecord: byte ") &&
		  strstr(line, "read failed"), "%s", line);
	set_env(NULL, NULL, NULL);
}

/* Run loadbench with env (a "VAR=value ..." prefix) and args.  @return
 * its exit status; *json its report when it printed one (decref), *err
 * its stderr (static). */
static int loadbench(const char *env, const char *args, json_t **json, const char **err)
{
	static char errtext[8192];
	char cmd[4096], errpath[256], *out;
	size_t cap = 1 << 16, got;
	FILE *e;
	json_error_t jerr;
	int st;

	snprintf(errpath, sizeof(errpath), "%s/loadbench.err", tu_tmpdir());
	snprintf(cmd, sizeof(cmd), "env %s %s --json --quiet --per-core-batch 16 --cores 2 "
		 "--threads 2 --seed 5 %s 2>%s", env, tu_env_tool("LOADBENCH"), args, errpath);
	out = malloc(cap);
	st = tu_capture(cmd, out, cap, &got);
	*json = got ? json_loads(out, 0, &jerr) : NULL;
	free(out);
	e = fopen(errpath, "r");
	cr_assert_not_null(e);
	got = fread(errtext, 1, sizeof(errtext) - 1, e);
	errtext[got] = 0;
	fclose(e);
	*err = errtext;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static uint64_t ju(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	cr_assert(json_is_integer(v), "no integer '%s'", key);
	return (uint64_t)json_integer_value(v);
}

/* The counts a run must reproduce. */
static void same_counts(json_t *a, json_t *b)
{
	static const char *const keys[] = { "records", "steps", "records_per_epoch",
					    "remainder_dropped", "bytes_read",
					    "bytes_decompressed" };

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cr_assert_eq(ju(a, keys[i]), ju(b, keys[i]), "%s", keys[i]);
}

Test(loader_faults, loadbench_with_faults, .timeout = 180)
{
	const char *d = tu_tmpdir(), *err;
	char args[512];
	json_t *clean, *faulty;

	make_dataset(d);
	snprintf(args, sizeof(args), "%s/z %s/raw", d, d);
	cr_assert_eq(loadbench("PODFEED_FAULTS=", args, &clean, &err), 0, "%s", err);
	cr_assert_not_null(clean);
	cr_assert_eq(ju(clean, "records"), 2 * DATASET_RECORDS / 32 * 32);
	cr_assert_eq(loadbench("PODFEED_FAULTS=eio:0.2,seed=3 PODFEED_IO_RETRIES=8 "
			       "PODFEED_IO_BACKOFF_US=200", args, &faulty, &err), 0, "%s", err);
	cr_assert_not_null(faulty);
	same_counts(clean, faulty);
	json_decref(faulty);
	json_decref(clean);
	/* Retries off: it fails, and says where. */
	cr_assert_eq(loadbench("PODFEED_FAULTS=eio:0.2,seed=3 PODFEED_IO_RETRIES=0", args,
			       &faulty, &err), 1);
	cr_assert(strstr(err, d) && strstr(err, ": byte ") &&
		  strstr(err, "I/O error"), "%s", err);
	if (faulty)
		json_decref(faulty);
	/* A malformed spec stops it before any read, naming the variable. */
	cr_assert_eq(loadbench("PODFEED_FAULTS=eio@0", args, &faulty, &err), 1);
	cr_assert(strstr(err, "PODFEED_FAULTS: byte 4: requests count from 1, not 0"), "%s",
		  err);
	if (faulty)
		json_decref(faulty);
}

/* ------------------------------------------------------------------ */
/* Over FUSE: regionfs's injected EIO and reads that never answer        */

static pid_t rfs_pid = -1;
static char rfs_mnt[128], rfs_backing[128], rfs_stats[128];

static void rfs_teardown(void)
{
	tu_regionfs_stop(&rfs_pid, rfs_mnt);
}

/* Skip where FUSE cannot work at all; make dir/backing and dir/mnt. */
static void rfs_dirs(const char *dir)
{
	tu_need_fuse();
	snprintf(rfs_backing, sizeof(rfs_backing), "%s/backing", dir);
	snprintf(rfs_mnt, sizeof(rfs_mnt), "%s/mnt", dir);
	snprintf(rfs_stats, sizeof(rfs_stats), "%s/stats.json", dir);
	cr_assert_eq(mkdir(rfs_backing, 0755), 0);
	cr_assert_eq(mkdir(rfs_mnt, 0755), 0);
}

/* Mount with `regionfs -f ARGS`; the child dies with this process. */
static void rfs_start(const char *args)
{
	rfs_pid = tu_regionfs_start(args, rfs_stats, rfs_backing, rfs_mnt, 10000);
}

/* Unmount (SIGTERM) and @return the counters it wrote (decref). */
static json_t *rfs_stop(void)
{
	json_error_t jerr;
	json_t *o;
	int status;

	cr_assert_eq(kill(rfs_pid, SIGTERM), 0);
	cr_assert_eq(waitpid(rfs_pid, &status, 0), rfs_pid);
	rfs_pid = -1;
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	o = json_load_file(rfs_stats, 0, &jerr);
	cr_assert_not_null(o, "%s: %s", rfs_stats, jerr.text);
	return o;
}

ParameterizedTestParameters(fuse_faults, stalled_read_times_out)
{
	return ft_both_backends();
}

/* A FUSE read that never answers: the engine's timeout cancels it (the
 * kernel interrupts the request, regionfs answers EINTR) and the request
 * fails with -ETIMEDOUT naming the file, in about the timeout. */
ParameterizedTest(int *which, fuse_faults, stalled_read_times_out, .fini = rfs_teardown,
		  .timeout = 60)
{
	const char *dir = tu_tmpdir();
	char path[256], data[8192];
	uint8_t buf[4096];
	pf_io_req r = { .offset = 4096, .len = sizeof(buf), .buf = buf, .buf_index = -1 };
	pf_error err;
	json_t *st;
	int64_t t0;
	pf_io *io;

	rfs_dirs(dir);
	memset(data, 'x', sizeof(data));
	snprintf(path, sizeof(path), "%s/shard.bin", rfs_backing);
	tu_write_file(path, data, sizeof(data));
	/* --direct-io: each read is a FUSE request of its own, which the
	 * kernel can interrupt (a buffered read waits for the page killably,
	 * see pf_io.h). */
	rfs_start("--stall-rate 1 --direct-io");
	io = tu_engine(ft_backend_names[*which], (pf_io_config){ .timeout_ms = 300 });
	snprintf(path, sizeof(path), "%s/shard.bin", rfs_mnt);
	pf_error_clear(&err);
	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_geq((int)r.file, 0, "%s", err.msg);
	t0 = tu_now_ns();
	cr_assert_eq(ft_read_one(io, &r), -ETIMEDOUT);
	cr_assert_geq(tu_now_ns() - t0, 300000000);
	pf_error_clear(&err);
	pf_io_req_error(io, &r, &err);
	cr_assert_str_eq(err.file, path);
	cr_assert_eq(err.offset, 4096);
	pf_io_free(io);
	st = rfs_stop();
	cr_assert_geq(ju(st, "stalled"), 1);
	cr_assert_eq(ju(st, "interrupted"), ju(st, "stalled"), "every stall was ended");
	json_decref(st);
}

/* A buffered FUSE read whose daemon never answers waits for its page
 * killably (or, read synchronously, for the daemon's answer after the
 * interrupt): the cancellation at its deadline does not end it, as a
 * bucket client retrying a dead server did not (issue 38).  With
 * pf_io_set_abandon() the request completes -ETIMEDOUT within the timeout
 * and its grace, marked abandoned and counted, naming the file; the
 * engine goes on and pf_io_free() returns; the buffer (a mapping of the
 * test's own) is made inaccessible in place, as the loader does. */
Test(fuse_faults, a_read_the_kernel_will_not_cancel_is_abandoned, .fini = rfs_teardown,
     .timeout = 120)
{
	const char *dir = tu_tmpdir();
	char path[256], data[1 << 16], line[PF_ERROR_LINE_MAX];
	uint8_t *buf = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
	pf_io_req r = { .offset = 0, .len = 1 << 16, .buf_index = -1 };
	pf_error err;
	uint64_t t0;
	pf_io *io;
	json_t *st;

	cr_assert_neq(buf, MAP_FAILED);
	r.buf = buf;
	rfs_dirs(dir);
	memset(data, 'x', sizeof(data));
	snprintf(path, sizeof(path), "%s/shard.bin", rfs_backing);
	tu_write_file(path, data, sizeof(data));
	rfs_start("--stall-rate 1");	/* buffered: no --direct-io */
	io = tu_engine("uring", (pf_io_config){ .timeout_ms = 300 });
	if (strcmp(pf_io_backend_name(io), "io_uring"))
		cr_skip_test("io_uring is not available here: abandoning is its back-end's");
	pf_io_set_abandon(io, true);
	snprintf(path, sizeof(path), "%s/shard.bin", rfs_mnt);
	pf_error_clear(&err);
	r.file = (uint32_t)pf_io_add_file(io, path, 0, &err);
	cr_assert_geq((int)r.file, 0, "%s", err.msg);
	t0 = tu_now_ns();
	cr_assert_eq(ft_read_one(io, &r), -ETIMEDOUT);
	cr_assert_geq(tu_now_ns() - t0, 300000000ull);
	cr_assert(r.abandoned, "the kernel did not end the read: abandoned");
	cr_assert_eq(pf_io_abandoned(io), 1);
	pf_error_clear(&err);
	pf_io_req_error(io, &r, &err);
	pf_error_format(&err, line, sizeof(line));
	cr_assert_str_eq(err.file, path, "%s", line);
	cr_assert(strstr(line, "timed out") && strstr(line, "abandoned"), "%s", line);
	/* The engine goes on: its file closes, the engine ends. */
	cr_assert_eq(pf_io_close_file(io, r.file), 0);
	pf_io_free(io);
	cr_assert_neq(mmap(buf, 1 << 16, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS |
			   MAP_NORESERVE, -1, 0), MAP_FAILED);
	st = rfs_stop();	/* the stalled request ends with the mount */
	cr_assert_geq(ju(st, "stalled"), 1);
	json_decref(st);
}

/* loadbench over a regionfs mount that fails 10% of reads: with retries
 * the same counts as straight from the backing files; retries off, it
 * fails naming a file under the mount. */
Test(fuse_faults, loadbench_over_regionfs_eio, .fini = rfs_teardown, .timeout = 240)
{
	const char *dir = tu_tmpdir(), *err;
	char args[512];
	json_t *direct, *mounted, *st;

	rfs_dirs(dir);
	make_dataset(rfs_backing);
	snprintf(args, sizeof(args), "%s/z %s/raw", rfs_backing, rfs_backing);
	cr_assert_eq(loadbench("PODFEED_FAULTS=", args, &direct, &err), 0, "%s", err);
	rfs_start("--eio-rate 0.1 --seed 3");
	snprintf(args, sizeof(args), "%s/z %s/raw", rfs_mnt, rfs_mnt);
	cr_assert_eq(loadbench("PODFEED_IO_RETRIES=10 PODFEED_IO_BACKOFF_US=1000", args,
			       &mounted, &err), 0, "%s", err);
	same_counts(direct, mounted);
	json_decref(mounted);
	st = rfs_stop();
	cr_assert_gt(ju(st, "eio_injected"), 0, "regionfs failed no read");
	json_decref(st);

	rfs_start("--eio-rate 1");
	cr_assert_eq(loadbench("PODFEED_IO_RETRIES=0", args, &mounted, &err), 1);
	cr_assert(strstr(err, rfs_mnt) && strstr(err, "I/O error"), "%s", err);
	if (mounted)
		json_decref(mounted);
	json_decref(rfs_stop());
	json_decref(direct);
}

/* loadbench over a mount whose reads never answer: it fails within about
 * the timeout, naming a file under the mount, instead of hanging. */
Test(fuse_faults, loadbench_over_a_stalled_mount_times_out, .fini = rfs_teardown,
     .timeout = 120)
{
	const char *dir = tu_tmpdir(), *err;
	char args[512];
	json_t *out, *st;
	int64_t t0;

	rfs_dirs(dir);
	make_dataset(rfs_backing);
	rfs_start("--stall-rate 1 --direct-io");
	snprintf(args, sizeof(args), "%s/z", rfs_mnt);
	t0 = tu_now_ns();
	cr_assert_eq(loadbench("PODFEED_IO_TIMEOUT_MS=300", args, &out, &err), 1);
	cr_log_info("failed after %.2f s", (double)(tu_now_ns() - t0) / 1e9);
	cr_assert(strstr(err, rfs_mnt) && strstr(err, ": byte ") &&
		  strstr(err, "timed out"), "%s", err);
	if (out)
		json_decref(out);
	st = rfs_stop();
	cr_assert_geq(ju(st, "stalled"), 1);
	json_decref(st);
}

Test(fuse_faults, stall_rate_is_checked)
{
	char cmd[512];

	if (!getenv("REGIONFS"))
		cr_skip_test("regionfs is not built (no libfuse3)");
	snprintf(cmd, sizeof(cmd), "%s --stall-rate 1.5 /tmp /nonexistent 2>&1 | "
		 "grep -q -- \"--stall-rate: '1.5' is out of range \\[0, 1\\]\"",
		 getenv("REGIONFS"));
	cr_assert_eq(tu_system("%s", cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "%s --stall-rate 0.5x /tmp /nonexistent >/dev/null 2>&1",
		 getenv("REGIONFS"));
	cr_assert_eq(tu_system("%s", cmd), 2);
}
