# rewind: every target works on a fresh clone with only Go installed.
GO ?= go

.PHONY: test demo bench bench-state gobench build lint soak docs docs-check

## test: gofmt, vet, and the whole suite under -race, with a local S3 server
test:
	./scripts/test.sh

## soak: the reliability campaign (SOAK_SCHEDULES per executor and barrier mode, default 1000;
## SOAK_SEED replays one), then scripts/fuzz.sh if present; writes docs/reliability.md
soak:
	./scripts/soak.sh

## demo: run the main job on embedded defaults (generated input, local storage)
demo:
	$(GO) run ./cmd/rewind run --overwrite --output rewind-out

## bench: the standard suite, about 9 minutes: every executor three times on worker processes,
## interleaved, one crash each (results, plots and report.html in rewind-bench/), then COST: every
## executor unpaced at parallelism 1 and 2 against one thread, every job, inproc and on worker
## processes (rewind-bench/cost/), then the latency table of docs/benchmarks.md, inproc and on
## worker processes (about three minutes: eighteen rewind runs, rewind-bench/latency/)
bench:
	$(GO) run ./cmd/rewind bench --workers process --repeat 3 --out rewind-bench
	$(GO) run ./cmd/rewind bench cost --workers inproc,process --out rewind-bench/cost
	$(GO) run ./cmd/rewind bench latency --workers inproc,process --out rewind-bench/latency

## bench-state: the state table of docs/benchmarks.md (rewind-bench/state/): every executor on
## keyed-count and windowed-sum at 100 k, 1 M and 10 M keys, one crash each; long (the 10 M-key
## inputs are 171 M records each): BENCH_STATE_KEYS=100000,1000000 for a shorter run
BENCH_STATE_KEYS ?= 100000,1000000,10000000
bench-state:
	$(GO) build -o bin/rewind ./cmd/rewind
	./bin/rewind bench state --keys $(BENCH_STATE_KEYS) --out rewind-bench/state

## gobench: every go benchmark once (figures vary on a shared machine: compare ratios within one run)
gobench:
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1 ./...

## docs: regenerate every figure the pages embed (docs/figures/) with the commands they quote, then
## check every quoted command, the slow and script blocks included (scripts/docs.sh, a few minutes)
docs:
	./scripts/docs.sh

## docs-check: only check every quoted command, slow and script blocks included; rewrites nothing
docs-check:
	$(GO) test -count=1 -timeout 60m -run '^TestDocsCommands$$' ./cmd/rewind -args -docs.all

build:
	$(GO) build -o bin/rewind ./cmd/rewind

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
