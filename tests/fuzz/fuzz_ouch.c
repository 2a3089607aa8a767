/* Fuzz target for the OUCH 4.2 codec. Aborts on a broken invariant:
 *
 * 1. The input is decoded as inbound and as outbound. A decode error is one
 *    of the listed codes. A success re-encodes to the very same bytes: the
 *    decoder trims trailing spaces from alpha fields and the encoder pads
 *    them back with spaces, and every other field is copied exactly, so no
 *    difference is legitimate. Re-decoding those bytes gives a struct equal
 *    to the first with memcmp (the decoder zeroes everything it does not
 *    fill). Encoding into one byte too few is OUCH_E_NOSPACE.
 * 2. Validation of a decoded Enter or Replace gives 0 or a reason with text.
 * 3. Every decoded message formats into a small buffer (and into 0 and 1
 *    bytes) with a return value equal to what was written.
 * 4. The input's bytes, taken as a raw struct ouch_msg (strings without a
 *    NUL, any byte anywhere), are encoded in both directions: a success
 *    decodes back and re-encodes to the same bytes; formatting it stays
 *    within bounds.
 * 5. Every outbound encode above (of a decoded message and of a raw struct,
 *    with enough room and one byte short) gives the same return and the
 *    same buffer through ouch_encode_outbound's per-type encoders and
 *    through the field table (ouch_encode_outbound_table). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ouch.h"
#include "ouch_private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Invariant 5: both outbound paths, into buffers filled alike. */
static int encode_outbound_both(const struct ouch_msg *m, uint8_t *out, size_t cap)
{
	uint8_t fast[OUCH_MAX_LEN + 8], table[OUCH_MAX_LEN + 8];
	int rf, rt;

	if (cap > OUCH_MAX_LEN)
		cap = OUCH_MAX_LEN;
	memset(fast, 0x5a, sizeof(fast));
	memset(table, 0x5a, sizeof(table));
	rf = ouch_encode_outbound(m, fast, cap);
	rt = ouch_encode_outbound_table(m, table, cap);
	if (rf != rt || memcmp(fast, table, sizeof(fast)) != 0)
		abort();
	if (rf > 0)
		memcpy(out, fast, (size_t)rf);
	return rf;
}

static void check_format(const struct ouch_msg *m)
{
	char line[48];
	int n;

	n = ouch_format(m, line, sizeof(line));
	if (n < 0 || (size_t)n >= sizeof(line) || strlen(line) != (size_t)n)
		abort();
	if (ouch_format(m, line, 1) != 0 || line[0] != '\0')
		abort();
	if (ouch_format(m, NULL, 0) != 0)
		abort();
}

static void check_reason(int r)
{
	if (r == 0)
		return;
	if (r < 0x20 || r > 0x7e || strcmp(ouch_reject_reason_str((char)r), "unknown") == 0)
		abort();
}

static void check_decoded(const struct ouch_msg *m, const uint8_t *data, size_t size,
			  int inbound)
{
	uint8_t buf[OUCH_MAX_LEN];
	struct ouch_msg again;
	int n;

	if (m->inbound != inbound)
		abort();
	n = inbound ? ouch_encode_inbound(m, buf, sizeof(buf))
		    : encode_outbound_both(m, buf, sizeof(buf));
	if (n < 0 || (size_t)n != size || memcmp(buf, data, size) != 0)
		abort();
	if ((inbound ? ouch_encode_inbound(m, buf, size - 1)
		     : encode_outbound_both(m, buf, size - 1)) != OUCH_E_NOSPACE)
		abort();
	if ((inbound ? ouch_decode_inbound(buf, size, &again)
		     : ouch_decode_outbound(buf, size, &again)) != OUCH_OK)
		abort();
	if (memcmp(m, &again, sizeof(again)) != 0)
		abort();
	if (inbound && m->type == OUCH_ENTER_ORDER) {
		check_reason(ouch_validate_enter(&m->u.enter, 1000000));
		check_reason(ouch_validate_enter(&m->u.enter, 0));
		check_reason(ouch_validate_enter(&m->u.enter, UINT32_MAX));
		(void)ouch_price_on_tick(m->u.enter.price);
	} else if (inbound && m->type == OUCH_REPLACE_ORDER) {
		check_reason(ouch_validate_replace(&m->u.replace, 1000000));
		check_reason(ouch_validate_replace(&m->u.replace, UINT32_MAX));
		(void)ouch_price_on_tick(m->u.replace.price);
	}
	check_format(m);
}

static void decode_both_ways(const uint8_t *data, size_t size)
{
	for (int inbound = 0; inbound <= 1; inbound++) {
		struct ouch_msg m;
		int rc = inbound ? ouch_decode_inbound(data, size, &m)
				 : ouch_decode_outbound(data, size, &m);

		if (rc == OUCH_OK)
			check_decoded(&m, data, size, inbound);
		else if (rc != OUCH_E_EMPTY && rc != OUCH_E_UNKNOWN_TYPE && rc != OUCH_E_LENGTH &&
			 rc != OUCH_E_FIELD)
			abort();
	}
}

static void encode_raw_struct(const uint8_t *data, size_t size)
{
	struct ouch_msg m;

	if (size < sizeof(m))
		return;
	memcpy(&m, data, sizeof(m));
	for (int inbound = 0; inbound <= 1; inbound++) {
		uint8_t buf[OUCH_MAX_LEN], again[OUCH_MAX_LEN];
		struct ouch_msg back;
		int n = inbound ? ouch_encode_inbound(&m, buf, sizeof(buf))
				: encode_outbound_both(&m, buf, sizeof(buf));

		if (n < 0)
			continue;
		if ((inbound ? ouch_decode_inbound(buf, (size_t)n, &back)
			     : ouch_decode_outbound(buf, (size_t)n, &back)) != OUCH_OK)
			abort();
		if ((inbound ? ouch_encode_inbound(&back, again, sizeof(again))
			     : encode_outbound_both(&back, again, sizeof(again))) != n ||
		    memcmp(buf, again, (size_t)n) != 0)
			abort();
	}
	check_format(&m);
	check_reason(ouch_validate_enter(&m.u.enter, 5000));
	check_reason(ouch_validate_replace(&m.u.replace, 5000));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	decode_both_ways(data, size);
	encode_raw_struct(data, size);
	return 0;
}
