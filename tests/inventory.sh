#!/usr/bin/env bash
# A site from one inventory (issue 19): `ops/cluster render INVENTORY`
# writes every host's /etc/lockstep (its nodes' configs, the cluster key,
# the logins) and the units to enable there; `ops/cluster up --netlab
# --inventory` starts the same site on a netlab from those rendered files
# only (each host's directory is its /etc/lockstep under `ip netns exec`,
# each node started as its unit would), with networks A and B; orders
# flow, the replicas agree, the recorder's journal is the sequencer's, and
# down leaves nothing in /etc/netns.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench lockstep-recorder lockstep-replay
! asan_build || skip "the sanitizer build: what this checks is ops/cluster's rendering, the plain build's (the daemons run on the netlab under ASan in netlab_loss.sh)"
[ "$(id -u)" -eq 0 ] || skip "a netlab needs root"
why=$("$NETLAB" check 2>&1) || skip "no netlab on this machine: ${why:-netlab check failed}"
L=lsi$$
T=$(tmpdir_new)
trap netlab_cleanup EXIT
trap 'exit 143' TERM INT
"$NETLAB" --name "$L" up 6 --ab >"$T/netlab.out" 2>&1 || { cat "$T/netlab.out" >&2; fail "netlab did not come up"; }
cat >"$T/site.inv" <<EOF2
# the test's site: h1 is the clients'
cluster invtest
port 16000
host h2 198.18.0.2 198.19.0.2 gw-1
host h3 198.18.0.3 198.19.0.3 seq-1
host h4 198.18.0.4 198.19.0.4 rec-1
host h5 198.18.0.5 198.19.0.5 matcher-1
host h6 198.18.0.6 198.19.0.6 matcher-2
EOF2

# ---- render ------------------------------------------------------------------
"$CLUSTER" render "$T/site.inv" --out "$T/rendered" >"$T/render.out" 2>&1 ||
	{ cat "$T/render.out"; fail "render"; }
for h in h2:gateway-gw-1 h3:sequencer-seq-1 h4:recorder-rec-1 h5:matcher-matcher-1 h6:matcher-matcher-2; do
	d=$T/rendered/${h%%:*}
	for f in "etc/lockstep/${h#*:}.conf" etc/lockstep/cluster.key etc/lockstep/logins.conf units; do
		[ -s "$d/$f" ] || fail "render: no $d/$f"
	done
	grep -qx "lockstep-${h#*:}" <(sed 's/@/-/; s/\.service$//' "$d/units") ||
		fail "render: $d/units: $(cat "$d/units")"
	! grep -q '127\.0\.0\.1\|/tmp' "$d/etc/lockstep/${h#*:}.conf" ||
		fail "render: ${h#*:}.conf names a loopback address or a scratch path"
done
grep -q '^tape_iface_b = 198.19.0.5$' "$T/rendered/h5/etc/lockstep/matcher-matcher-1.conf" ||
	fail "render: matcher-1 has no network B"
grep -q '^tape_recorders = 198.18.0.4:16201$' "$T/rendered/h5/etc/lockstep/matcher-matcher-1.conf" ||
	fail "render: matcher-1 does not ask rec-1 first"
grep -q '^key_file = /etc/lockstep/cluster.key$' "$T/rendered/h3/etc/lockstep/sequencer-seq-1.conf" ||
	fail "render: the sequencer's key is not /etc/lockstep's"
info "rendered: $(tr '\n' ' ' <"$T/render.out")"

# ---- the same site, up on the netlab from its rendered files ---------------
"$CLUSTER" up --netlab="$L" --inventory "$T/site.inv" --dir "$T" >"$T/up.out" 2>&1 ||
	{ cat "$T/up.out" >&2; fail "the site did not come up"; }
for n in seq-1 matcher-1 gw-1; do
	tr '\0' ' ' <"/proc/$(cat "$T/$n.pid")/cmdline" | grep -q -- "--config /etc/lockstep/" ||
		fail "$n was not started from /etc/lockstep"
done
timeout -k 5 60 "$NETLAB" --name "$L" exec h1 "$top_builddir/lockstep-bench" --connect 198.18.0.2:16000 \
	--sessions 2 --orders 2000 --timeout 30 >"$T/bench.out" 2>&1 || { cat "$T/bench.out"; fail "bench"; }
wait_same 20 matcher-1 matcher-2
[ "$(stat_get matcher-1 tape_first_b)" -gt 0 ] || info "matcher-1: network B never came first"
"$CLUSTER" down --dir "$T" >/dev/null
for h in h2 h3 h4 h5 h6; do
	[ ! -e "/etc/netns/$L-$h/lockstep" ] || fail "down left /etc/netns/$L-$h/lockstep"
done
"$top_builddir/lockstep-replay" dump "$T/rec-1/journal" >"$T/rec.dump"
"$top_builddir/lockstep-replay" dump "$T/seq-1/journal" >"$T/seq.dump"
head -n "$(wc -l <"$T/rec.dump")" "$T/seq.dump" | cmp -s - "$T/rec.dump" || fail "rec-1's journal differs from seq-1's"
info "the site from $T/site.inv: 2,000 orders, replicas agree at $SEQ, rec-1 holds $(wc -l <"$T/rec.dump") events"
