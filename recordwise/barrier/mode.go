package barrier

import (
	"fmt"
	"time"
)

// Mode says how a subtask with several input channels turns the barriers it
// receives into a snapshot. The zero Mode is Aligned().
type Mode struct {
	unaligned bool
	timeout   time.Duration // > 0: aligned, switching to unaligned after it
}

// Aligned blocks each channel that delivered barrier n until barrier n has
// arrived on every channel, then snapshots. The snapshot holds no in-flight
// records; the price is the alignment wait, which grows with channel skew
// and backpressure.
func Aligned() Mode { return Mode{} }

// Unaligned snapshots and forwards the barrier at the first barrier n, and
// persists as channel state every record that arrives afterwards on a
// channel that has not delivered barrier n yet. No channel ever waits; the
// price is checkpoint size.
func Unaligned() Mode { return Mode{unaligned: true} }

// AlignedWithTimeout starts each checkpoint aligned and switches it to
// unaligned when its alignment has not finished after d (counted from the
// first barrier, on a timer the I/O loop runs). A zero d gives Aligned();
// New rejects a negative one.
func AlignedWithTimeout(d time.Duration) Mode { return Mode{timeout: d} }

// IsUnaligned reports whether checkpoints start unaligned.
func (m Mode) IsUnaligned() bool { return m.unaligned }

// AlignmentTimeout returns the timeout of AlignedWithTimeout, else zero.
func (m Mode) AlignmentTimeout() time.Duration { return m.timeout }

// String implements fmt.Stringer: "aligned", "unaligned" or
// "aligned(timeout=5s)".
func (m Mode) String() string {
	switch {
	case m.unaligned:
		return "unaligned"
	case m.timeout > 0:
		return fmt.Sprintf("aligned(timeout=%v)", m.timeout)
	}
	return "aligned"
}

// ParseMode maps the CLI's --barriers value to a Mode: "aligned" or
// "unaligned". A positive alignmentTimeout turns "aligned" into
// AlignedWithTimeout; it is an error with "unaligned", which never waits.
func ParseMode(name string, alignmentTimeout time.Duration) (Mode, error) {
	if alignmentTimeout < 0 {
		return Mode{}, fmt.Errorf("barrier: negative alignment timeout %v", alignmentTimeout)
	}
	switch name {
	case "aligned":
		if alignmentTimeout > 0 {
			return AlignedWithTimeout(alignmentTimeout), nil
		}
		return Aligned(), nil
	case "unaligned":
		if alignmentTimeout > 0 {
			return Mode{}, fmt.Errorf("barrier: alignment timeout %v given with unaligned barriers", alignmentTimeout)
		}
		return Unaligned(), nil
	}
	return Mode{}, fmt.Errorf("barrier: unknown mode %q (want aligned or unaligned)", name)
}

func (m Mode) validate() error {
	if m.timeout < 0 || (m.unaligned && m.timeout != 0) {
		return fmt.Errorf("barrier: invalid mode %v", m)
	}
	return nil
}
