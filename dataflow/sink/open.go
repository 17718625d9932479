package sink

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
)

// Open opens the output directory dir under mode, creating it when missing.
// Existing files are kept: whether a non-empty directory is acceptable is the
// caller's decision, and a resumed run needs what an earlier attempt left
// (the idempotent store, staged transactional epochs).
//
// Writers buffer rows in memory from alloc (nil: memory.DefaultAllocator),
// so what a dropped writer loses also shows as memory returned.
//
// What each mode keeps in dir (<ext> is parquet or csv):
//   - append: part-s<subtask>-a<attempt>-<seq>.<ext>, one per flush, or
//     with a roll policy (Roll) one per roll, and the writers' in-progress
//     files under _inprogress/ until their rows are visible and on record;
//   - idempotent: the store's manifest _idempotent.db, its runs
//     _idempotent-<n>.run, log _idempotent.log and lock, and after Finish its
//     export part-idempotent.<ext>;
//   - transactional: _staging/e<epoch>-s<subtask>-a<attempt>-p<part>.<ext>
//     until committed, then part-e<epoch>-s<subtask>-p<part>.<ext> (no attempt: a re-delivered epoch replaces).
//
// Files being written start with ".tmp-" and are never visible. Open
// removes those a killed process left (in dir and in its staging
// directory): one process writes an output directory at a time (the CLI
// holds its lock), so none of them is still being written.
func Open(dir string, mode Mode, format Format, layout Layout, alloc memory.Allocator) (Sink, error) {
	if _, err := ParseMode(string(mode)); err != nil {
		return nil, err
	}
	if _, err := ParseFormat(string(format)); err != nil {
		return nil, err
	}
	sh, err := newShape(layout)
	if err != nil {
		return nil, err
	}
	if alloc == nil {
		alloc = memory.DefaultAllocator
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory %s: %w", dir, err)
	}
	for _, d := range []string{dir, filepath.Join(dir, StagingDir)} {
		if err := removeTemps(d); err != nil {
			return nil, fmt.Errorf("clearing what a killed writer left: %w", err)
		}
	}
	b := &base{dir: dir, format: format, shape: sh, alloc: alloc, live: map[*writerBase]struct{}{}, done: make(chan struct{})}
	switch mode {
	case Append:
		return newAppendSink(b), nil
	case Idempotent:
		return openIdempotentSink(b)
	default:
		return openTransactionalSink(b)
	}
}

// shape is a validated Layout: column order, where the write key and the
// version live, and the Parquet schema the columns map to.
type shape struct {
	layout Layout
	cols   []string // output columns in Layout.Schema order
	keyIdx []int    // positions of the write-key columns in cols
	verIdx int      // position of VersionColumn in cols
	pq     *parquet.Schema
}

// newShape checks that layout describes rows this package can write: every
// column int64, unique non-empty names (no commas, which neither a Parquet
// struct tag nor a readable CSV header tolerates), a non-empty write key made
// of existing columns, and a _version column outside the key.
func newShape(layout Layout) (*shape, error) {
	if layout.Schema == nil {
		return nil, fmt.Errorf("output layout has no schema")
	}
	sh := &shape{layout: layout, cols: ColumnNames(layout.Schema)}
	for i, f := range layout.Schema.Fields() {
		switch {
		case f.Name == "":
			return nil, fmt.Errorf("output column %d has an empty name", i)
		case strings.ContainsAny(f.Name, ",\r\n\""):
			return nil, fmt.Errorf("output column %q: names must not contain commas, quotes or line breaks", f.Name)
		case f.Type.ID() != arrow.INT64:
			return nil, fmt.Errorf("output column %q is %s: every output column must be int64", f.Name, f.Type)
		case slices.Index(sh.cols, f.Name) != i:
			return nil, fmt.Errorf("output column %q appears more than once", f.Name)
		}
	}
	if sh.verIdx = slices.Index(sh.cols, VersionColumn); sh.verIdx < 0 {
		return nil, fmt.Errorf("output layout has no %s column (columns %v)", VersionColumn, sh.cols)
	}
	if len(layout.WriteKey) == 0 {
		return nil, fmt.Errorf("output layout has an empty write key")
	}
	for _, k := range layout.WriteKey {
		i := slices.Index(sh.cols, k)
		switch {
		case i < 0:
			return nil, fmt.Errorf("write-key column %q is not an output column (columns %v)", k, sh.cols)
		case i == sh.verIdx:
			return nil, fmt.Errorf("write key must not contain %s: the version decides between rows of one key", VersionColumn)
		case slices.Contains(sh.keyIdx, i):
			return nil, fmt.Errorf("write-key column %q is listed twice", k)
		}
		sh.keyIdx = append(sh.keyIdx, i)
	}
	sh.pq = parquetSchema(sh.cols)
	return sh, nil
}

// base is what the three sinks share: where they write, how, and the
// writers they handed out (so Close can drop buffers nobody dropped).
type base struct {
	dir    string
	format Format
	shape  *shape
	alloc  memory.Allocator

	mu     sync.Mutex
	closed bool
	live   map[*writerBase]struct{}

	// pace is the --sink-throttle limit (see Throttle); done is closed
	// with the sink, ending the writers' throttle waits.
	pace pacer
	done chan struct{}
}

// newWriterBase registers a writer for subtask/attempt, or fails when the
// sink is closed.
func (b *base) newWriterBase(subtask, attempt int) (*writerBase, error) {
	if subtask < 0 || attempt < 0 {
		return nil, fmt.Errorf("output %s: writer for subtask %d attempt %d: subtask and attempt must be >= 0", b.dir, subtask, attempt)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("output %s: sink is closed", b.dir)
	}
	w := &writerBase{sink: b, subtask: subtask, attempt: attempt, stop: make(chan struct{})}
	b.live[w] = struct{}{}
	return w, nil
}

// closeWriters drops the buffers of every writer still open and marks the
// sink closed. It reports whether the sink was already closed.
func (b *base) closeWriters() (already bool) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return true
	}
	b.closed = true
	ws := make([]*writerBase, 0, len(b.live))
	for w := range b.live {
		ws = append(ws, w)
	}
	b.live = nil
	b.mu.Unlock()
	for _, w := range ws {
		w.mu.Lock()
		w.closed = true
		w.dropLocked()
		w.mu.Unlock()
	}
	// Only now: a Write the throttle held back wakes on done and must
	// find its writer closed (woken before, it could buffer its rows and
	// return nil on a closed sink).
	close(b.done)
	return false
}

func (b *base) forget(w *writerBase) {
	b.mu.Lock()
	delete(b.live, w)
	b.mu.Unlock()
}

// writerBase holds what every Writer does the same way: input checking,
// buffering in Arrow builders (so the sink's memory shows in the caller's
// allocator, and a dropped writer visibly returns it), and the closed/failed
// state. A Writer serves one subtask, but Sink.Close may race with it, hence
// the mutex.
type writerBase struct {
	sink    *base
	subtask int
	attempt int

	// stop is closed when the writer is, ending a throttle wait.
	stop     chan struct{}
	stopOnce sync.Once

	mu     sync.Mutex
	closed bool
	err    error // a failed Flush poisons the writer: its rows are in an unknown state
	bufs   map[int64]*rowBuf
	// cached mapping from the last input schema to batch column indexes
	lastSchema *arrow.Schema
	colIdx     []int
}

// check returns why the writer cannot be used, or nil.
func (w *writerBase) check() error {
	if w.closed {
		return fmt.Errorf("output %s: writer of subtask %d attempt %d is closed", w.sink.dir, w.subtask, w.attempt)
	}
	return w.err
}

// fail records err as the writer's permanent failure and drops its buffers.
func (w *writerBase) fail(err error) error {
	w.err = err
	w.dropLocked()
	return err
}

// columnsOf maps the layout's columns to batch's, checking types and nulls.
// Extra or missing columns are errors: the layout is the output's schema,
// and silently dropping a column would hide a mistake upstream.
func (w *writerBase) columnsOf(batch arrow.RecordBatch) ([]*array.Int64, error) {
	sh := w.sink.shape
	s := batch.Schema()
	if s != w.lastSchema {
		if s.NumFields() != len(sh.cols) {
			return nil, fmt.Errorf("output %s: batch has columns %v, want %v", w.sink.dir, ColumnNames(s), sh.cols)
		}
		idx := make([]int, len(sh.cols))
		for i, c := range sh.cols {
			fi := s.FieldIndices(c)
			if len(fi) != 1 {
				return nil, fmt.Errorf("output %s: batch has columns %v, want %v", w.sink.dir, ColumnNames(s), sh.cols)
			}
			idx[i] = fi[0]
		}
		w.lastSchema, w.colIdx = s, idx
	}
	arrs := make([]*array.Int64, len(sh.cols))
	for i, c := range sh.cols {
		col := batch.Column(w.colIdx[i])
		a, ok := col.(*array.Int64)
		if !ok {
			return nil, fmt.Errorf("output %s: batch column %q is %s, want int64", w.sink.dir, c, col.DataType())
		}
		if a.NullN() > 0 {
			return nil, fmt.Errorf("output %s: batch column %q has %d nulls: output columns are required", w.sink.dir, c, a.NullN())
		}
		arrs[i] = a
	}
	return arrs, nil
}

// Write buffers rows of epoch; every mode writes the same way and differs
// only in what Flush does with the buffers.
func (w *writerBase) Write(epoch int64, batch arrow.RecordBatch) error {
	// Outside the lock: a Close must not wait for a throttled Write.
	w.throttle(batch.NumRows())
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buffer(epoch, batch)
}

// buffer appends batch to the buffer of epoch.
func (w *writerBase) buffer(epoch int64, batch arrow.RecordBatch) error {
	if err := w.check(); err != nil {
		return err
	}
	if epoch < 0 {
		return fmt.Errorf("output %s: write for epoch %d: epochs are >= 0", w.sink.dir, epoch)
	}
	arrs, err := w.columnsOf(batch)
	if err != nil {
		return err
	}
	if batch.NumRows() == 0 {
		return nil
	}
	if w.bufs == nil {
		w.bufs = map[int64]*rowBuf{}
	}
	rb := w.bufs[epoch]
	if rb == nil {
		rb = newRowBuf(w.sink.alloc, len(arrs))
		w.bufs[epoch] = rb
	}
	rb.append(arrs)
	return nil
}

// take removes and returns the buffers of epochs <= upTo in epoch order.
func (w *writerBase) take(upTo int64) (epochs []int64, bufs []*rowBuf) {
	for e := range w.bufs {
		if e <= upTo {
			epochs = append(epochs, e)
		}
	}
	slices.Sort(epochs)
	for _, e := range epochs {
		bufs = append(bufs, w.bufs[e])
		delete(w.bufs, e)
	}
	return epochs, bufs
}

// takeAll removes every buffered epoch and returns its rows as column
// chunks, for the sinks that flush regardless of epoch; release frees them.
// ok is false when nothing was buffered.
func (w *writerBase) takeAll() (chunks [][][]int64, release func(), ok bool) {
	_, bufs := w.take(math.MaxInt64)
	if len(bufs) == 0 {
		return nil, nil, false
	}
	chunks, release = finishAll(bufs)
	return chunks, release, true
}

// dropLocked releases every buffered row: what a killed worker loses.
func (w *writerBase) dropLocked() {
	for e, rb := range w.bufs {
		rb.release()
		delete(w.bufs, e)
	}
}

// close drops the writer and its unflushed rows.
func (w *writerBase) close() error {
	w.stopOnce.Do(func() { close(w.stop) })
	w.mu.Lock()
	w.closed = true
	w.dropLocked()
	w.mu.Unlock()
	w.sink.forget(w)
	return nil
}

// rowBuf buffers rows column-wise in Arrow builders.
type rowBuf struct {
	b []*array.Int64Builder
	n int
}

func newRowBuf(alloc memory.Allocator, ncols int) *rowBuf {
	rb := &rowBuf{b: make([]*array.Int64Builder, ncols)}
	for i := range rb.b {
		rb.b[i] = array.NewInt64Builder(alloc)
	}
	return rb
}

func (rb *rowBuf) append(arrs []*array.Int64) {
	for i, a := range arrs {
		rb.b[i].AppendValues(a.Int64Values(), nil)
	}
	rb.n += arrs[0].Len()
}

// finish turns the buffer into columns. The caller must call the returned
// release once done with the values; the buffer is spent.
func (rb *rowBuf) finish() (cols [][]int64, release func()) {
	arrs := make([]*array.Int64, len(rb.b))
	cols = make([][]int64, len(rb.b))
	for i, b := range rb.b {
		arrs[i] = b.NewInt64Array()
		cols[i] = arrs[i].Int64Values()
		b.Release()
	}
	rb.b = nil
	return cols, func() {
		for _, a := range arrs {
			a.Release()
		}
	}
}

func (rb *rowBuf) release() {
	for _, b := range rb.b {
		b.Release()
	}
	rb.b = nil
}
