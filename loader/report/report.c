/* SPDX-License-Identifier: Apache-2.0 */
/* Reports: a pf_report's sections (text and JSON made from the same
 * figures), the loader's section with its bottleneck verdict, and the
 * baseline passes beside it.  The regions' section is report_regions.c's,
 * the train and pod sections host/report.c's.  Machine output goes through
 * jansson only. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc_internal.h"
#include "common_internal.h"
#include "report_internal.h"

/* ------------------------------------------------------------------ */
/* The report                                                           */

typedef struct section {
	pf_report_kind kind;
	char *text;		/* lines, each ending in '\n' */
	char *json;		/* the members, without the braces ("" when none) */
} section;

struct pf_report {
	section sec[PF_SECTION_KINDS];
	size_t n;
	/* The loader's figures the baseline section is quoted against. */
	bool loader;
	double loader_seconds;
	uint64_t loader_decompressed;
};

int pf_report_create(pf_report **out)
{
	*out = pf_calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void pf_report_free(pf_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		pf_free(r->sec[i].text);
		pf_free(r->sec[i].json);
	}
	pf_free(r);
}

int pf_report_section(pf_report *r, pf_report_kind kind, pf_text *text, json_t *members,
		      bool bad, pf_error *err)
{
	static const char *const names[] = { "loader", "baseline", "regions", "train", "pod",
						    "series", "ladder", "sources" };
	char *json = NULL, *owned = NULL;
	int ret = -ENOMEM;

	for (size_t i = 0; i < r->n; i++)
		if (r->sec[i].kind == kind) {
			ret = pf_error_set(err, -EEXIST, PF_OFFSET_NONE, 0,
					   "the report has a %s section already", names[kind]);
			goto out;
		}
	if (!bad && !text->failed && members)
		json = pf_json_line(members);
	if (!json)
		goto nomem;
	/* "{...}": keep what is inside the braces. */
	json[strlen(json) - 1] = '\0';
	owned = pf_malloc(strlen(json));
	if (!owned)
		goto nomem;
	memcpy(owned, json + 1, strlen(json));
	r->sec[r->n++] = (section){ .kind = kind, .text = text->s ? text->s : NULL,
				    .json = owned };
	if (!text->s) {
		r->sec[r->n - 1].text = pf_malloc(1);
		if (!r->sec[r->n - 1].text) {
			r->n--;
			pf_free(owned);
			goto nomem;
		}
		r->sec[r->n - 1].text[0] = '\0';
	}
	text->s = NULL;
	ret = 0;
	goto out;
nomem:
	ret = pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
			   "out of memory for the report's %s section", names[kind]);
out:
	pf_free(json);
	pf_text_free(text);
	json_decref(members);
	return ret;
}

/* Append s to dst at *n within cap (as snprintf: *n counts it all). */
static void put(char *dst, size_t cap, size_t *n, const char *s)
{
	size_t len = strlen(s);

	if (*n < cap) {
		size_t room = cap - *n - 1;

		memcpy(dst + *n, s, len < room ? len : room);
	}
	*n += len;
}

int64_t pf_report_format(const pf_report *r, pf_report_output fmt, char *dst, size_t cap)
{
	size_t n = 0, members = 0;

	if (fmt == PF_REPORT_HTML)
		return pf_report_html(r, dst, cap);
	if (fmt != PF_REPORT_TEXT && fmt != PF_REPORT_JSON)
		return -EINVAL;

	if (fmt == PF_REPORT_JSON)
		put(dst, cap, &n, "{");
	for (size_t i = 0; i < r->n; i++) {
		if (fmt == PF_REPORT_TEXT) {
			put(dst, cap, &n, r->sec[i].text);
		} else if (r->sec[i].json[0]) {
			if (members++)
				put(dst, cap, &n, ",");
			put(dst, cap, &n, r->sec[i].json);
		}
	}
	if (fmt == PF_REPORT_JSON)
		put(dst, cap, &n, "}\n");
	if (cap)
		dst[n < cap ? n : cap - 1] = '\0';
	return (int64_t)n;
}

int pf_report_print(const pf_report *r, pf_report_output fmt, FILE *f)
{
	int64_t n = pf_report_format(r, fmt, NULL, 0);
	char *s;
	int ret = 0;

	if (n < 0)
		return (int)n;
	s = pf_malloc((size_t)n + 1);
	if (!s)
		return -ENOMEM;
	if (pf_report_format(r, fmt, s, (size_t)n + 1) != n) {
		pf_free(s);
		return -ENOMEM;
	}
	if (fwrite(s, 1, (size_t)n, f) != (size_t)n || fflush(f) != 0)
		ret = -EIO;
	pf_free(s);
	return ret;
}

/* ------------------------------------------------------------------ */
/* The loader's section                                                 */

/* The steady window's floor: a dataset read in a few batches that were
 * all prefetched gave 84 M records/s over too short a window. */
#define STEADY_MIN_BATCHES 10u
#define STEADY_MIN_S 0.1
#define EMPTY_NAMED 4u		/* empty files named in the text */

static double mb(uint64_t bytes)
{
	return (double)bytes / 1e6;
}

void pf_loader_verdict_compute(const pf_loader_metrics *m, const pf_run_info *run,
			       pf_loader_verdict *out)
{
	double wall_ns = run->seconds * 1e9;
	unsigned dt = m->decode_threads ? m->decode_threads : 1;

	memset(out, 0, sizeof(*out));
	out->next_p50_us = pf_hist_quantile_us(m->next_hist, 0.50);
	out->next_p90_us = pf_hist_quantile_us(m->next_hist, 0.90);
	out->next_p99_us = pf_hist_quantile_us(m->next_hist, 0.99);
	/* Busy fraction per thread of the stage: the I/O stage is one
	 * thread, decode is decode_threads. */
	out->io_busy = wall_ns > 0 ? (double)m->io.busy_ns / wall_ns : 0;
	out->decode_busy = wall_ns > 0 ? (double)m->decode.busy_ns / wall_ns / dt : 0;
	out->consumer_wait = wall_ns > 0 ? (double)m->next_wait_ns / wall_ns : 0;
	out->bottleneck = out->decode_busy > out->io_busy ? "decode" : "io";
	/* Decoding images is most of a decode thread's work when there are
	 * images: the verdict names that stage. */
	if (out->decode_busy > out->io_busy && m->image_decode_ns * 2 > m->decode.busy_ns)
		out->bottleneck = "image decode";
	/* Records handed out after the first batch, over the time from the
	 * first batch's return to the last one's: start-up (index reads,
	 * pools, the pipeline's fill) and pf_loader_free() left out. */
	if (run->steady_batches < STEADY_MIN_BATCHES)
		out->steady_na = "fewer than 10 batches after the first";
	else if (run->steady_seconds < STEADY_MIN_S)
		out->steady_na = "under 100 ms from the first batch to the last";
	else
		out->steady_records_per_s = (double)run->steady_records / run->steady_seconds;
}

/* The names of the files of 0 bytes among files (a compressed one by name
 * is damaged data, which the loader has already failed on or dropped;
 * a dataset rarely means to hold one).  No stat when the loader's plan
 * of the same files found none: on a far bucket a stat is a round trip
 * each (and those there are, all at once).  @return how many, or
 * SIZE_MAX out of memory. */
static size_t count_empty(const pf_loader_metrics *m, const pf_run_info *run, bool *empty)
{
	pf_stat_result *st;
	size_t n = 0;

	if (m->dataset_files == run->nfiles && m->dataset_files && !m->empty_files)
		return 0;
	if (!run->files || !run->nfiles)
		return 0;
	st = pf_calloc(run->nfiles, sizeof(*st));
	if (!st || pf_stat_many(run->files, run->nfiles, st) < 0) {
		pf_free(st);
		return SIZE_MAX;
	}
	for (size_t i = 0; i < run->nfiles; i++) {
		empty[i] = !st[i].error && S_ISREG(st[i].mode) && !st[i].size;
		n += empty[i];
	}
	pf_free(st);
	return n;
}

/* What the loader ran with (pf_tuning), a line or a member each. */
static const struct tuning_row {
	const char *name, *json;
	size_t off;
} tuning_rows[] = {
	{ "threads", "threads", offsetof(pf_tuning, threads) },
	{ "io_depth", "io_depth", offsetof(pf_tuning, io_depth) },
	{ "prefetch", "prefetch", offsetof(pf_tuning, prefetch) },
	/* 0.8: sized at create; a loader that says nothing of them (why
	 * empty) has no line. */
	{ "window", "shuffle_window", offsetof(pf_tuning, shuffle_window) },
	{ "frame_cache", "frame_cache", offsetof(pf_tuning, frame_cache) },
};
#define TUNING_ROWS (sizeof(tuning_rows) / sizeof(tuning_rows[0]))

static const pf_tuning_choice *tuning_at(const pf_tuning *t, size_t i)
{
	return (const pf_tuning_choice *)((const char *)t + tuning_rows[i].off);
}

/* The shuffle window: the one the loader ran with (a default it fitted
 * to the budget), else the config's; 0 without shuffle. */
static uint64_t window_of(const pf_loader_config *cfg, const pf_loader_metrics *m)
{
	if (!cfg->shuffle && cfg->shuffle_mode != PF_SHUFFLE_GLOBAL)
		return 0;
	if (m->shuffle_window)
		return m->shuffle_window;
	return cfg->shuffle_window ? cfg->shuffle_window : PF_LOADER_WINDOW_DEFAULT;
}

/* The reads in flight: what the loader ran with, else the config's. */
static unsigned io_depth(const pf_loader_config *cfg, const pf_run_info *run)
{
	if (run->tuning)
		return run->tuning->io_depth.value;
	return cfg->io_depth ? cfg->io_depth : PF_LOADER_IO_DEPTH_DEFAULT;
}


/* ------------------------------------------------------------------ */
/* The first batch and what it waited for                               */

static uint64_t minus0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* Opening the dataset: its phases, one after the other. */
static uint64_t open_ns(const pf_loader_metrics *m)
{
	return m->open_manifest_ns + m->open_index_ns + m->open_count_ns + m->open_exchange_ns;
}

/* The first batch split: opening the dataset (manifest, index tails,
 * counting stream files, the hosts' exchange), the rest of
 * pf_loader_create() (pools, threads), and the first reads (from the end
 * of create to the first batch: the shards its first step needs read and
 * decoded). */
static void first_batch_text(pf_text *t, const pf_loader_metrics *m)
{
	pf_text_printf(t, "first batch %.1f ms: opening the dataset %.1f ms (manifest %.1f, index "
		       "tails %.1f, counting stream files %.1f, the hosts' exchange %.1f), loader "
		       "start %.1f ms, first reads %.1f ms\n", (double)m->first_batch_ns * 1e-6,
		       (double)open_ns(m) * 1e-6, (double)m->open_manifest_ns * 1e-6,
		       (double)m->open_index_ns * 1e-6, (double)m->open_count_ns * 1e-6,
		       (double)m->open_exchange_ns * 1e-6,
		       (double)minus0(m->create_ns, open_ns(m)) * 1e-6,
		       (double)minus0(m->first_batch_ns, m->create_ns) * 1e-6);
	pf_text_printf(t, "open        %llu %s opened to plan", (unsigned long long)m->open_files,
		       m->open_manifest_ns ? "file (the manifest)" : "files (every shard)");
	if (m->open_count_files)
		pf_text_printf(t, "; %llu stream files counted here (%.1f MB read, %.1f MB "
			       "decompressed)", (unsigned long long)m->open_count_files,
			       mb(m->open_count_bytes), mb(m->open_count_decompressed));
	pf_text_printf(t, "\n");
}

/* "first_batch_seconds", and its parts as first_batch_text() says them. */
static void first_batch_json(json_t *o, const pf_loader_metrics *m, bool *bad)
{
	json_t *sub = json_object();

	pf_json_put(o, "first_batch_seconds", pf_json_num((double)m->first_batch_ns * 1e-9), bad);
	pf_json_put(sub, "seconds", pf_json_num((double)open_ns(m) * 1e-9), bad);
	pf_json_put(sub, "manifest_seconds", pf_json_num((double)m->open_manifest_ns * 1e-9), bad);
	pf_json_put(sub, "index_seconds", pf_json_num((double)m->open_index_ns * 1e-9), bad);
	pf_json_put(sub, "count_seconds", pf_json_num((double)m->open_count_ns * 1e-9), bad);
	pf_json_put(sub, "exchange_seconds", pf_json_num((double)m->open_exchange_ns * 1e-9), bad);
	pf_json_put(sub, "files", pf_json_u64(m->open_files), bad);
	pf_json_put(sub, "count_files", pf_json_u64(m->open_count_files), bad);
	pf_json_put(sub, "count_bytes", pf_json_u64(m->open_count_bytes), bad);
	pf_json_put(sub, "count_decompressed", pf_json_u64(m->open_count_decompressed), bad);
	pf_json_put(o, "open", sub, bad);
	pf_json_put(o, "loader_start_seconds",
		    pf_json_num((double)minus0(m->create_ns, open_ns(m)) * 1e-9), bad);
	pf_json_put(o, "first_reads_seconds",
		    pf_json_num((double)minus0(m->first_batch_ns, m->create_ns) * 1e-9), bad);
}

/* a / b, 0 for b 0. */
static double pack_ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

static void loader_text(pf_text *t, const pf_loader_config *cfg, const pf_loader_metrics *m,
			const pf_run_info *run, const pf_loader_verdict *v, const bool *empty,
			size_t nempty)
{
	double s = run->seconds;
	uint64_t hosts = cfg->num_hosts ? cfg->num_hosts : 1;
	uint64_t cores = cfg->cores_per_host ? cfg->cores_per_host : 1;
	uint64_t budget = cfg->memory_budget ? cfg->memory_budget : PF_LOADER_BUDGET_DEFAULT;

	if (run->files)
		pf_text_printf(t, "files       %zu\n", run->nfiles);
	pf_text_printf(t, "features    %s\n", cfg->features ? cfg->features : "");
	pf_text_printf(t, "topology    host %u of %llu, %llu cores x %u per-core batch"
		       " (global batch %llu)\n", cfg->host_index, (unsigned long long)hosts,
		       (unsigned long long)cores, cfg->per_core_batch,
		       (unsigned long long)(cfg->per_core_batch * cores * hosts));
	if (cfg->shuffle_mode == PF_SHUFFLE_GLOBAL)
		pf_text_printf(t, "order       shuffled globally: slices of frames permuted over "
			       "the whole dataset, records in a window of %u, seed %llu; frame "
			       "cache %llu frames (%.1f MiB): %llu slices served from it, %llu "
			       "frames read into it, %llu replaced, %llu slices read outside it\n",
			       (unsigned)window_of(cfg, m),
			       (unsigned long long)cfg->seed,
			       (unsigned long long)m->frame_cache_entries,
			       (double)m->frame_cache_bytes / 1048576.0,
			       (unsigned long long)m->frame_cache_hits,
			       (unsigned long long)m->frame_cache_loads,
			       (unsigned long long)m->frame_cache_evictions,
			       (unsigned long long)m->frame_cache_bypassed);
	else if (cfg->shuffle)
		pf_text_printf(t, "order       shuffled: frames permuted, records in a window "
			       "of %u, seed %llu\n", (unsigned)window_of(cfg, m),
			       (unsigned long long)cfg->seed);
	else
		pf_text_printf(t, "order       the files' order (not shuffled)\n");
	pf_text_printf(t, "records     %llu in %llu steps (%llu steps an epoch, %llu records "
		       "in the data)\n", (unsigned long long)m->records,
		       (unsigned long long)m->steps, (unsigned long long)m->steps_per_epoch,
		       (unsigned long long)m->records_per_epoch);
	pf_text_printf(t, "time        %.3f s%s: %.0f records/s, %.1f batches/s\n", s,
		       run->runs > 1 ? " (median)" : "", (double)m->records / s,
		       (double)m->steps / s);
	if (v->steady_na)
		pf_text_printf(t, "steady      n/a (%s)\n", v->steady_na);
	else
		pf_text_printf(t, "steady      %.0f records/s from the first batch to the last\n",
			       v->steady_records_per_s);
	pf_text_printf(t, "read        %.1f MB compressed (%.1f MB/s) in %llu reads, %.1f MB "
		       "produced (%.1f MB/s)\n", mb(m->bytes_read), mb(m->bytes_read) / s,
		       (unsigned long long)m->io_requests, mb(m->bytes_decompressed),
		       mb(m->bytes_decompressed) / s);
	pf_text_printf(t, "stages      busy per thread: io %.0f%% (1 thread), decode %.0f%% (%u "
		       "threads); consumer waited %.0f%%\n", v->io_busy * 100,
		       v->decode_busy * 100, m->decode_threads, v->consumer_wait * 100);
	if (m->images)
		pf_text_printf(t, "images      %llu decoded (%llu upscaled: box smaller than the "
			       "output), image decode %.0f%% of decode's busy time\n",
			       (unsigned long long)m->images,
			       (unsigned long long)m->images_upscaled,
			       m->decode.busy_ns ? 100.0 * (double)m->image_decode_ns /
						   (double)m->decode.busy_ns : 0.0);
	pf_text_printf(t, "bottleneck  %s\n", v->bottleneck);
	pf_text_printf(t, "next()      p50 %.0f us, p90 %.0f us, p99 %.0f us\n",
		       v->next_p50_us, v->next_p90_us, v->next_p99_us);
	first_batch_text(t, m);
	pf_text_printf(t, "memory      peak RSS %.1f MiB; budget %llu MiB, pools %.1f MiB",
		       (double)run->peak_rss_bytes / 1048576.0,
		       (unsigned long long)(budget >> 20), (double)m->memory_bytes / 1048576.0);
	if (m->window_as_read)
		pf_text_printf(t, "; the window's records as read %.1f MiB (at most %.1f MiB "
			       "at once)", (double)m->window_bytes / 1048576.0,
			       (double)m->window_peak_bytes / 1048576.0);
	pf_text_printf(t, "\n");
	pf_text_printf(t, "remainder   %llu records dropped, %llu wrapped\n",
		       (unsigned long long)m->remainder_dropped,
		       (unsigned long long)m->remainder_wrapped);
	if (m->skipped_steps && cfg->pack_length)
		pf_text_printf(t, "skipped     %llu packed steps from global step %llu "
			       "(skip_steps): %llu pieces of records, %llu values, not read\n",
			       (unsigned long long)m->skipped_steps,
			       (unsigned long long)m->skipped_from,
			       (unsigned long long)m->skipped_records,
			       (unsigned long long)m->skipped_tokens);
	else if (m->skipped_steps)
		pf_text_printf(t, "skipped     %llu steps from global step %llu (skip_steps): "
			       "%llu records, not read\n", (unsigned long long)m->skipped_steps,
			       (unsigned long long)m->skipped_from,
			       (unsigned long long)m->skipped_records);
	if (cfg->pack_length)
		pf_text_printf(t, "packing     %s, L %u: %llu rows, efficiency %.4f (values / "
			       "slots), %.2f records a row, %.0f values/s; truncated %llu "
			       "records (%llu values), %llu empty, %llu rows dropped (%llu "
			       "records, %llu tokens in them); planned "
			       "from %s (this host read %llu index tails, %llu files whole; the "
			       "pod exchanged %llu bytes of lengths); %llu records written into "
			       "their rows by the decode threads\n",
			       pf_pack_mode_name(cfg->pack_mode) ? pf_pack_mode_name(cfg->pack_mode)
								 : "?",
			       cfg->pack_length, (unsigned long long)m->pack_rows,
			       pack_ratio(m->pack_values, m->pack_slots),
			       pack_ratio(m->pack_segments, m->pack_rows),
			       (double)m->pack_values / s,
			       (unsigned long long)m->pack_truncated_records,
			       (unsigned long long)m->pack_truncated_values,
			       (unsigned long long)m->pack_empty_records,
			       (unsigned long long)m->pack_rows_dropped,
			       (unsigned long long)m->pack_dropped_records,
			       (unsigned long long)m->pack_dropped_tokens,
			       m->pack_lengths_from_index ? "the shards' indexes" : "the records",
			       (unsigned long long)m->pack_lengths_tails,
			       (unsigned long long)m->pack_lengths_files,
			       (unsigned long long)m->pack_lengths_exchanged,
			       (unsigned long long)m->pack_direct_records);
	if (nempty) {
		size_t named = 0;

		pf_text_printf(t, "empty       %zu file%s of 0 bytes, 0 records:", nempty,
			       nempty == 1 ? "" : "s");
		for (size_t i = 0; i < run->nfiles && named < EMPTY_NAMED; i++)
			if (empty[i])
				pf_text_printf(t, "%s %s", named++ ? "," : "", run->files[i]);
		if (nempty > named)
			pf_text_printf(t, " and %zu more", nempty - named);
		pf_text_printf(t, "\n");
	}
	if (cfg->on_corrupt == PF_CORRUPT_SKIP || m->corrupt_drops) {
		/* A unit whose records cannot be counted makes the loss
		 * unknown: never "0 lost" where the data was not read. */
		pf_text_printf(t, "corrupt     %llu units dropped (records lost: ",
			       (unsigned long long)m->corrupt_drops);
		if (m->corrupt_unknown && m->corrupt_records)
			pf_text_printf(t, "unknown, at least %llu (%llu unit%s of unknown size); ",
				       (unsigned long long)m->corrupt_records,
				       (unsigned long long)m->corrupt_unknown,
				       m->corrupt_unknown == 1 ? "" : "s");
		else if (m->corrupt_unknown)
			pf_text_printf(t, "unknown (%llu unit%s of unknown size); ",
				       (unsigned long long)m->corrupt_unknown,
				       m->corrupt_unknown == 1 ? "" : "s");
		else
			pf_text_printf(t, "%llu; ", (unsigned long long)m->corrupt_records);
		pf_text_printf(t, "%llu bytes skipped), %llu empty rows handed out%s%s\n",
			       (unsigned long long)m->corrupt_bytes, (unsigned long long)m->holes,
			       cfg->quarantine ? "; logged to " : "",
			       cfg->quarantine ? cfg->quarantine : "");
	}
	for (size_t i = 0; run->tuning && i < TUNING_ROWS; i++) {
		const pf_tuning_choice *c = tuning_at(run->tuning, i);

		if (!c->why[0])
			continue;
		pf_text_printf(t, "%-11s %u (%s): %s\n", tuning_rows[i].name, c->value,
			       c->automatic ? "auto" : "set", c->why);
	}
	pf_text_printf(t, "io          %s, depth %u", m->io_backend ? m->io_backend : "none",
		       io_depth(cfg, run));
	if (cfg->direct_io)
		pf_text_printf(t, ", O_DIRECT on %u of %zu files (aligned indexed shards only)",
			       m->files_direct, run->nfiles);
	if (m->io_retries || m->io_faults || m->io_timeouts || m->io_short_reads)
		pf_text_printf(t, "; %llu retries, %llu faults injected, %llu timeouts, %llu "
			       "short reads", (unsigned long long)m->io_retries,
			       (unsigned long long)m->io_faults, (unsigned long long)m->io_timeouts,
			       (unsigned long long)m->io_short_reads);
	pf_text_printf(t, "\n");
}

static json_t *loader_json(const pf_loader_config *cfg, const pf_loader_metrics *m,
			   const pf_run_info *run, const pf_loader_verdict *v, const bool *empty,
			   bool *bad)
{
	double s = run->seconds;
	uint64_t hosts = cfg->num_hosts ? cfg->num_hosts : 1;
	uint64_t cores = cfg->cores_per_host ? cfg->cores_per_host : 1;
	uint64_t budget = cfg->memory_budget ? cfg->memory_budget : PF_LOADER_BUDGET_DEFAULT;
	json_t *o = json_object(), *sub;

	pf_json_put(o, "records", pf_json_u64(m->records), bad);
	pf_json_put(o, "steps", pf_json_u64(m->steps), bad);
	pf_json_put(o, "seconds", pf_json_num(s), bad);
	pf_json_put(o, "records_per_s", pf_json_num((double)m->records / s), bad);
	pf_json_put(o, "batches_per_s", pf_json_num((double)m->steps / s), bad);
	if (v->steady_na) {
		pf_json_put(o, "steady_records_per_s", json_null(), bad);
		pf_json_put(o, "steady_na", pf_json_str(v->steady_na), bad);
	} else {
		pf_json_put(o, "steady_records_per_s", pf_json_num(v->steady_records_per_s), bad);
	}
	pf_json_put(o, "bytes_read", pf_json_u64(m->bytes_read), bad);
	pf_json_put(o, "bytes_decompressed", pf_json_u64(m->bytes_decompressed), bad);
	pf_json_put(o, "mb_per_s_read", pf_json_num(mb(m->bytes_read) / s), bad);
	pf_json_put(o, "mb_per_s_decompressed", pf_json_num(mb(m->bytes_decompressed) / s), bad);
	pf_json_put(o, "bottleneck", pf_json_str(v->bottleneck), bad);
	sub = json_object();
	pf_json_put(sub, "io", pf_json_num(v->io_busy), bad);
	pf_json_put(sub, "decode", pf_json_num(v->decode_busy), bad);
	pf_json_put(sub, "consumer_wait", pf_json_num(v->consumer_wait), bad);
	pf_json_put(o, "stages", sub, bad);
	if (m->images) {
		sub = json_object();
		pf_json_put(sub, "decoded", pf_json_u64(m->images), bad);
		pf_json_put(sub, "upscaled", pf_json_u64(m->images_upscaled), bad);
		pf_json_put(sub, "decode_ns", pf_json_u64(m->image_decode_ns), bad);
		pf_json_put(sub, "scratch_bytes", pf_json_u64(m->image_scratch_bytes), bad);
		pf_json_put(o, "images", sub, bad);
	}
	sub = json_object();
	pf_json_put(sub, "p50", pf_json_num(v->next_p50_us), bad);
	pf_json_put(sub, "p90", pf_json_num(v->next_p90_us), bad);
	pf_json_put(sub, "p99", pf_json_num(v->next_p99_us), bad);
	pf_json_put(o, "next_latency_us", sub, bad);
	pf_json_put(o, "first_batch_ms", pf_json_num(run->first_batch_ms), bad);
	first_batch_json(o, m, bad);
	pf_json_put(o, "peak_rss_bytes", pf_json_u64(run->peak_rss_bytes), bad);
	pf_json_put(o, "memory_budget_bytes", pf_json_u64(budget), bad);
	pf_json_put(o, "memory_pool_bytes", pf_json_u64(m->memory_bytes), bad);
	pf_json_put(o, "remainder_dropped", pf_json_u64(m->remainder_dropped), bad);
	pf_json_put(o, "remainder_wrapped", pf_json_u64(m->remainder_wrapped), bad);
	if (m->skipped_steps) {
		sub = json_object();
		pf_json_put(sub, "steps", pf_json_u64(m->skipped_steps), bad);
		pf_json_put(sub, "from_step", pf_json_u64(m->skipped_from), bad);
		pf_json_put(sub, "records", pf_json_u64(m->skipped_records), bad);
		pf_json_put(sub, "tokens", pf_json_u64(m->skipped_tokens), bad);
		pf_json_put(o, "skipped", sub, bad);
	}
	if (cfg->pack_length) {
		const char *mode = pf_pack_mode_name(cfg->pack_mode);

		sub = json_object();
		pf_json_put(sub, "mode", pf_json_str(mode ? mode : "?"), bad);
		pf_json_put(sub, "length", pf_json_u64(cfg->pack_length), bad);
		pf_json_put(sub, "rows", pf_json_u64(m->pack_rows), bad);
		pf_json_put(sub, "slots", pf_json_u64(m->pack_slots), bad);
		pf_json_put(sub, "values", pf_json_u64(m->pack_values), bad);
		pf_json_put(sub, "efficiency", pf_json_num(pack_ratio(m->pack_values, m->pack_slots)),
			    bad);
		pf_json_put(sub, "records_per_row",
			    pf_json_num(pack_ratio(m->pack_segments, m->pack_rows)), bad);
		pf_json_put(sub, "values_per_s", pf_json_num((double)m->pack_values / s), bad);
		pf_json_put(sub, "truncated_records", pf_json_u64(m->pack_truncated_records), bad);
		pf_json_put(sub, "truncated_values", pf_json_u64(m->pack_truncated_values), bad);
		pf_json_put(sub, "empty_records", pf_json_u64(m->pack_empty_records), bad);
		pf_json_put(sub, "rows_dropped", pf_json_u64(m->pack_rows_dropped), bad);
		pf_json_put(sub, "dropped_records", pf_json_u64(m->pack_dropped_records), bad);
		pf_json_put(sub, "dropped_tokens", pf_json_u64(m->pack_dropped_tokens), bad);
		pf_json_put(sub, "lengths_from_index", pf_json_u64(m->pack_lengths_from_index),
			    bad);
		pf_json_put(sub, "lengths_tails", pf_json_u64(m->pack_lengths_tails), bad);
		pf_json_put(sub, "lengths_files", pf_json_u64(m->pack_lengths_files), bad);
		pf_json_put(sub, "lengths_exchanged", pf_json_u64(m->pack_lengths_exchanged), bad);
		pf_json_put(sub, "direct_records", pf_json_u64(m->pack_direct_records), bad);
		pf_json_put(o, "packing", sub, bad);
	}
	if (cfg->shuffle_mode == PF_SHUFFLE_GLOBAL) {
		sub = json_object();
		pf_json_put(sub, "entries", pf_json_u64(m->frame_cache_entries), bad);
		pf_json_put(sub, "bytes", pf_json_u64(m->frame_cache_bytes), bad);
		pf_json_put(sub, "hits", pf_json_u64(m->frame_cache_hits), bad);
		pf_json_put(sub, "loads", pf_json_u64(m->frame_cache_loads), bad);
		pf_json_put(sub, "evictions", pf_json_u64(m->frame_cache_evictions), bad);
		pf_json_put(sub, "bypassed", pf_json_u64(m->frame_cache_bypassed), bad);
		pf_json_put(o, "frame_cache", sub, bad);
	}
	sub = json_object();
	pf_json_put(sub, "drops", pf_json_u64(m->corrupt_drops), bad);
	/* null while some unit's records are unknown; the known ones apart */
	pf_json_put(sub, "records_lost", m->corrupt_unknown ? json_null()
				       : pf_json_u64(m->corrupt_records), bad);
	pf_json_put(sub, "records_lost_known", pf_json_u64(m->corrupt_records), bad);
	pf_json_put(sub, "units_unknown", pf_json_u64(m->corrupt_unknown), bad);
	pf_json_put(sub, "bytes_skipped", pf_json_u64(m->corrupt_bytes), bad);
	pf_json_put(sub, "holes", pf_json_u64(m->holes), bad);
	pf_json_put(o, "corrupt", sub, bad);
	pf_json_put(o, "io_backend", pf_json_str(m->io_backend ? m->io_backend : "none"), bad);
	pf_json_put(o, "io_requests", pf_json_u64(m->io_requests), bad);
	pf_json_put(o, "io_retries", pf_json_u64(m->io_retries), bad);
	pf_json_put(o, "io_faults_injected", pf_json_u64(m->io_faults), bad);
	pf_json_put(o, "io_timeouts", pf_json_u64(m->io_timeouts), bad);
	pf_json_put(o, "io_short_reads", pf_json_u64(m->io_short_reads), bad);
	pf_json_put(o, "files_direct", pf_json_u64(m->files_direct), bad);
	pf_json_put(o, "io_depth", pf_json_u64(io_depth(cfg, run)), bad);
	pf_json_put(o, "threads", pf_json_u64(m->decode_threads), bad);
	if (run->tuning) {
		sub = json_object();
		for (size_t i = 0; i < TUNING_ROWS; i++) {
			const pf_tuning_choice *c = tuning_at(run->tuning, i);
			json_t *e;

			if (!c->why[0])
				continue;
			e = json_object();
			pf_json_put(e, "value", pf_json_u64(c->value), bad);
			pf_json_put(e, "auto", pf_json_bool(c->automatic), bad);
			pf_json_put(e, "measured", pf_json_bool(c->measured), bad);
			pf_json_put(e, "why", pf_json_str(c->why), bad);
			pf_json_put(sub, tuning_rows[i].json, e, bad);
		}
		pf_json_put(o, "tuning", sub, bad);
	}
	if (run->files) {
		pf_json_put(o, "files", pf_json_u64(run->nfiles), bad);
		sub = json_array();
		for (size_t i = 0; i < run->nfiles; i++)
			if (empty[i] && json_array_append_new(sub, pf_json_str(run->files[i])))
				*bad = true;
		pf_json_put(o, "empty_files", sub, bad);
	}
	pf_json_put(o, "features", pf_json_str(cfg->features ? cfg->features : ""), bad);
	pf_json_put(o, "records_per_epoch", pf_json_u64(m->records_per_epoch), bad);
	pf_json_put(o, "steps_per_epoch", pf_json_u64(m->steps_per_epoch), bad);
	pf_json_put(o, "repeat", pf_json_u64(run->runs ? run->runs : 1), bad);
	pf_json_put(o, "shuffle", pf_json_bool(cfg->shuffle ||
						 cfg->shuffle_mode == PF_SHUFFLE_GLOBAL), bad);
	pf_json_put(o, "shuffle_mode", pf_json_str(cfg->shuffle_mode == PF_SHUFFLE_GLOBAL ?
						   "global" : cfg->shuffle ? "window" : "none"),
		    bad);
	pf_json_put(o, "shuffle_window", pf_json_u64(window_of(cfg, m)), bad);
	pf_json_put(o, "window_as_read", pf_json_bool(m->window_as_read), bad);
	pf_json_put(o, "window_bytes", pf_json_u64(m->window_bytes), bad);
	pf_json_put(o, "window_peak_bytes", pf_json_u64(m->window_peak_bytes), bad);
	pf_json_put(o, "fitted", pf_json_u64(m->fitted), bad);
	pf_json_put(o, "seed", pf_json_u64(cfg->seed), bad);
	sub = json_object();
	pf_json_put(sub, "num_hosts", pf_json_u64(hosts), bad);
	pf_json_put(sub, "host_index", pf_json_u64(cfg->host_index), bad);
	pf_json_put(sub, "cores", pf_json_u64(cores), bad);
	pf_json_put(sub, "per_core_batch", pf_json_u64(cfg->per_core_batch), bad);
	pf_json_put(sub, "global_batch", pf_json_u64(cfg->per_core_batch * cores * hosts), bad);
	pf_json_put(o, "topology", sub, bad);
	return o;
}

int pf_report_add_loader(pf_report *r, const pf_loader_config *cfg,
			 const pf_loader_metrics *m, const pf_run_info *run, pf_error *err)
{
	pf_loader_verdict v;
	pf_text t = { 0 };
	bool bad = false, *empty;
	size_t nempty;
	int ret;

	pf_error_clear(err);
	if (!(run->seconds > 0))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the run's seconds must be above 0 (%g)", run->seconds);
	empty = pf_calloc(run->files && run->nfiles ? run->nfiles : 1, sizeof(*empty));
	if (!empty)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory for the report's loader section");
	nempty = count_empty(m, run, empty);
	if (nempty == SIZE_MAX) {
		pf_free(empty);
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory for the report's loader section");
	}
	pf_loader_verdict_compute(m, run, &v);
	loader_text(&t, cfg, m, run, &v, empty, nempty);
	ret = pf_report_section(r, PF_SECTION_LOADER, &t, loader_json(cfg, m, run, &v, empty,
								       &bad), bad, err);
	pf_free(empty);
	if (ret == 0) {
		r->loader = true;
		r->loader_seconds = run->seconds;
		r->loader_decompressed = m->bytes_decompressed;
	}
	return ret;
}

/* ------------------------------------------------------------------ */
/* The baseline passes                                                  */

/* The loader's decompressed MB/s over a pass's, on the same kind of
 * bytes. */
static double ratio(const pf_report *r, const pf_baseline *b, double pass_seconds)
{
	double loader = (double)r->loader_decompressed / r->loader_seconds;
	double pass = (double)b->bytes_decompressed / pass_seconds;

	return pass > 0 ? loader / pass : 0;
}

int pf_report_add_baseline(pf_report *r, const pf_baseline *b, pf_error *err)
{
	pf_text t = { 0 };
	json_t *o, *sub;
	bool bad = false, decode = b->decode_seconds > 0;
	double bound = 0, bound_mb;

	pf_error_clear(err);
	if (!r->loader)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the baseline is quoted against the loader: add its "
				    "section first");
	if (!(b->read_seconds > 0) || !(b->decompress_seconds > 0) || !(b->decode_seconds >= 0))
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "a pass's seconds must be above 0 (read %g, decompress %g; "
				    "decode %g, 0 when not run)", b->read_seconds,
				    b->decompress_seconds, b->decode_seconds);
	if (decode && !b->decode_bytes)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "the decode pass decoded no bytes");
	/* Both stages on the same threads, one after the other: a record's
	 * times add.  The decode rate is over the bytes it decoded; the
	 * bound is the time the whole data takes at both rates. */
	if (decode)
		bound = b->decompress_seconds +
			b->decode_seconds * (double)b->bytes_decompressed / (double)b->decode_bytes;
	bound_mb = decode ? mb(b->bytes_decompressed) / bound : 0;
	pf_text_printf(&t, "baseline    %llu indexed files, %llu frames, %.1f MB -> %.1f MB, %u "
		       "threads\n", (unsigned long long)b->files, (unsigned long long)b->frames,
		       mb(b->bytes), mb(b->bytes_decompressed), b->threads);
	pf_text_printf(&t, "  read        %.3f s: %.1f MB/s read (%.1f MB/s "
		       "decompressed-equivalent), %s\n", b->read_seconds,
		       mb(b->bytes) / b->read_seconds, mb(b->bytes_decompressed) / b->read_seconds,
		       b->io_backend ? b->io_backend : "none");
	pf_text_printf(&t, "  decompress  %.3f s: %.1f MB/s decompressed\n", b->decompress_seconds,
		       mb(b->bytes_decompressed) / b->decompress_seconds);
	if (decode) {
		pf_text_printf(&t, "  decode      %.3f s: %.1f MB/s decompressed, %.0f records/s "
			       "(%.1f MB of frames decompressed beforehand)\n", b->decode_seconds,
			       mb(b->decode_bytes) / b->decode_seconds,
			       (double)b->decode_records / b->decode_seconds, mb(b->decode_bytes));
		pf_text_printf(&t, "  bound       %.1f MB/s decompressed: 1 / (1/decompress + "
			       "1/decode), %u threads each doing both\n", bound_mb, b->threads);
		pf_text_printf(&t, "  loader      %.1f MB/s decompressed: %.2fx the read pass, %.2fx "
			       "the decompress pass, %.2fx the bound\n",
			       mb(r->loader_decompressed) / r->loader_seconds,
			       ratio(r, b, b->read_seconds), ratio(r, b, b->decompress_seconds),
			       ratio(r, b, bound));
	} else {
		pf_text_printf(&t, "  loader      %.1f MB/s decompressed: %.2fx the read pass, "
			       "%.2fx the decompress pass\n",
			       mb(r->loader_decompressed) / r->loader_seconds,
			       ratio(r, b, b->read_seconds), ratio(r, b, b->decompress_seconds));
	}
	o = json_object();
	sub = json_object();
	pf_json_put(sub, "read_seconds", pf_json_num(b->read_seconds), &bad);
	pf_json_put(sub, "decompress_seconds", pf_json_num(b->decompress_seconds), &bad);
	pf_json_put(sub, "read_mb_per_s", pf_json_num(mb(b->bytes) / b->read_seconds), &bad);
	pf_json_put(sub, "decompress_mb_per_s",
		    pf_json_num(mb(b->bytes_decompressed) / b->decompress_seconds), &bad);
	pf_json_put(sub, "bytes", pf_json_u64(b->bytes), &bad);
	pf_json_put(sub, "bytes_decompressed", pf_json_u64(b->bytes_decompressed), &bad);
	pf_json_put(sub, "files", pf_json_u64(b->files), &bad);
	pf_json_put(sub, "frames", pf_json_u64(b->frames), &bad);
	pf_json_put(sub, "threads", pf_json_u64(b->threads), &bad);
	pf_json_put(sub, "io_backend", pf_json_str(b->io_backend ? b->io_backend : "none"), &bad);
	if (decode) {
		pf_json_put(sub, "decode_seconds", pf_json_num(b->decode_seconds), &bad);
		pf_json_put(sub, "decode_mb_per_s",
			    pf_json_num(mb(b->decode_bytes) / b->decode_seconds), &bad);
		pf_json_put(sub, "decode_records_per_s",
			    pf_json_num((double)b->decode_records / b->decode_seconds), &bad);
		pf_json_put(sub, "decode_records", pf_json_u64(b->decode_records), &bad);
		pf_json_put(sub, "decode_bytes", pf_json_u64(b->decode_bytes), &bad);
		pf_json_put(sub, "bound_mb_per_s", pf_json_num(bound_mb), &bad);
	}
	pf_json_put(o, "baseline", sub, &bad);
	pf_json_put(o, "ratio_to_read", pf_json_num(ratio(r, b, b->read_seconds)), &bad);
	pf_json_put(o, "ratio_to_decompress", pf_json_num(ratio(r, b, b->decompress_seconds)),
		    &bad);
	if (decode)
		pf_json_put(o, "ratio_to_bound", pf_json_num(ratio(r, b, bound)), &bad);
	return pf_report_section(r, PF_SECTION_BASELINE, &t, o, bad, err);
}
