/* SPDX-License-Identifier: Apache-2.0 */
/* embed_example: a whole program over the loader (usage: FEATURES SHARD...). */
#include <stdio.h>

#include "podfeed.h"

static double first_value(const pf_tensor *t)	/* values[0][0] */
{
	return t->dtype == PF_DTYPE_INT32 ? ((const int32_t *)t->data)[0]
	     : t->dtype == PF_DTYPE_INT64 ? (double)((const int64_t *)t->data)[0]
	     : t->dtype == PF_DTYPE_FLOAT32 ? ((const float *)t->data)[0]
	     : ((const uint8_t *)t->data)[0];
}

int main(int argc, char **argv)
{
	pf_loader_config cfg = {
		.paths = (const char *const *)argv + 2,
		.npaths = argc > 2 ? (size_t)argc - 2 : 0,
		.features = argc > 1 ? argv[1] : NULL,	/* "tokens:int32[256],label:int64[1]" */
		.cores_per_host = 2,
		.per_core_batch = 16,
		.shuffle = true,
		.seed = 42,
	};
	pf_loader *l;
	pf_loader_metrics m;
	pf_batch *b;
	pf_error err;	/* says what failed and where */
	char why[PF_ERROR_LINE_MAX];	/* the longest error line */
	int ret;

	if (argc < 3)
		return fputs("usage: embed_example FEATURES SHARD...\n", stderr), 2;
	if (pf_loader_create(&l, &cfg, &err) < 0) {
		pf_error_format(&err, why, sizeof(why));
		fprintf(stderr, "embed_example: %s\n", why);
		return 1;
	}
	while ((ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; b->global_step == 0 && c < b->cores; c++)
			for (uint32_t i = 0; i < b->core[c].ntensors; i++) {
				const pf_tensor *t = &b->core[c].tensors[i];
				printf("core %u %s %s[%u][%u] first %g\n", c, t->name,
				       pf_dtype_name(t->dtype), b->per_core_batch, t->len,
				       first_value(t));
			}
		pf_loader_release(l, b);	/* train on b here */
	}
	if (ret < 0 && pf_error_format(pf_loader_last_error(l), why, sizeof(why)))
		fprintf(stderr, "embed_example: %s\n", why);	/* file, byte, what */
	pf_loader_get_metrics(l, &m);
	printf("steps %llu records %llu dropped %llu read %llu bytes\n",
	       (unsigned long long)m.steps, (unsigned long long)m.records,
	       (unsigned long long)m.remainder_dropped, (unsigned long long)m.bytes_read);
	pf_loader_free(l);
	return ret < 0;
}
