/* SPDX-License-Identifier: Apache-2.0 */
/* Packing's plan: the steps of an epoch, the same on every host, known
 * before its first batch.  The records' packed lengths (from the shards'
 * indexes when every shard's tells them, as `shardtool convert` writes
 * them; otherwise a pass over the dataset that decodes one value and the
 * length of each packed feature) and every host's record order (plan.c's, as the inner loader reads
 * them) go through the packer (transform/), lengths only, for each host:
 * the epoch's steps are the fewest rows any host makes over its rows a
 * step; the rows a host makes past them are dropped and counted.  Not
 * here: packing the values (pack.c). */
#include <errno.h>
#include <string.h>

#include "pf_transform.h"
#include "pipeline_internal.h"
#include "spec_internal.h"

/* Records a step of the lengths pass. */
#define LENGTHS_GROUP 256u

/* Each file's first record number in dataset order (units are in file
 * order), and with records, each file's records.  NULL: no memory. */
static uint64_t *file_bases(const pf_dataset *ds, uint64_t *records)
{
	uint64_t *base = pf_calloc(ds->nfiles ? ds->nfiles : 1, sizeof(*base));

	for (uint64_t u = 0, at = 0; base && u < ds->nunits; u++) {
		const pf_unit *un = &ds->units[u];

		if (u == 0 || un->file != ds->units[u - 1].file)
			base[un->file] = at;
		if (records)
			records[un->file] += un->records;
		at += un->records;
	}
	return base;
}

/* The lengths from the shards' indexes into len[record * nf + f]:
 * @return 1 done, 0 when some shard's index does not tell them (or the
 * dataset has stream files, or damaged records are skipped: their records
 * are known by reading them), or -errno. */
static int lengths_from_index(const pf_loader *inner, const pf_spec *user, uint32_t nf,
			      uint32_t *len, pf_error *err)
{
	const pf_dataset *ds = inner->ds;
	pf_dataset *tails = NULL;
	pf_shard_index **ix = ds->index;
	uint64_t *file_records = NULL, *file_base = NULL;
	uint32_t *tmp = NULL;
	int ret = 0;

	if (inner->cfg.on_corrupt != PF_CORRUPT_FAIL || ds->any_stream || !ds->nfiles)
		return 0;
	for (size_t f = 0; ix && f < ds->nfiles; f++)
		if (!ix[f])
			ix = NULL;
	if (!ix) {
		/* Opened from the manifest: every shard's index tail (not
		 * its records), read many at once. */
		pf_source_config scfg = { .on_corrupt = PF_CORRUPT_FAIL };

		tails = pf_calloc(1, sizeof(*tails));
		if (!tails)
			return -ENOMEM;
		tails->paths = ds->paths;
		tails->nfiles = ds->nfiles;
		tails->index = pf_calloc(ds->nfiles, sizeof(*tails->index));
		tails->file_size = pf_calloc(ds->nfiles, sizeof(*tails->file_size));
		if (!tails->index || !tails->file_size) {
			ret = -ENOMEM;
			goto out;
		}
		ret = pf_dataset_read_tails(tails, &scfg, NULL, err);
		if (ret < 0)
			goto out;
		ix = tails->index;
		for (size_t f = 0; f < ds->nfiles; f++)
			if (!ix[f])
				goto out;	/* 0: a stream after all */
	}
	file_records = pf_calloc(ds->nfiles, sizeof(*file_records));
	file_base = file_bases(ds, file_records);
	if (!file_records || !file_base) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t f = 0; f < ds->nfiles; f++) {
		uint64_t n = pf_shard_index_records(ix[f]);

		if (n != file_records[f]) {
			ret = pf_error_set(err, -EIO, PF_OFFSET_NONE, 0,
					   "%s: its index holds %llu records, the plan %llu (did the "
					   "shard change since the manifest was written?)",
					   ds->paths[f], (unsigned long long)n,
					   (unsigned long long)file_records[f]);
			goto out;
		}
		pf_free(tmp);
		tmp = pf_malloc((n ? n : 1) * sizeof(*tmp));
		if (!tmp) {
			ret = -ENOMEM;
			goto out;
		}
		for (uint32_t k = 0; k < nf; k++) {
			ret = pf_shard_index_lengths(ix[f], user->f[k].name, tmp);
			if (ret == -ENOENT) {
				ret = 0;
				goto out;	/* not told: read the records */
			}
			if (ret < 0) {
				ret = pf_error_set(err, ret, PF_OFFSET_NONE, 0,
						   "%s: the index's record lengths of '%s' do not "
						   "decode", ds->paths[f], user->f[k].name);
				goto out;
			}
			for (uint64_t r = 0; r < n; r++)
				len[(file_base[f] + r) * nf + k] = tmp[r];
		}
	}
	ret = 1;
out:
	if (tails) {
		for (size_t f = 0; f < tails->nfiles; f++)
			pf_shard_index_free(tails->index[f]);
		pf_free(tails->index);
		pf_free(tails->file_size);
		pf_free(tails);
	}
	pf_free(tmp);
	pf_free(file_records);
	pf_free(file_base);
	return ret;
}

int pf_pack_lengths(const pf_loader *inner, const pf_loader_config *cfg, const pf_spec *user,
		    uint32_t nf, uint32_t **out, uint64_t *nrecords, bool *from_index,
		    pf_error *err)
{
	pf_loader_config lcfg = *cfg;
	pf_spec *spec = pf_calloc(1, sizeof(*spec));
	pf_loader *l = NULL;
	uint32_t *len = NULL;
	uint64_t n = 0, total;
	pf_batch *b;
	int ret;

	if (!spec)
		return -ENOMEM;
	*from_index = false;
	total = inner->ds->records;
	len = pf_calloc(total ? total * nf : 1, sizeof(*len));
	if (!len) {
		ret = -ENOMEM;
		goto out;
	}
	ret = lengths_from_index(inner, user, nf, len, err);
	if (ret < 0)
		goto out;
	if (ret == 1) {
		*from_index = true;
		goto done;
	}
	*spec = *user;
	for (uint32_t i = nf; i-- > 0;) {
		spec->f[i].ragged = false;
		spec->f[i].len = 1;
		ret = pf_spec_add_made(spec, i, PF_ROLE_LENGTHS_FULL, "_lengths", PF_DTYPE_INT32,
				       1, err);
		if (ret < 0)
			goto out;
	}
	pf_spec_layout(spec);
	lcfg.pack_length = 0;
	lcfg.features = NULL;
	lcfg.host_index = 0;
	lcfg.num_hosts = 1;
	lcfg.cores_per_host = 1;
	lcfg.per_core_batch = LENGTHS_GROUP;
	lcfg.shuffle = false;
	lcfg.epochs = 1;
	lcfg.max_steps = 0;
	lcfg.remainder = PF_REMAINDER_WRAP;
	lcfg.resume = NULL;
	lcfg.nresume = 0;
	lcfg.allgather = NULL;	/* every host counts alone (for now) */
	lcfg.quarantine = NULL;
	ret = pf_loader_create_spec(&l, &lcfg, spec, err);
	if (ret < 0)
		goto out;
	if (l->ds->records != total) {
		ret = pf_error_set(err, -EIO, PF_OFFSET_NONE, 0,
				   "the dataset holds %llu records read for their lengths, %llu "
				   "when opened (did it change?)",
				   (unsigned long long)l->ds->records, (unsigned long long)total);
		goto out;
	}
	/* One host, in order: the dataset's records 0 .. total - 1 (the
	 * wrapped ones after them are not needed). */
	while ((ret = pf_loader_next(l, &b)) == 1) {
		const pf_core_batch *cb = &b->core[0];

		for (uint32_t r = 0; r < b->per_core_batch && n < total; r++, n++)
			for (uint32_t f = 0; f < nf; f++)
				len[n * nf + f] = cb->valid[r] ?
					(uint32_t)((const int32_t *)cb->tensors[2 * f + 1].data)[r] : 0;
		pf_loader_release(l, b);
	}
	if (ret < 0) {
		*err = *pf_loader_last_error(l);
		goto out;
	}
done:
	*out = len;
	*nrecords = total;
	len = NULL;
	ret = 0;
out:
	pf_loader_free(l);
	pf_free(len);
	pf_free(spec);
	return ret;
}

/* Outputs [b, e) of host t->host_index's stream of epoch `epoch` (the
 * topology t's, in blocks of w records, permuted or not, slices of
 * `slice` records in groups of `group` frames) through the scratch
 * packer, lengths only. */
static int place_range(const pf_loader *inner, const pf_topology *t, uint32_t w, bool permute,
		       uint32_t slice, uint32_t group, uint64_t seed, uint32_t epoch, uint64_t b, uint64_t e,
		       const uint32_t *len, uint32_t nf, uint32_t cap, const uint64_t *file_base,
		       pf_packer *scratch, uint32_t *perm)
{
	const pf_dataset *ds = inner->ds;
	pf_epoch_plan p = { 0 };
	pf_pack_piece pieces[4];
	uint64_t seg_start = 0, closed;
	size_t si = 0;
	pf_error err;
	int ret;

	ret = pf_plan_epoch(&p, ds, t, seed, epoch, inner->cfg.shuffle, slice, group,
			    PF_REMAINDER_DROP);
	if (ret < 0)
		goto out;
	if (e > p.quota)
		e = p.quota;
	/* Outputs in order: block k's output o holds its input perm^-1(o). */
	for (uint64_t k = b / w; k * w < e; k++) {
		uint64_t first = k * w, left = p.stream_len - first;
		uint32_t n = left < w ? (uint32_t)left : w;

		if (permute) {
			uint32_t *inv = perm + w;

			pf_plan_block_perm(seed, epoch, t->host_index, k, perm, n);
			for (uint32_t r = 0; r < n; r++)
				inv[perm[r]] = r;
			memcpy(perm, inv, n * sizeof(*perm));
		} else {
			for (uint32_t r = 0; r < n; r++)
				perm[r] = r;
		}
		for (uint32_t o = first < b ? (uint32_t)(b - first) : 0; o < n && first + o < e;
		     o++) {
			uint64_t at = first + perm[o], rec;
			uint32_t l[PF_PACKER_MAX_FEATURES];
			const pf_unit *u;

			/* Segments: found from the start for outputs out of order. */
			if (at < seg_start) {
				seg_start = 0;
				si = 0;
			}
			while (at >= seg_start + p.seg[si].count)
				seg_start += p.seg[si++].count;
			u = &ds->units[p.seg[si].unit];
			rec = file_base[u->file] + (u->stream ? 0 : u->first_record) + p.seg[si].first +
			      (at - seg_start);
			for (uint32_t f = 0; f < nf; f++)
				l[f] = len[rec * nf + f] < cap ? len[rec * nf + f] : cap;
			/* Lengths only: 4 pieces hold any record in first_fit;
			 * concat's pieces are not needed, only its rows. */
			if (scratch->mode == PF_PACKER_CONCAT) {
				uint64_t end;

				/* The rows concat opens for l values after the
				 * open row's fill (pack.c's place_concat()). */
				if (l[0]) {
					if (!scratch->nopen) {
						scratch->nopen = 1;
						memset(&scratch->open[0], 0, sizeof(scratch->open[0]));
						scratch->open[0].id = scratch->next_row++;
					}
					end = (uint64_t)scratch->open[0].fill[0] + l[0];
					scratch->next_row += (end - 1) / scratch->length;
					scratch->open[0].fill[0] = (uint32_t)(end % scratch->length);
					if (!scratch->open[0].fill[0])
						scratch->nopen = 0;
				}
				continue;
			}
			ret = pf_pack_place(scratch, l, pieces, 4, &closed, &err);
			if (ret < 0)
				goto out;
		}
	}
	ret = 0;
out:
	pf_plan_release(&p);
	return ret;
}

/* The rows host h's inner stream of epoch e packs into. */
static int64_t host_rows(const pf_loader *inner, uint32_t h, uint64_t seed, uint32_t epoch,
			 const uint32_t *len, uint32_t nf, uint32_t cap, const uint64_t *file_base,
			 const pf_packer *pk, uint32_t *perm)
{
	pf_topology t = inner->topo;
	pf_packer scratch = *pk;
	int ret;

	t.host_index = h;
	ret = place_range(inner, &t, inner->wblock, inner->shuffle_rows, inner->slice, inner->group,
			  seed, epoch,
			  0, UINT64_MAX, len, nf, cap, file_base, &scratch, perm);
	return ret < 0 ? ret : (int64_t)scratch.next_row;
}

int pf_pack_plan_pieces(const pf_loader *inner, const pf_packer *pk, uint64_t seed,
			uint32_t epoch, const uint32_t *len, uint32_t nf, uint32_t cap,
			const pf_topology *origin, uint32_t w, bool permute, uint32_t slice,
			uint32_t group, const pf_piece *pieces, size_t npieces, uint64_t *rows)
{
	uint64_t *file_base = file_bases(inner->ds, NULL);
	uint32_t *perm = pf_malloc(2 * (size_t)(w ? w : 1) * sizeof(*perm));
	pf_packer scratch = *pk;
	int ret = 0;

	if (!file_base || !perm) {
		ret = -ENOMEM;
		goto out;
	}
	scratch.nopen = 0;
	scratch.next_row = 0;
	for (size_t i = 0; i < npieces && ret == 0; i++) {
		pf_topology t = *origin;

		t.host_index = pieces[i].host;
		ret = place_range(inner, &t, w, permute, slice, group, seed, epoch, pieces[i].begin,
				  pieces[i].end, len, nf, cap, file_base, &scratch, perm);
	}
	*rows = scratch.next_row;
out:
	pf_free(file_base);
	pf_free(perm);
	return ret;
}

int pf_pack_plan_steps(const pf_loader *inner, const pf_packer *pk, uint64_t seed,
		       uint32_t epoch, const uint32_t *len, uint32_t nf, uint32_t cap,
		       uint32_t host_batch, uint64_t *steps, uint64_t *own_rows)
{
	const pf_dataset *ds = inner->ds;
	uint64_t *file_base = file_bases(ds, NULL);
	uint32_t *perm = pf_malloc(2 * (size_t)inner->wblock * sizeof(*perm));
	pf_packer empty = *pk;
	uint64_t least = UINT64_MAX;
	int ret = 0;

	if (!file_base || !perm) {
		ret = -ENOMEM;
		goto out;
	}
	empty.nopen = 0;
	empty.next_row = 0;
	for (uint32_t h = 0; h < inner->topo.num_hosts; h++) {
		int64_t rows = host_rows(inner, h, seed, epoch, len, nf, cap, file_base, &empty,
					 perm);

		if (rows < 0) {
			ret = (int)rows;
			goto out;
		}
		if ((uint64_t)rows < least)
			least = (uint64_t)rows;
		if (h == inner->topo.host_index)
			*own_rows = (uint64_t)rows;
	}
	*steps = least / host_batch;
out:
	pf_free(file_base);
	pf_free(perm);
	return ret;
}
