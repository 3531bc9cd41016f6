/* SPDX-License-Identifier: Apache-2.0 */
/* The dataset (files, indexes, units) and the per-epoch, per-host plan.
 *
 * The order model (DESIGN.md, "Order, sharding and resume"): the units of
 * the dataset (frames of indexed shards, whole stream files) are permuted
 * per epoch by (seed, epoch); their records, in that order, form one
 * sequence of N records, cut into num_hosts contiguous ranges
 * [floor(h N / H), floor((h+1) N / H)).  Host h reads only the units that
 * overlap its range: about 1/H of the bytes.  Its record stream then
 * goes through a window shuffle seeded by (seed, epoch, h).  Nothing here
 * depends on thread count or timing.
 *
 * The global shuffle (PF_SHUFFLE_GLOBAL) only changes the units: every
 * frame is cut into slices of a few records, and the slices of the
 * whole dataset are what is permuted and cut among the hosts, so that a
 * shuffle window holds records of many frames from anywhere.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader_internal.h"

unsigned pf_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned)n : 1;
}

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

uint64_t pf_plan_steps(uint64_t records, const pf_topology *t, pf_remainder rem)
{
	return pf_steps_per_epoch(records, (uint64_t)t->per_core_batch * t->cores * t->num_hosts,
				  rem);
}

int pf_plan_check_records(uint64_t records, const pf_topology *t, pf_remainder rem,
			  pf_error *err)
{
	uint64_t global = (uint64_t)t->per_core_batch * t->cores * t->num_hosts;

	if (records == 0 || (records < global && rem != PF_REMAINDER_WRAP))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the dataset holds %llu records, fewer than one global "
				    "batch of %llu (per_core_batch %u x %u cores x %u hosts)%s",
				    (unsigned long long)records, (unsigned long long)global,
				    t->per_core_batch, t->cores, t->num_hosts,
				    records ? ": no step could be made (remainder=wrap would "
				    "repeat records to fill one)" : "");
	if (records < t->num_hosts)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the dataset holds %llu records, fewer than the %u hosts: "
				    "with remainder=wrap every host needs one to wrap around",
				    (unsigned long long)records, t->num_hosts);
	return 0;
}

static int add_segment(pf_epoch_plan *p, uint64_t unit, uint64_t first,
		       uint64_t count)
{
	if (pf_grow(&p->seg, &p->cap, p->nseg + 1, sizeof(*p->seg)) < 0)
		return -ENOMEM;
	p->seg[p->nseg++] = (pf_segment){ unit, first, count };
	p->stream_len += count;
	return 0;
}

uint32_t pf_plan_slice(uint32_t block, uint32_t pcb)
{
	uint64_t s;

	if (pcb <= 1 || block <= 1)
		return block ? block : 1;
	/* (pcb - 1)(s - 1) / (block - 1) <= 0.1 */
	s = 1 + (uint64_t)(block - 1) / (10ull * (pcb - 1));
	return (uint32_t)(s < block ? s : block);
}

uint32_t pf_plan_group(uint32_t pcb, uint32_t block, uint64_t nunits, uint64_t records)
{
	uint64_t g = pcb > 1 ? 10ull * (pcb - 1) : 1, r, m;

	g = g < (1u << 20) ? g : (1u << 20);
	/* Frames of r records: a group of G holds G r records, all of them
	 * decompressed at once in the frame cache.  At most PF_GROUP_WINDOWS
	 * windows of them (G = 10 (pcb - 1) frames of 1 MiB is 310 MiB of
	 * fresh memory, whose first touch cost more than the decompression;
	 * docs/performance-preprocess.md), but no fewer than PF_GROUP_MIN frames, so
	 * that a group still holds a sorted dataset's labels in their shares
	 * to within a frame in PF_GROUP_MIN. */
	if (nunits && records && block) {
		uint64_t want;

		r = (records + nunits - 1) / nunits;
		want = ((uint64_t)PF_GROUP_WINDOWS * block + r - 1) / r;
		want = want > PF_GROUP_MIN ? want : PF_GROUP_MIN;
		g = want < g ? want : g;
	}
	/* Balanced: the fewest groups of at most g, equal to within a
	 * frame (not M - 1 full groups and a last one of a few frames, whose
	 * span would draw from those few). */
	if (nunits && g < nunits) {
		m = (nunits + g - 1) / g;
		g = (nunits + m - 1) / m;
	}
	return (uint32_t)g;
}

/* Fisher-Yates over a[0..n) from r. */
static void shuffle_with(pf_rng *r, uint64_t *a, uint64_t n)
{
	for (uint64_t i = n; i > 1; i--) {
		uint64_t j = pf_rng_below(r, i);
		uint64_t tmp = a[i - 1];

		a[i - 1] = a[j];
		a[j] = tmp;
	}
}

/* Fisher-Yates over order[0..n), seeded by (seed, epoch). */
static void permute(uint64_t *order, uint64_t n, uint64_t seed, uint32_t epoch)
{
	pf_rng r = pf_rng_seed(seed, epoch, 0x7065726d /* "perm" */);

	shuffle_with(&r, order, n);
}

/* The global shuffle's items: the slices of every unit, numbered unit by
 * unit (unit u's slices from first[u], ceil(records / slice) of them).
 * @return the slice count, or 0 with *first NULL (out of memory). */
static uint64_t number_slices(const pf_dataset *ds, uint32_t slice, uint64_t **first)
{
	uint64_t n = 0;

	*first = pf_malloc((ds->nunits + 1) * sizeof(**first));
	if (!*first)
		return 0;
	for (uint64_t u = 0; u < ds->nunits; u++) {
		(*first)[u] = n;
		n += (ds->units[u].records + slice - 1) / slice;
	}
	(*first)[ds->nunits] = n;
	return n;
}

/* Item `it` of the epoch's order: a unit whole (slice 0), or a slice of
 * one, found by bisection over the units' first slices. */
static pf_segment item_segment(const pf_dataset *ds, uint32_t slice, const uint64_t *first,
			       uint64_t it)
{
	uint64_t lo = 0, hi = ds->nunits;

	if (!slice)
		return (pf_segment){ it, 0, ds->units[it].records };
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (first[mid] <= it)
			lo = mid;
		else
			hi = mid;
	}
	/* Units of no records have no slices: lo is the last unit whose
	 * first slice is at or before it, so it is lo's own. */
	{
		uint64_t b = (it - first[lo]) * slice, left = ds->units[lo].records - b;

		return (pf_segment){ lo, b, left < slice ? left : slice };
	}
}

/* The global shuffle's order in frame groups (pf_plan_epoch()): the
 * units in dataset order cut into G strata (G = group, at most the
 * units); each stratum's units permuted, group m takes the m-th of each
 * (so every group draws across the whole dataset: on shards sorted by
 * label, each holds the labels in the dataset's shares); the M groups
 * in a random order, each group's slices together, permuted among
 * themselves.  order[] gets every slice once.  @return 0 or -ENOMEM. */
static int group_order(uint64_t *order, const pf_dataset *ds, const uint64_t *first,
		       uint32_t group, uint64_t seed, uint32_t epoch)
{
	uint64_t nu = ds->nunits, g = group < nu ? group : nu, m = g ? (nu + g - 1) / g : 0;
	uint64_t *units = pf_malloc((nu ? nu : 1) * sizeof(*units));
	uint64_t *groups = pf_malloc((m ? m : 1) * sizeof(*groups)), pos = 0;
	pf_rng r = pf_rng_seed(seed, epoch, 0x67727570 /* "grup" */);

	if (!units || !groups) {
		pf_free(units);
		pf_free(groups);
		return -ENOMEM;
	}
	for (uint64_t u = 0; u < nu; u++)
		units[u] = u;
	for (uint64_t j = 0; j < g; j++) {
		uint64_t lo = (uint64_t)((pf_u128)nu * j / g), hi = (uint64_t)((pf_u128)nu * (j + 1) / g);

		shuffle_with(&r, units + lo, hi - lo);
	}
	for (uint64_t k = 0; k < m; k++)
		groups[k] = k;
	shuffle_with(&r, groups, m);
	for (uint64_t k = 0; k < m; k++) {
		uint64_t start = pos;

		for (uint64_t j = 0; j < g; j++) {
			uint64_t lo = (uint64_t)((pf_u128)nu * j / g);
			uint64_t hi = (uint64_t)((pf_u128)nu * (j + 1) / g), u;

			if (lo + groups[k] >= hi)
				continue;
			u = units[lo + groups[k]];
			for (uint64_t s = first[u]; s < first[u + 1]; s++)
				order[pos++] = s;
		}
		shuffle_with(&r, order + start, pos - start);
	}
	pf_free(units);
	pf_free(groups);
	return 0;
}

int pf_plan_epoch(pf_epoch_plan *p, const pf_dataset *ds, const pf_topology *t,
		  uint64_t seed, uint32_t epoch, bool shuffle, uint32_t slice,
		  uint32_t group, pf_remainder rem)
{
	uint64_t n = ds->records, h = t->host_index, hosts = t->num_hosts;
	uint64_t lo = (uint64_t)((pf_u128)n * h / hosts);
	uint64_t hi = (uint64_t)((pf_u128)n * (h + 1) / hosts);
	uint64_t *order, *first = NULL, nitems = ds->nunits, pos = 0;
	int ret = 0;

	p->nseg = 0;
	p->stream_len = 0;
	p->share = hi - lo;
	p->quota = pf_plan_steps(n, t, rem) * t->per_core_batch * t->cores;

	if (slice) {
		nitems = number_slices(ds, slice, &first);
		if (!first)
			return -ENOMEM;
	}
	order = pf_malloc((nitems ? nitems : 1) * sizeof(*order));
	if (!order) {
		pf_free(first);
		return -ENOMEM;
	}
	/* One permutation per epoch: of the units, or of the slices (in
	 * frame groups, or all at once). */
	if (slice && group) {
		ret = group_order(order, ds, first, group, seed, epoch);
	} else {
		for (uint64_t i = 0; i < nitems; i++)
			order[i] = i;
		if (shuffle || slice)
			permute(order, nitems, seed, epoch);
	}
	for (uint64_t i = 0; ret == 0 && i < nitems && pos < hi; i++) {
		pf_segment sg = item_segment(ds, slice, first, order[i]);
		uint64_t b = pos, e = pos + sg.count;

		pos = e;
		if (e <= lo || sg.count == 0)
			continue;
		b = b < lo ? lo : b;
		e = e > hi ? hi : e;
		ret = add_segment(p, sg.unit, sg.first + (b - (pos - sg.count)), e - b);
	}
	pf_free(order);
	pf_free(first);
	if (ret < 0)
		return ret;
	/* Wrap: fill the last step from the start of this host's share. */
	if (p->quota > p->share) {
		size_t base = p->nseg;

		if (p->share == 0)
			return -ERANGE;
		for (size_t i = 0; p->stream_len < p->quota && ret == 0; i = (i + 1) % base) {
			uint64_t need = p->quota - p->stream_len;
			pf_segment s = p->seg[i];
			ret = add_segment(p, s.unit, s.first, s.count < need ? s.count : need);
		}
	}
	return ret;
}

int pf_plan_block(bool shuffle, uint32_t shuffle_window, uint32_t host_batch, uint32_t *block,
		  bool *permute, pf_error *err)
{
	/* shuffle_window 1 is no shuffle within the window. */
	uint64_t window = shuffle ? (shuffle_window ? shuffle_window : PF_WINDOW_DEFAULT) : 1;
	uint64_t w = host_batch ? (window + host_batch - 1) / host_batch * host_batch : window;

	*permute = window > 1;
	if (w > (1u << 30))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "shuffle window of %llu records (in whole host batches of %u) "
				    "is over 2^30 records", (unsigned long long)window, host_batch);
	*block = (uint32_t)w;
	return 0;
}

void pf_plan_block_perm(uint64_t seed, uint32_t epoch, uint32_t host, uint64_t k,
			uint32_t *perm, uint32_t n)
{
	pf_rng r = pf_rng_seed(seed, epoch, pf_mix64(k) ^ (0x626c6b00ull + host));

	for (uint32_t i = 0; i < n; i++)
		perm[i] = i;
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)pf_rng_below(&r, i);
		uint32_t t = perm[i - 1];
		perm[i - 1] = perm[j];
		perm[j] = t;
	}
}

void pf_plan_release(pf_epoch_plan *p)
{
	pf_free(p->seg);
	memset(p, 0, sizeof(*p));
}
