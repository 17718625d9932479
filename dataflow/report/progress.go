package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress writes a run's progress events, one JSON object per line, in the
// one schema every executor shares: the leading fields "executor", "event"
// and "t_ms" (milliseconds since the run started, when the event happened),
// then the event's own fields. Safe for concurrent use.
//
// The first failed write stops the stream: later events are dropped rather
// than written after a gap a reader could not see, and Err returns the
// failure. The run itself goes on, as progress is an observer.
type Progress struct {
	executor string
	start    time.Time

	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewProgress returns a writer of executor's events to w (nil: events are
// dropped), timed from start.
func NewProgress(w io.Writer, executor string, start time.Time) *Progress {
	return &Progress{executor: executor, start: start, w: w}
}

// Enabled says events go somewhere, so a caller can skip building costly
// fields for nobody.
func (p *Progress) Enabled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w != nil && p.err == nil
}

// Emit writes event as happening now. fields must encode as a JSON object
// (a map or a struct) without the leading fields' names.
func (p *Progress) Emit(event string, fields any) { p.EmitAt(event, time.Now(), fields) }

// EmitAt writes event as happening at at (a crash is billed at the moment it
// happened, not when it was noticed).
func (p *Progress) EmitAt(event string, at time.Time, fields any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil || p.err != nil {
		return
	}
	own, err := json.Marshal(fields)
	if err != nil {
		p.err = fmt.Errorf("progress event %s: %w", event, err)
		return
	}
	head, _ := json.Marshal(struct {
		Executor string  `json:"executor"`
		Event    string  `json:"event"`
		TMs      float64 `json:"t_ms"`
	}{p.executor, event, Millis(at.Sub(p.start))})
	var line bytes.Buffer
	line.Write(head[:len(head)-1]) // without its closing brace
	if own = bytes.TrimSpace(own); len(own) > 2 && own[0] == '{' {
		line.WriteByte(',')
		line.Write(own[1:])
	} else {
		line.WriteByte('}')
	}
	line.WriteByte('\n')
	_, p.err = p.w.Write(line.Bytes())
}

// Err is the failure that stopped the stream, or nil.
func (p *Progress) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Millis is d in milliseconds, to the microsecond: the unit of every
// duration a run reports.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// MillisPtr is Millis of *d, or nil (not measured) when d is nil.
func MillisPtr(d *time.Duration) *float64 {
	if d == nil {
		return nil
	}
	v := Millis(*d)
	return &v
}
