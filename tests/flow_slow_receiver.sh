#!/usr/bin/env bash
# The tape's flow control (issue 14): a matcher replica that stops for a
# moment (SIGSTOP, 300 ms, under 40,000 orders/s) is not flooded past its
# kernel buffer (1 MiB here): its status messages hold the tape at its
# position + the window its buffer holds (flow_holds), the gateway's window
# then stops the clients, and when it resumes nothing has been lost
# (rxq_dropped 0), every order is answered and both replicas agree.
# A replica's snapshot is another matter: its pause is announced
# (test_snapshot_pause makes it 400 ms, as a large book's is), so the tape
# runs on at the other replica's pace, bounded by the paused one's buffer
# (flow_receiver_pauses, flow_receivers_behind), and the replica catches up
# from its buffer without sending the gateway the executions the other one
# sent (exec_packets_skipped_resuming), and is counted again (in step
# again); nothing lost, both agree.
# Then a replica that stays stopped past flow_timeout is forgotten: the
# tape goes on without it.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench

cluster_up --set matcher.rcvbuf=1M --set sequencer.flow_timeout=500ms \
	--set matcher.test_snapshot_pause=400ms

for _ in $(seq 1 50); do
	[ "$(stat_get seq-1 flow_receivers)" = 2 ] && break
	sleep 0.1
done
[ "$(stat_get seq-1 flow_receivers)" = 2 ] || fail "flow_receivers $(stat_get seq-1 flow_receivers), want both matchers"

m2=$(cat "$T/matcher-2.pid")
bg_start "$T/bench.out" "$BENCH" --connect "127.0.0.1:$P" --sessions 3 --rate 40000 --duration 1.5 \
	--cluster "$T" --json "$T/bench.json" --timeout 30
bench=$BG_PID
sleep 0.5
cost0=$(stat_get matcher-2 flow_cost_per_event)
(for _ in $(seq 1 50); do stat_get matcher-2 flow_cost_per_event; sleep 0.01; done >"$T/cost") &
sampler=$!
kill -STOP "$m2"
sleep 0.3
kill -CONT "$m2"
wait "$sampler"
wait "$bench" || { cat "$T/bench.out"; fail "bench: $(tail -1 "$T/bench.out")"; }
# reading its backlog, the replica's measure of an event's cost in its
# buffer does not take the bytes the kernel leaves charged for what was
# read (its window would shrink and hold the tape for nothing): an event
# costs at most a datagram of its own, 832 bytes of skb on loopback here
# (the limit leaves room for another kernel's accounting); counting the
# charged bytes made it 1,374-1,664
[ "${cost0:-0}" -gt 0 ] || fail "no flow_cost_per_event before the stop (${cost0:-none})"
[ "$(grep -c '^[0-9]' "$T/cost")" -ge 20 ] ||
	fail "too few readings of flow_cost_per_event: $(grep -c '^[0-9]' "$T/cost")"
cost_max=$(sort -n "$T/cost" | tail -1)
limit=1200
info "flow_cost_per_event $cost0 before the stop, at most $cost_max after (limit $limit)"
[ "${cost_max:-0}" -le "$limit" ] ||
	fail "flow_cost_per_event went from $cost0 to $cost_max reading the backlog"
grep -E '^(throughput|losses)' "$T/bench.out" | sed 's/^/info: /'
no_losses "$T/bench.json"
holds=$(stat_get seq-1 flow_holds)
[ "${holds:-0}" -gt 0 ] || fail "the tape was never held (flow_holds ${holds:-none})"
agree matcher-1 matcher-2
info "a replica stopped for 300 ms: the tape held $holds times, nothing lost (window $(stat_get matcher-2 flow_window) events at $(stat_get matcher-2 flow_cost_per_event) bytes each)"

# a snapshot's pause, announced: matcher-2 is not counted while it pauses
# (flow_receivers_behind), only its buffer bounds the tape, and it catches
# up quietly
bg_start "$T/bench3.out" "$BENCH" --connect "127.0.0.1:$P" --sessions 3 --rate 5000 --duration 1.5 \
	--cluster "$T" --json "$T/bench3.json" --timeout 30
bench=$BG_PID
sleep 0.4
(for _ in $(seq 1 40); do stat_get seq-1 flow_receivers_behind; sleep 0.02; done >"$T/behind") &
sampler=$!
snapshot_now matcher-2
wait "$sampler"
wait "$bench" || { cat "$T/bench3.out"; fail "bench: $(tail -1 "$T/bench3.out")"; }
no_losses "$T/bench3.json"
grep -qx 1 "$T/behind" || fail "matcher-2 was counted all through its pause: $(sort "$T/behind" | uniq -c)"
[ "$(stat_get seq-1 flow_receiver_pauses)" = 1 ] ||
	fail "flow_receiver_pauses $(stat_get seq-1 flow_receiver_pauses), want the snapshot's 1"
grep -q "flow control: receiver matcher-2 in step again" "$T/seq-1.log" ||
	fail "matcher-2 not counted again after its pause"
skipped=$(stat_get matcher-2 exec_packets_skipped_resuming)
[ "${skipped:-0}" -gt 0 ] ||
	fail "the catch-up sent its executions again (skipped ${skipped:-none})"
grep -q "snapshot at tape seq $SNAP_SEQ: caught up in" "$T/matcher-2.log" || fail "no catch-up line"
agree matcher-1 matcher-2
info "$(grep -o "snapshot at tape seq $SNAP_SEQ: caught up.*" "$T/matcher-2.log")"

# stopped for longer than flow_timeout: forgotten, the others go on
kill -STOP "$m2"
for _ in $(seq 1 30); do
	[ "$(stat_get seq-1 flow_receivers)" = 1 ] && break
	sleep 0.1
done
[ "$(stat_get seq-1 flow_receivers)" = 1 ] || { kill -CONT "$m2"; fail "a stopped receiver still counted"; }
"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --orders 500 --window 8 --timeout 20 >"$T/bench2.out" 2>&1 ||
	{ kill -CONT "$m2"; cat "$T/bench2.out"; fail "orders stalled behind a stopped replica"; }
kill -CONT "$m2"
grep -q "flow control: receiver matcher-2 not heard for a while: forgotten" "$T/seq-1.log" ||
	fail "no log line for the forgotten receiver"
echo "ok: the tape waits for a slow replica ($holds holds, nothing lost)," \
	"not for one that announced a pause, nor for a stopped one"
