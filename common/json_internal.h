/* SPDX-License-Identifier: Apache-2.0 */
/* Private to podfeed (every module, the tools and the tests): JSON values
 * and lines through jansson, and a growing text, written once (json.c).
 * Every JSON line the library or a tool writes goes through these. */
#ifndef PF_JSON_INTERNAL_H
#define PF_JSON_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
