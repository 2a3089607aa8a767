#!/usr/bin/env bash
# A damaged journal is repaired, not amputated. In a group of 3 under load,
# seq-2 is stopped and one byte of a record in the middle of its journal is
# flipped (good records follow it: damage, not a torn tail). It then
# refuses to start, and its log names the bad seq, the segment and offset
# and the commands to see and repair it; nothing of its journal is removed.
# lockstep-replay verify fails naming the same record as damage;
# lockstep-replay repair copies the segment aside and cuts the journal
# before the bad record; seq-2 then starts, fetches the cut range from the
# group, and after more load its journal verifies and agrees record for
# record with the others' (lockstep-replay diff), and the matchers agree.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench lockstep-replay
SEQUENCERS=3
cluster_up
REPLAY=$top_builddir/lockstep-replay
J=$T/seq-2/journal

"$top_builddir/lockstep-bench" --connect "127.0.0.1:$P" --sessions 2 --orders 400 \
	--window 8 --quiet >"$T/bench.out" 2>&1 || { cat "$T/bench.out"; fail "bench: orders unanswered"; }
"$CLUSTER" stop seq-2 --dir "$T" >/dev/null
# flip a byte in the data of the record at the middle of the journal
bad=$(python3 - "$J" <<'PY'
import glob, struct, sys
segs = sorted(glob.glob(sys.argv[1] + "/*.seg"))
recs = []
for path in segs:
    b = open(path, "rb").read()
    off = 16
    while off + 24 <= len(b):
        n, seq = struct.unpack_from("<IQ", b, off)
        recs.append((path, off, n, seq))
        off += 24 + n
path, off, n, seq = recs[len(recs) // 2]
with open(path, "r+b") as f:
    f.seek(off + 20 + n // 2)
    c = f.read(1)
    f.seek(off + 20 + n // 2)
    f.write(bytes([c[0] ^ 0x40]))
print(seq)
PY
)
[ -n "$bad" ] || fail "no record to damage"
size_before=$(du -b "$J" | cut -f1)
if "$CLUSTER" start seq-2 --dir "$T" >"$T/start.out" 2>&1; then
	fail "seq-2 started on a damaged journal"
fi
grep -q "damaged: seq $bad (segment .* offset [0-9]*) is bad (crc mismatch) and good records follow it" \
	"$T/seq-2.log" || { tail -5 "$T/seq-2.log"; fail "seq-2's log does not name the damage at seq $bad"; }
grep -q "lockstep-replay repair $J" "$T/seq-2.log" || fail "seq-2's log does not say how to repair"
[ "$(du -b "$J" | cut -f1)" = "$size_before" ] || fail "the refused start changed the journal"
info "seq-2 refused: $(grep -o 'damaged: seq [0-9]* ([^)]*)' "$T/seq-2.log" | head -1)"

rc=0
"$REPLAY" verify "$J" >"$T/verify.out" 2>&1 || rc=$?
[ $rc = 1 ] || { cat "$T/verify.out"; fail "verify exited $rc on a damaged journal"; }
grep -q "first bad record: seq $bad .*crc mismatch -- damage" "$T/verify.out" ||
	{ cat "$T/verify.out"; fail "verify does not call seq $bad damage"; }
"$REPLAY" repair "$J" >"$T/repair.out" 2>&1 || { cat "$T/repair.out"; fail "repair failed"; }
grep -q "^repaired: $J holds seq 1\.\.$((bad - 1));" "$T/repair.out" ||
	{ cat "$T/repair.out"; fail "repair did not cut before seq $bad"; }
ls "$J.damaged-$bad"/*.seg >/dev/null 2>&1 || fail "nothing copied aside to $J.damaged-$bad"
info "$(grep '^repaired' "$T/repair.out" | cut -c1-120)..."

"$CLUSTER" start seq-2 --dir "$T" >/dev/null || { tail -5 "$T/seq-2.log"; fail "seq-2 did not start after the repair"; }
"$top_builddir/lockstep-bench" --connect "127.0.0.1:$P" --sessions 2 --orders 400 \
	--window 8 --quiet >"$T/bench2.out" 2>&1 || { cat "$T/bench2.out"; fail "bench after the repair"; }
wait_agree 20
# seq-2 holds everything the primary committed, the cut range included
pr=$(primary_node 10)
for _ in $(seq 1 100); do
	[ "$(status_get seq-2 commit)" -ge "$SEQ" ] 2>/dev/null && break
	sleep 0.1
done
[ "$(status_get seq-2 seq)" -ge "$SEQ" ] || fail "seq-2 at $(status_get seq-2 seq), the group committed $SEQ"
"$CLUSTER" down --dir "$T" >/dev/null
"$REPLAY" verify "$J" >"$T/verify2.out" 2>&1 || { cat "$T/verify2.out"; fail "seq-2's repaired journal does not verify"; }
for other in seq-1 seq-3; do
	"$REPLAY" diff "$T/$other/journal" "$J" >"$T/diff.out" 2>&1 || true
	if grep -q "part at" "$T/diff.out"; then
		cat "$T/diff.out"
		fail "seq-2's journal parts from $other's"
	fi
	info "$other vs seq-2: $(head -1 "$T/diff.out")"
done
echo "ok: seq-2 refused a journal damaged at seq $bad, was repaired, fetched seq $bad.. from the group (primary $pr) and agrees"
