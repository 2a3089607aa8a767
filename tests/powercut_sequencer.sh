#!/usr/bin/env bash
# tests/lib.sh's power-cut helpers on a real daemon: a single sequencer
# with fsync = disk (durable before visible: the default) runs armed (powercut_arm),
# orders are accepted, and the power is cut (powercut_cut: SIGKILL, then
# its state directory as strict POSIX would have left it). Started again,
# it must hold every event the matchers applied from the tape; the cluster
# then trades on, and a second cut of the re-armed node does the same.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built tests/libpowercut.so lockstep-client
SEQUENCERS=1
cluster_up

# orders N TOKEN: N buy orders of TRADR1, each accepted.
orders() {
	local i s=""
	for i in $(seq 1 "$1"); do
		s+="A: buy 10 MSFT $((100 + i)) token $2$i"$'\n'"A: expect Accepted token=$2$i *"$'\n'
	done
	client <<<"connect A TRADR1 pw1 seq 0"$'\n'"$s"
}

# cut_and_check ROUND: the cut, the restart, and what survived it.
cut_and_check() {
	local applied before after
	wait_for 10 "matcher-1 live" test "$(status_get matcher-1 state)" = live
	applied=$(status_get matcher-1 seq) before=$(status_get seq-1 seq)
	[ "${applied:-0}" -gt 0 ] || fail "$1: matcher-1 applied nothing"
	[ -n "$(ls -A "$T/powercut/seq-1/objects")" ] || fail "$1: the shim kept no file contents"
	powercut_cut seq-1
	[ ! -S "$T/seq-1/seq-1.ctl" ] || fail "$1: the control socket came back from the image"
	compgen -G "$T/seq-1/journal/*.seg" >/dev/null || fail "$1: no journal segment in the restored image"
	"$CLUSTER" start seq-1 --dir "$T" >/dev/null || fail "$1: seq-1 did not start after the cut"
	[ -f "$T/powercut/seq-1/root" ] || fail "$1: seq-1 restarted without the shim"
	after=$(status_get seq-1 seq)
	info "$1: seq-1 at seq $before when cut, $after after; matcher-1 had applied $applied"
	[ "${after:-0}" -ge "$applied" ] ||
		fail "$1: seq-1 lost events the tape carried: journal at $after after the cut, matcher-1 had applied $applied"
}

powercut_arm seq-1
orders 20 P
cut_and_check "cut 1"
orders 5 Q
cut_and_check "cut 2"
powercut_disarm seq-1
orders 3 R
echo "ok: two power cuts of seq-1 lost nothing the tape had carried"
