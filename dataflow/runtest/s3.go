package runtest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

// RequireS3Env, set to 1, turns the skip of S3URL into a failure, so CI
// cannot pass without having run the S3 tests (as in dataflow/storage).
const RequireS3Env = "REWIND_REQUIRE_S3"

// S3URL returns a fresh storage location in bucket on the S3 service at
// $REWIND_S3_ENDPOINT (the Makefile's test target starts one), or skips the
// test when there is none.
func S3URL(t *testing.T, bucket string) string {
	t.Helper()
	if os.Getenv(storage.EnvS3Endpoint) == "" {
		if os.Getenv(RequireS3Env) == "1" {
			t.Fatalf("%s=1 but %s is not set", RequireS3Env, storage.EnvS3Endpoint)
		}
		t.Skipf("%s not set: no S3 service to test against", storage.EnvS3Endpoint)
	}
	return fmt.Sprintf("s3://%s/%s-%d", bucket, t.Name(), time.Now().UnixNano())
}
