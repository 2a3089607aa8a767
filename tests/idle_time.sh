#!/usr/bin/env bash
# Time moves on an idle tape (issue 16). The matchers read no clock: an
# order's time in force runs out by the tape's time, and an idle tape used
# to carry none, so a 1-second order on a quiet market stayed live until
# another order came. Now the primary sequences an event of time alone
# when nothing was sequenced for [sequencer] time_event (100 ms), and an
# expiry is applied within time_event + heartbeat / 2 (150 ms) of its time.
# On an idle cluster a 1-second order is canceled (reason T) between 1.0 s
# and 1.2 s after it was accepted, by the tape's own timestamps (Accepted
# and Canceled carry them; 50 ms of slack for the wakeups of 2 cores), and
# the replicas agree; a rebuild from the journal, time events and all,
# gives their hash. With time_event = 0s the order is still live 2 s
# later, as before. A primary handing over (step-down) on an idle tape
# sequences no time event and stays up.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-client lockstep-replay
SEQUENCERS=1

# script TIMEOUT_MS: the client's run of stdin's script; its output on stdout
script() {
	local f
	f=$(mktemp "$T/script.XXXXXX")
	cat >"$f"
	"$CLIENT" --connect "127.0.0.1:$P" --timeout "$1" --script "$f" >"$f.out" 2>&1 ||
		{ cat "$f.out" >&2; fail "client script failed"; }
	cat "$f.out"
}
# tape_s LINE: the seconds of the day of a client output line's OUCH
# timestamp ("A < HH:MM:SS.nnnnnnnnn Type ...")
tape_s() { awk '{ split($3, t, ":"); printf "%.9f\n", t[1] * 3600 + t[2] * 60 + t[3] }' <<<"$1"; }

cluster_up # time_event: its default, 100ms
sleep 0.5 # idle: time events only
t0=$(stat_get seq-1 time_events)
out=$(script 1500 <<'S'
connect A TRADR1 pw1 seq 0
A: buy 100 AAPL 150 tif 1 token T1
A: expect Accepted token=T1 * tif=1 *
A: expect-none 900
A: expect Canceled token=T1 dec=100 reason=T *
S
)
acc=$(grep ' < .* Accepted token=T1 ' <<<"$out")
can=$(grep ' < .* Canceled token=T1 ' <<<"$out")
[ -n "$acc" ] && [ -n "$can" ] || fail "no Accepted and Canceled: $out"
delay=$(python3 -c "print('%.3f' % ($(tape_s "$can") - $(tape_s "$acc")))")
python3 -c "import sys; d = float(sys.argv[1]); sys.exit(0 if 1.0 <= d <= 1.2 else 1)" "$delay" ||
	fail "canceled ${delay} s after it was accepted, want 1.0 to 1.2 s (tif 1 + at most 150 ms + slack)"
info "1-second order canceled ${delay} s after Accepted, by the tape's time; $(($(stat_get seq-1 time_events) - t0)) time events meanwhile"
agree matcher-1 matcher-2
seq=$SEQ hash=$HASH # where agree found both replicas
"$CLUSTER" down --dir "$T" >/dev/null
rb=$("$REPLAY" rebuild "$T/seq-1/journal" --to "$seq" --config "$T/matcher-1.conf" 2>&1) ||
	fail "rebuild: $rb"
grep -q "$hash" <<<"$rb" || fail "rebuild to $seq: $rb, the replicas had $hash"
info "rebuild of the journal to seq $seq (time events included) gives the replicas' hash"

# without time events: the order outlives its time on an idle tape
rm -rf "$T"
cluster_up --set sequencer.time_event=0s
script 5000 <<'S' >/dev/null
connect A TRADR1 pw1 seq 0
A: buy 100 AAPL 150 tif 1 token T2
A: expect Accepted token=T2 * tif=1 *
A: expect-none 2000
S
[ "$(stat_get seq-1 time_events)" = 0 ] || fail "time events with time_event = 0s"
echo "ok: an expiry on an idle tape within 1.2 s of its 1 s (${delay} s); without time events none in 2 s"

# A hand-over (step-down) on an idle tape: a primary handing over sequences
# nothing new, time events included (raft refuses to journal them: one
# used to stop the primary, "time event: Device or resource busy"). The
# standby it hands over to is stopped (SIGSTOP), so that the hand-over
# lasts until it is abandoned (election_max), past a time event's due time:
# the primary stays up and primary, and its time events resume.
"$CLUSTER" down --dir "$T" >/dev/null
rm -rf "$T"
SEQUENCERS=3
cluster_up
sleep 0.3 # idle: time events only
pr=$(primary_node)
to=
for n in seq-1 seq-2 seq-3; do # the first that is not the primary (no pipe to head:
	[ "$n" = "$pr" ] || { to=$n; break; } # its early exit is a SIGPIPE under pipefail)
done
to_pid=$(cat "$T/$to.pid")
kill -STOP "$to_pid"
out=$(node_ctl "$pr" --timeout 2000 step-down $((${to#seq-} - 1)) 2>&1) || true
kill -CONT "$to_pid"
info "step-down of $pr to $to (stopped): $out"
! grep -q 'time event: .*stopping' "$T/$pr.log" ||
	fail "$pr stopped during a hand-over on an idle tape: $(grep 'stopping' "$T/$pr.log")"
kill -0 "$(cat "$T/$pr.pid")" 2>/dev/null || fail "$pr exited during a hand-over: $(tail -3 "$T/$pr.log")"
pr2=$(primary_node)
t1=$(stat_get "$pr2" time_events)
sleep 0.5
t2=$(stat_get "$pr2" time_events)
[ "${t2:-0}" -gt "${t1:-0}" ] || fail "no time events from $pr2 after the hand-over ($t1, then $t2)"
echo "ok: a hand-over abandoned on an idle tape: $pr stays up, $pr2 primary, time events go on ($t1, then $t2)"
