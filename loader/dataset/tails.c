/* SPDX-License-Identifier: Apache-2.0 */
/* Planning without a manifest: every file's index tail, read in parallel.
 * One I/O engine on the calling thread keeps up to PF_TAILS_DEPTH files
 * in flight, each an open (with its stat) and then a read of its tail
 * (two or three when the index is larger than the first read), so that
 * a far bucket's round trips overlap instead of adding up: 1,000 shards
 * behind 30 ms cost about 3 round trips each, at once, not one after
 * another.  And the hint, once per process, that a manifest plans the
 * dataset with one read.  Not here: counting stream files, the units and
 * the rest of the open (dataset.c), the manifest (manifest_open.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_internal.h"

/* Files opened and read at once: enough for a far bucket's round trips
 * to overlap (regionfs serves 16 requests at once by default; a bucket's
 * client pool, more). */
#define PF_TAILS_DEPTH 64u
/* The hint is said for a dataset of at least this many files, or one
 * whose tails took at least PF_TAILS_HINT_NS. */
#define PF_TAILS_HINT_FILES 100u
#define PF_TAILS_HINT_NS 1000000000ull

/* One file in flight: its open, then the reads of its tail. */
typedef struct tail_slot {
	pf_io_req req;
	size_t file;
	uint64_t size;
	size_t want;		/* tail bytes asked for */
	unsigned reads;
	uint8_t *buf;
	size_t cap;
} tail_slot;

/* A damaged index in skip mode: told to on_drop after the reads, in file
 * order, as one file after another did before. */
typedef struct tail_damage {
	size_t file;
	pf_error cause;
} tail_damage;

typedef struct tails {
	pf_dataset *ds;
	const pf_source_config *scfg;
	pf_io *io;
	tail_slot *slots;
	unsigned nslots;
	tail_slot **idle;
	unsigned nidle;
	size_t next;		/* the next file to open */
	size_t failed;		/* the first file (in file order) that failed, or SIZE_MAX */
	int fail_code;
	pf_error *fail_err;	/* its error */
	pf_error *scratch;
	tail_damage *damage;
	size_t ndamage, damage_cap;
	bool left;		/* reads left with a failed engine */
} tails;

/* File slot->file failed with code, err saying why (it names the file
 * here): kept when it is the first in file order. */
static void tails_fail(tails *t, tail_slot *slot, int code, const pf_error *err)
{
	if (slot->file >= t->failed)
		return;
	t->failed = slot->file;
	t->fail_code = code;
	if (err && err->code)
		*t->fail_err = *err;
	else
		pf_error_set(t->fail_err, code, PF_OFFSET_NONE, 0, "%s", pf_strerror(code));
	pf_error_set_file(t->fail_err, t->ds->paths[slot->file]);
}

/* The slot's file is done with (read, or failed): closed, slot free. */
static void tails_done(tails *t, tail_slot *slot)
{
	pf_io_close_file(t->io, slot->req.file);
	t->idle[t->nidle++] = slot;
}

/* Read the last slot->want bytes of the file, or parse what there is
 * (a file too small for any read).  @return 0, or <0 (the engine). */
static int tails_read(tails *t, tail_slot *slot)
{
	uint32_t file = slot->req.file;

	if (slot->want > slot->size)
		slot->want = (size_t)slot->size;
	if (slot->cap < slot->want) {
		uint8_t *b = pf_realloc(slot->buf, slot->want);

		if (!b) {
			tails_fail(t, slot, -ENOMEM, NULL);
			tails_done(t, slot);
			return 0;
		}
		slot->buf = b;
		slot->cap = slot->want;
	}
	slot->reads++;
	slot->req = (pf_io_req){ .file = file, .offset = slot->size - slot->want,
				 .len = (uint32_t)slot->want, .buf = slot->buf, .buf_index = -1,
				 .user = slot };
	return pf_io_submit(t->io, &slot->req);
}

/* got tail bytes of the slot's file are in: its index, or none (a stream
 * file), or more bytes to read.  @return 0, or <0 (the engine). */
static int tails_parse(tails *t, tail_slot *slot, size_t got)
{
	pf_dataset *ds = t->ds;
	pf_error *err = t->scratch;
	int64_t ret;

	pf_error_clear(err);
	ret = pf_shard_index_parse(&ds->index[slot->file], slot->buf, got, slot->size, err);
	if (ret > 0 && slot->reads < 3) {
		/* The index is larger than the first read: its bytes. */
		slot->want = (size_t)ret;
		return tails_read(t, slot);
	}
	if (ret > 0)
		ret = pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, 0,
				   "shard index keeps asking for more tail bytes");
	if (ret == -EBADMSG && t->scfg->on_corrupt == PF_CORRUPT_SKIP) {
		/* A damaged index: dropped (after the reads), and the shard
		 * read as the zstd stream it also is. */
		if (t->ndamage == t->damage_cap) {
			size_t cap = t->damage_cap ? 2 * t->damage_cap : 4;
			tail_damage *d = pf_realloc(t->damage, cap * sizeof(*d));

			if (!d) {
				tails_fail(t, slot, -ENOMEM, NULL);
				tails_done(t, slot);
				return 0;
			}
			t->damage = d;
			t->damage_cap = cap;
		}
		t->damage[t->ndamage].file = slot->file;
		t->damage[t->ndamage].cause = *err;
		pf_error_set_file(&t->damage[t->ndamage].cause, ds->paths[slot->file]);
		t->ndamage++;
		ret = -ENODATA;
	}
	if (ret < 0 && ret != -ENODATA)
		tails_fail(t, slot, (int)ret, err);
	tails_done(t, slot);
	return 0;
}

/* A request of the slot completed: its open, or a read of its tail. */
static int tails_step(tails *t, tail_slot *slot)
{
	pf_io_req *req = &slot->req;

	if (req->result < 0) {
		pf_error_clear(t->scratch);
		pf_io_req_error(t->io, req, t->scratch);	/* the file, offset, cause */
		tails_fail(t, slot, (int)req->result, t->scratch);
		tails_done(t, slot);
		return 0;
	}
	if (req->open) {
		slot->size = pf_io_file_size(t->io, req->file);
		t->ds->file_size[slot->file] = slot->size;
		slot->want = PF_SHARD_TAIL_HINT;
		slot->reads = 0;
		if (slot->size == 0)
			return tails_parse(t, slot, 0);
		return tails_read(t, slot);
	}
	return tails_parse(t, slot, (size_t)req->result);
}

void pf_dataset_manifest_hint(const pf_dataset *ds, uint64_t ns)
{
	static int said;
	const char *dir = "DIR";
	size_t dirlen = 3;

	if (ds->nfiles < PF_TAILS_HINT_FILES && ns < PF_TAILS_HINT_NS)
		return;
	if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		return;
	/* The files' directory, when they share one. */
	{
		const char *slash = strrchr(ds->paths[0], '/');
		size_t n = slash ? (size_t)(slash - ds->paths[0]) : 0;
		bool shared = n > 0;

		for (size_t i = 1; shared && i < ds->nfiles; i++)
			shared = !strncmp(ds->paths[i], ds->paths[0], n) && ds->paths[i][n] == '/' &&
				 !strchr(ds->paths[i] + n + 1, '/');
		if (shared) {
			dir = ds->paths[0];
			dirlen = n;
		}
	}
	fprintf(stderr, "podfeed: planned %zu files from their index tails in %.1f s; "
		"`shardtool manifest %.*s` writes a manifest that plans them with one read\n",
		ds->nfiles, (double)ns / 1e9, (int)dirlen, dir);
}

int pf_dataset_read_tails(pf_dataset *ds, const pf_source_config *scfg,
			  const pf_io_config *icfg, pf_error *err)
{
	pf_io_config cfg = icfg ? *icfg : (pf_io_config){ 0 };
	tails t = { .ds = ds, .scfg = scfg, .failed = SIZE_MAX };
	int ret;

	/* No registered buffers: the tails are read into the slots' own. */
	cfg.queue_depth = cfg.queue_depth ? cfg.queue_depth : PF_TAILS_DEPTH;
	cfg.max_files = cfg.queue_depth;
	cfg.buffers = NULL;
	cfg.nbuffers = 0;
	cfg.buffer_size = 0;
	cfg.regions = scfg->regions;
	t.nslots = ds->nfiles < cfg.queue_depth ? (unsigned)ds->nfiles : cfg.queue_depth;
	t.slots = pf_calloc(t.nslots, sizeof(*t.slots));
	t.idle = pf_calloc(t.nslots, sizeof(*t.idle));
	t.fail_err = pf_malloc(sizeof(*t.fail_err));
	t.scratch = pf_malloc(sizeof(*t.scratch));
	if (!t.slots || !t.idle || !t.fail_err || !t.scratch) {
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				   "out of memory opening the dataset");
		goto out;
	}
	ret = pf_io_create(&t.io, &cfg, err);
	if (ret < 0)
		goto out;
	for (unsigned i = t.nslots; i-- > 0;)
		t.idle[t.nidle++] = &t.slots[i];
	/* Files are started in order and none after one failed, so that
	 * every file before the first failure is read and the failure
	 * reported is the first in file order, as one after another. */
	while (ret == 0) {
		pf_io_req *done[64];
		int n;

		while (t.nidle && t.next < ds->nfiles && t.failed == SIZE_MAX && ret == 0) {
			tail_slot *slot = t.idle[--t.nidle];

			slot->file = t.next++;
			slot->req = (pf_io_req){ .user = slot };
			ret = pf_io_open(t.io, &slot->req, ds->paths[slot->file],
					 PF_IO_FUSE_DIRECT);
		}
		if (ret < 0 || !pf_io_inflight(t.io))
			break;
		n = pf_io_reap(t.io, done, 64, 1);
		if (n < 0)
			ret = n;
		for (int i = 0; i < n && ret == 0; i++)
			ret = tails_step(&t, done[i]->user);
	}
	if (ret < 0) {
		pf_io_req *done[64];

		ret = pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				   "the I/O engine failed reading the index tails: %s",
				   pf_strerror(ret));
		/* No read may be left with the kernel when its buffer goes:
		 * what cannot be reaped keeps its buffer (leaked). */
		while (pf_io_inflight(t.io) && pf_io_reap(t.io, done, 64, 1) > 0)
			;
		t.left = pf_io_inflight(t.io) > 0;
	}
	else if (t.failed != SIZE_MAX)
		ret = t.fail_code;
out:
	/* The engine last: no read may be in flight when the buffers go. */
	pf_io_free(t.io);
	if (t.failed != SIZE_MAX && ret == t.fail_code && err)
		*err = *t.fail_err;
	/* Damaged indexes, in file order, before the first failure. */
	for (size_t k = 0; k < t.ndamage; k++) {
		size_t j = k;

		for (size_t m = k + 1; m < t.ndamage; m++)
			j = t.damage[m].file < t.damage[j].file ? m : j;
		if (j != k) {
			tail_damage tmp = t.damage[k];

			t.damage[k] = t.damage[j];
			t.damage[j] = tmp;
		}
	}
	for (size_t k = 0; ret == 0 && k < t.ndamage; k++) {
		const tail_damage *d = &t.damage[k];
		/* The index lost, no record: the shard is read as the zstd
		 * stream it also is, whose own damage is dropped on its own. */
		pf_drop drop = { .unit = PF_DROP_FRAME, .offset_kind = PF_OFFSET_FILE,
				 .start = d->cause.offset, .resume = ds->file_size[d->file],
				 .records = 0, .cause = d->cause };

		if (scfg->on_drop)
			ret = scfg->on_drop(scfg->on_drop_ctx, &drop);
		if (ret < 0 && err) {
			*err = d->cause;
			err->code = ret;
		}
	}
	for (unsigned i = 0; t.slots && !t.left && i < t.nslots; i++)
		pf_free(t.slots[i].buf);
	pf_free(t.slots);
	pf_free(t.idle);
	pf_free(t.fail_err);
	pf_free(t.scratch);
	pf_free(t.damage);
	return ret;
}
