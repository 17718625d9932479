package diskphase

import (
	"bytes"
	"encoding/json"
	"errors"
	rtmetrics "runtime/metrics"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/runtest"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
)

// FuzzNamesParse: a listed name is taken as one of the run's records only
// when it is exactly the name the executor writes for that record.
func FuzzNamesParse(f *testing.F) {
	n := newNames("etl", "r1")
	for _, s := range []string{n.runPlan(), n.coord(3), n.jobPlan(0), n.success(12),
		n.ledger(UnitID{Job: 2, Kind: kindMap, Index: 4}), n.ledger(UnitID{Job: 2, Kind: kindReduce, Index: 1}),
		n.published(1, 7), n.mapFile(0, 1, 2, 3, 0), n.mapFile(0, 1, 2, 3, 17), n.mapOutFile(4, 0, 1, 2),
		n.root + "j000000/map/s00001/a2/p00003.parquet", n.root + "j000000/map/s1/a2/p00003.c00001.parquet",
		n.root + "coord/c+1", n.root + "j000001/ledger/m1.json"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p := n.parse(name)
		var want string
		switch p.kind {
		case objOther:
			return
		case objRunPlan:
			want = n.runPlan()
		case objCoord:
			want = n.coord(p.num)
		case objJobPlan:
			want = n.jobPlan(p.job)
		case objSuccess:
			want = n.success(p.job)
		case objPublished:
			want = n.published(p.job, p.num)
		case objLedger:
			if p.unit.Job != p.job {
				t.Fatalf("%q: ledger of job %d in job %d", name, p.unit.Job, p.job)
			}
			want = n.ledger(p.unit)
		case objMapFile:
			if f := p.file; f.part < 0 {
				want = n.mapOutFile(p.job, f.split, f.attempt, f.chunk)
			} else {
				want = n.mapFile(p.job, f.split, f.attempt, f.part, f.chunk)
			}
		}
		if want != name {
			t.Fatalf("%q parsed as %+v, whose name is %q", name, p, want)
		}
	})
}

// FuzzLedgerJSON: the run plan, job plans, ledger entries and commit
// markers that decode encode to records that decode to the same encoding.
func FuzzLedgerJSON(f *testing.F) {
	for _, v := range []any{
		RunPlan{Job: "etl", Inputs: map[string]string{"in": "gen:records=10"}, Splits: []string{"in/p0"}, Parallelism: 2, Mode: "records", PerSplit: 5, SinkMode: "append"},
		JobPlan{Job: 1, Starts: []int64{5}, EOF: []bool{false}, Ends: []int64{-1}, Tracker: eventtime.State{MaxTS: []int64{4}, Done: []bool{false}}},
		MapEntry{Attempt: 1, Start: 5, End: 10, Records: 5, MaxTS: 9, Files: []FileRef{{Name: "x.parquet", Rows: 5, Bytes: 100, CRC: 77}, {}}},
		MapEntry{Attempt: 1, Start: 5, End: 10, Records: 5, MaxTS: 9, Files: []FileRef{{Name: "x.c0.parquet", Rows: 3, Bytes: 90, CRC: 7,
			More: []FileRef{{Name: "x.c1.parquet", Rows: 2, Bytes: 80, CRC: 8}}}}},
		ReduceEntry{Attempt: 0, RowsIn: 5, Out: FileRef{Name: "o", Rows: 2}, State: &FileRef{Name: "s", Rows: 1}},
		JobCommit{Job: 1, Ends: []int64{10}, EOF: []bool{true}, Records: 5, RowsOut: 2},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		jsonRoundTrip(t, data, &RunPlan{}, &RunPlan{})
		jsonRoundTrip(t, data, &JobPlan{}, &JobPlan{})
		jsonRoundTrip(t, data, &MapEntry{}, &MapEntry{})
		jsonRoundTrip(t, data, &ReduceEntry{}, &ReduceEntry{})
		jsonRoundTrip(t, data, &JobCommit{}, &JobCommit{})
		var p RunPlan
		if json.Unmarshal(data, &p) == nil && !p.equal(p) {
			t.Fatal("a run plan differs from itself")
		}
	})
}

// jsonRoundTrip: when data decodes into v, v's encoding decodes into back
// and back encodes the same (encodings are compared: JSON does not tell a
// nil slice from an empty one).
func jsonRoundTrip[T any](t *testing.T, data []byte, v, back *T) {
	if json.Unmarshal(data, v) != nil {
		return
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("decoded %T does not encode: %v", v, err)
	}
	if err := json.Unmarshal(enc, back); err != nil {
		t.Fatalf("re-encoded %T does not decode: %v", v, err)
	}
	if again, _ := json.Marshal(back); !bytes.Equal(enc, again) {
		t.Fatalf("%T changed in a round trip:\n %s\n %s", v, enc, again)
	}
}

// FuzzDecodeTable: bytes that decode as a table of columns a, b encode
// again to a table that decodes to the same rows; anything else is
// errBadTable. Never a panic, a leak, or an allocation sized by a row count
// the file cannot hold.
func FuzzDecodeTable(f *testing.F) {
	names := []string{"a", "b"}
	for _, c := range []Compression{CompressionNone, CompressionSnappy, CompressionZstd} {
		for _, rows := range []int{0, 1, 40} {
			cols := [][]int64{make([]int64, rows), make([]int64, rows)}
			for i := range rows {
				cols[0][i], cols[1][i] = int64(i*i-3), int64(-i)
			}
			var buf bytes.Buffer
			if err := encodeTable(&buf, names, cols, encodeOptions{compression: c}); err != nil {
				f.Fatal(err)
			}
			f.Add(buf.Bytes())
		}
	}
	schema := int64Schema(names)
	f.Fuzz(func(t *testing.T, data []byte) {
		checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer checked.AssertSize(t, 0)
		alloc := runtest.BoundedAlloc{Allocator: checked, T: t, Limit: 8*len(data) + 4096}
		before := heapAllocated()
		cols, n, err := decodeColumns(data, schema, alloc)
		if a := heapAllocated() - before; a > 64<<20+1024*uint64(len(data)) {
			t.Fatalf("decoding a %d-byte table allocated %d bytes", len(data), a)
		}
		if err != nil {
			if !errors.Is(err, errBadTable) {
				t.Fatalf("error %v does not wrap errBadTable", err)
			}
			return
		}
		if int(n) != len(cols[0]) {
			t.Fatalf("decodeTable counted %d rows, handed over %d", n, len(cols[0]))
		}
		var buf bytes.Buffer
		if err := encodeTable(&buf, names, cols, encodeOptions{}); err != nil {
			t.Fatalf("decoded rows do not encode: %v", err)
		}
		back, _, err := decodeColumns(buf.Bytes(), schema, checked)
		if err != nil {
			t.Fatalf("re-encoded table does not decode: %v", err)
		}
		for i := range cols {
			if !slices.Equal(cols[i], back[i]) {
				t.Fatalf("column %s changed in a round trip", names[i])
			}
		}
	})
}

// decodeColumns decodes a table into plain column slices.
func decodeColumns(data []byte, schema *arrow.Schema, alloc memory.Allocator) ([][]int64, int64, error) {
	cols := make([][]int64, schema.NumFields())
	for i := range cols {
		cols[i] = []int64{}
	}
	n, err := decodeTable(data, schema, alloc, func(b arrow.RecordBatch) error {
		for i := range cols {
			cols[i] = append(cols[i], b.Column(i).(*array.Int64).Int64Values()...)
		}
		return nil
	})
	return cols, n, err
}

// heapAllocated is the bytes the Go heap has handed out so far: parquet-go
// allocates with make, beyond what an arrow allocator can bound.
func heapAllocated() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}
