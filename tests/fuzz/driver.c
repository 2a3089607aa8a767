/* Replays saved inputs through a fuzz target without libFuzzer, so that the
 * corpus is a regression test under `make check` (and the sanitizer build).
 * Arguments are files or directories of files. */
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
	long len;

	if (!f) {
		perror(path);
		return -1;
	}
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(len > 0 ? (size_t)len : 1);
	if (!buf || (len > 0 && fread(buf, 1, (size_t)len, f) != (size_t)len)) {
		fprintf(stderr, "%s: read failed\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	/* An exact-size copy, so that ASan sees any read past the input. */
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned files = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (argv[i][0] == '-') /* libFuzzer flags such as -runs=0 */
			continue;
		if (stat(argv[i], &st) < 0) {
			perror(argv[i]);
			return 1;
		}
		if (S_ISDIR(st.st_mode)) {
			DIR *d = opendir(argv[i]);
			struct dirent *e;

			if (!d) {
				perror(argv[i]);
				return 1;
			}
			while ((e = readdir(d))) {
				char path[4096];

				if (e->d_name[0] == '.')
					continue;
				snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
				if (run_file(path) < 0) {
					closedir(d);
					return 1;
				}
				files++;
			}
			closedir(d);
		} else {
			if (run_file(argv[i]) < 0)
				return 1;
			files++;
		}
	}
	printf("%u inputs replayed\n", files);
	return 0;
}
