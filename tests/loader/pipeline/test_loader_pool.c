/* SPDX-License-Identifier: Apache-2.0 */
/* The process-wide cache of the loader's large pools (loader/pool.c): a
 * loader made after another one takes its pools, delivers exactly what a
 * loader on fresh pools delivers (nothing of the last loader's data
 * shows through), the cache is bounded, pf_loader_trim() empties it, a
 * loader that did not ask (keep_pools) leaves nothing behind, and a batch
 * slot no step needed is never touched. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pipeline_internal.h"
#include "podfeed.h"
#include "testutil.h"

#define MIB (1u << 20)

typedef struct delivered {
	uint64_t steps, records;
	uint32_t digest;	/* crc over every core block of every batch */
	uint64_t id_lo, id_hi;	/* the ids seen */
	uint64_t pool_bytes;
	uint64_t rss_live;	/* the process's RSS before the loader is freed */
} delivered;

/* The process's resident bytes (/proc/self/statm). */
static uint64_t rss_bytes(void)
{
	unsigned long long size, resident;
	FILE *f = fopen("/proc/self/statm", "r");

	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%llu %llu", &size, &resident), 2);
	fclose(f);
	return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Every batch of one epoch over dir; each id must be in [lo, lo + n) and
 * come at most once. */
/* Features every run has; a run may add more after them. */
#define FEATURES "id:int64[1],v:float32[8]:pad=-1"

static delivered run_with(const char *dir, uint64_t lo, uint64_t n, bool keep_pools,
			  const char *features)
{
	const char *paths[1] = { dir };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = 64,
				 .cores_per_host = 2, .shuffle = true,
				 .shuffle_window = 1024, .seed = 7, .epochs = 1,
				 .threads = 2,
				 .features = features,
				 .keep_pools = keep_pools };
	delivered d = { .id_lo = UINT64_MAX };
	uint8_t *seen = calloc(n, 1);
	pf_loader_metrics m;
	pf_error err;
	pf_loader *l;
	pf_batch *b;
	int ret;

	cr_assert_not_null(seen);
	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while ((ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++) {
			const pf_core_batch *cb = &b->core[c];
			const int64_t *ids = cb->tensors[0].data;
			const float *v = cb->tensors[1].data;

			d.digest = pf_crc32c(d.digest, cb->block, cb->block_bytes);
			for (uint32_t i = 0; i < b->per_core_batch; i++) {
				uint64_t id = (uint64_t)ids[i];

				cr_assert(id >= lo && id < lo + n, "id %llu is not this dataset's",
					  (unsigned long long)id);
				cr_assert_eq(seen[id - lo]++, 0, "id %llu twice",
					     (unsigned long long)id);
				cr_assert_eq(v[i * 8], (float)id);
				cr_assert_eq(v[i * 8 + 7], -1.0f, "padding");
				d.id_lo = id < d.id_lo ? id : d.id_lo;
				d.id_hi = id > d.id_hi ? id : d.id_hi;
			}
			d.records += b->per_core_batch;
		}
		d.steps++;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "%s", pf_loader_last_error(l)->msg);
	pf_loader_get_metrics(l, &m);
	d.pool_bytes = m.memory_bytes;
	d.rss_live = rss_bytes();
	pf_loader_free(l);
	free(seen);
	return d;
}

static delivered run(const char *dir, uint64_t lo, uint64_t n, bool keep_pools)
{
	return run_with(dir, lo, n, keep_pools, FEATURES);
}

static const char *dataset(uint64_t first, uint64_t n)
{
	const char *dir = tu_tmpdir();
	char p[512];

	snprintf(p, sizeof(p), "%s/a.tfrecord.zst", dir);
	tu_write_id_shard(p, first, n / 2, 8192, 0);
	snprintf(p, sizeof(p), "%s/b.tfrecord.zst", dir);
	tu_write_id_shard(p, first + n / 2, n - n / 2, 8192, 0);
	return dir;
}

Test(pool, the_next_loader_takes_the_pools_and_shows_nothing_of_the_last, .timeout = 120)
{
	const uint64_t n = 6000;
	const char *a = dataset(0, n), *b = dataset(1000000, n);
	delivered first, again, other, fresh;
	size_t kept;

	pf_loader_trim();
	cr_assert_eq(pf_pool_cached(), 0);
	first = run(a, 0, n, true);
	kept = pf_pool_cached();
	/* The batch slots and read buffers are most of the pool bytes. */
	cr_assert_gt(kept, 0);
	cr_assert_geq((uint64_t)kept * 2, first.pool_bytes, "kept %zu of %llu", kept,
		      (unsigned long long)first.pool_bytes);

	/* The same loader again: on the kept pools, the same batches. */
	again = run(a, 0, n, true);
	cr_assert_eq(again.steps, first.steps);
	cr_assert_eq(again.digest, first.digest);
	cr_assert_eq(pf_pool_cached(), kept, "the pools went back to the cache");

	/* Other data of the same shapes on those pools: only its own ids,
	 * each once, and the bytes a loader on fresh pools delivers. */
	other = run(b, 1000000, n, true);
	cr_assert_eq(other.steps, first.steps);
	cr_assert_eq(other.id_lo >= 1000000 && other.id_hi < 1000000 + n, true);
	pf_loader_trim();
	cr_assert_eq(pf_pool_cached(), 0);
	fresh = run(b, 1000000, n, true);
	cr_assert_eq(fresh.digest, other.digest);
	cr_assert_eq(fresh.records, other.records);
	cr_assert_eq(fresh.records, first.records);
	pf_loader_trim();
}

Test(pool, equal_sizes_are_reused_and_the_cache_is_bounded)
{
	void *p[10];

	pf_pool_trim();
	cr_assert_null(pf_pool_alloc(0));
	/* 2 MiB granules: 3 MiB is kept as 4. */
	p[0] = pf_pool_alloc(3 * MIB);
	cr_assert_not_null(p[0]);
	memset(p[0], 0xab, 3 * MIB);
	pf_pool_free(p[0], 3 * MIB, true);
	cr_assert_eq(pf_pool_cached(), 4 * MIB);
	/* Another size does not take it; the same size (as mapped) does. */
	p[1] = pf_pool_alloc(6 * MIB);
	cr_assert_eq(pf_pool_cached(), 4 * MIB);
	p[2] = pf_pool_alloc(4 * MIB);
	cr_assert_eq(p[2], p[0]);
	cr_assert_eq(pf_pool_cached(), 0);
	pf_pool_free(p[1], 6 * MIB, true);
	pf_pool_free(p[2], 4 * MIB, true);
	pf_pool_trim();

	/* Ten pools of 2..20 MiB freed in order: the last 8 stay. */
	for (int i = 0; i < 10; i++) {
		p[i] = pf_pool_alloc((size_t)(i + 1) * 2 * MIB);
		cr_assert_not_null(p[i]);
	}
	for (int i = 0; i < 10; i++)
		pf_pool_free(p[i], (size_t)(i + 1) * 2 * MIB, true);
	cr_assert_eq(pf_pool_cached(), (size_t)(3 + 4 + 5 + 6 + 7 + 8 + 9 + 10) * 2 * MIB);
	pf_pool_trim();
	cr_assert_eq(pf_pool_cached(), 0);

	/* A pool over the byte bound is never kept; one that would pass it
	 * pushes the oldest out.  (Mappings are not touched: no memory.) */
	p[0] = pf_pool_alloc((size_t)1100 * MIB);
	cr_assert_not_null(p[0]);
	pf_pool_free(p[0], (size_t)1100 * MIB, true);
	cr_assert_eq(pf_pool_cached(), 0);
	p[0] = pf_pool_alloc((size_t)600 * MIB);
	p[1] = pf_pool_alloc((size_t)500 * MIB);
	pf_pool_free(p[0], (size_t)600 * MIB, true);
	pf_pool_free(p[1], (size_t)500 * MIB, true);
	cr_assert_eq(pf_pool_cached(), (size_t)500 * MIB);
	pf_loader_trim();
	cr_assert_eq(pf_pool_cached(), 0);
}

/* A loader that did not ask keeps nothing after pf_loader_free(): no
 * pool in the cache, no allocation live, its pools' memory given back;
 * one that asked keeps its pools for the next. */
Test(pool, a_freed_loader_keeps_nothing_unless_asked, .timeout = 120)
{
	const uint64_t n = 6000;
	const char *a = dataset(0, n);
	/* Rows of 16 KiB: pools of tens of MiB, all written. */
	const char *features = FEATURES ",wide:int32[4096]:default=0";
	uint64_t live, rss0, rss_after;
	delivered d;

	run_with(a, 0, n, false, features);	/* the process's first-use costs, paid */
	pf_loader_trim();
	live = tu_alloc_live();
	rss0 = rss_bytes();
	d = run_with(a, 0, n, false, features);
	rss_after = rss_bytes();
	cr_assert_eq(pf_pool_cached(), 0, "a pool kept though not asked");
	cr_assert_eq(tu_alloc_live(), live, "allocations left behind");
	cr_assert_gt(d.rss_live, rss0 + 16 * MIB, "the pools were in use (%llu -> %llu)",
		     (unsigned long long)rss0, (unsigned long long)d.rss_live);
	cr_assert_lt(rss_after, rss0 + (d.rss_live - rss0) / 4,
		     "memory not given back: %llu before, %llu live, %llu after",
		     (unsigned long long)rss0, (unsigned long long)d.rss_live,
		     (unsigned long long)rss_after);

	d = run_with(a, 0, n, true, features);
	cr_assert_gt(pf_pool_cached(), 0, "asked to keep its pools");
	cr_assert_gt(rss_bytes(), rss0 + (d.rss_live - rss0) / 2, "the kept pools stay resident");
	pf_loader_trim();
	cr_assert_eq(pf_pool_cached(), 0);
}

/* Batch slots are made as the schedule opens their steps, a freed one
 * taken before a new one: a slot no step needed has no page in memory
 * (the pool is planned for the most the budget allows, and a loader
 * faulted in its whole batch pool before its first batch).  Slots of
 * about 2 MiB with alignment gaps after each tensor, which a slot's
 * making zeroes. */
Test(pool, a_slot_no_step_needs_is_never_touched, .timeout = 120)
{
	const uint64_t n = 4000;
	const uint32_t pcb = 500;
	const char *dir = dataset(0, n);
	const char *paths[1] = { dir };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .per_core_batch = pcb,
				 .cores_per_host = 1, .epochs = 1, .threads = 2,
				 .features = "id:int64[1],v:float32[1021]:pad=-1" };
	long page = sysconf(_SC_PAGESIZE);
	uint64_t next_id = 0;
	size_t slot_bytes, from, len, resident = 0, used_resident = 0;
	unsigned char *vec;
	pf_loader *l;
	pf_pipe *p;
	pf_batch *b;
	pf_error err;
	int ret;

	pf_loader_trim();
	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while ((ret = pf_loader_next(l, &b)) == 1) {
		const int64_t *ids = b->core[0].tensors[0].data;
		const uint8_t *block = b->core[0].block;
		size_t v_at = (size_t)((const uint8_t *)b->core[0].tensors[1].data - block);

		/* Not shuffled: the ids in order, each once. */
		for (uint32_t i = 0; i < pcb; i++)
			cr_assert_eq((uint64_t)ids[i], next_id++);
		cr_assert_gt(v_at, 8 * pcb, "no gap after 'id'");
		for (size_t i = 8 * pcb; i < v_at; i++)
			cr_assert_eq(block[i], 0, "the gap after 'id' holds data");
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "%s", pf_loader_last_error(l)->msg);
	cr_assert_eq(next_id, n);

	p = pf_pipe_of(l);
	cr_assert_not_null(p);
	slot_bytes = (size_t)p->topo.cores * p->block_bytes;
	cr_assert_gt(p->slots_made, 0);
	cr_assert_leq(p->slots_made, n / pcb, "more slots made than steps");
	/* A 2 MiB page faulted in for the last slot made may reach into the
	 * next ones: from 2 MiB past its end, nothing is resident. */
	from = round_up((size_t)p->slots_made * slot_bytes + (2u << 20), (size_t)page);
	cr_assert_geq((size_t)p->nslots * slot_bytes, from + slot_bytes,
		      "the pool has too few slots past those made (%u of %u)", p->slots_made,
		      p->nslots);
	len = (size_t)p->nslots * slot_bytes - from;
	vec = calloc(len / (size_t)page + 1, 1);
	cr_assert_not_null(vec);
	cr_assert_eq(mincore(p->mem_batches + from, len, vec), 0);
	for (size_t i = 0; i < len / (size_t)page; i++)
		resident += vec[i] & 1;
	cr_assert_eq(resident, 0, "%zu pages of slots never made are in memory (%u of %u "
		     "slots made)", resident, p->slots_made, p->nslots);
	/* The check sees pages: the slots made are in memory. */
	cr_assert_eq(mincore(p->mem_batches, slot_bytes, vec), 0);
	for (size_t i = 0; i < slot_bytes / (size_t)page; i++)
		used_resident += vec[i] & 1;
	cr_assert_gt(used_resident, 0);
	free(vec);
	pf_loader_free(l);
	pf_loader_trim();
}
