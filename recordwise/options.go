package recordwise

import (
	"cmp"

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
