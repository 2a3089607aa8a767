#!/usr/bin/env bash
# Matcher snapshots: written every snapshot_interval tape seqs and on request
# (lockstepctl snapshot); a restarted replica loads the newest valid one,
# replays the rest of the tape by retransmission and agrees with its twin; its
# execution stream continues with the same numbers (clients served by it alone
# see nothing missing or doubled); a damaged snapshot is skipped, never trusted.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
cluster_up --set matcher.snapshot_interval=500

run_bench() {
	"$top_builddir/lockstep-bench" --connect "127.0.0.1:$P" --sessions 2 --orders "$1" \
		--window 8 --quiet >"$T/bench.out" 2>&1 || { cat "$T/bench.out"; fail "bench ($2): $(tail -1 "$T/bench.out")"; }
}

snaps() { ls "$T/matcher-2/snapshots" 2>/dev/null | grep -c '^snap-.*\.lss$' || true; }

run_bench 600 first
agree matcher-1 matcher-2
# staggered: replica 0 (matcher-1) writes at multiples of 500, replica 1
# (matcher-2) half an interval later, so they never write at once
# (the writers run SCHED_IDLE: on a busy host they may still be at it)
for _ in $(seq 1 100); do
	s1=$(status_field matcher-1 snapshot_seq) s2=$(status_field matcher-2 snapshot_seq)
	[ "${s1:-0}" -ge 500 ] && [ "${s2:-0}" -ge 250 ] && break
	sleep 0.1
done
[ "${s1:-0}" -ge 500 ] && [ $((s1 % 500)) = 0 ] || fail "matcher-1: periodic snapshot at ${s1:-none}, want a multiple of 500"
[ "${s2:-0}" -ge 250 ] && [ $((s2 % 500)) = 250 ] || fail "matcher-2: periodic snapshot at ${s2:-none}, want 250 + a multiple of 500"

# on request
snapshot_now matcher-2
want=$SNAP_SEQ
n=$(snaps)
[ "$n" -ge 2 ] && [ "$n" -le 3 ] || fail "$n snapshots kept (snapshot_keep = 3)"

# SIGKILL, more traffic, restart: from the newest snapshot, not from seq 1
# (the requested one, or a periodic one the tape's time events reached
# meanwhile: 1248 requested, 1250 written before the kill, in one run)
"$CLUSTER" kill matcher-2 --dir "$T" >/dev/null
newest=$(ls "$T/matcher-2/snapshots" | sed -n 's/^snap-0*\([0-9]*\)\.lss$/\1/p' | sort -n | tail -1)
[ "${newest:-0}" -ge "$want" ] || fail "the newest snapshot, ${newest:-none}, is older than the one requested, $want"
want=$newest
run_bench 300 "one replica down"
"$CLUSTER" start matcher-2 --dir "$T" >/dev/null
agree matcher-1 matcher-2
grep -q "loaded snapshot .*snap-0*$want.lss" "$T/matcher-2.log" || fail "matcher-2 did not load snapshot $want"

# the restored replica alone serves the executions: numbers must continue
"$CLUSTER" kill matcher-1 --dir "$T" >/dev/null
run_bench 300 "only the restored replica"
"$CLUSTER" start matcher-1 --dir "$T" >/dev/null
agree matcher-2 matcher-1

# damage the newest snapshot: skipped with a message, the older one is used
"$CLUSTER" kill matcher-2 --dir "$T" >/dev/null
newest=$(ls "$T/matcher-2/snapshots"/snap-*.lss | sort | tail -1)
size=$(stat -c %s "$newest")
printf '\xff\xff\xff\xff' | dd of="$newest" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
run_bench 200 "before the corrupt restart"
"$CLUSTER" start matcher-2 --dir "$T" >/dev/null
agree matcher-1 matcher-2
grep -q "snapshot .*$(basename "$newest") skipped, not trusted" "$T/matcher-2.log" ||
	fail "the damaged snapshot was not reported"
[ "$(grep -c 'loaded snapshot' "$T/matcher-2.log")" -ge 2 ] || fail "no fallback to an older snapshot"
echo "ok: snapshots at $(status_field matcher-2 snapshot_seq), replicas agree at seq $(status_field matcher-1 seq)"
