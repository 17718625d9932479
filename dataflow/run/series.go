package run

import (
	"context"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// recordedSource is a source whose readers tell the run's SeriesRecorder
// what they read, so every executor's re-reads and lag are measured the
// same way without an executor knowing.
type recordedSource struct {
	source.Source
	rec   *report.SeriesRecorder
	first int // the recorder's index of partition 0
}

// recordSources wraps env's sources to feed rec, and returns the undo.
// With own (Traits.OwnPositions) the readers only mark where each
// partition starts, and the executor reports the rest (Env.SeriesInput).
func recordSources(env *Env, rec *report.SeriesRecorder, own bool) (undo func()) {
	orig := env.Sources
	wrapped := make(map[string]source.Source, len(orig))
	var inputs map[string]report.SeriesInput
	first := make(map[string]int, len(orig))
	if own {
		inputs = make(map[string]report.SeriesInput, len(orig))
	}
	for name, src := range orig {
		var due func(time.Time) int64
		if p, ok := source.AsPaced(src); ok {
			due = p.Due
		}
		n := len(src.Partitions())
		if own {
			in := rec.InputOwn(n, due)
			inputs[name] = in
			wrapped[name] = &recordedSource{Source: src, rec: rec, first: in.First()}
			continue
		}
		first[name] = rec.Input(n, due)
		wrapped[name] = &recordedSource{Source: src, rec: rec, first: first[name]}
	}
	env.Sources, env.seriesInputs, env.seriesFirst = wrapped, inputs, first
	return func() { env.Sources, env.seriesInputs, env.seriesFirst = orig, nil, nil }
}

// SeriesInput is where an executor with Traits.OwnPositions reports what
// its batches take of input name and where they leave it. Outside
// Execute (no series), or for another executor, it records nothing.
func (e *Env) SeriesInput(name string) report.SeriesInput {
	return e.seriesInputs[name]
}

// Records forwards source.Sized (0: not known).
func (s *recordedSource) Records() int64 {
	if sz, ok := s.Source.(source.Sized); ok {
		return sz.Records()
	}
	return 0
}

// FixSchedule and FollowSchedule forward source.Scheduled.
func (s *recordedSource) FixSchedule(i int, pos source.Position) (source.Schedule, bool) {
	return source.FixSchedule(s.Source, i, pos)
}

func (s *recordedSource) FollowSchedule(i int, sc source.Schedule) {
	source.FollowSchedule(s.Source, i, sc)
}

func (s *recordedSource) Open(ctx context.Context, i int, pos source.Position, alloc memory.Allocator) (source.Reader, error) {
	r, err := s.Source.Open(ctx, i, pos, alloc)
	if err != nil {
		return nil, err
	}
	return &recordedReader{Reader: r, rec: s.rec.Open(s.first+i, pos.Offset)}, nil
}

type recordedReader struct {
	source.Reader
	rec *report.SeriesReader
}

func (r *recordedReader) Next(ctx context.Context, max int) (arrow.RecordBatch, source.Position, error) {
	b, pos, err := r.Reader.Next(ctx, max)
	if err == nil && b != nil {
		r.rec.Read(b.NumRows(), pos.Offset)
	}
	return b, pos, err
}

func (r *recordedReader) Close() error {
	r.rec.Close()
	return r.Reader.Close()
}

// billSeries measures the series-derived part of s's recoveries from what
// rec recorded up to end, and keeps the series in s when cfg asks for it.
func billSeries(cfg Config, rec *report.SeriesRecorder, s *report.Summary, end time.Time) {
	series := rec.Series(end)
	report.BillSeries(series, s.Recoveries)
	if cfg.Series {
		s.Series = series
	}
}
