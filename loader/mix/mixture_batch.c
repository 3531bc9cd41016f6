/* SPDX-License-Identifier: Apache-2.0 */
/* A mixture's batches: a ring of batch slots, one for each of the next
 * steps, that the sources' decoders write their rows straight into.
 *
 * The schedule says, ahead of the step being handed out, which source
 * each row of each coming step takes, so the c-th record a source's
 * loader delivers has a place known before it is decoded: step t, row j.
 * A source's decoders ask for it (its loader's pf_row_sink, placement.c)
 * and write the record there when step t's slot is free for it (the
 * consumer released the step that had it before); otherwise into the
 * source's own batch, from which the row is copied when the mixture
 * makes step t (as every row was before: the copy took ~20% of a
 * mixture's CPU, the memory its sources' batches faulted in as much
 * again).  The rows land where the copy would put them, so the batches
 * are the same bit for bit either way.
 *
 * Not here: the schedule itself, checkpoints, the sources' loaders
 * (mixture.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mixture_internal.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* PODFEED_STREAM=0 copies rows with memcpy (for measuring), as it makes
 * the decoders write with ordinary stores; PODFEED_MIX_DIRECT=0 makes
 * every row go through the sources' batches, with the sources reading
 * ahead as far as a loader does (for measuring, and the tests'
 * reference: the way every row went before); PODFEED_MIX_RING=N makes
 * the ring N steps (the tests: rows of later steps are copied);
 * PODFEED_MIX_LIMIT=0 lets the sources' loaders read ahead past the
 * run's end, as they did before their runs were cut; PODFEED_MIX_POOL=0
 * gives each source's loader decode threads of its own, its share of
 * those asked for rounded up, as before the pool (both for measuring). */
static bool mix_no_stream;

void pf_mix_batch_env(pf_mixture *m)
{
	const char *stream = getenv("PODFEED_STREAM"), *direct = getenv("PODFEED_MIX_DIRECT");
	const char *ring = getenv("PODFEED_MIX_RING"), *limit = getenv("PODFEED_MIX_LIMIT");
	const char *pool = getenv("PODFEED_MIX_POOL");

	mix_no_stream = stream && !strcmp(stream, "0");
	m->no_direct = direct && !strcmp(direct, "0");
	m->ring_env = ring ? (unsigned)strtoul(ring, NULL, 10) : 0;
	m->no_limit = limit && !strcmp(limit, "0");
	m->no_pool = pool && !strcmp(pool, "0");
}

/* Steps in the ring: their slots within a quarter of the budget (the
 * slots in use, and faulted in, are those of the steps the sources'
 * reading ahead reaches), at least those a consumer may hold, at most
 * 4096. */
static unsigned ring_steps(size_t slot_bytes, size_t budget, unsigned held)
{
	uint64_t want = slot_bytes ? budget / 4 / slot_bytes : 4096;

	want = want < 4096 ? want : 4096;
	return (unsigned)(want > held ? want : held);
}

/* The places kept for source k's records, a power of two: its most in
 * `ring` steps (stratified: within one of its share a step; sampled:
 * twice its share, a step's worth more; the schedule waits when they
 * run out). */
static uint64_t places(const pf_mixture *m, size_t k)
{
	uint64_t per = (((pf_u128)m->host_batch * m->src[k].q) >> FIX) + 1, n = 1;

	if (m->mode == PF_MIX_SAMPLE)
		per = 2 * per;
	while (n < (uint64_t)m->ring * per + m->host_batch)
		n <<= 1;
	return n;
}

static int make_failed(pf_error *err)
{
	return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
			    "out of memory for the mixture's batches");
}

int pf_mix_make_slots(pf_mixture *m, const pf_spec *spec, unsigned held, size_t budget,
		      pf_error *err)
{
	uint32_t pcb = m->topo.per_core_batch, cores = m->topo.cores;
	uint32_t nt = m->features + m->source_feature;
	size_t slot_bytes;
	uint64_t pool;
	uint32_t rbits, ibits = 0, cbits = 0;

	m->block_bytes = 0;
	for (uint32_t f = 0; f < nt; f++) {
		m->fbytes[f] = f < m->features ? pf_dtype_size(spec->f[f].dtype) * spec->f[f].len
					       : sizeof(int32_t);
		m->toff[f] = m->block_bytes;
		m->block_bytes = round_up(m->block_bytes + m->fbytes[f] * pcb, MIX_ALIGN);
	}
	slot_bytes = m->block_bytes * cores;
	/* Slots for the ring's steps, and those a consumer may hold, kept
	 * for it: a decoder takes a slot only while more are free. */
	m->ring = m->no_direct ? 1 : m->ring_env ? m->ring_env
						  : ring_steps(slot_bytes, budget, held);
	/* A row is its core and its place in the core's batch, in bits of
	 * their own (no division where a decoder aims a record). */
	while (((uint64_t)1 << ibits) < pcb)
		ibits++;
	while (((uint64_t)1 << cbits) < cores)
		cbits++;
	rbits = ibits + cbits ? ibits + cbits : 1;
	/* A place is a ring step and a row in 32 bits. */
	if (((uint64_t)m->ring << rbits) > UINT32_MAX)
		m->ring = (unsigned)(UINT32_MAX >> rbits);
	if (m->ring == 0) {
		m->ring = 1;
		m->no_direct = true;
	}
	pool = m->no_direct ? 0 : m->ring;
	m->held_max = held;
	m->nslots = (unsigned)pool + held;
	m->slots = pf_calloc(m->nslots, sizeof(*m->slots));
	m->free = pf_calloc(m->nslots, sizeof(*m->free));
	m->steps = pf_calloc(m->ring, sizeof(*m->steps));
	m->rowsrc = pf_malloc((size_t)m->ring * m->host_batch);
	m->sinks = pf_malloc_aligned(m->n * sizeof(*m->sinks), 64);
	if (m->sinks)
		memset(m->sinks, 0, m->n * sizeof(*m->sinks));
	if (!m->slots || !m->free || !m->steps || !m->rowsrc || !m->sinks)
		return make_failed(err);
	if (pthread_mutex_init(&m->mu, NULL))
		return make_failed(err);
	m->mu_made = true;
	/* One mapping for all: a slot's pages are faulted in when it is
	 * first used, and the free ones are taken most recent first. */
	m->slot_bytes = slot_bytes;
	m->mem_len = slot_bytes * m->nslots;
	m->mem = pf_pool_alloc(m->mem_len ? m->mem_len : MIX_ALIGN);
	if (!m->mem)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory for the mixture's batches (%zu MiB)",
				    m->mem_len >> 20);
	for (size_t k = 0; k < m->n; k++) {
		mix_sink *sk = &m->sinks[k];
		uint64_t n = places(m, k);

		*sk = (mix_sink){ .m = m, .steps = m->steps, .mem = m->mem, .toff = m->toff,
				  .fbytes = m->fbytes, .slot_bytes = slot_bytes,
				  .block_bytes = m->block_bytes, .mask = n - 1, .rbits = rbits,
				  .ibits = ibits, .features = m->features, .keep = held };
		sk->pos = pf_malloc(n * sizeof(*sk->pos));
		sk->direct = pf_calloc(n, 1);
		if (m->inner_index)
			sk->inner = pf_malloc(n * sizeof(*sk->inner));
		m->src[k].sk = sk;
		if (!sk->pos || !sk->direct || (m->inner_index && !sk->inner))
			return make_failed(err);
	}
	for (unsigned i = 0; i < m->nslots; i++) {
		mix_slot *s = &m->slots[i];

		m->free[m->nfree++] = (int32_t)(m->nslots - 1 - i);
		s->core = pf_calloc(cores, sizeof(*s->core));
		s->tensors = pf_calloc((size_t)cores * nt, sizeof(*s->tensors));
		s->valid = pf_calloc((size_t)cores * pcb, 1);
		if (!s->core || !s->tensors || !s->valid)
			return make_failed(err);
		for (uint32_t c = 0; c < cores; c++) {
			pf_core_batch *cb = &s->core[c];

			cb->block = (uint8_t *)m->mem + slot_bytes * i + (size_t)c * m->block_bytes;
			cb->block_bytes = m->block_bytes;
			cb->tensors = s->tensors + (size_t)c * nt;
			cb->ntensors = nt;
			cb->valid = s->valid + (size_t)c * pcb;
			for (uint32_t f = 0; f < nt; f++)
				cb->tensors[f] = (pf_tensor){
					.name = f < m->features ? spec->f[f].name : "_source",
					.dtype = f < m->features ? spec->f[f].dtype : PF_DTYPE_INT32,
					.len = f < m->features ? spec->f[f].len : 1,
					.data = (uint8_t *)cb->block + m->toff[f],
				};
		}
		s->batch.core = s->core;
		s->batch.cores = cores;
		s->batch.per_core_batch = pcb;
	}
	return 0;
}

void pf_mix_free_slots(pf_mixture *m)
{
	for (unsigned i = 0; m->slots && i < m->nslots; i++) {
		pf_free(m->slots[i].core);
		pf_free(m->slots[i].tensors);
		pf_free(m->slots[i].valid);
	}
	if (m->mem)
		pf_pool_free(m->mem, m->mem_len ? m->mem_len : MIX_ALIGN, false);
	for (size_t k = 0; m->sinks && k < m->n; k++) {
		pf_free(m->sinks[k].pos);
		pf_free(m->sinks[k].direct);
		pf_free(m->sinks[k].inner);
	}
	pf_free(m->sinks);
	if (m->mu_made)
		pthread_mutex_destroy(&m->mu);
	pf_free(m->rowsrc);
	pf_free(m->steps);
	pf_free(m->free);
	pf_free(m->slots);
}

/* ------------------------------------------------------------------ */
/* Where each source's records go                                      */

/* A free slot for ring step e, unless it has one; a decoder's only while
 * more than the consumer may need are free.  @return it, or -1. */
static int32_t take_slot(pf_mixture *m, int32_t *e, unsigned keep)
{
	int32_t i;

	pthread_mutex_lock(&m->mu);
	i = *e;
	if (i < 0 && m->nfree > keep) {
		i = m->free[--m->nfree];
		__atomic_store_n(e, i, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&m->mu);
	return i;
}

/* Record c of a source's loader (from the sink, a decoder): its place,
 * when the schedule has given it one and a slot is there for its step. */
static bool sink_aim(void *ctx, uint64_t c, uint8_t **dst)
{
	mix_sink *sk = ctx;
	uint32_t p, row, core, i;
	int32_t *e, si;
	uint8_t *block;

	if (c < sk->c0 || c >= __atomic_load_n(&sk->mapped, __ATOMIC_ACQUIRE))
		return false;
	p = sk->pos[c & sk->mask];
	e = &sk->steps[p >> sk->rbits];
	si = __atomic_load_n(e, __ATOMIC_ACQUIRE);
	if (si < 0 && (si = take_slot(sk->m, e, sk->keep)) < 0)
		return false;
	row = p & ((1u << sk->rbits) - 1);
	core = row >> sk->ibits;
	i = row & ((1u << sk->ibits) - 1);
	block = sk->mem + (size_t)si * sk->slot_bytes + (size_t)core * sk->block_bytes;
	for (uint32_t f = 0; f < sk->features; f++)
		dst[f] = block + sk->toff[f] + (size_t)i * sk->fbytes[f];
	sk->direct[c & sk->mask] = 1;
	return true;
}

/* Give the steps [m->mapped_step, m->step + ring) their rows' sources
 * (m->rowsrc), and each source's records their places, published to its
 * decoders; up to a step some source has no room to keep places for. */
static void map_ahead(pf_mixture *m)
{
	uint64_t lim = m->step + m->ring < m->end ? m->step + m->ring : m->end;
	bool more = m->mapped_step < lim;

	for (; m->mapped_step < lim; m->mapped_step++) {
		uint64_t t = m->mapped_step;
		uint8_t *rs = m->rowsrc + (size_t)(t % m->ring) * m->host_batch;
		bool room = true;

		pf_mix_schedule_seek(m, t);
		pf_mix_step_sources(m, t, rs);
		for (size_t k = 0; k < m->n; k++)
			room &= m->src[k].mapping + m->host_batch - m->src[k].used <=
				m->sinks[k].mask + 1;
		if (!room)
			break;
		/* Step t - ring, which the entry held, was handed out. */
		__atomic_store_n(&m->steps[t % m->ring], -1, __ATOMIC_RELAXED);
		for (uint32_t c = 0, j = 0; c < m->topo.cores; c++)
			for (uint32_t i = 0; i < m->topo.per_core_batch; i++, j++) {
				mix_source *s = &m->src[rs[j]];
				mix_sink *sk = s->sk;

				sk->pos[s->mapping & sk->mask] =
					(uint32_t)(t % m->ring) << sk->rbits | c << sk->ibits | i;
				if (sk->inner)
					sk->inner[s->mapping & sk->mask] = t * m->host_batch + j;
				s->mapping++;
			}
	}
	for (size_t k = 0; more && k < m->n; k++)
		__atomic_store_n(&m->sinks[k].mapped, m->src[k].mapping, __ATOMIC_RELEASE);
}

void pf_mix_start_batches(pf_mixture *m)
{
	m->started = true;
	m->mapped_step = m->step;
	for (size_t k = 0; k < m->n; k++) {
		mix_source *s = &m->src[k];

		/* Its loader's run records from the first row not yet taken
		 * of its first batch. */
		s->used = s->mapping = s->cur ? s->cur_row : 0;
		s->lbase = 0;
		s->sk->c0 = s->sk->mapped = s->used;
	}
	map_ahead(m);
	for (size_t k = 0; k < m->n && !m->no_direct; k++) {
		mix_source *s = &m->src[k];

		s->sk->sink = (pf_row_sink){ sink_aim, s->sk };
		/* Not a bridge (an elastic resume's): its loader changes at
		 * its epoch's end, and its rows are copied. */
		if (s->l && !s->next)
			__atomic_store_n(&s->l->sink, &s->sk->sink, __ATOMIC_RELEASE);
	}
}

/* ------------------------------------------------------------------ */
/* Batches                                                              */

static void fail(pf_mixture *m, const mix_source *s, int code)
{
	const pf_error *e = pf_pipe_last_error(s->l);
	pf_error cause;

	pf_error_clear(&cause);
	if (e)
		cause = *e;
	else
		pf_error_set(&cause, code ? code : -EIO, PF_OFFSET_NONE, 0, "%s",
			     code ? pf_strerror(code) : "it ended before the mixture");
	pf_mix_source_error(&m->err, s->name, &cause);
	if (!m->err.code)
		m->err.code = code ? code : -EIO;
	m->failed = true;
}

/* The next row of source k: its batch's, a new batch taken when that one
 * is used up (its state before it kept for a checkpoint). */
static int next_row(pf_mixture *m, size_t k, const pf_core_batch **cb, uint32_t *row)
{
	mix_source *s = &m->src[k];
	int ret;

	if (!s->cur || s->cur_row == s->sub_batch) {
		int64_t n;

		if (s->cur)
			pf_pipe_release(s->l, s->cur);
		s->cur = NULL;
		/* Encoded once where the buffer holds it (it says its
		 * length when it does not). */
		n = pf_pipe_save_state(s->l, s->before, s->before_cap);
		if (n < 0)
			return (int)n;
		if ((size_t)n > s->before_cap) {
			uint8_t *b = pf_realloc(s->before, (size_t)n + 64);

			if (!b)
				return -ENOMEM;
			s->before = b;
			s->before_cap = (size_t)n + 64;
			pf_pipe_save_state(s->l, s->before, s->before_cap);
		}
		s->before_len = (size_t)n;
		ret = pf_pipe_next(s->l, &s->cur);
		if (ret == 0 && s->next) {
			/* The bridge's epoch is over: the bridge of the next one
			 * when there is one, else the loader of the next epochs
			 * takes over, its state the one before. */
			pf_pipe_free(s->l);
			if (s->npend) {
				pf_mix_pop_pending(s);
			} else {
				s->l = s->next;
				s->next = NULL;
				s->sub_batch = s->whole_batch;
			}
			/* This row is its first (next() counted it in used;
			 * before the batches start, they count afresh). */
			s->lbase = s->used ? s->used - 1 : 0;
			s->gen++;
			return next_row(m, k, cb, row);
		}
		if (ret != 1) {
			s->cur = NULL;
			fail(m, s, ret);
			return m->err.code;
		}
		s->cur_row = 0;
		s->epoch = s->cur->epoch;
		s->any = true;
	}
	*cb = &s->cur->core[0];
	*row = s->cur_row++;
	s->taken++;
	return 0;
}

int pf_mix_take_row(pf_mixture *m, size_t k, const pf_core_batch **cb, uint32_t *row)
{
	return next_row(m, k, cb, row);
}

/* One row of a feature into the mixture's batch.  Long rows go out with
 * non-temporal stores, as the decoders write a plain loader's rows
 * (spec_fast.c): the batch is read by the consumer after other batches
 * have been made, and ordinary stores would first read every line of it
 * from memory.  @return whether it streamed (an sfence is then due). */
static bool copy_row(uint8_t *dst, const uint8_t *src, size_t n)
{
#if defined(__x86_64__)
	if (n >= 1024 && ((uintptr_t)dst & 15) == 0 && (n & 15) == 0 && !mix_no_stream) {
		size_t o = 0;

		for (; o + 64 <= n; o += 64) {
			__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(src + o));
			__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + o + 16));
			__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + o + 32));
			__m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + o + 48));

			_mm_stream_si128((__m128i *)(void *)(dst + o), a);
			_mm_stream_si128((__m128i *)(void *)(dst + o + 16), b);
			_mm_stream_si128((__m128i *)(void *)(dst + o + 32), c);
			_mm_stream_si128((__m128i *)(void *)(dst + o + 48), d);
		}
		for (; o < n; o += 16)	/* n is a multiple of 16 */
			_mm_stream_si128((__m128i *)(void *)(dst + o),
					 _mm_loadu_si128((const __m128i *)(const void *)(src + o)));
		return true;
	}
#endif
	memcpy(dst, src, n);
	return false;
}

int pf_mixture_next(pf_mixture *m, pf_batch **out)
{
	bool streamed = false;
	uint32_t pcb = m->topo.per_core_batch;
	const uint8_t *rs;
	int32_t *e;
	mix_slot *slot;
	int32_t si;
	uint64_t t0 = pf_now_ns(), dt;
	int ret;

	m->misused = m->held >= m->held_max;
	if (m->misused) {
		pf_error_clear(&m->misuse);
		pf_error_set(&m->misuse, -EBUSY, PF_OFFSET_NONE, 0,
			     "%u batches held, at most prefetch + 1 = %u; release one first",
			     m->held, m->held_max);
		return -EBUSY;
	}
	if (m->failed)
		return m->err.code;
	if (!m->slots) {	/* plan_only */
		m->misused = true;
		pf_error_clear(&m->misuse);
		return pf_error_set(&m->misuse, -EINVAL, PF_OFFSET_NONE, 0,
				    "a plan-only loader (plan_only) hands out no batch");
	}
	if (m->step >= m->end)
		return 0;
	/* Its slot: the one its rows were written into, or a free one (the
	 * consumer's are kept free for it). */
	e = &m->steps[m->step % m->ring];
	si = __atomic_load_n(e, __ATOMIC_ACQUIRE);
	if (si < 0)
		si = take_slot(m, e, 0);
	slot = &m->slots[si];
	rs = m->rowsrc + (size_t)(m->step % m->ring) * m->host_batch;
	for (uint32_t r = 0, i = 0, core = 0; r < m->host_batch; r++) {
		size_t k = rs[r];
		mix_source *s = &m->src[k];
		pf_core_batch *dst = &slot->core[core];
		uint32_t srow = 0;
		const pf_core_batch *src = NULL;
		uint64_t c = s->used++;

		ret = next_row(m, k, &src, &srow);
		if (ret < 0)
			return ret;
		if (s->sk->direct[c & s->sk->mask]) {
			/* Its decoder wrote it here. */
			s->sk->direct[c & s->sk->mask] = 0;
			m->direct_rows++;
		} else {
			for (uint32_t f = 0; f < m->features; f++)
				streamed |= copy_row((uint8_t *)dst->tensors[f].data +
							     i * m->fbytes[f],
						     (const uint8_t *)src->tensors[f].data +
							     srow * m->fbytes[f], m->fbytes[f]);
		}
		if (m->source_feature)
			((int32_t *)dst->tensors[m->features].data)[i] = (int32_t)k;
		((uint8_t *)dst->valid)[i] = src->valid[srow];
		if (++i == pcb) {
			i = 0;
			core++;
		}
	}
#if defined(__x86_64__)
	if (streamed)
		_mm_sfence();	/* the rows complete before the batch is handed out */
#endif
	for (uint32_t c = 0; c < m->topo.cores; c++) {
		slot->core[c].nvalid = 0;
		for (uint32_t i = 0; i < pcb; i++)
			slot->core[c].nvalid += slot->core[c].valid[i];
	}
	slot->batch.epoch = m->src[0].epoch;
	slot->batch.step = m->step;
	slot->batch.global_step = m->step;
	slot->batch.epoch_start = m->step == 0;
	slot->batch.epoch_end = m->step + 1 == m->end;
	slot->held = true;
	m->held++;
	m->step++;
	map_ahead(m);
	if (!m->first_ns)
		m->first_ns = pf_now_ns() - m->start_ns;
	dt = pf_now_ns() - t0;
	m->next_wait_ns += dt;
	m->next_hist[pf_hist_bucket(dt)]++;
	*out = &slot->batch;
	return 1;
}

void pf_mixture_release(pf_mixture *m, pf_batch *b)
{
	mix_slot *s = (mix_slot *)((char *)b - offsetof(mix_slot, batch));

	if (!s->held)
		return;
	s->held = false;
	m->held--;
	pthread_mutex_lock(&m->mu);
	m->free[m->nfree++] = (int32_t)(s - m->slots);
	pthread_mutex_unlock(&m->mu);
}

uint64_t pf_mixture_direct_rows(const pf_mixture *m)
{
	return m->direct_rows;
}

const pf_error *pf_mixture_last_error(const pf_mixture *m)
{
	if (m->misused)
		return &m->misuse;
	return m->failed ? &m->err : NULL;
}
