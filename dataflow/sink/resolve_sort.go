package sink

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"unsafe"
)

// DefaultResolveBudget is the memory resolution holds rows in before it
// spills a sorted run to disk, when ResolveOptions names none.
const DefaultResolveBudget = 32 << 20

// minRunRows keeps a tiny budget from spilling a file per row.
const minRunRows = 16

// mergeFanIn bounds the runs merged at once: each open run costs a read
// buffer, so more runs than this are first merged into longer ones.
var mergeFanIn = 128

// runBuffer is the read and write buffer of one spilled run.
const runBuffer = 64 << 10

// sorter orders rows by write key, then _version, then arrival, under a
// memory budget: it buffers rows, and when the buffer is full it sorts it
// and writes it out as a run, a temporary file of fixed-width rows; each
// then yields one stream by a k-way merge of the runs. Arrival (a sequence
// number appended to every row) makes the order total, so "the first row
// of a key and version" means the first one read, as ResolveRows has it.
type sorter struct {
	width   int   // values per row: the layout's columns, then the sequence number
	keyIdx  []int // write-key columns
	verIdx  int
	maxRows int         // rows the buffer holds before it spills
	buf     []int64     // rows, width values each
	order   []sortEntry // buffer rows in sorted order
	seq     int64
	tempDir string // where runs go; "" = the system's
	dir     string // this sorter's directory of runs, made at the first spill
	runs    []string
	// expected is a bound on the rows to come, from the files' sizes:
	// the buffer's first size.
	expected int64
	spills   int // runs spilled from the buffer
	made     int // run files made, for unique names
}

func newSorter(sh *shape, budget int64, tempDir string) *sorter {
	if budget <= 0 {
		budget = DefaultResolveBudget
	}
	width := len(sh.cols) + 1
	// A buffered row costs its values and its sort entry.
	maxRows := int(min(budget/int64(8*width+int(unsafe.Sizeof(sortEntry{}))), 1<<31-1))
	return &sorter{width: width, keyIdx: sh.keyIdx, verIdx: sh.verIdx, maxRows: max(maxRows, minRunRows), tempDir: tempDir}
}

// compare orders two rows of width values.
func (s *sorter) compare(a, b []int64) int {
	for _, i := range s.keyIdx {
		if a[i] != b[i] {
			return cmpInt(a[i], b[i])
		}
	}
	if a[s.verIdx] != b[s.verIdx] {
		return cmpInt(a[s.verIdx], b[s.verIdx])
	}
	return cmpInt(a[s.width-1], b[s.width-1])
}

// sortEntry is what sorting the buffer moves about: the first write-key
// column and the version beside the row's position, so most comparisons
// read neither the row nor memory far away. Rows enter the buffer in
// arrival order, so the position orders arrival too.
type sortEntry struct {
	key0, ver int64
	pos       int32
}

func (s *sorter) compareEntries(a, b sortEntry) int {
	if a.key0 != b.key0 {
		return cmpInt(a.key0, b.key0)
	}
	if len(s.keyIdx) > 1 {
		ra, rb := s.row(a.pos), s.row(b.pos)
		for _, i := range s.keyIdx[1:] {
			if ra[i] != rb[i] {
				return cmpInt(ra[i], rb[i])
			}
		}
	}
	if a.ver != b.ver {
		return cmpInt(a.ver, b.ver)
	}
	return cmpInt(int64(a.pos), int64(b.pos))
}

func (s *sorter) row(i int32) []int64 {
	o := int(i) * s.width
	return s.buf[o : o+s.width : o+s.width]
}

// add buffers rows given column-wise in layout order, spilling whenever
// the buffer fills.
func (s *sorter) add(cols [][]int64) error {
	n := len(cols[0])
	for r := 0; r < n; r++ {
		if len(s.buf) == s.maxRows*s.width {
			if err := s.spill(); err != nil {
				return err
			}
		}
		if len(s.buf)+s.width > cap(s.buf) {
			s.grow()
		}
		for _, c := range cols {
			s.buf = append(s.buf, c[r])
		}
		s.buf = append(s.buf, s.seq)
		s.seq++
	}
	return nil
}

// grow makes room in the buffer: at first for the rows expected (one
// allocation when the hint is right), then doubling, never past the limit:
// append's own growth would overshoot the budget, and every step leaves
// garbage the collector may not have returned when the next is made.
func (s *sorter) grow() {
	limit := s.maxRows * s.width
	want := 2 * cap(s.buf)
	if cap(s.buf) == 0 {
		want = int(min(max(s.expected, 1024), int64(s.maxRows))) * s.width
	}
	nb := make([]int64, len(s.buf), min(max(want, 1024*s.width), limit))
	copy(nb, s.buf)
	s.buf = nb
}

// sortBuffer orders the buffered rows in s.order.
func (s *sorter) sortBuffer() {
	n := len(s.buf) / s.width
	if cap(s.order) < n {
		s.order = make([]sortEntry, 0, n)
	}
	s.order = s.order[:0]
	k0 := s.keyIdx[0]
	for i := range n {
		r := s.row(int32(i))
		s.order = append(s.order, sortEntry{key0: r[k0], ver: r[s.verIdx], pos: int32(i)})
	}
	slices.SortFunc(s.order, s.compareEntries)
}

// spill writes the buffer, sorted, as a new run and empties it.
func (s *sorter) spill() error {
	s.sortBuffer()
	path, err := s.newRun()
	if err != nil {
		return err
	}
	err = s.writeRun(path, func(emit func([]int64) error) error {
		for _, e := range s.order {
			if err := emit(s.row(e.pos)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.buf = s.buf[:0]
	s.spills++
	return nil
}

func (s *sorter) newRun() (string, error) {
	if s.dir == "" {
		d, err := os.MkdirTemp(s.tempDir, "rewind-resolve-")
		if err != nil {
			return "", fmt.Errorf("spilling sorted rows: %w", err)
		}
		s.dir = d
	}
	s.made++
	return filepath.Join(s.dir, fmt.Sprintf("run-%06d", s.made)), nil
}

// writeRun writes the rows fill emits to a run file at path and adds it to
// the runs.
func (s *sorter) writeRun(path string, fill func(emit func([]int64) error) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("spilling sorted rows: %w", err)
	}
	w := bufio.NewWriterSize(f, runBuffer)
	b := make([]byte, 8*s.width)
	err = fill(func(row []int64) error {
		for j, v := range row {
			binary.LittleEndian.PutUint64(b[8*j:], uint64(v))
		}
		_, err := w.Write(b)
		return err
	})
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("spilling sorted rows to %s: %w", path, err)
	}
	s.runs = append(s.runs, path)
	return nil
}

// each calls emit with every row added, in order, and then removes the
// runs. The row is the sorter's and holds width values: the layout's
// columns, then the sequence number.
func (s *sorter) each(emit func([]int64) error) error {
	defer s.cleanup()
	s.sortBuffer()
	mem := &memCursor{s: s}
	if len(s.runs) == 0 {
		for mem.next() {
			if err := emit(mem.cur); err != nil {
				return err
			}
		}
		return nil
	}
	// Merge the oldest runs into longer ones until the rest, with the
	// buffer, fit one merge.
	for len(s.runs)+1 > mergeFanIn {
		k := min(mergeFanIn, len(s.runs))
		group := slices.Clone(s.runs[:k])
		s.runs = slices.Delete(s.runs, 0, k)
		path, err := s.newRun()
		if err != nil {
			return err
		}
		err = s.writeRun(path, func(emit func([]int64) error) error { return s.merge(group, nil, emit) })
		for _, p := range group {
			os.Remove(p)
		}
		if err != nil {
			return err
		}
	}
	return s.merge(s.runs, mem, emit)
}

func (s *sorter) cleanup() {
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.dir = ""
	}
	s.runs = nil
}

// merge emits the rows of the runs at paths, and of mem when not nil, in
// order.
func (s *sorter) merge(paths []string, mem *memCursor, emit func([]int64) error) error {
	h := &cursorHeap{s: s}
	for _, p := range paths {
		fc, err := openFileCursor(p, s.width)
		if err != nil {
			return err
		}
		defer fc.close()
		if fc.next() {
			h.items = append(h.items, fc)
		} else if fc.err != nil {
			return fc.err
		}
	}
	if mem != nil && mem.next() {
		h.items = append(h.items, mem)
	}
	heap.Init(h)
	for h.Len() > 0 {
		c := h.items[0]
		if err := emit(c.row()); err != nil {
			return err
		}
		if c.next() {
			heap.Fix(h, 0)
			continue
		}
		if err := c.failed(); err != nil {
			return err
		}
		heap.Pop(h)
	}
	return nil
}

// cursor is one sorted stream in a merge.
type cursor interface {
	next() bool // advances; false at the end or on an error
	row() []int64
	failed() error
}

// memCursor walks the sorted buffer.
type memCursor struct {
	s   *sorter
	i   int
	cur []int64
}

func (m *memCursor) next() bool {
	if m.i >= len(m.s.order) {
		return false
	}
	m.cur = m.s.row(m.s.order[m.i].pos)
	m.i++
	return true
}
func (m *memCursor) row() []int64  { return m.cur }
func (m *memCursor) failed() error { return nil }

// fileCursor reads a run file.
type fileCursor struct {
	f    *os.File
	r    *bufio.Reader
	b    []byte
	cur  []int64
	err  error
	path string
}

func openFileCursor(path string, width int) (*fileCursor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading spilled rows: %w", err)
	}
	return &fileCursor{f: f, r: bufio.NewReaderSize(f, runBuffer), b: make([]byte, 8*width), cur: make([]int64, width), path: path}, nil
}

func (c *fileCursor) next() bool {
	if _, err := io.ReadFull(c.r, c.b); err != nil {
		if !errors.Is(err, io.EOF) {
			c.err = fmt.Errorf("reading spilled rows from %s: %w", c.path, err)
		}
		return false
	}
	for j := range c.cur {
		c.cur[j] = int64(binary.LittleEndian.Uint64(c.b[8*j:]))
	}
	return true
}
func (c *fileCursor) row() []int64  { return c.cur }
func (c *fileCursor) failed() error { return c.err }
func (c *fileCursor) close()        { c.f.Close() }

// cursorHeap is a min-heap of cursors by their current row.
type cursorHeap struct {
	s     *sorter
	items []cursor
}

func (h *cursorHeap) Len() int           { return len(h.items) }
func (h *cursorHeap) Less(i, j int) bool { return h.s.compare(h.items[i].row(), h.items[j].row()) < 0 }
func (h *cursorHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *cursorHeap) Push(x any)         { h.items = append(h.items, x.(cursor)) }
func (h *cursorHeap) Pop() any {
	c := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return c
}
