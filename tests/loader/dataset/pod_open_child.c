/* SPDX-License-Identifier: Apache-2.0 */
/* One host of a pod opening a dataset, for test_loader_podopen: run
 * under mpirun, the hosts open it together (the pod's all-gather);
 * alone, as host HOST of HOSTS counting every stream file itself.
 *
 *   pod_open_child DATASET HOSTS HOST PCB [RANK=DATASET...]
 *
 * Under MPI, HOSTS and HOST come from the pod, and RANK=DATASET gives
 * that rank another dataset (to make the hosts disagree, or one fail).
 * It reads one epoch and prints one JSON line: the open's metrics and
 * the id of every record it was handed, in order; on error
 * {"error": "..."} and exit 1.  With $POD_OPEN_CHILD_PACK=L it packs the
 * dataset's text records into rows of L instead (test_loader_packpod):
 * its steps, a digest of its batches and what planning them cost. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "pf_host.h"
#include "pod_util.h"
#include "podfeed.h"

/* This rank's one JSON line: to stdout, or with $POD_OPEN_CHILD_OUT to a
 * file of its own there (mpirun forwards the ranks' output in chunks, so
 * long lines of several ranks can interleave on its stdout). */
static void emit(json_t *o, const char *name)
{
	const char *dir = getenv("POD_OPEN_CHILD_OUT");
	char path[4096];
	FILE *f = stdout;

	if (dir) {
		snprintf(path, sizeof(path), "%s/%s.json", dir, name);
		if (!(f = fopen(path, "w"))) {
			perror(path);
			exit(1);
		}
	}
	json_dumpf(o, f, JSON_COMPACT);
	fputc('\n', f);
	if (f != stdout && fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* Host host's line, to the file named after it; out is consumed. */
static void emit_host(json_t *out, uint32_t host)
{
	char name[64];

	snprintf(name, sizeof(name), "host-%u", host);
	emit(out, name);
	json_decref(out);
}

static int fail(const char *msg)
{
	json_t *o = json_pack("{s:s}", "error", msg);
	char name[64];

	/* A failed rank names no host (test_loader_podopen keeps them in
	 * order); the file is this process's. */
	snprintf(name, sizeof(name), "error-%ld", (long)getpid());
	emit(o, name);
	json_decref(o);
	return 1;
}

/* With $POD_OPEN_CHILD_PACK=L: a packing loader of text records
 * (test_loader_packpod's host_main() reads with the same config): its
 * steps, its batches' digest and what planning cost it. */
static int packing(pf_loader_config *cfg, pf_pod *pod, uint32_t pack_length)
{
	pf_loader_metrics m;
	pf_loader *l = NULL;
	pf_batch *b;
	pf_error err;
	uint64_t digest = TU_DIGEST_START, steps = 0;
	char line[PF_ERROR_LINE_MAX];
	json_t *out;
	int ret, status = 0;

	cfg->features = "tokens:int32[*],targets:int32[*]";
	cfg->pack_length = pack_length;
	cfg->cores_per_host = 2;
	cfg->seed = 11;
	cfg->threads = 2;
	cfg->io_depth = 0;
	cfg->memory_budget = 0;
	cfg->shuffle_window = 0;
	ret = pf_loader_create(&l, cfg, &err);
	if (ret < 0) {
		pf_error_format(&err, line, sizeof(line));
		status = fail(line);
		goto out;
	}
	while ((ret = pf_loader_next(l, &b)) == 1) {
		digest = tu_batch_digest(digest, b);
		steps++;
		pf_loader_release(l, b);
	}
	if (ret < 0) {
		pf_error_format(pf_loader_last_error(l), line, sizeof(line));
		status = fail(line);
		goto out;
	}
	pf_loader_get_metrics(l, &m);
	out = json_pack("{s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:I}", "host", cfg->host_index,
			"hosts", cfg->num_hosts, "digest", (json_int_t)digest,
			"steps", (json_int_t)steps,
			"steps_per_epoch", (json_int_t)m.steps_per_epoch,
			"pack_lengths_tails", (json_int_t)m.pack_lengths_tails,
			"pack_lengths_files", (json_int_t)m.pack_lengths_files,
			"pack_lengths_exchanged", (json_int_t)m.pack_lengths_exchanged);
	emit_host(out, cfg->host_index);
out:
	pf_loader_free(l);
	pf_pod_close(pod);
	return status;
}

int main(int argc, char **argv)
{
	const char *path;
	/* test_loader_podopen's host_main() reads with the same config. */
	pf_loader_config cfg = { .features = "id:int64[1]", .threads = 3, .io_depth = 8,
				 .memory_budget = 32u << 20, .shuffle = true,
				 .shuffle_window = 64, .seed = 5 };
	pf_loader_metrics m;
	pf_loader *l = NULL;
	pf_pod *pod = NULL;
	pf_batch *b;
	pf_error err;
	json_t *out, *ids;
	char line[PF_ERROR_LINE_MAX];
	int ret, status = 0;

	if (argc < 5) {
		fprintf(stderr, "usage: pod_open_child DATASET HOSTS HOST PCB [RANK=DATASET...]\n");
		return 2;
	}
	path = argv[1];
	cfg.num_hosts = (uint32_t)atoi(argv[2]);
	cfg.host_index = (uint32_t)atoi(argv[3]);
	cfg.per_core_batch = (uint32_t)atoi(argv[4]);
	if (pf_pod_launched()) {
		if (pf_pod_open(&pod, &err) < 0)
			return fail(err.msg);
		cfg.num_hosts = pf_pod_size(pod);
		cfg.host_index = pf_pod_rank(pod);
		cfg.allgather = pf_pod_allgather;
		cfg.allgather_ctx = pod;
		for (int i = 5; i < argc; i++)
			if ((uint32_t)atoi(argv[i]) == cfg.host_index && strchr(argv[i], '='))
				path = strchr(argv[i], '=') + 1;
	}
	cfg.paths = &path;
	cfg.npaths = 1;
	if (getenv("POD_OPEN_CHILD_PACK"))
		return packing(&cfg, pod, (uint32_t)atoi(getenv("POD_OPEN_CHILD_PACK")));
	ret = pf_loader_create(&l, &cfg, &err);
	if (ret < 0) {
		pf_error_format(&err, line, sizeof(line));
		status = fail(line);
		goto out;
	}
	ids = json_array();
	while ((ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++) {
			const int64_t *id = b->core[c].tensors[0].data;

			for (uint32_t r = 0; r < b->per_core_batch; r++)
				json_array_append_new(ids, json_integer(id[r]));
		}
		pf_loader_release(l, b);
	}
	if (ret < 0) {
		json_decref(ids);
		pf_error_format(pf_loader_last_error(l), line, sizeof(line));
		status = fail(line);
		goto out;
	}
	pf_loader_get_metrics(l, &m);
	out = json_pack("{s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o}",
			"host", cfg.host_index, "hosts", cfg.num_hosts,
			"open_files", (json_int_t)m.open_files,
			"count_files", (json_int_t)m.open_count_files,
			"count_bytes", (json_int_t)m.open_count_bytes,
			"count_decompressed", (json_int_t)m.open_count_decompressed,
			"records_per_epoch", (json_int_t)m.records_per_epoch,
			"steps_per_epoch", (json_int_t)m.steps_per_epoch,
			"exchange_ns", (json_int_t)m.open_exchange_ns, "ids", ids);
	emit_host(out, cfg.host_index);
out:
	pf_loader_free(l);
	pf_pod_close(pod);
	return status;
}
