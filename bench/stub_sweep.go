package bench

import "github.com/rewind-engine/rewind/bench/plots"

// sweepFigures stands in for the sweep helper's figures (sweep.go), so the
// writers build before it lands; the lead deletes this file at the merge.
func (r *Results) sweepFigures(dir string) ([]plots.File, error) { return nil, nil }
