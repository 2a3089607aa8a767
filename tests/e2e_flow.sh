#!/usr/bin/env bash
# Flow control end to end (issue 14): a gateway with a window of 16 commands
# in flight, offered 30,000 orders open loop at 100,000/s (more than the
# window lets through at once), pauses reading its sessions (flow_pauses)
# instead of pushing the excess on: every order is answered, the window
# drains to 0, and no daemon loses a datagram in a kernel buffer or fails a
# send (lockstep-bench's per-daemon losses: rxq_dropped, *_send_errors).
# Then 3,000 orders in flight at once through a gateway with a wide window:
# nothing lost either.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench

cluster_up --gateways 2 --set gateway.max_in_flight=16

"$BENCH" --connect "127.0.0.1:$P" --sessions 3 --orders 10000 --rate 100000 --cluster "$T" \
	--json "$T/bench.json" --timeout 60 >"$T/bench.out" 2>&1 ||
	{ cat "$T/bench.out"; fail "bench: $(tail -1 "$T/bench.out")"; }
grep -E '^(throughput|losses|kernel)' "$T/bench.out" | sed 's/^/info: /'
no_losses "$T/bench.json"
python3 - "$T/bench.json" <<'PY' || fail "bench.json: $(cat "$T/bench.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert sum(d["sent"].values()) == 30000, d
assert set(d["daemon_losses"]) >= {"gw-1", "gw-2", "seq-1", "matcher-1", "matcher-2"}, d
PY

pauses=$(stat_get gw-1 flow_pauses)
[ "${pauses:-0}" -gt 0 ] || fail "the window never filled (flow_pauses ${pauses:-none})"
[ "$(stat_get gw-1 flow_stalls)" = 0 ] || fail "flow_stalls $(stat_get gw-1 flow_stalls): the window stalled"
for _ in $(seq 1 50); do
	[ "$(stat_get gw-1 in_flight)" = 0 ] && break
	sleep 0.1
done
[ "$(stat_get gw-1 in_flight)" = 0 ] || fail "in_flight $(stat_get gw-1 in_flight) after every answer"
node_ctl gw-1 status | grep -q ' in_flight 0/16 ' || fail "status: $(node_ctl gw-1 status)"
info "gw-1: 30,000 orders through a window of 16: $pauses pauses, $(stat_get gw-1 flow_paused_ns) ns paused"

# A wide window, and 3,000 orders in flight at once through gw-2 (closed
# loop): the matchers answer in large batches, more datagrams at a time than
# one sendmmsg takes, and none is lost (a matcher used to drop a whole batch
# when it filled as a packet overflowed: exec_send_errors)
sed -i 's/^max_in_flight = 16$/max_in_flight = 65536/' "$T/gw-2.conf"
grep -q '^max_in_flight = 65536$' "$T/gw-2.conf" || fail "gw-2.conf: no max_in_flight to change"
"$CLUSTER" stop gw-2 --dir "$T" >/dev/null
"$CLUSTER" start gw-2 --dir "$T" >/dev/null
"$BENCH" --connect "127.0.0.1:$((P + 1))" --sessions 3 --orders 20000 --window 1000 --cluster "$T" \
	--json "$T/bench2.json" --timeout 60 >"$T/bench2.out" 2>&1 ||
	{ cat "$T/bench2.out"; fail "bench through gw-2: $(tail -1 "$T/bench2.out")"; }
grep -E '^(throughput|losses)' "$T/bench2.out" | sed 's/^/info: /'
no_losses "$T/bench2.json"
echo "ok: a window of 16 paused $pauses times; 60,000 orders with 3,000 in flight; nothing lost"
