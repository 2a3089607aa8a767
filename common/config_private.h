/* What the configuration's files share (config.h is the interface):
 *  - config.c: loading (defaults, the INI file through libinih, overrides)
 *    against the key table, and the error messages;
 *  - config_value.c: parsing a value by its key's type, and formatting
 *    bounds as they would be written;
 *  - config_help.c: the key table printed for --help. */
#ifndef LOCKSTEP_CONFIG_PRIVATE_H
#define LOCKSTEP_CONFIG_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

#define CFG_QUOTE_MAX 48 /* longest value quoted in an error message */

/* The key has a range (min and max not both 0). */
static inline bool cfg_bounded(const struct config_key *k)
{
	return k->min != 0 || k->max != 0;
}

/* Parses text as k's type into dst (k's field in the scratch struct).
 * Returns 0, or -EINVAL with why saying what is wrong with the value. */
int config_value_parse(const struct config_key *k, const char *text, unsigned char *dst,
		       char *why, size_t len);
/* The value as it appears in messages: quoted, cut after CFG_QUOTE_MAX bytes;
 * returns buf. */
const char *config_value_quote(const char *value, char *buf, size_t len);
/* A bound (k->min or k->max) as it would be written in the file. */
void config_value_bound(const struct config_key *k, double d, char *buf, size_t len);

#endif
