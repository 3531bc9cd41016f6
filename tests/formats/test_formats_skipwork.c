/* SPDX-License-Identifier: Apache-2.0 */
/* Skip mode's work over damaged regions of growing size: the bytes the
 * TFRecord skip path hands to CRC32C (every offset it judges as a header,
 * every record it checks) grow in proportion to the stream, never faster.
 * They are counted by wrapping pf_crc32c at link time
 * (-Wl,--wrap=pf_crc32c, tests/meson.build): work, not time, so the test
 * holds on a busy machine.  Times are `pfbench skip` (docs/performance.md). */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "damage.h"
#include "pf_formats.h"
#include "testutil.h"

uint32_t __real_pf_crc32c(uint32_t crc, const void *data, size_t len);
uint32_t __wrap_pf_crc32c(uint32_t crc, const void *data, size_t len);

static uint64_t crc_bytes;

uint32_t __wrap_pf_crc32c(uint32_t crc, const void *data, size_t len)
{
	crc_bytes += len;
	return __real_pf_crc32c(crc, data, len);
}

#define EDGE 1	/* intact records before and after the damage */

/* Read p in skip mode (a reader fed `piece` bytes at a time, or the walker
 * when piece is 0) and check it gives what the stream holds.  @return the
 * CRC32C bytes it cost, per stream byte. */
static double work(const uint8_t *p, size_t len, size_t piece, const pf_damage_expect *x)
{
	pf_tfr_config cfg = { .max_record_size = 1u << 20, .on_corrupt = PF_CORRUPT_SKIP };
	static pf_drop drop;
	uint64_t records = 0, drops = 0;
	pf_tfr_reader *r;
	pf_record rec;
	pf_error err;
	size_t pos = 0;
	int ret;

	crc_bytes = 0;
	if (!piece) {
		while ((ret = pf_tfr_next_intact(p, len, &pos, 0, cfg.max_record_size, true, &rec,
						 &drop)) > 0)
			*(ret == 1 ? &records : &drops) += 1;
	} else {
		cr_assert_eq(pf_tfr_reader_create(&r, &cfg), 0);
		while (pos < len) {
			size_t n = len - pos < piece ? len - pos : piece;

			pf_tfr_reader_feed(r, p + pos, n);
			pos += n;
			if (pos == len)
				pf_tfr_reader_end(r);
			while ((ret = pf_tfr_reader_next(r, &rec, &err)) == 1)
				records++;
			cr_assert_eq(ret, 0, "%s", err.msg);
		}
		cr_assert_eq(pf_tfr_reader_finish(r, &err), 0, "%s", err.msg);
		drops = pf_tfr_reader_drops(r);
		pf_tfr_reader_free(r);
	}
	cr_assert_eq(records, x->records, "piece %zu: %llu records, not %llu", piece,
		     (unsigned long long)records, (unsigned long long)x->records);
	cr_assert_eq(drops, x->drops, "piece %zu: %llu drops, not %llu", piece,
		     (unsigned long long)drops, (unsigned long long)x->drops);
	return (double)crc_bytes / (double)len;
}

/* For damage of the kind in regions of 16 KiB to 1 MiB, read whole by the
 * walker and in pieces by the reader: the CRC bytes a stream byte stay
 * what they are at 16 KiB (within 10%: the intact edges weigh a little
 * less as the region grows), and, in pieces of 4 KiB or more, below most
 * (a header judged at every offset is 8 bytes, a record's data once
 * more).  In 7-byte pieces a record's header (and a bad one's data) is
 * judged again as each piece comes: more work a byte, but as much at
 * every size. */
static void linear(pf_damage_kind kind, double most)
{
	static const size_t pieces[] = { 0, 1 << 16, 4096, 7 };

	for (size_t pi = 0; pi < sizeof(pieces) / sizeof(pieces[0]); pi++) {
		double first = 0;

		for (size_t d = 16u << 10; d <= 1u << 20; d *= 4) {
			pf_damage_expect x;
			size_t len;
			uint8_t *p = pf_damage_stream(EDGE, d, kind, &len, &x);
			double w;

			cr_assert_not_null(p);
			w = work(p, len, pieces[pi], &x);
			free(p);
			if (d == 16u << 10)
				first = w;
			cr_log_info("%s, piece %zu, %zu damaged bytes: %.3f CRC bytes a byte",
				    pf_damage_names[kind], pieces[pi], x.damaged, w);
			cr_assert(pieces[pi] == 7 || w <= most, "%s, piece %zu, %zu bytes: %.2f CRC bytes a byte",
				      pf_damage_names[kind], pieces[pi], x.damaged, w);
			cr_assert_leq(w, first * 1.1,
				      "%s, piece %zu: %.3f CRC bytes a byte at %zu damaged bytes, "
				      "%.3f at 16 KiB",
				      pf_damage_names[kind], pieces[pi], w, x.damaged, first);
		}
	}
}

Test(skipwork, intact_stream_costs_its_crcs_once)
{
	linear(PF_DAMAGE_NONE, 1.2);
}

Test(skipwork, garbage_is_searched_in_linear_work)
{
	linear(PF_DAMAGE_GARBAGE, 12);
}

Test(skipwork, zeros_are_searched_in_linear_work)
{
	linear(PF_DAMAGE_ZEROS, 12);
}

Test(skipwork, bad_data_crcs_are_dropped_in_linear_work)
{
	linear(PF_DAMAGE_BAD_CRC, 3);
}

Test(skipwork, broken_framing_is_searched_in_linear_work)
{
	linear(PF_DAMAGE_SHIFTED, 12);
}
