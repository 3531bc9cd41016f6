/* SPDX-License-Identifier: Apache-2.0 */
/* Storage regions: the mount table parser (good files, every kind of
 * malformed line with its line number, limits), longest-prefix matching on
 * whole components, canonical paths (symlinks, relative paths), mountinfo
 * lines and FUSE detection from fixture text, region kinds, and the read
 * counters through the I/O engine, pf_source and the loader. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_internal.h"
#include "pf_io.h"
#include "podfeed.h"
#include "testutil.h"

static pf_region_table *lexical(const char *host)
{
	pf_region_table *t;
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_create(&t, host, PF_REGION_LEXICAL, &err), 0, "%s",
		     err.msg);
	return t;
}

static pf_mount_info mount_at(pf_region_table *t, size_t i)
{
	pf_mount_info mi;

	cr_assert_eq(pf_region_table_mount(t, i, &mi), 0);
	return mi;
}

static pf_region_info region_of(pf_region_table *t, size_t m)
{
	pf_region_info ri;

	cr_assert_eq(pf_region_table_region(t, mount_at(t, m).region_index, &ri), 0);
	return ri;
}

static const char *region_label(pf_region_table *t, const char *path)
{
	return region_of(t, pf_region_table_match(t, path)).label;
}

static int parse(pf_region_table *t, const char *text, pf_error *err)
{
	pf_error_clear(err);
	return pf_region_table_parse(t, text, strlen(text), "mounts.conf", err);
}

/* ------------------------------------------------------------------ */
/* The mount table file                                                 */

Test(region_table, parses_comments_blanks_escapes)
{
	static const char text[] =
		"# podfeed mount table\n"
		"\n"
		"   \t  \n"
		"/mnt/gcs/bucket-a   us-central1\n"
		"\t/data/eu\tEurope-West4   # the EU copy\n"
		"/srv/with\\040space us-east1\r\n"
		"/srv//x/./y/../z/ asia-east1 #\n"
		"# the end, no newline after the last line\n"
		"/last us-west1";
	pf_region_table *t = lexical("us-central1");
	pf_error err;
	pf_mount_info mi;

	cr_assert_eq(parse(t, text, &err), 5, "%s: %s", err.file, err.msg);
	cr_assert_eq(pf_region_table_mounts(t), 6);	/* and mount 0 */
	mi = mount_at(t, 0);
	cr_assert_str_eq(mi.path, "/");
	cr_assert_eq(mi.origin, PF_MOUNT_LOCAL);
	mi = mount_at(t, 1);
	cr_assert_str_eq(mi.path, "/mnt/gcs/bucket-a");
	cr_assert_str_eq(mi.region, "us-central1");
	cr_assert_eq(mi.origin, PF_MOUNT_FILE);
	cr_assert_str_eq(mi.origin_file, "mounts.conf");
	cr_assert_eq(mi.origin_line, 4);
	mi = mount_at(t, 2);
	cr_assert_str_eq(mi.path, "/data/eu");
	cr_assert_str_eq(mi.region, "europe-west4", "region names are lower-cased");
	cr_assert_eq(mi.origin_line, 5);
	cr_assert_str_eq(mount_at(t, 3).path, "/srv/with space");
	cr_assert_str_eq(mount_at(t, 4).path, "/srv/x/z", "paths are normalised");
	cr_assert_eq(mount_at(t, 4).origin_line, 7);
	cr_assert_str_eq(mount_at(t, 5).path, "/last");
	cr_assert_eq(mount_at(t, 5).origin_line, 9);
	pf_region_table_free(t);
}

Test(region_table, empty_and_comment_only_text_add_nothing)
{
	pf_region_table *t = lexical(NULL);
	pf_error err;

	cr_assert_eq(parse(t, "", &err), 0);
	cr_assert_eq(parse(t, "\n\n# nothing\n   # indented\n", &err), 0);
	cr_assert_eq(pf_region_table_mounts(t), 1);
	pf_region_table_free(t);
}

/* Every malformed line is refused with "mounts.conf:LINE" and a reason. */
Test(region_table, malformed_lines_name_file_and_line)
{
	static const struct {
		const char *text;
		unsigned line;
		const char *says;
	} cases[] = {
		{ "/data\n", 1, "no region" },
		{ "# ok\n/a us-east1\n\n/data   # region missing\n", 4, "no region" },
		{ "/data us-east1 extra\n", 1, "third field" },
		{ "data us-east1\n", 1, "not absolute" },
		{ "./data us-east1\n", 1, "not absolute" },
		{ "/data us_east1!\n", 1, "0x21" },
		{ "/data us/east1\n", 1, "0x2f" },
		{ "/a b\n/data 1234567890123456789012345678901234567890123456789012345678901234\n",
		  2, "at most 63" },
		{ "/a\\04 us-east1\n", 1, "bad escape" },
		{ "/a\\x20b us-east1\n", 1, "bad escape" },
		{ "/a\\000b us-east1\n", 1, "bad escape" },
		{ "/a\\777 us-east1\n", 1, "bad escape" },
		{ "/ok us-east1\n/bad\\", 2, "no region" },
		{ "/ok us-east1\n/data us-east1\n/data europe-west4\n", 3,
		  "declared in region europe-west4 here and in us-east1 at mounts.conf:2" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pf_region_table *t = lexical("us-east1");
		char want[64], line[600];
		pf_error err;
		int ret = parse(t, cases[i].text, &err);

		pf_error_format(&err, line, sizeof(line));
		cr_assert_eq(ret, -EINVAL, "case %zu: %d (%s)", i, ret, line);
		snprintf(want, sizeof(want), "mounts.conf:%u", cases[i].line);
		cr_assert_str_eq(err.file, want, "case %zu: %s", i, line);
		cr_assert(strstr(err.msg, cases[i].says), "case %zu: '%s' does not say '%s'",
			  i, err.msg, cases[i].says);
		cr_assert(!strncmp(line, want, strlen(want)), "case %zu: %s", i, line);
		pf_region_table_free(t);
	}
}

Test(region_table, a_nul_byte_is_malformed)
{
	static const char text[] = "/a us-east1\n/b us\0east1\n";
	pf_region_table *t = lexical(NULL);
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_parse(t, text, sizeof(text) - 1, "m", &err), -EINVAL);
	cr_assert_str_eq(err.file, "m:2");
	cr_assert(strstr(err.msg, "NUL"));
	pf_region_table_free(t);
}

Test(region_table, same_path_same_region_twice_is_one_mount)
{
	pf_region_table *t = lexical(NULL);
	pf_error err;

	cr_assert_eq(parse(t, "/data us-east1\n/data/ US-EAST1\n", &err), 2);
	cr_assert_eq(pf_region_table_mounts(t), 2);
	pf_region_table_free(t);
}

/* Limits are checked before anything is allocated for the input. */
Test(region_table, limits)
{
	pf_region_table *t = lexical(NULL);
	size_t big = PF_REGION_MAX_FILE + 1, n = 0;
	char *text = malloc(big + 1);
	pf_error err;

	cr_assert_not_null(text);
	/* A line one byte too long, on line 3. */
	n = (size_t)sprintf(text, "# a\n/ok us-east1\n/");
	memset(text + n, 'x', PF_REGION_MAX_LINE - 9);	/* 1 + 4087 + 9 = 4097 */
	n += PF_REGION_MAX_LINE - 9;
	n += (size_t)sprintf(text + n, " us-east1\n");
	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_parse(t, text, n, "m", &err), -EINVAL);
	cr_assert_str_eq(err.file, "m:3");
	cr_assert(strstr(err.msg, "at most 4096"), "%s", err.msg);

	/* Text over the file limit: refused whole. */
	memset(text, '\n', big);
	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_parse(t, text, big, "m", &err), -EFBIG);
	cr_assert(strstr(err.msg, "at most"), "%s", err.msg);

	/* One mount more than the table holds, named by its line. */
	pf_region_table_free(t);
	t = lexical(NULL);
	n = 0;
	for (unsigned i = 0; i <= PF_REGION_MAX_MOUNTS; i++)
		n += (size_t)sprintf(text + n, "/m%u r%u\n", i, i % 7);
	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_parse(t, text, n, "m", &err), -E2BIG);
	cr_assert_str_eq(err.file, "m:1025");
	cr_assert_eq(pf_region_table_mounts(t), PF_REGION_MAX_MOUNTS + 1);
	free(text);
	pf_region_table_free(t);
}

Test(region_table, load_names_the_file)
{
	const char *dir = tu_tmpdir();
	char path[256];
	pf_region_table *t = lexical(NULL);
	pf_error err;
	char line[600];

	snprintf(path, sizeof(path), "%s/mounts.conf", dir);
	tu_write_file(path, "/a us-east1\n\n/b\n", 16);
	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_load(t, path, &err), -EINVAL);
	pf_error_format(&err, line, sizeof(line));
	cr_assert(strstr(line, "mounts.conf:3: "), "%s", line);
	cr_assert(strstr(line, "'/b' has no region"), "%s", line);

	snprintf(path, sizeof(path), "%s/missing.conf", dir);
	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_load(t, path, &err), -ENOENT);
	pf_error_format(&err, line, sizeof(line));
	cr_assert(strstr(line, "missing.conf"), "%s", line);

	/* Too large: refused from its size. */
	snprintf(path, sizeof(path), "%s/huge.conf", dir);
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)PF_REGION_MAX_FILE + 1), 0);
	close(fd);
	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_load(t, path, &err), -EFBIG);
	pf_region_table_free(t);
}

Test(region_table, mount_flags)
{
	pf_region_table *t = lexical("us-east1");
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_add_flag(t, "/mnt/far=europe-west4", &err), 1);
	cr_assert_eq(pf_region_table_add_flag(t, "/odd=name=asia-east1", &err), 2);
	cr_assert_str_eq(mount_at(t, 2).path, "/odd=name", "split at the last '='");
	cr_assert_eq(mount_at(t, 2).origin, PF_MOUNT_FLAG);
	pf_region_table_free(t);

	t = lexical(NULL);
	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_add_flag(t, "/mnt/far", &err), -EINVAL);
	cr_assert(strstr(err.msg, "not PATH=REGION"), "%s", err.msg);
	cr_assert_eq(pf_region_table_add_flag(t, "=europe-west4", &err), -EINVAL);
	cr_assert(strstr(err.msg, "no path"), "%s", err.msg);
	cr_assert_eq(pf_region_table_add_flag(t, "/mnt/far=", &err), -EINVAL);
	cr_assert(strstr(err.msg, "no region"), "%s", err.msg);
	cr_assert_eq(pf_region_table_add_flag(t, "/mnt/far=eu west", &err), -EINVAL);
	cr_assert_eq(pf_region_table_mounts(t), 1);
	pf_region_table_free(t);
}

/* ------------------------------------------------------------------ */
/* Matching                                                             */

Test(region_match, longest_prefix_on_whole_components)
{
	pf_region_table *t = lexical("us-east1");
	pf_error err;

	cr_assert_eq(parse(t, "/data us-east1\n/data/eu europe-west4\n/mnt/gcs asia-east1\n",
			   &err), 3);
	cr_assert_eq(pf_region_table_match(t, "/data/x.tfrecord"), 1);
	cr_assert_eq(pf_region_table_match(t, "/data"), 1);
	cr_assert_eq(pf_region_table_match(t, "/data2/x"), 0, "/data2 is not under /data");
	cr_assert_eq(pf_region_table_match(t, "/dat"), 0);
	cr_assert_eq(pf_region_table_match(t, "/data/eu/a/b"), 2);
	cr_assert_eq(pf_region_table_match(t, "/data/eu"), 2);
	cr_assert_eq(pf_region_table_match(t, "/data/europe/a"), 1);
	cr_assert_eq(pf_region_table_match(t, "/mnt/gcs/shard-0"), 3);
	cr_assert_eq(pf_region_table_match(t, "/mnt/gcs2"), 0);
	cr_assert_eq(pf_region_table_match(t, "/"), 0);
	cr_assert_str_eq(region_label(t, "/data/europe/a"), "us-east1");
	cr_assert_str_eq(region_label(t, "/data/eu/a"), "europe-west4");
	cr_assert_str_eq(region_label(t, "/elsewhere"), "us-east1");
	pf_region_table_free(t);
}

Test(region_match, a_root_mount_covers_everything_not_longer)
{
	pf_region_table *t = lexical("us-east1");
	pf_error err;

	cr_assert_eq(parse(t, "/ europe-west4\n/home us-east1\n", &err), 2);
	cr_assert_eq(pf_region_table_match(t, "/anything/at/all"), 1);
	cr_assert_eq(pf_region_table_match(t, "/home/u/x"), 2);
	pf_region_table_free(t);
}

Test(region_match, table_freezes_at_first_use)
{
	pf_region_table *t = lexical(NULL);
	pf_error err;

	cr_assert_eq(parse(t, "/a us-east1\n", &err), 1);
	cr_assert_eq(pf_region_table_match(t, "/a/b"), 1);
	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_add(t, "/b", "us-east1", &err), -EBUSY);
	cr_assert_eq(parse(t, "/c us-east1\n", &err), -EBUSY);
	cr_assert_eq(pf_region_table_scan_mountinfo(t, "", 0, NULL, &err), -EBUSY);
	pf_region_table_free(t);

	/* A table of mount 0 only answers 0 without resolving the path
	 * (a loader looks up every shard), and is frozen all the same. */
	t = lexical(NULL);
	cr_assert_eq(pf_region_table_lookup(t, "/no/such/dir/../x"), 0);
	cr_assert_eq(pf_region_table_lookup(t, "relative/x"), 0);
	cr_assert_eq(pf_region_table_add(t, "/b", "us-east1", &err), -EBUSY);
	pf_region_table_free(t);
}

/* realpath: a mount declared through a symlink matches files named by
 * their real path, through the symlink, or relative to the working
 * directory; and the other way round. */
Test(region_match, canonical_paths)
{
	const char *dir = tu_tmpdir();
	char real[256], link[256], file[300], viaLink[300], other[256];
	pf_region_table *t;
	pf_error err;

	snprintf(real, sizeof(real), "%s/real", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(other, sizeof(other), "%s/real2", dir);
	cr_assert_eq(mkdir(real, 0755), 0);
	cr_assert_eq(mkdir(other, 0755), 0);
	cr_assert_eq(symlink(real, link), 0);
	snprintf(file, sizeof(file), "%s/shard", real);
	snprintf(viaLink, sizeof(viaLink), "%s/shard", link);
	tu_write_file(file, "x", 1);

	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_create(&t, "us-east1", 0, &err), 0);
	cr_assert_eq(pf_region_table_add(t, link, "europe-west4", &err), 1, "%s", err.msg);
	cr_assert_str_eq(mount_at(t, 1).path, real, "stored as its real path");
	cr_assert_eq(pf_region_table_lookup(t, file), 1);
	cr_assert_eq(pf_region_table_lookup(t, viaLink), 1);
	cr_assert_eq(chdir(dir), 0);
	cr_assert_eq(pf_region_table_lookup(t, "link/shard"), 1);
	cr_assert_eq(pf_region_table_lookup(t, "./real/../real/shard"), 1);
	cr_assert_eq(pf_region_table_lookup(t, "real/not-there-yet"), 1);
	cr_assert_eq(pf_region_table_lookup(t, "real2/shard"), 0, "a sibling with a longer name");
	cr_assert_eq(pf_region_table_lookup(t, "/nonexistent/dir/x"), 0);
	/* A file that is itself a symlink counts where it is named (its
	 * directory is resolved, its name is not: a round trip per shard
	 * on a far bucket). */
	cr_assert_eq(symlink(file, "real2/to-shard"), 0);
	cr_assert_eq(pf_region_table_lookup(t, "real2/to-shard"), 0);
	/* The directory resolved last is cached by its absolute name: the
	 * same relative name from another directory is another directory. */
	cr_assert_eq(chdir("real"), 0);
	cr_assert_eq(pf_region_table_lookup(t, "shard"), 1);
	cr_assert_eq(chdir(".."), 0);
	cr_assert_eq(pf_region_table_lookup(t, "shard"), 0, "no ./shard here: not in real/");
	pf_region_table_free(t);

	/* Declared by its real path, relative; a file named through the link. */
	cr_assert_eq(pf_region_table_create(&t, "us-east1", 0, &err), 0);
	cr_assert_eq(pf_region_table_add(t, "real/", "europe-west4", &err), 1, "%s", err.msg);
	cr_assert_eq(pf_region_table_lookup(t, viaLink), 1);
	pf_region_table_free(t);
}

/* ------------------------------------------------------------------ */
/* Host region and region kinds                                         */

Test(region_host, flag_then_environment)
{
	const char *src;

	unsetenv("PODFEED_REGION");
	cr_assert_null(pf_region_host(NULL, &src));
	cr_assert_null(src);
	cr_assert_null(pf_region_host("", &src));
	setenv("PODFEED_REGION", "europe-west4", 1);
	cr_assert_str_eq(pf_region_host(NULL, &src), "europe-west4");
	cr_assert_str_eq(src, "PODFEED_REGION");
	cr_assert_str_eq(pf_region_host("us-east1", &src), "us-east1");
	cr_assert_str_eq(src, "--region");
	setenv("PODFEED_REGION", "", 1);
	cr_assert_null(pf_region_host(NULL, NULL));
}

Test(region_host, bad_names_are_refused)
{
	pf_region_table *t = NULL;
	pf_error err;

	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_create(&t, "us central1", 0, &err), -EINVAL);
	cr_assert_null(t);
	cr_assert(strstr(err.msg, "0x20"), "%s", err.msg);
	cr_assert_eq(pf_region_name_check("", &err), -EINVAL);
	cr_assert_eq(pf_region_name_check("a.b_c-D9", &err), 0);
	cr_assert_eq(pf_region_table_create(&t, "US-East1", 0, &err), 0);
	cr_assert_str_eq(pf_region_table_host(t), "us-east1");
	pf_region_table_free(t);
}

Test(region_kinds, in_cross_unknown)
{
	pf_region_table *t = lexical("us-east1");
	pf_region_info ri;
	pf_error err;

	cr_assert_eq(parse(t, "/near us-east1\n/far europe-west4\n/far2 europe-west4\n", &err), 3);
	cr_assert_eq(pf_region_table_regions(t), 2);
	ri = region_of(t, pf_region_table_match(t, "/near/x"));
	cr_assert_eq(ri.kind, PF_REGION_IN);
	cr_assert_eq(mount_at(t, 1).region_index, 0, "the host's region is region 0");
	ri = region_of(t, pf_region_table_match(t, "/far2/x"));
	cr_assert_eq(ri.kind, PF_REGION_CROSS);
	cr_assert_str_eq(ri.name, "europe-west4");
	cr_assert_eq(mount_at(t, 2).region_index, mount_at(t, 3).region_index);
	pf_region_table_free(t);

	/* No host region: nothing can be called cross-region. */
	t = lexical(NULL);
	cr_assert_eq(parse(t, "/far europe-west4\n", &err), 1);
	cr_assert_eq(pf_region_table_region(t, 0, &ri), 0);
	cr_assert_null(ri.name);
	cr_assert_str_eq(ri.label, "local");
	cr_assert_eq(ri.kind, PF_REGION_IN);
	ri = region_of(t, 1);
	cr_assert_eq(ri.kind, PF_REGION_UNKNOWN);
	cr_assert_eq(pf_region_table_region(t, 2, &ri), -ERANGE);
	pf_region_table_free(t);
}

/* ------------------------------------------------------------------ */
/* mountinfo                                                            */

static int mi_parse(const char *line, pf_mountinfo_entry *e, char *buf, size_t cap,
		    pf_error *err)
{
	pf_error_clear(err);
	return pf_mountinfo_parse_line(line, strlen(line), e, buf, cap, err);
}

Test(mountinfo, fields_optional_fields_and_escapes)
{
	char buf[1024];
	pf_mountinfo_entry e;
	pf_error err;

	cr_assert_eq(mi_parse("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root "
			      "rw,errors=continue", &e, buf, sizeof(buf), &err), 0, "%s", err.msg);
	cr_assert_eq(e.mount_id, 36);
	cr_assert_eq(e.parent_id, 35);
	cr_assert_eq(e.major, 98);
	cr_assert_eq(e.minor, 0);
	cr_assert_str_eq(e.root, "/mnt1");
	cr_assert_str_eq(e.mount_point, "/mnt2");
	cr_assert_str_eq(e.options, "rw,noatime");
	cr_assert_eq(e.optional_fields, 1);
	cr_assert_str_eq(e.fstype, "ext3");
	cr_assert_str_eq(e.source, "/dev/root");
	cr_assert_str_eq(e.super_options, "rw,errors=continue");

	/* No optional fields; several; escapes in the mount point, fstype
	 * and source. */
	cr_assert_eq(mi_parse("42 27 0:39 / /tmp/rtest/m\\040m ro,nosuid - fuse.regionfs "
			      "regionfs:/tmp/a\\040b ro,user_id=0", &e, buf, sizeof(buf), &err), 0);
	cr_assert_eq(e.optional_fields, 0);
	cr_assert_str_eq(e.mount_point, "/tmp/rtest/m m");
	cr_assert_str_eq(e.fstype, "fuse.regionfs");
	cr_assert_str_eq(e.source, "regionfs:/tmp/a b");
	cr_assert_eq(mi_parse("1 2 3:4 / /a\\011b\\012c\\134d rw shared:5 master:2 propagate_from:1 "
			      "unbindable - fuse.gcsfuse my-bucket rw", &e, buf, sizeof(buf), &err), 0);
	cr_assert_eq(e.optional_fields, 4);
	cr_assert_str_eq(e.mount_point, "/a\tb\nc\\d");
	cr_assert_str_eq(e.source, "my-bucket");
	/* A backslash that is not an escape is kept; super options may be
	 * missing; tabs and runs of blanks separate too. */
	cr_assert_eq(mi_parse("1 2 3:4 / /a\\b\\12  rw\t-  tmpfs tmpfs", &e, buf, sizeof(buf),
			      &err), 0);
	cr_assert_str_eq(e.mount_point, "/a\\b\\12");
	cr_assert_str_eq(e.super_options, "");
	/* A "-" among the optional fields' place is the separator only as
	 * a whole field. */
	cr_assert_eq(mi_parse("1 2 3:4 / /x rw a-b - ext4 /dev/x rw", &e, buf, sizeof(buf), &err), 0);
	cr_assert_eq(e.optional_fields, 1);
	cr_assert_str_eq(e.fstype, "ext4");
}

Test(mountinfo, malformed_lines)
{
	static const struct {
		const char *line;
		const char *says;
	} cases[] = {
		{ "", "empty" },
		{ "   ", "empty" },
		{ "36 35 98:0 /mnt1 /mnt2", "no mount options" },
		{ "36", "no parent ID" },
		{ "x 35 98:0 / /m rw - ext4 /dev/x rw", "bad mount ID" },
		{ "36 -1 98:0 / /m rw - ext4 /dev/x rw", "bad parent ID" },
		{ "36 35 98 / /m rw - ext4 /dev/x rw", "bad major:minor" },
		{ "36 35 98:x / /m rw - ext4 /dev/x rw", "bad major:minor" },
		{ "99999999999 35 98:0 / /m rw - ext4 /dev/x rw", "bad mount ID" },
		{ "36 35 98:0 / /m rw shared:1 ext4 /dev/x rw", "separator" },
		{ "36 35 98:0 / /m rw -", "no file system type" },
		{ "36 35 98:0 / /m rw - ext4", "no mount source" },
		{ "36 35 98:0 / /a\\000b rw - ext4 /dev/x rw", "\\000" },
		{ "36 35 98:0 / /a\\400 rw - ext4 /dev/x rw", "\\000" },
	};
	char buf[256];
	pf_mountinfo_entry e;
	pf_error err;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ret = mi_parse(cases[i].line, &e, buf, sizeof(buf), &err);

		cr_assert_eq(ret, -EBADMSG, "case %zu: %d", i, ret);
		cr_assert(strstr(err.msg, cases[i].says), "case %zu: '%s' does not say '%s'", i,
			  err.msg, cases[i].says);
	}
	/* A NUL inside the line. */
	static const char nul[] = "1 2 3:4 / /a\0b rw - ext4 /dev/x rw";
	pf_error_clear(&err);
	cr_assert_eq(pf_mountinfo_parse_line(nul, sizeof(nul) - 1, &e, buf, sizeof(buf), &err),
		     -EBADMSG);
	/* Too small a buffer is not "malformed". */
	cr_assert_eq(mi_parse("36 35 98:0 / /mnt rw - ext4 /dev/x rw", &e, buf, 8, &err), -ENOBUFS);
}

static const char fixture[] =
	"22 27 0:21 / /proc rw,relatime - proc proc rw\n"
	"27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
	"30 27 0:30 / /data rw shared:7 - xfs /dev/sdb1 rw\n"
	"40 27 0:40 / /mnt/gcs rw,nosuid,nodev - fuse.gcsfuse my-bucket rw,user_id=0\n"
	"41 27 0:41 / /tmp/far\\040region ro - fuse.regionfs regionfs:/srv/b ro\n"
	"this line is not mountinfo at all\n"
	"43 27 8:17 / /mnt/ntfs rw - fuseblk /dev/sdc1 rw\n"
	"44 22 0:44 / /sys/fs/fuse/connections rw - fusectl fusectl rw\n"
	"45 30 0:45 / /data/plainfuse rw - fuse sshfs#host: rw\n"
	"\n"
	"46 27 0:46 / /srv/over rw - fuse.sshfs a rw\n"
	"47 27 0:47 / /srv/over rw - tmpfs tmpfs rw";

Test(mountinfo, fuse_mounts_become_mounts_of_the_table)
{
	pf_region_table *t = lexical("us-east1");
	unsigned skipped = 99;
	pf_error err;
	pf_mount_info mi;
	pf_region_info ri;
	size_t m;

	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_add(t, "/data", "us-east1", &err), 1);
	cr_assert_eq(pf_region_table_add(t, "/mnt/gcs/eu", "europe-west4", &err), 2);
	cr_assert_eq(pf_region_table_scan_mountinfo(t, fixture, strlen(fixture), &skipped, &err),
		     4, "fuse.gcsfuse, fuse.regionfs, fuse, fuse.sshfs (then over-mounted)");
	cr_assert_eq(skipped, 1);

	mi = mount_at(t, 1);
	cr_assert_str_eq(mi.fstype, "xfs", "a declared path shows the file system it is on");
	cr_assert_not(mi.fuse);

	m = pf_region_table_match(t, "/mnt/gcs/shard-0");
	mi = mount_at(t, m);
	cr_assert_str_eq(mi.path, "/mnt/gcs");
	cr_assert_eq(mi.origin, PF_MOUNT_DETECTED);
	cr_assert_str_eq(mi.fstype, "fuse.gcsfuse");
	cr_assert_str_eq(mi.source, "my-bucket");
	cr_assert(mi.fuse);
	cr_assert_null(mi.region);
	ri = region_of(t, m);
	cr_assert(ri.undeclared);
	cr_assert_str_eq(ri.label, "undeclared");
	cr_assert_eq(ri.kind, PF_REGION_UNKNOWN);

	/* Declared under a FUSE mount: on that file system, in its region. */
	m = pf_region_table_match(t, "/mnt/gcs/eu/shard-0");
	cr_assert_eq(m, 2);
	cr_assert_str_eq(mount_at(t, 2).fstype, "fuse.gcsfuse");
	cr_assert(mount_at(t, 2).fuse);
	cr_assert_str_eq(region_of(t, 2).label, "europe-west4");

	m = pf_region_table_match(t, "/tmp/far region/x");
	cr_assert_str_eq(mount_at(t, m).path, "/tmp/far region");
	cr_assert_str_eq(mount_at(t, m).fstype, "fuse.regionfs");

	/* A detected mount inside a declared path takes its region. */
	m = pf_region_table_match(t, "/data/plainfuse/x");
	cr_assert_str_eq(mount_at(t, m).fstype, "fuse");
	cr_assert_eq(mount_at(t, m).origin, PF_MOUNT_DETECTED);
	cr_assert_str_eq(region_of(t, m).label, "us-east1");
	cr_assert_eq(region_of(t, m).kind, PF_REGION_IN);

	/* fuseblk is a local disk, fusectl the control file system. */
	cr_assert_eq(pf_region_table_match(t, "/mnt/ntfs/x"), 0);
	cr_assert_eq(pf_region_table_match(t, "/sys/fs/fuse/connections/1"), 0);
	/* The last mount of a path is the one on top. */
	m = pf_region_table_match(t, "/srv/over/x");
	cr_assert_str_eq(mount_at(t, m).fstype, "tmpfs");
	cr_assert_not(mount_at(t, m).fuse);
	cr_assert_str_eq(mount_at(t, 0).fstype, "ext4", "mount 0 is on /");
	pf_region_table_free(t);
}

/* A FUSE mount also declared is one mount, whichever comes first. */
Test(mountinfo, declared_and_detected_merge_in_either_order)
{
	for (int order = 0; order < 2; order++) {
		pf_region_table *t = lexical("us-east1");
		pf_error err;
		size_t m;

		pf_error_clear(&err);
		if (order)
			cr_assert_eq(pf_region_table_scan_mountinfo(t, fixture, strlen(fixture),
								    NULL, &err), 4);
		cr_assert_geq(pf_region_table_add(t, "/mnt/gcs", "europe-west4", &err), 1);
		if (!order)
			cr_assert_eq(pf_region_table_scan_mountinfo(t, fixture, strlen(fixture),
								    NULL, &err), 4);
		cr_assert_eq(pf_region_table_mounts(t), 5);
		m = pf_region_table_match(t, "/mnt/gcs/x");
		cr_assert_eq(mount_at(t, m).origin, PF_MOUNT_FLAG);
		cr_assert_str_eq(mount_at(t, m).region, "europe-west4");
		cr_assert_str_eq(mount_at(t, m).fstype, "fuse.gcsfuse");
		cr_assert_eq(region_of(t, m).kind, PF_REGION_CROSS);
		pf_region_table_free(t);
	}
}

/* A chroot's mountinfo: the mounts made inside it (/proc, /dev, a FUSE
 * mount), none at /.  Its files lie on a file system nobody named: the
 * file system is unknown, which is not an error and not a skipped line. */
static const char chroot_mountinfo[] =
	"512 511 0:21 / /proc rw,relatime - proc proc rw\n"
	"513 511 0:5 / /dev rw,nosuid - devtmpfs udev rw\n"
	"514 511 0:50 / /data/far rw - fuse.regionfs regionfs:/srv/b rw\n";

Test(mountinfo, no_root_entry_is_an_unknown_file_system)
{
	pf_region_table *t = lexical("us-east1");
	unsigned skipped = 99;
	pf_error err;
	pf_mount_info mi;
	size_t m;

	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_add(t, "/data", "us-east1", &err), 1);
	cr_assert_eq(pf_region_table_scan_mountinfo(t, chroot_mountinfo,
						    strlen(chroot_mountinfo), &skipped, &err),
		     1, "the FUSE mount is found: %s", err.msg);
	cr_assert_eq(err.code, 0);
	cr_assert_eq(skipped, 0);

	mi = mount_at(t, 0);
	cr_assert_str_eq(mi.path, "/");
	cr_assert_null(mi.fstype, "no mount at /: its file system is unknown");
	cr_assert_eq(region_of(t, 0).kind, PF_REGION_IN, "local files are still this host's");
	cr_assert_eq(pf_region_table_match(t, "/etc/x"), 0);
	mi = mount_at(t, 1);
	cr_assert_str_eq(mi.path, "/data");
	cr_assert_null(mi.fstype, "/data lies on the unknown root too");
	cr_assert_str_eq(region_of(t, 1).label, "us-east1");

	m = pf_region_table_match(t, "/data/far/x");
	mi = mount_at(t, m);
	cr_assert_str_eq(mi.path, "/data/far");
	cr_assert_str_eq(mi.fstype, "fuse.regionfs");
	cr_assert_str_eq(region_of(t, m).label, "us-east1", "under the declared /data");
	pf_region_table_free(t);
}

/* Whether this machine's mountinfo has a mount at /, read without the
 * code under test: field 5 of a line is its mount point. */
static bool mountinfo_has_root(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[8192], point[4096];
	bool root = false;

	cr_assert_not_null(f, "/proc/self/mountinfo");
	while (!root && fgets(line, sizeof(line), f))
		root = sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1 &&
		       !strcmp(point, "/");
	fclose(f);
	return root;
}

/* The real file: whatever is mounted here, it parses with nothing skipped,
 * and / has a file system exactly when mountinfo has a mount at / (not
 * in a chroot whose root is no mount point). */
Test(mountinfo, this_machine)
{
	pf_region_table *t;
	unsigned skipped = 99;
	pf_error err;
	const char *fstype;

	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_create(&t, NULL, 0, &err), 0);
	cr_assert_geq(pf_region_table_scan_mounts(t, &skipped, &err), 0, "%s", err.msg);
	cr_assert_eq(skipped, 0);
	fstype = mount_at(t, 0).fstype;
	if (mountinfo_has_root())
		cr_assert_not_null(fstype, "/ is in mountinfo, so its file system is known");
	else
		cr_assert_null(fstype, "/ is not in mountinfo: its file system is unknown");
	pf_region_table_free(t);
}

/* ------------------------------------------------------------------ */
/* Counting reads                                                       */

Test(region_stats, begin_end_and_reset)
{
	pf_region_table *t = lexical("us-east1");
	pf_region_stats st;
	pf_error err;

	cr_assert_eq(parse(t, "/a europe-west4\n/b europe-west4\n", &err), 2);
	pf_region_read_begin(t, 1);
	pf_region_read_begin(t, 2);
	pf_region_read_end(t, 1, 4096, 3000);
	pf_region_table_region_stats(t, 1, &st);
	cr_assert_eq(st.io.ops, 1);
	pf_region_read_end(t, 2, -EIO, 5000000);
	pf_region_read_begin(t, 2);
	pf_region_read_end(t, 2, 100, 1000);
	pf_region_read_end(t, 99, 100, 1000);	/* unknown mounts are ignored */

	pf_region_table_mount_stats(t, 1, &st);
	cr_assert_eq(st.io.bytes, 4096);
	cr_assert_eq(st.io.ops, 1);
	cr_assert_eq(st.io.hist[pf_io_hist_bucket(3000)], 1);
	pf_region_table_mount_stats(t, 2, &st);
	cr_assert_eq(st.io.bytes, 100);
	cr_assert_eq(st.io.ops, 2);
	cr_assert_eq(st.io.errors, 1);
	pf_region_table_region_stats(t, 1, &st);
	cr_assert_eq(st.io.bytes, 4196);
	cr_assert_eq(st.io.ops, 3);
	cr_assert_eq(st.io.errors, 1);
	cr_assert_eq(st.io.busy_ns, 3000 + 5000000 + 1000);
	cr_assert_eq(pf_io_stats_quantile_us(&st.io, 1.0), 8192, "5 ms is in [4096, 8192) us");
	pf_region_table_region_stats(t, 0, &st);
	cr_assert_eq(st.io.ops, 0);

	pf_region_table_reset_stats(t);
	pf_region_table_region_stats(t, 1, &st);
	cr_assert_eq(st.io.ops, 0);
	cr_assert_eq(st.io.bytes, 0);
	cr_assert_eq(st.active_ns, 0);
	pf_region_table_free(t);
}

/* Files of known sizes in two directories of two regions, read whole
 * through the I/O engine: each region counts exactly its bytes. */
Test(region_stats, engine_reads_are_attributed)
{
	enum { CHUNK = 64 * 1024 };
	const char *dir = tu_tmpdir();
	static const size_t sizes[4] = { 100000, 3 * CHUNK, 1, 70000 };
	char a[256], b[256], path[300];
	uint8_t *buf = malloc(CHUNK), *data = calloc(1, 3 * CHUNK);
	pf_io_config cfg = { .queue_depth = 4 };
	pf_region_table *t;
	pf_region_stats st;
	pf_io_req req;
	pf_io_req *done[4];
	pf_error err;
	pf_io *io;

	snprintf(a, sizeof(a), "%s/near", dir);
	snprintf(b, sizeof(b), "%s/far", dir);
	cr_assert_eq(mkdir(a, 0755), 0);
	cr_assert_eq(mkdir(b, 0755), 0);
	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_create(&t, "us-east1", 0, &err), 0);
	cr_assert_eq(pf_region_table_add(t, a, "us-east1", &err), 1);
	cr_assert_eq(pf_region_table_add(t, b, "europe-west4", &err), 2);
	cfg.regions = t;
	cr_assert_eq(pf_io_create(&io, &cfg, &err), 0, "%s", err.msg);
	for (int i = 0; i < 4; i++) {
		int f;

		snprintf(path, sizeof(path), "%s/f%d", i % 2 ? b : a, i);
		tu_write_file(path, data, sizes[i]);
		f = pf_io_add_file(io, path, 0, &err);
		cr_assert_geq(f, 0, "%s", err.msg);
		for (uint64_t off = 0; off < sizes[i]; off += CHUNK) {
			req = (pf_io_req){ .file = (uint32_t)f, .offset = off, .len = CHUNK,
					   .buf = buf, .buf_index = -1 };
			cr_assert_eq(pf_io_submit(io, &req), 0);
			cr_assert_eq(pf_io_reap(io, done, 4, 1), 1);
		}
	}
	/* A read of a file index the engine does not know: not counted. */
	req = (pf_io_req){ .file = 77, .len = CHUNK, .buf = buf, .buf_index = -1 };
	cr_assert_eq(pf_io_submit(io, &req), 0);
	cr_assert_eq(pf_io_reap(io, done, 4, 1), 1);
	pf_io_free(io);

	pf_region_table_region_stats(t, 0, &st);
	cr_assert_eq(st.io.bytes, sizes[0] + sizes[2]);
	cr_assert_eq(st.io.ops, 2 + 1);
	cr_assert_gt(st.active_ns, 0);
	pf_region_table_region_stats(t, 1, &st);
	cr_assert_eq(st.io.bytes, sizes[1] + sizes[3]);
	cr_assert_eq(st.io.ops, 3 + 2);
	cr_assert_eq(st.io.errors, 0);
	pf_region_table_mount_stats(t, 2, &st);
	cr_assert_eq(st.io.bytes, sizes[1] + sizes[3]);
	pf_region_table_free(t);
	free(buf);
	free(data);
}

/* ------------------------------------------------------------------ */
/* Through pf_source and the loader                                     */

static int sink(void *ctx, const void *buf, size_t len)
{
	return fwrite(buf, 1, len, ctx) == len ? 0 : -EIO;
}

static int64_t encode_record(uint64_t id, uint8_t *buf, size_t cap)
{
	int64_t idv = (int64_t)id;
	pf_feature f = { .name = "id", .name_len = 2, .kind = PF_KIND_INT64, .count = 1,
			 .v.int64s = &idv };

	return pf_example_encode(&f, 1, buf, cap);
}

static void write_indexed(const char *path, uint64_t first, uint64_t count)
{
	pf_shard_writer_config cfg = { .frame_size = 4096 };
	pf_shard_writer *w;
	pf_error err;
	uint8_t rec[64];
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(pf_shard_writer_create(&w, &cfg, sink, f), 0);
	for (uint64_t i = 0; i < count; i++) {
		int64_t n = encode_record(first + i, rec, sizeof(rec));
		cr_assert_eq(pf_shard_writer_add(w, rec, (size_t)n, &err), 0);
	}
	cr_assert_eq(pf_shard_writer_close(w, &err), 0);
	pf_shard_writer_free(w);
	cr_assert_eq(fclose(f), 0);
}

static size_t write_plain(const char *path, uint64_t first, uint64_t count)
{
	uint8_t rec[64], framed[96];
	FILE *f = fopen(path, "wb");
	size_t total = 0;

	cr_assert_not_null(f);
	for (uint64_t i = 0; i < count; i++) {
		int64_t n = encode_record(first + i, rec, sizeof(rec));
		size_t fl = pf_tfr_encode(framed, sizeof(framed), rec, (size_t)n);

		cr_assert_eq(fwrite(framed, 1, fl, f), fl);
		total += fl;
	}
	cr_assert_eq(fclose(f), 0);
	return total;
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0);
	return (uint64_t)st.st_size;
}

Test(region_stats, source_reads_are_attributed)
{
	const char *dir = tu_tmpdir();
	char path[256];
	pf_source_config scfg = { 0 };
	pf_region_table *t;
	pf_region_stats st;
	pf_source *src;
	pf_record rec;
	pf_error err;
	size_t len;
	int n = 0, ret;

	snprintf(path, sizeof(path), "%s/plain.tfrecord", dir);
	len = write_plain(path, 0, 5000);
	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_create(&t, "us-east1", 0, &err), 0);
	cr_assert_eq(pf_region_table_add(t, dir, "asia-east1", &err), 1);
	scfg.regions = t;
	scfg.read_size = 16384;
	cr_assert_eq(pf_source_open(&src, path, &scfg, &err), 0, "%s", err.msg);
	while ((ret = pf_source_next(src, &rec, &err)) == 1)
		n++;
	cr_assert_eq(ret, 0);
	cr_assert_eq(n, 5000);
	pf_source_close(src);
	pf_region_table_region_stats(t, 1, &st);
	/* The index probe at the tail, then the stream to its end. */
	cr_assert_geq(st.io.bytes, len);
	cr_assert_geq(st.io.ops, (len + 16383) / 16384);
	pf_region_table_region_stats(t, 0, &st);
	cr_assert_eq(st.io.ops, 0);
	pf_region_table_free(t);
}

/* The loader over an indexed shard in one region and a plain stream in
 * another: every byte the loader reads (and the index tails and the
 * stream's counting pass at open) is counted to its region. */
Test(region_stats, loader_reads_are_attributed)
{
	const char *dir = tu_tmpdir();
	char near[256], far[256], shard[300], plain[300];
	const char *paths[2] = { near, far };
	pf_loader_config cfg = { 0 };
	pf_loader_metrics m;
	pf_region_table *t;
	pf_region_stats sn, sf;
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	uint64_t steps = 0;
	int ret;

	snprintf(near, sizeof(near), "%s/near", dir);
	snprintf(far, sizeof(far), "%s/far", dir);
	cr_assert_eq(mkdir(near, 0755), 0);
	cr_assert_eq(mkdir(far, 0755), 0);
	snprintf(shard, sizeof(shard), "%s/a.tfrecord.zst", near);
	snprintf(plain, sizeof(plain), "%s/b.tfrecord", far);
	write_indexed(shard, 0, 4000);
	write_plain(plain, 4000, 4000);

	pf_error_clear(&err);
	cr_assert_eq(pf_region_table_create(&t, "us-east1", 0, &err), 0);
	cr_assert_eq(pf_region_table_add(t, near, "us-east1", &err), 1);
	cr_assert_eq(pf_region_table_add(t, far, "europe-west4", &err), 2);
	cfg.paths = paths;
	cfg.npaths = 2;
	cfg.features = "id:int64[1]";
	cfg.per_core_batch = 100;
	cfg.threads = 2;
	cfg.shuffle = true;
	cfg.regions = t;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while ((ret = pf_loader_next(l, &b)) == 1) {
		steps++;
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0);
	cr_assert_eq(steps, 80);
	pf_loader_get_metrics(l, &m);
	pf_loader_free(l);

	pf_region_table_region_stats(t, 0, &sn);
	pf_region_table_region_stats(t, 1, &sf);
	/* Near: the index tail, then every frame. */
	cr_assert_gt(sn.io.bytes, 0);
	cr_assert_leq(sn.io.bytes, 2 * file_size(shard));
	cr_assert_geq(sn.io.ops, 2);
	/* Far: counted at open, then read again in the I/O engine's blocks. */
	cr_assert_geq(sf.io.bytes, 2 * file_size(plain));
	cr_assert_eq(sn.io.errors + sf.io.errors, 0);
	/* Nothing the loader read went uncounted. */
	cr_assert_geq(sn.io.bytes + sf.io.bytes, m.bytes_read);
	pf_region_table_free(t);
}

/* The bucket clients, by their mount's file system type (issue 38): each
 * named, with the options that matter; any other file system not. */
Test(region_table, bucket_clients_are_named_by_fstype)
{
	static const char *const known[][2] = {
		{ "fuse.s3fs", "s3fs" }, { "fuse.rclone", "rclone" },
		{ "fuse.gcsfuse", "gcsfuse" }, { "fuse.mountpoint-s3", "mountpoint-s3" },
	};
	const char *advice = "x";

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		cr_assert_str_eq(pf_mount_bucket_client(known[i][0], &advice), known[i][1]);
		cr_assert(advice && strstr(advice, known[i][1]), "%s", advice);
	}
	cr_assert_null(pf_mount_bucket_client("fuse.regionfs", &advice));
	cr_assert_null(advice);
	cr_assert_null(pf_mount_bucket_client("ext4", NULL));
	cr_assert_null(pf_mount_bucket_client(NULL, NULL));
	cr_assert_null(pf_mount_bucket_client("fuse.s3fsx", NULL));
}
