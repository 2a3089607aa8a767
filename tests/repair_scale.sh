#!/usr/bin/env bash
# Many tape receivers, one loss (issue 19): ops/scale runs a cluster with a
# tape recorder and 50 light receivers (recorders asking on the repair
# group) on an ops/netlab of 55 hosts, each node on a host of its own (10
# receivers in one namespace under ASan, or where no netlab can be made),
# drops 2% of what the sequencer's host sends (correlated: every receiver
# misses the same tape datagrams) and 1% of what each receiver's host
# receives, under load;
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
mode=() n=10
if ! asan_build; then
	n=50
	"$top_srcdir/ops/netlab" check >/dev/null 2>&1 && mode=(--netlab) ||
		info "no netlab here: $n receivers in one namespace"
fi
out=$(LOCKSTEP_BIN=$top_builddir "$top_srcdir/ops/scale" --receivers "$n" --suppress on \
	--duration 3 --check ${mode[@]+"${mode[@]}"} 2>&1) || { echo "$out"; fail "ops/scale"; }
echo "$out" | sed 's/^/info: /'
