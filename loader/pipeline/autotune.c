/* SPDX-License-Identifier: Apache-2.0 */
/* Autotune: the decode threads, the frame reads in flight and the
 * prefetch a loader runs with where its config says PF_AUTO, chosen from
 * what it measures, each choice with its reason in one line
 * (pf_loader_tuning()), so that a report can say what was chosen and
 * why.  None of them changes a batch: the order of records is a function
 * of dataset, seed, epoch and topology only.
 *
 *   io_depth  from the start and all along: enough reads in flight that
 *             the decoders never wait for one (Little's law: threads x
 *             read latency / frame decode time, rounded up, and one
 *             ahead).  It starts at 2: the first batch needs the first
 *             frames only, and every read buffer taken is one more to
 *             fault in before it (budget.c makes them as they are
 *             needed, the engine registers each at its first read).
 *   threads   after PF_TUNE_BATCHES batches: every CPU when decoding is
 *             the bottleneck; when the consumer spends more CPU time
 *             between batches than the decoders need for one, as few as
 *             keep ahead of it with a fifth to spare, the rest of the
 *             CPUs left to it.  The loader
 *             starts one worker per CPU (the pools are planned for
 *             them); the others park.
 *   prefetch  after PF_TUNE_BATCHES batches: 2 (the value of before),
 *             raised when the consumer stalls (its longest gap between
 *             batches several times its mean) and then waits for
 *             batches: enough ready batches to cover its longest stall,
 *             at most what the budget planned slots for.  Never
 *             lowered: a consumer may hold prefetch + 1 batches.
 * Not here: the pools (budget.c), what the stages do. */
#include <stdarg.h>
#include <stdio.h>

#include "pipeline_internal.h"

/* Moving averages over about the last 8 values. */
static uint64_t ewma(uint64_t avg, uint64_t v, uint64_t n)
{
	return n <= 1 ? v : avg - avg / 8 + v / 8;
}

static double ms(uint64_t ns)
{
	return (double)ns * 1e-6;
}

static void say(pf_tuning_choice *c, unsigned value, bool measured, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void say(pf_tuning_choice *c, unsigned value, bool measured, const char *fmt, ...)
{
	va_list ap;

	c->value = value;
	c->measured = measured;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
}

void pf_tune_start(pf_pipe *l)
{
	unsigned n = l->nworkers;

	l->active_workers = n;
	if (l->fitted & PF_FITTED_THREADS)
		;	/* budget.c said why */
	else if (l->tune.threads.automatic)
		say(&l->tune.threads, n, false,
		    "every CPU (%u) until %u batches are measured", n, PF_TUNE_BATCHES);
	else
		say(&l->tune.threads, n, false, "set by the config");

	l->cbuf_limit = l->ncbufs;
	if (!l->ncbufs)
		say(&l->tune.io_depth, l->cfg.io_depth, false,
		    "no frame reads (stream files only: %u blocks a stream ahead)",
		    PF_STREAM_BUFS);
	else if (l->tune.io_depth.automatic) {
		l->cbuf_limit = n + 2 < l->ncbufs ? n + 2 : l->ncbufs;
		say(&l->tune.io_depth, l->cbuf_limit - n, false,
		    "%u to start: the first batch needs the first frames only "
		    "(up to %u as reads are measured)", l->cbuf_limit - n, l->cfg.io_depth);
	} else if (l->cfg.io_depth < l->depth_plan)
		say(&l->tune.io_depth, l->cfg.io_depth, false,
		    "the config's %u, cut to %u by the memory budget", l->depth_plan,
		    l->cfg.io_depth);
	else
		say(&l->tune.io_depth, l->cfg.io_depth, false, "set by the config");

	if (l->fitted & PF_FITTED_PREFETCH)
		;	/* budget.c said why */
	else if (l->tune.prefetch.automatic)
		say(&l->tune.prefetch, l->cfg.prefetch, false,
		    "%u until %u batches are measured (up to %u: the budget's slots)",
		    l->cfg.prefetch, PF_TUNE_BATCHES, l->prefetch_max);
	else
		say(&l->tune.prefetch, l->cfg.prefetch, false, "set by the config");
}

/* Reads in flight for the decoders not to wait: each of the active
 * workers decodes a frame in tune_frame_ewma while a read takes
 * tune_read_ewma, so threads x latency / decode reads are under way at
 * once; one more is queued so that a worker done with its frame finds
 * the next. */
static void tune_depth(pf_pipe *l)
{
	unsigned n = l->active_workers, max = l->cfg.io_depth, reads;
	double lat = (double)l->tune_read_ewma, dec = (double)l->tune_frame_ewma;
	double busy;

	if (!l->tune.io_depth.automatic || !l->ncbufs || l->tune_frames < 2 || dec <= 0)
		return;
	busy = n * lat / dec;
	reads = (unsigned)busy + ((double)(unsigned)busy < busy) + 1;
	reads = reads < 2 ? 2 : reads;
	reads = reads > max ? max : reads;	/* the budget's cut too */
	if (reads != l->tune.io_depth.value || !l->tune.io_depth.measured) {
		say(&l->tune.io_depth, reads, true,
		    "a read takes %.3f ms and a frame %.3f ms of CPU to decode: %u thread%s "
		    "keep %.2f reads busy, rounded up and 1 ahead (at most %u)",
		    ms((uint64_t)lat), ms((uint64_t)dec), n, n == 1 ? "" : "s", busy, max);
		l->cbuf_limit = n + reads;
		/* The I/O thread may wait for a buffer the new limit allows. */
		pthread_cond_broadcast(&l->cv_cbuf);
	}
}

void pf_tune_read(pf_pipe *l, uint64_t ns)
{
	l->tune_reads++;
	l->tune_read_ewma = ewma(l->tune_read_ewma, ns, l->tune_reads);
	tune_depth(l);
}

void pf_tune_decoded(pf_pipe *l, uint64_t records, bool frame, uint64_t cpu_ns)
{
	l->tune_records += records;
	l->tune_cpu_ns += cpu_ns;
	if (!frame)
		return;
	l->tune_frames++;
	l->tune_frame_ewma = ewma(l->tune_frame_ewma, cpu_ns, l->tune_frames);
	tune_depth(l);
}

void pf_tune_next_entry(pf_pipe *l, uint64_t t)
{
	uint64_t gap;

	if (!l->tune_last_ns)
		return;	/* no batch yet, a call that timed out, or measured */
	gap = t - l->tune_last_ns;
	l->tune_gaps++;
	l->tune_gap_ns += gap;
	l->tune_gap_cpu_ns += pf_thread_cpu_ns() - l->tune_last_cpu_ns;
	l->tune_gap_max_ns = gap > l->tune_gap_max_ns ? gap : l->tune_gap_max_ns;
	l->tune_last_ns = 0;
}

/* Decode threads: decode_ns of CPU a batch; the consumer gap_ns between
 * batches, gap_cpu_ns of them on its CPU.  CPU times on both sides: a
 * consumer waiting off the CPU (an accelerator's step) takes no CPU from
 * the decoders, and on a busy machine wall times say more about the
 * machine than about either. */
static void tune_threads(pf_pipe *l, uint64_t decode_ns, uint64_t gap_ns, uint64_t gap_cpu_ns)
{
	unsigned n = l->nworkers, t;
	double need = gap_cpu_ns ? (double)decode_ns / (0.8 * (double)gap_cpu_ns) : (double)n;

	t = need >= n ? n : (unsigned)need + ((double)(unsigned)need < need);
	t = t < 1 ? 1 : t;
	if (t == n)
		say(&l->tune.threads, n, true,
		    "%s (%u): a batch takes %.3f ms of CPU to decode and the consumer "
		    "%.3f ms of CPU between batches (%.3f ms in all), so decoding is the "
		    "bottleneck", l->fitted & PF_FITTED_THREADS ? "every thread the memory "
		    "budget holds" : "every CPU", n, ms(decode_ns), ms(gap_cpu_ns), ms(gap_ns));
	else
		say(&l->tune.threads, t, true,
		    "%u of %u CPUs: a batch takes %.3f ms of CPU to decode and the consumer "
		    "%.3f ms of CPU between batches (%.3f ms in all); %u keep%s ahead of it "
		    "with a fifth to spare and leave the other CPUs to it", t, n, ms(decode_ns),
		    ms(gap_cpu_ns), ms(gap_ns), t, t == 1 ? "s" : "");
	l->active_workers = t;
	pf_decode_broadcast(l);	/* parked workers look again */
	tune_depth(l);	/* fewer decoders need fewer reads */
}

/* Prefetch: the consumer's mean and longest gap between batches, and how
 * many of the measured batches it waited for. */
static void tune_prefetch(pf_pipe *l, uint64_t gap_ns, uint64_t batches, uint64_t t)
{
	uint64_t interval = (t - l->tune_first_ns) / (batches - 1);
	unsigned p = l->cfg.prefetch;
	bool stalls = l->tune_gap_max_ns >= 4 * gap_ns && l->tune_waits * 10 >= batches - 1;

	if (stalls && interval) {
		uint64_t cover = (l->tune_gap_max_ns + interval - 1) / interval;

		p = cover > l->prefetch_max ? l->prefetch_max : cover > p ? (unsigned)cover : p;
		say(&l->tune.prefetch, p, true,
		    "the consumer stalls up to %.3f ms (mean %.3f ms between batches) and then "
		    "waited for %llu of %llu batches: %u ready cover a stall (at most %u)",
		    ms(l->tune_gap_max_ns), ms(gap_ns), (unsigned long long)l->tune_waits,
		    (unsigned long long)(batches - 1), p, l->prefetch_max);
	} else if (l->tune_waits * 10 >= batches - 1)
		say(&l->tune.prefetch, p, true,
		    "the consumer waited for %llu of %llu batches and takes %.3f ms between "
		    "them (longest %.3f ms): the loader is the bottleneck, more ready batches "
		    "would not come sooner", (unsigned long long)l->tune_waits,
		    (unsigned long long)(batches - 1), ms(gap_ns), ms(l->tune_gap_max_ns));
	else
		say(&l->tune.prefetch, p, true,
		    "the consumer waited for %llu of %llu batches: they are ready before it "
		    "asks", (unsigned long long)l->tune_waits,
		    (unsigned long long)(batches - 1));
	if (p != l->cfg.prefetch) {
		pf_budget_grow_slots(l, p);
		l->cfg.prefetch = p;
	}
}

void pf_tune_next_taken(pf_pipe *l, uint64_t t, uint64_t waited)
{
	uint64_t batches = l->m.steps, gap_ns, gap_cpu_ns, decode_ns;

	if (batches > PF_TUNE_BATCHES)
		return;
	l->tune_last_ns = t;
	l->tune_last_cpu_ns = pf_thread_cpu_ns();
	if (batches == 1) {
		l->tune_first_ns = t;
		return;
	}
	/* A wait shorter than a wake-up is no wait. */
	l->tune_waits += waited > 20000;
	if (batches < PF_TUNE_BATCHES)
		return;
	l->tune_last_ns = 0;	/* measured: next() counts no more */
	if (!l->tune_gaps || !l->tune_records)
		return;
	gap_ns = l->tune_gap_ns / l->tune_gaps;
	gap_cpu_ns = l->tune_gap_cpu_ns / l->tune_gaps;
	decode_ns = (uint64_t)((double)l->tune_cpu_ns * l->host_batch / (double)l->tune_records);
	if (l->tune.threads.automatic)
		tune_threads(l, decode_ns, gap_ns, gap_cpu_ns);
	if (l->tune.prefetch.automatic)
		tune_prefetch(l, gap_ns, batches, t);
}

void pf_pipe_tuning(const pf_pipe *l, pf_tuning *out)
{
	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	*out = l->tune;
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
}
