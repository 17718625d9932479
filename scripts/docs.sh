#!/usr/bin/env bash
# make docs: regenerate every figure the pages embed and check every command
# the docs quote. Both are TestDocsCommands (cmd/rewind/docs_commands_test.go,
# whose header states the convention): -docs.figures runs the commands that
# write under docs/figures/ from the repository root, so the committed figures
# come from exactly the commands the pages quote, and parses each SVG as XML;
# -docs.all also runs the blocks marked slow or script, which `make test`
# leaves out. Trace figures come from timed runs with fixed seeds: the story
# is the same each time, the exact positions move a little.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
set +e
go test -count=1 -timeout 60m -run '^TestDocsCommands$' ./cmd/rewind -v -args -docs.figures -docs.all 2>&1 |
	grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)'
status=${PIPESTATUS[0]}
set -e
echo "docs: $(( $(date +%s) - start )) s; figures in docs/figures/"
exit "$status"
