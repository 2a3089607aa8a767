/* The tape's retransmission server, written once for the sequencer (every
 * member answers up to the commit it knows) and the tape recorder (up to
 * what it has journalled): requests for journalled events, answered with
 * tape datagrams rebuilt from the journal, each in its day's session
 * (common/tapeday.h) and never across two days; the too-old answer
 * (common/rx.h) for what the journal no longer holds; each requester's
 * byte budget ([node] retrans_budget, common/srcbudget.h); the tags
 * (common/auth_node.h). Daemon-side: it logs (rate-limited); nothing is
 * allocated after tape_server_init. */
#ifndef LOCKSTEP_TAPESERVE_H
#define LOCKSTEP_TAPESERVE_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "journal.h"
#include "net.h"
#include "srcbudget.h"
#include "tapeday.h"

struct tape_server_stats {
	uint64_t requests; /* well-formed requests served */
	uint64_t answers; /* requests answered with at least one datagram */
	uint64_t bad_requests; /* wrong length or session */
	uint64_t blocks_sent, packets_sent, bytes_sent;
	uint64_t too_old; /* requests older than the journal, told so */
	uint64_t budget_refused; /* answers cut short by the requester's budget */
};

struct tape_server {
	int fd; /* the socket requests come in on and answers leave by */
	struct net_batch out; /* an answer's datagrams */
	struct src_budget budget;
	struct tape_server_stats st;
};

/* packets: datagrams an answer holds at most, each of dgram bytes;
 * budget: bytes a second per requester (0: no limit). fd is set by the
 * owner. 0 or -ENOMEM. */
int tape_server_init(struct tape_server *t, unsigned packets, size_t dgram, uint64_t budget);
void tape_server_fini(struct tape_server *t);

/* Fills batch b with tape datagrams of at most cap bytes holding the
 * consecutive journalled events [from, to] (in their days' sessions from
 * days); returns the datagrams, and the events through *blocks. */
unsigned tape_journal_read(struct journal *j, const struct tapeday *days, struct net_batch *b,
			   size_t cap, uint64_t from, uint64_t to, uint64_t *blocks);

/* One request packet (its tag checked and removed) from `from`: answers
 * what j holds of it up to index `last` (0: nothing yet). now: monotonic
 * ns, for the budget. */
void tape_server_serve(struct tape_server *t, struct journal *j, const struct tapeday *days,
		       const uint8_t *buf, size_t len, const struct sockaddr_in *from,
		       uint64_t last, uint64_t now);

#endif
