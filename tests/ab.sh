#!/usr/bin/env bash
# A/B networks (issue 19): `ops/cluster up --ab` sends the tape and every
# execution stream on network B as well (on loopback: other groups), in a
# network namespace of the test's own (its nftables rules must not touch
# the machine's). 5% of network A's tape and execution datagrams are
# dropped on their way in (nftables numgen, prerouting) under
# lockstep-bench load: network B's copies fill every gap, so no matcher and
# no gateway sends a single retransmission request; the counters say
# network B delivered first about as many datagrams as A lost; both
# replicas agree; every order is answered and no daemon lost a datagram in
# a kernel buffer. Then network B alone loses (5%) and A fills: still no
# request. In the plain build the partition has 9 replicas (ops/cluster's
# limit, which a gateway of at most 8 exec_retrans servers once refused),
# every one of them requestless and in agreement; under ASan 2.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench
[ "$(id -u)" -eq 0 ] || skip "nftables and a network namespace need root"
command -v nft >/dev/null || skip "no nft (apt-get install nftables)"
command -v python3 >/dev/null || skip "no python3"

own_netns "$@"

if asan_build; then R=2; else R=9; fi
# a gap waits 250 ms for the other network's copy (the default is 1 ms): on
# two cores shared by 9 replicas and another test's cluster the
# sequencer's two sends of a batch, A then B, can be tens of milliseconds
# apart (with 20 ms, 3 requests for 1,291 losses in one CI run)
cluster_up --ab --matchers "$R" --set matcher.ab_wait=250ms --set gateway.ab_wait=250ms
conf() { sed -n "s/^$2 = //p" "$T/$1.conf"; }
TAPE_A=$(conf matcher-1 tape_group) TAPE_B=$(conf matcher-1 tape_group_b)
EXEC_A=$(conf matcher-1 exec_group) EXEC_B=$(conf matcher-1 exec_group_b)
[ -n "$TAPE_B" ] && [ -n "$EXEC_B" ] || fail "--ab wrote no tape_group_b / exec_group_b"
MATCHERS=$(seq -f 'matcher-%g' 1 "$R" | tr '\n' ' ')
sum() { local k=$1 n t=0 v; shift; for n in "$@"; do v=$(stat_get "$n" "$k"); t=$((t + ${v:-0})); done; echo $t; }

# lose NET PCT: PCT% of network NET's (a or b) tape and exec datagrams
# dropped on their way in; lost: how many so far.
lose() {
	local t e
	if [ "$1" = a ]; then t=$TAPE_A e=$EXEC_A; else t=$TAPE_B e=$EXEC_B; fi
	nft add table inet lsab
	nft add chain inet lsab pre '{ type filter hook prerouting priority 0; }'
	nft add rule inet lsab pre ip daddr "${t%:*}" udp dport "${t##*:}" \
		numgen random mod 100 '<' "$2" counter drop
	nft add rule inet lsab pre ip daddr "${e%:*}" udp dport "${e##*:}" \
		numgen random mod 100 '<' "$2" counter drop
}
lost() { nft list table inet lsab | sed -n 's/.*counter packets \([0-9]*\).*/\1/p' | awk '{ s += $1 } END { print s + 0 }'; }

# run NET: a load with network NET losing, then the checks.
run() {
	local net=$1 other k e first dropped before_req before_ereq before_first
	[ "$net" = a ] && other=b || other=a
	before_req=$(sum retrans_requests_sent $MATCHERS)
	before_req=$((before_req + $(sum tape_requests gw-1)))
	before_ereq=$(sum exec_requests gw-1)
	before_first=$(( $(sum "tape_first_$other" $MATCHERS gw-1) + $(sum "exec_first_$other" gw-1) ))
	lose "$net" 5
	"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --rate 3000 --duration 4 --timeout 20 \
		--cluster "$T" --json "$T/bench-$net.json" >"$T/bench-$net.out" 2>&1 ||
		{ cat "$T/bench-$net.out"; fail "load with network $net losing"; }
	dropped=$(lost)
	nft delete table inet lsab
	no_losses "$T/bench-$net.json"
	wait_same 30 $MATCHERS
	k=$(( $(sum retrans_requests_sent $MATCHERS) + $(sum tape_requests gw-1) - before_req ))
	e=$(( $(sum exec_requests gw-1) - before_ereq ))
	first=$(( $(sum "tape_first_$other" $MATCHERS gw-1) + $(sum "exec_first_$other" gw-1) - before_first ))
	info "network $net lost $dropped datagrams (5%); network $other delivered $first first; tape requests $k, exec requests $e; $R matchers agree at $SEQ"
	[ "$dropped" -gt 20 ] || fail "the loss on network $net did not happen ($dropped dropped)"
	[ "$first" -gt 0 ] || fail "network $other never delivered first"
	[ "$k" -eq 0 ] || fail "$k tape retransmission requests for losses on network $net only"
	[ "$e" -eq 0 ] || fail "$e exec retransmission requests for losses on network $net only"
}

for n in seq-1 $MATCHERS; do
	k=$([ "$n" = seq-1 ] && echo tape_b_packets_sent || echo exec_b_packets)
	[ -n "$(stat_get "$n" "$k")" ] || fail "$n has no $k counter"
done
run a
[ "$(stat_get seq-1 tape_b_packets_sent)" -gt 0 ] || fail "seq-1 sent nothing on network B"
[ "$(stat_get matcher-1 exec_b_packets)" -gt 0 ] || fail "matcher-1 sent no execution on network B"
for n in seq-1 $MATCHERS; do
	k=$([ "$n" = seq-1 ] && echo tape_b_send_errors || echo exec_b_send_errors)
	[ "$(stat_get "$n" "$k")" = 0 ] || fail "$n: $k $(stat_get "$n" "$k")"
done
run b
info "A/B: $(stat_get gw-1 tape_first_a) tape datagrams first from A, $(stat_get gw-1 tape_first_b) from B at gw-1"
