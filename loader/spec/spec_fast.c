/* SPDX-License-Identifier: Apache-2.0 */
/* pf_spec_decode(): one record's tf.train.Example wire bytes straight into the spec's tensors. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "podfeed.h"
#include "spec_internal.h"

/*
 * The authority is pf_example_decode() followed by pf_spec_apply_to()
 * (the slow path below): same output bytes, same acceptance, on every
 * input.  The fast path walks the record once and writes as it goes, but
 * only for the shapes TensorFlow writes, each checked as strictly as
 * example.c checks it:
 *
 *   Example   only field 1 (Features), tag 0x0a; given twice its entries
 *             simply follow each other, as protobuf-c merges them
 *   Features  only field 1 (map entries), tag 0x0a
 *   entry     at most one key (0x0a) and one value (0x12), in any order
 *   Feature   at most one of bytes_list (0x0a), float_list (0x12),
 *             int64_list (0x1a)
 *   lists     Int64List and FloatList: nothing, or one packed field 1
 *             (0x0a); BytesList: any number of values (0x0a)
 *
 * with one-byte tags and lengths of at most 5 bytes, at most INT_MAX and
 * inside their message.  A spec feature whose key comes again is written
 * again: the last entry wins, as in example.c's map.  Anything else (an
 * unknown or unpacked field, a second key or value or list, a key cut
 * short by a NUL, a wrong kind, a feature without default missing, malformed
 * bytes, a misaligned destination) returns to pf_spec_decode(), which
 * runs the slow path: it gives the authoritative result and error.
 *
 * Features not in the spec are checked but not stored: a packed int64
 * list by the varint decoder with no room (counting and checking only),
 * a float list by its length, a bytes list by its framing.
 *
 * int64 lists into int32/int64 tensors, the common case, go through
 * pf_varint_decode_*(), which clamps as pf_spec_int_bounds() says, and
 * then the padding.  Everything else (floats, bytes, int64 into float32)
 * is gathered into a pf_feature (typed arrays copied into the arena where
 * the wire bytes are not aligned) and handed to pf_spec_apply_one(), the
 * slow path's own code.
 */

#define FAST_NO 1	/* not decided here: run the slow path */

struct walk {
	const pf_spec *spec;
	uint8_t *const *dst;
	pf_arena *arena;
	size_t mark;		/* arena->used on entry */
	uint32_t n;		/* features in the spec */
	uint64_t seen;		/* bit i: feature i had an entry */
	bool streamed;		/* non-temporal stores issued: sfence before return */
	/* The list store() last decoded whole, and its values: its made
	 * LENGTHS feature needs no count of its own. */
	const struct list *counted;
	uint64_t count;
};

/*
 * Long int rows go out with non-temporal (streaming) stores.  A batch
 * slot is written once here and read much later by the consumer, after
 * ~128 MiB of other slots have been written: ordinary stores first read
 * every line of the row from memory (a write miss allocates the line)
 * and then write it back, and they push the decoder's own working set
 * (zstd's window and tables, the record) out of the caches.  Measured
 * with tokens:int64[512] (loadbench, 2 threads, CPU time of 5 runs,
 * interleaved, busy machine): 1350-1650 ms with ordinary stores, about
 * 1000 streamed; whole aligned lines with ordinary stores (the same
 * staging, no streaming) gave 1265-1650, so it is the streaming, not the
 * staging, that pays in the loader.
 *
 * The varint decoder's vector stores overlap (each block writes 64 lanes
 * and advances by the values it holds), so it cannot stream by itself:
 * the values are decoded into a staging area in the arena (the caller's
 * per-thread scratch, hot in L1), and the row goes out a whole 64-byte
 * line per store: the lines holding values from the stage, the others
 * from a line of the pad value.  The stores are weakly ordered:
 * pf_spec_decode() ends with an sfence when it issued any, so the row is
 * complete (globally visible) before the caller publishes it, whatever
 * it publishes it with.  That fence waits for the row to drain (~60 ns
 * for 4 KiB here); a caller that fenced once per batch of records itself
 * would not pay it per record.
 *
 * Decoding straight into the row instead, each line streamed as the
 * values complete it (a one- or two-line buffer, or a row-sized one
 * flushed as it fills), was measured with the AVX2 decoder
 * (tokens:int32[512], 42,618 records, rows beyond L2, 3 interleaved
 * pairs of CPU times on a loaded machine): 272-407 ns a record against
 * 230-308 for the stage, and 3,821 instructions against 3,756
 * (callgrind).  A line read back right after the stores that fill it
 * waits for them, and the per-block bookkeeping costs what the copy
 * did; the stage's lines are read after the whole row is written.
 *
 * PODFEED_STREAM=0 turns this off (for measuring); rows under
 * STREAM_MIN_BYTES, and rows whose stage does not fit in the arena, use
 * ordinary stores.
 */
#define STREAM_MIN_BYTES 1024u

#if defined(__x86_64__)
typedef struct stream_ops {
	/* lines x 64 bytes from src to dst (dst 64-byte aligned, src too) */
	void (*copy)(uint8_t *dst, const uint8_t *src, size_t lines);
	/* the 64 bytes at line to each of lines lines at dst */
	void (*fill)(uint8_t *dst, const uint8_t *line, size_t lines);
} stream_ops;

__attribute__((target("avx512f")))
static void copy_avx512(uint8_t *dst, const uint8_t *src, size_t lines)
{
	for (size_t i = 0; i < lines; i++)
		_mm512_stream_si512((void *)(dst + 64 * i),
				    _mm512_load_si512((const void *)(src + 64 * i)));
}

__attribute__((target("avx512f")))
static void fill_avx512(uint8_t *dst, const uint8_t *line, size_t lines)
{
	__m512i v = _mm512_load_si512((const void *)line);

	for (size_t i = 0; i < lines; i++)
		_mm512_stream_si512((void *)(dst + 64 * i), v);
}

__attribute__((target("avx")))
static void copy_avx(uint8_t *dst, const uint8_t *src, size_t lines)
{
	for (size_t i = 0; i < lines; i++) {
		_mm256_stream_si256((__m256i *)(void *)(dst + 64 * i),
				    _mm256_load_si256((const __m256i *)(const void *)(src + 64 * i)));
		_mm256_stream_si256((__m256i *)(void *)(dst + 64 * i + 32),
				    _mm256_load_si256((const __m256i *)(const void *)(src + 64 * i + 32)));
	}
}

__attribute__((target("avx")))
static void fill_avx(uint8_t *dst, const uint8_t *line, size_t lines)
{
	__m256i a = _mm256_load_si256((const __m256i *)(const void *)line);
	__m256i b = _mm256_load_si256((const __m256i *)(const void *)(line + 32));

	for (size_t i = 0; i < lines; i++) {
		_mm256_stream_si256((__m256i *)(void *)(dst + 64 * i), a);
		_mm256_stream_si256((__m256i *)(void *)(dst + 64 * i + 32), b);
	}
}

static void copy_sse2(uint8_t *dst, const uint8_t *src, size_t lines)
{
	for (size_t i = 0; i < 4 * lines; i++)
		_mm_stream_si128((__m128i *)(void *)(dst + 16 * i),
				 _mm_load_si128((const __m128i *)(const void *)(src + 16 * i)));
}

static void fill_sse2(uint8_t *dst, const uint8_t *line, size_t lines)
{
	for (size_t i = 0; i < lines; i++)
		for (size_t k = 0; k < 4; k++)
			_mm_stream_si128((__m128i *)(void *)(dst + 64 * i + 16 * k),
					 _mm_load_si128((const __m128i *)(const void *)(line + 16 * k)));
}

static stream_ops streaming;	/* copy NULL: ordinary stores */
static pthread_once_t stream_once = PTHREAD_ONCE_INIT;

/* The widest stores the CPU has, within what PODFEED_SIMD allows: with
 * avx2 or scalar there (to measure a machine without AVX-512, or without
 * AVX, on one that has them) the rows get the stores such a machine
 * would use, as the varints get its decoder. */
static void choose_stream(void)
{
	const char *want = getenv("PODFEED_STREAM");
	const char *simd = getenv("PODFEED_SIMD");
	bool no512 = simd && (!strcmp(simd, "avx2") || !strcmp(simd, "scalar"));
	bool noavx = simd && !strcmp(simd, "scalar");

	if (want && !strcmp(want, "0"))
		return;
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && !no512)
		streaming = (stream_ops){ copy_avx512, fill_avx512 };
	else if (__builtin_cpu_supports("avx") && !noavx)
		streaming = (stream_ops){ copy_avx, fill_avx };
	else
		streaming = (stream_ops){ copy_sse2, fill_sse2 };
}

static inline bool stream_on(size_t bytes)
{
	if (bytes < STREAM_MIN_BYTES)
		return false;
	pthread_once(&stream_once, choose_stream);
	return streaming.copy != NULL;
}

/* The int row at out (fs->len values of size bytes), its first n values
 * in stage (at out's offset in its line), the rest the pad: the pad
 * completes the line holding the last value in the stage, and a line of
 * it, at padline, fills the lines after.  Partial lines at either end of
 * the row get ordinary stores. */
static void stream_row(struct walk *w, const pf_feature_spec *fs, uint8_t *out,
		       uint8_t *stage, uint8_t *padline, uint32_t n, size_t size)
{
	size_t bytes = (size_t)fs->len * size, data = (size_t)n * size;
	size_t off = (uintptr_t)out & 63u, head = (64u - off) & 63u;
	size_t full, lines, tail, from;

	/* The pad line, and the stage from the last value to the end of its
	 * line (or of the row): a line of pad after the value (the stage has
	 * room for it, store_ints()).  The pad is pf_spec_pad_from()'s: the
	 * value converted to the dtype once, repeated.  (Converting it per
	 * lane, and padding the stage a value at a time, cost ~250 of the
	 * ~3,800 instructions of a tokens:int32[512] record.) */
	full = (off + data + 63u) / 64u * 64u - off;
	if (full > bytes)
		full = bytes;
	if (fs->dtype == PF_DTYPE_INT64) {
		int64_t v = (int64_t)fs->pad;

		for (size_t b = 0; b < 64; b += sizeof(v))
			memcpy(padline + b, &v, sizeof(v));
	} else {
		int32_t v = (int32_t)fs->pad;

		for (size_t b = 0; b < 64; b += sizeof(v))
			memcpy(padline + b, &v, sizeof(v));
	}
	memcpy(stage + data, padline, 64);
	if (head > bytes)
		head = bytes;
	if (head)
		memcpy(out, stage, head);
	lines = (bytes - head) / 64u;
	tail = bytes - head - 64u * lines;
	/* Lines [head, full) from the stage, the rest from the pad line. */
	from = full > head ? (full - head) / 64u : 0;
	if (from > lines)
		from = lines;
	streaming.copy(out + head, stage + head, from);
	streaming.fill(out + head + 64u * from, padline, lines - from);
	if (tail)
		memcpy(out + bytes - tail, head + 64u * lines < full ?
		       stage + bytes - tail : padline, tail);
	w->streamed = true;
}

static inline void stream_fence(struct walk *w)
{
	if (w->streamed)
		_mm_sfence();
	w->streamed = false;
}
#else
static inline bool stream_on(size_t bytes)
{
	(void)bytes;
	return false;
}

static void stream_row(struct walk *w, const pf_feature_spec *fs, uint8_t *out,
		       uint8_t *stage, uint8_t *padline, uint32_t n, size_t size)
{
	(void)w;
	(void)stage;
	(void)padline;
	(void)size;
	(void)fs;
	(void)out;
	(void)n;
}

static inline void stream_fence(struct walk *w)
{
	(void)w;
}
#endif

/* A length prefix at *p as example.c reads one: at most 5 bytes, at most
 * INT_MAX, fitting before end.  Moves *p past it. */
static inline bool get_len(const uint8_t **p, const uint8_t *end, size_t *len)
{
	const uint8_t *q = *p;
	size_t max = (size_t)(end - q) < 5 ? (size_t)(end - q) : 5;
	uint64_t v = 0;

	/* One or two bytes: every length under 16 KiB. */
	if (max >= 1 && q[0] < 0x80) {
		v = q[0];
		q += 1;
		goto check;
	}
	if (max >= 2 && q[1] < 0x80) {
		v = (q[0] & 0x7fu) | (uint64_t)q[1] << 7;
		q += 2;
		goto check;
	}
	for (size_t i = 0; i < max; i++) {
		v |= (uint64_t)(q[i] & 0x7fu) << (7 * i);
		if (q[i] & 0x80)
			continue;
		q += i + 1;
		goto check;
	}
	return false;
check:
	if (v > INT_MAX || v > (uint64_t)(end - q))
		return false;
	*p = q;
	*len = (size_t)v;
	return true;
}

/* The list message of a Feature: its kind (NONE when no list is set) and
 * content. */
struct list {
	pf_kind kind;
	const uint8_t *p;
	size_t len;
};

static int parse_feature(const uint8_t *p, const uint8_t *end, struct list *l)
{
	l->kind = PF_KIND_NONE;
	l->p = NULL;
	l->len = 0;
	while (p < end) {
		uint8_t tag = *p++;

		if (l->kind != PF_KIND_NONE ||
		    (tag != 0x0a && tag != 0x12 && tag != 0x1a) ||
		    !get_len(&p, end, &l->len))
			return FAST_NO;
		l->kind = tag == 0x0a ? PF_KIND_BYTES :
			  tag == 0x12 ? PF_KIND_FLOAT : PF_KIND_INT64;
		l->p = p;
		p += l->len;
	}
	return 0;
}

/* An Int64List or FloatList: empty, or one packed field 1 filling it.
 * Sets the packed bytes. */
static int packed(const struct list *l, const uint8_t **data, size_t *len)
{
	const uint8_t *p = l->p, *end = l->p + l->len;

	*data = p;
	*len = 0;
	if (p == end)
		return 0;
	if (*p++ != 0x0a || !get_len(&p, end, len) || p + *len != end)
		return FAST_NO;
	*data = p;
	if (l->kind == PF_KIND_FLOAT && *len % 4)
		return FAST_NO;		/* an error: the slow path says so */
	return 0;
}

/* A BytesList: values (field 1) only.  The first value and the count. */
static int bytes_values(const struct list *l, pf_bytes *first, uint32_t *count)
{
	const uint8_t *p = l->p, *end = l->p + l->len;
	uint32_t n = 0;

	first->data = NULL;
	first->len = 0;
	while (p < end) {
		size_t len;

		if (*p++ != 0x0a || !get_len(&p, end, &len))
			return FAST_NO;
		if (!n) {
			first->data = p;
			first->len = (uint32_t)len;
		}
		n++;
		p += len;
	}
	*count = n;
	return 0;
}

/* n bytes of scratch from the arena, 8-byte aligned; given back by
 * pf_spec_decode() (the arena is as it was on entry when it returns). */
static void *scratch(struct walk *w, size_t n)
{
	pf_arena *a = w->arena;
	size_t off = (a->used + 7u) & ~(size_t)7u;

	if (off < a->used || off > a->cap || n > a->cap - off)
		return NULL;
	a->used = off + n;
	return a->base + off;
}

/* An int64 list into an int32/int64 row: decoded, clamped, padded.
 * Long rows are staged and streamed (above) when the stage fits in the
 * arena: it holds at most min(fs->len, len) values (a varint takes a
 * byte at least), 8 bytes each, which PF_ARENA_BYTES_FOR(record length)
 * always has room for. */
static int store_ints(struct walk *w, const pf_feature_spec *fs,
		      const uint8_t *data, size_t len, uint8_t *out, int64_t *count)
{
	size_t size = fs->dtype == PF_DTYPE_INT64 ? 8 : 4;
	uint32_t cap = len < fs->len ? (uint32_t)len : fs->len;
	uint8_t *to = out, *stage = NULL, *padline = NULL;
	int64_t lo, hi, n;

	/* Not padded: the values alone, where the reader of the length
	 * beside them finds them (packing's inner rows). */
	if (!fs->nopad && stream_on((size_t)fs->len * size)) {
		/* A line for the pad, then the values at out's offset in
		 * their line, and room to pad out their last line. */
		uint8_t *area = scratch(w, 64u + 64u + 64u + (size_t)cap * size + 64u);

		if (area) {
			padline = (uint8_t *)(((uintptr_t)area + 63u) & ~(uintptr_t)63u);
			stage = padline + 64u + ((uintptr_t)out & 63u);
			to = stage;
		}
	}
	pf_spec_int_bounds(fs, &lo, &hi);
	if (fs->dtype == PF_DTYPE_INT32)
		n = pf_varint_decode_i32(data, len, (int32_t *)(void *)to,
					 stage ? cap : fs->len, (int32_t)lo,
					 (int32_t)hi, NULL);
	else
		n = pf_varint_decode_i64(data, len, (int64_t *)(void *)to,
					 stage ? cap : fs->len, lo, hi, NULL);
	w->arena->used = w->mark;
	if (n < 0)
		return FAST_NO;
	*count = n;
	if (stage)
		stream_row(w, fs, out, stage, padline,
			   (uint64_t)n < fs->len ? (uint32_t)n : fs->len, size);
	else if ((uint64_t)n < fs->len && !fs->nopad)
		pf_spec_pad_from(fs, out, (uint32_t)n);
	return 0;
}

/* Spec feature i from its entry's list. */
static int store(struct walk *w, uint32_t i, const struct list *l)
{
	const pf_feature_spec *fs = &w->spec->f[i];
	uint8_t *out = w->dst[i];
	pf_feature f = { .kind = l->kind };
	const uint8_t *data;
	size_t len, take;
	int64_t n;
	pf_error scratch_err;
	int ret;

	w->counted = NULL;
	switch (l->kind) {
	case PF_KIND_NONE:
		break;
	case PF_KIND_INT64:
		if (packed(l, &data, &len))
			return FAST_NO;
		if (fs->dtype == PF_DTYPE_INT32 || fs->dtype == PF_DTYPE_INT64) {
			/* A valid run has a varint for each byte below 0x80:
			 * its count is list_length()'s. */
			ret = store_ints(w, fs, data, len, out, &n);
			if (ret == 0) {
				w->counted = l;
				w->count = (uint64_t)n;
			}
			return ret;
		}
		/* int64 into float32 (or bytes: refused below) */
		take = len < fs->len ? len : fs->len;
		f.v.int64s = scratch(w, take * sizeof(int64_t));
		if (take && !f.v.int64s)
			return FAST_NO;
		n = pf_varint_decode_i64(data, len, (int64_t *)f.v.int64s, take,
					 INT64_MIN, INT64_MAX, NULL);
		if (n < 0)
			return FAST_NO;
		f.count = (uint32_t)n;
		break;
	case PF_KIND_FLOAT:
		if (packed(l, &data, &len))
			return FAST_NO;
		f.count = (uint32_t)(len / 4);
		take = f.count < fs->len ? f.count : fs->len;
		if (take) {
			/* The wire's floats are not aligned. */
			float *v = scratch(w, take * sizeof(float));

			if (!v)
				return FAST_NO;
			memcpy(v, data, take * sizeof(float));
			f.v.floats = v;
		}
		break;
	case PF_KIND_BYTES: {
		pf_bytes *first = scratch(w, sizeof(*first));

		if (!first || bytes_values(l, first, &f.count))
			return FAST_NO;
		f.v.bytes = first;
		break;
	}
	}
	ret = pf_spec_apply_one(fs, &f, out, &scratch_err);
	w->arena->used = w->mark;
	return ret < 0 ? FAST_NO : 0;
}

/* A record's length of a list (for a made LENGTHS feature): its values
 * (a varint ends at each byte below 0x80), or its first value's bytes. */
static int list_length(const struct list *l, uint64_t *n)
{
	const uint8_t *data;
	size_t len;
	pf_bytes first;
	uint32_t count;

	*n = 0;
	switch (l->kind) {
	case PF_KIND_NONE:
		return 0;
	case PF_KIND_BYTES:
		if (bytes_values(l, &first, &count))
			return FAST_NO;
		*n = first.len;
		return 0;
	case PF_KIND_FLOAT:
		if (packed(l, &data, &len))
			return FAST_NO;
		*n = len / 4;
		return 0;
	case PF_KIND_INT64: {
		size_t k = 0;

		if (packed(l, &data, &len))
			return FAST_NO;
		/* A word at a time: the bytes below 0x80, their top bits
		 * clear, summed by a multiply (a token list of 500 ids is
		 * ~1,000 bytes: the byte loop was a quarter of packing's
		 * decode). */
		for (; k + 8 <= len; k += 8) {
			uint64_t w;

			memcpy(&w, data + k, 8);
			w = ~w & 0x8080808080808080ull;
			*n += ((w >> 7) * 0x0101010101010101ull) >> 56;
		}
		for (; k < len; k++)
			*n += data[k] < 0x80;
		return 0;
	}
	}
	return FAST_NO;
}

/* A Feature whose key is not in the spec: checked, not stored. */
static int check_list(const struct list *l)
{
	const uint8_t *data;
	size_t len;
	uint64_t n;

	if (list_length(l, &n))
		return FAST_NO;
	if (l->kind != PF_KIND_INT64)
		return 0;
	packed(l, &data, &len);
	return pf_varint_decode_i64(data, len, NULL, 0, INT64_MIN, INT64_MAX, NULL) < 0 ?
	       FAST_NO : 0;
}

/* Feature i's made LENGTHS feature, when it has one (f[i + 1]). */
static int store_length(struct walk *w, uint32_t i, const struct list *l)
{
	const pf_feature_spec *fs;
	uint64_t n;

	if (i + 1 >= w->n)
		return 0;
	fs = &w->spec->f[i + 1];
	if (fs->role != PF_ROLE_LENGTHS && fs->role != PF_ROLE_LENGTHS_FULL)
		return 0;
	if (w->counted == l)
		n = w->count;
	else if (list_length(l, &n))
		return FAST_NO;
	pf_spec_store_length(&w->spec->f[i], fs, n, w->dst[i + 1]);
	w->seen |= 1ull << (i + 1);
	return 0;
}

/* Store the entry's list into every spec feature named key (one, unless
 * a hand-made spec names a feature twice).  A key is cut at a NUL by
 * protobuf-c: when the cut is what makes it match, FAST_NO. */
static int match_store(struct walk *w, const uint8_t *key, size_t len,
		       const struct list *l)
{
	bool stored = false;

	for (uint32_t i = 0; i < w->n; i++) {
		const char *name = w->spec->f[i].name;
		size_t k = 0;

		if (w->spec->f[i].role != PF_ROLE_VALUES)
			continue;	/* made, not read */
		/* Byte by byte: most names differ at the first. */
		while (k < len && k < PF_SPEC_MAX_NAME && key[k] &&
		       key[k] == (uint8_t)name[k])
			k++;
		if (k == PF_SPEC_MAX_NAME || name[k])
			continue;	/* not this name */
		if (k < len) {
			if (!key[k])
				return FAST_NO;	/* the name, then a NUL */
			continue;	/* the name, then more */
		}
		if (store(w, i, l) || store_length(w, i, l))
			return FAST_NO;
		w->seen |= 1ull << i;
		stored = true;
	}
	return stored ? 0 : check_list(l);
}

/* One map entry {key = 1, value = 2}. */
static int entry(struct walk *w, const uint8_t *p, const uint8_t *end)
{
	const uint8_t *key = NULL, *value = NULL;
	size_t key_len = 0, value_len = 0;
	struct list l = { .kind = PF_KIND_NONE };

	while (p < end) {
		uint8_t tag = *p++;
		size_t len;

		if (!get_len(&p, end, &len))
			return FAST_NO;
		if (tag == 0x0a && !key) {
			key = p;
			key_len = len;
		} else if (tag == 0x12 && !value) {
			value = p;
			value_len = len;
		} else {
			return FAST_NO;
		}
		p += len;
	}
	if (value && parse_feature(value, value + value_len, &l))
		return FAST_NO;
	if (!key)	/* the empty name, which no spec feature has */
		return check_list(&l);
	return match_store(w, key, key_len, &l);
}

static int walk_example(struct walk *w, const uint8_t *p, const uint8_t *end)
{
	while (p < end) {
		const uint8_t *q, *qend;
		size_t len;

		/* Example.features */
		if (*p++ != 0x0a || !get_len(&p, end, &len))
			return FAST_NO;
		for (q = p, qend = p + len; q < qend; q += len) {
			/* Features.feature: one map entry */
			if (*q++ != 0x0a || !get_len(&q, qend, &len) ||
			    entry(w, q, q + len))
				return FAST_NO;
		}
		p = qend;
	}
	return 0;
}

static int fast(struct walk *w, const void *rec, size_t len)
{
	const pf_spec *spec = w->spec;
	pf_error scratch_err;

	if (len > INT_MAX)
		return FAST_NO;
	for (uint32_t i = 0; i < w->n; i++)
		if ((uintptr_t)w->dst[i] & (pf_dtype_size(spec->f[i].dtype) - 1))
			return FAST_NO;
	if (len && walk_example(w, rec, (const uint8_t *)rec + len))
		return FAST_NO;
	for (uint32_t i = 0; i < w->n; i++) {
		if (w->seen & (1ull << i))
			continue;
		if (spec->f[i].role != PF_ROLE_VALUES)
			pf_spec_apply_made(spec, i, NULL, w->dst[i]);
		else if (pf_spec_apply_one(&spec->f[i], NULL, w->dst[i], &scratch_err) < 0)
			return FAST_NO;
	}
	return 0;
}

int pf_spec_decode(const pf_spec *spec, const void *rec, size_t len,
		   pf_arena *arena, uint8_t *const dst[], pf_error *err)
{
	int ret;

	pf_error_clear(err);
	ret = pf_spec_decode_unfenced(spec, rec, len, arena, dst, err);
	pf_spec_fence();
	return ret;
}

void pf_spec_fence(void)
{
#if defined(__x86_64__)
	_mm_sfence();
#endif
}

int pf_spec_decode_unfenced(const pf_spec *spec, const void *rec, size_t len,
			    pf_arena *arena, uint8_t *const dst[], pf_error *err)
{
	struct walk w = {
		.spec = spec, .dst = dst, .arena = arena, .mark = arena->used,
		.n = spec->n < PF_SPEC_MAX_FEATURES ? spec->n : PF_SPEC_MAX_FEATURES,
	};
	pf_example ex;
	int ret;

	ret = fast(&w, rec, len);
	arena->used = w.mark;
	if (!ret)
		return 0;
	/* Streamed rows complete before the slow path below writes the same
	 * rows again with ordinary stores. */
	stream_fence(&w);
	/* The slow path: the authority on what the record holds and on
	 * what is wrong with it. */
	ret = pf_example_decode(rec, len, arena, &ex, err);
	if (!ret)
		ret = pf_spec_apply_to(spec, &ex, dst, err);
	arena->used = w.mark;
	return ret;
}
