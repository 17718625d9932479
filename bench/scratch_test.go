package bench_test

import (
	"os"
	"testing"

	"github.com/rewind-engine/rewind/bench/benchtest"
)

func TestScratchPrint(t *testing.T) {
	r := benchtest.Results(benchtest.Options{Seed: 1, Problems: true})
	paths, err := r.WriteDir(outFor(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Log(paths)
	r.WriteTable(os.Stdout)
}
