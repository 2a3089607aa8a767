/* Lists of addresses in configuration values: "host:port, host:port, ...".
 * Library code: nothing here logs. */
#ifndef LOCKSTEP_ADDRLIST_H
#define LOCKSTEP_ADDRLIST_H

#include <netinet/in.h>

#define ADDRLIST_MAX 64 /* the largest `max` addrlist_parse takes */

/* Parses a comma-separated list of net_parse_addr() items ("host:port" or
 * "port"; blanks, spaces and tabs, are allowed around each item) into
 * out[0..count) and returns count, 1..max. On any error out is left
 * untouched: -EINVAL for an empty list, an empty or malformed item (no
 * blank inside an item, no trailing comma) or max outside
 * 1..ADDRLIST_MAX; -E2BIG for more than max items; a host name that
 * does not resolve gives net_parse_addr()'s error (-ENOENT, -EAGAIN). */
int addrlist_parse(const char *list, struct sockaddr_in *out, int max);

#endif
