/* The gateway's write-ahead journal records (gateway/wal_record.c): any
 * input either is refused or parses into a name of letters and digits, a
 * seq and a record that encode back into the same bytes. Aborts on a
 * broken invariant. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gw_private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[CREDS_LOGIN_LEN + 1];
	uint8_t again[GW_WAL_RECORD_MAX];
	const uint8_t *rec;
	size_t rec_len, n;
	uint64_t seq;

	if (gw_wal_parse(data, size, name, &seq, &rec, &rec_len) < 0)
		return 0;
	n = strlen(name);
	if (n == 0 || n > CREDS_LOGIN_LEN || rec_len < 8 || rec < data || rec + rec_len != data + size)
		abort();
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'A' && name[i] <= 'Z') ||
		      (name[i] >= 'a' && name[i] <= 'z')))
			abort();
	if (gw_wal_encode(again, name, seq, rec, rec_len) != size || memcmp(again, data, size) != 0)
		abort();
	return 0;
}
