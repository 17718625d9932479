package state

// The row-sum check of edits (Edit.RowSum).

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
)

// RowHash is row i's share of RowsChecksum: a mix of its position and
// its values in cols but column uniform (-1: none).
func RowHash(cols [][]int64, i, uniform int) uint32 {
	h := uint64(i)*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
	for c, col := range cols {
		if c == uniform {
			continue
		}
		h = (h ^ uint64(col[i])) * 0xbf58476d1ce4e5b9
		h ^= h >> 31
	}
	h *= 0x94d049bb133111eb
	return uint32(h >> 32)
}

// RowsChecksum is the sum of RowHash over b's rows, plus its row count:
// unlike ValuesCRC it can be updated row by row (subtract a row's old
// share, add its new one), and it still depends on every value and its
// position. b's columns must be plain int64.
func RowsChecksum(b arrow.RecordBatch, uniform int) uint32 {
	cols, _ := int64Cols(b)
	return RowsChecksumCols(cols, int(b.NumRows()), uniform)
}

// RowCountShare is what each row adds to RowsChecksum for the row count,
// besides its RowHash.
const RowCountShare uint32 = 0x85ebca6b

// RowsChecksumCols is RowsChecksum of n rows held as columns.
func RowsChecksumCols(cols [][]int64, n, uniform int) uint32 {
	sum := uint32(n) * RowCountShare
	for i := range n {
		sum += RowHash(cols, i, uniform)
	}
	return sum
}

// rowSumInPlace computes the RowsChecksum of an edit's result from the
// base's (baseSum) when the script keeps every copied row at its
// position (every copy starts where the base and the result agree):
// subtract the skipped base rows, add the taken result rows, adjust the
// count. ok is false for any other script.
func rowSumInPlace(bc, oc [][]int64, e Edit, uniform int, baseSum uint32) (uint32, bool) {
	sum := baseSum + uint32(e.ResultRows-e.BaseRows)*RowCountShare
	o, j := 0, 0
	for s := e.Script; len(s) > 0; {
		u, k := binary.Uvarint(s)
		s = s[k:]
		n := int(u >> 2)
		switch u & 3 {
		case opSkip:
			for i := j; i < j+n; i++ {
				sum -= RowHash(bc, i, uniform)
			}
			j += n
		case opCopy:
			if o != j {
				return 0, false
			}
			o, j = o+n, j+n
		case opTake:
			for i := o; i < o+n; i++ {
				sum += RowHash(oc, i, uniform)
			}
			o += n
		}
	}
	return sum, true
}
