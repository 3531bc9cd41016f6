/* SPDX-License-Identifier: Apache-2.0 */
/* The allocator hook (pf_common.h): pf_allocator_set()'s contract (refused
 * while a block is live, -EINVAL without its functions, NULL for malloc
 * again), every allocation of the library through it (its own, zstd's,
 * zlib's, protobuf-c's, the host's aligned ones, a loader's threads'), and
 * the blocks pf_malloc() and friends give under it and under malloc. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common_internal.h"
#include "pf_host.h"
#include "podfeed.h"
#include "testutil.h"

/* An allocator that counts what goes through it and poisons what it
 * gives (so a block said to be zeroed is zeroed by podfeed); fails every
 * allocation when told to.  A broken contract aborts (the loader's
 * threads call it too, where an assertion cannot). */
typedef struct counting {
	uint64_t allocs, frees, live, bytes, largest;
	bool fail;
} counting;

static counting cnt;

static void *counting_alloc(void *opaque, size_t size)
{
	counting *c = opaque;
	void *p;

	if (c != &cnt || !size)
		abort();
	__atomic_add_fetch(&c->allocs, 1, __ATOMIC_RELAXED);
	if (c->fail)
		return NULL;
	p = malloc(size);
	if (!p)
		abort();
	memset(p, 0xa5, size);
	__atomic_add_fetch(&c->live, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->bytes, size, __ATOMIC_RELAXED);
	if (size > __atomic_load_n(&c->largest, __ATOMIC_RELAXED))
		__atomic_store_n(&c->largest, size, __ATOMIC_RELAXED);
	return p;
}

static void counting_free(void *opaque, void *p)
{
	counting *c = opaque;

	if (c != &cnt || !p)
		abort();
	__atomic_add_fetch(&c->frees, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&c->live, 1, __ATOMIC_RELAXED);
	free(p);
}

static void use_counting(void)
{
	pf_allocator a = { counting_alloc, counting_free, &cnt };

	memset(&cnt, 0, sizeof(cnt));
	cr_assert_eq(pf_allocator_set(&a), 0, "nothing of the library is alive yet");
}

static void back_to_tu(void)
{
	cr_assert_eq(pf_allocator_set(&tu_allocator), 0, "a block of the test is still live");
}

Test(allocator, every_test_runs_with_the_test_allocator)
{
	uint64_t c0 = tu_alloc_count(), l0 = tu_alloc_live();
	pf_schema *s;

	cr_assert_eq(pf_schema_create(&s), 0);
	cr_assert_gt(tu_alloc_count(), c0);
	cr_assert_gt(tu_alloc_live(), l0);
	pf_schema_free(s);
	cr_assert_eq(tu_alloc_live(), l0);
}

Test(allocator, set_is_refused_while_a_block_is_live, .fini = back_to_tu)
{
	pf_allocator a = { counting_alloc, counting_free, &cnt };
	pf_schema *s, *t;
	uint64_t c0;

	memset(&cnt, 0, sizeof(cnt));
	cr_assert_eq(pf_schema_create(&s), 0);
	cr_assert_eq(pf_allocator_set(&a), -EBUSY);
	cr_assert_eq(pf_allocator_set(NULL), -EBUSY);
	/* Nothing changed: the test allocator still serves, and frees. */
	c0 = tu_alloc_count();
	cr_assert_eq(pf_schema_create(&t), 0);
	cr_assert_gt(tu_alloc_count(), c0);
	cr_assert_eq(cnt.allocs, 0);
	pf_schema_free(t);
	pf_schema_free(s);

	cr_assert_eq(pf_allocator_set(&a), 0, "nothing is live any more");
	c0 = tu_alloc_count();
	cr_assert_eq(pf_schema_create(&s), 0);
	cr_assert_gt(cnt.allocs, 0, "the new allocator serves");
	cr_assert_eq(tu_alloc_count(), c0, "the old one does not");
	pf_schema_free(s);
	cr_assert_eq(cnt.live, 0);
	cr_assert_eq(cnt.frees, cnt.allocs);

	/* NULL: malloc and free again, neither allocator sees a block. */
	cr_assert_eq(pf_allocator_set(NULL), 0);
	cr_assert_eq(pf_schema_create(&s), 0);
	pf_schema_free(s);
	cr_assert_eq(tu_alloc_count(), c0);
	cr_assert_eq(cnt.live, 0);
	cr_assert_eq(cnt.frees, cnt.allocs);
}

Test(allocator, an_allocator_needs_both_functions)
{
	pf_allocator no_alloc = { NULL, counting_free, &cnt };
	pf_allocator no_free = { counting_alloc, NULL, &cnt };
	uint64_t c0 = tu_alloc_count();
	pf_schema *s;

	cr_assert_eq(pf_allocator_set(&no_alloc), -EINVAL);
	cr_assert_eq(pf_allocator_set(&no_free), -EINVAL);
	cr_assert_eq(pf_schema_create(&s), 0);
	cr_assert_gt(tu_alloc_count(), c0, "the allocator in force did not change");
	pf_schema_free(s);
}

Test(allocator, zstd_zlib_and_protobuf_c_allocate_through_it, .fini = back_to_tu)
{
	static const char dir_name[] = "shard.tfrecord.zst";
	char path[600];
	uint8_t *file;
	size_t len;
	pf_frame_decoder *d;
	pf_inflate *z;
	pf_shard_index *ix;
	pf_error err;
	uint64_t before;

	snprintf(path, sizeof(path), "%s/%s", tu_tmpdir(), dir_name);
	tu_write_id_shard(path, 0, 200, 4096, 0);
	file = tu_read_file(path, &len);
	use_counting();

	/* zstd: the decoder's ZSTD_DCtx, far larger than the decoder. */
	cr_assert_eq(pf_frame_decoder_create(&d), 0);
	cr_assert_geq(cnt.allocs, 2, "the decoder and zstd's context");
	cr_assert_gt(cnt.largest, 16384, "zstd's context (%llu bytes at most)",
		     (unsigned long long)cnt.largest);
	pf_frame_decoder_free(d);
	cr_assert_eq(cnt.live, 0);

	/* zlib: inflate's state. */
	before = cnt.allocs;
	cr_assert_eq(pf_inflate_create(&z, PF_COMP_GZIP), 0);
	cr_assert_geq(cnt.allocs - before, 2, "the wrapper and zlib's state");
	pf_inflate_free(z);
	cr_assert_eq(cnt.live, 0);

	/* protobuf-c: the index is unpacked through the hook, then freed. */
	before = cnt.allocs;
	pf_error_clear(&err);
	cr_assert_eq(pf_shard_index_parse(&ix, file, len, len, &err), 0, "%s", err.msg);
	cr_assert_gt(cnt.allocs - before, 3);
	cr_assert_lt(cnt.live, cnt.allocs - before, "protobuf-c's message was freed");
	pf_shard_index_free(ix);
	cr_assert_eq(cnt.live, 0);

	/* Out of memory in protobuf-c is -ENOMEM, not corrupt data. */
	cnt.fail = true;
	cr_assert_eq(pf_shard_index_parse(&ix, file, len, len, &err), -ENOMEM, "%s", err.msg);
	cnt.fail = false;
	cr_assert_eq(cnt.live, 0);
	free(file);
}

Test(allocator, a_loader_and_its_threads_allocate_through_it, .fini = back_to_tu)
{
	char path[600];
	const char *paths[1] = { path };
	pf_loader_config cfg = {
		.paths = paths, .npaths = 1, .features = "id:int64[1]",
		.cores_per_host = 2, .per_core_batch = 8, .seed = 1, .epochs = 1,
		.shuffle = true, .threads = 2, .memory_budget = 32u << 20,
	};
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	int steps = 0;

	snprintf(path, sizeof(path), "%s/a.tfrecord.zst", tu_tmpdir());
	tu_write_id_shard(path, 0, 500, 4096, 0);
	use_counting();
	pf_error_clear(&err);
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), 0, "%s", err.msg);
	while (pf_loader_next(l, &b) == 1) {
		steps++;
		pf_loader_release(l, b);
	}
	cr_assert_eq(steps, 500 / 16);
	cr_assert_gt(cnt.allocs, 10);
	pf_loader_free(l);
	cr_assert_eq(cnt.live, 0, "%llu blocks left", (unsigned long long)cnt.live);
	cr_assert_eq(cnt.frees, cnt.allocs);
}

Test(allocator, out_of_memory_is_enomem_and_leaks_nothing, .fini = back_to_tu)
{
	char path[600];
	const char *paths[1] = { path };
	pf_loader_config cfg = {
		.paths = paths, .npaths = 1, .features = "id:int64[1]",
		.cores_per_host = 1, .per_core_batch = 4, .epochs = 1,
	};
	pf_loader *l = NULL;
	pf_error err;

	snprintf(path, sizeof(path), "%s/a.tfrecord.zst", tu_tmpdir());
	tu_write_id_shard(path, 0, 50, 4096, 0);
	use_counting();
	cnt.fail = true;
	cr_assert_eq(pf_loader_create(&l, &cfg, &err), -ENOMEM);
	cr_assert_eq(err.code, -ENOMEM);
	cr_assert_null(l);
	cr_assert_gt(cnt.allocs, 0);
	cr_assert_eq(cnt.live, 0);
}

Test(allocator, the_host_s_aligned_blocks_go_through_it, .fini = back_to_tu)
{
	pf_model_config mc = { .kind = PF_MODEL_EMBAG, .classes = 4, .vocab = 1000,
			       .embed_dim = 16, .embed_lr_scale = 1.0f, .seed = 3,
			       .seq_len = 8, .pad_id = -1, .max_rows = 4 };
	pf_model *m;
	pf_workspace *ws;
	pf_grad *g;
	uint32_t rows, dim;

	use_counting();
	cr_assert_eq(pf_model_create(&m, &mc, NULL), 0);
	cr_assert_gt(cnt.bytes, 1000 * 16 * sizeof(float), "the embedding table");
	cr_assert_eq((uintptr_t)pf_model_embedding(m, &rows, &dim) % 64, 0);
	cr_assert_eq(pf_workspace_create(m, &ws), 0);
	cr_assert_eq(pf_grad_create(m, 2, &g), 0);
	pf_grad_free(g);
	pf_workspace_free(ws);
	pf_model_free(m);
	cr_assert_eq(cnt.live, 0);
}

/* pf_malloc() and friends, under the allocator given and under malloc. */
static void check_blocks(void)
{
	uint8_t *p, *q, *z, *a;
	char *s;

	p = pf_malloc(0);
	cr_assert_not_null(p, "0 bytes is a block, not out of memory");
	pf_free(p);
	p = pf_malloc(100);
	for (int i = 0; i < 100; i++)
		p[i] = (uint8_t)i;
	p = pf_realloc(p, 100000);
	cr_assert_not_null(p);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(p[i], (uint8_t)i, "byte %d lost growing", i);
	q = pf_realloc(p, 10);
	cr_assert_not_null(q);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(q[i], (uint8_t)i, "byte %d lost shrinking", i);
	pf_free(q);
	q = pf_realloc(NULL, 8);	/* as pf_malloc() */
	cr_assert_not_null(q);
	pf_free(q);

	z = pf_calloc(1000, 3);
	for (int i = 0; i < 3000; i++)
		cr_assert_eq(z[i], 0, "pf_calloc() byte %d", i);
	pf_free(z);
	cr_assert_null(pf_calloc(SIZE_MAX / 2, 3), "an overflowing count is refused");
	cr_assert_null(pf_malloc(SIZE_MAX - 8));

	for (size_t align = 1; align <= 4096; align *= 2) {
		a = pf_malloc_aligned(1000, align);
		cr_assert_not_null(a);
		cr_assert_eq((uintptr_t)a % align, 0, "aligned to %zu", align);
		memset(a, 1, 1000);
		a = pf_realloc(a, 5000);
		cr_assert_eq((uintptr_t)a % align, 0, "still aligned to %zu", align);
		cr_assert_eq(a[999], 1);
		pf_free(a);
	}
	cr_assert_null(pf_malloc_aligned(64, 48));
	cr_assert_null(pf_malloc_aligned(64, 8192));
	s = pf_strdup("shard");
	cr_assert_str_eq(s, "shard");
	pf_free(s);

	/* pf_grow(): doubling room, contents kept, overflow refused. */
	{
		uint64_t *arr = NULL, *before;
		size_t cap = 0;

		cr_assert_eq(pf_grow(&arr, &cap, 5, sizeof(*arr)), 0);
		cr_assert_eq(cap, 16);
		for (int i = 0; i < 16; i++)
			arr[i] = (uint64_t)i * 3;
		cr_assert_eq(pf_grow(&arr, &cap, 16, sizeof(*arr)), 0);
		cr_assert_eq(cap, 16, "room enough: nothing changes");
		cr_assert_eq(pf_grow(&arr, &cap, 100, sizeof(*arr)), 0);
		cr_assert_eq(cap, 128);
		for (int i = 0; i < 16; i++)
			cr_assert_eq(arr[i], (uint64_t)i * 3);
		before = arr;
		cr_assert_eq(pf_grow(&arr, &cap, SIZE_MAX / 4, sizeof(*arr)), -ENOMEM);
		cr_assert_eq(arr, before);
		cr_assert_eq(cap, 128);
		pf_free(arr);
	}
}

Test(allocator, blocks_under_a_callers_allocator, .fini = back_to_tu)
{
	use_counting();
	check_blocks();
	cr_assert_eq(cnt.live, 0);
	cr_assert_gt(cnt.allocs, 10);
}

Test(allocator, blocks_under_malloc, .fini = back_to_tu)
{
	cr_assert_eq(pf_allocator_set(NULL), 0);
	check_blocks();
}
