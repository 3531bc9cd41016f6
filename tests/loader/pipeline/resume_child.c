/* SPDX-License-Identifier: Apache-2.0 */
/* The process test_loader_resume kills: a consumer that logs the id of
 * every record it is handed and commits after every step.
 *
 *   resume_child DIR COMMIT LOG HOST HOSTS CORES PCB WINDOW SEED EPOCHS STOP
 *                [OLD_COMMIT...]
 *
 * DIR a directory of shards, or a mixture: directories joined by commas,
 * each a source of weight 1 (test_loader_mixture_kill).
 *
 * A commit is one file, replaced by rename(): the log's length (8 bytes,
 * little-endian) then the loader state.  So a kill at any instant leaves
 * the last commit whole, and the log beyond its length is what was
 * consumed after it: cut on restart, delivered again.  On start: COMMIT
 * when it exists, else the OLD_COMMITs (another topology's), else a
 * fresh run.  It stops when next() ends or at global step STOP (0: no
 * stop).  Exit 0 when done, 2 on error. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "podfeed.h"

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "resume_child: %s: %s\n", what, detail);
	exit(2);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		die(path, "cannot size");
	buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
		die(path, "cannot read");
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void write_all(int fd, const void *buf, size_t len, const char *path)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die(path, strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

static void commit(const char *path, uint64_t log_len, pf_loader *l)
{
	char tmp[4096];
	uint8_t head[8];
	int64_t n = pf_loader_save_state(l, NULL, 0);
	uint8_t *blob = n > 0 ? malloc((size_t)n) : NULL;
	int fd;

	if (!blob || pf_loader_save_state(l, blob, (size_t)n) != n)
		die(path, "cannot save the state");
	for (int i = 0; i < 8; i++)
		head[i] = (uint8_t)(log_len >> (8 * i));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die(tmp, strerror(errno));
	write_all(fd, head, 8, tmp);
	write_all(fd, blob, (size_t)n, tmp);
	if (close(fd) || rename(tmp, path))
		die(path, strerror(errno));
	free(blob);
}

int main(int argc, char **argv)
{
	const char *paths[1];
	pf_loader_source src[4];
	const char *spaths[4][1];
	char dirs[4096], *save = NULL;
	size_t nsrc = 0;
	pf_loader_config cfg = { 0 };
	pf_state_blob blobs[16];
	uint8_t *bufs[16];
	size_t nblobs = 0, len;
	uint64_t log_len = 0, stop;
	pf_loader *l;
	pf_batch *b;
	pf_error err;
	uint8_t *own;
	bool done = false;
	int logfd, ret = 0;

	if (argc < 12 || argc > 12 + 16)
		die("usage", "DIR COMMIT LOG HOST HOSTS CORES PCB WINDOW SEED EPOCHS STOP "
		    "[OLD_COMMIT...]");
	paths[0] = argv[1];
	own = slurp(argv[2], &len);
	if (own) {
		if (len < 8)
			die(argv[2], "commit shorter than its header");
		log_len = get_le64(own);
		blobs[nblobs++] = (pf_state_blob){ own + 8, len - 8 };
		bufs[0] = own;
	} else {
		for (int i = 12; i < argc; i++) {
			bufs[nblobs] = slurp(argv[i], &len);
			if (!bufs[nblobs] || len < 8)
				die(argv[i], "no old commit");
			blobs[nblobs] = (pf_state_blob){ bufs[nblobs] + 8, len - 8 };
			nblobs++;
		}
	}
	logfd = open(argv[3], O_WRONLY | O_CREAT, 0644);
	if (logfd < 0 || ftruncate(logfd, (off_t)log_len) ||
	    lseek(logfd, (off_t)log_len, SEEK_SET) < 0)
		die(argv[3], strerror(errno));

	cfg.paths = paths;
	cfg.npaths = 1;
	if (strchr(argv[1], ',')) {
		snprintf(dirs, sizeof(dirs), "%s", argv[1]);
		for (char *p = strtok_r(dirs, ",", &save); p && nsrc < 4;
		     p = strtok_r(NULL, ",", &save)) {
			spaths[nsrc][0] = p;
			src[nsrc] = (pf_loader_source){ .paths = spaths[nsrc], .npaths = 1,
							.weight = 1 };
			nsrc++;
		}
		cfg.paths = NULL;
		cfg.npaths = 0;
		cfg.sources = src;
		cfg.nsources = nsrc;
	}
	cfg.features = "id:int64[1]";
	cfg.host_index = (uint32_t)strtoul(argv[4], NULL, 10);
	cfg.num_hosts = (uint32_t)strtoul(argv[5], NULL, 10);
	cfg.cores_per_host = (uint32_t)strtoul(argv[6], NULL, 10);
	cfg.per_core_batch = (uint32_t)strtoul(argv[7], NULL, 10);
	cfg.shuffle_window = (uint32_t)strtoul(argv[8], NULL, 10);
	cfg.shuffle = true;
	cfg.seed = strtoull(argv[9], NULL, 10);
	cfg.epochs = (uint32_t)strtoul(argv[10], NULL, 10);
	stop = strtoull(argv[11], NULL, 10);
	cfg.threads = 2;
	cfg.memory_budget = 64u << 20;
	cfg.resume = nblobs ? blobs : NULL;
	cfg.nresume = nblobs;
	pf_error_clear(&err);
	ret = pf_loader_create(&l, &cfg, &err);
	if (ret < 0)
		die("create", err.msg);
	if (!own)
		commit(argv[2], log_len, l);	/* so restarts are of this topology */
	if (own && stop) {
		pf_state_info info;

		if (pf_state_inspect(blobs[0].data, blobs[0].len, &info, &err) < 0)
			die(argv[2], err.msg);
		done = info.global_step >= stop;	/* killed after the last commit */
	}
	while (!done && (ret = pf_loader_next(l, &b)) == 1) {
		for (uint32_t c = 0; c < b->cores; c++)
			write_all(logfd, b->core[c].tensors[0].data,
				  (size_t)b->per_core_batch * sizeof(int64_t), argv[3]);
		log_len += (uint64_t)b->cores * b->per_core_batch * sizeof(int64_t);
		done = stop && b->global_step + 1 >= stop;
		pf_loader_release(l, b);
		commit(argv[2], log_len, l);
	}
	if (ret < 0)
		die("next", pf_loader_last_error(l)->msg);
	pf_loader_free(l);
	close(logfd);
	for (size_t i = 0; i < nblobs; i++)
		free(bufs[i]);
	return 0;
}
