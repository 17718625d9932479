package microbatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// errWorkerKilled is returned by work that stopped because its worker died.
var errWorkerKilled = errors.New("worker killed")

// partition is one partition of one job input, numbered globally in job
// input order.
type partition struct {
	global int
	input  string
	index  int // index within the input
	name   string
	src    source.Source
	owner  int // worker reading it
	// series is where a batch reports what it took and finished: the
	// read-ahead readers' positions are not progress (run.Traits.OwnPositions).
	series report.SeriesInput
}

// topology is the job cut into what a batch executes.
type topology struct {
	job    *job.Job
	stages []*job.Stage
	index  map[string]int // stage id -> position
	// stateful marks operator stages whose operator is Stateful.
	stateful []bool
	// hashOut lists, per stage, the key columns its Hash consumers route by.
	hashOut [][]string
	sinkIn  int // the stage feeding the sink
	parts   []*partition
}

func newTopology(j *job.Job, sources map[string]source.Source, workers int) (*topology, error) {
	t := &topology{job: j, stages: j.Stages, index: map[string]int{}, sinkIn: -1}
	t.stateful = make([]bool, len(j.Stages))
	t.hashOut = make([][]string, len(j.Stages))
	for i, s := range j.Stages {
		t.index[s.ID] = i
		switch s.Kind {
		case job.OperatorStage:
			op, err := s.New()
			if err != nil {
				return nil, fmt.Errorf("stage %s: %w", s.ID, err)
			}
			_, st := op.(operator.Stateful)
			if err := op.Close(); err != nil {
				return nil, err
			}
			t.stateful[i] = st
			if st && !s.Keyed {
				return nil, fmt.Errorf("stage %s is stateful but not keyed: the microbatch executor versions state per key group", s.ID)
			}
			if st && !validStageID(s.ID) {
				return nil, fmt.Errorf("stage id %q cannot name a state object (letters, digits, _ and - only)", s.ID)
			}
		case job.SinkStage:
			t.sinkIn = t.index[s.Inputs[0].From]
		}
		for _, e := range s.Inputs {
			if e.Exchange == job.Hash {
				from := t.index[e.From]
				found := false
				for _, k := range t.hashOut[from] {
					found = found || k == e.KeyColumn
				}
				if !found {
					t.hashOut[from] = append(t.hashOut[from], e.KeyColumn)
				}
			}
		}
	}
	for _, in := range j.Inputs {
		src, ok := sources[in]
		if !ok {
			return nil, fmt.Errorf("job %s needs input %q, which was not given", j.Name, in)
		}
		for i, name := range src.Partitions() {
			t.parts = append(t.parts, &partition{global: len(t.parts), input: in, index: i, name: name, src: src, owner: i % workers})
		}
	}
	return t, nil
}

// worker is one worker: the partitions it reads, one subtask of every
// operator stage, one sink subtask. Everything here is memory that dies
// with the worker.
type worker struct {
	id int
	// stop is closed when the worker is killed or torn down. It is the only
	// record of a death: work that stops because it is closed returns
	// errWorkerKilled, and dead reads the same channel, so the coordinator
	// can never see such a stop while the worker still looks alive. (A
	// separate flag set after the close let a batch that had lost part of
	// its input go on as if complete, and commit.)
	stop    chan struct{}
	once    sync.Once
	readers []*partReader
	rctx    context.Context // the readers' context
	cancel  context.CancelFunc
	started bool
	ops     []operator.Operator // by stage index; nil for non-operator stages
	opChain operator.Chain      // owns ops (unlinked: each stage emits into its batch's output)
	// base is, per stage, each key group's state as of the last state
	// version written or restored (nil = empty group): what the next
	// version's deltas are made against. It dies with the operators.
	base [][keygroup.Count]arrow.RecordBatch
	// usesChanges marks the stages whose versions come from the
	// operator's change hand-over; their base is pbase instead
	// (statechanges.go). takenSeq is each stage's last hand-over,
	// durableSeq the last one a durable version holds.
	usesChanges          []bool
	pbase                [][keygroup.Count]*patchGroup
	takenSeq, durableSeq []uint64
	scratch              patchScratch
	// sealing counts the snapshots of this worker a state version beside
	// the loop still compares with the base (writeVersion); the base is
	// not released before they are done.
	sealing sync.WaitGroup
	writer  sink.Writer
	// link, in the coordinator of worker processes, is the process this
	// worker stands for: its operators and readers live there, and only
	// its sink writer here.
	link *procLink
}

func (w *worker) kill() {
	w.once.Do(func() { close(w.stop) })
}

// dead reports whether the worker was killed or torn down.
func (w *worker) dead() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// queueOf returns the queue of global partition g if this worker owns it.
func (w *worker) queueOf(g int) *partQueue {
	for _, r := range w.readers {
		if r.part.global == g {
			return r.q
		}
	}
	return nil
}

// stopReaders stops a killed worker's readers and waits for them; its
// queues keep what they read, for teardown to close.
func (w *worker) stopReaders() {
	w.kill()
	if w.cancel != nil {
		w.cancel()
	}
	if !w.started {
		return
	}
	for _, r := range w.readers {
		<-r.done
	}
}

// teardown drops everything the worker holds. Nothing it held is consulted
// again.
func (w *worker) teardown() {
	w.kill()
	w.closeReaders()
	w.closeOps()
	if w.writer != nil {
		_ = w.writer.Close() // unflushed rows are lost, as a dead worker's are
		w.writer = nil
	}
}

// closeReaders stops the readers, waits for them and drops what they hold.
func (w *worker) closeReaders() {
	if w.cancel != nil {
		w.cancel()
	}
	for _, r := range w.readers {
		if w.started {
			<-r.done
		}
		_ = r.reader.Close()
		r.q.close()
	}
	w.readers = nil
	w.started = false
}

func (w *worker) closeOps() {
	_ = w.opChain.Close()
	clear(w.ops)
	w.releaseBase()
}

func (w *worker) releaseBase() {
	w.sealing.Wait()
	for si := range w.pbase {
		for kg, g := range w.pbase[si] {
			g.free()
			w.pbase[si][kg] = nil
		}
	}
	for si := range w.base {
		for kg, b := range w.base[si] {
			if b != nil {
				b.Release()
				w.base[si][kg] = nil
			}
		}
	}
}

// batchData is the in-memory intermediate data of one batch run.
type batchData struct {
	// out[stage][worker] are the batches a stage subtask emitted.
	out [][][]arrow.RecordBatch
	// hashed[stage][key column][producer][consumer] route a stage's output
	// to the subtasks owning the rows' key groups.
	hashed []map[string][][][]arrow.RecordBatch
	// handover per worker: hand-over time and rows of each input slice.
	handover [][]handoverRows
	rowsIn   []int64
	rowsOut  []int64
	late     []int64
}

type handoverRows struct {
	at   time.Time
	rows int64
}

func newBatchData(t *topology, workers int) *batchData {
	stages := len(t.stages)
	bd := &batchData{
		out:      make([][][]arrow.RecordBatch, stages),
		hashed:   make([]map[string][][][]arrow.RecordBatch, stages),
		handover: make([][]handoverRows, workers),
		rowsIn:   make([]int64, workers),
		rowsOut:  make([]int64, workers),
		late:     make([]int64, workers),
	}
	for i := range bd.out {
		bd.out[i] = make([][]arrow.RecordBatch, workers)
		bd.hashed[i] = map[string][][][]arrow.RecordBatch{}
		for _, col := range t.hashOut[i] {
			bd.hashed[i][col] = make([][][]arrow.RecordBatch, workers)
		}
	}
	return bd
}

func (bd *batchData) release() {
	for _, per := range bd.out {
		for _, bs := range per {
			releaseAll(bs)
		}
	}
	for _, m := range bd.hashed {
		for _, prod := range m {
			for _, cons := range prod {
				for _, bs := range cons {
					releaseAll(bs)
				}
			}
		}
	}
}

func releaseAll(bs []arrow.RecordBatch) {
	for _, b := range bs {
		if b != nil {
			b.Release()
		}
	}
}

// stageEnv is what a stage subtask needs besides its worker.
type stageEnv struct {
	ctx      context.Context
	topo     *topology
	plan     *offsetsEntry
	bd       *batchData
	workers  int
	alloc    memory.Allocator
	faults   *fault.Injector
	sinkMode sink.Mode
	// eventTime: deliver the batch's watermark to the operators.
	eventTime bool
	// midRunDone[w] is set once worker w passed the mid-run point in this
	// attempt.
	midRunDone []bool
	// onCrash carries out a worker crash decided by the injector.
	onCrash func(*fault.Crash)
	// askPoint, in a worker process, passes a crash point by asking the
	// coordinator (which SIGKILLs the process if a fault fires for it).
	askPoint func(name string, worker int) error
	// beforeSourceWait is testHooks.beforeSourceWait.
	beforeSourceWait func(worker int, stop <-chan struct{})
	// trace records the batches (traced runs); rerun says the batch runs
	// again, reread[w] that worker w's source read input read before.
	trace  *spacetime.Recorder
	rerun  bool
	reread []bool
	// marker is the batch's marker (trace --teach marker-in-microbatch
	// only; nil otherwise).
	marker *batchMarker
}

// runStage runs stage si on worker w for one batch.
func (w *worker) runStage(se *stageEnv, si int) error {
	st := se.topo.stages[si]
	bd := se.bd
	collect := operator.EmitFunc(func(b arrow.RecordBatch) error {
		b.Retain()
		bd.out[si][w.id] = append(bd.out[si][w.id], b)
		return nil
	})
	switch st.Kind {
	case job.SourceStage:
		if h := se.beforeSourceWait; h != nil {
			h(w.id, w.stop)
		}
		for _, r := range w.readers {
			if r.part.input != st.Input {
				continue
			}
			rg := se.plan.Ranges[r.part.global]
			if rg.End <= rg.Start {
				continue
			}
			if err := r.q.waitFor(se.ctx, rg.End, w.stop); err != nil {
				return err
			}
			r.part.series.Took(r.part.index, rg.Start, rg.End)
			if se.trace != nil && se.trace.Read(stageLane(se.topo, si, w.id), r.part.input+"/"+r.part.name, rg.Start, rg.End) {
				se.reread[w.id] = true
			}
			for _, s := range r.q.take(rg.Start, rg.End) {
				bd.out[si][w.id] = append(bd.out[si][w.id], s.b)
				bd.handover[w.id] = append(bd.handover[w.id], handoverRows{at: s.handover, rows: s.b.NumRows()})
				bd.rowsIn[w.id] += s.b.NumRows()
			}
		}
	case job.OperatorStage:
		op := w.ops[si]
		var lateBefore int64
		lc, hasLate := op.(operator.LateCounter)
		if hasLate {
			lateBefore = lc.LateRows()
		}
		for _, e := range st.Inputs {
			from := se.topo.index[e.From]
			var inputs [][]arrow.RecordBatch
			switch e.Exchange {
			case job.Forward:
				inputs = [][]arrow.RecordBatch{bd.out[from][w.id]}
			case job.Hash:
				for _, prod := range bd.hashed[from][e.KeyColumn] {
					inputs = append(inputs, prod[w.id])
				}
			case job.Broadcast:
				inputs = bd.out[from]
			}
			for prod, bs := range inputs {
				if se.trace != nil {
					var rows int64
					for _, b := range bs {
						if b != nil {
							rows += b.NumRows()
						}
					}
					if e.Exchange == job.Forward {
						prod = w.id
					}
					se.traceInput(from, prod, si, w.id, rows)
				}
				for _, b := range bs {
					if b == nil || b.NumRows() == 0 {
						continue
					}
					if w.dead() {
						return errWorkerKilled
					}
					if err := op.Process(e.Port, b, collect); err != nil {
						return fmt.Errorf("stage %s subtask %d: %w", st.ID, w.id, err)
					}
					if err := w.midRun(se); err != nil {
						return err
					}
				}
			}
		}
		if err := w.midRun(se); err != nil {
			return err
		}
		if err := op.Flush(collect); err != nil {
			return fmt.Errorf("stage %s subtask %d: flush: %w", st.ID, w.id, err)
		}
		if se.eventTime {
			if err := op.AdvanceWatermark(se.plan.Watermark, collect); err != nil {
				return fmt.Errorf("stage %s subtask %d: watermark: %w", st.ID, w.id, err)
			}
			if err := op.Flush(collect); err != nil {
				return fmt.Errorf("stage %s subtask %d: flush: %w", st.ID, w.id, err)
			}
		}
		if hasLate {
			bd.late[w.id] += lc.LateRows() - lateBefore
		}
		if err := se.marker.reached(se, w, si); err != nil {
			return err
		}
	case job.SinkStage:
		from := se.topo.index[st.Inputs[0].From]
		if se.trace != nil {
			var rows int64
			for _, b := range bd.out[from][w.id] {
				rows += b.NumRows()
			}
			se.traceInput(from, w.id, si, w.id, rows)
		}
		for _, b := range bd.out[from][w.id] {
			if b.NumRows() == 0 {
				continue
			}
			if err := w.writer.Write(se.plan.Batch, b); err != nil {
				return fmt.Errorf("sink subtask %d: %w", w.id, err)
			}
			bd.rowsOut[w.id] += b.NumRows()
		}
		return nil
	}
	// Route this subtask's output to the consumers of hash edges.
	for _, col := range se.topo.hashOut[si] {
		parts, err := splitByOwner(se.alloc, bd.out[si][w.id], col, se.workers)
		if err != nil {
			return fmt.Errorf("stage %s subtask %d: hash exchange on %s: %w", st.ID, w.id, col, err)
		}
		bd.hashed[si][col][w.id] = parts
	}
	return nil
}

// midRun passes the mid-run crash point once per worker and attempt.
func (w *worker) midRun(se *stageEnv) error {
	if se.midRunDone[w.id] {
		return nil
	}
	se.midRunDone[w.id] = true
	point := se.faults.Point
	if se.askPoint != nil {
		point = se.askPoint
	}
	if err := point(PointMidRun, w.id); err != nil {
		if c, ok := fault.AsCrash(err); ok {
			se.onCrash(c)
			if c.Worker != w.id {
				return nil // another worker's kill (after-point): this one goes on
			}
			return errWorkerKilled
		}
		return err
	}
	return nil
}

// splitByOwner partitions batches by the subtask owning each row's key
// group: out[dest] are the rows for subtask dest, in input order. Columns
// must be int64 (every row of the built-in jobs is).
func splitByOwner(alloc memory.Allocator, in []arrow.RecordBatch, keyCol string, parallelism int) ([][]arrow.RecordBatch, error) {
	out := make([][]arrow.RecordBatch, parallelism)
	if parallelism == 1 {
		for _, b := range in {
			b.Retain()
			out[0] = append(out[0], b)
		}
		return out, nil
	}
	var dest []int32
	counts := make([]int, parallelism)
	for _, b := range in {
		if b.NumRows() == 0 {
			continue
		}
		idx := b.Schema().FieldIndices(keyCol)
		if len(idx) != 1 {
			return nil, fmt.Errorf("no single column %q", keyCol)
		}
		keyArr, ok := b.Column(idx[0]).(*array.Int64)
		if !ok {
			return nil, fmt.Errorf("column %q is %s, want int64", keyCol, b.Column(idx[0]).DataType())
		}
		keys := keyArr.Int64Values()
		dest = dest[:0]
		clear(counts)
		for _, k := range keys {
			d := int32(keygroup.Owner(keygroup.Of(k), parallelism))
			dest = append(dest, d)
			counts[d]++
		}
		// One destination for the whole batch: forward it as is.
		single := -1
		for d, c := range counts {
			if c == len(keys) {
				single = d
			}
		}
		if single >= 0 {
			b.Retain()
			out[single] = append(out[single], b)
			continue
		}
		ncols := int(b.NumCols())
		srcCols := make([][]int64, ncols)
		for c := 0; c < ncols; c++ {
			a, ok := b.Column(c).(*array.Int64)
			if !ok || a.NullN() > 0 {
				return nil, fmt.Errorf("column %q is %s with %d nulls: the exchange moves non-null int64 columns only",
					b.ColumnName(c), b.Column(c).DataType(), b.Column(c).NullN())
			}
			srcCols[c] = a.Int64Values()
		}
		for d := 0; d < parallelism; d++ {
			n := counts[d]
			if n == 0 {
				continue
			}
			cols := make([]arrow.Array, ncols)
			for c := 0; c < ncols; c++ {
				arr, vals := operator.AllocInt64(alloc, n)
				src := srcCols[c]
				j := 0
				for i, dd := range dest {
					if int(dd) == d {
						vals[j] = src[i]
						j++
					}
				}
				cols[c] = arr
			}
			out[d] = append(out[d], operator.NewBatchOwning(b.Schema(), n, cols...))
		}
	}
	return out, nil
}
