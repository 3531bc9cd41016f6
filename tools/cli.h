/* SPDX-License-Identifier: Apache-2.0 */
/* Shared pieces of the command-line tools: flag values, inputs, JSON. */
#ifndef PF_CLI_H
#define PF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "podfeed.h"

/* The program name for messages ("shardtool"). */
extern const char *cli_prog;

/*! Parse a whole decimal number in [min, max] for flag; a K/M/G suffix
 *  (powers of 1024) is accepted when allow_suffix.  On failure print
 *  "prog: --flag: 'text' is ..." to stderr.  @return 0 or -EINVAL. */
int cli_parse_u64(const char *flag, const char *text, uint64_t min,
		  uint64_t max, bool allow_suffix, uint64_t *out);
/*! Parse "A:B", "A:" or ":B" record ranges (half-open). */
int cli_parse_range(const char *flag, const char *text, uint64_t *from,
		    uint64_t *to);

/*! Expand inputs: a directory gives its regular files (sorted, hidden
 *  ones skipped), a pattern with * ? [ is globbed (sorted), anything else
 *  is taken as a file name.  @return the count with *out (free with
 *  cli_free_inputs()), or -errno after printing why. */
int cli_expand_inputs(char *const *args, int n, char ***out);
void cli_free_inputs(char **list, int n);

/*! Print err as "prog: <file>: byte N: what" to stderr. */
void cli_print_error(const pf_error *err);
/*! Print a message to stderr prefixed with the program name. */
void cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* JSON output.  Strings are escaped per RFC 8259; bytes that are not
 * printable ASCII come out as \u00XX. */
void cli_json_string(FILE *f, const void *s, size_t len);
void cli_json_double(FILE *f, double v);

/*! The median of v[0..n) (n > 0), sorting v in place: the middle value,
 *  or the mean of the two middle ones. */
double cli_median(double *v, size_t n);

#endif
