/* A GLIMPSE snapshot's image (glimpse.h): ready-made SoupBinTCP packets
 * of one ITCH message each, the End of Snapshot last. Pure: it allocates
 * only to grow the buffer, and does not log. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glimpse.h"
#include "itch.h"
#include "soupbin.h"

void glimpse_image_reset(struct glimpse_image *img)
{
	img->len = 0;
	img->messages = 0;
	img->available = 0;
	img->err = 0;
	img->session[0] = '\0';
	img->next = 0;
	img->build_ns = 0;
}

int glimpse_image_reserve(struct glimpse_image *img, size_t bytes)
{
	size_t want = img->cap ? img->cap : 4096;
	uint8_t *p;

	if (img->err)
		return img->err;
	if (bytes <= img->cap - img->len)
		return 0;
	while (want - img->len < bytes) {
		if (want > SIZE_MAX / 2)
			return img->err = -ENOMEM;
		want *= 2;
	}
	if (!(p = realloc(img->buf, want)))
		return img->err = -ENOMEM;
	img->buf = p;
	img->cap = want;
	return 0;
}

int glimpse_image_add(struct glimpse_image *img, const uint8_t *msg, size_t len)
{
	int n;

	if (img->err)
		return img->err;
	if (len == 0 || len > ITCH_MAX_LEN)
		return img->err = -EINVAL;
	if (glimpse_image_reserve(img, SOUP_HEADER_LEN + len) < 0)
		return img->err;
	n = soup_build_sequenced(img->buf + img->len, img->cap - img->len, msg, (uint16_t)len);
	if (n < 0)
		return img->err = -EINVAL;
	img->len += (size_t)n;
	img->messages++;
	return 0;
}

int glimpse_image_end(struct glimpse_image *img, const char *session, uint64_t next)
{
	struct itch_msg m = { .type = ITCH_END_OF_SNAPSHOT };
	uint8_t msg[ITCH_END_OF_SNAPSHOT_LEN], pkt[SOUP_LOGIN_ACCEPTED_LEN + 2];
	int n;

	m.u.end_of_snapshot.seq = next;
	n = itch_encode(&m, msg, sizeof(msg));
	/* the session must go into a Login Accepted */
	if (n < 0 || soup_build_login_accepted(pkt, sizeof(pkt), session, 1) < 0)
		return img->err = -EINVAL;
	if (glimpse_image_add(img, msg, (size_t)n) < 0)
		return img->err;
	snprintf(img->session, sizeof(img->session), "%s", session);
	img->next = next;
	img->available = 1;
	return 0;
}

void glimpse_image_free(struct glimpse_image *img)
{
	free(img->buf);
	memset(img, 0, sizeof(*img));
}
