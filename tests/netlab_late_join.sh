#!/usr/bin/env bash
# A matcher started after LOCKSTEP_NETLAB_EVENTS (default 100000) events are
# on the tape, on a host of its own (ops/cluster --netlab), catches up from
# the sequencer's journal by retransmission and agrees with its twin.
# Reports how long the catch-up took.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
events=${LOCKSTEP_NETLAB_EVENTS:-100000}
netlab_cluster_up 5

# matcher-2 has seen nothing but the term start: stop it and forget it.
"$CLUSTER" kill matcher-2 --dir "$T" >/dev/null
rm -rf "${T:?}/matcher-2"
# Every order the bench sends is at least one event on the tape: a round
# normally does; bounded.
for round in 1 2 3 4 5; do
	s=$(ctl_seq seq-1)
	[ "$s" -lt "$events" ] || break
	n=$(( (events - s) / 3 + 10 )) # per session, 3 sessions
	bench 120 --sessions 3 --orders "$n" --seed "$round" --timeout 30 --quiet \
		>"$T/bench$round.out" 2>&1 ||
		{ cat "$T/bench$round.out"; fail "bench round $round: orders unanswered"; }
done
s=$(ctl_seq seq-1)
[ "$s" -ge "$events" ] || fail "only $s events on the tape after 5 bench rounds"
t0=$(ms_now)
"$CLUSTER" start matcher-2 --dir "$T" >/dev/null
while [ $(( $(ms_now) - t0 )) -lt 120000 ]; do
	[ "$(ctl_seq matcher-2)" -ge "$s" ] 2>/dev/null && break
	sleep 0.05
done
t1=$(ms_now)
wait_agree 30
req=$(ctl_counter matcher-2 retrans_requests_sent)
echo "info: matcher-2 started after $s events, applied them all $((t1 - t0)) ms after its start (process start included) with $req retransmission requests"
echo "ok: the late matcher caught up from the journal; matchers agree at seq $SEQ, hash $HASH"
