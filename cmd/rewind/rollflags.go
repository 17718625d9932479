package main

import (
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/rewind-engine/rewind/dataflow/sink"
)

// defaultRollSize is --roll-size's default, as a user would write it.
func defaultRollSize() string {
	return strings.ReplaceAll(humanize.IBytes(uint64(sink.DefaultRollPolicy.Size)), " ", "")
}

// rollPolicy reads --roll-age and --roll-size (sink.RollPolicy): every
// executor's append sink rolls the same way, so the flags are shared.
func (f *runFlags) rollPolicy() (sink.RollPolicy, error) {
	if f.rollAge < 0 {
		return sink.RollPolicy{}, usagef("invalid --roll-age %s: must not be negative", f.rollAge)
	}
	p := sink.RollPolicy{Age: f.rollAge}
	if f.rollSize != "0" {
		b, err := parseSize("--roll-size", f.rollSize)
		if err != nil {
			return p, err
		}
		p.Size = b
	}
	return p, nil
}
