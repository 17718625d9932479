package state

// Deltas of key-group state.
//
// A key group's state is a batch of rows (entries). Between two versions
// most entries of a large state stay as they were, so a version can store,
// per key group, only the rows that are new or changed and an edit script
// that rebuilds the whole batch from the previous version's batch (the
// base): skip n base rows, copy n base rows, take n stored rows. Any script
// that rebuilds the batch is correct; Diff looks for a short one.
//
// Edits are made only for states whose columns are all int64 without
// nulls (every operator's state today); Diff reports other states as not
// diffable and the caller stores them whole.
//
// One column may be "uniform": it holds one value for the whole batch (the
// operators' per-key-group watermark), is ignored when rows are compared,
// and after an edit takes the value of the stored rows (when there are
// any) so the rebuilt batch stays uniform.
//
// A delta object (EncodeDelta) is the blob format of EncodeAll wrapped
// with the edits:
//
//	magic     4 bytes  "RWSD"
//	version   uint16   DeltaFormatVersion
//	flags     uint16   bit 0: the edits' resultCRC are RowsChecksum, not
//	          ValuesCRC; the other bits 0, reserved
//	nEdits    uint32
//	edits     nEdits x (keyGroup uint16, baseRows uint32, resultRows uint32,
//	          resultCRC uint32, scriptLen uint32, script scriptLen bytes)
//	blobLen   uint64
//	blob      an EncodeAll blob: per key group the rows stored for it
//	crc       uint32   CRC32C of every byte before it
//
// A key group of the blob without an edit is stored whole. Every edit
// carries the row count of the base it applies to and the checksum of the
// values it must produce (ValuesCRC), so an edit applied to the wrong base,
// or a script that does not rebuild the batch it was made from, fails
// instead of loading a wrong state.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
)

// DeltaFormatVersion is the version written into every delta object.
const DeltaFormatVersion = 1

var deltaMagic = [4]byte{'R', 'W', 'S', 'D'}

const (
	deltaHeaderLen = 4 + 2 + 2 + 4
	editHeaderLen  = 2 + 4 + 4 + 4 + 4
	// diffLookahead is how far Diff looks for the next matching row after
	// a mismatch. A changed entry costs one step, a new or removed entry
	// one step; runs of changes longer than this are stored as replaced.
	diffLookahead = 8
	// maxRowsPerGroup bounds the count of one script op.
	maxRowsPerGroup = 1 << 31
)

// Script ops, in the low two bits of each uvarint; the rest is the count.
const (
	opSkip = iota
	opCopy
	opTake
)

// Edit rebuilds one key group's state from its base and the rows stored
// with it.
type Edit struct {
	KeyGroup   int
	BaseRows   int
	ResultRows int
	ResultCRC  uint32
	// RowSum: ResultCRC is RowsChecksum of the result, which a writer
	// that patches its copy in place keeps up to date per changed row;
	// otherwise it is ValuesCRC. All edits of one object agree.
	RowSum bool
	Script []byte
}

// deltaFlagRowSum is the header flag of objects whose edits are RowSum.
const deltaFlagRowSum = 1

// int64Cols returns the values of every column of b, or false when a
// column is not int64 or has nulls.
func int64Cols(b arrow.RecordBatch) ([][]int64, bool) {
	cols := make([][]int64, b.NumCols())
	for c := range cols {
		a, ok := b.Column(c).(*array.Int64)
		if !ok || a.NullN() > 0 {
			return nil, false
		}
		cols[c] = a.Int64Values()
	}
	return cols, true
}

// Int64Columns returns the values of every column of b, or false when a
// column is not int64 or has nulls.
func Int64Columns(b arrow.RecordBatch) ([][]int64, bool) { return int64Cols(b) }

// Script ops for ScriptWriter: skip n base rows, copy n base rows, take n
// stored rows.
const (
	OpSkip = opSkip
	OpCopy = opCopy
	OpTake = opTake
)

// ScriptWriter builds an edit script op by op, for callers that know
// where their rows changed and need no Diff.
type ScriptWriter struct{ w scriptWriter }

// Add appends op over n rows (nothing when n is 0).
func (s *ScriptWriter) Add(op, n int) { s.w.add(op, n) }

// Bytes returns the script.
func (s *ScriptWriter) Bytes() []byte { return s.w.bytes() }

// Diffable reports whether Diff can make edits for states of schema s.
func Diffable(s *arrow.Schema) bool {
	for _, f := range s.Fields() {
		if f.Type.ID() != arrow.INT64 {
			return false
		}
	}
	return true
}

// Diff compares next with base, ignoring column uniform (-1: none). It
// returns the script that rebuilds next from base and the rows of next the
// script takes, in order; same is true when next equals base. ok is false
// when the two cannot be diffed (another schema, a column that is not
// plain int64).
func Diff(base, next arrow.RecordBatch, uniform int) (script []byte, take []int, same, ok bool) {
	if !base.Schema().Equal(next.Schema()) {
		return nil, nil, false, false
	}
	bc, ok1 := int64Cols(base)
	nc, ok2 := int64Cols(next)
	if !ok1 || !ok2 {
		return nil, nil, false, false
	}
	nb, nn := int(base.NumRows()), int(next.NumRows())
	var cols []pair
	for c := range nc {
		if c != uniform {
			cols = append(cols, pair{nc[c], bc[c]})
		}
	}
	eq := func(i, j int) bool {
		for _, p := range cols {
			if p.n[i] != p.b[j] {
				return false
			}
		}
		return true
	}
	var w scriptWriter
	takeRows := func(i, n int) {
		w.add(opTake, n)
		for k := i; k < i+n; k++ {
			take = append(take, k)
		}
	}
	i, j := 0, 0
	for i < nn || j < nb {
		switch {
		case i < nn && j < nb && eq(i, j):
			// The common case, a run of unchanged entries, without a
			// call per row.
			k := equalRun(cols, i, j, min(nn-i, nb-j))
			w.add(opCopy, k)
			i, j = i+k, j+k
			continue
		case i >= nn:
			w.add(opSkip, nb-j)
			j = nb
			continue
		case j >= nb:
			takeRows(i, nn-i)
			i = nn
			continue
		}
		found := false
		for d := 1; d <= diffLookahead && !found; d++ {
			switch {
			case i+d < nn && j+d < nb && eq(i+d, j+d): // d entries changed
				w.add(opSkip, d)
				takeRows(i, d)
				i, j, found = i+d, j+d, true
			case j+d < nb && eq(i, j+d): // d entries removed
				w.add(opSkip, d)
				j, found = j+d, true
			case i+d < nn && eq(i+d, j): // d entries added
				takeRows(i, d)
				i, found = i+d, true
			}
		}
		if !found {
			w.add(opSkip, 1)
			takeRows(i, 1)
			i, j = i+1, j+1
		}
	}
	return w.bytes(), take, len(take) == 0 && nb == nn, true
}

// pair is one compared column: next's values and base's.
type pair struct{ n, b []int64 }

// equalRun returns how many rows from next[i] and base[j] on are equal,
// at most end. The usual widths get loops the compiler keeps free of
// bounds checks: this is most of a delta's CPU time.
func equalRun(cols []pair, i, j, end int) int {
	k := 0
	switch len(cols) {
	case 1:
		a, b := cols[0].n[i:i+end], cols[0].b[j:j+end]
		for k < len(a) && a[k] == b[k] {
			k++
		}
	case 2:
		a0, b0 := cols[0].n[i:i+end], cols[0].b[j:j+end]
		a1, b1 := cols[1].n[i:i+end], cols[1].b[j:j+end]
		for k < len(a0) && a0[k] == b0[k] && a1[k] == b1[k] {
			k++
		}
	case 3:
		a0, b0 := cols[0].n[i:i+end], cols[0].b[j:j+end]
		a1, b1 := cols[1].n[i:i+end], cols[1].b[j:j+end]
		a2, b2 := cols[2].n[i:i+end], cols[2].b[j:j+end]
		for k < len(a0) && a0[k] == b0[k] && a1[k] == b1[k] && a2[k] == b2[k] {
			k++
		}
	default:
	rows:
		for ; k < end; k++ {
			for _, p := range cols {
				if p.n[i+k] != p.b[j+k] {
					break rows
				}
			}
		}
	}
	return k
}

// scriptWriter appends ops, merging runs of the same op.
type scriptWriter struct {
	out []byte
	op  int
	n   int
}

func (w *scriptWriter) add(op, n int) {
	if n == 0 {
		return
	}
	if w.n > 0 && w.op == op {
		w.n += n
		return
	}
	w.flush()
	w.op, w.n = op, n
}

func (w *scriptWriter) flush() {
	if w.n > 0 {
		w.out = binary.AppendUvarint(w.out, uint64(w.n)<<2|uint64(w.op))
	}
	w.n = 0
}

func (w *scriptWriter) bytes() []byte {
	w.flush()
	return w.out
}

// ValuesCRC is the CRC32C of b's row count and of every column's values
// but column uniform (-1: none). b's columns must be plain int64.
func ValuesCRC(b arrow.RecordBatch, uniform int) uint32 {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(b.NumRows()))
	sum := crc32.Update(0, castagnoli, n[:])
	for c := 0; c < int(b.NumCols()); c++ {
		a, ok := b.Column(c).(*array.Int64)
		if c == uniform || !ok {
			continue
		}
		if v := a.Int64Values(); len(v) > 0 {
			sum = crc32.Update(sum, castagnoli, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*8))
		}
	}
	return sum
}

// Gather returns the rows of b at idx as a new batch from alloc. b's
// columns must be plain int64.
func Gather(b arrow.RecordBatch, idx []int, alloc memory.Allocator) (arrow.RecordBatch, error) {
	src, ok := int64Cols(b)
	if !ok {
		return nil, fmt.Errorf("gathering rows of a state with schema %s: only int64 columns without nulls can be", b.Schema())
	}
	cols := make([]arrow.Array, len(src))
	for c := range src {
		vals, arr := newInt64(alloc, len(idx))
		for k, i := range idx {
			vals[k] = src[c][i]
		}
		cols[c] = arr
	}
	return newBatch(b.Schema(), cols, len(idx)), nil
}

// Apply rebuilds the batch e describes from base and rows (the rows stored
// with e), from alloc. It fails, wrapping ErrCorrupt, when the script does
// not fit base and rows or the result is not the one e was made from.
func Apply(base, rows arrow.RecordBatch, e Edit, uniform int, alloc memory.Allocator) (arrow.RecordBatch, error) {
	b, _, err := ApplySum(base, rows, e, uniform, 0, false, alloc)
	return b, err
}

// ApplySum is Apply that also returns the result's RowsChecksum when e is
// a RowSum edit. Given the base's (haveSum; known because the base was
// itself checked), an edit that keeps every copied row at its position
// is checked from the rows it skips and takes alone, not by a pass over
// the result: the same check for a chain of in-place edits at the cost
// of the changes.
func ApplySum(base, rows arrow.RecordBatch, e Edit, uniform int, baseSum uint32, haveSum bool,
	alloc memory.Allocator) (arrow.RecordBatch, uint32, error) {
	b, bc, err := rebuild(base, rows, e, uniform, alloc)
	if err != nil {
		return nil, 0, err
	}
	var got uint32
	switch {
	case !e.RowSum:
		got = ValuesCRC(b, uniform)
	case haveSum:
		oc, _ := int64Cols(b)
		var ok bool
		if got, ok = rowSumInPlace(bc, oc, e, uniform, baseSum); !ok {
			got = RowsChecksum(b, uniform)
		}
	default:
		got = RowsChecksum(b, uniform)
	}
	if got != e.ResultCRC {
		b.Release()
		return nil, 0, fmt.Errorf("%w: edit of key group %d: rebuilt state has checksum %08x, the edit was made for %08x", ErrCorrupt, e.KeyGroup, got, e.ResultCRC)
	}
	return b, got, nil
}

// rebuild applies e's script to base and rows; it also returns base's
// columns.
func rebuild(base, rows arrow.RecordBatch, e Edit, uniform int, alloc memory.Allocator) (arrow.RecordBatch, [][]int64, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: edit of key group %d: %s", ErrCorrupt, e.KeyGroup, fmt.Sprintf(format, a...))
	}
	if !base.Schema().Equal(rows.Schema()) {
		return nil, nil, bad("base has schema %s, the stored rows %s", base.Schema(), rows.Schema())
	}
	bc, ok1 := int64Cols(base)
	rc, ok2 := int64Cols(rows)
	if !ok1 || !ok2 {
		return nil, nil, bad("schema %s has a column that is not plain int64", base.Schema())
	}
	nb, nr := int(base.NumRows()), int(rows.NumRows())
	if nb != e.BaseRows {
		return nil, nil, bad("base holds %d rows, the edit was made for %d", nb, e.BaseRows)
	}
	// Check the script whole before allocating for its result.
	var skip, cp, tk int
	for s := e.Script; len(s) > 0; {
		u, k := binary.Uvarint(s)
		if k <= 0 || u>>2 == 0 || u>>2 > maxRowsPerGroup {
			return nil, nil, bad("unreadable script")
		}
		s = s[k:]
		switch n := int(u >> 2); u & 3 {
		case opSkip:
			skip += n
		case opCopy:
			cp += n
		case opTake:
			tk += n
		default:
			return nil, nil, bad("unknown op %d", u&3)
		}
		if skip+cp > nb || tk > nr {
			return nil, nil, bad("script reads past %d base rows or %d stored rows", nb, nr)
		}
	}
	if skip+cp != nb || tk != nr || cp+tk != e.ResultRows {
		return nil, nil, bad("script uses %d of %d base rows and %d of %d stored rows for %d rows, want %d",
			skip+cp, nb, tk, nr, cp+tk, e.ResultRows)
	}
	cols := make([]arrow.Array, len(bc))
	for c := range bc {
		out, arr := newInt64(alloc, e.ResultRows)
		cols[c] = arr
		if c == uniform && nr > 0 {
			for k := range out {
				out[k] = rc[c][0]
			}
			continue
		}
		o, j, r := 0, 0, 0
		for s := e.Script; len(s) > 0; {
			u, k := binary.Uvarint(s)
			s = s[k:]
			n := int(u >> 2)
			switch u & 3 {
			case opSkip:
				j += n
			case opCopy:
				copy(out[o:o+n], bc[c][j:j+n])
				o, j = o+n, j+n
			case opTake:
				copy(out[o:o+n], rc[c][r:r+n])
				o, r = o+n, r+n
			}
		}
	}
	return newBatch(base.Schema(), cols, e.ResultRows), bc, nil
}

func newInt64(alloc memory.Allocator, n int) ([]int64, arrow.Array) {
	buf := memory.NewResizableBuffer(alloc)
	buf.Resize(n * 8)
	vals := arrow.Int64Traits.CastFromBytes(buf.Bytes())
	data := array.NewData(arrow.PrimitiveTypes.Int64, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
	buf.Release()
	arr := array.NewInt64Data(data)
	data.Release()
	return vals[:n], arr
}

func newBatch(s *arrow.Schema, cols []arrow.Array, n int) arrow.RecordBatch {
	b := array.NewRecordBatch(s, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return b
}

// EncodeDelta appends to dst one delta object of operator instance opID:
// parts holds, per key group, the rows stored for it (the whole state, or
// the rows an edit takes), and edits the key groups of parts that are
// edits. The batches are only read.
func EncodeDelta(dst *bytes.Buffer, opID string, parts []operator.KeyGroupState, edits []Edit) error {
	inBlob := map[int]bool{}
	for _, p := range parts {
		inBlob[p.KeyGroup] = true
	}
	seen := map[int]bool{}
	var flags uint16
	for i, e := range edits {
		if !inBlob[e.KeyGroup] || seen[e.KeyGroup] {
			return fmt.Errorf("encoding delta of %s: edit of key group %d has no rows or is repeated", opID, e.KeyGroup)
		}
		if e.RowSum != edits[0].RowSum {
			return fmt.Errorf("encoding delta of %s: edits %d and 0 check their results differently", opID, i)
		}
		seen[e.KeyGroup] = true
		if e.RowSum {
			flags = deltaFlagRowSum
		}
	}
	start := dst.Len()
	var hdr [deltaHeaderLen]byte
	copy(hdr[:4], deltaMagic[:])
	binary.LittleEndian.PutUint16(hdr[4:], DeltaFormatVersion)
	binary.LittleEndian.PutUint16(hdr[6:], flags)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(len(edits)))
	dst.Write(hdr[:])
	for _, e := range edits {
		var eh [editHeaderLen]byte
		binary.LittleEndian.PutUint16(eh[0:], uint16(e.KeyGroup))
		binary.LittleEndian.PutUint32(eh[2:], uint32(e.BaseRows))
		binary.LittleEndian.PutUint32(eh[6:], uint32(e.ResultRows))
		binary.LittleEndian.PutUint32(eh[10:], e.ResultCRC)
		binary.LittleEndian.PutUint32(eh[14:], uint32(len(e.Script)))
		dst.Write(eh[:])
		dst.Write(e.Script)
	}
	lenAt := dst.Len()
	dst.Write(make([]byte, 8))
	if err := EncodeAll(dst, opID, parts); err != nil {
		dst.Truncate(start)
		return err
	}
	b := dst.Bytes()
	binary.LittleEndian.PutUint64(b[lenAt:], uint64(len(b)-lenAt-8))
	var crc [4]byte
	binary.LittleEndian.PutUint32(crc[:], crc32.Checksum(b[start:], castagnoli))
	dst.Write(crc[:])
	return nil
}

// DecodeDelta decodes an object written by EncodeDelta, or a plain
// EncodeAll blob (every key group whole). The batches come from alloc and
// the caller releases them; with alloc nil they point into data instead,
// as DecodeAllShared's do. Any damage yields an error wrapping ErrCorrupt
// and no batches.
func DecodeDelta(data []byte, alloc memory.Allocator) (opID string, parts []operator.KeyGroupState, edits map[int]Edit, err error) {
	if len(data) >= 4 && bytes.Equal(data[:4], magic[:]) {
		opID, parts, err = DecodeAll(data, alloc)
		return opID, parts, nil, err
	}
	if len(data) < deltaHeaderLen+8+trailerLen {
		return "", nil, nil, fmt.Errorf("%w: %d bytes is shorter than any delta", ErrCorrupt, len(data))
	}
	if !bytes.Equal(data[:4], deltaMagic[:]) {
		return "", nil, nil, fmt.Errorf("%w: bad magic %q", ErrCorrupt, data[:4])
	}
	body := data[:len(data)-trailerLen]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(data[len(body):]); got != want {
		return "", nil, nil, fmt.Errorf("%w: delta checksum %08x, stored %08x", ErrCorrupt, got, want)
	}
	if v := binary.LittleEndian.Uint16(data[4:]); v != DeltaFormatVersion {
		return "", nil, nil, fmt.Errorf("%w: delta format version %d, this build reads %d", ErrCorrupt, v, DeltaFormatVersion)
	}
	f := binary.LittleEndian.Uint16(data[6:])
	if f&^deltaFlagRowSum != 0 {
		return "", nil, nil, fmt.Errorf("%w: unknown delta flags %#x", ErrCorrupt, f)
	}
	nEdits := int(binary.LittleEndian.Uint32(data[8:]))
	if nEdits > keygroup.Count {
		return "", nil, nil, fmt.Errorf("%w: %d edits, more than the %d key groups", ErrCorrupt, nEdits, keygroup.Count)
	}
	off := deltaHeaderLen
	edits = make(map[int]Edit, nEdits)
	for range nEdits {
		if off+editHeaderLen > len(body) {
			return "", nil, nil, fmt.Errorf("%w: edits run past the end", ErrCorrupt)
		}
		e := Edit{
			KeyGroup:   int(binary.LittleEndian.Uint16(body[off:])),
			BaseRows:   int(binary.LittleEndian.Uint32(body[off+2:])),
			ResultRows: int(binary.LittleEndian.Uint32(body[off+6:])),
			ResultCRC:  binary.LittleEndian.Uint32(body[off+10:]),
			RowSum:     f&deltaFlagRowSum != 0,
		}
		sl := int(binary.LittleEndian.Uint32(body[off+14:]))
		off += editHeaderLen
		if sl > len(body)-off {
			return "", nil, nil, fmt.Errorf("%w: script of key group %d runs past the end", ErrCorrupt, e.KeyGroup)
		}
		if _, dup := edits[e.KeyGroup]; dup || e.KeyGroup >= keygroup.Count {
			return "", nil, nil, fmt.Errorf("%w: edit of key group %d out of range or repeated", ErrCorrupt, e.KeyGroup)
		}
		e.Script = bytes.Clone(body[off : off+sl])
		off += sl
		edits[e.KeyGroup] = e
	}
	if off+8 > len(body) || binary.LittleEndian.Uint64(body[off:]) != uint64(len(body)-off-8) {
		return "", nil, nil, fmt.Errorf("%w: delta blob length does not match the object", ErrCorrupt)
	}
	opID, parts, err = DecodeAll(body[off+8:], alloc)
	if err != nil {
		return "", nil, nil, err
	}
	inBlob := map[int]bool{}
	for _, p := range parts {
		inBlob[p.KeyGroup] = true
	}
	for kg := range edits {
		if !inBlob[kg] {
			operator.ReleaseStates(parts)
			return "", nil, nil, fmt.Errorf("%w: edit of key group %d has no rows", ErrCorrupt, kg)
		}
	}
	return opID, parts, edits, nil
}
