#!/usr/bin/env bash
# The trading day at the matchers, end to end: END_OF_DAY cancels every
# resting order (Canceled reason E) and closes the market (Enter Rejected
# reason C); START_OF_DAY opens day 2 on a new tape session, where day 1's
# tokens may be used again; the replicas agree throughout; a replica
# restarted from a day-1 snapshot, and one rebuilt from an empty state,
# follow the tape across the day boundary and agree.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
cluster_up

# wait_status NODE KEY VALUE: until NODE's STATUS says KEY=VALUE (10 s).
wait_status() {
	for _ in $(seq 1 100); do
		[ "$(status_get "$1" "$2")" = "$3" ] && return 0
		sleep 0.1
	done
	fail "$1: $2 is $(status_get "$1" "$2"), want $3"
}

client <<'S'
connect A TRADR1 pw1 seq 0
connect B TRADR2 pw2 seq 0
connect C TRADR3 pw3 seq 0
A: sell 100 AAPL 150 token D1
A: expect Accepted token=D1 *
B: buy 50 AAPL 140 token D2
B: expect Accepted token=D2 *
C: sell 30 MSFT 300 display N token D3
C: expect Accepted token=D3 *
S
for m in matcher-1 matcher-2; do
	wait_status $m market open
	[ "$(status_get $m day)" = 1 ] || fail "$m: day $(status_get $m day), want 1"
done
snapshot_now matcher-2

node_ctl seq-1 end-of-day >/dev/null || fail "end-of-day refused"
for m in matcher-1 matcher-2; do wait_status $m market closed; done
agree matcher-1 matcher-2
for m in matcher-1 matcher-2; do
	[ "$(stat_get $m orders_open)" = 0 ] || fail "$m: orders still open after the end of day"
	[ "$(stat_get $m closed_cancels)" = 3 ] || fail "$m: closed_cancels $(stat_get $m closed_cancels), want 3"
done
# each owner heard Canceled reason E (its stream from the start)
f=$T/day1.script
cat >"$f" <<'S'
connect A TRADR1 pw1 seq 1
connect C TRADR3 pw3 seq 1
sleep 1500
S
"$CLIENT" --connect "127.0.0.1:$P" --timeout 5000 --script "$f" >"$f.out" 2>&1 || true
grep -q "Canceled token=D1 dec=100 reason=E" "$f.out" || { cat "$f.out" >&2; fail "TRADR1: no Canceled E for D1"; }
grep -q "Canceled token=D3 dec=30 reason=E" "$f.out" || { cat "$f.out" >&2; fail "TRADR3: no Canceled E for D3"; }
# closed: an Enter is Rejected C
client <<'S'
connect A TRADR1 pw1 seq 0
A: sell 10 AAPL 150 token D4
A: expect Rejected token=D4 reason=C *
S

# matcher-2 goes down while closed; the next day opens without it
"$CLUSTER" kill matcher-2 --dir "$T" >/dev/null
node_ctl seq-1 start-of-day >/dev/null || fail "start-of-day refused"
wait_status matcher-1 market open
[ "$(status_get matcher-1 day)" = 2 ] || fail "matcher-1: day $(status_get matcher-1 day), want 2"
# day 1's tokens are free again
client <<'S'
connect A TRADR1 pw1 seq 0
connect B TRADR2 pw2 seq 0
A: sell 100 AAPL 150 token D1
A: expect Accepted token=D1 *
B: buy 60 AAPL 150 token D2
B: expect Accepted token=D2 *
A: expect Executed token=D1 60 @ 150.0000 liq=A *
B: expect Executed token=D2 60 @ 150.0000 liq=R *
S
# back from its day-1 snapshot: it follows the tape into day 2's session
"$CLUSTER" start matcher-2 --dir "$T" >/dev/null
agree matcher-1 matcher-2
grep -q "loaded snapshot .*snap-0*$SNAP_SEQ.lss" "$T/matcher-2.log" || fail "matcher-2 did not load snapshot $SNAP_SEQ"
[ "$(status_get matcher-2 day)" = 2 ] && [ "$(status_get matcher-2 market)" = open ] ||
	fail "matcher-2: day $(status_get matcher-2 day) $(status_get matcher-2 market) after its restart"
# and from nothing: the whole tape, both days
"$CLUSTER" kill matcher-2 --dir "$T" >/dev/null
rm -rf "$T/matcher-2/snapshots"
"$CLUSTER" start matcher-2 --dir "$T" >/dev/null
agree matcher-1 matcher-2
[ "$(stat_get matcher-2 closed_cancels)" = 3 ] || fail "matcher-2 rebuilt: closed_cancels $(stat_get matcher-2 closed_cancels)"
echo "ok: day 1 closed (3 canceled E, Rejected C), day 2 open; replicas agree at seq $SEQ hash $HASH"
