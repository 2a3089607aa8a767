/* lockstep-replay: offline tools over a sequencer's journal, the tape as it was
 * committed: verify, dump, pcap export, re-multicast (send), matcher rebuild
 * and diff. The journal is opened read-only (common/journal.h) and read
 * sequentially with journal_iter; nothing here writes to it. See
 * ops/man/lockstep-replay.1. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "arena.h"
#include "clock.h"
#include "config.h"
#include "convert.h"
#include "engine.h"
#include "journal.h"
#include "lockstep.pb-c.h"
#include "matcher.h"
#include "moldudp64.h"
#include "net.h"
#include "snapshot.h"
#include "tape.h"
#include "wire.h"

#define PROG "lockstep-replay"
#define ARENA_BYTES (1u << 16) /* one Command unpacked at a time */
#define SEND_BATCH 64 /* datagrams per sendmmsg */
#define PROGRESS_EVERY 0x3fffu /* events between looks at the clock */

static void usage(FILE *f)
{
	fputs("Usage: lockstep-replay COMMAND JOURNAL_DIR [OPTIONS]\n"
	      "\n"
	      "Offline tools over a sequencer's journal (ops/cluster: DIR/seq-1/journal).\n"
	      "The journal is opened read-only; sequence numbers SEQ are the tape's.\n"
	      "\n"
	      "  verify  DIR [--allow-trimmed]\n"
	      "      Checks every record's CRC, that sequence numbers run without gap or\n"
	      "      duplicate from 1 (from anywhere with --allow-trimmed), that every event\n"
	      "      decodes, carries its record's seq and term, terms never go down, and\n"
	      "      the matcher can apply every command. Exit 1 naming the first bad record.\n"
	      "  dump    DIR [--from SEQ] [--to SEQ] [--symbol S] [--session USER] [--json]\n"
	      "      One line per event: UTC time of day, seq, term, origin (gateway#seq),\n"
	      "      login/firm, the command (symbol, side, shares, price, TIF, token); or\n"
	      "      JSON lines. --symbol also shows cancels, replaces and modifies of that\n"
	      "      symbol's orders; --session keeps one login's commands.\n"
	      "  pcap    DIR OUT.pcap [--from SEQ] [--to SEQ] [--group ADDR:PORT]\n"
	      "          [--source ADDR[:PORT]] [--tape-session NAME] [--max-datagram N]\n"
	      "      Writes the tape as MoldUDP64 packets in a classic pcap file\n"
	      "      (Ethernet/IPv4/UDP, nanosecond timestamps from the events) that\n"
	      "      Wireshark opens. Consecutive events with one timestamp (one sequencer\n"
	      "      batch) share a packet up to --max-datagram bytes (1472), as the\n"
	      "      sequencer sent them. Defaults: group 239.255.0.1:9200, source\n"
	      "      127.0.0.1 (port: the group's), session TAPE.\n"
	      "  send    DIR --group ADDR:PORT [--retrans ADDR:PORT] [--iface ADDR]\n"
	      "          [--pace original|max|xN] [--from SEQ] [--to SEQ]\n"
	      "          [--tape-session NAME] [--linger S] [--heartbeat MS]\n"
	      "          [--max-datagram N] [--retrans-packets N] [--ttl N]\n"
	      "      Multicasts the tape again as a live MoldUDP64 stream (session REPLAY\n"
	      "      by default) out of --iface (127.0.0.1), at the original pacing, at\n"
	      "      full speed or N times faster (batched as in pcap), with heartbeats\n"
	      "      when idle; answers retransmission requests on --retrans like a\n"
	      "      sequencer, so a matcher with tape_group, tape_session and\n"
	      "      tape_retrans pointed here consumes it unchanged. After the last event\n"
	      "      it goes on heartbeating and serving retransmissions for --linger\n"
	      "      seconds (10; -1: until SIGINT/SIGTERM), then ends the session.\n"
	      "  rebuild DIR [--to SEQ] [--config MATCHER.CONF] [--set matcher.KEY=VALUE]\n"
	      "          [--every N] [--json] [--snapshot OUT]\n"
	      "      Runs the matcher's engine offline over the tape (up to SEQ) and prints\n"
	      "      the state hash, equal bit for bit to a live replica's at that seq when\n"
	      "      the [matcher] config (partition, symbols, max_shares, capacities) is\n"
	      "      the replica's; without --config, the matcher's defaults. --every N\n"
	      "      prints the hash at every N-th seq too. --snapshot OUT writes that\n"
	      "      state as a matcher snapshot (the matcher's format, exec stream seq\n"
	      "      included): into OUT/snap-<seq>.lss when OUT is a directory (a\n"
	      "      matcher's <state_dir>/snapshots: it starts from it), else to OUT.\n"
	      "  diff    DIR_A DIR_B\n"
	      "      Compares two tapes record by record from the later first seq and\n"
	      "      tells where they part. Exit 0 when identical, 1 when not.\n"
	      "\n"
	      "No per-record index is kept (send excepted): memory does not grow with\n"
	      "the journal. On a terminal, long runs show a progress line on stderr.\n"
	      "Exit status: 0 success, 1 a check failed (bad record, tapes differ),\n"
	      "2 usage error or the journal cannot be read.\n",
	      f);
}

static int fail_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail_usage(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see lockstep-replay --help)\n", stderr);
	return 2;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

/* ---- the journal --------------------------------------------------------- */

struct tape {
	const char *dir;
	struct journal *j;
	struct journal_report rep;
	uint64_t first, last; /* the good records; 0, 0 when none */
};

/* Opens `dir` read-only (with the per-record index when `index`). A bad
 * record is a warning here (only verify fails on it): the records before it
 * are used. Returns 0 or 2 (message printed). */
static int tape_open(struct tape *t, const char *dir, int warn_bad, int index)
{
	/* Without the per-record index memory stays flat however long the
	 * journal; only send, which serves retransmissions by seq, wants it. */
	struct journal_options o = { .read_only = 1, .no_index = !index };
	int r;

	memset(t, 0, sizeof(*t));
	t->dir = dir;
	r = journal_open(&t->j, dir, &o, &t->rep);
	if (r < 0) {
		if (r == -EBADMSG)
			fprintf(stderr, PROG ": %s: segment %s: %s (not a journal, or damaged)\n", dir,
				t->rep.bad_segment, t->rep.bad_reason ? t->rep.bad_reason : "bad header");
		else
			fprintf(stderr, PROG ": %s: %s\n", dir, strerror(-r));
		return 2;
	}
	t->first = journal_first_seq(t->j);
	t->last = journal_last_seq(t->j);
	if (warn_bad && t->rep.bad_reason)
		fprintf(stderr,
			PROG ": warning: %s is bad from seq %llu (segment %s, offset %llu: %s); "
			"only seq %llu..%llu is used (see lockstep-replay verify)\n",
			dir, (unsigned long long)t->rep.bad_seq, t->rep.bad_segment,
			(unsigned long long)t->rep.bad_offset, t->rep.bad_reason,
			(unsigned long long)t->first, (unsigned long long)t->last);
	return 0;
}

static void tape_close(struct tape *t)
{
	journal_close(t->j);
	t->j = NULL;
}

/* Clamps [from, to] (to 0: the end) to the good records; 0 when that leaves
 * something, else 1 with a message. */
static int tape_range(const struct tape *t, uint64_t *from, uint64_t *to)
{
	if (!t->last) {
		fprintf(stderr, PROG ": %s: no records\n", t->dir);
		return 1;
	}
	if (*from < t->first)
		*from = t->first;
	if (!*to || *to > t->last)
		*to = t->last;
	if (*from > *to) {
		fprintf(stderr, PROG ": %s: nothing in that range (the journal holds seq %llu..%llu)\n",
			t->dir, (unsigned long long)t->first, (unsigned long long)t->last);
		return 1;
	}
	return 0;
}

/* A progress line on stderr, when it is a terminal. */
struct progress {
	int on, shown;
	const char *what;
	uint64_t lo, hi, start_ns, next_ns, n;
};

static void progress_start(struct progress *p, const char *what, uint64_t lo, uint64_t hi)
{
	memset(p, 0, sizeof(*p));
	p->on = isatty(STDERR_FILENO);
	p->what = what;
	p->lo = lo;
	p->hi = hi;
	p->start_ns = mono_ns();
	p->next_ns = p->start_ns + 500000000u;
}

static void progress_show(struct progress *p, uint64_t seq)
{
	uint64_t now = mono_ns();
	double pct = p->hi > p->lo ? 100.0 * (double)(seq - p->lo) / (double)(p->hi - p->lo) : 100.0;

	if (now < p->next_ns)
		return;
	p->next_ns = now + 250000000u;
	fprintf(stderr, "\r%s: seq %llu of %llu (%.0f%%), %.2fM events/s ", p->what,
		(unsigned long long)seq, (unsigned long long)p->hi, pct,
		(double)p->n * 1e3 / (double)(now - p->start_ns));
	p->shown = 1;
}

static inline void progress_tick(struct progress *p, uint64_t seq)
{
	if (p->on && (++p->n & PROGRESS_EVERY) == 0)
		progress_show(p, seq);
}

static void progress_end(struct progress *p)
{
	if (p->shown)
		fputs("\r\033[K", stderr);
	p->shown = 0;
}

/* ---- events -------------------------------------------------------------- */

/* One record, decoded for reading. */
struct event {
	uint64_t seq, term; /* the record's */
	struct tape_event_view v;
	const char *bad; /* why it does not decode; NULL when it does */
	const Lockstep__Command *cmd; /* body is a Command (in the arena) */
	const Lockstep__TermStart *term_start;
};

static void event_decode(struct event *e, uint64_t seq, uint64_t term, const uint8_t *data,
			 size_t len, struct arena *a)
{
	memset(e, 0, sizeof(*e));
	e->seq = seq;
	e->term = term;
	arena_reset(a);
	if (tape_event_peek(data, len, &e->v) < 0) {
		memset(&e->v, 0, sizeof(e->v));
		e->bad = "the event does not decode";
		return;
	}
	if (e->v.seq != seq) {
		e->bad = "the event's seq is not the record's";
		return;
	}
	if (e->v.body == TAPE_BODY_COMMAND) {
		e->cmd = lockstep__command__unpack(&a->allocator, e->v.body_len, e->v.body_data);
		if (!e->cmd)
			e->bad = "the command does not decode";
	} else if (e->v.body == TAPE_BODY_TERM_START) {
		e->term_start =
			lockstep__term_start__unpack(&a->allocator, e->v.body_len, e->v.body_data);
		if (!e->term_start)
			e->bad = "the term start does not decode";
	}
}

/* "HH:MM:SS.nnnnnnnnn", UTC. */
static void fmt_time(char out[32], uint64_t ns)
{
	uint64_t s = ns / 1000000000u, tod = s % 86400u;

	snprintf(out, 32, "%02u:%02u:%02u.%09u", (unsigned)(tod / 3600), (unsigned)(tod / 60 % 60),
		 (unsigned)(tod % 60), (unsigned)(ns % 1000000000u));
}

static void fmt_price(char out[24], uint32_t price)
{
	if (price == OUCH_PRICE_MARKET)
		snprintf(out, 24, "MKT");
	else
		snprintf(out, 24, "%u.%04u", price / 10000u, price % 10000u);
}

static void fmt_tif(char out[24], uint32_t tif)
{
	if (tif == OUCH_TIF_IOC)
		snprintf(out, 24, "IOC");
	else if (tif == OUCH_TIF_MARKET_HOURS)
		snprintf(out, 24, "MKT-HOURS");
	else if (tif == OUCH_TIF_SYSTEM_HOURS)
		snprintf(out, 24, "DAY");
	else
		snprintf(out, 24, "TIF=%us", tif);
}

static const char *side_name(uint32_t side)
{
	switch (side) {
	case 'B': return "BUY";
	case 'S': return "SELL";
	case 'T': return "SHORT";
	case 'E': return "SHORT-EXEMPT";
	default: return "SIDE?";
	}
}

static const char *session_kind_name(const Lockstep__SessionEvent *s)
{
	switch (s->kind) {
	case LOCKSTEP__SESSION_EVENT__KIND__LOGOUT: return "LOGOUT";
	case LOCKSTEP__SESSION_EVENT__KIND__DISCONNECT: return "DISCONNECT";
	case LOCKSTEP__SESSION_EVENT__KIND__CANCEL_ALL: return "CANCEL-ALL";
	default: return "SESSION";
	}
}

static const char *cmd_type(const Lockstep__Command *c)
{
	switch (c->body_case) {
	case LOCKSTEP__COMMAND__BODY_NEW_ORDER: return "enter";
	case LOCKSTEP__COMMAND__BODY_CANCEL: return "cancel";
	case LOCKSTEP__COMMAND__BODY_REPLACE: return "replace";
	case LOCKSTEP__COMMAND__BODY_MODIFY: return "modify";
	case LOCKSTEP__COMMAND__BODY_SESSION: return "session";
	default: return "unknown";
	}
}

/* The command part of a dump line (after the origin). */
static void print_command(FILE *f, const Lockstep__Command *c)
{
	char price[24], tif[24];

	fprintf(f, " %s%s%s", *c->user ? c->user : "-", *c->firm ? "/" : "", c->firm);
	if (c->partition)
		fprintf(f, " part=%u", c->partition);
	switch (c->body_case) {
	case LOCKSTEP__COMMAND__BODY_NEW_ORDER: {
		const Lockstep__NewOrder *o = c->new_order;

		fmt_price(price, o->price);
		fmt_tif(tif, o->tif);
		fprintf(f, " ENTER %s %u %s @ %s %s token=%s", side_name(o->side), o->shares,
			o->symbol, price, tif, o->token);
		if (o->display && o->display != 'A')
			fprintf(f, " display=%c", (char)o->display);
		if (o->min_qty)
			fprintf(f, " min=%u", o->min_qty);
		break;
	}
	case LOCKSTEP__COMMAND__BODY_CANCEL:
		fprintf(f, " CANCEL token=%s shares=%u", c->cancel->token, c->cancel->shares);
		break;
	case LOCKSTEP__COMMAND__BODY_REPLACE: {
		const Lockstep__ReplaceOrder *r = c->replace;

		fmt_price(price, r->price);
		fmt_tif(tif, r->tif);
		fprintf(f, " REPLACE token=%s -> %s %u @ %s %s", r->existing_token,
			r->replacement_token, r->shares, price, tif);
		if (r->display && r->display != 'A')
			fprintf(f, " display=%c", (char)r->display);
		break;
	}
	case LOCKSTEP__COMMAND__BODY_MODIFY:
		fprintf(f, " MODIFY token=%s %s %u", c->modify->token, side_name(c->modify->side),
			c->modify->shares);
		break;
	case LOCKSTEP__COMMAND__BODY_SESSION:
		fprintf(f, " %s", session_kind_name(c->session));
		break;
	default:
		fprintf(f, " UNKNOWN-COMMAND");
	}
}

static void print_event_text(FILE *f, const struct event *e)
{
	char t[32];

	fmt_time(t, e->v.timestamp);
	fprintf(f, "%s seq=%llu term=%llu", t, (unsigned long long)e->seq,
		(unsigned long long)e->term);
	if (e->bad) {
		fprintf(f, " BAD: %s\n", e->bad);
		return;
	}
	if (e->v.origin_len)
		fprintf(f, " %.*s#%llu", (int)e->v.origin_len, e->v.origin,
			(unsigned long long)e->v.origin_seq);
	else
		fputs(" -", f);
	if (e->term_start)
		fprintf(f, " TERM-START %s", e->term_start->node);
	else if (e->cmd)
		print_command(f, e->cmd);
	else
		fputs(" EMPTY", f);
	fputc('\n', f);
}

static void json_str(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			fprintf(f, "\\u%04x", ch); /* bytes, not UTF-8: a gateway sends ASCII */
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void json_field_str(FILE *f, const char *name, const char *s)
{
	fprintf(f, ",\"%s\":", name);
	json_str(f, s ? s : "", s ? strlen(s) : 0);
}

static void json_field_char(FILE *f, const char *name, uint32_t ch)
{
	char s[2] = { (char)ch, 0 };

	fprintf(f, ",\"%s\":", name);
	json_str(f, s, ch ? 1 : 0);
}

static void print_event_json(FILE *f, const struct event *e)
{
	char t[32];

	fmt_time(t, e->v.timestamp);
	fprintf(f, "{\"seq\":%llu,\"term\":%llu,\"timestamp\":%llu,\"time\":\"%s\"",
		(unsigned long long)e->seq, (unsigned long long)e->term,
		(unsigned long long)e->v.timestamp, t);
	if (e->bad) {
		json_field_str(f, "bad", e->bad);
		fputs("}\n", f);
		return;
	}
	fputs(",\"origin\":", f);
	json_str(f, e->v.origin, e->v.origin_len);
	fprintf(f, ",\"origin_seq\":%llu,\"commit\":%llu", (unsigned long long)e->v.origin_seq,
		(unsigned long long)e->v.commit);
	if (e->term_start) {
		fputs(",\"type\":\"term_start\"", f);
		json_field_str(f, "node", e->term_start->node);
	} else if (e->cmd) {
		const Lockstep__Command *c = e->cmd;

		fprintf(f, ",\"type\":\"%s\"", cmd_type(c));
		json_field_str(f, "user", c->user);
		json_field_str(f, "firm", c->firm);
		fprintf(f, ",\"partition\":%u", c->partition);
		switch (c->body_case) {
		case LOCKSTEP__COMMAND__BODY_NEW_ORDER: {
			const Lockstep__NewOrder *o = c->new_order;

			json_field_str(f, "token", o->token);
			json_field_char(f, "side", o->side);
			fprintf(f, ",\"shares\":%u", o->shares);
			json_field_str(f, "symbol", o->symbol);
			fprintf(f, ",\"price\":%u,\"tif\":%u", o->price, o->tif);
			json_field_str(f, "order_firm", o->firm);
			json_field_char(f, "display", o->display);
			json_field_char(f, "capacity", o->capacity);
			fprintf(f, ",\"min_qty\":%u", o->min_qty);
			json_field_char(f, "iso", o->iso);
			json_field_char(f, "cross_type", o->cross_type);
			json_field_char(f, "customer_type", o->customer_type);
			break;
		}
		case LOCKSTEP__COMMAND__BODY_CANCEL:
			json_field_str(f, "token", c->cancel->token);
			fprintf(f, ",\"shares\":%u", c->cancel->shares);
			break;
		case LOCKSTEP__COMMAND__BODY_REPLACE: {
			const Lockstep__ReplaceOrder *r = c->replace;

			json_field_str(f, "token", r->existing_token);
			json_field_str(f, "replacement_token", r->replacement_token);
			fprintf(f, ",\"shares\":%u,\"price\":%u,\"tif\":%u", r->shares, r->price, r->tif);
			json_field_char(f, "display", r->display);
			json_field_char(f, "iso", r->iso);
			fprintf(f, ",\"min_qty\":%u", r->min_qty);
			break;
		}
		case LOCKSTEP__COMMAND__BODY_MODIFY:
			json_field_str(f, "token", c->modify->token);
			json_field_char(f, "side", c->modify->side);
			fprintf(f, ",\"shares\":%u", c->modify->shares);
			break;
		case LOCKSTEP__COMMAND__BODY_SESSION:
			json_field_str(f, "session_event", session_kind_name(c->session));
			break;
		default:
			break;
		}
	} else {
		fputs(",\"type\":\"empty\"", f);
	}
	fputs("}\n", f);
}

/* ---- verify -------------------------------------------------------------- */

/* The record header at the bad spot, to tell a duplicate from a gap (the
 * journal reports both as "sequence gap"): u32 LE length, u64 LE seq. */
static int peek_record_seq(const char *dir, const char *segment, uint64_t offset, uint64_t *seq)
{
	char path[4096];
	uint8_t h[12];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, segment);
	f = fopen(path, "rb");
	if (!f)
		return -1;
	ok = fseeko(f, (off_t)offset, SEEK_SET) == 0 && fread(h, 1, sizeof(h), f) == sizeof(h);
	fclose(f);
	if (!ok)
		return -1;
	*seq = 0;
	for (int i = 7; i >= 0; i--)
		*seq = *seq << 8 | h[4 + i];
	return 0;
}

static int verify_journal_report(const struct tape *t)
{
	const struct journal_report *r = &t->rep;
	uint64_t found;

	printf("FAIL: first bad record: seq %llu (segment %s, offset %llu): %s",
	       (unsigned long long)r->bad_seq, r->bad_segment, (unsigned long long)r->bad_offset,
	       r->bad_reason);
	if (r->bad_reason && strcmp(r->bad_reason, "sequence gap") == 0) {
		if (r->bad_offset == 0)
			printf(" (the segment starts at seq %llu; seq %llu..%llu are missing)",
			       (unsigned long long)strtoull(r->bad_segment, NULL, 10),
			       (unsigned long long)r->bad_seq,
			       (unsigned long long)strtoull(r->bad_segment, NULL, 10) - 1);
		else if (peek_record_seq(t->dir, r->bad_segment, r->bad_offset, &found) == 0)
			printf(" (%s: found seq %llu)",
			       found < r->bad_seq ? "a duplicate" : "a gap", (unsigned long long)found);
	}
	printf("\n%llu good records before it (seq %llu..%llu); from it on %llu bytes (%llu whole "
	       "segments) cannot be trusted\n",
	       (unsigned long long)r->records, (unsigned long long)t->first,
	       (unsigned long long)t->last, (unsigned long long)r->cut_bytes,
	       (unsigned long long)r->cut_segments);
	return 1;
}

static int cmd_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "allow-trimmed", no_argument, NULL, 'a' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct journal_iter *it = NULL;
	struct arena arena;
	struct progress pr;
	struct engine_cmd ecmd;
	struct event e;
	struct tape t;
	uint64_t seq, term, prev_term = 0, n = 0, starts = 0, bad_seq = 0;
	const char *bad = NULL;
	const uint8_t *data;
	size_t len;
	int allow_trimmed = 0, c, r, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'a': allow_trimmed = 1; break;
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 1)
		return fail_usage("verify: one journal directory");
	rc = tape_open(&t, argv[optind], 0, 0);
	if (rc) {
		if (t.rep.bad_reason) /* a bad segment header: still name it */
			return verify_journal_report(&t);
		return rc;
	}
	if (arena_init(&arena, ARENA_BYTES) < 0)
		return 2;
	progress_start(&pr, "verify", t.first, t.last);
	r = t.last ? journal_iter_open(&it, t.j, t.first) : 0;
	while (r == 0 && it && (r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		r = 0;
		n++;
		event_decode(&e, seq, term, data, len, &arena);
		if (e.bad)
			bad = e.bad;
		else if (e.v.term != term)
			bad = "the event's term is not the record's";
		else if (term < prev_term)
			bad = "the term goes down";
		else if (e.v.body == TAPE_BODY_COMMAND &&
			 convert_command(e.cmd, &ecmd) < 0)
			bad = "a command the matcher cannot apply";
		if (bad) {
			bad_seq = seq;
			break;
		}
		if (e.term_start)
			starts++;
		prev_term = term;
		progress_tick(&pr, seq);
		if (seq == t.last)
			break;
	}
	progress_end(&pr);
	journal_iter_close(it);
	arena_fini(&arena);
	rc = 0;
	if (r < 0) {
		printf("FAIL: reading seq %llu: %s\n", (unsigned long long)(t.first + n), strerror(-r));
		rc = 1;
	} else if (bad) {
		printf("FAIL: first bad record: seq %llu: %s\n", (unsigned long long)bad_seq, bad);
		rc = 1;
	} else if (t.rep.bad_reason) {
		rc = verify_journal_report(&t);
	} else if (!t.last) {
		printf("FAIL: %s holds no journal records\n", t.dir);
		rc = 1;
	} else if (t.first != 1 && !allow_trimmed) {
		printf("FAIL: the journal starts at seq %llu: seq 1..%llu are missing "
		       "(--allow-trimmed accepts that)\n",
		       (unsigned long long)t.first, (unsigned long long)t.first - 1);
		rc = 1;
	} else {
		printf("ok: %llu records, seq %llu..%llu, terms up to %llu (%llu term starts), "
		       "%u segments, %llu bytes\n",
		       (unsigned long long)n, (unsigned long long)t.first, (unsigned long long)t.last,
		       (unsigned long long)prev_term, (unsigned long long)starts,
		       journal_segments(t.j), (unsigned long long)journal_bytes(t.j));
	}
	tape_close(&t);
	return rc;
}

/* ---- dump ---------------------------------------------------------------- */

/* The orders of one symbol, by (login, token): a set of 64-bit hashes (open
 * addressing, 0 marks a free slot), grown as orders come. */
struct tokset {
	uint64_t *v;
	size_t cap, n;
};

static uint64_t tok_key(const char *user, const char *token)
{
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "%s%c%s", user, 0, token);
	uint64_t h = XXH3_64bits(buf, n < (int)sizeof(buf) ? (size_t)n : sizeof(buf));

	return h ? h : 1;
}

static int tokset_has(const struct tokset *s, uint64_t k)
{
	if (!s->cap)
		return 0;
	for (size_t i = k & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (s->v[i] == k)
			return 1;
		if (!s->v[i])
			return 0;
	}
}

static int tokset_add(struct tokset *s, uint64_t k)
{
	if ((s->n + 1) * 2 > s->cap) {
		struct tokset bigger = { .cap = s->cap ? s->cap * 2 : 1024 };

		bigger.v = calloc(bigger.cap, sizeof(uint64_t));
		if (!bigger.v)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++)
			if (s->v[i])
				tokset_add(&bigger, s->v[i]);
		free(s->v);
		*s = bigger;
	}
	for (size_t i = k & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (s->v[i] == k)
			return 0;
		if (!s->v[i]) {
			s->v[i] = k;
			s->n++;
			return 0;
		}
	}
}

struct dump_filter {
	const char *symbol, *user;
	struct tokset orders; /* of `symbol` */
};

/* Whether a filtered dump shows e; tracks the symbol's orders as it goes. */
static int dump_match(struct dump_filter *d, const struct event *e)
{
	const Lockstep__Command *c = e->cmd;

	if (!d->symbol && !d->user)
		return 1;
	if (!c || (d->user && strcmp(c->user, d->user) != 0))
		return 0;
	if (!d->symbol)
		return 1;
	switch (c->body_case) {
	case LOCKSTEP__COMMAND__BODY_NEW_ORDER:
		if (strcmp(c->new_order->symbol, d->symbol) != 0)
			return 0;
		tokset_add(&d->orders, tok_key(c->user, c->new_order->token));
		return 1;
	case LOCKSTEP__COMMAND__BODY_CANCEL:
		return tokset_has(&d->orders, tok_key(c->user, c->cancel->token));
	case LOCKSTEP__COMMAND__BODY_MODIFY:
		return tokset_has(&d->orders, tok_key(c->user, c->modify->token));
	case LOCKSTEP__COMMAND__BODY_REPLACE:
		if (!tokset_has(&d->orders, tok_key(c->user, c->replace->existing_token)))
			return 0;
		tokset_add(&d->orders, tok_key(c->user, c->replace->replacement_token));
		return 1;
	default:
		return 0;
	}
}

static int cmd_dump(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "from", required_argument, NULL, 'f' }, { "to", required_argument, NULL, 't' },
		{ "symbol", required_argument, NULL, 's' }, { "session", required_argument, NULL, 'u' },
		{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct dump_filter d = { 0 };
	struct journal_iter *it = NULL;
	struct arena arena;
	struct progress pr;
	struct event e;
	struct tape t;
	uint64_t from = 0, to = 0, seq, term, start, shown = 0;
	const uint8_t *data;
	size_t len;
	int json = 0, c, r, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (parse_u64(optarg, &from) < 0)
				return fail_usage("--from: a sequence number");
			break;
		case 't':
			if (parse_u64(optarg, &to) < 0 || !to)
				return fail_usage("--to: a sequence number");
			break;
		case 's': d.symbol = optarg; break;
		case 'u': d.user = optarg; break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 1)
		return fail_usage("dump: one journal directory");
	if ((rc = tape_open(&t, argv[optind], 1, 0)) != 0)
		return rc;
	if (tape_range(&t, &from, &to)) {
		tape_close(&t);
		return 1;
	}
	if (arena_init(&arena, ARENA_BYTES) < 0)
		return 2;
	/* A symbol's cancels and replaces name orders by token only: follow its
	 * orders from the start, show from `from`. */
	start = d.symbol ? t.first : from;
	progress_start(&pr, "dump", start, to);
	r = journal_iter_open(&it, t.j, start);
	while (r == 0 && (r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		r = 0;
		event_decode(&e, seq, term, data, len, &arena);
		if (dump_match(&d, &e) && seq >= from) {
			if (json)
				print_event_json(stdout, &e);
			else
				print_event_text(stdout, &e);
			shown++;
		}
		progress_tick(&pr, seq);
		if (seq >= to)
			break;
	}
	progress_end(&pr);
	if (r < 0)
		fprintf(stderr, PROG ": reading %s: %s\n", t.dir, strerror(-r));
	journal_iter_close(it);
	arena_fini(&arena);
	free(d.orders.v);
	tape_close(&t);
	if (fflush(stdout) != 0) {
		fprintf(stderr, PROG ": writing: %s\n", strerror(errno));
		return 2;
	}
	return r < 0 ? 2 : 0;
}

/* ---- packets: the tape as MoldUDP64 datagrams ---------------------------- */

/* Packs consecutive records into MoldUDP64 packets the way the sequencer
 * sends them: the events of one sequencer batch carry one timestamp, so a
 * packet holds consecutive events with equal timestamps, up to `max` bytes
 * (an event too large for that alone gets a packet of its own size). */
struct packer {
	struct mold_session session;
	size_t max;
	struct mold_builder b;
	int open;
	uint64_t ts; /* of the open packet's events */
	uint64_t last_ts; /* of the last event (for one that does not decode) */
};

/* The timestamp a record's event carries (the previous one's when it does
 * not decode). */
static uint64_t record_ts(struct packer *p, const uint8_t *data, size_t len)
{
	struct tape_event_view v;

	if (tape_event_peek(data, len, &v) == 0)
		p->last_ts = v.timestamp;
	return p->last_ts;
}

/* Whether the record (with timestamp ts) belongs to the open packet, and
 * fits in it: then it is added. */
static int packer_add(struct packer *p, uint64_t ts, const uint8_t *data, size_t len)
{
	if (!p->open || ts != p->ts)
		return 0;
	return mold_build_add(&p->b, data, (uint16_t)len) == 0;
}

/* Starts a packet in buf (cap >= MOLD_MAX_PACKET) with the record at seq. */
static void packer_start(struct packer *p, uint8_t *buf, uint64_t seq, uint64_t ts,
			 const uint8_t *data, size_t len)
{
	size_t cap = p->max;

	if (MOLD_HEADER_LEN + 2 + len > cap)
		cap = MOLD_HEADER_LEN + 2 + len;
	mold_build_begin(&p->b, buf, cap, &p->session, seq);
	mold_build_add(&p->b, data, (uint16_t)len);
	p->open = 1;
	p->ts = ts;
}

/* Closes the open packet; its length. */
static size_t packer_end(struct packer *p)
{
	p->open = 0;
	return mold_build_end(&p->b);
}

/* A record too large for any MoldUDP64 packet (a block length is 16 bits and
 * a UDP payload at most 65507 bytes) cannot go out. */
static int record_fits(size_t len)
{
	return MOLD_HEADER_LEN + 2 + len <= MOLD_MAX_PACKET;
}

/* ---- pcap ----------------------------------------------------------------- */

/* Classic libpcap format: a 24-byte file header (magic 0xa1b23c4d for
 * nanosecond timestamps, version 2.4, snaplen, link type 1 = Ethernet), then
 * per packet a 16-byte record header (seconds, nanoseconds, captured and
 * original length) and the frame. Written little-endian; readers take either
 * byte order from the magic. */
#define PCAP_MAGIC_NS 0xa1b23c4du
#define PCAP_SNAPLEN 65535u
#define ETH_HLEN 14u
#define IP_HLEN 20u
#define UDP_HLEN 8u
#define FRAME_HLEN (ETH_HLEN + IP_HLEN + UDP_HLEN)

struct pcap_out {
	FILE *f;
	struct sockaddr_in src, dst;
	uint16_t ip_id;
	uint64_t packets, blocks, bytes;
};

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* One's complement sum of 16-bit big-endian words (RFC 1071), not folded. */
static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (i < len)
		sum += (uint32_t)(p[i] << 8);
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static int pcap_open(struct pcap_out *p, const char *path)
{
	uint8_t h[24];

	p->f = fopen(path, "wb");
	if (!p->f)
		return -errno;
	setvbuf(p->f, NULL, _IOFBF, 1 << 20);
	put_le32(h, PCAP_MAGIC_NS);
	put_le16(h + 4, 2);
	put_le16(h + 6, 4);
	put_le32(h + 8, 0); /* thiszone: UTC */
	put_le32(h + 12, 0); /* sigfigs */
	put_le32(h + 16, PCAP_SNAPLEN);
	put_le32(h + 20, 1); /* LINKTYPE_ETHERNET */
	return fwrite(h, sizeof(h), 1, p->f) == 1 ? 0 : -EIO;
}

/* Writes one UDP datagram as an Ethernet frame; len <= MOLD_MAX_PACKET. */
static int pcap_write(struct pcap_out *p, uint64_t ts_ns, const uint8_t *payload, size_t len)
{
	uint8_t h[16 + FRAME_HLEN];
	uint8_t *eth = h + 16, *ip = eth + ETH_HLEN, *udp = ip + IP_HLEN;
	uint32_t group = ntohl(p->dst.sin_addr.s_addr), sum;
	size_t frame = FRAME_HLEN + len;
	uint8_t pseudo[12];

	put_le32(h, (uint32_t)(ts_ns / 1000000000u));
	put_le32(h + 4, (uint32_t)(ts_ns % 1000000000u));
	put_le32(h + 8, (uint32_t)(frame < PCAP_SNAPLEN ? frame : PCAP_SNAPLEN));
	put_le32(h + 12, (uint32_t)frame);
	/* Ethernet: the IPv4 multicast MAC 01:00:5e + the group's low 23 bits,
	 * a locally administered source, EtherType IPv4. */
	eth[0] = 0x01, eth[1] = 0x00, eth[2] = 0x5e;
	eth[3] = (uint8_t)(group >> 16 & 0x7f), eth[4] = (uint8_t)(group >> 8), eth[5] = (uint8_t)group;
	memcpy(eth + 6, "\x02\x00\x00\x00\x00\x01", 6);
	put_be16(eth + 12, 0x0800);
	/* IPv4: no options, no fragmentation, TTL 1 as the sequencer sends */
	ip[0] = 0x45;
	ip[1] = 0;
	put_be16(ip + 2, (uint16_t)(IP_HLEN + UDP_HLEN + len));
	put_be16(ip + 4, p->ip_id++);
	put_be16(ip + 6, 0);
	ip[8] = 1;
	ip[9] = 17; /* UDP */
	put_be16(ip + 10, 0);
	memcpy(ip + 12, &p->src.sin_addr.s_addr, 4);
	memcpy(ip + 16, &p->dst.sin_addr.s_addr, 4);
	put_be16(ip + 10, csum_fold(csum_add(0, ip, IP_HLEN)));
	/* UDP, with its checksum over the pseudo-header */
	memcpy(udp, &p->src.sin_port, 2);
	memcpy(udp + 2, &p->dst.sin_port, 2);
	put_be16(udp + 4, (uint16_t)(UDP_HLEN + len));
	put_be16(udp + 6, 0);
	memcpy(pseudo, ip + 12, 8);
	pseudo[8] = 0;
	pseudo[9] = 17;
	put_be16(pseudo + 10, (uint16_t)(UDP_HLEN + len));
	sum = csum_add(0, pseudo, sizeof(pseudo));
	sum = csum_add(sum, udp, UDP_HLEN);
	/* the payload's words start at an even offset from the UDP header */
	sum = csum_add(sum, payload, len);
	sum = csum_fold(sum);
	put_be16(udp + 6, sum ? (uint16_t)sum : 0xffff);
	if (fwrite(h, sizeof(h), 1, p->f) != 1 || (len && fwrite(payload, len, 1, p->f) != 1))
		return -EIO;
	p->packets++;
	p->bytes += sizeof(h) + len;
	return 0;
}

static int cmd_pcap(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "from", required_argument, NULL, 'f' }, { "to", required_argument, NULL, 't' },
		{ "group", required_argument, NULL, 'g' }, { "source", required_argument, NULL, 'S' },
		{ "tape-session", required_argument, NULL, 'n' },
		{ "max-datagram", required_argument, NULL, 'm' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *group = "239.255.0.1:9200", *source = "127.0.0.1", *session = "TAPE";
	char src[96];
	struct packer pk = { .max = WIRE_MAX_DATAGRAM };
	struct pcap_out out = { 0 };
	struct journal_iter *it = NULL;
	struct progress pr;
	struct tape t;
	uint64_t from = 0, to = 0, seq, term, max = 0, skipped = 0;
	const uint8_t *data;
	uint8_t *buf;
	size_t len;
	int c, r, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (parse_u64(optarg, &from) < 0)
				return fail_usage("--from: a sequence number");
			break;
		case 't':
			if (parse_u64(optarg, &to) < 0 || !to)
				return fail_usage("--to: a sequence number");
			break;
		case 'g': group = optarg; break;
		case 'S': source = optarg; break;
		case 'n': session = optarg; break;
		case 'm':
			if (parse_u64(optarg, &max) < 0 || max < 64 || max > MOLD_MAX_PACKET)
				return fail_usage("--max-datagram: 64..%u", MOLD_MAX_PACKET);
			pk.max = (size_t)max;
			break;
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 2)
		return fail_usage("pcap: a journal directory and an output file");
	if (net_parse_addr(group, &out.dst) < 0 || !out.dst.sin_port)
		return fail_usage("--group %s: want ADDR:PORT", group);
	snprintf(src, sizeof(src), strchr(source, ':') ? "%s" : "%s:0", source);
	if (net_parse_addr(src, &out.src) < 0)
		return fail_usage("--source %s: want ADDR or ADDR:PORT", source);
	if (!out.src.sin_port)
		out.src.sin_port = out.dst.sin_port;
	if (mold_session_set(&pk.session, session) < 0)
		return fail_usage("--tape-session %s: up to 10 printable characters", session);
	if ((rc = tape_open(&t, argv[optind], 1, 0)) != 0)
		return rc;
	if (tape_range(&t, &from, &to)) {
		tape_close(&t);
		return 1;
	}
	buf = malloc(MOLD_MAX_PACKET);
	r = buf ? pcap_open(&out, argv[optind + 1]) : -ENOMEM;
	if (r < 0) {
		fprintf(stderr, PROG ": %s: %s\n", argv[optind + 1], strerror(-r));
		free(buf);
		tape_close(&t);
		return 2;
	}
	progress_start(&pr, "pcap", from, to);
	r = journal_iter_open(&it, t.j, from);
	while (r == 0 && (r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		uint64_t ts = record_ts(&pk, data, len);

		r = 0;
		if (!record_fits(len)) {
			skipped++;
		} else if (!packer_add(&pk, ts, data, len)) {
			if (pk.open)
				r = pcap_write(&out, pk.ts, buf, packer_end(&pk));
			packer_start(&pk, buf, seq, ts, data, len);
		}
		out.blocks++;
		progress_tick(&pr, seq);
		if (seq >= to)
			break;
	}
	if (r >= 0 && pk.open)
		r = pcap_write(&out, pk.ts, buf, packer_end(&pk));
	progress_end(&pr);
	journal_iter_close(it);
	if (fclose(out.f) != 0 && r >= 0)
		r = -errno;
	free(buf);
	tape_close(&t);
	if (r < 0) {
		fprintf(stderr, PROG ": pcap: %s\n", strerror(-r));
		return 2;
	}
	if (skipped)
		fprintf(stderr, PROG ": warning: %llu events too large for a UDP datagram left out\n",
			(unsigned long long)skipped);
	fprintf(stderr, "%s: %llu events (seq %llu..%llu) in %llu packets, %llu bytes\n",
		argv[optind + 1], (unsigned long long)(out.blocks - skipped),
		(unsigned long long)from, (unsigned long long)to, (unsigned long long)out.packets,
		(unsigned long long)(out.bytes + 24));
	return 0;
}

/* ---- send: the tape as a live stream again ------------------------------- */

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

struct sender {
	struct tape *t;
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
	uint64_t to; /* the last seq to send */
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
		if (!record_fits(len)) {
			s->st.skipped++;
			continue;
		}
		memcpy(s->pend, data, len);
		s->pend_len = len;
		s->pend_seq = seq;
		s->pend_ts = record_ts(&s->pk, data, len);
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
		if (!packer_add(&s->pk, s->pend_ts, s->pend, s->pend_len)) {
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
	sent = net_batch_send(&s->tx, s->fd, k);
	if (sent < (int)k)
		s->st.send_errors += k - (unsigned)(sent < 0 ? 0 : sent);
	s->st.packets += k;
	s->next = s->built;
	s->last_send_ns = now;
	return (int)k;
}

/* Answers one retransmission request from the journal with what has been
 * sent: consecutive blocks from the seq asked, up to retrans_packets
 * datagrams (the receiver asks again for the rest). */
static void send_serve(struct sender *s, const uint8_t *buf, size_t len,
		       const struct sockaddr_in *from)
{
	struct mold_request q;
	struct mold_builder b;
	uint64_t seq, end;
	unsigned k = 0;
	int n = -1; /* length of the record held in rbuf, -1: none */

	if (mold_parse_request(buf, len, &s->pk.session, &q) < 0) {
		s->st.bad_requests++;
		return;
	}
	s->st.requests++;
	if (q.seq < s->t->first) {
		/* lockstep's "too old" answer (common/rx.h): a heartbeat carrying
		 * the oldest seq held, to the requester only; then what is held */
		uint8_t hb[MOLD_HEADER_LEN];

		mold_build_heartbeat(hb, &s->pk.session, s->t->first);
		sendto(s->rfd, hb, sizeof(hb), 0, (const struct sockaddr *)from, sizeof(*from));
		s->st.too_old++;
	}
	seq = q.seq < s->t->first ? s->t->first : q.seq;
	end = q.seq + q.count < s->next ? q.seq + q.count : s->next;
	while (seq < end && k < s->retrans_packets) {
		mold_build_begin(&b, net_batch_slot(&s->req_tx, k), s->pk.max, &s->pk.session, seq);
		while (seq < end) {
			if (n < 0 && (n = journal_read(s->t->j, seq, s->rbuf, JOURNAL_MAX_RECORD, NULL)) < 0) {
				end = seq;
				break;
			}
			if (!record_fits((size_t)n)) {
				end = seq;
				break;
			}
			if (mold_build_add(&b, s->rbuf, (uint16_t)n) < 0) {
				if (b.count)
					break;
				/* alone and still too large for max: a packet of its size */
				mold_build_begin(&b, net_batch_slot(&s->req_tx, k), MOLD_MAX_PACKET,
						 &s->pk.session, seq);
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
		for (int i = 0; i < n; i++)
			send_serve(s, net_batch_slot(&s->req_rx, (unsigned)i), s->req_rx.lens[i],
				   &s->req_rx.addrs[i]);
		if ((unsigned)n < s->req_rx.n)
			return;
	}
}

static void send_control(struct sender *s, int eos, uint64_t now)
{
	uint8_t pkt[MOLD_HEADER_LEN];
	size_t n = eos ? mold_build_end_of_session(pkt, &s->pk.session, s->next)
		       : mold_build_heartbeat(pkt, &s->pk.session, s->next);

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

static int cmd_send(int argc, char **argv)
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
		{ NULL, 0, NULL, 0 },
	};
	const char *group = NULL, *retrans = NULL, *iface = "127.0.0.1", *session = "REPLAY";
	struct sender s = { .fd = -1, .rfd = -1, .speed = 1, .retrans_packets = 64 };
	struct sigaction sa = { .sa_handler = on_stop_signal };
	uint64_t from = 0, v, hb_ns = 100000000u, ttl = 1;
	int64_t linger_ns = 10 * 1000000000ll;
	struct tape t;
	int c, r, rc;

	s.pk.max = WIRE_MAX_DATAGRAM;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'g': group = optarg; break;
		case 'r': retrans = optarg; break;
		case 'i': iface = optarg; break;
		case 'n': session = optarg; break;
		case 'p':
			if (parse_pace(optarg, &s.speed) < 0)
				return fail_usage("--pace: original, max or xN (e.g. x10)");
			break;
		case 'f':
			if (parse_u64(optarg, &from) < 0)
				return fail_usage("--from: a sequence number");
			break;
		case 't':
			if (parse_u64(optarg, &s.to) < 0 || !s.to)
				return fail_usage("--to: a sequence number");
			break;
		case 'l':
			if (strcmp(optarg, "-1") == 0)
				linger_ns = -1;
			else if (parse_u64(optarg, &v) == 0 && v <= 86400 * 365)
				linger_ns = (int64_t)v * 1000000000ll;
			else
				return fail_usage("--linger: seconds, or -1 for until a signal");
			break;
		case 'b':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > 60000)
				return fail_usage("--heartbeat: 1..60000 ms");
			hb_ns = v * 1000000u;
			break;
		case 'm':
			if (parse_u64(optarg, &v) < 0 || v < 64 || v > MOLD_MAX_PACKET)
				return fail_usage("--max-datagram: 64..%u", MOLD_MAX_PACKET);
			s.pk.max = (size_t)v;
			break;
		case 'R':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > 1024)
				return fail_usage("--retrans-packets: 1..1024");
			s.retrans_packets = (unsigned)v;
			break;
		case 'T':
			if (parse_u64(optarg, &ttl) < 0 || ttl > 255)
				return fail_usage("--ttl: 0..255");
			break;
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 1)
		return fail_usage("send: one journal directory");
	if (!group)
		return fail_usage("send: --group ADDR:PORT is required");
	if (net_parse_addr(group, &s.group) < 0 || !s.group.sin_port)
		return fail_usage("--group %s: want ADDR:PORT", group);
	if (mold_session_set(&s.pk.session, session) < 0)
		return fail_usage("--tape-session %s: up to 10 printable characters", session);
	if ((rc = tape_open(&t, argv[optind], 1, 1)) != 0)
		return rc;
	s.t = &t;
	rc = 2;
	if (tape_range(&t, &from, &s.to)) {
		rc = 1;
		goto out;
	}
	s.next = s.built = from;
	s.pend = malloc(JOURNAL_MAX_RECORD);
	s.rbuf = malloc(JOURNAL_MAX_RECORD);
	if (!s.pend || !s.rbuf || net_batch_init(&s.tx, SEND_BATCH, MOLD_MAX_PACKET) < 0 ||
	    net_batch_init(&s.req_rx, 16, 64) < 0 ||
	    net_batch_init(&s.req_tx, s.retrans_packets, MOLD_MAX_PACKET) < 0) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out;
	}
	if (send_open_sockets(&s, iface, retrans, (int)ttl) < 0)
		goto out;
	if ((r = journal_iter_open(&s.it, t.j, from)) < 0 || (r = send_fetch(&s)) < 0) {
		fprintf(stderr, PROG ": reading %s: %s\n", t.dir, strerror(-r));
		goto out;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = send_loop(&s, linger_ns, hb_ns);
	if (r < 0)
		fprintf(stderr, PROG ": reading %s: %s\n", t.dir, strerror(-r));
	fprintf(stderr,
		PROG ": %llu events in %llu packets up to seq %llu, %llu heartbeats, %llu send "
		"errors; %llu retransmission requests (%llu bad, %llu too old) answered with %llu "
		"blocks in %llu packets%s\n",
		(unsigned long long)s.st.events, (unsigned long long)s.st.packets,
		(unsigned long long)(s.next - 1), (unsigned long long)s.st.heartbeats,
		(unsigned long long)s.st.send_errors, (unsigned long long)s.st.requests,
		(unsigned long long)s.st.bad_requests, (unsigned long long)s.st.too_old,
		(unsigned long long)s.st.resent_blocks,
		(unsigned long long)s.st.resent_packets, stop_signal ? " (stopped by a signal)" : "");
	rc = r < 0 ? 2 : 0;
out:
	journal_iter_close(s.it);
	if (s.fd >= 0)
		close(s.fd);
	if (s.rfd >= 0)
		close(s.rfd);
	net_batch_fini(&s.tx);
	net_batch_fini(&s.req_rx);
	net_batch_fini(&s.req_tx);
	free(s.pend);
	free(s.rbuf);
	tape_close(&t);
	return rc;
}

/* ---- rebuild: the matcher's engine, offline -------------------------------- */

#define MAX_OVERRIDES 64

/* Loads the [matcher] (and [node]) keys with the matcher's own table, so that
 * defaults and limits are the live matcher's. Keys that the daemon requires
 * but an offline run does not use (addresses, the node's name) default to
 * "" here. Returns 0 or 2 (message printed). */
static int load_matcher_config(struct matcher_config *mc, const char *path,
			       const char *const *overrides, size_t n_overrides)
{
	const struct config_key *src = matcher_config_spec.keys;
	struct config_spec spec = matcher_config_spec;
	struct config_key *keys;
	char err[512];
	size_t n = 0;
	int r;

	while (src[n].name)
		n++;
	keys = calloc(n + 1, sizeof(*keys));
	if (!keys)
		return 2;
	memcpy(keys, src, (n + 1) * sizeof(*keys));
	for (size_t i = 0; i < n; i++)
		if (!keys[i].def)
			keys[i].def = "";
	spec.keys = keys;
	r = config_load(&spec, mc, path, overrides, n_overrides, err, sizeof(err));
	free(keys);
	if (r < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	return 0;
}

struct rebuild_result {
	uint64_t seq, hash, events, applied, other_partition, skipped, highest_commit;
	uint64_t highest_term, exec_blocks;
	double open_s, apply_s;
};

/* The engine's output, counted as the matcher's on_emit counts exec blocks
 * (the same encoding, matcher/snapshot.h): a snapshot's exec_next is 1 +
 * this count. */
static void rebuild_emit(void *ctx, const char *user, const struct ouch_msg *msg)
{
	struct rebuild_result *x = ctx;
	uint8_t block[MATCHER_EXEC_SLOT - 2];

	if (matcher_exec_encode(block, x->seq, user, msg) >= 0)
		x->exec_blocks++;
}

/* Writes the rebuilt state as the matcher's snapshot of tape seq x->seq:
 * into OUT/snap-<seq>.lss when OUT is a directory (a matcher's
 * <state_dir>/snapshots), else to the file OUT. Returns 0 or 2. */
static int rebuild_snapshot(const char *out, const struct rebuild_result *x,
			    const struct matcher_config *mc, const struct engine *eng)
{
	struct matcher_snap_hdr h = { .partition = (uint32_t)mc->partition, .seq = x->seq,
				      .exec_next = 1 + x->exec_blocks, .term = x->highest_term,
				      .commit = x->highest_commit };
	char dir[4096], path[4096];
	struct stat st;
	const char *slash;
	int is_dir = stat(out, &st) == 0 && S_ISDIR(st.st_mode), r;

	if (is_dir)
		snprintf(dir, sizeof(dir), "%s", out);
	else if ((slash = strrchr(out, '/')) != NULL)
		snprintf(dir, sizeof(dir), "%.*s", slash > out ? (int)(slash - out) : 1, out);
	else
		snprintf(dir, sizeof(dir), ".");
	if ((r = matcher_snapshot_write(dir, &h, eng)) < 0) {
		fprintf(stderr, PROG ": --snapshot %s: %s\n", out, strerror(-r));
		return 2;
	}
	matcher_snapshot_path(path, sizeof(path), dir, x->seq);
	if (!is_dir && strcmp(path, out) != 0) {
		if (rename(path, out) < 0) {
			fprintf(stderr, PROG ": --snapshot: rename %s to %s: %s\n", path, out,
				strerror(errno));
			unlink(path);
			return 2;
		}
		snprintf(path, sizeof(path), "%s", out);
	}
	fprintf(stderr, PROG ": snapshot of tape seq %llu (exec seq %llu, hash %016llx) written to %s\n",
		(unsigned long long)h.seq, (unsigned long long)h.exec_next,
		(unsigned long long)h.hash, path);
	return 0;
}

static void print_rebuild(const struct rebuild_result *x, const struct engine_stats *es, int json)
{
	double total = x->open_s + x->apply_s;
	double rate = total > 0 ? (double)x->events / total : 0;
	double apply_rate = x->apply_s > 0 ? (double)x->events / x->apply_s : 0;

	if (json) {
		printf("{\"seq\":%llu,\"hash\":\"%016llx\",\"events\":%llu,\"applied\":%llu,"
		       "\"other_partition\":%llu,\"skipped\":%llu,\"highest_commit\":%llu,"
		       "\"orders_open\":%llu,\"accepted\":%llu,\"rejects\":%llu,\"canceled\":%llu,"
		       "\"matches\":%llu,\"shares_matched\":%llu,\"open_seconds\":%.6f,"
		       "\"apply_seconds\":%.6f,\"events_per_second\":%.0f,"
		       "\"apply_events_per_second\":%.0f,\"exec_next\":%llu}\n",
		       (unsigned long long)x->seq, (unsigned long long)x->hash,
		       (unsigned long long)x->events, (unsigned long long)x->applied,
		       (unsigned long long)x->other_partition, (unsigned long long)x->skipped,
		       (unsigned long long)x->highest_commit, (unsigned long long)es->orders_open,
		       (unsigned long long)es->accepted, (unsigned long long)es->rejects,
		       (unsigned long long)es->canceled, (unsigned long long)es->matches,
		       (unsigned long long)es->shares_matched, x->open_s, x->apply_s, rate,
		       apply_rate, (unsigned long long)(1 + x->exec_blocks));
		return;
	}
	printf("seq %llu hash %016llx\n", (unsigned long long)x->seq, (unsigned long long)x->hash);
	printf("events %llu: applied %llu, other partition %llu, skipped %llu; highest commit "
	       "%llu\n",
	       (unsigned long long)x->events, (unsigned long long)x->applied,
	       (unsigned long long)x->other_partition, (unsigned long long)x->skipped,
	       (unsigned long long)x->highest_commit);
	printf("book: %llu orders open; %llu accepted, %llu rejected, %llu canceled, %llu "
	       "matches, %llu shares matched\n",
	       (unsigned long long)es->orders_open, (unsigned long long)es->accepted,
	       (unsigned long long)es->rejects, (unsigned long long)es->canceled,
	       (unsigned long long)es->matches, (unsigned long long)es->shares_matched);
	printf("exec: %llu blocks (the next exec seq: %llu), highest term %llu\n",
	       (unsigned long long)x->exec_blocks, (unsigned long long)(1 + x->exec_blocks),
	       (unsigned long long)x->highest_term);
	printf("time: %.3f s opening the journal (CRC scan), %.3f s applying: %.0f events/s "
	       "overall, %.0f events/s applying\n",
	       x->open_s, x->apply_s, rate, apply_rate);
}

static int cmd_rebuild(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "to", required_argument, NULL, 't' }, { "config", required_argument, NULL, 'c' },
		{ "set", required_argument, NULL, 's' }, { "every", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' }, { "snapshot", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	static struct matcher_config mc;
	const char *overrides[MAX_OVERRIDES], *config = NULL, *snapshot = NULL;
	const char *symbols[CONVERT_MAX_SYMBOLS];
	char symbol_store[sizeof(mc.symbols)];
	struct rebuild_result x = { 0 };
	struct journal_iter *it = NULL;
	struct engine *eng = NULL;
	struct engine_config ec;
	struct engine_stats es;
	struct engine_cmd cmd;
	struct arena arena;
	struct progress pr;
	struct tape t;
	size_t n_overrides = 0;
	uint64_t from = 0, to = 0, every = 0, seq = 0, term, t0;
	const uint8_t *data;
	size_t len;
	int json = 0, c, r, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (parse_u64(optarg, &to) < 0 || !to)
				return fail_usage("--to: a sequence number");
			break;
		case 'c': config = optarg; break;
		case 's':
			if (n_overrides == MAX_OVERRIDES)
				return fail_usage("--set: at most %d", MAX_OVERRIDES);
			overrides[n_overrides++] = optarg;
			break;
		case 'e':
			if (parse_u64(optarg, &every) < 0 || !every)
				return fail_usage("--every: a number of events");
			break;
		case 'j': json = 1; break;
		case 'S': snapshot = optarg; break;
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 1)
		return fail_usage("rebuild: one journal directory");
	if ((rc = load_matcher_config(&mc, config, overrides, n_overrides)) != 0)
		return rc;
	if (convert_engine_config(&mc, symbol_store, symbols, &ec) < 0) {
		fprintf(stderr, PROG ": [matcher] symbols: want 1..%d symbols of up to 8 characters\n",
			CONVERT_MAX_SYMBOLS);
		return 2;
	}
	t0 = mono_ns();
	if ((rc = tape_open(&t, argv[optind], 1, 0)) != 0)
		return rc;
	x.open_s = (double)(mono_ns() - t0) / 1e9;
	rc = 1;
	if (to && (to > t.last || to < t.first)) {
		fprintf(stderr, PROG ": --to %llu: the journal's good records are seq %llu..%llu\n",
			(unsigned long long)to, (unsigned long long)t.first,
			(unsigned long long)t.last);
		goto out_close;
	}
	if (tape_range(&t, &from, &to))
		goto out_close;
	if (t.first != 1)
		fprintf(stderr, PROG ": warning: the journal starts at seq %llu; a matcher starts at 1\n",
			(unsigned long long)t.first);
	rc = 2;
	if ((r = engine_create(&eng, &ec)) < 0) {
		fprintf(stderr, PROG ": engine: %s\n", strerror(-r));
		goto out_close;
	}
	if (arena_init(&arena, ARENA_BYTES) < 0)
		goto out_engine;
	t0 = mono_ns();
	progress_start(&pr, "rebuild", from, to);
	/* What matcher.c's apply_event does for each committed event, in order. */
	r = journal_iter_open(&it, t.j, from);
	while (r == 0 && (r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		struct tape_event_view v;

		r = 0;
		x.events++;
		x.seq = seq; /* for rebuild_emit */
		if (tape_event_peek(data, len, &v) < 0 || v.seq != seq) {
			x.skipped++;
		} else {
			if (v.term > x.highest_term)
				x.highest_term = v.term;
			if (v.commit > x.highest_commit)
				x.highest_commit = v.commit;
			switch (convert_event(&v, mc.partition, &arena, &cmd)) {
			case CONVERT_SKIP:
				x.skipped++;
				break;
			case CONVERT_OTHER_PARTITION:
				x.other_partition++;
				engine_advance_time(eng, v.timestamp, rebuild_emit, &x);
				break;
			case CONVERT_TIME:
				engine_advance_time(eng, v.timestamp, rebuild_emit, &x);
				break;
			case CONVERT_APPLY:
				engine_apply(eng, seq, v.timestamp, &cmd, rebuild_emit, &x);
				x.applied++;
				break;
			}
		}
		if (every && seq % every == 0 && !json) {
			progress_end(&pr);
			printf("seq %llu hash %016llx\n", (unsigned long long)seq,
			       (unsigned long long)engine_hash(eng));
		}
		progress_tick(&pr, seq);
		if (seq >= to)
			break;
	}
	progress_end(&pr);
	x.apply_s = (double)(mono_ns() - t0) / 1e9;
	journal_iter_close(it);
	arena_fini(&arena);
	if (r < 0) {
		fprintf(stderr, PROG ": reading %s: %s\n", t.dir, strerror(-r));
		goto out_engine;
	}
	x.seq = seq;
	x.hash = engine_hash(eng);
	engine_get_stats(eng, &es);
	print_rebuild(&x, &es, json);
	if (engine_verify(eng) < 0) {
		fprintf(stderr, PROG ": the rebuilt book fails its consistency check (engine_verify)\n");
		rc = 1;
	} else {
		rc = 0;
		if (snapshot && x.seq > x.highest_commit)
			fprintf(stderr,
				PROG ": warning: seq %llu is past the highest commit the tape "
				"carries (%llu): a matcher would not have applied it yet\n",
				(unsigned long long)x.seq, (unsigned long long)x.highest_commit);
		if (snapshot)
			rc = rebuild_snapshot(snapshot, &x, &mc, eng);
	}
out_engine:
	engine_destroy(eng);
out_close:
	tape_close(&t);
	return rc;
}

/* ---- diff ----------------------------------------------------------------- */

/* What differs between two events at one seq, as words. */
static void diff_fields(const uint8_t *a, size_t alen, uint64_t aterm, const uint8_t *b,
			size_t blen, uint64_t bterm, char *out, size_t cap)
{
	struct tape_event_view va, vb;
	size_t n = 0;

	out[0] = '\0';
#define NOTE(what) n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s", n ? ", " : "", what)
	if (aterm != bterm)
		NOTE("term");
	if (tape_event_peek(a, alen, &va) < 0 || tape_event_peek(b, blen, &vb) < 0) {
		NOTE("event bytes");
		return;
	}
	if (va.timestamp != vb.timestamp)
		NOTE("timestamp");
	if (va.origin_len != vb.origin_len || memcmp(va.origin, vb.origin, va.origin_len) != 0 ||
	    va.origin_seq != vb.origin_seq)
		NOTE("origin");
	if (va.commit != vb.commit)
		NOTE("commit");
	if (va.body != vb.body || va.body_len != vb.body_len ||
	    (va.body_len && memcmp(va.body_data, vb.body_data, va.body_len) != 0))
		NOTE("command");
	if (!n)
		NOTE("encoding");
#undef NOTE
}

static int cmd_diff(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct journal_iter *ia = NULL, *ib = NULL;
	struct tape a, b;
	struct arena arena;
	struct progress pr;
	uint64_t from, sa = 0, sb = 0, ta, tb, same = 0;
	const uint8_t *da, *db;
	size_t la, lb;
	int c, ra = 0, rb = 0, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 2)
		return fail_usage("diff: two journal directories");
	if ((rc = tape_open(&a, argv[optind], 1, 0)) != 0)
		return rc;
	if ((rc = tape_open(&b, argv[optind + 1], 1, 0)) != 0) {
		tape_close(&a);
		return rc;
	}
	if (arena_init(&arena, ARENA_BYTES) < 0)
		return 2;
	rc = 1;
	if (!a.last || !b.last) {
		printf("%s holds no records\n", !a.last ? a.dir : b.dir);
		rc = a.last == b.last ? 0 : 1;
		goto out;
	}
	from = a.first > b.first ? a.first : b.first;
	if (a.first != b.first)
		printf("A starts at seq %llu, B at seq %llu: comparing from seq %llu\n",
		       (unsigned long long)a.first, (unsigned long long)b.first,
		       (unsigned long long)from);
	if ((ra = journal_iter_open(&ia, a.j, from)) < 0 || (rb = journal_iter_open(&ib, b.j, from)) < 0)
		goto out_err;
	progress_start(&pr, "diff", from, a.last < b.last ? a.last : b.last);
	for (;;) {
		ra = journal_iter_next(ia, &sa, &ta, &da, &la);
		rb = journal_iter_next(ib, &sb, &tb, &db, &lb);
		if (ra < 0 || rb < 0)
			break;
		if (ra == 0 || rb == 0)
			break;
		if (ta != tb || la != lb || memcmp(da, db, la) != 0) {
			char what[128];
			struct event e;

			progress_end(&pr);
			diff_fields(da, la, ta, db, lb, tb, what, sizeof(what));
			printf("the tapes part at seq %llu (%s differ; %llu records equal before it)\n",
			       (unsigned long long)sa, what, (unsigned long long)same);
			event_decode(&e, sa, ta, da, la, &arena);
			fputs("A: ", stdout);
			print_event_text(stdout, &e);
			event_decode(&e, sb, tb, db, lb, &arena);
			fputs("B: ", stdout);
			print_event_text(stdout, &e);
			goto out;
		}
		same++;
		progress_tick(&pr, sa);
	}
	progress_end(&pr);
	if (ra < 0 || rb < 0)
		goto out_err;
	if (ra == 0 && rb == 0) {
		if (a.first == b.first) {
			printf("identical: seq %llu..%llu (%llu records)\n", (unsigned long long)from,
			       (unsigned long long)a.last, (unsigned long long)same);
			rc = 0;
		} else {
			printf("equal from seq %llu to %llu (%llu records); they start apart\n",
			       (unsigned long long)from, (unsigned long long)a.last,
			       (unsigned long long)same);
		}
	} else {
		const struct tape *longer = ra ? &a : &b;

		printf("equal through seq %llu (%llu records), then %s (%s) goes on to seq %llu and "
		       "%s ends\n",
		       (unsigned long long)(from + same - 1), (unsigned long long)same,
		       ra ? "A" : "B", longer->dir, (unsigned long long)longer->last, ra ? "B" : "A");
	}
	goto out;
out_err:
	fprintf(stderr, PROG ": reading %s: %s\n", ra < 0 ? a.dir : b.dir, strerror(-(ra < 0 ? ra : rb)));
	rc = 2;
out:
	journal_iter_close(ia);
	journal_iter_close(ib);
	arena_fini(&arena);
	tape_close(&a);
	tape_close(&b);
	return rc;
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "verify", cmd_verify }, { "dump", cmd_dump }, { "pcap", cmd_pcap },
		{ "send", cmd_send }, { "rebuild", cmd_rebuild }, { "diff", cmd_diff },
	};

	if (argc < 2)
		return fail_usage("which command?");
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		puts(PROG " " LOCKSTEP_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].fn(argc - 1, argv + 1);
	return fail_usage("unknown command %s", argv[1]);
}
