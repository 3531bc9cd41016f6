/* SPDX-License-Identifier: Apache-2.0 */
/* The command lines of every tool: --help is a screen of the common
 * options and --help-all every one, a usage error is one line naming the
 * flag or value with a hint and exit status 2, and loadbench's shuffle
 * default is the API's. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "podfeed.h"
#include "testutil.h"

#define OUT_CAP (1u << 16)

/* Run tool with args, stdout and stderr apart.  @return the exit status. */
static int run(const char *tool, const char *args, char *out, char *err)
{
	static char path[1024];
	char cmd[4096];
	int st;

	/* One scratch directory a test (a test is a process). */
	if (!path[0])
		snprintf(path, sizeof(path), "%s/stderr", tu_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s %s 2>%s", tool, args, path);
	st = tu_capture(cmd, out, OUT_CAP, NULL);
	if (err) {
		size_t len;
		uint8_t *e = tu_read_file(path, &len);

		memcpy(err, e, len < OUT_CAP - 1 ? len : OUT_CAP - 1);
		err[len < OUT_CAP - 1 ? len : OUT_CAP - 1] = '\0';
		free(e);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static size_t lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static size_t widest(const char *s)
{
	size_t w = 0;

	while (*s) {
		size_t n = strcspn(s, "\n");

		if (n > w)
			w = n;
		s += n + (s[n] ? 1 : 0);
	}
	return w;
}

/* Every --help and --help-all: on stdout, exit 0, a usage line, no line
 * wider than 79 columns. */
Test(cli, every_help_fits_the_screen)
{
	static const struct { const char *tool, *args; } cases[] = {
		{ "LOADBENCH", "" }, { "LOADBENCH", "plan" }, { "LOADBENCH", "ladder" },
		{ "LOADBENCH", "regions" }, { "LOADBENCH", "which" }, { "LOADBENCH", "state" },
		{ "SHARDTOOL", "" }, { "SHARDTOOL", "synth" },
		{ "SHARDTOOL", "convert" }, { "SHARDTOOL", "manifest" },
		{ "SHARDTOOL", "podsim" }, { "SHARDTOOL", "inspect" }, { "SHARDTOOL", "verify" },
		{ "SHARDTOOL", "cat" },
		{ "PFBENCH", "" }, { "KERNELBENCH", "" }, { "REGIONFS", "" },
	};
	char *out = malloc(OUT_CAP), *err = malloc(OUT_CAP), args[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!strcmp(cases[i].tool, "REGIONFS") && !getenv("REGIONFS"))
			continue;	/* not built: no libfuse3 */
		for (int all = 0; all < 2; all++) {
			snprintf(args, sizeof(args), "%s %s", cases[i].args,
				 all ? "--help-all" : "--help");
			cr_assert_eq(run(tu_env_tool(cases[i].tool), args, out, err), 0,
				     "%s %s: %s", cases[i].tool, args, err);
			cr_assert(strstr(out, "usage: "), "%s %s: %s", cases[i].tool, args, out);
			cr_assert_leq(widest(out), 79, "%s %s:\n%s", cases[i].tool, args, out);
			cr_assert_str_empty(err, "%s %s: %s", cases[i].tool, args, err);
		}
	}
	free(out);
	free(err);
}

/* loadbench --help is one screen of the common options; --help-all has
 * every option, each once. */
Test(cli, loadbench_help_is_a_screen_help_all_the_rest)
{
	static const char *const common[] = {
		"--per-core-batch", "--cores", "--epochs", "--steps", "--shuffle",
		"--features", "--threads", "--baseline", "--repeat", "--json", "--help-all",
	};
	static const char *const rest[] = {
		"--num-hosts", "--host-index", "--shuffle-window", "--seed", "--remainder",
		"--io-depth", "--prefetch", "--memory", "--direct", "--no-manifest",
		"--verify-records", "--region", "--mount", "--mounts", "--cross-region",
		"--egress-usd-per-gib", "--quiet", "--faults", "--io-retries",
		"--io-timeout-ms", "--on-corrupt", "--quarantine", "--max-corrupt",
		"--save-state", "--save-every", "--resume", "--skip-steps", "--model", "--classes",
		"--vocab", "--embed-dim", "--embed-lr-scale", "--input-feature",
		"--label-feature", "--lr", "--lr-rule", "--ref-global-batch",
		"--warmup-steps", "--eval", "--eval-every", "--log-every", "--html",
	};
	char *help = malloc(OUT_CAP), *all = malloc(OUT_CAP), flag[64];
	const char *lb = tu_env_tool("LOADBENCH");

	cr_assert_eq(run(lb, "--help", help, NULL), 0);
	cr_assert_eq(run(lb, "--help-all", all, NULL), 0);
	cr_assert_leq(lines(help), 30, "%zu lines:\n%s", lines(help), help);
	for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++) {
		cr_assert(strstr(help, common[i]), "--help lacks %s:\n%s", common[i], help);
		cr_assert(strstr(all, common[i]), "--help-all lacks %s", common[i]);
	}
	for (size_t i = 0; i < sizeof(rest) / sizeof(rest[0]); i++) {
		/* "--lr " is not "--lr-rule": the option with its value. */
		snprintf(flag, sizeof(flag), "\n  %s ", rest[i]);
		cr_assert_null(strstr(help, flag), "--help shows %s:\n%s", rest[i], help);
		cr_assert(strstr(all, flag), "--help-all lacks %s:\n%s", rest[i], all);
		cr_assert_null(strstr(strstr(all, flag) + 1, flag), "%s twice", rest[i]);
	}
	/* It says how many it left out, and where they are. */
	cr_assert(strstr(help, "more options: loadbench --help-all"), "%s", help);
	free(help);
	free(all);
}

/* Each case: the tool, its arguments, what the one line must name, and
 * the command the hint names. */
static const struct usage_case {
	const char *tool, *args, *names, *prog;
} usage_cases[] = {
	{ "LOADBENCH", "--per-core-batch x d", "--per-core-batch: 'x' is not a whole number",
	  "loadbench" },
	{ "LOADBENCH", "--frobnicate d", "unknown option '--frobnicate'", "loadbench" },
	{ "LOADBENCH", "-z d", "unknown option '-z'", "loadbench" },
	{ "LOADBENCH", "--json=1 d", "--json takes no value", "loadbench" },
	{ "LOADBENCH", "--threads", "--threads: a value is required", "loadbench" },
	{ "LOADBENCH", "--remainder keep d", "--remainder: 'keep' is not drop or wrap",
	  "loadbench" },
	{ "LOADBENCH", "--threads 0 d", "--threads: '0' is out of range", "loadbench" },
	{ "LOADBENCH", "--io-depth automatic d", "--io-depth: 'automatic' is not a whole number",
	  "loadbench" },
	{ "LOADBENCH", "--shuffle-window 0 d", "--shuffle-window: 0 is no window", "loadbench" },
	{ "LOADBENCH", "--shuffle=random d", "--shuffle: 'random' is not a shuffle (window, "
	  "global", "loadbench" },
	{ "LOADBENCH", "--shuffle= d", "--shuffle: '' is not a shuffle", "loadbench" },
	{ "LOADBENCH", "--source web", "--source: 'web' is not NAME=WEIGHT:PATH", "loadbench" },
	{ "LOADBENCH", "--source web=1", "--source: 'web=1' is not NAME=WEIGHT:PATH", "loadbench" },
	{ "LOADBENCH", "--source =1:d", "--source: '=1:d': a NAME is 1 to 63 bytes", "loadbench" },
	{ "LOADBENCH", "--source web=1:", "--source: 'web=1:' names no PATH", "loadbench" },
	{ "LOADBENCH", "--source web=0:d", "the weight '0' is not a finite number above 0",
	  "loadbench" },
	{ "LOADBENCH", "--source web=-1:d", "the weight '-1' is not", "loadbench" },
	{ "LOADBENCH", "--source web=nan:d", "the weight 'nan' is not", "loadbench" },
	{ "LOADBENCH", "--source web=x:d", "the weight 'x' is not", "loadbench" },
	{ "LOADBENCH", "--source a=1:d --source a=2:d", "two sources are named 'a'",
	  "loadbench" },
	{ "LOADBENCH", "--source a=1:/nonexistent/podfeed", "--source a: "
	  "'/nonexistent/podfeed' matches no files", "loadbench" },
	{ "LOADBENCH", "--source a=1:d d", "'d': a mixture's files are its --source's only",
	  "loadbench" },
	{ "LOADBENCH", "--mix sample d", "--mix: needs --source", "loadbench" },
	{ "LOADBENCH", "--source a=1:d --mix-unit tokens", "--mix-unit tokens: needs --pack",
	  "loadbench" },
	{ "LOADBENCH", "--mix-unit tokens d", "--mix-unit: needs --source", "loadbench" },
	{ "LOADBENCH", "--source a=1:d --mix zipf", "--mix: 'zipf' is not stratified or sample",
	  "loadbench" },
	{ "LOADBENCH", "--source a=1:d --mix-stop last", "--mix-stop: 'last' is not first or "
	  "first-exhausted", "loadbench" },
	{ "LOADBENCH", "--cross-region maybe d", "--cross-region: 'maybe' is not warn, refuse "
	  "or allow", "loadbench" },
	{ "LOADBENCH", "--embed-lr-scale 0 d", "--embed-lr-scale: '0' is not a finite number "
	  "above 0", "loadbench" },
	{ "LOADBENCH", "--resume /nonexistent/s d", "--resume: /nonexistent/s:", "loadbench" },
	{ "LOADBENCH", "--quarantine q d", "--quarantine: needs --on-corrupt skip", "loadbench" },
	{ "LOADBENCH", "", "no shards given", "loadbench" },
	{ "LOADBENCH", "plan --per-core-batch 8 --ref-lr nan", "--ref-lr: 'nan' is not a "
	  "finite number", "loadbench plan" },
	{ "LOADBENCH", "plan", "--per-core-batch is required", "loadbench plan" },
	{ "LOADBENCH", "ladder --hosts 4,2 d", "--hosts: '4,2' does not ascend",
	  "loadbench ladder" },
	{ "LOADBENCH", "ladder --hosts 1,2 --per-core-batch 0 d", "--per-core-batch: '0' is "
	  "out of range", "loadbench ladder" },
	{ "LOADBENCH", "regions --sample 0", "--sample: '0' is out of range",
	  "loadbench regions" },
	{ "LOADBENCH", "regions a b", "one SUBDIR at most ('b' is one more)",
	  "loadbench regions" },
	{ "SHARDTOOL", "", "a command is required", "shardtool" },
	{ "SHARDTOOL", "frobnicate", "unknown command 'frobnicate'", "shardtool" },
	{ "SHARDTOOL", "synth --kind words --records 1 --shards 1 --out o",
	  "--kind: 'words' is not tokens, dense, images, blobs or text", "shardtool synth" },
	{ "SHARDTOOL", "synth --kind tokens", "--kind, --records, --shards and --out are "
	  "required", "shardtool synth" },
	{ "SHARDTOOL", "convert --out o --align 5000 i", "--align: 5000 is not a power of two",
	  "shardtool convert" },
	{ "SHARDTOOL", "convert --frobnicate", "unknown option '--frobnicate'",
	  "shardtool convert" },
	{ "SHARDTOOL", "manifest", "name the shards", "shardtool manifest" },
	{ "SHARDTOOL", "podsim d", "--hosts H is required", "shardtool podsim" },
	{ "SHARDTOOL", "podsim --hosts 2 --remainder keep d", "--remainder: 'keep' is not drop "
	  "or wrap", "shardtool podsim" },
	{ "SHARDTOOL", "podsim --hosts 2", "name the dataset", "shardtool podsim" },
	{ "SHARDTOOL", "inspect --json=yes f", "--json takes no value", "shardtool inspect" },
	{ "SHARDTOOL", "verify", "no files given", "shardtool verify" },
	{ "SHARDTOOL", "cat --range 7 f", "--range: '7' is not a range A:B", "shardtool cat" },
	{ "SHARDTOOL", "cat a b", "exactly one FILE is required", "shardtool cat" },
	{ "REGIONFS", "--rtt-ms 1e3 a b", "--rtt-ms: '1e3' is not a number", "regionfs" },
	{ "REGIONFS", "--mbps 0 a b", "--mbps: '0' must be above 0", "regionfs" },
	{ "REGIONFS", "--frobnicate a b", "unknown option '--frobnicate'", "regionfs" },
	{ "REGIONFS", "a", "BACKING_DIR and MOUNTPOINT are required", "regionfs" },
	{ "PFBENCH", "", "name a benchmark", "pfbench" },
	{ "PFBENCH", "fft", "unknown benchmark 'fft'", "pfbench" },
	{ "PFBENCH", "crc --runs 65", "--runs: '65' is out of range", "pfbench" },
	{ "PFBENCH", "decode", "decode: no input files", "pfbench" },
	{ "KERNELBENCH", "--runs 0", "--runs: '0' is out of range", "kernelbench" },
	{ "KERNELBENCH", "--min-ms x", "--min-ms: 'x' is not a number", "kernelbench" },
	{ "KERNELBENCH", "extra", "unexpected argument 'extra'", "kernelbench" },
};

/* A usage error: exit 2, nothing on stdout, one line on stderr that
 * names the flag or value and ends with the hint. */
Test(cli, a_usage_error_is_one_line_with_a_hint)
{
	char *out = malloc(OUT_CAP), *err = malloc(OUT_CAP), want[256];

	for (size_t i = 0; i < sizeof(usage_cases) / sizeof(usage_cases[0]); i++) {
		const struct usage_case *c = &usage_cases[i];

		if (!strcmp(c->tool, "REGIONFS") && !getenv("REGIONFS"))
			continue;	/* not built: no libfuse3 */
		cr_assert_eq(run(tu_env_tool(c->tool), c->args, out, err), 2, "%s %s: %s",
			     c->tool, c->args, err);
		cr_assert_str_empty(out, "%s %s: stdout %s", c->tool, c->args, out);
		cr_assert_eq(lines(err), 1, "%s %s:\n%s", c->tool, c->args, err);
		snprintf(want, sizeof(want), "%s: ", c->prog);
		cr_assert_eq(strncmp(err, want, strlen(want)), 0, "%s %s: %s", c->tool,
			     c->args, err);
		cr_assert(strstr(err, c->names), "%s %s: '%s' does not say '%s'", c->tool,
			  c->args, err, c->names);
		snprintf(want, sizeof(want), "; try '%s --help'\n", c->prog);
		cr_assert(strlen(err) > strlen(want) &&
			  !strcmp(err + strlen(err) - strlen(want), want),
			  "%s %s: no hint in '%s'", c->tool, c->args, err);
	}
	free(out);
	free(err);
}

/* loadbench's JSON report of a run with args (dir NULL: args name the
 * data). */
static json_t *report(const char *dir, const char *args)
{
	char *out = malloc(OUT_CAP), *err = malloc(OUT_CAP), line[1024];
	json_error_t jerr;
	json_t *o;

	snprintf(line, sizeof(line), "--json --quiet --per-core-batch 10 --threads 1 %s%s%s",
		 args, dir ? " " : "", dir ? dir : "");
	if (dir)
		strncat(line, "/z", sizeof(line) - strlen(line) - 1);
	cr_assert_eq(run(tu_env_tool("LOADBENCH"), line, out, err), 0, "%s: %s", line, err);
	o = json_loads(out, 0, &jerr);
	cr_assert_not_null(o, "%s: %s", jerr.text, out);
	free(out);
	free(err);
	return o;
}

/* loadbench shuffles only when asked, as pf_loader_config (whose zeroed
 * shuffle is false), tf.data and Grain do; the report says which. */
Test(cli, loadbench_shuffles_only_when_asked)
{
	const char *d = tu_tmpdir(), *st = tu_env_tool("SHARDTOOL");
	char *help = malloc(OUT_CAP);
	pf_loader_config zero = { 0 };
	json_t *o;

	cr_assert_eq(tu_system("%s synth --kind tokens --records 400 --shards 2 --out %s/raw "
			       ">/dev/null", st, d), 0);
	cr_assert_eq(tu_system("%s convert --shards 2 --out %s/z %s/raw >/dev/null", st, d, d),
		     0);
	cr_assert(!zero.shuffle);
	o = report(d, "");
	cr_assert(json_is_false(json_object_get(o, "shuffle")), "shuffle is not false");
	cr_assert_eq(json_integer_value(json_object_get(o, "shuffle_window")), 0);
	json_decref(o);
	o = report(d, "--shuffle --seed 3");
	cr_assert(json_is_true(json_object_get(o, "shuffle")));
	/* The window in force: the default 8192 in whole host batches of 10. */
	cr_assert_eq(json_integer_value(json_object_get(o, "shuffle_window")), 8200);
	cr_assert_eq(json_integer_value(json_object_get(o, "seed")), 3);
	json_decref(o);
	o = report(d, "--shuffle=global --seed 3");
	cr_assert(json_is_true(json_object_get(o, "shuffle")));
	cr_assert_str_eq(json_string_value(json_object_get(o, "shuffle_mode")), "global");
	cr_assert_eq(json_integer_value(json_object_get(o, "shuffle_window")), 8200);
	/* Two frames of 200 records in slices of 91 (per-core batch 10):
	 * the frame cache holds both, reads each once and serves their
	 * other 4 slices. */
	{
		json_t *fc = json_object_get(o, "frame_cache");

		cr_assert(json_is_object(fc), "no frame_cache in the JSON");
		cr_assert_eq(json_integer_value(json_object_get(fc, "entries")), 2);
		cr_assert_eq(json_integer_value(json_object_get(fc, "loads")), 2);
		cr_assert_eq(json_integer_value(json_object_get(fc, "hits")), 4);
		cr_assert_gt(json_integer_value(json_object_get(fc, "bytes")), 0);
		cr_assert_eq(json_integer_value(json_object_get(fc, "bypassed")), 0);
	}
	json_decref(o);
	/* A mixture of the shards with themselves: a line per source, and
	 * the "sources" array. */
	{
		char args[1024];
		json_t *src;

		snprintf(args, sizeof(args), "--source a=3:%s/z --source b=1:%s/z --shuffle", d, d);
		o = report(NULL, args);
		src = json_object_get(o, "sources");
		cr_assert(json_is_array(src) && json_array_size(src) == 2);
		cr_assert_str_eq(json_string_value(json_object_get(json_array_get(src, 1), "name")),
				 "b");
		cr_assert_float_eq(json_number_value(json_object_get(json_array_get(src, 0),
								      "realised_share")),
				   0.75, 0.01);
		json_decref(o);
	}
	o = report(d, "--shuffle=window");
	cr_assert_str_eq(json_string_value(json_object_get(o, "shuffle_mode")), "window");
	cr_assert_null(json_object_get(o, "frame_cache"), "the window shuffle has no frame cache");
	json_decref(o);
	o = report(d, "--shuffle-window 100");
	cr_assert(json_is_true(json_object_get(o, "shuffle")));
	cr_assert_eq(json_integer_value(json_object_get(o, "shuffle_window")), 100);
	json_decref(o);
	/* and the help says the default (words wrapped: spaces squeezed) */
	cr_assert_eq(run(tu_env_tool("LOADBENCH"), "--help", help, NULL), 0);
	for (char *r = help, *w = help; ; r++) {
		if (isspace((unsigned char)*r) && w > help && w[-1] == ' ')
			continue;
		*w++ = isspace((unsigned char)*r) ? ' ' : *r;
		if (!*r)
			break;
	}
	cr_assert(strstr(help, "--shuffle[=global] shuffle: frames permuted, records in a "
			 "window of 8192 (default off"), "%s", help);
	free(help);
}
