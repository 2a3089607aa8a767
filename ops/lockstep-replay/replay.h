/* lockstep-replay: what the subcommands share (private to the binary): the
 * journal opened read-only, the progress line, decoded events and their
 * printing, and the packer that groups records into MoldUDP64 packets. */
#ifndef LOCKSTEP_REPLAY_H
#define LOCKSTEP_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "engine.h"
#include "feedgen.h"
#include "journal.h"
#include "lockstep.pb-c.h"
#include "moldudp64.h"
#include "tape.h"
#include "tapeday.h"

#define PROG "lockstep-replay"
#define ARENA_BYTES (1u << 16) /* one Command unpacked at a time */
#define PROGRESS_EVERY 0x3fffu /* events between looks at the clock */

/* ---- main.c: usage and option values --------------------------------------- */

void usage(FILE *f);
/* Prints "lockstep-replay: <message> (see lockstep-replay --help)"; returns 2. */
int fail_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A decimal u64 with nothing else: 0, or -1 (out untouched). */
int parse_u64(const char *s, uint64_t *out);
/* --from SEQ and --to SEQ (not 0): 0, or 2 with a message. */
int opt_from(const char *arg, uint64_t *from);
int opt_to(const char *arg, uint64_t *to);
/* --day N (1..TAPEDAY_MAX_DAY): 0, or 2 with a message (days.c). */
int opt_day(const char *arg, uint32_t *day);

/* ---- rebuild.c: the matcher's engine (and its feed) offline; itch.c too ---- */

struct matcher_config;
struct engine_config;
struct tapedir;

struct rebuild_result {
	uint64_t seq, hash, events, applied, other_partition, skipped, highest_commit;
	uint64_t highest_term, exec_blocks;
	double open_s, apply_s;
	struct feedgen *fg; /* the feed generator the engine reports to */
};

/* The [matcher] and [feed] keys of a matcher's config file (NULL: the
 * defaults) with overrides, as the daemon reads them, and the engine's
 * configuration from them (its symbols in symbol_store and symbols, of
 * sizeof(mc->symbols) and CONVERT_MAX_SYMBOLS): 0 or 2 (said). */
int rebuild_load_config(struct matcher_config *mc, const char *path,
			const char *const *overrides, size_t n_overrides, char *symbol_store,
			const char **symbols, struct engine_config *ec);
/* The engine of mc (ec from convert_engine_config, its risk file read) and
 * the feed generator that its market data reports go to (out NULL: the
 * messages are counted, not kept): 0, or 2 with a message. */
int rebuild_engine(const struct matcher_config *mc, struct engine_config *ec,
		   struct engine **eng, struct feedgen *fg, feedgen_out_fn out, void *ctx);
/* Checks --to against the journal and clamps the range: 0, or 1 with a
 * message. */
int rebuild_range(const struct tapedir *t, uint64_t *from, uint64_t *to);
/* Applies the events from..to in order (the hash printed every `every`
 * seqs; 0: never): 0, or a negative errno (journal). */
int rebuild_walk(const struct tapedir *t, struct engine *eng, const struct matcher_config *mc,
		 uint64_t from, uint64_t to, uint64_t every, struct rebuild_result *x);

/* ---- the subcommands: argv[0] is the subcommand's name; exit status -------- */

int cmd_verify(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_pcap(int argc, char **argv);
int cmd_send(int argc, char **argv);
int cmd_rebuild(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_days(int argc, char **argv);
int cmd_archive(int argc, char **argv);
int cmd_itch(int argc, char **argv);

/* ---- tapedir.c: a journal directory (or a day archive), read-only ---------- */

struct tapedir {
	const char *dir; /* as named: the directory, or the archive file */
	char tmp[4096]; /* an archive's segments, unpacked (removed at close); "" */
	struct journal *j;
	struct journal_report rep;
	uint64_t first, last; /* the good records; 0, 0 when none */
};

/* Opens `dir` read-only (with the per-record index when `index`). A bad
 * record is a warning here (only verify fails on it): the records before it
 * are used. `dir` may also be a day archive (lockstep-replay archive): its
 * segments are unpacked into a private temporary directory, removed again
 * by tapedir_close (or by SIGINT, SIGTERM, SIGHUP). Returns 0 or 2
 * (message printed). */
int tapedir_open(struct tapedir *t, const char *dir, int warn_bad, int index);
void tapedir_close(struct tapedir *t);
/* Clamps [from, to] (to 0: the end) to the good records; 0 when that leaves
 * something, else 1 with a message. */
int tapedir_range(const struct tapedir *t, uint64_t *from, uint64_t *to);

/* ---- days.c: trading days (common/tapeday.h) as the journal holds them ----- */

/* One day's run of records. A day begins at its START_OF_DAY (opened), or
 * at the journal's first record (day 1 when that is seq 1, else not known:
 * day 0). */
struct dayinfo {
	uint32_t day; /* 0: not known */
	int opened, ended; /* its START_OF_DAY, its END_OF_DAY are in the journal */
	uint64_t base, last, count; /* first and last index, records */
	uint64_t first_ts, last_ts; /* the events' timestamps (ns, UTC); 0: none */
};

struct daylist {
	struct dayinfo *v;
	size_t n, cap;
};

/* Reads the whole journal (one pass, no index) into l. 0 or -errno. */
int daylist_scan(struct daylist *l, const struct tapedir *t);
/* Day `day` (the last run of it); NULL when absent. */
const struct dayinfo *daylist_find(const struct daylist *l, uint32_t day);
void daylist_free(struct daylist *l);
/* --day: the index range of day `day`. 0, or 1/2 with a message. */
int days_range(const struct tapedir *t, uint32_t day, uint64_t *from, uint64_t *to);

/* Where each index goes on the wire: tapeday's table of days, learned from
 * the START_OF_DAY events as records go by (wirepos_note, in index order). */
struct wirepos {
	struct tapeday td;
	uint64_t refused; /* DayEvents that contradict the days before */
};

/* -EINVAL when `session` (day 1's name) is not a session name. */
int wirepos_init(struct wirepos *w, const char *session);
void wirepos_note(struct wirepos *w, uint64_t seq, const uint8_t *data, size_t len);
/* Learns the days that begin in the journal before index `to`. 0 or -errno. */
int wirepos_prime(struct wirepos *w, const struct tapedir *t, uint64_t to);
/* The day, session and per-day sequence number of index seq. */
void wirepos_of(const struct wirepos *w, uint64_t seq, uint32_t *day, struct mold_session *s,
		uint64_t *day_seq);

/* ---- progress.c: a progress line on stderr, when it is a terminal ---------- */

struct progress {
	int on, shown;
	const char *what;
	uint64_t lo, hi, start_ns, next_ns, n;
};

void progress_start(struct progress *p, const char *what, uint64_t lo, uint64_t hi);
void progress_show(struct progress *p, uint64_t seq);
void progress_end(struct progress *p);

static inline void progress_tick(struct progress *p, uint64_t seq)
{
	if (p->on && (++p->n & PROGRESS_EVERY) == 0)
		progress_show(p, seq);
}

/* ---- event.c: one record, decoded for reading ------------------------------- */

struct event {
	uint64_t seq, term; /* the record's */
	struct tape_event_view v;
	const char *bad; /* why it does not decode; NULL when it does */
	const Lockstep__Command *cmd; /* body is a Command (in the arena) */
	const Lockstep__TermStart *term_start;
	enum tape_day_kind day_kind; /* body is a DayEvent: its kind and day */
	uint32_t day_of_event;
	struct engine_cmd admin; /* body is an Admin: an ENGINE_ADMIN command */
	/* on the wire (set by the caller; wire_day 0: not shown) */
	uint32_t wire_day;
	char session[MOLD_SESSION_LEN + 1];
	uint64_t day_seq;
};

/* Decodes into e (pointing into data and the arena, reset first). */
void event_decode(struct event *e, uint64_t seq, uint64_t term, const uint8_t *data,
		  size_t len, struct arena *a);
/* One dump line: text, or a JSON object. */
void event_print_text(FILE *f, const struct event *e);
void event_print_json(FILE *f, const struct event *e);
/* Sets e's wire fields from w (after wirepos_note of e's record). */
void event_wire(struct event *e, const struct wirepos *w);

/* ---- packer.c: the tape as MoldUDP64 datagrams ------------------------------ */

/* Packs consecutive records into MoldUDP64 packets the way the sequencer
 * sends them: the events of one sequencer batch carry one timestamp, so a
 * packet holds consecutive events with equal timestamps of one trading day,
 * up to `max` bytes (an event too large for that alone gets a packet of its
 * own size). Each packet goes in its day's session with the day's sequence
 * number (common/tapeday.h): the days are learned from the records as they
 * come (packer_record), so records are given in index order from the
 * journal's first, or after wirepos_prime up to the first. */
struct packer {
	struct wirepos w;
	struct mold_session session; /* the open (or last) packet's */
	uint32_t day; /* the open packet's */
	size_t max;
	struct mold_builder b;
	int open;
	uint64_t ts; /* of the open packet's events */
	uint64_t last_ts; /* of the last event (for one that does not decode) */
};

/* Notes the record at seq (a day it opens) and returns the timestamp its
 * event carries (the previous one's when it does not decode). */
uint64_t packer_record(struct packer *p, uint64_t seq, const uint8_t *data, size_t len);
/* Whether the record (with timestamp ts) belongs to the open packet (same
 * timestamp, same day), and fits in it: then it is added. */
int packer_add(struct packer *p, uint64_t seq, uint64_t ts, const uint8_t *data, size_t len);
/* Starts a packet in buf (cap >= MOLD_MAX_PACKET) with the record at seq. */
void packer_start(struct packer *p, uint8_t *buf, uint64_t seq, uint64_t ts,
		  const uint8_t *data, size_t len);
/* Closes the open packet; its length. */
size_t packer_end(struct packer *p);
/* A record too large for any MoldUDP64 packet (a block length is 16 bits and
 * a UDP payload at most 65507 bytes) cannot go out. */
int packer_fits(size_t len);

#endif
