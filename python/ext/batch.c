/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed's CPython extension: a batch (Batch), the slot its memory lives
 * in (kept alive by every array over it), numpy views and DLPack tensors
 * (Tensor).  The loader itself is loader.c's. */
#include "ext_internal.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* The slot                                                            */

static void slot_dealloc(pf_ext_slot *s)
{
	pf_ext_loader *lo = s->loader;

	pf_ext_loader_slot_done(lo, s->batch);
	Py_TYPE(s)->tp_free((PyObject *)s);
	Py_DECREF(lo);
}

PyTypeObject pf_ext_slot_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "podfeed._podfeed._Slot",
	.tp_basicsize = sizeof(pf_ext_slot),
	.tp_dealloc = (destructor)slot_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A batch slot of the loader: the memory a batch's arrays lie in.  "
		  "It goes back to the loader when nothing refers to it.",
};

/* ------------------------------------------------------------------ */
/* The batch                                                           */

typedef struct pf_ext_batch {
	PyObject_HEAD
	pf_ext_loader *loader;	/* strong */
	pf_ext_slot *slot;	/* strong; NULL once released */
	pf_batch *b;		/* valid while slot is */
	uint32_t epoch;
	uint64_t step, global_step;
	bool epoch_start, epoch_end;
	uint64_t nvalid;
	uintptr_t block;	/* the slot's memory, for block_info */
	size_t block_bytes;	/* one core's block */
} pf_ext_batch;

PyObject *pf_ext_batch_new(pf_ext_loader *lo, pf_batch *b)
{
	pf_ext_slot *s = PyObject_New(pf_ext_slot, &pf_ext_slot_type);
	pf_ext_batch *bo;

	if (!s) {
		pf_loader_release(lo->l, b);
		return NULL;
	}
	s->loader = (pf_ext_loader *)Py_NewRef((PyObject *)lo);
	s->batch = b;
	lo->held++;
	/* The cores' blocks lie one after the other, core[0].block_bytes
	 * apart (podfeed.h, struct pf_batch): a feature of all cores is one
	 * array with that stride, no copy.  Checked, not assumed. */
	for (uint32_t c = 1; c < b->cores; c++) {
		if ((uint8_t *)b->core[c].block !=
		    (uint8_t *)b->core[0].block + (size_t)c * b->core[0].block_bytes ||
		    b->core[c].valid != b->core[0].valid + (size_t)c * b->per_core_batch) {
			Py_DECREF(s);
			PyErr_SetString(PyExc_RuntimeError,
					"the loader's core blocks are not equally spaced; "
					"this podfeed extension does not match its library");
			return NULL;
		}
	}
	bo = PyObject_New(pf_ext_batch, &pf_ext_batch_type);
	if (!bo) {
		Py_DECREF(s);
		return NULL;
	}
	bo->loader = (pf_ext_loader *)Py_NewRef((PyObject *)lo);
	bo->slot = s;
	bo->b = b;
	bo->epoch = b->epoch;
	bo->step = b->step;
	bo->global_step = b->global_step;
	bo->epoch_start = b->epoch_start;
	bo->epoch_end = b->epoch_end;
	bo->nvalid = 0;
	for (uint32_t c = 0; c < b->cores; c++)
		bo->nvalid += b->core[c].nvalid;
	bo->block = (uintptr_t)b->core[0].block;
	bo->block_bytes = b->core[0].block_bytes;
	return (PyObject *)bo;
}

static void batch_dealloc(pf_ext_batch *bo)
{
	Py_CLEAR(bo->slot);
	Py_CLEAR(bo->loader);
	PyObject_Free(bo);
}

static bool live(pf_ext_batch *bo)
{
	if (bo->slot)
		return true;
	PyErr_SetString(PyExc_ValueError,
			"this batch was released (batch.release() or the end of `with "
			"batch:`); arrays taken before stay valid, new ones cannot be taken");
	return false;
}

/* The index of feature name, or -1 with KeyError naming the features. */
static Py_ssize_t feature_index(pf_ext_batch *bo, PyObject *name)
{
	PyObject *names = bo->loader->names;
	Py_ssize_t n = names ? PyTuple_GET_SIZE(names) : 0;

	for (Py_ssize_t i = 0; i < n; i++)
		if (PyTuple_GET_ITEM(names, i) == name)
			return i;
	if (!PyUnicode_Check(name)) {
		PyErr_Format(PyExc_TypeError, "name: a feature name is a str, not %.100s",
			     Py_TYPE(name)->tp_name);
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		int eq = PyUnicode_Compare(PyTuple_GET_ITEM(names, i), name);

		if (eq == 0)
			return i;
		if (eq == -1 && PyErr_Occurred())
			return -1;
	}
	PyErr_Format(PyExc_KeyError, "no feature %R in this batch (features: %R)", name,
		     names);
	return -1;
}

/* Shape and byte strides of feature f: [cores, per_core_batch, *record]
 * over every core (core < 0), or one core's [per_core_batch, *record];
 * a record is [len], or an image's [H, W, C] (pf_loader_feature_shape()). */
static int feature_layout(pf_ext_batch *bo, Py_ssize_t f, long core, void **data,
			  npy_intp *dims, npy_intp *strides)
{
	const pf_batch *b = bo->b;
	const pf_ext_loader *lo = bo->loader;
	const pf_tensor *t = &b->core[core < 0 ? 0 : core].tensors[f];
	npy_intp item = lo->fitem[f], row = item;
	int nd = 0, rd = lo->fnd[f];

	for (int k = 0; k < rd; k++)
		row *= lo->fshape[f][k];
	if (core < 0) {
		dims[nd] = b->cores;
		strides[nd++] = (npy_intp)bo->block_bytes;
	}
	dims[nd] = b->per_core_batch;
	strides[nd++] = row;
	for (int k = 0; k < rd; k++) {
		row /= lo->fshape[f][k];
		dims[nd] = lo->fshape[f][k];
		strides[nd++] = row;
	}
	*data = t->data;
	return nd;
}

static PyObject *make_array(pf_ext_batch *bo, Py_ssize_t f, long core)
{
	npy_intp dims[PF_EXT_MAX_DIMS], strides[PF_EXT_MAX_DIMS];
	void *data;
	int nd = feature_layout(bo, f, core, &data, dims, strides);
	PyArray_Descr *d = (PyArray_Descr *)PyTuple_GET_ITEM(bo->loader->dtypes, f);
	PyObject *a;

	Py_INCREF(d);	/* PyArray_NewFromDescr takes it */
	a = PyArray_NewFromDescr(&PyArray_Type, d, nd, dims, strides, data,
				 NPY_ARRAY_WRITEABLE | NPY_ARRAY_ALIGNED, NULL);
	if (!a)
		return NULL;
	/* The array keeps the slot (not the batch) alive: the memory goes
	 * back to the loader when the batch and the last array are gone. */
	if (PyArray_SetBaseObject((PyArrayObject *)a, Py_NewRef((PyObject *)bo->slot)) < 0) {
		Py_DECREF(a);
		return NULL;
	}
	return a;
}

static PyObject *batch_getitem(pf_ext_batch *bo, PyObject *name)
{
	Py_ssize_t f;

	if (!live(bo))
		return NULL;
	f = feature_index(bo, name);
	return f < 0 ? NULL : make_array(bo, f, -1);
}

static Py_ssize_t batch_length(pf_ext_batch *bo)
{
	return bo->loader->names ? PyTuple_GET_SIZE(bo->loader->names) : 0;
}

static int batch_contains(pf_ext_batch *bo, PyObject *name)
{
	PyObject *names = bo->loader->names;

	return names ? PySequence_Contains(names, name) : 0;
}

static PyObject *batch_keys(pf_ext_batch *bo, PyObject *unused)
{
	(void)unused;
	return PySequence_List(bo->loader->names);
}

static PyObject *batch_iter(pf_ext_batch *bo)
{
	return PyObject_GetIter(bo->loader->names);
}

static PyObject *items(pf_ext_batch *bo, long core)
{
	PyObject *d;

	if (!live(bo))
		return NULL;
	d = PyDict_New();
	for (Py_ssize_t f = 0; d && f < batch_length(bo); f++) {
		PyObject *a = make_array(bo, f, core);

		if (!a || PyDict_SetItem(d, PyTuple_GET_ITEM(bo->loader->names, f), a) < 0)
			Py_CLEAR(d);
		Py_XDECREF(a);
	}
	return d;
}

static PyObject *batch_items(pf_ext_batch *bo, PyObject *unused)
{
	PyObject *d = items(bo, -1), *out;

	(void)unused;
	if (!d)
		return NULL;
	out = PyMapping_Items(d);
	Py_DECREF(d);
	return out;
}

static PyObject *batch_asdict(pf_ext_batch *bo, PyObject *unused)
{
	(void)unused;
	return items(bo, -1);
}

/* The core index arg names, checked against the batch's cores: 0 with
 * *core set, or -1 with TypeError / IndexError naming the argument. */
static int core_index(pf_ext_batch *bo, PyObject *arg, long *core)
{
	long c;

	if (PyBool_Check(arg) || !PyIndex_Check(arg)) {
		PyErr_Format(PyExc_TypeError, "core: expected an int, not %.100s",
			     Py_TYPE(arg)->tp_name);
		return -1;
	}
	c = PyLong_AsLong(arg);
	if (c == -1 && PyErr_Occurred())
		return -1;
	if (c < 0 || c >= (long)bo->b->cores) {
		PyErr_Format(PyExc_IndexError, "core: %ld is not a core of this batch "
			     "(0..%u)", c, bo->b->cores - 1);
		return -1;
	}
	*core = c;
	return 0;
}

static PyObject *batch_core(pf_ext_batch *bo, PyObject *arg)
{
	long c;

	if (!live(bo) || core_index(bo, arg, &c) < 0)
		return NULL;
	return items(bo, c);
}

static PyObject *batch_release(pf_ext_batch *bo, PyObject *unused)
{
	(void)unused;
	Py_CLEAR(bo->slot);
	Py_RETURN_NONE;
}

static PyObject *batch_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	return Py_NewRef(self);
}

static PyObject *batch_exit(pf_ext_batch *bo, PyObject *args)
{
	(void)args;
	Py_CLEAR(bo->slot);
	Py_RETURN_FALSE;
}

/* ------------------------------------------------------------------ */
/* DLPack (https://dmlc.github.io/dlpack/latest/python_spec.html)       */

/* The unversioned DLPack ABI (dlpack.h 0.8), as the "dltensor" capsule
 * carries it. */
typedef struct {
	int32_t device_type;	/* kDLCPU = 1 */
	int32_t device_id;
} dl_device;

typedef struct {
	uint8_t code;		/* kDLInt 0, kDLUInt 1, kDLFloat 2 */
	uint8_t bits;
	uint16_t lanes;
} dl_dtype;

typedef struct {
	void *data;
	dl_device device;
	int32_t ndim;
	dl_dtype dtype;
	int64_t *shape;
	int64_t *strides;	/* in elements */
	uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed {
	dl_tensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(struct dl_managed *self);
} dl_managed;

/* A managed tensor, its shape and strides in one allocation. */
typedef struct {
	dl_managed m;
	int64_t shape[PF_EXT_MAX_DIMS], strides[PF_EXT_MAX_DIMS];
} dl_block;

typedef struct pf_ext_tensor {
	PyObject_HEAD
	pf_ext_slot *slot;	/* strong */
	void *data;
	int ndim;
	npy_intp shape[PF_EXT_MAX_DIMS], strides[PF_EXT_MAX_DIMS];	/* strides in bytes */
	uint8_t item;		/* bytes an element */
	char kind;		/* 'i', 'u', 'f', 'b' (pf_ext_loader.fkind) */
} pf_ext_tensor;

/* The consumer is done with the tensor: drop the slot reference it held.
 * Consumers may call this from any thread, with or without the GIL. */
static void dl_deleter(dl_managed *m)
{
	PyGILState_STATE g = PyGILState_Ensure();

	Py_XDECREF((PyObject *)m->manager_ctx);
	PyMem_RawFree(m);
	PyGILState_Release(g);
}

/* A capsule no consumer took still owns its tensor; one renamed
 * "used_dltensor" was taken, and its consumer calls the deleter. */
static void dl_capsule_destructor(PyObject *cap)
{
	PyObject *type, *value, *tb;
	dl_managed *m;

	if (PyCapsule_IsValid(cap, "used_dltensor"))
		return;
	PyErr_Fetch(&type, &value, &tb);
	m = PyCapsule_GetPointer(cap, "dltensor");
	if (m)
		m->deleter(m);
	else
		PyErr_WriteUnraisable(cap);
	PyErr_Restore(type, value, tb);
}

static PyObject *tensor_dlpack(pf_ext_tensor *t, PyObject *args, PyObject *kw)
{
	static char *names[] = { "stream", "max_version", "dl_device", "copy", NULL };
	PyObject *stream = Py_None, *max_version = Py_None, *device = Py_None;
	PyObject *copy = Py_None, *cap;
	size_t item = t->item;
	dl_block *d;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO", names, &stream,
					 &max_version, &device, &copy))
		return NULL;
	(void)max_version;	/* the unversioned capsule is what we make */
	if (stream != Py_None)
		return PyErr_Format(PyExc_BufferError,
				    "stream: a CPU tensor takes no stream, not %R", stream);
	if (copy == Py_True)
		return PyErr_Format(PyExc_BufferError,
				    "copy=True: podfeed exports its own memory only");
	if (device != Py_None) {
		PyObject *cpu = Py_BuildValue("(ii)", 1, 0);
		int same = cpu ? PyObject_RichCompareBool(device, cpu, Py_EQ) : -1;

		Py_XDECREF(cpu);
		if (same < 0)
			return NULL;
		if (!same)
			return PyErr_Format(PyExc_BufferError,
					    "dl_device: the memory is on the CPU, (1, 0), "
					    "not %R", device);
	}
	d = PyMem_RawCalloc(1, sizeof(*d));
	if (!d)
		return PyErr_NoMemory();
	for (int i = 0; i < t->ndim; i++) {
		d->shape[i] = t->shape[i];
		d->strides[i] = t->strides[i] / (npy_intp)item;
	}
	d->m.dl_tensor = (dl_tensor){
		.data = t->data,
		.device = { .device_type = 1, .device_id = 0 },
		.ndim = t->ndim,
		.dtype = {
			/* kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4 */
			.code = t->kind == 'f' ? 2 : t->kind == 'u' ? 1 : t->kind == 'b' ? 4 : 0,
			.bits = (uint8_t)(item * 8), .lanes = 1,
		},
		.shape = d->shape,
		.strides = d->strides,
	};
	d->m.manager_ctx = Py_NewRef((PyObject *)t->slot);
	d->m.deleter = dl_deleter;
	cap = PyCapsule_New(&d->m, "dltensor", dl_capsule_destructor);
	if (!cap) {
		Py_DECREF(t->slot);
		PyMem_RawFree(d);
	}
	return cap;
}

static PyObject *tensor_dlpack_device(pf_ext_tensor *t, PyObject *unused)
{
	(void)t;
	(void)unused;
	return Py_BuildValue("(ii)", 1, 0);	/* kDLCPU, device 0 */
}

static PyObject *tensor_array_interface(pf_ext_tensor *t, void *unused)
{
	/* numpy has no bfloat16: its bits, as uint16. */
	const char *typestr = t->kind == 'f' ? "<f4" : t->kind == 'u' ? "|u1"
			    : t->kind == 'b' ? "<u2" : t->item == 8 ? "<i8" : "<i4";
	PyObject *shape = PyTuple_New(t->ndim), *strides = PyTuple_New(t->ndim);

	(void)unused;
	for (int i = 0; shape && strides && i < t->ndim; i++) {
		PyTuple_SET_ITEM(shape, i, PyLong_FromSsize_t(t->shape[i]));
		PyTuple_SET_ITEM(strides, i, PyLong_FromSsize_t(t->strides[i]));
	}
	if (!shape || !strides) {
		Py_XDECREF(shape);
		Py_XDECREF(strides);
		return NULL;
	}
	return Py_BuildValue("{sNsssNs(NO)si}", "shape", shape,
			     "typestr", typestr, "strides", strides,
			     "data", PyLong_FromVoidPtr(t->data), Py_False, "version", 3);
}

static PyObject *tensor_shape(pf_ext_tensor *t, void *unused)
{
	PyObject *shape = PyTuple_New(t->ndim);

	(void)unused;
	for (int i = 0; shape && i < t->ndim; i++)
		PyTuple_SET_ITEM(shape, i, PyLong_FromSsize_t(t->shape[i]));
	return shape;
}

static void tensor_dealloc(pf_ext_tensor *t)
{
	Py_CLEAR(t->slot);
	PyObject_Free(t);
}

static PyMethodDef tensor_methods[] = {
	{ "__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack,
	  METH_VARARGS | METH_KEYWORDS,
	  "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n"
	  "--\n\n"
	  "A \"dltensor\" capsule over the loader's memory (no copy); it keeps\n"
	  "the batch's memory alive until its consumer is done.  stream must be\n"
	  "None (CPU memory), dl_device None or (1, 0), copy not True." },
	{ "__dlpack_device__", (PyCFunction)tensor_dlpack_device, METH_NOARGS,
	  "__dlpack_device__($self, /)\n--\n\n(1, 0): CPU memory, device 0." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef tensor_getset[] = {
	{ "__array_interface__", (getter)tensor_array_interface, NULL,
	  "numpy's array interface (np.asarray(t) is a view, no copy).", NULL },
	{ "shape", (getter)tensor_shape, NULL, "The shape.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject pf_ext_tensor_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "podfeed.Tensor",
	.tp_basicsize = sizeof(pf_ext_tensor),
	.tp_dealloc = (destructor)tensor_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One feature of a batch as a DLPack producer: torch.from_dlpack(t)\n"
		  "and jax.dlpack.from_dlpack(t) take it without a copy.  It keeps the\n"
		  "batch's memory alive, as a numpy view does.",
	.tp_methods = tensor_methods,
	.tp_getset = tensor_getset,
};

static PyObject *batch_tensor(pf_ext_batch *bo, PyObject *args, PyObject *kw)
{
	static char *names[] = { "name", "core", NULL };
	PyObject *name, *core_obj = Py_None;
	long core = -1;
	Py_ssize_t f;
	pf_ext_tensor *t;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", names, &name, &core_obj))
		return NULL;
	if (!live(bo))
		return NULL;
	f = feature_index(bo, name);
	if (f < 0)
		return NULL;
	if (core_obj != Py_None && core_index(bo, core_obj, &core) < 0)
		return NULL;
	t = PyObject_New(pf_ext_tensor, &pf_ext_tensor_type);
	if (!t)
		return NULL;
	t->slot = (pf_ext_slot *)Py_NewRef((PyObject *)bo->slot);
	t->ndim = feature_layout(bo, f, core, &t->data, t->shape, t->strides);
	t->item = bo->loader->fitem[f];
	t->kind = bo->loader->fkind[f];
	return (PyObject *)t;
}

/* ------------------------------------------------------------------ */
/* Batch attributes                                                     */

static PyObject *get_valid(pf_ext_batch *bo, void *unused)
{
	npy_intp dims[2];
	PyObject *a;

	(void)unused;
	if (!live(bo))
		return NULL;
	dims[0] = bo->b->cores;
	dims[1] = bo->b->per_core_batch;
	a = PyArray_New(&PyArray_Type, 2, dims, NPY_BOOL, NULL,
			(void *)bo->b->core[0].valid, 0, NPY_ARRAY_CARRAY_RO, NULL);
	if (a && PyArray_SetBaseObject((PyArrayObject *)a,
				       Py_NewRef((PyObject *)bo->slot)) < 0)
		Py_CLEAR(a);
	return a;
}

static PyObject *get_u64(uint64_t v)
{
	return PyLong_FromUnsignedLongLong(v);
}

static PyObject *get_epoch(pf_ext_batch *bo, void *u) { (void)u; return get_u64(bo->epoch); }
static PyObject *get_step(pf_ext_batch *bo, void *u) { (void)u; return get_u64(bo->step); }
static PyObject *get_global_step(pf_ext_batch *bo, void *u) { (void)u; return get_u64(bo->global_step); }
static PyObject *get_nvalid(pf_ext_batch *bo, void *u) { (void)u; return get_u64(bo->nvalid); }
static PyObject *get_epoch_start(pf_ext_batch *bo, void *u) { (void)u; return PyBool_FromLong(bo->epoch_start); }
static PyObject *get_epoch_end(pf_ext_batch *bo, void *u) { (void)u; return PyBool_FromLong(bo->epoch_end); }
static PyObject *get_released(pf_ext_batch *bo, void *u) { (void)u; return PyBool_FromLong(!bo->slot); }
static PyObject *get_cores(pf_ext_batch *bo, void *u) { (void)u; return get_u64(bo->loader->cores); }
static PyObject *get_pcb(pf_ext_batch *bo, void *u) { (void)u; return get_u64(bo->loader->per_core_batch); }

static PyObject *get_block(pf_ext_batch *bo, void *unused)
{
	(void)unused;
	return Py_BuildValue("(KK)", (unsigned long long)bo->block,
			     (unsigned long long)bo->block_bytes * bo->loader->cores);
}

static PyGetSetDef batch_getset[] = {
	{ "valid", (getter)get_valid, NULL,
	  "bool array [cores, per_core_batch]: False where a corrupt record left\n"
	  "a hole (on_corrupt='skip'); a read-only view.", NULL },
	{ "nvalid", (getter)get_nvalid, NULL, "Records in this batch (holes not counted).", NULL },
	{ "epoch", (getter)get_epoch, NULL, "Epoch, from 0.", NULL },
	{ "step", (getter)get_step, NULL, "Step within the epoch, from 0.", NULL },
	{ "global_step", (getter)get_global_step, NULL, "Steps since the start.", NULL },
	{ "epoch_start", (getter)get_epoch_start, NULL, "First step of its epoch.", NULL },
	{ "epoch_end", (getter)get_epoch_end, NULL, "Last step of its epoch.", NULL },
	{ "released", (getter)get_released, NULL, "Whether release() was called.", NULL },
	{ "cores", (getter)get_cores, NULL, "Cores (the arrays' first axis).", NULL },
	{ "per_core_batch", (getter)get_pcb, NULL, "Records per core.", NULL },
	{ "block", (getter)get_block, NULL,
	  "(address, bytes) of the loader's memory this batch's arrays lie in.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyMethodDef batch_methods[] = {
	{ "keys", (PyCFunction)batch_keys, METH_NOARGS,
	  "keys($self, /)\n--\n\nFeature names, in spec order." },
	{ "items", (PyCFunction)batch_items, METH_NOARGS,
	  "items($self, /)\n--\n\n[(name, array [cores, per_core_batch, len]), ...]" },
	{ "asdict", (PyCFunction)batch_asdict, METH_NOARGS,
	  "asdict($self, /)\n--\n\n{name: array [cores, per_core_batch, len]} (views, no copy)." },
	{ "core", (PyCFunction)batch_core, METH_O,
	  "core($self, core, /)\n--\n\n"
	  "{name: array [per_core_batch, len]}: core's views, each C-contiguous." },
	{ "tensor", (PyCFunction)(void (*)(void))batch_tensor, METH_VARARGS | METH_KEYWORDS,
	  "tensor($self, /, name, core=None)\n--\n\n"
	  "The feature name (of every core, or of core) as a podfeed.Tensor, a\n"
	  "DLPack producer: torch.from_dlpack(t) and jax.dlpack.from_dlpack(t)\n"
	  "take it without a copy." },
	{ "release", (PyCFunction)batch_release, METH_NOARGS,
	  "release($self, /)\n--\n\n"
	  "This batch is done.  Its memory goes back to the loader now,\n"
	  "or, when arrays taken from it are still alive, as soon as the last of\n"
	  "them is gone (they stay valid until then).  No new array can be taken." },
	{ "__enter__", batch_enter, METH_NOARGS, "__enter__($self, /)\n--\n\nThe batch." },
	{ "__exit__", (PyCFunction)batch_exit, METH_VARARGS,
	  "__exit__($self, *exc)\n--\n\nrelease()" },
	{ NULL, NULL, 0, NULL },
};

static PyMappingMethods batch_mapping = {
	.mp_length = (lenfunc)batch_length,
	.mp_subscript = (binaryfunc)batch_getitem,
};

static PySequenceMethods batch_sequence = {
	.sq_contains = (objobjproc)batch_contains,
};

static PyObject *batch_repr(pf_ext_batch *bo)
{
	return PyUnicode_FromFormat("<podfeed.Batch epoch %u step %llu: %u cores x %u "
				    "records, features %R%s>", bo->epoch,
				    (unsigned long long)bo->step, bo->loader->cores,
				    bo->loader->per_core_batch, bo->loader->names,
				    bo->slot ? "" : ", released");
}

PyTypeObject pf_ext_batch_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "podfeed.Batch",
	.tp_basicsize = sizeof(pf_ext_batch),
	.tp_dealloc = (destructor)batch_dealloc,
	.tp_repr = (reprfunc)batch_repr,
	.tp_as_sequence = &batch_sequence,
	.tp_as_mapping = &batch_mapping,
	.tp_iter = (getiterfunc)batch_iter,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc =
	"One host batch from podfeed.Loader.\n\n"
	"batch[name] is a numpy array [cores, per_core_batch, len] over the\n"
	"loader's own memory (no copy; bytes features are uint8).  Each core's\n"
	"rows are C-contiguous; the cores lie batch.block's stride apart, so the\n"
	"array is C-contiguous only when there is one core or one feature.\n"
	"batch.core(i) gives core i's arrays [per_core_batch, len], each one\n"
	"C-contiguous.  The memory goes back to the loader when the batch and\n"
	"every array taken from it are gone, or, for the batch, at release() /\n"
	"the end of `with batch:`.  Arrays alive then stay valid until they go.",
	.tp_methods = batch_methods,
	.tp_getset = batch_getset,
};
