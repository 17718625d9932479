package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/operator"
)

// int64Batch builds a batch of schema's int64 columns from rows (optest
// imports this package, so it cannot be used here).
func int64Batch(mem memory.Allocator, schema *arrow.Schema, rows [][]int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for _, r := range rows {
		for c, v := range r {
			b.Field(c).(*array.Int64Builder).Append(v)
		}
	}
	return b.NewRecordBatch()
}

// fuzzSeedBlobs are real blobs: no parts, one part, several parts with an
// empty batch among them.
func fuzzSeedBlobs(f *testing.F) [][]byte {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "count", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	mem := memory.NewGoAllocator()
	sets := [][]operator.KeyGroupState{
		nil,
		{{KeyGroup: 0, Batch: int64Batch(mem, schema, [][]int64{{1, 2}})}},
		{
			{KeyGroup: 3, Batch: int64Batch(mem, schema, [][]int64{{1, 2}, {-5, 7}})},
			{KeyGroup: 4, Batch: int64Batch(mem, schema, nil)},
			{KeyGroup: 127, Batch: int64Batch(mem, schema, [][]int64{{9, 1}})},
		},
	}
	var out [][]byte
	for i, parts := range sets {
		var buf bytes.Buffer
		if err := EncodeAll(&buf, []string{"", "count/0", "window/3"}[i], parts); err != nil {
			f.Fatal(err)
		}
		operator.ReleaseStates(parts)
		out = append(out, buf.Bytes())
	}
	return out
}

// checkDecoded re-encodes what decoding data gave and requires the same
// bytes back: a blob is accepted only as exactly what EncodeAll writes.
func checkDecoded(t *testing.T, data []byte, opID string, parts []operator.KeyGroupState) {
	t.Helper()
	var again bytes.Buffer
	if err := EncodeAll(&again, opID, parts); err != nil {
		t.Fatalf("decoded state does not encode again: %v", err)
	}
	if !bytes.Equal(again.Bytes(), data) {
		t.Fatalf("decode then encode changed the blob:\n in  %x\n out %x", data, again.Bytes())
	}
}

// FuzzStateDecode: arbitrary bytes either decode to state that encodes back
// to the same bytes, or fail with ErrCorrupt; never a panic, and nothing
// left allocated either way.
func FuzzStateDecode(f *testing.F) {
	for _, b := range fuzzSeedBlobs(f) {
		f.Add(b)
	}
	f.Add([]byte("RWST"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		opID, parts, err := DecodeAll(data, mem)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			if parts != nil {
				t.Fatalf("error %v with %d parts", err, len(parts))
			}
			return
		}
		defer operator.ReleaseStates(parts)
		if _, herr := ReadHeader(data); herr != nil {
			t.Fatalf("DecodeAll accepted what ReadHeader rejects: %v", herr)
		}
		checkDecoded(t, data, opID, parts)
	})
}

// FuzzStateDecodeSealed reaches past the checksum: the fuzzer's bytes
// become the IPC section of a blob whose framing and checksum are then made
// right, as a writer bug or a checksum collision would leave them. The
// Arrow IPC parsing behind the checksum must still fail cleanly, with no
// panic, no allocation beyond the blob, and nothing leaked.
func FuzzStateDecodeSealed(f *testing.F) {
	for _, b := range fuzzSeedBlobs(f) {
		h, err := ReadHeader(b)
		if err != nil {
			f.Fatal(err)
		}
		ipcAt := len(b) - trailerLen - h.IPCBytes
		f.Add(uint8(len(h.KeyGroups)), b[ipcAt:len(b)-trailerLen])
	}
	f.Fuzz(func(t *testing.T, nParts uint8, ipcSection []byte) {
		blob := seal("fuzz", int(nParts), ipcSection)
		for _, alloc := range []bool{true, false} {
			func() {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				var opID string
				var parts []operator.KeyGroupState
				var err error
				if alloc {
					opID, parts, err = DecodeAll(blob, mem)
				} else {
					opID, parts, err = DecodeAllShared(blob)
				}
				if err != nil {
					if !errors.Is(err, ErrCorrupt) {
						t.Fatalf("error %v does not wrap ErrCorrupt", err)
					}
					return
				}
				defer operator.ReleaseStates(parts)
				if len(parts) != int(nParts) {
					t.Fatalf("%d parts decoded, header names %d", len(parts), nParts)
				}
				if opID != "fuzz" {
					t.Fatalf("operator id %q", opID)
				}
			}()
		}
	})
}

// seal frames ipcSection as a blob of nParts key groups (0..nParts-1) with
// a correct checksum.
func seal(opID string, nParts int, ipcSection []byte) []byte {
	var b []byte
	b = append(b, magic[:]...)
	b = binary.LittleEndian.AppendUint16(b, FormatVersion)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(opID)))
	b = binary.LittleEndian.AppendUint32(b, uint32(nParts))
	b = append(b, opID...)
	for kg := range nParts {
		b = binary.LittleEndian.AppendUint16(b, uint16(kg))
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(ipcSection)))
	b = append(b, ipcSection...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}
