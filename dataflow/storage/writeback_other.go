//go:build !linux

package storage

import "os"

// Writeback is a no-op where there is no sync_file_range: the final
// fsync does all the work.
func Writeback(f *os.File, off, n int64, wait bool) {}

// writeTwo writes a then b to f.
func writeTwo(f *os.File, a, b []byte) error {
	if _, err := f.Write(a); err != nil {
		return err
	}
	_, err := f.Write(b)
	return err
}
