/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the feature spec's tests (spec_util.h). */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "spec_util.h"

pf_spec *spec_new(void)
{
	pf_spec *s = calloc(1, sizeof(*s));

	cr_assert_not_null(s);
	return s;
}

pf_spec *parse_ok(const char *text)
{
	pf_spec *s = spec_new();
	pf_error err;
	int ret;

	pf_error_clear(&err);
	ret = pf_spec_parse(s, text, &err);
	cr_assert_eq(ret, 0, "'%s': %d (%s)", text, ret, err.msg);
	cr_assert_eq(err.code, 0);
	return s;
}
