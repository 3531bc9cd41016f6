/* SPDX-License-Identifier: Apache-2.0 */
/* The scaling plan: global batch, train steps, examples, learning rate and
 * warm-up, remainders, and the input bandwidth a pod needs, as a pure
 * function of the per-core batch, the topology and a reference run or an
 * epoch schedule (the rules are in pf_host.h). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "pf_host.h"
#include "podfeed.h"

/* 128 bits hold every product of two 64-bit counts exactly. */
__extension__ typedef unsigned __int128 u128;

static const char *const rule_names[PF_LR_RULES] = {
	[PF_LR_NONE] = "none",
	[PF_LR_LINEAR] = "linear",
	[PF_LR_SQRT] = "sqrt",
};

int pf_lr_rule_parse(const char *name, pf_lr_rule *rule)
{
	for (unsigned i = 0; i < PF_LR_RULES; i++)
		if (name && !strcmp(name, rule_names[i])) {
			*rule = (pf_lr_rule)i;
			return 0;
		}
	return -EINVAL;
}

const char *pf_lr_rule_name(pf_lr_rule rule)
{
	return (unsigned)rule < PF_LR_RULES ? rule_names[rule] : "unknown";
}

static int invalid(pf_error *err, const char *what)
{
	return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "scaling plan: %s", what);
}

/* a x b into *out, or -EOVERFLOW naming what. */
static int mul_u64(uint64_t a, uint64_t b, uint64_t *out, const char *what,
		   pf_error *err)
{
	u128 p = (u128)a * b;

	if (p > UINT64_MAX)
		return pf_error_set(err, -EOVERFLOW, PF_OFFSET_NONE, 0,
				    "scaling plan: %s (%llu x %llu) does not fit in 64 bits",
				    what, (unsigned long long)a, (unsigned long long)b);
	*out = (uint64_t)p;
	return 0;
}

static uint64_t div_up(u128 a, uint64_t b)
{
	return (uint64_t)((a + b - 1) / b);
}

/* A rate, time or size that is optional: 0 is "not given"; otherwise it
 * must be a finite positive number. */
static bool bad_optional(double v)
{
	return !(v == 0.0 || (isfinite(v) && v > 0.0));
}

static int check_inputs(const pf_scaling_input *in, pf_error *err)
{
	if (!in->per_core_batch)
		return invalid(err, "per-core batch is 0: a core takes at least one record a step");
	if (!in->cores)
		return invalid(err, "cores is 0: a host has at least one core");
	if (!in->hosts)
		return invalid(err, "hosts is 0: a pod has at least one host");
	if (in->ref_steps && !in->ref_global_batch)
		return invalid(err, "reference steps need the reference global batch "
			       "(the steps keep steps x global batch examples)");
	if (in->ref_steps && (in->records || in->epochs))
		return invalid(err, "give reference steps or an epoch schedule "
			       "(records, epochs), not both");
	if (in->epochs && !in->records)
		return invalid(err, "epochs need the record count of the dataset");
	if ((unsigned)in->rule >= PF_LR_RULES)
		return invalid(err, "unknown learning-rate rule");
	if (bad_optional(in->ref_lr))
		return invalid(err, "the reference learning rate must be a finite number above 0");
	if (in->rule != PF_LR_NONE && (!in->ref_lr || !in->ref_global_batch))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "scaling plan: the %s rule scales a reference learning "
				    "rate by the batch ratio: it needs the reference "
				    "learning rate and global batch",
				    rule_names[in->rule]);
	if (bad_optional(in->step_time_ms))
		return invalid(err, "the step time must be a finite number of ms above 0");
	if (bad_optional(in->record_bytes))
		return invalid(err, "the record size must be a finite number of bytes above 0");
	if (bad_optional(in->measured_host_bytes_per_s))
		return invalid(err, "the measured bandwidth must be a finite number above 0");
	if ((in->step_time_ms > 0) != (in->record_bytes > 0))
		return invalid(err, "the input bandwidth needs both the step time and "
			       "the record size");
	if (in->measured_host_bytes_per_s > 0 && !(in->step_time_ms > 0))
		return invalid(err, "a measured bandwidth is compared with the need: "
			       "give the step time and the record size too");
	return 0;
}

/* From a reference run: keep S0 x B0 examples, steps rounded up. */
static int plan_steps(pf_scaling_plan *p, const pf_scaling_input *in,
		      pf_error *err)
{
	uint64_t B = p->global_batch;
	u128 examples;
	int ret;

	ret = mul_u64(in->ref_steps, in->ref_global_batch, &p->ref_examples,
		      "the reference examples, steps x global batch", err);
	if (ret < 0)
		return ret;
	p->steps = div_up(p->ref_examples, B);
	p->steps_exact = (double)p->ref_examples / (double)B;
	p->steps_rounded = p->ref_examples % B != 0;
	/* At most ref_examples + B - 1, which may still pass 2^64. */
	examples = (u128)p->steps * B;
	if (examples > UINT64_MAX)
		return pf_error_set(err, -EOVERFLOW, PF_OFFSET_NONE, 0,
				    "scaling plan: the examples, %llu steps x %llu, "
				    "do not fit in 64 bits",
				    (unsigned long long)p->steps, (unsigned long long)B);
	p->examples = (uint64_t)examples;
	p->extra_examples = p->examples - p->ref_examples;
	return 0;
}

/* From N records and E epochs, as the loader cuts them. */
static int plan_epochs(pf_scaling_plan *p, const pf_scaling_input *in,
		       pf_error *err)
{
	uint64_t B = p->global_batch, N = in->records;
	uint64_t E = in->epochs ? in->epochs : 1;
	int ret;

	/* The loader's rule: the steps every host yields. */
	p->steps_per_epoch = pf_steps_per_epoch(N, B, in->remainder_wrap ? PF_REMAINDER_WRAP
									  : PF_REMAINDER_DROP);
	if (in->remainder_wrap)
		/* The last step's B - N mod B places are refilled. */
		p->repeated_per_epoch = N % B ? B - N % B : 0;
	else
		p->dropped_per_epoch = N % B;
	if (!p->steps_per_epoch)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "scaling plan: %llu records do not fill one global "
				    "batch of %llu: an epoch would have no step "
				    "(the loader drops the remainder)",
				    (unsigned long long)N, (unsigned long long)B);
	ret = mul_u64(p->steps_per_epoch, E, &p->steps, "the train steps, steps "
		      "per epoch x epochs", err);
	if (ret == 0)
		ret = mul_u64(p->steps, B, &p->examples, "the examples, steps x "
			      "global batch", err);
	/* Both are below examples, which fitted. */
	p->dropped = p->dropped_per_epoch * E;
	p->repeated = p->repeated_per_epoch * E;
	return ret;
}

static int plan_warmup(pf_scaling_plan *p, const pf_scaling_input *in,
		       pf_error *err)
{
	uint64_t W0 = in->ref_warmup_steps;

	if (in->ref_global_batch) {
		/* The same examples as the reference's warm-up, rounded up
		 * like the steps. */
		u128 ex = (u128)W0 * in->ref_global_batch;

		p->warmup_steps = div_up(ex, p->global_batch);
		p->warmup_rounded = ex % p->global_batch != 0;
	} else {
		p->warmup_steps = W0;
	}
	if (p->mode != PF_SCALING_BATCH_ONLY && p->warmup_steps > p->steps)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "scaling plan: the warm-up (%llu reference steps, "
				    "%llu in the plan) is longer than the %llu train steps",
				    (unsigned long long)W0,
				    (unsigned long long)p->warmup_steps,
				    (unsigned long long)p->steps);
	return 0;
}

int pf_scaling_plan_compute(pf_scaling_plan *out, const pf_scaling_input *in,
			    pf_error *err)
{
	pf_scaling_plan p;
	int ret;

	pf_error_clear(err);
	memset(out, 0, sizeof(*out));
	memset(&p, 0, sizeof(p));
	ret = check_inputs(in, err);
	if (ret < 0)
		return ret;
	ret = mul_u64(in->per_core_batch, in->cores, &p.host_batch,
		      "the host batch, per-core batch x cores", err);
	if (ret == 0)
		ret = mul_u64(p.host_batch, in->hosts, &p.global_batch,
			      "the global batch, host batch x hosts", err);
	if (ret == 0)
		ret = mul_u64(in->cores, in->hosts, &p.total_cores,
			      "the cores in all, cores x hosts", err);
	if (ret < 0)
		return ret;
	if (in->ref_global_batch) {
		p.batch_ratio = (double)p.global_batch / (double)in->ref_global_batch;
		if (in->ref_global_batch % in->per_core_batch == 0)
			p.ref_cores = in->ref_global_batch / in->per_core_batch;
	}

	if (in->ref_steps) {
		p.mode = PF_SCALING_STEPS;
		ret = plan_steps(&p, in, err);
	} else if (in->records) {
		p.mode = PF_SCALING_EPOCHS;
		ret = plan_epochs(&p, in, err);
	}
	if (ret < 0)
		return ret;
	ret = plan_warmup(&p, in, err);
	if (ret < 0)
		return ret;

	p.rule = in->rule;
	if (in->ref_lr > 0) {
		p.has_lr = true;
		p.lr_by_rule[PF_LR_NONE] = in->ref_lr;
		if (in->ref_global_batch) {
			p.lr_by_rule[PF_LR_LINEAR] = in->ref_lr * p.batch_ratio;
			p.lr_by_rule[PF_LR_SQRT] = in->ref_lr * sqrt(p.batch_ratio);
		}
		p.lr = p.lr_by_rule[in->rule];
	}

	if (in->step_time_ms > 0) {
		double step_s = in->step_time_ms / 1000.0;

		p.has_bandwidth = true;
		p.host_records_per_s = (double)p.host_batch / step_s;
		p.pod_records_per_s = (double)p.global_batch / step_s;
		p.host_bytes_per_s = p.host_records_per_s * in->record_bytes;
		p.pod_bytes_per_s = p.pod_records_per_s * in->record_bytes;
		if (!isfinite(p.pod_bytes_per_s))
			return pf_error_set(err, -EOVERFLOW, PF_OFFSET_NONE, 0,
					    "scaling plan: the pod's input bandwidth "
					    "(%llu records x %g bytes every %g ms) is "
					    "not a finite number",
					    (unsigned long long)p.global_batch,
					    in->record_bytes, in->step_time_ms);
		if (in->measured_host_bytes_per_s > 0)
			p.measured_ratio = in->measured_host_bytes_per_s /
					   p.host_bytes_per_s;
	}
	*out = p;
	return 0;
}

double pf_scaling_lr_at(const pf_scaling_plan *p, uint64_t step)
{
	if (!p->has_lr)
		return 0.0;
	if (step < p->warmup_steps)
		return p->lr * (double)(step + 1) / (double)p->warmup_steps;
	return p->lr;
}
