/* SPDX-License-Identifier: Apache-2.0 */
/* Who this host is: each source alone, precedence, agreement, every
 * contradiction and malformed value, and loadbench's start-up line. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "pf_host.h"
#include "testutil.h"

#define MAX_ENV 16

/* flags: NULL for none, else a pf_topology_flags. */
static int detect(const char *const *env, const pf_topology_flags *flags,
		  pf_host_topology *t, pf_error *err)
{
	char *envp[MAX_ENV + 1];
	size_t n = 0;

	for (; env && env[n]; n++) {
		cr_assert_lt(n, MAX_ENV);
		envp[n] = (char *)env[n];
	}
	envp[n] = NULL;
	pf_error_clear(err);
	return pf_topology_detect(t, flags, pf_topology_envp_get, envp, err);
}

/* Detect and expect success with index/count from source. */
static pf_host_topology expect_ok(const char *const *env,
				  const pf_topology_flags *flags,
				  uint32_t index, uint32_t count,
				  pf_topology_source source)
{
	pf_host_topology t;
	pf_error err;
	int ret = detect(env, flags, &t, &err);

	cr_assert_eq(ret, 0, "%s", err.msg);
	cr_assert_eq(t.host_index, index, "index %u, wanted %u", t.host_index, index);
	cr_assert_eq(t.num_hosts, count, "count %u, wanted %u", t.num_hosts, count);
	cr_assert_eq(t.source, source, "source %s, wanted %s",
		     pf_topology_source_name(t.source), pf_topology_source_name(source));
	cr_assert(t.sources & (1u << source));
	return t;
}

/* Detect and expect -EINVAL with a message holding every one of says. */
static void expect_error(const char *const *env, const pf_topology_flags *flags,
			 const char *const *says)
{
	pf_host_topology t;
	pf_error err;
	int ret = detect(env, flags, &t, &err);

	cr_assert_eq(ret, -EINVAL, "ret %d (%s), env[0] %s", ret, err.msg,
		     env && env[0] ? env[0] : "-");
	cr_assert_eq(err.code, -EINVAL);
	for (size_t i = 0; says[i]; i++)
		cr_assert(strstr(err.msg, says[i]), "no '%s' in '%s'", says[i], err.msg);
}

#define ENV(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define SAYS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static const pf_topology_flags no_flags;

static pf_topology_flags flags_both(uint32_t index, uint32_t count)
{
	return (pf_topology_flags){ .has_host_index = true, .host_index = index,
				    .has_num_hosts = true, .num_hosts = count };
}

static pf_topology_flags flags_index(uint32_t index)
{
	return (pf_topology_flags){ .has_host_index = true, .host_index = index };
}

static pf_topology_flags flags_count(uint32_t count)
{
	return (pf_topology_flags){ .has_num_hosts = true, .num_hosts = count };
}

Test(topology, nothing_set_is_a_single_host)
{
	pf_host_topology t = expect_ok(NULL, NULL, 0, 1, PF_TOPOLOGY_SINGLE);

	cr_assert_eq(t.sources, 1u << PF_TOPOLOGY_SINGLE);
	expect_ok(ENV("HOME=/root", "PATH=/bin"), &no_flags, 0, 1, PF_TOPOLOGY_SINGLE);
	/* LOCAL_RANK and the local MPI variables say nothing about the pod. */
	expect_ok(ENV("LOCAL_RANK=3", "OMPI_COMM_WORLD_LOCAL_RANK=1",
		      "OMPI_COMM_WORLD_LOCAL_SIZE=2", "LOCAL_WORLD_SIZE=4"),
		  NULL, 0, 1, PF_TOPOLOGY_SINGLE);
}

Test(topology, each_source_alone)
{
	pf_topology_flags f = flags_both(2, 4);
	pf_host_topology t = expect_ok(NULL, &f, 2, 4, PF_TOPOLOGY_FLAGS);

	cr_assert_eq(t.sources, 1u << PF_TOPOLOGY_FLAGS);
	/* Open MPI's mpirun */
	t = expect_ok(ENV("OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=8"), NULL,
		      3, 8, PF_TOPOLOGY_MPI);
	cr_assert_eq(t.sources, 1u << PF_TOPOLOGY_MPI);
	/* Open MPI 4+ also sets PMIX_RANK */
	expect_ok(ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "PMIX_RANK=1"),
		  NULL, 1, 2, PF_TOPOLOGY_MPI);
	/* MPICH's hydra, PMI */
	expect_ok(ENV("PMI_RANK=5", "PMI_SIZE=6"), NULL, 5, 6, PF_TOPOLOGY_MPI);
	/* TPU VM: the index and the count of the worker host names */
	expect_ok(ENV("TPU_WORKER_ID=1", "TPU_WORKER_HOSTNAMES=t1v-a-0,t1v-a-1,t1v-a-2"),
		  NULL, 1, 3, PF_TOPOLOGY_TPU);
	expect_ok(ENV("TPU_WORKER_ID=0", "TPU_WORKER_HOSTNAMES=localhost"), NULL, 0, 1,
		  PF_TOPOLOGY_TPU);
	expect_ok(ENV("CLOUD_TPU_TASK_ID=2", "TPU_WORKER_HOSTNAMES=a,b,c,d"), NULL, 2, 4,
		  PF_TOPOLOGY_TPU);
	/* torchrun; LOCAL_RANK is not the host index */
	expect_ok(ENV("RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=0"), NULL, 3, 4,
		  PF_TOPOLOGY_TORCH);
	/* Leading zeros are still decimal, not octal. */
	expect_ok(ENV("RANK=010", "WORLD_SIZE=011"), NULL, 10, 11, PF_TOPOLOGY_TORCH);
	/* The largest count and index. */
	expect_ok(ENV("RANK=4294967294", "WORLD_SIZE=4294967295"), NULL,
		  UINT32_MAX - 1, UINT32_MAX, PF_TOPOLOGY_TORCH);
}

Test(topology, precedence_names_the_first_agreeing_source)
{
	pf_topology_flags f = flags_both(2, 4);
	pf_host_topology t;
	char line[128];

	/* All four agree: flags are named, the rest are listed. */
	t = expect_ok(ENV("OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4",
			  "TPU_WORKER_ID=2", "TPU_WORKER_HOSTNAMES=a,b,c,d",
			  "RANK=2", "WORLD_SIZE=4"),
		      &f, 2, 4, PF_TOPOLOGY_FLAGS);
	cr_assert_eq(t.sources, (1u << PF_TOPOLOGY_FLAGS) | (1u << PF_TOPOLOGY_MPI) |
				(1u << PF_TOPOLOGY_TPU) | (1u << PF_TOPOLOGY_TORCH));
	pf_topology_format(&t, line, sizeof(line));
	cr_assert_str_eq(line, "host 2 of 4 (from flags; also mpi, tpu, torch)");
	/* mpi over tpu over torch */
	t = expect_ok(ENV("RANK=1", "WORLD_SIZE=2", "PMI_RANK=1", "PMI_SIZE=2"), NULL,
		      1, 2, PF_TOPOLOGY_MPI);
	pf_topology_format(&t, line, sizeof(line));
	cr_assert_str_eq(line, "host 1 of 2 (from mpi; also torch)");
	t = expect_ok(ENV("RANK=1", "WORLD_SIZE=2", "TPU_WORKER_ID=1",
			  "TPU_WORKER_HOSTNAMES=x,y"), NULL, 1, 2, PF_TOPOLOGY_TPU);
	pf_topology_format(&t, line, sizeof(line));
	cr_assert_str_eq(line, "host 1 of 2 (from tpu; also torch)");
	t = expect_ok(ENV("RANK=2", "WORLD_SIZE=4"), NULL, 2, 4, PF_TOPOLOGY_TORCH);
	pf_topology_format(&t, line, sizeof(line));
	cr_assert_str_eq(line, "host 2 of 4 (from torch)");
	t = expect_ok(NULL, NULL, 0, 1, PF_TOPOLOGY_SINGLE);
	pf_topology_format(&t, line, sizeof(line));
	cr_assert_str_eq(line, "host 0 of 1 (from single)");
}

Test(topology, partial_flags_combine_only_when_they_agree)
{
	pf_topology_flags f = flags_index(1);
	pf_host_topology t;

	/* --host-index with the launcher's count */
	t = expect_ok(ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"), &f, 1, 2,
		      PF_TOPOLOGY_FLAGS);
	cr_assert_eq(t.sources, (1u << PF_TOPOLOGY_FLAGS) | (1u << PF_TOPOLOGY_MPI));
	expect_ok(ENV("WORLD_SIZE=4"), &f, 1, 4, PF_TOPOLOGY_FLAGS);
	/* --num-hosts with the launcher's index: the index's source is named */
	f = flags_count(4);
	t = expect_ok(ENV("RANK=3", "WORLD_SIZE=4"), &f, 3, 4, PF_TOPOLOGY_TORCH);
	cr_assert_eq(t.sources, (1u << PF_TOPOLOGY_FLAGS) | (1u << PF_TOPOLOGY_TORCH));
	/* PMIX_RANK alone gives no count; --num-hosts does */
	expect_ok(ENV("PMIX_RANK=2"), &f, 2, 4, PF_TOPOLOGY_MPI);
	expect_ok(ENV("CLOUD_TPU_TASK_ID=3"), &f, 3, 4, PF_TOPOLOGY_TPU);
	/* --num-hosts alone: host 0 only in a pod of one; in a larger pod
	 * every host would read host 0's share, so it is refused, naming the
	 * flag to pass */
	expect_error(NULL, &f, SAYS("flags --num-hosts=4 but nothing gives this host's index: "
				    "pass --host-index 0..3, or run under a launcher"));
	f = flags_count(1);
	expect_ok(NULL, &f, 0, 1, PF_TOPOLOGY_FLAGS);
	f = flags_count(4);
	/* ... and disagreeing partial flags are refused */
	f = flags_index(0);
	expect_error(ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"), &f,
		     SAYS("contradicting host index", "flags --host-index=0",
			  "mpi OMPI_COMM_WORLD_RANK=1"));
	f = flags_count(2);
	expect_error(ENV("RANK=1", "WORLD_SIZE=3"), &f,
		     SAYS("contradicting host count", "flags --num-hosts=2",
			  "torch WORLD_SIZE=3"));
}

Test(topology, every_contradiction_names_both_sides)
{
	pf_topology_flags f = flags_both(1, 4);

	/* flags against each environment source */
	expect_error(ENV("OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4"), &f,
		     SAYS("contradicting host index: flags --host-index=1 but "
			  "mpi OMPI_COMM_WORLD_RANK=2"));
	expect_error(ENV("TPU_WORKER_ID=1", "TPU_WORKER_HOSTNAMES=a,b"), &f,
		     SAYS("contradicting host count: flags --num-hosts=4 but "
			  "tpu TPU_WORKER_HOSTNAMES (2 names)"));
	expect_error(ENV("RANK=1", "WORLD_SIZE=8"), &f,
		     SAYS("contradicting host count: flags --num-hosts=4 but torch WORLD_SIZE=8"));
	/* environment sources against each other */
	expect_error(ENV("OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4",
			 "RANK=1", "WORLD_SIZE=4"), NULL,
		     SAYS("contradicting host index: mpi OMPI_COMM_WORLD_RANK=2 but torch RANK=1"));
	expect_error(ENV("OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4",
			 "TPU_WORKER_ID=2", "TPU_WORKER_HOSTNAMES=a,b,c"), NULL,
		     SAYS("contradicting host count: mpi OMPI_COMM_WORLD_SIZE=4 but "
			  "tpu TPU_WORKER_HOSTNAMES (3 names)"));
	expect_error(ENV("TPU_WORKER_ID=0", "TPU_WORKER_HOSTNAMES=a,b", "RANK=1",
			 "WORLD_SIZE=2"), NULL,
		     SAYS("contradicting host index: tpu TPU_WORKER_ID=0 but torch RANK=1"));
	/* two variables of one source */
	expect_error(ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "PMIX_RANK=2"),
		     NULL, SAYS("OMPI_COMM_WORLD_RANK=1 but mpi PMIX_RANK=2"));
	expect_error(ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "PMI_SIZE=3"),
		     NULL, SAYS("OMPI_COMM_WORLD_SIZE=4 but mpi PMI_SIZE=3"));
	expect_error(ENV("TPU_WORKER_ID=1", "TPU_WORKER_HOSTNAMES=a,b,c",
			 "CLOUD_TPU_TASK_ID=2"), NULL,
		     SAYS("tpu TPU_WORKER_ID=1 but tpu CLOUD_TPU_TASK_ID=2"));
	/* The order in the environment does not matter: precedence does. */
	expect_error(ENV("RANK=1", "WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=2",
			 "OMPI_COMM_WORLD_SIZE=4"), NULL,
		     SAYS("mpi OMPI_COMM_WORLD_RANK=2 but torch RANK=1"));
}

Test(topology, index_not_below_count)
{
	pf_topology_flags f = flags_both(4, 4);

	expect_error(NULL, &f, SAYS("host index 4 (flags --host-index=4) is not below "
				    "the host count 4 (flags --num-hosts=4)"));
	expect_error(ENV("RANK=4", "WORLD_SIZE=4"), NULL,
		     SAYS("host index 4 (torch RANK=4) is not below the host count 4 "
			  "(torch WORLD_SIZE=4)"));
	f = flags_index(5);
	expect_error(ENV("OMPI_COMM_WORLD_SIZE=4", "PMI_SIZE=4"), &f,
		     SAYS("host index 5 (flags --host-index=5)",
			  "host count 4 (mpi OMPI_COMM_WORLD_SIZE=4)"));
	expect_error(ENV("TPU_WORKER_ID=3", "TPU_WORKER_HOSTNAMES=a,b,c"), NULL,
		     SAYS("host index 3 (tpu TPU_WORKER_ID=3)",
			  "tpu TPU_WORKER_HOSTNAMES (3 names)"));
	/* A count of zero is refused before that. */
	f = flags_count(0);
	expect_error(NULL, &f, SAYS("--num-hosts=0: a pod has at least one host"));
}

Test(topology, an_index_without_a_count_and_the_reverse)
{
	pf_topology_flags f = flags_index(1);

	expect_error(NULL, &f, SAYS("flags --host-index=1 gives the host index but "
				    "nothing gives the host count"));
	expect_error(ENV("CLOUD_TPU_TASK_ID=0"), NULL,
		     SAYS("tpu CLOUD_TPU_TASK_ID=0 gives the host index but nothing"));
	expect_error(ENV("PMIX_RANK=0"), NULL, SAYS("mpi PMIX_RANK=0 gives the host index"));
	expect_error(ENV("RANK=0"), NULL, SAYS("torch RANK=0 gives the host index"));
	expect_error(ENV("TPU_WORKER_ID=0"), NULL, SAYS("tpu TPU_WORKER_ID=0 gives"));
	/* A count from the environment without an index is a lost rank. */
	expect_error(ENV("WORLD_SIZE=4"), NULL,
		     SAYS("torch WORLD_SIZE=4 gives the host count but nothing gives "
			  "this host's index"));
	expect_error(ENV("OMPI_COMM_WORLD_SIZE=2"), NULL,
		     SAYS("mpi OMPI_COMM_WORLD_SIZE=2 gives the host count"));
	expect_error(ENV("TPU_WORKER_HOSTNAMES=a,b"), NULL,
		     SAYS("tpu TPU_WORKER_HOSTNAMES (2 names) gives the host count"));
}

/* Every index and count variable with every malformed number. */
Test(topology, malformed_numbers_in_every_variable)
{
	static const char *const index_vars[] = { "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
						  "PMI_RANK", "TPU_WORKER_ID",
						  "CLOUD_TPU_TASK_ID", "RANK" };
	static const char *const count_vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
						  "WORLD_SIZE" };
	static const struct { const char *value, *says; } bad[] = {
		{ "3x", "is not a whole number" },
		{ "-1", "is not a whole number" },
		{ "+1", "is not a whole number" },
		{ " 1", "is not a whole number" },
		{ "1 ", "is not a whole number" },
		{ "1\n", "is not a whole number" },
		{ "", "is not a whole number" },
		{ "0x10", "is not a whole number" },
		{ "1.0", "is not a whole number" },
		{ "1e3", "is not a whole number" },
		{ "4294967296", "is too large" },
		{ "99999999999999999999999", "is too large" },
		{ "18446744073709551617", "is too large" },
		{ "99999999999x", "is not a whole number" },
	};
	char entry[128], says[128];

	for (size_t v = 0; v < sizeof(index_vars) / sizeof(index_vars[0]); v++)
		for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
			snprintf(entry, sizeof(entry), "%s=%s", index_vars[v], bad[b].value);
			snprintf(says, sizeof(says), "%s='%s' %s", index_vars[v], bad[b].value,
				 bad[b].says);
			/* Even when the flags give both: every variable is read. */
			pf_topology_flags f = flags_both(0, 1);
			expect_error(ENV(entry), &f, SAYS(says));
		}
	for (size_t v = 0; v < sizeof(count_vars) / sizeof(count_vars[0]); v++) {
		for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
			snprintf(entry, sizeof(entry), "%s=%s", count_vars[v], bad[b].value);
			snprintf(says, sizeof(says), "%s='%s' %s", count_vars[v], bad[b].value,
				 bad[b].says);
			expect_error(ENV(entry, "RANK=0"), NULL, SAYS(says));
		}
		snprintf(entry, sizeof(entry), "%s=0", count_vars[v]);
		snprintf(says, sizeof(says), "%s=0: a pod has at least one host", count_vars[v]);
		expect_error(ENV(entry, "RANK=0"), NULL, SAYS(says));
	}
	/* A long value is quoted in part, and the message still names it. */
	char big[300];
	memset(big, '7', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	snprintf(entry, sizeof(entry), "RANK=%.100s", big);
	expect_error(ENV(entry, "WORLD_SIZE=2"), NULL, SAYS("torch: RANK='7777", "...' is too large"));
}

Test(topology, malformed_tpu_host_names)
{
	expect_error(ENV("TPU_WORKER_ID=0", "TPU_WORKER_HOSTNAMES="), NULL,
		     SAYS("TPU_WORKER_HOSTNAMES='': host name 1 is empty"));
	expect_error(ENV("TPU_WORKER_ID=0", "TPU_WORKER_HOSTNAMES=a,,b"), NULL,
		     SAYS("TPU_WORKER_HOSTNAMES='a,,b': host name 2 is empty"));
	expect_error(ENV("TPU_WORKER_ID=0", "TPU_WORKER_HOSTNAMES=a,b,"), NULL,
		     SAYS("host name 3 is empty"));
	expect_error(ENV("TPU_WORKER_ID=0", "TPU_WORKER_HOSTNAMES=,a"), NULL,
		     SAYS("host name 1 is empty"));
}

Test(topology, parse_u32)
{
	static const struct { const char *text; int ret; uint32_t value; } cases[] = {
		{ "0", 0, 0 }, { "7", 0, 7 }, { "007", 0, 7 },
		{ "4294967295", 0, UINT32_MAX }, { "04294967295", 0, UINT32_MAX },
		{ "4294967296", -ERANGE, 0 }, { "10000000000", -ERANGE, 0 },
		{ "", -EINVAL, 0 }, { "-0", -EINVAL, 0 }, { "+0", -EINVAL, 0 },
		{ "1_000", -EINVAL, 0 }, { "١", -EINVAL, 0 }, { "12a", -EINVAL, 0 },
		{ "4294967296a", -EINVAL, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t v = 12345;
		int ret = pf_topology_parse_u32(cases[i].text, &v);

		cr_assert_eq(ret, cases[i].ret, "'%s': %d", cases[i].text, ret);
		if (ret == 0)
			cr_assert_eq(v, cases[i].value, "'%s': %u", cases[i].text, v);
		else
			cr_assert_eq(v, 12345, "'%s' wrote the output on failure", cases[i].text);
	}
	cr_assert_eq(pf_topology_parse_u32(NULL, &(uint32_t){ 0 }), -EINVAL);
}

Test(topology, envp_lookup)
{
	char *envp[] = { "RANKS=9", "RANK", "RANK=1", "RANK=2", "WORLD_SIZE=", NULL };

	cr_assert_str_eq(pf_topology_envp_get(envp, "RANK"), "1");
	cr_assert_str_eq(pf_topology_envp_get(envp, "WORLD_SIZE"), "");
	cr_assert_null(pf_topology_envp_get(envp, "RAN"));
	cr_assert_null(pf_topology_envp_get(envp, "LOCAL_RANK"));
	cr_assert_null(pf_topology_envp_get(NULL, "RANK"));
}

/* The default getter reads the process environment (each Criterion test
 * is its own process, so setenv here races with nothing). */
Test(topology, process_environment)
{
	pf_host_topology t;
	pf_error err;

	static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
					    "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
					    "TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES",
					    "CLOUD_TPU_TASK_ID", "RANK", "WORLD_SIZE" };
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	setenv("PMI_RANK", "2", 1);
	setenv("PMI_SIZE", "3", 1);
	pf_error_clear(&err);
	cr_assert_eq(pf_topology_detect(&t, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(t.host_index, 2);
	cr_assert_eq(t.num_hosts, 3);
	cr_assert_eq(t.source, PF_TOPOLOGY_MPI);
}

Test(topology, format_into_short_buffers)
{
	pf_host_topology t = { .host_index = 12, .num_hosts = 16,
			       .source = PF_TOPOLOGY_MPI,
			       .sources = (1u << PF_TOPOLOGY_MPI) | (1u << PF_TOPOLOGY_TORCH) };
	const char *full = "host 12 of 16 (from mpi; also torch)";
	char buf[64];

	cr_assert_eq(pf_topology_format(&t, buf, sizeof(buf)), strlen(full));
	cr_assert_str_eq(buf, full);
	for (size_t cap = 0; cap < strlen(full) + 2; cap++) {
		char small[64];

		memset(small, 'Z', sizeof(small));
		cr_assert_eq(pf_topology_format(&t, small, cap), strlen(full));
		if (cap) {
			cr_assert_eq(strlen(small), cap - 1 < strlen(full) ? cap - 1 : strlen(full));
			cr_assert_eq(strncmp(small, full, strlen(small)), 0);
		}
		cr_assert_eq(small[cap], 'Z', "wrote past cap %zu", cap);
	}
	cr_assert_str_eq(pf_topology_source_name((pf_topology_source)99), "unknown");
}

/* ------------------------------------------------------------------ */
/* loadbench prints who it is at start, from the real environment      */

/* Run `env ENV loadbench ARGS` with stderr into out; @return the status. */
static int run_loadbench(const char *env, const char *args, char *out, size_t cap)
{
	char cmd[4096];

	/* env -u: a test runner's own RANK or MPI variables must not leak in. */
	snprintf(cmd, sizeof(cmd),
		 "env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK "
		 "-u PMI_RANK -u PMI_SIZE -u TPU_WORKER_ID -u TPU_WORKER_HOSTNAMES "
		 "-u CLOUD_TPU_TASK_ID -u RANK -u WORLD_SIZE %s %s --quiet --json %s 2>&1 >/dev/null",
		 env, tu_env_tool("LOADBENCH"), args);
	return WEXITSTATUS(tu_capture(cmd, out, cap, NULL));
}

Test(topology, loadbench_prints_and_uses_the_topology, .timeout = 120)
{
	const char *d = tu_tmpdir();
	char out[4096], args[1024];

	cr_assert_eq(tu_system("%s synth --kind tokens --records 600 --shards 2 --out %s/raw "
			       ">/dev/null && %s convert --shards 2 --out %s/z %s/raw >/dev/null",
			       tu_env_tool("SHARDTOOL"), d, tu_env_tool("SHARDTOOL"), d, d), 0);
	snprintf(args, sizeof(args), "--per-core-batch 10 --threads 1 %s/z", d);
	cr_assert_eq(run_loadbench("", args, out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "loadbench: host 0 of 1 (from single)"), "%s", out);
	cr_assert_eq(run_loadbench("OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2", args,
				   out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "loadbench: host 1 of 2 (from mpi)"), "%s", out);
	cr_assert_eq(run_loadbench("RANK=2 WORLD_SIZE=3", args, out, sizeof(out)), 0,
		     "%s", out);
	cr_assert(strstr(out, "loadbench: host 2 of 3 (from torch)"), "%s", out);
	snprintf(args, sizeof(args), "--host-index 1 --per-core-batch 10 --threads 1 %s/z", d);
	cr_assert_eq(run_loadbench("WORLD_SIZE=2", args, out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "loadbench: host 1 of 2 (from flags; also torch)"), "%s", out);
	/* The detected host is the one the loader runs as. */
	{
		char cmd[2048], json[1 << 16];

		snprintf(cmd, sizeof(cmd),
			 "env TPU_WORKER_ID=1 TPU_WORKER_HOSTNAMES=a,b %s --quiet --json "
			 "--per-core-batch 10 --threads 1 %s/z 2>/dev/null",
			 tu_env_tool("LOADBENCH"), d);
		cr_assert_eq(WEXITSTATUS(tu_capture(cmd, json, sizeof(json), NULL)), 0,
			     "%s", json);
		json_error_t jerr;
		json_t *o = json_loads(json, 0, &jerr);
		cr_assert_not_null(o, "%s: %s", jerr.text, json);
		json_t *topo = json_object_get(o, "topology");
		cr_assert_eq(json_integer_value(json_object_get(topo, "host_index")), 1);
		cr_assert_eq(json_integer_value(json_object_get(topo, "num_hosts")), 2);
		/* 600 records, global batch 20: 30 steps on every host */
		cr_assert_eq(json_integer_value(json_object_get(o, "steps")), 30);
		json_decref(o);
	}
	/* Contradictions stop the run with status 2 before it reads anything. */
	snprintf(args, sizeof(args), "--host-index 0 --per-core-batch 10 %s/z", d);
	cr_assert_eq(run_loadbench("RANK=1 WORLD_SIZE=2", args, out, sizeof(out)), 2, "%s", out);
	cr_assert(strstr(out, "loadbench: topology: contradicting host index: "
			      "flags --host-index=0 but torch RANK=1"), "%s", out);
	snprintf(args, sizeof(args), "--per-core-batch 10 %s/z", d);
	cr_assert_eq(run_loadbench("RANK=1x WORLD_SIZE=2", args, out, sizeof(out)), 2, "%s", out);
	cr_assert(strstr(out, "torch: RANK='1x' is not a whole number"), "%s", out);
	cr_assert_eq(run_loadbench("OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=2", args,
				   out, sizeof(out)), 2, "%s", out);
	cr_assert(strstr(out, "host index 3 (mpi OMPI_COMM_WORLD_RANK=3) is not below"), "%s", out);
	/* --num-hosts alone in a pod of more than one: one line, status 2. */
	snprintf(args, sizeof(args), "--num-hosts 2 --per-core-batch 10 %s/z", d);
	cr_assert_eq(run_loadbench("", args, out, sizeof(out)), 2, "%s", out);
	cr_assert_str_eq(out, "loadbench: topology: flags --num-hosts=2 but nothing gives "
			      "this host's index: pass --host-index 0..1, or run under a "
			      "launcher (mpirun, torchrun, a TPU VM)\n");
	/* Both flags: the old check and its message stand. */
	snprintf(args, sizeof(args), "--num-hosts 2 --host-index 2 --per-core-batch 10 %s/z", d);
	cr_assert_eq(run_loadbench("", args, out, sizeof(out)), 2, "%s", out);
	cr_assert(strstr(out, "--host-index: 2 is not below --num-hosts 2"), "%s", out);
}

/* Under a real Open MPI launcher every rank finds its own place. */
Test(topology, loadbench_under_mpirun, .timeout = 120)
{
	const char *d = tu_tmpdir();
	char cmd[4096], out[8192];

	tu_need_launcher();
	cr_assert_eq(tu_system("%s synth --kind tokens --records 600 --shards 2 --out %s/raw "
			       ">/dev/null && %s convert --shards 2 --out %s/z %s/raw >/dev/null",
			       tu_env_tool("SHARDTOOL"), d, tu_env_tool("SHARDTOOL"), d, d), 0);
	snprintf(cmd, sizeof(cmd),
		 TU_MPI_ENV "mpirun --oversubscribe -np 2 "
		 "%s --quiet --json --per-core-batch 10 --threads 1 %s/z 2>&1 >/dev/null",
		 tu_env_tool("LOADBENCH"), d);
	cr_assert_eq(WEXITSTATUS(tu_capture(cmd, out, sizeof(out), NULL)), 0, "%s", out);
	cr_assert(strstr(out, "loadbench: host 0 of 2 (from mpi)"), "%s", out);
	cr_assert(strstr(out, "loadbench: host 1 of 2 (from mpi)"), "%s", out);
}
