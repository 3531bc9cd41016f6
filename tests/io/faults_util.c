/* SPDX-License-Identifier: Apache-2.0 */
/* The fault tests' shared helpers (faults_util.h). */
#include <criterion/criterion.h>
#include <errno.h>

#include "faults_util.h"
#include "podfeed.h"

const char *const ft_backend_names[2] = { "uring", "pread" };

struct criterion_test_params ft_both_backends(void)
{
	static int which[] = { 0, 1 };
	return cr_make_param_array(int, which, 2);
}

int64_t ft_read_one(pf_io *io, pf_io_req *r)
{
	pf_io_req *done[1];

	cr_assert_eq(pf_io_submit(io, r), 0);
	cr_assert_eq(pf_io_reap(io, done, 1, 1), 1);
	cr_assert_eq(done[0], r);
	return r->result;
}
