/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
Test(placeholder, builds) { cr_assert_eq(1 + 1, 2); }
