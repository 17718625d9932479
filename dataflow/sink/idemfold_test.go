package sink

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
)

// TestFoldKeepsWhatApplyingInOrderLeaves: a fold of random frames, with
// keys repeated within and across frames and versions that go up, down
// and repeat, hands over one row per key in key order, and each is the
// row a store applying every row in log order (greater or equal version
// replaces) would keep. Keys of 8, 16 and 24 bytes take the fold's three
// paths (one integer, two, a string).
func TestFoldKeepsWhatApplyingInOrderLeaves(t *testing.T) {
	r, seed := newRand(t)
	for _, keyLen := range []int{8, 16, 24} {
		const ncols = 3 // version, payload, row number (tells equal rows apart)
		rowLen := keyLen + 8*ncols + rowSumLen
		verOff := keyLen
		f := newFold(keyLen, rowLen, verOff)
		want := map[string][]byte{}
		seq := int64(7)
		for range 1 + r.IntN(20) {
			rows := make([]byte, 0, 100*rowLen)
			for i := range 1 + r.IntN(100) {
				row := make([]byte, rowLen)
				for o := 0; o < keyLen; o += 8 {
					binary.BigEndian.PutUint64(row[o:], uint64(r.IntN(5)))
				}
				binary.BigEndian.PutUint64(row[verOff:], uint64(r.IntN(4)))
				binary.BigEndian.PutUint64(row[verOff+16:], uint64(seq<<20|int64(i)))
				k := string(row[:keyLen])
				if old, ok := want[k]; !ok || binary.BigEndian.Uint64(row[verOff:]) >= binary.BigEndian.Uint64(old[verOff:]) {
					want[k] = row
				}
				rows = append(rows, row...)
			}
			f.add(logChunk{seq: seq, rows: rows})
			seq++
		}
		if got := f.lastSeq(); got != seq-1 {
			t.Fatalf("key of %d bytes: lastSeq %d, want %d (seed %d; replay: REWIND_TEST_SEED=%d go test -run %s ./dataflow/sink/)", keyLen, got, seq-1, seed, seed, t.Name())
		}
		var got [][]byte
		must(t, f.each(func(row []byte) error { got = append(got, slices.Clone(row)); return nil }), "each")
		if len(got) != len(want) {
			t.Fatalf("key of %d bytes: %d rows, want one per key, %d (seed %d; replay: REWIND_TEST_SEED=%d go test -run %s ./dataflow/sink/)", keyLen, len(got), len(want), seed, seed, t.Name())
		}
		for i, row := range got {
			if i > 0 && bytes.Compare(got[i-1][:keyLen], row[:keyLen]) >= 0 {
				t.Fatalf("key of %d bytes: row %d is out of key order (seed %d; replay: REWIND_TEST_SEED=%d go test -run %s ./dataflow/sink/)", keyLen, i, seed, seed, t.Name())
			}
			if w := want[string(row[:keyLen])]; !bytes.Equal(w, row) {
				t.Fatalf("key of %d bytes: key %x kept %x, want %x (seed %d; replay: REWIND_TEST_SEED=%d go test -run %s ./dataflow/sink/)", keyLen, row[:keyLen], row, w, seed, seed, t.Name())
			}
		}
		f.reset()
		if !f.empty() || f.bytes != 0 || len(f.short)+len(f.long) != 0 {
			t.Fatalf("key of %d bytes: reset left %d frames, %d bytes, %d keys", keyLen, len(f.frames), f.bytes, len(f.short)+len(f.long))
		}
	}
}
