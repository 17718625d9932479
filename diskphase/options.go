package diskphase

import (
	"fmt"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
)

// Options are the disk-phase settings the CLI's flags set; they arrive as
// run.Config.Options.
type Options struct {
	// JobRecords and JobInterval are the input range each finite job
	// covers, by records or by time (0 = not set; at most one is set).
	JobRecords  int64
	JobInterval time.Duration
	// LostPieceRecovery is --lost-piece-recovery. Both values behave the
	// same here (rebuild.go): the lost unit is re-run from its recorded
	// derivation.
	LostPieceRecovery string
	// ChunkRows is the rows a map unit buffers, over its partitions,
	// before it writes them as chunks (chunks.go); 0 means
	// DefaultChunkRows. No flag sets it: tests make it small so units
	// write many chunks.
	ChunkRows int
}

// Variant implements run.Options: disk-phase runs one way.
func (Options) Variant() string { return "" }

// WithVariant implements run.Options.
func (o Options) WithVariant(string) run.Options { return o }

// Cadence implements run.Options: the finite-job interval (0 when jobs
// are cut by records or not at all).
func (o Options) Cadence() time.Duration { return o.JobInterval }

// WithCadence implements run.Options: finite jobs of d of input each, by
// time (a records range would conflict, so it is cleared).
func (o Options) WithCadence(d time.Duration) run.Options {
	o.JobInterval, o.JobRecords = d, 0
	return o
}

// Fixed implements run.Options: a run's units are cut from its
// parallelism and finite-job range (the run plan), so a resume keeps them.
func (o Options) Fixed(cfg run.Config) map[string]string {
	return map[string]string{"--parallelism": fmt.Sprint(cfg.Parallelism),
		"--job-records": fmt.Sprint(o.JobRecords), "--job-interval": o.JobInterval.String()}
}
