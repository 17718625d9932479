package diskphase

// This file holds the chunks of the tables units write. A map unit writes
// each reduce partition's rows as a sequence of files, a chunk whenever
// its buffer fills, instead of one file per partition when it ends: its
// memory then follows the budget, not the length of its finite job (about
// 100 bytes a record when a whole bounded input was one job). A reduce
// unit writes its output the same way as its operator emits it, and its
// state table in chunks too (state.go), so beside its operator's state it
// holds a chunk, not its whole output and a copy of the state. Readers
// (reduce units, the commit, the next job's restore) take one chunk at a
// time. The ledger names a table's chunks in one FileRef: the first, then
// More.

// DefaultChunkRows is the rows a map unit buffers, over all its
// partitions, before it writes chunks: with keyed-count's four columns
// 4 MiB, plus up to three encoded chunks on their way to storage. The
// peak RSS follows the collector's slack over the map units' live heap,
// and a longer map phase meets a higher peak of it: at 512 K rows a 60 M
// record run peaked 28 % above a 6 M one (paced), at 256 K 33 % (means,
// unpaced), at 128 K 10 % (docs/memory.md).
const DefaultChunkRows = 128 << 10

// reduceChunkRows bounds the chunks of a reduce unit's output and state
// (fewer rows when the map units' budget is smaller, as in tests). A
// reduce unit holds its operator's state beside them, and its two
// buffers and the encoded files on their way to storage were about 40 MB
// at 256 K rows; at 64 K, 10 MB. keyed-count emits its output 64 K rows
// at a time, so each batch becomes a chunk.
const reduceChunkRows = 64 << 10

// minChunkRows is the fewest rows a partition's chunk has before the
// unit's last: every chunk costs a Put and a read, so a unit of many
// partitions buffers more rather than write tiny files.
const minChunkRows = 8192

// reduceBudget is the chunk budget of a reduce unit's output and state.
func (x *execution) reduceBudget() int { return min(x.chunkRows, reduceChunkRows) }

// chunkWriter writes the chunks of one attempt's partitions (a reduce
// unit's output and state are one partition each).
type chunkWriter struct {
	a     *attempt
	pipe  *putPipe
	cols  []string
	name  func(part, chunk int) string
	refs  [][]FileRef // per partition, the chunks written
	limit int         // buffered rows that make the unit write chunks
	least int         // fewest rows of a partition written before the end
}

// newChunkWriter writes chunks of partitions of budget rows in all (at
// least min(minChunkRows, budget/nparts) rows a partition).
func newChunkWriter(a *attempt, pipe *putPipe, cols []string, nparts, budget int, name func(part, chunk int) string) *chunkWriter {
	least := min(minChunkRows, max(1, budget/nparts))
	return &chunkWriter{a: a, pipe: pipe, cols: cols, name: name, refs: make([][]FileRef, nparts),
		limit: max(budget, least*nparts), least: least}
}

// maybeWrite writes a chunk of every partition holding at least least
// rows once pt holds limit rows. What stays buffered is under least rows a
// partition, so pt never holds much more than limit rows.
func (w *chunkWriter) maybeWrite(pt *partitioner) error {
	if pt.rows() < w.limit {
		return nil
	}
	return w.write(pt, w.least)
}

// write writes a chunk of every partition holding at least least rows
// and empties it; its memory is kept for the next rows. materialise has
// copied the rows into the encoded file by the time it returns.
func (w *chunkWriter) write(pt *partitioner, least int) error {
	for r, part := range pt.parts {
		n := part.rows()
		if n == 0 || n < least {
			continue
		}
		ref, err := w.a.materialise(w.pipe, w.name(r, len(w.refs[r])), w.cols, part.cols)
		if err != nil {
			return err
		}
		w.refs[r] = append(w.refs[r], ref)
		part.reset()
	}
	return nil
}

// finish writes what is left and returns one reference a partition.
func (w *chunkWriter) finish(pt *partitioner) ([]FileRef, error) {
	if err := w.write(pt, 1); err != nil {
		return nil, err
	}
	files := make([]FileRef, len(w.refs))
	for r, refs := range w.refs {
		if len(refs) > 0 {
			files[r] = refs[0]
			files[r].More = append([]FileRef(nil), refs[1:]...)
			if len(files[r].More) == 0 {
				files[r].More = nil
			}
		}
	}
	return files, nil
}

// chunks lists the objects f names, in order: f itself (without More),
// then More. An empty table has none.
func (f FileRef) chunks() []FileRef {
	if f.Name == "" && len(f.More) == 0 {
		return nil
	}
	first := f
	first.More = nil
	return append([]FileRef{first}, f.More...)
}

// totalRows is the rows of all of f's chunks.
func (f FileRef) totalRows() int64 {
	n := f.Rows
	for _, c := range f.More {
		n += c.Rows
	}
	return n
}

// names says whether file is one of f's chunks.
func (f FileRef) names(file string) bool {
	if file == "" {
		return false
	}
	for _, c := range f.chunks() {
		if c.Name == file {
			return true
		}
	}
	return false
}
