/* SPDX-License-Identifier: Apache-2.0 */
/* Storage regions, the mounts' side: the mount table file (PATH REGION per
 * line, fstab's escapes) and /proc/self/mountinfo (its FUSE mounts and the
 * file system of every path), parsed into a region table (region.c). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "region_internal.h"

#define MOUNTINFO_LINE_MAX (64u << 10)	/* longer mountinfo lines are skipped */

/* ------------------------------------------------------------------ */
/* The mount table file                                                 */

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

static int octal3(const char *p, size_t left)
{
	if (left < 3)
		return -1;
	for (int i = 0; i < 3; i++)
		if (p[i] < '0' || p[i] > '7')
			return -1;
	return (p[0] - '0') * 64 + (p[1] - '0') * 8 + (p[2] - '0');
}

/* A line error: err->file is "name:line". */
static int line_error(pf_error *err, const char *name, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int line_error(pf_error *err, const char *name, unsigned line, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -EINVAL;
	pf_error_clear(err);
	err->code = -EINVAL;
	snprintf(err->file, sizeof(err->file), "%s:%u", name, line);
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* One line (no newline).  @return 1 when it declared a mount, 0 for a
 * blank or comment line, or -errno. */
static int parse_table_line(pf_region_table *t, const char *s, size_t len,
			    const char *name, unsigned line, pf_error *err)
{
	char path[PF_REGION_MAX_LINE + 1], region[PF_REGION_MAX_LINE + 1];
	const char *f[3];
	size_t flen[3], nf = 0, i = 0, n = 0;
	pf_error sub;
	int ret;

	if (len && s[len - 1] == '\r')
		len--;		/* a file written on Windows */
	if (memchr(s, '\0', len))
		return line_error(err, name, line, "a NUL byte in the line");
	while (nf < 3) {
		while (i < len && blank(s[i]))
			i++;
		if (i == len || s[i] == '#')
			break;
		f[nf] = s + i;
		while (i < len && !blank(s[i]))
			i++;
		flen[nf] = (size_t)(s + i - f[nf]);
		nf++;
	}
	if (nf == 0)
		return 0;
	if (nf == 1)
		return line_error(err, name, line,
				  "'%.*s' has no region after it (expected PATH REGION)",
				  (int)(flen[0] < 128 ? flen[0] : 128), f[0]);
	if (nf == 3)
		return line_error(err, name, line,
				  "a third field '%.*s' (expected PATH REGION; write a blank "
				  "in a path as \\040)",
				  (int)(flen[2] < 64 ? flen[2] : 64), f[2]);
	/* fstab's escapes: \ooo octal.  Anything else after a backslash is
	 * a mistake worth naming. */
	for (size_t k = 0; k < flen[0]; k++) {
		int v;

		if (f[0][k] != '\\') {
			path[n++] = f[0][k];
			continue;
		}
		v = octal3(f[0] + k + 1, flen[0] - k - 1);
		if (v <= 0 || v > 255)
			return line_error(err, name, line,
					  "bad escape at column %zu of the path (write \\040 for "
					  "a space, \\011 tab, \\134 backslash)",
					  (size_t)(f[0] - s) + k + 1);
		path[n++] = (char)v;
		k += 3;
	}
	path[n] = '\0';
	if (path[0] != '/')
		return line_error(err, name, line, "path '%s' is not absolute", path);
	memcpy(region, f[1], flen[1]);
	region[flen[1]] = '\0';
	pf_error_clear(&sub);
	if (pf_region_name_check(region, &sub) < 0)
		return line_error(err, name, line, "%s", sub.msg);
	pf_error_clear(&sub);
	ret = pf_region_table_declare(t, path, region, PF_MOUNT_FILE, name, line, &sub);
	if (ret == -EINVAL)
		return line_error(err, name, line, "%s", sub.msg);
	if (ret < 0) {
		line_error(err, name, line, "%s", sub.msg[0] ? sub.msg : pf_strerror(ret));
		if (err)
			err->code = ret;
		return ret;
	}
	return 1;
}

int pf_region_table_parse(pf_region_table *t, const char *text, size_t len,
			  const char *name, pf_error *err)
{
	unsigned line = 1;
	size_t pos = 0;
	int added = 0;

	pf_error_clear(err);
	if (!name)
		name = "mount table";
	if (len > PF_REGION_MAX_FILE) {
		pf_error_set_file(err, name);
		return pf_error_set(err, -EFBIG, PF_OFFSET_NONE, 0,
				    "%zu bytes: a mount table is at most %u", len,
				    PF_REGION_MAX_FILE);
	}
	while (pos < len) {
		const char *eol = memchr(text + pos, '\n', len - pos);
		size_t llen = eol ? (size_t)(eol - (text + pos)) : len - pos;
		int ret;

		if (llen > PF_REGION_MAX_LINE)
			return line_error(err, name, line,
					  "the line is %zu bytes long (at most %u)", llen,
					  PF_REGION_MAX_LINE);
		ret = parse_table_line(t, text + pos, llen, name, line, err);
		if (ret < 0)
			return ret;
		added += ret;
		pos += llen + 1;
		line++;
	}
	return added;
}

/* Read a whole file of at most max bytes (checked on its size before the
 * buffer is made; a file that grows meanwhile is cut there and refused).
 * @return its length with *out (pf_free), or -errno with err naming it. */
static int64_t read_small_file(const char *path, size_t max, char **out,
			       const char *what, pf_error *err)
{
	int fd = pf_file_open(path, err);
	uint64_t size = 0;
	size_t cap, n = 0;
	char *buf;
	int ret;

	if (fd < 0)
		return fd;
	ret = pf_file_size(fd, &size);
	if (ret == 0 && size > max) {
		close(fd);
		pf_error_set_file(err, path);
		return pf_error_set(err, -EFBIG, PF_OFFSET_NONE, 0,
				    "%llu bytes: a %s is at most %zu",
				    (unsigned long long)size, what, max);
	}
	/* /proc files say size 0: read in growing steps up to max. */
	cap = size ? (size_t)size + 1 : 64u << 10;
	buf = pf_malloc(cap);
	if (!buf) {
		close(fd);
		pf_error_set_file(err, path);
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory to read the %s", what);
	}
	for (;;) {
		int64_t got;

		if (n == cap) {
			char *g;

			if (cap > max) {
				pf_free(buf);
				close(fd);
				pf_error_set_file(err, path);
				return pf_error_set(err, -EFBIG, PF_OFFSET_NONE, 0,
						    "more than %zu bytes: a %s is at most that",
						    max, what);
			}
			g = pf_realloc(buf, cap * 2 > max + 1 ? max + 1 : cap * 2);
			if (!g) {
				pf_free(buf);
				close(fd);
				pf_error_set_file(err, path);
				return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
						    "no memory to read the %s", what);
			}
			buf = g;
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
		}
		got = pf_file_pread(fd, buf + n, cap - n, n, path, err);
		if (got < 0) {
			pf_free(buf);
			close(fd);
			return got;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	if (n > max) {
		pf_free(buf);
		pf_error_set_file(err, path);
		return pf_error_set(err, -EFBIG, PF_OFFSET_NONE, 0,
				    "more than %zu bytes: a %s is at most that", max, what);
	}
	*out = buf;
	return (int64_t)n;
}

int pf_region_table_load(pf_region_table *t, const char *file, pf_error *err)
{
	char *text = NULL;
	int64_t len;
	int ret;

	pf_error_clear(err);
	len = read_small_file(file, PF_REGION_MAX_FILE, &text, "mount table", err);
	if (len < 0)
		return (int)len;
	ret = pf_region_table_parse(t, text, (size_t)len, file, err);
	pf_free(text);
	return ret;
}

/* ------------------------------------------------------------------ */
/* /proc/self/mountinfo                                                 */

static bool parse_u32(const char *s, size_t n, uint32_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 10)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* Copy field (n bytes) into buf at *used, decoding \ooo.  @return the
 * copy, or NULL when \000 appears (*bad set) or buf is full. */
static const char *unescape(const char *s, size_t n, char *buf, size_t cap,
			    size_t *used, bool *bad)
{
	char *out = buf + *used;
	size_t k = 0;

	if (*used + n + 1 > cap)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		int v = s[i] == '\\' ? octal3(s + i + 1, n - i - 1) : -1;

		if (v == 0 || v > 255) {
			*bad = true;
			return NULL;
		}
		if (v > 0) {
			out[k++] = (char)v;
			i += 3;
		} else {
			out[k++] = s[i];
		}
	}
	out[k] = '\0';
	*used += k + 1;
	return out;
}

int pf_mountinfo_parse_line(const char *line, size_t len, pf_mountinfo_entry *e,
			    char *buf, size_t cap, pf_error *err)
{
	static const char *const names[] = {
		"mount ID", "parent ID", "major:minor", "root", "mount point",
		"mount options",
	};
	const char *tok;
	size_t tlen, i = 0, used = 0, field = 0;
	bool after_sep = false, bad = false;
	unsigned nafter = 0;

	pf_error_clear(err);
	memset(e, 0, sizeof(*e));
	e->super_options = "";
	if (memchr(line, '\0', len))
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0, "a NUL byte in the line");
	for (;;) {
		const char *v = NULL;

		while (i < len && (line[i] == ' ' || line[i] == '\t'))
			i++;
		if (i == len)
			break;
		tok = line + i;
		while (i < len && line[i] != ' ' && line[i] != '\t')
			i++;
		tlen = (size_t)(line + i - tok);
		if (after_sep) {
			if (nafter < 3) {
				v = unescape(tok, tlen, buf, cap, &used, &bad);
				if (!v)
					goto fail;
				if (nafter == 0)
					e->fstype = v;
				else if (nafter == 1)
					e->source = v;
				else
					e->super_options = v;
			}
			nafter++;	/* later fields, if a kernel adds any, are ignored */
			continue;
		}
		switch (field) {
		case 0:
			if (!parse_u32(tok, tlen, &e->mount_id))
				goto bad_field;
			break;
		case 1:
			if (!parse_u32(tok, tlen, &e->parent_id))
				goto bad_field;
			break;
		case 2: {
			const char *colon = memchr(tok, ':', tlen);

			if (!colon || !parse_u32(tok, (size_t)(colon - tok), &e->major) ||
			    !parse_u32(colon + 1, tlen - (size_t)(colon - tok) - 1, &e->minor))
				goto bad_field;
			break;
		}
		case 3:
		case 4:
		case 5:
			v = unescape(tok, tlen, buf, cap, &used, &bad);
			if (!v)
				goto fail;
			if (field == 3)
				e->root = v;
			else if (field == 4)
				e->mount_point = v;
			else
				e->options = v;
			break;
		default:
			/* Optional fields ("shared:1", "master:2", ...) up to "-". */
			if (tlen == 1 && tok[0] == '-')
				after_sep = true;
			else
				e->optional_fields++;
			break;
		}
		field++;
	}
	if (field == 0)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0, "an empty line");
	if (field < 6)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "only %zu fields: no %s", field, names[field]);
	if (!after_sep)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "no \" - \" separator after the optional fields");
	if (nafter < 2)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "no %s after the \" - \" separator",
				    nafter ? "mount source" : "file system type");
	return 0;
bad_field:
	return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0, "bad %s '%.*s'",
			    names[field], (int)(tlen < 64 ? tlen : 64), tok);
fail:
	if (bad)
		return pf_error_set(err, -EBADMSG, PF_OFFSET_NONE, 0,
				    "\\000 in field %zu", field + nafter + 1);
	return pf_error_set(err, -ENOBUFS, PF_OFFSET_NONE, 0,
			    "a %zu-byte buffer is too small for the line", cap);
}

int pf_region_table_scan_mountinfo(pf_region_table *t, const char *text, size_t len,
				   unsigned *skipped, pf_error *err)
{
	char *buf;
	size_t pos = 0;
	unsigned bad = 0;
	int fuse = 0, ret = 0;

	pf_error_clear(err);
	if (skipped)
		*skipped = 0;
	if (pf_region_table_frozen(t))
		return pf_error_set(err, -EBUSY, PF_OFFSET_NONE, 0,
				    "the region table is in use: mounts can no longer be added");
	if (len > PF_MOUNTINFO_MAX)
		return pf_error_set(err, -EFBIG, PF_OFFSET_NONE, 0,
				    "mountinfo of %zu bytes (at most %u)", len, PF_MOUNTINFO_MAX);
	buf = pf_malloc(MOUNTINFO_LINE_MAX + 8);
	if (!buf)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory to parse mountinfo");
	while (pos < len && ret == 0) {
		const char *eol = memchr(text + pos, '\n', len - pos);
		size_t llen = eol ? (size_t)(eol - (text + pos)) : len - pos;
		char canon[PATH_MAX];
		pf_mountinfo_entry e;
		int clen;

		if (llen == 0) {
			pos++;
			continue;
		}
		if (llen > MOUNTINFO_LINE_MAX ||
		    pf_mountinfo_parse_line(text + pos, llen, &e, buf,
					    MOUNTINFO_LINE_MAX + 8, NULL) < 0 ||
		    e.mount_point[0] != '/' ||
		    (clen = pf_region_path_normalize(e.mount_point, canon, sizeof(canon))) < 0) {
			bad++;
			pos += llen + 1;
			continue;
		}
		pos += llen + 1;
		ret = pf_region_table_add_fs(t, canon, (size_t)clen, &e, err);
		if (ret > 0) {
			fuse++;
			ret = 0;
		}
	}
	pf_free(buf);
	if (skipped)
		*skipped = bad;
	if (ret == -E2BIG && err && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0,
			     "more than %u mounts in mountinfo", PF_MOUNTINFO_ENTRIES_MAX);
	if (ret == -ENOMEM && err && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0,
			     "no memory for the mounts of mountinfo");
	return ret < 0 ? ret : fuse;
}

int pf_region_table_scan_mounts(pf_region_table *t, unsigned *skipped, pf_error *err)
{
	char *text = NULL;
	int64_t len;
	int ret;

	pf_error_clear(err);
	len = read_small_file("/proc/self/mountinfo", PF_MOUNTINFO_MAX, &text, "mountinfo", err);
	if (skipped)
		*skipped = 0;
	if (len < 0)
		return (int)len;
	ret = pf_region_table_scan_mountinfo(t, text, (size_t)len, skipped, err);
	pf_free(text);
	return ret;
}

/* The FUSE bucket clients, known by their mount's file system type, and
 * what a user of each should set (measured in docs/buckets.md). */
static const struct bucket_client {
	const char *fstype, *client, *advice;
} bucket_clients[] = {
	{ "fuse.s3fs", "s3fs",
	  "s3fs serves podfeed's reads with ranged requests, several at once "
	  "(0.95x-1.25x of cat measured with its defaults; -o parallel_count and "
	  "-o multireq_max set how many); a server that stops answering holds a "
	  "read for -o retries (default 5) tries of -o connect_timeout and -o "
	  "readwrite_timeout: podfeed fails the read at --io-timeout-ms, the "
	  "process ends only when s3fs gives up (-o retries=2 bounds it)" },
	{ "fuse.rclone", "rclone",
	  "set rclone mount --vfs-cache-mode full (--cache-dir on a local disk): "
	  "its default streaming mode reopens an object at each read out of "
	  "order, and podfeed reads several frames of a file at once (0.18x of "
	  "cat measured, 0.83x with full; --buffer-size does not change it); a "
	  "server that stops answering holds a read for --low-level-retries "
	  "(default 10) tries with backoff, minutes: podfeed fails the read at "
	  "--io-timeout-ms, the process ends only when rclone gives up "
	  "(--low-level-retries 2 --contimeout 5s ended it within 5 s)" },
	{ "fuse.gcsfuse", "gcsfuse",
	  "gcsfuse: --stat-cache-ttl and --type-cache-ttl spare a round trip per "
	  "lookup; a read a server does not answer is retried by gcsfuse for "
	  "--max-retry-duration (podfeed fails it at --io-timeout-ms)" },
	{ "fuse.mountpoint-s3", "mountpoint-s3",
	  "mountpoint-s3: --max-threads sets its requests at once; --metadata-ttl "
	  "spares a lookup's round trip" },
};

const char *pf_mount_bucket_client(const char *fstype, const char **advice)
{
	for (size_t i = 0; fstype && i < sizeof(bucket_clients) / sizeof(bucket_clients[0]); i++)
		if (!strcmp(fstype, bucket_clients[i].fstype)) {
			if (advice)
				*advice = bucket_clients[i].advice;
			return bucket_clients[i].client;
		}
	if (advice)
		*advice = NULL;
	return NULL;
}
