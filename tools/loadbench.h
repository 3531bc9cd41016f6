/* SPDX-License-Identifier: Apache-2.0 */
/* loadbench's parts: the options every part sees, and each part's entry
 * (loadbench.c: the run; loadbench_options.c: its options; ladder.c,
 * regions.c, plan: the subcommands). */
#ifndef PF_TOOLS_LOADBENCH_H
#define PF_TOOLS_LOADBENCH_H

#include "ckpt.h"
#include "cli.h"
#include "pf_host.h"
#include "regions.h"
#include "train.h"

/* --source NAME=WEIGHT:PATH, repeated: a mixture's sources. */
#define LB_MAX_SOURCES 16
typedef struct lb_sources {
	size_t n;
	pf_loader_source s[LB_MAX_SOURCES];
	const char *path[LB_MAX_SOURCES][1];	/* the PATH of each */
	char name[LB_MAX_SOURCES][64];
} lb_sources;

typedef struct options {
	uint64_t per_core_batch, cores, host_index, num_hosts;
	uint64_t threads_arg;	/* --threads: PF_AUTO or a count */
	uint64_t threads;	/* the baseline passes' threads: the count, or the CPUs */
	uint64_t epochs, steps, seed, window, memory_mib, io_depth, prefetch;
	uint64_t repeat;
	bool epochs_given, direct, verify, json, baseline, quiet, no_manifest;
	bool shuffle, window_given;
	pf_shuffle_mode shuffle_mode;	/* --shuffle=global */
	lb_sources mix;			/* --source */
	int mix_mode, mix_stop;		/* --mix, --mix-stop */
	int mix_unit;			/* --mix-unit */
	bool source_feature;		/* --source-feature */
	const char *features;
	int remainder;			/* pf_remainder */
	uint64_t pack, pack_pool;	/* --pack L, --pack-pool N */
	int pack_mode;			/* pf_pack_mode */
	bool host_index_given, num_hosts_given;	/* else from the environment */
	const char *save_state;
	uint64_t save_every;
	uint64_t skip_steps;	/* --skip-steps N */
	int on_corrupt;			/* pf_corrupt_policy */
	const char *quarantine;
	uint64_t max_corrupt;
	const char *faults;
	uint64_t io_retries, io_timeout_ms;
	bool io_retries_given, io_timeout_given;
	ckpt_set resume;
	regions_opts ro;	/* --region and the rest: tools/regions.c */
	train_options train;	/* --model and the rest: tools/train.c */
	train_ctx *tc;
	const char *html;	/* --html FILE */
	cli_outfile html_out;	/* opened before the run */
} options;

/* --repeat's most runs. */
#define MAX_REPEAT 101u

/* loadbench's option table and its defaults (ladder checks the options
 * it passes on against them). */
extern const cli_opt loadbench_cli[];
void loadbench_defaults(options *o);
/* loadbench_options.c: argv parsed into o; @return -1 to go on (*first:
 * the first shard's index in argv), else the exit status. */
int loadbench_parse_options(int argc, char **argv, options *o, int *first);

/* Mixtures (loadbench_mix.c): --source's parser (a cli_opt call), each
 * source's PATH checked (0, or the exit status after saying why), the
 * sources' files in source order (0, or 1 after saying why), the
 * config's sources. */
int lb_parse_source(void *field, const char *v);
int lb_check_sources(const options *o);
int lb_mixture_files(const options *o, char ***files, int *nfiles);
void lb_mixture_config(options *o, pf_loader_config *cfg);
void lb_sources_regions(const options *o);

/* --baseline (baseline.c): every frame of the indexed shards, split among
 * T threads. */
typedef struct bl_frame {
	uint32_t file;
	pf_frame_info fi;
} bl_frame;

typedef struct bl_set {
	char **paths;
	size_t nfiles;
	bool *aligned;		/* frames aligned for O_DIRECT */
	bl_frame *frames;
	size_t nframes;
	size_t nindexed;
	uint64_t cbytes, ubytes;
	uint32_t max_c, max_u;
} bl_set;


/*! The frames of the indexed shards among paths (streams are left out).
 *  @return 0, or -1 after printing why. */
int baseline_load(bl_set *s, char **paths, size_t n);
void baseline_free(bl_set *s);
/*! One read pass (whole frames, one I/O engine a thread, depth reads in
 *  flight) or decompress pass (pread, frame CRC, zstd) on threads
 *  threads.  @return 0 with its wall time in *seconds (and the read
 *  pass's engine in *backend), or 1 after printing why. */
int baseline_read(const bl_set *s, unsigned threads, unsigned depth, bool direct,
		  double *seconds, const char **backend);
int baseline_decompress(const bl_set *s, unsigned threads, double *seconds);

/* The decode pass: what it decodes into, and what it decoded. */
typedef struct bl_decode {
	const pf_spec *spec;	/* the loader's features */
	size_t batch;		/* rows of a batch (the loader's global batch) */
	bool verify;		/* check each record's data CRC (--verify) */
	uint64_t records, bytes;	/* out: records, and decompressed bytes */
} bl_decode;

/*! The decode pass on threads threads: each decompresses the first frames
 *  of its share that fit in 96 MiB (all of them, for a dataset of up to
 *  96 MiB a thread decompressed), then, timed, frames them into records
 *  and decodes each with the spec into the next row of a ring of batches
 *  (32 MiB of rows), as the loader's decode threads do once a frame is
 *  decompressed.  @return 0 with the wall time in *seconds and what was
 *  decoded in d, or 1 after printing why. */
int baseline_decode(const bl_set *s, unsigned threads, bl_decode *d, double *seconds);

/* `loadbench which` (which.c): the steps asked (global steps [from, to);
 * to UINT64_MAX: to the run's end), and the records of each of them, for
 * each core's rows, said without reading a record (the loader made
 * plan_only).  lb_which_parse_steps(): "A:B", "A:" or "A".  @return 0 or
 * <0 after a usage error; lb_which_print(): the exit status (0, 1 after
 * the loader's error, naming the run's steps when one is not its). */
typedef struct lb_which {
	bool on;
	uint64_t from, to;
} lb_which;
int lb_which_parse_steps(const char *v, lb_which *w);
int lb_which_print(const pf_loader_config *cfg, const lb_which *w, bool json);

/* The subcommands: `loadbench plan` (plan.c), `loadbench ladder`
 * (ladder.c), `loadbench regions` (regions_bench.c).  argv[0] is the
 * subcommand.  @return the exit status. */
int plan_main(int argc, char **argv);
int ladder_main(int argc, char **argv);

#endif
