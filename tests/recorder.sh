#!/usr/bin/env bash
# Tape recorders (issue 19): `ops/cluster up --recorders 1` adds rec-1
# (lockstep-recorder), which journals the tape and answers its
# retransmission requests; the matchers and the gateway ask it before the
# sequencer (tape_recorders). In a network namespace of the test's own,
# 5% of the tape's datagrams are dropped on their way in (nftables
# prerouting: correlated loss, every receiver misses the same ones) under
# lockstep-bench load:
#  1. the receivers' requests go to rec-1; the sequencer hears only rec-1's
#     own, about one per lost datagram (not one per receiver); replicas
#     agree, every order is answered, no datagram lost in a kernel buffer;
#     rec-1's journal verifies and is, event for event, the sequencer's;
#  2. rec-1 killed: the same loss is repaired by the sequencer (the
#     fall-back), nothing lost; rec-1 restarted catches up from its journal
#     and its journal is again the sequencer's;
#  3. the drop copy: `lockstep-replay dump --follow`, started on rec-1's
#     journal before the load, has written out, live and through rec-1's
#     restart, every event of it (the same lines as a dump at the end).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench lockstep-recorder lockstep-replay
[ "$(id -u)" -eq 0 ] || skip "nftables and a network namespace need root"
command -v nft >/dev/null || skip "no nft (apt-get install nftables)"
command -v python3 >/dev/null || skip "no python3"

own_netns "$@"

cluster_up --recorders 1
REPLAY=$top_builddir/lockstep-replay
TAPE=$(sed -n 's/^tape_group = //p' "$T/rec-1.conf")
grep -q "^tape_recorders = 127.0.0.1:" "$T/matcher-1.conf" || fail "matcher-1 has no tape_recorders"
bg_start "$T/follow.err" sh -c "exec '$REPLAY' dump '$T/rec-1/journal' --follow >'$T/follow.dump'"
sum() { local k=$1 n t=0 v; shift; for n in "$@"; do v=$(stat_get "$n" "$k"); t=$((t + ${v:-0})); done; echo $t; }
receivers_asked() { echo $(( $(sum retrans_requests_sent matcher-1 matcher-2) + $(sum tape_requests gw-1) )); }

# lossy_load NAME: 3,000 orders/s for 4 s with 5% of the tape dropped;
# DROPPED: the datagrams dropped.
lossy_load() {
	nft add table inet lsrec
	nft add chain inet lsrec pre '{ type filter hook prerouting priority 0; }'
	nft add rule inet lsrec pre ip daddr "${TAPE%:*}" udp dport "${TAPE##*:}" \
		numgen random mod 100 '<' 5 counter drop
	"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --rate 3000 --duration 4 --timeout 30 \
		--cluster "$T" --json "$T/bench-$1.json" >"$T/bench-$1.out" 2>&1 ||
		{ cat "$T/bench-$1.out"; fail "load $1"; }
	DROPPED=$(nft list table inet lsrec | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
	nft delete table inet lsrec
	no_losses "$T/bench-$1.json"
	wait_same 30 matcher-1 matcher-2
}

# same_journal: rec-1's journal verifies and its events are the first of
# seq-1's (seq-1 may hold a later heartbeat-time event).
same_journal() {
	"$REPLAY" verify "$T/rec-1/journal" >"$T/verify.out" 2>&1 || { cat "$T/verify.out"; fail "rec-1's journal does not verify"; }
	"$REPLAY" dump "$T/rec-1/journal" >"$T/rec.dump" || fail "dump of rec-1's journal"
	"$REPLAY" dump "$T/seq-1/journal" >"$T/seq.dump" || fail "dump of seq-1's journal"
	local n
	n=$(wc -l <"$T/rec.dump")
	[ "$n" -gt 1000 ] || fail "rec-1's journal holds only $n events"
	head -n "$n" "$T/seq.dump" | cmp -s - "$T/rec.dump" || fail "rec-1's journal differs from seq-1's"
	info "rec-1's journal: $(tail -1 "$T/verify.out")"
}

# ---- 1. the recorder answers ------------------------------------------------
s0=$(stat_get seq-1 retrans_requests) r0=$(stat_get rec-1 retrans_requests) a0=$(receivers_asked)
lossy_load 1
s1=$(( $(stat_get seq-1 retrans_requests) - s0 ))
r1=$(( $(stat_get rec-1 retrans_requests) - r0 ))
w1=$(stat_get rec-1 retrans_owed)
a1=$(( $(receivers_asked) - a0 ))
own=$(stat_get rec-1 requests_sent)
info "5% of the tape lost ($DROPPED datagrams): the receivers asked $a1 times, rec-1 heard $r1 (owed $w1 until it held them) and asked seq-1 $own times; seq-1 heard $s1 requests"
[ "$DROPPED" -gt 20 ] || fail "the loss did not happen ($DROPPED dropped)"
[ "$a1" -gt "$DROPPED" ] || fail "the receivers asked only $a1 times for $DROPPED lost datagrams"
[ "$r1" -ge "$a1" ] || fail "rec-1 heard $r1 of the receivers' $a1 requests"
# the sequencer hears the recorder, about once a lost datagram (a request
# covers a run of them), not the receivers
[ "$s1" -le $((DROPPED + DROPPED / 4 + 5)) ] || fail "seq-1 heard $s1 requests for $DROPPED lost datagrams"
[ "$s1" -lt "$a1" ] || fail "seq-1 heard $s1 requests, the receivers sent $a1"
[ "$(stat_get rec-1 events_journalled)" -gt 1000 ] || fail "rec-1 journalled little"
same_journal

# ---- 2. without it: the fall-back -------------------------------------------
"$CLUSTER" kill rec-1 --dir "$T" >/dev/null
s0=$(stat_get seq-1 retrans_requests)
lossy_load 2
s2=$(( $(stat_get seq-1 retrans_requests) - s0 ))
info "rec-1 down, 5% lost ($DROPPED datagrams): seq-1 heard $s2 requests; the replicas agree"
[ "$s2" -gt 0 ] || fail "nobody asked seq-1 with rec-1 down"
"$CLUSTER" start rec-1 --dir "$T" >/dev/null || fail "rec-1 did not start again"
commit=$(status_get seq-1 commit)
end=$((SECONDS + 20))
until [ "$(status_get rec-1 state)" = live ] && [ "$(status_get rec-1 seq)" -ge "$commit" ]; do
	[ $SECONDS -lt $end ] || fail "rec-1 did not catch up to $commit: $(node_ctl rec-1 status)"
	sleep 0.2
done
info "rec-1 restarted: caught up to $(status_get rec-1 seq) (seq-1's commit $commit)"
same_journal

# ---- 3. the drop copy --------------------------------------------------------
n=$(wc -l <"$T/rec.dump")
wait_for 10 "the follower's $n lines" sh -c "[ \$(wc -l <'$T/follow.dump') -ge $n ]"
head -n "$n" "$T/follow.dump" | cmp -s - "$T/rec.dump" ||
	fail "dump --follow of rec-1's journal differs from its dump: $(head -n "$n" "$T/follow.dump" | diff - "$T/rec.dump" | head -3)"
info "lockstep-replay dump --follow wrote rec-1's $n events as it journalled them, through its restart"
