#!/usr/bin/env bash
# lockstep-feed against a stand-in publisher (tests/feedsim.py): ITCH 5.0
# over MoldUDP64 on two multicast groups on loopback, a retransmission
# server and a GLIMPSE server, in a network namespace of the test's own
# (skipped where none can be made).
#  1. arb: losses on one feed only (never the same message on both) cost no
#     request and lose nothing; a range and the tail lost on both are asked
#     for (and only they) and answered; the book, the recording and the
#     counters are as the publisher says; malformed datagrams, another
#     session's packet, a duplicate and an unpublished type are counted.
#  2. lost: a range lost on both that no server holds is given up: counted,
#     exit 1.
#  3. glimpse: a late start from a snapshot, a live feed with losses, and
#     --check while the feed flows: equal at the snapshot's position.
#  4. badcheck: a wrong snapshot at the end: exit 1, the first difference
#     named; a bad login: exit 2.
#  5. days: End of Session, the next day's session from seq 1: the book is
#     that day's, the recording holds both.
if [ -z "${LOCKSTEP_FEED_NETNS:-}" ]; then
	unshare -n true 2>/dev/null || { echo "SKIP: no network namespace here"; exit 77; }
	LOCKSTEP_FEED_NETNS=1 exec unshare -n bash -c 'ip link set lo up && exec bash "$0" "$@"' \
		"$0" "$@"
fi
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-feed
command -v python3 >/dev/null || skip "no python3"
# half a minute of a simulated publisher: the plain build runs it; under ASan
# lockstep-feed is run against the real matchers by tests/feed.sh
! asan_build || skip "the sanitizer build: tests/feed.sh runs lockstep-feed there"
FEED=$top_builddir/lockstep-feed
SIM=$top_srcdir/tests/feedsim.py
use_tmpdir lockstep-feed
free_port_base
P=$PORT_BASE
A=239.255.77.1:$((P + 1))
B=239.255.77.2:$((P + 2))
RT=$((P + 3))
GL=$((P + 4))
PIDS=()
# (KEEP=1: the directory stays, for a look)
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

expect() { # expect WHAT GOT WANT
	[ "$2" = "$3" ] || fail "$1: $2, want $3"
}
# checks FILE: each line of stdin is WHAT | EXPR | WANT, a Python
# expression over the JSON object j of FILE that prints as WANT, or
# WHAT | EXPR, one that is true; the first that is not fails the test.
# (One Python for them all: a start of Python costs more than the checks.)
checks() {
	local out
	out=$(python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
for line in sys.stdin:
    f = [x.strip() for x in line.split(" | ")]
    if f == [""]:
        continue
    got = str(eval(f[1]))
    if len(f) == 3 and got != f[2]:
        sys.exit("%s: %s, want %s" % (f[0], got, f[2]))
    if len(f) == 2 and got != "True":
        sys.exit("%s (%s)" % (f[0], f[1]))' "$1" 2>&1) || fail "$out"
}
show() { dump_logs 40 "$D/feed.err" "$D/feed.out" "$D/sim.log"; }

# feed_bg DIR ARGS...: lockstep-feed in the background (stdout, stderr in
# DIR), once it has joined.
feed_bg() {
	D=$1
	shift
	timeout -k 2 40 "$FEED" --a "$A" --b "$B" --retrans "127.0.0.1:$RT" --stats --json "$@" \
		>"$D/feed.out" 2>"$D/feed.err" &
	FEED_PID=$!
	PIDS+=("$FEED_PID")
	wait_for 10 "lockstep-feed ready" grep -q ready "$D/feed.err"
}
sim_bg() { # sim_bg DIR SCENARIO [ARGS...]
	local d=$1 s=$2
	shift 2
	timeout -k 2 60 python3 "$SIM" --scenario "$s" --a "$A" --b "$B" --retrans-port "$RT" \
		--dir "$d" "$@" >"$d/sim.log" 2>&1 &
	SIM_PID=$!
	PIDS+=("$SIM_PID")
}
feed_wait() { # feed_wait WANT_STATUS
	local rc=0
	wait "$FEED_PID" || rc=$?
	[ "$rc" -eq "$1" ] || { show; fail "lockstep-feed exited $rc, want $1"; }
}
# sim_then_feed DIR SCENARIO SIM_ARGS -- FEED_ARGS: the publisher ready
# (its data made, its servers up), then the subscriber joined, then the
# publisher sends.
sim_then_feed() {
	local d=$1 s=$2 sa=()
	shift 2
	while [ "$1" != -- ]; do sa+=("$1"); shift; done
	shift
	sim_bg "$d" "$s" --wait-go "${sa[@]}"
	wait_for 20 "feedsim ready" test -e "$d/ready"
	feed_bg "$d" "$@"
	touch "$d/go"
}
sim_wait() {
	wait "$SIM_PID" || { show; fail "feedsim failed"; }
}
# sim_stop: the subscriber is done: the publisher stops sending (its
# --linger is only a bound) and exits.
sim_stop() {
	touch "$D/stop"
	sim_wait
}
# requested_within DIR: every sequence number asked for is one lost on both.
requested_within() {
	python3 - "$1" <<'EOF'
import sys
d = sys.argv[1]
both = {int(x) for x in open(d + "/both.txt")}
asked = set()
for line in open(d + "/requests.log"):
    _, seq, count = line.split()
    asked.update(range(int(seq), int(seq) + int(count)))
extra = sorted(asked - both)
if extra:
    sys.exit("asked for %d messages that one feed delivered: %s..." % (len(extra), extra[:10]))
EOF
}

# ---- 1. arbitration and repair ---------------------------------------------
D=$T/arb
mkdir -p "$D"
# (--arb-wait: a loaded machine may hold the sender between its A and B
# copies for a while; a range both feeds went past is asked for at once)
sim_then_feed "$D" arb --linger 30 -- --until-idle 1 --arb-wait 1000 \
	--book-out "$D/book.txt" --record "$D/rec.itch" --top AAPL --depth MSFT --levels 3
feed_wait 0
sim_stop
O=$D/feed.out
N=$(python3 -c 'import struct, sys
b = open(sys.argv[1], "rb").read()
n = i = 0
while i < len(b):
    i += 2 + struct.unpack(">H", b[i:i + 2])[0]
    n += 1
print(n)' "$D/expected.itch")
BOTH=$(wc -l <"$D/both.txt")
info "arb: $N messages, $BOTH lost on both feeds"
diff -u "$D/expected_book.txt" "$D/book.txt" || fail "arb: the book differs"
cmp "$D/expected.itch" "$D/rec.itch" || fail "arb: the recording differs"
TOPB=$(awk '$1 == "AAPL" && $2 == "B" {print $3; exit}' "$D/expected_book.txt")
checks "$O" <<EOF
arb: delivered | j["delivered"] | $N
arb: lost | j["lost"] | 0
arb: next_seq | j["next_seq"] | $((N + 1))
arb: first copies add up | sum(j["feeds"][s]["first"] for s in ("a", "b", "retrans")) | $N
arb: first from retransmission | j["feeds"]["retrans"]["first"] | $BOTH
arb: both feeds should have delivered first copies | j["feeds"]["a"]["first"] > 0 and j["feeds"]["b"]["first"] > 0
arb: both feeds should have had duplicates | j["feeds"]["a"]["duplicates"] > 0 and j["feeds"]["b"]["duplicates"] > 0
arb: each feed's own gaps should be counted | j["feeds"]["a"]["gaps"] >= 5 and j["feeds"]["b"]["gaps"] >= 5
arb: the range and the tail were asked for | j["requests"] >= 2
arb: malformed on A | j["feeds"]["a"]["malformed"] | 1
arb: wrong session on B | j["feeds"]["b"]["wrong_session"] | 1
arb: unpublished type | j["unknown_type"] | 1
arb: undecodable | j["undecodable"] | 0
arb: anomalies | j["book"]["anomalies_total"] | 0
arb: top is AAPL | j["top"][0]["symbol"] | AAPL
arb: depth levels | len(j["depth"][0]["bids"]) <= 3
arb: AAPL best bid | "%.4f" % j["top"][0]["bid"]["price"] | $TOPB
EOF
requested_within "$D" || fail "arb: a loss on one feed alone was asked for"

# ---- 2. a range nobody holds: given up ---------------------------------------
D=$T/lost
mkdir -p "$D"
sim_then_feed "$D" lost --linger 30 -- --until-idle 1.5 --give-up 0.5 --arb-wait 1000
feed_wait 1
sim_stop
O=$D/feed.out
BOTH=$(wc -l <"$D/both.txt")
checks "$O" <<EOF
lost: lost | j["lost"] | $BOTH
lost: a range given up | j["lost_ranges"] >= 1
EOF
grep -q 'given up' "$D/feed.err" || fail "lost: nothing logged"
requested_within "$D" || fail "lost: a loss on one feed alone was asked for"

# ---- 3. a late start from a snapshot, and the check mid-stream ---------------
# The check's snapshot comes while the feed flows: the subscriber holds the
# live feed, applies it up to the snapshot's position and compares there.
D=$T/glimpse
mkdir -p "$D"
sim_bg "$D" glimpse --glimpse-port "$GL" --pace-ms 1 --linger 30
wait_for 20 "feedsim sending" sh -c "[ \"\$(cat '$D/sent' 2>/dev/null || echo 0)\" -ge 300 ]"
feed_bg "$D" --glimpse "127.0.0.1:$GL" --login feed01 --password secret --check \
	--duration 1 --max-orders 100000 --book-out "$D/book.txt" --record "$D/rec.itch"
feed_wait 0
sim_stop
O=$D/feed.out
FIRST=$(awk 'NR == 1 {print $2}' "$D/glimpse.log")
AT=$(awk 'END {print $2}' "$D/glimpse.log")
info "glimpse: started at $FIRST, checked at $AT"
[ "$FIRST" -gt 300 ] || fail "glimpse: the snapshot was at $FIRST, not mid-stream"
[ "$AT" -lt 3000 ] || fail "glimpse: the check came after the stream ended ($AT)"
checks "$O" <<EOF
glimpse: check | j["check"]["result"] | equal
glimpse: checked at | j["check"]["seq"] | $AT
glimpse: next_seq | j["next_seq"] | $AT
glimpse: lost | j["lost"] | 0
glimpse: started at | j["snapshot"]["next_seq"] | $FIRST
EOF
diff -u "$D/glimpse_$(wc -l <"$D/glimpse.log").txt" "$D/book.txt" ||
	fail "glimpse: the book is not the snapshot's"
python3 -c 'import struct, sys
b = open(sys.argv[1], "rb").read()
first, at = int(sys.argv[2]), int(sys.argv[3])
out, i, seq = b"", 0, 1
while i < len(b):
    n = 2 + struct.unpack(">H", b[i:i + 2])[0]
    if first <= seq < at:
        out += b[i:i + n]
    i, seq = i + n, seq + 1
open(sys.argv[4], "wb").write(out)' "$D/day.itch" "$FIRST" "$AT" "$D/expected_rec.itch"
cmp "$D/expected_rec.itch" "$D/rec.itch" || fail "glimpse: the recording differs"

# ---- 4. a check that fails ----------------------------------------------------
D=$T/badcheck
mkdir -p "$D"
sim_bg "$D" badcheck --glimpse-port "$GL" --pace-ms 1 --linger 30
wait_for 20 "feedsim sending" sh -c "[ \"\$(cat '$D/sent' 2>/dev/null || echo 0)\" -ge 200 ]"
feed_bg "$D" --glimpse "127.0.0.1:$GL" --login feed01 --password secret --check --until-idle 1
# meanwhile, a bad login: a set-up error
rc=0
timeout 20 "$FEED" --a "$A" --glimpse "127.0.0.1:$GL" --login feed01 --password wrong \
	--duration 5 >/dev/null 2>"$D/badlogin.err" || rc=$?
expect "bad login: status" "$rc" 2
grep -q 'login rejected' "$D/badlogin.err" || { cat "$D/badlogin.err"; fail "bad login: not said"; }
feed_wait 1
sim_stop
O=$D/feed.out
checks "$O" <<<'badcheck: check | j["check"]["result"] | differ'
grep -q 'differs from the snapshot at sequence number' "$D/feed.err" ||
	fail "badcheck: the difference was not reported"

# ---- 5. trading days ------------------------------------------------------------
D=$T/days
mkdir -p "$D"
sim_then_feed "$D" days --linger 30 -- --until-idle 1 --arb-wait 1000 \
	--book-out "$D/book.txt" --record "$D/rec.itch"
feed_wait 0
sim_stop
O=$D/feed.out
diff -u "$D/expected_book.txt" "$D/book.txt" || fail "days: the book is not day 2's"
cmp "$D/expected.itch" "$D/rec.itch" || fail "days: the recording differs"
checks "$O" <<EOF
days: day | j["day"] | 2
days: session | j["session"] | ITCH000002
days: switches | j["day_switches"] | 1
days: lost | j["lost"] | 0
days: requests | j["requests"] | 0
EOF
info "all feed scenarios passed"
