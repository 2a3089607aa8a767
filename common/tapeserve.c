/* The tape's retransmission server (tapeserve.h). */
#include <errno.h>
#include <string.h>

#include "auth_node.h"
#include "log.h"
#include "moldudp64.h"
#include "rxpath.h"
#include "tapeserve.h"

/* the warnings this file logs, each kind at most 5 a second */
static struct log_ratelimit rl_serve = LOG_RATELIMIT_INIT(1, 5);

int tape_server_init(struct tape_server *t, unsigned packets, size_t dgram, uint64_t budget)
{
	memset(&t->st, 0, sizeof(t->st));
	src_budget_init(&t->budget, budget, 0);
	return net_batch_init(&t->out, packets, dgram) < 0 ? -ENOMEM : 0;
}

void tape_server_fini(struct tape_server *t)
{
	net_batch_fini(&t->out);
}

unsigned tape_journal_read(struct journal *j, const struct tapeday *days, struct net_batch *b,
			   size_t cap, uint64_t from, uint64_t to, uint64_t *blocks)
{
	struct journal_iter *it;
	struct mold_builder mb;
	struct mold_session sess;
	unsigned np = 0;
	uint64_t seq, term, wire, day_end;
	const uint8_t *data;
	size_t len;
	int r;

	*blocks = 0;
	if (journal_iter_open(&it, j, from) < 0)
		return 0;
	/* each datagram in its day's session, never across two days */
	day_end = tapeday_day_end(days, from);
	tapeday_wire(days, from, &sess, &wire);
	mold_build_begin(&mb, net_batch_slot(b, 0), cap, &sess, wire);
	while ((r = journal_iter_next(it, &seq, &term, &data, &len)) == 1 && seq <= to) {
		if (seq <= day_end && mold_build_add(&mb, data, (uint16_t)len) == MOLD_OK) {
			(*blocks)++;
			continue;
		}
		if (mb.count == 0)
			break; /* a record longer than a datagram: cannot be served */
		b->lens[np++] = mold_build_end(&mb);
		if (np == b->n)
			break;
		day_end = tapeday_day_end(days, seq);
		tapeday_wire(days, seq, &sess, &wire);
		mold_build_begin(&mb, net_batch_slot(b, np), cap, &sess, wire);
		if (mold_build_add(&mb, data, (uint16_t)len) != MOLD_OK)
			break;
		(*blocks)++;
	}
	if (r < 0)
		log_ratelimited(&rl_serve, LOG_LVL_WARNING, "retrans: journal read: %s",
				strerror(-r));
	if (np < b->n && mb.count > 0)
		b->lens[np++] = mold_build_end(&mb);
	journal_iter_close(it);
	return np;
}

/* The datagrams of an answer [0, np) that from's budget lets go: a prefix
 * (blocks is then only an upper bound of the events in it). */
static unsigned answer_budget(struct tape_server *t, unsigned np, const struct sockaddr_in *from,
			      uint64_t *blocks, uint64_t now)
{
	unsigned k = src_budget_prefix(&t->budget, from->sin_addr.s_addr, t->out.lens, np, now);

	if (k < np) {
		char a[32];

		t->st.budget_refused++;
		*blocks = 0; /* not counted as sent: the prefix's are not known here */
		net_format_addr(from, a, sizeof(a));
		log_ratelimited(&rl_serve, LOG_LVL_WARNING,
				"retrans: %s past its budget ([node] retrans_budget %llu bytes/s): "
				"%u of %u datagrams sent", a,
				(unsigned long long)t->budget.rate, k, np);
	}
	return k;
}

/* The too-old answer (common/rx.h): a heartbeat to the requester whose seq
 * is the oldest event journalled. */
static void answer_too_old(struct tape_server *t, const struct tapeday *days, uint64_t asked,
			   uint64_t first, const struct sockaddr_in *from)
{
	uint8_t hb[AUTH_CONTROL_MAX];
	struct mold_session sess;
	uint64_t wire;
	size_t n;

	tapeday_wire(days, first, &sess, &wire);
	n = rxpath_too_old_answer(hb, &sess, "tape", asked, wire);
	n = auth_node_seal(AUTH_TAPE, hb, n, sizeof(hb), 0);
	t->st.too_old++;
	(void)sendto(t->fd, hb, n, 0, (const struct sockaddr *)from, sizeof(*from));
}

void tape_server_serve(struct tape_server *t, struct journal *j, const struct tapeday *days,
		       const uint8_t *buf, size_t len, const struct sockaddr_in *from,
		       uint64_t last, uint64_t now)
{
	struct mold_request req;
	uint64_t first = journal_first_seq(j), lo, hi, blocks = 0;
	unsigned np;
	/* in any day's session this node knows: its seq then names an index */
	int r = tapeday_parse_request(days, buf, len, &req);

	if (r < 0) {
		char a[32];

		t->st.bad_requests++;
		net_format_addr(from, a, sizeof(a));
		log_ratelimited(&rl_serve, LOG_LVL_WARNING, "retrans request from %s: %s", a,
				mold_strerror(r));
		return;
	}
	t->st.requests++;
	if (req.count == 0 || last == 0)
		return;
	if (req.seq < first)
		answer_too_old(t, days, req.seq, first, from); /* then what is held */
	lo = req.seq < first ? first : req.seq;
	hi = req.seq + req.count - 1;
	if (hi > last)
		hi = last;
	if (lo > hi)
		return;
	np = tape_journal_read(j, days, &t->out, t->out.size - auth_node_reserve(), lo, hi, &blocks);
	np = answer_budget(t, np, from, &blocks, now);
	auth_node_seal_batch(AUTH_TAPE, &t->out, np, 0);
	for (unsigned i = 0; i < np; i++)
		t->out.addrs[i] = *from;
	r = np ? net_batch_send(&t->out, t->fd, np) : 0;
	if (r > 0) {
		t->st.packets_sent += (unsigned)r;
		t->st.answers++;
	}
	for (int i = 0; i < r; i++)
		t->st.bytes_sent += t->out.lens[i];
	if (r >= 0 && (unsigned)r == np)
		t->st.blocks_sent += blocks;
}
