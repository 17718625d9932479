package sink

import (
	"fmt"
	"reflect"
	"testing"
)

// The journal's decoders read what durable storage returns; the store's
// checksum catches damage, so what reaches them is well-formed bytes that
// are not necessarily an entry (another version, a hand edit). They must
// reject those with an error, never panic, and what they accept must
// survive a round trip.

func FuzzDecodeStagedEntry(f *testing.F) {
	good := stagedEntry{File: "e3-s1-a2-p0.parquet", Epoch: 3, Subtask: 1, Attempt: 2, Part: 0, Rows: 10, Size: 900, CRC32C: 7}
	f.Add(good.File, encodeStagedEntry(good))
	f.Add("e0-s0-a0-p0.csv", []byte(`{"v":1,"file":"e0-s0-a0-p0.csv","epoch":0,"subtask":0,"attempt":0,"part":0,"rows":1,"size":1,"crc32c":0}`))
	f.Add("e1-s0-a0-p0.csv", []byte(`{"v":1,"file":"e1-s0-a0-p0.csv","epoch":2}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		e, err := decodeStagedEntry(name, data)
		if err != nil {
			return
		}
		if f, ok := parseStaged(e.File); !ok || e.File != name || f != e.file() || e.Rows <= 0 || e.Size <= 0 {
			t.Fatalf("accepted an inconsistent entry %+v for %q", e, name)
		}
		again, err := decodeStagedEntry(name, encodeStagedEntry(e))
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("round trip of %+v: %+v, %v", e, again, err)
		}
	})
}

func FuzzDecodeStoreRecord(f *testing.F) {
	f.Add(encodeStoreRecord(storeRecord{StoreID: "0123456789abcdef0123456789abcdef", Rows: 5}))
	f.Add([]byte(`{"v":1,"store_id":"0123456789ABCDEF0123456789abcdef","rows":5}`))
	f.Add([]byte(`{"v":1,"store_id":"0123456789abcdef0123456789abcdef","rows":-1}`))
	f.Add([]byte(`{"v":2,"store_id":"0123456789abcdef0123456789abcdef","rows":5,"log_seq":7}`))
	f.Add([]byte(`{"v":2,"store_id":"0123456789abcdef0123456789abcdef","rows":5,"log_seq":-7}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeStoreRecord(data)
		if err != nil {
			return
		}
		if !validStoreID(r.StoreID) || r.Rows < 0 || r.LogSeq < 0 {
			t.Fatalf("accepted %+v", r)
		}
		again, err := decodeStoreRecord(encodeStoreRecord(r))
		if err != nil || again != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
		}
	})
}

func FuzzDecodeAppendRecord(f *testing.F) {
	name := "00000000000000000003-0123456789abcdef.json"
	good := appendRecord{Epoch: 3, Files: []appendFile{{File: "part-s1-a0-000002.parquet", Rows: 10, Size: 900, CRC32C: 7}}}
	f.Add(name, encodeAppendRecord(good))
	f.Add(name, []byte(`{"v":1,"epoch":4,"files":[{"file":"part-s1-a0-000002.csv","rows":1,"size":1,"crc32c":0}]}`))
	f.Add("x.json", []byte(`{"v":1,"epoch":0,"files":[]}`))
	f.Add(name, []byte(`{"v":2,"epoch":3,"files":[],"in_progress":[{"file":"_inprogress/part-s0-a1-000004.csv","bytes":56,"rows":1,"crc32c":9}]}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		r, err := decodeAppendRecord(name, data)
		if err != nil {
			return
		}
		m := appendRecordRE.FindStringSubmatch(name)
		if m == nil || fmt.Sprintf("%020d", r.Epoch) != m[1] || len(r.Files)+len(r.InProgress) == 0 {
			t.Fatalf("accepted an inconsistent record %+v for %q", r, name)
		}
		for _, af := range r.Files {
			if !appendNameRE.MatchString(af.File) || af.Rows < 0 || af.Size <= 0 {
				t.Fatalf("accepted entry %+v", af)
			}
		}
		for _, e := range r.InProgress {
			if !inProgressNameRE.MatchString(e.File) || e.Rows < 0 || e.Bytes < segHeader {
				t.Fatalf("accepted in-progress entry %+v", e)
			}
		}
		again, err := decodeAppendRecord(name, encodeAppendRecord(r))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
		}
	})
}
