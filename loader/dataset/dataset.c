/* SPDX-License-Identifier: Apache-2.0 */
/* The dataset: its files opened (from its manifest, or from every file's
 * index tail with its stream files counted), what opening it cost by
 * phase, and its units (frames of indexed shards, whole stream files) in
 * file order, which the plan (loader/plan/) orders.  Not here: the order
 * itself, or reading records for a loader (loader/pipeline/). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_internal.h"

void pf_dataset_free(pf_dataset *ds)
{
	if (!ds)
		return;
	for (size_t i = 0; i < ds->nfiles; i++)
		if (ds->index)
			pf_shard_index_free(ds->index[i]);
	for (size_t i = 0; ds->lengths && i < ds->nfiles; i++)
		pf_free(ds->lengths[i].p);
	pf_free(ds->lengths);
	pf_paths_free(ds->paths, ds->nfiles);
	pf_free(ds->index);
	pf_free(ds->file_size);
	pf_free(ds->alignment);
	pf_free(ds->mtime_ns);
	pf_free(ds->tail_len);
	pf_free(ds->tail_crc);
	pf_manifest_free(ds->manifest);
	free(ds->manifest_path);	/* from pf_manifest_locate() */
	pf_free(ds->units);
	pf_free(ds);
}

void pf_dataset_add_units(pf_dataset *ds, size_t i, bool stream, const pf_frame_info *frames,
			  uint32_t nframes, uint64_t stream_records)
{
	uint64_t file_records = 0;

	if (stream) {
		pf_unit *u = &ds->units[ds->nunits++];

		u->file = (uint32_t)i;
		u->stream = true;
		u->records = stream_records;
		file_records = u->records;
	}
	for (uint32_t f = 0; !stream && f < nframes; f++) {
		const pf_frame_info *fi = &frames[f];
		pf_unit *u = &ds->units[ds->nunits++];

		u->file = (uint32_t)i;
		u->frame = f;
		u->records = fi->records;
		u->offset = fi->offset;
		u->csize = fi->compressed_size;
		u->usize = fi->uncompressed_size;
		u->crc32c = fi->crc32c;
		u->first_record = fi->first_record;
		if (u->csize > ds->max_csize)
			ds->max_csize = u->csize;
		if (u->usize > ds->max_usize)
			ds->max_usize = u->usize;
		if (u->records > ds->max_unit_records)
			ds->max_unit_records = u->records;
		file_records += fi->records;
	}
	ds->records += file_records;
	/* Names are mount-dependent; sizes and counts are not. */
	ds->fingerprint = pf_mix64(ds->fingerprint ^ ds->file_size[i]);
	ds->fingerprint = pf_mix64(ds->fingerprint ^ file_records);
}

/* Reads and their bytes counted in regions so far, over every mount. */
static void region_totals(pf_region_table *t, uint64_t *reads, uint64_t *bytes)
{
	*reads = *bytes = 0;
	for (size_t m = 0; t && m < pf_region_table_mounts(t); m++) {
		pf_region_stats st;

		pf_region_table_mount_stats(t, m, &st);
		*reads += st.io.ops;
		*bytes += st.io.bytes;
	}
}

static void phase_begin(pf_open_phase *ph, pf_region_table *t)
{
	region_totals(t, &ph->reads, &ph->bytes);
	ph->ns = pf_now_ns();
}

static void phase_end(pf_open_phase *ph, pf_region_table *t)
{
	uint64_t reads, bytes;

	ph->ns = pf_now_ns() - ph->ns;
	region_totals(t, &reads, &bytes);
	ph->reads = reads - ph->reads;
	ph->bytes = bytes - ph->bytes;
}

/* Every file's index tail: its frames, or none (a stream file, counted
 * later).  Fills ds->paths, sizes, indexes, the digest and
 * ds->open.index; ds->open.streams says how many files have no index. */
static int read_tails(pf_dataset *ds, char **paths, size_t n,
		      const pf_source_config *scfg, const pf_open_config *ocfg, pf_error *err)
{
	int ret;

	phase_begin(&ds->open.index, scfg->regions);
	ds->paths = paths;	/* pf_paths_resolve()'s, handed over */
	ds->nfiles = n;
	if (ds->nfiles == 0)
		return pf_error_set(err, -ENOENT, PF_OFFSET_NONE, 0, "the dataset names no files");
	ds->index = pf_calloc(ds->nfiles, sizeof(*ds->index));
	ds->file_size = pf_calloc(ds->nfiles, sizeof(*ds->file_size));
	ds->alignment = pf_calloc(ds->nfiles, sizeof(*ds->alignment));
	if (!ds->index || !ds->file_size || !ds->alignment)
		return -ENOMEM;
	ds->digest = pf_mix64(ds->nfiles);
	/* Many files at once (tails.c): the files without an index are
	 * streams, counted later. */
	ret = pf_dataset_read_tails(ds, scfg, ocfg ? ocfg->io : NULL, err);
	for (size_t i = 0; ret == 0 && i < ds->nfiles; i++) {
		if (!ds->index[i]) {
			ds->open.streams++;
			ds->any_stream = true;
		}
		ds->digest = pf_dataset_digest_file(ds->digest, ds->file_size[i], !ds->index[i],
						    ds->index[i] ? pf_shard_index_records(ds->index[i])
								 : 0);
	}
	ds->open.index.files = ds->nfiles;
	phase_end(&ds->open.index, scfg->regions);
	return ret;
}

/* The units of a dataset opened from its files' tails. */
static int add_file_units(pf_dataset *ds, const uint64_t *stream_records)
{
	uint64_t ucap = 0;

	for (size_t i = 0; i < ds->nfiles; i++)
		ucap += ds->index[i] ? pf_shard_index_frames(ds->index[i]) : 1;
	ds->units = pf_calloc(ucap ? ucap : 1, sizeof(*ds->units));
	if (!ds->units)
		return -ENOMEM;
	ds->fingerprint = pf_mix64(ds->nfiles);
	for (size_t i = 0; i < ds->nfiles; i++) {
		const pf_shard_index *ix = ds->index[i];

		if (ix) {
			ds->alignment[i] = pf_shard_index_alignment(ix);
			pf_dataset_add_units(ds, i, false, pf_shard_index_frame(ix, 0),
					     pf_shard_index_frames(ix), 0);
		} else {
			pf_dataset_add_units(ds, i, true, NULL, 0, stream_records[i]);
		}
	}
	return 0;
}

/* Open from the manifest the paths name (when use_manifest and they
 * name one), else from every file.  With the pod's collective every host
 * gets here, and votes once whatever happens before (count.c). */
static int open_dataset(pf_dataset **out, const char *const *paths, size_t n, bool use_manifest,
			const pf_source_config *scfg, const pf_open_config *ocfg, pf_error *err)
{
	pf_dataset *ds = pf_calloc(1, sizeof(*ds));
	uint64_t *stream_records = NULL, t0 = pf_now_ns();
	char *manifest = NULL, **files = NULL;
	int ret = ds ? 0 : -ENOMEM, nfiles = 0;

	if (ret == 0 && use_manifest)
		ret = pf_manifest_locate(paths, n, &manifest);
	if (ret == 0) {
		/* The paths' shards; or a manifest named beside them (a shell
		 * glob of their directory), checked against them. */
		nfiles = pf_paths_resolve(paths, n, &files, use_manifest ? &manifest : NULL, err);
		ret = nfiles < 0 ? nfiles : manifest ? 1 : 0;
		if (manifest) {
			pf_paths_free(files, (size_t)nfiles);
			files = NULL;
		}
	}
	if (ret > 0) {
		ds->manifest_path = manifest;
		phase_begin(&ds->open.manifest, scfg->regions);
		ret = pf_dataset_open_manifest(ds, manifest, scfg, err);
		ds->open.manifest.files = 1;
		phase_end(&ds->open.manifest, scfg->regions);
	} else if (ret == 0) {
		ret = read_tails(ds, files, (size_t)nfiles, scfg, ocfg, err);
	}
	if (ret == -ENOMEM && err && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory opening the dataset");
	if (ret < 0 || ds->manifest) {
		/* Nothing to count: the vote alone. */
		if (pf_open_collective(ocfg))
			ret = pf_dataset_vote(ret < 0 ? NULL : ds, ret, err, ocfg, err);
	} else {
		stream_records = pf_calloc(ds->nfiles, sizeof(*stream_records));
		ret = pf_dataset_count_streams(ds, stream_records, scfg, ocfg, err);
		if (ret == 0)
			ret = add_file_units(ds, stream_records);
	}
	if (ret == -ENOMEM && err && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory opening the dataset");
	pf_free(stream_records);
	if (ret < 0) {
		pf_dataset_free(ds);
		return ret;
	}
	/* Looked for a manifest and found none: say how to have one. */
	if (use_manifest && !ds->manifest)
		pf_dataset_manifest_hint(ds, pf_now_ns() - t0);
	*out = ds;
	return 0;
}

int pf_dataset_open(pf_dataset **out, const char *const *paths, size_t n,
		    const pf_source_config *scfg, const pf_open_config *ocfg, pf_error *err)
{
	return open_dataset(out, paths, n, true, scfg, ocfg, err);
}

int pf_dataset_open_shards(pf_dataset **out, const char *const *paths, size_t n,
			   const pf_source_config *scfg, const pf_open_config *ocfg,
			   pf_error *err)
{
	return open_dataset(out, paths, n, false, scfg, ocfg, err);
}

void pf_dataset_file_layout(const pf_dataset *ds, uint64_t *base, uint64_t *records)
{
	for (uint64_t u = 0, at = 0; u < ds->nunits; u++) {
		const pf_unit *un = &ds->units[u];

		if (u == 0 || un->file != ds->units[u - 1].file)
			base[un->file] = at;
		if (records)
			records[un->file] += un->records;
		at += un->records;
	}
}
