#!/usr/bin/env bash
# Replays each fuzz target's saved corpus (tests/fuzz/corpus/NAME/) through it:
# a crash or sanitizer report fails the test. With --enable-fuzzers the
# targets are libFuzzer binaries and -runs=0 makes them replay only.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
fail=0
for corpus in "$top_srcdir"/tests/fuzz/corpus/*/; do
	name=$(basename "$corpus")
	bin="$top_builddir/tests/fuzz/fuzz_$name"
	if [ ! -x "$bin" ]; then
		echo "FAIL: $bin not built"
		fail=1
		continue
	fi
	n=$(find "$corpus" -type f | wc -l)
	if [ "$n" -eq 0 ]; then
		echo "FAIL: $corpus is empty"
		fail=1
		continue
	fi
	if "$bin" -runs=0 "$corpus" >/dev/null; then
		echo "ok: fuzz_$name replayed $n inputs"
	else
		echo "FAIL: fuzz_$name crashed on its corpus"
		fail=1
	fi
done
exit $fail
