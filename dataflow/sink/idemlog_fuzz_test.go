package sink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadIdemLog: any bytes as the idempotent store's log file are read
// as whole, numbered frames of whole rows, or refused with an error;
// never a panic, and never a frame the file does not hold as written.
func FuzzReadIdemLog(f *testing.F) {
	const rowLen = 24
	id := strings.Repeat("a", 32)
	// A log the writer made: two frames of rows.
	dir := f.TempDir()
	l := &idemLog{dir: dir, id: id, next: 7}
	if err := l.create(); err != nil {
		f.Fatal(err)
	}
	for _, rows := range []int{1, 3} {
		frame := make([]byte, idemFrameHdrLen+rows*rowLen)
		for i := idemFrameHdrLen; i < len(frame); i++ {
			frame[i] = byte(i)
		}
		if _, err := l.append(frame); err != nil {
			f.Fatal(err)
		}
	}
	if err := l.close(); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, IdempotentLog))
	if err != nil {
		f.Fatal(err)
	}
	chunks, first, _, err := readIdemLog(filepath.Join(dir, IdempotentLog), "the seed's store", id, rowLen, false)
	if err != nil || len(chunks) != 2 || first != 7 {
		f.Fatalf("the writer's own log reads as %d frames from %d (%v), want 2 from 7", len(chunks), first, err)
	}
	f.Add(good, true)
	f.Add(good, false)
	f.Add(good[:len(good)-5], true)
	f.Add(good[:idemLogHeaderLen], false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, b []byte, last bool) {
		p := filepath.Join(t.TempDir(), IdempotentLog)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		chunks, first, _, err := readIdemLog(p, "the fuzzed store", id, rowLen, last)
		if err != nil {
			return
		}
		for i, c := range chunks {
			if c.seq != first+int64(i) {
				t.Fatalf("frame %d is number %d, want %d", i, c.seq, first+int64(i))
			}
			if len(c.rows) == 0 || len(c.rows)%rowLen != 0 {
				t.Fatalf("frame %d holds %d bytes, not whole rows of %d", i, len(c.rows), rowLen)
			}
		}
	})
}
