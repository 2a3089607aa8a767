#!/usr/bin/env bash
# Matcher checkpoints: three replicas of a partition multicast their state
# hash every K tape seqs and vote. A normal run agrees everywhere. A replica
# restarted with the test fault (test_fault_diverge_at = N) goes "diverged"
# at the first checkpoint at or after N (within K events), says so at error
# level and in its status, stops publishing, quarantines its snapshots newer
# than its last agreed checkpoint and exits with status 3 when stopped; the
# other two stay live with equal seq and hash and report it; clients see
# nothing missing or doubled (bench exits 0). Then the replica, restarted
# without the fault, agrees again; malformed checkpoint datagrams are
# counted and dropped.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
K=100
cluster_up --matchers 3 --set matcher.checkpoint_interval=$K --set matcher.replicas=3

run_bench() {
	timeout -k 5 60 "$top_builddir/lockstep-bench" --connect "127.0.0.1:$P" --sessions 2 \
		--orders "$1" --window 8 --quiet >"$T/bench-$2.out" 2>&1 ||
		{ cat "$T/bench-$2.out"; fail "bench ($2): $(tail -1 "$T/bench-$2.out")"; }
}
counter() { local v; v=$(ctl_counter "$1" "$2"); echo "${v:-0}"; }
# wait_counter NODE NAME MIN: until the counter reaches MIN (bounded).
wait_counter() {
	for _ in $(seq 1 100); do
		[ "$(counter "$1" "$2")" -ge "$3" ] && return 0
		sleep 0.1
	done
	fail "$1: $2 = $(counter "$1" "$2"), want at least $3"
}
# 1. A normal run: every replica agrees at every checkpoint.
run_bench 300 normal
wait_agree 20
for n in matcher-1 matcher-2 matcher-3; do
	wait_counter "$n" checkpoints_agreed 1
	[ "$(counter "$n" checkpoints_diverged)" = 0 ] || fail "$n diverged in a normal run"
	[ "$(counter "$n" checkpoint_dissents)" = 0 ] || fail "$n saw a dissent in a normal run"
done
S=$SEQ
echo "normal run: seq $S, checkpoints agreed: $(for n in 1 2 3; do printf '%s ' "$(counter matcher-$n checkpoints_agreed)"; done)"

# 2. matcher-3 again, with the fault at N, a little after a checkpoint
# (N1); started here, not by ops/cluster, to see its exit status.
# lockstep-bench makes one tape event per order; the idle tape moves on
# too, by a time event every [sequencer] time_event (100 ms): N1 is at least
# K past S, so that the restart does not take the tape to N before the load.
N1=$(( (S / K + 2) * K ))
N=$((N1 + 11))
C_WANT=$(( (N + K - 1) / K * K ))
"$CLUSTER" kill matcher-3 --dir "$T" >/dev/null
sed -i "/^\[matcher\]\$/a test_fault_diverge_at = $N" "$T/matcher-3.conf"
"$top_builddir/lockstep-matcher" --config "$T/matcher-3.conf" >>"$T/matcher-3.log" 2>&1 </dev/null &
m3=$!
echo "$m3" >"$T/matcher-3.pid"
for _ in $(seq 1 150); do
	[ "$(status_get matcher-3 state 2>/dev/null)" = live ] && [ "$(status_get matcher-3 seq)" -ge "$S" ] 2>/dev/null && break
	kill -0 "$m3" 2>/dev/null || fail "matcher-3 exited at start-up"
	sleep 0.1
done
[ "$(status_get matcher-3 state)" = live ] || fail "matcher-3 not live after its restart"
grep -q "TEST FAULT ARMED.*test_fault_diverge_at = $N" "$T/matcher-3.log" || fail "no start-up warning for the fault"

# 3. Load past N but short of the checkpoint that will catch it; a
# snapshot of the wrong state then (the divergence must quarantine it).
# The bench takes the tape from where it is now to about N + 10; time
# events then need some 8 s to reach C_WANT.
X=$(status_get matcher-1 seq)
[ "$X" -lt "$N" ] || fail "the idle tape reached $X before the load, past the fault at $N"
run_bench $(( (N - X + 10) / 2 )) before
for _ in $(seq 1 50); do [ "$(status_get matcher-3 seq)" -ge "$N" ] 2>/dev/null && break; sleep 0.1; done
grep -q "TEST FAULT: after tape seq $N " "$T/matcher-3.log" || fail "the fault did not fire at $N"
[ "$(status_get matcher-3 state)" = live ] || fail "matcher-3 is $(status_get matcher-3 state) before checkpoint $C_WANT"
snapshot_now matcher-3
X=$SNAP_SEQ
[ "$X" -ge "$N" ] && [ "$X" -lt "$C_WANT" ] || fail "matcher-3's snapshot is at $X: want $N..$((C_WANT - 1))"

# The load through the checkpoint: every order answered once.
run_bench 150 diverge
for _ in $(seq 1 150); do
	[ "$(status_get matcher-3 state)" = diverged ] && break
	sleep 0.1
done
[ "$(status_get matcher-3 state)" = diverged ] || fail "matcher-3 is $(status_get matcher-3 state), not diverged"
line=$(grep -m1 '^<3>.*DIVERGED at checkpoint' "$T/matcher-3.log") || fail "no DIVERGED error in matcher-3's log"
C=$(sed -n 's/.*DIVERGED at checkpoint \([0-9]*\):.*/\1/p' <<<"$line")
[ "$C" = "$C_WANT" ] || fail "diverged at checkpoint ${C:-?}, fault at $N, K = $K: want $C_WANT"
status_get matcher-3 message | grep -q "DIVERGED at checkpoint $C" || fail "matcher-3's status does not say why"
[ "$(counter matcher-3 checkpoints_diverged)" = 1 ] || fail "matcher-3: checkpoints_diverged $(counter matcher-3 checkpoints_diverged)"
[ "$(counter matcher-3 checkpoint_last_agreed)" = "$N1" ] || fail "matcher-3's last agreed checkpoint is $(counter matcher-3 checkpoint_last_agreed), want $N1"
[ "$(counter matcher-3 exec_blocks_withheld)" -gt 0 ] || fail "matcher-3 withheld nothing after diverging"
echo "matcher-3: fault at $N, diverged at checkpoint $C: $line"

# 4. The other two: live, equal, and they saw matcher-3 disagree.
wait_agree 15 matcher-1 matcher-2
for n in matcher-1 matcher-2; do
	wait_counter "$n" checkpoint_dissents 1
	[ "$(counter "$n" checkpoints_diverged)" = 0 ] || fail "$n diverged too"
	grep -q "matcher-3 has diverged" "$T/$n.log" || fail "$n did not report matcher-3"
done
# matcher-3 follows the tape with its own hash: compared at one seq (both
# asked at once, each seq and hash from one STATUS: the idle tape moves on)
for _ in $(seq 1 100); do
	{ read -r -a a; read -r -a b; } < <(seq_hash_states matcher-1 matcher-3)
	[ -n "${a[0]:-}" ] && [ "${a[0]}" = "${b[0]:-}" ] && break
	sleep 0.1
done
[ -n "${a[0]:-}" ] && [ "${a[0]}" = "${b[0]:-}" ] ||
	fail "matcher-3 stopped following the tape: at ${b[0]:-?}, matcher-1 at ${a[0]:-?}"
[ "${b[1]}" != "${a[1]}" ] || fail "matcher-3's hash equals the others' at seq ${a[0]}"

# 5. Stopped, it exits 3; its snapshot of the wrong state is quarantined.
kill -TERM "$m3"
rc=0
wait "$m3" || rc=$?
rm -f "$T/matcher-3.pid"
[ "$rc" = 3 ] || fail "diverged matcher-3 exited with $rc, want 3"
[ -e "$T/matcher-3/snapshots/snap-$(printf %020d "$X").lss.diverged" ] ||
	fail "snapshot at $X (after the last agreed checkpoint $N1) not quarantined: $(ls "$T/matcher-3/snapshots")"
for f in "$T"/matcher-3/snapshots/snap-*.lss; do
	[ -e "$f" ] || continue
	s=$(basename "$f" .lss)
	[ "$((10#${s#snap-}))" -le "$N1" ] || fail "snapshot $f (after the last agreed checkpoint $N1) left loadable"
done

# 6. Without the fault it rebuilds and agrees again.
sed -i "/^test_fault_diverge_at = /d" "$T/matcher-3.conf"
"$CLUSTER" start matcher-3 --dir "$T" >/dev/null
run_bench 100 after
wait_agree 20
wait_counter matcher-3 checkpoints_agreed 1
[ "$(counter matcher-3 checkpoints_diverged)" = 0 ] || fail "matcher-3 diverged again without the fault"

# 7. Malformed checkpoint datagrams are counted and dropped (host-local:
# loopback, TTL 0); one of another partition too.
group=$(sed -n 's/^exec_group = //p' "$T/matcher-1.conf")
gport=${group##*:} gaddr=${group%:*}
gaddr=${gaddr%.*}.$((${gaddr##*.} + 1))
bad0=$(counter matcher-1 checkpoints_malformed) other0=$(counter matcher-1 checkpoints_other_partition)
cluster_key_env matcher-1
python3 - "$gaddr" "$gport" <<'PY' || skip "cannot send to the checkpoint group"
import os, socket, struct, sys
import auth
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
dst = (sys.argv[1], int(sys.argv[2]))
good = b"LSCK" + struct.pack(">HH", 1, 0) + b"intruder".ljust(32) + struct.pack(">QQ", 100, 1)
for d in (b"", b"LSCK", good[:-1], good + b"x", b"LSCX" + good[4:], good[:4] + b"\0\2" + good[6:],
          good[:8] + b" " * 32 + good[40:], good[:40] + b"\0" * 8 + good[48:]):
    # tagged by a member, so that the vote's own decoder is what refuses it
    s.sendto(auth.seal(d, os.environ["KEY"], os.environ["CLUSTER_NAME"], "votes", None), dst)
s.sendto(auth.seal(good[:6] + struct.pack(">H", 1) + good[8:], os.environ["KEY"],
                   os.environ["CLUSTER_NAME"], "votes", None), dst)  # partition 1
PY
wait_counter matcher-1 checkpoints_malformed $((bad0 + 8))
wait_counter matcher-1 checkpoints_other_partition $((other0 + 1))
[ "$(status_get matcher-1 state)" = live ] || fail "matcher-1 is $(status_get matcher-1 state) after the malformed datagrams"
echo "ok: diverged at checkpoint $C (fault at $N, K = $K), exit 3, snapshot $X quarantined; replicas agree at seq $(status_get matcher-1 seq)"
