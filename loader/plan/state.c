/* SPDX-License-Identifier: Apache-2.0 */
/* Loader checkpoints: the podfeed.LoaderState protobuf in an envelope.
 *
 *   "PFST"  u32 version  u32 payload length  u32 CRC32C(payload)  payload
 *
 * (integers little-endian).  The envelope is what makes a truncated or
 * damaged blob an error rather than a different state: protobuf alone
 * parses many truncations as valid messages with fields missing.  The
 * version is outside the payload so that a future format is refused by
 * name before anything is parsed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"
#include "pf_state.pb-c.h"

static const uint8_t state_magic[4] = { 'P', 'F', 'S', 'T' };
static const uint8_t mix_magic[4] = { 'P', 'F', 'M', 'X' };

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* The envelope's header before a payload of len bytes at p + 16. */
static void envelope_put(void *buf, const uint8_t magic[4], size_t len)
{
	uint8_t *p = buf;

	memcpy(p, magic, 4);
	put_le32(p + 4, PF_STATE_VERSION);
	put_le32(p + 8, (uint32_t)len);
	put_le32(p + 12, pf_crc32c(0, p + PF_STATE_HEADER, len));
}

/* A blob's envelope: its magic (what names the kind of state), version,
 * length and CRC.  @return 0 with *plen, or -EBADMSG / -EPROTONOSUPPORT
 * with err naming the byte offset and what was wrong. */
static int envelope_check(const uint8_t *p, size_t len, const uint8_t magic[4],
			  const char *what, uint32_t *plen, pf_error *err)
{
	uint32_t version, crc;

	if (len < PF_STATE_HEADER)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, len,
				    "state is %zu bytes, shorter than its %u-byte header "
				    "(truncated?)", len, PF_STATE_HEADER);
	if (memcmp(p, magic, 4))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, 0,
				    "not a podfeed %s (no %.4s magic)", what, (const char *)magic);
	version = get_le32(p + 4);
	*plen = get_le32(p + 8);
	crc = get_le32(p + 12);
	if (version == 0)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, 4,
				    "state format version 0 does not exist");
	if (version > PF_STATE_VERSION)
		return pf_error_set(err, -EPROTONOSUPPORT, PF_OFFSET_FILE, 4,
				    "state format version %u is newer than this podfeed "
				    "reads (%u)", version, PF_STATE_VERSION);
	if (*plen > PF_STATE_MAX)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, 8,
				    "state payload of %u bytes is over the %u-byte limit",
				    *plen, PF_STATE_MAX);
	if (*plen != len - PF_STATE_HEADER)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, len,
				    "state holds %zu payload bytes, its header says %u (%s)",
				    len - PF_STATE_HEADER, *plen,
				    *plen > len - PF_STATE_HEADER ? "truncated" : "trailing bytes");
	if (pf_crc32c(0, p + PF_STATE_HEADER, *plen) != crc)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, PF_STATE_HEADER,
				    "state payload fails its CRC32C: corrupt");
	return 0;
}

uint64_t pf_state_remaining(const pf_state *s)
{
	uint64_t n = 0;

	for (size_t i = 0; i < s->npieces; i++)
		n += s->pieces[i].end - s->pieces[i].begin;
	return n;
}

/* A packing loader's part into its message (fill: room for its open
 * rows' values counts), and back (checking its lists' lengths). */
static void pack_put(const struct pf_pack_state *q, Podfeed__PackState *pk, uint32_t *fill)
{
	pk->length = q->length;
	pk->mode = q->mode;
	pk->pool = q->pool;
	pk->features = q->nf;
	pk->host_index = q->saver.host_index;
	pk->num_hosts = q->saver.num_hosts;
	pk->cores_per_host = q->saver.cores;
	pk->per_core_batch = q->saver.per_core_batch;
	pk->step_in_epoch = q->step;
	pk->global_step = q->global_step;
	pk->ahead = q->ahead;
	pk->next_row = q->next_row;
	pk->epoch_steps = q->epoch_steps;
	pk->epoch_rows = q->epoch_rows;
	pk->step_base = q->step_base;
	pk->lost_rows = q->lost_rows;
	pk->lost_records = q->lost_records;
	pk->lost_values = q->lost_values;
	pk->recut = q->recut;
	pk->n_row_id = q->nopen;
	pk->row_id = (uint64_t *)q->id;
	pk->n_row_segments = q->nopen;
	pk->row_segments = (uint32_t *)q->segments;
	for (uint32_t r = 0; r < q->nopen; r++)
		for (uint32_t f = 0; f < q->nf; f++)
			fill[r * q->nf + f] = q->fill[r][f];
	pk->n_row_fill = (size_t)q->nopen * q->nf;
	pk->row_fill = fill;
}

static int pack_get(const Podfeed__PackState *pk, struct pf_pack_state *q, pf_error *err)
{
	*q = (struct pf_pack_state){
		.length = pk->length, .mode = pk->mode, .pool = pk->pool,
		.nf = pk->features,
		.saver = { pk->host_index, pk->num_hosts, pk->cores_per_host,
			   pk->per_core_batch },
		.step = pk->step_in_epoch, .global_step = pk->global_step,
		.ahead = pk->ahead, .next_row = pk->next_row,
		.epoch_steps = pk->epoch_steps, .epoch_rows = pk->epoch_rows,
		.step_base = pk->step_base, .lost_rows = pk->lost_rows,
		.lost_records = pk->lost_records,
		.lost_values = pk->lost_values, .recut = pk->recut,
	};
	if (pk->n_row_id > PF_PACK_POOL_MAX || pk->n_row_segments != pk->n_row_id ||
	    pk->features > PF_PACK_MAX_FEATURES ||
	    pk->n_row_fill != pk->n_row_id * (size_t)pk->features)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, PF_STATE_HEADER,
				    "state's packer lists %zu open rows, %zu record "
				    "counts and %zu values counts (%u features a row, at "
				    "most %u rows)", pk->n_row_id, pk->n_row_segments,
				    pk->n_row_fill, pk->features, PF_PACK_POOL_MAX);
	q->nopen = (uint32_t)pk->n_row_id;
	for (uint32_t r = 0; r < q->nopen; r++) {
		q->id[r] = pk->row_id[r];
		q->segments[r] = pk->row_segments[r];
		for (uint32_t f = 0; f < q->nf; f++)
			q->fill[r][f] = pk->row_fill[r * q->nf + f];
	}
	return 0;
}

int64_t pf_state_encode(const pf_state *s, void *buf, size_t cap)
{
	Podfeed__LoaderState m = PODFEED__LOADER_STATE__INIT;
	Podfeed__PackState pk = PODFEED__PACK_STATE__INIT;
	Podfeed__StatePiece *pieces = NULL, **ptrs = NULL;
	uint32_t fill[PF_PACK_POOL_MAX * PF_PACK_MAX_FEATURES];
	size_t len;

	if (s->npieces) {
		pieces = pf_calloc(s->npieces, sizeof(*pieces));
		ptrs = pf_calloc(s->npieces, sizeof(*ptrs));
		if (!pieces || !ptrs) {
			pf_free(pieces);
			pf_free(ptrs);
			return -ENOMEM;
		}
	}
	for (size_t i = 0; i < s->npieces; i++) {
		podfeed__state_piece__init(&pieces[i]);
		pieces[i].host = s->pieces[i].host;
		pieces[i].begin = s->pieces[i].begin;
		pieces[i].end = s->pieces[i].end;
		ptrs[i] = &pieces[i];
	}
	m.dataset_fingerprint = s->fingerprint;
	m.dataset_records = s->records;
	m.seed = s->seed;
	m.shuffle = s->shuffle;
	m.remainder = s->remainder;
	m.host_index = s->saver.host_index;
	m.num_hosts = s->saver.num_hosts;
	m.cores_per_host = s->saver.cores;
	m.per_core_batch = s->saver.per_core_batch;
	m.shuffle_block = s->block;
	m.epoch = s->epoch;
	m.fresh = s->fresh;
	m.step_in_epoch = s->step_in_epoch;
	m.global_step = s->global_step;
	m.origin_hosts = s->origin.num_hosts;
	m.origin_cores = s->origin.cores;
	m.origin_per_core_batch = s->origin.per_core_batch;
	m.origin_block = s->origin_block;
	m.origin_permute = s->origin_permute;
	m.epoch_dropped = s->epoch_dropped;
	m.epoch_wrapped = s->epoch_wrapped;
	m.global_shuffle = s->global;
	m.origin_slice = s->origin_slice;
	m.origin_group = s->origin_group;
	m.skipped_steps = s->skipped;
	m.n_remaining = s->npieces;
	m.remaining = ptrs;
	if (s->has_pack) {
		pack_put(&s->pack, &pk, fill);
		m.pack = &pk;
	}
	len = podfeed__loader_state__get_packed_size(&m);
	if (PF_STATE_HEADER + len <= cap) {
		podfeed__loader_state__pack(&m, (uint8_t *)buf + PF_STATE_HEADER);
		envelope_put(buf, state_magic, len);
	}
	pf_free(pieces);
	pf_free(ptrs);
	return (int64_t)(PF_STATE_HEADER + len);
}

static bool topology_ok(uint32_t hosts, uint32_t cores, uint32_t pcb)
{
	return hosts && cores && pcb && (uint64_t)cores * pcb <= UINT32_MAX / 2;
}

/* A packing loader's part: its settings, its topology, and the packer's
 * open rows (numbered below its next row, increasing, none over the
 * length, none empty), which are all rows not yet delivered. */
static int check_pack(const struct pf_pack_state *q, pf_error *err)
{
	uint64_t rows_a_step;

	if (q->length < 1 || q->length > PF_PACK_LENGTH_MAX || q->mode > PF_PACK_CONCAT ||
	    q->pool < 1 || q->pool > PF_PACK_POOL_MAX || q->nf < 1 ||
	    q->nf > PF_PACK_MAX_FEATURES || (q->mode == PF_PACK_CONCAT && q->pool != 1))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "state's packing names impossible settings: length %u "
				    "(1..%u), mode %u, pool %u, %u features", q->length,
				    PF_PACK_LENGTH_MAX, q->mode, q->pool, q->nf);
	if (!topology_ok(q->saver.num_hosts, q->saver.cores, q->saver.per_core_batch) ||
	    q->saver.host_index >= q->saver.num_hosts)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "state's packing names an impossible topology: host %u of "
				    "%u, %u cores x %u rows", q->saver.host_index,
				    q->saver.num_hosts, q->saver.cores, q->saver.per_core_batch);
	if (q->step > q->epoch_steps || q->epoch_steps > UINT64_MAX / 2 ||
	    q->step_base > UINT64_MAX / 2)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "state's packing says %llu steps delivered of an epoch "
				    "planned at %llu (after %llu before a resume)",
				    (unsigned long long)q->step, (unsigned long long)q->epoch_steps,
				    (unsigned long long)q->step_base);
	if (q->nopen > q->pool)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "state's packer holds %u open rows, over its pool of %u",
				    q->nopen, q->pool);
	rows_a_step = (uint64_t)q->saver.cores * q->saver.per_core_batch;
	if (q->step > UINT64_MAX / rows_a_step || q->next_row > q->step * rows_a_step)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "state's packer had opened %llu rows, past the %llu of the "
				    "%llu steps delivered: rows it would not rebuild",
				    (unsigned long long)q->next_row,
				    (unsigned long long)(q->step <= UINT64_MAX / rows_a_step ?
							 q->step * rows_a_step : UINT64_MAX),
				    (unsigned long long)q->step);
	for (uint32_t r = 0; r < q->nopen; r++) {
		uint64_t values = 0;

		for (uint32_t f = 0; f < q->nf; f++) {
			if (q->fill[r][f] > q->length)
				return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
						    "state's open row %u holds %u values of "
						    "feature %u, over the length %u", r,
						    q->fill[r][f], f, q->length);
			values += q->fill[r][f];
		}
		if (q->id[r] >= q->next_row || (r && q->id[r] <= q->id[r - 1]) || !values ||
		    !q->segments[r] || q->segments[r] > values)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
					    "state's open row %u (number %llu, %llu values, %u "
					    "records) is not a row of a packer whose next row is "
					    "%llu", r, (unsigned long long)q->id[r],
					    (unsigned long long)values, q->segments[r],
					    (unsigned long long)q->next_row);
	}
	return 0;
}

/* The fields must make sense on their own; against a dataset they are
 * checked by the loader. */
static int check_fields(const pf_state *s, pf_error *err)
{
	if (!topology_ok(s->saver.num_hosts, s->saver.cores, s->saver.per_core_batch) ||
	    s->saver.host_index >= s->saver.num_hosts)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "state names an impossible topology: host %u of %u, "
				    "%u cores x %u records",
				    s->saver.host_index, s->saver.num_hosts, s->saver.cores,
				    s->saver.per_core_batch);
	if (s->remainder > PF_REMAINDER_WRAP)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "state names remainder policy %u, which does not exist",
				    s->remainder);
	if (s->fresh && s->npieces)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "state says epoch %u has not started, yet lists %zu "
				    "pieces of it", s->epoch, s->npieces);
	if (!topology_ok(s->origin.num_hosts, s->origin.cores, s->origin.per_core_batch) ||
	    !s->origin_block || s->origin_block > (1u << 30))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "state names an impossible origin: %u hosts, %u cores x "
				    "%u records, blocks of %u records", s->origin.num_hosts,
				    s->origin.cores, s->origin.per_core_batch, s->origin_block);
	if (s->global != (s->origin_slice != 0) || s->origin_slice > s->origin_block ||
	    (!s->global && s->origin_group))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "state names %s shuffle with slices of %u records (blocks "
				    "of %u) in groups of %u frames", s->global ? "the global" : "no global",
				    s->origin_slice, s->origin_block, s->origin_group);
	for (size_t i = 0; i < s->npieces; i++) {
		const pf_piece *p = &s->pieces[i];

		if (p->host >= s->origin.num_hosts || p->begin >= p->end)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
					    "state piece %zu (host %u, records %llu..%llu) "
					    "is not a piece of a %u-host epoch", i, p->host,
					    (unsigned long long)p->begin,
					    (unsigned long long)p->end, s->origin.num_hosts);
	}
	return s->has_pack ? check_pack(&s->pack, err) : 0;
}

int pf_state_decode(pf_state *s, const void *blob, size_t len, pf_error *err)
{
	const uint8_t *p = blob;
	Podfeed__LoaderState *m;
	uint32_t plen;
	bool oom = false;
	/* protobuf-c allocates through pf_malloc(), a failure remembered so
	 * that out of memory is not taken for a corrupt payload. */
	ProtobufCAllocator pb = { .alloc = pf_alloc_cb_flag, .free = pf_free_cb,
				  .allocator_data = &oom };
	int ret;

	memset(s, 0, sizeof(*s));
	ret = envelope_check(p, len, state_magic, "loader state", &plen, err);
	if (ret < 0)
		return ret;
	m = podfeed__loader_state__unpack(&pb, plen, p + PF_STATE_HEADER);
	if (!m && oom)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory to unpack the state");
	if (!m)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, PF_STATE_HEADER,
				    "state payload does not parse as podfeed.LoaderState");
	if (m->n_remaining > PF_STATE_MAX_PIECES) {
		ret = pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, PF_STATE_HEADER,
				   "state lists %zu pieces, over the limit of %u",
				   m->n_remaining, PF_STATE_MAX_PIECES);
		goto out;
	}
	s->fingerprint = m->dataset_fingerprint;
	s->records = m->dataset_records;
	s->seed = m->seed;
	s->shuffle = m->shuffle;
	s->remainder = m->remainder;
	s->saver = (pf_topology){ m->host_index, m->num_hosts, m->cores_per_host,
				  m->per_core_batch };
	s->block = m->shuffle_block;
	s->epoch = m->epoch;
	s->fresh = m->fresh;
	s->step_in_epoch = m->step_in_epoch;
	s->global_step = m->global_step;
	s->origin = (pf_topology){ 0, m->origin_hosts, m->origin_cores,
				   m->origin_per_core_batch };
	s->origin_block = m->origin_block;
	s->origin_permute = m->origin_permute;
	s->epoch_dropped = m->epoch_dropped;
	s->epoch_wrapped = m->epoch_wrapped;
	s->global = m->global_shuffle;
	s->origin_slice = m->origin_slice;
	s->origin_group = m->origin_group;
	s->skipped = m->skipped_steps;
	if (m->n_remaining) {
		s->pieces = pf_calloc(m->n_remaining, sizeof(*s->pieces));
		if (!s->pieces) {
			ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
					   "no memory for %zu state pieces", m->n_remaining);
			goto out;
		}
	}
	s->npieces = m->n_remaining;
	for (size_t i = 0; i < m->n_remaining; i++)
		s->pieces[i] = (pf_piece){ m->remaining[i]->host, m->remaining[i]->begin,
					   m->remaining[i]->end };
	if (m->pack) {
		s->has_pack = true;
		ret = pack_get(m->pack, &s->pack, err);
		if (ret < 0)
			goto out;
	}
	ret = check_fields(s, err);
out:
	podfeed__loader_state__free_unpacked(m, &pb);
	if (ret < 0)
		pf_state_release(s);
	return ret;
}

void pf_state_release(pf_state *s)
{
	pf_free(s->pieces);
	memset(s, 0, sizeof(*s));
}

int pf_state_inspect_sized(const void *blob, size_t len, pf_state_info *uinfo,
			   size_t info_size, pf_error *err)
{
	pf_state_info info;
	pf_state s;
	int ret;

	pf_error_clear(err);
	/* A mixture's state: where the mixture is (its sources' places are
	 * its own business). */
	if (len >= 4 && !memcmp(blob, mix_magic, 4)) {
		pf_mix_state ms;

		ret = pf_mix_state_decode(&ms, blob, len, err);
		if (ret < 0)
			return ret;
		info = (pf_state_info){
			.host_index = ms.host_index, .num_hosts = ms.num_hosts,
			.cores_per_host = ms.cores, .per_core_batch = ms.per_core_batch,
			.step_in_epoch = ms.next_step, .global_step = ms.next_step,
			.dataset_fingerprint = ms.digest, .sources = (uint32_t)ms.nsources,
			.skipped_steps = ms.skipped,
		};
		if (ms.has_pack) {	/* a packed mixture's: the packer's */
			info.host_index = ms.pack.saver.host_index;
			info.num_hosts = ms.pack.saver.num_hosts;
			info.cores_per_host = ms.pack.saver.cores;
			info.per_core_batch = ms.pack.saver.per_core_batch;
			info.step_in_epoch = ms.pack.step_base + ms.pack.step;
			info.global_step = ms.pack.global_step;
			info.pack_length = ms.pack.length;
			info.pack_mode = ms.pack.mode;
			info.pack_pool = ms.pack.pool;
			info.pack_features = ms.pack.nf;
		}
		pf_mix_state_release(&ms);
		pf_struct_out(uinfo, info_size, &info, sizeof(info));
		return 0;
	}
	ret = pf_state_decode(&s, blob, len, err);
	if (ret < 0)
		return ret;
	info = (pf_state_info){
		.host_index = s.saver.host_index, .num_hosts = s.saver.num_hosts,
		.cores_per_host = s.saver.cores, .per_core_batch = s.saver.per_core_batch,
		.epoch = s.epoch, .fresh = s.fresh, .step_in_epoch = s.step_in_epoch,
		.global_step = s.global_step, .records_left = pf_state_remaining(&s),
		.dataset_records = s.records, .dataset_fingerprint = s.fingerprint,
		.seed = s.seed, .shuffle = s.shuffle, .global_shuffle = s.global,
		.remainder = s.remainder, .skipped_steps = s.skipped,
	};
	if (s.has_pack) {
		info.host_index = s.pack.saver.host_index;
		info.num_hosts = s.pack.saver.num_hosts;
		info.cores_per_host = s.pack.saver.cores;
		info.per_core_batch = s.pack.saver.per_core_batch;
		info.step_in_epoch = s.pack.step_base + s.pack.step;
		info.global_step = s.pack.global_step;
		info.fresh = s.fresh && !s.pack.step;
		info.pack_length = s.pack.length;
		info.pack_mode = s.pack.mode;
		info.pack_pool = s.pack.pool;
		info.pack_features = s.pack.nf;
	}
	pf_state_release(&s);
	pf_struct_out(uinfo, info_size, &info, sizeof(info));
	return 0;
}


/* ------------------------------------------------------------------ */
/* A mixture's state (mixture_state.c): "PFMX", the same envelope        */


int64_t pf_mix_state_encode(const pf_mix_state *s, void *buf, size_t cap)
{
	Podfeed__MixtureState m = PODFEED__MIXTURE_STATE__INIT;
	Podfeed__PackState pk = PODFEED__PACK_STATE__INIT;
	uint32_t fill[PF_PACK_POOL_MAX * PF_PACK_MAX_FEATURES];
	Podfeed__MixtureSource *src = pf_calloc(s->nsources + 1, sizeof(*src));
	Podfeed__MixtureSource **ptrs = pf_calloc(s->nsources + 1, sizeof(*ptrs));
	ProtobufCBinaryData *pend;
	size_t len, npend = 0;

	for (size_t i = 0; i < s->nsources; i++)
		npend += s->sources[i].npending;
	pend = pf_calloc(npend + 1, sizeof(*pend));
	if (!src || !ptrs || !pend) {
		pf_free(src);
		pf_free(ptrs);
		pf_free(pend);
		return -ENOMEM;
	}
	npend = 0;
	for (size_t i = 0; i < s->nsources; i++) {
		podfeed__mixture_source__init(&src[i]);
		src[i].state.data = (uint8_t *)s->sources[i].state;
		src[i].state.len = s->sources[i].state_len;
		src[i].consumed = s->sources[i].consumed;
		src[i].bridge_batch = s->sources[i].bridge_batch;
		src[i].bridge_epoch = s->sources[i].bridge_epoch;
		src[i].whole_batch = s->sources[i].whole_batch;
		src[i].pack_ahead = s->sources[i].pack_ahead;
		src[i].pack_past.data = (uint8_t *)s->sources[i].past;
		src[i].pack_past.len = s->sources[i].past_len;
		src[i].pack_past_consumed = s->sources[i].past_consumed;
		src[i].pending = pend + npend;
		src[i].n_pending = s->sources[i].npending;
		for (size_t j = 0; j < s->sources[i].npending; j++, npend++)
			pend[npend] = (ProtobufCBinaryData){ s->sources[i].pending_len[j],
							     (uint8_t *)s->sources[i].pending[j] };
		ptrs[i] = &src[i];
	}
	m.digest = s->digest;
	m.next_step = s->next_step;
	m.end_plus_one = s->end_plus_one;
	m.host_index = s->host_index;
	m.num_hosts = s->num_hosts;
	m.cores_per_host = s->cores;
	m.per_core_batch = s->per_core_batch;
	m.n_sources = s->nsources;
	m.sources = ptrs;
	if (s->has_pack) {
		pack_put(&s->pack, &pk, fill);
		m.pack = &pk;
	}
	m.skipped_steps = s->skipped;
	m.n_names = s->nnames;
	m.names = (char **)s->names;
	len = podfeed__mixture_state__get_packed_size(&m);
	if (PF_STATE_HEADER + len <= cap) {
		podfeed__mixture_state__pack(&m, (uint8_t *)buf + PF_STATE_HEADER);
		envelope_put(buf, mix_magic, len);
	}
	pf_free(src);
	pf_free(ptrs);
	pf_free(pend);
	return (int64_t)(PF_STATE_HEADER + len);
}

int pf_mix_state_decode(pf_mix_state *s, const void *blob, size_t len, pf_error *err)
{
	bool oom = false;
	ProtobufCAllocator pb = { .alloc = pf_alloc_cb_flag, .free = pf_free_cb,
				  .allocator_data = &oom };
	Podfeed__MixtureState *m;
	uint32_t plen;
	int ret;

	memset(s, 0, sizeof(*s));
	ret = envelope_check(blob, len, mix_magic, "mixture state", &plen, err);
	if (ret < 0)
		return ret;
	m = podfeed__mixture_state__unpack(&pb, plen, (const uint8_t *)blob + PF_STATE_HEADER);
	if (!m)
		return oom ? pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
					  "no memory to unpack the state")
			   : pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, PF_STATE_HEADER,
					  "state payload does not parse as podfeed.MixtureState");
	s->digest = m->digest;
	s->next_step = m->next_step;
	s->end_plus_one = m->end_plus_one;
	s->host_index = m->host_index;
	s->num_hosts = m->num_hosts;
	s->cores = m->cores_per_host;
	s->per_core_batch = m->per_core_batch;
	s->nsources = m->n_sources;
	if (m->pack) {
		s->has_pack = true;
		ret = pack_get(m->pack, &s->pack, err);
		if (ret == 0)
			ret = check_pack(&s->pack, err);
		if (ret < 0)
			goto out;
	}
	s->skipped = m->skipped_steps;
	if (m->n_names && m->n_names != m->n_sources) {
		ret = pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, PF_STATE_HEADER,
				   "mixture state names %zu sources and holds %zu", m->n_names,
				   m->n_sources);
		goto out;
	}
	if (m->n_names) {
		s->names_mem = pf_calloc(m->n_names, sizeof(*s->names_mem));
		for (size_t i = 0; s->names_mem && i < m->n_names; i++) {
			size_t nl = strlen(m->names[i]) + 1;

			s->names_mem[i] = pf_malloc(nl);
			if (!s->names_mem[i]) {
				ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
						   "no memory for the state");
				goto out;
			}
			memcpy(s->names_mem[i], m->names[i], nl);
			s->nnames = i + 1;
		}
		if (!s->names_mem) {
			ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "no memory for the state");
			goto out;
		}
		s->names = (const char *const *)s->names_mem;
	}
	{
		size_t npend = 0;

		for (size_t i = 0; i < m->n_sources; i++)
			npend += m->sources[i]->n_pending;
		s->pend = pf_calloc(npend + 1, sizeof(*s->pend));
		s->pend_len = pf_calloc(npend + 1, sizeof(*s->pend_len));
	}
	s->sources = pf_calloc(m->n_sources + 1, sizeof(*s->sources));
	s->mem = pf_malloc(plen + 1);
	if (!s->sources || !s->mem || !s->pend || !s->pend_len) {
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "no memory for the state");
		goto out;
	}
	/* The sources' states point into one copy of the payload. */
	{
		size_t at = 0, np = 0;

		for (size_t i = 0; i < m->n_sources; i++) {
			const Podfeed__MixtureSource *ms = m->sources[i];

			if (ms->state.len)	/* an empty one's data is NULL */
				memcpy(s->mem + at, ms->state.data, ms->state.len);
			s->sources[i] = (pf_mix_source_state){
				.state = s->mem + at, .state_len = ms->state.len,
				.consumed = ms->consumed, .bridge_batch = ms->bridge_batch,
				.bridge_epoch = ms->bridge_epoch, .whole_batch = ms->whole_batch,
				.pending = s->pend + np, .pending_len = s->pend_len + np,
				.npending = ms->n_pending, .pack_ahead = ms->pack_ahead };
			at += ms->state.len;
			if (ms->pack_past.len) {
				memcpy(s->mem + at, ms->pack_past.data, ms->pack_past.len);
				s->sources[i].past = s->mem + at;
				s->sources[i].past_len = ms->pack_past.len;
				s->sources[i].past_consumed = ms->pack_past_consumed;
				at += ms->pack_past.len;
			}
			for (size_t j = 0; j < ms->n_pending; j++, np++) {
				if (ms->pending[j].len)	/* an empty one's data is NULL */
					memcpy(s->mem + at, ms->pending[j].data,
					       ms->pending[j].len);
				s->pend[np] = s->mem + at;
				s->pend_len[np] = ms->pending[j].len;
				at += ms->pending[j].len;
			}
		}
	}
out:
	podfeed__mixture_state__free_unpacked(m, &pb);
	if (ret < 0)
		pf_mix_state_release(s);
	return ret;
}

void pf_mix_state_release(pf_mix_state *s)
{
	for (size_t i = 0; s->names_mem && i < s->nnames; i++)
		pf_free(s->names_mem[i]);
	pf_free(s->names_mem);
	pf_free(s->pend);
	pf_free(s->pend_len);
	pf_free(s->sources);
	pf_free(s->mem);
	memset(s, 0, sizeof(*s));
}
