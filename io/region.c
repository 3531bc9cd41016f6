/* SPDX-License-Identifier: Apache-2.0 */
/* Storage regions: the mount table (flags, a mount table file, the FUSE
 * mounts of /proc/self/mountinfo), the attribution of files to mounts and
 * regions by longest prefix, and read counters per mount and per region.
 *
 * Why a region's active time is counted here and not derived later: the
 * loader keeps many reads in flight, over many files of one region at
 * once, so neither summed latency nor per-file times say how long a region
 * was being read.  Each mount and each region keeps its own count of reads
 * in flight; its active time is the union of the spells when that count
 * is above zero, and its MB/s is bytes over that time.
 *
 * Why the table freezes: the region of a mount depends on every other
 * mount (a detected FUSE mount takes the region of the nearest declared
 * enclosing path), and counters are kept per region index.  Resolving
 * once, at the first lookup, keeps indexes stable while reads are
 * counted, and makes every later call safe from any thread.
 *
 * The mount table file and /proc/self/mountinfo are parsed into the table
 * by region_mounts.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "region_internal.h"

typedef struct tally {
	pf_io_stats io;
	uint64_t active_ns;
	uint64_t since_ns;	/* start of the current active spell */
	uint32_t inflight;
} tally;

typedef struct mount_entry {
	char *path;		/* canonical, no trailing '/' (but "/") */
	size_t len;
	char *region;		/* declared, lower case, or NULL */
	const char *fstype;	/* borrowed from a file system entry */
	const char *source;
	bool fuse;
	pf_mount_origin origin;
	char *origin_file;
	unsigned origin_line;
	uint32_t region_index;
	tally a;
} mount_entry;

/* A mount of mountinfo, kept for the file system type of paths. */
typedef struct fs_entry {
	char *path;
	size_t len;
	char *fstype, *source;
} fs_entry;

typedef struct region_entry {
	const char *name;	/* borrowed: the host's or a mount's region */
	pf_region_kind kind;
	bool undeclared;
	tally a;
} region_entry;

struct pf_region_table {
	pthread_mutex_t mu;
	unsigned flags;
	char *host;
	bool frozen;
	mount_entry *m;
	size_t nm, cap;
	region_entry *r;	/* room for cap + 2 entries (never grows when frozen) */
	size_t nr;
	fs_entry *fs;
	size_t nfs, fs_cap;
	/* The last directory canonical() resolved, as named (made absolute
	 * against the working directory) and as realpath(3) gave it: the
	 * shards of a dataset share one, and resolving it again for each
	 * shard is a round trip per component on a network mount (10,000
	 * shards behind a 30 ms bucket: 5 minutes). */
	char *dir_key, *dir_real;
};

/* ------------------------------------------------------------------ */
/* Names and paths                                                      */

const char *pf_region_host(const char *flag, const char **source)
{
	const char *env = getenv("PODFEED_REGION");

	if (source)
		*source = NULL;
	if (flag && *flag) {
		if (source)
			*source = "--region";
		return flag;
	}
	if (env && *env) {
		if (source)
			*source = "PODFEED_REGION";
		return env;
	}
	return NULL;
}

static bool region_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

int pf_region_name_check(const char *name, pf_error *err)
{
	size_t n = name ? strlen(name) : 0;

	pf_error_clear(err);
	if (!n)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the region name is empty");
	if (n > PF_REGION_NAME_MAX)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "region '%.32s...' is %zu characters long (at most %u)",
				    name, n, PF_REGION_NAME_MAX);
	for (size_t i = 0; i < n; i++)
		if (!region_char_ok(name[i]))
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "region '%.64s' has the byte 0x%02x at %zu "
					    "(a region name is letters, digits, '-', '_' or '.')",
					    name, (unsigned char)name[i], i);
	return 0;
}

/* A lower-case copy of a valid region name (caller frees), or NULL. */
static char *region_dup(const char *name)
{
	char *s = pf_strdup(name);

	for (char *p = s; p && *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	return s;
}

/* Lexical normalisation: make path absolute (against the working
 * directory), drop empty and "." components, let ".." remove the one
 * before.  @return the length written to out, or -ENAMETOOLONG,
 * -EINVAL (empty path), -errno of getcwd. */
int pf_region_path_normalize(const char *path, char *out, size_t cap)
{
	char cwd[PATH_MAX];
	const char *parts[2] = { NULL, path };
	size_t n = 0;

	if (!path || !*path)
		return -EINVAL;
	if (path[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)))
			return -errno;
		parts[0] = cwd;
	}
	for (int k = 0; k < 2; k++) {
		const char *p = parts[k];

		while (p && *p) {
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
				while (n > 0 && out[n - 1] != '/')
					n--;
				if (n > 0)
					n--;	/* the '/' before it */
				continue;
			}
			if (n + 1 + clen + 1 > cap)
				return -ENAMETOOLONG;
			out[n++] = '/';
			memcpy(out + n, c, clen);
			n += clen;
		}
	}
	if (n == 0)
		out[n++] = '/';
	out[n] = '\0';
	return (int)n;
}

/* dir's real path into out, from the table's one-entry cache when dir
 * (made absolute) is the directory resolved last.  @return true, or
 * false when dir does not resolve. */
static bool real_dir(pf_region_table *t, const char *dir, size_t dlen, char out[PATH_MAX])
{
	char key[PATH_MAX], name[PATH_MAX];
	size_t klen = 0;
	bool ok;

	if (dlen >= PATH_MAX)
		return false;
	memcpy(name, dir, dlen);
	name[dlen] = '\0';
	if (dir[0] != '/') {
		if (!getcwd(key, sizeof(key)))
			return false;
		klen = strlen(key);
		if (klen + 1 + dlen >= PATH_MAX)
			return false;
		key[klen++] = '/';
	}
	memcpy(key + klen, name, dlen + 1);
	pthread_mutex_lock(&t->mu);
	ok = t->dir_key && !strcmp(t->dir_key, key);
	if (ok)
		memcpy(out, t->dir_real, strlen(t->dir_real) + 1);
	pthread_mutex_unlock(&t->mu);
	if (ok)
		return true;
	if (!realpath(name, out))
		return false;
	pthread_mutex_lock(&t->mu);
	if (!t->dir_key) {
		t->dir_key = pf_malloc(PATH_MAX);
		t->dir_real = pf_malloc(PATH_MAX);
	}
	if (t->dir_key && t->dir_real) {
		memcpy(t->dir_key, key, strlen(key) + 1);
		memcpy(t->dir_real, out, strlen(out) + 1);
	} else {
		pf_free(t->dir_key);
		pf_free(t->dir_real);
		t->dir_key = t->dir_real = NULL;
	}
	pthread_mutex_unlock(&t->mu);
	return true;
}

/* The canonical form of path: its directory's realpath(3) (symlinks
 * followed, cached: one resolution for all the shards of a directory)
 * and its last component as named (a shard that is itself a symlink
 * counts where it is named, not where it points: resolving each shard's
 * name is a round trip each on a network mount), unless the table is
 * lexical; lexical where the directory does not resolve.  whole: all of
 * path resolved (a mount declared through a symlink).  @return its
 * length, or -errno. */
static int canonical(pf_region_table *t, const char *path, bool whole, char out[PATH_MAX])
{
	if (!(t->flags & PF_REGION_LEXICAL) && path && *path) {
		const char *slash = strrchr(path, '/');
		const char *base = slash ? slash + 1 : path;
		/* "/x" has the directory "/", "x" the directory ".". */
		const char *dir = slash ? path : ".";
		size_t dlen = slash ? (size_t)(slash - path) + (slash == path) : 1;
		size_t blen = strlen(base), rlen;
		char real[PATH_MAX];

		if (whole || !blen || !strcmp(base, ".") || !strcmp(base, "..")) {
			/* A mount, or a directory named as such: all of it
			 * resolved. */
			if (realpath(path, out))
				return (int)strlen(out);
		} else if (real_dir(t, dir, dlen, real)) {
			rlen = strlen(real);
			if (real[rlen - 1] != '/')
				real[rlen++] = '/';
			if (rlen + blen < PATH_MAX) {
				memcpy(out, real, rlen);
				memcpy(out + rlen, base, blen + 1);
				return (int)(rlen + blen);
			}
		}
	}
	return pf_region_path_normalize(path, out, PATH_MAX);
}

/* Whether the mount prefix e covers the canonical path p (whole
 * components: /data covers /data and /data/x, not /data2). */
static bool covers(const char *prefix, size_t plen, const char *p, size_t len)
{
	if (plen == 1 && prefix[0] == '/')
		return true;
	return plen <= len && !memcmp(p, prefix, plen) && (len == plen || p[plen] == '/');
}

/* ------------------------------------------------------------------ */
/* The table                                                            */

int pf_region_table_create(pf_region_table **out, const char *host_region,
			   unsigned flags, pf_error *err)
{
	pf_region_table *t;
	int ret;

	pf_error_clear(err);
	if (host_region) {
		ret = pf_region_name_check(host_region, err);
		if (ret < 0)
			return ret;
	}
	t = pf_calloc(1, sizeof(*t));
	if (!t)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory for a region table");
	t->flags = flags;
	pthread_mutex_init(&t->mu, NULL);
	t->cap = 8;
	t->m = pf_calloc(t->cap, sizeof(*t->m));
	t->r = pf_calloc(t->cap + 2, sizeof(*t->r));
	t->host = host_region ? region_dup(host_region) : NULL;
	if (!t->m || !t->r || (host_region && !t->host)) {
		pf_region_table_free(t);
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory for a region table");
	}
	/* Mount 0: whatever is under no other mount, in the host's region. */
	t->m[0].path = pf_strdup("/");
	if (!t->m[0].path) {
		pf_region_table_free(t);
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory for a region table");
	}
	t->m[0].len = 1;
	t->m[0].origin = PF_MOUNT_LOCAL;
	t->nm = 1;
	*out = t;
	return 0;
}

void pf_region_table_free(pf_region_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nm; i++) {
		pf_free(t->m[i].path);
		pf_free(t->m[i].region);
		pf_free(t->m[i].origin_file);
	}
	for (size_t i = 0; i < t->nfs; i++) {
		pf_free(t->fs[i].path);
		pf_free(t->fs[i].fstype);
		pf_free(t->fs[i].source);
	}
	pf_free(t->m);
	pf_free(t->r);
	pf_free(t->fs);
	pf_free(t->dir_key);
	pf_free(t->dir_real);
	pf_free(t->host);
	pthread_mutex_destroy(&t->mu);
	pf_free(t);
}

const char *pf_region_table_host(const pf_region_table *t)
{
	return t->host;
}

static mount_entry *find_path(pf_region_table *t, const char *path, size_t len)
{
	for (size_t i = 1; i < t->nm; i++)
		if (t->m[i].len == len && !memcmp(t->m[i].path, path, len))
			return &t->m[i];
	return NULL;
}

/* Room for one more mount (and the region it may bring).  The limit is
 * checked before anything grows. */
static int grow_mounts(pf_region_table *t, pf_error *err)
{
	mount_entry *m;
	region_entry *r;
	size_t cap;

	if (t->nm - 1 >= PF_REGION_MAX_MOUNTS)
		return pf_error_set(err, -E2BIG, PF_OFFSET_NONE, 0,
				    "more than %u mounts in the region table",
				    PF_REGION_MAX_MOUNTS);
	if (t->nm < t->cap)
		return 0;
	cap = t->cap * 2;
	m = pf_realloc(t->m, cap * sizeof(*m));
	if (!m)
		return -ENOMEM;
	t->m = m;
	r = pf_realloc(t->r, (cap + 2) * sizeof(*r));
	if (!r)
		return -ENOMEM;
	t->r = r;
	t->cap = cap;
	return 0;
}

/* Add a mount of canonical path (len bytes).  @return its index or -errno. */
static int add_mount(pf_region_table *t, const char *path, size_t len,
		     const char *region, pf_mount_origin origin, const char *file,
		     unsigned line, pf_error *err)
{
	mount_entry *e;
	int ret;

	if (t->frozen)
		return pf_error_set(err, -EBUSY, PF_OFFSET_NONE, 0,
				    "the region table is in use: mounts can no longer be added");
	e = find_path(t, path, len);
	if (e && region && e->region && strcasecmp(e->region, region)) {
		char where[PF_PATH_MAX + 16] = "a --mount flag";

		if (e->origin == PF_MOUNT_FILE)
			snprintf(where, sizeof(where), "%s:%u", e->origin_file,
				 e->origin_line);
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%s is declared in region %s here and in %s at %s",
				    path, region, e->region, where);
	}
	if (e && (!region || e->region))
		return (int)(e - t->m);		/* already there, as it is */
	/* Everything is allocated before the table changes. */
	char *copy = e ? NULL : pf_malloc(len + 1);
	char *rcopy = region ? region_dup(region) : NULL;
	char *fcopy = region && file ? pf_strdup(file) : NULL;

	if ((!e && !copy) || (region && !rcopy) || (region && file && !fcopy)) {
		pf_free(copy);
		pf_free(rcopy);
		pf_free(fcopy);
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory for the mount %s", path);
	}
	if (!e) {
		ret = grow_mounts(t, err);
		if (ret < 0) {
			pf_free(copy);
			pf_free(rcopy);
			pf_free(fcopy);
			if (ret == -ENOMEM)
				pf_error_set(err, ret, PF_OFFSET_NONE, 0,
					     "no memory for the mount %s", path);
			return ret;
		}
		e = &t->m[t->nm++];
		memset(e, 0, sizeof(*e));
		memcpy(copy, path, len);
		copy[len] = '\0';
		e->path = copy;
		e->len = len;
		e->origin = origin;
	}
	if (region) {
		/* A new mount, or a detected one now declared. */
		e->region = rcopy;
		e->origin = origin;
		e->origin_file = fcopy;
		e->origin_line = fcopy ? line : 0;
	}
	return (int)(e - t->m);
}

int pf_region_table_declare(pf_region_table *t, const char *path, const char *region,
			    pf_mount_origin origin, const char *file, unsigned line,
			    pf_error *err)
{
	char canon[PATH_MAX];
	int ret = pf_region_name_check(region, err);
	int len;

	if (ret < 0)
		return ret;
	len = canonical(t, path, true, canon);
	if (len < 0)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "mount path '%.*s': %s", (int)PF_PATH_MAX, path ? path : "",
				    len == -ENAMETOOLONG ? "too long" : pf_strerror(len));
	return add_mount(t, canon, (size_t)len, region, origin, file, line, err);
}

int pf_region_table_add(pf_region_table *t, const char *path, const char *region,
			pf_error *err)
{
	pf_error_clear(err);
	return pf_region_table_declare(t, path, region, PF_MOUNT_FLAG, NULL, 0, err);
}

int pf_region_table_add_flag(pf_region_table *t, const char *spec, pf_error *err)
{
	const char *eq = spec ? strrchr(spec, '=') : NULL;
	char path[PATH_MAX];
	size_t plen;

	pf_error_clear(err);
	if (!eq)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "'%.*s' is not PATH=REGION", (int)PF_PATH_MAX,
				    spec ? spec : "");
	plen = (size_t)(eq - spec);
	if (plen == 0)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "'%.*s' has no path before '='", (int)PF_PATH_MAX, spec);
	if (plen >= sizeof(path))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the path of '%.64s...' is too long", spec);
	memcpy(path, spec, plen);
	path[plen] = '\0';
	if (!eq[1])
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "'%.*s' has no region after '='", (int)PF_PATH_MAX, spec);
	return pf_region_table_declare(t, path, eq + 1, PF_MOUNT_FLAG, NULL, 0, err);
}

/* ------------------------------------------------------------------ */
/* File systems from mountinfo (region_mounts.c parses it)              */

static bool fstype_fuse(const char *fstype)
{
	return fstype && (!strcmp(fstype, "fuse") || !strncmp(fstype, "fuse.", 5));
}

/* Keep a mount of mountinfo (a later entry of the same path is mounted
 * over an earlier one: it replaces it). */
static int add_fs(pf_region_table *t, const char *path, size_t len,
		  const pf_mountinfo_entry *e)
{
	fs_entry *f = NULL;
	char *fstype, *source;

	for (size_t i = 0; i < t->nfs && !f; i++)
		if (t->fs[i].len == len && !memcmp(t->fs[i].path, path, len))
			f = &t->fs[i];
	if (!f) {
		if (t->nfs >= PF_MOUNTINFO_ENTRIES_MAX)
			return -E2BIG;
		if (pf_grow(&t->fs, &t->fs_cap, t->nfs + 1, sizeof(*t->fs)) < 0)
			return -ENOMEM;
		f = &t->fs[t->nfs];
		memset(f, 0, sizeof(*f));
		f->path = pf_malloc(len + 1);
		if (!f->path)
			return -ENOMEM;
		memcpy(f->path, path, len);
		f->path[len] = '\0';
		f->len = len;
		t->nfs++;
	}
	fstype = pf_strdup(e->fstype);
	source = pf_strdup(e->source);
	if (!fstype || !source) {
		pf_free(fstype);
		pf_free(source);
		return -ENOMEM;
	}
	pf_free(f->fstype);
	pf_free(f->source);
	f->fstype = fstype;
	f->source = source;
	return 0;
}

int pf_region_table_add_fs(pf_region_table *t, const char *canon, size_t len,
			   const pf_mountinfo_entry *e, pf_error *err)
{
	int ret = add_fs(t, canon, len, e);

	if (ret < 0 || !fstype_fuse(e->fstype))
		return ret;
	ret = add_mount(t, canon, len, NULL, PF_MOUNT_DETECTED, NULL, 0, err);
	return ret < 0 ? ret : 1;
}

bool pf_region_table_frozen(const pf_region_table *t)
{
	return t->frozen;
}

/* ------------------------------------------------------------------ */
/* Resolving: file systems, regions                                     */

/* The mountinfo mount a canonical path lies on, or NULL. */
static const fs_entry *fs_of(const pf_region_table *t, const char *p, size_t len)
{
	const fs_entry *best = NULL;

	for (size_t i = 0; i < t->nfs; i++)
		if (covers(t->fs[i].path, t->fs[i].len, p, len) &&
		    (!best || t->fs[i].len > best->len))
			best = &t->fs[i];
	return best;
}

static uint32_t region_of_name(pf_region_table *t, const char *name)
{
	if (t->host && !strcmp(t->host, name))
		return 0;
	for (size_t r = 1; r < t->nr; r++)
		if (t->r[r].name && !strcmp(t->r[r].name, name))
			return (uint32_t)r;
	/* The array has room for every mount's region plus two. */
	memset(&t->r[t->nr], 0, sizeof(t->r[0]));
	t->r[t->nr].name = name;
	t->r[t->nr].kind = t->host ? PF_REGION_CROSS : PF_REGION_UNKNOWN;
	return (uint32_t)t->nr++;
}

/* Call with mu held. */
static void freeze_locked(pf_region_table *t)
{
	uint32_t undeclared = UINT32_MAX;

	if (t->frozen)
		return;
	t->frozen = true;
	memset(&t->r[0], 0, sizeof(t->r[0]));
	t->r[0].name = t->host;
	t->r[0].kind = PF_REGION_IN;
	t->nr = 1;
	for (size_t i = 0; i < t->nm; i++) {
		mount_entry *e = &t->m[i];
		const fs_entry *fs = fs_of(t, e->path, e->len);
		const mount_entry *decl = NULL;

		e->fstype = fs ? fs->fstype : NULL;
		e->source = fs && fs->len == e->len ? fs->source : NULL;
		e->fuse = fstype_fuse(e->fstype);
		if (i == 0) {
			e->region_index = 0;
			continue;
		}
		if (e->region) {
			e->region_index = region_of_name(t, e->region);
			continue;
		}
		/* A detected mount: the region of the nearest declared path
		 * that encloses it. */
		for (size_t k = 1; k < t->nm; k++)
			if (k != i && t->m[k].region && t->m[k].len < e->len &&
			    covers(t->m[k].path, t->m[k].len, e->path, e->len) &&
			    (!decl || t->m[k].len > decl->len))
				decl = &t->m[k];
		if (decl) {
			e->region_index = region_of_name(t, decl->region);
			continue;
		}
		if (undeclared == UINT32_MAX) {
			undeclared = (uint32_t)t->nr++;
			memset(&t->r[undeclared], 0, sizeof(t->r[0]));
			t->r[undeclared].kind = PF_REGION_UNKNOWN;
			t->r[undeclared].undeclared = true;
		}
		e->region_index = undeclared;
	}
}

size_t pf_region_table_mounts(const pf_region_table *t)
{
	return t->nm;
}

int pf_region_table_mount(pf_region_table *t, size_t i, pf_mount_info *out)
{
	const mount_entry *e;

	if (i >= t->nm)
		return -ERANGE;
	pthread_mutex_lock(&t->mu);
	freeze_locked(t);
	pthread_mutex_unlock(&t->mu);
	e = &t->m[i];
	memset(out, 0, sizeof(*out));
	out->path = e->path;
	out->region = e->region;
	out->region_index = e->region_index;
	out->fstype = e->fstype;
	out->source = e->source;
	out->fuse = e->fuse;
	out->origin = e->origin;
	out->origin_file = e->origin_file;
	out->origin_line = e->origin_line;
	return 0;
}

size_t pf_region_table_regions(pf_region_table *t)
{
	size_t n;

	pthread_mutex_lock(&t->mu);
	freeze_locked(t);
	n = t->nr;
	pthread_mutex_unlock(&t->mu);
	return n;
}

int pf_region_table_region(pf_region_table *t, size_t r, pf_region_info *out)
{
	const region_entry *e;

	if (r >= pf_region_table_regions(t))
		return -ERANGE;
	e = &t->r[r];
	out->name = e->name;
	out->label = e->name ? e->name : e->undeclared ? "undeclared" : "local";
	out->kind = e->kind;
	out->undeclared = e->undeclared;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Lookups                                                              */

static size_t match_locked(pf_region_table *t, const char *p, size_t len)
{
	size_t best = 0, best_len = 0;

	freeze_locked(t);
	for (size_t i = 1; i < t->nm; i++)
		if (t->m[i].len > best_len && covers(t->m[i].path, t->m[i].len, p, len)) {
			best = i;
			best_len = t->m[i].len;
		}
	return best;
}

size_t pf_region_table_match(pf_region_table *t, const char *canonical_path)
{
	size_t m;

	pthread_mutex_lock(&t->mu);
	m = match_locked(t, canonical_path, strlen(canonical_path));
	pthread_mutex_unlock(&t->mu);
	return m;
}

size_t pf_region_table_lookup(pf_region_table *t, const char *path)
{
	char canon[PATH_MAX];
	int len;
	size_t m;

	/* Only mount 0 (no mount declared, none found, and the first
	 * lookup freezes the table): every path is under it, and realpath()
	 * would cost a readlink() per component of every path for nothing
	 * (on 1,000 shards, 14,000 of the 19,000 system calls a loader made
	 * before its first batch). */
	pthread_mutex_lock(&t->mu);
	freeze_locked(t);
	if (t->nm == 1) {
		pthread_mutex_unlock(&t->mu);
		return 0;
	}
	pthread_mutex_unlock(&t->mu);
	len = canonical(t, path, false, canon);
	pthread_mutex_lock(&t->mu);
	if (len < 0) {
		/* Not even lexically (too long): match it as written. */
		m = path ? match_locked(t, path, strlen(path)) : 0;
	} else {
		m = match_locked(t, canon, (size_t)len);
	}
	pthread_mutex_unlock(&t->mu);
	return m;
}

/* ------------------------------------------------------------------ */
/* Counting reads                                                       */

static void tally_begin(tally *a, uint64_t now)
{
	if (a->inflight++ == 0)
		a->since_ns = now;
}

static void tally_end(tally *a, uint64_t now, int64_t result, uint64_t latency_ns)
{
	if (a->inflight && --a->inflight == 0)
		a->active_ns += now - a->since_ns;
	a->io.ops++;
	if (result < 0)
		a->io.errors++;
	else
		a->io.bytes += (uint64_t)result;
	a->io.busy_ns += latency_ns;
	a->io.hist[pf_hist_bucket(latency_ns)]++;
}

void pf_region_read_begin(pf_region_table *t, size_t m)
{
	uint64_t now = pf_now_ns();

	if (!t || m >= t->nm)
		return;
	pthread_mutex_lock(&t->mu);
	freeze_locked(t);
	tally_begin(&t->m[m].a, now);
	tally_begin(&t->r[t->m[m].region_index].a, now);
	pthread_mutex_unlock(&t->mu);
}

void pf_region_read_end(pf_region_table *t, size_t m, int64_t result,
			uint64_t latency_ns)
{
	uint64_t now = pf_now_ns();

	if (!t || m >= t->nm)
		return;
	pthread_mutex_lock(&t->mu);
	freeze_locked(t);
	tally_end(&t->m[m].a, now, result, latency_ns);
	tally_end(&t->r[t->m[m].region_index].a, now, result, latency_ns);
	pthread_mutex_unlock(&t->mu);
}

int64_t pf_region_pread(pf_region_table *t, size_t m, int fd, void *buf, size_t len,
			uint64_t offset, const char *path, pf_error *err)
{
	uint64_t t0;
	int64_t got;

	pf_error_clear(err);
	if (!t)
		return pf_file_pread(fd, buf, len, offset, path, err);
	pf_region_read_begin(t, m);
	t0 = pf_now_ns();
	got = pf_file_pread(fd, buf, len, offset, path, err);
	pf_region_read_end(t, m, got, pf_now_ns() - t0);
	return got;
}

static void tally_copy(const tally *a, uint64_t now, pf_region_stats *out)
{
	out->io = a->io;
	out->active_ns = a->active_ns + (a->inflight ? now - a->since_ns : 0);
}

void pf_region_table_mount_stats(pf_region_table *t, size_t m, pf_region_stats *out)
{
	uint64_t now = pf_now_ns();

	memset(out, 0, sizeof(*out));
	if (m >= t->nm)
		return;
	pthread_mutex_lock(&t->mu);
	freeze_locked(t);
	tally_copy(&t->m[m].a, now, out);
	pthread_mutex_unlock(&t->mu);
}

void pf_region_table_region_stats(pf_region_table *t, size_t r, pf_region_stats *out)
{
	uint64_t now = pf_now_ns();

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&t->mu);
	freeze_locked(t);
	if (r < t->nr)
		tally_copy(&t->r[r].a, now, out);
	pthread_mutex_unlock(&t->mu);
}

static void tally_reset(tally *a, uint64_t now)
{
	memset(&a->io, 0, sizeof(a->io));
	a->active_ns = 0;
	a->since_ns = now;
}

void pf_region_table_reset_stats(pf_region_table *t)
{
	uint64_t now = pf_now_ns();

	pthread_mutex_lock(&t->mu);
	freeze_locked(t);
	for (size_t i = 0; i < t->nm; i++)
		tally_reset(&t->m[i].a, now);
	for (size_t r = 0; r < t->nr; r++)
		tally_reset(&t->r[r].a, now);
	pthread_mutex_unlock(&t->mu);
}
