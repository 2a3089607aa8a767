#!/usr/bin/env bash
# GLIMPSE 5.0 snapshots (issue 18), end to end: a single sequencer, a
# gateway and 2 matcher replicas publishing the ITCH feed, each serving
# GLIMPSE on [feed] glimpse; a GLIMPSE client of its own here (Python,
# SoupBinTCP by hand). The tape has no time events (time_event = 0s): a
# quiet cluster is one whose tape does not move.
#  1. A book of displayed orders (Display 'Y': 'A'; 'A': 'F' with the
#     firm), one partly executed, one canceled, and non-displayed ones
#     (Display 'N'): TRADR1/pw1 gets Login Accepted (session ITCH,
#     sequence number 1), an 'R' and an 'H' for every symbol of [matcher]
#     symbols in order, then exactly the displayed resting orders in book
#     order with their shares and prices, then End of Snapshot 'G' whose
#     sequence number is the feed's messages so far + 1 (STATS
#     feed_messages, read before and after); every message of its ITCH
#     length; server heartbeats after it; Logout closes the session.
#  2. matcher-1 and matcher-2 give byte-identical snapshots.
#  3. A wrong password and an unknown username get Login Rejected 'A' and
#     are closed; a connection that sends nothing is closed after the
#     login timeout ([feed] glimpse_login_timeout, 2 s here), not before;
#     past [feed] glimpse_max connections (3 here), one more is closed at
#     once; all counted in STATS.
#  4. A book of 60,000 orders (lockstep-bench, passive only) and a client
#     that logs in with a small receive buffer and never reads: its socket
#     fills (its snapshot is never all sent) while the cluster goes on
#     answering orders and the matcher its control socket, the session
#     still open; after [feed] glimpse_idle_timeout of silence (6 s here)
#     it is closed, and a snapshot has every displayed order. The
#     matcher's pause for that build (feed_glimpse_build_us) is reported
#     (not under ASan: the plain build does it).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench lockstep-client lockstepctl
command -v python3 >/dev/null || skip "no python3"

# (the timeouts shorter than their defaults, 5 s and 15 s, so that parts 3
# and 4 wait less; 6 s leaves part 4 room for its orders in the meantime)
cluster_up --sequencers 1 --set sequencer.time_event=0s --set feed.glimpse_max=3 \
	--set feed.glimpse_login_timeout=2s --set feed.glimpse_idle_timeout=6s
for m in matcher-1 matcher-2; do
	grep -q "GLIMPSE: snapshots on" "$T/$m.log" || fail "$m: no GLIMPSE server in its log"
done
gport() { sed -n 's/^glimpse = 127\.0\.0\.1://p' "$T/$1.conf"; }
G1=$(gport matcher-1) G2=$(gport matcher-2)
SYMBOLS=$(sed -n 's/^symbols = //p' "$T/matcher-1.conf")
[ -n "$G1" ] && [ -n "$G2" ] && [ -n "$SYMBOLS" ] || fail "no glimpse port or symbols in the configs"

# --check-config reads the logins file
"$top_builddir/lockstep-matcher" --check-config -c "$T/matcher-1.conf" >/dev/null 2>&1 ||
	fail "--check-config refuses the cluster's logins file"
printf '[logins]\nTRADR1 = p@ss FRMA\n' >"$T/bad-logins.conf"
sed "s|^logins = .*|logins = $T/bad-logins.conf|" "$T/matcher-1.conf" >"$T/bad.conf"
out=$("$top_builddir/lockstep-matcher" --check-config -c "$T/bad.conf" 2>&1) &&
	fail "--check-config took a bad logins file"
grep -q "bad-logins.conf" <<<"$out" || fail "--check-config: $out"

cat >"$T/glimpse.py" <<'PY'
"""A GLIMPSE 5.0 client: SoupBinTCP 4.0 by hand, ITCH 5.0 lengths."""
import socket, struct, time

ITCH_LEN = {b"S": 12, b"R": 39, b"H": 25, b"A": 36, b"F": 40, b"E": 31, b"C": 36,
            b"X": 23, b"D": 19, b"U": 35, b"P": 44, b"G": 21}


def connect(port, rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    return s


def login(s, user, pw):
    s.sendall(struct.pack(">H", 47) + b"L" + user.ljust(6).encode() + pw.ljust(10).encode()
              + b" " * 10 + "0".rjust(20).encode())


class Reader:
    """SoupBinTCP packets of a socket, read in large pieces."""
    def __init__(self, s):
        self.s, self.buf, self.off = s, b"", 0

    def take(self, n):
        while len(self.buf) - self.off < n:
            c = self.s.recv(1 << 20)
            if not c:
                raise EOFError("closed with %d bytes of %d" % (len(self.buf) - self.off, n))
            self.buf = self.buf[self.off:] + c
            self.off = 0
        b = self.buf[self.off:self.off + n]
        self.off += n
        return b

    def packet(self):
        """(type, payload) of the next packet."""
        n = struct.unpack(">H", self.take(2))[0]
        body = self.take(n)
        return body[:1], body[1:]


def packet(s):
    """(type, payload) of the next packet of s (a Reader, or a socket read once)."""
    return (s if isinstance(s, Reader) else Reader(s)).packet()


def closed(s, secs):
    """True when the server closes s within secs (what it sends is read)."""
    end = time.time() + secs
    while time.time() < end:
        s.settimeout(max(0.01, end - time.time()))
        try:
            if s.recv(65536) == b"":
                return True
        except socket.timeout:
            pass
        except OSError:
            return True
    return False


def snapshot(port, user="TRADR1", pw="pw1"):
    """(reader, session, seq, raw bytes of the Sequenced Data packets, [ITCH
    messages]): read to the End of Snapshot."""
    s = connect(port)
    s.settimeout(20)
    login(s, user, pw)
    r = Reader(s)
    t, p = r.packet()
    assert t == b"A", "not Login Accepted: %r %r" % (t, p)
    session, seq = p[:10].decode().strip(), int(p[10:30].decode())
    raw, msgs = [], []
    while True:
        t, p = r.packet()
        if t == b"H":
            continue
        assert t == b"S", "not Sequenced Data: %r" % t
        raw.append(struct.pack(">H", len(p) + 1) + t + p)
        assert p[:1] in ITCH_LEN, "unknown ITCH type %r" % p[:1]
        assert len(p) == ITCH_LEN[p[:1]], "%r: %d bytes, not %d" % (p[:1], len(p), ITCH_LEN[p[:1]])
        msgs.append(p)
        if p[:1] == b"G":
            break
    return r, session, seq, b"".join(raw), msgs


def add_fields(m):
    """(type, stock, side, shares, price, attribution) of an 'A' or 'F'."""
    ref, side, shares, stock, price = struct.unpack(">QcI8sI", m[11:36])
    return (m[:1].decode(), stock.decode().strip(), side.decode(), shares, price,
            m[36:40].decode().strip() if m[:1] == b"F" else "")
PY
export PYTHONPATH="$T${PYTHONPATH:+:$PYTHONPATH}"

# ---- 1. a small book, one snapshot checked message by message
client <<'S'
connect A TRADR1 pw1 seq 0
connect B TRADR2 pw2 seq 0
A: buy 100 AAPL 10 display Y token G1
A: expect Accepted token=G1 *
A: buy 200 AAPL 11 token G2
A: expect Accepted token=G2 *
B: sell 100 AAPL 600 display Y token G4
B: expect Accepted token=G4 *
A: sell 300 MSFT 500 display Y token G3
A: expect Accepted token=G3 *
A: sell 100 MSFT 501 display N token H1
A: expect Accepted token=H1 *
B: buy 100 GOOG 12 display N token H2
B: expect Accepted token=H2 *
A: sell 500 INTC 20 display Y token G5
A: expect Accepted token=G5 *
B: buy 200 INTC 20 display Y token X1
B: expect Accepted token=X1 *
B: expect Executed token=X1 *
A: expect Executed token=G5 *
B: buy 100 TSLA 30 display Y token C1
B: expect Accepted token=C1 *
B: cancel C1
B: expect Canceled token=C1 *
S
agree matcher-1 matcher-2
fm=$(stat_get matcher-1 feed_messages)
python3 - "$G1" "$fm" "$SYMBOLS" <<'PY' || fail "the snapshot of matcher-1 (above)"
import sys, time
from glimpse import *
port, fm, symbols = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split()
s, session, seq, raw, msgs = snapshot(port)
assert session == "ITCH" and seq == 1, (session, seq)
types = b"".join(m[:1] for m in msgs)
n = len(symbols)
assert types[:2 * n] == b"RH" * n, types
for i, sym in enumerate(symbols):
    assert msgs[2 * i][11:19].decode().strip() == sym, (i, msgs[2 * i])
    assert msgs[2 * i + 1][11:19].decode().strip() == sym and msgs[2 * i + 1][19:20] == b"T"
book = [add_fields(m) for m in msgs[2 * n:-1]]
# book order: symbols in configuration order, bids (best first) then asks
want = [("F", "AAPL", "B", 200, 110000, "FRMA"), ("A", "AAPL", "B", 100, 100000, ""),
        ("A", "AAPL", "S", 100, 6000000, ""), ("A", "MSFT", "S", 300, 5000000, ""),
        ("A", "INTC", "S", 300, 200000, "")]
want.sort(key=lambda o: symbols.index(o[1]))
assert book == want, "book %r, want %r" % (book, want)
g = int(msgs[-1][1:21].decode())
assert g == fm + 1, "End of Snapshot %d, feed_messages %d" % (g, fm)
# heartbeats after the snapshot, then Logout closes it
s.s.settimeout(3)
t, _ = s.packet()
assert t == b"H", t
s.s.sendall(b"\x00\x01O")
assert closed(s.s, 3), "not closed after Logout Request"
print("matcher-1: %d messages, %d orders, End of Snapshot %d" % (len(msgs), len(book), g))
PY
[ "$(stat_get matcher-1 feed_messages)" = "$fm" ] || fail "the feed moved during the snapshot"
info "snapshot: R and H for $SYMBOLS, the 5 displayed orders, End of Snapshot $((fm + 1))"

# ---- 2. both replicas, byte for byte
python3 - "$G1" "$G2" <<'PY' || fail "the replicas' snapshots differ"
import sys
from glimpse import *
a = snapshot(int(sys.argv[1]))
b = snapshot(int(sys.argv[2]))
assert a[1:4] == b[1:4], "matcher-1 %r\nmatcher-2 %r" % (a[1:4], b[1:4])
print("byte-identical: %d bytes" % len(a[3]))
PY
info "matcher-1 and matcher-2: byte-identical snapshots"

# ---- 3. bad logins, the login timeout, glimpse_max
python3 - "$G1" <<'PY' || fail "bad logins, timeouts (above)"
import sys, time
from glimpse import *
port = int(sys.argv[1])
for user, pw in (("TRADR1", "wrong"), ("NOBODY", "pw1")):
    s = connect(port)
    s.settimeout(5)
    login(s, user, pw)
    t, p = packet(s)
    assert (t, p) == (b"J", b"A"), "%s: %r %r" % (user, t, p)
    assert closed(s, 2), "%s: not closed after Login Rejected" % user
# (the server's login deadline starts at its accept, after t0)
t0 = time.monotonic()
held = [connect(port) for _ in range(3)]
time.sleep(0.3)
extra = connect(port)
assert closed(extra, 1), "a connection past glimpse_max was not closed at once"
assert all(closed(s, 8) for s in held), "a connection without a login outlived 8 s"
took = time.monotonic() - t0
assert took > 1.9, "closed after %.1f s, before the 2 s login timeout" % took
print("rejected 'A' twice; closed without a login after %.1f s; one past glimpse_max refused" % took)
PY
for kv in feed_glimpse_logins_rejected=2 feed_glimpse_login_timeouts=3 feed_glimpse_refused_full=1; do
	v=$(stat_get matcher-1 "${kv%=*}")
	[ "$v" = "${kv#*=}" ] || fail "matcher-1 STATS ${kv%=*} $v, want ${kv#*=}"
done
info "bad logins rejected 'A', the login timeout, glimpse_max: counted"

# ---- 4. a deep book and a client that does not read
if asan_build; then
	echo "ok (part 4, the deep book and the client that does not read, is the plain build's)"
	exit 0
fi
"$BENCH" --connect "127.0.0.1:$P" --sessions 3 --orders 20000 --depth 20000 --mix 100:0:0:0 \
	--window 64 --timeout 20 >"$T/bench.out" 2>&1 || { cat "$T/bench.out" >&2; fail "bench"; }
agree matcher-1 matcher-2
open=$(stat_get matcher-1 orders_open)
[ "$open" -ge 60000 ] || fail "orders_open $open after the bench, want 60,000 and more"
sent0=$(stat_get matcher-1 feed_glimpse_snapshots_sent)
built0=$(stat_get matcher-1 feed_glimpse_snapshots)
python3 - "$G1" >"$T/slow.out" 2>&1 <<'PY' &
import sys, time
from glimpse import *
s = connect(int(sys.argv[1]), rcvbuf=4096)
login(s, "TRADR1", "pw1")
print("logged in", flush=True)
time.sleep(60)  # never reads; killed by the test
PY
SLOW=$!
EXTRA_PIDS+=("$SLOW")
wait_for 10 "the slow client's login" grep -q "logged in" "$T/slow.out"
built_more() { [ "$(stat_get matcher-1 feed_glimpse_snapshots)" -gt "$built0" ]; }
wait_for 10 "the slow client's snapshot built" built_more
sleep 1
[ "$(stat_get matcher-1 feed_glimpse_snapshots_sent)" = "$sent0" ] ||
	fail "the slow client's snapshot was all sent: its socket never filled"
sendq=$(ss -Htn state established "( sport = :$G1 )" 2>/dev/null | awk '{print $2}' | head -1)
info "the slow client's socket is full (server Send-Q ${sendq:-?} bytes); orders go on"
client <<'S'
connect A TRADR3 pw3 seq 0
connect B TRADR2 pw2 seq 0
A: buy 100 TSLA 20 display Y token W1
A: expect Accepted token=W1 *
B: sell 100 TSLA 20 display Y token W2
B: expect Accepted token=W2 *
B: expect Executed token=W2 *
A: expect Executed token=W1 *
S
agree matcher-1 matcher-2
[ -n "$(stat_get matcher-1 orders_open)" ] || fail "matcher-1 does not answer its control socket"
# all of that while the slow client's session was open
[ "$(stat_get matcher-1 feed_glimpse_sessions)" = 1 ] &&
	[ "$(stat_get matcher-1 feed_glimpse_idle_timeouts)" = 0 ] ||
	fail "the slow client's session closed before the orders were answered (a machine" \
		"this slow needs a longer glimpse_idle_timeout above)"
# silent for 6 s, it is closed
idle_closed() { [ "$(stat_get matcher-1 feed_glimpse_idle_timeouts)" = 1 ] &&
	[ "$(stat_get matcher-1 feed_glimpse_sessions)" = 0 ]; }
wait_for 15 "the slow client closed after 6 s of silence" idle_closed
kill "$SLOW" 2>/dev/null || true
wait "$SLOW" 2>/dev/null || true
open=$(stat_get matcher-1 orders_open) fm=$(stat_get matcher-1 feed_messages)
python3 - "$G1" "$open" "$fm" <<'PY' || fail "the deep book's snapshot (above)"
import sys, time
from glimpse import *
port, open_, fm = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
t0 = time.time()
s, session, seq, raw, msgs = snapshot(port)
adds = sum(1 for m in msgs if m[:1] in (b"A", b"F"))
g = int(msgs[-1][1:21].decode())
# H1 and H2 are open and not displayed
assert adds == open_ - 2, "%d orders in the snapshot, %d open (2 not displayed)" % (adds, open_)
assert g == fm + 1, "End of Snapshot %d, feed_messages %d" % (g, fm)
print("deep book: %d orders, %d bytes in %.2f s" % (adds, len(raw), time.time() - t0))
PY
us=$(stat_get matcher-1 feed_glimpse_build_us) bytes=$(stat_get matcher-1 feed_glimpse_image_bytes)
info "a book of $open orders ($bytes bytes): built in $us us on the matcher's loop"
builds=$(sed -n 's/.*GLIMPSE: snapshot of \([0-9]*\) messages.* built in \([0-9]*\) us.*/\1:\2/p' \
	"$T/matcher-1.log" | paste -sd' ')
[ -n "$builds" ] || fail "the builds are not logged"
info "matcher-1's builds (messages:us): $builds"
