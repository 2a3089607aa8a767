#!/usr/bin/env bash
# ops/drill kill-matcher and corrupt-snapshot with small loads: a replica of
# three SIGKILLed under load (bench sees nothing missing or doubled), restarted
# from its snapshot, agrees; a damaged newest snapshot is skipped on restart.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
for d in kill-matcher corrupt-snapshot; do
	P=$(free_port_base)
	"$top_srcdir/ops/drill" "$d" --dir "$T/$d" --port "$P" --orders 800 >"$T/$d.out" 2>&1 ||
		{ cat "$T/$d.out"; fail "drill $d"; }
	grep '^ok:' "$T/$d.out"
done
