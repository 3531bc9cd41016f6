/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz harness: loader checkpoints (loader/state.c).
 *
 * The first byte picks how the rest is used:
 *   even  as a whole blob (envelope, CRC, version, then the payload);
 *   odd   as a payload, wrapped in a correct envelope, so that the
 *         protobuf parse and the field checks are reached past the CRC;
 *         with bit 1 set too, a mixture's ("PFMX") envelope.
 * A whole blob is read as either kind of state.
 * The harness aborts when a refusal comes without a message, or when a
 * state that decodes does not survive encode -> decode unchanged. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "fuzz_state: %s:%d: %s\n", __FILE__, \
				__LINE__, #cond);                            \
			abort();                                             \
		}                                                            \
	} while (0)

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* A packing loader's parts, field by field. */
static bool same_pack(const pf_state *a, const pf_state *b)
{
	const struct pf_pack_state *p = &a->pack, *q = &b->pack;

	if (a->has_pack != b->has_pack)
		return false;
	if (!a->has_pack)
		return true;
	if (p->length != q->length || p->mode != q->mode || p->pool != q->pool ||
	    p->nf != q->nf || memcmp(&p->saver, &q->saver, sizeof(p->saver)) ||
	    p->step != q->step || p->global_step != q->global_step || p->ahead != q->ahead ||
	    p->next_row != q->next_row || p->nopen != q->nopen ||
	    p->epoch_steps != q->epoch_steps || p->epoch_rows != q->epoch_rows ||
	    p->step_base != q->step_base)
		return false;
	for (uint32_t r = 0; r < p->nopen; r++)
		if (p->id[r] != q->id[r] || p->segments[r] != q->segments[r] ||
		    memcmp(p->fill[r], q->fill[r], p->nf * sizeof(p->fill[r][0])))
			return false;
	return true;
}

static bool same(const pf_state *a, const pf_state *b)
{
	return a->fingerprint == b->fingerprint && a->records == b->records &&
	       a->seed == b->seed && a->shuffle == b->shuffle &&
	       a->remainder == b->remainder && !memcmp(&a->saver, &b->saver, sizeof(a->saver)) &&
	       a->block == b->block && a->epoch == b->epoch && a->fresh == b->fresh &&
	       a->step_in_epoch == b->step_in_epoch && a->global_step == b->global_step &&
	       !memcmp(&a->origin, &b->origin, sizeof(a->origin)) &&
	       a->origin_block == b->origin_block && a->origin_permute == b->origin_permute &&
	       a->npieces == b->npieces &&
	       (!a->npieces || !memcmp(a->pieces, b->pieces, a->npieces * sizeof(*a->pieces))) &&
	       same_pack(a, b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A mixture's state (mixture.c's checkpoint): refused with a message, or
 * the same after encode -> decode. */
static int mixture(const uint8_t *blob, size_t len)
{
	pf_mix_state s, t;
	pf_error err;
	uint8_t *again;
	int64_t n;
	int ret;

	pf_error_clear(&err);
	ret = pf_mix_state_decode(&s, blob, len, &err);
	CHECK(ret == 0 || ((ret == -EBADMSG || ret == -EPROTONOSUPPORT || ret == -ENOMEM) &&
			   err.code == ret && err.msg[0]));
	if (ret < 0)
		return ret;
	n = pf_mix_state_encode(&s, NULL, 0);
	CHECK(n > 0);
	again = malloc((size_t)n);
	CHECK(again);
	CHECK(pf_mix_state_encode(&s, again, (size_t)n) == n);
	CHECK(pf_mix_state_decode(&t, again, (size_t)n, &err) == 0);
	CHECK(t.digest == s.digest && t.next_step == s.next_step && t.nsources == s.nsources &&
	      t.host_index == s.host_index && t.num_hosts == s.num_hosts);
	for (size_t i = 0; i < s.nsources; i++) {
		CHECK(t.sources[i].consumed == s.sources[i].consumed &&
		      t.sources[i].state_len == s.sources[i].state_len &&
		      !memcmp(t.sources[i].state, s.sources[i].state, s.sources[i].state_len));
		CHECK(t.sources[i].bridge_batch == s.sources[i].bridge_batch &&
		      t.sources[i].bridge_epoch == s.sources[i].bridge_epoch &&
		      t.sources[i].whole_batch == s.sources[i].whole_batch &&
		      t.sources[i].npending == s.sources[i].npending);
		for (size_t j = 0; j < s.sources[i].npending; j++)
			CHECK(t.sources[i].pending_len[j] == s.sources[i].pending_len[j] &&
			      !memcmp(t.sources[i].pending[j], s.sources[i].pending[j],
				      s.sources[i].pending_len[j]));
	}
	pf_mix_state_release(&t);
	pf_mix_state_release(&s);
	free(again);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pf_state s, t;
	pf_state_info info;
	pf_error err;
	uint8_t *blob, *again;
	size_t len;
	int64_t n;
	int ret;

	if (size < 1 || size > (1u << 20))
		return 0;
	if (data[0] & 1) {
		len = PF_STATE_HEADER + size - 1;
		blob = malloc(len);
		CHECK(blob);
		memcpy(blob, data[0] & 2 ? "PFMX" : "PFST", 4);
		put_le32(blob + 4, PF_STATE_VERSION);
		put_le32(blob + 8, (uint32_t)(size - 1));
		put_le32(blob + 12, pf_crc32c(0, data + 1, size - 1));
		memcpy(blob + PF_STATE_HEADER, data + 1, size - 1);
	} else {
		len = size - 1;
		blob = malloc(len ? len : 1);
		CHECK(blob);
		memcpy(blob, data + 1, len);
	}
	if (len >= 4 && !memcmp(blob, "PFMX", 4)) {
		ret = mixture(blob, len);
		CHECK((pf_state_inspect(blob, len, &info, &err) == 0) == (ret == 0));
		free(blob);
		return 0;
	}
	pf_error_clear(&err);
	ret = pf_state_decode(&s, blob, len, &err);
	CHECK(ret == 0 || ((ret == -EBADMSG || ret == -EPROTONOSUPPORT || ret == -ENOMEM) &&
			   err.code == ret && err.msg[0]));
	CHECK((pf_state_inspect(blob, len, &info, &err) == 0) == (ret == 0));
	if (ret == 0) {
		CHECK(info.records_left == pf_state_remaining(&s));
		CHECK(info.pack_length == (s.has_pack ? s.pack.length : 0));
		CHECK(!s.has_pack || (s.pack.nopen <= s.pack.pool && s.pack.next_row <=
				      s.pack.step * s.pack.saver.cores * s.pack.saver.per_core_batch));
		n = pf_state_encode(&s, NULL, 0);
		CHECK(n > 0);
		again = malloc((size_t)n);
		CHECK(again);
		CHECK(pf_state_encode(&s, again, (size_t)n) == n);
		CHECK(pf_state_decode(&t, again, (size_t)n, &err) == 0);
		CHECK(same(&s, &t));
		pf_state_release(&t);
		free(again);
		pf_state_release(&s);
	}
	free(blob);
	return 0;
}
