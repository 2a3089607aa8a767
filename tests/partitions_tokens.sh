#!/usr/bin/env bash
# A day longer than the gateway's token table: 2 partitions, [gateway]
# max_tokens = 1024 (the least), and lockstep-bench pushes Enter, Cancel and
# Replace orders worth several times that many tokens through the gateway.
# Every order is answered, no Enter Order is refused for a full table
# (tokens_full 0, nothing rejected), the gateway forgets dead orders' tokens
# (tokens_forgotten > 0, status shows tokens used/1024), and an order that
# rested from the start is still routed to its partition at the end, also
# after a gateway restart. Under 60 s.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
skip_unless_built lockstep-bench
command -v python3 >/dev/null || skip "no python3"

cluster_up --partitions 2 --matchers 1 --set gateway.max_tokens=1024

# Partition 1 trades MSFT GOOG NVDA INTC: a resting NVDA order (no bench
# session trades NVDA or logs in as TRADR1)
client <<'S'
connect A TRADR1 pw1 seq 0
A: buy 100 NVDA 1 token KEEP1
A: expect Accepted token=KEEP1 B 100 NVDA @ 1.0000 *
S

# 2 sessions x 3000 orders: about 4,500 new tokens (Enters and Replaces),
# at most 100 resting per session
"$BENCH" --connect "127.0.0.1:$P" --logins TRADR2:pw2,TRADR3:pw3 --sessions 2 --orders 3000 \
	--window 8 --depth 100 --cluster "$T" --json "$T/bench.json" --timeout 20 \
	>"$T/bench.out" 2>&1 || { cat "$T/bench.out"; fail "bench: $(tail -1 "$T/bench.out")"; }
no_losses "$T/bench.json"
python3 - "$T/bench.json" <<'PY' || fail "bench: $(cat "$T/bench.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["unanswered"] == 0 and d["rejected"] == 0, d
PY
full=$(stat_get gw-1 tokens_full) forgotten=$(stat_get gw-1 tokens_forgotten)
[ "$full" = 0 ] || fail "gw-1: tokens_full $full: an Enter refused or a token not remembered"
[ "$(stat_get gw-1 local_rejects)" = 0 ] || fail "gw-1 rejected orders itself"
[ "${forgotten:-0}" -gt 2000 ] || fail "gw-1 forgot ${forgotten:-no} tokens, want > 2000"
node_ctl gw-1 status | grep -Eq ' tokens [0-9]+/1024 \([0-9.]+%\), tokens_live [0-9]+/1024 ' ||
	fail "no tokens pool: $(node_ctl gw-1 status)"
node_ctl gw-1 status --json | python3 -c '
import json, sys
p = json.load(sys.stdin)["pools"]
assert p["tokens"]["size"] == 1024 and 1000 <= p["tokens"]["used"] <= 1024, p
# live: KEEP1 and what rests per session: --depth 100, overshot by the
# passive orders in flight when the bench counted (its --window of 8)
assert 1 <= p["tokens_live"]["used"] <= 1 + 2 * (100 + 8), p' ||
	fail "status --json pools: $(node_ctl gw-1 status --json)"
info "gw-1: $forgotten tokens forgotten; $(node_ctl gw-1 status | grep -o 'tokens [0-9]*/[0-9]*')"

# The gateway learns its table again from its journals, forgetting as it goes.
"$CLUSTER" stop gw-1 --dir "$T" >/dev/null
"$CLUSTER" start gw-1 --dir "$T" >/dev/null
tokens=$(stat_get gw-1 tokens)
[ "${tokens:-0}" -le 1536 ] || fail "the restarted gw-1 holds ${tokens:-no} tokens"

# The order of the start reaches partition 1 (partition 0 would answer
# CancelReject), and so does a late duplicate Cancel of a just-dead one.
client <<'S'
connect A TRADR1 pw1 seq 0
A: cancel KEEP1
A: expect Canceled token=KEEP1 dec=100 reason=U *
A: buy 10 INTC 1 token LATE1
A: expect Accepted token=LATE1 *
A: cancel LATE1
A: expect Canceled token=LATE1 dec=10 reason=U *
S
[ "$(stat_get gw-1 tokens_full)" = 0 ] || fail "the restarted gw-1 counts tokens_full"
echo "ok: $forgotten tokens forgotten through a table of 1024, no Enter refused; the resting order still routed"
