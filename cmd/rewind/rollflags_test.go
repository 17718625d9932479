package main

import (
	"errors"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestRollFlags: --roll-age and --roll-size read into the sink's policy;
// a negative age or a size that is not one is a usage error.
func TestRollFlags(t *testing.T) {
	good := []struct {
		age  time.Duration
		size string
		want sink.RollPolicy
	}{
		{sink.DefaultRollPolicy.Age, defaultRollSize(), sink.DefaultRollPolicy},
		{0, "0", sink.RollPolicy{}},
		{time.Second, "1KiB", sink.RollPolicy{Age: time.Second, Size: 1024}},
	}
	for _, c := range good {
		f := &runFlags{rollAge: c.age, rollSize: c.size}
		got, err := f.rollPolicy()
		if err != nil || got != c.want {
			t.Errorf("--roll-age %s --roll-size %s: %+v, %v; want %+v", c.age, c.size, got, err, c.want)
		}
	}
	for _, c := range []struct {
		age  time.Duration
		size string
	}{{-time.Second, "1MiB"}, {time.Second, "abc"}, {time.Second, "-5"}} {
		f := &runFlags{rollAge: c.age, rollSize: c.size}
		var u usageError
		if _, err := f.rollPolicy(); !errors.As(err, &u) {
			t.Errorf("--roll-age %s --roll-size %s: %v, want a usage error", c.age, c.size, err)
		}
	}
}
