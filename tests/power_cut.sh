#!/usr/bin/env bash
# Power cuts under load, without a power cut (tests/powercut.c: each armed
# node keeps the image strict POSIX would leave on its disk; a cut is a
# SIGKILL and that image put in place). A group of 3 sequencers and the
# gateway run armed, on the defaults (fsync = disk everywhere), under a
# bounded open-loop load (runs of 3 s at 2,000 orders/s, back to back,
# each reconnecting). In each round a client has orders accepted, the
# matchers' position and hash are noted, and then the power goes: round 1
# the gateway (its login journals given back by the WAL: a client replays
# the same messages), round 2 the primary sequencer, round 3 two sequencers at
# once (a majority, the primary among them), round 4 all three, round 5
# the gateway again, now checkpointing; the nodes start again from what
# their disks held. Last round: the cluster still
# trades. (With [sequencer] fsync = majority-memory round 4 loses the
# orders of its last 100 ms, and this test fails.) Then every
# acknowledged order is on the tape exactly once (lockstep-replay dump of
# each sequencer's journal), the journals agree record for record, each
# noted (seq, hash) is rebuilt from the final journal unchanged (no
# sequence number was reused for another event), and the matchers agree.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built tests/libpowercut.so lockstep-client lockstep-bench lockstep-replay
SEQUENCERS=3
# no checkpoint until round 5: the login journals are never synced, so the
# WAL must give back every message the cut takes
cluster_up --set gateway.wal_checkpoint=1h
REPLAY=$top_builddir/lockstep-replay
powercut_arm gw-1 seq-1 seq-2 seq-3

# the load: runs of 3 s back to back (a cut gateway ends a run; the next
# reconnects), at most 20 runs or 40 s
load() {
	local end=$((SECONDS + 40)) runs=0
	while [ $SECONDS -lt $end ] && [ $runs -lt 20 ] && [ ! -e "$T/load.stop" ]; do
		timeout -k 5 15 "$top_builddir/lockstep-bench" --connect "127.0.0.1:$P" --sessions 1 \
			--rate 2000 --duration 3 --logins TRADR2:pw2 >>"$T/load.out" 2>&1 || true
		runs=$((runs + 1))
		sleep 0.2
	done
}
bg_start "$T/load.log" load
NOTED=()
# round NAME N: N orders of TRADR1 (firm FRMA; the load is TRADR2's, of
# FRMB) with tokens NAME1..NAMEN, each Accepted;
# then notes matcher-1's seq and hash.
round() {
	local i s=""
	for i in $(seq 1 "$2"); do
		# far below the load's prices: nothing of the load trades with them
		s+="A: buy 10 MSFT 0.$(printf %02d "$i") token $1$i"$'\n'"A: expect Accepted token=$1$i *"$'\n'
	done
	client <<<"connect A TRADR1 pw1 seq 0"$'\n'"$s"
	read -r -a x <<<"$(seq_hash_state matcher-1)"
	NOTED+=("${x[0]} ${x[1]}")
}
restart() { # NODE...: started again (armed), the cluster whole
	"$CLUSTER" start "$@" --dir "$T" >/dev/null || fail "$* did not start after the cut"
	primary_node 15 >/dev/null
}

# replayed FILE: what TRADR1's login replays from SoupBin seq 1 (the
# messages with their timestamps, in order) into FILE
replayed() {
	printf 'connect A TRADR1 pw1 seq 1\nsleep 1500\n' >"$T/replay.script"
	"$CLIENT" --connect "127.0.0.1:$P" --timeout 5000 --script "$T/replay.script" >"$T/replay.out" 2>&1 ||
		fail "replay of TRADR1: $(tail -3 "$T/replay.out")"
	grep '^A < ' "$T/replay.out" >"$1" || true
}

sleep 1 # the load flows; each cut comes right after a round's last Accepted
round PA 30
# the login's journal is not synced itself (the WAL is, wal.c): after the
# cut it holds only what the gateway's start synced, and every message its
# client saw must come back, under the same numbers
replayed "$T/replay.before"
[ "$(grep -c 'Accepted token=PA' "$T/replay.before")" = 30 ] ||
	fail "TRADR1 replays $(grep -c 'Accepted token=PA' "$T/replay.before") Accepted of PA before the cut"
powercut_cut gw-1
restart gw-1
replayed "$T/replay.after"
cmp -s "$T/replay.before" "$T/replay.after" ||
	fail "TRADR1's replay changed across the gateway's cut: $(diff "$T/replay.before" "$T/replay.after" | head -5)"
restored=$(stat_get gw-1 wal_restored)
[ "${restored:-0}" -ge 30 ] || fail "gw-1's WAL gave back ${restored:-0} messages after the cut, not the 30 Accepted"
info "round 1: gw-1 cut and back; its WAL gave back $restored messages, TRADR1 replays the same $(wc -l <"$T/replay.after") messages"
# from its next start (round 5) gw-1 checkpoints every 20 ms into 64 KiB
# WAL segments: login journals synced by the checkpoints, the WAL cut
sed -i 's/^wal_checkpoint = .*/wal_checkpoint = 20ms\nwal_segment = 64KiB/' "$T/gw-1.conf"
sleep 1
round PB 30
pr=$(primary_node 10)
powercut_cut "$pr"
restart "$pr"
info "round 2: the primary ($pr) cut and back; primary now $(primary_node 10)"
sleep 1
round PC 30
pr=$(primary_node 10)
other=seq-1
[ "$pr" = seq-1 ] && other=seq-2
powercut_cut "$pr" "$other"
restart "$pr" "$other"
info "round 3: a majority ($pr and $other) cut at once and back; primary now $(primary_node 10)"
sleep 1
round PD 30
powercut_cut seq-1 seq-2 seq-3
restart seq-1 seq-2 seq-3
info "round 4: the whole group cut at once and back; primary now $(primary_node 10)"
round PE 10
# round 5: the gateway again, now with checkpoints: what they synced and
# the WAL's rest give the same replay
"$CLUSTER" stop gw-1 --dir "$T" >/dev/null || fail "gw-1 did not stop"
restart gw-1
first=$(find "$T/gw-1/sessions.wal" -name '*.seg' | sort | head -1)
# a load of its own (the background one may be over): TRADR3, 2 s
timeout -k 5 15 "$top_builddir/lockstep-bench" --connect "127.0.0.1:$P" --sessions 1 \
	--rate 2000 --duration 2 --logins TRADR3:pw3 >"$T/bench-round5.out" 2>&1 ||
	fail "round 5's load: $(tail -3 "$T/bench-round5.out")"
round PF 10
replayed "$T/replay.before"
[ "$(stat_get gw-1 wal_checkpoints)" -ge 3 ] || fail "gw-1 made $(stat_get gw-1 wal_checkpoints) checkpoints"
segs=$(find "$T/gw-1/sessions.wal" -name '*.seg' | wc -l)
[ "$(find "$T/gw-1/sessions.wal" -name '*.seg' | sort | head -1)" != "$first" ] ||
	fail "gw-1's checkpoints removed none of its WAL's segments ($segs segments, the first $first)"
powercut_cut gw-1
restart gw-1
replayed "$T/replay.after"
cmp -s "$T/replay.before" "$T/replay.after" ||
	fail "TRADR1's replay changed across the checkpointed gateway's cut: $(diff "$T/replay.before" "$T/replay.after" | head -5)"
info "round 5: gw-1 cut after $segs WAL segments and its checkpoints; TRADR1 replays the same $(wc -l <"$T/replay.after") messages"
touch "$T/load.stop"
wait "$BG_PID" || true
info "load: $(grep -c '^orders:' "$T/load.out") runs ended whole, the others were cut"
wait_agree 30
"$CLUSTER" down --dir "$T" >/dev/null

for n in seq-1 seq-2 seq-3; do
	"$REPLAY" verify "$T/$n/journal" >"$T/verify.out" 2>&1 || { cat "$T/verify.out"; fail "$n's journal"; }
done
for n in seq-2 seq-3; do
	"$REPLAY" diff "$T/seq-1/journal" "$T/$n/journal" >"$T/diff.out" 2>&1 || true
	! grep -q "part at" "$T/diff.out" || { cat "$T/diff.out"; fail "seq-1's and $n's journals part"; }
done
"$REPLAY" dump "$T/seq-1/journal" >"$T/dump.txt"
for r in PA PB PC PD; do
	for i in $(seq 1 30); do
		c=$(grep -c " token=$r$i\$" "$T/dump.txt" || true)
		[ "$c" = 1 ] || fail "acknowledged order $r$i is on the tape $c times"
	done
done
for i in $(seq 1 10); do
	[ "$(grep -c " token=PE$i\$" "$T/dump.txt" || true)" = 1 ] || fail "order PE$i"
	[ "$(grep -c " token=PF$i\$" "$T/dump.txt" || true)" = 1 ] || fail "order PF$i"
done
for n in "${NOTED[@]}"; do
	read -r s h <<<"$n"
	"$REPLAY" rebuild "$T/seq-1/journal" --to "$s" --config "$T/matcher-1.conf" >"$T/rebuild.out" ||
		fail "rebuild: $(cat "$T/rebuild.out")"
	[ "$(head -1 "$T/rebuild.out")" = "seq $s hash $h" ] ||
		fail "seq $s: the matchers had hash $h before a cut, the journal now rebuilds $(head -1 "$T/rebuild.out")"
done
echo "ok: 140 acknowledged orders each on the tape once through cuts of gw-1, a primary, a majority, the whole group and gw-1 again, $(grep -c . "$T/dump.txt") events in all; journals identical, ${#NOTED[@]} positions rebuilt unchanged"
