/* SPDX-License-Identifier: Apache-2.0 */
/* The mixture tests' three sources: see mix_util.h. */
#include <criterion/criterion.h>

#include "mix_util.h"
#include "testutil.h"

pf_loader *mu_create(pf_loader_config cfg, const char *features, uint64_t max,
		     const uint8_t *from, size_t from_len)
{
	static const uint64_t count[3] = { 2400, 1300, 500 };
	static const double w[3] = { 0.5, 0.3, 0.2 };
	static const char *names[3] = { "web", "code", "books" };
	static const char *dirs[3];
	pf_loader_source src[3];
	const char *paths[3][1];
	pf_state_blob sb = { from, from_len };
	pf_loader *l;
	pf_error err;
	int ret;

	for (uint32_t k = 0; k < 3; k++) {
		if (!dirs[k])
			dirs[k] = tu_id_shards((uint64_t)k * MU_ID_BASE, count[k], 2 + k, 2048);
		paths[k][0] = dirs[k];
		src[k] = (pf_loader_source){ .name = names[k], .paths = paths[k], .npaths = 1,
					     .weight = w[k] };
	}
	cfg.sources = src;
	cfg.nsources = 3;
	cfg.features = features;
	cfg.max_steps = max;
	cfg.resume = from ? &sb : NULL;
	cfg.nresume = from ? 1 : 0;
	ret = pf_loader_create(&l, &cfg, &err);
	cr_assert_eq(ret, 0, "create: %s", err.msg);
	return l;
}
