/* SPDX-License-Identifier: Apache-2.0 */
/* jpegfull: the decoder's own limit for tools/bench/images: every JPEG of
 * a directory read into memory, then decoded whole to RGB by TurboJPEG
 * (tjDecompress2(), its default accurate IDCT and fancy upsampling, as
 * PIL's and podfeed's) on T threads, each taking the next file; prints
 * "images seconds cpu_seconds" of the decode alone.  With `train`, the
 * same files go through podfeed's own image transform instead
 * (pf_image_transform(): 224x224 train crop, flip, resize; seed 0, epoch
 * 0, place = the file's number), without the loader around it: the
 * transform's cost beside the whole decode's, in one program.
 * Not installed.
 * usage: jpegfull DIR THREADS [full|train] */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <turbojpeg.h>

#include "pf_transform.h"

typedef struct blob {
	unsigned char *data;
	unsigned long len;
} blob;

static blob *files;
static size_t nfiles, next_file;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int failed;

/* The next file's number for a thread; nfiles when there is none left. */
static size_t take(void)
{
	size_t i;

	pthread_mutex_lock(&mu);
	i = next_file++;
	pthread_mutex_unlock(&mu);
	return i < nfiles ? i : nfiles;
}

/* train: podfeed's transform of each file instead of TurboJPEG's decode. */
static void *transform_worker(void *arg)
{
	pf_image_scratch scratch = { 0 };
	static _Thread_local uint8_t out[224 * 224 * 3];
	pf_image_spec spec;
	pf_error err;

	(void)arg;
	pf_image_spec_init(&spec, 224, 224, PF_AUGMENT_TRAIN);
	for (size_t i; (i = take()) < nfiles;) {
		if (pf_image_transform(&spec, files[i].data, files[i].len, 0, 0, i, out, &scratch,
				       NULL, &err)) {
			fprintf(stderr, "jpegfull: file %zu: %s\n", i, err.msg);
			failed = 1;
		}
	}
	pf_image_scratch_free(&scratch);
	return NULL;
}

static void *worker(void *arg)
{
	tjhandle tj = tjInitDecompress();
	unsigned char *rgb = NULL;
	size_t cap = 0;

	(void)arg;
	for (size_t i; (i = take()) < nfiles;) {
		int w, h, sub, cs;

		if (tjDecompressHeader3(tj, files[i].data, files[i].len, &w, &h, &sub, &cs)) {
			failed = 1;
			continue;
		}
		if ((size_t)w * h * 4 > cap) {
			free(rgb);
			cap = (size_t)w * h * 4;
			rgb = malloc(cap);
		}
		/* TurboJPEG decodes CMYK and YCCK files to CMYK only (podfeed
		 * converts those to RGB after, a little more work). */
		if (!rgb || tjDecompress2(tj, files[i].data, files[i].len, rgb, w, 0, h,
					  cs == TJCS_CMYK || cs == TJCS_YCCK ? TJPF_CMYK : TJPF_RGB,
					  0)) {
			fprintf(stderr, "jpegfull: file %zu: %s\n", i, tjGetErrorStr2(tj));
			failed = 1;
		}
	}
	free(rgb);
	tjDestroy(tj);
	return NULL;
}

int main(int argc, char **argv)
{
	struct timespec t0, t1, c0, c1;
	void *(*fn)(void *) = worker;
	pthread_t th[64];
	struct dirent *e;
	size_t cap = 0;
	int threads;
	DIR *d;

	if (argc == 4 && !strcmp(argv[3], "train"))
		fn = transform_worker;
	else if (argc == 4 && strcmp(argv[3], "full"))
		argc = 0;
	if ((argc != 3 && argc != 4) || (threads = atoi(argv[2])) < 1 || threads > 64 ||
	    !(d = opendir(argv[1]))) {
		fputs("usage: jpegfull DIR THREADS [full|train]\n", stderr);
		return 2;
	}
	while ((e = readdir(d))) {
		char path[4096];
		FILE *f;
		long n;

		if (!strstr(e->d_name, ".jpg"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
		f = fopen(path, "rb");
		if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET))
			return 1;
		if (nfiles == cap) {
			cap = cap ? cap * 2 : 1024;
			files = realloc(files, cap * sizeof(*files));
		}
		files[nfiles].data = malloc((size_t)n);
		files[nfiles].len = (unsigned long)n;
		if (!files || !files[nfiles].data ||
		    fread(files[nfiles].data, 1, (size_t)n, f) != (size_t)n)
			return 1;
		fclose(f);
		nfiles++;
	}
	closedir(d);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	for (int i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, fn, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	if (failed) {
		fputs("jpegfull: a file did not decode\n", stderr);
		return 1;
	}
	printf("%zu %.6f %.6f\n", nfiles, (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
	       (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) / 1e9);
	return 0;
}
