package storage

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestTrailerLayout(t *testing.T) {
	payload := []byte("abc")
	tr := makeTrailer(payload)
	if string(tr[12:]) != "RWD1" {
		t.Fatalf("magic = %q", tr[12:])
	}
	if !bytes.Equal(tr[0:8], []byte{3, 0, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("length field = %x, want 3 little-endian", tr[0:8])
	}
	// CRC32C("abc") = 0x364b3fb7, stored little-endian.
	if !bytes.Equal(tr[8:12], []byte{0xb7, 0x3f, 0x4b, 0x36}) {
		t.Fatalf("crc field = %x, want b73f4b36", tr[8:12])
	}
	got, err := verifyStored(append(payload, tr[:]...))
	if err != nil || string(got) != "abc" {
		t.Fatalf("verifyStored = %q, %v", got, err)
	}
}

func FuzzVerifyStored(f *testing.F) {
	tr := makeTrailer([]byte("seed"))
	f.Add(append([]byte("seed"), tr[:]...))
	f.Add([]byte("short"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		payload, err := verifyStored(raw)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// Accepted: raw must be exactly payload + its own trailer.
		tr := makeTrailer(payload)
		if string(raw) != string(payload)+string(tr[:]) {
			t.Fatalf("accepted %x which is not payload+trailer", raw)
		}
	})
}

// TestTrailerReaderSeek: the PUT body must rewind so a request minio-go
// retries sends the whole object again.
func TestTrailerReaderSeek(t *testing.T) {
	payload := []byte("0123456789")
	r := &trailerReader{payload: payload, trailer: makeTrailer(payload)}
	first, err := io.ReadAll(io.LimitReader(r, 13))
	if err != nil || len(first) != 13 {
		t.Fatalf("partial read: %d, %v", len(first), err)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifyStored(all); err != nil || len(all) != len(payload)+trailerSize {
		t.Fatalf("re-read after Seek: %d bytes, verify %v", len(all), err)
	}
	// Tiny reads cross the payload/trailer boundary correctly.
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	one := make([]byte, 3)
	for {
		n, err := r.Read(one)
		buf.Write(one[:n])
		if err == io.EOF {
			break
		}
	}
	if !bytes.Equal(buf.Bytes(), all) {
		t.Fatal("3-byte reads produce different bytes")
	}
	if n, err := r.Seek(-trailerSize, io.SeekEnd); err != nil || n != int64(len(payload)) {
		t.Fatalf("Seek from end = %d, %v", n, err)
	}
	raw := &trailerReader{payload: payload, noTrailer: true}
	if b, _ := io.ReadAll(raw); !bytes.Equal(b, payload) {
		t.Fatalf("noTrailer reader gave %q", b)
	}
}
