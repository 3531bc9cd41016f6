/* SPDX-License-Identifier: Apache-2.0 */
/* CRC32C: known vectors, SSE4.2 against the portable path, TFRecord mask. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"
#include "pf_formats.h"

Test(crc32c, known_vectors)
{
	uint8_t buf[32];

	cr_assert_eq(pf_crc32c(0, "123456789", 9), 0xE3069283u);
	cr_assert_eq(pf_crc32c_portable(0, "123456789", 9), 0xE3069283u);
	cr_assert_eq(pf_crc32c(0, "", 0), 0u);
	/* RFC 3720 (iSCSI) B.4 test patterns. */
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(pf_crc32c(0, buf, 32), 0x8A9136AAu);
	memset(buf, 0xff, sizeof(buf));
	cr_assert_eq(pf_crc32c(0, buf, 32), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	cr_assert_eq(pf_crc32c(0, buf, 32), 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	cr_assert_eq(pf_crc32c(0, buf, 32), 0x113FDB5Cu);
}

Test(crc32c, dispatch_matches_portable_at_every_length_and_alignment)
{
	size_t cap = 3 * 1024 * 4 + 64;
	uint8_t *buf = malloc(cap);
	uint32_t seed = 12345;

	cr_assert_not_null(buf);
	for (size_t i = 0; i < cap; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
	/* Lengths around the 3-way block size (3 x 1024) and its multiples. */
	size_t lens[] = { 0, 1, 7, 8, 9, 63, 64, 1023, 3071, 3072, 3073, 6144,
			  6151, 9216, 12288 };
	for (size_t a = 0; a < 8; a++)
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			size_t len = lens[k];
			if (a + len > cap)
				continue;
			cr_assert_eq(pf_crc32c(0, buf + a, len),
				     pf_crc32c_portable(0, buf + a, len),
				     "align %zu len %zu", a, len);
		}
	free(buf);
}

Test(crc32c, chaining_equals_one_pass)
{
	uint8_t buf[10000];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	uint32_t whole = pf_crc32c(0, buf, sizeof(buf));
	for (size_t cut = 0; cut <= sizeof(buf); cut += 997) {
		uint32_t c = pf_crc32c(0, buf, cut);
		cr_assert_eq(pf_crc32c(c, buf + cut, sizeof(buf) - cut), whole,
			     "cut at %zu", cut);
	}
}

Test(crc32c, tfrecord_mask)
{
	/* grain_morris_sequence_first_5.tfrecord record 0: length 1. */
	uint8_t len8[8] = { 1, 0, 0, 0, 0, 0, 0, 0 };

	cr_assert_eq(pf_crc32c_mask(pf_crc32c(0, len8, 8)), 0x41de7501u);
	cr_assert_eq(pf_crc32c_mask(pf_crc32c(0, "1", 1)), 0xd64a0cc3u);
	for (uint32_t v = 0; v < 100000; v += 7)
		cr_assert_eq(pf_crc32c_unmask(pf_crc32c_mask(v * 2654435761u)),
			     v * 2654435761u);
}

Test(crc32c, implementation_is_named)
{
	const char *impl = pf_crc32c_impl();

	cr_assert(!strcmp(impl, "sse4.2") || !strcmp(impl, "portable"), "%s", impl);
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2"))
		cr_assert_str_eq(impl, "sse4.2");
#endif
}
