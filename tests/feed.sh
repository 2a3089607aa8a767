#!/usr/bin/env bash
# The public ITCH 5.0 feed end to end (issue 18), on a partition of three
# replicas (matcher-1 publishes feed A, matcher-2 feed B, matcher-3 stands
# by), in a network namespace of the test's own (its nftables rules must
# not touch the machine's):
#  1. 5% of feed B's datagrams dropped on their way in (nftables numgen)
#     under lockstep-bench load: the subscriber (lockstep-feed, on A and
#     B, started from a GLIMPSE snapshot) misses nothing and sends no
#     retransmission request; its book equals a GLIMPSE snapshot taken at
#     the end (--check) and the book the bench's OUCH answers imply
#     (--book-out, both sorted); every feed datagram decodes in tshark
#     with lockstep's ITCH dissector, none malformed; lockstep-replay itch
#     regenerates, from the journal, the very bytes the subscriber
#     recorded. A late subscriber without GLIMPSE gets the whole day again
#     by retransmission, and records the same bytes as the replay.
#  2. A new subscriber starts from matcher-2's GLIMPSE snapshot mid-day;
#     matcher-1 (feed A's publisher) is killed under load: matcher-3 takes
#     feed A over, the subscriber loses nothing and its book equals a
#     GLIMPSE snapshot at the end; matcher-1, restarted, publishes A again
#     and matcher-3 stands down.
#  3. (not under ASan) An end and a start of day: the subscriber follows into
#     day 2's session ITCH000002, and its capture across the two days is
#     the replay's of every day, day 2 alone its tail.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench lockstep-feed lockstep-replay
FEED=$top_builddir/lockstep-feed
LUA=$top_srcdir/ops/wireshark/itch50.lua
[ "$(id -u)" -eq 0 ] || skip "nftables and a network namespace need root"
command -v nft >/dev/null || skip "no nft (apt-get install nftables)"
command -v python3 >/dev/null || skip "no python3"

own_netns "$@"

cluster_up --matchers 3
conf() { sed -n "s/^$2 = //p" "$T/$1.conf"; }
A=$(conf matcher-1 a_group) B=$(conf matcher-1 b_group)
R="$(conf matcher-1 retrans),$(conf matcher-2 retrans),$(conf matcher-3 retrans)"
# feed_bg JSON CMD...: CMD (a lockstep-feed --glimpse) in the background,
# its standard output (the subscriber's --json) in JSON, its log in
# JSON.err; FEED_PID. Returns once it has started from its snapshot.
feed_bg() {
	local j=$1
	shift
	bg_start "$j.err" bash -c 'out=$1; shift; exec "$@" >"$out"' _ "$j" "$@"
	FEED_PID=$BG_PID
	wait_for 20 "lockstep-feed started from its snapshot ($j.err)" grep -q "snapshot: " "$j.err"
}
# itch_count FILE: the messages of an ITCH file; itch_tail LIVE REPLAY
# [DAY]: 0 when LIVE's messages are the last of REPLAY's; with DAY (a
# day's file), also when DAY's are the last of REPLAY's and it opens with
# System Event O, and LIVE holds exactly one end of a day (System Event C)
# followed by a day's opening.
itch_count() { itch_tail "$1" "$1" count; }
itch_tail() {
	python3 - "$@" <<'PY'
import sys
def msgs(p):
    b, out, i = open(p, "rb").read(), [], 0
    while i < len(b):
        n = int.from_bytes(b[i:i + 2], "big")
        out.append(b[i + 2:i + 2 + n])
        i += 2 + n
    return out
live, every = msgs(sys.argv[1]), msgs(sys.argv[2])
if sys.argv[3:] == ["count"]:
    sys.exit(print(len(live)))
if not live or live != every[len(every) - len(live):]:
    sys.exit(f"{len(live)} live messages are not the last of the replay's {len(every)}")
if len(sys.argv) > 3:
    day = msgs(sys.argv[3])
    if not day or every[len(every) - len(day):] != day or day[0][:1] != b"S" or day[0][11:12] != b"O":
        sys.exit("the day alone is not the tail of every day's, or does not open with System Event O")
    ends = [i for i, m in enumerate(live) if m[:1] == b"S" and m[11:12] == b"C"]
    if len(ends) != 1 or live[ends[0] + 1][11:12] != b"O":
        sys.exit("the capture does not hold one day's end then a day's opening")
PY
}
feed_stat() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))' "$1" "$2"; }

# ---- 1. a loss on feed B only ----------------------------------------------
nft add table inet lsfeed
nft add chain inet lsfeed o '{ type filter hook prerouting priority 0; }'
nft add rule inet lsfeed o ip daddr "${B%:*}" udp dport "${B##*:}" numgen random mod 100 '<' 5 counter drop
if command -v tshark >/dev/null; then
	bg_start "$T/tshark.out" tshark -i lo -n -q -w "$T/feed.pcap" \
		-f "udp port ${A##*:} and (dst host ${A%:*} or dst host ${B%:*})"
	cap_pid=$BG_PID
	sleep 2
fi
feed_bg "$T/feed1.json" "$FEED" --a "$A" --b "$B" --retrans "$R" \
	--glimpse "$(conf matcher-2 glimpse)" --login TRADR1 --password pw1 --check \
	--record "$T/live.itch" --book-out "$T/feed1.book" --until-idle 3 --duration 90 \
	--stats --json
feed_pid=$FEED_PID
"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --rate 3000 --duration 4 --timeout 20 \
	--book-out "$T/bench1.book" >"$T/bench1.out" 2>&1 || { cat "$T/bench1.out"; fail "load 1"; }
rc=0
wait "$feed_pid" || rc=$?
[ "$rc" -eq 0 ] || { cat "$T/feed1.json" "$T/feed1.json.err"; fail "lockstep-feed (1) exit $rc"; }
dropped=$(nft list table inet lsfeed | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
nft delete table inet lsfeed
msgs=$(feed_stat "$T/feed1.json" 'delivered')
req=$(feed_stat "$T/feed1.json" 'requests')
lost=$(feed_stat "$T/feed1.json" 'lost')
b_missed=$(feed_stat "$T/feed1.json" 'feeds["b"]["missed"]')
info "feed B: $dropped datagrams dropped; subscriber: $msgs messages, B missed $b_missed, $req requests, $lost lost"
[ "$dropped" -gt 0 ] && [ "$b_missed" -gt 0 ] || fail "the loss on feed B did not happen"
[ "$msgs" -gt 1000 ] || fail "only $msgs messages"
[ "$lost" -eq 0 ] || fail "$lost messages lost"
[ "$req" -eq 0 ] || fail "$req retransmission requests for losses on one feed only"
[ "$(feed_stat "$T/feed1.json" 'check["result"]')" = "equal" ] || fail "the book differs from GLIMPSE's"
# the subscriber's dump: per symbol a state line, then its orders with
# the price in dollars; the bench's: orders alone, the price in OUCH units
awk '$2 == "B" || $2 == "S" { split($3, p, "."); printf "%s %s %d %s %s\n", $1, $2, p[1] * 10000 + p[2], $4, $5 }' \
	"$T/feed1.book" | LC_ALL=C sort >"$T/feed1.sorted"
LC_ALL=C sort "$T/bench1.book" >"$T/bench1.sorted"
[ -s "$T/bench1.sorted" ] || fail "the bench left no order resting"
diff "$T/bench1.sorted" "$T/feed1.sorted" >"$T/book.diff" ||
	{ head "$T/book.diff"; fail "the feed's book is not the one the OUCH answers imply"; }
info "book: $(wc -l <"$T/feed1.sorted") resting orders, as the OUCH answers imply and GLIMPSE shows"

# the journal gives the same bytes again
"$REPLAY" itch "$T/seq-1/journal" --config "$T/matcher-1.conf" --day 1 --out "$T/replay.itch" \
	>"$T/replay.out" 2>&1 || { cat "$T/replay.out"; fail "lockstep-replay itch"; }
# the subscriber recorded from the snapshot's position on: the replay's tail
itch_tail "$T/live.itch" "$T/replay.itch" || fail "lockstep-replay itch differs from the live capture"
info "lockstep-replay itch: the $(itch_count "$T/live.itch") messages recorded live are the last of its $(itch_count "$T/replay.itch"), byte for byte"

# a late subscriber, from the day's first message, by retransmission alone
"$FEED" --a "$A" --b "$B" --retrans "$R" --record "$T/late.itch" --until-idle 2 --duration 60 \
	--stats --json >"$T/late.json" 2>"$T/late.err" || { cat "$T/late.err"; fail "the late subscriber"; }
cmp "$T/late.itch" "$T/replay.itch" || fail "the late subscriber's day differs from lockstep-replay itch's"
info "late subscriber: $(feed_stat "$T/late.json" 'delivered') messages by $(feed_stat "$T/late.json" 'requests') requests, identical to the replay"

if [ -n "${cap_pid:-}" ]; then
	kill -INT "$cap_pid"
	wait "$cap_pid" 2>/dev/null || true
	d=(-X "lua_script:$LUA" -d "udp.port==${A##*:},moldudp64" -d moldudp64.payload,lockstep_itch)
	all=$(tshark -r "$T/feed.pcap" -n "${d[@]}" 2>/dev/null | wc -l)
	bad=$(tshark -r "$T/feed.pcap" -n "${d[@]}" -Y "_ws.malformed || _ws.expert.severity >= error" \
		2>/dev/null | wc -l)
	adds=$(tshark -r "$T/feed.pcap" -n "${d[@]}" -T fields -e lockstep_itch.type 2>/dev/null |
		tr ',' '\n' | grep -c "'[AF]'" || true)
	info "tshark: $all feed datagrams, $adds Add Order messages decoded, $bad malformed"
	[ "$all" -gt 100 ] && [ "$adds" -gt 100 ] || fail "tshark decoded too little ($all, $adds)"
	[ "$bad" -eq 0 ] || fail "$bad feed datagrams malformed to Wireshark"
fi

# ---- 2. feed A's publisher killed under load ----------------------------------
feed_bg "$T/feed2.json" "$FEED" --a "$A" --b "$B" --retrans "$R" \
	--glimpse "$(conf matcher-2 glimpse)" --login TRADR2 --password pw2 --check \
	--until-idle 3 --duration 90 --stats --json
feed_pid=$FEED_PID
bg_start "$T/bench2.out" "$BENCH" --connect "127.0.0.1:$P" --sessions 2 --rate 3000 \
	--duration 5 --timeout 20
bench_pid=$BG_PID
sleep 1.5
"$CLUSTER" kill matcher-1 --dir "$T" >/dev/null
wait_for 10 "matcher-3 publishing feed A" \
	sh -c "\"$CTL\" --socket $T/matcher-3/matcher-3.ctl status | grep -q 'feed=\"publishing A'"
info "matcher-3: $(node_ctl matcher-3 status | sed -n 's/.*\(feed="[^"]*"\).*/\1/p')"
wait "$bench_pid" || { cat "$T/bench2.out"; fail "load 2"; }
rc=0
wait "$feed_pid" || rc=$?
[ "$rc" -eq 0 ] || { cat "$T/feed2.json" "$T/feed2.json.err"; fail "lockstep-feed (2) exit $rc"; }
lost=$(feed_stat "$T/feed2.json" 'lost')
[ "$lost" -eq 0 ] || fail "$lost messages lost across the takeover"
[ "$(feed_stat "$T/feed2.json" 'check["result"]')" = "equal" ] || fail "after the takeover the book differs from GLIMPSE's"
[ "$(stat_get matcher-3 feed_takeovers)" -ge 1 ] || fail "matcher-3 counted no takeover"
info "takeover: subscriber from GLIMPSE, $(feed_stat "$T/feed2.json" 'delivered') messages, none lost, book equal to GLIMPSE's"

"$CLUSTER" start matcher-1 --dir "$T" >/dev/null
wait_for 30 "matcher-3 standing down once matcher-1 is back" \
	sh -c "[ \"\$(\"$CTL\" --socket $T/matcher-3/matcher-3.ctl stats | awk '\$1 == \"feed_stood_down\" { print \$2 }')\" -ge 1 ]"
wait_for 10 "matcher-1 publishing feed A again" \
	sh -c "\"$CTL\" --socket $T/matcher-1/matcher-1.ctl status | grep -q 'feed=\"publishing A'"

# ---- 3. a new trading day: a new session, numbered from 1 ---------------------
# (the plain build's: under ASan the parts above are what it adds)
if asan_build; then
	echo "ok: feed A and B one stream; a loss on B cost nothing; a takeover lost nothing; replay equals capture (days: the plain build)"
	exit 0
fi
feed_bg "$T/feed3.json" "$FEED" --a "$A" --b "$B" --retrans "$R" \
	--glimpse "$(conf matcher-1 glimpse)" --login TRADR3 --password pw3 \
	--record "$T/days.itch" --until-idle 3 --duration 90 --stats --json
feed_pid=$FEED_PID
pr=$(primary_node)
node_ctl "$pr" end-of-day >/dev/null || fail "end-of-day"
node_ctl "$pr" start-of-day >/dev/null || fail "start-of-day"
"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --rate 2000 --duration 2 --timeout 20 \
	>"$T/bench3.out" 2>&1 || { cat "$T/bench3.out"; fail "load 3"; }
rc=0
wait "$feed_pid" || rc=$?
[ "$rc" -eq 0 ] || { cat "$T/feed3.json" "$T/feed3.json.err"; fail "lockstep-feed (3) exit $rc"; }
[ "$(feed_stat "$T/feed3.json" 'day')" -eq 2 ] || fail "the subscriber did not follow into day 2"
[ "$(feed_stat "$T/feed3.json" 'session')" = "ITCH000002" ] || fail "day 2's session is not ITCH000002"
"$REPLAY" itch "$T/seq-1/journal" --config "$T/matcher-1.conf" --out "$T/all.itch" >"$T/replay3.out" 2>&1 ||
	{ cat "$T/replay3.out"; fail "lockstep-replay itch (every day)"; }
"$REPLAY" itch "$T/seq-1/journal" --config "$T/matcher-1.conf" --day 2 --out "$T/day2.itch" \
	>"$T/replay4.out" 2>&1 || { cat "$T/replay4.out"; fail "lockstep-replay itch --day 2"; }
itch_tail "$T/days.itch" "$T/all.itch" "$T/day2.itch" || fail "the two days' capture differs from the replay"
info "across the day: $(itch_count "$T/days.itch") messages captured, day 2's $(itch_count "$T/day2.itch") from System Event O, as the replay gives them"
for n in matcher-1 matcher-2 matcher-3; do
	for c in feed_send_errors feed_encode_errors feed_listen_dropped rxq_dropped exec_send_errors; do
		[ "$(stat_get "$n" "$c")" -eq 0 ] || fail "$n: $c $(stat_get "$n" "$c")"
	done
done
echo "ok: feed A and B one stream; a loss on B cost nothing; a takeover lost nothing; replay equals capture; days"
