//go:build linux

package sink

import (
	"os"

	"golang.org/x/sys/unix"
)

// writeBack waits until f's pages in [off, off+n) are written to the
// device (not its cache: fsync still makes them durable). See
// pacedFileWriter for why.
func writeBack(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		// Only a pacing hint: a file system without it is still synced.
		_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	})
}
