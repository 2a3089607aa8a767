#!/usr/bin/env python3
"""A stand-in for a partition's market data publishers, for
tests/feed_arbitration.sh: an ITCH 5.0 message stream over MoldUDP64 on
two multicast groups (feeds A and B, the same messages, packet boundaries
that differ), datagrams dropped on each feed as a scenario says, a
retransmission server (MoldUDP64 request packets on UDP) and a GLIMPSE 5.0
snapshot server (SoupBinTCP 4.0). It keeps a book of its own (the rules of
lockstep-feed's book.h) and writes what the subscriber should end with.

Sends only on 127.0.0.1 and to multicast out of 127.0.0.1 with TTL 0.

Scenarios:
  arb       one-feed losses (never the same message on both), a range and
            the tail lost on both (answered by the retransmission server), a
            malformed datagram, a packet of another session, a duplicate
            packet, a message of a type lockstep does not publish
  lost      a range lost on both that the server does not hold (no answer)
  glimpse   paced; the subscriber starts late from a snapshot; --check
  badcheck  as glimpse, but the snapshots after the first one are wrong
  days      day 1, End of Session, day 2 (session ITCH000002) from seq 1

Files written into --dir: expected_book.txt, expected.itch (the messages
the subscriber records), both.txt (sequence numbers lost on both feeds),
requests.log ("SESSION SEQ COUNT" per request received), glimpse.log
("SESSION NEXT_SEQ" per snapshot served), glimpse_N.txt (the book of the
N-th snapshot, as expected_book.txt), day.itch (the glimpse scenario's day),
sent (messages sent so far), ready (the servers are up). With --wait-go,
nothing is sent before DIR/go exists; once DIR/stop exists (the subscriber
is done), nothing more is sent and the servers stop.
"""
import argparse
import os
import random
import socket
import struct
import sys
import threading
import time

SESSION = "ITCH"
USER, PASSWORD = "feed01", "secret"
SYMBOLS = ["AAPL", "IBM", "MSFT"]  # locates 1, 2, 3


def session_of(day):
    return SESSION if day == 1 else SESSION[:4] + "%06d" % day


def pad(s, n):
    return s.encode().ljust(n, b" ")[:n]


# ---- ITCH 5.0 ----------------------------------------------------------------

def hdr(t, locate, ts):
    return t.encode() + struct.pack(">HH", locate, 0) + ts.to_bytes(6, "big")


def m_system(ts, code):
    return hdr("S", 0, ts) + code.encode()


def m_directory(ts, locate, stock):
    return (hdr("R", locate, ts) + pad(stock, 8) + b"QN" + struct.pack(">I", 100) + b"NC" +
            b"Z " + b"PN 1N" + struct.pack(">I", 0) + b"N")


def m_trading(ts, locate, stock, state):
    return hdr("H", locate, ts) + pad(stock, 8) + state.encode() + b" " + b"    "


def m_add(ts, locate, stock, ref, side, shares, price, mpid=None):
    b = (hdr("F" if mpid else "A", locate, ts) + struct.pack(">Q", ref) + side.encode() +
         struct.pack(">I", shares) + pad(stock, 8) + struct.pack(">I", price))
    return b + pad(mpid, 4) if mpid else b


def m_exec(ts, locate, ref, shares, match, price=None):
    b = hdr("C" if price else "E", locate, ts) + struct.pack(">QIQ", ref, shares, match)
    return b + b"Y" + struct.pack(">I", price) if price else b


def m_cancel(ts, locate, ref, shares):
    return hdr("X", locate, ts) + struct.pack(">QI", ref, shares)


def m_delete(ts, locate, ref):
    return hdr("D", locate, ts) + struct.pack(">Q", ref)


def m_replace(ts, locate, old, new, shares, price):
    return hdr("U", locate, ts) + struct.pack(">QQII", old, new, shares, price)


def m_trade(ts, locate, stock, shares, price, match):
    return (hdr("P", locate, ts) + struct.pack(">Q", 0) + b"B" + struct.pack(">I", shares) +
            pad(stock, 8) + struct.pack(">IQ", price, match))


def m_regsho(ts, locate, stock):  # 'Y': ITCH 5.0, not published by lockstep
    return hdr("Y", locate, ts) + pad(stock, 8) + b"0"


def m_end_of_snapshot(seq):
    return b"G" + str(seq).encode().ljust(20, b" ")


LENS = {"S": 12, "R": 39, "H": 25, "A": 36, "F": 40, "E": 31, "C": 36, "X": 23, "D": 19,
        "U": 35, "P": 44, "Y": 20, "G": 21}


# ---- the book (book.h's rules) ----------------------------------------------

class Book:
    def __init__(self):
        self.syms = {}  # stock -> [locate, state]
        self.orders = {}  # ref -> [stock, side, shares, price, prio, mpid]
        self.prio = 0

    def add(self, stock, ref, side, shares, price, mpid=None):
        self.orders[ref] = [stock, side, shares, price, self.prio, mpid]
        self.prio += 1

    def reduce(self, ref, shares):
        o = self.orders[ref]
        o[2] -= shares
        if o[2] <= 0:
            del self.orders[ref]

    def replace(self, old, new, shares, price):
        o = self.orders.pop(old)
        if not (price == o[3] and shares <= o[2]):
            o[4] = self.prio
            self.prio += 1
        o[2], o[3] = shares, price
        self.orders[new] = o

    def in_book_order(self, stock):
        os_ = [(r, o) for r, o in self.orders.items() if o[0] == stock]
        os_.sort(key=lambda x: (x[1][1] != "B", -x[1][3] if x[1][1] == "B" else x[1][3],
                                x[1][4]))
        return os_

    def dump(self):
        out = []
        for stock in sorted(self.syms):
            locate, state = self.syms[stock]
            out.append("%s state %s locate %d" % (stock, state or "-", locate))
            for ref, o in self.in_book_order(stock):
                out.append("%s %s %d.%04d %d %d" % (stock, o[1], o[3] // 10000, o[3] % 10000,
                                                   o[2], ref))
        return "".join(line + "\n" for line in out)

    def snapshot(self, next_seq, corrupt=False):
        """GLIMPSE: R and H for every symbol, the orders, End of Snapshot."""
        msgs, ts = [], 1
        for stock, (locate, state) in sorted(self.syms.items(), key=lambda x: x[1][0]):
            msgs.append(m_directory(ts, locate, stock))
            msgs.append(m_trading(ts, locate, stock, state or "T"))
        first = True
        for stock, (locate, _) in sorted(self.syms.items(), key=lambda x: x[1][0]):
            for ref, o in self.in_book_order(stock):
                shares = o[2] + (1 if corrupt and first else 0)
                first = False
                msgs.append(m_add(ts, locate, stock, ref, o[1], shares, o[3], o[5]))
        msgs.append(m_end_of_snapshot(next_seq))
        return msgs


class Generator:
    """A day's valid message stream, and the book it leaves."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.book = Book()
        self.ts = 34200 * 10**9
        self.ref = 1000 * seed
        self.match = 0

    def t(self):
        self.ts += self.r.randint(1000, 100000)
        return self.ts

    def opening(self):
        msgs = [m_system(self.t(), "O"), m_system(self.t(), "S")]
        for i, s in enumerate(SYMBOLS):
            msgs.append(m_directory(self.t(), i + 1, s))
            self.book.syms[s] = [i + 1, None]
        for i, s in enumerate(SYMBOLS):
            msgs.append(m_trading(self.t(), i + 1, s, "T"))
            self.book.syms[s][1] = "T"
        msgs.append(m_system(self.t(), "Q"))
        return msgs

    def price(self, side):
        return (990000 if side == "B" else 1000000) + 100 * self.r.randint(0, 40)

    def one(self):
        r, b = self.r, self.book
        op = r.randint(0, 99)
        if len(b.orders) < 20 or op < 35:
            stock = r.choice(SYMBOLS)
            locate = b.syms[stock][0]
            self.ref += 1
            side = r.choice("BS")
            shares, price = r.randint(1, 500), self.price(side)
            mpid = "LSTP" if r.randint(0, 4) == 0 else None
            b.add(stock, self.ref, side, shares, price, mpid)
            return m_add(self.t(), locate, stock, self.ref, side, shares, price, mpid)
        ref = r.choice(sorted(b.orders))
        o = b.orders[ref]
        locate = b.syms[o[0]][0]
        if op < 50:
            sh = r.randint(1, o[2])
            self.match += 1
            b.reduce(ref, sh)
            if r.randint(0, 1):
                return m_exec(self.t(), locate, ref, sh, self.match)
            return m_exec(self.t(), locate, ref, sh, self.match, o[3])
        if op < 60:
            sh = r.randint(1, o[2])
            b.reduce(ref, sh)
            return m_cancel(self.t(), locate, ref, sh)
        if op < 72:
            del b.orders[ref]
            return m_delete(self.t(), locate, ref)
        if op < 92:
            self.ref += 1
            price = o[3] if r.randint(0, 1) else self.price(o[1])
            shares = r.randint(1, o[2] + 50)
            b.replace(ref, self.ref, shares, price)
            return m_replace(self.t(), locate, ref, self.ref, shares, price)
        self.match += 1
        return m_trade(self.t(), locate, o[0], r.randint(1, 300), o[3], self.match)


# ---- MoldUDP64 -----------------------------------------------------------------

def mold(session, seq, msgs):
    return (pad(session, 10) + struct.pack(">QH", seq, len(msgs)) +
            b"".join(struct.pack(">H", len(m)) + m for m in msgs))


def mold_control(session, next_seq, count):
    return pad(session, 10) + struct.pack(">QH", next_seq, count)


def packets(msgs, per, first=1):
    """[(first_seq, [msg...])], `per` messages a packet."""
    return [(first + i, msgs[i:i + per]) for i in range(0, len(msgs), per)]


def covered(pkts, idxs):
    s = set()
    for i in idxs:
        seq, ms = pkts[i]
        s.update(range(seq, seq + len(ms)))
    return s


class Sim:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.days = {}  # session -> messages (seq n at [n - 1])
        self.sent = 0  # messages of the current day sent
        self.cur = SESSION
        self.held_back = set()  # (session, seq) the server does not hold
        self.glimpses = 0
        self.done = False
        self.d = a.dir
        self.ga = self.addr(a.a)
        self.gb = self.addr(a.b)
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        self.tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
        self.tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        self.tx.bind(("127.0.0.1", 0))
        self.rq = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rq.bind(("127.0.0.1", a.retrans_port))
        self.rq.settimeout(0.1)
        self.log_req = open(os.path.join(self.d, "requests.log"), "w")
        self.log_gl = open(os.path.join(self.d, "glimpse.log"), "w")

    @staticmethod
    def addr(s):
        h, p = s.rsplit(":", 1)
        return (h, int(p))

    def path(self, name):
        return os.path.join(self.d, name)

    # -- the retransmission server --
    def serve_requests(self):
        while not self.done:
            try:
                pkt, src = self.rq.recvfrom(100)
            except socket.timeout:
                continue
            if len(pkt) != 20:
                continue
            sess = pkt[:10].decode().rstrip()
            seq, count = struct.unpack(">QH", pkt[10:20])
            self.log_req.write("%s %d %d\n" % (sess, seq, count))
            self.log_req.flush()
            with self.lock:
                msgs = self.days.get(sess, [])
                have = [(s, msgs[s - 1]) for s in range(seq, seq + count)
                        if 1 <= s <= len(msgs) and (sess, s) not in self.held_back and
                        (sess != self.cur or s <= self.sent)]
            # contiguous runs, up to 20 messages a packet
            run = []
            for s, m in have + [(None, None)]:
                if run and (s is None or s != run[0][0] + len(run) or len(run) == 20):
                    self.rq.sendto(mold(sess, run[0][0], [x[1] for x in run]), src)
                    run = []
                if s is not None:
                    run.append((s, m))

    # -- the GLIMPSE server --
    def serve_glimpse(self):
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", self.a.glimpse_port))
        ls.listen(4)
        ls.settimeout(0.1)
        while not self.done:
            try:
                c, _ = ls.accept()
            except socket.timeout:
                continue
            threading.Thread(target=self.glimpse_session, args=(c,), daemon=True).start()

    def glimpse_session(self, c):
        def recv_exact(n):
            b = b""
            while len(b) < n:
                x = c.recv(n - len(b))
                if not x:
                    raise EOFError
                b += x
            return b

        def soup(t, payload=b""):
            return struct.pack(">H", len(payload) + 1) + t.encode() + payload

        try:
            c.settimeout(5)
            n = struct.unpack(">H", recv_exact(2))[0]
            body = recv_exact(n)
            if body[:1] != b"L" or body[1:7].decode().rstrip() != USER or \
                    body[7:17].decode().rstrip() != PASSWORD:
                c.sendall(soup("J", b"A"))
                return
            with self.lock:
                sess, nxt = self.cur, self.sent + 1
                self.glimpses += 1
                corrupt = self.a.scenario == "badcheck" and self.glimpses > 1
                book = self.book_at(sess, self.sent)
                msgs = book.snapshot(nxt, corrupt)
                self.log_gl.write("%s %d\n" % (sess, nxt))
                self.log_gl.flush()
                with open(self.path("glimpse_%d.txt" % self.glimpses), "w") as f:
                    f.write(book.dump())
            out = soup("A", sess.encode().rjust(10, b" ") + str(nxt).encode().rjust(20, b" "))
            for m in msgs:
                out += soup("S", m)
            c.sendall(out)
            c.settimeout(0.5)
            for _ in range(10):  # heartbeats until the client logs out
                try:
                    x = c.recv(100)
                    if not x or b"O" in x:
                        break
                except socket.timeout:
                    c.sendall(soup("H"))
        except (EOFError, OSError):
            pass
        finally:
            c.close()

    def book_at(self, sess, upto):
        """The book after messages 1..upto of day `sess` (replayed)."""
        return self.replay_book(self.days[sess][:upto])

    def stopped(self):
        """DIR/stop exists: the subscriber is done."""
        return os.path.exists(self.path("stop"))

    # -- the feeds --
    def send(self, side, data):
        self.tx.sendto(data, self.ga if side == "a" else self.gb)

    def heartbeat(self, sess, nxt, count=0):
        for side in "ab":
            self.send(side, mold_control(sess, nxt, count))

    def run_day(self, sess, msgs, drop_a=(), drop_b=(), pace=0.0, extra=None):
        pa, pb = packets(msgs, 3), packets(msgs, 2)
        ia = ib = 0
        while (ia < len(pa) or ib < len(pb)) and not self.stopped():
            # the packet that starts first goes first; ties: A, B alternately
            sa = pa[ia][0] if ia < len(pa) else 1 << 62
            sb = pb[ib][0] if ib < len(pb) else 1 << 62
            side = "a" if (sa < sb or (sa == sb and (sa // 50) % 2 == 0)) else "b"
            if side == "a":
                seq, ms = pa[ia]
                if ia not in drop_a:
                    self.send("a", mold(sess, seq, ms))
                ia += 1
            else:
                seq, ms = pb[ib]
                if ib not in drop_b:
                    self.send("b", mold(sess, seq, ms))
                ib += 1
            with self.lock:
                self.sent = max(self.sent, seq + len(ms) - 1)
            with open(self.path("sent"), "w") as f:
                f.write("%d\n" % self.sent)
            if extra:
                extra(side, seq)
            time.sleep(pace if pace else 0.0005)

    def prepare_day(self, sess, seed, n):
        g = Generator(seed)
        msgs = g.opening()
        while len(msgs) < n:
            msgs.append(g.one())
        self.days[sess] = msgs
        return msgs, g.book

    @staticmethod
    def replay_book(msgs):
        """The book after msgs (a GLIMPSE snapshot's: replayed when asked for)."""
        b = Book()
        for m in msgs:
            t = chr(m[0])
            if t == "R":
                b.syms[m[11:19].decode().rstrip()] = [struct.unpack(">H", m[1:3])[0], None]
            elif t == "H":
                b.syms[m[11:19].decode().rstrip()][1] = chr(m[19])
            elif t in "AF":
                ref, side, shares = struct.unpack(">QcI", m[11:24])
                stock = m[24:32].decode().rstrip()
                price = struct.unpack(">I", m[32:36])[0]
                b.add(stock, ref, side.decode(), shares, price,
                      m[36:40].decode() if t == "F" else None)
            elif t in "EC":
                ref, shares = struct.unpack(">QI", m[11:23])
                b.reduce(ref, shares)
            elif t == "X":
                ref, shares = struct.unpack(">QI", m[11:23])
                b.reduce(ref, shares)
            elif t == "D":
                del b.orders[struct.unpack(">Q", m[11:19])[0]]
            elif t == "U":
                old, new, shares, price = struct.unpack(">QQII", m[11:35])
                b.replace(old, new, shares, price)
        return b

    def write_expected(self, book, recorded):
        with open(self.path("expected_book.txt"), "w") as f:
            f.write(book.dump())
        with open(self.path("expected.itch"), "wb") as f:
            for m in recorded:
                f.write(struct.pack(">H", len(m)) + m)

    def linger(self, sess, nxt, seconds, count=0):
        """Heartbeats for `seconds`, or until DIR/stop."""
        end = time.time() + seconds
        while time.time() < end and not self.stopped():
            self.heartbeat(sess, nxt, count)
            time.sleep(0.1)


def scenario_arb(s, lost=False):
    msgs, book = s.prepare_day(SESSION, 1, 400)
    # a message lockstep does not publish, in the middle: counted, skipped
    msgs.insert(100, m_regsho(1, 1, "AAPL"))
    s.days[SESSION] = msgs
    pa, pb = packets(msgs, 3), packets(msgs, 2)
    n = len(msgs)
    # a range lost on both: every packet holding seq 250..253
    both_range = set(range(250, 254))
    da = {i for i, (q, m) in enumerate(pa) if both_range & set(range(q, q + len(m)))}
    db = {i for i, (q, m) in enumerate(pb) if both_range & set(range(q, q + len(m)))}
    if not lost:  # and the tail, lost on both: only the heartbeat tells
        da.add(len(pa) - 1)
        db.add(len(pb) - 1)
    # one-feed losses, never a message lost on both besides those
    for i in range(5, len(pa) - 3, 17):
        da.add(i)
    lost_a = covered(pa, da)
    for i in range(8, len(pb) - 3, 13):
        if not (covered(pb, [i]) & lost_a):
            db.add(i)
    both = covered(pa, da) & covered(pb, db)
    with open(s.path("both.txt"), "w") as f:
        f.write("".join("%d\n" % q for q in sorted(both)))
    if lost:
        s.held_back = {(SESSION, q) for q in both}

    once = set()

    def extra(side, seq):
        if seq >= 61 and side not in once:
            once.add(side)
            if side == "a":
                s.send("a", b"\x01\x02garbage")  # malformed: shorter than a header
                s.send("a", mold(SESSION, pa[3][0], pa[3][1]))  # a duplicate packet
            else:
                s.send("b", mold("OTHER", 1, msgs[:2]))  # another feed's session

    s.write_expected(book, msgs)

    def run():
        s.run_day(SESSION, msgs, da, db, extra=extra)
        s.linger(SESSION, n + 1, s.a.linger)
    return run


def scenario_glimpse(s):
    msgs, book = s.prepare_day(SESSION, 2, 3000)
    pa, pb = packets(msgs, 3), packets(msgs, 2)
    # one range lost on both, after the snapshot
    both_range = set(range(700, 703))
    da = {i for i, (q, m) in enumerate(pa) if both_range & set(range(q, q + len(m)))}
    db = {i for i, (q, m) in enumerate(pb) if both_range & set(range(q, q + len(m)))}
    for i in range(100, len(pa) - 3, 23):
        da.add(i)
    with open(s.path("both.txt"), "w") as f:
        f.write("".join("%d\n" % q for q in sorted(covered(pa, da) & covered(pb, db))))
    with open(s.path("expected_book.txt"), "w") as f:
        f.write(book.dump())
    with open(s.path("day.itch"), "wb") as f:
        for m in msgs:
            f.write(struct.pack(">H", len(m)) + m)

    def run():
        s.run_day(SESSION, msgs, da, db, pace=s.a.pace_ms / 1000.0)
        s.linger(SESSION, len(msgs) + 1, s.a.linger)
        # what the subscriber records: from the first snapshot's position on
        with open(s.path("glimpse.log")) as f:
            first = int(f.readline().split()[1])
        s.write_expected(book, msgs[first - 1:])
    return run


def scenario_days(s):
    d1, _ = s.prepare_day(session_of(1), 3, 200)
    d2, book2 = s.prepare_day(session_of(2), 4, 200)
    s.write_expected(book2, d1 + d2)

    def run():
        s.run_day(session_of(1), d1)
        # End of Session on both feeds a few times, then day 2 from 1
        for _ in range(3):
            s.heartbeat(session_of(1), len(d1) + 1, 0xFFFF)
            time.sleep(0.05)
        with s.lock:
            s.cur, s.sent = session_of(2), 0
        s.run_day(session_of(2), d2, drop_a={0, 5}, drop_b=set())
        s.linger(session_of(2), len(d2) + 1, s.a.linger)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True,
                    choices=["arb", "lost", "glimpse", "badcheck", "days"])
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--retrans-port", type=int, required=True)
    ap.add_argument("--glimpse-port", type=int, default=0)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--linger", type=float, default=3.0,
                    help="heartbeats after the stream for this long at most (until DIR/stop)")
    ap.add_argument("--pace-ms", type=float, default=1.0)
    ap.add_argument("--wait-go", action="store_true",
                    help="send once the file DIR/go exists (the subscriber has joined)")
    a = ap.parse_args()
    s = Sim(a)
    threads = [threading.Thread(target=s.serve_requests, daemon=True)]
    if a.glimpse_port:
        threads.append(threading.Thread(target=s.serve_glimpse, daemon=True))
    if a.scenario in ("arb", "lost"):
        run = scenario_arb(s, lost=a.scenario == "lost")
    elif a.scenario in ("glimpse", "badcheck"):
        run = scenario_glimpse(s)
    else:
        run = scenario_days(s)
    for t in threads:
        t.start()
    with open(s.path("ready"), "w") as f:
        f.write("1\n")
    try:
        if a.wait_go:  # the subscriber has joined: DIR/go
            end = time.time() + 30
            while not os.path.exists(s.path("go")) and time.time() < end:
                time.sleep(0.01)
        run()
    finally:
        s.done = True
        for t in threads:
            t.join(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
