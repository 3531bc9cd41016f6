/* SPDX-License-Identifier: Apache-2.0 */
/* Who this host is: its index in the pod and the host count, read from the
 * flags, the MPI launcher's, TPU VM's or torchrun's environment, with every
 * malformed value and every contradiction refused (precedence and rules in
 * pf_host.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf_host.h"

/* Longest slice of a value quoted in a message: pf_error's msg has room
 * for two of them and the words around. */
#define QUOTE_MAX 40

typedef enum topo_field {
	FIELD_INDEX = 0,
	FIELD_COUNT,
} topo_field;

/* One environment variable that says something about the topology. */
typedef struct topo_var {
	pf_topology_source source;
	const char *name;
	topo_field field;
	bool list;		/* comma-separated names: the value is their count */
} topo_var;

/*
 * In precedence order (see pf_host.h).  Within a source the order only
 * decides which variable a message names first: all must agree anyway.
 * Open MPI's mpirun sets OMPI_COMM_WORLD_* and, from 4.x on, PMIX_RANK;
 * MPICH's hydra and Slurm's PMI-2 set PMI_RANK and PMI_SIZE.
 */
static const topo_var topo_vars[] = {
	{ PF_TOPOLOGY_MPI, "OMPI_COMM_WORLD_RANK", FIELD_INDEX, false },
	{ PF_TOPOLOGY_MPI, "OMPI_COMM_WORLD_SIZE", FIELD_COUNT, false },
	{ PF_TOPOLOGY_MPI, "PMIX_RANK", FIELD_INDEX, false },
	{ PF_TOPOLOGY_MPI, "PMI_RANK", FIELD_INDEX, false },
	{ PF_TOPOLOGY_MPI, "PMI_SIZE", FIELD_COUNT, false },
	{ PF_TOPOLOGY_TPU, "TPU_WORKER_ID", FIELD_INDEX, false },
	{ PF_TOPOLOGY_TPU, "TPU_WORKER_HOSTNAMES", FIELD_COUNT, true },
	{ PF_TOPOLOGY_TPU, "CLOUD_TPU_TASK_ID", FIELD_INDEX, false },
	{ PF_TOPOLOGY_TORCH, "RANK", FIELD_INDEX, false },
	{ PF_TOPOLOGY_TORCH, "WORLD_SIZE", FIELD_COUNT, false },
};

static const char *const source_names[] = {
	[PF_TOPOLOGY_FLAGS] = "flags",
	[PF_TOPOLOGY_MPI] = "mpi",
	[PF_TOPOLOGY_TPU] = "tpu",
	[PF_TOPOLOGY_TORCH] = "torch",
	[PF_TOPOLOGY_SINGLE] = "single",
};

static const char *const field_names[] = {
	[FIELD_INDEX] = "host index",
	[FIELD_COUNT] = "host count",
};

/* A field's value so far, and the words that say where it came from
 * ("mpi OMPI_COMM_WORLD_RANK=2"), for the message if another disagrees. */
typedef struct topo_value {
	bool set;
	uint32_t value;
	pf_topology_source source;
	char said[96];
} topo_value;

const char *pf_topology_source_name(pf_topology_source s)
{
	if ((unsigned)s >= sizeof(source_names) / sizeof(source_names[0]))
		return "unknown";
	return source_names[s];
}

int pf_topology_parse_u32(const char *text, uint32_t *out)
{
	uint64_t v = 0;
	const char *p = text;

	if (!p || !*p)
		return -EINVAL;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
		/* Checked at every digit, so v never passes 10 x UINT32_MAX + 9
		 * and the multiplication cannot wrap. */
		if (v > UINT32_MAX) {
			/* Still refuse "99999999999x" as malformed, not large. */
			for (p++; *p; p++)
				if (*p < '0' || *p > '9')
					return -EINVAL;
			return -ERANGE;
		}
	}
	*out = (uint32_t)v;
	return 0;
}

const char *pf_topology_envp_get(void *ctx, const char *name)
{
	char *const *envp = ctx;
	size_t n = strlen(name);

	if (!envp)
		return NULL;
	for (; *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

static const char *process_getenv(void *ctx, const char *name)
{
	(void)ctx;
	return getenv(name);
}

/* "mpi: PMI_RANK='3x' is not a whole number" and its kin. */
static int malformed(pf_error *err, pf_topology_source s, const char *name,
		     const char *text, int why, topo_field f)
{
	size_t len = strlen(text);
	const char *more = len > QUOTE_MAX ? "..." : "";

	if (why == -ERANGE)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%s: %s='%.*s%s' is too large for a %s (at most %u)",
				    pf_topology_source_name(s), name, QUOTE_MAX, text,
				    more, field_names[f], UINT32_MAX);
	return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
			    "%s: %s='%.*s%s' is not a whole number (digits only)",
			    pf_topology_source_name(s), name, QUOTE_MAX, text, more);
}

/* The number of comma-separated names in text; every name must be
 * non-empty ("a,,b", "a," and "" are malformed). */
static int count_names(const char *text, pf_topology_source s,
		       const char *name, uint32_t *out, pf_error *err)
{
	uint64_t n = 1;
	size_t len = 0;

	for (const char *p = text;; p++) {
		if (*p == ',' || !*p) {
			if (!len)
				return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
						    "%s: %s='%.*s%s': host name %llu is empty",
						    pf_topology_source_name(s), name,
						    QUOTE_MAX, text,
						    strlen(text) > QUOTE_MAX ? "..." : "",
						    (unsigned long long)n);
			if (!*p)
				break;
			n++;
			len = 0;
		} else {
			len++;
		}
	}
	if (n > UINT32_MAX)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%s: %s names more than %u hosts",
				    pf_topology_source_name(s), name, UINT32_MAX);
	*out = (uint32_t)n;
	return 0;
}

/* Record that source s (said: its words) gives field f the value v: the
 * first to do so sets it, every later one must agree. */
static int offer(topo_value *fields, topo_field f, uint32_t v,
		 pf_topology_source s, const char *said, unsigned *sources,
		 pf_error *err)
{
	topo_value *t = &fields[f];

	*sources |= 1u << s;
	if (!t->set) {
		t->set = true;
		t->value = v;
		t->source = s;
		snprintf(t->said, sizeof(t->said), "%s", said);
		return 0;
	}
	if (t->value == v)
		return 0;
	return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
			    "contradicting %s: %s but %s", field_names[f],
			    t->said, said);
}

static int read_var(const topo_var *var, const char *text, topo_value *fields,
		    unsigned *sources, pf_error *err)
{
	const char *src = pf_topology_source_name(var->source);
	char said[96];
	uint32_t v;
	int ret;

	if (var->list) {
		ret = count_names(text, var->source, var->name, &v, err);
		if (ret < 0)
			return ret;
		snprintf(said, sizeof(said), "%s %s (%u name%s)", src, var->name, v,
			 v == 1 ? "" : "s");
	} else {
		ret = pf_topology_parse_u32(text, &v);
		if (ret < 0)
			return malformed(err, var->source, var->name, text, ret,
					 var->field);
		snprintf(said, sizeof(said), "%s %s=%u", src, var->name, v);
	}
	if (var->field == FIELD_COUNT && v == 0)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%s: %s=0: a pod has at least one host", src,
				    var->name);
	return offer(fields, var->field, v, var->source, said, sources, err);
}

int pf_topology_detect(pf_host_topology *out, const pf_topology_flags *flags,
		       pf_getenv_fn getenv_fn, void *ctx, pf_error *err)
{
	topo_value fields[2];
	unsigned sources = 0;
	char said[96];
	int ret;

	pf_error_clear(err);
	memset(fields, 0, sizeof(fields));
	memset(out, 0, sizeof(*out));
	if (!getenv_fn)
		getenv_fn = process_getenv;
	if (flags && flags->has_host_index) {
		snprintf(said, sizeof(said), "flags --host-index=%u", flags->host_index);
		offer(fields, FIELD_INDEX, flags->host_index, PF_TOPOLOGY_FLAGS, said,
		      &sources, err);
	}
	if (flags && flags->has_num_hosts) {
		if (flags->num_hosts == 0)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "flags: --num-hosts=0: a pod has at least one host");
		snprintf(said, sizeof(said), "flags --num-hosts=%u", flags->num_hosts);
		offer(fields, FIELD_COUNT, flags->num_hosts, PF_TOPOLOGY_FLAGS, said,
		      &sources, err);
	}
	/* Every variable that is set is read, even when a source above has
	 * given both fields: a stale or wrong environment is found now, not
	 * when two hosts read the same share. */
	for (size_t i = 0; i < sizeof(topo_vars) / sizeof(topo_vars[0]); i++) {
		const char *text = getenv_fn(ctx, topo_vars[i].name);

		if (!text)
			continue;
		ret = read_var(&topo_vars[i], text, fields, &sources, err);
		if (ret < 0)
			return ret;
	}

	if (!fields[FIELD_INDEX].set && !fields[FIELD_COUNT].set) {
		out->host_index = 0;
		out->num_hosts = 1;
		out->source = PF_TOPOLOGY_SINGLE;
		out->sources = 1u << PF_TOPOLOGY_SINGLE;
		return 0;
	}
	if (!fields[FIELD_COUNT].set)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "%s gives the host index but nothing gives the host count "
				    "(--num-hosts, or the launcher's size variable)",
				    fields[FIELD_INDEX].said);
	if (!fields[FIELD_INDEX].set) {
		/* A count alone is host 0 only in a pod of one.  In a larger
		 * pod, taking host 0 would make every host that forgot its
		 * index read host 0's share: duplicated data, not an error
		 * anyone sees.  A count from the environment alone means a
		 * launcher lost its rank variable. */
		if (fields[FIELD_COUNT].source == PF_TOPOLOGY_FLAGS &&
		    fields[FIELD_COUNT].value > 1)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "%s but nothing gives this host's index: pass "
					    "--host-index 0..%u, or run under a launcher "
					    "(mpirun, torchrun, a TPU VM)",
					    fields[FIELD_COUNT].said,
					    fields[FIELD_COUNT].value - 1);
		if (fields[FIELD_COUNT].source != PF_TOPOLOGY_FLAGS)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "%s gives the host count but nothing gives this "
					    "host's index (--host-index, or the launcher's "
					    "rank variable)", fields[FIELD_COUNT].said);
		fields[FIELD_INDEX].set = true;
		fields[FIELD_INDEX].value = 0;
		fields[FIELD_INDEX].source = PF_TOPOLOGY_FLAGS;
	}
	if (fields[FIELD_INDEX].value >= fields[FIELD_COUNT].value)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "host index %u (%s) is not below the host count %u (%s)",
				    fields[FIELD_INDEX].value, fields[FIELD_INDEX].said,
				    fields[FIELD_COUNT].value, fields[FIELD_COUNT].said);
	out->host_index = fields[FIELD_INDEX].value;
	out->num_hosts = fields[FIELD_COUNT].value;
	out->source = fields[FIELD_INDEX].source;
	out->sources = sources;
	return 0;
}

size_t pf_topology_format(const pf_host_topology *t, char *dst, size_t cap)
{
	size_t n = 0;
	int w;
	bool first = true;

	/* n keeps the full length even when dst is short, as snprintf does. */
#define APPEND(...)                                                          \
	do {                                                                 \
		w = snprintf(n < cap ? dst + n : NULL, n < cap ? cap - n : 0, \
			     __VA_ARGS__);                                   \
		if (w > 0)                                                   \
			n += (size_t)w;                                      \
	} while (0)

	if (cap)
		dst[0] = '\0';
	APPEND("host %u of %u (from %s", t->host_index, t->num_hosts,
	       pf_topology_source_name(t->source));
	for (unsigned s = 0; s <= PF_TOPOLOGY_SINGLE; s++) {
		if (s == (unsigned)t->source || !(t->sources & (1u << s)))
			continue;
		APPEND("%s%s", first ? "; also " : ", ",
		       pf_topology_source_name((pf_topology_source)s));
		first = false;
	}
	APPEND(")");
#undef APPEND
	return n;
}
