#!/usr/bin/env bash
# The gateway's write-ahead journal of its logins' messages (gateway/wal.c)
# when a start is refused: with no checkpoint (wal_checkpoint = 1h) and
# 64 KiB segments, TRADR1's load fills several WAL segments; the gateway is
# SIGKILLed, TRADR1's journal and the WAL's first segment are moved aside,
# so that the WAL's first message of TRADR1 lies past its (now empty)
# journal: the start must refuse, naming the login, and leave the WAL's
# segments as they were (a refused start once dropped them on its way
# out). With both put back, the gateway starts and TRADR1 replays every
# message.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench lockstep-client
cluster_up --set gateway.wal_checkpoint=1h --set gateway.wal_segment=64KiB
timeout -k 5 20 "$top_builddir/lockstep-bench" --connect "127.0.0.1:$P" --sessions 1 --rate 2000 \
	--duration 2 --logins TRADR1:pw1 >"$T/bench.out" 2>&1 || fail "load: $(tail -3 "$T/bench.out")"
# replayed FILE: TRADR1's messages from SoupBin seq 1, in order, into FILE
replayed() {
	printf 'connect A TRADR1 pw1 seq 1\nsleep 1500\n' >"$T/replay.script"
	"$CLIENT" --connect "127.0.0.1:$P" --timeout 5000 --script "$T/replay.script" >"$T/replay.out" 2>&1 ||
		fail "replay: $(tail -3 "$T/replay.out")"
	grep '^A < ' "$T/replay.out" >"$1" || true
}
replayed "$T/replay.before"
wal=$T/gw-1/sessions.wal
nseg=$(find "$wal" -name '*.seg' | wc -l)
[ "$nseg" -ge 3 ] || fail "the WAL has $nseg segments after the load, not several"
"$CLUSTER" kill gw-1 --dir "$T" >/dev/null
first=$(find "$wal" -name '*.seg' | sort | head -1)
mkdir "$T/aside"
mv "$first" "$T/aside/"
mv "$T/gw-1/sessions/TRADR1" "$T/aside/TRADR1"
before=$(cd "$wal" && md5sum -- *.seg)
! "$CLUSTER" start gw-1 --dir "$T" >"$T/start.out" 2>&1 || fail "gw-1 started without TRADR1's first messages"
grep -q "login TRADR1's message .* are in neither" "$T/gw-1.log" ||
	fail "the refusal does not name the login: $(tail -3 "$T/gw-1.log")"
[ "$(cd "$wal" && md5sum -- *.seg)" = "$before" ] || fail "the refused start changed the WAL's segments"
rm -rf "$T/gw-1/sessions/TRADR1"
mv "$T/aside/TRADR1" "$T/gw-1/sessions/TRADR1"
mv "$T/aside/$(basename "$first")" "$wal/"
"$CLUSTER" start gw-1 --dir "$T" >/dev/null || fail "gw-1 did not start with its files back"
replayed "$T/replay.after"
n=$(wc -l <"$T/replay.after")
[ "$n" -ge 3000 ] || fail "TRADR1 replays $n messages after 2 s at 2,000 orders/s"
cmp -s "$T/replay.before" "$T/replay.after" || fail "TRADR1's replay changed: $(diff "$T/replay.before" "$T/replay.after" | head -3)"
echo "ok: a start without TRADR1's journal refused, the WAL's $nseg segments untouched; with it back TRADR1 replays the same $n messages"
