/* SPDX-License-Identifier: Apache-2.0 */
/* The pod simulation against real loaders: for pods of 1, 7, 64 and
 * 1,024 hosts over a many-shard manifest, every host's loader is run and
 * the records it hands out (by id) are enumerated: equal steps, disjoint
 * records, their union the epoch minus the remainder, and the
 * simulation's per-host figures (steps, records, the first batch's
 * shards and frames) those the loaders show. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "podfeed.h"
#include "testutil.h"

#define SHARDS 300u
#define STREAMS 10u	/* of them, the last: plain and gzip TFRecord */
#define PCB 2u

typedef struct dataset {
	const char *dir;
	uint64_t records;
	uint64_t first_id[SHARDS], count[SHARDS];	/* ids of shard k */
	pf_manifest *manifest;
	uint64_t manifest_bytes;
} dataset;

/* SHARDS small files, 0 to 60 records each (ids in file order), indexed
 * ones in frames of about 512 bytes, and their manifest. */
static void make_dataset(dataset *d)
{
	char p[512];
	const char *path;
	struct stat st;
	pf_error err;

	memset(d, 0, sizeof(*d));
	d->dir = tu_tmpdir();
	for (unsigned k = 0; k < SHARDS; k++) {
		d->first_id[k] = d->records;
		d->count[k] = (k * 7u + 3u) % 61u;
		if (k >= SHARDS - STREAMS) {
			snprintf(p, sizeof(p), "%s/s%03u.tfrecord%s", d->dir, k, k % 2 ? ".gz" : "");
			tu_write_id_stream(p, d->records, d->count[k], k % 2);
		} else {
			snprintf(p, sizeof(p), "%s/s%03u.tfrecord.zst", d->dir, k);
			tu_write_id_shard(p, d->records, d->count[k], 512, 0);
		}
		d->records += d->count[k];
	}
	path = d->dir;
	snprintf(p, sizeof(p), "%s/" PF_MANIFEST_NAME, d->dir);
	cr_assert_eq(pf_manifest_write(&path, 1, p, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_manifest_load(&d->manifest, p, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(stat(p, &st), 0);
	d->manifest_bytes = (uint64_t)st.st_size;
}

/* The shard of an id, and a number for its frame (shard x 1024 + frame;
 * a stream file is one unit). */
static unsigned shard_of(const dataset *d, int64_t id)
{
	unsigned lo = 0, hi = SHARDS;

	while (hi - lo > 1) {
		unsigned mid = (lo + hi) / 2;

		if (d->first_id[mid] <= (uint64_t)id)
			lo = mid;
		else
			hi = mid;
	}
	while (d->count[lo] == 0 || (uint64_t)id >= d->first_id[lo] + d->count[lo])
		lo++;	/* past empty shards */
	return lo;
}

static uint64_t unit_of(const dataset *d, int64_t id)
{
	unsigned k = shard_of(d, id);
	char name[64];
	uint64_t r = (uint64_t)id - d->first_id[k];

	snprintf(name, sizeof(name), "s%03u.tfrecord", k);
	for (size_t i = 0; i < pf_manifest_shards(d->manifest); i++) {
		const pf_manifest_shard *s = pf_manifest_get(d->manifest, i);

		if (strncmp(s->path, name, strlen(name)))
			continue;
		for (uint32_t f = 0; f < s->nframes; f++)
			if (r >= s->frames[f].first_record &&
			    r < s->frames[f].first_record + s->frames[f].records)
				return (uint64_t)k * 1024 + f;
		return (uint64_t)k * 1024;	/* a stream file */
	}
	cr_assert_fail("shard %u is not in the manifest", k);
	return 0;
}

typedef struct host_out {
	int64_t *ids;
	size_t nids, first_n;	/* ids; of them, the first batch's */
	pf_loader_metrics m;
} host_out;

/* One epoch of host h's loader, every id it hands out. */
static void run_host(const dataset *d, uint32_t h, uint32_t hosts, pf_remainder rem,
		     host_out *o)
{
	const char *paths[1] = { d->dir };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .features = "id:int64[1]",
				 .per_core_batch = PCB, .host_index = h, .num_hosts = hosts,
				 .shuffle = true, .shuffle_window = 16, .seed = 11,
				 .remainder = rem, .threads = 1, .io_depth = 4,
				 .memory_budget = 8u << 20 };
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	int ret;

	memset(o, 0, sizeof(*o));
	o->ids = malloc((d->records + PCB) * sizeof(*o->ids));
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "host %u of %u: %s", h, hosts, err.msg);
	while ((ret = pf_loader_next(l, &b)) == 1) {
		const int64_t *id = b->core[0].tensors[0].data;

		for (uint32_t r = 0; r < PCB; r++)
			o->ids[o->nids++] = id[r];
		if (!o->first_n)
			o->first_n = o->nids;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "host %u of %u: %s", h, hosts, pf_loader_last_error(l)->msg);
	pf_loader_get_metrics(l, &o->m);
	pf_loader_free(l);
}

/* Distinct values of v[0..n) (sorted in place). */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t distinct(uint64_t *v, size_t n)
{
	uint64_t k = 0;

	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 0; i < n; i++)
		k += i == 0 || v[i] != v[i - 1];
	return k;
}

static void check_pod(const dataset *d, uint32_t hosts, pf_remainder rem)
{
	const char *paths[1] = { d->dir };
	pf_podsim_config cfg = { .paths = paths, .npaths = 1, .num_hosts = hosts,
				 .per_core_batch = PCB, .shuffle = true, .shuffle_window = 16,
				 .seed = 11, .remainder = rem, .threads = 2,
				 .measure_without_manifest = true };
	uint64_t global = (uint64_t)PCB * hosts;
	uint64_t steps = rem == PF_REMAINDER_WRAP ? (d->records + global - 1) / global
						  : d->records / global;
	uint8_t *seen = calloc(d->records, 1);
	uint64_t union_ids = 0, count_files = 0, bare_requests = 0;
	const pf_podsim_summary *sum;
	pf_podsim *sim;
	pf_error err;

	cr_assert_eq(pf_podsim_run(&sim, &cfg, &err), 0, "%s", err.msg);
	sum = pf_podsim_summary_get(sim);
	cr_assert(sum->steps_equal && sum->disjoint && sum->complete, "%u hosts: %s", hosts,
		  sum->problem ? sum->problem : "?");
	cr_assert_null(sum->problem);
	cr_assert(sum->manifest);
	cr_assert_eq(sum->shards, SHARDS);
	cr_assert_eq(sum->streams, STREAMS);
	cr_assert_eq(sum->records, d->records);
	cr_assert_eq(sum->steps, steps);
	cr_assert_eq(sum->global_batch, global);
	cr_assert_eq(sum->delivered, steps * global);
	cr_assert_null(pf_podsim_host_get(sim, hosts));

	for (uint32_t h = 0; h < hosts; h++) {
		const pf_podsim_host *ho = pf_podsim_host_get(sim, h);
		uint64_t *files, *units, nfirst;
		host_out o;

		run_host(d, h, hosts, rem, &o);
		/* Every host the same steps, each full. */
		cr_assert_eq(o.nids, steps * PCB, "host %u of %u", h, hosts);
		cr_assert_eq(ho->steps, steps);
		cr_assert_eq(ho->records_delivered, o.nids);
		cr_assert_eq(ho->records_dropped, o.m.remainder_dropped, "host %u of %u", h, hosts);
		cr_assert_eq(ho->records_wrapped, o.m.remainder_wrapped, "host %u of %u", h, hosts);
		cr_assert_eq(ho->records_owned + ho->records_wrapped,
			     ho->records_delivered + ho->records_dropped);
		/* Disjoint: an id seen on another host fails; under wrap a
		 * host repeats only its own. */
		for (size_t i = 0; i < o.nids; i++) {
			int64_t id = o.ids[i];

			cr_assert(id >= 0 && (uint64_t)id < d->records);
			if (seen[id] && seen[id] != (uint8_t)(h % 255 + 1))
				cr_assert_fail("id %lld is handed out by two hosts (one is %u of %u)",
					       (long long)id, h, hosts);
			cr_assert(seen[id] == 0 || rem == PF_REMAINDER_WRAP,
				  "id %lld twice on host %u", (long long)id, h);
			union_ids += seen[id] == 0;
			seen[id] = (uint8_t)(h % 255 + 1);
		}
		/* What the first batch needs: its shards and frames. */
		files = calloc(o.first_n, sizeof(*files));
		units = calloc(o.first_n, sizeof(*units));
		for (size_t i = 0; i < o.first_n; i++) {
			files[i] = shard_of(d, o.ids[i]);
			units[i] = unit_of(d, o.ids[i]);
		}
		nfirst = distinct(files, o.first_n);
		cr_assert_eq(ho->first_files, nfirst, "host %u of %u: %llu shards, the loader %llu",
			     h, hosts, (unsigned long long)ho->first_files,
			     (unsigned long long)nfirst);
		cr_assert_eq(ho->first_units, distinct(units, o.first_n));
		cr_assert_geq(ho->first_reads, ho->first_units);
		free(files);
		free(units);
		/* Opening: the manifest, one read; without it every shard's
		 * tail and a share of the stream files. */
		cr_assert_eq(ho->open_files, 1);
		cr_assert_eq(ho->open_reads, 1);
		cr_assert_eq(ho->open_bytes, d->manifest_bytes);
		cr_assert_eq(ho->bare_files, SHARDS);
		cr_assert_geq(ho->bare_reads, SHARDS + ho->bare_count_files);
		count_files += ho->bare_count_files;
		bare_requests += ho->bare_files + ho->bare_reads;
		free(o.ids);
	}
	/* The union: the epoch less the remainder (drop), or all (wrap). */
	cr_assert_eq(union_ids, rem == PF_REMAINDER_WRAP ? d->records : steps * global);
	cr_assert_eq(sum->distinct, union_ids);
	cr_assert_eq(sum->remainder_dropped, d->records - union_ids);
	cr_assert_eq(count_files, STREAMS);
	cr_assert_eq(sum->open_requests, 2ull * hosts);
	cr_assert_eq(sum->open_bytes, d->manifest_bytes * hosts);
	cr_assert(sum->bare_measured);
	cr_assert_eq(sum->bare_requests, bare_requests);
	free(seen);
	pf_podsim_free(sim);
}

Test(loader_podsim, one_host, .timeout = 120)
{
	dataset d;

	make_dataset(&d);
	check_pod(&d, 1, PF_REMAINDER_DROP);
	pf_manifest_free(d.manifest);
}

Test(loader_podsim, seven_hosts_dropping_and_wrapping, .timeout = 120)
{
	dataset d;

	make_dataset(&d);
	check_pod(&d, 7, PF_REMAINDER_DROP);
	check_pod(&d, 7, PF_REMAINDER_WRAP);
	pf_manifest_free(d.manifest);
}

Test(loader_podsim, sixty_four_hosts, .timeout = 120)
{
	dataset d;

	make_dataset(&d);
	check_pod(&d, 64, PF_REMAINDER_DROP);
	pf_manifest_free(d.manifest);
}

Test(loader_podsim, a_thousand_and_twenty_four_hosts, .timeout = 300)
{
	dataset d;

	make_dataset(&d);
	check_pod(&d, 1024, PF_REMAINDER_DROP);
	pf_manifest_free(d.manifest);
}

/* shardtool ARGS (stdout and stderr) into out.  @return its exit status. */
static int shardtool(char *out, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int shardtool(char *out, size_t cap, const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int n = snprintf(cmd, sizeof(cmd), "%s ", tu_env_tool("SHARDTOOL"));

	va_start(ap, fmt);
	vsnprintf(cmd + n, sizeof(cmd) - (size_t)n - 8, fmt, ap);
	va_end(ap);
	strcat(cmd, " 2>&1");
	return WEXITSTATUS(tu_capture(cmd, out, cap, NULL));
}

/* shardtool podsim prints the library's figures: JSON as the summary
 * and hosts say, text with the checks, exit 0; bad usage named, exit 2;
 * a dataset that is not there, exit 1 naming it. */
Test(loader_podsim, shardtool_prints_it, .timeout = 120)
{
	static char out[1 << 20];
	const char *paths[1];
	pf_podsim_config cfg = { .npaths = 1, .num_hosts = 7, .per_core_batch = PCB,
				 .shuffle = true, .shuffle_window = 16, .seed = 11,
				 .measure_without_manifest = true };
	const pf_podsim_summary *sum;
	json_t *o, *hosts, *h3;
	json_error_t je;
	pf_podsim *sim;
	pf_error err;
	dataset d;
	int st;

	make_dataset(&d);
	paths[0] = d.dir;
	cfg.paths = paths;
	cr_assert_eq(pf_podsim_run(&sim, &cfg, &err), 0, "%s", err.msg);
	sum = pf_podsim_summary_get(sim);
	st = shardtool(out, sizeof(out), "podsim --hosts 7 --per-core-batch %u --shuffle-window 16 "
		       "--seed 11 --json %s", PCB, d.dir);
	cr_assert_eq(st, 0, "%s", out);
	o = json_loads(out, 0, &je);
	cr_assert_not_null(o, "%s: %s", je.text, out);
	cr_assert(json_is_true(json_object_get(json_object_get(o, "checks"), "disjoint")));
	cr_assert(json_is_true(json_object_get(json_object_get(o, "dataset"), "manifest")));
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(o, "epoch"), "steps")),
		     (json_int_t)sum->steps);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(o, "bucket"),
							"without_manifest_requests")),
		     (json_int_t)sum->bare_requests);
	hosts = json_object_get(o, "hosts");
	cr_assert_eq(json_array_size(hosts), 7);
	h3 = json_array_get(hosts, 3);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(h3, "first_batch"),
							"units")),
		     (json_int_t)pf_podsim_host_get(sim, 3)->first_units);
	cr_assert_eq(json_integer_value(json_object_get(h3, "records_owned")),
		     (json_int_t)pf_podsim_host_get(sim, 3)->records_owned);
	json_decref(o);
	pf_podsim_free(sim);

	st = shardtool(out, sizeof(out), "podsim --hosts 7 --per-core-batch %u %s", PCB, d.dir);
	cr_assert_eq(st, 0, "%s", out);
	cr_assert(strstr(out, "checks      equal steps: yes; disjoint records: yes; union = "
			 "epoch - remainder: yes"), "%s", out);
	cr_assert(strstr(out, "open        a host: 1 file, 1 read, "), "%s", out);

	cr_assert_eq(shardtool(out, sizeof(out), "podsim %s", d.dir), 2);
	cr_assert(strstr(out, "--hosts H is required"), "%s", out);
	cr_assert_eq(shardtool(out, sizeof(out), "podsim --hosts 0 %s", d.dir), 2);
	cr_assert(strstr(out, "--hosts: '0'"), "%s", out);
	cr_assert_eq(shardtool(out, sizeof(out), "podsim --hosts 2 /nonexistent/podfeed"), 1);
	cr_assert(strstr(out, "/nonexistent/podfeed"), "%s", out);
	pf_manifest_free(d.manifest);
}
