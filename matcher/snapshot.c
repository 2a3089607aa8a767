/* The matcher's snapshot files (snapshot.h): the image of the engine built
 * in memory, the file written from it (.tmp, fsync, rename), and the checked
 * load. lockstep-replay rebuild writes them too; the daemon's snapshot
 * directory and its writer thread are snapdir.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "durable.h"
#include "snapshot.h"

#define SNAP_MAGIC "LSSNAP\0\1"
#define SNAP_BUF (1 << 20)

_Static_assert(sizeof(struct matcher_snap_hdr) <= MATCHER_SNAP_HDR_LEN, "snapshot header");

struct snap_io {
	int fd;
	uint32_t crc;
	uint64_t left; /* body bytes left */
	size_t len, off;
	uint8_t *buf;
};

void matcher_snapshot_path(char *out, size_t cap, const char *dir, uint64_t seq)
{
	snprintf(out, cap, "%s/snap-%020llu.lss", dir, (unsigned long long)seq);
}

/* --- writing: the image in memory, then the file ------------------------ */

static int image_put(void *ctx, const void *p, size_t len)
{
	struct matcher_snap_image *im = ctx;

	if (len > im->cap - im->len) {
		size_t cap = im->cap ? im->cap : SNAP_BUF;
		uint8_t *b;

		while (len > cap - im->len) {
			if (cap > SIZE_MAX / 2)
				return -ENOMEM;
			cap *= 2;
		}
		if (!(b = realloc(im->buf, cap)))
			return -ENOMEM;
		im->buf = b;
		im->cap = cap;
	}
	memcpy(im->buf + im->len, p, len);
	im->len += len;
	return 0;
}

int matcher_snapshot_image(struct matcher_snap_image *im, const struct engine *e,
			   const struct matcher_snap_feed *feed)
{
	struct matcher_snap_feed none = { 0 };
	int r;

	im->len = 0;
	if ((r = engine_snapshot_write(e, image_put, im)) < 0 ||
	    (r = image_put(im, feed ? feed : &none, sizeof(none))) < 0)
		return r;
	im->crc = crc32c(0, im->buf, im->len);
	return 0;
}

void matcher_snapshot_image_free(struct matcher_snap_image *im)
{
	free(im->buf);
	memset(im, 0, sizeof(*im));
}

int matcher_snapshot_write_image(const char *dir, struct matcher_snap_hdr *h,
				 const struct matcher_snap_image *im)
{
	char path[4096];
	uint8_t hdr[MATCHER_SNAP_HDR_LEN] = { 0 };
	uint32_t crcs[2];
	struct iovec iov[3];

	matcher_snapshot_path(path, sizeof(path), dir, h->seq);
	memcpy(h->magic, SNAP_MAGIC, 8);
	h->version = MATCHER_SNAP_VERSION;
	h->body_len = im->len;
	memcpy(hdr, h, sizeof(*h));
	/* the trailer holds two CRC32Cs: u32 crc32c(header), u32 crc32c(body) */
	crcs[0] = crc32c(0, hdr, sizeof(hdr));
	crcs[1] = im->crc;
	iov[0] = (struct iovec){ hdr, sizeof(hdr) };
	iov[1] = (struct iovec){ im->buf, im->len };
	iov[2] = (struct iovec){ crcs, sizeof(crcs) };
	return durable_write(path, iov, 3, 0640);
}

int matcher_snapshot_write(const char *dir, struct matcher_snap_hdr *h, const struct engine *e,
			   const struct matcher_snap_feed *feed)
{
	struct matcher_snap_image im = { 0 };
	int r = matcher_snapshot_image(&im, e, feed);

	h->hash = engine_hash(e);
	if (r == 0)
		r = matcher_snapshot_write_image(dir, h, &im);
	matcher_snapshot_image_free(&im);
	return r;
}

/* --- reading ------------------------------------------------------------- */

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
			  struct matcher_snap_hdr *h, struct matcher_snap_feed *feed,
			  const char **why)
{
	struct matcher_snap_feed pos = { 0 };
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
	if (h->version != MATCHER_SNAP_VERSION && h->version != 1)
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
	*why = "no feed position after the engine's state";
	if (h->version >= 2 && (r = snap_get(&io, &pos, sizeof(pos))) < 0)
		goto out_close;
	*why = "loaded state's hash differs from the header's";
	r = -EBADMSG;
	if (io.left != 0 || engine_hash(e) != h->hash)
		goto out_close;
	if (feed)
		*feed = pos;
	r = 0;
out_close:
	free(io.buf);
	close(io.fd);
	return r;
}
