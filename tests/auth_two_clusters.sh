#!/usr/bin/env bash
# Two clusters on one host with the same multicast groups and group ports
# run side by side under load, and neither sees the other's orders. Cluster
# B's tape and execution groups (and so its checkpoint group: the execution
# group's address + 1 on its port) are set to exactly cluster A's with
# ops/cluster up --set, in every node's config; only the unicast ports
# differ (one host cannot share those). Three variants, each with two fresh
# clusters: B under another cluster name and its own key; B under another
# name but A's very key file (the name alone keeps them apart); B under A's
# name but its own key (the key alone keeps them apart). In each, a bounded
# open-loop load runs through both at once (two lockstep-bench, different
# seeds, --check-matches). Then, for each cluster: every order answered and
# no daemon lost a datagram (no_losses), both matchers agree and stand at
# their own sequencer's seq, the sequencer sequenced exactly the commands
# its own bench sent (commands_sequenced: none of the other's got in), and
# every matcher and gateway dropped datagrams of the other cluster on each
# shared group it listens to (auth_dropped_tape and _votes on the matchers,
# _tape and _exec on the gateway: the groups really were shared; the
# sequencers join no group, so they have nothing to drop). Last, A's and
# B's matcher hashes differ (their loads did). Under ASan, samekey alone:
# the name and the key both go into the tag's key (common/auth.h), so the
# three variants take one code path, a tag that does not verify.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench lockstepctl
ORDERS=1200 # per bench session, two sessions a bench, at RATE orders/s a bench
RATE=1000

ROOT=$(tmpdir_new lockstep-2clusters)
DIRS=()
cleanup() {
	local rc=$? p d
	for p in "${EXTRA_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for d in "${DIRS[@]}"; do "$CLUSTER" down --dir "$d" >/dev/null 2>&1 || true; done
	if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
		for d in "${DIRS[@]}"; do dump_logs 30 "$d"/*.log "$d"/bench.out; done
	fi
	rm -rf "$ROOT"
	exit $rc
}
trap cleanup EXIT

# at DIR COMMAND...: COMMAND with lib.sh's helpers pointed at the cluster in DIR.
at() {
	local T=$1
	"${@:2}"
}
# up DIR PORT [ops/cluster up options]: a cluster in DIR on ports from PORT.
up() {
	local d=$1 p=$2
	shift 2
	mkdir -p "$d"
	DIRS+=("$d")
	"$CLUSTER" up --dir "$d" --port "$p" --sequencers "$SEQUENCERS" "$@" >"$d/up.out" 2>&1 ||
		{ cat "$d/up.out" >&2; fail "cluster in $d did not come up"; }
}
# groups DIR: every node's multicast group lines, "NODE KEY = VALUE", but
# the public ITCH feed's ([feed] a_group, b_group): plain MoldUDP64 by
# design (issue 18), which no tag tells apart, so two clusters never share
# those.
groups() {
	local f
	for f in "$1"/seq-*.conf "$1"/matcher-*.conf "$1"/gw-*.conf; do
		awk -v n="$(basename "$f" .conf)" '$1 ~ /_group$/ && $1 != "a_group" && $1 != "b_group" { print n, $0 }' "$f"
	done
}
# at_commit SEQ: both matchers of the cluster $T at SEQ.
at_commit() { [ "$(status_get matcher-1 seq)" -ge "$1" ] && [ "$(status_get matcher-2 seq)" -ge "$1" ]; }

# variant LABEL B_OPTIONS...: clusters A (name alpha) and B (B_OPTIONS) up,
# B on A's groups, a load through both, every check.
variant() {
	local label=$1 A=$ROOT/$1-a B=$ROOT/$1-b PA PB tape ex d n v s c pr sent hashes=()
	shift
	free_port_base
	PA=$PORT_BASE
	up "$A" "$PA" --cluster alpha
	free_port_base
	PB=$PORT_BASE
	[ "$PB" != "$PA" ] || fail "the same port base twice"
	tape=239.255.0.1:$((PA + 102)) ex=239.255.0.2:$((PA + 103))
	up "$B" "$PB" "$@" --set "sequencer.tape_group=$tape" --set "matcher.tape_group=$tape" \
		--set "matcher.exec_group=$ex" --set "gateway.tape_group=$tape" --set "gateway.exec_group=$ex"
	groups "$A" >"$ROOT/$label.groups-a"
	groups "$B" >"$ROOT/$label.groups-b"
	grep -q "tape_group = $tape" "$ROOT/$label.groups-a" && grep -q "exec_group = $ex" "$ROOT/$label.groups-a" ||
		fail "$label: A's configs: $(cat "$ROOT/$label.groups-a")"
	diff "$ROOT/$label.groups-a" "$ROOT/$label.groups-b" >&2 || fail "$label: B's groups are not A's"
	! grep -q checkpoint_group "$ROOT/$label.groups-a" || fail "$label: a checkpoint_group set"
	info "$label: A ($(sed -n 's/^cluster = //p' "$A/seq-1.conf"), ports from $PA) and B ($(sed -n 's/^cluster = //p' "$B/seq-1.conf"), ports from $PB, key $(sed -n 's/^key_file = //p' "$B/seq-1.conf")) on tape $tape, executions $ex"

	# the load, through both at once
	for d in "$A" "$B"; do
		pr=$(at "$d" primary_node)
		at "$d" stat_get "$pr" commands_sequenced >"$d/seq0"
	done
	bg_start "$A/bench.out" timeout -k 5 60 "$BENCH" --connect "127.0.0.1:$PA" --sessions 2 \
		--orders $ORDERS --rate $RATE --seed 11 --timeout 20 --check-matches --cluster "$A" --json "$A/bench.json"
	local bench_a=$BG_PID rc_a=0 rc_b=0
	bg_start "$B/bench.out" timeout -k 5 60 "$BENCH" --connect "127.0.0.1:$PB" --sessions 2 \
		--orders $ORDERS --rate $RATE --seed 22 --timeout 20 --check-matches --cluster "$B" --json "$B/bench.json"
	wait "$bench_a" || rc_a=$?
	wait "$BG_PID" || rc_b=$?
	[ $rc_a -eq 0 ] || { cat "$A/bench.out"; fail "$label: A's bench: exit $rc_a"; }
	[ $rc_b -eq 0 ] || { cat "$B/bench.out"; fail "$label: B's bench: exit $rc_b"; }

	for d in "$A" "$B"; do
		n=${d##*-}
		at "$d" no_losses "$d/bench.json"
		sent=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(d["sent"].values()))' "$d/bench.json")
		[ "$sent" -eq $((2 * ORDERS)) ] || fail "$label: $n's bench sent $sent orders, not $((2 * ORDERS))"
		pr=$(at "$d" primary_node)
		v=$(at "$d" stat_get "$pr" commands_sequenced)
		[ $((v - $(cat "$d/seq0"))) -eq "$sent" ] ||
			fail "$label: $n's $pr sequenced $((v - $(cat "$d/seq0"))) commands, its bench sent $sent"
		at "$d" agree matcher-1 matcher-2
		s=$(at "$d" status_get "$pr" commit)
		try_for 10 at "$d" at_commit "$s" ||
			fail "$label: $n's matchers at seq $(at "$d" status_get matcher-1 seq), its sequencer at $s"
		hashes+=("$(at "$d" status_get matcher-1 hash)")
		for v in matcher-1:tape matcher-1:votes matcher-2:tape matcher-2:votes gw-1:tape gw-1:exec; do
			c=$(at "$d" stat_get "${v%:*}" "auth_dropped_${v#*:}")
			[ "${c:-0}" -gt 0 ] || fail "$label: $n's ${v%:*}: auth_dropped_${v#*:} = ${c:-none}: it heard nothing of the other cluster"
		done
		info "$label: $n: $sent orders, all sequenced and answered, matchers agree at seq $s; dropped of the other cluster: $(
			for m in seq-1 matcher-1 matcher-2 gw-1; do
				at "$d" node_ctl "$m" stats | awk -v m="$m" '$1 ~ /^auth_dropped_[a-z]+$/ && $2 > 0 { printf "%s %s=%s ", m, substr($1, 14), $2 }'
			done)"
	done
	[ "${hashes[0]}" != "${hashes[1]}" ] || fail "$label: A's and B's matchers have one hash: ${hashes[0]}"
	for d in "$B" "$A"; do "$CLUSTER" down --dir "$d" >/dev/null; done
}

variant samekey --cluster beta --set "node.key_file=$ROOT/samekey-a/cluster.key"
if asan_build; then
	echo "ok: two clusters on one set of groups and ports kept apart by another name (ASan build:" \
		"the variants another key, and both, take the same code path: the plain build's)"
	exit 0
fi
variant names --cluster beta
variant samename --cluster alpha
echo "ok: two clusters on one set of groups and ports kept apart by another name, another key, or both"
