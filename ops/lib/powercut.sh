# ops/lib/powercut.sh: power cuts without a power cut on a cluster of
# ops/cluster (tests/powercut.c is the model: a node started with
# tests/libpowercut.so preloaded keeps in DIR/powercut/NODE what strict POSIX
# would leave on its disk; a cut is a SIGKILL and that image put in place
# by tests/powercut_restore). Shared by tests/lib.sh and ops/drill power-cut.
# shellcheck shell=bash

# pc_pid_running PID: the process exists and is not a zombie (a zombie's
# files are closed, all its writes done).
pc_pid_running() { [ -d "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }

# pc_env DIR NODE LIB: from its next start NODE runs under the shim LIB
# (DIR/NODE.env, which ops/cluster start reads), with a new, empty model:
# at its start the shim takes everything in DIR/NODE as durable. A
# sanitized binary refuses a library loaded before its runtime unless told
# (the shim is built without sanitizers).
pc_env() {
	rm -rf "${1:?}/powercut/$2"
	mkdir -p "$1/powercut"
	printf '%s\n' "# ops/lib/powercut.sh" "LD_PRELOAD=$3" "POWERCUT_ROOT=$1/$2" \
		"POWERCUT_SHADOW=$1/powercut/$2" \
		"ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" >"$1/$2.env"
}

# pc_kill DIR NODE...: SIGKILL to every NODE at once (each armed and
# running), then waits until all are dead (5 s each). 0, or 1 with the
# reason on stderr.
pc_kill() {
	local dir=$1 n p pids=()
	shift
	for n in "$@"; do
		[ -f "$dir/$n.env" ] || { echo "$n is not armed" >&2; return 1; }
		p=$(cat "$dir/$n.pid" 2>/dev/null || true)
		[ -n "$p" ] && pc_pid_running "$p" || { echo "$n is not running" >&2; return 1; }
		pids+=("$p")
	done
	kill -KILL "${pids[@]}"
	for p in "${pids[@]}"; do
		for _ in $(seq 1 100); do
			pc_pid_running "$p" || break
			sleep 0.05
		done
		! pc_pid_running "$p" || { echo "pid $p still runs 5 s after SIGKILL" >&2; return 1; }
	done
	for n in "$@"; do rm -f "$dir/$n.pid"; done
}

# pc_restore DIR RESTORE NODE...: each NODE's state directory DIR/NODE
# replaced by its durable image (RESTORE: tests/powercut_restore). 0, or 1.
pc_restore() {
	local dir=$1 restore=$2 n
	shift 2
	for n in "$@"; do
		python3 "$restore" "$dir/$n" "$dir/powercut/$n" || { echo "$n: powercut_restore failed" >&2; return 1; }
	done
}
