/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed's CPython extension: private to python/ext/ (types and helpers
 * shared by module.c, loader.c and batch.c). */
#ifndef PF_EXT_INTERNAL_H
#define PF_EXT_INTERNAL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL pf_ext_ARRAY_API
#ifndef PF_EXT_IMPORT_ARRAY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "podfeed.h"

/* Dims of an array: cores, per-core batch, and a record's (an image's
 * three). */
#define PF_EXT_MAX_DIMS 5

/* The loader: one pf_loader, and the count of batch slots Python holds.
 * The pf_loader is freed when the object is closed and nothing uses it any
 * more: no slot held (arrays may still point into slots) and no next() in
 * progress on another thread (it runs without the GIL). */
typedef struct pf_ext_loader {
	PyObject_HEAD
	pf_loader *l;
	pid_t pid;		/* the process that created l (its threads) */
	uint32_t cores, per_core_batch, prefetch;
	unsigned held;		/* live slot objects */
	bool closed;		/* close() was called; l goes when unused */
	bool busy;		/* a next() is waiting without the GIL */
	bool done;		/* every epoch delivered */
	PyObject *names;	/* tuple of feature names */
	PyObject *dtypes;	/* tuple of numpy dtypes, in spec order */
	PyObject *paths;	/* list of the config's paths as bytes, kept with l */
	/* Each feature's values in one record (pf_loader_feature_shape()):
	 * dims, element size, and kind: 'i' signed, 'u' unsigned, 'f'
	 * float, 'b' bfloat16 (numpy: uint16; DLPack: bfloat16). */
	/* Per feature, and a mixture's _source after them. */
	uint8_t fnd[PF_SPEC_MAX_FEATURES + 1];
	uint32_t fshape[PF_SPEC_MAX_FEATURES + 1][3];
	uint8_t fitem[PF_SPEC_MAX_FEATURES + 1];
	char fkind[PF_SPEC_MAX_FEATURES + 1];
	PyObject *weakrefs;
	/* What report() gives pf_report_add_loader(), kept past close():
	 * the configuration (paths and resume cleared; features and
	 * quarantine point to the copies below), the dataset's files, when
	 * the loader was created and next() returned, and the metrics taken
	 * just before the C loader went. */
	pf_loader_config cfg;
	char *features, *quarantine;	/* PyMem */
	char **files;			/* pf_paths_expand() */
	size_t nfiles;
	uint64_t t_create_ns;		/* before pf_loader_create() */
	uint64_t t_first_ns;		/* the first batch's return; 0: none */
	uint64_t t_last_ns;		/* the last batch's return */
	uint64_t t_end_ns;		/* the last next() return (batch or end) */
	uint64_t steady_records, steady_batches;	/* after the first batch */
	pf_loader_metrics last;		/* at the C loader's free */
	pf_tuning last_tune;
	pf_series *last_series;		/* its time series (NULL: none kept) */
	bool have_last;
} pf_ext_loader;

/* A batch slot held by Python: the arrays of a batch point into it, and
 * each keeps it alive (numpy's .base), so the slot goes back to the loader
 * when the batch object and its last array are gone. */
typedef struct pf_ext_slot {
	PyObject_HEAD
	pf_ext_loader *loader;	/* strong reference */
	pf_batch *batch;
} pf_ext_slot;

extern PyTypeObject pf_ext_loader_type;
extern PyTypeObject pf_ext_slot_type;
extern PyTypeObject pf_ext_batch_type;
extern PyTypeObject pf_ext_tensor_type;

/* The exception classes podfeed/__init__.py registers; NULL until then. */
extern PyObject *pf_ext_error_classes;	/* dict: name -> class */

/*! pf_ext_raise(): raise the exception for a C error (code < 0, err
 *  filled or NULL), with .errno, .file, .offset, .offset_kind, .frame,
 *  .record and .cause.  @return NULL. */
PyObject *pf_ext_raise(int code, const pf_error *err, const char *what);
/*! pf_ext_raise_class(): raise an instance of the registered class name
 *  (e.g. "BatchLimitError") with msg.  @return NULL. */
PyObject *pf_ext_raise_class(const char *name, PyObject *fallback,
			     const char *msg);

/*! Loader.metrics()'s dict of l's counts and time series (metrics.c).
 *  @return a new reference, or NULL with an exception. */
PyObject *pf_ext_metrics_dict(const pf_loader *l);

/*! A Batch over a batch the loader returned; takes the slot. */
PyObject *pf_ext_batch_new(pf_ext_loader *lo, pf_batch *b);
/*! The slot's loader no longer holds it (called by the slot's dealloc). */
void pf_ext_loader_slot_done(pf_ext_loader *lo, pf_batch *b);

#endif
