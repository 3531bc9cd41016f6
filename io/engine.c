/* SPDX-License-Identifier: Apache-2.0 */
/* The I/O engine: files, request bookkeeping, retries, counters, and the
 * choice of back-end.  Every read a request issues is planned (faults,
 * backoff) and judged (continue, retry, complete) here with fault.c's
 * policy, so both back-ends behave alike. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "io_internal.h"

#define PF_IO_DEPTH_DEFAULT 64u
#define PF_IO_FILES_DEFAULT 4096u
#define PF_FUSE_SUPER_MAGIC 0x65735546	/* linux/magic.h */

_Static_assert(PF_IO_HIST_BUCKETS == PF_HIST_BUCKETS,
	       "pf_io_stats.hist is common/'s latency histogram");

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
	io->ops = pf_calloc(io->queue_depth, sizeof(*io->ops));
	io->idle = pf_calloc(io->queue_depth, sizeof(*io->idle));
	io->done = pf_calloc(io->queue_depth, sizeof(*io->done));
	io->pending = pf_calloc(io->queue_depth, sizeof(*io->pending));
	io->injected = pf_calloc(io->queue_depth, sizeof(*io->injected));
	io->reading = pf_calloc(io->queue_depth, sizeof(*io->reading));
	io->files = pf_calloc(io->max_files, sizeof(*io->files));
	if (!io->ops || !io->idle || !io->done || !io->pending || !io->injected ||
	    !io->reading || !io->files) {
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				   "no memory for an I/O engine of depth %u",
				   io->queue_depth);
		goto fail;
	}
	for (unsigned i = 0; i < io->queue_depth; i++)
		io->idle[io->nidle++] = &io->ops[io->queue_depth - 1 - i];

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
	if (io->be)
		io->be->exit(io);
	for (uint32_t i = 0; i < io->nfiles; i++) {
		if (io->files[i].fd >= 0)
			close(io->files[i].fd);
		if (io->files[i].direct_fd >= 0)
			close(io->files[i].direct_fd);
		pf_free(io->files[i].path);
	}
	pf_free(io->files);
	pf_free(io->ops);
	pf_free(io->idle);
	pf_free(io->done);
	pf_free(io->pending);
	pf_free(io->injected);
	pf_free(io->reading);
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

int pf_io_add_file(pf_io *io, const char *path, unsigned flags, pf_error *err)
{
	struct statfs sfs;
	pf_io_file *f;
	int fd, ret;

	pf_error_clear(err);
	if (io->nfiles == io->max_files) {
		pf_error_set_file(err, path);
		return pf_error_set(err, -EMFILE, PF_OFFSET_NONE, 0,
				    "the I/O engine's file table is full (%u files)",
				    io->max_files);
	}
	fd = pf_file_open(path, err);
	if (fd < 0)
		return fd;
	f = &io->files[io->nfiles];
	memset(f, 0, sizeof(*f));
	f->fd = fd;
	f->direct_fd = -1;
	f->path = pf_strdup(path);
	if (!f->path) {
		close(fd);
		return -ENOMEM;
	}
	{
		struct stat st;

		ret = fstat(fd, &st) == 0 ? 0 : -errno;
		if (ret < 0)
			goto fail;
		f->size = (uint64_t)st.st_size;
		f->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	}
	if (io->regions)
		f->mount = pf_region_table_lookup(io->regions, path);
	f->fuse = fstatfs(fd, &sfs) == 0 && sfs.f_type == PF_FUSE_SUPER_MAGIC;
	/* O_DIRECT is refused by some filesystems (tmpfs, many FUSE
	 * mounts): then the file is read through the page cache. */
	if (flags & PF_IO_DIRECT)
		f->direct_fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
	io->nfiles++;
	ret = io->be->file_added(io, io->nfiles - 1);
	if (ret < 0) {
		io->nfiles--;
		goto fail;
	}
	return (int)(io->nfiles - 1);
fail:
	if (f->direct_fd >= 0)
		close(f->direct_fd);
	close(fd);
	pf_free(f->path);
	pf_error_set_file(err, path);
	return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "cannot add to the I/O engine: %s",
			    pf_strerror(ret));
}

uint64_t pf_io_file_size(const pf_io *io, uint32_t file)
{
	return file < io->nfiles ? io->files[file].size : 0;
}

int64_t pf_io_file_mtime(const pf_io *io, uint32_t file)
{
	return file < io->nfiles ? io->files[file].mtime_ns : 0;
}

const char *pf_io_file_path(const pf_io *io, uint32_t file)
{
	return file < io->nfiles ? io->files[file].path : NULL;
}

bool pf_io_file_direct(const pf_io *io, uint32_t file)
{
	return file < io->nfiles && io->files[file].direct_fd >= 0;
}

int pf_io_submit(pf_io *io, pf_io_req *req)
{
	pf_io_op *op;

	/* Ops go idle when their request completes, before it is reaped, so
	 * there is one whenever inflight is below the depth. */
	if (io->inflight >= io->queue_depth)
		return -EBUSY;
	req->done_bytes = 0;
	req->retries = 0;
	req->result = 0;
	req->injected = false;
	op = io->idle[--io->nidle];
	*op = (pf_io_op){ .req = req, .start_ns = pf_now_ns(),
			  .seq = ++io->requests };
	io->inflight++;
	if (req->file >= io->nfiles) {
		req->result = -EBADF;
		pf_io_complete(io, op);
		return 0;
	}
	/* Every path from here completes through pf_io_complete(), which
	 * ends what this begins. */
	if (io->regions)
		pf_region_read_begin(io->regions, io->files[req->file].mount);
	if (io->files[req->file].direct_fd >= 0 &&
	    ((req->offset | req->len | (uintptr_t)req->buf) & (PF_IO_DIRECT_ALIGN - 1))) {
		req->result = -EINVAL;	/* O_DIRECT needs aligned requests */
		io->files[req->file].stats.errors++;
		pf_io_complete(io, op);
		return 0;
	}
	pf_io_attempt_plan(&io->policy, op, io->files[req->file].direct_fd >= 0,
			   &io->files[req->file].stats);
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

	if (!pf_io_attempt_judge(&io->policy, op, res, &f->stats)) {
		pf_io_attempt_plan(&io->policy, op, f->direct_fd >= 0, &f->stats);
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
	unsigned tail = (io->done_head + io->done_count) % io->queue_depth;
	pf_io_req *req = op->req;

	if (io->regions && req->file < io->nfiles)
		pf_region_read_end(io->regions, io->files[req->file].mount, req->result,
				   pf_now_ns() - op->start_ns);

	io->done[tail] = req;
	io->done_count++;
	op->req = NULL;
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

int pf_io_req_error(const pf_io *io, const pf_io_req *req, pf_error *err)
{
	return pf_io_failure(&io->policy, req,
			     req->file < io->nfiles ? io->files[req->file].path : NULL, err);
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
	if (file < io->nfiles)
		*out = io->files[file].stats;
	else
		memset(out, 0, sizeof(*out));
}

double pf_io_stats_quantile_us(const pf_io_stats *st, double q)
{
	return pf_hist_quantile_us(st->hist, q);
}
