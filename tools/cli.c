/* SPDX-License-Identifier: Apache-2.0 */
/* Shared pieces of the command-line tools: option tables, flag values,
 * inputs, JSON. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc_internal.h"
#include "cli.h"
#include "common_internal.h"

const char *cli_prog = "podfeed";

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double cli_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The progress line being drawn, cleared before a message takes its
 * place (cli_progress_start()). */
static cli_progress *active_progress;

static void progress_clear(void)
{
	if (active_progress && active_progress->drawn) {
		fputs("\r\033[K", stderr);
		active_progress->drawn = false;
	}
}

void cli_fail(const char *fmt, ...)
{
	va_list ap;

	progress_clear();
	fprintf(stderr, "%s: ", cli_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void cli_print_error(const pf_error *err)
{
	char line[PF_ERROR_LINE_MAX];

	pf_error_format(err, line, sizeof(line));
	progress_clear();
	fprintf(stderr, "%s: %s\n", cli_prog, line);
}

int cli_parse_u64(const char *flag, const char *text, uint64_t min,
		  uint64_t max, bool allow_suffix, uint64_t *out)
{
	const char *p = text;
	uint64_t v = 0, mul = 1;

	if (!text || !*text) {
		cli_usage("%s: a value is required", flag);
		return -EINVAL;
	}
	if (*p < '0' || *p > '9')
		goto bad;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
			cli_usage("%s: '%s' is too large", flag, text);
			return -EINVAL;
		}
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (*p && allow_suffix && !p[1]) {
		switch (*p) {
		case 'k': case 'K': mul = 1ull << 10; p++; break;
		case 'm': case 'M': mul = 1ull << 20; p++; break;
		case 'g': case 'G': mul = 1ull << 30; p++; break;
		default: break;
		}
	}
	if (*p)
		goto bad;
	if (v && mul > UINT64_MAX / v) {
		cli_usage("%s: '%s' is too large", flag, text);
		return -EINVAL;
	}
	v *= mul;
	if (v < min || v > max) {
		cli_usage("%s: '%s' is out of range [%llu, %llu]", flag, text,
			 (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	*out = v;
	return 0;
bad:
	cli_usage("%s: '%s' is not a whole number%s", flag, text,
		 allow_suffix ? " (K, M, G suffixes allowed)" : "");
	return -EINVAL;
}

int cli_parse_range(const char *flag, const char *text, uint64_t *from,
		    uint64_t *to)
{
	const char *colon = text ? strchr(text, ':') : NULL;
	char head[32];
	size_t hl;

	if (!colon) {
		cli_usage("%s: '%s' is not a range A:B", flag, text ? text : "");
		return -EINVAL;
	}
	hl = (size_t)(colon - text);
	if (hl >= sizeof(head)) {
		cli_usage("%s: '%s' is not a range A:B", flag, text);
		return -EINVAL;
	}
	memcpy(head, text, hl);
	head[hl] = '\0';
	*from = 0;
	*to = UINT64_MAX;
	if (hl && cli_parse_u64(flag, head, 0, UINT64_MAX, false, from) < 0)
		return -EINVAL;
	if (colon[1] && cli_parse_u64(flag, colon + 1, 0, UINT64_MAX, false, to) < 0)
		return -EINVAL;
	if (*to < *from) {
		cli_usage("%s: '%s' ends before it starts", flag, text);
		return -EINVAL;
	}
	return 0;
}

int cli_resolve_inputs(char *const *args, int n, char ***out, char **manifest)
{
	pf_error err;
	int ret;

	pf_error_clear(&err);
	ret = pf_paths_resolve((const char *const *)args, (size_t)n, out, manifest, &err);
	if (ret < 0)
		cli_print_error(&err);
	return ret;
}

int cli_expand_inputs(char *const *args, int n, char ***out)
{
	return cli_resolve_inputs(args, n, out, NULL);
}

void cli_free_inputs(char **list, int n)
{
	pf_paths_free(list, (size_t)n);
}

int cli_json_fprint(FILE *f, json_t *o, bool bad)
{
	char *line = bad ? NULL : pf_json_line(o);

	json_decref(o);
	if (!line) {
		cli_fail("out of memory for the JSON output");
		return 1;
	}
	fprintf(f, "%s\n", line);
	pf_free(line);
	return 0;
}

int cli_json_print(json_t *o, bool bad)
{
	return cli_json_fprint(stdout, o, bad);
}

/* ------------------------------------------------------------------ */
/* Output files                                                         */

int cli_outfile_open(cli_outfile *f, const char *flag, const char *path)
{
	struct stat st;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	if (!path)
		return 0;
	f->path = path;
	/* Not truncated yet: a run that fails leaves a file it did not make
	 * as it was, and one it made is removed. */
	f->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (f->fd >= 0) {
		f->created = true;
	} else if (errno == EEXIST) {
		f->fd = open(path, O_WRONLY | O_CLOEXEC);
	}
	if (f->fd < 0) {
		cli_fail("%s %s: cannot write it: %s", flag, path, strerror(errno));
		return 1;
	}
	if (fstat(f->fd, &st) == 0 && !S_ISREG(st.st_mode)) {
		cli_fail("%s %s: not a regular file", flag, path);
		cli_outfile_close(f, true);
		return 1;
	}
	return 0;
}

int cli_outfile_write(const cli_outfile *f, const void *buf, size_t len)
{
	const char *p = buf;

	if (ftruncate(f->fd, 0) < 0 || lseek(f->fd, 0, SEEK_SET) < 0)
		goto fail;
	while (len) {
		ssize_t n = write(f->fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto fail;
		p += n;
		len -= (size_t)n;
	}
	if (fsync(f->fd) < 0 && errno != EINVAL)
		goto fail;
	return 0;
fail:
	cli_fail("%s: cannot write it: %s", f->path, strerror(errno ? errno : EIO));
	return 1;
}

void cli_outfile_close(cli_outfile *f, bool discard)
{
	if (f->fd >= 0)
		close(f->fd);
	if (discard && f->created)
		unlink(f->path);
	f->fd = -1;
	f->created = false;
}

int cli_report_html(const cli_outfile *f, const pf_report *r)
{
	int64_t n = pf_report_format(r, PF_REPORT_HTML, NULL, 0);
	char *page = n >= 0 ? malloc((size_t)n + 1) : NULL;
	int ret;

	if (!page || pf_report_format(r, PF_REPORT_HTML, page, (size_t)n + 1) != n) {
		free(page);
		cli_fail("out of memory for the HTML report");
		return 1;
	}
	ret = cli_outfile_write(f, page, (size_t)n);
	free(page);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Progress lines                                                       */

#define PROGRESS_NS 250000000ull	/* redraw at most 4 times a second */

void cli_progress_start(cli_progress *p, bool quiet)
{
	memset(p, 0, sizeof(*p));
	p->on = !quiet && isatty(STDERR_FILENO);
	p->start_ns = pf_now_ns();
	active_progress = p;
}

void cli_progress_draw(cli_progress *p, const char *what, uint64_t records, uint64_t bytes,
		       double fraction)
{
	uint64_t now;
	double elapsed;
	char left[32] = "";

	if (!p->on)
		return;
	now = pf_now_ns();
	if (p->last_ns && now - p->last_ns < PROGRESS_NS)
		return;
	p->last_ns = now;
	elapsed = (double)(now - p->start_ns) * 1e-9;
	if (fraction > 0 && fraction <= 1)
		snprintf(left, sizeof(left), "  %3.0f%%  %.0fs left", fraction * 100,
			 elapsed * (1 - fraction) / fraction);
	fprintf(stderr, "\r%s  %llu records  %.1f MB/s%s\033[K", what,
		(unsigned long long)records, elapsed > 0 ? (double)bytes / 1e6 / elapsed : 0.0,
		left);
	p->drawn = true;
}

void cli_progress_end(cli_progress *p)
{
	if (p->on && p->drawn)
		fputs("\r\033[K", stderr);
	p->drawn = false;
	if (active_progress == p)
		active_progress = NULL;
}

/* ------------------------------------------------------------------ */
/* Option tables                                                       */

static void vusage(const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", cli_prog);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "; try '%s --help'\n", cli_prog);
}

int cli_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vusage(fmt, ap);
	va_end(ap);
	return 2;
}

/* A bad value: the usage error, @return -EINVAL. */
static int __attribute__((format(printf, 1, 2))) bad(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vusage(fmt, ap);
	va_end(ap);
	return -EINVAL;
}

#define MAX_OPTS 160u
#define HELP_COL 23	/* where an option's description starts */
#define HELP_WIDTH 79

/* A command's entries with their includes expanded in place, each with
 * the base its offset is from. */
typedef struct flat {
	const cli_opt *o;
	char *base;
	bool more;	/* its own .more, or its include's */
} flat;

static size_t flatten(const cli_opt *t, char *base, bool more, flat *out, size_t n)
{
	for (; t->type != CLI_END; t++) {
		if (t->type == CLI_INCLUDE) {
			n = flatten(t->table, base ? base + t->off : NULL, more || t->more,
				    out, n);
			continue;
		}
		if (n == MAX_OPTS) {
			fprintf(stderr, "%s: more than %u options in one table\n", cli_prog,
				MAX_OPTS);
			abort();
		}
		out[n].o = t;
		out[n].base = base;
		out[n].more = more || t->more;
		n++;
	}
	return n;
}

static bool takes_value(const cli_opt *o)
{
	return o->type != CLI_FLAG && o->type != CLI_SECTION && o->type != CLI_NOTE;
}

/* The option's value names a file or directory: an empty one is a
 * mistake, never "none". */
static bool names_path(const cli_opt *o)
{
	static const char *const kinds[] = { "FILE", "DIR", "PATH" };

	for (size_t i = 0; o->arg && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(o->arg, kinds[i]))
			return true;
	return false;
}

/* "a|b|c" as "a, b or c". */
static void choice_list(const char *choices, char *buf, size_t cap)
{
	size_t n = 0;

	buf[0] = '\0';
	for (const char *p = choices; *p && n + 5 < cap; p++) {
		if (*p != '|') {
			buf[n++] = *p;
			continue;
		}
		const char *sep = strchr(p + 1, '|') ? ", " : " or ";
		n += (size_t)snprintf(buf + n, cap - n, "%s", sep);
	}
	buf[n < cap ? n : cap - 1] = '\0';
}

static int parse_choice(const cli_opt *o, const char *v, int *out)
{
	const char *p = o->choices;
	size_t vl = strlen(v);
	char list[256];

	for (int i = 0; *p; i++) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);

		if (len == vl && !strncmp(p, v, len)) {
			*out = i;
			return 0;
		}
		p += len + (bar ? 1 : 0);
	}
	choice_list(o->choices, list, sizeof(list));
	return bad("--%s: '%s' is not %s", o->name, v, list);
}

/* A decimal number: digits with at most one dot, and (unless plain) an
 * exponent; no sign, no hex, inf or nan, no space, so that a typo cannot
 * pass as a value. */
static int parse_double(const cli_opt *o, const char *v, double *out)
{
	const char *p = v;
	int digits = 0, dots = 0;
	char range[96];
	double d;

	if (*p == '-' && o->plain && !o->what)
		return bad("--%s: '%s' must not be negative", o->name, v);
	if (*p == '-' || *p == '+')
		p++;
	for (; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p == '.')
			dots++;
		else
			break;
	}
	if (!o->plain && digits && (*p == 'e' || *p == 'E')) {
		p++;
		if (*p == '-' || *p == '+')
			p++;
		if (*p < '0' || *p > '9')
			digits = 0;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (o->what && (*p || !digits || dots > 1))
		return bad("--%s: '%s' is not %s", o->name, v, o->what);
	if (*p || !digits || dots > 1) {
		bool word = !strcasecmp(v, "nan") || !strcasecmp(v, "inf") ||
			    !strcasecmp(v, "infinity");
		return bad("--%s: '%s' is not a %snumber%s", o->name, v,
				 word && !o->plain ? "finite " : "",
				 o->plain ? " (like 30 or 2.5)" : "");
	}
	errno = 0;
	d = strtod(v, NULL);
	if (errno == ERANGE && fabs(d) > 1)
		return bad("--%s: '%s' is not a finite number", o->name, v);
	if ((o->above ? d > o->lo : d >= o->lo) && d <= o->hi) {
		*out = d;
		return 0;
	}
	if (o->what)
		return bad("--%s: '%s' is not %s", o->name, v, o->what);
	if (o->above && d <= o->lo)
		return bad(o->plain ? "--%s: '%s' must be above %g"
				 : "--%s: '%s' is not a finite number above %g",
				 o->name, v, o->lo);
	if (o->plain && d < 0)
		return bad("--%s: '%s' must not be negative", o->name, v);
	snprintf(range, sizeof(range), "%s%g, %g]", o->above ? "(" : "[", o->lo, o->hi);
	return bad("--%s: '%s' is out of range %s", o->name, v, range);
}

static int store(const flat *f, const char *v)
{
	const cli_opt *o = f->o;
	char *field = f->base + o->off;
	char flag[80];
	int ret = 0;

	snprintf(flag, sizeof(flag), "--%s", o->name);
	/* "--resume $CKPT" with CKPT unset: a job must not start over, nor
	 * write to ".tmp", because a variable was empty. */
	if (takes_value(o) && names_path(o) && !*v)
		return bad("--%s: an empty path (an unset variable?)", o->name);
	switch (o->type) {
	case CLI_FLAG:
		*(bool *)field = true;
		break;
	case CLI_U64:
		ret = cli_parse_u64(flag, v, o->min, o->max, o->suffix, (uint64_t *)field);
		break;
	case CLI_DOUBLE:
		ret = parse_double(o, v, (double *)field);
		break;
	case CLI_STRING:
		*(const char **)field = v;
		break;
	case CLI_CHOICE:
		ret = parse_choice(o, v, (int *)field);
		break;
	case CLI_CALL:
		ret = o->call(field, v);
		break;
	default:
		break;
	}
	if (ret == 0 && o->seen)
		*(bool *)(f->base + o->seen - 1) = true;
	return ret < 0 ? -EINVAL : 0;
}

int cli_parse_each(const cli_command *cmd, int argc, char **argv, void *ctx, int *first,
		   void (*seen)(void *hook_ctx, const cli_opt *opt, char *const *args, int n),
		   void *hook_ctx)
{
	enum { HELP = 1, HELP_ALL = 2, BASE = 256 };
	flat f[MAX_OPTS];
	struct option lo[MAX_OPTS + 3];
	char shorts[2 * MAX_OPTS + 2];
	size_t n, nl = 0, ns = 0;
	int c;

	cli_prog = cmd->name;
	n = flatten(cmd->opts, ctx, false, f, 0);
	shorts[ns++] = ':';	/* report a missing value as ':' */
	shorts[ns++] = 'h';	/* -h: --help */
	for (size_t i = 0; i < n; i++) {
		const cli_opt *o = f[i].o;

		if (o->type == CLI_SECTION || o->type == CLI_NOTE)
			continue;
		lo[nl++] = (struct option){ o->name, o->optional ? optional_argument
						     : takes_value(o) ? required_argument
						     : no_argument,
					    NULL, (int)(BASE + i) };
		if (o->letter) {
			shorts[ns++] = o->letter;
			if (takes_value(o))
				shorts[ns++] = ':';
		}
	}
	shorts[ns] = '\0';
	lo[nl++] = (struct option){ "help", no_argument, NULL, HELP };
	lo[nl++] = (struct option){ "help-all", no_argument, NULL, HELP_ALL };
	lo[nl] = (struct option){ 0 };
	opterr = 0;
	optind = 0;	/* glibc: start afresh, also after an earlier parse */
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		size_t k = n;

		if (c == HELP || c == HELP_ALL || c == 'h') {
			cli_help(cmd, stdout, c == HELP_ALL);
			return 0;
		}
		if (c >= BASE)
			k = (size_t)(c - BASE);
		for (size_t i = 0; k == n && i < n && c > 0 && c < BASE; i++)
			if (f[i].o->letter == c)
				k = i;
		if (c == ':') {
			for (size_t i = 0; optopt > 0 && optopt < BASE && i < n; i++)
				if (f[i].o->letter == optopt)
					return cli_usage("-%c: a value is required", optopt);
			if (optopt >= BASE && (size_t)(optopt - BASE) < n)
				return cli_usage("--%s: a value is required",
						 f[optopt - BASE].o->name);
			return cli_usage("%s: a value is required", argv[optind - 1]);
		}
		if (c == '?' || k == n) {
			if (optopt >= BASE && (size_t)(optopt - BASE) < n)
				return cli_usage("--%s takes no value ('%s')",
						 f[optopt - BASE].o->name, argv[optind - 1]);
			if (optopt > 0 && optopt < BASE)
				return cli_usage("unknown option '-%c'", optopt);
			return cli_usage("unknown option '%s'", argv[optind - 1]);
		}
		if (store(&f[k], optarg) < 0)
			return 2;
		if (seen) {
			bool apart = takes_value(f[k].o) && optarg == argv[optind - 1];

			seen(hook_ctx, f[k].o, argv + optind - (apart ? 2 : 1), apart ? 2 : 1);
		}
	}
	*first = optind;
	return -1;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, void *ctx, int *first)
{
	return cli_parse_each(cmd, argc, argv, ctx, first, NULL, NULL);
}

/* text from column col on, wrapped at HELP_WIDTH with later lines at
 * column indent; '\n' breaks a line. */
static void wrap(FILE *f, const char *text, int col, int indent)
{
	const char *p = text;

	while (*p) {
		const char *end = p, *brk = NULL;
		int room = HELP_WIDTH - col;

		/* The longest run of words that fits (a longer word alone). */
		while (*end && *end != '\n') {
			const char *w = end;

			while (*w == ' ')
				w++;
			while (*w && *w != ' ' && *w != '\n')
				w++;
			if (w - p > room && brk)
				break;
			brk = end = w;
		}
		fprintf(f, "%.*s\n", (int)(end - p), p);
		p = end;
		while (*p == ' ')
			p++;
		if (*p == '\n')
			p++;
		if (*p)
			fprintf(f, "%*s", indent, "");
		col = indent;
	}
}

static void help_line(FILE *f, const cli_opt *o)
{
	char left[128];
	int len;

	if (o->letter)
		len = snprintf(left, sizeof(left), "  -%c, --%s%s%s", o->letter, o->name,
			       takes_value(o) ? " " : "", takes_value(o) && o->arg ? o->arg : "");
	else if (o->optional)
		len = snprintf(left, sizeof(left), "  --%s[=%s]", o->name,
			       o->arg ? o->arg : "VALUE");
	else
		len = snprintf(left, sizeof(left), "  --%s%s%s", o->name,
			       takes_value(o) ? " " : "",
			       takes_value(o) ? (o->arg ? o->arg : "VALUE") : "");
	if (len > HELP_COL - 2) {
		fprintf(f, "%s  ", left);
		wrap(f, o->help ? o->help : "", len + 2, HELP_COL);
	} else {
		fprintf(f, "%-*s", HELP_COL, left);
		wrap(f, o->help ? o->help : "", HELP_COL, HELP_COL);
	}
}

void cli_help(const cli_command *cmd, FILE *f, bool all)
{
	flat fl[MAX_OPTS];
	size_t n = flatten(cmd->opts, NULL, false, fl, 0), hidden = 0, nmore = 0;

	fputs(cmd->usage, f);
	if (cmd->about)
		fprintf(f, "\n%s", cmd->about);
	fputc('\n', f);
	for (size_t i = 0; i < n; i++) {
		const cli_opt *o = fl[i].o;

		if (o->type == CLI_SECTION) {
			/* Only when something of it is shown. */
			for (size_t k = i + 1; k < n && fl[k].o->type != CLI_SECTION; k++)
				if ((all || !fl[k].more) && fl[k].o->type != CLI_NOTE) {
					fprintf(f, "%s\n", o->help);
					break;
				}
			continue;
		}
		if (!all && fl[i].more) {
			hidden += o->type != CLI_NOTE;
			continue;
		}
		if (o->type == CLI_NOTE) {
			fputs("  ", f);
			wrap(f, o->help, 2, 2);
			continue;
		}
		help_line(f, o);
	}
	for (size_t i = 0; i < n; i++)
		nmore += fl[i].more && fl[i].o->type != CLI_NOTE && fl[i].o->type != CLI_SECTION;
	fputs(nmore ? "  --help               the common options; --help-all: every one\n"
		    : "  -h, --help           this text\n", f);
	if (!all && hidden)
		fprintf(f, "(%zu more option%s: %s --help-all)\n", hidden, hidden == 1 ? "" : "s",
			cmd->name);
	if (cmd->footer)
		fprintf(f, "\n%s", cmd->footer);
}

void cli_help_subcommands(const cli_subcommand *cmds, FILE *f)
{
	fputs("commands:\n", f);
	for (; cmds->name; cmds++) {
		fprintf(f, "  %-10s", cmds->name);
		wrap(f, cmds->summary, 12, 12);
	}
}

const cli_subcommand *cli_find_subcommand(const cli_subcommand *cmds, const char *name)
{
	for (; name && cmds->name; cmds++)
		if (!strcmp(cmds->name, name))
			return cmds;
	return NULL;
}
