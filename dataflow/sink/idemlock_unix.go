//go:build unix

package sink

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// errStoreLocked: another process holds the store's lock.
var errStoreLocked = errors.New("locked")

// lockStore takes an exclusive lock on path (creating it), waiting up to
// timeout. The kernel drops it when the process dies, even by SIGKILL, so
// a killed run never blocks its own resume.
func lockStore(path string, timeout time.Duration) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, errStoreLocked
		}
		time.Sleep(10 * time.Millisecond)
	}
}
