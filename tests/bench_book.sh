#!/usr/bin/env bash
# lockstep-bench --book-out: after a run of the default mix (2 sessions,
# open loop) through a fresh cluster, the file holds one well-formed line
# "SYMBOL SIDE PRICE SHARES REF" per order resting by the bench's OUCH
# answers, sorted as --help says, as many as the JSON's book_orders and as
# the resting orders both matcher replicas count (orders_open: every order
# of the mix is displayed, Display 'A'); and it is, line for line, the book
# that the partition's ITCH feed implies, regenerated from the tape
# (lockstep-replay itch) and replayed here: the comparison issue 18's feed
# subscriber (lockstep-feed --book-out) is to pass.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
skip_unless_built lockstep-bench
need_built lockstepctl lockstep-replay

help=$("$BENCH" --help) || fail "--help failed"
grep -q -- '--book-out FILE' <<<"$help" || fail "--help does not say --book-out"
"$BENCH" --baseline --book-out /dev/null >/dev/null 2>&1 && fail "--book-out taken with --baseline"

cluster_up --sequencers 1
if ! "$BENCH" --connect "127.0.0.1:$P" --sessions 2 --rate 2000 --duration 2 \
	--book-out "$T/book.txt" --json "$T/load.json" >"$T/load.out" 2>&1; then
	cat "$T/load.out"
	fail "bench: an order unanswered, or the book incomplete"
fi
B=$T/book.txt
[ -s "$B" ] || fail "--book-out wrote nothing: $(cat "$T/load.out")"
n=$(wc -l <"$B")

# the format: symbol, B or S, a price on the tick around $100.00 (the mix's
# passive prices), open shares 1..1000, a reference; each reference once
bad=$(grep -Evc '^[A-Z]{1,8} [BS] [1-9][0-9]* [1-9][0-9]* [1-9][0-9]*$' "$B" || true)
[ "$bad" -eq 0 ] || fail "$bad malformed lines: $(grep -Ev '^[A-Z]{1,8} [BS] [0-9]+ [0-9]+ [0-9]+$' "$B" | head -3)"
awk '$2 == "B" && !($3 >= 999500 && $3 < 1000000) || $2 == "S" && !($3 > 1000000 && $3 <= 1000500) ||
	$3 % 100 || $4 > 1000 { print "bad: " $0; exit 1 }' "$B" || fail "a line off the mix: $(head -3 "$B")"
[ "$(cut -d' ' -f5 "$B" | sort -u | wc -l)" -eq "$n" ] || fail "a reference twice"
LC_ALL=C sort -k1,1 -k2,2 -k3,3n -k5,5n "$B" | cmp -s - "$B" || fail "not sorted by symbol, side, price, ref"
grep -Eq "^book: +$n displayed orders resting" "$T/load.out" || fail "no book line: $(cat "$T/load.out")"
python3 - "$T/load.json" "$n" <<'PY' || fail "load.json: $(cat "$T/load.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["book_orders"] == int(sys.argv[2]) and d["unanswered"] == 0, d
assert d["sent"]["cancel"] > 0 and d["sent"]["replace"] > 0 and d["executions"] > 0, d
PY

# the matchers' book: as many resting orders, on both replicas
agree matcher-1 matcher-2
for m in matcher-1 matcher-2; do
	open=$(stat_get "$m" orders_open)
	[ "$open" = "$n" ] || fail "$m: orders_open $open, the bench's book $n lines"
done

# the book the ITCH feed implies, regenerated from the tape
"$REPLAY" itch "$T/seq-1/journal" --config "$T/matcher-1.conf" --out "$T/feed.itch" \
	>"$T/itch.out" 2>&1 || { cat "$T/itch.out"; fail "lockstep-replay itch"; }
python3 - "$T/feed.itch" >"$T/itch_book.txt" <<'PY' || fail "the ITCH file: $(head -c 300 "$T/itch.out")"
import struct, sys
data, off, book, seen = open(sys.argv[1], "rb").read(), 0, {}, 0
while off < len(data):
    (n,) = struct.unpack_from(">H", data, off)
    m, off = data[off + 2 : off + 2 + n], off + 2 + n
    t = m[:1]
    if t in (b"A", b"F"):
        ref, side, shares, stock, price = struct.unpack_from(">QcI8sI", m, 11)
        book[ref] = [stock.decode().rstrip(), side.decode(), price, shares]
        seen += 1
    elif t in (b"E", b"C"):
        ref, shares = struct.unpack_from(">QI", m, 11)
        book[ref][3] -= shares
    elif t == b"X":
        ref, shares = struct.unpack_from(">QI", m, 11)
        book[ref][3] -= shares
    elif t == b"D":
        del book[struct.unpack_from(">Q", m, 11)[0]]
    elif t == b"U":
        old, new, shares, price = struct.unpack_from(">QQII", m, 11)
        o = book.pop(old)
        book[new] = [o[0], o[1], price, shares]
    if t in (b"E", b"C", b"X"):
        if book[ref][3] == 0:
            del book[ref]
assert seen > 0, "no Add Order"
for ref, (stock, side, price, shares) in book.items():
    print(stock, side, price, shares, ref)
PY
LC_ALL=C sort "$T/itch_book.txt" >"$T/itch_sorted.txt"
LC_ALL=C sort "$B" >"$T/book_sorted.txt"
if ! diff "$T/itch_sorted.txt" "$T/book_sorted.txt" >"$T/book.diff"; then
	head -20 "$T/book.diff" >&2
	fail "the bench's book and the ITCH feed's differ ($(grep -c '^[<>]' "$T/book.diff") lines)"
fi
grep -E '^(orders|cancels|replaces|executions|book)' "$T/load.out" | sed 's/^/info: /'
echo "ok: lockstep-bench --book-out: $n resting orders, as the matchers count them and as the ITCH feed implies"
