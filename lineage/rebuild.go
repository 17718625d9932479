package lineage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// DefaultReadRows is how many rows a rebuild asks a source for at a time.
const DefaultReadRows = 64 * 1024

// Env is what Rebuild needs besides the plan.
type Env struct {
	Job     *job.Job
	Sources map[string]source.Source
	Alloc   memory.Allocator
	// Fetch returns the batches of an available piece the plan reads as a
	// parent (RebuildPlan.Fetch). Rebuild owns and releases what it returns.
	// It may be nil when the plan fetches nothing.
	Fetch func(ctx context.Context, id PieceID) ([]arrow.RecordBatch, error)
	// ReadRows caps the rows per source read; 0 means DefaultReadRows.
	ReadRows int
}

// Result holds the rebuilt pieces. The caller owns the batches and frees
// them with Release.
type Result struct {
	Pieces map[PieceID][]arrow.RecordBatch
	// Loss is what the rebuild cost; its Wall runs from the start of
	// Rebuild until every task ended, and PiecesRebuilt counts the pieces
	// needed and those on the way to them.
	Loss report.PieceLoss
}

// Release releases every rebuilt batch.
func (r *Result) Release() {
	for _, bs := range r.Pieces {
		releaseAll(bs)
	}
	r.Pieces = nil
}

// Rebuild executes plan: one goroutine per survivor, each running its
// tasks in plan order, a task starting once its parents are rebuilt. Since
// plan order puts parents first, the earliest unfinished task always has
// its parents done, so the workers cannot wait on each other in a cycle.
//
// A source-derived piece is re-read from its recorded range (the source
// must be re-readable: a forgetful one yields an error wrapping
// source.ErrNotRereadable) and pushed through fresh operator instances of
// its steps. Every rebuilt piece is returned, not only the needed ones:
// they were all lost, and the executor decides where to keep them.
func Rebuild(ctx context.Context, plan RebuildPlan, env Env) (*Result, error) {
	start := time.Now()
	if err := check(plan, env); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	r := &rebuild{env: env, done: map[PieceID]chan struct{}{}, out: map[PieceID][]arrow.RecordBatch{},
		fetched: map[PieceID]*fetchOnce{}}
	if r.env.ReadRows <= 0 {
		r.env.ReadRows = DefaultReadRows
	}
	for _, t := range plan.Tasks {
		r.done[t.Piece.ID] = make(chan struct{})
	}
	for _, id := range plan.Fetch {
		r.fetched[id] = &fetchOnce{}
	}
	queues := map[WorkerID][]Task{}
	for _, t := range plan.Tasks {
		queues[t.Worker] = append(queues[t.Worker], t)
	}
	var wg sync.WaitGroup
	for _, q := range queues {
		wg.Go(func() {
			for _, t := range q {
				if err := r.task(ctx, t); err != nil {
					cancel(fmt.Errorf("rebuilding piece %q on worker %d: %w", t.Piece.ID, t.Worker, err))
					return
				}
			}
		})
	}
	wg.Wait()
	r.releaseFetched()
	res := &Result{Pieces: r.out, Loss: report.PieceLoss{
		PiecesLost:    len(plan.Lost),
		PiecesRebuilt: int(r.rebuilt),
		RecordsReread: r.reread,
		Wall:          time.Since(start),
	}}
	if err := context.Cause(ctx); err != nil {
		res.Release()
		return nil, err
	}
	return res, nil
}

// check refuses a plan Rebuild must not run, before any work starts: a
// step that is not deterministic (recorded so, or declared so by its
// operator now), a step lineage may not run, or an input that cannot be
// re-read.
func check(plan RebuildPlan, env Env) error {
	if env.Job == nil || env.Alloc == nil {
		return errors.New("lineage: Rebuild needs a job and an allocator")
	}
	inPlan := map[PieceID]bool{}
	fetch := map[PieceID]bool{}
	for _, id := range plan.Fetch {
		fetch[id] = true
	}
	if len(plan.Fetch) > 0 && env.Fetch == nil {
		return fmt.Errorf("lineage: the plan reads %d available pieces and no Fetch was given", len(plan.Fetch))
	}
	for _, t := range plan.Tasks {
		d := t.Piece
		if s, bad := d.nondeterministic(); bad {
			return fmt.Errorf("lineage: piece %q (step %q): %w", d.ID, s.Stage, ErrNondeterministic)
		}
		for _, s := range d.Steps {
			st, err := stepStage(env.Job, s.Stage)
			if err != nil {
				return fmt.Errorf("lineage: piece %q: %w", d.ID, err)
			}
			det, err := stageDeterministic(st)
			if err != nil {
				return fmt.Errorf("lineage: piece %q: %w", d.ID, err)
			}
			if !det {
				return fmt.Errorf("lineage: piece %q (step %q, recorded as deterministic but its operator says otherwise): %w",
					d.ID, s.Stage, ErrNondeterministic)
			}
		}
		if in := d.Input; in != nil {
			src, ok := env.Sources[in.Input]
			if !ok {
				return fmt.Errorf("lineage: piece %q reads input %q, which was not given", d.ID, in.Input)
			}
			if !src.Rereadable() {
				return fmt.Errorf("lineage: piece %q cannot be rebuilt from input %s: %w", d.ID, src.Spec(), source.ErrNotRereadable)
			}
			names := src.Partitions()
			if in.Partition < 0 || in.Partition >= len(names) || names[in.Partition] != in.Start.Partition {
				return fmt.Errorf("lineage: piece %q names partition %d %q, which input %s does not have", d.ID, in.Partition, in.Start.Partition, in.Input)
			}
		}
		for _, p := range d.Parents {
			if !inPlan[p] && !fetch[p] {
				return fmt.Errorf("lineage: piece %q reads parent %q, which the plan neither rebuilds earlier nor fetches", d.ID, p)
			}
		}
		inPlan[d.ID] = true
	}
	return nil
}

type fetchOnce struct {
	once    sync.Once
	batches []arrow.RecordBatch
	err     error
}

// rebuild is the shared state of one Rebuild call.
type rebuild struct {
	env     Env
	done    map[PieceID]chan struct{} // closed when the piece is in out
	fetched map[PieceID]*fetchOnce    // fetched lazily, once, shared by readers

	mu      sync.Mutex
	out     map[PieceID][]arrow.RecordBatch
	rebuilt int64
	reread  int64
}

func (r *rebuild) task(ctx context.Context, t Task) error {
	d := t.Piece
	var batches []arrow.RecordBatch
	ch, err := newChain(r.env.Job, d.Steps, r.env.Alloc, func(b arrow.RecordBatch) error {
		// The emitter borrows b; keeping it past the call needs our own
		// reference (operator contract).
		b.Retain()
		batches = append(batches, b)
		return nil
	})
	if err != nil {
		return err
	}
	defer func() {
		_ = ch.Close()
	}()
	if d.Input != nil {
		n, err := r.read(ctx, *d.Input, ch)
		r.mu.Lock()
		r.reread += n
		r.mu.Unlock()
		if err != nil {
			releaseAll(batches)
			return err
		}
	} else {
		for _, p := range d.Parents {
			bs, err := r.parent(ctx, p)
			if err == nil {
				for _, b := range bs {
					if err = ch.Process(0, b); err != nil {
						break
					}
				}
			}
			if err != nil {
				releaseAll(batches)
				return err
			}
		}
	}
	if err := ch.Flush(); err != nil {
		releaseAll(batches)
		return err
	}
	r.mu.Lock()
	r.out[d.ID] = batches
	r.rebuilt++
	r.mu.Unlock()
	close(r.done[d.ID])
	return nil
}

// parent returns the batches of a parent piece, borrowed: they stay owned
// by the rebuild (or the fetch cache) until Rebuild ends.
func (r *rebuild) parent(ctx context.Context, id PieceID) ([]arrow.RecordBatch, error) {
	if ch, ok := r.done[id]; ok {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.out[id], nil
	}
	f := r.fetched[id]
	f.once.Do(func() {
		f.batches, f.err = r.env.Fetch(ctx, id)
		if f.err != nil {
			f.err = fmt.Errorf("fetching available piece %q: %w", id, f.err)
		}
	})
	return f.batches, f.err
}

func (r *rebuild) releaseFetched() {
	for _, f := range r.fetched {
		releaseAll(f.batches)
		f.batches = nil
	}
}

// read re-reads in [Start, End) and pushes it into ch. It returns the
// number of records read. Reads are capped at the end of the range, so the
// piece never takes a record that belonged to its successor.
func (r *rebuild) read(ctx context.Context, in InputRange, ch *operator.Chain) (int64, error) {
	src := r.env.Sources[in.Input]
	rd, err := src.Open(ctx, in.Partition, in.Start, r.env.Alloc)
	if err != nil {
		return 0, fmt.Errorf("opening %s partition %s at %d: %w", in.Input, in.Start.Partition, in.Start.Offset, err)
	}
	defer rd.Close()
	var n int64
	pos := in.Start.Offset
	for pos < in.End {
		want := int(min(int64(r.env.ReadRows), in.End-pos))
		b, p, err := rd.Next(ctx, want)
		if errors.Is(err, io.EOF) {
			return n, fmt.Errorf("input %s partition %s ended at %d, before the recorded end %d of the piece",
				in.Input, in.Start.Partition, pos, in.End)
		}
		if err != nil {
			return n, err
		}
		n += b.NumRows()
		pos = p.Offset
		err = ch.Process(0, b)
		b.Release()
		if err != nil {
			return n, err
		}
	}
	if pos != in.End {
		return n, fmt.Errorf("input %s partition %s: read to %d, past the recorded end %d", in.Input, in.Start.Partition, pos, in.End)
	}
	return n, nil
}

// newChain opens fresh instances of a piece's steps, each emitting into the
// next and the last into sink.
func newChain(j *job.Job, steps []Step, alloc memory.Allocator, sink func(arrow.RecordBatch) error) (*operator.Chain, error) {
	stages := make([]*job.Stage, len(steps))
	for i, s := range steps {
		stages[i] = j.Stage(s.Stage)
	}
	// Stateless steps ignore subtask and key groups; parallelism 1 owning
	// every group is valid for any piece.
	c, err := job.OpenChain(stages, operator.Context{Alloc: alloc, Subtask: 0, Parallelism: 1, KeyGroups: keygroup.All})
	if err != nil {
		return nil, err
	}
	c.Link(operator.EmitFunc(sink))
	return c, nil
}

func releaseAll(bs []arrow.RecordBatch) {
	for _, b := range bs {
		b.Release()
	}
}
