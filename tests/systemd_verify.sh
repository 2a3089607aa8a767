#!/usr/bin/env bash
# `systemd-analyze verify` passes on every unit of ops/systemd/ (each
# template as an instance, lockstep.target), and prints nothing: any
# warning it gives (an unknown or misspelled key, a bad value, a missing
# binary or man page) fails the test. Also reports `systemd-analyze
# security` exposure of each service (not asserted beyond "not UNSAFE").
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

command -v systemd-analyze >/dev/null || skip "no systemd-analyze (apt-get install systemd)"
need_built lockstep-sequencer lockstep-gateway lockstep-matcher lockstepctl
! asan_build || skip "the sanitizer build: the unit files are the plain build's"

[ -e "$top_srcdir/ops/systemd/lockstep.target" ] || fail "no $top_srcdir/ops/systemd/ (not distributed?)"
use_tmpdir lockstep-sdverify
mkdir -p "$T/units" "$T/man/man8"

# The units as `make install` writes them, with the binaries of this build
# (bindir is the only substitution).
for f in "$top_srcdir"/ops/systemd/*.in; do
	sed "s|@bindir@|$top_builddir|g" "$f" >"$T/units/$(basename "$f" .in)"
done
cp "$top_srcdir/ops/systemd/lockstep.target" "$T/units/"
! grep -n '@[a-z_]*@' "$T"/units/* || fail "a unit keeps an unsubstituted @variable@"

# Documentation=man:... is checked against the man pages of this tree.
ln -s "$top_srcdir"/ops/man/*.8 "$T/man/man8/"
man_opt=()
command -v man >/dev/null || man_opt=(--man=no)

units=(lockstep-sequencer@seq-1.service lockstep-matcher@matcher-1.service
	lockstep-gateway@gw-1.service lockstep-recorder@rec-1.service lockstep.target)
cd "$T/units"
rc=0
MANPATH=$T/man systemd-analyze verify "${man_opt[@]}" "${units[@]}" >"$T/verify.out" 2>&1 || rc=$?
if [ $rc -ne 0 ] || [ -s "$T/verify.out" ]; then
	cat "$T/verify.out" >&2
	fail "systemd-analyze verify: exit $rc, $(wc -l <"$T/verify.out") line(s) of output"
fi
echo "ok: systemd-analyze verify: ${units[*]}: no warning"

# The sandbox: `systemd-analyze security` (offline: no manager needed).
for u in "${units[@]:0:4}"; do
	out=$(systemd-analyze security --offline=true --no-pager "$T/units/$u" 2>&1) ||
		{ echo "$out" >&2; fail "systemd-analyze security $u"; }
	line=$(grep 'Overall exposure level' <<<"$out") || fail "security $u: no overall level"
	echo "info: ${line#→ }"
	! grep -q 'UNSAFE\|EXPOSED' <<<"$line" || fail "$u is not sandboxed: $line"
done
