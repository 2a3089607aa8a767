/* The flow-control status message (common/flowstatus.h): whatever
 * flow_status_decode() accepts has a printable, NUL-terminated name of 1..16
 * bytes and encodes back to the very same 40 bytes; what it refuses, it
 * refuses with -EBADMSG or -EPROTO; flow_status_is() is true of everything
 * accepted. Aborts on a broken invariant. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "flowstatus.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct flow_status st;
	uint8_t again[FLOW_STATUS_LEN];
	int rc = flow_status_decode(data, size, &st);
	size_t n;

	check(rc == 0 || rc == -EBADMSG || rc == -EPROTO);
	if (rc < 0)
		return 0;
	check(flow_status_is(data, size));
	n = strnlen(st.name, sizeof(st.name));
	check(n >= 1 && n <= FLOW_STATUS_NAME_LEN);
	for (size_t i = 0; i < n; i++)
		check(st.name[i] > 0x20 && st.name[i] < 0x7f);
	check(flow_status_encode(again, &st) == FLOW_STATUS_LEN);
	check(memcmp(again, data, FLOW_STATUS_LEN) == 0);
	return 0;
}
