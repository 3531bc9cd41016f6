/* SPDX-License-Identifier: Apache-2.0 */
/* The scaling plan: the guidance's examples, steps and rounding, learning
 * rate rules and warm-up, epochs as the loader cuts them, bandwidth, every
 * impossible input, and `loadbench plan` end to end. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "plan_internal.h"
#include "pf_host.h"
#include "testutil.h"

static pf_scaling_plan plan_ok(const pf_scaling_input *in)
{
	pf_scaling_plan p;
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_scaling_plan_compute(&p, in, &err), 0, "%s", err.msg);
	cr_assert_eq(err.code, 0);
	return p;
}

static void plan_fails(const pf_scaling_input *in, int code, const char *says)
{
	pf_scaling_plan p;
	pf_error err;
	int ret;

	memset(&p, 0x5a, sizeof(p));
	pf_error_clear(&err);
	ret = pf_scaling_plan_compute(&p, in, &err);
	cr_assert_eq(ret, code, "ret %d, wanted %d (%s), says '%s'", ret, code, err.msg, says);
	cr_assert_eq(err.code, code);
	cr_assert(strstr(err.msg, says), "no '%s' in '%s'", says, err.msg);
	/* A failed plan leaves nothing that looks like a plan. */
	cr_assert_eq(p.global_batch, 0);
	cr_assert_eq(p.steps, 0);
	cr_assert(!p.has_lr && !p.has_bandwidth);
}

/* The guidance: "batch 1,024 on 8 cores becomes 4,096 on 32 cores". */
Test(plan, guidance_1024_on_8_cores_is_4096_on_32)
{
	pf_scaling_input one = { .per_core_batch = 128, .cores = 8, .hosts = 1 };
	pf_scaling_input four = { .per_core_batch = 128, .cores = 8, .hosts = 4,
				  .ref_global_batch = 1024, .ref_steps = 10000 };
	pf_scaling_plan p = plan_ok(&one);

	cr_assert_eq(p.mode, PF_SCALING_BATCH_ONLY);
	cr_assert_eq(p.global_batch, 1024);
	cr_assert_eq(p.total_cores, 8);
	cr_assert_eq(p.host_batch, 1024);
	p = plan_ok(&four);
	cr_assert_eq(p.mode, PF_SCALING_STEPS);
	cr_assert_eq(p.global_batch, 4096);
	cr_assert_eq(p.total_cores, 32);
	cr_assert_eq(p.host_batch, 1024);
	cr_assert_eq(p.ref_cores, 8);
	cr_assert_eq(p.batch_ratio, 4.0);
	cr_assert_eq(p.steps, 2500);
	cr_assert_eq(p.examples, 10240000);
	cr_assert_eq(p.ref_examples, 10240000);
	cr_assert_eq(p.extra_examples, 0);
	cr_assert(!p.steps_rounded);
	cr_assert_eq(p.steps_exact, 2500.0);
}

/* The guidance: "1,000 x 100 steps on one worker becomes 4,000 x 25 steps
 * on four". */
Test(plan, guidance_1000_x_100_is_4000_x_25)
{
	pf_scaling_input in = { .per_core_batch = 1000, .cores = 1, .hosts = 4,
				.ref_global_batch = 1000, .ref_steps = 100 };
	pf_scaling_plan p = plan_ok(&in);

	cr_assert_eq(p.global_batch, 4000);
	cr_assert_eq(p.steps, 25);
	cr_assert_eq(p.examples, 100000);
	cr_assert_eq(p.ref_examples, 100000);
	cr_assert_eq(p.extra_examples, 0);
	cr_assert_eq(p.ref_cores, 1);
	cr_assert(!p.steps_rounded);
	/* and back down: 4,000 x 25 on four is 1,000 x 100 on one */
	in = (pf_scaling_input){ .per_core_batch = 1000, .cores = 1, .hosts = 1,
				 .ref_global_batch = 4000, .ref_steps = 25 };
	p = plan_ok(&in);
	cr_assert_eq(p.steps, 100);
	cr_assert_eq(p.examples, 100000);
	cr_assert_eq(p.batch_ratio, 0.25);
	cr_assert_eq(p.ref_cores, 4);
}

Test(plan, steps_that_do_not_divide_are_rounded_up)
{
	/* 1,000 x 100 at B = 3,000: 33.3 steps -> 34, 2,000 examples more */
	pf_scaling_input in = { .per_core_batch = 1000, .cores = 1, .hosts = 3,
				.ref_global_batch = 1000, .ref_steps = 100 };
	pf_scaling_plan p = plan_ok(&in);

	cr_assert_eq(p.global_batch, 3000);
	cr_assert(p.steps_rounded);
	cr_assert_eq(p.steps, 34);
	cr_assert_float_eq(p.steps_exact, 100000.0 / 3000.0, 1e-12);
	cr_assert_eq(p.examples, 102000);
	cr_assert_eq(p.extra_examples, 2000);
	/* never fewer examples than the reference, at most one batch more */
	for (uint64_t b = 1; b <= 50; b++)
		for (uint64_t h = 1; h <= 7; h++) {
			in = (pf_scaling_input){ .per_core_batch = b, .cores = 3, .hosts = h,
						 .ref_global_batch = 96, .ref_steps = 41 };
			p = plan_ok(&in);
			cr_assert_geq(p.examples, 96 * 41);
			cr_assert_lt(p.examples - 96 * 41, p.global_batch);
			cr_assert_eq(p.examples, p.steps * p.global_batch);
			cr_assert_eq(p.steps_rounded, (96 * 41) % p.global_batch != 0);
			cr_assert_eq(p.ref_cores, 96 % b ? 0 : 96 / b);
		}
}

Test(plan, learning_rate_rules)
{
	pf_scaling_input in = { .per_core_batch = 128, .cores = 8, .hosts = 4,
				.ref_global_batch = 1024, .ref_steps = 1000,
				.ref_lr = 0.1, .rule = PF_LR_NONE };
	pf_scaling_plan p = plan_ok(&in);

	cr_assert(p.has_lr);
	cr_assert_eq(p.lr, 0.1);
	cr_assert_eq(p.lr_by_rule[PF_LR_NONE], 0.1);
	cr_assert_float_eq(p.lr_by_rule[PF_LR_LINEAR], 0.4, 1e-15);
	cr_assert_float_eq(p.lr_by_rule[PF_LR_SQRT], 0.2, 1e-15);
	in.rule = PF_LR_LINEAR;
	p = plan_ok(&in);
	cr_assert_float_eq(p.lr, 0.4, 1e-15);
	cr_assert_eq(p.rule, PF_LR_LINEAR);
	in.rule = PF_LR_SQRT;
	p = plan_ok(&in);
	cr_assert_float_eq(p.lr, 0.2, 1e-15);
	/* a ratio that is not a square: 3x */
	in = (pf_scaling_input){ .per_core_batch = 1000, .cores = 1, .hosts = 3,
				 .ref_global_batch = 1000, .ref_lr = 0.05,
				 .rule = PF_LR_SQRT };
	p = plan_ok(&in);
	cr_assert_float_eq(p.lr, 0.05 * sqrt(3.0), 1e-15);
	cr_assert_float_eq(p.lr_by_rule[PF_LR_LINEAR], 0.15, 1e-15);
	/* scaling down shrinks the rate */
	in = (pf_scaling_input){ .per_core_batch = 250, .cores = 1, .hosts = 1,
				 .ref_global_batch = 1000, .ref_lr = 0.8,
				 .rule = PF_LR_LINEAR };
	p = plan_ok(&in);
	cr_assert_float_eq(p.lr, 0.2, 1e-15);
	/* rule none needs no reference batch */
	in = (pf_scaling_input){ .per_core_batch = 8, .cores = 1, .hosts = 1, .ref_lr = 0.3 };
	p = plan_ok(&in);
	cr_assert_eq(p.lr, 0.3);
	cr_assert_eq(p.lr_by_rule[PF_LR_LINEAR], 0.0);
	/* no rate given: none reported */
	in.ref_lr = 0;
	p = plan_ok(&in);
	cr_assert(!p.has_lr);
	cr_assert_eq(pf_scaling_lr_at(&p, 0), 0.0);
}

Test(plan, rule_names)
{
	pf_lr_rule r = PF_LR_SQRT;

	cr_assert_eq(pf_lr_rule_parse("none", &r), 0);
	cr_assert_eq(r, PF_LR_NONE);
	cr_assert_eq(pf_lr_rule_parse("linear", &r), 0);
	cr_assert_eq(r, PF_LR_LINEAR);
	cr_assert_eq(pf_lr_rule_parse("sqrt", &r), 0);
	cr_assert_eq(r, PF_LR_SQRT);
	const char *bad[] = { "", "Linear", "linear ", "cubic", "lin", NULL };
	for (size_t i = 0; bad[i]; i++) {
		cr_assert_eq(pf_lr_rule_parse(bad[i], &r), -EINVAL, "%s", bad[i]);
		cr_assert_eq(r, PF_LR_SQRT);
	}
	cr_assert_eq(pf_lr_rule_parse(NULL, &r), -EINVAL);
	for (unsigned i = 0; i < PF_LR_RULES; i++) {
		cr_assert_eq(pf_lr_rule_parse(pf_lr_rule_name((pf_lr_rule)i), &r), 0);
		cr_assert_eq((unsigned)r, i);
	}
	cr_assert_str_eq(pf_lr_rule_name((pf_lr_rule)7), "unknown");
}

Test(plan, warmup_keeps_its_examples)
{
	/* 400 warm-up steps of 1,000 = 100 steps of 4,000 */
	pf_scaling_input in = { .per_core_batch = 1000, .cores = 1, .hosts = 4,
				.ref_global_batch = 1000, .ref_steps = 2000,
				.ref_lr = 0.1, .rule = PF_LR_LINEAR,
				.ref_warmup_steps = 400 };
	pf_scaling_plan p = plan_ok(&in);

	cr_assert_eq(p.warmup_steps, 100);
	cr_assert(!p.warmup_rounded);
	/* the ramp: lr/W at step 0, lr at W-1 and after */
	cr_assert_float_eq(pf_scaling_lr_at(&p, 0), 0.4 / 100, 1e-15);
	cr_assert_float_eq(pf_scaling_lr_at(&p, 49), 0.4 * 50 / 100, 1e-15);
	cr_assert_float_eq(pf_scaling_lr_at(&p, 99), 0.4, 1e-15);
	cr_assert_float_eq(pf_scaling_lr_at(&p, 100), 0.4, 1e-15);
	cr_assert_float_eq(pf_scaling_lr_at(&p, UINT64_MAX), 0.4, 1e-15);
	for (uint64_t s = 1; s < 100; s++)
		cr_assert_gt(pf_scaling_lr_at(&p, s), pf_scaling_lr_at(&p, s - 1));
	/* 5 steps of 1,000 at 3,000: 1.67 -> 2, rounded */
	in.hosts = 3;
	in.ref_warmup_steps = 5;
	p = plan_ok(&in);
	cr_assert_eq(p.warmup_steps, 2);
	cr_assert(p.warmup_rounded);
	/* no warm-up: the full rate from step 0 */
	in.ref_warmup_steps = 0;
	p = plan_ok(&in);
	cr_assert_eq(p.warmup_steps, 0);
	cr_assert_float_eq(pf_scaling_lr_at(&p, 0), 0.3, 1e-15);
	/* without a reference batch the warm-up is taken as is */
	in = (pf_scaling_input){ .per_core_batch = 10, .cores = 2, .hosts = 2,
				 .records = 1000, .ref_lr = 1.0, .ref_warmup_steps = 7 };
	p = plan_ok(&in);
	cr_assert_eq(p.warmup_steps, 7);
	cr_assert_float_eq(pf_scaling_lr_at(&p, 6), 1.0, 1e-15);
	cr_assert_float_eq(pf_scaling_lr_at(&p, 0), 1.0 / 7, 1e-15);
	/* the warm-up as long as the run is fine; longer is not */
	in.ref_warmup_steps = 25;
	cr_assert_eq(plan_ok(&in).warmup_steps, 25);
	in.ref_warmup_steps = 26;
	plan_fails(&in, -EINVAL, "the warm-up (26 reference steps, 26 in the plan) is "
				 "longer than the 25 train steps");
	in = (pf_scaling_input){ .per_core_batch = 1000, .cores = 1, .hosts = 4,
				 .ref_global_batch = 1000, .ref_steps = 100,
				 .ref_warmup_steps = 101 };
	plan_fails(&in, -EINVAL, "is longer than the 25 train steps");
}

Test(plan, epochs_as_the_loader_cuts_them)
{
	/* 10,000 records at B = 64: 156 steps an epoch, 16 dropped */
	pf_scaling_input in = { .per_core_batch = 32, .cores = 2, .hosts = 1,
				.records = 10000, .epochs = 3 };
	pf_scaling_plan p = plan_ok(&in);

	cr_assert_eq(p.mode, PF_SCALING_EPOCHS);
	cr_assert_eq(p.steps_per_epoch, 156);
	cr_assert_eq(p.dropped_per_epoch, 16);
	cr_assert_eq(p.steps, 468);
	cr_assert_eq(p.examples, 468 * 64);
	cr_assert_eq(p.dropped, 48);
	cr_assert_eq(p.repeated, 0);
	/* wrap: 157 steps, the last one 48 records short, refilled */
	in.remainder_wrap = true;
	p = plan_ok(&in);
	cr_assert_eq(p.steps_per_epoch, 157);
	cr_assert_eq(p.repeated_per_epoch, 48);
	cr_assert_eq(p.repeated, 144);
	cr_assert_eq(p.dropped, 0);
	/* E omitted is one epoch */
	in = (pf_scaling_input){ .per_core_batch = 32, .cores = 2, .hosts = 1,
				 .records = 10000 };
	cr_assert_eq(plan_ok(&in).steps, 156);
	/* exactly divisible: nothing dropped or repeated */
	in.records = 6400;
	p = plan_ok(&in);
	cr_assert_eq(p.dropped, 0);
	in.remainder_wrap = true;
	p = plan_ok(&in);
	cr_assert_eq(p.steps, 100);
	cr_assert_eq(p.repeated, 0);
	/* fewer records than a global batch: one short step with wrap, none
	 * (an error) with drop */
	in.records = 50;
	p = plan_ok(&in);
	cr_assert_eq(p.steps, 1);
	cr_assert_eq(p.repeated, 14);
	in.remainder_wrap = false;
	plan_fails(&in, -EINVAL, "50 records do not fill one global batch of 64");
}

/* The plan and the loader's own step count (loader/plan.c) agree on a
 * grid of dataset sizes and topologies. */
Test(plan, epochs_match_pf_plan_steps)
{
	for (uint64_t n = 1; n <= 400; n += 13)
		for (uint32_t b = 1; b <= 9; b += 2)
			for (uint32_t c = 1; c <= 3; c++)
				for (uint32_t h = 1; h <= 4; h++)
					for (int wrap = 0; wrap < 2; wrap++) {
						pf_topology t = { .host_index = 0, .num_hosts = h,
								  .cores = c, .per_core_batch = b };
						uint64_t want = pf_plan_steps(n, &t, wrap ? PF_REMAINDER_WRAP
											  : PF_REMAINDER_DROP);
						pf_scaling_input in = { .per_core_batch = b, .cores = c,
									.hosts = h, .records = n,
									.epochs = 2,
									.remainder_wrap = wrap };
						pf_scaling_plan p;
						pf_error err;
						int ret = pf_scaling_plan_compute(&p, &in, &err);

						if (!want) {
							cr_assert_eq(ret, -EINVAL);
							continue;
						}
						cr_assert_eq(pf_steps_per_epoch(n, (uint64_t)b * c * h,
										wrap ? PF_REMAINDER_WRAP
										     : PF_REMAINDER_DROP), want);
						cr_assert_eq(ret, 0, "%s", err.msg);
						cr_assert_eq(p.steps_per_epoch, want);
						cr_assert_eq(p.steps, 2 * want);
						cr_assert_eq(p.examples + p.dropped - p.repeated, 2 * n);
					}
}

/* The rule at its edges: no overflow near 2^64, 0 for no batch. */
Test(plan, steps_rule_edges)
{
	cr_assert_eq(pf_steps_per_epoch(UINT64_MAX, 2, PF_REMAINDER_WRAP), (UINT64_MAX >> 1) + 1);
	cr_assert_eq(pf_steps_per_epoch(UINT64_MAX, 2, PF_REMAINDER_DROP), UINT64_MAX >> 1);
	cr_assert_eq(pf_steps_per_epoch(UINT64_MAX, UINT64_MAX, PF_REMAINDER_WRAP), 1);
	cr_assert_eq(pf_steps_per_epoch(5, 0, PF_REMAINDER_WRAP), 0);
	cr_assert_eq(pf_steps_per_epoch(0, 8, PF_REMAINDER_WRAP), 0);
	cr_assert_eq(pf_steps_per_epoch(7, 8, PF_REMAINDER_DROP), 0);
	cr_assert_eq(pf_steps_per_epoch(7, 8, PF_REMAINDER_WRAP), 1);
}

Test(plan, bandwidth_arithmetic)
{
	/* 4 hosts x 8 cores x 128 every 250 ms: 4,096 records/s a host;
	 * 2,500 bytes each: 10.24 MB/s a host, 40.96 MB/s the pod */
	pf_scaling_input in = { .per_core_batch = 128, .cores = 8, .hosts = 4,
				.step_time_ms = 250, .record_bytes = 2500,
				.measured_host_bytes_per_s = 20.48e6 };
	pf_scaling_plan p = plan_ok(&in);

	cr_assert(p.has_bandwidth);
	cr_assert_float_eq(p.host_records_per_s, 4096.0, 1e-9);
	cr_assert_float_eq(p.pod_records_per_s, 16384.0, 1e-9);
	cr_assert_float_eq(p.host_bytes_per_s, 10.24e6, 1e-3);
	cr_assert_float_eq(p.pod_bytes_per_s, 40.96e6, 1e-3);
	cr_assert_float_eq(p.measured_ratio, 2.0, 1e-12);
	/* fractional record sizes and step times */
	in = (pf_scaling_input){ .per_core_batch = 3, .cores = 1, .hosts = 1,
				 .step_time_ms = 0.5, .record_bytes = 10.5 };
	p = plan_ok(&in);
	cr_assert_float_eq(p.host_records_per_s, 6000.0, 1e-9);
	cr_assert_float_eq(p.host_bytes_per_s, 63000.0, 1e-6);
	cr_assert_eq(p.measured_ratio, 0.0);
	/* none asked, none given */
	in.step_time_ms = in.record_bytes = 0;
	cr_assert(!plan_ok(&in).has_bandwidth);
}

Test(plan, impossible_inputs)
{
	const pf_scaling_input base = { .per_core_batch = 8, .cores = 2, .hosts = 2 };
	pf_scaling_input in;

#define CASE(field, value, code, says)                                       \
	do {                                                                 \
		in = base;                                                   \
		in.field = value;                                            \
		plan_fails(&in, code, says);                                 \
	} while (0)

	CASE(per_core_batch, 0, -EINVAL, "per-core batch is 0");
	CASE(cores, 0, -EINVAL, "cores is 0");
	CASE(hosts, 0, -EINVAL, "hosts is 0");
	CASE(ref_steps, 10, -EINVAL, "reference steps need the reference global batch");
	CASE(epochs, 2, -EINVAL, "epochs need the record count");
	CASE(rule, (pf_lr_rule)3, -EINVAL, "unknown learning-rate rule");
	CASE(rule, PF_LR_LINEAR, -EINVAL, "the linear rule scales a reference learning rate");
	CASE(ref_lr, -0.1, -EINVAL, "reference learning rate must be a finite number above 0");
	CASE(ref_lr, NAN, -EINVAL, "reference learning rate");
	CASE(ref_lr, INFINITY, -EINVAL, "reference learning rate");
	CASE(step_time_ms, -1, -EINVAL, "step time must be");
	CASE(step_time_ms, NAN, -EINVAL, "step time must be");
	CASE(step_time_ms, 100, -EINVAL, "needs both the step time and the record size");
	CASE(record_bytes, 100, -EINVAL, "needs both the step time and the record size");
	CASE(record_bytes, INFINITY, -EINVAL, "record size must be");
	CASE(measured_host_bytes_per_s, -5, -EINVAL, "measured bandwidth must be");
	CASE(measured_host_bytes_per_s, 1e6, -EINVAL, "give the step time and the record size");
	/* rules that need what is missing */
	in = base;
	in.rule = PF_LR_SQRT;
	in.ref_lr = 0.1;
	plan_fails(&in, -EINVAL, "the sqrt rule scales a reference learning rate");
	in.ref_lr = 0;
	in.ref_global_batch = 16;
	plan_fails(&in, -EINVAL, "it needs the reference learning rate and global batch");
	/* two schedules at once */
	in = base;
	in.ref_global_batch = 16;
	in.ref_steps = 10;
	in.records = 1000;
	plan_fails(&in, -EINVAL, "give reference steps or an epoch schedule");
#undef CASE
}

Test(plan, overflow)
{
	pf_scaling_input in = { .per_core_batch = 1ull << 32, .cores = 1ull << 32, .hosts = 1 };

	plan_fails(&in, -EOVERFLOW, "the host batch, per-core batch x cores (4294967296 x "
				    "4294967296) does not fit in 64 bits");
	in = (pf_scaling_input){ .per_core_batch = 1ull << 32, .cores = 1ull << 31,
				 .hosts = 2 };
	plan_fails(&in, -EOVERFLOW, "the global batch, host batch x hosts");
	in = (pf_scaling_input){ .per_core_batch = 1, .cores = 1ull << 32,
				 .hosts = 1ull << 32 };
	plan_fails(&in, -EOVERFLOW, "the global batch, host batch x hosts (4294967296 x "
				    "4294967296)");
	in = (pf_scaling_input){ .per_core_batch = 1, .cores = 1, .hosts = 1,
				 .ref_global_batch = 1ull << 40, .ref_steps = 1ull << 30 };
	plan_fails(&in, -EOVERFLOW, "the reference examples, steps x global batch");
	/* S0 x B0 fits, but rounding up to whole steps passes 2^64 */
	in = (pf_scaling_input){ .per_core_batch = 2, .cores = 1, .hosts = 1,
				 .ref_global_batch = 1, .ref_steps = UINT64_MAX };
	plan_fails(&in, -EOVERFLOW, "the examples, 9223372036854775808 steps x 2");
	/* the largest that fits */
	in.ref_steps = UINT64_MAX - 1;
	pf_scaling_plan p = plan_ok(&in);
	cr_assert_eq(p.steps, (UINT64_MAX - 1) / 2);
	cr_assert_eq(p.examples, UINT64_MAX - 1);
	/* epochs x steps, and examples */
	in = (pf_scaling_input){ .per_core_batch = 1, .cores = 1, .hosts = 1,
				 .records = 1ull << 40, .epochs = 1ull << 30 };
	plan_fails(&in, -EOVERFLOW, "the train steps, steps per epoch x epochs");
	in = (pf_scaling_input){ .per_core_batch = 1ull << 20, .cores = 1, .hosts = 1,
				 .records = 1ull << 60, .epochs = 1ull << 20 };
	plan_fails(&in, -EOVERFLOW, "the examples, steps x global batch");
	/* a bandwidth past double's range */
	in = (pf_scaling_input){ .per_core_batch = 1ull << 40, .cores = 1ull << 20,
				 .hosts = 1, .step_time_ms = 1e-300, .record_bytes = 1e300 };
	plan_fails(&in, -EOVERFLOW, "the pod's input bandwidth");
}

/* ------------------------------------------------------------------ */
/* loadbench plan, end to end                                           */

/* Run `loadbench ARGS` with stdout (and stderr when both) into out.
 * @return the exit status. */
static int run(const char *args, bool both, char *out, size_t cap)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), "%s %s%s", tu_env_tool("LOADBENCH"), args,
		 both ? " 2>&1" : " 2>/dev/null");
	return WEXITSTATUS(tu_capture(cmd, out, cap, NULL));
}

static json_t *run_json(const char *args)
{
	char out[1 << 14], full[1024];
	json_error_t jerr;
	json_t *o;

	snprintf(full, sizeof(full), "plan --json %s", args);
	cr_assert_eq(run(full, false, out, sizeof(out)), 0, "%s: %s", full, out);
	o = json_loads(out, 0, &jerr);
	cr_assert_not_null(o, "%s: %s", jerr.text, out);
	return o;
}

static uint64_t ju(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	cr_assert(json_is_integer(v), "%s is not an integer", key);
	return (uint64_t)json_integer_value(v);
}

static double jd(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	cr_assert(json_is_number(v), "%s is not a number", key);
	return json_number_value(v);
}

Test(loadbench_plan, the_guidance_examples)
{
	json_t *o = run_json("--per-core-batch 128 --cores 8 --hosts 4 "
			     "--ref-global-batch 1024 --ref-steps 10000 --ref-lr 0.1 "
			     "--rule linear --warmup-steps 500");
	json_t *ref = json_object_get(o, "reference");

	cr_assert_eq(ju(o, "global_batch"), 4096);
	cr_assert_eq(ju(o, "cores_total"), 32);
	cr_assert_eq(ju(ref, "global_batch"), 1024);
	cr_assert_eq(ju(ref, "cores_total"), 8);
	cr_assert_eq(ju(o, "steps"), 2500);
	cr_assert_eq(ju(o, "examples"), 10240000);
	cr_assert_eq(ju(ref, "examples"), 10240000);
	cr_assert_str_eq(json_string_value(json_object_get(o, "steps_rounding")), "none");
	json_t *lr = json_object_get(o, "lr");
	cr_assert_str_eq(json_string_value(json_object_get(lr, "rule")), "linear");
	cr_assert_float_eq(jd(lr, "value"), 0.4, 1e-9);
	cr_assert_float_eq(jd(json_object_get(lr, "by_rule"), "sqrt"), 0.2, 1e-9);
	cr_assert_eq(ju(o, "warmup_steps"), 125);
	json_decref(o);

	o = run_json("--per-core-batch 1000 --hosts 4 --ref-global-batch 1000 --ref-steps 100");
	cr_assert_eq(ju(o, "global_batch"), 4000);
	cr_assert_eq(ju(o, "steps"), 25);
	cr_assert_eq(ju(o, "examples"), 100000);
	cr_assert_eq(ju(o, "extra_examples"), 0);
	cr_assert_null(json_object_get(o, "lr"));
	json_decref(o);

	/* the text table says the same */
	char out[8192];
	cr_assert_eq(run("plan --per-core-batch 1000 --hosts 4 --ref-global-batch 1000 "
			 "--ref-steps 100", false, out, sizeof(out)), 0);
	cr_assert(strstr(out, "global batch                  1,000          4,000   x4\n"), "%s", out);
	cr_assert(strstr(out, "train steps                     100             25\n"), "%s", out);
	cr_assert(strstr(out, "examples                    100,000        100,000   the same\n"), "%s", out);
}

Test(loadbench_plan, rounding_epochs_and_bandwidth)
{
	json_t *o = run_json("--per-core-batch 1000 --hosts 3 --ref-global-batch 1000 "
			     "--ref-steps 100 --ref-lr 0.1 --rule sqrt --warmup-steps 5");

	cr_assert_eq(ju(o, "steps"), 34);
	cr_assert_eq(ju(o, "extra_examples"), 2000);
	cr_assert_str_eq(json_string_value(json_object_get(o, "steps_rounding")), "up");
	cr_assert_float_eq(jd(o, "steps_exact"), 100.0 / 3, 1e-6);
	cr_assert_float_eq(jd(json_object_get(o, "lr"), "value"), 0.1 * sqrt(3.0), 1e-8);
	cr_assert_eq(ju(o, "warmup_steps"), 2);
	cr_assert(json_is_true(json_object_get(o, "warmup_rounded")));
	json_decref(o);

	o = run_json("--per-core-batch 32 --cores 2 --records 10000 --epochs 3 "
		     "--step-time-ms 250 --record-bytes 2500 --measured-mbps 0.32");
	json_t *e = json_object_get(o, "epochs");
	cr_assert_str_eq(json_string_value(json_object_get(o, "mode")), "epochs");
	cr_assert_eq(ju(e, "steps_per_epoch"), 156);
	cr_assert_eq(ju(e, "dropped_per_epoch"), 16);
	cr_assert_eq(ju(e, "dropped"), 48);
	cr_assert_eq(ju(o, "steps"), 468);
	json_t *bw = json_object_get(o, "bandwidth");
	cr_assert_float_eq(jd(bw, "host_records_per_s"), 256, 1e-9);
	cr_assert_float_eq(jd(bw, "host_mb_per_s"), 0.64, 1e-9);
	cr_assert_float_eq(jd(bw, "pod_mb_per_s"), 0.64, 1e-9);
	cr_assert_float_eq(jd(bw, "measured_mb_per_s"), 0.32, 1e-9);
	cr_assert_float_eq(jd(bw, "measured_ratio"), 0.5, 1e-9);
	json_decref(o);

	o = run_json("--per-core-batch 32 --cores 2 --records 10000 --remainder wrap");
	e = json_object_get(o, "epochs");
	cr_assert_eq(ju(e, "steps_per_epoch"), 157);
	cr_assert_eq(ju(e, "repeated_per_epoch"), 48);
	cr_assert_str_eq(json_string_value(json_object_get(e, "remainder")), "wrap");
	json_decref(o);

	char out[8192];
	cr_assert_eq(run("plan --per-core-batch 1000 --hosts 3 --ref-global-batch 1000 "
			 "--ref-steps 100", false, out, sizeof(out)), 0);
	cr_assert(strstr(out, "rounded up to 34"), "%s", out);
	cr_assert(strstr(out, "2,000 examples (2.00%) more than the reference; "
			      "33 steps would train 1,000 fewer"), "%s", out);
	cr_assert_eq(run("plan --per-core-batch 32 --cores 2 --hosts 4 --step-time-ms 100 "
			 "--record-bytes 1000 --measured-mbps 0.5", false, out, sizeof(out)), 0);
	cr_assert(strstr(out, "per host                        640           0.64   "
			      "measured 0.50 MB/s: 0.78x the need (input-bound)"), "%s", out);
	const char *pod = strstr(out, "\npod ");
	double rps = 0, mbps = 0;
	cr_assert_not_null(pod, "%s", out);
	cr_assert_eq(sscanf(pod, " pod %lf %lf", &rps, &mbps), 2, "%s", out);
	cr_assert_eq(rps, 2560);
	cr_assert_eq(mbps, 2.56);
}

/* The plan's epoch arithmetic against a real loader run over a dataset of
 * 1,000 records at a global batch of 42 on each of 3 hosts. */
Test(loadbench_plan, epochs_match_a_loader_run, .timeout = 120)
{
	const char *d = tu_tmpdir(), *st = tu_env_tool("SHARDTOOL");
	char args[1024], out[1 << 16];
	uint64_t dropped = 0;

	cr_assert_eq(tu_system("%s synth --kind tokens --records 1000 --shards 3 --out %s/raw "
			       ">/dev/null && %s convert --shards 3 --out %s/z %s/raw >/dev/null",
			       st, d, st, d, d), 0);
	json_t *plan = run_json("--per-core-batch 7 --cores 2 --hosts 3 --records 1000 --epochs 2");
	json_t *e = json_object_get(plan, "epochs");
	cr_assert_eq(ju(e, "steps_per_epoch"), 23);
	for (int h = 0; h < 3; h++) {
		json_error_t jerr;

		snprintf(args, sizeof(args), "--json --quiet --per-core-batch 7 --cores 2 "
			 "--num-hosts 3 --host-index %d --epochs 2 --threads 1 %s/z", h, d);
		cr_assert_eq(run(args, false, out, sizeof(out)), 0, "%s", out);
		json_t *o = json_loads(out, 0, &jerr);
		cr_assert_not_null(o, "%s", jerr.text);
		cr_assert_eq(ju(o, "steps"), ju(plan, "steps"));
		dropped += ju(o, "remainder_dropped");
		json_decref(o);
	}
	/* the hosts together drop what the plan says the pod drops */
	cr_assert_eq(dropped, ju(e, "dropped"));
	json_decref(plan);
}

Test(loadbench_plan, bad_flags)
{
	static const struct { const char *args; const char *says; } cases[] = {
		{ "", "--per-core-batch is required" },
		{ "--per-core-batch abc", "--per-core-batch: 'abc' is not a whole number" },
		{ "--per-core-batch 0", "per-core batch is 0" },
		{ "--per-core-batch 8 --cores 0", "cores is 0: a host has at least one core" },
		{ "--per-core-batch 8 --hosts 0", "hosts is 0" },
		{ "--per-core-batch 8 --hosts -1", "--hosts: '-1' is not a whole number" },
		{ "--per-core-batch 8 --cores 99999999999999999999", "--cores: '99999999999999999999' is too large" },
		{ "--per-core-batch 8 --ref-global-batch 0", "--ref-global-batch: '0' is out of range" },
		{ "--per-core-batch 8 --ref-steps 10", "reference steps need the reference global batch" },
		{ "--per-core-batch 8 --ref-global-batch 8 --ref-steps 10 --records 100",
		  "give reference steps or an epoch schedule" },
		{ "--per-core-batch 8 --epochs 2", "epochs need the record count" },
		{ "--per-core-batch 8 --records 7", "7 records do not fill one global batch of 8" },
		{ "--per-core-batch 8 --rule cubic", "--rule: 'cubic' is not none, linear or sqrt" },
		{ "--per-core-batch 8 --rule linear --ref-lr 0.1",
		  "the linear rule scales a reference learning rate" },
		{ "--per-core-batch 8 --ref-lr abc", "--ref-lr: 'abc' is not a number" },
		{ "--per-core-batch 8 --ref-lr 0.1x", "--ref-lr: '0.1x' is not a number" },
		{ "--per-core-batch 8 --ref-lr ''", "--ref-lr: '' is not a number" },
		{ "--per-core-batch 8 --ref-lr -1", "--ref-lr: '-1' is not a finite number above 0" },
		{ "--per-core-batch 8 --ref-lr 0", "--ref-lr: '0' is not a finite number above 0" },
		{ "--per-core-batch 8 --ref-lr nan", "--ref-lr: 'nan' is not a finite number" },
		{ "--per-core-batch 8 --ref-lr inf", "--ref-lr: 'inf' is not a finite number" },
		{ "--per-core-batch 8 --ref-lr 1e999", "--ref-lr: '1e999' is not a finite number" },
		{ "--per-core-batch 8 --step-time-ms 100", "needs both the step time and the record size" },
		{ "--per-core-batch 8 --record-bytes 0", "--record-bytes: '0' is not a finite number above 0" },
		{ "--per-core-batch 8 --measured-mbps 300", "give the step time and the record size" },
		{ "--per-core-batch 8 --remainder keep", "--remainder: 'keep' is not drop or wrap" },
		{ "--per-core-batch 8 --warmup-steps x", "--warmup-steps: 'x'" },
		{ "--per-core-batch 8 --records 80 --warmup-steps 11",
		  "is longer than the 10 train steps" },
		{ "--per-core-batch 4294967296 --cores 4294967296", "does not fit in 64 bits" },
		{ "--per-core-batch 8 --frobnicate", "unknown option '--frobnicate'" },
		{ "--per-core-batch", "--per-core-batch: a value is required" },
		{ "--per-core-batch 8 extra", "unexpected argument 'extra'" },
	};
	/* out holds the whole of `loadbench --help` (8.2 KB): a shorter read
	 * leaves loadbench writing to a closed pipe (SIGPIPE, not exit 0). */
	char args[1024], out[1 << 14];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(args, sizeof(args), "plan %s", cases[i].args);
		int status = run(args, true, out, sizeof(out));
		cr_assert_eq(status, 2, "%s -> %d: %s", args, status, out);
		cr_assert(strstr(out, cases[i].says), "%s -> %s", args, out);
		cr_assert(strstr(out, "loadbench plan: "), "%s -> %s", args, out);
	}
	cr_assert_eq(run("plan --help", false, out, sizeof(out)), 0);
	cr_assert(strstr(out, "usage: loadbench plan"), "%s", out);
	cr_assert(strstr(out, "--measured-mbps"), "%s", out);
	/* and the main usage points at it */
	cr_assert_eq(run("--help", false, out, sizeof(out)), 0);
	cr_assert(strstr(out, "loadbench plan|ladder|regions [options]"), "%s", out);
}
