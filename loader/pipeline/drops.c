/* SPDX-License-Identifier: Apache-2.0 */
/* Drops: corrupt data in skip mode.  Each drop (a record, a frame, a
 * stream member the data lost) is counted in the metrics, checked
 * against the corrupt-data budget (max_corrupt) and written as a JSON
 * line (through jansson, as all the JSON podfeed writes) to the
 * quarantine log.  Not here: finding the damage (decode.c, pf_source,
 * pf_recstream) or the hole it leaves (placement.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline_internal.h"
#include "json_internal.h"

/* The drop's quarantine line: one JSON object (file, offset, offset_kind,
 * resume, unit, frame, records, host, cause) and its newline, non-ASCII
 * as UTF-8 (a path that is not UTF-8 as Latin-1).  @return the line
 * (pf_free()), or NULL when out of memory. */
static char *quarantine_line(const pf_pipe *l, const pf_drop *d, const pf_error *e,
			     const char *path, size_t *len)
{
	char *cause = pf_malloc(PF_ERROR_LINE_MAX), *line = NULL;
	json_t *o = json_object();
	bool bad = false;

	if (cause && o) {
		pf_error_format(e, cause, PF_ERROR_LINE_MAX);
		pf_json_put(o, "file", pf_json_str(path), &bad);
		pf_json_put(o, "offset", pf_json_u64(d->start), &bad);
		pf_json_put(o, "offset_kind", pf_json_str(d->offset_kind == PF_OFFSET_FILE ?
							  "file" : "decompressed"), &bad);
		pf_json_put(o, "resume", pf_json_u64(d->resume), &bad);
		pf_json_put(o, "unit", pf_json_str(pf_drop_unit_name(d->unit)), &bad);
		pf_json_put(o, "frame", json_integer(e->frame), &bad);
		pf_json_put(o, "records", json_integer(d->records), &bad);
		pf_json_put(o, "host", pf_json_u64(l->topo.host_index), &bad);
		pf_json_put(o, "cause", pf_json_str(cause), &bad);
		if (!bad)
			line = pf_json_text(o, false, len);
	}
	json_decref(o);
	pf_free(cause);
	return line;
}

/* One drop (skip mode): counted, written to the quarantine log when
 * log, and checked against the budget.  @return 0, or <0 when the budget
 * is spent or the log cannot be written (the loader is then failed with
 * an error saying so). */
static int note_drop(pf_pipe *l, const pf_drop *d, const char *path, bool log)
{
	char *line = NULL;
	pf_error e = d->cause;
	size_t n = 0;
	int ret = 0;

	pf_error_set_file(&e, path);
	/* The whole path and cause, never cut (a drop is rare: the heap is
	 * fine here). */
	if (log && l->qfd >= 0 && !(line = quarantine_line(l, d, &e, path, &n)))
		ret = -ENOMEM;
	pthread_mutex_lock(&l->mu);
	if (!l->first_drop.code)
		l->first_drop = e;
	l->m.corrupt_drops++;
	l->m.corrupt_records += d->records > 0 ? (uint64_t)d->records : 0;
	l->m.corrupt_unknown += d->records < 0;
	l->m.corrupt_bytes += pf_drop_bytes(d);
	if (line) {
		/* One write per line: O_APPEND keeps lines of several
		 * processes whole. */
		if (write(l->qfd, line, n) < 0)
			ret = -errno;
	}
	if (ret < 0) {
		pf_error qe;

		pf_error_clear(&qe);
		pf_error_set(&qe, ret, PF_OFFSET_NONE, 0, "cannot write the quarantine log %s: %s",
			     l->cfg.quarantine, pf_strerror(ret));
		pf_pipe_fail_locked(l, &qe, ret);
	} else if (l->cfg.max_corrupt && l->m.corrupt_drops > l->cfg.max_corrupt) {
		pf_error be = e;

		ret = pf_error_set(&be, -EBADMSG, be.offset_kind, be.offset,
				   "more than %llu corrupt units dropped (the budget); the last: %s",
				   (unsigned long long)l->cfg.max_corrupt, d->cause.msg);
		pf_pipe_fail_locked(l, &be, ret);
	}
	pthread_mutex_unlock(&l->mu);
	pf_free(line);
	return ret;
}

int pf_drop_report(pf_pipe *l, const pf_drop *d, const char *path)
{
	return note_drop(l, d, path, true);
}

/* Drops found opening the dataset (stream files, damaged indexes): every
 * host counts them, host 0 logs them, once for the pod; reading the
 * stream files again later drops the same units unreported. */
int pf_drop_at_open(void *ctx, const pf_drop *d)
{
	pf_pipe *l = ctx;

	return note_drop(l, d, d->cause.file, l->topo.host_index == 0);
}

/* Drops found counting stream files: when the pod split the counting,
 * only the host that counted the file finds them, and logs them; every
 * host counts them (the others after the exchange: pf_loader_create()). */
int pf_drop_at_count(void *ctx, const pf_drop *d)
{
	pf_pipe *l = ctx;

	return note_drop(l, d, d->cause.file,
			 l->topo.host_index == 0 || (l->cfg.allgather && l->topo.num_hosts > 1));
}

int pf_drops_explain_size(const pf_pipe *l, pf_error *err)
{
	char *size = NULL;
	pf_error e;

	if (!err || !l->m.corrupt_drops)
		return err ? err->code : 0;
	size = pf_strdup(err->msg);
	if (!size)
		return err->code;
	if (l->first_drop.code) {
		e = l->first_drop;
		pf_error_set(&e, -EBADMSG, e.offset_kind, e.offset,
			     "%s; skip mode dropped it (%llu damaged unit%s opening the "
			     "dataset, this the first), and then %s", l->first_drop.msg,
			     (unsigned long long)l->m.corrupt_drops,
			     l->m.corrupt_drops == 1 ? "" : "s", size);
	} else {
		pf_error_clear(&e);
		pf_error_set(&e, -EBADMSG, PF_OFFSET_NONE, 0,
			     "%s: skip mode dropped %llu damaged unit%s counting the stream "
			     "files on other hosts (the quarantine log of the host that counted each says which)", size,
			     (unsigned long long)l->m.corrupt_drops,
			     l->m.corrupt_drops == 1 ? "" : "s");
	}
	pf_free(size);
	*err = e;
	return err->code;
}
