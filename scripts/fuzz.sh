#!/usr/bin/env bash
# Runs every Go fuzz target of the module, one at a time, for FUZZTIME each
# (default 2m), and prints a table: target, package, time, execs, result.
# Exits non-zero if any target finds a failing input (go test writes it to
# testdata/fuzz/FuzzX/ beside the target: commit it as a regression entry
# once the decoder is fixed) or does not build.
#
#   FUZZTIME=30s ./scripts/fuzz.sh            every target, 30 s each
#   ./scripts/fuzz.sh FuzzStateDecode ...     only the targets named
#   FUZZLOG=dir ./scripts/fuzz.sh             keep each target's output in dir
#   FUZZMINIMIZE=10s ./scripts/fuzz.sh        bound minimizing each new input (default 2s)
#
# Targets run with -parallel 1: one fuzzing worker, so the run is gentle on
# a shared machine and its exec counts compare between runs.
set -uo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-2m}
# Go minimizes every input that finds new coverage, for up to a minute
# each by default, and counts no execs meanwhile: a target whose first
# finds are slow to run spent its whole budget minimizing (FuzzConnFrames:
# 7 execs in 30 s). A short bound leaves the budget to fuzzing.
minimize=${FUZZMINIMIZE:-2s}
logdir=${FUZZLOG:-$(mktemp -d -t rewind-fuzz.XXXXXX)}
mkdir -p "$logdir"

# "<package dir> <target>" for every func FuzzX(f *testing.F) in a test file.
targets=$(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . |
	sed -E 's#^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#\1 \2#' | sort)
if [ $# -gt 0 ]; then
	want=" $* "
	targets=$(echo "$targets" | while read -r dir name; do
		case "$want" in *" $name "*) echo "$dir $name" ;; esac
	done)
fi
if [ -z "$targets" ]; then
	echo "fuzz.sh: no fuzz targets found${*:+ matching $*}" >&2
	exit 2
fi

n=$(echo "$targets" | wc -l)
echo "== fuzzing $n targets, $fuzztime each (logs in $logdir)"
rows=()
failed=0
while read -r dir name; do
	log="$logdir/$name.log"
	start=$(date +%s)
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" -parallel 1 "./$dir" >"$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	# The last progress line: "fuzz: elapsed: 2m0s, execs: 123456 (1028/sec), ..."
	execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
	result=ok
	if [ $rc -ne 0 ]; then
		failed=1
		if grep -q 'Failing input written to' "$log"; then
			result="FINDING: $(grep -oE 'testdata/fuzz/[^ ]+' "$log" | tail -1)"
		else
			result="FAILED (exit $rc, see $log)"
		fi
	fi
	rows+=("$(printf '%-28s %-24s %6ss %12s  %s' "$name" "$dir" "$secs" "${execs:-0}" "$result")")
	echo "${rows[-1]}"
done <<<"$targets"

echo
echo "== summary (FUZZTIME=$fuzztime, -parallel 1)"
printf '%-28s %-24s %7s %12s  %s\n' target package time execs result
printf '%s\n' "${rows[@]}"
if [ $failed -ne 0 ]; then
	echo "fuzz.sh: at least one target failed; failing inputs are under testdata/fuzz/ (logs in $logdir)" >&2
	exit 1
fi
