/* SPDX-License-Identifier: Apache-2.0 */
/* The loader's public calls (podfeed.h): pf_loader_create() reads the
 * caller's config and creates the kind of loader it names, a mixture over
 * its sources (loader/mix/), a packing loader (loader/pack/) or a
 * pipeline (loader/pipeline/); every other pf_loader_*() call goes
 * through the loader's face (loader_face.h), whatever its kind.  Not
 * here: what any kind does. */
#include <errno.h>

#include "api_internal.h"
#include "dataset_internal.h"
#include "mixture_internal.h"
#include "pack_internal.h"
#include "pipeline_internal.h"

/* A loader over cfg's sources. */
static int create_mixture(pf_loader **out, const pf_loader_config *cfg, pf_error *err)
{
	pf_mixture *m;
	int ret;

	if (!cfg->sources || !cfg->nsources || !cfg->features || !cfg->per_core_batch)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "a mixture needs sources (%zu given), a feature spec and a "
				    "per-core batch", cfg->sources ? cfg->nsources : 0);
	/* Mixed, then packed (loader/pack/pack_mix.c). */
	if (cfg->pack_length)
		return pf_pack_create(out, cfg, err);
	ret = pf_mixture_create(&m, cfg, NULL, err);
	if (ret < 0)
		return ret;
	*out = &m->face;
	return 0;
}

int pf_loader_create_sized(pf_loader **out, const pf_loader_config *ucfg, size_t cfg_size,
			   pf_error *err)
{
	pf_loader_config config;
	const pf_loader_config *cfg = &config;
	pf_error local;
	pf_pipe *l;
	int ret;

	pf_error_clear(err);
	if (!err) {
		pf_error_clear(&local);
		err = &local;
	}
	/* A config this library cannot read is every host's (one binary):
	 * no host waits for another's part then. */
	if (!ucfg)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "no loader config given");
	ret = pf_struct_in(&config, sizeof(config), ucfg, cfg_size, PF_LOADER_CONFIG_SIZE_0_5,
			   "pf_loader_config", err);
	if (ret < 0)
		return ret;
	if (cfg->nsources || cfg->sources)
		return create_mixture(out, cfg, err);
	if (!cfg->npaths || !cfg->features || !cfg->per_core_batch) {
		ret = pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				   "the loader needs paths, a feature spec and a per-core batch");
		/* The other hosts of a pod wait for this one's part. */
		pf_dataset_open_abandon(&(pf_open_config){
			.host_index = cfg->host_index, .num_hosts = cfg->num_hosts,
			.allgather = cfg->allgather, .allgather_ctx = cfg->allgather_ctx },
			err);
		return ret;
	}
	if (cfg->pack_length)
		return pf_pack_create(out, cfg, err);
	ret = pf_pipe_create(&l, cfg, err);
	if (ret < 0)
		return ret;
	*out = &l->face;
	return 0;
}

int pf_loader_next(pf_loader *l, pf_batch **out)
{
	return l->ops->next(l, out, UINT64_MAX);
}

int pf_loader_next_timed(pf_loader *l, pf_batch **out, uint64_t timeout_ns)
{
	return l->ops->next(l, out, timeout_ns);
}

void pf_loader_release(pf_loader *l, pf_batch *batch)
{
	if (batch)
		l->ops->release(l, batch);
}

int64_t pf_loader_save_state(pf_loader *l, void *buf, size_t cap)
{
	return l->ops->save_state(l, buf, cap);
}

const pf_error *pf_loader_last_error(const pf_loader *l)
{
	return l->ops->last_error(l);
}

void pf_loader_get_metrics_sized(const pf_loader *l, pf_loader_metrics *um, size_t m_size)
{
	pf_loader_metrics m;

	l->ops->metrics(l, &m);
	pf_struct_out(um, m_size, &m, sizeof(m));
}

void pf_loader_tuning_sized(const pf_loader *l, pf_tuning *out, size_t out_size)
{
	pf_tuning t;

	l->ops->tuning(l, &t);
	pf_struct_out(out, out_size, &t, sizeof(t));
}

uint64_t pf_loader_steps_per_epoch(const pf_loader *l)
{
	return l->ops->steps_per_epoch(l);
}

uint64_t pf_loader_steps_left(const pf_loader *l)
{
	return l->ops->steps_left(l);
}

const pf_spec *pf_loader_spec(const pf_loader *l)
{
	return l->ops->spec(l);
}

int pf_loader_feature_shape(const pf_loader *l, uint32_t i, uint32_t shape[3],
			    const char **elem, uint32_t *elem_size)
{
	if (!l)
		return -EINVAL;
	return l->ops->feature_shape(l, i, shape, elem, elem_size);
}

int pf_loader_series(const pf_loader *l, pf_series **out)
{
	return l->ops->series(l, out);
}

size_t pf_loader_sources(const pf_loader *l)
{
	return l->ops->sources ? l->ops->sources(l) : 0;
}

int pf_loader_source_metrics_sized(const pf_loader *l, size_t i, pf_source_metrics *out,
				   size_t out_size)
{
	pf_source_metrics m;

	if (!l->ops->sources || i >= l->ops->sources(l))
		return -ENOENT;
	l->ops->source_metrics(l, i, &m);
	pf_struct_out(out, out_size, &m, sizeof(m));
	return 0;
}

int64_t pf_loader_records_of_sized(const pf_loader *l, uint64_t step, pf_record_ref *out,
				   size_t cap, size_t ref_size, pf_error *err)
{
	pf_record_ref *refs;
	pf_error local;
	int64_t n;

	pf_error_clear(err);
	if (!err) {
		pf_error_clear(&local);
		err = &local;
	}
	if (!l || (cap && !out) || ref_size < PF_RECORD_REF_SIZE_0_8)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "pf_loader_records_of: no loader, no array for %zu refs, or "
				    "refs of %zu bytes (at least %zu)", cap, ref_size,
				    (size_t)PF_RECORD_REF_SIZE_0_8);
	if (!l->ops->records_of)
		return pf_error_set(err, -ENOTSUP, PF_OFFSET_NONE, 0,
				    "this kind of loader cannot say the records of a step");
	if (ref_size == sizeof(*refs) || !cap)
		return l->ops->records_of(l, step, out, cap, err);
	/* The caller's refs are of another size than the library's: each
	 * crosses on its own (pf_common.h, "the ABI promise"). */
	refs = pf_calloc(cap, sizeof(*refs));
	if (!refs)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory for the records of step %llu",
				    (unsigned long long)step);
	n = l->ops->records_of(l, step, refs, cap, err);
	for (int64_t i = 0; i < n && (size_t)n <= cap; i++)
		pf_struct_out((uint8_t *)out + (size_t)i * ref_size, ref_size, &refs[i],
			      sizeof(*refs));
	pf_free(refs);
	return n;
}

const char *pf_loader_file(const pf_loader *l, uint32_t source, uint32_t file)
{
	return l && l->ops->file ? l->ops->file(l, source, file) : NULL;
}

void pf_loader_free(pf_loader *l)
{
	if (l)
		l->ops->free(l);
}
