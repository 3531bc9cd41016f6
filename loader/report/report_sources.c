/* SPDX-License-Identifier: Apache-2.0 */
/* The report's sources section: a mixture's sources, each with its share
 * as configured and as realised (of the records, or of a packed mixture's
 * tokens), its records (and tokens), the epochs it started and its read
 * rate (pf_report_add_sources()).  Not here: the loader's own
 * figures (report.c), the regions (report_regions.c). */
#include <errno.h>

#include "common_internal.h"
#include "report_internal.h"

int pf_report_add_sources(pf_report *r, const pf_source_metrics *s, size_t n, pf_error *err)
{
	pf_text t = { 0 };
	json_t *o, *arr;
	bool bad = false;

	pf_error_clear(err);
	if (!n)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "no sources to report");
	o = json_object();
	arr = json_array();
	if (!o || !arr) {
		json_decref(o);
		json_decref(arr);
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory for the report's sources");
	}
	for (size_t i = 0; i < n; i++) {
		const pf_source_metrics *m = &s[i];
		double mbs = m->seconds > 0 ? (double)m->bytes_read / 1e6 / m->seconds : 0;
		json_t *e = json_object();

		/* A packed mixture's weights may count tokens: its share is
		 * then the tokens', its records' share said beside. */
		if (m->weighs_tokens)
			pf_text_printf(&t, "source      %s: share %.3f of %.3f of the tokens (%llu "
				       "tokens), %llu records (%.3f of the records)",
				       m->name ? m->name : "", m->realised_token_share, m->share,
				       (unsigned long long)m->tokens, (unsigned long long)m->records,
				       m->realised_share);
		else
			pf_text_printf(&t, "source      %s: share %.3f of %.3f, %llu records",
				       m->name ? m->name : "", m->realised_share, m->share,
				       (unsigned long long)m->records);
		if (!m->weighs_tokens && m->tokens)
			pf_text_printf(&t, " (%llu tokens, %.3f of the tokens)",
				       (unsigned long long)m->tokens, m->realised_token_share);
		pf_text_printf(&t, ", %u epoch%s started, %.1f MB/s read (%llu records an epoch in "
			       "%llu files)%s%s%s\n", m->epochs_started,
			       m->epochs_started == 1 ? "" : "s", mbs,
			       (unsigned long long)m->dataset_records,
			       (unsigned long long)m->dataset_files, m->region ? ", region " : "",
			       m->region ? m->region : "",
			       m->cross_region ? " (not the host's: cross-region reads)" : "");
		if (!e) {
			bad = true;
			continue;
		}
		pf_json_put(e, "name", pf_json_str(m->name), &bad);
		pf_json_put(e, "weight", pf_json_num(m->weight), &bad);
		pf_json_put(e, "share", pf_json_num(m->share), &bad);
		pf_json_put(e, "realised_share", pf_json_num(m->realised_share), &bad);
		pf_json_put(e, "records", pf_json_u64(m->records), &bad);
		pf_json_put(e, "unit", pf_json_str(m->weighs_tokens ? "tokens" : "records"), &bad);
		pf_json_put(e, "tokens", pf_json_u64(m->tokens), &bad);
		pf_json_put(e, "realised_token_share", pf_json_num(m->realised_token_share), &bad);
		pf_json_put(e, "epochs_started", pf_json_u64(m->epochs_started), &bad);
		pf_json_put(e, "bytes_read", pf_json_u64(m->bytes_read), &bad);
		pf_json_put(e, "mb_per_s", pf_json_num(mbs), &bad);
		pf_json_put(e, "records_per_epoch", pf_json_u64(m->dataset_records), &bad);
		pf_json_put(e, "files", pf_json_u64(m->dataset_files), &bad);
		pf_json_put(e, "region", m->region ? pf_json_str(m->region) : json_null(), &bad);
		pf_json_put(e, "cross_region", json_boolean(m->cross_region), &bad);
		if (json_array_append_new(arr, e))
			bad = true;
	}
	pf_json_put(o, "sources", arr, &bad);
	return pf_report_section(r, PF_SECTION_SOURCES, &t, o, bad, err);
}
