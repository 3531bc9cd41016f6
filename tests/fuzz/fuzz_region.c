/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz harness: the mount table parser and the mountinfo parser, each
 * checked against a plain model of its rules. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "pf_io.h"

/*
 * The first byte chooses: even, the rest is a mount table file; odd, the
 * rest is mountinfo text.  The harness aborts when
 *   mount table:
 *   - a parse succeeds with a mount whose path is not absolute and
 *     normalised (no "//", "/./", "/../", trailing '/'), or whose region
 *     is not a valid lower-case name;
 *   - a failure is not -EINVAL/-EFBIG/-E2BIG with an error, or an -EINVAL
 *     names no "fuzz:LINE" inside the text;
 *   - pf_region_table_match() disagrees with a brute-force longest
 *     whole-component prefix over the table's mounts, on probes made
 *     from every mount's path;
 *   mountinfo:
 *   - pf_mountinfo_parse_line() accepts a line the model refuses or the
 *     other way round, returns -ENOBUFS with len + 8 bytes, or gives
 *     other fields than the model's split and unescape;
 *   - pf_region_table_scan_mountinfo() finds another number of FUSE
 *     mounts, or skips another number of lines, than the model.
 * The model splits on blanks, decodes \ooo by itself and shares no code
 * with region.c or region_mounts.c.
 */

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "fuzz_region: %s:%d: %s\n",          \
				__FILE__, __LINE__, #cond);                  \
			abort();                                             \
		}                                                            \
	} while (0)

/* ------------------------------------------------------------------ */
/* Mount table                                                          */

static bool normalised(const char *p)
{
	size_t n = strlen(p);

	if (p[0] != '/')
		return false;
	if (n == 1)
		return true;
	if (p[n - 1] == '/' || strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../"))
		return false;
	if ((n >= 2 && !strcmp(p + n - 2, "/.")) || (n >= 3 && !strcmp(p + n - 3, "/..")))
		return false;
	return true;
}

static bool model_covers(const char *m, const char *p)
{
	size_t n = strlen(m);

	if (!strcmp(m, "/"))
		return true;
	return !strncmp(p, m, n) && (p[n] == '\0' || p[n] == '/');
}

static void check_match(pf_region_table *t, const char *probe)
{
	size_t best = 0, best_len = 0, n = pf_region_table_mounts(t);

	for (size_t i = 1; i < n; i++) {
		pf_mount_info mi;

		CHECK(pf_region_table_mount(t, i, &mi) == 0);
		if (model_covers(mi.path, probe) && strlen(mi.path) > best_len) {
			best = i;
			best_len = strlen(mi.path);
		}
	}
	CHECK(pf_region_table_match(t, probe) == best);
}

static void fuzz_table(const char *text, size_t len)
{
	pf_region_table *t;
	pf_error err;
	size_t lines = 1, n;
	int ret;

	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	pf_error_clear(&err);
	CHECK(pf_region_table_create(&t, "us-east1", PF_REGION_LEXICAL, &err) == 0);
	ret = pf_region_table_parse(t, text, len, "fuzz", &err);
	if (ret < 0) {
		CHECK(ret == -EINVAL || ret == -EFBIG || ret == -E2BIG);
		CHECK(err.code == ret);
		CHECK(err.msg[0]);
		if (ret == -EINVAL) {
			unsigned line = 0;
			char tail;

			CHECK(sscanf(err.file, "fuzz:%u%c", &line, &tail) == 1);
			CHECK(line >= 1 && line <= lines);
		}
	}
	n = pf_region_table_mounts(t);
	CHECK(n >= 1 && n <= PF_REGION_MAX_MOUNTS + 1);
	for (size_t i = 1; i < n; i++) {
		pf_mount_info mi;
		pf_region_info ri;
		pf_error e2;

		CHECK(pf_region_table_mount(t, i, &mi) == 0);
		CHECK(normalised(mi.path));
		CHECK(mi.region && pf_region_name_check(mi.region, &e2) == 0);
		for (const char *c = mi.region; *c; c++)
			CHECK(!(*c >= 'A' && *c <= 'Z'));
		CHECK(mi.origin == PF_MOUNT_FILE && mi.origin_line >= 1 && mi.origin_line <= lines);
		CHECK(pf_region_table_region(t, mi.region_index, &ri) == 0);
		CHECK(ri.kind == (strcmp(mi.region, "us-east1") ? PF_REGION_CROSS : PF_REGION_IN));
		CHECK(!strcmp(ri.label, mi.region));
	}
	/* Probes: each path, inside it, a sibling with a longer name, its
	 * parent. */
	for (size_t i = 1; i < n && i < 64; i++) {
		pf_mount_info mi;
		char probe[PATH_MAX + 8];
		char *slash;

		CHECK(pf_region_table_mount(t, i, &mi) == 0);
		snprintf(probe, sizeof(probe), "%s", mi.path);
		check_match(t, probe);
		snprintf(probe, sizeof(probe), "%s/x", mi.path);
		check_match(t, probe);
		snprintf(probe, sizeof(probe), "%sx", mi.path);
		check_match(t, probe);
		snprintf(probe, sizeof(probe), "%s", mi.path);
		slash = strrchr(probe, '/');
		if (slash && slash != probe) {
			*slash = '\0';
			check_match(t, probe);
		}
	}
	check_match(t, "/");
	pf_region_table_free(t);
}

/* ------------------------------------------------------------------ */
/* mountinfo                                                            */

/* The model's \ooo decoding.  @return false for \000 or above \377. */
static bool model_unescape(const char *s, size_t n, char *out)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && n - i > 3 &&
		    s[i + 1] >= '0' && s[i + 1] <= '7' && s[i + 2] >= '0' && s[i + 2] <= '7' &&
		    s[i + 3] >= '0' && s[i + 3] <= '7') {
			int v = (s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0');

			if (v == 0 || v > 255)
				return false;
			out[k++] = (char)v;
			i += 3;
			continue;
		}
		out[k++] = s[i];
	}
	out[k] = '\0';
	return true;
}

static bool model_u32(const char *s, size_t n)
{
	uint64_t v = 0;

	if (n == 0 || n > 10)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	return v <= UINT32_MAX;
}

typedef struct model_line {
	bool ok;
	char *mount_point, *fstype, *source;	/* len + 1 bytes each */
	unsigned optional;
} model_line;

static void model_parse(const char *line, size_t len, model_line *m)
{
	const char **tok = malloc((len / 2 + 2) * sizeof(*tok));
	size_t *tlen = malloc((len / 2 + 2) * sizeof(*tlen));
	char *scratch = malloc(len + 1);
	size_t nt = 0, sep = 0;
	const char *colon;

	CHECK(tok && tlen && scratch);
	m->ok = false;
	if (memchr(line, '\0', len))
		goto out;
	for (size_t i = 0; i < len;) {
		while (i < len && (line[i] == ' ' || line[i] == '\t'))
			i++;
		if (i == len)
			break;
		tok[nt] = line + i;
		while (i < len && line[i] != ' ' && line[i] != '\t')
			i++;
		tlen[nt] = (size_t)(line + i - tok[nt]);
		nt++;
	}
	for (size_t k = 6; k < nt && !sep; k++)
		if (tlen[k] == 1 && tok[k][0] == '-')
			sep = k;
	if (nt < 6 || !sep || nt < sep + 3)
		goto out;
	if (!model_u32(tok[0], tlen[0]) || !model_u32(tok[1], tlen[1]))
		goto out;
	colon = memchr(tok[2], ':', tlen[2]);
	if (!colon || !model_u32(tok[2], (size_t)(colon - tok[2])) ||
	    !model_u32(colon + 1, tlen[2] - (size_t)(colon - tok[2]) - 1))
		goto out;
	if (!model_unescape(tok[3], tlen[3], scratch) ||
	    !model_unescape(tok[4], tlen[4], m->mount_point) ||
	    !model_unescape(tok[5], tlen[5], scratch) ||
	    !model_unescape(tok[sep + 1], tlen[sep + 1], m->fstype) ||
	    !model_unescape(tok[sep + 2], tlen[sep + 2], m->source))
		goto out;
	if (nt > sep + 3 && !model_unescape(tok[sep + 3], tlen[sep + 3], scratch))
		goto out;
	m->optional = (unsigned)(sep - 6);
	m->ok = true;
out:
	free(tok);
	free(tlen);
	free(scratch);
}

/* Whether the lexical normalisation of an absolute path fits PATH_MAX at
 * every step (the table skips a mount whose path does not). */
static bool model_normalises(const char *p)
{
	size_t n = 0, depth = 0;
	size_t stack[PATH_MAX];

	while (*p) {
		const char *c;
		size_t clen;

		while (*p == '/')
			p++;
		c = p;
		while (*p && *p != '/')
			p++;
		clen = (size_t)(p - c);
		if (clen == 0 || (clen == 1 && c[0] == '.'))
			continue;
		if (clen == 2 && c[0] == '.' && c[1] == '.') {
			if (depth)
				n -= stack[--depth];
			continue;
		}
		if (n + 1 + clen + 1 > PATH_MAX)
			return false;
		stack[depth++] = clen + 1;
		n += clen + 1;
	}
	return true;
}

static bool model_fuse(const char *fstype)
{
	return !strcmp(fstype, "fuse") || !strncmp(fstype, "fuse.", 5);
}

static void fuzz_mountinfo(const char *text, size_t len)
{
	model_line m;
	pf_region_table *t;
	pf_error err;
	unsigned want_fuse = 0, want_skipped = 0, skipped = 0;
	size_t pos = 0;
	int ret;

	while (pos < len) {
		const char *eol = memchr(text + pos, '\n', len - pos);
		size_t llen = eol ? (size_t)(eol - (text + pos)) : len - pos;
		const char *line = text + pos;
		pf_mountinfo_entry e;
		char *buf;

		pos += llen + 1;
		if (llen == 0)
			continue;
		buf = malloc(llen + 8);
		m.mount_point = malloc(llen + 1);
		m.fstype = malloc(llen + 1);
		m.source = malloc(llen + 1);
		CHECK(buf && m.mount_point && m.fstype && m.source);
		model_parse(line, llen, &m);
		pf_error_clear(&err);
		ret = pf_mountinfo_parse_line(line, llen, &e, buf, llen + 8, &err);
		CHECK(ret == 0 || ret == -EBADMSG);
		CHECK((ret == 0) == m.ok);
		if (ret == 0) {
			CHECK(!strcmp(e.mount_point, m.mount_point));
			CHECK(!strcmp(e.fstype, m.fstype));
			CHECK(!strcmp(e.source, m.source));
			CHECK(e.optional_fields == m.optional);
			if (e.mount_point[0] == '/' && model_normalises(e.mount_point)) {
				if (model_fuse(e.fstype))
					want_fuse++;
			} else {
				want_skipped++;	/* not absolute, or too long */
			}
		} else {
			CHECK(err.msg[0]);
			want_skipped++;
		}
		free(buf);
		free(m.mount_point);
		free(m.fstype);
		free(m.source);
	}
	pf_error_clear(&err);
	CHECK(pf_region_table_create(&t, NULL, PF_REGION_LEXICAL, &err) == 0);
	ret = pf_region_table_scan_mountinfo(t, text, len, &skipped, &err);
	CHECK(ret >= 0);
	CHECK((unsigned)ret == want_fuse);
	CHECK(skipped == want_skipped);
	/* Every mount the scan made is a FUSE one with an absolute path. */
	for (size_t i = 1; i < pf_region_table_mounts(t); i++) {
		pf_mount_info mi;

		CHECK(pf_region_table_mount(t, i, &mi) == 0);
		CHECK(mi.origin == PF_MOUNT_DETECTED);
		CHECK(mi.path[0] == '/');
	}
	pf_region_table_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* 16 KiB: too short for more mounts than a table holds. */
	if (size == 0 || size > 16384)
		return 0;
	if (data[0] & 1)
		fuzz_mountinfo((const char *)data + 1, size - 1);
	else
		fuzz_table((const char *)data + 1, size - 1);
	return 0;
}
