#!/usr/bin/env bash
# Partitions: a cluster of 2 partitions of 2 replicas each (ops/cluster up
# --partitions 2 --matchers 2). Orders on the symbols of both partitions are
# each answered exactly once and every match seen by both sides
# (lockstep-bench --check-matches: partition p numbers its matches from
# p << 48, so match numbers never repeat across partitions); the
# replicas of a partition agree on seq and hash, and the two
# partitions differ; a cancel and a replace of an order in partition 1 are
# routed there (Canceled, Replaced), also after a gateway restart; a symbol
# no partition trades is sent to partition 0 and rejected by its matcher
# (reason S). Under 30 s.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
skip_unless_built lockstep-bench
command -v python3 >/dev/null || skip "no python3"

cluster_up --partitions 2 --matchers 2
grep -q '^partition 1: matcher-3 matcher-4 trade MSFT GOOG NVDA INTC$' "$T/up.out" ||
	fail "up does not say what partition 1 is: $(cat "$T/up.out")"
for n in 1 2 3 4; do
	want=$(((n - 1) / 2))
	[ "$(status_field "matcher-$n" partition)" = "$want" ] || fail "matcher-$n is not in partition $want"
done
"$CLUSTER" status --dir "$T" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["partitions"] == 2, d
parts = sorted((n["name"], n["partition"]) for n in d["nodes"] if n["role"] == "matcher")
assert parts == [("matcher-1", 0), ("matcher-2", 0), ("matcher-3", 1), ("matcher-4", 1)], parts
' || fail "status --json: $("$CLUSTER" status --dir "$T" --json)"

# Partition 0 trades AAPL AMZN META TSLA, partition 1 MSFT GOOG NVDA INTC.
client <<'S'
connect A TRADR1 pw1 seq 0
connect B TRADR2 pw2 seq 0
A: buy 100 MSFT 300 token P1A
A: expect Accepted token=P1A B 100 MSFT @ 300.0000 *
A: buy 100 AAPL 150 token P0A
A: expect Accepted token=P0A B 100 AAPL @ 150.0000 *
B: sell 40 MSFT 300 token P1B
B: expect Accepted token=P1B *
A: expect Executed token=P1A 40 @ 300.0000 liq=A *
B: expect Executed token=P1B 40 @ 300.0000 liq=R *
A: cancel P1A 30
A: expect Canceled token=P1A dec=30 reason=U *
A: replace P1A P1C 20 300.01
A: expect Replaced token=P1C prev=P1A B 20 MSFT @ 300.0100 *
A: buy 10 ZZZZ 1 token BAD
A: expect Rejected token=BAD reason=S *
S

# The gateway learns its tokens again from its journals.
"$CLUSTER" stop gw-1 --dir "$T" >/dev/null
"$CLUSTER" start gw-1 --dir "$T" >/dev/null
client <<'S'
connect A TRADR1 pw1 seq 0
A: cancel P1C
A: expect Canceled token=P1C dec=20 reason=U *
A: cancel P0A
A: expect Canceled token=P0A dec=100 reason=U *
A: cancel NOSUCH
A: expect CancelReject token=NOSUCH
S

# Load over the 8 symbols, so both partitions match.
if ! "$BENCH" --connect "127.0.0.1:$P" --sessions 2 --orders 400 --rate 4000 --check-matches \
	--symbols AAPL,MSFT,AMZN,GOOG,META,NVDA,TSLA,INTC --timeout 20 >"$T/bench.out" 2>&1; then
	cat "$T/bench.out"
	fail "bench: an order unanswered"
fi

# Every matcher past the sequencer's commit; replicas agree (at one seq:
# time events move the idle tape on between two readings), partitions differ.
wait_agree 15 matcher-1 matcher-2
c=$SEQ h1=$HASH
wait_agree 15 matcher-3 matcher-4
h3=$HASH
[ "$h1" != "$h3" ] || fail "the two partitions have one hash $h1: one got nothing?"
for n in 1 3; do
	a=$(ctl_counter "matcher-$n" events_applied) o=$(ctl_counter "matcher-$n" events_other_partition)
	[ "${a:-0}" -gt 100 ] && [ "${o:-0}" -gt 100 ] ||
		fail "matcher-$n applied ${a:-?} events, left ${o:-?} to the other partition"
done
[ "$(ctl_counter gw-1 local_rejects)" = 0 ] || fail "the restarted gateway counts local rejects"
grep -E '^(orders|throughput)' "$T/bench.out" | sed 's/^/info: /'
echo "ok: 2 partitions x 2 replicas: routed by symbol and token, replicas agree (partition 0 at seq $c)"
