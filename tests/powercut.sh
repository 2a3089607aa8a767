#!/usr/bin/env bash
# The power-cut simulator itself (tests/libpowercut.so, tests/powercut_restore):
# tests/powercut_writer makes one change of every kind in a directory under
# the shim, some synced and some not, and is killed with SIGKILL; the
# restored directory must hold exactly what strict POSIX makes durable:
# synced contents, no unsynced ones, and new names, renames, unlinks and
# mkdirs only where their directory was fsynced. Three runs: the directory
# never fsynced (nosync), fsynced at the end (dirsync), syncfs at the end
# (syncfs: the image is then all that was written).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_built tests/libpowercut.so tests/powercut_writer
use_tmpdir powercut

# image DIR: "d PATH" and "f PATH=CONTENTS" (\xNN escapes) for everything
# under DIR, sorted.
image() {
	python3 - "$1" <<'PY' | LC_ALL=C sort
import os, sys
root = sys.argv[1]
for dp, dns, fns in os.walk(root):
    rel = os.path.relpath(dp, root)
    for d in dns:
        print("d", os.path.normpath(os.path.join(rel, d)))
    for f in fns:
        with open(os.path.join(dp, f), "rb") as fh:
            text = fh.read().decode("latin-1").encode("unicode_escape").decode()
            print("f %s=%s" % (os.path.normpath(os.path.join(rel, f)), text))
PY
}

# fill DIR: the files powercut_writer expects (the snapshot's durable state).
fill() {
	mkdir -p "$1/sub"
	printf HEAD >"$1/log.txt"
	printf TARGET >"$1/target.txt"
	printf VICTIM >"$1/victim.txt"
	printf 0123456789 >"$1/trunc.txt"
	printf J0 >"$1/journal.bin"
	printf AAAA >"$1/dup.txt"
	: >"$1/vec.txt"
	printf S0 >"$1/stdio.txt"
	printf LONGCONTENT >"$1/otrunc.txt"
	: >"$1/dsync.txt"
	printf OLD >"$1/old.txt"
	printf KEEP >"$1/sub/keep.txt"
}

# cut MODE: powercut_writer MODE under the shim in $T/MODE, killed once
# ready, and the directory restored; LIVE is the image just before the cut.
cut() {
	local d=$T/$1 s=$T/$1.shadow ready=$T/$1.ready pid
	fill "$d"
	LD_PRELOAD=$POWERCUT_LIB POWERCUT_ROOT=$d POWERCUT_SHADOW=$s ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		"$top_builddir/tests/powercut_writer" "$d" "$1" "$ready" >"$T/$1.out" 2>&1 &
	pid=$!
	for _ in $(seq 1 100); do
		[ -s "$ready" ] || ! kill -0 "$pid" 2>/dev/null && break
		sleep 0.1
	done
	if ! [ -s "$ready" ]; then
		cat "$T/$1.out" >&2
		fail "$1: powercut_writer not ready"
	fi
	LIVE=$(image "$d")
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null || true
	info "$1: $(cat "$T/$1.out")"
	python3 "$POWERCUT_RESTORE" "$d" "$s" || fail "$1: powercut_restore"
	[ -z "$(ls -A "$s")" ] || fail "$1: the model in $s was not emptied"
}

# expect MODE: the restored $T/MODE is the image on stdin.
expect() {
	local want
	want=$(LC_ALL=C sort)
	if [ "$(image "$T/$1")" != "$want" ]; then
		diff <(echo "$want") <(image "$T/$1") >&2 || true
		fail "$1: the restored directory is not the durable image (diff: - expected, + restored)"
	fi
	info "$1: the durable image is as expected"
}

# Without a model, powercut_restore refuses (it must not restore "nothing").
mkdir "$T/none" "$T/none.shadow"
if python3 "$POWERCUT_RESTORE" "$T/none" "$T/none.shadow" 2>"$T/none.err"; then
	fail "powercut_restore restored without a model"
fi
grep -q 'no model' "$T/none.err" || fail "powercut_restore: $(cat "$T/none.err")"

cut nosync
grep -q '^f log.txt=HEADABC$' <<<"$LIVE" || fail "nosync: the writer did not write: $LIVE"
expect nosync <<'E'
d sub
f dsync.txt=DE
f dup.txt=XBAA
f journal.bin=J0J1J2
f log.txt=HEADAB
f old.txt=OLD
f otrunc.txt=s
f stdio.txt=T1
f sub/deep.txt=DEEP
f sub/keep.txt=KEEP
f target.txt=TARGET
f trunc.txt=01x\x00!
f vec.txt=v1V2
f victim.txt=VICTIM
E

cut dirsync
expect dirsync <<'E'
d newdir
d sub
f dsync.txt=DE
f dup.txt=XBAA
f empty.txt=
f journal.bin=J0J1J2
f log.txt=HEADAB
f new.txt=NEW
f newdir/f=F
f otrunc.txt=s
f reuse.txt=REUSE
f stdio.txt=T1
f sub/deep.txt=DEEP
f sub/keep.txt=KEEP
f target.txt=REPL
f trunc.txt=01x\x00!
f vec.txt=v1V2
E

cut syncfs
[ "$(image "$T/syncfs")" = "$LIVE" ] || {
	diff <(echo "$LIVE") <(image "$T/syncfs") >&2 || true
	fail "syncfs: the restored directory is not what was written"
}
expect syncfs <<'E'
d newdir
d sub
f dsync.txt=DE
f dup.txt=XBCA
f empty.txt=X
f journal.bin=J0J1J2J3
f log.txt=HEADABC
f new.txt=NEW
f newdir/f=F
f otrunc.txt=s
f reuse.txt=REUSE
f stdio.txt=T1S3
f sub/deep.txt=DEEP
f sub/keep.txt=KEEP
f target.txt=REPL
f trunc.txt=zz
f vec.txt=v1VW
E
echo "ok: nosync, dirsync and syncfs images restored as strict POSIX has them"
