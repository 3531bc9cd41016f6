/* SPDX-License-Identifier: Apache-2.0 */
/* `loadbench plan`: the scaling plan of a pod (host/scaling.c computes
 * it; this prints it as a table or one JSON object). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "loadbench.h"
#include "report_internal.h"

typedef struct plan_opts {
	pf_scaling_input in;
	int rule, remainder;
	double mbps;
	bool json, batch_given;
} plan_opts;

#define P(field) offsetof(plan_opts, field)

static const cli_opt plan_cli[] = {
	{ CLI_SECTION, .help = "the pod:" },
	/* b, C and H may be 0 here: the plan says why that cannot be. */
	{ CLI_U64, "per-core-batch", .arg = "b", .off = P(in.per_core_batch),
	  .max = UINT64_MAX, .suffix = true, .seen = CLI_SEEN(plan_opts, batch_given),
	  .help = "records per core per step (required)" },
	{ CLI_U64, "cores", .arg = "C", .off = P(in.cores), .max = UINT64_MAX,
	  .help = "cores per host (default 1)" },
	{ CLI_U64, "hosts", .arg = "H", .off = P(in.hosts), .max = UINT64_MAX,
	  .help = "hosts (default 1)" },
	/* In the plan 0 means "not given": refused as a value. */
	{ CLI_SECTION, .help = "a reference run:" },
	{ CLI_U64, "ref-global-batch", .arg = "B0", .off = P(in.ref_global_batch), .min = 1,
	  .max = UINT64_MAX, .suffix = true, .help = "its global batch" },
	{ CLI_U64, "ref-steps", .arg = "S0", .off = P(in.ref_steps), .min = 1,
	  .max = UINT64_MAX, .suffix = true,
	  .help = "its train steps: the plan keeps S0 x B0 examples, S0 x B0 / B "
		  "steps, rounded up when not whole" },
	{ CLI_DOUBLE, "ref-lr", .arg = "L0", .off = P(in.ref_lr), .lo = 0, .hi = 1e308,
	  .above = true, .help = "its learning rate" },
	{ CLI_CHOICE, "rule", .arg = "none|linear|sqrt", .off = P(rule),
	  .choices = "none|linear|sqrt",
	  .help = "the plan's rate: L0, L0 x B/B0 or L0 x sqrt(B/B0) (default none)" },
	{ CLI_U64, "warmup-steps", .arg = "W0", .off = P(in.ref_warmup_steps),
	  .max = UINT64_MAX, .suffix = true,
	  .help = "its warm-up, kept as examples: W0 x B0 / B steps, rounded up "
		  "(taken as is without B0); the rate ramps linearly to its value "
		  "over them" },
	{ CLI_SECTION, .help = "or an epoch schedule:" },
	{ CLI_U64, "records", .arg = "N", .off = P(in.records), .min = 1, .max = UINT64_MAX,
	  .suffix = true, .help = "records in the dataset" },
	{ CLI_U64, "epochs", .arg = "E", .off = P(in.epochs), .min = 1, .max = UINT64_MAX,
	  .help = "passes over them (default 1)" },
	{ CLI_CHOICE, "remainder", .arg = "drop|wrap", .off = P(remainder),
	  .choices = "drop|wrap",
	  .help = "the N mod B records past the last whole step: dropped, or the "
		  "last step filled by repeating records, as the loader does "
		  "(default drop)" },
	{ CLI_SECTION, .help = "input bandwidth:" },
	{ CLI_DOUBLE, "step-time-ms", .arg = "T", .off = P(in.step_time_ms), .lo = 0,
	  .hi = 1e308, .above = true, .help = "one train step's time" },
	{ CLI_DOUBLE, "record-bytes", .arg = "R", .off = P(in.record_bytes), .lo = 0,
	  .hi = 1e308, .above = true, .help = "bytes read per record (compressed, as stored)" },
	{ CLI_DOUBLE, "measured-mbps", .arg = "M", .off = P(mbps), .lo = 0, .hi = 1e308,
	  .above = true,
	  .help = "MB/s one host read in a loadbench run (its \"MB/s read\"), printed "
		  "beside the need" },
	{ CLI_FLAG, "json", .off = P(json), .help = "one JSON object on stdout instead of the table" },
	{ CLI_END },
};

static const cli_command plan_command = {
	.name = "loadbench plan",
	.usage = "usage: loadbench plan --per-core-batch b [options]\n",
	.about = "The scaling plan of a pod of H hosts with C cores each: the global\n"
		 "batch B = b x C x H, the train steps that keep the examples of a\n"
		 "reference run (or the steps of an epoch schedule, as the loader cuts\n"
		 "them), the learning rate and warm-up, what does not divide evenly and\n"
		 "what is dropped, and the input bandwidth a host and the pod need.\n",
	.opts = plan_cli,
	.footer = "Exit status: 0 done, 2 bad usage or an impossible plan.\n",
};

/* v with thousands separators ("4,096"), in buf. */
static const char *plan_grouped(uint64_t v, char buf[32])
{
	char digits[24];
	int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);
	int o = 0;

	for (int i = 0; i < n; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

/* One row of the table: label, the reference's value (NULL: no column,
 * "": empty), the plan's value, a note. */
static void plan_row(bool ref_column, const char *label, const char *ref,
		     const char *plan, const char *note)
{
	if (ref_column)
		printf("%-20s %14s %14s", label, ref ? ref : "", plan);
	else
		printf("%-20s %14s", label, plan);
	if (note && *note)
		printf("   %s", note);
	putchar('\n');
}

static void plan_print_text(const pf_scaling_input *in, const pf_scaling_plan *p)
{
	bool ref = in->ref_global_batch > 0;
	char a[32], b[32], c[32], d[32], note[256];

	if (ref)
		printf("%-20s %14s %14s\n", "", "reference", "plan");
	else
		printf("%-20s %14s\n", "", "plan");
	snprintf(note, sizeof(note), "%llu host%s x %s core%s",
		 (unsigned long long)in->hosts, in->hosts == 1 ? "" : "s",
		 plan_grouped(in->cores, c), in->cores == 1 ? "" : "s");
	plan_row(ref, "cores in all", p->ref_cores ? plan_grouped(p->ref_cores, a) : "",
		 plan_grouped(p->total_cores, b), note);
	plan_row(ref, "per-core batch", p->ref_cores ? plan_grouped(in->per_core_batch, a) : "",
		 plan_grouped(in->per_core_batch, b), NULL);
	note[0] = '\0';
	if (ref)
		snprintf(note, sizeof(note), "x%.6g", p->batch_ratio);
	plan_row(ref, "global batch", ref ? plan_grouped(in->ref_global_batch, a) : NULL,
		 plan_grouped(p->global_batch, b), note);

	if (p->mode == PF_SCALING_STEPS) {
		plan_row(ref, "train steps", plan_grouped(in->ref_steps, a),
			 plan_grouped(p->steps, b), p->steps_rounded ? "rounded up" : NULL);
		if (p->extra_examples)
			snprintf(note, sizeof(note), "%s more", plan_grouped(p->extra_examples, c));
		else
			snprintf(note, sizeof(note), "the same");
		plan_row(ref, "examples", plan_grouped(p->ref_examples, a),
			 plan_grouped(p->examples, b), note);
	} else if (p->mode == PF_SCALING_EPOCHS) {
		uint64_t E = in->epochs ? in->epochs : 1;

		plan_row(ref, "records", ref ? "" : NULL, plan_grouped(in->records, a), NULL);
		snprintf(note, sizeof(note), "%s(%s / %s)",
			 in->remainder_wrap ? "ceil" : "floor", plan_grouped(in->records, c),
			 plan_grouped(p->global_batch, d));
		plan_row(ref, "steps per epoch", ref ? "" : NULL,
			 plan_grouped(p->steps_per_epoch, a), note);
		if (in->remainder_wrap)
			plan_row(ref, "repeated per epoch", ref ? "" : NULL,
				 plan_grouped(p->repeated_per_epoch, a),
				 "the last step is filled from the start of each host's share");
		else
			plan_row(ref, "dropped per epoch", ref ? "" : NULL,
				 plan_grouped(p->dropped_per_epoch, a),
				 "the records past the last whole step");
		plan_row(ref, "epochs", ref ? "" : NULL, plan_grouped(E, a), NULL);
		plan_row(ref, "train steps", ref ? "" : NULL, plan_grouped(p->steps, a), NULL);
		plan_row(ref, "examples", ref ? "" : NULL, plan_grouped(p->examples, a), NULL);
		if (in->remainder_wrap)
			plan_row(ref, "repeated", ref ? "" : NULL, plan_grouped(p->repeated, a), NULL);
		else
			plan_row(ref, "dropped", ref ? "" : NULL, plan_grouped(p->dropped, a), NULL);
	}

	if (p->has_lr) {
		snprintf(a, sizeof(a), "%.6g", in->ref_lr);
		snprintf(b, sizeof(b), "%.6g", p->lr);
		if (ref)
			snprintf(note, sizeof(note), "%s (none %.6g, linear %.6g, sqrt %.6g)",
				 pf_lr_rule_name(p->rule), p->lr_by_rule[PF_LR_NONE],
				 p->lr_by_rule[PF_LR_LINEAR], p->lr_by_rule[PF_LR_SQRT]);
		else
			snprintf(note, sizeof(note), "%s", pf_lr_rule_name(p->rule));
		plan_row(ref, "learning rate", ref ? a : NULL, b, note);
	}
	if (in->ref_warmup_steps) {
		note[0] = '\0';
		if (p->warmup_rounded)
			snprintf(note, sizeof(note), "rounded up");
		plan_row(ref, "warm-up steps", ref ? plan_grouped(in->ref_warmup_steps, a) : NULL,
			 plan_grouped(p->warmup_steps, b), note);
	}

	if (p->mode == PF_SCALING_STEPS && p->steps_rounded) {
		char e[32], f[32];

		printf("\nsteps: %s x %s / %s = %.2f, not whole: rounded up to %s\n",
		       plan_grouped(in->ref_steps, a), plan_grouped(in->ref_global_batch, b),
		       plan_grouped(p->global_batch, c), p->steps_exact,
		       plan_grouped(p->steps, d));
		printf("       %s examples (%.2f%%) more than the reference; %s steps "
		       "would train %s fewer\n",
		       plan_grouped(p->extra_examples, a),
		       100.0 * (double)p->extra_examples / (double)p->ref_examples,
		       plan_grouped(p->steps - 1, e),
		       plan_grouped(p->ref_examples - (p->steps - 1) * p->global_batch, f));
	}

	if (p->has_bandwidth) {
		printf("\n%-20s %14s %14s\n", "input", "records/s", "MB/s");
		printf("%-20s %14.0f %14.2f", "per host", p->host_records_per_s,
		       p->host_bytes_per_s / 1e6);
		if (p->measured_ratio > 0)
			printf("   measured %.2f MB/s: %.2fx the need%s",
			       in->measured_host_bytes_per_s / 1e6, p->measured_ratio,
			       p->measured_ratio < 1 ? " (input-bound)" : "");
		putchar('\n');
		printf("%-20s %14.0f %14.2f\n", "pod", p->pod_records_per_s,
		       p->pod_bytes_per_s / 1e6);
	}
}

/* The plan as one JSON object (keys stable: programs read them). */
static int plan_print_json(const pf_scaling_input *in, const pf_scaling_plan *p)
{
	static const char *const modes[] = { "batch", "steps", "epochs" };
	json_t *o = json_object(), *sub;
	bool bad = false;

	pf_json_put(o, "per_core_batch", pf_json_u64(in->per_core_batch), &bad);
	pf_json_put(o, "cores", pf_json_u64(in->cores), &bad);
	pf_json_put(o, "hosts", pf_json_u64(in->hosts), &bad);
	pf_json_put(o, "cores_total", pf_json_u64(p->total_cores), &bad);
	pf_json_put(o, "host_batch", pf_json_u64(p->host_batch), &bad);
	pf_json_put(o, "global_batch", pf_json_u64(p->global_batch), &bad);
	pf_json_put(o, "mode", pf_json_str(modes[p->mode]), &bad);
	if (in->ref_global_batch) {
		sub = json_object();
		pf_json_put(sub, "global_batch", pf_json_u64(in->ref_global_batch), &bad);
		if (p->ref_cores)
			pf_json_put(sub, "cores_total", pf_json_u64(p->ref_cores), &bad);
		if (in->ref_steps) {
			pf_json_put(sub, "steps", pf_json_u64(in->ref_steps), &bad);
			pf_json_put(sub, "examples", pf_json_u64(p->ref_examples), &bad);
		}
		if (in->ref_lr > 0)
			pf_json_put(sub, "lr", pf_json_num(in->ref_lr), &bad);
		pf_json_put(sub, "warmup_steps", pf_json_u64(in->ref_warmup_steps), &bad);
		pf_json_put(o, "reference", sub, &bad);
		pf_json_put(o, "batch_ratio", pf_json_num(p->batch_ratio), &bad);
	}
	if (p->mode != PF_SCALING_BATCH_ONLY) {
		pf_json_put(o, "steps", pf_json_u64(p->steps), &bad);
		pf_json_put(o, "examples", pf_json_u64(p->examples), &bad);
	}
	if (p->mode == PF_SCALING_STEPS) {
		pf_json_put(o, "steps_exact", pf_json_num(p->steps_exact), &bad);
		pf_json_put(o, "steps_rounding", pf_json_str(p->steps_rounded ? "up" : "none"),
			    &bad);
		pf_json_put(o, "extra_examples", pf_json_u64(p->extra_examples), &bad);
	}
	if (p->mode == PF_SCALING_EPOCHS) {
		sub = json_object();
		pf_json_put(sub, "records", pf_json_u64(in->records), &bad);
		pf_json_put(sub, "epochs", pf_json_u64(in->epochs ? in->epochs : 1), &bad);
		pf_json_put(sub, "remainder", pf_json_str(in->remainder_wrap ? "wrap" : "drop"),
			    &bad);
		pf_json_put(sub, "steps_per_epoch", pf_json_u64(p->steps_per_epoch), &bad);
		pf_json_put(sub, "dropped_per_epoch", pf_json_u64(p->dropped_per_epoch), &bad);
		pf_json_put(sub, "repeated_per_epoch", pf_json_u64(p->repeated_per_epoch), &bad);
		pf_json_put(sub, "dropped", pf_json_u64(p->dropped), &bad);
		pf_json_put(sub, "repeated", pf_json_u64(p->repeated), &bad);
		pf_json_put(o, "epochs", sub, &bad);
	}
	if (p->has_lr) {
		json_t *by = json_object();

		sub = json_object();
		pf_json_put(sub, "rule", pf_json_str(pf_lr_rule_name(p->rule)), &bad);
		pf_json_put(sub, "value", pf_json_num(p->lr), &bad);
		/* linear and sqrt need B0: null when it was not given */
		for (unsigned r = 0; r < PF_LR_RULES; r++)
			pf_json_put(by, pf_lr_rule_name((pf_lr_rule)r),
				    r == PF_LR_NONE || in->ref_global_batch ?
				    pf_json_num(p->lr_by_rule[r]) : json_null(), &bad);
		pf_json_put(sub, "by_rule", by, &bad);
		pf_json_put(o, "lr", sub, &bad);
	}
	if (p->has_bandwidth) {
		sub = json_object();
		pf_json_put(sub, "step_time_ms", pf_json_num(in->step_time_ms), &bad);
		pf_json_put(sub, "record_bytes", pf_json_num(in->record_bytes), &bad);
		pf_json_put(sub, "host_records_per_s", pf_json_num(p->host_records_per_s), &bad);
		pf_json_put(sub, "pod_records_per_s", pf_json_num(p->pod_records_per_s), &bad);
		pf_json_put(sub, "host_mb_per_s", pf_json_num(p->host_bytes_per_s / 1e6), &bad);
		pf_json_put(sub, "pod_mb_per_s", pf_json_num(p->pod_bytes_per_s / 1e6), &bad);
		if (p->measured_ratio > 0) {
			pf_json_put(sub, "measured_mb_per_s",
				    pf_json_num(in->measured_host_bytes_per_s / 1e6), &bad);
			pf_json_put(sub, "measured_ratio", pf_json_num(p->measured_ratio), &bad);
		}
		pf_json_put(o, "bandwidth", sub, &bad);
	}
	pf_json_put(o, "warmup_steps", pf_json_u64(p->warmup_steps), &bad);
	pf_json_put(o, "warmup_rounded", pf_json_bool(p->warmup_rounded), &bad);
	return cli_json_print(o, bad);
}

/* `loadbench plan ...` (argv[0] is "plan").  @return the exit status. */
int plan_main(int argc, char **argv)
{
	plan_opts o = { .in = { .cores = 1, .hosts = 1 } };
	pf_scaling_plan p;
	pf_error err;
	int ret, first;

	ret = cli_parse(&plan_command, argc, argv, &o, &first);
	if (ret >= 0)
		return ret;
	o.in.rule = (pf_lr_rule)o.rule;
	o.in.remainder_wrap = o.remainder == PF_REMAINDER_WRAP;
	o.in.measured_host_bytes_per_s = o.mbps * 1e6;
	if (first < argc)
		return cli_usage("unexpected argument '%s'", argv[first]);
	if (!o.batch_given)
		return cli_usage("--per-core-batch is required");
	pf_error_clear(&err);
	if (pf_scaling_plan_compute(&p, &o.in, &err) < 0)
		return cli_usage("%s", err.msg);
	if (o.json)
		return plan_print_json(&o.in, &p);
	plan_print_text(&o.in, &p);
	return 0;
}

