package state_test

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/operator/optest"
	"github.com/rewind-engine/rewind/dataflow/state"
)

// FuzzApply: whatever script, counts and checksum an edit holds, Apply
// either fails with ErrCorrupt or returns exactly ResultRows rows whose
// checksum is the edit's; it never panics and leaks nothing.
func FuzzApply(f *testing.F) {
	f.Add(uint8(3), uint8(1), uint16(3), uint32(0), []byte{0x05, 0x02, 0x06})
	f.Add(uint8(0), uint8(0), uint16(0), uint32(0), []byte{})
	f.Add(uint8(5), uint8(2), uint16(6), uint32(1), []byte{0x09, 0x0a, 0x04})
	f.Fuzz(func(t *testing.T, nBase, nRows uint8, result uint16, crc uint32, script []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		mk := func(n int, off int64) [][]int64 {
			var rows [][]int64
			for i := 0; i < n; i++ {
				rows = append(rows, []int64{int64(i) + off, 1, 7})
			}
			return rows
		}
		base := optest.Batch(mem, deltaSchema, mk(int(nBase), 0))
		defer base.Release()
		rows := optest.Batch(mem, deltaSchema, mk(int(nRows), 1000))
		defer rows.Release()
		e := state.Edit{KeyGroup: 1, BaseRows: int(nBase), ResultRows: int(result), ResultCRC: crc, Script: script}
		b, err := state.Apply(base, rows, e, 2, mem)
		if err != nil {
			if !errors.Is(err, state.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		defer b.Release()
		if int(b.NumRows()) != e.ResultRows || state.ValuesCRC(b, 2) != crc {
			t.Fatalf("accepted an edit whose result has %d rows (want %d) or another checksum", b.NumRows(), e.ResultRows)
		}
	})
}
