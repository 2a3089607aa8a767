#!/usr/bin/env bash
# The io_uring datagram path (issue 14): a cluster whose every node runs
# [node] io = uring. The sequencer reads the gateways' commands and the
# matchers read the tape through a multishot receive ring, and both send
# (tape, executions) through a send ring: status says io=uring, their
# STATS count the datagrams that came through the ring, lockstep-bench's
# orders are all answered with no datagram lost in a kernel buffer and no
# send failed, and the replicas agree. --check-config refuses a path that
# is not one. Skips (77) where the kernel refuses io_uring (the daemons
# then fall back to mmsg and say so).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-sequencer lockstep-bench

out=$("$top_builddir/lockstep-sequencer" --check-config --set node.name=s --set node.io=aio 2>&1) &&
	fail "node.io=aio taken: $out"
help=$("$top_builddir/lockstep-matcher" --help 2>&1) # whole: grep -q would cut the pipe
grep -q 'node.io = mmsg  # enum: mmsg|uring' <<<"$help" || fail "--help does not list node.io"

cluster_up --set node.io=uring
if [ "$(status_get seq-1 io)" != uring ]; then
	grep -h 'io = uring refused' "$T"/*.log >&2 || true
	skip "io_uring refused by this kernel: the daemons fell back to mmsg"
fi
for n in seq-1 matcher-1 matcher-2; do
	[ "$(status_get "$n" io)" = uring ] || fail "$n: $(node_ctl "$n" status)"
	node_ctl "$n" status | grep -q ' io=uring' || fail "$n status: $(node_ctl "$n" status)"
	[ "$(stat_get "$n" io_uring)" = 1 ] || fail "$n: io_uring $(stat_get "$n" io_uring)"
done
[ "$(status_get gw-1 io)" = mmsg ] || fail "gw-1: $(node_ctl gw-1 status --json)"

"$BENCH" --connect "127.0.0.1:$P" --sessions 3 --orders 10000 --rate 50000 --cluster "$T" \
	--json "$T/bench.json" --timeout 60 >"$T/bench.out" 2>&1 ||
	{ cat "$T/bench.out"; fail "bench: $(tail -1 "$T/bench.out")"; }
grep -E '^(throughput|cpu/order|losses|kernel)' "$T/bench.out" | sed 's/^/info: /'
no_losses "$T/bench.json"
python3 - "$T/bench.json" <<'PY' || fail "bench.json: $(cat "$T/bench.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert sum(d["sent"].values()) == 30000, d
assert set(d["daemon_losses"]) >= {"gw-1", "seq-1", "matcher-1", "matcher-2"}, d
PY
agree matcher-1 matcher-2
for n in seq-1 matcher-1 matcher-2; do
	got=$(stat_get "$n" uring_datagrams)
	[ "${got:-0}" -gt 0 ] || fail "$n: nothing came through the ring (uring_datagrams ${got:-none})"
	[ "$(stat_get "$n" uring_errors)" = 0 ] || fail "$n: uring_errors $(stat_get "$n" uring_errors)"
	[ "$(stat_get "$n" rxq_dropped)" = 0 ] || fail "$n: rxq_dropped $(stat_get "$n" rxq_dropped)"
	info "$n: $got datagrams through the ring, $(stat_get "$n" uring_wakeups) wakeups," \
		"$(stat_get "$n" uring_enobufs) ENOBUFS, $(stat_get "$n" uring_rearms) re-arms"
done
[ "$(stat_get matcher-1 tape_packets)" = "$(stat_get matcher-1 uring_datagrams)" ] ||
	info "matcher-1: tape_packets $(stat_get matcher-1 tape_packets)," \
		"uring_datagrams $(stat_get matcher-1 uring_datagrams) (answers count in both)"
echo "ok: 30,000 orders through io_uring on the sequencer and both matchers; nothing lost; replicas agree"
