package diskphase

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// Named crash points.
const (
	pointMidRead      = "unit.mid-read"
	pointMidWrite     = "unit.mid-write"
	pointBeforeLedger = "unit.after-write-before-ledger"
	pointBeforeCommit = "job.before-commit"
	pointMidCommit    = "job.mid-commit"
	pointAfterCommit  = "job.after-commit"
	pointAfterPlan    = "coordinator.after-plan"
	pointBeforeRecord = "coordinator.before-ledger"
	pointAfterRecord  = "coordinator.after-ledger"
	pointPhase        = "coordinator.between-phases"
)

var failPoints = []string{
	pointMidRead, pointMidWrite, pointBeforeLedger,
	pointBeforeCommit, pointMidCommit, pointAfterCommit,
	pointAfterPlan, pointBeforeRecord, pointAfterRecord, pointPhase,
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fileBadError reports an input file that is missing, fails its checksum or
// does not decode: the unit that produced it must run again.
type fileBadError struct {
	producer UnitID
	file     string
	reason   string
}

func (e *fileBadError) Error() string {
	return fmt.Sprintf("materialised file %s (made by %s) %s", e.file, e.producer, e.reason)
}

// attempt is one attempt of one unit on one worker. Everything it builds
// lives in its own memory and dies with it; only what it Puts to durable
// storage and hands back to the coordinator survives.
type attempt struct {
	x       *execution
	unit    UnitID
	num     int
	worker  int
	rerun   bool
	rec     *recoveryRec
	kill    func(*fault.Crash) // asks the cluster to kill another worker
	midDone bool
}

func (a *attempt) point(name string) error {
	return a.x.env.Faults.Point(name, a.worker)
}

// read accounts n records read from the source. A worker kill that names
// this worker ends the attempt here; one naming another worker is handed to
// the cluster, which kills that worker.
func (a *attempt) read(n int64) error {
	a.x.met.recordsRead(a.unit, n, a.rerun, a.rec)
	err := a.x.env.Faults.Read(n)
	if c, ok := fault.AsCrash(err); ok && c.Worker != a.worker {
		a.kill(c)
		return nil
	}
	return err
}

// midWrite is the encoder's half-way hook: the first file an attempt
// writes can be cut short there. The bytes encoded so far live only in the
// attempt's memory; durable storage never sees a prefix.
func (a *attempt) midWrite() error {
	if a.midDone {
		return nil
	}
	a.midDone = true
	return a.point(pointMidWrite)
}

// putPipe overlaps encoding the next file with publishing earlier ones: at
// most maxInFlight Puts run at once. Encoding buffers come from a pool and
// go back to it once their Put is done, so a unit does not fault in fresh
// memory for every file.
type putPipe struct {
	ctx     context.Context
	store   storage.Store
	done    chan error
	pending int
	err     error
}

// maxInFlight Puts overlap; more would only queue on the disk.
const maxInFlight = 2

var encodeBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func newPutPipe(ctx context.Context, store storage.Store) *putPipe {
	return &putPipe{ctx: ctx, store: store, done: make(chan error, maxInFlight)}
}

// put publishes buf under name and returns buf to the pool afterwards.
func (p *putPipe) put(name string, buf *bytes.Buffer) error {
	for p.pending >= maxInFlight {
		p.collect()
	}
	if p.err != nil {
		encodeBufs.Put(buf)
		return p.err
	}
	p.pending++
	go func() {
		err := p.store.Put(p.ctx, name, buf.Bytes())
		buf.Reset()
		encodeBufs.Put(buf)
		p.done <- err
	}()
	return nil
}

func (p *putPipe) collect() {
	if err := <-p.done; err != nil && p.err == nil {
		p.err = err
	}
	p.pending--
}

// wait returns once every Put has finished, with the first error.
func (p *putPipe) wait() error {
	for p.pending > 0 {
		p.collect()
	}
	return p.err
}

// materialise encodes a table and hands it to the pipe.
func (a *attempt) materialise(pipe *putPipe, name string, names []string, cols [][]int64) (FileRef, error) {
	rows := 0
	if len(cols) > 0 {
		rows = len(cols[0])
	}
	if rows == 0 {
		return FileRef{}, nil
	}
	if err := pipe.ctx.Err(); err != nil {
		return FileRef{}, context.Cause(pipe.ctx)
	}
	buf := encodeBufs.Get().(*bytes.Buffer)
	buf.Reset()
	buf.Grow(rows*len(cols)*8 + 4096)
	err := encodeTable(buf, names, cols, encodeOptions{compression: a.x.compression, midWrite: a.midWrite})
	if err != nil {
		encodeBufs.Put(buf)
		return FileRef{}, err
	}
	data := buf.Bytes()
	ref := FileRef{Name: name, Rows: int64(rows), Bytes: int64(len(data)), CRC: crc32.Checksum(data, castagnoli)}
	if err := pipe.put(name, buf); err != nil {
		return FileRef{}, err
	}
	a.x.met.materialised(a.unit.Job, int(ref.Bytes))
	return ref, nil
}

// fetch reads a materialised file and checks it against its ledger entry.
func (x *execution) fetch(ctx context.Context, ref FileRef, producer UnitID) ([]byte, error) {
	data, err := x.store.Get(ctx, ref.Name)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return nil, &fileBadError{producer: producer, file: ref.Name, reason: "is missing"}
	case errors.Is(err, storage.ErrCorrupt):
		return nil, &fileBadError{producer: producer, file: ref.Name, reason: "fails its checksum"}
	case err != nil:
		return nil, err
	}
	if int64(len(data)) != ref.Bytes || crc32.Checksum(data, castagnoli) != ref.CRC {
		return nil, &fileBadError{producer: producer, file: ref.Name, reason: "does not match its ledger entry"}
	}
	return data, nil
}

// decodeFile decodes a fetched file, turning malformed bytes into a
// fileBadError.
func decodeFile(data []byte, ref FileRef, producer UnitID, schema *arrow.Schema, x *execution, fn func(arrow.RecordBatch) error) (int64, error) {
	n, err := decodeTable(data, schema, x.env.Alloc, fn)
	if errors.Is(err, errBadTable) {
		return n, &fileBadError{producer: producer, file: ref.Name, reason: "does not decode: " + err.Error()}
	}
	if err == nil && n != ref.Rows {
		return n, &fileBadError{producer: producer, file: ref.Name, reason: fmt.Sprintf("holds %d rows, its ledger entry says %d", n, ref.Rows)}
	}
	return n, err
}

// openChain builds and opens fresh operator instances for stages.
func openChain(stages []*job.Stage, octx operator.Context) ([]operator.Operator, error) {
	var ops []operator.Operator
	for _, st := range stages {
		op, err := st.New()
		if err != nil {
			closeChain(ops)
			return nil, fmt.Errorf("stage %s: %w", st.ID, err)
		}
		ops = append(ops, op)
		if err := op.Open(octx); err != nil {
			closeChain(ops)
			return nil, fmt.Errorf("stage %s: %w", st.ID, err)
		}
	}
	return ops, nil
}

func closeChain(ops []operator.Operator) {
	for _, op := range ops {
		_ = op.Close()
	}
}

// chainEmitter returns the emitter that pushes a batch through ops (each
// one's output into the next) and finally into last.
func chainEmitter(ops []operator.Operator, last operator.Emitter) operator.Emitter {
	e := last
	for i := len(ops) - 1; i >= 0; i-- {
		op, next := ops[i], e
		e = operator.EmitFunc(func(b arrow.RecordBatch) error { return op.Process(0, b, next) })
	}
	return e
}

// flushChain flushes ops in order, each into the rest of the chain.
func flushChain(ops []operator.Operator, last operator.Emitter) error {
	for i, op := range ops {
		if err := op.Flush(chainEmitter(ops[i+1:], last)); err != nil {
			return err
		}
	}
	return nil
}

// columns collects rows column-wise in plain Go slices, mapping batch
// columns by name.
type columns struct {
	names []string
	cols  [][]int64
	idx   []int
	last  *arrow.Schema
}

func newColumns(names []string) *columns {
	return &columns{names: names, cols: make([][]int64, len(names))}
}

func (c *columns) add(b arrow.RecordBatch) error {
	if s := b.Schema(); s != c.last {
		if s.NumFields() != len(c.names) {
			return fmt.Errorf("batch has columns %v, want %v", fieldNames(s), c.names)
		}
		c.idx = make([]int, len(c.names))
		for i, n := range c.names {
			fi := s.FieldIndices(n)
			if len(fi) != 1 {
				return fmt.Errorf("batch has columns %v, want %v", fieldNames(s), c.names)
			}
			c.idx[i] = fi[0]
		}
		c.last = s
	}
	for i, j := range c.idx {
		a, ok := b.Column(j).(*array.Int64)
		if !ok || a.NullN() > 0 {
			return fmt.Errorf("column %q is not a null-free int64 column", c.names[i])
		}
		c.cols[i] = append(c.cols[i], a.Int64Values()...)
	}
	return nil
}

// partitioner splits rows by the reduce partition that owns their key's
// key group.
type partitioner struct {
	parts       []*columns
	keyIdx      int
	parallelism int
	owner       []int32
}

func newPartitioner(names []string, nparts, keyIdx, parallelism int) *partitioner {
	p := &partitioner{keyIdx: keyIdx, parallelism: parallelism}
	for range nparts {
		p.parts = append(p.parts, newColumns(names))
	}
	return p
}

func (p *partitioner) add(b arrow.RecordBatch) error {
	if len(p.parts) == 1 {
		return p.parts[0].add(b)
	}
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	ncols := int(b.NumCols())
	if ncols != len(p.parts[0].names) {
		return fmt.Errorf("batch has %d columns, want %v", ncols, p.parts[0].names)
	}
	vals := make([][]int64, ncols)
	for c := range vals {
		a, ok := b.Column(c).(*array.Int64)
		if !ok || a.NullN() > 0 {
			return fmt.Errorf("column %q is not a null-free int64 column", b.ColumnName(c))
		}
		vals[c] = a.Int64Values()
	}
	p.owner = slices.Grow(p.owner[:0], n)[:n]
	for i, k := range vals[p.keyIdx] {
		p.owner[i] = int32(keygroup.Owner(keygroup.Of(k), p.parallelism))
	}
	for c, col := range vals {
		for i, v := range col {
			dst := p.parts[p.owner[i]]
			dst.cols[c] = append(dst.cols[c], v)
		}
	}
	return nil
}

// runMap runs a map unit: read the split's range, apply the stateless
// steps, partition by key, materialise one table per reduce partition.
func (a *attempt) runMap(ctx context.Context, t *mapTask) (*MapEntry, error) {
	x := a.x
	sp := x.splits[t.Split]
	ic := x.topo.inputs[sp.input]
	rd, err := x.openSplit(ctx, t.Split, t.Start)
	if err != nil {
		return nil, err
	}
	defer rd.close()
	ops, err := openChain(ic.chain, operator.Context{Alloc: x.env.Alloc, Subtask: t.Split, Parallelism: len(x.splits), KeyGroups: keygroup.All})
	if err != nil {
		return nil, err
	}
	defer closeChain(ops)
	nparts := x.plan.Parallelism
	if x.topo.mapOnly() {
		nparts = 1
	}
	pt := newPartitioner(ic.names, nparts, ic.keyIdx, x.plan.Parallelism)
	last := operator.EmitFunc(pt.add)
	head := chainEmitter(ops, last)

	ent := &MapEntry{Start: t.Start, End: t.Start, MaxTS: operator.NoWatermark}
	var deadline time.Time
	if x.plan.Mode == modeInterval && t.End < 0 {
		deadline = time.Now().Add(time.Duration(x.plan.IntervalMs) * time.Millisecond)
	}
	first := true
	expected := t.Start // where the next record of the range is
	for {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		at := rd.at()
		limit := x.readBatch
		if t.End >= 0 {
			if at >= t.End {
				// A forgetful input may already be past the range: what
				// lay between is gone.
				ent.Lost += t.End - min(expected, t.End)
				expected = t.End
				break
			}
			limit = int(min(int64(limit), t.End-at))
		}
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if !deadline.IsZero() {
			if !time.Now().Before(deadline) {
				break
			}
			rctx, cancel = context.WithDeadline(ctx, deadline)
		}
		b, from, to, err := rd.next(rctx, limit)
		cancel()
		if errors.Is(err, io.EOF) {
			ent.EOF = true
			break
		}
		if err != nil {
			if !deadline.IsZero() && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				break
			}
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, fmt.Errorf("reading input %s partition %s: %w", ic.name, sp.name, err)
		}
		if from > expected {
			ent.Lost += from - expected
		}
		expected = to
		n := b.NumRows()
		x.handover.stamp(t.Split, from, to, time.Now())
		ent.Records += n
		if n > 0 {
			for _, v := range b.Column(source.IdxTS).(*array.Int64).Int64Values() {
				ent.MaxTS = max(ent.MaxTS, v)
			}
		}
		if err := a.read(n); err != nil {
			b.Release()
			return nil, err
		}
		err = head.Emit(b)
		b.Release()
		if err != nil {
			return nil, err
		}
		if first {
			first = false
			if err := a.point(pointMidRead); err != nil {
				return nil, err
			}
		}
	}
	ent.End = expected
	if err := flushChain(ops, last); err != nil {
		return nil, err
	}
	ent.EOF = ent.EOF || t.KnownEOF

	pipe := newPutPipe(ctx, x.store)
	defer pipe.wait()
	for r, part := range pt.parts {
		name := x.names.mapFile(t.Job, t.Split, a.num, r)
		if x.topo.mapOnly() {
			name = x.names.mapOutFile(t.Job, t.Split, a.num)
		}
		ref, err := a.materialise(pipe, name, ic.names, part.cols)
		if err != nil {
			return nil, err
		}
		ent.Files = append(ent.Files, ref)
	}
	if err := pipe.wait(); err != nil {
		return nil, err
	}
	if err := a.point(pointBeforeLedger); err != nil {
		return nil, err
	}
	return ent, nil
}

// runReduce runs a reduce unit: restore the state carried from the
// previous finite job, read this partition's file of every map unit, run
// the keyed operator, and materialise its output and its state.
func (a *attempt) runReduce(ctx context.Context, t *reduceTask) (*ReduceEntry, error) {
	x := a.x
	topo := x.topo
	p := x.plan.Parallelism
	octx := operator.Context{Alloc: x.env.Alloc, Subtask: t.Partition, Parallelism: p, KeyGroups: keygroup.RangeFor(t.Partition, p)}
	ops, err := openChain(append([]*job.Stage{topo.reduce}, topo.post...), octx)
	if err != nil {
		return nil, err
	}
	defer closeChain(ops)
	op, post := ops[0], ops[1:]
	out := newColumns(topo.outNames)
	last := operator.EmitFunc(out.add)
	if t.StateOnly {
		// The output of a committed job was published already.
		last = func(arrow.RecordBatch) error { return nil }
	}
	emit := chainEmitter(post, last)

	ent := &ReduceEntry{}
	if t.StateIn != nil && t.StateIn.Name != "" {
		if err := a.restoreState(ctx, op.(operator.Stateful), *t.StateIn, t.StateProducer); err != nil {
			return nil, err
		}
	}
	if t.PrevWM != operator.NoWatermark {
		// Groups restored from state already stand here; the others learn
		// which rows are late.
		if err := op.AdvanceWatermark(t.PrevWM, emit); err != nil {
			return nil, err
		}
	}
	first := true
	for _, in := range t.Inputs {
		if in.File.Name == "" {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		data, err := x.fetch(ctx, in.File, in.Producer)
		if err != nil {
			return nil, err
		}
		schema := topo.inputs[x.splits[in.Split].input].schema
		n, err := decodeFile(data, in.File, in.Producer, schema, x, func(b arrow.RecordBatch) error {
			return op.Process(in.Port, b, emit)
		})
		if err != nil {
			return nil, err
		}
		ent.RowsIn += n
		if a.rerun {
			x.met.rowsReread(a.unit, n)
		}
		if first {
			first = false
			if err := a.point(pointMidRead); err != nil {
				return nil, err
			}
		}
	}
	if err := op.Flush(emit); err != nil {
		return nil, err
	}
	if err := op.AdvanceWatermark(t.WM, emit); err != nil {
		return nil, err
	}
	if err := op.Flush(emit); err != nil {
		return nil, err
	}
	if err := flushChain(post, last); err != nil {
		return nil, err
	}
	if lc, ok := op.(operator.LateCounter); ok {
		ent.LateRows = lc.LateRows()
	}

	pipe := newPutPipe(ctx, x.store)
	defer pipe.wait()
	if st, ok := op.(operator.Stateful); ok {
		names, cols, err := snapshotColumns(st)
		if err != nil {
			return nil, err
		}
		ref, err := a.materialise(pipe, x.names.stateFile(t.Job, t.Partition, a.num), names, cols)
		if err != nil {
			return nil, err
		}
		ent.State = &ref
	}
	if !t.StateOnly {
		ref, err := a.materialise(pipe, x.names.outFile(t.Job, t.Partition, a.num), topo.outNames, out.cols)
		if err != nil {
			return nil, err
		}
		ent.Out = ref
	}
	if err := pipe.wait(); err != nil {
		return nil, err
	}
	if err := a.point(pointBeforeLedger); err != nil {
		return nil, err
	}
	return ent, nil
}

// snapshotColumns flushes nothing (the caller has) and turns the
// operator's per-key-group state into one table: _kg, then the state
// columns, key groups ascending.
func snapshotColumns(st operator.Stateful) ([]string, [][]int64, error) {
	names, err := stateNames(st)
	if err != nil {
		return nil, nil, err
	}
	parts, err := st.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	defer operator.ReleaseStates(parts)
	slices.SortStableFunc(parts, func(a, b operator.KeyGroupState) int { return a.KeyGroup - b.KeyGroup })
	cols := make([][]int64, len(names))
	for _, p := range parts {
		n := int(p.Batch.NumRows())
		for i := 0; i < n; i++ {
			cols[0] = append(cols[0], int64(p.KeyGroup))
		}
		for c := 1; c < len(names); c++ {
			arr, ok := p.Batch.Column(c - 1).(*array.Int64)
			if !ok || arr.NullN() > 0 {
				return nil, nil, fmt.Errorf("state column %q is not a null-free int64 column", names[c])
			}
			cols[c] = append(cols[c], arr.Int64Values()...)
		}
	}
	return names, cols, nil
}

// restoreState loads a state table into a freshly opened operator.
func (a *attempt) restoreState(ctx context.Context, st operator.Stateful, ref FileRef, producer UnitID) error {
	x := a.x
	names, err := stateNames(st)
	if err != nil {
		return err
	}
	data, err := x.fetch(ctx, ref, producer)
	if err != nil {
		return err
	}
	cols := newColumns(names)
	if _, err := decodeFile(data, ref, producer, int64Schema(names), x, cols.add); err != nil {
		return err
	}
	kgs := cols.cols[0]
	stateSchema := st.StateSchema()
	var parts []operator.KeyGroupState
	defer func() { operator.ReleaseStates(parts) }()
	for lo := 0; lo < len(kgs); {
		hi := lo
		for hi < len(kgs) && kgs[hi] == kgs[lo] {
			hi++
		}
		kg := kgs[lo]
		if kg < 0 || kg >= keygroup.Count || (len(parts) > 0 && int64(parts[len(parts)-1].KeyGroup) >= kg) {
			return &fileBadError{producer: producer, file: ref.Name, reason: fmt.Sprintf("has key group %d out of order", kg)}
		}
		arrs := make([]arrow.Array, len(names)-1)
		for c := range arrs {
			arr, vals := operator.AllocInt64(x.env.Alloc, hi-lo)
			copy(vals, cols.cols[c+1][lo:hi])
			arrs[c] = arr
		}
		parts = append(parts, operator.KeyGroupState{KeyGroup: int(kg), Batch: operator.NewBatchOwning(stateSchema, hi-lo, arrs...)})
		lo = hi
	}
	return st.Restore(parts)
}
