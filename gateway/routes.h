/* Partition routing (routes.c). */
#ifndef LOCKSTEP_GW_ROUTES_H
#define LOCKSTEP_GW_ROUTES_H

#include <stddef.h>
#include <stdint.h>

struct gw_config;

/* Which partition a command goes to. An Enter Order goes to the partition
 * whose symbols list its symbol; when no partition lists symbols, to
 * gw_route_symbol_hash(symbol) % partitions. Cancel, Replace and Modify carry no
 * symbol: they go where their order token went, which the token table
 * remembers per login (partitions > 1 only; one partition needs no table). */
struct gw_routes;

/* Checks the partitions of cfg (every partition below `partitions` has an
 * exec_group and exec_retrans, none above is configured, symbols listed
 * for every partition or for none, no symbol twice, distinct exec groups)
 * and builds the tables; err says what is wrong ([section] key: why). */
int gw_routes_open(struct gw_routes **out, const struct gw_config *cfg, char *err,
		   size_t errlen);
void gw_routes_close(struct gw_routes *r); /* accepts NULL */
unsigned gw_routes_parts(const struct gw_routes *r);
/* 1 when the partitions list their symbols (a symbol listed nowhere is
 * refused), 0 when symbols are spread by hash. */
int gw_routes_listed(const struct gw_routes *r);
/* FNV-1a (32 bits) of the symbol's characters without trailing blanks. */
uint32_t gw_route_symbol_hash(const char *stock, size_t len);
/* The partition of a symbol (len bytes, trailing blanks or NULs ignored),
 * or -ENOENT when symbols are listed and no partition lists it. */
int gw_route_symbol(const struct gw_routes *r, const char *stock, size_t len);
/* The partition remembered for (login, token), or -ENOENT. login: any
 * number that names the login for the day (the gateway's login index);
 * token: len bytes, trailing blanks or NULs ignored. */
int gw_route_token(const struct gw_routes *r, uint32_t login, const char *token, size_t len);
/* Remembers (login, token) -> part: 0, -EEXIST when known (the first
 * partition stays), -ENOSPC when the table is full (`slack` 0: an
 * Enter Order, which may fill max_tokens; 1: a replacement token or one
 * learned from an execution stream, which may use the table's slack, up
 * to 3/4 of its slots), -EINVAL with one partition (no table). */
int gw_route_add(struct gw_routes *r, uint32_t login, const char *token, size_t len,
		 unsigned part, int slack);
/* 1 when an Enter Order's new token cannot be remembered. */
int gw_route_full(const struct gw_routes *r);
uint64_t gw_route_count(const struct gw_routes *r); /* tokens remembered */

#endif
