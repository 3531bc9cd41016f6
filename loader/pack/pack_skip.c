/* SPDX-License-Identifier: Apache-2.0 */
/* A packing loader's skip_steps and the records of its steps: its run's
 * start as the plan reads it (loader/plan/pack_course.c), kept at create;
 * skip_steps moved through it (the packer run over the records' lengths,
 * nothing read), the inner loader's start moved to the group it ends at
 * before that loader reads (it is created gated), the packer and the
 * packed step set where the plan says; and pf_loader_records_of(), the
 * pieces of records of a packed step's rows.  Not here: packing
 * (pack.c), checkpoints (pack_state.c). */
#include <errno.h>
#include <string.h>

#include "pack_internal.h"

int pf_pack_keep_course(pf_packing *l, pf_pack_run *pk)
{
	pf_pack_course *c = &pk->course;
	pf_run inner;
	int ret;

	pf_pipe_run(pk->inner, &inner);
	*c = (pf_pack_course){
		.inner = inner, .len = pk->lengths, .nf = pk->nf, .cap = pk->cap,
		.packer = pk->packer, .B = pk->B, .epochs = l->epochs,
		.epoch = pk->inner->start_epoch, .step = pk->step, .step_base = pk->step_base,
		.epoch_steps = pk->epoch_steps, .epoch_rows = pk->epoch_rows, .gstep = pk->gstep,
	};
	ret = pf_run_start_copy(&c->inner.start, &inner.start);
	pk->have_course = ret == 0;
	return ret;
}

int pf_pack_skip_steps(pf_packing *l, pf_pack_run *pk, uint64_t n, pf_error *err)
{
	pf_pack_course c = pk->course;
	uint32_t epoch = c.epoch;
	pf_pack_skip sk;
	int ret;

	ret = pf_pack_course_skip(&c, n, &sk, err);
	if (ret == 0)
		ret = pf_pipe_skip(pk->inner, sk.inner_steps, err);
	if (ret < 0)
		return ret;
	/* The packer's rows where the plan says (its counts go on from 0,
	 * as after a restore). */
	pk->packer.nopen = c.packer.nopen;
	pk->packer.next_row = c.packer.next_row;
	memcpy(pk->packer.open, c.packer.open, c.packer.nopen * sizeof(*pk->packer.open));
	pk->step = c.step;
	pk->step_base = c.step_base;
	pk->epoch_steps = c.epoch_steps;
	pk->epoch_rows = c.epoch_rows;
	pk->gstep = c.gstep;
	/* A later epoch: its order planned for the decode threads. */
	if (c.epoch != epoch)
		ret = pf_pack_direct_epoch(l, pk, c.epoch);
	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0,
				    "planning the packed epoch %u: %s", c.epoch, pf_strerror(ret));
	pk->skipped_total += n;
	pthread_mutex_lock(&l->mu);
	l->m.skipped_from = pk->course.gstep;
	l->m.skipped_steps = n;
	l->m.skipped_records = sk.records;
	l->m.skipped_tokens = sk.values;
	pthread_mutex_unlock(&l->mu);
	return 0;
}

int64_t pf_pack_records_of(const pf_packing *l, uint64_t step, pf_record_ref *out, size_t cap,
			   pf_error *err)
{
	const pf_pack_run *pk = l->pack;
	pf_pack_ref *refs = NULL;
	uint64_t in_epoch = 0;
	uint32_t epoch = 0, pcb = l->topo.per_core_batch;
	size_t n = 0;
	int ret;

	if (pk->mix)
		return pf_error_set(err, -ENOTSUP, PF_OFFSET_NONE, 0,
				    "the records of a packed mixture's steps are not known yet");
	if (!pk->have_course)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0, "the loader has no plan");
	/* The pieces into refs of the plan's when out has room for them
	 * (cap 0: the count). */
	if (cap && !(refs = pf_calloc(cap, sizeof(*refs))))
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	ret = pf_pack_course_which(&pk->course, step, refs, cap, &n, &epoch, &in_epoch, err);
	for (size_t i = 0; ret == 0 && n <= cap && i < n; i++)
		out[i] = (pf_record_ref){
			.epoch = epoch, .step = in_epoch,
			.core = refs[i].row / pcb, .row = refs[i].row % pcb,
			.file = refs[i].rec.file, .record = refs[i].rec.record,
			.segment = refs[i].segment, .at = refs[i].at, .from = refs[i].from,
			.count = refs[i].count,
		};
	pf_free(refs);
	return ret < 0 ? ret : (int64_t)n;
}

const char *pf_pack_file(const pf_packing *l, uint32_t file)
{
	return pf_pipe_file(l->pack->inner, file);
}
