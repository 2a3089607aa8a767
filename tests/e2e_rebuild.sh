#!/usr/bin/env bash
# A matcher killed and started again with an empty state rebuilds from the
# sequencer's journal (by retransmission) and agrees with its twin.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
cluster_up

"$top_builddir/lockstep-bench" --connect "127.0.0.1:$P" --sessions 2 --orders 600 \
	--window 8 --quiet >"$T/bench.out" 2>&1 || { cat "$T/bench.out"; fail "bench: orders unanswered"; }
"$CLUSTER" kill matcher-2 --dir "$T" >/dev/null
client <<'S'
connect A TRADR1 pw1 seq 0
A: buy 100 MSFT 10 token RX1
A: expect Accepted token=RX1 *
S
"$CLUSTER" start matcher-2 --dir "$T" >/dev/null
# matcher-2 live at matcher-1's seq with its hash (compared at one seq:
# time events move the idle tape on)
wait_same 10 matcher-1 matcher-2
[ "$SEQ" -ge 1200 ] || fail "only $SEQ events on the tape"
echo "ok: matcher-2 rebuilt $SEQ events from the journal, hash $HASH"
