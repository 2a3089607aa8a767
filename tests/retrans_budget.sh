#!/usr/bin/env bash
# No amplification (issue 15): a 20-byte MoldUDP64 request may ask a
# retransmission server for up to 64 datagrams (~94 KB) to whatever address
# it claims. Each server answers one source address at most [node]
# retrans_budget bytes a second. Here the budget is 64 KiB/s: 200 requests
# for the whole tape, sent as fast as a loop goes to the sequencer's
# retransmission port, a matcher's exec retransmission port and the
# gateway's command socket (bound to the cluster side, not 0.0.0.0), get at
# most about the budget back (one burst plus a second's worth) and the
# servers count the rest (retrans_budget_refused); the orders then go on
# being answered (the gateway's and matchers' own requests come from the
# same address, so the budget is left to refill first).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench
cluster_up --set node.retrans_budget=64K
cluster_key_env

# a tape worth retransmitting
"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --orders 2000 --window 32 --timeout 30 \
	>"$T/bench1.out" 2>&1 || { cat "$T/bench1.out"; fail "bench before the flood"; }

retrans=$(sed -n 's/^retrans = //p' "$T/seq-1.conf")
exec_retrans=$(sed -n 's/^exec_retrans = //p' "$T/matcher-1.conf")
exec_session=EXEC0 # partition 0's (matcher/exec.c)
[ -n "$retrans" ] && [ -n "$exec_retrans" ] || fail "no retransmission addresses in the configs"

# flood ADDR SESSION: 200 requests for seq 1, count 65535, over about a
# second; prints the bytes that came back and the milliseconds it took.
flood() {
	python3 - "$1" "$2" <<'PY'
import os, socket, struct, sys, time
import auth
host, port = sys.argv[1].rsplit(":", 1)
assert host.startswith("127."), host
req = sys.argv[2].encode().ljust(10) + struct.pack(">QH", 1, 65535)
req = auth.seal(req, os.environ["KEY"], os.environ["CLUSTER_NAME"], "requests")  # a member's
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.settimeout(0.005)
start = time.time()
got, end = 0, start + 1.0
for i in range(200):
    s.sendto(req, (host, int(port)))
    while True:
        try:
            got += len(s.recv(65536))
        except socket.timeout:
            break
while time.time() < end + 0.3:
    try:
        got += len(s.recv(65536))
    except socket.timeout:
        pass
print(got, int((time.time() - start) * 1000))
PY
}

# the gateway's command socket: bound to tape_iface's address (127.0.0.1;
# it was 0.0.0.0), a port of its own, which it logs; its session is the
# gateway's name
cmd_addr=$(sed -n 's/.*command stream from \([0-9.:]*\) .*/\1/p' "$T/gw-1.log" | tail -1)
cmd_port=${cmd_addr##*:}
[ "${cmd_addr%:*}" = 127.0.0.1 ] && [ -n "$cmd_port" ] ||
	fail "gw-1's command socket is not on 127.0.0.1: '${cmd_addr}'"

# within_budget NAME BYTES MS: at most one burst (64 KiB) plus the rate
# (64 KiB/s) over the time the flood took, and one datagram of slack
within_budget() {
	local limit=$((65536 + 65536 * $3 / 1000 + 1500))
	[ "$2" -gt 0 ] || fail "$1 answered nothing at all"
	[ "$2" -le "$limit" ] || fail "$1 sent $2 bytes in $3 ms, over its budget ($limit)"
}
read -r tape_got tape_ms < <(flood "$retrans" TAPE)
read -r exec_got exec_ms < <(flood "$exec_retrans" "$exec_session")
read -r cmd_got cmd_ms < <(flood "127.0.0.1:$cmd_port" gw-1)
info "200 requests for the whole stream: $tape_got bytes back from the sequencer in $tape_ms ms," \
	"$exec_got from matcher-1 in $exec_ms ms, $cmd_got from gw-1's command stream in $cmd_ms ms"
within_budget seq-1 "$tape_got" "$tape_ms"
within_budget matcher-1 "$exec_got" "$exec_ms"
within_budget gw-1 "$cmd_got" "$cmd_ms"
r=$(stat_get seq-1 retrans_budget_refused)
[ "${r:-0}" -gt 0 ] || fail "seq-1 retrans_budget_refused ${r:-none}"
grep -q "past its budget" "$T/seq-1.log" || fail "no log line for the refused answers"
r1=$(stat_get matcher-1 retrans_budget_refused)
[ "${r1:-0}" -gt 0 ] || fail "matcher-1 retrans_budget_refused ${r1:-none}"
sleep 2 # the budget refills: the cluster's own requests come from 127.0.0.1 too
"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --orders 500 --window 8 --timeout 30 \
	>"$T/bench2.out" 2>&1 || { cat "$T/bench2.out"; fail "orders after the flood"; }
echo "ok: a flood of requests got $tape_got and $exec_got bytes (budget 64 KiB/s); $r answers cut short"
