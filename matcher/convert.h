/* How a committed tape event becomes an engine command: the one conversion
 * that the live matcher and lockstep-replay's offline rebuild share, so that
 * a rebuild applies exactly what the replicas apply and reaches their state
 * hash bit for bit.
 *
 * The policy, per event at tape sequence number seq:
 *  - tape_event_peek() fails, or the Event's seq is not the block's: the
 *    event is skipped (neither applied nor advancing tape time);
 *  - a DayEvent (END_OF_DAY, START_OF_DAY): engine_apply() of an ENGINE_DAY
 *    command, whatever the partition (every partition's market opens and
 *    closes); one that does not decode is skipped, one of another kind
 *    advances tape time;
 *  - an Admin (an operator's risk command): engine_apply() of an
 *    ENGINE_ADMIN command, whatever the partition (limits are a firm's or
 *    a user's everywhere); one that does not decode is skipped;
 *  - another body (TermStart, none): tape time advances
 *    (engine_advance_time);
 *  - a Command that does not unpack or convert: skipped, as above;
 *  - a Command of another partition: tape time advances;
 *  - otherwise engine_apply() with the Event's timestamp.
 * Every replica sees the same bytes, so skipping keeps them equal. */
#ifndef LOCKSTEP_CONVERT_H
#define LOCKSTEP_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "engine.h"
#include "lockstep.pb-c.h"
#include "matcher.h"
#include "tape.h"

#define CONVERT_MAX_SYMBOLS 256

enum convert_result {
	CONVERT_SKIP, /* undecodable: skip it, tape time does not move */
	CONVERT_TIME, /* no command: engine_advance_time(view->timestamp) */
	CONVERT_OTHER_PARTITION, /* another partition's command: advance time too */
	CONVERT_APPLY, /* engine_apply(seq, view->timestamp, cmd): a command or a day */
};

/* Command (unpacked by protobuf-c) -> engine command (strings copied, too
 * long ones refused). 0, or -1 when a field cannot be what a gateway sends
 * or the body is unknown. The reference that command_decode() (command.h),
 * which the matcher and lockstep-replay use, is tested and fuzzed against. */
int convert_command(const Lockstep__Command *c, struct engine_cmd *out);

/* Decides what the event `v` (already peeked, v->seq checked against the
 * block's sequence number by the caller) means for `partition`. The Command
 * is decoded by command_decode() (command.h); *cmd is set for CONVERT_APPLY. */
enum convert_result convert_event(const struct tape_event_view *v, uint64_t partition,
				  struct engine_cmd *cmd);

/* The engine's configuration from a matcher's: symbols parsed from
 * cfg->symbols (separated by spaces, tabs or commas, 1..CONVERT_MAX_SYMBOLS of
 * 1..8 characters) into `store` (a copy of the string, at least
 * sizeof(cfg->symbols) bytes) and `symbols` (CONVERT_MAX_SYMBOLS entries),
 * which out points into; limits as the matcher applies them. 0 or -EINVAL. */
int convert_engine_config(const struct matcher_config *cfg, char *store,
			  const char *symbols[CONVERT_MAX_SYMBOLS], struct engine_config *out);

#endif
