/* SPDX-License-Identifier: Apache-2.0 */
/* The I/O engine: the file table (files opened as requests, closed, their
 * indexes reused), request bookkeeping, retries, counters, and the choice
 * of back-end.  Every read and open step a request issues is planned
 * (faults, backoff) and judged (continue, retry, complete) here with
 * fault.c's policy, so both back-ends behave alike; how a step reaches
 * the kernel is the back-end's (uring.c, pread.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "io_internal.h"

#define PF_IO_DEPTH_DEFAULT 64u
#define PF_IO_FILES_DEFAULT 4096u
#define PF_FUSE_SUPER_MAGIC 0x65735546	/* linux/magic.h */

_Static_assert(PF_IO_HIST_BUCKETS == PF_HIST_BUCKETS,
	       "pf_io_stats.hist is common/'s latency histogram");
/* pf_io_req is ABI: its late fields sit in what was padding. */
_Static_assert(sizeof(pf_io_req) == 72, "pf_io_req's size is the ABI's");

static const pf_io_backend *backend_by_name(const char *name)
{
	if (!strcmp(name, "uring") || !strcmp(name, "io_uring"))
		return &pf_io_uring_backend;
	if (!strcmp(name, "pread"))
		return &pf_io_pread_backend;
	return NULL;
}

int pf_io_create(pf_io **out, const pf_io_config *cfg, pf_error *err)
{
	static const pf_io_config defaults = { 0 };
	const char *want;
	pf_io *io;
	int ret;

	pf_error_clear(err);
	if (!cfg)
		cfg = &defaults;
	io = pf_calloc(1, sizeof(*io));
	if (!io)
		return -ENOMEM;
	io->queue_depth = cfg->queue_depth ? cfg->queue_depth : PF_IO_DEPTH_DEFAULT;
	io->max_files = cfg->max_files ? cfg->max_files : PF_IO_FILES_DEFAULT;
	io->regions = cfg->regions;
	ret = pf_io_policy_init(&io->policy, cfg, err);
	if (ret < 0)
		goto fail;
	io->ops = pf_calloc(2 * (size_t)io->queue_depth, sizeof(*io->ops));
	io->idle = pf_calloc(io->queue_depth, sizeof(*io->idle));
	io->spare = pf_calloc(io->queue_depth, sizeof(*io->spare));
	io->done = pf_calloc(io->queue_depth, sizeof(*io->done));
	io->pending = pf_calloc(io->queue_depth, sizeof(*io->pending));
	io->injected = pf_calloc(io->queue_depth, sizeof(*io->injected));
	io->reading = pf_calloc(io->queue_depth, sizeof(*io->reading));
	io->local = pf_calloc(io->queue_depth, sizeof(*io->local));
	io->open_queue = pf_calloc(io->queue_depth, sizeof(*io->open_queue));
	io->open_fin = pf_calloc(io->queue_depth, sizeof(*io->open_fin));
	io->free_file = UINT32_MAX;
	if (!io->ops || !io->idle || !io->spare || !io->done || !io->pending || !io->injected ||
	    !io->reading || !io->local || !io->open_queue || !io->open_fin) {
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				   "no memory for an I/O engine of depth %u",
				   io->queue_depth);
		goto fail;
	}
	for (unsigned i = 0; i < io->queue_depth; i++) {
		io->idle[io->nidle++] = &io->ops[io->queue_depth - 1 - i];
		io->spare[io->nspare++] = &io->ops[2 * io->queue_depth - 1 - i];
	}

	want = cfg->backend ? cfg->backend : getenv("PODFEED_IO");
	if (want && *want) {
		io->be = backend_by_name(want);
		if (!io->be) {
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "unknown I/O back-end '%s' (uring or pread)",
					   want);
			goto fail;
		}
	} else {
		io->be = &pf_io_uring_backend;
	}
	ret = io->be->init(io, cfg, err);
	if (ret < 0 && io->be == &pf_io_uring_backend && !(want && *want) &&
	    (ret == -EPERM || ret == -ENOSYS || ret == -EACCES)) {
		/* Say it once per process, not once per thread. */
		static int said;
		if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
			fprintf(stderr, "podfeed: io_uring is not available here (%s); "
				"reading with pread\n", pf_strerror(ret));
		pf_error_clear(err);
		io->be = &pf_io_pread_backend;
		ret = io->be->init(io, cfg, err);
	}
	if (ret < 0)
		goto fail;
	*out = io;
	return 0;
fail:
	io->be = NULL;
	pf_io_free(io);
	return ret;
}

void pf_io_free(pf_io *io)
{
	if (!io)
		return;
	/* The back-end first: its threads and the ring may still hold
	 * descriptors; registered ones go with the ring. */
	if (io->be)
		io->be->exit(io);
	/* Opens whose descriptor was not yet judged. */
	for (unsigned i = 0; io->ops && i < io->queue_depth; i++)
		if (io->ops[i].holds_fd)
			close(io->ops[i].open_fd);
	for (uint32_t i = 0; i < io->nfiles; i++) {
		if (io->files[i].fd >= 0)
			close(io->files[i].fd);
		pf_free(io->files[i].path);
	}
	pf_free(io->files);
	/* An abandoned stat still in the kernel writes its op's statx when
	 * it ends: the ops stay (a few KiB, once per stuck engine). */
	if (!io->nabandoned)
		pf_free(io->ops);
	pf_free(io->idle);
	pf_free(io->spare);
	pf_free(io->done);
	pf_free(io->pending);
	pf_free(io->injected);
	pf_free(io->reading);
	pf_free(io->local);
	pf_free(io->open_queue);
	pf_free(io->open_fin);
	pf_free(io);
}

const char *pf_io_backend_name(const pf_io *io)
{
	return io->be == &pf_io_uring_backend ? "io_uring" : "pread";
}

bool pf_io_buffers_registered(const pf_io *io)
{
	return io->buffers_registered;
}

/* Add st's counters to sum's. */
static void stats_add(pf_io_stats *sum, const pf_io_stats *st)
{
	sum->bytes += st->bytes;
	sum->ops += st->ops;
	sum->errors += st->errors;
	sum->retries += st->retries;
	sum->busy_ns += st->busy_ns;
	for (unsigned b = 0; b < PF_IO_HIST_BUCKETS; b++)
		sum->hist[b] += st->hist[b];
	sum->short_reads += st->short_reads;
	sum->faults += st->faults;
	sum->timeouts += st->timeouts;
}

/* ------------------------------------------------------------------ */
/* The file table                                                       */

/* A free index (from the free list, else a new one).  @return it, or
 * UINT32_MAX without memory. */
static uint32_t file_take(pf_io *io)
{
	uint32_t i = io->free_file;

	if (i != UINT32_MAX) {
		io->free_file = io->files[i].next_free;
		return i;
	}
	if (io->nfiles == io->files_cap) {
		uint32_t cap = io->files_cap ? io->files_cap * 2 : 64;
		pf_io_file *f = cap > io->files_cap ? pf_realloc(io->files, cap * sizeof(*f))
						    : NULL;

		if (!f)
			return UINT32_MAX;
		io->files = f;
		io->files_cap = cap;
	}
	return io->nfiles++;
}

static void file_give_back(pf_io *io, uint32_t i)
{
	pf_io_file *f = &io->files[i];

	pf_free(f->path);
	memset(f, 0, sizeof(*f));
	f->state = PF_FILE_FREE;
	f->fd = f->kslot = -1;
	f->next_free = io->free_file;
	io->free_file = i;
	io->files_open--;
}

static pf_io_file *file_at(const pf_io *io, uint32_t i)
{
	return i < io->nfiles && io->files[i].state != PF_FILE_FREE ? &io->files[i] : NULL;
}

static const pf_io_file *open_file(const pf_io *io, uint32_t i)
{
	const pf_io_file *f = file_at(io, i);

	return f && f->state == PF_FILE_OPEN ? f : NULL;
}

/* Whether path lies on a FUSE file system (statfs(2)). */
static bool on_fuse(const char *path)
{
	struct statfs sfs;

	return statfs(path, &sfs) == 0 && sfs.f_type == PF_FUSE_SUPER_MAGIC;
}

/* Whether the file system of dev (path lies on it) is FUSE: asked once
 * per device, not per file. */
static bool fs_is_fuse(pf_io *io, dev_t dev, const char *path)
{
	bool fuse;

	for (unsigned i = 0; i < io->nfs_kinds; i++)
		if (io->fs_kinds[i].dev == dev)
			return io->fs_kinds[i].fuse;
	fuse = on_fuse(path);
	if (io->nfs_kinds < PF_IO_FS_KINDS)
		io->fs_kinds[io->nfs_kinds++] = (pf_fs_kind){ dev, fuse };
	return fuse;
}

/* Whether path's directory is on FUSE, asked once per directory in a row
 * (statfs(2) of the directory; a FUSE STATFS is answered locally).  An
 * open there blocks for a round trip even when its lookup is cached, and
 * io_uring would run it in the submitting thread: one open at a time. */
static bool dir_is_fuse(pf_io *io, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t dlen = slash ? (size_t)(slash - path) + (slash == path) : 1;

	if (io->open_dir_len == dlen && !memcmp(io->open_dir, slash ? path : ".", dlen))
		return io->open_dir_fuse;
	/* A directory this long names no file: the open fails, ENAMETOOLONG. */
	if (dlen >= sizeof(io->open_dir))
		return false;
	memcpy(io->open_dir, slash ? path : ".", dlen);
	io->open_dir[dlen] = '\0';
	io->open_dir_len = dlen;
	io->open_dir_fuse = on_fuse(io->open_dir);
	return io->open_dir_fuse;
}

/* Queue op, an open of file i (its index set up), with the back-end. */
static int open_queue(pf_io *io, pf_io_op *op, pf_io_req *req, uint32_t i, unsigned flags)
{
	pf_io_file *f = &io->files[i];

	req->file = i;
	req->open = true;
	req->not_regular = 0;
	req->abandoned = false;
	req->done_bytes = 0;
	req->retries = 0;
	req->result = 0;
	req->injected = false;
	*op = (pf_io_op){ .req = req, .start_ns = pf_now_ns(), .seq = ++io->open_requests,
			  .step = PF_OPEN_STEP_OPEN, .path = f->path, .open_fd = -1,
			  .open_flags = O_RDONLY | O_NONBLOCK | O_NOCTTY |
					((flags & PF_IO_DIRECT) ? O_DIRECT : 0),
			  .blocking = io->be == &pf_io_uring_backend && dir_is_fuse(io, f->path) };
	if ((flags & PF_IO_FUSE_DIRECT) && io->be == &pf_io_uring_backend && op->blocking)
		op->open_flags |= O_DIRECT;
	f->busy++;
	pf_io_attempt_plan(&io->policy, op, false, &io->opens);
	return io->be->queue(io, op);
}

/* A new index for path, OPENING.  @return it, or UINT32_MAX (-ENOMEM). */
static uint32_t file_new(pf_io *io, const char *path)
{
	uint32_t i = file_take(io);
	pf_io_file *f;

	if (i == UINT32_MAX)
		return i;
	f = &io->files[i];
	memset(f, 0, sizeof(*f));
	f->fd = f->kslot = -1;
	f->state = PF_FILE_OPENING;
	io->files_open++;
	f->path = pf_strdup(path);
	if (!f->path) {
		file_give_back(io, i);
		return UINT32_MAX;
	}
	if (io->files_open > io->files_open_peak)
		io->files_open_peak = io->files_open;
	return i;
}

int pf_io_open(pf_io *io, pf_io_req *req, const char *path, unsigned flags)
{
	uint32_t i;

	if (!path || !*path)
		return -EINVAL;
	/* Ops go idle when their request completes, before it is reaped, so
	 * there is one whenever inflight is below the depth. */
	if (io->inflight + io->sync_inflight >= io->queue_depth)
		return -EBUSY;
	i = file_new(io, path);
	if (i == UINT32_MAX)
		return -ENOMEM;
	io->inflight++;
	return open_queue(io, io->idle[--io->nidle], req, i, flags);
}

int pf_io_add_file(pf_io *io, const char *path, unsigned flags, pf_error *err)
{
	pf_io_req req = { 0 };
	bool done = false;
	uint32_t i;
	pf_io_op *op;
	int ret;

	pf_error_clear(err);
	if (!path || !*path)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "an empty path");
	/* An op of its own: wait for one when every op is in flight (their
	 * completions stay queued for the caller). */
	while (!io->nidle) {
		ret = io->be->run(io, 1);
		if (ret < 0)
			return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
					    "the I/O engine failed: %s", pf_strerror(ret));
	}
	i = file_new(io, path);
	if (i == UINT32_MAX) {
		pf_error_set_file(err, path);
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "no memory to open it");
	}
	op = io->idle[--io->nidle];
	io->sync_inflight++;
	ret = open_queue(io, op, &req, i, flags);
	op->sync = true;
	op->sync_done = &done;
	while (ret == 0 && !done)
		ret = io->be->run(io, 1);
	if (ret < 0)
		/* The engine itself failed: the open may still be in the
		 * kernel, so its index stays taken. */
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "the I/O engine failed: %s",
				    pf_strerror(ret));
	if (req.result < 0) {
		ret = pf_io_failure(&io->policy, &req, path, err);
		file_give_back(io, i);	/* a failed open holds no descriptor */
		return ret;
	}
	return (int)i;
}

int pf_io_close_file(pf_io *io, uint32_t file)
{
	pf_io_file *f = file_at(io, file);

	if (!f)
		return -EBADF;
	if (f->state == PF_FILE_OPENING || f->busy)
		return -EBUSY;
	if (f->fd >= 0 || f->kslot >= 0)
		io->be->close_fd(io, f->fd, f->kslot);
	if (f->state == PF_FILE_OPEN)
		stats_add(&io->closed_reads, &f->stats);
	io->closes++;
	file_give_back(io, file);
	return 0;
}

uint64_t pf_io_file_size(const pf_io *io, uint32_t file)
{
	const pf_io_file *f = open_file(io, file);

	return f ? f->size : 0;
}

int64_t pf_io_file_mtime(const pf_io *io, uint32_t file)
{
	const pf_io_file *f = open_file(io, file);

	return f ? f->mtime_ns : 0;
}

const char *pf_io_file_path(const pf_io *io, uint32_t file)
{
	const pf_io_file *f = file_at(io, file);

	return f ? f->path : NULL;
}

bool pf_io_file_direct(const pf_io *io, uint32_t file)
{
	const pf_io_file *f = open_file(io, file);

	return f && f->direct;
}

/* The stat of an open's descriptor found a regular file: the descriptor
 * is the file's from here (closed with it), blocking again, its size and
 * time the stat's. */
static void open_keep(pf_io *io, pf_io_op *op)
{
	pf_io_file *f = &io->files[op->req->file];

	/* Reads of a regular file ignore O_NONBLOCK, but io_uring fails
	 * them with EAGAIN on a file system without nowait reads.  The
	 * flags are the open's (O_DIRECT kept): no F_GETFL needed. */
	fcntl(op->open_fd, F_SETFL, op->open_flags & ~O_NONBLOCK);
	f->fd = op->open_fd;
	op->holds_fd = false;
	op->open_fd = -1;
	f->direct = op->open_flags & O_DIRECT;
	f->size = op->stx.stx_size;
	f->mtime_ns = (int64_t)op->stx.stx_mtime.tv_sec * 1000000000 + op->stx.stx_mtime.tv_nsec;
	if (io->regions)
		f->mount = pf_region_table_lookup(io->regions, f->path);
	f->fuse = io->be == &pf_io_uring_backend &&
		  fs_is_fuse(io, makedev(op->stx.stx_dev_major, op->stx.stx_dev_minor), f->path);
}

/* An open step ended with res (a descriptor after the open, 0 after the
 * stat or the move into the table, or -errno).  @return true when the
 * open is complete. */
static bool open_account(pf_io *io, pf_io_op *op, int64_t res)
{
	pf_io_req *req = op->req;
	pf_io_file *f = &io->files[req->file];

	if (res < 0 && op->step == PF_OPEN_STEP_OPEN && res == -EINVAL &&
	    (op->open_flags & O_DIRECT)) {
		/* The file system refuses O_DIRECT (tmpfs, many FUSE
		 * mounts): the file is read through the page cache. */
		op->open_flags &= ~O_DIRECT;
		pf_io_attempt_plan(&io->policy, op, false, &io->opens);
		return false;
	}
	if (op->step == PF_OPEN_STEP_INSTALL) {
		/* The back-end moved the descriptor into its table, or kept
		 * it (the table is full): either way the file is open. */
		req->result = 0;
	} else if (res < 0) {
		if (!pf_io_open_judge_error(&io->policy, op, res, &io->opens)) {
			pf_io_attempt_plan(&io->policy, op, false, &io->opens);
			return false;
		}
	} else if (op->step == PF_OPEN_STEP_OPEN) {
		/* Opened, without waiting for a FIFO's writer: now what it
		 * is, asked of the descriptor itself. */
		op->open_fd = (int)res;
		op->holds_fd = true;
		op->step = PF_OPEN_STEP_STAT;
		pf_io_attempt_plan(&io->policy, op, false, &io->opens);
		return false;
	} else if (S_ISDIR(op->stx.stx_mode)) {
		/* open(2) takes a directory for reading; a shard it is not. */
		pf_io_open_judge_error(&io->policy, op, -EISDIR, &io->opens);
	} else if (!S_ISREG(op->stx.stx_mode)) {
		/* A FIFO or a device: never read (a FIFO's read would wait
		 * for a writer); the request says what it is. */
		req->not_regular = (uint8_t)((op->stx.stx_mode & S_IFMT) >> 12);
		pf_io_open_judge_error(&io->policy, op, -EINVAL, &io->opens);
	} else {
		open_keep(io, op);
		if (io->fixed_opens) {
			op->step = PF_OPEN_STEP_INSTALL;
			op->install_fd = f->fd;
			pf_io_attempt_plan(&io->policy, op, false, &io->opens);
			return false;
		}
		req->result = 0;
	}
	if (op->holds_fd) {
		/* Failed after the open: its descriptor is no file's. */
		io->be->close_fd(io, op->open_fd, -1);
		op->holds_fd = false;
		op->open_fd = -1;
	}
	if (req->result < 0 && (f->fd >= 0 || f->kslot >= 0)) {
		io->be->close_fd(io, f->fd, f->kslot);
		f->fd = f->kslot = -1;
	}
	f->state = req->result < 0 ? PF_FILE_FAILED : PF_FILE_OPEN;
	return true;
}

int pf_io_submit(pf_io *io, pf_io_req *req)
{
	pf_io_file *f;
	pf_io_op *op;

	/* Ops go idle when their request completes, before it is reaped, so
	 * there is one whenever inflight is below the depth. */
	if (io->inflight + io->sync_inflight >= io->queue_depth)
		return -EBUSY;
	req->done_bytes = 0;
	req->retries = 0;
	req->result = 0;
	req->injected = false;
	req->open = false;
	req->abandoned = false;
	op = io->idle[--io->nidle];
	*op = (pf_io_op){ .req = req, .start_ns = pf_now_ns(),
			  .seq = ++io->requests };
	io->inflight++;
	f = (pf_io_file *)open_file(io, req->file);
	if (!f) {
		req->result = -EBADF;	/* no such file, or not open (yet) */
		pf_io_complete(io, op);
		return 0;
	}
	/* Every path from here completes through pf_io_complete(), which
	 * ends what this begins. */
	op->counted = true;
	f->busy++;
	if (io->regions)
		pf_region_read_begin(io->regions, f->mount);
	if (f->direct && !f->fuse &&
	    ((req->offset | req->len | (uintptr_t)req->buf) & (PF_IO_DIRECT_ALIGN - 1))) {
		req->result = -EINVAL;	/* O_DIRECT needs aligned requests */
		f->stats.errors++;
		pf_io_complete(io, op);
		return 0;
	}
	pf_io_attempt_plan(&io->policy, op, f->direct, &f->stats);
	return io->be->queue(io, op);
}

unsigned pf_io_hist_bucket(uint64_t ns)
{
	return pf_hist_bucket(ns);
}

bool pf_io_account(pf_io *io, pf_io_op *op, int64_t res)
{
	pf_io_file *f = &io->files[op->req->file];
	uint64_t lat;

	if (op->req->open) {
		if (!open_account(io, op, res))
			return false;
		lat = pf_now_ns() - op->start_ns;
		io->opens.ops++;
		io->opens.busy_ns += lat;
		io->opens.hist[pf_hist_bucket(lat)]++;
		return true;
	}
	if (!pf_io_attempt_judge(&io->policy, op, res, &f->stats)) {
		pf_io_attempt_plan(&io->policy, op, f->direct, &f->stats);
		return false;
	}
	lat = pf_now_ns() - op->start_ns;
	f->stats.ops++;
	f->stats.busy_ns += lat;
	f->stats.hist[pf_hist_bucket(lat)]++;
	return true;
}

void pf_io_complete(pf_io *io, pf_io_op *op)
{
	pf_io_req *req = op->req;

	if (op->counted) {
		pf_io_file *f = &io->files[req->file];

		f->busy--;
		if (io->regions)
			pf_region_read_end(io->regions, f->mount, req->result,
					   pf_now_ns() - op->start_ns);
	} else if (req->open) {
		io->files[req->file].busy--;
	}
	if (op->sync) {
		/* pf_io_add_file()'s: it waits for this, no one reaps it. */
		*op->sync_done = true;
		io->sync_inflight--;
	} else {
		io->done[(io->done_head + io->done_count) % io->queue_depth] = req;
		io->done_count++;
	}
	op->req = NULL;
	op->counted = op->sync = false;
	io->idle[io->nidle++] = op;
}

int pf_io_reap(pf_io *io, pf_io_req **done, unsigned max, unsigned min_done)
{
	unsigned n = 0;

	if (min_done > io->inflight)
		min_done = io->inflight;
	if (io->done_count < min_done || io->done_count == 0) {
		unsigned need = min_done > io->done_count ? min_done - io->done_count : 0;
		int ret = io->be->run(io, need);
		if (ret < 0)
			return ret;
	}
	while (n < max && io->done_count) {
		done[n++] = io->done[io->done_head];
		io->done_head = (io->done_head + 1) % io->queue_depth;
		io->done_count--;
		io->inflight--;
	}
	return (int)n;
}

unsigned pf_io_inflight(const pf_io *io)
{
	return io->inflight;
}

void pf_io_set_abandon(pf_io *io, bool on)
{
	io->abandon = on;
}

unsigned pf_io_abandoned(const pf_io *io)
{
	return io->nabandoned;
}

int pf_io_req_error(const pf_io *io, const pf_io_req *req, pf_error *err)
{
	return pf_io_failure(&io->policy, req, pf_io_file_path(io, req->file), err);
}

int pf_io_run(pf_io *io, pf_io_req *reqs, unsigned nreqs, const pf_io_plan *plan,
	      pf_error *err)
{
	pf_io_req *done[64];
	unsigned *idle, nidle = 0;
	bool more = true;
	int ret = 0;

	pf_error_clear(err);
	if (!nreqs)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "no request to read with");
	idle = pf_malloc(nreqs * sizeof(*idle));
	if (!idle)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory for %u requests", nreqs);
	/* Slot 0 is handed out first. */
	for (unsigned i = nreqs; i-- > 0;)
		idle[nidle++] = i;
	while (!ret && (more || pf_io_inflight(io))) {
		while (!ret && more && nidle) {
			unsigned slot = idle[--nidle];
			int r = plan->next(plan->ctx, slot, &reqs[slot], err);

			if (r <= 0) {
				idle[nidle++] = slot;
				more = false;
				ret = r;
				break;
			}
			reqs[slot].user = (void *)(uintptr_t)slot;
			r = pf_io_submit(io, &reqs[slot]);
			if (r < 0) {
				idle[nidle++] = slot;
				ret = pf_error_set(err, r, PF_OFFSET_NONE, 0,
						   "cannot submit a read: %s", pf_strerror(r));
			}
		}
		if (ret || !pf_io_inflight(io))
			break;
		int n = pf_io_reap(io, done, 64, 1);

		if (n < 0) {
			ret = pf_error_set(err, n, PF_OFFSET_NONE, 0,
					   "the I/O engine failed: %s", pf_strerror(n));
			break;
		}
		for (int i = 0; i < n; i++) {
			unsigned slot = (unsigned)(uintptr_t)done[i]->user;

			if (!ret)
				ret = plan->done(plan->ctx, slot, done[i], err);
			idle[nidle++] = slot;
		}
	}
	/* No buffer may stay with the kernel when the caller frees it. */
	while (pf_io_inflight(io) && pf_io_reap(io, done, 64, 1) > 0)
		;
	pf_free(idle);
	return ret < 0 ? ret : 0;
}

void pf_io_file_stats(const pf_io *io, uint32_t file, pf_io_stats *out)
{
	const pf_io_file *f = open_file(io, file);

	if (f)
		*out = f->stats;
	else
		memset(out, 0, sizeof(*out));
}

void pf_io_get_stats(const pf_io *io, pf_io_engine_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->reads = io->closed_reads;
	for (uint32_t i = 0; i < io->nfiles; i++)
		if (io->files[i].state == PF_FILE_OPEN)
			stats_add(&out->reads, &io->files[i].stats);
	out->opens = io->opens;
	out->closes = io->closes;
	out->files_open = io->files_open;
	out->files_open_peak = io->files_open_peak;
}

double pf_io_stats_quantile_us(const pf_io_stats *st, double q)
{
	return pf_hist_quantile_us(st->hist, q);
}
