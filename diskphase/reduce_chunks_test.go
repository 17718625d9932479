package diskphase

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// reduceTestBudget makes reduce units of the small test inputs (150 keys)
// write their state and output in several chunks.
const reduceTestBudget = 16

// TestReduceUnitsWriteChunks: with a small budget a reduce unit writes its
// output and its state table in several chunks; a state chunk ends where
// a key group does (key groups ascend strictly over the chunks), each
// chunk holds at most the budget plus one key group's rows (state) or one
// emitted batch (output), and the next finite job restores the state from
// all of them (the output is the oracle's).
func TestReduceUnitsWriteChunks(t *testing.T) {
	for _, name := range []string{"keyed-count", "windowed-sum", "join"} {
		t.Run(name, func(t *testing.T) {
			outMulti, stateMulti := 0, 0
			sc := &scenario{job: name, inputs: smallInputs(name, 3000, 47), jobRecords: 1000, mode: sink.Transactional,
				chunkRows: reduceTestBudget,
				onTrace: func(ev traceEvent, st storage.Store, x *execution) {
					if ev.Kind != "committed" {
						return
					}
					d, err := x.loadDurable(context.Background())
					if err != nil {
						t.Error(err)
						return
					}
					for u, e := range d.reduces {
						if u.Job != ev.Job {
							continue
						}
						if len(e.Out.chunks()) > 1 {
							outMulti++
						}
						if e.State != nil && len(e.State.chunks()) > 1 {
							stateMulti++
							checkStateChunks(t, st, x, u, *e.State)
						}
					}
				}}
			o := sc.execute(t)
			o.checkOutput(t, name)
			o.checkNoDuplicates(t, name)
			if stateMulti == 0 {
				t.Fatalf("%s: no reduce unit wrote its state in more than one chunk", name)
			}
			if name == "join" && outMulti == 0 {
				t.Fatalf("%s: no reduce unit wrote its output in more than one chunk", name)
			}
		})
	}
}

// checkStateChunks reads every chunk of a state table and checks that its
// key groups ascend strictly from one chunk to the next and that no chunk
// is longer than the budget plus the key group that ends it.
func checkStateChunks(t *testing.T, st storage.Store, x *execution, u UnitID, ref FileRef) {
	t.Helper()
	last := int64(-1)
	for k, c := range ref.chunks() {
		data, err := x.fetch(context.Background(), c, u)
		if err != nil {
			t.Errorf("%s: state chunk %d: %v", u, k, err)
			return
		}
		tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(data), nil, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Errorf("%s: state chunk %s: %v", u, c.Name, err)
			return
		}
		if tbl.Schema().Field(0).Name != kgColumn {
			t.Errorf("%s: state chunk %s: first column %q, want %q", u, c.Name, tbl.Schema().Field(0).Name, kgColumn)
		}
		var kgs []int64
		for _, a := range tbl.Column(0).Data().Chunks() {
			kgs = append(kgs, a.(*array.Int64).Int64Values()...)
		}
		tbl.Release()
		if len(kgs) == 0 || kgs[0] <= last {
			t.Errorf("%s: state chunk %s starts at key group %v after %d: a key group split or out of order", u, c.Name, kgs[:min(1, len(kgs))], last)
			return
		}
		lastGroup := 0
		for i := len(kgs) - 1; i >= 0 && kgs[i] == kgs[len(kgs)-1]; i-- {
			lastGroup++
		}
		if len(kgs)-lastGroup >= reduceTestBudget {
			t.Errorf("%s: state chunk %s holds %d rows before its last key group, the budget is %d", u, c.Name, len(kgs)-lastGroup, reduceTestBudget)
		}
		last = kgs[len(kgs)-1]
	}
}

// TestDamagedStateChunk deletes, truncates or flips a byte of the last
// chunk of the state table job 0 carried into job 1, not its first: job
// 1's reduce unit reports exactly that chunk, job 0's reduce unit runs
// again for its state only, and the output is the oracle's.
func TestDamagedStateChunk(t *testing.T) {
	for _, action := range []string{"delete", "truncate", "flip"} {
		t.Run(action, func(t *testing.T) {
			victim := UnitID{Job: 0, Kind: kindReduce, Index: 0}
			var damaged string
			sc := &scenario{job: "keyed-count", inputs: smallInputs("keyed-count", 3000, 53), jobRecords: 1000, mode: sink.Append,
				chunkRows: reduceTestBudget,
				onTrace: func(ev traceEvent, st storage.Store, x *execution) {
					if damaged != "" || ev.Kind != "committed" || ev.Job != 0 {
						return
					}
					d, err := x.loadDurable(context.Background())
					if err != nil {
						t.Error(err)
						return
					}
					e := d.reduces[victim]
					if e == nil || e.State == nil || len(e.State.More) == 0 {
						t.Errorf("%s's state is not in more than one chunk: %+v", victim, e)
						return
					}
					damaged = e.State.More[len(e.State.More)-1].Name
					damageObject(t, st, damaged, action)
				}}
			o := sc.execute(t)
			if damaged == "" {
				t.Fatalf("%s: no state chunk was damaged", action)
			}
			o.checkOutput(t, action)
			o.checkReruns(t, action)
			o.checkNoDuplicates(t, action)
			a := o.accounting()
			if a.lost[victim] != 1 || len(a.lost) != 1 || a.starts[victim] != 2 {
				t.Fatalf("%s: lost files reported for %v, %s started %d times; want it lost once, started twice", action, a.lost, victim, a.starts[victim])
			}
			reported := ""
			for _, ev := range o.trace {
				if ev.Kind == "lost" {
					reported = ev.Detail
				}
			}
			if reported != damaged {
				t.Fatalf("%s: the reader reported %q, the damaged chunk was %q", action, reported, damaged)
			}
		})
	}
}

// damageObject deletes, truncates or flips a byte of one object.
func damageObject(t testing.TB, st storage.Store, name, action string) {
	ctx := context.Background()
	raw := st.(storage.RawAccess)
	var err error
	switch action {
	case "delete":
		err = st.Delete(ctx, name)
	default:
		var b []byte
		if b, err = raw.RawGet(ctx, name); err == nil {
			if action == "truncate" {
				b = b[:len(b)/2]
			} else {
				b[len(b)/2] ^= 0x40
			}
			err = raw.RawPut(ctx, name, b)
		}
	}
	if err != nil {
		t.Errorf("%s %s: %v", action, name, err)
	}
}
