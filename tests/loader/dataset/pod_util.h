/* SPDX-License-Identifier: Apache-2.0 */
/* A pod of hosts as threads of one process: an all-gather
 * (pf_allgather_fn) over a mutex, for the tests of a pod's opening and
 * planning (test_loader_podopen, test_loader_packpod); and a batch
 * digest, the same in pod_open_child under mpirun. */
#ifndef PF_TESTS_POD_UTIL_H
#define PF_TESTS_POD_UTIL_H

#include <pthread.h>
#include <stdint.h>

#include "podfeed.h"

typedef struct tu_pod {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t hosts, arrived, leaving;
	size_t len;
	uint8_t *buf;
	uint32_t calls;		/* all-gathers so far */
	/* When set: called with the gathered pieces of each call (from 1)
	 * before any host receives them, to damage them. */
	void (*tamper)(void *ctx, uint32_t call, uint8_t *all, size_t len, uint32_t hosts);
	void *tamper_ctx;
} tu_pod;

/* One host's context for tu_pod_allgather(). */
typedef struct tu_pod_member {
	tu_pod *pod;
	uint32_t host;
} tu_pod_member;

void tu_pod_init(tu_pod *p, uint32_t hosts);
void tu_pod_destroy(tu_pod *p);
/* pf_allgather_fn; ctx: the host's tu_pod_member. */
int tu_pod_allgather(void *ctx, const void *mine, size_t len, void *all, pf_error *err);

/* A batch's bytes folded into a digest (start from TU_DIGEST_START):
 * every core's tensors, 4-byte values (packed rows). */
#define TU_DIGEST_START 1469598103934665603ull
uint64_t tu_batch_digest(uint64_t digest, const pf_batch *b);

#endif
