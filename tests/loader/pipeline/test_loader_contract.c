/* SPDX-License-Identifier: Apache-2.0 */
/* The loader's API contract: a dataset smaller than one global batch is
 * refused at create time, and nothing a loader changes outlives it
 * (pool cache, read policy) unless the caller asked. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "podfeed.h"
#include "testutil.h"

typedef struct run_result {
	int ret;
	pf_error err;
	uint64_t steps, rows;
	uint64_t seen[64];	/* per id, times delivered */
} run_result;

static void run(const char *dir, uint32_t host, uint32_t hosts, pf_remainder rem,
		run_result *r)
{
	const char *paths[1] = { dir };
	pf_loader_config cfg = {
		.paths = paths, .npaths = 1, .features = "id:int64[1]",
		.host_index = host, .num_hosts = hosts, .cores_per_host = 2,
		.per_core_batch = 4, .remainder = rem, .threads = 1,
	};
	pf_loader *l;
	pf_batch *b;

	memset(r, 0, sizeof(*r));
	r->ret = pf_loader_create(&l, &cfg, &r->err);
	if (r->ret < 0)
		return;
	while ((r->ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++) {
			const int64_t *ids = b->core[c].tensors[0].data;

			for (uint32_t i = 0; i < b->per_core_batch; i++) {
				cr_assert_lt((uint64_t)ids[i], 64);
				r->seen[ids[i]]++;
				r->rows++;
			}
		}
		r->steps++;
		pf_loader_release(l, b);
	}
	if (r->ret < 0)
		r->err = *pf_loader_last_error(l);
	pf_loader_free(l);
}

/* 10 records, a global batch of 4 x 2 cores x 2 hosts = 16: every host
 * is refused, and the message says both numbers. */
Test(contract, fewer_records_than_a_global_batch_is_an_error, .timeout = 60)
{
	const char *d = tu_id_dataset(10);
	run_result r;

	for (uint32_t h = 0; h < 2; h++) {
		run(d, h, 2, PF_REMAINDER_DROP, &r);
		cr_assert_eq(r.ret, -EINVAL, "host %u: %d", h, r.ret);
		cr_assert(strstr(r.err.msg, "holds 10 records, fewer than one global batch of 16 "
				 "(per_core_batch 4 x 2 cores x 2 hosts)"), "%s", r.err.msg);
		cr_assert(strstr(r.err.msg, "remainder=wrap"), "%s", r.err.msg);
	}
	/* One host: 10 records fill one global batch of 8. */
	run(d, 0, 1, PF_REMAINDER_DROP, &r);
	cr_assert_eq(r.ret, 0, "%s", r.err.msg);
	cr_assert_eq(r.steps, 1);
}

/* With remainder=wrap the records fill one step on every host, each
 * record at least once across the pod; fewer records than hosts leave a
 * host nothing to wrap around, which create says. */
Test(contract, wrap_fills_one_step_from_fewer_records, .timeout = 60)
{
	static const uint64_t counts[] = { 10, 3, 2 };
	run_result few;

	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		const char *d = tu_id_dataset(counts[k]);
		uint64_t seen[64] = { 0 };
		run_result r;

		for (uint32_t h = 0; h < 2; h++) {
			run(d, h, 2, PF_REMAINDER_WRAP, &r);
			cr_assert_eq(r.ret, 0, "%llu records, host %u: %s",
				     (unsigned long long)counts[k], h, r.err.msg);
			cr_assert_eq(r.steps, 1, "every host one step");
			cr_assert_eq(r.rows, 8);
			for (uint64_t i = 0; i < 64; i++)
				seen[i] += r.seen[i];
		}
		for (uint64_t i = 0; i < counts[k]; i++)
			cr_assert_geq(seen[i], 1, "record %llu of %llu delivered",
				      (unsigned long long)i, (unsigned long long)counts[k]);
	}
	for (uint32_t h = 0; h < 2; h++) {
		run(tu_id_dataset(1), h, 2, PF_REMAINDER_WRAP, &few);
		cr_assert_eq(few.ret, -EINVAL);
		cr_assert_str_eq(few.err.msg, "the dataset holds 1 records, fewer than the 2 hosts: "
				 "with remainder=wrap every host needs one to wrap around");
	}
}

/* A dataset of no records is an error under any remainder policy: there
 * is nothing to wrap. */
Test(contract, an_empty_dataset_is_an_error, .timeout = 60)
{
	const char *d = tu_tmpdir();
	run_result r;

	cr_assert_eq(tu_system(": > %s/empty.tfrecord", d), 0);
	run(d, 0, 1, PF_REMAINDER_DROP, &r);
	cr_assert_eq(r.ret, -EINVAL);
	cr_assert(strstr(r.err.msg, "holds 0 records, fewer than one global batch of 8"),
		  "%s", r.err.msg);
	run(d, 0, 1, PF_REMAINDER_WRAP, &r);
	cr_assert_eq(r.ret, -EINVAL);
	cr_assert(strstr(r.err.msg, "holds 0 records"), "%s", r.err.msg);
}

/* ------------------------------------------------------------------ */
/* pf_file_pread()'s policy: a loader's does not outlive it              */

static pf_loader *make_loader(const char *dir, const char *faults)
{
	const char *paths[1] = { dir };
	pf_loader_config cfg = {
		.paths = paths, .npaths = 1, .features = "id:int64[1]",
		.per_core_batch = 4, .threads = 1,
		.io_faults = faults, .io_retries = PF_IO_RETRIES_NONE,
	};
	pf_loader *l;
	pf_error err;

	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	return l;
}

/* pf_file_pread() of path, n times.  @return how many failed. */
static int preads(const char *path, int n)
{
	int fd = open(path, O_RDONLY), failed = 0;
	uint8_t buf[64];
	pf_error err;

	cr_assert_geq(fd, 0);
	for (int i = 0; i < n; i++)
		failed += pf_file_pread(fd, buf, sizeof(buf), 0, path, &err) < 0;
	close(fd);
	return failed;
}

/* The metrics count the plan's files and the empty ones among them: what
 * a report names without a stat per file. */
Test(contract, metrics_count_the_planned_and_the_empty_files, .timeout = 60)
{
	const char *d = tu_tmpdir();
	pf_loader_metrics m;
	pf_loader *l;

	cr_assert_eq(tu_system("cp %s/* %s/ && : > %s/zz-empty.tfrecord", tu_id_dataset(64), d, d),
		     0);
	l = make_loader(d, NULL);
	pf_loader_get_metrics(l, &m);
	cr_assert_eq(m.dataset_files, 2);
	cr_assert_eq(m.empty_files, 1);
	pf_loader_free(l);
}

Test(contract, a_loaders_read_policy_ends_with_it, .timeout = 60)
{
	const char *d = tu_id_dataset(64);
	char shard[512];
	pf_io_config mine = { .faults = "eio@5", .retries = PF_IO_RETRIES_NONE };
	pf_loader *a, *b;
	pf_error err;

	snprintf(shard, sizeof(shard), "%s/s.tfrecord.zst", d);
	unsetenv("PODFEED_FAULTS");
	unsetenv("PODFEED_IO_RETRIES");
	cr_assert_eq(pf_file_set_policy(NULL, &err), 0, "%s", err.msg);

	/* In force while the loader lives (its own index reads go through
	 * it): the 40th request from its start fails. */
	a = make_loader(d, "eio@40");
	cr_assert_eq(preads(shard, 60), 1);
	pf_loader_free(a);

	/* Gone with it: a loader freed before its fault's request comes
	 * leaves no fault behind. */
	a = make_loader(d, "eio@40");
	pf_loader_free(a);
	cr_assert_eq(preads(shard, 100), 0, "the freed loader's policy is still in force");

	/* Two loaders, freed in either order: the process's policy is the
	 * one before both. */
	a = make_loader(d, "eio@40");
	b = make_loader(d, "eio@45");
	pf_loader_free(a);
	pf_loader_free(b);
	cr_assert_eq(preads(shard, 100), 0, "freed first to last");
	a = make_loader(d, "eio@40");
	b = make_loader(d, "eio@45");
	pf_loader_free(b);
	cr_assert_eq(preads(shard, 100), 1, "the first loader's policy is back while it lives");
	pf_loader_free(a);
	cr_assert_eq(preads(shard, 100), 0, "freed last to first");

	/* The caller's own choice, made while a loader lives, stays. */
	a = make_loader(d, "eio@40");
	cr_assert_eq(pf_file_set_policy(&mine, &err), 0, "%s", err.msg);
	pf_loader_free(a);
	cr_assert_eq(preads(shard, 10), 1, "the caller's policy was undone");
	cr_assert_eq(pf_file_set_policy(NULL, &err), 0);
}
