package runrecord

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// FuzzDecodeRunRecord: any bytes decode to a record or to
// ErrDamaged, never a panic or another error; a decoded record
// encodes and decodes back to itself. The seed corpus is in
// testdata/fuzz/FuzzDecodeRunRecord (a current record, an older plain one,
// damaged ones).
func FuzzDecodeRunRecord(f *testing.F) {
	rec := testRecord()
	rec.Started = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	good, err := Encode(rec)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("error %v does not wrap ErrDamaged", err)
			}
			return
		}
		if r.RunID == "" {
			t.Fatal("decoded a record without a run id")
		}
		again, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", r, r2)
		}
	})
}
