/* SPDX-License-Identifier: Apache-2.0 */
/* A training run's log and its report sections (host/report.c): step
 * times without the first step, the input-bound verdict, the loss curve
 * and evaluations, the train section, and no pod section for one host. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "pf_host.h"
#include "podfeed.h"
#include "testutil.h"

#define MS 1000000ull

/* Step i waited wait[i] ms and computed compute[i] ms at loss loss[i]. */
static pf_train_log *log_of(const double *wait, const double *compute, const double *loss,
			    size_t n, uint64_t log_every, pf_train_point *points, int *npoints)
{
	pf_train_log *l;

	cr_assert_eq(pf_train_log_create(&l, log_every), 0);
	*npoints = 0;
	for (size_t i = 0; i < n; i++) {
		pf_train_step st = { .loss = loss[i], .compute_ns = (uint64_t)(compute[i] * MS),
				     .reduce_ns = (uint64_t)(compute[i] * MS) / 4 };
		int ret = pf_train_log_step(l, (uint64_t)(wait[i] * MS), &st, 0.1 * (double)(i + 1),
					    &points[*npoints]);

		cr_assert_geq(ret, 0);
		*npoints += ret;
	}
	return l;
}

/* The first step (the pipeline's fill) is left out of the step times and
 * the verdict; a step is input-bound when it waited over 5% of its time. */
Test(train_report, step_times_and_verdict)
{
	/* step 0 waits 100 ms; of the others, 3 of 4 wait 1 ms of 10 */
	const double wait[] = { 100, 1, 1, 0.1, 1 }, compute[] = { 9, 9, 9, 9.9, 9 };
	const double loss[] = { 2.0, 1.8, 1.6, 1.4, 1.2 };
	pf_train_point points[8];
	pf_train_figures f;
	int np;
	pf_train_log *l = log_of(wait, compute, loss, 5, 0, points, &np);

	cr_assert_eq(pf_train_log_figures(l, &f), 0);
	cr_assert_eq(f.steps, 5);
	cr_assert_eq(f.timed_steps, 4);
	cr_assert_eq(f.bound_steps, 3);
	cr_assert_float_eq(f.bound_fraction, 0.75, 1e-12);
	cr_assert_str_eq(f.verdict, "input-bound");
	cr_assert_float_eq(f.first_wait_ms, 100, 1e-6);
	cr_assert_float_eq(f.step_ms_p50, 10, 1e-6);
	cr_assert_float_eq(f.wait_fraction, 3.1 / 40, 1e-9);
	cr_assert_float_eq(f.loss_first, 1.6, 1e-12);	/* all 5 steps: under the window */
	cr_assert_float_eq(f.loss_final_step, 1.2, 1e-12);
	pf_train_log_free(l);

	/* Two of four waiting: not more than half, compute-bound. */
	const double wait2[] = { 100, 1, 1, 0.1, 0.1 };
	l = log_of(wait2, compute, loss, 5, 0, points, &np);
	cr_assert_eq(pf_train_log_figures(l, &f), 0);
	cr_assert_str_eq(f.verdict, "compute-bound");
	pf_train_log_free(l);
}

/* A curve point every log_every steps, the mean loss since the last
 * one; the rest at the end. */
Test(train_report, loss_curve_and_evaluations)
{
	const double wait[] = { 1, 1, 1, 1, 1 }, compute[] = { 9, 9, 9, 9, 9 };
	const double loss[] = { 2.0, 1.0, 3.0, 1.0, 0.5 };
	pf_train_point points[8], last;
	pf_eval_sums sums = { .loss_sum = 30, .correct = 15, .rows = 20 };
	pf_train_eval ev;
	int np;
	pf_train_log *l = log_of(wait, compute, loss, 5, 2, points, &np);

	cr_assert_eq(np, 2);
	cr_assert_eq(points[0].step, 2);
	cr_assert_eq(points[0].steps, 2);
	cr_assert_float_eq(points[0].loss, 1.5, 1e-12);
	cr_assert_float_eq(points[0].lr, 0.2, 1e-12);
	cr_assert_float_eq(points[1].loss, 2.0, 1e-12);
	cr_assert_eq(pf_train_log_close(l, &last), 1);
	cr_assert_eq(last.step, 5);
	cr_assert_eq(last.steps, 1);
	cr_assert_float_eq(last.loss, 0.5, 1e-12);
	cr_assert_eq(pf_train_log_close(l, &last), 0);
	cr_assert_eq(pf_train_log_eval(l, &sums, 4, false, &ev), 0);
	cr_assert_eq(ev.step, 5);
	cr_assert_float_eq(ev.loss, 1.5, 1e-12);
	cr_assert_float_eq(ev.accuracy, 0.75, 1e-12);
	cr_assert_eq(ev.dropped, 4);
	pf_train_log_free(l);
}

/* The train section from a real trainer: text and JSON; a pod of one
 * host adds nothing. */
Test(train_report, train_section_and_no_pod_for_one_host)
{
	const double wait[] = { 5, 1, 1 }, compute[] = { 2, 2, 2 }, loss[] = { 2, 1.5, 1 };
	pf_spec spec;
	pf_trainer *t;
	pf_trainer_config tcfg = { .model = { .kind = PF_MODEL_SOFTMAX, .classes = 4, .seed = 1 },
				   .spec = &spec, .cores = 2, .per_core_batch = 8 };
	pf_scaling_input in = { .per_core_batch = 8, .cores = 2, .hosts = 1, .ref_lr = 0.1,
				.ref_global_batch = 8, .rule = PF_LR_LINEAR };
	pf_scaling_plan plan;
	pf_train_point points[4];
	pf_loader_metrics m = { .records = 48, .steps = 3 };
	pf_pod *pod;
	pf_report *r;
	pf_error err;
	json_error_t jerr;
	json_t *o, *tr;
	char *text, *json;
	int64_t n;
	int np;

	cr_assert_eq(pf_spec_parse(&spec, "x:float32[6],label:int32[1]", &err), 0, "%s", err.msg);
	cr_assert_eq(pf_trainer_create(&t, &tcfg, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_scaling_plan_compute(&plan, &in, &err), 0, "%s", err.msg);
	pf_train_log *l = log_of(wait, compute, loss, 3, 0, points, &np);

	cr_assert_eq(pf_report_create(&r), 0);
	cr_assert_eq(pf_report_add_train(r, t, &in, &plan, l, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_pod_open(&pod, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_report_add_pod(r, pod, 0, &m, 1.0, t, l, &err), 0, "%s", err.msg);

	n = pf_report_format(r, PF_REPORT_TEXT, NULL, 0);
	text = malloc((size_t)n + 1);
	pf_report_format(r, PF_REPORT_TEXT, text, (size_t)n + 1);
	cr_assert(strstr(text, "train       softmax ("), "%s", text);
	cr_assert(strstr(text, "2 cores x 8 rows\n"), "%s", text);
	cr_assert(strstr(text, "lr          0.2 (linear rule from 0.1 at reference batch 8; "
			 "this batch 16), warm-up 0 steps\n"), "%s", text);
	cr_assert(strstr(text, "loss        1.5000 (first 3 steps) -> 1.5000 (last 3 steps), 3 "
			 "steps, 48 examples\n"), "%s", text);
	cr_assert(strstr(text, "verdict     input-bound\n"), "%s", text);
	cr_assert_null(strstr(text, "pod "), "%s", text);

	n = pf_report_format(r, PF_REPORT_JSON, NULL, 0);
	json = malloc((size_t)n + 1);
	pf_report_format(r, PF_REPORT_JSON, json, (size_t)n + 1);
	o = json_loads(json, 0, &jerr);
	cr_assert_not_null(o, "%s: %s", jerr.text, json);
	tr = json_object_get(o, "train");
	cr_assert_str_eq(json_string_value(json_object_get(tr, "verdict")), "input-bound");
	cr_assert_eq(json_integer_value(json_object_get(tr, "timed_steps")), 2);
	cr_assert_eq(json_integer_value(json_object_get(tr, "examples")), 48);
	cr_assert_eq(strlen(json_string_value(json_object_get(tr, "params_hash"))), 16);
	cr_assert(json_is_array(json_object_get(tr, "curve")));
	cr_assert_null(json_object_get(o, "pod"));
	json_decref(o);
	free(text);
	free(json);
	pf_report_free(r);
	pf_pod_close(pod);
	pf_train_log_free(l);
	pf_trainer_free(t);
}
