/* SPDX-License-Identifier: Apache-2.0 */
/* SIGKILL at random points (kill_util.h). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kill_util.h"
#include "testutil.h"

extern char **environ;

/* 1-25 ms, divided by 2^shift, 5 ms more for each run without progress. */
static unsigned next_delay_us(killer *k, unsigned stalls)
{
	k->rng = k->rng * 6364136223846793005ull + 1442695040888963407ull;
	return ((1000 + (unsigned)(k->rng >> 33) % 24000) >> k->shift) + 5000 * stalls;
}

static off_t file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* Run resume_child with args until it exits 0, killing it after a
 * random delay each time; a run that made no progress lengthens the
 * next delay so the job always ends. */
void ku_run_killed(killer *k, char *const argv[], const char *log)
{
	const char *exe = tu_env_tool("RESUME_CHILD");
	unsigned stalls = 0;

	for (unsigned round = 0;; round++) {
		off_t before = file_size(log);
		int status;
		pid_t pid;

		cr_assert_lt(round, 5000, "the job never finished");
		cr_assert_eq(posix_spawn(&pid, exe, NULL, NULL, argv, environ), 0);
		usleep(next_delay_us(k, stalls));
		kill(pid, SIGKILL);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		if (WIFEXITED(status)) {
			cr_assert_eq(WEXITSTATUS(status), 0, "resume_child failed");
			return;
		}
		cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		k->kills++;
		stalls = file_size(log) == before ? stalls + 1 : 0;
	}
}

/* The ids of a log. */
void ku_count_log(const char *path, uint8_t *seen, uint64_t nids, uint64_t *n)
{
	size_t len;
	uint8_t *buf = tu_read_file(path, &len);

	cr_assert_eq(len % 8, 0);
	for (size_t i = 0; i < len; i += 8) {
		uint64_t id;

		memcpy(&id, buf + i, 8);
		cr_assert_lt(id, nids);
		cr_assert_eq(seen[id]++, 0, "id %llu delivered twice", (unsigned long long)id);
	}
	*n += len / 8;
	free(buf);
}

/* hosts consumers of 2 cores x 4 records, each killed until done; with
 * stop, each stops at global step stop[h] (in epoch 0).  commits/logs
 * are written as DIR/c<tag><h> and DIR/l<tag><h>. */
static void killed_hosts(killer *k, const char *d, const char *work, char tag,
			 uint32_t hosts, const uint64_t *stop, uint32_t old_hosts)
{
	for (uint32_t h = 0; h < hosts; h++) {
		char commit[512], log[512], hs[16], ns[16], st[32];
		char olds[8][512];
		char *argv[24] = { "resume_child", (char *)d, commit, log, hs, ns, "2", "4",
				   "64", "9", "1", st };
		int argc = 12;

		snprintf(commit, sizeof(commit), "%s/c%c%u", work, tag, h);
		snprintf(log, sizeof(log), "%s/l%c%u", work, tag, h);
		ARG(hs, "%u", h);
		ARG(ns, "%u", hosts);
		ARG(st, "%llu", (unsigned long long)(stop ? stop[h] : 0));
		for (uint32_t o = 0; o < old_hosts; o++)
			argv[argc++] = ARG(olds[o], "%s/c%c%u", work, 'a', o);
		argv[argc] = NULL;
		ku_run_killed(k, argv, log);
	}
}

/* killed_hosts() until the phase took at least `want` kills: a machine
 * fast enough to finish a job inside a few of the delays runs the phase
 * again from the start (its commits and logs removed) with the delays
 * halved, up to 6 times, so that the kill points are many wherever the
 * suite runs, and a slow machine keeps the delays as they are. */
void ku_phase(killer *k, const char *d, const char *work, char tag, uint32_t hosts,
		  const uint64_t *stop, uint32_t old_hosts, unsigned want)
{
	for (;;) {
		unsigned kills0 = k->kills;
		char path[512];

		for (uint32_t h = 0; h < hosts; h++) {
			snprintf(path, sizeof(path), "%s/c%c%u", work, tag, h);
			unlink(path);
			snprintf(path, sizeof(path), "%s/l%c%u", work, tag, h);
			unlink(path);
		}
		killed_hosts(k, d, work, tag, hosts, stop, old_hosts);
		if (k->kills - kills0 >= want || k->shift >= 6)
			return;
		cr_log_info("phase %c: %u kills, under %u: again with delays halved", tag,
			    k->kills - kills0, want);
		k->kills = kills0;
		k->shift++;
	}
}

void ku_unkilled(const char *d, const char *work, char tag, uint32_t hosts)
{
	for (uint32_t h = 0; h < hosts; h++) {
		char commit[512], log[512], hs[16], ns[16];
		char *argv[] = { "resume_child", (char *)d, commit, log, hs, ns, "2", "4",
				 "64", "9", "1", "0", NULL };
		int status;
		pid_t pid;

		snprintf(commit, sizeof(commit), "%s/c%c%u", work, tag, h);
		snprintf(log, sizeof(log), "%s/l%c%u", work, tag, h);
		unlink(commit);
		unlink(log);
		ARG(hs, "%u", h);
		ARG(ns, "%u", hosts);
		cr_assert_eq(posix_spawn(&pid, tu_env_tool("RESUME_CHILD"), NULL, NULL, argv,
					 environ), 0);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "resume_child failed");
	}
}

uint64_t ku_four_stopped(killer *k, const char *d, const char *work, const uint64_t stop[4],
			 uint8_t *seen, uint64_t nids)
{
	char log[512];
	uint64_t n = 0;

	ku_phase(k, d, work, 'a', 4, stop, 0, 10);
	for (uint32_t h = 0; h < 4; h++)
		ku_count_log(ARG(log, "%s/la%u", work, h), seen, nids, &n);
	cr_assert_eq(n, (stop[0] + stop[1] + stop[2] + stop[3]) * 8, "%llu records",
		     (unsigned long long)n);
	return n;
}

void ku_took(const killer *k, unsigned *before, const char *what)
{
	cr_log_info("%s: %u kills", what, k->kills - *before);
	cr_assert_geq(k->kills - *before, 10, "%s: %u kills", what, k->kills - *before);
	*before = k->kills;
}
