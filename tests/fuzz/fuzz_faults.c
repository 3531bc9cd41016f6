/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz harness: the fault spec parser (PODFEED_FAULTS), its canonical text
 * and the decisions made from a plan. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "pf_io.h"

/*
 * The input is the spec, bytes as they are (NULs included).  The harness
 * aborts when
 *   - a failure is not -EINVAL, its message does not start with
 *     "fuzz: byte N: " with N at most the spec's length (or
 *     PF_FAULT_SPEC_MAX), or it leaves faults or a seed in the plan;
 *   - a success returns another count than the plan holds, or holds a
 *     rule out of range (kind, fraction in [0, 1], delay at most 600 s,
 *     exactly one of "@N" and ":F", an open rule only eio, enoent or
 *     delay), or disagrees with a plain model: split at commas, each item
 *     trimmed of blanks is "seed=..." or starts with its kind's name,
 *     after "open-" for a rule of opens;
 *   - the canonical text does not parse back to the same plan, or is not
 *     a fixed point, or pf_fault_format() disagrees with itself about the
 *     length when dst is short;
 *   - pf_fault_decide() is not a pure function, hits more rules than
 *     there are, names an error that is not eio/enoent/hang, hits an
 *     "@N" rule on another request or read than its own, or makes an
 *     open short or hung.
 */

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "fuzz_faults: %s:%d: %s\n", __FILE__, \
				__LINE__, #cond);                            \
			abort();                                             \
		}                                                            \
	} while (0)

static bool same_plan(const pf_fault_plan *a, const pf_fault_plan *b)
{
	if (a->nrules != b->nrules || a->seed != b->seed)
		return false;
	for (unsigned i = 0; i < a->nrules; i++) {
		const pf_fault_rule *x = &a->rule[i], *y = &b->rule[i];

		if (x->kind != y->kind || x->open != y->open || x->nth != y->nth ||
		    x->fraction != y->fraction || x->delay_ns != y->delay_ns)
			return false;
	}
	return true;
}

/* The model: the kinds of the items, in order, by their names alone. */
static void check_model(const uint8_t *data, size_t size, const pf_fault_plan *plan)
{
	static const struct {
		const char *name;
		pf_fault_kind kind;
	} names[] = {
		{ "eio", PF_FAULT_EIO }, { "short", PF_FAULT_SHORT },
		{ "enoent", PF_FAULT_ENOENT }, { "hang", PF_FAULT_HANG },
		{ "delay=", PF_FAULT_DELAY },
	};
	unsigned nrules = 0, seeds = 0;
	size_t i = 0, blank = 0;

	while (blank < size && (data[blank] == ' ' || data[blank] == '\t'))
		blank++;
	if (blank == size) {
		CHECK(plan->nrules == 0 && plan->seed == 0);
		return;
	}
	while (i <= size) {
		size_t end = i, b, e;

		while (end < size && data[end] != ',')
			end++;
		b = i;
		e = end;
		while (b < e && (data[b] == ' ' || data[b] == '\t'))
			b++;
		while (e > b && (data[e - 1] == ' ' || data[e - 1] == '\t'))
			e--;
		CHECK(e > b);
		if (e - b >= 5 && !strncasecmp((const char *)data + b, "seed=", 5)) {
			seeds++;
		} else {
			bool known = false;

			CHECK(nrules < plan->nrules);
			/* "open-": a rule of opens, its kind after it. */
			if (e - b > 5 && !strncasecmp((const char *)data + b, "open-", 5)) {
				CHECK(plan->rule[nrules].open);
				b += 5;
			} else {
				CHECK(!plan->rule[nrules].open);
			}
			for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
				size_t n = strlen(names[k].name);

				if (e - b > n && !strncasecmp((const char *)data + b, names[k].name, n) &&
				    (names[k].kind == PF_FAULT_DELAY || !isalpha(data[b + n]))) {
					CHECK(plan->rule[nrules].kind == names[k].kind);
					known = true;
				}
			}
			CHECK(known);
			nrules++;
		}
		i = end + 1;
	}
	CHECK(nrules == plan->nrules);
	CHECK(seeds <= 1);
	CHECK(seeds == 1 || plan->seed == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pf_fault_plan plan, again;
	pf_error err;
	char text[PF_FAULT_SPEC_MAX * 2], text2[sizeof(text)], small[8];
	size_t n, n2;
	int ret;

	pf_error_clear(&err);
	memset(&plan, 0xa5, sizeof(plan));
	ret = pf_fault_parse(&plan, (const char *)data, size, "fuzz", &err);
	if (ret < 0) {
		unsigned long long at;
		int used = 0;

		CHECK(ret == -EINVAL && err.code == -EINVAL);
		CHECK(sscanf(err.msg, "fuzz: byte %llu: %n", &at, &used) == 1 && used > 0);
		CHECK(at <= size || at == PF_FAULT_SPEC_MAX);
		CHECK(plan.nrules == 0 && plan.seed == 0);
		return 0;
	}
	CHECK((unsigned)ret == plan.nrules && plan.nrules <= PF_FAULT_MAX_RULES);
	CHECK(size <= PF_FAULT_SPEC_MAX && !memchr(data, 0, size));
	for (unsigned i = 0; i < plan.nrules; i++) {
		const pf_fault_rule *r = &plan.rule[i];

		CHECK(r->kind >= PF_FAULT_EIO && r->kind <= PF_FAULT_DELAY);
		CHECK(r->fraction >= 0.0 && r->fraction <= 1.0);
		CHECK(!r->nth || r->fraction == 0.0);
		CHECK(r->delay_ns <= PF_FAULT_MAX_DELAY_NS);
		CHECK(r->kind == PF_FAULT_DELAY || r->delay_ns == 0);
		CHECK(!r->open || r->kind == PF_FAULT_EIO || r->kind == PF_FAULT_ENOENT ||
		      r->kind == PF_FAULT_DELAY);
	}
	check_model(data, size, &plan);

	/* The canonical text: parses back to the same plan, a fixed point. */
	n = pf_fault_format(&plan, text, sizeof(text));
	CHECK(n < sizeof(text) && n == strlen(text));
	CHECK(pf_fault_format(&plan, small, sizeof(small)) == n);
	CHECK(strlen(small) == (n < sizeof(small) ? n : sizeof(small) - 1));
	CHECK(!strncmp(small, text, strlen(small)));
	pf_error_clear(&err);
	CHECK(pf_fault_parse(&again, text, n, "fuzz", &err) == ret);
	CHECK(same_plan(&plan, &again));
	n2 = pf_fault_format(&again, text2, sizeof(text2));
	CHECK(n2 == n && !strcmp(text, text2));

	/* Decisions: pure, bounded, "@N" only on its own request's first
	 * read. */
	for (uint64_t req = 1; req <= 48; req++) {
		for (uint32_t issue = 0; issue < 3; issue++) {
			bool open = req > 24;
			uint64_t n = req - (open ? 24 : 0);	/* opens are numbered apart */
			pf_fault_hit h = pf_fault_decide(&plan, n, issue, open);
			pf_fault_hit h2 = pf_fault_decide(&again, n, issue, open);
			unsigned nth_hits = 0, nth_possible = 0;

			CHECK(h.error == h2.error && h.short_read == h2.short_read &&
			      h.delay_ns == h2.delay_ns && h.rules == h2.rules);
			CHECK(h.rules <= plan.nrules);
			CHECK(h.error == PF_FAULT_NONE || h.error == PF_FAULT_EIO ||
			      h.error == PF_FAULT_ENOENT || h.error == PF_FAULT_HANG);
			CHECK(h.delay_ns <= (uint64_t)plan.nrules * PF_FAULT_MAX_DELAY_NS);
			CHECK(!open || (!h.short_read && h.error != PF_FAULT_HANG));
			for (unsigned i = 0; i < plan.nrules; i++) {
				const pf_fault_rule *r = &plan.rule[i];

				if (r->nth && r->nth == n && issue == 0 && r->open == open)
					nth_possible++;
				if (r->nth)
					nth_hits++;
			}
			if (nth_hits && !nth_possible) {
				/* Only fraction rules can have hit. */
				unsigned fractions = 0;

				for (unsigned i = 0; i < plan.nrules; i++)
					fractions += plan.rule[i].nth == 0;
				CHECK(h.rules <= fractions);
			}
			if (!plan.nrules)
				CHECK(h.rules == 0 && !h.delay_ns && !h.short_read);
		}
	}
	return 0;
}
