#!/usr/bin/env bash
# ops/drill kill-matcher and corrupt-snapshot with small loads: a replica of
# three SIGKILLed under load (bench sees nothing missing or doubled), restarted
# from its snapshot, agrees; a damaged newest snapshot is skipped on restart.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
use_tmpdir
for d in kill-matcher corrupt-snapshot; do
	run_drill 0 "$d" --orders 800
	grep '^ok:' "$T/$d.out"
done
