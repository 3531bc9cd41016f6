/* SPDX-License-Identifier: Apache-2.0 */
/* Direct placement: the inner loader's decode threads write each record
 * straight into its packed rows, as the padded loader writes record i
 * into row i: the plan knows every record's lengths before its epoch
 * (the shards' indexes told them, or the open counted them), and in fail
 * mode no record is lost on the way.  The consumer then only keeps the
 * packer's count.  Not here: the packer (transform/pack.c), the plan
 * (pack_plan.c), the consumer's packing (pack.c), which stays the
 * fallback for every record not placed here.
 *
 * The consumer plans ahead (pf_pack_direct_plan(), on its thread, when it
 * takes an inner batch): a copy of its packer runs over the next
 * ngroups inner groups' lengths (this host's, in the inner loader's
 * order, pf_pack_plan_order()), each record's pieces and their output
 * batches (bound to their steps as the consumer binds them) written to
 * the group's entry, which is then published by its tag (release).  A
 * decode thread whose record's group is published (acquire) decodes the
 * record's values into its own scratch, checks its lengths against the
 * plan's, copies each piece into its row with its segment ids and
 * positions, and says so in the entry (published to the consumer with
 * the record's row of the inner batch).  The consumer places every record
 * through its own packer as before: a placed record's values are not
 * copied again, any other is (decoded before its group was planned);
 * a record whose lengths differ from the plan's is an error (the planned
 * records after it would be misplaced).  The packer is a pure function of
 * the lengths in order, so both paths write the same bytes to the same
 * places: batches are those of the consumer's packing alone.
 *
 * Group s's entry is rewritten only for group s + ngroups, planned after
 * the consumer took group s + 1, so after every decode of group s
 * (the inner loader hands its batches out in order, each once every
 * record of it is written).  An output batch a plan points at stays bound
 * to its step until every record placed in its rows has been counted by
 * the consumer, after which no decode writes to it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "pack_internal.h"

/* The mean length of n records' lengths len (capped at cap; the longest
 * of the features'). */
static uint64_t mean_of(const uint32_t *len, uint64_t n, uint32_t nf, uint32_t cap)
{
	uint64_t most = 0;

	for (uint32_t f = 0; f < nf; f++) {
		uint64_t sum = 0;

		for (uint64_t r = 0; r < n; r++) {
			uint32_t v = len[r * nf + f];

			sum += v < cap ? v : cap;
		}
		most = sum > most ? sum : most;
	}
	return most / (n ? n : 1);
}

/* The records' mean length: a mixture's, its longest source's. */
static uint64_t mean_length(const pf_pack_run *pk)
{
	uint64_t most = 0;

	if (!pk->mix)
		return mean_of(pk->lengths, pk->nlengths, pk->nf, pk->cap);
	for (size_t k = 0; k < pk->nsrc; k++) {
		uint64_t m = mean_of(pk->src_lengths[k], pk->src_nlengths[k], pk->nf, pk->cap);

		most = m > most ? m : most;
	}
	return most;
}

/* The steps in progress the plan ahead needs beyond the consumer's: the
 * rows `groups` inner groups of records of length mean fill (a quarter
 * more for first_fit's room left in its rows), at most an eighth of the
 * memory budget. */
static void window_extra(const pf_packing *l, pf_pack_run *pk, uint32_t groups, uint64_t mean)
{
	uint64_t budget = l->cfg.memory_budget ? l->cfg.memory_budget : PF_LOADER_BUDGET_DEFAULT;
	uint64_t step_bytes = 0, rows, extra;

	for (uint32_t f = 0; f < pk->nf; f++)
		step_bytes += (uint64_t)pk->B * pk->L *
			      (pf_dtype_size(l->spec.f[pk->fout[f]].dtype) + 2 * sizeof(int32_t));
	rows = (uint64_t)groups * PF_PACK_GROUP * mean / pk->L;
	rows += rows / 4 + pk->packer.pool;
	extra = rows / pk->B + 2;
	if (extra * step_bytes > budget / 8)
		extra = budget / 8 / (step_bytes ? step_bytes : 1);
	pk->window_extra = (unsigned)extra;
}

static void *direct_aim(void *ctx, unsigned worker, uint8_t **dst, uint32_t epoch, uint64_t e,
			uint64_t c);
static void direct_put(void *ctx, unsigned worker, void *rec);
static void *mix_aim(void *ctx, unsigned worker, uint8_t **dst, uint32_t epoch, uint64_t e,
		     uint64_t c);
static void mix_put(void *ctx, unsigned worker, void *rec);

bool pf_pack_direct_wanted(const pf_loader_config *cfg)
{
	const char *want = getenv("PODFEED_PACK_DIRECT");

	/* Skip mode: a record may be lost on the way (its place then is
	 * another's). */
	return cfg->on_corrupt == PF_CORRUPT_FAIL && !(want && !strcmp(want, "0"));
}

/* A packed mixture's: its sources' decode threads, the groups the
 * mixture maps ahead, and room for the run's order (this host's rows'
 * lengths from the run's first step: at most an eighth of the budget,
 * the rest of a longer run placed by the consumer). */
#define PF_PACK_ENDLESS_ORDER ((uint64_t)1 << 18)
static void mix_shape(pf_packing *l, pf_pack_run *pk, pf_pack_direct *d)
{
	uint64_t budget = l->cfg.memory_budget ? l->cfg.memory_budget : PF_LOADER_BUDGET_DEFAULT;
	uint64_t t0 = pf_mixture_first_step(pk->mix), t1 = pf_mixture_end(pk->mix);
	uint64_t most = budget / 8 / (pk->nf * sizeof(uint32_t));
	unsigned ring = pf_mixture_ring(pk->mix);

	d->mix = pk->mix;
	for (size_t k = 0; k < pk->nsrc; k++) {
		unsigned w = pf_mixture_source(pk->mix, k)->nworkers;

		d->maxw = w > d->maxw ? w : d->maxw;
	}
	d->nworkers = d->maxw * (unsigned)pk->nsrc;
	d->ngroups = ring < 4 ? 4 : ring;
	pk->order0 = t0 * PF_PACK_GROUP;
	pk->order_room = t1 > t0 && t1 - t0 < most / PF_PACK_GROUP ? (t1 - t0) * PF_PACK_GROUP
								    : most;
	/* An endless run (no max_steps): its first PF_PACK_ENDLESS_ORDER records
	 * (their order followed at create, ~0.6 us a record), the rest
	 * placed by the consumer. */
	if (t1 >= PF_MIX_NO_END && !l->cfg.max_steps && pk->order_room > PF_PACK_ENDLESS_ORDER)
		pk->order_room = PF_PACK_ENDLESS_ORDER;
	pk->norder = 0;		/* pack_mix.c plans it */
}

int pf_pack_direct_create(pf_packing *l, pf_pack_run *pk)
{
	const pf_spec *s = &l->spec;
	pf_pack_direct *d;
	uint64_t mean, most, norder;
	size_t bytes;

	if (!pf_pack_direct_wanted(&l->cfg))
		return 0;
	d = pf_calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pk->direct = d;
	d->nf = pk->nf;
	d->cap = pk->cap;
	d->L = pk->L;
	for (uint32_t f = 0; f < pk->nf; f++) {
		d->fin[f] = pk->fin[f];
		d->fout[f] = pk->fout[f];
		d->elem[f] = pf_dtype_size(s->f[pk->fout[f]].dtype);
		d->soff[f] = d->sbytes;
		d->sbytes += round_up((size_t)pk->cap * d->elem[f], 64);
	}
	/* The lengths: not to the inner row (a line of another core's). */
	d->lenoff = d->sbytes;
	d->sbytes += round_up((size_t)pk->nf * sizeof(int32_t), 64);
	if (pk->mix)
		mix_shape(l, pk, d);
	else {
		d->nworkers = pk->inner->nworkers;
		d->ngroups = pk->inner->nslots < 4 ? 4 : pk->inner->nslots;
	}
	d->ngroups = d->ngroups < PF_PACK_AHEAD_MAX ? d->ngroups : PF_PACK_AHEAD_MAX;
	/* A group's pieces: first_fit's, one a record; concat's, the rows
	 * records of twice the mean length span, and one record's most; a
	 * group that needs more is not planned. */
	mean = mean_length(pk);
	d->npieces = pk->packer.mode == PF_PACKER_FIRST_FIT ? PF_PACK_GROUP :
		     PF_PACK_GROUP * (uint32_t)(2 * mean / pk->L + 2) + pk->npieces;
	/* At most a sixteenth of the budget for them all. */
	most = (l->cfg.memory_budget ? l->cfg.memory_budget : PF_LOADER_BUDGET_DEFAULT) / 16 /
	       d->ngroups / (sizeof(pf_pack_piece) + sizeof(pack_dest));
	if (d->npieces > most)
		d->npieces = (uint32_t)(most > pk->npieces ? most : pk->npieces);
	d->groups = pf_calloc(d->ngroups, sizeof(*d->groups));
	if (!d->groups)
		return -ENOMEM;
	window_extra(l, pk, d->ngroups, mean);
	d->scratch = pf_malloc_aligned((size_t)d->nworkers * d->sbytes, 64);
	norder = pk->mix ? pk->order_room : pk->nlengths;
	pk->order = pf_malloc((norder ? norder : 1) * pk->nf * sizeof(*pk->order));
	if (pk->mix)
		d->src_hooks = pf_calloc(pk->nsrc, sizeof(*d->src_hooks));
	if (!d->scratch || !pk->order || (pk->mix && !d->src_hooks))
		return -ENOMEM;
	bytes = (size_t)d->nworkers * d->sbytes + norder * pk->nf * sizeof(*pk->order);
	for (unsigned g = 0; g < d->ngroups; g++) {
		d->groups[g].pieces = pf_calloc(d->npieces, sizeof(*d->groups[g].pieces));
		d->groups[g].dest = pf_calloc(d->npieces, sizeof(*d->groups[g].dest));
		if (!d->groups[g].pieces || !d->groups[g].dest)
			return -ENOMEM;
		bytes += (size_t)d->npieces * (sizeof(pf_pack_piece) + sizeof(pack_dest));
	}
	bytes += (size_t)d->ngroups * sizeof(*d->groups);
	l->memory_bytes += bytes;
	/* The decode threads may be running: everything above first. */
	if (pk->mix) {
		for (size_t k = 0; k < pk->nsrc; k++) {
			pack_src_hook *h = &d->src_hooks[k];

			*h = (pack_src_hook){ .d = d, .k = k };
			h->hook = (pf_record_hook){ .aim = mix_aim, .put = mix_put, .ctx = h };
			__atomic_store_n(&pf_mixture_source(pk->mix, k)->record_hook, &h->hook,
					 __ATOMIC_RELEASE);
		}
		return 0;
	}
	d->hook = (pf_record_hook){ .aim = direct_aim, .put = direct_put, .ctx = d };
	__atomic_store_n(&pk->inner->record_hook, &d->hook, __ATOMIC_RELEASE);
	return 0;
}

void pf_pack_direct_free(pf_pack_run *pk)
{
	pf_pack_direct *d = pk->direct;

	pf_free(pk->order);
	if (!d)
		return;
	for (unsigned g = 0; d->groups && g < d->ngroups; g++) {
		pf_free(d->groups[g].pieces);
		pf_free(d->groups[g].dest);
	}
	pf_free(d->groups);
	pf_free(d->scratch);
	pf_free(d->src_hooks);
	pf_free(d);
}

int pf_pack_direct_epoch(pf_packing *l, pf_pack_run *pk, uint32_t e)
{
	int ret;

	pk->ahead_on = false;
	pk->norder = 0;
	if (!pk->direct)
		return 0;
	ret = pf_pack_plan_order(&pk->inner_order, l->cfg.seed, e, pk->lengths, pk->nf,
				 pk->cap, pk->order, &pk->norder);
	pk->order_epoch = e;
	if (ret < 0)
		pk->norder = 0;
	return ret;
}

/* Plan inner group `step` of the epoch with pk->ahead: 1 done (published),
 * 0 not now (a piece's step is past those in progress; or a record the
 * consumer will refuse itself), the planner as it was. */
static int plan_group(pf_packing *l, pf_pack_run *pk, uint64_t step)
{
	pf_pack_direct *d = pk->direct;
	pack_group *g = &d->groups[step % d->ngroups];
	pf_packer was = pk->ahead;
	uint64_t e0 = step * PF_PACK_GROUP, closed;
	uint32_t np = 0, pcb = l->topo.per_core_batch;
	/* A record's pieces at most: first_fit's one, concat's its rows. */
	uint32_t room = pk->packer.mode == PF_PACKER_FIRST_FIT ? 1 : pk->npieces;
	pf_error err;

	if (e0 + PF_PACK_GROUP > pk->norder || e0 < pk->order0)
		return 0;	/* the epoch's end */
	/* Group step - ngroups's: its decodes are all done. */
	__atomic_store_n(&g->tag, 0, __ATOMIC_RELAXED);
	for (uint32_t r = 0; r < PF_PACK_GROUP; r++) {
		pack_rec *pr = &g->rec[r];
		int k;

		memcpy(pr->len, pk->order + (e0 - pk->order0 + r) * pk->nf,
		       pk->nf * sizeof(*pr->len));
		/* Its counts (not the whole packer: 4.7 KiB a record). */
		uint64_t values = pk->ahead.values, cut = pk->ahead.truncated_values;
		uint64_t empty = pk->ahead.empty_records, cuts = pk->ahead.truncated_records;

		pr->piece0 = np;
		pr->state = PACK_REC_WAITING;
		if (np + room > d->npieces)
			goto not_now;
		k = pf_pack_place(&pk->ahead, pr->len, g->pieces + np, room, &closed, &err);
		if (k < 0)
			goto not_now;
		pr->opened = pk->ahead.next_row;
		pr->closed = closed;
		pr->values = pk->ahead.values - values;
		pr->truncated_values = pk->ahead.truncated_values - cut;
		pr->empty = pk->ahead.empty_records != empty;
		pr->truncated = pk->ahead.truncated_records != cuts;
		for (int j = 0; j < k; j++) {
			uint64_t row = g->pieces[np + j].row, s = row / pk->B;
			uint32_t idx = (uint32_t)(row % pk->B);
			pack_dest *dst = &g->dest[np + j];

			dst->o = NULL;
			if (s >= pk->epoch_steps || s < pk->step)
				continue;	/* dropped, or delivered before a resume */
			if (s >= pk->step + pk->window)
				goto not_now;
			dst->o = pk->inprog[s % pk->window];
			if (!dst->o)
				dst->o = pf_pack_take_out(l, pk, s);
			dst->core = idx / pcb;
			dst->row = idx % pcb;
		}
		pr->npieces = (uint32_t)k;
		np += (uint32_t)k;
	}
	g->after = pk->ahead;
	__atomic_store_n(&g->tag, pack_tag(pk->epoch, step), __ATOMIC_RELEASE);
	return 1;
not_now:
	pk->ahead = was;
	return 0;
}

void pf_pack_direct_plan(pf_packing *l, pf_pack_run *pk, uint32_t epoch, uint64_t step,
			 bool start)
{
	if (!pk->direct || !pk->norder || pk->order_epoch != epoch || pk->epoch != epoch)
		return;
	if (start && (!pk->ahead_on || pk->ahead_step <= step)) {
		/* Not ahead (the run's or an epoch's first group, or the
		 * planner stopped): from the consumer's packer, before
		 * group `step` is placed. */
		pk->ahead = pk->packer;
		pk->ahead_step = step;
		pk->ahead_on = true;
	}
	while (pk->ahead_on && pk->ahead_step < step + pk->direct->ngroups &&
	       plan_group(l, pk, pk->ahead_step))
		pk->ahead_step++;
}

pack_group *pf_pack_direct_group(pf_pack_run *pk, uint32_t epoch, uint64_t step)
{
	pack_group *g;

	if (!pk->direct)
		return NULL;
	g = &pk->direct->groups[step % pk->direct->ngroups];
	if (__atomic_load_n(&g->tag, __ATOMIC_ACQUIRE) != pack_tag(epoch, step))
		return NULL;
	return g;
}

/* ------------------------------------------------------------------ */
/* The decode threads' side                                             */

/*
 * A piece goes out with non-temporal (streaming) stores, as the padded
 * loader's rows do (spec_fast.c): its rows are written once here and read
 * by the consumer long after, from batches in progress that no cache
 * holds; ordinary stores read every line first.  Whole 64-byte lines
 * stream (AVX-512, or AVX, or SSE2 stores: the widest the CPU has, within
 * PODFEED_SIMD), the partial lines at a piece's ends 4-byte streaming
 * stores.  Measured with tools/bench/pack (first_fit, perf samples over 5
 * epochs): ordinary stores throughout made the copy a fifth of the run's
 * samples (1,358 of 7,167); 16-byte streams with 4-byte ones at the ends,
 * 478; 64-byte ones with ordinary stores at the ends (each a read of a
 * line no cache holds), 700.  pf_place_flush() fences the chunk's stores
 * before its rows are counted.  Values are copied as 4-byte words
 * (int32, float32, int64: every dtype a packed feature has).
 * PODFEED_STREAM=0: ordinary stores (pf_pack_copy()).
 */
typedef struct put_ops {
	/* n words from src to dst; id to seg and from, from + 1, ... to pos */
	void (*copy)(uint32_t *dst, const uint32_t *src, size_t n);
	void (*ids)(int32_t *seg, int32_t *pos, int32_t id, int32_t from, size_t n);
} put_ops;

#if defined(__x86_64__)
/* The words before dst's next line: ordinary stores.  @return them. */
static inline size_t head_words(const void *dst, size_t n)
{
	size_t k = ((64u - ((uintptr_t)dst & 63u)) & 63u) / 4u;

	return k < n ? k : n;
}

#define PUT_VARIANT(name, tgt, vec, width, load, stream, set1, add, iota)                 \
	__attribute__((target(tgt)))                                                          \
	static void copy_##name(uint32_t *dst, const uint32_t *src, size_t n)                 \
	{                                                                                     \
		size_t i = head_words(dst, n);                                                \
                                                                                              \
		for (size_t k = 0; k < i; k++)                                                \
			_mm_stream_si32((int *)(dst + k), (int)src[k]);                       \
		for (; i + 16 <= n; i += 16)                                                  \
			for (size_t w = 0; w < 16; w += (width))                              \
				stream((vec *)(void *)(dst + i + w),                          \
				       load((const vec *)(const void *)(src + i + w)));       \
		for (; i < n; i++)                                                            \
			_mm_stream_si32((int *)(dst + i), (int)src[i]);                       \
	}                                                                                     \
	__attribute__((target(tgt)))                                                          \
	static void ramp_##name(int32_t *dst, int32_t from, int32_t step, size_t n)           \
	{                                                                                     \
		size_t i = head_words(dst, n);                                                \
		vec v, inc = set1(step * (int32_t)(width));                                   \
                                                                                              \
		for (size_t k = 0; k < i; k++)                                                \
			_mm_stream_si32(dst + k, from + step * (int32_t)k);                   \
		v = add(set1(from + step * (int32_t)i), iota(step));                          \
		for (; i + 16 <= n; i += 16)                                                  \
			for (size_t w = 0; w < 16; w += (width)) {                            \
				stream((vec *)(void *)(dst + i + w), v);                      \
				v = add(v, inc);                                              \
			}                                                                     \
		for (; i < n; i++)                                                            \
			_mm_stream_si32(dst + i, from + step * (int32_t)i);                   \
	}                                                                                     \
	/* id at seg[0, n), from, from + 1, ... at pos[0, n): one pass when     \
	 * both are aligned alike (the rows of two int32 tensors are). */      \
	__attribute__((target(tgt)))                                                          \
	static void ids_##name(int32_t *seg, int32_t *pos, int32_t id, int32_t from, size_t n) \
	{                                                                                     \
		size_t i = head_words(seg, n);                                                \
		vec s, v, inc = set1((int32_t)(width));                                       \
                                                                                              \
		if (((uintptr_t)seg & 63u) != ((uintptr_t)pos & 63u)) {                       \
			ramp_##name(seg, id, 0, n);                                           \
			ramp_##name(pos, from, 1, n);                                         \
			return;                                                               \
		}                                                                             \
		for (size_t k = 0; k < i; k++) {                                              \
			_mm_stream_si32(seg + k, id);                                         \
			_mm_stream_si32(pos + k, from + (int32_t)k);                          \
		}                                                                             \
		s = set1(id);                                                                 \
		v = add(set1(from + (int32_t)i), iota(1));                                    \
		for (; i + 16 <= n; i += 16)                                                  \
			for (size_t w = 0; w < 16; w += (width)) {                            \
				stream((vec *)(void *)(seg + i + w), s);                      \
				stream((vec *)(void *)(pos + i + w), v);                      \
				v = add(v, inc);                                              \
			}                                                                     \
		for (; i < n; i++) {                                                          \
			_mm_stream_si32(seg + i, id);                                         \
			_mm_stream_si32(pos + i, from + (int32_t)i);                          \
		}                                                                             \
	}

static inline __m128i iota_sse2(int32_t s)
{
	return _mm_setr_epi32(0, s, 2 * s, 3 * s);
}

__attribute__((target("avx"))) static inline __m256i iota_avx(int32_t s)
{
	return _mm256_setr_epi32(0, s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s, 7 * s);
}

__attribute__((target("avx2"))) static inline __m256i add_avx2(__m256i a, __m256i b)
{
	return _mm256_add_epi32(a, b);
}

__attribute__((target("avx512f"))) static inline __m512i iota_avx512(int32_t s)
{
	return _mm512_setr_epi32(0, s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s, 7 * s, 8 * s, 9 * s,
				 10 * s, 11 * s, 12 * s, 13 * s, 14 * s, 15 * s);
}

PUT_VARIANT(sse2, "sse2", __m128i, 4, _mm_loadu_si128, _mm_stream_si128, _mm_set1_epi32,
	    _mm_add_epi32, iota_sse2)
PUT_VARIANT(avx2, "avx2", __m256i, 8, _mm256_loadu_si256, _mm256_stream_si256,
	    _mm256_set1_epi32, add_avx2, iota_avx)

__attribute__((target("avx512f")))
static void stream512(__m512i *p, __m512i v)
{
	_mm512_stream_si512((void *)p, v);
}

PUT_VARIANT(avx512, "avx512f", __m512i, 16, _mm512_loadu_si512, stream512, _mm512_set1_epi32,
	    _mm512_add_epi32, iota_avx512)
#endif

static void copy_plain(uint32_t *dst, const uint32_t *src, size_t n)
{
	memcpy(dst, src, n * sizeof(*dst));
}

static void ids_plain(int32_t *seg, int32_t *pos, int32_t id, int32_t from, size_t n)
{
	for (size_t i = 0; i < n; i++)
		seg[i] = id;
	for (size_t i = 0; i < n; i++)
		pos[i] = from + (int32_t)i;
}

static put_ops put = { copy_plain, ids_plain };
static pthread_once_t put_once = PTHREAD_ONCE_INIT;

/* As spec_fast.c chooses its row stores. */
static void choose_put(void)
{
	const char *want = getenv("PODFEED_STREAM"), *simd = getenv("PODFEED_SIMD");
	bool no512 = simd && (!strcmp(simd, "avx2") || !strcmp(simd, "scalar"));
	bool noavx = simd && !strcmp(simd, "scalar");

	if (want && !strcmp(want, "0"))
		return;
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && !no512)
		put = (put_ops){ copy_avx512, ids_avx512 };
	else if (__builtin_cpu_supports("avx2") && !noavx)
		put = (put_ops){ copy_avx2, ids_avx2 };
	else
		put = (put_ops){ copy_sse2, ids_sse2 };
#else
	(void)no512;
	(void)noavx;
#endif
}

static void put_piece(const pf_pack_piece *pc, uint32_t f, const uint8_t *src, size_t elem,
		      uint8_t *row, int32_t *seg, int32_t *pos)
{
	uint32_t at = pc->at[f], n = pc->count[f];

	put.copy((uint32_t *)(void *)(row + (size_t)at * elem),
		 (const uint32_t *)(const void *)(src + (size_t)pc->from * elem),
		 (size_t)n * elem / 4);
	put.ids(seg + at, pos + at, (int32_t)pc->segment, (int32_t)pc->from, n);
}

/* A worker's scratch, dst's packed values aimed at it: the plan of
 * record r of group g. */
static void *aim_at(const pf_pack_direct *d, pack_group *g, uint32_t r, uint8_t *scratch,
		    uint8_t **dst)
{
	for (uint32_t f = 0; f < d->nf; f++) {
		dst[d->fin[f]] = scratch + d->soff[f];
		dst[d->fin[f] + 1] = scratch + d->lenoff + f * sizeof(int32_t);
	}
	return &g->rec[r];
}

/* The record hook's aim() (pf_record_hook): the plan of the record at
 * epoch output e, dst's packed values aimed at the worker's scratch;
 * NULL: not planned, decode into the row. */
static void *direct_aim(void *ctx, unsigned worker, uint8_t **dst, uint32_t epoch, uint64_t e,
			uint64_t c)
{
	pf_pack_direct *d = ctx;
	uint64_t step = e / PF_PACK_GROUP;
	pack_group *g = &d->groups[step % d->ngroups];

	(void)c;
	if (__atomic_load_n(&g->tag, __ATOMIC_ACQUIRE) != pack_tag(epoch, step))
		return NULL;
	return aim_at(d, g, (uint32_t)(e % PF_PACK_GROUP), d->scratch + (size_t)worker * d->sbytes,
		      dst);
}

/* A packed mixture source's aim(): record c of the source's run goes to
 * the inner row the mixture mapped it to (its run is epoch 0). */
static void *mix_aim(void *ctx, unsigned worker, uint8_t **dst, uint32_t epoch, uint64_t e,
		     uint64_t c)
{
	const pack_src_hook *h = ctx;
	pf_pack_direct *d = h->d;
	uint64_t row, step;
	pack_group *g;

	(void)epoch;
	(void)e;
	if (worker >= d->maxw || !pf_mixture_inner_index(d->mix, h->k, c, &row))
		return NULL;
	step = row / PF_PACK_GROUP;
	g = &d->groups[step % d->ngroups];
	if (__atomic_load_n(&g->tag, __ATOMIC_ACQUIRE) != pack_tag(0, step))
		return NULL;
	return aim_at(d, g, (uint32_t)(row % PF_PACK_GROUP),
		      d->scratch + (h->k * d->maxw + worker) * d->sbytes, dst);
}

/* After a worker decoded record pr into scratch, its pieces copied into
 * their packed rows. */
static void put_record(pf_pack_direct *d, const uint8_t *scratch, pack_rec *pr)
{
	const pack_group *g = &d->groups[((uintptr_t)pr - (uintptr_t)d->groups) / sizeof(*g)];
	bool differs = false;

	pthread_once(&put_once, choose_put);
	pr->cut_values = 0;
	pr->cut = false;
	for (uint32_t f = 0; f < d->nf; f++) {
		uint32_t n = (uint32_t)*(const int32_t *)(const void *)(scratch + d->lenoff +
									 f * sizeof(int32_t));

		pr->got[f] = n < d->cap ? n : d->cap;
		differs |= pr->got[f] != pr->len[f];
		if (n > d->cap) {
			/* concat: longer than an inner row holds */
			pr->cut_values += n - d->cap;
			pr->cut |= f == 0;
		}
	}
	if (differs) {
		/* The consumer refuses it (and its rows are not written:
		 * the data changed since the plan). */
		__atomic_store_n(&pr->state, PACK_REC_DIFFERS, __ATOMIC_RELAXED);
		return;
	}
	for (uint32_t j = pr->piece0; j < pr->piece0 + pr->npieces; j++) {
		const pack_dest *dst = &g->dest[j];

		if (!dst->o)
			continue;
		for (uint32_t f = 0; f < d->nf; f++) {
			pf_tensor *t = dst->o->core[dst->core].tensors;
			uint32_t i = d->fout[f];
			size_t at = (size_t)dst->row * d->L;

			put_piece(&g->pieces[j], f, scratch + d->soff[f], d->elem[f],
				  (uint8_t *)t[i].data + at * d->elem[f],
				  (int32_t *)t[i + 1].data + at, (int32_t *)t[i + 2].data + at);
		}
	}
	/* Published with the record's row (pf_place_flush()). */
	__atomic_store_n(&pr->state, PACK_REC_PLACED, __ATOMIC_RELAXED);
}

/* The record hook's put(). */
static void direct_put(void *ctx, unsigned worker, void *rec)
{
	pf_pack_direct *d = ctx;

	put_record(d, d->scratch + (size_t)worker * d->sbytes, rec);
}

static void mix_put(void *ctx, unsigned worker, void *rec)
{
	const pack_src_hook *h = ctx;

	put_record(h->d, h->d->scratch + (h->k * h->d->maxw + worker) * h->d->sbytes, rec);
}
