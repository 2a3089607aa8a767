#!/usr/bin/env bash
# End to end on one host: a real cluster (gateway, sequencer, two matchers),
# real OUCH sessions, exact replies for each matching rule.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
cluster_up

# A cross and a partial fill; the resting side hears first (liquidity A).
client <<'S'
connect A TRADR1 pw1 seq 0
connect B TRADR2 pw2 seq 0
A: buy 100 AAPL 150 token A1
A: expect Accepted token=A1 B 100 AAPL @ 150.0000 tif=99999 * ref=1 state=L *
B: sell 60 AAPL 149.50 token B1
B: expect Accepted token=B1 S 60 AAPL @ 149.5000 tif=99999 * ref=2 state=L *
A: expect Executed token=A1 60 @ 150.0000 liq=A match=1
B: expect Executed token=B1 60 @ 150.0000 liq=R match=1
# the rest of A1 (40) stays; cancel it
A: cancel A1
A: expect Canceled token=A1 dec=40 reason=U *
S

# Price-time priority among three resting orders, two at one price.
client <<'S'
connect A TRADR1 pw1 seq 0
connect C TRADR3 pw3 seq 0
connect B TRADR2 pw2 seq 0
A: sell 100 MSFT 300.10 token A2
A: expect Accepted token=A2 * ref=3 *
C: sell 100 MSFT 300 token C1
C: expect Accepted token=C1 * ref=4 *
A: sell 100 MSFT 300 token A3
A: expect Accepted token=A3 * ref=5 *
B: buy 250 MSFT 300.10 token B2
B: expect Accepted token=B2 B 250 MSFT @ 300.1000 * ref=6 *
C: expect Executed token=C1 100 @ 300.0000 liq=A match=2
B: expect Executed token=B2 100 @ 300.0000 liq=R match=2
A: expect Executed token=A3 100 @ 300.0000 liq=A match=3
B: expect Executed token=B2 100 @ 300.0000 liq=R match=3
A: expect Executed token=A2 50 @ 300.1000 liq=A match=4
B: expect Executed token=B2 50 @ 300.1000 liq=R match=4
# a partial cancel of what is left of A2 (50 -> 20), then the rest
A: cancel A2 20
A: expect Canceled token=A2 dec=30 reason=U *
A: cancel A2
A: expect Canceled token=A2 dec=20 reason=U *
A: cancel A2
A: expect CancelReject token=A2
S

# Replace: same price and fewer shares keeps priority; a new price loses it.
client <<'S'
connect A TRADR1 pw1 seq 0
connect C TRADR3 pw3 seq 0
connect B TRADR2 pw2 seq 0
A: buy 100 AMZN 100 token A4
A: expect Accepted token=A4 * ref=7 *
C: buy 100 AMZN 100 token C2
C: expect Accepted token=C2 * ref=8 *
A: replace A4 A5 80 100
A: expect Replaced token=A5 prev=A4 B 80 AMZN @ 100.0000 * ref=9 *
B: sell 50 AMZN 100 token B3
B: expect Accepted token=B3 * ref=10 *
A: expect Executed token=A5 50 @ 100.0000 liq=A match=5
B: expect Executed token=B3 50 @ 100.0000 liq=R match=5
A: replace A5 A6 30 100.01
A: expect Replaced token=A6 prev=A5 B 30 AMZN @ 100.0100 * ref=11 *
# A6 now leads on price; C2 waits behind it
B: sell 40 AMZN 100 token B4
B: expect Accepted token=B4 * ref=12 *
A: expect Executed token=A6 30 @ 100.0100 liq=A match=6
B: expect Executed token=B4 30 @ 100.0100 liq=R match=6
C: expect Executed token=C2 10 @ 100.0000 liq=A match=7
B: expect Executed token=B4 10 @ 100.0000 liq=R match=7
S

# IOC, market, all-or-none, post-only, non-displayed, self-match prevention.
client <<'S'
connect A TRADR1 pw1 seq 0
connect C TRADR3 pw3 seq 0
connect B TRADR2 pw2 seq 0
A: sell 100 GOOG 140 token A7
A: expect Accepted token=A7 * ref=13 *
B: buy 150 GOOG 140 ioc token B5
B: expect Accepted token=B5 B 150 GOOG @ 140.0000 tif=0 * ref=14 *
A: expect Executed token=A7 100 @ 140.0000 liq=A match=8
B: expect Executed token=B5 100 @ 140.0000 liq=R match=8
B: expect Canceled token=B5 dec=50 reason=I *
# market orders: through two levels, the rest canceled
A: sell 100 META 500 token A8
A: expect Accepted token=A8 * ref=15 *
A: sell 100 META 501 token A9
A: expect Accepted token=A9 * ref=16 *
B: buy 250 META market token B6
B: expect Accepted token=B6 B 250 META @ MKT tif=0 * ref=17 *
A: expect Executed token=A8 100 @ 500.0000 liq=A match=9
B: expect Executed token=B6 100 @ 500.0000 liq=R match=9
A: expect Executed token=A9 100 @ 501.0000 liq=A match=10
B: expect Executed token=B6 100 @ 501.0000 liq=R match=10
B: expect Canceled token=B6 dec=50 reason=I *
# all-or-none (min qty = shares, IOC): too little liquidity, nothing trades
A: sell 100 NVDA 900 token A10
A: expect Accepted token=A10 * ref=18 *
B: buy 200 NVDA 900 ioc minqty 200 token B7
B: expect Accepted token=B7 * ref=19 *
B: expect Canceled token=B7 dec=200 reason=I *
B: buy 100 NVDA 900 ioc minqty 100 token B8
B: expect Accepted token=B8 * ref=20 *
A: expect Executed token=A10 100 @ 900.0000 liq=A match=11
B: expect Executed token=B8 100 @ 900.0000 liq=R match=11
# post-only: rests when it would not take, rejected when it would
A: sell 100 TSLA 200 token A11
A: expect Accepted token=A11 * ref=21 *
B: buy 100 TSLA 199 display P token B9
B: expect Accepted token=B9 * display=P ref=22 *
B: buy 100 TSLA 200 display P token B10
B: expect Rejected token=B10 reason=*
# non-displayed waits behind displayed at the same price
A: sell 100 INTC 30 display N token A12
A: expect Accepted token=A12 * display=N ref=23 *
C: sell 100 INTC 30 token C3
C: expect Accepted token=C3 * ref=24 *
B: buy 100 INTC 30 token B11
B: expect Accepted token=B11 * ref=25 *
C: expect Executed token=C3 100 @ 30.0000 liq=A match=12
B: expect Executed token=B11 100 @ 30.0000 liq=R match=12
# self-match prevention: TRADR3 (firm FRMA) meets TRADR1's resting order
C: buy 100 INTC 30 token C4
C: expect Accepted token=C4 * ref=26 *
C: expect Canceled token=C4 dec=100 reason=Q *
S

# Every reject reason of Enter Order.
client <<'S'
connect A TRADR1 pw1 seq 0
A: buy 100 ZZZZ 10 token R1
A: expect Rejected token=R1 reason=S *
A: buy 100 AAPL 10.001 token R2
A: expect Rejected token=R2 reason=X *
A: buy 100 AAPL 1.005 token R3
A: expect Rejected token=R3 reason=X *
A: buy 100 AAPL 0 token R4
A: expect Rejected token=R4 reason=X *
A: buy 0 AAPL 10 token R5
A: expect Rejected token=R5 *
A: buy 1000001 AAPL 10 token R6
A: expect Rejected token=R6 reason=Z *
A: buy 100 AAPL 10 display Q token R7
A: expect Rejected token=R7 reason=D *
A: buy 100 AAPL 10 side X token R8
A: expect Rejected token=R8 *
A: buy 100 AAPL 10 tif 99997 token R9
A: expect Rejected token=R9 *
A: buy 100 AAPL 10 minqty 200 token R10
A: expect Rejected token=R10 reason=N *
# a reused token is ignored, as OUCH 4.2 says: no answer at all
A: buy 100 AAPL 10 token R1
A: expect-none 300
# a price below $1 on the $0.0001 tick is fine
A: buy 100 AAPL 0.5001 token R11
A: expect Accepted token=R11 *
S

# Both replicas applied the same tape and agree (at one seq: time events
# move the idle tape on between two readings).
wait_same 15 matcher-1 matcher-2
echo "ok: every matching rule; both replicas at seq $SEQ with hash $HASH"

# STATS through the daemon skeleton: every daemon flags its own gauges, and
# lockstepctl --prometheus follows the flags (a level has no _total).
prom=$T/prom.txt
for n in seq-1 matcher-1 gw-1; do node_ctl "$n" stats --prometheus; done >"$prom" ||
	fail "stats --prometheus"
for g in journal_bytes commit orders_open sessions cmd_next tokens; do
	grep -q "^# TYPE lockstep_$g gauge\$" "$prom" || fail "$g is not a gauge: $(grep "lockstep_$g" "$prom" | head -2)"
done
for c in commands_sequenced events_applied logins; do
	grep -q "^# TYPE lockstep_${c}_total counter\$" "$prom" || fail "$c is not a counter"
done
# an operation a daemon does not answer is refused the same way by each
for n in matcher-1 gw-1; do
	out=$(node_ctl "$n" step-down 2>&1) && fail "$n answered step-down"
	case $out in *"not supported by the ${n%-1}"*) ;; *"not supported by the gateway"*) ;;
	*) fail "$n: step-down: $out" ;; esac
done
# a bad configuration exits 2 in every daemon, before anything starts
for d in lockstep-sequencer lockstep-matcher lockstep-gateway; do
	rc=0
	"$top_builddir/$d" --set node.nope=1 >/dev/null 2>&1 || rc=$?
	[ $rc -eq 2 ] || fail "$d: a bad configuration exited $rc, not 2"
done
echo "ok: gauges and counters flagged by the daemons; one refusal and one exit status for all"
