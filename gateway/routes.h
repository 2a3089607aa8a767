/* Partition routing (routes.c). */
#ifndef LOCKSTEP_GW_ROUTES_H
#define LOCKSTEP_GW_ROUTES_H

#include <stddef.h>
#include <stdint.h>

struct gw_config;
struct ouch_msg;

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
/* The token table (route_tokens.c), partitions > 1 only. It remembers
 * max_tokens tokens, live and dead: the tokens of every live order (never
 * forgotten) and of the orders that died most recently; the oldest dead
 * token is forgotten when room is needed. A token is learned from the
 * commands (gw_route_enter, gw_route_maybe) and from the execution streams
 * (gw_route_learn), which say when its order dies. */

/* The partition remembered for (login, token), live or dead, or -ENOENT.
 * login: any number that names the login for the day (the gateway's login
 * index); token: len bytes, trailing blanks or NULs ignored. */
int gw_route_token(const struct gw_routes *r, uint32_t login, const char *token, size_t len);
/* An Enter Order's new token, once its command is journalled: live in
 * part, pending its answer. 0; -EEXIST when known (it stays as it was);
 * -ENOSPC when max_tokens orders live; -EINVAL with one partition. */
int gw_route_enter(struct gw_routes *r, uint32_t login, const char *token, size_t len,
		   unsigned part);
/* A token that may never live (a Replace's replacement token, which the
 * matcher may ignore; a token of the command journal at start): remembered
 * in part as dead, until an Accepted or Replaced makes it live. 0, -EEXIST,
 * -ENOSPC (every token live and the slack, up to 3/4 of the slots, full),
 * -EINVAL. */
int gw_route_maybe(struct gw_routes *r, uint32_t login, const char *token, size_t len,
		   unsigned part);
/* What a message of partition part's execution stream for login says of
 * its tokens (m: decoded by ouch_decode_outbound): Accepted and Replaced
 * make a token live with its shares (the previous token of a Replaced
 * dies), Canceled, AIQ Canceled, Executed and Order Modified take shares
 * (none left: dead), Rejected kills a pending token. 0; -ENOSPC when a
 * live token could not be remembered (every token live, slack full). */
int gw_route_learn(struct gw_routes *r, uint32_t login, unsigned part, const struct ouch_msg *m);
/* 1 when an Enter Order's new token cannot be remembered: max_tokens live. */
int gw_route_full(const struct gw_routes *r);
uint64_t gw_route_count(const struct gw_routes *r); /* tokens remembered */

struct gw_route_counts {
	uint64_t tokens, live, dead; /* remembered: tokens = live + dead */
	uint64_t forgotten; /* dead tokens forgotten to make room, ever */
	uint64_t max, slots; /* max_tokens; the table's slots */
};
void gw_route_counts(const struct gw_routes *r, struct gw_route_counts *c);
/* The table's invariants (tests and fuzzers): 0, or -EBADMSG. */
int gw_route_verify(const struct gw_routes *r);

#endif
