#!/usr/bin/env bash
# lockstep-replay over trading days, without a cluster: tests/daytape writes
# a journal of three days (day 1 from seq 1, days 2 and 3 opened by
# START_OF_DAY in segments of their own, each several segments long; day 3
# not ended). Then:
# - `days` lists the three days, their sessions, ranges and ends;
# - verify (and --day), dump --day with each event's session and per-day seq;
# - export-pcap puts each day in its own MoldUDP64 session numbered from 1,
#   no datagram holding two days (checked by parsing the pcap, and with
#   tshark's MoldUDP64 dissector when tshark is there); --day 3 alone;
# - send (re-multicast, to a unicast loopback port) does the same on the wire;
# - archive: the last day is refused, day 1 archived and read by days,
#   verify and dump like a directory; a damaged archive and a damaged record
#   are refused, no temporary directory is left behind; --remove of a day
#   not at the head is refused; --all-before 3 --remove leaves the journal
#   starting at day 3, and the archive and the rest agree with the original.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-replay tests/daytape
use_tmpdir replay-days
export TMPDIR=$T/tmp
mkdir -p "$TMPDIR"
J=$T/j
"$top_builddir/tests/daytape" "$J" 3 40 --open-last --segment-bytes 1024 >"$T/bases"
read -r _ _ b1 l1 < <(sed -n 1p "$T/bases")
read -r _ _ b2 l2 < <(sed -n 2p "$T/bases")
read -r _ _ b3 l3 < <(sed -n 3p "$T/bases")
info "days at $b1..$l1, $b2..$l2, $b3..$l3 in $(ls "$J" | wc -l) segments"
cp -r "$J" "$T/orig"

# --- days ---
"$REPLAY" days "$J" --json >"$T/days.json"
python3 - "$T/days.json" "$b1" "$l1" "$b2" "$l2" "$b3" "$l3" <<'PY' || fail "days: $(cat "$T/days.json")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
b = list(map(int, sys.argv[2:]))
want = [(1, "TAPE", b[0], b[1], True), (2, "TAPE000002", b[2], b[3], True),
        (3, "TAPE000003", b[4], b[5], False)]
got = [(r["day"], r["session"], r["first"], r["last"], r["ended"]) for r in rows]
assert got == want, got
assert all(r["events"] == r["last"] - r["first"] + 1 for r in rows)
assert rows[1]["first_time"].startswith("2026-12-02T09:30:00"), rows[1]
PY
"$REPLAY" days "$J" | grep -q "^2 *TAPE000002 *$b2\.\.$l2 .* yes$" || fail "days: text: $("$REPLAY" days "$J")"

# --- verify, dump ---
"$REPLAY" verify "$J" | grep -q "^ok: .* 2 days opened" || fail "verify: $("$REPLAY" verify "$J")"
"$REPLAY" verify "$J" --day 2 | grep -q "^ok: day 2: $((l2 - b2 + 1)) records" || fail "verify --day 2"
"$REPLAY" dump "$J" --day 2 >"$T/dump2"
[ "$(wc -l <"$T/dump2")" -eq $((l2 - b2 + 1)) ] || fail "dump --day 2: $(wc -l <"$T/dump2") lines"
head -1 "$T/dump2" | grep -q "seq=$b2 day=2 TAPE000002#1 .*START-OF-DAY 2" || fail "dump: $(head -1 "$T/dump2")"
tail -1 "$T/dump2" | grep -q "seq=$l2 day=2 TAPE000002#$((l2 - b2 + 1)) .*END-OF-DAY 2" ||
	fail "dump: $(tail -1 "$T/dump2")"
"$REPLAY" dump "$J" --from "$l1" --to "$b2" --json | python3 -c '
import json, sys
a, b = [json.loads(l) for l in sys.stdin]
assert (a["session"], a["day"], a["type"]) == ("TAPE", 1, "end_of_day"), a
assert (b["session"], b["day_seq"], b["type"], b["day_event"]) == ("TAPE000002", 1, "start_of_day", 2), b
' || fail "dump --json across the day boundary"

# --- pcap: one session a day, numbered from 1; no datagram spans days ---
# check_mold FILE.pcap|-udp FILE EXPECT: every MoldUDP64 data packet's
# blocks are Events whose index (protobuf field 2) maps to (session, seq) by
# the days' bases; the sessions seen, in order, are EXPECT.
cat >"$T/mold.py" <<'PY'
import struct, sys
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if not c & 0x80: return v, i
def event_seq(b):
    i = 0
    while i < len(b):
        k, i = varint(b, i); f, w = k >> 3, k & 7
        if w == 0:
            v, i = varint(b, i)
            if f == 2: return v
        elif w == 2:
            n, i = varint(b, i); i += n
        elif w == 1: i += 8
        elif w == 5: i += 4
    return 0
def packets(path, kind):
    d = open(path, "rb").read()
    if kind == "pcap":
        i = 24
        while i < len(d):
            n = struct.unpack_from("<I", d, i + 8)[0]
            yield d[i + 16 + 42:i + 16 + n]; i += 16 + n
    else:  # length-prefixed datagrams (u32 LE) from the udp listener
        i = 0
        while i < len(d):
            n = struct.unpack_from("<I", d, i)[0]; yield d[i + 4:i + 4 + n]; i += 4 + n
kind, path, bases = sys.argv[1], sys.argv[2], list(map(int, sys.argv[3].split(",")))
names = ["TAPE", "TAPE000002", "TAPE000003"]
seen, events, nxt = [], 0, {}
for p in packets(path, kind):
    sess = p[:10].decode().rstrip(); seq, count = struct.unpack_from(">QH", p, 10)
    if count in (0, 0xFFFF): continue
    day = names.index(sess) + 1
    if not seen or seen[-1] != sess: seen.append(sess)
    assert nxt.get(sess, seq) == seq, (sess, seq, nxt.get(sess))
    i = 20
    for k in range(count):
        n = struct.unpack_from(">H", p, i)[0]; idx = event_seq(p[i + 2:i + 2 + n]); i += 2 + n
        assert idx - bases[day - 1] + 1 == seq + k, (sess, seq, k, idx)
    nxt[sess] = seq + count; events += count
print(" ".join(seen), events)
PY
"$REPLAY" pcap "$J" "$T/all.pcap" 2>/dev/null
got=$(python3 "$T/mold.py" pcap "$T/all.pcap" "$b1,$b2,$b3") || fail "pcap: bad packets"
[ "$got" = "TAPE TAPE000002 TAPE000003 $l3" ] || fail "pcap: $got"
"$REPLAY" pcap "$J" "$T/d3.pcap" --day 3 2>/dev/null
got=$(python3 "$T/mold.py" pcap "$T/d3.pcap" "$b1,$b2,$b3") || fail "pcap --day 3: bad packets"
[ "$got" = "TAPE000003 $((l3 - b3 + 1))" ] || fail "pcap --day 3: $got"
# one sequencer batch across the day boundaries: still a datagram per day
"$top_builddir/tests/daytape" "$T/one" 3 40 --open-last --one-batch >/dev/null
"$REPLAY" pcap "$T/one" "$T/one.pcap" --max-datagram 65000 2>/dev/null
got=$(python3 "$T/mold.py" pcap "$T/one.pcap" "$b1,$b2,$b3") || fail "pcap of one batch: bad packets"
[ "$got" = "TAPE TAPE000002 TAPE000003 $l3" ] || fail "pcap of one batch: $got"
if command -v tshark >/dev/null; then
	tshark -r "$T/all.pcap" -d udp.port==9200,moldudp64 -T fields -e moldudp64.session \
		-e moldudp64.sequence 2>/dev/null | awk '{ print $1 }' | uniq >"$T/tshark"
	[ "$(tr '\n' ' ' <"$T/tshark")" = "TAPE TAPE000002 TAPE000003 " ] ||
		fail "tshark sees sessions: $(cat "$T/tshark")"
fi

# --- send: the same sessions on the wire ---
port=$((20000 + RANDOM % 20000))
python3 - "$port" "$T/udp" <<'PY' &
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.settimeout(5)
open(sys.argv[2] + ".ready", "w").close()
with open(sys.argv[2], "wb") as f:
    try:
        while True:
            d = s.recv(70000); f.write(struct.pack("<I", len(d)) + d); f.flush()
            if struct.unpack_from(">H", d, 18)[0] == 0xFFFF: break
    except socket.timeout:
        pass
PY
lpid=$!
try_for 10 test -e "$T/udp.ready" || fail "the UDP listener did not start"
"$REPLAY" send "$J" --group "127.0.0.1:$port" --pace max --linger 0 --auth off \
	--tape-session TAPE >"$T/send.out" 2>&1 || fail "send: $(cat "$T/send.out")"
wait "$lpid"
got=$(python3 "$T/mold.py" udp "$T/udp" "$b1,$b2,$b3") || fail "send: bad packets"
[ "$got" = "TAPE TAPE000002 TAPE000003 $l3" ] || fail "send: $got"

# --- archive ---
if "$REPLAY" archive "$J" --day 3 --out "$T/d3.lsa" 2>"$T/err"; then fail "archived the open day 3"; fi
grep -q "last" "$T/err" || fail "archive --day 3: $(cat "$T/err")"
"$REPLAY" archive "$J" --day 1 --out "$T/d1.lsa" | grep -q "archived seq $b1..$l1" || fail "archive --day 1"
[ ! -e "$T/d1.lsa.tmp" ] || fail "archive left its temporary file"
"$REPLAY" days "$T/d1.lsa" | grep -q "^1 *TAPE *$b1\.\.$l1 .* yes$" || fail "days of an archive"
"$REPLAY" verify "$T/d1.lsa" | grep -q "^ok: $l1 records" || fail "verify of an archive"
cmp <("$REPLAY" dump "$T/d1.lsa") <("$REPLAY" dump "$J" --day 1) || fail "dump of an archive"
[ -z "$(ls -A "$TMPDIR")" ] || fail "an unpacked archive was left in $TMPDIR: $(ls "$TMPDIR")"
# a damaged archive: refused, nothing left behind
python3 - "$T/d1.lsa" "$T/bad.lsa" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read()); b[len(b) // 2] ^= 0x40
open(sys.argv[2], "wb").write(b)
PY
if "$REPLAY" verify "$T/bad.lsa" >"$T/out" 2>&1; then fail "verify accepted a damaged archive"; fi
[ -z "$(ls -A "$TMPDIR")" ] || fail "a damaged archive left $(ls "$TMPDIR")"
head -c 100 "$T/d1.lsa" >"$T/short.lsa"
if "$REPLAY" dump "$T/short.lsa" >/dev/null 2>"$T/err"; then fail "dump read a truncated archive"; fi
grep -q "truncated\|ends" "$T/err" || fail "truncated archive: $(cat "$T/err")"
# zeros a crashed writer left after the last segment's records ([node]
# journal_ahead): archived up to the records, and --remove takes the file
cp -r "$T/orig" "$T/zj"
last=$(ls "$T/zj" | tail -1)
head -c 5000 /dev/zero >>"$T/zj/$last"
"$REPLAY" archive "$T/zj" --all --out "$T/zall.lsa" --remove >"$T/out" 2>&1 ||
	fail "archive --all of a journal with zeros after its records: $(cat "$T/out")"
"$REPLAY" verify "$T/zall.lsa" | grep -q "^ok: $l3 records" || fail "verify of the zeros' archive"
cmp <("$REPLAY" dump "$T/zall.lsa") <("$REPLAY" dump "$T/orig") || fail "dump of the zeros' archive"
[ -z "$(ls -A "$T/zj")" ] || fail "--remove left $(ls "$T/zj")"
# a damaged record: not archived
cp -r "$T/orig" "$T/dmg"
python3 - "$T/dmg" <<'PY'
import glob, sys
p = sorted(glob.glob(sys.argv[1] + "/*.seg"))[0]
b = bytearray(open(p, "rb").read()); b[16 + 30] ^= 1; open(p, "wb").write(b)
PY
if "$REPLAY" archive "$T/dmg" --day 1 --out "$T/dmg.lsa" 2>"$T/err"; then fail "archived a bad record"; fi
[ ! -e "$T/dmg.lsa" ] || fail "an archive was written from a damaged journal"
# --remove: only days at the journal's head
if "$REPLAY" archive "$J" --day 2 --out "$T/d2.lsa" --remove 2>"$T/err"; then
	fail "--remove of day 2 before day 1"
fi
grep -q "gap" "$T/err" || fail "archive --day 2 --remove: $(cat "$T/err")"
[ "$(ls "$J")" = "$(ls "$T/orig")" ] || fail "a refused --remove changed the journal"
"$REPLAY" archive "$J" --all-before 3 --out "$T/d12.lsa" --remove >"$T/out" ||
	fail "archive --all-before 3 --remove: $(cat "$T/out")"
grep -q "now starts at seq $b3" "$T/out" || fail "--remove: $(cat "$T/out")"
[ "$(ls "$J" | head -1)" = "$(printf '%020d.seg' "$b3")" ] || fail "journal after --remove: $(ls "$J")"
"$REPLAY" verify "$J" --allow-trimmed | grep -q "^ok: $((l3 - b3 + 1)) records" || fail "verify after --remove"
"$REPLAY" days "$J" | grep -q "^3 *TAPE000003 *$b3\.\.$l3 .* no$" || fail "days after --remove"
"$REPLAY" diff "$T/d12.lsa" "$T/orig" >"$T/diff" || true # 1: B goes on
grep -q "equal through seq $l2 " "$T/diff" || fail "diff archive/original: $(cat "$T/diff")"
cmp <("$REPLAY" dump "$T/d12.lsa" --day 2) <("$REPLAY" dump "$T/orig" --day 2) || fail "dump of day 2"
cmp <("$REPLAY" dump "$J") <("$REPLAY" dump "$T/orig" --day 3) || fail "dump of day 3 after --remove"
[ -z "$(ls -A "$TMPDIR")" ] || fail "left in $TMPDIR: $(ls "$TMPDIR")"
echo "ok: days, dump, pcap, send and archives over three trading days"
