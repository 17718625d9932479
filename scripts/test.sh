#!/usr/bin/env bash
# The whole test suite, as `make test` and CI run it: format and vet checks,
# then `go test -race ./...` with a real S3-compatible server (versitygw) on
# loopback for the storage tests. The server is installed if missing,
# started here and stopped on exit, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l . || true)
if [ -n "$unformatted" ]; then
	echo "these files need gofmt:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== S3 test server"
./scripts/s3-server.sh install
s3dir=$(mktemp -d -t rewind-s3.XXXXXX)
trap './scripts/s3-server.sh stop "$s3dir" >/dev/null 2>&1 || true; rm -rf "$s3dir"' EXIT
eval "$(./scripts/s3-server.sh start "$s3dir")"
# With this set, a storage test that cannot reach S3 fails instead of skipping.
export REWIND_REQUIRE_S3=1

echo "== go test -race"
go test -race -count=1 -timeout 20m ./... "$@"
