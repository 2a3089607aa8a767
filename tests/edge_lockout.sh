#!/usr/bin/env bash
# The client edge (issue 17), password guessing and login floods, with the
# real daemons and hashed passwords (ops/cluster's logins.conf):
# (a) 1,000 wrong passwords from 127.0.0.2 (for TRADR1, TRADR2, TRADR3 and
#     a name that is no login, in turn) are slowed (each failure's answer
#     held back, doubling) and locked out: after 5 failures
#     (login_failures_before_lockout) each username at that address, after
#     20 (login_address_failures_before_lockout) the address; the rest are
#     rejected without their password being verified. Meanwhile TRADR1
#     logs in from 127.0.0.3, and the log names both the username and the
#     address of the lockout.
# (b) 1,024 connections that never log in (16 from each of 64 addresses,
#     under max_sessions_per_address) do not keep a real login from being
#     answered within a second.
# A connection that sends only Debug packets is closed at the login
# deadline: tests/edge_login.sh.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built lockstepctl

ulimit -n 8192 2>/dev/null || skip "cannot raise the open files limit to 8192"
cluster_up --set gateway.login_backoff=20ms --set gateway.login_backoff_max=50ms \
	--set gateway.login_failures_before_lockout=5 \
	--set gateway.login_address_failures_before_lockout=20 --set gateway.login_lockout=60s \
	--set gateway.max_sessions=2048 --set gateway.login_timeout=10s
grep -q '^TRADR1 = \$argon2id\$' "$T/logins.conf" || fail "ops/cluster wrote no hashed passwords"
grep -q "plaintext password" "$T/gw-1.log" && fail "a plaintext warning for a hashed file"

python3 - "$P" <<'PY' || fail "the lockout's checks (above)"
import socket, struct, sys, threading, time
port = int(sys.argv[1])

def login(src, user, pw, timeout=10):
    """The answer to one Login Request from src: ('A', None), ('J', reason), or (None, None)."""
    s = socket.socket()
    s.settimeout(timeout)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        body = b"L" + user.ljust(6).encode() + pw.ljust(10).encode() + b" " * 10 + b"0".rjust(20)
        s.sendall(struct.pack(">H", len(body)) + body)
        hdr = b""
        while len(hdr) < 3:
            k = s.recv(3 - len(hdr))
            if not k:
                return None, None
            hdr += k
        t = chr(hdr[2])
        rest = s.recv(64)
        if t == "J":
            return "J", chr(rest[0])
        if t == "A":
            s.sendall(struct.pack(">H", 1) + b"O")  # Logout Request
        return t, None
    except OSError:
        return None, None
    finally:
        s.close()

# the attack: 16 at a time (max_sessions_per_address), 1,000 in all,
# bounded by a deadline
N, PAR = 1000, 16
USERS = ("TRADR1", "TRADR2", "TRADR3", "NOBODY")  # NOBODY: no such login
answers, lock = [], threading.Lock()
deadline = time.time() + 120
def attacker(k):
    for i in range(k, N, PAR):
        if time.time() > deadline:
            return
        a = login("127.0.0.2", USERS[i % len(USERS)], "guess%d" % i)
        with lock:
            answers.append(a)
real = []
def real_user():
    while len(answers) < N // 2 and time.time() < deadline:
        time.sleep(0.05)
    t0 = time.time()
    real.append((login("127.0.0.3", "TRADR1", "pw1"), time.time() - t0, len(answers)))
t0 = time.time()
threads = [threading.Thread(target=attacker, args=(k,)) for k in range(PAR)]
threads.append(threading.Thread(target=real_user))
for t in threads:
    t.start()
for t in threads:
    t.join()
took = time.time() - t0
rejected = sum(1 for a in answers if a == ("J", "A"))
assert len(answers) == N, "%d of %d attempts made within the deadline" % (len(answers), N)
assert rejected == N, "%d of %d wrong passwords rejected (A): %s" % (
    rejected, N, sorted(set(answers) - {("J", "A")}))
# slowed: every locked-out answer waits login_backoff_max (50 ms), 16 at
# a time: at least 3 s for 1,000; asserted with room
assert took >= 1.5, "1,000 wrong passwords answered in %.1f s: not slowed" % took
(ans, rt, at), = real
assert ans == ("A", None), "TRADR1 from 127.0.0.3 during the attack: %s" % (ans,)
# the right password from the attacking address is refused while locked
assert login("127.0.0.2", "TRADR1", "pw1") == ("J", "A"), "the locked address logged in"
print("ok: 1,000 wrong passwords from 127.0.0.2 rejected in %.1f s (%.1f ms each, 16 at a time);"
      " TRADR1 logged in from 127.0.0.3 in %.0f ms after %d of them" % (took, took * 1000 * PAR / N, rt * 1000, at))
PY
f=$(stat_get gw-1 login_failures) l=$(stat_get gw-1 login_lockouts)
r=$(stat_get gw-1 login_locked_out_rejects) v=$(stat_get gw-1 login_verifications)
vns=$(stat_get gw-1 login_verify_ns)
info "login_failures $f login_lockouts $l login_locked_out_rejects $r login_verifications $v" \
	"(mean $((vns / (v > 0 ? v : 1) / 1000000)) ms)"
# 20 failures lock the address; up to 16 more were being verified then
[ "${f:-0}" -ge 20 ] && [ "${f:-0}" -le 36 ] || fail "login_failures $f, want 20 to 36"
[ "${l:-0}" -ge 2 ] || fail "login_lockouts $l, want the pair and the address"
[ "${r:-0}" -ge 964 ] || fail "login_locked_out_rejects $r, want the rest of the 1,001"
[ "${v:-0}" -le 40 ] || fail "login_verifications $v: locked-out logins were verified"
grep -E "127\.0\.0\.2:[0-9]+: login TRADR1.*locked out" "$T/gw-1.log" >/dev/null ||
	fail "no lockout line naming TRADR1 and 127.0.0.2"
grep -E "127\.0\.0\.3:[0-9]+: TRADR1 logged in" "$T/gw-1.log" >/dev/null ||
	fail "no login of TRADR1 from 127.0.0.3 in the log"

# (b) the flood of connections that never log in
python3 - "$P" "$CTL" "$T/gw-1/gw-1.ctl" <<'PY' || fail "the flood's checks (above)"
import socket, struct, subprocess, sys, time
port, ctl, sock = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def sessions():
    out = subprocess.run([ctl, "--socket", sock, "stats"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        w = line.split()
        if len(w) == 2 and w[0] == "sessions":
            return int(w[1])
    return -1

idle = []
for i in range(1024):
    s = socket.socket()
    s.bind(("127.0.0.%d" % (10 + i // 16), 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    idle.append(s)
end = time.time() + 20
while sessions() < 1024 and time.time() < end:
    time.sleep(0.1)
n = sessions()
assert n >= 1024, "the gateway holds %d of the 1,024 idle connections" % n
t0 = time.time()
s = socket.create_connection(("127.0.0.1", port), timeout=5)
body = b"L" + b"TRADR2" + b"pw2".ljust(10) + b" " * 10 + b"0".rjust(20)
s.sendall(struct.pack(">H", len(body)) + body)
hdr = s.recv(3)
took = time.time() - t0
assert len(hdr) == 3 and hdr[2:3] == b"A", "TRADR2's login: %r" % hdr
# the figure is the point (printed below: about 0.1 s here); the bound is
# a watchdog with room for a loaded machine, not a timing to meet
assert took < 5.0, "TRADR2's login took %.2f s beside 1,024 idle connections" % took
s.close()
for c in idle:
    c.close()
print("ok: TRADR2 logged in in %.0f ms beside %d connections that never log in" % (took * 1000, n))
PY
echo "ok: slowed and locked out by address, the real user logs in elsewhere; floods do not block a login"
