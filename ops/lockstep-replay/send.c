/* lockstep-replay send: the tape multicast again as a live MoldUDP64 stream,
 * paced, with heartbeats, answering retransmission requests like a
 * sequencer; each trading day in its own session (common/tapeday.h). */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth_node.h"
#include "clock.h"
#include "net.h"
#include "rxpath.h"
#include "replay.h"
#include "wire.h"

#define SEND_BATCH 64 /* datagrams per sendmmsg */

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

struct sender {
	struct tapedir *t;
	struct journal_iter *it;
	struct packer pk;
	int fd, rfd; /* the stream; the retransmission server (-1: none) */
	struct sockaddr_in group;
	struct net_batch tx, req_rx, req_tx;
	/* the next record to send */
	uint8_t *pend;
	size_t pend_len;
	uint64_t pend_seq, pend_ts;
	int have;
	uint64_t from, to; /* the first and last seq to send */
	uint64_t built; /* seq after the last one put in a packet */
	uint64_t next; /* seq after the last one sent: what heartbeats carry */
	double speed; /* 0: as fast as possible */
	uint64_t t0_ns, ts0; /* pacing: mono time of the first event, its tape time */
	uint64_t last_send_ns;
	unsigned retrans_packets;
	uint8_t *rbuf; /* a record read for a retransmission */
	struct {
		uint64_t events, packets, send_errors, heartbeats, skipped;
		uint64_t requests, bad_requests, too_old, resent_blocks, resent_packets;
	} st;
};

/* Takes the next record into s->pend: 1, 0 at the end, or a negative errno. */
static int send_fetch(struct sender *s)
{
	const uint8_t *data;
	uint64_t seq, term;
	size_t len;
	int r;

	s->have = 0;
	while ((r = journal_iter_next(s->it, &seq, &term, &data, &len)) == 1) {
		if (seq > s->to)
			return 0;
		if (!packer_fits(len)) {
			s->st.skipped++;
			continue;
		}
		memcpy(s->pend, data, len);
		s->pend_len = len;
		s->pend_seq = seq;
		s->pend_ts = packer_record(&s->pk, seq, data, len);
		s->have = 1;
		return 1;
	}
	return r;
}

/* When the event of tape time ts is due (mono ns). */
static uint64_t send_due(const struct sender *s, uint64_t ts)
{
	if (s->speed <= 0 || ts <= s->ts0)
		return s->t0_ns;
	return s->t0_ns + (uint64_t)((double)(ts - s->ts0) / s->speed);
}

/* Sends, in one sendmmsg, up to SEND_BATCH packets of the events due by now.
 * Returns the packets sent or a negative errno (journal). */
static int send_round(struct sender *s, uint64_t now)
{
	unsigned k = 0;
	int r, sent;

	while (s->have && k < SEND_BATCH && send_due(s, s->pend_ts) <= now) {
		if (!packer_add(&s->pk, s->pend_seq, s->pend_ts, s->pend, s->pend_len)) {
			if (s->pk.open) {
				s->tx.lens[k] = packer_end(&s->pk);
				s->tx.addrs[k++] = s->group;
				if (k == SEND_BATCH)
					break;
			}
			packer_start(&s->pk, net_batch_slot(&s->tx, k), s->pend_seq, s->pend_ts,
				     s->pend, s->pend_len);
		}
		s->built = s->pend_seq + 1;
		s->st.events++;
		if ((r = send_fetch(s)) < 0)
			return r;
	}
	if (s->pk.open) {
		s->tx.lens[k] = packer_end(&s->pk);
		s->tx.addrs[k++] = s->group;
	}
	if (!k)
		return 0;
	auth_node_seal_batch(AUTH_TAPE, &s->tx, k, 0);
	sent = net_batch_send(&s->tx, s->fd, k);
	if (sent < (int)k)
		s->st.send_errors += k - (unsigned)(sent < 0 ? 0 : sent);
	s->st.packets += k;
	s->next = s->built;
	s->last_send_ns = now;
	return (int)k;
}

/* Answers one retransmission request from the journal with what has been
 * sent: consecutive blocks from the index asked (a request names a day's
 * session and its sequence number: tapeday maps it to an index), each
 * packet in its own day's session, up to retrans_packets datagrams (the
 * receiver asks again for the rest). */
static void send_serve(struct sender *s, const uint8_t *buf, size_t len,
		       const struct sockaddr_in *from)
{
	const struct tapeday *td = &s->pk.w.td;
	struct mold_session sess;
	struct mold_request q;
	struct mold_builder b;
	uint64_t seq, end, wseq;
	uint32_t day;
	unsigned k = 0;
	int n = -1; /* length of the record held in rbuf, -1: none */

	if (tapeday_parse_request(td, buf, len, &q) < 0) {
		s->st.bad_requests++;
		return;
	}
	s->st.requests++;
	if (q.seq < s->t->first) {
		/* lockstep's "too old" answer (common/rx.h): a heartbeat carrying
		 * the oldest seq held, to the requester only; then what is held */
		uint8_t hb[AUTH_CONTROL_MAX];
		uint64_t asked, oldest;
		size_t n_hb;

		tapeday_wire(td, q.seq, &sess, &asked);
		tapeday_wire(td, s->t->first, &sess, &oldest);
		n_hb = rxpath_too_old_answer(hb, &sess, "tape", asked, oldest);
		n_hb = auth_node_seal(AUTH_TAPE, hb, n_hb, sizeof(hb), 0);
		sendto(s->rfd, hb, n_hb, 0, (const struct sockaddr *)from, sizeof(*from));
		s->st.too_old++;
	}
	seq = q.seq < s->t->first ? s->t->first : q.seq;
	end = q.seq + q.count < s->next ? q.seq + q.count : s->next;
	while (seq < end && k < s->retrans_packets) {
		day = tapeday_day_at(td, seq, NULL);
		tapeday_wire(td, seq, &sess, &wseq);
		mold_build_begin(&b, net_batch_slot(&s->req_tx, k), s->pk.max, &sess, wseq);
		while (seq < end && tapeday_day_at(td, seq, NULL) == day) {
			if (n < 0 && (n = journal_read(s->t->j, seq, s->rbuf, JOURNAL_MAX_RECORD, NULL)) < 0) {
				end = seq;
				break;
			}
			if (!packer_fits((size_t)n)) {
				end = seq;
				break;
			}
			if (mold_build_add(&b, s->rbuf, (uint16_t)n) < 0) {
				if (b.count)
					break;
				/* alone and still too large for max: a packet of its size */
				mold_build_begin(&b, net_batch_slot(&s->req_tx, k), MOLD_MAX_PACKET,
						 &sess, wseq);
				mold_build_add(&b, s->rbuf, (uint16_t)n);
			}
			n = -1;
			seq++;
			s->st.resent_blocks++;
		}
		if (!b.count)
			break;
		s->req_tx.lens[k] = mold_build_end(&b);
		s->req_tx.addrs[k++] = *from;
	}
	if (k) {
		auth_node_seal_batch(AUTH_TAPE, &s->req_tx, k, 0);
		net_batch_send(&s->req_tx, s->rfd, k);
		s->st.resent_packets += k;
	}
}

static void send_serve_all(struct sender *s)
{
	int n;

	if (s->rfd < 0)
		return;
	for (int round = 0; round < 4; round++) {
		n = net_batch_recv(&s->req_rx, s->rfd);
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++) {
			uint8_t *buf = net_batch_slot(&s->req_rx, (unsigned)i);
			size_t len = s->req_rx.lens[i];

			if (auth_node_check(AUTH_REQUEST, buf, &len, 0, &s->req_rx.addrs[i]) == 0)
				send_serve(s, buf, len, &s->req_rx.addrs[i]);
			else
				s->st.bad_requests++;
		}
		if ((unsigned)n < s->req_rx.n)
			return;
	}
}

/* A heartbeat (or the end of session) in the session of the day of the
 * last event sent (before any: the first's), carrying that day's next
 * sequence number. */
static void send_control(struct sender *s, int eos, uint64_t now)
{
	uint8_t pkt[AUTH_CONTROL_MAX];
	struct mold_session sess;
	uint64_t last = s->next > s->from ? s->next - 1 : s->next, wseq;
	size_t n;

	tapeday_wire(&s->pk.w.td, last, &sess, &wseq);
	n = auth_node_heartbeat(pkt, AUTH_TAPE, &sess, last < s->next ? wseq + 1 : wseq, eos);

	if (sendto(s->fd, pkt, n, 0, (const struct sockaddr *)&s->group, sizeof(s->group)) < 0)
		s->st.send_errors++;
	s->st.heartbeats += !eos;
	s->last_send_ns = now;
}

static int parse_pace(const char *text, double *speed)
{
	char *end;
	double v;

	if (strcmp(text, "original") == 0) {
		*speed = 1;
		return 0;
	}
	if (strcmp(text, "max") == 0) {
		*speed = 0;
		return 0;
	}
	if (text[0] != 'x')
		return -1;
	errno = 0;
	v = strtod(text + 1, &end);
	if (errno || *end || !(v > 0) || v > 1e9)
		return -1;
	*speed = v;
	return 0;
}

static int send_open_sockets(struct sender *s, const char *iface, const char *retrans, int ttl)
{
	struct net_udp_options so = { .sndbuf = 4 << 20 };
	struct net_udp_options ro = { .nonblock = 1, .sndbuf = 4 << 20 };
	struct sockaddr_in any = { .sin_family = AF_INET }, raddr;
	int r;

	s->fd = net_udp_open(&any, &so, NULL, NULL);
	if (s->fd < 0)
		return s->fd;
	if ((r = net_mcast_send_setup(s->fd, iface, ttl)) < 0) {
		fprintf(stderr, PROG ": --iface %s: %s\n", iface, strerror(-r));
		return r;
	}
	if (!retrans)
		return 0;
	if ((r = net_parse_addr(retrans, &raddr)) < 0) {
		fprintf(stderr, PROG ": --retrans %s: want ADDR:PORT\n", retrans);
		return r;
	}
	s->rfd = net_udp_open(&raddr, &ro, NULL, NULL);
	if (s->rfd < 0) {
		fprintf(stderr, PROG ": --retrans %s: %s\n", retrans, strerror(-s->rfd));
		return s->rfd;
	}
	return 0;
}

/* The stream: events as they come due, heartbeats when idle, requests
 * answered meanwhile; after the last event, linger_ns of heartbeats and
 * answers (forever when linger_ns < 0 ... until a signal), then end of
 * session. Returns 0 or a negative errno. */
static int send_loop(struct sender *s, int64_t linger_ns, uint64_t hb_ns)
{
	uint64_t done_ns = 0, now;
	int r = 0, done = 0;

	s->t0_ns = mono_ns();
	s->ts0 = s->have ? s->pend_ts : 0;
	s->last_send_ns = 0;
	while (!stop_signal) {
		struct pollfd pfd = { .fd = s->rfd, .events = POLLIN };
		uint64_t wait;
		struct timespec ts;

		now = mono_ns();
		send_serve_all(s);
		if ((r = send_round(s, now)) < 0)
			break;
		r = 0;
		if (!s->have && !done) {
			done = 1;
			done_ns = now;
			fprintf(stderr, PROG ": sent seq ..%llu (%llu events in %llu packets) in %.3f s%s\n",
				(unsigned long long)(s->next - 1), (unsigned long long)s->st.events,
				(unsigned long long)s->st.packets, (double)(now - s->t0_ns) / 1e9,
				linger_ns ? "; answering retransmissions" : "");
		}
		if (now - s->last_send_ns >= hb_ns)
			send_control(s, 0, now);
		if (done && linger_ns >= 0 && now >= done_ns + (uint64_t)linger_ns)
			break;
		wait = s->last_send_ns + hb_ns - now;
		if (s->have) {
			uint64_t due = send_due(s, s->pend_ts);

			wait = due <= now ? 0 : (due - now < wait ? due - now : wait);
		}
		if (done && linger_ns >= 0 && done_ns + (uint64_t)linger_ns - now < wait)
			wait = done_ns + (uint64_t)linger_ns - now;
		if (!wait)
			continue;
		ts.tv_sec = (time_t)(wait / 1000000000u);
		ts.tv_nsec = (long)(wait % 1000000000u);
		ppoll(&pfd, s->rfd >= 0 ? 1 : 0, &ts, NULL);
	}
	send_control(s, 1, mono_ns());
	return r;
}

/* What the options ask, besides what they set in the sender. */
struct send_args {
	const char *group, *retrans, *iface, *session;
	const char *key_file, *cluster;
	int auth; /* enum auth_mode */
	uint64_t from, hb_ns, ttl;
	uint32_t day; /* --day: that day's records only; 0: none */
	int64_t linger_ns; /* -1: until a signal */
};

/* Parses the options into a and s: -1 to go on, else the exit status. */
static int send_options(int argc, char **argv, struct send_args *a, struct sender *s)
{
	static const struct option opts[] = {
		{ "group", required_argument, NULL, 'g' }, { "retrans", required_argument, NULL, 'r' },
		{ "iface", required_argument, NULL, 'i' }, { "pace", required_argument, NULL, 'p' },
		{ "from", required_argument, NULL, 'f' }, { "to", required_argument, NULL, 't' },
		{ "tape-session", required_argument, NULL, 'n' },
		{ "linger", required_argument, NULL, 'l' }, { "heartbeat", required_argument, NULL, 'b' },
		{ "max-datagram", required_argument, NULL, 'm' },
		{ "retrans-packets", required_argument, NULL, 'R' },
		{ "ttl", required_argument, NULL, 'T' }, { "help", no_argument, NULL, 'h' },
		{ "key-file", required_argument, NULL, 'K' },
		{ "cluster", required_argument, NULL, 'C' }, { "auth", required_argument, NULL, 'A' },
		{ "day", required_argument, NULL, 'd' }, { NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'g': a->group = optarg; break;
		case 'r': a->retrans = optarg; break;
		case 'i': a->iface = optarg; break;
		case 'n': a->session = optarg; break;
		case 'p':
			if (parse_pace(optarg, &s->speed) < 0)
				return fail_usage("--pace: original, max or xN (e.g. x10)");
			break;
		case 'f': if (opt_from(optarg, &a->from)) return 2; break;
		case 't': if (opt_to(optarg, &s->to)) return 2; break;
		case 'l':
			if (strcmp(optarg, "-1") == 0)
				a->linger_ns = -1;
			else if (parse_u64(optarg, &v) == 0 && v <= 86400 * 365)
				a->linger_ns = (int64_t)v * 1000000000ll;
			else
				return fail_usage("--linger: seconds, or -1 for until a signal");
			break;
		case 'b':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > 60000)
				return fail_usage("--heartbeat: 1..60000 ms");
			a->hb_ns = v * 1000000u;
			break;
		case 'm':
			if (parse_u64(optarg, &v) < 0 || v < 64 || v > MOLD_MAX_PACKET)
				return fail_usage("--max-datagram: 64..%u", MOLD_MAX_PACKET);
			s->pk.max = (size_t)v;
			break;
		case 'R':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > 1024)
				return fail_usage("--retrans-packets: 1..1024");
			s->retrans_packets = (unsigned)v;
			break;
		case 'T':
			if (parse_u64(optarg, &a->ttl) < 0 || a->ttl > 255)
				return fail_usage("--ttl: 0..255");
			break;
		case 'd': if (opt_day(optarg, &a->day)) return 2; break;
		case 'K': a->key_file = optarg; break;
		case 'C': a->cluster = optarg; break;
		case 'A':
			if (strcmp(optarg, "on") && strcmp(optarg, "off"))
				return fail_usage("--auth: on or off");
			a->auth = strcmp(optarg, "on") == 0 ? AUTH_MODE_ON : AUTH_MODE_OFF;
			break;
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 1)
		return fail_usage("send: one journal directory or archive");
	if (!a->group)
		return fail_usage("send: --group ADDR:PORT is required");
	if (net_parse_addr(a->group, &s->group) < 0 || !s->group.sin_port)
		return fail_usage("--group %s: want ADDR:PORT", a->group);
	if (wirepos_init(&s->pk.w, a->session) < 0)
		return fail_usage("--tape-session %s: up to 10 printable characters", a->session);
	return -1;
}

/* The buffers, the sockets and the first record. Returns 0, or -1 with a
 * message. */
static int send_setup(struct sender *s, const struct send_args *a)
{
	char err[512];
	int r;

	if (auth_node_setup(a->auth, a->cluster, a->key_file, err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return -1;
	}
	if (s->pk.max > 64 + auth_node_reserve())
		s->pk.max -= auth_node_reserve(); /* --max-datagram is the tagged size */
	s->from = s->next = s->built = a->from;
	s->pend = malloc(JOURNAL_MAX_RECORD);
	s->rbuf = malloc(JOURNAL_MAX_RECORD);
	if (!s->pend || !s->rbuf || net_batch_init(&s->tx, SEND_BATCH, MOLD_MAX_PACKET) < 0 ||
	    net_batch_init(&s->req_rx, 16, 64) < 0 ||
	    net_batch_init(&s->req_tx, s->retrans_packets, MOLD_MAX_PACKET) < 0) {
		fprintf(stderr, PROG ": out of memory\n");
		return -1;
	}
	if (send_open_sockets(s, a->iface, a->retrans, (int)a->ttl) < 0)
		return -1;
	if ((r = wirepos_prime(&s->pk.w, s->t, a->from)) < 0 ||
	    (r = journal_iter_open(&s->it, s->t->j, a->from)) < 0 || (r = send_fetch(s)) < 0) {
		fprintf(stderr, PROG ": reading %s: %s\n", s->t->dir, strerror(-r));
		return -1;
	}
	return 0;
}

/* Undoes send_setup (what of it was done). */
static void send_cleanup(struct sender *s)
{
	journal_iter_close(s->it);
	if (s->fd >= 0)
		close(s->fd);
	if (s->rfd >= 0)
		close(s->rfd);
	net_batch_fini(&s->tx);
	net_batch_fini(&s->req_rx);
	net_batch_fini(&s->req_tx);
	free(s->pend);
	free(s->rbuf);
}

static void send_report(const struct sender *s)
{
	fprintf(stderr,
		PROG ": %llu events in %llu packets up to seq %llu, %llu heartbeats, %llu send "
		"errors; %llu retransmission requests (%llu bad, %llu too old) answered with %llu "
		"blocks in %llu packets%s\n",
		(unsigned long long)s->st.events, (unsigned long long)s->st.packets,
		(unsigned long long)(s->next - 1), (unsigned long long)s->st.heartbeats,
		(unsigned long long)s->st.send_errors, (unsigned long long)s->st.requests,
		(unsigned long long)s->st.bad_requests, (unsigned long long)s->st.too_old,
		(unsigned long long)s->st.resent_blocks,
		(unsigned long long)s->st.resent_packets, stop_signal ? " (stopped by a signal)" : "");
}

int cmd_send(int argc, char **argv)
{
	struct send_args a = { .iface = "127.0.0.1", .session = "REPLAY", .hb_ns = 100000000u,
			       .ttl = 1, .linger_ns = 10 * 1000000000ll,
			       .key_file = "/etc/lockstep/cluster.key", .cluster = "lockstep",
			       .auth = AUTH_MODE_ON };
	struct sender s = { .fd = -1, .rfd = -1, .speed = 1, .retrans_packets = 64 };
	struct sigaction sa = { .sa_handler = on_stop_signal };
	struct tapedir t;
	int r, rc;

	s.pk.max = WIRE_MAX_DATAGRAM;
	if ((rc = send_options(argc, argv, &a, &s)) >= 0)
		return rc;
	if ((rc = tapedir_open(&t, argv[optind], 1, 1)) != 0)
		return rc;
	s.t = &t;
	rc = 2;
	if ((a.day && (rc = days_range(&t, a.day, &a.from, &s.to)) != 0) ||
	    (rc = tapedir_range(&t, &a.from, &s.to)) != 0)
		goto out;
	rc = 2;
	if (send_setup(&s, &a) < 0)
		goto out;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = send_loop(&s, a.linger_ns, a.hb_ns);
	if (r < 0)
		fprintf(stderr, PROG ": reading %s: %s\n", t.dir, strerror(-r));
	send_report(&s);
	rc = r < 0 ? 2 : 0;
out:
	send_cleanup(&s);
	tapedir_close(&t);
	return rc;
}
