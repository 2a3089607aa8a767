#!/usr/bin/env bash
# A full disk under load. In a group of 3, seq-1's state directory is moved
# onto a 24 MiB tmpfs of the test's own (a private mount namespace) and
# seq-1 is made the primary. Under a bounded open-loop load, a filler file
# takes the rest of the tmpfs. seq-1 then finds its journal unwritable: it
# logs it once, says disk=full in its status, sequences nothing more and
# steps down, and another member becomes primary. Every order is answered
# (the gateway resends what seq-1 could not take) and no datagram is lost.
# The filler is removed: seq-1 says disk=ok, stands again, catches up with
# the group, and after the cluster stops its journal verifies and agrees
# record for record with the others'.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
if [ -z "${LOCKSTEP_MNTNS:-}" ]; then
	[ "$(id -u)" = 0 ] || skip "needs root for a tmpfs"
	unshare -m --propagation private true 2>/dev/null || skip "no mount namespace here"
	LOCKSTEP_MNTNS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
need_built lockstep-bench lockstep-replay
SEQUENCERS=3
cluster_up

# seq-1's state directory onto a small tmpfs
"$CLUSTER" stop seq-1 --dir "$T" >/dev/null
mv "$T/seq-1" "$T/seq-1.disk"
mkdir "$T/seq-1"
mount -t tmpfs -o size=24m lockstep-test "$T/seq-1" || skip "cannot mount a tmpfs"
# the daemons stop before the tmpfs goes, and it goes before $T is removed
trap 'rc=$?; "$CLUSTER" down --dir "$T" >/dev/null 2>&1; umount -l "$T/seq-1" 2>/dev/null
	(exit $rc); cluster_cleanup' EXIT
cp -a "$T/seq-1.disk/." "$T/seq-1/"
"$CLUSTER" start seq-1 --dir "$T" >/dev/null || fail "seq-1 did not start on the tmpfs"
pr=$(primary_node 10)
if [ "$pr" != seq-1 ]; then
	node_ctl "$pr" --timeout 5000 step-down 0 >/dev/null || fail "step-down to seq-1 from $pr"
fi
for _ in $(seq 1 50); do [ "$(primary_node 5)" = seq-1 ] && break; sleep 0.1; done
[ "$(primary_node 5)" = seq-1 ] || fail "seq-1 is not the primary"

bg_start "$T/bench.out" timeout -k 5 60 "$top_builddir/lockstep-bench" --connect "127.0.0.1:$P" \
	--sessions 2 --rate 2000 --duration 8 --cluster "$T" --json "$T/bench.json"
bench_pid=$BG_PID
sleep 2
dd if=/dev/zero of="$T/seq-1/filler" bs=1M 2>/dev/null || true # until ENOSPC
info "seq-1's tmpfs full: $(df -h "$T/seq-1" | tail -1 | awk '{print $3 " used, " $4 " free"}')"
for _ in $(seq 1 100); do [ "$(status_get seq-1 disk)" = full ] && break; sleep 0.1; done
[ "$(status_get seq-1 disk)" = full ] || fail "seq-1 does not say disk=full"
grep -q "No space left on device: this node sequences and acknowledges nothing more" "$T/seq-1.log" ||
	fail "seq-1 did not log the full disk"
for _ in $(seq 1 100); do
	p=$("$CLUSTER" primary --dir "$T" 2>/dev/null || true)
	[ -n "$p" ] && [ "$p" != seq-1 ] && break
	sleep 0.1
done
[ -n "$p" ] && [ "$p" != seq-1 ] || fail "no other primary after seq-1's disk filled (primary: ${p:-none})"
info "seq-1 stood down (state $(status_get seq-1 state)); $p is the primary"
wait "$bench_pid" || { cat "$T/bench.out"; fail "bench: orders unanswered or lost"; }
grep -E "orders|losses" "$T/bench.out" | head -3 | sed 's/^/info: bench: /'
no_losses "$T/bench.json"

rm -f "$T/seq-1/filler"
for _ in $(seq 1 100); do [ "$(status_get seq-1 disk)" = ok ] && break; sleep 0.1; done
[ "$(status_get seq-1 disk)" = ok ] || fail "seq-1 still says disk=full with room again"
grep -q "the disk has room again" "$T/seq-1.log" || fail "seq-1 did not log its recovery"
"$top_builddir/lockstep-bench" --connect "127.0.0.1:$P" --sessions 2 --orders 200 --window 8 \
	--quiet >"$T/bench2.out" 2>&1 || { cat "$T/bench2.out"; fail "bench after the disk had room"; }
wait_agree 20
for _ in $(seq 1 100); do
	[ "$(status_get seq-1 seq)" -ge "$SEQ" ] 2>/dev/null && break
	sleep 0.1
done
[ "$(status_get seq-1 seq)" -ge "$SEQ" ] || fail "seq-1 at $(status_get seq-1 seq), the group committed $SEQ"
[ "$(stat_get seq-1 disk_full)" -ge 1 ] || fail "seq-1's STATS disk_full is $(stat_get seq-1 disk_full)"
info "seq-1: disk_full $(stat_get seq-1 disk_full), commands_disk_full $(stat_get seq-1 commands_disk_full); caught up to $SEQ"
"$CLUSTER" down --dir "$T" >/dev/null
"$top_builddir/lockstep-replay" verify "$T/seq-1/journal" >"$T/verify.out" 2>&1 ||
	{ cat "$T/verify.out"; fail "seq-1's journal does not verify"; }
for other in seq-2 seq-3; do
	"$top_builddir/lockstep-replay" diff "$T/$other/journal" "$T/seq-1/journal" >"$T/diff.out" 2>&1 || true
	grep -q "part at" "$T/diff.out" && { cat "$T/diff.out"; fail "seq-1's journal parts from $other's"; }
done
info "seq-1's full disk: it stood down, $p took over, every order answered; with room again it caught up to $SEQ"

# The gateway's full disk: its state directory on a 16 MiB tmpfs, filled
# for 1.5 s under load. Its exec streams hold what its logins' journals
# cannot take and its commands wait in their journal's buffer: nothing
# reaches a client or the sequencer unjournalled, nothing is lost; it says
# disk=full, then disk=ok, and every order is answered.
"$CLUSTER" start seq-1 seq-2 seq-3 matcher-1 matcher-2 gw-1 --dir "$T" >/dev/null ||
	fail "the cluster did not start again"
"$CLUSTER" stop gw-1 --dir "$T" >/dev/null
mv "$T/gw-1" "$T/gw-1.disk"
mkdir "$T/gw-1"
mount -t tmpfs -o size=16m lockstep-test "$T/gw-1" || skip "cannot mount a tmpfs"
trap 'rc=$?; "$CLUSTER" down --dir "$T" >/dev/null 2>&1; umount -l "$T/seq-1" "$T/gw-1" 2>/dev/null
	(exit $rc); cluster_cleanup' EXIT
cp -a "$T/gw-1.disk/." "$T/gw-1/"
"$CLUSTER" start gw-1 --dir "$T" >/dev/null || fail "gw-1 did not start on the tmpfs"
bg_start "$T/bench3.out" timeout -k 5 60 "$top_builddir/lockstep-bench" --connect "127.0.0.1:$P" \
	--sessions 2 --rate 1000 --duration 6 --timeout 20 --cluster "$T" --json "$T/bench3.json"
bench_pid=$BG_PID
sleep 2
dd if=/dev/zero of="$T/gw-1/filler" bs=64k 2>/dev/null || true
for _ in $(seq 1 30); do [ "$(status_get gw-1 disk)" = full ] && break; sleep 0.05; done
[ "$(status_get gw-1 disk)" = full ] || { df "$T/gw-1" >&2; fail "gw-1 does not say disk=full"; }
sleep 1.5
rm -f "$T/gw-1/filler"
for _ in $(seq 1 100); do [ "$(status_get gw-1 disk)" = ok ] && break; sleep 0.1; done
[ "$(status_get gw-1 disk)" = ok ] || fail "gw-1 still says disk=full with room again"
wait "$bench_pid" || { cat "$T/bench3.out"; fail "bench through gw-1's full disk: orders unanswered or lost"; }
no_losses "$T/bench3.json"
grep -q "the execution streams and the commands wait (STATUS disk=full)" "$T/gw-1.log" ||
	fail "gw-1 did not log its full disk"
info "gw-1's full disk: $(grep -E '^orders:' "$T/bench3.out"); journal_errors $(stat_get gw-1 journal_errors), disk_full $(stat_get gw-1 disk_full)"
echo "ok: a full disk on seq-1 (it stood down, $p took over) and on gw-1 (its streams held): every order answered, nothing lost"
