package recordwise

import (
	"cmp"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
)

// The barrier modes, recordwise's variants (--barriers).
const (
	barrierAligned   = "aligned"
	barrierUnaligned = "unaligned"
)

// Variant implements run.Options: the barrier mode, aligned when unset.
func (o Options) Variant() string { return cmp.Or(o.Barriers, barrierAligned) }

// WithVariant implements run.Options: the options with barrier mode v.
func (o Options) WithVariant(v string) run.Options {
	o.Barriers = v
	return o
}

// Cadence implements run.Options: the checkpoint interval.
func (o Options) Cadence() time.Duration { return o.CheckpointInterval }

// WithCadence implements run.Options: the options checkpointing every d.
func (o Options) WithCadence(d time.Duration) run.Options {
	o.CheckpointInterval = d
	return o
}

// Fixed implements run.Options: a resumed run may change every setting
// (a parallelism the recovery point cannot be re-split to is refused
// when it is read).
func (Options) Fixed(run.Config) map[string]string { return nil }

// merged is the flag-set group of Options: o's own where set, else those
// of cfg.Options.
func (o Options) merged(cfg run.Config) Options {
	flags, _ := cfg.Options.(Options)
	return Options{
		Barriers:            cmp.Or(o.Barriers, flags.Barriers),
		AlignmentTimeout:    cmp.Or(o.AlignmentTimeout, flags.AlignmentTimeout),
		CheckpointInterval:  cmp.Or(o.CheckpointInterval, flags.CheckpointInterval),
		BufferTimeout:       cmp.Or(o.BufferTimeout, flags.BufferTimeout),
		CheckpointTimeout:   cmp.Or(o.CheckpointTimeout, flags.CheckpointTimeout),
		RetainedCheckpoints: cmp.Or(o.RetainedCheckpoints, flags.RetainedCheckpoints),
	}
}
