/* SPDX-License-Identifier: Apache-2.0 */
/* JSON and text through jansson, never printf: the helpers every JSON
 * line and report section of the library and its tools goes through (the
 * loader's quarantine log, the report's sections, the tools' --json).
 * Not the report itself (loader/report/). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_internal.h"
#include "json_internal.h"

void pf_text_printf(pf_text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->failed)
		return;
	for (;;) {
		size_t room = t->cap - t->len;

		va_start(ap, fmt);
		n = vsnprintf(t->s ? t->s + t->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->failed = true;
			return;
		}
		if ((size_t)n < room) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = (t->cap ? t->cap * 2 : 1024) + (size_t)n;
		char *g = pf_realloc(t->s, cap);

		if (!g) {
			t->failed = true;
			return;
		}
		t->s = g;
		t->cap = cap;
	}
}

void pf_text_free(pf_text *t)
{
	pf_free(t->s);
	memset(t, 0, sizeof(*t));
}

json_t *pf_json_num(double v)
{
	if (isnan(v))
		return json_string("NaN");
	if (isinf(v))
		return json_string(v > 0 ? "Infinity" : "-Infinity");
	return json_real(v);
}

json_t *pf_json_u64(uint64_t v)
{
	return v <= INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
}

json_t *pf_json_bool(bool v)
{
	return json_boolean(v);
}

/* s[0..len) as UTF-8 with each byte its own code point (Latin-1): two
 * bytes for each above 0x7f.  @return the string (pf_free()), or NULL. */
static char *latin1(const void *s, size_t len, size_t *out_len)
{
	const uint8_t *p = s;
	char *u = pf_malloc(2 * len + 1);
	size_t n = 0;

	if (!u)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < 0x80) {
			u[n++] = (char)p[i];
		} else {
			u[n++] = (char)(0xc0 | (p[i] >> 6));
			u[n++] = (char)(0x80 | (p[i] & 0x3f));
		}
	}
	u[n] = '\0';
	*out_len = n;
	return u;
}

json_t *pf_json_latin1(const void *s, size_t len)
{
	size_t n;
	char *u = latin1(s, len, &n);
	json_t *v = u ? json_stringn(u, n) : NULL;

	pf_free(u);
	return v;
}

json_t *pf_json_strn(const void *s, size_t len)
{
	json_t *v;

	if (!s)
		return json_null();
	v = json_stringn(s, len);	/* NULL unless valid UTF-8 */
	return v ? v : pf_json_latin1(s, len);
}

json_t *pf_json_str(const char *s)
{
	return pf_json_strn(s, s ? strlen(s) : 0);
}

void pf_json_putn(json_t *obj, const void *key, size_t len, json_t *v, bool *bad)
{
	json_t *utf8 = json_stringn(key, len);	/* NULL unless valid UTF-8 */
	size_t n;
	char *u = NULL;

	/* A key as pf_json_strn() writes a string.  json_object_setn_new()
	 * takes v's reference even when it fails. */
	json_decref(utf8);
	if (!utf8 && !(u = latin1(key, len, &n))) {
		json_decref(v);
		*bad = true;
		return;
	}
	if (!obj)
		json_decref(v);
	if (!obj || json_object_setn_new(obj, u ? u : key, u ? n : len, v) < 0)
		*bad = true;
	pf_free(u);
}

void pf_json_put(json_t *obj, const char *key, json_t *v, bool *bad)
{
	/* json_object_set_new() takes v's reference even when it fails. */
	if (!obj)
		json_decref(v);
	if (!obj || json_object_set_new(obj, key, v) < 0)
		*bad = true;
}

char *pf_json_text(const json_t *obj, bool ascii, size_t *len)
{
	const size_t flags = JSON_COMPACT | JSON_REAL_PRECISION(9) |
			     (ascii ? JSON_ENSURE_ASCII : 0);
	size_t n = json_dumpb(obj, NULL, 0, flags);
	char *line;

	/* Into our buffer (json_dumpb(), sized by a first call), so that the
	 * line is podfeed's allocator's, as everything a report holds. */
	if (!n)
		return NULL;
	line = pf_malloc(n + 2);
	if (line && json_dumpb(obj, line, n, flags) != n) {
		pf_free(line);
		return NULL;
	}
	if (line) {
		line[n] = '\n';
		line[n + 1] = '\0';
		if (len)
			*len = n + 1;
	}
	return line;
}

char *pf_json_line(const json_t *obj)
{
	char *line = pf_json_text(obj, true, NULL);

	if (line)
		line[strlen(line) - 1] = '\0';
	return line;
}
