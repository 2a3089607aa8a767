#!/usr/bin/env bash
# Power cuts under load, without a power cut (tests/powercut.c: each armed
# node keeps the image strict POSIX would leave on its disk; a cut is a
# SIGKILL and that image put in place). A group of 3 sequencers and the
# gateway run armed, on the defaults (fsync = disk everywhere), under a
# bounded open-loop load (runs of 3 s at 2,000 orders/s, back to back,
# each reconnecting). In each round a client has orders accepted, the
# matchers' position and hash are noted, and then the power goes: round 1
# the gateway, round 2 the primary sequencer, round 3 two sequencers at
# once (a majority, the primary among them), round 4 all three; the nodes
# start again from what their disks held. Last round: the cluster still
# trades. (With [sequencer] fsync = majority-memory round 4 loses the
# orders of its last 100 ms, and this test fails.) Then every
# acknowledged order is on the tape exactly once (lockstep-replay dump of
# each sequencer's journal), the journals agree record for record, each
# noted (seq, hash) is rebuilt from the final journal unchanged (no
# sequence number was reused for another event), and the matchers agree.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built tests/libpowercut.so lockstep-client lockstep-bench lockstep-replay
SEQUENCERS=3
cluster_up
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

sleep 1 # the load flows; each cut comes right after a round's last Accepted
round PA 30
powercut_cut gw-1
restart gw-1
info "round 1: gw-1 cut and back"
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
done
for n in "${NOTED[@]}"; do
	read -r s h <<<"$n"
	"$REPLAY" rebuild "$T/seq-1/journal" --to "$s" --config "$T/matcher-1.conf" >"$T/rebuild.out" ||
		fail "rebuild: $(cat "$T/rebuild.out")"
	[ "$(head -1 "$T/rebuild.out")" = "seq $s hash $h" ] ||
		fail "seq $s: the matchers had hash $h before a cut, the journal now rebuilds $(head -1 "$T/rebuild.out")"
done
echo "ok: 130 acknowledged orders each on the tape once through cuts of gw-1, a primary, a majority and the whole group, $(grep -c . "$T/dump.txt") events in all; journals identical, ${#NOTED[@]} positions rebuilt unchanged"
