/* SPDX-License-Identifier: Apache-2.0 */
/* A pod of threads (pod_util.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pod_util.h"

void tu_pod_init(tu_pod *p, uint32_t hosts)
{
	memset(p, 0, sizeof(*p));
	p->hosts = hosts;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
}

void tu_pod_destroy(tu_pod *p)
{
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->buf);
	p->buf = NULL;
}

int tu_pod_allgather(void *ctx, const void *mine, size_t len, void *all, pf_error *err)
{
	tu_pod_member *me = ctx;
	tu_pod *p = me->pod;

	pthread_mutex_lock(&p->mu);
	while (p->leaving)
		pthread_cond_wait(&p->cv, &p->mu);
	if (p->arrived == 0) {
		p->len = len;
		p->buf = realloc(p->buf, (size_t)p->hosts * (len ? len : 1));
		p->calls++;
	}
	if (len != p->len) {
		pthread_mutex_unlock(&p->mu);
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "all-gather of %zu bytes, the others %zu", len, p->len);
	}
	memcpy(p->buf + (size_t)me->host * len, mine, len);
	if (++p->arrived == p->hosts) {
		if (p->tamper)
			p->tamper(p->tamper_ctx, p->calls, p->buf, len, p->hosts);
		p->leaving = p->hosts;
		pthread_cond_broadcast(&p->cv);
	}
	while (!p->leaving)
		pthread_cond_wait(&p->cv, &p->mu);
	memcpy(all, p->buf, (size_t)p->hosts * len);
	if (--p->leaving == 0) {
		p->arrived = 0;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return 0;
}

uint64_t tu_batch_digest(uint64_t digest, const pf_batch *b)
{
	for (uint32_t c = 0; c < b->cores; c++)
		for (uint32_t t = 0; t < b->core[c].ntensors; t++) {
			const pf_tensor *tt = &b->core[c].tensors[t];

			digest = pf_crc32c((uint32_t)digest, tt->data,
					   (size_t)b->per_core_batch * tt->len * 4) ^ (digest << 32);
		}
	return digest;
}
