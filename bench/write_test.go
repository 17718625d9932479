package bench_test

import (
	"flag"
	"os"
	"testing"
)

// -bench.out keeps the fixture's files in a directory, to look at them;
// by default they go to a temporary one.
var outDir = flag.String("bench.out", "", "write the fixture's bench output here")

func outFor(t *testing.T) string {
	t.Helper()
	if *outDir != "" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			t.Fatal(err)
		}
		return *outDir
	}
	return t.TempDir()
}
