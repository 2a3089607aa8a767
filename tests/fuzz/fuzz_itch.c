/* Fuzz target for the ITCH 5.0 codec. Aborts on a broken invariant:
 *
 * 1. The input is decoded as one message. A decode error is one of the
 *    decoder's codes (never ITCH_E_NOSPACE), and a success has the input's
 *    length equal to itch_len of its type. A success re-encodes to the very
 *    same bytes (the codec is canonical: the decoder refuses what the
 *    encoder would write otherwise); re-decoding them gives a struct equal
 *    to the first with memcmp (the decoder zeroes what it does not fill);
 *    encoding into one byte too few is ITCH_E_NOSPACE and writes nothing.
 * 2. The input is read as an ITCH file (each message preceded by its
 *    length, u16 big-endian: ITCH_FILE_PREFIX) up to the first length
 *    that overruns it, and every message is held to 1.
 * 3. The input's bytes, taken as a raw struct itch_msg (strings without a
 *    NUL, any byte anywhere), are encoded: a success decodes back, and the
 *    decoded struct re-encodes to the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "itch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_decoded(const struct itch_msg *m, const uint8_t *data, size_t size)
{
	uint8_t buf[ITCH_MAX_LEN + 1];
	struct itch_msg again;
	int n;

	if (size != itch_len(data[0]) || m->type != (char)data[0])
		abort();
	n = itch_encode(m, buf, sizeof(buf));
	if (n < 0 || (size_t)n != size || memcmp(buf, data, size) != 0)
		abort();
	memset(buf, 0x5a, sizeof(buf));
	if (itch_encode(m, buf, size - 1) != ITCH_E_NOSPACE)
		abort();
	for (size_t k = 0; k < sizeof(buf); k++)
		if (buf[k] != 0x5a)
			abort();
	if (itch_decode(data, size, &again) != ITCH_OK || memcmp(m, &again, sizeof(again)) != 0)
		abort();
}

static void decode_one(const uint8_t *data, size_t size)
{
	struct itch_msg m, untouched;
	int rc;

	memset(&m, 0xa5, sizeof(m));
	memcpy(&untouched, &m, sizeof(m));
	rc = itch_decode(data, size, &m);
	if (rc == ITCH_OK) {
		check_decoded(&m, data, size);
		return;
	}
	if (rc != ITCH_E_EMPTY && rc != ITCH_E_TYPE && rc != ITCH_E_LEN && rc != ITCH_E_ALPHA &&
	    rc != ITCH_E_FIELD)
		abort();
	if (memcmp(&m, &untouched, sizeof(m)) != 0) /* *out untouched on error */
		abort();
	if (rc == ITCH_E_TYPE && itch_len((char)data[0]) != 0)
		abort();
	if (rc == ITCH_E_LEN && itch_len((char)data[0]) == size)
		abort();
}

static void decode_file(const uint8_t *data, size_t size)
{
	size_t pos = 0;

	while (size - pos >= ITCH_FILE_PREFIX) {
		size_t len = (size_t)data[pos] << 8 | data[pos + 1];

		pos += ITCH_FILE_PREFIX;
		if (len > size - pos)
			break;
		decode_one(data + pos, len);
		pos += len;
	}
}

static void encode_raw_struct(const uint8_t *data, size_t size)
{
	uint8_t buf[ITCH_MAX_LEN], again[ITCH_MAX_LEN];
	struct itch_msg m, back;
	int n;

	if (size < sizeof(m))
		return;
	memcpy(&m, data, sizeof(m));
	n = itch_encode(&m, buf, sizeof(buf));
	if (n < 0) {
		if (n != ITCH_E_TYPE && n != ITCH_E_ALPHA && n != ITCH_E_FIELD)
			abort();
		return;
	}
	if ((size_t)n != itch_len(m.type))
		abort();
	if (itch_decode(buf, (size_t)n, &back) != ITCH_OK)
		abort();
	if (itch_encode(&back, again, sizeof(again)) != n || memcmp(buf, again, (size_t)n) != 0)
		abort();
	decode_one(buf, (size_t)n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	decode_one(data, size);
	decode_file(data, size);
	encode_raw_struct(data, size);
	return 0;
}
