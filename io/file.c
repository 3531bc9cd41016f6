/* SPDX-License-Identifier: Apache-2.0 */
/* Plain file access: open, size, and a pread that finishes what it starts. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pf_io.h"

int pf_file_open(const char *path, pf_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;

	if (fd < 0) {
		int e = -errno;
		pf_error_set_file(err, path);
		return pf_error_set(err, e, PF_OFFSET_NONE, 0, "cannot open: %s",
				    pf_strerror(e));
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		pf_error_set_file(err, path);
		return pf_error_set(err, -EISDIR, PF_OFFSET_NONE, 0,
				    "is a directory, not a file");
	}
	return fd;
}

int pf_file_size(int fd, uint64_t *size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	*size = (uint64_t)st.st_size;
	return 0;
}

int64_t pf_file_pread(int fd, void *buf, size_t len, uint64_t offset,
		      const char *path, pf_error *err)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(offset + done));
		if (n < 0) {
			int e = -errno;
			if (e == -EINTR || e == -EAGAIN)
				continue;
			pf_error_set_file(err, path);
			return pf_error_set(err, e, PF_OFFSET_FILE, offset + done,
					    "read failed: %s", pf_strerror(e));
		}
		if (n == 0)
			break;	/* end of file */
		done += (size_t)n;
	}
	return (int64_t)done;
}
