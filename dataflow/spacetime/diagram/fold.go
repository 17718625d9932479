package diagram

import (
	"sort"
	"time"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// folding maps time onto the text view's columns. Every column is step
// long except folded ones, which stand for a quiet stretch (nothing but
// records moving) however long: so the moments a protocol step happens
// get a column each where a uniform scale would pile them into one.
type folding struct {
	step   time.Duration
	starts []time.Duration // each column's first moment
	folded []bool
}

// quietRun is the longest run of quiet columns kept as it is; a longer one
// keeps its first and last column and folds the rest into one.
const quietRun = 3

// fold finds the finest step whose folded columns fit in cols.
func fold(m *model, cols int) folding {
	step := niceStep(m.end / time.Duration(cols*20))
	for {
		n := int(m.end/step) + 1
		if n <= cols {
			return uniform(step, n)
		}
		active := make([]bool, n)
		for _, e := range m.events {
			if e.Kind != spacetime.Batch {
				active[min(max(int(e.T/step), 0), n-1)] = true
			}
		}
		var f folding
		f.step = step
		for i := 0; i < n && len(f.starts) <= cols; {
			if active[i] {
				f.add(i, step, false)
				i++
				continue
			}
			j := i
			for j < n && !active[j] {
				j++
			}
			if j-i <= quietRun {
				for k := i; k < j; k++ {
					f.add(k, step, false)
				}
			} else {
				f.add(i, step, false)
				f.add(i+1, step, true)
				f.add(j-1, step, false)
			}
			i = j
		}
		if len(f.starts) <= cols {
			return f
		}
		step = niceStep(step + 1)
	}
}

func uniform(step time.Duration, n int) folding {
	f := folding{step: step}
	for i := range n {
		f.add(i, step, false)
	}
	return f
}

func (f *folding) add(i int, step time.Duration, folded bool) {
	f.starts = append(f.starts, time.Duration(i)*step)
	f.folded = append(f.folded, folded)
}

// col is the column that holds t.
func (f folding) col(t time.Duration) int {
	return max(sort.Search(len(f.starts), func(i int) bool { return f.starts[i] > t })-1, 0)
}
