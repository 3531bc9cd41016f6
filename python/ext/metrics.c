/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed's CPython extension: Loader.metrics(), the loader's counts
 * (pf_loader_get_metrics()) and its time series as a dict. */
#include "ext_internal.h"

/* d[key] = v.  @return 0 or -1 with an exception. */
static int pf_dict_set_u64(PyObject *d, const char *key, uint64_t v)
{
	PyObject *o = PyLong_FromUnsignedLongLong(v);
	int rc = o ? PyDict_SetItemString(d, key, o) : -1;

	Py_XDECREF(o);
	return rc;
}

static PyObject *stage(const pf_stage_metrics *s)
{
	return Py_BuildValue("{sKsK}", "busy_ns", (unsigned long long)s->busy_ns,
			     "wait_ns", (unsigned long long)s->wait_ns);
}

/* The loader's time series (pf_loader_series()): a dict of its columns,
 * each a list of floats, one per point. */
static PyObject *series_dict(const pf_loader *l)
{
	pf_series *s;
	PyObject *d;
	size_t n;

	if (pf_loader_series(l, &s) < 0)
		return PyErr_NoMemory();
	n = pf_series_points(s);
	d = PyDict_New();
	for (size_t c = 0; d && c < pf_series_columns(s); c++) {
		const double *v = pf_series_column(s, c);
		PyObject *list = PyList_New((Py_ssize_t)n);

		for (size_t i = 0; list && i < n; i++) {
			PyObject *x = PyFloat_FromDouble(v[i]);

			if (!x) {
				Py_CLEAR(list);
				break;
			}
			PyList_SET_ITEM(list, (Py_ssize_t)i, x);
		}
		if (!list || PyDict_SetItemString(d, pf_series_column_name(s, c), list) < 0)
			Py_CLEAR(d);
		Py_XDECREF(list);
	}
	pf_series_free(s);
	return d;
}

PyObject *pf_ext_metrics_dict(const pf_loader *l)
{
	pf_loader_metrics m;
	PyObject *hist, *lost, *d, *series;

	pf_loader_get_metrics(l, &m);
	hist = PyList_New(PF_IO_HIST_BUCKETS);
	for (size_t i = 0; hist && i < PF_IO_HIST_BUCKETS; i++) {
		PyObject *v = PyLong_FromUnsignedLongLong(m.next_hist[i]);

		if (!v) {
			Py_CLEAR(hist);
			break;
		}
		PyList_SET_ITEM(hist, (Py_ssize_t)i, v);
	}
	if (!hist)
		return NULL;
	series = series_dict(l);
	if (!series) {
		Py_DECREF(hist);
		return NULL;
	}
#define U(x) (unsigned long long)(x)
	/* corrupt_records: None while a dropped unit's records are unknown
	 * (corrupt_unknown > 0); corrupt_records_known: the known ones. */
	if (m.corrupt_unknown)
		lost = Py_NewRef(Py_None);
	else
		lost = PyLong_FromUnsignedLongLong(m.corrupt_records);
	if (!lost) {
		Py_DECREF(hist);
		Py_DECREF(series);
		return NULL;
	}
	d = Py_BuildValue("{sKsKsKsKsKsKsKsKsNsNsIsKsKsNsKsssIsKsKsKsKsKsNsKsKsKsKsKsNsKsKsKsKsKsKsKsKsK}",
		"records", U(m.records), "steps", U(m.steps),
		"bytes_read", U(m.bytes_read), "bytes_decompressed", U(m.bytes_decompressed),
		"remainder_dropped", U(m.remainder_dropped),
		"remainder_wrapped", U(m.remainder_wrapped),
		"records_per_epoch", U(m.records_per_epoch),
		"steps_per_epoch", U(m.steps_per_epoch),
		"io", stage(&m.io), "decode", stage(&m.decode),
		"decode_threads", m.decode_threads,
		"next_wait_ns", U(m.next_wait_ns), "queue_fill_sum", U(m.queue_fill_sum),
		"next_hist_log2_us", hist, "memory_bytes", U(m.memory_bytes),
		"io_backend", m.io_backend ? m.io_backend : "",
		"files_direct", m.files_direct, "io_retries", U(m.io_retries),
		"io_faults", U(m.io_faults), "io_timeouts", U(m.io_timeouts),
		"io_short_reads", U(m.io_short_reads), "corrupt_drops", U(m.corrupt_drops),
		"corrupt_records", lost, "corrupt_records_known", U(m.corrupt_records),
		"corrupt_unknown", U(m.corrupt_unknown), "corrupt_bytes", U(m.corrupt_bytes),
		"holes", U(m.holes), "io_requests", U(m.io_requests), "series", series,
		"pack_rows", U(m.pack_rows), "pack_slots", U(m.pack_slots),
		"pack_values", U(m.pack_values), "pack_segments", U(m.pack_segments),
		"pack_truncated_records", U(m.pack_truncated_records),
		"pack_truncated_values", U(m.pack_truncated_values),
		"pack_empty_records", U(m.pack_empty_records),
		"pack_rows_dropped", U(m.pack_rows_dropped),
		"pack_lengths_from_index", U(m.pack_lengths_from_index));
	/* Packing's plan: what reading the lengths cost this host (0.7). */
	if (d && (pf_dict_set_u64(d, "pack_lengths_tails", m.pack_lengths_tails) < 0 ||
		  pf_dict_set_u64(d, "pack_lengths_files", m.pack_lengths_files) < 0 ||
		  pf_dict_set_u64(d, "pack_lengths_exchanged", m.pack_lengths_exchanged) < 0 ||
		  pf_dict_set_u64(d, "pack_direct_records", m.pack_direct_records) < 0))
		Py_CLEAR(d);
	/* What the rows dropped past an epoch's last step held (0.8). */
	if (d && (pf_dict_set_u64(d, "pack_dropped_records", m.pack_dropped_records) < 0 ||
		  pf_dict_set_u64(d, "pack_dropped_tokens", m.pack_dropped_tokens) < 0))
		Py_CLEAR(d);
	/* Image features' counts (0.7). */
	if (d && (pf_dict_set_u64(d, "images", m.images) < 0 ||
		  pf_dict_set_u64(d, "images_upscaled", m.images_upscaled) < 0 ||
		  pf_dict_set_u64(d, "image_decode_ns", m.image_decode_ns) < 0 ||
		  pf_dict_set_u64(d, "image_scratch_bytes", m.image_scratch_bytes) < 0))
		Py_CLEAR(d);
	/* The global shuffle's frame cache (0.7). */
	if (d && (pf_dict_set_u64(d, "frame_cache_entries", m.frame_cache_entries) < 0 ||
		  pf_dict_set_u64(d, "frame_cache_bytes", m.frame_cache_bytes) < 0 ||
		  pf_dict_set_u64(d, "frame_cache_hits", m.frame_cache_hits) < 0 ||
		  pf_dict_set_u64(d, "frame_cache_loads", m.frame_cache_loads) < 0 ||
		  pf_dict_set_u64(d, "frame_cache_evictions", m.frame_cache_evictions) < 0 ||
		  pf_dict_set_u64(d, "frame_cache_bypassed", m.frame_cache_bypassed) < 0))
		Py_CLEAR(d);
	/* skip_steps: what was skipped (0.8). */
	if (d && (pf_dict_set_u64(d, "skipped_steps", m.skipped_steps) < 0 ||
		  pf_dict_set_u64(d, "skipped_from", m.skipped_from) < 0 ||
		  pf_dict_set_u64(d, "skipped_records", m.skipped_records) < 0 ||
		  pf_dict_set_u64(d, "skipped_tokens", m.skipped_tokens) < 0))
		Py_CLEAR(d);
	/* The shuffle window and the defaults fitted to the budget (0.8). */
	if (d && (pf_dict_set_u64(d, "shuffle_window", m.shuffle_window) < 0 ||
		  pf_dict_set_u64(d, "window_as_read", m.window_as_read) < 0 ||
		  pf_dict_set_u64(d, "window_bytes", m.window_bytes) < 0 ||
		  pf_dict_set_u64(d, "window_peak_bytes", m.window_peak_bytes) < 0 ||
		  pf_dict_set_u64(d, "fitted", m.fitted) < 0))
		Py_CLEAR(d);
#undef U
	return d;
}
