/* A day archive's container (dayarc.h): the push parser, the zstd stream
 * in front of it, and the writer. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "dayarc.h"
#include "durable.h"

static uint64_t get_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = n; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void expect(struct dayarc_reader *r, enum dayarc_state s, size_t want)
{
	r->state = s;
	r->have = 0;
	r->want = want;
}

static int refuse(struct dayarc_reader *r, const char *why)
{
	r->why = why;
	return -EBADMSG;
}

/* Exactly the names journal_seg_name() makes: 20 digits and ".seg". */
static int seg_name_ok(const char *name)
{
	for (int i = 0; i < 20; i++)
		if (name[i] < '0' || name[i] > '9')
			return 0;
	return memcmp(name + 20, ".seg", 4) == 0;
}

void dayarc_reader_init(struct dayarc_reader *r, const struct dayarc_ops *ops, void *ctx)
{
	memset(r, 0, sizeof(*r));
	r->ops = ops;
	r->ctx = ctx;
	expect(r, DAYARC_MAGIC_S, 8);
}

/* A fixed-size field is whole in r->field: acts on it. */
static int field_done(struct dayarc_reader *r)
{
	uint64_t v;
	int rc;

	switch (r->state) {
	case DAYARC_MAGIC_S:
		if (memcmp(r->field, DAYARC_MAGIC, 8) != 0)
			return refuse(r, "not a day archive (bad magic)");
		expect(r, DAYARC_COUNT_S, 4);
		return 0;
	case DAYARC_COUNT_S:
		r->count = (uint32_t)get_le(r->field, 4);
		if (r->count == 0 || r->count > DAYARC_MAX_SEGMENTS)
			return refuse(r, "bad segment count");
		expect(r, DAYARC_NAMELEN_S, 2);
		return 0;
	case DAYARC_NAMELEN_S:
		if (get_le(r->field, 2) != DAYARC_NAME_LEN)
			return refuse(r, "bad segment name length");
		expect(r, DAYARC_NAME_S, DAYARC_NAME_LEN);
		return 0;
	case DAYARC_NAME_S:
		memcpy(r->name, r->field, DAYARC_NAME_LEN);
		r->name[DAYARC_NAME_LEN] = 0;
		if (!seg_name_ok(r->name))
			return refuse(r, "bad segment name");
		if (r->seen && strcmp(r->name, r->prev) <= 0)
			return refuse(r, "segment names not ascending");
		memcpy(r->prev, r->name, sizeof(r->prev));
		expect(r, DAYARC_LENGTH_S, 8);
		return 0;
	case DAYARC_LENGTH_S:
		v = get_le(r->field, 8);
		if (v < DAYARC_SEG_HDR || v > DAYARC_MAX_SEGMENT)
			return refuse(r, "bad segment length");
		r->seen++;
		if (r->ops->begin && (rc = r->ops->begin(r->ctx, r->name, v)) < 0)
			return rc;
		r->left = v;
		expect(r, DAYARC_BYTES_S, 0);
		return 0;
	case DAYARC_TRAILER_S:
		if (memcmp(r->field, DAYARC_END, 8) != 0)
			return refuse(r, "bad trailer");
		expect(r, DAYARC_DONE_S, 0);
		return 0;
	default:
		return refuse(r, "reader state");
	}
}

int dayarc_reader_feed(struct dayarc_reader *r, const uint8_t *p, size_t n)
{
	int rc;

	if (r->why)
		return -EBADMSG;
	while (n) {
		if (r->state == DAYARC_DONE_S)
			return refuse(r, "bytes after the end");
		if (r->state == DAYARC_BYTES_S) {
			size_t k = n < r->left ? n : (size_t)r->left;

			if (r->ops->data && (rc = r->ops->data(r->ctx, p, k)) < 0)
				return rc;
			p += k;
			n -= k;
			r->left -= k;
			if (r->left)
				continue;
			if (r->ops->end && (rc = r->ops->end(r->ctx)) < 0)
				return rc;
			if (r->seen == r->count)
				expect(r, DAYARC_TRAILER_S, 8);
			else
				expect(r, DAYARC_NAMELEN_S, 2);
			continue;
		}
		size_t k = r->want - r->have < n ? r->want - r->have : n;

		memcpy(r->field + r->have, p, k);
		r->have += k;
		p += k;
		n -= k;
		if (r->have == r->want && (rc = field_done(r)) < 0)
			return rc;
	}
	return 0;
}

int dayarc_reader_finish(struct dayarc_reader *r)
{
	if (r->why)
		return -EBADMSG;
	return r->state == DAYARC_DONE_S ? 0 : refuse(r, "the archive ends early (truncated)");
}

int dayarc_is_archive(const char *path)
{
	uint8_t m[4];
	int fd = open(path, O_RDONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return 0;
	ok = read(fd, m, 4) == 4 && get_le(m, 4) == ZSTD_MAGICNUMBER;
	close(fd);
	return ok;
}

int dayarc_unpack_fd(int fd, const struct dayarc_ops *ops, void *ctx, const char **why)
{
	size_t in_cap = ZSTD_DStreamInSize(), out_cap = ZSTD_DStreamOutSize(), last = 1;
	uint8_t *in = malloc(in_cap), *out = malloc(out_cap);
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	struct dayarc_reader r;
	int rc = 0, any = 0;
	ssize_t n;

	*why = NULL;
	dayarc_reader_init(&r, ops, ctx);
	if (!in || !out || !dc) {
		rc = -ENOMEM;
		goto out;
	}
	while (rc == 0 && (n = read(fd, in, in_cap)) != 0) {
		ZSTD_inBuffer ib = { in, 0, 0 };

		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		ib.size = (size_t)n;
		any = 1;
		while (rc == 0 && ib.pos < ib.size) {
			ZSTD_outBuffer ob = { out, out_cap, 0 };

			last = ZSTD_decompressStream(dc, &ob, &ib);
			if (ZSTD_isError(last)) {
				*why = ZSTD_getErrorName(last);
				rc = -EBADMSG;
				break;
			}
			rc = dayarc_reader_feed(&r, out, ob.pos);
		}
	}
	/* what the decoder still holds of a frame fully read */
	while (rc == 0 && last != 0 && any) {
		ZSTD_inBuffer ib = { in, 0, 0 };
		ZSTD_outBuffer ob = { out, out_cap, 0 };

		last = ZSTD_decompressStream(dc, &ob, &ib);
		if (ZSTD_isError(last)) {
			*why = ZSTD_getErrorName(last);
			rc = -EBADMSG;
		} else if (ob.pos == 0) {
			*why = "the archive ends inside a zstd frame (truncated)";
			rc = -EBADMSG;
		} else {
			rc = dayarc_reader_feed(&r, out, ob.pos);
		}
	}
	if (rc == 0)
		rc = dayarc_reader_finish(&r);
	if (rc == -EBADMSG && !*why)
		*why = r.why;
out:
	ZSTD_freeDCtx(dc);
	free(in);
	free(out);
	return rc;
}

struct dayarc_writer {
	ZSTD_CCtx *cc;
	int fd;
	uint8_t *out;
	size_t cap;
};

/* Compresses p[0, n) with `mode` (ZSTD_e_end: until the frame is closed). */
static int writer_push(struct dayarc_writer *w, const void *p, size_t n, ZSTD_EndDirective mode)
{
	ZSTD_inBuffer ib = { p, n, 0 };
	size_t left;
	int rc;

	do {
		ZSTD_outBuffer ob = { w->out, w->cap, 0 };

		left = ZSTD_compressStream2(w->cc, &ob, &ib, mode);
		if (ZSTD_isError(left))
			return -EIO;
		if ((rc = durable_write_all(w->fd, w->out, ob.pos)) < 0)
			return rc;
	} while (mode == ZSTD_e_end ? left != 0 : ib.pos < ib.size);
	return 0;
}

int dayarc_writer_open(struct dayarc_writer **out, int fd, int level, uint32_t count)
{
	struct dayarc_writer *w = calloc(1, sizeof(*w));
	uint8_t h[12];
	int rc;

	if (!w)
		return -ENOMEM;
	w->fd = fd;
	w->cap = ZSTD_CStreamOutSize();
	w->out = malloc(w->cap);
	w->cc = ZSTD_createCCtx();
	if (!w->out || !w->cc) {
		dayarc_writer_abort(w);
		return -ENOMEM;
	}
	if (ZSTD_isError(ZSTD_CCtx_setParameter(w->cc, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cc, ZSTD_c_checksumFlag, 1))) {
		dayarc_writer_abort(w);
		return -EINVAL;
	}
	memcpy(h, DAYARC_MAGIC, 8);
	put_le(h + 8, count, 4);
	if ((rc = writer_push(w, h, sizeof(h), ZSTD_e_continue)) < 0) {
		dayarc_writer_abort(w);
		return rc;
	}
	*out = w;
	return 0;
}

int dayarc_writer_segment(struct dayarc_writer *w, const char *name, uint64_t len)
{
	uint8_t h[2 + DAYARC_NAME_LEN + 8];

	if (strlen(name) != DAYARC_NAME_LEN)
		return -EINVAL;
	put_le(h, DAYARC_NAME_LEN, 2);
	memcpy(h + 2, name, DAYARC_NAME_LEN);
	put_le(h + 2 + DAYARC_NAME_LEN, len, 8);
	return writer_push(w, h, sizeof(h), ZSTD_e_continue);
}

int dayarc_writer_data(struct dayarc_writer *w, const void *p, size_t n)
{
	return writer_push(w, p, n, ZSTD_e_continue);
}

int dayarc_writer_close(struct dayarc_writer *w)
{
	int rc = writer_push(w, DAYARC_END, 8, ZSTD_e_end);

	dayarc_writer_abort(w);
	return rc;
}

void dayarc_writer_abort(struct dayarc_writer *w)
{
	if (!w)
		return;
	ZSTD_freeCCtx(w->cc);
	free(w->out);
	free(w);
}
