#!/usr/bin/env bash
# Wait modes (issue 14): [node] cpus pins a daemon to its CPUs, [node]
# wait = spin keeps its loop polling without sleeping and [node]
# rt_priority runs it under SCHED_FIFO. A gateway restarted pinned to one
# CPU and spinning runs there (Cpus_allowed_list), burns its core while the
# cluster is idle (a blocking one sleeps), and trades as before; back to
# block, it sleeps again; with rt_priority (where SCHED_FIFO is allowed)
# its loop and sync threads are SCHED_FIFO at that priority and the threads
# off the orders' path are not, it trades, and it sleeps when idle; a
# matcher under rt_priority serializes a snapshot under the normal
# scheduler and returns to SCHED_FIFO once it has caught up. --check-config
# refuses spin without cpus, spin with rt_priority, a priority past 99, and
# a CPU list that is not one.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-gateway lockstep-bench lockstepctl

# The configs checked below are --set options alone: with a cluster key of
# their own (--check-config reads it).
keys=$(tmpdir_new)
"$CTL" keygen "$keys/cluster.key" >/dev/null || fail "lockstepctl keygen"
# check_refused KEY=VALUE... TEXT: --check-config fails and says TEXT
check_refused() {
	local text=${*: -1} args=() out
	for kv in "${@:1:$#-1}"; do args+=(--set "$kv"); done
	out=$("$top_builddir/lockstep-gateway" --check-config --set node.name=g \
		--set node.key_file="$keys/cluster.key" "${args[@]}" 2>&1) &&
		fail "taken: ${args[*]}: $out"
	echo "$out" | grep -q -- "$text" || fail "${args[*]}: no reason '$text' in: $out"
}
check_refused node.wait=spin "wait = spin needs \[node\] cpus"
check_refused node.cpus=x "is not a CPU list"
check_refused node.cpus=4-2 "is not a CPU list"
check_refused node.cpus=1000 "none of 1000 is available"
check_refused node.cpus=0 node.wait=spin node.rt_priority=10 "rt_priority with wait = spin"
check_refused node.rt_priority=100 "rt_priority: \"100\" is out of range"
"$top_builddir/lockstep-gateway" --check-config --set node.name=g --set node.cpus=0 \
	--set node.wait=spin --set node.key_file="$keys/cluster.key" >/dev/null ||
	fail "cpus=0 wait=spin refused"
rm -rf "$keys"

cluster_up
cpu=$(( $(nproc) - 1 ))
# cpu_s PID: its user + system seconds so far
cpu_s() { awk '{ printf "%.2f\n", ($14 + $15) / 100 }' "/proc/$1/stat"; }
# restart_gw WAIT [PRIO]: gw-1 again, pinned to the last CPU, with that wait
# mode (and rt_priority)
restart_gw() {
	"$CLUSTER" stop gw-1 --dir "$T" >/dev/null
	sed -i -e '/^cpus = /d' -e '/^wait = /d' -e '/^rt_priority = /d' "$T/gw-1.conf"
	sed -i "s/^\[node\]\$/[node]\ncpus = $cpu\nwait = $1\nrt_priority = ${2:-0}/" "$T/gw-1.conf"
	grep -q "^wait = $1\$" "$T/gw-1.conf" || fail "gw-1.conf: no [node] section to add to"
	"$CLUSTER" start gw-1 --dir "$T" >/dev/null || fail "gw-1 did not start with wait = $1"
	GW_PID=$(cat "$T/gw-1.pid")
	grep -q "^Cpus_allowed_list:[[:space:]]*$cpu\$" "/proc/$GW_PID/status" ||
		fail "gw-1 not pinned to CPU $cpu: $(grep Cpus_allowed_list "/proc/$GW_PID/status")"
}
# idle_cpu: gw-1's CPU seconds over one idle second
idle_cpu() {
	local a b
	a=$(cpu_s "$GW_PID")
	sleep 1
	b=$(cpu_s "$GW_PID")
	python3 -c "print(round($b - $a, 2))"
}
trade() {
	"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --orders 300 --window 8 --timeout 20 \
		>"$T/bench.out" 2>&1 || { cat "$T/bench.out"; fail "orders through a gateway that waits by $1"; }
}

restart_gw spin
trade spin
spun=$(idle_cpu)
python3 -c "import sys; sys.exit(0 if $spun >= 0.2 else 1)" ||
	fail "a spinning gateway used $spun s of CPU in an idle second"
restart_gw block
trade block
slept=$(idle_cpu)
python3 -c "import sys; sys.exit(0 if $slept < 0.2 else 1)" ||
	fail "a blocking gateway used $slept s of CPU in an idle second"
if ! chrt -f 1 true 2>/dev/null; then
	echo "ok: pinned to CPU $cpu; idle second: spin $spun s of CPU, block $slept s" \
		"(rt_priority not tried: this process may not use SCHED_FIFO)"
	exit 0
fi
restart_gw block 7
# each thread's name, scheduling policy and real-time priority (/proc stat
# fields 2, 41 and 40; 1 = SCHED_FIFO, 0 = the normal scheduler): the loop
# and the journals' sync threads under SCHED_FIFO 7, the threads off the
# orders' path (login verification, the progress file's writer) back under
# the normal one
sched_of() { sed 's/^.*) //' "$1/stat" 2>/dev/null | awk '{ print $39 "/" $38 }'; }
rt_threads=0
for t in /proc/"$GW_PID"/task/*; do
	comm=$(cat "$t/comm" 2>/dev/null) || continue # a thread that ended
	sched=$(sched_of "$t")
	[ -n "$sched" ] || continue
	case $comm in
	login-verify | progress-save | wal-checkpoint) want=0/0 ;;
	*) want=1/7 rt_threads=$((rt_threads + 1)) ;;
	esac
	[ "$sched" = "$want" ] || fail "gw-1 thread ${t##*/} ($comm): policy/priority $sched (not $want)"
done
grep -qx journal-sync /proc/"$GW_PID"/task/*/comm || fail "gw-1 has no journal-sync thread to check"
grep -qx login-verify /proc/"$GW_PID"/task/*/comm || fail "gw-1 has no login-verify thread to check"
trade "block under SCHED_FIFO"
rt=$(idle_cpu)
python3 -c "import sys; sys.exit(0 if $rt < 0.2 else 1)" ||
	fail "a real-time blocking gateway used $rt s of CPU in an idle second"

# A matcher under rt_priority serializes a snapshot under the normal
# scheduler (snapshots_off_rt) and is back under SCHED_FIFO once it has
# caught up after it (its "caught up" line).
"$CLUSTER" stop matcher-1 --dir "$T" >/dev/null
sed -i -e '/^rt_priority = /d' -e "s/^\[node\]\$/[node]\nrt_priority = 7/" "$T/matcher-1.conf"
"$CLUSTER" start matcher-1 --dir "$T" >/dev/null || fail "matcher-1 did not start with rt_priority"
snapshot_now matcher-1
off=$(node_ctl matcher-1 stats | awk '$1 == "snapshots_off_rt" { print $2 }')
[ "$off" = 1 ] || fail "matcher-1: snapshots_off_rt is '$off' after one snapshot under rt_priority"
wait_for 10 "matcher-1's catch-up after its snapshot at $SNAP_SEQ" \
	grep -q "snapshot at tape seq $SNAP_SEQ: caught up" "$T/matcher-1.log"
sched=$(sched_of "/proc/$(cat "$T/matcher-1.pid")")
[ "$sched" = 1/7 ] || fail "matcher-1 after its snapshot: policy/priority $sched (not 1/7)"
echo "ok: pinned to CPU $cpu; idle second: spin $spun s of CPU, block $slept s," \
	"block under SCHED_FIFO $rt s ($rt_threads threads SCHED_FIFO 7, the rest normal);" \
	"a real-time matcher's snapshot serialized off SCHED_FIFO, and back after"
