/* SPDX-License-Identifier: Apache-2.0 */
/* The version and the ABI promise (pf_common.h): the loader's structs
 * cross the boundary with their size: a smaller (older) one is
 * zero-extended, a larger (newer) one accepted only with its unknown
 * bytes zero, out-structs filled to the caller's size; the entries kept
 * for programs built before 0.5 (name@PODFEED_0.1) run a loader. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "podfeed.h"
#include "testutil.h"

/* A config in a caller's buffer of `size` bytes: the struct, then tail. */
typedef struct big_config {
	pf_loader_config cfg;
	unsigned char tail[64];
} big_config;

static void config_of(big_config *b, const char *const *paths)
{
	memset(b, 0, sizeof(*b));
	b->cfg = (pf_loader_config){
		.paths = paths, .npaths = 1, .features = "id:int64[1]",
		.per_core_batch = 8, .threads = 1,
	};
}

/* Every id of [0, count) once, through the given loader. */
static void drain(pf_loader *l, uint64_t count)
{
	static uint8_t seen[4096];
	pf_batch *b;
	uint64_t rows = 0;
	int ret;

	cr_assert_leq(count, sizeof(seen));
	memset(seen, 0, sizeof(seen));
	while ((ret = pf_loader_next(l, &b)) == 1) {
		const int64_t *ids = b->core[0].tensors[0].data;

		for (uint32_t i = 0; i < b->per_core_batch; i++) {
			cr_assert_lt((uint64_t)ids[i], count);
			cr_assert_eq(seen[ids[i]]++, 0, "id %lld twice", (long long)ids[i]);
			rows++;
		}
		pf_loader_release(l, b);
	}
	cr_assert_eq(ret, 0);
	cr_assert_eq(rows, count);
}

Test(abi, version)
{
	char want[32];

	cr_assert_eq(pf_version(), PF_VERSION_NUMBER);
	snprintf(want, sizeof(want), "%d.%d.%d", PF_VERSION_MAJOR, PF_VERSION_MINOR,
		 PF_VERSION_PATCH);
	cr_assert_str_eq(pf_version_string(), want);
	cr_assert_str_eq(PF_VERSION_STRING, want);
}

Test(abi, newer_header_with_unknown_fields_zero_runs)
{
	const char *paths[1] = { tu_id_dataset(64) };
	big_config b;
	pf_loader *l = NULL;
	pf_error err;

	config_of(&b, paths);
	cr_assert_eq(pf_loader_create_sized(&l, &b.cfg, sizeof(b), &err), 0, "%s", err.msg);
	drain(l, 64);
	pf_loader_free(l);
}

Test(abi, newer_header_asking_what_the_library_lacks_is_refused)
{
	const char *paths[1] = { tu_id_dataset(64) };
	big_config b;
	pf_loader *l = NULL;
	pf_error err;
	char want[64];

	config_of(&b, paths);
	b.tail[5] = 1;
	cr_assert_eq(pf_loader_create_sized(&l, &b.cfg, sizeof(b), &err), -E2BIG);
	cr_assert_null(l);
	snprintf(want, sizeof(want), "byte %zu of %zu is set", sizeof(b.cfg) + 5, sizeof(b));
	cr_assert(strstr(err.msg, want), "%s", err.msg);
	cr_assert(strstr(err.msg, "pf_loader_config"), "%s", err.msg);
}

Test(abi, size_smaller_than_any_header_is_refused)
{
	const char *paths[1] = { tu_id_dataset(64) };
	big_config b;
	pf_loader *l = NULL;
	pf_error err;

	config_of(&b, paths);
	cr_assert_eq(pf_loader_create_sized(&l, &b.cfg, 16, &err), -EINVAL);
	cr_assert_null(l);
	cr_assert(strstr(err.msg, "of 16 bytes"), "%s", err.msg);
}

Test(abi, out_structs_filled_to_the_callers_size)
{
	const char *paths[1] = { tu_id_dataset(64) };
	struct {
		pf_loader_metrics m;
		unsigned char tail[32];
	} big;
	pf_loader_metrics small;
	pf_loader *l;
	pf_error err;
	big_config b;
	size_t half = offsetof(pf_loader_metrics, steps_per_epoch);

	config_of(&b, paths);
	cr_assert_eq(pf_loader_create(&l, &b.cfg, &err), 0, "%s", err.msg);
	drain(l, 64);
	/* A newer caller's struct: the library's part filled, the rest zero. */
	memset(&big, 0xa5, sizeof(big));
	pf_loader_get_metrics_sized(l, &big.m, sizeof(big));
	cr_assert_eq(big.m.records, 64);
	cr_assert_eq(big.m.steps_per_epoch, 8);
	for (size_t i = 0; i < sizeof(big.tail); i++)
		cr_assert_eq(big.tail[i], 0);
	/* An older caller's, cut short: nothing written past its size. */
	memset(&small, 0xa5, sizeof(small));
	pf_loader_get_metrics_sized(l, &small, half);
	cr_assert_eq(small.records, 64);
	cr_assert_eq(((unsigned char *)&small)[half], 0xa5);
	pf_loader_free(l);
}

Test(abi, state_info_filled_to_the_callers_size)
{
	const char *paths[1] = { tu_id_dataset(64) };
	pf_state_info info;
	pf_loader *l;
	pf_batch *bt;
	pf_error err;
	big_config b;
	uint8_t blob[4096];
	int64_t n;
	size_t cut = offsetof(pf_state_info, records_left);

	config_of(&b, paths);
	cr_assert_eq(pf_loader_create(&l, &b.cfg, &err), 0, "%s", err.msg);
	cr_assert_eq(pf_loader_next(l, &bt), 1);
	pf_loader_release(l, bt);
	n = pf_loader_save_state(l, blob, sizeof(blob));
	cr_assert_gt(n, 0);
	memset(&info, 0xa5, sizeof(info));
	cr_assert_eq(pf_state_inspect_sized(blob, (size_t)n, &info, cut, &err), 0, "%s", err.msg);
	cr_assert_eq(info.step_in_epoch, 1);
	cr_assert_eq(((unsigned char *)&info)[cut], 0xa5);
	cr_assert_eq(pf_state_inspect(blob, (size_t)n, &info, &err), 0);
	cr_assert_eq(info.records_left, 56);
	pf_loader_free(l);
}

#define LOOKUP(fn, expr)                          \
	do {                                      \
		void *p_ = (expr);                \
		memcpy(&(fn), &p_, sizeof(fn));   \
	} while (0)

/* A program linked before 0.5 calls pf_loader_create@PODFEED_0.1 with
 * the 0.5 struct: the shared library still serves it. */
Test(abi, entries_kept_for_programs_built_before_0_5)
{
	const char *paths[1] = { tu_id_dataset(64) };
	typedef int (*create_fn)(pf_loader **, const pf_loader_config *, pf_error *);
	typedef void (*metrics_fn)(const pf_loader *, pf_loader_metrics *);
	typedef int (*next_fn)(pf_loader *, pf_batch **);
	typedef void (*release_fn)(pf_loader *, pf_batch *);
	typedef void (*free_fn)(pf_loader *);
	void *so = dlopen(PF_LIBPODFEED, RTLD_NOW | RTLD_LOCAL);
	_Static_assert(sizeof(void *) == sizeof(create_fn), "function pointers as objects");
	big_config b;
	pf_loader_metrics m;
	pf_loader *l;
	pf_batch *bt;
	pf_error err;
	uint64_t rows = 0;

	cr_assert_not_null(so, "%s", dlerror());
	create_fn create;
	metrics_fn metrics;
	next_fn next;
	release_fn release;
	free_fn lfree;

	/* dlsym()'s object pointer into a function pointer, as POSIX says. */
	LOOKUP(create, dlvsym(so, "pf_loader_create", "PODFEED_0.1"));
	LOOKUP(metrics, dlvsym(so, "pf_loader_get_metrics", "PODFEED_0.1"));
	LOOKUP(next, dlsym(so, "pf_loader_next"));
	LOOKUP(release, dlsym(so, "pf_loader_release"));
	LOOKUP(lfree, dlsym(so, "pf_loader_free"));
	cr_assert(create && metrics && next && release && lfree, "%s", dlerror());
	cr_assert_null(dlvsym(so, "pf_loader_create_0_1", "PODFEED_0.1"));

	config_of(&b, paths);
	/* The 0.5 struct's padding, garbage in an old caller's, is ignored. */
	memset((unsigned char *)&b.cfg + offsetof(pf_loader_config, keep_pools) + 1, 0x5a,
	       sizeof(b.cfg) - offsetof(pf_loader_config, keep_pools) - 1);
	cr_assert_eq(create(&l, &b.cfg, &err), 0, "%s", err.msg);
	while (next(l, &bt) == 1) {
		rows += bt->per_core_batch;
		release(l, bt);
	}
	metrics(l, &m);
	cr_assert_eq(rows, 64);
	cr_assert_eq(m.records, 64);
	lfree(l);
	dlclose(so);
}
