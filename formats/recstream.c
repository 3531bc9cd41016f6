/* SPDX-License-Identifier: Apache-2.0 */
/* The record stream: the records of a whole file of any format, fed in
 * buffers as they are read: the format decided from its first bytes, the
 * codec (inflate.c) run into a window that the TFRecord reader reads.
 * What skip mode does when the codec fails is recstream_skip.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stream_internal.h"

#define PF_WINDOW_DEFAULT (256u << 10)

int pf_recstream_tell(pf_recstream *s, const pf_drop *d)
{
	s->reported++;
	return s->on_drop ? s->on_drop(s->on_drop_ctx, d) : 0;
}

/* The reader's drops, held while a sniffed codec is on trial. */
static int reader_drop(void *ctx, const pf_drop *d)
{
	pf_recstream *s = ctx;

	if (!s->sniff_trial)
		return pf_recstream_tell(s, d);
	if (s->nheld < PF_HELD_DROPS)
		s->held[s->nheld++] = *d;
	else
		s->held_over = true;
	return 0;
}

/* The sniffed codec holds: tell the drops held meanwhile. */
int pf_recstream_confirm(pf_recstream *s, pf_error *err)
{
	int ret = 0, i;

	s->sniff_trial = false;
	for (i = 0; i < s->nheld && ret >= 0; i++)
		ret = pf_recstream_tell(s, &s->held[i]);
	if (ret < 0) {
		s->deferred = ret;
		s->deferred_err = s->held[i - 1].cause;
		s->deferred_err.code = ret;
		if (err)
			*err = s->deferred_err;
	}
	s->nheld = 0;
	return ret;
}

int pf_recstream_create(pf_recstream **out, const pf_recstream_config *cfg)
{
	pf_tfr_config tcfg = { 0 };
	pf_recstream *s = pf_calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	s->max_record = cfg && cfg->max_record_size ? cfg->max_record_size
						    : PF_MAX_RECORD_DEFAULT;
	s->window_cap = cfg && cfg->window ? cfg->window : PF_WINDOW_DEFAULT;
	s->comp = -1;
	tcfg.max_record_size = s->max_record;
	if (cfg) {
		tcfg.on_corrupt = cfg->on_corrupt;
		tcfg.on_drop = reader_drop;
		tcfg.on_drop_ctx = s;
		s->skip = cfg->on_corrupt == PF_CORRUPT_SKIP;
		s->on_drop = cfg->on_drop;
		s->on_drop_ctx = cfg->on_drop_ctx;
	}
	ret = pf_tfr_reader_create(&s->reader, &tcfg);
	if (ret < 0) {
		pf_free(s);
		return ret;
	}
	*out = s;
	return 0;
}

void pf_recstream_free(pf_recstream *s)
{
	if (!s)
		return;
	pf_inflate_free(s->inflate);
	pf_tfr_reader_free(s->reader);
	pf_free(s->window);
	pf_free(s->hist);
	pf_free(s->held);
	pf_free(s);
}

void pf_recstream_feed(pf_recstream *s, const void *buf, size_t len)
{
	if (len == 0) {
		s->eof = true;
		return;
	}
	s->src[0] = buf;
	s->src_len[0] = len;
	s->src_pos[0] = 0;
	s->src_off[0] = s->fed;
	s->fed += len;
	s->nsrc = 1;
	s->cur = 0;
}

pf_compression pf_recstream_compression(const pf_recstream *s)
{
	return s->comp < 0 ? PF_COMP_NONE : (pf_compression)s->comp;
}

uint64_t pf_recstream_total_out(const pf_recstream *s)
{
	return s->total_out;
}

uint64_t pf_recstream_drops(const pf_recstream *s)
{
	return s->reported;
}

/* The decoder of codec c and the decompression window, made when not
 * there yet (kept across a second decision after -ENOMEM). */
int pf_recstream_make_decoder(pf_recstream *s, pf_compression c, pf_error *err)
{
	int ret = s->inflate ? 0 : pf_inflate_create(&s->inflate, c);

	if (ret < 0)
		return pf_error_set(err, ret, PF_OFFSET_NONE, 0, "cannot create a %s decoder",
				    pf_compression_name(c));
	if (!s->window)
		s->window = pf_malloc(s->window_cap);
	if (!s->window)
		return pf_error_set(err, -ENOMEM, PF_OFFSET_NONE, 0,
				    "no memory for the decompression window");
	return 0;
}

/* Gather the first bytes and decide the format.  @return 1 when decided,
 * 0 when more bytes are needed, <0 on error. */
static int detect(pf_recstream *s, pf_error *err)
{
	if (s->nsrc) {
		size_t take = PF_DETECT_BYTES - s->stash_len;
		size_t avail = s->src_len[0] - s->src_pos[0];

		if (take > avail)
			take = avail;
		memcpy(s->stash + s->stash_len, s->src[0] + s->src_pos[0], take);
		s->stash_len += take;
		s->src_pos[0] += take;
	}
	if (s->stash_len < PF_DETECT_BYTES && !s->eof)
		return 0;

	int c = pf_compression_detect(s->stash, s->stash_len);
	/* Neither a TFRecord header nor a codec's magic: read it as a
	 * TFRecord so the error is the precise one ("bad length CRC at
	 * byte 0"). */
	if (c < 0) {
		c = PF_COMP_NONE;
		/* Skip mode: damage at byte 0 may hide a codec's magic;
		 * look for one until a record comes out. */
		s->sniffing = s->skip;
	}
	/* The format counts as decided only once its decoder exists: after
	 * -ENOMEM a later call decides again and makes what is missing. */
	if (c != PF_COMP_NONE) {
		int ret = pf_recstream_make_decoder(s, (pf_compression)c, err);

		if (ret < 0)
			return ret;
	}
	s->comp = c;
	/* Process the stash first, then whatever is left of the feed. */
	s->src[1] = s->src[0];
	s->src_len[1] = s->src_len[0];
	s->src_pos[1] = s->src_pos[0];
	s->src_off[1] = s->src_off[0];
	s->src[0] = s->stash;
	s->src_len[0] = s->stash_len;
	s->src_pos[0] = 0;
	s->src_off[0] = 0;
	s->cur = 0;
	s->nsrc = s->nsrc ? 2 : 1;
	if (c == PF_COMP_NONE && !s->sniffing) {
		pf_tfr_reader_feed(s->reader, s->stash, s->stash_len);
		s->src_pos[0] = s->stash_len;
		s->total_out += s->stash_len;
	}
	return 1;
}

int pf_recstream_next(pf_recstream *s, pf_record *rec, pf_error *err)
{
	int ret;

	pf_error_clear(err);
	if (s->comp < 0) {
		ret = detect(s, err);
		if (ret <= 0)
			return ret;
	}
	for (;;) {
		ret = pf_tfr_reader_next(s->reader, rec, err);
		if (ret == 1 && s->sniff_trial) {
			/* A record from the sniffed codec: it holds; what was
			 * dropped before this record is told first. */
			int r2 = pf_recstream_confirm(s, err);
			if (r2 < 0)
				return r2;
		}
		if (ret != 0)
			return ret;
		if (s->deferred) {
			if (err)
				*err = s->deferred_err;
			return s->deferred;
		}
		if (s->skip) {
			ret = pf_recstream_skip_step(s, err);
			if (ret == 1)
				continue;
			return ret;
		}
		/* The reader used up its bytes: find the next ones. */
		while (s->cur < s->nsrc && s->src_pos[s->cur] == s->src_len[s->cur])
			s->cur++;
		if (s->comp == PF_COMP_NONE) {
			if (s->cur >= s->nsrc)
				return 0;
			pf_tfr_reader_feed(s->reader, s->src[s->cur] + s->src_pos[s->cur],
					   s->src_len[s->cur] - s->src_pos[s->cur]);
			s->total_out += s->src_len[s->cur] - s->src_pos[s->cur];
			s->src_pos[s->cur] = s->src_len[s->cur];
			continue;
		}
		/* Compressed: refill the window.  At end of input the codec
		 * may still hold output, so run it once more with nothing. */
		size_t produced = 0;
		if (s->cur < s->nsrc) {
			ret = pf_inflate_run(s->inflate, s->src[s->cur],
					     s->src_len[s->cur], &s->src_pos[s->cur],
					     s->window, s->window_cap, &produced, err);
		} else {
			size_t none = 0;
			ret = pf_inflate_run(s->inflate, s->stash, 0, &none,
					     s->window, s->window_cap, &produced, err);
		}
		if (ret < 0) {
			if (produced == 0)
				return ret;
			s->deferred = ret;
			if (err)
				s->deferred_err = *err;
		}
		if (produced == 0 && s->cur >= s->nsrc)
			return 0;
		pf_tfr_reader_feed(s->reader, s->window, produced);
		s->total_out += produced;
	}
}

int pf_recstream_finish(pf_recstream *s, pf_error *err)
{
	int ret;

	pf_error_clear(err);
	if (s->skip) {
		/* The end was handled in next(), which must have run out. */
		pf_record rec;

		s->eof = true;
		ret = pf_recstream_next(s, &rec, err);
		if (ret > 0)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "finish called with records still pending");
		if (ret < 0)
			return ret;
		return pf_tfr_reader_finish(s->reader, err);
	}
	if (s->comp < 0) {
		/* Fewer bytes than the detector wanted, all of them fed. */
		s->eof = true;
		pf_record rec;
		ret = pf_recstream_next(s, &rec, err);
		if (ret < 0)
			return ret;
		if (ret > 0)
			return pf_error_set(err, -EINVAL, PF_OFFSET_NONE, 0,
					    "finish called with records still pending");
	}
	if (s->inflate) {
		ret = pf_inflate_finish(s->inflate, err);
		if (ret < 0)
			return ret;
	}
	return pf_tfr_reader_finish(s->reader, err);
}
