package microbatch

// A patch group's columns live outside Go's heap once they are large
// (package offheap), as the operator's tables and the group's index do.
// They are the worker's copy of the stage's state and last as long as the
// run; on the heap the collector's slack counted them twice (at 4 M keys,
// 71 MB of columns set about 140 MB of the peak).

import (
	"github.com/rewind-engine/rewind/dataflow/offheap"
)

// minPatchCap is the least capacity a column grows to: small groups stay
// on the heap (offheap.MinBytes) and should not grow one row at a time.
const minPatchCap = 256

// emptyPatchGroup is a group of ncols empty columns.
func emptyPatchGroup(ncols int) *patchGroup {
	return &patchGroup{cols: make([][]int64, ncols), mem: make([]*offheap.Array[int64], ncols)}
}

// cloneColumn copies v into an array of its own.
func cloneColumn(v []int64) ([]int64, *offheap.Array[int64]) {
	a := offheap.New[int64](len(v))
	copy(a.S, v)
	return a.S, a
}

// appendRow appends row r of vals (one slice per column) to the group.
func (g *patchGroup) appendRow(vals [][]int64, r int) {
	for c, v := range vals {
		col := g.cols[c]
		if len(col) == cap(col) {
			g.grow(c)
			col = g.cols[c]
		}
		col = col[:len(col)+1]
		col[len(col)-1] = v[r]
		g.cols[c] = col
	}
}

// grow moves column c to an array a quarter larger (as append grows a
// large slice: a mapping's pages are resident as soon as it is made, so
// doubling would hold up to twice the column).
func (g *patchGroup) grow(c int) {
	old := g.cols[c]
	a := offheap.New[int64](max(minPatchCap, cap(old)+cap(old)/4))
	copy(a.S, old)
	g.mem[c].Free()
	g.mem[c], g.cols[c] = a, a.S[:len(old)]
}

// free returns the group's memory; no batch of it (batch) may be in use.
func (g *patchGroup) free() {
	if g == nil {
		return
	}
	for c, a := range g.mem {
		a.Free()
		g.mem[c] = nil
	}
	g.cols = nil
	if g.index != nil {
		g.index.mem.Free()
		g.index = nil
	}
}
