package microbatch

import (
	"testing"

	"github.com/rewind-engine/rewind/dataflow/runtest"
)

// A worker killed mid-run: the bill's re-read records, reprocess and
// catch-up are what run.Execute measures from the run over time, the same
// for every executor.
func TestSeriesBillOfAWorkerKill(t *testing.T) {
	runtest.SeriesBill(t, Executor{}, nil)
}
