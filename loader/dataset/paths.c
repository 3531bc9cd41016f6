/* SPDX-License-Identifier: Apache-2.0 */
/* Dataset paths: files, directories, globs and manifests to a sorted
 * list of shards, every file once.
 *
 * The one place where the names a user gives become files (the loader,
 * loadbench, shardtool, Python all come here), so the rules live here:
 *  - a directory gives its regular files (sorted, hidden ones and
 *    PF_MANIFEST_NAME skipped); one that gives none is an error naming
 *    it, and so is an entry that cannot be stat()ed (a symlink loop, a
 *    dangling link): no name the user gave is dropped silently;
 *  - a pattern with * ? [ is globbed (sorted) and its matches taken as
 *    if named one by one, as the shell's glob would name them (a
 *    manifest among them too);
 *  - a named file ending in ".manifest" is read as a manifest (its magic
 *    and checksums): named with no shard beside it, it stands for the
 *    shards it lists; named beside shards (as a shell glob of their
 *    directory names it), the shards
 *    named must be exactly those it lists (by identity), else an error
 *    naming the shard and the manifest;
 *  - a named file that is not a regular file (a FIFO, a socket, a
 *    device) is refused here, before anyone opens it (a FIFO's open
 *    would wait for a writer forever);
 *  - the same file reached twice (named twice, the same directory twice,
 *    "D/x" and "./D/x", a link and its target: one st_dev/st_ino, or on
 *    FUSE, whose inode numbers name no file for sure, one canonical path:
 *    pf_file_id in io/stat_internal.h) is an error naming it and both
 *    arguments: an epoch holds each record once.
 * Not here: opening a dataset from its manifest (manifest_open.c). */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "alloc_internal.h"
#include "dataset_internal.h"
#include "stat_internal.h"

/* One file found, and where from. */
typedef struct found {
	char *path;
	size_t arg;		/* the argument that named it (0-based) */
	int error;		/* its stat's, 0 when id is known */
	pf_file_id id;
} found;

typedef struct found_list {
	found *v;
	size_t n, cap;
} found_list;

typedef struct resolver {
	const char *const *args;
	found_list files;	/* shards, in the order named */
	found_list manifests;	/* manifests named */
	pf_error *err;
} resolver;

static int push(found_list *l, const char *path, size_t arg, const pf_stat_result *st,
		const pf_file_id *id)
{
	found *f;

	if (pf_grow(&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0)
		return -ENOMEM;
	f = &l->v[l->n];
	*f = (found){ .path = pf_strdup(path), .arg = arg, .error = st ? st->error : -ENOENT };
	if (!f->path)
		return -ENOMEM;
	l->n++;	/* found_free() frees what it holds from here */
	if (id && st && !st->error) {
		f->id = *id;
		f->id.canon = id->canon ? pf_strdup(id->canon) : NULL;
		if (id->canon && !f->id.canon)
			return -ENOMEM;
	}
	return 0;
}

static void found_free(found_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		pf_free(l->v[i].path);
		pf_free(l->v[i].id.canon);
	}
	pf_free(l->v);
	memset(l, 0, sizeof(*l));
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

/* The dataset manifest describes the shards; it is not one. */
static bool is_manifest_name(const char *name)
{
	return !strcmp(name, PF_MANIFEST_NAME);
}

static int fail(resolver *r, const char *file, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(resolver *r, const char *file, int code, const char *fmt, ...)
{
	char msg[PF_ERROR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pf_error_set_file(r->err, file);
	return pf_error_set(r->err, code, PF_OFFSET_NONE, 0, "%s", msg);
}

/* Stat names[0..n) with their identities, into freshly allocated arrays
 * (the caller frees both).  @return 0 or -ENOMEM. */
static int stat_all(const char *const *names, size_t n, pf_stat_result **st, pf_file_id **id)
{
	*st = pf_calloc(n ? n : 1, sizeof(**st));
	*id = pf_calloc(n ? n : 1, sizeof(**id));
	if (!*st || !*id || pf_stat_many_ids(names, n, *st, *id) < 0)
		return -ENOMEM;
	return 0;
}

/* A named file: a shard, or a manifest, or refused. */
static int add_named(resolver *r, const char *path, size_t arg, const pf_stat_result *st,
		     const pf_file_id *id)
{
	if (st->error)	/* its open says why, naming it */
		return push(&r->files, path, arg, st, id);
	if (!S_ISREG(st->mode))
		return fail(r, path, -EINVAL, "is %s, not a regular file: a shard must be one",
			    pf_file_type_name(st->mode));
	if (ends_with(path, ".manifest"))
		return push(&r->manifests, path, arg, st, id);
	return push(&r->files, path, arg, st, id);
}

/* One directory entry: its path, and (d_type saying it is a regular
 * file) its identity from readdir, or to be stat()ed (a link, or a file
 * system that does not say). */
typedef struct dir_entry {
	char *path;
	bool regular;
	uint64_t ino;
} dir_entry;

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const dir_entry *)a)->path, ((const dir_entry *)b)->path);
}

/* Directory arg's regular files, sorted.  d_type and d_ino spare a stat
 * per regular file (a round trip each on a far bucket: a start from the
 * manifest must not pay one per shard); links and entries of unknown
 * type are stat()ed, all at once, and one that cannot be (a symlink
 * loop, a dangling link) is an error naming it. */
static int add_dir(resolver *r, const char *dir, size_t arg, uint64_t dev)
{
	dir_entry *v = NULL;
	char **ask = NULL;
	size_t n = 0, cap = 0, nask = 0, kept = 0;
	pf_stat_result *st = NULL;
	pf_file_id *id = NULL;
	char *dir_canon = NULL;
	struct dirent *e;
	DIR *d = opendir(dir);
	int ret = 0;

	if (!d) {
		ret = -errno;
		return fail(r, dir, ret, "cannot list directory: %s", pf_strerror(ret));
	}
	while ((e = readdir(d)) && ret == 0) {
		char path[4096];

		if (e->d_name[0] == '.' || is_manifest_name(e->d_name))
			continue;
		if (e->d_type != DT_REG && e->d_type != DT_LNK && e->d_type != DT_UNKNOWN)
			continue;	/* subdirectories, FIFOs, sockets: not shards */
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path)) {
			ret = fail(r, dir, -ENAMETOOLONG, "the path of its entry \"%.64s...\" is too "
				   "long", e->d_name);
			break;
		}
		if (pf_grow(&v, &cap, n + 1, sizeof(*v)) < 0 || !(v[n].path = pf_strdup(path))) {
			ret = -ENOMEM;
			break;
		}
		v[n].regular = e->d_type == DT_REG;
		v[n].ino = (uint64_t)e->d_ino;
		n++;
	}
	closedir(d);
	if (ret == 0 && n)
		qsort(v, n, sizeof(*v), cmp_entry);
	ask = pf_calloc(n ? n : 1, sizeof(*ask));
	if (ret == 0 && !ask)
		ret = -ENOMEM;
	for (size_t i = 0; ret == 0 && i < n; i++)
		if (!v[i].regular)
			ask[nask++] = v[i].path;
	if (ret == 0)
		ret = stat_all((const char *const *)ask, nask, &st, &id);
	/* On FUSE an entry is known by its path (readdir's d_ino may be one
	 * number for all: s3fs, gcsfuse). */
	if (ret == 0)
		ret = pf_dir_canon(dir, &dir_canon);
	for (size_t i = 0, k = 0; ret == 0 && i < n; i++) {
		pf_stat_result reg = { .mode = S_IFREG };
		pf_file_id own;

		if (v[i].regular) {
			ret = pf_file_id_entry(&own, dev, v[i].ino, dir_canon,
					       v[i].path + strlen(dir) + 1);
			if (ret == 0)
				ret = push(&r->files, v[i].path, arg, &reg, &own);
			pf_free(own.canon);
			kept++;
			continue;
		}
		if (st[k].error)	/* a symlink loop, a dangling link */
			ret = fail(r, v[i].path, st[k].error, "in directory %s (argument %zu): "
				   "cannot stat: %s", dir, arg + 1, pf_strerror(st[k].error));
		else if (S_ISREG(st[k].mode) && (ret = push(&r->files, v[i].path, arg, &st[k],
							     &id[k])) == 0)
			kept++;
		k++;
	}
	if (ret == 0 && !kept)
		ret = fail(r, dir, -ENOENT, "the directory (argument %zu) holds no shards: "
			   "no regular files%s", arg + 1, n ? " (only links to other things)" : "");
	pf_free(st);
	pf_file_ids_free(id, nask);
	pf_free(dir_canon);
	pf_free(ask);
	for (size_t i = 0; i < n; i++)
		pf_free(v[i].path);
	pf_free(v);
	return ret;
}

/* Pattern arg's matches, sorted, each as if named. */
static int add_glob(resolver *r, const char *pattern, size_t arg)
{
	pf_stat_result *st = NULL;
	pf_file_id *id = NULL;
	glob_t g;
	int gr = glob(pattern, 0, NULL, &g), ret = 0;

	if (gr == GLOB_NOMATCH)
		return fail(r, pattern, -ENOENT, "no file matches the pattern");
	if (gr != 0)
		/* glob's memory is libc's (globfree), not ours: the hook
		 * cannot fail it, but it can run out. */
		return fail(r, pattern, gr == GLOB_NOSPACE ? -ENOMEM : -EINVAL,
			    "cannot expand the pattern");
	ret = stat_all((const char *const *)g.gl_pathv, g.gl_pathc, &st, &id);
	for (size_t k = 0; ret == 0 && k < g.gl_pathc; k++) {
		const char *p = g.gl_pathv[k];

		/* Every match as if the shell had given it: a pattern over a
		 * convert directory names its manifest beside its shards. */
		ret = !st[k].error && S_ISDIR(st[k].mode) ? add_dir(r, p, arg, id[k].dev)
							 : add_named(r, p, arg, &st[k], &id[k]);
	}
	pf_free(st);
	pf_file_ids_free(id, g.gl_pathc);
	globfree(&g);
	return ret;
}

static const char *arg_of(const resolver *r, const found *f)
{
	return r->args[f->arg];
}

/* found entries ordered by identity, then by the order found. */
static int cmp_id(const void *a, const void *b, void *base)
{
	const found *v = base, *x = &v[*(const size_t *)a], *y = &v[*(const size_t *)b];
	int c = pf_file_id_cmp(&x->id, &y->id);

	if (c)
		return c;
	return x < y ? -1 : x > y;
}

/* l's positions ordered by identity (those with a known one), into
 * *order (pf_free()).  @return how many, or -ENOMEM. */
static ssize_t order_by_id(const found_list *l, size_t **order)
{
	size_t n = 0;

	*order = pf_calloc(l->n ? l->n : 1, sizeof(**order));
	if (!*order)
		return -ENOMEM;
	for (size_t i = 0; i < l->n; i++)
		if (!l->v[i].error)
			(*order)[n++] = i;
	qsort_r(*order, n, sizeof(**order), cmp_id, l->v);
	return (ssize_t)n;
}

/* "argument N", with the argument when it is not the path itself, and
 * the path when it is another spelling of `as`.  @return buf. */
static const char *sighting(const resolver *r, const found *f, const char *as, char *buf,
			    size_t cap)
{
	int n = snprintf(buf, cap, "argument %zu", f->arg + 1);

	if (n >= 0 && (size_t)n < cap && strcmp(arg_of(r, f), f->path))
		n += snprintf(buf + n, cap - (size_t)n, " (%s)", arg_of(r, f));
	if (n >= 0 && (size_t)n < cap && as && strcmp(as, f->path))
		snprintf(buf + n, cap - (size_t)n, " as %s, the same file", f->path);
	return buf;
}

static bool same_id(const found *a, const found *b)
{
	return pf_file_id_cmp(&a->id, &b->id) == 0;
}

/* Every file once: the first one reached twice is an error naming it
 * and both arguments that reached it. */
static int check_repeats(resolver *r)
{
	char a1[PF_PATH_MAX + 64], a2[2 * PF_PATH_MAX + 64];
	size_t *order, dup = SIZE_MAX, first = 0;
	ssize_t n = order_by_id(&r->files, &order);

	if (n < 0)
		return (int)n;
	for (ssize_t k = 1; k < n; k++) {
		const found *a = &r->files.v[order[k - 1]], *b = &r->files.v[order[k]];

		/* The earliest second sighting, in the order named. */
		if (same_id(a, b) && (dup == SIZE_MAX || order[k] < dup)) {
			dup = order[k];
			first = order[k - 1];
		}
	}
	pf_free(order);
	if (dup == SIZE_MAX)
		return 0;
	return fail(r, r->files.v[first].path, -EINVAL, "named twice, by %s and %s: an epoch "
		    "would read its records twice; name each shard once",
		    sighting(r, &r->files.v[first], NULL, a1, sizeof(a1)),
		    sighting(r, &r->files.v[dup], r->files.v[first].path, a2, sizeof(a2)));
}

/* The shards the named manifests list, as paths beside each manifest,
 * stat()ed: into *listed (found_list, .arg the manifest's position in
 * r->manifests). */
static int list_manifests(resolver *r, found_list *listed)
{
	int ret = 0;

	for (size_t m = 0; ret == 0 && m < r->manifests.n; m++) {
		const char *mpath = r->manifests.v[m].path;
		pf_manifest *mf = NULL;
		char **paths = NULL;
		pf_stat_result *st = NULL;
		pf_file_id *id = NULL;
		size_t ns = 0;

		ret = pf_manifest_load(&mf, mpath, NULL, r->err);
		if (ret == 0) {
			ns = pf_manifest_shards(mf);
			paths = pf_calloc(ns ? ns : 1, sizeof(*paths));
			ret = paths ? 0 : -ENOMEM;
		}
		for (size_t i = 0; ret == 0 && i < ns; i++) {
			const pf_manifest_shard *s = pf_manifest_get(mf, i);
			size_t len = pf_manifest_shard_path(mpath, s, NULL, 0);

			if (!(paths[i] = pf_malloc(len + 1)))
				ret = -ENOMEM;
			else
				pf_manifest_shard_path(mpath, s, paths[i], len + 1);
		}
		if (ret == 0)
			ret = stat_all((const char *const *)paths, ns, &st, &id);
		for (size_t i = 0; ret == 0 && i < ns; i++)
			ret = push(listed, paths[i], m, &st[i], &id[i]);
		pf_free(st);
		pf_file_ids_free(id, id ? ns : 0);
		pf_paths_free(paths, paths ? ns : 0);
		pf_manifest_free(mf);
	}
	return ret;
}

/* A manifest named beside shards is theirs: they must be exactly the
 * ones it lists, by identity (not by spelling). */
static int check_beside(resolver *r, found_list *listed)
{
	size_t *order = NULL;
	bool *named = pf_calloc(listed->n ? listed->n : 1, sizeof(*named));
	ssize_t n = named ? order_by_id(listed, &order) : -ENOMEM;
	int ret = n < 0 ? (int)n : 0;
	const char *hint = "name the manifest alone for the shards it lists, or the shards "
			   "without it, or run `shardtool manifest` again";

	for (size_t i = 0; ret == 0 && i < r->files.n; i++) {
		const found *f = &r->files.v[i];
		ssize_t lo = 0, hi = n;

		if (f->error) {
			ret = fail(r, f->path, f->error, "cannot stat: %s", pf_strerror(f->error));
			break;
		}
		while (lo < hi) {	/* the first listed entry not below f */
			ssize_t mid = (lo + hi) / 2;
			const found *x = &listed->v[order[mid]];

			if (pf_file_id_cmp(&x->id, &f->id) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < n && same_id(&listed->v[order[lo]], f)) {
			for (; lo < n && same_id(&listed->v[order[lo]], f); lo++)
				named[order[lo]] = true;
			continue;
		}
		ret = fail(r, f->path, -EINVAL, "named beside the manifest %s%s, which does not "
			   "list it: %s", r->manifests.v[0].path,
			   r->manifests.n > 1 ? " (and the others named)" : "", hint);
	}
	for (size_t i = 0; ret == 0 && i < listed->n; i++)
		if (!named[i])
			ret = fail(r, r->manifests.v[listed->v[i].arg].path, -EINVAL,
				   "lists the shard %s, which is not named beside it: %s",
				   listed->v[i].path, hint);
	pf_free(order);
	pf_free(named);
	return ret;
}

/* The named manifests: alone, they stand for the shards they list;
 * beside shards, they are checked against them. */
static int resolve_manifests(resolver *r)
{
	found_list listed = { 0 };
	int ret = list_manifests(r, &listed);

	if (ret == 0 && r->files.n) {
		ret = check_beside(r, &listed);
	} else if (ret == 0) {
		/* Its shards, as the loader opens them; one it lists that is
		 * gone is named by its open. */
		for (size_t i = 0; ret == 0 && i < listed.n; i++) {
			found *f = &listed.v[i];
			pf_stat_result st = { .error = f->error, .mode = S_IFREG };

			ret = push(&r->files, f->path, r->manifests.v[f->arg].arg, &st, &f->id);
		}
	}
	found_free(&listed);
	return ret;
}

static bool has_pattern(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

/* The named directories, each once. */
static int check_dirs(resolver *r, const pf_stat_result *st, const pf_file_id *id, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (st[i].error || !S_ISDIR(st[i].mode))
			continue;
		for (size_t k = 0; k < i; k++)
			if (!st[k].error && S_ISDIR(st[k].mode) &&
			    pf_file_id_cmp(&id[k], &id[i]) == 0)
				return fail(r, r->args[i], -EINVAL, "the directory is named twice, "
					    "by argument %zu (%s) and argument %zu (%s): an epoch "
					    "would read its records twice; name it once", k + 1,
					    r->args[k], i + 1, r->args[i]);
	}
	return 0;
}

int pf_paths_resolve(const char *const *args, size_t nargs, char ***out, char **manifest,
		     pf_error *err)
{
	resolver r = { .args = args, .err = err };
	pf_stat_result *st = NULL;
	pf_file_id *id = NULL;
	char **list = NULL;
	int ret;

	pf_error_clear(err);
	*out = NULL;
	if (manifest)
		*manifest = NULL;
	/* An empty name is an unset variable in a script: the current
	 * directory is not what was meant, nor is "no file". */
	for (size_t i = 0; i < nargs; i++)
		if (!args[i][0])
			return pf_error_set(err, -ENOENT, PF_OFFSET_NONE, 0,
					    "path %zu of %zu is empty (an unset variable?)",
					    i + 1, nargs);
	/* Which arguments are directories: all stat()ed at once (1,000
	 * shards named one by one on a far bucket: 16 round trips, not
	 * 1,000). */
	ret = stat_all(args, nargs, &st, &id);
	if (ret == 0)
		ret = check_dirs(&r, st, id, nargs);
	for (size_t i = 0; i < nargs && ret == 0; i++) {
		if (!st[i].error && S_ISDIR(st[i].mode))
			ret = add_dir(&r, args[i], i, id[i].dev);
		else if (st[i].error && has_pattern(args[i]))
			ret = add_glob(&r, args[i], i);
		else
			ret = add_named(&r, args[i], i, &st[i], &id[i]);
	}
	pf_free(st);
	pf_file_ids_free(id, nargs);
	if (ret == 0 && r.manifests.n)
		ret = resolve_manifests(&r);
	if (ret == 0)
		ret = check_repeats(&r);
	if (ret == 0 && manifest && r.manifests.n == 1 &&
	    !(*manifest = strdup(r.manifests.v[0].path)))
		ret = -ENOMEM;
	if (ret == 0 && r.files.n && !(list = pf_calloc(r.files.n, sizeof(*list))))
		ret = -ENOMEM;
	if (ret < 0) {
		if (ret == -ENOMEM && err && !err->code)
			pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory expanding paths");
		if (manifest) {
			free(*manifest);
			*manifest = NULL;
		}
		found_free(&r.files);
		found_free(&r.manifests);
		return ret;
	}
	for (size_t i = 0; i < r.files.n; i++) {
		list[i] = r.files.v[i].path;	/* handed over */
		pf_free(r.files.v[i].id.canon);
	}
	pf_free(r.files.v);
	found_free(&r.manifests);
	*out = list;
	return (int)r.files.n;
}

int pf_paths_expand(const char *const *args, size_t nargs, char ***out, pf_error *err)
{
	return pf_paths_resolve(args, nargs, out, NULL, err);
}

void pf_paths_free(char **list, size_t n)
{
	for (size_t i = 0; list && i < n; i++)
		pf_free(list[i]);
	pf_free(list);
}
