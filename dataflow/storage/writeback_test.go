package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// writeStreaming splits the payload into writeback chunks and writes the
// last one together with the trailer; every split must give back exactly
// payload + trailer.
func TestWriteStreamingBoundaries(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, overlapCRC - 1, overlapCRC, writebackChunk - 1, writebackChunk, writebackChunk + 1, 3*writebackChunk + 7, 4 * writebackChunk} {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i*7 + i>>9)
		}
		for _, withTrailer := range []bool{false, true} {
			p := filepath.Join(dir, "f")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			var trailer func() []byte
			want := payload
			if withTrailer {
				tr := makeTrailer(payload)
				calls := 0
				trailer = func() []byte {
					if calls++; calls > 1 {
						t.Fatalf("n=%d: trailer asked for %d times", n, calls)
					}
					return tr[:]
				}
				want = append(bytes.Clone(payload), tr[:]...)
			}
			if err := writeStreaming(f, payload, trailer); err != nil {
				t.Fatalf("n=%d trailer=%v: %v", n, withTrailer, err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("n=%d trailer=%v: file has %d bytes, want %d (or content differs)", n, withTrailer, len(got), len(want))
			}
		}
	}
}
