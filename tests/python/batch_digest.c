/* SPDX-License-Identifier: Apache-2.0 */
/* batch_digest: one line per batch of the C API's loader (epoch, step and
 * a zlib CRC-32 over every core's tensors in order), for the Python tests
 * to compare the package's batches with, bit for bit.
 * usage: batch_digest FEATURES PER_CORE_BATCH CORES SEED SHUFFLE HOST HOSTS PATH... */
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#include "podfeed.h"

int main(int argc, char **argv)
{
	pf_loader_config cfg = { 0 };
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	char why[1024];
	int ret;

	if (argc < 9) {
		fputs("usage: batch_digest FEATURES PER_CORE_BATCH CORES SEED SHUFFLE "
		      "HOST HOSTS PATH...\n", stderr);
		return 2;
	}
	cfg.features = argv[1];
	cfg.per_core_batch = (uint32_t)strtoul(argv[2], NULL, 10);
	cfg.cores_per_host = (uint32_t)strtoul(argv[3], NULL, 10);
	cfg.seed = strtoull(argv[4], NULL, 10);
	cfg.shuffle = atoi(argv[5]) != 0;
	/* 2: the global shuffle */
	cfg.shuffle_mode = atoi(argv[5]) == 2 ? PF_SHUFFLE_GLOBAL : PF_SHUFFLE_WINDOW;
	cfg.host_index = (uint32_t)strtoul(argv[6], NULL, 10);
	cfg.num_hosts = (uint32_t)strtoul(argv[7], NULL, 10);
	cfg.paths = (const char *const *)argv + 8;
	cfg.npaths = (size_t)argc - 8;
	if (pf_loader_create(&l, &cfg, &err) < 0) {
		pf_error_format(&err, why, sizeof(why));
		fprintf(stderr, "batch_digest: %s\n", why);
		return 1;
	}
	while ((ret = pf_loader_next(l, &b)) == 1) {
		uLong crc = crc32(0, Z_NULL, 0);

		for (uint32_t c = 0; c < b->cores; c++)
			for (uint32_t f = 0; f < b->core[c].ntensors; f++) {
				const pf_tensor *t = &b->core[c].tensors[f];

				crc = crc32(crc, t->data, (uInt)(b->per_core_batch * t->len *
								 pf_dtype_size(t->dtype)));
			}
		printf("%u %llu %08lx\n", b->epoch, (unsigned long long)b->step, crc);
		pf_loader_release(l, b);
	}
	if (ret < 0) {
		pf_error_format(pf_loader_last_error(l), why, sizeof(why));
		fprintf(stderr, "batch_digest: %s\n", why);
	}
	pf_loader_free(l);
	return ret < 0;
}
