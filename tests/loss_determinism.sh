#!/usr/bin/env bash
# Loss recovery with the loss generator (drop_rate, drop_seed; common/rx.h)
# on a loopback cluster:
#  1. the same seed on the matchers loses the same packets in two runs of the
#     same scripted workload, and so gives the same gaps, requests and
#     retransmissions (counters);
#  2. 5% loss on every receive path of every node: every order is answered
#     (lockstep-bench exits 0 only then), every command is sequenced once and
#     every execution reaches the gateway once, and both matchers end on the
#     same seq and hash.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
skip_unless_built lockstep-bench

# counters NODE NAME...: "NAME=VALUE ..." of one node.
counters() {
	local n=$1 k out=""
	shift
	for k in "$@"; do out+="$k=$(ctl_counter "$n" "$k") "; done
	echo "$out"
}

# cluster_down: the cluster of cluster_up stopped and removed in the
# background (so that another can come up in the same test meanwhile).
DOWN=()
cluster_down() {
	local t=$T
	{ "$CLUSTER" down --dir "$t" >/dev/null 2>&1; rm -rf "$t"; } &
	DOWN+=($!)
	T=
}

# One run of the scripted workload: one session, one order in flight (so
# every tape packet is the same in every run), the matchers losing 5% of
# what they receive with seed 7. Sets RESULT to the loss-recovery counters.
# A request is repeated after retrans_wait without an answer: at the 10 ms
# default a slow machine (ASan, a busy CI host) sometimes repeats one whose
# answer is merely late, which is timing, not loss; at 200 ms only a lost
# request or answer is asked again, and those losses are the seed's.
deterministic_run() {
	# no time events: the tape, and so its losses, is the workload's alone
	cluster_up --set matcher.drop_rate=0.05 --set matcher.drop_seed=7 \
		--set matcher.retrans_wait=200ms --set sequencer.time_event=0s
	"$BENCH" -c "127.0.0.1:$P" -s 1 -n 200 -w 1 --seed 3 -t 20 -q >"$T/bench.out" 2>&1 ||
		{ cat "$T/bench.out" >&2; fail "unanswered orders with 5% loss on the matchers"; }
	wait_agree 20
	# (the hash differs between runs: the tape carries the time)
	RESULT="seq=$SEQ; matcher-1: $(counters matcher-1 drops_injected_data tape_gaps \
		retrans_requests_sent tape_blocks_requested tape_answers tape_too_old)"
	RESULT+="; matcher-2: $(counters matcher-2 drops_injected_data tape_gaps \
		retrans_requests_sent tape_blocks_requested tape_answers tape_too_old)"
	RESULT+="; seq-1: $(counters seq-1 retrans_requests retrans_blocks_sent retrans_packets_sent)"
	cluster_down
}

deterministic_run
run1=$RESULT
deterministic_run
[ "$run1" = "$RESULT" ] ||
	fail "the same seed and workload gave different losses or repairs:
  $run1
  $RESULT"
case $run1 in *"matcher-1: drops_injected_data=0 "*) fail "the loss generator dropped nothing: $run1" ;; esac
echo "info: same seed, same workload, twice: $run1"

# 5% loss on every receive path of every node.
cluster_up --set matcher.drop_rate=0.05 --set sequencer.drop_rate=0.05 \
	--set gateway.drop_rate=0.05 --set gateway.drop_seed=11 --set sequencer.drop_seed=12 \
	--set matcher.drop_seed=13
start=$(ms_now)
"$BENCH" -c "127.0.0.1:$P" -s 3 -n 2000 -w 16 --seed 5 -t 30 >"$T/bench.out" 2>&1 ||
	{ cat "$T/bench.out" >&2; fail "unanswered orders with 5% loss everywhere"; }
wait_agree 30
sent=$(ctl_counter gw-1 cmds_sent)
sequenced=$(ctl_counter seq-1 commands_sequenced)
[ "$sent" = "$sequenced" ] || fail "gateway sent $sent commands, sequencer sequenced $sequenced"
for n in matcher-1 matcher-2; do
	[ "$(ctl_counter "$n" ignored_duplicates)" = 0 ] || fail "$n saw a command twice"
done
end=$((SECONDS + 10))
until [ "$(ctl_counter gw-1 exec_blocks)" = "$(ctl_counter matcher-1 exec_blocks)" ]; do
	[ $SECONDS -lt $end ] || fail "gateway took $(ctl_counter gw-1 exec_blocks) exec blocks, the matchers made $(ctl_counter matcher-1 exec_blocks)"
	sleep 0.2
done
lost=0
for n in seq-1 matcher-1 matcher-2 gw-1; do
	lost=$((lost + $(ctl_counter "$n" drops_injected)))
done
[ "$lost" -gt 0 ] || fail "nothing was lost"
requests=$(($(ctl_counter seq-1 gap_requests_sent) + $(ctl_counter matcher-1 retrans_requests_sent) +
	$(ctl_counter matcher-2 retrans_requests_sent) + $(ctl_counter gw-1 tape_requests) +
	$(ctl_counter gw-1 exec_requests)))
served=$(($(ctl_counter seq-1 retrans_requests) + $(ctl_counter gw-1 retrans_requests) +
	$(ctl_counter matcher-1 exec_requests_served) + $(ctl_counter matcher-2 exec_requests_served)))
echo "info: 5% loss everywhere: $sequenced commands at seq $SEQ (hash $HASH) in $(($(ms_now) - start)) ms;" \
	"$lost datagrams lost, $requests requests sent, $served served;" \
	"$(grep -o 'achieved [0-9]* orders/s' "$T/bench.out")"

# The too-old answer: matcher-1, restarted with a ring of 1024 exec blocks,
# catches up from the tape (through its 5% loss) and then answers a request
# for 10 blocks from 5 before the oldest it holds with a heartbeat whose seq
# is that oldest block, followed by the 5 blocks it does hold.
"$CLUSTER" kill matcher-1 --dir "$T" >/dev/null
sed -i '/^\[matcher\]$/,/^\[/{/^ring = /d}; s/^\[matcher\]$/[matcher]\nring = 1024/' "$T/matcher-1.conf"
grep -c '^ring = 1024$' "$T/matcher-1.conf" | grep -qx 1 || fail "matcher-1.conf: no ring of 1024"
"$CLUSTER" start matcher-1 --dir "$T" >/dev/null
wait_agree 30
oldest=$(($(ctl_counter matcher-1 exec_blocks) + 1 - 1024))
[ "$oldest" -gt 1 ] || fail "too few exec blocks for the ring to have turned"
cluster_key_env matcher-1
python3 - "$((P + 111))" "$oldest" <<'PY' || fail "no too-old answer from matcher-1's exec_retrans"
import os, socket, struct, sys
import auth
key, cl = os.environ["KEY"], os.environ["CLUSTER_NAME"]
port, oldest = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.3)
req = auth.seal(b"EXEC0".ljust(10) + struct.pack(">QH", oldest - 5, 10), key, cl, "requests")
for attempt in range(20):  # the matcher loses 5% of the requests too
    s.sendto(req, ("127.0.0.1", port))
    got = []
    try:
        while len(got) < 2:
            got.append(s.recv(2000))
    except socket.timeout:
        continue
    hb, data = (auth.open_(d, key, cl, "exec") for d in got)
    assert hb is not None and data is not None, "an answer without a good tag"
    seq, count = struct.unpack(">QH", hb[10:20])
    dseq, dcount = struct.unpack(">QH", data[10:20])
    ok = len(hb) == 20 and count == 0 and seq == oldest and dseq == oldest and dcount == 5
    print("too-old answer: heartbeat seq %d (oldest %d), then %d blocks from %d" % (seq, oldest, dcount, dseq))
    sys.exit(0 if ok else 1)
sys.exit(2)
PY
[ "$(ctl_counter matcher-1 exec_requests_too_old)" -ge 1 ] || fail "exec_requests_too_old not counted"
wait "${DOWN[@]}"
echo "ok: losses are reproducible; 5% loss everywhere: every order answered once, replicas agree;" \
	"a request older than the ring gets the too-old answer"
