/* SPDX-License-Identifier: Apache-2.0 */
/* Shared pieces of the command-line tools: one option table per command
 * (getopt_long's table, the values' parsing and the help are all made
 * from it), usage errors, inputs, JSON output. */
#ifndef PF_CLI_H
#define PF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "podfeed.h"
#include "report_internal.h"

/* The program name for messages ("shardtool", "loadbench plan"). */
extern const char *cli_prog;

/* ------------------------------------------------------------------ */
/* Option tables                                                        */
/* ------------------------------------------------------------------ */
/*
 * A command's options are one table of cli_opt, ended by CLI_END.  Each
 * entry says where its value goes (an offset into the caller's options
 * struct, the "ctx"), how the value is read and checked, and its line of
 * the help.  cli_parse() builds getopt_long's table from it, stores every
 * value, and answers --help (the common options: those without .more)
 * and --help-all (every option) from the same entries.  Any mistake on
 * the command line is one line on stderr naming the flag and the value,
 * with a hint ("try 'loadbench --help'"), and exit status 2.
 *
 *   static const cli_opt opts[] = {
 *       { CLI_SECTION, .help = "topology:" },
 *       { CLI_U64, "cores", .arg = "C", .off = offsetof(options, cores),
 *         .min = 1, .max = 4096, .help = "cores on this host (default 1)" },
 *       { CLI_END },
 *   };
 */
typedef enum cli_type {
	CLI_END = 0,
	CLI_SECTION,	/* a heading of the help (.help), for what follows */
	CLI_NOTE,	/* a paragraph of the help (.help), not an option */
	CLI_INCLUDE,	/* .table's entries, their fields at ctx + .off */
	CLI_FLAG,	/* bool at .off, set */
	CLI_U64,	/* uint64_t at .off: a whole number in [.min, .max] */
	CLI_DOUBLE,	/* double at .off: a decimal number in [.lo, .hi] */
	CLI_STRING,	/* const char * at .off: the value as given */
	CLI_CHOICE,	/* int at .off: the index of the value in .choices */
	CLI_CALL,	/* .call(ctx + .off, value) */
} cli_type;

typedef struct cli_opt cli_opt;
struct cli_opt {
	cli_type type;
	const char *name;	/* the long name, without "--" */
	char letter;		/* a short form (-f), or 0 */
	const char *arg;	/* the value's name in the help ("N", "FILE") */
	const char *help;	/* one paragraph, wrapped to the screen; a
				 * '\n' starts a new line */
	bool more;		/* in --help-all only (CLI_INCLUDE: all of
				 * .table) */
	size_t off;		/* where the value goes */
	size_t seen;		/* CLI_SEEN(): a bool set when the flag is
				 * given; 0: none */
	/* CLI_U64: the range, and whether K, M, G (powers of 1024) may
	 * follow the number. */
	uint64_t min, max;
	bool suffix;
	/* CLI_DOUBLE: the range ([lo, hi], or (lo, hi] when above); plain:
	 * digits and one dot only (no exponent); what: the whole complaint
	 * for any bad value ("a price (a number >= 0)"). */
	double lo, hi;
	bool above, plain;
	const char *what;
	const char *choices;	/* CLI_CHOICE: "drop|wrap" */
	/* CLI_CALL: @return 0, or <0 after cli_usage(). */
	int (*call)(void *field, const char *value);
	/* CLI_CALL: the value may be left out (--name alone, or
	 * --name=VALUE, never --name VALUE): .call gets NULL then. */
	bool optional;
	const cli_opt *table;	/* CLI_INCLUDE */
};

/* .seen for a bool field of the options struct T. */
#define CLI_SEEN(T, field) (offsetof(T, field) + 1)

typedef struct cli_command {
	const char *name;	/* for messages and the hint: "loadbench plan" */
	const char *usage;	/* "usage: ..." lines */
	const char *about;	/* the paragraph after them (pre-wrapped) */
	const cli_opt *opts;
	const char *footer;	/* after the options (exit status...) */
} cli_command;

/*! Parse argv[1..argc) into ctx by cmd's table; sets cli_prog to
 *  cmd->name.  Operands are moved after the options (getopt_long's
 *  order).  @return -1 to go on, *first being the first operand's index;
 *  0 after printing --help or --help-all on stdout; 2 after a usage error
 *  (one line on stderr). */
int cli_parse(const cli_command *cmd, int argc, char **argv, void *ctx, int *first);

/*! cli_parse(), and seen(hook_ctx, opt, args, n) after each option with
 *  the n (1 or 2) arguments it took (ladder passes them on). */
int cli_parse_each(const cli_command *cmd, int argc, char **argv, void *ctx, int *first,
		   void (*seen)(void *hook_ctx, const cli_opt *opt, char *const *args, int n),
		   void *hook_ctx);

/*! The help: usage, about, the options (every one when all, else the
 *  common ones and a pointer to --help-all), footer. */
void cli_help(const cli_command *cmd, FILE *f, bool all);

/*! A command with subcommands: "name  summary" lines for the help. */
typedef struct cli_subcommand {
	const char *name;
	const char *summary;
	int (*main)(int argc, char **argv);	/* argv[0] is the name */
} cli_subcommand;
/*! The subcommands' lines, after the heading "commands:". */
void cli_help_subcommands(const cli_subcommand *cmds, FILE *f);
/*! The subcommand argv[1] names: NULL when none does. */
const cli_subcommand *cli_find_subcommand(const cli_subcommand *cmds, const char *name);

/*! A usage error: "prog: <message>; try 'prog --help'" on stderr, one
 *  line.  @return 2 (the exit status of bad usage). */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------ */
/* Values                                                               */
/* ------------------------------------------------------------------ */

/*! Parse a whole decimal number in [min, max] for flag; a K/M/G suffix
 *  (powers of 1024) is accepted when allow_suffix.  On failure a usage
 *  error "prog: --flag: 'text' is ...".  @return 0 or -EINVAL. */
int cli_parse_u64(const char *flag, const char *text, uint64_t min,
		  uint64_t max, bool allow_suffix, uint64_t *out);
/*! Parse "A:B", "A:" or ":B" record ranges (half-open). */
int cli_parse_range(const char *flag, const char *text, uint64_t *from,
		    uint64_t *to);

/*! Expand inputs as pf_paths_expand() does (directories, globs, a
 *  manifest alone or beside its shards, every file once).  @return the
 *  count with *out (free with cli_free_inputs()), or -errno after
 *  printing why. */
int cli_expand_inputs(char *const *args, int n, char ***out);
/*! cli_expand_inputs(), and *manifest the manifest the inputs name (alone
 *  or beside its shards: pf_paths_resolve()), or NULL; free() it. */
int cli_resolve_inputs(char *const *args, int n, char ***out, char **manifest);
void cli_free_inputs(char **list, int n);

/*! Print err as "prog: <file>: byte N: what" to stderr. */
void cli_print_error(const pf_error *err);
/*! Print a message to stderr prefixed with the program name. */
void cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*! JSON output: o (built with jansson and the library's pf_json_*()
 *  helpers of loader/report_internal.h) as one line on stdout, and o
 *  decref'd.  bad: a member could not be made.  @return 0, or 1 after
 *  saying the memory ran out. */
int cli_json_print(json_t *o, bool bad);
/*! The same on f. */
int cli_json_fprint(FILE *f, json_t *o, bool bad);

/*! A file a tool writes at its end (--html FILE), opened at its start
 *  so that a path it cannot write fails before any work, naming it
 *  ("prog: --html PATH: cannot write it: why").  path NULL: none (fd -1).
 *  @return 0, or 1 after printing why. */
typedef struct cli_outfile {
	const char *path;
	int fd;
	bool created;		/* made by the open: removed when discarded */
} cli_outfile;
int cli_outfile_open(cli_outfile *f, const char *flag, const char *path);
/*! Replace the file's bytes with buf[0..len).  @return 0, or 1 after
 *  printing why. */
int cli_outfile_write(const cli_outfile *f, const void *buf, size_t len);
/*! Close it; discard: remove it when the open made it (the run failed). */
void cli_outfile_close(cli_outfile *f, bool discard);
/*! r's HTML page (PF_REPORT_HTML) into f.  @return 0, or 1 after
 *  printing why. */
int cli_report_html(const cli_outfile *f, const pf_report *r);

/*! A live progress line on stderr when it is a terminal (nothing on a
 *  pipe or a file, or when quiet): "WHAT  N records  X MB/s  P%  Ts left",
 *  redrawn at most 4 times a second; cli_progress_end() clears it. */
typedef struct cli_progress {
	bool on, drawn;
	uint64_t start_ns, last_ns;
} cli_progress;
void cli_progress_start(cli_progress *p, bool quiet);
/*! bytes: over the time since the start, as MB/s; fraction: done of the
 *  whole in (0, 1] (the percent and the time left), else not known. */
void cli_progress_draw(cli_progress *p, const char *what, uint64_t records, uint64_t bytes,
		       double fraction);
void cli_progress_end(cli_progress *p);

/*! The median of v[0..n) (n > 0), sorting v in place: the middle value,
 *  or the mean of the two middle ones. */
double cli_median(double *v, size_t n);

#endif
