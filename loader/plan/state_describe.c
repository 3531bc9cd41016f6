/* SPDX-License-Identifier: Apache-2.0 */
/* A state for a person or a program (pf_state_describe()): the readable
 * fields of a loader's, a packing loader's or a mixture's state (and its
 * sources'), as lines of text or one JSON object, from the same figures.
 * The JSON's keys are those the Python package's state_dict() carries
 * beside the blob, and checks against it at resume.  Not here: the
 * encoding (state.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "json_internal.h"
#include "plan_internal.h"

static const char *shuffle_name(const pf_state_info *i)
{
	return i->global_shuffle ? "global" : i->shuffle ? "window" : "off";
}

/* (pf_pack_mode_name() is the pack room's, above this one.) */
static const char *pack_mode_name(uint32_t mode)
{
	return mode == PF_PACK_CONCAT ? "concat" : "first_fit";
}

static void fingerprint(uint64_t v, char hex[17])
{
	snprintf(hex, 17, "%016" PRIx64, v);
}

/* The fields every state has (a mixture's: its topology and next step),
 * into obj. */
static void put_info(json_t *obj, const pf_state_info *i, const char *kind, bool *bad)
{
	char hex[17];

	fingerprint(i->dataset_fingerprint, hex);
	pf_json_put(obj, "kind", pf_json_str(kind), bad);
	pf_json_put(obj, "host_index", pf_json_u64(i->host_index), bad);
	pf_json_put(obj, "num_hosts", pf_json_u64(i->num_hosts), bad);
	pf_json_put(obj, "cores", pf_json_u64(i->cores_per_host), bad);
	pf_json_put(obj, "per_core_batch", pf_json_u64(i->per_core_batch), bad);
	pf_json_put(obj, "epoch", pf_json_u64(i->epoch), bad);
	pf_json_put(obj, "fresh", pf_json_bool(i->fresh), bad);
	pf_json_put(obj, "step_in_epoch", pf_json_u64(i->step_in_epoch), bad);
	pf_json_put(obj, "global_step", pf_json_u64(i->global_step), bad);
	pf_json_put(obj, "records_left", pf_json_u64(i->records_left), bad);
	pf_json_put(obj, "dataset_records", pf_json_u64(i->dataset_records), bad);
	pf_json_put(obj, "dataset_fingerprint", pf_json_str(hex), bad);
	pf_json_put(obj, "seed", pf_json_u64(i->seed), bad);
	pf_json_put(obj, "shuffle", pf_json_str(shuffle_name(i)), bad);
	pf_json_put(obj, "remainder", pf_json_str(i->remainder ? "wrap" : "drop"), bad);
	pf_json_put(obj, "skipped_steps", pf_json_u64(i->skipped_steps), bad);
	pf_json_put(obj, "pack_length", pf_json_u64(i->pack_length), bad);
	if (!i->pack_length)
		return;
	pf_json_put(obj, "pack_mode", pf_json_str(pack_mode_name(i->pack_mode)),
		    bad);
	pf_json_put(obj, "pack_pool", pf_json_u64(i->pack_pool), bad);
	pf_json_put(obj, "pack_features", pf_json_u64(i->pack_features), bad);
}

static void text_info(pf_text *t, const pf_state_info *i, const char *kind)
{
	char hex[17];

	fingerprint(i->dataset_fingerprint, hex);
	pf_text_printf(t, "kind          %s\n", kind);
	pf_text_printf(t, "topology      host %u of %u, %u cores x %u %s\n", i->host_index,
		       i->num_hosts, i->cores_per_host, i->per_core_batch,
		       i->pack_length ? "packed rows" : "records");
	if (i->sources) {
		pf_text_printf(t, "position      global step %" PRIu64 " next\n", i->global_step);
		pf_text_printf(t, "mixture       %u sources, digest %s (their names, shares and "
			       "rules)\n", i->sources, hex);
	} else {
		pf_text_printf(t, "position      epoch %u %s, %" PRIu64 " steps of it delivered, "
			       "global step %" PRIu64 " next\n", i->epoch,
			       i->fresh ? "(not started)" : "(started)", i->step_in_epoch,
			       i->global_step);
		pf_text_printf(t, "records left  %" PRIu64 " of the epoch on this host%s\n",
			       i->records_left, i->pack_length ? " (the inner loader's, to read)"
							       : "");
		pf_text_printf(t, "dataset       %" PRIu64 " records, fingerprint %s\n",
			       i->dataset_records, hex);
		pf_text_printf(t, "order         seed %" PRIu64 ", shuffle %s, remainder %s\n",
			       i->seed, shuffle_name(i), i->remainder ? "wrap" : "drop");
	}
	if (i->pack_length)
		pf_text_printf(t, "packing       rows of %u, %s, pool %u, %u packed features\n",
			       i->pack_length, pack_mode_name(i->pack_mode),
			       i->pack_pool, i->pack_features);
	if (i->skipped_steps)
		pf_text_printf(t, "skipped       %" PRIu64 " steps (skip_steps, in all: the "
			       "position counts them)\n", i->skipped_steps);
}

/* A mixture's sources: each's name, the rows of its batch taken, and its
 * loader's place. */
static int sources(const pf_mix_state *ms, json_t *arr, pf_text *t, bool *bad, pf_error *err)
{
	for (size_t k = 0; k < ms->nsources; k++) {
		const pf_mix_source_state *ss = &ms->sources[k];
		pf_state_info si;
		char hex[17], name[80];
		int ret = pf_state_inspect(ss->state, ss->state_len, &si, err);

		if (ret < 0) {
			char msg[sizeof(err->msg)];

			snprintf(msg, sizeof(msg), "source %zu's state: %.*s", k,
				 (int)sizeof(msg) - 40, err->msg);
			memcpy(err->msg, msg, sizeof(msg));
			return ret;
		}
		fingerprint(si.dataset_fingerprint, hex);
		snprintf(name, sizeof(name), "%s", k < ms->nnames ? ms->names[k] : "");
		if (arr) {
			json_t *o = json_object();

			if (!o) {
				*bad = true;
				continue;
			}
			if (k < ms->nnames)
				pf_json_put(o, "name", pf_json_str(name), bad);
			pf_json_put(o, "rows_taken", pf_json_u64(ss->consumed), bad);
			pf_json_put(o, "epoch", pf_json_u64(si.epoch), bad);
			pf_json_put(o, "step_in_epoch", pf_json_u64(si.step_in_epoch), bad);
			pf_json_put(o, "global_step", pf_json_u64(si.global_step), bad);
			pf_json_put(o, "records_left", pf_json_u64(si.records_left), bad);
			pf_json_put(o, "dataset_records", pf_json_u64(si.dataset_records), bad);
			pf_json_put(o, "dataset_fingerprint", pf_json_str(hex), bad);
			if (ss->bridge_batch)
				pf_json_put(o, "bridge_epoch", pf_json_u64(ss->bridge_epoch), bad);
			if (json_array_append_new(arr, o) < 0)
				*bad = true;
		} else {
			pf_text_printf(t, "source %-6zu %s%sepoch %u, %" PRIu64 " of its batches "
				       "delivered, %u rows of the next taken, %" PRIu64 " records "
				       "left; %" PRIu64 " records, fingerprint %s%s\n", k, name,
				       name[0] ? ": " : "", si.epoch, si.step_in_epoch, ss->consumed,
				       si.records_left, si.dataset_records, hex,
				       ss->bridge_batch ? " (an elastic resume's bridge)" : "");
		}
	}
	return 0;
}

int64_t pf_state_describe(const void *blob, size_t len, pf_report_output fmt, char *dst,
			  size_t cap, pf_error *err)
{
	bool mix = len >= 4 && !memcmp(blob, "PFMX", 4), bad = false;
	pf_mix_state ms = { 0 };
	pf_state_info info;
	const char *kind;
	json_t *obj = NULL, *arr = NULL;
	pf_text t = { 0 };
	char *out = NULL;
	size_t n = 0;
	int ret;

	pf_error_clear(err);
	if (fmt != PF_REPORT_TEXT && fmt != PF_REPORT_JSON)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "a state is described as text or JSON, not format %d", (int)fmt);
	ret = pf_state_inspect(blob, len, &info, err);
	if (ret == 0 && mix)
		ret = pf_mix_state_decode(&ms, blob, len, err);
	if (ret < 0)
		return ret;
	kind = mix ? "mixture" : info.pack_length ? "packing" : "loader";
	if (fmt == PF_REPORT_JSON) {
		obj = json_object();
		arr = mix ? json_array() : NULL;
		if (!obj || (mix && !arr)) {
			ret = -ENOMEM;
			goto out;
		}
		put_info(obj, &info, kind, &bad);
		ret = mix ? sources(&ms, arr, NULL, &bad, err) : 0;
		if (mix) {
			pf_json_put(obj, "sources", arr, &bad);
			arr = NULL;
		}
		out = ret == 0 && !bad ? pf_json_text(obj, false, &n) : NULL;
		if (ret == 0 && !out)
			ret = -ENOMEM;
	} else {
		text_info(&t, &info, kind);
		ret = mix ? sources(&ms, NULL, &t, &bad, err) : 0;
		if (ret == 0 && t.failed)
			ret = -ENOMEM;
		out = t.s;
		n = t.len;
	}
	if (ret == 0 && cap) {
		size_t c = n < cap - 1 ? n : cap - 1;

		memcpy(dst, out, c);
		dst[c] = '\0';
	}
out:
	json_decref(obj);
	json_decref(arr);
	if (fmt == PF_REPORT_JSON)
		pf_free(out);
	pf_text_free(&t);
	pf_mix_state_release(&ms);
	if (ret == -ENOMEM && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory describing the state");
	return ret < 0 ? ret : (int64_t)n;
}
