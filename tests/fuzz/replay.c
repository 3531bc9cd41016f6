/* SPDX-License-Identifier: Apache-2.0 */
/* Replays a fuzz harness's committed corpus as an ordinary test: every
 * file in the directory (or each file named) goes through
 * LLVMFuzzerTestOneInput once.  An empty corpus is a failure. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f) {
		fprintf(stderr, "replay: cannot open %s\n", path);
		return -1;
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned count = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *e;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: no such corpus\n", argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]) < 0)
				return 1;
			count++;
			continue;
		}
		d = opendir(argv[i]);
		if (!d)
			return 1;
		while ((e = readdir(d))) {
			char path[4096];

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			if (run_file(path) < 0) {
				closedir(d);
				return 1;
			}
			count++;
		}
		closedir(d);
	}
	printf("replayed %u inputs\n", count);
	return count ? 0 : 1;
}
