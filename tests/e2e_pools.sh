#!/usr/bin/env bash
# A day longer than the matcher's pools (issue 14): with max_orders 1024 and
# max_tokens 2048, a cluster takes several times as many tokens as its table
# holds, every order answered and none rejected; the matchers forget the
# oldest dead tokens (tokens_forgotten), show how full each pool is in
# STATUS, agree on their state hash, and a replica restarted from a
# snapshot taken mid-forgetting agrees again after more traffic. A config
# whose token table cannot outnumber its orders is refused with a reason.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench lockstep-matcher lockstepctl

# --check-config says why max_tokens <= max_orders cannot work (a config of
# its own: with a cluster key, which --check-config reads)
cfg=$(tmpdir_new)
"$CTL" keygen "$cfg/cluster.key" >/dev/null || fail "lockstepctl keygen"
cat >"$cfg/m.conf" <<EOF
[node]
name = m
key_file = $cfg/cluster.key
[matcher]
tape_group = 239.1.1.1:9
tape_retrans = 127.0.0.1:9
exec_group = 239.1.1.2:9
exec_retrans = 127.0.0.1:9
max_orders = 4096
max_tokens = 4096
EOF
out=$("$top_builddir/lockstep-matcher" --check-config --config "$cfg/m.conf" 2>&1) &&
	fail "max_tokens = max_orders was taken: $out"
echo "$out" | grep -q 'max_tokens (4096) must be above max_orders (4096)' || fail "no reason given: $out"
sed -i 's/^max_tokens = 4096/max_tokens = 4097/' "$cfg/m.conf"
out=$("$top_builddir/lockstep-matcher" --check-config --config "$cfg/m.conf" 2>&1) || fail "a good config refused: $out"
rm -rf "$cfg"

cluster_up --set matcher.max_orders=1024 --set matcher.max_tokens=2048 \
	--set matcher.snapshot_interval=4000

# run_bench ORDERS WHAT: 3 sessions, ORDERS each, at most 100 resting per
# session (300 a run, 600 in all: < 1024), every one answered and none
# rejected
run_bench() {
	"$BENCH" --connect "127.0.0.1:$P" --sessions 3 --orders "$1" --window 8 --depth 100 \
		--json "$T/bench.json" --timeout 30 >"$T/bench.out" 2>&1 ||
		{ cat "$T/bench.out"; fail "bench ($2): $(tail -1 "$T/bench.out")"; }
	python3 - "$T/bench.json" <<'PY' || fail "bench ($2): $(cat "$T/bench.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["unanswered"] == 0 and d["rejected"] == 0, d
PY
}

run_bench 3000 first
agree matcher-1 matcher-2
forgotten=$(stat_get matcher-1 tokens_forgotten)
[ "${forgotten:-0}" -gt 3000 ] || fail "matcher-1 forgot ${forgotten:-no} tokens, want > 3000"
tokens=$(stat_get matcher-1 tokens)
[ "${tokens:-0}" -le 2048 ] && [ "${tokens:-0}" -gt 1024 ] || fail "matcher-1 holds ${tokens:-no} tokens (max 2048)"
node_ctl matcher-1 status | grep -Eq ' pools: orders [0-9]+/1024 \([0-9.]+%\), tokens [0-9]+/2048 \([0-9.]+%\), levels [0-9]+/[0-9]+ ' ||
	fail "no pools in: $(node_ctl matcher-1 status)"
node_ctl matcher-1 status --json | python3 -c '
import json, sys
p = json.load(sys.stdin)["pools"]
assert p["orders"]["size"] == 1024 and p["tokens"]["size"] == 2048, p
assert 1024 < p["tokens"]["used"] <= 2048 and p["users"]["used"] == 3, p' ||
	fail "status --json pools: $(node_ctl matcher-1 status --json)"
node_ctl gw-1 status | grep -Eq ' pools: sessions [0-9]+/1024 ' || fail "gateway pools: $(node_ctl gw-1 status)"

# a snapshot now, while the table forgets; the replica restarts from it,
# misses traffic, catches up and agrees
snapshot_now matcher-2
want=$SNAP_SEQ
"$CLUSTER" kill matcher-2 --dir "$T" >/dev/null
"$CLUSTER" start matcher-2 --dir "$T" >/dev/null
grep -q "loaded snapshot .*snap-0*$want.lss" "$T/matcher-2.log" || fail "matcher-2 did not load snapshot $want"
run_bench 1500 "after the restart"
agree matcher-1 matcher-2
[ "$(stat_get matcher-1 tokens_forgotten)" = "$(stat_get matcher-2 tokens_forgotten)" ] ||
	fail "tokens_forgotten: $(stat_get matcher-1 tokens_forgotten) vs $(stat_get matcher-2 tokens_forgotten)"
info "$(node_ctl matcher-1 status)"
echo "ok: $(stat_get matcher-1 tokens_forgotten) tokens forgotten through a table of 2048, none rejected; the restored replica agrees"
