/* Fuzzes the day archive reader (ops/lockstep-replay/dayarc.h), what every
 * lockstep-replay command runs on a FILE given in place of a journal
 * directory, and checks what it reports against the container's rules.
 *
 * Input: byte 0 picks the path, the rest is the input.
 *   bit 0     1: the rest is an archive file (zstd), through dayarc_unpack_fd;
 *             0: the rest is the decompressed container, fed to the push
 *             parser in pieces
 *   bits 1-7  the pieces' size, 1 + (byte0 >> 1) bytes */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dayarc.h"

#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: broken: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                         \
		}                                                                        \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the callbacks saw. */
struct seen {
	int open; /* a segment begun and not ended */
	unsigned begun, ended;
	uint64_t len, got;
	char prev[DAYARC_NAME_LEN + 1];
};

static int on_begin(void *ctx, const char *name, uint64_t len)
{
	struct seen *s = ctx;

	CHECK(!s->open);
	CHECK(strlen(name) == DAYARC_NAME_LEN);
	CHECK(strspn(name, "0123456789") == 20 && strcmp(name + 20, ".seg") == 0);
	CHECK(!s->begun || strcmp(name, s->prev) > 0);
	CHECK(len >= DAYARC_SEG_HDR && len <= DAYARC_MAX_SEGMENT);
	memcpy(s->prev, name, sizeof(s->prev));
	s->open = 1;
	s->begun++;
	s->len = len;
	s->got = 0;
	return 0;
}

static int on_data(void *ctx, const uint8_t *p, size_t n)
{
	struct seen *s = ctx;
	volatile uint8_t sink = 0;

	CHECK(s->open && n > 0 && s->got + n <= s->len);
	for (size_t i = 0; i < n; i++) /* every byte given is readable */
		sink ^= p[i];
	(void)sink;
	s->got += n;
	return 0;
}

static int on_end(void *ctx)
{
	struct seen *s = ctx;

	CHECK(s->open && s->got == s->len);
	s->open = 0;
	s->ended++;
	return 0;
}

static const struct dayarc_ops ops = { on_begin, on_data, on_end };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen s = { 0 };
	struct dayarc_reader r;
	const char *why = NULL;
	int rc;

	if (size < 1)
		return 0;
	if (data[0] & 1) {
		int fd = memfd_create("fuzz_archive", MFD_CLOEXEC);

		if (fd < 0)
			return 0;
		CHECK(write(fd, data + 1, size - 1) == (ssize_t)(size - 1));
		CHECK(lseek(fd, 0, SEEK_SET) == 0);
		rc = dayarc_unpack_fd(fd, &ops, &s, &why);
		close(fd);
		CHECK(rc == 0 || rc == -EBADMSG || rc == -ENOMEM);
		CHECK(rc == 0 || why);
	} else {
		size_t piece = 1 + (data[0] >> 1);

		dayarc_reader_init(&r, &ops, &s);
		rc = 0;
		for (size_t at = 1; at < size && rc == 0; at += piece)
			rc = dayarc_reader_feed(&r, data + at, size - at < piece ? size - at : piece);
		if (rc == 0)
			rc = dayarc_reader_finish(&r);
		CHECK(rc == 0 || rc == -EBADMSG);
		CHECK(rc == 0 || r.why);
		CHECK(rc != 0 || r.seen == r.count);
	}
	/* a whole container: every segment begun was ended, nothing open */
	if (rc == 0)
		CHECK(!s.open && s.begun == s.ended && s.begun >= 1);
	return 0;
}
