//go:build !linux

package storage

import "os"

// startWriteback is a no-op where there is no sync_file_range: the final
// fsync does all the work.
func startWriteback(f *os.File, off, n int64) {}

// writeTwo writes a then b to f.
func writeTwo(f *os.File, a, b []byte) error {
	if _, err := f.Write(a); err != nil {
		return err
	}
	_, err := f.Write(b)
	return err
}
