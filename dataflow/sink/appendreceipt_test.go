package sink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAppendRecordListsOnlyCoveredEpochs: Record(E) lists the files
// flushed for epochs <= E, and a file flushed for E+1 meanwhile (a sink
// subtask already past the barrier) waits for the next record.
func TestAppendRecordListsOnlyCoveredEpochs(t *testing.T) {
	r, _ := newRand(t)
	g := newGen(r, 500, 1000)
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	s := f.open(Append, CSV)
	defer s.Close()
	attach(t, s, j)
	must(t, s.Recover(-1), "recover")
	w := f.writer(s, 0, 0)
	for _, epoch := range []int64{1, 1, 2} {
		f.write(w, epoch, g.rows(10))
		must(t, w.Flush(epoch), "flush")
	}
	must(t, s.Record(1), "record 1")
	must(t, s.Commit(1), "commit 1")
	names, err := j.list(appendRecordDir)
	must(t, err, "list")
	if len(names) != 1 {
		t.Fatalf("%d records %v after Record(1) and Commit(1), want 1: Commit has nothing left to list", len(names), names)
	}
	b, err := j.get(names[0])
	must(t, err, "get")
	rec, err := decodeAppendRecord(strings.TrimPrefix(names[0], appendRecordDir), b)
	must(t, err, "decode")
	if rec.Epoch != 1 || len(rec.Files) != 2 {
		t.Fatalf("record %+v, want epoch 1 listing the 2 files of epoch 1", rec)
	}
	must(t, s.Record(2), "record 2")
	if names, _ = j.list(appendRecordDir); len(names) != 2 {
		t.Fatalf("%d records after Record(2), want 2", len(names))
	}
	must(t, s.Record(2), "record 2 again")
	if names, _ = j.list(appendRecordDir); len(names) != 2 {
		t.Fatalf("%d records after a second Record(2) with nothing new, want 2 (no Put)", len(names))
	}
}

// TestAppendReceiptAdopted: a writer's receipt handed back to a resumed
// sink checks the files it names (a missing or changed one is refused,
// named) and lists them in the next record.
func TestAppendReceiptAdopted(t *testing.T) {
	for _, damage := range []string{"intact", "deleted", "flipped"} {
		t.Run(damage, func(t *testing.T) {
			r, _ := newRand(t)
			g := newGen(r, 500, 1000)
			f := newFixture(t)
			j := journalFor(t, t.TempDir())
			s := f.open(Append, Parquet)
			attach(t, s, j)
			must(t, s.Recover(-1), "recover")
			w := f.writer(s, 1, 3)
			f.write(w, 4, g.rows(25))
			must(t, w.Flush(4), "flush")
			receipt, err := s.(Receipter).Receipt(w)
			must(t, err, "receipt")
			must(t, w.Close(), "close writer")
			must(t, s.Close(), "close") // killed before Record(4)
			path := filepath.Join(f.dir, "part-s1-a3-000000.parquet")
			switch damage {
			case "deleted":
				must(t, os.Remove(path), "rm")
			case "flipped":
				flipByte(t, path, 100)
			}

			s = f.open(Append, Parquet)
			defer s.Close()
			attach(t, s, j)
			must(t, s.Recover(3), "recover")
			err = s.(Receipter).Adopt(4, receipt)
			if damage != "intact" {
				wantRefusal(t, err, path, "adopt")
				if !strings.Contains(err.Error(), "25 rows") {
					t.Fatalf("refusal %q does not say what the receipt says the file held", err)
				}
				return
			}
			must(t, err, "adopt")
			must(t, s.(Receipter).Adopt(4, receipt), "adopt again")
			must(t, s.Record(4), "record 4")
			names, err := j.list(appendRecordDir)
			must(t, err, "list")
			if len(names) != 1 {
				t.Fatalf("%d records, want 1", len(names))
			}
			b, err := j.get(names[0])
			must(t, err, "get")
			rec, err := decodeAppendRecord(strings.TrimPrefix(names[0], appendRecordDir), b)
			must(t, err, "decode")
			if rec.Epoch != 4 || len(rec.Files) != 1 || rec.Files[0].File != filepath.Base(path) || rec.Files[0].Rows != 25 {
				t.Fatalf("record %+v, want epoch 4 listing %s once, 25 rows", rec, filepath.Base(path))
			}
		})
	}
}

// TestAppendReceiptDamagedRefused: a receipt that does not decode, is
// empty or fails its checksum is refused, not taken as "nothing written".
func TestAppendReceiptDamagedRefused(t *testing.T) {
	f := newFixture(t)
	s := f.open(Append, CSV)
	defer s.Close()
	for _, bad := range []string{`{"v":1,"files":[{"file":"x","rows":1,"size":1}],"crc32c":0}`, `{"v":2,"files":[]}`, `{"v":1`, ``,
		`{"v":1,"files":[{"file":"part-s0-a0-000001.csv","rows":25,"size":901,"crc32c":7}],"crc32c":1}`} {
		if err := s.(Receipter).Adopt(1, []byte(bad)); err == nil || !strings.Contains(err.Error(), "--resume") {
			t.Errorf("adopt %s: %v; want a refusal saying what to do", bad, err)
		}
	}
}

// TestAppendReceiptChangedDigitRefused: a receipt whose row count was
// changed, still valid JSON, fails its checksum.
func TestAppendReceiptChangedDigitRefused(t *testing.T) {
	r, _ := newRand(t)
	g := newGen(r, 500, 1000)
	f := newFixture(t)
	s := f.open(Append, CSV)
	defer s.Close()
	w := f.writer(s, 0, 0)
	f.write(w, 1, g.rows(25))
	must(t, w.Flush(1), "flush")
	receipt, err := s.(Receipter).Receipt(w)
	must(t, err, "receipt")
	must(t, w.Close(), "close writer")
	must(t, s.(Receipter).Adopt(1, receipt), "adopt intact")
	changed := strings.Replace(string(receipt), `"rows":25`, `"rows":26`, 1)
	if changed == string(receipt) {
		t.Fatalf("receipt %s does not say 25 rows", receipt)
	}
	if err := s.(Receipter).Adopt(1, []byte(changed)); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("adopt %s: %v; want it refused as damaged", changed, err)
	}
}
