/* The logins' write-ahead journal's records (gw_private.h: the format;
 * wal.c writes and replays them). Pure: no state, no system call. */
#include <errno.h>
#include <string.h>

#include "gw_private.h"
#include "wire.h"

size_t gw_wal_encode(uint8_t *out, const char *name, uint64_t seq, const uint8_t *rec, size_t len)
{
	size_t n = strlen(name);

	out[0] = (uint8_t)n;
	memcpy(out + 1, name, n);
	wire_put_u64(out + 1 + n, seq);
	memcpy(out + 1 + n + 8, rec, len);
	return 1 + n + 8 + len;
}

int gw_wal_parse(const uint8_t *p, size_t len, char name[CREDS_LOGIN_LEN + 1], uint64_t *seq,
		 const uint8_t **rec, size_t *rec_len)
{
	size_t n = len ? p[0] : 0;

	if (n == 0 || n > CREDS_LOGIN_LEN || len < 1 + n + 8 + 8 || len > GW_WAL_RECORD_MAX)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++)
		if (!((p[1 + i] >= '0' && p[1 + i] <= '9') || (p[1 + i] >= 'A' && p[1 + i] <= 'Z') ||
		      (p[1 + i] >= 'a' && p[1 + i] <= 'z')))
			return -EBADMSG;
	memcpy(name, p + 1, n);
	name[n] = '\0';
	*seq = wire_get_u64(p + 1 + n);
	*rec = p + 1 + n + 8;
	*rec_len = len - 1 - n - 8;
	return 0;
}
