/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the library and its tools: how a section is added to a pf_report
 * (loader/report.c), the JSON helpers every section's members go through
 * (jansson; never printf), and the text a section builds. */
#ifndef PF_REPORT_INTERNAL_H
#define PF_REPORT_INTERNAL_H

#include <jansson.h>
#include <stdarg.h>

#include "podfeed.h"

/* A growing string (pf_realloc): a section's text lines. */
typedef struct pf_text {
	char *s;
	size_t len, cap;
	bool failed;		/* an allocation failed: the text is cut */
} pf_text;

void pf_text_printf(pf_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pf_text_free(pf_text *t);

/* JSON values; each returns NULL when out of memory, which pf_json_put()
 * then counts. */
/* A number; NaN and the infinities, which JSON lacks, as the strings
 * "NaN", "Infinity", "-Infinity". */
json_t *pf_json_num(double v);
/* A count (above INT64_MAX: the nearest double, which JSON readers take
 * as they take any large number). */
json_t *pf_json_u64(uint64_t v);
/* A string of bytes: as UTF-8 when it is, else each byte as the code
 * point of its value (Latin-1), so that any path or cause can be written;
 * NULL: null. */
json_t *pf_json_str(const char *s);
json_t *pf_json_strn(const void *s, size_t len);
/* Bytes, each byte the code point of its value (Latin-1) whatever they
 * are, so that a reader has them back exactly. */
json_t *pf_json_latin1(const void *s, size_t len);
json_t *pf_json_bool(bool v);
/* obj[key] = v (v's reference taken); a failure (v NULL, no memory) sets
 * *bad. */
void pf_json_put(json_t *obj, const char *key, json_t *v, bool *bad);
/* obj[key] with a key of len bytes, as pf_json_strn() writes a string. */
void pf_json_putn(json_t *obj, const void *key, size_t len, json_t *v, bool *bad);
/* One compact line of obj, without the newline (JSON_REAL_PRECISION(9):
 * numbers as %.9g; non-ASCII as \u escapes).  @return the string
 * (pf_free()), or NULL when out of memory. */
char *pf_json_line(const json_t *obj);
/* The same ending in a newline, *len (may be NULL) its length; ascii:
 * non-ASCII as \u escapes, else as UTF-8. */
char *pf_json_text(const json_t *obj, bool ascii, size_t *len);

/* The kinds of section a report holds, each at most once. */
typedef enum pf_report_kind {
	PF_SECTION_LOADER = 0,
	PF_SECTION_BASELINE,
	PF_SECTION_REGIONS,
	PF_SECTION_TRAIN,
	PF_SECTION_POD,
	PF_SECTION_SERIES,
	PF_SECTION_LADDER,
	PF_SECTION_SOURCES,	/* a mixture's sources (report_sources.c) */
	PF_SECTION_KINDS,
} pf_report_kind;

/*! Add a section: its text (taken: pf_text_free()d here, also on
 *  failure) and the members of members merged into the report's object
 *  (decref'd here).  bad: a member could not be made.  @return 0,
 *  -EEXIST (a section of that kind is there), -ENOMEM; err says which. */
int pf_report_section(pf_report *r, pf_report_kind kind, pf_text *text, json_t *members,
		      bool bad, pf_error *err);

/*! The report as its HTML page (report_html.c), as pf_report_format()
 *  writes it: @return its length, or -ENOMEM. */
int64_t pf_report_html(const pf_report *r, char *dst, size_t cap);

#endif
