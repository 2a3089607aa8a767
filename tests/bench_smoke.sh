#!/usr/bin/env bash
# lockstep-bench works (no figure is asserted: speed is measured by
# ops/bench, not tested): --help; each component on a small run; 1000
# orders of the default mix through a fresh cluster, open loop, every one
# answered, both sides of every match agreeing, the daemons' CPU time and
# the JSON written; the same through --baseline's relay and echo.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
skip_unless_built lockstep-bench

"$BENCH" --help | grep -q -- '--baseline' || fail "--help does not say --baseline"
"$BENCH" --bogus >/dev/null 2>&1 && fail "an unknown option was taken"

cluster_up
"$BENCH" --component codecs --events 20000 | grep -q 'ouch_decode' || fail "codecs"
"$BENCH" --component matcher --events 20000 --json "$T/matcher.json" >"$T/matcher.out" ||
	{ cat "$T/matcher.out"; fail "matcher component"; }
grep -q '"events": 20000' "$T/matcher.json" || fail "matcher: $(cat "$T/matcher.json")"
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
python3 - "$T/load.json" <<'PY' || fail "load.json: $(cat "$T/load.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["unanswered"] == 0 and sum(d["sent"].values()) == 1002, d
assert d["latency_us"]["accepted"]["n"] == d["sent"]["enter"], d
assert set(d["cpu_s"]) >= {"gw-1", "seq-1", "matcher-1", "matcher-2", "bench"}, d
assert d["curve_us"]["accepted"][0][0] == 0, d
PY

"$BENCH" --baseline --sessions 2 --orders 500 --rate 2000 --json "$T/base.json" >"$T/base.out" 2>&1 ||
	{ cat "$T/base.out"; fail "baseline run"; }
grep -q 'relay-1' "$T/base.out" || fail "no relay in: $(cat "$T/base.out")"
grep -E '^(orders|throughput|latency order->Acc)' "$T/load.out" "$T/base.out" | sed 's/^/info: /'
echo "ok: lockstep-bench --help, components, 1002 orders through a cluster and 1000 through the baseline"
