/* lockstep-bench: the load (the default mode). Sessions spread over the
 * gateways of --connect send the order mix open loop (each order planned at
 * a fixed rate, its latency counted from then, so a stall is not hidden),
 * closed loop (--window orders in flight per session) or flat out (--max),
 * for --orders per session or --duration seconds after a --warmup; then
 * wait up to --timeout for the last answers. In phases: setup, connecting
 * the sessions, the run (sending, then draining), the report. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "bench.h"
#include "clock.h"

static struct bsession *sessions;
unsigned n_sessions;

/* Tokens per session (one per Enter or Replace at most) and the orders to
 * send in all (0: until --duration ends). Returns 0, or 2 with a message. */
static int load_size(struct load *l)
{
	if (opt.orders)
		l->cap = opt.orders;
	else if (!l->closed_loop)
		l->cap = (uint64_t)(opt.rate * (opt.warmup + opt.duration) /
				    (n_sessions - l->first)) + 16;
	else
		l->cap = (uint64_t)(3e6 * (opt.warmup + opt.duration) / n_sessions) + 1024;
	if (l->cap > TOKEN_INDEX_MAX + 1) {
		/* a token holds 6 hex digits of index per session */
		if (opt.orders) {
			fprintf(stderr, PROG ": at most %u orders per session\n", TOKEN_INDEX_MAX + 1);
			return 2;
		}
		l->cap = TOKEN_INDEX_MAX + 1;
	}
	if (opt.orders)
		l->total = opt.orders * (n_sessions - l->first);
	else if (!l->closed_loop)
		l->total = (uint64_t)(opt.rate * (opt.warmup + opt.duration));
	return 0;
}

/* The gateways (or the baseline's relays), the logins, the sizes and the
 * tables. Returns -1 to go on, else the exit status. */
static int load_setup(struct load *l)
{
	l->closed_loop = opt.rate <= 0;
	l->window = opt.window;
	if (opt.max && !l->closed_loop) {
		fprintf(stderr, PROG ": --max and --rate exclude each other\n");
		return 2;
	}
	if (opt.max && l->window == 32)
		l->window = 256;
	snprintf(l->connect_list, sizeof(l->connect_list), "%s", opt.connect);
	l->n_gw = (unsigned)bench_split(l->connect_list, l->gw, MAX_GATEWAYS);
	if (opt.baseline) {
		int r = baseline_start(l->n_gw);

		if (r < 0) {
			fprintf(stderr, PROG ": --baseline: %s\n", strerror(-r));
			baseline_stop();
			return 1;
		}
		snprintf(l->connect_list, sizeof(l->connect_list), "%s", opt.connect);
		l->n_gw = (unsigned)bench_split(l->connect_list, l->gw, MAX_GATEWAYS);
	}
	snprintf(l->logins, sizeof(l->logins), "%s", opt.logins);
	l->n_lg = (unsigned)bench_split(l->logins, l->lg, MAX_SESSIONS);
	if (!l->n_gw || !l->n_lg) {
		fprintf(stderr, PROG ": need a gateway and a login\n");
		return 2;
	}
	if (procs_load() < 0)
		return 2;
	n_sessions = opt.sessions;
	l->first = opt.flood > 0;
	if (l->first && n_sessions < 2) {
		fprintf(stderr, PROG ": --flood needs --sessions 2 or more (session 0 floods)\n");
		return 2;
	}
	if (load_size(l))
		return 2;
	sessions = calloc(n_sessions, sizeof(*sessions));
	if (!sessions)
		return 1;
	for (int h = 0; h < H_N; h++)
		hist_init(&hists[h]);
	if (opt.check_matches) {
		uint64_t mc = 16;

		while (mc < 2 * l->cap * n_sessions)
			mc <<= 1;
		if (!(matches = calloc(mc, sizeof(*matches))))
			return 1;
		match_mask = mc - 1;
	}
	return -1;
}

/* Session i's login, token prefix and tables. Tokens are day-unique per
 * login: the run is the millisecond of the day (base 36, 6 characters; two
 * runs start at least a login apart), then the session (2), then the index
 * (6 hex digits). Returns 0, or 2 with a message. */
static int load_session_init(struct load *l, unsigned i, uint64_t run)
{
	static const char b36[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	struct bsession *s = &sessions[i];
	char *colon = strchr(l->lg[i % l->n_lg], ':');

	if (!colon) {
		fprintf(stderr, PROG ": a login is USER:PASSWORD\n");
		return 2;
	}
	snprintf(s->user, sizeof(s->user), "%.*s", (int)(colon - l->lg[i % l->n_lg]),
		 l->lg[i % l->n_lg]);
	snprintf(s->pass, sizeof(s->pass), "%s", colon + 1);
	for (int k = 5; k >= 0; k--)
		s->prefix[5 - k] = b36[run / ((uint64_t[]){ 1, 36, 1296, 46656, 1679616,
							      60466176 })[k] % 36];
	s->prefix[6] = b36[i / 36 % 36];
	s->prefix[7] = b36[i % 36];
	s->flood = i < l->first;
	if (s->flood)
		snprintf(flood.login, sizeof(flood.login), "%s", s->user);
	s->cap_tok = (uint32_t)l->cap;
	s->tok = calloc(l->cap, sizeof(*s->tok));
	s->live = calloc(l->cap, sizeof(*s->live));
	if (opt.book_out && !s->flood)
		s->book = calloc(l->cap, sizeof(*s->book));
	if (!s->tok || !s->live || (opt.book_out && !s->flood && !s->book)) {
		fprintf(stderr, PROG ": out of memory for %llu tokens\n", (unsigned long long)l->cap);
		return 1;
	}
	return 0;
}

/* Logs every session in. Returns 0, else the exit status. */
static int load_connect(struct load *l)
{
	uint64_t run = wall_ns() / 1000000ull % 86400000ull;

	for (unsigned i = 0; i < n_sessions; i++) {
		struct bsession *s = &sessions[i];
		int rc, err;

		if ((rc = load_session_init(l, i, run)) != 0)
			return rc;
		s->gw = i % l->n_gw;
		if ((err = session_login(s, l->gw[s->gw])) < 0) {
			fprintf(stderr, PROG ": session %u (%s at %s): %s%s\n", i, s->user,
				l->gw[s->gw], strerror(-err),
				err == -EACCES ? " (one session per login: give --logins)" : "");
			baseline_stop();
			return 1;
		}
	}
	return 0;
}

/* The CPU times at the start of the measurement. */
static void load_sample_start(struct load *l)
{
	procs_sample(0);
	l->cpu_self0 = procs_self_cpu();
	l->sampled = 1;
}

/* Sends what is due: open loop, every order planned up to now (its wait
 * for the next one in *wait_ns); closed loop, as the windows allow. Whether
 * the load still sends. */
static int load_send(struct load *l, int64_t *wait_ns)
{
	if (!l->closed_loop) {
		while (l->sent < l->total) {
			uint64_t planned = l->start + (uint64_t)((double)l->sent * l->interval);
			struct bsession *s =
				&sessions[l->first + l->sent % (n_sessions - l->first)];

			if (planned > l->now) {
				*wait_ns = (int64_t)(planned - l->now);
				break;
			}
			if (!session_can_queue(s))
				break; /* the gateway is not reading: stalls count */
			session_send(s, planned);
			l->sent++;
		}
		return 1;
	}
	for (unsigned i = l->first; i < n_sessions; i++) {
		struct bsession *s = &sessions[i];

		while ((!opt.orders || s->actions < opt.orders) && s->in_flight < l->window &&
		       l->now < l->stop_sending && session_can_queue(s)) {
			session_send(s, l->now);
			l->sent++;
		}
	}
	return !(opt.orders && l->sent == l->total);
}

/* --flood: session 0's Enters planned up to now, open loop at --flood
 * (one planned while its send buffer is full is skipped: the flood is
 * not caught up in a burst); *wait_ns shortened to the next one. */
static void load_flood(struct load *l, int64_t *wait_ns)
{
	struct bsession *s = &sessions[0];

	for (;;) {
		uint64_t planned = l->start + (uint64_t)((double)l->flood_next * 1e9 / opt.flood);

		if (planned > l->now) {
			if ((int64_t)(planned - l->now) < *wait_ns)
				*wait_ns = (int64_t)(planned - l->now);
			return;
		}
		if (session_can_queue(s))
			session_send_flood(s, (uint32_t)l->flood_next);
		else
			flood.skipped++;
		l->flood_next++;
	}
}

/* Flushes the send buffers (a heartbeat on a session idle for a second)
 * and sets up the poll of the sessions. */
static void load_flush(struct load *l, struct pollfd *pf)
{
	for (unsigned i = 0; i < n_sessions; i++) {
		struct bsession *s = &sessions[i];

		if (s->txlen && !s->lost && session_flush(s) < 0) {
			fprintf(stderr, PROG ": session %u lost\n", i);
			s->lost = l->aborted = 1;
		}
		if (l->now - s->last_tx > 1000000000ull && !s->lost && s->txlen + 8 <= TXBUF) {
			s->txlen += (size_t)soup_build_client_heartbeat(s->tx + s->txlen, 8);
			session_flush(s);
		}
		pf[i].fd = s->lost ? -1 : s->fd;
		pf[i].events = (short)(POLLIN | (s->txlen ? POLLOUT : 0));
		pf[i].revents = 0;
	}
}

/* Waits up to wait_ns for the sessions, reads what came; the orders still
 * in flight. */
static uint64_t load_poll(struct load *l, struct pollfd *pf, int64_t wait_ns)
{
	struct timespec ts = { 0, 0 };
	uint64_t in_flight = 0;

	if (wait_ns > 0) {
		ts.tv_sec = wait_ns / 1000000000;
		ts.tv_nsec = wait_ns % 1000000000;
	}
	ppoll(pf, n_sessions, &ts, NULL);
	l->now = mono_ns();
	for (unsigned i = 0; i < n_sessions; i++) {
		struct bsession *s = &sessions[i];

		if ((pf[i].revents & (POLLIN | POLLHUP | POLLERR)) && session_read(s, l->now) < 0) {
			fprintf(stderr, PROG ": session %u closed by the gateway\n", i);
			s->lost = l->aborted = 1;
		}
		in_flight += s->in_flight;
	}
	return in_flight;
}

/* The run: sending while the load lasts, then draining (every order
 * answered, every match seen from both sides and, with --book-out, what
 * the book still waits for arrived; or --timeout after the last order, or a
 * second after an interrupt; SIGUSR1 ends the sending as the end of
 * --duration would). The losses are sampled
 * before the first order is planned: their control calls delay nothing. */
static void load_loop(struct load *l)
{
	static struct pollfd pf[MAX_SESSIONS];

	losses_sample(0);
	l->start = l->now = mono_ns();
	l->interval = l->closed_loop ? 0 : 1e9 / opt.rate;
	measure_start = l->start + (uint64_t)(opt.warmup * 1e9);
	measure_start_wall = wall_ns() + (uint64_t)(opt.warmup * 1e9);
	l->stop_sending = opt.duration > 0 ? measure_start + (uint64_t)(opt.duration * 1e9)
					   : UINT64_MAX;
	if (opt.warmup <= 0)
		load_sample_start(l);
	for (;;) {
		int sending = !bench_interrupted && !bench_load_ended && !l->aborted &&
			      (l->total ? l->sent < l->total : l->now < l->stop_sending);
		int64_t wait_ns = 100000000;
		uint64_t in_flight;

		if (!l->sampled && l->now >= measure_start)
			load_sample_start(l);
		if (sending)
			sending = load_send(l, &wait_ns);
		if (sending && l->first)
			load_flood(l, &wait_ns);
		if (!sending && !l->deadline)
			l->deadline = l->now + (uint64_t)(opt.timeout * 1e9);
		load_flush(l, pf);
		in_flight = load_poll(l, pf, wait_ns);
		if (!sending && in_flight == 0 && match_open == 0 &&
		    !(opt.book_out && book_waiting(sessions, n_sessions, NULL)))
			break;
		if (l->deadline && l->now >= l->deadline)
			break;
		if (bench_interrupted && !l->deadline)
			l->deadline = l->now + 1000000000ull;
	}
}

/* --book-out: the file, and whether the book is complete (0, or 1 with a
 * message: the file may miss an order's last answer). The lines written in
 * f->book_orders. */
static int load_book(const struct load *l, struct load_figures *f)
{
	struct book_wait w;
	int rc = 0;

	f->book_orders = book_write(sessions, n_sessions);
	if (f->book_orders < 0)
		rc = 1;
	if (book_waiting(sessions, n_sessions, &w) || w.lost || f->in_flight || l->aborted) {
		fprintf(stderr,
			PROG ": --book-out %s is not the whole book: %llu orders unanswered, %llu IOC "
			"orders without their end, %llu shares executed without the resting side's "
			"Executed, %llu flood orders unanswered, %llu not kept%s\n",
			opt.book_out, (unsigned long long)f->in_flight,
			(unsigned long long)w.ioc_open, (unsigned long long)w.one_sided,
			(unsigned long long)w.flood_unanswered, (unsigned long long)w.lost,
			l->aborted ? ", a session lost" : "");
		rc = 1;
	}
	book_fini();
	return rc;
}

/* The report, and the exit status. */
static int load_finish(struct load *l)
{
	struct load_figures f = { .book_orders = -1 };
	uint64_t end;
	int rc = 0;

	procs_sample(1);
	f.cpu_self = procs_self_cpu() - l->cpu_self0;
	losses_sample(1);
	end = counts.last_answer > measure_start ? counts.last_answer : l->now;
	f.secs = (double)(end - measure_start) / 1e9;
	f.wall = (double)(mono_ns() - measure_start) / 1e9;
	f.achieved = f.secs > 0 ? (double)counts.measured_answered / f.secs : 0;
	for (unsigned i = 0; i < n_sessions; i++)
		f.in_flight += sessions[i].in_flight;
	if (opt.book_out)
		rc |= load_book(l, &f);
	report_text(l, &f);
	if (opt.json && report_json(l, &f) < 0)
		rc = 1;
	if (opt.png)
		report_png(l, &f);
	if (matches && report_matches())
		rc = 1;
	baseline_stop();
	if (f.in_flight || counts.undecodable || l->aborted)
		rc = 1;
	for (unsigned i = 0; i < n_sessions; i++)
		if (sessions[i].n_tok >= sessions[i].cap_tok && !bench_interrupted &&
		    !bench_load_ended && l->total == 0)
			fprintf(stderr, PROG ": session %u ran out of tokens (%u): the run was cut short\n",
				i, sessions[i].cap_tok);
	return rc;
}

int load_run(void)
{
	static struct load l;
	int rc;

	if ((rc = load_setup(&l)) >= 0)
		return rc;
	if ((rc = load_connect(&l)) != 0)
		return rc;
	prctl(PR_SET_TIMERSLACK, 1000UL);
	signal(SIGINT, bench_on_signal);
	signal(SIGTERM, bench_on_signal);
	signal(SIGUSR1, bench_on_signal);
	load_loop(&l);
	return load_finish(&l);
}
