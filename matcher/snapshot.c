/* The matcher's snapshot files and exec block encoding (snapshot.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "matcher.h"
#include "ouch.h"
#include "snapshot.h"
#include "wire.h"

#define SNAP_MAGIC "LSSNAP\0\1"
#define SNAP_BUF (1 << 20)

_Static_assert(sizeof(struct matcher_snap_hdr) <= MATCHER_SNAP_HDR_LEN, "snapshot header");

struct snap_io {
	int fd;
	uint32_t crc;
	uint64_t n; /* body bytes so far */
	uint64_t left; /* reading: body bytes left */
	size_t len, off;
	uint8_t *buf;
};

void matcher_snapshot_path(char *out, size_t cap, const char *dir, uint64_t seq)
{
	snprintf(out, cap, "%s/snap-%020llu.lss", dir, (unsigned long long)seq);
}

int matcher_exec_encode(uint8_t *block, uint64_t tape_seq, const char *user,
			const struct ouch_msg *msg)
{
	int len = ouch_encode_outbound(msg, block + WIRE_EXEC_HDR_LEN,
				       MATCHER_EXEC_SLOT - 2 - WIRE_EXEC_HDR_LEN);

	if (len < 0)
		return len;
	wire_exec_header(block, tape_seq, user);
	return len + (int)WIRE_EXEC_HDR_LEN;
}

static int snap_flush(struct snap_io *io)
{
	size_t done = 0;

	while (done < io->len) {
		ssize_t w = write(io->fd, io->buf + done, io->len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		done += (size_t)w;
	}
	io->len = 0;
	return 0;
}

static int snap_put(void *ctx, const void *p, size_t len)
{
	struct snap_io *io = ctx;
	int r;

	io->crc = crc32c(io->crc, p, len);
	io->n += len;
	while (len) {
		size_t k = SNAP_BUF - io->len < len ? SNAP_BUF - io->len : len;

		memcpy(io->buf + io->len, p, k);
		io->len += k;
		p = (const uint8_t *)p + k;
		len -= k;
		if (io->len == SNAP_BUF && (r = snap_flush(io)) < 0)
			return r;
	}
	return 0;
}

int matcher_snapshot_write(const char *dir, struct matcher_snap_hdr *h, const struct engine *e)
{
	char tmp[4200], path[4096];
	struct snap_io io = { .fd = -1 };
	uint8_t hdr[MATCHER_SNAP_HDR_LEN] = { 0 };
	int r, dfd;

	matcher_snapshot_path(path, sizeof(path), dir, h->seq);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	io.buf = malloc(SNAP_BUF);
	if (!io.buf)
		return -ENOMEM;
	io.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (io.fd < 0) {
		r = -errno;
		goto out_free;
	}
	/* the header goes last (body_len is known then); reserve its room */
	if (lseek(io.fd, MATCHER_SNAP_HDR_LEN, SEEK_SET) < 0) {
		r = -errno;
		goto out_close;
	}
	if ((r = engine_snapshot_write(e, snap_put, &io)) < 0 || (r = snap_flush(&io)) < 0)
		goto out_close;
	memcpy(h->magic, SNAP_MAGIC, 8);
	h->version = MATCHER_SNAP_VERSION;
	h->hash = engine_hash(e);
	h->body_len = io.n;
	memcpy(hdr, h, sizeof(*h));
	/* the body is written before the header, so the trailer holds two
	 * CRC32Cs: u32 crc32c(header), u32 crc32c(body) */
	{
		uint32_t crcs[2] = { crc32c(0, hdr, sizeof(hdr)), io.crc };

		if (pwrite(io.fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
		    pwrite(io.fd, crcs, sizeof(crcs), (off_t)(MATCHER_SNAP_HDR_LEN + io.n)) !=
			    (ssize_t)sizeof(crcs)) {
			r = -EIO;
			goto out_close;
		}
	}
	if (fsync(io.fd) < 0) {
		r = -errno;
		goto out_close;
	}
	close(io.fd);
	io.fd = -1;
	if (rename(tmp, path) < 0) {
		r = -errno;
		goto out_unlink;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(io.buf);
	return 0;

out_close:
	close(io.fd);
out_unlink:
	unlink(tmp);
out_free:
	free(io.buf);
	return r;
}

static int snap_get(void *ctx, void *p, size_t len)
{
	struct snap_io *io = ctx;

	if (len > io->left)
		return -EBADMSG;
	while (len) {
		size_t k;

		if (io->off == io->len) {
			size_t want = io->left < SNAP_BUF ? (size_t)io->left : SNAP_BUF;
			ssize_t got = read(io->fd, io->buf, want);

			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0)
				return got < 0 ? -errno : -EBADMSG;
			io->len = (size_t)got;
			io->off = 0;
		}
		k = io->len - io->off < len ? io->len - io->off : len;
		memcpy(p, io->buf + io->off, k);
		io->crc = crc32c(io->crc, io->buf + io->off, k);
		io->off += k;
		p = (uint8_t *)p + k;
		len -= k;
		io->left -= k;
	}
	return 0;
}

int matcher_snapshot_load(const char *path, uint32_t partition, struct engine *e,
			  struct matcher_snap_hdr *h, const char **why)
{
	uint8_t hdr[MATCHER_SNAP_HDR_LEN];
	uint32_t crcs[2];
	struct snap_io io = { .fd = -1 };
	struct stat sb;
	int r;

	io.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (io.fd < 0) {
		*why = "cannot open";
		return -errno;
	}
	r = -EBADMSG;
	*why = "short or damaged header";
	if (fstat(io.fd, &sb) < 0 || read(io.fd, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr))
		goto out_close;
	memcpy(h, hdr, sizeof(*h));
	if (memcmp(h->magic, SNAP_MAGIC, 8) != 0)
		goto out_close;
	*why = "another format version";
	if (h->version != MATCHER_SNAP_VERSION)
		goto out_close;
	*why = "another partition's";
	if (h->partition != partition)
		goto out_close;
	*why = "truncated or of the wrong length";
	if ((uint64_t)sb.st_size != MATCHER_SNAP_HDR_LEN + h->body_len + sizeof(crcs) ||
	    pread(io.fd, crcs, sizeof(crcs), (off_t)(MATCHER_SNAP_HDR_LEN + h->body_len)) !=
		    (ssize_t)sizeof(crcs))
		goto out_close;
	*why = "header CRC mismatch";
	if (crc32c(0, hdr, sizeof(hdr)) != crcs[0])
		goto out_close;
	/* the body's CRC first, in one pass, so that nothing damaged is parsed */
	io.buf = malloc(SNAP_BUF);
	if (!io.buf) {
		r = -ENOMEM;
		*why = "out of memory";
		goto out_close;
	}
	io.left = h->body_len;
	r = 0;
	while (io.left) {
		uint8_t scratch[4096];
		size_t k = io.left < sizeof(scratch) ? (size_t)io.left : sizeof(scratch);

		if ((r = snap_get(&io, scratch, k)) < 0)
			break;
	}
	*why = "body CRC mismatch";
	if (r < 0 || io.crc != crcs[1]) {
		r = -EBADMSG;
		goto out_close;
	}
	lseek(io.fd, MATCHER_SNAP_HDR_LEN, SEEK_SET);
	io.left = h->body_len;
	io.len = io.off = 0;
	io.crc = 0;
	*why = "content does not load (another symbol list or limits?)";
	if ((r = engine_snapshot_read(e, snap_get, &io)) < 0)
		goto out_close;
	*why = "loaded state's hash differs from the header's";
	r = -EBADMSG;
	if (io.left != 0 || engine_hash(e) != h->hash)
		goto out_close;
	r = 0;
out_close:
	free(io.buf);
	close(io.fd);
	return r;
}
