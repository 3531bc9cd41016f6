/* SPDX-License-Identifier: Apache-2.0 */
/* Packing's plan on a pod (issue 26, "Equal steps on every host"): with
 * the pod's all-gather each file's packed lengths are read by one host
 * (index tails of a manifest's shards, stream files' records) and
 * exchanged, so every host plans the same steps from 1/H of the reads;
 * the batches are those each host plans alone.  Hosts are threads here
 * (pod_util.c), 1, 4 and 7 of them.  A host that fails reading its share
 * fails every host, naming it; damaged exchanged lengths are refused. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "pack_util.h"
#include "pack_internal.h"
#include "pod_util.h"
#include "podfeed.h"
#include "testutil.h"

#define SHARDS 14u
#define STREAMS 6u
#define MAX_HOSTS 7u

/* 3,000 text records: d/plain (6 stream files), d/pm (the same with a
 * manifest), d/z (14 shards with their lengths, and the manifest). */
static const char *text_dataset(void)
{
	const char *d = pu_text_dataset(3000, STREAMS, 40, 300, 4, SHARDS, "16K");

	cr_assert_eq(tu_system("cp -r %s/plain %s/pm && %s manifest %s/pm >/dev/null", d, d,
			       tu_env_tool("SHARDTOOL"), d), 0);
	return d;
}

typedef struct run {
	/* in */
	const char *path;
	const char *features;	/* NULL: the text records' */
	uint32_t hosts, host, pack;	/* pack 0: 128 */
	bool ignore_manifest, shuffle;
	tu_pod_member member;	/* .pod NULL: alone */
	/* out */
	int ret;
	pf_error err;
	uint64_t steps, digest, rchar;
	pf_loader_metrics m;
} run;

/* This process's bytes read through read calls (/proc/self/io rchar). */
static uint64_t rchar(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	unsigned long long v = 0;
	char line[128];

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "rchar: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* The corrupt-data policy of every host (a test of skip mode sets it). */
static pf_corrupt_policy corrupt_policy = PF_CORRUPT_FAIL;

/* One epoch of host r->host: every batch's bytes digested. */
static void *host_main(void *arg)
{
	run *r = arg;
	const char *paths[] = { r->path };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 2,
				 .cores_per_host = 2,
				 .features = r->features ? r->features
							 : "tokens:int32[*],targets:int32[*]",
				 .pack_length = r->pack ? r->pack : 128, .shuffle = r->shuffle,
				 .seed = 11,
				 .num_hosts = r->hosts, .host_index = r->host, .threads = 2,
				 .ignore_manifest = r->ignore_manifest,
				 .on_corrupt = corrupt_policy };
	uint64_t before = rchar();
	pf_loader *l;
	pf_batch *b;

	if (r->member.pod) {
		cfg.allgather = tu_pod_allgather;
		cfg.allgather_ctx = &r->member;
	}
	r->digest = TU_DIGEST_START;
	pf_error_clear(&r->err);
	r->ret = pf_loader_create(&l, &cfg, &r->err);
	r->rchar = rchar() - before;
	if (r->ret < 0)
		return NULL;
	while ((r->ret = pf_loader_next(l, &b)) == 1) {
		r->digest = tu_batch_digest(r->digest, b);
		r->steps++;
		pf_loader_release(l, b);
	}
	if (r->ret < 0)
		r->err = *pf_loader_last_error(l);
	pf_loader_get_metrics(l, &r->m);
	pf_loader_free(l);
	return NULL;
}

/* Every host of a pod at once, each on its own thread (pod: the
 * all-gather; NULL: each alone). */
static void run_hosts_as(run *r, uint32_t hosts, tu_pod *pod, const char *path,
			 bool ignore_manifest, const char *features, uint32_t pack)
{
	pthread_t t[MAX_HOSTS];

	for (uint32_t h = 0; h < hosts; h++) {
		r[h] = (run){ .path = path, .hosts = hosts, .host = h, .shuffle = true,
			      .ignore_manifest = ignore_manifest, .member = { pod, h },
			      .features = features, .pack = pack };
		cr_assert_eq(pthread_create(&t[h], NULL, host_main, &r[h]), 0);
		/* Alone, one after another (no host waits for another). */
		if (!pod)
			pthread_join(t[h], NULL);
	}
	for (uint32_t h = 0; pod && h < hosts; h++)
		pthread_join(t[h], NULL);
}

static void run_hosts(run *r, uint32_t hosts, tu_pod *pod, const char *path, bool ignore_manifest)
{
	run_hosts_as(r, hosts, pod, path, ignore_manifest, NULL, 0);
}

/* Files of n with ordinal j % hosts == h. */
static uint64_t share(uint32_t n, uint32_t hosts, uint32_t h)
{
	uint64_t k = 0;

	for (uint32_t j = 0; j < n; j++)
		k += j % hosts == h;
	return k;
}

typedef struct kind {
	const char *dir;
	bool ignore_manifest;
	uint32_t tails, files;	/* what the pod reads for the lengths, in all */
	uint64_t from_index;
} kind;

/* Every kind of dataset on 1, 4 and 7 hosts: the pod's hosts plan the
 * same steps, each reading its share (index tails of a manifest's
 * shards, stream files whole) and none twice, and deliver the batches
 * each delivers planning alone (every file read by it). */
Test(packpod, hosts_plan_alike_from_their_shares)
{
	const char *d = text_dataset();
	const kind kinds[] = {
		{ "z", false, SHARDS, 0, 3000 },	/* manifest: tails split */
		{ "z", true, 0, 0, 3000 },		/* every tail read at the open */
		{ "plain", false, 0, STREAMS, 0 },	/* measured at the split count */
		{ "pm", false, 0, STREAMS, 0 },	/* a manifest of streams: records split */
	};
	const uint32_t host_counts[] = { 1, 4, 7 };

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		char path[1024];

		snprintf(path, sizeof(path), "%s/%s", d, kinds[k].dir);
		for (size_t c = 0; c < 3; c++) {
			uint32_t hosts = host_counts[c];
			run pod_runs[MAX_HOSTS], alone[MAX_HOSTS];
			uint64_t tails = 0, files = 0;
			tu_pod pod;

			tu_pod_init(&pod, hosts);
			run_hosts(pod_runs, hosts, &pod, path, kinds[k].ignore_manifest);
			tu_pod_destroy(&pod);
			run_hosts(alone, hosts, NULL, path, kinds[k].ignore_manifest);
			for (uint32_t h = 0; h < hosts; h++) {
				const run *p = &pod_runs[h], *a = &alone[h];

				cr_assert_eq(p->ret, 0, "%s, host %u of %u: %s", kinds[k].dir, h,
					     hosts, p->err.msg);
				cr_assert_eq(a->ret, 0, "%s alone: %s", kinds[k].dir, a->err.msg);
				cr_assert_gt(p->steps, 2);
				cr_assert_eq(p->steps, pod_runs[0].steps, "%s: host %u of %u",
					     kinds[k].dir, h, hosts);
				cr_assert_eq(p->m.steps_per_epoch, pod_runs[0].m.steps_per_epoch);
				cr_assert_eq(p->steps, a->steps);
				cr_assert_eq(p->m.steps_per_epoch, a->m.steps_per_epoch);
				cr_assert_eq(p->digest, a->digest, "%s, host %u of %u: other batches "
					     "planned with the pod", kinds[k].dir, h, hosts);
				cr_assert_eq(p->m.pack_lengths_from_index, kinds[k].from_index);
				cr_assert_eq(a->m.pack_lengths_from_index, kinds[k].from_index);
				/* Its share, and alone everything, once. */
				cr_assert_eq(p->m.pack_lengths_tails,
					     share(kinds[k].tails, hosts, h), "%s: host %u of %u "
					     "read %llu tails", kinds[k].dir, h, hosts,
					     (unsigned long long)p->m.pack_lengths_tails);
				cr_assert_eq(p->m.pack_lengths_files,
					     share(kinds[k].files, hosts, h), "%s: host %u of %u "
					     "read %llu files", kinds[k].dir, h, hosts,
					     (unsigned long long)p->m.pack_lengths_files);
				cr_assert_eq(a->m.pack_lengths_tails, kinds[k].tails);
				cr_assert_eq(a->m.pack_lengths_files, kinds[k].files);
				cr_assert_eq(a->m.pack_lengths_exchanged, 0);
				if (hosts > 1 && kinds[k].tails + kinds[k].files)
					cr_assert_gt(p->m.pack_lengths_exchanged, 0);
				tails += p->m.pack_lengths_tails;
				files += p->m.pack_lengths_files;
			}
			cr_assert_eq(tails, kinds[k].tails);
			cr_assert_eq(files, kinds[k].files);
		}
	}
}

/* Shards whose index does not tell the lengths (written without a
 * schema, as before 0.7): their records are read, each shard's by one
 * host of the pod (after its tail, from a manifest), and the batches are
 * those of a host reading them all alone. */
Test(packpod, shards_without_lengths_are_read_by_one_host_each)
{
	const char *d = tu_tmpdir();
	char ix[1024], ixm[1024];

	snprintf(ix, sizeof(ix), "%s/ix", d);
	snprintf(ixm, sizeof(ixm), "%s/ixm", d);
	cr_assert_eq(mkdir(ix, 0755), 0);
	for (uint32_t i = 0; i < 8; i++) {
		char p[1100];

		snprintf(p, sizeof(p), "%s/part-%u.tfrecord.zst", ix, i);
		tu_write_id_shard(p, (uint64_t)i * 300, 300, 4096, 0);
	}
	cr_assert_eq(tu_system("cp -r %s %s && %s manifest %s >/dev/null", ix, ixm,
			       tu_env_tool("SHARDTOOL"), ixm), 0);
	for (int m = 0; m < 2; m++) {
		const char *path = m ? ixm : ix;
		run pod_runs[4], alone[4];
		tu_pod pod;

		tu_pod_init(&pod, 4);
		run_hosts_as(pod_runs, 4, &pod, path, false, "v:int64[*]", 16);
		tu_pod_destroy(&pod);
		run_hosts_as(alone, 4, NULL, path, false, "v:int64[*]", 16);
		for (uint32_t h = 0; h < 4; h++) {
			const run *p = &pod_runs[h], *a = &alone[h];

			cr_assert_eq(p->ret, 0, "%s host %u: %s", path, h, p->err.msg);
			cr_assert_eq(a->ret, 0, "%s alone: %s", path, a->err.msg);
			cr_assert_gt(p->steps, 10);
			cr_assert_eq(p->steps, a->steps);
			cr_assert_eq(p->digest, a->digest, "%s, host %u: other batches", path, h);
			cr_assert_eq(p->m.pack_lengths_from_index, 0);
			cr_assert_eq(p->m.pack_lengths_files, 2, "%s, host %u read %llu files", path,
				     h, (unsigned long long)p->m.pack_lengths_files);
			cr_assert_eq(p->m.pack_lengths_tails, m ? 2 : 0);
			cr_assert_eq(a->m.pack_lengths_files, 8);
			cr_assert_eq(a->m.pack_lengths_tails, m ? 8 : 0);
		}
	}
}

/* A host alone reads each stream file once: counting it at the open
 * measures its records' lengths (the bytes its create read are about
 * the files' bytes once, not twice). */
Test(packpod, a_host_alone_reads_stream_files_once)
{
	const char *d = text_dataset();
	char path[1024];
	uint64_t bytes = 0;
	run r[1];

	snprintf(path, sizeof(path), "%s/plain", d);
	for (uint32_t i = 0; i < STREAMS; i++) {
		char p[1100];
		struct stat st;

		snprintf(p, sizeof(p), "%s/text-%05u-of-%05u.tfrecord", path, i, STREAMS);
		cr_assert_eq(stat(p, &st), 0, "%s", p);
		bytes += (uint64_t)st.st_size;
	}
	run_hosts(r, 1, NULL, path, false);
	cr_assert_eq(r->ret, 0, "%s", r->err.msg);
	cr_assert_eq(r->m.open_count_files, STREAMS);
	cr_assert_eq(r->m.pack_lengths_files, STREAMS);
	cr_assert_geq(r->rchar, bytes);
	cr_assert_lt(r->rchar, bytes + bytes / 4, "create read %llu bytes of %llu: twice?",
		     (unsigned long long)r->rchar, (unsigned long long)bytes);
}

/* The payloads in rounds of a few bytes (PODFEED_GATHER_CHUNK): the
 * same plan; a malformed chunk size fails every host naming it. */
Test(packpod, payload_rounds)
{
	const char *d = text_dataset();
	const char *bad[] = { "0", "abc", "12x", "2000000000" };
	run a[4], b[4];
	char path[1024];
	tu_pod pod;

	snprintf(path, sizeof(path), "%s/z", d);
	tu_pod_init(&pod, 4);
	run_hosts(a, 4, &pod, path, false);
	tu_pod_destroy(&pod);
	setenv("PODFEED_GATHER_CHUNK", "7", 1);
	tu_pod_init(&pod, 4);
	run_hosts(b, 4, &pod, path, false);
	cr_assert_gt(pod.calls, 40, "%u all-gathers", pod.calls);
	tu_pod_destroy(&pod);
	for (uint32_t h = 0; h < 4; h++) {
		cr_assert_eq(b[h].ret, 0, "%s", b[h].err.msg);
		cr_assert_eq(a[h].digest, b[h].digest);
		cr_assert_eq(a[h].m.pack_lengths_exchanged, b[h].m.pack_lengths_exchanged);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("PODFEED_GATHER_CHUNK", bad[i], 1);
		tu_pod_init(&pod, 4);
		run_hosts(b, 4, &pod, path, false);
		tu_pod_destroy(&pod);
		for (uint32_t h = 0; h < 4; h++) {
			cr_assert_lt(b[h].ret, 0);
			cr_assert(strstr(b[h].err.msg, "PODFEED_GATHER_CHUNK"), "%s", b[h].err.msg);
			cr_assert(strstr(b[h].err.msg, bad[i]), "%s", b[h].err.msg);
		}
	}
	unsetenv("PODFEED_GATHER_CHUNK");
}

/* Flip one byte of a file in place (its size kept). */
static void flip(const char *path, long from_end)
{
	int fd = open(path, O_RDWR);
	struct stat st;
	uint8_t c;

	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(pread(fd, &c, 1, st.st_size - from_end), 1);
	c ^= 0x40;
	cr_assert_eq(pwrite(fd, &c, 1, st.st_size - from_end), 1);
	close(fd);
}

/* Host 2 of 4 reads a damaged index tail (the third shard is its): it
 * fails saying so, and every other host fails naming it, none hangs. */
Test(packpod, a_host_that_fails_its_share_fails_every_host)
{
	const char *d = text_dataset();
	char path[1024], shard[1100];
	run r[4];
	tu_pod pod;

	snprintf(path, sizeof(path), "%s/z", d);
	snprintf(shard, sizeof(shard), "%s/part-00002-of-%05u.tfrecord.zst", path, SHARDS);
	flip(shard, 40);	/* inside its index */
	tu_pod_init(&pod, 4);
	run_hosts(r, 4, &pod, path, false);
	tu_pod_destroy(&pod);
	cr_assert_lt(r[2].ret, 0);
	cr_assert(strstr(r[2].err.file, "part-00002") || strstr(r[2].err.msg, "part-00002"),
		  "%s: %s", r[2].err.file, r[2].err.msg);
	for (uint32_t h = 0; h < 4; h++) {
		if (h == 2)
			continue;
		cr_assert_lt(r[h].ret, 0, "host %u", h);
		cr_assert(strstr(r[h].err.msg, "host 2 of 4"), "host %u: %s", h, r[h].err.msg);
		cr_assert(strstr(r[h].err.msg, "part-00002"), "host %u: %s", h, r[h].err.msg);
	}
}

typedef struct damage {
	uint32_t call, host;
	size_t at;
} damage;

static void tamper(void *ctx, uint32_t call, uint8_t *all, size_t len, uint32_t hosts)
{
	const damage *dm = ctx;

	(void)hosts;
	if (call == dm->call && dm->at < len)
		all[(size_t)dm->host * len + dm->at] ^= 0x01;
}

/* A pod of 4 over path whose all-gathers fn tampers with: every host
 * fails, each saying why. */
static void tampered_pod_fails(const char *path,
			       void (*fn)(void *, uint32_t, uint8_t *, size_t, uint32_t),
			       void *ctx, const char *why)
{
	run r[4];
	tu_pod pod;

	tu_pod_init(&pod, 4);
	pod.tamper = fn;
	pod.tamper_ctx = ctx;
	run_hosts(r, 4, &pod, path, false);
	tu_pod_destroy(&pod);
	for (uint32_t h = 0; h < 4; h++) {
		cr_assert_lt(r[h].ret, 0, "host %u", h);
		cr_assert(strstr(r[h].err.msg, why), "host %u: %s", h, r[h].err.msg);
	}
}

/* A payload damaged on the way (one bit of host 1's piece): every host
 * refuses it by its CRC32C, naming host 1. */
Test(packpod, damaged_payload_is_refused)
{
	const char *d = text_dataset();
	/* The calls: the open's vote, the heads, the room, the payload. */
	damage dm = { .call = 4, .host = 1, .at = 5 };
	char path[1024];

	snprintf(path, sizeof(path), "%s/z", d);
	tampered_pod_fails(path, tamper, &dm, "host 1 of 4's packed lengths arrived damaged");
}

/* One file's entry of a payload: decoded, or refused saying where. */
Test(packpod, payload_entries_are_checked)
{
	static const struct {
		const char *what;
		uint8_t bytes[16];
		size_t len;
		uint64_t values;
		const char *why;
	} cases[] = {
		{ "good", { 1, 3, 0x80, 0x01, 0 }, 5, 3, NULL },
		{ "records", { 0, 0xff, 0xff, 0xff, 0xff, 0x0f }, 6, 1, NULL },
		{ "empty", { 0 }, 0, 0, "before the file's entry" },
		{ "source 2", { 2, 1 }, 2, 1, "neither 0" },
		{ "short", { 1, 3 }, 2, 2, "inside length 1 of 2" },
		{ "cut varint", { 1, 0x80 }, 2, 1, "inside length 0" },
		{ "6 bytes", { 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 }, 7, 1, "more than 5 bytes" },
		{ "2^32", { 1, 0x80, 0x80, 0x80, 0x80, 0x10 }, 6, 1, "more than 2^32 - 1" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t out[4] = { 0 };
		size_t pos = 0;
		bool told = false;
		char why[256] = "";
		int ret = pf_pack_lengths_unpack(cases[i].bytes, cases[i].len, &pos,
						 cases[i].values, out, &told, why, sizeof(why));

		if (!cases[i].why) {
			cr_assert_eq(ret, 0, "%s: %s", cases[i].what, why);
			cr_assert_eq(pos, cases[i].len, "%s", cases[i].what);
			cr_assert_eq(told, cases[i].bytes[0] == 1);
		} else {
			cr_assert_eq(ret, -EBADMSG, "%s", cases[i].what);
			cr_assert(strstr(why, cases[i].why), "%s: %s", cases[i].what, why);
			cr_assert(strstr(why, "byte"), "%s: %s", cases[i].what, why);
		}
	}
	{
		uint32_t out[3];
		size_t pos = 0;
		bool told;
		char why[64];
		const uint8_t good[] = { 1, 3, 0x80, 0x01, 0 };

		cr_assert_eq(pf_pack_lengths_unpack(good, sizeof(good), &pos, 3, out, &told, why,
						    sizeof(why)), 0);
		cr_assert_eq(out[0], 3);
		cr_assert_eq(out[1], 128);
		cr_assert_eq(out[2], 0);
	}
}

/* Two MPI ranks (pf_pod_allgather) plan as the threads do: each its
 * share of the manifest's tails or of the stream files, the batches of
 * a host planning alone. */
Test(packpod, two_mpi_ranks_plan_from_their_shares, .timeout = 240)
{
	const char *kinds[] = { "z", "plain" };
	const char *d;

	tu_need_mpirun();
	d = text_dataset();
	for (size_t k = 0; k < 2; k++) {
		const char *out = tu_tmpdir();
		char path[1024], cmd[4096];
		static char log[1 << 16];
		run alone[2];

		snprintf(path, sizeof(path), "%s/%s", d, kinds[k]);
		run_hosts(alone, 2, NULL, path, false);
		snprintf(cmd, sizeof(cmd), TU_MPI_ENV "POD_OPEN_CHILD_OUT=%s POD_OPEN_CHILD_PACK=128 "
			 "mpirun --oversubscribe -np 2 %s %s 2 0 2 2>&1", out,
			 tu_env_tool("POD_OPEN_CHILD"), path);
		tu_capture(cmd, log, sizeof(log), NULL);
		for (uint32_t h = 0; h < 2; h++) {
			char file[1200];
			json_error_t je;
			json_t *o;

			snprintf(file, sizeof(file), "%s/host-%u.json", out, h);
			o = json_load_file(file, 0, &je);
			cr_assert_not_null(o, "%s: %s; mpirun said: %s", file, je.text, log);
			cr_assert_eq(alone[h].ret, 0, "%s", alone[h].err.msg);
			cr_assert_eq((uint64_t)json_integer_value(json_object_get(o, "digest")),
				     alone[h].digest, "%s: rank %u's batches", kinds[k], h);
			cr_assert_eq(json_integer_value(json_object_get(o, "steps")),
				     (json_int_t)alone[h].steps);
			cr_assert_eq(json_integer_value(json_object_get(o, "steps_per_epoch")),
				     (json_int_t)alone[h].m.steps_per_epoch);
			cr_assert_eq(json_integer_value(json_object_get(o, "pack_lengths_tails")),
				     k == 0 ? SHARDS / 2 : 0);
			cr_assert_eq(json_integer_value(json_object_get(o, "pack_lengths_files")),
				     k == 0 ? 0 : STREAMS / 2);
			cr_assert_gt(json_integer_value(json_object_get(o, "pack_lengths_exchanged")), 0);
			json_decref(o);
		}
	}
}

/* Where the heads' fields sit (pack_gather.c's gather_head: status,
 * on_corrupt, nf, crc, then the 64-bit chunk, bytes, records). */
#define HEAD_CHUNK 16
#define HEAD_BYTES 24
#define HEAD_PLAN_CRC 40

typedef struct head_edit {
	uint32_t host;
	size_t at;
	uint64_t value;
} head_edit;

static void edit_head(void *ctx, uint32_t call, uint8_t *all, size_t len, uint32_t hosts)
{
	const head_edit *e = ctx;

	(void)hosts;
	if (call == 2)	/* the open's vote, then the heads */
		memcpy(all + (size_t)e->host * len + e->at, &e->value, sizeof(e->value));
}

/* A head whose payload size no dataset of this size can have (here one
 * that would wrap the sum of sizes to a small number): every host
 * refuses it naming the host, before any memory is sized from it.  And
 * a host exchanging in other rounds (another PODFEED_GATHER_CHUNK): every
 * host refuses, naming it, instead of waiting for rounds that never
 * come. */
Test(packpod, a_head_no_host_could_send_is_refused_by_all, .timeout = 120)
{
	const char *d = text_dataset();
	static const struct {
		head_edit e;
		const char *why;
	} cases[] = {
		{ { 1, HEAD_BYTES, UINT64_MAX - 3 }, "host 1 of 4 says its packed lengths are" },
		{ { 3, HEAD_CHUNK, 7 }, "(PODFEED_GATHER_CHUNK), host 3 of 7" },
	};
	char path[1024];

	snprintf(path, sizeof(path), "%s/z", d);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		head_edit e = cases[i].e;

		tampered_pod_fails(path, edit_head, &e, cases[i].why);
	}
}

/* Skip mode: every host reads every record for its lengths (damage is
 * known only by reading), and says what it read (a CRC32C of the
 * lengths): the pod plans as each host alone, and a host whose lengths
 * differ is named by every host instead of planning other steps. */
Test(packpod, skip_mode_hosts_check_they_read_the_same_lengths, .timeout = 180)
{
	const char *d = text_dataset();
	head_edit e = { 2, HEAD_PLAN_CRC, 0x12345678u };	/* not this dataset's */
	char path[1024];
	run r[4], alone[4];
	tu_pod pod;

	snprintf(path, sizeof(path), "%s/z", d);
	corrupt_policy = PF_CORRUPT_SKIP;
	tu_pod_init(&pod, 4);
	run_hosts(r, 4, &pod, path, false);
	tu_pod_destroy(&pod);
	run_hosts(alone, 4, NULL, path, false);
	for (uint32_t h = 0; h < 4; h++) {
		cr_assert_eq(r[h].ret, 0, "host %u: %s", h, r[h].err.msg);
		cr_assert_eq(alone[h].ret, 0, "host %u: %s", h, alone[h].err.msg);
		cr_assert_eq(r[h].steps, r[0].steps, "host %u", h);
		cr_assert_gt(r[h].steps, 2);
		cr_assert_eq(r[h].digest, alone[h].digest, "host %u: other batches", h);
	}
	tampered_pod_fails(path, edit_head, &e,
			   "host 2 of 4 read other packed lengths (CRC32C 12345678)");
}
