#!/usr/bin/env bash
# A key rotation under load loses and doubles nothing. A group of 3
# sequencers, a gateway and 2 matchers carry a bounded open-loop load
# (lockstep-bench, 2 sessions, --check-matches) while the cluster key is
# rotated as an operator would: `lockstepctl keygen --add` and a reload of
# every node; `keygen --send 2` and a reload of every node, one after the
# other with pauses (so for a while some nodes tag with key 2 and others
# still with key 1: harmless, since each accepts both until the removal);
# then, once every node counts datagrams under key 2 (auth_rx_key_2 grows)
# and none any more under key 1 (auth_rx_key_1 stands still), `keygen
# --remove 1` and a reload of every node, the bench still running. After
# the bench: every order answered and both sides of every match agree (its
# exit status, no_losses on its JSON: no daemon lost or failed to send a
# datagram), no node dropped a datagram for its tag (auth_dropped_*
# unchanged from before the rotation), the matchers agree, and every node's
# STATUS says it tags with key 2 and accepts only key 2. Exactly once: the
# primary's journal (lockstep-replay verify, then dump --json) holds every
# (gateway, gateway seq) at most once, and as many commands as the bench
# sent orders. The bench's --duration is an upper bound: SIGUSR1 ends
# its sending once the rotation is done, however slow the machine.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench lockstep-replay lockstepctl
SEQUENCERS=3
cluster_up
KEY=$T/cluster.key
[ "$(sed -n 's/^key_file = //p' "$T/seq-1.conf")" = "$KEY" ] || fail "seq-1.conf does not name $KEY"
NODES=(seq-1 seq-2 seq-3 matcher-1 matcher-2 gw-1)

# reload_all NODE...: RELOAD each NODE, 0.3 s apart (nodes change keys at
# different moments, as when an operator goes from host to host).
reload_all() {
	local n out
	for n in "$@"; do
		out=$(node_ctl "$n" reload 2>&1) || fail "$n: reload: $out"
		sleep 0.3
	done
}
# keygen ARGS...: lockstepctl keygen ARGS... $KEY, its line in the test's log.
keygen() {
	local out
	out=$("$CTL" keygen "$@" "$KEY" 2>&1) || fail "keygen $*: $out"
	info "$out"
}
# rx_keys ID: "NODE COUNT" for each node's auth_rx_key_ID.
rx_keys() {
	local n
	for n in "${NODES[@]}"; do echo "$n $(stat_get "$n" "auth_rx_key_$1")"; done
}
# drops: every node's auth_dropped_* counters (per surface and per source).
drops() {
	local n
	for n in "${NODES[@]}"; do node_ctl "$n" stats | awk -v n="$n" '$1 ~ /^auth_dropped_/ { print n, $1, $2 }'; done
}
bench_running() { [ ! -e "$T/bench.json" ] && kill -0 "$BENCH_PID" 2>/dev/null; }
# auth_of NODE: its STATUS's auth text (status_get stops at a comma).
auth_of() { node_ctl "$1" status --json | sed -n 's/.*"auth": "\([^"]*\)".*/\1/p'; }

drops >"$T/drops.before"
[ "$(grep -c ' auth_dropped_[a-z]* 0$' "$T/drops.before")" -ge 36 ] || fail "auth_dropped_* counters before: $(cat "$T/drops.before")"
seq0=$(stat_get "$(primary_node)" commands_sequenced)
bg_start "$T/bench.out" timeout -k 5 150 "$BENCH" --connect "127.0.0.1:$P" --sessions 2 \
	--rate 2000 --duration 90 --timeout 20 --seed 7 --check-matches --cluster "$T" --json "$T/bench.json"
BENCH_PID=$BG_PID
# the load flows before the rotation starts
flowing() { [ "$(stat_get "$(primary_node)" commands_sequenced)" -gt $((seq0 + 500)) ]; } # orders, not time events
wait_for 15 "orders flowing" flowing

# 1. a second key, accepted everywhere; key 1 still the one sent with
keygen --add
grep -q '^cluster-key 2 ' "$KEY" && grep -qx 'send 1' "$KEY" || fail "after --add: $(sed 's/[0-9a-f]\{64\}/KEY/' "$KEY")"
reload_all "${NODES[@]}"
for n in "${NODES[@]}"; do
	a=$(auth_of "$n")
	[[ $a == *"tagging with key 1, accepting 1 2)" ]] || fail "$n after --add: auth $a"
done
sleep 1

# 2. tag with key 2: the gateway first, the primary in the middle, a matcher last
keygen --send 2
p=$(primary_node)
order=(gw-1 matcher-2)
for n in seq-1 seq-2 seq-3; do [ "$n" = "$p" ] || order+=("$n"); done
order+=("$p" matcher-1)
reload_all "${order[@]}"
rx_keys 2 >"$T/rx2.after_send"
grows2() {
	local n v
	while read -r n v; do
		[ "$(stat_get "$n" auth_rx_key_2)" -gt "${v:-0}" ] || return 1
	done <"$T/rx2.after_send"
}
wait_for 10 "auth_rx_key_2 growing on every node" grows2
# key 1 no longer used: every node's auth_rx_key_1 still over 1 s (after a settle)
sleep 0.5
key1_still() {
	rx_keys 1 >"$T/rx1.a"
	sleep 1
	rx_keys 1 >"$T/rx1.b"
	cmp -s "$T/rx1.a" "$T/rx1.b"
}
try_for 10 key1_still || fail "auth_rx_key_1 still growing: $(paste "$T/rx1.a" "$T/rx1.b")"
info "key 1 no longer used: $(paste -sd' ' "$T/rx1.b")"
info "key 2 in use: $(rx_keys 2 | paste -sd' ')"
bench_running || fail "the bench ended before key 1 was removed (a slow machine?): the rotation was not under load"

# 3. key 1 gone
keygen --remove 1
grep -q '^cluster-key 1 ' "$KEY" && fail "key 1 still in $KEY"
reload_all "${NODES[@]}"
bench_running || fail "the bench ended before every node had reloaded without key 1"
info "key 1 removed on every node with the bench still running"
# a thousand orders under key 2 alone (commands, not time events)
seq2=$(stat_get "$(primary_node)" commands_sequenced)
key2_alone() { [ "$(stat_get "$(primary_node)" commands_sequenced)" -gt $((seq2 + 1000)) ]; }
wait_for 15 "orders under key 2 alone" key2_alone
pkill -USR1 -P "$BENCH_PID" || fail "no lockstep-bench under $BENCH_PID to end"

# ---- after the bench
rc=0
wait "$BENCH_PID" || rc=$?
[ $rc -eq 0 ] || { cat "$T/bench.out"; fail "bench: exit $rc (an order unanswered, or a match's sides disagree)"; }
no_losses "$T/bench.json"
drops >"$T/drops.after"
diff "$T/drops.before" "$T/drops.after" >&2 || fail "datagrams dropped for their tag during the rotation"
agree matcher-1 matcher-2
for n in "${NODES[@]}"; do
	a=$(auth_of "$n")
	[[ $a == "on (cluster "*", tagging with key 2, accepting 2)" ]] || fail "$n at the end: auth $a"
	[ -z "$(stat_get "$n" auth_rx_key_1)" ] || fail "$n still counts key 1"
done
info "every node tags with key 2 and accepts only key 2"

# exactly once: the primary's journal, the cluster stopped
p=$(primary_node)
sent=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(d["sent"].values()))' "$T/bench.json")
"$CLUSTER" down --dir "$T" >/dev/null
"$REPLAY" verify "$T/$p/journal" >"$T/verify.out" 2>&1 || { cat "$T/verify.out"; fail "verify $p's journal"; }
"$REPLAY" dump "$T/$p/journal" --json >"$T/dump.json" || fail "dump $p's journal"
python3 - "$T/dump.json" "$sent" <<'PY' || fail "$p's journal: a command twice, or not the bench's orders"
import collections, json, sys
seen = collections.Counter()
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("type") in ("term_start", "empty"):
        continue
    seen[(e["origin"], e["origin_seq"])] += 1
dup = [k for k, n in seen.items() if n > 1]
assert not dup, "sequenced more than once: %r" % dup[:10]
assert len(seen) == int(sys.argv[2]), "%d commands in the journal, the bench sent %s orders" % (len(seen), sys.argv[2])
print("info: %d commands, each (gateway, gateway seq) once" % len(seen))
PY
echo "ok: key 1 -> 2 rotated under load: $sent orders, every one answered once, no datagram dropped, matchers agree"
