#!/usr/bin/env bash
# lockstep-bench works (no figure is asserted: speed is measured by
# ops/bench, not tested): --help; each component on a small run; 1000
# orders of the default mix through a fresh cluster, open loop, every one
# answered, both sides of every match agreeing, the daemons' CPU time, CPU
# per order and losses (kernel UDP, each daemon's counters) reported and
# the JSON written, with the gateway's stage clock (its STATS consistent
# with what it sent); the same through --baseline's relay and echo.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
skip_unless_built lockstep-bench

# (not piped into grep -q: its early exit would make the bench's write
# fail, and pipefail fail the test, depending on timing)
help=$("$BENCH" --help) || fail "--help failed"
grep -q -- '--baseline' <<<"$help" || fail "--help does not say --baseline"
"$BENCH" --bogus >/dev/null 2>&1 && fail "an unknown option was taken"

cluster_up
"$BENCH" --component codecs --events 20000 | grep -q 'ouch_decode' || fail "codecs"
"$BENCH" --component matcher --events 20000 --json "$T/matcher.json" >"$T/matcher.out" ||
	{ cat "$T/matcher.out"; fail "matcher component"; }
grep -q '"events": 20000' "$T/matcher.json" || fail "matcher: $(cat "$T/matcher.json")"
# --max-tokens: refused at or below the open orders; above, a table that
# fills and then forgets (1.5M events make about 1.1M tokens)
out=$("$BENCH" --component matcher --events 1000 --max-tokens 1048576 2>&1) &&
	fail "--max-tokens at the open orders was taken"
grep -q -- '--max-tokens: above 1048576' <<<"$out" || fail "--max-tokens refused without its reason: $out"
"$BENCH" --component matcher --events 1500000 --max-tokens 1048577 --json "$T/full.json" >"$T/full.out" ||
	{ cat "$T/full.out"; fail "matcher component, --max-tokens"; }
grep -Eq '"tokens_forgotten": [1-9][0-9]*' "$T/full.json" || fail "no token forgotten: $(cat "$T/full.json")"
"$BENCH" --component sequencer --duration 0.3 >"$T/seq.out" 2>&1 || { cat "$T/seq.out"; fail "sequencer component"; }
grep -q 'events sequenced' "$T/seq.out" || fail "sequencer: $(cat "$T/seq.out")"

if ! "$BENCH" --connect "127.0.0.1:$P" --sessions 3 --orders 334 --rate 2000 --check-matches \
	--cluster "$T" --json "$T/load.json" --timeout 20 >"$T/load.out" 2>&1; then
	cat "$T/load.out"
	fail "bench: an order unanswered, or a match's sides disagree"
fi
for n in gw-1 seq-1 matcher-1 matcher-2 bench; do
	grep -q "^cpu: .* $n [0-9.]* s" "$T/load.out" || fail "no CPU time of $n: $(grep cpu "$T/load.out")"
done
for n in gw-1 seq-1 matcher-1 matcher-2; do
	grep -Eq "^cpu/order: .* $n [0-9,]+ ns " "$T/load.out" ||
		fail "no CPU per order of $n: $(grep cpu/order "$T/load.out")"
	grep -Eq "^losses: .* $n (none|[a-z_]+ [0-9]+)" "$T/load.out" ||
		fail "no losses of $n: $(grep losses "$T/load.out")"
done
# the gateway has threads besides its loop (the journals' syncs): its loop's share
grep -Eq '^cpu/order: .* gw-1 [0-9,]+ ns( \(10 ms ticks\))? \(loop [0-9,]+\) ' "$T/load.out" ||
	fail "no loop share of gw-1: $(grep cpu/order "$T/load.out")"
grep -Eq '^cpu/order: .* total [0-9,]+ ns \(target 2,000\) over the 1,002 orders' "$T/load.out" ||
	fail "no total CPU per order: $(grep cpu/order "$T/load.out")"
grep -Eq '^kernel udp: +[0-9]+ receive-buffer drops, [0-9]+ send-buffer errors' "$T/load.out" ||
	fail "no kernel udp line: $(grep -A3 '^cpu' "$T/load.out")"
python3 - "$T/load.json" <<'PY' || fail "load.json: $(cat "$T/load.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["unanswered"] == 0 and sum(d["sent"].values()) == 1002, d
assert d["latency_us"]["accepted"]["n"] == d["sent"]["enter"], d
assert set(d["cpu_s"]) >= {"gw-1", "seq-1", "matcher-1", "matcher-2", "bench"}, d
assert d["curve_us"]["accepted"][0][0] == 0, d
daemons = {"gw-1", "seq-1", "matcher-1", "matcher-2"}
c = d["cpu_ns_per_order"]
assert set(c) >= daemons | {"total"} and d["measured_sent"] == 1002, d
assert abs(c["total"] - sum(v for k, v in c.items() if k != "total")) <= len(c), c
assert c["total"] > 0, c
assert "gw-1" in d["cpu_ns_per_order_loop"] and d["cpu_ns_per_order_loop"]["gw-1"] > 0, d
assert set(d["kernel_udp"]) == {"rcvbuf_errors", "sndbuf_errors", "in_errors"}, d["kernel_udp"]
assert set(d["daemon_losses"]) >= daemons, d["daemon_losses"]
for n, counters in d["daemon_losses"].items():
    assert counters and "rxq_dropped" in counters, (n, counters)
st = d["gateway_stages_ns"]
assert list(st) == ["gw-1"], st
assert list(st["gw-1"]) == ["disk", "tape", "match", "answer"], st
assert all(v is not None and v > 0 for v in st["gw-1"].values()), st
PY
grep -Eq '^stages: +gw-1 disk [0-9.]+, tape [0-9.]+, match [0-9.]+, answer [0-9.]+ \(ms' "$T/load.out" ||
	fail "no stages line: $(grep -A2 '^losses' "$T/load.out")"

# The gateway's stage clock (gateway/stages.c): every command it sent has
# its disk, tape and match times (once flow control has seen each passed),
# every answer journalled its answer time, and each histogram reads in order
stage() { awk -v k="stage_$1" '$1 == k { print $2 }' "$T/gw.stats"; }
for _ in $(seq 1 50); do
	poll_ctl gw-1 stats >"$T/gw.stats"
	[ "$(stage match_count)" = "$(awk '$1 == "cmds_sent" { print $2 }' "$T/gw.stats")" ] && break
	sleep 0.1
done
sent=$(awk '$1 == "cmds_sent" { print $2 }' "$T/gw.stats")
[ "${sent:-0}" -ge 1002 ] || fail "cmds_sent ${sent:-none}"
for s in disk tape match; do
	[ "$(stage ${s}_count)" = "$sent" ] || fail "stage_${s}_count $(stage ${s}_count), cmds_sent $sent"
done
# every answer journalled (the Accepteds and the rest the bench counted)
answers=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["latency_us"]["accepted"]["n"] + d["executions"])' "$T/load.json")
[ "$(stage answer_count)" -ge "$answers" ] ||
	fail "stage_answer_count $(stage answer_count): fewer than the $answers answers the bench had"
[ "$(stage untimed)" = 0 ] || fail "stage_untimed $(stage untimed) in a run without a stall"
for s in disk tape match answer; do
	max=$(stage ${s}_us_max) mean=$(($(stage ${s}_ns) / $(stage ${s}_count) / 1000))
	# a time counted from 0 or from another command's would be seconds
	[ "$max" -lt 20000000 ] || fail "stage $s: max $max us, longer than the bench's run"
	[ "$mean" -lt 1000000 ] || fail "stage $s: mean $mean us at 2,000 orders/s"
	info "stage $s: p50 $(stage ${s}_us_p50) p99 $(stage ${s}_us_p99) max $max mean $mean us"
done
for s in disk tape answer; do # each waits for a sync or a datagram at least
	[ "$(stage ${s}_ns)" -gt "$(stage ${s}_count)" ] || fail "stage $s: a mean under 1 ns"
done

"$BENCH" --baseline --sessions 2 --orders 500 --rate 2000 --json "$T/base.json" >"$T/base.out" 2>&1 ||
	{ cat "$T/base.out"; fail "baseline run"; }
grep -q 'relay-1' "$T/base.out" || fail "no relay in: $(cat "$T/base.out")"
grep -E '^(orders|throughput|latency order->Acc|cpu/order|kernel udp|losses)' "$T/load.out" "$T/base.out" | sed 's/^/info: /'
echo "ok: lockstep-bench --help, components, 1002 orders through a cluster and 1000 through the baseline"
