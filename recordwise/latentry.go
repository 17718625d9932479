package recordwise

import "time"

// latEntry is a group of rows handed over by a source at the same time:
// when they become visible at the sink, each one's latency is
// visibleAt - born.
type latEntry struct {
	born time.Time
	rows int64
}

// splitLat appends to dst the hand-over times of n rows derived from input
// rows with the given births, in proportion to the births' row counts (an
// operator's output rows are attributed to its input rows evenly).
func splitLat(dst, births []latEntry, n int64) []latEntry {
	if n <= 0 || len(births) == 0 {
		return dst
	}
	add := func(born time.Time, k int64) {
		if l := len(dst); l > 0 && dst[l-1].born.Equal(born) {
			dst[l-1].rows += k
		} else {
			dst = append(dst, latEntry{born: born, rows: k})
		}
	}
	var total int64
	for _, b := range births {
		total += b.rows
	}
	if len(births) == 1 || total <= 0 {
		add(births[0].born, n)
		return dst
	}
	var given int64
	for i, b := range births {
		k := n * b.rows / total
		if i == len(births)-1 {
			k = n - given
		}
		given += k
		if k > 0 {
			add(b.born, k)
		}
	}
	return dst
}
