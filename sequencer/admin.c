/* Operators' risk commands on the sequencer: lockstepctl risk, kill-switch
 * and reference send an Admin (lockstep.proto) to the primary, which checks
 * it and sequences it as an event of its own, so that every matcher of
 * every partition applies it at the same place in the total order
 * (matcher/engine.h, "Pre-trade risk"). The sequencer keeps no risk state:
 * the tape is the record, and lockstep-replay dump shows it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lockstep.pb-c.h"
#include "log.h"
#include "ouch.h"
#include "raft.h"
#include "risk.h"
#include "seq_private.h"


/* A name the engine can hold: 1..max characters, or "*" where allowed;
 * a login or firm as the credentials file has it (upper-case letters and
 * digits: anything else could never match one), a symbol printable. */
static int name_ok(const char *n, size_t max, int star, int login)
{
	size_t len = n ? strlen(n) : 0;

	if (len == 1 && n[0] == '*')
		return star;
	if (len == 0 || len > max)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (login ? !((n[i] >= 'A' && n[i] <= 'Z') || (n[i] >= '0' && n[i] <= '9'))
			  : (n[i] <= ' ' || n[i] > '~'))
			return 0;
	return 1;
}

/* Why `a` cannot go on the tape, or NULL. */
static const char *admin_invalid(const Lockstep__Admin *a)
{
	size_t max;

	if (a->kind < LOCKSTEP__ADMIN__KIND__LIMITS || a->kind > LOCKSTEP__ADMIN__KIND__REFERENCE)
		return "unknown kind";
	if (a->kind == LOCKSTEP__ADMIN__KIND__REFERENCE) {
		if (a->scope != LOCKSTEP__ADMIN__SCOPE__SYMBOL)
			return "a reference price is a symbol's";
		if (!name_ok(a->name, 8, 0, 0))
			return "a symbol is 1 to 8 characters";
		return a->price && a->price <= OUCH_PRICE_MAX
			       ? NULL
			       : "a reference price is above 0 and at most OUCH's largest price";
	}
	if (a->scope != LOCKSTEP__ADMIN__SCOPE__FIRM && a->scope != LOCKSTEP__ADMIN__SCOPE__USER)
		return "limits and kill switches are a firm's or a user's";
	max = a->scope == LOCKSTEP__ADMIN__SCOPE__FIRM ? 4 : 6;
	if (!name_ok(a->name, max, a->kind == LOCKSTEP__ADMIN__KIND__LIMITS, 1))
		return a->scope == LOCKSTEP__ADMIN__SCOPE__FIRM
			       ? "a firm is 1 to 4 upper-case letters or digits (\"*\": every "
				 "firm, for limits only)"
			       : "a user is 1 to 6 upper-case letters or digits (\"*\": every "
				 "user, for limits only)";
	if (a->kind == LOCKSTEP__ADMIN__KIND__LIMITS &&
	    (!a->limits || !a->limits->set || (a->limits->set & ~(uint32_t)RISK_ALL)))
		return "no limit given";
	if (a->cancel && a->kind != LOCKSTEP__ADMIN__KIND__KILL)
		return "only a kill switch cancels";
	return NULL;
}

/* What `a` says, for the answer and the log (risk_describe: the matchers'
 * words too). */
static void admin_describe(const Lockstep__Admin *a, char *buf, size_t cap)
{
	struct risk_limits l;

	risk_limits_from_pb(a->limits, &l);
	risk_describe(buf, cap, a->kind, a->scope, a->name, a->cancel, &l, a->price);
}

int seq_admin_emit(struct sequencer *s, const Lockstep__Admin *a, char *msg, size_t cap)
{
	uint8_t buf[256];
	char what[200];
	const char *why;
	uint64_t seq = s->next_seq;
	size_t n;
	int r;

	if (!a || (why = admin_invalid(a)) != NULL) {
		snprintf(msg, cap, "risk command refused: %s", a ? why : "no command");
		return -EINVAL;
	}
	if (s->state != SEQ_PRIMARY || s->disk_full ||
	    raft_transfer_target(s->raft) != RAFT_NOBODY) {
		snprintf(msg, cap, "%s", s->disk_full ? "the disk is full" : "not the primary");
		return -EAGAIN;
	}
	n = lockstep__admin__get_packed_size(a);
	if (n > sizeof(buf)) {
		snprintf(msg, cap, "risk command refused: too long");
		return -EMSGSIZE;
	}
	n = lockstep__admin__pack(a, buf);
	admin_describe(a, what, sizeof(what));
	if ((r = seq_tape_emit_own(s, TAPE_BODY_ADMIN, buf, n)) < 0) {
		snprintf(msg, cap, "%s", r == -EMSGSIZE ? "the risk command does not fit one "
							  "tape datagram (raise max_datagram)"
							: strerror(-r));
		return r;
	}
	s->st.admin_events++;
	snprintf(msg, cap, "%s: on the tape at seq %llu", what, (unsigned long long)seq);
	log_notice("risk: %s", msg);
	return 0;
}
