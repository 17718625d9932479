#!/usr/bin/env bash
# shapes.sh: reproduce the three published shapes (docs/bench/shapes.md)
# and the catch-up prediction check from our own runs, with `rewind run`
# loops (one run at a time), then draw them with scripts/shapesplot
# through bench's sweep figures. Writes OUT/<shape>/*.png|svg and
# OUT/runs.jsonl, and prints the prediction table.
#
#   scripts/shapes.sh [OUT]          (default docs/bench/shapes)
#   SHAPES=interval,load,throttle,parallelism scripts/shapes.sh   (a subset:
#   the other shapes' runs in OUT/runs.jsonl are kept)
#   REPEAT=2 (default)
#
# It stands in for `rewind bench --sweep` until the harness runs sweeps.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/bench/shapes}
shapes=${SHAPES:-interval,load,throttle,parallelism}
repeat=${REPEAT:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/rewind" ./cmd/rewind
mkdir -p "$out"
runs="$out/runs.jsonl"
touch "$runs"
jq -c --arg s "$shapes" 'select(.Shape as $x | $s | split(",") | index($x) | not)' "$runs" >"$work/kept"
mv "$work/kept" "$runs"

# flags_of CONTESTANT: the executor flags of a contestant name.
flags_of() {
	case $1 in
	recordwise/aligned) echo --executor recordwise --barriers aligned ;;
	recordwise/unaligned) echo --executor recordwise --barriers unaligned ;;
	microbatch/rerun-batch) echo --executor microbatch --lost-piece-recovery rerun-batch ;;
	microbatch/lineage) echo --executor microbatch --lost-piece-recovery lineage ;;
	*) echo --executor "$1" ;;
	esac
}

# cadence_of CONTESTANT D: the flag giving a contestant D between
# recovery points, as bench does through run.Options.WithCadence.
cadence_of() {
	case $1 in
	recordwise*) echo --checkpoint-interval "$2" ;;
	microbatch*) echo --trigger "$2" ;;
	diskphase) echo --job-interval "$2" ;;
	esac
}

ms_of() { # a Go duration in ms (ms or s only)
	case $1 in
	*ms) echo "${1%ms}" ;;
	*s) awk -v s="${1%s}" 'BEGIN{print s*1000}' ;;
	esac
}

# one SHAPE KIND CONTESTANT POINT REPEAT RATE CADENCE_MS ARGS...: one run,
# its summary appended to runs.jsonl with what it was.
one() {
	local shape=$1 kind=$2 c=$3 point=$4 rep=$5 rate=$6 cms=$7
	shift 7
	echo "shapes: $shape $kind $c $point repeat $rep" >&2
	# A calibration reads an endless input for 2 s, as bench.Calibrate
	# does; the interrupted run still prints its summary.
	local pre=()
	if [[ $kind == calibrate ]]; then pre=(timeout -s INT 2); fi
	# shellcheck disable=SC2046
	{ "${pre[@]}" "$work/rewind" run $(flags_of "$c") --output "$work/out" --overwrite --storage "file://$work/st-$RANDOM" \
		--progress none --summary json "$@" 2>>"$work/stderr" || true; } | tail -1 |
		jq -c --arg shape "$shape" --arg kind "$kind" --arg c "$c" --arg p "$point" --argjson rep "$rep" \
			--argjson rate "$rate" --argjson cms "$cms" \
			'del(.history.recent[]?[]?.tasks) | {Shape: $shape, Kind: $kind, Contestant: $c, Point: $p, Repeat: $rep, Rate: $rate, CadenceMs: $cms, Summary: .}' >>"$runs"
}

# capacity SHAPE: records/s of the newest calibrate line of contestant C.
capacity() {
	jq -r --arg s "$1" --arg c "$2" 'select(.Shape == $s and .Kind == "calibrate" and .Contestant == $c) | .Summary.records_in / (.Summary.wall_ms / 1000) | floor' "$runs" | tail -1
}

modelled=(--detect-delay 500ms --acquire-delay 250ms)

# 1. Checkpoint cost against interval: steady p99 (crash-free run) and
# time to recovered (worker 0 killed 3.5 s in, plus half an interval per
# repeat), at 50,000 records/s for 6 s.
if [[ $shapes == *interval* ]]; then
	for iv in 100ms 300ms 1s 2s; do
		for c in recordwise/aligned microbatch; do
			in=gen:records=300000,keys=1000,partitions=2,rate=50000,seed=1
			# shellcheck disable=SC2046
			one interval steady "$c" "$iv" 0 50000 "$(ms_of $iv)" --input "$in" $(cadence_of "$c" "$iv")
			for ((r = 0; r < repeat; r++)); do
				at=$(awk -v iv="$(ms_of $iv)" -v r="$r" 'BEGIN{printf "%dms", 3500 + r*iv/2}')
				# shellcheck disable=SC2046
				one interval crash "$c" "$iv" "$r" 50000 "$(ms_of $iv)" --input "$in" $(cadence_of "$c" "$iv") \
					--fail "worker=0,at=$at" "${modelled[@]}"
			done
		done
	done
fi

# 2. Catch-up against headroom, and the prediction: each contestant at 50 %
# and 80 % of its own capacity (a 2 s unpaced, endless calibration run
# first), worker 0 killed at 3 s (+0.5 s per repeat), 12 s of input.
if [[ $shapes == *load* ]]; then
	for c in recordwise/aligned microbatch; do
		# shellcheck disable=SC2046
		one load calibrate "$c" "" 0 0 1000 --input gen:records=0,keys=1000,partitions=2,seed=1 $(cadence_of "$c" 1s)
	done
	for load in 50 80; do
		for ((r = 0; r < repeat; r++)); do
			for c in recordwise/aligned microbatch; do
				rate=$(($(capacity load "$c") * load / 100))
				in="gen:records=$((rate * 12)),keys=1000,partitions=2,rate=$rate,seed=1"
				# shellcheck disable=SC2046
				one load crash "$c" "$load%" "$r" "$rate" 1000 --input "$in" $(cadence_of "$c" 1s) \
					--fail "worker=0,at=$((3000 + r * 500))ms" "${modelled[@]}"
			done
		done
	done
fi

# 3. Aligned against unaligned checkpoint duration as the load nears
# capacity: keyed-count over a million keys (a row out per record, and a
# hash exchange for barriers to align in) into a sink throttled to 30,000
# rows/s; capacity calibrated through the throttle; 5 s at each load, no
# fault, a checkpoint every 500 ms.
if [[ $shapes == *throttle* ]]; then
	thr=(--sink-throttle 30000 --checkpoint-interval 500ms)
	for c in recordwise/aligned recordwise/unaligned; do
		one throttle calibrate "$c" "" 0 0 500 --input gen:records=0,keys=1000000,partitions=2,seed=1 "${thr[@]}"
	done
	for load in 50 80 95; do
		for c in recordwise/aligned recordwise/unaligned; do
			rate=$(($(capacity throttle "$c") * load / 100))
			in="gen:records=$((rate * 5)),keys=1000000,partitions=2,rate=$rate,seed=1"
			one throttle steady "$c" "$load%" 0 "$rate" 500 --input "$in" "${thr[@]}"
		done
	done
fi

# 4. Lineage rebuild time against survivors: microbatch on etl, a worker
# killed in the middle of the third batch, parallelism 2, 3, 5 (1, 2, 4
# survivors). The dead worker's share is the same at every width: 8
# partitions per worker, 16,384 records per partition per batch (like
# microbatch's BenchmarkLostPieceRecovery).
if [[ $shapes == *parallelism* ]]; then
	for par in 2 3 5; do
		parts=$((8 * par)) batch=$((8 * par * 16384))
		for ((r = 0; r < repeat; r++)); do
			for c in microbatch/lineage microbatch/rerun-batch; do
				one parallelism crash "$c" "$par" "$r" 0 300 --job etl --parallelism "$par" \
					--input "gen:records=$((4 * batch)),keys=1000,partitions=$parts,seed=7" \
					--trigger 300ms --max-batch-records "$batch" --fail "point=batch.mid-run,occurrence=$((2 * par + 1))"
			done
		done
	done
fi

go run ./scripts/shapesplot "$runs" "$out"
{
	echo "# machine: $(nproc) cores online, load average $(cut -d' ' -f1-3 /proc/loadavg), $(go version | cut -d' ' -f3)"
} >&2
