package diskphase

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/source"
)

// splitReader reads one split for one map unit attempt.
type splitReader interface {
	// at is the position the next batch starts at.
	at() int64
	// next returns the next batch (at most max rows) and the position
	// range it covers; from > the previous to means records in between are
	// gone (a forgetful input).
	next(ctx context.Context, max int) (b arrow.RecordBatch, from, to int64, err error)
	close()
}

// freshReader is a re-readable input opened at the unit's start: a re-run
// reads exactly the same records again.
type freshReader struct {
	rd  source.Reader
	pos int64
}

func (r *freshReader) at() int64 { return r.pos }

func (r *freshReader) next(ctx context.Context, max int) (arrow.RecordBatch, int64, int64, error) {
	b, pos, err := r.rd.Next(ctx, max)
	if err != nil {
		return nil, 0, 0, err
	}
	from := pos.Offset - b.NumRows()
	r.pos = pos.Offset
	return b, from, pos.Offset, nil
}

func (r *freshReader) close() { _ = r.rd.Close() }

// sharedReader is the one reader of a forgetful split (a push feed): it is
// the input's connection, not a worker's, so it outlives attempts and
// coordinators. Every record it hands to an attempt is gone from the feed;
// if that attempt dies, a re-run finds them missing and the map unit
// reports them lost.
type sharedReader struct {
	mu  sync.Mutex
	rd  source.Reader
	pos int64
}

type borrowed struct{ sr *sharedReader }

func (b borrowed) at() int64 {
	b.sr.mu.Lock()
	defer b.sr.mu.Unlock()
	return b.sr.pos
}

func (b borrowed) next(ctx context.Context, max int) (arrow.RecordBatch, int64, int64, error) {
	b.sr.mu.Lock()
	defer b.sr.mu.Unlock()
	bt, pos, err := b.sr.rd.Next(ctx, max)
	if err != nil {
		return nil, 0, 0, err
	}
	from := pos.Offset - bt.NumRows()
	b.sr.pos = pos.Offset
	return bt, from, pos.Offset, nil
}

func (borrowed) close() {}

// splitSchedule is the schedule a paced input's reader of t's split
// keeps, fixed here as opening it here would (nil: no map task, or an
// unpaced input). A worker process told it follows it (followSchedule).
func (x *execution) splitSchedule(t *mapTask) *source.Schedule {
	if t == nil {
		return nil
	}
	sp := x.splits[t.Split]
	s, ok := source.FixSchedule(x.env.Sources[x.topo.inputs[sp.input].name], sp.partition, source.Position{Partition: sp.name, Offset: t.Start})
	if !ok {
		return nil
	}
	return &s
}

// followSchedule makes this worker process read t's split on the
// coordinator's schedule s.
func (x *execution) followSchedule(t *mapTask, s *source.Schedule) {
	if s == nil {
		return
	}
	sp := x.splits[t.Split]
	source.FollowSchedule(x.env.Sources[x.topo.inputs[sp.input].name], sp.partition, *s)
}

// openSplit returns the reader of split s for an attempt starting at start.
func (x *execution) openSplit(ctx context.Context, s int, start int64) (splitReader, error) {
	sp := x.splits[s]
	ic := x.topo.inputs[sp.input]
	src := x.env.Sources[ic.name]
	if src.Rereadable() {
		rd, err := src.Open(ctx, sp.partition, source.Position{Partition: sp.name, Offset: start}, x.env.Alloc)
		if err != nil {
			return nil, fmt.Errorf("opening input %s partition %s at %d: %w", ic.name, sp.name, start, err)
		}
		return &freshReader{rd: rd, pos: start}, nil
	}
	x.sharedMu.Lock()
	defer x.sharedMu.Unlock()
	sr := x.shared[s]
	if sr == nil {
		// Opened once, at the first start asked for; it lives until Run
		// ends, so it must not depend on an attempt's context.
		rd, err := src.Open(context.Background(), sp.partition, source.Position{Partition: sp.name, Offset: start}, x.env.Alloc)
		if err != nil {
			return nil, fmt.Errorf("opening input %s partition %s at %d: %w", ic.name, sp.name, start, err)
		}
		sr = &sharedReader{rd: rd, pos: start}
		if x.shared == nil {
			x.shared = map[int]*sharedReader{}
		}
		x.shared[s] = sr
	}
	return borrowed{sr}, nil
}

// closeShared closes the forgetful inputs' readers at the end of Run.
func (x *execution) closeShared() {
	x.sharedMu.Lock()
	defer x.sharedMu.Unlock()
	for s, sr := range x.shared {
		sr.mu.Lock()
		_ = sr.rd.Close()
		sr.mu.Unlock()
		delete(x.shared, s)
	}
}
