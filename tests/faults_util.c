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

pf_io *ft_engine(const char *backend, pf_io_config cfg)
{
	pf_io *io;
	pf_error err;
	int ret;

	cfg.queue_depth = 16;
	cfg.backend = backend;
	pf_error_clear(&err);
	ret = pf_io_create(&io, &cfg, &err);
	if (ret == -EPERM || ret == -ENOSYS)
		cr_skip_test("io_uring is refused on this kernel (%s)", pf_strerror(ret));
	cr_assert_eq(ret, 0, "%s", err.msg);
	return io;
}

int64_t ft_read_one(pf_io *io, pf_io_req *r)
{
	pf_io_req *done[1];

	cr_assert_eq(pf_io_submit(io, r), 0);
	cr_assert_eq(pf_io_reap(io, done, 1, 1), 1);
	cr_assert_eq(done[0], r);
	return r->result;
}
