/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench --model end to end: the train report (loss falls, step times,
 * input-bound fraction, verdict, held-out figures), the same bits at any
 * decode thread count, bad specs and options; pods of 2 and 4 ranks under
 * a real mpirun (equal steps, the pod report, the same loss and model on
 * every rank, a failing host stops the pod); loadbench ladder. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

/* Run a shell command; stdout into a malloc'd string (caller frees),
 * stderr into err (when given).  @return the exit status. */
static int run(char **out, char *err, size_t err_cap, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int run(char **out, char *err, size_t err_cap, const char *fmt, ...)
{
	const char *d = tu_tmpdir();
	char cmd[8192], errpath[512];
	size_t cap = 1 << 16, len = 0, n;
	char *buf = malloc(cap);
	va_list ap;
	FILE *p;
	int status;

	cr_assert_not_null(buf);
	snprintf(errpath, sizeof(errpath), "%s/stderr", d);
	va_start(ap, fmt);
	n = (size_t)vsnprintf(cmd, sizeof(cmd) - 600, fmt, ap);
	va_end(ap);
	cr_assert_lt(n, sizeof(cmd) - 600);
	snprintf(cmd + n, sizeof(cmd) - n, " 2>%s", errpath);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while ((n = fread(buf + len, 1, cap - 1 - len, p)) > 0) {
		len += n;
		if (len + 1 == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			cr_assert_not_null(buf);
		}
	}
	buf[len] = '\0';
	status = pclose(p);
	if (err) {
		FILE *f = fopen(errpath, "r");

		err[0] = '\0';
		if (f) {
			size_t got = fread(err, 1, err_cap - 1, f);
			err[got] = '\0';
			fclose(f);
		}
	}
	*out = buf;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *o = json_loads(text, 0, &jerr);

	cr_assert_not_null(o, "%s: %.2000s", jerr.text, text);
	return o;
}

static json_t *get(json_t *o, const char *path)
{
	char key[128];
	const char *dot;

	while ((dot = strchr(path, '.'))) {
		snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
		o = json_object_get(o, key);
		cr_assert_not_null(o, "no member %s", key);
		path = dot + 1;
	}
	o = json_object_get(o, path);
	cr_assert_not_null(o, "no member %s", path);
	return o;
}

static double num(json_t *o, const char *path)
{
	return json_number_value(get(o, path));
}

/* Dense data: 2,560 records of 256 floats in 4 indexed shards to train on,
 * and 512 more of the same teacher held out; tokens: 1,200 records. */
static void make_data(const char *d, bool tokens)
{
	const char *st = tu_env_tool("SHARDTOOL");

	if (tokens) {
		cr_assert_eq(tu_system("%s synth --kind tokens --records 1200 --shards 2 "
				       "--out %s/traw >/dev/null && %s convert --shards 3 "
				       "--out %s/tok %s/traw >/dev/null", st, d, st, d, d), 0);
		return;
	}
	cr_assert_eq(tu_system("%s synth --kind dense --records 3072 --shards 3 --out "
			       "%s/raw >/dev/null && %s convert --shards 6 --out %s/z "
			       "%s/raw >/dev/null && mkdir %s/train %s/eval && "
			       "mv %s/z/part-00005-of-00006.tfrecord.zst %s/eval/ && "
			       "mv %s/z/part-* %s/train/", st, d, st, d, d, d, d, d, d, d, d),
		     0);
}

#define SOFTMAX "--model softmax --classes 10 --features x:float32[256],label:int32[1]"

/* ------------------------------------------------------------------ */
/* One host                                                             */

Test(train_tool, softmax_report_and_the_same_bits_at_any_thread_count,
     .timeout = 120)
{
	const char *d = tu_tmpdir();
	char *out, err[8192];
	json_t *o, *t;
	char hash[2][32];

	make_data(d, false);
	for (int threads = 1; threads <= 2; threads++) {
		cr_assert_eq(run(&out, err, sizeof(err), TU_MPI_ENV "%s --json --quiet "
				 SOFTMAX " --per-core-batch 16 --cores 2 --steps 60 "
				 "--threads %d --lr 0.2 --eval %s/eval --eval-every 30 "
				 "--log-every 20 %s/train", tu_env_tool("LOADBENCH"), threads,
				 d, d), 0, "%s", err);
		o = parse(out);
		t = get(o, "train");
		cr_assert_str_eq(json_string_value(get(t, "model")), "softmax");
		cr_assert_eq(num(t, "steps"), 60);
		cr_assert_eq(num(o, "steps"), 60);
		cr_assert_eq(num(t, "examples"), 60 * 32);
		cr_assert_eq(num(t, "cores"), 2);
		cr_assert_lt(num(t, "loss_last"), 0.8 * num(t, "loss_first"),
			     "loss %g -> %g", num(t, "loss_first"), num(t, "loss_last"));
		cr_assert_eq(num(t, "timed_steps"), 59, "the first step is left out");
		cr_assert_leq(num(t, "step_ms.p50"), num(t, "step_ms.p90"));
		cr_assert_leq(num(t, "step_ms.p90"), num(t, "step_ms.p99"));
		cr_assert_gt(num(t, "compute_ms_p50"), 0);
		double f = num(t, "input_bound_fraction"), w = num(t, "input_wait_fraction");
		cr_assert(f >= 0 && f <= 1 && w >= 0 && w <= 1, "%g %g", f, w);
		cr_assert_float_eq(num(t, "input_bound_steps"), f * 59, 1e-6);
		const char *v = json_string_value(get(t, "verdict"));
		cr_assert_str_eq(v, f > 0.5 ? "input-bound" : "compute-bound");
		/* 512 held-out records, global batch 32: all 16 steps */
		cr_assert_eq(num(t, "eval.records"), 512);
		cr_assert_eq(num(t, "eval.dropped"), 0);
		double acc = num(t, "eval.accuracy");
		cr_assert(acc > 0.3 && acc <= 1, "held-out accuracy %g", acc);
		cr_assert_eq(json_array_size(get(t, "curve")), 3);
		cr_assert_eq(num(json_array_get(get(t, "curve"), 2), "step"), 60);
		cr_assert_eq(json_array_size(get(t, "eval_curve")), 2);
		/* the last evaluation is the one at the end */
		cr_assert_eq(num(json_array_get(get(t, "eval_curve"), 1), "loss"),
			     num(t, "eval.loss"));
		cr_assert_null(json_object_get(o, "pod"), "no pod: nobody launched it");
		cr_assert(strstr(err, "step 20: training loss"), "%s", err);
		cr_assert(strstr(err, "step 30: held-out loss"), "%s", err);
		snprintf(hash[threads - 1], sizeof(hash[0]), "%s",
			 json_string_value(get(t, "params_hash")));
		cr_assert_eq(strlen(hash[threads - 1]), 16);
		json_decref(o);
		free(out);
	}
	cr_assert_str_eq(hash[0], hash[1], "the model depends on the decode threads");
}

Test(train_tool, text_report, .timeout = 60)
{
	const char *d = tu_tmpdir();
	char *out, err[4096];

	make_data(d, false);
	cr_assert_eq(run(&out, err, sizeof(err), TU_MPI_ENV "%s --quiet " SOFTMAX
			 " --per-core-batch 32 --steps 20 --threads 1 --eval %s/eval "
			 "%s/train", tu_env_tool("LOADBENCH"), d, d), 0, "%s", err);
	cr_assert(strstr(out, "\ntrain       softmax ("), "%s", out);
	cr_assert(strstr(out, "\nheld-out    loss "), "%s", out);
	cr_assert(strstr(out, "\nstep time   p50 "), "%s", out);
	cr_assert(strstr(out, "input-bound (wait > 5% of the step)"), "%s", out);
	cr_assert(strstr(out, "\nverdict     compute-bound\n") ||
		  strstr(out, "\nverdict     input-bound\n"), "%s", out);
	cr_assert_null(strstr(out, "\npod "), "%s", out);
	free(out);
	/* --model none: the report as before */
	cr_assert_eq(run(&out, err, sizeof(err), TU_MPI_ENV "%s --quiet --model none "
			 "--per-core-batch 32 --threads 1 %s/train", tu_env_tool("LOADBENCH"),
			 d), 0, "%s", err);
	cr_assert(strstr(out, "bottleneck  "), "%s", out);
	cr_assert_null(strstr(out, "\ntrain "), "%s", out);
	free(out);
}

Test(train_tool, embag_reads_the_index_schema_as_int32_with_pad, .timeout = 60)
{
	const char *d = tu_tmpdir();
	char *out, err[4096];
	json_t *o;

	make_data(d, true);
	cr_assert_eq(run(&out, err, sizeof(err), TU_MPI_ENV "%s --json --quiet --model "
			 "embag --classes 8 --vocab 32000 --embed-dim 8 --cores 2 "
			 "--per-core-batch 8 --steps 20 --threads 1 %s/tok",
			 tu_env_tool("LOADBENCH"), d), 0, "%s", err);
	o = parse(out);
	const char *f = json_string_value(get(o, "features"));
	cr_assert(strstr(f, "tokens:int32[") && strstr(f, "]:pad=-1") &&
		  strstr(f, "label:int32[1]"), "%s", f);
	cr_assert_str_eq(json_string_value(get(o, "train.model")), "embag");
	cr_assert_eq(num(o, "train.steps"), 20);
	json_decref(o);
	free(out);
}

/* Each case: the options, the exit status, what stderr must say. */
Test(train_tool, bad_specs_and_options, .timeout = 60)
{
	static const struct { const char *args; int status; const char *says; } cases[] = {
		{ "--model embag --classes 10 --vocab 100", 2,
		  "embag: needs an input feature of int32[seq_len] token ids besides the "
		  "label; the spec has none (label:int32[1], x:float32[256])" },
		{ "--model softmax --classes 10 --features x:float32[256],label:int64[1]", 2,
		  "softmax: label feature 'label' is int64[1]; it must be int32[1]" },
		{ "--model softmax", 2, "--model softmax needs --classes" },
		{ "--model embag --classes 10 --features x:int32[4],label:int32[1]", 2,
		  "--model embag needs --vocab" },
		{ "--model bert --classes 10", 2, "--model: 'bert' is not softmax, embag or none" },
		{ "--eval /nonexistent", 2, "need --model softmax or embag" },
		{ SOFTMAX " --repeat 2", 2, "a model trains once" },
		{ SOFTMAX " --lr-rule linear", 2, "learning rate: " },
		{ SOFTMAX " --lr -1", 2, "--lr: '-1' is not a finite number above 0" },
		{ SOFTMAX " --eval-every 5", 2, "--eval-every needs --eval PATH" },
		/* labels 0..9 do not fit 5 classes: the first step names the row */
		{ "--model softmax --classes 5 --features x:float32[256],label:int32[1]", 1,
		  "step 0: core 0: batch row " },
	};
	const char *d = tu_tmpdir();

	make_data(d, false);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out, err[4096];
		int st = run(&out, err, sizeof(err), TU_MPI_ENV "%s --quiet --threads 1 %s "
			     "%s/train", tu_env_tool("LOADBENCH"), cases[i].args, d);

		cr_assert_eq(st, cases[i].status, "%s: status %d: %s", cases[i].args, st, err);
		cr_assert(strstr(err, cases[i].says), "%s: '%s' does not say '%s'",
			  cases[i].args, err, cases[i].says);
		free(out);
	}
}

/* ------------------------------------------------------------------ */
/* Pods under mpirun                                                    */

static void check_pod(json_t *o, unsigned hosts, unsigned steps, bool model)
{
	json_t *pod = get(o, "pod"), *h = get(pod, "host");
	const char *hash0 = NULL;
	double loss0 = 0, sum = 0;

	cr_assert_eq(num(o, "topology.num_hosts"), hosts);
	cr_assert_eq(num(o, "topology.host_index"), 0, "rank 0 reports");
	cr_assert_eq(num(pod, "hosts"), hosts);
	cr_assert_str_eq(json_string_value(get(pod, "transport")), "mpi");
	cr_assert(json_is_true(get(pod, "steps_equal")));
	cr_assert_eq(json_array_size(h), hosts);
	for (unsigned i = 0; i < hosts; i++) {
		json_t *e = json_array_get(h, i);

		cr_assert_eq(num(e, "index"), i);
		cr_assert_eq(num(e, "steps"), steps, "host %u", i);
		cr_assert_gt(num(e, "records_per_s"), 0);
		/* each host's first batch, after its open (from the manifest:
		 * no stream file counted) */
		cr_assert_gt(num(e, "first_batch_seconds"), num(e, "open_seconds"), "host %u", i);
		cr_assert_eq(num(e, "open_count_files"), 0, "host %u", i);
		sum += num(e, "records");
		if (!model)
			continue;
		/* every rank computed the same pod-wide loss and model */
		if (!i) {
			hash0 = json_string_value(get(e, "params_hash"));
			loss0 = num(e, "loss");
		}
		cr_assert_str_eq(json_string_value(get(e, "params_hash")), hash0, "host %u", i);
		cr_assert_eq(num(e, "loss"), loss0, "host %u: loss %.17g, host 0 %.17g", i,
			     num(e, "loss"), loss0);
	}
	if (model) {
		cr_assert(json_is_true(get(pod, "models_equal")));
		cr_assert_eq(num(o, "train.steps"), steps);
		cr_assert_eq(num(o, "train.loss_final_step"), loss0);
	}
	double straggler = num(pod, "straggler.index");
	cr_assert(straggler >= 0 && straggler < hosts);
	cr_assert_geq(num(pod, "straggler.below_fastest"), 0);
	/* records over the slowest host's seconds */
	cr_assert_float_eq(num(pod, "records_per_s"), sum / num(pod, "seconds"),
			   1e-6 * sum / num(pod, "seconds"));
	cr_assert_float_eq(num(pod, "per_host_records_per_s") * hosts,
			   num(pod, "records_per_s"), 1e-6 * num(pod, "records_per_s"));
}

Test(pod_tool, two_and_four_ranks_softmax, .timeout = 180)
{
	const char *d = tu_tmpdir();
	char *out, err[16384];

	tu_need_mpirun();
	make_data(d, false);
	for (unsigned np = 2; np <= 4; np += 2) {
		/* 2,560 records, global batch 16 x np: 160 / np steps */
		unsigned steps = 2560 / (16 * np);
		json_t *o;

		cr_assert_eq(run(&out, err, sizeof(err), TU_MPI_ENV "mpirun --oversubscribe "
				 "-np %u %s --json --quiet " SOFTMAX " --per-core-batch 16 "
				 "--threads 1 --memory 64 --lr 0.1 --lr-rule linear "
				 "--ref-global-batch 16 --warmup-steps 8 --eval %s/eval %s/train",
				 np, tu_env_tool("LOADBENCH"), d, d), 0, "%s", err);
		o = parse(out);	/* one object: only rank 0 prints */
		check_pod(o, np, steps, true);
		cr_assert_float_eq(num(o, "train.lr"), 0.1 * np, 1e-12);
		cr_assert_eq(num(o, "train.warmup_steps"), (8 + np - 1) / np);
		cr_assert_eq(num(o, "train.eval.records"), 512);
		cr_assert_gt(num(o, "train.allreduce_ms_p50"), 0);
		for (unsigned i = 0; i < np; i++) {
			char line[64];

			snprintf(line, sizeof(line), "loadbench: host %u of %u (from mpi)", i, np);
			cr_assert(strstr(err, line), "%s", err);
		}
		json_decref(o);
		free(out);
	}
}

Test(pod_tool, two_ranks_embag_and_the_text_report, .timeout = 180)
{
	const char *d = tu_tmpdir();
	char *out, err[16384];
	json_t *o;

	tu_need_mpirun();
	make_data(d, true);
	/* 2 cores a host: the mask protocol over hosts and cores */
	cr_assert_eq(run(&out, err, sizeof(err), TU_MPI_ENV "mpirun --oversubscribe -np 2 "
			 "%s --json --quiet --model embag --classes 8 --vocab 32000 "
			 "--embed-dim 8 --embed-lr-scale 50 --cores 2 --per-core-batch 10 "
			 "--threads 1 --memory 128 %s/tok", tu_env_tool("LOADBENCH"), d), 0,
		     "%s", err);
	o = parse(out);
	/* 1,200 records, global batch 40 */
	check_pod(o, 2, 30, true);
	json_decref(o);
	free(out);

	cr_assert_eq(run(&out, err, sizeof(err), TU_MPI_ENV "mpirun --oversubscribe -np 2 "
			 "%s --quiet --model none --per-core-batch 10 --threads 1 "
			 "--memory 128 %s/tok", tu_env_tool("LOADBENCH"), d), 0, "%s", err);
	cr_assert(strstr(out, "\npod         2 hosts (mpi): "), "%s", out);
	cr_assert(strstr(out, "\n  host      steps     records"), "%s", out);
	cr_assert(strstr(out, "\nstraggler   host "), "%s", out);
	cr_assert(strstr(out, "\nsteps       60 on every host\n"), "%s", out);
	/* only rank 0 printed a report */
	cr_assert_eq(strstr(strstr(out, "files "), "\nfiles ") , NULL, "%s", out);
	free(out);
}

/* A host whose batch is bad stops every host at the same step: none is
 * left waiting in an all-reduce. */
Test(pod_tool, a_failing_step_stops_every_rank, .timeout = 120)
{
	const char *d = tu_tmpdir();
	char *out, err[16384];

	tu_need_mpirun();
	make_data(d, false);
	cr_assert_eq(run(&out, err, sizeof(err), TU_MPI_ENV "mpirun --oversubscribe -np 2 "
			 "%s --json --quiet --model softmax --classes 5 --features "
			 "x:float32[256],label:int32[1] --per-core-batch 16 --threads 1 "
			 "--memory 64 %s/train", tu_env_tool("LOADBENCH"), d), 1, "%s", err);
	cr_assert(strstr(err, "step 0: core 0: batch row "), "%s", err);
	free(out);
}

Test(pod_tool, ladder_of_one_and_two_hosts, .timeout = 180)
{
	const char *d = tu_tmpdir();
	char *out, err[16384];
	json_t *o, *rungs;

	tu_need_mpirun();
	make_data(d, false);
	cr_assert_eq(run(&out, err, sizeof(err), TU_MPI_ENV "%s ladder --hosts 1,2 --json "
			 SOFTMAX " --per-core-batch 16 --threads 1 --memory 64 %s/train",
			 tu_env_tool("LOADBENCH"), d), 0, "%s", err);
	o = parse(out);
	rungs = get(o, "rungs");
	cr_assert_eq(json_array_size(rungs), 2);
	for (unsigned i = 0; i < 2; i++) {
		json_t *r = json_array_get(rungs, i);
		double e = num(r, "efficiency");

		cr_assert_eq(num(r, "hosts"), i + 1);
		cr_assert_gt(num(r, "records_per_s"), 0);
		cr_assert_float_eq(num(r, "per_host_records_per_s") * (i + 1),
				   num(r, "records_per_s"), 1e-6 * num(r, "records_per_s"));
		cr_assert(json_is_true(get(r, "steps_equal")));
		/* no bound above: the rungs' times are whatever the machine gives */
		cr_assert_gt(e, 0, "efficiency %g", e);
		/* throughput(H) / (H x throughput(1)) */
		cr_assert_float_eq(e, num(r, "per_host_records_per_s") /
				   num(json_array_get(rungs, 0), "per_host_records_per_s"),
				   1e-6 * e);
	}
	cr_assert_eq(num(json_array_get(rungs, 0), "efficiency"), 1.0);
	json_t *first = get(o, "first_under_90");
	if (num(json_array_get(rungs, 1), "efficiency") < 0.9)
		cr_assert_eq(json_integer_value(first), 2);
	else
		cr_assert(json_is_null(first));
	json_decref(o);
	free(out);

	cr_assert_eq(run(&out, err, sizeof(err), TU_MPI_ENV "%s ladder --hosts 1,2 "
			 "--per-core-batch 16 --threads 1 --memory 64 %s/train",
			 tu_env_tool("LOADBENCH"), d), 0, "%s", err);
	cr_assert(strstr(out, "hosts   records/s (pod)"), "%s", out);
	cr_assert(strstr(out, "\n1 ") && strstr(out, "\n2 "), "%s", out);
	cr_assert(strstr(out, "100.0%  equal"), "%s", out);
	cr_assert(strstr(out, "scaling: every rung at or above 90% efficiency") ||
		  strstr(out, "<- first rung under 90%"), "%s", out);
	free(out);
}

Test(pod_tool, ladder_usage_and_a_missing_mpirun, .timeout = 60)
{
	char *out, err[4096];

	cr_assert_eq(run(&out, err, sizeof(err), "%s ladder --hosts 1,2 --mpirun "
			 "/nonexistent/mpirun /nonexistent", tu_env_tool("LOADBENCH")), 1);
	cr_assert(strstr(err, "/nonexistent/mpirun not found: the ladder runs each rung "
			 "under Open MPI's mpirun"), "%s", err);
	free(out);
	cr_assert_eq(run(&out, err, sizeof(err), "%s ladder --hosts 2,1 x",
			 tu_env_tool("LOADBENCH")), 2);
	cr_assert(strstr(err, "--hosts: '2,1' does not ascend"), "%s", err);
	free(out);
	cr_assert_eq(run(&out, err, sizeof(err), "%s ladder x", tu_env_tool("LOADBENCH")), 2);
	cr_assert(strstr(err, "--hosts is required"), "%s", err);
	free(out);
	cr_assert_eq(run(&out, err, sizeof(err), "%s ladder --hosts 1,,2 x",
			 tu_env_tool("LOADBENCH")), 2);
	free(out);
	cr_assert_eq(run(&out, err, sizeof(err), "%s ladder --help", tu_env_tool("LOADBENCH")), 0);
	cr_assert(strstr(out, "throughput(H) / (H x throughput(1))"), "%s", out);
	free(out);
}
