package run

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// HistoryKeep is how many of the newest events of each kind a summary
// keeps, as Flink's checkpoint history keeps the newest ten by default.
const HistoryKeep = 10

// ProgressHistory is the progress events of a run folded into its summary:
// how many of each kind (batch, checkpoint, job, crash, recovery, ...) and
// the newest HistoryKeep of each, verbatim.
type ProgressHistory struct {
	Counts map[string]int               `json:"counts"`
	Recent map[string][]json.RawMessage `json:"recent"`
}

// History is the io.Writer executors write progress events to (one JSON
// object per line, with an "event" field). It forwards every line to the
// user's --progress destination, if any, and keeps counts and the newest
// events for the summary. Safe for concurrent use.
type History struct {
	mu      sync.Mutex
	forward io.Writer
	lines   lineBuffer
	h       ProgressHistory
}

// NewHistory returns a History forwarding to forward (nil: keep only).
func NewHistory(forward io.Writer) *History {
	return &History{forward: forward, h: ProgressHistory{Counts: map[string]int{}, Recent: map[string][]json.RawMessage{}}}
}

// Write records every complete line of p and forwards p. A forwarding
// error is returned, but the events are kept regardless.
func (h *History) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines.feed(p, h.record)
	if h.forward != nil {
		return h.forward.Write(p)
	}
	return len(p), nil
}

func (h *History) record(line []byte) {
	var head struct {
		Event string `json:"event"`
	}
	if json.Unmarshal(line, &head) != nil || head.Event == "" {
		head.Event = "other"
	}
	if !json.Valid(line) {
		return
	}
	h.h.Counts[head.Event]++
	recent := append(h.h.Recent[head.Event], json.RawMessage(bytes.Clone(line)))
	if len(recent) > HistoryKeep {
		recent = append(recent[:0:0], recent[len(recent)-HistoryKeep:]...)
	}
	h.h.Recent[head.Event] = recent
}

// Fold puts what was kept into s.History (left null when no event came).
func (h *History) Fold(s *Summary) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.h.Counts) == 0 {
		return
	}
	cp := ProgressHistory{Counts: map[string]int{}, Recent: map[string][]json.RawMessage{}}
	for k, v := range h.h.Counts {
		cp.Counts[k] = v
	}
	for k, v := range h.h.Recent {
		cp.Recent[k] = append([]json.RawMessage(nil), v...)
	}
	s.History = &cp
}

// lineBuffer cuts a stream of writes into complete lines.
type lineBuffer struct{ partial []byte }

// feed appends p and calls fn with every complete line, without its '\n'.
func (b *lineBuffer) feed(p []byte, fn func(line []byte)) {
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		fn(b.partial[:i])
		b.partial = b.partial[i+1:]
	}
	if len(b.partial) == 0 {
		b.partial = nil // do not pin a large buffer
	}
}

// TimedEvent is one progress event and when it arrived.
type TimedEvent struct {
	At    time.Duration // since the Timeline was made
	Event string
	Raw   json.RawMessage
}

// Timeline keeps every progress event of a run with its arrival time: the
// raw material of rewind trace. Use it as Config.Progress. Safe for
// concurrent use.
type Timeline struct {
	mu     sync.Mutex
	start  time.Time
	lines  lineBuffer
	events []TimedEvent
}

// NewTimeline starts the clock.
func NewTimeline() *Timeline { return &Timeline{start: time.Now()} }

func (t *Timeline) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at := time.Since(t.start)
	t.lines.feed(p, func(line []byte) {
		var head struct {
			Event string `json:"event"`
		}
		if json.Unmarshal(line, &head) != nil {
			return
		}
		t.events = append(t.events, TimedEvent{At: at, Event: head.Event, Raw: bytes.Clone(line)})
	})
	return len(p), nil
}

// Events returns what arrived so far, in arrival order.
func (t *Timeline) Events() []TimedEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TimedEvent(nil), t.events...)
}
