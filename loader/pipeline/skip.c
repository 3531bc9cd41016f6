/* SPDX-License-Identifier: Apache-2.0 */
/* A pipeline's run as the plan reads it: its start moved ahead by
 * skip_steps (the steps delivered and dropped, nothing read: the I/O
 * thread then walks from the new start as it walks a resumed one), and
 * which record of which file each row of a step holds
 * (pf_loader_records_of()).  Both are loader/plan/course.c's, over this
 * loader's order; here they are taken from and given back to the
 * pipeline.  Not here: restoring a state (resume.c), the walk
 * (schedule.c). */
#include <errno.h>
#include <string.h>

#include "pipeline_internal.h"

void pf_pipe_run(const pf_pipe *l, pf_run *r)
{
	pf_pipe_order(l, &r->o);
	r->seed = l->cfg.seed;
	r->remainder = l->cfg.remainder;
	r->epochs = l->epochs;
	r->steps_per_epoch = l->steps_per_epoch;
	r->start = (pf_run_start){ .epoch = l->start_epoch, .gstep = l->gstep0,
				   .resumed = l->resumed, .resume = l->resume };
}

int pf_pipe_elastic_run(const pf_pipe *l, uint32_t host, const pf_state_blob *blobs, size_t n,
			pf_run *out, pf_error *err)
{
	pf_state *st = pf_calloc(n ? n : 1, sizeof(*st));
	pf_run_start start;
	int ret = st ? 0 : -ENOMEM;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n && ret == 0; i++)
		ret = pf_state_decode(&st[i], blobs[i].data, blobs[i].len, err);
	if (ret == 0)
		ret = pf_resume_elastic_start(l, host, st, n, &start, err);
	if (ret == 0) {
		pf_pipe_run(l, out);
		out->o.topo.host_index = host;
		out->start = start;
	}
	for (size_t i = 0; st && i < n; i++)
		pf_state_release(&st[i]);
	pf_free(st);
	if (ret == -ENOMEM && !err->code)
		pf_error_set(err, ret, PF_OFFSET_NONE, 0, "out of memory");
	return ret;
}

int pf_pipe_keep_start(pf_pipe *l)
{
	pf_run r;

	pf_pipe_run(l, &r);
	pf_run_start_release(&l->which0);
	return pf_run_start_copy(&l->which0, &r.start);
}

int pf_pipe_skip(pf_pipe *l, uint64_t n, pf_error *err)
{
	uint64_t from = l->gstep0;
	pf_run r;
	int ret;

	pf_pipe_run(l, &r);
	ret = pf_run_skip(&r, n, err);
	/* Its pieces are l's (replaced when it starts inside a later epoch). */
	l->start_epoch = r.start.epoch;
	l->gstep0 = r.start.gstep;
	l->resumed = r.start.resumed;
	l->resume = r.start.resume;
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&l->mu);
	if (!l->m.skipped_steps)
		l->m.skipped_from = from;
	l->m.skipped_steps += n;
	l->m.skipped_records += n * l->host_batch;
	pthread_mutex_unlock(&l->mu);
	return 0;
}

int64_t pf_pipe_records_of(const pf_pipe *l, uint64_t step, pf_record_ref *out, size_t cap,
			   pf_error *err)
{
	pf_plan_record *rows;
	pf_which w;
	uint64_t in_epoch;
	uint32_t epoch;
	pf_run r;
	int ret;

	pf_pipe_run(l, &r);
	r.start = l->which0;
	rows = pf_calloc(l->host_batch, sizeof(*rows));
	if (!rows)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0, "out of memory");
	pf_which_init(&w, &r);
	ret = pf_which_step(&w, step, &epoch, &in_epoch, cap >= l->host_batch ? rows : NULL, err);
	pf_which_release(&w);
	for (uint32_t i = 0; ret == 0 && cap >= l->host_batch && i < l->host_batch; i++)
		out[i] = (pf_record_ref){
			.epoch = epoch, .step = in_epoch,
			.core = i / l->topo.per_core_batch, .row = i % l->topo.per_core_batch,
			.file = rows[i].file, .record = rows[i].record,
		};
	pf_free(rows);
	return ret < 0 ? ret : (int64_t)l->host_batch;
}

const char *pf_pipe_file(const pf_pipe *l, uint32_t file)
{
	return file < l->ds->nfiles ? l->ds->paths[file] : NULL;
}
