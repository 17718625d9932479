package report

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
	mu      sync.Mutex // guards h; events calls record under its own lock
	forward io.Writer
	events  *EventWriter
	h       ProgressHistory
}

// NewHistory returns a History forwarding to forward (nil: keep only).
func NewHistory(forward io.Writer) *History {
	h := &History{forward: forward, h: ProgressHistory{Counts: map[string]int{}, Recent: map[string][]json.RawMessage{}}}
	h.events = NewEventWriter(h.record)
	return h
}

// Write records every complete line of p and forwards p. A forwarding
// error is returned, but the events are kept regardless.
func (h *History) Write(p []byte) (int, error) {
	_, _ = h.events.Write(p)
	if h.forward != nil {
		return h.forward.Write(p)
	}
	return len(p), nil
}

func (h *History) record(event string, line []byte) {
	if !json.Valid(line) {
		return
	}
	if event == "" {
		event = "other"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.h.Counts[event]++
	recent := append(h.h.Recent[event], json.RawMessage(bytes.Clone(line)))
	if len(recent) > HistoryKeep {
		recent = append(recent[:0:0], recent[len(recent)-HistoryKeep:]...)
	}
	h.h.Recent[event] = recent
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

// EventWriter is an io.Writer of progress events, one JSON object per line,
// that calls fn with every complete line (without its '\n') and the line's
// "event" field ("" when the line has none, or is not a JSON object). The
// line is only valid during the call. Safe for concurrent use: fn runs
// under the writer's lock, one line at a time. History, Timeline and the
// CLI's progress bar read the executors' events through it.
type EventWriter struct {
	mu      sync.Mutex
	partial []byte
	fn      func(event string, line []byte)
}

// NewEventWriter returns an EventWriter calling fn.
func NewEventWriter(fn func(event string, line []byte)) *EventWriter {
	return &EventWriter{fn: fn}
}

func (w *EventWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := w.partial[:i]
		var head struct {
			Event string `json:"event"`
		}
		_ = json.Unmarshal(line, &head)
		w.fn(head.Event, line)
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) == 0 {
		w.partial = nil // do not pin a large buffer
	}
	return len(p), nil
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
	mu     sync.Mutex // guards events; lines calls add under its own lock
	start  time.Time
	lines  *EventWriter
	events []TimedEvent
}

// NewTimeline starts the clock.
func NewTimeline() *Timeline {
	t := &Timeline{start: time.Now()}
	t.lines = NewEventWriter(t.add)
	return t
}

func (t *Timeline) Write(p []byte) (int, error) { return t.lines.Write(p) }

func (t *Timeline) add(event string, line []byte) {
	if !json.Valid(line) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, TimedEvent{At: time.Since(t.start), Event: event, Raw: bytes.Clone(line)})
}

// Events returns what arrived so far, in arrival order.
func (t *Timeline) Events() []TimedEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TimedEvent(nil), t.events...)
}
