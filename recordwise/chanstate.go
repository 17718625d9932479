package recordwise

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/state"
)

// The channel-state object (chk-<id>/<task>/channels) holds the in-flight
// data a task persisted with an unaligned part: for each input channel the
// records that preceded the barrier on it but arrived after the snapshot,
// and for each output channel the records the barrier overtook. Layout,
// integers little endian:
//
//	magic    "RWCH"
//	version  uint16 (1)
//	streams  uint32
//	per stream:
//	  dir      uint8   0 input channel, 1 output channel
//	  channel  uint32  channel index in the task's input or output order
//	  items    uint32
//	  per item: kind uint8 (0 rows, 1 watermark), value int64 (watermark)
//	  ipcLen   uint64
//	  ipc      an Arrow IPC stream holding the stream's row batches in order
//	           (empty when there are none)
//
// Storage checksums every object, so a torn object never reaches the
// decoder; the decoder still checks every length.

var chanMagic = [4]byte{'R', 'W', 'C', 'H'}

const chanVersion = 1

const (
	dirInput  = 0
	dirOutput = 1
)

// chanStream is the persisted state of one channel, in order.
type chanStream struct {
	dir     uint8
	channel int
	items   []item
}

// encodeChannels appends the object for streams to dst.
func encodeChannels(dst *bytes.Buffer, streams []chanStream) error {
	dst.Write(chanMagic[:])
	var b8 [8]byte
	binary.LittleEndian.PutUint16(b8[:2], chanVersion)
	dst.Write(b8[:2])
	binary.LittleEndian.PutUint32(b8[:4], uint32(len(streams)))
	dst.Write(b8[:4])
	for _, s := range streams {
		dst.WriteByte(s.dir)
		binary.LittleEndian.PutUint32(b8[:4], uint32(s.channel))
		dst.Write(b8[:4])
		binary.LittleEndian.PutUint32(b8[:4], uint32(len(s.items)))
		dst.Write(b8[:4])
		var schema *arrow.Schema
		for _, it := range s.items {
			var kind uint8
			var v int64
			switch it.kind {
			case kData:
				if schema == nil {
					schema = it.batch.Schema()
				}
			case kWatermark:
				kind, v = 1, it.wm
			default:
				return fmt.Errorf("channel state: unexpected item kind %d", it.kind)
			}
			dst.WriteByte(kind)
			binary.LittleEndian.PutUint64(b8[:], uint64(v))
			dst.Write(b8[:])
		}
		lenAt := dst.Len()
		dst.Write(make([]byte, 8))
		if schema != nil {
			w := ipc.NewWriter(dst, ipc.WithSchema(schema), ipc.WithAllocator(memory.DefaultAllocator))
			for _, it := range s.items {
				if it.kind != kData {
					continue
				}
				if err := w.Write(it.batch); err != nil {
					w.Close()
					return fmt.Errorf("channel state: %w", err)
				}
			}
			if err := w.Close(); err != nil {
				return fmt.Errorf("channel state: %w", err)
			}
		}
		binary.LittleEndian.PutUint64(dst.Bytes()[lenAt:], uint64(dst.Len()-lenAt-8))
	}
	return nil
}

var errChanCorrupt = errors.New("corrupt channel state")

// decodeChannels decodes an object written by encodeChannels. Batches are
// allocated from alloc; the caller owns the returned items.
func decodeChannels(data []byte, alloc memory.Allocator) (out []chanStream, err error) {
	defer func() {
		if err != nil {
			for _, s := range out {
				for _, it := range s.items {
					it.release()
				}
			}
			out = nil
		}
	}()
	r := &byteReader{b: data}
	if m := r.next(4); m == nil || !bytes.Equal(m, chanMagic[:]) {
		return nil, fmt.Errorf("%w: bad magic", errChanCorrupt)
	}
	if v := r.u16(); v != chanVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads %d", errChanCorrupt, v, chanVersion)
	}
	n := int(r.u32())
	for i := 0; i < n && r.err == nil; i++ {
		s := chanStream{dir: r.u8(), channel: int(r.u32())}
		m := int(r.u32())
		if r.err != nil || m > len(data) {
			return out, fmt.Errorf("%w: stream header", errChanCorrupt)
		}
		kinds := make([]uint8, m)
		vals := make([]int64, m)
		for j := 0; j < m; j++ {
			kinds[j] = r.u8()
			vals[j] = int64(r.u64())
		}
		ipcLen := r.u64()
		body := r.next(int(ipcLen))
		if r.err != nil {
			return out, fmt.Errorf("%w: truncated", errChanCorrupt)
		}
		batches, err := readChannelBatches(body, alloc)
		if err != nil {
			return out, err
		}
		k := 0
		for j := 0; j < m; j++ {
			switch kinds[j] {
			case 0:
				if k >= len(batches) {
					break
				}
				s.items = append(s.items, item{kind: kData, batch: batches[k]})
				k++
			case 1:
				s.items = append(s.items, item{kind: kWatermark, wm: vals[j]})
			}
		}
		if k != len(batches) || len(s.items) != m {
			for _, b := range batches[k:] {
				b.Release()
			}
			out = append(out, s)
			return out, fmt.Errorf("%w: %d row items for %d batches", errChanCorrupt, k, len(batches))
		}
		out = append(out, s)
	}
	if r.err != nil || r.off != len(data) {
		return out, fmt.Errorf("%w: bad length", errChanCorrupt)
	}
	return out, nil
}

type byteReader struct {
	b   []byte
	off int
	err error
}

func (r *byteReader) next(n int) []byte {
	if r.err != nil || n < 0 || r.off+n > len(r.b) {
		r.err = errChanCorrupt
		return nil
	}
	out := r.b[r.off : r.off+n]
	r.off += n
	return out
}

func (r *byteReader) u8() uint8 {
	if b := r.next(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *byteReader) u16() uint16 {
	if b := r.next(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *byteReader) u32() uint32 {
	if b := r.next(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *byteReader) u64() uint64 {
	if b := r.next(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// readChannelBatches reads the IPC stream of one channel. The stream is
// vetted first (state.CheckIPC): arrow-go's reader allocates whatever
// lengths the bytes claim, and panics on some damaged metadata.
func readChannelBatches(body []byte, alloc memory.Allocator) (batches []arrow.RecordBatch, err error) {
	if len(body) == 0 {
		return nil, nil
	}
	if err := state.CheckIPC(body); err != nil {
		return nil, fmt.Errorf("%w: %v", errChanCorrupt, err)
	}
	// A dry run from Go's allocator first: after a panic inside arrow-go
	// (recovered below) buffers it allocated can stay retained, and
	// alloc's memory would never come back. Channel state is small and
	// read only by a restore, so reading it twice costs little.
	dry, err := readIPC(body, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	for _, b := range dry {
		b.Release()
	}
	return readIPC(body, alloc)
}

// readIPC reads the record batches of a vetted IPC stream from alloc.
func readIPC(body []byte, alloc memory.Allocator) (batches []arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			for _, b := range batches {
				b.Release()
			}
			batches, err = nil, fmt.Errorf("%w: %v", errChanCorrupt, r)
		}
	}()
	rd, err := ipc.NewReader(bytes.NewReader(body), ipc.WithAllocator(alloc),
		ipc.WithMetadataSizeLimit(int64(len(body))), ipc.WithBodySizeLimit(int64(len(body))))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errChanCorrupt, err)
	}
	defer rd.Release()
	for rd.Next() {
		b := rd.RecordBatch()
		b.Retain()
		batches = append(batches, b)
	}
	if err := rd.Err(); err != nil {
		for _, b := range batches {
			b.Release()
		}
		return nil, fmt.Errorf("%w: %v", errChanCorrupt, err)
	}
	return batches, nil
}
