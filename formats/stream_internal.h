/* SPDX-License-Identifier: Apache-2.0 */
/* Private to formats/' stream files: the state of a streaming decoder
 * (inflate.c) and of a record stream (recstream.c, whose skip mode is
 * recstream_skip.c), and the seams between the three files. */
#ifndef PF_STREAM_INTERNAL_H
#define PF_STREAM_INTERNAL_H

#include <zlib.h>

#include "formats_internal.h"
#include "zstd_internal.h"	/* ZSTD_FRAMEHEADERSIZE_MAX, ZSTD_createDStream_advanced */

struct pf_inflate {
	pf_compression comp;
	z_stream z;
	bool z_ready;
	ZSTD_DStream *zd;
	bool between;		/* gzip/zlib: at a member boundary */
	bool in_member;		/* bytes of an unfinished member/frame seen */
	uint64_t total_in;
	/* For the record stream's skip mode: */
	uint64_t unit_start;	/* input offset where the current frame/member began */
	uint64_t quiet_start;	/* start of the output-less units (skippable
				   frames, empty members) just before it, if
				   any, else unit_start: a damaged skippable
				   size makes the next "frame" fail, so the
				   search for a good one starts there */
	uint64_t unit_out;	/* output of the current unit so far */
	uint64_t units_done;	/* frames/members completed */
	/* zstd: a frame's header is gathered here whole before libzstd sees
	 * any of it, so that how the input happens to be cut decides
	 * nothing: libzstd looks for a legacy magic at its input position
	 * when the header it gathered is no frame, and checks a frame's
	 * content size only when the whole frame is in one call's input. */
	uint8_t hdr[ZSTD_FRAMEHEADERSIZE_MAX];
	uint8_t hdr_len, hdr_need;
	bool hdr_fed;		/* the current frame's header went to libzstd */
	uint64_t frame_size;	/* its Frame_Content_Size, or
				   ZSTD_CONTENTSIZE_UNKNOWN */
};

/* Restart d at input offset off: a new frame or member begins there (skip
 * mode, after a drop); what d held of the last one is forgotten. */
void pf_inflate_restart(pf_inflate *d, uint64_t off);

#define PF_HELD_DROPS 8

struct pf_recstream {
	uint64_t max_record;
	size_t window_cap;
	int comp;			/* -1 until detected */
	pf_inflate *inflate;
	pf_tfr_reader *reader;
	uint8_t *window;		/* decompressed bytes */

	/* Up to two pending file-byte sources: the detection stash, then
	 * the rest of the fed buffer (in skip mode also: a header cut by the
	 * end of the last buffer, then the new one). */
	uint8_t stash[PF_DETECT_BYTES];
	size_t stash_len;
	const uint8_t *src[2];
	size_t src_len[2], src_pos[2];
	uint64_t src_off[2];		/* file offset of src[i][0] */
	int nsrc, cur;
	bool eof;
	uint64_t fed;			/* file bytes fed so far */
	uint64_t total_out;
	/* A codec error after some good output: the records before it are
	 * delivered first, then the error. */
	int deferred;
	pf_error deferred_err;

	/* PF_CORRUPT_SKIP: see skip_step(). */
	bool skip;
	pf_drop_fn on_drop;
	void *on_drop_ctx;
	uint64_t reported;		/* drops told to on_drop */
	bool sniffing;			/* head of no known format: a codec may follow */
	bool switching;			/* a codec header found: the reader drains first */
	bool sniff_trial;		/* decoding from it, not yet confirmed */
	uint64_t sniff_at;		/* its file offset */
	/* The reader's drops while it is unconfirmed: told once it is,
	 * forgotten if it is a false header (so they never depend on how
	 * the input arrived).  PF_HELD_DROPS of them, made when the first
	 * trial begins (a pf_drop is 13 KB: most streams never need them). */
	pf_drop *held;
	int nheld;
	bool held_over;			/* more than that: no codec, revert */
	bool trial_failed;		/* it failed after output the reader is reading */
	pf_error trial_cause;
	bool scanning;			/* looking for the next frame or member */
	bool dropping;			/* a codec drop not yet reported */
	pf_drop drop;			/* that drop */
	uint64_t drop_floor;		/* where its search began, less one */
	uint64_t resumed_at;		/* file offset decoding resumed at */
	bool cut_due;			/* cut the reader once it has read its bytes */
	bool codec_done;		/* the end of the file handled for the codec */
	bool reader_ended;
	uint8_t tail[PF_DETECT_BYTES];	/* a possible header cut by a buffer's end */
	size_t tail_len;
	uint64_t tail_off;
	/* The current unit's bytes from released buffers (its last
	 * PF_HISTORY), to search again when it fails; src[0] may point in. */
	uint8_t *hist;
	size_t hist_len;
	uint64_t hist_off;
	bool src0_hist;
};

/* recstream.c: tell s's caller about a drop (counted in s->reported). */
int pf_recstream_tell(pf_recstream *s, const pf_drop *d);
/* recstream.c: the codec sniffing found holds: tell the drops held while
 * it was on trial.  @return 0, or the caller's -errno (then deferred). */
int pf_recstream_confirm(pf_recstream *s, pf_error *err);
/* recstream.c: the decoder of codec c and the decompression window, made
 * when not there yet.  @return 0, or -errno with err saying what. */
int pf_recstream_make_decoder(pf_recstream *s, pf_compression c, pf_error *err);
/* recstream_skip.c: the reader has read all it was given; what comes next
 * in skip mode.  @return 1 to ask the reader again, 0 when more file bytes
 * are needed (or the end is reached), <0 on error. */
int pf_recstream_skip_step(pf_recstream *s, pf_error *err);

#endif
