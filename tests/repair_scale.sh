#!/usr/bin/env bash
# Many tape receivers, one loss (issue 19): ops/scale runs a cluster with a
# tape recorder and 50 light receivers (recorders asking on the repair
# group, 10 under ASan) in a network namespace of its own, drops 2% of the
# tape before every receiver (correlated) and 1% more at each, under load;
# every receiver ends with the whole tape, its journal verified and equal to
# the sequencer's, and the requests the receivers send and the answers the
# recorder multicasts stay under 3 per lost datagram (ops/scale --check):
# they do not grow with the number of receivers.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench lockstep-recorder lockstep-replay
[ "$(id -u)" -eq 0 ] || skip "network namespaces and nftables need root"
command -v nft >/dev/null || skip "no nft (apt-get install nftables)"
ip netns add lsscalechk$$ 2>/dev/null || skip "cannot make a network namespace"
ip netns del lsscalechk$$
if asan_build; then n=10; else n=50; fi
out=$(LOCKSTEP_BIN=$top_builddir "$top_srcdir/ops/scale" --receivers "$n" --suppress on \
	--duration 3 --check 2>&1) || { echo "$out"; fail "ops/scale"; }
echo "$out" | sed 's/^/info: /'
