/* SPDX-License-Identifier: Apache-2.0 */
/* A training run's log (each step's input wait, compute, loss and rate;
 * the loss curve; held-out evaluations), its figures and verdict, and the
 * report's train and pod sections (the pod's gathered from every host).
 * The trainer itself is train.c's, the report object loader/report.c's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc_internal.h"
#include "pf_host.h"
#include "report_internal.h"

#define NAME_LEN 64

struct pf_train_log {
	uint64_t log_every;
	/* Per step, grown as needed. */
	uint64_t *wait_ns, *compute_ns, *reduce_ns;
	double *loss, *lr;
	size_t nsteps, cap;
	pf_train_point *curve;
	size_t ncurve, curve_cap;
	pf_train_eval *evals;
	size_t nevals, evals_cap;
	bool has_final;
	pf_train_eval final;
};

int pf_train_log_create(pf_train_log **out, uint64_t log_every)
{
	*out = pf_calloc(1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	(*out)->log_every = log_every;
	return 0;
}

void pf_train_log_free(pf_train_log *l)
{
	if (!l)
		return;
	pf_free(l->wait_ns);
	pf_free(l->compute_ns);
	pf_free(l->reduce_ns);
	pf_free(l->loss);
	pf_free(l->lr);
	pf_free(l->curve);
	pf_free(l->evals);
	pf_free(l);
}

static int grow(pf_train_log *l)
{
	size_t cap = l->cap ? l->cap * 2 : 1024;
	void **arr[] = { (void **)&l->wait_ns, (void **)&l->compute_ns, (void **)&l->reduce_ns,
			 (void **)&l->loss, (void **)&l->lr };

	/* Each array is 8-byte entries. */
	for (size_t i = 0; i < sizeof(arr) / sizeof(arr[0]); i++) {
		void *g = pf_realloc(*arr[i], cap * 8);

		if (!g)
			return -ENOMEM;
		*arr[i] = g;
	}
	l->cap = cap;
	return 0;
}

/* Close a curve point over the steps since the last one. */
static int close_point(pf_train_log *l, pf_train_point *point)
{
	uint64_t from = l->ncurve ? l->curve[l->ncurve - 1].step : 0;
	pf_train_point *p;
	double sum = 0;

	if (pf_grow(&l->curve, &l->curve_cap, l->ncurve + 1, sizeof(*p)) < 0)
		return -ENOMEM;
	for (uint64_t i = from; i < l->nsteps; i++)
		sum += l->loss[i];
	p = &l->curve[l->ncurve++];
	p->step = l->nsteps;
	p->steps = l->nsteps - from;
	p->loss = sum / (double)p->steps;
	p->lr = l->lr[l->nsteps - 1];
	if (point)
		*point = *p;
	return 1;
}

int pf_train_log_step(pf_train_log *l, uint64_t wait_ns, const pf_train_step *st, double lr,
		      pf_train_point *point)
{
	if (l->nsteps == l->cap && grow(l) < 0)
		return -ENOMEM;
	l->wait_ns[l->nsteps] = wait_ns;
	l->compute_ns[l->nsteps] = st->compute_ns;
	l->reduce_ns[l->nsteps] = st->reduce_ns;
	l->loss[l->nsteps] = st->loss;
	l->lr[l->nsteps] = lr;
	l->nsteps++;
	if (l->log_every && l->nsteps % l->log_every == 0)
		return close_point(l, point);
	return 0;
}

int pf_train_log_close(pf_train_log *l, pf_train_point *point)
{
	uint64_t last = l->ncurve ? l->curve[l->ncurve - 1].step : 0;

	return l->nsteps > last && l->log_every ? close_point(l, point) : 0;
}

int pf_train_log_eval(pf_train_log *l, const pf_eval_sums *sums, uint64_t dropped, bool final,
		      pf_train_eval *out)
{
	pf_train_eval e = {
		.step = l->nsteps,
		.records = sums->rows,
		.loss = sums->rows ? sums->loss_sum / (double)sums->rows : 0,
		.accuracy = sums->rows ? (double)sums->correct / (double)sums->rows : 0,
		.dropped = dropped,
	};

	if (final) {
		l->final = e;
		l->has_final = true;
	} else {
		if (pf_grow(&l->evals, &l->evals_cap, l->nevals + 1, sizeof(e)) < 0)
			return -ENOMEM;
		l->evals[l->nevals++] = e;
	}
	if (out)
		*out = e;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of n sorted values, in ms. */
static double pct_ms(const uint64_t *sorted, size_t n, double q)
{
	size_t k;

	if (!n)
		return 0;
	k = (size_t)ceil(q * (double)n);
	k = k ? k - 1 : 0;
	return (double)sorted[k < n ? k : n - 1] * 1e-6;
}

static double mean(const double *v, size_t from, size_t to)
{
	double s = 0;

	for (size_t i = from; i < to; i++)
		s += v[i];
	return to > from ? s / (double)(to - from) : 0;
}

int pf_train_log_figures(const pf_train_log *l, pf_train_figures *out)
{
	size_t n = l->nsteps > 1 ? l->nsteps - 1 : 0;
	size_t w = l->nsteps < PF_LOSS_WINDOW ? l->nsteps : PF_LOSS_WINDOW;
	uint64_t *sorted = pf_malloc((n ? n : 1) * 4 * sizeof(*sorted));
	uint64_t *step = sorted, *comp = sorted + n, *wait = comp + n, *red = wait + n;
	double wsum = 0, ssum = 0;

	memset(out, 0, sizeof(*out));
	if (!sorted)
		return -ENOMEM;
	/* The first step (the pipeline's fill) is left out. */
	for (size_t i = 0; i < n; i++) {
		uint64_t wt = l->wait_ns[i + 1], ct = l->compute_ns[i + 1];

		wait[i] = wt;
		comp[i] = ct;
		red[i] = l->reduce_ns[i + 1];
		step[i] = wt + ct;
		wsum += (double)wt;
		ssum += (double)(wt + ct);
		if ((double)wt > PF_INPUT_BOUND_SHARE * (double)(wt + ct))
			out->bound_steps++;
	}
	qsort(step, n, sizeof(*step), cmp_u64);
	qsort(comp, n, sizeof(*comp), cmp_u64);
	qsort(wait, n, sizeof(*wait), cmp_u64);
	qsort(red, n, sizeof(*red), cmp_u64);
	out->steps = l->nsteps;
	out->timed_steps = n;
	out->step_ms_p50 = pct_ms(step, n, 0.50);
	out->step_ms_p90 = pct_ms(step, n, 0.90);
	out->step_ms_p99 = pct_ms(step, n, 0.99);
	out->compute_ms_p50 = pct_ms(comp, n, 0.50);
	out->wait_ms_p50 = pct_ms(wait, n, 0.50);
	out->reduce_ms_p50 = pct_ms(red, n, 0.50);
	out->wait_fraction = ssum > 0 ? wsum / ssum : 0;
	out->bound_fraction = n ? (double)out->bound_steps / (double)n : 0;
	out->first_wait_ms = l->nsteps ? (double)l->wait_ns[0] * 1e-6 : 0;
	out->loss_first = mean(l->loss, 0, w);
	out->loss_last = mean(l->loss, l->nsteps - w, l->nsteps);
	out->loss_final_step = l->nsteps ? l->loss[l->nsteps - 1] : 0;
	out->verdict = out->bound_fraction > 0.5 ? "input-bound" : "compute-bound";
	pf_free(sorted);
	return 0;
}

/* ------------------------------------------------------------------ */
/* The train section                                                    */

static int nomem(pf_error *err, const char *what)
{
	return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory for the %s", what);
}

int pf_report_add_train(pf_report *r, pf_trainer *t, const pf_scaling_input *in,
			const pf_scaling_plan *plan, const pf_train_log *log, pf_error *err)
{
	pf_model *model = pf_trainer_model(t);
	const pf_model_config *mc = pf_model_get_config(model);
	uint64_t cores = in->cores ? in->cores : 1;
	unsigned window = log->nsteps < PF_LOSS_WINDOW ? (unsigned)log->nsteps : PF_LOSS_WINDOW;
	pf_train_figures f;
	pf_text txt = { 0 };
	json_t *o, *tr, *sub, *arr;
	char hash[24];
	double csum = 0, gflops = 0;
	size_t nparams;
	bool bad = false;

	pf_error_clear(err);
	if (pf_train_log_figures(log, &f) < 0)
		return nomem(err, "train section");
	/* The kernels' rate over compute time (all-reduce included). */
	for (size_t i = 0; i < log->nsteps; i++)
		csum += (double)log->compute_ns[i];
	if (csum > 0)
		gflops = pf_model_step_flops(model, (uint32_t)in->per_core_batch) * (double)cores *
			 (double)log->nsteps / csum;
	snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)pf_model_hash(model));
	(void)pf_model_dense(model, &nparams);
	if (mc->kind == PF_MODEL_EMBAG)
		nparams += (size_t)mc->vocab * mc->embed_dim;

	pf_text_printf(&txt, "train       %s (%s kernels), %zu parameters, %llu classes; %llu "
		       "core%s x %llu rows\n", pf_model_kind_name(mc->kind), mc->kernels, nparams,
		       (unsigned long long)mc->classes, (unsigned long long)cores,
		       cores == 1 ? "" : "s", (unsigned long long)in->per_core_batch);
	pf_text_printf(&txt, "lr          %.6g (%s rule from %.6g", plan->lr,
		       pf_lr_rule_name(plan->rule), in->ref_lr);
	if (in->ref_global_batch)
		pf_text_printf(&txt, " at reference batch %llu; this batch %llu",
			       (unsigned long long)in->ref_global_batch,
			       (unsigned long long)plan->global_batch);
	pf_text_printf(&txt, "), warm-up %llu steps\n", (unsigned long long)plan->warmup_steps);
	pf_text_printf(&txt, "loss        %.4f (first %u steps) -> %.4f (last %u steps), %llu "
		       "steps, %llu examples\n", f.loss_first, window, f.loss_last, window,
		       (unsigned long long)log->nsteps,
		       (unsigned long long)(log->nsteps * plan->global_batch));
	if (log->has_final)
		pf_text_printf(&txt, "held-out    loss %.4f, accuracy %.4f over %llu records (%llu "
			       "dropped)\n", log->final.loss, log->final.accuracy,
			       (unsigned long long)log->final.records,
			       (unsigned long long)log->final.dropped);
	pf_text_printf(&txt, "step time   p50 %.3f ms, p90 %.3f ms, p99 %.3f ms; compute p50 "
		       "%.3f ms", f.step_ms_p50, f.step_ms_p90, f.step_ms_p99, f.compute_ms_p50);
	if (in->hosts > 1)
		pf_text_printf(&txt, " (pod all-reduce p50 %.3f ms)", f.reduce_ms_p50);
	pf_text_printf(&txt, ", input wait p50 %.3f ms; %.2f GFLOP/s\n", f.wait_ms_p50, gflops);
	pf_text_printf(&txt, "input       waited %.1f%% of the step time; %llu of %llu steps "
		       "(%.1f%%) input-bound (wait > 5%% of the step); first batch after "
		       "%.1f ms\n", f.wait_fraction * 100, (unsigned long long)f.bound_steps,
		       (unsigned long long)f.timed_steps, f.bound_fraction * 100, f.first_wait_ms);
	pf_text_printf(&txt, "verdict     %s\n", f.verdict);

	tr = json_object();
	pf_json_put(tr, "model", pf_json_str(pf_model_kind_name(mc->kind)), &bad);
	pf_json_put(tr, "kernels", pf_json_str(mc->kernels), &bad);
	pf_json_put(tr, "classes", pf_json_u64(mc->classes), &bad);
	pf_json_put(tr, "cores", pf_json_u64(cores), &bad);
	pf_json_put(tr, "steps", pf_json_u64(log->nsteps), &bad);
	pf_json_put(tr, "examples", pf_json_u64(log->nsteps * plan->global_batch), &bad);
	pf_json_put(tr, "lr", pf_json_num(plan->lr), &bad);
	pf_json_put(tr, "lr_rule", pf_json_str(pf_lr_rule_name(plan->rule)), &bad);
	pf_json_put(tr, "ref_lr", pf_json_num(in->ref_lr), &bad);
	pf_json_put(tr, "ref_global_batch", pf_json_u64(in->ref_global_batch), &bad);
	pf_json_put(tr, "warmup_steps", pf_json_u64(plan->warmup_steps), &bad);
	pf_json_put(tr, "loss_first", pf_json_num(f.loss_first), &bad);
	pf_json_put(tr, "loss_last", pf_json_num(f.loss_last), &bad);
	pf_json_put(tr, "loss_final_step", pf_json_num(f.loss_final_step), &bad);
	sub = json_object();
	pf_json_put(sub, "p50", pf_json_num(f.step_ms_p50), &bad);
	pf_json_put(sub, "p90", pf_json_num(f.step_ms_p90), &bad);
	pf_json_put(sub, "p99", pf_json_num(f.step_ms_p99), &bad);
	pf_json_put(tr, "step_ms", sub, &bad);
	pf_json_put(tr, "compute_ms_p50", pf_json_num(f.compute_ms_p50), &bad);
	pf_json_put(tr, "input_wait_ms_p50", pf_json_num(f.wait_ms_p50), &bad);
	pf_json_put(tr, "allreduce_ms_p50", pf_json_num(f.reduce_ms_p50), &bad);
	pf_json_put(tr, "input_wait_fraction", pf_json_num(f.wait_fraction), &bad);
	pf_json_put(tr, "input_bound_fraction", pf_json_num(f.bound_fraction), &bad);
	pf_json_put(tr, "input_bound_steps", pf_json_u64(f.bound_steps), &bad);
	pf_json_put(tr, "timed_steps", pf_json_u64(f.timed_steps), &bad);
	pf_json_put(tr, "first_batch_wait_ms", pf_json_num(f.first_wait_ms), &bad);
	pf_json_put(tr, "verdict", pf_json_str(f.verdict), &bad);
	pf_json_put(tr, "gflop_per_s", pf_json_num(gflops), &bad);
	pf_json_put(tr, "params_hash", pf_json_str(hash), &bad);
	if (log->has_final) {
		sub = json_object();
		pf_json_put(sub, "loss", pf_json_num(log->final.loss), &bad);
		pf_json_put(sub, "accuracy", pf_json_num(log->final.accuracy), &bad);
		pf_json_put(sub, "records", pf_json_u64(log->final.records), &bad);
		pf_json_put(sub, "dropped", pf_json_u64(log->final.dropped), &bad);
		pf_json_put(tr, "eval", sub, &bad);
	}
	arr = json_array();
	for (size_t i = 0; i < log->ncurve; i++) {
		sub = json_object();
		pf_json_put(sub, "step", pf_json_u64(log->curve[i].step), &bad);
		pf_json_put(sub, "loss", pf_json_num(log->curve[i].loss), &bad);
		pf_json_put(sub, "lr", pf_json_num(log->curve[i].lr), &bad);
		if (json_array_append_new(arr, sub))
			bad = true;
	}
	pf_json_put(tr, "curve", arr, &bad);
	arr = json_array();
	for (size_t i = 0; i < log->nevals; i++) {
		sub = json_object();
		pf_json_put(sub, "step", pf_json_u64(log->evals[i].step), &bad);
		pf_json_put(sub, "loss", pf_json_num(log->evals[i].loss), &bad);
		pf_json_put(sub, "accuracy", pf_json_num(log->evals[i].accuracy), &bad);
		pf_json_put(sub, "records", pf_json_u64(log->evals[i].records), &bad);
		if (json_array_append_new(arr, sub))
			bad = true;
	}
	pf_json_put(tr, "eval_curve", arr, &bad);
	o = json_object();
	pf_json_put(o, "train", tr, &bad);
	return pf_report_section(r, PF_SECTION_TRAIN, &txt, o, bad, err);
}

/* ------------------------------------------------------------------ */
/* The pod section                                                      */

/* What each host sends host 0 (the same library on every host, so the
 * layout agrees). */
typedef struct host_stats {
	char name[NAME_LEN];
	uint64_t steps, records, bytes_read, params_hash;
	uint64_t count_files, count_decompressed;	/* stream files it counted */
	double seconds, wait_fraction, compute_ms_p50, loss;
	double first_batch_s, open_s;	/* the first batch; opening the dataset */
	/* Where its time went (pf_loader_verdict_compute()): each stage's
	 * busy share, the busier stage, a step's mean time and next()'s
	 * latency. */
	double io_busy, decode_busy, consumer_wait, step_ms, next_p50_us, next_p99_us;
	char bottleneck[16];
	uint32_t index, model;
} host_stats;

typedef struct pod_view {
	double total_rps, mean_rps, slowest_s;
	uint32_t straggler, fastest;
	uint32_t step_fast, step_slow;	/* the hosts of the least and most step_ms */
	bool steps_equal, models_equal;
} pod_view;

static double host_rps(const host_stats *h)
{
	return h->seconds > 0 ? (double)h->records / h->seconds : 0;
}

static double host_mbps(const host_stats *h)
{
	return h->seconds > 0 ? (double)h->bytes_read / h->seconds / 1e6 : 0;
}

static void pod_derive(const host_stats *all, uint32_t hosts, pod_view *v)
{
	uint64_t records = 0;

	memset(v, 0, sizeof(*v));
	v->steps_equal = v->models_equal = true;
	for (uint32_t i = 0; i < hosts; i++) {
		const host_stats *h = &all[i];

		records += h->records;
		if (h->seconds > v->slowest_s)
			v->slowest_s = h->seconds;
		if (host_rps(h) < host_rps(&all[v->straggler]))
			v->straggler = i;
		if (host_rps(h) > host_rps(&all[v->fastest]))
			v->fastest = i;
		if (h->step_ms < all[v->step_fast].step_ms)
			v->step_fast = i;
		if (h->step_ms > all[v->step_slow].step_ms)
			v->step_slow = i;
		if (h->steps != all[0].steps)
			v->steps_equal = false;
		if (h->model && h->params_hash != all[0].params_hash)
			v->models_equal = false;
	}
	/* The pod is done when its slowest host is. */
	v->total_rps = v->slowest_s > 0 ? (double)records / v->slowest_s : 0;
	v->mean_rps = v->total_rps / hosts;
}

/* The busy share of a host's bottleneck stage. */
static double busy_of(const host_stats *h)
{
	return strcmp(h->bottleneck, "decode") ? h->io_busy : h->decode_busy;
}

/* How much longer the slowest host's step is than the fastest's. */
static double step_spread(const host_stats *all, const pod_view *v)
{
	double lo = all[v->step_fast].step_ms;

	return lo > 0 ? all[v->step_slow].step_ms / lo - 1 : 0;
}

static void pod_text(pf_text *t, const host_stats *all, uint32_t hosts, const char *transport,
		     bool model, const pod_view *v)
{
	const host_stats *s = &all[v->straggler], *fast = &all[v->fastest];

	pf_text_printf(t, "pod         %u hosts (%s): %.0f records/s in all (records over the "
		       "slowest host's %.3f s), %.0f a host\n", hosts, transport, v->total_rps,
		       v->slowest_s, v->mean_rps);
	pf_text_printf(t, "  host      steps     records   seconds   records/s  MB/s read  first "
		       "batch s  counted MB%s  name\n", model ? "  input wait" : "");
	for (uint32_t i = 0; i < hosts; i++) {
		const host_stats *h = &all[i];

		pf_text_printf(t, "  %-6u %8llu %11llu %9.3f %11.0f %10.1f", h->index,
			       (unsigned long long)h->steps, (unsigned long long)h->records,
			       h->seconds, host_rps(h), host_mbps(h));
		pf_text_printf(t, " %14.3f %11.1f", h->first_batch_s,
			       (double)h->count_decompressed / 1e6);
		if (model)
			pf_text_printf(t, " %10.1f%%", h->wait_fraction * 100);
		pf_text_printf(t, "  %s\n", h->name);
	}
	pf_text_printf(t, "straggler   host %u (%s): %.0f records/s, %.1f%% below the fastest "
		       "(host %u); its bottleneck %s (busy %.0f%%)\n", s->index, s->name,
		       host_rps(s),
		       host_rps(fast) > 0 ? 100.0 * (1.0 - host_rps(s) / host_rps(fast)) : 0,
		       fast->index, s->bottleneck, busy_of(s) * 100);
	pf_text_printf(t, "step time   %.3f ms (host %u) to %.3f ms (host %u) a step: the "
		       "slowest %.1f%% above the fastest\n", all[v->step_fast].step_ms,
		       all[v->step_fast].index, all[v->step_slow].step_ms,
		       all[v->step_slow].index, step_spread(all, v) * 100);
	pf_text_printf(t, "stages      busy per host (io, decode; the consumer waiting):");
	for (uint32_t i = 0; i < hosts; i++)
		pf_text_printf(t, "%s host %u %.0f%%, %.0f%%; %.0f%%", i ? "," : "", all[i].index,
			       all[i].io_busy * 100, all[i].decode_busy * 100,
			       all[i].consumer_wait * 100);
	pf_text_printf(t, "\n");
	if (v->steps_equal) {
		pf_text_printf(t, "steps       %llu on every host\n",
			       (unsigned long long)all[0].steps);
	} else {
		pf_text_printf(t, "steps       NOT EQUAL:");
		for (uint32_t i = 0; i < hosts; i++)
			pf_text_printf(t, " host %u %llu%s", i, (unsigned long long)all[i].steps,
				       i + 1 < hosts ? "," : "");
		pf_text_printf(t, " -- every host must take the same steps\n");
	}
	if (model)
		pf_text_printf(t, "model       %s\n", v->models_equal ?
			       "the same parameters on every host" :
			       "PARAMETERS DIFFER between hosts");
}

static json_t *pod_json(const host_stats *all, uint32_t hosts, const char *transport,
			bool model, const pod_view *v, bool *bad)
{
	const host_stats *s = &all[v->straggler], *fast = &all[v->fastest];
	json_t *o = json_object(), *sub = json_object(), *arr = json_array();

	/* The summary first (a reader looking at the text of old sees the
	 * pod's records_per_s before the hosts'). */
	pf_json_put(o, "hosts", pf_json_u64(hosts), bad);
	pf_json_put(o, "transport", pf_json_str(transport), bad);
	pf_json_put(o, "records_per_s", pf_json_num(v->total_rps), bad);
	pf_json_put(o, "per_host_records_per_s", pf_json_num(v->mean_rps), bad);
	pf_json_put(o, "seconds", pf_json_num(v->slowest_s), bad);
	pf_json_put(sub, "index", pf_json_u64(s->index), bad);
	pf_json_put(sub, "name", pf_json_str(s->name), bad);
	pf_json_put(sub, "records_per_s", pf_json_num(host_rps(s)), bad);
	pf_json_put(sub, "below_fastest", pf_json_num(host_rps(fast) > 0 ?
			1.0 - host_rps(s) / host_rps(fast) : 0), bad);
	pf_json_put(sub, "bottleneck", pf_json_str(s->bottleneck), bad);
	pf_json_put(sub, "bottleneck_busy", pf_json_num(busy_of(s)), bad);
	pf_json_put(o, "straggler", sub, bad);
	sub = json_object();
	pf_json_put(sub, "min", pf_json_num(all[v->step_fast].step_ms), bad);
	pf_json_put(sub, "min_host", pf_json_u64(all[v->step_fast].index), bad);
	pf_json_put(sub, "max", pf_json_num(all[v->step_slow].step_ms), bad);
	pf_json_put(sub, "max_host", pf_json_u64(all[v->step_slow].index), bad);
	pf_json_put(sub, "spread", pf_json_num(step_spread(all, v)), bad);
	pf_json_put(o, "step_ms", sub, bad);
	pf_json_put(o, "steps_equal", pf_json_bool(v->steps_equal), bad);
	if (model)
		pf_json_put(o, "models_equal", pf_json_bool(v->models_equal), bad);
	for (uint32_t i = 0; i < hosts; i++) {
		const host_stats *h = &all[i];
		char hash[24];
		json_t *stages;

		sub = json_object();
		pf_json_put(sub, "index", pf_json_u64(h->index), bad);
		pf_json_put(sub, "name", pf_json_str(h->name), bad);
		pf_json_put(sub, "steps", pf_json_u64(h->steps), bad);
		pf_json_put(sub, "records", pf_json_u64(h->records), bad);
		pf_json_put(sub, "seconds", pf_json_num(h->seconds), bad);
		pf_json_put(sub, "records_per_s", pf_json_num(host_rps(h)), bad);
		pf_json_put(sub, "first_batch_seconds", pf_json_num(h->first_batch_s), bad);
		pf_json_put(sub, "open_seconds", pf_json_num(h->open_s), bad);
		pf_json_put(sub, "open_count_files", pf_json_u64(h->count_files), bad);
		pf_json_put(sub, "open_count_decompressed", pf_json_u64(h->count_decompressed), bad);
		pf_json_put(sub, "mb_per_s_read", pf_json_num(host_mbps(h)), bad);
		pf_json_put(sub, "step_ms", pf_json_num(h->step_ms), bad);
		pf_json_put(sub, "next_p50_us", pf_json_num(h->next_p50_us), bad);
		pf_json_put(sub, "next_p99_us", pf_json_num(h->next_p99_us), bad);
		pf_json_put(sub, "bottleneck", pf_json_str(h->bottleneck), bad);
		stages = json_object();
		pf_json_put(stages, "io", pf_json_num(h->io_busy), bad);
		pf_json_put(stages, "decode", pf_json_num(h->decode_busy), bad);
		pf_json_put(stages, "consumer_wait", pf_json_num(h->consumer_wait), bad);
		pf_json_put(sub, "stages", stages, bad);
		if (model) {
			snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)h->params_hash);
			pf_json_put(sub, "input_wait_fraction", pf_json_num(h->wait_fraction), bad);
			pf_json_put(sub, "compute_ms_p50", pf_json_num(h->compute_ms_p50), bad);
			pf_json_put(sub, "loss", pf_json_num(h->loss), bad);
			pf_json_put(sub, "params_hash", pf_json_str(hash), bad);
		}
		if (json_array_append_new(arr, sub))
			*bad = true;
	}
	pf_json_put(o, "host", arr, bad);
	sub = json_object();
	pf_json_put(sub, "pod", o, bad);
	return sub;
}

int pf_report_add_pod(pf_report *r, pf_pod *pod, uint32_t host_index,
		      const pf_loader_metrics *m, double seconds, pf_trainer *t,
		      const pf_train_log *log, pf_error *err)
{
	uint32_t hosts, rank;
	host_stats mine, *all = NULL;
	pf_train_figures f;
	pod_view v;
	pf_text txt = { 0 };
	json_t *o;
	bool bad = false;
	int ret;

	pf_error_clear(err);
	if (!pod || strcmp(pf_pod_transport(pod), "mpi"))
		return 0;	/* one host: no pod to report */
	hosts = pf_pod_size(pod);
	rank = pf_pod_rank(pod);
	memset(&mine, 0, sizeof(mine));
	if (gethostname(mine.name, sizeof(mine.name) - 1) < 0)
		snprintf(mine.name, sizeof(mine.name), "?");
	mine.index = host_index;
	mine.steps = m->steps;
	mine.records = m->records;
	mine.bytes_read = m->bytes_read;
	mine.seconds = seconds;
	mine.first_batch_s = (double)m->first_batch_ns * 1e-9;
	mine.open_s = (double)(m->open_manifest_ns + m->open_index_ns + m->open_count_ns +
			       m->open_exchange_ns) * 1e-9;
	mine.count_files = m->open_count_files;
	mine.count_decompressed = m->open_count_decompressed;
	{
		pf_run_info run = { .seconds = seconds > 0 ? seconds : 1e-9 };
		pf_loader_verdict vd;

		pf_loader_verdict_compute(m, &run, &vd);
		mine.io_busy = vd.io_busy;
		mine.decode_busy = vd.decode_busy;
		mine.consumer_wait = vd.consumer_wait;
		mine.next_p50_us = vd.next_p50_us;
		mine.next_p99_us = vd.next_p99_us;
		mine.step_ms = m->steps ? seconds * 1e3 / (double)m->steps : 0;
		snprintf(mine.bottleneck, sizeof(mine.bottleneck), "%s", vd.bottleneck);
	}
	if (t && log) {
		if (pf_train_log_figures(log, &f) < 0)
			return nomem(err, "pod section");
		mine.model = 1;
		mine.params_hash = pf_model_hash(pf_trainer_model(t));
		mine.wait_fraction = f.wait_fraction;
		mine.compute_ms_p50 = f.compute_ms_p50;
		mine.loss = f.loss_final_step;
	}
	/* Host 0 without room for the gather fails; its tool then leaves
	 * without MPI_Finalize, and mpirun ends the others. */
	if (rank == 0 && !(all = pf_calloc(hosts, sizeof(*all))))
		return nomem(err, "pod section");
	ret = pf_pod_gather(pod, &mine, sizeof(mine), all, err);
	if (ret < 0 || rank != 0) {
		pf_free(all);
		return ret < 0 ? ret : 0;
	}
	pod_derive(all, hosts, &v);
	pod_text(&txt, all, hosts, pf_pod_transport(pod), mine.model, &v);
	o = pod_json(all, hosts, pf_pod_transport(pod), mine.model, &v, &bad);
	pf_free(all);
	ret = r ? pf_report_section(r, PF_SECTION_POD, &txt, o, bad, err) : 0;
	if (!r) {
		pf_text_free(&txt);
		json_decref(o);
	}
	return ret < 0 ? ret : v.steps_equal ? 0 : 1;
}

/* ------------------------------------------------------------------ */
/* The ladder section                                                   */

int pf_report_add_ladder(pf_report *r, const pf_ladder_rung *rungs, size_t n, pf_error *err)
{
	pf_text t = { 0 };
	json_t *o, *arr;
	double base;
	size_t flagged = SIZE_MAX;
	bool bad = false;

	pf_error_clear(err);
	if (!n)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "a ladder of no rung");
	for (size_t i = 1; i < n; i++)
		if (rungs[i].hosts <= rungs[i - 1].hosts)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "the ladder's rungs do not ascend (%u hosts after %u)",
					    rungs[i].hosts, rungs[i - 1].hosts);
	/* Per-host throughput against the first rung's. */
	base = rungs[0].per_host_records_per_s;
	o = json_object();
	arr = json_array();
	pf_text_printf(&t, "%-6s %16s %16s %11s  %s\n", "hosts", "records/s (pod)", "per host",
		       "efficiency", "steps");
	for (size_t i = 0; i < n; i++) {
		const pf_ladder_rung *g = &rungs[i];
		double eff = base > 0 ? g->per_host_records_per_s / base : 0;
		json_t *e = json_object();

		if (flagged == SIZE_MAX && eff < PF_LADDER_EFFICIENCY_FLOOR)
			flagged = i;
		pf_text_printf(&t, "%-6u %16.0f %16.0f %10.1f%%  %s%s\n", g->hosts,
			       g->records_per_s, g->per_host_records_per_s, eff * 100,
			       g->steps_equal ? "equal" : "NOT EQUAL",
			       i == flagged ? "   <- first rung under 90%" : "");
		pf_json_put(e, "hosts", pf_json_u64(g->hosts), &bad);
		pf_json_put(e, "records_per_s", pf_json_num(g->records_per_s), &bad);
		pf_json_put(e, "per_host_records_per_s", pf_json_num(g->per_host_records_per_s),
			    &bad);
		pf_json_put(e, "efficiency", pf_json_num(eff), &bad);
		pf_json_put(e, "steps_equal", pf_json_bool(g->steps_equal), &bad);
		pf_json_put(e, "ideal_records_per_s", pf_json_num(base * g->hosts), &bad);
		pf_json_put(e, "global_batch", pf_json_u64(g->global_batch), &bad);
		pf_json_put(e, "steps", pf_json_u64(g->steps), &bad);
		pf_json_put(e, "lr", g->lr > 0 ? pf_json_num(g->lr) : json_null(), &bad);
		if (json_array_append_new(arr, e))
			bad = true;
	}
	if (flagged != SIZE_MAX)
		pf_text_printf(&t, "scaling: efficiency falls under 90%% at %u hosts (%.1f%%): "
			       "find why before scaling further\n", rungs[flagged].hosts,
			       base > 0 ? rungs[flagged].per_host_records_per_s / base * 100 : 0);
	else
		pf_text_printf(&t, "scaling: every rung at or above 90%% efficiency\n");
	pf_json_put(o, "rungs", arr, &bad);
	pf_json_put(o, "first_under_90", flagged != SIZE_MAX ? pf_json_u64(rungs[flagged].hosts)
							     : json_null(), &bad);
	return pf_report_section(r, PF_SECTION_LADDER, &t, o, bad, err);
}
