package sink

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
)

// A fold gathers acknowledged log frames for the applier (idemapply.go)
// and keeps, per write key, the row that wins: the greatest version and,
// of equal versions, the last in log order, as applying the rows one
// after another would leave. The applier folds frames as they arrive, so
// the work per row (a map update) is spread over the interval instead of
// landing as one sort of every row when a run is written; the run's sort
// then orders one row per changed key. A job that changes the same keys
// again and again (keyed-count over 100 k keys) so sorts and writes each
// key once per run, however many times it changed.
type fold struct {
	keyLen, rowLen, verOff int
	frames                 []logChunk // folded, in log order
	bytes                  int        // of frames' rows
	// The winner of each key, as its place: frame in the high 24 bits,
	// row in the low 40 (so ordering by place is log order). Keys of at
	// most 16 bytes (every built-in job's) are two integers; longer ones
	// are strings.
	short map[[2]uint64]uint64
	long  map[string]uint64
}

func newFold(keyLen, rowLen, verOff int) *fold {
	return &fold{keyLen: keyLen, rowLen: rowLen, verOff: verOff, short: map[[2]uint64]uint64{}, long: map[string]uint64{}}
}

func (f *fold) row(at uint64) []byte {
	o := int(at&(1<<40-1)) * f.rowLen
	return f.frames[at>>40].rows[o : o+f.rowLen : o+f.rowLen]
}

func (f *fold) ver(row []byte) int64 { return int64(binary.BigEndian.Uint64(row[f.verOff:])) }

// shortKey is the first 16 bytes of a row's key as two integers (the
// second 0 for an 8-byte key): their order is the bytes' order.
func (f *fold) shortKey(row []byte) [2]uint64 {
	k := [2]uint64{binary.BigEndian.Uint64(row)}
	if f.keyLen > 8 {
		k[1] = binary.BigEndian.Uint64(row[8:])
	}
	return k
}

// add folds the next frame in log order.
func (f *fold) add(c logChunk) {
	ci := uint64(len(f.frames))
	f.frames = append(f.frames, c)
	f.bytes += len(c.rows)
	for r := range len(c.rows) / f.rowLen {
		at := ci<<40 | uint64(r)
		row := f.row(at)
		if f.keyLen <= 16 {
			k := f.shortKey(row)
			if old, ok := f.short[k]; !ok || f.ver(row) >= f.ver(f.row(old)) {
				f.short[k] = at
			}
			continue
		}
		k := string(row[:f.keyLen])
		if old, ok := f.long[k]; !ok || f.ver(row) >= f.ver(f.row(old)) {
			f.long[k] = at
		}
	}
}

func (f *fold) empty() bool { return len(f.frames) == 0 }

// lastSeq is the number of the newest frame folded.
func (f *fold) lastSeq() int64 { return f.frames[len(f.frames)-1].seq }

// each hands the winners to emit in key order.
func (f *fold) each(emit func([]byte) error) error {
	if f.keyLen <= 16 {
		type entry struct {
			k  [2]uint64
			at uint64
		}
		es := make([]entry, 0, len(f.short))
		for k, at := range f.short {
			es = append(es, entry{k, at})
		}
		slices.SortFunc(es, func(a, b entry) int {
			if c := cmp.Compare(a.k[0], b.k[0]); c != 0 {
				return c
			}
			return cmp.Compare(a.k[1], b.k[1])
		})
		for _, e := range es {
			if err := emit(f.row(e.at)); err != nil {
				return err
			}
		}
		return nil
	}
	keys := make([]string, 0, len(f.long))
	for k := range f.long {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	for _, k := range keys {
		if err := emit(f.row(f.long[k])); err != nil {
			return err
		}
	}
	return nil
}

// reset empties the fold for the next run, keeping its maps' room.
func (f *fold) reset() {
	clear(f.short)
	clear(f.long)
	f.frames, f.bytes = nil, 0
}
