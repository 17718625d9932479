//go:build linux

package storage

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Writeback asks the kernel to start writing f's dirty pages in
// [off, off+n) to the device; with wait it returns once they are there
// (on the device, not through its cache). It only paces the device:
// durability still comes from fsync, so a failure (say, a file system
// without support) is ignored. Local storage starts each chunk of a
// large Put early; the idempotent sink's merger waits for each piece of
// its runs, so they never reach the disk in one burst.
func Writeback(f *os.File, off, n int64, wait bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	flags := unix.SYNC_FILE_RANGE_WRITE
	if wait {
		flags |= unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SyncFileRange(int(fd), off, n, flags)
	})
}

// writeTwo writes a then b to f with one writev call (continuing after a
// short write), saving a syscall for the 16-byte trailer.
func writeTwo(f *os.File, a, b []byte) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	bufs := [][]byte{a, b}
	var werr error
	cerr := rc.Control(func(fd uintptr) {
		for len(bufs) > 0 {
			n, err := unix.Writev(int(fd), bufs)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				werr = &os.PathError{Op: "writev", Path: f.Name(), Err: err}
				return
			}
			if n == 0 {
				werr = io.ErrShortWrite
				return
			}
			for n > 0 {
				k := min(n, len(bufs[0]))
				bufs[0] = bufs[0][k:]
				n -= k
				if len(bufs[0]) == 0 {
					bufs = bufs[1:]
				}
			}
			for len(bufs) > 0 && len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	})
	if cerr != nil {
		return cerr
	}
	return werr
}
