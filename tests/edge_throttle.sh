#!/usr/bin/env bash
# The client edge (issue 17), a login's message rate and malformed input:
# a login flooding Enter Orders far above [gateway] login_rate has them
# held (login_queue) and, past the queue, Rejected 'o'; its Cancel is never
# rejected; another login on the same gateway is never throttled and every
# one of its orders is answered. An Enter, Replace or Cancel with an
# unprintable field is answered (Rejected with the field's reason, 'x' for
# the token; Cancel Reject) and the session stays up; an unknown OUCH type
# ends the session with a logged line. STATS counts it all, per login for
# the throttle. A Cancel waits behind its queued order; what a session's
# queue still holds when the session ends is answered (Rejected 'o') into
# the login's journal, read on the next login. Asserts behaviour, never
# timings: every wait is a watchdog.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-gateway lockstepctl

cluster_up --set gateway.login_rate=200 --set gateway.login_burst=50 \
	--set gateway.login_queue=100
python3 - "$P" >"$T/py.out" 2>&1 <<'PY' || { cat "$T/py.out" >&2; fail "the edge's answers (above)"; }
import socket, struct, sys, time
port = int(sys.argv[1])
FLOOD = 3000

class Sess:
    def __init__(self, user, pw, seq=0):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""
        self.closed = False
        self.send(b"L" + user.ljust(6).encode() + pw.ljust(10).encode() + b" " * 10 +
                  str(seq).encode().rjust(20))
        t, _ = self.packet(10)
        assert t == b"A", "login of %s refused (%r)" % (user, t)

    def send(self, payload):
        self.s.sendall(struct.pack(">H", len(payload)) + payload)

    def ouch(self, msg):
        self.send(b"U" + msg)

    def packet(self, secs):
        """The next packet (type, payload); (None, None) once closed or after secs."""
        end = time.time() + secs
        while True:
            if len(self.buf) >= 2:
                n = struct.unpack(">H", self.buf[:2])[0]
                if len(self.buf) >= 2 + n:
                    p, self.buf = self.buf[2:2 + n], self.buf[2 + n:]
                    return p[:1], p[1:]
            left = end - time.time()
            if left <= 0 or self.closed:
                return None, None
            self.s.settimeout(left)
            try:
                d = self.s.recv(65536)
            except socket.timeout:
                return None, None
            except OSError:
                d = b""
            if not d:
                self.closed = True
            self.buf += d

    def answers(self, secs):
        """OUCH messages (sequenced data) until secs pass without one."""
        while True:
            t, p = self.packet(secs)
            if t is None:
                return
            if t == b"S":
                yield p

def enter(token, side=b"B", price=10000, stock=b"AAPL", firm=b"FRMA"):
    return (b"O" + token.ljust(14) + side + struct.pack(">I", 100) + stock.ljust(8) +
            struct.pack(">II", price, 99999) + firm.ljust(4) + b"AAN" +
            struct.pack(">I", 0) + b"NR")

def cancel(token):
    return b"X" + token.ljust(14) + struct.pack(">I", 0)

def replace(old, new):
    return (b"U" + old.ljust(14) + new.ljust(14) + struct.pack(">III", 100, 10000, 99999) +
            b"AN" + struct.pack(">I", 0))

def token_reason(p):
    """(type, token, reason) of an outbound OUCH message."""
    if p[:1] == b"J":
        return "J", p[9:23].decode().rstrip(), chr(p[23])
    if p[:1] in (b"A", b"C", b"I"):
        return p[:1].decode(), p[9:23].decode().rstrip(), None
    return p[:1].decode(), None, None

a = Sess("TRADR1", "pw1")
b = Sess("TRADR2", "pw2")
# the flood: far more than the burst (50), the queue (100) and the rate
# (200/s) can take while it is read; then a Cancel of the first order
flood = b"".join(struct.pack(">H", 50) + b"U" + enter(b"F%06d" % i) for i in range(FLOOD))
# and a Cancel of an order likely still queued when the Cancel comes (it
# must wait behind it: Canceled, never a Cancel Reject before an Accepted)
a.s.sendall(flood + struct.pack(">H", 20) + b"U" + cancel(b"F000000") +
            struct.pack(">H", 20) + b"U" + cancel(b"F000070"))
# the other login meanwhile: every order answered, none throttled
for i in range(20):
    b.ouch(enter(b"B%03d" % i, firm=b"FRMB"))
got_b = {}
for p in b.answers(5):
    k, tok, why = token_reason(p)
    if k in ("A", "J"):
        got_b[tok] = (k, why)
    if len(got_b) == 20:
        break
assert len(got_b) == 20, "TRADR2: %d of 20 answered" % len(got_b)
assert all(v == ("A", None) for v in got_b.values()), "TRADR2 not all Accepted: %r" % got_b
got_a, canceled, canceled70 = {}, None, None
for p in a.answers(10):
    k, tok, why = token_reason(p)
    if k in ("A", "J") and tok.startswith("F"):
        assert tok not in got_a, "two answers for %s" % tok
        got_a[tok] = why or "A"
    if k in ("C", "I") and tok == "F000000":
        canceled = k
    if k in ("C", "I") and tok == "F000070":
        assert "F000070" in got_a, "F000070's Cancel answered (%s) before F000070" % k
        canceled70 = k
    if len(got_a) == FLOOD and canceled and canceled70:
        break
acc = sum(1 for v in got_a.values() if v == "A")
thr = sum(1 for v in got_a.values() if v == "o")
assert len(got_a) == FLOOD, "TRADR1: %d of %d answered" % (len(got_a), FLOOD)
assert acc + thr == FLOOD, "TRADR1: other answers than Accepted and Rejected 'o': %r" % (
    set(got_a.values()))
assert 150 <= acc < FLOOD and thr > 0, "TRADR1: %d accepted, %d throttled" % (acc, thr)
assert got_a["F000000"] == "A" and canceled == "C", "the Cancel under throttle: %r" % canceled
assert canceled70 == ("C" if got_a["F000070"] == "A" else "I"), \
    "F000070 %s, its Cancel %s" % (got_a["F000070"], canceled70)

# what a session's queue holds when it ends is answered all the same (into
# the login's journal: its client reads it on its next login)
a.s.sendall(b"".join(struct.pack(">H", 50) + b"U" + enter(b"D%05d" % i) for i in range(400)))
a.s.shutdown(socket.SHUT_WR)  # a FIN, not a reset: the gateway reads it all first
while a.packet(10)[0] is not None:
    pass
assert a.closed, "the session did not end after the client's FIN"
a2 = Sess("TRADR1", "pw1", seq=1)  # the whole day's answers again
got_d = {}
for p in a2.answers(5):
    k, tok, why = token_reason(p)
    if k in ("A", "J") and tok.startswith("D"):
        assert tok not in got_d, "two answers for %s" % tok
        got_d[tok] = why or "A"
    if len(got_d) == 400:
        break
assert len(got_d) == 400, "TRADR1's session ended: %d of 400 answered" % len(got_d)
assert set(got_d.values()) <= {"A", "o"}, set(got_d.values())
thr_d = sum(1 for v in got_d.values() if v == "o")
assert thr_d > 100, "only %d of 400 throttled: was the queue full when the session ended?" % thr_d
print("ended with its queue: %d answered, %d Rejected 'o'" % (len(got_d), thr_d))
print("flood: accepted %d throttled %d; cancel answered %s" % (acc, thr + thr_d, canceled))

# malformed, on a session of its own: answered, the session stays
c = Sess("TRADR3", "pw3")
bad_side = bytearray(enter(b"M1")); bad_side[15] = 0x01
bad_tok = bytearray(enter(b"M2")); bad_tok[2] = 0x02
bad_repl = bytearray(replace(b"M9", b"M3")); bad_repl[41] = 0x03
bad_cxl = bytearray(cancel(b"M4")); bad_cxl[3] = 0x04
for m in (bad_side, bad_tok, bad_repl, bad_cxl, enter(b"M5")):
    c.ouch(bytes(m))
want = {("J", "M1", "s"), ("J", "M?", "x"), ("J", "M3", "D"), ("I", "M4?", None),
        ("A", "M5", None)}
seen = set()
for p in c.answers(5):
    seen.add(token_reason(p))
    if want <= seen:
        break
assert want <= seen, "malformed answers: want %r, got %r" % (want, seen)
# an unknown type: no answer fits, the session ends
c.ouch(b"Q" + b" " * 10)
t, _ = c.packet(5)
while t is not None:
    t, _ = c.packet(5)
assert c.closed, "an unknown OUCH type did not end the session"
print("malformed: answered %d, unknown type disconnected" % len(want))
PY
cat "$T/py.out"
st() { stat_get gw-1 "$1"; }
d1=$(st throttle_delayed_TRADR1) r1=$(st throttle_rejected_TRADR1)
thr=$(sed -n 's/.*throttled \([0-9]*\);.*/\1/p' "$T/py.out")
[ "${d1:-0}" -ge 100 ] || fail "throttle_delayed_TRADR1 ${d1:-none}, want >= 100 (the queue)"
[ "${r1:-0}" = "$thr" ] || fail "throttle_rejected_TRADR1 ${r1:-none}, the client saw $thr"
[ -z "$(st throttle_delayed_TRADR2)$(st throttle_rejected_TRADR2)" ] ||
	fail "TRADR2 was throttled"
[ "$(st throttle_logins)" = 1 ] || fail "throttle_logins $(st throttle_logins), want 1"
[ "$(st throttle_rejected)" = "$r1" ] || fail "throttle_rejected total $(st throttle_rejected)"
[ "$(st malformed_rejects)" = 4 ] || fail "malformed_rejects $(st malformed_rejects), want 4"
[ "$(st protocol_errors)" = 1 ] || fail "protocol_errors $(st protocol_errors), want 1"
grep -q "undecodable OUCH (unknown message type" "$T/gw-1.log" ||
	fail "no log line for the unknown type's disconnect"
grep -q "over its rate" "$T/gw-1.log" || fail "no log line for the throttle"
echo "ok: TRADR1 delayed $d1 rejected $r1; TRADR2 untouched; malformed answered, unknown type disconnected"
