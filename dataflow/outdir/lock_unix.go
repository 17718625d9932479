//go:build unix

package outdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Lock takes an exclusive lock on dir (creating it) for as long as
// this process lives or until unlock is called. Two processes writing one
// output directory would publish each other's epochs twice, so a second
// process, a --resume started while the first still runs say, gets
// ErrLocked. The kernel drops the lock when the process dies, even
// by SIGKILL, so a dead run never blocks its own resume.
func Lock(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking output directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("locking output directory %s: %w", dir, err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
