#!/usr/bin/env bash
# lockstep-replay over the journal of a real cluster run: verify passes, and
# names the first bad record of a copy with a flipped byte, a removed segment
# or a duplicated record; dump shows every order of the run; tshark reads the
# pcap export (when tshark is installed); rebuild reaches the live matchers'
# hash; a fresh matcher fed by `send` reaches it too, and so does one that
# starts from a snapshot written by rebuild --snapshot (whose snapshots at the
# end are byte for byte the live matchers'); diff finds where tapes part.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
ORDERS=2500 # per bench session, two sessions

cluster_up

# Small journal segments, so that one run spans several: ops/cluster has no
# option for the sequencer's segment_size, so restart the nodes one by one
# (start order: sequencers, matchers, gateways) with it added to the
# sequencers' configs.
"$CLUSTER" down --dir "$T" >/dev/null
for f in "$T"/seq-*.conf; do
	sed -i '/^\[sequencer\]/a segment_size = 64K' "$f"
done
for f in "$T"/seq-*.conf "$T"/matcher-*.conf "$T"/gw-*.conf; do
	"$CLUSTER" start "$(basename "$f" .conf)" --dir "$T" >/dev/null
done

"$top_builddir/lockstep-bench" --connect "127.0.0.1:$P" --sessions 2 --orders $ORDERS \
	--window 8 --quiet >"$T/bench.out" 2>&1 || { cat "$T/bench.out"; fail "bench: orders unanswered"; }
sent=$(awk '/^orders:/ {print $2}' "$T/bench.out")
# the bench's mix is new orders, cancels and replaces: count the new orders
[ "${sent:-0}" -gt $((ORDERS / 2)) ] || fail "bench sent only ${sent:-0} new orders"

# The live state: both matchers past what the sequencer had committed, at
# one seq with one hash (time events move the idle tape on while we read).
wait_agree 10
live_seq=$SEQ live_hash=$HASH
"$CLUSTER" down --dir "$T" >/dev/null
J=$T/seq-1/journal
nseg=$(ls "$J" | wc -l)
[ "$nseg" -ge 4 ] || fail "only $nseg journal segments"

# verify: a good journal passes.
"$REPLAY" verify "$J" >"$T/verify.out" || { cat "$T/verify.out"; fail "verify failed on a good journal"; }
grep -q '^ok: ' "$T/verify.out" || fail "verify: $(cat "$T/verify.out")"
last=$(sed -n 's/^ok: .* seq 1\.\.\([0-9]*\),.*/\1/p' "$T/verify.out")
[ -n "$last" ] && [ "$last" -ge "$live_seq" ] || fail "verify: $(cat "$T/verify.out")"

# verify names the first bad record: a flipped byte in the third segment ...
seg3=$(ls "$J" | sed -n 3p)
cp -r "$J" "$T/flip"
python3 - "$T/flip/$seg3" <<'PY'
import os, sys
f = open(sys.argv[1], "r+b")
off = os.path.getsize(sys.argv[1]) // 2
f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ 0x10]))
PY
rc=0; "$REPLAY" verify "$T/flip" >"$T/flip.out" || rc=$?
[ $rc -eq 1 ] || fail "verify of a flipped byte: exit $rc, $(cat "$T/flip.out")"
grep -Eq "^FAIL: first bad record: seq [0-9]+ \(segment $seg3, offset [0-9]+\): (crc mismatch|bad length|torn record)" \
	"$T/flip.out" || fail "verify of a flipped byte: $(cat "$T/flip.out")"

# ... a removed segment (its first seq is missing) ...
cp -r "$J" "$T/gap"
rm "$T/gap/$seg3"
gap_seq=$((10#${seg3%.seg}))
rc=0; "$REPLAY" verify "$T/gap" >"$T/gap.out" || rc=$?
[ $rc -eq 1 ] || fail "verify of a removed segment: exit $rc, $(cat "$T/gap.out")"
grep -q "^FAIL: first bad record: seq $gap_seq (.*sequence gap" "$T/gap.out" ||
	fail "verify of a removed segment: $(cat "$T/gap.out")"

# ... and a record written twice (a byte-exact copy, so its CRC is good).
cp -r "$J" "$T/dup"
dup_seq=$(python3 - "$T/dup/$seg3" <<'PY'
import struct, sys
p = sys.argv[1]
data = open(p, "rb").read()
off, n = 16, 0
while n < 10:  # the 11th record of the segment
    length = struct.unpack_from("<I", data, off)[0]
    off += 24 + length; n += 1
length, seq = struct.unpack_from("<IQ", data, off)
rec = data[off:off + 24 + length]
open(p, "wb").write(data[:off + len(rec)] + rec + data[off + len(rec):])
print(seq + 1)
PY
)
rc=0; "$REPLAY" verify "$T/dup" >"$T/dup.out" || rc=$?
[ $rc -eq 1 ] || fail "verify of a duplicate: exit $rc, $(cat "$T/dup.out")"
grep -q "^FAIL: first bad record: seq $dup_seq (.*a duplicate" "$T/dup.out" ||
	fail "verify of a duplicate: $(cat "$T/dup.out")"

# dump shows every order of the run, in text and in JSON, and filters.
"$REPLAY" dump "$J" >"$T/dump.txt"
[ "$(wc -l <"$T/dump.txt")" = "$last" ] || fail "dump: $(wc -l <"$T/dump.txt") lines for $last events"
n=$(grep -c ' ENTER ' "$T/dump.txt")
[ "$n" = "$sent" ] || fail "dump shows $n orders, the bench sent $sent"
"$REPLAY" dump "$J" --json | python3 -c '
import json, sys
ev = [json.loads(l) for l in sys.stdin]
n = sum(1 for e in ev if e.get("type") == "enter")
assert n == int(sys.argv[1]), "json: %d orders" % n
assert [e["seq"] for e in ev] == list(range(1, len(ev) + 1))' "$sent" || fail "dump --json"
"$REPLAY" dump "$J" --symbol AAPL >"$T/aapl.txt"
[ "$(grep -c ' ENTER .* AAPL @' "$T/aapl.txt")" = "$(grep -c ' ENTER .* AAPL @' "$T/dump.txt")" ] ||
	fail "dump --symbol AAPL misses orders"
! grep ' ENTER ' "$T/aapl.txt" | grep -vq ' AAPL @' || fail "dump --symbol AAPL shows other symbols"
grep -q ' CANCEL ' "$T/aapl.txt" || fail "dump --symbol AAPL shows no cancel"
"$REPLAY" dump "$J" --session TRADR2 --from 100 --to 300 >"$T/tradr2.txt"
[ -s "$T/tradr2.txt" ] && ! grep -vq ' TRADR2/' "$T/tradr2.txt" || fail "dump --session TRADR2"

# rebuild reaches the live hash at the live seq.
"$REPLAY" rebuild "$J" --to "$live_seq" --config "$T/matcher-1.conf" >"$T/rebuild.out" ||
	fail "rebuild: $(cat "$T/rebuild.out")"
[ "$(head -1 "$T/rebuild.out")" = "seq $live_seq hash $live_hash" ] ||
	fail "rebuild: $(head -1 "$T/rebuild.out"), live: seq $live_seq hash $live_hash"
end_hash=$("$REPLAY" rebuild "$J" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["hash"])')

# pcap: Wireshark's MoldUDP64 dissector reads every packet, no Malformed.
"$REPLAY" pcap "$J" "$T/tape.pcap" --group "239.255.0.1:$((P + 102))" 2>"$T/pcap.out" ||
	fail "pcap: $(cat "$T/pcap.out")"
if command -v tshark >/dev/null; then
	tshark -r "$T/tape.pcap" -d "udp.port==$((P + 102)),moldudp64" >"$T/tshark.out" 2>&1 ||
		fail "tshark: $(tail -3 "$T/tshark.out")"
	! grep -qi malformed "$T/tshark.out" || fail "tshark: $(grep -i -m3 malformed "$T/tshark.out")"
	blocks=$(tshark -r "$T/tape.pcap" -d "udp.port==$((P + 102)),moldudp64" -T fields \
		-e moldudp64.count 2>/dev/null | awk '{s += $1} END {print s}')
	[ "$blocks" = "$last" ] || fail "tshark counts $blocks messages, the tape has $last"
	bad=$(tshark -r "$T/tape.pcap" -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE \
		-Y 'ip.checksum.status != 1 || udp.checksum.status != 1' 2>/dev/null | wc -l)
	[ "$bad" = 0 ] || fail "tshark: $bad packets with a bad IP or UDP checksum"
else
	echo "note: tshark is not installed: the pcap is not checked with Wireshark's dissector"
fi

# send: a fresh matcher pointed at the replayed stream reaches the same hash,
# catching up by retransmission for what it missed.
mkdir -p "$T/rm"
cat >"$T/rm.conf" <<EOF
[node]
name = rm
state_dir = $T/rm
key_file = $T/cluster.key
[matcher]
partition = 0
tape_group = 239.255.0.9:$((P + 150))
tape_iface = 127.0.0.1
tape_session = REPLAY
tape_retrans = 127.0.0.1:$((P + 151))
exec_group = 239.255.0.10:$((P + 152))
exec_retrans = 127.0.0.1:$((P + 153))
symbols = AAPL MSFT AMZN GOOG META NVDA TSLA INTC
max_shares = 1000000
EOF
bg_start "$T/rm.log" "$top_builddir/lockstep-matcher" --config "$T/rm.conf"
try_for 5 node_ctl rm status || true
bg_start "$T/send.out" "$REPLAY" send "$J" --group "239.255.0.9:$((P + 150))" \
	--retrans "127.0.0.1:$((P + 151))" --pace x100 --linger 30 --key-file "$T/cluster.key"
send_pid=$BG_PID
at_last() { [ "$(status_field "$1" seq)" = "$last" ]; } # at_last NODE: at the tape's last seq
try_for 30 at_last rm || true
rm_hash=$(node_ctl rm status --json | python3 -c 'import json,sys; d = json.load(sys.stdin); print(d["seq"], d["hash"])')
[ "$rm_hash" = "$last $end_hash" ] || fail "matcher fed by send: seq/hash $rm_hash, rebuild: $last $end_hash"
# rebuild --snapshot: a snapshot of the state at mid-tape, written into a
# fresh matcher's state dir as the matcher names it; that matcher loads it,
# catches up from the next seq by retransmission from the same `send` and
# reaches the same hash, reporting the snapshot's seq.
mid=$((last / 2))
mkdir -p "$T/sm/snapshots"
"$REPLAY" rebuild "$J" --to $mid --config "$T/rm.conf" --snapshot "$T/sm/snapshots" \
	>"$T/rebuild-snap.out" 2>&1 || fail "rebuild --snapshot: $(cat "$T/rebuild-snap.out")"
snap=$T/sm/snapshots/snap-$(printf %020d $mid).lss
[ -s "$snap" ] || fail "rebuild --snapshot wrote no $snap: $(ls "$T/sm/snapshots")"
sed -e "s|^name = rm|name = sm|" -e "s|^state_dir = .*|state_dir = $T/sm|" \
	-e "s|^exec_group = .*|exec_group = 239.255.0.10:$((P + 154))|" \
	-e "s|^exec_retrans = .*|exec_retrans = 127.0.0.1:$((P + 155))|" "$T/rm.conf" >"$T/sm.conf"
bg_start "$T/sm.log" "$top_builddir/lockstep-matcher" --config "$T/sm.conf"
sm_pid=$BG_PID
sm_status() { node_ctl sm status --json 2>/dev/null |
	python3 -c 'import json,sys; d = json.load(sys.stdin); print(d["seq"], d["hash"], d["snapshot_seq"])' 2>/dev/null; }
try_for 30 at_last sm || true
[ "$(sm_status)" = "$last $end_hash $mid" ] ||
	fail "matcher from the rebuilt snapshot: seq/hash/snapshot_seq $(sm_status), want $last $end_hash $mid; $(tail -5 "$T/sm.log")"
grep -q "loaded snapshot $snap" "$T/sm.log" || fail "sm did not load $snap: $(tail -5 "$T/sm.log")"

# The exec stream position too: a snapshot rebuilt at the end is byte for
# byte the one the matcher fed from seq 1 (rm) writes at that seq, and the one
# the matcher started from the rebuilt snapshot (sm) writes.
mkdir -p "$T/full"
"$REPLAY" rebuild "$J" --config "$T/rm.conf" --snapshot "$T/full/end.lss" >/dev/null 2>&1 ||
	fail "rebuild --snapshot FILE"
for n in rm sm; do
	node_ctl "$n" snapshot >/dev/null || fail "$n: lockstepctl snapshot"
	f=$T/$n/snapshots/snap-$(printf %020d "$last").lss
	try_for 10 test -s "$f" || true
	cmp "$f" "$T/full/end.lss" >/dev/null || fail "$n's snapshot at seq $last differs from the rebuilt one: $(cmp "$f" "$T/full/end.lss")"
done
kill -TERM $sm_pid
wait $sm_pid || fail "sm exited $?: $(tail -5 "$T/sm.log")"

kill -TERM $send_pid
wait $send_pid || fail "send exited $?: $(cat "$T/send.out")"
grep -q "^lockstep-replay: $last events in " "$T/send.out" || fail "send: $(cat "$T/send.out")"

# diff: a tape against itself, and against a copy cut at the removed segment.
"$REPLAY" diff "$J" "$J" >"$T/diff.out" || fail "diff of a tape with itself: $(cat "$T/diff.out")"
rc=0; "$REPLAY" diff "$J" "$T/gap" >"$T/diff.out" 2>/dev/null || rc=$?
[ $rc -eq 1 ] && grep -q "^equal through seq $((gap_seq - 1)) " "$T/diff.out" ||
	fail "diff against a cut copy: exit $rc, $(cat "$T/diff.out")"

echo "ok: $last events in $nseg segments; live, rebuilt and replayed hashes agree ($live_hash at seq $live_seq); a matcher from a rebuilt snapshot at seq $mid agrees"
