/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the Criterion tests (never linked into the library). */
#ifndef PF_TESTUTIL_H
#define PF_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pf_common.h"
#include "pf_io.h"

/* Read a whole file into a malloc'd buffer (caller frees); aborts the
 * test with a message when it cannot. */
uint8_t *tu_read_file(const char *path, size_t *len);
/* The loader's state (malloc'd, *len bytes), asserted saved whole. */
struct pf_loader;
uint8_t *tu_save_state(struct pf_loader *l, size_t *len);
/* Write len bytes to path (creating/truncating); aborts on failure. */
void tu_write_file(const char *path, const void *data, size_t len);
/* PF_FIXTURES_DIR "/" name, in a static buffer (one at a time). */
const char *tu_fixture(const char *name);
/* A fresh empty directory under /tmp, removed when the test process
 * exits (at most 16 per test). */
const char *tu_tmpdir(void);
/* The same in memory (/dev/shm, a tmpfs) where there is one, else under
 * /tmp: for tests that write thousands of files (a file made on this
 * machine's ext4 costs ~1 ms of system time). */
const char *tu_tmpdir_mem(void);
/* Run a shell command, return its exit status (or -1). */
int tu_system(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Run a shell command with its stdout into out (at most cap - 1 bytes,
 * NUL-terminated; *len the bytes read when len is not NULL).  @return
 * pclose()'s wait status. */
int tu_capture(const char *cmd, char *out, size_t cap, size_t *len);
/* text into out with each of letters replaced by its values[] ("ZE",
 * { dataset, empty }: "Z E" -> "dataset empty"). */
void tu_subst(char *out, size_t cap, const char *text, const char *letters,
	      const char *const *values);
/* Run "tool args 2>&1": fails the test unless it exits with status and
 * its output holds says (quoted with the output when not). */
void tu_expect_run(const char *tool, const char *args, int status, const char *says);
/* The value of environment variable name (a tool's path that meson test
 * sets); fails the test when unset. */
const char *tu_env_tool(const char *name);
/* CLOCK_MONOTONIC in nanoseconds, and a sleep in milliseconds. */
int64_t tu_now_ns(void);
void tu_sleep_ms(int ms);
/* Whether path is a mount point (mountinfo's fifth field; for temporary
 * paths with nothing to escape). */
bool tu_is_mounted(const char *path);

/* Open MPI under the test runner: the prefix of a shell command that
 * starts mpirun without the launcher variables of the runner itself
 * leaking in (as root Open MPI needs both ALLOW variables);
 * tu_need_mpirun(), which skips the test where podfeed was built without
 * MPI or mpirun is not installed; and tu_need_launcher(), which skips it
 * only without mpirun.  Both give this test's mpirun runs a TMPDIR of
 * their own: mpiruns that share one race on its session directory
 * (ompi.HOST.UID), which one creates while another, ending, removes it
 * ("A call to mkdir was unable to create the desired directory ... File
 * exists", orte_session_dir failed). */
#define TU_MPI_ENV                                                           \
	"env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK "   \
	"-u PMI_RANK -u PMI_SIZE -u TPU_WORKER_ID -u TPU_WORKER_HOSTNAMES "    \
	"-u CLOUD_TPU_TASK_ID -u RANK -u WORLD_SIZE "                          \
	"OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
void tu_need_mpirun(void);
void tu_need_launcher(void);

/* Datasets of records with known ids: tu_id_example() encodes the
 * Example {"id": [id], "v": [id, id/2, id/3]} (@return its length);
 * tu_write_id_shard() writes an indexed shard of ids [first,
 * first+count) in frames of frame_size bytes (align 0 or the frame
 * alignment); tu_write_id_stream() a plain (or gzip) TFRecord file. */
int64_t tu_id_example(uint64_t id, uint8_t *buf, size_t cap);
/* tu_id_example()'s Example and a feature "pad" of TU_PAD_BYTES
 * pseudo-random bytes, so that a compressed file is about as large as a
 * plain one.  @return its length. */
#define TU_PAD_BYTES 1500u
int64_t tu_padded_example(uint64_t id, uint8_t *buf, size_t cap);
void tu_write_id_shard(const char *path, uint64_t first, uint64_t count,
		       size_t frame_size, uint32_t align);
void tu_write_id_stream(const char *path, uint64_t first, uint64_t count, bool gz);
/* A fresh temporary directory holding ids [first, first+count) in
 * `shards` indexed shards s000.tfrecord.zst... of about equal counts, in
 * order (frames of frame_size bytes): @return the directory. */
const char *tu_id_shards(uint64_t first, uint64_t count, uint32_t shards, size_t frame_size);
/* A fresh temporary directory holding one indexed shard of ids
 * [0, count) (4 KiB frames): @return the directory. */
const char *tu_id_dataset(uint64_t count);

/* An I/O engine of backend ("uring" or "pread") with cfg (queue depth
 * 16 unless cfg says): the test is skipped where the kernel refuses
 * io_uring (EPERM, ENOSYS), fails on any other error. */
pf_io *tu_engine(const char *backend, pf_io_config cfg);

/* regionfs mounts: tu_need_fuse() skips the test where /dev/fuse cannot be
 * opened or regionfs was not built; tu_regionfs_start() runs `regionfs -f
 * ARGS --stats STATS FROM MNT` (the child gets SIGTERM if the test process
 * dies) and waits up to timeout_ms for the mount (a regionfs that exits
 * first fails the test); tu_regionfs_stop() kills it and unmounts (safe
 * after a failed assertion, and with *pid -1). */
void tu_need_fuse(void);
pid_t tu_regionfs_start(const char *args, const char *stats, const char *from,
			const char *mnt, int timeout_ms);
void tu_regionfs_stop(pid_t *pid, const char *mnt);

/* The allocator every test runs with: installed through the public
 * pf_allocator_set() before main(), so that every allocation the library
 * makes (zstd's, zlib's and protobuf-c's too) goes through it.  It counts
 * the allocations asked for (failed ones too) and the blocks live, and
 * makes the nth allocation from now fail, once, with tu_alloc_fail_at(n)
 * (0 turns that off); the allocations after it succeed again.  A test
 * that installs another allocator puts tu_allocator back when it ends. */
extern const pf_allocator tu_allocator;
void tu_alloc_fail_at(uint64_t n);
uint64_t tu_alloc_count(void);
uint64_t tu_alloc_live(void);

#endif
