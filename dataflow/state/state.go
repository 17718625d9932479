// Package state is the byte format of operator state in a recovery point.
//
// One blob holds the key-group states of one operator instance (executors
// write one object per operator subtask). Its layout, all integers little
// endian:
//
//	magic     4 bytes  "RWST"
//	version   uint16   FormatVersion
//	flags     uint16   0, reserved
//	opIDLen   uint16
//	nParts    uint32
//	opID      opIDLen bytes
//	keyGroups nParts x uint16, the key group of each batch in stream order
//	ipcLen    uint64
//	ipc       ipcLen bytes: an Arrow IPC stream (schema, nParts record
//	          batches, end-of-stream); empty when nParts is 0
//	crc       uint32   CRC32C (Castagnoli) of every byte before it
//
// The state stays Arrow: any Arrow reader can read the IPC section, and
// decoding is a copy (or nothing, see DecodeAllShared), not a conversion.
// The checksum and the exact-length rule make every torn or corrupt blob
// fail to decode instead of loading wrong state: a blob is either used
// whole or rejected. The IPC section is parsed only after the checksum
// matched, because arrow-go's metadata parser trusts the lengths it reads:
// damaged metadata can make it allocate without bound.
package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
)

// FormatVersion is the version written into every blob. Decode rejects
// other versions rather than guessing.
const FormatVersion = 1

var magic = [4]byte{'R', 'W', 'S', 'T'}

const (
	fixedHeaderLen = 4 + 2 + 2 + 2 + 4 // magic .. nParts
	trailerLen     = 4                 // crc
	maxOpIDLen     = 1<<16 - 1
)

// ErrCorrupt is wrapped by every Decode error caused by the bytes themselves
// (as opposed to, say, a failing allocator), so callers can tell a torn or
// damaged blob apart.
var ErrCorrupt = errors.New("corrupt operator state")

// Encode appends to dst the blob of a single key-group state of operator
// opID. It is EncodeAll with one part.
func Encode(dst *bytes.Buffer, opID string, part operator.KeyGroupState) error {
	return EncodeAll(dst, opID, []operator.KeyGroupState{part})
}

// EncodeAll appends to dst one blob holding parts, the key-group states of
// operator instance opID. All batches must share one schema. dst may be
// reused across calls (Reset it first) so its memory is reused too. The
// batches are only read; the caller still owns them.
func EncodeAll(dst *bytes.Buffer, opID string, parts []operator.KeyGroupState) error {
	return encodeAll(dst, opID, parts, nil)
}

// encodeAll is EncodeAll, calling encoded(i) (when not nil) once part i is
// written into dst.
func encodeAll(dst *bytes.Buffer, opID string, parts []operator.KeyGroupState, encoded func(i int)) error {
	if len(opID) > maxOpIDLen {
		return fmt.Errorf("encoding state: operator id is %d bytes, at most %d allowed", len(opID), maxOpIDLen)
	}
	var schema *arrow.Schema
	size := 0
	for i, p := range parts {
		if p.KeyGroup < 0 || p.KeyGroup >= keygroup.Count {
			return fmt.Errorf("encoding state of %s: key group %d out of range [0,%d)", opID, p.KeyGroup, keygroup.Count)
		}
		if p.Batch == nil {
			return fmt.Errorf("encoding state of %s: key group %d has no batch", opID, p.KeyGroup)
		}
		if i == 0 {
			schema = p.Batch.Schema()
		} else if !p.Batch.Schema().Equal(schema) {
			return fmt.Errorf("encoding state of %s: key group %d has schema %s, key group %d has %s",
				opID, p.KeyGroup, p.Batch.Schema(), parts[0].KeyGroup, schema)
		}
		size += batchBytes(p.Batch)
	}

	start := dst.Len()
	// Room for everything up front: the IPC writer issues many small writes
	// and the buffer should not grow in steps while it does.
	dst.Grow(encodedBound(opID, len(parts), size))
	var hdr [fixedHeaderLen]byte
	copy(hdr[:4], magic[:])
	binary.LittleEndian.PutUint16(hdr[4:], FormatVersion)
	binary.LittleEndian.PutUint16(hdr[6:], 0)
	binary.LittleEndian.PutUint16(hdr[8:], uint16(len(opID)))
	binary.LittleEndian.PutUint32(hdr[10:], uint32(len(parts)))
	dst.Write(hdr[:])
	dst.WriteString(opID)
	var u16 [2]byte
	for _, p := range parts {
		binary.LittleEndian.PutUint16(u16[:], uint16(p.KeyGroup))
		dst.Write(u16[:])
	}
	lenAt := dst.Len()
	dst.Write(make([]byte, 8)) // ipcLen, patched below

	// The IPC section is checksummed as it is written (see crcWriter);
	// the header's checksum, once ipcLen is known, is joined to it.
	ipcOut := crcWriter{dst: dst}
	if len(parts) > 0 {
		// Plain fixed-width columns are written straight from their
		// buffers; the allocator only backs bookkeeping.
		w := ipc.NewWriter(&ipcOut, ipc.WithSchema(schema), ipc.WithAllocator(memory.DefaultAllocator))
		for i, p := range parts {
			err := w.Write(p.Batch) // copies the batch's buffers into dst
			if err == nil && encoded != nil {
				encoded(i)
			}
			if err != nil {
				w.Close()
				dst.Truncate(start)
				return fmt.Errorf("encoding state of %s, key group %d: %w", opID, p.KeyGroup, err)
			}
		}
		if err := w.Close(); err != nil {
			dst.Truncate(start)
			return fmt.Errorf("encoding state of %s: %w", opID, err)
		}
	}
	b := dst.Bytes()
	ipcLen := len(b) - lenAt - 8
	binary.LittleEndian.PutUint64(b[lenAt:], uint64(ipcLen))
	sum := crcConcat(crc32.Checksum(b[start:lenAt+8], castagnoli), ipcOut.crc, ipcLen)
	var crc [4]byte
	binary.LittleEndian.PutUint32(crc[:], sum)
	dst.Write(crc[:])
	return nil
}

// encodedBound is the most bytes a blob of n parts whose batches' buffers
// hold size bytes takes: the IPC metadata of a batch of plain columns is
// well under 512 bytes.
func encodedBound(opID string, n, size int) int {
	return fixedHeaderLen + len(opID) + 2*n + 8 + size + 512*(n+2) + trailerLen
}

// EncodeAllTo encodes parts as EncodeAll does and calls use with the blob,
// which is valid only until use returns. It takes over parts: each batch
// is released as soon as it is encoded (all of them by the time it
// returns, on error too), so a large snapshot gives its memory back while
// its blob fills, and the two together stay about one copy of the state
// instead of two. use's error is returned as it is.
//
// The blob is on Go's heap, not mapped (package offheap) like the
// snapshot: it goes to storage, and an S3 upload that is cancelled may
// still be reading its body after Put returns (net/http closes a request
// body in its own time), which memory unmapped at return would turn into
// a crash.
func EncodeAllTo(opID string, parts []operator.KeyGroupState, use func(blob []byte) error) error {
	released := 0
	defer func() { operator.ReleaseStates(parts[released:]) }()
	size := 0
	for _, p := range parts {
		if p.Batch != nil {
			size += batchBytes(p.Batch)
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, encodedBound(opID, len(parts), size)))
	err := encodeAll(buf, opID, parts, func(i int) {
		// Parts are encoded in order, so parts[:released] are released.
		parts[i].Batch.Release()
		released = i + 1
	})
	if err != nil {
		return err
	}
	return use(buf.Bytes())
}

// batchBytes is the size of a batch's buffers, for sizing the output.
func batchBytes(b arrow.RecordBatch) int {
	n := 0
	for _, c := range b.Columns() {
		for _, buf := range c.Data().Buffers() {
			if buf != nil {
				n += buf.Len()
			}
		}
	}
	return n
}

// Header describes a blob without decoding its batches.
type Header struct {
	OpID      string
	KeyGroups []int // in stream order
	IPCBytes  int   // size of the Arrow IPC section
}

// ReadHeader verifies data (length, version, checksum) and returns its
// header. It is what Decode checks before touching the IPC section, and is
// enough for listing recovery points.
func ReadHeader(data []byte) (Header, error) {
	h, _, err := parse(data, nil)
	return h, err
}

// parse checks the framing and the checksum and returns the header and the
// IPC section. With copyInto it copies the IPC section into the memory
// copyInto returns for its length, checksumming each chunk right after
// copying it (one pass over the blob rather than two), and returns the copy.
func parse(data []byte, copyInto func(n int) []byte) (Header, []byte, error) {
	var h Header
	if len(data) < fixedHeaderLen+8+trailerLen {
		return h, nil, fmt.Errorf("%w: %d bytes is shorter than any blob", ErrCorrupt, len(data))
	}
	if !bytes.Equal(data[:4], magic[:]) {
		return h, nil, fmt.Errorf("%w: bad magic %q", ErrCorrupt, data[:4])
	}
	if v := binary.LittleEndian.Uint16(data[4:]); v != FormatVersion {
		return h, nil, fmt.Errorf("%w: format version %d, this build reads %d", ErrCorrupt, v, FormatVersion)
	}
	if f := binary.LittleEndian.Uint16(data[6:]); f != 0 {
		return h, nil, fmt.Errorf("%w: unknown flags %#x", ErrCorrupt, f)
	}
	idLen := int(binary.LittleEndian.Uint16(data[8:]))
	nParts := int(binary.LittleEndian.Uint32(data[10:]))
	if nParts > keygroup.Count {
		return h, nil, fmt.Errorf("%w: %d parts, more than the %d key groups", ErrCorrupt, nParts, keygroup.Count)
	}
	lenAt := fixedHeaderLen + idLen + 2*nParts
	if lenAt+8+trailerLen > len(data) {
		return h, nil, fmt.Errorf("%w: header runs past the end (%d bytes)", ErrCorrupt, len(data))
	}
	ipcLen := binary.LittleEndian.Uint64(data[lenAt:])
	if want := uint64(len(data) - lenAt - 8 - trailerLen); ipcLen != want {
		return h, nil, fmt.Errorf("%w: IPC section of %d bytes declared, %d present (truncated or trailing data)", ErrCorrupt, ipcLen, want)
	}
	body := data[:len(data)-trailerLen]
	ipcSection := body[lenAt+8:]
	got := crc32.Checksum(body[:lenAt+8], castagnoli)
	var dst []byte
	if copyInto != nil {
		dst = copyInto(len(ipcSection))
	}
	got = crcConcat(got, checksumCopy(ipcSection, dst), len(ipcSection))
	if dst != nil {
		ipcSection = dst
	}
	if want := binary.LittleEndian.Uint32(data[len(body):]); got != want {
		return h, nil, fmt.Errorf("%w: checksum %08x, stored %08x", ErrCorrupt, got, want)
	}
	if (nParts == 0) != (ipcLen == 0) {
		return h, nil, fmt.Errorf("%w: %d parts with %d IPC bytes", ErrCorrupt, nParts, ipcLen)
	}
	h.OpID = string(data[fixedHeaderLen : fixedHeaderLen+idLen])
	h.KeyGroups = make([]int, nParts)
	seen := [keygroup.Count]bool{}
	for i := range h.KeyGroups {
		kg := int(binary.LittleEndian.Uint16(data[fixedHeaderLen+idLen+2*i:]))
		if kg >= keygroup.Count || seen[kg] {
			return h, nil, fmt.Errorf("%w: key group %d out of range or repeated", ErrCorrupt, kg)
		}
		seen[kg] = true
		h.KeyGroups[i] = kg
	}
	h.IPCBytes = int(ipcLen)
	return h, ipcSection, nil
}

// copyChunk is how much parse copies before checksumming the copy: small
// enough to be still in the core's cache when the checksum reads it.
const copyChunk = 64 << 10

// checksumPerGoroutine is the least a goroutine of checksumCopy gets to do.
const checksumPerGoroutine = 4 << 20

// checksumCopy returns the CRC32C of src, copying src into dst on the way
// when dst is not nil. A large src is split into pieces checksummed (and
// copied) on up to GOMAXPROCS goroutines and the pieces' checksums are
// combined: one core cannot pull bytes from memory as fast as the cores
// together, and this pass is a fifth of a restore. With -cpu 1 it runs on
// the calling goroutine.
func checksumCopy(src, dst []byte) uint32 {
	n := min(runtime.GOMAXPROCS(0), len(src)/checksumPerGoroutine)
	if n <= 1 {
		return checksumCopyPiece(src, dst)
	}
	piece := (len(src)/n + copyChunk - 1) / copyChunk * copyChunk
	crcs := make([]uint32, (len(src)+piece-1)/piece) // at most n pieces
	var wg sync.WaitGroup
	for i := range crcs {
		off := i * piece
		end := min(off+piece, len(src))
		var d []byte
		if dst != nil {
			d = dst[off:end]
		}
		wg.Go(func() { crcs[i] = checksumCopyPiece(src[off:end], d) })
	}
	wg.Wait()
	sum := crcs[0]
	for i := 1; i < len(crcs); i++ {
		sum = crcConcat(sum, crcs[i], min(piece, len(src)-i*piece))
	}
	return sum
}

// checksumCopyPiece is checksumCopy on one goroutine. It copies a chunk
// and then checksums the copy while the chunk is still in cache.
func checksumCopyPiece(src, dst []byte) uint32 {
	if dst == nil {
		return crc32.Checksum(src, castagnoli)
	}
	var sum uint32
	for off := 0; off < len(src); off += copyChunk {
		n := copy(dst[off:], src[off:min(off+copyChunk, len(src))])
		sum = crc32.Update(sum, castagnoli, dst[off:off+n])
	}
	return sum
}

// Decode decodes a blob written by Encode: exactly one key-group state. The
// batch is allocated from alloc and the caller releases it.
func Decode(data []byte, alloc memory.Allocator) (opID string, part operator.KeyGroupState, err error) {
	opID, parts, err := DecodeAll(data, alloc)
	if err != nil {
		return "", part, err
	}
	if len(parts) != 1 {
		operator.ReleaseStates(parts)
		return "", part, fmt.Errorf("state of %s holds %d key groups, want exactly 1", opID, len(parts))
	}
	return opID, parts[0], nil
}

// DecodeAll decodes a blob written by EncodeAll. Batches are copied into
// memory from alloc (one allocation for the whole blob, never larger than
// data), so data may be reused afterwards; the caller releases them
// (operator.ReleaseStates). Any damage to data yields an error that wraps
// ErrCorrupt and no batches.
func DecodeAll(data []byte, alloc memory.Allocator) (opID string, parts []operator.KeyGroupState, err error) {
	return decodeAll(data, alloc)
}

// DecodeAllShared is DecodeAll without the copy: the batches point into
// data, which must stay unmodified until they are released. It suits the
// restore path, where Restore copies the state into the operator and the
// batches are released right after; it skips allocating, clearing and
// copying the whole state once more.
func DecodeAllShared(data []byte) (opID string, parts []operator.KeyGroupState, err error) {
	return decodeAll(data, nil)
}

// decodeAll decodes data, copying the IPC section into memory from alloc
// first unless alloc is nil. It parses the IPC messages itself rather than
// with ipc.NewReader, which allocates whatever body length a message
// declares before reading it: one damaged length field would ask for
// gigabytes.
func decodeAll(data []byte, alloc memory.Allocator) (opID string, parts []operator.KeyGroupState, err error) {
	var parent *memory.Buffer
	var copyInto func(int) []byte
	if alloc != nil {
		copyInto = func(n int) []byte {
			parent = memory.NewResizableBuffer(alloc)
			parent.Resize(n)
			return parent.Bytes()
		}
	}
	h, body, err := parse(data, copyInto)
	if parent != nil {
		defer parent.Release() // the batches hold their own references
	}
	if err != nil {
		return "", nil, err
	}
	if len(h.KeyGroups) == 0 {
		return h.OpID, nil, nil
	}
	if parent != nil {
		// A dry run over views that are not reference counted first: a
		// panic inside arrow-go (recovered in readBatches) can leave views
		// of parent retained that nothing would release, and the
		// allocator's memory would never come back. Reading the batches
		// parses metadata and slices buffers, it does not copy data, so
		// the second pass costs little next to the copy and checksum.
		dry, err := readBatches(h, body, nil)
		if err != nil {
			return "", nil, err
		}
		operator.ReleaseStates(dry)
	}
	parts, err = readBatches(h, body, parent)
	if err != nil {
		return "", nil, err
	}
	return h.OpID, parts, nil
}

// readBatches reads the IPC section body of a blob with header h into one
// part per key group, with buffers viewing body (through parent when set).
func readBatches(h Header, body []byte, parent *memory.Buffer) (parts []operator.KeyGroupState, err error) {
	defer func() {
		// The checksum matched, so this is a writer bug or a checksum
		// collision; either way report it rather than crash the worker.
		if r := recover(); r != nil {
			operator.ReleaseStates(parts)
			parts, err = nil, fmt.Errorf("%w: decoding state of %s: %v", ErrCorrupt, h.OpID, r)
		}
	}()
	msgs := &messages{data: body, parent: parent}
	rd, err := ipc.NewReaderFromMessageReader(msgs, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("%w: state of %s: %v", ErrCorrupt, h.OpID, err)
	}
	defer rd.Release()
	parts = make([]operator.KeyGroupState, 0, len(h.KeyGroups))
	for rd.Next() {
		if len(parts) == len(h.KeyGroups) {
			operator.ReleaseStates(parts)
			return nil, fmt.Errorf("%w: state of %s holds more batches than its %d key groups", ErrCorrupt, h.OpID, len(h.KeyGroups))
		}
		b := rd.RecordBatch()
		b.Retain()
		parts = append(parts, operator.KeyGroupState{KeyGroup: h.KeyGroups[len(parts)], Batch: b})
	}
	if err := rd.Err(); err != nil || len(parts) != len(h.KeyGroups) {
		operator.ReleaseStates(parts)
		return nil, fmt.Errorf("%w: state of %s: %d of %d batches read: %v", ErrCorrupt, h.OpID, len(parts), len(h.KeyGroups), err)
	}
	return parts, nil
}

// messages reads IPC stream messages out of a byte slice without copying:
// metadata and body buffers are views of data, reference counted through
// parent when data is parent's memory.
type messages struct {
	data   []byte
	parent *memory.Buffer
	off    int
	n      int // messages read
	msg    *ipc.Message
}

// ipcContinuation starts every message of the IPC stream format.
const ipcContinuation = 0xFFFFFFFF

// view returns data[off:off+n] as a buffer; the caller releases it.
func (r *messages) view(off, n int) *memory.Buffer {
	if r.parent == nil {
		return memory.NewBufferBytes(r.data[off : off+n]) // not reference counted
	}
	return memory.SliceBuffer(r.parent, off, n)
}

func (r *messages) Message() (*ipc.Message, error) {
	if r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
	rest := r.data[r.off:]
	if len(rest) < 8 || binary.LittleEndian.Uint32(rest) != ipcContinuation {
		return nil, errors.New("arrow/ipc: missing message header")
	}
	metaLen := int64(int32(binary.LittleEndian.Uint32(rest[4:])))
	if metaLen == 0 {
		return nil, io.EOF // end-of-stream marker
	}
	if metaLen < 0 || metaLen > int64(len(rest)-8) {
		return nil, fmt.Errorf("arrow/ipc: message metadata of %d bytes, %d left", metaLen, len(rest)-8)
	}
	// The body length is in the metadata; a message without body reads
	// it. The probe gets a view that is not reference counted: the
	// flatbuffer parser panics on damaged metadata (decodeAll recovers),
	// and a panic inside NewMessage would leave a counted view retained.
	metaAt := r.off + 8
	if err := checkMeta(r.data[metaAt : metaAt+int(metaLen)]); err != nil {
		return nil, fmt.Errorf("arrow/ipc: message %d: %w", r.n, err)
	}
	r.n++
	probe := ipc.NewMessage(memory.NewBufferBytes(r.data[metaAt:metaAt+int(metaLen)]), memory.NewBufferBytes(nil))
	bodyLen := probe.BodyLen()
	probe.Release()
	meta := r.view(metaAt, int(metaLen))
	defer meta.Release()
	bodyOff := metaAt + int(metaLen)
	if bodyLen < 0 || bodyLen > int64(len(r.data)-bodyOff) {
		return nil, fmt.Errorf("arrow/ipc: message body of %d bytes, %d left", bodyLen, len(r.data)-bodyOff)
	}
	body := r.view(bodyOff, int(bodyLen))
	defer body.Release()
	r.msg = ipc.NewMessage(meta, body)
	r.off = bodyOff + int(bodyLen)
	return r.msg, nil
}

func (r *messages) Retain() {}

func (r *messages) Release() {
	if r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
}
