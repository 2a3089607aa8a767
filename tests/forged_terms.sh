#!/usr/bin/env bash
# Forged terms (issue 15, "fencing and sanity"). First the tape: an event at
# the matchers' next seq with term 2^64-1 (multicast on the tape group, as
# a stray sender on the network would) is refused by both replicas
# (tape_fenced) and asked for again; the real event is applied, the
# replicas agree and orders flow. Then the group: a forged raft term does
# not leave it without a primary. Before, one VOTE with term 2^64-1 made every member
# adopt and save that term; the next election wrapped it to 0 and the group
# never elected a primary again, even across restarts. Here a 3-sequencer
# group gets, on every member's raft port, a VOTE and a HEARTBEAT with term
# 2^64-1 and a HEARTBEAT a little beyond the largest step a term may take
# (RAFT_TERM_STEP_MAX, 2^20): each member refuses them (terms_refused, a log
# line naming the source), keeps its term, and when the primary is then
# killed a new one is elected within the usual failover time and orders
# flow. Every forged datagram is tagged under the cluster's own key
# (tests/auth.py), and the raft ones come from the address and port of the
# member they name (a raw socket: root): what a member that lost its mind,
# or a stolen key, could send. Fencing and the term bounds must hold on
# their own. A copy from another port is refused as not that member's
# (raft_not_member).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench
[ "$(id -u)" -eq 0 ] || skip "speaking from a member's address needs a raw socket (root)"
SEQUENCERS=3
# no time events: the forged tape event must reach the next seq before a real one
cluster_up --set sequencer.time_event=0s
cluster_key_env

p0=$(primary_node)
term0=$(status_get "$p0" term)

# ---- the tape: one event at the next seq, term 2^64-1, committed
tape=$(sed -n 's/^tape_group = //p' "$T/matcher-1.conf")
[ -n "$tape" ] || tape=$(sed -n 's/^tape_group = //p' "$T/seq-1.conf")
next=$(($(status_get matcher-1 seq) + 1))
python3 - "$tape" "$next" <<'PY'
import os, sys
import auth
group, port = sys.argv[1].rsplit(":", 1)
pkt = auth.tape_packet(int(sys.argv[2]), (1 << 64) - 1)
pkt = auth.seal(pkt, os.environ["KEY"], os.environ["CLUSTER_NAME"], "tape")
auth.mcast_sender().sendto(pkt, (group, int(port)))
PY
for m in matcher-1 matcher-2; do
	f=0
	for _ in $(seq 1 30); do
		f=$(stat_get "$m" tape_fenced)
		[ "${f:-0}" -ge 1 ] && break
		sleep 0.1
	done
	[ "${f:-0}" -ge 1 ] || fail "$m: tape_fenced ${f:-none}: the forged event was not refused"
done
"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --orders 200 --window 8 --timeout 20 \
	>"$T/bench0.out" 2>&1 || { cat "$T/bench0.out"; fail "orders did not flow after a forged tape event"; }
agree matcher-1 matcher-2
info "a tape event of term 2^64-1 at seq $next refused by both replicas; orders flow, they agree"

# ---- the group
peers=$(sed -n 's/^peers = //p' "$T/seq-1.conf")
[ -n "$peers" ] || fail "no peers in seq-1.conf"

# forge PEERS TYPE TERM: one LSRF datagram (sequencer.h: magic, version 1,
# type, flags, from, to 0xff, 0, session, u64 term, seq, seq_term, commit,
# big-endian) to every member's raft address, each from another member's
# node id (a member ignores its own).
forge() {
	python3 - "$@" <<'PY'
import os, socket, struct, sys
import auth
peers, mtype, term = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3])
addr = [(h, int(p)) for h, p in (x.rsplit(":", 1) for x in peers)]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i, dst in enumerate(addr):
    frm = (i + 1) % len(peers)
    dgram = b"LSRF" + bytes([1, mtype, 0, frm, 0xFF, 0]) + b"TAPE".ljust(10) + \
        struct.pack(">QQQQ", term, 1 << 40, term, 0)
    dgram = auth.seal(dgram, os.environ["KEY"], os.environ["CLUSTER_NAME"], "raft", None)
    assert dst[0].startswith("127."), dst
    auth.send_from(addr[frm], dst, dgram)  # from the member it names
    s.sendto(dgram, dst)                   # and a copy from elsewhere
PY
}
VOTE=0 HEARTBEAT=3
forge "$peers" $VOTE 18446744073709551615
forge "$peers" $HEARTBEAT 18446744073709551615
forge "$peers" $HEARTBEAT $((term0 + (1 << 20) + 1))

for n in seq-1 seq-2 seq-3; do
	refused=0
	for _ in $(seq 1 30); do
		refused=$(stat_get "$n" terms_refused)
		[ "${refused:-0}" -ge 3 ] && break
		sleep 0.1
	done
	[ "${refused:-0}" -ge 3 ] || fail "$n: terms_refused ${refused:-none}, want 3"
	nm=$(stat_get "$n" raft_not_member)
	[ "${nm:-0}" -ge 3 ] || fail "$n: raft_not_member ${nm:-none}, want 3 (the copies from elsewhere)"
	t=$(status_get "$n" term)
	[ "$t" -lt $((term0 + 10)) ] || fail "$n took a forged term: $t (was $term0)"
	grep -q "refused: term 18446744073709551615" "$T/$n.log" ||
		fail "$n: no log line for the forged term"
	info "$n: $refused forged datagrams refused, term $t"
done
[ "$(primary_node)" = "$p0" ] || fail "the primary changed: $(primary_node), was $p0"

# the group still elects: the primary killed, a new one within failover time
"$CLUSTER" kill "$p0" --dir "$T" >/dev/null
start=$(date +%s%N)
for _ in $(seq 1 100); do
	p1=$("$CLUSTER" primary --dir "$T" 2>/dev/null) && [ "$p1" != "$p0" ] && break
	p1=
	sleep 0.05
done
[ -n "$p1" ] || fail "no new primary within 5 s of killing $p0"
ms=$((($(date +%s%N) - start) / 1000000))
t1=$(status_get "$p1" term)
[ "$t1" -gt "$term0" ] && [ "$t1" -lt $((term0 + 10)) ] || fail "new term $t1 after $term0"
"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --orders 200 --window 8 --timeout 20 \
	>"$T/bench.out" 2>&1 || { cat "$T/bench.out"; fail "orders did not flow after the failover"; }
echo "ok: forged terms refused on every member; $p1 primary in term $t1, $ms ms after $p0 was killed"
