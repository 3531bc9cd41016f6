/* SPDX-License-Identifier: Apache-2.0 */
/* Shared pieces of the command-line tools: flag values, inputs, JSON. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

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

void cli_fail(const char *fmt, ...)
{
	va_list ap;

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
	fprintf(stderr, "%s: %s\n", cli_prog, line);
}

int cli_parse_u64(const char *flag, const char *text, uint64_t min,
		  uint64_t max, bool allow_suffix, uint64_t *out)
{
	const char *p = text;
	uint64_t v = 0, mul = 1;

	if (!text || !*text) {
		cli_fail("%s: a value is required", flag);
		return -EINVAL;
	}
	if (*p < '0' || *p > '9')
		goto bad;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
			cli_fail("%s: '%s' is too large", flag, text);
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
		cli_fail("%s: '%s' is too large", flag, text);
		return -EINVAL;
	}
	v *= mul;
	if (v < min || v > max) {
		cli_fail("%s: '%s' is out of range [%llu, %llu]", flag, text,
			 (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	*out = v;
	return 0;
bad:
	cli_fail("%s: '%s' is not a whole number%s", flag, text,
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
		cli_fail("%s: '%s' is not a range A:B", flag, text ? text : "");
		return -EINVAL;
	}
	hl = (size_t)(colon - text);
	if (hl >= sizeof(head)) {
		cli_fail("%s: '%s' is not a range A:B", flag, text);
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
		cli_fail("%s: '%s' ends before it starts", flag, text);
		return -EINVAL;
	}
	return 0;
}

int cli_expand_inputs(char *const *args, int n, char ***out)
{
	pf_error err;
	int ret;

	pf_error_clear(&err);
	ret = pf_paths_expand((const char *const *)args, (size_t)n, out, &err);
	if (ret < 0)
		cli_print_error(&err);
	return ret;
}

void cli_free_inputs(char **list, int n)
{
	pf_paths_free(list, (size_t)n);
}

void cli_json_string(FILE *f, const void *s, size_t len)
{
	const uint8_t *p = s;

	fputc('"', f);
	for (size_t i = 0; i < len; i++) {
		uint8_t c = p[i];

		switch (c) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (c < 0x20 || c >= 0x7f)
				fprintf(f, "\\u%04x", c);
			else
				fputc(c, f);
		}
	}
	fputc('"', f);
}

void cli_json_double(FILE *f, double v)
{
	if (isnan(v))
		fputs("\"NaN\"", f);
	else if (isinf(v))
		fputs(v > 0 ? "\"Infinity\"" : "\"-Infinity\"", f);
	else
		fprintf(f, "%.9g", v);
}
