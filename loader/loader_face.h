/* SPDX-License-Identifier: Apache-2.0 */
/* Private to loader/: the face every kind of loader wears.  A loader is a
 * pipeline (loader/pipeline/), a packing loader over one (loader/pack/)
 * or a mixture over several (loader/mix/); each one's struct begins with
 * a pf_loader whose ops the public calls (loader/api/loader.c) go
 * through, so that no room asks, or calls up into, the one above it (as
 * fio's engines and zstd's back-ends are tables of functions).  Beside
 * podfeed.h, under every room. */
#ifndef PF_LOADER_FACE_H
#define PF_LOADER_FACE_H

#include "podfeed.h"

/* Each is the pf_loader_*() call of its name (podfeed.h) for one kind;
 * sources and source_metrics are NULL for a loader of one dataset. */
typedef struct pf_loader_ops {
	int (*next)(pf_loader *l, pf_batch **out, uint64_t timeout_ns);
	void (*release)(pf_loader *l, pf_batch *batch);
	int64_t (*save_state)(pf_loader *l, void *buf, size_t cap);
	const pf_error *(*last_error)(const pf_loader *l);
	void (*metrics)(const pf_loader *l, pf_loader_metrics *m);
	void (*tuning)(const pf_loader *l, pf_tuning *t);
	uint64_t (*steps_per_epoch)(const pf_loader *l);
	uint64_t (*steps_left)(const pf_loader *l);
	const pf_spec *(*spec)(const pf_loader *l);
	int (*feature_shape)(const pf_loader *l, uint32_t i, uint32_t shape[3], const char **elem,
			     uint32_t *elem_size);
	int (*series)(const pf_loader *l, pf_series **out);
	size_t (*sources)(const pf_loader *l);
	void (*source_metrics)(const pf_loader *l, size_t i, pf_source_metrics *m);
	void (*free)(pf_loader *l);
	/* pf_loader_records_of(): refs of the library's own size (the public
	 * call copies them out at the caller's); pf_loader_file(). */
	int64_t (*records_of)(const pf_loader *l, uint64_t step, pf_record_ref *out, size_t cap,
			      pf_error *err);
	const char *(*file)(const pf_loader *l, uint32_t source, uint32_t file);
} pf_loader_ops;

struct pf_loader {
	const pf_loader_ops *ops;
};

#endif
