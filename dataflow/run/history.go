package run

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
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
	partial []byte
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
	h.partial = append(h.partial, p...)
	for {
		i := bytes.IndexByte(h.partial, '\n')
		if i < 0 {
			break
		}
		h.record(h.partial[:i])
		h.partial = h.partial[i+1:]
	}
	if len(h.partial) == 0 {
		h.partial = nil // do not pin a large buffer
	}
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
