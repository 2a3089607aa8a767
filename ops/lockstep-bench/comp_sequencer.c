/* lockstep-bench --component sequencer: libsequencer in a thread of this
 * process, fed on loopback by --streams synthetic gateway streams of Enter
 * Orders (a window ahead of the tape, gap requests answered), for
 * --duration seconds; reports the events sequenced per second and the
 * sequencer's CPU time. */
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "auth_node.h"
#include "bench.h"
#include "clock.h"
#include "config.h"
#include "log.h"
#include "sequencer.h"

struct seqb {
	/* the sequencer's thread */
	struct ev_loop *loop;
	struct sequencer *seq;
	ev_async stop;
	pthread_t th;
	clockid_t seq_clock;
	char dir[32]; /* its state_dir */
	/* the feeder: the gateways' streams, the tape */
	struct sockaddr_in seq_addr;
	struct mold_session sess[MAX_GATEWAYS], tape_sess;
	struct net_batch tx, rx;
	int fds[MAX_GATEWAYS], tape_fd;
	uint8_t cmd[256];
	size_t cmd_len;
	unsigned streams, per; /* per: commands per datagram */
	uint64_t next[MAX_GATEWAYS], sent, top, window, answered_req;
	/* the measurement */
	uint64_t m0, end_ns, top0;
	double seq_cpu0, feed_cpu0, seq_cpu1, feed_cpu1;
	struct seq_stats ss;
};

static void seqb_on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
	struct seqb *b = w->data;

	(void)revents;
	seq_stop(b->seq);
	ev_break(loop, EVBREAK_ALL);
}

static void *seqb_thread_main(void *p)
{
	struct seqb *b = p;

	ev_run(b->loop, 0);
	return NULL;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static double cpu_seconds(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The command and the commands per datagram. 0, or 2 with a message. */
static int seqb_sizes(struct seqb *b)
{
	struct ouch_enter_order e;
	/* what a datagram holds besides its tag */
	unsigned room = opt.datagram - (opt.auth_off ? 0 : AUTH_TRAILER_LEN);

	b->streams = opt.streams;
	b->per = opt.batch;
	if (b->streams < 1 || b->streams > MAX_GATEWAYS || opt.datagram < 256 ||
	    opt.datagram > 65507) {
		fprintf(stderr, PROG ": --streams 1..%d, --datagram 256..65507\n", MAX_GATEWAYS);
		return 2;
	}
	mix_sample_enter(&e, 7);
	b->cmd_len = mix_pack_enter(&e, "TRADR1", "FRMA", b->cmd);
	if (!b->per)
		b->per = (unsigned)((room - MOLD_HEADER_LEN) / (b->cmd_len + 2));
	if (b->per < 1 || MOLD_HEADER_LEN + b->per * (b->cmd_len + 2) > room) {
		fprintf(stderr, PROG ": --batch %u commands of %zu bytes do not fit --datagram %u\n",
			b->per, b->cmd_len, opt.datagram);
		return 2;
	}
	return 0;
}

/* The sequencer's config, in a temporary state_dir, with a free port for the
 * tape's group (the bench's own group, not a cluster's). Returns the port,
 * or -1 (message printed when it says why). */
static int seqb_config(struct seqb *b, struct seq_config *cfg)
{
	const struct config_spec spec = { .keys = seq_config_keys };
	struct sockaddr_in probe;
	char text[1024], err[256];
	int port;

	snprintf(b->dir, sizeof(b->dir), "/tmp/lockstep-bench-seq.XXXXXX");
	if (!mkdtemp(b->dir))
		return -1;
	if ((port = bench_udp_bound("127.0.0.1:0", &probe)) < 0)
		return -1;
	close(port);
	port = ntohs(probe.sin_port);
	snprintf(text, sizeof(text),
		 "[node]\nname = bench-seq\nstate_dir = %s\nlog_level = warning\n"
		 "[sequencer]\nlisten = 127.0.0.1:0\nretrans = 127.0.0.1:0\n"
		 "tape_group = 239.255.77.1:%d\ntape_iface = 127.0.0.1\nmax_datagram = %u\n"
		 "rcvbuf = 32M\nsndbuf = 8M\nfsync = %s\n",
		 b->dir, port, opt.datagram, opt.fsync[0] ? opt.fsync : "disk");
	if (config_load_buffer(&spec, cfg, "bench", text, strlen(text), NULL, 0, err, sizeof(err)) <
	    0) {
		fprintf(stderr, PROG ": sequencer config: %s\n", err);
		return -1;
	}
	/* the bench speaks for the gateways: a cluster key of its own */
	if (opt.auth_off) {
		if (auth_node_setup(AUTH_MODE_OFF, "bench", "", err, sizeof(err)) < 0)
			return -1;
	} else {
		struct auth_keys k;

		auth_keys_generate(&k);
		if (auth_node_setup_keys("bench", &k) < 0)
			return -1;
	}
	return port;
}

/* The tape's socket, the sequencer in its thread, the streams' sockets.
 * 0, or -1 (message printed when it says why). */
static int seqb_start(struct seqb *b, const struct seq_config *cfg, int port)
{
	struct net_udp_options uo = { .rcvbuf = 32 << 20, .sndbuf = 8 << 20, .nonblock = 1 };
	struct sockaddr_in group;

	log_init("bench-sequencer", LOG_LVL_WARNING);
	net_parse_addr("239.255.77.1:0", &group);
	group.sin_port = htons((uint16_t)port);
	if ((b->tape_fd = net_mcast_recv_open(&group, "127.0.0.1", &uo, NULL)) < 0) {
		fprintf(stderr, PROG ": tape socket: %s\n", strerror(-b->tape_fd));
		return -1;
	}
	b->loop = ev_loop_new(EVFLAG_AUTO);
	if (!b->loop || seq_open(&b->seq, b->loop, cfg) < 0) {
		fprintf(stderr, PROG ": the sequencer did not open\n");
		return -1;
	}
	net_parse_addr("127.0.0.1:0", &b->seq_addr);
	b->seq_addr.sin_port = htons((uint16_t)seq_listen_port(b->seq));
	ev_async_init(&b->stop, seqb_on_stop);
	b->stop.data = b;
	ev_async_start(b->loop, &b->stop);
	for (unsigned g = 0; g < b->streams; g++) {
		char name[16];
		struct sockaddr_in any;

		net_parse_addr("127.0.0.1:0", &any);
		snprintf(name, sizeof(name), "BENCH%u", g + 1);
		mold_session_set(&b->sess[g], name);
		if ((b->fds[g] = net_udp_open(&any, &uo, NULL, NULL)) < 0)
			return -1;
		b->next[g] = 1;
	}
	mold_session_set(&b->tape_sess, "TAPE");
	if (net_batch_init(&b->tx, 64, opt.datagram) < 0 || net_batch_init(&b->rx, 64, 65536) < 0)
		return -1;
	if (pthread_create(&b->th, NULL, seqb_thread_main, b) != 0)
		return -1;
	pthread_getcpuclockid(b->th, &b->seq_clock);
	return 0;
}

/* Builds a datagram of stream g in tx slot k: commands from seq q, up to
 * `per` and below qend; the seq after the last one. */
static uint64_t seqb_build(struct seqb *b, unsigned k, unsigned g, uint64_t q, uint64_t qend)
{
	struct mold_builder mb;

	mold_build_begin(&mb, net_batch_slot(&b->tx, k), b->tx.size - auth_node_reserve(),
			 &b->sess[g], q);
	for (unsigned i = 0; i < b->per && q < qend; i++, q++)
		if (mold_build_add(&mb, b->cmd, (uint16_t)b->cmd_len) < 0)
			break; /* cannot happen: per was fitted to the datagram */
	b->tx.lens[k] = auth_node_seal(AUTH_CMD, net_batch_slot(&b->tx, k), mold_build_end(&mb),
				       b->tx.size, 0);
	return q;
}

/* The gateways' streams: round robin, a window ahead of the tape. */
static void seqb_feed(struct seqb *b)
{
	unsigned n = 0;

	while (n < b->tx.n && b->sent + b->per <= b->top + b->window) {
		unsigned g = (unsigned)((b->sent / b->per) % b->streams);

		b->next[g] = seqb_build(b, n, g, b->next[g], UINT64_MAX);
		b->tx.addrs[n] = b->seq_addr;
		b->sent += b->per;
		/* one sendmmsg per stream socket: a batch holds one stream */
		if (b->streams > 1) {
			net_batch_send(&b->tx, b->fds[g], 1);
			continue;
		}
		n++;
	}
	if (n)
		net_batch_send(&b->tx, b->fds[0], n);
}

/* The tape: the highest sequence number seen. */
static void seqb_tape_datagram(void *ctx, unsigned k)
{
	struct seqb *b = ctx;
	struct mold_packet mp;
	size_t len = b->rx.lens[k];

	if (auth_node_check(AUTH_TAPE, net_batch_slot(&b->rx, k), &len, 0, NULL) == 0 &&
	    mold_parse(net_batch_slot(&b->rx, k), len, &b->tape_sess, 0, &mp) == 0 &&
	    mp.kind == MOLD_DATA && mp.seq + mp.count - 1 > b->top + 1)
		b->top = mp.seq + mp.count - 2; /* less the TermStart at seq 1 */
}

/* A gap request from the sequencer: answer from the template. */
static void seqb_answer_gaps(struct seqb *b)
{
	for (unsigned g = 0; g < b->streams; g++) {
		uint8_t rq[64];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t l = recvfrom(b->fds[g], rq, sizeof(rq), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		struct mold_request req;
		uint64_t q, qend;

		size_t len = l > 0 ? (size_t)l : 0;

		if (l <= 0 || auth_node_check(AUTH_REQUEST, rq, &len, 0, &from) < 0 ||
		    mold_parse_request(rq, len, &b->sess[g], &req) != 0)
			continue;
		q = req.seq;
		qend = req.seq + req.count < b->next[g] ? req.seq + req.count : b->next[g];
		while (q < qend) {
			q = seqb_build(b, 0, g, q, qend);
			sendto(b->fds[g], net_batch_slot(&b->tx, 0), b->tx.lens[0], 0,
			       (struct sockaddr *)&from, fl);
		}
		b->answered_req++;
	}
}

static void seqb_sample(struct seqb *b, int end)
{
	double s = cpu_seconds(b->seq_clock), f = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);

	if (end) {
		b->seq_cpu1 = s;
		b->feed_cpu1 = f;
	} else {
		b->seq_cpu0 = s;
		b->feed_cpu0 = f;
	}
}

/* Feeds for --warmup, then measures for --duration (3 s by default). */
static void seqb_run(struct seqb *b)
{
	double duration = opt.duration > 0 ? opt.duration : 3, warmup = opt.warmup;
	uint64_t start = mono_ns(), end, now;
	int measuring = warmup <= 0;

	b->window = 16384;
	b->m0 = start + (uint64_t)(warmup * 1e9);
	end = b->m0 + (uint64_t)(duration * 1e9);
	if (measuring)
		seqb_sample(b, 0);
	while ((now = mono_ns()) < end && !bench_interrupted) {
		if (!measuring && now >= b->m0) {
			measuring = 1;
			b->top0 = b->top;
			seqb_sample(b, 0);
			b->m0 = now;
		}
		seqb_feed(b);
		bench_batch_each(&b->rx, b->tape_fd, seqb_tape_datagram, b);
		seqb_answer_gaps(b);
		if (b->sent + b->per > b->top + b->window) {
			struct pollfd pf = { .fd = b->tape_fd, .events = POLLIN };

			poll(&pf, 1, 1);
		}
	}
	b->end_ns = mono_ns();
	seqb_sample(b, 1);
}

static void seqb_stop(struct seqb *b)
{
	ev_async_send(b->loop, &b->stop);
	pthread_join(b->th, NULL);
	seq_get_stats(b->seq, &b->ss);
	seq_close(b->seq);
	ev_loop_destroy(b->loop);
	close(b->tape_fd);
	for (unsigned g = 0; g < b->streams; g++)
		close(b->fds[g]);
	net_batch_fini(&b->tx);
	net_batch_fini(&b->rx);
	nftw(b->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void seqb_report(const struct seqb *b)
{
	const struct seq_stats *ss = &b->ss;
	double secs = (double)(b->end_ns - b->m0) / 1e9, rate = (double)(b->top - b->top0) / secs;
	double cpu = b->seq_cpu1 - b->seq_cpu0;
	FILE *f;

	printf("sequencer: %llu events sequenced in %.2f s: %.0f events/s (%u stream%s, %u commands "
	       "of %zu bytes per %u-byte datagram)\n",
	       (unsigned long long)(b->top - b->top0), secs, rate, b->streams,
	       b->streams > 1 ? "s" : "", b->per, b->cmd_len, opt.datagram);
	printf("sequencer: cpu %.2f s (%.0f%%), feeder %.2f s; tape %llu packets (%.1f events each), "
	       "journal %llu MB, gaps %llu, gap requests answered %llu, kernel drops %llu\n",
	       cpu, 100 * cpu / secs, b->feed_cpu1 - b->feed_cpu0,
	       (unsigned long long)ss->tape_packets_sent,
	       ss->tape_packets_sent ? (double)ss->commands_sequenced / (double)ss->tape_packets_sent
				     : 0,
	       (unsigned long long)(ss->journal_bytes >> 20), (unsigned long long)ss->gaps,
	       (unsigned long long)b->answered_req, (unsigned long long)ss->rxq_dropped);
	if (!opt.json || !(f = fopen(opt.json, "w")))
		return;
	fprintf(f,
		"{\"component\": \"sequencer\", \"events\": %llu, \"seconds\": %.3f, "
		"\"events_per_s\": %.0f, \"streams\": %u, \"per_datagram\": %u, "
		"\"datagram\": %u, \"cpu_s\": %.3f, \"tape_packets\": %llu, \"gaps\": %llu}\n",
		(unsigned long long)(b->top - b->top0), secs, rate, b->streams, b->per, opt.datagram,
		cpu, (unsigned long long)ss->tape_packets_sent, (unsigned long long)ss->gaps);
	fclose(f);
}

int comp_sequencer_run(void)
{
	static struct seq_config cfg;
	static struct seqb b;
	int rc, port;

	if ((rc = seqb_sizes(&b)) != 0)
		return rc;
	if ((port = seqb_config(&b, &cfg)) < 0 || seqb_start(&b, &cfg, port) < 0)
		return 1;
	seqb_run(&b);
	seqb_stop(&b);
	seqb_report(&b);
	return 0;
}
