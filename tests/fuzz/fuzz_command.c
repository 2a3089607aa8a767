/* The matcher's Command decoder (matcher/command.c): the input is the body
 * of a tape event. Whatever command_decode() accepts has NUL-terminated
 * strings within their fields; and on a canonical encoding (protobuf-c
 * unpacks it and packs it back to the same bytes) it agrees exactly with
 * protobuf-c's unpack and convert_command(), the reference. Aborts on a
 * broken invariant. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "convert.h"
#include "lockstep.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok)
		abort();
}

static int terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

static void check_strings(const struct engine_cmd *e)
{
	check(terminated(e->user, sizeof(e->user)) && terminated(e->firm, sizeof(e->firm)));
	switch (e->kind) {
	case ENGINE_ENTER:
		check(terminated(e->u.enter.token, sizeof(e->u.enter.token)) &&
		      terminated(e->u.enter.stock, sizeof(e->u.enter.stock)) &&
		      terminated(e->u.enter.firm, sizeof(e->u.enter.firm)));
		break;
	case ENGINE_REPLACE:
		check(terminated(e->u.replace.existing_token, sizeof(e->u.replace.existing_token)) &&
		      terminated(e->u.replace.replacement_token,
				 sizeof(e->u.replace.replacement_token)));
		break;
	case ENGINE_CANCEL:
		check(terminated(e->u.cancel.token, sizeof(e->u.cancel.token)));
		break;
	case ENGINE_MODIFY:
		check(terminated(e->u.modify.token, sizeof(e->u.modify.token)));
		break;
	default:
		check(e->kind == ENGINE_CANCEL_ALL);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct engine_cmd e, r;
	uint32_t part;
	int rc = command_decode(data, size, &e, &part);
	Lockstep__Command *ref;
	uint8_t *again;
	size_t n;

	if (rc == 0)
		check_strings(&e);
	ref = lockstep__command__unpack(NULL, size, data);
	if (!ref)
		return 0;
	n = lockstep__command__get_packed_size(ref);
	again = malloc(n ? n : 1);
	check(again != NULL);
	lockstep__command__pack(ref, again);
	if (n == size && memcmp(again, data, size) == 0) {
		memset(&r, 0, sizeof(r));
		check(convert_command(ref, &r) == rc);
		check(rc != 0 || (memcmp(&e, &r, sizeof(e)) == 0 && part == ref->partition));
	}
	free(again);
	lockstep__command__free_unpacked(ref, NULL);
	return 0;
}
