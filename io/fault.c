/* SPDX-License-Identifier: Apache-2.0 */
/* Reliability policy of every read path: the fault-injection spec (parser,
 * canonical text, the seeded decision for each read), the retry, backoff
 * and timeout settings from a config or the environment, the planning and
 * judging of each read a request issues, and the process-wide counters.
 * The engine (engine.c, both back-ends) and pf_file_pread() (file.c) share
 * all of it, so a fault or a retry behaves the same on every path. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io_internal.h"
#include "stat_internal.h"

pf_io_totals pf_io_process_totals;

void pf_io_totals_get(pf_io_totals *out)
{
	out->reads = __atomic_load_n(&pf_io_process_totals.reads, __ATOMIC_RELAXED);
	out->faults = __atomic_load_n(&pf_io_process_totals.faults, __ATOMIC_RELAXED);
	out->retries = __atomic_load_n(&pf_io_process_totals.retries, __ATOMIC_RELAXED);
	out->timeouts = __atomic_load_n(&pf_io_process_totals.timeouts, __ATOMIC_RELAXED);
	out->errors = __atomic_load_n(&pf_io_process_totals.errors, __ATOMIC_RELAXED);
}

static void total_add(uint64_t *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ */
/* The spec parser                                                      */

#define FRACTION_DIGITS 15	/* decimals of a fraction: N / 10^k stays exact */
#define DURATION_DIGITS 15

typedef struct cursor {
	const char *s;
	size_t len, pos;
	const char *name;
	pf_error *err;
} cursor;

static int fail(cursor *c, size_t at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(cursor *c, size_t at, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return pf_error_set(c->err, -EINVAL, PF_OFFSET_NONE, 0, "%s: byte %zu: %s",
			    c->name, at, what);
}

static int peek(const cursor *c)
{
	return c->pos < c->len ? (unsigned char)c->s[c->pos] : -1;
}

static void skip_blanks(cursor *c)
{
	while (peek(c) == ' ' || peek(c) == '\t')
		c->pos++;
}

static bool is_digit(int ch)
{
	return ch >= '0' && ch <= '9';
}

static bool is_alpha(int ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

/* What was found, for a message: a printable character, "\xNN", or "the
 * end". */
static const char *found(const cursor *c, char *buf, size_t cap)
{
	int ch = peek(c);

	if (ch < 0)
		snprintf(buf, cap, "the end");
	else if (ch > 0x20 && ch < 0x7f)
		snprintf(buf, cap, "'%c'", ch);
	else
		snprintf(buf, cap, "byte 0x%02x", ch);
	return buf;
}

/* A whole number without sign.  @return 0 or -EINVAL. */
static int parse_uint(cursor *c, const char *what, uint64_t *out)
{
	size_t start = c->pos;
	uint64_t v = 0;
	char f[16];

	if (!is_digit(peek(c)))
		return fail(c, c->pos, "expected %s (digits), found %s", what,
			    found(c, f, sizeof(f)));
	while (is_digit(peek(c))) {
		unsigned d = (unsigned)(peek(c) - '0');

		if (v > (UINT64_MAX - d) / 10)
			return fail(c, start, "%s is too large (above 2^64-1)", what);
		v = v * 10 + d;
		c->pos++;
	}
	*out = v;
	return 0;
}

/* Digits with at most one '.', at least one digit: the value is
 * *mantissa / 10^*decimals (max_digits digits at most, leading zeros not
 * counted).  @return 0 or -EINVAL. */
static int parse_decimal(cursor *c, const char *what, unsigned max_digits,
			 uint64_t *mantissa, unsigned *decimals)
{
	size_t start = c->pos;
	unsigned digits = 0, sig = 0, k = 0;
	bool dot = false;
	uint64_t n = 0;
	char f[16];

	for (;;) {
		int ch = peek(c);

		if (ch == '.' && !dot) {
			dot = true;
		} else if (is_digit(ch)) {
			digits++;
			if (dot)
				k++;
			if (n || ch != '0')
				sig++;
			if (sig > max_digits || k > max_digits)
				return fail(c, start, "%s has more than %u digits", what,
					    max_digits);
			n = n * 10 + (uint64_t)(ch - '0');
		} else {
			break;
		}
		c->pos++;
	}
	if (!digits)
		return fail(c, start, "expected %s (like 0.05), found %s", what,
			    found(c, f, sizeof(f)));
	*mantissa = n;
	*decimals = k;
	return 0;
}

static uint64_t pow10u(unsigned k)
{
	uint64_t p = 1;

	while (k--)
		p *= 10;
	return p;
}

static int parse_fraction(cursor *c, double *out)
{
	size_t start = c->pos;
	uint64_t n;
	unsigned k;
	int ret = parse_decimal(c, "a fraction", FRACTION_DIGITS, &n, &k);

	if (ret < 0)
		return ret;
	/* n < 10^16 < 2^53 and 10^k are exact doubles: one correctly rounded
	 * division, the same value strtod() would give. */
	*out = (double)n / (double)pow10u(k);
	if (*out > 1.0)
		return fail(c, start, "fraction %.*s is above 1", (int)(c->pos - start),
			    c->s + start);
	return 0;
}

static int parse_duration(cursor *c, uint64_t *ns)
{
	__extension__ typedef unsigned __int128 u128;
	size_t start = c->pos;
	uint64_t n, unit;
	unsigned k;
	char f[16];
	u128 v;
	int ret = parse_decimal(c, "a duration", DURATION_DIGITS, &n, &k);

	if (ret < 0)
		return ret;
	if (c->pos + 2 <= c->len && !memcmp(c->s + c->pos, "us", 2)) {
		unit = 1000;
		c->pos += 2;
	} else if (c->pos + 2 <= c->len && !memcmp(c->s + c->pos, "ms", 2)) {
		unit = 1000000;
		c->pos += 2;
	} else if (peek(c) == 's') {
		unit = 1000000000;
		c->pos++;
	} else {
		return fail(c, c->pos, "expected a unit (us, ms or s) after the duration, "
			    "found %s", found(c, f, sizeof(f)));
	}
	v = (u128)n * unit / pow10u(k);
	if (v > PF_FAULT_MAX_DELAY_NS)
		return fail(c, start, "delay %.*s is above 600 s", (int)(c->pos - start),
			    c->s + start);
	*ns = (uint64_t)v;
	return 0;
}

/* "@N" or ":F" after a kind. */
static int parse_trigger(cursor *c, const char *kind, pf_fault_rule *r)
{
	char f[16];
	int ret;

	if (peek(c) == '@') {
		size_t at = ++c->pos;

		ret = parse_uint(c, "a request number", &r->nth);
		if (ret == 0 && r->nth == 0)
			ret = fail(c, at, "requests count from 1, not 0");
		return ret;
	}
	if (peek(c) == ':') {
		c->pos++;
		r->nth = 0;
		return parse_fraction(c, &r->fraction);
	}
	return fail(c, c->pos, "expected '@N' (request N) or ':F' (a fraction of "
		    "reads) after '%s', found %s", kind, found(c, f, sizeof(f)));
}

static bool word_is(const cursor *c, size_t start, const char *w)
{
	size_t n = strlen(w);

	return c->pos - start == n && !strncasecmp(c->s + start, w, n);
}

static int parse_item(cursor *c, pf_fault_plan *plan, bool *seeded)
{
	static const struct {
		const char *name;
		pf_fault_kind kind;
	} kinds[] = {
		{ "eio", PF_FAULT_EIO }, { "short", PF_FAULT_SHORT },
		{ "enoent", PF_FAULT_ENOENT }, { "hang", PF_FAULT_HANG },
		{ "delay", PF_FAULT_DELAY },
	};
	size_t start = c->pos, item = c->pos;
	pf_fault_rule r = { 0 };
	char f[16];

	while (is_alpha(peek(c)))
		c->pos++;
	if (c->pos == start)
		return fail(c, start, "expected a fault (eio, short, enoent, hang, delay=D) "
			    "or seed=S, found %s", found(c, f, sizeof(f)));
	if (word_is(c, start, "open") && peek(c) == '-') {
		/* "open-K": a fault of the engine's opens. */
		r.open = true;
		start = ++c->pos;
		while (is_alpha(peek(c)))
			c->pos++;
		if (word_is(c, start, "short") || word_is(c, start, "hang"))
			return fail(c, start, "'%.*s' applies to reads only (open- takes eio, "
				    "enoent, delay=D)", (int)(c->pos - start), c->s + start);
		if (word_is(c, start, "seed") || c->pos == start)
			return fail(c, start, "expected a fault of opens (eio, enoent, delay=D) "
				    "after 'open-', found %s", c->pos == start ? found(c, f, sizeof(f))
				    : "'seed'");
	}
	if (word_is(c, start, "seed")) {
		if (peek(c) != '=')
			return fail(c, c->pos, "expected '=' after 'seed', found %s",
				    found(c, f, sizeof(f)));
		if (*seeded)
			return fail(c, start, "the seed is given twice");
		c->pos++;
		*seeded = true;
		return parse_uint(c, "a seed", &plan->seed);
	}
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		int ret;

		if (!word_is(c, start, kinds[i].name))
			continue;
		r.kind = kinds[i].kind;
		if (r.kind == PF_FAULT_DELAY) {
			if (peek(c) != '=')
				return fail(c, c->pos, "expected '=' and a duration after "
					    "'delay' (like delay=200ms), found %s",
					    found(c, f, sizeof(f)));
			c->pos++;
			ret = parse_duration(c, &r.delay_ns);
			if (ret < 0)
				return ret;
		}
		ret = parse_trigger(c, kinds[i].name, &r);
		if (ret < 0)
			return ret;
		if (plan->nrules == PF_FAULT_MAX_RULES)
			return fail(c, item, "more than %u faults", PF_FAULT_MAX_RULES);
		plan->rule[plan->nrules++] = r;
		return 0;
	}
	return fail(c, start, "unknown fault '%.*s' (eio, short, enoent, hang, delay=D, "
		    "or seed=S)", (int)(c->pos - start < 32 ? c->pos - start : 32),
		    c->s + start);
}

int pf_fault_parse(pf_fault_plan *plan, const char *spec, size_t len,
		   const char *name, pf_error *err)
{
	cursor c = { .s = spec, .len = len, .name = name ? name : "fault spec",
		     .err = err };
	bool seeded = false;
	const char *nul;
	int ret = 0;

	pf_error_clear(err);
	memset(plan, 0, sizeof(*plan));
	if (len > PF_FAULT_SPEC_MAX)
		return fail(&c, PF_FAULT_SPEC_MAX, "longer than %u bytes (%zu)",
			    PF_FAULT_SPEC_MAX, len);
	nul = len ? memchr(spec, '\0', len) : NULL;
	if (nul)
		return fail(&c, (size_t)(nul - spec), "a NUL byte");
	skip_blanks(&c);
	if (c.pos == len)
		return 0;	/* blank: no faults */
	for (;;) {
		char f[16];

		skip_blanks(&c);
		ret = parse_item(&c, plan, &seeded);
		if (ret < 0)
			break;
		skip_blanks(&c);
		if (c.pos == len)
			return (int)plan->nrules;
		if (peek(&c) != ',') {
			ret = fail(&c, c.pos, "expected ',' or the end after a fault, found %s",
				   found(&c, f, sizeof(f)));
			break;
		}
		c.pos++;
	}
	memset(plan, 0, sizeof(*plan));
	return ret;
}

/* ------------------------------------------------------------------ */
/* Canonical text                                                       */

typedef struct sink {
	char *dst;
	size_t cap, n;
} sink;

static void put(sink *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(sink *o, const char *fmt, ...)
{
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vsnprintf(o->n < o->cap ? o->dst + o->n : NULL,
		      o->n < o->cap ? o->cap - o->n : 0, fmt, ap);
	va_end(ap);
	if (w > 0)
		o->n += (size_t)w;
}

/* Fractions parse as N / 10^k with k <= 15, so 15 decimals give the
 * digits back exactly; the zeros after the last one are dropped. */
static void put_fraction(sink *o, double f)
{
	char buf[32];
	size_t n;

	snprintf(buf, sizeof(buf), "%.15f", f);
	n = strlen(buf);
	while (n > 1 && buf[n - 1] == '0')
		n--;
	if (buf[n - 1] == '.')
		n--;
	put(o, "%.*s", (int)n, buf);
}

static void put_duration(sink *o, uint64_t ns)
{
	if (ns % 1000000000 == 0)
		put(o, "%llus", (unsigned long long)(ns / 1000000000));
	else if (ns % 1000000 == 0)
		put(o, "%llums", (unsigned long long)(ns / 1000000));
	else if (ns % 1000 == 0)
		put(o, "%lluus", (unsigned long long)(ns / 1000));
	else {
		char frac[8];
		size_t n;

		snprintf(frac, sizeof(frac), "%03llu", (unsigned long long)(ns % 1000));
		n = strlen(frac);
		while (frac[n - 1] == '0')
			n--;
		put(o, "%llu.%.*sus", (unsigned long long)(ns / 1000), (int)n, frac);
	}
}

size_t pf_fault_format(const pf_fault_plan *plan, char *dst, size_t cap)
{
	static const char *const names[] = {
		[PF_FAULT_EIO] = "eio", [PF_FAULT_SHORT] = "short",
		[PF_FAULT_ENOENT] = "enoent", [PF_FAULT_HANG] = "hang",
		[PF_FAULT_DELAY] = "delay",
	};
	sink o = { .dst = dst, .cap = cap };

	if (cap)
		dst[0] = '\0';
	for (unsigned i = 0; i < plan->nrules; i++) {
		const pf_fault_rule *r = &plan->rule[i];

		put(&o, "%s%s%s", i ? "," : "", r->open ? "open-" : "",
		    r->kind <= PF_FAULT_DELAY && names[r->kind] ? names[r->kind] : "?");
		if (r->kind == PF_FAULT_DELAY) {
			put(&o, "=");
			put_duration(&o, r->delay_ns);
		}
		if (r->nth) {
			put(&o, "@%llu", (unsigned long long)r->nth);
		} else {
			put(&o, ":");
			put_fraction(&o, r->fraction);
		}
	}
	if (plan->seed)
		put(&o, "%sseed=%llu", plan->nrules ? "," : "", (unsigned long long)plan->seed);
	return o.n;
}

/* ------------------------------------------------------------------ */
/* Decisions                                                            */

/* Uniform in [0, 1), a pure function of its arguments: the same request
 * and read draw the same whichever thread or back-end issues them. */
static double draw(uint64_t seed, unsigned rule, uint64_t request, uint32_t issue)
{
	uint64_t h = pf_mix64(seed ^ pf_mix64(((uint64_t)rule << 32) | issue) ^
			      pf_mix64(request * 0xd1b54a32d192ed03ull));

	return pf_unit_double(h);
}

/* Which error wins when several hit one read. */
static unsigned error_rank(pf_fault_kind k)
{
	return k == PF_FAULT_ENOENT ? 3 : k == PF_FAULT_EIO ? 2 : k == PF_FAULT_HANG ? 1 : 0;
}

pf_fault_hit pf_fault_decide(const pf_fault_plan *plan, uint64_t request, uint32_t issue,
			     bool open)
{
	pf_fault_hit h = { 0 };

	for (unsigned i = 0; i < plan->nrules; i++) {
		const pf_fault_rule *r = &plan->rule[i];
		bool hit = r->open == open &&
			   (r->nth ? request == r->nth && issue == 0
				   : r->fraction >= 1.0 ||
				     (r->fraction > 0 && draw(plan->seed, i, request, issue) <
							 r->fraction));

		if (!hit)
			continue;
		h.rules++;
		switch (r->kind) {
		case PF_FAULT_SHORT:
			h.short_read = true;
			break;
		case PF_FAULT_DELAY:
			h.delay_ns += r->delay_ns;	/* 32 x 600 s: no overflow */
			break;
		default:
			if (error_rank(r->kind) > error_rank(h.error))
				h.error = r->kind;
			break;
		}
	}
	return h;
}

/* ------------------------------------------------------------------ */
/* The policy: config fields, else the environment, else the default    */

/* A whole number in [0, max] from the environment variable name.
 * @return 1 with *out, 0 when unset or empty, -EINVAL. */
static int env_uint(const char *name, uint64_t max, uint64_t *out, pf_error *err)
{
	const char *v = getenv(name);
	uint64_t n = 0;

	if (!v || !*v)
		return 0;
	for (const char *p = v; *p; p++) {
		if (!is_digit((unsigned char)*p) || n > max)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "%s: '%.40s' is not a whole number in 0..%llu",
					    name, v, (unsigned long long)max);
		n = n * 10 + (uint64_t)(*p - '0');
	}
	if (n > max)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%s: '%.40s' is not a whole number in 0..%llu", name, v,
				    (unsigned long long)max);
	*out = n;
	return 1;
}

/* A config field: > 0 the value (at most max), < 0 "none" (0), 0 the
 * environment (where 0 is "none"), else def.  @return 0 or -EINVAL. */
static int setting(int field, const char *field_name, const char *env, uint64_t max,
		   uint64_t def, uint64_t *out, pf_error *err)
{
	int ret;

	if (field < 0) {
		*out = 0;
		return 0;
	}
	if (field > 0) {
		if ((uint64_t)field > max)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "pf_io_config.%s: %d is above %llu", field_name,
					    field, (unsigned long long)max);
		*out = (uint64_t)field;
		return 0;
	}
	ret = env_uint(env, max, out, err);
	if (ret == 0)
		*out = def;
	return ret < 0 ? ret : 0;
}

int pf_io_policy_init(pf_io_policy *p, const pf_io_config *cfg, pf_error *err)
{
	static const pf_io_config none = { 0 };
	const char *spec, *name;
	uint64_t v;
	int ret;

	if (!cfg)
		cfg = &none;
	memset(p, 0, sizeof(*p));
	spec = cfg->faults ? cfg->faults : getenv("PODFEED_FAULTS");
	name = cfg->faults ? "fault spec" : "PODFEED_FAULTS";
	if (spec) {
		ret = pf_fault_parse(&p->faults, spec, strlen(spec), name, err);
		if (ret < 0)
			return ret;
	}
	ret = setting(cfg->retries, "retries", "PODFEED_IO_RETRIES", PF_IO_RETRIES_MAX,
		      PF_IO_RETRIES_DEFAULT, &v, err);
	if (ret < 0)
		return ret;
	p->retries = (unsigned)v;
	ret = setting(cfg->retry_backoff_us, "retry_backoff_us", "PODFEED_IO_BACKOFF_US",
		      PF_IO_BACKOFF_MAX_US, PF_IO_BACKOFF_DEFAULT_US, &v, err);
	if (ret < 0)
		return ret;
	p->backoff_ns = v * 1000;
	ret = setting(cfg->timeout_ms, "timeout_ms", "PODFEED_IO_TIMEOUT_MS",
		      PF_IO_TIMEOUT_MAX_MS, PF_IO_TIMEOUT_DEFAULT_MS, &v, err);
	if (ret < 0)
		return ret;
	p->timeout_ns = v * 1000000;
	for (unsigned i = 0; i < p->faults.nrules; i++)
		if (p->faults.rule[i].kind == PF_FAULT_HANG && !p->timeout_ns)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "%s: 'hang' faults need a read timeout (the "
					    "timeout is off)", name);
	return 0;
}

uint64_t pf_io_backoff_ns(const pf_io_policy *p, uint32_t retry)
{
	uint64_t ns = p->backoff_ns;

	for (uint32_t i = 1; i < retry && ns < PF_IO_BACKOFF_MAX_US * 1000ull; i++)
		ns *= 2;
	return ns < PF_IO_BACKOFF_MAX_US * 1000ull ? ns : PF_IO_BACKOFF_MAX_US * 1000ull;
}

/* ------------------------------------------------------------------ */
/* One request's reads                                                  */

void pf_io_attempt_plan(const pf_io_policy *p, pf_io_op *a, bool direct,
			pf_io_stats *st)
{
	const pf_io_req *req = a->req;
	uint32_t left = req->len - req->done_bytes;
	pf_fault_hit h = { 0 };
	bool faulted;

	/* An open draws for its open step; the stat after it (and the move
	 * into the ring's table) is not a request of its own, nor an issue. */
	if (req->open && a->step != PF_OPEN_STEP_OPEN)
		;
	else if (p->faults.nrules)
		h = pf_fault_decide(&p->faults, a->seq, a->issue++, req->open);
	else
		a->issue++;
	a->issue_len = left;
	a->action = (uint8_t)h.error;
	a->delay_ns += h.delay_ns;
	a->cqes = 0;
	a->timed_out = false;
	a->read_res = 0;
	faulted = h.error || h.delay_ns;
	if (h.short_read && !h.error) {
		/* A real short read: the kernel is asked for less.  O_DIRECT
		 * reads must stay whole blocks. */
		uint32_t half = left / 2;

		if (direct)
			half &= ~(PF_IO_DIRECT_ALIGN - 1);
		if (half) {
			a->issue_len = half;
			faulted = true;
		}
	}
	if (faulted) {
		st->faults++;
		total_add(&pf_io_process_totals.faults);
	}
	if (a->action != PF_FAULT_EIO && a->action != PF_FAULT_ENOENT && !req->open)
		total_add(&pf_io_process_totals.reads);
}

/* A failed read or open step: @return true when the request completes
 * with res, false when it is due again (op->delay_ns: the backoff). */
static bool judge_error(const pf_io_policy *p, pf_io_op *a, int64_t res, pf_io_stats *st)
{
	pf_io_req *req = a->req;

	if (res == -EINTR && a->eintr < PF_IO_EINTR_MAX) {
		/* A signal, not a storage failure: again at once, free. */
		a->eintr++;
		st->retries++;
		total_add(&pf_io_process_totals.retries);
		return false;
	}
	if ((res == -EIO || res == -EAGAIN) && req->retries < p->retries) {
		req->retries++;
		a->delay_ns = pf_io_backoff_ns(p, req->retries);
		st->retries++;
		total_add(&pf_io_process_totals.retries);
		return false;
	}
	if (res == -ETIMEDOUT) {
		st->timeouts++;
		total_add(&pf_io_process_totals.timeouts);
	}
	req->result = res;
	req->injected = a->action != 0;
	st->errors++;
	total_add(&pf_io_process_totals.errors);
	return true;
}

bool pf_io_open_judge_error(const pf_io_policy *p, pf_io_op *a, int64_t res,
			    pf_io_stats *st)
{
	a->delay_ns = 0;
	a->req->injected = false;
	return judge_error(p, a, res, st);
}

bool pf_io_attempt_judge(const pf_io_policy *p, pf_io_op *a, int64_t res,
			 pf_io_stats *st)
{
	pf_io_req *req = a->req;

	a->delay_ns = 0;
	req->injected = false;
	if (res > 0) {
		req->done_bytes += (uint32_t)res;
		st->bytes += (uint64_t)res;
		if (req->done_bytes < req->len) {
			/* Short: ask again for the rest (a read of 0 then says
			 * end of file). */
			st->short_reads++;
			return false;
		}
		req->result = req->done_bytes;
		return true;
	}
	if (res == 0) {
		req->result = req->done_bytes;
		return true;
	}
	return judge_error(p, a, res, st);
}

int pf_io_failure(const pf_io_policy *p, const pf_io_req *req, const char *path,
		  pf_error *err)
{
	uint64_t at = req->offset + req->done_bytes;
	int code = (int)req->result;
	char retried[64] = "";

	if (req->result >= 0)
		return 0;
	if (req->retries)
		snprintf(retried, sizeof(retried), " (after %u retr%s)", req->retries,
			 req->retries == 1 ? "y" : "ies");
	if (path)
		pf_error_set_file(err, path);
	if (req->open && code == -EISDIR)
		return pf_error_set(err, code, PF_OFFSET_NONE, 0, "is a directory, not a file");
	if (req->open && req->not_regular)
		return pf_error_set(err, code, PF_OFFSET_NONE, 0, "is %s, not a regular file",
				    pf_file_type_name((unsigned)req->not_regular << 12));
	if (req->open && code == -ETIMEDOUT)
		return pf_error_set(err, code, PF_OFFSET_NONE, 0,
				    "open timed out: no answer within %llu ms%s%s",
				    (unsigned long long)(p->timeout_ns / 1000000), retried,
				    req->abandoned ? " (abandoned: the file system did not let it "
				    "be cancelled)" : "");
	if (req->open)
		return pf_error_set(err, code, PF_OFFSET_NONE, 0, "cannot open: %s%s%s",
				    pf_strerror(code), req->injected ? " (an injected fault)" : "",
				    retried);
	if (code == -ETIMEDOUT)
		return pf_error_set(err, code, PF_OFFSET_FILE, at,
				    "read of %u bytes timed out: no answer within %llu ms%s%s",
				    req->len - req->done_bytes,
				    (unsigned long long)(p->timeout_ns / 1000000), retried,
				    req->abandoned ? " (the file system did not let the read be "
				    "cancelled: abandoned, its buffer never used again)" : "");
	return pf_error_set(err, code, PF_OFFSET_FILE, at, "read failed: %s%s%s",
			    pf_strerror(code), req->injected ? " (an injected fault)" : "",
			    retried);
}

/* ------------------------------------------------------------------ */
/* The pipe of 'hang' faults                                            */

static pthread_once_t hang_once = PTHREAD_ONCE_INIT;
static int hang_fds[2] = { -1, -1 };
static int hang_errno;

static void hang_open(void)
{
	/* Both ends stay open for the life of the process: with a writer
	 * that never writes, a read waits until it is interrupted. */
	if (pipe2(hang_fds, O_CLOEXEC) < 0)
		hang_errno = errno;
}

int pf_fault_hang_fd(void)
{
	pthread_once(&hang_once, hang_open);
	return hang_fds[0] >= 0 ? hang_fds[0] : -hang_errno;
}
