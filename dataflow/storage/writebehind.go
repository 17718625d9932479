package storage

import "os"

// WriteBehind is an io.Writer over a file being written for a later
// fsync that starts the writeback of every writebackChunk as soon as it
// is written (startWriteback), as Put does. A large file written in the
// background (an append sink's roll, a store's merged run) then reaches
// the device as it is produced instead of as one burst at its fsync, a
// burst that a small fsync on the same disk (a sink's flush) waits
// behind. It changes no guarantee: the caller's fsync makes the file
// durable.
type WriteBehind struct {
	f          *os.File
	off, start int64
}

// NewWriteBehind writes to f, a new file (its writes start at offset 0).
func NewWriteBehind(f *os.File) *WriteBehind { return &WriteBehind{f: f} }

func (w *WriteBehind) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.start >= writebackChunk {
		startWriteback(w.f, w.start, w.off-w.start)
		w.start = w.off
	}
	return n, err
}
