#!/usr/bin/env bash
# Pre-trade risk end to end, with real daemons: a group of 3 sequencers, a
# gateway and 2 matcher replicas whose [matcher] risk_file gives limits per
# firm and per user and a reference price.
#  1. Every limit rejects with its OUCH reason: max_qty 'm', max_notional
#     'n', the collar 'X', max_open 'q', the firm's credit 'r' (released by
#     a cancel); both replicas count each the same and agree on the hash.
#  2. A limit changed at run time (lockstepctl risk, through the primary)
#     takes effect at one tape position: both replicas log it at the seq
#     the sequencer answered, and the order refused before passes after.
#  3. One user entering orders until its quota (user "*" max_open, set at
#     run time) is hit is rejected 'q'; every other user still trades.
#  4. Under load (lockstep-bench on firm FRMB), the kill switch of firm
#     FRMA with --cancel cancels every open order of FRMA (Canceled 'S'
#     at its sessions) and nothing of FRMB (whose orders stay until their
#     owner cancels them); new FRMA orders are rejected 'a' until --lift;
#     the bench's orders are all answered.
#  5. lockstep-replay dump shows each risk command on the tape, and a
#     rebuild with a replica's configuration reaches the replicas' hash.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench lockstep-replay lockstepctl lockstep-client
SEQUENCERS=3
cluster_up

# The risk file, then the matchers restarted to read it (read at start).
cat >"$T/risk.conf" <<'EOF'
# firm FRMA's logins are TRADR1 and TRADR3, FRMB's TRADR2 (ops/cluster)
firm FRMA credit=1000000
user TRADR1 max_qty=500 max_notional=60000
user TRADR2 collar=5%
user TRADR3 max_open=3
reference AAPL 150
EOF
"$CLUSTER" stop matcher-1 matcher-2 --dir "$T" >/dev/null
for m in matcher-1 matcher-2; do
	sed -i "s|^\[matcher\]$|[matcher]\nrisk_file = $T/risk.conf|" "$T/$m.conf"
done
"$CLUSTER" start matcher-1 matcher-2 --dir "$T" >/dev/null || fail "matchers did not start with the risk file"
grep -q 'risk: 5 entries' "$T/matcher-1.log" || fail "matcher-1 did not read the risk file"
"$top_builddir/lockstep-matcher" --check-config -c "$T/matcher-1.conf" >/dev/null 2>&1 ||
	fail "--check-config refuses a good risk file"
echo "user TRADR9 max_qty=lots" >"$T/bad-risk.conf"
sed "s|^risk_file = .*|risk_file = $T/bad-risk.conf|" "$T/matcher-1.conf" >"$T/bad.conf"
out=$("$top_builddir/lockstep-matcher" --check-config -c "$T/bad.conf" 2>&1) &&
	fail "--check-config took a bad risk file"
grep -q 'bad-risk.conf:1: "max_qty=lots"' <<<"$out" || fail "--check-config: $out"

# 1. each limit with its reason
client <<'S'
connect A TRADR1 pw1 seq 0
connect B TRADR2 pw2 seq 0
connect C TRADR3 pw3 seq 0
A: buy 600 MSFT 50 token Q1
A: expect Rejected token=Q1 reason=m *
A: buy 500 MSFT 50 token Q2
A: expect Accepted token=Q2 *
A: buy 450 MSFT 150 token N1
A: expect Rejected token=N1 reason=n *
B: buy 100 AAPL 158 token X1
B: expect Rejected token=X1 reason=X *
B: sell 100 AAPL 142 token X2
B: expect Rejected token=X2 reason=X *
B: buy 100 AAPL 157 token X3
B: expect Accepted token=X3 *
C: buy 1000 GOOG 50 token O1
C: expect Accepted token=O1 *
C: buy 1000 GOOG 50 token O2
C: expect Accepted token=O2 *
C: buy 1000 GOOG 50 token O3
C: expect Accepted token=O3 *
C: buy 10 GOOG 50 token O4
C: expect Rejected token=O4 reason=q *
# FRMA rests 25,000 (Q2) + 100,000 (O1, O2) once O3 is canceled: 875,000
# of its credit is left, exactly R2
C: cancel O3
C: expect Canceled token=O3 dec=1000 reason=U *
C: buy 17600 META 50 token R1
C: expect Rejected token=R1 reason=r *
C: buy 17500 META 50 token R2
C: expect Accepted token=R2 *
# a fill releases credit: B sells into R2 (META has no reference: no collar)
B: sell 17500 META 50 token R3
B: expect Accepted token=R3 *
C: expect Executed token=R2 17500 @ 50.0000 liq=A *
C: buy 12000 META 50 token R4
C: expect Accepted token=R4 *
S
agree matcher-1 matcher-2
for k in risk_qty risk_notional risk_open risk_credit; do
	for m in matcher-1 matcher-2; do
		[ "$(stat_get $m $k)" = 1 ] || fail "$m: $k $(stat_get $m $k), want 1"
	done
done
for m in matcher-1 matcher-2; do
	[ "$(stat_get $m risk_collar)" = 2 ] || fail "$m: risk_collar $(stat_get $m risk_collar), want 2"
done
info "every limit rejected with its reason, on both replicas alike"

# 2. a limit changed at run time, at one tape position
p=$(primary_node)
out=$(node_ctl "$p" risk user tradr1 max_qty=1000) || fail "lockstepctl risk: $out"
at=$(sed -n 's/.* on the tape at seq \([0-9]*\)$/\1/p' <<<"$out")
[ -n "$at" ] || fail "lockstepctl risk said: $out"
sb=seq-1
[ "$p" != seq-1 ] || sb=seq-2
out=$(node_ctl "$sb" risk user TRADR1 max_qty=1 2>&1) && fail "standby $sb took a risk command: $out"
grep -q "not the primary" <<<"$out" || fail "standby $sb: $out"
out=$(node_ctl "$p" kill-switch user TR-1 2>&1) && fail "the primary took a user no login can be: $out"
grep -q "upper-case letters or digits" <<<"$out" || fail "kill-switch user TR-1: $out"
for m in matcher-1 matcher-2; do
	wait_for 10 "$m applies the change" grep -q "tape seq $at: risk: user TRADR1: max_qty=1000$" "$T/$m.log"
done
client <<'S'
connect A TRADR1 pw1 seq 0
A: buy 600 MSFT 50 token Q3
A: expect Accepted token=Q3 *
S
agree matcher-1 matcher-2
info "max_qty of TRADR1 raised at tape seq $at on both replicas; 600 shares now accepted"

# 3. one user's quota hit, the others still trade
out=$(node_ctl "$p" risk user '*' max_open=20) || fail "lockstepctl risk user *: $out"
{
	echo "connect A TRADR1 pw1 seq 0"
	for i in $(seq 1 18); do echo "A: buy 100 INTC 10 token U$i"; echo "A: expect Accepted token=U$i *"; done
	echo "A: buy 100 INTC 10 token U19"
	echo "A: expect Rejected token=U19 reason=q *"
	echo "connect B TRADR2 pw2 seq 0"
	echo "connect C TRADR3 pw3 seq 0"
	echo "C: cancel O2" # TRADR3's own max_open (3) is full
	echo "C: expect Canceled token=O2 dec=1000 reason=U *"
	echo "B: sell 100 TSLA 200 token T1"
	echo "B: expect Accepted token=T1 *"
	echo "C: buy 100 TSLA 200 token T2"
	echo "C: expect Accepted token=T2 *"
	echo "B: expect Executed token=T1 100 @ 200.0000 liq=A *"
	echo "C: expect Executed token=T2 100 @ 200.0000 liq=R *"
} | client
out=$(node_ctl "$p" risk user '*' max_open=none) || fail "lockstepctl risk user * none: $out"
info "TRADR1 stopped at its quota of 20 open orders ('q'); TRADR2 and TRADR3 still trade"

# 4. the kill switch of FRMA under load
kill_script=$T/kill.script
{
	echo "connect A TRADR1 pw1 seq 0"
	echo "connect C TRADR3 pw3 seq 0"
	echo "connect B TRADR2 pw2 seq 0"
	for i in $(seq 1 10); do
		echo "A: buy 100 NVDA 50 token K$i"
		echo "A: expect Accepted token=K$i *"
		echo "B: buy 100 NVDA 50 token L$i"
		echo "B: expect Accepted token=L$i *"
	done
	echo "echo placed"
	# the kill: every FRMA order open (Q2, Q3, U1-U18, K1-K10; O1, R4)
	echo "C: expect Canceled token=O1 dec=1000 reason=S *"
	echo "C: expect Canceled token=R4 dec=12000 reason=S *"
	echo "C: buy 100 NVDA 50 token K99"
	echo "C: expect Rejected token=K99 reason=a *"
	echo "echo killed"
	echo "B: expect-none 500"
	for i in $(seq 1 10); do
		echo "B: cancel L$i"
		echo "B: expect Canceled token=L$i dec=100 reason=U *"
	done
} >"$kill_script"
"$CLIENT" --connect "127.0.0.1:$P" --timeout 30000 --script "$kill_script" >"$T/kill.out" 2>&1 &
KILL_CLIENT=$!
EXTRA_PIDS+=("$KILL_CLIENT")
wait_for 20 "the orders of both firms placed" grep -q '^placed' "$T/kill.out"
# the load: a login of FRMB of its own (B stays TRADR2's one session), on
# symbols and prices that none of the test's resting orders (bids at $50
# and below, B's AAPL bid at $157) can meet
echo "TRADR4 = pw4 FRMB" >>"$T/logins.conf"
out=$(node_ctl gw-1 reload) || fail "gw-1 reload: $out"
bg_start "$T/bench.out" timeout -k 5 60 "$BENCH" --connect "127.0.0.1:$P" --sessions 1 \
	--logins TRADR4:pw4 --symbols MSFT,AMZN --rate 2000 --duration 30 --timeout 20 \
	--json "$T/bench.json"
BENCH_PID=$BG_PID
seq0=$(stat_get "$p" commands_sequenced)
flowing() { [ "$(stat_get "$p" commands_sequenced)" -gt $((seq0 + 2000)) ]; }
wait_for 15 "bench orders flowing" flowing
out=$(node_ctl "$p" kill-switch firm FRMA --cancel) || fail "lockstepctl kill-switch: $out"
kat=$(sed -n 's/.* on the tape at seq \([0-9]*\)$/\1/p' <<<"$out")
info "kill switch: $out"
rc=0
wait "$KILL_CLIENT" || rc=$?
[ $rc -eq 0 ] || { cat "$T/kill.out" >&2; fail "the kill switch's client script failed"; }
# every FRMA order canceled 'S' on A's session too (a count: the order is the book's)
na=$(grep -c '^A < [0-9:.]* Canceled .*reason=S' "$T/kill.out" || true)
[ "$na" = 30 ] || fail "A saw $na Canceled S, want 30 (Q2, Q3, U1-U18, K1-K10): $(grep '^A <' "$T/kill.out" | tail -5)"
for m in matcher-1 matcher-2; do
	[ "$(stat_get $m kill_cancels)" = 32 ] || fail "$m: kill_cancels $(stat_get $m kill_cancels), want 32"
	wait_for 5 "$m logs the kill" grep -q "tape seq $kat: risk: firm FRMA: kill switch, open orders canceled: 32 canceled" "$T/$m.log"
done
pkill -USR1 -P "$BENCH_PID" || fail "no lockstep-bench to end"
rc=0
wait "$BENCH_PID" || rc=$?
[ $rc -eq 0 ] || { cat "$T/bench.out" >&2; fail "bench: exit $rc"; }
python3 - "$T/bench.json" <<'PY' || fail "bench: $(cat "$T/bench.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["unanswered"] == 0, d
assert sum(d["sent"].values()) > 1000, d["sent"]
PY
out=$(node_ctl "$p" kill-switch firm FRMA --lift) || fail "lockstepctl kill-switch --lift: $out"
client <<'S'
connect A TRADR1 pw1 seq 0
A: buy 100 NVDA 50 token K100
A: expect Accepted token=K100 *
S
agree matcher-1 matcher-2
info "FRMA killed under load at tape seq $kat: 32 orders canceled 'S', FRMB's untouched, lifted"

# 5. the tape shows it; a rebuild reaches the replicas' hash
"$CLUSTER" down --dir "$T" >/dev/null
"$REPLAY" dump "$T/$p/journal" >"$T/dump.txt" || fail "dump"
grep -q "RISK user TRADR1: max_qty=1000" "$T/dump.txt" || fail "dump: no risk line"
grep -q "seq=$kat .*RISK firm FRMA: kill switch, open orders canceled" "$T/dump.txt" ||
	fail "dump: no kill switch at seq $kat: $(grep RISK "$T/dump.txt")"
grep -q "RISK firm FRMA: kill switch lifted" "$T/dump.txt" || fail "dump: no lift"
"$REPLAY" dump --json "$T/$p/journal" >"$T/dump.json" || fail "dump --json"
grep -q "\"seq\":$kat,.*\"type\":\"kill_switch\",\"scope\":\"firm\",\"name\":\"FRMA\",\"cancel\":true" "$T/dump.json" ||
	fail "dump --json: no kill_switch at seq $kat"
h1=$(sed -n 's/.*tape seq \([0-9]*\) applied, hash \([0-9a-f]*\)$/\1 \2/p' "$T/matcher-1.log" | tail -1)
h2=$(sed -n 's/.*tape seq \([0-9]*\) applied, hash \([0-9a-f]*\)$/\1 \2/p' "$T/matcher-2.log" | tail -1)
read -r s1 hash1 <<<"$h1"
rb=$("$REPLAY" rebuild "$T/$p/journal" --config "$T/matcher-1.conf" --to "$s1" --json) || fail "rebuild: $rb"
grep -q "\"hash\":\"$hash1\"" <<<"$rb" || fail "rebuild to $s1: $rb, matcher-1 stopped with $hash1 (matcher-2: $h2)"
echo "ok: every limit rejected with its reason on both replicas, changed at tape seq $at, quota, kill switch of FRMA at tape seq $kat under load, on the tape"
