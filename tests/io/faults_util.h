/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the fault tests (test_io_faults, test_loader_faults;
 * never linked into the library): an engine on either back-end and one
 * request read through it. */
#ifndef PF_FAULTS_UTIL_H
#define PF_FAULTS_UTIL_H

#include <criterion/parameterized.h>
#include <stdint.h>

#include "pf_io.h"

/* The back-ends by index: "uring", "pread". */
extern const char *const ft_backend_names[2];

/* A parameterized test's parameters: the indexes 0 and 1 of
 * ft_backend_names (parameters cross into the test's own process by
 * value: indexes). */
struct criterion_test_params ft_both_backends(void);

/* Submit one request and wait for it.  @return its result. */
int64_t ft_read_one(pf_io *io, pf_io_req *r);

#endif
