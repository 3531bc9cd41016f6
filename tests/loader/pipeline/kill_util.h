/* SPDX-License-Identifier: Apache-2.0 */
/* SIGKILL at random points, shared by test_loader_resume (one dataset)
 * and test_loader_mixture_kill (a mixture): resume_child run until its
 * job is done, killed after a random delay each time, and the id logs it
 * leaves. */
#ifndef PF_KILL_UTIL_H
#define PF_KILL_UTIL_H

#include <stdint.h>
#include <stdio.h>

typedef struct killer {
	uint64_t rng;
	unsigned kills;
	unsigned shift;		/* delays divided by 2^shift (see ku_phase()) */
} killer;

#define ARG(buf, fmt, ...) (snprintf(buf, sizeof(buf), fmt, __VA_ARGS__), buf)

/* Run resume_child with argv until it exits 0, killing it after a
 * random delay each time; a run that made no progress lengthens the
 * next delay so the job always ends. */
void ku_run_killed(killer *k, char *const argv[], const char *log);
/* The ids of a log, each marked in seen[0..nids) (asserted new); *n
 * counts them. */
void ku_count_log(const char *path, uint8_t *seen, uint64_t nids, uint64_t *n);
/* hosts consumers of 2 cores x 4 records (window 64, seed 9, 1 epoch)
 * over d (a directory, or a mixture: directories joined by commas), each
 * killed until done; with stop, each stops at global step stop[h]; from
 * the commits of old_hosts hosts of tag 'a' when old_hosts.  Commits and
 * logs are WORK/c<tag><h> and WORK/l<tag><h>.  Run again from the start
 * with the delays halved while the phase took under `want` kills (up to
 * 6 times): many kill points wherever the suite runs. */
void ku_phase(killer *k, const char *d, const char *work, char tag, uint32_t hosts,
	      const uint64_t *stop, uint32_t old_hosts, unsigned want);
/* ku_phase() of tag 'a': 4 hosts stopped at global steps stop[0..3] (of
 * 2 x 4 records each), their logs counted into seen[0..nids) (each id
 * new).  @return the ids, asserted sum(stop) x 8. */
uint64_t ku_four_stopped(killer *k, const char *d, const char *work, const uint64_t stop[4],
			 uint8_t *seen, uint64_t nids);
/* A phase took at least 10 kills since *before (said with what); *before
 * becomes the count. */
void ku_took(const killer *k, unsigned *before, const char *what);
/* The same job run once, never killed (a reference): logs WORK/l<tag><h>. */
void ku_unkilled(const char *d, const char *work, char tag, uint32_t hosts);

#endif
