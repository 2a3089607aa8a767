# Helpers for the integration tests: each test runs a real cluster of the real
# daemons on loopback, in a private directory with ports nobody else uses.
# shellcheck shell=bash
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir/_build/check}
# shellcheck source=ops/lib/common.sh
. "$top_srcdir/ops/lib/common.sh" # no_leak_scan, as ops/cluster and ops/drill use it
export LOCKSTEP_BIN=$top_builddir
# Every test cluster's matchers (ops/cluster up, ops/drill, ops/scale) with
# pools an eighth of the defaults, 108 MB a matcher instead of 556: a matcher
# zeroes all of its pools as it starts (common/prealloc.h), 0.1 s of CPU
# on a quiet machine and about 1 s beside other tests (huge pages compacted
# for it, or 4 KiB faults), while no test rests or remembers more than a
# small part of 131,072 orders. A test of the defaults unsets it
# (tests/hot_faults.sh).
export LOCKSTEP_CLUSTER_SET=${LOCKSTEP_CLUSTER_SET-"matcher.max_orders=131072 \
matcher.max_tokens=524288 matcher.ring=131072 feed.ring=131072"}
CLUSTER=$top_srcdir/ops/cluster
CLIENT=$top_builddir/lockstep-client
CTL=$top_builddir/lockstepctl

REPLAY=$top_builddir/lockstep-replay
BENCH=$top_builddir/lockstep-bench

# fail MESSAGE: the test fails; MESSAGE is said again after the logs a
# cleanup dumps, so that the end of a failed test's log (all CI shows of
# it) names what failed.
FAIL_MSG=
fail() { FAIL_MSG=$*; echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
info() { echo "info: $*"; }

# need_built NAME...: fails the test unless every program NAME is built.
need_built() {
	local b
	for b in "$@"; do
		[ -x "$top_builddir/$b" ] || fail "$top_builddir/$b not built"
	done
}
# asan_build: 0 when the daemons were built with AddressSanitizer (ops/check's
# second build, where everything runs several times slower): a test may
# leave out there a part that the plain build covers.
asan_build() {
	case "$(nm -D "$top_builddir/lockstep-matcher" 2>/dev/null || true)" in
	*__asan_init*) return 0 ;;
	esac
	return 1
}
# own_netns "$@": runs the test again in a network namespace of its own
# (for one whose nftables rules must not touch the machine's, or which needs
# its ports to itself), passing its arguments, and exits with that run's
# status, the namespace deleted; in that run it returns at once.
own_netns() {
	local ns=lsown$$ rc=0
	[ -z "${LOCKSTEP_OWN_NETNS:-}" ] || return 0
	ip netns add "$ns" 2>/dev/null || skip "cannot make a network namespace"
	ip netns exec "$ns" ip link set lo up &&
		ip netns exec "$ns" env LOCKSTEP_OWN_NETNS="$ns" bash "$0" "$@" || rc=$?
	ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
	ip netns del "$ns" 2>/dev/null || true
	exit $rc
}
# skip_unless_built NAME: skips (77) the test when program NAME is not built.
skip_unless_built() { [ -x "$top_builddir/$1" ] || skip "$1 not built"; }

# tmpdir_new [PREFIX]: a new private directory (its path on stdout).
tmpdir_new() { mktemp -d "${TMPDIR:-/tmp}/${1:-lockstep-test}.XXXXXX"; }
# use_tmpdir [PREFIX]: T, a new private directory removed on exit.
use_tmpdir() {
	T=$(tmpdir_new "$@")
	trap 'rm -rf "$T"' EXIT
}

# dump_logs LINES FILE...: the last LINES lines of each FILE that exists,
# each under a header, on stderr (for the record of a failed test).
dump_logs() {
	local n=$1 f
	shift
	for f in "$@"; do
		[ -e "$f" ] || continue
		echo "----- $f (last $n lines)" >&2
		tail -n "$n" "$f" >&2
	done
	[ -z "$FAIL_MSG" ] || echo "FAIL (again, after the logs): $FAIL_MSG" >&2
}

# try_for SECONDS COMMAND...: until COMMAND succeeds (0), or 1 after SECONDS
# (polled every 0.1 s; COMMAND's output is discarded, the variables it sets
# are kept).
try_for() {
	local n=$(($1 * 10)) i
	shift
	for ((i = 0; i < n; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}
# wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds; fails the test
# ("WHAT: not after SECONDS s") when it does not within SECONDS.
wait_for() {
	local what=$2
	try_for "$1" "${@:3}" || fail "$what: not after $1 s"
}

# Port claims: each cluster's 400 ports are two 200-port blocks, each
# claimed by an flock on $PORT_CLAIMS/BLOCK that the test's shell holds
# (an fd it keeps open; the daemons it starts inherit it) until it and they
# exit, when the kernel lets go of it: two tests beside each other (make
# -j2) that both find a range free cannot both take it. One directory a user.
PORT_CLAIMS=${TMPDIR:-/tmp}/lockstep-test-ports.$(id -u)
# port_claim BLOCK: 0 when this shell now holds BLOCK.
port_claim() {
	local fd
	mkdir -p "$PORT_CLAIMS" 2>/dev/null
	exec {fd}>>"$PORT_CLAIMS/$1" || return 1
	if flock -n "$fd"; then
		return 0
	fi
	exec {fd}>&-
	return 1
}

# free_port_base: PORT_BASE, the first of 400 ports no socket on this host
# uses and no other running test has claimed (port_claim). In the test's
# own shell, not in $(...): the claim would end with the subshell.
# P..P+399 must be free for TCP and UDP (a cluster uses up to P+300+M with
# --receivers M). Below the kernel's ephemeral range where it leaves room
# (10000 up to it), so that a socket bound to "any port" (the daemons'
# request sockets, other tests' clients) cannot take a port of the cluster
# between the check and the bind: the sequencers of a group start all at
# once.
free_port_base() {
	local used p i lo slots=190 base=100
	[ "$BASHPID" = "$$" ] || fail "free_port_base in a subshell: its claim would end with it"
	used=$(ss -Htuan 2>/dev/null | awk '{print $5}' | sed 's/.*://' | sort -u)
	lo=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 0)
	if [ "${lo:-0}" -ge 20000 ]; then base=50 slots=$((lo / 200 - 2 - 50)); fi
	for i in $(seq 1 50); do
		p=$(( (RANDOM % slots + base) * 200 ))
		if printf '%s\n' "$used" | awk -v lo="$p" -v hi=$((p + 399)) '$1 >= lo && $1 <= hi {f=1} END {exit !f}'; then
			continue
		fi
		port_claim $((p / 200)) && port_claim $((p / 200 + 1)) || continue
		PORT_BASE=$p
		return 0
	done
	fail "no free port range"
}

# Sequencers of the clusters below: 1 (the single node: these tests are
# about one thing each, and read seq-1) unless the test passes --sequencers
# itself; LOCKSTEP_TEST_SEQUENCERS=3 runs them all on a Raft group.
SEQUENCERS=${LOCKSTEP_TEST_SEQUENCERS:-1}

# cluster_up [ops/cluster up options]: a cluster in $T (a new temp dir) on $P.
cluster_up() {
	T=$(tmpdir_new)
	free_port_base
	P=$PORT_BASE
	trap cluster_cleanup EXIT
	if ! "$CLUSTER" up --dir "$T" --port "$P" --sequencers "$SEQUENCERS" "$@" >"$T/up.out" 2>&1; then
		cat "$T/up.out" >&2
		fail "cluster did not come up"
	fi
}

# cluster_key_env [NODE]: KEY (the key file) and CLUSTER_NAME from NODE's
# config (default seq-1), exported with PYTHONPATH for tests/auth.py, so
# that a test's Python can tag what it sends as a member would.
cluster_key_env() {
	local f=$T/${1:-seq-1}.conf
	KEY=$(sed -n 's/^key_file = //p' "$f")
	CLUSTER_NAME=$(sed -n 's/^cluster = //p' "$f")
	[ -r "$KEY" ] && [ -n "$CLUSTER_NAME" ] || fail "no key_file or cluster in $f"
	export PYTHONPATH="$top_srcdir/tests${PYTHONPATH:+:$PYTHONPATH}" KEY CLUSTER_NAME
}

# Processes a test starts beside the cluster (bg_start): ended before it.
EXTRA_PIDS=()

cluster_cleanup() {
	local rc=$? p
	for p in "${EXTRA_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -n "${T:-}" ] || return
	"$CLUSTER" down --dir "$T" >/dev/null 2>&1 || true
	if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
		dump_logs 30 "$T"/*.log "$T"/bench*.out
	fi
	rm -rf "$T"
	exit $rc
}

# bg_start LOG COMMAND...: COMMAND in the background, its output in LOG,
# ended when the test ends; its PID in BG_PID.
bg_start() {
	local log=$1
	shift
	"$@" >"$log" 2>&1 &
	BG_PID=$!
	EXTRA_PIDS+=("$BG_PID")
}

# client SCRIPT_TEXT: runs a lockstep-client script against gateway 1; fails
# the test when any expect line fails.
client() {
	local f
	f=$(mktemp "$T/script.XXXXXX")
	cat >"$f"
	if ! "$CLIENT" --connect "127.0.0.1:$P" --timeout 5000 --script "$f" >"$f.out" 2>&1; then
		cat "$f.out" >&2
		fail "client script failed: $(head -c 60 "$f" | head -1)..."
	fi
}

# node_ctl NODE COMMAND...: lockstepctl COMMAND to the node NODE of $T.
node_ctl() { "$CTL" --socket "$T/$1/$1.ctl" "${@:2}"; }
# poll_ctl NODE COMMAND...: node_ctl for the readings below, which tests
# poll: without LeakSanitizer's scan at exit under ASan (no_leak_scan).
poll_ctl() { no_leak_scan node_ctl "$@"; }

# status_field NODE FIELD: one field of a node's status (JSON).
status_field() {
	poll_ctl "$1" status --json |
		python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"
}
# status_get NODE KEY: one scalar of NODE's status ("" when it does not
# answer); sed, not status_field's python, which a loaded machine starts
# slowly.
status_get() {
	{ poll_ctl "$1" status --json 2>/dev/null || true; } |
		sed -n "s/.*\"$2\": \"\{0,1\}\([^,\"}]*\).*/\1/p"
}

# stat_get NODE NAME: one counter of NODE's STATS ("" when it has none).
stat_get() { poll_ctl "$1" stats | awk -v k="$2" '$1 == k { print $2 }'; }

# seq_hash_state NODE: "SEQ HASH STATE" of a matcher from one STATUS, so
# that the three belong together (the tape moves on while a test reads:
# time events on an idle tape, [sequencer] time_event).
seq_hash_state() {
	local j
	j=$(poll_ctl "$1" status --json 2>/dev/null || true)
	printf '%s %s %s\n' "$(sed -n 's/.*"seq": \([0-9]*\).*/\1/p' <<<"$j")" \
		"$(sed -n 's/.*"hash": "\{0,1\}\([^,"}]*\).*/\1/p' <<<"$j")" \
		"$(sed -n 's/.*"state": "\([^"]*\)".*/\1/p' <<<"$j")"
}
# seq_hash_states NODE...: seq_hash_state of each NODE, a line each in the
# order given, every NODE asked at once: one after the other, on a loaded
# machine, the readings of two replicas are often a time event apart.
seq_hash_states() {
	local d n i=0 p pids=()
	d=$(mktemp -d "$T/states.XXXXXX")
	for n in "$@"; do
		poll_ctl "$n" status --json >"$d/$i" 2>/dev/null &
		pids+=($!)
		i=$((i + 1))
	done
	for p in "${pids[@]}"; do wait "$p" || true; done
	for ((i = 0; i < $#; i++)); do
		printf '%s %s %s\n' "$(sed -n 's/.*"seq": \([0-9]*\).*/\1/p' "$d/$i")" \
			"$(sed -n 's/.*"hash": "\{0,1\}\([^,"}]*\).*/\1/p' "$d/$i")" \
			"$(sed -n 's/.*"state": "\([^"]*\)".*/\1/p' "$d/$i")"
	done
	rm -rf "$d"
}

# same_state NODE...: 0 when the matchers NODE... are all live at one seq
# with one hash, SEQ and HASH set to them; 1 while they are not (yet) at
# one seq: an idle tape moves on between two reads (time events,
# [sequencer] time_event), so only readings at an equal seq compare. Fails
# the test when they are at one seq with different hashes. Each NODE's seq,
# hash and state come from one STATUS, all asked at once.
same_state() {
	local n x s= h= i=0 lines
	mapfile -t lines < <(seq_hash_states "$@")
	for n in "$@"; do
		read -r -a x <<<"${lines[i]:-}"
		i=$((i + 1))
		[ -n "${x[0]:-}" ] && [ -n "${x[1]:-}" ] && [ "${x[2]:-}" = live ] || return 1
		if [ -z "$s" ]; then
			s=${x[0]} h=${x[1]}
		elif [ "${x[0]}" != "$s" ]; then
			return 1
		elif [ "${x[1]}" != "$h" ]; then
			fail "$n's hash ${x[1]} differs from $1's $h at seq $s"
		fi
	done
	SEQ=$s HASH=$h
}
# wait_same SECONDS NODE...: until same_state NODE... (polled); fails the
# test with each NODE's last reading when they are not live at one seq
# within SECONDS. Sets SEQ and HASH.
wait_same() {
	local end=$((SECONDS + $1)) n
	shift
	until same_state "$@"; do
		if [ $SECONDS -ge $end ]; then
			for n in "$@"; do echo "$n: seq hash state $(seq_hash_state "$n")" >&2; done
			fail "$* not live at one seq within the time allowed"
		fi
		sleep 0.1
	done
}

# agree A B: replicas A and B live at one seq with one hash (wait_same, 15 s).
agree() { wait_same 15 "$1" "$2"; }

# snapshot_now NODE: asks the matcher NODE for a snapshot and waits until it
# is written (bounded); sets SNAP_SEQ to its tape seq (the one the reply
# names: the tape may have moved on by the next STATUS).
snapshot_now() {
	local r
	r=$(node_ctl "$1" snapshot) || fail "$1: lockstepctl snapshot: $r"
	SNAP_SEQ=$(sed -n 's/^snapshot of tape seq \([0-9]*\) .*/\1/p' <<<"$r")
	[ -n "$SNAP_SEQ" ] || fail "$1: lockstepctl snapshot: $r"
	# written: its log says so (STATUS's snapshot_seq may already name a
	# periodic one the tape reached a moment later)
	for _ in $(seq 1 100); do
		grep -q "snapshot at tape seq $SNAP_SEQ written" "$T/$1.log" 2>/dev/null && return 0
		sleep 0.1
	done
	fail "$1: requested snapshot at $SNAP_SEQ not written"
}

# no_losses BENCH_JSON: every order of a lockstep-bench --json run was
# answered, and no daemon of --cluster lost a datagram in a kernel buffer
# or failed a send (its daemon_losses; kernel_rcvbuf_errors is the whole
# machine's, other tests' included, and is not counted).
no_losses() {
	python3 - "$1" <<'PY' || fail "$1: $(cat "$1")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["unanswered"] == 0, d
for node, counters in d["daemon_losses"].items():
    assert counters is not None, f"{node} did not answer"
    for name, v in counters.items():
        assert name == "kernel_rcvbuf_errors" or v == 0, f"{node}: {name} {v}"
PY
}

# primary_node [SECONDS]: the name of the primary sequencer (ops/cluster
# primary); fails the test when there is none within SECONDS (default 10).
primary_node() {
	local end=$((SECONDS + ${1:-10})) p
	while :; do
		p=$("$CLUSTER" primary --dir "$T" 2>/dev/null) && { echo "$p"; return 0; }
		[ $SECONDS -lt $end ] || fail "no primary sequencer after ${1:-10} s"
		sleep 0.1
	done
}

# ---- Multi-host tests (tests/netlab_*.sh): a cluster across the network
# namespaces of ops/netlab, one node per host (ops/cluster --netlab).
NETLAB=$top_srcdir/ops/netlab

# netlab_cluster_up HOSTS [ops/cluster up options]: skips (77) where this
# machine cannot make a netlab; else a netlab of HOSTS hosts named $L (HOSTS
# counted with one sequencer: one more host per extra one of $SEQUENCERS), a
# cluster in $T on it, and GW = gateway 1's OUCH address. Everything is
# deleted on exit, whatever happens.
netlab_cluster_up() {
	local hosts=$(($1 + SEQUENCERS - 1)) why
	shift
	why=$("$NETLAB" check 2>&1) || skip "no netlab on this machine: ${why:-netlab check failed}"
	L=lst$$
	T=$(tmpdir_new)
	P=15000 # the hosts' ports are their own: nothing else runs there
	trap netlab_cleanup EXIT
	trap 'exit 143' TERM INT
	"$NETLAB" --name "$L" up "$hosts" >"$T/netlab.out" 2>&1 || { cat "$T/netlab.out" >&2; fail "netlab did not come up"; }
	if ! "$CLUSTER" up --netlab="$L" --dir "$T" --port "$P" --sequencers "$SEQUENCERS" "$@" >"$T/up.out" 2>&1; then
		cat "$T/up.out" >&2
		fail "cluster did not come up on the netlab"
	fi
	GW=$(sed -n 's/^gw-1: OUCH on //p' "$T/up.out")
	[ -n "$GW" ] || fail "no gateway address in: $(cat "$T/up.out")"
}

netlab_cleanup() {
	local rc=$?
	trap - TERM INT
	[ -n "${T:-}" ] || exit $rc
	if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
		"$NETLAB" --name "$L" status >&2 2>/dev/null || true
		"$CLUSTER" status --dir "$T" >&2 2>/dev/null || true
	fi
	"$CLUSTER" down --dir "$T" >/dev/null 2>&1 || true
	"$NETLAB" --name "$L" down --kill >/dev/null 2>&1 || echo "netlab $L: down failed" >&2
	if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
		dump_logs 30 "$T"/*.log "$T"/bench*.out
	fi
	rm -rf "$T"
	exit $rc
}

# on_host HOST CMD...: runs CMD on a netlab host (h1 is the clients').
on_host() { "$NETLAB" --name "$L" exec "$@"; }
# bench SECONDS BENCH_OPTIONS...: lockstep-bench on h1 against gateway 1,
# killed after SECONDS (a closed-loop bench waits for answers forever).
bench() {
	local limit=$1
	shift
	timeout -k 5 "$limit" "$NETLAB" --name "$L" exec h1 "$top_builddir/lockstep-bench" --connect "$GW" "$@"
}

# wait_agree SECONDS [NODE...]: until the matchers NODE... (default: every
# matcher) have applied everything the sequencer (the primary of a group)
# had committed when read, and are all live at one seq with one hash
# (same_state: the tape moves on while we read, time events on an idle
# tape). Sets SEQ and HASH.
wait_agree() {
	local limit=$1 end=$((SECONDS + $1)) s= ms
	shift
	ms=$*
	[ -n "$ms" ] || ms=$(cd "$T" && ls matcher-*.conf | sed 's/\.conf$//' | paste -sd' ')
	while :; do
		[ -n "$s" ] || s=$(status_get "$(primary_node "$limit")" commit)
		# shellcheck disable=SC2086 # $ms: the matchers' names
		[ -n "$s" ] && same_state $ms && [ "$SEQ" -ge "$s" ] && break
		[ $SECONDS -lt $end ] || { "$CLUSTER" status --dir "$T" >&2; fail "$ms: not live at one seq at or past the sequencer's commit ${s:-?} after $limit s"; }
		sleep 0.2
	done
}

# netlab_report: the packets the netlab dropped and what the daemons did
# about them (requests sent, requests served, blocks sent again), as one
# "info:" line; never fails the test.
netlab_report() {
	local n f=$T/stats.json
	{
		echo "{"
		for n in $(cd "$T" && ls seq-*.conf matcher-*.conf gw-*.conf | sed 's/\.conf$//'); do
			echo "\"$n\": $(node_ctl "$n" stats --json 2>/dev/null || echo '{}'),"
		done
		echo "\"drops\": [$("$NETLAB" --name "$L" status |
			sed -n 's/.*dropped in \([0-9]*\) out \([0-9]*\).*/[\1, \2]/p' | paste -sd,)]}"
	} >"$f"
	python3 - "$f" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
c = lambda n, k: d.get(n, {}).get("counters", {}).get(k, 0)
nodes = [n for n in d if n != "drops"]
drops = sum(i + o for i, o in d["drops"])
sent = sum(c(n, k) for n in nodes for k in ("gap_requests_sent", "retrans_requests_sent", "tape_requests", "exec_requests"))
served = sum(c(n, k) for n in nodes for k in ("retrans_requests", "exec_requests_served"))
blocks = sum(c(n, k) for n in nodes for k in ("retrans_blocks_sent", "retrans_served", "cmds_resent", "exec_blocks_resent"))
per = lambda x: "%.2f" % (x / drops) if drops else "-"
print("info: %d UDP packets dropped by the netlab; %d gap requests sent (%s per lost packet), %d served (%s), %d blocks sent again (%s)"
      % (drops, sent, per(sent), served, per(served), blocks, per(blocks)))
for n in sorted(nodes):
    keys = [k for k in ("gaps", "gap_requests_sent", "retrans_requests", "retrans_packets_sent", "retrans_blocks_sent",
                        "tape_gaps", "retrans_requests_sent", "exec_requests_served", "exec_blocks_resent",
                        "tape_requests", "exec_requests", "exec_gaps", "retrans_served", "cmds_resent", "duplicates",
                        "tape_duplicates", "exec_dups", "rxq_dropped") if k in d[n].get("counters", {})]
    print("info:   %-10s %s" % (n, " ".join("%s=%d" % (k, c(n, k)) for k in keys)))
PY
}

# ctl_seq NODE: the node's seq (cheaper than status_field, for polling).
ctl_seq() { poll_ctl "$1" status 2>/dev/null | sed -n 's/.* seq=\([0-9]*\).*/\1/p'; }
# ctl_counter NODE NAME: one of the node's counters.
ctl_counter() { poll_ctl "$1" stats 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }'; }
# ms_now: monotonic-enough milliseconds for reporting (never asserted).
ms_now() { echo $(($(date +%s%N) / 1000000)); }

# run_drill SECONDS NAME [OPTIONS...]: ops/drill NAME on ports of its own in
# $T/NAME, its output in $T/NAME.out, killed after SECONDS (0: never);
# fails the test, with the output and the sequencers' logs, unless the
# drill passes.
run_drill() {
	local limit=$1 d=$2 o=$T/$2.out
	shift 2
	free_port_base
	if ! timeout -k 10 "$limit" "$top_srcdir/ops/drill" "$d" "$@" --dir "$T/$d" \
		--port "$PORT_BASE" >"$o" 2>&1; then
		cat "$o"
		dump_logs 20 "$T/$d"/seq-*.log
		fail "drill $d $*"
	fi
}

# ---- Power cuts without a power cut (tests/powercut.c). A node "armed"
# runs under tests/libpowercut.so, which keeps in $T/powercut/NODE what its
# state directory $T/NODE would hold after a power cut at any moment
# (strict POSIX: contents synced by fsync/fdatasync, names only once their
# directory is fsynced); powercut_cut kills it with SIGKILL and puts that
# image in place. E.g.
#	cluster_up
#	powercut_arm seq-1
#	... orders acknowledged ...
#	powercut_cut seq-1
#	"$CLUSTER" start seq-1 --dir "$T"   # still armed: a fresh snapshot
#	... what was acknowledged is still there ...
POWERCUT_LIB=$top_builddir/tests/libpowercut.so
POWERCUT_RESTORE=$top_srcdir/tests/powercut_restore

. "$top_srcdir/ops/lib/powercut.sh"

# powercut_arm NODE...: stops the NODEs that run (cleanly: ops/cluster
# stop), and starts them all again under the shim, through $T/NODE.env
# (ops/cluster), with a new model: at its start the shim takes everything
# in $T/NODE as durable. The NODEs stay armed, through later starts, until
# powercut_disarm.
powercut_arm() {
	local n p up=()
	[ -x "$POWERCUT_LIB" ] || fail "$POWERCUT_LIB not built"
	for n in "$@"; do
		[ -f "$T/$n.conf" ] || fail "powercut_arm: no node $n in $T"
		p=$(cat "$T/$n.pid" 2>/dev/null || true)
		if [ -n "$p" ] && pc_pid_running "$p"; then up+=("$n"); fi
	done
	[ ${#up[@]} -eq 0 ] || "$CLUSTER" stop "${up[@]}" --dir "$T" >/dev/null ||
		fail "powercut_arm: ops/cluster stop ${up[*]}"
	for n in "$@"; do pc_env "$T" "$n" "$POWERCUT_LIB"; done
	"$CLUSTER" start "$@" --dir "$T" >/dev/null || fail "powercut_arm: $* did not start under the shim"
	for n in "$@"; do
		[ -f "$T/powercut/$n/root" ] || fail "powercut_arm: $n runs without a model in $T/powercut/$n"
	done
}

# powercut_cut NODE...: the power cut: SIGKILL to every NODE at once (each
# must be armed and running), then, once all are dead, each one's state
# directory replaced by its durable image (tests/powercut_restore). The
# NODEs are left stopped; started again, they run armed, from a fresh
# snapshot of the restored directory.
powercut_cut() {
	local why
	why=$(pc_kill "$T" "$@" 2>&1) || fail "powercut_cut: $why"
	why=$(pc_restore "$T" "$POWERCUT_RESTORE" "$@" 2>&1) || fail "powercut_cut: $why"
}

# powercut_disarm NODE...: the NODEs start without the shim from now on;
# one running keeps it, and its model in $T/powercut/NODE, until it stops.
powercut_disarm() {
	local n
	for n in "$@"; do rm -f "$T/$n.env"; done
}
