/* SPDX-License-Identifier: Apache-2.0 */
/* Autotune (loader/autotune.c): PF_AUTO is the default of threads,
 * io_depth and prefetch; what the loader chose is said with its reason
 * (pf_loader_tuning()); a setting the config names is kept; a slow
 * consumer gets fewer decode threads, slow reads more reads in flight, a
 * stalling consumer more prefetch; and none of it changes a batch. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "podfeed.h"
#include "testutil.h"

typedef struct tuned_run {
	uint64_t steps;
	uint32_t digest;	/* crc over every core block of every batch */
	pf_tuning tune;
} tuned_run;

/* The consumer: how long it works on batch i (ms). */
typedef struct consumer {
	int (*work_ms)(uint64_t i);
	bool on_cpu;		/* the work spins on the CPU (else it sleeps) */
} consumer;

/* Spin until this thread has had ms of CPU. */
static void spin_ms(int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	do
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000ll + (t.tv_nsec - t0.tv_nsec) <
	       ms * 1000000ll);
}

static void run(const char *dir, pf_loader_config *cfg, const consumer *cons,
		tuned_run *r)
{
	const char *paths[1] = { dir };
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	int ret;

	memset(r, 0, sizeof(*r));
	cfg->paths = paths;
	cfg->npaths = 1;
	cfg->features = "id:int64[1],v:float32[4]:pad=-1";
	cfg->per_core_batch = cfg->per_core_batch ? cfg->per_core_batch : 50;
	ret = pf_loader_create(&l, cfg, &err);
	cr_assert_eq(ret, 0, "%s", err.msg);
	while ((ret = pf_loader_next(l, &b)) == 1) {
		const pf_core_batch *cb = &b->core[0];

		r->digest = pf_crc32c(r->digest, cb->block, cb->block_bytes);
		if (cons && cons->work_ms && cons->work_ms(r->steps)) {
			if (cons->on_cpu)
				spin_ms(cons->work_ms(r->steps));
			else
				tu_sleep_ms(cons->work_ms(r->steps));
		}
		r->steps++;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0, "%s", pf_loader_last_error(l)->msg);
	pf_loader_tuning(l, &r->tune);
	pf_loader_free(l);
}

/* 40,000 ids in 4 shards of small frames: 800 batches of 50. */
static const char *dataset(void)
{
	const char *d = tu_tmpdir();
	char p[512];

	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/s%d.tfrecord.zst", d, i);
		tu_write_id_shard(p, (uint64_t)i * 10000, 10000, 4096, 0);
	}
	return d;
}

static unsigned cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned)n : 1;
}

Test(autotune, the_defaults_are_auto_and_each_choice_says_why, .timeout = 120)
{
	const char *d = dataset();
	pf_loader_config fixed = { .shuffle = true, .seed = 3, .threads = 2, .io_depth = 32,
				   .prefetch = 2 };
	pf_loader_config autocfg = { .shuffle = true, .seed = 3 };
	tuned_run ref, r;

	run(d, &fixed, NULL, &ref);
	run(d, &autocfg, NULL, &r);
	cr_assert_eq(r.steps, 800);
	cr_assert_eq(r.digest, ref.digest, "autotune changed the batches");

	cr_assert(r.tune.threads.automatic && r.tune.io_depth.automatic &&
		  r.tune.prefetch.automatic);
	cr_assert(r.tune.threads.measured && r.tune.io_depth.measured &&
		  r.tune.prefetch.measured);
	/* A consumer that only takes batches: decoding is the bottleneck,
	 * so every CPU. */
	cr_assert_eq(r.tune.threads.value, cpus(), "%s", r.tune.threads.why);
	cr_assert(strstr(r.tune.threads.why, "decoding is the bottleneck"), "%s",
		  r.tune.threads.why);
	cr_assert(r.tune.io_depth.value >= 2 && r.tune.io_depth.value <= 32);
	cr_assert(strstr(r.tune.io_depth.why, "a read takes"), "%s", r.tune.io_depth.why);
	/* Prefetch stays 2 unless the consumer was seen to stall, which a
	 * loaded machine can make of a consumer that only takes batches (a
	 * descheduled test thread): then it is raised, and says so. */
	if (r.tune.prefetch.value != 2) {
		cr_assert(r.tune.prefetch.value > 2 &&
			  r.tune.prefetch.value <= PF_PREFETCH_AUTO_MAX, "%s", r.tune.prefetch.why);
		cr_assert(strstr(r.tune.prefetch.why, "the consumer stalls"), "%s",
			  r.tune.prefetch.why);
	}

	/* What the config names is kept, and said to be. */
	cr_assert_not(ref.tune.threads.automatic || ref.tune.io_depth.automatic ||
		      ref.tune.prefetch.automatic);
	cr_assert_eq(ref.tune.threads.value, 2);
	cr_assert_eq(ref.tune.io_depth.value, 32);
	cr_assert_eq(ref.tune.prefetch.value, 2);
	cr_assert_str_eq(ref.tune.threads.why, "set by the config");
	cr_assert_str_eq(ref.tune.io_depth.why, "set by the config");
	cr_assert_str_eq(ref.tune.prefetch.why, "set by the config");
}

static int slow_work(uint64_t i)
{
	(void)i;
	return 4;
}

Test(autotune, a_slow_consumer_leaves_cpus_to_itself, .timeout = 120)
{
	const char *d = dataset();
	pf_loader_config fixed = { .shuffle = true, .seed = 5, .threads = 1, .io_depth = 4,
				   .max_steps = 40 };
	pf_loader_config autocfg = { .shuffle = true, .seed = 5, .max_steps = 40 };
	consumer slow = { .work_ms = slow_work, .on_cpu = true };
	tuned_run ref, r;

	if (cpus() < 2)
		cr_skip_test("one CPU: there is no thread to leave to the consumer");
	run(d, &fixed, NULL, &ref);
	run(d, &autocfg, &slow, &r);
	cr_assert_eq(r.digest, ref.digest, "autotune changed the batches");
	/* 50 tiny records decode in microseconds; the consumer takes 4 ms. */
	cr_assert(r.tune.threads.measured);
	cr_assert_eq(r.tune.threads.value, 1, "%s", r.tune.threads.why);
	cr_assert(strstr(r.tune.threads.why, "keeps ahead of it"), "%s", r.tune.threads.why);
}

Test(autotune, slow_reads_get_more_reads_in_flight, .timeout = 120)
{
	const char *d = dataset();
	/* Every read waits 3 ms before it is issued; decoding a frame of
	 * ids takes far less, so the decoders need many reads under way. */
	pf_loader_config autocfg = { .threads = 1, .io_faults = "delay=3ms:1",
				     .max_steps = 100 };
	tuned_run r;

	run(d, &autocfg, NULL, &r);
	cr_assert(r.tune.io_depth.measured, "%s", r.tune.io_depth.why);
	cr_assert_gt(r.tune.io_depth.value, 4, "%s", r.tune.io_depth.why);
	cr_assert(strstr(r.tune.io_depth.why, "at most 32"), "%s", r.tune.io_depth.why);
}

/* A consumer that stalls 60 ms at batch 5 and asks at once otherwise. */
static int stall_work(uint64_t i)
{
	return i == 5 ? 60 : 0;
}

Test(autotune, a_stalling_consumer_gets_more_batches_ready, .timeout = 120)
{
	const char *d = dataset();
	/* Reads slowed so that the loader, not the consumer, sets the pace
	 * between stalls. */
	pf_loader_config autocfg = { .threads = 1, .io_depth = 1, .io_faults = "delay=2ms:1",
				     .max_steps = 60 };
	consumer stall = { .work_ms = stall_work };
	pf_loader_config fixed = autocfg;
	tuned_run ref, r;

	fixed.prefetch = 2;
	run(d, &fixed, &stall, &ref);
	cr_assert_eq(ref.tune.prefetch.value, 2);
	run(d, &autocfg, &stall, &r);
	cr_assert_eq(r.digest, ref.digest, "autotune changed the batches");
	cr_assert(r.tune.prefetch.measured);
	cr_assert_gt(r.tune.prefetch.value, 2, "%s", r.tune.prefetch.why);
	cr_assert_leq(r.tune.prefetch.value, PF_PREFETCH_AUTO_MAX);
	cr_assert(strstr(r.tune.prefetch.why, "stalls up to"), "%s", r.tune.prefetch.why);
}
