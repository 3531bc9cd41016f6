/* SPDX-License-Identifier: Apache-2.0 */
/* Dataset paths: files, directories and globs to a sorted list of files. */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc_internal.h"
#include "pf_io.h"
#include "podfeed.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int push(char ***list, size_t *n, size_t *cap, const char *s)
{
	if (pf_grow(list, cap, *n + 1, sizeof(**list)) < 0)
		return -ENOMEM;
	(*list)[*n] = pf_strdup(s);
	if (!(*list)[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* The dataset manifest describes the shards; it is not one. */
static bool is_manifest(const char *path)
{
	const char *base = strrchr(path, '/');

	return !strcmp(base ? base + 1 : path, PF_MANIFEST_NAME);
}

static int add_dir(const char *dir, char ***list, size_t *n, size_t *cap,
		   pf_error *err)
{
	size_t first = *n;
	struct dirent *e;
	DIR *d = opendir(dir);
	int ret = 0;

	if (!d) {
		ret = -errno;
		pf_error_set_file(err, dir);
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				    "cannot list directory: %s", pf_strerror(ret));
	}
	while ((e = readdir(d)) && ret == 0) {
		char path[4096];
		struct stat st;

		if (e->d_name[0] == '.' || is_manifest(e->d_name))
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
		    sizeof(path))
			continue;
		/* d_type spares a stat per entry (a request each on a
		 * network mount); stat only where the file system does not
		 * say, or for a link. */
		if (e->d_type == DT_REG ||
		    ((e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) && stat(path, &st) == 0 &&
		     S_ISREG(st.st_mode)))
			ret = push(list, n, cap, path);
	}
	closedir(d);
	/* *list is still NULL when nothing was added (an empty directory,
	 * or the first push out of memory), and qsort wants a pointer. */
	if (*n > first)
		qsort(*list + first, *n - first, sizeof(**list), cmp_str);
	return ret;
}

int pf_paths_expand(const char *const *args, size_t nargs, char ***out,
		    pf_error *err)
{
	char **list = NULL;
	size_t n = 0, cap = 0;
	pf_stat_result *st;
	int ret = 0;

	pf_error_clear(err);
	/* Which arguments are directories: all stat()ed at once (1,000
	 * shards named one by one on a far bucket: 16 round trips, not
	 * 1,000). */
	st = pf_calloc(nargs ? nargs : 1, sizeof(*st));
	if (!st || pf_stat_many(args, nargs, st) < 0) {
		pf_free(st);
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory expanding paths");
	}
	for (size_t i = 0; i < nargs && ret == 0; i++) {
		const char *a = args[i];

		if (!st[i].error && S_ISDIR(st[i].mode)) {
			ret = add_dir(a, &list, &n, &cap, err);
		} else if (strpbrk(a, "*?[")) {
			glob_t g;
			int gr = glob(a, 0, NULL, &g);

			if (gr == GLOB_NOMATCH) {
				pf_error_set_file(err, a);
				ret = pf_error_set(err, -ENOENT, PF_OFFSET_NONE, 0,
						   "no file matches the pattern");
				break;
			}
			if (gr != 0) {
				/* glob's memory is libc's (globfree), not ours:
				 * the hook cannot fail it, but it can run out. */
				pf_error_set_file(err, a);
				ret = pf_error_set(err, gr == GLOB_NOSPACE ? -ENOMEM : -EINVAL,
						   PF_OFFSET_NONE, 0,
						   "cannot expand the pattern");
				break;
			}
			for (size_t k = 0; k < g.gl_pathc && ret == 0; k++)
				if (!is_manifest(g.gl_pathv[k]))
					ret = push(&list, &n, &cap, g.gl_pathv[k]);
			globfree(&g);
		} else {
			ret = push(&list, &n, &cap, a);
		}
	}
	pf_free(st);
	if (ret < 0) {
		if (ret == -ENOMEM && err && !err->code)
			pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory");
		pf_paths_free(list, n);
		return ret;
	}
	*out = list;
	return (int)n;
}

void pf_paths_free(char **list, size_t n)
{
	for (size_t i = 0; list && i < n; i++)
		pf_free(list[i]);
	pf_free(list);
}
