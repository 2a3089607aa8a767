#!/usr/bin/env bash
# SoupBinTCP sessions end to end: resume from a sequence number (also after
# the gateway restarted), and a misbehaving client cannot hurt another one.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
cluster_up

client <<'S'
connect A TRADR1 pw1
connect B TRADR2 pw2
A: buy 100 AAPL 150 token S1
A: expect Accepted token=S1 *
B: sell 40 AAPL 150 token T1
B: expect Accepted token=T1 *
A: expect Executed token=S1 40 @ 150.0000 liq=A *
A: cancel S1 10
A: expect Canceled token=S1 dec=50 reason=U *
S

# A new connection asking from sequence number 2 gets messages 2 and 3 again.
client <<'S'
connect A TRADR1 pw1 seq 2
A: expect Executed token=S1 40 @ 150.0000 liq=A *
A: expect Canceled token=S1 dec=50 reason=U *
A: expect-none 300
S

# The gateway dies and comes back: the session is still there, from 1.
"$CLUSTER" kill gw-1 --dir "$T" >/dev/null
"$CLUSTER" start gw-1 --dir "$T" >/dev/null
client <<'S'
connect A TRADR1 pw1 seq 1
A: expect Accepted token=S1 *
A: expect Executed token=S1 40 @ 150.0000 liq=A *
A: expect Canceled token=S1 dec=50 reason=U *
A: expect-none 200
# tokens stay day-unique across the restart: S1 again is ignored
A: buy 100 AAPL 150 token S1
A: expect-none 300
A: buy 10 AAPL 150 token S2
A: expect Accepted token=S2 *
S

# Sequence number 0: only what comes from now on.
client <<'S'
connect A TRADR1 pw1 seq 0
A: expect-none 300
A: buy 10 AAPL 150 token S3
A: expect Accepted token=S3 *
S

# Garbage, a packet before login, an unknown packet type: each of those
# sessions is dropped, and a well-behaved session goes on untouched.
client <<'S'
connect A TRADR1 pw1 seq 0
connect G TRADR2 pw2 seq 0
G: raw 0005 5a 41 42 43 44
G: expect-none 500
A: buy 10 MSFT 300 token S4
A: expect Accepted token=S4 *
S
grep -q 'TRADR2' "$T/gw-1.log" || fail "the bad packet was not logged"
client <<'S'
connect A TRADR1 pw1 seq 0
A: buy 10 MSFT 300 token S5
A: expect Accepted token=S5 *
S
# bytes before any login
exec 3<>/dev/tcp/127.0.0.1/"$P"
printf '\x00\x03Uxy' >&3
sleep 0.3
if read -r -t 1 -u 3 _; then :; fi
exec 3>&-
# a wrong password is rejected
out=$("$CLIENT" --connect "127.0.0.1:$P" --timeout 2000 TRADR1 nope </dev/null 2>&1 || true)
echo "$out" | grep -q 'login rejected: A' || fail "bad password not rejected: $out"
client <<'S'
connect A TRADR1 pw1 seq 0
A: buy 10 MSFT 300 token S6
A: expect Accepted token=S6 *
S
echo "ok: resume, resume after a gateway restart, seq 0, bad clients isolated"
