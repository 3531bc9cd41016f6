/* SPDX-License-Identifier: Apache-2.0 */
/* The dataset's files in the I/O thread's engine: opened lazily, a
 * bounded number ahead of the schedule, and closed when done.
 *
 * The schedule tells what it will read before it reads it: each segment
 * it is about to dispatch is "wanted" (pf_files_want(), in dispatch
 * order, into a FIFO), which starts its file's open (IORING_OP_OPENAT and
 * STATX through the engine, many in flight beside the reads) while at
 * most open_ahead distinct files are wanted ahead; dispatching the
 * segment "takes" it (pf_files_take()): the want becomes the read's (a
 * frame's, until its read completes) or the stream's (until the stream
 * is retired), and the dispatch waits for the open only then.  A file no
 * one wants or reads goes to an idle list, open; the oldest idle file
 * is closed once more than open_ahead are idle, so a shard read again
 * soon is not opened twice and the files open stay bounded (about
 * 3 x io_depth + streams, whatever the number of shards).
 *
 * Each open's size is checked against the plan (pf_dataset_check_file():
 * against the manifest when there is one), and then, where the manifest
 * holds it, the CRC32C of the file's tail, read as a request of its own
 * right after the open (in the open's request and a buffer of its own):
 * the file counts as opening until it is checked.  A manifest without
 * tails (an older one) has the mtime checked instead.  A shard changed
 * since is an error naming the shard and the manifest, at its open.  Everything here is the I/O thread's alone (no lock), but
 * for failing the loader.  Not here: what is read (schedule.c), the reads
 * (io_thread.c). */
#include <errno.h>
#include <string.h>

#include "pipeline_internal.h"

enum { LF_CLOSED = 0, LF_OPENING, LF_OPEN };

#define NONE UINT32_MAX

int pf_files_setup(pf_pipe *l)
{
	pf_files *fs = &l->files;

	fs->ahead_max = l->cfg.io_depth;
	fs->idle_max = l->cfg.io_depth;
	fs->fifo_cap = 4 * fs->ahead_max;
	fs->f = pf_calloc(l->ds->nfiles, sizeof(*fs->f));
	fs->fifo = pf_calloc(fs->fifo_cap, sizeof(*fs->fifo));
	fs->pending = pf_calloc(fs->ahead_max + 1, sizeof(*fs->pending));
	fs->reqs = pf_calloc(fs->ahead_max + 1, sizeof(*fs->reqs));
	fs->free_reqs = pf_calloc(fs->ahead_max + 1, sizeof(*fs->free_reqs));
	if (!fs->f || !fs->fifo || !fs->pending || !fs->reqs || !fs->free_reqs)
		return -ENOMEM;
	for (size_t i = 0; i < l->ds->nfiles; i++) {
		fs->f[i].slot = -1;
		fs->f[i].idle_prev = fs->f[i].idle_next = NONE;
	}
	fs->idle_head = fs->idle_tail = NONE;
	for (unsigned i = 0; i <= fs->ahead_max; i++)
		fs->free_reqs[fs->nfree_reqs++] = i;
	if (l->ds->tail_len) {
		uint32_t most = 0;

		for (size_t i = 0; i < l->ds->nfiles; i++)
			most = l->ds->tail_len[i] > most ? l->ds->tail_len[i] : most;
		/* Room for an O_DIRECT read of it: whole blocks around it. */
		fs->tail_cap = ((size_t)most + 2 * PF_ALIGN - 1) / PF_ALIGN * PF_ALIGN;
		fs->tails_size = fs->tail_cap * (fs->ahead_max + 1);
		fs->tails = pf_pool_alloc(fs->tails_size);
		if (!fs->tails)
			return -ENOMEM;
	}
	return 0;
}

void pf_files_teardown(pf_pipe *l)
{
	pf_files *fs = &l->files;

	pf_free(fs->f);
	pf_free(fs->fifo);
	pf_free(fs->pending);
	pf_free(fs->reqs);
	pf_free(fs->free_reqs);
	/* A tail read the kernel may still write into (reads left in flight
	 * or abandoned): the buffers are never used again. */
	if (l->io_left)
		pf_pool_unmap(fs->tails, fs->tails_size);
	else
		pf_pool_free(fs->tails, fs->tails_size, false);
	memset(fs, 0, sizeof(*fs));
}

static void idle_remove(pf_files *fs, uint32_t i)
{
	pf_lazy_file *f = &fs->f[i];

	if (f->idle_prev != NONE)
		fs->f[f->idle_prev].idle_next = f->idle_next;
	else
		fs->idle_head = f->idle_next;
	if (f->idle_next != NONE)
		fs->f[f->idle_next].idle_prev = f->idle_prev;
	else
		fs->idle_tail = f->idle_prev;
	f->idle_prev = f->idle_next = NONE;
	f->idle = false;
	fs->nidle--;
}

static void close_file(pf_pipe *l, pf_io *io, uint32_t i)
{
	pf_lazy_file *f = &l->files.f[i];

	/* Nothing of it is in flight (no one wants or reads it), so the
	 * engine cannot refuse. */
	pf_io_close_file(io, (uint32_t)f->slot);
	f->slot = -1;
	f->state = LF_CLOSED;
}

/* No one wants file i now: to the idle list (open), or closed at once
 * when its open failed; the oldest idle file closed when too many are. */
static void unwanted(pf_pipe *l, pf_io *io, uint32_t i)
{
	pf_files *fs = &l->files;
	pf_lazy_file *f = &fs->f[i];

	if (f->ahead || f->busy || f->state != LF_OPEN)
		return;	/* an open in flight comes here when it completes */
	f->idle = true;
	f->idle_prev = fs->idle_tail;
	if (fs->idle_tail != NONE)
		fs->f[fs->idle_tail].idle_next = i;
	else
		fs->idle_head = i;
	fs->idle_tail = i;
	fs->nidle++;
	while (fs->nidle > fs->idle_max) {
		uint32_t old = fs->idle_head;

		idle_remove(fs, old);
		close_file(l, io, old);
	}
}

/* Start file i's open.  @return 0 (or 1 when the engine is full: it stays
 * CLOSED and pending), or <0 with the loader failed. */
static int open_start(pf_pipe *l, pf_io *io, uint32_t i)
{
	pf_files *fs = &l->files;
	pf_lazy_file *f = &fs->f[i];
	bool direct = l->cfg.direct_io && l->ds->alignment[i] >= PF_ALIGN;
	uint32_t r;
	int ret;

	if (pf_io_inflight(io) >= l->cfg.io_depth || !fs->nfree_reqs)
		return 1;
	r = fs->free_reqs[--fs->nfree_reqs];
	fs->reqs[r] = (pf_io_req){ .user = (void *)(uintptr_t)i };
	/* Stream files too (their blocks are read through the engine),
	 * never with O_DIRECT: their last block is not a multiple of 4 KiB. */
	ret = pf_io_open(io, &fs->reqs[r], l->ds->paths[i], direct ? PF_IO_DIRECT : 0);
	if (ret == -EBUSY) {
		fs->free_reqs[fs->nfree_reqs++] = r;
		return 1;
	}
	if (ret < 0) {
		pf_error err;

		fs->free_reqs[fs->nfree_reqs++] = r;
		pf_error_clear(&err);
		pf_error_set_file(&err, l->ds->paths[i]);
		pf_error_set(&err, ret, PF_OFFSET_NONE, 0, "cannot start its open: %s",
			     pf_strerror(ret));
		pf_pipe_fail(l, &err, ret);
		return ret;
	}
	f->slot = (int32_t)fs->reqs[r].file;
	f->state = LF_OPENING;
	fs->opening++;
	return 0;
}

int pf_files_pump(pf_pipe *l, pf_io *io)
{
	pf_files *fs = &l->files;

	while (fs->npending) {
		uint32_t i = fs->pending[0];
		pf_lazy_file *f = &fs->f[i];

		/* Still wanted (the walk may have ended meanwhile). */
		if (f->state == LF_CLOSED && (f->ahead || f->busy)) {
			int ret = open_start(l, io, i);

			if (ret)	/* no room: it stays first in line */
				return ret < 0 ? ret : 0;
		}
		f->pending = false;
		memmove(fs->pending, fs->pending + 1, --fs->npending * sizeof(*fs->pending));
	}
	return 0;
}

bool pf_files_ahead_full(const pf_pipe *l, uint32_t i)
{
	const pf_files *fs = &l->files;

	return fs->nfifo == fs->fifo_cap || (!fs->f[i].ahead && fs->ahead_files >= fs->ahead_max);
}

int pf_files_want(pf_pipe *l, pf_io *io, uint32_t i)
{
	pf_files *fs = &l->files;
	pf_lazy_file *f = &fs->f[i];

	fs->fifo[(fs->fifo_head + fs->nfifo++) % fs->fifo_cap] = i;
	if (f->ahead++ == 0)
		fs->ahead_files++;
	if (f->idle)
		idle_remove(fs, i);
	if (f->state != LF_CLOSED || f->pending)
		return 0;
	/* Opens start in the order they are wanted: after those waiting
	 * for room in the engine. */
	f->pending = true;
	fs->pending[fs->npending++] = i;
	return pf_files_pump(l, io);
}

/* What pf_reads_wait() waits for in pf_files_take(): the open done. */
static bool file_settled(const pf_pipe *l, uint64_t i)
{
	return l->files.f[i].state != LF_OPENING;
}

int pf_files_take(pf_pipe *l, pf_io *io, uint32_t i)
{
	pf_files *fs = &l->files;
	pf_lazy_file *f = &fs->f[i];
	int ret = 0;

	/* The schedule dispatches what it wanted, in order. */
	if (!fs->nfifo || fs->fifo[fs->fifo_head] != i)
		return -EPROTO;
	fs->fifo_head = (fs->fifo_head + 1) % fs->fifo_cap;
	fs->nfifo--;
	f->busy++;
	if (--f->ahead == 0)
		fs->ahead_files--;
	/* Its open may wait for room still (it is first in line then).  One
	 * that started and failed leaves it closed and no longer pending:
	 * the loader has failed, and nothing is left to wait for. */
	while (ret == 0 && f->state == LF_CLOSED && f->pending) {
		ret = pf_files_pump(l, io);
		if (ret == 0 && f->state == LF_CLOSED && f->pending) {
			ret = pf_reads_reap(l, io, 1);
			ret = ret < 0 ? ret : 0;
		}
	}
	if (ret == 0 && f->state == LF_OPENING) {
		ret = pf_reads_wait(l, io, file_settled, i, &l->cv_chunk);
		pthread_mutex_unlock(&l->mu);
	}
	if (ret < 0)
		return ret;
	/* A failed open or a changed shard failed the loader. */
	return f->state == LF_OPEN ? f->slot : -ECANCELED;
}

void pf_files_skip(pf_pipe *l, pf_io *io, uint32_t i)
{
	pf_files *fs = &l->files;

	if (!fs->nfifo || fs->fifo[fs->fifo_head] != i)
		return;
	fs->fifo_head = (fs->fifo_head + 1) % fs->fifo_cap;
	fs->nfifo--;
	if (--fs->f[i].ahead == 0)
		fs->ahead_files--;
	unwanted(l, io, i);
}

void pf_files_release(pf_pipe *l, pf_io *io, uint32_t i)
{
	l->files.f[i].busy--;
	unwanted(l, io, i);
}

void pf_files_forget_ahead(pf_pipe *l, pf_io *io)
{
	pf_files *fs = &l->files;

	while (fs->nfifo) {
		uint32_t i = fs->fifo[fs->fifo_head];

		fs->fifo_head = (fs->fifo_head + 1) % fs->fifo_cap;
		fs->nfifo--;
		if (--fs->f[i].ahead == 0)
			fs->ahead_files--;
		unwanted(l, io, i);
	}
}

bool pf_files_is_open_req(const pf_pipe *l, const pf_io_req *req)
{
	return req >= l->files.reqs && req < l->files.reqs + l->files.ahead_max + 1;
}

/* Read file i's tail (the open's request r, in its own buffer), for
 * pf_files_opened() to check.  @return 0 (submitted), or -errno. */
static int tail_start(pf_pipe *l, pf_io *io, pf_io_req *req, uint32_t i)
{
	pf_files *fs = &l->files;
	uint64_t size = l->ds->file_size[i], from = size - l->ds->tail_len[i];
	uint32_t r = (uint32_t)(req - fs->reqs);
	int ret;

	/* O_DIRECT: the blocks around it, from a block boundary. */
	if (pf_io_file_direct(io, req->file))
		from &= ~(uint64_t)(PF_ALIGN - 1);
	req->offset = from;
	req->len = (uint32_t)(size - from);
	if (pf_io_file_direct(io, req->file))
		req->len = (req->len + PF_ALIGN - 1) / PF_ALIGN * PF_ALIGN;
	req->buf = fs->tails + (size_t)r * fs->tail_cap;
	req->buf_index = -1;
	ret = pf_io_submit(io, req);
	/* The open it follows just left the engine: room, but for the
	 * other opens of the same reap. */
	return ret == -EBUSY ? pf_reads_submit(l, io, req) : ret;
}

/* The tail read of file i ended: its bytes against the manifest's. */
static int tail_done(pf_pipe *l, pf_io *io, pf_io_req *req, uint32_t i, pf_error *err)
{
	uint64_t size = l->ds->file_size[i];
	uint32_t len = l->ds->tail_len[i];
	uint64_t skip = size - len - req->offset;

	if (req->result < 0)
		return pf_io_req_error(io, req, err);	/* the file, byte and cause */
	if ((uint64_t)req->result < skip + len) {
		pf_error_set_file(err, l->ds->paths[i]);
		return pf_error_set(err, -ESTALE, PF_OFFSET_FILE, req->offset + (uint64_t)req->result,
				    "the shard ends at byte %llu, before the %llu bytes its open "
				    "found: it changed while it was opened",
				    (unsigned long long)(req->offset + (uint64_t)req->result),
				    (unsigned long long)size);
	}
	return pf_dataset_check_tail(l->ds, i, (const uint8_t *)req->buf + skip, len, err);
}

void pf_files_opened(pf_pipe *l, pf_io *io, pf_io_req *req)
{
	pf_files *fs = &l->files;
	uint32_t i = (uint32_t)(uintptr_t)req->user;
	pf_lazy_file *f = &fs->f[i];
	pf_error err;
	int ret = (int)req->result;

	pf_error_clear(&err);
	if (!req->open) {
		ret = tail_done(l, io, req, i, &err);
	} else if (ret < 0) {
		pf_io_req_error(io, req, &err);	/* names the file and the cause */
	} else {
		ret = pf_dataset_check_file(l->ds, i, pf_io_file_size(io, req->file),
					    pf_io_file_mtime(io, req->file), &err);
		if (ret == 0 && l->ds->tail_len && l->ds->tail_len[i]) {
			ret = tail_start(l, io, req, i);
			if (ret == 0)
				return;	/* opening until its tail is checked */
			pf_error_set_file(&err, l->ds->paths[i]);
			pf_error_set(&err, ret, PF_OFFSET_NONE, 0, "cannot read its tail: %s",
				     pf_strerror(ret));
		}
	}
	fs->free_reqs[fs->nfree_reqs++] = (uint32_t)(req - fs->reqs);
	fs->opening--;
	if (ret < 0) {
		pf_io_close_file(io, req->file);
		f->slot = -1;
		f->state = LF_CLOSED;
		pf_pipe_fail(l, &err, ret);
		return;
	}
	f->state = LF_OPEN;
	l->files.opened++;
	if (pf_io_file_direct(io, req->file) && !f->direct_seen) {
		f->direct_seen = true;
		l->files.direct++;
	}
	unwanted(l, io, i);
}
