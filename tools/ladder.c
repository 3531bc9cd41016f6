/* SPDX-License-Identifier: Apache-2.0 */
/* `loadbench ladder`: the guidance's "start small, scale up gradually,
 * validating each step".  Runs loadbench under `mpirun -np H` for each
 * rung H, reads the pod report of each, and prints the per-host
 * throughput and the scaling efficiency per rung, flagging the first
 * rung under 90%. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loadbench.h"

#define MAX_RUNGS 16
#define OUTPUT_MAX (64u << 20)

typedef struct rung {
	uint64_t hosts;
	double pod_rps, per_host_rps;
	bool steps_equal;
	uint64_t global_batch, steps;	/* the rung's step plan, as it ran */
	double lr;			/* with a model, else 0 */
} rung;

typedef struct ladder_opts {
	rung r[MAX_RUNGS];
	unsigned n;
	bool hosts_given, json, quiet;
	const char *mpirun;
	const char *html;	/* --html FILE */
	options lb;		/* loadbench's options: checked, passed on */
	char **rest;		/* what the rungs are given */
	int nrest;
} ladder_opts;

/* --hosts "1,2,4": ascending, each in [1, 4096]. */
static int parse_hosts(void *field, const char *text)
{
	ladder_opts *o = field;
	const char *s = text;

	o->n = 0;
	while (*s) {
		char item[32];
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);

		if (o->n == MAX_RUNGS || len == 0 || len >= sizeof(item)) {
			cli_usage("--hosts: '%s' is not a list of up to %u host counts", text,
				  MAX_RUNGS);
			return -EINVAL;
		}
		memcpy(item, s, len);
		item[len] = '\0';
		if (cli_parse_u64("--hosts", item, 1, 4096, false, &o->r[o->n].hosts) < 0)
			return -EINVAL;
		if (o->n && o->r[o->n].hosts <= o->r[o->n - 1].hosts) {
			cli_usage("--hosts: '%s' does not ascend", text);
			return -EINVAL;
		}
		o->n++;
		s += len + (end ? 1 : 0);
	}
	if (!o->n) {
		cli_usage("--hosts: empty list");
		return -EINVAL;
	}
	o->hosts_given = true;
	return 0;
}

/* The ladder's own options come first: --json and --quiet are also
 * loadbench's, and getopt_long takes the first of two equal names. */
static const cli_opt ladder_own[] = {
	{ CLI_CALL, "hosts", .arg = "LIST", .call = parse_hosts,
	  .help = "rungs, ascending (e.g. 1,2,4)" },
	{ CLI_STRING, "mpirun", .arg = "PATH", .off = offsetof(ladder_opts, mpirun),
	  .help = "the launcher (default: mpirun on PATH)" },
	{ CLI_FLAG, "json", .off = offsetof(ladder_opts, json),
	  .help = "the ladder as one JSON object on stdout" },
	{ CLI_STRING, "html", .arg = "FILE", .off = offsetof(ladder_opts, html),
	  .help = "also write the ladder as a page: records/s against hosts with the "
		  "linear ideal, the step plan beside it (docs/report.md)" },
	{ CLI_FLAG, "quiet", .off = offsetof(ladder_opts, quiet), .more = true,
	  .help = "accepted; the rungs are always quiet" },
	{ CLI_END },
};

static const cli_opt ladder_cli[] = {
	{ CLI_INCLUDE, .table = ladder_own },
	{ CLI_SECTION, .help = "loadbench's options, passed to every rung:" },
	{ CLI_INCLUDE, .table = loadbench_cli, .off = offsetof(ladder_opts, lb), .more = true },
	{ CLI_END },
};

static const cli_command ladder_command = {
	.name = "loadbench ladder",
	.usage = "usage: loadbench ladder --hosts H1,H2,... [loadbench options] SHARD...\n",
	.about = "Runs `mpirun --oversubscribe -np H loadbench --json --quiet OPTIONS\n"
		 "SHARD...` for each rung H in turn (each rank one host of a pod of H),\n"
		 "and prints each rung's pod throughput, throughput per host, and scaling\n"
		 "efficiency: throughput(H) / (H x throughput(1)), the first rung standing\n"
		 "in for 1 host when 1 is not a rung.  The first rung under 90% is\n"
		 "flagged: scale no further before finding why.  All other options go to\n"
		 "loadbench as they are (--model, --steps, --cores, ...).\n",
	.opts = ladder_cli,
	.footer = "As root, OMPI_ALLOW_RUN_AS_ROOT and its confirmation are set for the\n"
		  "rungs.  Exit status: 0 done (flagged or not), 1 a rung failed or mpirun\n"
		  "is missing, 2 bad usage.\n",
};

/* Every option that is not the ladder's own goes to the rungs as given. */
static void pass_on(void *ctx, const cli_opt *opt, char *const *args, int n)
{
	ladder_opts *o = ctx;

	for (const cli_opt *own = ladder_own; own->type != CLI_END; own++)
		if (opt == own)
			return;
	for (int i = 0; i < n; i++)
		o->rest[o->nrest++] = args[i];
}

/* An executable named name on PATH (or name itself when it has a '/'). */
static bool on_path(const char *name)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (strchr(name, '/'))
		return access(name, X_OK) == 0;
	while (path && *path) {
		const char *end = strchr(path, ':');
		size_t len = end ? (size_t)(end - path) : strlen(path);

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, len ? path : ".", name);
		if (access(buf, X_OK) == 0)
			return true;
		path += len + (end ? 1 : 0);
	}
	return false;
}

/* Run argv, its stdout into a malloc'd string.  @return the exit status,
 * or -1 when it could not run or was killed. */
static int run_capture(char *const *argv, char **out)
{
	int fd[2], status;
	pid_t pid;
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);

	*out = NULL;
	if (!buf || pipe(fd) < 0) {
		free(buf);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		free(buf);
		return -1;
	}
	if (pid == 0) {
		dup2(fd[1], STDOUT_FILENO);
		close(fd[0]);
		close(fd[1]);
		execvp(argv[0], argv);
		fprintf(stderr, "%s: cannot run %s: %s\n", cli_prog, argv[0], strerror(errno));
		_exit(127);
	}
	close(fd[1]);
	for (;;) {
		ssize_t n;

		if (len + 1 == cap) {
			char *g = cap < OUTPUT_MAX ? realloc(buf, cap * 2) : NULL;
			if (!g)
				break;
			buf = g;
			cap *= 2;
		}
		n = read(fd[0], buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			free(buf);
			return -1;
		}
	*out = buf;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int run_rung(const char *mpirun, const char *self, rung *r, int nargs,
		    char **args)
{
	char np[32], *out = NULL;
	char **argv = calloc((size_t)nargs + 10, sizeof(*argv));
	json_t *report, *pod;
	json_error_t jerr;
	int k = 0, status;

	if (!argv) {
		cli_fail("out of memory");
		return 1;
	}
	snprintf(np, sizeof(np), "%llu", (unsigned long long)r->hosts);
	argv[k++] = (char *)mpirun;
	argv[k++] = "--oversubscribe";
	argv[k++] = "-np";
	argv[k++] = np;
	argv[k++] = (char *)self;
	argv[k++] = "--json";
	argv[k++] = "--quiet";
	for (int i = 0; i < nargs; i++)
		argv[k++] = args[i];
	argv[k] = NULL;
	fprintf(stderr, "%s: rung of %llu host%s: %s --oversubscribe -np %s %s ...\n",
		cli_prog, (unsigned long long)r->hosts, r->hosts == 1 ? "" : "s", mpirun,
		np, self);
	status = run_capture(argv, &out);
	free(argv);
	if (status != 0) {
		cli_fail("the rung of %llu hosts failed (exit status %d)",
			 (unsigned long long)r->hosts, status);
		free(out);
		return 1;
	}
	/* Rank 0's report is the one JSON object on the rung's stdout. */
	report = json_loads(out, JSON_DISABLE_EOF_CHECK, &jerr);
	free(out);
	pod = json_object_get(report, "pod");
	if (!json_is_number(json_object_get(pod, "records_per_s")) ||
	    !json_is_number(json_object_get(pod, "per_host_records_per_s"))) {
		cli_fail("the rung of %llu hosts printed no pod report%s%s",
			 (unsigned long long)r->hosts, report ? "" : ": ",
			 report ? "" : jerr.text);
		json_decref(report);
		return 1;
	}
	r->pod_rps = json_number_value(json_object_get(pod, "records_per_s"));
	r->per_host_rps = json_number_value(json_object_get(pod, "per_host_records_per_s"));
	r->steps_equal = json_is_true(json_object_get(pod, "steps_equal"));
	r->global_batch = (uint64_t)json_integer_value(
		json_object_get(json_object_get(report, "topology"), "global_batch"));
	r->steps = (uint64_t)json_integer_value(json_object_get(report, "steps"));
	r->lr = json_number_value(json_object_get(json_object_get(report, "train"), "lr"));
	json_decref(report);
	return 0;
}

int ladder_main(int argc, char **argv)
{
	ladder_opts o = { .mpirun = "mpirun" };
	rung *r = o.r;
	unsigned n;
	const char *mpirun;
	char self[4096];
	char **rest;
	int nrest, ret, first;
	bool json;
	ssize_t len;
	pf_ladder_rung rungs[MAX_RUNGS];
	pf_report *rep = NULL;
	pf_error err;
	cli_outfile html;

	loadbench_defaults(&o.lb);
	o.rest = calloc((size_t)argc + 1, sizeof(*o.rest));
	if (!o.rest) {
		cli_fail("out of memory");
		return 1;
	}
	ret = cli_parse_each(&ladder_command, argc, argv, &o, &first, pass_on, &o);
	ckpt_free(&o.lb.resume);
	if (ret < 0 && !o.hosts_given)
		ret = cli_usage("--hosts is required (e.g. --hosts 1,2,4)");
	if (ret < 0 && first == argc)
		ret = cli_usage("no shards given");
	if (ret >= 0) {
		free(o.rest);
		return ret;
	}
	for (int i = first; i < argc; i++)
		o.rest[o.nrest++] = argv[i];
	rest = o.rest;
	nrest = o.nrest;
	n = o.n;
	mpirun = o.mpirun;
	json = o.json;
	if (!on_path(mpirun)) {
		cli_fail("%s not found: the ladder runs each rung under Open MPI's mpirun "
			 "(Debian package openmpi-bin; tools/install-deps installs it)",
			 mpirun);
		free(rest);
		return 1;
	}
	/* mpirun starts the ranks by this path: /proc/self/exe would name
	 * mpirun itself in its children. */
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0) {
		cli_fail("cannot find this program's path: %s", strerror(errno));
		free(rest);
		return 1;
	}
	self[len] = '\0';
	if (geteuid() == 0) {
		/* Open MPI refuses root without both. */
		setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
		setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
	}
	if (cli_outfile_open(&html, "--html", o.html)) {
		free(rest);
		return 1;
	}
	for (unsigned i = 0; i < n; i++) {
		if (run_rung(mpirun, self, &r[i], nrest, rest)) {
			free(rest);
			cli_outfile_close(&html, true);
			return 1;
		}
		rungs[i] = (pf_ladder_rung){
			.hosts = (uint32_t)r[i].hosts, .records_per_s = r[i].pod_rps,
			.per_host_records_per_s = r[i].per_host_rps,
			.steps_equal = r[i].steps_equal, .global_batch = r[i].global_batch,
			.steps = r[i].steps, .lr = r[i].lr,
		};
	}
	free(rest);
	/* The figures (efficiency, the linear ideal, the first rung under
	 * 90%) are the library's ladder section. */
	pf_error_clear(&err);
	if (pf_report_create(&rep) < 0 || pf_report_add_ladder(rep, rungs, n, &err) < 0) {
		if (err.code)
			cli_print_error(&err);
		else
			cli_fail("out of memory for the report");
		ret = 1;
	} else if (pf_report_print(rep, json ? PF_REPORT_JSON : PF_REPORT_TEXT, stdout) < 0) {
		cli_fail("cannot write the report: %s", strerror(errno));
		ret = 1;
	} else {
		ret = o.html ? cli_report_html(&html, rep) : 0;
	}
	pf_report_free(rep);
	cli_outfile_close(&html, ret != 0);
	return ret;
}
