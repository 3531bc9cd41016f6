/* SPDX-License-Identifier: Apache-2.0 */
/* The pf_error contract: cleared on entry of every public call, only the
 * fields that apply printed, and nothing cut (long paths, the cause). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "podfeed.h"
#include "testutil.h"

/* An uninitialised `pf_error err;`, made visible: every byte '5', so that
 * a stale frame or record prints as this number and a stale file as a
 * run of fives. */
#define JUNK_BYTE 0x35
#define JUNK_NUMBER "3834029160418063669"	/* int64 of eight 0x35 bytes */

static void junk(pf_error *err)
{
	memset(err, JUNK_BYTE, sizeof(*err));
}

/* The line of err holds what is wrong and nothing left from before. */
static void assert_clean_line(const pf_error *err, const char *call, const char *cause)
{
	char line[PF_ERROR_LINE_MAX];
	size_t n = pf_error_format(err, line, sizeof(line));

	cr_assert_lt(n, sizeof(line));
	cr_assert_eq(strlen(line), n, "%s: the length returned is the line's", call);
	cr_assert_lt(err->code, 0, "%s: the code is set", call);
	cr_assert_null(strstr(line, "55555"), "%s: stale bytes in the line: %s", call, line);
	cr_assert_null(strstr(line, JUNK_NUMBER), "%s: a stale number in the line: %s", call, line);
	cr_assert_null(strstr(line, "(frame"), "%s: no frame applies: %s", call, line);
	cr_assert_null(strstr(line, "(record"), "%s: no record applies: %s", call, line);
	cr_assert_eq(err->frame, -1, "%s", call);
	cr_assert_eq(err->record, -1, "%s", call);
	cr_assert(strstr(line, cause), "%s: '%s' not in: %s", call, cause, line);
}

Test(error, every_entry_point_clears_a_junk_error)
{
	const char *dir = tu_tmpdir();
	char missing[256];
	const char *paths[1] = { missing };
	pf_loader_config cfg = {
		.paths = paths, .npaths = 1, .features = "id:int64[1]",
		.per_core_batch = 4,
	};
	static const uint8_t bad_record[32] = { 4, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4 };
	static const uint8_t bad_example[] = { 0x0a, 0x05, 0x0a, 0x03, 'a' };
	uint8_t garbage[64];
	pf_loader *l = NULL;
	pf_source *s = NULL;
	pf_spec spec;
	pf_record rec;
	pf_arena arena;
	pf_example ex;
	pf_state_info info;
	pf_io_config iocfg = { .backend = "no-such-backend" };
	pf_io *io = NULL;
	pf_region_table *t = NULL;
	pf_error err;

	snprintf(missing, sizeof(missing), "%s/missing.tfrecord", dir);

	junk(&err);
	cr_assert_lt(pf_loader_create(&l, &cfg, &err), 0);
	assert_clean_line(&err, "pf_loader_create", missing);

	junk(&err);
	cr_assert_lt(pf_source_open(&s, missing, NULL, &err), 0);
	assert_clean_line(&err, "pf_source_open", "missing.tfrecord: ");

	junk(&err);
	cr_assert_lt(pf_spec_parse(&spec, "id:int128[1]", &err), 0);
	assert_clean_line(&err, "pf_spec_parse", "int128");

	junk(&err);
	cr_assert_lt(pf_tfr_parse(bad_record, sizeof(bad_record), 0, PF_MAX_RECORD_DEFAULT,
				  &rec, &err), 0);
	assert_clean_line(&err, "pf_tfr_parse", "decompressed byte 0: ");

	cr_assert_eq(pf_arena_init(&arena, 4096), 0);
	junk(&err);
	cr_assert_lt(pf_example_decode(bad_example, sizeof(bad_example), &arena, &ex, &err), 0);
	assert_clean_line(&err, "pf_example_decode", "");
	pf_arena_release(&arena);

	memset(garbage, 0x77, sizeof(garbage));
	junk(&err);
	cr_assert_lt(pf_state_inspect(garbage, sizeof(garbage), &info, &err), 0);
	assert_clean_line(&err, "pf_state_inspect", "");

	junk(&err);
	cr_assert_lt(pf_file_open(missing, &err), 0);
	assert_clean_line(&err, "pf_file_open", missing);

	junk(&err);
	cr_assert_lt(pf_io_create(&io, &iocfg, &err), 0);
	assert_clean_line(&err, "pf_io_create", "no-such-backend");

	cr_assert_eq(pf_region_table_create(&t, NULL, 0, NULL), 0);
	junk(&err);
	cr_assert_lt(pf_region_table_add_flag(t, "no equals sign", &err), 0);
	assert_clean_line(&err, "pf_region_table_add_flag", "is not PATH=REGION");
	pf_region_table_free(t);

	/* A call that succeeds leaves the error clear. */
	junk(&err);
	cr_assert_eq(pf_spec_parse(&spec, "id:int64[1]", &err), 0);
	cr_assert_eq(err.code, 0);
	cr_assert_eq(err.file[0], '\0');
	cr_assert_eq(err.msg[0], '\0');
	cr_assert_eq(err.frame, -1);
}

/* The fields that apply are printed, the others are not. */
Test(error, format_prints_only_what_applies)
{
	pf_error err;
	char line[256];

	pf_error_clear(&err);
	pf_error_set(&err, -EBADMSG, PF_OFFSET_NONE, 12345, "bad thing");
	pf_error_format(&err, line, sizeof(line));
	cr_assert_str_eq(line, "bad thing", "no offset kind: no byte, even if offset is set");
	err.record = 7;
	pf_error_format(&err, line, sizeof(line));
	cr_assert_str_eq(line, "bad thing (record 7)");
	pf_error_set(&err, -EBADMSG, PF_OFFSET_FILE, 9, "bad thing");
	pf_error_set_file(&err, "a.tfrecord");
	err.frame = 2;
	pf_error_format(&err, line, sizeof(line));
	cr_assert_str_eq(line, "a.tfrecord: byte 9: bad thing (frame 2, record 7)");
	pf_error_clear(&err);
	err.code = -EIO;
	pf_error_format(&err, line, sizeof(line));
	cr_assert_str_eq(line, "I/O error", "no message: the code's name");
}

/* pf_error_format() returns the whole length, as snprintf() does. */
Test(error, format_returns_the_length_needed)
{
	pf_error err;
	char small[16], *big;
	size_t need;

	pf_error_clear(&err);
	pf_error_set_file(&err, "some/rather/long/path/to/a/shard.tfrecord");
	pf_error_set(&err, -EBADMSG, PF_OFFSET_FILE, 4096, "bad data CRC");
	need = pf_error_format(&err, NULL, 0);
	cr_assert_gt(need, sizeof(small));
	cr_assert_eq(pf_error_format(&err, small, sizeof(small)), need);
	cr_assert_eq(strlen(small), sizeof(small) - 1, "cut and terminated");
	big = malloc(need + 1);
	cr_assert_eq(pf_error_format(&err, big, need + 1), need);
	cr_assert_str_eq(big, "some/rather/long/path/to/a/shard.tfrecord: byte 4096: bad data CRC");
	free(big);
}

/* A directory path of about 3,000 bytes under base: fifteen levels of
 * 200-byte names.  @return it (static). */
static const char *long_dir(const char *base)
{
	static char path[PF_PATH_MAX];
	size_t n = (size_t)snprintf(path, sizeof(path), "%s", base);

	for (int level = 0; level < 15; level++) {
		path[n++] = '/';
		memset(path + n, 'a' + level, 199);
		n += 199;
		path[n] = '\0';
		cr_assert_eq(mkdir(path, 0755), 0, "mkdir at level %d", level);
	}
	cr_assert_gt(strlen(path), 3000);
	return path;
}

/* A plain TFRecord file of 50 records whose 20th record's data is
 * damaged (a bad data CRC). */
static void write_damaged(const char *path)
{
	size_t len;
	uint8_t *buf;

	tu_write_id_stream(path, 0, 50, false);
	buf = tu_read_file(path, &len);
	buf[len / 2] ^= 0x5a;
	tu_write_file(path, buf, len);
	free(buf);
}

static void source_error(const char *path, pf_error *err)
{
	pf_source *s;
	pf_record rec;
	int ret;

	junk(err);
	cr_assert_eq(pf_source_open(&s, path, NULL, err), 0);
	while ((ret = pf_source_next(s, &rec, err)) == 1)
		;
	cr_assert_lt(ret, 0, "%s", path);
	pf_source_close(s);
}

static void loader_error(const char *path, pf_error *err)
{
	const char *paths[1] = { path };
	pf_loader_config cfg = {
		.paths = paths, .npaths = 1, .features = "id:int64[1]",
		.per_core_batch = 4, .threads = 1,
	};
	pf_loader *l;
	pf_batch *b;
	int ret;

	junk(err);
	ret = pf_loader_create(&l, &cfg, err);
	if (ret == 0) {
		while ((ret = pf_loader_next(l, &b)) == 1)
			pf_loader_release(l, b);
		cr_assert_lt(ret, 0, "%s", path);
		*err = *pf_loader_last_error(l);
		pf_loader_free(l);
	}
	cr_assert_lt(ret, 0);
}

/* line is short_line with short_path replaced by long_path: the whole
 * path and the whole cause. */
static void assert_same_but_path(const pf_error *long_err, const char *long_path,
				 const pf_error *short_err, const char *short_path)
{
	static char long_line[PF_ERROR_LINE_MAX], short_line[PF_ERROR_LINE_MAX];
	size_t n = pf_error_format(long_err, long_line, sizeof(long_line));
	const char *at;

	cr_assert_lt(n, sizeof(long_line));
	pf_error_format(short_err, short_line, sizeof(short_line));
	cr_assert_eq(strncmp(short_line, short_path, strlen(short_path)), 0, "%s", short_line);
	cr_assert_eq(strncmp(long_line, long_path, strlen(long_path)), 0,
		     "the whole path leads the line: %.200s", long_line);
	at = long_line + strlen(long_path);
	cr_assert_str_eq(at, short_line + strlen(short_path), "the whole cause follows the path");
	cr_assert(strstr(at, "CRC") || strstr(at, "no such file"), "a cause: %s", at);
}

Test(error, a_3000_byte_path_and_its_cause_are_never_cut, .timeout = 60)
{
	const char *base = tu_tmpdir();
	const char *dir = long_dir(base);
	char short_path[256], long_path[PF_PATH_MAX], long_missing[PF_PATH_MAX];
	char short_missing[256];
	static pf_error short_err, long_err;

	snprintf(long_path, sizeof(long_path), "%.3200s/damaged.tfrecord", dir);
	snprintf(short_path, sizeof(short_path), "%s/damaged.tfrecord", base);
	snprintf(long_missing, sizeof(long_missing), "%.3200s/missing.tfrecord", dir);
	snprintf(short_missing, sizeof(short_missing), "%s/missing.tfrecord", base);
	write_damaged(short_path);
	write_damaged(long_path);

	source_error(short_path, &short_err);
	source_error(long_path, &long_err);
	assert_same_but_path(&long_err, long_path, &short_err, short_path);

	loader_error(short_path, &short_err);
	loader_error(long_path, &long_err);
	assert_same_but_path(&long_err, long_path, &short_err, short_path);

	loader_error(short_missing, &short_err);
	loader_error(long_missing, &long_err);
	assert_same_but_path(&long_err, long_missing, &short_err, short_missing);
}

/* Skip mode's quarantine log names the whole path too. */
Test(error, the_quarantine_log_keeps_a_long_path, .timeout = 60)
{
	const char *base = tu_tmpdir();
	char path[PF_PATH_MAX], quarantine[512];
	const char *paths[1] = { path };
	pf_loader_config cfg = {
		.paths = paths, .npaths = 1, .features = "id:int64[1]",
		.per_core_batch = 4, .threads = 1,
		.on_corrupt = PF_CORRUPT_SKIP, .quarantine = quarantine,
	};
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	size_t len;
	char *log;
	int ret;

	snprintf(path, sizeof(path), "%.3200s/damaged.tfrecord", long_dir(base));
	snprintf(quarantine, sizeof(quarantine), "%s/quarantine.jsonl", base);
	write_damaged(path);
	junk(&err);
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while ((ret = pf_loader_next(l, &b)) == 1)
		pf_loader_release(l, b);
	cr_assert_eq(ret, 0);
	pf_loader_free(l);
	log = (char *)tu_read_file(quarantine, &len);
	log = realloc(log, len + 1);
	log[len] = '\0';
	cr_assert(strstr(log, path), "the whole path in the log (%zu bytes)", len);
	cr_assert(strstr(log, "CRC"), "the cause in the log");
	free(log);
}
