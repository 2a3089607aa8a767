#!/usr/bin/env bash
# The ITCH 5.0 dissector (ops/wireshark/itch50.lua) in tshark: a capture of
# MoldUDP64 packets (written below by Python, no cluster) carrying one
# valid message of every type lockstep publishes, a packet of two messages
# with the largest values, and packets each with one bad message. Every
# valid message decodes with the values it was written with (checked
# field by field with -T fields) and raises no expert error; every bad
# one carries the expert error it should (severity error, group
# malformed).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
! asan_build || skip "the sanitizer build: this runs tshark on a written capture, none of lockstep's programs"
command -v tshark >/dev/null || skip "no tshark"
command -v python3 >/dev/null || skip "no python3"
tshark -v 2>/dev/null | grep -q 'with Lua' || skip "tshark without Lua"
LUA=$top_srcdir/ops/wireshark/itch50.lua
[ -r "$LUA" ] || fail "$LUA not found"
use_tmpdir lockstep-itch
PORT=15500
VALID=13 # frames 1..13 are valid, 14.. bad

python3 - "$T/feed.pcap" "$PORT" <<'EOF'
import struct, sys

def hdr(t, locate, tracking, ts):
    return t.encode() + struct.pack('>HH', locate, tracking) + ts.to_bytes(6, 'big')

def alpha(s, w):
    return s.encode().ljust(w, b' ')

H = lambda t: hdr(t, 1, 3, 34200000000001)  # 09:30:00.000000001
valid = [
    [hdr('S', 0, 0, 14400000000000) + b'O'],
    [H('R') + alpha('ZVZZT', 8) + b'Q' + b' ' + struct.pack('>I', 100) + b'N' + b'C' +
     alpha('Z', 2) + b'P' + b'N' + b' ' + b'1' + b'N' + struct.pack('>I', 2) + b'N'],
    [H('H') + alpha('ZVZZT', 8) + b'T' + b' ' + alpha('', 4)],
    [H('A') + struct.pack('>QcI', 1, b'B', 100) + alpha('ZVZZT', 8) + struct.pack('>I', 1502500)],
    [H('F') + struct.pack('>QcI', 2, b'S', 300) + alpha('ZVZZT', 8) +
     struct.pack('>I', 1503000) + alpha('LSTP', 4)],
    [H('E') + struct.pack('>QIQ', 1, 40, 7)],
    [H('C') + struct.pack('>QIQ', 2, 60, 8) + b'Y' + struct.pack('>I', 1502900)],
    [H('X') + struct.pack('>QI', 1, 10)],
    [H('U') + struct.pack('>QQII', 2, 3, 240, 1503100)],
    [H('D') + struct.pack('>Q', 1)],
    [H('P') + struct.pack('>QcI', 0, b'B', 50) + alpha('ZVZZT', 8) +
     struct.pack('>IQ', 1502700, 9)],
    [b'G' + alpha('12', 20)],
    [hdr('A', 65535, 65535, 2**48 - 1) + struct.pack('>QcI', 2**64 - 1, b'S', 2**32 - 1) +
     alpha('ABCDEFGH', 8) + struct.pack('>I', 2**32 - 1),
     hdr('D', 2, 4, 0) + struct.pack('>Q', 2**64 - 1)],
]
a = valid[3][0]
bad = [
    a[:19] + b'X' + a[20:],                                    # side X
    a[:-1],                                                    # 35 bytes
    b'Y' + a[1:],                                              # unknown type
    valid[6][0][:31] + b'x' + valid[6][0][32:],                # printable x
    valid[1][0][:11] + alpha(' ZVZZT', 8) + valid[1][0][19:],  # not left-justified
    b'G' + alpha('0012', 20),                                  # leading zero
    valid[2][0] + b' ',                                        # 26 bytes
]
assert [len(m) for p in valid for m in p] == [12, 39, 25, 36, 40, 31, 36, 23, 35, 19, 44, 21, 36, 19]

def frame(payload, port):
    udp = struct.pack('>HHHH', 40000, port, 8 + len(payload), 0) + payload
    ip = struct.pack('>BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                     bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1]))
    s = sum(struct.unpack('>10H', ip))
    s = (s & 0xffff) + (s >> 16)
    s = (s & 0xffff) + (s >> 16)
    ip = ip[:10] + struct.pack('>H', ~s & 0xffff) + ip[12:]
    return b'\0' * 12 + b'\x08\x00' + ip + udp

out = struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)  # pcap, Ethernet
seq = 1
for i, msgs in enumerate(valid + [[m] for m in bad]):
    mold = alpha('ITCH0', 10) + struct.pack('>QH', seq, len(msgs))
    mold += b''.join(struct.pack('>H', len(m)) + m for m in msgs)
    seq += len(msgs)
    f = frame(mold, int(sys.argv[2]))
    out += struct.pack('<IIII', 1000 + i, 0, len(f), len(f)) + f
open(sys.argv[1], 'wb').write(out)
EOF

# tshark with the dissector and nothing of the caller's profile
ts() {
	HOME=$T XDG_CONFIG_HOME=$T tshark -n -r "$T/feed.pcap" -X "lua_script:$LUA" \
		-d "udp.port==$PORT,moldudp64" -d moldudp64.payload,lockstep_itch "$@" 2>"$T/tshark.err"
}
count() { ts -Y "$1" | wc -l; }
fields() {
	local f args=(-T fields -E separator=';' -e frame.number)
	for f in "$@"; do args+=(-e "lockstep_itch.$f"); done
	ts -Y "frame.number <= $VALID" "${args[@]}"
}
expect() { # expect WHAT FILE: FILE equals stdin
	if ! diff -u - "$2" >"$T/diff"; then
		cat "$T/diff" "$T/tshark.err" >&2
		fail "$1"
	fi
}

n=$(count "lockstep_itch") || { cat "$T/tshark.err" >&2; fail "tshark"; }
frames=$(ts | wc -l)
[ "$frames" -eq $((VALID + 7)) ] || fail "$frames frames, not $((VALID + 7))"
[ "$n" -eq "$frames" ] || fail "ITCH 5.0 in $n frames of $frames"
info "$frames frames, each with ITCH 5.0 in it"

errs=$(count "frame.number <= $VALID && (_ws.expert.severity >= error || _ws.malformed)")
if [ "$errs" -ne 0 ]; then
	ts -Y "frame.number <= $VALID && _ws.expert.severity >= error" -V | grep -i -B3 error >&2 || true
	fail "$errs valid frames with an error"
fi
[ "$(count "frame.number <= $VALID && lockstep_itch.type")" -eq $VALID ] ||
	fail "not every valid frame has a message type"

# The common header and the order fields, as written above.
fields type locate tracking timestamp ref side shares stock price match seq >"$T/orders"
expect "order fields" "$T/orders" <<'EOF'
1;'S';0;0;14400000000000;;;;;;;
2;'R';1;3;34200000000001;;;;ZVZZT;;;
3;'H';1;3;34200000000001;;;;ZVZZT;;;
4;'A';1;3;34200000000001;1;'B';100;ZVZZT;1502500;;
5;'F';1;3;34200000000001;2;'S';300;ZVZZT;1503000;;
6;'E';1;3;34200000000001;1;;40;;;7;
7;'C';1;3;34200000000001;2;;60;;1502900;8;
8;'X';1;3;34200000000001;1;;10;;;;
9;'U';1;3;34200000000001;;;240;;1503100;;
10;'D';1;3;34200000000001;1;;;;;;
11;'P';1;3;34200000000001;0;'B';50;ZVZZT;1502700;9;
12;'G';;;;;;;;;;12
13;'A','D';65535,2;65535,4;281474976710655,0;18446744073709551615,18446744073709551615;'S';4294967295;ABCDEFGH;4294967295;;
EOF

# Every other field of every type.
fields event_code market_category financial_status round_lot_size round_lots_only \
	issue_classification issue_subtype authenticity short_sale_threshold ipo_flag luld_tier \
	etp_flag etp_leverage inverse state reserved reason attribution printable old_ref new_ref \
	>"$T/others"
expect "the other fields" "$T/others" <<'EOF'
1;'O';;;;;;;;;;;;;;;;;;;;
2;;'Q';' ';100;'N';'C';Z;'P';'N';' ';'1';'N';2;'N';;;;;;;
3;;;;;;;;;;;;;;;'T';' ';;;;;
4;;;;;;;;;;;;;;;;;;;;;
5;;;;;;;;;;;;;;;;;;LSTP;;;
6;;;;;;;;;;;;;;;;;;;;;
7;;;;;;;;;;;;;;;;;;;'Y';;
8;;;;;;;;;;;;;;;;;;;;;
9;;;;;;;;;;;;;;;;;;;;2;3
10;;;;;;;;;;;;;;;;;;;;;
11;;;;;;;;;;;;;;;;;;;;;
12;;;;;;;;;;;;;;;;;;;;;
13;;;;;;;;;;;;;;;;;;;;;
EOF
# Trading Action's blank reason is there, and empty.
[ "$(count "frame.number == 3 && lockstep_itch.reason == \"\"")" -eq 1 ] ||
	fail "the blank reason is not an empty string"
info "every field of the $VALID valid frames as written, no error"

# Each bad message: an expert error, of the right kind.
check_bad() { # FRAME EXPERT
	local n
	n=$(count "frame.number == $1 && _ws.expert.severity >= error && _ws.expert.group == 0x07000000 && lockstep_itch.$2")
	[ "$n" -eq 1 ] || { ts -Y "frame.number == $1" -V | sed -n '/ITCH 5.0,/,$p' >&2; fail "frame $1: no $2 error"; }
}
check_bad 14 bad_side
check_bad 15 bad_length
check_bad 16 unknown_type
check_bad 17 bad_printable
check_bad 18 bad_alpha
check_bad 19 bad_seq
check_bad 20 bad_length
n=$(count "_ws.expert.severity >= error")
[ "$n" -eq 7 ] || fail "$n frames with an error, not 7"
echo "ok: $VALID valid frames decoded field by field without an error; 7 bad ones flagged"
