/* SPDX-License-Identifier: Apache-2.0 */
/* podfeed common: what every part of the library shares in its API: the
 * export macro, the error context and the allocator. */
#ifndef PF_COMMON_H
#define PF_COMMON_H

/*
 * Every public header of podfeed includes this one (pf_formats.h, pf_io.h,
 * podfeed.h, pf_host.h), so a user never includes it alone.  Functions
 * return >= 0 on success and -errno on failure; the detail of a failure
 * (what, where) goes into a caller-provided pf_error, defined here.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PF_API __attribute__((visibility("default")))
#else
#define PF_API
#endif

/* ------------------------------------------------------------------ */
/* Error context                                                        */
/* ------------------------------------------------------------------ */

/* What an offset in a pf_error counts. */
typedef enum pf_offset_kind {
	PF_OFFSET_NONE = 0,	/* no offset known */
	PF_OFFSET_FILE,		/* byte offset in the file as stored */
	PF_OFFSET_STREAM,	/* byte offset in the decompressed stream */
} pf_offset_kind;

/* The longest path Linux takes (PATH_MAX, with its NUL), so that a file
 * name is never cut; spelled out so that the header needs no POSIX
 * feature macro. */
#define PF_PATH_MAX 4096u
/* Room for the longest message podfeed composes: the cause and up to two
 * whole paths in it (a mount declared in two files, a drop budget spent
 * whose last cause names a file). */
#define PF_ERROR_MSG_MAX (2 * PF_PATH_MAX + 1024u)
/* The longest line pf_error_format() writes, with its NUL: a buffer of
 * this size is never too short. */
#define PF_ERROR_LINE_MAX (PF_PATH_MAX + PF_ERROR_MSG_MAX + 128u)

/*
 * The error contract, for every public function that takes a pf_error *
 * (formats/, io/, loader/, host/): it clears the error on entry, so that
 * a caller may declare `pf_error err;` uninitialised and print it after
 * any failing call; on failure it fills code, msg and whichever of file,
 * offset, frame and record apply (those that do not stay "unknown": file
 * empty, offset_kind PF_OFFSET_NONE, frame and record -1); on success
 * the error stays clear (code 0).  err may be NULL where the function
 * says so.  The exceptions fill or read an error the caller hands them:
 * pf_error_set(), pf_error_set_file(), pf_error_format() and
 * pf_io_req_error().  Nothing is cut: file holds any path Linux takes and
 * msg the longest message podfeed composes.
 */
typedef struct pf_error {
	int code;		/* -errno, 0 when clear */
	pf_offset_kind offset_kind;
	uint64_t offset;	/* meaningful only when offset_kind says so */
	int64_t frame;		/* frame index in an indexed shard, or -1 */
	int64_t record;		/* record number in the file, or -1 */
	char file[PF_PATH_MAX];	/* set by the layer that knows the file; "" */
	char msg[PF_ERROR_MSG_MAX];	/* what was wrong; "": pf_strerror(code) */
} pf_error;

/*! pf_error_clear(): reset to "no error" (code 0, no file, no offset,
 *  frame and record -1).  Cheap: the text fields are emptied, not wiped.
 *  err may be NULL. */
PF_API void pf_error_clear(pf_error *err);

/*! pf_error_set(): record a failure: code, offset and message (other
 *  fields as they are).  @return code (so callers can
 *  `return pf_error_set(err, -EBADMSG, ...)`).  err may be NULL. */
PF_API int pf_error_set(pf_error *err, int code, pf_offset_kind kind,
			uint64_t offset, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/*! pf_error_set_file(): name the file an error belongs to, unless one is
 *  already named.  err may be NULL. */
PF_API void pf_error_set_file(pf_error *err, const char *file);

/*! pf_error_format(): one line for people, e.g.
 *  "data/a.tfrecord: byte 1234: bad data CRC (record 7)": only the fields
 *  that apply (a file when named, an offset when its kind says so, frame
 *  and record when >= 0).  Writes at most cap bytes, terminated when
 *  cap > 0 (dst may be NULL when cap is 0).  @return the length of the
 *  whole line, as snprintf() does: a result >= cap means it was cut, and
 *  a buffer of that length + 1 (at most PF_ERROR_LINE_MAX) holds it. */
PF_API size_t pf_error_format(const pf_error *err, char *dst, size_t cap);

/*! pf_strerror(): a short name for a -errno code used by podfeed. */
PF_API const char *pf_strerror(int code);

/* ------------------------------------------------------------------ */
/* The allocator                                                        */
/* ------------------------------------------------------------------ */
/*
 * Every allocation podfeed makes goes through one allocator, process-wide:
 * its objects and their buffers, and what zstd, zlib and protobuf-c
 * allocate for it (they are handed callbacks into it).  It is malloc() and
 * free() unless pf_allocator_set() installs another, as zstd's
 * ZSTD_customMem and protobuf-c's ProtobufCAllocator let a caller do.
 *
 * What it must do.  alloc(opaque, size) returns size bytes aligned for any
 * object (as malloc(): alignof(max_align_t)), or NULL when it cannot: the
 * podfeed call then fails with -ENOMEM, saying so in its pf_error, and
 * leaks nothing.  size is never 0.  free(opaque, p) releases a block that
 * alloc returned; p is never NULL.  opaque is passed to both as given.
 * podfeed asks for a little more than its objects need (a 16-byte header
 * per block, and room to align the few blocks that want more than malloc's
 * alignment), and never reallocates in place: growing an array is a new
 * block, a copy and a free.
 *
 * When.  Set it when no podfeed object is alive: before the first is
 * created, or after the last is freed (loaders, sources, readers, I/O
 * engines, region tables, indexes, manifests, models, arenas and every
 * other object with a _free(), _close() or _release()).  While any block
 * of the allocator in force is still allocated, pf_allocator_set()
 * refuses with -EBUSY and changes nothing, so a block is always freed by
 * the allocator that made it.
 *
 * Thread-safety.  pf_allocator_set() must not run while another thread is
 * inside a podfeed call.  The allocator's functions are called from any
 * thread that calls podfeed and from the threads podfeed starts (a
 * loader's I/O thread and workers), at the same time: they must be
 * thread-safe.
 *
 * Who frees.  podfeed frees every block it allocated, through the same
 * allocator, by the time the object that owns it is freed; memory a
 * podfeed call hands over (pf_paths_expand()'s list) is released by the
 * podfeed call that says so (pf_paths_free()), never by the caller's
 * free().
 *
 * Outside it, on purpose:
 *  - The loader's large pools (batch slots, read buffers, stream buffers:
 *    most of pf_loader_config.memory_budget, pf_loader_metrics.memory_bytes
 *    says how much) are mapped with mmap(): they are page-aligned, as
 *    O_DIRECT reads and io_uring's registered buffers need, ask for
 *    transparent huge pages (a pool is written in full on the first pass,
 *    and 2 MiB pages cut its page faults 512-fold), and can be kept for
 *    the next loader (keep_pools) — none of which a malloc-shaped
 *    allocator can promise.  Their size is bounded by memory_budget, and
 *    pf_loader_free() unmaps them (or keeps them, when asked, until
 *    pf_loader_trim()).
 *  - The read policies of pf_file_pread() (a few hundred bytes for each
 *    pf_file_set_policy() and each loader created) live as long as the
 *    process, since a reader may still hold one, and come from malloc().
 *  - pf_manifest_locate()'s path is malloc()ed for the caller's free(),
 *    as its comment says.
 *  - The JSON a report is written in (pf_report_format(), podfeed.h) is
 *    built with jansson, whose objects come from jansson's allocator
 *    (json_set_alloc_funcs(): process-wide, so the application's to set,
 *    not podfeed's); they live only inside the pf_report_* call.  What a
 *    report keeps, and the text it gives, is podfeed's.
 *  - What the C library, liburing and the kernel allocate inside calls
 *    podfeed makes (glob(), opendir(), realpath(), thread stacks,
 *    io_uring's rings).
 */
typedef struct pf_allocator {
	void *(*alloc)(void *opaque, size_t size);
	void (*free)(void *opaque, void *p);
	void *opaque;
} pf_allocator;

/*! pf_allocator_set(): make *a (copied) the allocator of every podfeed
 *  allocation from now on, or with a NULL, malloc() and free() again.
 *  @return 0; -EINVAL when a lacks alloc or free; -EBUSY when blocks of
 *  the allocator in force are still allocated (a podfeed object is alive),
 *  and nothing changed.  Not while another thread is in a podfeed call. */
PF_API int pf_allocator_set(const pf_allocator *a);

/* ------------------------------------------------------------------ */
/* Version and the ABI promise                                          */
/* ------------------------------------------------------------------ */

/* The version of these headers; pf_version() says the library's, which
 * may be newer (meson.build checks PF_VERSION_STRING against the
 * project's version). */
#define PF_VERSION_MAJOR 0
#define PF_VERSION_MINOR 6
#define PF_VERSION_PATCH 0
#define PF_VERSION_NUMBER (PF_VERSION_MAJOR * 10000 + PF_VERSION_MINOR * 100 + PF_VERSION_PATCH)
#define PF_VERSION_STRING "0.6.0"

/*! pf_version(): the running library's PF_VERSION_NUMBER (as
 *  ZSTD_versionNumber()); pf_version_string() its PF_VERSION_STRING. */
PF_API unsigned pf_version(void);
PF_API const char *pf_version_string(void);

/*
 * The ABI promise of libpodfeed.so.0 (docs/api.md, "ABI"):
 * - A function, once exported, stays, with its meaning, in the version
 *   node it was added in (libpodfeed.map); new ones go into new nodes.
 * - The structs the loader's API passes in and out (pf_loader_config,
 *   pf_loader_metrics, pf_state_info) grow only at their end, and cross
 *   the boundary with their size, as openat2()'s struct open_how does:
 *   pf_loader_create() and the others are inline wrappers in podfeed.h
 *   that pass sizeof the caller's struct to an exported *_sized function.
 *   A program built against an older, smaller header gets the fields it
 *   lacks zeroed (each field's zero is its default); one built against a
 *   newer header runs on an older library as long as the fields that
 *   library does not know are left zero, and is refused (-E2BIG, naming
 *   the first byte set) when it asked for something the library cannot
 *   do.  Out-structs are filled up to the caller's size.
 * - The other public structs (pf_io_config, the formats' and the host's
 *   configs) are fixed within the soname: a new field there is a new
 *   soname.
 */

#ifdef __cplusplus
}
#endif

#endif /* PF_COMMON_H */
