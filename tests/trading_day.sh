#!/usr/bin/env bash
# A full trading day end to end (issue 16): a group of 3 sequencers, a
# gateway and 2 matcher replicas.
#  - Day 1 trades; its close comes from the schedule ([sequencer]
#    end_of_day a few seconds ahead): every resting order is canceled with
#    OUCH reason E, each login gets System Event E, and an order sent
#    while closed is Rejected with reason C.
#  - lockstepctl start-of-day opens day 2: System Event S, and from its
#    START_OF_DAY on the tape is a new MoldUDP64 session (TAPE000002) with
#    sequence numbers from 1; day 2 trades; the replicas agree.
#  - lockstep-replay reads both days from the journal (days, verify, the
#    pcap's sessions and per-day sequence numbers), and a rebuild of the
#    whole journal gives the replicas' state hash.
#  - Retention: restarted with retention = 1 and an archive_dir, a third day
#    takes days 1 and 2 out of the live journal into the archive directory
#    (the journal then begins at day 3's START_OF_DAY), where lockstep-replay
#    still reads them, and compresses them into an archive it reads too.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-client lockstep-replay
SEQUENCERS=3
# is NODE FIELD VALUE: NODE's status says FIELD is VALUE (for wait_for)
is() { [ "$(status_get "$1" "$2")" = "$3" ]; }

# the close: 12 s from now (the cluster comes up in about 5, and day 1
# trades); under ASan, where the cluster has taken 12 s to come up beside
# the other tests, 30 s
lead=12
! asan_build || lead=30
eod=$(date -u -d "+$lead seconds" +%H:%M:%S)
cluster_up --set sequencer.end_of_day="$eod"
pr=$(primary_node)
[ "$(status_get "$pr" market)" = open ] || fail "$pr: market $(status_get "$pr" market) at start"
[ "$(status_get "$pr" day)" = 1 ] || fail "$pr: day $(status_get "$pr" day) at start"

# A stays logged in over the close and the next open; B trades and leaves
# (its orders stay: no cancel on disconnect), and reads it all back later
sf=$T/day.script
cat >"$sf" <<'S'
connect A TRADR1 pw1 seq 0
A: buy 100 AAPL 150 token B1
A: expect Accepted token=B1 *
A: expect Executed token=B1 *
sleep 40000
S
bg_start "$T/day.out" "$CLIENT" --connect "127.0.0.1:$P" --timeout 60000 --script "$sf"
client_pid=$BG_PID
wait_for 10 "A's order" grep -q "Accepted token=B1" "$T/day.out"
client <<'S'
connect B TRADR2 pw2 seq 0
B: sell 40 AAPL 150 token S1
B: expect Accepted token=S1 *
B: expect Executed token=S1 *
B: sell 100 AAPL 170 token S2
B: expect Accepted token=S2 *
S
wait_for 10 "A's fill" grep -q "Executed token=B1" "$T/day.out"

# the scheduled close
wait_for $((lead + 13)) "the close at $eod" is "$pr" market closed
info "$pr closed day 1 at $eod by the schedule"
client <<'S'
connect C TRADR3 pw3 seq 0
C: buy 100 AAPL 150 token LATE1
C: expect Rejected token=LATE1 reason=C *
S
info "an order after the close: Rejected, reason C"

# the next day, by hand
out=$(node_ctl "$pr" start-of-day) || fail "start-of-day: $out"
grep -q "day 2 opened at seq [0-9]*: tape session TAPE000002" <<<"$out" || fail "start-of-day: $out"
sod=$(sed -n 's/.*opened at seq \([0-9]*\).*/\1/p' <<<"$out")
info "$out"
if out=$(node_ctl "$pr" start-of-day 2>&1); then fail "a second start-of-day: $out"; fi
for n in seq-1 seq-2 seq-3; do
	wait_for 5 "$n on day 2" is "$n" day 2
done
client <<'S'
connect C TRADR3 pw3 seq 0
C: buy 10 MSFT 300 token D2B
C: expect Accepted token=D2B *
connect B TRADR2 pw2 seq 0
B: sell 10 MSFT 300 token D2S
B: expect Accepted token=D2S *
B: expect Executed token=D2S *
S
info "day 2 trades"
agree matcher-1 matcher-2
seq=$SEQ hash=$HASH
kill "$client_pid" 2>/dev/null || true
wait "$client_pid" 2>/dev/null || true

# what the logins were told: A live, B when it reads its stream again
"$CLIENT" --connect "127.0.0.1:$P" --timeout 3000 --script <(printf 'connect B TRADR2 pw2 seq 1\nsleep 1500\n') \
	>"$T/b.out" 2>&1 || true
cat "$T/day.out" "$T/b.out" >"$T/told.out"
for want in "A < .* Canceled token=B1 *dec=60 reason=E" "B < .* Canceled token=S2 *dec=100 reason=E" \
	"A < .* SystemEvent code=E" "B < .* SystemEvent code=E" \
	"A < .* SystemEvent code=S" "B < .* SystemEvent code=S"; do
	grep -q "$want" "$T/told.out" || { cat "$T/told.out" >&2; fail "no \"$want\""; }
done
# each once, the close's before the open's
for c in A B; do
	[ "$(grep -c "$c < .* SystemEvent code=E" "$T/told.out")" = 1 ] || fail "$c: System Event E not once"
	e=$(grep -n "$c < .* SystemEvent code=E" "$T/told.out" | cut -d: -f1)
	s=$(grep -n "$c < .* SystemEvent code=S" "$T/told.out" | cut -d: -f1)
	[ "$e" -lt "$s" ] || fail "$c: System Event S before E"
done
info "resting orders canceled with reason E; System Events E then S to every login"

"$CLUSTER" down --dir "$T" >/dev/null
j=$T/seq-1/journal
days=$("$REPLAY" days "$j") || fail "lockstep-replay days: $days"
info "lockstep-replay days:"$'\n'"$days"
grep -Eq "^ *1 +TAPE +1\.\.$((sod - 1)) .* yes$" <<<"$days" || fail "day 1 not listed as 1..$((sod - 1)), ended"
grep -Eq "^ *2 +TAPE000002 +$sod\.\." <<<"$days" || fail "day 2 not listed from $sod"
"$REPLAY" verify "$j" >/dev/null || fail "verify"
for n in seq-2 seq-3; do
	"$REPLAY" verify "$T/$n/journal" >/dev/null || fail "verify $n"
done
# the pcap: day 1 in TAPE, day 2 in TAPE000002 from sequence number 1
"$REPLAY" pcap "$j" "$T/tape.pcap" >/dev/null || fail "pcap"
python3 - "$T/tape.pcap" "$sod" <<'PY' || fail "the pcap's sessions"
import struct, sys
data = open(sys.argv[1], "rb").read()
sod = int(sys.argv[2])
off, first = 24, {}
while off + 16 <= len(data):
    incl = struct.unpack_from("<I", data, off + 8)[0]
    pkt = data[off + 16: off + 16 + incl]
    off += 16 + incl
    mold = pkt[42:]  # Ethernet 14 + IPv4 20 + UDP 8
    sess = mold[:10].decode().rstrip()
    seq, count = struct.unpack_from(">QH", mold, 10)
    if count in (0, 0xFFFF):
        continue
    first.setdefault(sess, seq)
assert set(first) == {"TAPE", "TAPE000002"}, first
assert first["TAPE"] == 1 and first["TAPE000002"] == 1, first
print("pcap sessions:", first)
PY
rb=$("$REPLAY" rebuild "$j" --to "$seq" --config "$T/matcher-1.conf" 2>&1) || fail "rebuild: $rb"
grep -q "$hash" <<<"$rb" || fail "rebuild to $seq: $rb, the replicas had $hash"
info "lockstep-replay reads both days; a rebuild through both gives the replicas' hash $hash"

# Retention: a third day takes days 1 and 2 out of the live journal
arch=$T/archive
for n in seq-1 seq-2 seq-3; do
	printf 'retention = 1\narchive_dir = %s/%s\n' "$arch" "$n" >>"$T/$n.conf"
	mkdir -p "$arch/$n"
done
sed -i 's/^end_of_day = .*/end_of_day =/' "$T"/seq-*.conf
"$CLUSTER" start seq-1 seq-2 seq-3 gw-1 matcher-1 matcher-2 --dir "$T" >/dev/null ||
	fail "restart"
pr=$(primary_node)
node_ctl "$pr" end-of-day >/dev/null || fail "end-of-day"
out=$(node_ctl "$pr" start-of-day) || fail "start-of-day (day 3): $out"
sod3=$(sed -n 's/.*opened at seq \([0-9]*\).*/\1/p' <<<"$out")
for n in seq-1 seq-2 seq-3; do
	wait_for 5 "$n: days 1 and 2 out of its journal" test -d "$arch/$n/TAPE000002"
done
client <<'S'
connect C TRADR3 pw3 seq 0
C: buy 10 MSFT 300 token D3B
C: expect Accepted token=D3B *
S
agree matcher-1 matcher-2
"$CLUSTER" down --dir "$T" >/dev/null
first=$(ls "$j" | head -1)
[ "$first" = "$(printf '%020d.seg' "$sod3")" ] || fail "the journal begins with $first, not day 3's $sod3"
"$REPLAY" verify "$j" --allow-trimmed >/dev/null || fail "verify the journal of day 3"
"$REPLAY" days "$arch/seq-1/TAPE000002" | grep -Eq "^ *2 +TAPE000002 +$sod\.\." ||
	fail "the archived day 2: $("$REPLAY" days "$arch/seq-1/TAPE000002" 2>&1)"
"$REPLAY" archive "$arch/seq-1/TAPE000002" --all --out "$T/day2.lkz" >/dev/null ||
	fail "archive"
"$REPLAY" verify "$T/day2.lkz" --allow-trimmed >/dev/null || fail "verify the compressed day 2"
"$REPLAY" days "$T/day2.lkz" | grep -Eq "^ *2 +TAPE000002 +$sod\.\." || fail "days of the archive"
echo "ok: a trading day closed by the schedule, the next on session TAPE000002 from 1, both read back; retention moved the old days out, still readable"
