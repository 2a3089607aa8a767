#!/usr/bin/env bash
# The hot paths touch no new memory (issue 14: "page faults on first touch:
# pre-fault pools and rings"): a fresh cluster with the default pools takes
# a warm-up load, then 20,000 orders at 10,000 a second; over that second
# run every daemon's minor page faults (lockstep-bench's faults line, from
# /proc/PID/stat) stay under 150. The figure counts memory touched for the
# first time, not time, so the machine's load does not move it: a ring
# left to fault in on its first pass shows at once (the feed's ring of
# ITCH messages did: 296 faults a matcher over this run, one each 64
# messages, against 0 since). Skipped under ASan, whose allocator and
# shadow memory fault on their own schedule (measured there: gw-1 239,
# matchers 0, seq-1 2), to keep ops/check's time.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench
! asan_build || skip "the sanitizer build: ASan's allocator faults on its own schedule; what this checks is the plain build's memory"

unset LOCKSTEP_CLUSTER_SET # the default pools, not the tests' smaller ones (tests/lib.sh)
cluster_up

# bench ORDERS_PER_SESSION RATE OUT: 3 sessions through gw-1, every order
# answered
bench() {
	"$BENCH" --connect "127.0.0.1:$P" --sessions 3 --orders "$1" --rate "$2" --warmup 0 \
		--cluster "$T" --json "$T/$3.json" --timeout 30 >"$T/$3.out" 2>&1 ||
		{ cat "$T/$3.out"; fail "bench ($3): $(tail -1 "$T/$3.out")"; }
}
bench 1000 5000 warmup
bench 6667 10000 load
grep '^faults:' "$T/load.out" | sed 's/^/info: /'
python3 - "$T/load.json" <<'PY' || fail "page faults on a hot path: $(grep '^faults:' "$T/load.out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["unanswered"] == 0 and sum(d["sent"].values()) == 20001, d["sent"]
f = d["page_faults"]
daemons = {"gw-1", "seq-1", "matcher-1", "matcher-2"}
assert set(f) >= daemons, f
over = {n: f[n] for n in daemons if f[n] >= 150}
assert not over, over
PY
echo "ok: 20,001 orders through a warmed cluster, minor page faults: $(grep '^faults:' "$T/load.out" | sed 's/^faults: *//; s/ minor page.*//')"
