package run

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// FuzzDecodeRunRecord: any bytes decode to a record or to
// ErrRunRecordDamaged, never a panic or another error; a decoded record
// encodes and decodes back to itself. The seed corpus is in
// testdata/fuzz/FuzzDecodeRunRecord (a current record, an older plain one,
// damaged ones).
func FuzzDecodeRunRecord(f *testing.F) {
	cfg := resumeConfig()
	rec := RecordOf(cfg, "file:///st", "")
	rec.Started = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	good, err := EncodeRunRecord(rec)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRunRecord(b)
		if err != nil {
			if !errors.Is(err, ErrRunRecordDamaged) {
				t.Fatalf("error %v does not wrap ErrRunRecordDamaged", err)
			}
			return
		}
		if r.RunID == "" {
			t.Fatal("decoded a record without a run id")
		}
		again, err := EncodeRunRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := DecodeRunRecord(again)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", r, r2)
		}
	})
}
