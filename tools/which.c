/* SPDX-License-Identifier: Apache-2.0 */
/* `loadbench which --steps A:B [the run's options] SHARD...`: for each
 * step asked, each core's rows and the file and record number each holds
 * (packed: each piece of a record in a row; mixed: its source), as the
 * run delivers them, from the loader's plan (pf_loader_records_of():
 * the loader is made plan_only, nothing is read but what planning
 * reads).  Text for people, --json one object for scripts. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_internal.h"
#include "loadbench.h"

int lb_which_parse_steps(const char *v, lb_which *w)
{
	if (!strchr(v, ':')) {
		if (cli_parse_u64("--steps", v, 0, UINT64_MAX - 1, false, &w->from) < 0)
			return -EINVAL;
		w->to = w->from + 1;
		return 0;
	}
	if (cli_parse_range("--steps", v, &w->from, &w->to) < 0)
		return -EINVAL;
	if (w->to == w->from) {
		cli_usage("--steps: '%s' names no step", v);
		return -EINVAL;
	}
	return 0;
}

/* The name of a ref's source (a mixture's), "" otherwise. */
static const char *source_name(const pf_loader *l, uint32_t k, pf_source_metrics *sm)
{
	if (!pf_loader_sources(l) || pf_loader_source_metrics(l, k, sm) < 0 || !sm->name)
		return "";
	return sm->name;
}

static void text_step(const pf_loader *l, uint64_t step, const pf_record_ref *refs, int64_t n,
		      bool packed)
{
	pf_source_metrics sm;

	printf("step %" PRIu64 " (epoch %u, step %" PRIu64 " of it)\n", step,
	       n ? refs[0].epoch : 0, n ? refs[0].step : 0);
	for (int64_t i = 0; i < n; i++) {
		const pf_record_ref *r = &refs[i];
		const char *src = source_name(l, r->source, &sm);

		printf("  core %u row %-4u", r->core, r->row);
		if (*src)
			printf(" source %s (its epoch %u)", src, r->epoch);
		if (packed)
			printf(" segment %-3u values %u..%u of the row: the record's %u..%u",
			       r->segment, r->at, r->at + r->count, r->from, r->from + r->count);
		printf("  %s record %" PRIu64 "\n", pf_loader_file(l, r->source, r->file),
		       r->record);
	}
}

static json_t *json_step(const pf_loader *l, uint64_t step, const pf_record_ref *refs,
			 int64_t n, bool packed, bool *bad)
{
	json_t *o = json_object(), *rows = json_array();
	pf_source_metrics sm;

	if (!o || !rows) {
		json_decref(o);
		json_decref(rows);
		*bad = true;
		return NULL;
	}
	pf_json_put(o, "step", pf_json_u64(step), bad);
	pf_json_put(o, "epoch", pf_json_u64(n ? refs[0].epoch : 0), bad);
	pf_json_put(o, "step_in_epoch", pf_json_u64(n ? refs[0].step : 0), bad);
	for (int64_t i = 0; i < n; i++) {
		const pf_record_ref *r = &refs[i];
		const char *src = source_name(l, r->source, &sm);
		json_t *row = json_object();

		if (!row) {
			*bad = true;
			break;
		}
		pf_json_put(row, "core", pf_json_u64(r->core), bad);
		pf_json_put(row, "row", pf_json_u64(r->row), bad);
		if (*src) {
			pf_json_put(row, "source", pf_json_str(src), bad);
			pf_json_put(row, "source_epoch", pf_json_u64(r->epoch), bad);
		}
		pf_json_put(row, "file", pf_json_str(pf_loader_file(l, r->source, r->file)), bad);
		pf_json_put(row, "record", pf_json_u64(r->record), bad);
		if (packed) {
			pf_json_put(row, "segment", pf_json_u64(r->segment), bad);
			pf_json_put(row, "at", pf_json_u64(r->at), bad);
			pf_json_put(row, "from", pf_json_u64(r->from), bad);
			pf_json_put(row, "count", pf_json_u64(r->count), bad);
		}
		if (json_array_append_new(rows, row) < 0)
			*bad = true;
	}
	pf_json_put(o, "rows", rows, bad);
	return o;
}

/* The refs of step into *refs (grown as needed).  @return their count,
 * or <0 with err. */
static int64_t refs_of(const pf_loader *l, uint64_t step, pf_record_ref **refs, size_t *cap,
		       pf_error *err)
{
	int64_t n = pf_loader_records_of(l, step, *refs, *cap, err);

	if (n > 0 && (size_t)n > *cap) {
		pf_record_ref *g = realloc(*refs, (size_t)n * sizeof(**refs));

		if (!g)
			return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
		*refs = g;
		*cap = (size_t)n;
		n = pf_loader_records_of(l, step, *refs, *cap, err);
	}
	return n;
}

int lb_which_print(const pf_loader_config *ucfg, const lb_which *w, bool json)
{
	pf_loader_config cfg = *ucfg;
	pf_record_ref *refs = NULL;
	json_t *top = NULL, *steps = NULL;
	size_t cap = 0;
	pf_loader *l = NULL;
	bool bad = false;
	pf_error err;
	int ret = 1;

	/* The plan only: no thread, no record read; the steps asked are
	 * global steps, whatever the run's end (its epochs) is. */
	cfg.plan_only = true;
	cfg.max_steps = 0;
	pf_error_clear(&err);
	if (pf_loader_create(&l, &cfg, &err) < 0) {
		cli_print_error(&err);
		return 1;
	}
	/* The steps asked must be the run's: the last one first, so that
	 * nothing is printed of a range that runs past the end. */
	if (w->to != UINT64_MAX && refs_of(l, w->to - 1, &refs, &cap, &err) < 0) {
		cli_print_error(&err);
		goto out;
	}
	if (json) {
		top = json_object();
		steps = json_array();
		if (!top || !steps) {
			cli_fail("out of memory");
			goto out;
		}
		pf_json_put(top, "host_index", pf_json_u64(cfg.host_index), &bad);
		pf_json_put(top, "num_hosts", pf_json_u64(cfg.num_hosts ? cfg.num_hosts : 1), &bad);
	}
	for (uint64_t t = w->from; t < w->to; t++) {
		int64_t n = refs_of(l, t, &refs, &cap, &err);

		/* "A:": to the run's end, where the steps stop. */
		if (n == -ERANGE && w->to == UINT64_MAX && t > w->from)
			break;
		if (n < 0) {
			cli_print_error(&err);
			goto out;
		}
		if (json) {
			json_t *o = json_step(l, t, refs, n, cfg.pack_length != 0, &bad);

			if (!o || json_array_append_new(steps, o) < 0)
				bad = true;
		} else {
			text_step(l, t, refs, n, cfg.pack_length != 0);
		}
	}
	ret = 0;
	if (json) {
		pf_json_put(top, "steps", steps, &bad);
		steps = NULL;
		ret = cli_json_print(top, bad);
		top = NULL;
	}
out:
	json_decref(top);
	json_decref(steps);
	free(refs);
	pf_loader_free(l);
	return ret;
}
