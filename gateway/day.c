/* The trading day as the gateway sees it: the tape's DayEvents become OUCH
 * System Events (End of Day 'E', Start of Day 'S') in every login's
 * SoupBinTCP stream, and the day and market state for STATUS.
 *
 * A System Event is journalled in each login's journal like an execution
 * (tag GW_TAG_DAY with its day key), so a client that logs in later and
 * asks from an older sequence number gets it too; a login that is not
 * logged in gets it in its journal as well, since its SoupBinTCP stream is
 * the login's, not the connection's. Each (day, kind) goes into a journal
 * once: a login's day_sent is the key of the last one its journal took,
 * read back at start from the progress file and the journal's last record
 * (see gw_day_login_opened), so that a restart or a retransmission of the
 * same event journals nothing.
 *
 * An event is journalled once the tape has committed it (the sequencer
 * multicasts only committed events, so at once today) and the disk takes
 * it; until then it waits here, the progress file's tape position stays
 * before it, and the tape is not skipped past it after a restart.
 *
 * The tape watcher skips gaps while none of our commands is unacknowledged,
 * so it may not see an END_OF_DAY; it never skips a day's START_OF_DAY
 * (gw_day_skip_limit). A START_OF_DAY while the market is open (its day's
 * END not seen) journals the missing End of Day first, and an END_OF_DAY
 * while closed the missing Start of Day, with the event's own time: every
 * client sees E and S alternate. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "gw_private.h"
#include "journal.h"
#include "ouch.h"
#include "wire.h"

static struct log_ratelimit gw_rl = LOG_RATELIMIT_INIT(1, 20); /* this file's warnings */

#define NS_PER_DAY (86400ull * 1000000000ull)

static uint32_t key_day(uint64_t key)
{
	return (uint32_t)(key / 2);
}

static int key_is_end(uint64_t key)
{
	return (int)(key & 1);
}

void gw_day_init(struct gw *g, const uint64_t *pos)
{
	memset(&g->day, 0, sizeof(g->day));
	g->day.key = pos[GW_POS_DAY_KEY];
	g->day.hold_at = pos[GW_POS_DAY_HOLD];
}

/* The last record of a login's journal is a System Event when the gateway
 * stopped between journalling one and saving the progress file (the file
 * is saved right after, see journal_event): its key then counts. */
void gw_day_login_opened(struct gw *g, struct gw_login *l, struct journal *j)
{
	uint8_t rec[8 + GW_MAX_EXEC_MSG];
	uint64_t last = journal_last_seq(j), tag;

	l->day_sent = g->day.key;
	if (!last || journal_read(j, last, rec, sizeof(rec), NULL) < 8)
		return;
	tag = wire_get_u64(rec);
	if (tag >> GW_TAG_SHIFT == GW_TAG_DAY && (tag & GW_TAG_SEQ_MASK) > l->day_sent)
		l->day_sent = tag & GW_TAG_SEQ_MASK;
}

/* The System Event of day key `key` in every login's journal that lacks
 * it. 0, or the journal's error (-ENOSPC...: those that took it keep it,
 * the others are tried again). */
static int journal_event(struct gw *g, uint64_t key, uint64_t timestamp)
{
	struct ouch_msg m = { .type = OUCH_SYSTEM_EVENT };
	uint8_t buf[OUCH_MAX_LEN];
	size_t took = 0;
	int n, err = 0;

	/* as the matchers stamp theirs: tape time in ns since midnight UTC */
	m.u.system_event.timestamp = timestamp % NS_PER_DAY;
	m.u.system_event.event_code =
		key_is_end(key) ? OUCH_EVENT_END_OF_DAY : OUCH_EVENT_START_OF_DAY;
	n = ouch_encode_outbound(&m, buf, sizeof(buf));
	if (n <= 0)
		return -EINVAL; /* cannot happen: fixed fields */
	for (size_t i = 0; i < g->logins.n; i++) {
		struct gw_login *l = g->logins.v[i];
		int rc;

		if (l->day_sent >= key || !l->j)
			continue;
		rc = gw_login_append(&g->logins, l, GW_TAG((uint64_t)GW_TAG_DAY, key), buf,
				     (size_t)n);
		if (rc < 0) {
			err = rc;
			if (rc == -ENOSPC || rc == -EDQUOT)
				break; /* the others would fail too: all wait for room */
			continue; /* counted and logged: this login's copy is lost */
		}
		l->day_sent = key;
		g->st.day_events++;
		took++;
	}
	if (err == -ENOSPC || err == -EDQUOT)
		return err;
	g->day.key = key;
	log_notice("day %u: %s of day (System Event %c) journalled for %zu logins", key_day(key),
		   key_is_end(key) ? "end" : "start",
		   key_is_end(key) ? OUCH_EVENT_END_OF_DAY : OUCH_EVENT_START_OF_DAY, took);
	return 0;
}

/* Journals day event `key` (and the one the tape watcher did not see
 * before it). 0 or -ENOSPC / -EDQUOT. */
static int apply(struct gw *g, uint64_t key, uint64_t timestamp)
{
	uint64_t implied = 0;
	int rc;

	if (key <= g->day.key)
		return 0; /* journalled before (a retransmission, a restart) */
	/* the day's START follows an END, an END a START */
	if (key_is_end(key) && key_is_end(g->day.key))
		implied = key - 1; /* closed: this day's start was not seen */
	else if (!key_is_end(key) && !key_is_end(g->day.key) && key > 2)
		implied = key - 1; /* open: the day before's end was not seen */
	if (implied > g->day.key) {
		log_ratelimited(&gw_rl, LOG_LVL_WARNING,
				"day %u: %s of day not seen on the tape (skipped): journalled "
				"now, before the %s",
				key_day(implied), key_is_end(implied) ? "end" : "start",
				key_is_end(key) ? "end" : "start");
		if ((rc = journal_event(g, implied, timestamp)) < 0)
			return rc;
		g->st.day_implied++;
	}
	return journal_event(g, key, timestamp);
}

void gw_day_drain(struct gw *g)
{
	int saved = 0;

	while (g->day.n > 0 && !g->disk_full) {
		const struct gw_day_pend *p = &g->day.pend[g->day.head];
		int rc;

		/* a full queue goes on without the commit: nothing is lost */
		if (p->index > g->tape[0].commit && g->day.n < GW_DAY_PENDING)
			break;
		rc = apply(g, p->key, p->timestamp);
		if (rc < 0) {
			gw_exec_disk_full(g, rc); /* tried again when there is room */
			break;
		}
		g->day.head = (g->day.head + 1) % GW_DAY_PENDING;
		g->day.n--;
		saved = 1;
	}
	/* A restart journals nothing twice: the progress file says so as
	 * soon as the journals hold it on disk (rare: twice a day). */
	if (saved)
		gw_progress_tick(g);
}

void gw_day_on_tape(struct gw *g, uint64_t index, uint64_t timestamp, const uint8_t *body,
		    size_t len)
{
	enum tape_day_kind kind;
	uint32_t day;
	unsigned i;

	if (index >= g->day.hold_at)
		g->day.hold_at = 0; /* delivered again: skipping may go on */
	if (tape_day_peek(body, len, &kind, &day) < 0 || day == 0 ||
	    (kind != TAPE_DAY_END && kind != TAPE_DAY_START)) {
		g->st.tape_malformed++;
		log_ratelimited(&gw_rl, LOG_LVL_WARNING, "tape %" PRIu64 ": malformed day event",
				index);
		return;
	}
	if (gw_day_key(day, kind) <= g->day.key)
		return;
	if (g->day.n == GW_DAY_PENDING) {
		/* cannot be (two a day): keep the newest rather than block */
		g->day.head = (g->day.head + 1) % GW_DAY_PENDING;
		g->day.n--;
	}
	i = (g->day.head + g->day.n) % GW_DAY_PENDING;
	g->day.pend[i].index = index;
	g->day.pend[i].key = gw_day_key(day, kind);
	g->day.pend[i].timestamp = timestamp;
	g->day.n++;
	gw_day_drain(g);
}

uint64_t gw_day_pending_from(const struct gw *g)
{
	if (g->day.n > 0)
		return g->day.pend[g->day.head].index;
	/* a restart's, until the tape is past it (delivered, or given up) */
	return g->day.hold_at && g->day.hold_at >= g->tape[0].s.next ? g->day.hold_at : UINT64_MAX;
}

uint64_t gw_day_skip_limit(const struct gw *g, uint64_t next, uint64_t upto)
{
	const struct tapeday *t = &g->tape[0].days;

	if (g->day.hold_at >= next && g->day.hold_at < upto)
		upto = g->day.hold_at;
	for (unsigned i = 1; i < t->n; i++) /* ascending: the first base ahead */
		if (t->known[i].base >= next) {
			if (t->known[i].base < upto)
				upto = t->known[i].base;
			break;
		}
	return upto;
}

void gw_day_status(const struct gw *g, Lockstep__ControlReply *reply)
{
	uint32_t day = key_day(g->day.key), tday = 1;

	if (g->tape[0].last)
		tday = tapeday_day_at(&g->tape[0].days, g->tape[0].last, NULL);
	/* before any day event: day 1, open; a tape already in a later day
	 * (a gateway that joined then) has opened it */
	if (tday > day || day == 0) {
		reply->day = tday > day ? tday : 1;
		reply->market = "open";
		return;
	}
	reply->day = day;
	reply->market = (char *)(key_is_end(g->day.key) ? "closed" : "open");
}
