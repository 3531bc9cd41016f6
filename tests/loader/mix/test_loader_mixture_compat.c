/* SPDX-License-Identifier: Apache-2.0 */
/* States of mixtures saved before the sources' batches were fitted to
 * their records resume bit for bit: their sources keep the batches they
 * were saved with (their share of 8 host batches), though a fresh run of
 * the same mixture now reads the small source in smaller ones.
 *
 * tests/loader/mix/mixture_compat_states.h holds states saved by the
 * library of 0.x before the fit (main at d95d2d8) and digests of the rows
 * each run then delivered to its end, written by this file built with
 * -DMS_GENERATE against that library:
 *   git -C <repo> archive d95d2d8 | tar -x -C /tmp/old
 *   cp tests/loader/mix/test_loader_mixture_compat.c \
 *       tests/loader/mix/mixsmall_util.[ch] /tmp/old/tests/
 *   (add test_loader_mixture_compat, with mixsmall_util.c and
 *   c_args -DMS_GENERATE, to /tmp/old/tests/meson.build's tests)
 *   meson setup /tmp/old/build /tmp/old && ninja -C /tmp/old/build
 *   MS_FIXTURE=$PWD/tests/loader/mix/mixture_compat_states.h \
 *       meson test -C /tmp/old/build test_loader_mixture_compat
 * The shards are made again here as they were there (tu_id_shards), so
 * the states' dataset fingerprints match. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixsmall_util.h"
#include "podfeed.h"
#include "testutil.h"

/* 600 records at 75% and 60 at 25% of 8 rows: batches of 48 and 16 rows
 * before the fit, of 48 and 7 (1 host) or 3 (2 hosts) since. */
static ms_mix compat_mix(pf_mix mode)
{
	ms_mix c = { .n = 2, .counts = { 600, 60 }, .w = { 0.75, 0.25 }, .hb = 8,
		     .mode = mode, .stop = PF_MIX_STOP_FIRST_SOURCE, .epochs = 2 };

	ms_make(&c);
	return c;
}

/* A run's rows: its steps, and each source's ids hashed in order. */
typedef struct rows_digest {
	uint64_t steps;
	uint64_t n[2];
	uint64_t hash[2];
} rows_digest;

static rows_digest digest_of(const ms_run *r)
{
	rows_digest d = { .steps = r->steps };

	for (size_t k = 0; k < 2; k++) {
		d.n[k] = r->n[k];
		d.hash[k] = 1469598103934665603ull;
		for (uint64_t j = 0; j < r->n[k]; j++)
			d.hash[k] = (d.hash[k] ^ r->ids[k][j]) * 1099511628211ull;
	}
	return d;
}

/* The three states: 1 host stopped after 10 steps, stratified and
 * sampled (the small source inside a batch); and 2 hosts stopped after
 * 7 steps resumed on 1 and stopped again after 1 step, inside the
 * bridge (the small source's next epochs' batch not yet used). */
static void make_state(int which, ms_run *out)
{
	ms_mix c = compat_mix(which == 1 ? PF_MIX_SAMPLE : PF_MIX_STRATIFIED);

	memset(out, 0, sizeof(*out));
	if (which < 2) {
		ms_run_host(&c, 0, 1, NULL, 0, 10, out);
	} else {
		ms_run old[2] = { 0 };
		pf_state_blob b[2];

		for (uint32_t x = 0; x < 2; x++) {
			ms_run_host(&c, x, 2, NULL, 0, 7, &old[x]);
			b[x] = (pf_state_blob){ old[x].state, old[x].state_len };
		}
		ms_run_host(&c, 0, 1, b, 2, 1, out);
		ms_run_free(&old[0]);
		ms_run_free(&old[1]);
	}
}

/* The run resumed from a state on 1 host, to its end. */
static rows_digest resumed(int which, const uint8_t *state, size_t len)
{
	ms_mix c = compat_mix(which == 1 ? PF_MIX_SAMPLE : PF_MIX_STRATIFIED);
	pf_state_blob sb = { state, len };
	ms_run r = { 0 };
	rows_digest d;

	ms_run_host(&c, 0, 1, &sb, 1, 0, &r);
	d = digest_of(&r);
	ms_run_free(&r);
	return d;
}

#ifdef MS_GENERATE

Test(mixture_compat, generate_the_fixture, .timeout = 120)
{
	const char *path = getenv("MS_FIXTURE");
	FILE *f;

	cr_assert_not_null(path, "MS_FIXTURE names the header to write");
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "/* SPDX-License-Identifier: Apache-2.0 */\n/* Written by "
		"tests/loader/mix/test_loader_mixture_compat.c built with -DMS_GENERATE against "
		"the library\n * of main at d95d2d8 (before the fit): do not edit. */\n");
	for (int w = 0; w < 3; w++) {
		ms_run s;
		rows_digest d;

		make_state(w, &s);
		d = resumed(w, s.state, s.state_len);
		fprintf(f, "static const uint8_t compat_state%d[%zu] = {", w, s.state_len);
		for (size_t i = 0; i < s.state_len; i++)
			fprintf(f, "%s0x%02x,", i % 12 ? " " : "\n\t", s.state[i]);
		fprintf(f, "\n};\nstatic const rows_digest compat_rows%d = { %llu, { %llu, %llu }, "
			"{ 0x%016llxull, 0x%016llxull } };\n", w, (unsigned long long)d.steps,
			(unsigned long long)d.n[0], (unsigned long long)d.n[1],
			(unsigned long long)d.hash[0], (unsigned long long)d.hash[1]);
		ms_run_free(&s);
	}
	cr_assert_eq(fclose(f), 0);
}

#else

#include "mixture_compat_states.h"

Test(mixture_compat, states_saved_before_the_fit_resume_bit_for_bit, .timeout = 120)
{
	static const struct {
		const uint8_t *state;
		size_t len;
		const rows_digest *rows;
	} fx[3] = { { compat_state0, sizeof(compat_state0), &compat_rows0 },
		    { compat_state1, sizeof(compat_state1), &compat_rows1 },
		    { compat_state2, sizeof(compat_state2), &compat_rows2 } };

	for (int w = 0; w < 3; w++) {
		rows_digest d = resumed(w, fx[w].state, fx[w].len), now;
		ms_run s;

		cr_assert_eq(d.steps, fx[w].rows->steps, "state %d: %llu steps, then %llu", w,
			     (unsigned long long)d.steps, (unsigned long long)fx[w].rows->steps);
		for (size_t k = 0; k < 2; k++) {
			cr_assert_eq(d.n[k], fx[w].rows->n[k], "state %d, source %zu: %llu rows, "
				     "then %llu", w, k, (unsigned long long)d.n[k],
				     (unsigned long long)fx[w].rows->n[k]);
			cr_assert_eq(d.hash[k], fx[w].rows->hash[k], "state %d, source %zu: "
				     "other rows than the library that saved it", w, k);
		}
		/* The same stop made now reads the small source in other
		 * batches: the rows after it differ, so the states above are
		 * resumed in the batches they say, not in the fitted ones. */
		make_state(w, &s);
		now = resumed(w, s.state, s.state_len);
		cr_assert_neq(now.hash[1], d.hash[1], "state %d: the small source's rows are "
			      "the same in fitted batches", w);
		ms_run_free(&s);
	}
}

#endif
