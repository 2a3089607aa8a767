#!/usr/bin/env bash
# The units of ops/systemd/ under a real systemd (the one of this machine,
# 252 on Debian 12) running as PID 1 of private PID, mount, network, UTS,
# IPC and cgroup namespaces: a tmpfs on /run, /tmp, /var/tmp and /var/lib,
# an overlay on /etc (the lockstep user from
# ops/systemd/sysusers.d/lockstep.conf, the nodes' configs and the cluster
# key, made by lockstepctl keygen as an install does, in /etc/lockstep),
# /proc/sys read-only, the binaries of this build at
# /usr/local/bin (as `make install` puts them), a pty as the console (its
# output in console.log: systemd's log and the nodes' stderr; no journald),
# and a unit path holding only lockstep's units and stub targets, so that
# nothing of the host's own services is pulled in. (Not systemd-nspawn on a
# debootstrapped rootfs: that takes a minute to build and a package more;
# this boots in about a second, so it runs in every `make check`: ~20 s,
# ~35 s on a busy two-CPU machine.)
# Checks, one cluster (a group of three sequencers, one matcher, one
# gateway) on the namespace's loopback:
#   - a gateway started alone stays "activating" (no READY=1: no tape);
#     `systemctl start lockstep.target` returns with every node active, and
#     each one's own status then says it has joined: the sequencers elected
#     one primary, the other two are its standbys in the same term; the
#     matcher is live, the gateway ready;
#   - the cluster started from lockstep.target serves orders;
#   - each node runs as the lockstep user, without capabilities, with
#     NoNewPrivs and seccomp, its journal in /var/lib/lockstep/NODE;
#   - STATUS= lines carry role, state, term and positions;
#   - `systemctl reload` re-reads log_level and the gateway's logins (a new
#     login can log in, a removed one cannot), and fails, leaving the node
#     running, on a broken credentials file; SIGHUP reloads too;
#   - a key rotation (lockstepctl keygen --add, --send, --remove, each
#     followed by a reload of every node) reaches the running nodes: their
#     status names the keys in use, the key file keeps its group and mode,
#     and orders flow after it;
#   - a SIGKILL'd matcher is restarted and rejoins (live at the tape's end);
#   - a SIGSTOP'd primary sequencer: another one is elected primary and the
#     cluster serves orders while the hung one waits for its watchdog; the
#     watchdog kills it, it is restarted and comes back as a standby of the
#     new primary, in its term; the cluster serves orders again;
#   - `systemctl stop lockstep.target` ends every node cleanly (exit 0).
# Skips (77) where the machine cannot host systemd so: not root, no
# systemd, no unshare/nsenter, no cgroup2, no overlayfs.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
SYSTEMD=${LOCKSTEP_SYSTEMD:-/lib/systemd/systemd}

[ "$(id -u)" = 0 ] || skip "needs root (namespaces, mounts, a system manager)"
[ -x "$SYSTEMD" ] || skip "no $SYSTEMD (apt-get install systemd)"
for c in unshare nsenter mount ip systemd-sysusers; do
	command -v $c >/dev/null || skip "no $c"
done
need_built lockstep-sequencer lockstep-gateway lockstep-matcher lockstepctl lockstep-client
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
grep -qw overlay /proc/filesystems || skip "no overlayfs"
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
[ -n "$cg2" ] || skip "no cgroup2 hierarchy mounted"
unshare --pid --fork --mount --net --uts --ipc --cgroup true 2>/dev/null ||
	skip "cannot make namespaces here"

[ -e "$top_srcdir/ops/systemd/lockstep.target" ] || fail "no $top_srcdir/ops/systemd/ (not distributed?)"
# Everything of the run lives in T (the build tree: /tmp is a tmpfs inside).
mkdir -p "$top_builddir/tests"
T=$(TMPDIR=$top_builddir/tests tmpdir_new systemd_run)
CG=$cg2$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
CG=${CG%/}/lockstep-systemd-run.$$
SD= # systemd's PID (on the host)
UNSHARE=

cleanup() {
	local rc=$? i
	set +e
	if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ -s "$T/console.log" ]; then
		echo "----- systemd and the nodes (console, last 60 lines)" >&2
		tail -n 60 "$T/console.log" >&2
	fi
	[ -n "$SD" ] && kill -KILL "$SD" 2>/dev/null # the whole PID namespace goes
	[ -n "$UNSHARE" ] && wait "$UNSHARE" 2>/dev/null
	for i in $(seq 1 50); do
		[ -d "$CG" ] || break
		find "$CG" -depth -type d -exec rmdir {} + 2>/dev/null
		sleep 0.1
	done
	[ -n "${LOCKSTEP_TEST_KEEP:-}" ] || rm -rf "$T"
	exit $rc
}
trap cleanup EXIT

# ---- the units, as installed, and stub targets --------------------------
mkdir -p "$T/units" "$T/empty" "$T/conf" "$T/etc-upper" "$T/etc-work"
for f in "$top_srcdir"/ops/systemd/*.in; do
	sed 's|@bindir@|/usr/local/bin|g' "$f" >"$T/units/$(basename "$f" .in)"
done
cp "$top_srcdir/ops/systemd/lockstep.target" "$T/units/"
for t in default sysinit basic shutdown multi-user network-online sockets timers paths; do
	printf '[Unit]\nDescription=stub %s.target (tests/systemd_run.sh)\n' "$t" \
		>"$T/units/$t.target"
done
# What `systemctl enable` would link (it writes to /etc/systemd/system).
SEQS=(seq-1 seq-2 seq-3)
UNITS=(lockstep-sequencer@seq-1 lockstep-sequencer@seq-2 lockstep-sequencer@seq-3
	lockstep-matcher@matcher-1 lockstep-gateway@gw-1)
mkdir -p "$T/units/lockstep.target.wants"
for u in "${UNITS[@]}"; do
	ln -s "../${u%@*}@.service" "$T/units/lockstep.target.wants/$u.service"
done
# Test-only drop-ins: no core file from the deliberately hung node; and a
# sanitizer build's leak check at exit needs ptrace, which the unit's
# system call filter refuses.
asan=
case "$(nm -D "$top_builddir/lockstep-sequencer" 2>/dev/null || true)" in *__asan_init*) asan=1 ;; esac
for r in sequencer matcher gateway; do
	mkdir -p "$T/units/lockstep-$r@.service.d"
	{
		echo "[Service]"
		echo "LimitCORE=0"
		[ -z "$asan" ] || echo "Environment=ASAN_OPTIONS=detect_leaks=0"
	} >"$T/units/lockstep-$r@.service.d/test.conf"
done

# ---- the nodes' configuration (/etc/lockstep inside) ----------------------
P=15000
cat >"$T/conf/logins.conf" <<EOF
[logins]
TRADR1 = pw1 FRMA
TRADR2 = pw2 FRMB
EOF
# The sequencers' ports as ops/cluster lays them out: seq-1 listens on
# P+100, retransmits on P+101 and talks raft on P+104; seq-j (j > 1) on
# P+120+3(j-2) +0, +1, +2. The gateway and the matcher are given every node.
seq_port() { # seq_port J K: seq-J's listen (K=0), retrans (K=1) or raft (K=2) port
	if [ "$1" -eq 1 ]; then
		echo $((P + 100 + ($2 == 2 ? 4 : $2)))
	else
		echo $((P + 120 + 3 * ($1 - 2) + $2))
	fi
}
seq_list() { # seq_list K: every sequencer's port K, a comma list in node order
	local j l=""
	for j in 1 2 3; do l+="${l:+,}127.0.0.1:$(seq_port $j "$1")"; done
	echo "$l"
}
for j in 1 2 3; do
	cat >"$T/conf/sequencer-seq-$j.conf" <<EOF
[node]
log_level = info
[sequencer]
listen = 127.0.0.1:$(seq_port $j 0)
retrans = 127.0.0.1:$(seq_port $j 1)
tape_group = 239.255.0.1:$((P + 102))
tape_iface = 127.0.0.1
node_id = $((j - 1))
peers = $(seq_list 2)
EOF
done
cat >"$T/conf/matcher-matcher-1.conf" <<EOF
[node]
log_level = info
[matcher]
partition = 0
tape_group = 239.255.0.1:$((P + 102))
tape_iface = 127.0.0.1
tape_retrans = $(seq_list 1)
exec_group = 239.255.0.2:$((P + 103))
exec_retrans = 127.0.0.1:$((P + 111))
symbols = AAPL MSFT AMZN GOOG
max_shares = 1000000
EOF
cat >"$T/conf/gateway-gw-1.conf" <<EOF
[node]
log_level = info
[gateway]
ouch_listen = 127.0.0.1:$P
sequencer = $(seq_list 0)
tape_group = 239.255.0.1:$((P + 102))
tape_iface = 127.0.0.1
tape_retrans = $(seq_list 1)
exec_group = 239.255.0.2:$((P + 103))
exec_retrans = 127.0.0.1:$((P + 111))
credentials = /etc/lockstep/logins.conf
EOF

# ---- systemd as PID 1 ---------------------------------------------------
# Inside: PID 1 moves into a cgroup of its own, then takes a cgroup
# namespace rooted there, mounts what it needs and becomes systemd.
cat >"$T/pid1.sh" <<'EOF'
set -e
cd /
echo 0 >"$CG/cgroup.procs"
# T and the build may be under /tmp, which gets a tmpfs below: T is seen
# at /run/t from here on, and what is needed from the build is copied first.
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir /run/t
mount --bind "$T" /run/t
T=/run/t
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$T/etc-upper,workdir=$T/etc-work" /etc
mount -t tmpfs -o mode=0755 tmpfs /usr/local/bin
for b in lockstep-sequencer lockstep-gateway lockstep-matcher lockstepctl; do
	cp "$BUILD/$b" /usr/local/bin/
done
systemd-sysusers "$SYSUSERS" >/dev/null
mkdir -p /etc/lockstep
cp "$T"/conf/* /etc/lockstep/
chgrp lockstep /etc/lockstep/*
chmod 0640 /etc/lockstep/*
# The install's cluster key ([node] key_file's default), where there is none.
[ -e /etc/lockstep/cluster.key ] ||
	/usr/local/bin/lockstepctl keygen /etc/lockstep/cluster.key >/dev/null
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=1777 tmpfs /var/tmp
mount -t tmpfs -o mode=0755 tmpfs /var/lib
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
# The console is a pty whose output a helper copies to console.log: systemd
# logs to /dev/console only when it is a terminal.
python3 - "$T/console.log" "$T/console.tty" <<'PY' &
import os, sys, tty
m, s = os.openpty()
tty.setraw(s)
out = open(sys.argv[1], "ab", buffering=0)
with open(sys.argv[2] + ".new", "w") as f:
    f.write(os.ttyname(s))
os.rename(sys.argv[2] + ".new", sys.argv[2])
while True:
    try:
        d = os.read(m, 65536)
    except OSError:
        break
    if not d:
        break
    out.write(d)
PY
for i in $(seq 1 50); do [ -s "$T/console.tty" ] && break; sleep 0.1; done
mount --bind "$(cat "$T/console.tty")" /dev/console
ip link set lo up
exec unshare --cgroup -- sh -c 'mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec "$0" "$@"' \
	env -i container=lockstep-test PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	SYSTEMD_UNIT_PATH="$T/units" SYSTEMD_GENERATOR_PATH="$T/empty" \
	SYSTEMD_ENVIRONMENT_GENERATOR_PATH="$T/empty" \
	"$SYSTEMD" --system --unit=default.target --log-target=console --log-level=info \
	--log-color=no --default-standard-output=tty --default-standard-error=tty
EOF
mkdir "$CG" || skip "cannot make a cgroup under $CG"
T=$T CG=$CG BUILD=$top_builddir SYSTEMD=$SYSTEMD SYSUSERS=$top_srcdir/ops/systemd/sysusers.d/lockstep.conf \
	unshare --pid --fork --mount --mount-proc --net --uts --ipc --propagation private \
	bash "$T/pid1.sh" >"$T/pid1.out" 2>&1 </dev/null &
UNSHARE=$!
for i in $(seq 1 100); do
	SD=$(pgrep -P "$UNSHARE" 2>/dev/null | head -1) || true
	[ -n "$SD" ] && [ "$(cat "/proc/$SD/comm" 2>/dev/null)" = systemd ] && break
	kill -0 "$UNSHARE" 2>/dev/null || { cat "$T/pid1.out" >&2; fail "the namespace did not start"; }
	SD=
	sleep 0.1
done
[ -n "$SD" ] || { cat "$T/pid1.out" >&2; fail "systemd did not start in 10 s"; }

inside() { nsenter -t "$SD" -m -p -n -u -i -C -- "$@"; }
innet() { nsenter -t "$SD" -n -- "$@"; } # the host's files, the cluster's network
sdctl() { inside systemctl --no-pager "$@"; }
prop() { sdctl show -p "$2" --value "$1"; }
ctl() { inside /usr/local/bin/lockstepctl --node "$@"; }
# get_status NODE: the node's status in W, the words of `lockstepctl status`:
# "NAME: ROLE STATE term=T seq=S commit=C ..." (the text rather than the
# JSON: a python3 takes most of a second to start on a loaded machine, and
# the checks below ask often).
get_status() {
	local line
	line=$(ctl "$1" --timeout 1000 status) || return 1
	read -r -a W <<<"$line"
	[ "${#W[@]}" -ge 3 ]
}
# word KEY: STATE for state, else the VALUE of KEY=VALUE in W.
word() {
	local x
	[ "$1" != state ] || { echo "${W[2]}"; return 0; }
	for x in "${W[@]:3}"; do
		case $x in "$1="*) echo "${x#*=}"; return 0 ;; esac
	done
	return 1
}
field() { get_status "$1" && word "$2"; } # field NODE KEY: one field of the node's status
# group_ok NODE...: the sequencers NODE... are one primary and standbys, all
# in one term; sets PRIMARY and GTERM (not on failure). Run directly, not in
# $(...), for those.
group_ok() {
	local n st t p="" term=""
	for n in "$@"; do
		get_status "$n" || return 1
		st=$(word state) t=$(word term)
		[ -n "$term" ] || term=$t
		[ "$t" = "$term" ] || return 1
		case $st in
		primary) [ -z "$p" ] || return 1; p=$n ;;
		standby) ;;
		*) return 1 ;;
		esac
	done
	[ -n "$p" ] || return 1
	PRIMARY=$p GTERM=$term
}
group_says() { # group_says NODE...: "NODE STATE term T, ..." for the record
	local n sep=""
	for n in "$@"; do
		if get_status "$n"; then
			printf '%s%s %s term %s' "$sep" "$n" "$(word state)" "$(word term)"
		else
			printf '%s%s (no answer)' "$sep" "$n"
		fi
		sep=", "
	done
}
is_state() { [ "$(prop "$1" ActiveState)" = "$2" ]; }
restarted() { [ "$(prop "$1" NRestarts)" -gt "$2" ]; } # restarted UNIT N: more than N times
has_status() { [ -n "$(prop "$1" StatusText)" ]; }
# at_primary_seq NODE: NODE has applied all the primary had committed when
# read (at or past it: an idle tape moves on, a time event every
# [sequencer] time_event)
at_primary_seq() {
	local c s
	group_ok "${SEQS[@]}" && c=$(field "$PRIMARY" commit) && s=$(field "$1" seq) && [ "$s" -ge "$c" ]
}
# client NAME: a lockstep-client script (standard input) through gw-1.
client() {
	cat >"$T/$1.script"
	innet "$top_builddir/lockstep-client" --connect "127.0.0.1:$P" --timeout 5000 \
		--script "$T/$1.script" >"$T/$1.out" 2>&1 ||
		{ cat "$T/$1.out" >&2; fail "client script $1"; }
}
# cross NAME N BUY SELL SYMBOL PRICE SIDE...: client script NAME in which A
# (TRADR1) buys BUY SYMBOL at PRICE (token SAn), B (TRADR2) sells SELL at it
# (SBn), both are accepted and each SIDE (A, B) hears its execution of SELL.
cross() {
	local name=$1 n=$2 buy=$3 sell=$4 sym=$5 px=$6 side
	shift 6
	client "$name" < <(
		printf 'connect A TRADR1 pw1 seq 0\nconnect B TRADR2 pw2 seq 0\n'
		printf 'A: buy %s %s %s token SA%s\nA: expect Accepted token=SA%s *\n' "$buy" "$sym" "$px" "$n" "$n"
		printf 'B: sell %s %s %s token SB%s\nB: expect Accepted token=SB%s *\n' "$sell" "$sym" "$px" "$n" "$n"
		for side in "$@"; do
			LC_NUMERIC=C printf '%s: expect Executed token=S%s%s %s @ %.4f *\n' "$side" "$side" "$n" "$sell" "$px"
		done
	)
}

system_up() { case $(sdctl is-system-running 2>/dev/null) in running | degraded) return 0 ;; esac; return 1; }
wait_for 10 "systemd running" system_up
info "systemd $(inside systemctl --version | awk 'NR == 1 {print $2}') is PID 1 of the namespace"

# ---- active only after READY=1 --------------------------------------------
# A gateway alone hears no tape: it stays in "activating", saying why.
sdctl start --no-block lockstep-gateway@gw-1.service
wait_for 10 "gw-1 activating with a STATUS=" has_status lockstep-gateway@gw-1
sleep 1
[ "$(prop lockstep-gateway@gw-1 ActiveState)" = activating ] ||
	fail "gw-1 is $(prop lockstep-gateway@gw-1 ActiveState) without a sequencer"
status=$(prop lockstep-gateway@gw-1 StatusText)
case $status in "gateway starting term="*) ;; *) fail "gw-1 STATUS= is '$status'" ;; esac
[ "$(field gw-1 state)" = starting ] || fail "gw-1 is not 'starting'"
info "gw-1 alone: activating, STATUS=$status"

# The whole cluster: start returns once every node is active (READY=1: a
# sequencer sends it once it is the primary or a standby that knows it).
# The three sequencers start together and elect one of them. (A few seconds
# to settle: on a loaded machine a standby may time out on a late heartbeat
# and ask for a new term once; that is the group working, not the units.)
sdctl start lockstep.target || fail "systemctl start lockstep.target"
for u in "${UNITS[@]}"; do
	is_state "$u" active || fail "$u is $(prop "$u" ActiveState) after lockstep.target started"
done
try_for 5 group_ok "${SEQS[@]}" || fail "not one primary and two standbys in one term: $(group_says "${SEQS[@]}")"
info "elected $PRIMARY in term $GTERM: $(group_says "${SEQS[@]}")"
[ "$(field matcher-1 state)" = live ] || fail "matcher-1 active but not live"
[ "$(field gw-1 state)" = ready ] || fail "gw-1 active but not ready"
for u in "${UNITS[@]}"; do
	info "$u: active, STATUS=$(prop "$u" StatusText)"
done

# ---- the hardened units run as their own user -------------------------------
uid=$(inside id -u lockstep)
[ "$uid" != 0 ] || fail "the lockstep user is root"
for u in "${UNITS[@]}"; do
	pid=$(prop "$u" MainPID)
	st=$(inside cat "/proc/$pid/status")
	[ "$(awk '/^Uid:/ {print $3}' <<<"$st")" = "$uid" ] || fail "$u does not run as lockstep"
	[ "$(awk '/^CapEff:/ {print $2}' <<<"$st")" = 0000000000000000 ] || fail "$u has capabilities"
	[ "$(awk '/^NoNewPrivs:/ {print $2}' <<<"$st")" = 1 ] || fail "$u without NoNewPrivs"
	[ "$(awk '/^Seccomp:/ {print $2}' <<<"$st")" = 2 ] || fail "$u without a seccomp filter"
done
for n in "${SEQS[@]}"; do
	[ "$(inside stat -c %U "/var/lib/lockstep/$n/journal")" = lockstep ] ||
		fail "$n's journal is not the lockstep user's"
	inside test -S "/run/lockstep/$n/$n.ctl" || fail "no control socket of $n in RuntimeDirectory="
done
info "every node runs as lockstep (uid $uid), no capability, NoNewPrivs, seccomp"

# ---- it serves orders ---------------------------------------------------------
cross orders1 1 100 40 AAPL 150 A B
info "orders through lockstep.target's cluster: accepted and matched"

# ---- reload: log level and logins -------------------------------------------
AUTH1="auth on (cluster lockstep, tagging with key 1, accepting 1)" # the key of the install
inside sh -c 'printf "TRADR9 = pw9 FRMC\n" >>/etc/lockstep/logins.conf &&
	sed -i "s/^log_level = info/log_level = debug/" /etc/lockstep/gateway-gw-1.conf'
sdctl reload lockstep-gateway@gw-1 || fail "systemctl reload gw-1"
wait_for 5 "gw-1's log of the reload" \
	grep -qF "gw-1: control: reloaded: log_level debug, $AUTH1, 3 logins (1 new, 0 revoked)" \
	"$T/console.log"
client orders2 <<'S'
connect C TRADR9 pw9 seq 0
C: sell 10 AAPL 150 token SC1
C: expect Accepted token=SC1 *
C: expect Executed token=SC1 10 @ 150.0000 *
S
# Gone from the file: revoked, no new login.
inside sed -i '/^TRADR9 /d' /etc/lockstep/logins.conf
sdctl reload lockstep-gateway@gw-1 || fail "systemctl reload gw-1 (revoking)"
wait_for 5 "gw-1's log of the revocation" \
	grep -qF "gw-1: control: reloaded: log_level debug, $AUTH1, 2 logins (0 new, 1 revoked)" \
	"$T/console.log"
printf 'connect C TRADR9 pw9 seq 0\n' >"$T/revoked.script"
if innet "$top_builddir/lockstep-client" --connect "127.0.0.1:$P" --timeout 5000 \
	--script "$T/revoked.script" >"$T/revoked.out" 2>&1; then
	fail "revoked login TRADR9 could log in"
fi
grep -q 'login rejected: A' "$T/revoked.out" || { cat "$T/revoked.out" >&2; fail "TRADR9 not rejected"; }
inside sh -c 'printf "BROKEN LINE\n" >>/etc/lockstep/logins.conf'
if sdctl reload lockstep-gateway@gw-1 2>/dev/null; then fail "reload of a broken file succeeded"; fi
is_state lockstep-gateway@gw-1 active || fail "gw-1 not active after a failed reload"
inside sed -i '/^BROKEN LINE$/d' /etc/lockstep/logins.conf
# SIGHUP does the same, with RELOADING=1 ... READY=1 around it.
sdctl kill -s HUP --kill-who=main lockstep-sequencer@seq-1
wait_for 5 "seq-1 SIGHUP reload" grep -q 'seq-1: control: reloaded: log_level info' "$T/console.log"
wait_for 5 "seq-1 active after SIGHUP" is_state lockstep-sequencer@seq-1 active
info "reload: new login TRADR9 trades, log_level debug; TRADR9 removed: rejected; a broken file fails the reload only"

# ---- a key rotation, by reload ------------------------------------------------
# rotate ARG...: lockstepctl keygen ARG... on the install's key, then every
# node reloaded (one host: the file is every member's already)
rotate() {
	inside /usr/local/bin/lockstepctl keygen "$@" /etc/lockstep/cluster.key >>"$T/keygen.out" ||
		fail "lockstepctl keygen $*"
	for u in "${UNITS[@]}"; do sdctl reload "$u" || fail "systemctl reload $u after keygen $*"; done
}
# keys_are TEXT: every node's status says auth=on (cluster lockstep, TEXT)
keys_are() {
	local u line
	for u in "${UNITS[@]}"; do
		line=$(ctl "${u#*@}" --timeout 1000 status) || fail "${u#*@}: no status"
		[[ $line == *"auth=on (cluster lockstep, $1)"* ]] || fail "${u#*@}: $line; want $1"
	done
}
keys_are "tagging with key 1, accepting 1"
rotate --add
keys_are "tagging with key 1, accepting 1 2"
rotate --send 2
keys_are "tagging with key 2, accepting 1 2"
rotate --remove 1
keys_are "tagging with key 2, accepting 2"
[ "$(inside stat -c '%U:%G %a' /etc/lockstep/cluster.key)" = "root:lockstep 640" ] ||
	fail "cluster.key after the rotation: $(inside stat -c '%U:%G %a' /etc/lockstep/cluster.key)"
cross orders_key 9 10 10 GOOG 100 A B
info "key rotation 1 -> 2 by keygen and reload on every node; orders served after it"

# ---- Prometheus metrics -------------------------------------------------------
ctl gw-1 stats --prometheus >"$T/prom.txt" || fail "stats --prometheus"
python3 - "$T/prom.txt" <<'PY' || fail "stats --prometheus: malformed exposition"
import re, sys
types, seen = {}, set()
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("# TYPE "):
        _, _, name, t = line.split(" ", 3)
        assert name not in types, "TYPE twice: " + name
        assert t in ("counter", "gauge", "summary"), line
        types[name] = t
        continue
    if line.startswith("# HELP "):
        seen.add(line.split(" ")[2])
        continue
    m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)', line)
    assert m, "bad sample: " + line
    name = m.group(1)
    fam = name if name in types else re.sub(r"_(count|sum)$", "", name)
    assert fam in types and fam in seen, "no TYPE/HELP before " + name
    assert types[fam] != "counter" or name.endswith("_total"), "counter without _total: " + name
    float(m.group(3))
assert types, "no metric"
PY
grep -q '^lockstep_ouch_in_total{node="gw-1",role="gateway"} [1-9]' "$T/prom.txt" ||
	fail "no lockstep_ouch_in_total counter"
info "lockstepctl stats --prometheus: $(grep -c '^# TYPE' "$T/prom.txt") families, each with HELP and TYPE"

# ---- SIGKILL: restarted, rejoins ------------------------------------------------
u=lockstep-matcher@matcher-1
pid=$(prop "$u" MainPID) n0=$(prop "$u" NRestarts)
inside kill -KILL "$pid"
wait_for 20 "$u restarted" restarted "$u" "$n0"
wait_for 20 "$u active again" is_state "$u" active
[ "$(prop "$u" MainPID)" != "$pid" ] || fail "$u has its old PID"
[ "$(field matcher-1 state)" = live ] || fail "matcher-1 restarted but not live"
wait_for 10 "matcher-1 at the primary's seq" at_primary_seq matcher-1
info "SIGKILL'd matcher-1: restarted (NRestarts $(prop "$u" NRestarts)), live at seq $(field matcher-1 seq)"

# ---- SIGSTOP: the group elects another primary, the watchdog restarts it ------
try_for 5 group_ok "${SEQS[@]}" || fail "no group before the SIGSTOP: $(group_says "${SEQS[@]}")"
old=$PRIMARY term0=$GTERM others=()
for n in "${SEQS[@]}"; do [ "$n" = "$old" ] || others+=("$n"); done
u=lockstep-sequencer@$old
pid=$(prop "$u" MainPID) n0=$(prop "$u" NRestarts)
info "$u: the primary in term $term0, WatchdogUSec=$(prop "$u" WatchdogUSec); stopping its loop (SIGSTOP)"
t0=$EPOCHREALTIME
inside kill -STOP "$pid"
# The other two elect one of them long before the watchdog (2.5 to 5 s
# after the last WATCHDOG=1, then RestartSec=) restarts the hung one.
new_primary() { group_ok "${others[@]}" && [ "$GTERM" -gt "$term0" ]; }
try_for 10 new_primary || fail "no new primary among ${others[*]}: $(group_says "${others[@]}")"
t1=$EPOCHREALTIME
! restarted "$u" "$n0" || fail "$old was restarted before another node was primary"
new=$PRIMARY term1=$GTERM
info "$new: primary in term $term1, seen $(((${t1/./} - ${t0/./}) / 1000)) ms after the SIGSTOP of $old"
cross orders3 2 5 5 MSFT 300 A
info "orders served by $new's term with $old hung"
wait_for 30 "$u restarted by the watchdog" restarted "$u" "$n0"
wait_for 5 "systemd's log of $u's watchdog timeout" \
	grep -q "$u.service: Failed with result 'watchdog'" "$T/console.log"
wait_for 20 "$u active again" is_state "$u" active
[ "$(prop "$u" MainPID)" != "$pid" ] || fail "$u has its old PID"
# Back as a standby of the primary, in its term (pre-vote: a restarted
# node does not depose a primary it can hear).
try_for 5 group_ok "${SEQS[@]}" || fail "$old restarted, the group is not one primary and standbys: $(group_says "${SEQS[@]}")"
[ "$(field "$old" state)" = standby ] || fail "$old restarted but not standby: $(group_says "${SEQS[@]}")"
if [ "$PRIMARY" != "$new" ] || [ "$GTERM" != "$term1" ]; then
	info "(the group moved on after the failover: $(group_says "${SEQS[@]}"))"
fi
cross orders4 3 7 7 AMZN 120 A B
info "SIGSTOP'd $old: watchdog timeout, restarted (NRestarts $(prop "$u" NRestarts)), standby of $PRIMARY in term $GTERM; orders served again"

# ---- systemctl stop: clean exits ------------------------------------------------
# (The target stops first and the nodes after it, Before= reversed: stop
# returns with the nodes' stop jobs running; wait for them.)
sdctl stop lockstep.target || fail "systemctl stop lockstep.target"
for u in "${UNITS[@]}"; do
	wait_for 30 "$u inactive after stop" is_state "$u" inactive
	[ "$(prop "$u" Result)" = success ] || fail "$u: Result=$(prop "$u" Result)"
	[ "$(prop "$u" ExecMainStatus)" = 0 ] || fail "$u exited $(prop "$u" ExecMainStatus)"
done
for n in "${SEQS[@]}"; do
	wait_for 5 "$n's log of its clean stop" grep -q "$n: stopped: term" "$T/console.log"
done
info "systemctl stop lockstep.target: every node exited 0"
echo "ok: lockstep's units under systemd $(inside systemctl --version | awk 'NR == 1 {print $2}')"
