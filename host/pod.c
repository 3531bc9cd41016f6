/* SPDX-License-Identifier: Apache-2.0 */
/* The pod: this process's place among the hosts, and the few collectives
 * the compute stage and the pod report need.
 *
 * Built with OpenMPI (meson feature `mpi`) and started by a launcher
 * (mpirun sets OMPI_COMM_WORLD_SIZE; PMI and PMIx launchers set PMI_SIZE
 * or PMIX_RANK), ranks are hosts and the collectives are MPI's, with
 * errors returned rather than aborting.  Otherwise the pod is this host
 * alone and every collective leaves its buffer as it is.  MPI is never
 * initialised for a process nobody launched as part of a pod: OpenMPI's
 * singleton start is slow and noisy, and there is nothing to talk to.
 *
 * Counts are size_t; MPI's are int, so long buffers go in pieces.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_internal.h"
#include "pf_host.h"

#ifdef PF_HAVE_MPI
#include <mpi.h>
#endif

struct pf_pod {
	uint32_t rank, size;
	bool mpi;		/* MPI is initialised and ours to finalise */
};

/* The largest piece one MPI call moves, in elements. */
#define PF_POD_PIECE ((size_t)INT_MAX / 16)

bool pf_pod_launched(void)
{
	return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") ||
	       getenv("PMIX_RANK");
}

#ifdef PF_HAVE_MPI
static int mpi_fail(pf_error *err, int rc, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
		len = 0;
	msg[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = 0;
	return pf_error_set(err, -EIO, PF_OFFSET_NONE, 0, "MPI %s failed: %s", what,
			    len ? msg : "unknown error");
}
#endif

int pf_pod_open(pf_pod **out, pf_error *err)
{
	pf_pod *p = pf_calloc(1, sizeof(*p));

	pf_error_clear(err);
	if (!p)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "out of memory opening the pod");
	p->size = 1;
	if (pf_pod_launched()) {
#ifdef PF_HAVE_MPI
		int provided, rank, size, rc;

		/* Only the thread that opened the pod calls MPI. */
		rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
		if (rc != MPI_SUCCESS) {
			pf_free(p);
			return mpi_fail(err, rc, "initialisation");
		}
		p->mpi = true;
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
		MPI_Comm_rank(MPI_COMM_WORLD, &rank);
		MPI_Comm_size(MPI_COMM_WORLD, &size);
		p->rank = (uint32_t)rank;
		p->size = (uint32_t)size;
#else
		pf_free(p);
		return pf_error_set(err, -ENOTSUP, PF_OFFSET_NONE, 0,
				    "started by an MPI launcher, but this program has no MPI "
				    "(libpodfeed.so never links it; podfeed's tools do when "
				    "built with -Dmpi=enabled and libopenmpi-dev)");
#endif
	}
	*out = p;
	return 0;
}

void pf_pod_close(pf_pod *p)
{
	if (!p)
		return;
#ifdef PF_HAVE_MPI
	if (p->mpi)
		MPI_Finalize();
#endif
	pf_free(p);
}

uint32_t pf_pod_rank(const pf_pod *p)
{
	return p->rank;
}

uint32_t pf_pod_size(const pf_pod *p)
{
	return p->size;
}

const char *pf_pod_transport(const pf_pod *p)
{
	return p->mpi ? "mpi" : "single";
}

#ifdef PF_HAVE_MPI
static int allreduce(pf_pod *p, void *buf, size_t n, size_t esize,
		     MPI_Datatype type, MPI_Op op, pf_error *err)
{
	for (size_t done = 0; done < n;) {
		size_t k = n - done < PF_POD_PIECE ? n - done : PF_POD_PIECE;
		int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + done * esize, (int)k,
				       type, op, MPI_COMM_WORLD);

		if (rc != MPI_SUCCESS)
			return mpi_fail(err, rc, "all-reduce");
		done += k;
	}
	(void)p;
	return 0;
}
#endif

int pf_pod_sum_f32(pf_pod *p, float *buf, size_t n, pf_error *err)
{
	pf_error_clear(err);
#ifdef PF_HAVE_MPI
	if (p->mpi)
		return allreduce(p, buf, n, sizeof(*buf), MPI_FLOAT, MPI_SUM, err);
#endif
	(void)p, (void)buf, (void)n, (void)err;
	return 0;
}

int pf_pod_sum_f64(pf_pod *p, double *buf, size_t n, pf_error *err)
{
	pf_error_clear(err);
#ifdef PF_HAVE_MPI
	if (p->mpi)
		return allreduce(p, buf, n, sizeof(*buf), MPI_DOUBLE, MPI_SUM, err);
#endif
	(void)p, (void)buf, (void)n, (void)err;
	return 0;
}

int pf_pod_or_u64(pf_pod *p, uint64_t *buf, size_t n, pf_error *err)
{
	pf_error_clear(err);
#ifdef PF_HAVE_MPI
	if (p->mpi)
		return allreduce(p, buf, n, sizeof(*buf), MPI_UINT64_T, MPI_BOR, err);
#endif
	(void)p, (void)buf, (void)n, (void)err;
	return 0;
}

int pf_pod_gather(pf_pod *p, const void *mine, size_t len, void *all, pf_error *err)
{
	pf_error_clear(err);
	if (len > (size_t)INT_MAX)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "gather of %zu bytes per host is too large", len);
#ifdef PF_HAVE_MPI
	if (p->mpi) {
		int rc = MPI_Gather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, 0,
				    MPI_COMM_WORLD);

		return rc == MPI_SUCCESS ? 0 : mpi_fail(err, rc, "gather");
	}
#endif
	(void)p;
	if (all && len)
		memcpy(all, mine, len);
	return 0;
}

int pf_pod_allgather(void *pod, const void *mine, size_t len, void *all, pf_error *err)
{
	pf_pod *p = pod;

	pf_error_clear(err);
	if (len > (size_t)INT_MAX)
		return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
				    "all-gather of %zu bytes per host is too large", len);
#ifdef PF_HAVE_MPI
	if (p->mpi) {
		int rc = MPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE,
				       MPI_COMM_WORLD);

		return rc == MPI_SUCCESS ? 0 : mpi_fail(err, rc, "all-gather");
	}
#endif
	(void)p;
	if (len)
		memcpy(all, mine, len);
	return 0;
}

int pf_pod_barrier(pf_pod *p, pf_error *err)
{
	pf_error_clear(err);
#ifdef PF_HAVE_MPI
	if (p->mpi) {
		int rc = MPI_Barrier(MPI_COMM_WORLD);

		return rc == MPI_SUCCESS ? 0 : mpi_fail(err, rc, "barrier");
	}
#endif
	(void)p, (void)err;
	return 0;
}
