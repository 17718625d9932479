#!/usr/bin/env bash
# soak.sh: the reliability campaign, as `make soak` runs it. Builds the CLI,
# runs SOAK_SCHEDULES schedules per executor and barrier mode (default 1000)
# with the harness in soak/ (it starts a private S3 server per parallel slot
# for its storage outages), then scripts/fuzz.sh when it exists, and writes
# docs/reliability.md. Exits 1 if any schedule failed (a silent wrong result
# included), a bad input was not refused as it should be, or fuzzing failed.
#
#   SOAK_SCHEDULES=1000 SOAK_SEED=1 SOAK_PARALLEL=2 scripts/soak.sh
#   SOAK_FUZZ=0 scripts/soak.sh     the campaign and the stall tests only (run
#                                   scripts/fuzz.sh on its own, e.g. beside it)
set -euo pipefail
cd "$(dirname "$0")/.."

schedules=${SOAK_SCHEDULES:-1000}
seed=${SOAK_SEED:-$(( $(date +%s) % 1000000 + 1 ))}
parallel=${SOAK_PARALLEL:-2}
report=${SOAK_REPORT:-docs/reliability.md}

echo "== build"
mkdir -p bin
go build -o bin/rewind ./cmd/rewind
go build -o bin/soak ./soak/cmd/soak
./scripts/s3-server.sh install

echo "== campaign: seed $seed, $schedules schedules per mode, parallel $parallel"
status=0
./bin/soak -bin bin/rewind -s3 scripts/s3-server.sh -seed "$seed" -schedules "$schedules" \
	-parallel "$parallel" -report "$report" >/dev/null || status=1

echo "== storage stalls at the production deadlines (REWIND_SOAK=1: 10s calls, 25s freezes, the 60s limit)"
stalllog=$(mktemp)
sstart=$SECONDS
if REWIND_SOAK=1 go test -count=1 -timeout 30m -run 'TestStorageFrozen|TestStorageLatency|TestS3Frozen|TestS3Slow' \
	./dataflow/storage ./microbatch ./recordwise ./diskphase 2>&1 | tee "$stalllog"; then sres=passed; else sres=FAILED; status=1; fi
{
	printf '\n## Storage stalls at the production deadlines\n\n'
	printf '`REWIND_SOAK=1 go test -run '"'"'TestStorageFrozen|TestStorageLatency|TestS3Frozen|TestS3Slow'"'"' ./dataflow/storage ./microbatch ./recordwise ./diskphase` %s in %ds:\n\n```\n' "$sres" $((SECONDS - sstart))
	grep -E '^(ok|FAIL|---)' "$stalllog" || true
	printf '```\n'
} >>"$report"
rm -f "$stalllog"

if [[ ${SOAK_FUZZ:-1} == 0 ]]; then
	printf '\n## Fuzzing\n\nNot part of this run (SOAK_FUZZ=0): `scripts/fuzz.sh` runs every target on its own.\n' >>"$report"
elif [[ -x scripts/fuzz.sh ]]; then
	echo "== fuzz (scripts/fuzz.sh)"
	fuzzlog=$(mktemp)
	fstart=$SECONDS
	if ./scripts/fuzz.sh 2>&1 | tee "$fuzzlog"; then fres=passed; else fres=FAILED; status=1; fi
	{
		printf '\n## Fuzzing\n\n`scripts/fuzz.sh` %s in %ds; its last lines:\n\n```\n' "$fres" $((SECONDS - fstart))
		tail -n 30 "$fuzzlog"
		printf '```\n'
	} >>"$report"
	rm -f "$fuzzlog"
else
	printf '\n## Fuzzing\n\nscripts/fuzz.sh is not there: no fuzzing ran.\n' >>"$report"
fi

echo "== report: $report"
exit $status
