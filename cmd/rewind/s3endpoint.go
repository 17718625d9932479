package main

// This file holds the command line's checks of an S3 storage location's
// endpoint.

import (
	"cmp"
	"os"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// checkS3Endpoint refuses, as a usage error before anything runs, an S3
// storage location without an endpoint or with a malformed one (flag, or
// else $REWIND_S3_ENDPOINT); opening the store would report it only as a
// failed run.
func checkS3Endpoint(storageURL, flag string) error {
	if !strings.HasPrefix(strings.ToLower(storageURL), "s3://") {
		return nil
	}
	ep, from := flag, "--s3-endpoint"
	if ep == "" {
		ep, from = os.Getenv(storage.EnvS3Endpoint), "$"+storage.EnvS3Endpoint
	}
	if ep == "" {
		return usagef("invalid --storage %s: no S3 endpoint: give --s3-endpoint or set $%s, e.g. http://127.0.0.1:9000", storageURL, storage.EnvS3Endpoint)
	}
	if _, err := storage.ParseEndpoint(ep); err != nil {
		return usagef("invalid %s: %v", from, err)
	}
	return nil
}

// s3Endpoint is the S3 endpoint cfg's storage is reached at; empty for
// local storage.
func s3Endpoint(cfg run.Config) string {
	if !strings.HasPrefix(strings.ToLower(cfg.Storage), "s3://") {
		return ""
	}
	return cmp.Or(cfg.S3Endpoint, os.Getenv(storage.EnvS3Endpoint))
}
