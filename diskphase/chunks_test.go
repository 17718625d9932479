package diskphase

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

const (
	testChunkRows = 200
	testReadBatch = 64
)

// mapEntries reads every map unit's ledger entry of the run.
func mapEntries(t testing.TB, st storage.Store, x *execution) map[UnitID]*MapEntry {
	t.Helper()
	d, err := x.loadDurable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d.maps
}

// TestMapUnitsWriteChunks: with a small chunk budget a map unit writes each
// partition as several chunks while it reads, each named by its number,
// none but a partition's last under the least rows and none past the
// budget by more than one read batch; the reduce units and the commit read
// them all (the output is the oracle's).
func TestMapUnitsWriteChunks(t *testing.T) {
	// join's eight splits read a few hundred records each.
	for name, budget := range map[string]int{"keyed-count": testChunkRows, "join": 64, "etl": testChunkRows} {
		t.Run(name, func(t *testing.T) {
			var entries map[UnitID]*MapEntry
			sc := &scenario{job: name, inputs: smallInputs(name, 3000, 41), mode: sink.Transactional,
				chunkRows: budget, readBatch: testReadBatch,
				onTrace: func(ev traceEvent, st storage.Store, x *execution) {
					if ev.Kind == "committed" {
						entries = mapEntries(t, st, x)
					}
				}}
			o := sc.execute(t)
			o.checkOutput(t, name)
			o.checkNoDuplicates(t, name)
			if len(entries) == 0 {
				t.Fatal("no map unit in the ledger at the commit")
			}
			nparts := sc.parallelism
			if name == "etl" {
				nparts = 1
			}
			least := min(minChunkRows, budget/nparts)
			most := max(budget, least*nparts) + testReadBatch
			multi := 0
			for u, e := range entries {
				for r, f := range e.Files {
					chunks := f.chunks()
					if len(chunks) > 2 {
						multi++
					}
					var rows int64
					for k, c := range chunks {
						p := o.x.names.parse(c.Name)
						want := mapFileName{split: u.Index, attempt: e.Attempt, part: r, chunk: k}
						if name == "etl" {
							want.part = -1
						}
						if p.kind != objMapFile || p.job != u.Job || p.file != want {
							t.Fatalf("%s: chunk %d of partition %d is %q, parsed as %+v, want %+v", u, k, r, c.Name, p, want)
						}
						if c.Rows <= 0 || c.Rows > int64(most) || (k < len(chunks)-1 && c.Rows < int64(least)) {
							t.Fatalf("%s: chunk %s holds %d rows, want %d to %d (the last may hold fewer)", u, c.Name, c.Rows, least, most)
						}
						rows += c.Rows
					}
					if rows != f.totalRows() {
						t.Fatalf("%s: partition %d's chunks hold %d rows, its total says %d", u, r, rows, f.totalRows())
					}
				}
			}
			if multi == 0 {
				t.Fatalf("no map partition was written in more than two chunks: %v", entries)
			}
		})
	}
}

// TestDamagedExtraChunk deletes, truncates or flips a byte of the last
// chunk of a map unit's partition, one that is not its first, once the unit
// is in the ledger: the reader (a reduce unit, or the commit of a map-only
// job) reports exactly that object, only its producer runs again, and the
// output is the oracle's.
func TestDamagedExtraChunk(t *testing.T) {
	for _, action := range []string{"delete", "truncate", "flip"} {
		for _, name := range []string{"keyed-count", "etl"} {
			what := fmt.Sprintf("%s/%s", name, action)
			t.Run(what, func(t *testing.T) {
				victim := UnitID{Job: 0, Kind: kindMap, Index: 1}
				var damaged string
				sc := &scenario{job: name, inputs: smallInputs(name, 3000, 43), mode: sink.Append,
					chunkRows: testChunkRows, readBatch: testReadBatch,
					onTrace: func(ev traceEvent, st storage.Store, x *execution) {
						if damaged != "" || ev.Kind != "recorded" || ev.Unit != victim {
							return
						}
						damaged = damageExtraChunk(t, st, x, victim, action)
					}}
				o := sc.execute(t)
				if damaged == "" {
					t.Fatalf("%s: %s was never recorded with an extra chunk", what, victim)
				}
				o.checkOutput(t, what)
				o.checkReruns(t, what)
				o.checkNoDuplicates(t, what)
				a := o.accounting()
				if a.lost[victim] != 1 || len(a.lost) != 1 || a.starts[victim] != 2 {
					t.Fatalf("%s: lost files reported for %v, the producer started %d times; want %s lost once, started twice",
						what, a.lost, a.starts[victim], victim)
				}
				found := false
				for _, ev := range o.trace {
					if ev.Kind == "lost" {
						found = true
						if ev.Detail != damaged {
							t.Fatalf("%s: the reader reported %q, the damaged chunk was %q", what, ev.Detail, damaged)
						}
					}
				}
				if !found {
					t.Fatalf("%s: no reader reported the damaged chunk %s", what, damaged)
				}
			})
		}
	}
}

// damageExtraChunk damages the last chunk of the first partition of u
// written in more than one, and returns its name ("" when there is none).
func damageExtraChunk(t testing.TB, st storage.Store, x *execution, u UnitID, action string) string {
	ctx := context.Background()
	data, err := st.Get(ctx, x.names.ledger(u))
	if err != nil {
		t.Errorf("reading ledger of %s: %v", u, err)
		return ""
	}
	var e MapEntry
	if err := json.Unmarshal(data, &e); err != nil {
		t.Errorf("ledger of %s: %v", u, err)
		return ""
	}
	for _, f := range e.Files {
		if len(f.More) == 0 {
			continue
		}
		name := f.More[len(f.More)-1].Name
		damageObject(t, st, name, action)
		return name
	}
	return ""
}

// TestLedgerWithoutMoreReadsAsOneChunk: an entry written before chunks
// (no "more") names one object; one with chunks lists them in order and
// counts their rows.
func TestLedgerWithoutMoreReadsAsOneChunk(t *testing.T) {
	var old MapEntry
	if err := json.Unmarshal([]byte(`{"attempt":1,"start":0,"end":10,"records":10,"lost":0,"max_ts":9,"eof":true,
		"files":[{"name":"j/p0.parquet","rows":6,"bytes":100,"crc32c":5},{"rows":0,"bytes":0,"crc32c":0}]}`), &old); err != nil {
		t.Fatal(err)
	}
	if c := old.Files[0].chunks(); len(c) != 1 || c[0].Name != "j/p0.parquet" || old.Files[0].totalRows() != 6 {
		t.Fatalf("an entry without more reads as %+v", c)
	}
	if c := old.Files[1].chunks(); len(c) != 0 {
		t.Fatalf("an empty table reads as %+v", c)
	}
	f := FileRef{Name: "a", Rows: 2, More: []FileRef{{Name: "b", Rows: 3}, {Name: "c", Rows: 4}}}
	got := ""
	for _, c := range f.chunks() {
		if len(c.More) != 0 {
			t.Fatalf("chunk %s carries more", c.Name)
		}
		got += c.Name
	}
	if got != "abc" || f.totalRows() != 9 || !f.names("c") || f.names("d") || f.names("") {
		t.Fatalf("chunks %q, rows %d", got, f.totalRows())
	}
}

// TestEncodeBufsBounded: the free list of encoding buffers keeps at most
// maxInFlight of them, none larger than maxSpareBuf, and hands kept ones
// out before new ones.
func TestEncodeBufsBounded(t *testing.T) {
	l := &bufList{spare: make(chan *bytes.Buffer, maxInFlight)}
	var put []*bytes.Buffer
	for range maxInFlight + 3 {
		b := new(bytes.Buffer)
		b.Grow(1 << 10)
		put = append(put, b)
		l.Put(b)
	}
	big := new(bytes.Buffer)
	big.Grow(maxSpareBuf + 1)
	l.Put(big)
	for i := range maxInFlight {
		if b := l.Get(); b != put[i] {
			t.Fatalf("Get %d returned a buffer that was not kept", i)
		}
	}
	if b := l.Get(); b.Cap() != 0 {
		t.Fatalf("the list kept more than %d buffers (or the one of %d bytes)", maxInFlight, b.Cap())
	}
}
