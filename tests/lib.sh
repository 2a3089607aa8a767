# Helpers for the integration tests: each test runs a real cluster of the real
# daemons on loopback, in a private directory with ports nobody else uses.
# shellcheck shell=bash
set -euo pipefail

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir/_build/check}
export LOCKSTEP_BIN=$top_builddir
CLUSTER=$top_srcdir/ops/cluster
CLIENT=$top_builddir/lockstep-client
CTL=$top_builddir/lockstepctl

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# A port base P such that P..P+199 are free for TCP and UDP.
free_port_base() {
	local used p i
	used=$(ss -Htuan 2>/dev/null | awk '{print $5}' | sed 's/.*://' | sort -u)
	for i in $(seq 1 50); do
		p=$(( (RANDOM % 190 + 100) * 200 ))
		if ! printf '%s\n' "$used" | awk -v lo="$p" -v hi=$((p + 199)) '$1 >= lo && $1 <= hi {f=1} END {exit !f}'; then
			echo "$p"
			return 0
		fi
	done
	fail "no free port range"
}

# cluster_up [ops/cluster up options]: a cluster in $T (a new temp dir) on $P.
cluster_up() {
	T=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-test.XXXXXX")
	P=$(free_port_base)
	trap cluster_cleanup EXIT
	if ! "$CLUSTER" up --dir "$T" --port "$P" "$@" >"$T/up.out" 2>&1; then
		cat "$T/up.out" >&2
		fail "cluster did not come up"
	fi
}

cluster_cleanup() {
	local rc=$?
	[ -n "${T:-}" ] || return
	"$CLUSTER" down --dir "$T" >/dev/null 2>&1 || true
	if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
		for f in "$T"/*.log; do
			[ -e "$f" ] || continue
			echo "----- $f (last 30 lines)" >&2
			tail -n 30 "$f" >&2
		done
	fi
	rm -rf "$T"
	exit $rc
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

# status_field NODE FIELD: one field of a node's status (JSON).
status_field() {
	"$CTL" --socket "$T/$1/$1.ctl" status --json |
		python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"
}
