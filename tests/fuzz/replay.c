/* SPDX-License-Identifier: MIT */
/*
 * Runs a libFuzzer harness without libFuzzer: every file named on the
 * command line (or found in a directory named there) goes once through
 * LLVMFuzzerTestOneInput. This is how the committed seed corpora and the
 * inputs of past crashes (tests/fuzz/regress/) run as regression tests in
 * every build, with gcc and under the sanitizers, not only in `make fuzz`.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/base/buf.h"
#include "proto/base/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Feeds one file to the harness. */
static int run_file(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "replay: cannot open %s\n", path);
		return -1;
	}
	struct buf b = {0};
	char tmp[65536];
	size_t n;
	while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
		buf_append(&b, tmp, n);
	fclose(f);
	/* libFuzzer hands the harness a buffer of exactly the input's size:
	 * a copy of that size lets ASan catch reads past the end. */
	size_t size = buf_size(&b);
	uint8_t *data = xmalloc(size ? size : 1);
	memcpy(data, buf_head(&b), size);
	buf_free(&b);
	fprintf(stderr, "replay: %s (%zu bytes)\n", path, size);
	LLVMFuzzerTestOneInput(data, size);
	free(data);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Feeds every regular file of a directory, in name order. */
static int run_dir(const char *dir, unsigned *count)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	char **names = NULL;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || strcmp(e->d_name, "README") == 0 || strstr(e->d_name, ".md"))
			continue;
		names = xreallocarray(names, n + 1, sizeof(*names));
		names[n++] = xasprintf("%s/%s", dir, e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	int r = 0;
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
			if (run_file(names[i]) < 0)
				r = -1;
			(*count)++;
		}
		free(names[i]);
	}
	free(names);
	return r;
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	unsigned count = 0;
	int status = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			/* A corpus that does not exist yet (no crash so far) is fine. */
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (run_dir(argv[i], &count) < 0)
				status = 1;
		} else {
			if (run_file(argv[i]) < 0)
				status = 1;
			count++;
		}
	}
	printf("replayed %u inputs\n", count);
	return status;
}
