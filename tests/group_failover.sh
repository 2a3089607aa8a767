#!/usr/bin/env bash
# The sequencer group's failovers, through ops/drill on a 3-sequencer cluster
# under lockstep-bench load: the primary SIGKILLed twice (a new primary each
# time, the killed one back as a standby in the new term), the primary
# asked to hand over (lockstepctl step-down) twice (the standby named takes
# over in the next term; wrong requests are refused), the primary
# SIGSTOPped past the election timeout and resumed (deposed: a standby in the
# new term), every sequencer SIGTERMed at once and restarted (nothing
# committed lost), the power cut on a majority at once (power-cut
# --majority, under the power-cut model: nothing committed lost, no seq
# reused). After each: every order answered exactly once, every
# journal verifies, the journals agree up to the commit, the matchers agree.
# Fails on any VIOLATION line; prints the failover times measured (info:).
# Under ASan (several times slower): one kill and one step-down (the second
# of each takes the first's code paths again) and no power cut
# (tests/power_cut.sh's round 3 cuts a majority, the primary among them,
# under load there).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
use_tmpdir
trap 'exit 143' TERM INT
drills=("kill-primary --times 2" "step-down --times 2" hang-primary restart-all "power-cut --majority")
if asan_build; then
	drills=("kill-primary --times 1" "step-down --times 1" hang-primary restart-all)
	echo "info: ASan build: kill-primary and step-down once, no power-cut --majority (the plain build's;" \
		"tests/power_cut.sh cuts a majority under ASan)"
fi
for d in "${drills[@]}"; do
	# shellcheck disable=SC2086 # $d is the drill's name and options
	run_drill 120 $d --sequencers 3
	o=$T/${d%% *}.out
	! grep -q '^VIOLATION' "$o" || { cat "$o"; fail "drill $d reported a violation but exited 0"; }
	grep -E '^(ok|info):' "$o"
done
