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

/* A receiver's retransmission servers: the tape recorders near it (`near`,
 * a list or blank: none) then `far` (a list: the sequencers), into
 * out[0..count); *n_near is how many of them are near (common/rx.h).
 * Errors as addrlist_parse(), -E2BIG when both lists hold more than max. */
int addrlist_parse_near(const char *near, const char *far, struct sockaddr_in *out, int max,
			unsigned *n_near);

/* A list of hosts ("10.0.0.2, gw-host"; an item with ":port" is taken as
 * the host only): the members allowed to send on a surface. An empty or
 * blank list gives 0 (no restriction); errors as addrlist_parse(). */
int addrlist_parse_hosts(const char *list, struct sockaddr_in *out, int max);
/* 1 when a's address is one of list[0..n) (n 0: any address is). */
int addrlist_has_host(const struct sockaddr_in *list, int n, const struct sockaddr_in *a);

#endif
