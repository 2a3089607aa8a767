/* The trading day on the sequencer: END_OF_DAY and START_OF_DAY sequenced
 * by the primary (lockstepctl end-of-day / start-of-day, or the
 * [sequencer] end_of_day / start_of_day schedule), the days' sessions on
 * the wire (common/tapeday.h) as the journal records them, and retention.
 *
 * The day state follows the journal, not the primary's say-so: every
 * member notes each day event it journals (io_append), a rescan after a
 * cut rebuilds it, and so the day a datagram is sent in is the same on
 * every member that sends or answers for it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "lockstep.pb-c.h"
#include "log.h"
#include "raft.h"
#include "seq_private.h"

#define DAY_NS (86400ull * 1000000000ull)

static struct log_ratelimit rl_day = LOG_RATELIMIT_INIT(1, 5);

void seq_day_reset(struct sequencer *s)
{
	(void)tapeday_init(&s->days, s->cfg.tape_session); /* checked at open */
	s->closed = 0;
	s->opened_ns = s->closed_ns = 0;
}

void seq_day_before_append(struct sequencer *s, uint64_t seq, const struct tape_event_view *v)
{
	enum tape_day_kind kind;
	uint32_t day;

	(void)seq;
	if (v->body == TAPE_BODY_DAY && tape_day_peek(v->body_data, v->body_len, &kind, &day) == 0 &&
	    kind == TAPE_DAY_START)
		journal_roll(s->journal);
}

void seq_day_note(struct sequencer *s, uint64_t seq, const struct tape_event_view *v)
{
	enum tape_day_kind kind;
	uint32_t day;

	if (!s->opened_ns)
		s->opened_ns = v->timestamp; /* day 1 opened with the first event */
	if (v->body != TAPE_BODY_DAY || tape_day_peek(v->body_data, v->body_len, &kind, &day) < 0)
		return;
	if (kind == TAPE_DAY_END) {
		s->closed = 1;
		s->closed_ns = v->timestamp;
	} else if (kind == TAPE_DAY_START) {
		if (tapeday_learn(&s->days, day, seq) < 0)
			log_ratelimited(&rl_day, LOG_LVL_WARNING,
					"tape %llu: start of day %u cannot begin there: ignored",
					(unsigned long long)seq, day);
		s->closed = 0;
		s->opened_ns = v->timestamp;
	}
}

void seq_day_first(struct sequencer *s, const struct tape_event_view *v)
{
	Lockstep__DayEvent *d;

	s->opened_ns = v->timestamp; /* day 1 opened with its first event */
	if (v->body != TAPE_BODY_DAY)
		return;
	d = lockstep__day_event__unpack(NULL, v->body_len, v->body_data);
	if (!d)
		return;
	if (d->kind == LOCKSTEP__DAY_EVENT__KIND__START_OF_DAY)
		for (size_t i = 0; i < d->n_gateways; i++)
			seq_gw_raise(s, d->gateways[i]->name, d->gateways[i]->next);
	lockstep__day_event__free_unpacked(d, NULL);
}

void seq_day_wire(const struct sequencer *s, uint64_t index, struct mold_session *session,
		  uint64_t *wire)
{
	tapeday_wire(&s->days, index, session, wire);
}

/* START_OF_DAY carries every gateway's next command number: a journal that
 * begins with it (retention) still knows them. */
static size_t pack_day(struct sequencer *s, int start, uint32_t day, uint8_t *buf, size_t cap)
{
	Lockstep__DayEvent ev = LOCKSTEP__DAY_EVENT__INIT;
	Lockstep__GatewayNext gn[SEQ_MAX_GATEWAYS], *gp[SEQ_MAX_GATEWAYS];
	size_t n;

	ev.kind = start ? LOCKSTEP__DAY_EVENT__KIND__START_OF_DAY
			: LOCKSTEP__DAY_EVENT__KIND__END_OF_DAY;
	ev.day = day;
	if (start) {
		for (unsigned i = 0; i < s->n_gw; i++) {
			lockstep__gateway_next__init(&gn[i]);
			gn[i].name = s->gw_list[i]->name;
			gn[i].next = s->gw_list[i]->next;
			gp[i] = &gn[i];
		}
		ev.n_gateways = s->n_gw;
		ev.gateways = gp;
	}
	n = lockstep__day_event__get_packed_size(&ev);
	if (n > cap)
		return 0;
	return lockstep__day_event__pack(&ev, buf);
}

int seq_day_emit(struct sequencer *s, int start, char *msg, size_t cap)
{
	uint8_t buf[SEQ_MAX_GATEWAYS * (MOLD_SESSION_LEN + 16) + 32];
	struct mold_session sess;
	char name[MOLD_SESSION_LEN + 1];
	uint32_t day = tapeday_last(&s->days)->day;
	uint64_t seq = s->next_seq;
	size_t n;
	int r;

	if (s->state != SEQ_PRIMARY || s->disk_full ||
	    raft_transfer_target(s->raft) != RAFT_NOBODY) {
		snprintf(msg, cap, "%s", s->disk_full ? "the disk is full" : "not the primary");
		return -EAGAIN;
	}
	if (start == !s->closed) {
		snprintf(msg, cap, "the market of day %u is %s already", day,
			 start ? "open" : "closed");
		return -EALREADY;
	}
	if (start && day >= TAPEDAY_MAX_DAY) {
		snprintf(msg, cap, "day %u is the last a session name can carry", day);
		return -ERANGE;
	}
	day += start ? 1 : 0;
	n = pack_day(s, start, day, buf, sizeof(buf));
	if (n == 0) {
		snprintf(msg, cap, "the day event does not fit");
		return -EMSGSIZE;
	}
	if (start) {
		/* the day's first event opens a datagram in its session */
		seq_tape_close_packet(s);
		(void)tapeday_learn(&s->days, day, seq);
	}
	s->emitting_day = 1;
	r = seq_tape_emit_own(s, TAPE_BODY_DAY, buf, n);
	s->emitting_day = 0;
	if (r < 0) {
		if (start)
			tapeday_forget_after(&s->days, seq - 1);
		snprintf(msg, cap, "%s", r == -EMSGSIZE ? "the day event does not fit one tape "
							  "datagram (raise max_datagram)"
							: strerror(-r));
		return r;
	}
	s->st.day_events++;
	tapeday_session(&s->days, day, &sess);
	mold_session_str(&sess, name);
	if (start)
		snprintf(msg, cap, "day %u opened at seq %llu: tape session %s", day,
			 (unsigned long long)seq, name);
	else
		snprintf(msg, cap, "day %u closed at seq %llu", day, (unsigned long long)seq);
	log_notice("%s", msg);
	return 0;
}

/* "HH:MM:SS" into ns since midnight; -1 when it is not one. */
static int64_t parse_hms(const char *t)
{
	unsigned h, m, sec;
	char end;

	if (sscanf(t, "%2u:%2u:%2u%c", &h, &m, &sec, &end) != 3 || h > 23 || m > 59 || sec > 59)
		return -1;
	return (int64_t)((h * 3600ull + m * 60ull + sec) * 1000000000ull);
}

int seq_day_check_config(const struct seq_config *c)
{
	if (c->end_of_day[0] && parse_hms(c->end_of_day) < 0) {
		log_err("[sequencer] end_of_day \"%s\": not HH:MM:SS", c->end_of_day);
		return -EINVAL;
	}
	if (c->start_of_day[0] && parse_hms(c->start_of_day) < 0) {
		log_err("[sequencer] start_of_day \"%s\": not HH:MM:SS", c->start_of_day);
		return -EINVAL;
	}
	return 0;
}

/* The latest instant at or before now (wall ns) at time of day tod. */
static uint64_t last_at(uint64_t now, int64_t tod)
{
	uint64_t t = now / DAY_NS * DAY_NS + (uint64_t)tod;

	return t > now ? t - DAY_NS : t;
}

void seq_day_tick(struct sequencer *s)
{
	uint64_t now = wall_ns();
	const char *when = s->closed ? s->cfg.start_of_day : s->cfg.end_of_day;
	uint64_t since = s->closed ? s->closed_ns : s->opened_ns;
	char msg[160];
	int r;

	if (!when[0] || s->disk_full)
		return;
	if (since == 0) /* an empty journal: the day opens now */
		since = s->opened_ns = now;
	if (last_at(now, parse_hms(when)) <= since)
		return;
	r = seq_day_emit(s, s->closed, msg, sizeof(msg));
	if (r < 0 && r != -EAGAIN)
		log_ratelimited(&rl_day, LOG_LVL_WARNING, "scheduled %s: %s",
				s->closed ? "start of day" : "end of day", msg);
}

/* Retention: once the last START_OF_DAY is committed, the days before the
 * last `retention` leave the live journal, each whole (a day starts a
 * segment: journal_roll), into archive_dir/SESSION/ or removed. Run at the
 * heartbeat tick, on every member; a member away for longer than the
 * retention cannot then catch up from the group (the man page says so). */
void seq_day_retain(struct sequencer *s)
{
	const struct tapeday_day *last = tapeday_last(&s->days);
	char dir[sizeof(s->cfg.archive_dir) + MOLD_SESSION_LEN + 2];
	char name[MOLD_SESSION_LEN + 1];
	struct mold_session sess;
	uint64_t keep;
	int r;

	if (!s->cfg.retention || last->day <= s->cfg.retention || s->commit < last->base)
		return;
	keep = tapeday_base(&s->days, last->day - (uint32_t)s->cfg.retention + 1);
	if (!keep || keep <= journal_first_seq(s->journal))
		return;
	/* day by day, oldest first: each into a directory of its own */
	for (unsigned i = 0; i + 1 < s->days.n && s->days.known[i + 1].base <= keep; i++) {
		uint64_t end = s->days.known[i + 1].base;

		if (end <= journal_first_seq(s->journal))
			continue;
		tapeday_session(&s->days, s->days.known[i].day, &sess);
		mold_session_str(&sess, name);
		snprintf(dir, sizeof(dir), "%s/%s", s->cfg.archive_dir, name);
		r = journal_drop_before(s->journal, end, s->cfg.archive_dir[0] ? dir : NULL);
		if (r < 0) {
			log_ratelimited(&rl_day, LOG_LVL_WARNING,
					"retention: day %u (%s) stays in the journal: %s",
					s->days.known[i].day, name, strerror(-r));
			return;
		}
		s->st.days_dropped++;
		log_notice("retention: day %u (%s, seq ..%llu) left the journal%s%s",
			   s->days.known[i].day, name, (unsigned long long)(end - 1),
			   s->cfg.archive_dir[0] ? " for " : "", s->cfg.archive_dir[0] ? dir : "");
	}
}
