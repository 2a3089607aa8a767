#!/usr/bin/env bash
# The client edge (issue 17), logins that cannot be held open: a connection
# that has not logged in within [gateway] login_timeout is closed whatever
# it sends (SoupBinTCP Debug packets used to keep it open for good, every
# byte resetting the 15 s idle clock), and one IPv4 address holds at most
# [gateway] max_sessions_per_address connections at once (1,024 idle
# connections from one host used to lock every firm out). Another address
# is not held back by it, and a client that logs in at once trades as
# before. Counted in STATS login_timeouts and address_refused.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-client

cluster_up --set gateway.login_timeout=1s --set gateway.max_sessions_per_address=3
python3 - "$P" <<'PY' || fail "the edge's checks (above)"
import socket, struct, sys, time
port = int(sys.argv[1])

def conn(src="127.0.0.1"):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s

def closed_within(s, secs, talk=False):
    """True when the gateway closes s within secs (talk: a Debug packet every 0.2 s)."""
    end = time.time() + secs
    while time.time() < end:
        if talk:
            try:
                s.sendall(struct.pack(">H", 6) + b"+hello")
            except OSError:
                return True
        s.settimeout(0.2)
        try:
            if s.recv(4096) == b"":
                return True
        except socket.timeout:
            pass
        except OSError:
            return True
    return False

# the cap: three from 127.0.0.1 stay, the fourth is closed at once
held = [conn() for _ in range(3)]
time.sleep(0.2)
extra = conn()
assert closed_within(extra, 0.5), "a fourth connection from one address was not refused"
# another address is not held back by it
other = conn("127.0.0.2")
assert not closed_within(other, 0.3), "a connection from 127.0.0.2 was closed at once"
# none of them logs in: each is closed after login_timeout (1 s), the one
# that keeps talking included
t0 = time.time()
assert closed_within(other, 3, talk=True), "a talking connection outlived login_timeout"
assert all(closed_within(s, 3) for s in held), "a silent connection outlived login_timeout"
took = time.time() - t0
print("ok: refused past 3 from one address; closed without a login after %.1f s" % took)
PY
lt=$(stat_get gw-1 login_timeouts) ar=$(stat_get gw-1 address_refused)
[ "${lt:-0}" -ge 4 ] || fail "login_timeouts $lt, want 4 (three silent, one talking)"
[ "${ar:-0}" = 1 ] || fail "address_refused $ar, want 1"
grep -q "not logged in within" "$T/gw-1.log" || fail "no log line for a login timeout"
client <<'S'
connect A TRADR1 pw1
A: buy 100 AAPL 150 token E1
A: expect Accepted token=E1 *
S
echo "ok: login_timeouts $lt, address_refused $ar; a client that logs in trades"
