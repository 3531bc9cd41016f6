/* SPDX-License-Identifier: Apache-2.0 */
/* Private to io/: the engine's state and its back-end ops table. */
#ifndef PF_IO_INTERNAL_H
#define PF_IO_INTERNAL_H

#include <limits.h>
#include <liburing.h>
#include <pthread.h>
#include <sys/stat.h>

#include "common_internal.h"
#include "pf_io.h"

/* An index of the engine's file table: FREE (on the free list), OPENING
 * (its open in flight), OPEN, or FAILED (its open failed; the index is
 * the caller's until pf_io_close_file()). */
typedef enum pf_file_state {
	PF_FILE_FREE = 0,
	PF_FILE_OPENING,
	PF_FILE_OPEN,
	PF_FILE_FAILED,
} pf_file_state;

typedef struct pf_io_file {
	char *path;
	int fd;			/* a plain descriptor, or -1 */
	int kslot;		/* io_uring: its place in the ring's registered
				   table (a direct descriptor), or -1 */
	uint8_t state;		/* pf_file_state */
	bool direct;		/* opened with O_DIRECT */
	bool fuse;		/* on a FUSE file system */
	uint32_t busy;		/* its requests in flight (its open, reads) */
	uint32_t next_free;	/* FREE: the next index of the free list */
	uint64_t size;
	int64_t mtime_ns;
	pf_io_stats stats;
	size_t mount;		/* in io->regions, when there is one */
} pf_io_file;

/* A storage back-end: chosen from pf_io_backends[] by name, no
 * registration at run time (fio's ioengine_ops). */
typedef struct pf_io_op pf_io_op;

typedef struct pf_io_backend {
	const char *name;
	/* @return 0, or -errno; -EPERM/-ENOSYS mean "not here". */
	int (*init)(pf_io *io, const pf_io_config *cfg, pf_error *err);
	void (*exit)(pf_io *io);
	/* Give up a file's descriptor (fd, or ring slot kslot >= 0). */
	void (*close_fd)(pf_io *io, int fd, int kslot);
	/* Hand one queued request, a read or an open, to the back-end. */
	int (*queue)(pf_io *io, pf_io_op *op);
	/* Push queued work and wait for at least min completions, calling
	 * pf_io_complete() for each. */
	int (*run)(pf_io *io, unsigned min);
} pf_io_backend;

/* Injected faults (fault.c): the parsed form of a fault spec (the grammar
 * is in pf_io.h), and what it does to one read. */
typedef enum pf_fault_kind {
	PF_FAULT_NONE = 0,
	PF_FAULT_EIO,
	PF_FAULT_SHORT,
	PF_FAULT_ENOENT,
	PF_FAULT_HANG,
	PF_FAULT_DELAY,
} pf_fault_kind;

typedef struct pf_fault_rule {
	pf_fault_kind kind;
	bool open;		/* "open-": the engine's opens, not reads */
	uint64_t nth;		/* "@N": N; 0 for ":F" */
	double fraction;	/* ":F": F in [0, 1] */
	uint64_t delay_ns;	/* PF_FAULT_DELAY */
} pf_fault_rule;

typedef struct pf_fault_plan {
	pf_fault_rule rule[PF_FAULT_MAX_RULES];
	unsigned nrules;
	uint64_t seed;
} pf_fault_plan;

/* What the plan does to one read. */
typedef struct pf_fault_hit {
	pf_fault_kind error;	/* PF_FAULT_EIO, _ENOENT, _HANG, or NONE */
	bool short_read;
	uint64_t delay_ns;
	unsigned rules;		/* how many rules hit */
} pf_fault_hit;

/* pf_fault_parse(): parse len bytes of spec (name is what errors call
 * it, e.g. "PODFEED_FAULTS") into *plan.  @return the number of faults
 * (>= 0), or -EINVAL with err's message "NAME: byte N: what is wrong"
 * (N counts from 0 in spec) and *plan empty.  A NUL byte, a spec longer
 * than PF_FAULT_SPEC_MAX (checked first) and more than
 * PF_FAULT_MAX_RULES faults are malformed too. */
int pf_fault_parse(pf_fault_plan *plan, const char *spec, size_t len,
		   const char *name, pf_error *err);
/* pf_fault_format(): the plan's canonical spec (parses back to the same
 * plan).  @return the length it needs (as snprintf); dst holds as much
 * as fits, NUL-terminated when cap > 0. */
size_t pf_fault_format(const pf_fault_plan *plan, char *dst, size_t cap);
/* pf_fault_decide(): what the plan does to read number `issue` (from 0)
 * of request number `request` (from 1): a read's (open false, the rules
 * without "open-") or an open's (open true, the "open-" rules).  Pure. */
pf_fault_hit pf_fault_decide(const pf_fault_plan *plan, uint64_t request,
			     uint32_t issue, bool open);

/* One line of /proc/PID/mountinfo (proc(5)):
 *   36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
 *   ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS */
typedef struct pf_mountinfo_entry {
	uint32_t mount_id, parent_id;
	uint32_t major, minor;
	const char *root, *mount_point;	/* unescaped (\040 is a space) */
	const char *options;
	unsigned optional_fields;	/* how many between OPTIONS and "-" */
	const char *fstype, *source;	/* unescaped */
	const char *super_options;	/* "" when the line has none */
} pf_mountinfo_entry;

/* pf_mountinfo_parse_line(): one line (len bytes, no newline) into *e;
 * the strings are copied, unescaped, into buf (cap bytes; len + 8 is
 * always enough).  Octal escapes \ooo (the kernel writes space, tab,
 * newline and backslash so) are decoded; a backslash not followed by
 * three octal digits is kept as it is; \000 and values above \377 are
 * malformed.  @return 0,
 * -EBADMSG with err naming the field that is wrong, or -ENOBUFS. */
int pf_mountinfo_parse_line(const char *line, size_t len,
			    pf_mountinfo_entry *e, char *buf, size_t cap,
			    pf_error *err);

/* How reads are retried, timed out and faulted (fault.c): from a
 * pf_io_config, else the environment, else the defaults (pf_io.h). */
typedef struct pf_io_policy {
	pf_fault_plan faults;
	unsigned retries;	/* transient errors retried per request */
	uint64_t backoff_ns;	/* before the first retry; 0: none */
	uint64_t timeout_ns;	/* each read; 0: no limit */
} pf_io_policy;

/* An open's steps: the open of the path, O_NONBLOCK (open(2) of a FIFO
 * with no writer would wait for one, forever, in whatever thread does it:
 * an io-wq worker, an opening thread), then a stat of the descriptor it
 * gave, so that what is kept is what was checked: a regular file (a path
 * swapped for a FIFO between a stat and an open would be opened all the
 * same), O_NONBLOCK cleared.  io_uring with a registered table: then the
 * descriptor into the table (IORING_OP_FILES_UPDATE; a slot cannot be
 * stat'ed, so the open is not made into it), the plain one closed. */
enum { PF_OPEN_STEP_OPEN = 0, PF_OPEN_STEP_STAT, PF_OPEN_STEP_INSTALL };
#define PF_STATX_MASK (STATX_TYPE | STATX_MODE | STATX_SIZE | STATX_MTIME)

/* A request in the engine, from pf_io_submit() (or pf_io_open()) until it
 * completes: the caller's pf_io_req (what the caller gives and gets) and
 * the state of the read (or open step) in flight for it, which no caller
 * sees.  An engine has queue_depth of them; pf_file_pread() one on its
 * stack. */
struct pf_io_op {
	pf_io_req *req;
	uint64_t start_ns;
	uint64_t seq;		/* request number in its engine, from 1 */
	uint64_t delay_ns;	/* wait before the next read: backoff and
				   injected latency */
	uint64_t deadline_ns;	/* io_uring: when the read in flight times out */
	uint32_t issue;		/* reads issued (or faulted) so far */
	uint32_t issue_len;	/* bytes the read in flight asks for */
	uint32_t slot;		/* io_uring: its place among the reads in flight */
	uint16_t eintr;		/* EINTR re-issues */
	uint8_t action;		/* pf_fault_kind done in place of the read, or 0 */
	uint8_t cqes;		/* io_uring: completions still due */
	bool timed_out;		/* io_uring: cancelled at its deadline */
	bool abandoned;		/* io_uring: its request completed without it
				   (pf_io_set_abandon()); its completions
				   still due are swallowed, then it is a
				   spare again */
	int32_t read_res;	/* io_uring: the read's own result */
	bool counted;		/* a read begun in io->regions and file->busy */
	bool sync;		/* pf_io_add_file()'s open: not for pf_io_reap() */
	bool *sync_done;	/* ... set when it completes */
	struct __kernel_timespec ts;	/* io_uring: the delay's, until submitted */
	/* An open (req->open): */
	uint8_t step;		/* PF_OPEN_STEP_* */
	bool holds_fd;		/* open_fd is the op's, from the open until
				   the stat's judgement hands it on */
	bool opening;		/* io_uring: its open is in the kernel */
	int open_fd;		/* the open's descriptor, while holds_fd */
	int install_fd;		/* io_uring: the descriptor going into the
				   table; the kernel writes its slot here */
	bool blocking;		/* on FUSE: its open and stat wait in io-wq
				   (IOSQE_ASYNC), never in the submitter */
	int open_flags;		/* of the next open: O_DIRECT while wanted */
	const char *path;	/* the file's (lives while it is open) */
	struct statx stx;	/* what the stat of the descriptor found */
};

/* Whether a file system is FUSE, by device: asked once per device. */
typedef struct pf_fs_kind {
	dev_t dev;
	bool fuse;
} pf_fs_kind;
#define PF_IO_FS_KINDS 16u

struct pf_io {
	const pf_io_backend *be;
	pf_region_table *regions;	/* reads are counted there too, or NULL */
	unsigned queue_depth, max_files;
	pf_io_policy policy;
	uint64_t requests;	/* submitted so far: the next one's number - 1 */
	uint64_t open_requests;	/* opens so far, numbered apart */
	/* The file table: files[0, nfiles) have been handed out; the FREE
	 * ones are a list through next_free. */
	pf_io_file *files;
	uint32_t nfiles, files_cap;
	uint32_t free_file;	/* head of the free list, or UINT32_MAX */
	unsigned inflight;	/* submitted, not reaped */
	unsigned sync_inflight;	/* pf_io_add_file()'s, not counted above */
	/* Counters: closed files' reads, opens, closes, files held. */
	pf_io_stats closed_reads, opens;
	uint64_t closes;
	uint32_t files_open, files_open_peak;
	pf_fs_kind fs_kinds[PF_IO_FS_KINDS];
	unsigned nfs_kinds;
	/* The directory of the last open (open_dir_len bytes, 0: none yet),
	 * and whether it is on FUSE.  In place, not allocated: a failed
	 * allocation there could only turn into a wrong guess, not into the
	 * open's -ENOMEM. */
	char open_dir[PATH_MAX];
	size_t open_dir_len;
	bool open_dir_fuse;

	/* the requests in the engine, and those of them not in use: ops
	 * holds 2 x queue_depth, the second half spares, which take the place
	 * of abandoned ones (pf_io_set_abandon()) */
	pf_io_op *ops;
	pf_io_op **idle;
	unsigned nidle;
	pf_io_op **spare;
	unsigned nspare;
	bool abandon;
	unsigned nabandoned;	/* abandoned, their read still in the kernel */
	/* completed requests waiting to be reaped (ring of queue_depth) */
	pf_io_req **done;
	unsigned done_head, done_count;

	/* io_uring */
	struct io_uring ring;
	pf_io_op **injected;	/* faulted in place of a read, no delay:
				   completed by the run loop, not the kernel */
	unsigned ninjected;
	pf_io_op **reading;	/* reads in the kernel, for their deadlines */
	unsigned nreading;
	bool ring_ready;
	bool files_registered;	/* the ring has a sparse table of max_files */
	bool ring_opens;	/* IORING_OP_OPENAT, _STATX and _CLOSE work */
	bool fixed_opens;	/* opened files go into the table (FILES_UPDATE
				   at IORING_FILE_INDEX_ALLOC) */
	pf_io_op **local;	/* io_uring: open steps done in this thread
				   (no IORING_OP_OPENAT), result in read_res */
	unsigned nlocal;
	bool buffers_registered;
	/* A sparse buffer table: buffer i is put in it at its first read
	 * (buf_live[i]), not all at creation. */
	uint8_t *buffers_base;
	size_t buffer_size;
	unsigned nbuffers;
	uint8_t *buf_live;	/* [nbuffers]; NULL: all registered at creation */
	unsigned sq_pending;	/* sqes prepared, not yet submitted */

	/* pread: reads queued, run at reap time */
	pf_io_op **pending;
	unsigned npending;
	/* pread: opens, on threads of their own (a ring of queue_depth each
	 * way, under open_mu); their results in read_res */
	pthread_mutex_t open_mu;
	pthread_cond_t open_work, open_done;
	pthread_t open_threads[PF_IO_OPEN_THREADS];
	unsigned nopen_threads;
	bool open_pool, open_stop;
	pf_io_op **open_queue, **open_fin;
	unsigned queue_head, nqueued, nfin;
	unsigned opens_out;	/* handed to the threads, not yet judged */
};

extern const pf_io_backend pf_io_uring_backend;
extern const pf_io_backend pf_io_pread_backend;

#define PF_IO_DIRECT_ALIGN 4096u

/* Account a finished read of res bytes (or -errno) of op, or an open
 * step's result (a descriptor, or 0 for the stat; or -errno); @return
 * true when its request is complete (req->result set), false when it
 * must be issued again: the next read or step is then already planned
 * (in op), and the back-end carries it out (short read, EINTR, a
 * transient error, the stat after the open). */
bool pf_io_account(pf_io *io, pf_io_op *op, int64_t res);
/* Move a complete request to the done queue; op is free again. */
void pf_io_complete(pf_io *io, pf_io_op *op);

/* fault.c: the policy, and the reads of one request.  All request state
 * is in op and its req (done_bytes, retries); st gets the counters. */
extern pf_io_totals pf_io_process_totals;	/* updated atomically */
/* @return 0, or -EINVAL with err naming the field or variable. */
int pf_io_policy_init(pf_io_policy *p, const pf_io_config *cfg, pf_error *err);
/* The wait before retry number `retry` (from 1): doubling, capped. */
uint64_t pf_io_backoff_ns(const pf_io_policy *p, uint32_t retry);
/* Plan op's next read (or open step: the open draws from the "open-"
 * faults, the stat after it none): the fault it gets (op->action, or 0
 * for a real read), its length (op->issue_len), the wait before it
 * (op->delay_ns: the backoff the last judgement set, plus injected
 * latency).  direct: the file is read with O_DIRECT (a short read stays
 * block-aligned). */
void pf_io_attempt_plan(const pf_io_policy *p, pf_io_op *op, bool direct,
			pf_io_stats *st);
/* Judge the planned read's result: @return true when the request is
 * complete (req->result and req->injected set), false when another read
 * is due (op->delay_ns is the backoff to wait first). */
bool pf_io_attempt_judge(const pf_io_policy *p, pf_io_op *op, int64_t res,
			 pf_io_stats *st);
/* The same for an open step that failed (res < 0): @return true when the
 * request is complete with res, false when the step is due again (EINTR,
 * or EIO/EAGAIN with retries left: op->delay_ns set). */
bool pf_io_open_judge_error(const pf_io_policy *p, pf_io_op *op, int64_t res,
			    pf_io_stats *st);
/* Describe req's failure in err (file, offset of the failed read, cause,
 * retries; an open's: the file and the cause).  @return req->result, or
 * 0 when it did not fail. */
int pf_io_failure(const pf_io_policy *p, const pf_io_req *req, const char *path,
		  pf_error *err);
/* The read end of a pipe nobody writes ('hang' faults), or -errno. */
int pf_fault_hang_fd(void);

/* file.c: a planned read carried out at once: the delay slept, an
 * injected error returned, else the read issued with p's timeout.
 * @return bytes, or -errno (-ETIMEDOUT when the timeout ended it). */
int64_t pf_io_attempt_sync(const pf_io_policy *p, const pf_io_op *op, int fd);
/* One read(2) (off < 0) or pread(2) bounded by timeout_ns (0: none), the
 * thread's timer signal interrupting it.  @return bytes or -errno. */
int64_t pf_read_deadline(int fd, void *buf, size_t len, int64_t off,
			 uint64_t timeout_ns);
/* An open step carried out at once in this thread (the pread back-end's
 * threads, io_uring without IORING_OP_OPENAT): the delay slept, an
 * injected error returned, else open(2) of op->path with op->open_flags
 * (@return the descriptor) or statx(2) of op->open_fd into op->stx
 * (@return 0), bounded by p's timeout.  @return -errno on failure. */
int pf_io_open_step_sync(const pf_io_policy *p, pf_io_op *op);
void pf_sleep_ns(uint64_t ns);

#endif
