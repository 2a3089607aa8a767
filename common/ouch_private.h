/* The OUCH codec's insides, shared by its files (ouch.h is the interface):
 *  - ouch.c: the field tables, the table-driven decoders and encoders,
 *    validation and formatting;
 *  - ouch_encode.c: ouch_encode_outbound, with straight-line encoders for
 *    the types the matcher sends most and the table for the rest.
 * The tests and the fuzzer include this header to compare the two paths. */
#ifndef LOCKSTEP_OUCH_PRIVATE_H
#define LOCKSTEP_OUCH_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include "ouch.h"

/* ouch_encode_outbound by the field table alone, whatever the type: the
 * reference the straight-line encoders must match byte for byte and error
 * for error. */
int ouch_encode_outbound_table(const struct ouch_msg *msg, uint8_t *out, size_t cap);

#endif
