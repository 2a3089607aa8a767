#!/usr/bin/env bash
# Members only (issue 15): every UDP surface of a running cluster (a group
# of 3, a gateway, 2 matchers) gets datagrams that are not its members':
# one untagged from 127.0.0.2 (a host that is no member), one tagged under
# another key (a bad tag), one tagged for another cluster's name under the
# right key, and one tagged for another surface; and to the surfaces that
# know their members' hosts (commands: [sequencer] gateways; raft: the peer
# address of the node named; votes: [matcher] replica_hosts) one correctly
# tagged from 127.0.0.2 (*_not_member). The surfaces: every
# sequencer's command port, raft port and retransmission port; the tape and
# execution groups (multicast); every matcher's execution retransmission
# port; the checkpoint group; the gateway's command-stream socket. Each one
# is dropped and counted on the surface it came to (auth_dropped_*, a log
# line naming the source); the journal, both replicas' state hashes,
# gateway.pos and the gateway's session journals are unchanged. Then old
# datagrams replayed with a correct tag (a tape event already applied, a
# command already sequenced) change nothing, nor does a correctly tagged
# tape heartbeat at seq 2^64-1 (a member gone wrong): the gateway and the
# replicas count it (unbelievable, tape_unbelievable) and gateway.pos keeps
# its position. Orders still flow.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstep-bench
SEQUENCERS=3
# no time events: the tape must not move while the test checks it stands still
cluster_up --set sequencer.time_event=0s
cluster_key_env

"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --orders 300 --window 8 --timeout 20 \
	>"$T/bench0.out" 2>&1 || { cat "$T/bench0.out"; fail "no orders before the test"; }
agree matcher-1 matcher-2

conf() { sed -n "s/^$2 = //p" "$T/$1.conf"; }
# the gateway's command socket: the UDP socket it sends commands from (logged)
gw_cmd=$(sed -n 's/.*command stream from \([0-9.:]*\) .*/\1/p' "$T/gw-1.log" | tail -1)
[ -n "$gw_cmd" ] || fail "gw-1 did not log its command socket"

# state before
snap() {
	for n in seq-1 seq-2 seq-3 matcher-1 matcher-2 gw-1; do
		echo "$n $(status_get "$n" seq) $(status_get "$n" commit)"
	done
	echo "hash $(status_get matcher-1 hash) $(status_get matcher-2 hash)"
	md5sum "$T/gw-1/gateway.pos"
	find "$T/gw-1/sessions" -type f -exec md5sum {} + | sort
}
sleep 0.5
snap >"$T/before"

# target lists: "surface addr" lines
{
	for j in 1 2 3; do
		echo "commands $(conf seq-$j listen)"
		echo "requests $(conf seq-$j retrans)"
	done
	conf seq-1 peers | tr ',' '\n' | sed 's/^/raft /'
	echo "tape $(conf matcher-1 tape_group)"
	ex=$(conf matcher-1 exec_group)
	echo "exec $ex"
	ip=${ex%:*}
	echo "votes ${ip%.*}.$((${ip##*.} + 1)):${ex##*:}"
	echo "requests $(conf matcher-1 exec_retrans)"
	echo "requests $(conf matcher-2 exec_retrans)"
	echo "requests $gw_cmd"
} >"$T/targets"
cat "$T/targets"

python3 - "$T/targets" <<'PY'
import os, socket, struct, sys
import auth
key, cl = os.environ["KEY"], os.environ["CLUSTER_NAME"]
other = "/tmp/lockstep-auth-test-other.key"
with open(other, "w") as f:
    f.write("cluster-key %d %s\n" % (auth.load_keys(key)[1], os.urandom(32).hex()))
raw_surface = {"raft": None, "votes": None}
def body(surface):
    if surface == "raft":
        return b"LSRF" + bytes([1, 3, 0, 1, 0xFF, 0]) + b"TAPE".ljust(10) + bytes(32)
    if surface == "votes":
        return b"LSCK" + bytes(52)
    if surface == "requests":
        return b"TAPE".ljust(10) + struct.pack(">QH", 1, 100)
    return b"TAPE".ljust(10) + struct.pack(">QH", 1, 1) + struct.pack(">H", 4) + b"\x08\x01\x10\x01"
stranger, member = auth.mcast_sender("127.0.0.2"), auth.mcast_sender("127.0.0.1")
for line in open(sys.argv[1]):
    surface, addr = line.split()
    host, port = addr.rsplit(":", 1)
    assert host.startswith("127.") or host.startswith("239."), host
    dst = (host, int(port))
    off = raw_surface.get(surface, 0)
    b = body(surface)
    stranger.sendto(b, dst)                                        # untagged, not a member
    member.sendto(auth.seal(b, other, cl, surface, off), dst)       # another key
    member.sendto(auth.seal(b, key, cl + "x", surface, off), dst)   # another cluster
    wrong = "exec" if surface != "exec" else "tape"
    member.sendto(auth.seal(b, key, cl, wrong, off), dst)           # another surface
    if surface in ("commands", "raft", "votes"):                    # the key, not a member's host
        stranger.sendto(auth.seal(b, key, cl, surface, off), dst)
os.unlink(other)
PY

# each surface counted what came to it: 4 datagrams a target
want() { # NODE SURFACE MIN
	local v=0
	for _ in $(seq 1 30); do
		v=$(stat_get "$1" "auth_dropped_$2")
		[ "${v:-0}" -ge "$3" ] && break
		sleep 0.1
	done
	[ "${v:-0}" -ge "$3" ] || fail "$1: auth_dropped_$2 = ${v:-none}, want >= $3"
	info "$1: auth_dropped_$2 = $v"
}
for j in 1 2 3; do
	want "seq-$j" commands 4
	want "seq-$j" requests 4
	want "seq-$j" raft 4
done
for m in matcher-1 matcher-2; do
	want "$m" tape 4
	want "$m" votes 4
	want "$m" requests 4
done
want gw-1 tape 4
want gw-1 exec 4
want gw-1 requests 4
# correctly tagged, but from a host that is no member of that surface
want_stat() { # NODE COUNTER MIN
	local v
	v=$(stat_get "$1" "$2")
	[ "${v:-0}" -ge "$3" ] || fail "$1: $2 = ${v:-none}, want >= $3"
	info "$1: $2 = $v"
}
for j in 1 2 3; do
	want_stat "seq-$j" commands_not_member 1
done
# the raft datagram names node 1 (seq-2), which takes it for its own echo
want_stat seq-1 raft_not_member 1
want_stat seq-3 raft_not_member 1
want_stat matcher-1 checkpoints_not_member 1
want_stat matcher-2 checkpoints_not_member 1
grep -q "dropped a .* from 127.0.0.2:" "$T/seq-1.log" || fail "seq-1: no log line naming 127.0.0.2"
node_ctl seq-1 stats | grep -q "^auth_dropped_from_127_0_0_2_" ||
	fail "seq-1: no per-source counter for 127.0.0.2"

# ---- replays: correctly tagged, old
tape=$(conf matcher-1 tape_group)
python3 - "$tape" "$(conf seq-1 listen)" <<'PY'
import os, socket, struct, sys
import auth
key, cl = os.environ["KEY"], os.environ["CLUSTER_NAME"]
s = auth.mcast_sender()
# a tape event at seq 2, term 1: long applied
group, gport = sys.argv[1].rsplit(":", 1)
s.sendto(auth.seal(auth.tape_packet(2, 1), key, cl, "tape"), (group, int(gport)))
# gw-1's command 1 again (already sequenced): a duplicate
cmd = b"gw-1".ljust(10) + struct.pack(">QH", 1, 1) + struct.pack(">H", 2) + b"\x08\x01"
host, port = sys.argv[2].rsplit(":", 1)
s.sendto(auth.seal(cmd, key, cl, "commands"), (host, int(port)))
# a heartbeat at the end of the 64-bit range
hb = b"TAPE".ljust(10) + struct.pack(">QH", (1 << 64) - 1, 0)
s.sendto(auth.seal(hb, key, cl, "tape"), (group, int(gport)))
PY
sleep 1
for n in gw-1:unbelievable matcher-1:tape_unbelievable matcher-2:tape_unbelievable; do
	v=$(stat_get "${n%%:*}" "${n#*:}")
	[ "${v:-0}" -ge 1 ] || fail "${n%%:*}: ${n#*:} = ${v:-none}: the heartbeat at 2^64-1 was not refused"
done
snap >"$T/after"
diff "$T/before" "$T/after" || fail "state changed after the forged and replayed datagrams"
info "journal, hashes, gateway.pos and session journals unchanged"

"$BENCH" --connect "127.0.0.1:$P" --sessions 2 --orders 300 --window 8 --timeout 20 \
	>"$T/bench1.out" 2>&1 || { cat "$T/bench1.out"; fail "orders did not flow afterwards"; }
agree matcher-1 matcher-2
"$BENCH" --connect "127.0.0.1:$P" --sessions 1 --orders 100 --window 4 --timeout 20 --cluster "$T" --json "$T/b.json" >"$T/bench2.out" 2>&1 || fail "bench"
no_losses "$T/b.json"
echo "ok: every surface dropped and counted what was not its members'; replays changed nothing; orders flow"
