/* SPDX-License-Identifier: Apache-2.0 */
/* Stream files counted when a dataset is opened without a manifest: on
 * threads, and split among the hosts of a pod that gave a collective,
 * which also agree here that they plan the same dataset.  Reading index
 * tails and the rest of the open are dataset.c's.
 *
 * A stream file (plain, GZIP, ZLIB or zstd TFRecord without an index)
 * holds no count: it must be decompressed to the end to plan it.  One
 * host counting them all pays the whole dataset before its first batch
 * (59 MB of zstd streams: 432 ms); a pod splits them (host h counts the
 * stream files of ordinal j % H == h) and exchanges the counts, so each
 * pays about 1/H.  The exchange is an all-gather of fixed-size pieces:
 * every host must reach it, so a host that failed earlier still takes
 * part with its error, and every host then fails naming it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dataset_internal.h"

/* Room for a failed host's error line in the vote and the counts
 * (PF_POD_ERROR_LINE): the host that failed returns its whole error; the
 * others that much of it. */

/* ------------------------------------------------------------------ */
/* Counting on threads                                                  */

typedef struct count_job {
	const pf_dataset *ds;
	const pf_source_config *scfg;
	pf_drop_fn drop;
	void *drop_ctx;
	const uint32_t *files;	/* the files this host counts, in file order */
	size_t n;
	size_t next;		/* the next entry of files to take */
	/* per entry: records, the largest, drops, the records they held
	 * where known, drops of records not known, the bytes they skipped */
	uint64_t *records, *largest, *drops, *dropped, *unknown, *skipped;
	uint64_t decompressed;
	/* Packing: each record's lengths measured with lspec into lens[k] */
	const pf_spec *lspec;
	pf_lenbuf *lens;
	pthread_mutex_t mu;
	bool stop;
	size_t failed;		/* the lowest entry that failed, n when none */
	int ret;
	pf_error err;
} count_job;

/* One file's count: its drops counted on the way to the caller's hook. */
typedef struct count_file {
	count_job *job;
	size_t k;
} count_file;

static int count_drop(void *ctx, const pf_drop *d)
{
	count_file *cf = ctx;
	count_job *job = cf->job;

	job->drops[cf->k]++;
	job->dropped[cf->k] += d->records > 0 ? (uint64_t)d->records : 0;
	job->unknown[cf->k] += d->records < 0;
	job->skipped[cf->k] += pf_drop_bytes(d);
	return job->drop ? job->drop(job->drop_ctx, d) : 0;
}

/* The records of entry k's file: in skip mode its intact ones; and with
 * job->lspec their lengths (sc: the thread's scratch). */
static int count_one(count_job *job, size_t k, pf_len_scratch *sc, uint64_t *decompressed,
		     pf_error *err)
{
	const char *path = job->ds->paths[job->files[k]];
	count_file cf = { job, k };
	pf_source_config cfg = *job->scfg;
	pf_source *src;
	pf_record rec;
	int ret;

	cfg.ignore_index = true;
	cfg.on_drop = count_drop;
	cfg.on_drop_ctx = &cf;
	ret = pf_source_open(&src, path, &cfg, err);
	if (ret < 0)
		return ret;
	while ((ret = pf_source_next(src, &rec, err)) == 1) {
		job->records[k]++;
		if (rec.len > job->largest[k])
			job->largest[k] = rec.len;
		if (job->lspec) {
			ret = pf_lengths_measure(job->lspec, &rec, sc, &job->lens[k], err);
			if (ret < 0)
				break;
		}
	}
	*decompressed += pf_source_bytes_out(src);
	pf_source_close(src);
	return ret;
}

/* Take files in order until none is left or one has failed.  Files are
 * taken in order and a file begun is finished, so the lowest entry that
 * fails is the same whatever the threads' timing: every entry below it
 * was begun, and finished. */
static void *count_main(void *arg)
{
	count_job *job = arg;
	uint64_t decompressed = 0;
	pf_len_scratch sc = { 0 };
	pf_error err;

	for (;;) {
		size_t k;
		int ret;

		pthread_mutex_lock(&job->mu);
		k = job->next;
		if (job->stop || k >= job->n) {
			pthread_mutex_unlock(&job->mu);
			break;
		}
		job->next++;
		pthread_mutex_unlock(&job->mu);
		ret = count_one(job, k, &sc, &decompressed, &err);
		if (ret < 0) {
			pthread_mutex_lock(&job->mu);
			job->stop = true;
			if (k < job->failed) {
				job->failed = k;
				job->ret = ret;
				job->err = err;
				pf_error_set_file(&job->err, job->ds->paths[job->files[k]]);
			}
			pthread_mutex_unlock(&job->mu);
		}
	}
	pf_len_scratch_free(&sc);
	pthread_mutex_lock(&job->mu);
	job->decompressed += decompressed;
	pthread_mutex_unlock(&job->mu);
	return NULL;
}

/* Count job->files on up to `threads` threads (this one among them).
 * @return 0, or the lowest failed file's error. */
static int count_files(count_job *job, unsigned threads, pf_error *err)
{
	pthread_t *tid = NULL;
	size_t started = 0, want = threads > 1 ? threads - 1 : 0;

	if (want > job->n)
		want = job->n ? job->n - 1 : 0;
	if (want && !(tid = pf_calloc(want, sizeof(*tid))))
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory counting stream files");
	/* Threads that cannot start leave their files to the others. */
	for (; tid && started < want; started++)
		if (pthread_create(&tid[started], NULL, count_main, job))
			break;
	count_main(job);
	for (size_t i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	pf_free(tid);
	if (job->failed < job->n) {
		*err = job->err;
		return job->ret;
	}
	return 0;
}

int pf_count_measure(const pf_dataset *ds, const uint32_t *files, size_t n, const pf_spec *lspec,
		     unsigned threads, uint64_t max_record_size, uint64_t *records, pf_lenbuf *lens,
		     uint64_t *decompressed, pf_error *err)
{
	pf_source_config scfg = { .max_record_size = max_record_size,
				  .on_corrupt = PF_CORRUPT_FAIL };
	uint64_t *counts = pf_calloc(5 * (n ? n : 1), sizeof(*counts));
	count_job job = { .ds = ds, .scfg = &scfg, .files = files, .n = n, .failed = n,
			  .records = records, .largest = counts, .drops = counts + n,
			  .dropped = counts + 2 * n, .unknown = counts + 3 * n,
			  .skipped = counts + 4 * n, .lspec = lspec, .lens = lens };
	int ret;

	if (!counts)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory reading the records' packed lengths");
	pthread_mutex_init(&job.mu, NULL);
	ret = count_files(&job, threads ? threads : 1, err);
	pthread_mutex_destroy(&job.mu);
	*decompressed = job.decompressed;
	pf_free(counts);
	return ret;
}

/* ------------------------------------------------------------------ */
/* The pod                                                              */

/* What each host says after opening: the same on every host, or the
 * first that failed names itself. */
typedef struct open_vote {
	int32_t status;		/* 0, or the -errno its open failed with */
	uint32_t manifest;	/* planned from a manifest */
	uint64_t files, streams;
	uint64_t digest;
	char error[PF_POD_ERROR_LINE];
} open_vote;

/* What each host counted: the head, then one entry per file of its share. */
typedef struct count_head {
	int32_t status;
	uint32_t pad;
	char error[PF_POD_ERROR_LINE];
} count_head;

typedef struct count_entry {
	uint64_t records, largest, drops, dropped, unknown, skipped;
} count_entry;

void pf_pod_error_line(const pf_error *e, char *dst)
{
	if (e && e->code)
		pf_error_format(e, dst, PF_POD_ERROR_LINE);
	else
		snprintf(dst, PF_POD_ERROR_LINE, "failed");
}

int pf_pod_exchange(pf_dataset *ds, const pf_open_config *ocfg, const void *mine, size_t len,
		    void *all, const char *what, pf_error *err)
{
	uint64_t t0 = pf_now_ns();
	int ret = ocfg->allgather(ocfg->allgather_ctx, mine, len, all, err);

	if (ds)
		ds->open.exchange.ns += pf_now_ns() - t0;
	if (ret < 0 && err && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "the pod's all-gather of %s failed",
			     what);
	return ret < 0 ? ret : 0;
}

int pf_dataset_vote(const pf_dataset *ds, int status, const pf_error *why,
		    const pf_open_config *ocfg, pf_error *err)
{
	uint32_t hosts = ocfg->num_hosts, me = ocfg->host_index;
	open_vote *v = pf_calloc((size_t)hosts + 1, sizeof(*v)), *all = v + 1;
	int ret;

	if (!v)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory for the pod's vote on the dataset");
	v->status = status;
	if (status < 0) {
		pf_pod_error_line(why, v->error);
	} else {
		v->manifest = ds->manifest != NULL;
		v->files = ds->nfiles;
		v->streams = ds->open.streams;
		v->digest = ds->digest;
	}
	/* why may be err: the all-gather's error goes elsewhere. */
	{
		pf_error xerr;

		pf_error_clear(&xerr);
		ret = pf_pod_exchange((pf_dataset *)ds, ocfg, v, sizeof(*v), all, "the dataset vote",
			       &xerr);
		if (ret < 0 && status < 0)
			ret = status;
		else if (ret < 0)
			*err = xerr;
	}
	/* A host that failed says its own error whole. */
	if (status < 0) {
		ret = status;
		if (err != why)
			*err = *why;
	}
	for (uint32_t h = 0; ret == 0 && h < hosts; h++) {
		const open_vote *o = &all[h];

		if (o->status < 0) {
			ret = pf_error_set(err, o->status, PF_OFFSET_NONE, 0,
					   "host %u of %u could not open the dataset: %.*s", h,
					   hosts, (int)PF_POD_ERROR_LINE, o->error);
		}
	}
	for (uint32_t h = 0; ret == 0 && status >= 0 && h < hosts; h++) {
		const open_vote *o = &all[h];

		if (o->manifest != v->manifest)
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "host %u of %u plans %s a manifest, host %u %s: every "
					   "host must see the same dataset", me, hosts,
					   v->manifest ? "from" : "without", h,
					   o->manifest ? "from one" : "without one");
		else if (o->files != v->files || o->digest != v->digest)
			ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					   "host %u of %u sees %llu files, host %u %llu%s: every "
					   "host must see the same dataset", me, hosts,
					   (unsigned long long)v->files, h,
					   (unsigned long long)o->files,
					   o->files == v->files ? ", of other sizes or record "
					   "counts" : "");
	}
	pf_free(v);
	return ret;
}

void pf_dataset_open_abandon(const pf_open_config *ocfg, const pf_error *why)
{
	pf_error err;

	if (pf_open_collective(ocfg))
		pf_dataset_vote(NULL, why->code < 0 ? why->code : -ECANCELED, why, ocfg, &err);
}

/* Fill the counts of the files other hosts counted from what they sent;
 * a host that failed fails this one, naming it. */
static int merge(pf_dataset *ds, const uint32_t *streams, uint64_t *records,
		 const uint8_t *all, size_t piece, const pf_open_config *ocfg, pf_error *err)
{
	uint32_t hosts = ocfg->num_hosts;

	for (uint32_t h = 0; h < hosts; h++) {
		const count_head *head = (const count_head *)(all + h * piece);

		if (head->status < 0 && h != ocfg->host_index)
			return pf_error_set(err, head->status, PF_OFFSET_NONE, 0,
					    "host %u of %u, counting its share of the stream "
					    "files: %.*s", h, hosts, (int)PF_POD_ERROR_LINE,
					    head->error);
	}
	for (uint64_t j = 0; j < ds->open.streams; j++) {
		uint32_t h = pf_count_owner(j, hosts);
		const count_entry *e = (const count_entry *)(all + h * piece + sizeof(count_head)) +
				       j / hosts;

		records[streams[j]] = e->records;
		if (e->largest > ds->max_stream_record)
			ds->max_stream_record = e->largest;
		if (h != ocfg->host_index) {
			ds->open.remote_drops += e->drops;
			ds->open.remote_dropped += e->dropped;
			ds->open.remote_unknown += e->unknown;
			ds->open.remote_skipped += e->skipped;
		}
	}
	return 0;
}

int pf_dataset_count_streams(pf_dataset *ds, uint64_t *records, const pf_source_config *scfg,
			     const pf_open_config *ocfg, pf_error *err)
{
	bool pod = pf_open_collective(ocfg);
	uint32_t hosts = pod ? ocfg->num_hosts : 1, me = pod ? ocfg->host_index : 0;
	uint64_t nstreams = ds->open.streams, t0;
	size_t mine = 0, per_host = (size_t)((nstreams + hosts - 1) / hosts);
	size_t piece = sizeof(count_head) + per_host * sizeof(count_entry);
	uint32_t *streams = pf_malloc((nstreams ? nstreams : 1) * sizeof(*streams));
	uint64_t *counts = pf_calloc(6 * (per_host ? per_host : 1), sizeof(*counts));
	uint8_t *buf = pod ? pf_calloc((size_t)hosts + 1, piece) : NULL;
	pf_error *local = pf_malloc(sizeof(*local));
	count_job job = { .ds = ds, .scfg = scfg };
	int ret = 0;

	/* Everything is allocated before the vote: after it, every host
	 * reaches the exchange of counts. */
	if (!records || !streams || !counts || (pod && !buf) || !local)
		ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				   "out of memory counting stream files");
	if (pod)
		ret = pf_dataset_vote(ds, ret, err, ocfg, err);
	if (ret < 0 || nstreams == 0)
		goto out;

	t0 = pf_now_ns();
	pf_error_clear(local);
	for (size_t i = 0, j = 0; i < ds->nfiles; i++) {
		if (ds->index[i])
			continue;
		if (pf_count_owner(j++, hosts) == me)
			streams[mine++] = (uint32_t)i;
	}
	job.files = streams;
	job.n = mine;
	job.failed = mine;
	job.records = counts;
	job.largest = counts + per_host;
	job.drops = counts + 2 * per_host;
	job.dropped = counts + 3 * per_host;
	job.unknown = counts + 4 * per_host;
	job.skipped = counts + 5 * per_host;
	job.drop = ocfg && ocfg->count_drop ? ocfg->count_drop : scfg->on_drop;
	job.drop_ctx = ocfg && ocfg->count_drop ? ocfg->count_drop_ctx : scfg->on_drop_ctx;
	if (ocfg && ocfg->lengths && ret == 0) {
		/* Packing: the lengths measured on the way, the file read once. */
		ds->lengths = pf_calloc(ds->nfiles, sizeof(*ds->lengths));
		job.lens = pf_calloc(mine ? mine : 1, sizeof(*job.lens));
		job.lspec = ocfg->lengths;
		if (!ds->lengths || !job.lens)
			ret = pf_error_set(local, -ENOMEM, PF_OFFSET_NONE, 0,
					   "out of memory for the records' packed lengths");
	}
	pthread_mutex_init(&job.mu, NULL);
	if (ret == 0)
		ret = count_files(&job, ocfg && ocfg->threads ? ocfg->threads : 1, local);
	pthread_mutex_destroy(&job.mu);
	for (size_t k = 0; job.lens && k < mine; k++) {
		if (ret == 0)
			ds->lengths[streams[k]] = job.lens[k];
		else
			pf_free(job.lens[k].p);
	}
	pf_free(job.lens);
	ds->open.count.ns = pf_now_ns() - t0;
	ds->open.count.files = mine;
	for (size_t k = 0; k < mine; k++)
		ds->open.count.bytes += ds->file_size[streams[k]];
	ds->open.count_decompressed = job.decompressed;
	ds->open.count_split = pod;
	if (ret < 0)
		*err = *local;
	if (!pod) {
		for (size_t k = 0; ret == 0 && k < mine; k++) {
			records[streams[k]] = job.records[k];
			if (job.largest[k] > ds->max_stream_record)
				ds->max_stream_record = job.largest[k];
		}
		goto out;
	}

	/* This host's piece: its status, then its files' counts. */
	{
		count_head *head = (count_head *)buf;
		count_entry *e = (count_entry *)(buf + sizeof(count_head));

		head->status = ret;
		if (ret < 0)
			pf_pod_error_line(err, head->error);
		for (size_t k = 0; ret == 0 && k < mine; k++)
			e[k] = (count_entry){ job.records[k], job.largest[k], job.drops[k],
					      job.dropped[k], job.unknown[k], job.skipped[k] };
	}
	if (ret < 0) {
		pf_error scratch;

		pf_pod_exchange(ds, ocfg, buf, piece, buf + piece, "stream counts", &scratch);
		goto out;
	}
	ret = pf_pod_exchange(ds, ocfg, buf, piece, buf + piece, "stream counts", err);
	if (ret == 0) {
		/* The ordinals of every stream file, for the merge. */
		for (size_t i = 0, j = 0; i < ds->nfiles; i++)
			if (!ds->index[i])
				streams[j++] = (uint32_t)i;
		ret = merge(ds, streams, records, buf + piece, piece, ocfg, err);
	}
out:
	pf_free(local);
	pf_free(buf);
	pf_free(counts);
	pf_free(streams);
	return ret;
}
