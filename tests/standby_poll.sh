#!/usr/bin/env bash
# [sequencer] standby_poll: the gateways send their commands to every
# member; a member that is not primary drops them, and when they come
# closer together than standby_poll (5 ms) it reads them every 5 ms instead
# of waking for each; the primary reads them as they come (STATS
# cmd_polling 1 on a standby, 0 on the primary). In a group of 3 under
# lockstep-bench load a standby drops thousands of command datagrams in at
# most about two reads per 5 ms of the run (a bound the timer sets: a slow
# machine makes fewer reads, not more) and loses none in its socket. The
# primary killed under load: the new one reads as datagrams come (its poll
# timer was running) and every order is answered.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
skip_unless_built lockstep-bench
SEQUENCERS=3 cluster_up --set gateway.fsync=none # a datagram each gateway wakeup
BENCH=$top_builddir/lockstep-bench

PRI=$(primary_node)
S=seq-1
[ "$S" != "$PRI" ] || S=seq-2
echo "info: primary $PRI, standby $S"

# cmd_reads and commands_ignored of NODE, on one line
reads() { poll_ctl "$1" stats | awk '$1 == "cmd_reads" { r = $2 } $1 == "commands_ignored" { i = $2 } END { print r + 0, i + 0 }'; }

polling() { stat_get "$1" cmd_polling; }
[ "$(polling "$S")" = 1 ] || fail "standby $S: cmd_polling $(polling "$S")"
[ "$(polling "$PRI")" = 0 ] || fail "primary $PRI: cmd_polling $(polling "$PRI")"

# Under load
read -r r0 i0 < <(reads "$S")
t0=$(ms_now)
timeout -k 5 60 "$BENCH" --connect "127.0.0.1:$P" --sessions 2 --rate 4000 --warmup 0 --duration 2 --timeout 20 --cluster "$T" \
	--json "$T/bench.json" >"$T/bench.out" 2>&1 || { cat "$T/bench.out"; fail "lockstep-bench failed"; }
t1=$(ms_now)
read -r r1 i1 < <(reads "$S")
dr=$((r1 - r0)) di=$((i1 - i0))
echo "info: standby $S: $di command datagrams dropped in $dr reads over $((t1 - t0)) ms"
[ "$di" -ge 500 ] || fail "standby $S dropped $di command datagrams under load (the gateway sends it every one)"
[ "$dr" -le $(((t1 - t0) * 2 / 5 + 100)) ] || fail "standby $S read $dr times in $((t1 - t0)) ms: not every 5 ms"
[ $((dr * 2)) -lt "$di" ] || fail "standby $S read $dr times for $di datagrams: a wakeup each"
[ "$(stat_get "$S" rxq_dropped)" = 0 ] || fail "standby $S: rxq_dropped $(stat_get "$S" rxq_dropped)"
no_losses "$T/bench.json"

# Failover under load: the new primary reads as datagrams come
bg_start "$T/bench2.out" timeout -k 5 60 "$BENCH" --connect "127.0.0.1:$P" --sessions 2 \
	--rate 2000 --warmup 0 --duration 4 --timeout 20 --json "$T/bench2.json"
sleep 1.5
"$CLUSTER" kill "$PRI" --dir "$T" >/dev/null
Q=
for _ in $(seq 1 100); do
	Q=$("$CLUSTER" primary --dir "$T" 2>/dev/null) && [ "$Q" != "$PRI" ] && break
	sleep 0.1
done
[ -n "$Q" ] && [ "$Q" != "$PRI" ] || fail "no new primary after $PRI was killed"
echo "info: new primary $Q"
[ "$(polling "$Q")" = 0 ] || fail "new primary $Q: cmd_polling $(polling "$Q")"
wait "$BG_PID" || { cat "$T/bench2.out"; fail "lockstep-bench across the failover failed"; }
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["unanswered"] == 0, d["unanswered"]' \
	"$T/bench2.json" || fail "orders unanswered across the failover"
client <<'S'
connect A TRADR1 pw1 seq 0
A: buy 100 AAPL 150 token F1
A: expect Accepted token=F1 *
S
echo "ok: standbys poll the command socket, primaries read it as datagrams come"
