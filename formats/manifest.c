/* SPDX-License-Identifier: Apache-2.0 */
/* The dataset manifest: build and encode one, check and decode one
 * (pf_formats.h, "The dataset manifest", says the layout).  Over caller
 * buffers: reading and writing the file is the caller's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_internal.h"
#include "pf_manifest.pb-c.h"

#define MANIFEST_MAX_PATH 4095u
#define MANIFEST_LEVEL 3

/* The file: a zstd envelope (formats_internal.h) around the protobuf. */
static const pf_envelope_kind manifest_envelope = {
	.what = "manifest", .magic = { 'P', 'F', 'M', 'F' }, .version = PF_MANIFEST_VERSION,
	.zstd = true, .max_raw = PF_MANIFEST_MAX_RAW,
	.newer_hint = " (write it again with this shardtool)",
};
_Static_assert(PF_MANIFEST_HEADER == PF_ENVELOPE_ZSTD_HEADER, "the manifest's header");

struct pf_manifest {
	pf_manifest_shard *shards;
	size_t nshards;
	pf_frame_info *frames;
	size_t nframes;
	char *strings;			/* every path, NUL-terminated, one block */
	pf_feature_schema *schema;	/* names owned */
	size_t nschema;
	uint64_t schema_records;
	uint64_t records;
	/* Per shard, what identifies its content (pf_manifest_shard_tail());
	 * NULL in a manifest written before tails were. */
	uint32_t *tail_len, *tail_crc;
};

struct pf_manifest_builder {
	pf_manifest m;			/* shards' paths owned one by one */
	size_t shard_cap, frame_cap, tail_cap;
	size_t ntails;			/* shards whose tail was set */
	uint8_t *blob;			/* the last encoding, until the next add */
	size_t blob_len;
};

static bool path_ok(const char *p, const char **why)
{
	size_t len = strlen(p);

	*why = NULL;
	if (!len)
		*why = "is empty";
	else if (len > MANIFEST_MAX_PATH)
		*why = "is longer than 4095 bytes";
	else if (p[0] == '/')
		*why = "is absolute (paths are relative to the manifest's directory)";
	for (const char *c = p; !*why && *c;) {
		size_t n = strcspn(c, "/");

		if (n == 2 && c[0] == '.' && c[1] == '.')
			*why = "climbs out of the manifest's directory with \"..\"";
		c += n + (c[n] == '/');
	}
	return !*why;
}

/* A shard entry on its own: path, format, frames inside the file and
 * adding up to its records.  off: the byte the error names. */
static int check_shard(const pf_manifest_shard *s, size_t i, uint64_t off, pf_error *err)
{
	uint64_t records = 0, prev_end = 0;
	const char *why = NULL;
	char where[128];

#define SHARD_FAIL(fmt, ...)                                                   \
	return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,                \
			    "manifest shard %zu (%.64s): " fmt, i, s->path, __VA_ARGS__)
	if (!path_ok(s->path, &why))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
				    "manifest shard %zu: its path \"%.64s\" %s", i, s->path, why);
	if (s->format != PF_MANIFEST_INDEXED && s->format != PF_MANIFEST_STREAM)
		SHARD_FAIL("format %u is neither indexed (1) nor stream (2)", (unsigned)s->format);
	if (s->format == PF_MANIFEST_STREAM) {
		if (s->nframes)
			SHARD_FAIL("a stream file with %u frames", s->nframes);
		if (s->records && !s->size)
			SHARD_FAIL("%llu records in an empty file", (unsigned long long)s->records);
		return 0;
	}
	if (!pf_alignment_ok(s->alignment))
		SHARD_FAIL("alignment %u is not a power of two >= 4096", s->alignment);
	for (uint32_t f = 0; f < s->nframes; f++) {
		const pf_frame_info *fi = &s->frames[f];

		if (fi->offset < prev_end)
			SHARD_FAIL("frame %u at byte %llu overlaps the frame before it (ends at %llu)",
				   f, (unsigned long long)fi->offset,
				   (unsigned long long)prev_end);
		if (fi->compressed_size > s->size || fi->offset > s->size - fi->compressed_size)
			SHARD_FAIL("frame %u (%u bytes at byte %llu) lies outside the file's %llu bytes",
				   f, fi->compressed_size, (unsigned long long)fi->offset,
				   (unsigned long long)s->size);
		if (pf_frame_check(fi, f, s->alignment, "", off, NULL) < 0) {
			/* Again, to say so: the message is made only then. */
			snprintf(where, sizeof(where), "manifest shard %zu (%.64s): ", i, s->path);
			return pf_frame_check(fi, f, s->alignment, where, off, err);
		}
		prev_end = fi->offset + fi->compressed_size;
		records += fi->records;
	}
	if (records != s->records)
		SHARD_FAIL("its frames hold %llu records, the entry says %llu", (unsigned long long)records, (unsigned long long)s->records);
#undef SHARD_FAIL
	return 0;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp((*(const pf_manifest_shard *const *)a)->path,
		      (*(const pf_manifest_shard *const *)b)->path);
}

/* No path twice: one shard read twice would repeat its records. */
static int check_unique(const pf_manifest *m, uint64_t off, pf_error *err)
{
	const pf_manifest_shard **by_path;
	int ret = 0;

	if (m->nshards < 2)
		return 0;
	by_path = pf_malloc(m->nshards * sizeof(*by_path));
	if (!by_path)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory to check the manifest's paths");
	for (size_t i = 0; i < m->nshards; i++)
		by_path[i] = &m->shards[i];
	qsort(by_path, m->nshards, sizeof(*by_path), cmp_path);
	for (size_t i = 1; i < m->nshards && !ret; i++)
		if (!strcmp(by_path[i - 1]->path, by_path[i]->path))
			ret = pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
					   "manifest names shard \"%.64s\" twice (entries %zu and %zu)",
					   by_path[i]->path,
					   (size_t)(by_path[i - 1] - m->shards),
					   (size_t)(by_path[i] - m->shards));
	pf_free(by_path);
	return ret;
}

static void schema_free(pf_feature_schema *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pf_free((char *)s[i].name);
	pf_free(s);
}

void pf_manifest_free(pf_manifest *m)
{
	if (!m)
		return;
	pf_free(m->shards);
	pf_free(m->frames);
	pf_free(m->strings);
	pf_free(m->tail_len);
	pf_free(m->tail_crc);
	schema_free(m->schema, m->nschema);
	pf_free(m);
}

size_t pf_manifest_shards(const pf_manifest *m)
{
	return m->nshards;
}

const pf_manifest_shard *pf_manifest_get(const pf_manifest *m, size_t i)
{
	return i < m->nshards ? &m->shards[i] : NULL;
}

uint64_t pf_manifest_records(const pf_manifest *m)
{
	return m->records;
}

size_t pf_manifest_schema_count(const pf_manifest *m)
{
	return m->nschema;
}

const pf_feature_schema *pf_manifest_schema(const pf_manifest *m, size_t i)
{
	return i < m->nschema ? &m->schema[i] : NULL;
}

uint64_t pf_manifest_schema_records(const pf_manifest *m)
{
	return m->schema_records;
}

bool pf_manifest_shard_tail(const pf_manifest *m, size_t i, uint32_t *len, uint32_t *crc32c)
{
	if (!m->tail_len || i >= m->nshards)
		return false;
	*len = m->tail_len[i];
	*crc32c = m->tail_crc[i];
	return true;
}

uint32_t pf_manifest_tail_len(uint64_t size, uint64_t data_end)
{
	uint64_t len = data_end && data_end <= size ? size - data_end : PF_MANIFEST_STREAM_TAIL;
	uint64_t cap = data_end ? PF_MANIFEST_TAIL_MAX : PF_MANIFEST_STREAM_TAIL;

	len = len < cap ? len : cap;
	return (uint32_t)(len < size ? len : size);
}

/* The tails, when the payload has them: one per shard, none longer than
 * its shard.  off: the payload's byte in the file. */
static int tails_from_pb(pf_manifest *m, const Podfeed__Manifest *pb, uint64_t off,
			 pf_error *err)
{
	size_t n = m->nshards;

	if (!pb->n_tail_len && !pb->n_tail_crc32c)
		return 0;	/* written before tails: size and mtime */
	if (pb->n_tail_len != n || pb->n_tail_crc32c != n)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
				    "manifest tail arrays differ in length (%zu shards, %zu tail "
				    "lengths, %zu tail CRCs)", n, pb->n_tail_len,
				    pb->n_tail_crc32c);
	m->tail_len = pf_malloc((n ? n : 1) * sizeof(*m->tail_len));
	m->tail_crc = pf_malloc((n ? n : 1) * sizeof(*m->tail_crc));
	if (!m->tail_len || !m->tail_crc)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory for a manifest of %zu shards", n);
	for (size_t i = 0; i < n; i++) {
		if (pb->tail_len[i] > m->shards[i].size)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
					    "manifest shard %zu (%.64s): a tail of %u bytes in a "
					    "file of %llu", i, m->shards[i].path, pb->tail_len[i],
					    (unsigned long long)m->shards[i].size);
		m->tail_len[i] = pb->tail_len[i];
		m->tail_crc[i] = pb->tail_crc32c[i];
	}
	return 0;
}

/* The decoded protobuf into m: arrays checked against each other first,
 * then each shard.  off: the payload's byte in the file. */
static int from_pb(pf_manifest *m, const Podfeed__Manifest *pb, uint64_t off, pf_error *err)
{
	size_t n = pb->n_path, nf = pb->n_frame_offset, strbytes = 0, fi = 0;
	char *sp;
	int ret;

	if (pb->n_size != n || pb->n_mtime_ns != n || pb->n_format != n || pb->n_records != n ||
	    pb->n_frames != n || pb->n_alignment != n || pb->n_max_record != n)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
				    "manifest shard arrays differ in length (%zu paths, %zu sizes, "
				    "%zu mtimes, %zu formats, %zu record counts, %zu frame counts, "
				    "%zu alignments, %zu largest records)", n, pb->n_size,
				    pb->n_mtime_ns, pb->n_format, pb->n_records, pb->n_frames,
				    pb->n_alignment, pb->n_max_record);
	if (pb->n_frame_compressed_size != nf || pb->n_frame_uncompressed_size != nf ||
	    pb->n_frame_records != nf || pb->n_frame_crc32c != nf)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
				    "manifest frame arrays differ in length (%zu offsets, %zu "
				    "compressed sizes, %zu uncompressed sizes, %zu record counts, "
				    "%zu CRCs)", nf, pb->n_frame_compressed_size,
				    pb->n_frame_uncompressed_size, pb->n_frame_records,
				    pb->n_frame_crc32c);
	{
		uint64_t total = 0;

		for (size_t i = 0; i < n; i++)
			total += pb->frames[i];
		if (total != nf)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
					    "manifest shards count %llu frames in all, the frame "
					    "arrays hold %zu", (unsigned long long)total, nf);
	}
	for (size_t i = 0; i < n; i++)
		strbytes += strlen(pb->path[i]) + 1;
	m->shards = pf_calloc(n ? n : 1, sizeof(*m->shards));
	m->frames = pf_calloc(nf ? nf : 1, sizeof(*m->frames));
	m->strings = pf_malloc(strbytes ? strbytes : 1);
	m->schema = pb->n_schema ? pf_calloc(pb->n_schema, sizeof(*m->schema)) : NULL;
	if (!m->shards || !m->frames || !m->strings || (pb->n_schema && !m->schema))
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory for a manifest of %zu shards", n);
	m->nshards = n;
	m->nframes = nf;
	sp = m->strings;
	for (size_t i = 0; i < n; i++) {
		pf_manifest_shard *s = &m->shards[i];
		uint64_t first = 0;
		size_t len = strlen(pb->path[i]) + 1;

		memcpy(sp, pb->path[i], len);
		s->path = sp;
		sp += len;
		s->size = pb->size[i];
		s->mtime_ns = pb->mtime_ns[i];
		s->format = (pf_manifest_format)pb->format[i];
		s->records = pb->records[i];
		s->max_record = pb->max_record[i];
		s->alignment = pb->alignment[i];
		s->nframes = pb->frames[i];
		s->frames = &m->frames[fi];
		for (uint32_t f = 0; f < s->nframes; f++, fi++) {
			pf_frame_info *x = &m->frames[fi];

			x->offset = pb->frame_offset[fi];
			x->compressed_size = pb->frame_compressed_size[fi];
			x->uncompressed_size = pb->frame_uncompressed_size[fi];
			x->records = pb->frame_records[fi];
			x->crc32c = pb->frame_crc32c[fi];
			x->first_record = first;
			first += x->records;
		}
		ret = check_shard(s, i, off, err);
		if (ret < 0)
			return ret;
		if (m->records + s->records < m->records)
			return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
					    "manifest record counts overflow at shard %zu", i);
		m->records += s->records;
	}
	for (size_t i = 0; i < pb->n_schema; i++) {
		const Podfeed__FeatureSchema *f = pb->schema[i];
		pf_feature_schema *s = &m->schema[i];

		if (pf_schema_pb_fault(f) || f->records_present > pb->schema_records ||
		    (i && strcmp(pb->schema[i - 1]->name, f->name) >= 0))
			return pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, off,
					    "manifest schema entry %zu (\"%.64s\") does not hold together "
					    "(kind %u, unset in %llu of %llu of %llu records, or not "
					    "sorted by name)", i, f->name, f->kind,
					    (unsigned long long)f->records_unset,
					    (unsigned long long)f->records_present,
					    (unsigned long long)pb->schema_records);
		if (pf_schema_from_pb(s, f) < 0)
			return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
					    "no memory for the manifest's schema");
		m->nschema = i + 1;
	}
	m->schema_records = pb->schema_records;
	ret = tails_from_pb(m, pb, off, err);
	return ret < 0 ? ret : check_unique(m, off, err);
}

int pf_manifest_parse(pf_manifest **out, const void *buf, size_t len, pf_error *err)
{
	/* protobuf-c allocates through pf_malloc(); a failure is remembered
	 * so that out of memory is not taken for a corrupt payload. */
	bool pb_failed = false;
	ProtobufCAllocator pba = { .alloc = pf_alloc_cb_flag, .free = pf_free_cb,
				   .allocator_data = &pb_failed };
	Podfeed__Manifest *pb = NULL;
	pf_manifest *m = NULL;
	pf_envelope_payload raw;
	int ret;

	*out = NULL;
	ret = pf_envelope_open(&manifest_envelope, buf, len, &raw, err);
	if (ret < 0)
		return ret;
	pb = podfeed__manifest__unpack(&pba, raw.len, raw.data);
	if (!pb) {
		ret = pb_failed ? pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
					       "no memory to unpack the manifest")
				: pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, PF_MANIFEST_HEADER,
					       "manifest payload is not a podfeed.Manifest protobuf");
		goto out;
	}
	if (pb->version != raw.version) {
		ret = pf_error_set(err, -EBADMSG, PF_OFFSET_FILE, PF_MANIFEST_HEADER,
				   "manifest payload says version %u, its header %u", pb->version,
				   raw.version);
		goto out;
	}
	m = pf_calloc(1, sizeof(*m));
	if (!m) {
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "no memory for a manifest");
		goto out;
	}
	ret = from_pb(m, pb, PF_MANIFEST_HEADER, err);
	if (ret < 0)
		goto out;
	*out = m;
	m = NULL;
out:
	if (pb)
		podfeed__manifest__free_unpacked(pb, &pba);
	pf_free(raw.owned);
	pf_manifest_free(m);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Building                                                             */

int pf_manifest_builder_create(pf_manifest_builder **out)
{
	pf_manifest_builder *b = pf_calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	*out = b;
	return 0;
}

void pf_manifest_builder_free(pf_manifest_builder *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->m.nshards; i++)
		pf_free((char *)b->m.shards[i].path);
	pf_free(b->m.shards);
	pf_free(b->m.frames);
	pf_free(b->m.tail_len);
	pf_free(b->m.tail_crc);
	schema_free(b->m.schema, b->m.nschema);
	pf_free(b->blob);
	pf_free(b);
}

static void forget_blob(pf_manifest_builder *b)
{
	pf_free(b->blob);
	b->blob = NULL;
	b->blob_len = 0;
}

int pf_manifest_builder_add(pf_manifest_builder *b, const pf_manifest_shard *s, pf_error *err)
{
	pf_manifest_shard *d;
	int ret = check_shard(s, b->m.nshards, 0, err);

	if (ret < 0)
		return -EINVAL;
	if (pf_grow(&b->m.shards, &b->shard_cap, b->m.nshards + 1, sizeof(*b->m.shards)) ||
	    pf_grow(&b->m.frames, &b->frame_cap, b->m.nframes + s->nframes,
		    sizeof(*b->m.frames)))
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory for manifest entry %zu", b->m.nshards);
	d = &b->m.shards[b->m.nshards];
	*d = *s;
	d->path = pf_strdup(s->path);
	if (!d->path)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory for manifest entry %zu", b->m.nshards);
	d->frames = NULL;	/* frames live in b->m.frames, which may move */
	if (s->nframes)	/* a stream file has none: no copy from NULL */
		memcpy(&b->m.frames[b->m.nframes], s->frames, s->nframes * sizeof(*s->frames));
	b->m.nframes += s->nframes;
	b->m.nshards++;
	b->m.records += s->records;
	forget_blob(b);
	return 0;
}

int pf_manifest_builder_set_tail(pf_manifest_builder *b, uint32_t len, uint32_t crc32c)
{
	size_t i = b->m.nshards;
	size_t cap = b->tail_cap;

	/* Each shard's right after it is added: a manifest has a tail for
	 * every shard or for none. */
	if (!i || len > b->m.shards[i - 1].size || b->ntails + 1 < i)
		return -EINVAL;
	if (pf_grow(&b->m.tail_len, &cap, i, sizeof(*b->m.tail_len)) ||
	    pf_grow(&b->m.tail_crc, &b->tail_cap, i, sizeof(*b->m.tail_crc)))
		return -ENOMEM;
	b->m.tail_len[i - 1] = len;
	b->m.tail_crc[i - 1] = crc32c;
	b->ntails = i;
	forget_blob(b);
	return 0;
}

int pf_manifest_builder_add_schema(pf_manifest_builder *b, const pf_feature_schema *schema,
				   size_t n, uint64_t records)
{
	forget_blob(b);
	b->m.schema_records += records;
	for (size_t k = 0; k < n; k++) {
		const pf_feature_schema *f = &schema[k];
		size_t lo = 0, hi = b->m.nschema;
		pf_feature_schema *s, *grown;

		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (strcmp(b->m.schema[mid].name, f->name) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < b->m.nschema && !strcmp(b->m.schema[lo].name, f->name)) {
			s = &b->m.schema[lo];
			if (s->kind == PF_KIND_NONE)
				s->kind = f->kind;
			else if (f->kind != PF_KIND_NONE && f->kind != s->kind)
				s->mixed = true;
			s->is_list |= f->is_list;
			s->mixed |= f->mixed;
			s->min_len = f->min_len < s->min_len ? f->min_len : s->min_len;
			s->max_len = f->max_len > s->max_len ? f->max_len : s->max_len;
			s->records_present += f->records_present;
			s->records_unset += f->records_unset;
			s->total_values += f->total_values;
			continue;
		}
		grown = pf_realloc(b->m.schema, (b->m.nschema + 1) * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		b->m.schema = grown;
		memmove(&grown[lo + 1], &grown[lo], (b->m.nschema - lo) * sizeof(*grown));
		grown[lo] = *f;
		grown[lo].name = pf_strdup(f->name);
		b->m.nschema++;
		if (!grown[lo].name) {
			memmove(&grown[lo], &grown[lo + 1], (b->m.nschema - lo - 1) * sizeof(*grown));
			b->m.nschema--;
			return -ENOMEM;
		}
	}
	return 0;
}

/* The encoding of b into b->blob. */
static int encode(pf_manifest_builder *b, pf_error *err)
{
	const pf_manifest *m = &b->m;
	Podfeed__Manifest pb = PODFEED__MANIFEST__INIT;
	Podfeed__FeatureSchema **fsp = NULL;
	size_t n = m->nshards, nf = m->nframes, raw_len;
	uint8_t *raw = NULL;
	int64_t blob_len;
	int ret = -ENOMEM;

	pb.version = PF_MANIFEST_VERSION;
	pb.n_path = pb.n_size = pb.n_mtime_ns = pb.n_format = pb.n_records = n;
	pb.n_frames = pb.n_alignment = pb.n_max_record = n;
	pb.n_frame_offset = pb.n_frame_compressed_size = pb.n_frame_uncompressed_size = nf;
	pb.n_frame_records = pb.n_frame_crc32c = nf;
	pb.path = pf_calloc(n + 1, sizeof(*pb.path));
	pb.size = pf_calloc(n + 1, sizeof(*pb.size));
	pb.mtime_ns = pf_calloc(n + 1, sizeof(*pb.mtime_ns));
	pb.format = pf_calloc(n + 1, sizeof(*pb.format));
	pb.records = pf_calloc(n + 1, sizeof(*pb.records));
	pb.frames = pf_calloc(n + 1, sizeof(*pb.frames));
	pb.alignment = pf_calloc(n + 1, sizeof(*pb.alignment));
	pb.max_record = pf_calloc(n + 1, sizeof(*pb.max_record));
	pb.frame_offset = pf_calloc(nf + 1, sizeof(*pb.frame_offset));
	pb.frame_compressed_size = pf_calloc(nf + 1, sizeof(*pb.frame_compressed_size));
	pb.frame_uncompressed_size = pf_calloc(nf + 1, sizeof(*pb.frame_uncompressed_size));
	pb.frame_records = pf_calloc(nf + 1, sizeof(*pb.frame_records));
	pb.frame_crc32c = pf_calloc(nf + 1, sizeof(*pb.frame_crc32c));
	if (!pb.path || !pb.size || !pb.mtime_ns || !pb.format || !pb.records || !pb.frames ||
	    !pb.alignment || !pb.max_record || !pb.frame_offset || !pb.frame_compressed_size ||
	    !pb.frame_uncompressed_size || !pb.frame_records || !pb.frame_crc32c ||
	    pf_schema_to_pb(m->schema, m->nschema, &fsp) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const pf_manifest_shard *s = &m->shards[i];

		pb.path[i] = (char *)s->path;
		pb.size[i] = s->size;
		pb.mtime_ns[i] = s->mtime_ns;
		pb.format[i] = s->format;
		pb.records[i] = s->records;
		pb.frames[i] = s->nframes;
		pb.alignment[i] = s->alignment;
		pb.max_record[i] = s->max_record;
	}
	for (size_t i = 0; i < nf; i++) {
		const pf_frame_info *fi = &m->frames[i];

		pb.frame_offset[i] = fi->offset;
		pb.frame_compressed_size[i] = fi->compressed_size;
		pb.frame_uncompressed_size[i] = fi->uncompressed_size;
		pb.frame_records[i] = fi->records;
		pb.frame_crc32c[i] = fi->crc32c;
	}
	if (b->ntails && b->ntails != n) {
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "%zu of the manifest's %zu shards have a tail check: all or "
				   "none must", b->ntails, n);
		goto out;
	}
	if (b->ntails) {
		pb.n_tail_len = pb.n_tail_crc32c = n;
		pb.tail_len = m->tail_len;
		pb.tail_crc32c = m->tail_crc;
	}
	pb.n_schema = m->nschema;
	pb.schema = fsp;
	pb.schema_records = m->schema_records;
	raw_len = podfeed__manifest__get_packed_size(&pb);
	if (raw_len > PF_MANIFEST_MAX_RAW) {
		ret = pf_error_set(err, -EFBIG, PF_OFFSET_NONE, 0,
				   "a manifest of %zu shards is %zu bytes, above the limit of %llu",
				   n, raw_len, PF_MANIFEST_MAX_RAW);
		goto out;
	}
	raw = pf_malloc(raw_len);
	if (!raw)
		goto out;
	podfeed__manifest__pack(&pb, raw);
	blob_len = pf_envelope_compress(&manifest_envelope, raw, raw_len, MANIFEST_LEVEL,
					&b->blob, err);
	ret = blob_len < 0 ? (int)blob_len : 0;
	if (ret == 0)
		b->blob_len = (size_t)blob_len;
out:
	if (ret == -ENOMEM && err && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "no memory to encode a manifest of %zu "
			     "shards", n);
	pf_free(raw);
	pf_free(fsp);
	pf_free(pb.path);
	pf_free(pb.size);
	pf_free(pb.mtime_ns);
	pf_free(pb.format);
	pf_free(pb.records);
	pf_free(pb.frames);
	pf_free(pb.alignment);
	pf_free(pb.max_record);
	pf_free(pb.frame_offset);
	pf_free(pb.frame_compressed_size);
	pf_free(pb.frame_uncompressed_size);
	pf_free(pb.frame_records);
	pf_free(pb.frame_crc32c);
	return ret;
}

int64_t pf_manifest_builder_encode(pf_manifest_builder *b, void *dst, size_t cap, pf_error *err)
{
	if (!b->blob) {
		int ret = encode(b, err);

		if (ret < 0)
			return ret;
	}
	if (b->blob_len <= cap)
		memcpy(dst, b->blob, b->blob_len);
	return (int64_t)b->blob_len;
}
