/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz harness: host topology detection from flags and an environment,
 * checked against a plain model of the rules in pf_host.h. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf_host.h"

/*
 * The input is text, one entry a line:
 *   --host-index=N, --num-hosts=N   the flags (taken when N parses)
 *   NAME=VALUE                       an environment entry
 * The harness aborts when
 *   - pf_topology_parse_u32 disagrees with strtoull over the digits-only
 *     grammar, or writes its output on failure;
 *   - pf_topology_detect succeeds where the model refuses, or the other
 *     way round, or returns another index, count or source than the model;
 *   - a failure is not -EINVAL with a message, or a success breaks
 *     index < count.
 * The model reads every variable in the same precedence order, but as a
 * list of (field, value) readings: no shared code with topology.c.
 */

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "fuzz_topology: %s:%d: %s\n",        \
				__FILE__, __LINE__, #cond);                  \
			abort();                                             \
		}                                                            \
	} while (0)

#define MAX_LINES 64

static const struct {
	const char *name;
	pf_topology_source source;
	int field;		/* 0 index, 1 count */
	int list;
} vars[] = {
	{ "OMPI_COMM_WORLD_RANK", PF_TOPOLOGY_MPI, 0, 0 },
	{ "OMPI_COMM_WORLD_SIZE", PF_TOPOLOGY_MPI, 1, 0 },
	{ "PMIX_RANK", PF_TOPOLOGY_MPI, 0, 0 },
	{ "PMI_RANK", PF_TOPOLOGY_MPI, 0, 0 },
	{ "PMI_SIZE", PF_TOPOLOGY_MPI, 1, 0 },
	{ "TPU_WORKER_ID", PF_TOPOLOGY_TPU, 0, 0 },
	{ "TPU_WORKER_HOSTNAMES", PF_TOPOLOGY_TPU, 1, 1 },
	{ "CLOUD_TPU_TASK_ID", PF_TOPOLOGY_TPU, 0, 0 },
	{ "RANK", PF_TOPOLOGY_TORCH, 0, 0 },
	{ "WORLD_SIZE", PF_TOPOLOGY_TORCH, 1, 0 },
};

#define NVARS (sizeof(vars) / sizeof(vars[0]))

/* The reference reading of a number: digits only, then strtoull. */
static int model_u32(const char *s, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (!*s)
		return -EINVAL;
	for (const char *p = s; *p; p++)
		if (*p < '0' || *p > '9')
			return -EINVAL;
	/* Past 20 digits strtoull saturates; strip leading zeros first. */
	while (s[0] == '0' && s[1])
		s++;
	if (strlen(s) > 10)
		return -ERANGE;
	errno = 0;
	v = strtoull(s, &end, 10);
	CHECK(!*end && !errno);
	if (v > UINT32_MAX)
		return -ERANGE;
	*out = (uint32_t)v;
	return 0;
}

/* Names in a comma list, or -1 when one is empty. */
static long model_names(const char *s)
{
	long n = 1;
	size_t len = 0;

	for (;; s++) {
		if (*s == ',' || !*s) {
			if (!len)
				return -1;
			if (!*s)
				return n;
			n++;
			len = 0;
		} else {
			len++;
		}
	}
}

static const char *first_value(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

/* @return 0 with *t as the rules say, or -1 when they refuse. */
static int model(const pf_topology_flags *f, char *const *envp,
		 pf_host_topology *t)
{
	bool set[2] = { false, false };
	uint32_t value[2] = { 0, 0 };
	pf_topology_source from[2] = { PF_TOPOLOGY_SINGLE, PF_TOPOLOGY_SINGLE };

	if (f->has_num_hosts && f->num_hosts == 0)
		return -1;
	if (f->has_host_index) {
		set[0] = true;
		value[0] = f->host_index;
		from[0] = PF_TOPOLOGY_FLAGS;
	}
	if (f->has_num_hosts) {
		set[1] = true;
		value[1] = f->num_hosts;
		from[1] = PF_TOPOLOGY_FLAGS;
	}
	for (size_t i = 0; i < NVARS; i++) {
		const char *s = first_value(envp, vars[i].name);
		uint32_t v;
		int k = vars[i].field;

		if (!s)
			continue;
		if (vars[i].list) {
			long n = model_names(s);
			if (n < 0)
				return -1;
			v = (uint32_t)n;
		} else if (model_u32(s, &v) < 0) {
			return -1;
		}
		if (k == 1 && v == 0)
			return -1;
		if (set[k] && value[k] != v)
			return -1;
		if (!set[k]) {
			set[k] = true;
			value[k] = v;
			from[k] = vars[i].source;
		}
	}
	if (!set[0] && !set[1]) {
		*t = (pf_host_topology){ 0, 1, PF_TOPOLOGY_SINGLE, 0 };
		return 0;
	}
	if (!set[1])
		return -1;
	if (!set[0]) {
		/* --num-hosts alone: host 0 of a pod of one only */
		if (from[1] != PF_TOPOLOGY_FLAGS || value[1] > 1)
			return -1;
		value[0] = 0;
		from[0] = PF_TOPOLOGY_FLAGS;
	}
	if (value[0] >= value[1])
		return -1;
	*t = (pf_host_topology){ value[0], value[1], from[0], 0 };
	return 0;
}

static void check_parse(const char *s)
{
	uint32_t got = 0xdeadbeef, want = 0;
	int r = pf_topology_parse_u32(s, &got);
	int m = model_u32(s, &want);

	CHECK(r == m);
	if (r == 0)
		CHECK(got == want);
	else
		CHECK(got == 0xdeadbeef);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), *envp[MAX_LINES + 1], *line;
	pf_topology_flags flags = { 0 };
	pf_host_topology got, want;
	size_t n = 0;
	pf_error err;
	int ret, m;

	CHECK(text);
	if (size)
		memcpy(text, data, size);
	text[size] = '\0';
	line = text;
	while (line && n < MAX_LINES) {
		char *nl = strchr(line, '\n'), *eq;

		if (nl)
			*nl = '\0';
		eq = strchr(line, '=');
		if (eq) {
			check_parse(eq + 1);
			if (!strncmp(line, "--host-index=", 13)) {
				flags.has_host_index =
					pf_topology_parse_u32(eq + 1, &flags.host_index) == 0;
			} else if (!strncmp(line, "--num-hosts=", 12)) {
				flags.has_num_hosts =
					pf_topology_parse_u32(eq + 1, &flags.num_hosts) == 0;
			} else {
				envp[n++] = line;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	envp[n] = NULL;

	pf_error_clear(&err);
	ret = pf_topology_detect(&got, &flags, pf_topology_envp_get, envp, &err);
	m = model(&flags, envp, &want);
	if (m < 0) {
		if (ret == 0)
			fprintf(stderr, "fuzz_topology: accepted host %u of %u from %s\n",
				got.host_index, got.num_hosts,
				pf_topology_source_name(got.source));
		CHECK(ret == -EINVAL);
		CHECK(err.code == -EINVAL && err.msg[0]);
	} else {
		if (ret != 0)
			fprintf(stderr, "fuzz_topology: refused: %s\n", err.msg);
		CHECK(ret == 0);
		CHECK(got.host_index == want.host_index);
		CHECK(got.num_hosts == want.num_hosts);
		CHECK(got.source == want.source);
		CHECK(got.host_index < got.num_hosts);
		CHECK(got.sources & (1u << got.source));

		char line_buf[128];
		size_t len = pf_topology_format(&got, line_buf, sizeof(line_buf));
		CHECK(len == strlen(line_buf) && len < sizeof(line_buf));
	}
	free(text);
	return 0;
}
