#!/usr/bin/env bash
# The tape's flow control (issue 14): a matcher replica that stops for a
# moment (SIGSTOP, 300 ms, under 40,000 orders/s) is not flooded past its
# kernel buffer (1 MiB here): its status messages hold the tape at its
# position + flow_window (2048 events) in the sequencer (flow_holds), the
# gateway's window then stops the clients, and when it resumes nothing has
# been lost (rxq_dropped 0), every order is answered and both replicas agree.
# Then a replica that stays stopped past flow_timeout is forgotten: the
# tape goes on without it.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench

cluster_up --set matcher.rcvbuf=1M --set sequencer.flow_window=2048 \
	--set sequencer.flow_timeout=500ms

# stat NODE NAME: one counter of NODE's STATS
stat() { node_ctl "$1" stats | awk -v k="$2" '$1 == k { print $2 }'; }
for _ in $(seq 1 50); do
	[ "$(stat seq-1 flow_receivers)" = 2 ] && break
	sleep 0.1
done
[ "$(stat seq-1 flow_receivers)" = 2 ] || fail "flow_receivers $(stat seq-1 flow_receivers), want both matchers"

m2=$(cat "$T/matcher-2.pid")
bg_start "$T/bench.out" "$BENCH" --connect "127.0.0.1:$P" --sessions 3 --rate 40000 --duration 1.5 \
	--cluster "$T" --json "$T/bench.json" --timeout 30
bench=$BG_PID
sleep 0.5
kill -STOP "$m2"
sleep 0.3
kill -CONT "$m2"
wait "$bench" || { cat "$T/bench.out"; fail "bench: $(tail -1 "$T/bench.out")"; }
grep -E '^(throughput|losses)' "$T/bench.out" | sed 's/^/info: /'
python3 - "$T/bench.json" <<'PY' || fail "bench.json: $(cat "$T/bench.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["unanswered"] == 0, d
for node, counters in d["daemon_losses"].items():
    assert counters is not None, f"{node} did not answer"
    for name, v in counters.items():
        assert name == "kernel_rcvbuf_errors" or v == 0, f"{node}: {name} {v}"
PY
holds=$(stat seq-1 flow_holds)
[ "${holds:-0}" -gt 0 ] || fail "the tape was never held (flow_holds ${holds:-none})"
for _ in $(seq 1 100); do
	[ "$(status_get matcher-1 seq)" = "$(status_get matcher-2 seq)" ] && break
	sleep 0.1
done
[ "$(status_get matcher-1 hash)" = "$(status_get matcher-2 hash)" ] ||
	fail "replicas differ: $(node_ctl matcher-1 status) / $(node_ctl matcher-2 status)"
info "a replica stopped for 300 ms: the tape held $holds times, nothing lost"

# stopped for longer than flow_timeout: forgotten, the others go on
kill -STOP "$m2"
for _ in $(seq 1 30); do
	[ "$(stat seq-1 flow_receivers)" = 1 ] && break
	sleep 0.1
done
[ "$(stat seq-1 flow_receivers)" = 1 ] || { kill -CONT "$m2"; fail "a stopped receiver still counted"; }
"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --orders 500 --window 8 --timeout 20 >"$T/bench2.out" 2>&1 ||
	{ kill -CONT "$m2"; cat "$T/bench2.out"; fail "orders stalled behind a stopped replica"; }
kill -CONT "$m2"
grep -q "flow control: receiver matcher-2 not heard for a while: forgotten" "$T/seq-1.log" ||
	fail "no log line for the forgotten receiver"
echo "ok: the tape waits for a slow replica ($holds holds, nothing lost) and not for a stopped one"
