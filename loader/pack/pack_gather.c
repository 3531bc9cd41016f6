/* SPDX-License-Identifier: Apache-2.0 */
/* Packing's lengths: every record's value count of each packed feature,
 * the same on every host before the first batch, each file's read once,
 * by one host.
 *
 * Where a file's lengths come from:
 *   - an index this host holds (the dataset opened without a manifest
 *     reads every shard's tail anyway) whose section tells them: decoded
 *     here, nothing read (LOCAL);
 *   - a stream file counted at the open: the counting measured them on
 *     the way (count.c, pf_open_config.lengths), on the host that counted
 *     it, stream ordinal j mod H (COUNTED);
 *   - any other (the shards of a manifest: their index tails; a stream
 *     file of a manifest, or a shard whose index does not tell them: its
 *     records, on threads): read by host j mod H of the j-th such file
 *     in file order (READ).
 * Then the hosts of a pod exchange what they read (pf_allgather_fn, fixed
 * pieces): a first round of heads (status, what each plans, its bytes and
 * their CRC32C), then the payloads in rounds of at most a chunk.  A host
 * that failed anywhere before still sends its head: every host then fails
 * naming it.  A payload is, per file the host owns in file order, a byte
 * (1: from its index, 0: from its records) and the file's records'
 * lengths as varints, a record's features one after another; anything
 * else is refused naming the host and the file.  On_corrupt skip reads
 * the records on every host (a damaged frame's records are holes, length
 * 0, as the loader makes them).  Not here: the plan from the lengths
 * (pack_plan.c), packing (pack.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pack_internal.h"
#include "spec_internal.h"

/* Payload bytes a host sends in one round at most. */
#define GATHER_CHUNK_DEFAULT (4u << 20)
/* Records a step of the records pass (skip mode). */
#define LENGTHS_GROUP 256u

enum { LEN_LOCAL, LEN_COUNTED, LEN_READ };

/* ------------------------------------------------------------------ */
/* Encoding                                                             */

int pf_pack_lengths_unpack(const uint8_t *p, size_t len, size_t *pos, uint64_t values,
			   uint32_t *dst, bool *from_index, char *why, size_t whylen)
{
	size_t at = *pos;

	if (at >= len) {
		snprintf(why, whylen, "ends at byte %zu, before the file's entry", at);
		return -EBADMSG;
	}
	if (p[at] > 1) {
		snprintf(why, whylen, "byte %zu: the entry's source %u is neither 0 (records) "
			 "nor 1 (index)", at, p[at]);
		return -EBADMSG;
	}
	*from_index = p[at++] == 1;
	for (uint64_t v = 0; v < values; v++) {
		uint64_t x = 0;
		size_t start = at;

		for (unsigned shift = 0;; shift += 7) {
			if (at >= len) {
				snprintf(why, whylen, "ends at byte %zu inside length %llu of %llu",
					 at, (unsigned long long)v, (unsigned long long)values);
				return -EBADMSG;
			}
			if (shift == 35) {
				snprintf(why, whylen, "byte %zu: length %llu is a varint of more "
					 "than 5 bytes", start, (unsigned long long)v);
				return -EBADMSG;
			}
			x |= (uint64_t)(p[at] & 0x7f) << shift;
			if (!(p[at++] & 0x80))
				break;
		}
		if (x > UINT32_MAX) {
			snprintf(why, whylen, "byte %zu: length %llu is %llu, more than 2^32 - 1",
				 start, (unsigned long long)v, (unsigned long long)x);
			return -EBADMSG;
		}
		dst[v] = (uint32_t)x;
	}
	*pos = at;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The gather                                                           */

typedef struct gather {
	const pf_pipe *inner;
	const pf_dataset *ds;
	const pf_spec *lspec;
	uint32_t nf, hosts, me;
	uint64_t *file_records, *file_base;
	uint8_t *src;		/* per file: LEN_* */
	uint32_t *owner;	/* per file: the host that reads it (COUNTED, READ) */
	bool *stream;		/* per file: a stream file */
	pf_lenbuf mine;		/* this host's payload */
	pf_pack_lengths_stats *st;
} gather;

/* What each host says first. */
typedef struct gather_head {
	int32_t status;		/* 0, or the -errno it failed with */
	uint32_t corrupt;	/* on_corrupt */
	uint32_t nf;
	uint32_t crc;		/* CRC32C of the payload */
	uint64_t chunk;		/* its rounds' size (PODFEED_GATHER_CHUNK):
				   the same on every host, else no host
				   would know how many rounds to wait for */
	uint64_t bytes;		/* the payload's */
	uint64_t records;	/* the dataset's, as planned */
	uint32_t plan_crc;	/* skip mode: CRC32C of the lengths this host
				   read alone (every host reads them all);
				   0 otherwise */
	uint32_t pad;
	char error[PF_POD_ERROR_LINE];
} gather_head;

/* The lengths the index ix tells of file f's records, for every packed
 * feature, into len.  @return 1, 0 when it does not tell them all, or
 * <0 with err. */
static int from_index(gather *g, size_t f, const pf_shard_index *ix, uint32_t *tmp,
		      uint32_t *len, pf_error *err)
{
	const pf_dataset *ds = g->ds;
	uint64_t n = pf_shard_index_records(ix);

	if (n != g->file_records[f])
		return pf_error_set(err, -EIO, PF_OFFSET_NONE, 0,
				    "%s: its index holds %llu records, the plan %llu (did the "
				    "shard change since the manifest was written?)", ds->paths[f],
				    (unsigned long long)n, (unsigned long long)g->file_records[f]);
	for (uint32_t k = 0; k < g->nf; k++) {
		int ret = pf_shard_index_lengths(ix, g->lspec->f[2 * k].name, tmp);

		if (ret == -ENOENT)
			return 0;
		if (ret < 0)
			return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
					    "%s: the index's record lengths of '%s' do not decode",
					    ds->paths[f], g->lspec->f[2 * k].name);
		for (uint64_t r = 0; r < n; r++)
			len[r * g->nf + k] = tmp[r];
	}
	return 1;
}

/* Every file's source and owner: the same on every host. */
static int classify(gather *g, uint32_t *tmp_lengths, uint32_t *len, uint64_t *local,
		    pf_error *err)
{
	const pf_dataset *ds = g->ds;
	uint64_t streams = 0, reads = 0;

	for (uint64_t u = 0; u < ds->nunits; u++)
		if (ds->units[u].stream)
			g->stream[ds->units[u].file] = true;
	for (size_t f = 0; f < ds->nfiles; f++) {
		const pf_shard_index *ix = ds->index ? ds->index[f] : NULL;
		int ret = 0;

		if (ix) {
			ret = from_index(g, f, ix, tmp_lengths, len + g->file_base[f] * g->nf, err);
			if (ret < 0)
				return ret;
			if (ret == 1) {
				g->src[f] = LEN_LOCAL;
				*local += g->file_records[f];
				continue;
			}
		}
		if (!ix && g->stream[f] && ds->lengths && !ds->manifest) {
			g->src[f] = LEN_COUNTED;
			g->owner[f] = pf_count_owner(streams++, g->hosts);
			continue;
		}
		g->src[f] = LEN_READ;
		g->owner[f] = pf_count_owner(reads++, g->hosts);
	}
	return 0;
}

/* The index tails of this host's READ files that are shards of a
 * manifest, read at once (tails.c): into ix (per file, NULL for others). */
static int read_tails(gather *g, pf_shard_index **ix, pf_error *err)
{
	const pf_dataset *ds = g->ds;
	pf_dataset *t = pf_calloc(1, sizeof(*t));
	pf_source_config scfg = { .on_corrupt = PF_CORRUPT_FAIL,
				  .max_record_size = g->inner->cfg.max_record_size,
				  .regions = g->inner->cfg.regions };
	size_t n = 0, *which = pf_calloc(ds->nfiles, sizeof(*which));
	int ret = 0;

	if (!t || !which || !(t->paths = pf_calloc(ds->nfiles, sizeof(*t->paths)))) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t f = 0; f < ds->nfiles; f++)
		if (g->src[f] == LEN_READ && g->owner[f] == g->me && !g->stream[f] &&
		    !(ds->index && ds->index[f])) {
			which[n] = f;
			t->paths[n++] = ds->paths[f];
		}
	if (!n)
		goto out;
	t->nfiles = n;
	t->index = pf_calloc(n, sizeof(*t->index));
	t->file_size = pf_calloc(n, sizeof(*t->file_size));
	if (!t->index || !t->file_size) {
		ret = -ENOMEM;
		goto out;
	}
	{
		/* The loader's back-end and read policy (timeout, retries,
		 * faults), as the open's tails: a read that never answers
		 * fails this host, which then tells the pod, rather than
		 * leave every host waiting in the exchange. */
		const pf_loader_config *lc = &g->inner->cfg;
		pf_io_config icfg = { .backend = lc->io_backend, .faults = lc->io_faults,
				      .retries = lc->io_retries,
				      .retry_backoff_us = lc->io_retry_backoff_us,
				      .timeout_ms = lc->io_timeout_ms };

		ret = pf_dataset_read_tails(t, &scfg, &icfg, err);
	}
	if (ret == 0)
		g->st->tails += n;
	for (size_t k = 0; k < n; k++) {
		ix[which[k]] = t->index[k];
		t->index[k] = NULL;
	}
out:
	if (t) {
		pf_free(t->index);
		pf_free(t->file_size);
		pf_free(t->paths);
		pf_free(t);
	}
	pf_free(which);
	if (ret == -ENOMEM && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0,
			     "out of memory reading the shards' packed lengths");
	return ret;
}

/* This host's share: its READ files read (tails, else records) and every
 * file it owns put in its payload, in file order. */
static int read_share(gather *g, pf_error *err)
{
	const pf_dataset *ds = g->ds;
	pf_shard_index **ix = pf_calloc(ds->nfiles, sizeof(*ix));
	uint32_t *files = pf_calloc(ds->nfiles, sizeof(*files)), *tmp = NULL;
	uint64_t *records = NULL, decompressed = 0, most = 1;
	pf_lenbuf *lens = NULL, *slot;
	uint8_t *told = pf_calloc(ds->nfiles, 1);
	size_t nread = 0;
	int ret;

	if (!ix || !files || !told) {
		ret = -ENOMEM;
		goto out;
	}
	ret = read_tails(g, ix, err);
	if (ret < 0)
		goto out;
	for (size_t f = 0; f < ds->nfiles; f++)
		most = g->file_records[f] > most ? g->file_records[f] : most;
	tmp = pf_malloc(most * (g->nf + 1) * sizeof(*tmp));
	lens = pf_calloc(ds->nfiles, sizeof(*lens));
	records = pf_calloc(ds->nfiles, sizeof(*records));
	if (!tmp || !lens || !records) {
		ret = -ENOMEM;
		goto out;
	}
	/* A tail's lengths, or the file to read whole. */
	for (size_t f = 0; f < ds->nfiles; f++) {
		if (g->src[f] != LEN_READ || g->owner[f] != g->me)
			continue;
		if (ix[f]) {
			uint32_t *vals = tmp + most;

			ret = from_index(g, f, ix[f], tmp, vals, err);
			if (ret < 0)
				goto out;
			if (ret == 1) {
				told[f] = 1;
				for (uint64_t v = 0; ret >= 0 && v < g->file_records[f] * g->nf; v++)
					ret = pf_lenbuf_put(&lens[f], vals[v]);
				if (ret < 0)
					goto out;
				continue;
			}
		}
		files[nread++] = (uint32_t)f;
	}
	if (nread) {
		/* The records of these files, read once each. */
		uint64_t *got = pf_calloc(nread, sizeof(*got));
		pf_lenbuf *measured = pf_calloc(nread, sizeof(*measured));

		if (!got || !measured) {
			pf_free(got);
			pf_free(measured);
			ret = -ENOMEM;
			goto out;
		}
		ret = pf_count_measure(ds, files, nread, g->lspec, g->inner->nworkers,
				       g->inner->cfg.max_record_size, got, measured, &decompressed, err);
		g->st->files += nread;
		for (size_t k = 0; k < nread; k++) {
			size_t f = files[k];

			lens[f] = measured[k];
			if (ret == 0 && got[k] != g->file_records[f])
				ret = pf_error_set(err, -EIO, PF_OFFSET_NONE, 0,
						   "%s: holds %llu records read for their packed "
						   "lengths, the plan %llu (did it change since the "
						   "dataset was opened?)", ds->paths[f],
						   (unsigned long long)got[k],
						   (unsigned long long)g->file_records[f]);
		}
		pf_free(got);
		pf_free(measured);
		if (ret < 0)
			goto out;
	}
	/* The payload: every file this host owns, in file order. */
	for (size_t f = 0; f < ds->nfiles && ret == 0; f++) {
		uint8_t src;

		if (g->src[f] == LEN_LOCAL || g->owner[f] != g->me)
			continue;
		g->st->files += g->src[f] == LEN_COUNTED;	/* read whole at the open */
		slot = g->src[f] == LEN_COUNTED ? &ds->lengths[f] : &lens[f];
		src = told[f];
		ret = pf_lenbuf_bytes(&g->mine, &src, 1);
		if (ret == 0)
			ret = pf_lenbuf_bytes(&g->mine, slot->p, slot->len);
	}
out:
	for (size_t f = 0; ix && f < ds->nfiles; f++)
		pf_shard_index_free(ix[f]);
	for (size_t f = 0; lens && f < ds->nfiles; f++)
		pf_free(lens[f].p);
	pf_free(ix);
	pf_free(files);
	pf_free(told);
	pf_free(tmp);
	pf_free(lens);
	pf_free(records);
	if (ret == -ENOMEM && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0,
			     "out of memory reading the packed lengths");
	return ret;
}

/* The payload chunk: PODFEED_GATHER_CHUNK bytes when set (tests). */
static int gather_chunk(size_t *chunk, pf_error *err)
{
	const char *s = getenv("PODFEED_GATHER_CHUNK");
	char *end;
	unsigned long long v;

	*chunk = GATHER_CHUNK_DEFAULT;
	if (!s)
		return 0;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > (1ull << 30))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "PODFEED_GATHER_CHUNK='%s': not a byte count from 1 to "
				    "1073741824", s);
	*chunk = (size_t)v;
	return 0;
}

/* The pod's exchange: heads, then payloads in chunks, into all (each
 * host's at off[h], bytes[h]).  Every host makes the same calls. */
static int exchange(gather *g, const pf_open_config *ocfg, int status, const pf_error *why,
		    uint32_t corrupt, uint64_t records, uint32_t plan_crc, uint8_t **all,
		    uint64_t *off, uint64_t *bytes, pf_error *err)
{
	uint32_t hosts = g->hosts;
	gather_head *h = pf_calloc((size_t)hosts + 1, sizeof(*h)), *heads = h + 1;
	int32_t *readies = pf_calloc(hosts, sizeof(*readies));
	uint8_t *piece = NULL, *round = NULL;
	uint64_t most = 0, total = 0, per = (uint64_t)g->nf * 5, limit = UINT64_MAX;
	size_t chunk = 0;
	int ret;

	/* The most a payload can hold: a source byte a file, and each
	 * record's lengths in varints of at most 5 bytes. */
	if (!per || records <= (UINT64_MAX - g->ds->nfiles) / per)
		limit = records * per + g->ds->nfiles;
	if (!h || !readies) {
		pf_free(h);
		pf_free(readies);
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory for the pod's packed lengths");
	}
	if (status == 0) {
		pf_error cerr;

		pf_error_clear(&cerr);
		status = gather_chunk(&chunk, &cerr);
		if (status < 0) {
			*err = cerr;
			why = err;
		}
	}
	h->status = status;
	h->chunk = chunk;
	h->plan_crc = plan_crc;
	h->corrupt = corrupt;
	h->nf = g->nf;
	h->records = records;
	if (status < 0) {
		pf_pod_error_line(why, h->error);
	} else {
		h->bytes = g->mine.len;
		h->crc = pf_crc32c(0, g->mine.p, g->mine.len);
	}
	{
		pf_error xerr;

		pf_error_clear(&xerr);
		ret = pf_pod_exchange(NULL, ocfg, h, sizeof(*h), heads, "the packed lengths' heads",
				      &xerr);
		if (ret < 0 && status == 0)
			*err = xerr;
	}
	if (status < 0) {
		ret = status;
		if (err != why)
			*err = *why;
		goto out;
	}
	if (ret < 0)
		goto out;
	for (uint32_t k = 0; k < hosts; k++) {
		const gather_head *o = &heads[k];

		if (o->status < 0) {
			ret = pf_error_set(err, o->status, PF_OFFSET_NONE, 0,
					   "host %u of %u, reading its share of the packed "
					   "lengths: %.*s", k, hosts, (int)PF_POD_ERROR_LINE,
					   o->error);
			goto out;
		}
	}
	for (uint32_t k = 0; k < hosts; k++) {
		const gather_head *o = &heads[k];

		if (o->chunk != chunk) {
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "host %u of %u exchanges packed lengths in rounds of "
					   "%llu bytes (PODFEED_GATHER_CHUNK), host %u of %llu: "
					   "set it the same on every host, or on none", g->me,
					   hosts, (unsigned long long)chunk, k,
					   (unsigned long long)o->chunk);
			goto out;
		}
		if (o->plan_crc != plan_crc) {
			/* Skip mode: each host read every record for its
			 * lengths; hosts that saw other lengths (damage read
			 * differently) would plan other steps. */
			ret = pf_error_set(err, -EIO, PF_OFFSET_NONE, 0,
					   "host %u of %u read other packed lengths (CRC32C "
					   "%08x) than host %u (%08x) in skip mode: their plans "
					   "would differ; is the data the same on every host?",
					   k, hosts, o->plan_crc, g->me, plan_crc);
			goto out;
		}
		if (o->bytes > limit || total + o->bytes < total) {
			ret = pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
					   "host %u of %u says its packed lengths are %llu bytes, "
					   "more than %llu records of %u features can take (%llu): "
					   "a damaged head", k, hosts,
					   (unsigned long long)o->bytes,
					   (unsigned long long)records, g->nf,
					   (unsigned long long)limit);
			goto out;
		}
		if (o->corrupt != corrupt || o->nf != g->nf || o->records != records) {
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "host %u of %u packs %u features of %llu records "
					   "(on_corrupt %u), host %u %u of %llu (on_corrupt %u): "
					   "every host must pack the same", g->me, hosts, g->nf,
					   (unsigned long long)records, corrupt, k, o->nf,
					   (unsigned long long)o->records, o->corrupt);
			goto out;
		}
		off[k] = total;
		bytes[k] = o->bytes;
		total += o->bytes;
		most = o->bytes > most ? o->bytes : most;
	}
	g->st->exchanged = total;
	if (!total)
		goto out;
	chunk = chunk < most ? chunk : (size_t)most;
	*all = pf_malloc(total);
	piece = pf_calloc(1, chunk);
	round = pf_malloc((size_t)hosts * chunk);
	/* Whether every host has the memory for the rounds: else each fails
	 * naming the first that has not, none waiting for another's part. */
	{
		int32_t ready = *all && piece && round ? 0 : -ENOMEM;
		pf_error xerr;

		pf_error_clear(&xerr);
		ret = pf_pod_exchange(NULL, ocfg, &ready, sizeof(ready), readies,
				      "the packed lengths' room", &xerr);
		if (ret < 0) {
			*err = xerr;
			goto out;
		}
		if (ready < 0) {
			ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
					   "out of memory for the pod's packed lengths (%llu bytes)",
					   (unsigned long long)total);
			goto out;
		}
		for (uint32_t k = 0; k < hosts; k++)
			if (readies[k] < 0) {
				ret = pf_error_set(err, readies[k], PF_OFFSET_NONE, 0,
						   "host %u of %u has no memory for the pod's "
						   "packed lengths (%llu bytes)", k, hosts,
						   (unsigned long long)total);
				goto out;
			}
	}
	for (uint64_t at = 0; at < most; at += chunk) {
		size_t n = g->mine.len > at ? (size_t)(g->mine.len - at) : 0;

		n = n < chunk ? n : chunk;
		memset(piece, 0, chunk);
		if (n)
			memcpy(piece, g->mine.p + at, n);
		ret = pf_pod_exchange(NULL, ocfg, piece, chunk, round, "the packed lengths", err);
		if (ret < 0)
			goto out;
		for (uint32_t k = 0; k < hosts; k++) {
			uint64_t m = bytes[k] > at ? bytes[k] - at : 0;

			m = m < chunk ? m : chunk;
			if (m)
				memcpy(*all + off[k] + at, round + (size_t)k * chunk, (size_t)m);
		}
	}
	for (uint32_t k = 0; ret == 0 && k < hosts; k++) {
		uint32_t crc = pf_crc32c(0, *all + off[k], (size_t)bytes[k]);

		if (crc != heads[k].crc)
			ret = pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
					   "host %u of %u's packed lengths arrived damaged: "
					   "CRC32C %08x of its %llu bytes, it sent %08x", k, hosts,
					   crc, (unsigned long long)bytes[k], heads[k].crc);
	}
out:
	pf_free(piece);
	pf_free(round);
	pf_free(readies);
	pf_free(h);
	return ret;
}

/* Skip mode: every record read by a loader of the dataset alone, in
 * order (a damaged record: a hole of length 0, as the loader makes it),
 * on every host. */
static int records_pass(const pf_pipe *inner, const pf_loader_config *cfg,
			const pf_spec *lspec, uint32_t nf, uint32_t *len, pf_error *err)
{
	pf_loader_config lcfg = *cfg;
	uint64_t n = 0, total = inner->ds->records;
	pf_pipe *l = NULL;
	pf_batch *b;
	int ret;

	lcfg.pack_length = 0;
	lcfg.features = NULL;
	lcfg.host_index = 0;
	lcfg.num_hosts = 1;
	lcfg.cores_per_host = 1;
	lcfg.per_core_batch = LENGTHS_GROUP;
	lcfg.shuffle = false;
	/* In file order whatever the loader's shuffle: the global one
	 * turns shuffle on by itself. */
	lcfg.shuffle_mode = PF_SHUFFLE_WINDOW;
	lcfg.epochs = 1;
	lcfg.max_steps = 0;
	lcfg.remainder = PF_REMAINDER_WRAP;
	lcfg.resume = NULL;
	lcfg.nresume = 0;
	lcfg.allgather = NULL;	/* this host alone */
	lcfg.quarantine = NULL;
	ret = pf_pipe_create_spec(&l, &lcfg, lspec, err);
	if (ret < 0)
		return ret;
	if (l->ds->records != total) {
		ret = pf_error_set(err, -EIO, PF_OFFSET_NONE, 0,
				   "the dataset holds %llu records read for their lengths, %llu "
				   "when opened (did it change?)",
				   (unsigned long long)l->ds->records, (unsigned long long)total);
		goto out;
	}
	/* One host, in order: the dataset's records 0 .. total - 1 (the
	 * wrapped ones after them are not needed). */
	while ((ret = pf_pipe_next(l, &b)) == 1) {
		const pf_core_batch *cb = &b->core[0];

		for (uint32_t r = 0; r < b->per_core_batch && n < total; r++, n++)
			for (uint32_t f = 0; f < nf; f++)
				len[n * nf + f] = cb->valid[r] ?
					(uint32_t)((const int32_t *)cb->tensors[2 * f + 1].data)[r] : 0;
		pf_pipe_release(l, b);
	}
	if (ret < 0)
		*err = *pf_pipe_last_error(l);
out:
	pf_pipe_free(l);
	return ret;
}

/* Every host's payload into len, file by file. */
static int unpack_all(gather *g, const uint8_t *all, const uint64_t *off, const uint64_t *bytes,
		      uint32_t *len, pf_error *err)
{
	const pf_dataset *ds = g->ds;
	size_t *pos = pf_calloc(g->hosts, sizeof(*pos));
	char why[256];
	int ret = 0;

	if (!pos)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory for the packed lengths");
	for (size_t f = 0; f < ds->nfiles && ret == 0; f++) {
		uint32_t h = g->owner[f];
		bool told;

		if (g->src[f] == LEN_LOCAL)
			continue;
		ret = pf_pack_lengths_unpack(all + off[h], (size_t)bytes[h], &pos[h],
					     g->file_records[f] * g->nf,
					     len + g->file_base[f] * g->nf, &told, why, sizeof(why));
		if (ret < 0)
			ret = pf_error_set(err, ret, PF_OFFSET_NONE, 0,
					   "host %u of %u's packed lengths of %s: %s", h, g->hosts,
					   ds->paths[f], why);
		else if (told)
			g->st->from_index += g->file_records[f];
	}
	for (uint32_t h = 0; h < g->hosts && ret == 0; h++)
		if (pos[h] != bytes[h])
			ret = pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
					   "host %u of %u's packed lengths: %llu bytes past its "
					   "files' lengths (byte %zu of %llu)", h, g->hosts,
					   (unsigned long long)(bytes[h] - pos[h]), pos[h],
					   (unsigned long long)bytes[h]);
	pf_free(pos);
	return ret;
}

int pf_pack_lengths(const pf_pipe *inner, const pf_loader_config *cfg, const pf_spec *lspec,
		    uint32_t nf, int status, pf_error *err, uint32_t **out, uint64_t *nrecords,
		    pf_pack_lengths_stats *st)
{
	pf_open_config ocfg = { .host_index = cfg->host_index, .num_hosts = cfg->num_hosts,
				.allgather = cfg->allgather, .allgather_ctx = cfg->allgather_ctx };
	bool pod = pf_open_collective(&ocfg), skip = cfg->on_corrupt != PF_CORRUPT_FAIL;
	gather g = { .inner = inner, .lspec = lspec, .nf = nf, .hosts = pod ? cfg->num_hosts : 1,
		     .me = pod ? cfg->host_index : 0, .st = st };
	uint64_t total = 0, *off = pf_calloc(g.hosts, sizeof(*off));
	uint64_t *bytes = pf_calloc(g.hosts, sizeof(*bytes)), most = 1;
	uint32_t *len = NULL, *tmp = NULL;
	uint8_t *all = NULL;
	int ret;

	memset(st, 0, sizeof(*st));
	if (status == 0 && (!off || !bytes))
		status = -ENOMEM;
	if (status == 0) {
		const pf_dataset *ds = inner->ds;
		size_t n = ds->nfiles ? ds->nfiles : 1;

		g.ds = ds;
		total = ds->records;
		len = pf_calloc(total ? total * nf : 1, sizeof(*len));
		g.file_records = pf_calloc(n, sizeof(*g.file_records));
		g.file_base = pf_calloc(n, sizeof(*g.file_base));
		g.src = pf_calloc(n, sizeof(*g.src));
		g.owner = pf_calloc(n, sizeof(*g.owner));
		g.stream = pf_calloc(n, sizeof(*g.stream));
		if (len && g.file_records && g.file_base)
			pf_dataset_file_layout(ds, g.file_base, g.file_records);
		for (size_t f = 0; g.file_records && f < ds->nfiles; f++)
			most = g.file_records[f] > most ? g.file_records[f] : most;
		tmp = pf_malloc(most * sizeof(*tmp));
		if (!len || !g.file_records || !g.file_base || !g.src || !g.owner || !g.stream ||
		    !tmp)
			status = -ENOMEM;
	}
	if (status == -ENOMEM && !err->code)
		pf_error_set(err, status, PF_OFFSET_NONE, 0, "out of memory for the packed lengths");
	if (status == 0 && skip) {
		status = records_pass(inner, cfg, lspec, nf, len, err);
		st->files = g.ds->nfiles;
	} else if (status == 0) {
		status = classify(&g, tmp, len, &st->from_index, err);
		if (status == 0)
			status = read_share(&g, err);
	}
	if (pod) {
		uint32_t plan_crc = 0;

		if (status == 0 && skip)
			plan_crc = pf_crc32c(0, len, (size_t)total * nf * sizeof(*len));
		ret = exchange(&g, &ocfg, status, err, (uint32_t)cfg->on_corrupt, total, plan_crc,
			       &all, off, bytes, err);
	} else {
		ret = status;
		if (ret == 0) {
			bytes[0] = g.mine.len;
			all = g.mine.p;
			g.mine.p = NULL;
		}
	}
	if (ret == 0 && !skip)
		ret = unpack_all(&g, all, off, bytes, len, err);
	if (ret == 0) {
		*out = len;
		*nrecords = total;
		len = NULL;
	}
	/* The stream files' lengths the open measured are in the plan now. */
	if (inner && inner->ds && inner->ds->lengths) {
		for (size_t f = 0; f < inner->ds->nfiles; f++)
			pf_free(inner->ds->lengths[f].p);
		pf_free(inner->ds->lengths);
		inner->ds->lengths = NULL;
	}
	pf_free(all);
	pf_free(g.mine.p);
	pf_free(len);
	pf_free(tmp);
	pf_free(g.file_records);
	pf_free(g.file_base);
	pf_free(g.src);
	pf_free(g.owner);
	pf_free(g.stream);
	pf_free(off);
	pf_free(bytes);
	return ret;
}
