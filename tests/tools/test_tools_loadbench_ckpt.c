/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's readable checkpoints (issue 39): --skip-steps resumes n
 * steps on (the report's skipped figures, the state after it), `which
 * --steps A:B` names the records the run delivers at those steps (checked
 * against the loader's own batches over ids), `state show` prints a
 * state's fields; bad skips, steps past the run and damaged states are
 * named errors. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "podfeed.h"
#include "testutil.h"

/* 3,000 ids in 3 indexed shards of 1,000: id = shard x 1000 + record. */
static const char *ids(void)
{
	return tu_id_shards(0, 3000, 3, 2048);
}

/* Run loadbench with args, its stdout into out (cap); @return its exit
 * status. */
static int lb(const char *args, char *out, size_t cap)
{
	char cmd[4096];
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", tu_env_tool("LOADBENCH"), args);
	st = tu_capture(cmd, out, cap, NULL);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static json_t *lb_json(const char *args)
{
	char cmd[4096], *out = malloc(1 << 20);
	json_error_t jerr;
	json_t *o;
	int st;

	cr_assert_not_null(out);
	snprintf(cmd, sizeof(cmd), "%s %s 2>/dev/null", tu_env_tool("LOADBENCH"), args);
	st = tu_capture(cmd, out, 1 << 20, NULL);
	cr_assert_eq(WEXITSTATUS(st), 0, "%s -> %d: %s", cmd, WEXITSTATUS(st), out);
	o = json_loads(out, 0, &jerr);
	cr_assert_not_null(o, "%s: %s", jerr.text, out);
	free(out);
	return o;
}

#define RUN "--quiet --per-core-batch 8 --cores 2 --shuffle --shuffle-window 100 --seed 3 " \
	    "--epochs 2 --features id:int64[1]"

Test(loadbench_ckpt, skip_steps_resumes_n_steps_on, .timeout = 120)
{
	const char *d = ids(), *sd = tu_tmpdir();	/* the states beside, not among, the shards */
	char args[2048], out[8192];
	json_t *o, *sk;

	snprintf(args, sizeof(args), "--json " RUN " --steps 30 --save-state %s/a %s", sd, d);
	json_decref(lb_json(args));
	/* 3000 / 16 = 187 steps an epoch, 374 in all: 30 + 200 skipped. */
	snprintf(args, sizeof(args), "--json " RUN " --resume %s/a --skip-steps 200 "
		 "--save-state %s/b %s", sd, sd, d);
	o = lb_json(args);
	cr_assert_eq(json_integer_value(json_object_get(o, "steps")), 374 - 230);
	sk = json_object_get(o, "skipped");
	cr_assert_not_null(sk);
	cr_assert_eq(json_integer_value(json_object_get(sk, "steps")), 200);
	cr_assert_eq(json_integer_value(json_object_get(sk, "from_step")), 30);
	cr_assert_eq(json_integer_value(json_object_get(sk, "records")), 3200);
	json_decref(o);
	/* The text report says it too. */
	snprintf(args, sizeof(args), RUN " --resume %s/a --skip-steps 200 %s", sd, d);
	cr_assert_eq(lb(args, out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "skipped     200 steps from global step 30 (skip_steps): 3200 "
			 "records, not read"), "%s", out);
	/* The state after the run: its end, with the skip on record. */
	snprintf(args, sizeof(args), "state show --json %s/b", sd);
	o = lb_json(args);
	cr_assert_eq(json_integer_value(json_object_get(o, "skipped_steps")), 200);
	cr_assert_eq(json_integer_value(json_object_get(o, "global_step")), 374);
	json_decref(o);
	/* A skip past the run's end, and a negative one. */
	snprintf(args, sizeof(args), RUN " --resume %s/a --skip-steps 344 %s", sd, d);
	cr_assert_eq(lb(args, out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "skip_steps: 344 steps from global step 30 reach past the run's "
			 "end: its last step is global step 373"), "%s", out);
	snprintf(args, sizeof(args), RUN " --skip-steps -3 %s", d);
	cr_assert_eq(lb(args, out, sizeof(out)), 2, "%s", out);
	cr_assert(strstr(out, "--skip-steps"), "%s", out);
}

/* The ids of every row of the steps [from, to) a loader of this config
 * delivers (host h of hosts). */
static void delivered(const char *d, uint32_t h, uint32_t hosts, uint64_t from, uint64_t to,
		      int64_t *ids_out)
{
	const char *paths[] = { d };
	pf_loader_config cfg = { .paths = paths, .npaths = 1, .features = "id:int64[1]",
				 .host_index = h, .num_hosts = hosts, .cores_per_host = 2,
				 .per_core_batch = 8, .shuffle = true, .shuffle_window = 100,
				 .seed = 3, .epochs = 2, .threads = 2 };
	pf_loader *l;
	pf_batch *b;
	pf_error err;

	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while (pf_loader_next(l, &b) == 1) {
		if (b->global_step >= from && b->global_step < to)
			for (uint32_t c = 0; c < 2; c++)
				for (uint32_t i = 0; i < 8; i++)
					ids_out[(b->global_step - from) * 16 + c * 8 + i] =
						((const int64_t *)b->core[c].tensors[0].data)[i];
		pf_loader_release(l, b);
	}
	pf_loader_free(l);
}

Test(loadbench_ckpt, which_names_the_records_the_run_delivers, .timeout = 120)
{
	const char *d = ids();
	char args[2048], out[8192];
	int64_t want[16 * 6];
	json_t *o, *steps;

	for (uint32_t h = 0; h < 2; h++) {
		snprintf(args, sizeof(args), "which --json --steps 180:186 " RUN
			 " --num-hosts 2 --host-index %u %s", h, d);
		o = lb_json(args);
		delivered(d, h, 2, 180, 186, want);
		steps = json_object_get(o, "steps");
		cr_assert_eq(json_array_size(steps), 6);
		for (size_t j = 0; j < 6; j++) {
			json_t *st = json_array_get(steps, j), *rows = json_object_get(st, "rows");

			cr_assert_eq(json_integer_value(json_object_get(st, "step")), 180 + j);
			cr_assert_eq(json_array_size(rows), 16);
			for (size_t i = 0; i < 16; i++) {
				json_t *r = json_array_get(rows, i);
				const char *file = json_string_value(json_object_get(r, "file"));
				const char *base = strrchr(file, '/');
				int64_t id = (base[4] - '0') * 1000 +
					     json_integer_value(json_object_get(r, "record"));

				cr_assert_eq(json_integer_value(json_object_get(r, "core")), i / 8);
				cr_assert_eq(json_integer_value(json_object_get(r, "row")), i % 8);
				cr_assert_eq(id, want[j * 16 + i], "host %u step %zu row %zu: %s "
					     "record %lld is id %lld, the run delivered %lld", h,
					     180 + j, i, file,
					     (long long)json_integer_value(json_object_get(r, "record")),
					     (long long)id, (long long)want[j * 16 + i]);
			}
		}
		json_decref(o);
	}
	/* Text: a line a row, naming the file and the record. */
	snprintf(args, sizeof(args), "which --steps 3 " RUN " %s", d);
	cr_assert_eq(lb(args, out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "step 3 (epoch 0, step 3 of it)\n  core 0 row 0 "), "%s", out);
	cr_assert(strstr(out, "  core 1 row 7 "), "%s", out);
	/* Past the run's end: an error naming its steps, nothing listed. */
	snprintf(args, sizeof(args), "which --steps 370:380 " RUN " %s", d);
	cr_assert_eq(lb(args, out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "step 379 is not a step of this run: its steps are global steps "
			 "0 to 373"), "%s", out);
	cr_assert_null(strstr(out, "core 0 row"), "%s", out);
	/* No steps, or a range that ends before it starts. */
	snprintf(args, sizeof(args), "which " RUN " %s", d);
	cr_assert_eq(lb(args, out, sizeof(out)), 2, "%s", out);
	cr_assert(strstr(out, "--steps A:B"), "%s", out);
	snprintf(args, sizeof(args), "which --steps 9:4 " RUN " %s", d);
	cr_assert_eq(lb(args, out, sizeof(out)), 2, "%s", out);
}

Test(loadbench_ckpt, state_show_prints_the_readable_fields, .timeout = 60)
{
	const char *d = ids(), *sd = tu_tmpdir();
	char args[2048], out[8192], path[1024];
	uint8_t *blob;
	size_t len;
	json_t *o;

	snprintf(args, sizeof(args), RUN " --steps 50 --save-state %s/s %s", sd, d);
	cr_assert_eq(lb(args, out, sizeof(out)), 0, "%s", out);
	snprintf(args, sizeof(args), "state show %s/s", sd);
	cr_assert_eq(lb(args, out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "kind          loader\n"), "%s", out);
	cr_assert(strstr(out, "topology      host 0 of 1, 2 cores x 8 records\n"), "%s", out);
	cr_assert(strstr(out, "position      epoch 0 (started), 50 steps of it delivered, "
			 "global step 50 next\n"), "%s", out);
	cr_assert(strstr(out, "dataset       3000 records, fingerprint "), "%s", out);
	cr_assert(strstr(out, "order         seed 3, shuffle window, remainder drop\n"), "%s",
		  out);
	snprintf(args, sizeof(args), "state show --json %s/s", sd);
	o = lb_json(args);
	cr_assert_str_eq(json_string_value(json_object_get(o, "kind")), "loader");
	cr_assert_eq(json_integer_value(json_object_get(o, "step_in_epoch")), 50);
	cr_assert_eq(strlen(json_string_value(json_object_get(o, "dataset_fingerprint"))), 16);
	json_decref(o);
	/* A damaged one: the file and the byte. */
	snprintf(path, sizeof(path), "%s/s", sd);
	blob = tu_read_file(path, &len);
	blob[len - 2] ^= 1;
	snprintf(path, sizeof(path), "%s/bad", sd);
	tu_write_file(path, blob, len);
	free(blob);
	snprintf(args, sizeof(args), "state show %s", path);
	cr_assert_eq(lb(args, out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "/bad: byte 16: state payload fails its CRC32C"), "%s", out);
	cr_assert_eq(lb("state show", out, sizeof(out)), 2, "%s", out);
	cr_assert_eq(lb("state list", out, sizeof(out)), 2, "%s", out);
}
