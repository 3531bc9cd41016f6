/* SPDX-License-Identifier: Apache-2.0 */
/* Opening a dataset of stream files without a manifest: counted on
 * threads by a host alone, split among the hosts of a pod that gives the
 * loader its all-gather (hosts as threads here, and as MPI ranks under
 * mpirun), with the same batches either way; a host that fails or sees
 * another dataset fails every host, by name, instead of hanging them. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#include "podfeed.h"
#include "pod_util.h"
#include "testutil.h"

#define HOSTS 4u
#define FILES 8u
#define PER_FILE 300u
#define PCB 8u

/* A zstd stream of TFRecords (no index), as the zstd CLI makes them. */
static uint64_t write_zstd_stream(const char *path, uint64_t first, uint64_t count,
				  uint64_t *plain)
{
	size_t cap = count * 300, len = 0, zcap;
	uint8_t *buf = malloc(cap), rec[256], *z;
	size_t zlen;

	cr_assert_not_null(buf);
	for (uint64_t i = 0; i < count; i++) {
		int64_t n = tu_id_example(first + i, rec, sizeof(rec));

		len += pf_tfr_encode(buf + len, cap - len, rec, (size_t)n);
	}
	zcap = ZSTD_compressBound(len);
	z = malloc(zcap);
	cr_assert_not_null(z);
	zlen = ZSTD_compress(z, zcap, buf, len, 3);
	cr_assert(!ZSTD_isError(zlen));
	tu_write_file(path, z, zlen);
	*plain += len;
	free(buf);
	free(z);
	return zlen;
}

/* FILES zstd stream files of PER_FILE records, ids from 0. */
static const char *stream_dataset(uint64_t *bytes, uint64_t *plain)
{
	const char *dir = tu_tmpdir();
	char p[512];

	*bytes = *plain = 0;
	for (unsigned i = 0; i < FILES; i++) {
		snprintf(p, sizeof(p), "%s/part-%u.tfrecord.zst", dir, i);
		*bytes += write_zstd_stream(p, (uint64_t)i * PER_FILE, PER_FILE, plain);
	}
	return dir;
}

/* ------------------------------------------------------------------ */
/* A pod of threads: an all-gather over a mutex                         */

typedef struct host_run {
	tu_pod_member member;
	uint32_t host, hosts;
	const char *path;
	const char *features;
	pf_corrupt_policy on_corrupt;
	bool collective;
	/* out */
	int ret;
	pf_error err;
	pf_loader_metrics m;
	int64_t *ids;
	size_t nids;
} host_run;

/* One epoch as host hr->host: every id handed out, in order. */
static void *host_main(void *arg)
{
	host_run *hr = arg;
	const char *paths[1] = { hr->path };
	pf_loader_config cfg = { .paths = paths, .npaths = 1,
				 .features = hr->features ? hr->features : "id:int64[1]",
				 .per_core_batch = PCB, .host_index = hr->host,
				 .num_hosts = hr->hosts, .threads = 3, .io_depth = 8,
				 .memory_budget = 32u << 20, .on_corrupt = hr->on_corrupt,
				 .shuffle = true, .shuffle_window = 64, .seed = 5 };
	size_t cap = HOSTS * FILES * PER_FILE;
	pf_loader *l;
	pf_batch *b;

	if (hr->collective) {
		cfg.allgather = tu_pod_allgather;
		cfg.allgather_ctx = &hr->member;
	}
	hr->ids = calloc(cap, sizeof(*hr->ids));
	hr->nids = 0;
	hr->ret = pf_loader_create(&l, &cfg, &hr->err);
	if (hr->ret < 0)
		return NULL;
	while ((hr->ret = pf_loader_next(l, &b)) == 1) {
		const int64_t *id = b->core[0].tensors[0].data;

		for (uint32_t r = 0; r < b->per_core_batch && hr->nids < cap; r++)
			hr->ids[hr->nids++] = b->core[0].valid[r] ? id[r] : -1;
		pf_loader_release(l, b);
	}
	if (hr->ret < 0)
		hr->err = *pf_loader_last_error(l);
	pf_loader_get_metrics(l, &hr->m);
	pf_loader_free(l);
	return NULL;
}

/* Every host of a pod at once, each on its own thread. */
static void run_pod(host_run *hr, uint32_t hosts, bool collective)
{
	tu_pod pod;
	pthread_t t[HOSTS];

	tu_pod_init(&pod, hosts);
	for (uint32_t h = 0; h < hosts; h++) {
		hr[h].member = (tu_pod_member){ &pod, h };
		hr[h].host = h;
		hr[h].hosts = hosts;
		hr[h].collective = collective;
		cr_assert_eq(pthread_create(&t[h], NULL, host_main, &hr[h]), 0);
	}
	for (uint32_t h = 0; h < hosts; h++)
		pthread_join(t[h], NULL);
	tu_pod_destroy(&pod);
}

static void free_runs(host_run *hr, uint32_t hosts)
{
	for (uint32_t h = 0; h < hosts; h++)
		free(hr[h].ids);
}

/* No id twice across the hosts; every one of the epoch but the
 * remainder (records / global batch whole steps). */
static void check_partition(host_run *hr, uint32_t hosts, uint64_t records)
{
	uint8_t *seen = calloc(records, 1);
	uint64_t delivered = 0, steps = records / ((uint64_t)PCB * hosts);

	for (uint32_t h = 0; h < hosts; h++) {
		cr_assert_eq(hr[h].nids, steps * PCB, "host %u: %zu ids, %llu steps", h,
			     hr[h].nids, (unsigned long long)steps);
		for (size_t i = 0; i < hr[h].nids; i++) {
			int64_t id = hr[h].ids[i];

			cr_assert(id >= 0 && (uint64_t)id < records, "host %u: id %lld", h,
				  (long long)id);
			cr_assert_eq(seen[id], 0, "id %lld delivered twice", (long long)id);
			seen[id] = 1;
			delivered++;
		}
	}
	cr_assert_eq(delivered, steps * PCB * hosts);
	free(seen);
}

Test(loader_podopen, a_host_alone_counts_every_stream_file_on_threads, .timeout = 120)
{
	uint64_t bytes, plain;
	const char *dir = stream_dataset(&bytes, &plain);
	host_run hr[HOSTS] = { 0 };

	for (uint32_t h = 0; h < HOSTS; h++)
		hr[h].path = dir;
	run_pod(hr, HOSTS, false);
	for (uint32_t h = 0; h < HOSTS; h++) {
		cr_assert_eq(hr[h].ret, 0, "host %u: %s", h, hr[h].err.msg);
		cr_assert_eq(hr[h].m.open_count_files, FILES);
		cr_assert_eq(hr[h].m.open_count_bytes, bytes);
		cr_assert_eq(hr[h].m.open_count_decompressed, plain);
		cr_assert_eq(hr[h].m.open_files, FILES);
		cr_assert_gt(hr[h].m.open_count_ns, 0);
		cr_assert_eq(hr[h].m.open_exchange_ns, 0);
		cr_assert_eq(hr[h].m.open_manifest_ns, 0);
		cr_assert_geq(hr[h].m.create_ns, hr[h].m.open_count_ns + hr[h].m.open_index_ns);
		cr_assert_gt(hr[h].m.first_batch_ns, hr[h].m.create_ns);
		cr_assert_eq(hr[h].m.records_per_epoch, FILES * PER_FILE);
	}
	check_partition(hr, HOSTS, FILES * PER_FILE);
	free_runs(hr, HOSTS);
}

Test(loader_podopen, a_pod_splits_the_counting_and_plans_the_same, .timeout = 120)
{
	uint64_t bytes, plain, count_bytes = 0, decompressed = 0;
	const char *dir = stream_dataset(&bytes, &plain);
	host_run alone[HOSTS] = { 0 }, pod[HOSTS] = { 0 };

	for (uint32_t h = 0; h < HOSTS; h++)
		alone[h].path = pod[h].path = dir;
	run_pod(alone, HOSTS, false);
	run_pod(pod, HOSTS, true);
	for (uint32_t h = 0; h < HOSTS; h++) {
		cr_assert_eq(pod[h].ret, 0, "host %u: %s", h, pod[h].err.msg);
		/* Host h counts the stream files h and h + 4: a quarter. */
		cr_assert_eq(pod[h].m.open_count_files, FILES / HOSTS);
		cr_assert_lt(pod[h].m.open_count_decompressed, plain * 3 / (HOSTS * 2),
			     "host %u decompressed %llu of %llu bytes", h,
			     (unsigned long long)pod[h].m.open_count_decompressed,
			     (unsigned long long)plain);
		count_bytes += pod[h].m.open_count_bytes;
		decompressed += pod[h].m.open_count_decompressed;
		/* The same plan as a host that counted everything: the same
		 * ids in the same order. */
		cr_assert_eq(pod[h].nids, alone[h].nids);
		cr_assert_arr_eq(pod[h].ids, alone[h].ids, pod[h].nids * sizeof(int64_t),
				 "host %u: other batches with the counting split", h);
		cr_assert_eq(pod[h].m.records_per_epoch, FILES * PER_FILE);
	}
	cr_assert_eq(count_bytes, bytes);
	cr_assert_eq(decompressed, plain);
	check_partition(pod, HOSTS, FILES * PER_FILE);
	free_runs(alone, HOSTS);
	free_runs(pod, HOSTS);
}

Test(loader_podopen, a_host_that_fails_is_named_by_every_host, .timeout = 120)
{
	uint64_t bytes, plain;
	const char *dir = stream_dataset(&bytes, &plain);
	host_run hr[HOSTS] = { 0 };

	/* Host 2 fails before it opens anything (its spec is wrong). */
	for (uint32_t h = 0; h < HOSTS; h++)
		hr[h].path = dir;
	hr[2].features = "id:int65[1]";
	run_pod(hr, HOSTS, true);
	cr_assert_eq(hr[2].ret, -EINVAL);
	for (uint32_t h = 0; h < HOSTS; h++) {
		if (h == 2)
			continue;
		cr_assert_lt(hr[h].ret, 0);
		cr_assert(strstr(hr[h].err.msg, "host 2 of 4 could not open the dataset: ") &&
			  strstr(hr[h].err.msg, "int65"), "host %u: %s", h, hr[h].err.msg);
	}
	free_runs(hr, HOSTS);

	/* Host 1's dataset does not exist. */
	memset(hr, 0, sizeof(hr));
	for (uint32_t h = 0; h < HOSTS; h++)
		hr[h].path = h == 1 ? "/nonexistent/podfeed" : dir;
	run_pod(hr, HOSTS, true);
	cr_assert_eq(hr[1].ret, -ENOENT, "%d %s", hr[1].ret, hr[1].err.msg);
	for (uint32_t h = 0; h < HOSTS; h++)
		if (h != 1)
			cr_assert(strstr(hr[h].err.msg, "host 1 of 4 could not open the dataset: ") &&
				  strstr(hr[h].err.msg, "/nonexistent/podfeed"),
				  "host %u: %s", h, hr[h].err.msg);
	free_runs(hr, HOSTS);
}

Test(loader_podopen, hosts_that_see_other_datasets_fail, .timeout = 120)
{
	uint64_t bytes, plain;
	const char *dir = stream_dataset(&bytes, &plain);
	const char *other = tu_tmpdir();
	host_run hr[HOSTS] = { 0 };
	char p[512];

	/* Host 3 sees one file more. */
	tu_system("cp %s/* %s/", dir, other);
	snprintf(p, sizeof(p), "%s/part-9.tfrecord.zst", other);
	write_zstd_stream(p, 9000, 10, &plain);
	for (uint32_t h = 0; h < HOSTS; h++)
		hr[h].path = h == 3 ? other : dir;
	run_pod(hr, HOSTS, true);
	for (uint32_t h = 0; h < HOSTS; h++) {
		cr_assert_eq(hr[h].ret, -EINVAL, "host %u: %d %s", h, hr[h].ret, hr[h].err.msg);
		cr_assert(strstr(hr[h].err.msg, "every host must see the same dataset"),
			  "host %u: %s", h, hr[h].err.msg);
	}
	cr_assert(strstr(hr[0].err.msg, "host 0 of 4 sees 8 files, host 3 9"), "%s",
		  hr[0].err.msg);
	free_runs(hr, HOSTS);
}

Test(loader_podopen, drops_found_counting_are_counted_on_every_host, .timeout = 120)
{
	uint64_t bytes, plain;
	const char *dir = stream_dataset(&bytes, &plain);
	host_run alone[HOSTS] = { 0 }, pod[HOSTS] = { 0 };
	char p[512];
	uint8_t *z;
	size_t len;

	/* Damage the middle of file 5 (host 1 counts it). */
	snprintf(p, sizeof(p), "%s/part-5.tfrecord.zst", dir);
	z = tu_read_file(p, &len);
	for (size_t i = len / 2; i < len / 2 + 16; i++)
		z[i] ^= 0x5a;
	tu_write_file(p, z, len);
	free(z);
	for (uint32_t h = 0; h < HOSTS; h++) {
		alone[h].path = pod[h].path = dir;
		alone[h].on_corrupt = pod[h].on_corrupt = PF_CORRUPT_SKIP;
	}
	run_pod(alone, HOSTS, false);
	run_pod(pod, HOSTS, true);
	for (uint32_t h = 0; h < HOSTS; h++) {
		cr_assert_eq(pod[h].ret, 0, "host %u: %s", h, pod[h].err.msg);
		cr_assert_gt(pod[h].m.corrupt_drops, 0);
		/* Drops found opening are counted by every host, as alone. */
		cr_assert_eq(pod[h].m.records_per_epoch, alone[h].m.records_per_epoch);
		cr_assert_lt(pod[h].m.records_per_epoch, FILES * PER_FILE);
		cr_assert_arr_eq(pod[h].ids, alone[h].ids, pod[h].nids * sizeof(int64_t));
	}
	free_runs(alone, HOSTS);
	free_runs(pod, HOSTS);
}

/* ------------------------------------------------------------------ */
/* Under mpirun                                                         */

/* The child's JSON lines, one per rank, by host. */
static void run_ranks(const char *args, json_t *by_host[HOSTS])
{
	static char out[1 << 20];
	char cmd[4096], lines[1 << 16] = "";
	char *line, *save = NULL;
	const char *dir = tu_tmpdir();
	struct dirent *e;
	DIR *dh;

	/* Each rank writes its line to a file of its own: through mpirun's
	 * stdout, long lines of several ranks can interleave. */
	snprintf(cmd, sizeof(cmd),
		 TU_MPI_ENV "POD_OPEN_CHILD_OUT=%s mpirun --oversubscribe -np %u %s %s 2>&1", dir,
		 HOSTS, tu_env_tool("POD_OPEN_CHILD"), args);
	tu_capture(cmd, out, sizeof(out), NULL);
	memset(by_host, 0, HOSTS * sizeof(*by_host));
	dh = opendir(dir);
	cr_assert_not_null(dh, "%s", dir);
	while ((e = readdir(dh))) {
		char path[4096];

		if (!strstr(e->d_name, ".json"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		strncat(lines, path, sizeof(lines) - strlen(lines) - 2);
		strcat(lines, "\n");
	}
	closedir(dh);
	for (line = strtok_r(lines, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_error_t je;
		json_t *o = json_load_file(line, 0, &je);
		json_t *h = o ? json_object_get(o, "host") : NULL;

		cr_assert_not_null(o, "%s: %s (line %d)", line, je.text, je.line);
		if (json_object_get(o, "error")) {
			/* A failed rank names no host: kept in order. */
			for (uint32_t k = 0; k < HOSTS; k++)
				if (!by_host[k]) {
					by_host[k] = o;
					break;
				}
			continue;
		}
		cr_assert(json_is_integer(h), "%s", line);
		by_host[json_integer_value(h)] = o;
	}
	for (uint32_t k = 0; k < HOSTS; k++)
		cr_assert_not_null(by_host[k], "rank %u printed nothing: %s", k, out);
}

Test(loader_podopen, four_mpi_ranks_each_decompress_a_quarter, .timeout = 240)
{
	uint64_t bytes, plain, decompressed = 0;
	const char *dir;
	host_run alone[HOSTS] = { 0 }, ranks[HOSTS] = { 0 };
	json_t *rank[HOSTS];
	char args[1024];

	tu_need_mpirun();
	dir = stream_dataset(&bytes, &plain);
	for (uint32_t h = 0; h < HOSTS; h++)
		alone[h].path = dir;
	/* Hosts that count everything themselves, for the plan. */
	run_pod(alone, HOSTS, false);
	snprintf(args, sizeof(args), "%s %u 0 %u", dir, HOSTS, PCB);
	run_ranks(args, rank);
	for (uint32_t h = 0; h < HOSTS; h++) {
		json_t *o = rank[h], *ids = json_object_get(o, "ids");
		uint64_t d = (uint64_t)json_integer_value(json_object_get(o, "count_decompressed"));
		size_t i;
		json_t *v;

		cr_assert_null(json_object_get(o, "error"), "rank %u: %s", h,
			       json_string_value(json_object_get(o, "error")));
		cr_assert_eq(json_integer_value(json_object_get(o, "count_files")), FILES / HOSTS);
		/* About a quarter of the data each (equal files: exactly). */
		cr_assert(d > plain / HOSTS * 3 / 4 && d < plain / HOSTS * 5 / 4,
			  "rank %u decompressed %llu of %llu bytes counting", h,
			  (unsigned long long)d, (unsigned long long)plain);
		decompressed += d;
		cr_assert_eq(json_integer_value(json_object_get(o, "records_per_epoch")),
			     FILES * PER_FILE);
		ranks[h].nids = json_array_size(ids);
		ranks[h].ids = calloc(ranks[h].nids + 1, sizeof(int64_t));
		json_array_foreach(ids, i, v)
			ranks[h].ids[i] = json_integer_value(v);
		/* The plan of a host that counted everything. */
		cr_assert_eq(ranks[h].nids, alone[h].nids);
		cr_assert_arr_eq(ranks[h].ids, alone[h].ids, ranks[h].nids * sizeof(int64_t),
				 "rank %u: other batches than host %u of %u counting alone", h,
				 h, HOSTS);
	}
	cr_assert_eq(decompressed, plain);
	/* The ranks' plans are one plan: their records partition the epoch. */
	check_partition(ranks, HOSTS, FILES * PER_FILE);
	for (uint32_t h = 0; h < HOSTS; h++)
		json_decref(rank[h]);
	free_runs(alone, HOSTS);
	free_runs(ranks, HOSTS);

	/* Rank 2 names a dataset that is not there: every rank fails, the
	 * others naming it, and none waits forever. */
	snprintf(args, sizeof(args), "%s %u 0 %u 2=/nonexistent/podfeed", dir, HOSTS, PCB);
	run_ranks(args, rank);
	for (uint32_t k = 0; k < HOSTS; k++) {
		const char *e = json_string_value(json_object_get(rank[k], "error"));

		cr_assert_not_null(e, "a rank read a dataset host 2 could not open");
		cr_assert(strstr(e, "/nonexistent/podfeed"), "%s", e);
		json_decref(rank[k]);
	}
}
