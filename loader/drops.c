/* SPDX-License-Identifier: Apache-2.0 */
/* Drops: corrupt data in skip mode.  Each drop (a record, a frame, a
 * stream member the data lost) is counted in the metrics, checked
 * against the corrupt-data budget (max_corrupt) and written as a JSON
 * line to the quarantine log.  Not here: finding the damage (decode.c,
 * pf_source, pf_recstream) or the hole it leaves (placement.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline_internal.h"

/* Bytes json_escape() needs for s at most: every byte may become a
 * six-byte \u escape. */
#define JSON_ESCAPED_MAX(len) (6 * (len) + 1)

/* JSON string body of s into dst (cap > 0): quotes, backslashes and
 * control bytes escaped, cut to fit.  @return its length. */
static size_t json_escape(char *dst, size_t cap, const char *s)
{
	size_t n = 0;

	for (; *s && n + 7 < cap; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			dst[n++] = '\\';
			dst[n++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			n += (size_t)snprintf(dst + n, cap - n, "\\u%04x", ch);
		} else {
			dst[n++] = (char)ch;
		}
	}
	dst[n] = 0;
	return n;
}

/* One drop (skip mode): counted, written to the quarantine log when
 * log, and checked against the budget.  @return 0, or <0 when the budget
 * is spent or the log cannot be written (the loader is then failed with
 * an error saying so). */
static int note_drop(pf_loader *l, const pf_drop *d, const char *path, bool log)
{
	/* Sized for the whole path and cause (a drop is rare: the heap is
	 * fine here), so that the log never cuts them. */
	size_t path_len = strlen(path), cause_cap = PF_ERROR_LINE_MAX;
	size_t jpath_cap = JSON_ESCAPED_MAX(path_len), jcause_cap = JSON_ESCAPED_MAX(cause_cap);
	size_t line_cap = jpath_cap + jcause_cap + 512;
	char *cause = NULL, *line = NULL;
	pf_error e = d->cause;
	int n = 0, ret = 0;

	if (log && l->qfd >= 0) {
		cause = pf_malloc(cause_cap + jpath_cap + jcause_cap);
		line = pf_malloc(line_cap);
	}
	pf_error_set_file(&e, path);
	if (cause && line) {
		char *jpath = cause + cause_cap, *jcause = jpath + jpath_cap;

		pf_error_format(&e, cause, cause_cap);
		json_escape(jpath, jpath_cap, path);
		json_escape(jcause, jcause_cap, cause);
		n = snprintf(line, line_cap,
			     "{\"file\":\"%s\",\"offset\":%llu,\"offset_kind\":\"%s\","
			     "\"resume\":%llu,\"unit\":\"%s\",\"frame\":%lld,\"records\":%lld,"
			     "\"host\":%u,\"cause\":\"%s\"}\n", jpath,
			     (unsigned long long)d->start,
			     d->offset_kind == PF_OFFSET_FILE ? "file" : "decompressed",
			     (unsigned long long)d->resume, pf_drop_unit_name(d->unit),
			     (long long)e.frame, (long long)d->records, l->topo.host_index, jcause);
	} else if (log && l->qfd >= 0) {
		ret = -ENOMEM;
	}
	pthread_mutex_lock(&l->mu);
	l->m.corrupt_drops++;
	l->m.corrupt_records += d->records > 0 ? (uint64_t)d->records : 0;
	if (line && n > 0) {
		/* One write per line: O_APPEND keeps lines of several
		 * processes whole. */
		if (write(l->qfd, line, (size_t)n < line_cap ? (size_t)n : line_cap - 1) < 0)
			ret = -errno;
	}
	if (ret < 0) {
		pf_error qe;

		pf_error_clear(&qe);
		pf_error_set(&qe, ret, PF_OFFSET_NONE, 0, "cannot write the quarantine log %s: %s",
			     l->cfg.quarantine, pf_strerror(ret));
		pf_loader_fail_locked(l, &qe, ret);
	} else if (l->cfg.max_corrupt && l->m.corrupt_drops > l->cfg.max_corrupt) {
		pf_error be = e;

		ret = pf_error_set(&be, -EBADMSG, be.offset_kind, be.offset,
				   "more than %llu corrupt units dropped (the budget); the last: %s",
				   (unsigned long long)l->cfg.max_corrupt, d->cause.msg);
		pf_loader_fail_locked(l, &be, ret);
	}
	pthread_mutex_unlock(&l->mu);
	pf_free(cause);
	pf_free(line);
	return ret;
}

int pf_drop_report(pf_loader *l, const pf_drop *d, const char *path)
{
	return note_drop(l, d, path, true);
}

/* Drops found opening the dataset (stream files, damaged indexes): every
 * host counts them, host 0 logs them, once for the pod; reading the
 * stream files again later drops the same units unreported. */
int pf_drop_at_open(void *ctx, const pf_drop *d)
{
	pf_loader *l = ctx;

	return note_drop(l, d, d->cause.file, l->topo.host_index == 0);
}

/* Drops found counting stream files: when the pod split the counting,
 * only the host that counted the file finds them, and logs them; every
 * host counts them (the others after the exchange: pf_loader_create()). */
int pf_drop_at_count(void *ctx, const pf_drop *d)
{
	pf_loader *l = ctx;

	return note_drop(l, d, d->cause.file,
			 l->topo.host_index == 0 || (l->cfg.allgather && l->topo.num_hosts > 1));
}
