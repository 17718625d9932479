package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteBehindWritesEverything: whatever the sizes of the writes and
// however they fall across writeback chunks, the file holds exactly what
// was written, and the writer reports every byte.
func TestWriteBehindWritesEverything(t *testing.T) {
	dir := t.TempDir()
	for _, step := range []int{1 << 10, writebackChunk - 1, writebackChunk, writebackChunk + 3, 3 * writebackChunk} {
		payload := make([]byte, 3*writebackChunk+11)
		for i := range payload {
			payload[i] = byte(i*13 + i>>11)
		}
		p := filepath.Join(dir, "f")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w := NewWriteBehind(f)
		for off := 0; off < len(payload); off += step {
			end := min(off+step, len(payload))
			if n, err := w.Write(payload[off:end]); err != nil || n != end-off {
				t.Fatalf("step %d: write at %d: %d bytes, %v", step, off, n, err)
			}
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("step %d: the file holds %d bytes, not the %d written", step, len(got), len(payload))
		}
	}
}
