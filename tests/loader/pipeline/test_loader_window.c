/* SPDX-License-Identifier: Apache-2.0 */
/* The shuffle window of image features (issue 37): records wait in it as
 * read, decoded into their rows once their step's records are in, so its
 * memory follows their stored bytes; a default window the budget cannot
 * hold is fitted to it and said (tuning, metrics, report, stderr), one set
 * that it cannot hold is refused naming the largest it can; the batches
 * are the same at every thread count, as decoded rows (PODFEED_WINDOW=rows)
 * and after a resume, with the window shuffle and the global one. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfeed.h"
#include "pf_transform.h"
#include "testutil.h"

#define NREC 2048u
#define OUT 64u
#define ROW (OUT * OUT * 3 + 8)		/* an image row and its label */
#define FEATURES "image/encoded:image[64,64]:train,image/class/label:int64[1]"
#define HOST_BATCH 16u
#define MIB (1ull << 20)
#define PAD 8192u			/* bytes stored beside each image */
#define BUDGET (16 * MIB)		/* a quarter of it under what the padded
					   dataset's records take as read, the
					   whole of it too */

static int sink(void *ctx, const void *buf, size_t len)
{
	return fwrite(buf, 1, len, ctx) == len ? 0 : -EIO;
}

/* NREC records: a small JPEG whose scene and size vary with i, its label
 * i, and `pad` bytes of another feature (not in the spec: stored, never
 * decoded).  @return its path (malloc'd, for the test's life). */
static const char *dataset(const char *name, uint32_t pad)
{
	char *path = malloc(512);
	pf_shard_writer_config cfg = { .frame_size = 32768 };
	pf_shard_writer *w;
	pf_error err;
	static uint8_t rec[1 << 17], jpeg[1 << 16], px[96 * 96 * 3], padding[1 << 14];
	FILE *f;

	cr_assert_not_null(path);
	snprintf(path, 512, "%s/%s.tfrecord.zst", tu_tmpdir(), name);
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_leq(pad, sizeof(padding));
	cr_assert_eq(pf_shard_writer_create(&w, &cfg, sink, f), 0);
	for (uint32_t i = 0; i < NREC; i++) {
		uint32_t wd = 40 + (i * 37) % 56, ht = 40 + (i * 53) % 56;
		pf_bytes img, pb = { padding, pad };
		int64_t label = i, n;

		for (uint32_t y = 0; y < ht; y++)
			for (uint32_t x = 0; x < wd; x++)
				for (uint32_t c = 0; c < 3; c++)
					px[(y * wd + x) * 3 + c] = (uint8_t)(x * (c + 2) + y * (i % 5 + 1) +
									     ((x / 8 + y / 8) % 2) * 70);
		n = pf_image_encode_jpeg(px, wd, ht, 3, 80, false, jpeg, sizeof(jpeg), &err);
		cr_assert_gt(n, 0, "%s", err.msg);
		img = (pf_bytes){ jpeg, (uint32_t)n };
		pf_feature feat[3] = {
			{ .name = "image/encoded", .name_len = 13, .kind = PF_KIND_BYTES, .count = 1,
			  .v.bytes = &img },
			{ .name = "image/class/label", .name_len = 17, .kind = PF_KIND_INT64,
			  .count = 1, .v.int64s = &label },
			{ .name = "pad", .name_len = 3, .kind = PF_KIND_BYTES, .count = 1,
			  .v.bytes = &pb },
		};
		/* Bytes that zstd cannot shrink much: what a window holds is
		 * the decompressed record either way. */
		for (uint32_t k = 0; k < pad; k++)
			padding[k] = (uint8_t)((i * 2654435761u + k * 40503u) >> 13);
		n = pf_example_encode(feat, pad ? 3 : 2, rec, sizeof(rec));
		cr_assert_gt(n, 0);
		cr_assert_eq(pf_shard_writer_add(w, rec, (size_t)n, &err), 0, "%s", err.msg);
	}
	cr_assert_eq(pf_shard_writer_close(w, &err), 0);
	pf_shard_writer_free(w);
	cr_assert_eq(fclose(f), 0);
	return path;
}

typedef struct run_opts {
	unsigned threads;
	size_t budget;
	uint32_t window;		/* 0: the default */
	bool global;
	uint32_t frame_cache;		/* 0: the default */
	uint64_t max_steps;
	const pf_state_blob *from;
	pf_state_blob *save;
} run_opts;

typedef struct run_out {
	uint32_t crc[600];
	uint32_t n;
	int ret;
	pf_error err;
	pf_loader_metrics m;
	pf_tuning tune;
} run_out;

/* Two epochs of the dataset at path, 8 rows a core on 2 cores, shuffled;
 * each batch's blocks hashed. */
static run_out run(const char *path, const run_opts *o)
{
	pf_loader_config cfg = { 0 };
	const char *paths[1] = { path };
	pf_loader *l;
	pf_batch *b;
	run_out out = { 0 };
	int ret;

	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.features = FEATURES;
	cfg.per_core_batch = HOST_BATCH / 2;
	cfg.cores_per_host = 2;
	cfg.epochs = 2;
	cfg.seed = 7;
	cfg.shuffle = true;
	cfg.shuffle_mode = o->global ? PF_SHUFFLE_GLOBAL : PF_SHUFFLE_WINDOW;
	cfg.shuffle_window = o->window;
	cfg.frame_cache = o->frame_cache;
	cfg.threads = o->threads;
	cfg.memory_budget = o->budget;
	cfg.max_steps = o->max_steps;
	cfg.resume = o->from;
	cfg.nresume = o->from ? 1 : 0;
	pf_error_clear(&out.err);
	out.ret = pf_loader_create(&l, &cfg, &out.err);
	if (out.ret)
		return out;
	while ((ret = pf_loader_next(l, &b)) == 1) {
		uint32_t crc = 0;

		for (uint32_t c = 0; c < b->cores; c++)
			crc = pf_crc32c(crc, b->core[c].block, b->core[c].block_bytes);
		cr_assert_lt(out.n, sizeof(out.crc) / sizeof(out.crc[0]));
		out.crc[out.n++] = crc;
		pf_loader_release(l, b);
	}
	out.ret = ret;
	if (ret < 0)
		out.err = *pf_loader_last_error(l);
	pf_loader_get_metrics(l, &out.m);
	pf_loader_tuning(l, &out.tune);
	if (o->save) {
		size_t len;

		o->save->data = tu_save_state(l, &len);
		o->save->len = len;
	}
	pf_loader_free(l);
	return out;
}

static void same_batches(const run_out *a, const run_out *b, const char *what)
{
	cr_assert_eq(a->ret, 0, "%s: %s", what, a->err.msg);
	cr_assert_eq(b->ret, 0, "%s: %s", what, b->err.msg);
	cr_assert_eq(a->n, b->n, "%s: %u batches against %u", what, a->n, b->n);
	for (uint32_t i = 0; i < a->n; i++)
		cr_assert_eq(a->crc[i], b->crc[i], "%s: batch %u differs", what, i);
}

/* The default window does not fit in half of BUDGET: it is cut to whole
 * host batches that do, the run stays within the budget, and the choice is
 * said in the tuning, the metrics, the report and one line on stderr. */
Test(loader_window, defaults_fitted_within_the_budget_and_said, .init = cr_redirect_stderr)
{
	const char *path = dataset("img", PAD);
	run_out o = run(path, &(run_opts){ .threads = 2, .budget = BUDGET });
	const pf_tuning_choice *c = &o.tune.shuffle_window;
	pf_loader_config cfg = { .features = FEATURES, .per_core_batch = 8, .cores_per_host = 2,
				 .shuffle = true, .memory_budget = BUDGET };
	pf_run_info info = { .seconds = 1, .tuning = &o.tune };
	pf_report *r;
	pf_error err;
	char text[16384], want[64], line[1024];
	FILE *f;
	bool said = false;

	cr_assert_eq(o.ret, 0, "%s", o.err.msg);
	cr_assert_eq(o.n, 2 * (NREC / HOST_BATCH));
	cr_assert_eq(o.m.images, 2 * NREC);
	/* Fitted: fewer records than the default (and than the dataset's:
	 * a window of more is one block of all of them), whole host
	 * batches. */
	cr_assert(o.m.fitted & PF_FITTED_WINDOW);
	cr_assert(o.m.window_as_read);
	cr_assert_lt(o.m.shuffle_window, NREC);
	cr_assert_geq(o.m.shuffle_window, 4 * HOST_BATCH);
	cr_assert_eq(o.m.shuffle_window % HOST_BATCH, 0);
	cr_assert(c->automatic);
	cr_assert_eq(c->value, o.m.shuffle_window);
	cr_assert(strstr(c->why, "cut from the default 8192"), "%s", c->why);
	/* Within the budget: every pool, and the window in a quarter of it
	 * beside the chunks read ahead. */
	cr_assert_leq(o.m.memory_bytes, BUDGET);
	cr_assert_leq(o.m.window_peak_bytes, o.m.window_bytes);
	cr_assert_gt(o.m.window_peak_bytes, 0);
	cr_assert_leq(o.m.window_bytes, BUDGET / 4 + MIB);

	/* The report's lines. */
	cr_assert_eq(pf_report_create(&r), 0);
	cr_assert_eq(pf_report_add_loader(r, &cfg, &o.m, &info, &err), 0, "%s", err.msg);
	cr_assert_gt(pf_report_format(r, PF_REPORT_TEXT, text, sizeof(text)), 0);
	pf_report_free(r);
	snprintf(want, sizeof(want), "window      %u (auto): cut from the default 8192",
		 c->value);
	cr_assert(strstr(text, want), "%s", text);
	snprintf(want, sizeof(want), "records in a window of %u,", c->value);
	cr_assert(strstr(text, want), "%s", text);
	cr_assert(strstr(text, "the window's records as read"), "%s", text);

	/* One line on stderr, once. */
	fflush(stderr);
	f = cr_get_redirected_stderr();
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, "does not hold the defaults"))
			continue;
		cr_assert(!said, "said twice: %s", line);
		said = true;
		snprintf(want, sizeof(want), "shuffle window %u records (default 8192)", c->value);
		cr_assert(strstr(line, want), "%s", line);
	}
	cr_assert(said, "no line on stderr");
}

/* The window holds records as read: its memory follows their stored
 * bytes (8 KiB more a record stored, 8 KiB more a record held), not their
 * decoded rows', which the rows' window takes. */
Test(loader_window, memory_follows_the_records_stored_bytes)
{
	const char *lean = dataset("lean", 0);
	run_out a = run(lean, &(run_opts){ .threads = 2, .budget = 64 * MIB, .window = 256 });
	const char *padded = dataset("padded", PAD);
	run_out b = run(padded, &(run_opts){ .threads = 2, .budget = 64 * MIB, .window = 256 });
	run_out rows;

	setenv("PODFEED_WINDOW", "rows", 1);
	rows = run(lean, &(run_opts){ .threads = 2, .budget = 64 * MIB, .window = 256 });
	unsetenv("PODFEED_WINDOW");
	cr_assert_eq(a.ret, 0, "%s", a.err.msg);
	cr_assert_eq(b.ret, 0, "%s", b.err.msg);
	cr_assert_eq(rows.ret, 0, "%s", rows.err.msg);
	cr_assert(a.m.window_as_read && b.m.window_as_read && !rows.m.window_as_read);
	cr_assert_eq(a.m.shuffle_window, 256);
	/* The padding's bytes, for at least a window's records, at the
	 * peak and in the plan. */
	cr_assert_geq(b.m.window_peak_bytes, a.m.window_peak_bytes + 256 * PAD * 8 / 10,
		      "%llu, %llu", (unsigned long long)b.m.window_peak_bytes,
		      (unsigned long long)a.m.window_peak_bytes);
	cr_assert_geq(b.m.window_bytes, a.m.window_bytes + 256 * PAD);
	/* Small JPEGs: the window's pages are under half of what its rows
	 * would take as decoded rows, which the rows' window holds. */
	cr_assert_lt(a.m.window_bytes, 256ull * ROW / 2, "%llu",
		     (unsigned long long)a.m.window_bytes);
	cr_assert_geq(rows.m.window_bytes, 256ull * ROW);
	same_batches(&a, &rows, "as read, as rows");
}

/* The window fitted is a function of the dataset, the spec, the topology
 * and the budget, not of the threads: the same window and batches at 1,
 * 2 and 4 threads, and as decoded rows (that window set, a budget that
 * holds its rows). */
Test(loader_window, same_batches_at_every_thread_count_and_as_rows)
{
	const char *path = dataset("img", PAD);
	run_out one = run(path, &(run_opts){ .threads = 1, .budget = BUDGET });
	run_out two = run(path, &(run_opts){ .threads = 2, .budget = BUDGET });
	run_out four = run(path, &(run_opts){ .threads = 4, .budget = BUDGET });
	run_out rows;

	cr_assert_eq(one.m.shuffle_window, two.m.shuffle_window);
	cr_assert_eq(one.m.shuffle_window, four.m.shuffle_window);
	same_batches(&one, &two, "1 and 2 threads");
	same_batches(&one, &four, "1 and 4 threads");
	setenv("PODFEED_WINDOW", "rows", 1);
	rows = run(path, &(run_opts){ .threads = 2, .budget = 256 * MIB,
				      .window = (uint32_t)one.m.shuffle_window });
	cr_assert(!rows.m.window_as_read);
	same_batches(&one, &rows, "as read, as rows");
}

/* The same with the global shuffle on the defaults. */
Test(loader_window, global_shuffle_on_the_defaults)
{
	const char *path = dataset("img", PAD);
	run_out one = run(path, &(run_opts){ .threads = 1, .budget = BUDGET, .global = true });
	run_out two = run(path, &(run_opts){ .threads = 2, .budget = BUDGET, .global = true });
	run_out rows;

	cr_assert_eq(one.ret, 0, "%s", one.err.msg);
	cr_assert(one.m.fitted & PF_FITTED_WINDOW);
	cr_assert(one.m.window_as_read);
	cr_assert_leq(one.m.memory_bytes, BUDGET);
	same_batches(&one, &two, "global, 1 and 2 threads");
	setenv("PODFEED_WINDOW", "rows", 1);
	rows = run(path, &(run_opts){ .threads = 2, .budget = 256 * MIB, .global = true,
				      .window = (uint32_t)one.m.shuffle_window });
	same_batches(&one, &rows, "global, as read, as rows");
}

/* The global shuffle's frame cache beside the window of records as read:
 * frames of ~12 records cut into slices of 4 are read once into the cache
 * and their slices copied into the window from it (several to a chunk);
 * the same batches as decoded rows, at 1 and 2 threads, with the cache
 * too small for a group (frames read again) and without it. */
Test(loader_window, global_shuffle_frame_cache_and_window)
{
	const char *path = dataset("lean", 0);
	run_opts o = { .threads = 1, .budget = 64 * MIB, .global = true, .window = 256 };
	run_out one = run(path, &o), two, small, none, rows;

	o.threads = 2;
	two = run(path, &o);
	o.frame_cache = 3;
	small = run(path, &o);
	o.frame_cache = PF_FRAME_CACHE_OFF;
	none = run(path, &o);
	cr_assert_eq(one.ret, 0, "%s", one.err.msg);
	cr_assert(one.m.window_as_read);
	cr_assert_gt(one.m.frame_cache_entries, 3);
	cr_assert_gt(one.m.frame_cache_hits, 0);
	cr_assert_gt(small.m.frame_cache_bypassed, 0);
	cr_assert_eq(none.m.frame_cache_entries, 0);
	same_batches(&one, &two, "global, cached, 1 and 2 threads");
	same_batches(&one, &small, "global, a cache of 3 frames");
	same_batches(&one, &none, "global, no cache");
	setenv("PODFEED_WINDOW", "rows", 1);
	o.frame_cache = 0;
	rows = run(path, &o);
	cr_assert(!rows.m.window_as_read);
	same_batches(&one, &rows, "global, as read, as rows");
}

/* A run stopped and resumed goes on bit for bit, on the same budget and
 * on another (a default window keeps the states' one: the budget alone
 * would fit another). */
Test(loader_window, resume_is_exact)
{
	const char *path = dataset("img", PAD);
	run_out whole = run(path, &(run_opts){ .threads = 2, .budget = BUDGET });
	pf_state_blob st;
	run_out first = run(path, &(run_opts){ .threads = 2, .budget = BUDGET, .max_steps = 150,
					       .save = &st });
	run_out rest = run(path, &(run_opts){ .threads = 1, .budget = BUDGET, .from = &st });
	run_out wide = run(path, &(run_opts){ .threads = 2, .budget = 256 * MIB, .from = &st });
	run_out fresh_wide = run(path, &(run_opts){ .threads = 2, .budget = 256 * MIB });

	cr_assert_eq(whole.ret, 0, "%s", whole.err.msg);
	cr_assert_eq(first.n, 150);
	cr_assert_eq(rest.ret, 0, "%s", rest.err.msg);
	cr_assert_eq(first.n + rest.n, whole.n);
	cr_assert(!memcmp(first.crc, whole.crc, first.n * sizeof(whole.crc[0])));
	cr_assert(!memcmp(rest.crc, whole.crc + first.n, rest.n * sizeof(whole.crc[0])));
	/* On 256 MiB the default 8192 fits; resumed there, the states'
	 * window is kept, epoch 2 too. */
	cr_assert_eq(fresh_wide.m.shuffle_window, 8192);
	cr_assert_eq(wide.ret, 0, "%s", wide.err.msg);
	cr_assert_eq(wide.m.shuffle_window, whole.m.shuffle_window);
	cr_assert(strstr(wide.tune.shuffle_window.why, "the states' window"), "%s",
		  wide.tune.shuffle_window.why);
	cr_assert_eq(wide.n, rest.n);
	cr_assert(!memcmp(wide.crc, rest.crc, rest.n * sizeof(rest.crc[0])));
	free((void *)st.data);
}

/* A window set that the budget cannot hold is refused naming the
 * largest that it can: that one runs, one host batch more does not. */
Test(loader_window, set_window_too_large_names_the_largest_that_fits)
{
	const char *path = dataset("img", PAD);
	run_out o = run(path, &(run_opts){ .threads = 2, .budget = BUDGET, .window = 8192 });
	const char *at;
	unsigned long fit;
	run_out ok, over;

	cr_assert_eq(o.ret, -ENOMEM);
	cr_assert(strstr(o.err.msg, "shuffle_window of 8192 records does not fit the memory "
			 "budget of 16 MiB"), "%s", o.err.msg);
	at = strstr(o.err.msg, "the largest window that fits is ");
	cr_assert_not_null(at, "%s", o.err.msg);
	fit = strtoul(at + strlen("the largest window that fits is "), NULL, 10);
	cr_assert_gt(fit, 0);
	cr_assert_eq(fit % HOST_BATCH, 0);
	ok = run(path, &(run_opts){ .threads = 2, .budget = BUDGET, .window = (uint32_t)fit,
				    .max_steps = 4 });
	cr_assert_eq(ok.ret, 0, "%s", ok.err.msg);
	cr_assert_eq(ok.m.shuffle_window, fit);
	cr_assert_leq(ok.m.memory_bytes, BUDGET);
	over = run(path, &(run_opts){ .threads = 2, .budget = BUDGET,
				      .window = (uint32_t)fit + HOST_BATCH });
	cr_assert_eq(over.ret, -ENOMEM, "%s", over.err.msg);
}

/* Elastic resume: two hosts stopped after 20 steps resume as one, every
 * record of the epoch once; the same batches as read and as decoded rows
 * (the states' window kept by both). */
static run_out run_host(const char *path, uint32_t host, uint32_t hosts, size_t budget,
			uint64_t max_steps, const pf_state_blob *from, size_t nfrom,
			pf_state_blob *save, int64_t *labels, size_t *nlabels)
{
	pf_loader_config cfg = { 0 };
	const char *paths[1] = { path };
	pf_loader *l;
	pf_batch *b;
	run_out out = { 0 };
	int ret;

	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.features = FEATURES;
	cfg.per_core_batch = HOST_BATCH / 2;
	cfg.cores_per_host = 2;
	cfg.host_index = host;
	cfg.num_hosts = hosts;
	cfg.seed = 3;
	cfg.shuffle = true;
	cfg.threads = 2;
	cfg.memory_budget = budget;
	cfg.max_steps = max_steps;
	cfg.resume = from;
	cfg.nresume = nfrom;
	out.ret = pf_loader_create(&l, &cfg, &out.err);
	if (out.ret)
		return out;
	while ((ret = pf_loader_next(l, &b)) == 1) {
		uint32_t crc = 0;

		for (uint32_t c = 0; c < b->cores; c++) {
			crc = pf_crc32c(crc, b->core[c].block, b->core[c].block_bytes);
			for (uint32_t r = 0; labels && r < b->per_core_batch; r++)
				labels[(*nlabels)++] = ((const int64_t *)b->core[c].tensors[1].data)[r];
		}
		out.crc[out.n++] = crc;
		pf_loader_release(l, b);
	}
	out.ret = ret;
	if (ret < 0)
		out.err = *pf_loader_last_error(l);
	pf_loader_get_metrics(l, &out.m);
	if (save) {
		size_t len;

		save->data = tu_save_state(l, &len);
		save->len = len;
	}
	pf_loader_free(l);
	return out;
}

Test(loader_window, elastic_resume_two_hosts_as_one)
{
	const char *path = dataset("img", PAD);
	static int64_t labels[NREC];
	size_t n = 0;
	pf_state_blob st[2];
	run_out h0 = run_host(path, 0, 2, BUDGET, 20, NULL, 0, &st[0], labels, &n);
	run_out h1 = run_host(path, 1, 2, BUDGET, 20, NULL, 0, &st[1], labels, &n);
	run_out one = run_host(path, 0, 1, BUDGET, 0, st, 2, NULL, labels, &n), rows;
	static uint8_t seen[NREC];

	cr_assert_eq(h0.ret, 0, "%s", h0.err.msg);
	cr_assert_eq(h1.ret, 0, "%s", h1.err.msg);
	cr_assert_eq(one.ret, 0, "%s", one.err.msg);
	cr_assert(h0.m.window_as_read && one.m.window_as_read);
	cr_assert(h0.m.fitted & PF_FITTED_WINDOW);
	/* Every record of the epoch at most once; under one global batch of
	 * the old hosts' not delivered. */
	for (size_t i = 0; i < n; i++) {
		cr_assert_lt(labels[i], NREC);
		cr_assert_eq(seen[labels[i]]++, 0, "record %lld twice", (long long)labels[i]);
	}
	cr_assert_gt(n, NREC - 2 * HOST_BATCH);
	setenv("PODFEED_WINDOW", "rows", 1);
	rows = run_host(path, 0, 1, 256 * MIB, 0, st, 2, NULL, NULL, NULL);
	same_batches(&one, &rows, "elastic, as read, as rows");
	free((void *)st[0].data);
	free((void *)st[1].data);
}
