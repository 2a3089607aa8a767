#!/usr/bin/env bash
# The gateway's stage clock (gateway/stages.c) across a restart: commands
# the gateway sent before it was killed and resent after its restart once
# the sequencer is back have no disk or tape time (their send time died
# with the process: counted from 0 it was the host's uptime), only the
# matcher's, from the tape on; a command sent after the restart is timed
# through every stage.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
SEQUENCERS=1 cluster_up

stage() { stat_get gw-1 "stage_$1"; }

client <<'S'
connect A TRADR1 pw1
A: buy 100 AAPL 150 token S1
A: expect Accepted token=S1 *
S
[ "$(stage tape_count)" -ge 1 ] || fail "S1 not timed: stage_tape_count $(stage tape_count)"
# S1 acknowledged in gateway.pos (saved about once a second), so that the
# restart below does not take S1's tape event for new
acked=$(($(stat_get gw-1 cmd_next) - 1))
for _ in $(seq 1 50); do
	[ "$(awk '$1 == "cmd_acked" { print $2 }' "$T/gw-1/gateway.pos" 2>/dev/null)" = "$acked" ] && break
	sleep 0.1
done
[ "$(awk '$1 == "cmd_acked" { print $2 }' "$T/gw-1/gateway.pos")" = "$acked" ] ||
	fail "gateway.pos: $(cat "$T/gw-1/gateway.pos")"

# No sequencer: S2 and S3 are journalled and sent, never acknowledged
"$CLUSTER" stop seq-1 --dir "$T" >/dev/null
client <<'S'
connect A TRADR1 pw1 seq 0
A: buy 100 AAPL 151 token S2
A: buy 100 AAPL 152 token S3
A: expect-none 500
S
[ "$(stat_get gw-1 cmds_acked)" -lt "$(stat_get gw-1 cmds_sent)" ] ||
	fail "S2 and S3 acknowledged without a sequencer"
"$CLUSTER" kill gw-1 --dir "$T" >/dev/null
"$CLUSTER" start seq-1 --dir "$T" >/dev/null
"$CLUSTER" start gw-1 --dir "$T" >/dev/null

# the restarted gateway resends them: answered, and not timed
client <<'S'
connect A TRADR1 pw1 seq 2
A: expect Accepted token=S2 *
A: expect Accepted token=S3 *
S
for s in disk tape; do
	[ "$(stage ${s}_count)" = 0 ] || fail "a resend after the restart was timed: stage_${s}_count $(stage ${s}_count), max $(stage ${s}_us_max) us"
done
for _ in $(seq 1 50); do
	[ "$(stage match_count)" = 2 ] && break
	sleep 0.1
done
[ "$(stage match_count)" = 2 ] || fail "S2 and S3 not passed by the matcher: stage_match_count $(stage match_count)"

client <<'S'
connect A TRADR1 pw1 seq 0
A: buy 100 AAPL 153 token S4
A: expect Accepted token=S4 *
S
for _ in $(seq 1 50); do
	[ "$(stage match_count)" = 3 ] && break
	sleep 0.1
done
for s in disk tape match; do
	want=1
	[ $s = match ] && want=3
	[ "$(stage ${s}_count)" = $want ] || fail "S4 not timed once in $s: stage_${s}_count $(stage ${s}_count)"
	max=$(stage ${s}_us_max)
	[ "$max" -lt 10000000 ] || fail "the $s stage took $max us"
done
[ "$(stage answer_count)" -ge 1 ] || fail "S4's Accepted not timed"
echo "ok: S2 and S3 resent after a restart untimed, S4 timed in every stage ($(stage tape_us_max) us on the tape)"
